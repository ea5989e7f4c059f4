#!/usr/bin/env python3
"""Hugging Face model directory -> llama.cpp GGUF: wall time, CPU time and peak RSS of `tbx convert`.

    .venv/bin/python bench/bench_hf_gguf.py [--reps 3] [--layers 10] [--tbx build/tbx]
    BENCH_DIR=/path     where the files go (default: a temporary directory, removed after)

The model is a synthetic llama-family directory of realistic shapes (TinyLlama-1.1B's: hidden
2048, 32 heads of 64 with 4 key/value heads, feed-forward 5632, vocabulary 32000), --layers
blocks deep (10: 1.06 GiB of f16 in model.safetensors), random f16 weights, a small BPE
tokenizer (tokenizers) and the config.json a llama checkpoint carries.
  cp        `cp model.safetensors COPY` (the bytes the conversion must at least move; cp
            leaves them dirty in the page cache; coreutils 9 copies with copy_file_range, the
            kernel path tbx takes for unchanged tensors) and `cp` + `sync COPY` (the
            durability tbx gives: it fsyncs its output before the rename)
  f16       `tbx convert DIR out.gguf --force` (f16 weights kept, norms to f32, q/k rows
            reordered, tokenizer and keys written; durable: writeback started every 32 MiB,
            fsync before the rename), and the same with --no-sync (no fsync, no early
            writeback: what cp does)
  q4_K      `tbx convert DIR out.gguf --quant q4_k --force` (one run: CPU-bound)
Page cache warm (one untimed cp first), `sync` (untimed) before every timed run so that no
run pays for the previous one's dirty pages, and every run writes a new file (the previous
copy or output removed untimed: replacing a 1 GiB file costs its eviction, ~0.1 s of system
time); medians of interleaved repetitions for cp and f16; peak RSS and CPU time (user +
system, medians) from GNU time: on a shared machine the CPU time varies less than the wall
time. Targets (issue 13): f16 within 1.5x of cp, peak RSS <= 256 MiB; printed for each
pair of like durability (tbx --no-sync / cp, tbx / cp + sync) and for tbx / cp.
"""
from __future__ import annotations

import argparse
import json
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
E, H, KV, FF, V = 2048, 32, 4, 5632, 32000


def shapes(layers: int):
    D = E // H
    out = [("model.embed_tokens.weight", (V, E)), ("model.norm.weight", (E,)),
           ("lm_head.weight", (V, E))]
    for l in range(layers):
        p = f"model.layers.{l}."
        out += [(p + "input_layernorm.weight", (E,)),
                (p + "post_attention_layernorm.weight", (E,)),
                (p + "self_attn.q_proj.weight", (H * D, E)),
                (p + "self_attn.k_proj.weight", (KV * D, E)),
                (p + "self_attn.v_proj.weight", (KV * D, E)),
                (p + "self_attn.o_proj.weight", (E, H * D)),
                (p + "mlp.gate_proj.weight", (FF, E)),
                (p + "mlp.up_proj.weight", (FF, E)),
                (p + "mlp.down_proj.weight", (E, FF))]
    return out


def write_model(d: Path, layers: int):
    import numpy as np
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    d.mkdir(parents=True, exist_ok=True)
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.train_from_iterator(["a synthetic llama model for a conversion benchmark"] * 4,
                            trainers.BpeTrainer(vocab_size=300, special_tokens=["<s>", "</s>"],
                                                initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tok.save(str(d / "tokenizer.json"))
    (d / "tokenizer_config.json").write_text(json.dumps({"bos_token": "<s>", "eos_token": "</s>"}))
    (d / "config.json").write_text(json.dumps({
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": E,
        "intermediate_size": FF, "num_hidden_layers": layers, "num_attention_heads": H,
        "num_key_value_heads": KV, "max_position_embeddings": 2048, "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0, "vocab_size": V, "torch_dtype": "float16"}, indent=2))
    # safetensors written by hand, streamed: header, then each tensor from a repeated block
    hdr, off = {"__metadata__": {"format": "pt"}}, 0
    sh = shapes(layers)
    for name, s in sh:
        n = 2
        for x in s:
            n *= x
        hdr[name] = {"dtype": "F16", "shape": list(s), "data_offsets": [off, off + n]}
        off += n
    hb = json.dumps(hdr, separators=(",", ":")).encode()
    hb += b" " * (-len(hb) % 8)
    block = (np.random.default_rng(0).standard_normal(8 << 20) * 0.02).astype(np.float16).tobytes()
    with open(d / "model.safetensors", "wb") as f:
        f.write(struct.pack("<Q", len(hb)) + hb)
        for name, s in sh:
            n = hdr[name]["data_offsets"][1] - hdr[name]["data_offsets"][0]
            while n > 0:
                k = min(n, len(block))
                f.write(block[:k])
                n -= k
    return off


CPU = {}  # argv[0] -> CPU seconds (user + system) of each run


def timed(argv, key: str | None = None) -> tuple[float, int]:
    """(wall seconds, peak RSS KiB) of one run under GNU time; its CPU time goes to CPU."""
    t0 = time.perf_counter()
    r = subprocess.run(["/usr/bin/time", "-f", "%M %U %S", *argv], stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE)
    dt = time.perf_counter() - t0
    if r.returncode != 0:
        sys.exit(f"failed: {' '.join(map(str, argv))}\n{r.stderr.decode()}")
    rss, user, system = r.stderr.decode().strip().splitlines()[-1].split()
    CPU.setdefault(key or " ".join(map(str, argv[:2])), []).append(float(user) + float(system))
    return dt, int(rss)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--layers", type=int, default=10)
    ap.add_argument("--tbx", default=os.environ.get("TBX", str(REPO / "build" / "tbx")))
    a = ap.parse_args()
    base = os.environ.get("BENCH_DIR")
    tmp = Path(base) if base else Path(tempfile.mkdtemp(prefix="bench_hf_gguf_"))
    try:
        d = tmp / "model"
        nbytes = write_model(d, a.layers)
        src = d / "model.safetensors"
        print(f"model: llama-family, {a.layers} layers, {nbytes / 2**30:.2f} GiB f16 "
              f"({src.stat().st_size} bytes)")
        copy, out = tmp / "copy.safetensors", tmp / "out.gguf"
        shutil.copyfile(src, copy)  # warm the page cache
        cp_t, cps_t, f16_t, f16_rss, f16n_t = [], [], [], [], []
        for _ in range(a.reps):
            copy.unlink()
            subprocess.run(["sync"])
            cp_t.append(timed(["cp", src, copy])[0])
            copy.unlink()
            subprocess.run(["sync"])
            cps_t.append(timed(["sh", "-c", f"cp '{src}' '{copy}' && sync '{copy}'"])[0])
            out.unlink(missing_ok=True)  # as for cp: a new file, not the eviction of an old one
            subprocess.run(["sync"])
            t, rss = timed([a.tbx, "convert", d, out, "--force"])
            f16_t.append(t)
            f16_rss.append(rss)
            out.unlink()
            subprocess.run(["sync"])
            t, rss = timed([a.tbx, "convert", d, out, "--force", "--no-sync"], "no-sync")
            f16n_t.append(t)
            f16_rss.append(rss)
        cpu = {k: statistics.median(v) for k, v in CPU.items()}  # before the q4_K run
        copy.unlink()
        out.unlink(missing_ok=True)
        subprocess.run(["sync"])
        q_t, q_rss = timed([a.tbx, "convert", d, out, "--quant", "q4_k", "--force"])
        cp_m, cps_m = statistics.median(cp_t), statistics.median(cps_t)
        f16_m, f16n_m = statistics.median(f16_t), statistics.median(f16n_t)
        cpu_cp, cpu_cps = cpu[f"cp {src}"], cpu["sh -c"]
        cpu_f16 = cpu[f"{a.tbx} convert"]
        print(f"cp              {cp_m:7.2f} s  {nbytes / cp_m / 1e9:6.2f} GB/s  CPU {cpu_cp:5.2f} s")
        print(f"cp + sync       {cps_m:7.2f} s  {nbytes / cps_m / 1e9:6.2f} GB/s  CPU {cpu_cps:5.2f} s")
        print(f"tbx f16         {f16_m:7.2f} s  {nbytes / f16_m / 1e9:6.2f} GB/s  CPU {cpu_f16:5.2f} s  "
              f"peak RSS {max(f16_rss) / 1024:6.1f} MiB  ratio to cp {f16_m / cp_m:.2f}x, "
              f"to cp + sync {f16_m / cps_m:.2f}x (target <= 1.5x)")
        print(f"tbx f16 no-sync {f16n_m:7.2f} s  {nbytes / f16n_m / 1e9:6.2f} GB/s  "
              f"CPU {cpu['no-sync']:5.2f} s  ratio to cp {f16n_m / cp_m:.2f}x (target <= 1.5x)")
        print(f"tbx q4_K        {q_t:7.2f} s  {nbytes / q_t / 1e9:6.2f} GB/s  "
              f"peak RSS {q_rss / 1024:6.1f} MiB  (one run)")
        rss_ok = max(f16_rss) <= 256 * 1024 and q_rss <= 256 * 1024
        ok = lambda x: "met" if x else "NOT met"
        print(f"targets: peak RSS {ok(rss_ok)}; f16 within 1.5x: --no-sync of cp "
              f"{ok(f16n_m <= 1.5 * cp_m)}, durable of cp + sync {ok(f16_m <= 1.5 * cps_m)}, "
              f"durable of cp {ok(f16_m <= 1.5 * cp_m)}")
    finally:
        if not base:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
