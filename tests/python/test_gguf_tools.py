"""GGUF tools: `tbx convert --quant`, `tbx validate --ggml`, `tbx gguf set/del/split/merge`.

Files are written with gguf-py's GGUFWriter (or by hand for the rule-breaking ones) and read
back with gguf-py's GGUFReader; quantized tensors are compared with gguf.quants.
"""
from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest

from conftest import assert_clean_exit, need, run, write_gguf

np = need("numpy")
gguf = need("gguf")

QT = gguf.GGMLQuantizationType
VT = gguf.GGUFValueType


def tensors_of(path: Path) -> dict:
    """name -> (tensor_type, row-major shape, raw bytes) as gguf-py reads them."""
    r = gguf.GGUFReader(str(path))
    out = {}
    for t in r.tensors:
        shape = tuple(int(x) for x in reversed(list(t.shape)))
        out[t.name] = (t.tensor_type, shape, bytes(np.asarray(t.data).tobytes()))
    return out


def fields_of(path: Path) -> dict:
    """key -> (types, python value) as gguf-py reads them."""
    r = gguf.GGUFReader(str(path))
    out = {}
    for k, f in r.fields.items():
        if k.startswith("GGUF."):
            continue
        out[k] = (list(f.types), f.contents())
    return out


# ------------------------------------------------------------------------------------------
# convert --quant
# ------------------------------------------------------------------------------------------
EXACT = {"q8_0": QT.Q8_0, "q4_0": QT.Q4_0, "q4_1": QT.Q4_1, "q5_0": QT.Q5_0, "q5_1": QT.Q5_1}
KTYPES = {"q2_k": (QT.Q2_K, 0.45), "q3_k": (QT.Q3_K, 0.25), "q4_k": (QT.Q4_K, 0.12),
          "q5_k": (QT.Q5_K, 0.06), "q6_k": (QT.Q6_K, 0.03)}


@pytest.fixture(scope="module")
def float_model(tmp_path_factory):
    rng = np.random.default_rng(1234)
    d = tmp_path_factory.mktemp("quant")
    arrays = {
        "w32": rng.standard_normal((16, 512)).astype(np.float32),
        "w16": (rng.standard_normal((8, 256)) * 3).astype(np.float16),
        "wide": rng.standard_normal((3, 768)).astype(np.float32),
        "bias": rng.standard_normal(512).astype(np.float32),       # 1-D: unchanged
        "odd": rng.standard_normal((4, 48)).astype(np.float32),     # 48: no whole blocks -> f16
        "cube": rng.standard_normal((2, 4, 256)).astype(np.float32),  # 3-D: unchanged
        "ids": np.arange(64, dtype=np.int32).reshape(2, 32),        # integer: unchanged
    }

    def fill(w):
        w.add_string("general.name", "quant test")
        w.add_uint32("test.count", 7)
        for k, a in arrays.items():
            w.add_tensor(k, a)

    return write_gguf(d / "model.gguf", fill), arrays


def quantize(tbx, src: Path, qname: str, dst: Path):
    r = run(tbx, "convert", src, dst, "--quant", qname)
    assert_clean_exit(r)
    assert r.rc == 0, r.describe()
    return tensors_of(dst)


def block_size(qt) -> int:
    return gguf.GGML_QUANT_SIZES[qt][0]


@pytest.mark.parametrize("qname", sorted(EXACT))
def test_quant_exact_types_match_gguf_py(tbx, float_model, tmp_path, qname):
    src, arrays = float_model
    qt = EXACT[qname]
    out = quantize(tbx, src, qname, tmp_path / f"{qname}.gguf")
    orig = tensors_of(src)
    for name, a in arrays.items():
        ttype, shape, data = out[name]
        eligible = (a.ndim == 2 and a.dtype.kind == "f" and a.shape[1] % block_size(qt) == 0)
        if eligible:
            assert ttype == qt, name
            assert shape == a.shape
            want = gguf.quants.quantize(a.astype(np.float32), qt).tobytes()
            assert data == want, f"{name}: {qname} bytes differ from gguf.quants.quantize"
        elif a.ndim == 2 and a.dtype.kind == "f":
            # rows no 32-block type can take: llama-quantize's last resort, f16
            assert (ttype, shape) == (QT.F16, a.shape), name
            assert data == a.astype(np.float16).tobytes(), name
        else:
            assert (ttype, shape, data) == orig[name], f"{name} changed"
    # metadata survives
    f = fields_of(tmp_path / f"{qname}.gguf")
    assert f["general.name"][1] == "quant test"
    assert f["test.count"][1] == 7


@pytest.mark.parametrize("qname", sorted(KTYPES))
def test_quant_k_types_rmse(tbx, float_model, tmp_path, qname):
    src, arrays = float_model
    qt, bound = KTYPES[qname]
    out = quantize(tbx, src, qname, tmp_path / f"{qname}.gguf")
    orig = tensors_of(src)
    for name, a in arrays.items():
        ttype, shape, data = out[name]
        eligible = (a.ndim == 2 and a.dtype.kind == "f" and a.shape[1] % 256 == 0)
        if not eligible and a.ndim == 2 and a.dtype.kind == "f":
            # 48-wide rows: no K type, nor its 32-block fallback, fits; llama-quantize's f16
            assert (ttype, shape) == (QT.F16, a.shape), name
            assert data == a.astype(np.float16).tobytes(), name
            continue
        if not eligible:
            assert (ttype, shape, data) == orig[name], f"{name} changed"
            continue
        assert ttype == qt and shape == a.shape
        raw = np.frombuffer(data, dtype=np.uint8).reshape(a.shape[0], -1)
        deq = gguf.quants.dequantize(raw, qt).reshape(a.shape)
        x = a.astype(np.float32)
        rel = float(np.sqrt(np.mean((deq - x) ** 2)) / np.sqrt(np.mean(x ** 2)))
        assert rel < bound, f"{name}: {qname} relative RMSE {rel:.4f} >= {bound}"


@pytest.mark.parametrize("qname", sorted(EXACT) + sorted(KTYPES))
def test_cat_as_f32_of_quantized_matches_dequantize(tbx, float_model, tmp_path, qname):
    src, arrays = float_model
    qt = EXACT.get(qname) or KTYPES[qname][0]
    dst = tmp_path / f"{qname}.gguf"
    out = quantize(tbx, src, qname, dst)
    for name in ("w32", "w16", "wide"):
        ttype, shape, data = out[name]
        if ttype != qt:
            continue
        raw = np.frombuffer(data, dtype=np.uint8).reshape(shape[0], -1)
        want = gguf.quants.dequantize(raw, qt).astype(np.float32).tobytes()
        r = run(tbx, "cat", dst, name, "--as", "f32")
        assert r.rc == 0, r.describe()
        assert r.out == want, f"{name}: tbx cat --as f32 differs from gguf.quants.dequantize"


def test_quant_bad_type_is_usage_error(tbx, float_model, tmp_path):
    src, _ = float_model
    r = run(tbx, "convert", src, tmp_path / "x.gguf", "--quant", "q9_9")
    assert r.rc == 2, r.describe()
    assert not (tmp_path / "x.gguf").exists()


def test_quant_to_safetensors_refused(tbx, float_model, tmp_path):
    src, _ = float_model
    r = run(tbx, "convert", src, tmp_path / "x.safetensors", "--quant", "q8_0")
    assert_clean_exit(r)
    assert r.rc == 1, r.describe()
    assert not (tmp_path / "x.safetensors").exists()


# ------------------------------------------------------------------------------------------
# validate --ggml
# ------------------------------------------------------------------------------------------
def g_str(s: bytes) -> bytes:
    return struct.pack("<Q", len(s)) + s


def build_gguf(kvs, tensors, align: int = 32) -> bytes:
    """kvs: [(key, gguf type id, value bytes)]; tensors: [(name, ne (fastest first), ggml
    type, relative offset, data bytes)]. Data is placed at each tensor's declared offset."""
    out = bytearray(b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kvs)))
    for k, t, v in kvs:
        out += g_str(k.encode()) + struct.pack("<I", t) + v
    for name, ne, tt, rel, _ in tensors:
        out += g_str(name.encode()) + struct.pack("<I", len(ne))
        out += b"".join(struct.pack("<Q", n) for n in ne) + struct.pack("<IQ", tt, rel)
    out += b"\0" * (-len(out) % align)
    start = len(out)
    end = max([rel + len(d) for _, _, _, rel, d in tensors] + [0])
    end += -end % align
    data = bytearray(end)
    for _, _, _, rel, d in tensors:
        data[rel:rel + len(d)] = d
    return bytes(out) + bytes(data)


F32 = 0
F32_16 = b"\0" * 64  # 16 f32 zeros


def lint_cases():
    ok_t = ("a", [16], F32, 0, F32_16)
    u32 = lambda v: struct.pack("<I", v)  # noqa: E731
    return {
        "n_dims": ([], [("a", [2, 2, 2, 1, 2], F32, 0, F32_16)], "n_dims"),
        "name": ([], [("n" * 64, [16], F32, 0, F32_16)], "name"),
        "order": ([], [("a", [16], F32, 64, F32_16), ("b", [16], F32, 0, F32_16)], "offset"),
        "nested": ([("x", 9, struct.pack("<IQ", 9, 1) + struct.pack("<IQ", 4, 1) + u32(5))],
                   [ok_t], "array"),
        "alignment": ([("general.alignment", 10, struct.pack("<Q", 32))], [ok_t], "alignment"),
        # llama.cpp's loader: one token per row of token_embd.weight (3 tokens, 2 rows)
        "vocab": ([("tokenizer.ggml.tokens", 9, struct.pack("<IQ", 8, 3) + g_str(b"a") +
                    g_str(b"b") + g_str(b"c"))],
                  [("token_embd.weight", [8, 2], F32, 0, F32_16)], "token_embd.weight"),
    }


@pytest.mark.parametrize("case", sorted(lint_cases()))
def test_validate_ggml_flags_each_rule(tbx, tmp_path, case):
    kvs, ts, word = lint_cases()[case]
    p = tmp_path / f"{case}.gguf"
    p.write_bytes(build_gguf(kvs, ts))
    r = run(tbx, "validate", p)
    # plain validation accepts all but a mistyped general.alignment and more than 4 dimensions
    # (the GGUF specification's own cap, reported by every validation)
    assert r.rc == (1 if case in ("alignment", "n_dims") else 0), r.describe()
    r = run(tbx, "validate", "--ggml", p)
    assert_clean_exit(r)
    assert r.rc == 1, r.describe()
    lines = [ln for ln in r.out.decode().splitlines() if ln.strip()]
    assert lines and all(ln.startswith(f"{p}: ") for ln in lines), r.describe()
    assert word in r.out.decode().lower(), r.describe()
    if case in ("alignment", "n_dims"):  # found by validation itself: reported once, not again
        assert sum(word in ln.lower() for ln in lines) == 1, "one problem, one line\n" + r.describe()
    assert "valid (" not in r.out.decode()
    r = run(tbx, "validate", "--ggml", "--quiet", p)
    assert r.rc == 1 and r.out == b"", r.describe()


def test_validate_ggml_clean_writer_file(tbx, tmp_path):
    def fill(w):
        w.add_string("general.name", "clean")
        w.add_array("tokens", ["a", "b", "c"])
        w.add_tensor("w", np.ones((4, 32), dtype=np.float32))
        w.add_tensor("b", np.ones(32, dtype=np.float16))

    p = write_gguf(tmp_path / "clean.gguf", fill)
    r = run(tbx, "validate", "--ggml", p)
    assert r.rc == 0, r.describe()
    assert r.out.decode().startswith(f"{p}: valid (gguf v3, 2 tensors)")


def test_validate_ggml_non_gguf(tbx, tmp_path):
    from conftest import st_build
    p = tmp_path / "x.safetensors"
    p.write_bytes(st_build({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}},
                           b"\0" * 4))
    r = run(tbx, "validate", "--ggml", p)
    assert r.rc == 1, r.describe()
    assert "ggml" in r.out.decode()


# ------------------------------------------------------------------------------------------
# gguf set / del
# ------------------------------------------------------------------------------------------
@pytest.fixture()
def edit_model(tmp_path):
    rng = np.random.default_rng(7)

    def fill(w):
        w.add_string("general.name", "abcdef")
        w.add_uint32("test.u32", 17)
        w.add_float32("test.f32", 0.5)
        w.add_int64("test.i64", -5)
        w.add_bool("test.flag", True)
        w.add_array("test.tokens", ["x", "yy", "zzz"])
        w.add_tensor("a", rng.standard_normal((4, 32)).astype(np.float32))
        w.add_tensor("b", rng.standard_normal(33).astype(np.float16))
        w.add_tensor("c", np.arange(10, dtype=np.int32))

    return write_gguf(tmp_path / "edit.gguf", fill)


def check_edit(before: dict, tbefore: dict, path: Path, changed: dict, removed=()):
    after = fields_of(path)
    assert tensors_of(path) == tbefore, "tensor bytes changed"
    for k, (types, val) in before.items():
        if k in removed:
            assert k not in after, k
        elif k in changed:
            continue
        else:
            assert after[k] == (types, val), k
    for k, (vt, val) in changed.items():
        assert k in after, k
        assert after[k][0] == [vt], (k, after[k])
        if isinstance(val, float):
            assert after[k][1] == pytest.approx(val, rel=1e-6)
        else:
            assert after[k][1] == val, (k, after[k])
    # order: the keys that stay keep their order
    kept = [k for k in before if k not in removed]
    assert [k for k in after if k in kept] == kept


@pytest.mark.parametrize("kv,vt,val,inplace,extra", [
    ("test.u32=99", VT.UINT32, 99, True, []),
    ("test.f32=2.25", VT.FLOAT32, 2.25, True, []),
    ("test.i64=-123456789012", VT.INT64, -123456789012, True, []),
    ("test.flag=false", VT.BOOL, False, True, []),
    ("general.name=ghijkl", VT.STRING, "ghijkl", True, []),
    ("general.name=a much longer name", VT.STRING, "a much longer name", False, []),
    ("test.u32=70000", VT.UINT16, 70000, False, ["--type", "u16"]),  # refused below
    ("test.u32=-4", VT.INT8, -4, False, ["--type", "i8"]),
    ("test.new=12", VT.UINT32, 12, False, []),
    ("test.newneg=-12", VT.INT32, -12, False, []),
    ("test.newbig=5000000000", VT.UINT64, 5000000000, False, []),
    ("test.newf=1.5", VT.FLOAT32, 1.5, False, []),
    ("test.newb=true", VT.BOOL, True, False, []),
    ("test.news=hello world", VT.STRING, "hello world", False, []),
    ("test.newd=0.1", VT.FLOAT64, 0.1, False, ["--type", "f64"]),
    ("test.tokens=now a string", VT.STRING, "now a string", False, []),
    ("test.u32=5", VT.UINT64, 5, False, ["--type", "u64"]),
    ("test.u32=5", VT.INT32, 5, True, ["--type", "i32"]),  # same size, new type tag
])
def test_gguf_set(tbx, edit_model, kv, vt, val, inplace, extra):
    before, tbefore = fields_of(edit_model), tensors_of(edit_model)
    size = edit_model.stat().st_size
    r = run(tbx, "gguf", "set", edit_model, kv, *extra)
    assert_clean_exit(r)
    if vt == VT.UINT16:  # 70000 does not fit a u16: usage error, file untouched
        assert r.rc == 2, r.describe()
        assert fields_of(edit_model) == before
        return
    assert r.rc == 0, r.describe()
    assert ("in place" in r.out.decode()) == inplace, r.describe()
    if inplace:
        assert edit_model.stat().st_size == size
    key = kv.split("=", 1)[0]
    check_edit(before, tbefore, edit_model, {key: (vt, val)})
    # the file stays valid, also for ggml
    r = run(tbx, "validate", "--ggml", edit_model)
    assert r.rc == 0, r.describe()
    assert not list(edit_model.parent.glob("*.tbx-*")), "temporary file left behind"


# Entries of every kind, so that an edited value sits after nested arrays, arrays of strings and
# packed arrays, and the last entry is a scalar (its end is the first tensor info's start).
INPLACE_BASE = [
    ("e.u8", "add_uint8", 3), ("e.nested", "add_array", [[1, 2], [3, 4, 5]]),
    ("e.i8", "add_int8", -3), ("e.strs", "add_array", ["a", "bb", "", "dddd"]),
    ("e.u16", "add_uint16", 300), ("e.i16", "add_int16", -300), ("e.name", "add_string", "abcdef"),
    ("e.ints", "add_array", list(range(40))), ("e.u32", "add_uint32", 70000),
    ("e.i32", "add_int32", -70000), ("e.f32", "add_float32", 0.5), ("e.flag", "add_bool", True),
    ("e.empty", "add_string", ""), ("e.u64", "add_uint64", 1 << 40),
    ("e.i64", "add_int64", -(1 << 40)), ("e.f64", "add_float64", 0.25),
]


def _inplace_gguf(path: Path, changed: dict):
    """The base entries (with `changed` {key: (method, value)} instead), written by gguf-py."""
    rng = np.random.default_rng(11)
    a = rng.standard_normal((4, 32)).astype(np.float32)
    b = np.arange(10, dtype=np.int32)

    def fill(w):
        for key, method, val in INPLACE_BASE:
            method, val = changed.get(key, (method, val))
            if method == "add_string" and val == "":  # add_string skips empty strings
                w.add_key_value(key, val, VT.STRING)
            else:
                getattr(w, method)(key, val)
        w.add_tensor("a", a)
        w.add_tensor("b", b)

    arch = changed.get("general.architecture", (None, "test"))[1]  # gguf-py writes it first
    return write_gguf(path, fill, arch=arch)


@pytest.mark.parametrize("key,arg,method,val", [
    ("general.architecture", "general.architecture=abcd", "add_string", "abcd"),  # the first
    ("e.u8", "e.u8=200", "add_uint8", 200),
    ("e.i8", "e.i8=-100", "add_int8", -100),
    ("e.u16", "e.u16=65535", "add_uint16", 65535),
    ("e.i16", "e.i16=12", "add_int16", 12),
    ("e.name", "e.name=zyxwvu", "add_string", "zyxwvu"),
    ("e.u32", "e.u32=4000000000", "add_uint32", 4000000000),
    ("e.i32", "e.i32=-2", "add_int32", -2),
    ("e.f32", "e.f32=-2.75", "add_float32", -2.75),
    ("e.flag", "e.flag=false", "add_bool", False),
    ("e.empty", "e.empty=", "add_string", ""),
    ("e.u64", "e.u64=18446744073709551615", "add_uint64", (1 << 64) - 1),
    ("e.i64", "e.i64=-1", "add_int64", -1),
    ("e.f64", "e.f64=0.1", "add_float64", 0.1),                                 # the last
    ("e.u32", "e.u32=-5 --type i32", "add_int32", -5),     # same size, another type id
    ("e.f64", "e.f64=-9 --type i64", "add_int64", -9),     # the last, another type id
    ("e.i16", "e.i16=7 --type u16", "add_uint16", 7),
])
def test_gguf_set_in_place_bytes_match_gguf_py(tbx, tmp_path, key, arg, method, val):
    """An in-place edit anywhere in the header leaves exactly the bytes gguf-py writes for the
    same entries with the new value (derived from the reference writer, not from tbx)."""
    path = _inplace_gguf(tmp_path / "inplace.gguf", {})
    want = _inplace_gguf(tmp_path / "want.gguf", {key: (method, val)}).read_bytes()
    kv, *extra = arg.split(" ", 1)
    r = run(tbx, "gguf", "set", path, kv, *(extra[0].split() if extra else []))
    assert_clean_exit(r)
    assert r.rc == 0, r.describe()
    assert "in place" in r.out.decode(), r.describe()
    got = path.read_bytes()
    assert len(got) == len(want)
    diff = [i for i in range(len(got)) if got[i] != want[i]]
    assert not diff, f"{len(diff)} bytes differ from gguf-py's file, the first at {diff[0]}"


def test_gguf_set_in_place_reads_no_more_than_the_header(tbx, tmp_path):
    """The in-place edit writes where the reader found the value: bytes after the header (here
    a sparse tail of a 0-tensor file reaching past max_header_bytes, 1 GiB) are neither read
    nor a reason to refuse (the old second walker read up to the first tensor or the end)."""
    def gstr(b):
        return struct.pack("<Q", len(b)) + b
    head = (b"GGUF" + struct.pack("<IQQ", 3, 0, 2) + gstr(b"general.architecture")
            + struct.pack("<I", 8) + gstr(b"llama") + gstr(b"x.u32") + struct.pack("<II", 4, 5))
    head += b"\0" * (-len(head) % 32)
    p = tmp_path / "tail.gguf"
    with open(p, "wb") as f:
        f.write(head)
        f.truncate((1 << 30) + 4096)
    r = run(tbx, "gguf", "set", p, "x.u32=7")
    assert r.rc == 0 and "in place" in r.out.decode(), r.describe()
    with open(p, "rb") as f:
        got = f.read(len(head) + 64)
    i = head.index(gstr(b"x.u32")) + len(gstr(b"x.u32")) + 4  # the value after its type id
    want = head[:i] + struct.pack("<I", 7) + head[i + 4:]
    assert got == want + b"\0" * 64
    assert p.stat().st_size == (1 << 30) + 4096


def test_gguf_set_alignment_relayouts(tbx, edit_model):
    before, tbefore = fields_of(edit_model), tensors_of(edit_model)
    r = run(tbx, "gguf", "set", edit_model, "general.alignment=64", "--type", "u32")
    assert r.rc == 0, r.describe()
    check_edit(before, tbefore, edit_model, {"general.alignment": (VT.UINT32, 64)})
    rd = gguf.GGUFReader(str(edit_model))
    assert all(t.data_offset % 64 == 0 for t in rd.tensors)


@pytest.mark.parametrize("key", ["test.u32", "general.name", "test.tokens"])
def test_gguf_del(tbx, edit_model, key):
    before, tbefore = fields_of(edit_model), tensors_of(edit_model)
    r = run(tbx, "gguf", "del", edit_model, key)
    assert r.rc == 0, r.describe()
    check_edit(before, tbefore, edit_model, {}, removed=(key,))


def test_gguf_del_missing_key(tbx, edit_model):
    data = edit_model.read_bytes()
    r = run(tbx, "gguf", "del", edit_model, "no.such.key")
    assert_clean_exit(r)
    assert r.rc == 1, r.describe()
    assert "no.such.key" in r.text
    assert edit_model.read_bytes() == data


def test_gguf_set_bad_usage(tbx, edit_model):
    data = edit_model.read_bytes()
    for args in (["noequals"], ["=5"], ["k=v", "--type", "f16"], ["test.u32=abc"]):
        r = run(tbx, "gguf", "set", edit_model, *args)
        assert r.rc == 2, r.describe()
    assert edit_model.read_bytes() == data


# ------------------------------------------------------------------------------------------
# gguf split / merge
# ------------------------------------------------------------------------------------------
@pytest.fixture()
def big_model(tmp_path):
    rng = np.random.default_rng(3)
    arrays = {f"blk.{i}.w": rng.standard_normal((8, 64 + 32 * (i % 3))).astype(np.float32)
              for i in range(10)}

    def fill(w):
        w.add_string("general.name", "split me")
        w.add_array("tokenizer.ggml.tokens", [f"t{i}" for i in range(50)])
        w.add_uint32("test.u32", 5)
        for k, a in arrays.items():
            w.add_tensor(k, a)

    return write_gguf(tmp_path / "big.gguf", fill), arrays


def test_gguf_split_and_merge_roundtrip(tbx, big_model, tmp_path):
    src, arrays = big_model
    stem = tmp_path / "shards" / "m"
    stem.parent.mkdir()
    r = run(tbx, "gguf", "split", src, stem, "--max-size", "5000")
    assert r.rc == 0, r.describe()
    shards = sorted(stem.parent.glob("m-*.gguf"))
    n = len(shards)
    assert n > 2
    assert [s.name for s in shards] == [f"m-{i:05d}-of-{n:05d}.gguf" for i in range(1, n + 1)]
    assert r.out.decode().split() == [str(s) for s in shards]
    seen = {}
    for i, s in enumerate(shards):
        f = fields_of(s)
        assert f["split.no"] == ([VT.UINT16], i)
        assert f["split.count"] == ([VT.UINT16], n)
        assert f["split.tensors.count"] == ([VT.INT32], len(arrays))
        if i == 0:
            assert f["general.name"][1] == "split me"
            assert f["tokenizer.ggml.tokens"][1] == [f"t{i}" for i in range(50)]
        else:
            assert set(f) <= {"split.no", "split.count", "split.tensors.count",
                              "general.alignment"}
        ts = tensors_of(s)
        data = sum(len(t[2]) + (-len(t[2]) % 32) for t in ts.values())
        assert data <= 5000 or len(ts) == 1
        seen.update(ts)
        assert run(tbx, "validate", "--ggml", s).rc == 0
    assert list(seen) == list(arrays)
    assert seen == tensors_of(src)

    out = tmp_path / "merged.gguf"
    r = run(tbx, "gguf", "merge", shards[0], out)
    assert r.rc == 0, r.describe()
    assert tensors_of(out) == tensors_of(src)
    assert list(tensors_of(out)) == list(arrays)
    assert fields_of(out) == fields_of(src)
    # same content -> same bytes as the original GGUFWriter file
    assert out.read_bytes() == src.read_bytes()


def test_gguf_split_one_big_tensor_per_shard(tbx, big_model, tmp_path):
    src, arrays = big_model
    r = run(tbx, "gguf", "split", src, tmp_path / "s", "--max-size", "1")
    assert r.rc == 0, r.describe()
    assert len(list(tmp_path.glob("s-*-of-*.gguf"))) == len(arrays)
    r = run(tbx, "gguf", "split", src, tmp_path / "s", "--max-size", "1")
    assert r.rc == 1, r.describe()  # exists
    r = run(tbx, "gguf", "split", src, tmp_path / "s", "--max-size", "1", "--force")
    assert r.rc == 0, r.describe()


def test_gguf_merge_detects_missing_and_bad_shards(tbx, big_model, tmp_path):
    src, _ = big_model
    r = run(tbx, "gguf", "split", src, tmp_path / "m", "--max-size", "5000")
    assert r.rc == 0, r.describe()
    shards = sorted(tmp_path.glob("m-*.gguf"))
    r = run(tbx, "gguf", "merge", src, tmp_path / "o.gguf")  # not a shard name
    assert r.rc == 1, r.describe()
    shards[1].rename(tmp_path / "moved.gguf")
    r = run(tbx, "gguf", "merge", shards[0], tmp_path / "o.gguf")
    assert_clean_exit(r)
    assert r.rc == 1, r.describe()
    assert not (tmp_path / "o.gguf").exists()
    (tmp_path / "moved.gguf").rename(shards[1])
    r = run(tbx, "gguf", "set", shards[2], "split.no=7")
    assert r.rc == 0, r.describe()
    r = run(tbx, "gguf", "merge", shards[0], tmp_path / "o.gguf")
    assert r.rc == 1 and "split.no" in r.text, r.describe()


def test_gguf_rewrite_keeps_permissions(tbx, edit_model):
    os.chmod(edit_model, 0o600)
    r = run(tbx, "gguf", "set", edit_model, "general.name=a longer name than before")
    assert r.rc == 0 and "rewritten" in r.out.decode(), r.describe()
    assert (edit_model.stat().st_mode & 0o777) == 0o600


def test_gguf_help_lists_subcommands(tbx):
    r = run(tbx, "help", "gguf")
    assert r.rc == 0
    for sub in ("set", "del", "split", "merge"):
        assert f"  {sub} " in r.out.decode()
    r = run(tbx, "gguf", "nope")
    assert r.rc == 2
