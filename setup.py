"""Build hook for the optional C extensions; everything else is declared in setup.cfg."""

from setuptools import Extension, setup

# Optional: without a C compiler the install still succeeds, and the pure-Python framing and numpy
# ref reading are used.
setup(ext_modules=[
    Extension("zsarchive.zs.format._framing", ["zsarchive/zs/format/_framing.c"], optional=True),
    Extension("zsarchive.icechunk._refscan", ["zsarchive/icechunk/_refscan.c"], optional=True),
])
