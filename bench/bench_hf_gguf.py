#!/usr/bin/env python3
"""Hugging Face model directory -> llama.cpp GGUF: wall time, CPU time and peak RSS of `tbx convert`.

    .venv/bin/python bench/bench_hf_gguf.py [--reps 3] [--layers 10] [--tbx build/tbx]
                                            [--only f16,q4_k_m,peers]
                                            [--models llama,qwen3_moe] [--outtypes f16,q8_0]
                                            [--cache .cache/bench]
    BENCH_DIR=/path     where the files go (default: a temporary directory, removed after)

peers (issue 22): for each of --models (llama: a decoder, 1.06 GiB; qwen3_moe: an MoE, 1.16 GiB;
mixtral, 1.17 GiB, on request), a directory built ONCE into --cache (named by a hash of its
sizes; delete it to rebuild) from the transformers config class: its config.json, and bf16
random tensors under the names and shapes the model class saves (the model built on the meta
device, its state_dict mapped back to the checkpoint's names as save_pretrained does; no weight
is materialized), plus the small BPE tokenizer below. Then, --reps interleaved runs (sync,
untimed, before each; every output a new file) of
  cat       `cat *.safetensors > F` (the floor: the bytes read and written once)
  tbx       `tbx convert DIR out.gguf --cast f16 | --quant q8_0 --force` (durable: fsync)
  llama.cpp `convert_hf_to_gguf.py DIR --outfile out.gguf --outtype f16 | q8_0` (.venv's python
            and torch, told the pre-tokenizer name as below; no fsync)
printing medians of wall and CPU time, the largest peak RSS (GNU time), floor / it, the ratio
tbx / llama.cpp, whether tbx's peak RSS <= 256 MiB, and whether the last run's two outputs hold
the same tensors (name, type, shape, bytes; gguf-py). Exit status 1 when either fails.

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
  Q4_K_M    the whole model quantized as llama.cpp users do, beside llama.cpp's own code:
            tbx        `tbx convert DIR out.gguf --quant Q4_K_M --force` (one pass)
            llama.cpp  (1) its converter, `convert_hf_to_gguf.py DIR --outfile F16.gguf
                       --outtype f16` (the copy bootstrap keeps in .venv/llama-cpp-src/,
                       TBX_LLAMA_CPP_SRC overrides; run by .venv's python, which has torch; the
                       synthetic tokenizer is not one the converter knows by its hash, so it is
                       told the pre-tokenizer name "llama-bpe", as tests/python/test_hf_runtime.py
                       does; nothing else is changed), then (2) llama_model_quantize(F16.gguf,
                       out.gguf, ftype Q4_K_M, nthread = all cores) of libllama in .venv
                       (llama_cpp's ctypes bindings), each a process of its own
            wall time, CPU time and peak RSS of each step and of the two, medians of --reps
            interleaved runs (sync, untimed, before each); ratio = llama.cpp / tbx; and whether
            the two outputs hold the same tensors (name, type, bytes; gguf-py).
            A missing peer (llama_cpp, torch, the converter) is an error, never a skip.
Page cache warm (one untimed cp first), `sync` (untimed) before every timed run so that no
run pays for the previous one's dirty pages, and every run writes a new file (the previous
copy or output removed untimed: replacing a 1 GiB file costs its eviction, ~0.1 s of system
time); medians of interleaved repetitions for cp and f16; peak RSS and CPU time (user +
system, medians) from GNU time: on a shared machine the CPU time varies less than the wall
time. Targets (issue 13): f16 within 1.5x of cp, peak RSS <= 256 MiB; printed for each
pair of like durability (tbx --no-sync / cp, tbx / cp + sync) and for tbx / cp. Issue 21: tbx's
Q4_K_M peak RSS <= 256 MiB.
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
LLAMA_FTYPE_MOSTLY_Q4_K_M = 15  # llama_ftype (include/llama.h)

# llama.cpp's converter, told the BPE pre-tokenizer's name (see the docstring)
CONVERT = r"""
import runpy, sys
vendor, pre = sys.argv[1], sys.argv[2]
sys.path[:0] = [vendor, vendor + "/gguf-py"]
import conversion.base as base
base.TextModel.get_vocab_base_pre = lambda self, tokenizer: pre
sys.argv = [vendor + "/convert_hf_to_gguf.py"] + sys.argv[3:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""

# llama_model_quantize of libllama (llama_cpp's ctypes bindings): SRC DST FTYPE NTHREAD
QUANTIZE = r"""
import ctypes, sys
from llama_cpp import llama_cpp as L
L.llama_backend_init()
p = L.llama_model_quantize_default_params()
p.ftype, p.nthread = int(sys.argv[3]), int(sys.argv[4])
rc = L.llama_model_quantize(sys.argv[1].encode(), sys.argv[2].encode(), ctypes.byref(p))
sys.exit(f"llama_model_quantize failed ({rc})" if rc else 0)
"""


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


def llama_cpp_peers() -> Path:
    """llama.cpp's sources kept by bootstrap (the release llama_cpp in .venv is built from);
    exits with a message when any peer of the Q4_K_M row is missing."""
    import importlib.util
    import re
    missing = [m for m in ("llama_cpp", "torch", "transformers", "gguf")
               if importlib.util.find_spec(m) is None]
    if missing:
        sys.exit(f"bench_hf_gguf: the Q4_K_M row needs {', '.join(missing)} in the python "
                 f"that runs it ({sys.executable}): run it with .venv/bin/python "
                 f"(scripts/bootstrap.sh --llama installs them)")
    pin = re.search(r"llama-cpp-python==(\S+)",
                    (REPO / "python" / "requirements-llama.txt").read_text()).group(1)
    v = Path(os.environ.get("TBX_LLAMA_CPP_SRC") or
             REPO / ".venv" / "llama-cpp-src" / f"llama_cpp_python-{pin}" / "vendor" / "llama.cpp")
    for f in ("convert_hf_to_gguf.py", "gguf-py/gguf/__init__.py", "conversion/base.py"):
        if not (v / f).is_file():
            sys.exit(f"bench_hf_gguf: llama.cpp's converter is not complete at {v} (no {f}; "
                     f"scripts/bootstrap.sh --llama keeps it from the llama-cpp-python {pin} "
                     f"source distribution; TBX_LLAMA_CPP_SRC names another copy)")
    return v


def same_tensors(a: Path, b: Path) -> str:
    """'' when the two GGUFs hold the same tensors (names, types, shapes, bytes; order
    ignored), else the first differences."""
    import numpy as np
    import gguf
    ra, rb = gguf.GGUFReader(str(a)), gguf.GGUFReader(str(b))
    ta = {t.name: t for t in ra.tensors}
    tb = {t.name: t for t in rb.tensors}
    diff = [f"only in {a.name}: {n}" for n in sorted(ta.keys() - tb.keys())]
    diff += [f"only in {b.name}: {n}" for n in sorted(tb.keys() - ta.keys())]
    for n in sorted(ta.keys() & tb.keys()):
        x, y = ta[n], tb[n]
        if x.tensor_type != y.tensor_type or list(x.shape) != list(y.shape):
            diff.append(f"{n}: {x.tensor_type.name}{list(x.shape)} vs "
                        f"{y.tensor_type.name}{list(y.shape)}")
        elif not np.array_equal(np.asarray(x.data).view(np.uint8).ravel(),
                                np.asarray(y.data).view(np.uint8).ravel()):
            diff.append(f"{n} ({x.tensor_type.name}): bytes differ")
    return "; ".join(diff[:8]) + (f" ... ({len(diff)} in all)" if len(diff) > 8 else "")


def q4_k_m(a, d: Path, tmp: Path):
    """The whole-model Q4_K_M row: tbx in one pass beside llama.cpp's two steps."""
    vendor = llama_cpp_peers()
    ncpu = os.cpu_count() or 1
    out_t, f16, out_l = tmp / "tbx.Q4_K_M.gguf", tmp / "llama.f16.gguf", tmp / "llama.Q4_K_M.gguf"
    py = sys.executable
    runs = {"tbx": [], "convert": [], "quantize": []}  # (wall, rss KiB) per rep
    for _ in range(a.reps):
        for p in (out_t, f16, out_l):
            p.unlink(missing_ok=True)
        subprocess.run(["sync"])
        runs["tbx"].append(timed([a.tbx, "convert", d, out_t, "--quant", "Q4_K_M", "--force"],
                                 "q:tbx"))
        subprocess.run(["sync"])
        runs["convert"].append(timed([py, "-c", CONVERT, vendor, "llama-bpe", d, "--outfile",
                                      f16, "--outtype", "f16"], "q:convert"))
        subprocess.run(["sync"])
        runs["quantize"].append(timed([py, "-c", QUANTIZE, f16, out_l,
                                       str(LLAMA_FTYPE_MOSTLY_Q4_K_M), str(ncpu)], "q:quantize"))
    med = lambda xs: statistics.median(xs)  # noqa: E731
    wall = {k: med([w for w, _ in v]) for k, v in runs.items()}
    rss = {k: max(r for _, r in v) for k, v in runs.items()}
    cpu = {k: med(CPU[f"q:{k}"]) for k in runs}
    two = [c[0] + q[0] for c, q in zip(runs["convert"], runs["quantize"])]
    two_cpu = [c + q for c, q in zip(CPU["q:convert"], CPU["q:quantize"])]
    wall["llama.cpp"], cpu["llama.cpp"] = med(two), med(two_cpu)
    rss["llama.cpp"] = max(rss["convert"], rss["quantize"])
    print(f"Q4_K_M, whole model ({a.reps} reps, medians; nthread {ncpu}; "
          f"llama.cpp: {vendor.parent.parent.name}):")
    for k, label in (("tbx", "tbx convert --quant Q4_K_M"),
                     ("convert", "llama.cpp (1) convert_hf_to_gguf f16"),
                     ("quantize", "llama.cpp (2) llama_model_quantize"),
                     ("llama.cpp", "llama.cpp (1) + (2)")):
        print(f"  {label:<38} {wall[k]:7.2f} s  CPU {cpu[k]:7.2f} s  "
              f"peak RSS {rss[k] / 1024:7.1f} MiB")
    print(f"  ratio llama.cpp / tbx: wall {wall['llama.cpp'] / wall['tbx']:.2f}x, "
          f"CPU {cpu['llama.cpp'] / cpu['tbx']:.2f}x; tbx peak RSS "
          f"{'<=' if rss['tbx'] <= 256 * 1024 else '>'} 256 MiB "
          f"({'met' if rss['tbx'] <= 256 * 1024 else 'NOT met'})")
    print(f"  output: tbx {out_t.stat().st_size} bytes, llama.cpp {out_l.stat().st_size} bytes")
    diff = same_tensors(out_t, out_l)
    print("  tensors (name, type, shape, bytes): " +
          ("identical to llama.cpp's" if not diff else f"DIFFER from llama.cpp's: {diff}"))
    for p in (out_t, f16, out_l):
        p.unlink(missing_ok=True)
    return rss["tbx"] <= 256 * 1024 and not diff


def f16_part(a, d: Path, src: Path, tmp: Path, nbytes: int):
    """cp, tbx f16 and tbx f16 --no-sync: issue 13's row."""
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
    cpu = {k: statistics.median(v) for k, v in CPU.items()}
    copy.unlink()
    out.unlink(missing_ok=True)
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
    rss_ok = max(f16_rss) <= 256 * 1024
    ok = lambda x: "met" if x else "NOT met"
    print(f"targets: peak RSS {ok(rss_ok)}; f16 within 1.5x: --no-sync of cp "
          f"{ok(f16n_m <= 1.5 * cp_m)}, durable of cp + sync {ok(f16_m <= 1.5 * cps_m)}, "
          f"durable of cp {ok(f16_m <= 1.5 * cp_m)}")


# ---- the peers part (issue 22): a decoder and an MoE beside convert_hf_to_gguf.py ------------

# family -> (the pre-tokenizer name llama.cpp's converter is told, the config's sizes). Each gives
# >= 1 GiB of bf16 safetensors: llama 1.06 GiB (TinyLlama-1.1B's widths, 10 layers), qwen3_moe
# 1.15 GiB (32 experts of 512, top 4 renormalized as Qwen3-30B-A3B, 10 layers), mixtral 1.17 GiB (8 experts of 1536, 14 layers).
PEER_MODELS = {
    "llama": ("llama-bpe", dict(hidden_size=2048, intermediate_size=5632, num_hidden_layers=10,
                                num_attention_heads=32, num_key_value_heads=4)),
    "qwen3_moe": ("qwen2", dict(hidden_size=1024, intermediate_size=3072,
                                moe_intermediate_size=512, num_experts=32, num_experts_per_tok=4,
                                num_hidden_layers=10, num_attention_heads=16,
                                num_key_value_heads=4, head_dim=128,
                                norm_topk_prob=True)),
    "mixtral": ("llama-bpe", dict(hidden_size=1024, intermediate_size=1536, num_local_experts=8,
                                  num_experts_per_tok=2, num_hidden_layers=14,
                                  num_attention_heads=16, num_key_value_heads=4)),
}
# outtype -> tbx's options (convert_hf_to_gguf.py takes --outtype OUTTYPE)
OUTTYPES = {"f16": ("--cast", "f16"), "q8_0": ("--quant", "q8_0")}
MODEL_FORMAT = 2  # bump when build_hf writes different files for the same sizes


def write_tokenizer(d: Path):
    """A small byte-level BPE tokenizer (300 entries; the config's vocabulary pads it)."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.train_from_iterator(["a synthetic model for a conversion benchmark"] * 4,
                            trainers.BpeTrainer(vocab_size=300, special_tokens=["<s>", "</s>"],
                                                initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tok.save(str(d / "tokenizer.json"))
    (d / "tokenizer_config.json").write_text(json.dumps({"bos_token": "<s>", "eos_token": "</s>"}))


def write_bf16_safetensors(path: Path, tensors):
    """Streams a safetensors file of bf16 tensors [(name, shape)], filled from one repeated
    block of N(0, 0.02) values."""
    import numpy as np
    hdr, off = {"__metadata__": {"format": "pt"}}, 0
    for name, shape in tensors:
        n = 2
        for x in shape:
            n *= x
        hdr[name] = {"dtype": "BF16", "shape": list(shape), "data_offsets": [off, off + n]}
        off += n
    hb = json.dumps(hdr, separators=(",", ":")).encode()
    hb += b" " * (-len(hb) % 8)
    f32 = (np.random.default_rng(0).standard_normal(8 << 20) * 0.02).astype(np.float32)
    block = (f32.view(np.uint32) >> 16).astype(np.uint16).tobytes()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hb)) + hb)
        for name, _ in tensors:
            n = hdr[name]["data_offsets"][1] - hdr[name]["data_offsets"][0]
            while n > 0:
                k = min(n, len(block))
                f.write(block[:k])
                n -= k
    return off


def build_hf(cache: Path, fam: str) -> Path:
    """The model directory of FAM, built once under CACHE (named by a hash of its sizes): the
    transformers config class's config.json, and the tensors its model class saves (names and
    shapes from the model built on the meta device, mapped back to the checkpoint's names as
    save_pretrained does), bf16, random."""
    import hashlib
    spec = dict(PEER_MODELS[fam][1], vocab_size=V, max_position_embeddings=4096,
                tie_word_embeddings=False)
    tag = hashlib.sha256(json.dumps([MODEL_FORMAT, fam, spec], sort_keys=True).encode())
    d = cache / f"{fam}-{tag.hexdigest()[:12]}"
    if (d / "model.safetensors").is_file():
        return d
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM
    from transformers.core_model_loading import revert_weight_conversion
    cfg = AutoConfig.for_model(fam, **spec)
    cfg.dtype = torch.bfloat16
    with torch.device("meta"):
        m = AutoModelForCausalLM.from_config(cfg)
    sd = revert_weight_conversion(m, m.state_dict())
    cfg.architectures = [type(m).__name__]  # as save_pretrained of the model writes it
    work = d.with_name(d.name + ".part")
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    cfg.save_pretrained(work)
    write_tokenizer(work)
    write_bf16_safetensors(work / "model.safetensors",
                           [(n, tuple(t.shape)) for n, t in sorted(sd.items())])
    os.replace(work, d)  # complete or absent
    return d


def peers(a, fam: str, outtypes, tmp: Path) -> bool:
    """FAM's directory to each outtype by tbx and by convert_hf_to_gguf.py, beside `cat` of its
    safetensors; True when tbx's peak RSS <= 256 MiB and its tensors equal llama.cpp's."""
    vendor = llama_cpp_peers()
    d = build_hf(Path(a.cache), fam)
    st = sorted(d.glob("*.safetensors"))
    nbytes = sum(p.stat().st_size for p in st)
    subprocess.run(["cat", *st], stdout=subprocess.DEVNULL)  # the page cache warm
    cat_out = tmp / f"{fam}.cat"
    out = {(who, ot): tmp / f"{fam}.{who}.{ot}.gguf" for who in ("tbx", "llama.cpp")
           for ot in outtypes}
    runs = {k: [] for k in [("cat", "")] + list(out)}
    for _ in range(a.reps):
        cat_out.unlink(missing_ok=True)
        subprocess.run(["sync"])
        runs[("cat", "")].append(timed(["sh", "-c", 'f=$1; shift; cat "$@" > "$f"', "sh",
                                        cat_out, *st], f"{fam}:cat:"))
        for ot in outtypes:
            for who in ("tbx", "llama.cpp"):
                o = out[(who, ot)]
                o.unlink(missing_ok=True)
                subprocess.run(["sync"])
                argv = ([a.tbx, "convert", d, o, *OUTTYPES[ot], "--force"] if who == "tbx" else
                        [sys.executable, "-c", CONVERT, vendor, PEER_MODELS[fam][0], d,
                         "--outfile", o, "--outtype", ot])
                runs[(who, ot)].append(timed(argv, f"{fam}:{who}:{ot}"))
    cat_out.unlink(missing_ok=True)
    med = statistics.median
    wall = {k: med([w for w, _ in v]) for k, v in runs.items()}
    rss = {k: max(r for _, r in v) for k, v in runs.items()}
    cpu = {k: med(CPU[f"{fam}:{k[0]}:{k[1]}"]) for k in runs}
    print(f"{fam}: {d.name}, {nbytes / 2**30:.2f} GiB of bf16 safetensors ({a.reps} reps, "
          f"medians; peak RSS the largest; llama.cpp: {vendor.parent.parent.name})")
    c = ("cat", "")
    print(f"  {'cat (the floor)':<24} {wall[c]:7.2f} s  CPU {cpu[c]:6.2f} s  "
          f"{nbytes / wall[c] / 1e9:5.2f} GB/s")
    ok = True
    for ot in outtypes:
        t, l = ("tbx", ot), ("llama.cpp", ot)
        for k in (t, l):
            print(f"  {k[0] + ' ' + ot:<24} {wall[k]:7.2f} s  CPU {cpu[k]:6.2f} s  "
                  f"{nbytes / wall[k] / 1e9:5.2f} GB/s  peak RSS {rss[k] / 1024:7.1f} MiB  "
                  f"{out[k].stat().st_size} bytes  (floor / it: {wall[c] / wall[k]:.2f})")
        rss_ok = rss[t] <= 256 * 1024
        diff = same_tensors(out[t], out[l])
        print(f"  {ot}: ratio tbx / llama.cpp: wall {wall[t] / wall[l]:.3f}, CPU "
              f"{cpu[t] / cpu[l]:.3f}, peak RSS {rss[t] / rss[l]:.3f}; tbx peak RSS "
              f"{'<=' if rss_ok else '>'} 256 MiB ({'met' if rss_ok else 'NOT met'}); tensors "
              f"(name, type, shape, bytes): " +
              ("identical to llama.cpp's" if not diff else f"DIFFER from llama.cpp's: {diff}"))
        ok = ok and rss_ok and not diff
    for o in out.values():
        o.unlink(missing_ok=True)
    return ok


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--layers", type=int, default=10)
    ap.add_argument("--tbx", default=os.environ.get("TBX", str(REPO / "build" / "tbx")))
    ap.add_argument("--only", default="f16,q4_k_m,peers",
                    help="f16 (tbx beside cp), q4_k_m, peers (f16 and q8_0 of --models beside "
                         "convert_hf_to_gguf.py)")
    ap.add_argument("--models", default="llama,qwen3_moe",
                    help=f"the families of the peers part, of {', '.join(PEER_MODELS)}")
    ap.add_argument("--outtypes", default="f16,q8_0", help="the peers part's outtypes")
    ap.add_argument("--cache", default=str(REPO / ".cache" / "bench"),
                    help="where the peers part's models are built once and kept")
    a = ap.parse_args()
    parts = {"f16", "q4_k_m", "peers"}
    only = set(a.only.split(","))
    if only - parts:
        sys.exit(f"--only: unknown part {', '.join(sorted(only - parts))}")
    models, outtypes = a.models.split(","), a.outtypes.split(",")
    if set(models) - set(PEER_MODELS) or set(outtypes) - set(OUTTYPES):
        sys.exit(f"--models: one of {', '.join(PEER_MODELS)}; --outtypes: of "
                 f"{', '.join(OUTTYPES)}")
    if "q4_k_m" in only or "peers" in only:
        llama_cpp_peers()  # before building the model
    base = os.environ.get("BENCH_DIR")
    tmp = Path(base) if base else Path(tempfile.mkdtemp(prefix="bench_hf_gguf_"))
    ok = True
    try:
        if "peers" in only:
            for fam in models:
                ok = peers(a, fam, outtypes, tmp) and ok
        if only <= {"peers"}:
            return
        d = tmp / "model"
        nbytes = write_model(d, a.layers)
        src = d / "model.safetensors"
        print(f"model: llama-family, {a.layers} layers, {nbytes / 2**30:.2f} GiB f16 "
              f"({src.stat().st_size} bytes)")
        if "f16" in only:
            f16_part(a, d, src, tmp, nbytes)
        if "q4_k_m" in only:
            shutil.copyfile(src, tmp / "warm")  # the page cache warm
            (tmp / "warm").unlink()
            ok = q4_k_m(a, d, tmp) and ok
    finally:
        if not base:
            shutil.rmtree(tmp, ignore_errors=True)
        if not ok:
            sys.exit(1)


if __name__ == "__main__":
    main()
