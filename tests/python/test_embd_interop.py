"""EMBD .weights against independent implementations: the layout builder of embdfile.py (struct,
zlib CRC-32, FNV-1a), the legacy file made by cpp_embedder's own converter
(tests/data/embd/, see its README: the expected values are the original PyTorch tensors), the
safetensors reference (PyPI `safetensors`) and gguf-py for conversions both ways."""
import json
import random
import struct
import zlib
from pathlib import Path

import numpy as np

import embdfile as E
from conftest import info_json, need, run

DATA = Path(__file__).resolve().parents[1] / "data" / "embd"


def cat_f32(tbx, path, name):
    r = run(tbx, "cat", path, name, "--as", "f32")
    assert r.rc == 0, r.describe()
    return np.frombuffer(r.out, dtype="<f4")


def test_writer_bytes_equal_independent_builder(tbx, tmp_path):
    """The builder's file, rewritten by tbx, comes back byte for byte (layout, padding, the three
    CRC-32s, hashes, the vocabulary), with and without alignment of the input."""
    for kw in ({}, {"aligned": False}):
        b, _ = E.sample(**kw)
        src = tmp_path / "in.weights"
        src.write_bytes(b)
        out = tmp_path / "out.weights"
        r = run(tbx, "convert", src, out, "--force")
        assert r.rc == 0, r.describe()
        assert out.read_bytes() == E.sample()[0], kw
        # and the writer is deterministic
        out2 = tmp_path / "out2.weights"
        assert run(tbx, "convert", out, out2, "--force").rc == 0
        assert out2.read_bytes() == out.read_bytes()


def test_header_fields_and_crcs(tbx, tmp_path):
    b, p = E.sample()
    path = tmp_path / "s.weights"
    path.write_bytes(b)
    j = info_json(tbx, path)
    h = j["embd"]["header"]
    assert h["header_checksum"] == zlib.crc32(b[:56])
    assert h["data_checksum"] == zlib.crc32(b[p["tdo"]:p["footer"]])
    assert h["file_checksum"] == zlib.crc32(b[:p["footer"]])
    assert h["tensor_data_offset"] == p["tdo"] and h["total_file_size"] == len(b)
    assert j["embd"]["vocab_tokens"] == 8
    assert j["embd"]["special_tokens"] == {"pad_id": 0, "unk_id": 1, "cls_id": 2, "sep_id": 3,
                                          "mask_id": 4}
    assert j["metadata"]["model_name"] == "tiny"
    assert [s["name"] for s in j["sections"]] == ["vocab"]


def test_legacy_fixture_tensors_equal_originals(tbx):
    """Every tensor the origin's converter wrote equals the original PyTorch tensor bit for bit,
    in the shape PyTorch gives it (linear weights [out, in]: the converter does not transpose)."""
    exp = np.load(DATA / "tiny-expected.npz")
    path = DATA / "tiny-legacy.bin"
    j = info_json(tbx, path)
    assert j["format"] == "embd-legacy"
    got = {t["name"]: t for t in j["tensors"]}
    # the converter writes the embeddings and the 6 encoder layers, not the pooler
    want = [k for k in exp.files if not k.startswith("pooler.")]
    assert sorted(got) == sorted(want)
    for name in want:
        assert got[name]["shape"] == list(exp[name].shape), name
        assert cat_f32(tbx, path, name).tobytes() == exp[name].astype("<f4").tobytes(), name
    assert got["encoder.layer.0.intermediate.dense.weight"]["shape"] == [12, 8]
    vocab = (DATA / "vocab.txt").read_text(encoding="utf-8").splitlines()
    assert j["embd"]["vocab_tokens"] == len(vocab)
    assert j["embd"]["special_tokens"] == {
        "pad_id": vocab.index("[PAD]"), "unk_id": vocab.index("[UNK]"),
        "cls_id": vocab.index("[CLS]"), "sep_id": vocab.index("[SEP]"),
        "mask_id": vocab.index("[MASK]")}


def test_to_and_from_safetensors(tbx, tmp_path):
    st = need("safetensors")
    b, _ = E.sample()
    src = tmp_path / "s.weights"
    src.write_bytes(b)
    out = tmp_path / "s.safetensors"
    r = run(tbx, "convert", src, out)
    assert r.rc == 1 and "--drop-sections" in r.err.decode(), r.describe()
    r = run(tbx, "convert", src, out, "--drop-sections")
    assert r.rc == 0, r.describe()
    # the stored bytes of each tensor, from the safetensors layout read here (numpy has no
    # bf16), cross-checked with the reference for the other dtypes
    blob = out.read_bytes()
    (n,) = struct.unpack_from("<Q", blob, 0)
    hdr = json.loads(blob[8:8 + n])
    t = {k: blob[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]]
         for k, v in hdr.items() if k != "__metadata__"}
    with st.safe_open(str(out), "numpy") as sf:
        for k in sf.keys():
            if hdr[k]["dtype"] != "BF16":
                assert sf.get_tensor(k).tobytes() == t[k], k
    rng = np.random.default_rng(7)
    assert t["embeddings.word_embeddings.weight"] == \
        rng.standard_normal((8, 4)).astype("<f4").tobytes()
    assert t["u32"] == struct.pack("<I", 4000000000) and t["i8"] == bytes([1, 255, 3, 4, 128])
    assert t["hb16"] == bytes([0x80, 0x3f, 0x00, 0xc0])
    # and back: a plain tensor file (no vocabulary) needs no model metadata
    back = tmp_path / "back.weights"
    r = run(tbx, "convert", out, back)
    assert r.rc == 0, r.describe()
    assert run(tbx, "validate", back).rc == 0
    for name, arr in t.items():
        r = run(tbx, "cat", back, name)
        assert r.rc == 0 and r.out == arr, name


def test_from_gguf_and_lossy_dtypes(tbx, tmp_path):
    from conftest import write_gguf
    gguf = need("gguf")
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    src = write_gguf(tmp_path / "m.gguf", lambda w: (w.add_tensor("a", a),
                                                    w.add_tensor("d", np.arange(3.0))))
    out = tmp_path / "m.weights"
    r = run(tbx, "convert", src, out)
    assert r.rc == 1, r.describe()  # f64 and typed metadata: refused, naming the item
    r = run(tbx, "convert", src, out, "--stringify-meta", "--cast", "f32")
    assert r.rc == 0, r.describe()
    assert cat_f32(tbx, out, "a").tobytes() == a.tobytes()
    assert run(tbx, "validate", out).rc == 0
    del gguf


def test_random_bit_flips_all_caught(tbx, tmp_path):
    """1,000 random single-bit flips of a valid model file: tbx validate catches every one."""
    b, _ = E.sample()
    rnd = random.Random(1234)
    path = tmp_path / "f.weights"
    missed = []
    for bit in rnd.sample(range(len(b) * 8), 1000):
        m = bytearray(b)
        m[bit // 8] ^= 1 << (bit % 8)
        path.write_bytes(bytes(m))
        if run(tbx, "validate", "--quiet", path).rc != 1:
            missed.append(bit)
    assert not missed, f"flips not caught at bits {missed[:20]}"
