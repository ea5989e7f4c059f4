"""tensorbox <-> zTensor 1.1.1 (PyPI `ztensor==1.1.1`, the reference) interoperability.

Direction 1: files written by ztensor's Python API (dense tensors of every dtype it supports,
raw and zstd at two levels, scalars, empty tensors, CSR and COO) must read identically through
`tbx info --json`, `tbx cat`, `tbx cat --as f32` and `tbx validate`.

Direction 2: files written by tensorbox (`tbx convert x.safetensors y.zt`, raw / zstd, with
sha256 / crc32c digests, and sparse tensors through the C API in a small program compiled
here) must load identically in ztensor, its checksum verification included; a corrupted byte
must fail that verification (a control that the check is live). The manifests tensorbox
writes are checked to be canonical CBOR by an independent decoder/encoder written here.

Notes on the reference: its Python API writes no digests (the Rust writer can, the FFI does not
expose it), so files with digests come only from tensorbox; it writes scalars as shape [1]; it
reads only string global attributes.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from conftest import REPO, assert_clean_exit, info_json, need, run

np = need("numpy")
ml = need("ml_dtypes")
ztensor = need("ztensor")
stn = need("safetensors.numpy")

# numpy dtype name -> (tbx dtype name, zTensor manifest dtype)
NP_TO_TBX = {
    "float64": "f64", "float32": "f32", "float16": "f16", "bfloat16": "bf16",
    "int64": "i64", "int32": "i32", "int16": "i16", "int8": "i8",
    "uint64": "u64", "uint32": "u32", "uint16": "u16", "uint8": "u8", "bool": "bool",
}
ZT_STR_TO_NP = {  # what ztensor's Python API reports as dtype_str
    "float64": "float64", "float32": "float32", "float16": "float16", "bfloat16": "bfloat16",
    "int64": "int64", "int32": "int32", "int16": "int16", "int8": "int8", "uint64": "uint64",
    "uint32": "uint32", "uint16": "uint16", "uint8": "uint8", "bool": "bool",
}


# ------------------------------------------------------------------------------------------
# Minimal CBOR (RFC 8949) decoder and canonical encoder, written here from the RFC
# ------------------------------------------------------------------------------------------
class CborText(str):
    pass


def cbor_decode(b: bytes):
    def item(i):
        ib = b[i]
        mt, ai = ib >> 5, ib & 31
        i += 1
        if ai < 24:
            arg = ai
        elif ai in (24, 25, 26, 27):
            n = 1 << (ai - 24)
            arg = int.from_bytes(b[i:i + n], "big")
            if mt == 7:
                raw = b[i:i + n]
                i += n
                if n == 2:
                    return ("f16", struct.unpack(">e", raw)[0]), i
                if n == 4:
                    return ("f32", struct.unpack(">f", raw)[0]), i
                return ("f64", struct.unpack(">d", raw)[0]), i
            i += n
        else:
            raise ValueError("indefinite or reserved length in a manifest that must be canonical")
        if mt == 0:
            return arg, i
        if mt == 1:
            return -1 - arg, i
        if mt == 2:
            return bytes(b[i:i + arg]), i + arg
        if mt == 3:
            return CborText(b[i:i + arg].decode("utf-8")), i + arg
        if mt == 4:
            out = []
            for _ in range(arg):
                v, i = item(i)
                out.append(v)
            return out, i
        if mt == 5:
            out = {}
            for _ in range(arg):
                k, i = item(i)
                v, i = item(i)
                assert k not in out, f"duplicate key {k!r}"
                out[k] = v
            return out, i
        if mt == 7:
            return {20: False, 21: True, 22: None}[ai], i
        raise ValueError(f"unexpected major type {mt}")

    v, end = item(0)
    assert end == len(b), f"{len(b) - end} bytes after the CBOR item"
    return v


def cbor_canonical(v) -> bytes:
    def head(mt, n):
        if n < 24:
            return bytes([mt << 5 | n])
        for ai, size in ((24, 1), (25, 2), (26, 4), (27, 8)):
            if n < 1 << (8 * size):
                return bytes([mt << 5 | ai]) + n.to_bytes(size, "big")
        raise ValueError(n)

    if v is None:
        return b"\xf6"
    if v is True:
        return b"\xf5"
    if v is False:
        return b"\xf4"
    if isinstance(v, tuple):  # (width, float) as decoded: keep the width
        w, x = v
        return {"f16": b"\xf9" + struct.pack(">e", x), "f32": b"\xfa" + struct.pack(">f", x),
                "f64": b"\xfb" + struct.pack(">d", x)}[w]
    if isinstance(v, int):
        return head(0, v) if v >= 0 else head(1, -1 - v)
    if isinstance(v, bytes):
        return head(2, len(v)) + v
    if isinstance(v, str):
        e = v.encode("utf-8")
        return head(3, len(e)) + e
    if isinstance(v, list):
        return head(4, len(v)) + b"".join(cbor_canonical(x) for x in v)
    if isinstance(v, dict):
        items = sorted(((cbor_canonical(k), cbor_canonical(x)) for k, x in v.items()),
                       key=lambda kv: (len(kv[0]), kv[0]))
        return head(5, len(items)) + b"".join(k + x for k, x in items)
    raise TypeError(type(v))


def manifest_of(blob: bytes) -> bytes:
    assert blob[:8] == b"ZTEN1000" and blob[-8:] == b"ZTEN1000"
    (n,) = struct.unpack_from("<Q", blob, len(blob) - 16)
    return blob[len(blob) - 16 - n:len(blob) - 16]


# ------------------------------------------------------------------------------------------
# Sample data
# ------------------------------------------------------------------------------------------
def i2f32(v: int) -> float:
    """Exact round-to-nearest-even of an integer to float32 (no double rounding)."""
    if v == 0:
        return 0.0
    s, a = (-1 if v < 0 else 1), abs(v)
    e = a.bit_length() - 24
    if e <= 0:
        return float(v)
    q, r = divmod(a, 1 << e)
    half = 1 << (e - 1)
    if r > half or (r == half and q & 1):
        q += 1
    return s * float(q << e)


def expected_f32(arr) -> "np.ndarray":
    a = np.asarray(arr)
    if a.dtype.kind in "iu" and a.dtype.itemsize >= 4:
        return np.array([i2f32(int(x)) for x in a.reshape(-1)], dtype=np.float32).reshape(a.shape)
    with np.errstate(over="ignore"):  # f64 beyond the f32 range becomes +-inf, as it should
        return a.astype(np.float32)


def assert_f32_equal(got: bytes, want, what: str):
    want = np.ascontiguousarray(want, dtype=np.float32).reshape(-1)
    assert len(got) == want.size * 4, f"{what}: {len(got)} bytes, expected {want.size * 4}"
    g = np.frombuffer(got, dtype="<f4")
    gn, wn = np.isnan(g), np.isnan(want)
    assert np.array_equal(gn, wn), f"{what}: NaN positions differ"
    gb, wb = g.view(np.uint32)[~gn], want.view(np.uint32)[~wn]
    bad = np.nonzero(gb != wb)[0]
    assert bad.size == 0, (f"{what}: {bad.size} values differ, first: got {g[~gn][bad[0]]!r}, "
                           f"expected {want[~wn][bad[0]]!r}")


def sample_arrays():
    rng = np.random.default_rng(20240917)
    a = {}
    f_special = [0.0, -0.0, 1.0, -1.5, np.inf, -np.inf, np.nan, 1e-30, 65504.0, 6e-8]
    a["f64"] = np.concatenate([np.array(f_special + [1e300, 5e-324]), rng.standard_normal(50)])
    a["f32"] = np.concatenate([np.array(f_special, dtype=np.float32),
                               rng.standard_normal(100).astype(np.float32)]).reshape(11, 10)
    a["f16"] = np.arange(65536, dtype=np.uint32).astype(np.uint16).view(np.float16).reshape(256, 256)
    a["bf16"] = np.arange(65536, dtype=np.uint32).astype(np.uint16).view(ml.bfloat16)
    for dt in (np.int64, np.int32, np.int16, np.int8, np.uint64, np.uint32, np.uint16, np.uint8):
        info = np.iinfo(dt)
        fixed = np.array([0, 1, info.max, info.min, info.max - 1], dtype=dt)
        extra = []
        if info.bits == 64:
            extra = [2**60 + 2**36 + 1, 2**62 + 2**38 + 1]
        rand = rng.integers(info.min, info.max, size=64, dtype=dt, endpoint=True)
        a[np.dtype(dt).name] = np.concatenate([fixed, np.array(extra, dtype=dt), rand]).astype(dt)
    a["bool"] = np.array([True, False, False, True, True], dtype=np.bool_).reshape(5, 1)
    a["rank3_f32"] = rng.standard_normal((3, 4, 5)).astype(np.float32)
    a["empty_f32"] = np.zeros((0,), dtype=np.float32)
    a["empty_u8_2x0"] = np.zeros((2, 0), dtype=np.uint8)
    a["scalar_f64"] = np.array(-2.75)
    a["zeros_f32"] = np.zeros(4096, dtype=np.float32)  # compresses well
    return a


def ref_write(path: Path, arrays: dict, compress):
    with ztensor.Writer(str(path)) as w:
        for name, arr in arrays.items():
            w.add_tensor(name, arr, compress=compress)


def tensors_by_name(info: dict) -> dict:
    return {t["name"]: t for t in info["tensors"]}


# ------------------------------------------------------------------------------------------
# Direction 1: ztensor writes, tbx reads
# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("compress", [False, True, 19], ids=["raw", "zstd3", "zstd19"])
def test_reference_dense_files_read_identically(tbx, tmp_path, compress):
    arrays = sample_arrays()
    path = tmp_path / "ref.zt"
    ref_write(path, arrays, compress)
    reader = ztensor.Reader(str(path))
    info = info_json(tbx, path)
    assert info["format"] == "ztensor" and info["version"] == 1
    tens = tensors_by_name(info)
    assert sorted(tens) == sorted(arrays), "tensor names differ"
    encodings = set()
    for name, arr in arrays.items():
        t = tens[name]
        meta = reader.metadata(name)
        assert t["dtype"] == NP_TO_TBX[arr.dtype.name], name
        want_shape = list(meta.shape)  # the reference stores a scalar as [1]
        assert t["shape"] == want_shape, name
        comps = t.get("components")
        enc = comps[0]["encoding"] if comps else "raw"
        encodings.add(enc)
        assert enc == (meta.encoding or "raw"), name
        stored = comps[0]["stored_bytes"] if comps else t["nbytes"]
        assert stored == meta.size, f"{name}: stored size"
        assert t["offset"] == meta.offset, f"{name}: offset"
        r = run(tbx, "cat", path, name)
        assert r.rc == 0, r.describe()
        assert r.out == np.ascontiguousarray(arr).tobytes(), f"{name}: stored bytes differ"
        if arr.size:
            r = run(tbx, "cat", path, name, "--as", "f32")
            assert r.rc == 0, r.describe()
            assert_f32_equal(r.out, expected_f32(arr), name)
    if compress:
        assert "zstd" in encodings
    r = run(tbx, "validate", path)
    assert r.rc == 0, r.describe()


def _sparse_ref_file(path: Path):
    vals = np.array([1.5, -2.0, 3.25, 0.5], dtype=np.float32)
    indices = np.array([0, 3, 1, 2], dtype=np.int64)
    indptr = np.array([0, 2, 2, 4], dtype=np.int64)
    coo_vals = np.array([7, -8, 9], dtype=np.int32)
    coo_idx = np.array([[0, 1, 1], [2, 0, 3]], dtype=np.int64)
    with ztensor.Writer(str(path)) as w:
        w.add_sparse_csr("csr", vals, indices, indptr, (3, 4))
        w.add_sparse_coo("coo", coo_vals, coo_idx, (2, 4))
        w.add_tensor("dense", np.arange(6, dtype=np.float32).reshape(2, 3))
    dense_csr = np.zeros((3, 4), np.float32)
    for r_ in range(3):
        for k in range(indptr[r_], indptr[r_ + 1]):
            dense_csr[r_, indices[k]] += vals[k]
    dense_coo = np.zeros((2, 4), np.float32)
    for k in range(3):
        dense_coo[coo_idx[0, k], coo_idx[1, k]] += coo_vals[k]
    return {"csr": (vals, indices, indptr, dense_csr), "coo": (coo_vals, coo_idx, dense_coo)}


def test_reference_sparse_files_read_identically(tbx, tmp_path):
    path = tmp_path / "sparse.zt"
    data = _sparse_ref_file(path)
    tens = tensors_by_name(info_json(tbx, path))
    csr = tens["csr"]
    assert csr["layout"] == "sparse_csr" and csr["dtype"] == "f32" and csr["shape"] == [3, 4]
    assert [(c["name"], c["dtype"], c["nbytes"]) for c in csr["components"]] == \
        [("values", "f32", 16), ("indices", "u64", 32), ("indptr", "u64", 32)]
    coo = tens["coo"]
    assert coo["layout"] == "sparse_coo" and coo["dtype"] == "i32" and coo["shape"] == [2, 4]
    assert [(c["name"], c["dtype"], c["nbytes"]) for c in coo["components"]] == \
        [("values", "i32", 12), ("coords", "u64", 48)]
    vals, indices, indptr, dense_csr = data["csr"]
    r = run(tbx, "cat", path, "csr")
    assert r.rc == 0, r.describe()
    assert r.out == vals.tobytes() + indices.astype("<u8").tobytes() + indptr.astype("<u8").tobytes()
    cvals, cidx, dense_coo = data["coo"]
    r = run(tbx, "cat", path, "coo")
    assert r.rc == 0, r.describe()
    assert r.out == cvals.tobytes() + cidx.astype("<u8").reshape(-1).tobytes()
    r = run(tbx, "validate", path)
    assert r.rc == 0, r.describe()
    # densified values (tbx_tensor_read_f32 routes sparse layouts to the driver)
    r = run(tbx, "cat", path, "csr", "--as", "f32")
    assert r.rc == 0, r.describe()
    assert_f32_equal(r.out, dense_csr, "csr densified")
    r = run(tbx, "cat", path, "coo", "--as", "f32")
    assert r.rc == 0, r.describe()
    assert_f32_equal(r.out, dense_coo, "coo densified")


# ------------------------------------------------------------------------------------------
# Direction 2: tbx writes, ztensor reads
# ------------------------------------------------------------------------------------------
def _st_source(tmp_path: Path):
    arrays = {k: v for k, v in sample_arrays().items() if not k.startswith("scalar")}
    arrays["scalar_f32"] = np.array(0.25, dtype=np.float32)  # a true scalar (shape [])
    src = tmp_path / "src.safetensors"
    stn.save_file(arrays, str(src), metadata={"format": "pt", "note": "h\u00e9llo"})
    return arrays, src


def _verify_in_reference(path: Path, names):
    """ztensor's own checksum verification (the FFI read with verify=1) for every tensor."""
    from ztensor import ffi, lib
    reader = ztensor.Reader(str(path))
    failures = []
    for name in names:
        p = lib.ztensor_reader_read_tensor(reader._ptr, name.encode(), 1)
        if p == ffi.NULL:
            failures.append(f"{name}: {ztensor._get_last_error()}")
        else:
            lib.ztensor_free_tensor_view(p)
    return failures


@pytest.mark.parametrize("opts", [[], ["--compress", "3"], ["--compress", "19", "--digest", "sha256"],
                                  ["--digest", "crc32c"], ["--compress", "1", "--digest", "crc32c"]],
                         ids=["raw", "zstd3", "zstd19-sha256", "raw-crc32c", "zstd1-crc32c"])
def test_tbx_files_read_identically_in_reference(tbx, tmp_path, opts):
    arrays, src = _st_source(tmp_path)
    out = tmp_path / "out.zt"
    r = run(tbx, "convert", src, out, *opts)
    assert r.rc == 0, r.describe()
    reader = ztensor.Reader(str(out))
    assert sorted(reader.tensor_names) == sorted(arrays)
    digest = opts[opts.index("--digest") + 1] if "--digest" in opts else None
    encodings = set()
    for name, arr in arrays.items():
        meta = reader.metadata(name)
        assert meta.dtype_str == ZT_STR_TO_NP[arr.dtype.name], name
        assert tuple(meta.shape) == tuple(arr.shape), name
        encodings.add(meta.encoding)
        got = reader.read_tensor(name)
        assert got.tobytes() == np.ascontiguousarray(arr).tobytes(), f"{name}: values differ"
        if digest is None:
            assert meta.checksum is None, name
        else:
            assert meta.checksum.startswith(digest + ":"), (name, meta.checksum)
            if digest == "crc32c":
                assert meta.checksum[7:9] == "0x" and meta.checksum[9:] == meta.checksum[9:].upper()
    assert ("zstd" in encodings) == ("--compress" in opts)
    if digest:
        failures = _verify_in_reference(out, arrays)
        assert not failures, failures
    r = run(tbx, "validate", out)
    assert r.rc == 0, r.describe()
    # the same conversion gives the same bytes, whatever the number of compressing threads
    for threads in ("1", "3"):
        out2 = tmp_path / f"out2_{threads}.zt"
        r = run(tbx, "convert", src, out2, *opts, env={"TBX_THREADS": threads})
        assert r.rc == 0 and out.read_bytes() == out2.read_bytes(), threads


@pytest.mark.parametrize("digest", ["sha256", "crc32c"])
def test_corrupted_tbx_file_fails_both_verifications(tbx, tmp_path, digest):
    """Control: flip one stored byte of a digested tensor; ztensor's verification and
    `tbx validate` must both notice."""
    _, src = _st_source(tmp_path)
    out = tmp_path / "out.zt"
    r = run(tbx, "convert", src, out, "--digest", digest)
    assert r.rc == 0, r.describe()
    meta = ztensor.Reader(str(out)).metadata("f32")
    blob = bytearray(out.read_bytes())
    blob[meta.offset + 5] ^= 0x10
    out.write_bytes(bytes(blob))
    failures = _verify_in_reference(out, ["f32"])
    assert failures and "ecksum" in failures[0], failures
    r = run(tbx, "validate", out)
    assert r.rc == 1 and "digest" in r.text, r.describe()
    assert_clean_exit(r)
    # the same report from one validating thread and from several
    for threads in ("1", "4"):
        r2 = run(tbx, "validate", out, env={"TBX_THREADS": threads})
        assert (r2.rc, r2.out, r2.err) == (r.rc, r.out, r.err), threads


def test_tbx_manifest_is_canonical_cbor(tbx, tmp_path):
    _, src = _st_source(tmp_path)
    out = tmp_path / "out.zt"
    r = run(tbx, "convert", src, out, "--compress", "3", "--digest", "sha256")
    assert r.rc == 0, r.describe()
    blob = out.read_bytes()
    man = manifest_of(blob)
    decoded = cbor_decode(man)
    assert cbor_canonical(decoded) == man, "manifest is not in canonical CBOR form"
    assert decoded["version"] == "1.1.0"
    assert decoded["attributes"] == {"format": "pt", "note": "h\u00e9llo"}
    # layout: magic, zero padding, 64-aligned blobs, manifest right after the last blob
    comps = [c for o in decoded["objects"].values() for c in o["components"].values()]
    ends = 8
    for c in sorted(comps, key=lambda c: (c["offset"], c["length"])):
        assert c["offset"] % 64 == 0
        assert blob[ends:c["offset"]] == bytes(c["offset"] - ends), "non-zero padding"
        ends = max(ends, c["offset"] + c["length"])
    assert ends == len(blob) - 16 - len(man)


def test_reference_rejects_non_string_global_attributes(tbx, tmp_path):
    """Documented incompatibility: tensorbox writes any CBOR attribute value, ztensor 1.1.1
    reads only strings. This pins the peer's behaviour the docs describe."""
    import sys
    sys.path.insert(0, str(Path(__file__).parent))
    from filebuild import cbor
    from test_ztensor_malformed import zt_file
    data = np.arange(4, dtype=np.float32).tobytes()
    man = {"version": "1.1.0", "attributes": {"n": 3},
           "objects": {"x": {"shape": [4], "format": "dense",
                             "components": {"data": {"dtype": "f32", "offset": 64, "length": 16}}}}}
    path = tmp_path / "intattr.zt"
    path.write_bytes(zt_file(bytes(56) + data, cbor(man)))
    r = run(tbx, "validate", path)
    assert r.rc == 0, r.describe()
    with pytest.raises(ztensor.ZTensorError):
        ztensor.Reader(str(path))
    man["attributes"] = {"n": "3"}
    path.write_bytes(zt_file(bytes(56) + data, cbor(man)))
    assert list(ztensor.Reader(str(path)).read_tensor("x")) == [0.0, 1.0, 2.0, 3.0]


# ------------------------------------------------------------------------------------------
# Direction 2 for sparse tensors: the C API (tbx_ztensor_writer_add_csr/coo of the experimental
# public header tensorbox/ztensor.h, as a user includes it), compiled here
# ------------------------------------------------------------------------------------------
HELPER_C = r"""
#include "tensorbox.h"
#define TBX_EXPERIMENTAL
#include "tensorbox/ztensor.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
int main(int argc, char **argv) {
    if (argc < 4) return 2;
    tbx_write_options o;
    tbx_write_options_init(&o);
    o.compress_level = atoi(argv[2]);
    o.digest = strcmp(argv[3], "none") ? argv[3] : NULL;
    tbx_writer *w;
    tbx_error e;
    if (tbx_writer_open(&w, argv[1], &o, &e)) { fprintf(stderr, "%s\n", e.message); return 1; }
    uint64_t dshape[2] = {2, 3}, idx;
    tbx_tensor_desc d = {sizeof(tbx_tensor_desc), "dense", 0, TBX_DT_F32, 2, dshape, 1};
    float dv[6] = {0, 1, 2, 3, 4, 5};
    float cv[4] = {1.5f, -2.0f, 3.25f, 0.5f};
    uint64_t ci[4] = {0, 3, 1, 2}, cp[4] = {0, 2, 2, 4}, cshape[2] = {3, 4};
    int32_t ov[3] = {7, -8, 9};
    uint64_t oc[6] = {0, 1, 1, 2, 0, 3}, oshape[2] = {2, 4};
    static float big[3000];
    for (int i = 0; i < 3000; i++) big[i] = (float)(i % 3);
    uint64_t bi[3000], bp[2] = {0, 3000}, bshape[2] = {1, 3000};
    for (int i = 0; i < 3000; i++) bi[i] = (uint64_t)i;
    if (tbx_writer_add_tensor(w, &d, &idx, &e) ||
        tbx_ztensor_writer_add_csr(w, "csr", TBX_DT_F32, cshape, cv, 4, ci, cp, &e) ||
        tbx_ztensor_writer_add_coo(w, "coo", TBX_DT_I32, oshape, 2, ov, 3, oc, &e) ||
        tbx_ztensor_writer_add_csr(w, "big", TBX_DT_F32, bshape, big, 3000, bi, bp, &e) ||
        tbx_writer_write_tensor(w, idx, dv, sizeof dv, &e) || tbx_writer_finish(w, &e)) {
        fprintf(stderr, "%s\n", e.message);
        return 1;
    }
    return 0;
}
"""


def _pkg_libs(build: Path):
    """The static library's link line as the build states it (its tensorbox.pc: the
    dependency list of cmake/tensorboxDependencies.cmake), as python/setup.py links it."""
    pc = (build / "tensorbox.pc.in").read_text()
    req = re.search(r"^Requires\.private:(.*)$", pc, re.M)
    libs = re.search(r"^Libs\.private:(.*)$", pc, re.M)
    mods = req.group(1).split() if req else []
    out = subprocess.run(["pkg-config", "--libs", *mods], capture_output=True, text=True,
                         check=True).stdout.split() if mods else []
    return out + (libs.group(1).split() if libs else []) + ["-lpthread", "-lm"]


@pytest.fixture(scope="module")
def sparse_writer(tmp_path_factory):
    from conftest import tbx_path
    build = Path(os.environ.get("TBX_BUILD_DIR") or Path(tbx_path()).parent)
    lib = build / "libtensorbox.a"
    if not lib.is_file():
        pytest.fail(f"{lib} not found (set TBX_BUILD_DIR to the build directory)", pytrace=False)
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if not cc:
        pytest.fail("no C compiler to build the sparse-writer helper", pytrace=False)
    d = tmp_path_factory.mktemp("helper")
    src = d / "zt_sparse_writer.c"
    src.write_text(HELPER_C)
    exe = d / "zt_sparse_writer"
    # the sanitizer library needs the sanitizer runtime: link the plain build only
    cmd = [cc, "-std=c11", "-O1", f"-I{REPO / 'include'}",
           str(src), str(lib), "-o", str(exe), *_pkg_libs(build)]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        pytest.fail("building the helper failed:\n" + " ".join(cmd) + "\n" + p.stderr,
                    pytrace=False)
    return exe


@pytest.mark.parametrize("level,digest", [(0, "none"), (3, "crc32c"), (0, "sha256")])
def test_tbx_sparse_files_read_in_reference(tbx, tmp_path, sparse_writer, level, digest):
    out = tmp_path / "sparse_tbx.zt"
    p = subprocess.run([str(sparse_writer), str(out), str(level), digest], capture_output=True,
                       text=True)
    assert p.returncode == 0, p.stderr
    reader = ztensor.Reader(str(out))
    assert sorted(reader.tensor_names) == ["big", "coo", "csr", "dense"]
    assert reader.metadata("csr").layout == "sparse_csr"
    assert reader.metadata("coo").layout == "sparse_coo"

    def comp(name, role, dtype):
        arr, _keep = reader._read_component(name, role, lambda: dtype)
        return np.array(arr)

    assert comp("csr", "values", np.float32).tolist() == [1.5, -2.0, 3.25, 0.5]
    assert comp("csr", "indices", np.uint64).tolist() == [0, 3, 1, 2]
    assert comp("csr", "indptr", np.uint64).tolist() == [0, 2, 2, 4]
    assert comp("coo", "values", np.int32).tolist() == [7, -8, 9]
    assert comp("coo", "coords", np.uint64).tolist() == [0, 1, 1, 2, 0, 3]
    assert comp("big", "values", np.float32).tolist() == [float(i % 3) for i in range(3000)]
    assert comp("big", "indices", np.uint64).tolist() == list(range(3000))
    assert reader.read_tensor("dense").tolist() == [[0, 1, 2], [3, 4, 5]]
    blob = out.read_bytes()
    man = cbor_decode(manifest_of(blob))
    encs = {c.get("encoding", "raw") for o in man["objects"].values() for c in o["components"].values()}
    assert ("zstd" in encs) == (level > 0)
    if digest != "none":
        for o in man["objects"].values():
            for c in o["components"].values():
                assert c["digest"].startswith(digest + ":")
        failures = _verify_in_reference(out, ["dense"])
        assert not failures, failures
    r = run(tbx, "validate", out)
    assert r.rc == 0, r.describe()
    tens = tensors_by_name(info_json(tbx, out))
    assert tens["csr"]["layout"] == "sparse_csr" and tens["coo"]["layout"] == "sparse_coo"


# ------------------------------------------------------------------------------------------
# Conversions through the common model
# ------------------------------------------------------------------------------------------
def test_reference_file_converts_to_safetensors(tbx, tmp_path):
    arrays = {k: v for k, v in sample_arrays().items() if not k.startswith("scalar")}
    path = tmp_path / "ref.zt"
    ref_write(path, arrays, True)
    out = tmp_path / "out.safetensors"
    r = run(tbx, "convert", path, out)
    assert r.rc == 0, r.describe()
    back = stn.load_file(str(out))
    assert sorted(back) == sorted(arrays)
    for name, arr in arrays.items():
        assert back[name].dtype == arr.dtype and back[name].shape == arr.shape, name
        assert back[name].tobytes() == arr.tobytes(), name


def test_attributes_read_and_survive_zt_to_zt(tbx, tmp_path):
    """Global attributes of every CBOR type become typed metadata; an object's attributes
    become the metadata map "ztensor.attributes.<name>" and go back into the object when
    tensorbox writes a zTensor file again."""
    import sys
    sys.path.insert(0, str(Path(__file__).parent))
    from filebuild import Half, cbor
    from test_ztensor_malformed import zt_file
    data = np.arange(4, dtype=np.float32).tobytes()
    man = {"version": "1.1.0",
           "attributes": {"s": "v\u00e9", "i": -3, "u": 2**63, "h": Half(0.5), "d": 2.25,
                          "b": True, "n": None, "a": [1, 2], "m": {"k": "v"}, "y": b"\x01\x02"},
           "objects": {"x": {"shape": [4], "format": "dense", "attributes": {"role": "bias", "n": 1},
                             "components": {"data": {"dtype": "f32", "offset": 64, "length": 16}}}}}
    src = tmp_path / "attrs.zt"
    src.write_bytes(zt_file(bytes(56) + data, cbor(man)))
    r = run(tbx, "info", src, "--json", "--types")
    assert r.rc == 0, r.describe()
    meta = json.loads(r.out)["metadata"]
    types = {k: v["type"] for k, v in meta.items()}
    assert types == {"s": "string", "i": "i64", "u": "u64", "h": "f16", "d": "f64", "b": "bool",
                     "n": "null", "a": "array", "m": "map", "y": "bytes",
                     "ztensor.attributes.x": "map"}, types
    out = tmp_path / "again.zt"
    r = run(tbx, "convert", src, out)
    assert r.rc == 0, r.describe()
    again = cbor_decode(manifest_of(out.read_bytes()))
    assert again["objects"]["x"]["attributes"] == {"role": "bias", "n": 1}
    assert set(again["attributes"]) == set(man["attributes"])
    assert again["attributes"]["h"] == ("f16", 0.5) and again["attributes"]["d"] == ("f64", 2.25)
    assert again["attributes"]["u"] == 2**63 and again["attributes"]["y"] == b"\x01\x02"
