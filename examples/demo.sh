#!/usr/bin/env bash
# demo.sh - a short tour of the tbx command-line tool on the sample model.
#
#   examples/demo.sh [path/to/tbx]        (or TBX=path/to/tbx examples/demo.sh)
#
# Steps: info, info --json, validate, cat --as f32, then conversions: each target in
# CONVERSIONS below is written to a temporary directory, validated, and compared with the
# source (a safetensors -> safetensors conversion must be byte-identical; other formats are
# converted back to safetensors and compared tensor by tensor through `tbx cat`).
# Then the main job: a Hugging Face model directory (examples/tiny-embedder, a toy
# sentence-transformers model) to the files runtimes load: a GGUF for llama.cpp (loaded and run
# by llama-cpp-python from .venv when it is already built there: `make test` builds it once;
# the demo never builds it), an EMBD .weights and an MCF.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TBX=${1:-${TBX:-$here/../build/tbx}}
MODEL=${MODEL:-$here/tiny-mlp.safetensors}
HF_DIR=${HF_DIR:-$here/tiny-embedder}
PY=${PY:-$here/../.venv/bin/python}
TENSOR=${TENSOR:-layers.0.norm.weight}

# Conversion targets: "format:extension[:extra convert options]". To show a new format, add one
# entry here. OINF strings are limited to [A-Za-z0-9._-], so the sample's free-text description
# cannot be stored: the conversion refuses (lossless by default) unless dropping is allowed.
CONVERSIONS=(
  "safetensors:safetensors"
  "gguf:gguf"
  "ztensor:zt"
  "ztensor:zt:--compress 3 --digest sha256"
  "oinf:oinf:--drop-meta"
  "mcf:mcf"
  "gguf:gguf:--quant q8_0"
)

if [ ! -x "$TBX" ]; then
  echo "demo.sh: tbx binary not found at $TBX (pass it as \$1 or set TBX)" >&2
  exit 2
fi
if [ ! -f "$MODEL" ]; then
  echo "demo.sh: sample model $MODEL missing (run: .venv/bin/python examples/make_examples.py)" >&2
  exit 2
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/tbx-demo.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

step() { printf '\n==> %s\n' "$*"; }

step "tbx --version"
"$TBX" --version

step "tbx info $(basename "$MODEL")"
"$TBX" info "$MODEL"

step "tbx info --json | head"
# (through a file: a pipe closed early by head would kill tbx with SIGPIPE under pipefail)
"$TBX" info "$MODEL" --json >"$tmp/info.json"
head -n 15 "$tmp/info.json"

step "tbx validate"
"$TBX" validate "$MODEL"

step "tbx cat $TENSOR --as f32 | od -A d -t f4 | head"
"$TBX" cat "$MODEL" "$TENSOR" --as f32 >"$tmp/values.f32"
od -A d -t f4 -N 64 "$tmp/values.f32"
echo "($(wc -c <"$tmp/values.f32") bytes of little-endian float32)"

# Lists "name<TAB>sha256 of the raw bytes" for every tensor of a file.
tensor_digests() {
  local file=$1 names
  names=$("$TBX" info "$file" --json | python3 -c \
    'import json,sys; [print(t["name"]) for t in json.load(sys.stdin)["tensors"]]')
  while IFS= read -r n; do
    printf '%s\t%s\n' "$n" "$("$TBX" cat "$file" "$n" | sha256sum | cut -d' ' -f1)"
  done <<<"$names" | sort
}

nconv=0
for entry in "${CONVERSIONS[@]}"; do
  IFS=: read -r fmt ext opts <<<"$entry"
  read -r -a extra <<<"${opts:-}"
  out="$tmp/converted-$((++nconv)).$ext"
  step "tbx convert -> $fmt ($(basename "$out"))${opts:+ $opts}"
  "$TBX" convert "$MODEL" "$out" --to "$fmt" ${extra[@]+"${extra[@]}"}
  ls -l "$out" | awk '{print $5 " bytes"}'
  "$TBX" validate "$out"
  if [[ " ${extra[*]-} " == *" --quant "* ]]; then
    "$TBX" info "$out" | sed -n '/NAME/,$p' | head -6
    echo "(2-D float tensors quantized on request; the rest copied unchanged)"
  elif [ "$fmt" = safetensors ]; then
    cmp "$MODEL" "$out"
    echo "byte-identical to the source"
  else
    back="$tmp/back-$nconv.safetensors"
    "$TBX" convert "$out" "$back" --to safetensors --drop-meta  # tensors are compared
    if diff <(tensor_digests "$MODEL") <(tensor_digests "$back") >/dev/null; then
      echo "round trip $fmt -> safetensors: every tensor identical"
    else
      echo "round trip $fmt -> safetensors: tensors differ" >&2
      exit 1
    fi
  fi
done

step "Hugging Face directory: tbx info $(basename "$HF_DIR")/"
"$TBX" info "$HF_DIR" | sed -n '1,/^metadata/p'

step "tbx convert $(basename "$HF_DIR")/ model.gguf (for llama.cpp)"
"$TBX" convert "$HF_DIR" "$tmp/model.gguf"
"$TBX" validate "$tmp/model.gguf"
"$TBX" info "$tmp/model.gguf" | grep -E 'general.architecture|bert.pooling_type|tokenizer.ggml.model'
if "$PY" -c 'import llama_cpp' 2>/dev/null; then
  "$PY" - "$tmp/model.gguf" <<'PYEOF'
import sys
from llama_cpp import Llama
m = Llama(model_path=sys.argv[1], embedding=True, verbose=False)
text = "tensorbox converts model files."
v = m.embed(text)
print(f"llama.cpp: {text!r} -> tokens {m.tokenize(text.encode())}, embedding of {len(v)} "
      f"values starting {[round(x, 4) for x in v[:4]]}")
PYEOF
else
  echo "(llama.cpp not built yet, so not run here: \`make test\` builds it into .venv once, ~8 min)"
fi

step "tbx convert $(basename "$HF_DIR")/ model-q4k.gguf --quant q4_k"
"$TBX" convert "$HF_DIR" "$tmp/model-q4k.gguf" --quant q4_k
"$TBX" validate "$tmp/model-q4k.gguf"

step "tbx convert $(basename "$HF_DIR")/ model.weights (EMBD, with vocabulary and CRC-32s)"
"$TBX" convert "$HF_DIR" "$tmp/model.weights"
"$TBX" validate "$tmp/model.weights"
"$TBX" info "$tmp/model.weights" | grep -E '^(format|header|vocab):' || true

step "tbx convert $(basename "$HF_DIR")/ model.mcf (mantle's container)"
"$TBX" convert "$HF_DIR" "$tmp/model.mcf" --drop-sections
"$TBX" validate "$tmp/model.mcf"

step "done"
