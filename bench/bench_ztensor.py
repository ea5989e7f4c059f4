#!/usr/bin/env python3
"""zTensor: tensorbox vs the reference (PyPI ztensor==1.1.1), writing and reading a ~1 GiB model.

    .venv/bin/python bench/bench_ztensor.py [--reps 5] [--tbx build/tbx]
                                            [--bench-read build/bench/bench_read]
    BENCH_SIZE_MB=256 ...   a smaller model (default 1024)
    BENCH_DIR=/path         where the files go (default: a temporary directory, removed after)

The model: tensors of 16 MiB (f16 and f32 normals, a quarter of the f32 ones half zeros, so
zstd has something to find), written once as safetensors (the source for `tbx convert`) and
kept in memory as numpy arrays (the source for ztensor's Writer).

Write (each repetition writes a new file and makes it durable):
  tbx      `tbx convert SRC.safetensors OUT.zt [--compress 3] [--digest sha256|crc32c]`
           (the time includes reading the source, page-cache warm, and tbx's fsync); zstd
           compresses tensors on the default worker threads (the online CPUs), and once more
           with TBX_THREADS=1 for the parallel speed-up
  ztensor  Writer(OUT).add_tensor(name, array, compress=...) for every array, then fsync
           (the arrays are already in memory: no read). ztensor's Python API writes no digests,
           so the sha256 / crc32c rows have no reference figure.
Read (every tensor's decoded bytes once; same file for both tools; one byte touched per 4096):
  raw      a file written by ztensor; tbx: `bench_read --mmap` (tbx_tensor_map, zero-copy) and,
           as a second figure, `bench_read` (pread copies into a buffer); ztensor: Reader +
           read_tensor (zero-copy views of its mapping)
  zstd-3   a file written by ztensor; tbx: `bench_read --batch T` (tbx_read_batch, T decoding
           threads: the online CPUs, and 1 for the parallel speed-up); ztensor: read_tensor
  sha256, crc32c  a file written by tbx with digests, read with verification; tbx:
           `bench_read --mmap --verify` (each digest checked over the mapping before the view is
           handed out); ztensor: the FFI read with verify=1 for every name.
tbx reads run bench_read with --repeat 2 and time the second pass (a warm process).
Timing: medians of --reps interleaved repetitions after one warm-up; files are page-cache warm
(this measures the libraries, not the disk). ratio = ztensor / tbx (> 1: tensorbox faster).
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
PAGE = 4096


def find(path_env, *cands):
    v = os.environ.get(path_env)
    if v:
        return v
    for c in cands:
        if Path(c).is_file():
            return str(c)
    return str(cands[0])


def make_model(size_mb: int):
    import numpy as np
    rng = np.random.default_rng(12345)
    arrays = {}
    per = 16 << 20
    total = size_mb << 20
    i = 0
    while sum(a.nbytes for a in arrays.values()) + per <= total or not arrays:
        if i % 4 == 3:
            a = rng.standard_normal(per // 4, dtype=np.float32)
            if i % 8 == 7:
                a[: a.size // 2] = 0
            arrays[f"layers.{i // 4}.mlp.w{i}"] = a.reshape(-1, 1024)
        else:
            a = rng.standard_normal(per // 2, dtype=np.float32).astype(np.float16)
            arrays[f"layers.{i // 4}.attn.w{i}"] = a.reshape(-1, 2048)
        i += 1
    return arrays


def fsync_path(p: Path):
    fd = os.open(p, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def run_ok(cmd, env=None):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    if p.returncode != 0:
        sys.exit(f"failed: {' '.join(map(str, cmd))}\n{p.stderr.decode()[:2000]}")
    return p


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--tbx", default=find("TBX", REPO / "build" / "tbx"))
    ap.add_argument("--bench-read", default=find("TBX_BENCH_READ", REPO / "build" / "bench" / "bench_read",
                                                 REPO / "build" / "bench_read"))
    args = ap.parse_args()
    import numpy as np
    import safetensors.numpy as stn
    import ztensor
    from ztensor import ffi, lib

    size_mb = int(os.environ.get("BENCH_SIZE_MB", "1024"))
    base = os.environ.get("BENCH_DIR")
    tmp = Path(base) if base else Path(tempfile.mkdtemp(prefix="bench_zt_"))
    tmp.mkdir(parents=True, exist_ok=True)
    try:
        for exe in (args.tbx, args.bench_read):
            if not (Path(exe).is_file() and os.access(exe, os.X_OK)):
                sys.exit(f"not found: {exe} (build first, or pass --tbx / --bench-read)")
        arrays = make_model(size_mb)
        nbytes = sum(a.nbytes for a in arrays.values())
        src = tmp / "src.safetensors"
        stn.save_file(arrays, str(src))
        print(f"model: {len(arrays)} tensors, {nbytes / 2**20:.0f} MiB; files in {tmp}; "
              f"{args.reps} reps (median)")

        modes = {"raw": ([], False), "zstd-3": (["--compress", "3"], 3),
                 "sha256": (["--digest", "sha256"], None), "crc32c": (["--digest", "crc32c"], None)}
        w_times = {m: {"tbx": [], "zt": []} for m in modes}
        r_times = {m: {"tbx": [], "zt": []} for m in modes}

        def tbx_write(mode, out, threads=None):
            if out.exists():
                out.unlink()
            env = dict(os.environ)
            if threads:
                env["TBX_THREADS"] = str(threads)
            t = time.perf_counter()
            run_ok([args.tbx, "convert", str(src), str(out), *modes[mode][0]], env=env)
            return time.perf_counter() - t

        def zt_write(mode, out):
            if out.exists():
                out.unlink()
            comp = modes[mode][1]
            t = time.perf_counter()
            with ztensor.Writer(str(out)) as w:
                for name, a in arrays.items():
                    w.add_tensor(name, a, compress=comp)
            fsync_path(out)
            return time.perf_counter() - t

        ncpu = os.cpu_count() or 1
        # per mode: the tbx variant compared with ztensor first, then the extra figures
        read_variants = {
            "raw": [("mmap", ["--mmap"]), ("pread copy", [])],
            "zstd-3": [(f"{ncpu} threads", ["--batch", str(ncpu)]), ("1 thread", ["--batch", "1"])],
            "sha256": [("mmap", ["--mmap", "--verify"]),
                       (f"copy, {ncpu} threads", ["--batch", str(ncpu), "--verify"])],
            "crc32c": [("mmap", ["--mmap", "--verify"]),
                       (f"copy, {ncpu} threads", ["--batch", str(ncpu), "--verify"])],
        }

        def tbx_read(path, flags):
            # two passes in one process, the second timed: a warm process, like the Python
            # interpreter that runs ztensor (a fresh process's first pass costs ~5-10 ms more)
            p = run_ok([args.bench_read, "--repeat", "2", *flags, str(path)])
            secs = [float(tok.split("=", 1)[1]) for tok in p.stdout.decode().split()
                    if tok.startswith("seconds=")]
            if len(secs) != 2:
                sys.exit("bench_read printed no seconds=")
            return secs[-1]

        def zt_read(mode, path):
            t = time.perf_counter()
            r = ztensor.Reader(str(path))
            acc = 0
            if mode in ("sha256", "crc32c"):
                for name in r.tensor_names:
                    v = lib.ztensor_reader_read_tensor(r._ptr, name.encode(), 1)
                    if v == ffi.NULL:
                        sys.exit("ztensor verification failed: " + ztensor._get_last_error())
                    if v.len:
                        b = np.frombuffer(ffi.buffer(v.data, v.len), dtype=np.uint8)
                        acc += int(b[::PAGE].sum())
                    lib.ztensor_free_tensor_view(v)
            else:
                for name in r.tensor_names:
                    a = r.read_tensor(name)
                    b = a.reshape(-1).view(np.uint8)
                    acc += int(b[::PAGE].sum())
            del r
            return time.perf_counter() - t

        # files read by both tools
        read_files = {}
        for mode in modes:
            p = tmp / f"read_{mode}.zt"
            if mode in ("raw", "zstd-3"):
                zt_write(mode, p)
            else:
                tbx_write(mode, p)
            read_files[mode] = p
        # check that both read the same bytes
        r_chk = ztensor.Reader(str(read_files["zstd-3"]))
        name0 = r_chk.tensor_names[0]
        p = run_ok([args.tbx, "cat", str(read_files["zstd-3"]), name0])
        assert p.stdout == r_chk.read_tensor(name0).tobytes(), "tbx and ztensor disagree"
        del r_chk

        outs = {"tbx": tmp / "w_tbx.zt", "zt": tmp / "w_zt.zt"}
        extra_w = {"zstd-3": []}           # tbx zstd write with TBX_THREADS=1
        extra_r = {m: [[] for _ in read_variants[m][1:]] for m in modes}
        for rep in range(args.reps + 1):  # rep 0 is the warm-up
            for mode in modes:
                tw = tbx_write(mode, outs["tbx"])
                tw1 = tbx_write(mode, outs["tbx"], threads=1) if mode in extra_w else None
                zw = zt_write(mode, outs["zt"]) if modes[mode][1] is not None else None
                tr = [tbx_read(read_files[mode], v[1]) for v in read_variants[mode]]
                zr = zt_read(mode, read_files[mode])
                if rep == 0:
                    continue
                w_times[mode]["tbx"].append(tw)
                if tw1 is not None:
                    extra_w[mode].append(tw1)
                if zw is not None:
                    w_times[mode]["zt"].append(zw)
                r_times[mode]["tbx"].append(tr[0])
                for k, x in enumerate(tr[1:]):
                    extra_r[mode][k].append(x)
                r_times[mode]["zt"].append(zr)

        med = statistics.median

        def row(kind, mode, d, what=""):
            tb = med(d["tbx"])
            label = f"{mode} ({what})" if what else mode
            line = f"{kind:<6} {label:<24} tbx {tb:7.3f} s {nbytes / tb / 1e9:6.2f} GB/s"
            if d["zt"]:
                zt = med(d["zt"])
                line += f" | ztensor {zt:7.3f} s {nbytes / zt / 1e9:6.2f} GB/s | ratio {zt / tb:5.2f}"
            else:
                line += " | ztensor    (no digest support in its Python API)"
            print(line)

        def extra(kind, label, times):
            tb = med(times)
            print(f"{kind:<6} {label:<24} tbx {tb:7.3f} s {nbytes / tb / 1e9:6.2f} GB/s")

        sizes = {m: read_files[m].stat().st_size for m in modes}
        print(f"file sizes: " + ", ".join(f"{m} {s / 2**20:.0f} MiB" for m, s in sizes.items()))
        for mode in modes:
            row("write", mode, w_times[mode], f"{ncpu} threads" if mode in extra_w else "")
            if mode in extra_w:
                extra("write", f"{mode} (1 thread)", extra_w[mode])
        for mode in modes:
            row("read", mode, r_times[mode], read_variants[mode][0][0])
            for k, v in enumerate(read_variants[mode][1:]):
                extra("read", f"{mode} ({v[0]})", extra_r[mode][k])
        w1, wn = med(extra_w["zstd-3"]), med(w_times["zstd-3"]["tbx"])
        r1, rn = med(extra_r["zstd-3"][0]), med(r_times["zstd-3"]["tbx"])
        print(f"parallel speed-up on {ncpu} CPUs (median 1 thread / median {ncpu} threads): "
              f"zstd-3 decoding {r1 / rn:.2f}x, zstd-3 writing (compression) {w1 / wn:.2f}x")
    finally:
        if not base:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
