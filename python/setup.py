"""Builds the extension arbiter._arbiter with CMake and installs it with the package
(docs/python.md). The module comes from a build of the repository: the one ARBITER_BUILD_DIR
names (configured by `make` or cmake; only the module's target is brought up to date), or else a
build folder of its own, python/build/cmake, configured with this interpreter. Nothing is
downloaded."""

import glob
import os
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = os.path.dirname(os.path.abspath(__file__))
REPOSITORY = os.path.dirname(HERE)


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        build_dir = os.environ.get("ARBITER_BUILD_DIR")
        if build_dir:
            build_dir = os.path.abspath(build_dir)
        else:
            build_dir = os.path.join(HERE, "build", "cmake")
            if not os.path.exists(os.path.join(build_dir, "CMakeCache.txt")):
                generator = ["-G", "Ninja"] if shutil.which("ninja") else []
                subprocess.check_call(
                    ["cmake", "-S", REPOSITORY, "-B", build_dir, *generator,
                     "-DCMAKE_BUILD_TYPE=Release", "-DARBITER_TESTS=OFF", "-DARBITER_BENCH=OFF",
                     "-DARBITER_PYTHON=ON", f"-DPython3_EXECUTABLE={sys.executable}"])
        jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL", str(os.cpu_count() or 1))
        subprocess.check_call(
            ["cmake", "--build", build_dir, "--target", "arbiter_python", "-j", jobs])
        built = glob.glob(os.path.join(build_dir, "python", "arbiter", "_arbiter*.so"))
        if not built:
            raise RuntimeError(f"{build_dir}: no python/arbiter/_arbiter*.so after the build")
        target = self.get_ext_fullpath(ext.name)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copyfile(max(built, key=os.path.getmtime), target)


setup(
    ext_modules=[Extension("arbiter._arbiter", sources=[])],
    cmdclass={"build_ext": CMakeBuild},
)
