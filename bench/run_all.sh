#!/usr/bin/env bash
# Runs every benchmark of bench/ (builds nothing: build first with cmake): safetensors, GGUF,
# the ggml block kernels (against ggml's own libggml-base, loaded by bench_ggml_quant),
# zTensor, OINF, MCF, each against its reference implementation, medians and ratios.
#
#   bench/run_all.sh [extra args for the bench scripts, e.g. --reps 5]
#
# Environment: TBX_BENCH_READ  the bench_read binary (default: build/bench/bench_read, or
#                              build/bench_read when that is where the build put it)
#              PYTHON          the Python with the peers installed (default: .venv/bin/python)
#              TBX_BENCH_BIN   the folder of the C bench programs (default: that of bench_read)
#              TBX_GGML_LIB    ggml's libggml-base.so, the peer of bench_ggml_quant (default: the
#                              one llama-cpp-python installed for $PYTHON; missing: an error)
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
echo "== ggml block kernels: tensorbox vs ggml's own (libggml-base), dequantize and quantize =="
TBX_BENCH_BIN=${TBX_BENCH_BIN:-$(dirname "$TBX_BENCH_READ")}
if [ -z "${TBX_GGML_LIB:-}" ]; then
  # llama_cpp's folder without importing it (find_spec does not run the package)
  TBX_GGML_LIB=$("$PYTHON" -c 'import importlib.util, os
s = importlib.util.find_spec("llama_cpp")
print(os.path.join(os.path.dirname(s.origin), "lib", "libggml-base.so") if s else "")')
fi
if [ -z "$TBX_GGML_LIB" ] || [ ! -f "$TBX_GGML_LIB" ]; then
  echo "run_all.sh: ggml's libggml-base.so not found (llama-cpp-python in $PYTHON, or set" \
       "TBX_GGML_LIB): bench_ggml_quant has no peer" >&2
  exit 1
fi
"$TBX_BENCH_BIN/bench_ggml_quant" --ggml-lib "$TBX_GGML_LIB"

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

echo
echo "== gguf -> hf: q4_K GGUF to a Hugging Face bf16 directory vs gguf-py's dequantize-and-save =="
"$PYTHON" bench/bench_gguf_hf.py "$@"

echo
echo "== diff: tbx diff of two 1 GiB models vs cat of both, warm and cold page cache =="
"$PYTHON" bench/bench_diff.py "$@"

echo
echo "== remote: reads over HTTP vs curl and the local disk, tbx info bytes, hf:// -> q4_K GGUF vs download-then-convert (nginx) =="
"$PYTHON" bench/bench_remote.py "$@"
