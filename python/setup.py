"""Builds libtdacl with CMake from the repository this folder sits in and ships it inside the
package (`pip install ./python`).  TDACL_LIBRARY=/path/libtdacl.so skips the build and ships
that file instead."""
import os
import shutil
import subprocess

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


class BuildWithLibrary(build_py):
    def run(self):
        lib = os.environ.get("TDACL_LIBRARY")
        if not lib:
            build = os.path.join(ROOT, "build-python")
            subprocess.check_call(["cmake", "-S", ROOT, "-B", build, "-DCMAKE_BUILD_TYPE=Release", "-DTDACL_BUILD_TESTS=OFF", "-DTDACL_BUILD_BENCH=OFF"])
            subprocess.check_call(["cmake", "--build", build, "--target", "tdacl", "-j", str(os.cpu_count() or 2)])
            lib = os.path.join(build, "libtdacl.so")
        super().run()
        shutil.copyfile(os.path.realpath(lib), os.path.join(self.build_lib, "tdacl", "libtdacl.so"))


setup(cmdclass={"build_py": BuildWithLibrary})
