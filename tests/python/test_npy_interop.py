"""tensorbox <-> NumPy (.npy, .npz) interoperability, checked against numpy itself.

Direction 1: files written by numpy (numpy.save, numpy.savez, numpy.savez_compressed and
numpy.lib.format.write_array for versions 2.0 and 3.0) read through `tbx info --json` and
`tbx cat` give numpy's dtype, shape and bytes, bit for bit (big-endian arrays as their
little-endian bytes, Fortran-order arrays in row-major order: the values numpy.load returns).

Direction 2: files written by tensorbox (`tbx convert`) load in numpy.load with the same values
and dtypes; a .npy file is byte-identical to numpy.save's, and every .npz member is
byte-identical to the .npy numpy.save writes for it (the zip around them differs where
docs/formats/npy.md says).

Conversions to and from the other formats (safetensors through the safetensors package), and
the dtypes numpy has that tbx refuses (object, structured, strings, long double), each with
TBX_E_UNSUPPORTED naming the descr.
"""
from __future__ import annotations

import io
import json
import zipfile

import pytest

from conftest import assert_clean_exit, info_json, need, run

np = need("numpy")
stn = need("safetensors.numpy")


def arrays() -> dict:
    rng = np.random.default_rng(20261127)
    a = {}
    a["bool"] = np.array([[True, False, True], [False, False, True]])
    for dt in ("i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8"):
        info = np.iinfo(dt)
        v = np.concatenate([np.array([0, 1, info.max, info.min], dtype=dt),
                            rng.integers(info.min, info.max, size=20, dtype=dt, endpoint=True)])
        a[dt] = v.reshape(4, 6)
    a["f2"] = np.arange(65536, dtype=np.uint32).astype(np.uint16).view(np.float16).reshape(256, 256)
    a["f4"] = np.concatenate([np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45], np.float32),
                              rng.standard_normal(994).astype(np.float32)]).reshape(10, 100)
    a["f8"] = rng.standard_normal((3, 5, 7))
    a["c8"] = (rng.standard_normal(12) + 1j * rng.standard_normal(12)).astype(np.complex64).reshape(3, 4)
    a["c16"] = (rng.standard_normal(6) + 1j * rng.standard_normal(6)).reshape(2, 3)
    # big-endian arrays of every multi-byte dtype
    for dt in ("i2", "i4", "i8", "u2", "u4", "u8", "f2", "f4", "f8", "c8", "c16"):
        a["be_" + dt] = a[dt].astype(np.dtype(dt).newbyteorder(">"))
    a["scalar_f4"] = np.array(3.25, dtype=np.float32)
    a["scalar_bool"] = np.array(True)
    a["scalar_be_i8"] = np.array(-(2**40) - 7, dtype=">i8")
    a["empty_f4"] = np.zeros((0,), dtype=np.float32)
    a["empty_i2_3x0"] = np.zeros((3, 0), dtype=np.int16)
    a["empty_f8_0x5x2"] = np.zeros((0, 5, 2), dtype=np.float64)
    a["fortran_f4"] = np.asfortranarray(a["f4"])
    a["fortran_c16_3d"] = np.asfortranarray(rng.standard_normal((3, 4, 5)) * 1j + 1)
    a["fortran_be_u2"] = np.asfortranarray(a["u2"].astype(">u2"))
    a["transposed"] = rng.standard_normal((50, 40)).astype(np.float32).T  # F-contiguous view
    a["big"] = rng.standard_normal((1024, 1100)).astype(np.float32)
    return a


TBX_DTYPE = {"b1": "bool", "i1": "i8", "i2": "i16", "i4": "i32", "i8": "i64", "u1": "u8",
             "u2": "u16", "u4": "u32", "u8": "u64", "f2": "f16", "f4": "f32", "f8": "f64",
             "c8": "c64", "c16": "c128"}


def tbx_dtype(arr) -> str:
    return TBX_DTYPE[arr.dtype.str[1:]]


def le_array(arr):
    """arr as tbx must give it: row-major, little-endian (0-d arrays stay 0-d)."""
    return arr.astype(arr.dtype.newbyteorder("<"), order="C")


def le_bytes(arr) -> bytes:
    return le_array(arr).tobytes()


def tbx_cat(tbx, path, name, *extra) -> bytes:
    r = run(tbx, "cat", path, name, *extra)
    assert r.rc == 0, r.describe()
    return r.out


def check_reads(tbx, path, named: dict):
    info = info_json(tbx, path)
    by_name = {t["name"]: t for t in info["tensors"]}
    assert set(by_name) == set(named)
    for k, arr in named.items():
        t = by_name[k]
        assert t["dtype"] == tbx_dtype(arr), k
        assert t["shape"] == list(arr.shape), k
        want = le_bytes(arr)
        assert tbx_cat(tbx, path, k) == want, k
        assert tbx_cat(tbx, path, k, "--mmap") == want, k


# ------------------------------------------------------------------------------------------
# numpy writes, tbx reads
# ------------------------------------------------------------------------------------------
def test_npy_files_numpy_writes(tbx_asan, tmp_path):
    for k, arr in arrays().items():
        p = tmp_path / f"{k}.npy"
        np.save(p, arr)
        info = info_json(tbx_asan, p)
        assert info["format"] == "npy" and info["version"] == 1
        check_reads(tbx_asan, p, {"arr_0": arr})


@pytest.mark.parametrize("version", [(1, 0), (2, 0), (3, 0)])
def test_npy_format_versions(tbx_asan, tmp_path, version):
    a = arrays()
    for k in ("f4", "be_c8", "fortran_f4", "scalar_bool", "empty_i2_3x0"):
        p = tmp_path / f"{k}.npy"
        with open(p, "wb") as fh:
            np.lib.format.write_array(fh, a[k], version=version)
        assert info_json(tbx_asan, p)["version"] == version[0]
        check_reads(tbx_asan, p, {"arr_0": a[k]})


@pytest.mark.parametrize("compressed", [False, True])
def test_npz_archives_numpy_writes(tbx_asan, tmp_path, compressed):
    a = arrays()
    p = tmp_path / "all.npz"
    (np.savez_compressed if compressed else np.savez)(p, **a)
    info = info_json(tbx_asan, p)
    assert info["format"] == "npz"
    enc = {t.get("components", [{"encoding": "raw"}])[0]["encoding"] for t in info["tensors"]}
    assert enc == ({"deflate"} if compressed else {"raw"})
    check_reads(tbx_asan, p, a)
    r = run(tbx_asan, "validate", p)
    assert r.rc == 0, r.describe()


def test_npz_positional_and_empty(tbx_asan, tmp_path):
    p = tmp_path / "pos.npz"
    np.savez(p, np.arange(5), np.ones((2, 2), np.float16))
    check_reads(tbx_asan, p, {"arr_0": np.arange(5), "arr_1": np.ones((2, 2), np.float16)})
    e = tmp_path / "empty.npz"
    np.savez(e)
    info = info_json(tbx_asan, e)
    assert info["format"] == "npz" and info["tensors"] == []


def test_npz_zip64_members(tbx_asan, tmp_path):
    # numpy forces a Zip64 extra field on every member; a large archive also needs a Zip64 end
    # record when Python writes more than 65535 members. Built with zipfile itself.
    p = tmp_path / "z64.npz"
    a = np.arange(10, dtype=np.int32)
    buf = io.BytesIO()
    np.save(buf, a)
    with zipfile.ZipFile(p, "w", allowZip64=True) as zf:
        with zf.open("x.npy", "w", force_zip64=True) as fh:
            fh.write(buf.getvalue())
    check_reads(tbx_asan, p, {"x": a})


# ------------------------------------------------------------------------------------------
# tbx writes, numpy reads
# ------------------------------------------------------------------------------------------
def test_npy_written_by_tbx_equals_numpy_save(tbx_asan, tmp_path):
    for k, arr in arrays().items():
        src = tmp_path / f"{k}.npy"
        np.save(src, arr)
        out = tmp_path / f"{k}.out.npy"
        r = run(tbx_asan, "convert", src, out)
        assert r.rc == 0, r.describe()
        back = np.load(out)
        assert back.dtype == arr.dtype.newbyteorder("<") or arr.dtype.itemsize == 1
        assert back.shape == arr.shape
        assert back.tobytes() == le_bytes(arr), k
        # the very bytes numpy.save writes for the row-major little-endian array
        ref = io.BytesIO()
        np.save(ref, le_array(arr))
        assert out.read_bytes() == ref.getvalue(), k


@pytest.mark.parametrize("level", [0, 1, 6, 9])
def test_npz_written_by_tbx_loads_in_numpy(tbx_asan, tmp_path, level):
    a = arrays()
    src = tmp_path / "src.npz"
    np.savez(src, **a)
    out = tmp_path / "out.npz"
    args = ["convert", src, out] + (["--compress", str(level)] if level else [])
    r = run(tbx_asan, *args)
    assert r.rc == 0, r.describe()
    back = np.load(out)
    assert list(back.files) == list(a)  # declaration order
    for k, arr in a.items():
        assert back[k].shape == arr.shape
        assert back[k].tobytes() == le_bytes(arr), k
    with zipfile.ZipFile(out) as zf:
        assert zf.testzip() is None  # every CRC-32
        for info, k in zip(zf.infolist(), a):
            arr = a[k]
            assert info.filename == k + ".npy"
            assert info.compress_type == (zipfile.ZIP_DEFLATED if level else zipfile.ZIP_STORED)
            assert info.date_time == (1980, 1, 1, 0, 0, 0)
            assert info.external_attr >> 16 == 0o600
            ref = io.BytesIO()
            np.save(ref, le_array(arr))
            assert zf.read(info) == ref.getvalue(), k
    # deterministic: a second conversion gives the same bytes
    out2 = tmp_path / "out2.npz"
    r = run(tbx_asan, *(["convert", src, out2] + args[3:]))
    assert r.rc == 0 and out2.read_bytes() == out.read_bytes()


def test_empty_npz_written_like_numpy(tbx_asan, tmp_path):
    src = tmp_path / "e.npz"
    np.savez(src)
    out = tmp_path / "o.npz"
    r = run(tbx_asan, "convert", src, out)
    assert r.rc == 0, r.describe()
    assert out.read_bytes() == src.read_bytes()  # the 22-byte end record alone
    assert np.load(out).files == []


def test_npy_takes_one_array(tbx, tmp_path):
    src = tmp_path / "two.npz"
    np.savez(src, a=np.zeros(2), b=np.ones(3))
    r = run(tbx, "convert", src, tmp_path / "x.npy")
    assert r.rc == 1 and "one array" in r.text and "number 2" in r.text, r.describe()
    assert not (tmp_path / "x.npy").exists()


# ------------------------------------------------------------------------------------------
# Conversions to and from the other formats
# ------------------------------------------------------------------------------------------
def test_npz_safetensors_round_trip(tbx_asan, tmp_path):
    a = {k: v for k, v in arrays().items() if not k.startswith("c") and "c8" not in k
         and "c16" not in k}
    src = tmp_path / "in.npz"
    np.savez_compressed(src, **a)
    st = tmp_path / "mid.safetensors"
    r = run(tbx_asan, "convert", src, st)
    assert r.rc == 0, r.describe()
    loaded = stn.load_file(str(st))
    for k, arr in a.items():
        assert loaded[k].shape == arr.shape
        assert loaded[k].tobytes() == le_bytes(arr), k
    back = tmp_path / "back.npz"
    r = run(tbx_asan, "convert", st, back)
    assert r.rc == 0, r.describe()
    z = np.load(back)
    assert sorted(z.files) == sorted(a)
    for k, arr in a.items():
        assert z[k].tobytes() == le_bytes(arr), k
    # and from safetensors to .npy / GGUF and back through .npz
    gg = tmp_path / "x.gguf"
    r = run(tbx_asan, "convert", back, gg)
    assert r.rc == 0 or "gguf" in r.text.lower(), r.describe()


def test_safetensors_metadata_is_refused_unless_dropped(tbx, tmp_path):
    st = tmp_path / "m.safetensors"
    stn.save_file({"w": np.ones((2, 2), np.float32)}, str(st), metadata={"k": "v"})
    out = tmp_path / "m.npz"
    r = run(tbx, "convert", st, out)
    assert r.rc == 1 and "metadata \"k\"" in r.text and "no metadata" in r.text, r.describe()
    r = run(tbx, "convert", st, out, "--drop-meta")
    assert r.rc == 0, r.describe()
    assert np.array_equal(np.load(out)["w"], np.ones((2, 2), np.float32))


# ------------------------------------------------------------------------------------------
# What numpy has and tbx refuses
# ------------------------------------------------------------------------------------------
REFUSED = {
    "object": (np.array([{"a": 1}, None], dtype=object), "'|O'"),
    "structured": (np.zeros(3, dtype=[("x", "<f4"), ("y", "<i2")]), "structured"),
    "unicode": (np.array(["ab", "c"]), "'<U2'"),
    "bytes": (np.array([b"ab", b"c"]), "'|S2'"),
    "datetime": (np.array(["2020-01-01"], dtype="datetime64[D]"), "datetime"),
    "longdouble": (np.ones(2, dtype=np.longdouble), "long double"),
}


@pytest.mark.parametrize("kind", sorted(REFUSED))
def test_dtypes_tbx_refuses(tbx_asan, tmp_path, kind):
    arr, words = REFUSED[kind]
    p = tmp_path / f"{kind}.npy"
    np.save(p, arr, allow_pickle=True)
    r = run(tbx_asan, "validate", "--json", p)
    assert_clean_exit(r)
    assert r.rc == 1, r.describe()
    obj = json.loads(r.out.decode().splitlines()[0])
    assert obj["code"] == "TBX_E_UNSUPPORTED" and obj["field"] == "header.descr", obj
    # the offset of the descr value in numpy's header text
    head = p.read_bytes()
    assert obj["offset"] == head.index(b"'descr': ") + len(b"'descr': "), obj
    assert words.lower() in obj["message"].lower(), obj
    z = tmp_path / f"{kind}.npz"
    np.savez(z, ok=np.ones(2), bad=arr)
    r = run(tbx_asan, "info", z)
    assert r.rc == 1 and "bad.npy" in r.text, r.describe()

