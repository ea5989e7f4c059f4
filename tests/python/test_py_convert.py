"""tensorbox.convert / save_file offer what `tbx convert` offers (issue 19, items 6-8 in Python).

* requantize: a quantized GGUF (written by gguf-py, its blocks quantized by gguf-py) with
  quant="q8_0" raises LossyError naming a tensor and its type, leaving nothing behind;
  requantize=True writes the bytes `tbx convert --requantize` writes, whose q8_0 blocks are
  gguf-py's quantization of gguf-py's dequantization of the input;
* dequantize=True GGUF -> GGUF: every tensor is gguf-py's dequantization, every metadata entry
  keeps its gguf-py type (general.file_type the u32 of ALL_F32), the CLI's bytes;
* a finite 3.4e38 quantized to q4_0: a ConversionWarning naming the tensor, with the text
  `tbx convert` prints and counts derived here from the input and from gguf-py's decoding of
  the output; strict=True raises LossyError instead (no warning, no file, no temporary file),
  in convert and in save_file;
* the list convert() returns is, line for line, what `tbx convert -v` prints for the same
  conversion, and its dtypes are what the files hold (safetensors / gguf-py / tbx info);
* quant_method="mantle" (and quant_clip) give mantle's own files (tests/data/mcf, made by
  mantle's quantize) and the CLI's bytes;
* meta={...}: typed as --meta KEY:TYPE=VALUE, read back by gguf-py with those types, the CLI's
  bytes; refused where the library refuses it;
* option combinations tbx convert refuses are refused before any work, naming the keyword;
* options={...}: the output format's own options (tbx convert -O): MCF's dedup gives shared
  or separate payloads (offsets read back with tbx info), an option the format does not have
  or a value of another type is refused naming it before anything is written;
* the GIL stays released during a long convert (another Python thread keeps running).
A missing peer (gguf, safetensors, numpy) is a failure, never a skip.
"""
from __future__ import annotations

import re
import threading
import time
import warnings
from pathlib import Path

import pytest

from conftest import info_json, need, run

np = need("numpy")
gguf = need("gguf")
stn = need("safetensors.numpy")
tensorbox = need("tensorbox")

Q = gguf.GGMLQuantizationType
V = gguf.GGUFValueType
MCF = Path(__file__).resolve().parents[1] / "data" / "mcf" / "files"


def leftovers(d: Path) -> list:
    """Temporary files a writer (or save_file's scratch) left in d."""
    return sorted(p.name for p in d.iterdir() if ".tbx-tmp" in p.name or ".tbx-py-" in p.name)


def gguf_tensors(path) -> dict:
    return {t.name: t for t in gguf.GGUFReader(str(path)).tensors}


def raw(t) -> bytes:
    return bytes(np.asarray(t.data).view(np.uint8).reshape(-1))


def fields(path) -> dict:
    """{key: (gguf-py value types, contents)} of every key but the GGUF header's."""
    r = gguf.GGUFReader(str(path))
    return {k: (tuple(f.types), f.contents()) for k, f in r.fields.items()
            if not k.startswith("GGUF.")}


def cli(tbx, *args):
    r = run(tbx, "convert", *args)
    assert r.rc == 0, r.describe()
    return r


# ------------------------------------------------------------------------------------------
# Inputs
# ------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def qgguf(tmp_path_factory) -> Path:
    """A quantized llama-style GGUF written by gguf-py: q4_1, q5_0 and q8_0 tensors quantized
    by gguf-py, an f16 2-D tensor, f32 norms, and metadata of many gguf-py types."""
    d = tmp_path_factory.mktemp("qgguf")
    rng = np.random.default_rng(19)
    p = d / "q.gguf"
    w = gguf.GGUFWriter(str(p), "llama")
    w.add_key_value("general.file_type", 3, V.UINT32)  # MOSTLY_Q4_1
    w.add_key_value("t.u8", 200, V.UINT8)
    w.add_key_value("t.i8", -5, V.INT8)
    w.add_key_value("t.u16", 60000, V.UINT16)
    w.add_key_value("t.i16", -300, V.INT16)
    w.add_key_value("t.i32", -70000, V.INT32)
    w.add_key_value("t.u64", 1 << 40, V.UINT64)
    w.add_key_value("t.i64", -(1 << 40), V.INT64)
    w.add_key_value("t.f32", 0.25, V.FLOAT32)
    w.add_key_value("t.f64", 1e300, V.FLOAT64)
    w.add_key_value("t.bool", True, V.BOOL)
    w.add_key_value("t.str", "hello", V.STRING)
    w.add_key_value("t.ints", [1, -2, 3], V.ARRAY, V.INT32)
    w.add_key_value("t.toks", ["a", "bb", ""], V.ARRAY, V.STRING)
    for name, shape, qt in (("token_embd.weight", (64, 256), Q.Q4_1),
                            ("blk.0.attn_q.weight", (32, 128), Q.Q5_0),
                            ("output.weight", (64, 256), Q.Q8_0)):
        x = rng.standard_normal(shape).astype(np.float32)
        w.add_tensor(name, gguf.quants.quantize(x, qt), raw_dtype=qt)
    w.add_tensor("blk.0.ffn_up.weight", rng.standard_normal((16, 64)).astype(np.float16))
    w.add_tensor("blk.0.attn_norm.weight", rng.standard_normal(256).astype(np.float32))
    w.add_tensor("output_norm.weight", rng.standard_normal(256).astype(np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return p


@pytest.fixture(scope="module")
def mixed(tmp_path_factory) -> Path:
    """A safetensors file (safetensors.numpy) of tensors --quant q4_k treats differently:
    quantized, fallbacks for rows of 384 and 64, 1-D, 3-D, integer."""
    d = tmp_path_factory.mktemp("mixed")
    rng = np.random.default_rng(23)
    a = {
        "a.weight": rng.standard_normal((8, 256)).astype(np.float32),
        "b.weight": rng.standard_normal((6, 384)).astype(np.float32),
        "c.weight": rng.standard_normal((4, 64)).astype(np.float16),
        "d.bias": rng.standard_normal(256).astype(np.float32),
        "e.cube": rng.standard_normal((2, 3, 32)).astype(np.float32),
        "f.ids": np.arange(12, dtype=np.int64),
    }
    p = d / "mixed.safetensors"
    stn.save_file(a, str(p))
    return p


# q4_0 decodes to at most 8 x 65504 (f16's largest value, its scale's type; NOTES.md: a block
# is (q - 8) * d with q in 0..15)
Q4_0_RANGE = 8 * 65504.0


@pytest.fixture(scope="module")
def huge(tmp_path_factory) -> tuple[Path, dict]:
    """safetensors with finite values q4_0 cannot represent in two tensors."""
    d = tmp_path_factory.mktemp("huge")
    rng = np.random.default_rng(29)
    a = {"w": rng.standard_normal((4, 64)).astype(np.float32),
         "v": rng.standard_normal((2, 32)).astype(np.float32),
         "ok": rng.standard_normal((2, 32)).astype(np.float32)}
    a["w"][1, 5] = 3.4e38
    a["v"][0, 3] = -1e6
    p = d / "huge.safetensors"
    stn.save_file(a, str(p))
    return p, a


# ------------------------------------------------------------------------------------------
# requantize / dequantize
# ------------------------------------------------------------------------------------------
def test_requantize_refused_without_the_option(qgguf, tmp_path):
    out = tmp_path / "q8.gguf"
    with pytest.raises(tensorbox.LossyError) as e:
        tensorbox.convert(qgguf, out, quant="q8_0")
    assert e.value.code == "TBX_E_LOSSY"
    m = re.search(r'tensor "([^"]+)" is already quantized \((\w+)\)', str(e.value))
    assert m, str(e.value)
    src = gguf_tensors(qgguf)
    assert e.value.field == m[1]
    assert src[m[1]].tensor_type.name.lower() == m[2] and m[2] != "q8_0"
    assert not out.exists() and leftovers(tmp_path) == []


def test_requantize_writes_the_clis_bytes(tbx, qgguf, tmp_path):
    out, ref = tmp_path / "py.gguf", tmp_path / "cli.gguf"
    reports = tensorbox.convert(qgguf, out, quant="q8_0", requantize=True)
    cli(tbx, qgguf, ref, "--quant", "q8_0", "--requantize")
    assert out.read_bytes() == ref.read_bytes()
    # ... which are gguf-py's q8_0 of gguf-py's dequantization of each requantized tensor
    src, got = gguf_tensors(qgguf), gguf_tensors(out)
    requantized = [n for n, t in src.items() if t.tensor_type in (Q.Q4_1, Q.Q5_0)]
    assert len(requantized) == 2
    for n in requantized:
        x = gguf.quants.dequantize(np.asarray(src[n].data), src[n].tensor_type)
        assert got[n].tensor_type == Q.Q8_0
        assert raw(got[n]) == np.asarray(gguf.quants.quantize(x, Q.Q8_0)).tobytes(), n
    by = {r.name: r for r in reports}
    for n in requantized:
        # (a llama.cpp model: --quant q8_0 is llama-quantize's Q8_0 preset)
        assert (by[n].action, by[n].out_dtype, by[n].reason) == \
            ("requantized", "q8_0", "llama-quantize Q8_0"), by[n]
        assert by[n].in_dtype == src[n].tensor_type.name.lower()
    assert (by["output.weight"].action, by["output.weight"].reason) == ("kept", "already q8_0")


def test_dequantize_gguf_to_gguf_keeps_typed_metadata(tbx, qgguf, tmp_path):
    out, ref = tmp_path / "py.gguf", tmp_path / "cli.gguf"
    reports = tensorbox.convert(qgguf, out, dequantize=True)
    cli(tbx, qgguf, ref, "--dequantize")
    assert out.read_bytes() == ref.read_bytes()
    src, got = gguf_tensors(qgguf), gguf_tensors(out)
    assert list(got) == list(src)
    for n, t in src.items():
        if t.tensor_type in (Q.F32, Q.F16):
            assert got[n].tensor_type == t.tensor_type and raw(got[n]) == raw(t), n
            continue
        assert got[n].tensor_type == Q.F32, n
        want = gguf.quants.dequantize(np.asarray(t.data), t.tensor_type)
        assert raw(got[n]) == np.asarray(want, np.float32).tobytes(), n
    fi, fo = fields(qgguf), fields(out)
    assert fo["general.file_type"] == ((V.UINT32,), int(gguf.LlamaFileType.ALL_F32))
    assert {k: v for k, v in fo.items() if k != "general.file_type"} == \
        {k: v for k, v in fi.items() if k != "general.file_type"}
    quantized = {n for n, t in src.items() if t.tensor_type not in (Q.F32, Q.F16)}
    assert {r.name for r in reports if r.action == "dequantized"} == quantized
    assert all(r.out_dtype == "f32" and r.reason == "dequantizing requested"
               for r in reports if r.name in quantized)


# ------------------------------------------------------------------------------------------
# values a type cannot hold: warnings, strict
# ------------------------------------------------------------------------------------------
def test_values_beyond_the_range_warn_naming_the_tensor(tbx, huge, tmp_path):
    src, a = huge
    out = tmp_path / "q.gguf"
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        reports = tensorbox.convert(src, out, quant="q4_0")
    mine = [w for w in seen if issubclass(w.category, tensorbox.ConversionWarning)]
    assert len(mine) == len(seen) == 2, [str(w.message) for w in seen]
    assert all(w.filename == __file__ for w in mine)  # points at the caller
    got = gguf_tensors(out)
    for w in mine:
        rep = w.message.report
        x = a[rep.name]
        # the counts, from the input and gguf-py's decoding of what was written
        with np.errstate(all="ignore"):
            dec = gguf.quants.dequantize(np.asarray(got[rep.name].data), Q.Q4_0).reshape(x.shape)
        assert rep.beyond == int(np.count_nonzero(np.abs(x) > Q4_0_RANGE)) == 1
        assert rep.nonfinite == int(np.count_nonzero(np.isfinite(x) & ~np.isfinite(dec))) > 0
        assert rep.range == Q4_0_RANGE and rep.max_abs == float(np.max(np.abs(x)))
        assert f'tensor "{rep.name}" (f32 -> q4_0)' in str(w.message)
    assert sorted(w.message.report.name for w in mine) == ["v", "w"]
    assert [r.warning for r in reports if r.name == "ok"] == [None]
    # the text is the CLI's warning line
    r = cli(tbx, src, tmp_path / "cli.gguf", "--quant", "q4_0")
    assert (tmp_path / "cli.gguf").read_bytes() == out.read_bytes()
    cli_warn = [ln[len("tbx: warning: "):] for ln in r.err.decode().splitlines()
                if ln.startswith("tbx: warning: ")]
    assert cli_warn == [str(w.message) for w in mine]


def test_strict_turns_the_warning_into_an_error(huge, tmp_path):
    src, a = huge
    out = tmp_path / "q.gguf"
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        with pytest.raises(tensorbox.LossyError) as e:
            tensorbox.convert(src, out, quant="q4_0", strict=True)
    assert seen == []  # the error says it; not a warning as well
    assert e.value.code == "TBX_E_LOSSY" and e.value.field in ("w", "v")
    assert f'tensor "{e.value.field}" (f32 -> q4_0)' in str(e.value)
    assert not out.exists() and leftovers(tmp_path) == []
    # save_file: the same, and its scratch file is gone
    with pytest.raises(tensorbox.LossyError) as e:
        tensorbox.save_file(a, out, quant="q4_0", strict=True)
    assert e.value.code == "TBX_E_LOSSY"
    assert not out.exists() and leftovers(tmp_path) == []
    # without strict, save_file warns as convert does
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        tensorbox.save_file(a, out, quant="q4_0")
    assert all(w.category is tensorbox.ConversionWarning for w in seen)
    assert sorted(w.message.report.name for w in seen) == ["v", "w"]
    assert all(w.filename == __file__ for w in seen)  # points at the caller of save_file
    assert out.exists() and leftovers(tmp_path) == []


# ------------------------------------------------------------------------------------------
# the reports are what tbx convert -v prints
# ------------------------------------------------------------------------------------------
def verbose_lines(err: bytes, names) -> list[str]:
    """The per-tensor lines of `tbx convert -v` ("tbx: NAME: ..."), "tbx: " taken off."""
    names = set(names)
    return [ln[5:] for ln in err.decode().splitlines()
            if ln.startswith("tbx: ") and ln[5:].split(": ", 1)[0] in names]


def file_dtypes(tbx, path) -> dict:
    return {t["name"]: t["dtype"] for t in info_json(tbx, path)["tensors"]}


CONVERSIONS = {
    "quant-q4_k": ("mixed", "o.gguf", dict(quant="q4_k"), ["--quant", "q4_k"]),
    "cast-f16": ("qgguf", "o.gguf", dict(cast="f16"), ["--cast", "f16"]),
    "requant-q4_0": ("qgguf", "o.gguf", dict(quant="q4_0", requantize=True),
                     ["--quant", "q4_0", "--requantize"]),
    "dequant-cast-bf16": ("qgguf", "o.safetensors", dict(dequantize=True, cast="bf16",
                                                         stringify_meta=True),
                          ["--dequantize", "--cast", "bf16", "--stringify-meta"]),
    "mcf-k4": ("mixed", "o.mcf", dict(quant="k4"), ["--quant", "k4"]),
    "plain": ("mixed", "o.zt", {}, []),
}


@pytest.mark.parametrize("case", list(CONVERSIONS))
def test_reports_are_the_verbose_lines_of_the_cli(tbx, qgguf, mixed, tmp_path, case):
    which, name, kw, args = CONVERSIONS[case]
    src = {"qgguf": qgguf, "mixed": mixed}[which]
    out, ref = tmp_path / name, tmp_path / ("cli-" + name)
    reports = tensorbox.convert(src, out, **kw)
    r = cli(tbx, src, ref, "-v", *args)
    assert out.read_bytes() == ref.read_bytes()
    names = [rep.name for rep in reports]
    assert verbose_lines(r.err, names) == [rep.describe() for rep in reports]
    # and what the files hold: the input's dtypes, in its order, and the output's
    din, dout = file_dtypes(tbx, src), file_dtypes(tbx, out)
    assert sorted(names) == sorted(dout)
    if case == "requant-q4_0":
        # a llama.cpp model (general.architecture): llama-quantize's Q4_0 preset, its tensors
        # in llama.cpp's order (non-blk names first, then blk.N by N, each by name)
        assert sorted(names) == sorted(din)
        key = lambda n: (int(n.split(".")[1]) if n.startswith("blk.") else -1, n)
        assert names == sorted(din, key=key)
        assert [rep.index for rep in reports] == [list(din).index(n) for n in names]
    else:
        assert names == list(din)
        assert [rep.index for rep in reports] == list(range(len(reports)))
    for rep in reports:
        assert (rep.in_dtype, rep.out_dtype) == (din[rep.name], dout[rep.name]), rep
        assert (rep.action == "kept") == (rep.nvalues == 0), rep
        assert rep.warning is None and rep.beyond == rep.nonfinite == 0
    actions = {rep.action for rep in reports}
    want = {"quant-q4_k": {"quantized", "fallback", "kept"},
            "cast-f16": {"dequantized", "kept"},
            "requant-q4_0": {"requantized", "quantized", "kept"},
            "dequant-cast-bf16": {"dequantized", "cast"},
            "mcf-k4": {"quantized", "kept"},
            "plain": {"kept"}}[case]
    assert actions == want, reports


def test_hugging_face_to_gguf_reports_warnings_and_strict(tbx, tmp_path):
    """A Hugging Face directory to GGUF is its own conversion in the library
    (tbx_gguf_from_hf, llama.cpp names): its reports, warnings and strict reach Python too."""
    from test_hf_gguf import make_decoder
    d = tmp_path / "llama"
    W, _ = make_decoder(d, "llama", 5)
    W["model.layers.0.mlp.up_proj.weight"][3, 7] = 3.4e38
    stn.save_file(W, str(d / "model.safetensors"), metadata={"format": "pt"})
    out, ref = tmp_path / "py.gguf", tmp_path / "cli.gguf"
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        reports = tensorbox.convert(d, out, quant="q4_0")
    r = cli(tbx, d, ref, "-v", "--quant", "q4_0")
    assert out.read_bytes() == ref.read_bytes()
    names = [rep.name for rep in reports]
    assert verbose_lines(r.err, names) == [rep.describe() for rep in reports]
    got = gguf_tensors(out)
    assert names == list(got)
    for rep in reports:
        assert rep.out_dtype == got[rep.name].tensor_type.name.lower(), rep
    assert {rep.action for rep in reports} >= {"quantized", "kept"}
    assert [str(w.message) for w in seen] == \
        [ln[len("tbx: warning: "):] for ln in r.err.decode().splitlines()
         if ln.startswith("tbx: warning: ")]
    assert [w.message.report.name for w in seen] == ["blk.0.ffn_up.weight"]
    with pytest.raises(tensorbox.LossyError) as e:
        tensorbox.convert(d, tmp_path / "strict.gguf", quant="q4_0", strict=True)
    assert e.value.code == "TBX_E_LOSSY" and e.value.field == "blk.0.ffn_up.weight"
    assert not (tmp_path / "strict.gguf").exists() and leftovers(tmp_path) == []


# ------------------------------------------------------------------------------------------
# MCF: quant_method, quant_clip
# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["q8", "q4", "k6", "k4", "k3", "k2"])
def test_quant_method_mantle_is_mantles_file(tbx, tmp_path, kind):
    src = MCF / "quant_input.mcf"
    out, ref = tmp_path / "py.mcf", tmp_path / "cli.mcf"
    tensorbox.convert(src, out, quant=kind, quant_method="mantle")
    assert out.read_bytes() == (MCF / f"quant_{kind}.mcf").read_bytes()  # mantle quantize's
    cli(tbx, src, ref, "--quant", kind, "--quant-method", "mantle")
    assert out.read_bytes() == ref.read_bytes()
    # mantle quantize --min-clip -0.5 --max-clip 0.75
    tensorbox.convert(src, out, quant=kind, quant_method="mantle", quant_clip=(-0.5, 0.75),
                      force=True)
    assert out.read_bytes() == (MCF / f"quant_{kind}_clip.mcf").read_bytes()
    # the keywords spell MCF's write options: given as options (tbx convert -O), the same
    # files (mantle's own)
    opt = tmp_path / "opt.mcf"
    tensorbox.convert(src, opt, quant=kind, options={"quant_method": "mantle"})
    assert opt.read_bytes() == (MCF / f"quant_{kind}.mcf").read_bytes()
    tensorbox.convert(src, opt, quant=kind, force=True, options={
        "quant_method": "mantle", "quant_clip_min": -0.5, "quant_clip_max": 0.75})
    assert opt.read_bytes() == (MCF / f"quant_{kind}_clip.mcf").read_bytes()
    cli(tbx, src, ref, "--force", "--quant", kind, "-O", "quant_method=mantle",
        "-O", "quant_clip_min=-0.5", "-O", "quant_clip_max=0.75")
    assert ref.read_bytes() == (MCF / f"quant_{kind}_clip.mcf").read_bytes()
    # the default method is another one (and the CLI's)
    best = tmp_path / "best.mcf"
    reports = tensorbox.convert(src, best, quant=kind, quant_method="best")
    cli(tbx, src, ref, "--quant", kind, "--force")
    assert best.read_bytes() == ref.read_bytes() != (MCF / f"quant_{kind}.mcf").read_bytes()
    assert {r.out_dtype for r in reports if r.action == "quantized"} == {f"mcf_{kind}"}


@pytest.mark.parametrize("method", ["best", "mantle"])
def test_mcf_reports_carry_the_rmse(tbx, mixed, tmp_path, method):
    """Each tensor quantized to an MCF family reports its error (on_quant), as `tbx convert -v`
    prints it ("quantized NAME: N values, RMSE R"), and it is the error of its decoded values
    against the input's (safetensors.numpy)."""
    out, ref = tmp_path / "py.mcf", tmp_path / "cli.mcf"
    reports = tensorbox.convert(mixed, out, quant="k3", quant_method=method)
    r = cli(tbx, mixed, ref, "-v", "--quant", "k3", "--quant-method", method)
    assert out.read_bytes() == ref.read_bytes()
    printed = {m[1]: (int(m[2]), m[3]) for m in
               re.finditer(r"^quantized (\S+): (\d+) values, RMSE (\S+)$", r.err.decode(), re.M)}
    quantized = [rep for rep in reports if rep.action == "quantized"]
    assert len(quantized) == 3 and len(printed) == 3
    src = stn.load_file(str(mixed))
    dec = tensorbox.load_file(out, dequantize=True)
    for rep in reports:
        if rep.action != "quantized":
            assert rep.rmse is None, rep
            continue
        assert printed[rep.name] == (rep.nvalues, "%.6g" % rep.rmse), rep
        x = src[rep.name].astype(np.float64)
        want = float(np.sqrt(np.mean((dec[rep.name].astype(np.float64) - x) ** 2)))
        assert rep.rmse == pytest.approx(want, rel=1e-6), rep
        assert rep.rmse > 0


def test_ggml_search_reports_both_errors(tbx, tmp_path):
    """GGUF's quant_method: "ggml" (default) gives the CLI's default file; "search" (options= or
    quant_method=) gives the CLI's --quant-method search file, and each q4_K tensor reports the
    RMSE of what was written and of ggml's default bytes on the same values, both computed here
    from the two files with gguf-py."""
    rng = np.random.default_rng(7)
    src = tmp_path / "in.safetensors"
    W = {"a": (rng.standard_normal((8, 512)) * 0.1).astype(np.float32),
         "b": rng.standard_normal((4, 256)).astype(np.float32),
         "c": rng.standard_normal((4, 96)).astype(np.float32)}  # falls back to q5_0
    stn.save_file(W, str(src))
    dflt, srch = tmp_path / "g.gguf", tmp_path / "s.gguf"
    rg = tensorbox.convert(src, dflt, quant="q4_k")
    rs = tensorbox.convert(src, srch, quant="q4_k", options={"quant_method": "search"})
    assert all(r.rmse is None and r.rmse_ggml is None for r in rg)
    cli(tbx, src, tmp_path / "cli.gguf", "--quant", "q4_k", "--quant-method", "search")
    assert (tmp_path / "cli.gguf").read_bytes() == srch.read_bytes() != dflt.read_bytes()
    tensorbox.convert(src, tmp_path / "k.gguf", quant="q4_k", quant_method="search")
    assert (tmp_path / "k.gguf").read_bytes() == srch.read_bytes()
    tg, ts = gguf_tensors(dflt), gguf_tensors(srch)
    for r in rs:
        if r.name == "c":
            assert r.out_dtype == "q5_0" and r.rmse is None and r.rmse_ggml is None, r
            continue
        x = W[r.name].astype(np.float64)
        err = lambda t: float(np.sqrt(np.mean((gguf.quants.dequantize(
            np.frombuffer(raw(t), np.uint8), Q.Q4_K).reshape(x.shape).astype(np.float64) - x) ** 2)))
        assert r.rmse == pytest.approx(err(ts[r.name]), rel=1e-6), r
        assert r.rmse_ggml == pytest.approx(err(tg[r.name]), rel=1e-6), r
    with pytest.raises(tensorbox.InvalidArgumentError, match="quant_method"):
        tensorbox.convert(src, tmp_path / "x.gguf", quant="q4_0", quant_method="search")


def test_save_file_quant_method(tmp_path):
    """save_file takes the MCF options too: the same file as converting what it wrote."""
    rng = np.random.default_rng(31)
    a = {"w": rng.standard_normal((8, 100)).astype(np.float32)}
    plain, direct, conv = tmp_path / "p.mcf", tmp_path / "d.mcf", tmp_path / "c.mcf"
    tensorbox.save_file(a, plain)
    tensorbox.save_file(a, direct, quant="k4", quant_method="mantle", quant_clip=(-1, 1))
    tensorbox.convert(plain, conv, quant="k4", quant_method="mantle", quant_clip=[-1, 1])
    assert direct.read_bytes() == conv.read_bytes()
    other = tmp_path / "o.mcf"
    tensorbox.save_file(a, other, quant="k4", quant_clip=(-1, 1))
    assert other.read_bytes() != direct.read_bytes()


# ------------------------------------------------------------------------------------------
# meta
# ------------------------------------------------------------------------------------------
META = {
    # key: (value given to convert, --meta argument, gguf-py type, value gguf-py reads)
    "m.int": (5, "m.int:i64=5", V.INT64, 5),
    "m.neg": (-7, "m.neg:i64=-7", V.INT64, -7),
    "m.float": (1.5, "m.float:f64=1.5", V.FLOAT64, 1.5),
    "m.str": ("x y", "m.str=x y", V.STRING, "x y"),
    "m.bool": (True, "m.bool:bool=true", V.BOOL, True),
    "m.u8": (np.uint8(7), "m.u8:u8=7", V.UINT8, 7),
    "m.i16": (np.int16(-3), "m.i16:i16=-3", V.INT16, -3),
    "m.u32": (np.uint32(4000000000), "m.u32:u32=4000000000", V.UINT32, 4000000000),
    "m.u64": (np.uint64(1 << 63), f"m.u64:u64={1 << 63}", V.UINT64, 1 << 63),
    "m.f32": (np.float32(0.125), "m.f32:f32=0.125", V.FLOAT32, 0.125),
    "m.nbool": (np.bool_(False), "m.nbool:bool=false", V.BOOL, False),
    # replaces the input's u8 entry, with the type given
    "t.u8": ("now a string", "t.u8=now a string", V.STRING, "now a string"),
}


def test_meta_typed_values_read_back_by_gguf_py(tbx, qgguf, tmp_path):
    out, ref = tmp_path / "py.gguf", tmp_path / "cli.gguf"
    reports = tensorbox.convert(qgguf, out, meta={k: v[0] for k, v in META.items()})
    assert all(r.action == "kept" for r in reports)
    f = fields(out)
    for k, (_, _, vt, want) in META.items():
        assert f[k] == ((vt,), want), (k, f[k])
    fi = fields(qgguf)
    assert {k: v for k, v in f.items() if k not in META} == \
        {k: v for k, v in fi.items() if k not in META}
    args = [a for v in META.values() for a in ("--meta", v[1])]
    cli(tbx, qgguf, ref, *args)
    assert out.read_bytes() == ref.read_bytes()
    # beyond what --meta types: lists and numpy arrays become typed arrays
    out2 = tmp_path / "arr.gguf"
    tensorbox.convert(qgguf, out2, meta={"m.list": [1, 2, 3],
                                         "m.arr": np.array([1.5, 2.5], np.float32)})
    f2 = fields(out2)
    assert f2["m.list"] == ((V.ARRAY, V.INT64), [1, 2, 3])
    assert f2["m.arr"] == ((V.ARRAY, V.FLOAT32), [1.5, 2.5])


def test_meta_refused_where_the_library_refuses_it(qgguf, mixed, tmp_path):
    # safetensors stores strings only: an int is refused (no stringify applies to meta)
    with pytest.raises(tensorbox.LossyError) as e:
        tensorbox.convert(mixed, tmp_path / "o.safetensors", meta={"n": 3}, stringify_meta=True)
    assert e.value.code == "TBX_E_LOSSY" and "n" in str(e.value)
    tensorbox.convert(mixed, tmp_path / "o.safetensors", meta={"n": "3"})
    with stn.safe_open(str(tmp_path / "o.safetensors"), "np") as f:
        assert f.metadata() == {"n": "3"}
    # a Hugging Face directory to GGUF takes no extra metadata (tbx gguf set afterwards)
    from test_hf_gguf import make_decoder
    make_decoder(tmp_path / "llama", "llama", 3)
    with pytest.raises(tensorbox.UnsupportedError) as e:
        tensorbox.convert(tmp_path / "llama", tmp_path / "m.gguf", meta={"general.name": "x"})
    assert e.value.code == "TBX_E_UNSUPPORTED" and e.value.field == "meta"
    assert not (tmp_path / "m.gguf").exists()
    with pytest.raises(TypeError):
        tensorbox.convert(qgguf, tmp_path / "k.gguf", meta={1: "x"})
    with pytest.raises(OverflowError):
        tensorbox.convert(qgguf, tmp_path / "k.gguf", meta={"big": 1 << 64})
    assert not (tmp_path / "k.gguf").exists() and leftovers(tmp_path) == []


# ------------------------------------------------------------------------------------------
# option combinations
# ------------------------------------------------------------------------------------------
REFUSED = [
    # (keywords, output name, the keyword named, the same request to tbx convert)
    (dict(requantize=True), "o.gguf", "requantize", ["--requantize"]),
    (dict(requantize=True, cast="f16"), "o.gguf", "requantize", ["--requantize", "--cast", "f16"]),
    # quant_method= / quant_clip= spell MCF's write options: the library names the option
    (dict(quant="q8_0", quant_method="mantle"), "o.gguf", "options.quant_method",
     ["--quant", "q8_0", "--quant-method", "mantle"]),
    (dict(quant="k4", quant_method="fast"), "o.mcf", "options.quant_method",
     ["--quant", "k4", "--quant-method", "fast"]),
    (dict(quant_method="best"), "o.mcf", "options.quant_method", ["--quant-method", "best"]),
    (dict(quant="q8_0", quant_clip=(-1, 1)), "o.gguf", "options.quant_clip_min",
     ["--quant", "q8_0", "--quant-clip", "-1,1"]),
    (dict(quant="k4", quant_clip=(1, -1)), "o.mcf", "options.quant_clip_min",
     ["--quant", "k4", "--quant-clip", "1,-1"]),
    (dict(quant="k4", quant_clip=(0, 1, 2)), "o.mcf", "quant_clip",
     ["--quant", "k4", "--quant-clip", "0,1,2"]),
    # the options themselves (tbx convert -O): the same rules
    (dict(options={"quant_method": "mantle"}), "o.mcf", "options.quant_method",
     ["-O", "quant_method=mantle"]),
    (dict(quant="q8_0", options={"quant_clip_min": -1.0, "quant_clip_max": 1.0}), "o.mcf",
     "options.quant_clip_min", ["--quant", "q8_0", "-O", "quant_clip_min=-1",
                                "-O", "quant_clip_max=1"]),
    (dict(quant="k4", options={"quant_clip_min": -1.0}), "o.mcf", "options.quant_clip_max",
     ["--quant", "k4", "-O", "quant_clip_min=-1"]),
    (dict(quant="k4", options={"quant_clip_max": 1.0}), "o.mcf", "options.quant_clip_min",
     ["--quant", "k4", "-O", "quant_clip_max=1"]),
    (dict(quant="k4", options={"quant_clip_min": -1e39, "quant_clip_max": 1.0}), "o.mcf",
     "options.quant_clip_min", ["--quant", "k4", "-O", "quant_clip_min=-1e39",
                                "-O", "quant_clip_max=1"]),
    (dict(quant="k4", options={"quant_clip_min": 0.0, "quant_clip_max": float("inf")}), "o.mcf",
     "options.quant_clip_max", ["--quant", "k4", "-O", "quant_clip_min=0",
                                "-O", "quant_clip_max=inf"]),
    (dict(quant="k4", quant_method="best", options={"quant_method": "best"}), "o.mcf",
     "quant_method", ["--quant", "k4", "--quant-method", "best", "-O", "quant_method=best"]),
]


@pytest.mark.parametrize("kw,name,field,args", REFUSED,
                         ids=[f"{i}-{r[2]}" for i, r in enumerate(REFUSED)])
def test_option_combinations_refused_before_any_work(tbx, mixed, tmp_path, kw, name, field, args):
    out = tmp_path / name
    with pytest.raises(tensorbox.InvalidArgumentError) as e:
        tensorbox.convert(mixed, out, **kw)
    assert e.value.code == "TBX_E_INVALID_ARG" and e.value.field == field, str(e.value)
    assert not out.exists() and leftovers(tmp_path) == []
    r = run(tbx, "convert", mixed, out, *args)
    assert r.rc == 2, r.describe()  # the CLI's usage error
    # before any work: the input is not even opened (one that does not exist is not the error)
    with pytest.raises(tensorbox.InvalidArgumentError):
        tensorbox.convert(tmp_path / "missing.safetensors", out, **kw)

    class Exploding:
        def __array__(self, *a, **k):
            raise RuntimeError("gathered before the options were checked")

    with pytest.raises(tensorbox.InvalidArgumentError) as e:
        tensorbox.save_file({"x": Exploding()}, out, **kw)
    assert e.value.field == field


def test_dequantize_and_strict_alone_write_arrays_as_they_are(tmp_path):
    """save_file's arrays are never quantized and a plain write changes no value: dequantize
    and strict alone have nothing to do (as the library's conversion of such tensors)."""
    a = {"w": np.array([[3.4e38, 1.0]], np.float32)}
    p, q = tmp_path / "p.gguf", tmp_path / "q.gguf"
    tensorbox.save_file(a, p)
    tensorbox.save_file(a, q, dequantize=True, strict=True)
    assert p.read_bytes() == q.read_bytes()


# ------------------------------------------------------------------------------------------
# the GIL
# ------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def long_convert_input(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("gilconv")
    rng = np.random.default_rng(37)
    a = {f"w{i}": rng.standard_normal((1024, 4096)).astype(np.float32) for i in range(4)}
    p = d / "big.safetensors"
    stn.save_file(a, str(p))
    return p


def test_the_gil_is_released_during_a_long_convert(long_convert_input, tmp_path):
    """While one thread is inside convert() (quantizing 64 MiB of f32 to q4_k: one library
    call), another Python thread keeps running: the longest pause of its ticks stays well
    below the call's length. Holding the GIL in the call would stop it for the whole call."""
    results = []
    for attempt in range(3):
        out = tmp_path / f"o{attempt}.gguf"
        ticks = []
        stop = threading.Event()

        def ticker():
            while not stop.is_set():
                ticks.append(time.perf_counter())

        th = threading.Thread(target=ticker)
        th.start()
        time.sleep(0.02)
        t0 = time.perf_counter()
        reports = tensorbox.convert(long_convert_input, out, quant="q4_k", threads=1)
        t1 = time.perf_counter()
        stop.set()
        th.join()
        assert [r.action for r in reports] == ["quantized"] * 4
        inside = [t0] + [t for t in ticks if t0 <= t <= t1] + [t1]
        gap = max(b - x for x, b in zip(inside, inside[1:]))
        results.append((round(t1 - t0, 4), round(gap, 4), len(inside) - 2))
        if t1 - t0 >= 0.05 and gap < 0.5 * (t1 - t0):
            break
    dur, gap, n = results[-1]
    assert dur >= 0.05, f"the call was too short to tell ({results})"
    assert gap < 0.5 * dur, f"the other thread stood still during the call: {results}"


# ------------------------------------------------------------------------------------------
# the output format's own options
# ------------------------------------------------------------------------------------------
def _offsets(tbx, path):
    return [t["offset"] for t in info_json(tbx, path)["tensors"]]


def test_format_options_dedup(tbx, tmp_path):
    a = np.arange(64, dtype=np.float32).reshape(4, 16)
    arrays = {"a": a, "b": a.copy()}
    shared = tmp_path / "shared.mcf"
    tensorbox.save_file(arrays, shared)
    o = _offsets(tbx, shared)
    assert o[0] == o[1], o  # mantle's pack --dedup: one payload
    apart = tmp_path / "apart.mcf"
    tensorbox.save_file(arrays, apart, options={"dedup": False})
    o = _offsets(tbx, apart)
    assert o[0] != o[1], o
    # convert() takes them too, and gives the CLI's bytes
    out = tmp_path / "conv.mcf"
    tensorbox.convert(shared, out, options={"dedup": False})
    cli = tmp_path / "cli.mcf"
    r = run(tbx, "convert", shared, cli, "-O", "dedup=false")
    assert r.rc == 0, r.describe()
    assert out.read_bytes() == cli.read_bytes()
    o = _offsets(tbx, out)
    assert o[0] != o[1], o


@pytest.mark.parametrize("fmt,options,field", [
    ("gguf", {"dedup": False}, "options.dedup"),      # GGUF has no such option
    ("mcf", {"no_such": 1}, "options.no_such"),
    ("mcf", {"dedup": 1}, "options.dedup"),           # an integer, not a bool
])
def test_format_options_refused_before_anything_is_written(tmp_path, fmt, options, field):
    a = {"a": np.ones((2, 4), dtype=np.float32)}
    out = tmp_path / f"o.{fmt}"
    with pytest.raises(tensorbox.InvalidArgumentError) as ei:
        tensorbox.save_file(a, out, options=options)
    assert ei.value.field == field, ei.value
    assert not out.exists() and list(tmp_path.iterdir()) == []
    src = tmp_path / "src.safetensors"
    tensorbox.save_file(a, src)
    with pytest.raises(tensorbox.InvalidArgumentError) as ei:
        tensorbox.convert(src, out, options=options)
    assert ei.value.field == field, ei.value
    assert not out.exists()
    with pytest.raises(TypeError):
        tensorbox.save_file(a, out, options=[("dedup", False)])


# ------------------------------------------------------------------------------------------
# the stubs say what the functions take
# ------------------------------------------------------------------------------------------
def test_stubs_match_the_package():
    """__init__.pyi (what type checkers and editors show) lists convert's and save_file's
    keywords with their defaults, and ConvertReport's fields, as the package has them."""
    import ast
    import inspect
    stub = ast.parse((Path(tensorbox.__file__).parent / "__init__.pyi").read_text())
    defs = {n.name: n for n in stub.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    for fn in ("convert", "save_file"):
        a = defs[fn].args
        params = a.args + a.kwonlyargs
        defaults = [None] * (len(a.args) - len(a.defaults)) + list(a.defaults) + \
            list(a.kw_defaults)
        stubbed = [(p.arg, None if d is None else ast.literal_eval(d))
                   for p, d in zip(params, defaults)]
        real = [(n, None if p.default is inspect.Parameter.empty else p.default)
                for n, p in inspect.signature(getattr(tensorbox, fn)).parameters.items()]
        assert stubbed == real, fn
    fields = [n.target.id for n in defs["ConvertReport"].body if isinstance(n, ast.AnnAssign)]
    assert tuple(fields) == tensorbox.ConvertReport._fields
