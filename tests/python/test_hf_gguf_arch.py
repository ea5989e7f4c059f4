"""The Hugging Face -> GGUF architecture table (src/models/arch_llama_cpp.c) and the map
entries that are more than one tensor to one:

(a) the supported list has one source: `tbx convert --help`, the unsupported-architecture
    error and tensorbox.hf_architectures() each list exactly the rows of the table, read here
    from the C source itself (not from tensorbox's output);
(b) mixtral (a row whose experts are several HF tensors stacked into one GGUF tensor,
    written as llama.cpp's "llama"): a tiny random checkpoint built here (numpy +
    safetensors), converted; every key is one gguf.constants defines, every tensor name the
    one gguf.tensor_mapping gives the merged HF name (as convert_hf_to_gguf.py names it), the
    stacked and permuted values equal what numpy derives from the HF tensors by llama.cpp's
    converter's rules (torch.stack of the experts, LlamaModel.permute of q/k), the router is
    f32 under --cast f16, and llama.cpp's logits equal a numpy Mixtral forward;
(c) qwen2's yarn rope scaling (convert_hf_to_gguf.py's Qwen2Model writes it): gguf.constants'
    keys, and llama.cpp loads the file;
(d) broken MoE checkpoints (an expert missing, a count that contradicts config.json) are errors
    naming what is wrong.
"""
from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

from conftest import REPO, assert_clean_exit, need, run
from test_hf_gguf import check_names_and_keys, convert, make_decoder, read_gguf

np = need("numpy")
stn = need("safetensors.numpy")
gguf = need("gguf")
tokenizers = need("tokenizers")
llama_cpp = need("llama_cpp")

TABLE = REPO / "src" / "models" / "arch_llama_cpp.c"


def table_rows() -> list[tuple[str, str]]:
    """(model_type, general.architecture) of every row of ARCHES[] in the C source."""
    src = TABLE.read_text()
    body = re.search(r"static const hf_arch ARCHES\[\] = \{(.*?)\n\};", src, re.S)
    assert body, "ARCHES[] not found in " + str(TABLE)
    rows = re.findall(r'^\s*\{"([A-Za-z0-9_-]+)", "([A-Za-z0-9_-]+)",', body.group(1), re.M)
    assert len(rows) >= 3, rows
    return rows


# ------------------------------------------------------------------------------------------
# (a) one supported list
# ------------------------------------------------------------------------------------------
def test_row_flags_are_distinct_bits():
    """Every flag family of arch.h (ARCH_*, TBX_HF_TOK_*, TBX_HF_ROPE_*) is a set of distinct
    single bits: rows are added side by side, and a flag sharing another's bit would switch one
    row's quirk on for another (two merges once gave ARCH_NO_HEAD_DIM ARCH_POS_OFFSET's bit).
    Read from the header, so a new flag is checked without being listed here."""
    text = (REPO / "src" / "models" / "arch.h").read_text()
    for family in ("ARCH_", "TBX_HF_TOK_", "TBX_HF_ROPE_"):
        flags = {n: int(v, 16) for n, v in
                 re.findall(r"^#define (" + family + r"\w+)\s+(0x[0-9a-fA-F]+)u", text, re.M)
                 if not n.startswith("ARCH_H")}
        assert len(flags) >= 3, (family, flags)
        seen: dict[int, str] = {}
        for name, v in flags.items():
            assert v and v & (v - 1) == 0, f"{name} = {v:#x} is not a single bit"
            assert v not in seen, f"{name} and {seen[v]} share the bit {v:#x}"
            seen[v] = name


def test_supported_list_is_the_table(tbx, tmp_path):
    rows = table_rows()
    # tbx convert --help: "  bert llama mixtral (-> llama) qwen2"
    r = run(tbx, "convert", "--help")
    assert r.rc == 0, r.describe()
    lines = r.out.decode().splitlines()
    k = next(i for i, l in enumerate(lines) if l.startswith("Hugging Face architectures"))
    want = " ".join(mt if mt == a else f"{mt} (-> {a})" for mt, a in rows)
    assert lines[k + 1].strip() == want, (lines[k + 1], want)
    # the error for an architecture outside the table
    d = tmp_path / "m"
    make_decoder(d, "llama", 3)
    cfg = json.loads((d / "config.json").read_text())
    cfg["model_type"] = "not_a_row"
    (d / "config.json").write_text(json.dumps(cfg))
    r = run(tbx, "convert", d, tmp_path / "x.gguf")
    assert_clean_exit(r)
    assert r.rc == 1, r.describe()
    m = re.search(r"[(;] ?supported: ([^;]*);", r.err.decode())
    assert m, r.describe()
    assert m.group(1).split(", ") == [mt for mt, _ in rows]
    # Python
    tensorbox = need("tensorbox")
    assert tensorbox.hf_architectures() == rows


# ------------------------------------------------------------------------------------------
# (b) mixtral: experts stacked
# ------------------------------------------------------------------------------------------
N_EXP, TOP_K, FF_EXP = 4, 2, 96


def make_mixtral(d: Path, seed: int):
    """make_decoder's llama with each MLP replaced by Mixtral's sparse MoE block."""
    W, cfg = make_decoder(d, "llama", seed)
    cfg.update({"architectures": ["MixtralForCausalLM"], "model_type": "mixtral",
                "num_local_experts": N_EXP, "num_experts_per_tok": TOP_K,
                "intermediate_size": FF_EXP})
    (d / "config.json").write_text(json.dumps(cfg, indent=2))
    rng = np.random.default_rng(seed + 100)
    g = lambda *s, sc=0.08: (rng.standard_normal(s) * sc).astype(np.float32)
    E = cfg["hidden_size"]
    for l in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{l}."
        for n in ("gate_proj", "up_proj", "down_proj"):
            del W[p + "mlp." + n + ".weight"]
        W[p + "block_sparse_moe.gate.weight"] = g(N_EXP, E, sc=0.5)
        for x in range(N_EXP):
            q = p + f"block_sparse_moe.experts.{x}."
            W[q + "w1.weight"] = g(FF_EXP, E)
            W[q + "w2.weight"] = g(E, FF_EXP)
            W[q + "w3.weight"] = g(FF_EXP, E)
    # experts written in a shuffled order: the stack follows the expert numbers, not the file
    names = sorted(W, key=lambda n: (rng.random(), n))
    stn.save_file({n: W[n] for n in names}, str(d / "model.safetensors"),
                  metadata={"format": "pt"})
    return W, cfg


def permute(w, n_head):
    """convert_hf_to_gguf.py's LlamaModel.permute (n_head: the heads of this projection)."""
    return (w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:])
            .swapaxes(1, 2).reshape(w.shape))


def decoder_with_ffn(W, cfg, ids, ffn):
    """An HF llama-style decoder in float64 (rotate-half rope, GQA, q/k/v biases when W has
    them) whose feed-forward block is ffn(h, "model.layers.N.") on the normed hidden states."""
    f = lambda k: W[k].astype(np.float64)
    eps = cfg["rms_norm_eps"]
    rms = lambda x, w: x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * w
    L, E = cfg["num_hidden_layers"], cfg["hidden_size"]
    H, KV = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    D = E // H
    n = len(ids)
    pos = np.arange(n, dtype=np.float64)
    inv = cfg["rope_theta"] ** (-np.arange(0, D, 2, dtype=np.float64) / D)
    ang = pos[:, None] * inv[None, :]
    cos, sin = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]

    def rope(x):
        x1, x2 = x[..., :D // 2], x[..., D // 2:]
        return np.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], -1)

    def lin(x, p):
        y = x @ f(p + ".weight").T
        return y + f(p + ".bias") if p + ".bias" in W else y

    x = f("model.embed_tokens.weight")[np.asarray(ids)]
    mask = np.triu(np.full((n, n), -np.inf), 1)
    for l in range(L):
        p = f"model.layers.{l}."
        h = rms(x, f(p + "input_layernorm.weight"))
        q = rope(lin(h, p + "self_attn.q_proj").reshape(n, H, D))
        k = rope(lin(h, p + "self_attn.k_proj").reshape(n, KV, D))
        v = lin(h, p + "self_attn.v_proj").reshape(n, KV, D)
        k = np.repeat(k, H // KV, axis=1)
        v = np.repeat(v, H // KV, axis=1)
        a = np.einsum("qhd,khd->hqk", q, k) / math.sqrt(D) + mask
        a = np.exp(a - a.max(-1, keepdims=True))
        a /= a.sum(-1, keepdims=True)
        o = np.einsum("hqk,khd->qhd", a, v).reshape(n, H * D)
        x = x + lin(o, p + "self_attn.o_proj")
        x = x + ffn(rms(x, f(p + "post_attention_layernorm.weight")), p)
    return rms(x, f("model.norm.weight")) @ f("lm_head.weight").T


def moe_ffn(W, router, expert, n_used, renorm, shared=None):
    """A sparse MoE block: softmax over the router's logits, the n_used most probable experts
    (their probabilities renormalised to sum 1 when `renorm`: Mixtral; else as they are:
    Qwen2-MoE), each a SiLU-gated MLP (gate, up, down names from expert(p, x)); plus, when
    `shared` names them, a shared expert scaled by the sigmoid of its own gate."""
    f = lambda k: W[k].astype(np.float64)
    mlp = lambda h, g, u, d: ((lambda a: a / (1 + np.exp(-a)))(h @ f(g).T) * (h @ f(u).T)) @ f(d).T

    def ffn(h, p):
        logits = h @ f(p + router).T
        pr = np.exp(logits - logits.max(-1, keepdims=True))
        pr /= pr.sum(-1, keepdims=True)
        out = np.zeros_like(h)
        for t in range(h.shape[0]):
            top = np.argsort(-pr[t])[:n_used]
            w = pr[t, top] / pr[t, top].sum() if renorm else pr[t, top]
            for x, wx in zip(top, w):
                out[t] += wx * mlp(h[t], *expert(p, x))
        if shared:
            g, u, d, sg = (p + s for s in shared)
            out += (1 / (1 + np.exp(-(h @ f(sg).T)))) * mlp(h, g, u, d)
        return out
    return ffn


def mixtral_logits(W, cfg, ids):
    """HF Mixtral forward in float64."""
    e = "block_sparse_moe.experts."
    return decoder_with_ffn(W, cfg, ids, moe_ffn(
        W, "block_sparse_moe.gate.weight",
        lambda p, x: (p + f"{e}{x}.w1.weight", p + f"{e}{x}.w3.weight", p + f"{e}{x}.w2.weight"),
        TOP_K, True))


def merged_hf_names(W) -> list[str]:
    """The HF names convert_hf_to_gguf.py maps after stacking: experts.{x}.wN -> experts.wN."""
    out = set()
    for n in W:
        out.add(re.sub(r"\.experts\.\d+\.", ".experts.", n))
    return sorted(out)


def test_mixtral_experts_stacked_in_llama_cpp(tbx, tmp_path):
    d = tmp_path / "mixtral"
    W, cfg = make_mixtral(d, 11)
    out = tmp_path / "mixtral.gguf"
    convert(tbx, d, out)
    L = cfg["num_hidden_layers"]
    r, fields = check_names_and_keys(out, merged_hf_names(W), gguf.MODEL_ARCH.LLAMA, L)
    K = gguf.Keys.LLM
    assert fields[K.EXPERT_COUNT.format(arch="llama")].contents() == N_EXP
    assert fields[K.EXPERT_USED_COUNT.format(arch="llama")].contents() == TOP_K
    assert fields[K.FEED_FORWARD_LENGTH.format(arch="llama")].contents() == FF_EXP
    T = {t.name: t for t in r.tensors}
    H, KV = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    for l in range(L):
        p = f"model.layers.{l}."
        for w, role in (("w1", "ffn_gate_exps"), ("w2", "ffn_down_exps"), ("w3", "ffn_up_exps")):
            want = np.stack([W[p + f"block_sparse_moe.experts.{x}.{w}.weight"]
                             for x in range(N_EXP)])
            t = T[f"blk.{l}.{role}.weight"]
            assert [int(v) for v in t.shape] == list(reversed(want.shape)), (role, t.shape)
            got = np.asarray(t.data).reshape(want.shape)
            assert np.array_equal(got, want), role
        got = np.asarray(T[f"blk.{l}.attn_q.weight"].data).reshape(H * 32, -1)
        assert np.array_equal(got, permute(W[p + "self_attn.q_proj.weight"], H))
        got = np.asarray(T[f"blk.{l}.attn_k.weight"].data).reshape(KV * 32, -1)
        assert np.array_equal(got, permute(W[p + "self_attn.k_proj.weight"], KV))
        assert np.array_equal(np.asarray(T[f"blk.{l}.ffn_gate_inp.weight"].data),
                              W[p + "block_sparse_moe.gate.weight"])
    # llama.cpp runs it: its logits are the numpy Mixtral's
    tok = tokenizers.Tokenizer.from_file(str(d / "tokenizer.json"))
    ids = [0] + tok.encode("the cat sat on the log and llama runs; 12345 dogs don't!").ids
    ref = mixtral_logits(W, cfg, ids)
    llm = llama_cpp.Llama(model_path=str(out), n_ctx=64, logits_all=True, verbose=False,
                          type_k=0, type_v=0)
    llm.eval(ids)
    got = np.asarray(llm.scores[:len(ids)], dtype=np.float64)
    assert np.isfinite(got).all()
    diff = float(np.abs(got - ref).max())
    print(f"mixtral: {len(ids)} tokens, max |logit diff| {diff:.3g} "
          f"(logits up to {np.abs(ref).max():.3g})")
    assert diff <= 1e-3, diff
    # --cast f16: the stacks are cast, the router stays f32 (llama.cpp's converter and
    # llama-quantize keep ffn_gate_inp in f32)
    out16 = tmp_path / "mixtral16.gguf"
    convert(tbx, d, out16, "--cast", "f16")
    Q = gguf.GGMLQuantizationType
    types = {t.name: t.tensor_type for t in read_gguf(out16)[0].tensors}
    assert types["blk.0.ffn_gate_inp.weight"] == Q.F32
    assert types["blk.0.ffn_up_exps.weight"] == Q.F16
    assert types["blk.0.attn_norm.weight"] == Q.F32


# ------------------------------------------------------------------------------------------
# (c) qwen2 with yarn
# ------------------------------------------------------------------------------------------
def test_qwen2_yarn_rope_scaling(tbx, tmp_path):
    rs = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64}
    W, cfg = make_decoder(tmp_path / "q", "qwen2", 5, rs)
    out = tmp_path / "q.gguf"
    convert(tbx, tmp_path / "q", out)
    _, fields = check_names_and_keys(out, list(W), gguf.MODEL_ARCH.QWEN2, 2)
    R = gguf.Keys.Rope
    assert fields[R.SCALING_TYPE.format(arch="qwen2")].contents() == "yarn"
    assert fields[R.SCALING_FACTOR.format(arch="qwen2")].contents() == 4.0
    assert fields[R.SCALING_ORIG_CTX_LEN.format(arch="qwen2")].contents() == 64
    llm = llama_cpp.Llama(model_path=str(out), n_ctx=64, logits_all=True, verbose=False)
    llm.eval([0, 5, 7, 9])
    assert np.isfinite(np.asarray(llm.scores[:4])).all()
    # a yarn without its original context is refused (llama.cpp's converter needs it)
    cfg["rope_scaling"] = {"rope_type": "yarn", "factor": 4.0}
    (tmp_path / "q" / "config.json").write_text(json.dumps(cfg))
    r = run(tbx, "convert", tmp_path / "q", tmp_path / "y.gguf")
    assert r.rc == 1 and "original_max_position_embeddings" in r.err.decode(), r.describe()


# ------------------------------------------------------------------------------------------
# (d) broken MoE checkpoints
# ------------------------------------------------------------------------------------------
def _drop(name):
    def apply(d):
        W = stn.load_file(str(d / "model.safetensors"))
        del W[name]
        stn.save_file(W, str(d / "model.safetensors"))
    return apply


def _cfg(**kv):
    def apply(d):
        c = json.loads((d / "config.json").read_text())
        (d / "config.json").write_text(json.dumps({**c, **kv}))
    return apply


def _reshape(name, rows):
    def apply(d):
        W = stn.load_file(str(d / "model.safetensors"))
        W[name] = np.zeros((rows, W[name].shape[1]), np.float32)
        stn.save_file(W, str(d / "model.safetensors"))
    return apply


MOE_BROKEN = [
    ("expert_missing", _drop("model.layers.1.block_sparse_moe.experts.1.w3.weight"),
     ("blk.1.ffn_up_exps.weight", "no expert 1")),
    ("expert_count", _cfg(num_local_experts=3), ("num_local_experts = 3", "gate.weight has 4 rows")),
    # the last expert of layer 1 gone from all three stacks: the router still has 4 rows
    ("expert_last_missing", lambda d: [_drop(f"model.layers.1.block_sparse_moe.experts.3.{w}"
                                             ".weight")(d) for w in ("w1", "w2", "w3")],
     ("num_local_experts = 4", "has 3 experts")),
    ("expert_shape", _reshape("model.layers.0.block_sparse_moe.experts.2.w1.weight", 95),
     ("experts.2.w1.weight", "differs", "experts.0.w1.weight")),
    ("no_experts_per_tok", lambda d: (d / "config.json").write_text(json.dumps(
        {k: v for k, v in json.loads((d / "config.json").read_text()).items()
         if k != "num_experts_per_tok"})), ("num_experts_per_tok",)),
]


@pytest.mark.parametrize("case,mutate,needles", MOE_BROKEN, ids=[c[0] for c in MOE_BROKEN])
def test_broken_moe(tbx_asan, tmp_path, case, mutate, needles):
    d = tmp_path / "m"
    make_mixtral(d, 3)
    mutate(d)
    out = tmp_path / "out.gguf"
    r = run(tbx_asan, "convert", d, out)
    assert_clean_exit(r)
    assert r.rc == 1, r.describe()
    for n in needles:
        assert n in r.err.decode(), r.describe()
    assert not out.exists()


# ------------------------------------------------------------------------------------------
# (e) baichuan: one fused W_pack split into q, k, v (q and k reordered by heads)
# ------------------------------------------------------------------------------------------
def make_baichuan(d: Path, seed: int, proto: bytes):
    """Baichuan-7B's shape in small: llama with W_pack = [q; k; v], no GQA, a SentencePiece
    tokenizer.model, and 32 layers (llama.cpp runs a baichuan of 32 layers as its 7B: rotary;
    40 is its 13B, ALiBi; another count it refuses to run)."""
    from test_hf_gguf_spm import BOS, EOS, TOKCFG
    spm = need("sentencepiece")
    d.mkdir()
    (d / "tokenizer.model").write_bytes(proto)
    (d / "tokenizer_config.json").write_text(json.dumps(TOKCFG))
    V = spm.SentencePieceProcessor(model_proto=proto).get_piece_size()
    H, D, L, FF = 4, 16, 32, 96
    E = H * D
    cfg = {"architectures": ["BaichuanForCausalLM"], "model_type": "baichuan",
           "hidden_size": E, "intermediate_size": FF, "num_hidden_layers": L,
           "num_attention_heads": H, "max_position_embeddings": 256, "rms_norm_eps": 1e-6,
           "vocab_size": V, "bos_token_id": BOS, "eos_token_id": EOS,
           "tie_word_embeddings": False, "torch_dtype": "float32"}
    (d / "config.json").write_text(json.dumps(cfg, indent=2))
    rng = np.random.default_rng(seed)
    g = lambda *s, sc=0.08: (rng.standard_normal(s) * sc).astype(np.float32)
    W = {"model.embed_tokens.weight": g(V, E, sc=0.5), "model.norm.weight": 1 + g(E, sc=0.1),
         "lm_head.weight": g(V, E, sc=0.2)}
    for l in range(L):
        p = f"model.layers.{l}."
        W[p + "input_layernorm.weight"] = 1 + g(E, sc=0.1)
        W[p + "post_attention_layernorm.weight"] = 1 + g(E, sc=0.1)
        W[p + "self_attn.W_pack.weight"] = g(3 * E, E, sc=0.15)
        W[p + "self_attn.o_proj.weight"] = g(E, E)
        W[p + "mlp.gate_proj.weight"] = g(FF, E)
        W[p + "mlp.up_proj.weight"] = g(FF, E)
        W[p + "mlp.down_proj.weight"] = g(E, FF)
    stn.save_file(W, str(d / "model.safetensors"), metadata={"format": "pt"})
    return W, cfg


def unpacked(W, cfg):
    """W with each W_pack cut into HF's q_proj, k_proj, v_proj (its thirds, as Baichuan's
    modelling code does: proj.unflatten(-1, (3, hidden)))."""
    E = cfg["hidden_size"]
    out = {}
    for n, a in W.items():
        if n.endswith(".W_pack.weight"):
            p = n[:-len("W_pack.weight")]
            for k, part in enumerate(("q_proj", "k_proj", "v_proj")):
                out[p + part + ".weight"] = a[k * E:(k + 1) * E]
        else:
            out[n] = a
    return out


def test_baichuan_w_pack_split_in_llama_cpp(tbx, tmp_path):
    from test_hf_gguf import decoder_logits
    from test_hf_gguf_spm import train_spm
    spm = need("sentencepiece")
    proto = train_spm()
    d = tmp_path / "baichuan"
    W, cfg = make_baichuan(d, 21, proto)
    out = tmp_path / "baichuan.gguf"
    convert(tbx, d, out)
    U = unpacked(W, cfg)
    L, H = cfg["num_hidden_layers"], cfg["num_attention_heads"]
    # the names convert_hf_to_gguf.py gives the parts (q_proj, k_proj, v_proj -> attn_q/k/v)
    r, fields = check_names_and_keys(out, list(U), gguf.MODEL_ARCH.BAICHUAN, L)
    assert fields["baichuan.attention.head_count_kv"].contents() == H
    assert fields["baichuan.rope.dimension_count"].contents() == cfg["hidden_size"] // H
    assert fields["tokenizer.ggml.model"].contents() == "llama"
    T = {t.name: t for t in r.tensors}
    for l in (0, L - 1):
        p = f"model.layers.{l}.self_attn."
        for part, role, perm in (("q_proj", "attn_q", True), ("k_proj", "attn_k", True),
                                 ("v_proj", "attn_v", False)):
            want = permute(U[p + part + ".weight"], H) if perm else U[p + part + ".weight"]
            got = np.asarray(T[f"blk.{l}.{role}.weight"].data).reshape(want.shape)
            assert np.array_equal(got, want), (l, role)
    sp = spm.SentencePieceProcessor(model_proto=proto)
    ids = [1] + sp.encode("the cat sat on the log and llama runs")
    ref = decoder_logits(U, {**cfg, "num_key_value_heads": H, "rope_theta": 10000.0}, ids)
    llm = llama_cpp.Llama(model_path=str(out), n_ctx=64, logits_all=True, verbose=False,
                          type_k=0, type_v=0)
    llm.eval(ids)
    got = np.asarray(llm.scores[:len(ids)], dtype=np.float64)
    assert np.isfinite(got).all()
    diff = float(np.abs(got - ref).max())
    print(f"baichuan: {len(ids)} tokens, max |logit diff| {diff:.3g} "
          f"(logits up to {np.abs(ref).max():.3g})")
    assert diff <= 1e-3, diff


# ------------------------------------------------------------------------------------------
# (f) qwen2_moe: experts of their own size stacked, a shared expert with its gate
# ------------------------------------------------------------------------------------------
Q_EXP, Q_TOP, Q_FF_EXP, Q_FF_SH = 4, 2, 48, 80


def make_qwen2_moe(d: Path, seed: int):
    """make_decoder's qwen2 (q/k/v biases) with each MLP replaced by Qwen2-MoE's block."""
    W, cfg = make_decoder(d, "qwen2", seed)
    cfg.update({"architectures": ["Qwen2MoeForCausalLM"], "model_type": "qwen2_moe",
                "num_experts": Q_EXP, "num_experts_per_tok": Q_TOP,
                "moe_intermediate_size": Q_FF_EXP, "shared_expert_intermediate_size": Q_FF_SH,
                "norm_topk_prob": False})
    (d / "config.json").write_text(json.dumps(cfg, indent=2))
    rng = np.random.default_rng(seed + 200)
    g = lambda *s, sc=0.08: (rng.standard_normal(s) * sc).astype(np.float32)
    E = cfg["hidden_size"]
    for l in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{l}.mlp."
        for n in ("gate_proj", "up_proj", "down_proj"):
            del W[p + n + ".weight"]
        W[p + "gate.weight"] = g(Q_EXP, E, sc=0.5)
        for x in range(Q_EXP):
            W[p + f"experts.{x}.gate_proj.weight"] = g(Q_FF_EXP, E)
            W[p + f"experts.{x}.up_proj.weight"] = g(Q_FF_EXP, E)
            W[p + f"experts.{x}.down_proj.weight"] = g(E, Q_FF_EXP)
        W[p + "shared_expert.gate_proj.weight"] = g(Q_FF_SH, E)
        W[p + "shared_expert.up_proj.weight"] = g(Q_FF_SH, E)
        W[p + "shared_expert.down_proj.weight"] = g(E, Q_FF_SH)
        W[p + "shared_expert_gate.weight"] = g(1, E, sc=0.3)
    stn.save_file(W, str(d / "model.safetensors"), metadata={"format": "pt"})
    return W, cfg


def test_qwen2_moe_in_llama_cpp(tbx, tmp_path):
    d = tmp_path / "qmoe"
    W, cfg = make_qwen2_moe(d, 17)
    out = tmp_path / "qmoe.gguf"
    convert(tbx, d, out)
    L = cfg["num_hidden_layers"]
    r, fields = check_names_and_keys(out, merged_hf_names(W), gguf.MODEL_ARCH.QWEN2MOE, L)
    K = gguf.Keys.LLM
    for key, want in ((K.EXPERT_COUNT, Q_EXP), (K.EXPERT_USED_COUNT, Q_TOP),
                      (K.EXPERT_FEED_FORWARD_LENGTH, Q_FF_EXP),
                      (K.EXPERT_SHARED_FEED_FORWARD_LENGTH, Q_FF_SH),
                      (K.FEED_FORWARD_LENGTH, cfg["intermediate_size"])):
        assert fields[key.format(arch="qwen2moe")].contents() == want, key
    T = {t.name: t for t in r.tensors}
    for l in range(L):
        p = f"model.layers.{l}.mlp."
        for w, role in (("gate_proj", "ffn_gate_exps"), ("down_proj", "ffn_down_exps"),
                        ("up_proj", "ffn_up_exps")):
            want = np.stack([W[p + f"experts.{x}.{w}.weight"] for x in range(Q_EXP)])
            got = np.asarray(T[f"blk.{l}.{role}.weight"].data).reshape(want.shape)
            assert np.array_equal(got, want), role
    tok = tokenizers.Tokenizer.from_file(str(d / "tokenizer.json"))
    ids = [0] + tok.encode("the cat sat on the log and llama runs; 12345 dogs don't!").ids
    ref = decoder_with_ffn(W, cfg, ids, moe_ffn(
        W, "mlp.gate.weight",
        lambda p, x: tuple(p + f"mlp.experts.{x}.{n}_proj.weight" for n in ("gate", "up", "down")),
        Q_TOP, False, shared=("mlp.shared_expert.gate_proj.weight",
                              "mlp.shared_expert.up_proj.weight",
                              "mlp.shared_expert.down_proj.weight",
                              "mlp.shared_expert_gate.weight")))
    llm = llama_cpp.Llama(model_path=str(out), n_ctx=64, logits_all=True, verbose=False,
                          type_k=0, type_v=0)
    llm.eval(ids)
    got = np.asarray(llm.scores[:len(ids)], dtype=np.float64)
    assert np.isfinite(got).all()
    diff = float(np.abs(got - ref).max())
    print(f"qwen2_moe: {len(ids)} tokens, max |logit diff| {diff:.3g} "
          f"(logits up to {np.abs(ref).max():.3g})")
    assert diff <= 1e-3, diff
    # the experts' rows are moe_intermediate_size, not intermediate_size: a config that says
    # otherwise is named
    c = json.loads((d / "config.json").read_text())
    (d / "config.json").write_text(json.dumps({**c, "moe_intermediate_size": 40}))
    r = run(tbx, "convert", d, tmp_path / "bad.gguf")
    assert r.rc == 1 and "moe_intermediate_size = 40" in r.err.decode(), r.describe()
