#!/usr/bin/env bash
# Runs every benchmark of bench/ (builds nothing: build first with cmake): safetensors, GGUF,
# zTensor, OINF, MCF, each against its reference implementation, medians and ratios.
#
#   bench/run_all.sh [extra args for the bench scripts, e.g. --reps 5]
#
# Environment: TBX_BENCH_READ  the bench_read binary (default: build/bench/bench_read, or
#                              build/bench_read when that is where the build put it)
#              PYTHON          the Python with the peers installed (default: .venv/bin/python)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

PYTHON=${PYTHON:-.venv/bin/python}
if [ -z "${TBX_BENCH_READ:-}" ]; then
  if [ -x build/bench/bench_read ]; then
    TBX_BENCH_READ=build/bench/bench_read
  else
    TBX_BENCH_READ=build/bench_read
  fi
fi
export TBX_BENCH_READ
if [ ! -x "$TBX_BENCH_READ" ]; then
  echo "run_all.sh: $TBX_BENCH_READ not found; build it first (cmake --build build)" >&2
  exit 1
fi
if [ ! -x "$PYTHON" ]; then
  echo "run_all.sh: $PYTHON not found (run scripts/bootstrap.sh)" >&2
  exit 1
fi

echo "== safetensors: tensorbox vs safetensors vs plain read =="
"$PYTHON" bench/bench_safetensors.py --bench-read "$TBX_BENCH_READ" "$@"

echo
echo "== gguf: header parse, dequantization, quantization vs gguf-py =="
"$PYTHON" bench/bench_gguf.py "$@"

echo
echo "== ztensor: read/write raw, zstd, digests vs ztensor 1.1.1 =="
"$PYTHON" bench/bench_ztensor.py --bench-read "$TBX_BENCH_READ" "$@"

echo
echo "== oinf: read-all and verify vs openinfer-oinf =="
"$PYTHON" bench/bench_oinf.py --bench-read "$TBX_BENCH_READ" "$@"

echo
echo "== python: the tensorbox package vs safetensors / gguf-py (pip install ./python first) =="
"$PYTHON" bench/bench_python.py "$@"

echo
echo "== mcf: read vs plain read, q/k kernels (dequant vs memcpy, quantize, RMSE), mantle when \$MANTLE is set =="
"$PYTHON" bench/bench_mcf.py "$@"
