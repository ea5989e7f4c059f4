#!/bin/sh
# Regenerates tests/data/embd/'s embd-legacy files and origin-verdicts.json with cpp_embedder's
# own code. Run by hand, never by CI (CI cannot fetch the origin, which no package registry
# holds). Nothing of the origin is copied into this repository: its sources are compiled into a
# scratch directory.
#   ORIGIN_SRC  a checkout of github.com/a-bekheet/vectorized-physics-citations, whose
#               cpp_embedder/ directory is the origin (default /work/embd-origin-src); its git
#               history must reach 613f9bb (the converter before the transposition)
#   TBX         the tbx to test (default: build/tbx of this repository)
#   PYTHON      a Python with numpy, safetensors and tokenizers (default: .venv/bin/python)
# Extra arguments go to gen.py (e.g. --minilm DIR: all-MiniLM-L6-v2, figures and the runtime).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
ORIGIN_SRC=$(cd "${ORIGIN_SRC:-/work/embd-origin-src}" && pwd)
TBX=${TBX:-$repo/build/tbx}
PYTHON=${PYTHON:-$repo/.venv/bin/python}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
c=$ORIGIN_SRC/cpp_embedder
# the origin's loader, model and tokenizer sources with this directory's driver program
${CXX:-g++} -std=c++17 -O2 -I"$c/include" -o "$tmp/loader_check" "$here/loader_check.cpp" \
    "$c/src/model/weights.cpp" "$c/src/model/embedder.cpp" "$c/src/model/layers.cpp" \
    "$c/src/math/tensor.cpp" "$c/src/math/ops.cpp" "$c/src/tokenizer/tokenizer.cpp" \
    "$c/src/tokenizer/vocab.cpp"
"$PYTHON" "$here/gen.py" --tbx "$TBX" --loader "$tmp/loader_check" --origin "$ORIGIN_SRC" \
    --out "$repo/tests/data/embd" "$@"
