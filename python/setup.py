"""Build of the `tensorbox` Python package: the C extension over libtensorbox.

The library is built by the project's own CMake (../CMakeLists.txt) as the static archive
libtensorbox.a (position-independent, hidden visibility), and the extension links it with the
dependencies CMake found (read from the generated tensorbox.pc.in: Requires.private through
pkg-config, Libs.private as is). Nothing of the library is compiled twice by hand.

  pip install ./python                      # configures and builds a private CMake tree
  TENSORBOX_BUILD_DIR=build pip install ./python
                                            # reuses an existing release build tree (make build):
                                            # only the tensorbox_static target is brought up to date

A sanitizer tree (TBX_SANITIZE=ON) is refused: its objects need the sanitizer runtime.
"""
import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def _run(cmd):
    print("tensorbox build:", " ".join(shlex.quote(str(c)) for c in cmd), flush=True)
    subprocess.run([str(c) for c in cmd], check=True)


def _cache_value(build: Path, key: str) -> str:
    cache = build / "CMakeCache.txt"
    if not cache.exists():
        return ""
    for line in cache.read_text(errors="replace").splitlines():
        if line.startswith(key + ":"):
            return line.split("=", 1)[1].strip()
    return ""


class build_ext_cmake(build_ext):
    def _library_tree(self) -> Path:
        reuse = os.environ.get("TENSORBOX_BUILD_DIR")
        if reuse:
            build = Path(reuse)
            if not build.is_absolute():
                build = ROOT / build
            if not (build / "CMakeCache.txt").exists():
                raise RuntimeError(f"TENSORBOX_BUILD_DIR={reuse}: no configured CMake tree there")
            if _cache_value(build, "TBX_SANITIZE").upper() in ("ON", "1", "TRUE") or \
               _cache_value(build, "TBX_TSAN").upper() in ("ON", "1", "TRUE") or \
               _cache_value(build, "TBX_FUZZ").upper() in ("ON", "1", "TRUE"):
                raise RuntimeError(f"TENSORBOX_BUILD_DIR={reuse} is an instrumented build")
        else:
            build = Path(self.build_temp).resolve() / "libtensorbox"
            if not (build / "CMakeCache.txt").exists():
                cmd = ["cmake", "-S", ROOT, "-B", build, "-DCMAKE_BUILD_TYPE=Release",
                       "-DTBX_BUILD_TESTS=OFF", "-DTBX_BUILD_BENCH=OFF", "-DTBX_BUILD_SHARED=OFF"]
                if shutil.which("ninja"):
                    cmd += ["-G", "Ninja"]
                _run(cmd)
        _run(["cmake", "--build", build, "--target", "tensorbox_static"])
        return build

    @staticmethod
    def _link_flags(build: Path):
        pc = (build / "tensorbox.pc.in").read_text()
        req = re.search(r"^Requires\.private:(.*)$", pc, re.M)
        libs = re.search(r"^Libs\.private:(.*)$", pc, re.M)
        flags = []
        mods = req.group(1).split() if req else []
        if mods:
            out = subprocess.run(["pkg-config", "--libs"] + mods, check=True,
                                 capture_output=True, text=True).stdout
            flags += out.split()
        if libs:
            flags += libs.group(1).split()
        flags.append("-pthread")
        return flags

    def run(self):
        build = self._library_tree()
        lib = build / "libtensorbox.a"
        if not lib.exists():
            raise RuntimeError(f"{lib} was not built")
        flags = self._link_flags(build)
        for ext in self.extensions:
            ext.include_dirs.append(str(ROOT / "include"))
            ext.extra_objects = [str(lib)]
            # build_ext rebuilds only what is older than its inputs: the archive and the
            # public headers are inputs too, or a changed library would not be relinked
            ext.depends = [str(lib)] + sorted(str(h) for h in (ROOT / "include").rglob("*.h"))
            ext.extra_link_args = flags
        super().run()


setup(
    ext_modules=[
        Extension(
            "tensorbox._tensorbox",
            sources=["src/_tensorbox.c"],
            extra_compile_args=["-std=c11", "-Wall", "-Wextra"],
        )
    ],
    cmdclass={"build_ext": build_ext_cmake},
)
