"""The Python package `tensorbox` reads what the peers read, value for value.

* safetensors: load_file equals safetensors.numpy.load_file (every dtype numpy holds, bf16 and
  fp8 through ml_dtypes), metadata equals the header's;
* GGUF: every block type gguf-py dequantizes (gguf.quants.dequantize over GGUFReader's bytes)
  equals load_file(..., dequantize=True), and the raw blocks equal GGUFReader's bytes;
* zTensor: files written by ztensor 1.1.1 (raw and zstd, dense and sparse) equal its reads;
* OINF: the reference writer's file decodes to the reference's values;
* get_slice returns the rows numpy slicing gives, in every format and through every read
  path (mapped, range reads of zstd components, dequantized rows).

The package must be installed in the interpreter running pytest (make test does it): a missing
package or peer is a failure, never a skip.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from conftest import need

tensorbox = need("tensorbox")
stn = need("safetensors.numpy")
gguf = need("gguf")
ml_dtypes = need("ml_dtypes")


# ------------------------------------------------------------------------------------------
# safetensors
# ------------------------------------------------------------------------------------------
def st_arrays():
    rng = np.random.default_rng(14)
    a = {
        "f64": rng.standard_normal((3, 5)),
        "f32": rng.standard_normal((7, 9)).astype(np.float32),
        "f16": rng.standard_normal((4, 4)).astype(np.float16),
        "bf16": rng.standard_normal((6, 8)).astype(ml_dtypes.bfloat16),
        "bool": rng.integers(0, 2, (3, 3)).astype(np.bool_),
        "scalar": np.array(3.5, dtype=np.float32),
        "empty": np.zeros((0, 4), np.float32),
    }
    for dt in (np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64):
        info = np.iinfo(dt)
        a[np.dtype(dt).name] = rng.integers(info.min, info.max, (4, 6), dtype=dt, endpoint=True)
    return a


@pytest.fixture(scope="module")
def st_file(tmp_path_factory):
    p = tmp_path_factory.mktemp("st") / "m.safetensors"
    stn.save_file(st_arrays(), str(p), metadata={"format": "np", "note": "h\u00e9llo"})
    return p


def test_load_file_equals_safetensors(st_file):
    want = stn.load_file(str(st_file))
    got = tensorbox.load_file(st_file)
    assert list(got) == list(tensorbox.safe_open(st_file).keys())
    assert sorted(got) == sorted(want)
    for k, w in want.items():
        g = got[k]
        assert g.dtype == w.dtype, k
        assert g.shape == w.shape, k
        assert g.tobytes() == w.tobytes(), k


# dtypes numpy does not hold itself: what each read returns (issue 19, item 12)
NOT_NATIVE = {"bf16": ml_dtypes.bfloat16, "f8_e4m3": ml_dtypes.float8_e4m3fn,
              "f8_e5m2": ml_dtypes.float8_e5m2}


@pytest.fixture(scope="module")
def not_native_file(tmp_path_factory):
    """bf16 / fp8 tensors (and native ones) written by safetensors itself."""
    rng = np.random.default_rng(19)
    a = {k: (rng.standard_normal((6, 4)) * 3).astype(t) for k, t in NOT_NATIVE.items()}
    a["f16"] = rng.standard_normal((6, 4)).astype(np.float16)
    a["i8"] = rng.integers(-128, 127, (6, 4), dtype=np.int8)
    p = tmp_path_factory.mktemp("nn") / "nn.safetensors"
    stn.save_file(a, str(p))
    return p, a


def _every_read(path, dequantize):
    """{name: array} through every read of the package: load_file, load(bytes), get_tensor,
    get_slice rows and a whole-tensor slice."""
    out = {"load_file": tensorbox.load_file(path, dequantize=dequantize),
           "load": tensorbox.load(Path(path).read_bytes(), dequantize=dequantize)}
    with tensorbox.safe_open(path, dequantize=dequantize) as f:
        out["get_tensor"] = {k: f.get_tensor(k) for k in f.keys()}
        out["rows"] = {k: f.get_slice(k)[1:4] for k in f.keys()}
        out["slice"] = {k: f.get_slice(k)[..., 1:] for k in f.keys()}
    return out


def test_dequantize_returns_float32_for_dtypes_numpy_lacks(not_native_file):
    """dequantize=True asks for floats: bf16 and fp8 come back as float32 values (those
    ml_dtypes gives for the same bits), never bit patterns or ml_dtypes types; native numpy
    dtypes (f16, i8) are not converted."""
    p, a = not_native_file
    for how, got in _every_read(p, True).items():
        for k, want in a.items():
            g = got[k]
            w = want if how in ("load_file", "load", "get_tensor") else \
                (want[1:4] if how == "rows" else want[..., 1:])
            if k in NOT_NATIVE:
                assert g.dtype == np.float32, (how, k, g.dtype)
                np.testing.assert_array_equal(g, w.astype(np.float32), err_msg=f"{how} {k}")
            else:
                assert g.dtype == w.dtype and g.tobytes() == np.ascontiguousarray(w).tobytes(), \
                    (how, k)


def test_native_read_gives_ml_dtypes_types(not_native_file):
    """dequantize=False with ml_dtypes installed: the ml_dtypes type, bits as stored."""
    p, a = not_native_file
    for how, got in _every_read(p, False).items():
        for k in NOT_NATIVE:
            w = a[k] if how in ("load_file", "load", "get_tensor") else \
                (a[k][1:4] if how == "rows" else a[k][..., 1:])
            assert got[k].dtype == w.dtype, (how, k, got[k].dtype)
            assert got[k].tobytes() == np.ascontiguousarray(w).tobytes(), (how, k)


def test_without_ml_dtypes(not_native_file, monkeypatch):
    """Without ml_dtypes: dequantize=True still gives float32 values; dequantize=False the
    stored bits as the unsigned type of their width (documented; tensor_dtype names them)."""
    p, a = not_native_file
    monkeypatch.setattr(tensorbox, "_ml", None)
    for how, got in _every_read(p, True).items():
        for k in NOT_NATIVE:
            assert got[k].dtype == np.float32, (how, k)
    got = tensorbox.load_file(p)
    for k, t in NOT_NATIVE.items():
        assert got[k].dtype == (np.uint16 if k == "bf16" else np.uint8), k
        assert got[k].tobytes() == a[k].tobytes(), k


def test_metadata_bf16_array_is_never_bits(tmp_path, monkeypatch):
    """A bf16 metadata array (OINF stores one): the ml_dtypes type when installed, else its
    float32 values, as a bf16 scalar comes back as a float."""
    p = tmp_path / "m.oinf"
    v = np.array([1.5, -2.25, 1e20], dtype=ml_dtypes.bfloat16)
    tensorbox.save_file({"w": np.zeros(2, np.float32)}, p, metadata={"arr": v})
    m = tensorbox.safe_open(p).metadata()
    assert m["arr"].dtype == ml_dtypes.bfloat16 and m["arr"].tobytes() == v.tobytes()
    monkeypatch.setattr(tensorbox, "_ml", None)
    m = tensorbox.safe_open(p).metadata()
    assert m["arr"].dtype == np.float32
    np.testing.assert_array_equal(m["arr"], v.astype(np.float32))


def test_load_bytes_reads_them_in_place(st_file, tmp_path, monkeypatch):
    """load(bytes) opens the bytes in memory (tbx_open_memory): no temporary file, and the
    arrays are read-only views into the bytes object itself, which they keep alive. Values
    equal safetensors.numpy's for the same file."""
    import tempfile

    def no_temp_files(*a, **k):
        raise AssertionError("load(bytes) made a temporary file")

    monkeypatch.setattr(tempfile, "NamedTemporaryFile", no_temp_files)
    monkeypatch.setattr(tempfile, "mkstemp", no_temp_files)
    data = st_file.read_bytes()
    want = stn.load_file(str(st_file))  # the same bytes (its load(bytes) has no bf16)
    got = tensorbox.load(data)
    assert sorted(got) == sorted(want)
    base = np.frombuffer(data, np.uint8).ctypes.data
    for k, w in want.items():
        g = got[k]
        assert g.dtype == w.dtype and g.shape == w.shape and g.tobytes() == w.tobytes(), k
        assert not g.flags.writeable, k
        if g.nbytes:
            assert base <= g.ctypes.data and g.ctypes.data + g.nbytes <= base + len(data), k
    # the arrays keep the bytes alive
    f32 = got["f32"]
    del data, got
    import gc
    gc.collect()
    assert f32.tobytes() == want["f32"].tobytes()
    # a mutable buffer is copied once: changing it afterwards changes nothing
    buf = bytearray(st_file.read_bytes())
    got = tensorbox.load(buf)
    buf[-64:] = b"\xff" * 64
    for k, w in want.items():
        assert got[k].tobytes() == w.tobytes(), k
    # another format, dequantized, and a bad file from memory raises like a bad path
    q = tmp_path / "q.gguf"
    tensorbox.save_file({"w": st_arrays()["f32"].repeat(32, axis=1)}, q, quant="q4_0")
    a = tensorbox.load(q.read_bytes(), dequantize=True)["w"]
    assert a.dtype == np.float32
    assert a.tobytes() == tensorbox.load_file(q, dequantize=True)["w"].tobytes()
    with pytest.raises(tensorbox.FormatError) as e:
        tensorbox.load(q.read_bytes()[:100])
    assert e.value.code == "TBX_E_TRUNCATED"


def test_safe_open_api_like_safetensors(st_file):
    with stn.safe_open(str(st_file), framework="np") as ref, \
            tensorbox.safe_open(st_file, framework="np") as f:
        assert sorted(f.keys()) == sorted(ref.keys())
        assert f.metadata() == ref.metadata()
        for k in ref.keys():
            w = ref.get_tensor(k)
            assert f.get_tensor(k).tobytes() == w.tobytes(), k
            if w.ndim >= 1 and w.shape[0] >= 3:
                s = f.get_slice(k)
                assert s.get_shape() == list(w.shape)
                for key in (slice(1, 3), slice(None, None, 2), slice(-2, None), 0, -1,
                            slice(2, 0, -1), (slice(0, 2), 1), slice(5, 2)):
                    got = s[key]
                    assert got.tobytes() == w[key].tobytes(), (k, key)
                    assert got.shape == w[key].shape, (k, key)
                    assert got.dtype == w[key].dtype, (k, key)


def test_arrays_are_read_only(st_file):
    a = tensorbox.load_file(st_file)["f32"]
    assert not a.flags.writeable
    with pytest.raises(ValueError):
        a[0, 0] = 1.0


# ------------------------------------------------------------------------------------------
# GGUF: every block type gguf-py dequantizes
# ------------------------------------------------------------------------------------------
Q = gguf.GGMLQuantizationType
DEQUANT_TYPES = sorted(t.name for t in gguf.quants._type_traits)


def _blocks(qtype, rows: int, cols: int, rng) -> np.ndarray:
    bs, bb = gguf.GGML_QUANT_SIZES[qtype]
    raw = rng.integers(0, 256, rows * (cols // bs) * bb, dtype=np.uint8)
    # keep every aligned half finite and moderate (block scales are f16 at even offsets):
    # clear the top exponent bit of each high byte
    raw[1::2] &= 0xBF
    return raw.reshape(rows, cols // bs * bb)


@pytest.fixture(scope="module")
def gguf_file(tmp_path_factory):
    rng = np.random.default_rng(1414)
    p = tmp_path_factory.mktemp("gguf") / "q.gguf"
    w = gguf.GGUFWriter(str(p), "test")
    w.add_uint32("test.count", 7)
    w.add_float32("test.eps", 1e-5)
    w.add_array("test.list", [1, 2, 3])
    w.add_string("test.name", "quant zoo")
    rows, cols = 4, 512
    for name in DEQUANT_TYPES:
        qt = Q[name]
        if name == "BF16":
            data = rng.standard_normal((rows, cols)).astype(np.float32)
            w.add_tensor(name.lower(), gguf.quants.quantize(data, qt), raw_dtype=qt)
        else:
            w.add_tensor(name.lower(), _blocks(qt, rows, cols, rng), raw_dtype=qt)
    w.add_tensor("f32", rng.standard_normal((3, 5)).astype(np.float32))
    w.add_tensor("i32", rng.integers(-100, 100, (6,), dtype=np.int32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return p


def test_gguf_every_block_type_dequantizes_like_gguf_py(gguf_file):
    reader = gguf.GGUFReader(str(gguf_file))
    got = tensorbox.load_file(gguf_file, dequantize=True)
    raw = tensorbox.load_file(gguf_file)
    seen = set()
    for t in reader.tensors:
        data = np.asarray(t.data)
        g = got[t.name]
        if t.tensor_type in (Q.F32, Q.I32):
            assert g.tobytes() == data.tobytes(), t.name
            continue
        want = gguf.quants.dequantize(data, t.tensor_type).astype(np.float32)
        if t.tensor_type == Q.BF16:  # dequantize=True: float32; else the ml_dtypes type
            assert str(raw[t.name].dtype) == "bfloat16"
        assert g.dtype == np.float32, t.name
        assert g.shape == want.shape, t.name
        np.testing.assert_allclose(g, want, rtol=1e-6, atol=1e-30, equal_nan=True,
                                   err_msg=t.name)
        if t.tensor_type != Q.BF16:
            # raw blocks: the stored bytes, one row of blocks per tensor row
            assert raw[t.name].dtype == np.uint8, t.name
            assert raw[t.name].tobytes() == data.tobytes(), t.name
            assert raw[t.name].shape == data.shape, t.name
        seen.add(t.tensor_type.name)
    assert seen == set(DEQUANT_TYPES)


def test_gguf_metadata_keeps_types(gguf_file):
    with tensorbox.safe_open(gguf_file) as f:
        m = f.metadata()
        assert f.format == "gguf"
    assert m["test.count"] == 7 and type(m["test.count"]) is int
    assert isinstance(m["test.eps"], float) and np.float32(m["test.eps"]) == np.float32(1e-5)
    assert m["test.name"] == "quant zoo"
    assert isinstance(m["test.list"], np.ndarray) and m["test.list"].tolist() == [1, 2, 3]
    typed = tensorbox.info(gguf_file, types=True)["metadata"]
    assert typed["test.count"]["type"] == "u32"
    assert typed["test.eps"]["type"] == "f32"


def test_gguf_dequantized_rows(gguf_file):
    full = tensorbox.load_file(gguf_file, dequantize=True)
    with tensorbox.safe_open(gguf_file, dequantize=True) as f:
        for name in ("q4_k", "q8_0", "iq2_xxs", "bf16"):
            s = f.get_slice(name)
            np.testing.assert_array_equal(s[1:3], full[name][1:3], err_msg=name)
            np.testing.assert_array_equal(s[2], full[name][2], err_msg=name)


# ------------------------------------------------------------------------------------------
# zTensor (ztensor 1.1.1) and OINF (openinfer-oinf)
# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("compress", [False, True], ids=["raw", "zstd"])
def test_ztensor_reference_files(tmp_path, compress):
    ztensor = need("ztensor")
    import test_ztensor_interop as zt

    arrays = zt.sample_arrays()
    p = tmp_path / "ref.zt"
    zt.ref_write(p, arrays, compress)
    reader = ztensor.Reader(str(p))
    got = tensorbox.load_file(p)
    assert sorted(got) == sorted(arrays)
    for name, arr in arrays.items():
        want = np.array(reader.read_tensor(name, to="numpy"), copy=True)
        g = got[name]
        assert g.dtype == arr.dtype, name
        assert g.tobytes() == arr.tobytes(), name
        assert g.size == want.size and g.tobytes() == want.astype(arr.dtype).tobytes(), name
    # range reads of (possibly compressed) tensors
    with tensorbox.safe_open(p) as f:
        for name, arr in arrays.items():
            if arr.ndim >= 1 and arr.shape[0] >= 4:
                assert f.get_slice(name)[1:4].tobytes() == arr[1:4].tobytes(), name
                assert f.get_slice(name)[3:].tobytes() == arr[3:].tobytes(), name


def test_ztensor_sparse_densified(tmp_path):
    import test_ztensor_interop as zt

    p = tmp_path / "sparse.zt"
    want = zt._sparse_ref_file(p)
    got = tensorbox.load_file(p)
    np.testing.assert_array_equal(got["csr"], want["csr"][3])
    np.testing.assert_array_equal(got["coo"], want["coo"][2])
    np.testing.assert_array_equal(got["dense"], np.arange(6, dtype=np.float32).reshape(2, 3))


def test_oinf_reference_file(tmp_path):
    import test_oinf_interop as oi

    p = tmp_path / "ref.oinf"
    oi.d2o.write_oinf(oi.reference_instance(True), str(p))
    blob = p.read_bytes()
    tables = oi.parse_tables(blob)
    got = tensorbox.load_file(p)
    deq = tensorbox.load_file(p, dequantize=True)
    assert sorted(got) == sorted(t["name"] for t in tables["tensors"])
    with tensorbox.safe_open(p) as f:
        dtypes = {k: f.tensor_dtype(k) for k in f.keys()}
    for t in tables["tensors"]:
        name = t["name"]
        g = got[name]
        if g is None:  # a tensor without data (OINF allows it)
            assert t["nbytes"] == 0, name
            continue
        want = oi.ref_tensor_values(blob, t)
        if dtypes[name] in oi.PACKED:
            # packed sub-byte types come raw by default; decoded with dequantize=True
            assert g.dtype == np.uint8, name
            assert g.tobytes() == blob[t["offset"]:t["offset"] + t["nbytes"]], name
            np.testing.assert_array_equal(deq[name].reshape(want.shape),
                                          want.astype(np.float32), err_msg=name)
            continue
        assert g.shape == want.shape, name
        if dtypes[name] in ("bf16", "f8_e4m3", "f8_e5m2"):
            np.testing.assert_array_equal(g.astype(np.float32), want.astype(np.float32),
                                          err_msg=name)
            continue
        np.testing.assert_array_equal(g, want.astype(g.dtype), err_msg=name)
    with tensorbox.safe_open(p) as f:
        m = f.metadata()
        info = f.info()
    assert "sizevars" in info
    assert set(m) == {d["key"] for d in tables["metadata"]}


def test_gguf_split_set_reads_as_one_file(tbx, gguf_file, tmp_path):
    from conftest import run

    r = run(tbx, "gguf", "split", str(gguf_file), str(tmp_path / "part"), "--max-size", "4K")
    assert r.rc == 0, r.describe()
    shards = sorted(tmp_path.glob("part-*.gguf"))
    assert len(shards) >= 3, shards
    whole = tensorbox.load_file(gguf_file, dequantize=True)
    got = tensorbox.load_file(shards[0], dequantize=True)
    assert list(got) == list(whole)
    for k in whole:
        np.testing.assert_array_equal(got[k], whole[k], err_msg=k)


# ------------------------------------------------------------------------------------------
# MCF, EMBD and Hugging Face directories: the formats that landed after the package; nothing in
# the package names them, so these prove the "every format the library reads" promise
# ------------------------------------------------------------------------------------------
ROOT = Path(__file__).resolve().parents[2]
MCF_DATA = ROOT / "tests" / "data" / "mcf"
EMBD_DATA = ROOT / "tests" / "data" / "embd"


def _mcf_fixtures():
    import json
    man = json.loads((MCF_DATA / "manifest.json").read_text())
    return [f for f in man["fixtures"] if f["file"] in ("files/mixed_quant.mcf",
                                                        "files/plain_dtypes.mcf",
                                                        "files/quant_k3.mcf")]


@pytest.mark.parametrize("fx", _mcf_fixtures(), ids=lambda f: f["file"])
def test_mcf_dequantized_equals_mantles_decoder(fx):
    """Every tensor mantle decodes to f32 comes back with the same f32 bits (values/ hold
    mantle's own decoder output, tests/data/mcf/README.md)."""
    path = MCF_DATA / fx["file"]
    got = tensorbox.load_file(path, dequantize=True)
    checked = 0
    for t in fx["tensors"]:
        if "f32" not in t:
            continue  # mantle has no f32 decoder for this dtype
        name = bytes.fromhex(t["name_hex"]).decode("utf-8")
        want = np.fromfile(MCF_DATA / t["f32"], dtype="<f4")
        g = np.asarray(got[name], dtype=np.float32).reshape(-1)
        assert g.view(np.uint32).tobytes() == want.view(np.uint32).tobytes(), name
        checked += 1
    assert checked > 0
    assert tensorbox.info(path)["format"] == "mcf"
    assert tensorbox.validate(path) == []  # mantle's files are valid MCF


def test_mcf_quantized_raw_by_default():
    fx = [f for f in _mcf_fixtures() if f["file"] == "files/quant_k3.mcf"][0]
    path = MCF_DATA / fx["file"]
    blob = path.read_bytes()
    raw = tensorbox.load_file(path)
    for t in fx["tensors"]:
        if t["dtype_name"] != "k3":
            continue
        name = bytes.fromhex(t["name_hex"]).decode("utf-8")
        payload = blob[t["data_off"]:t["data_off"] + t["data_size"]]
        assert np.asarray(raw[name]).tobytes() == payload, name


def test_mcf_quant_embed_file_reads_but_its_bare_tensors():
    """mantle pack --quant-embed int8 (bare codes, no scale): the file opens; every other
    tensor gives mantle's values; a bare tensor is marked in info(), raises FormatError naming
    it when read, is a validate problem, and convert(drop_unreadable=True) leaves it out."""
    import json
    man = json.loads((MCF_DATA / "manifest.json").read_text())
    fx = next(f for f in man["fixtures"] if f["file"] == "files/hf_tiny_llama_int8.mcf")
    path = MCF_DATA / fx["file"]
    bare = {t["name"] for t in fx["tensors"] if t["dtype_name"] == "int8"}
    assert len(bare) == 3
    info = tensorbox.info(path)
    assert {t["name"] for t in info["tensors"] if t.get("unreadable")} == bare
    with tensorbox.safe_open(path, dequantize=True) as f:
        assert set(f.keys()) == {t["name"] for t in fx["tensors"]}
        for t in fx["tensors"]:
            if t["name"] in bare:
                with pytest.raises(tensorbox.FormatError, match=f'tensor "{t["name"]}"'):
                    f.get_tensor(t["name"])
                with pytest.raises(tensorbox.FormatError):
                    f.get_slice(t["name"])[0:1]
            elif "f32" in t:
                want = np.fromfile(MCF_DATA / t["f32"], dtype="<f4")
                g = np.asarray(f.get_tensor(t["name"]), np.float32).reshape(-1)
                assert g.view(np.uint32).tobytes() == want.view(np.uint32).tobytes(), t["name"]
    probs = tensorbox.validate(path)
    assert sorted((p.code, p.field) for p in probs) == [("TBX_E_FORMAT", "tensor.data_size")] * 3
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        o = Path(d) / "o.mcf"
        with pytest.raises(tensorbox.FormatError, match="drop-unreadable"):
            tensorbox.convert(path, o)
        assert not o.exists()
        tensorbox.convert(path, o, drop_unreadable=True)
        assert set(tensorbox.load_file(o)) == {t["name"] for t in fx["tensors"]} - bare
        assert tensorbox.validate(o) == []


def test_embd_legacy_equals_the_original_tensors():
    """The file cpp_embedder's own converter wrote reads as the PyTorch arrays it was made
    from (tests/data/embd/README.md)."""
    want = np.load(EMBD_DATA / "tiny-expected.npz")
    got = tensorbox.load_file(EMBD_DATA / "tiny-legacy.bin")
    common = set(got) & set(want.files)
    assert len(common) == 101
    for name in common:
        assert got[name].shape == want[name].shape, name
        assert got[name].tobytes() == want[name].tobytes(), name


def test_embd_spec_written_by_save_file_reads_back(tmp_path):
    rng = np.random.default_rng(12)
    a = {"w": rng.standard_normal((5, 7)).astype(np.float32),
         "b": rng.standard_normal(7).astype(np.float16)}
    p = tmp_path / "m.weights"
    tensorbox.save_file(a, p)
    back = tensorbox.load_file(p)
    assert set(back) == set(a)
    for k in a:
        assert back[k].dtype == a[k].dtype and back[k].tobytes() == a[k].tobytes(), k
    assert tensorbox.validate(p) == []


def test_hf_directory_loads_like_its_safetensors():
    d = ROOT / "examples" / "tiny-embedder"
    want = stn.load_file(str(d / "model.safetensors"))
    got = tensorbox.load_file(d)
    assert set(got) == set(want)
    for k in want:
        assert got[k].dtype == want[k].dtype and got[k].tobytes() == want[k].tobytes(), k
