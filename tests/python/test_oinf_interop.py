"""tensorbox <-> openinfer-oinf 0.1.1 interoperability (OINF version 1).

Direction 1: files written by the reference writer (dataclass_to_oinf.write_oinf: size
variables, every metadata kind, every dtype it supports, scalars, tensors without data) read
identically through `tbx info --json [--types]`, `tbx cat` and `tbx cat --as f32`; the values are
decoded independently with the reference package's own decoders. `tbx info --stats` gives the
statistics verify_oinf.py prints.

Direction 2: files written by tensorbox's C writer (`tbx convert`, from those reference files and
from safetensors files) pass the reference verifier (verify_oinf.py), decode to the same values
and, for content the reference writer produced, are byte-identical to its output.

A missing dependency fails (never skips) the tests: see conftest.py.
"""
from __future__ import annotations

import json
import math
import re
import struct
import subprocess
import sys
from dataclasses import dataclass, make_dataclass
from pathlib import Path
from typing import Any

import pytest

from conftest import assert_clean_exit, info_json, need, run

np = need("numpy")
ml = need("ml_dtypes")
stn = need("safetensors.numpy")
d2o = need("dataclass_to_oinf")
oinf_verify = need("oinf_verify")
oinf_packed = need("oinf_packed")
oinf_numeric = need("oinf_numeric")
oinf_types = need("oinf_types")

VT = oinf_types.ValueType
VT_NAME = oinf_types.VT_NAME
# reference type name -> tensorbox dtype name
TBX_DTYPE = {name: name for name in ("i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "f16",
                                     "f32", "f64", "bool", "bf16", "i4", "i2", "i1", "u4", "u2",
                                     "u1", "t2", "t1", "bitset")}
TBX_DTYPE["f8"] = "f8_e5m2"
PACKED = {"i4", "i2", "i1", "u4", "u2", "u1", "t2", "t1"}


def verify_script() -> str:
    return str(Path(oinf_verify.__file__).with_name("verify_oinf.py"))


# ------------------------------------------------------------------------------------------
# An independent reader of the tables (locations only; payloads decoded by the reference)
# ------------------------------------------------------------------------------------------

def parse_tables(blob: bytes) -> dict:
    assert blob[:5] == b"OINF\x00"
    (version, flags, nsv, nmd, ntn, _res, off_sv, off_md, off_tn, off_data,
     size) = struct.unpack_from("<IIIIIIQQQQQ", blob, 5)
    pos = off_sv

    def string(p):
        (n,) = struct.unpack_from("<I", blob, p)
        s = blob[p + 4:p + 4 + n].decode("ascii")
        return s, p + ((4 + n + 7) // 8) * 8

    sv = []
    for _ in range(nsv):
        name, pos = string(pos)
        sv.append((name, struct.unpack_from("<Q", blob, pos)[0]))
        pos += 8
    md = []
    pos = off_md
    for _ in range(nmd):
        key, pos = string(pos)
        vt, fl, nb, off = struct.unpack_from("<IIQQ", blob, pos)
        pos += 24
        md.append({"key": key, "value_type": vt, "value_nbytes": nb, "value_offset": off})
    tn = []
    pos = off_tn
    for _ in range(ntn):
        name, pos = string(pos)
        dt, ndim, fl = struct.unpack_from("<III", blob, pos)
        pos += 12
        dims = struct.unpack_from("<" + "Q" * ndim, blob, pos)
        pos += 8 * ndim
        nb, off = struct.unpack_from("<QQ", blob, pos)
        pos += 16
        if version >= 2:
            pos += 16
        tn.append({"name": name, "dtype": dt, "dims": tuple(dims), "flags": fl, "nbytes": nb,
                   "offset": off})
    return {"version": version, "sizevars": sv, "metadata": md, "tensors": tn}


def ref_tensor_values(blob: bytes, t: dict) -> "np.ndarray":
    """The reference's decoding of a tensor (as verify_oinf.py does it)."""
    raw = blob[t["offset"]:t["offset"] + t["nbytes"]]
    dt = t["dtype"]
    n = int(np.prod(t["dims"])) if t["dims"] else 1
    if dt == VT.BOOL:
        arr = np.frombuffer(raw, dtype=np.uint8).astype(np.bool_)
    elif dt == VT.BF16:
        arr = oinf_numeric.bf16_to_f32(np.frombuffer(raw, dtype="<u2"))
    elif dt == VT.F8:
        arr = oinf_numeric.f8_to_f32(np.frombuffer(raw, dtype=np.uint8))
    elif dt in (VT.I4, VT.I2, VT.I1, VT.T2):
        arr = oinf_packed.unpack_signed_bits(raw, oinf_types.PACKED_BITS_PER[dt], n)
    elif dt in (VT.U4, VT.U2, VT.U1):
        arr = oinf_packed.unpack_unsigned_bits(raw, oinf_types.PACKED_BITS_PER[dt], n)
    elif dt == VT.T1:
        arr = oinf_packed.unpack_t1_bits(raw, n)
    else:
        arr = np.frombuffer(raw, dtype=np.dtype(oinf_types.VT_TO_DTYPE[dt]).newbyteorder("<"))
    return arr.reshape(t["dims"]) if t["dims"] else arr.reshape(())


# ------------------------------------------------------------------------------------------
# Reference files
# ------------------------------------------------------------------------------------------

def _rng():
    return np.random.default_rng(20260101)


def reference_instance(with_sizevars: bool = True):
    """A dataclass instance covering what the reference writer can express."""
    rng = _rng()
    S, T, U, B, Sv = d2o.ScalarValue, d2o.TensorSpec, d2o.UninitializedTensor, d2o.Bitset, d2o.SizeVar
    fields: list[tuple[str, Any, Any]] = []

    def add(name, typ, value):
        fields.append((name, typ, value))

    if with_sizevars:
        add("B", Sv, Sv(4))
        add("D", Sv, Sv(128))
        add("big", Sv, Sv(2**64 - 1))
        add("zero", Sv, Sv(0))
    # metadata: inferred types
    add("m.bool_t", bool, True)
    add("m.bool_f", bool, False)
    add("m.str", str, "clamp_up")
    add("m.str_odd", str, "A.b-c_9")
    add("m.f", float, 0.1)
    add("m.u8", object, S(255))
    add("m.u16", object, S(65535))
    add("m.u32", object, S(4294967295))
    add("m.u64", object, S(2**64 - 1))
    add("m.i8", object, S(-128))
    add("m.i16", object, S(-32768))
    add("m.i32", object, S(-2**31))
    add("m.i64", object, S(-2**63))
    # metadata: explicit types
    for dt, v in (("i8", 5), ("u16", 7), ("i64", 9), ("f16", 65504.0), ("f32", -1.25),
                  ("f64", 1e300), ("bf16", 3.140625), ("f8", 1.75), ("i4", -8), ("i2", 1),
                  ("i1", -1), ("u4", 15), ("u2", 3), ("u1", 1), ("t2", -1), ("t1", 1)):
        add(f"x.{dt}", object, S(v, dt))
    add("m.bits", object, B([1, 0, 1, 1, 0, 0, 0, 0, 1, 1]))
    add("m.bits_empty", object, B([]))
    # metadata ndarrays (lists and ScalarValue-wrapped lists with a dtype)
    add("nd.auto_f", list, [[1.5, -2.0, 0.25], [4.0, 5.5, 6.0]])
    add("nd.auto_i8", list, [1, -2, 3])
    add("nd.auto_u16", list, [1000, 2, 3])
    add("nd.bool", list, [True, False, True])
    for dt, v in (("f64", [1e-300, 2.0]), ("i32", [[1, 2], [3, 4]]), ("bf16", [1.0, -0.5, 2.75]),
                  ("f8", [0.5, -3.0, 448.0]), ("i4", [-8, 7, 0, 1, -1]), ("u2", [0, 1, 2, 3, 3]),
                  ("t2", [-1, 0, 1]), ("t1", [-1, 1, 1, -1, 1]), ("u1", [1, 0, 1]),
                  ("f16", [0.1, 2.0])):
        add(f"ndx.{dt}", object, S(v, dt))
    add("nd.one", object, S([7], "u8"))
    add("nd.zero_d", object, S(np.array(5.0, dtype=np.float32)))
    # tensors: numpy dtypes
    for dt in ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"):
        info = np.iinfo(dt)
        arr = rng.integers(info.min, info.max, size=(3, 7), dtype=dt, endpoint=True)
        arr.flat[0], arr.flat[1] = info.min, info.max
        add(f"t.{dt}", object, T(arr))
    add("t.float16", object, T(rng.normal(size=(4, 5)).astype(np.float16)))
    add("t.float32", object, T(rng.normal(size=(16, 32)).astype(np.float32)))
    add("t.float64", object, T(rng.normal(size=(2, 3, 4)).astype(np.float64)))
    add("t.bool", object, T(rng.integers(0, 2, size=(9,)).astype(np.bool_)))
    # tensors: dtype overrides
    add("t.bf16", object, T(rng.normal(size=(3, 3)).astype(np.float32), dtype="bf16"))
    add("t.f8", object, T([0.0, 1.0, -2.5, 57344.0, 0.001, 1.75], dtype="f8"))
    for dt, lo, hi in (("i4", -8, 7), ("i2", -2, 1), ("i1", -1, 0), ("u4", 0, 15), ("u2", 0, 3),
                       ("u1", 0, 1), ("t2", -1, 1)):
        add(f"t.{dt}", object, T(rng.integers(lo, hi, size=(5, 7), endpoint=True).tolist(), dtype=dt))
    add("t.t1", object, T((rng.integers(0, 2, size=(13,)) * 2 - 1).tolist(), dtype="t1"))
    # scalars, empty, no data
    add("s.f32", object, T(np.float32(10.35)))
    add("s.i64", object, T(np.int64(-5)))
    add("s.i4", object, T(-3, dtype="i4"))
    add("s.bool", object, T(np.bool_(True)))
    add("e.f32", object, T(np.zeros((0, 4), dtype=np.float32)))
    add("u.f32", object, U("f32", (4, 4)))
    add("u.i4", object, U("i4", (3,)))
    cls = make_dataclass("RefModel", [(n.replace(".", "_"), t) for n, t, _ in fields])
    inst = cls(**{n.replace(".", "_"): v for n, _, v in fields})
    # field names with dots are not identifiers: rename through the writer's `name` override is
    # only for tensors, so keep the underscore names (the charset allows both).
    return inst


@pytest.fixture(scope="module")
def ref_files(tmp_path_factory):
    d = tmp_path_factory.mktemp("oinf_ref")
    a = d / "ref.oinf"
    d2o.write_oinf(reference_instance(True), str(a))
    b = d / "ref_nosv.oinf"
    d2o.write_oinf(reference_instance(False), str(b))
    return a, b


# ------------------------------------------------------------------------------------------
# Comparing a metadata value
# ------------------------------------------------------------------------------------------

def _same_float(got, want, kind: str) -> bool:
    if isinstance(got, str):  # non-finite floats are strings in tbx JSON
        got = float(got)
    if math.isnan(want):
        return math.isnan(got)
    if kind == "f32":
        return np.float32(got) == np.float32(want)
    if kind == "f16":
        return np.float16(got) == np.float16(want)
    if kind == "bf16":
        return ml.bfloat16(got) == ml.bfloat16(want)
    return float(got) == float(want)


def check_meta_value(key: str, vt: int, ref_value, got, typed: dict):
    name = VT_NAME[vt]
    if vt == VT.STRING:
        assert got == ref_value and typed["type"] == "string", key
    elif vt == VT.BOOL:
        assert got is ref_value and typed["type"] == "bool", key
    elif vt in (VT.F16, VT.F32, VT.F64, VT.BF16):
        assert typed["type"] == name, (key, typed)
        assert _same_float(got, ref_value, name), (key, got, ref_value)
    elif vt == VT.F8:
        assert typed == {"type": "ndarray", "dtype": "f8_e5m2", "shape": [], "value": got}, typed
        assert _same_float(got, ref_value, "f64"), (key, got, ref_value)
    elif name in PACKED:
        assert typed == {"type": "ndarray", "dtype": name, "shape": [], "value": got}, typed
        assert got == ref_value, (key, got, ref_value)
    elif vt == VT.BITSET:
        bits = [(ref_value["bytes"][i // 8] >> (i % 8)) & 1 for i in range(ref_value["bit_count"])]
        assert got == bits and typed["type"] == "bitset", (key, got, bits)
    elif vt == VT.NDARRAY:
        arr = ref_value["array"]
        assert typed["type"] == "ndarray", key
        assert typed["dtype"] == TBX_DTYPE[VT_NAME[ref_value["dtype"]]], (key, typed)
        assert typed["shape"] == list(ref_value["dims"]), (key, typed)
        cast = {"f16": np.float16, "bf16": ml.bfloat16, "f32": np.float32, "f8": np.float32,
                "f64": np.float64}
        et = VT_NAME[ref_value["dtype"]]
        g = np.asarray(np.asarray(got, dtype=np.float64), dtype=cast.get(et, np.float64))
        w = np.asarray(np.asarray(arr, dtype=np.float64), dtype=cast.get(et, np.float64))
        assert g.shape == w.shape, (key, g.shape, w.shape)
        assert np.array_equal(g, w), (key, got, arr)
        if et not in cast and et != "bool":  # integers: exact, as Python ints
            flat_got = np.asarray(got, dtype=object).reshape(-1).tolist()
            assert flat_got == [int(x) for x in np.asarray(arr).reshape(-1)], key
    else:
        assert typed["type"] == name, (key, typed)
        assert got == ref_value and isinstance(got, int), (key, got, ref_value)


# ------------------------------------------------------------------------------------------
# Direction 1: reference files read by tbx
# ------------------------------------------------------------------------------------------

def test_reference_file_passes_reference_verifier(ref_files):
    for f in ref_files:
        r = subprocess.run([sys.executable, verify_script(), str(f)], capture_output=True)
        assert r.returncode == 0, r.stderr.decode()


def test_info_json_matches_reference(tbx, ref_files):
    path = ref_files[0]
    blob = path.read_bytes()
    tables = parse_tables(blob)
    doc = info_json(tbx, path)
    r = run(tbx, "info", path, "--json", "--types")
    assert r.rc == 0, r.describe()
    typed_doc = json.loads(r.out)
    assert doc["format"] == "oinf" and doc["version"] == 1
    # metadata: same keys, same order, same values, types kept
    keys = [m["key"] for m in tables["metadata"]]
    assert list(doc["metadata"]) == keys
    assert len(keys) > 40
    for m in tables["metadata"]:
        ref_value = oinf_verify._parse_metadata_value(blob, m)
        check_meta_value(m["key"], m["value_type"], ref_value, doc["metadata"][m["key"]],
                         typed_doc["metadata"][m["key"]])
    # tensors
    assert [t["name"] for t in doc["tensors"]] == [t["name"] for t in tables["tensors"]]
    for got, t in zip(doc["tensors"], tables["tensors"]):
        assert got["dtype"] == TBX_DTYPE[VT_NAME[t["dtype"]]], (got, t)
        assert got["shape"] == list(t["dims"]), (got, t)
        assert got["nbytes"] == t["nbytes"] and got["offset"] == t["offset"], (got, t)
        assert set(got) == {"name", "dtype", "shape", "offset", "nbytes"}


def test_info_json_sizevars(tbx, ref_files):
    tables = parse_tables(ref_files[0].read_bytes())
    doc = info_json(tbx, ref_files[0])
    assert "sizevars" in doc, ("tbx info --json has no \"sizevars\": the binary lacks the "
                               "size-variable API (TBX_HAVE_SIZEVARS, docs/formats/oinf.md)")
    assert doc["sizevars"] == dict(tables["sizevars"])
    assert doc["sizevars"]["big"] == 2**64 - 1
    # a file without size variables still has the (empty) member
    assert info_json(tbx, ref_files[1])["sizevars"] == {}


def test_cat_raw_and_f32_match_reference(tbx, ref_files):
    path = ref_files[0]
    blob = path.read_bytes()
    for t in parse_tables(blob)["tensors"]:
        if not t["flags"] & 1:
            r = run(tbx, "cat", path, t["name"])
            assert r.rc == 1 and b"no data" in r.err, r.describe()
            continue
        r = run(tbx, "cat", path, t["name"])
        assert r.rc == 0, r.describe()
        assert r.out == blob[t["offset"]:t["offset"] + t["nbytes"]], t["name"]
        r = run(tbx, "cat", path, t["name"], "--as", "f32")
        assert r.rc == 0, r.describe()
        want = ref_tensor_values(blob, t).astype(np.float32).reshape(-1)
        got = np.frombuffer(r.out, dtype="<f4")
        assert got.shape == want.shape, t["name"]
        assert np.array_equal(got, want, equal_nan=True), (t["name"], got[:8], want[:8])


def test_every_reference_dtype_is_present(ref_files):
    """Guards the sample: it covers every tensor dtype the reference writer supports."""
    tables = parse_tables(ref_files[0].read_bytes())
    dts = {VT_NAME[t["dtype"]] for t in tables["tensors"]}
    assert dts == set(TBX_DTYPE) - {"bitset"}
    mts = {VT_NAME[m["value_type"]] for m in tables["metadata"]}
    assert mts == set(VT_NAME.values())


# ------------------------------------------------------------------------------------------
# --stats against verify_oinf.py
# ------------------------------------------------------------------------------------------

STATS_RE = re.compile(r"^- \[nbytes: (\d+), min: (\S+), max: (\S+), mean: (\S+), "
                      r"(median|median≈): (\S+), std: ([^,\]]+)")


def _blocks(text: str) -> dict:
    """name -> list of lines of its block (tensor views of verify_oinf.py / tbx --stats)."""
    out, cur = {}, None
    for line in text.splitlines():
        m = re.match(r"^([A-Za-z0-9._-]+): ", line)
        if m:
            cur = m.group(1)
            out[cur] = [line]
        elif cur and line:
            out[cur].append(line)
        elif not line:
            cur = None
    return out


def _close(a: str, b: str) -> bool:
    x, y = float(a.rstrip(",")), float(b.rstrip(","))
    if math.isnan(x) or math.isnan(y):
        return math.isnan(x) and math.isnan(y)
    return math.isclose(x, y, rel_tol=2e-5, abs_tol=1e-30)


def test_stats_match_verify(tbx, ref_files):
    path = ref_files[0]
    blob = path.read_bytes()
    ref = subprocess.run([sys.executable, verify_script(), str(path)], capture_output=True,
                         text=True)
    assert ref.returncode == 0, ref.stderr
    r = run(tbx, "info", path, "--stats")
    assert r.rc == 0, r.describe()
    text = r.out.decode("utf-8")
    ours, theirs = _blocks(text), _blocks(ref.stdout)
    tables = parse_tables(blob)
    # size variables as NAME := VALUE, in file order
    sv_lines = [l for l in text.splitlines() if " := " in l]
    assert sv_lines == [f"{n} := {v}" for n, v in tables["sizevars"]], \
        "size variables missing from --stats (needs TBX_HAVE_SIZEVARS)"
    # metadata lines name the types
    for m in tables["metadata"]:
        line = ours[m["key"]][0]
        assert line.startswith(m["key"] + ": "), line
    assert ours["m_str"][0] == 'm_str: str = "clamp_up"'
    assert ours["m_u16"][0] == "m_u16: u16 = 65535"
    assert ours["m_bool_t"][0] == "m_bool_t: bool = true"
    checked = 0
    for t in tables["tensors"]:
        name = t["name"]
        if not t["flags"] & 1:
            assert ours[name][0].endswith("-- uninitialized"), ours[name]
            continue
        vals = ref_tensor_values(blob, t)
        if vals.size <= 1:
            continue
        their = [l for l in theirs[name] if l.startswith("- [")]
        mine = [l for l in ours[name] if l.startswith("- [")]
        assert their and mine, (name, theirs.get(name), ours.get(name))
        a, b = STATS_RE.match(mine[0]), STATS_RE.match(their[0])
        assert a and b, (mine, their)
        assert a.group(5) == "median", mine  # exact for small tensors
        for k in (2, 3, 4, 6, 7):
            assert _close(a.group(k), b.group(k)), (name, k, mine[0], their[0])
        assert int(a.group(1)) == t["nbytes"], (name, mine[0])
        # preview: first 5 and last 5 values as %.6g (integers, bools as the reference prints)
        flat = vals.reshape(-1)
        head = mine and ours[name][0]
        if flat.dtype == np.bool_:
            first = ["true" if x else "false" for x in flat[:5]]
        elif np.issubdtype(flat.dtype, np.integer):
            first = [str(int(x)) for x in flat[:5]]
        else:
            first = [f"{float(x):.6g}" for x in flat[:5]]
        assert "{ " + ", ".join(first) in head, (head, first)
        # histogram counts: one bin per integer for small integer ranges, else 10 bins
        hist = [l for l in ours[name] if l.startswith("    ")]
        counts = [int(l.rsplit(None, 1)[1]) for l in hist]
        numeric = flat.astype(np.float64)
        lo, hi = numeric.min(), numeric.max()
        if (np.issubdtype(flat.dtype, np.integer) or flat.dtype == np.bool_) and hi - lo <= 20:
            want = [int(np.sum(numeric == v)) for v in range(int(lo), int(hi) + 1)]
        elif lo == hi:
            want = [numeric.size]
        else:
            want = [int(c) for c in np.histogram(numeric, bins=10, range=(lo, hi))[0]]
        assert counts == want, (name, counts, want)
        checked += 1
    assert checked >= 15


def test_stats_every_format_and_undecodable(tbx, tmp_path):
    """--stats works on a safetensors file too (public API only) and says in one line when a
    dtype cannot be decoded."""
    p = tmp_path / "x.safetensors"
    stn.save_file({"a": np.arange(10, dtype=np.float32),
                   "c": np.array([1 + 2j, 3 - 1j], dtype=np.complex64)}, str(p))
    r = run(tbx, "info", p, "--stats")
    assert r.rc == 0, r.describe()
    text = r.out.decode()
    assert "a: f32[10] = { 0, 1, 2, 3, 4, 5, 6, 7, 8, 9 }" in text
    assert "- [nbytes: 40, min: 0, max: 9, mean: 4.5, median: 4.5, std: 2.87228]" in text
    c_lines = [l for l in text.splitlines() if l.startswith("c: ")]
    assert len(c_lines) == 1 and "c64" in c_lines[0] and "decode" in c_lines[0], text
    assert "█" in text
    r = run(tbx, "info", p, "--stats", "--json")
    assert r.rc == 2, r.describe()


def test_stats_large_tensor_is_streamed(tbx, tmp_path):
    """Above 2^24 elements the median is estimated (marked "median≈"); min/max/mean/std and
    the histogram stay exact."""
    n = (1 << 24) + 3
    x = np.arange(n, dtype=np.float32)
    p = tmp_path / "big.safetensors"
    stn.save_file({"x": x}, str(p))
    r = run(tbx, "info", p, "--stats", timeout=300)
    assert r.rc == 0, r.describe()
    text = r.out.decode()
    line = [l for l in text.splitlines() if l.startswith("- [")][0]
    m = STATS_RE.match(line)
    assert m and m.group(5) == "median≈", line
    assert float(m.group(2)) == 0 and _close(m.group(3), f"{n - 1:.6g}")
    assert _close(m.group(4), f"{(n - 1) / 2:.6g}")
    assert abs(float(m.group(6)) - (n - 1) / 2) / n < 0.01, line
    counts = [int(l.rsplit(None, 1)[1]) for l in text.splitlines() if re.match(r"^\s+\[", l)]
    assert sum(counts) == n and len(counts) == 10, counts


# ------------------------------------------------------------------------------------------
# Direction 2: tensorbox's files read by the reference
# ------------------------------------------------------------------------------------------

def test_convert_reference_file_is_byte_identical(tbx, ref_files, tmp_path):
    """Content written by the reference writer and rewritten by the C writer gives the same
    bytes (no size variables: tbx_convert does not carry them)."""
    src = ref_files[1]
    out = tmp_path / "copy.oinf"
    r = run(tbx, "convert", src, out)
    assert r.rc == 0, r.describe()
    a, b = src.read_bytes(), out.read_bytes()
    if a != b:
        i = next(i for i in range(min(len(a), len(b))) if a[i] != b[i])
        pytest.fail(f"files differ at byte {i} (sizes {len(a)}, {len(b)})")


def test_tbx_written_files_pass_reference_verifier(tbx, ref_files, tmp_path):
    src = ref_files[0]
    out = tmp_path / "conv.oinf"
    r = run(tbx, "convert", src, out)
    assert r.rc == 0, r.describe()
    v = subprocess.run([sys.executable, verify_script(), str(out)], capture_output=True, text=True)
    assert v.returncode == 0, v.stderr
    v0 = subprocess.run([sys.executable, verify_script(), str(src)], capture_output=True,
                        text=True)
    # same view apart from the size variables
    strip = lambda s: "\n".join(l for l in s.splitlines() if " := " not in l).strip()
    assert strip(v.stdout) == strip(v0.stdout)
    # the reference decodes tbx's file to the values tbx gives
    blob = out.read_bytes()
    for t in parse_tables(blob)["tensors"]:
        if not t["flags"] & 1:
            continue
        r = run(tbx, "cat", out, t["name"], "--as", "f32")
        want = ref_tensor_values(blob, t).astype(np.float32).reshape(-1)
        assert np.array_equal(np.frombuffer(r.out, "<f4"), want, equal_nan=True), t["name"]


def test_safetensors_to_oinf_passes_reference_verifier(tbx, tmp_path):
    rng = _rng()
    arrays = {
        "w.f32": rng.normal(size=(8, 16)).astype(np.float32),
        "w.f16": rng.normal(size=(5,)).astype(np.float16),
        "w.f64": rng.normal(size=(2, 2)),
        "w.bf16": rng.normal(size=(3, 4)).astype(ml.bfloat16),
        "w.f8": np.array([0.5, -1.75, 3.0, 0.0], dtype=ml.float8_e5m2),
        "i.i8": rng.integers(-128, 127, size=(7,), dtype=np.int8),
        "i.i16": rng.integers(-3000, 3000, size=(7,), dtype=np.int16),
        "i.i32": rng.integers(-2**31, 2**31 - 1, size=(3,), dtype=np.int32),
        "i.i64": rng.integers(-2**40, 2**40, size=(3,), dtype=np.int64),
        "i.u8": rng.integers(0, 255, size=(6,), dtype=np.uint8),
        "i.u16": rng.integers(0, 65535, size=(6,), dtype=np.uint16),
        "i.u32": rng.integers(0, 2**32 - 1, size=(6,), dtype=np.uint32),
        "i.u64": rng.integers(0, 2**40, size=(6,), dtype=np.uint64),
        "b": rng.integers(0, 2, size=(11,)).astype(np.bool_),
        "scalar": np.array(2.5, dtype=np.float32),
    }
    st = tmp_path / "in.safetensors"
    stn.save_file(arrays, str(st), metadata={"format": "pt", "model.version": "1.2-b_3"})
    out = tmp_path / "out.oinf"
    r = run(tbx, "convert", st, out)
    assert r.rc == 0, r.describe()
    v = subprocess.run([sys.executable, verify_script(), str(out)], capture_output=True, text=True)
    assert v.returncode == 0, v.stderr
    assert 'format: str = "pt"' in v.stdout and 'model.version: str = "1.2-b_3"' in v.stdout
    blob = out.read_bytes()
    tables = parse_tables(blob)
    assert [t["name"] for t in tables["tensors"]] == sorted(arrays)
    for t in tables["tensors"]:
        src = arrays[t["name"]]
        assert t["dims"] == src.shape
        assert blob[t["offset"]:t["offset"] + t["nbytes"]] == src.tobytes(), t["name"]
        want = src.astype(np.float32).reshape(-1)
        got = ref_tensor_values(blob, t).astype(np.float32).reshape(-1)
        assert np.array_equal(got, want), t["name"]
        r = run(tbx, "cat", out, t["name"], "--as", "f32")
        assert np.array_equal(np.frombuffer(r.out, "<f4"), want), t["name"]


def test_convert_refusals(tbx, tmp_path):
    """What OINF cannot store is refused with a message naming it, and no file is left."""
    st = tmp_path / "bad.safetensors"
    stn.save_file({"x": np.zeros(2, np.float32)}, str(st), metadata={"note": "has spaces"})
    out = tmp_path / "bad.oinf"
    r = run(tbx, "convert", st, out)
    assert_clean_exit(r)
    assert r.rc == 1 and b"note" in r.err and b"[A-Za-z0-9._-]+" in r.err, r.describe()
    assert not out.exists()
    stn.save_file({"bad name": np.zeros(2, np.float32)}, str(st))
    r = run(tbx, "convert", st, out)
    assert r.rc == 1 and b"bad name" in r.err, r.describe()
    stn.save_file({"x": np.zeros(2, ml.float8_e4m3fn)}, str(st))
    r = run(tbx, "convert", st, out)
    assert r.rc == 1 and b"f8_e4m3" in r.err, r.describe()
    assert not out.exists()


def test_tbx_v2_file_reads_back(tbx, ref_files, tmp_path):
    """`--format-version 2` writes version 2; tbx reads it back with the same content (the
    reference 0.1.1 reads version 1 only: its verifier refuses version 2, as expected)."""
    src = ref_files[1]
    out = tmp_path / "v2.oinf"
    r = run(tbx, "convert", src, out, "--format-version", "2")
    assert r.rc == 0, r.describe()
    a, b = info_json(tbx, src), info_json(tbx, out)
    assert b["version"] == 2
    assert a["metadata"] == b["metadata"]
    assert [(t["name"], t["dtype"], t["shape"], t["nbytes"]) for t in a["tensors"]] == \
        [(t["name"], t["dtype"], t["shape"], t["nbytes"]) for t in b["tensors"]]
    v = subprocess.run([sys.executable, verify_script(), str(out)], capture_output=True, text=True)
    assert v.returncode != 0 and "Unsupported version 2" in v.stderr
    r = run(tbx, "validate", out)
    assert r.rc == 0, r.describe()


# ------------------------------------------------------------------------------------------
# Metadata OINF cannot store: the hint names only options that work (issue 19, item 11)
# ------------------------------------------------------------------------------------------
def _hint_options(text: str) -> list[str]:
    """The options the refusal message suggests, in the parenthesis that ends it."""
    import re
    tail = text.strip().splitlines()[0]
    m = re.search(r"\(([^()]*--[^()]*)\)\s*$", tail)
    assert m, f"no hint at the end of: {tail!r}"
    return re.findall(r"--[a-z][a-z-]*", m.group(1))


def test_string_metadata_hint_is_an_option_that_works(tbx, tmp_path):
    """A string OINF's [A-Za-z0-9._-]+ refuses: --stringify-meta only quotes it (refused
    again), so the message suggests --drop-meta alone; following it gives a file the
    reference verifier accepts, without the entry."""
    src = tmp_path / "s.safetensors"
    stn.save_file({"w": np.arange(4, dtype=np.float32)}, str(src),
                  metadata={"note": "hello world", "ok": "fine"})
    out = tmp_path / "o.oinf"
    r = run(tbx, "convert", src, out)
    assert r.rc == 1 and not out.exists(), r.describe()
    opts = _hint_options(r.err.decode())
    assert opts == ["--drop-meta"], r.describe()
    # --stringify-meta alone fails again, and says what works
    r2 = run(tbx, "convert", src, out, "--stringify-meta")
    assert r2.rc == 1 and not out.exists(), r2.describe()
    assert _hint_options(r2.err.decode()) == ["--drop-meta"], r2.describe()
    # following the hint works
    r3 = run(tbx, "convert", src, out, *opts)
    assert r3.rc == 0, r3.describe()
    v = subprocess.run([sys.executable, verify_script(), str(out)], capture_output=True, text=True)
    assert v.returncode == 0, v.stderr
    keys = [m["key"] for m in parse_tables(out.read_bytes())["metadata"]]
    assert keys == ["ok"], keys
    # both options: what stringifying cannot store is dropped
    out.unlink()
    r4 = run(tbx, "convert", src, out, "--stringify-meta", "--drop-meta")
    assert r4.rc == 0, r4.describe()
    assert [m["key"] for m in parse_tables(out.read_bytes())["metadata"]] == ["ok"]

