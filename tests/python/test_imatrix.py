"""Importance matrices (issue 21): `tbx convert ... --quant TYPE --imatrix FILE`.

The importance matrix files are built here as llama.cpp's llama-imatrix writes them
(tools/imatrix/imatrix.cpp of the release .venv's libllama was built from): the GGUF form with
gguf-py (general.type "imatrix", imatrix.datasets / chunk_count / chunk_size, per weight
NAME.in_sum2 [n_mat, n_per_row] and NAME.counts [n_mat, 1], in name order) and the legacy .dat
with struct (n_entries, then per weight: name, ncall, nval, (sum / count) * ncall; then the
chunk count and the dataset). The vector each weight is quantized with is computed here as
llama-quantize's load_imatrix computes it from each form (GGUF: in_sum2 / round(count) per
matrix in float32, 1 where the count is 0; .dat: value / ncall). llama-quantize itself is not
built here (llama-cpp-python ships the libraries only): the expected bytes of each tensor are
ggml_quantize_chunk(type, rows, ..., vector) of libggml-base.so from .venv through ctypes, the
call llama_model_quantize makes per tensor; and the metadata is checked against
llama_model_quantize of libllama.so itself (params.imatrix + the kv_overrides quantize.cpp
sets).

Every type `tbx convert --help` lists for GGUF is checked; those whose ggml quantizer weights by
the matrix (all but IGNORE_THE_MATRIX, which ignore it in ggml too: checked) are first shown to
give other bytes with the matrix than without, so the identity can fail.
A missing llama_cpp / gguf / numpy is a failure, never a skip.
"""
from __future__ import annotations

import ctypes
import importlib.util
import re
import struct
from pathlib import Path

import pytest

from conftest import assert_clean_exit, need, run
from test_ggml_quant_identical import ggml_lib, ggml_type, gguf_quant_types
from test_ggml_quant_identical import gguf_tensors as gguf_tensors_any

np = need("numpy")
stn = need("safetensors.numpy")
gguf = need("gguf")

Q = gguf.GGMLQuantizationType


TYPES = gguf_quant_types()  # every type tbx convert --help lists for gguf
# the types whose ggml quantizer does not look at the matrix (checked against ggml below)
IGNORE_THE_MATRIX = {"q8_0", "tq1_0", "tq2_0", "mxfp4", "nvfp4", "q1_0", "q2_0"}


def lib_dir() -> Path:
    spec = importlib.util.find_spec("llama_cpp")
    if spec is None or not spec.submodule_search_locations:
        pytest.fail("llama_cpp (llama-cpp-python) is not installed in .venv", pytrace=False)
    return Path(list(spec.submodule_search_locations)[0]) / "lib"


@pytest.fixture(scope="module")
def ggml():
    """ggml_quantize_chunk(type, rows, ..., imatrix) of libggml-base through ctypes (type ids
    from ggml_type_name: the gguf-py in .venv may predate the newest types)."""
    lib = ggml_lib()

    def quantize(name: str, a, qw=None) -> bytes:
        a = np.ascontiguousarray(a, np.float32)
        rows, cols = a.shape
        t = ggml_type(name)
        lib.ggml_quantize_init(t)
        dst = np.zeros(lib.ggml_row_size(t, cols) * rows, np.uint8)
        w = None
        if qw is not None:
            qw = np.ascontiguousarray(qw, np.float32)
            assert qw.size == cols
            w = qw.ctypes.data
        n = lib.ggml_quantize_chunk(t, a.ctypes.data, dst.ctypes.data, 0, rows, cols, w)
        assert n == dst.size
        return dst.tobytes()
    return quantize


# ---- the weights and their statistics ---------------------------------------------------------
def weights(seed: int = 7) -> dict:
    rng = np.random.default_rng(seed)
    w = lambda r, c, s=0.05: (rng.standard_normal((r, c)) * s).astype(np.float32)
    return {
        "token_embd.weight": w(40, 256),
        "blk.0.attn_q.weight": w(24, 512),
        "blk.0.attn_output.weight": w(16, 256, 2.0),
        "blk.0.ffn_down.weight": w(32, 768),
        "blk.0.ffn_up.weight": w(8, 256),          # no entry in the matrix
        "blk.0.attn_norm.weight": rng.standard_normal(256).astype(np.float32),  # 1-D
    }


def stats(W: dict, seed: int = 11) -> dict:
    """What llama-imatrix collects per weight: sums of squared activations per column and the
    count of rows (one matrix: not an expert tensor); strongly uneven, so a weighted quantizer
    gives other bytes than an unweighted one."""
    rng = np.random.default_rng(seed)
    out = {}
    for name, a in W.items():
        if a.ndim != 2 or name == "blk.0.ffn_up.weight":
            continue
        cols = a.shape[1]
        scale = np.exp(rng.standard_normal(cols) * 2.0)
        out[name] = ((rng.random(cols) * scale * 1000).astype(np.float32), 1000 + cols)
    return out


DATASETS = ["calibration-data.txt", "more.txt"]
CHUNKS, CHUNK_SIZE = 37, 512


def write_imatrix_gguf(path: Path, st: dict, datasets=DATASETS, chunks=CHUNKS) -> None:
    """As IMatrixCollector::save_imatrix writes it."""
    w = gguf.GGUFWriter(str(path), arch=None)
    w.add_string("general.type", "imatrix")
    w.add_array("imatrix.datasets", list(datasets))
    w.add_uint32("imatrix.chunk_count", chunks)
    w.add_uint32("imatrix.chunk_size", CHUNK_SIZE)
    for name in sorted(st):
        sums, count = st[name]  # [n_mat, cols] (or [cols]) and n_mat counts (or one)
        counts = np.atleast_1d(np.asarray(count, np.float32))
        w.add_tensor(f"{name}.in_sum2", sums.reshape(counts.size, -1).astype(np.float32))
        w.add_tensor(f"{name}.counts", counts.reshape(-1, 1))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def write_imatrix_dat(path: Path, st: dict, dataset=DATASETS[0], chunks=CHUNKS) -> None:
    """As IMatrixCollector::save_imatrix_legacy writes it."""
    b = bytearray(struct.pack("<i", len(st)))
    for name in sorted(st):
        sums, count = st[name]
        counts = np.atleast_1d(np.asarray(count, np.int64))
        sums = sums.reshape(counts.size, -1).astype(np.float32)
        ncall = int((counts.max() + CHUNK_SIZE - 1) // CHUNK_SIZE)
        vals = np.empty_like(sums)
        for j, c in enumerate(counts):  # a matrix of no count stores 1 (partial data)
            v, c = (sums[j], np.float32(c)) if c else (np.float32(1), np.float32(1))
            vals[j] = (v / c) * np.float32(ncall)
        vals = vals.reshape(-1)
        nb = name.encode()
        b += struct.pack("<i", len(nb)) + nb + struct.pack("<ii", ncall, vals.size)
        b += vals.astype("<f4").tobytes()
    d = dataset.encode()
    b += struct.pack("<i", chunks) + struct.pack("<i", len(d)) + d
    path.write_bytes(bytes(b))


def load_like_quantize(path: Path) -> dict:
    """The vectors tools/quantize's load_imatrix computes from either form (in float32)."""
    raw = path.read_bytes()
    out = {}
    if raw[:4] == b"GGUF":
        r = gguf.GGUFReader(str(path))
        t = {x.name: np.asarray(x.data, np.float32).reshape(-1) for x in r.tensors}
        for name in t:
            if not name.endswith(".in_sum2"):
                continue
            base = name[:-len(".in_sum2")]
            sums, counts = t[name], t[base + ".counts"]
            ne0 = sums.size // counts.size
            e = np.empty(sums.size, np.float32)
            for j, c in enumerate(counts):
                c = np.float32(int(round(float(c))))
                e[j * ne0:(j + 1) * ne0] = sums[j * ne0:(j + 1) * ne0] / c if c > 0 else 1
            out[base] = e
        return out
    (n,), p = struct.unpack_from("<i", raw), 4
    for _ in range(n):
        (ln,) = struct.unpack_from("<i", raw, p)
        name = raw[p + 4:p + 4 + ln].decode()
        p += 4 + ln
        ncall, nval = struct.unpack_from("<ii", raw, p)
        p += 8
        v = np.frombuffer(raw, "<f4", nval, p).astype(np.float32)
        p += 4 * nval
        out[name] = v / np.float32(ncall) if ncall > 0 else v
    return out


def gguf_tensors(path) -> dict:
    r = gguf.GGUFReader(str(path))
    return {t.name: (t.tensor_type, bytes(np.asarray(t.data).view(np.uint8).reshape(-1)))
            for t in r.tensors}


def gguf_kv(path) -> dict:
    r = gguf.GGUFReader(str(path))
    out = {}
    for f in r.fields.values():
        if f.name.startswith("quantize.") or f.name.startswith("general.file"):
            v = f.contents()
            out[f.name] = (f.types[0], v)
    return out


def write_f32_gguf(path: Path, W: dict) -> None:
    w = gguf.GGUFWriter(str(path), arch="llama")
    for name, a in W.items():
        w.add_tensor(name, a)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def check_identity(ggml, out: Path, W: dict, vec: dict, qtype: str) -> list[str]:
    """Every 2-D tensor of `out` is ggml_quantize_chunk of its rows with its vector (none for
    a weight the matrix lacks); returns the names that differ."""
    got = gguf_tensors_any(out)
    bad = []
    for name, a in W.items():
        if a.ndim != 2:
            continue
        t, b = got[name]
        assert int(t) == ggml_type(qtype), (name, t)
        want = ggml(qtype, a, vec.get(name))
        assert len(b) == len(want), name
        if b != want:
            bad.append(name)
    return bad


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    d = tmp_path_factory.mktemp("imatrix")
    W = weights()
    st = stats(W)
    stn.save_file(W, str(d / "in.safetensors"))
    write_f32_gguf(d / "in.gguf", W)
    write_imatrix_gguf(d / "m.gguf", st)
    write_imatrix_dat(d / "m.dat", st)
    return d, W, st


def requires_imatrix(qtype: str) -> bool:
    """ggml_quantize_requires_imatrix of libggml (iq2_xxs, iq2_xs, iq1_s)."""
    lib = ggml_lib()
    lib.ggml_quantize_requires_imatrix.restype = ctypes.c_bool
    lib.ggml_quantize_requires_imatrix.argtypes = [ctypes.c_int]
    return bool(lib.ggml_quantize_requires_imatrix(ggml_type(qtype)))


@pytest.mark.parametrize("form", ["gguf", "dat"])
@pytest.mark.parametrize("qtype", TYPES)
def test_every_tensor_is_ggml_quantize_chunk_with_its_vector(tbx, ggml, model, tmp_path, qtype,
                                                             form):
    d, W, st = model
    m = d / f"m.{form}"
    out = tmp_path / "out.gguf"
    needs = requires_imatrix(qtype)
    if needs:
        # a type ggml cannot quantize without a matrix: a weight the matrix lacks stops the
        # conversion, naming it (llama-quantize: "Missing importance matrix for tensor")
        r = run(tbx, "convert", d / "in.safetensors", out, "--quant", qtype, "--imatrix", m)
        assert_clean_exit(r)
        assert r.rc != 0 and b"blk.0.ffn_up.weight" in r.err and not out.exists(), r.describe()
        full = dict(st)
        full["blk.0.ffn_up.weight"] = (np.linspace(1, 9, 256).astype(np.float32), 30)
        m = tmp_path / f"full.{form}"
        (write_imatrix_gguf if form == "gguf" else write_imatrix_dat)(m, full)
    vec = load_like_quantize(m)
    r = run(tbx, "convert", d / "in.safetensors", out, "--quant", qtype, "--imatrix", m, "-v")
    assert_clean_exit(r)
    assert r.rc == 0, r.describe()
    assert re.search(r"blk\.0\.attn_q\.weight.*with its importance matrix", r.err.decode())
    if not needs:
        # the weight without an entry is said to be quantized without one
        assert re.search(r"blk\.0\.ffn_up\.weight.*without an importance matrix \(none for "
                         r"it\)", r.err.decode()), r.describe()
        # the matrix changes ggml's bytes for the weighting types (so the check can fail)
        a = W["blk.0.attn_q.weight"]
        weighted = ggml(qtype, a, vec["blk.0.attn_q.weight"]) != ggml(qtype, a)
        assert weighted == (qtype not in IGNORE_THE_MATRIX), qtype
    bad = check_identity(ggml, out, W, vec, qtype)
    assert not bad, f"{qtype} ({form}): {bad} differ from ggml_quantize_chunk with the matrix"


@pytest.mark.parametrize("qtype", ["q8_0", "q4_k"])
def test_gguf_input_too(tbx, ggml, model, tmp_path, qtype):
    d, W, st = model
    vec = load_like_quantize(d / "m.gguf")
    out = tmp_path / "out.gguf"
    r = run(tbx, "convert", d / "in.gguf", out, "--quant", qtype, "--imatrix", d / "m.gguf")
    assert_clean_exit(r)
    assert r.rc == 0, r.describe()
    bad = check_identity(ggml, out, W, vec, qtype)
    assert not bad, bad


@pytest.mark.parametrize("form", ["gguf", "dat"])
def test_metadata_as_llama_quantize_records_it(tbx, model, tmp_path, form):
    d, W, st = model
    m = d / f"m.{form}"
    out = tmp_path / "out.gguf"
    r = run(tbx, "convert", d / "in.safetensors", out, "--quant", "q8_0", "--imatrix", m)
    assert r.rc == 0, r.describe()
    kv = gguf_kv(out)
    G = gguf.GGUFValueType
    assert kv["quantize.imatrix.file"] == (G.STRING, str(m))
    assert kv["quantize.imatrix.dataset"] == (G.STRING, DATASETS[0])
    assert kv["quantize.imatrix.entries_count"] == (G.UINT32, len(st))
    assert kv["quantize.imatrix.chunks_count"] == (G.UINT32, CHUNKS)


def test_python_api(model, tmp_path, ggml):
    tb = need("tensorbox")
    d, W, st = model
    out = tmp_path / "py.gguf"
    reps = tb.convert(d / "in.safetensors", out, quant="q8_0", imatrix=d / "m.dat")
    vec = load_like_quantize(d / "m.dat")
    assert not check_identity(ggml, out, W, vec, "q8_0")
    assert gguf_kv(out)["quantize.imatrix.entries_count"][1] == len(st)
    why = {r.name: r.reason for r in reps}
    assert "without an importance matrix" in why["blk.0.ffn_up.weight"], why
    with pytest.raises(tb.InvalidArgumentError):
        tb.convert(d / "in.safetensors", tmp_path / "x.gguf", imatrix=d / "m.dat")


def test_refusals(tbx, model, tmp_path):
    d, W, st = model
    src = d / "in.safetensors"
    # a vector of another length than the columns: named, both sizes
    bad = dict(st)
    bad["blk.0.attn_q.weight"] = (np.ones(256, np.float32), 10)
    write_imatrix_gguf(tmp_path / "bad.gguf", bad)
    out = tmp_path / "o.gguf"
    r = run(tbx, "convert", src, out, "--quant", "q8_0", "--imatrix", tmp_path / "bad.gguf")
    assert_clean_exit(r)
    assert r.rc != 0 and not out.exists(), r.describe()
    assert re.search(r'blk\.0\.attn_q\.weight.*256 values.*512', r.err.decode()), r.describe()
    # token embeddings of another length: quantized without it, as llama-quantize does
    emb = dict(st)
    emb["token_embd.weight"] = (np.ones(128, np.float32), 10)
    write_imatrix_gguf(tmp_path / "emb.gguf", emb)
    r = run(tbx, "convert", src, out, "--quant", "q8_0", "--imatrix", tmp_path / "emb.gguf",
            "-v")
    out.unlink()
    assert r.rc == 0, r.describe()
    assert re.search(r"token_embd\.weight.*its entry has another size", r.err.decode())
    # a non-finite value: refused (llama_model_quantize refuses it)
    nan = dict(st)
    s = nan["blk.0.ffn_down.weight"][0].copy()
    s[5] = np.inf
    nan["blk.0.ffn_down.weight"] = (s, 10)
    write_imatrix_dat(tmp_path / "nan.dat", nan)
    r = run(tbx, "convert", src, out, "--quant", "q8_0", "--imatrix", tmp_path / "nan.dat")
    assert r.rc != 0, r.describe()
    assert b"blk.0.ffn_down.weight" in r.err and b"finite" in r.err, r.describe()
    # tensorbox's own K search uses no matrix: refused rather than ignoring it
    r = run(tbx, "convert", src, out, "--quant", "q4_k", "--quant-method", "search",
            "--imatrix", d / "m.gguf")
    assert r.rc != 0 and b"quant_method" in r.err and not out.exists(), r.describe()
    # no quantization to apply it to: a usage error before any work
    r = run(tbx, "convert", src, out, "--imatrix", d / "m.gguf")
    assert r.rc == 2, r.describe()
    # a GGUF without the metadata llama-quantize requires
    w = gguf.GGUFWriter(str(tmp_path / "nometa.gguf"), arch=None)
    w.add_tensor("blk.0.attn_q.weight.in_sum2", np.ones((1, 512), np.float32))
    w.add_tensor("blk.0.attn_q.weight.counts", np.ones((1, 1), np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    r = run(tbx, "convert", src, out, "--quant", "q8_0", "--imatrix", tmp_path / "nometa.gguf")
    assert r.rc != 0 and b"imatrix.datasets" in r.err, r.describe()
    # a truncated .dat: the field and the byte offset
    raw = (d / "m.dat").read_bytes()
    (tmp_path / "cut.dat").write_bytes(raw[:50])
    r = run(tbx, "convert", src, out, "--quant", "q8_0", "--imatrix", tmp_path / "cut.dat")
    assert r.rc != 0 and re.search(rb"at byte \d+", r.err), r.describe()


# ---- against llama_model_quantize itself ---------------------------------------------------------
def llama_quantize_with_imatrix(src: Path, dst: Path, ftype: int, imatrix: Path) -> None:
    """llama-quantize's main as a library call: load_imatrix's vectors as params.imatrix (a
    NULL-terminated array of llama_model_imatrix_data) and the quantize.imatrix.* kv_overrides
    quantize.cpp sets (the file name and dataset cut to 127 bytes, the counts as INT)."""
    llama_cpp = need("llama_cpp")
    vec = load_like_quantize(imatrix)
    raw = imatrix.read_bytes()
    if raw[:4] == b"GGUF":
        r = gguf.GGUFReader(str(imatrix))
        datasets = list(r.fields["imatrix.datasets"].contents())
        chunks = int(r.fields["imatrix.chunk_count"].contents())
    else:  # the trailer after the entries (this test's files always have one)
        p = 4
        for _ in range(struct.unpack_from("<i", raw)[0]):
            (ln,) = struct.unpack_from("<i", raw, p)
            p += 4 + ln
            p += 8 + 4 * struct.unpack_from("<ii", raw, p)[1]
        (chunks,) = struct.unpack_from("<i", raw, p)
        (dl,) = struct.unpack_from("<i", raw, p + 4)
        datasets = [raw[p + 8:p + 8 + dl].decode()] if dl > 0 else []
    keep = {k: np.ascontiguousarray(v, np.float32) for k, v in vec.items()}
    names = {k: k.encode() for k in keep}
    arr = (llama_cpp.llama_model_imatrix_data * (len(keep) + 1))()
    for i, k in enumerate(keep):
        arr[i].name = names[k]
        arr[i].data = keep[k].ctypes.data_as(ctypes.POINTER(ctypes.c_float))
        arr[i].size = keep[k].size
    kvs = []

    def kv(key, tag, **val):
        o = llama_cpp.llama_model_kv_override()
        o.key = key.encode()
        o.tag = tag
        for f, v in val.items():
            setattr(o.value, f, v)
        kvs.append(o)
    STR, INT = llama_cpp.LLAMA_KV_OVERRIDE_TYPE_STR, llama_cpp.LLAMA_KV_OVERRIDE_TYPE_INT
    kv("quantize.imatrix.file", STR, val_str=str(imatrix).encode()[:127])
    if datasets:
        kv("quantize.imatrix.dataset", STR, val_str=datasets[0].encode()[:127])
    kv("quantize.imatrix.entries_count", INT, val_i64=len(keep))
    if chunks > 0:
        kv("quantize.imatrix.chunks_count", INT, val_i64=chunks)
    ko = (llama_cpp.llama_model_kv_override * (len(kvs) + 1))(*kvs)
    p = llama_cpp.llama_model_quantize_default_params()
    p.ftype = ftype
    p.nthread = 1
    p.imatrix = ctypes.cast(arr, ctypes.POINTER(llama_cpp.llama_model_imatrix_data))
    p.kv_overrides = ctypes.cast(ko, ctypes.POINTER(llama_cpp.llama_model_kv_override))
    rc = llama_cpp.llama_model_quantize(str(src).encode(), str(dst).encode(), ctypes.byref(p))
    assert rc == 0 and dst.is_file(), f"llama_model_quantize({src} -> {dst}) failed: {rc}"


@pytest.fixture(scope="module")
def tiny_llama(tbx, tmp_path_factory):
    """test_hf_gguf's tiny llama, converted to an f32 GGUF by tbx (the input both quantize)."""
    from test_hf_gguf import make_decoder
    d = tmp_path_factory.mktemp("llama")
    make_decoder(d / "llama", "llama", 5)
    f32 = d / "f32.gguf"
    r = run(tbx, "convert", d / "llama", f32)
    assert r.rc == 0, r.describe()
    W = {t.name: np.asarray(t.data) for t in gguf.GGUFReader(str(f32)).tensors}
    rng = np.random.default_rng(3)
    st = {n: ((rng.random(a.shape[1]) * 50).astype(np.float32), 300)
          for n, a in W.items() if a.ndim == 2 and n != "blk.1.ffn_up.weight"}
    st["blk.9.not_in_the_model.weight"] = (np.ones(64, np.float32), 5)
    write_imatrix_gguf(d / "m.gguf", st)
    write_imatrix_dat(d / "m.dat", st)
    return d, f32


def all_fields(path) -> dict:
    r = gguf.GGUFReader(str(path))
    return {k: (tuple(f.types), f.contents()) for k, f in r.fields.items()
            if not k.startswith("GGUF.")}


@pytest.mark.parametrize("form", ["gguf", "dat"])
def test_q8_0_tensors_and_keys_are_llama_model_quantizes(tbx, tiny_llama, tmp_path, form):
    d, f32 = tiny_llama
    m = d / f"m.{form}"
    ref = tmp_path / "llama.gguf"
    llama_quantize_with_imatrix(f32, ref, int(gguf.LlamaFileType.MOSTLY_Q8_0), m)
    out = tmp_path / "tbx.gguf"
    r = run(tbx, "convert", f32, out, "--quant", "q8_0", "--imatrix", m)
    assert_clean_exit(r)
    assert r.rc == 0, r.describe()
    a, b = gguf_tensors(ref), gguf_tensors(out)
    # the same tensors (llama.cpp writes them in its own order: a plain --quant keeps the
    # input's; the presets' plan has llama.cpp's order)
    assert sorted(a) == sorted(b)
    for name in a:
        assert a[name] == b[name], name
    fa, fb = all_fields(ref), all_fields(out)
    imx = [k for k in fa if k.startswith("quantize.imatrix.")]
    assert len(imx) == 4, imx
    for k in imx:
        assert fb.get(k) == fa[k], (k, fb.get(k), fa[k])
    assert [k for k in fb if k.startswith("quantize.")] == imx  # same keys, same order
    assert set(fa) == set(fb), set(fa) ^ set(fb)
    for k in fa:
        assert fa[k] == fb[k], (k, fa[k], fb[k])


@pytest.mark.parametrize("form", ["gguf", "dat"])
@pytest.mark.parametrize("qtype", ["q8_0", "q4_0"])
def test_hf_moe_in_one_pass_each_expert_takes_its_slice(tbx, ggml, tmp_path, qtype, form):
    """A Mixtral directory to GGUF in one pass: the stacked [experts, rows, cols] tensors are
    quantized expert by expert with their own run of the vector (one expert never seen: 1s in
    the GGUF form, as llama-quantize reads it), the 2-D ones with theirs. The rows are the f32
    values of the same conversion without quantization (test_hf_gguf_arch holds them to
    llama.cpp's converter). q4_0 weights by the matrix: a wrong slice changes its bytes."""
    from test_hf_gguf_arch import make_mixtral
    d = tmp_path / "mixtral"
    make_mixtral(d, 4)
    f32 = tmp_path / "f32.gguf"
    r = run(tbx, "convert", d, f32)
    assert r.rc == 0, r.describe()
    W = {t.name: np.asarray(t.data) for t in gguf.GGUFReader(str(f32)).tensors}
    rng = np.random.default_rng(5)
    st = {}
    for n, a in W.items():
        if a.ndim == 2:
            st[n] = ((rng.random(a.shape[1]) * 20).astype(np.float32), 40)
        elif a.ndim == 3:
            counts = rng.integers(1, 90, a.shape[0])
            counts[1] = 0
            sums = np.exp(rng.standard_normal(a.shape[::2]) * 2).astype(np.float32) * 30
            st[n] = (sums, counts)
    assert sum(a.ndim == 3 for a in W.values()) >= 3
    m = tmp_path / f"m.{form}"
    (write_imatrix_gguf if form == "gguf" else write_imatrix_dat)(m, st)
    vec = load_like_quantize(m)
    out = tmp_path / "q.gguf"
    r = run(tbx, "convert", d, out, "--quant", qtype, "--imatrix", m)
    assert_clean_exit(r)
    assert r.rc == 0, r.describe()
    got = gguf_tensors(out)
    bad = []
    for n, a in W.items():
        if a.ndim < 2:
            continue
        t, b = got[n]
        tn = Q(t).name.lower()
        if n.endswith("ffn_gate_inp.weight"):  # the router stays f32, as llama.cpp keeps it
            assert tn == "f32", (n, tn)
            continue
        assert tn == qtype, (n, tn)
        cols = a.shape[-1]
        mats = a.reshape(-1, *a.shape[-2:])
        want = b"".join(ggml(tn, mats[e], vec[n][e * cols:(e + 1) * cols])
                        for e in range(mats.shape[0]))
        if b != want:
            bad.append(n)
    assert not bad, bad


@pytest.mark.parametrize("form", ["gguf", "dat"])
def test_q4_0_weighted_tensors_are_llama_model_quantizes(tbx, tiny_llama, tmp_path, form):
    """llama.cpp's Q4_0 preset with the matrix: every tensor it quantizes to q4_0 (it gives a
    few others other types: its preset rules, another helper's work) has the bytes tbx's
    --quant q4_0 --imatrix gives it; and the keys are the same."""
    d, f32 = tiny_llama
    m = d / f"m.{form}"
    ref = tmp_path / "llama.gguf"
    llama_quantize_with_imatrix(f32, ref, int(gguf.LlamaFileType.MOSTLY_Q4_0), m)
    out = tmp_path / "tbx.gguf"
    r = run(tbx, "convert", f32, out, "--quant", "q4_0", "--imatrix", m)
    assert r.rc == 0, r.describe()
    a, b = gguf_tensors(ref), gguf_tensors(out)
    assert sorted(a) == sorted(b)
    same = [n for n in a if a[n][0] == Q.Q4_0]
    assert len(same) >= 10, same
    for n in same:
        assert a[n] == b[n], n
    fa, fb = all_fields(ref), all_fields(out)
    for k in [k for k in fa if k.startswith("quantize.imatrix.")]:
        assert fb.get(k) == fa[k], k
