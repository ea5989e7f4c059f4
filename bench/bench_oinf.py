#!/usr/bin/env python3
"""Reading a few-hundred-MB OINF file with many tensors: tensorbox vs openinfer-oinf 0.1.1.

    .venv/bin/python bench/bench_oinf.py [--reps 5] [--file F] [--mb 300] [--tensors 1500]
                                         [--bench-read PATH] [--tbx PATH]

The file (default bench/data/bench-oinf-300m.oinf, made on first use) is written by the
reference writer (dataclass_to_oinf.write_oinf) from seeded random data: --tensors tensors of
f32 (most), f16, i8 and u8, shapes [rows, 256], --mb megabytes of tensor data, 4 size variables
and a few metadata entries.

Methods, two pairs doing the same work:

  read-all (every tensor's bytes, once)
    (a) tbx pread          bench_read FILE: tbx_open_path + tbx_tensor_read of every tensor into
                           one reusable buffer (C, public API; build/bench/bench_read)
    (b) tbx mmap           bench_read --mmap FILE: zero-copy maps, one byte touched per page
    (c) oinf read-all      what the reference does before printing: the whole file read() into
                           memory, the header and tables walked with its read_string / struct
                           parsing, each tensor viewed with np.frombuffer (one byte per page
                           touched) - in this process
  verify + statistics (check every rule, decode every tensor, min/max/mean/median/std/histogram)
    (d) tbx info --stats   the tbx tool, output to /dev/null (a process per run)
    (e) verify_oinf.py     openinfer-oinf's oinf_verify.parse_file, output discarded (in this
                           process)
  (f) plain read()         readinto() of the whole file, 16 MiB chunks (the floor)

Timing: the C programs time themselves (a, b) or are timed around the subprocess (d); the Python
methods are timed in this process around the same work (interpreter start-up excluded).
Repetitions are interleaved after one warm-up run of each, so the page cache is warm for every
timed run: this measures the libraries, not the disk. Medians; ratio = reference / tbx.
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import io
import mmap
import os
import statistics
import struct
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
CHUNK = 16 * 1024 * 1024
PAGE = 4096


def default_path(env: str, *cands: Path) -> str:
    if os.environ.get(env):
        return os.environ[env]
    for c in cands:
        if c.is_file():
            return str(c)
    return str(cands[0])


def make_file(path: Path, mb: int, ntensors: int) -> None:
    import numpy as np
    from dataclass_to_oinf import SizeVar, TensorSpec, write_oinf

    rng = np.random.default_rng(20260601)
    total = mb * 1024 * 1024
    cols = 256
    per = max(1, total // ntensors)
    tensors = {}
    for i in range(ntensors):
        kind = i % 10
        if kind < 7:
            dt, size = np.float32, 4
        elif kind == 7:
            dt, size = np.float16, 2
        elif kind == 8:
            dt, size = np.int8, 1
        else:
            dt, size = np.uint8, 1
        rows = max(1, per // (cols * size))
        if np.issubdtype(dt, np.floating):
            arr = rng.standard_normal((rows, cols), dtype=np.float32).astype(dt)
        else:
            info = np.iinfo(dt)
            arr = rng.integers(info.min, info.max, size=(rows, cols), dtype=dt, endpoint=True)
        tensors[f"layer{i // 10:04d}.w{kind}"] = TensorSpec(arr)

    BenchModel = dataclasses.make_dataclass("BenchModel", [
        ("B", SizeVar), ("D", SizeVar), ("H", SizeVar), ("L", SizeVar), ("name", str),
        ("tensors", dict)])
    inst = BenchModel(B=SizeVar(1), D=SizeVar(cols), H=SizeVar(8), L=SizeVar(ntensors // 10),
                      name="bench", tensors=tensors)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    write_oinf(inst, str(tmp))
    os.replace(tmp, path)


def run_bench_read(binary: str, path: Path, use_mmap: bool):
    argv = [binary] + (["--mmap"] if use_mmap else []) + [str(path)]
    proc = subprocess.run(argv, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"bench: {' '.join(argv)} failed ({proc.returncode}): {proc.stderr}")
    fields = dict(kv.split("=", 1) for kv in proc.stdout.split()[1:] if "=" in kv)
    return float(fields["seconds"]), int(fields["bytes"])


def tbx_stats(tbx: str, path: Path):
    t0 = time.perf_counter()
    proc = subprocess.run([tbx, "info", str(path), "--stats"], stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE)
    dt = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"bench: tbx info --stats failed: {proc.stderr.decode()}")
    return dt, 0


def touch(arr) -> int:
    if arr.nbytes == 0:
        return 0
    flat = arr.reshape(-1).view("u1")
    return int(flat[::PAGE].sum()) + int(flat[-1])


def oinf_read_all(path: Path):
    """The reference's reading path without its printing: read(), tables, np.frombuffer."""
    import numpy as np
    from oinf_common import read_string
    from oinf_types import VT_TO_DTYPE

    t0 = time.perf_counter()
    with open(path, "rb") as f:
        blob = f.read()
    header = struct.unpack_from("<5sIIIIIIQQQQQ", blob, 0)
    n_sv, n_md, n_tn = header[3], header[4], header[5]
    off_sv, off_md, off_tn = header[7], header[8], header[9]
    cur = off_sv
    for _ in range(n_sv):
        _, cur = read_string(blob, cur)
        cur += 8
    cur = off_md
    for _ in range(n_md):
        _, cur = read_string(blob, cur)
        cur += 24
    cur = off_tn
    total = s = 0
    for _ in range(n_tn):
        _, cur = read_string(blob, cur)
        dtype, ndim, flags = struct.unpack_from("<III", blob, cur)
        cur += 12
        dims = struct.unpack_from("<" + "Q" * ndim, blob, cur) if ndim else ()
        cur += 8 * ndim
        nbytes, off = struct.unpack_from("<QQ", blob, cur)
        cur += 16
        if flags & 1:
            arr = np.frombuffer(blob[off:off + nbytes],
                                dtype=np.dtype(VT_TO_DTYPE[dtype]).newbyteorder("<"))
            arr = arr.reshape(dims) if dims else arr.reshape(())
            s += touch(arr)
            total += nbytes
    dt = time.perf_counter() - t0
    return dt, total


def ref_verify(path: Path):
    import oinf_verify as ov
    t0 = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):
        ov.parse_file(str(path))
    return time.perf_counter() - t0, 0


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
    return time.perf_counter() - t0, total


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--mb", type=int, default=300)
    ap.add_argument("--tensors", type=int, default=1500)
    ap.add_argument("--file", type=Path, default=HERE / "data" / "bench-oinf-300m.oinf")
    ap.add_argument("--bench-read", default=default_path(
        "TBX_BENCH_READ", REPO / "build" / "bench" / "bench_read", REPO / "build" / "bench_read"))
    ap.add_argument("--tbx", default=default_path("TBX", REPO / "build" / "tbx"))
    ap.add_argument("--no-verify", action="store_true", help="skip the slow (d)/(e) pair")
    args = ap.parse_args(argv)
    if args.reps < 1:
        ap.error("--reps must be >= 1")
    try:
        import numpy  # noqa: F401
        import oinf_verify as _ov  # noqa: F401
    except ImportError as e:
        raise SystemExit(f"bench: missing Python package ({e}); "
                         f"run: .venv/bin/pip install -r python/requirements-dev.txt")
    for b in (args.bench_read, args.tbx):
        if not (os.path.isfile(b) and os.access(b, os.X_OK)):
            raise SystemExit(f"bench: binary not found: {b} (build it, or set TBX_BENCH_READ / TBX)")
    path = args.file
    if not path.exists():
        print(f"making {path} ({args.mb} MB, {args.tensors} tensors) with the reference writer")
        make_file(path, args.mb, args.tensors)
    size = path.stat().st_size
    buf = mmap.mmap(-1, size + CHUNK)

    methods = {
        "(a) tbx pread": lambda: run_bench_read(args.bench_read, path, False),
        "(b) tbx mmap": lambda: run_bench_read(args.bench_read, path, True),
        "(c) oinf read-all": lambda: oinf_read_all(path),
        "(d) tbx info --stats": lambda: tbx_stats(args.tbx, path),
        "(e) verify_oinf.py": lambda: ref_verify(path),
        "(f) plain read()": lambda: plain_read(path, buf),
    }
    if args.no_verify:
        del methods["(d) tbx info --stats"], methods["(e) verify_oinf.py"]
    print(f"file: {path} ({size / 2**20:.1f} MiB)")
    print(f"bench_read: {args.bench_read}\ntbx: {args.tbx}")
    print("warm-up: one untimed run of each method (page cache warm for every timed run)")
    nbytes = {}
    for name, fn in methods.items():
        _, nbytes[name] = fn()
    reads = {nbytes[k] for k in ("(a) tbx pread", "(b) tbx mmap", "(c) oinf read-all")}
    if len(reads) != 1:
        raise SystemExit(f"bench: methods disagree on the tensor byte count: {nbytes}")

    times = {name: [] for name in methods}
    for _ in range(args.reps):
        for name, fn in methods.items():
            times[name].append(fn()[0])
    med = {name: statistics.median(ts) for name, ts in times.items()}
    print(f"\n{args.reps} interleaved repetitions, medians:")
    print(f"{'method':24} {'median s':>10} {'MB/s':>9} {'min s':>9} {'max s':>9}")
    for name in methods:
        m = med[name]
        print(f"{name:24} {m:10.4f} {size / m / 1e6:9.0f} {min(times[name]):9.4f} "
              f"{max(times[name]):9.4f}")
    print(f"\ntensor bytes per read-all: {reads.pop()}, file {size}")
    print(f"ratio read-all   (c) / (a) = {med['(c) oinf read-all'] / med['(a) tbx pread']:.2f}"
          f"   (c) / (b) = {med['(c) oinf read-all'] / med['(b) tbx mmap']:.2f}")
    if not args.no_verify:
        print(f"ratio verify     (e) / (d) = "
              f"{med['(e) verify_oinf.py'] / med['(d) tbx info --stats']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
