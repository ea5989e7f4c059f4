#!/usr/bin/env bash
# demo.sh - a short tour of the tbx command-line tool on the sample model.
#
#   examples/demo.sh [path/to/tbx]        (or TBX=path/to/tbx examples/demo.sh)
#
# Steps: info, info --json, validate, cat --as f32, then conversions: each target in
# CONVERSIONS below is written to a temporary directory, validated, and compared with the
# source (a safetensors -> safetensors conversion must be byte-identical; other formats are
# converted back to safetensors and compared tensor by tensor through `tbx cat`).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TBX=${1:-${TBX:-$here/../build/tbx}}
MODEL=${MODEL:-$here/tiny-mlp.safetensors}
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
    "$TBX" convert "$out" "$back" --to safetensors
    if diff <(tensor_digests "$MODEL") <(tensor_digests "$back") >/dev/null; then
      echo "round trip $fmt -> safetensors: every tensor identical"
    else
      echo "round trip $fmt -> safetensors: tensors differ" >&2
      exit 1
    fi
  fi
done

step "done"
