#!/usr/bin/env python3
"""`tbx diff` of two ~1 GiB models against reading both files (`cat A B > /dev/null`).

    .venv/bin/python bench/bench_diff.py [--reps 5] [--tbx build/tbx] [--gib 1.0]
                                         [--cache warm,cold]
    BENCH_DIR=/path     where the files go (default: a temporary directory, removed after)

A: a GGUF of random f16 weights in [4096, 8192] tensors named like llama.cpp's (blk.N.*),
--gib GiB of them (gguf-py's writer). From it, with tbx convert: B16 = A cast to bf16 (the same
size) and Q8 = A quantized to q8_0 (about half). Rows:
  cat      `cat A B > /dev/null`: the bytes both files hold, read once (the floor)
  tbx      `tbx diff A B --json > /dev/null`: both files read, every value decoded to f32 and
           compared in double (max-abs, RMSE, NMSE, cosine per tensor), on all cores
Each pair (A vs B16, A vs Q8) is timed in interleaved repetitions; medians of wall time,
throughput (bytes of A + B per second), the ratio tbx / cat, tbx's peak RSS (GNU time) and
the CPU time (user + system) of both: on a shared machine the wall time mostly measures the
other processes, the CPU time what the work costs. The page cache is warm (one untimed cat first): the files fit in memory, so cat
measures memory bandwidth, not the disk, and the ratio shows what the decoding and arithmetic
cost beyond moving the bytes. I/O-bound is the goal: ratio close to 1 on a cold disk.
Cold (--cache cold, on by default): before every timed run (cat's and tbx's alike) both files
are fsynced and dropped from the page cache with posix_fadvise(POSIX_FADV_DONTNEED) (untimed;
the bench checks with fincore, where it exists, that no page of them stayed resident, and says
so), so both read from the disk: there cat measures the disk and tbx / cat says whether diff
keeps up with it.
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
ROWS, COLS = 4096, 8192


def make_a(path: Path, gib: float):
    import numpy as np
    import gguf
    n = max(2, int(gib * (1 << 30) / (ROWS * COLS * 2) + 0.999))
    w = gguf.GGUFWriter(str(path), "llama")
    rng = np.random.default_rng(1)
    names = ("attn_q", "attn_k", "attn_v", "attn_output", "ffn_up", "ffn_gate", "ffn_down")
    for i in range(n):
        x = (rng.standard_normal((ROWS, COLS), dtype=np.float32) * 0.02).astype(np.float16)
        w.add_tensor(f"blk.{i // len(names)}.{names[i % len(names)]}.weight", x)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def timed(argv, out=subprocess.DEVNULL, gnu_time=False):
    if gnu_time:
        argv = ["/usr/bin/time", "-f", "%M %U %S", *argv]
    t = time.perf_counter()
    p = subprocess.run(argv, stdout=out, stderr=subprocess.PIPE)
    dt = time.perf_counter() - t
    rss = cpu = None
    if gnu_time:
        last = p.stderr.decode().strip().splitlines()[-1].split()
        rss, cpu = int(last[0]) / 1024, float(last[1]) + float(last[2])
    return p.returncode, dt, rss, cpu


def drop_cache(paths) -> int:
    """Evicts the files' pages (fsync first: dirty pages are not dropped); returns the bytes
    fincore still finds resident (-1 when fincore is missing)."""
    for p in paths:
        fd = os.open(p, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
    if not shutil.which("fincore"):
        return -1
    r = subprocess.run(["fincore", "--bytes", "--noheadings", "--output", "RES", *map(str, paths)],
                       stdout=subprocess.PIPE, text=True)
    return sum(int(x) for x in r.stdout.split()) if r.returncode == 0 else -1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--tbx", default=str(REPO / "build" / "tbx"))
    ap.add_argument("--gib", type=float, default=1.0)
    ap.add_argument("--cache", default="warm,cold", help="warm, cold or both (comma-separated)")
    args = ap.parse_args()
    caches = args.cache.split(",")
    if set(caches) - {"warm", "cold"}:
        sys.exit("bench_diff: --cache takes warm, cold or warm,cold")
    if not shutil.which("/usr/bin/time"):
        sys.exit("bench_diff: GNU time (/usr/bin/time) is needed for the peak RSS")
    own = "BENCH_DIR" not in os.environ
    d = Path(os.environ.get("BENCH_DIR") or tempfile.mkdtemp(prefix="bench_diff_"))
    d.mkdir(parents=True, exist_ok=True)
    try:
        a = d / "a-f16.gguf"
        make_a(a, args.gib)
        pairs = []
        for name, opt in (("bf16", ["--cast", "bf16"]), ("q8_0", ["--quant", "q8_0"])):
            b = d / f"b-{name}.gguf"
            r = subprocess.run([args.tbx, "convert", a, b, "--force", *opt],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            if r.returncode:
                sys.exit(f"bench_diff: tbx convert to {name} failed: {r.stderr.decode()}")
            pairs.append((name, b))
        print(f"bench_diff: A {a.stat().st_size / 2**30:.2f} GiB f16, threads: "
              f"{os.environ.get('TBX_THREADS', 'all cores')} of {os.cpu_count()}, {args.reps} "
              f"interleaved runs, load average before: "
              f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        print(f"{'pair':<14} {'cache':<5} {'bytes':>9} {'cat s':>8} {'tbx s':>8} "
              f"{'cat GiB/s':>10} {'tbx GiB/s':>10} {'tbx/cat':>8} {'tbx RSS MiB':>12} "
              f"{'cat CPU s':>10} {'tbx CPU s':>10}")
        resident = []
        for cache in caches:
            for name, b in pairs:
                size = a.stat().st_size + b.stat().st_size
                timed(["cat", a, b])  # warm
                cats, tbxs, rss, cpu, ccpu = [], [], [], [], []
                for _ in range(args.reps):
                    if cache == "cold":
                        resident.append(drop_cache((a, b)))
                    rc, dt, _, cc = timed(["cat", a, b], gnu_time=True)
                    cats.append(dt)
                    ccpu.append(cc)
                    if cache == "cold":
                        resident.append(drop_cache((a, b)))
                    rc, dt, m, c = timed([args.tbx, "diff", a, b, "--json"], gnu_time=True)
                    if rc not in (0, 1):
                        sys.exit(f"bench_diff: tbx diff failed (exit {rc})")
                    tbxs.append(dt)
                    rss.append(m)
                    cpu.append(c)
                c, t = statistics.median(cats), statistics.median(tbxs)
                print(f"f16 vs {name:<7} {cache:<5} {size / 2**30:>7.2f}Gi {c:>8.3f} {t:>8.3f} "
                      f"{size / 2**30 / c:>10.2f} {size / 2**30 / t:>10.2f} {t / c:>8.2f} "
                      f"{max(rss):>12.1f} {statistics.median(ccpu):>10.2f} "
                      f"{statistics.median(cpu):>10.2f}")
        if resident:
            left = max(resident)
            print("cold: " + ("fincore missing, eviction not checked" if left < 0 else
                              f"at most {left} bytes of A and B resident after each drop "
                              f"(fincore)"))
        print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    finally:
        if own:
            shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
