#!/usr/bin/env python3
"""NumPy .npy / .npz: tensorbox against numpy.load / numpy.save on the same files, beside cat.

    .venv/bin/python bench/bench_npy.py [--reps 5] [--mb 256] [--bench-read PATH] [--tbx PATH]

Files (bench/data/, made on first use by numpy itself, seeded):
  npy-<mb>m.npy          one f32 array [rows, 1024] of <mb> MiB (numpy.save)
  npz-<mb>m.npz          16 f32 arrays of <mb>/16 MiB each, stored (numpy.savez)
  npzc-<mb/4>m.npz       16 f32 arrays of small integers (compressible), deflated
                         (numpy.savez_compressed), <mb>/4 MiB of array data

Methods, per file (page cache warm: one warm-up of each, repetitions interleaved):
  read   tbx        bench_read FILE: a process that opens the file and reads every tensor
                    whole (tbx_open_path + tbx_tensor_read, pread)
         tbx mmap   bench_read --mmap FILE: mapped, every page of every tensor touched (not for
                    the deflated archive: its members are decoded, never mapped)
         numpy      numpy.load(FILE) (for .npz every member read: z[k] for k in z.files), in
                    this process (no start-up cost, unlike the two above)
         cat        cat FILE > /dev/null (the floor: the bytes read once)
  write  tbx        tbx convert SRC OUT --force --no-sync (SRC: the same arrays as .npy/.npz:
                    read them, write the copy; --compress 6 for the deflated archive)
         numpy      numpy.load(SRC) + numpy.save / savez / savez_compressed(OUT), in process
bench_read pays its process start and the page faults of fresh buffers (one 256 MiB tensor:
~0.13 s, the same for a safetensors file of the same array), which numpy.load in process avoids
(it also asks for huge pages): compare "tbx mmap" and the archives for the driver itself.
Medians of --reps; "ratio" = numpy seconds / tbx seconds (above 1: tbx faster);
"of cat" = cat seconds / method seconds.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
DATA = HERE / "data"


def default_bin(env, *cands):
    if os.environ.get(env):
        return os.environ[env]
    for c in cands:
        if Path(c).is_file():
            return str(c)
    return str(cands[0])


def make_files(mb: int) -> dict:
    DATA.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(42)
    rows = mb * 1024 * 1024 // (4 * 1024)
    files = {}
    p = DATA / f"npy-{mb}m.npy"
    if not p.exists():
        np.save(p, rng.standard_normal((rows, 1024), dtype=np.float32))
    files["npy"] = p
    p = DATA / f"npz-{mb}m.npz"
    if not p.exists():
        np.savez(p, **{f"t{i}": rng.standard_normal((rows // 16, 1024), dtype=np.float32)
                       for i in range(16)})
    files["npz stored"] = p
    q = max(1, mb // 4)
    p = DATA / f"npzc-{q}m.npz"
    if not p.exists():
        r = q * 1024 * 1024 // (4 * 1024) // 16
        np.savez_compressed(p, **{f"t{i}": rng.integers(0, 16, (r, 1024)).astype(np.float32)
                                  for i in range(16)})
    files["npz deflated"] = p
    return files


def timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def np_read(path: Path):
    if path.suffix == ".npy":
        np.load(path)
        return
    with np.load(path) as z:
        for k in z.files:
            z[k]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--mb", type=int, default=256)
    ap.add_argument("--bench-read", default=default_bin("TBX_BENCH_READ",
                                                         REPO / "build/bench/bench_read",
                                                         REPO / "build/bench_read"))
    ap.add_argument("--tbx", default=default_bin("TBX", REPO / "build/tbx"))
    a = ap.parse_args()
    files = make_files(a.mb)
    out = DATA / "bench-npy-out"
    out.mkdir(exist_ok=True)

    def run(*cmd):
        subprocess.run([str(c) for c in cmd], check=True, stdout=subprocess.DEVNULL)

    print(f"reps {a.reps}, medians in seconds; ratio = numpy / tbx; of cat = cat / method")
    for label, path in files.items():
        size = path.stat().st_size
        read = {
            "tbx": lambda: run(a.bench_read, path),
            "tbx mmap": lambda: run(a.bench_read, "--mmap", path),
            "numpy": lambda: np_read(path),
            "cat": lambda: run("sh", "-c", f"cat '{path}' > /dev/null"),
        }
        if "deflated" in label:
            del read["tbx mmap"]  # deflated members are decoded, never mapped
        level = ["--compress", "6"] if "deflated" in label else []
        dst = out / ("o" + path.suffix)

        def np_write(path=path, dst=dst, label=label):
            if path.suffix == ".npy":
                np.save(dst, np.load(path))
                return
            with np.load(path) as z:
                arrs = {k: z[k] for k in z.files}
            (np.savez_compressed if "deflated" in label else np.savez)(dst, **arrs)

        write = {
            "tbx": lambda: run(a.tbx, "convert", path, dst, "--force", "--no-sync", *level),
            "numpy": np_write,
        }
        for group in (read, write):
            for fn in group.values():
                fn()  # warm-up
        t = {("read", k): [] for k in read} | {("write", k): [] for k in write}
        for _ in range(a.reps):
            for k, fn in read.items():
                t[("read", k)].append(timed(fn))
            for k, fn in write.items():
                t[("write", k)].append(timed(fn))
        med = {k: statistics.median(v) for k, v in t.items()}
        cat = med[("read", "cat")]
        print(f"\n{label}: {path.name}, {size / 2**20:.0f} MiB")
        for (kind, k), s in med.items():
            extra = ""
            if k == "tbx" or k == "tbx mmap":
                extra = f"  ratio {med[(kind, 'numpy')] / s:5.2f}"
            if kind == "read":
                extra += f"  of cat {cat / s:5.2f}"
            print(f"  {kind:5s} {k:9s} {s:8.3f} s  {size / s / 1e9:6.2f} GB/s{extra}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
