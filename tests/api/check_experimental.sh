#!/usr/bin/env bash
# tests/api/check_experimental.sh CC INCLUDE_DIR
#
# The stable/experimental split of the public headers (docs/architecture.md, "Public API"):
#   1. every header under INCLUDE_DIR/tensorbox/ refuses to compile without TBX_EXPERIMENTAL,
#      and the refusal is its own #error naming TBX_EXPERIMENTAL (not some other failure);
#   2. with TBX_EXPERIMENTAL defined, each compiles on its own, warning-free (-Wall -Wextra
#      -Wpedantic -Werror, C11), before or after tensorbox.h;
#   3. tensorbox.h alone declares none of the experimental functions (calling one is an
#      implicit declaration, an error in C11 with -Werror).
set -euo pipefail
CC=$1
INC=$2
WORK=$(mktemp -d "${TMPDIR:-/tmp}/tbx-api.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
fail() { echo "check_experimental: FAIL: $*" >&2; exit 1; }
FLAGS=(-std=c11 -Wall -Wextra -Wpedantic -Werror -fsyntax-only -I "$INC")

n=0
for h in "$INC"/tensorbox/*.h; do
  [ -e "$h" ] || continue
  rel=tensorbox/$(basename "$h")
  n=$((n + 1))
  printf '#include <%s>\nint main(void) { return 0; }\n' "$rel" >"$WORK/off.c"
  if "$CC" "${FLAGS[@]}" "$WORK/off.c" >"$WORK/off.log" 2>&1; then
    fail "$rel compiles without TBX_EXPERIMENTAL"
  fi
  grep -q "$rel is experimental API: #define TBX_EXPERIMENTAL" "$WORK/off.log" ||
    fail "$rel failed without TBX_EXPERIMENTAL, but not with its #error:
$(cat "$WORK/off.log")"
  printf '#define TBX_EXPERIMENTAL\n#include <%s>\nint main(void) { return 0; }\n' "$rel" \
    >"$WORK/on.c"
  "$CC" "${FLAGS[@]}" "$WORK/on.c" >"$WORK/on.log" 2>&1 ||
    fail "$rel does not compile with TBX_EXPERIMENTAL:
$(cat "$WORK/on.log")"
  printf '#include <tensorbox.h>\n#define TBX_EXPERIMENTAL\n#include <%s>\nint main(void) { return 0; }\n' \
    "$rel" >"$WORK/after.c"
  "$CC" "${FLAGS[@]}" "$WORK/after.c" >"$WORK/after.log" 2>&1 ||
    fail "$rel does not compile after tensorbox.h:
$(cat "$WORK/after.log")"

  # 3. none of this header's functions is visible through tensorbox.h alone
  for fn in $(grep -oE 'TBX_API[^;(]*\(' "$h" | grep -oE 'tbx_[A-Za-z0-9_]+ *\($' | tr -d ' ('); do
    printf '#include <tensorbox.h>\nint main(void) { (void)&%s; return 0; }\n' "$fn" >"$WORK/stable.c"
    if "$CC" "${FLAGS[@]}" "$WORK/stable.c" >/dev/null 2>&1; then
      fail "$fn (experimental, $rel) is declared by tensorbox.h"
    fi
  done
done
[ "$n" -gt 0 ] || fail "no experimental headers under $INC/tensorbox/"
echo "check_experimental: $n experimental headers: refused without TBX_EXPERIMENTAL, clean with it"
