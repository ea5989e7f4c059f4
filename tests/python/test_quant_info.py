"""`tbx info --json` shows one "quant" object per quantized tensor, with the same schema for
every format (tbx_tensor_quant_get, docs/cli.md).

Expected values never come from tbx's own output:
- GGUF: files written by gguf-py's GGUFWriter for every block type it knows; the type id, name,
  block and bytes per block come from gguf-py's own tables (GGMLQuantizationType,
  GGML_QUANT_SIZES, QK_K).
- OINF v2: no peer writes version 2 (openinfer-oinf 0.1.1 reads and writes v1 only), so the file
  is built byte by byte by the independent builder of test_oinf_malformed.py; the expected
  parameters are the builder's inputs.
- zTensor quantized_group: the ztensor package has no quantized_group writer, so the file is
  built with the independent CBOR encoder (filebuild.py); the expected description is the
  manifest's attributes, and `tbx cat --as f32` (the split-layout kernel) is checked against
  numpy's own dequantization of the same codes.
"""
from __future__ import annotations

import struct

import pytest

from conftest import info_json, need, run, write_gguf
from filebuild import cbor

gguf = need("gguf")
np = need("numpy")
QT = gguf.GGMLQuantizationType

PLAIN = (QT.F32, QT.F16, QT.F64, QT.BF16, QT.I8, QT.I16, QT.I32, QT.I64)
# gguf-py's Q8_1 block (40 bytes, an old layout) disagrees with ggml's 36 (tensorbox follows
# ggml), so a Q8_1 file from gguf-py cannot be read (see test_gguf_interop.py).
BLOCK_TYPES = [t for t in gguf.GGML_QUANT_SIZES if t not in PLAIN and t != QT.Q8_1]


def test_gguf_block_types_from_gguf_py(tbx, tmp_path):
    rng = np.random.default_rng(10)

    def fill(w):
        for qt in BLOCK_TYPES:
            block, size = gguf.GGML_QUANT_SIZES[qt]
            w.add_tensor(qt.name, rng.integers(0, 256, size=(2, 2 * size), dtype=np.uint8),
                         raw_dtype=qt)
        w.add_tensor("plain", np.zeros((2, 3), np.float32))
    p = write_gguf(tmp_path / "q.gguf", fill)
    doc = info_json(tbx, p)
    by = {t["name"]: t for t in doc["tensors"]}
    assert "quant" not in by["plain"]
    assert len(BLOCK_TYPES) >= 20
    for qt in BLOCK_TYPES:
        block, size = gguf.GGML_QUANT_SIZES[qt]
        q = by[qt.name]["quant"]
        assert q["method"] == "ggml", qt
        assert q["code_dtype"] == qt.name.lower()
        assert q["params"] == {"ggml_type": int(qt), "block_bytes": size}, qt
        # the self-contained ggml block is the super-block when there is one
        assert (q["super_block_size"] or q["block_size"]) == block, (qt, q)
        assert block % q["block_size"] == 0
        if qt.name.endswith("_K") and qt != QT.Q8_K:
            assert q["super_block_size"] == gguf.QK_K and q["block_size"] < gguf.QK_K, (qt, q)
        assert q["scale"] == {"scope": "block", "dtype": q["scale"]["dtype"]}
        assert q["zero"]["scope"] in ("none", "block")
        assert q["domain"] == "unspecified" and q["clip"] is None
        assert 1 <= q["bits"] <= 8
    # the nominal code widths that the type names spell out
    for qt in BLOCK_TYPES:
        n = qt.name
        if n[0] == "Q" and n[1].isdigit():
            assert by[n]["quant"]["bits"] == int(n[1]), n
    # what ggml's block structs carry: a minimum in q4_1 / q5_1 / q2_K / q4_K / q5_K
    for n in ("Q4_1", "Q5_1", "Q2_K", "Q4_K", "Q5_K"):
        assert by[n]["quant"]["zero"] == {"scope": "block", "dtype": "f16"}, n
    for n in ("Q4_0", "Q8_0", "Q3_K", "Q6_K"):
        assert by[n]["quant"]["zero"] == {"scope": "none"}, n
    # text summary: the short form in the STORAGE column
    r = run(tbx, "info", p)
    assert r.rc == 0, r.describe()
    line = next(ln for ln in r.out.decode().splitlines() if ln.strip().startswith("Q4_K "))
    assert "ggml 4-bit b32/256" in line, line




def test_oinf_v2_quant_payloads(tbx, tmp_path):
    from test_oinf_malformed import sample_v2
    blob, _ = sample_v2().build()
    p = tmp_path / "q.oinf"
    p.write_bytes(blob)
    doc = info_json(tbx, p)
    by = {t["name"]: t for t in doc["tensors"]}
    # the builder's inputs: qw i8 [2, 3], scheme 2 (asymmetric), per-channel scales [0.5, 0.25]
    # and zero points [3, -7] on axis 0; qs u4 [3], symmetric, one scale 0.125
    assert by["qw"]["quant"] == {
        "method": "linear", "code_dtype": "i8", "bits": 8, "signed": True,
        "block_size": 0, "super_block_size": 0,
        "scale": {"scope": "channel", "dtype": "f32", "axis": 0, "count": 2,
                  "values": [0.5, 0.25]},
        "zero": {"scope": "channel", "dtype": "i32", "axis": 0, "count": 2, "values": [3, -7]},
        "domain": "unspecified", "clip": None,
        "params": {"scheme": 2, "scale_mode": 2, "zp_mode": 2}}
    assert by["qs"]["quant"] == {
        "method": "linear", "code_dtype": "u4", "bits": 4, "signed": False,
        "block_size": 0, "super_block_size": 0,
        "scale": {"scope": "tensor", "dtype": "f32", "count": 1, "values": [0.125]},
        "zero": {"scope": "none"},
        "domain": "unspecified", "clip": None,
        "params": {"scheme": 1, "scale_mode": 1, "zp_mode": 0}}
    assert "quant" not in by["w"]
    r = run(tbx, "info", p)
    assert r.rc == 0, r.describe()
    assert "linear 8-bit scale:channel[0] zero:channel[0]" in r.out.decode()


def qgroup_file(codes, scales, zeros, shape, bits, group, per) -> bytes:
    """A zTensor file with one quantized_group tensor: u32 words of `per` codes of `bits` bits
    (LSB first, row-major across rows), f32 scales, f16 zeros; components 64-aligned."""
    nwords = -(-len(codes) // per)
    words = [0] * nwords
    for k, c in enumerate(codes):
        words[k // per] |= c << (bits * (k % per))
    wbytes = struct.pack(f"<{nwords}I", *words)
    sbytes = struct.pack(f"<{len(scales)}f", *scales)
    zbytes = np.asarray(zeros, np.float16).tobytes()
    area, comps = b"", {}
    for role, dt, data in (("packed_weight", "u32", wbytes), ("scales", "f32", sbytes),
                           ("zeros", "f16", zbytes)):
        pad = (-(8 + len(area))) % 64
        area += bytes(pad)
        comps[role] = {"dtype": dt, "offset": 8 + len(area), "length": len(data)}
        area += data
    obj = {"shape": list(shape), "format": "quantized_group", "components": comps,
           "attributes": {"bits": bits, "group_size": group, "packing": f"{per}_per_u32"}}
    manifest = cbor({"version": "1.1.0", "objects": {"qg": obj}})
    return b"ZTEN1000" + area + manifest + struct.pack("<Q", len(manifest)) + b"ZTEN1000"


def test_ztensor_quantized_group(tbx, tmp_path):
    rows, cols, bits, group, per = 3, 10, 3, 4, 10   # 3 groups per row, 2 unused bits a word
    rng = np.random.default_rng(3)
    codes = [int(c) for c in rng.integers(0, 1 << bits, size=rows * cols)]
    ngroups = rows * -(-cols // group)
    scales = [float(np.float32(s)) for s in rng.uniform(-2, 2, size=ngroups)]
    zeros = [float(np.float16(z)) for z in rng.uniform(0, 7, size=ngroups)]
    p = tmp_path / "qg.zt"
    p.write_bytes(qgroup_file(codes, scales, zeros, (rows, cols), bits, group, per))
    doc = info_json(tbx, p)
    q = doc["tensors"][0]["quant"]
    assert q == {
        "method": "linear", "code_dtype": "u32", "bits": bits, "signed": False,
        "block_size": group, "super_block_size": 0,
        "scale": {"scope": "group", "dtype": "f32", "count": ngroups, "component": "scales"},
        "zero": {"scope": "group", "dtype": "f16", "count": ngroups, "component": "zeros"},
        "domain": "unspecified", "clip": None, "params": {"codes_per_word": per}}
    # the values, through the split-layout kernel, against numpy's dequantization
    r = run(tbx, "cat", p, "qg", "--as", "f32")
    assert r.rc == 0, r.describe()
    got = np.frombuffer(r.out, "<f4")
    c = np.asarray(codes, np.float32).reshape(rows, cols)
    g = (np.arange(rows)[:, None] * -(-cols // group) + np.arange(cols)[None, :] // group)
    s = np.asarray(scales, np.float32)[g]
    z = np.asarray(zeros, np.float32)[g]
    want = ((c - z) * s).astype(np.float32).ravel()
    assert got.tobytes() == want.tobytes()
