#!/usr/bin/env python3
"""Generates the safetensors benchmark file (about 1 GiB), deterministically.

    .venv/bin/python bench/make_bench_file.py [--out bench/data/bench-1g.safetensors] [--force]

Contents: a few large tensors ([8192, 8192] f16 / bf16 / f32, [4096, 8192] f32) and several
hundred small ones (f32 / f16 / bf16 biases and projections), random bytes from a fixed seed,
written by the safetensors library. An existing file is reused when its recorded recipe
(a sidecar .recipe file written after a successful run) matches; --force regenerates it.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from pathlib import Path

try:
    import ml_dtypes
    import numpy as np
    import safetensors.numpy as stn
except ImportError as e:  # pragma: no cover
    sys.exit(f"make_bench_file.py: missing Python package ({e}); "
             f"run: .venv/bin/pip install -r python/requirements-dev.txt")

SEED = 1234567
DEFAULT_OUT = Path(__file__).resolve().parent / "data" / "bench-1g.safetensors"


def recipe():
    """(name, dtype name, shape) in a fixed order."""
    r = []
    r += [("large.f16.0", "float16", (8192, 8192)), ("large.f16.1", "float16", (8192, 8192))]
    r += [("large.bf16.0", "bfloat16", (8192, 8192)), ("large.bf16.1", "bfloat16", (8192, 8192))]
    r += [("large.f32.0", "float32", (8192, 8192)), ("large.f32.1", "float32", (4096, 8192))]
    for i in range(384):
        r.append((f"blocks.{i}.proj.weight", "float32", (128, 512)))
    for i in range(128):
        r.append((f"blocks.{i}.bias", "float16", (4096,)))
    for i in range(64):
        r.append((f"blocks.{i}.attn.weight", "bfloat16", (1024, 256)))
    for i in range(32):
        r.append((f"blocks.{i}.scale", "float32", ()))
    return r


def np_dtype(name):
    return np.dtype(ml_dtypes.bfloat16) if name == "bfloat16" else np.dtype(name)


def recipe_id() -> str:
    text = json.dumps({"seed": SEED, "tensors": recipe()}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


def build_tensors():
    rng = np.random.default_rng(SEED)
    tensors = {}
    for name, dt, shape in recipe():
        dtype = np_dtype(dt)
        n = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        raw = np.frombuffer(rng.bytes(n), dtype=np.uint8)
        if dtype.kind == "f" or dt == "bfloat16":
            # random bit patterns, with the exponent kept small enough to avoid NaN/Inf
            if dtype.itemsize == 2:
                u = raw.view(np.uint16) & np.uint16(0x3FFF if dt == "float16" else 0x3F7F)
            else:
                u = raw.view(np.uint32) & np.uint32(0x3F7FFFFF)
            arr = u.view(dtype)
        else:
            arr = raw.view(dtype)
        tensors[name] = arr.reshape(shape)
    return tensors


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument("--force", action="store_true", help="regenerate even if present")
    args = ap.parse_args(argv)
    out: Path = args.out
    stamp = out.with_name(out.name + ".recipe")
    rid = recipe_id()
    if (not args.force and out.is_file() and stamp.is_file()
            and stamp.read_text().strip() == rid):
        print(f"reusing {out} ({out.stat().st_size} bytes)")
        return 0
    out.parent.mkdir(parents=True, exist_ok=True)
    tensors = build_tensors()
    tmp = out.with_name(out.name + ".tmp")
    # one metadata key: the reference writer orders several keys nondeterministically
    stn.save_file(tensors, str(tmp), metadata={"format": "pt"})
    del tensors
    os.replace(tmp, out)
    stamp.write_text(rid + "\n")
    print(f"wrote {out} ({out.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
