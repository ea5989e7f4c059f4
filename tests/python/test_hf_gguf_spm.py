"""SentencePiece tokenizers (Llama 2, Mistral, TinyLlama style) through `tbx convert DIR out.gguf`.

A tiny llama model whose tokenizer is a SentencePiece BPE model TRAINED here with PyPI
`sentencepiece` (byte fallback on, Llama 2's settings: identity normalization, digits split,
whitespace kept) is converted by tbx and loaded by llama.cpp (llama-cpp-python):
(a) from tokenizer.model (the protobuf file): llama.cpp's token ids for a set of strings equal
    sentencepiece's own (with the BOS llama.cpp adds), the vocabulary arrays equal what
    sentencepiece reports piece by piece, and the logits equal a numpy forward pass (f32,
    within 1e-3);
(b) from the same model exported to tokenizer.json (BPE, byte_fallback: what Hugging Face's
    fast Llama tokenizer holds; the export is written here from the sentencepiece model, the
    way transformers' converter does it, and checked against sentencepiece with PyPI
    `tokenizers`): the same token ids in llama.cpp;
(c) keys and tensor names match gguf.constants / gguf.tensor_mapping;
(d) broken tokenizer.model files fail with a clear error naming the file and field (run with
    the sanitizer build when TBX_ASAN is set).
A missing sentencepiece, tokenizers, llama_cpp or gguf is a failure, not a skip.
"""
from __future__ import annotations

import io
import json
import random
from pathlib import Path

import pytest

from conftest import assert_clean_exit, need, run
from test_hf_gguf import check_names_and_keys, convert, decoder_logits, make_decoder

np = need("numpy")
gguf = need("gguf")
tokenizers = need("tokenizers")
llama_cpp = need("llama_cpp")
spm = need("sentencepiece")

SPM_CORPUS = [
    "the cat sat on the mat and the dog sat on the log",
    "tensorbox writes gguf files that llama runs on the cpu",
    "a small model with random weights still has exact logits",
    "quantized weights are smaller; float weights are exact",
    "In 2024, 12345 cats ran home! Don't they? We've 7 dogs; they'll stay.",
] * 8

# strings whose ids must agree: in-vocabulary words, digits (split one by one), punctuation,
# double spaces, and characters never seen in training (byte fallback: <0xNN> pieces)
SPM_TEXTS = [
    "the cat sat on the mat",
    "llama runs gguf files on the cpu; 4096 cats!",
    "Zebras  eat ünïcode: € 42 ☃",
    "Don't they? We've 7 dogs.",
]

BOS, EOS = 1, 2


def shuffled_texts(n: int = 150) -> list[str]:
    """Strings where merge priorities matter: corpus words in random order, every third one
    with its characters shuffled (llama.cpp given equal scores for every token, as its own
    converter writes them from a tokenizer.json, disagrees with sentencepiece on ~1 in 5)."""
    rng = random.Random(13)
    words = " ".join(SPM_CORPUS[:5]).split()
    out = []
    for k in range(n):
        s = " ".join(rng.choice(words) for _ in range(6))
        out.append("".join(rng.sample(s, len(s))) if k % 3 == 0 else s)
    return out


def train_spm() -> bytes:
    out = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(SPM_CORPUS), model_writer=out, model_type="bpe", vocab_size=400,
        byte_fallback=True, normalization_rule_name="identity", remove_extra_whitespaces=False,
        split_digits=True, character_coverage=1.0, hard_vocab_limit=False, unk_id=0,
        bos_id=BOS, eos_id=EOS, pad_id=-1, minloglevel=2)
    return out.getvalue()


def export_tokenizer_json(proto: bytes) -> dict:
    """The sentencepiece BPE model as Hugging Face's tokenizer.json (LlamaTokenizerFast's
    layout): the pieces as the vocabulary, every split of a piece into two pieces as a merge,
    ordered by the merged piece's score, byte fallback on."""
    sp = spm.SentencePieceProcessor(model_proto=proto)
    n = sp.get_piece_size()
    vocab = {sp.id_to_piece(i): i for i in range(n)}
    merges = []
    for piece, pid in vocab.items():
        if sp.is_control(pid) or sp.is_unknown(pid) or sp.is_byte(pid):
            continue
        for k in range(1, len(piece)):
            a, b = piece[:k], piece[k:]
            if a in vocab and b in vocab:
                merges.append((-sp.get_score(pid), vocab[a], vocab[b], a, b))
    merges.sort()
    special = lambda i: {"id": i, "content": sp.id_to_piece(i), "single_word": False,
                         "lstrip": False, "rstrip": False, "normalized": False, "special": True}
    return {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [special(0), special(BOS), special(EOS)],
        "normalizer": {"type": "Sequence", "normalizers": [
            {"type": "Prepend", "prepend": "\u2581"},
            {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]},
        "pre_tokenizer": None,
        "post_processor": {"type": "TemplateProcessing",
                           "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                                      {"Sequence": {"id": "A", "type_id": 0}}],
                           "pair": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                                    {"Sequence": {"id": "A", "type_id": 0}},
                                    {"SpecialToken": {"id": "<s>", "type_id": 1}},
                                    {"Sequence": {"id": "B", "type_id": 1}}],
                           "special_tokens": {"<s>": {"id": "<s>", "ids": [BOS],
                                                      "tokens": ["<s>"]}}},
        "decoder": {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
            {"type": "ByteFallback"}, {"type": "Fuse"},
            {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
        "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>",
                  "continuing_subword_prefix": None, "end_of_word_suffix": None,
                  "fuse_unk": True, "byte_fallback": True, "ignore_merges": False,
                  "vocab": vocab, "merges": [[a, b] for *_, a, b in merges]},
    }


TOKCFG = {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>",
          "add_bos_token": True, "add_eos_token": False}


def make_spm_llama(d: Path, seed: int, proto: bytes, as_json: bool):
    def write_tokenizer(d: Path) -> int:
        if as_json:
            (d / "tokenizer.json").write_text(json.dumps(export_tokenizer_json(proto)))
        else:
            (d / "tokenizer.model").write_bytes(proto)
        (d / "tokenizer_config.json").write_text(json.dumps(TOKCFG))
        return spm.SentencePieceProcessor(model_proto=proto).get_piece_size()

    W, cfg = make_decoder(d, "llama", seed, tokenizer=write_tokenizer)
    cfg.update(bos_token_id=BOS, eos_token_id=EOS)
    (d / "config.json").write_text(json.dumps(cfg, indent=2))
    return W, cfg


@pytest.fixture(scope="module")
def spm_proto():
    return train_spm()


@pytest.mark.parametrize("as_json", [False, True], ids=["tokenizer.model", "tokenizer.json"])
def test_spm_llama_in_llama_cpp(tbx, tmp_path, spm_proto, as_json):
    sp = spm.SentencePieceProcessor(model_proto=spm_proto)
    d = tmp_path / "m"
    W, cfg = make_spm_llama(d, 5, spm_proto, as_json)
    if as_json:  # the export itself tokenizes as sentencepiece does (else the test proves nothing)
        hf = tokenizers.Tokenizer.from_file(str(d / "tokenizer.json"))
        for text in SPM_TEXTS + shuffled_texts():
            assert hf.encode(text, add_special_tokens=False).ids == sp.encode(text), text
    out = tmp_path / "m.gguf"
    convert(tbx, d, out)
    r, fields = check_names_and_keys(out, list(W), gguf.MODEL_ARCH.LLAMA, cfg["num_hidden_layers"])
    assert fields["tokenizer.ggml.model"].contents() == "llama"
    assert fields["tokenizer.ggml.pre"].contents() == "default"
    assert "tokenizer.ggml.merges" not in fields
    assert fields["tokenizer.ggml.bos_token_id"].contents() == BOS
    assert fields["tokenizer.ggml.eos_token_id"].contents() == EOS
    assert fields["tokenizer.ggml.add_bos_token"].contents() is True
    # the vocabulary, piece by piece, as sentencepiece reports it
    T = gguf.TokenType
    n = sp.get_piece_size()
    # (gguf-py's LlamaHfVocab, for tokenizer.json, types every special token control, <unk> too)
    want_types = [T.UNKNOWN if sp.is_unknown(i) and not as_json else
                  T.CONTROL if sp.is_control(i) or sp.is_unknown(i) else
                  T.BYTE if sp.is_byte(i) else T.NORMAL for i in range(n)]
    assert fields["tokenizer.ggml.tokens"].contents() == [sp.id_to_piece(i) for i in range(n)]
    assert fields["tokenizer.ggml.token_type"].contents() == [int(t) for t in want_types]
    scores = fields["tokenizer.ggml.scores"].contents()
    if not as_json:
        assert scores == pytest.approx([sp.get_score(i) for i in range(n)])
    else:  # merge priorities in the same order as sentencepiece's scores
        normal = [i for i in range(n) if want_types[i] == T.NORMAL]
        assert sorted(normal, key=lambda i: -scores[i]) == \
            sorted(normal, key=lambda i: (-sp.get_score(i), i))

    llm = llama_cpp.Llama(model_path=str(out), n_ctx=128, logits_all=True, verbose=False,
                          type_k=0, type_v=0)
    for text in SPM_TEXTS + shuffled_texts():
        assert llm.tokenize(text.encode()) == [BOS] + sp.encode(text), text
    ids = [BOS] + sp.encode(SPM_TEXTS[1])
    ref = decoder_logits(W, cfg, ids)
    llm.eval(ids)
    got = np.asarray(llm.scores[:len(ids)], dtype=np.float64)
    diff = float(np.abs(got - ref).max())
    print(f"spm llama ({'tokenizer.json' if as_json else 'tokenizer.model'}): {len(ids)} tokens, "
          f"max |logit diff| {diff:.3g}")
    assert diff <= 1e-3, diff


def test_spm_added_tokens(tbx, tmp_path, spm_proto):
    """added_tokens_decoder (tokenizer_config.json) overrides pieces as llama.cpp's converter
    does: special -> control, else user-defined with U+2581 written as a space; ids past
    vocab_size are ignored and the vocabulary is padded to config.json's vocab_size."""
    d = tmp_path / "m"
    make_spm_llama(d, 6, spm_proto, False)
    n = spm.SentencePieceProcessor(model_proto=spm_proto).get_piece_size()
    cfg = json.loads((d / "config.json").read_text())
    tc = dict(TOKCFG)
    tc["added_tokens_decoder"] = {
        str(n - 1): {"content": "<|im_end|>", "special": False},
        str(n - 2): {"content": "\u2581my\u2581word", "special": False},
        str(n + 50): {"content": "<ignored>", "special": True},
    }
    (d / "tokenizer_config.json").write_text(json.dumps(tc))
    # the model's vocab_size is larger than the pieces: [PAD<id>] entries, unused
    cfg["vocab_size"] = n + 3
    (d / "config.json").write_text(json.dumps(cfg))
    import safetensors.numpy as stn
    W = stn.load_file(str(d / "model.safetensors"))
    for k in ("model.embed_tokens.weight", "lm_head.weight"):
        W[k] = np.concatenate([W[k], np.zeros((3, W[k].shape[1]), np.float32)])
    stn.save_file(W, str(d / "model.safetensors"))
    out = tmp_path / "m.gguf"
    convert(tbx, d, out)
    _, fields = check_names_and_keys(out, list(W), gguf.MODEL_ARCH.LLAMA, cfg["num_hidden_layers"])
    toks = fields["tokenizer.ggml.tokens"].contents()
    types = fields["tokenizer.ggml.token_type"].contents()
    scores = fields["tokenizer.ggml.scores"].contents()
    T = gguf.TokenType
    assert len(toks) == n + 3
    assert (toks[n - 1], types[n - 1], scores[n - 1]) == ("<|im_end|>", T.CONTROL, -1000.0)
    assert (toks[n - 2], types[n - 2], scores[n - 2]) == (" my word", T.USER_DEFINED, -1000.0)
    assert toks[n:] == [f"[PAD{i}]" for i in range(n, n + 3)]
    assert types[n:] == [T.UNUSED] * 3 and scores[n:] == [-10000.0] * 3
    assert fields["llama.vocab_size"].contents() == n + 3
    llama_cpp.Llama(model_path=str(out), verbose=False)  # loads


# ------------------------------------------------------------------------------------------
# (d) broken tokenizer.model files
# ------------------------------------------------------------------------------------------
def _varint(v: int) -> bytes:
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        out.append(b | (0x80 if v else 0))
        if not v:
            return bytes(out)


def _piece(text: bytes, score: bytes = b"\x15\x00\x00\x00\x00", typ: bytes = b"") -> bytes:
    body = b"\x0a" + _varint(len(text)) + text + score + typ
    return b"\x0a" + _varint(len(body)) + body


BROKEN_SPM = [
    ("truncated", lambda p: p[:len(p) // 2], "pieces"),
    ("empty", lambda p: b"", "no pieces"),
    ("wire_type_group", lambda p: b"\x0b" + p, "wire type 3"),
    ("piece_not_len", lambda p: b"\x08\x01" + p, "pieces"),
    ("bad_type", lambda p: _piece(b"a", typ=b"\x18\x09") + p, "pieces[0].type"),
    ("nan_score", lambda p: _piece(b"a", score=b"\x15\x00\x00\xc0\x7f") + p, "pieces[0].score"),
    ("not_utf8", lambda p: _piece(b"\xff\xfe") + p, "pieces[0].piece"),
    ("len_past_piece", lambda p: b"\x0a\x03\x0a\x7f\x61" + p, "pieces[0].piece"),
    ("varint_too_long", lambda p: b"\x0a" + b"\xff" * 10 + b"\x01" + p, "varint"),
    ("huge_length", lambda p: b"\x0a" + _varint(1 << 62) + p, "pieces"),
]


@pytest.mark.parametrize("case,mutate,needle", BROKEN_SPM, ids=[b[0] for b in BROKEN_SPM])
def test_broken_tokenizer_model(tbx_asan, tmp_path, spm_proto, case, mutate, needle):
    d = tmp_path / "m"
    make_spm_llama(d, 7, spm_proto, False)
    (d / "tokenizer.model").write_bytes(mutate(spm_proto))
    out = tmp_path / "out.gguf"
    r = run(tbx_asan, "convert", d, out)
    assert_clean_exit(r)
    assert r.rc == 1, r.describe()
    err = r.err.decode()
    assert "tokenizer.model" in err and needle in err, r.describe()
    assert not out.exists()
