#!/usr/bin/env python3
"""Reading a ~1 GiB safetensors file: tensorbox vs the safetensors library vs plain read().

    .venv/bin/python bench/bench_safetensors.py [--reps 7] [--file F] [--bench-read PATH]

Methods (each reads every tensor's bytes once per repetition):
  (a) tbx pread        bench_read FILE: tbx_open_path + tbx_tensor_read of every tensor into
                       one reusable buffer (C, public API)
  (b) tbx mmap+touch   bench_read --mmap FILE: TBX_OPEN_MMAP + tbx_tensor_map, one byte read
                       in every 4096
  (c1) st load_file    safetensors.numpy.load_file(FILE), then one byte read per 4096 of
                       every array (the arrays may be views of a mapping: touching makes the
                       work comparable)
  (c2) st get_tensor   safe_open(FILE, "np") + get_tensor(k) for every key, same touch
  (d) plain read       readinto() of the whole file into a preallocated, page-aligned buffer
                       (an anonymous mmap), 16 MiB chunks

Timing: the C program times itself from open to close; the Python methods are timed in this
process around the same work (interpreter start-up excluded on both sides). Repetitions are
interleaved (a, b, c1, c2, d, a, b, ...) after one warm-up run of each, so the file is
page-cache warm for every timed run: these figures measure the libraries, not the disk.

Buffers are page-aligned on both sides (bench_read uses posix_memalign): on some CPUs the
kernel's copy into a destination misaligned by 16 bytes (what a large malloc/bytearray gives)
is several times slower, which would measure the allocator instead of the reader.
"""
from __future__ import annotations

import argparse
import mmap
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
CHUNK = 16 * 1024 * 1024
PAGE = 4096


def default_bench_read() -> str:
    env = os.environ.get("TBX_BENCH_READ")
    if env:
        return env
    for cand in (REPO / "build" / "bench" / "bench_read", REPO / "build" / "bench_read"):
        if cand.is_file():
            return str(cand)
    return str(REPO / "build" / "bench" / "bench_read")


def run_bench_read(binary: str, path: Path, mmap: bool):
    argv = [binary] + (["--mmap"] if mmap else []) + [str(path)]
    proc = subprocess.run(argv, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"bench: {' '.join(argv)} failed ({proc.returncode}): {proc.stderr}")
    fields = dict(kv.split("=", 1) for kv in proc.stdout.split()[1:] if "=" in kv)
    return float(fields["seconds"]), int(fields["bytes"])


def touch(arr) -> int:
    import numpy as np
    if arr.nbytes == 0:
        return 0
    flat = arr.reshape(-1).view(np.uint8)
    return int(flat[::PAGE].sum()) + int(flat[-1])


def st_load_file(path: Path):
    import safetensors.numpy as stn
    t0 = time.perf_counter()
    d = stn.load_file(str(path))
    total = 0
    s = 0
    for arr in d.values():
        s += touch(arr)
        total += arr.nbytes
    dt = time.perf_counter() - t0
    del d
    return dt, total


def st_get_tensor(path: Path):
    from safetensors import safe_open
    t0 = time.perf_counter()
    total = 0
    s = 0
    with safe_open(str(path), framework="np") as f:
        for k in f.keys():
            arr = f.get_tensor(k)
            s += touch(arr)
            total += arr.nbytes
            del arr
    dt = time.perf_counter() - t0
    return dt, total


def plain_read(path: Path, buf):
    mv = memoryview(buf)
    t0 = time.perf_counter()
    total = 0
    with open(path, "rb", buffering=0) as f:
        while True:
            n = f.readinto(mv[total:total + CHUNK])
            if not n:
                break
            total += n
    dt = time.perf_counter() - t0
    return dt, total


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--file", type=Path, default=HERE / "data" / "bench-1g.safetensors")
    ap.add_argument("--bench-read", default=default_bench_read())
    args = ap.parse_args(argv)
    if args.reps < 1:
        ap.error("--reps must be >= 1")

    try:
        import ml_dtypes  # noqa: F401  (bf16 arrays)
        import numpy  # noqa: F401
        import safetensors  # noqa: F401
    except ImportError as e:
        raise SystemExit(f"bench: missing Python package ({e}); "
                         f"run: .venv/bin/pip install -r python/requirements-dev.txt")
    if not (os.path.isfile(args.bench_read) and os.access(args.bench_read, os.X_OK)):
        raise SystemExit(f"bench: bench_read binary not found: {args.bench_read} "
                         f"(build it, or set TBX_BENCH_READ)")
    if args.file == HERE / "data" / "bench-1g.safetensors" or not args.file.exists():
        subprocess.run([sys.executable, str(HERE / "make_bench_file.py"), "--out", str(args.file)],
                       check=True)
    path = args.file
    size = path.stat().st_size
    buf = mmap.mmap(-1, size + CHUNK)  # page-aligned, faulted in by the warm-up run

    methods = {
        "(a) tbx pread": lambda: run_bench_read(args.bench_read, path, False),
        "(b) tbx mmap+touch": lambda: run_bench_read(args.bench_read, path, True),
        "(c1) safetensors load_file": lambda: st_load_file(path),
        "(c2) safetensors get_tensor": lambda: st_get_tensor(path),
        "(d) plain read()": lambda: plain_read(path, buf),
    }
    print(f"file: {path} ({size / 2**30:.3f} GiB)")
    print(f"bench_read: {args.bench_read}")
    print("warm-up: one untimed run of each method; the file is page-cache warm for every "
          "timed run (this measures CPU/memory work, not the disk)")
    nbytes = {}
    for name, fn in methods.items():
        _, nbytes[name] = fn()
    tensor_bytes = {v for k, v in nbytes.items() if not k.startswith("(d)")}
    if len(tensor_bytes) != 1:
        raise SystemExit(f"bench: methods disagree on the tensor byte count: {nbytes}")

    times = {name: [] for name in methods}
    for rep in range(args.reps):
        for name, fn in methods.items():
            dt, _ = fn()
            times[name].append(dt)

    med = {name: statistics.median(ts) for name, ts in times.items()}
    ref_c = med["(c1) safetensors load_file"]
    ref_d = med["(d) plain read()"]
    print(f"\n{args.reps} interleaved repetitions, medians "
          f"(ratio = other's time / this time; > 1 means this method is faster):")
    print(f"{'method':30} {'median s':>10} {'GB/s':>8} {'min s':>9} {'max s':>9}"
          f" {'vs (c1)':>8} {'vs (d)':>8}")
    for name in methods:
        m = med[name]
        gbps = nbytes[name] / m / 1e9
        print(f"{name:30} {m:10.4f} {gbps:8.2f} {min(times[name]):9.4f} {max(times[name]):9.4f}"
              f" {ref_c / m:8.2f} {ref_d / m:8.2f}")
    print(f"\nbytes per run: tensors {tensor_bytes.pop()}, whole file {size}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
