#!/usr/bin/env bash
# tests/install/run.sh [BUILD_DIR] - install smoke test.
#
# Installs BUILD_DIR (default: build) into a temporary prefix, then builds tests/install/consumer.c
#   1. with pkg-config, against the shared library and against the static one;
#   2. with a CMake project using find_package(tensorbox CONFIG REQUIRED), against
#      tensorbox::tensorbox and tensorbox::tensorbox_static;
# runs all four (the consumer also calls one experimental function, with TBX_EXPERIMENTAL
# defined), checks which library each one really uses, checks that the shared library exports
# exactly the functions the installed public headers (tensorbox.h, tensorbox/*.h) declare
# (TBX_API) and nothing else, and that the installed tbx runs on the installed shared library.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
BUILD=${1:-build}
CC=${CC:-cc}

PREFIX=$(mktemp -d "${TMPDIR:-/tmp}/tbx-install.XXXXXX")
trap 'rm -rf "$PREFIX"' EXIT
# 1 when the ELF file $1 has a DT_NEEDED entry for libtensorbox, else 0.
needs_tbx() { readelf -d "$1" | awk '/NEEDED/ && /libtensorbox\.so/ {n=1} END {print n+0}'; }
fail() { echo "install-test: FAIL: $*" >&2; exit 1; }
step() { echo "install-test: $*"; }

step "cmake --install $BUILD --prefix $PREFIX"
cmake --install "$BUILD" --prefix "$PREFIX" >"$PREFIX.log" 2>&1 || { cat "$PREFIX.log"; rm -f "$PREFIX.log"; fail "install"; }
rm -f "$PREFIX.log"

for f in include/tensorbox.h include/tensorbox/gguf.h include/tensorbox/ztensor.h \
         include/tensorbox/oinf.h bin/tbx; do
  [ -e "$PREFIX/$f" ] || fail "$f not installed"
done
LIBDIR=$(dirname "$(find "$PREFIX" -name libtensorbox.a | head -n1)")
[ -f "$LIBDIR/libtensorbox.a" ] || fail "libtensorbox.a not installed"
[ -e "$LIBDIR/libtensorbox.so" ] || fail "libtensorbox.so not installed"
[ -e "$LIBDIR/libtensorbox.so.0" ] || fail "libtensorbox.so.0 (SONAME link) not installed"
[ -f "$LIBDIR/pkgconfig/tensorbox.pc" ] || fail "tensorbox.pc not installed"
[ -f "$LIBDIR/cmake/tensorbox/tensorboxConfig.cmake" ] || fail "tensorboxConfig.cmake not installed"
[ -f "$LIBDIR/cmake/tensorbox/tensorboxConfigVersion.cmake" ] || fail "version file not installed"
# tbx links the shared library like any user, and finds the installed one ($ORIGIN rpath).
[ "$(needs_tbx "$PREFIX/bin/tbx")" = 1 ] || fail "the installed tbx does not need libtensorbox.so.0"
tbxlib=$(ldd "$PREFIX/bin/tbx" | awk '/libtensorbox\.so/ {print $3}')
[ "$(realpath "$tbxlib")" = "$(realpath "$LIBDIR/libtensorbox.so.0")" ] ||
  fail "the installed tbx loads '$tbxlib', not $LIBDIR/libtensorbox.so.0"
"$PREFIX/bin/tbx" --version >/dev/null || fail "'$PREFIX/bin/tbx --version' did not run"

soname=$(readelf -d "$LIBDIR/libtensorbox.so" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[ "$soname" = "libtensorbox.so.0" ] || fail "SONAME is '$soname', expected libtensorbox.so.0"

# --- exported symbols == TBX_API declarations of the installed headers ----------------------
bash tests/api/check_exports.sh "$LIBDIR/libtensorbox.so" "$PREFIX/include" ||
  fail "exported symbols"
step "exports checked against the installed headers"

# --- pkg-config ------------------------------------------------------------------------------
export PKG_CONFIG_PATH="$LIBDIR/pkgconfig"
pkg-config --exists --print-errors tensorbox || fail "pkg-config cannot use tensorbox.pc"
pcver=$(pkg-config --modversion tensorbox)
hver=$(sed -n 's/^#define TBX_VERSION_STRING "\(.*\)"/\1/p' include/tensorbox.h)
[ "$pcver" = "$hver" ] || fail "tensorbox.pc version $pcver != header $hver"
OUT="$PREFIX/out"
mkdir -p "$OUT"

step "pkg-config, shared: $(pkg-config --cflags --libs tensorbox)"
# shellcheck disable=SC2046
$CC -std=c11 -Wall -Wextra -Werror -o "$OUT/pc_shared" tests/install/consumer.c \
  $(pkg-config --cflags --libs tensorbox) -Wl,-rpath,"$LIBDIR" || fail "pkg-config shared build"
[ "$(needs_tbx "$OUT/pc_shared")" = 1 ] || fail "pc_shared does not need libtensorbox.so.0"
"$OUT/pc_shared" || fail "pc_shared did not run"

static_libs=$(pkg-config --static --libs tensorbox | sed 's/-ltensorbox\b/-l:libtensorbox.a/')
step "pkg-config, static: $(pkg-config --cflags tensorbox) $static_libs"
# shellcheck disable=SC2046,SC2086
$CC -std=c11 -Wall -Wextra -Werror -o "$OUT/pc_static" tests/install/consumer.c \
  $(pkg-config --cflags tensorbox) $static_libs || fail "pkg-config static build"
[ "$(needs_tbx "$OUT/pc_static")" = 0 ] || fail "pc_static needs libtensorbox.so"
"$OUT/pc_static" || fail "pc_static did not run"

# --- CMake find_package ----------------------------------------------------------------------
step "cmake find_package(tensorbox CONFIG REQUIRED)"
unset PKG_CONFIG_PATH
cmake -S tests/install -B "$OUT/cmake" -G Ninja -DCMAKE_PREFIX_PATH="$PREFIX" \
  -DCMAKE_C_COMPILER="$CC" -DCMAKE_BUILD_TYPE=Release >"$OUT/cmake.log" 2>&1 ||
  { cat "$OUT/cmake.log"; fail "consumer project configure"; }
cmake --build "$OUT/cmake" >>"$OUT/cmake.log" 2>&1 || { cat "$OUT/cmake.log"; fail "consumer project build"; }
[ "$(needs_tbx "$OUT/cmake/consumer_shared")" = 1 ] ||
  fail "consumer_shared does not need libtensorbox.so.0"
[ "$(needs_tbx "$OUT/cmake/consumer_static")" = 0 ] || fail "consumer_static needs libtensorbox.so"
"$OUT/cmake/consumer_shared" || fail "consumer_shared did not run"
"$OUT/cmake/consumer_static" || fail "consumer_static did not run"

# A package asking for another major version must not be found.
mkdir -p "$OUT/major"
cat >"$OUT/major/CMakeLists.txt" <<'CM'
cmake_minimum_required(VERSION 3.25)
project(major_check LANGUAGES C)
find_package(tensorbox 1 CONFIG QUIET)
if(tensorbox_FOUND)
  message(FATAL_ERROR "tensorbox 0.x satisfied a request for version 1")
endif()
CM
cmake -S "$OUT/major" -B "$OUT/major/b" -DCMAKE_PREFIX_PATH="$PREFIX" >"$OUT/major.log" 2>&1 ||
  { cat "$OUT/major.log"; fail "SameMajorVersion check"; }

echo "install-test: OK (pkg-config shared+static, CMake shared+static, exports, SONAME, version, tbx)"
