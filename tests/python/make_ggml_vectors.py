#!/usr/bin/env python3
"""Writes test vectors for tensorbox's ggml block kernels, computed by gguf-py (PyPI `gguf`).

    make_ggml_vectors.py OUTDIR [--seed N] [--scale K]

For every type gguf-py can dequantize: random blocks (random code bytes; scale fields drawn from
NaN/Inf/subnormal/zero/extreme halves, random bit patterns and ordinary values; blocks whose
codes are all 0x00 or all 0xFF) and gguf.quants.dequantize's f32 output -> OUTDIR/dq_<type>.bin.
For every type gguf-py can quantize: finite f32 inputs (several distributions and edge blocks)
and gguf.quants.quantize's bytes -> OUTDIR/q_<type>.bin.

File layout (little-endian), read by tests/unit/test_ggml_quant.c:
    8  magic "TBXGGV01"
    16 type name, NUL padded (tensorbox dtype name, e.g. "q4_k")
    u32 kind (0 dequant, 1 quant)   u32 ggml type id   u32 block_size   u32 block_bytes
    u32 nblocks                      u32 0
    dequant: nblocks*block_bytes block bytes, then nblocks*block_size f32 outputs
    quant:   nblocks*block_size f32 inputs, then nblocks*block_bytes block bytes

The committed copy lives in tests/data/ggml (seed 1, scale 1); tests/python/test_ggml_kernels.py
regenerates larger sets against the installed gguf-py.
"""
from __future__ import annotations

import argparse
import struct
import sys
from pathlib import Path

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf import quants
from gguf.constants import GGML_QUANT_SIZES

MAGIC = b"TBXGGV01"

# type -> (blocks at scale 1, [(offset, kind)] of the scale fields: "f16", "e8m0", "ue4m3", "iq1m")
DEQUANT_TYPES = {
    T.Q4_0: (48, [(0, "f16")]),
    T.Q4_1: (48, [(0, "f16"), (2, "f16")]),
    T.Q5_0: (48, [(0, "f16")]),
    T.Q5_1: (48, [(0, "f16"), (2, "f16")]),
    T.Q8_0: (48, [(0, "f16")]),
    T.Q2_K: (12, [(80, "f16"), (82, "f16")]),
    T.Q3_K: (12, [(108, "f16")]),
    T.Q4_K: (12, [(0, "f16"), (2, "f16")]),
    T.Q5_K: (12, [(0, "f16"), (2, "f16")]),
    T.Q6_K: (12, [(208, "f16")]),
    T.IQ2_XXS: (12, [(0, "f16")]),
    T.IQ2_XS: (12, [(0, "f16")]),
    T.IQ2_S: (12, [(0, "f16")]),
    T.IQ3_XXS: (12, [(0, "f16")]),
    T.IQ3_S: (12, [(0, "f16")]),
    T.IQ1_S: (12, [(0, "f16")]),
    T.IQ1_M: (12, [(48, "iq1m")]),
    T.IQ4_NL: (48, [(0, "f16")]),
    T.IQ4_XS: (12, [(0, "f16")]),
    T.TQ1_0: (12, [(52, "f16")]),
    T.TQ2_0: (12, [(64, "f16")]),
    T.MXFP4: (256, [(0, "e8m0")]),
    T.NVFP4: (64, [(0, "ue4m3"), (1, "ue4m3"), (2, "ue4m3"), (3, "ue4m3")]),
}

QUANT_TYPES = {T.Q8_0: 64, T.Q4_0: 64, T.Q4_1: 64, T.Q5_0: 64, T.Q5_1: 64,
               T.TQ1_0: 12, T.TQ2_0: 12, T.MXFP4: 64}

SPECIAL_F16 = [0x0000, 0x8000, 0x7C00, 0xFC00, 0x7E00, 0xFE00, 0x7C01, 0x7D55, 0xFDFF,
               0x0001, 0x8001, 0x03FF, 0x83FF, 0x0400, 0x7BFF, 0xFBFF, 0x3C00, 0xBC00]


def tname(t: T) -> str:
    return t.name.lower()


def header(t: T, kind: int, nblocks: int) -> bytes:
    bs, bb = GGML_QUANT_SIZES[t]
    name = tname(t).encode().ljust(16, b"\0")
    return MAGIC + name + struct.pack("<6I", kind, int(t), bs, bb, nblocks, 0)


def moderate_f16(rng) -> int:
    # sign, exponent 1..20 (2^-14 .. 2^5), random mantissa: ordinary scales
    return int(rng.integers(0, 2)) << 15 | int(rng.integers(1, 21)) << 10 | int(rng.integers(0, 1024))


def set_scale(blk: np.ndarray, off: int, kind: str, value: int) -> None:
    if kind == "f16":
        blk[off:off + 2] = np.frombuffer(struct.pack("<H", value), dtype=np.uint8)
    elif kind in ("e8m0", "ue4m3"):
        blk[off] = value & 0xFF
    elif kind == "iq1m":
        # the f16 super-scale lives in the top nibble of four u16 words
        for k in range(4):
            w = struct.unpack_from("<H", blk.tobytes(), off + 2 * k)[0]
            w = (w & 0x0FFF) | (((value >> (4 * k)) & 0xF) << 12)
            blk[off + 2 * k:off + 2 * k + 2] = np.frombuffer(struct.pack("<H", w), dtype=np.uint8)
    else:
        raise ValueError(kind)


def dequant_blocks(t: T, n: int, rng) -> np.ndarray:
    bs, bb = GGML_QUANT_SIZES[t]
    _, fields = DEQUANT_TYPES[t]
    blocks = rng.integers(0, 256, size=(n, bb), dtype=np.uint8)
    counter = 0
    for i in range(n):
        mode = i % 8
        if mode == 5:
            blocks[i, :] = 0x00
        elif mode == 6:
            blocks[i, :] = 0xFF
        for off, kind in fields:
            if kind in ("e8m0", "ue4m3"):
                # walk through every byte value of the scale, then random bytes
                v = counter % 256 if counter < 256 else int(rng.integers(0, 256))
                counter += 1
                set_scale(blocks[i], off, kind, v)
                continue
            if mode == 7 and len(fields) == 2:
                # both scales NaN, different payloads: which NaN survives d*q + m / d*q - m
                v = (0x7E01, 0xFC01, 0x7D00, 0xFE55)[(i // 8 + 2 * (off != fields[0][0])) % 4]
            elif mode in (0, 5, 6):
                v = SPECIAL_F16[(i // 8 + 3 * off + (i % 3)) % len(SPECIAL_F16)]
            elif mode == 1:
                v = int(rng.integers(0, 65536))  # any bit pattern
            else:
                v = moderate_f16(rng)
            set_scale(blocks[i], off, kind, v)
    return blocks


def quant_inputs(t: T, n: int, rng) -> np.ndarray:
    bs, _ = GGML_QUANT_SIZES[t]
    x = np.empty((n, bs), dtype=np.float32)
    for i in range(n):
        mode = i % 10
        scale = np.float32(10.0 ** rng.uniform(-6, 4))
        if mode == 0:
            v = rng.standard_normal(bs) * scale
        elif mode == 1:
            v = rng.uniform(-1, 1, bs) * scale
        elif mode == 2:
            v = rng.laplace(0, 1, bs) * scale
        elif mode == 3:
            v = rng.uniform(0, 1, bs) * scale  # all positive
        elif mode == 4:
            v = -rng.uniform(0, 1, bs) * scale  # all negative
        elif mode == 5:
            v = np.zeros(bs)
            if i % 20 == 5:
                v[rng.integers(0, bs)] = scale * rng.choice([-1.0, 1.0])
        elif mode == 6:
            v = np.full(bs, scale * rng.choice([-1.0, 1.0]))  # constant block
        elif mode == 7:
            # values on a grid of the block's own step: rounding ties
            step = scale / 16
            v = (rng.integers(-64, 65, bs) / 2.0) * step
        elif mode == 8:
            v = rng.standard_normal(bs) * np.float32(rng.choice([3e6, 6e7, 1e9]))  # f16 d overflow
        else:
            v = rng.standard_normal(bs) * np.float32(rng.choice([1e-30, 1e-20, 1e-8]))
        x[i] = np.asarray(v, dtype=np.float32)
    return x


def write_all(out: Path, seed: int, scale: int) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    written = []
    for t, (n, _) in DEQUANT_TYPES.items():
        blocks = dequant_blocks(t, n * scale, rng)
        with np.errstate(all="ignore"):
            y = quants.dequantize(blocks.reshape(-1), t)
        y = np.asarray(y, dtype="<f4").reshape(-1)
        p = out / f"dq_{tname(t)}.bin"
        p.write_bytes(header(t, 0, blocks.shape[0]) + blocks.tobytes() + y.tobytes())
        written.append(p)
    for t, n in QUANT_TYPES.items():
        x = quant_inputs(t, n * scale, rng)
        with np.errstate(all="ignore"):
            q = quants.quantize(x, t)
        q = np.asarray(q, dtype=np.uint8).reshape(-1)
        p = out / f"q_{tname(t)}.bin"
        p.write_bytes(header(t, 1, x.shape[0]) + x.astype("<f4").tobytes() + q.tobytes())
        written.append(p)
    return written


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("outdir", type=Path)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--scale", type=int, default=1, help="multiply the block counts")
    a = ap.parse_args(argv)
    files = write_all(a.outdir, a.seed, a.scale)
    print(f"wrote {len(files)} files to {a.outdir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
