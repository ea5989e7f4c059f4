"""The Python package's contract beyond the values: documents, errors, memory, threads.

* tensorbox.info(path) is the document `tbx info --json` prints (same keys, same values; numbers
  compared at the precision of their type, packed arrays as lists);
* tensorbox.validate(path) lists the problems `tbx validate --json` prints (code, field,
  offset, message);
* a hostile file raises a tensorbox.Error subclass carrying the CLI's code, offset and field,
  at every truncation length, and never crashes the interpreter;
* zero-copy: arrays of a mapped file point into the file's mapping (/proc/self/maps), keep the
  file alive after close(), and loading a 1 GiB tensor grows peak RSS by far less than 1 GiB;
* reading from 8 threads at once gives the single-threaded results, also through one handle
  whose calls must be serialised (compressed range reads), and the GIL is released during a
  long read or decode (another Python thread keeps running);
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
import time

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


ROOT = __import__("pathlib").Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def format_files(tmp_path_factory, files):
    """Files whose description has a member of the format's own or of a set: MCF (its section
    directory), EMBD and legacy EMBD (header, vocabulary), a Hugging Face directory (its
    files), OINF v2 (quantization values) and OINF with size variables."""
    from test_oinf_malformed import sample_v2
    d = tmp_path_factory.mktemp("fmt")
    out = {"embd": ROOT / "tests/data/embd/tiny-spec.weights",
           "embd-legacy": ROOT / "tests/data/embd/tiny-legacy.bin",
           "hf": ROOT / "examples/tiny-embedder"}
    out["mcf"] = d / "a.mcf"
    tensorbox.save_file(files["arrays"], out["mcf"])
    out["oinf-v2"] = d / "q.oinf"
    out["oinf-v2"].write_bytes(sample_v2().build()[0])
    return out


@pytest.mark.parametrize("kind", ["mcf", "embd", "embd-legacy", "hf", "oinf-v2"])
@pytest.mark.parametrize("types", [False, True], ids=["plain", "types"])
def test_info_is_the_cli_document_every_member(tbx, format_files, kind, types):
    """The format's own member (mcf_directory, embd), a set's files and the quantization
    values: the same document in Python as from the CLI, both from tbx_file_describe."""
    p = format_files[kind]
    r = run(tbx, "info", "--json", *(["--types"] if types else []), str(p))
    assert r.rc == 0, r.describe()
    cli = json.loads(r.out)
    own = {"mcf": "mcf_directory", "embd": "embd", "embd-legacy": "embd", "hf": "files"}
    if kind in own:
        assert own[kind] in cli, list(cli)
    py = tensorbox.info(p, types=types)
    same(py, cli)
    with tensorbox.safe_open(p) as f:
        same(f.info(types=types), cli)
    # the extension's quant(i) (is_quantized, dequantize): the tensor's "quant" object of the
    # same document (tbx_tensor_describe)
    g = tensorbox._tb._File(os.fspath(p), mmap=False)
    try:
        for i, t in enumerate(cli["tensors"]):
            q = g.quant(i)
            if "quant" in t and not types:
                same(q, t["quant"], f"$.tensors[{i}].quant")
            elif "quant" not in t:
                assert q is None
    finally:
        g.close()


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


HAMMER = r"""
import sys, threading, time
import numpy as np
import tensorbox

path = sys.argv[1]
want = {k: np.array(v) for k, v in tensorbox.load_file(path).items()}
names = sorted(want)
f = tensorbox.safe_open(path)
errors, spans = [], []

def work(seed):
    rng = np.random.default_rng(seed)
    try:
        for _ in range(8):
            k = names[int(rng.integers(len(names)))]
            n = want[k].shape[0]
            step = int(rng.integers(32, 160))
            for lo in range(0, n, step):
                t0 = time.perf_counter()
                got = f.get_slice(k)[lo:lo + step]
                spans.append((t0, time.perf_counter()))
                if got.tobytes() != want[k][lo:lo + step].tobytes():
                    errors.append(f"{k}[{lo}:{lo + step}]: wrong rows")
                    return
    except BaseException as e:
        errors.append(repr(e))

ts = [threading.Thread(target=work, args=(s,)) for s in range(8)]
for t in ts:
    t.start()
for t in ts:
    t.join()
f.close()
spans.sort()
overlapping = sum(1 for a, b in zip(spans, spans[1:]) if b[0] < a[1])
print("calls", len(spans), "overlapping", overlapping)
print("errors", errors[:3])
sys.exit(1 if errors else 0)
"""


@pytest.fixture(scope="module")
def compressible(tmp_path_factory):
    """4 tensors of 1024 x 1024 float32 of few distinct values, zstd level 3: decoding them
    is real work (entropy coding), so range reads spend their time inside the decoder."""
    p = tmp_path_factory.mktemp("hammer") / "c.zt"
    rng = np.random.default_rng(12)
    t = {f"c{i}": rng.integers(0, 16, (1024, 1024)).astype(np.float32) for i in range(4)}
    tensorbox.save_file(t, p, compress=3)
    return p


def test_one_handle_from_many_threads_reads_compressed_ranges_right(compressible):
    """8 threads read zstd-compressed tensors front to back in row ranges, all through ONE
    handle. The library keeps one zstd decoding context and cursor per component in the handle
    (tbx_component_read_range), so calls that are not serialised decode through the same
    context at once: wrong rows, or a crash (hence a child process). The extension's
    per-handle lock must serialise them. The calls are timed to check that they really were in
    flight together (which also needs the GIL released during them)."""
    r = subprocess.run([sys.executable, "-c", HAMMER, str(compressible)], capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, f"exit {r.returncode}:\n{r.stdout[-2000:]}{r.stderr[-3000:]}"
    calls, overlapping = (int(x) for x in r.stdout.split()[1:4:2])
    assert overlapping > calls // 10, r.stdout


@pytest.fixture(scope="module")
def long_reads(tmp_path_factory):
    """Files with a tensor that takes one long library call to read, and a small f32 tensor
    "s": a 24 M-element q4_K tensor "w" (dequantized to float32) and a 96 MiB zstd-compressed
    float32 tensor "z" of 16 distinct values (entropy-coded, about 0.1 s to decode)."""
    d = tmp_path_factory.mktemp("gil")
    rng = np.random.default_rng(11)
    qt = gguf.GGMLQuantizationType.Q4_K
    bs, bb = gguf.GGML_QUANT_SIZES[qt]
    rows, cols = 3072, 8192
    raw = rng.integers(0, 256, rows * cols // bs * bb, dtype=np.uint8)
    raw[1::2] &= 0xBF  # finite, moderate f16 scales
    q = d / "q4k.gguf"
    w = gguf.GGUFWriter(str(q), "gil")
    w.add_tensor("w", raw.reshape(rows, cols // bs * bb), raw_dtype=qt)
    w.add_tensor("s", np.arange(4, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    z = d / "z.zt"
    big = rng.integers(0, 16, (6144, 4096)).astype(np.float32)  # entropy-coded: slow to decode
    tensorbox.save_file({"z": big, "s": np.arange(4, dtype=np.float32)}, z, compress=1)
    return {"q4k": (q, True), "zstd": (z, False)}


@pytest.mark.parametrize("kind", ["q4k", "zstd"])
def test_the_gil_is_released_during_a_long_read(long_reads, kind):
    """While one thread is inside a long get_tensor (one library call: dequantizing, or
    decoding zstd), another Python thread keeps running: the longest pause of its ticks
    stays well below the call's length. Holding the GIL in the call would stop it for the
    whole call."""
    path, deq = long_reads[kind]
    f = tensorbox.safe_open(path, dequantize=deq)
    name = {"q4k": "w", "zstd": "z"}[kind]
    f.get_tensor(name)  # warm: page cache, decoders
    results = []
    for _attempt in range(3):
        ticks = []
        stop = threading.Event()

        def ticker():
            while not stop.is_set():
                ticks.append(time.perf_counter())

        th = threading.Thread(target=ticker)
        th.start()
        time.sleep(0.02)
        t0 = time.perf_counter()
        a = f.get_tensor(name)
        t1 = time.perf_counter()
        stop.set()
        th.join()
        del a
        inside = [t0] + [t for t in ticks if t0 <= t <= t1] + [t1]
        gap = max(b - x for x, b in zip(inside, inside[1:]))
        results.append((round(t1 - t0, 4), round(gap, 4), len(inside) - 2))
        if t1 - t0 >= 0.01 and gap < 0.5 * (t1 - t0):
            break
    f.close()
    dur, gap, n = results[-1]
    assert dur >= 0.01, f"the call was too short to tell ({results})"
    assert gap < 0.5 * dur, f"the other thread stood still during the call: {results}"


def test_calls_on_one_handle_wait_for_each_other(long_reads):
    """The per-handle lock, seen from outside: while one thread is inside a long call on a
    handle (decoding 96 MiB of zstd), a short call on the SAME handle from another thread
    waits for it to end; a short call on ANOTHER handle of the file does not wait. Without the
    lock the short call would return at once."""
    path, _ = long_reads["zstd"]
    f = tensorbox.safe_open(path)
    g = tensorbox.safe_open(path)
    want = np.arange(4, dtype=np.float32)
    for h in (f, g):
        assert h.get_tensor("s").tolist() == want.tolist()  # warm: names, refs
    t = time.perf_counter()
    f.get_tensor("z")
    took = time.perf_counter() - t  # the long call's length on this machine (~0.07-0.3 s)
    lead = min(0.03, took / 5)      # let the long call start, leaving most of it to overlap
    need = max(0.02, took / 4)      # the overlap needed to tell waiting from not waiting
    seen = []
    for _attempt in range(5):
        started, times = threading.Event(), {}

        def long_call():
            started.set()
            f.get_tensor("z")
            times["a1"] = time.perf_counter()

        th = threading.Thread(target=long_call)
        th.start()
        started.wait()
        time.sleep(lead)
        t0 = time.perf_counter()
        other = g.get_tensor("s")  # another handle: no waiting
        t1 = time.perf_counter()
        same = f.get_tensor("s")   # the same handle: waits for the long call
        t2 = time.perf_counter()
        th.join()
        assert other.tolist() == want.tolist() and same.tolist() == want.tolist()
        window = times["a1"] - t1  # how long the long call still ran when ours began
        seen.append((round(t1 - t0, 4), round(t2 - t1, 4), round(window, 4)))
        if window >= need:
            break
    f.close()
    g.close()
    other_s, same_s, window = seen[-1]
    assert window >= need, f"the long call ended too early to tell (took {took:.3f} s): {seen}"
    assert same_s >= 0.75 * window, f"a call on the same handle did not wait: {seen}"
    assert other_s < 0.5 * window, f"a call on another handle waited: {seen}"


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


# ------------------------------------------------------------------------------------------
# Names holding a NUL (or another control byte) are escaped in messages, never cut (issue 19)
# ------------------------------------------------------------------------------------------
WRITABLE = ("safetensors", "gguf", "zt", "oinf", "mcf", "weights")


def test_nul_in_a_requested_name_is_escaped_not_cut(tmp_path):
    p = tmp_path / "ok.safetensors"
    tensorbox.save_file({"a": np.zeros(2, np.float32)}, p)
    with tensorbox.safe_open(p) as f:
        for call in (f.get_tensor, f.tensor_dtype, f.tensor_shape, f.get_slice):
            with pytest.raises(tensorbox.NotFoundError) as ei:
                call("a\0b")
            msg = ei.value.args[0]
            assert "'a\\x00b'" in msg and "\0" not in msg, (call.__name__, msg)
    with pytest.raises(tensorbox.UnsupportedError) as ei:
        tensorbox.save_file({"a\0b": np.zeros(2, object)}, tmp_path / "o.safetensors")
    assert "'a\\x00b'" in str(ei.value) and "\0" not in str(ei.value)


@pytest.mark.parametrize("ext", WRITABLE)
def test_every_writer_escapes_a_nul_name(tmp_path, ext):
    out = tmp_path / f"o.{ext}"
    with pytest.raises(tensorbox.InvalidArgumentError) as ei:
        tensorbox.save_file({"a\0b": np.zeros(2, np.float32)}, out)
    assert 'a\\x00b' in str(ei.value) and "\0" not in str(ei.value), str(ei.value)
    assert not out.exists()


@pytest.mark.parametrize("ext", WRITABLE)
def test_every_reader_escapes_a_nul_name(tbx, tmp_path, ext):
    """A file whose tensor name holds a NUL byte (the bytes of a written name patched): the
    open fails with a message that shows the whole name, the NUL escaped; tbx too."""
    src = tmp_path / f"s.{ext}"
    tensorbox.save_file({"aQZb": np.ones(2, np.float32)}, src)
    blob = src.read_bytes()
    assert blob.count(b"aQZb") == 1
    bad = tmp_path / f"nul.{ext}"
    bad.write_bytes(blob.replace(b"aQZb", b"a\0Zb"))
    with pytest.raises(tensorbox.Error) as ei:
        tensorbox.load_file(bad)
    msg = str(ei.value)
    assert "a\\x00Zb" in msg and "\0" not in msg, msg
    r = run(tbx, "info", bad)
    assert r.rc == 1 and b"a\\x00Zb" in r.err and b"\0" not in r.err, r.describe()


def test_index_json_nul_name_is_escaped(tbx, tmp_path):
    """A raw NUL byte in a weight_map name of model.safetensors.index.json (invalid JSON):
    the message shows the name around it escaped, not jansson's token cut at the NUL."""
    d = tmp_path / "m"
    d.mkdir()
    tensorbox.save_file({"ab": np.ones(2, np.float32)}, d / "model-00001-of-00001.safetensors")
    (d / "model.safetensors.index.json").write_bytes(
        b'{"metadata": {}, "weight_map": {"a\0Zb": "model-00001-of-00001.safetensors"}}')
    r = run(tbx, "info", d)
    assert r.rc == 1 and b"a\\x00Zb" in r.err and b"\0" not in r.err, r.describe()
