#!/usr/bin/env python3
"""Remote reading (src/io/remote.c) against nginx on 127.0.0.1, in one run:

* a full read of one large tensor: `tbx cat URL w > /dev/null` beside `curl -o /dev/null URL`
  of the same file (the whole file: curl's one stream is the ceiling) and beside
  `tbx cat FILE w > /dev/null` from the local disk; medians of --reps runs and the ratios;
  then tbx's throughput at several TBX_HTTP_CONCURRENCY values (ranges in flight);
* `tbx info URL` of the same file, of a GGUF with a 150,000-token vocabulary, and of 4 GiB
  safetensors, GGUF, MCF and zTensor files: the requests
  and bytes nginx logged, beside the header's size.

The file is a safetensors file with one u8 tensor (its bytes are the file's but 8 + header
bytes), written here into a temporary folder (--dir).

* (--only convert) `tbx convert hf://org/repo out.gguf --quant q4_k` of bench_hf_gguf.py's
  synthetic llama directory (--layers 10: 1.06 GiB of f16 in model.safetensors, config.json,
  tokenizer files) served by the same nginx in the Hub's layout (/org/repo/resolve/main/FILE
  -> 302 -> /cdn/..., the tree listing under /api/), HF_ENDPOINT set to it, beside
  download-then-convert: `curl -sfL -o` of every file of the listing (one curl, the files in
  turn) into a local directory named repo, then `tbx convert repo out.gguf --quant q4_k`.
  The streaming conversion runs twice, with the prefetch (the default: the next tensor fetched
  on a thread of its own while the engine works) and without (TBX_HTTP_PREFETCH=0: each
  segment fetched when the reader reaches it).
  --reps interleaved runs (sync and the previous outputs removed, untimed, before each);
  medians of wall time, CPU time, the largest peak RSS (GNU time); the ratios streaming /
  (download + convert) and streaming / max(download, convert) (the floor when the network
  and the work overlap fully), whether tbx's peak RSS <= 256 MiB, and whether the GGUFs are
  the same bytes. Exit status 1 when the RSS is over or the outputs differ.

* (--only s3) the same full read from gofakes3 (the S3-compatible store scripts/bootstrap.sh
  builds into .cache/s3/; --size-mib object put with curl --aws-sigv4): `tbx cat s3://bench/
  big.safetensors w` at TBX_HTTP_CONCURRENCY 1, 2, 4, 8, 16 beside `curl --aws-sigv4 -o
  /dev/null` of the object, medians of --reps, in one run.

--rate N (e.g. 100m) has nginx send each answer at most N bytes/s (limit_rate: a link of
that speed per connection; loopback is otherwise faster than the work).

Usage:

  .venv/bin/python bench/bench_remote.py [--size-mib 1024] [--reps 5] [--dir /tmp]
                                         [--only read,info,convert] [--layers 10]
                                         [--rate 100m]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "python"))
from remote_servers import S3, Nginx  # noqa: E402

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


def write_sparse_st(path: Path, tensors: list[tuple[str, int]]) -> int:
    """A safetensors file of u8 tensors whose data is a hole (zeros the file system does not
    store: a multi-GiB file costs nothing to write); returns the header's size."""
    hdr, off = {}, 0
    for name, n in tensors:
        hdr[name] = {"dtype": "U8", "shape": [n], "data_offsets": [off, off + n]}
        off += n
    header = json.dumps(hdr)
    header += " " * (-len(header) % 8)
    with open(path, "wb") as f:
        f.write(len(header).to_bytes(8, "little"))
        f.write(header.encode())
    os.truncate(path, 8 + len(header) + off)
    return 8 + len(header)


def write_sparse_gguf(path: Path, nbytes: int) -> int:
    """A GGUF with a 150,000-token vocabulary and one f32 tensor of nbytes whose data is
    a hole; returns the offset of its data (the header's size)."""
    import gguf
    import numpy as np
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_token_list([f"token-{i:06d}".encode() for i in range(150000)])
    w.add_token_scores([float(i) for i in range(150000)])
    w.add_tensor_info("w", [nbytes // 4], np.dtype(np.float32), nbytes)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    w.close()
    off = path.stat().st_size
    off += -off % 32
    os.truncate(path, off + nbytes)
    return off


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


def gnu_timed(cmd, env=None) -> tuple[float, float, int]:
    """(wall s, CPU s, peak RSS KiB) of one run under GNU time."""
    e = dict(os.environ)
    if env:
        e.update(env)
    t = time.perf_counter()
    r = subprocess.run(["/usr/bin/time", "-f", "%M %U %S", *map(str, cmd)],
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=e)
    dt = time.perf_counter() - t
    if r.returncode:
        sys.exit(f"failed: {' '.join(map(str, cmd))}\n{r.stderr.decode()}")
    rss, user, system = r.stderr.decode().strip().splitlines()[-1].split()
    return dt, float(user) + float(system), int(rss)


def convert_part(web, root: Path, td: Path, tbx: str, reps: int, layers: int) -> bool:
    """hf://org/repo -> q4_K GGUF, streamed, beside curl of the files + a local conversion."""
    sys.path.insert(0, str(REPO / "bench"))
    from bench_hf_gguf import write_model
    repo = root / "cdn" / "org" / "repo" / "main"
    nbytes = write_model(repo, layers)
    files = sorted(p.name for p in repo.iterdir())
    api = root / "api" / "models" / "org" / "repo" / "tree"
    api.mkdir(parents=True)
    (api / "main").write_text(json.dumps(
        [{"type": "file", "path": f, "size": (repo / f).stat().st_size} for f in files]))
    env = {"HF_ENDPOINT": web.url}
    local = td / "dl" / "repo"  # named as the repository: the GGUF records the model's name
    out_s, out_l, out_n = td / "stream.gguf", td / "local.gguf", td / "noprefetch.gguf"
    curl = ["curl", "-sfL"]
    for f in files:
        curl += ["-o", str(local / f), f"{web.url}/org/repo/resolve/main/{f}"]
    subprocess.run(["cat", *(repo / f for f in files)], stdout=subprocess.DEVNULL, check=True)
    print(f"convert hf://org/repo -> q4_K GGUF: {layers}-layer llama, {nbytes / 2**30:.2f} GiB "
          f"f16 in {len(files)} files, median of {reps} interleaved runs, load average before: "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    rows = {k: [] for k in ("stream", "nopf", "curl", "convert")}
    for _ in range(reps):
        out_s.unlink(missing_ok=True)
        subprocess.run(["sync"], check=True)
        rows["stream"].append(gnu_timed([tbx, "convert", "hf://org/repo", out_s, "--quant",
                                         "q4_k", "--force"], env))
        out_n.unlink(missing_ok=True)
        subprocess.run(["sync"], check=True)
        rows["nopf"].append(gnu_timed([tbx, "convert", "hf://org/repo", out_n, "--quant",
                                       "q4_k", "--force"], {**env, "TBX_HTTP_PREFETCH": "0"}))
        shutil.rmtree(local.parent, ignore_errors=True)
        out_l.unlink(missing_ok=True)
        local.mkdir(parents=True)
        subprocess.run(["sync"], check=True)
        rows["curl"].append(gnu_timed(curl))
        rows["convert"].append(gnu_timed([tbx, "convert", local, out_l, "--quant", "q4_k",
                                          "--force"]))
    med = {k: (statistics.median(r[0] for r in v), statistics.median(r[1] for r in v),
               max(r[2] for r in v) / 1024) for k, v in rows.items()}
    both = [a[0] + b[0] for a, b in zip(rows["curl"], rows["convert"])]
    for k, label in (("stream", "tbx convert hf://org/repo"),
                     ("nopf", "  the same, no prefetch"), ("curl", "curl the files"),
                     ("convert", "tbx convert DIR (local)")):
        w, c, m = med[k]
        print(f"  {label:<28} {w:7.2f} s  CPU {c:6.2f} s  peak RSS {m:7.1f} MiB  "
              f"{nbytes / 2**20 / w:7.0f} MiB/s of input")
    t_both = statistics.median(both)
    print(f"  download then convert        {t_both:7.2f} s (median of the sums)")
    same = out_s.read_bytes() == out_l.read_bytes() == out_n.read_bytes()
    rss = max(med["stream"][2], med["nopf"][2])
    floor = max(med["curl"][0], med["convert"][0])
    for k, label in (("stream", "prefetch"), ("nopf", "no prefetch")):
        print(f"  {label:<12} streaming / (download + convert) = {med[k][0] / t_both:.2f}; "
              f"/ max(download, convert) = {med[k][0] / floor:.2f}; / local convert = "
              f"{med[k][0] / med['convert'][0]:.2f}")
    print(f"  prefetch / no prefetch = {med['stream'][0] / med['nopf'][0]:.2f}; tbx peak RSS "
          f"{rss:.1f} MiB {'<=' if rss <= 256 else '>'} 256 MiB; outputs "
          f"{'the same bytes' if same else 'DIFFER'}")
    print(f"  load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    shutil.rmtree(td / "dl", ignore_errors=True)
    for f in (out_s, out_l, out_n):
        f.unlink(missing_ok=True)
    return same and rss <= 256


def s3_part(root: Path, td: Path, tbx: str, reps: int, size_mib: int) -> None:
    """A full read of one object from gofakes3 by TBX_HTTP_CONCURRENCY, beside curl."""
    user, secret = "benchkey", "benchsecret"
    store = S3(td / "s3").start()
    try:
        obj = f"{store.url}/bench/big.safetensors"
        sig = ["--aws-sigv4", "aws:amz:us-east-1:s3", "--user", f"{user}:{secret}"]
        subprocess.run(["curl", "-sf", "-X", "PUT", *sig, "-T", str(root / "big.safetensors"),
                        obj], check=True, stdout=subprocess.DEVNULL)
        env = {"AWS_ENDPOINT_URL": store.url, "AWS_ACCESS_KEY_ID": user,
               "AWS_SECRET_ACCESS_KEY": secret, "AWS_REGION": "us-east-1"}
        mb = size_mib
        timed(["curl", "-sf", *sig, "-o", "/dev/null", obj])  # the store's caches warm
        print(f"full read of a {size_mib} MiB object from gofakes3 (S3), median of {reps}, "
              f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        t_curl = median_of(reps, ["curl", "-sf", *sig, "-o", "/dev/null", obj])
        print(f"  curl --aws-sigv4 -o /dev/null {t_curl:7.3f} s  {mb / t_curl:8.0f} MiB/s")
        for c in (1, 2, 4, 8, 16):
            t = median_of(reps, [tbx, "cat", "s3://bench/big.safetensors", "w"],
                          {**env, "TBX_HTTP_CONCURRENCY": str(c)})
            print(f"  tbx cat s3://... w, {c:2d} in flight {t:7.3f} s  {mb / t:8.0f} MiB/s  "
                  f"= {t_curl / t:.2f} x curl's throughput")
        print(f"  load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    finally:
        store.stop()


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
    ap.add_argument("--only", default="read,info,convert",
                    help="the parts: read (full read), info (tbx info), convert (hf:// -> q4_K), "
                         "s3 (full read from gofakes3 by concurrency)")
    ap.add_argument("--layers", type=int, default=10, help="the convert part's model depth")
    ap.add_argument("--rate", default=None,
                    help="nginx's limit_rate for every answer (bytes/s, e.g. 100m); none: off")
    args = ap.parse_args()
    only = set(args.only.split(","))
    if only - {"read", "info", "convert", "s3"}:
        sys.exit("--only: of read, info, convert, s3")
    ok = True
    tbx = args.tbx
    with tempfile.TemporaryDirectory(dir=args.dir, prefix="tbx-bench-remote-") as td:
        td = Path(td)
        root = td / "www"
        root.mkdir()
        size = args.size_mib * MIB
        if only & {"read", "info", "s3"}:
            st_header = write_st(root / "big.safetensors", size)
            gguf_header = write_gguf(root / "vocab.gguf")
        if "info" in only:  # the sizes: 4 GiB files (holes: nothing written)
            st4_header = write_sparse_st(root / "big4.safetensors",
                                         [("w", 4 << 30), ("m64", 64 * MIB)])
            gguf4_header = write_sparse_gguf(root / "vocab4.gguf", 4 << 30)
            # the same tensors as MCF and zTensor (written whole by tbx: ~4 GiB each); their
            # "header" is every byte that is not tensor data (zTensor's manifest is at the end)
            other4 = {}
            for ext in ("mcf", "zt"):
                subprocess.run([tbx, "convert", "--quiet", str(root / "big4.safetensors"),
                                str(root / f"big4.{ext}")], check=True)
                other4[f"big4.{ext}"] = (root / f"big4.{ext}").stat().st_size - (4 << 30) - \
                    64 * MIB
        web = Nginx(td / "nginx", root, limit_rate=args.rate).start()
        if args.rate:
            print(f"nginx: limit_rate {args.rate} (bytes/s of each answer)")
        try:
            if "read" in only:
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
                    t = median_of(args.reps, [tbx, "cat", url, "w"],
                                  {"TBX_HTTP_CONCURRENCY": str(c)})
                    print(f"    {c:3d}: {t:7.3f} s  {mb / t:8.0f} MiB/s")
            if "info" in only:
                print("tbx info URL: requests and bytes nginx sent (headers included)")
                for name, header in (("big.safetensors", st_header), ("vocab.gguf", gguf_header),
                                     ("big4.safetensors", st4_header),
                                     ("vocab4.gguf", gguf4_header), *other4.items()):
                    m = web.mark()
                    subprocess.run([tbx, "info", f"{web.url}/{name}"], check=True,
                                   stdout=subprocess.DEVNULL)
                    reqs = web.requests(m)
                    sent = sum(r["bytes"] for r in reqs)
                    fsize = (root / name).stat().st_size
                    print(f"  {name:16s} file {fsize / MIB:8.1f} MiB, header {header:9d} B: "
                          f"{len(reqs)} requests, {sent} B ({sent / header:.2f} x header; "
                          f"{'<=' if sent <= 2 * header + MIB else '>'} 2 x header + 1 MiB)")
                m = web.mark()
                p = subprocess.run([tbx, "cat", f"{web.url}/big4.safetensors", "m64"],
                                   check=True, capture_output=True)
                reqs = web.requests(m)
                sent = sum(r["bytes"] for r in reqs)
                assert len(p.stdout) == 64 * MIB
                print(f"tbx cat URL m64 (a 64 MiB tensor of big4.safetensors): {len(reqs)} "
                      f"requests, {sent} B = tensor + {(sent - 64 * MIB) / MIB:.2f} MiB "
                      f"({'<=' if sent <= 66 * MIB else '>'} tensor + 2 MiB)")
            if "convert" in only:
                ok = convert_part(web, root, td, tbx, args.reps, args.layers) and ok
            if "s3" in only:
                s3_part(root, td, tbx, args.reps, args.size_mib)
        finally:
            web.stop()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
