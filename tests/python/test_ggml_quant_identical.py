"""Every ggml block type tbx quantizes to gives ggml's own bytes (issue 21, first piece).

`tbx convert in.safetensors out.gguf --quant TYPE` must write, for every type `tbx convert
--help` lists for gguf, the bytes llama.cpp's libggml (`ggml_quantize_chunk`, no importance
matrix: what llama-quantize writes without --imatrix) gives the same rows, byte for byte (the
types ggml refuses without an importance matrix, ggml_quantize_requires_imatrix: iq2_xxs,
iq2_xs, iq1_s, are refused by tbx too, before anything is written): random
rows and edge rows (zeros, signed zeros, constants, huge and tiny magnitudes, subnormals, single
outliers, ramps), rows of one block and of several (32, 64, 256, 512, 768, 1024 values). The
expected bytes come from libggml-base.so of the llama.cpp build in .venv through ctypes; the
tensor is read back with gguf-py. The Hugging Face -> GGUF import (all-MiniLM-L6-v2 to q4_k
and its q5_0 fallback) gives ggml's bytes too.

tensorbox's own K-quant search stays an explicit choice (--quant-method search, GGUF's write
option quant_method=search): other bytes, and its RMSE and ggml's on the same values printed;
the figures are checked against the RMSE computed here from the two files (gguf-py's decoding).
A missing llama_cpp / gguf / numpy is a failure, never a skip.
"""
from __future__ import annotations

import re
import struct
from pathlib import Path

import pytest

from conftest import assert_clean_exit, ggml_base_lib, need, run, tbx_path

np = need("numpy")
stn = need("safetensors.numpy")
gguf = need("gguf")

Q = gguf.GGMLQuantizationType


def gguf_quant_types() -> list[str]:
    """The quantization types `tbx convert --help` lists for gguf (not a hand list)."""
    r = run(tbx_path(), "convert", "--help")
    text = (r.out + r.err).decode()
    block = text.split("Quantization types (--quant TYPE):\n", 1)[1].split("\nOptions", 1)[0]
    types, fmt = {}, None
    for line in block.splitlines():  # "  gguf   t1 t2 ..." then wrapped lines more indented
        if line[2:3] != " ":
            fmt = line.split()[0]
            types[fmt] = line.split()[1:]
        else:
            types[fmt] += line.split()
    assert "gguf" in types, text
    assert len(types["gguf"]) >= 25, types  # the 25 of today at least: none lost silently
    return types["gguf"]


TYPES = gguf_quant_types()
K_TYPES = [t for t in TYPES if t.endswith("_k")]


def ggml_lib():
    """libggml-base of the llama.cpp build in .venv (conftest.ggml_base_lib)."""
    return ggml_base_lib()


def ggml_type(name: str) -> int:
    """ggml's type id of a type name (ggml_type_name; the gguf-py in .venv may predate the
    newest types, e.g. q2_0)."""
    lib = ggml_lib()
    for t in range(64):
        n = lib.ggml_type_name(t)
        if n and n.decode().lower() == name.lower():
            return t
    pytest.fail(f"libggml has no type {name}", pytrace=False)


@pytest.fixture(scope="module")
def ggml():
    """ggml_quantize_chunk of libggml-base (llama_cpp/lib in .venv), through ctypes."""
    lib = ggml_lib()

    def quantize(name: str, a) -> bytes:
        a = np.ascontiguousarray(a, np.float32)
        rows, cols = a.shape
        t = ggml_type(name)
        lib.ggml_quantize_init(t)
        dst = np.zeros(lib.ggml_row_size(t, cols) * rows, np.uint8)
        n = lib.ggml_quantize_chunk(t, a.ctypes.data, dst.ctypes.data, 0, rows, cols, None)
        assert n == dst.size
        return dst.tobytes()
    quantize.requires_imatrix = lambda name: bool(lib.ggml_quantize_requires_imatrix(
        ggml_type(name)))
    return quantize


def block_of(qtype: str) -> int:
    return int(ggml_lib().ggml_blck_size(ggml_type(qtype)))


def edge_rows(cols: int, seed: int) -> np.ndarray:
    """Rows of `cols` values: random and edge cases."""
    rng = np.random.default_rng(seed)
    n = lambda: rng.standard_normal(cols).astype(np.float32)
    rows = [n(), n() * 0.02, n() * 300, rng.uniform(0, 1, cols).astype(np.float32),
            rng.uniform(-1, 0, cols).astype(np.float32),
            (rng.standard_normal(cols) ** 3).astype(np.float32),          # heavy tails
            np.zeros(cols, np.float32), np.full(cols, -0.0, np.float32),
            np.full(cols, 1.0, np.float32), np.full(cols, -2.5, np.float32),
            np.full(cols, 7e-3, np.float32),
            n() * 1e4, n() * 6e4, n() * 1e-4, n() * 1e-8, n() * 1e-30,
            np.full(cols, 1e-40, np.float32),                              # subnormal
            np.linspace(-1, 1, cols, dtype=np.float32),
            np.linspace(0, 5, cols, dtype=np.float32),
            np.where(np.arange(cols) % 2, 1.0, -1.0).astype(np.float32)]
    for pos, big in ((0, 50.0), (cols // 2 + 3, -80.0), (cols - 1, 1e3), (5, 1e6)):
        r = n()
        r[pos] = big
        rows.append(r)
    r = np.zeros(cols, np.float32)
    r[cols // 3] = 1.0  # one value, the rest zero
    rows.append(r)
    r = np.full(cols, 3.0, np.float32)
    r[1] = -3.0
    rows.append(r)
    return np.stack(rows)


def lengths(qtype: str) -> list[int]:
    b = block_of(qtype)
    return sorted({b, 2 * b, 3 * b, 256, 512, 768, 1024} if b < 256 else {b, 2 * b, 3 * b, 4 * b})


def gguf_tensors(path) -> dict:
    """{name: (ggml type id, bytes)} by gguf-py's reader; for a file holding a type the gguf-py
    in .venv does not know yet (q2_0), by the minimal reader below."""
    try:
        r = gguf.GGUFReader(str(path))
    except ValueError as e:
        if "GGMLQuantizationType" not in str(e):
            raise
        return gguf_tensors_minimal(path)
    return {t.name: (t.tensor_type, bytes(np.asarray(t.data).view(np.uint8).reshape(-1)))
            for t in r.tensors}


def gguf_tensors_minimal(path) -> dict:
    """The tensor table of a GGUF v3 file, read from the format's description (header, key/value
    pairs skipped by type, tensor infos, general.alignment); sizes from ggml_row_size."""
    blob = Path(path).read_bytes()
    pos = 0

    def take(fmt):
        nonlocal pos
        v = struct.unpack_from("<" + fmt, blob, pos)
        pos += struct.calcsize("<" + fmt)
        return v[0] if len(v) == 1 else v

    def string():
        nonlocal pos
        n = take("Q")
        pos += n
        return blob[pos - n:pos].decode()

    scalar = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q",
              12: "d"}

    def value(t):
        if t == 8:
            return string()
        if t == 9:
            et, n = take("I"), take("Q")
            return [value(et) for _ in range(n)]
        return take(scalar[t])

    assert blob[:4] == b"GGUF" and take("4s") == b"GGUF" and take("I") == 3
    nt, nkv = take("Q"), take("Q")
    align = 32
    for _ in range(nkv):
        k = string()
        v = value(take("I"))
        if k == "general.alignment":
            align = v
    infos = []
    for _ in range(nt):
        name = string()
        dims = [take("Q") for _ in range(take("I"))]
        infos.append((name, dims, take("I"), take("Q")))
    base = (pos + align - 1) // align * align
    lib = ggml_lib()
    out = {}
    for name, dims, t, off in infos:
        rows = int(np.prod(dims[1:])) if len(dims) > 1 else 1
        size = lib.ggml_row_size(t, dims[0]) * rows
        out[name] = (t, blob[base + off:base + off + size])
    return out


def dequant(qtype: str, raw: bytes, shape) -> np.ndarray:
    with np.errstate(all="ignore"):
        return gguf.quants.dequantize(np.frombuffer(raw, np.uint8),
                                      Q[qtype.upper()]).reshape(shape)


@pytest.mark.parametrize("qtype", TYPES)
def test_tbx_bytes_are_ggml_quantize_chunks(tbx, ggml, tmp_path, qtype):
    W = {f"w{c}": edge_rows(c, c) for c in lengths(qtype)}
    src = tmp_path / "in.safetensors"
    stn.save_file(W, str(src))
    out = tmp_path / "out.gguf"
    r = run(tbx, "convert", src, out, "--quant", qtype)
    assert_clean_exit(r)
    if ggml.requires_imatrix(qtype):
        # ggml_quantize_chunk refuses it without an importance matrix: so does tbx, before
        # writing anything, naming the type and what it needs
        assert r.rc != 0, r.describe()
        assert f"quantizing to {qtype} needs an importance matrix".encode() in r.err, r.describe()
        assert b"--imatrix" in r.err, r.describe()
        assert not out.exists()
        return
    assert r.rc == 0, r.describe()
    got = gguf_tensors(out)
    for name, a in W.items():
        t, b = got[name]
        assert t == ggml_type(qtype), (name, t)
        want = ggml(qtype, a)
        assert len(b) == len(want), name
        if b != want:
            rb = len(want) // len(a)
            bad = [i for i in range(len(a)) if b[i * rb:(i + 1) * rb] != want[i * rb:(i + 1) * rb]]
            pytest.fail(f"{qtype} {name}: rows {bad} differ from ggml_quantize_chunk's bytes")
    # --quant-method ggml names the default: the same file
    out2 = tmp_path / "out2.gguf"
    r = run(tbx, "convert", src, out2, "--quant", qtype, "--quant-method", "ggml")
    assert r.rc == 0, r.describe()
    assert out2.read_bytes() == out.read_bytes()


@pytest.mark.parametrize("qtype", K_TYPES)
def test_search_is_explicit_and_its_error_is_printed_next_to_ggmls(tbx, ggml, tmp_path, qtype):
    rng = np.random.default_rng(21)
    a = (rng.standard_normal((16, 512)) * 0.05).astype(np.float32)
    a[3, 17] = 2.0
    src = tmp_path / "in.safetensors"
    stn.save_file({"w": a}, str(src))
    out = tmp_path / "s.gguf"
    r = run(tbx, "convert", src, out, "--quant", qtype, "--quant-method", "search", "-v")
    assert_clean_exit(r)
    assert r.rc == 0, r.describe()
    b = gguf_tensors(out)["w"][1]
    ref = ggml(qtype, a)
    assert b != ref  # its own bytes
    rmse = lambda raw: float(np.sqrt(np.mean((dequant(qtype, raw, a.shape).astype(np.float64)
                                              - a) ** 2)))
    e_search, e_ggml = rmse(b), rmse(ref)
    err = r.err.decode()
    m = re.search(r"quantized w: 8192 values, RMSE (\S+) \(ggml's reference on the same "
                  r"values: (\S+)\)", err)
    assert m, r.describe()
    assert float(m[1]) == pytest.approx(e_search, rel=1e-5), (m[1], e_search)
    assert float(m[2]) == pytest.approx(e_ggml, rel=1e-5), (m[2], e_ggml)
    m = re.search(rf"quantized 1 tensors \(8192 values\) to {qtype}, method search: RMSE (\S+); "
                  r"ggml's reference \(method ggml, the default\) on the same values: RMSE (\S+)",
                  err)
    assert m, r.describe()
    assert float(m[1]) == pytest.approx(e_search, rel=1e-5)
    assert float(m[2]) == pytest.approx(e_ggml, rel=1e-5)
    # -O spells the same option
    out2 = tmp_path / "o.gguf"
    r = run(tbx, "convert", src, out2, "--quant", qtype, "-O", "quant_method=search")
    assert r.rc == 0, r.describe()
    assert out2.read_bytes() == out.read_bytes()


def test_search_refused_where_it_would_apply_to_nothing(tbx, tmp_path):
    src = tmp_path / "in.safetensors"
    stn.save_file({"w": np.ones((2, 256), np.float32)}, str(src))
    cases = [(("--quant", "q4_0", "--quant-method", "search"), b"q2_k .. q6_k"),
             (("--quant", "q4_k", "--quant-method", "best"), b"ggml or search"),
             (("--quant-method", "search"), b"no quantization"),
             (("--quant", "q4_k", "--quant-method", "fast"), b"quant_method")]
    for args, needle in cases:
        out = tmp_path / "x.gguf"
        r = run(tbx, "convert", src, out, *args)
        assert_clean_exit(r)
        assert r.rc == 2 and needle in r.err, (args, r.describe())
        assert not out.exists()


def test_hugging_face_import_gives_ggmls_bytes(tbx, ggml, minilm_dir, tmp_path):
    """all-MiniLM-L6-v2 to GGUF q4_k: the 1536-wide ffn_down rows are q4_K, the 384-wide ones
    get the q5_0 fallback; each tensor's bytes are ggml_quantize_chunk's of the HF weights
    (BERT's weights are not reordered on the way)."""
    out = tmp_path / "m.gguf"
    # --pure: every tensor q4_K (llama-quantize's Q4_K_M mix, what --quant q4_k of a model
    # directory means, gives some q6_K: test_llama_presets.py checks it against llama.cpp)
    r = run(tbx, "convert", minilm_dir, out, "--quant", "q4_k", "--pure", timeout=600)
    assert_clean_exit(r)
    assert r.rc == 0, r.describe()
    W = stn.load_file(str(minilm_dir / "model.safetensors"))
    got = gguf_tensors(out)
    checked = {Q.Q4_K: 0, Q.Q5_0: 0}
    for l in range(6):
        for hf, gg in ((f"encoder.layer.{l}.output.dense.weight", f"blk.{l}.ffn_down.weight"),
                       (f"encoder.layer.{l}.intermediate.dense.weight", f"blk.{l}.ffn_up.weight"),
                       (f"encoder.layer.{l}.attention.self.value.weight",
                        f"blk.{l}.attn_v.weight")):
            key = next(k for k in W if k.endswith(hf))
            t, b = got[gg]
            qtype = "q4_k" if W[key].shape[1] % 256 == 0 else "q5_0"
            assert t == Q[qtype.upper()], (gg, t)
            assert b == ggml(qtype, W[key]), gg
            checked[t] += 1
    assert checked == {Q.Q4_K: 6, Q.Q5_0: 12}, checked
    # the explicit search applies there too: other q4_K bytes, the fallback's unchanged
    out2 = tmp_path / "s.gguf"
    r = run(tbx, "convert", minilm_dir, out2, "--quant", "q4_k", "--quant-method", "search",
            timeout=600)
    assert r.rc == 0, r.describe()
    got2 = gguf_tensors(out2)
    assert got2["blk.0.ffn_down.weight"][1] != got["blk.0.ffn_down.weight"][1]
    assert got2["blk.0.ffn_up.weight"] == got["blk.0.ffn_up.weight"]
    assert b"method search: RMSE" in r.err, r.describe()
