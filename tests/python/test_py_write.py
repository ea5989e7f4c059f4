"""Files written by tensorbox.save_file / tensorbox.convert read identically in each peer.

* safetensors: save_file's bytes equal safetensors.numpy.save_file's (same tensors, same
  metadata), and safetensors reads them back;
* GGUF: gguf.GGUFReader reads the tensors and the typed metadata save_file wrote; quant="q8_0"
  gives blocks gguf-py dequantizes to within q8_0's error of the input;
* zTensor: ztensor 1.1.1 reads save_file's tensors (raw, zstd, with digests);
* OINF: the reference verifier (verify_oinf.py) accepts the file and its values match;
* round trips keep metadata types; errors are the library's (ExistsError without force,
  LossyError for metadata a format cannot store).
"""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from conftest import need

tensorbox = need("tensorbox")
stn = need("safetensors.numpy")
gguf = need("gguf")
ml_dtypes = need("ml_dtypes")


def arrays():
    rng = np.random.default_rng(7)
    return {
        "w": rng.standard_normal((8, 64)).astype(np.float32),
        "h": rng.standard_normal((3, 5)).astype(np.float16),
        "b": rng.standard_normal((4, 4)).astype(ml_dtypes.bfloat16),
        "i": rng.integers(-1000, 1000, (10,), dtype=np.int32),
        "u": rng.integers(0, 255, (2, 3), dtype=np.uint8),
        "d": rng.standard_normal((2, 2)),
    }


def test_safetensors_bytes_equal_peer(tmp_path):
    # safetensors orders its header by (alignment descending, name); tensorbox writes the
    # tensors in the order given: give them in that order
    a = dict(sorted(arrays().items(), key=lambda kv: (-kv[1].dtype.itemsize, kv[0])))
    # one metadata key: safetensors writes __metadata__ from a Rust HashMap, in an order that
    # changes from process to process when there are several keys
    meta = {"format": "np"}
    mine, ref = tmp_path / "mine.safetensors", tmp_path / "ref.safetensors"
    tensorbox.save_file(a, mine, metadata=meta)
    stn.save_file(a, str(ref), metadata=meta)
    assert mine.read_bytes() == ref.read_bytes()
    back = stn.load_file(str(mine))
    for k, v in a.items():
        assert back[k].tobytes() == v.tobytes() and back[k].dtype == v.dtype, k
    many = {"format": "np", "who": "tensorbox", "z": "last"}
    tensorbox.save_file(a, mine, metadata=many, force=True)
    with stn.safe_open(str(mine), "np") as f:
        assert f.metadata() == many


def test_sync_false_same_bytes(tmp_path):
    a = dict(sorted(arrays().items(), key=lambda kv: (-kv[1].dtype.itemsize, kv[0])))
    x, y = tmp_path / "x.safetensors", tmp_path / "y.safetensors"
    tensorbox.save_file(a, x)
    tensorbox.save_file(a, y, sync=False)
    assert x.read_bytes() == y.read_bytes()
    g1, g2 = tmp_path / "g1.zt", tmp_path / "g2.zt"
    tensorbox.convert(x, g1)
    tensorbox.convert(x, g2, sync=False)
    assert g1.read_bytes() == g2.read_bytes()
    # the lossy path (a scratch zTensor file, then tbx_convert) takes it too
    tensorbox.save_file({"w": a["w"]}, tmp_path / "q.gguf", quant="q8_0", sync=False)
    assert gguf.GGUFReader(str(tmp_path / "q.gguf")).tensors[0].tensor_type == gguf.GGMLQuantizationType.Q8_0
    with pytest.raises(TypeError):
        tensorbox.save_file(a, tmp_path / "z.safetensors", no_such_option=True)


def test_exists_needs_force(tmp_path):
    p = tmp_path / "x.safetensors"
    tensorbox.save_file({"a": np.zeros(3, np.float32)}, p)
    with pytest.raises(tensorbox.ExistsError) as ei:
        tensorbox.save_file({"a": np.ones(3, np.float32)}, p)
    assert ei.value.code == "TBX_E_EXISTS"
    assert isinstance(ei.value, FileExistsError)
    tensorbox.save_file({"a": np.ones(3, np.float32)}, p, force=True)
    assert tensorbox.load_file(p)["a"].tolist() == [1, 1, 1]


def test_safetensors_refuses_typed_metadata(tmp_path):
    with pytest.raises((tensorbox.LossyError, tensorbox.UnsupportedError)) as ei:
        tensorbox.save_file({"a": np.zeros(2, np.float32)}, tmp_path / "m.safetensors",
                            metadata={"n": 3})
    assert ei.value.code in ("TBX_E_LOSSY", "TBX_E_UNSUPPORTED")
    assert not (tmp_path / "m.safetensors").exists()
    # the explicit lossy step stores it as a string
    tensorbox.save_file({"a": np.zeros(2, np.float32)}, tmp_path / "m.safetensors",
                        metadata={"n": 3}, stringify_meta=True)
    assert stn.safe_open(str(tmp_path / "m.safetensors"), "np").metadata() == {"n": "3"}


def test_gguf_written_reads_in_gguf_py(tmp_path):
    a = {k: v for k, v in arrays().items() if k != "u"}  # GGUF has no u8 tensors
    meta = {"general.architecture": "test", "test.count": np.uint32(5), "test.big": 2**40,
            "test.eps": np.float32(0.25), "test.name": "n\u00e4me", "test.flag": True,
            "test.tokens": ["a", "bb", "ccc"], "test.scores": np.arange(4, dtype=np.float32)}
    p = tmp_path / "w.gguf"
    tensorbox.save_file(a, p, metadata=meta)
    r = gguf.GGUFReader(str(p))
    fields = r.fields

    def val(k):
        return fields[k].contents()

    assert val("test.count") == 5 and fields["test.count"].types[0] == gguf.GGUFValueType.UINT32
    assert val("test.big") == 2**40 and fields["test.big"].types[0] == gguf.GGUFValueType.INT64
    assert val("test.eps") == 0.25 and fields["test.eps"].types[0] == gguf.GGUFValueType.FLOAT32
    assert val("test.name") == "n\u00e4me"
    assert val("test.flag") is True
    assert val("test.tokens") == ["a", "bb", "ccc"]
    assert val("test.scores") == [0.0, 1.0, 2.0, 3.0]
    by = {t.name: t for t in r.tensors}
    assert sorted(by) == sorted(a)
    for k, v in a.items():
        t = by[k]
        data = np.asarray(t.data)
        if k == "b":
            got = gguf.quants.dequantize(data, gguf.GGMLQuantizationType.BF16)
            np.testing.assert_array_equal(got.reshape(v.shape), v.astype(np.float32))
        else:
            assert data.reshape(v.shape).tobytes() == v.tobytes(), k
    # and back through tensorbox, types kept
    m = tensorbox.safe_open(p).metadata()
    assert type(m["test.count"]) is int and m["test.count"] == 5
    assert m["test.tokens"] == ["a", "bb", "ccc"]


def test_save_quantized_q8_0(tmp_path):
    rng = np.random.default_rng(3)
    w = rng.standard_normal((16, 256)).astype(np.float32)
    p = tmp_path / "q.gguf"
    tensorbox.save_file({"w": w, "bias": np.ones(4, np.float32)}, p, quant="q8_0")
    r = gguf.GGUFReader(str(p))
    t = {t.name: t for t in r.tensors}["w"]
    assert t.tensor_type == gguf.GGMLQuantizationType.Q8_0
    deq = gguf.quants.dequantize(np.asarray(t.data), t.tensor_type)
    assert deq.shape == w.shape
    # q8_0: error at most half a step of each block's scale (absmax / 127), plus the f16
    # rounding of that scale (relative 2^-11, times at most 127 codes)
    absmax = np.abs(w.reshape(16, 8, 32)).max(axis=2, keepdims=True)
    bound = absmax / 127 * 0.5 + absmax / 2048 + 1e-6
    assert np.all(np.abs(deq.reshape(16, 8, 32) - w.reshape(16, 8, 32)) <= bound)
    # the same values through tensorbox
    np.testing.assert_array_equal(tensorbox.load_file(p, dequantize=True)["w"], deq)
    assert not list(tmp_path.glob(".*tbx-py*")), "temporary file left behind"


@pytest.mark.parametrize("opts", [{}, {"compress": 3}, {"compress": 3, "digest": "sha256"},
                                  {"digest": "crc32c"}], ids=["raw", "zstd", "zstd-sha", "crc"])
def test_ztensor_written_reads_in_ztensor(tmp_path, opts):
    ztensor = need("ztensor")
    a = {k: v for k, v in arrays().items() if k != "b"}
    p = tmp_path / "w.zt"
    tensorbox.save_file(a, p, **opts)
    reader = ztensor.Reader(str(p))
    for k, v in a.items():
        got = np.array(reader.read_tensor(k, to="numpy"), copy=True)
        assert got.tobytes() == v.tobytes(), k
    back = tensorbox.load_file(p, verify=True)
    for k, v in a.items():
        assert back[k].tobytes() == v.tobytes() and back[k].shape == v.shape, k


def test_oinf_written_passes_reference_verifier(tmp_path):
    import test_oinf_interop as oi

    a = {k: v for k, v in arrays().items()}
    p = tmp_path / "w.oinf"
    tensorbox.save_file(a, p, metadata={"note": "hi", "n": np.int32(-4)})
    r = subprocess.run([sys.executable, oi.verify_script(), str(p)], capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    blob = p.read_bytes()
    tables = oi.parse_tables(blob)
    for t in tables["tensors"]:
        want = a[t["name"]]
        got = oi.ref_tensor_values(blob, t)
        np.testing.assert_array_equal(got.astype(np.float64), want.astype(np.float64),
                                      err_msg=t["name"])


def test_convert_round_trip(tmp_path):
    a = {k: v for k, v in arrays().items() if k != "u"}  # GGUF has no u8 tensors
    src = tmp_path / "a.safetensors"
    tensorbox.save_file(a, src)
    tensorbox.convert(src, tmp_path / "a.gguf")
    tensorbox.convert(tmp_path / "a.gguf", tmp_path / "b.zt", compress=5, digest="sha256")
    tensorbox.convert(tmp_path / "b.zt", tmp_path / "c.safetensors")
    assert (tmp_path / "c.safetensors").read_bytes() == src.read_bytes()
    with pytest.raises(tensorbox.ExistsError):
        tensorbox.convert(src, tmp_path / "a.gguf")
    tensorbox.convert(src, tmp_path / "h.gguf", cast="f16")
    h = tensorbox.load_file(tmp_path / "h.gguf")
    assert h["w"].dtype == np.float16
    np.testing.assert_array_equal(h["w"], a["w"].astype(np.float16))


def test_stringified_metadata_is_json(tmp_path):
    """--stringify-meta (stringify_meta=True): strings stay as they are, other values become
    compact JSON that an independent parser reads back (escapes, nested arrays, numbers)."""
    src = tmp_path / "m.gguf"
    w = gguf.GGUFWriter(str(src), "test")
    w.add_uint32("t.u32", 7)
    w.add_float32("t.f32", 0.5)
    w.add_bool("t.flag", True)
    w.add_string("t.name", 'q"uo\\te')
    w.add_array("t.tokens", ['a"b', "c\\d", "e\x01f", "\u00e9"])
    w.add_array("t.scores", [1.5, -2.0])
    w.add_tensor("x", np.arange(4, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    out = tmp_path / "m.safetensors"
    tensorbox.convert(src, out, stringify_meta=True)
    meta = stn.safe_open(str(out), "np").metadata()
    import json
    assert json.loads(meta["t.u32"]) == 7
    assert json.loads(meta["t.f32"]) == 0.5
    assert json.loads(meta["t.flag"]) is True
    assert meta["t.name"] == 'q"uo\\te'
    assert json.loads(meta["t.tokens"]) == ['a"b', "c\\d", "e\x01f", "\u00e9"]
    assert json.loads(meta["t.scores"]) == [1.5, -2.0]


def _mcf_ranks(blob: bytes) -> dict:
    """{name: rank} from an MCF file's TensorIndex (parsed from the layout in
    docs/formats/mcf.md, not by tensorbox)."""
    import struct
    count, dir_off = struct.unpack_from("<IQ", blob, 12)
    secs = [struct.unpack_from("<IIQQ", blob, dir_off + 24 * i) for i in range(count)]
    base = next(s[2] for s in secs if s[0] == 3)
    _v, _f, n, _nd, eo, _do, so, _ss = struct.unpack_from("<IIIIQQQQ", blob, base)
    out = {}
    for i in range(n):
        noff, nlen, _dt, rank = struct.unpack_from("<IIII", blob, base + eo + 40 * i)
        out[blob[base + so + noff:base + so + noff + nlen].decode()] = rank
    return out


def test_scalars_keep_shape_empty(tmp_path):
    """A numpy scalar or a 0-d array is a tensor of shape () (issue 19): each format's own
    reader reads it back as a scalar, not as [1]; EMBD, which has no rank 0, refuses it."""
    import test_oinf_interop as oi
    ztensor = need("ztensor")
    a = {"s": np.float32(3), "d": np.array(5.5), "i": np.array(-7, np.int32),
         "h": np.float16(0.25),
         "t": np.arange(12, dtype=np.float32).reshape(3, 4)[:, ::2],  # not C-contiguous
         "f": np.asfortranarray(np.arange(6, dtype=np.int32).reshape(2, 3))}
    want = {k: np.asarray(v) for k, v in a.items()}
    assert want["s"].shape == () and want["t"].shape == (3, 2)

    def same(k, got):
        got = np.asarray(got)
        assert got.shape == want[k].shape, (k, got.shape)
        assert got.tobytes() == np.ascontiguousarray(want[k]).tobytes(), k

    p = tmp_path / "s.safetensors"
    tensorbox.save_file(a, p)
    for k, v in stn.load_file(str(p)).items():
        same(k, v)
    p = tmp_path / "s.gguf"
    tensorbox.save_file(a, p)
    for t in gguf.GGUFReader(str(p)).tensors:
        assert list(t.shape) == list(reversed(want[t.name].shape)), t.name  # ggml order
        same(t.name, np.asarray(t.data).reshape(want[t.name].shape))
    p = tmp_path / "s.zt"
    tensorbox.save_file(a, p)
    r = ztensor.Reader(str(p))
    for k in a:
        same(k, np.array(r.read_tensor(k, to="numpy"), copy=True))
    p = tmp_path / "s.oinf"
    tensorbox.save_file(a, p)
    blob = p.read_bytes()
    for t in oi.parse_tables(blob)["tensors"]:
        same(t["name"], oi.ref_tensor_values(blob, t))
    p = tmp_path / "s.mcf"
    tensorbox.save_file(a, p)
    assert _mcf_ranks(p.read_bytes()) == {k: v.ndim for k, v in want.items()}
    # and back through tensorbox, from every format; also through the convert path (cast)
    for ext in ("safetensors", "gguf", "zt", "oinf", "mcf"):
        for k, v in tensorbox.load_file(tmp_path / f"s.{ext}").items():
            same(k, v)
    p = tmp_path / "c.safetensors"
    tensorbox.save_file({"s": np.float32(3)}, p, cast="f16")
    assert stn.load_file(str(p))["s"].shape == ()
    with pytest.raises(tensorbox.UnsupportedError, match="0"):
        tensorbox.save_file({"s": np.float32(3)}, tmp_path / "s.weights")
    assert not (tmp_path / "s.weights").exists()
