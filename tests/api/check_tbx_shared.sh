#!/usr/bin/env bash
# tests/api/check_tbx_shared.sh TBX LIBTENSORBOX_SO
#
# tbx is a user of the library like any other (docs/architecture.md, "Public API"): it needs
# libtensorbox.so.0, loads the given one (from the build tree: the build RPATH), carries no
# copy of the library's code (no tbx_* function defined in the executable), and runs.
set -euo pipefail
TBX=$1
LIB=$2
fail() { echo "check_tbx_shared: FAIL: $*" >&2; exit 1; }
readelf -d "$TBX" | grep -q 'NEEDED.*\[libtensorbox\.so\.0\]' ||
  fail "$TBX does not need libtensorbox.so.0"
loaded=$(ldd "$TBX" | awk '/libtensorbox\.so/ {print $3}')
[ -n "$loaded" ] && [ "$(realpath "$loaded")" = "$(realpath "$LIB")" ] ||
  fail "$TBX loads '$loaded', not $LIB"
own=$(nm --defined-only "$TBX" | awk '$2 ~ /^[TtDdBbRr]$/ && $3 ~ /^tbx_/ {print $3}')
[ -z "$own" ] || fail "$TBX defines library functions itself (linked statically?): $(echo $own | head -c 300)"
"$TBX" --version >/dev/null || fail "$TBX --version did not run"
echo "check_tbx_shared: $TBX uses $(realpath "$LIB")"
