"""Finite values beyond what a quantized type can hold (issue 19, item 6).

A finite 3.4e38 quantized with `tbx convert --quant` decoded as 0.0 from MCF q8 and as +inf from
GGUF q4_0, with exit 0 and no word. Now:

* the values are the reference quantizer's: ggml's own `ggml_quantize_chunk` (libggml-base of
  llama.cpp in .venv, through ctypes) for the GGUF types: every byte, the K types too (issue
  21: ggml's bytes are the default; tensorbox's own K search is --quant-method search, and
  test_search_keeps_ggmls_unrepresentable_blocks checks it gives ggml's bytes to the
  super-blocks the type cannot represent); mantle's own `quantize` for MCF (tests/data/mcf-overflow, made by
  mantle: its files byte for byte with --quant-method mantle, and the blocks without a finite
  f16 scale bit for bit with the default method);
* the tensor gets a warning naming it, with the number of values beyond the type's range and of
  finite values that came out Inf/NaN (the numbers derived here from the input and from ggml's
  or mantle's output), exit 0; `--strict` makes it an error (exit 1, no output).

The range of a type (65504 x its largest |code| x largest sub-scale) is written here from the
block layouts of the specification (../shared/specs/NOTES.md), not taken from tensorbox.
A missing llama_cpp / gguf / numpy is a failure, never a skip.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from conftest import assert_clean_exit, ggml_base_lib, need, run

np = need("numpy")
stn = need("safetensors.numpy")
gguf = need("gguf")

REPO = Path(__file__).resolve().parents[2]
OVERFLOW = REPO / "tests" / "data" / "mcf-overflow"
F16_MAX = 65504.0

# largest |decoded value| / largest f16 scale, from the block layouts (NOTES.md, GGUF section):
# q4_0 (q-8)d; q4_1 d*q+m; q5_0 (q-16)d; q5_1 d*q+m; q8_0 i8*d; q2_K d*sc*q - dmin*m (4-bit sc,
# 2-bit q); q3_K d*(sc-32)*(q-4); q4_K/q5_K d*sc*q - dmin*m (6-bit sc); q6_K d*sc*(q-32) (i8 sc)
CODES = {"q4_0": 8, "q4_1": 16, "q5_0": 16, "q5_1": 32, "q8_0": 128, "q2_k": 45, "q3_k": 128,
         "q4_k": 945, "q5_k": 1953, "q6_k": 4096,
         # MCF: q*f16(S) (q8 q4), q*f16(S)*u6/32 (k), two's complement codes, u6 <= 63
         "q8": 128, "q4": 8, "k6": 32 * 63 / 32, "k4": 8 * 63 / 32, "k3": 4 * 63 / 32,
         "k2": 2 * 63 / 32}
GGML_ID = {"q4_0": 2, "q4_1": 3, "q5_0": 6, "q5_1": 7, "q8_0": 8, "q2_k": 10, "q3_k": 11,
           "q4_k": 12, "q5_k": 13, "q6_k": 14}
LEGACY = ("q4_0", "q4_1", "q5_0", "q5_1", "q8_0")
KQUANTS = ("q2_k", "q3_k", "q4_k", "q5_k", "q6_k")


def type_range(t: str) -> float:
    return CODES[t] * F16_MAX


@pytest.fixture(scope="module")
def ggml():
    """libggml-base of the llama.cpp build in .venv (llama_cpp/lib), through ctypes."""
    lib = ggml_base_lib()

    def quantize(name: str, a) -> bytes:
        a = np.ascontiguousarray(a, np.float32)
        rows, cols = a.shape
        t = GGML_ID[name]
        dst = np.zeros(lib.ggml_row_size(t, cols) * rows, np.uint8)
        n = lib.ggml_quantize_chunk(t, a.ctypes.data, dst.ctypes.data, 0, rows, cols, None)
        assert n == dst.size
        return dst.tobytes()
    return quantize


def dequant(name: str, raw: bytes, shape):
    with np.errstate(all="ignore"):
        return gguf.quants.dequantize(np.frombuffer(raw, np.uint8),
                                      gguf.GGMLQuantizationType[name.upper()]).reshape(shape)


def edge_rows():
    """Rows of 256 values: standard normal ones, and ones holding one huge value (beyond every
    type's range, beyond some, within all) at the start, inside and at the end of a block."""
    rng = np.random.default_rng(19)
    rows = []
    for big in (3.4e38, -3.4e38, 1e30, 1e10, 1e8, 1e7, -1e7, 8.89e6, 3e6, 1e6, 1e5):
        for pos in (0, 7, 200):
            r = rng.standard_normal(256).astype(np.float32)
            r[pos] = big
            rows.append(r)
    rows += [rng.standard_normal(256).astype(np.float32) for _ in range(4)]
    return np.stack(rows)


WARN = re.compile(r'tbx: warning: tensor "(?P<name>[^"]+)" \((?P<src>\w+) -> (?P<dst>\w+)\):')


def warnings_of(err: bytes) -> dict:
    """{tensor: (values beyond the range, finite values that came out Inf/NaN)} of the
    warnings on stderr."""
    out = {}
    for line in err.decode().splitlines():
        m = WARN.match(line)
        if m:
            b = re.search(r" (\d+) finite values? beyond ", line)
            n = re.search(r" (\d+) finite values? came out as Inf or NaN", line)
            out[m["name"]] = (int(b[1]) if b else 0, int(n[1]) if n else 0)
    return out


def gguf_tensor_bytes(path, name) -> bytes:
    r = gguf.GGUFReader(str(path))
    t = next(t for t in r.tensors if t.name == name)
    return bytes(np.asarray(t.data).view(np.uint8).reshape(-1))


@pytest.mark.parametrize("qtype", LEGACY + KQUANTS)
def test_ggml_types_give_ggmls_values_and_warn(tbx, ggml, tmp_path, qtype):
    a = edge_rows()
    src = tmp_path / "edge.safetensors"
    stn.save_file({"w": a}, str(src))
    out = tmp_path / "edge.gguf"
    r = run(tbx, "convert", src, out, "--quant", qtype)
    assert_clean_exit(r)
    assert r.rc == 0, r.describe()
    got = gguf_tensor_bytes(out, "w")
    ref = ggml(qtype, a)
    assert len(got) == len(ref)
    rb = len(ref) // len(a)  # bytes per row (one super-block for the K types)
    rng_t = type_range(qtype)
    # ggml's bytes for every row, the K types too (issue 21: ggml_quantize_chunk's bytes are
    # the default; where the type cannot represent a row ggml stores an Inf/NaN or zero scale)
    for i, row in enumerate(a):
        assert got[i * rb:(i + 1) * rb] == ref[i * rb:(i + 1) * rb], (qtype, i, row.max())
    unrepresentable = sum(bool(np.any(np.abs(row) > rng_t)) for row in a)
    assert unrepresentable > 0
    # the warning names the tensor and counts what ggml's values show
    ref_vals = dequant(qtype, ref, a.shape)
    want_beyond = int(np.sum(np.abs(a) > rng_t))
    want_nonfinite = int(np.sum(~np.isfinite(ref_vals)))
    w = warnings_of(r.err)
    assert w.get("w") == (want_beyond, want_nonfinite), r.describe()
    # --strict: the same tensor stops the conversion; nothing is written
    out2 = tmp_path / "strict.gguf"
    r = run(tbx, "convert", src, out2, "--quant", qtype, "--strict")
    assert_clean_exit(r)
    assert r.rc == 1 and b'"w"' in r.err and b"--strict" in r.err, r.describe()
    assert not out2.exists()
    assert not list(tmp_path.glob(".*tbx-tmp*"))


@pytest.mark.parametrize("qtype", KQUANTS)
def test_search_keeps_ggmls_unrepresentable_blocks(tbx, ggml, tmp_path, qtype):
    """--quant-method search: tensorbox's own K encoder for the rows the type can represent
    (finite output), ggml's bytes for the super-blocks it cannot; the same warning."""
    a = edge_rows()
    src = tmp_path / "edge.safetensors"
    stn.save_file({"w": a}, str(src))
    out = tmp_path / "edge.gguf"
    r = run(tbx, "convert", src, out, "--quant", qtype, "--quant-method", "search")
    assert_clean_exit(r)
    assert r.rc == 0, r.describe()
    got = gguf_tensor_bytes(out, "w")
    ref = ggml(qtype, a)
    rb = len(ref) // len(a)
    rng_t = type_range(qtype)
    unrepresentable = 0
    for i, row in enumerate(a):
        if np.any(np.abs(row) > rng_t):
            assert got[i * rb:(i + 1) * rb] == ref[i * rb:(i + 1) * rb], (qtype, i, row.max())
            unrepresentable += 1
        else:
            assert np.isfinite(dequant(qtype, got[i * rb:(i + 1) * rb], (1, 256))).all(), i
    assert unrepresentable > 0
    want_beyond = int(np.sum(np.abs(a) > rng_t))
    want_nonfinite = int(np.sum(~np.isfinite(dequant(qtype, got, a.shape))))
    assert warnings_of(r.err).get("w") == (want_beyond, want_nonfinite), r.describe()


def test_finite_values_within_range_give_no_warning(tbx, ggml, tmp_path):
    """Normal weights: no warning, and --strict passes."""
    rng = np.random.default_rng(3)
    src = tmp_path / "n.safetensors"
    stn.save_file({"w": (rng.standard_normal((8, 256)) * 100).astype(np.float32)}, str(src))
    for qtype in LEGACY + KQUANTS:
        r = run(tbx, "convert", src, tmp_path / f"{qtype}.gguf", "--quant", qtype, "--strict")
        assert r.rc == 0 and b"warning" not in r.err, r.describe()


def test_the_issues_reproduction(tbx, tmp_path):
    """3.4e38 in a [2, 32] tensor: q4_0 decodes it as ggml does (Inf) and MCF q8 as mantle does
    (Inf, not 0.0); both warn naming the tensor."""
    a = np.zeros((2, 32), np.float32)
    a[0, 0], a[0, 1] = 3.4e38, 1.0
    a[1] = np.linspace(-1, 1, 32)
    src = tmp_path / "big.safetensors"
    stn.save_file({"w": a}, str(src))
    for out, q in ((tmp_path / "b.gguf", "q4_0"), (tmp_path / "b.mcf", "q8")):
        r = run(tbx, "convert", src, out, "--quant", q)
        assert r.rc == 0, r.describe()
        assert warnings_of(r.err).get("w") == (1, 32), r.describe()
        v = np.frombuffer(run(tbx, "cat", out, "w", "--as", "f32").out, np.float32)
        assert v[0] == np.inf and np.isnan(v[1]), v[:4]
        assert np.isfinite(v[32:]).all()


MCF_KINDS = ("q8", "q4", "k6", "k4", "k3", "k2")


@pytest.mark.parametrize("kind", MCF_KINDS)
def test_mcf_blocks_without_a_finite_scale_are_mantles(tbx, tmp_path, kind):
    src = OVERFLOW / "huge_in.mcf"
    mantle_file = OVERFLOW / f"mantle_{kind}.mcf"
    x = np.frombuffer(run(tbx, "cat", src, "w", "--as", "f32").out, np.float32).reshape(4, 96)
    m = np.frombuffer(run(tbx, "cat", mantle_file, "w", "--as", "f32").out,
                      np.float32).reshape(4, 96)
    assert (~np.isfinite(m)).any()  # the fixture has blocks without a finite scale
    # --quant-method mantle: mantle's file, byte for byte
    out_m = tmp_path / "m.mcf"
    r = run(tbx, "convert", src, out_m, "--quant", kind, "--quant-method", "mantle")
    assert r.rc == 0, r.describe()
    assert out_m.read_bytes() == mantle_file.read_bytes()
    want = (int(np.sum(np.abs(x) > type_range(kind))), int(np.sum(~np.isfinite(m))))
    assert warnings_of(r.err).get("w") == want, r.describe()
    # default method: the blocks mantle cannot give a finite scale decode exactly as mantle's;
    # every other block is finite (and its own, better fit)
    out_b = tmp_path / "b.mcf"
    r = run(tbx, "convert", src, out_b, "--quant", kind)
    assert r.rc == 0, r.describe()
    b = np.frombuffer(run(tbx, "cat", out_b, "w", "--as", "f32").out, np.float32).reshape(4, 96)
    bs = 32 if kind.startswith("q") else 256
    for row in range(4):
        for c0 in range(0, 96, bs):
            mb, bb = m[row, c0:c0 + bs], b[row, c0:c0 + bs]
            if not np.isfinite(mb).all():
                assert mb.tobytes() == bb.tobytes(), (row, c0)
            else:
                assert np.isfinite(bb).all(), (row, c0)
    assert warnings_of(r.err).get("w") == want, r.describe()
    r = run(tbx, "convert", src, tmp_path / "s.mcf", "--quant", kind, "--strict")
    assert r.rc == 1 and b'"w"' in r.err, r.describe()
    assert not (tmp_path / "s.mcf").exists()
