"""`tbx convert --meta KEY[:TYPE]=VALUE`: metadata given on the command line, checked against the
readers of other implementations (gguf-py, safetensors' own header parser) and, for EMBD, on the
legacy fixture made by cpp_embedder's converter (tests/data/embd/README.md): the expected
hyper-parameters are those of the BertConfig the fixture was made from, not tensorbox output."""
import json
import struct
from pathlib import Path

import numpy as np

from conftest import info_json, need, run, write_gguf

DATA = Path(__file__).resolve().parents[1] / "data" / "embd"
LEGACY = DATA / "tiny-legacy.bin"
# BertConfig(vocab_size=16, hidden_size=8, num_hidden_layers=6, num_attention_heads=2,
# intermediate_size=12, max_position_embeddings=10) (tests/data/embd/README.md)
DERIVED = {"vocab_size": "16", "hidden_size": "8", "embedding_dim": "8", "num_layers": "6",
           "intermediate_size": "12", "max_position_emb": "10"}


def test_legacy_without_meta_names_every_missing_key(tbx, tmp_path):
    out = tmp_path / "t.weights"
    r = run(tbx, "convert", LEGACY, out)
    assert r.rc == 1, r.describe()
    for key in ("model_name", "model_version", "num_attention_heads"):
        assert f'"{key}"' in r.text, r.describe()
    # what the tensors and the vocabulary give is not asked for
    for key in DERIVED:
        assert f'"{key}"' not in r.text, r.describe()
    assert "--meta" in r.text
    assert not out.exists()


def test_legacy_to_spec_with_meta(tbx, tmp_path):
    out = tmp_path / "t.weights"
    r = run(tbx, "convert", LEGACY, out, "--meta", "model_name=tiny-bert",
            "--meta", "model_version=0.1.0", "--meta", "num_attention_heads=2")
    assert r.rc == 0, r.describe()
    assert run(tbx, "validate", out).rc == 0
    j = info_json(tbx, out)
    assert j["format"] == "embd"
    m = j["metadata"]
    assert m["model_name"] == "tiny-bert" and m["model_version"] == "0.1.0"
    assert m["num_attention_heads"] == "2"
    for k, v in DERIVED.items():
        assert m[k] == v, k
    assert m["created_at"] == "1970-01-01T00:00:00Z" or m["created_at"].endswith("Z")
    # tensors as the origin's PyTorch arrays, [out, in] kept
    exp = np.load(DATA / "tiny-expected.npz")
    got = {t["name"]: t for t in j["tensors"]}
    assert got["encoder.layer.0.intermediate.dense.weight"]["shape"] == [12, 8]
    for name in ("encoder.layer.0.intermediate.dense.weight", "embeddings.word_embeddings.weight",
                 "encoder.layer.5.output.dense.weight"):
        r = run(tbx, "cat", out, name, "--as", "f32")
        assert r.rc == 0, r.describe()
        assert r.out == exp[name].astype("<f4").tobytes(), name


def test_meta_replaces_and_types_for_gguf(tbx, tmp_path):
    gguf = need("gguf")
    src = write_gguf(tmp_path / "m.gguf", lambda w: (w.add_string("general.name", "old"),
                                                    w.add_tensor("a", np.ones(4, np.float32))))
    out = tmp_path / "o.gguf"
    r = run(tbx, "convert", src, out, "--meta", "general.name=new",
            "--meta", "x.count:u32=7", "--meta", "x.neg:i16=-3", "--meta", "x.ok:bool=true",
            "--meta", "x.f:f32=0.5", "--meta", "x.s:str=12", "--meta", "a:b=c")
    assert r.rc == 0, r.describe()
    rd = gguf.GGUFReader(str(out))
    f = {k: rd.fields[k] for k in rd.fields}
    T = gguf.GGUFValueType

    def val(k):
        return f[k].contents()

    assert val("general.name") == "new"
    assert f["x.count"].types == [T.UINT32] and val("x.count") == 7
    assert f["x.neg"].types == [T.INT16] and val("x.neg") == -3
    assert f["x.ok"].types == [T.BOOL] and val("x.ok") is True
    assert f["x.f"].types == [T.FLOAT32] and val("x.f") == 0.5
    assert f["x.s"].types == [T.STRING] and val("x.s") == "12"
    assert f["a:b"].types == [T.STRING] and val("a:b") == "c"
    assert list(rd.fields).count("general.name") == 1


def test_meta_safetensors_header(tbx, tmp_path):
    src = Path(__file__).resolve().parents[2] / "examples" / "tiny-mlp.safetensors"
    out = tmp_path / "o.safetensors"
    r = run(tbx, "convert", src, out, "--meta", "note=hello", "--meta", "k2=v=2")
    assert r.rc == 0, r.describe()
    b = out.read_bytes()
    n = struct.unpack_from("<Q", b, 0)[0]
    meta = json.loads(b[8:8 + n])["__metadata__"]
    assert meta["note"] == "hello" and meta["k2"] == "v=2"


def test_meta_errors(tbx, tmp_path):
    src = Path(__file__).resolve().parents[2] / "examples" / "tiny-mlp.safetensors"
    out = tmp_path / "o.gguf"
    for bad in ("novalue", "=v", "k:u8=256", "k:u32=-1", "k:i8=x", "k:bool=yes", "k:f32=1x"):
        r = run(tbx, "convert", src, out, "--meta", bad)
        assert r.rc == 2, (bad, r.describe())
        assert "--meta" in r.text, (bad, r.describe())
    r = run(tbx, "convert", src, out, "--meta", "k=1", "--meta", "k=2")
    assert r.rc == 2 and "twice" in r.text, r.describe()
    assert not out.exists()
    # a type the target cannot store: refused naming the key (EMBD stores strings only)
    r = run(tbx, "convert", LEGACY, tmp_path / "t.weights", "--meta", "num_attention_heads:u32=2")
    assert r.rc == 1 and "num_attention_heads" in r.text, r.describe()


def test_refusal_hint_offers_stringify_when_it_works(tbx, tmp_path):
    """A typed value safetensors cannot store: its text form is a string safetensors takes,
    so the hint offers --stringify-meta (and --drop-meta); following it stores the text."""
    import re
    src = Path(__file__).resolve().parents[2] / "examples" / "tiny-mlp.safetensors"
    g = tmp_path / "t.gguf"
    r = run(tbx, "convert", src, g, "--meta", "n:u32=3")
    assert r.rc == 0, r.describe()
    out = tmp_path / "o.safetensors"
    r = run(tbx, "convert", g, out)
    assert r.rc == 1 and not out.exists(), r.describe()
    first = r.err.decode().strip().splitlines()[0]
    m = re.search(r"\(([^()]*--[^()]*)\)\s*$", first)
    assert m, first
    opts = re.findall(r"--[a-z][a-z-]*", m.group(1))
    assert opts == ["--stringify-meta", "--drop-meta"], first
    r = run(tbx, "convert", g, out, opts[0])
    assert r.rc == 0, r.describe()
    b = out.read_bytes()
    n = struct.unpack_from("<Q", b, 0)[0]
    assert json.loads(b[8:8 + n])["__metadata__"]["n"] == "3"
