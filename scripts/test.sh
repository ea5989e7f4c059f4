#!/usr/bin/env bash
# scripts/test.sh - what `make test` (and so CI) runs. Every step runs even when an earlier one
# failed (unless it needs that step's output); a summary with timings closes the run, and the
# exit status is non-zero when any step failed.
#
#   1. bootstrap          scripts/bootstrap.sh --llama --torch (Debian packages, .venv, llama.cpp,
#                         torch + transformers)
#   2. build              build/ : RelWithDebInfo, -Werror, default compiler
#   3. ctest build        unit tests + fuzz corpus/crasher replays
#   4. asan build         build-asan/ : clang, ASan + UBSan, Debug
#   5. ctest asan         the same tests under the sanitizers
#   6. tsan               build-tsan/ : clang, ThreadSanitizer; the tests labelled "threads"
#   7. install            tests/install/run.sh (pkg-config and CMake consumers)
#   8. python pkg         pip-installs the Python package (python/) into .venv, linking the
#                         libtensorbox.a of build/ (no second library build), and runs
#                         tests/python/test_py_*.py (its tests; one installs it into a fresh venv)
#   9. python             pytest tests/python (the other files) with TBX=build/tbx,
#                         TBX_ASAN=build-asan/tbx (collecting no test at all is a failure)
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
MAKE=${MAKE:-make}
export TBX_BOOTSTRAPPED=1 # for the make sub-targets: bootstrap runs once, as step 1
export KEEP_GOING=1       # a target that fails to build does not stop the others

LOGDIR=$(mktemp -d "${TMPDIR:-/tmp}/tbx-test.XXXXXX")
trap 'rm -rf "$LOGDIR"' EXIT

names=() results=() times=() details=()
declare -A status

now() { date +%s.%N; }

# run NAME DETAIL_REGEX CMD... : runs CMD with its output shown and logged; records the result.
run() {
  local name=$1 regex=$2
  shift 2
  local log="$LOGDIR/${#names[@]}.log"
  echo
  echo "======== [$name] $*"
  local t0 t1 rc
  t0=$(now)
  "$@" 2>&1 | tee "$log"
  rc=${PIPESTATUS[0]}
  t1=$(now)
  local detail=""
  if [ -n "$regex" ]; then
    detail=$(grep -E "$regex" "$log" | tail -n1 | sed -E 's/^=+ //; s/ =+$//' | cut -c1-70)
  fi
  names+=("$name")
  times+=("$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.1f", b - a}')")
  if [ "$rc" -eq 0 ]; then results+=(PASS); status[$name]=PASS
  else results+=(FAIL); status[$name]=FAIL; detail="exit $rc${detail:+; $detail}"; fi
  details+=("$detail")
  return 0
}

skip() {
  names+=("$1"); results+=(SKIP); times+=("0.0"); details+=("$2"); status[$1]=SKIP
  echo
  echo "======== [$1] skipped: $2"
}

pytest_step() {
  if [ ! -d tests/python ]; then
    echo "python: tests/python does not exist"
    return 1
  fi
  TBX="$ROOT/build/tbx" TBX_ASAN="$ROOT/build-asan/tbx" .venv/bin/python -m pytest -q tests/python \
    --ignore-glob='tests/python/test_py_*.py'
  local rc=$?
  if [ "$rc" -eq 5 ]; then
    echo "python: pytest collected no tests (exit 5): a suite that runs nothing is a defect"
  fi
  return "$rc"
}

# The Python package: installed into .venv from build/'s static library (TENSORBOX_BUILD_DIR),
# then its tests.
pypkg_step() {
  TENSORBOX_BUILD_DIR="$ROOT/build" .venv/bin/python -m pip install -q --disable-pip-version-check \
    --no-build-isolation --no-deps --force-reinstall ./python || {
    echo "python pkg: pip install ./python failed"
    return 1
  }
  TBX="$ROOT/build/tbx" TBX_ASAN="$ROOT/build-asan/tbx" .venv/bin/python -m pytest -q \
    tests/python/test_py_*.py
}

T0=$(now)

run "bootstrap" "" scripts/bootstrap.sh --llama --torch  # llama.cpp, torch: once, cached in .venv
run "build" "FAILED:|error:" "$MAKE" --no-print-directory build

# After a failed build the tests whose programs were built still run (ctest reports the others
# as "Not Run"), so one broken file does not hide the state of everything else.
if [ -f build/CTestTestfile.cmake ]; then
  run "ctest build" "tests passed|No tests were found" \
    ctest --test-dir build --output-on-failure -j2 --no-tests=error
else
  skip "ctest build" "build/ not configured"
fi

run "asan build" "FAILED:|error:" "$MAKE" --no-print-directory asan-build
if [ -f build-asan/CTestTestfile.cmake ]; then
  run "ctest asan" "tests passed|No tests were found" \
    ctest --test-dir build-asan --output-on-failure -j2 --no-tests=error
else
  skip "ctest asan" "build-asan/ not configured"
fi

run "tsan" "tests passed|No tests were found|error:" "$MAKE" --no-print-directory tsan

if [ "${status[build]}" = PASS ]; then
  run "install" "install-test: (OK|FAIL)" tests/install/run.sh build
else
  skip "install" "build failed"
fi
if [ -f build/libtensorbox.a ] && [ -x build/tbx ]; then
  run "python pkg" "passed|failed|error|no tests ran|collected" pypkg_step
else
  skip "python pkg" "no build/libtensorbox.a"
fi
if [ -x build/tbx ]; then
  run "python" "passed|failed|error|no tests ran|collected" pytest_step
else
  skip "python" "no build/tbx"
fi

T1=$(now)
npass=0 nfail=0
echo
echo "==================================== make test summary ===================================="
for i in "${!names[@]}"; do
  printf '  %-4s  %-12s %7ss   %s\n' "${results[$i]}" "${names[$i]}" "${times[$i]}" "${details[$i]}"
  case ${results[$i]} in PASS) npass=$((npass + 1)) ;; *) nfail=$((nfail + 1)) ;; esac
done
printf '  total wall time %.1fs\n' "$(awk -v a="$T0" -v b="$T1" 'BEGIN {print b - a}')"
echo "==========================================================================================="
echo "steps: $npass passed, $nfail failed"
[ "$nfail" -eq 0 ]
