"""A Hugging Face model directory converted by `tbx convert DIR out.gguf` runs in llama.cpp.

The runtime is llama.cpp itself (PyPI llama-cpp-python, built from source into .venv by
scripts/bootstrap.sh); the expected values come from independent numpy forward passes written
here from the original safetensors, never from tensorbox's output:

(a) the real all-MiniLM-L6-v2 (fixture `minilm_dir`): llama.cpp's sentence embeddings of the
    converted GGUF (f32, f16, q8_0, q4_k) against a numpy BERT (mean pooling, normalised) fed
    with the token ids of PyPI `tokenizers` reading the model's tokenizer.json;
(b) tiny llama and qwen2 models written by the test (random weights, a byte-level BPE
    tokenizer trained with `tokenizers`): llama.cpp's logits for a prompt against a numpy
    decoder (RMSNorm, rotate-half RoPE, grouped-query attention, SwiGLU);
(c) every metadata key is one gguf-py's constants define, and every tensor name is the one
    gguf.tensor_mapping gives the Hugging Face name for the architecture;
(d) llama.cpp's own rules read from its sources (src/llama-vocab.cpp of the source distribution
    llama_cpp is built from, kept by scripts/bootstrap.sh): every tokenizer.ggml.pre and
    tokenizer.ggml.model tensorbox writes is a name its loader accepts;
(e) hyper-parameters and vocabularies that contradict the tensors are refused, naming the
    config.json field, and the vocabulary written has one token per token-embedding row, as
    llama.cpp's loader requires (a file that breaks that rule is refused by llama.cpp and
    reported by `tbx validate --ggml`).
A missing llama_cpp, tokenizers, gguf or llama.cpp source is a failure, not a skip.
"""
from __future__ import annotations

import json
import math
import os
import re
import shutil
from pathlib import Path

import pytest

from conftest import REPO, assert_clean_exit, hf_shard_dir, need, run

np = need("numpy")
stn = need("safetensors.numpy")
gguf = need("gguf")
tokenizers = need("tokenizers")
llama_cpp = need("llama_cpp")

SENTENCES = [
    "The quick brown fox jumps over the lazy dog.",
    "tensorbox converts model files without losing a byte.",
    "Sentence embeddings place similar meanings close together.",
    "llama.cpp runs quantized models on a laptop CPU.",
]


# ------------------------------------------------------------------------------------------
# gguf-py's view of a file
# ------------------------------------------------------------------------------------------
def read_gguf(path):
    r = gguf.GGUFReader(str(path))
    fields = {k: f for k, f in r.fields.items() if not k.startswith("GGUF.")}
    return r, fields


def _vendor_keys():
    """gguf.constants.Keys of the gguf-py in llama.cpp's own sources (the release llama_cpp is
    built from, kept by scripts/bootstrap.sh): newer than PyPI gguf's when llama.cpp added keys
    (tokenizer.ggml.normalizer.*). constants.py needs only the standard library."""
    import importlib.util
    f = llama_cpp_source() / "gguf-py" / "gguf" / "constants.py"
    spec = importlib.util.spec_from_file_location("_llama_cpp_gguf_constants", f)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.Keys


def all_known_keys(arch: str) -> set[str]:
    """Every key string gguf.constants.Keys defines (PyPI gguf's and llama.cpp's own
    gguf-py's), with {arch} filled in."""
    out = set()
    for keys in (gguf.Keys, _vendor_keys()):
        for group in vars(keys).values():
            if isinstance(group, type):
                for v in vars(group).values():
                    if isinstance(v, str) and "." in v:
                        out.add(v.replace("{arch}", arch))
    return out


def check_names_and_keys(out: Path, hf_names: list[str], arch_id, n_blocks: int):
    """(c): keys from gguf.constants, names from gguf.tensor_mapping."""
    arch = gguf.MODEL_ARCH_NAMES[arch_id]
    r, fields = read_gguf(out)
    assert fields["general.architecture"].contents() == arch
    known = all_known_keys(arch)
    unknown = sorted(k for k in fields if k not in known)
    assert not unknown, f"keys gguf.constants does not define: {unknown}"
    tmap = gguf.get_tensor_name_map(arch_id, n_blocks)
    expected = set()
    for n in hf_names:
        g = tmap.get_name(n, try_suffixes=(".weight", ".bias"))
        if g is not None:
            expected.add(g)
    got = {t.name for t in r.tensors}
    assert got == expected, (f"missing {sorted(expected - got)[:8]}, "
                             f"unexpected {sorted(got - expected)[:8]}")
    # every name is one of the architecture's tensor names in gguf.constants
    allowed = {gguf.TENSOR_NAMES[t] for t in gguf.MODEL_TENSORS[arch_id]}
    for t in r.tensors:
        stem = t.name.rsplit(".", 1)[0]
        base = ".".join("{bid}" if p.isdigit() else p for p in stem.split("."))
        assert base in allowed, t.name
    return r, fields


def convert(tbx, src, out, *args):
    r = run(tbx, "convert", src, out, "--force", *args, timeout=600)
    assert_clean_exit(r)
    assert r.rc == 0, r.describe()
    return r


# ------------------------------------------------------------------------------------------
# (a) all-MiniLM-L6-v2 in llama.cpp against a numpy BERT
# ------------------------------------------------------------------------------------------
def _ln(x, g, b, eps):
    m = x.mean(-1, keepdims=True)
    v = ((x - m) ** 2).mean(-1, keepdims=True)
    return (x - m) / np.sqrt(v + eps) * g + b


_erf = np.vectorize(math.erf)


def bert_embedding(W, cfg, ids):
    """Sentence embedding: BERT forward in float64, mean over tokens, unit length."""
    ids = np.asarray(ids)
    n, H, eps = len(ids), cfg["num_attention_heads"], cfg["layer_norm_eps"]
    f = lambda k: W[k].astype(np.float64)
    x = f("embeddings.word_embeddings.weight")[ids] + \
        f("embeddings.position_embeddings.weight")[:n] + \
        f("embeddings.token_type_embeddings.weight")[0]
    x = _ln(x, f("embeddings.LayerNorm.weight"), f("embeddings.LayerNorm.bias"), eps)
    for l in range(cfg["num_hidden_layers"]):
        p = f"encoder.layer.{l}."
        lin = lambda x, k: x @ f(p + k + ".weight").T + f(p + k + ".bias")
        q, k, v = (lin(x, "attention.self." + s).reshape(n, H, -1).transpose(1, 0, 2)
                   for s in ("query", "key", "value"))
        a = q @ k.transpose(0, 2, 1) / math.sqrt(q.shape[-1])
        a = np.exp(a - a.max(-1, keepdims=True))
        a /= a.sum(-1, keepdims=True)
        o = (a @ v).transpose(1, 0, 2).reshape(n, -1)
        x = _ln(x + lin(o, "attention.output.dense"), f(p + "attention.output.LayerNorm.weight"),
                f(p + "attention.output.LayerNorm.bias"), eps)
        h = lin(x, "intermediate.dense")
        h = 0.5 * h * (1 + _erf(h / math.sqrt(2)))
        x = _ln(x + lin(h, "output.dense"), f(p + "output.LayerNorm.weight"),
                f(p + "output.LayerNorm.bias"), eps)
    e = x.mean(0)
    return e / np.linalg.norm(e)


@pytest.fixture(scope="module")
def minilm_ref(minilm_dir):
    W = stn.load_file(str(minilm_dir / "model.safetensors"))
    cfg = json.loads((minilm_dir / "config.json").read_text())
    tok = tokenizers.Tokenizer.from_file(str(minilm_dir / "tokenizer.json"))
    tok.no_padding()
    tok.no_truncation()
    ids = [tok.encode(s).ids for s in SENTENCES]
    return W, ids, [bert_embedding(W, cfg, i) for i in ids]


@pytest.mark.parametrize("variant,args,min_cos", [
    ("f32", (), 0.9999),
    ("f16", ("--cast", "f16"), 0.9999),
    ("q8_0", ("--quant", "q8_0"), 0.99),
    ("q4_k", ("--quant", "q4_k"), 0.98),
])
def test_minilm_embeddings_in_llama_cpp(tbx, minilm_dir, minilm_ref, tmp_path, variant, args,
                                        min_cos):
    W, ids, refs = minilm_ref
    out = tmp_path / f"minilm-{variant}.gguf"
    r = convert(tbx, minilm_dir, out, *args)
    _, fields = check_names_and_keys(out, list(W), gguf.MODEL_ARCH.BERT, 6)
    assert fields["bert.pooling_type"].contents() == int(gguf.PoolingType.MEAN)
    assert fields["tokenizer.ggml.model"].contents() == "bert"
    llm = llama_cpp.Llama(model_path=str(out), embedding=True, verbose=False)
    cos = []
    for s, i, ref in zip(SENTENCES, ids, refs):
        # llama.cpp's own WordPiece tokenizer must give the ids of the HF tokenizer
        assert llm.tokenize(s.encode()) == i, s
        got = np.asarray(llm.embed(s, normalize=True), dtype=np.float64).reshape(-1)
        cos.append(float(ref @ got / np.linalg.norm(got)))
    print(f"minilm {variant}: cosine min {min(cos):.6f}")
    assert min(cos) >= min_cos, cos
    if variant.startswith("q"):
        # the summary says what got which type; no 2-D weight silently left in f32
        # (--quant q8_0 / q4_k of a model directory is llama-quantize's Q8_0 / Q4_K_M preset)
        assert "llama-quantize" in r.err.decode() or "fallback" in r.err.decode(), r.describe()
        rd, _ = read_gguf(out)
        for t in rd.tensors:
            if t.name.endswith(".weight") and len(t.shape) == 2 and \
                    t.name not in ("position_embd.weight", "token_types.weight"):
                assert t.tensor_type != gguf.GGMLQuantizationType.F32, t.name
        if variant == "q4_k":  # 384-wide rows cannot take q4_K: llama-quantize's q5_0
            types = {t.name: t.tensor_type for t in rd.tensors}
            assert types["blk.0.attn_q.weight"] == gguf.GGMLQuantizationType.Q5_0
            assert types["blk.0.ffn_down.weight"] == gguf.GGMLQuantizationType.Q4_K


def test_minilm_sharded_same_model(tbx, minilm_dir, tmp_path):
    """The sharded layout (index + shards) converts to the same metadata and tensors."""
    sh = tmp_path / "sharded"
    hf_shard_dir(minilm_dir, sh, nshards=3)
    a, b = tmp_path / "a.gguf", tmp_path / "b.gguf"
    convert(tbx, minilm_dir, a)
    convert(tbx, sh, b)
    ra, fa = read_gguf(a)
    rb, fb = read_gguf(b)
    assert set(fa) == set(fb)
    for k in fa:
        assert fa[k].contents() == fb[k].contents(), k
    ta = {t.name: t for t in ra.tensors}
    tb = {t.name: t for t in rb.tensors}
    assert set(ta) == set(tb) and len(ta) == 101
    for n in ta:
        assert ta[n].data.tobytes() == tb[n].data.tobytes(), n


def test_plain_safetensors_quant_falls_back(tbx, minilm_dir, tmp_path):
    """Issue 13: `tbx convert model.safetensors out.gguf --quant q4_k` on MiniLM quantized only
    the 1536-wide rows and copied the 384-wide ones as f32. Now every 2-D float tensor gets
    q4_K or llama-quantize's fallback q5_0, and the summary says so."""
    out = tmp_path / "plain.gguf"
    r = convert(tbx, minilm_dir / "model.safetensors", out, "--quant", "q4_k")
    rd, _ = read_gguf(out)
    W = stn.load_file(str(minilm_dir / "model.safetensors"))
    types = {t.name: t.tensor_type for t in rd.tensors}
    Q = gguf.GGMLQuantizationType
    for name, arr in W.items():
        if arr.ndim == 2 and arr.dtype == np.float32:
            want = Q.Q4_K if arr.shape[1] % 256 == 0 else Q.Q5_0
            assert types[name] == want, (name, arr.shape, types[name])
        else:
            assert types[name] in (Q.F32, Q.I64), name
    err = r.err.decode()
    assert "q5_0" in err and "fallback" in err and "q4_k" in err, r.describe()


def test_raw_keeps_hf_layout(tbx, minilm_dir, tmp_path):
    out = tmp_path / "raw.gguf"
    convert(tbx, minilm_dir, out, "--raw", "--drop-sections")
    rd, fields = read_gguf(out)
    assert "general.architecture" not in fields
    assert "encoder.layer.0.attention.self.query.weight" in {t.name for t in rd.tensors}


def test_unsupported_architecture_named(tbx, minilm_dir, tmp_path):
    d = tmp_path / "gpt2ish"
    shutil.copytree(minilm_dir, d)
    cfg = json.loads((d / "config.json").read_text())
    cfg["model_type"] = "gpt_neox"
    cfg["architectures"] = ["GPTNeoXForCausalLM"]
    (d / "config.json").write_text(json.dumps(cfg))
    r = run(tbx, "convert", d, tmp_path / "x.gguf")
    assert_clean_exit(r)
    assert r.rc == 1, r.describe()
    assert "gpt_neox" in r.text and "GPTNeoXForCausalLM" in r.text and "not supported" in r.text
    assert not (tmp_path / "x.gguf").exists()


def _levenshtein(a: str, b: str) -> int:
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j - 1] + (ca != cb), prev[j] + 1, cur[j - 1] + 1))
        prev = cur
    return prev[-1]


def _help_rows(tbx) -> list[str]:
    """The model_types `tbx convert --help` lists (the architecture table's rows, in order)."""
    r = run(tbx, "convert", "--help")
    assert r.rc == 0, r.describe()
    line = r.text.split("general.architecture):", 1)[1].strip().splitlines()[0]
    rows = re.sub(r"\(-> [^)]*\)", "", line).split()
    assert len(rows) >= 6 and "llama" in rows, line
    return rows


@pytest.mark.parametrize("model_type", ["gpt_neox", "Qwen9", "mistral_x", "phi4", "lama",
                                        "bert2", "t5"])
def test_unsupported_architecture_nearest(tbx, minilm_dir, tmp_path, model_type):
    """An architecture tbx cannot convert: one error naming it and the supported row whose
    model_type is nearest (Levenshtein distance, case folded, the first row on a tie), the
    expected row computed here over the rows `tbx convert --help` lists."""
    rows = _help_rows(tbx)
    if model_type.lower() in rows:
        pytest.fail(f"{model_type} became a row: pick another unsupported name")
    dist = [_levenshtein(model_type.lower(), r.lower()) for r in rows]
    want = rows[dist.index(min(dist))]
    d = tmp_path / "m"
    shutil.copytree(minilm_dir, d)
    cfg = json.loads((d / "config.json").read_text())
    cfg["model_type"] = model_type
    cfg["architectures"] = ["SomethingForCausalLM"]
    (d / "config.json").write_text(json.dumps(cfg))
    r = run(tbx, "convert", d, tmp_path / "x.gguf")
    assert_clean_exit(r)
    assert r.rc == 1, r.describe()
    assert f'model_type "{model_type}"' in r.text and "not supported" in r.text, r.text
    assert f'nearest: "{want}"' in r.text, (want, r.text)
    assert r.text.count("nearest") == 1, r.text
    assert not (tmp_path / "x.gguf").exists()


# ------------------------------------------------------------------------------------------
# (d) llama.cpp's own names: every tokenizer.ggml.pre / .model tensorbox writes is accepted
# ------------------------------------------------------------------------------------------
def llama_cpp_source() -> Path:
    """llama.cpp's sources of the release llama_cpp is built from (vendor/llama.cpp of the
    llama-cpp-python source distribution, kept in .venv/llama-cpp-src/ by scripts/bootstrap.sh;
    TBX_LLAMA_CPP_SRC names another copy of that directory). Missing: a failure."""
    pin = re.search(r"llama-cpp-python==(\S+)",
                    (REPO / "python" / "requirements-llama.txt").read_text()).group(1)
    d = Path(os.environ.get("TBX_LLAMA_CPP_SRC") or
             REPO / ".venv" / "llama-cpp-src" / f"llama_cpp_python-{pin}" / "vendor" / "llama.cpp")
    if not (d / "src" / "llama-vocab.cpp").is_file():
        pytest.fail(f"llama.cpp's sources are not at {d} (scripts/bootstrap.sh keeps them from "
                    f"the llama-cpp-python {pin} source distribution; TBX_LLAMA_CPP_SRC "
                    f"overrides the place)", pytrace=False)
    return d


def llama_cpp_vocab_names() -> tuple[set[str], set[str]]:
    """The tokenizer.ggml.pre names llama.cpp's loader accepts for a BPE vocabulary (the
    branch of llama_vocab::impl::load that ends in "unknown pre-tokenizer type") and the
    tokenizer.ggml.model names it knows (anything else is "unknown tokenizer")."""
    src = (llama_cpp_source() / "src" / "llama-vocab.cpp").read_text()
    start = src.index("if (type == LLAMA_VOCAB_TYPE_BPE)")
    end = src.index("unknown pre-tokenizer type", start)
    pre = set(re.findall(r'tokenizer_pre\s*==\s*"([^"]*)"', src[start:end]))
    model_end = src.index("unknown tokenizer:")
    models = set(re.findall(r'tokenizer_model\s*==\s*"([^"]*)"', src[:model_end]))
    # the parse found llama.cpp's tables, not a stray comparison
    assert len(pre) > 30 and "default" in pre, sorted(pre)
    assert {"llama", "bert", "gpt2"} <= models, sorted(models)
    return pre, models


def tbx_written_names(key: str) -> set[str]:
    """Every value src/models/hf_gguf.c can write under `key`, read from its source: the
    arguments of each put_str of the key, resolved through its #defines, the BPE_PRE table and
    the returns of bpe_pre_name. An argument it cannot resolve fails the test."""
    src = (REPO / "src" / "models" / "hf_gguf.c").read_text()
    macros = dict(re.findall(r'#define\s+(\w+)\s+"([^"]*)"', src))
    t0 = src.index("BPE_PRE[] = {")
    table = re.findall(r'"([^"]*)"\}', src[t0:src.index("};", t0)])
    f0 = src.index("static const char *bpe_pre_name(hf *h) {")
    body = src[f0:src.index("\n}\n", f0)]

    def resolve(expr: str) -> set[str]:
        out = set(re.findall(r'"([^"]*)"', expr))
        out |= {macros[w] for w in re.findall(r"\b[A-Z_][A-Z0-9_]*\b", expr) if w in macros}
        if "BPE_PRE[" in expr:
            out |= set(table)
        if "bpe_pre_name(" in expr:
            for ret in re.findall(r"return ([^;]+);", body):
                out |= resolve(ret)
        assert out, f"cannot tell what {expr!r} writes under {key}"
        return out

    puts = re.findall(r'put_str\(h,\s*"%s",\s*(.+?)\)\)' % re.escape(key), src, re.S)
    assert puts, f"hf_gguf.c writes no {key}?"
    names = set()
    for expr in puts:
        names |= resolve(expr)
    return names


def test_every_written_tokenizer_name_is_one_llama_cpp_accepts():
    """Issue 19: a GPT-2-style (plain ByteLevel) tokenizer was written as tokenizer.ggml.pre
    "gpt2", which llama.cpp refuses ("unknown pre-tokenizer type"): its name is "gpt-2". The
    whole table of names tensorbox writes is checked against llama.cpp's own loader."""
    pre_ok, models_ok = llama_cpp_vocab_names()
    pre = tbx_written_names("tokenizer.ggml.pre")
    assert len(pre) >= 4, sorted(pre)
    assert pre <= pre_ok, f"llama.cpp refuses tokenizer.ggml.pre {sorted(pre - pre_ok)}"
    models = tbx_written_names("tokenizer.ggml.model")
    assert models <= models_ok, f"llama.cpp does not know tokenizer.ggml.model " \
                                f"{sorted(models - models_ok)}"


# ------------------------------------------------------------------------------------------
# (b) tiny llama / qwen2 against a numpy decoder
# ------------------------------------------------------------------------------------------
CORPUS = [
    "the cat sat on the mat and the dog sat on the log",
    "tensorbox writes gguf files that llama runs on the cpu",
    "a small model with random weights still has exact logits",
    "quantized weights are smaller; float weights are exact",
    "In 2024, 12345 cats ran home!\n\nDon't they?  We've 7 dogs; they'll   stay.",
] * 8

# The split regexes of Llama 3's and Qwen2's tokenizer.json (llama.cpp src/llama-vocab.cpp
# quotes them as the originals of its "llama-bpe" and "qwen2" pre-tokenizers).
PRE_REGEX = {
    "llama": r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+"
             r"[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
    "qwen2": r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+"
             r"[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
}
PRE_NAME = {"llama": "llama-bpe", "qwen2": "qwen2"}


def make_tokenizer(d: Path, model_type: str) -> int:
    """A byte-level BPE tokenizer shaped like the family's real one: its split regex, then
    ByteLevel without its own regex."""
    from tokenizers import Regex, Tokenizer, models, pre_tokenizers, decoders, trainers
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(PRE_REGEX[model_type]), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    tr = trainers.BpeTrainer(vocab_size=400, special_tokens=["<s>", "</s>"],
                             initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(CORPUS, tr)
    tok.save(str(d / "tokenizer.json"))
    (d / "tokenizer_config.json").write_text(json.dumps(
        {"bos_token": "<s>", "eos_token": "</s>", "add_bos_token": True,
         "add_eos_token": False}))
    return tok.get_vocab_size()


def make_gpt2_tokenizer(d: Path) -> int:
    """A GPT-2-style byte-level BPE (GPT-2, Phi-2, StarCoder and many fine-tunes): one plain
    ByteLevel pre-tokenizer with its built-in regex, no Split."""
    from tokenizers import Tokenizer, models, pre_tokenizers, decoders, trainers
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tr = trainers.BpeTrainer(vocab_size=400, special_tokens=["<s>", "</s>"],
                             initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(CORPUS, tr)
    tok.save(str(d / "tokenizer.json"))
    (d / "tokenizer_config.json").write_text(json.dumps(
        {"bos_token": "<s>", "eos_token": "</s>", "add_bos_token": True,
         "add_eos_token": False}))
    assert json.loads((d / "tokenizer.json").read_text())["pre_tokenizer"]["type"] == "ByteLevel"
    return tok.get_vocab_size()


def make_decoder(d: Path, model_type: str, seed: int, rope_scaling: dict | None = None,
                 tokenizer=None, extra_rows: int = 0, *, L: int = 2, H: int = 4, KV: int = 2,
                 E: int = 128, FF: int = 192, tie: bool = False):
    """`tokenizer(d)` writes the tokenizer files and returns the vocabulary size (default: a
    byte-level BPE, make_tokenizer); the embedding and lm_head get `extra_rows` rows more than
    the tokenizer has tokens (config.json's vocab_size says so, as for a padded vocabulary).
    L layers of E wide, H heads (KV for keys/values), FF feed-forward; tie: no lm_head."""
    d.mkdir()
    V = (tokenizer(d) if tokenizer else make_tokenizer(d, model_type)) + extra_rows
    D = E // H
    cfg = {"architectures": ["LlamaForCausalLM" if model_type == "llama" else
                             "Qwen2ForCausalLM"],
           "model_type": model_type, "hidden_size": E, "intermediate_size": FF,
           "num_hidden_layers": L, "num_attention_heads": H, "num_key_value_heads": KV,
           "max_position_embeddings": 256, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
           "vocab_size": V, "tie_word_embeddings": tie, "bos_token_id": 0, "eos_token_id": 1,
           "torch_dtype": "float32"}
    if rope_scaling:
        cfg["rope_scaling"] = rope_scaling
    (d / "config.json").write_text(json.dumps(cfg, indent=2))
    rng = np.random.default_rng(seed)
    g = lambda *s, sc=0.08: (rng.standard_normal(s) * sc).astype(np.float32)
    W = {"model.embed_tokens.weight": g(V, E, sc=0.5), "model.norm.weight": 1 + g(E, sc=0.1)}
    if not tie:
        W["lm_head.weight"] = g(V, E, sc=0.2)
    for l in range(L):
        p = f"model.layers.{l}."
        W[p + "input_layernorm.weight"] = 1 + g(E, sc=0.1)
        W[p + "post_attention_layernorm.weight"] = 1 + g(E, sc=0.1)
        W[p + "self_attn.q_proj.weight"] = g(H * D, E)
        W[p + "self_attn.k_proj.weight"] = g(KV * D, E)
        W[p + "self_attn.v_proj.weight"] = g(KV * D, E)
        W[p + "self_attn.o_proj.weight"] = g(E, H * D)
        W[p + "mlp.gate_proj.weight"] = g(FF, E)
        W[p + "mlp.up_proj.weight"] = g(FF, E)
        W[p + "mlp.down_proj.weight"] = g(E, FF)
        if model_type == "qwen2":
            W[p + "self_attn.q_proj.bias"] = g(H * D, sc=0.05)
            W[p + "self_attn.k_proj.bias"] = g(KV * D, sc=0.05)
            W[p + "self_attn.v_proj.bias"] = g(KV * D, sc=0.05)
    stn.save_file(W, str(d / "model.safetensors"), metadata={"format": "pt"})
    return W, cfg


def decoder_logits(W, cfg, ids):
    """HF llama/qwen2 forward in float64: logits [n, vocab]."""
    f = lambda k: W[k].astype(np.float64)
    n = len(ids)
    H, KV, E = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["hidden_size"]
    D, eps = E // H, cfg["rms_norm_eps"]
    rms = lambda x, w: x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * w
    pos = np.arange(n, dtype=np.float64)
    inv = cfg["rope_theta"] ** (-np.arange(0, D, 2, dtype=np.float64) / D)
    rs = cfg.get("rope_scaling")
    if rs and rs["rope_type"] == "llama3":
        # transformers' llama3 frequencies: long wavelengths slowed down by `factor`, short ones
        # kept, the band between interpolated smoothly
        ctx, lo, hi, fac = (rs["original_max_position_embeddings"], rs["low_freq_factor"],
                            rs["high_freq_factor"], rs["factor"])
        wavelen = 2 * math.pi / inv
        scaled = np.where(wavelen > ctx / lo, inv / fac, inv)
        smooth = (ctx / wavelen - lo) / (hi - lo)
        medium = (wavelen >= ctx / hi) & (wavelen <= ctx / lo)
        inv = np.where(medium, (1 - smooth) * scaled / fac + smooth * scaled, scaled)
    ang = pos[:, None] * inv[None, :]
    cos, sin = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]

    def rope(x):  # HF rotate-half
        x1, x2 = x[..., :D // 2], x[..., D // 2:]
        return np.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], -1)

    def lin(x, p):
        y = x @ f(p + ".weight").T
        return y + f(p + ".bias") if p + ".bias" in W else y

    x = f("model.embed_tokens.weight")[np.asarray(ids)]
    mask = np.triu(np.full((n, n), -np.inf), 1)
    for l in range(cfg["num_hidden_layers"]):
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
        h = rms(x, f(p + "post_attention_layernorm.weight"))
        gt = lin(h, p + "mlp.gate_proj")
        x = x + lin(gt / (1 + np.exp(-gt)) * lin(h, p + "mlp.up_proj"), p + "mlp.down_proj")
    return rms(x, f("model.norm.weight")) @ f("lm_head.weight").T


LLAMA3_ROPE = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
               "high_freq_factor": 4.0, "original_max_position_embeddings": 64}


@pytest.mark.parametrize("model_type,arch_id,seed,rope,gpt2", [
    ("llama", gguf.MODEL_ARCH.LLAMA, 1, None, False),
    ("llama", gguf.MODEL_ARCH.LLAMA, 4, LLAMA3_ROPE, False),  # Llama 3.1's rope: rope_freqs
    ("qwen2", gguf.MODEL_ARCH.QWEN2, 2, None, False),
    ("llama", gguf.MODEL_ARCH.LLAMA, 6, None, True),  # a GPT-2-style tokenizer (issue 19)
], ids=["llama", "llama3-rope", "qwen2", "llama-gpt2-tokenizer"])
def test_decoder_logits_in_llama_cpp(tbx, tmp_path, model_type, arch_id, seed, rope, gpt2):
    W, cfg = make_decoder(tmp_path / model_type, model_type, seed, rope,
                          tokenizer=make_gpt2_tokenizer if gpt2 else None)
    out = tmp_path / f"{model_type}.gguf"
    convert(tbx, tmp_path / model_type, out)
    # the generated rope_freqs tensor is llama.cpp's, not a Hugging Face one
    _, fields = check_names_and_keys(out, list(W) + (["rope_freqs.weight"] if rope else []), arch_id,
                                     cfg["num_hidden_layers"])
    assert fields["tokenizer.ggml.model"].contents() == "gpt2"
    # llama.cpp's names: "gpt-2" is its GPT-2 pre-tokenizer (convert_hf_to_gguf.py's too)
    assert fields["tokenizer.ggml.pre"].contents() == ("gpt-2" if gpt2 else PRE_NAME[model_type])
    assert fields["tokenizer.ggml.pre"].contents() in llama_cpp_vocab_names()[0]
    assert fields[f"{model_type}.attention.head_count_kv"].contents() == 2
    tok = tokenizers.Tokenizer.from_file(str(tmp_path / model_type / "tokenizer.json"))
    ids = [0] + tok.encode("the cat sat on the log and llama runs; 12345 dogs don't!").ids
    ref = decoder_logits(W, cfg, ids)
    # f32 KV cache: the default f16 cache rounds k and v (~1e-3 on the logits)
    llm = llama_cpp.Llama(model_path=str(out), n_ctx=64, logits_all=True, verbose=False,
                          type_k=0, type_v=0)
    llm.eval(ids)
    got = np.asarray(llm.scores[:len(ids)], dtype=np.float64)
    diff = float(np.abs(got - ref).max())
    print(f"{model_type}: {len(ids)} tokens, max |logit diff| {diff:.3g} "
          f"(logits up to {np.abs(ref).max():.3g})")
    assert diff <= 1e-3, diff
    # llama.cpp's own BPE, with the pre-tokenizer the file names, gives the HF ids (digits,
    # contractions, newlines and space runs are where the pre-tokenizers differ)
    for text in ("the cat sat on the mat", CORPUS[4], "Room 4096: 3 cats.\n\n  They've 12 dogs"):
        assert llm.tokenize(text.encode(), add_bos=False, special=False) == \
            tok.encode(text).ids, text


# ------------------------------------------------------------------------------------------
# Broken model directories: a clear error naming what is wrong, no output, no crash
# (run with the sanitizer build when TBX_ASAN is set)
# ------------------------------------------------------------------------------------------
def _edit_json(name, fn):
    def apply(d: Path):
        p = d / name
        p.write_text(json.dumps(fn(json.loads(p.read_text()))))
    return apply


def _write(name, text):
    def apply(d: Path):
        (d / name).write_text(text)
    return apply


def _extra_tensor(d: Path):
    W = stn.load_file(str(d / "model.safetensors"))
    W["model.layers.0.mystery.weight"] = np.zeros((4, 4), np.float32)
    stn.save_file(W, str(d / "model.safetensors"))


def _rows_not_heads(d: Path):
    W = stn.load_file(str(d / "model.safetensors"))
    W["model.layers.1.self_attn.k_proj.weight"] = np.zeros((66, 128), np.float32)
    stn.save_file(W, str(d / "model.safetensors"))


def _rows(name: str, delta: int, cfg_vocab: bool = False):
    """Tensor `name` (and lm_head's with it when cfg_vocab: config.json's vocab_size follows)
    gets `delta` more rows."""
    def apply(d: Path):
        W = stn.load_file(str(d / "model.safetensors"))
        for n in ([name, "lm_head.weight"] if cfg_vocab else [name]):
            a = W[n]
            W[n] = np.zeros((a.shape[0] + delta, a.shape[1]), np.float32)
            W[n][:min(a.shape[0], a.shape[0] + delta)] = a[:a.shape[0] + delta]
        stn.save_file(W, str(d / "model.safetensors"))
        if cfg_vocab:
            _edit_json("config.json", lambda c: {**c, "vocab_size": W[name].shape[0]})(d)
    return apply


def _cfg(**kv):
    return _edit_json("config.json", lambda c: {**c, **kv})


BROKEN = [
    ("config_not_json", _write("config.json", '{"model_type": "llama",'), "config.json"),
    ("config_no_heads", _edit_json("config.json", lambda c: {k: v for k, v in c.items()
                                                              if k != "num_attention_heads"}),
     "num_attention_heads"),
    ("config_heads_text", _edit_json("config.json", lambda c: {**c, "hidden_size": "128"}),
     "hidden_size"),
    ("config_heads_zero", _edit_json("config.json", lambda c: {**c, "num_key_value_heads": 0}),
     "num_key_value_heads"),
    ("rope_scaling", _edit_json("config.json", lambda c: {**c, "rope_scaling": {
        "rope_type": "yarn", "factor": 4.0}}), "rope_scaling"),
    ("rope_scaling_bad", _edit_json("config.json", lambda c: {**c, "rope_scaling": {
        "rope_type": "llama3", "factor": 8.0, "low_freq_factor": 4.0,
        "high_freq_factor": 1.0}}), "rope_scaling"),
    ("no_tokenizer", lambda d: (d / "tokenizer.json").unlink(), "tokenizer.json"),
    ("tokenizer_unigram", _edit_json("tokenizer.json", lambda t: {**t, "model": {
        "type": "Unigram", "vocab": [["a", 0.0]]}}), "Unigram"),
    # a SentencePiece BPE tokenizer.json is llama.cpp's "llama" vocabulary: llama takes it
    # (test_hf_gguf_spm.py), another architecture refuses it rather than write it as "gpt2"
    ("tokenizer_spm_bpe_qwen2", lambda d: (
        _edit_json("tokenizer.json", lambda t: {**t, "model": {**t["model"],
                                                               "byte_fallback": True}})(d),
        _edit_json("config.json", lambda c: {**c, "model_type": "qwen2"})(d)), "byte_fallback"),
    ("tokenizer_dup_key", _write("tokenizer_config.json", '{"bos_token": "<s>", "bos_token": '
                                 '"</s>"}'), "tokenizer_config.json"),
    ("vocab_beyond_config", _edit_json("config.json", lambda c: {**c, "vocab_size": 10}),
     "vocab_size"),
    ("unknown_tensor", _extra_tensor, "model.layers.0.mystery.weight"),
    ("rows_not_heads", _rows_not_heads, "k_proj"),
    # issue 19: hyper-parameters that contradict the tensors (make_decoder: hidden 128, 4 heads
    # of 32, 2 kv heads, 2 layers, feed-forward 192) are named with their value and what the
    # tensors hold, never written for llama.cpp to refuse
    ("hidden_size_0", _cfg(hidden_size=0),
     ("hidden_size = 0", "model.embed_tokens.weight has 128 columns")),
    ("layers_2_32", _cfg(num_hidden_layers=4294967295),
     ("num_hidden_layers = 4294967295", "layers 0 .. 1")),
    ("layers_fewer", _cfg(num_hidden_layers=1), ("num_hidden_layers = 1", "layers 0 .. 1")),
    ("heads", _cfg(num_attention_heads=3),
     ("num_attention_heads = 3", "model.layers.0.self_attn.q_proj.weight has 128 rows")),
    ("kv_heads", _cfg(num_key_value_heads=1),
     ("num_key_value_heads = 1", "model.layers.0.self_attn.k_proj.weight has 64 rows")),
    ("head_dim", _cfg(head_dim=16),
     ("num_attention_heads = 4", "head_dim", "q_proj.weight has 128 rows")),
    ("ffn", _cfg(intermediate_size=100), ("intermediate_size = 100", "192")),
    ("layer_missing", lambda d: (_cfg(num_hidden_layers=3)(d), _rename_layer(d, 1, 2)),
     ("num_hidden_layers = 3", "no layer 1")),
    # issue 19 item 5: the vocabulary follows the token embedding's rows
    ("vocab_size_20m", _cfg(vocab_size=20_000_000),
     ("vocab_size = 20000000", "model.embed_tokens.weight has")),
    ("vocab_size_more", lambda d: _cfg(vocab_size=json.loads(
        (d / "config.json").read_text())["vocab_size"] + 68)(d), ("vocab_size",)),
    ("lm_head_rows", _rows("lm_head.weight", 3), ("lm_head.weight has",)),
    ("tokens_beyond_rows", _rows("model.embed_tokens.weight", -5, cfg_vocab=True),
     ("tokenizer.json uses token id", "model.embed_tokens.weight")),
]


def _rename_layer(d: Path, a: int, b: int):
    W = stn.load_file(str(d / "model.safetensors"))
    W = {k.replace(f"layers.{a}.", f"layers.{b}."): v for k, v in W.items()}
    stn.save_file(W, str(d / "model.safetensors"))


@pytest.mark.parametrize("case,mutate,needle", BROKEN, ids=[b[0] for b in BROKEN])
def test_broken_model_directory(tbx_asan, tmp_path, case, mutate, needle):
    d = tmp_path / "m"
    make_decoder(d, "llama", 3)
    mutate(d)
    out = tmp_path / "out.gguf"
    r = run(tbx_asan, "convert", d, out)
    assert_clean_exit(r)
    assert r.rc == 1, r.describe()
    for n in (needle if isinstance(needle, tuple) else (needle,)):
        assert n in r.err.decode(), r.describe()
    assert not out.exists()


def test_vocab_size_bomb_stays_small(tbx, tmp_path):
    """Issue 19 item 5: config.json's vocab_size 20,000,000 beside a 400-token tokenizer and
    embedding made tbx build a vocabulary of 20 million "[PAD...]" tokens: a 489 MB GGUF and
    1 GB of RSS, exit 0 (200,000,000 reached 6.7 GB before running out of memory). It is
    refused at once now."""
    from test_memory_bounds import MIB, run_measured
    d = tmp_path / "m"
    make_decoder(d, "llama", 3)
    _cfg(vocab_size=20_000_000)(d)
    rc, rss, secs, err = run_measured([tbx, "convert", str(d), str(tmp_path / "o.gguf")],
                                      tmp_path)
    assert rc == 1 and b"vocab_size = 20000000" in err, err
    assert rss < 64 * MIB and secs < 5, (rss / MIB, secs)
    assert not (tmp_path / "o.gguf").exists()


def test_minilm_hparams_that_contradict_the_tensors(tbx_asan, minilm_dir, tmp_path):
    """The same for a BERT: the position and token-type embeddings' rows are
    max_position_embeddings and type_vocab_size for llama.cpp."""
    cases = {
        "max_position_embeddings": (500, "position_embeddings.weight has 512 rows"),
        "type_vocab_size": (3, "token_type_embeddings.weight has 2 rows"),
        "hidden_size": (0, "word_embeddings.weight has 384 columns"),
        "num_hidden_layers": (7, "layers 0 .. 5"),
        "intermediate_size": (1024, "1536"),
        "num_attention_heads": (5, "attention.self.query.bias has 384 values"),
    }
    cfg = json.loads((minilm_dir / "config.json").read_text())
    for field, (value, what) in cases.items():
        d = tmp_path / field
        d.mkdir()
        for p in minilm_dir.iterdir():
            if p.name != "config.json":
                (d / p.name).symlink_to(p)
        (d / "config.json").write_text(json.dumps({**cfg, field: value}))
        out = tmp_path / f"{field}.gguf"
        r = run(tbx_asan, "convert", d, out, timeout=600)
        assert_clean_exit(r)
        assert r.rc == 1, r.describe()
        assert f"config.json: {field} = {value}" in r.err.decode() and \
            what in r.err.decode(), r.describe()
        assert not out.exists()


def test_vocab_padded_to_the_embedding_rows(tbx, tmp_path):
    """A vocabulary padded in the checkpoint (embedding and lm_head with rows past the
    tokenizer's tokens, config.json's vocab_size saying so, as real checkpoints round it up):
    one token per row, the extra ones "[PAD<id>]" unused tokens as convert_hf_to_gguf.py writes
    them; llama.cpp loads the file and its logits over every row are the reference's. Without
    vocab_size in config.json the rows decide alike."""
    for with_cfg in (True, False):
        d = tmp_path / f"m{int(with_cfg)}"
        W, cfg = make_decoder(d, "llama", 7, extra_rows=6)
        rows = W["model.embed_tokens.weight"].shape[0]
        if not with_cfg:
            _edit_json("config.json", lambda c: {k: v for k, v in c.items()
                                                 if k != "vocab_size"})(d)
        out = tmp_path / f"m{int(with_cfg)}.gguf"
        convert(tbx, d, out)
        _, fields = read_gguf(out)
        f = fields["tokenizer.ggml.tokens"]
        toks = [bytes(f.parts[i]).decode() for i in f.data]
        assert len(toks) == rows
        assert toks[-6:] == [f"[PAD{i}]" for i in range(rows - 6, rows)]
        types = fields["tokenizer.ggml.token_type"].contents()
        assert types[-6:] == [int(gguf.TokenType.UNUSED)] * 6
        assert fields["llama.vocab_size"].contents() == rows
        assert run(tbx, "validate", "--ggml", out).rc == 0
    tok = tokenizers.Tokenizer.from_file(str(d / "tokenizer.json"))
    ids = [0] + tok.encode("the cat sat on the mat").ids
    ref = decoder_logits(W, cfg, ids)
    llm = llama_cpp.Llama(model_path=str(out), n_ctx=64, logits_all=True, verbose=False,
                          type_k=0, type_v=0)
    assert llm.n_vocab() == rows
    llm.eval(ids)
    got = np.asarray(llm.scores[:len(ids)], dtype=np.float64)
    assert got.shape == ref.shape and float(np.abs(got - ref).max()) <= 1e-3


def copy_gguf(src: Path, dst: Path, edit: dict):
    """A copy of GGUF `src` written by gguf-py, the values of `edit` (key -> value) replacing
    those of src."""
    r = gguf.GGUFReader(str(src))
    w = gguf.GGUFWriter(str(dst), r.fields["general.architecture"].contents())
    for key, f in r.fields.items():
        if key.startswith("GGUF.") or key == "general.architecture":
            continue
        vt = f.types[0]
        w.add_key_value(key, edit.get(key, f.contents()), vt,
                        sub_type=f.types[-1] if vt == gguf.GGUFValueType.ARRAY else None)
    for t in r.tensors:
        w.add_tensor(t.name, np.asarray(t.data), raw_dtype=t.tensor_type)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def test_validate_ggml_reports_a_vocabulary_llama_cpp_refuses(tbx, tmp_path):
    """`tbx validate --ggml` reports what llama.cpp's loader refuses: a token count that differs
    from token_embd's rows (issue 19: a GGUF written with config.json's vocab_size 100 beside a
    32-row embedding was called valid). The files are written by gguf-py; llama.cpp itself is
    the judge of which load."""
    W, cfg = make_decoder(tmp_path / "m", "llama", 8)
    good = tmp_path / "good.gguf"
    convert(tbx, tmp_path / "m", good)
    _, fields = read_gguf(good)
    f = fields["tokenizer.ggml.tokens"]
    toks = [bytes(f.parts[i]).decode() for i in f.data]
    types = fields["tokenizer.ggml.token_type"].contents()
    same = tmp_path / "same.gguf"
    copy_gguf(good, same, {})
    bad = tmp_path / "more-tokens.gguf"
    copy_gguf(good, bad, {"tokenizer.ggml.tokens": toks + ["x1", "x2", "x3"],
                          "tokenizer.ggml.token_type": types + [1, 1, 1]})
    llama_cpp.Llama(model_path=str(same), verbose=False)  # loads
    with pytest.raises(ValueError):
        llama_cpp.Llama(model_path=str(bad), verbose=False)
    r = run(tbx, "validate", "--ggml", same)
    assert r.rc == 0, r.describe()
    r = run(tbx, "validate", "--ggml", bad)
    assert_clean_exit(r)
    assert r.rc == 1, r.describe()
    text = r.out.decode()
    n = len(toks)
    assert f"tokenizer.ggml.tokens has {n + 3} tokens" in text and \
        f'"token_embd.weight" has {n} rows' in text and f'"output.weight" has {n} rows' in text, \
        r.describe()
