"""Builds the extension kvroute._kvroute with CMake for pip (pyproject.toml).

CMake configures this repository with only the Python module on
(KVROUTE_BUILD_PYTHON), in Release, for the interpreter running pip, and the
built extension is copied where setuptools packs it. The build directory
stays under build/ and is reused by the next install.
"""

import os
import pathlib
import re
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = pathlib.Path(__file__).resolve().parent


def version():
    text = (ROOT / "include" / "kvroute" / "version.hpp").read_text()
    return ".".join(re.search(rf"#define KVROUTE_VERSION_{part} (\d+)", text).group(1)
                    for part in ("MAJOR", "MINOR", "PATCH"))


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        build = pathlib.Path(self.build_temp).resolve() / "cmake"
        layout = build / "layout"
        configure = [
            "cmake", "-S", str(ROOT), "-B", str(build),
            "-DCMAKE_BUILD_TYPE=Release",
            "-DKVROUTE_BUILD_PYTHON=ON",
            "-DKVROUTE_BUILD_TESTS=OFF",
            "-DKVROUTE_BUILD_BENCHMARKS=OFF",
            "-DKVROUTE_BUILD_EXAMPLES=OFF",
            "-DKVROUTE_INSTALL=OFF",
            f"-DPython3_EXECUTABLE={sys.executable}",
            f"-DKVROUTE_PYTHON_DIR={layout}",
        ]
        if shutil.which("ninja") and not (build / "CMakeCache.txt").exists():
            configure += ["-G", "Ninja"]
        subprocess.check_call(configure)
        subprocess.check_call(["cmake", "--build", str(build), "--target", "kvroute_python",
                               "--parallel", str(os.cpu_count() or 1)])
        built = sorted((layout / "kvroute").glob("_kvroute*.so"))
        if not built:
            sys.exit("kvroute: CMake built no extension; is the Python module skipped? "
                     f"(see the messages above, or {build / 'CMakeCache.txt'})")
        target = pathlib.Path(self.get_ext_fullpath(ext.name))
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(built[0], target)


# setuptools' metadata goes under build/ too, not into python/.
(ROOT / "build").mkdir(exist_ok=True)
setup(
    options={"egg_info": {"egg_base": str(ROOT / "build")}},
    version=version(),
    ext_modules=[Extension("kvroute._kvroute", sources=[])],
    cmdclass={"build_ext": CMakeBuild},
)
