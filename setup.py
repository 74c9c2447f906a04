"""Build hook for the optional C extensions; everything else is declared in setup.cfg."""

from setuptools import Extension, setup

# Optional: without a C compiler the install still succeeds, and the pure-Python framing and the numpy
# column decoder do the same work, slower.
setup(ext_modules=[
    Extension("zsarchive.zs.format._framing", ["zsarchive/zs/format/_framing.c"], optional=True),
    Extension("zsarchive.archive.format._columns", ["zsarchive/archive/format/_columns.c"], optional=True),
])
