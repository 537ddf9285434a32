"""Builds the rlx Python package: one C extension (rlx/_rlx.c, the CPython
and NumPy C APIs over librlx's include/rlx.h) and the Python layer.

Where librlx comes from: RLX_LIB_DIR (the folder holding librlx.so, default
../build beside this file) and RLX_INCLUDE_DIR (default ../include).  The
library is copied into the package and found through an $ORIGIN rpath, so
an installed package needs nothing else from the build tree.

Offline, with Debian's Python, setuptools and NumPy:
    python3 -m venv --system-site-packages /tmp/venv
    /tmp/venv/bin/pip install --no-build-isolation --no-index ./python
or, in place:  python3 setup.py build_ext --inplace
"""
import glob
import os
import shutil

import numpy
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

here = os.path.dirname(os.path.abspath(__file__))
lib_dir = os.path.abspath(os.environ.get("RLX_LIB_DIR", os.path.join(here, "..", "build")))
inc_dir = os.path.abspath(os.environ.get("RLX_INCLUDE_DIR", os.path.join(here, "..", "include")))


class build_ext_with_lib(build_ext):
    """Copies librlx.so.N next to the extension it links."""

    def run(self):
        libs = sorted(glob.glob(os.path.join(lib_dir, "librlx.so.*")), key=len)
        if not libs:
            raise SystemExit(f"librlx.so not found in {lib_dir}: build RLX first (cmake) or set RLX_LIB_DIR")
        super().run()
        soname = libs[0]  # librlx.so.0 (the shortest name: the soname link)
        for ext in self.extensions:
            dest = os.path.dirname(self.get_ext_fullpath(ext.name))
            os.makedirs(dest, exist_ok=True)
            shutil.copy2(os.path.realpath(soname), os.path.join(dest, os.path.basename(soname)))


ext = Extension(
    "rlx._rlx",
    sources=["rlx/_rlx.c"],
    include_dirs=[inc_dir, numpy.get_include()],
    library_dirs=[lib_dir],
    libraries=["rlx"],
    runtime_library_dirs=["$ORIGIN"],
    extra_compile_args=["-Wall", "-Wextra", "-std=gnu11"],
)

setup(
    name="rlx",
    version="0.1.0",
    description="Python bindings of RLX, a small ML compiler and runtime",
    packages=["rlx"],
    package_data={"rlx": ["*.pyi", "py.typed"]},
    ext_modules=[ext],
    cmdclass={"build_ext": build_ext_with_lib},
    python_requires=">=3.9",
    install_requires=["numpy"],
)
