"""Conversions that did nothing, or said something untrue (issue 19, items 7, 8 and 6).

The input is a llama-architecture GGUF in q4_1 written by llama.cpp's own quantizer
(`llama_model_quantize` of llama_cpp in .venv, as llama-quantize) from a tiny llama model
(test_hf_gguf.make_decoder) that tbx converted to f32: 15 tensors q4_1, output.weight q8_0
(llama.cpp's fallback for 128-wide rows), 5 norms f32.

* item 7: `--quant q8_0` on it wrote a byte-identical file and a summary calling every tensor a
  "fallback". Now it stops naming a tensor and its type; `--requantize` writes what llama.cpp's
  own requantization (allow_requantize) writes, tensor for tensor, and the summary's counts are
  what gguf-py finds in the output;
* item 8: `--cast f32` / `--dequantize` GGUF -> GGUF were ignored. Now the tensors are the ones
  llama.cpp's own dequantization writes (ftype ALL_F32, allow_requantize), the metadata keeps
  its types (gguf-py), general.file_type is gguf-py's LlamaFileType of the output, and llama.cpp
  gives the same logits as for its own file;
* item 6: an output in a directory that does not exist fails before any work: in milliseconds
  and a few MB (measured with wait4), for tbx convert (a model directory with a 20 MB
  tokenizer), gguf split / merge and the Python API.
A missing llama_cpp / gguf / numpy / tensorbox is a failure, never a skip.
"""
from __future__ import annotations

import ctypes
import json
import os
import re
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest

from conftest import assert_clean_exit, need, run

np = need("numpy")
gguf = need("gguf")
llama_cpp = need("llama_cpp")

Q = gguf.GGMLQuantizationType


def llama_quantize(src: Path, dst: Path, ftype: int, requantize: bool = False):
    """llama.cpp's own quantizer (llama-quantize's library call)."""
    p = llama_cpp.llama_model_quantize_default_params()
    p.ftype = ftype
    p.allow_requantize = requantize
    p.nthread = 1
    rc = llama_cpp.llama_model_quantize(str(src).encode(), str(dst).encode(), ctypes.byref(p))
    assert rc == 0 and dst.is_file(), f"llama_model_quantize({src} -> {dst}) failed: {rc}"


@pytest.fixture(scope="module")
def q41(tbx, tmp_path_factory) -> Path:
    from test_hf_gguf import make_decoder
    d = tmp_path_factory.mktemp("truth")
    make_decoder(d / "llama", "llama", 7)
    f32 = d / "f32.gguf"
    r = run(tbx, "convert", d / "llama", f32)
    assert r.rc == 0, r.describe()
    out = d / "q41.gguf"
    llama_quantize(f32, out, int(gguf.LlamaFileType.MOSTLY_Q4_1))
    types = Counter(t.tensor_type for t in gguf.GGUFReader(str(out)).tensors)
    assert types[Q.Q4_1] >= 10 and types[Q.F32] == 5, types  # a real quantized model
    return out


def tensors(path) -> dict:
    return {t.name: t for t in gguf.GGUFReader(str(path)).tensors}


def raw(t) -> bytes:
    return bytes(np.asarray(t.data).view(np.uint8).reshape(-1))


def fields(path) -> dict:
    """{key: (gguf-py value types, contents)} of every key but the GGUF header's."""
    r = gguf.GGUFReader(str(path))
    return {k: (tuple(f.types), f.contents()) for k, f in r.fields.items()
            if not k.startswith("GGUF.")}


SUMMARY = re.compile(r"^tbx: (?P<type>\S+)\s+(?P<n>\d+) tensors?\s+(?P<what>.*)$")


def summary(err: bytes) -> list[tuple[str, int, str]]:
    out = []
    for line in err.decode().splitlines():
        m = SUMMARY.match(line)
        if m:
            out.append((m["type"], int(m["n"]), m["what"]))
    return out


def logits(path: Path, ids: list[int]):
    llm = llama_cpp.Llama(model_path=str(path), n_ctx=64, logits_all=True, verbose=False,
                          type_k=0, type_v=0)
    llm.eval(ids)
    out = np.asarray(llm.scores[:len(ids)], dtype=np.float64)
    del llm
    return out


IDS = [0, 5, 17, 42, 99, 200, 7, 3]


def test_quant_on_a_quantized_gguf_is_refused(tbx, q41, tmp_path):
    """Item 7: it used to exit 0 with a copy of the input and an untrue summary."""
    out = tmp_path / "o.gguf"
    r = run(tbx, "convert", q41, out, "--quant", "q8_0")
    assert_clean_exit(r)
    assert r.rc == 1, r.describe()
    m = re.search(rb'tensor "([^"]+)" is already quantized \((\w+)\)', r.err)
    assert m, r.describe()
    t = tensors(q41)[m[1].decode()]
    assert t.tensor_type.name.lower() == m[2].decode() and m[2] != b"q8_0"
    assert b"--requantize" in r.err
    assert not out.exists() and not list(tmp_path.glob(".*tbx-tmp*"))


def test_requantize_is_llama_cpps_requantization(tbx, q41, tmp_path):
    out = tmp_path / "q8.gguf"
    r = run(tbx, "convert", q41, out, "--quant", "q8_0", "--requantize")
    assert_clean_exit(r)
    assert r.rc == 0, r.describe()
    ref = tmp_path / "llama-q8.gguf"
    llama_quantize(q41, ref, int(gguf.LlamaFileType.MOSTLY_Q8_0), requantize=True)
    got, want, src = tensors(out), tensors(ref), tensors(q41)
    assert set(got) == set(want)
    for name in want:
        assert got[name].tensor_type == want[name].tensor_type, name
        assert raw(got[name]) == raw(want[name]), name
    # general.file_type describes the output, as llama.cpp's does; every other key is kept
    fo, fi, fr = fields(out), fields(q41), fields(ref)
    assert fo["general.file_type"][1] == int(gguf.LlamaFileType.MOSTLY_Q8_0)
    assert fo["general.file_type"] == fr["general.file_type"]
    assert {k: v for k, v in fo.items() if k != "general.file_type"} == \
        {k: v for k, v in fi.items() if k != "general.file_type"}
    # the summary is what the file holds: counts per output type, and what was done
    lines = summary(r.err)
    types = Counter(t.tensor_type.name.lower() for t in got.values())
    per_type = Counter()
    for ty, n, _ in lines:
        per_type[ty] += n
    assert per_type == types, (lines, types)
    requant = sum(1 for t in src.values() if t.tensor_type == Q.Q4_1)
    # (a llama.cpp model: --quant q8_0 is llama-quantize's Q8_0 preset, whose file it writes)
    assert ("q8_0", requant, "requantized from q4_1: llama-quantize Q8_0") in lines, lines
    assert out.read_bytes() == ref.read_bytes()
    assert ("q8_0", 1, "kept: already q8_0") in lines, lines
    assert not any("fallback" in w for _, _, w in lines), lines
    # llama.cpp runs it, and gives the logits of its own requantized file
    assert np.array_equal(logits(out, IDS), logits(ref, IDS))


@pytest.mark.parametrize("how", [("--cast", "f32"), ("--dequantize",)])
def test_cast_and_dequantize_gguf_to_gguf(tbx, q41, tmp_path, how):
    """Item 8: both used to write a copy of the input without a word."""
    out = tmp_path / "f32.gguf"
    r = run(tbx, "convert", q41, out, *how)
    assert_clean_exit(r)
    assert r.rc == 0, r.describe()
    assert out.read_bytes() != q41.read_bytes()
    ref = tmp_path / "llama-f32.gguf"
    llama_quantize(q41, ref, int(gguf.LlamaFileType.ALL_F32), requantize=True)
    got, want, src = tensors(out), tensors(ref), tensors(q41)
    for name in want:
        assert got[name].tensor_type == Q.F32, name
        assert raw(got[name]) == raw(want[name]), name  # llama.cpp's own dequantization
        # ... which is gguf-py's too
        with np.errstate(all="ignore"):
            deq = gguf.quants.dequantize(np.asarray(src[name].data), src[name].tensor_type)
        assert raw(got[name]) == np.asarray(deq, np.float32).tobytes(), name
    fo, fi = fields(out), fields(q41)
    assert fo["general.file_type"] == ((gguf.GGUFValueType.UINT32,),
                                       int(gguf.LlamaFileType.ALL_F32))
    assert {k: v for k, v in fo.items() if k != "general.file_type"} == \
        {k: v for k, v in fi.items() if k != "general.file_type"}
    lines = summary(r.err)
    assert sum(n for ty, n, w in lines if w.startswith("dequantized from")) == \
        sum(1 for t in src.values() if t.tensor_type != Q.F32), lines
    assert np.array_equal(logits(out, IDS), logits(ref, IDS))


def test_cast_f16_of_a_quantized_gguf(tbx, q41, tmp_path):
    """--cast f16 to a GGUF casts the 2-D tensors and keeps the 1-D ones (norms) in f32, as
    llama.cpp's own MOSTLY_F16 does: llama.cpp cannot multiply by an f16 vector (it aborts in
    binary_op on an f16 norm)."""
    out = tmp_path / "f16.gguf"
    r = run(tbx, "convert", q41, out, "--cast", "f16")
    assert r.rc == 0, r.describe()
    ref = tmp_path / "llama-f16.gguf"
    llama_quantize(q41, ref, int(gguf.LlamaFileType.MOSTLY_F16), requantize=True)
    got, want = tensors(out), tensors(ref)
    assert set(got) == set(want)
    for name, t in want.items():
        assert got[name].tensor_type == t.tensor_type, name
        assert raw(got[name]) == raw(t), name
    assert fields(out)["general.file_type"][1] == int(gguf.LlamaFileType.MOSTLY_F16)
    assert any(w.startswith("kept: 1-D") for _, _, w in summary(r.err)), r.describe()
    assert np.array_equal(logits(out, IDS), logits(ref, IDS))


# ------------------------------------------------------------------------------------------
# Item 6: an output that cannot be created fails before any work
# ------------------------------------------------------------------------------------------
def timed(argv: list) -> tuple[int, float, int, bytes]:
    """(exit status, seconds, peak RSS in KiB, stderr) of one run. The peak RSS is GNU time's
    (%M): a child forked from this (large) Python process would report the parent's pages."""
    if not os.access("/usr/bin/time", os.X_OK):
        pytest.fail("GNU time (/usr/bin/time) is needed to measure the peak RSS", pytrace=False)
    t0 = time.monotonic()
    p = subprocess.run(["/usr/bin/time", "-f", "TBX_RSS_KIB=%M", *map(str, argv)],
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=120)
    secs = time.monotonic() - t0
    m = re.search(rb"TBX_RSS_KIB=(\d+)", p.stderr)
    assert m, p.stderr
    err = p.stderr[:m.start()]
    rc = p.returncode
    if rc and b"Command exited with non-zero status" in err:
        err = err[:err.rindex(b"Command exited with non-zero status")]
    return rc, secs, int(m[1]), err


@pytest.fixture(scope="module")
def big_tokenizer_dir(tmp_path_factory) -> Path:
    """The tiny llama directory with a 20 MB tokenizer.json (300,000 extra vocabulary
    entries): parsing it costs about 80 MB and half a second."""
    from test_hf_gguf import make_decoder
    d = tmp_path_factory.mktemp("bigtok") / "llama"
    make_decoder(d, "llama", 3)
    tj = json.loads((d / "tokenizer.json").read_text())
    vocab = tj["model"]["vocab"]
    n0 = len(vocab)
    for i in range(300_000):
        vocab[f"tok{i:07d}" + "x" * 48] = n0 + i
    (d / "tokenizer.json").write_text(json.dumps(tj))
    assert (d / "tokenizer.json").stat().st_size > 15_000_000
    return d


def test_convert_checks_the_output_before_reading_the_model(tbx, tmp_path):
    """A Hugging Face directory to GGUF parsed config.json and the tokenizer before it opened
    the output: with a broken config.json, the error was about the JSON. Now the output is
    checked first, by the tool and by the library."""
    d = tmp_path / "broken"
    d.mkdir()
    stn = need("safetensors.numpy")
    stn.save_file({"model.embed_tokens.weight": np.zeros((4, 8), np.float32)},
                  str(d / "model.safetensors"))
    (d / "config.json").write_text('{"model_type": "llama", broken')
    r = run(tbx, "convert", d, tmp_path / "ok.gguf")
    assert r.rc == 1 and b"config.json" in r.err, r.describe()  # the input is broken...
    out = tmp_path / "no" / "such" / "out.gguf"
    r = run(tbx, "convert", d, out)
    assert_clean_exit(r)
    # ... but a destination that cannot be created is said first
    assert r.rc == 1 and b"No such file or directory" in r.err, r.describe()
    assert str(out.parent).encode() in r.err and b"config.json" not in r.err, r.describe()


def test_convert_into_a_missing_directory_fails_at_once(tbx, big_tokenizer_dir, tmp_path):
    """The same with a valid model whose tokenizer.json is 20 MB: milliseconds and a few MB."""
    out = tmp_path / "no" / "such" / "out.gguf"
    rc, secs, rss_kib, err = timed([tbx, "convert", big_tokenizer_dir, out])
    assert rc == 1, err
    assert str(out.parent).encode() in err and b"No such file or directory" in err, err
    # before the fix: 0.5 s and 80 MB for the GGUF target (the tokenizer parsed first)
    assert rss_kib < 40 * 1024, (rss_kib, err)
    assert secs < 5, secs
    assert not out.parent.exists()


def test_gguf_split_checks_every_shard_before_writing(tbx, q41, tmp_path):
    # a later shard exists: nothing is written (it used to write the first shards, then fail)
    stem = tmp_path / "s"
    (tmp_path / "s-00002-of-00003.gguf").write_bytes(b"mine")
    r = run(tbx, "gguf", "split", q41, stem, "--max-size", "100K")
    assert r.rc == 1 and b"s-00002-of-00003.gguf" in r.err, r.describe()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s-00002-of-00003.gguf"]
    assert (tmp_path / "s-00002-of-00003.gguf").read_bytes() == b"mine"
    r = run(tbx, "gguf", "split", q41, tmp_path / "no" / "s", "--max-size", "100K")
    assert r.rc == 1 and b"No such file or directory" in r.err, r.describe()
    # merge into a missing directory: refused before the shards are opened (a missing shard
    # would be the error otherwise)
    r = run(tbx, "gguf", "merge", tmp_path / "x-00001-of-00002.gguf", tmp_path / "no" / "m.gguf")
    assert r.rc == 1 and b"No such file or directory" in r.err and b"/no" in r.err, r.describe()


def test_python_save_and_convert_check_the_output_first(tmp_path):
    tensorbox = need("tensorbox")

    class Exploding:
        """A tensor whose conversion to an array fails: reached only after the check."""
        def __array__(self, *a, **k):
            raise RuntimeError("gathered before the output was checked")

    with pytest.raises(tensorbox.IOError) as e:
        tensorbox.save_file({"x": Exploding()}, tmp_path / "no" / "x.safetensors")
    assert "No such file or directory" in str(e.value)
    # convert: the output is checked before the input is opened
    with pytest.raises(tensorbox.IOError) as e:
        tensorbox.convert(tmp_path / "missing.gguf", tmp_path / "no" / "x.safetensors")
    assert str(tmp_path / "no") in str(e.value)
