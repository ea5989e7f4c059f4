"""llama-quantize's presets: `tbx convert in.gguf out.gguf --quant PRESET` writes the file that
llama.cpp's own quantizer (llama_model_quantize of libllama in .venv, through ctypes:
llama_quantize_ref.py) writes from the same f32/f16 GGUF, byte for byte.

The models: tiny llama and qwen2 decoders made large enough for the layer rules to matter (8
layers, grouped-query attention with n_gqa 4 and 2, rows of 256 and of 384 values: a multiple
and not a multiple of the K-quants' 256) and the real all-MiniLM-L6-v2 (bert: token types,
position embeddings, rows of 384 and 1536), each converted to an f32 GGUF by tbx. Every preset
of quantize.cpp is run by both (tensorbox quantizes every ggml type: a refusal llama.cpp does not
make is a failure, never a skip), and one llama.cpp refuses (an IQ1/IQ2 mix without an
importance matrix) must be refused by tbx too. The options (--pure, --tensor-type,
--output-tensor-type, --token-embedding-type, --dry-run, --requantize) are checked against
llama_model_quantize with the same parameters.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from conftest import assert_clean_exit, need, run
import llama_quantize_ref as ref

np = need("numpy")
gguf = need("gguf")
stn = need("safetensors.numpy")
need("tokenizers")

PRESETS = ["Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q2_K_S", "Q3_K_S", "Q3_K_M",
           "Q3_K_L", "Q4_K_S", "Q4_K_M", "Q5_K_S", "Q5_K_M", "Q6_K", "IQ2_XXS", "IQ2_XS",
           "IQ2_S", "IQ2_M", "IQ3_XXS", "IQ3_XS", "IQ3_S", "IQ3_M", "IQ1_S", "IQ1_M", "IQ4_NL",
           "IQ4_XS", "TQ1_0", "TQ2_0", "MXFP4_MOE", "Q1_0", "Q2_0", "F16", "BF16", "F32", "COPY",
           "Q3_K", "Q4_K", "Q5_K"]


def make_model(d: Path, model_type: str, seed: int, L: int, H: int, KV: int, E: int, FF: int,
               tie: bool = False):
    """A Hugging Face llama / qwen2 directory with random weights and the BPE tokenizer of
    test_hf_gguf (its make_decoder, at these sizes)."""
    from test_hf_gguf import make_decoder
    return make_decoder(d, model_type, seed, L=L, H=H, KV=KV, E=E, FF=FF, tie=tie)


@pytest.fixture(scope="module")
def models(tmp_path_factory, tbx, minilm_dir):
    """name -> f32 GGUF written by tbx from the HF directory."""
    d = tmp_path_factory.mktemp("presets")
    out = {}
    # llama: 8 layers, 8 heads / 2 KV heads (n_gqa 4), rows of 256 (E) and 384 (FF)
    make_model(d / "llama-hf", "llama", 11, L=8, H=8, KV=2, E=256, FF=384)
    # qwen2: 6 layers, n_gqa 2, tied embeddings (token_embd serves as the output)
    make_model(d / "qwen2-hf", "qwen2", 12, L=6, H=4, KV=2, E=256, FF=320, tie=True)
    for name, src in (("llama", d / "llama-hf"), ("qwen2", d / "qwen2-hf"),
                      ("minilm", minilm_dir)):
        p = d / f"{name}-f32.gguf"
        r = run(tbx, "convert", src, p, timeout=300)
        assert r.rc == 0, r.describe()
        out[name] = p
        out[name + "-hf"] = src
    return out


# the MoE models: transformers' own classes (as test_hf_runtime builds its rows), 8 experts (the
# n_expert >= 8 rules of attn_v / attn_k / attn_output), rows of 256 (the K types apply) and 4
# layers (the layer-position rules)
MOE = {"mixtral": ("MixtralConfig", "MixtralForCausalLM", "llama",
                   {"num_local_experts": 8, "num_experts_per_tok": 2}),
       "qwen2_moe": ("Qwen2MoeConfig", "Qwen2MoeForCausalLM", "qwen2",
                     {"num_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 256,
                      "shared_expert_intermediate_size": 512, "decoder_sparse_step": 1,
                      "norm_topk_prob": False})}


def make_moe(d: Path, family: str, seed: int) -> Path:
    torch = need("torch")
    transformers = need("transformers")
    from test_hf_runtime import train_bpe
    cfg_cls, model_cls, tokfam, extra = MOE[family]
    d.mkdir(parents=True)
    V = train_bpe(d, tokfam)
    cfg = getattr(transformers, cfg_cls)(
        vocab_size=V, hidden_size=256, intermediate_size=256, num_hidden_layers=4,
        num_attention_heads=8, num_key_value_heads=2, max_position_embeddings=256,
        rms_norm_eps=1e-6, initializer_range=0.1, tie_word_embeddings=False, **extra)
    torch.manual_seed(seed)
    model = getattr(transformers, model_cls)(cfg).to(torch.float32).eval()
    model.save_pretrained(str(d), safe_serialization=True)
    return d


@pytest.fixture(scope="module")
def moe_models(tmp_path_factory, tbx):
    """name -> f32 GGUF written by tbx from the HF directory (and name-hf -> the directory)."""
    d = tmp_path_factory.mktemp("moe")
    out = {}
    for seed, name in enumerate(MOE, 31):
        src = make_moe(d / f"{name}-hf", name, seed)
        p = d / f"{name}-f32.gguf"
        r = run(tbx, "convert", src, p, timeout=300)
        assert r.rc == 0, r.describe()
        out[name] = p
        out[name + "-hf"] = src
    return out


def gguf_types(path: Path) -> dict[str, str]:
    return {t.name: t.tensor_type.name for t in gguf.GGUFReader(str(path)).tensors}


def explain(a: Path, b: Path) -> str:
    """Where two GGUFs differ (for the failure message): keys, tensor order, types, data."""
    ra, rb = gguf.GGUFReader(str(a)), gguf.GGUFReader(str(b))
    ka, kb = list(ra.fields), list(rb.fields)
    lines = []
    if ka != kb:
        lines.append(f"metadata keys: tbx {ka[-4:]} ... llama.cpp {kb[-4:]}")
    for k in ka:
        if k in rb.fields and ra.fields[k].parts[-1].tobytes() != rb.fields[k].parts[-1].tobytes():
            lines.append(f"metadata {k} differs")
    ta = [(t.name, t.tensor_type.name) for t in ra.tensors]
    tb = [(t.name, t.tensor_type.name) for t in rb.tensors]
    if [n for n, _ in ta] != [n for n, _ in tb]:
        lines.append("tensor order differs")
    da, db = dict(ta), dict(tb)
    lines += [f"{n}: tbx {da[n]}, llama.cpp {db.get(n)}" for n in da if da[n] != db.get(n)]
    xa = {t.name: t.data.tobytes() for t in ra.tensors}
    xb = {t.name: t.data.tobytes() for t in rb.tensors}
    lines += [f"{n}: data differs" for n in xa if n in xb and da[n] == db[n] and xa[n] != xb[n]]
    return "\n".join(lines[:40]) or "same tensors and metadata: the layout differs"


def tbx_quant(tbx, src, dst, preset, *args):
    return run(tbx, "convert", src, dst, "--force", "--quant", preset, *args, timeout=300)


def check_same(tbx, src: Path, tmp_path: Path, preset: str, tbx_args=(), tbx_src=None,
               **params):
    """Runs llama_model_quantize on `src` and tbx on `tbx_src` (default: the same file) with the
    same request; returns when both wrote the same bytes, else fails (never skips: tensorbox
    quantizes every ggml type)."""
    want = tmp_path / f"ref-{preset}.gguf"
    got = tmp_path / f"tbx-{preset}.gguf"
    try:
        ref.quantize(src, want, preset, **params)
        ref_err = None
    except RuntimeError as e:
        ref_err = str(e)
    r = tbx_quant(tbx, tbx_src or src, got, preset, *tbx_args)
    assert_clean_exit(r)
    if ref_err is not None:
        # llama.cpp refuses it (an importance matrix needed, ...): so does tbx, with no output
        assert r.rc != 0, f"llama.cpp refused {preset} ({ref_err.splitlines()[-1]}), tbx wrote it"
        assert not got.exists()
        assert "importance matrix" in r.text or "no fallback" in r.text, r.text
        return
    if r.rc != 0:  # every ggml type has a quantizer: a refusal llama.cpp does not make fails
        pytest.fail(f"tbx refused {preset}: {r.describe()}")
    a, b = got.read_bytes(), want.read_bytes()
    assert a == b, f"{preset}: tbx's file differs from llama_model_quantize's:\n" + \
        explain(got, want)


@pytest.mark.parametrize("preset", PRESETS)
@pytest.mark.parametrize("model", ["llama", "qwen2", "minilm"])
def test_preset_file_equals_llama_quantize(tbx, models, tmp_path, model, preset):
    check_same(tbx, models[model], tmp_path, preset)


@pytest.mark.parametrize("preset", PRESETS)
@pytest.mark.parametrize("model", ["llama", "qwen2", "minilm"])
def test_preset_from_hf_directory_in_one_pass(tbx, models, tmp_path, model, preset):
    """`tbx convert DIR out.gguf --quant PRESET` writes the file llama_model_quantize writes
    from tbx's own f32 GGUF of DIR (same tensors, types, order and metadata)."""
    check_same(tbx, models[model], tmp_path, preset, tbx_src=models[model + "-hf"])


@pytest.mark.parametrize("preset", PRESETS)
@pytest.mark.parametrize("model", ["mixtral", "qwen2_moe"])
def test_moe_preset_file_equals_llama_quantize(tbx, moe_models, tmp_path, model, preset):
    """The expert models: llama.cpp's rules for the stacked expert tensors (ffn_*_exps, the
    shared expert's ffn_*_shexp, the router ffn_gate_inp kept), from the f32 GGUF and from the
    Hugging Face directory in one pass, byte for byte."""
    check_same(tbx, moe_models[model], tmp_path, preset)
    want = tmp_path / f"ref-{preset}.gguf"  # llama.cpp's file, when it wrote one
    got = tmp_path / "tbx-hf.gguf"
    r = tbx_quant(tbx, moe_models[model + "-hf"], got, preset)
    assert_clean_exit(r)
    if not want.exists():
        assert r.rc != 0 and not got.exists(), r.describe()
        return
    assert r.rc == 0, r.describe()
    assert got.read_bytes() == want.read_bytes(), \
        f"{preset}: tbx's file from the directory differs from llama_model_quantize's:\n" + \
        explain(got, want)


def test_moe_types_differ_by_role(moe_models, tmp_path):
    """The MoE models exercise the expert rules: Q4_K_M gives their files several types."""
    for model in MOE:
        want = tmp_path / f"{model}.gguf"
        ref.quantize(moe_models[model], want, "Q4_K_M")
        types = gguf_types(want)
        assert any(n.endswith("ffn_down_exps.weight") for n in types), sorted(types)[:20]
        assert len({types[n] for n in types if "_exps" in n}) >= 2, types


def test_types_differ_by_layer_and_role(models, tmp_path):
    """The test model exercises the rules: Q4_K_M gives llama.cpp's file several types."""
    want = tmp_path / "ref.gguf"
    ref.quantize(models["llama"], want, "Q4_K_M")
    types = gguf_types(want)
    assert {types["blk.0.attn_v.weight"], types["blk.2.attn_v.weight"]} == {"Q6_K", "Q4_K"}
    assert types["blk.0.ffn_down.weight"] == "Q8_0"  # q6_K's fallback: rows of 384
    assert types["blk.2.ffn_down.weight"] == "Q5_0"  # q4_K's fallback
    assert types["output.weight"] == "Q6_K"


@pytest.mark.parametrize("preset", ["Q4_K_M", "Q5_K_S", "Q2_K"])
def test_f16_input(tbx, models, tmp_path, preset):
    """An f16 GGUF (2-D tensors f16, as convert_hf_to_gguf writes) quantized by both."""
    f16 = tmp_path / "f16.gguf"
    r = run(tbx, "convert", models["llama"], f16, "--cast", "f16")
    assert r.rc == 0, r.describe()
    check_same(tbx, f16, tmp_path, preset)


@pytest.mark.parametrize("args,params", [
    (("--pure",), {"pure": True}),
    (("--output-tensor-type", "q8_0"), {"output_tensor_type": "Q8_0"}),
    (("--token-embedding-type", "q4_0"), {"token_embedding_type": "Q4_0"}),
    (("--tensor-type", "attn_v=q8_0", "--tensor-type", r"blk\.[0-3]\.ffn_down=q5_1"),
     {"tensor_types": [("attn_v", "q8_0"), (r"blk\.[0-3]\.ffn_down", "q5_1")]}),
    (("--tensor-type", r"BLK\.\d+\.FFN_(UP|GATE)=q4_1"),
     {"tensor_types": [(r"BLK\.\d+\.FFN_(UP|GATE)", "q4_1")]}),
    (("--leave-output-tensor",), {"quantize_output_tensor": False}),
    (("--override-kv", "general.name=str:renamed", "--override-kv",
      "llama.context_length=int:-77", "--override-kv", "zz.ratio=float:0.1", "--override-kv",
      "general.file_type=int:3", "--override-kv", "aa.flag=bool:true"),
     {"kv_overrides": [("general.name", "str", "renamed"), ("llama.context_length", "int", -77),
                       ("zz.ratio", "float", 0.1), ("general.file_type", "int", 3),
                       ("aa.flag", "bool", True)]}),
], ids=["pure", "output-type", "token-embd-type", "tensor-type", "tensor-type-class",
        "leave-output-tensor", "override-kv"])
def test_options_equal_llama_quantize(tbx, models, tmp_path, args, params):
    check_same(tbx, models["llama"], tmp_path, "Q4_K_M", args, **params)
    check_same(tbx, models["qwen2"], tmp_path, "Q3_K_M", args, **params)


def test_tensor_type_file(tbx, models, tmp_path):
    """--tensor-type-file: the file's PATTERN=TYPE words (any white space between them) join the
    --tensor-type rules in command-line order, as llama-quantize reads them (the first match
    wins, so the order decides attn_v's and ffn_up's types here)."""
    f = tmp_path / "rules.txt"
    f.write_text("blk\\.[0-3]\\.ffn_down=q5_1\n  attn_v=q4_0\tffn_up=q6_k\n\n")
    args = ("--tensor-type", "attn_v=q8_0", "--tensor-type-file", str(f), "--tensor-type",
            "ffn_up=q5_1")
    rules = [("attn_v", "q8_0"), (r"blk\.[0-3]\.ffn_down", "q5_1"), ("attn_v", "q4_0"),
             ("ffn_up", "q6_k"), ("ffn_up", "q5_1")]
    check_same(tbx, models["llama"], tmp_path, "Q4_K_M", args, tensor_types=rules)
    types = gguf_types(tmp_path / "tbx-Q4_K_M.gguf")
    assert types["blk.5.attn_v.weight"] == "Q8_0" and types["blk.5.ffn_up.weight"] == "Q6_K"


def test_override_kv_refusals(tbx, models, tmp_path):
    """Values llama-quantize refuses, and the keys its loader reads as the rules' hyper-parameters
    (tensorbox overrides only the output's metadata: refused rather than a different file)."""
    for kv, needle in (("general.name=text", "TYPE is int"), ("a.b=bool:yes", "true or false"),
                       ("a.b=str:" + "x" * 128, "at most 127"),
                       ("llama.block_count=int:4", "hyper-parameter")):
        out = tmp_path / "o.gguf"
        r = tbx_quant(tbx, models["llama"], out, "Q4_K_M", "--override-kv", kv)
        assert r.rc != 0 and needle in r.text, r.describe()
        assert not out.exists()


def test_requantize(tbx, models, tmp_path):
    """An already-quantized GGUF (llama.cpp's Q8_0): refused without --requantize by both,
    and with it (allow_requantize) the same file."""
    q8 = tmp_path / "q8.gguf"
    ref.quantize(models["llama"], q8, "Q8_0")
    with pytest.raises(RuntimeError, match="requantizing"):
        ref.quantize(q8, tmp_path / "x.gguf", "Q4_K_M")
    r = tbx_quant(tbx, q8, tmp_path / "y.gguf", "Q4_K_M")
    assert r.rc != 0 and "already quantized" in r.text, r.describe()
    assert not (tmp_path / "y.gguf").exists()
    check_same(tbx, q8, tmp_path, "Q4_K_M", ("--requantize",), allow_requantize=True)
    # the preset of the input's own type keeps every tensor, requantizing nothing
    check_same(tbx, q8, tmp_path, "Q8_0")


def test_dry_run(tbx, models, tmp_path):
    """--dry-run prints each tensor's type as llama.cpp's dry run decides it, writes nothing."""
    log = ref.quantize(models["llama"], tmp_path / "none.gguf", "Q4_K_M", dry_run=True)
    want = {}
    for line in log.splitlines():
        m = re.match(r"\[\s*\d+/\s*\d+\]\s+(\S+)\s+- .*type =\s+(\S+),\s+size = .*?(?:\((\S+)\))?$",
                     line)
        if m:
            want[m.group(1)] = (m.group(3) or m.group(2)).lower()
    assert len(want) == len(gguf_types(models["llama"])), log[-2000:]
    out = tmp_path / "dry.gguf"
    r = tbx_quant(tbx, models["llama"], out, "Q4_K_M", "--dry-run")
    assert r.rc == 0, r.describe()
    assert not out.exists()
    got = dict(re.findall(r"^(\S+)\s+\S+\s+->\s+(\S+)\s", r.text, re.M))
    assert {k: v.lower() for k, v in got.items()} == want
    # the sizes llama.cpp's dry run prints (MiB, 2 decimals)
    sizes = re.search(r"model size\s*=\s*([\d.]+) MiB.*quant size\s*=\s*([\d.]+) MiB", log,
                      re.S)
    mine = re.search(r"model size ([\d.]+) MiB .* quantized size ([\d.]+) MiB", r.text)
    assert sizes and mine, (log[-500:], r.text[-500:])
    assert mine.groups() == sizes.groups()


DRY_LINE = re.compile(r"^(\S+)\s+(\S+)\s+->\s+(\S+)\s+([\d.]+) MiB ->\s+([\d.]+) MiB", re.M)


@pytest.mark.parametrize("preset", ["Q4_K_M", "Q2_K", "IQ4_XS", "Q8_0"])
@pytest.mark.parametrize("model", ["llama", "qwen2"])
def test_dry_run_from_hf_directory(tbx, models, tmp_path, model, preset):
    """--dry-run from a Hugging Face directory: the plan of the GGUF the one-pass conversion
    writes, nothing written; every tensor's type and output size are the real output's (the
    file tbx then writes, which test_preset_from_hf_directory_in_one_pass proves is
    llama_model_quantize's), and the totals are llama.cpp's own dry run of the f32 GGUF."""
    out = tmp_path / "dry.gguf"
    r = tbx_quant(tbx, models[model + "-hf"], out, preset, "--dry-run")
    assert r.rc == 0, r.describe()
    assert not out.exists()
    plan = {m[0]: m for m in DRY_LINE.findall(r.text)}
    real = tmp_path / "real.gguf"
    assert tbx_quant(tbx, models[model + "-hf"], real, preset).rc == 0
    rd = gguf.GGUFReader(str(real))
    assert sorted(plan) == sorted(t.name for t in rd.tensors), r.text[-2000:]
    src = {t.name: t for t in gguf.GGUFReader(str(models[model])).tensors}
    for t in rd.tensors:
        name, frm, to, mib_in, mib_out = plan[t.name]
        assert to.lower() == t.tensor_type.name.lower(), (t.name, to, t.tensor_type.name)
        assert float(mib_out) == round(t.n_bytes / 1048576, 3), (t.name, mib_out, t.n_bytes)
        assert float(mib_in) == round(src[t.name].n_bytes / 1048576, 3), (t.name, mib_in)
    log = ref.quantize(models[model], tmp_path / "none.gguf", preset, dry_run=True)
    sizes = re.search(r"model size\s*=\s*([\d.]+) MiB.*quant size\s*=\s*([\d.]+) MiB", log,
                      re.S)
    mine = re.search(r"model size ([\d.]+) MiB .* quantized size ([\d.]+) MiB", r.text)
    assert sizes and mine, (log[-500:], r.text[-500:])
    assert mine.groups() == sizes.groups()


@pytest.mark.parametrize("args,needle", [
    (("--quant", "Q4_K_M", "--tensor-type", "attn_v"), "PATTERN=TYPE"),
    (("--quant", "Q4_K_M", "--tensor-type", "(attn=q8_0"), "regular expression"),
    (("--quant", "Q4_K_M", "--tensor-type", "attn_v=q9_9"), "unknown type"),
    (("--quant", "Q4_K_M", "--output-tensor-type", "zz"), "unknown type"),
    (("--quant", "q8_0", "--pure", "--to", "safetensors"), "refine a llama-quantize preset"),
    (("--pure",), "refine a llama-quantize preset"),
])
def test_bad_options(tbx_asan, models, tmp_path, args, needle):
    out = tmp_path / "o.gguf"
    r = run(tbx_asan, "convert", models["llama"], out, *args)
    assert_clean_exit(r)
    assert r.rc != 0 and needle in r.text, r.describe()
    assert not out.exists()


def test_no_architecture(tbx, tmp_path):
    """A file without general.architecture: a preset naming a type means that type for every
    2-D float tensor (today's --quant TYPE); a mix is refused."""
    src = tmp_path / "plain.safetensors"
    rng = np.random.default_rng(3)
    stn.save_file({"w": rng.standard_normal((8, 512)).astype(np.float32),
                   "b": rng.standard_normal(512).astype(np.float32)}, str(src))
    a, b = tmp_path / "a.gguf", tmp_path / "b.gguf"
    assert run(tbx, "convert", src, a, "--quant", "Q4_K").rc == 0
    assert run(tbx, "convert", src, b, "--quant", "q4_k").rc == 0
    assert a.read_bytes() == b.read_bytes()
    assert gguf_types(a)["w"] == "Q4_K"
    r = run(tbx, "convert", src, tmp_path / "c.gguf", "--quant", "Q4_K_M")
    assert r.rc != 0 and "general.architecture" in r.text, r.describe()
    # an architecture llama.cpp does not know is no llama.cpp model either
    t = tmp_path / "t.gguf"
    assert run(tbx, "convert", src, t, "--meta", "general.architecture=notallama").rc == 0
    d = tmp_path / "d.gguf"
    assert run(tbx, "convert", t, d, "--quant", "Q4_K").rc == 0
    assert gguf_types(d)["w"] == "Q4_K"
    r = run(tbx, "convert", t, tmp_path / "e.gguf", "--quant", "Q4_K_M")
    assert r.rc != 0 and "llama.cpp knows" in r.text, r.describe()


def test_python_convert_preset(tbx, models, tmp_path):
    """tensorbox.convert(..., quant="Q4_K_M", ...) writes llama_model_quantize's file, and
    reports each tensor's type; dry_run=True writes nothing and reports the same types."""
    tensorbox = need("tensorbox")
    want = tmp_path / "ref.gguf"
    ref.quantize(models["llama"], want, "Q4_K_M",
                 tensor_types=[("ffn_up", "q8_0")], output_tensor_type="q5_k")
    got = tmp_path / "py.gguf"
    reps = tensorbox.convert(models["llama"], got, quant="q4_k_m",
                             tensor_types={"ffn_up": "q8_0"}, output_tensor_type="q5_k")
    assert got.read_bytes() == want.read_bytes(), explain(got, want)
    types = gguf_types(want)
    assert {r.name: r.out_dtype.lower() for r in reps} == {k: v.lower() for k, v in types.items()}
    dry = tmp_path / "dry.gguf"
    reps2 = tensorbox.convert(models["llama"], dry, quant="Q4_K_M", dry_run=True,
                              tensor_types=[("ffn_up", "q8_0")], output_tensor_type="q5_k")
    assert not dry.exists()
    assert [(r.name, r.out_dtype) for r in reps2] == [(r.name, r.out_dtype) for r in reps]
    # a preset straight from the Hugging Face directory, in one pass
    hf = tmp_path / "hf.gguf"
    tensorbox.convert(models["llama-hf"], hf, quant="Q4_K_M", tensor_types={"ffn_up": "q8_0"},
                      output_tensor_type="q5_k")
    assert hf.read_bytes() == want.read_bytes(), explain(hf, want)
    with pytest.raises(tensorbox.InvalidArgumentError):
        tensorbox.convert(models["llama"], tmp_path / "x.gguf", quant="q8_0", pure=True,
                          format="safetensors")


def test_llama_cpp_runs_tbx_q4_k_m(tbx, models, tmp_path):
    """llama.cpp loads tbx's Q4_K_M of the tiny llama (from the directory in one pass) and
    gives the logits it gives for llama_model_quantize's Q4_K_M of the same model."""
    llama_cpp = need("llama_cpp")
    mine, theirs = tmp_path / "tbx.gguf", tmp_path / "ref.gguf"
    r = tbx_quant(tbx, models["llama-hf"], mine, "Q4_K_M")
    assert r.rc == 0, r.describe()
    ref.quantize(models["llama"], theirs, "Q4_K_M")
    ids = [0, 5, 17, 42, 99, 3, 250, 7]
    logits = []
    for p in (mine, theirs):
        llm = llama_cpp.Llama(model_path=str(p), n_ctx=32, logits_all=True, verbose=False,
                              type_k=0, type_v=0, n_threads=1)
        llm.eval(ids)
        logits.append(np.asarray(llm.scores[:len(ids)], dtype=np.float32).copy())
        del llm
    assert np.isfinite(logits[0]).all() and np.abs(logits[0]).max() > 0
    assert np.array_equal(logits[0], logits[1])


@pytest.mark.parametrize("preset", ["Q4_K_M", "Q3_K_M", "Q8_0"])
def test_split_set(tbx, models, tmp_path, preset):
    """A GGUF split set (3 shards, `tbx gguf split`): quantized into one file, and with
    --keep-split (llama_model_quantize's keep_split) into 3 files, each the same bytes as
    llama.cpp's; an unsplit input with --keep-split gives one shard named -00001-of-00001."""
    r = run(tbx, "gguf", "split", models["llama"], tmp_path / "m", "--max-size", "7M")
    assert r.rc == 0, r.describe()
    first = tmp_path / "m-00001-of-00003.gguf"
    assert first.exists() and (tmp_path / "m-00003-of-00003.gguf").exists(), r.describe()
    check_same(tbx, first, tmp_path, preset)
    ref.quantize(first, tmp_path / "ref", preset, keep_split=True)
    r = tbx_quant(tbx, first, tmp_path / "mine.gguf", preset, "--keep-split")
    assert r.rc == 0, r.describe()
    for i in (1, 2, 3):
        a = tmp_path / f"mine-{i:05d}-of-00003.gguf"
        b = tmp_path / f"ref-{i:05d}-of-00003.gguf"
        assert a.read_bytes() == b.read_bytes(), explain(a, b)
    assert not (tmp_path / "mine.gguf").exists()
    tensorbox = need("tensorbox")  # the same from Python
    tensorbox.convert(first, tmp_path / "py.gguf", quant=preset, keep_split=True)
    for i in (1, 2, 3):
        assert (tmp_path / f"py-{i:05d}-of-00003.gguf").read_bytes() == \
            (tmp_path / f"ref-{i:05d}-of-00003.gguf").read_bytes()
    ref.quantize(models["llama"], tmp_path / "one", preset, keep_split=True)
    r = tbx_quant(tbx, models["llama"], tmp_path / "single.gguf", preset, "--keep-split")
    assert r.rc == 0, r.describe()
    assert (tmp_path / "single-00001-of-00001.gguf").read_bytes() == \
        (tmp_path / "one-00001-of-00001.gguf").read_bytes()
