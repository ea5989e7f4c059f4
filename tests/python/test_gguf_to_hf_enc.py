"""GGUF -> Hugging Face directory for the encoders: xlm-roberta (bge-m3, multilingual-e5),
modernbert and nomic_bert, proven by the real tools.

Each tiny model of test_hf_runtime.py (transformers' own config and model classes with random
weights; xlm-roberta with a SentencePiece Unigram vocabulary trained by PyPI sentencepiece and
transformers' tokenizer.json of it; modernbert with a byte-level BPE; nomic_bert written as a
nomic-embed-text directory with MiniLM's WordPiece) goes to GGUF by tbx (f32, f16) and back:
(a) every tensor of the original comes back with its bytes (through f16: the original rounded
    to f16 by torch); xlm-roberta's position rows that llama.cpp's converter drops (RoBERTa's
    padding offset: rows 0 .. pad_token_id) come back as +0, the original's row pad_token_id
    being 0 (nn.Embedding's padding row) and row 0 never read by transformers;
(b) transformers' AutoConfig of both directories agree on every field but the training ones;
(c) PyPI tokenizers gives the original tokenizer.json's ids on a few hundred strings (ASCII,
    accents, CJK, emoji, whitespace runs, special tokens); xlm-roberta's rebuilt
    sentencepiece.bpe.model has the original's pieces, scores and types in PyPI sentencepiece
    and encodes the strings to the same ids;
(d) tbx converts the back-converted directory to GGUF again: the same bytes as the first GGUF;
(e) transformers' from_pretrained on the back directory: the same hidden states as the
    original directory (xlm-roberta: a padded batch, so the restored padding row is read), and
    sentence embeddings (every token, pooling none) with cosine >= 0.9999 against llama.cpp's
    on the GGUF; nomic_bert also against test_hf_runtime's numpy forward of its architecture;
(f) llama.cpp's own convert_hf_to_gguf.py: its GGUF of the original goes back to the original's
    tensors and ids, and it converts the back directory (xlm-roberta: from the rebuilt
    sentencepiece.bpe.model; nomic_bert: nomic's config fields it asserts) to the file it makes
    of the original.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import run
from test_hf_gguf import convert, read_gguf
from test_hf_runtime import (OWN_FORWARD, PROMPTS, TOKFAM, llama_convert, sample_strings,
                             tiny)  # noqa: F401 (tiny: the fixture)
from test_gguf_to_hf import back, load_dir, orig_tensors, same_bits

import numpy as np  # noqa: E402
import tokenizers  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
import llama_cpp  # noqa: E402

torch.set_num_threads(1)

FAMILIES = ["xlm-roberta", "modernbert", "nomic_bert"]
# what a GGUF does not carry, in every family: training settings and the writer's facts
NOT_CARRIED = {"initializer_range", "transformers_version", "_name_or_path", "dtype"}
# RoBERTa: positions of real tokens start at pad_token_id + 1 (the GGUF holds those rows)
POS = "embeddings.position_embeddings.weight"


def pos_offset(family: str, d: Path) -> int:
    if family != "xlm-roberta":
        return 0
    return json.loads((d / "config.json").read_text())["pad_token_id"] + 1


def check_tensors(family, d, out, dt):
    orig, got = orig_tensors(d), load_dir(out)
    assert set(got) == set(orig), sorted(set(got) ^ set(orig))
    off = pos_offset(family, d)
    for k, v in orig.items():
        want = v.to(dt)
        if k == POS and off:
            # rows 0 .. pad: +0 (the original's row pad is nn.Embedding's zero padding row;
            # row 0 is random in a from_config model and never read)
            assert torch.equal(want[off - 1], torch.zeros_like(want[off - 1]))
            assert not torch.equal(want[0], torch.zeros_like(want[0]))  # so row 0 is tested
            assert same_bits(got[k][:off], torch.zeros_like(want[:off])), "padding rows"
            assert same_bits(got[k][off:], want[off:]), k
            continue
        assert same_bits(got[k], want), (k, got[k].dtype, want.dtype)


# ------------------------------------------------------------------------------------------
# (a)-(d)
# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("gtype", ["f32", "f16"])
@pytest.mark.parametrize("family", FAMILIES)
def test_encoder_round_trip(tbx, tiny, tmp_path, family, gtype):
    d = tiny(family)["dir"]
    g = tmp_path / "m.gguf"
    cast = () if gtype == "f32" else ("--cast", gtype)
    convert(tbx, d, g, *cast)
    out = back(tbx, g, tmp_path / "back")  # the GGUF's dtype
    check_tensors(family, d, out, torch.float32 if gtype == "f32" else torch.float16)
    # (b) config.json
    ca = transformers.AutoConfig.from_pretrained(str(d)).to_dict()
    cb = transformers.AutoConfig.from_pretrained(str(out)).to_dict()
    differ = {k for k in set(ca) | set(cb) if ca.get(k) != cb.get(k)}
    assert differ <= NOT_CARRIED, {k: (ca.get(k), cb.get(k)) for k in differ - NOT_CARRIED}
    # (c) the tokenizer
    ta = tokenizers.Tokenizer.from_file(str(d / "tokenizer.json"))
    ta.no_padding()  # MiniLM's (nomic_bert's) pads to 128
    ta.no_truncation()
    tb = tokenizers.Tokenizer.from_file(str(out / "tokenizer.json"))
    n = 0
    for cat, strings in sample_strings(TOKFAM[family]).items():
        for s in strings:
            assert ta.encode(s).ids == tb.encode(s).ids, (cat, s)
            assert ta.encode(s, "pair two").ids == tb.encode(s, "pair two").ids, (cat, s)
            n += 1
    assert n >= 250
    oc = json.loads((d / "tokenizer_config.json").read_text())
    tc = json.loads((out / "tokenizer_config.json").read_text())
    for key in ("unk_token", "sep_token", "pad_token", "cls_token", "mask_token"):
        ov = oc.get(key)
        ov = ov["content"] if isinstance(ov, dict) else ov
        if ov is not None:
            assert tc.get(key) == ov, key
    if family == "xlm-roberta":
        import sentencepiece as spm
        sa = spm.SentencePieceProcessor(model_file=str(d / "sentencepiece.bpe.model"))
        sb = spm.SentencePieceProcessor(model_file=str(out / "sentencepiece.bpe.model"))
        assert sa.vocab_size() == sb.vocab_size()
        for i in range(sa.vocab_size()):
            assert (sa.id_to_piece(i), sa.get_score(i), sa.is_control(i), sa.is_unknown(i),
                    sa.is_unused(i), sa.is_byte(i)) == \
                   (sb.id_to_piece(i), sb.get_score(i), sb.is_control(i), sb.is_unknown(i),
                    sb.is_unused(i), sb.is_byte(i)), i
        for strings in sample_strings(TOKFAM[family]).values():
            for s in strings:
                assert sa.encode(s) == sb.encode(s), s
    # (d) the back directory to GGUF again: the same file (through f16: the back directory in
    # f32 holds the f16 values exactly, so the cast gives the same bytes)
    src = out if gtype == "f32" else back(tbx, g, tmp_path / "back32", "--dtype", "f32")
    g2 = tmp_path / "again.gguf"
    convert(tbx, src, g2, *cast)
    assert g2.read_bytes() == g.read_bytes()


# ------------------------------------------------------------------------------------------
# (e) transformers on the back directory
# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("gtype", ["f32", "f16"])
@pytest.mark.parametrize("family", FAMILIES)
def test_encoder_back_embeddings(tbx, tiny, tmp_path, family, gtype):
    d = tiny(family)["dir"]
    g = tmp_path / "m.gguf"
    convert(tbx, d, g, *(() if gtype == "f32" else ("--cast", gtype)))
    out = back(tbx, g, tmp_path / "back", "--dtype", "f32")
    tok = transformers.AutoTokenizer.from_pretrained(str(out))
    tok_a = transformers.AutoTokenizer.from_pretrained(str(d))
    mb = transformers.AutoModel.from_pretrained(str(out), dtype=torch.float32).eval()
    assert type(mb).__name__ == json.loads((out / "config.json").read_text())["architectures"][0]
    if gtype == "f32":
        # the same hidden states as the original directory, a padded batch included (its pad
        # tokens read the restored padding position of xlm-roberta)
        ma = transformers.AutoModel.from_pretrained(str(d), dtype=torch.float32).eval()
        enc = tok_a(PROMPTS, padding=True, return_tensors="pt")
        assert bool((enc["attention_mask"] == 0).any())
        with torch.no_grad():
            ra, rb = ma(**enc).last_hidden_state, mb(**enc).last_hidden_state
        assert torch.equal(ra, rb), float((ra - rb).abs().max())
    llm = llama_cpp.Llama(model_path=str(g), embedding=True, verbose=False, n_threads=1,
                          n_ctx=128, pooling_type=llama_cpp.LLAMA_POOLING_TYPE_NONE)
    worst = 1.0
    for p in PROMPTS:
        ids = tok(p)["input_ids"]
        assert ids == tok_a(p)["input_ids"], p
        with torch.no_grad():
            ref = mb(torch.tensor([ids])).last_hidden_state[0].double().numpy()
        if family in OWN_FORWARD:
            # the numpy forward of nomic's architecture (test_hf_runtime's, written from the
            # published model) on the back directory's weights and config.json
            own = OWN_FORWARD[family](out, ids)
            assert np.abs(own - ref).max() <= 1e-5 * max(1.0, np.abs(own).max()), p
        got = np.asarray(llm.embed(p, normalize=False), dtype=np.float64)
        assert got.shape == ref.shape, (p, got.shape, ref.shape)
        cos = (got * ref).sum(-1) / np.linalg.norm(got, axis=-1) / np.linalg.norm(ref, axis=-1)
        worst = min(worst, float(cos.min()))
        assert cos.min() >= 0.9999, (p, cos)
    print(f"{family} {gtype}: transformers (back directory) vs llama.cpp (GGUF): min token "
          f"cosine {worst:.6f}")


# ------------------------------------------------------------------------------------------
# (f) llama.cpp's own converter
# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("family", ["xlm-roberta", "nomic_bert"])
def test_llama_cpp_converter_and_back(tbx, tiny, tmp_path, family):
    d = tiny(family)["dir"]
    ref = tmp_path / "lc.gguf"
    llama_convert(d, ref, family, "f32")
    out = back(tbx, ref, tmp_path / "back")
    check_tensors(family, d, out, torch.float32)
    ta = tokenizers.Tokenizer.from_file(str(d / "tokenizer.json"))
    ta.no_padding()  # MiniLM's (nomic_bert's) pads to 128
    ta.no_truncation()
    tb = tokenizers.Tokenizer.from_file(str(out / "tokenizer.json"))
    for strings in sample_strings(TOKFAM[family]).values():
        for s in strings:
            assert ta.encode(s).ids == tb.encode(s).ids, s
    # llama.cpp's converter on the back directory (tbx's f32 output of tbx's GGUF, so that
    # only what the directory says differs): the file it makes of the original, but for the
    # name it takes from the directory's
    g = tmp_path / "m.gguf"
    convert(tbx, d, g)
    out2 = back(tbx, g, tmp_path / "back2")
    ref2 = tmp_path / "lc2.gguf"
    llama_convert(out2, ref2, family, "f32")
    ra, fa = read_gguf(ref)
    rb, fb = read_gguf(ref2)
    named = {"general.name", "general.basename", "general.size_label", "general.finetune"}
    ka, kb = set(fa) - named, set(fb) - named
    assert ka == kb, sorted(ka ^ kb)
    for k in ka:
        assert fa[k].contents() == fb[k].contents() and fa[k].types == fb[k].types, k
    ta_, tb_ = {t.name: t for t in ra.tensors}, {t.name: t for t in rb.tensors}
    assert set(ta_) == set(tb_)
    for n, t in ta_.items():
        assert t.tensor_type == tb_[n].tensor_type and list(t.shape) == list(tb_[n].shape), n
        assert t.data.tobytes() == tb_[n].data.tobytes(), n


# ------------------------------------------------------------------------------------------
# what cannot be put back
# ------------------------------------------------------------------------------------------
def test_xlm_roberta_without_padding_id_refused(tbx, tbx_asan, tiny, tmp_path):
    """Without tokenizer.ggml.padding_token_id the dropped position rows cannot be counted:
    refused naming the key, nothing written; --weights-only still writes the tensors."""
    import gguf
    d = tiny("xlm-roberta")["dir"]
    g = tmp_path / "m.gguf"
    convert(tbx, d, g)
    r = gguf.GGUFReader(str(g))
    g2 = tmp_path / "nopad.gguf"
    w = gguf.GGUFWriter(str(g2), arch="bert")
    for k, f in r.fields.items():
        if k.startswith("GGUF.") or k in ("general.architecture",
                                          "tokenizer.ggml.padding_token_id"):
            continue
        vt = f.types[0]
        if vt == gguf.GGUFValueType.ARRAY:
            w.add_key_value(k, f.contents(), vt, sub_type=f.types[-1])
        else:
            w.add_key_value(k, f.contents(), vt)
    for t in r.tensors:
        w.add_tensor(t.name, np.asarray(t.data), raw_shape=[int(x) for x in
                                                            reversed(t.shape.tolist())])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    assert "tokenizer.ggml.padding_token_id" not in gguf.GGUFReader(str(g2)).fields
    res = run(tbx_asan, "convert", str(g2), str(tmp_path / "out") + "/")
    assert res.rc == 1 and "tokenizer.ggml.padding_token_id" in res.text and \
        "--weights-only" in res.text, res.describe()
    assert not (tmp_path / "out").exists()
    out = back(tbx, g2, tmp_path / "w", "--weights-only")
    assert (out / "model.safetensors").is_file()


# ------------------------------------------------------------------------------------------
# sentence-transformers pooling (bge-m3: CLS; multilingual-e5: mean)
# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["cls", "mean"])
def test_xlm_roberta_pooling_back(tbx, tiny, tmp_path, mode):
    """The tiny xlm-roberta as a sentence-transformers directory (modules.json, 1_Pooling with
    bge-m3's CLS or multilingual-e5's mean pooling) -> GGUF -> back: the pooling files say the
    same mode, and llama.cpp's pooled sentence embedding of the GGUF (the pooling type the GGUF
    carries) equals the pooling of transformers' hidden states on the back directory
    (cosine >= 0.9999)."""
    import shutil
    d = tmp_path / "st"
    shutil.copytree(tiny("xlm-roberta")["dir"], d)
    (d / "modules.json").write_text(json.dumps([
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling",
         "type": "sentence_transformers.models.Pooling"}]))
    (d / "1_Pooling").mkdir()
    E = json.loads((d / "config.json").read_text())["hidden_size"]
    (d / "1_Pooling" / "config.json").write_text(json.dumps({
        "word_embedding_dimension": E, "pooling_mode_cls_token": mode == "cls",
        "pooling_mode_mean_tokens": mode == "mean", "pooling_mode_max_tokens": False,
        "pooling_mode_mean_sqrt_len_tokens": False}))
    g = tmp_path / "m.gguf"
    convert(tbx, d, g)
    out = back(tbx, g, tmp_path / "back")
    pool = json.loads((out / "1_Pooling" / "config.json").read_text())
    assert pool["word_embedding_dimension"] == E
    assert pool["pooling_mode_cls_token"] == (mode == "cls")
    assert pool["pooling_mode_mean_tokens"] == (mode == "mean")
    assert not pool["pooling_mode_max_tokens"]
    mods = json.loads((out / "modules.json").read_text())
    assert [(m["path"], m["type"]) for m in mods] == [
        ("", "sentence_transformers.models.Transformer"),
        ("1_Pooling", "sentence_transformers.models.Pooling")]
    tok = transformers.AutoTokenizer.from_pretrained(str(out))
    m = transformers.AutoModel.from_pretrained(str(out), dtype=torch.float32).eval()
    llm = llama_cpp.Llama(model_path=str(g), embedding=True, verbose=False, n_threads=1,
                          n_ctx=128)
    for p in PROMPTS:
        ids = tok(p)["input_ids"]
        with torch.no_grad():
            h = m(torch.tensor([ids])).last_hidden_state[0].double().numpy()
        ref = h[0] if mode == "cls" else h.mean(0)
        got = np.asarray(llm.embed(p, normalize=False), dtype=np.float64).reshape(-1)
        cos = float(got @ ref / np.linalg.norm(got) / np.linalg.norm(ref))
        assert cos >= 0.9999, (p, cos)


def test_modernbert_converter_file_refused_back(tbx, tiny, tmp_path):
    """llama.cpp's converter writes ModernBERT's norm_eps as layer_norm_rms_epsilon, which
    llama.cpp's own loader refuses (test_hf_runtime.test_modernbert_converter_file_refused):
    the way back refuses that file too, naming the key it lacks, and writes nothing."""
    d = tiny("modernbert")["dir"]
    ref = tmp_path / "lc.gguf"
    llama_convert(d, ref, "modernbert", "f32")
    r = run(tbx, "convert", str(ref), str(tmp_path / "out") + "/")
    assert r.rc == 1 and "modern-bert.attention.layer_norm_epsilon" in r.text, r.describe()
    assert not (tmp_path / "out").exists()
