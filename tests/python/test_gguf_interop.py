"""tensorbox <-> gguf-py (PyPI `gguf`) interoperability.

Direction 1: files written by gguf.GGUFWriter (every metadata type, arrays and nested arrays,
every tensor type gguf-py can emit, raw bytes for the block types, custom alignments,
big-endian files) must read identically through `tbx info --json [--types]` and `tbx cat`:
same keys in the same order, same types and values, same tensor names, row-major shapes,
dtypes, absolute offsets, sizes and bytes as gguf.GGUFReader sees them.

Direction 2: files written by tensorbox (`tbx convert` from safetensors and from GGUF) must
read identically with gguf.GGUFReader, and be byte-identical to what GGUFWriter writes for the
same content.
"""
from __future__ import annotations

import json
import math
import os
import struct
from pathlib import Path

import pytest

from conftest import assert_clean_exit, info_json, need, run, write_gguf

np = need("numpy")
gguf = need("gguf")

VT = gguf.GGUFValueType
QT = gguf.GGMLQuantizationType

# GGUF value type -> tbx value type name
VT_NAME = {
    VT.UINT8: "u8", VT.INT8: "i8", VT.UINT16: "u16", VT.INT16: "i16", VT.UINT32: "u32",
    VT.INT32: "i32", VT.FLOAT32: "f32", VT.BOOL: "bool", VT.STRING: "string", VT.ARRAY: "array",
    VT.UINT64: "u64", VT.INT64: "i64", VT.FLOAT64: "f64",
}

# gguf-py's Q8_1 block size (40 bytes, the pre-2023 layout with f32 d and s) disagrees with
# ggml's (36: fp16 d and s), which tensorbox follows; such files cannot agree on sizes.
RAW_TYPES = [t for t in gguf.GGML_QUANT_SIZES
             if t not in (QT.F32, QT.F16, QT.F64, QT.I8, QT.I16, QT.I32, QT.I64, QT.Q8_1)]


def tbx_dtype_name(qt) -> str:
    return qt.name.lower()


def info_types(tbx, path) -> dict:
    r = run(tbx, "info", path, "--json", "--types")
    assert r.rc == 0, r.describe()
    return json.loads(r.out.decode("utf-8"))


def cat(tbx, path, name) -> bytes:
    r = run(tbx, "cat", path, name)
    assert r.rc == 0, r.describe()
    return r.out


def validate_ok(tbx, path):
    r = run(tbx, "validate", path)
    assert_clean_exit(r)
    assert r.rc == 0, r.describe()


def same_number(a, b, vt) -> bool:
    """Compares a JSON-parsed number with a reference value in the precision of `vt`."""
    if isinstance(a, str):  # non-finite floats are printed as strings
        a = float(a)
    if vt == VT.FLOAT32:
        x, y = np.float32(a), np.float32(b)
        return (math.isnan(x) and math.isnan(y)) or x == y
    if vt == VT.FLOAT64:
        return (math.isnan(a) and math.isnan(b)) or float(a) == float(b)
    if vt == VT.BOOL:
        return bool(a) == bool(b)
    return int(a) == int(b)


def same_value(got, want, vt, sub=None) -> bool:
    if vt == VT.ARRAY:
        if not isinstance(got, list) or len(got) != len(want):
            return False
        if sub is None:
            sub = VT.get_type(want[0]) if want else VT.UINT8
        return all(same_value(g, w, sub) for g, w in zip(got, want))
    if vt == VT.STRING:
        return got == (want.decode("utf-8") if isinstance(want, bytes) else want)
    return same_number(got, want, vt)


# ------------------------------------------------------------------------------------------
# Direction 1: GGUFWriter -> tbx
# ------------------------------------------------------------------------------------------
# key -> (value, type, sub_type)
META = {
    "t.u8": (255, VT.UINT8, None),
    "t.i8": (-128, VT.INT8, None),
    "t.u16": (65535, VT.UINT16, None),
    "t.i16": (-32768, VT.INT16, None),
    "t.u32": (2**32 - 1, VT.UINT32, None),
    "t.i32": (-2**31, VT.INT32, None),
    "t.u64": (2**64 - 1, VT.UINT64, None),
    "t.i64": (-2**63, VT.INT64, None),
    "t.f32": (0.1, VT.FLOAT32, None),
    "t.f32_inf": (float("inf"), VT.FLOAT32, None),
    "t.f32_tiny": (1e-45, VT.FLOAT32, None),
    "t.f64": (-1.0000000000000002, VT.FLOAT64, None),
    "t.f64_big": (1.7976931348623157e308, VT.FLOAT64, None),
    "t.bool_t": (True, VT.BOOL, None),
    "t.bool_f": (False, VT.BOOL, None),
    "t.str": ("h\u00e9llo \u4e16\u754c \U0001f600", VT.STRING, None),
    "t.str_nul": ("a\x00b\x00", VT.STRING, None),
    "t.arr_u8": ([0, 1, 255], VT.ARRAY, VT.UINT8),
    "t.arr_i8": ([-128, 127], VT.ARRAY, VT.INT8),
    "t.arr_u16": ([65535, 0], VT.ARRAY, VT.UINT16),
    "t.arr_i16": ([-32768, 5], VT.ARRAY, VT.INT16),
    "t.arr_u32": ([2**32 - 1], VT.ARRAY, VT.UINT32),
    "t.arr_i32": ([1, -2, 3], VT.ARRAY, VT.INT32),
    "t.arr_u64": ([2**64 - 1, 0], VT.ARRAY, VT.UINT64),
    "t.arr_i64": ([-2**63, 2**63 - 1], VT.ARRAY, VT.INT64),
    "t.arr_f32": ([0.5, -1.25, 3.4028234663852886e38], VT.ARRAY, VT.FLOAT32),
    "t.arr_f64": ([1e-300, -0.0], VT.ARRAY, VT.FLOAT64),
    "t.arr_bool": ([True, False, True], VT.ARRAY, VT.BOOL),
    "t.arr_str": (["a", "", "ccc", "\u00e9"], VT.ARRAY, VT.STRING),
}
NESTED = {
    "t.nested_i32": [[1, 2], [3]],
    "t.nested_str": [["x"], ["y", "z"]],
    "t.nested3": [[[1.5]], [[2.5, 3.5]]],
}


def fill_meta(w):
    for k, (v, vt, sub) in META.items():
        w.add_key_value(k, v, vt, sub_type=sub)
    for k, v in NESTED.items():
        w.add_array(k, v)


def test_metadata_every_type(tbx, tmp_path):
    p = write_gguf(tmp_path / "meta.gguf", fill_meta)
    validate_ok(tbx, p)
    doc = info_types(tbx, p)
    assert doc["format"] == "gguf" and doc["version"] == 3
    meta = doc["metadata"]
    reader = gguf.GGUFReader(str(p))
    want_keys = [k for k in reader.fields if not k.startswith("GGUF.")]
    assert list(meta) == want_keys, "keys and their order"
    assert meta["general.architecture"] == {"type": "string", "value": "test"}
    for k, (v, vt, sub) in META.items():
        got = meta[k]
        assert got["type"] == VT_NAME[vt], k
        if vt == VT.ARRAY:
            assert got["elem"] == VT_NAME[sub], k
        assert same_value(got["value"], v, vt, sub), (k, got, v)
        # and gguf-py's reader agrees on the type
        assert reader.fields[k].types[0] == vt
    for k, v in NESTED.items():
        got = meta[k]
        assert got["type"] == "array" and got["elem"] == "array", k
        flat_types = reader.fields[k].types
        assert flat_types[0] == VT.ARRAY and flat_types[1] == VT.ARRAY

        def cmp(g, w):
            if isinstance(w, list):
                return isinstance(g, list) and len(g) == len(w) and all(map(cmp, g, w))
            return same_value(g, w, VT.get_type(w))
        assert cmp(got["value"], v), (k, got, v)
    # plain --json: the values without types
    plain = info_json(tbx, p)["metadata"]
    assert plain["t.u64"] == 2**64 - 1
    assert plain["t.str_nul"] == "a\x00b\x00"
    assert plain["t.nested_str"] == [["x"], ["y", "z"]]


def check_tensors_match_reader(tbx, path):
    """tbx info / tbx cat agree with GGUFReader on every tensor."""
    doc = info_json(tbx, path)
    reader = gguf.GGUFReader(str(path))
    got = doc["tensors"]
    assert [t["name"] for t in got] == [t.name for t in reader.tensors]
    for t, rt in zip(got, reader.tensors):
        assert t["dtype"] == tbx_dtype_name(rt.tensor_type), t["name"]
        assert t["shape"] == [int(x) for x in reversed(rt.shape.tolist())], t["name"]
        assert t["offset"] == rt.data_offset, t["name"]
        assert t["nbytes"] == rt.n_bytes, t["name"]
        if reader.byte_order == "I":
            assert cat(tbx, path, t["name"]) == rt.data.tobytes(), t["name"]
    return doc, reader


def test_tensor_types_numpy(tbx, tmp_path):
    rng = np.random.default_rng(1)

    def fill(w):
        w.add_tensor("f32", rng.standard_normal((3, 5)).astype(np.float32))
        w.add_tensor("f16", rng.standard_normal((2, 2, 3)).astype(np.float16))
        w.add_tensor("f64", rng.standard_normal(7))
        w.add_tensor("i8", rng.integers(-128, 128, size=(4, 1), dtype=np.int8))
        w.add_tensor("i16", rng.integers(-2**15, 2**15, size=9, dtype=np.int16))
        w.add_tensor("i32", rng.integers(-2**31, 2**31, size=(1, 1, 1, 3), dtype=np.int32))
        w.add_tensor("i64", np.array([-2**63, 2**63 - 1], dtype=np.int64))
        w.add_tensor("scalar", np.array(2.5, dtype=np.float32))
        w.add_tensor("empty", np.zeros((0, 3), dtype=np.float32))
    p = write_gguf(tmp_path / "np.gguf", fill)
    validate_ok(tbx, p)
    doc, _ = check_tensors_match_reader(tbx, p)
    by = {t["name"]: t for t in doc["tensors"]}
    assert by["scalar"]["shape"] == [] and by["empty"]["shape"] == [0, 3]
    assert by["f16"]["shape"] == [2, 2, 3]


@pytest.mark.parametrize("qt", RAW_TYPES, ids=lambda q: q.name)
def test_tensor_types_raw(tbx, tmp_path, qt):
    block, size = gguf.GGML_QUANT_SIZES[qt]
    rng = np.random.default_rng(int(qt))
    raw = rng.integers(0, 256, size=(3, 2 * size), dtype=np.uint8)
    raw1 = rng.integers(0, 256, size=(size,), dtype=np.uint8)

    def fill(w):
        w.add_tensor("m", raw, raw_dtype=qt)
        w.add_tensor("v", raw1, raw_dtype=qt)
    p = write_gguf(tmp_path / "raw.gguf", fill)
    validate_ok(tbx, p)
    doc, _ = check_tensors_match_reader(tbx, p)
    assert doc["tensors"][0]["shape"] == [3, 2 * block]
    assert doc["tensors"][1]["shape"] == [block]
    assert cat(tbx, p, "m") == raw.tobytes()


@pytest.mark.parametrize("align", [1, 8, 64, 128, 4096])
def test_custom_alignment(tbx, tmp_path, align):
    def fill(w):
        w.add_custom_alignment(align)
        w.add_tensor("a", np.arange(3, dtype=np.float32))
        w.add_tensor("b", np.arange(5, dtype=np.float16))
        w.add_tensor("c", np.arange(1, dtype=np.int8))
    p = write_gguf(tmp_path / f"a{align}.gguf", fill)
    validate_ok(tbx, p)
    doc, reader = check_tensors_match_reader(tbx, p)
    assert info_types(tbx, p)["metadata"]["general.alignment"] == {"type": "u32", "value": align}
    for t in doc["tensors"]:
        assert (t["offset"] - reader.data_offset) % align == 0


def test_big_endian_file(tbx, tmp_path):
    f32 = np.array([1.0, -2.5, 3e38], dtype=np.float32)
    f16 = np.array([1.0, -0.5], dtype=np.float16)
    i32 = np.array([1, -2, 2**31 - 1], dtype=np.int32)

    def fill(w):
        w.add_uint32("be.u32", 0x01020304)
        w.add_uint64("be.u64", 2**64 - 2)
        w.add_array("be.arr", [1.5, -2.0])
        w.add_array("be.strs", ["big", "endian"])
        w.add_tensor("f32", f32)
        w.add_tensor("f16", f16)
        w.add_tensor("i32", i32)
    p = write_gguf(tmp_path / "be.gguf", fill, endianess=gguf.GGUFEndian.BIG)
    raw = p.read_bytes()
    assert raw[4:8] == struct.pack(">I", 3)
    validate_ok(tbx, p)
    doc = info_types(tbx, p)
    assert doc["version"] == 3
    m = doc["metadata"]
    assert m["be.u32"] == {"type": "u32", "value": 0x01020304}
    assert m["be.u64"] == {"type": "u64", "value": 2**64 - 2}
    assert m["be.arr"]["value"] == [1.5, -2.0]
    assert m["be.strs"]["value"] == ["big", "endian"]
    reader = gguf.GGUFReader(str(p))
    assert reader.byte_order == "S"
    tens = {t["name"]: t for t in doc["tensors"]}
    for rt in reader.tensors:
        assert tens[rt.name]["offset"] == rt.data_offset
        assert tens[rt.name]["shape"] == [int(x) for x in reversed(rt.shape.tolist())]
    # tensorbox hands out little-endian bytes
    assert cat(tbx, p, "f32") == f32.astype("<f4").tobytes()
    assert cat(tbx, p, "f16") == f16.astype("<f2").tobytes()
    assert cat(tbx, p, "i32") == i32.astype("<i4").tobytes()


def test_no_tensors_and_v2(tbx, tmp_path):
    p = write_gguf(tmp_path / "empty.gguf", lambda w: w.add_uint8("k", 7))
    validate_ok(tbx, p)
    doc = info_json(tbx, p)
    assert doc["tensors"] == [] and doc["metadata"]["k"] == 7
    # a v2 file is a v3 little-endian file with another version number
    src = write_gguf(tmp_path / "v3.gguf",
                     lambda w: w.add_tensor("x", np.arange(4, dtype=np.float32)))
    b = bytearray(src.read_bytes())
    b[4:8] = struct.pack("<I", 2)
    v2 = tmp_path / "v2.gguf"
    v2.write_bytes(bytes(b))
    validate_ok(tbx, v2)
    assert info_json(tbx, v2)["version"] == 2
    check_tensors_match_reader(tbx, v2)


# ------------------------------------------------------------------------------------------
# Direction 2: tbx -> GGUFReader, byte identity with GGUFWriter
# ------------------------------------------------------------------------------------------
def convert(tbx, src, dst, *extra):
    r = run(tbx, "convert", src, dst, "--force", *extra)
    assert_clean_exit(r)
    assert r.rc == 0, r.describe()
    return dst


def reader_meta(reader) -> dict:
    out = {}
    for k, f in reader.fields.items():
        if k.startswith("GGUF."):
            continue
        out[k] = (f.types, f.contents())
    return out


def test_gguf_to_gguf_is_byte_identical(tbx, tmp_path):
    rng = np.random.default_rng(7)

    def fill(w):
        fill_meta(w)
        w.add_tensor("w", rng.standard_normal((4, 8)).astype(np.float32))
        w.add_tensor("q", rng.integers(0, 256, size=(2, 34), dtype=np.uint8),
                     raw_dtype=QT.Q8_0)
        w.add_tensor("k", rng.integers(0, 256, size=(1, 210), dtype=np.uint8),
                     raw_dtype=QT.Q6_K)
        w.add_tensor("s", np.array(1.0, dtype=np.float32))
        w.add_tensor("e", np.zeros((0,), dtype=np.float16))
        w.add_tensor("i", np.arange(3, dtype=np.int64))
    src = write_gguf(tmp_path / "src.gguf", fill)
    dst = convert(tbx, src, tmp_path / "dst.gguf")
    assert dst.read_bytes() == src.read_bytes()
    # and with a custom alignment recorded in the file
    src64 = write_gguf(tmp_path / "src64.gguf",
                       lambda w: (w.add_custom_alignment(64), fill(w)))
    dst64 = convert(tbx, src64, tmp_path / "dst64.gguf")
    assert dst64.read_bytes() == src64.read_bytes()


def test_convert_alignment_option(tbx, tmp_path):
    src = write_gguf(tmp_path / "src.gguf",
                     lambda w: (w.add_tensor("a", np.arange(3, dtype=np.float32)),
                                w.add_tensor("b", np.arange(5, dtype=np.float32))))
    dst = convert(tbx, src, tmp_path / "dst.gguf", "--alignment", "256")
    reader = gguf.GGUFReader(str(dst))
    assert reader.alignment == 256
    for t in reader.tensors:
        assert (t.data_offset - reader.data_offset) % 256 == 0
    np.testing.assert_array_equal(reader.tensors[1].data, np.arange(5, dtype=np.float32))
    # the same file from GGUFWriter: general.alignment appended after the source's keys
    ref = write_gguf(tmp_path / "ref.gguf",
                     lambda w: (w.add_tensor("a", np.arange(3, dtype=np.float32)),
                                w.add_tensor("b", np.arange(5, dtype=np.float32)),
                                w.add_custom_alignment(256)))
    assert dst.read_bytes() == ref.read_bytes()


ST_DTYPE = {np.dtype(np.float32): "F32", np.dtype(np.float16): "F16", np.dtype(np.float64): "F64",
            np.dtype(np.int8): "I8", np.dtype(np.int16): "I16", np.dtype(np.int32): "I32",
            np.dtype(np.int64): "I64"}


def st_file(path: Path, tensors: dict, meta: dict) -> Path:
    """A safetensors file with metadata and tensors in exactly the given order."""
    header = {"__metadata__": meta}
    data = b""
    for name, arr in tensors.items():
        b = np.ascontiguousarray(arr).astype(arr.dtype.newbyteorder("<")).tobytes()
        header[name] = {"dtype": ST_DTYPE[arr.dtype], "shape": list(arr.shape),
                        "data_offsets": [len(data), len(data) + len(b)]}
        data += b
    from conftest import st_build
    path.write_bytes(st_build(header, data))
    return path


def test_safetensors_to_gguf(tbx, tmp_path):
    rng = np.random.default_rng(3)
    tensors = {
        "tok_embd.weight": rng.standard_normal((6, 4)).astype(np.float32),
        "norm.weight": rng.standard_normal(4).astype(np.float16),
        "ids": rng.integers(-5, 5, size=(2, 3), dtype=np.int32),
        "bytes": rng.integers(-128, 128, size=5, dtype=np.int8),
        "wide": rng.integers(-2**40, 2**40, size=2, dtype=np.int64),
        "dbl": rng.standard_normal((1, 2, 2)),
        "scalar": np.array(4.0, dtype=np.float32),
    }
    meta = {"general.architecture": "test", "general.name": "tiny \u00e9"}
    st = st_file(tmp_path / "m.safetensors", tensors, meta)
    out = convert(tbx, st, tmp_path / "m.gguf")
    validate_ok(tbx, out)
    reader = gguf.GGUFReader(str(out))
    rm = reader_meta(reader)
    assert list(rm) == list(meta)
    assert rm["general.architecture"][1] == "test"
    assert rm["general.name"] == ([VT.STRING], "tiny \u00e9")
    got = {t.name: t for t in reader.tensors}
    assert list(got) == list(tensors)
    for name, arr in tensors.items():
        t = got[name]
        assert tuple(int(x) for x in reversed(t.shape.tolist())) == arr.shape, name
        np.testing.assert_array_equal(np.asarray(t.data).reshape(arr.shape), arr, err_msg=name)

    # byte identity: GGUFWriter fed the same keys and tensors in the same order
    def fill(w):
        w.add_string("general.name", meta["general.name"])
        for name, arr in tensors.items():
            w.add_tensor(name, arr)
    ref = write_gguf(tmp_path / "ref.gguf", fill, arch=meta["general.architecture"])
    assert out.read_bytes() == ref.read_bytes()


def test_gguf_to_safetensors_and_back(tbx, tmp_path):
    arr = np.arange(12, dtype=np.float32).reshape(3, 4)
    src = write_gguf(tmp_path / "s.gguf", lambda w: w.add_tensor("x", arr))
    st = convert(tbx, src, tmp_path / "s.safetensors")
    back = convert(tbx, st, tmp_path / "back.gguf")
    reader = gguf.GGUFReader(str(back))
    np.testing.assert_array_equal(reader.tensors[0].data, arr)
    assert reader_meta(reader)["general.architecture"][1] == "test"


def test_tbx_written_file_reads_in_gguf_py_with_every_type(tbx, tmp_path):
    """A GGUFWriter file converted by tbx reads identically with GGUFReader."""
    src = write_gguf(tmp_path / "src.gguf", fill_meta)
    dst = convert(tbx, src, tmp_path / "dst.gguf")
    a, b = gguf.GGUFReader(str(src)), gguf.GGUFReader(str(dst))
    ma, mb = reader_meta(a), reader_meta(b)
    assert list(ma) == list(mb)
    for k in ma:
        assert ma[k][0] == mb[k][0], k
        va, vb = ma[k][1], mb[k][1]
        if isinstance(va, float) and math.isnan(va):
            assert math.isnan(vb)
        else:
            assert va == vb, k
