"""Build hook for the optional C extensions; everything else is declared in setup.cfg."""

from setuptools import Extension, setup

# Both optional: without a C compiler the install still succeeds, the pure-Python framing is used
# and lzma blocks are made by liblzma (tests/test_lzma2.py checks both encoders).
setup(ext_modules=[
    Extension("zsarchive.zs.format._framing", ["zsarchive/zs/format/_framing.c"], optional=True),
    Extension("zsarchive.zs.format._lzma2", ["zsarchive/zs/format/_lzma2.c"], optional=True,
              extra_compile_args=["-O2"], libraries=["m"]),
])
