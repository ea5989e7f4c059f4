"""Quantized tensors through `tbx cat --as f32` and `tbx convert` (issue 10: conversion goes
through the common quantization description, tbx_quant_info).

- OINF v2: `tbx_tensor_read_f32` returns dequantized values, (code - zero_point) * scale in
  float32 per tensor or per channel (docs/formats/oinf.md); no peer reads version 2
  (openinfer-oinf 0.1.1 is version 1 only), so the file is the independent builder's of
  test_oinf_malformed.py and the expected values are numpy's evaluation of that formula on the
  builder's inputs.
- A conversion keeps the quantization where the target stores it exactly (OINF v2 -> OINF v2:
  the builder's bytes; zTensor quantized_group -> zTensor: the same components and
  description; ggml block types -> GGUF, read by gguf-py), refuses it otherwise naming the
  tensor and `--dequantize`, and with `--dequantize` writes the dequantized values, read back
  by the target's peer (PyPI safetensors, openinfer-oinf 0.1.1's decoding), compared with
  numpy's (or gguf-py's) own dequantization. (ztensor 1.1.1 cannot read quantized_group values:
  it is only asked for the object's shape.)
"""
from __future__ import annotations

import contextlib
import io
import struct

from conftest import info_json, need, run, write_gguf
from test_oinf_interop import parse_tables, ref_tensor_values
from test_oinf_malformed import sample_v2
from test_quant_info import qgroup_file

np = need("numpy")
stn = need("safetensors.numpy")
ztensor = need("ztensor")
gguf = need("gguf")
oinf_verify = need("oinf_verify")

# the builder's inputs (test_oinf_malformed.sample_v2)
QW = np.array([-3, 0, 5, 127, -128, 1], np.int8).reshape(2, 3)
QW_SCALES = np.array([0.5, 0.25], np.float32)
QW_ZPS = np.array([3, -7], np.int32)
QS = np.array([1, 2, 15], np.uint8)           # u4 codes 0x21 0x0f -> 1, 2, 15
QS_SCALE = np.float32(0.125)
W = np.array([1, -2, 0.5, 3.25], np.float32).reshape(2, 2)


def want_qw():
    return ((QW.astype(np.float32) - QW_ZPS.astype(np.float32)[:, None]) *
            QW_SCALES[:, None]).astype(np.float32)


def want_qs():
    return (QS.astype(np.float32) * QS_SCALE).astype(np.float32)


def v2_file(tmp_path):
    blob, _ = sample_v2().build()
    p = tmp_path / "q.oinf"
    p.write_bytes(blob)
    return p, blob


def test_oinf_v2_read_f32_is_dequantized(tbx, tmp_path):
    p, _ = v2_file(tmp_path)
    r = run(tbx, "cat", p, "qw", "--as", "f32")
    assert r.rc == 0, r.describe()
    assert r.out == want_qw().tobytes()
    r = run(tbx, "cat", p, "qs", "--as", "f32")
    assert r.rc == 0, r.describe()
    assert r.out == want_qs().tobytes()
    # the stored codes stay available as they are
    r = run(tbx, "cat", p, "qw")
    assert r.rc == 0, r.describe()
    assert r.out == QW.tobytes()
    # `tbx info --stats` shows the values (not the codes), as reals
    r = run(tbx, "info", p, "--stats")
    assert r.rc == 0, r.describe()
    text = r.out.decode()
    for name, dt, want in (("qw", "i8[2, 3]", want_qw()), ("qs", "u4[3]", want_qs())):
        line = f"{name}: {dt} = {{ " + ", ".join("%.6g" % v for v in want.reshape(-1)) + " }"
        assert line in text, (line, text)


def test_oinf_v2_to_v2_keeps_the_payloads(tbx, tmp_path):
    p, blob = v2_file(tmp_path)
    out = tmp_path / "same.oinf"
    r = run(tbx, "convert", p, out, "--format-version", "2")
    assert r.rc == 0, r.describe()
    assert out.read_bytes() == blob


def test_quantized_tensor_refused_without_dequantize(tbx, tmp_path):
    p, _ = v2_file(tmp_path)
    for name, extra in (("x.safetensors", ()), ("x.gguf", ()), ("x.zt", ()),
                        ("v1.oinf", ("--format-version", "1"))):
        out = tmp_path / name
        r = run(tbx, "convert", p, out, *extra)
        assert r.rc == 1, r.describe()
        assert b'"qs"' in r.err and b"--dequantize" in r.err, r.describe()
        assert not out.exists()


def test_oinf_v2_dequantized_to_safetensors(tbx, tmp_path):
    p, _ = v2_file(tmp_path)
    out = tmp_path / "d.safetensors"
    r = run(tbx, "convert", p, out, "--dequantize")
    assert r.rc == 0, r.describe()
    got = stn.load_file(str(out))
    assert sorted(got) == ["qs", "qw", "w"]
    assert got["qw"].dtype == np.float32 and got["qw"].tobytes() == want_qw().tobytes()
    assert got["qs"].tobytes() == want_qs().tobytes()
    assert got["w"].tobytes() == W.tobytes()
    # --cast applies to the dequantized values too
    out16 = tmp_path / "d16.safetensors"
    r = run(tbx, "convert", p, out16, "--dequantize", "--cast", "f16")
    assert r.rc == 0, r.describe()
    got = stn.load_file(str(out16))
    assert got["qw"].dtype == np.float16
    assert got["qw"].tobytes() == want_qw().astype(np.float16).tobytes()


def test_oinf_v2_dequantized_to_v1_read_by_the_reference(tbx, tmp_path):
    p, _ = v2_file(tmp_path)
    out = tmp_path / "v1.oinf"
    r = run(tbx, "convert", p, out, "--format-version", "1", "--dequantize")
    assert r.rc == 0, r.describe()
    blob = out.read_bytes()
    with contextlib.redirect_stdout(io.StringIO()):
        oinf_verify.parse_file(str(out))        # the reference accepts the file
    tables = parse_tables(blob)
    assert tables["version"] == 1
    by = {t["name"]: t for t in tables["tensors"]}
    assert ref_tensor_values(blob, by["qw"]).astype(np.float32).tobytes() == want_qw().tobytes()
    assert ref_tensor_values(blob, by["qs"]).astype(np.float32).tobytes() == want_qs().tobytes()


def test_ztensor_quantized_group(tbx, tmp_path):
    rows, cols, bits, group, per = 3, 10, 3, 4, 10
    rng = np.random.default_rng(7)
    codes = [int(c) for c in rng.integers(0, 1 << bits, size=rows * cols)]
    ngroups = rows * -(-cols // group)
    scales = [float(np.float32(s)) for s in rng.uniform(-2, 2, size=ngroups)]
    zeros = [float(np.float16(z)) for z in rng.uniform(0, 7, size=ngroups)]
    src = tmp_path / "qg.zt"
    src.write_bytes(qgroup_file(codes, scales, zeros, (rows, cols), bits, group, per))
    c = np.asarray(codes, np.float32).reshape(rows, cols)
    g = np.arange(rows)[:, None] * -(-cols // group) + np.arange(cols)[None, :] // group
    want = ((c - np.asarray(zeros, np.float32)[g]) * np.asarray(scales, np.float32)[g])
    want = want.astype(np.float32)
    # zTensor -> zTensor keeps the quantized_group object: the same components (bytes), the
    # same description, the same values; the peer sees the same object in both files
    kept = tmp_path / "kept.zt"
    r = run(tbx, "convert", src, kept)
    assert r.rc == 0, r.describe()
    a, b = info_json(tbx, src)["tensors"][0], info_json(tbx, kept)["tensors"][0]
    assert b["layout"] == "quantized_group" and b["quant"] == a["quant"]
    assert [(c["name"], c["dtype"], c["nbytes"]) for c in a["components"]] == \
        [(c["name"], c["dtype"], c["nbytes"]) for c in b["components"]]
    ra, rb = run(tbx, "cat", src, "qg"), run(tbx, "cat", kept, "qg")
    assert ra.rc == 0 and rb.rc == 0 and ra.out == rb.out, rb.describe()
    r = run(tbx, "cat", kept, "qg", "--as", "f32")
    assert r.rc == 0 and r.out == want.tobytes(), r.describe()
    pa, pb = ztensor.Reader(str(src)), ztensor.Reader(str(kept))
    assert tuple(pa.metadata("qg").shape) == tuple(pb.metadata("qg").shape) == (rows, cols)
    # ... also compressed, with digests (each component on its own)
    kz = tmp_path / "kept_z.zt"
    r = run(tbx, "convert", src, kz, "--compress", "3", "--digest", "crc32c")
    assert r.rc == 0, r.describe()
    assert run(tbx, "validate", kz).rc == 0
    r = run(tbx, "cat", kz, "qg", "--as", "f32")
    assert r.rc == 0 and r.out == want.tobytes(), r.describe()
    # the other targets cannot store it: refused, or dequantized (the object's attributes are
    # metadata "ztensor.attributes.qg", a MAP: --drop-meta for the targets that cannot type it)
    for name in ("qg.safetensors", "qg.gguf"):
        out = tmp_path / name
        r = run(tbx, "convert", src, out, "--drop-meta")
        assert r.rc == 1 and b'"qg"' in r.err and b"--dequantize" in r.err, r.describe()
        assert not out.exists()
    out = tmp_path / "qg.safetensors"
    r = run(tbx, "convert", src, out, "--dequantize", "--drop-meta")
    assert r.rc == 0, r.describe()
    got = stn.load_file(str(out))["qg"]
    assert got.shape == (rows, cols) and got.tobytes() == want.tobytes()
    out = tmp_path / "qg.oinf"
    r = run(tbx, "convert", src, out, "--dequantize", "--drop-meta", "--format-version", "2")
    assert r.rc == 0, r.describe()
    r = run(tbx, "cat", out, "qg", "--as", "f32")
    assert r.rc == 0 and r.out == want.tobytes(), r.describe()
    # --dequantize applies to every quantized tensor, also where the target could store the
    # quantization (issue 19: it used to be ignored then, without a word)
    out = tmp_path / "qg2.zt"
    r = run(tbx, "convert", src, out, "--dequantize")
    assert r.rc == 0, r.describe()
    t = info_json(tbx, out)["tensors"][0]
    assert "quant" not in t and t["dtype"] == "f32" and t.get("layout", "dense") == "dense", t
    r = run(tbx, "cat", out, "qg", "--as", "f32")
    assert r.rc == 0 and r.out == want.tobytes(), r.describe()


def test_gguf_block_type_dequantized_to_safetensors(tbx, tmp_path):
    rng = np.random.default_rng(11)
    a = rng.standard_normal((4, 64)).astype(np.float32)
    QT = gguf.GGMLQuantizationType
    q8 = gguf.quants.quantize(a, QT.Q8_0)

    def fill(w):
        w.add_tensor("q", q8, raw_dtype=QT.Q8_0)
        w.add_tensor("f", a)
    src = write_gguf(tmp_path / "q.gguf", fill)
    out = tmp_path / "q.safetensors"
    r = run(tbx, "convert", src, out, "--drop-meta")
    assert r.rc == 1 and b'"q"' in r.err and b"--dequantize" in r.err, r.describe()
    r = run(tbx, "convert", src, out, "--drop-meta", "--dequantize")
    assert r.rc == 0, r.describe()
    got = stn.load_file(str(out))
    want = gguf.quants.dequantize(q8, QT.Q8_0).astype(np.float32).reshape(4, 64)
    assert got["q"].tobytes() == want.tobytes()
    assert got["f"].tobytes() == a.tobytes()
    # GGUF -> GGUF keeps the block type and its bytes
    out2 = tmp_path / "same.gguf"
    r = run(tbx, "convert", src, out2)
    assert r.rc == 0, r.describe()
    rd = gguf.GGUFReader(str(out2))
    t = next(t for t in rd.tensors if t.name == "q")
    assert t.tensor_type == QT.Q8_0 and bytes(t.data.tobytes()) == q8.tobytes()


def test_quant_struct_sanity():
    # the builder's v2 payload of qw is what the constants above say (guards the test data)
    blob, _ = sample_v2().build()
    tables = parse_tables(blob)
    by = {t["name"]: t for t in tables["tensors"]}
    raw = blob[by["qw"]["offset"]:by["qw"]["offset"] + 6]
    assert struct.unpack("<6b", raw) == tuple(QW.reshape(-1))
