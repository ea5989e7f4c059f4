#!/usr/bin/env python3
"""Remote reading (src/io/remote.c) against nginx on 127.0.0.1, in one run:

* a full read of one large tensor: `tbx cat URL w > /dev/null` beside `curl -o /dev/null URL`
  of the same file (the whole file: curl's one stream is the ceiling) and beside
  `tbx cat FILE w > /dev/null` from the local disk; medians of --reps runs and the ratios;
  then tbx's throughput at several TBX_HTTP_CONCURRENCY values (ranges in flight);
* `tbx info URL` of the same file and of a GGUF with a 150,000-token vocabulary: the requests
  and bytes nginx logged, beside the header's size.

The file is a safetensors file with one u8 tensor (its bytes are the file's but 8 + header
bytes), written here into a temporary folder (--dir). Usage:

  .venv/bin/python bench/bench_remote.py [--size-mib 1024] [--reps 5] [--dir /tmp]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "python"))
from remote_servers import Nginx  # noqa: E402

MIB = 1 << 20


def write_st(path: Path, nbytes: int) -> int:
    header = json.dumps({"w": {"dtype": "U8", "shape": [nbytes], "data_offsets": [0, nbytes]}})
    header += " " * (-len(header) % 8)
    block = bytes(range(256)) * (4 * MIB // 256)
    with open(path, "wb") as f:
        f.write(len(header).to_bytes(8, "little"))
        f.write(header.encode())
        left = nbytes
        while left:
            n = min(left, len(block))
            f.write(block[:n])
            left -= n
    return 8 + len(header)


def write_gguf(path: Path) -> int:
    import gguf
    import numpy as np
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_token_list([f"token-{i:06d}".encode() for i in range(150000)])
    w.add_token_scores([float(i) for i in range(150000)])
    w.add_tensor("w", np.zeros((4096, 1024), dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return int(gguf.GGUFReader(str(path)).data_offset)


def timed(cmd, env=None) -> float:
    e = dict(os.environ)
    if env:
        e.update(env)
    t = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=e)
    return time.perf_counter() - t


def median_of(reps, cmd, env=None) -> float:
    return statistics.median(timed(cmd, env) for _ in range(reps))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size-mib", type=int, default=1024)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--dir", default=None, help="where the files are written (a temp folder)")
    ap.add_argument("--tbx", default=os.environ.get("TBX", str(REPO / "build" / "tbx")))
    args = ap.parse_args()
    tbx = args.tbx
    with tempfile.TemporaryDirectory(dir=args.dir, prefix="tbx-bench-remote-") as td:
        td = Path(td)
        root = td / "www"
        root.mkdir()
        size = args.size_mib * MIB
        st_header = write_st(root / "big.safetensors", size)
        gguf_header = write_gguf(root / "vocab.gguf")
        web = Nginx(td / "nginx", root).start()
        try:
            url = f"{web.url}/big.safetensors"
            local = root / "big.safetensors"
            # warm the page cache so every side reads from memory
            timed(["cat", str(local)])
            print(f"full read of a {args.size_mib} MiB tensor, median of {args.reps} "
                  f"(2 cores shared; nice'd runs)")
            t_curl = median_of(args.reps, ["curl", "-sf", "-o", "/dev/null", url])
            t_tbx = median_of(args.reps, [tbx, "cat", url, "w"])
            t_loc = median_of(args.reps, [tbx, "cat", str(local), "w"])
            mb = size / MIB
            print(f"  curl -o /dev/null URL      {t_curl:7.3f} s  {mb / t_curl:8.0f} MiB/s")
            print(f"  tbx cat URL w              {t_tbx:7.3f} s  {mb / t_tbx:8.0f} MiB/s  "
                  f"= {t_curl / t_tbx:.2f} x curl's throughput")
            print(f"  tbx cat FILE w (local)     {t_loc:7.3f} s  {mb / t_loc:8.0f} MiB/s  "
                  f"(remote = {t_loc / t_tbx:.2f} x local)")
            print("  tbx cat URL w by TBX_HTTP_CONCURRENCY (ranges of 8 MiB in flight):")
            for c in (1, 2, 4, 8, 16):
                t = median_of(args.reps, [tbx, "cat", url, "w"], {"TBX_HTTP_CONCURRENCY": str(c)})
                print(f"    {c:3d}: {t:7.3f} s  {mb / t:8.0f} MiB/s")
            print("tbx info URL: requests and bytes nginx sent (headers included)")
            for name, header in (("big.safetensors", st_header), ("vocab.gguf", gguf_header)):
                m = web.mark()
                subprocess.run([tbx, "info", f"{web.url}/{name}"], check=True,
                               stdout=subprocess.DEVNULL)
                reqs = web.requests(m)
                sent = sum(r["bytes"] for r in reqs)
                fsize = (root / name).stat().st_size
                print(f"  {name:16s} file {fsize / MIB:8.1f} MiB, header {header:9d} B: "
                      f"{len(reqs)} requests, {sent} B ({sent / header:.2f} x header)")
        finally:
            web.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
