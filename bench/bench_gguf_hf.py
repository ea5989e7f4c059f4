#!/usr/bin/env python3
"""GGUF (q4_K) -> Hugging Face bf16 directory: `tbx convert` beside gguf-py's dequantize-and-save.

    .venv/bin/python bench/bench_gguf_hf.py [--reps 2] [--layers 40] [--tbx build/tbx]
    BENCH_DIR=/path     where the files go (default: a temporary directory, removed after)

The model: bench_hf_gguf.py's synthetic llama-family Hugging Face directory (TinyLlama-1.1B's
shapes, --layers blocks: 40 = 3.53 GiB of f16, whose q4_K GGUF is 1.07 GiB as issue 23 asks;
10 = 1.06 GiB, a 0.33 GiB GGUF), made into a GGUF with every matrix in q4_K by
`tbx convert DIR model.gguf --quant q4_k` (untimed; the norms stay f32). Then --reps
interleaved runs (`sync`, untimed, and the previous output removed before each) of
  floor     `dd` of the output's size from /dev/zero with conv=fsync (the bf16 bytes written
            once, durable as tbx's output is; the GGUF, a third of that, is read from the warm
            page cache by both converters)
  tbx       `tbx convert model.gguf OUT/ --dtype bf16` (config.json, tokenizer, weights:
            every tensor dequantized, Q/K rows put back in the Hugging Face order, bf16)
  gguf-py   the script PEER below, by .venv's python with llama.cpp's own gguf-py first on the
            path (.venv/llama-cpp-src/..., TBX_LLAMA_CPP_SRC overrides): GGUFReader,
            gguf.quants.dequantize of each tensor, the Hugging Face names and Q/K order, torch's
            bf16 rounding, safetensors.torch.save_file (the weights only: no config, no
            tokenizer; it holds the whole bf16 model in memory, as save_file needs: 5.3 GiB of
            peak RSS at 40 layers; mind the machine's memory)
medians of wall and CPU time (user + system), the largest peak RSS (GNU time), floor / tbx,
gguf-py / tbx, and whether tbx's peak RSS <= 256 MiB (issue 23's bar). Then the last run's
two outputs are compared tensor by tensor (names, shapes, bf16 values): equal, or how many
values differ and by how many bf16 units in the last place (1 ulp = both rounded the same f32
from a dequantization that differs in the last f32 bit). Exit status 1 when tbx's RSS is over
the bar, the tensor sets differ, or a value differs by more than 1 bf16 ulp.
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
sys.path.insert(0, str(HERE))
from bench_hf_gguf import write_model, llama_cpp_peers  # noqa: E402

# gguf-py's way back: GGUF_PATH OUT_FILE (gguf-py's directory first on sys.path: argv[3])
PEER = r"""
import sys
sys.path.insert(0, sys.argv[3])
import numpy as np, torch, gguf
from gguf.quants import dequantize
from safetensors.torch import save_file
r = gguf.GGUFReader(sys.argv[1])
arch = bytes(r.fields["general.architecture"].parts[-1]).decode()
def num(k):
    return int(r.fields[f"{arch}.{k}"].parts[-1][0])
n_head, n_kv = num("attention.head_count"), num("attention.head_count_kv")
names = {"token_embd": "model.embed_tokens", "output_norm": "model.norm", "output": "lm_head",
         "attn_norm": "input_layernorm", "ffn_norm": "post_attention_layernorm",
         "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj",
         "attn_v": "self_attn.v_proj", "attn_output": "self_attn.o_proj",
         "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj"}
def unpermute(w, heads):
    # llama.cpp's converter interleaves the two rotary halves of each head's rows: undone
    return w.reshape(heads, w.shape[0] // heads // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)
out = {}
for t in r.tensors:
    parts = t.name.split(".")
    if parts[0] == "blk":
        hf = f"model.layers.{parts[1]}.{names[parts[2]]}.{parts[3]}"
    else:
        hf = f"{names[parts[0]]}.{parts[1]}"
    a = dequantize(t.data, t.tensor_type).astype(np.float32, copy=False)
    a = a.reshape([int(x) for x in reversed(t.shape)])
    if parts[-2:-1] == ["attn_q"]:
        a = unpermute(a, n_head)
    elif parts[-2:-1] == ["attn_k"]:
        a = unpermute(a, n_kv)
    out[hf] = torch.from_numpy(np.ascontiguousarray(a)).to(torch.bfloat16)
save_file(out, sys.argv[2], metadata={"format": "pt"})
"""


def timed(argv, cpu: list | None = None) -> tuple[float, int]:
    """(wall seconds, peak RSS KiB) of one run under GNU time; its CPU seconds appended to cpu."""
    t0 = time.perf_counter()
    r = subprocess.run(["/usr/bin/time", "-f", "%M %U %S", *map(str, argv)],
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    dt = time.perf_counter() - t0
    if r.returncode != 0:
        sys.exit(f"failed: {' '.join(map(str, argv))}\n{r.stderr.decode()}")
    rss, user, system = r.stderr.decode().strip().splitlines()[-1].split()
    if cpu is not None:
        cpu.append(float(user) + float(system))
    return dt, int(rss)


def compare(tbx_dir: Path, peer_file: Path) -> tuple[bool, str]:
    """Tensor by tensor: (ok, a line saying how the two outputs compare)."""
    import json
    import torch
    from safetensors import safe_open
    idx = tbx_dir / "model.safetensors.index.json"
    files = sorted({tbx_dir / f for f in json.loads(idx.read_text())["weight_map"].values()}) \
        if idx.exists() else [tbx_dir / "model.safetensors"]
    mine = {}
    for f in files:
        with safe_open(str(f), framework="pt") as g:
            for k in g.keys():
                mine[k] = f
    with safe_open(str(peer_file), framework="pt") as p:
        theirs = set(p.keys())
        if set(mine) != theirs:
            return False, (f"tensor sets differ: only tbx {sorted(set(mine) - theirs)[:5]}, "
                           f"only gguf-py {sorted(theirs - set(mine))[:5]}")
        ndiff = nval = worst = 0
        for k in sorted(theirs):
            b = p.get_tensor(k)
            with safe_open(str(mine[k]), framework="pt") as g:
                a = g.get_tensor(k)
            if a.dtype != torch.bfloat16 or a.shape != b.shape:
                return False, f"{k}: tbx {a.dtype} {tuple(a.shape)}, gguf-py {b.dtype} {tuple(b.shape)}"
            nval += a.numel()
            if torch.equal(a, b):
                continue
            # bf16 bit patterns as ordered integers: the distance in units in the last place
            ai = a.view(torch.int16).to(torch.int32)
            bi = b.view(torch.int16).to(torch.int32)
            ai = torch.where(ai < 0, -32768 - ai, ai)
            bi = torch.where(bi < 0, -32768 - bi, bi)
            d = (ai - bi).abs()
            ndiff += int((d != 0).sum())
            worst = max(worst, int(d.max()))
    ok = worst <= 1
    return ok, (f"{len(theirs)} tensors, {nval} values: {ndiff} differ "
                f"(largest {worst} bf16 ulp){'' if ok else ' -- MORE THAN 1 ULP'}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--layers", type=int, default=40)
    ap.add_argument("--tbx", default=os.environ.get("TBX", str(REPO / "build" / "tbx")))
    a = ap.parse_args()
    if not shutil.which("/usr/bin/time"):
        sys.exit("bench_gguf_hf: GNU time (/usr/bin/time) is needed for the peak RSS")
    vendor = llama_cpp_peers()
    base = os.environ.get("BENCH_DIR")
    tmp = Path(base) if base else Path(tempfile.mkdtemp(prefix="bench_gguf_hf_"))
    tmp.mkdir(parents=True, exist_ok=True)
    ok = True
    try:
        d = tmp / "model"
        nbytes = write_model(d, a.layers)
        gg = tmp / "model.gguf"
        r = subprocess.run([a.tbx, "convert", d, gg, "--quant", "q4_k", "--force"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        if r.returncode:
            sys.exit(f"bench_gguf_hf: tbx convert to q4_k failed: {r.stderr.decode()}")
        shutil.rmtree(d)  # only the GGUF is needed from here on
        peer = tmp / "peer.py"
        peer.write_text(PEER)
        out_tbx, out_peer = tmp / "out-tbx", tmp / "out-peer.safetensors"
        gsize = gg.stat().st_size
        subprocess.run(["cat", gg], stdout=subprocess.DEVNULL, check=True)  # warm
        print(f"bench_gguf_hf: {a.layers}-layer llama ({nbytes / 2**30:.2f} GiB f16 -> GGUF "
              f"q4_K {gsize / 2**30:.3f} GiB -> bf16 {nbytes / 2**30:.2f} GiB), {a.reps} "
              f"interleaved runs, page cache warm, load average before: "
              f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        rows = {k: ([], [], []) for k in ("floor", "tbx", "gguf-py")}  # wall, rss, cpu
        for _ in range(a.reps):
            for k in rows:
                # this row's previous output (the others' stay for the comparison)
                if k == "tbx":
                    shutil.rmtree(out_tbx, ignore_errors=True)
                (out_peer if k == "gguf-py" else tmp / "zero").unlink(missing_ok=True)
                subprocess.run(["sync"], check=True)
                wall, rss, cpu = rows[k]
                if k == "floor":
                    t, m = timed(["dd", "if=/dev/zero", f"of={tmp / 'zero'}", "bs=8M",
                                  f"count={(nbytes + (8 << 20) - 1) >> 23}", "conv=fsync",
                                  "status=none"], cpu)
                    wall.append(t)
                    rss.append(m)
                elif k == "tbx":
                    t, m = timed([a.tbx, "convert", gg, f"{out_tbx}/", "--dtype", "bf16"], cpu)
                    wall.append(t)
                    rss.append(m)
                else:
                    t, m = timed([sys.executable, peer, gg, out_peer, vendor / "gguf-py"], cpu)
                    wall.append(t)
                    rss.append(m)
        (tmp / "zero").unlink(missing_ok=True)
        med = {k: (statistics.median(v[0]), max(v[1]) / 1024, statistics.median(v[2]))
               for k, v in rows.items()}
        print(f"{'row':<9} {'wall s':>8} {'CPU s':>8} {'peak RSS MiB':>13} {'GiB/s out':>10}")
        for k, (w, m, c) in med.items():
            print(f"{k:<9} {w:>8.2f} {c:>8.2f} {m:>13.1f} {nbytes / 2**30 / w:>10.2f}")
        t = med["tbx"][0]
        print(f"floor / tbx = {med['floor'][0] / t:.2f} (fraction of the physical limit); "
              f"gguf-py / tbx = {med['gguf-py'][0] / t:.2f} wall, "
              f"{med['gguf-py'][2] / med['tbx'][2]:.2f} CPU; "
              f"tbx peak RSS {med['tbx'][1]:.1f} MiB "
              f"{'<=' if med['tbx'][1] <= 256 else '>'} 256 MiB")
        ok = med["tbx"][1] <= 256
        same, line = compare(out_tbx, out_peer)
        print(f"outputs (last run): {line}")
        ok = ok and same
        print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    finally:
        if not base:
            shutil.rmtree(tmp, ignore_errors=True)
        if not ok:
            sys.exit(1)


if __name__ == "__main__":
    main()
