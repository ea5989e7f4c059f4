"""GGUF -> Hugging Face directory (`tbx convert model.gguf OUT/`), proven by the real tools.

Each test Hugging Face directory (the real all-MiniLM-L6-v2 of the conftest fixture, and the
tiny llama / qwen2 / mixtral / qwen2_moe models test_hf_runtime.py builds with transformers'
own classes) is converted to GGUF by tbx (f32, f16, bf16) and back to a directory by tbx:
(a) every tensor of the original is in the back-converted directory (read by PyPI safetensors)
    with its bytes: bit-identical through an f32 GGUF; through an f16 / bf16 GGUF, equal to the
    original rounded to that dtype by torch (each tensor the GGUF stores in f32, by llama.cpp's
    converter's rule, equal to the original) with --dtype f32, and equal to the original rounded
    to the dtype in the default output (the GGUF's dtype);
(b) config.json: transformers' AutoConfig of both directories agree on every field but the
    ones listed in NOT_CARRIED (what a GGUF does not carry, each with its reason);
(c) the rebuilt tokenizer.json gives the ids of the original in PyPI `tokenizers` on a few
    hundred strings (test_hf_runtime.sample_strings: ASCII, accents, CJK, emoji, whitespace,
    the special tokens);
(d) transformers' from_pretrained on the back-converted directory gives the logits (decoders) or
    last hidden states (bert) of the original directory;
(e) q8_0 / q5_0 / q4_K GGUFs written back as bf16: every tensor equals gguf-py's dequantization
    of the GGUF tensor (with llama's q/k row order undone by numpy) rounded to bf16 by torch,
    and transformers on the directory agrees with llama.cpp on the GGUF to bf16 rounding;
(f) a GGUF written by llama.cpp's own convert_hf_to_gguf.py converts back to the original
    tensors and logits;
plus sharding (--max-shard-size: the index transformers reads), --weights-only, the errors that
name what cannot be mapped back, and the directory written whole or not at all.
"""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from conftest import run, write_gguf
from test_hf_runtime import (FAMILIES, PROMPTS, TOKFAM, build, hf_model, llama_convert,
                             sample_strings, tiny)  # noqa: F401 (tiny: the fixture)
from test_hf_gguf import convert

import numpy as np  # noqa: E402
import gguf  # noqa: E402
import safetensors.torch  # noqa: E402
import tokenizers  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
import llama_cpp  # noqa: E402

torch.set_num_threads(1)

DECODERS = ["llama", "qwen2", "mixtral", "qwen2_moe"]
DECODERS += ["qwen3", "qwen3_moe", "olmo2", "granite", "mistral"]  # issue 22's rows, back
# A GGUF of a Mistral model is llama.cpp's "llama" (convert_hf_to_gguf.py's LlamaModel writes
# nothing that tells them apart): it comes back as a Llama model, whose forward pass on
# Mistral's weights and hyper-parameters is Mistral's (no sliding window in llama.cpp either)
BACK_AS = {"mistral": ("llama", ["LlamaForCausalLM"])}
DECODERS += ["gemma"]
# Gemma's RMS norms scale by 1 + w: the GGUF holds fl32(w + 1) (llama.cpp's converter adds 1),
# which is not w's bits back (w + 1 rounds to 2^-23 away from 1); the way back subtracts 1,
# exact in f32 on the GGUF's value, so a norm weight comes back as fl32(fl32(w + 1) - 1),
# computed here by torch from the original (transformers computes 1 + w in f32 too: same logits)
PLUS1 = {"gemma": ("layernorm.weight", "model.norm.weight")}
# Gemma 2 and 3 (issue 23): query_pre_attn_scalar as llama.cpp's attention scale, layer_types
# from its local/global pattern, Gemma 3's class (Gemma3ForCausalLM) and local rope base; their
# norms (Gemma 3's q/k norms too) come back as gemma's
DECODERS += ["gemma2", "gemma3"]
PLUS1.update({"gemma2": PLUS1["gemma"],
              "gemma3": PLUS1["gemma"] + ("q_norm.weight", "k_norm.weight")})
PLUS1["gemma3_mm"] = PLUS1["gemma3"]
# Phi-3 (issue 23): fused qkv_proj / gate_up_proj kept whole both ways, partial_rotary_factor,
# longrope's factors back from rope_factors_long/short.weight, its SentencePiece vocabulary
# with Phi-3's added-token rules
DECODERS += ["phi3", "phi3_longrope"]


def plus1(family: str, name: str, v):
    if family in PLUS1 and name.endswith(PLUS1[family]):
        one = torch.tensor(1.0, dtype=torch.float32)
        return (v.to(torch.float32) + one) - one
    return v

# Config fields a GGUF does not carry, by family, each with its reason; AutoConfig of the
# back-converted directory equals the original's on every other field.
_TRAINING = {"initializer_range": "a training setting; llama.cpp has no use for it",
             "transformers_version": "the writer's version",
             "_name_or_path": "the directory each was read from",
             "dtype": "the original's dtype; the back-converted one says its own (torch_dtype)"}
NOT_CARRIED = {
    "decoder": dict(_TRAINING),
    "qwen2": {"max_window_layers": "sliding-window settings: llama.cpp's qwen2 has none and the "
                                   "GGUF does not carry them (use_sliding_window false: unused)",
              "layer_types": "derived from max_window_layers by transformers (all full "
                             "attention either way)"},
    "qwen2_moe": {"max_window_layers": "as qwen2", "layer_types": "as qwen2",
                  "decoder_sparse_step": "every layer is sparse in llama.cpp's qwen2moe; the "
                                         "GGUF does not carry the step (1 here)",
                  "norm_topk_prob": "llama.cpp's qwen2moe does not renormalize (false here); "
                                    "not carried",
                  "mlp_only_layers": "not carried (none here)"},
    "mixtral": {},
    "llama": {},
    # issue 22's rows
    "qwen3": {"max_window_layers": "as qwen2", "layer_types": "as qwen2"},
    "qwen3_moe": {"max_window_layers": "as qwen2", "layer_types": "as qwen2",
                  "decoder_sparse_step": "as qwen2_moe (1 here)",
                  "mlp_only_layers": "as qwen2_moe (none here)"},
    "olmo2": {},
    "granite": {},
    "gemma": {},
    "gemma2": {},
    "gemma3": {},
    "phi3": {"pad_token_id": "the GGUF's padding token is the tokenizer's (<|endoftext|>, as "
                             "Phi-3's config.json has it); this config.json's null is not "
                             "carried"},
    "phi3_longrope": {"pad_token_id": "as phi3", "rope_parameters": "long_factor / short_factor: the GGUF holds them as "
                                         "f32 (rope_factors_*.weight); compared at f32 below"},
    "mistral": {"model_type": "a Mistral GGUF is llama.cpp's llama (BACK_AS)",
                "architectures": "as model_type",
                "sliding_window": "MistralConfig's; llama.cpp's llama has no sliding window "
                                  "and the GGUF does not carry it",
                "layer_types": "MistralConfig's, from sliding_window",
                "attention_bias": "LlamaConfig's (false: Mistral has no biases)",
                "mlp_bias": "LlamaConfig's (false: Mistral has no biases)",
                "pretraining_tp": "LlamaConfig's (1: no effect)"},
    "bert": {"gradient_checkpointing": "a training setting",
             "architectures": "the original names BertModel as sentence-transformers saves it; "
                              "the back-converted directory says BertModel too",
             "position_embedding_type": "absolute, the only kind llama.cpp's BERT has (its "
                                        "position_embd tensor); transformers 5's BertConfig "
                                        "has no such field, the original's config.json "
                                        "carries it from an older transformers",
             "classifier_dropout": "a training setting"},
}
# Tensors a GGUF does not carry (llama.cpp's converter drops them as tbx's HF -> GGUF does)
NOT_CARRIED_TENSORS = {"embeddings.position_ids", "pooler.dense.weight", "pooler.dense.bias"}
# HF tensors llama.cpp's converter keeps in f32 whatever the --outtype (1-D ones too)
F32_KEPT = ("position_embeddings.weight", "token_type_embeddings.weight",
            "block_sparse_moe.gate.weight", "mlp.gate.weight", "shared_expert_gate.weight")

TORCH_DT = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}


@pytest.fixture(scope="module")
def src(tiny, minilm_dir):
    """family -> its Hugging Face directory (bert: the real MiniLM)."""
    return lambda family: minilm_dir if family == "bert" else tiny(family)["dir"]


def back(tbx, gguf_path: Path, out: Path, *args) -> Path:
    r = run(tbx, "convert", str(gguf_path), str(out) + "/", *args, timeout=600)
    assert r.rc == 0, r.describe()
    assert out.is_dir()
    return out


def load_dir(d: Path) -> dict:
    """Every tensor of the directory's safetensors (its index when sharded)."""
    out = {}
    idx = d / "model.safetensors.index.json"
    files = sorted(set(json.loads(idx.read_text())["weight_map"].values())) if idx.is_file() \
        else ["model.safetensors"]
    for f in files:
        t = safetensors.torch.load_file(str(d / f))
        assert not set(t) & set(out), f
        out.update(t)
    return out


def orig_tensors(d: Path) -> dict:
    t = load_dir(d)
    return {k: v for k, v in t.items() if k not in NOT_CARRIED_TENSORS}


def kept_f32(name: str, t) -> bool:
    return t.dim() < 2 or name.endswith(F32_KEPT)


def same_bits(a, b) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(a.view(torch.uint8) if
                                                                     a.dim() else a, b.view(
        torch.uint8) if b.dim() else b)


# ------------------------------------------------------------------------------------------
# (a) tensors, (b) config, (c) tokenizer
# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("gtype", ["f32", "f16", "bf16"])
@pytest.mark.parametrize("family", DECODERS + ["bert"])
def test_round_trip(tbx, src, tmp_path, family, gtype):
    d = src(family)
    g = tmp_path / "m.gguf"
    convert(tbx, d, g, *(() if gtype == "f32" else ("--cast", gtype)))
    orig = orig_tensors(d)
    # the default dtype: the GGUF's
    out = back(tbx, g, tmp_path / "back")
    got = load_dir(out)
    assert set(got) == set(orig), sorted(set(got) ^ set(orig))
    dt = TORCH_DT[gtype]
    orig = {k: plus1(family, k, v) for k, v in orig.items()}
    for k, v in orig.items():
        want = v.to(dt)  # f32: itself
        assert same_bits(got[k], want), (k, got[k].dtype, want.dtype)
    if gtype != "f32":
        # --dtype f32: the GGUF's values exactly (its f32 tensors are the original's)
        out32 = back(tbx, g, tmp_path / "back32", "--dtype", "f32")
        got32 = load_dir(out32)
        for k, v in orig.items():
            want = v if kept_f32(k, v) else v.to(dt).to(torch.float32)
            assert same_bits(got32[k], want), k
    # (b) config.json
    ca = transformers.AutoConfig.from_pretrained(str(d)).to_dict()
    cb = transformers.AutoConfig.from_pretrained(str(out)).to_dict()
    allowed = dict(NOT_CARRIED["decoder" if family != "bert" else "bert"])
    allowed.update(_TRAINING)
    allowed.update(NOT_CARRIED.get(family, {}))
    differ = {k for k in set(ca) | set(cb) if ca.get(k) != cb.get(k)}
    assert differ <= set(allowed), {k: (ca.get(k), cb.get(k)) for k in differ - set(allowed)}
    if "rope_parameters" in NOT_CARRIED.get(family, {}):  # the rest equal, the factors to f32
        ra, rb = dict(ca["rope_parameters"]), dict(cb["rope_parameters"])
        for k in ("long_factor", "short_factor"):
            fa, fb = ra.pop(k), rb.pop(k)
            assert np.array_equal(np.float32(fa), np.float32(fb)) and fa != fb, k
        assert ra == rb, (ra, rb)
    want_mt, want_arch = BACK_AS.get(family, (ca["model_type"], ca["architectures"]))
    assert cb["model_type"] == want_mt and cb["architectures"] == want_arch
    assert json.loads((out / "config.json").read_text())["torch_dtype"] == \
        {"f32": "float32", "f16": "float16", "bf16": "bfloat16"}[gtype]
    # (c) the tokenizer: the same ids in PyPI tokenizers
    ta = tokenizers.Tokenizer.from_file(str(d / "tokenizer.json"))
    ta.no_padding()
    ta.no_truncation()
    tb = tokenizers.Tokenizer.from_file(str(out / "tokenizer.json"))
    n = 0
    for cat, strings in sample_strings(TOKFAM[family]).items():
        for s in strings:
            assert ta.encode(s).ids == tb.encode(s).ids, (cat, s)
            n += 1
    assert n >= 250
    tc = json.loads((out / "tokenizer_config.json").read_text())
    oc = json.loads((d / "tokenizer_config.json").read_text())
    for key in ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token",
                "mask_token"):
        ov = oc.get(key)
        ov = ov["content"] if isinstance(ov, dict) else ov
        if key in tc and ov is not None:
            assert tc[key] == ov, key
        elif key in tc:  # named by the GGUF only (llama.cpp's bos of a WordPiece is [CLS], of
            # qwen2 config.json's bos_token_id): a special token of the original tokenizer
            specials = {t["content"] for t in json.loads((d / "tokenizer.json").read_text())
                        ["added_tokens"] if t["special"]}
            assert tc[key] in specials, (key, tc[key])
    if family == "bert":
        pool = json.loads((out / "1_Pooling" / "config.json").read_text())
        opool = json.loads((d / "1_Pooling" / "config.json").read_text())
        for k in ("word_embedding_dimension", "pooling_mode_cls_token",
                  "pooling_mode_mean_tokens", "pooling_mode_max_tokens"):
            assert pool[k] == opool[k], k


# ------------------------------------------------------------------------------------------
# (d) transformers on the back-converted directory
# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("family", DECODERS + ["bert"])
def test_transformers_same_outputs(tbx, src, tmp_path, family):
    d = src(family)
    g = tmp_path / "m.gguf"
    convert(tbx, d, g)
    out = back(tbx, g, tmp_path / "back")
    tok_a = transformers.AutoTokenizer.from_pretrained(str(d))
    tok_b = transformers.AutoTokenizer.from_pretrained(str(out))
    cls = "BertModel" if family == "bert" else FAMILIES[family][1]
    ma = getattr(transformers, cls).from_pretrained(str(d), dtype=torch.float32).eval()
    if family in BACK_AS:
        cls = BACK_AS[family][1][0]
    mb = getattr(transformers, cls).from_pretrained(str(out), dtype=torch.float32).eval()
    for p in PROMPTS:
        ids = tok_a(p)["input_ids"]
        assert tok_b(p)["input_ids"] == ids, p
        with torch.no_grad():
            ra, rb = ma(torch.tensor([ids])), mb(torch.tensor([ids]))
        xa = ra.last_hidden_state if family == "bert" else ra.logits
        xb = rb.last_hidden_state if family == "bert" else rb.logits
        assert float((xa - xb).abs().max()) <= 1e-5, p


# ------------------------------------------------------------------------------------------
# (e) quantized GGUFs to bf16
# ------------------------------------------------------------------------------------------
def unpermute(w: "np.ndarray", n_head: int) -> "np.ndarray":
    """The inverse of llama.cpp's convert_hf_to_gguf.py LlamaModel.permute."""
    r = w.shape[0]
    return w.reshape(n_head, r // n_head // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


@pytest.mark.parametrize("quant", ["q8_0", "q4_k"])
def test_quantized_to_bf16(tbx, src, tmp_path, quant):
    d = src("llama")
    cfg = json.loads((d / "config.json").read_text())
    g = tmp_path / f"m-{quant}.gguf"
    convert(tbx, d, g, "--quant", quant)
    out = back(tbx, g, tmp_path / "back")
    assert json.loads((out / "config.json").read_text())["torch_dtype"] == "bfloat16"
    got = load_dir(out)
    r = gguf.GGUFReader(str(g))
    names = {t.name: t for t in r.tensors}
    types = {t.tensor_type.name for t in r.tensors}
    assert types & {"Q8_0", "Q4_K", "Q5_0"}, types
    # the map llama.cpp's converter writes (gguf-py's TensorNameMap) from the HF names
    tmap = gguf.get_tensor_name_map(gguf.MODEL_ARCH.LLAMA, cfg["num_hidden_layers"])
    for hf_name, v in got.items():
        base, suffix = hf_name.rsplit(".", 1)
        gname = tmap.get_name(base) + "." + suffix
        t = names[gname]
        deq = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32)
        deq = deq.reshape([int(x) for x in reversed(t.shape.tolist())]) if deq.size > 1 else deq
        if gname.endswith("attn_q.weight"):
            deq = unpermute(deq, cfg["num_attention_heads"])
        elif gname.endswith("attn_k.weight"):
            deq = unpermute(deq, cfg["num_key_value_heads"])
        want = torch.from_numpy(np.ascontiguousarray(deq)).to(torch.bfloat16)
        assert v.dtype == torch.bfloat16 and tuple(v.shape) == tuple(want.shape), hf_name
        assert torch.equal(v, want), (hf_name, t.tensor_type.name,
                                      float((v.float() - want.float()).abs().max()))
    # transformers on the directory vs llama.cpp on the GGUF: the bf16 rounding of the
    # dequantized weights, relative to the largest logit
    tok = transformers.AutoTokenizer.from_pretrained(str(out))
    m = transformers.LlamaForCausalLM.from_pretrained(str(out), dtype=torch.float32).eval()
    llm = llama_cpp.Llama(model_path=str(g), n_ctx=128, logits_all=True, verbose=False,
                          type_k=0, type_v=0, n_threads=1, n_batch=128)
    worst = 0.0
    for p in PROMPTS:
        ids = tok(p)["input_ids"]
        with torch.no_grad():
            ref = m(torch.tensor([ids])).logits[0].double().numpy()
        llm.reset()
        llm.eval(ids)
        lc = np.asarray(llm.scores[:len(ids)], dtype=np.float64)
        rel = float(np.abs(lc - ref).max() / np.abs(ref).max())
        worst = max(worst, rel)
        # bf16 rounds each weight by <= 2^-9 relative; q8_0's matmul rounds the activations too
        assert rel <= 3e-2, (p, rel)
    print(f"{quant} -> bf16: transformers vs llama.cpp max |logit diff| {worst:.3g} x max|logit|")


# ------------------------------------------------------------------------------------------
# (f) a GGUF of llama.cpp's own converter
# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("family", ["llama", "qwen2", "bert", "qwen3", "qwen3_moe", "olmo2",
                                    "granite", "mistral"] + ["gemma2", "gemma3", "phi3",
                                                                 "phi3_longrope"])
def test_llama_cpp_converter_gguf_back(tbx, src, tmp_path, family):
    d = src(family)
    g = tmp_path / "lc.gguf"
    llama_convert(d, g, family if family != "bert" else "bert", "f32")
    out = back(tbx, g, tmp_path / "back")
    orig, got = orig_tensors(d), load_dir(out)
    assert set(got) == set(orig), sorted(set(got) ^ set(orig))
    for k, v in orig.items():
        assert same_bits(got[k], plus1(family, k, v)), k
    if family in BACK_ROWS:  # and transformers on it computes what llama.cpp does
        assert logits_cosine_vs_llama_cpp(out, g, BACK_ROWS[family][1]) >= 0.9999
    ta = tokenizers.Tokenizer.from_file(str(d / "tokenizer.json"))
    ta.no_padding()
    ta.no_truncation()
    tb = tokenizers.Tokenizer.from_file(str(out / "tokenizer.json"))
    # Phi-3: the converter's general.name ("Phi 3 Mini 4k Instruct", gguf-py's prettified
    # name) does not make llama.cpp strip the spaces after special tokens as the original
    # tokenizer does (test_hf_runtime.test_phi3_rstrip_needs_the_name): the directory is
    # llama.cpp's tokenizer of this file, so its ids are compared with llama.cpp's
    llm = llama_cpp.Llama(model_path=str(g), vocab_only=True, verbose=False) \
        if TOKFAM[family] == "phi3" else None
    n_rstrip = 0
    for strings in sample_strings(TOKFAM[family]).values():
        for s in strings:
            want = ta.encode(s).ids
            if llm is not None:
                lc = llm.tokenize(s.encode(), add_bos=True, special=True)
                n_rstrip += lc != want
                want = lc
            assert want == tb.encode(s).ids, s
    assert llm is None or n_rstrip > 0  # the strings do tell the two rules apart


# ------------------------------------------------------------------------------------------
# sharding, weights only, errors, atomicity
# ------------------------------------------------------------------------------------------
def test_sharded_index(tbx, src, tmp_path):
    d = src("llama")
    g = tmp_path / "m.gguf"
    convert(tbx, d, g)
    out = back(tbx, g, tmp_path / "back", "--max-shard-size", "50KB")
    idx = json.loads((out / "model.safetensors.index.json").read_text())
    files = sorted(set(idx["weight_map"].values()))
    assert len(files) > 3 and not (out / "model.safetensors").exists()
    n = len(files)
    assert files == [f"model-{i:05d}-of-{n:05d}.safetensors" for i in range(1, n + 1)]
    orig, got = orig_tensors(d), load_dir(out)
    assert set(idx["weight_map"]) == set(orig)
    assert idx["metadata"]["total_size"] == sum(v.numel() * v.element_size() for v in orig.values())
    for f in files:  # each shard within the size, unless one tensor alone is larger
        t = safetensors.torch.load_file(str(out / f))
        size = sum(v.numel() * v.element_size() for v in t.values())
        assert size <= 50_000 or len(t) == 1, (f, size)
    for k, v in orig.items():
        assert same_bits(got[k], v), k
    m = transformers.LlamaForCausalLM.from_pretrained(str(out), dtype=torch.float32)
    assert m is not None


def test_weights_only_and_unknown_architecture(tbx, tbx_asan, tmp_path):
    def fill(w):
        w.add_tensor("blk.0.weird.weight", np.arange(12, dtype=np.float32).reshape(3, 4))
        w.add_tensor("other", np.arange(5, dtype=np.float16))
    g = tmp_path / "x.gguf"
    write_gguf(g, fill, arch="nosuch")
    before = hashlib.sha256(g.read_bytes()).hexdigest()
    r = run(tbx_asan, "convert", str(g), str(tmp_path / "out") + "/")
    assert r.rc == 1 and "nosuch" in r.text and "--weights-only" in r.text, r.describe()
    assert not (tmp_path / "out").exists()
    assert not [p for p in tmp_path.iterdir() if ".tbx-" in p.name]
    out = back(tbx, g, tmp_path / "w", "--weights-only")
    assert sorted(p.name for p in out.iterdir()) == ["model.safetensors"]
    t = safetensors.torch.load_file(str(out / "model.safetensors"))
    assert set(t) == {"blk.0.weird.weight", "other"}
    # default dtype: the 2-D tensors' (f32)
    assert torch.equal(t["blk.0.weird.weight"], torch.arange(12, dtype=torch.float32).reshape(3, 4))
    assert torch.equal(t["other"], torch.arange(5, dtype=torch.float32))
    assert hashlib.sha256(g.read_bytes()).hexdigest() == before


def test_unmappable_tensor_named(tbx_asan, tmp_path):
    def fill(w):
        w.add_uint32("llama.block_count", 1)
        w.add_tensor("token_embd.weight", np.zeros((8, 4), dtype=np.float32))
        w.add_tensor("blk.0.mystery.weight", np.zeros((4, 4), dtype=np.float32))
    g = write_gguf(tmp_path / "m.gguf", fill, arch="llama")
    r = run(tbx_asan, "convert", str(g), str(tmp_path / "out") + "/")
    assert r.rc == 1 and "blk.0.mystery.weight" in r.text and "--weights-only" in r.text, \
        r.describe()
    assert not (tmp_path / "out").exists()


def test_directory_rules_and_atomicity(tbx, src, tmp_path):
    d = src("qwen2")
    g = tmp_path / "m.gguf"
    convert(tbx, d, g)
    # a non-empty directory is never merged into
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "keep.txt").write_text("mine")
    r = run(tbx, "convert", str(g), str(busy) + "/")
    assert r.rc != 0 and "not empty" in r.text, r.describe()
    assert sorted(p.name for p in busy.iterdir()) == ["keep.txt"]
    # an empty directory is filled
    empty = tmp_path / "empty"
    empty.mkdir()
    back(tbx, g, empty)
    assert (empty / "config.json").is_file()
    # a write that fails while the tensors are written (the file size limit, RLIMIT_FSIZE,
    # below the safetensors' size; SIGXFSZ ignored, so the write fails with EFBIG): nothing
    # is left behind, neither the directory nor its temporary one
    import resource
    import signal
    import subprocess

    def limit():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (64 * 1024, 64 * 1024))
    assert g.stat().st_size > 4 * 64 * 1024
    p = subprocess.run([tbx, "convert", str(g), str(tmp_path / "out") + "/"],
                       capture_output=True, text=True, preexec_fn=limit, timeout=600)
    assert p.returncode == 1 and "File too large" in p.stderr, p.stderr
    assert not (tmp_path / "out").exists()
    assert not [q for q in tmp_path.iterdir() if ".tbx-" in q.name], list(tmp_path.iterdir())


# ------------------------------------------------------------------------------------------
# every ggml block type, decoded into the safetensors (--weights-only)
# ------------------------------------------------------------------------------------------
def test_every_ggml_type_into_safetensors(tbx, tmp_path):
    """Every type libggml decodes: random blocks (test_ggml_dequant_identical's, edge scales
    included) as [2, n] tensors of a GGUF; `--weights-only --dtype f32` writes ggml's to_float
    bits of every value, and the default dtype (bf16: every tensor is quantized) torch's
    rounding of them to bfloat16."""
    from test_ggml_dequant_identical import TypeTraits, TO_FLOAT, GGML_TYPE_COUNT, blocks_for, \
        gguf_bytes
    from conftest import ggml_base_lib
    import ctypes
    import struct
    lib = ggml_base_lib()
    lib.ggml_get_type_traits.restype = ctypes.POINTER(TypeTraits)
    lib.ggml_get_type_traits.argtypes = [ctypes.c_int]
    rng = np.random.default_rng(23)
    tensors, want = [], {}
    for t in range(GGML_TYPE_COUNT):
        tt = lib.ggml_get_type_traits(t).contents
        if not (tt.is_quantized and tt.to_float and tt.blck_size > 0 and tt.type_size > 0):
            continue
        name, bs, bb = tt.type_name.decode(), tt.blck_size, tt.type_size
        nblocks = 2 * max(2, 512 // bs)
        blk = np.ascontiguousarray(blocks_for(name, nblocks, bb, rng))
        y = np.zeros(nblocks * bs, np.float32)
        TO_FLOAT(tt.to_float)(blk.ctypes.data, y.ctypes.data, nblocks * bs)
        tensors.append((f"t_{name}", t, nblocks * bs, blk.tobytes()))
        want[f"t_{name}"] = y.reshape(2, -1)
    assert len(want) >= 25, sorted(want)
    # gguf_bytes writes 1-D tensors: make them [2, n] (the second dimension first in GGUF)
    blob = gguf_bytes(tensors)
    for name, _, n, _ in tensors:
        nm = name.encode()
        old = struct.pack("<Q", len(nm)) + nm + struct.pack("<IQ", 1, n)
        new = struct.pack("<Q", len(nm)) + nm + struct.pack("<IQQ", 2, n // 2, 2)
        assert blob.count(old) == 1
        blob = blob.replace(old, new)
    # the tensor infos grew by 8 bytes each: realign the data section
    head_end = blob.index(tensors[-1][0].encode()) + len(tensors[-1][0]) + 4 + 16 + 4 + 8
    data = gguf_bytes(tensors)
    data = data[len(data) - sum(len(r) + (-len(r) % 32) for *_, r in tensors):]
    head = blob[:head_end]
    g = tmp_path / "types.gguf"
    g.write_bytes(head + b"\0" * (-len(head) % 32) + data)
    out = back(tbx, g, tmp_path / "f32", "--weights-only", "--dtype", "f32")
    got = safetensors.torch.load_file(str(out / "model.safetensors"))
    assert set(got) == set(want)
    for k, y in want.items():
        assert tuple(got[k].shape) == y.shape, k
        assert np.array_equal(got[k].numpy().view("<u4"), y.view("<u4")), k
    outb = back(tbx, g, tmp_path / "bf16", "--weights-only")
    gotb = safetensors.torch.load_file(str(outb / "model.safetensors"))
    for k, y in want.items():
        assert gotb[k].dtype == torch.bfloat16, k
        fin = np.isfinite(y)
        w = torch.from_numpy(y.copy()).to(torch.bfloat16)
        assert torch.equal(gotb[k][torch.from_numpy(fin)], w[torch.from_numpy(fin)]), k
        assert not torch.isfinite(gotb[k][torch.from_numpy(~fin)].float()).any(), k


# ------------------------------------------------------------------------------------------
# llama.cpp's "llama" (SentencePiece) vocabulary
# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("as_json", [False, True], ids=["tokenizer.model", "tokenizer.json"])
def test_spm_llama_tokenizer_back(tbx, tmp_path, as_json):
    """test_hf_gguf_spm.py's tiny llama with a SentencePiece BPE trained by PyPI sentencepiece
    (byte fallback), from its tokenizer.model or its tokenizer.json export, to GGUF and back:
    the rebuilt tokenizer.json gives sentencepiece's own ids (with the BOS) in PyPI
    tokenizers, byte fallback and merge priorities included; the tensors are the original's."""
    import test_hf_gguf_spm as S
    proto = S.train_spm()
    sp = S.spm.SentencePieceProcessor(model_proto=proto)
    d = tmp_path / "m"
    S.make_spm_llama(d, 5, proto, as_json)
    g = tmp_path / "m.gguf"
    convert(tbx, d, g)
    out = back(tbx, g, tmp_path / "back")
    tb = tokenizers.Tokenizer.from_file(str(out / "tokenizer.json"))
    texts = S.SPM_TEXTS + S.shuffled_texts()
    assert any(sp.id_to_piece(i).startswith("<0x") for t in texts for i in sp.encode(t))
    for t in texts:
        assert tb.encode(t).ids == [S.BOS] + sp.encode(t), t
    orig, got = orig_tensors(d), load_dir(out)
    assert set(got) == set(orig)
    for k, v in orig.items():
        assert same_bits(got[k], v), k
    # the rebuilt tokenizer.model: SentencePiece itself loads it; its pieces and scores are the
    # GGUF's; from an original tokenizer.model, every piece's score and type is the original's
    # (a GGUF made from tokenizer.json gives its special tokens llama.cpp's HF-vocabulary
    # scores and the CONTROL type, which do not take part in encoding); the special ids and
    # the ids of every string are the original's
    sp2 = S.spm.SentencePieceProcessor(model_file=str(out / "tokenizer.model"))
    fr = gguf.GGUFReader(str(g))
    toks, scores = fr.fields["tokenizer.ggml.tokens"], fr.fields["tokenizer.ggml.scores"]
    assert sp2.get_piece_size() == sp.get_piece_size() == len(toks.data)
    for i in range(sp.get_piece_size()):
        assert sp2.id_to_piece(i) == bytes(toks.parts[toks.data[i]]).decode(), i
        assert sp2.get_score(i) == float(scores.parts[scores.data[i]][0]), i
        if not as_json:
            assert (sp2.get_score(i), sp2.is_control(i), sp2.is_unknown(i), sp2.is_byte(i)) == \
                (sp.get_score(i), sp.is_control(i), sp.is_unknown(i), sp.is_byte(i)), i
    assert (sp2.unk_id(), sp2.bos_id(), sp2.eos_id(), sp2.pad_id()) == \
        (sp.unk_id(), sp.bos_id(), sp.eos_id(), sp.pad_id())
    for t in texts:
        assert sp2.encode(t) == sp.encode(t), t
        assert sp2.decode(sp.encode(t)) == sp.decode(sp.encode(t)), t
    # and the directory converts to the same vocabulary again (the HF -> GGUF path reads the
    # tokenizer.model first, as llama.cpp's converter does), but for the unknown token, which
    # a tokenizer.model always types UNKNOWN (2) where a tokenizer.json's GGUF says CONTROL
    g2 = tmp_path / "again.gguf"
    convert(tbx, out, g2)
    f1, f2 = gguf.GGUFReader(str(g)), gguf.GGUFReader(str(g2))
    for key in ("tokenizer.ggml.tokens", "tokenizer.ggml.scores", "tokenizer.ggml.token_type"):
        a, b = f1.fields[key], f2.fields[key]
        want = [bytes(a.parts[i]) for i in a.data]
        if key.endswith("token_type"):
            want[sp.unk_id()] = (2).to_bytes(4, "little")
        assert want == [bytes(b.parts[i]) for i in b.data], key


def test_gpt_oss_back_refused(tbx, tiny, tmp_path):
    """gpt-oss's way back is not written (its experts would be joined back into gate_up_proj
    and transposed back into down_proj): refused before anything is written, naming the row
    and the reason; --weights-only still writes its tensors."""
    d = tiny("gpt_oss")["dir"]
    g = tmp_path / "g.gguf"
    convert(tbx, d, g)
    r = run(tbx, "convert", str(g), str(tmp_path / "out") + "/")
    assert r.rc == 1 and "row gpt_oss)" in r.text and "not joined back" in r.text and \
        "--weights-only" in r.text, r.describe()
    assert not (tmp_path / "out").exists()
    out = back(tbx, g, tmp_path / "w", "--weights-only")
    names = set(safetensors.torch.load_file(str(out / "model.safetensors")))
    assert {t.name for t in gguf.GGUFReader(str(g)).tensors} == names


# ------------------------------------------------------------------------------------------
# (g) issue 23's rows back: transformers on the directory against llama.cpp on the GGUF
# ------------------------------------------------------------------------------------------
# family -> the model_type and class the directory must say (the multimodal Gemma 3's GGUF
# holds its language model only: it comes back as that text model)
BACK_ROWS = {"gemma2": ("gemma2", "Gemma2ForCausalLM"), "gemma3": ("gemma3_text",
             "Gemma3ForCausalLM"), "gemma3_mm": ("gemma3_text", "Gemma3ForCausalLM"),
             "phi3": ("phi3", "Phi3ForCausalLM"), "phi3_longrope": ("phi3", "Phi3ForCausalLM")}


def logits_cosine_vs_llama_cpp(out: Path, g: Path, cls: str) -> float:
    """The smallest per-token cosine between transformers' logits on directory `out` (eager
    attention: Gemma 2's soft-capping) and llama.cpp's on GGUF `g`, over PROMPTS."""
    tok = transformers.AutoTokenizer.from_pretrained(str(out))
    m = getattr(transformers, cls).from_pretrained(str(out), dtype=torch.float32,
                                                   attn_implementation="eager").eval()
    llm = llama_cpp.Llama(model_path=str(g), n_ctx=128, logits_all=True, verbose=False,
                          type_k=0, type_v=0, n_threads=1, n_batch=128)
    worst = 1.0
    for p in PROMPTS:
        ids = tok(p)["input_ids"]
        with torch.no_grad():
            ref = m(torch.tensor([ids])).logits[0].double().numpy()
        llm.reset()
        llm.eval(ids)
        lc = np.asarray(llm.scores[:len(ids)], dtype=np.float64)
        cos = (lc * ref).sum(-1) / np.linalg.norm(lc, axis=-1) / np.linalg.norm(ref, axis=-1)
        worst = min(worst, float(cos.min()))
    return worst


@pytest.mark.parametrize("gtype", ["f32", "f16"])
@pytest.mark.parametrize("family", list(BACK_ROWS))
def test_back_logits_equal_llama_cpp(tbx, src, tiny, tmp_path, family, gtype):
    """tbx's GGUF of the tiny model, back to a directory: its config.json names the row's
    model_type and class, and transformers' logits on it have cosine >= 0.9999 with llama.cpp's
    on the GGUF, token by token."""
    d = tiny(family)["dir"]
    g = tmp_path / "m.gguf"
    convert(tbx, d, g, *(() if gtype == "f32" else ("--cast", gtype)))
    out = back(tbx, g, tmp_path / "back")
    mt, cls = BACK_ROWS[family]
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["model_type"] == mt and cfg["architectures"] == [cls], cfg
    worst = logits_cosine_vs_llama_cpp(out, g, cls)
    print(f"{family} {gtype}: min token cosine of logits, transformers (back) vs llama.cpp "
          f"{worst:.7f}")
    assert worst >= 0.9999, worst


def test_gemma3_multimodal_gguf_back_as_text_model(tbx, tiny, tmp_path):
    """A Gemma3ForConditionalGeneration's GGUF (its language model; the vision tower is left
    out as llama.cpp's converter leaves it out) comes back as the gemma3_text model: its
    tensors are the multimodal model's language-model tensors (norms as PLUS1)."""
    d = tiny("gemma3_mm")["dir"]
    g = tmp_path / "m.gguf"
    convert(tbx, d, g)
    out = back(tbx, g, tmp_path / "back")
    got = load_dir(out)
    orig = {}
    for k, v in load_dir(d).items():
        # transformers 5 saves it as language_model.model.*, 4.x as model.language_model.*
        for pre, to in (("language_model.model.", "model."), ("model.language_model.", "model."),
                        ("language_model.lm_head.", "lm_head."), ("lm_head.", "lm_head.")):
            if k.startswith(pre):
                orig[to + k[len(pre):]] = plus1("gemma3_mm", k, v)
                break
    assert set(got) == set(orig), sorted(set(got) ^ set(orig))
    for k, v in orig.items():
        assert same_bits(got[k], v), k


def test_gemma2_27b_layer_count_attention_scale(tbx, minilm_dir, tmp_path):
    """llama.cpp scales a Gemma 2 of 46 layers (its 27B) by 1/sqrt(hidden / heads), not by
    1/sqrt(head size): a tiny Gemma 2 of 46 layers with query_pre_attn_scalar = hidden / heads
    (16; head size 24) comes back with query_pre_attn_scalar 16, and transformers on it gives
    llama.cpp's logits (the head size, 24, would not)."""
    import test_hf_runtime as R
    saved = dict(R.GEMMA_CFG["gemma2"])
    R.GEMMA_CFG["gemma2"].update(num_hidden_layers=46, query_pre_attn_scalar=16)
    try:
        d = R.build(tmp_path / "hf", "gemma2", minilm_dir)["dir"]
    finally:
        R.GEMMA_CFG["gemma2"] = saved
    g = tmp_path / "m.gguf"
    convert(tbx, d, g)
    out = back(tbx, g, tmp_path / "back")
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["query_pre_attn_scalar"] == 16 and cfg["head_dim"] == 24, cfg
    assert len(cfg["layer_types"]) == 46
    assert logits_cosine_vs_llama_cpp(out, g, "Gemma2ForCausalLM") >= 0.9999


def test_phi3_partial_rotary_back(tbx, tiny, tmp_path):
    """A Phi-3 that rotates half of each head (partial_rotary_factor 0.5, as Phi-4-mini's 0.75):
    its GGUF's rope.dimension_count (8 of a 16-wide head) comes back as partial_rotary_factor
    0.5, not as a head_dim, and transformers on the directory gives llama.cpp's logits (with
    every dimension rotated they differ: checked on the same weights)."""
    import shutil
    d = tmp_path / "phi3-partial"
    shutil.copytree(tiny("phi3")["dir"], d)
    cfg = json.loads((d / "config.json").read_text())
    cfg["partial_rotary_factor"] = 0.5
    (d / "config.json").write_text(json.dumps(cfg))
    g = tmp_path / "m.gguf"
    convert(tbx, d, g)
    out = back(tbx, g, tmp_path / "back")
    bc = json.loads((out / "config.json").read_text())
    assert bc["partial_rotary_factor"] == 0.5 and "head_dim" not in bc, bc
    assert logits_cosine_vs_llama_cpp(out, g, "Phi3ForCausalLM") >= 0.9999
    full = tmp_path / "full"
    shutil.copytree(out, full)
    del bc["partial_rotary_factor"]
    (full / "config.json").write_text(json.dumps(bc))
    assert logits_cosine_vs_llama_cpp(full, g, "Phi3ForCausalLM") < 0.9999


# ------------------------------------------------------------------------------------------
# (h) llama3 rope scaling: rope_freqs.weight back into rope_scaling
# ------------------------------------------------------------------------------------------
# Llama 3.1's rope_scaling and rope_theta, on a tiny llama with Llama 3's head size (128: 64
# frequencies, six of them in the band between 1 and the factor)
LLAMA31_ROPE = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                "high_freq_factor": 4.0, "original_max_position_embeddings": 8192,
                "rope_theta": 500000.0}


def build_llama3(d: Path, minilm_dir: Path, rope: dict, head: int = 128) -> Path:
    import test_hf_runtime as R
    return R.build(d, "llama", minilm_dir, size={
        "hidden_size": 2 * head, "num_attention_heads": 2, "num_key_value_heads": 1,
        "max_position_embeddings": 131072, "rope_parameters": dict(rope)})["dir"]


@pytest.fixture(scope="module")
def llama3_dir(tmp_path_factory, minilm_dir):
    return build_llama3(tmp_path_factory.mktemp("llama3") / "llama3", minilm_dir, LLAMA31_ROPE)


def rope_freqs_of(g: Path) -> "np.ndarray":
    t = [t for t in gguf.GGUFReader(str(g)).tensors if t.name == "rope_freqs.weight"]
    assert len(t) == 1, g
    return np.array(t[0].data, dtype=np.float32)


@pytest.mark.parametrize("maker", ["tbx", "llama.cpp"])
def test_llama3_rope_freqs_back(tbx, llama3_dir, tmp_path, maker):
    """A llama with Llama 3.1's rope scaling, to GGUF by tbx or by llama.cpp's converter, back
    to a directory: rope_scaling comes back as the original's (every field; the file holds only
    rope_freqs.weight, from which they are solved), no rope_freqs tensor among the
    safetensors, every other tensor bit-identical; llama.cpp's converter run on the
    back-converted directory writes rope_freqs.weight bit for bit as the GGUF's (and as its own
    of the original directory); transformers on the directory gives llama.cpp's logits on the
    GGUF (token cosine >= 0.9999)."""
    d = llama3_dir
    g = tmp_path / "m.gguf"
    if maker == "tbx":
        convert(tbx, d, g)
    else:
        llama_convert(d, g, "llama", "f32")
    out = back(tbx, g, tmp_path / "back")
    cfg = json.loads((out / "config.json").read_text())
    rs = cfg["rope_scaling"]
    assert rs == {k: v for k, v in LLAMA31_ROPE.items() if k != "rope_theta"}, rs
    ca = transformers.AutoConfig.from_pretrained(str(d)).to_dict()
    cb = transformers.AutoConfig.from_pretrained(str(out)).to_dict()
    assert ca["rope_parameters"] == cb["rope_parameters"], (ca["rope_parameters"],
                                                            cb["rope_parameters"])
    orig, got = orig_tensors(d), load_dir(out)
    assert set(got) == set(orig), sorted(set(got) ^ set(orig))
    for k, v in orig.items():
        assert same_bits(got[k], v), k
    # the converter's own computation from the written config gives the bits it computes from
    # the original's, which are the GGUF's own whoever wrote it (tbx's HF -> GGUF rounds each
    # step to f32 as the converter's torch code does, hf_gguf.c's rope_freqs)
    again, ref = tmp_path / "again.gguf", tmp_path / "ref.gguf"
    llama_convert(out, again, "llama", "f32")
    if maker == "tbx":
        llama_convert(d, ref, "llama", "f32")
    else:
        ref = g
    rr, ra, rf = rope_freqs_of(ref), rope_freqs_of(again), rope_freqs_of(g)
    assert rr.view(np.uint32).tolist() == ra.view(np.uint32).tolist(), (rr, ra)
    assert rf.view(np.uint32).tolist() == ra.view(np.uint32).tolist(), (rf, ra)
    assert ((ra != 1) & (ra != 8)).sum() >= 2
    assert logits_cosine_vs_llama_cpp(out, g, "LlamaForCausalLM") >= 0.9999


@pytest.mark.parametrize("case", ["one-band-value", "no-factor-band", "tampered", "shuffled"])
def test_llama3_rope_freqs_not_recoverable_refused(tbx, tbx_asan, llama3_dir, minilm_dir,
                                                   tmp_path, case):
    """rope_freqs.weight values from which llama3's parameters cannot be solved uniquely (one
    value between 1 and the factor: two unknowns; no value at the factor: the factor is not in
    the file) or that no llama3 parameters give (one value moved, the vector out of order)
    are refused, naming the tensor and why; nothing is written; --weights-only still writes
    the tensors."""
    if case == "one-band-value":  # head size 16: 8 frequencies, one in the band
        d = build_llama3(tmp_path / "hf", minilm_dir, LLAMA31_ROPE, head=16)
        g = tmp_path / "m.gguf"
        convert(tbx, d, g)
        assert ((rope_freqs_of(g) != 1) & (rope_freqs_of(g) != 8)).sum() == 1
        said = "fewer than two values"
    elif case == "no-factor-band":  # an original context longer than every wavelength
        rope = dict(LLAMA31_ROPE, original_max_position_embeddings=1 << 24)
        d = build_llama3(tmp_path / "hf", minilm_dir, rope)
        g = tmp_path / "m.gguf"
        convert(tbx, d, g)
        assert (rope_freqs_of(g) != 8).all()
        said = "no low-frequency band"
    else:
        g0 = tmp_path / "m0.gguf"
        convert(tbx, llama3_dir, g0)
        r = rope_freqs_of(g0)
        band = np.flatnonzero((r != 1) & (r != 8))
        new = r.copy()
        if case == "tampered":
            new[band[1]] *= np.float32(1.01)
            said = "no llama3 parameters"
        else:
            new[band[0]], new[band[-1]] = r[band[-1]], r[band[0]]
            new[band[0] - 1], new[band[-1] + 1] = np.float32(8), np.float32(1)
            said = "not 1, then a band"
        g = tmp_path / "m.gguf"
        data = bytearray(g0.read_bytes())
        off = [t for t in gguf.GGUFReader(str(g0)).tensors
               if t.name == "rope_freqs.weight"][0].data_offset
        data[off:off + r.nbytes] = new.tobytes()
        g.write_bytes(bytes(data))
        assert rope_freqs_of(g).tolist() == new.tolist()
    res = run(tbx_asan, "convert", str(g), str(tmp_path / "out") + "/")
    assert res.rc == 1 and "rope_freqs.weight" in res.text and said in res.text, res.describe()
    assert not (tmp_path / "out").exists()
    w = back(tbx, g, tmp_path / "w", "--weights-only")
    assert "rope_freqs.weight" in safetensors.torch.load_file(str(w / "model.safetensors"))
