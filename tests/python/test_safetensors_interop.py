"""tensorbox <-> safetensors interoperability.

Direction 1: files written by the safetensors library (or, for the dtypes its numpy front end
cannot express, written byte-exactly here from the format description) must read identically
through `tbx info --json` and `tbx cat`.

Direction 2: files written by tensorbox (`tbx convert`, i.e. the C writer) must load identically
through the safetensors library, and be byte-identical to what safetensors writes for the same
tensors and metadata.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import (REPO, ST_TO_TBX, assert_clean_exit, info_json, need, run, st_build,
                      st_parse)

np = need("numpy")
ml = need("ml_dtypes")
safetensors = need("safetensors")
stn = need("safetensors.numpy")

# safetensors dtype order (the reference writer sorts tensors by this order, descending, then
# by name); used to build canonical files for dtypes safetensors.numpy cannot take.
ST_DTYPE_ORDER = ["BOOL", "F4", "F6_E2M3", "F6_E3M2", "U8", "I8", "F8_E5M2", "F8_E4M3",
                  "F8_E8M0", "F8_E4M3FNUZ", "F8_E5M2FNUZ", "I16", "U16", "F16", "BF16", "I32",
                  "U32", "F32", "C64", "F64", "I64", "U64"]

ML_FLOATS = {  # safetensors dtype -> ml_dtypes type (one byte or two per element, unpacked)
    "BF16": ml.bfloat16,
    "F8_E4M3": ml.float8_e4m3fn,
    "F8_E5M2": ml.float8_e5m2,
    "F8_E4M3FNUZ": ml.float8_e4m3fnuz,
    "F8_E5M2FNUZ": ml.float8_e5m2fnuz,
    "F8_E8M0": ml.float8_e8m0fnu,
}


# ------------------------------------------------------------------------------------------
# Sample data: every dtype, special values, scalars, zero-size tensors.
# ------------------------------------------------------------------------------------------

def _int_samples(dt, rng):
    info = np.iinfo(dt)
    fixed = [0, 1, info.max, info.min, info.max - 1, info.min + 1]
    if info.min < 0:
        fixed += [-1, -2]
    vals = np.array(fixed, dtype=dt)
    rand = rng.integers(info.min, info.max, size=40, dtype=dt, endpoint=True)
    extra = []
    if info.bits == 64:
        # Values whose float32 rounding differs between a direct and a via-double conversion
        # (2^60 + 2^36 + 1 is just above a float32 tie; through double it becomes the tie).
        extra = [2**60 + 2**36 + 1, 2**62 + 2**38 + 1]
        if info.min < 0:
            extra += [-(2**60 + 2**36 + 1), -(2**61 + 2**37 + 3)]
        else:
            extra += [2**64 - 2**39 - 1, 2**63 + 2**39 + 1]
    if info.bits == 32:
        extra = [2**24 + 1, 2**25 + 3, 16777217] if info.max > 2**25 else []
        if info.min < 0:
            extra += [-(2**24 + 1), -(2**30 + 65)]
    return np.concatenate([vals, np.array(extra, dtype=dt), rand]).astype(dt)


def make_arrays():
    """name -> numpy array. Names are prefixed so the reference sort is easy to predict."""
    rng = np.random.default_rng(20240611)
    a = {}
    a["bool"] = np.array([True, False, True, True, False, False, True], dtype=np.bool_)
    for dt in (np.uint8, np.int8, np.uint16, np.int16, np.uint32, np.int32, np.uint64, np.int64):
        a[np.dtype(dt).name] = _int_samples(dt, rng)
    a["u8_all"] = np.arange(256, dtype=np.uint8).reshape(16, 16)
    a["i8_all"] = np.arange(-128, 128, dtype=np.int16).astype(np.int8).reshape(2, 8, 16)
    # every f16 / bf16 bit pattern (NaNs, infinities, subnormals, -0 included)
    a["f16_all"] = np.arange(65536, dtype=np.uint32).astype(np.uint16).view(np.float16).reshape(256, 256)
    a["bf16_all"] = np.arange(65536, dtype=np.uint32).astype(np.uint16).view(ml.bfloat16).reshape(256, 256)
    # every 8-bit float bit pattern
    for st, t in ML_FLOATS.items():
        if st == "BF16":
            continue
        a[st.lower() + "_all"] = np.arange(256, dtype=np.uint16).astype(np.uint8).view(t).reshape(16, 16)
    f32_special = np.array([0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45,
                            1.1754942e-38, 3.4028235e38, -3.4028235e38, 0.1, 1 / 3],
                           dtype=np.float32)
    f32_rand = rng.integers(0, 2**32, size=1000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    a["f32"] = np.concatenate([f32_special, f32_rand]).reshape(2, 507)
    f64_special = np.array([0.0, -0.0, 1.0, np.inf, -np.inf, np.nan, 5e-324, 1e-300, 1e300,
                            3.4028235677973366e38,  # f32 max + just under half an ulp
                            3.4028235677973368e38,  # rounds to inf in float32
                            1.401298464324817e-45, 7.006492321624085e-46,  # f32 min subnormal, half
                            7.006492321624087e-46, 1.0000000596046448,  # tie -> even
                            1.0000000596046450, 0.1, -2.5e-40],
                           dtype=np.float64)
    f64_rand = rng.integers(0, 2**63, size=600, dtype=np.uint64).view(np.float64)
    f64_norm = rng.standard_normal(300) * 1e3
    a["f64"] = np.concatenate([f64_special, f64_rand, f64_norm])
    a["c64"] = (rng.standard_normal(12) + 1j * rng.standard_normal(12)).astype(np.complex64).reshape(3, 4)
    # scalars (shape [])
    a["scalar_f32"] = np.array(3.25, dtype=np.float32)
    a["scalar_i64"] = np.array(-(2**40) - 7, dtype=np.int64)
    a["scalar_bool"] = np.array(True)
    a["scalar_bf16"] = np.array(-1.5, dtype=ml.bfloat16)
    # zero-size tensors
    a["empty_f32"] = np.zeros((0,), dtype=np.float32)
    a["empty_f16_3x0"] = np.zeros((3, 0), dtype=np.float16)
    a["empty_u8_0x5"] = np.zeros((0, 5), dtype=np.uint8)
    a["empty_bf16"] = np.zeros((2, 0, 4), dtype=ml.bfloat16)
    # higher rank
    a["rank4_f16"] = rng.standard_normal((2, 3, 4, 5)).astype(np.float16)
    return a


METADATA = {
    "format": "pt",
    "unicode": "h\u00e9llo \u4e16\u754c \U0001F600",
    "escapes": "quote\" backslash\\ tab\t newline\n cr\r ctrl\x01 del\x7f slash/",
    "empty": "",
    "key with spaces and \u00fc": "value",
}


def st_dtype_of(arr) -> str:
    """safetensors dtype string of a numpy/ml_dtypes array (as the library writes it)."""
    names = {"bool": "BOOL", "uint8": "U8", "int8": "I8", "uint16": "U16", "int16": "I16",
             "uint32": "U32", "int32": "I32", "uint64": "U64", "int64": "I64",
             "float16": "F16", "float32": "F32", "float64": "F64", "complex64": "C64",
             "bfloat16": "BF16", "float8_e4m3fn": "F8_E4M3", "float8_e5m2": "F8_E5M2",
             "float8_e4m3fnuz": "F8_E4M3FNUZ", "float8_e5m2fnuz": "F8_E5M2FNUZ",
             "float8_e8m0fnu": "F8_E8M0"}
    return names[arr.dtype.name]


def expected_f32(arr) -> "np.ndarray":
    """numpy's float32 view of the values (ml_dtypes for the extended floats)."""
    if arr.dtype == np.bool_:
        return arr.astype(np.float32)
    return np.asarray(arr).astype(np.float32)


def assert_f32_equal(got: bytes, want, what: str):
    want = np.ascontiguousarray(want, dtype=np.float32).reshape(-1)
    assert len(got) == want.size * 4, f"{what}: {len(got)} bytes of f32, expected {want.size * 4}"
    g = np.frombuffer(got, dtype="<f4")
    gnan, wnan = np.isnan(g), np.isnan(want)
    bad_nan = np.nonzero(gnan != wnan)[0]
    assert bad_nan.size == 0, (f"{what}: NaN mismatch at element {bad_nan[0]}: "
                               f"got {g[bad_nan[0]]!r}, expected {want[bad_nan[0]]!r}")
    gb = g.view(np.uint32)[~gnan]
    wb = want.view(np.uint32)[~wnan]
    diff = np.nonzero(gb != wb)[0]
    if diff.size:
        idx = np.nonzero(~gnan)[0][diff[0]]
        pytest.fail(f"{what}: {diff.size} values differ; first at element {idx}: got "
                    f"{g[idx]!r} (0x{g.view(np.uint32)[idx]:08x}), expected {want[idx]!r} "
                    f"(0x{want.view(np.uint32)[idx]:08x})", pytrace=False)


# ------------------------------------------------------------------------------------------
# Byte-exact files for the packed sub-byte dtypes (safetensors.numpy cannot write them).
# Packing: one LSB-first bitstream (element i occupies bits [i*b, (i+1)*b)); for F4 that is
# "low nibble first" as safetensors and tensorbox describe it.
# ------------------------------------------------------------------------------------------

def pack_lsb(codes, bits: int) -> bytes:
    total = len(codes) * bits
    out = bytearray((total + 7) // 8)
    for i, c in enumerate(codes):
        assert 0 <= c < (1 << bits)
        for k in range(bits):
            if (c >> k) & 1:
                pos = i * bits + k
                out[pos // 8] |= 1 << (pos % 8)
    return bytes(out)


def canonical_safetensors(tensors, metadata=None) -> bytes:
    """A safetensors file laid out like the reference writer: tensors sorted by dtype order
    (descending) then name, contiguous data, compact JSON, header padded with spaces so the
    data starts at a multiple of 8. tensors: list of (name, st_dtype, shape, data bytes)."""
    order = sorted(tensors, key=lambda t: (-ST_DTYPE_ORDER.index(t[1]), t[0]))
    header = {}
    if metadata is not None:
        header["__metadata__"] = metadata
    data = b""
    for name, dt, shape, blob in order:
        header[name] = {"dtype": dt, "shape": list(shape),
                        "data_offsets": [len(data), len(data) + len(blob)]}
        data += blob
    return st_build(header, data)


def packed_tensors():
    """(name, st_dtype, shape, bytes, expected_f32 values) for F4 / F6 tensors."""
    rng = np.random.default_rng(7)
    out = []
    f4_codes = list(range(16)) + list(range(15, -1, -1)) + list(rng.integers(0, 16, 32))
    out.append(("f4_all", "F4", [4, 16], pack_lsb(f4_codes, 4),
                np.array(f4_codes, dtype=np.uint8).view(ml.float4_e2m1fn).astype(np.float32)))
    f4_odd = list(rng.integers(0, 16, 6))
    out.append(("f4_2x3", "F4", [2, 3], pack_lsb(f4_odd, 4),
                np.array(f4_odd, dtype=np.uint8).view(ml.float4_e2m1fn).astype(np.float32)))
    for st, t in (("F6_E2M3", ml.float6_e2m3fn), ("F6_E3M2", ml.float6_e3m2fn)):
        codes = list(range(64)) + list(rng.integers(0, 64, 32))
        out.append((st.lower() + "_all", st, [96], pack_lsb(codes, 6),
                    np.array(codes, dtype=np.uint8).view(t).astype(np.float32)))
    out.append(("f4_scalar_pair", "F4", [2], pack_lsb([3, 12], 4),
                np.array([3, 12], dtype=np.uint8).view(ml.float4_e2m1fn).astype(np.float32)))
    out.append(("f6_empty", "F6_E2M3", [0, 4], b"", np.zeros(0, dtype=np.float32)))
    # a few ordinary tensors so the packed ones are not at offset 0 only
    f32 = np.array([1.0, -2.0, 0.5], dtype=np.float32)
    out.append(("plain_f32", "F32", [3], f32.tobytes(), f32))
    u8 = np.array([0, 7, 255], dtype=np.uint8)
    out.append(("plain_u8", "U8", [3], u8.tobytes(), u8.astype(np.float32)))
    return out


# ------------------------------------------------------------------------------------------
# Fixtures
# ------------------------------------------------------------------------------------------

@pytest.fixture(scope="session")
def st_file(tmp_path_factory):
    """A file written by safetensors.numpy.save_file with every dtype it accepts."""
    arrays = make_arrays()
    path = tmp_path_factory.mktemp("interop") / "all_dtypes.safetensors"
    stn.save_file(arrays, str(path), metadata=METADATA)
    return path, arrays


@pytest.fixture(scope="session")
def packed_file(tmp_path_factory):
    ts = packed_tensors()
    blob = canonical_safetensors([(n, d, s, b) for n, d, s, b, _ in ts], {"kind": "packed"})
    path = tmp_path_factory.mktemp("interop") / "packed.safetensors"
    path.write_bytes(blob)
    return path, {n: (d, s, b, e) for n, d, s, b, e in ts}


ARRAY_NAMES = list(make_arrays().keys())
PACKED_NAMES = [t[0] for t in packed_tensors()]


# ------------------------------------------------------------------------------------------
# Sanity of the test's own helpers (so a wrong expectation cannot hide a tbx bug).
# ------------------------------------------------------------------------------------------

def test_helper_canonical_layout_matches_safetensors_writer():
    arrays = {"zz": np.zeros(3, np.uint8), "b": np.arange(4, dtype=np.int64),
              "a": np.ones((2, 2), np.float16), "c": np.array(True),
              "d": np.zeros(2, ml.bfloat16), "e": np.zeros((0,), np.float32)}
    ref = stn.save(arrays, metadata={"only": "one key"})
    mine = canonical_safetensors([(k, st_dtype_of(v), v.shape, v.tobytes()) for k, v in
                                  arrays.items()], {"only": "one key"})
    assert mine == ref


def test_helper_packed_file_is_accepted_by_safetensors(packed_file):
    path, ts = packed_file
    loaded = dict(safetensors.deserialize(path.read_bytes()))
    assert set(loaded) == set(ts)
    for name, (dt, shape, blob, _) in ts.items():
        assert loaded[name]["dtype"] == dt
        assert list(loaded[name]["shape"]) == list(shape)
        assert bytes(loaded[name]["data"]) == blob


# ------------------------------------------------------------------------------------------
# Direction 1: safetensors-written -> tbx
# ------------------------------------------------------------------------------------------

def _check_info_against_header(info: dict, blob: bytes):
    _, header, data_start = st_parse(blob)
    assert info.get("format") == "safetensors", info.get("format")
    assert info.get("version") == 0, info.get("version")
    assert info.get("metadata") == header.get("__metadata__", {})
    tensors = info.get("tensors")
    assert isinstance(tensors, list)
    names = [t["name"] for t in tensors]
    assert len(names) == len(set(names)), "duplicate tensor names in tbx info output"
    want_names = [k for k in header if k != "__metadata__"]
    assert sorted(names) == sorted(want_names)
    # docs/cli.md: metadata and tensors in file order (the files built here list tensors in
    # the header in data-offset order, so header order and offset order agree)
    assert list(info.get("metadata", {})) == list(header.get("__metadata__", {}))
    assert names == want_names, "tensors not listed in file order"
    by_name = {t["name"]: t for t in tensors}
    for name in want_names:
        h = header[name]
        t = by_name[name]
        begin, end = h["data_offsets"]
        assert t["dtype"] == ST_TO_TBX[h["dtype"]], (name, t["dtype"], h["dtype"])
        assert t["shape"] == h["shape"], (name, t["shape"], h["shape"])
        assert t["offset"] == data_start + begin, (name, t["offset"], data_start + begin)
        assert t["nbytes"] == end - begin, (name, t["nbytes"], end - begin)


def test_info_json_matches_header(tbx, st_file):
    path, _ = st_file
    _check_info_against_header(info_json(tbx, path), path.read_bytes())


def test_info_json_packed_matches_header(tbx, packed_file):
    path, _ = packed_file
    _check_info_against_header(info_json(tbx, path), path.read_bytes())


def test_info_json_metadata_exact(tbx, st_file):
    path, _ = st_file
    assert info_json(tbx, path)["metadata"] == METADATA


def test_validate_accepts_reference_files(tbx, st_file, packed_file):
    for path in (st_file[0], packed_file[0]):
        r = run(tbx, "validate", path)
        assert r.rc == 0, r.describe()


@pytest.mark.parametrize("name", ARRAY_NAMES)
def test_cat_raw_bytes(tbx, st_file, name):
    path, arrays = st_file
    r = run(tbx, "cat", path, name)
    assert r.rc == 0, r.describe()
    want = np.ascontiguousarray(arrays[name]).tobytes()
    assert len(r.out) == len(want), f"{len(r.out)} bytes, expected {len(want)}"
    assert r.out == want


@pytest.mark.parametrize("name", [n for n in ARRAY_NAMES if not n.startswith("c64")])
def test_cat_as_f32(tbx, st_file, name):
    path, arrays = st_file
    r = run(tbx, "cat", path, name, "--as", "f32")
    assert r.rc == 0, r.describe()
    assert_f32_equal(r.out, expected_f32(arrays[name]), name)


@pytest.mark.parametrize("name", PACKED_NAMES)
def test_cat_packed_raw_bytes(tbx, packed_file, name):
    path, ts = packed_file
    r = run(tbx, "cat", path, name)
    assert r.rc == 0, r.describe()
    assert r.out == ts[name][2]


@pytest.mark.parametrize("name", PACKED_NAMES)
def test_cat_packed_as_f32(tbx, packed_file, name):
    path, ts = packed_file
    r = run(tbx, "cat", path, name, "--as", "f32")
    assert r.rc == 0, r.describe()
    assert_f32_equal(r.out, ts[name][3], name)


def test_cat_missing_tensor_fails(tbx, st_file):
    r = run(tbx, "cat", st_file[0], "no.such.tensor")
    assert_clean_exit(r)
    assert r.rc == 1, r.describe()
    assert r.out == b""


# ------------------------------------------------------------------------------------------
# Direction 2: tbx-written -> safetensors
# ------------------------------------------------------------------------------------------

def _convert(tbx, src: Path, dst: Path, *extra):
    r = run(tbx, "convert", src, dst, *extra)
    assert r.rc == 0, r.describe()
    assert dst.is_file(), "convert exited 0 but wrote no output"
    return dst


def _assert_loads_like(path: Path, arrays: dict, metadata: dict | None):
    blob = path.read_bytes()
    # Raw view through the library: works for every dtype.
    loaded = dict(safetensors.deserialize(blob))
    assert set(loaded) == set(arrays)
    for name, arr in arrays.items():
        v = loaded[name]
        assert v["dtype"] == st_dtype_of(arr), name
        assert list(v["shape"]) == list(arr.shape), name
        assert bytes(v["data"]) == np.ascontiguousarray(arr).tobytes(), name
    # The numpy front end, for the dtypes it maps.
    plain = {k: v for k, v in arrays.items() if v.dtype.name not in
             ("bfloat16",) and not v.dtype.name.startswith("float8")}
    with safetensors.safe_open(str(path), framework="np") as f:
        assert (f.metadata() or {}) == (metadata or {})
        keys = set(f.keys())
        assert keys == set(arrays)
        for name, arr in plain.items():
            got = f.get_tensor(name)
            assert got.dtype == arr.dtype, name
            assert got.shape == arr.shape, name
            assert got.tobytes() == arr.tobytes(), name
    if all(k in plain for k in arrays):
        full = stn.load_file(str(path))
        assert set(full) == set(arrays)


def test_convert_roundtrip_is_byte_identical(tbx, st_file, tmp_path):
    src, arrays = st_file
    out = _convert(tbx, src, tmp_path / "out.safetensors")
    assert out.read_bytes() == src.read_bytes(), \
        "safetensors -> safetensors convert is not byte-identical to its input"
    _assert_loads_like(out, arrays, METADATA)


def test_convert_roundtrip_packed_is_byte_identical(tbx, packed_file, tmp_path):
    src, ts = packed_file
    out = _convert(tbx, src, tmp_path / "packed_out.safetensors")
    assert out.read_bytes() == src.read_bytes()
    loaded = dict(safetensors.deserialize(out.read_bytes()))
    for name, (dt, shape, blob, _) in ts.items():
        assert loaded[name]["dtype"] == dt and list(loaded[name]["shape"]) == shape
        assert bytes(loaded[name]["data"]) == blob


def test_convert_explicit_to_safetensors(tbx, st_file, tmp_path):
    src, _ = st_file
    out = _convert(tbx, src, tmp_path / "explicit.bin", "--to", "safetensors")
    assert out.read_bytes() == src.read_bytes()


def _noncanonical_file(arrays: dict, metadata: dict) -> bytes:
    """The same tensors, laid out in reverse name order, unpadded header, keys reordered:
    a valid safetensors file that the reference writer would never produce."""
    header = {}
    data = b""
    for name in sorted(arrays, reverse=True):
        arr = arrays[name]
        blob = np.ascontiguousarray(arr).tobytes()
        header[name] = {"data_offsets": [len(data), len(data) + len(blob)],
                        "shape": list(arr.shape), "dtype": st_dtype_of(arr)}
        data += blob
    header["__metadata__"] = metadata
    return st_build(header, data, pad=False)


def test_writer_output_equals_reference_writer_output(tbx, tmp_path):
    """The C writer (via convert from a non-canonical layout) must produce exactly the bytes
    safetensors.numpy.save writes for the same tensors and metadata (one metadata key: the
    reference writer's order of several keys is not deterministic)."""
    arrays = make_arrays()
    meta = {"source": "tensorbox test \u00e9"}
    src = tmp_path / "noncanonical.safetensors"
    src.write_bytes(_noncanonical_file(arrays, meta))
    # sanity: the library accepts the input
    assert len(safetensors.deserialize(src.read_bytes())) == len(arrays)
    out = _convert(tbx, src, tmp_path / "canonical.safetensors")
    _assert_loads_like(out, arrays, meta)
    ref = stn.save(arrays, metadata=meta)
    got = out.read_bytes()
    if got != ref:
        gl, gh, _ = st_parse(got)
        rl, rh, _ = st_parse(ref)
        pytest.fail("tbx-written file differs from safetensors' bytes for the same dict\n"
                    f"tbx header ({gl} bytes): {got[8:8 + min(gl, 300)]!r}\n"
                    f"ref header ({rl} bytes): {ref[8:8 + min(rl, 300)]!r}", pytrace=False)


def test_writer_output_without_metadata_equals_reference(tbx, tmp_path):
    arrays = {k: v for k, v in make_arrays().items() if k in ("f32", "u8_all", "scalar_i64",
                                                              "empty_f32", "bf16_all")}
    header = {}
    data = b""
    for name in sorted(arrays, reverse=True):
        blob = arrays[name].tobytes()
        header[name] = {"dtype": st_dtype_of(arrays[name]), "shape": list(arrays[name].shape),
                        "data_offsets": [len(data), len(data) + len(blob)]}
        data += blob
    src = tmp_path / "nometa_in.safetensors"
    src.write_bytes(st_build(header, data, pad=False))
    out = _convert(tbx, src, tmp_path / "nometa_out.safetensors")
    assert out.read_bytes() == stn.save(arrays)


def test_example_model_roundtrip(tbx, tmp_path):
    example = REPO / "examples" / "tiny-mlp.safetensors"
    assert example.is_file(), f"missing sample model {example} (run examples/make_examples.py)"
    raw = dict(safetensors.deserialize(example.read_bytes()))
    assert raw, "sample model has no tensors"
    _check_info_against_header(info_json(tbx, example), example.read_bytes())
    out = _convert(tbx, example, tmp_path / "tiny.safetensors")
    assert out.read_bytes() == example.read_bytes()
    raw2 = dict(safetensors.deserialize(out.read_bytes()))
    assert {k: (v["dtype"], list(v["shape"]), bytes(v["data"])) for k, v in raw.items()} == \
           {k: (v["dtype"], list(v["shape"]), bytes(v["data"])) for k, v in raw2.items()}
    with safetensors.safe_open(str(out), framework="np") as f:
        assert f.metadata().get("model") == "tiny-mlp"


def test_example_generator_is_deterministic(tmp_path):
    """examples/make_examples.py regenerates the committed sample byte for byte."""
    example = REPO / "examples" / "tiny-mlp.safetensors"
    script = REPO / "examples" / "make_examples.py"
    assert script.is_file() and example.is_file()
    proc = subprocess.run([sys.executable, str(script), "--out-dir", str(tmp_path)],
                          capture_output=True, timeout=300)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    assert (tmp_path / "tiny-mlp.safetensors").read_bytes() == example.read_bytes()


def test_mmap_reads_equal_pread_reads(tbx, st_file):
    """--mmap (TBX_OPEN_MMAP) gives the same info and the same bytes as the pread path."""
    path, arrays = st_file
    r1 = run(tbx, "info", path, "--json")
    r2 = run(tbx, "info", path, "--json", "--mmap")
    assert r1.rc == r2.rc == 0 and r1.out == r2.out, r2.describe()
    for name in ("f16_all", "scalar_bool", "empty_f16_3x0", "c64", "f64"):
        a = run(tbx, "cat", path, name, "--mmap")
        assert a.rc == 0 and a.out == np.ascontiguousarray(arrays[name]).tobytes(), a.describe()
        b = run(tbx, "cat", path, name, "--mmap", "--as", "f32") if name != "c64" else None
        if b is not None:
            assert b.rc == 0, b.describe()
            assert_f32_equal(b.out, expected_f32(arrays[name]), name + " (mmap)")


def _bench_read_binary(tbx) -> str:
    p = os.environ.get("TBX_BENCH_READ") or str(Path(tbx).parent / "bench" / "bench_read")
    if not (os.path.isfile(p) and os.access(p, os.X_OK)):
        pytest.fail(f"bench_read not found at {p!r} (build bench/, or set TBX_BENCH_READ)",
                    pytrace=False)
    return p


def test_bench_read_pread_and_mmap_agree(tbx, st_file):
    """bench/bench_read (public API only) reads every tensor: both modes see every byte and
    fold the same checksum; the byte count is the sum of the header's sizes."""
    path, _ = st_file
    _, header, _ = st_parse(path.read_bytes())
    total = sum(v["data_offsets"][1] - v["data_offsets"][0] for k, v in header.items()
                if k != "__metadata__")
    binary = _bench_read_binary(tbx)
    fields = []
    for mode in ([], ["--mmap"]):
        proc = subprocess.run([binary, *mode, "--repeat", "2", str(path)], capture_output=True,
                              text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        lines = proc.stdout.strip().splitlines()
        assert len(lines) == 2, proc.stdout
        kv = dict(x.split("=", 1) for x in lines[-1].split()[1:])
        fields.append(kv)
    assert fields[0]["mode"] == "pread" and fields[1]["mode"] == "mmap"
    for kv in fields:
        assert int(kv["bytes"]) == total
        assert int(kv["tensors"]) == len(header) - ("__metadata__" in header)
    assert fields[0]["checksum"] == fields[1]["checksum"]
