#!/usr/bin/env bash
# scripts/fuzz.sh BUILD_DIR SECONDS [TARGET...] - runs libFuzzer targets (what `make fuzz` does).
#
# For every fuzz/fuzz_<target>.c (or only the TARGETs named), runs BUILD_DIR/fuzz/fuzz_<target>
# for SECONDS on fuzz/corpus/<target> + tests/crashers/<target>. New interesting inputs go to
# BUILD_DIR/corpus-new/<target>/ (scratch; never written into the committed corpus), crashes,
# leaks, timeouts and OOMs (an allocation above FUZZ_MALLOC_LIMIT_MB, default 128, is one)
# to fuzz/artifacts/<target>/. fuzz/<target>.dict is used when present.
#
# To keep a find: copy the crash input to tests/crashers/<target>/ with the fix (see
# tests/crashers/README.md). To grow the committed corpus from the scratch one:
#   BUILD_DIR/fuzz/fuzz_<target> -merge=1 fuzz/corpus/<target> BUILD_DIR/corpus-new/<target>
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:?usage: scripts/fuzz.sh BUILD_DIR SECONDS [TARGET...]}
SECONDS_PER=${2:?usage: scripts/fuzz.sh BUILD_DIR SECONDS [TARGET...]}
shift 2

targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  for src in fuzz/fuzz_*.c; do
    t=$(basename "$src" .c)
    targets+=("${t#fuzz_}")
  done
fi

results=()
bad=0
for t in "${targets[@]}"; do
  bin="$BUILD/fuzz/fuzz_$t"
  if [ ! -x "$bin" ]; then
    echo "fuzz: $bin not built" >&2
    results+=("FAIL  $t: not built")
    bad=1
    continue
  fi
  scratch="$BUILD/corpus-new/$t"
  artifacts="fuzz/artifacts/$t"
  mkdir -p "$scratch" "$artifacts" "fuzz/corpus/$t" "tests/crashers/$t"
  before=$(find "$artifacts" -type f | wc -l)
  # -malloc_limit_mb: one allocation larger than this is a find (an input of at most 64 KiB
  # must not make anything allocate that much: the amplification budget); the targets' own
  # checking allocator also aborts when the library holds more than 2 x input + 64 MiB.
  args=(-max_total_time="$SECONDS_PER" -timeout=10 -rss_limit_mb=2048
        -malloc_limit_mb="${FUZZ_MALLOC_LIMIT_MB:-128}" -max_len=65536
        -print_final_stats=1 -artifact_prefix="$artifacts/")
  [ -f "fuzz/$t.dict" ] && args+=(-dict="fuzz/$t.dict")
  echo "==== fuzz $t for ${SECONDS_PER}s: $bin ${args[*]} $scratch fuzz/corpus/$t tests/crashers/$t"
  ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1} \
    "$bin" "${args[@]}" "$scratch" "fuzz/corpus/$t" "tests/crashers/$t"
  rc=$?
  after=$(find "$artifacts" -type f | wc -l)
  new=$((after - before))
  if [ "$rc" -ne 0 ] || [ "$new" -gt 0 ]; then
    results+=("FAIL  $t: exit $rc, $new new artifact(s) in $artifacts/")
    bad=1
  else
    results+=("PASS  $t: $(find "$scratch" -type f | wc -l) inputs in $scratch")
  fi
done

echo
echo "==== fuzz summary (${SECONDS_PER}s per target)"
printf '  %s\n' "${results[@]}"
if [ "$bad" -ne 0 ]; then
  echo "  reproduce: build-asan/fuzz/replay_<target> fuzz/artifacts/<target>/<file>;"
  echo "  once fixed, keep the input in tests/crashers/<target>/ (tests/crashers/README.md)"
fi
exit "$bad"
