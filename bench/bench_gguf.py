#!/usr/bin/env python3
"""GGUF: tensorbox (the `tbx` CLI) vs gguf-py (PyPI `gguf`), page-cache warm.

    .venv/bin/python bench/bench_gguf.py [--reps 7] [--tbx build/tbx] [--only meta,deq,quant]
    BENCH_SCALE=4 ...   four times larger tensors for (b) and (c) (default 1)
    BENCH_DIR=/path     where the files go (default: a temporary directory, removed after)

(a) metadata parse of a large header: a 150,000-token vocabulary (tokenizer.ggml.tokens string
    array, .scores f32 array, .token_type i32 array), 24 other keys and 320 tensor infos; the
    tensor data is a sparse hole made with truncate (nothing is read from it).
      tbx      `tbx info FILE --json > /dev/null` (a process: start-up, parse, and printing
               every token as JSON included)
      gguf-py  gguf.GGUFReader(FILE) in this process (no interpreter start-up; it parses the
               header into numpy views and does not print)
(b) dequantization throughput per type: one [rows, 4096] tensor of 8M elements (x BENCH_SCALE)
    quantized by tbx from normal f32 values.
      tbx      `tbx cat FILE w --as f32 > /dev/null` (a process; pread + dequantize + write)
      gguf-py  gguf.quants.dequantize(bytes already in memory, type)
    GB/s = f32 output bytes / time.
(c) quantization throughput, q8_0 / q4_K / q6_K, of the same f32 tensor, on all cores and on
    one thread:
      tbx      `tbx convert F32.gguf OUT.gguf --quant TYPE --force` (a process; read, quantize,
               write the file and fsync it); one thread: TBX_THREADS=1
      ggml     ggml_quantize_chunk of libggml-base (llama.cpp's own code, the library of
               llama_cpp in .venv, through ctypes) on the array in memory: the rows split in
               one chunk per thread as llama_model_quantize does (ctypes releases the GIL), and
               one call on one thread; the bytes are checked equal to tbx's tensor
      gguf-py  gguf.quants.quantize(array in memory, type): q8_0 only (gguf-py 0.19 has no
               K-quant quantizer)
    GB/s = f32 input bytes / time; ratio = peer / tbx. A missing llama_cpp is an error.
Timing: medians of interleaved repetitions: --reps for (a) (no warm-up: the file was just
written; GGUFReader alone takes ~15 s a parse, most of the default run), max(3, reps - 2)
after one warm-up for (b) and (c). ratio = gguf-py / tbx (> 1: tensorbox faster).
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent

DEQ_TYPES = ["q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "q2_k", "q3_k", "q4_k", "q5_k", "q6_k"]
QUANT_TYPES = ["q8_0", "q4_k", "q6_k"]


def find(env, *cands):
    v = os.environ.get(env)
    if v:
        return v
    for c in cands:
        if Path(c).is_file():
            return str(c)
    return str(cands[0])


def gstr(b: bytes) -> bytes:
    return struct.pack("<Q", len(b)) + b


def make_big_header(path: Path, ntokens: int = 150_000, ntensors: int = 320):
    """GGUF v3 with a large vocabulary and many tensor infos; data is a sparse hole."""
    import numpy as np
    kv = []
    kv.append(gstr(b"general.architecture") + struct.pack("<I", 8) + gstr(b"llama"))
    for i in range(24):
        kv.append(gstr(f"llama.param_{i}".encode()) + struct.pack("<II", 4, i * 7))
    toks = [f"tok_{i}_{'x' * (i % 13)}".encode() for i in range(ntokens)]
    kv.append(gstr(b"tokenizer.ggml.tokens") + struct.pack("<IIQ", 9, 8, ntokens)
              + b"".join(gstr(t) for t in toks))
    scores = np.linspace(-10, 0, ntokens, dtype="<f4").tobytes()
    kv.append(gstr(b"tokenizer.ggml.scores") + struct.pack("<IIQ", 9, 6, ntokens) + scores)
    ttype = (np.arange(ntokens, dtype="<i4") % 6).tobytes()
    kv.append(gstr(b"tokenizer.ggml.token_type") + struct.pack("<IIQ", 9, 5, ntokens) + ttype)
    ti = []
    rel = 0
    for i in range(ntensors):
        ne = [1024, 1024] if i % 3 else [1024]
        nbytes = 2 * ne[0] * (ne[1] if len(ne) > 1 else 1)  # f16
        ti.append(gstr(f"blk.{i // 9}.w{i % 9}.weight".encode()) + struct.pack("<I", len(ne))
                  + b"".join(struct.pack("<Q", n) for n in ne) + struct.pack("<IQ", 1, rel))
        rel += nbytes + (-nbytes % 32)
    head = b"GGUF" + struct.pack("<IQQ", 3, ntensors, len(kv)) + b"".join(kv) + b"".join(ti)
    head += b"\0" * (-len(head) % 32)
    with open(path, "wb") as f:
        f.write(head)
        f.truncate(len(head) + rel)
    return len(head)


def write_f32_gguf(path: Path, arr):
    import gguf
    w = gguf.GGUFWriter(str(path), "bench")
    w.add_tensor("w", arr)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def run_tbx(argv):
    t = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t


def timed(fn):
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def interleave(reps, a, b, warm=True):
    if warm:
        a(), b()
    ta, tb = [], []
    for _ in range(reps):
        ta.append(a())
        tb.append(b())
    return statistics.median(ta), statistics.median(tb)


def ggml_lib():
    """libggml-base of llama_cpp in .venv through ctypes; missing: an error."""
    import ctypes
    import importlib.util
    spec = importlib.util.find_spec("llama_cpp")
    if spec is None or not spec.submodule_search_locations:
        sys.exit(f"bench_gguf: (c) needs llama_cpp (llama-cpp-python) in {sys.executable}: "
                 f"run it with .venv/bin/python (scripts/bootstrap.sh --llama installs it)")
    path = Path(list(spec.submodule_search_locations)[0]) / "lib" / "libggml-base.so"
    if not path.is_file():
        sys.exit(f"bench_gguf: no libggml-base.so at {path}")
    lib = ctypes.CDLL(str(path))
    lib.ggml_quantize_chunk.restype = ctypes.c_size_t
    lib.ggml_quantize_chunk.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p,
                                        ctypes.c_int64, ctypes.c_int64, ctypes.c_int64,
                                        ctypes.c_void_p]
    lib.ggml_row_size.restype = ctypes.c_size_t
    lib.ggml_row_size.argtypes = [ctypes.c_int, ctypes.c_int64]
    lib.ggml_quantize_init.argtypes = [ctypes.c_int]
    lib.ggml_type_name.restype = ctypes.c_char_p
    lib.ggml_type_name.argtypes = [ctypes.c_int]
    return lib


def ggml_quantizer(lib, name: str, arr, pool, nthread: int):
    """() -> bytes: ggml_quantize_chunk of the whole array, nthread chunks of rows."""
    import numpy as np
    t = next((i for i in range(64) if (lib.ggml_type_name(i) or b"").decode() == name), None)
    if t is None:
        sys.exit(f"bench_gguf: libggml has no type {name}")
    lib.ggml_quantize_init(t)
    rows, cols = arr.shape
    rsz = lib.ggml_row_size(t, cols)
    dst = np.zeros(rsz * rows, np.uint8)
    per = -(-rows // nthread)
    chunks = [(r, min(per, rows - r)) for r in range(0, rows, per)]

    def one(c):
        r, n = c
        # src and dst are the bases; start (in values) places both, as llama.cpp calls it
        got = lib.ggml_quantize_chunk(t, arr.ctypes.data, dst.ctypes.data, r * cols, n, cols,
                                      None)
        assert got == n * rsz, (name, got, n * rsz)

    def run():
        if nthread == 1:
            one((0, rows))
        else:
            list(pool.map(one, chunks))
        return dst
    return run


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--tbx", default=find("TBX", REPO / "build" / "tbx"))
    ap.add_argument("--only", default="meta,deq,quant")
    args = ap.parse_args()
    import numpy as np
    import gguf
    Q = gguf.GGMLQuantizationType
    scale = float(os.environ.get("BENCH_SCALE", "1"))
    only = set(args.only.split(","))
    tbx = args.tbx
    if not Path(tbx).is_file():
        sys.exit(f"tbx not found: {tbx} (build it, or pass --tbx / TBX=)")

    own = "BENCH_DIR" not in os.environ
    d = Path(tempfile.mkdtemp(prefix="bench_gguf.")) if own else Path(os.environ["BENCH_DIR"])
    d.mkdir(parents=True, exist_ok=True)
    rows = []
    try:
        if "meta" in only:
            p = d / "big_header.gguf"
            hlen = make_big_header(p)
            tt, tp = interleave(args.reps,
                                lambda: run_tbx([tbx, "info", str(p), "--json"]),
                                lambda: timed(lambda: gguf.GGUFReader(str(p))),
                                warm=False)  # just written: page-cache warm; GGUFReader ~15 s
            rows.append(("(a) header parse", f"{hlen / 1e6:.1f} MB hdr", tt, tp, "gguf-py"))

        n = int(8 * 1024 * 1024 * scale)
        cols = 4096
        nrows = max(1, n // cols)
        src = None
        f32_bytes = 0
        if "deq" in only or "quant" in only:
            rng = np.random.default_rng(1)
            arr = rng.standard_normal((nrows, cols)).astype(np.float32)
            src = d / "f32.gguf"
            write_f32_gguf(src, arr)
            f32_bytes = arr.nbytes

        if "deq" in only:
            for t in DEQ_TYPES:
                qf = d / f"{t}.gguf"
                subprocess.run([tbx, "convert", str(src), str(qf), "--quant", t, "--force"],
                               check=True)
                rd = gguf.GGUFReader(str(qf))
                ten = rd.tensors[0]
                raw = np.array(ten.data)  # in memory
                qt = ten.tensor_type
                del rd, ten
                tt, tp = interleave(
                    max(3, args.reps - 2),
                    lambda: run_tbx([tbx, "cat", str(qf), "w", "--as", "f32"]),
                    lambda: timed(lambda: gguf.quants.dequantize(raw, qt)))
                rows.append((f"(b) dequant {t}", f"{f32_bytes / 1e6:.0f} MB f32", tt, tp,
                             "gguf-py"))
                qf.unlink()

        if "quant" in only:
            from concurrent.futures import ThreadPoolExecutor
            lib = ggml_lib()
            ncpu = os.cpu_count() or 1
            pool = ThreadPoolExecutor(ncpu)
            reps = max(3, args.reps - 2)
            one = dict(os.environ, TBX_THREADS="1")
            for t in QUANT_TYPES:
                out = d / f"q_{t}.gguf"
                size = f"{f32_bytes / 1e6:.0f} MB f32"
                argv = [tbx, "convert", str(src), str(out), "--quant", t, "--force"]

                def tbx_run(env=None):
                    tm = time.perf_counter()
                    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, env=env)
                    return time.perf_counter() - tm
                gname = {"q4_k": "q4_K", "q6_k": "q6_K"}.get(t, t)
                g_all = ggml_quantizer(lib, gname, arr, pool, ncpu)
                g_one = ggml_quantizer(lib, gname, arr, pool, 1)
                tt, tg = interleave(reps, tbx_run, lambda: timed(g_all))
                rows.append((f"(c) quant {t} {ncpu}t", size, tt, tg, "ggml"))
                tt1, tg1 = interleave(reps, lambda: tbx_run(one), lambda: timed(g_one))
                rows.append((f"(c) quant {t} 1t", size, tt1, tg1, "ggml"))
                if t == "q8_0":
                    _, tp = interleave(1, lambda: 0.0,
                                       lambda: timed(lambda: gguf.quants.quantize(arr, Q.Q8_0)))
                    rows.append((f"(c) quant {t} 1t", size, tt1, tp, "gguf-py"))
                rd = gguf.GGUFReader(str(out))
                same = np.array_equal(np.asarray(rd.tensors[0].data).view(np.uint8).ravel(),
                                      g_all())
                del rd
                if not same:
                    sys.exit(f"bench_gguf: tbx's {t} bytes differ from ggml_quantize_chunk's")
            pool.shutdown()
    finally:
        if own:
            shutil.rmtree(d, ignore_errors=True)

    from importlib.metadata import version
    print(f"tbx: {tbx}   gguf-py: {version('gguf')}   llama_cpp: {version('llama_cpp_python')}"
          f"   reps: {args.reps} (b, c: {max(3, args.reps - 2)})   BENCH_SCALE={scale:g}")
    hdr = f"{'case':<22} {'size':>14} {'tbx s':>9} {'peer':>8} {'peer s':>9} {'tbx GB/s':>9} " \
          f"{'peer GB/s':>9} {'ratio':>7}"
    print(hdr)
    print("-" * len(hdr))
    for name, size, tt, tp, peer in rows:
        gb = name.startswith(("(b)", "(c)"))
        nb = f32_bytes if gb else 0
        print(f"{name:<22} {size:>14} {tt:9.4f} {peer:>8} {tp:9.4f} "
              f"{nb / tt / 1e9 if gb else float('nan'):9.2f} "
              f"{nb / tp / 1e9 if gb else float('nan'):9.2f} {tp / tt:7.2f}")
    print("ratio = peer median / tbx median (> 1: tensorbox faster); medians of interleaved "
          "reps; Nt = N threads (tbx: a process that reads, writes and fsyncs; ggml "
          "ggml_quantize_chunk in memory)")


if __name__ == "__main__":
    main()
