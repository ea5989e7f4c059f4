"""llama-quantize's presets to MCF: `tbx convert DIR out.mcf --quant PRESET` gives each tensor of a
Hugging Face directory MCF's family of the type llama.cpp's quantizer gives the GGUF tensor it
becomes (docs/formats/mcf.md, "Presets"): q8_0 -> q8, q4_0 -> q4, q6_K -> k6, q4_K -> k4, q3_K -> k3,
q2_K -> k2, f32/f16/bf16 as they are; the preset's own type where llama.cpp falls back for rows
its 256-block does not divide (MCF pads a partial block); a tensor of any other type is refused,
naming it, and nothing is written.

The expected types come from llama.cpp itself: llama_model_quantize (llama_quantize_ref.py) on
tbx's f32 GGUF of the same directory, its output's types and its log's fallback lines, carried
to the Hugging Face names by llama.cpp's naming (HF_TO_GGUF below, written from
convert_hf_to_gguf's tensor map, not from tensorbox). The values: mantle's runtime (`mantle trace`,
the Go reference of MCF; TBX_MANTLE = its binary, built from github.com/samcharles93/mantle
803be32 as tests/data/mcf/README.md says) loads the file and its last-token logits equal a float64
numpy forward of the model whose weights are the MCF payloads decoded by numpy (test_mcf_quant's
independent decoder), and its logits of the unquantized MCF equal the forward of the original
weights to the same tolerance.
"""
from __future__ import annotations

import json
import math
import os
import re
import struct
from pathlib import Path

import pytest

from conftest import assert_clean_exit, need, run
import llama_quantize_ref as ref

np = need("numpy")
gguf = need("gguf")
need("safetensors.numpy")
need("tokenizers")

from test_llama_presets import PRESETS, make_model  # noqa: E402
from test_mcf_quant import model_decode  # noqa: E402

# llama.cpp's type -> MCF's dtype name (tbx) and code (TensorIndex), None: no family
FAMILY = {"F32": "f32", "F16": "f16", "BF16": "bf16", "Q8_0": "mcf_q8", "Q4_0": "mcf_q4",
          "Q6_K": "mcf_k6", "Q4_K": "mcf_k4", "Q3_K": "mcf_k3", "Q2_K": "mcf_k2"}
CODES = {1: "f32", 2: "f16", 3: "bf16", 0x20: "mcf_q8", 0x21: "mcf_q4", 0x30: "mcf_k6",
         0x31: "mcf_k4", 0x32: "mcf_k3", 0x33: "mcf_k2"}
KIND = {"mcf_q8": "q8", "mcf_q4": "q4", "mcf_k6": "k6", "mcf_k4": "k4", "mcf_k3": "k3",
        "mcf_k2": "k2"}

# convert_hf_to_gguf's names of llama / qwen2 tensors
HF_TO_GGUF = {"input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm",
              "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k",
              "self_attn.v_proj": "attn_v", "self_attn.o_proj": "attn_output",
              "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down"}


def gguf_name(hf: str) -> str:
    top = {"model.embed_tokens.weight": "token_embd.weight", "lm_head.weight": "output.weight",
           "model.norm.weight": "output_norm.weight"}
    if hf in top:
        return top[hf]
    m = re.fullmatch(r"model\.layers\.(\d+)\.(.+)\.(weight|bias)", hf)
    assert m, hf
    return f"blk.{m.group(1)}.{HF_TO_GGUF[m.group(2)]}.{m.group(3)}"


def mcf_tensors(blob: bytes) -> dict:
    """name -> (dtype name, shape, payload bytes), from the file's own TensorIndex."""
    count, dir_off = struct.unpack_from("<IQ", blob, 12)
    secs = [struct.unpack_from("<IIQQ", blob, dir_off + 24 * i) for i in range(count)]
    base = next(s[2] for s in secs if s[0] == 3)
    _v, _f, n, _nd, eo, do, so, _ss = struct.unpack_from("<IIIIQQQQ", blob, base)
    out = {}
    for i in range(n):
        at = base + eo + 40 * i
        noff, nlen, dt, rank, doff = struct.unpack_from("<IIIII", blob, at)
        off, size = struct.unpack_from("<QQ", blob, at + 24)
        name = blob[base + so + noff:base + so + noff + nlen].decode()
        shape = struct.unpack_from(f"<{rank}Q", blob, base + do + 8 * doff)
        out[name] = (CODES.get(dt, hex(dt)), shape, blob[off:off + size])
    return out


def decoded(t) -> np.ndarray:
    dt, shape, payload = t
    if dt == "f32":
        return np.frombuffer(payload, "<f4").reshape(shape)
    if dt == "f16":
        return np.frombuffer(payload, "<f2").astype(np.float32).reshape(shape)
    return model_decode(np, payload, KIND[dt], *shape)


@pytest.fixture(scope="module")
def models(tmp_path_factory, tbx):
    """name -> (HF directory, tbx's f32 GGUF of it)."""
    d = tmp_path_factory.mktemp("mcfpresets")
    out = {}
    # 8 layers (the layer rules), n_gqa 4, rows of 256 and 384 (llama.cpp's fallbacks)
    make_model(d / "llama-hf", "llama", 21, L=8, H=8, KV=2, E=256, FF=384)
    # tied embeddings, biases, n_gqa 2
    make_model(d / "qwen2-hf", "qwen2", 22, L=4, H=4, KV=2, E=256, FF=512, tie=True)
    for name in ("llama", "qwen2"):
        p = d / f"{name}-f32.gguf"
        r = run(tbx, "convert", d / f"{name}-hf", p, timeout=300)
        assert r.rc == 0, r.describe()
        out[name] = (d / f"{name}-hf", p)
    return out


# ggml's types past gguf-py's table (ggml.h)
GGML_EXTRA = {40: "NVFP4", 41: "Q1_0", 42: "Q2_0"}


def gguf_tensor_types(path: Path) -> dict:
    """name -> ggml type name of a GGUF's tensors, read from its tensor infos (gguf-py's reader
    stops at types its table lacks)."""
    b = path.read_bytes()
    assert b[:4] == b"GGUF"
    _ver, nt, nkv = struct.unpack_from("<IQQ", b, 4)
    at = 24
    fixed = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}

    def skip(t, at):
        if t in fixed:
            return at + fixed[t]
        if t == 8:
            return at + 8 + struct.unpack_from("<Q", b, at)[0]
        assert t == 9, t
        et, cnt = struct.unpack_from("<IQ", b, at)
        at += 12
        for _ in range(cnt):
            at = skip(et, at)
        return at
    for _ in range(nkv):
        at += 8 + struct.unpack_from("<Q", b, at)[0]
        t = struct.unpack_from("<I", b, at)[0]
        at = skip(t, at + 4)
    out = {}
    for _ in range(nt):
        ln = struct.unpack_from("<Q", b, at)[0]
        name = b[at + 8:at + 8 + ln].decode()
        at += 8 + ln
        nd = struct.unpack_from("<I", b, at)[0]
        at += 4 + 8 * nd
        t = struct.unpack_from("<I", b, at)[0]
        at += 12
        out[name] = GGML_EXTRA.get(t) or gguf.GGMLQuantizationType(t).name
    return out


def llama_choice(f32_gguf: Path, tmp_path: Path, preset: str):
    """GGUF name -> (llama.cpp's type, the preset's type before llama.cpp's fallback), or the
    refusal's text."""
    dst = tmp_path / f"ref-{preset}.gguf"
    try:
        log = ref.quantize(f32_gguf, dst, preset)
    except RuntimeError as e:
        return str(e)
    wanted = dict(re.findall(r"warning: (\S+)\s+- ncols\s+\d+ not divisible by\s+\d+ "
                             r"\(required for type\s+(\S+)\)", log))
    return {n: (t, wanted.get(n, t).upper()) for n, t in gguf_tensor_types(dst).items()}


@pytest.mark.parametrize("preset", PRESETS)
@pytest.mark.parametrize("model", ["llama", "qwen2"])
def test_preset_types_are_llama_cpps_in_mcf_families(tbx, models, tmp_path, model, preset):
    hf, f32 = models[model]
    choice = llama_choice(f32, tmp_path, preset)
    out = tmp_path / "out.mcf"
    r = run(tbx, "convert", hf, out, "--quant", preset, timeout=300)
    assert_clean_exit(r)
    if isinstance(choice, str):  # llama.cpp refuses (an importance matrix needed): so does tbx
        assert r.rc != 0 and "importance matrix" in r.text, (choice[-300:], r.describe())
        assert not out.exists()
        return
    hf_names = json.loads((hf / "model.safetensors").read_bytes()[8:8 + struct.unpack(
        "<Q", (hf / "model.safetensors").read_bytes()[:8])[0]])
    hf_names = [n for n in hf_names if n != "__metadata__"]
    want = {n: FAMILY.get(choice[gguf_name(n)][1]) for n in hf_names}
    missing = sorted(n for n, f in want.items() if f is None)
    if missing:
        assert r.rc != 0, f"{preset}: {missing[0]} is {choice[gguf_name(missing[0])]} in " \
                          f"llama.cpp's file, and tbx wrote an MCF"
        m = re.search(r'tensor "([^"]+)" \(llama\.cpp\'s (\S+)\): llama-quantize \S+ gives it '
                      r'(\S+), and MCF has no family', r.text)
        assert m, r.describe()
        assert m.group(1) in missing and m.group(2) == gguf_name(m.group(1))
        assert m.group(3).upper() == choice[m.group(2)][1]
        assert not out.exists()
        return
    assert r.rc == 0, r.describe()
    got = {n: t[0] for n, t in mcf_tensors(out.read_bytes()).items()}
    assert got == want


@pytest.fixture(scope="module")
def mantle():
    p = os.environ.get("TBX_MANTLE")
    if not p or not os.access(p, os.X_OK):
        pytest.skip("mantle's runtime is not available: TBX_MANTLE=path of a mantle binary "
                    "(github.com/samcharles93/mantle 803be32, tests/data/mcf/README.md)")
    return p


def mantle_logits(mantle: str, mcf: Path, tmp_path: Path):
    out = tmp_path / (mcf.stem + ".trace.json")
    r = run(mantle, "trace", "-m", mcf, "--prompt", "hello world", "--no-template",
            "--out", out, timeout=300)
    assert r.rc == 0 and out.exists(), r.describe()
    t = json.loads(out.read_text())
    return t["token_ids"], np.array(t["last_token_logits"], dtype=np.float64)


def int8_blocks(x):
    """mantle's activations for a quantized matrix (quantizeVecBlocksInto, AVX2 CPUs): each row
    in blocks of 32, scale = max|v| / 127 (f32), codes Go's math.Round(v * (1 / scale)) within
    +-127, and the products summed as codes times both scales."""
    x = np.asarray(x, dtype=np.float32)
    n, c = x.shape
    pad = -c % 32
    b = np.pad(x, ((0, 0), (0, pad))).reshape(n, -1, 32)
    scale = (np.abs(b).max(-1, keepdims=True) / np.float32(127)).astype(np.float32)
    with np.errstate(divide="ignore", invalid="ignore"):
        inv = np.where(scale > 0, np.float32(1) / scale, np.float32(0)).astype(np.float32)
    v = (b * inv).astype(np.float32).astype(np.float64)
    q = np.clip(np.sign(v) * np.floor(np.abs(v) + 0.5), -127, 127)
    return (q * scale).reshape(n, -1)[:, :c]


def layer_outputs(cfg: dict, W: dict, quantized: set, trace: dict):
    """Each layer's attention and FFN outputs (and the logits of the last position) computed in
    float64 from mantle's own inputs to that layer (the trace's hidden states: each layer checked
    on its own, so one activation code that rounds the other way in f32 does not spread), with
    the weights W (a matrix in `quantized` multiplied by mantle's int8 activation blocks). The
    rotary embedding is transformers' rotate-half (test_hf_gguf.decoder_logits' convention)."""
    H, KV, E = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["hidden_size"]
    D, eps, L = E // H, cfg["rms_norm_eps"], cfg["num_hidden_layers"]
    n = len(trace["token_ids"])
    rms = lambda x, w: x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * w
    inv = cfg["rope_theta"] ** (-np.arange(0, D, 2, dtype=np.float64) / D)
    ang = np.arange(n, dtype=np.float64)[:, None] * inv[None, :]
    cos, sin = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]

    def rope(x):
        x1, x2 = x[..., :D // 2], x[..., D // 2:]
        return np.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], -1)

    def lin(x, p):
        w = W[p + ".weight"]
        y = (int8_blocks(x) if p + ".weight" in quantized else x) @ w.T
        return y + W[p + ".bias"] if p + ".bias" in W else y

    mask = np.triu(np.full((n, n), -np.inf), 1)
    out = []
    for l in range(L):
        p = f"model.layers.{l}."
        x = np.array(trace["hidden_states"][l], dtype=np.float64)
        h = rms(x, W[p + "input_layernorm.weight"])
        q = rope(lin(h, p + "self_attn.q_proj").reshape(n, H, D))
        k = np.repeat(rope(lin(h, p + "self_attn.k_proj").reshape(n, KV, D)), H // KV, 1)
        v = np.repeat(lin(h, p + "self_attn.v_proj").reshape(n, KV, D), H // KV, 1)
        a = np.einsum("qhd,khd->hqk", q, k) / math.sqrt(D) + mask
        a = np.exp(a - a.max(-1, keepdims=True))
        a /= a.sum(-1, keepdims=True)
        att = lin(np.einsum("hqk,khd->qhd", a, v).reshape(n, H * D), p + "self_attn.o_proj")
        x2 = x + np.array(trace["attention_outputs"][l], dtype=np.float64)
        h = rms(x2, W[p + "post_attention_layernorm.weight"])
        g = lin(h, p + "mlp.gate_proj")
        ffn = lin(g / (1 + np.exp(-g)) * lin(h, p + "mlp.up_proj"), p + "mlp.down_proj")
        out += [(f"layer {l} attention", att, trace["attention_outputs"][l]),
                (f"layer {l} ffn", ffn, trace["ffn_outputs"][l])]
    head = "lm_head.weight" if "lm_head.weight" in W else "model.embed_tokens.weight"
    x = rms(np.array(trace["hidden_states"][L][-1:], dtype=np.float64), W["model.norm.weight"])
    out.append(("logits", (int8_blocks(x) if head in quantized else x) @ W[head].T,
                [trace["last_token_logits"]]))
    return out


def rel_rms(a, b) -> float:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(np.sqrt(((a - b) ** 2).mean() / (b ** 2).mean()))


@pytest.mark.parametrize("preset", ["Q4_K_M", "Q8_0", "Q4_0", "Q2_K", "Q3_K_S", "Q6_K"])
def test_mantle_runs_the_preset(tbx, mantle, models, tmp_path, preset):
    """mantle loads the preset's MCF and computes with the values its payloads decode to: every
    layer's outputs are the float64 forward's with the numpy-decoded weights to 1e-3 (relative
    RMS), and at least 5e-3 from the forward with the original weights (so the check tells the
    quantized model from the original). mantle's runtime knows no qwen2 ("unsupported
    model_type"): the llama model only."""
    hf, _ = models["llama"]
    stn = need("safetensors.numpy")
    out = tmp_path / "quant.mcf"
    r = run(tbx, "convert", hf, out, "--quant", preset, timeout=300)
    assert r.rc == 0, r.describe()
    trace = tmp_path / "trace.json"
    r = run(mantle, "trace", "-m", out, "--prompt", "hello world", "--no-template", "--out",
            trace, timeout=300)
    assert r.rc == 0 and trace.exists(), r.describe()
    tr = json.loads(trace.read_text())
    cfg = json.loads((hf / "config.json").read_text())
    tensors = mcf_tensors(out.read_bytes())
    quantized = {n for n, t in tensors.items() if t[0] in KIND}
    assert quantized, f"{preset}: nothing quantized"
    dec = {n: decoded(t).astype(np.float64) for n, t in tensors.items()}
    orig = {n: v.astype(np.float64) for n, v in stn.load_file(str(hf / "model.safetensors")).items()}
    for (what, want, got), (_, other, _) in zip(layer_outputs(cfg, dec, quantized, tr),
                                                layer_outputs(cfg, orig, set(), tr)):
        # (1e-7 typically; up to a few 1e-4 where one of mantle's f32 activation codes rounds
        # to the other side of .5 than the float64 forward's)
        e, far = rel_rms(got, want), rel_rms(other, want)
        assert e <= 1e-3, f"{preset} {what}: mantle's values {e:.3g} from the decoded MCF's"
        assert far >= 5e-3, \
            f"{preset} {what}: the original weights give nearly the same ({far:.3g})"


def test_python_convert_same_file(tbx, models, tmp_path):
    """tensorbox.convert(DIR, out.mcf, quant=PRESET) writes the CLI's file (and
    leave_output_tensor=True its --leave-output-tensor file, where output.weight stays f32)."""
    tensorbox = need("tensorbox")
    hf, _ = models["llama"]
    for extra, args in (({}, ()), ({"leave_output_tensor": True}, ("--leave-output-tensor",))):
        a, b = tmp_path / "py.mcf", tmp_path / "cli.mcf"
        tensorbox.convert(hf, a, quant="Q4_K_M", force=True, **extra)
        r = run(tbx, "convert", hf, b, "--force", "--quant", "Q4_K_M", *args)
        assert r.rc == 0, r.describe()
        assert a.read_bytes() == b.read_bytes(), extra
        out = mcf_tensors(a.read_bytes())["lm_head.weight"][0]
        assert out == ("f32" if extra else "mcf_k6"), (extra, out)
