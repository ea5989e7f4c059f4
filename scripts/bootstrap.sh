#!/usr/bin/env bash
# Installs what tensorbox needs to build and test, when it is missing.
# Idempotent and quick when everything is present.
#
#   scripts/bootstrap.sh                 Debian packages + .venv with the Python peers
#                                        (`make build`, `make bootstrap`, ...)
#   scripts/bootstrap.sh --system-only   Debian packages only (`make demo`: it needs no peer)
#   scripts/bootstrap.sh --llama         also llama.cpp (llama-cpp-python, compiled from source
#                                        once, ~8 minutes on two idle cores, then cached in
#                                        .venv): `make test` (scripts/test.sh) asks for it
#   scripts/bootstrap.sh --torch         also PyPI torch (CPU use of the default wheel, with its
#                                        nvidia-* dependencies: ~2.8 GB, once, cached in .venv)
#                                        and transformers, pinned in python/requirements-torch.txt:
#                                        the reference runtime of tests/python/test_hf_runtime.py
#                                        and what llama.cpp's convert_hf_to_gguf.py runs on;
#                                        `make test` asks for it, `make demo` never does
set -euo pipefail
cd "$(dirname "$0")/.."

WANT_PEERS=1 WANT_LLAMA=0 WANT_TORCH=0
for arg in "$@"; do
  case $arg in
    --system-only) WANT_PEERS=0 ;;
    --llama) WANT_LLAMA=1 ;;
    --torch) WANT_TORCH=1 ;;
    *) echo "bootstrap: unknown argument '$arg' (--system-only, --llama, --torch)" >&2; exit 2 ;;
  esac
done

DEB_PKGS=(cmake ninja-build pkg-config clang libclang-rt-14-dev
          libzstd-dev libjansson-dev libcbor-dev libdeflate-dev libssl-dev zlib1g-dev libzip-dev
          libcurl4-openssl-dev nginx-light
          python3-venv time binutils g++)
missing=()
for p in "${DEB_PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "bootstrap: installing Debian packages: ${missing[*]}" >&2
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

[ "$WANT_PEERS" -eq 1 ] || exit 0

# Python peers in a project-local virtual environment.
PY=${PYTHON:-python3}
REQ=python/requirements-dev.txt
STAMP=.venv/.requirements.stamp
if [ ! -x .venv/bin/python ]; then
  echo "bootstrap: creating .venv" >&2
  "$PY" -m venv .venv
fi
if [ ! -f "$STAMP" ] || ! cmp -s "$REQ" "$STAMP"; then
  echo "bootstrap: installing Python peers from $REQ" >&2
  .venv/bin/python -m pip install -q --disable-pip-version-check -r "$REQ"
  .venv/bin/python -m pip install -q --disable-pip-version-check --no-deps \
    -r python/requirements-nodeps.txt
  cp "$REQ" "$STAMP"
fi

# gofakes3, an S3-compatible object store for tests/python/test_remote.py: built once from the Go
# module proxy into .cache/s3/ (ignored by git; its code is never part of this repository), and
# again when its pin changes.
GOFAKES3_PIN=v1.2.0
if [ ! -x .cache/s3/gofakes3 ] || [ "$(cat .cache/s3/.pin 2>/dev/null)" != "$GOFAKES3_PIN" ]; then
  GO=$(command -v go || echo /usr/local/go/bin/go)
  if [ -x "$GO" ]; then
    echo "bootstrap: building gofakes3 $GOFAKES3_PIN into .cache/s3" >&2
    mkdir -p .cache/s3
    GOBIN="$PWD/.cache/s3" nice "$GO" install "github.com/johannesboyne/gofakes3/cmd/gofakes3@$GOFAKES3_PIN" &&
      echo "$GOFAKES3_PIN" > .cache/s3/.pin
  else
    echo "bootstrap: no Go toolchain: gofakes3 not built (tests/python/test_remote.py's S3 test fails)" >&2
  fi
fi

# torch and transformers (only with --torch: make test): installed when one of the pins of
# python/requirements-torch.txt is missing, at another version, or does not import; otherwise
# nothing is asked of PyPI. torch comes from PyPI (its default wheel, CUDA libraries included,
# used here on the CPU): download.pytorch.org's CPU-only index is not one of the registries
# this project may assume.
if [ "$WANT_TORCH" -eq 1 ]; then
  TORCH_REQ=python/requirements-torch.txt
  if ! .venv/bin/python - "$TORCH_REQ" >/dev/null 2>&1 <<'PYEOF'
import importlib, importlib.metadata, re, sys
for line in open(sys.argv[1]):
    m = re.match(r"^([A-Za-z0-9_.-]+)==(\S+)", line)
    if m:
        if importlib.metadata.version(m.group(1)) != m.group(2):
            sys.exit(1)
for mod in ("torch", "transformers", "tokenizers"):
    importlib.import_module(mod)
PYEOF
  then
    echo "bootstrap: installing torch and transformers from $TORCH_REQ (~2.8 GB, once)" >&2
    .venv/bin/python -m pip install -q --disable-pip-version-check -r "$TORCH_REQ"
  fi
fi

# llama.cpp (PyPI llama-cpp-python) for the Hugging Face -> GGUF tests: compiled from source, CPU
# backend, portable (no -march=native), without BLAS/OpenMP; only when asked for (--llama: make
# test) and missing or its pin changed (make demo runs it only when it is already built).
# Its source distribution (llama.cpp vendored) is downloaded once into .venv/llama-cpp-src/; the
# build uses it, and the parts of llama.cpp of that release the tests check tensorbox against
# stay there (vendor/llama.cpp/): src/ (llama.cpp's rules: test_hf_gguf.py reads
# src/llama-vocab.cpp), convert_hf_to_gguf.py with its conversion/ package and gguf-py/ (its own
# converter and constants), ggml/src/ggml-quants.c and tools/quantize, tools/imatrix (the
# quantizers, presets and importance-matrix formats); the archive itself is removed.
[ "$WANT_LLAMA" -eq 1 ] || exit 0
LLAMA_REQ=python/requirements-llama.txt
LLAMA_PIN=$(sed -n 's/^llama-cpp-python==//p' "$LLAMA_REQ")
LLAMA_SRC=.venv/llama-cpp-src
LLAMA_VENDOR=$LLAMA_SRC/llama_cpp_python-$LLAMA_PIN/vendor/llama.cpp
LLAMA_SDIST=$LLAMA_SRC/llama_cpp_python-$LLAMA_PIN.tar.gz
llama_built=1
.venv/bin/python - "$LLAMA_PIN" >/dev/null 2>&1 <<'PYEOF' || llama_built=0
import importlib.metadata, sys
import llama_cpp  # noqa: F401  (the compiled library loads)
sys.exit(importlib.metadata.version("llama-cpp-python") != sys.argv[1])
PYEOF
if [ "$llama_built" = 0 ] || [ ! -f "$LLAMA_VENDOR/src/llama-vocab.cpp" ] ||
   [ ! -f "$LLAMA_VENDOR/convert_hf_to_gguf.py" ] || [ ! -f "$LLAMA_VENDOR/tools/quantize/quantize.cpp" ]; then
  if [ ! -f "$LLAMA_SDIST" ]; then
    echo "bootstrap: downloading the llama-cpp-python $LLAMA_PIN source distribution" >&2
    mkdir -p "$LLAMA_SRC"
    .venv/bin/python -m pip download -q --disable-pip-version-check --no-deps \
      --no-binary :all: -d "$LLAMA_SRC" "llama-cpp-python==$LLAMA_PIN"
  fi
  rm -rf "$LLAMA_SRC/llama_cpp_python-$LLAMA_PIN"
  LV=llama_cpp_python-$LLAMA_PIN/vendor/llama.cpp
  tar -xzf "$LLAMA_SDIST" -C "$LLAMA_SRC" "$LV/src" "$LV/LICENSE" "$LV/include" \
    "$LV/convert_hf_to_gguf.py" "$LV/conversion" "$LV/gguf-py" "$LV/ggml/src/ggml-quants.c" \
    "$LV/ggml/src/ggml-common.h" "$LV/tools/quantize" "$LV/tools/imatrix"
fi
if [ "$llama_built" = 0 ]; then
  echo "bootstrap: building llama-cpp-python $LLAMA_PIN from source (slow, once)" >&2
  CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_BLAS=OFF -DGGML_OPENMP=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF" \
    .venv/bin/python -m pip install -q --disable-pip-version-check "$LLAMA_SDIST"
fi
rm -f "$LLAMA_SDIST"
