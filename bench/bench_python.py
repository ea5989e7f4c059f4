#!/usr/bin/env python3
"""Benchmarks of the Python package `tensorbox` against the peers' Python APIs, in one run.

  1. load_file of a 1 GiB safetensors file: tensorbox.load_file (zero-copy views of the mapping)
     vs safetensors.numpy.load_file (reads and copies). Both "load" (the call) and "load+sum"
     (the call, then a pass over every byte, so the mapped data is really brought in).
  2. dequantizing a q4_K GGUF to float32: tensorbox.load_file(dequantize=True) vs
     gguf.GGUFReader + gguf.quants.dequantize for every tensor.
  3. safe_open + get_tensor of one tensor in a 1,000-tensor safetensors file: tensorbox vs
     safetensors.safe_open(framework="np").

Medians of --reps runs (default 5) after one warm-up; the files stay in the page cache (the
same for both sides). Data files go to bench/data/ (git-ignored) and are reused.

  .venv/bin/python bench/bench_python.py [--reps N] [--gib 1.0]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import struct
import sys
import time
from pathlib import Path

import numpy as np

import gguf
import safetensors
import safetensors.numpy as stn
import tensorbox

DATA = Path(__file__).resolve().parent / "data"


def median_time(fn, reps):
    fn()  # warm-up (page cache, imports)
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def big_safetensors(gib: float) -> Path:
    n = int(gib * (1 << 30)) // 4 // 16
    p = DATA / f"py_big_{gib:g}gib.safetensors"
    if p.exists():
        return p
    rng = np.random.default_rng(1)
    # 16 tensors of random float32, written by the reference
    tensors = {f"t{i:02d}": rng.standard_normal(n, dtype=np.float32).reshape(-1, 1024)
               for i in range(16)}
    stn.save_file(tensors, str(p))
    return p


def q4k_gguf() -> Path:
    p = DATA / "py_q4k.gguf"
    if p.exists():
        return p
    rng = np.random.default_rng(2)
    w = gguf.GGUFWriter(str(p), "bench")
    qt = gguf.GGMLQuantizationType.Q4_K
    bs, bb = gguf.GGML_QUANT_SIZES[qt]
    rows, cols = 4096, 4096
    for i in range(4):
        raw = rng.integers(0, 256, rows * cols // bs * bb, dtype=np.uint8)
        raw[1::2] &= 0xBF  # finite, moderate f16 scales
        w.add_tensor(f"w{i}", raw.reshape(rows, cols // bs * bb), raw_dtype=qt)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return p


def many_tensors() -> Path:
    p = DATA / "py_1000.safetensors"
    if p.exists():
        return p
    rng = np.random.default_rng(3)
    stn.save_file({f"layer.{i:04d}.weight": rng.standard_normal((64, 64), dtype=np.float32)
                   for i in range(1000)}, str(p))
    return p


def touch(d):
    """Reads every byte (a wrapping uint64 sum), so mapped data is really brought in."""
    s = 0
    for a in d.values():
        s += int(a.reshape(-1).view(np.uint64).sum())
    return s


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--gib", type=float, default=1.0)
    ap.add_argument("--json", action="store_true", help="print the figures as JSON too")
    args = ap.parse_args()
    DATA.mkdir(parents=True, exist_ok=True)
    out = {}

    big = big_safetensors(args.gib)
    size = big.stat().st_size
    t_tb = median_time(lambda: tensorbox.load_file(big), args.reps)
    t_st = median_time(lambda: stn.load_file(str(big)), args.reps)
    t_tb2 = median_time(lambda: touch(tensorbox.load_file(big)), args.reps)
    t_st2 = median_time(lambda: touch(stn.load_file(str(big))), args.reps)
    print(f"load_file, {size / (1 << 30):.2f} GiB safetensors ({args.reps} reps, medians)")
    print(f"  load        tensorbox {t_tb * 1e3:9.2f} ms   safetensors {t_st * 1e3:9.2f} ms"
          f"   ratio {t_st / t_tb:8.1f}x")
    print(f"  load+sum    tensorbox {t_tb2 * 1e3:9.2f} ms   safetensors {t_st2 * 1e3:9.2f} ms"
          f"   ratio {t_st2 / t_tb2:8.1f}x")
    out["load_file"] = {"bytes": size, "tensorbox_s": t_tb, "safetensors_s": t_st,
                        "ratio": t_st / t_tb, "touch_tensorbox_s": t_tb2,
                        "touch_safetensors_s": t_st2, "touch_ratio": t_st2 / t_tb2}

    q = q4k_gguf()

    def gguf_py():
        r = gguf.GGUFReader(str(q))
        return {t.name: gguf.quants.dequantize(np.asarray(t.data), t.tensor_type)
                for t in r.tensors}

    t_tb = median_time(lambda: tensorbox.load_file(q, dequantize=True), args.reps)
    t_gg = median_time(gguf_py, max(1, min(args.reps, 3)))
    a = tensorbox.load_file(q, dequantize=True)
    b = gguf_py()
    assert all(np.allclose(a[k], b[k], rtol=1e-6, atol=1e-30, equal_nan=True) for k in b)
    nel = sum(v.size for v in a.values())
    print(f"dequantize q4_K GGUF, {nel / 1e6:.1f} M elements")
    print(f"  tensorbox {t_tb * 1e3:9.2f} ms   gguf-py {t_gg * 1e3:9.2f} ms"
          f"   ratio {t_gg / t_tb:8.1f}x")
    out["dequant_q4_k"] = {"elements": nel, "tensorbox_s": t_tb, "gguf_py_s": t_gg,
                           "ratio": t_gg / t_tb}

    m = many_tensors()
    name = "layer.0500.weight"

    def tb_one():
        with tensorbox.safe_open(m) as f:
            return f.get_tensor(name)

    def st_one():
        with safetensors.safe_open(str(m), framework="np") as f:
            return f.get_tensor(name)

    assert tb_one().tobytes() == st_one().tobytes()
    reps = max(args.reps, 20)
    t_tb = median_time(tb_one, reps)
    t_st = median_time(st_one, reps)
    print("safe_open + get_tensor of one tensor in a 1,000-tensor file")
    print(f"  tensorbox {t_tb * 1e6:9.1f} us   safetensors {t_st * 1e6:9.1f} us"
          f"   ratio {t_st / t_tb:8.2f}x")
    out["safe_open_one"] = {"tensorbox_s": t_tb, "safetensors_s": t_st, "ratio": t_st / t_tb}
    if args.json:
        print(json.dumps(out))


if __name__ == "__main__":
    sys.exit(main())
