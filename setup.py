"""Build hook for the one optional C extension; everything else is declared in setup.cfg."""

from setuptools import Extension, setup

# optional: without a C compiler the install still succeeds and the pure-Python framing is used.
setup(ext_modules=[Extension("zsarchive.format._framing", ["zsarchive/format/_framing.c"], optional=True)])
