#!/bin/sh
# Regenerates tests/data/mcf/ with mantle's own code. Run by hand, never by CI.
#   MANTLE_SRC  a checkout of github.com/samcharles93/mantle (default /work/mantle-src)
#   MANTLE_BIN  its `mantle` binary (default: built here from MANTLE_SRC into $TMPDIR)
# Needs Go >= 1.26 (GOTOOLCHAIN=auto fetches it) and GOEXPERIMENT=simd, as mantle does.
# Extra arguments go to the generator (e.g. -figures -minilm DIR -work DIR).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
MANTLE_SRC=${MANTLE_SRC:-/work/mantle-src}
MANTLE_SRC=$(cd "$MANTLE_SRC" && pwd)
export GOEXPERIMENT=simd GOTOOLCHAIN=${GOTOOLCHAIN:-auto} GOFLAGS=-mod=mod
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if [ -z "${MANTLE_BIN:-}" ]; then
    (cd "$MANTLE_SRC" && go build -o "$tmp/mantle" ./cmd/mantle)
    MANTLE_BIN=$tmp/mantle
fi
commit=$(git -C "$MANTLE_SRC" rev-parse HEAD)
# the replace directive points at MANTLE_SRC in a scratch copy of go.mod
cd "$here"
cp go.mod go.sum "$tmp/"
go mod edit -modfile="$tmp/go.mod" -replace="github.com/samcharles93/mantle=$MANTLE_SRC"
go run -modfile="$tmp/go.mod" . -out "$repo/tests/data/mcf" -mantle-bin "$MANTLE_BIN" -mantle-commit "$commit" "$@"
