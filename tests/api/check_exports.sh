#!/usr/bin/env bash
# tests/api/check_exports.sh LIBTENSORBOX_SO INCLUDE_DIR
#
# The shared library exports exactly the functions the public headers declare with TBX_API:
# the stable tensorbox.h and the experimental tensorbox/*.h. A symbol exported but declared
# nowhere is a visibility leak (an internal function users could come to depend on); a
# declaration without an export is a broken promise. Run by ctest (api.exports, on the build
# tree) and by tests/install/run.sh (on the installed library).
set -euo pipefail
LIB=$1
INC=$2
fail() { echo "check_exports: FAIL: $*" >&2; exit 1; }
[ -e "$LIB" ] || fail "$LIB does not exist"
[ -f "$INC/tensorbox.h" ] || fail "$INC/tensorbox.h does not exist"
headers=("$INC/tensorbox.h")
for h in "$INC"/tensorbox/*.h; do [ -e "$h" ] && headers+=("$h"); done
[ "${#headers[@]}" -ge 2 ] || fail "no experimental headers under $INC/tensorbox/"

declared=$(cat "${headers[@]}" | grep -oE 'TBX_API[^;(]*\(' | grep -oE 'tbx_[A-Za-z0-9_]+ *\($' |
           tr -d ' (' | sort -u)
exported=$(nm -D --defined-only "$LIB" | awk '$2 ~ /^[TDBRVW]$/ {print $3}' |
           grep -vE '^(_init|_fini|_edata|_end|__bss_start)$' | sort -u)
[ -n "$declared" ] || fail "no TBX_API declaration found in ${headers[*]}"
extra=$(comm -13 <(echo "$declared") <(echo "$exported") || true)
missing=$(comm -23 <(echo "$declared") <(echo "$exported") || true)
if [ -n "$extra" ]; then
  fail "$LIB exports symbols no public header declares (visibility leak):
$(echo "$extra" | sed 's/^/    /')"
fi
if [ -n "$missing" ]; then
  fail "public headers declare functions $LIB does not export:
$(echo "$missing" | sed 's/^/    /')"
fi
nexp=0
for h in "${headers[@]:1}"; do
  n=$(grep -oE 'TBX_API[^;(]*\(' "$h" | wc -l)
  nexp=$((nexp + n))
done
echo "check_exports: $(echo "$exported" | wc -l) symbols exported, all declared TBX_API" \
     "($nexp of them in the experimental headers)"
