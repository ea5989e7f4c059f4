"""The Python package's contract beyond the values: documents, errors, memory, threads.

* tensorbox.info(path) is the document `tbx info --json` prints (same keys, same values; numbers
  compared at the precision of their type, packed arrays as lists);
* tensorbox.validate(path) lists the problems `tbx validate --json` prints (code, field,
  offset, message);
* a hostile file raises a tensorbox.Error subclass carrying the CLI's code, offset and field,
  at every truncation length, and never crashes the interpreter;
* zero-copy: arrays of a mapped file point into the file's mapping (/proc/self/maps), keep the
  file alive after close(), and loading a 1 GiB tensor grows peak RSS by far less than 1 GiB;
* reading from 8 threads at once gives the single-threaded results;
* framework="pt" gives torch tensors when torch is installed (ImportError when it is not).
"""
from __future__ import annotations

import gc
import json
import math
import os
import struct
import subprocess
import sys
import threading

import numpy as np
import pytest

from conftest import info_json, need, run

tensorbox = need("tensorbox")
gguf = need("gguf")
ml_dtypes = need("ml_dtypes")


# ------------------------------------------------------------------------------------------
# Files
# ------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("api")
    rng = np.random.default_rng(5)
    a = {
        "emb": rng.standard_normal((64, 256)).astype(np.float32),
        "h": rng.standard_normal((16, 32)).astype(np.float16),
        "b": rng.standard_normal((8, 8)).astype(ml_dtypes.bfloat16),
        "i": np.arange(-5, 5, dtype=np.int64),
    }
    out = {"arrays": a}
    out["st"] = d / "a.safetensors"
    tensorbox.save_file(a, out["st"], metadata={"k": "v"})
    out["gguf"] = d / "a.gguf"
    tensorbox.save_file(a, out["gguf"], quant="q4_k",
                        metadata={"general.architecture": "t", "t.n": np.uint32(3),
                                  "t.f": np.float32(0.1), "t.toks": ["x", "y"],
                                  "t.u8": np.arange(5, dtype=np.uint8), "t.nan": float("nan")})
    out["zt"] = d / "a.zt"
    tensorbox.save_file(a, out["zt"], compress=3, digest="sha256",
                        metadata={"m": {"x": 1, "y": [1.5, 2.5]}, "by": b"\x00\xff"})
    big = {f"z{i}": rng.standard_normal((512, 1024)).astype(np.float32) for i in range(4)}
    out["zt_big"] = d / "big.zt"
    tensorbox.save_file(big, out["zt_big"], compress=1)
    out["zt_raw"] = d / "raw.zt"
    tensorbox.save_file(a, out["zt_raw"], digest="sha256")
    out["oinf"] = d / "a.oinf"
    tensorbox.save_file({k: v for k, v in a.items()}, out["oinf"], metadata={"s": "t"})
    return out


# ------------------------------------------------------------------------------------------
# info / validate against the CLI
# ------------------------------------------------------------------------------------------
def same(py, cli, where="$"):
    """Is the Python value the JSON value tbx printed (at the precision of its type)?"""
    if isinstance(py, np.ndarray):
        py = py.tolist()
    if isinstance(py, dict):
        assert isinstance(cli, dict) and list(py) == list(cli), f"{where}: keys {list(py)} vs {list(cli)}"
        for k in py:
            same(py[k], cli[k], f"{where}.{k}")
    elif isinstance(py, list):
        assert isinstance(cli, list) and len(py) == len(cli), f"{where}: {py!r} vs {cli!r}"
        for i, (x, y) in enumerate(zip(py, cli)):
            same(x, y, f"{where}[{i}]")
    elif isinstance(py, bool) or py is None or isinstance(py, str):
        assert py == cli and type(py) is type(cli), f"{where}: {py!r} vs {cli!r}"
    elif isinstance(py, int):
        assert type(cli) is int and py == cli, f"{where}: {py!r} vs {cli!r}"
    elif isinstance(py, float):
        if math.isnan(py) or math.isinf(py):  # JSON has no NaN: tbx prints a string
            assert cli == {"nan": "nan", "inf": "inf", "-inf": "-inf"}[repr(py)], where
        else:  # tbx prints the shortest text that reads back as the same value of its type
            assert isinstance(cli, (int, float)) and (py == cli or np.float32(py) == np.float32(cli)
                                                      or np.float16(py) == np.float16(cli)), \
                f"{where}: {py!r} vs {cli!r}"
    elif isinstance(py, bytes):
        assert cli == py.hex(), f"{where}: {py!r} vs {cli!r}"
    else:
        raise AssertionError(f"{where}: unexpected {type(py)}")


@pytest.mark.parametrize("kind", ["st", "gguf", "zt", "oinf"])
@pytest.mark.parametrize("types", [False, True], ids=["plain", "types"])
def test_info_is_the_cli_document(tbx, files, kind, types):
    p = files[kind]
    if types:
        r = run(tbx, "info", "--json", "--types", str(p))
        assert r.rc == 0, r.describe()
        cli = json.loads(r.out)
    else:
        cli = info_json(tbx, p)
    py = tensorbox.info(p, types=types)
    same(py, cli)
    with tensorbox.safe_open(p) as f:
        same(f.info(types=types), cli)


def test_info_quant_object(tbx, files):
    doc = tensorbox.info(files["gguf"])
    q = {t["name"]: t.get("quant") for t in doc["tensors"]}
    assert q["emb"]["method"] == "ggml" and q["emb"]["code_dtype"] == "q4_k"
    assert q["i"] is None


def _corrupt_digest(src, dst):
    blob = bytearray(src.read_bytes())
    t = [t for t in tensorbox.info(src)["tensors"] if t["name"] == "i"][0]
    off = t["components"][0]["offset"]
    blob[off] ^= 0xFF
    dst.write_bytes(bytes(blob))


def test_validate_matches_cli(tbx, files, tmp_path):
    for kind in ("st", "gguf", "zt", "oinf"):
        assert tensorbox.validate(files[kind]) == [], kind
    bad = tmp_path / "bad.zt"
    _corrupt_digest(files["zt_raw"], bad)
    r = run(tbx, "validate", "--json", str(bad))
    assert r.rc == 1, r.describe()
    cli = [json.loads(line) for line in r.out.decode().splitlines()]
    cli = [c for c in cli if "code" in c]
    py = tensorbox.validate(bad)
    assert len(py) == len(cli) >= 1
    for p, c in zip(py, cli):
        assert (p.code, p.field, p.offset, p.message) == (c["code"], c["field"], c["offset"],
                                                          c["message"])
    assert py[0].code == "TBX_E_CHECKSUM"
    with pytest.raises(tensorbox.ChecksumError) as ei:
        tensorbox.load_file(bad, verify=True)
    assert ei.value.code == "TBX_E_CHECKSUM" and ei.value.offset == py[0].offset


# ------------------------------------------------------------------------------------------
# Errors
# ------------------------------------------------------------------------------------------
def test_error_hierarchy():
    for cls in (tensorbox.FormatError, tensorbox.LimitError, tensorbox.UnsupportedError,
                tensorbox.NotFoundError, tensorbox.ChecksumError, tensorbox.ExistsError,
                tensorbox.LossyError, tensorbox.IOError, tensorbox.InvalidArgumentError):
        assert issubclass(cls, tensorbox.Error)
    assert issubclass(tensorbox.NotFoundError, KeyError)
    assert issubclass(tensorbox.IOError, OSError)


def test_missing_file_and_tensor(tmp_path, files):
    with pytest.raises(tensorbox.IOError) as ei:
        tensorbox.safe_open(tmp_path / "nope.gguf")
    assert ei.value.code == "TBX_E_IO"
    with tensorbox.safe_open(files["st"]) as f:
        with pytest.raises(tensorbox.NotFoundError) as ei:
            f.get_tensor("nope")
        assert ei.value.code == "TBX_E_NOT_FOUND"
        assert ei.value.offset is None
    with pytest.raises(ValueError):
        f.get_tensor("emb")  # closed


@pytest.mark.parametrize("kind", ["st", "gguf", "zt", "oinf"])
def test_truncated_files_raise_what_the_cli_reports(tbx, files, kind, tmp_path):
    blob = files[kind].read_bytes()
    p = tmp_path / ("t." + files[kind].suffix)
    cuts = sorted(set(list(range(0, min(len(blob), 200))) +
                      list(range(200, len(blob), max(1, len(blob) // 60)))))
    for n in cuts:
        p.write_bytes(blob[:n])
        try:
            tensorbox.load_file(p)
        except tensorbox.Error as e:
            r = run(tbx, "validate", "--json", str(p))
            first = json.loads(r.out.decode().splitlines()[0])
            assert (e.code, e.offset, e.field) == (first["code"], first["offset"],
                                                   first["field"]), (kind, n)
            assert isinstance(e, (tensorbox.FormatError, tensorbox.LimitError)), (kind, n, e)
        else:
            raise AssertionError(f"{kind}: a file cut at {n} of {len(blob)} bytes loaded")


def test_huge_declared_shape_is_a_limit_or_format_error(tmp_path):
    hdr = json.dumps({"x": {"dtype": "F32", "shape": [2**40, 2**30],
                            "data_offsets": [0, 16]}}).encode()
    p = tmp_path / "huge.safetensors"
    p.write_bytes(struct.pack("<Q", len(hdr)) + hdr + bytes(16))
    with pytest.raises(tensorbox.Error) as ei:
        tensorbox.load_file(p)
    assert ei.value.code in ("TBX_E_OVERFLOW", "TBX_E_RANGE", "TBX_E_LIMIT", "TBX_E_FORMAT")


# ------------------------------------------------------------------------------------------
# Zero copy
# ------------------------------------------------------------------------------------------
def _mappings_of(path):
    real = os.path.realpath(path)
    out = []
    with open("/proc/self/maps") as fh:
        for line in fh:
            parts = line.split(None, 5)
            if len(parts) == 6 and parts[5].strip() == real:
                lo, hi = (int(x, 16) for x in parts[0].split("-"))
                out.append((lo, hi))
    return out


def test_arrays_point_into_the_file_mapping(files):
    p = files["st"]
    with tensorbox.safe_open(p) as f:
        a = f.get_tensor("emb")
        s = f.get_slice("emb")[3:9]
    maps = _mappings_of(p)
    assert maps, "the file is not mapped"
    for arr in (a, s):
        addr = arr.__array_interface__["data"][0]
        assert any(lo <= addr and addr + arr.nbytes <= hi for lo, hi in maps), hex(addr)
        assert not arr.flags.writeable
    # the file stays mapped while an array lives, after close()
    np.testing.assert_array_equal(a, files["arrays"]["emb"])
    del a, s, arr
    gc.collect()
    assert not _mappings_of(p), "the mapping outlived the last array"


RSS_SCRIPT = r"""
import json, resource, sys, numpy as np, tensorbox
def peak():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
before = peak()
d = tensorbox.load_file(sys.argv[1])
a = d["big"]
assert a.shape == (268435456,) and a.dtype == np.float32
assert float(a[-1]) == 0.0 and float(a[12345678]) == 0.0
print(json.dumps({"before": before, "after": peak()}))
"""


def test_one_gib_tensor_is_not_copied(tmp_path):
    hdr = json.dumps({"big": {"dtype": "F32", "shape": [268435456],
                              "data_offsets": [0, 1 << 30]}}).encode()
    hdr += b" " * (-len(hdr) % 8)
    p = tmp_path / "big.safetensors"
    with open(p, "wb") as fh:
        fh.write(struct.pack("<Q", len(hdr)) + hdr)
        fh.truncate(8 + len(hdr) + (1 << 30))  # sparse: 1 GiB of zeros
    r = subprocess.run([sys.executable, "-c", RSS_SCRIPT, str(p)], capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    m = json.loads(r.stdout)
    grew = m["after"] - m["before"]
    assert grew < 64 << 20, f"peak RSS grew by {grew} bytes for a 1 GiB tensor"


# ------------------------------------------------------------------------------------------
# Threads
# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["st", "gguf", "zt", "zt_big"])
def test_threads_give_the_same_results(files, kind):
    p = files[kind]
    want = {k: np.array(v) for k, v in tensorbox.load_file(p, dequantize=True).items()}
    f = tensorbox.safe_open(p, dequantize=True)
    names = list(want)
    errors = []

    def work(seed):
        rng = np.random.default_rng(seed)
        try:
            for _ in range(30):
                k = names[rng.integers(len(names))]
                if rng.integers(2):
                    got = f.get_tensor(k)
                    assert got.tobytes() == want[k].tobytes(), k
                else:
                    n = want[k].shape[0]
                    lo = int(rng.integers(n))
                    got = f.get_slice(k)[lo:n]
                    assert got.tobytes() == want[k][lo:n].tobytes(), k
                g2 = tensorbox.load_file(p, dequantize=True)[k]  # a handle per call too
                assert g2.tobytes() == want[k].tobytes(), k
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    ts = [threading.Thread(target=work, args=(s,)) for s in range(8)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    f.close()
    assert not errors, errors[0]


# ------------------------------------------------------------------------------------------
# torch (optional)
# ------------------------------------------------------------------------------------------
def test_framework_pt(files):
    try:
        import torch
    except ImportError:
        with pytest.raises(ImportError):
            tensorbox.load_file(files["st"], framework="pt")
        return
    got = tensorbox.load_file(files["st"], framework="pt")
    for k, v in files["arrays"].items():
        t = got[k]
        assert isinstance(t, torch.Tensor)
        if k == "b":
            assert t.dtype == torch.bfloat16
            np.testing.assert_array_equal(t.float().numpy(), v.astype(np.float32))
        else:
            np.testing.assert_array_equal(t.numpy(), v)
    # torch tensors are writable copies, never the read-only mapping
    got["emb"][0, 0] = 42.0
    assert tensorbox.load_file(files["st"])["emb"][0, 0] == files["arrays"]["emb"][0, 0]
    # and save_file takes torch tensors (bf16 included)
    tensorbox.save_file(got, files["st"].with_name("pt.safetensors"), force=True)
    back = tensorbox.load_file(files["st"].with_name("pt.safetensors"))
    assert back["b"].tobytes() == files["arrays"]["b"].tobytes()


def test_help_is_useful():
    import pydoc

    text = pydoc.render_doc(tensorbox, renderer=pydoc.plaintext)
    for word in ("safe_open", "load_file", "save_file", "convert", "validate", "info",
                 "FormatError", "dequantize"):
        assert word in text, word


def test_close_while_other_threads_read(files):
    """close() from one thread while others are inside the library on the same file: the
    readers finish their call or get "closed", never a crash (run under ASan by the lead's
    sanitizer check of the extension)."""
    p = files["zt_big"]
    want = {k: np.array(v) for k, v in tensorbox.load_file(p).items()}
    for _ in range(5):
        f = tensorbox.safe_open(p)
        outcomes = []

        def work(seed):
            rng = np.random.default_rng(seed)
            for _ in range(40):
                k = f"z{int(rng.integers(4))}"
                lo = int(rng.integers(512))
                try:
                    got = f.get_slice(k)[lo:]
                except ValueError as e:
                    assert "closed" in str(e)
                    outcomes.append("closed")
                    return
                assert got.tobytes() == want[k][lo:].tobytes()
            outcomes.append("done")

        ts = [threading.Thread(target=work, args=(s,)) for s in range(4)]
        for t in ts:
            t.start()
        f.close()
        for t in ts:
            t.join()
        assert len(outcomes) == 4, outcomes
