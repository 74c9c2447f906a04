"""Build hook for the optional C extensions; everything else is declared in setup.cfg."""

from setuptools import Extension, setup

# Optional: without a C compiler the install still succeeds, and the pure-Python framing, the numpy
# column decoder and the numpy manifest ref reader do the same work, slower.
setup(
    ext_modules=[
        Extension("zsarchive.zs.format._framing", ["zsarchive/zs/format/_framing.c"], optional=True),
        Extension("zsarchive.archive.format._columns", ["zsarchive/archive/format/_columns.c"], optional=True),
        Extension("zsarchive.icechunk.manifest._refscan", ["zsarchive/icechunk/manifest/_refscan.c"], optional=True),
    ]
)
