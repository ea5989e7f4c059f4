#!/usr/bin/env python3
"""Generates the sample model files of examples/ (deterministically).

    .venv/bin/python examples/make_examples.py [--out-dir DIR]

tiny-mlp.safetensors: a small two-layer transformer-shaped set of weights (about 1.6 MB):
f16 token embeddings, bf16 attention projections, f32 MLP weights, biases and layer norms,
an i64 position-ids tensor and an f32 scalar, written by the safetensors library.

Determinism: the values come from a fixed numpy seed. The safetensors library writes the
entries of `__metadata__` in an unspecified (hash) order, so after writing, the header is
re-serialised with the metadata keys in the order given below. The re-serialisation uses
the same compact JSON and the same padding, and is checked to reproduce the library's own
bytes for the order it chose, so the result is exactly a file the library could write.
"""
from __future__ import annotations

import argparse
import json
import struct
import sys
from collections import OrderedDict
from pathlib import Path

try:
    import ml_dtypes
    import numpy as np
    import safetensors
    import safetensors.numpy as stn
except ImportError as e:  # pragma: no cover
    sys.exit(f"make_examples.py: missing Python package ({e}); "
             f"run: .venv/bin/pip install -r python/requirements-dev.txt")

SEED = 20240611
D_MODEL = 128
D_FF = 512
VOCAB = 1000
N_LAYERS = 2
N_POS = 64

METADATA = OrderedDict([
    ("format", "pt"),
    ("model", "tiny-mlp"),
    ("license", "CC0-1.0"),
    ("description", "tensorbox sample: 2-layer transformer-shaped random weights"),
    ("d_model", str(D_MODEL)),
    ("n_layers", str(N_LAYERS)),
])


def tiny_mlp_tensors() -> dict:
    rng = np.random.default_rng(SEED)

    def normal(shape, scale):
        return rng.standard_normal(shape) * scale

    t = {}
    t["embed_tokens.weight"] = normal((VOCAB, D_MODEL), 0.02).astype(np.float16)
    t["embed_positions.position_ids"] = np.arange(N_POS, dtype=np.int64).reshape(1, N_POS)
    for i in range(N_LAYERS):
        p = f"layers.{i}."
        for proj in ("q_proj", "k_proj", "v_proj", "o_proj"):
            t[p + f"attn.{proj}.weight"] = normal((D_MODEL, D_MODEL), D_MODEL ** -0.5).astype(ml_dtypes.bfloat16)
        t[p + "attn.o_proj.bias"] = np.zeros(D_MODEL, dtype=ml_dtypes.bfloat16)
        t[p + "mlp.up.weight"] = normal((D_FF, D_MODEL), D_MODEL ** -0.5).astype(np.float32)
        t[p + "mlp.up.bias"] = normal((D_FF,), 0.01).astype(np.float32)
        t[p + "mlp.down.weight"] = normal((D_MODEL, D_FF), D_FF ** -0.5).astype(np.float32)
        t[p + "mlp.down.bias"] = normal((D_MODEL,), 0.01).astype(np.float32)
        t[p + "norm.weight"] = (1.0 + normal((D_MODEL,), 0.05)).astype(np.float32)
        t[p + "norm.bias"] = normal((D_MODEL,), 0.01).astype(np.float32)
    t["final_norm.weight"] = np.ones(D_MODEL, dtype=np.float32)
    t["final_norm.bias"] = np.zeros(D_MODEL, dtype=np.float32)
    t["logit_scale"] = np.array(1.0 / np.sqrt(D_MODEL), dtype=np.float32)
    return t


def _dump(obj) -> bytes:
    # The reference writer's JSON: compact separators, UTF-8 (non-ASCII not escaped).
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def with_metadata_order(blob: bytes, order) -> bytes:
    """Re-serialises the header of `blob` with __metadata__ keys in `order`."""
    (n,) = struct.unpack_from("<Q", blob, 0)
    raw = blob[8:8 + n]
    body = raw.rstrip(b" ")
    header = json.loads(body.decode("utf-8"), object_pairs_hook=OrderedDict)
    if _dump(header) != body:
        raise SystemExit("make_examples.py: cannot reproduce the safetensors header bytes; "
                         "refusing to rewrite it")
    meta = header["__metadata__"]
    if set(meta) != set(order):
        raise SystemExit("make_examples.py: metadata keys changed while writing")
    header["__metadata__"] = OrderedDict((k, meta[k]) for k in order)
    new_body = _dump(header)
    assert len(new_body) == len(body)
    return blob[:8] + new_body + raw[len(body):] + blob[8 + n:]


def write_tiny_mlp(out_dir: Path) -> Path:
    tensors = tiny_mlp_tensors()
    blob = stn.save(tensors, metadata=dict(METADATA))
    blob = with_metadata_order(blob, list(METADATA))
    # Self-check through the library before writing.
    loaded = dict(safetensors.deserialize(blob))
    assert set(loaded) == set(tensors)
    for name, arr in tensors.items():
        assert bytes(loaded[name]["data"]) == arr.tobytes(), name
    path = out_dir / "tiny-mlp.safetensors"
    tmp = path.with_suffix(".safetensors.tmp")
    tmp.write_bytes(blob)
    tmp.replace(path)
    return path


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out-dir", type=Path, default=Path(__file__).resolve().parent,
                    help="output directory (default: examples/)")
    args = ap.parse_args(argv)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    p = write_tiny_mlp(args.out_dir)
    print(f"wrote {p} ({p.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
