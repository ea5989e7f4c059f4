"""`tbx diff` and tensorbox.diff (issue 23).

The reference for every figure is gguf-py: each GGUF tensor is read by gguf.GGUFReader and
dequantized by gguf.quants.dequantize, and numpy computes max-abs, RMSE, NMSE and cosine of the
two files' values in float64; tbx diff must give the same to 1e-6 relative. The Hugging Face
directory against its lossless GGUF conversion (`--map auto`: llama's q/k rows, Baichuan's
fused W_pack split with its q/k rows, Mixtral's experts stacked) must be identical, and a
tampered tensor must be named. Metadata changes are checked against the keys the test wrote
with gguf-py's writer; unreadable inputs exit 2.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from conftest import assert_clean_exit, need, run, write_gguf

np = need("numpy")
gguf = need("gguf")
stn = need("safetensors.numpy")

from test_hf_gguf import make_decoder  # noqa: E402  (the llama builder of the HF -> GGUF tests)

REL = 1e-6


def tbx_diff(tbx, a, b, *args):
    r = run(tbx, "diff", a, b, "--json", *args)
    assert_clean_exit(r)
    assert r.rc in (0, 1), r.describe()
    return r, json.loads(r.out)


def gguf_values(path):
    """{name: float64 values} of a GGUF file, dequantized by gguf-py."""
    rd = gguf.GGUFReader(str(path))
    out = {}
    for t in rd.tensors:
        v = gguf.quants.dequantize(t.data, t.tensor_type)
        out[t.name] = np.asarray(v, dtype=np.float64).reshape(-1)
    return out


def np_metrics(a, b):
    d = b - a
    saa, sbb = float(np.dot(a, a)), float(np.dot(b, b))
    return {"max_abs": float(np.max(np.abs(d))), "rmse": float(np.sqrt(np.mean(d * d))),
            "nmse": float(np.dot(d, d)) / saa, "cosine": float(np.dot(a, b)) / np.sqrt(saa * sbb)}


def close(x, y):
    return abs(x - y) <= REL * max(abs(x), abs(y)) or (x == 0 and y == 0)


@pytest.fixture(scope="module")
def models(tmp_path_factory, tbx):
    """A tiny llama directory and its GGUF conversions: f32 (lossless), f16, q8_0, q4_K."""
    d = tmp_path_factory.mktemp("diff")
    make_decoder(d / "llama", "llama", 11, E=256, FF=512, L=2, H=4, KV=2)
    out = {"dir": d / "llama"}
    for name, args in (("f32", []), ("f16", ["--cast", "f16"]), ("q8_0", ["--quant", "q8_0"]),
                       ("q4_k", ["--quant", "q4_k"])):
        p = d / f"llama-{name}.gguf"
        r = run(tbx, "convert", d / "llama", p, *args)
        assert r.rc == 0, r.describe()
        out[name] = p
    return out


@pytest.mark.parametrize("pair", [("f16", "q4_k"), ("f16", "q8_0"), ("q8_0", "q4_k"),
                                  ("f32", "f16")])
def test_metrics_equal_gguf_py(tbx, models, pair):
    a, b = models[pair[0]], models[pair[1]]
    r, doc = tbx_diff(tbx, a, b)
    va, vb = gguf_values(a), gguf_values(b)
    assert r.rc == 1 and doc["differs"] is True and doc["identical"] is False
    cmp = {t["name"]: t for t in doc["tensors"]["compared"]}
    assert set(cmp) == set(va) == set(vb)
    quantized = 0
    for name, t in cmp.items():
        assert t["elements"] == va[name].size
        if np.array_equal(va[name], vb[name]):
            assert t["identical"] is True and t["nmse"] == 0 and t["max_abs"] == 0, name
            continue
        quantized += 1
        want = np_metrics(va[name], vb[name])
        for k, w in want.items():
            assert close(t[k], w), f"{name} {k}: tbx {t[k]!r}, numpy {w!r}"
        assert t["identical"] is False
    assert quantized >= 14
    # sorted by nmse, worst first
    nm = [t["nmse"] for t in doc["tensors"]["compared"]]
    assert nm == sorted(nm, reverse=True)
    # the whole-model figures over every value
    A = np.concatenate([va[n] for n in sorted(va)])
    B = np.concatenate([vb[n] for n in sorted(va)])
    want = np_metrics(A, B)
    for k, w in want.items():
        assert close(doc["summary"][k], w), (k, doc["summary"][k], w)
    # per layer: the layer's values together
    for ly in doc["layers"]:
        names = [n for n in va if (n.split(".")[1] == str(ly["layer"]) if ly["layer"] is not None
                                   else not n.startswith("blk."))]
        assert ly["tensors"] == len(names)
        w = np_metrics(np.concatenate([va[n] for n in names]),
                       np.concatenate([vb[n] for n in names]))
        assert close(ly["nmse"], w["nmse"]) and close(ly["max_abs"], w["max_abs"])


def test_python_same_document_and_threads(tbx, models):
    tensorbox = need("tensorbox")
    _, doc = tbx_diff(tbx, models["f16"], models["q4_k"])
    assert tensorbox.diff(models["f16"], models["q4_k"]) == doc
    _, one = tbx_diff(tbx, models["f16"], models["q4_k"], "--threads", "1")
    _, three = tbx_diff(tbx, models["f16"], models["q4_k"], "--threads", "3")
    assert one == doc == three


def test_human_table(tbx, models):
    r = run(tbx, "diff", models["f16"], models["q4_k"])
    assert_clean_exit(r)
    assert r.rc == 1
    txt = r.out.decode()
    _, doc = tbx_diff(tbx, models["f16"], models["q4_k"])
    worst = doc["tensors"]["compared"][0]["name"]
    rows = [ln.split()[0] for ln in txt.splitlines() if ln.startswith(("blk.", "output", "token_"))]
    assert rows[0] == worst
    assert "layer" in txt and "result: different" in txt
    assert "general.file_type: u32 1 -> u32 15" in txt


def test_tolerance(tbx, models):
    _, doc = tbx_diff(tbx, models["f16"], models["q8_0"])
    worst = doc["tensors"]["compared"][0]
    r, d = tbx_diff(tbx, models["f16"], models["q8_0"], "--tolerance", repr(worst["nmse"] * 1.01))
    assert r.rc == 0 and d["within_tolerance"] is True and d["differs"] is False
    bound = worst["nmse"] * 0.99
    r, d = tbx_diff(tbx, models["f16"], models["q8_0"], "--tolerance", repr(bound))
    assert r.rc == 1 and d["within_tolerance"] is False
    beyond = [t["name"] for t in d["tensors"]["compared"] if not t["within_tolerance"]]
    assert beyond == [t["name"] for t in doc["tensors"]["compared"] if t["nmse"] > bound]
    assert beyond[0] == worst["name"]
    mx = max(t["max_abs"] for t in doc["tensors"]["compared"])
    r, d = tbx_diff(tbx, models["f16"], models["q8_0"], "--tolerance", f"max-abs={mx!r}")
    assert r.rc == 0
    r, d = tbx_diff(tbx, models["f16"], models["q8_0"], "--tolerance",
                    f"nmse=1,max-abs={mx * 0.5!r}")
    assert r.rc == 1
    r = run(tbx, "diff", models["f16"], models["q8_0"], "--tolerance", "-1")
    assert r.rc == 2 and b"--tolerance" in r.err


def test_map_auto_lossless_identical(tbx, models):
    for a, b in ((models["dir"], models["f32"]), (models["f32"], models["dir"])):
        r, doc = tbx_diff(tbx, a, b)
        assert r.rc == 0, r.describe()
        assert doc["identical"] is True and doc["map"] in ("hf-gguf", "gguf-hf")
        cmp = {t["name"]: t for t in doc["tensors"]["compared"]}
        assert len(cmp) == 21 and all(t["identical"] for t in cmp.values())
        assert cmp["blk.0.attn_q.weight"]["transform"] == "permute q"
        assert doc["tensors"]["added"] == [] and doc["tensors"]["removed"] == []
    # without the map nothing pairs
    r, doc = tbx_diff(tbx, models["dir"], models["f32"], "--map", "none")
    assert r.rc == 1 and doc["summary"]["tensors_compared"] == 0
    assert len(doc["tensors"]["removed"]) == 21 and len(doc["tensors"]["added"]) == 21


def tamper(src: Path, dst: Path, name: str, index: int, delta: float):
    """A copy of GGUF `src` with value `index` of f32 tensor `name` changed by delta."""
    shutil.copy(src, dst)
    rd = gguf.GGUFReader(str(src))
    t = next(t for t in rd.tensors if t.name == name)
    off = int(t.data_offset) + 4 * index
    raw = bytearray(dst.read_bytes())
    v = np.frombuffer(bytes(raw[off:off + 4]), dtype="<f4")[0]
    raw[off:off + 4] = np.array([v + delta], dtype="<f4").tobytes()
    dst.write_bytes(bytes(raw))
    return float(np.float64(np.float32(v + delta)) - np.float64(v))


def test_map_auto_tampered(tbx, models, tmp_path):
    p = tmp_path / "t.gguf"
    # row 1 of attn_k (layer 1): its HF row is another one (the permutation)
    dv = tamper(models["f32"], p, "blk.1.attn_k.weight", 256 + 7, 0.5)
    r, doc = tbx_diff(tbx, models["dir"], p)
    assert r.rc == 1 and doc["identical"] is False
    bad = [t for t in doc["tensors"]["compared"] if not t["identical"]]
    assert [t["name"] for t in bad] == ["blk.1.attn_k.weight"]
    assert bad[0]["a_name"] == "model.layers.1.self_attn.k_proj.weight"
    assert bad[0]["max_abs"] == pytest.approx(abs(dv), rel=1e-12)
    assert doc["tensors"]["compared"][0]["name"] == "blk.1.attn_k.weight"
    assert "blk.1.attn_k.weight" in run(tbx, "diff", models["dir"], p).out.decode()


def build_arch(kind: str, d: Path):
    """The HF -> GGUF tests' builders (test_hf_gguf_arch.py): Mixtral (experts stacked),
    Qwen2-MoE (experts stacked, a shared expert, q/k/v biases), Baichuan (W_pack split into q, k,
    v, q and k reordered by heads)."""
    import test_hf_gguf_arch as ta
    if kind == "mixtral":
        return ta.make_mixtral(d, 31)
    if kind == "qwen2_moe":
        return ta.make_qwen2_moe(d, 32)
    from test_hf_gguf_spm import train_spm
    return ta.make_baichuan(d, 33, train_spm())


# (kind, a tensor whose sources are several HF tensors or a part of one, its transform, sources,
#  the tensor tampered and the value index)
ARCH_CASES = [
    ("mixtral", "blk.1.ffn_down_exps.weight", "stack", 4, "blk.0.ffn_up_exps.weight", 2),
    ("qwen2_moe", "blk.0.ffn_gate_exps.weight", "stack", 4, "blk.1.ffn_down_exps.weight", 3),
    ("baichuan", "blk.3.attn_k.weight", "rows 64..128, permute k", 1, "blk.5.attn_q.weight", 1),
]


@pytest.mark.parametrize("kind,name,xf,nsrc,bad,part", ARCH_CASES, ids=[c[0] for c in ARCH_CASES])
def test_map_auto_split_and_stack(tbx, tmp_path, kind, name, xf, nsrc, bad, part):
    W, cfg = build_arch(kind, tmp_path / kind)
    g = tmp_path / f"{kind}.gguf"
    r = run(tbx, "convert", tmp_path / kind, g)
    assert r.rc == 0, r.describe()
    r, doc = tbx_diff(tbx, tmp_path / kind, g)
    assert r.rc == 0, r.describe()
    assert doc["architecture"] == kind and doc["identical"] is True
    cmp = {t["name"]: t for t in doc["tensors"]["compared"]}
    assert cmp[name].get("sources", 1) == nsrc and cmp[name]["transform"] == xf
    # every HF value is compared once (Baichuan's W_pack in three parts)
    assert sum(t["elements"] for t in cmp.values()) == sum(v.size for v in W.values())
    assert doc["tensors"]["added"] == [] and doc["tensors"]["removed"] == []
    # one value of expert / part `part` of `bad` tampered in the GGUF: that tensor is named
    rd = gguf.GGUFReader(str(g))
    t = next(t for t in rd.tensors if t.name == bad)
    per = int(np.prod(t.data.shape[1:])) if len(t.data.shape) == 3 else int(t.data.shape[-1])
    p = tmp_path / f"{kind}-t.gguf"
    dv = tamper(g, p, bad, part * per + 3, -0.25)
    r, doc = tbx_diff(tbx, tmp_path / kind, p)
    assert r.rc == 1
    wrong = [t for t in doc["tensors"]["compared"] if not t["identical"]]
    assert [t["name"] for t in wrong] == [bad]
    assert wrong[0]["max_abs"] == pytest.approx(abs(dv), rel=1e-12)


def test_metadata_changes_exact(tbx, tmp_path):
    x = np.arange(64, dtype=np.float32)

    def fa(w):
        w.add_uint32("k.same", 7)
        w.add_uint32("k.changed", 1)
        w.add_string("k.removed", "gone")
        w.add_array("k.arr", ["a", "b", "c", "d"])
        w.add_float32("k.type", 2.0)
        w.add_tensor("t", x)
        w.add_tensor("only_a", x[:32])

    def fb(w):
        w.add_uint32("k.same", 7)
        w.add_uint32("k.changed", 2)
        w.add_string("k.added", "new")
        w.add_array("k.arr", ["a", "b", "X", "d"])
        w.add_float64("k.type", 2.0)
        w.add_tensor("t", x)
        w.add_tensor("only_b", x[:16].astype(np.float16))

    a = write_gguf(tmp_path / "a.gguf", fa)
    b = write_gguf(tmp_path / "b.gguf", fb)
    r, doc = tbx_diff(tbx, a, b)
    assert r.rc == 1
    md = doc["metadata"]
    assert md["compared"] is True
    assert [(m["key"], m["value"]) for m in md["added"]] == [("k.added", "new")]
    assert [(m["key"], m["value"]) for m in md["removed"]] == [("k.removed", "gone")]
    ch = {m["key"]: m for m in md["changed"]}
    assert set(ch) == {"k.changed", "k.arr", "k.type"}
    assert (ch["k.changed"]["a"], ch["k.changed"]["b"]) == (1, 2)
    assert ch["k.arr"]["first_difference"] == 2
    assert (ch["k.type"]["a_type"], ch["k.type"]["b_type"]) == ("f32", "f64")
    assert [t["name"] for t in doc["tensors"]["added"]] == ["only_b"]
    assert [t["name"] for t in doc["tensors"]["removed"]] == ["only_a"]
    assert doc["tensors"]["added"][0]["dtype"] == "f16"
    t = doc["tensors"]["compared"]
    assert len(t) == 1 and t[0]["identical"] is True
    # the same file twice: identical, exit 0
    r, doc = tbx_diff(tbx, a, a)
    assert r.rc == 0 and doc["identical"] is True and doc["differs"] is False


def test_errors_exit_2(tbx, models, tmp_path):
    r = run(tbx, "diff", tmp_path / "missing.gguf", models["f16"])
    assert_clean_exit(r)
    assert r.rc == 2 and b"missing.gguf" in r.err
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(models["f16"].read_bytes()[:5000])
    r = run(tbx, "diff", models["f16"], cut)
    assert_clean_exit(r)
    assert r.rc == 2 and b"cut.gguf" in r.err
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"GGUF" + b"\xff" * 60)
    r = run(tbx, "diff", junk, models["f16"], "--json")
    assert r.rc == 2 and r.out == b""
    r = run(tbx, "diff", models["f16"], models["q8_0"], "--map", "sideways")
    assert r.rc == 2
    # opened, but --map auto cannot pair them: a model_type without a name map
    odd = tmp_path / "odd"
    shutil.copytree(models["dir"], odd)
    cfg = json.loads((odd / "config.json").read_text())
    cfg["model_type"] = "no_such_arch"
    (odd / "config.json").write_text(json.dumps(cfg))
    r = run(tbx, "diff", odd, models["f32"])
    assert_clean_exit(r)
    assert r.rc == 2 and b"no_such_arch" in r.err and r.out == b"", r.describe()
    r, doc = tbx_diff(tbx, odd, models["f32"], "--map", "none")  # by name it works
    assert r.rc == 1 and doc["map"] == "none"
    tensorbox = need("tensorbox")
    with pytest.raises(tensorbox.Error):
        tensorbox.diff(models["f16"], cut)


def test_asan(tbx_asan, models, tmp_path):
    """The sanitizer build (TBX_ASAN) over the mapped and quantized paths and an error."""
    for a, b, rc in ((models["dir"], models["f32"], 0), (models["f16"], models["q4_k"], 1)):
        r = run(tbx_asan, "diff", a, b, "--threads", "3")
        assert_clean_exit(r)
        assert r.rc == rc, r.describe()
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(models["q4_k"].read_bytes()[:-100])
    r = run(tbx_asan, "diff", models["f16"], cut)
    assert_clean_exit(r)
    assert r.rc == 2


def test_formats_big_endian_and_compressed(tbx, tmp_path):
    """The same values in a big-endian GGUF (byte-swapped by the reader), a zstd-compressed
    zTensor and a safetensors file: identical tensors (the values are read through each
    format's own decoding)."""
    x = (np.arange(4096, dtype=np.float32) - 2048) / 7

    def fill(w):
        w.add_uint32("k", 3)
        w.add_tensor("t", x.reshape(64, 64))
        w.add_tensor("h", x.astype(np.float16))

    le = write_gguf(tmp_path / "le.gguf", fill)
    be = write_gguf(tmp_path / "be.gguf", fill, endianess=gguf.GGUFEndian.BIG)
    r, doc = tbx_diff(tbx, le, be)
    assert r.rc == 0 and doc["identical"] is True and doc["summary"]["tensors_compared"] == 2
    zt = tmp_path / "c.zt"
    st = tmp_path / "c.safetensors"
    for out, args in ((zt, ["--compress", "3"]), (st, [])):
        r = run(tbx, "convert", le, out, *args, "--drop-meta")
        assert r.rc == 0, r.describe()
    for other in (zt, st):
        r, doc = tbx_diff(tbx, be, other)
        cmp = doc["tensors"]["compared"]
        assert [t["identical"] for t in cmp] == [True, True], r.describe()
        assert r.rc == (0 if doc["identical"] else 1)
        r, doc = tbx_diff(tbx, be, other, "--tolerance", "0")
        assert r.rc == 0 and doc["within_tolerance"] is True


@pytest.mark.parametrize("kind", ["llama", "mixtral"])
def test_map_auto_against_llama_cpp_converter(tbx, models, tmp_path, kind):
    """The name map read back against llama.cpp's own convert_hf_to_gguf.py (f32): the HF
    directory and the converter's GGUF are identical, every HF tensor paired."""
    from test_hf_runtime import llama_convert  # torch, transformers: the converter's needs
    if kind == "llama":
        d = models["dir"]
    else:
        build_arch(kind, tmp_path / kind)
        d = tmp_path / kind
    out = tmp_path / f"{kind}-llama-cpp.gguf"
    llama_convert(d, out, kind, "f32")
    r, doc = tbx_diff(tbx, d, out)
    assert r.rc == 0, r.describe()
    assert doc["identical"] is True and doc["tensors"]["not_compared"] == []
    n_hf = len(stn.load_file(str(d / "model.safetensors")))
    assert sum(t.get("sources", 1) for t in doc["tensors"]["compared"]) == n_hf


# ------------------------------------------------------------------------------------------
# --map auto: metadata, derived tensors, dropped rows (issue 23's leftovers)
# ------------------------------------------------------------------------------------------
def set_gguf_scalar(src: Path, dst: Path, key: str, fmt: str, value):
    """A copy of GGUF `src` with the scalar metadata value of `key` (struct format `fmt`:
    "<I" u32, "<f" f32) replaced: the value follows the key's bytes and its 4-byte type."""
    import struct
    raw = bytearray(src.read_bytes())
    kb = struct.pack("<Q", len(key)) + key.encode()
    at = raw.find(kb)
    assert at > 0 and raw.find(kb, at + 1) < 0, key
    off = at + len(kb) + 4
    n = struct.calcsize(fmt)
    old = struct.unpack(fmt, raw[off:off + n])[0]
    raw[off:off + n] = struct.pack(fmt, value)
    dst.write_bytes(bytes(raw))
    return old


def test_map_auto_metadata_compared(tbx, models, tmp_path):
    """--map auto compares the GGUF's {arch}.* keys with what config.json gives: the lossless
    conversion agrees on every one (exit 0); a context length or a rope base changed in the GGUF
    is reported with config.json's value on the HF side (exit 1), in either order."""
    cfg = json.loads((models["dir"] / "config.json").read_text())
    r, doc = tbx_diff(tbx, models["dir"], models["f32"])
    md = doc["metadata"]
    assert r.rc == 0 and md["compared"] is True
    assert md["changed"] == md["added"] == md["removed"] == [] and md["not_derived"] == []
    p = tmp_path / "ctx.gguf"
    old = set_gguf_scalar(models["f32"], p, "llama.context_length", "<I", 999)
    assert old == cfg["max_position_embeddings"]
    r, doc = tbx_diff(tbx, models["dir"], p)
    assert r.rc == 1 and doc["identical"] is False and doc["summary"]["metadata_changes"] == 1
    assert [(c["key"], c["a"], c["b"]) for c in doc["metadata"]["changed"]] == \
        [("llama.context_length", cfg["max_position_embeddings"], 999)]
    r, doc = tbx_diff(tbx, p, models["dir"])  # the GGUF as A
    assert r.rc == 1
    assert [(c["key"], c["a"], c["b"]) for c in doc["metadata"]["changed"]] == \
        [("llama.context_length", 999, cfg["max_position_embeddings"])]
    assert "llama.context_length" in run(tbx, "diff", models["dir"], p).out.decode()
    p2 = tmp_path / "theta.gguf"
    assert set_gguf_scalar(models["f32"], p2, "llama.rope.freq_base", "<f", 12345.0) == \
        cfg["rope_theta"]
    r, doc = tbx_diff(tbx, models["dir"], p2)
    assert r.rc == 1
    assert [(c["key"], c["a"], c["b"]) for c in doc["metadata"]["changed"]] == \
        [("llama.rope.freq_base", cfg["rope_theta"], 12345.0)]


def test_map_auto_rope_freqs_derived(tbx, tmp_path):
    """Llama 3.1's rope scaling: rope_freqs.weight is generated by the conversion, in the GGUF
    only: listed as derived, not added (exit 0); a tensor value changed is still reported."""
    from test_hf_gguf import LLAMA3_ROPE
    d = tmp_path / "llama3"
    make_decoder(d, "llama", 4, LLAMA3_ROPE)
    g = tmp_path / "llama3.gguf"
    r = run(tbx, "convert", d, g)
    assert r.rc == 0, r.describe()
    assert "rope_freqs.weight" in {t.name for t in gguf.GGUFReader(str(g)).tensors}
    assert not any("rope_freqs" in k for k in stn.load_file(str(d / "model.safetensors")))
    for a, b in ((d, g), (g, d)):
        r, doc = tbx_diff(tbx, a, b)
        assert r.rc == 0, r.describe()
        assert [t["name"] for t in doc["tensors"]["derived"]] == ["rope_freqs.weight"]
        assert doc["tensors"]["added"] == doc["tensors"]["removed"] == []
        assert doc["metadata"]["changed"] == [] and doc["identical"] is True
    p = tmp_path / "t.gguf"
    tamper(g, p, "blk.0.ffn_down.weight", 5, 0.125)
    r, doc = tbx_diff(tbx, d, p)
    assert r.rc == 1
    assert [t["name"] for t in doc["tensors"]["compared"] if not t["identical"]] == \
        ["blk.0.ffn_down.weight"]


def test_map_auto_xlm_roberta_positions(tbx, tmp_path):
    """XLM-RoBERTa: the conversion drops position_embd's first pad_token_id + 1 rows and writes
    context_length less them; --map auto compares the GGUF's rows with the HF rows they came
    from (no shape change) and the context length with config.json's through that offset
    (exit 0); a changed position value is reported (exit 1)."""
    from test_hf_runtime import build
    d = tmp_path / "xlmr"
    build(d, "xlm-roberta", None)
    cfg = json.loads((d / "config.json").read_text())
    off = cfg["pad_token_id"] + 1
    g = tmp_path / "xlmr.gguf"
    r = run(tbx, "convert", d, g)
    assert r.rc == 0, r.describe()
    r, doc = tbx_diff(tbx, d, g)
    assert r.rc == 0, r.describe()
    assert doc["identical"] is True and doc["summary"]["shape_changes"] == 0
    assert doc["metadata"]["compared"] is True and doc["metadata"]["changed"] == []
    pos = next(t for t in doc["tensors"]["compared"] if t["name"] == "position_embd.weight")
    P = cfg["max_position_embeddings"]
    assert pos["a_shape"] == [P, 64] and pos["b_shape"] == [P - off, 64]
    assert pos["transform"] == f"rows {off}..{P}" and pos["identical"] is True
    assert pos["elements"] == (P - off) * 64
    p = tmp_path / "t.gguf"
    tamper(g, p, "position_embd.weight", 3, 0.5)
    r, doc = tbx_diff(tbx, d, p)
    assert r.rc == 1
    assert [t["name"] for t in doc["tensors"]["compared"] if not t["identical"]] == \
        ["position_embd.weight"]
    p2 = tmp_path / "ctx.gguf"
    assert set_gguf_scalar(g, p2, "bert.context_length", "<I", P) == P - off
    r, doc = tbx_diff(tbx, d, p2)
    assert r.rc == 1
    assert [(c["key"], c["a"], c["b"]) for c in doc["metadata"]["changed"]] == \
        [("bert.context_length", P - off, P)]
