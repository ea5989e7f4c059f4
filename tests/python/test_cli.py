"""The `tbx` command-line contract: exit codes, --version, info output, convert safety."""
from __future__ import annotations

import json
import os
import re

import pytest

from conftest import REPO, assert_clean_exit, help_formats, info_json, need, run, st_build

np = need("numpy")
stn = need("safetensors.numpy")


def header_version() -> str:
    text = (REPO / "include" / "tensorbox.h").read_text()
    m = re.search(r'#define\s+TBX_VERSION_STRING\s+"([^"]+)"', text)
    assert m, "TBX_VERSION_STRING not found in include/tensorbox.h"
    return m.group(1)


@pytest.fixture
def sample(tmp_path):
    arrays = {"a.weight": np.arange(12, dtype=np.float32).reshape(3, 4),
              "a.bias": np.array([1, 2, 3], dtype=np.int16),
              "flag": np.array(True)}
    path = tmp_path / "sample.safetensors"
    stn.save_file(arrays, str(path), metadata={"format": "pt"})
    return path


# ------------------------------------------------------------------------------------------
# Exit codes
# ------------------------------------------------------------------------------------------

USAGE_ERRORS = [
    [],
    ["no-such-command"],
    ["info"],
    ["validate"],
    ["cat"],
    ["convert"],
    ["--no-such-option"],
]


@pytest.mark.parametrize("argv", USAGE_ERRORS, ids=lambda a: " ".join(a) or "<none>")
def test_usage_errors_exit_2(tbx, argv):
    r = run(tbx, *argv)
    assert_clean_exit(r)
    assert r.rc == 2, r.describe()
    assert r.err.strip(), "usage error without a message on stderr\n" + r.describe()
    assert r.out == b"", "usage error wrote to stdout\n" + r.describe()


def test_usage_errors_with_file(tbx, sample, tmp_path):
    for argv in (["cat", sample],                      # missing TENSOR
                 ["convert", sample],                   # missing OUT
                 ["info", sample, "--bogus"],           # unknown option
                 ["cat", sample, "a.weight", "--as"],   # option without value
                 ["info", sample, sample]):             # extra operand
        r = run(tbx, *argv)
        assert_clean_exit(r)
        assert r.rc == 2, r.describe()


@pytest.mark.parametrize("cmd", [["info"], ["info", "--json"], ["validate"], ["cat", "x"]],
                         ids=lambda c: " ".join(c))
def test_missing_file_exits_1(tbx, tmp_path, cmd):
    missing = tmp_path / "does-not-exist.safetensors"
    argv = [cmd[0], missing] + cmd[1:]
    r = run(tbx, *argv)
    assert_clean_exit(r)
    assert r.rc == 1, r.describe()
    assert "does-not-exist" in r.text, \
        "the message should name the file\n" + r.describe()


def test_convert_missing_input_exits_1(tbx, tmp_path):
    r = run(tbx, "convert", tmp_path / "nope.safetensors", tmp_path / "out.safetensors")
    assert_clean_exit(r)
    assert r.rc == 1, r.describe()
    assert not (tmp_path / "out.safetensors").exists()


def test_not_a_model_file_exits_1(tbx, tmp_path):
    p = tmp_path / "text.safetensors"
    p.write_bytes(b"this is just some text, not a tensor container\n" * 4)
    for cmd in ("info", "validate"):
        r = run(tbx, cmd, p)
        assert_clean_exit(r)
        assert r.rc == 1, r.describe()


def test_directory_as_file_exits_1(tbx, tmp_path):
    r = run(tbx, "info", tmp_path)
    assert_clean_exit(r)
    assert r.rc == 1, r.describe()


def test_cat_unknown_tensor_exits_1(tbx, sample):
    r = run(tbx, "cat", sample, "missing.tensor")
    assert_clean_exit(r)
    assert r.rc == 1, r.describe()
    assert "missing.tensor" in r.err.decode(errors="replace"), r.describe()


def test_validate_valid_exits_0(tbx, sample):
    r = run(tbx, "validate", sample)
    assert r.rc == 0, r.describe()


def test_validate_reports_one_line_per_problem(tbx, tmp_path):
    """Two independent problems in one file (two tensors with a bad dtype); each line names
    a field."""
    hdr = {"a": {"dtype": "NOPE", "shape": [1], "data_offsets": [0, 1]},
           "b": {"dtype": "ALSO_NOPE", "shape": [1], "data_offsets": [1, 2]}}
    p = tmp_path / "two.safetensors"
    p.write_bytes(st_build(hdr, b"\x00\x00"))
    r = run(tbx, "validate", p)
    assert_clean_exit(r)
    assert r.rc == 1, r.describe()
    lines = [ln for ln in r.text.splitlines() if ln.strip()]
    assert lines, r.describe()
    assert any("dtype" in ln for ln in lines), r.describe()
    # the field is named once per line, not again by the message ("f: f: ...")
    for ln in lines:
        assert not re.search(r": ([^\s:]+): \1: ", ln), f"field repeated in {ln!r}"


# ------------------------------------------------------------------------------------------
# --version / help
# ------------------------------------------------------------------------------------------

def test_version(tbx):
    r = run(tbx, "--version")
    assert r.rc == 0, r.describe()
    out = r.out.decode()
    assert header_version() in out, f"--version does not print {header_version()}: {out!r}"
    assert out.endswith("\n") and out.count("\n") == 1, f"expected one line: {out!r}"


def test_help_exits_0(tbx):
    r = run(tbx, "--help")
    assert r.rc == 0, r.describe()
    text = r.out.decode()
    for cmd in ("info", "validate", "cat", "convert"):
        assert cmd in text, f"--help does not mention {cmd}"


# ------------------------------------------------------------------------------------------
# info
# ------------------------------------------------------------------------------------------

def test_info_text_mentions_every_tensor(tbx, sample):
    r = run(tbx, "info", sample)
    assert r.rc == 0, r.describe()
    text = r.out.decode()
    for name in ("a.weight", "a.bias", "flag"):
        assert name in text
    assert "safetensors" in text


def test_info_json_shape(tbx, sample):
    info = info_json(tbx, sample)
    assert set(info) >= {"format", "version", "metadata", "tensors"}
    assert info["format"] == "safetensors"
    assert info["metadata"] == {"format": "pt"}
    t = {x["name"]: x for x in info["tensors"]}
    assert set(t) == {"a.weight", "a.bias", "flag"}
    for x in info["tensors"]:
        assert set(x) >= {"name", "dtype", "shape", "offset", "nbytes"}
        assert isinstance(x["offset"], int) and isinstance(x["nbytes"], int)
    assert t["a.weight"]["dtype"] == "f32" and t["a.weight"]["shape"] == [3, 4]
    assert t["a.weight"]["nbytes"] == 48
    assert t["a.bias"]["dtype"] == "i16" and t["a.bias"]["shape"] == [3]
    assert t["flag"]["dtype"] == "bool" and t["flag"]["shape"] == []


def test_info_types(tbx, tmp_path):
    """--json --types: every metadata value becomes {"type": ..., "value": ...}; safetensors
    metadata is string-typed. The tensor list is unchanged."""
    p = tmp_path / "t.safetensors"
    stn.save_file({"w": np.zeros((2, 3), np.float32)}, str(p), metadata={"k": "v\u00e9"})
    plain = info_json(tbx, p)
    r = run(tbx, "info", p, "--json", "--types")
    assert r.rc == 0, r.describe()
    typed = json.loads(r.out)
    assert typed["metadata"] == {"k": {"type": "string", "value": "v\u00e9"}}
    assert typed["tensors"] == plain["tensors"]
    assert typed["format"] == plain["format"] and typed["version"] == plain["version"]


def test_info_json_unicode_and_escaped_metadata(tbx, tmp_path):
    meta = {"uni": "\u00e9\u4e16\U0001F600", "esc": "a\"b\\c\nd\te\x01f\x7f/",
            "\u00fcber key": "", "empty": ""}
    for key, value in meta.items():
        p = tmp_path / "m.safetensors"
        # one key per file: the reference writer's order of several keys is not stable
        stn.save_file({"x": np.zeros(1, np.uint8)}, str(p), metadata={key: value})
        info = info_json(tbx, p)
        assert info["metadata"] == {key: value}, (key, value, info["metadata"])
        r = run(tbx, "info", p)
        assert r.rc == 0, r.describe()
        p.unlink()


def test_info_json_control_chars_in_tensor_name(tbx, tmp_path):
    name = "we\u00efrd\tname\"with\\stuff\x1f"
    p = tmp_path / "n.safetensors"
    stn.save_file({name: np.zeros(2, np.float32)}, str(p))
    info = info_json(tbx, p)
    assert [t["name"] for t in info["tensors"]] == [name]
    r = run(tbx, "cat", p, name)
    assert r.rc == 0 and r.out == bytes(8), r.describe()


# ------------------------------------------------------------------------------------------
# convert safety and determinism
# ------------------------------------------------------------------------------------------

def test_convert_refuses_to_overwrite_input(tbx, sample):
    before = sample.read_bytes()
    for extra in ([], ["--force"]):
        r = run(tbx, "convert", sample, sample, *extra)
        assert_clean_exit(r)
        assert r.rc == 1, r.describe()
        assert sample.read_bytes() == before, "input modified"


def test_convert_refuses_input_through_another_path(tbx, sample, tmp_path):
    before = sample.read_bytes()
    link = tmp_path / "alias.safetensors"
    os.symlink(sample, link)
    hard = tmp_path / "hard.safetensors"
    os.link(sample, hard)
    dotted = tmp_path / "." / sample.name
    for out in (link, hard, dotted):
        r = run(tbx, "convert", sample, out, "--force")
        assert_clean_exit(r)
        assert r.rc == 1, f"output {out}\n" + r.describe()
        assert sample.read_bytes() == before, f"input modified through {out}"
    assert link.is_symlink()


def test_convert_refuses_existing_output_without_force(tbx, sample, tmp_path):
    out = tmp_path / "exists.safetensors"
    out.write_bytes(b"precious")
    r = run(tbx, "convert", sample, out)
    assert_clean_exit(r)
    assert r.rc == 1, r.describe()
    assert out.read_bytes() == b"precious"
    r = run(tbx, "convert", sample, out, "--force")
    assert r.rc == 0, r.describe()
    assert out.read_bytes() == sample.read_bytes()


def test_convert_leaves_no_temporary_files(tbx, sample, tmp_path):
    outdir = tmp_path / "o"
    outdir.mkdir()
    r = run(tbx, "convert", sample, outdir / "x.safetensors")
    assert r.rc == 0, r.describe()
    assert sorted(p.name for p in outdir.iterdir()) == ["x.safetensors"]
    # a failing convert (existing output) leaves nothing behind either
    r = run(tbx, "convert", sample, outdir / "x.safetensors")
    assert r.rc == 1
    assert sorted(p.name for p in outdir.iterdir()) == ["x.safetensors"]


def test_convert_is_deterministic(tbx, sample, tmp_path):
    a, b = tmp_path / "a.safetensors", tmp_path / "b.safetensors"
    assert run(tbx, "convert", sample, a).rc == 0
    assert run(tbx, "convert", sample, b).rc == 0
    assert a.read_bytes() == b.read_bytes()
    # and a convert of the convert is a fixed point
    c = tmp_path / "c.safetensors"
    assert run(tbx, "convert", a, c).rc == 0
    assert c.read_bytes() == a.read_bytes()


def test_convert_unknown_target_format(tbx, sample, tmp_path):
    # neither --to nor a known extension: a usage error (docs/cli.md)
    r = run(tbx, "convert", sample, tmp_path / "out.unknownext")
    assert_clean_exit(r)
    assert r.rc == 2, r.describe()
    assert not (tmp_path / "out.unknownext").exists()
    r = run(tbx, "convert", sample, tmp_path / "o.safetensors", "--to", "no-such-format")
    assert_clean_exit(r)
    assert r.rc == 2, r.describe()
    assert not (tmp_path / "o.safetensors").exists()


def test_convert_help_lists_only_writable_targets(tbx, sample, tmp_path):
    # Every target `tbx convert --help` offers is one it can write: converting to it by name and
    # by its extension both give a file `tbx validate` accepts. embd-legacy has no extension of
    # its own (cpp_embedder's files are .weights or .bin, .weights is the specification's): it
    # is offered by name only, and its line says so.
    src = tmp_path / "f32.safetensors"
    stn.save_file({"w": np.arange(8, dtype=np.float32).reshape(2, 4)}, str(src))
    rows = help_formats(tbx)
    names = [n for n, _ in rows]
    # the formats this test knows are offered; any other row with a writer is offered too and
    # held to the same checks below (the list comes from the registry, not from this test)
    assert {"safetensors", "gguf", "ztensor", "oinf", "mcf", "embd",
            "embd-legacy"} <= set(names), names
    assert len(set(names)) == len(names), names
    for name, ext in rows:
        by_name = tmp_path / f"by_name_{name}.bin"
        r = run(tbx, "convert", src, by_name, "--to", name, "--drop-meta")
        assert r.rc == 0, r.describe()
        r = run(tbx, "validate", by_name)
        assert r.rc == 0, r.describe()
        assert f"({name} v" in r.out.decode(), r.describe()
        if name == "embd-legacy":
            assert ext == "(no", rows
            continue
        assert ext.startswith("."), rows
        by_ext = tmp_path / f"by_ext{ext}"
        r = run(tbx, "convert", src, by_ext, "--drop-meta")
        assert r.rc == 0, r.describe()
        assert by_ext.read_bytes() == by_name.read_bytes()
    r = run(tbx, "convert", "--help")
    assert b"embd-legacy  (no extension: --to only)" in r.out + r.err, r.describe()
    for target in ("no-such-format",):
        r = run(tbx, "convert", sample, tmp_path / "o.bin", "--to", target)
        assert_clean_exit(r)
        assert r.rc == 2, r.describe()
        assert b"writable: safetensors, gguf, ztensor, oinf, mcf, embd, embd-legacy" in r.err, \
            r.describe()
    for ext in (".bin",):
        r = run(tbx, "convert", sample, tmp_path / f"o{ext}")
        assert r.rc == 2, r.describe()
        assert not (tmp_path / f"o{ext}").exists()


def test_convert_format_options(tbx, tmp_path):
    """-O KEY=VALUE: an option of the output format's own, as its driver declares it (listed
    under the format in --help); MCF's dedup gives shared or separate payloads; a key the
    format does not have, a value of another type, and a format's range of --compress are
    refused before the input is even opened (checked with the output: tbx_writer_check)."""
    r = run(tbx, "convert", "--help")
    text = r.out.decode()
    block = text.split("Options of a format's own (-O KEY=VALUE):\n", 1)[1]
    assert "\n  mcf          dedup=true|false\n" in block, block
    assert block.startswith("  gguf         quant_method=ggml|search\n"), block
    a = np.arange(64, dtype=np.float32).reshape(4, 16)
    src = tmp_path / "two.safetensors"
    stn.save_file({"a": a, "b": a.copy()}, str(src))
    offs = {}
    for flag, want_shared in ((), True), (("-O", "dedup=false"), False), \
            (("--option", "dedup=true"), True), (("--no-dedup",), False):
        out = tmp_path / f"o{len(offs)}.mcf"
        r = run(tbx, "convert", src, out, *flag)
        assert r.rc == 0, r.describe()
        o = [t["offset"] for t in info_json(tbx, out)["tensors"]]
        assert (o[0] == o[1]) == want_shared, (flag, o)
        offs[flag] = o
    missing = tmp_path / "missing.safetensors"
    for out, args, word in ((tmp_path / "x.mcf", ("-O", "nope=1"), b'no write option "nope"'),
                            (tmp_path / "x.gguf", ("-O", "dedup=false"),
                             b'gguf files have no write option "dedup"'),
                            (tmp_path / "x.zt", ("--compress", "40"), b"zstd level 40"),
                            (tmp_path / "x.mcf", ("-O", "dedup=false", "--no-dedup", "-O",
                                                  "dedup=true"), b"given twice")):
        r = run(tbx, "convert", missing, out, *args)
        assert_clean_exit(r)
        assert r.rc in (1, 2) and word in r.err, r.describe()
        assert b"missing.safetensors" not in r.err, r.describe()  # the input was never opened
        assert not out.exists()
    r = run(tbx, "convert", src, tmp_path / "y.mcf", "-O", "dedup=maybe")
    assert r.rc == 2 and b"not true or false" in r.err, r.describe()


def test_convert_quant_types_come_from_the_library(tbx, tmp_path):
    """--help lists, per format, the types --quant takes (from the library's quantizers and the
    formats' rows, a format's own types without its prefix); each one listed converts, and an
    unknown one is a usage error listing the same types."""
    text = run(tbx, "convert", "--help").out.decode()
    block = text.split("Quantization types (--quant TYPE):\n", 1)[1].split("\nOptions", 1)[0]
    types, fmt = {}, None
    for line in block.splitlines():
        if line[2:3] != " ":
            fmt = line.split()[0]
            types[fmt] = line.split()[1:]
        else:
            types[fmt] += line.split()
    assert set(types) == {"gguf", "mcf"}, block
    # the ggml block types gguf-py can quantize to are among them (tensorbox's own reference)
    for t in ("q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "q2_k", "q3_k", "q4_k", "q5_k", "q6_k"):
        assert t in types["gguf"], types
    assert types["mcf"] == ["int8", "int4", "q8", "q4", "k6", "k4", "k3", "k2"], types
    src = tmp_path / "w.safetensors"
    rng = np.random.default_rng(3)
    stn.save_file({"w": rng.standard_normal((4, 256)).astype(np.float32)}, str(src))
    # llama.cpp's ggml_quantize_requires_imatrix: refused without an importance matrix
    needs_imatrix = {"iq2_xxs", "iq2_xs", "iq1_s"}
    for fmt, ts in types.items():
        for t in ts:
            out = tmp_path / f"o-{t}.{fmt}"
            r = run(tbx, "convert", src, out, "--quant", t)
            if t in needs_imatrix:
                assert r.rc != 0 and b"needs an importance matrix" in r.err, r.describe()
                assert not out.exists()
                continue
            assert r.rc == 0, r.describe()
            got = info_json(tbx, out)["tensors"][0]["dtype"]
            assert got in (t, f"{fmt}_{t}"), (t, got)
    r = run(tbx, "convert", src, tmp_path / "x.gguf", "--quant", "q8")
    assert r.rc == 2 and " ".join(types["gguf"]).encode() in r.err, r.describe()
    r = run(tbx, "convert", src, tmp_path / "x.mcf", "--quant", "q4_k")
    assert r.rc == 2 and " ".join(types["mcf"]).encode() in r.err, r.describe()


def test_convert_raw_leaves_out_the_model_import(tbx, sample, tmp_path):
    """--raw leaves out the Hugging Face import for every target that has one (GGUF, EMBD,
    MCF: it was honoured for GGUF only and ignored without a word for the others), and a
    conversion without an import to leave out refuses it instead of saying nothing."""
    hf = REPO / "examples" / "tiny-embedder"
    # no import to leave out: a plain file, or a target without an import
    for src, ext in ((sample, "gguf"), (sample, "mcf"), (hf, "zt"), (hf, "safetensors")):
        out = tmp_path / f"x.{ext}"
        r = run(tbx, "convert", src, out, "--raw")
        assert_clean_exit(r)
        assert r.rc in (1, 2) and b"--raw" in r.err and b"has none" in r.err, r.describe()
        assert not out.exists()
    # MCF: ModelInfo comes from config.json without --raw, and not with it
    got = {}
    for flag in ((), ("--raw",)):
        out = tmp_path / f"m{len(flag)}.mcf"
        r = run(tbx, "convert", hf, out, "--drop-sections", *flag)
        assert_clean_exit(r)
        assert r.rc == 0, r.describe()
        got[flag] = info_json(tbx, out)
    cfg = json.loads((hf / "config.json").read_text())
    want = {"mcf.vocab_size": cfg["vocab_size"], "mcf.hidden_size": cfg["hidden_size"],
            "mcf.layer_count": cfg["num_hidden_layers"]}
    imported, raw = got[()]["metadata"], got[("--raw",)]["metadata"]
    assert {k: imported.get(k) for k in want} == want, imported
    assert all(raw.get(k) in (None, 0) for k in want), raw
    # EMBD: the import gives the vocabulary and the names; without it the writer is handed
    # the directory's files and refuses them, naming them
    r = run(tbx, "convert", hf, tmp_path / "e.weights", "--raw")
    assert_clean_exit(r)
    assert r.rc == 1 and b"config.json" in r.err, r.describe()
    assert not (tmp_path / "e.weights").exists()


def test_convert_output_into_missing_directory(tbx, sample, tmp_path):
    r = run(tbx, "convert", sample, tmp_path / "no" / "such" / "dir" / "o.safetensors")
    assert_clean_exit(r)
    assert r.rc == 1, r.describe()


# ------------------------------------------------------------------------------------------
# cat
# ------------------------------------------------------------------------------------------

def test_cat_raw_and_f32(tbx, sample):
    r = run(tbx, "cat", sample, "a.bias")
    assert r.rc == 0 and r.out == np.array([1, 2, 3], np.int16).tobytes(), r.describe()
    r = run(tbx, "cat", sample, "a.bias", "--as", "f32")
    assert r.rc == 0 and r.out == np.array([1, 2, 3], "<f4").tobytes(), r.describe()
    r = run(tbx, "cat", sample, "a.weight", "--as", "f32")
    assert r.rc == 0 and r.out == np.arange(12, dtype="<f4").tobytes(), r.describe()


def test_cat_as_unknown_type_is_usage_error(tbx, sample):
    r = run(tbx, "cat", sample, "a.bias", "--as", "f33")
    assert_clean_exit(r)
    assert r.rc == 2, r.describe()
    assert r.out == b""


def test_cat_option_forms(tbx, tmp_path):
    """`--as=f32` equals `--as f32`; `--` lets a tensor name start with '-'."""
    p = tmp_path / "odd.safetensors"
    stn.save_file({"-odd-name": np.array([1.5, -2.0], np.float32),
                   "x": np.array([7], np.uint8)}, str(p))
    a = run(tbx, "cat", p, "x", "--as", "f32")
    b = run(tbx, "cat", p, "x", "--as=f32")
    c = run(tbx, "cat", "--as", "f32", p, "x")
    assert a.rc == b.rc == c.rc == 0, a.describe() + b.describe() + c.describe()
    assert a.out == b.out == c.out == np.array([7.0], "<f4").tobytes()
    r = run(tbx, "cat", p, "--", "-odd-name")
    assert r.rc == 0, r.describe()
    assert r.out == np.array([1.5, -2.0], np.float32).tobytes()


def test_cat_undecodable_dtype_fails_cleanly(tbx, tmp_path):
    """c64 has no float32 decoding (docs/dtypes.md): exit 1 naming the dtype, raw cat works."""
    p = tmp_path / "c.safetensors"
    arr = np.array([1 + 2j, 3 - 4j], np.complex64)
    stn.save_file({"c": arr}, str(p))
    r = run(tbx, "cat", p, "c", "--as", "f32")
    assert_clean_exit(r)
    assert r.rc == 1, r.describe()
    assert "c64" in r.err.decode(errors="replace"), r.describe()
    assert r.out == b"", r.describe()
    r = run(tbx, "cat", p, "c")
    assert r.rc == 0 and r.out == arr.tobytes(), r.describe()


def test_closed_pipe_exits_1_quietly(tbx, tmp_path):
    """A reader that goes away early: status 1, no message, no SIGPIPE death."""
    import subprocess
    p = tmp_path / "big.safetensors"
    stn.save_file({"big": np.zeros(16 * 1024 * 1024, np.uint8)}, str(p))
    for argv in ([tbx, "cat", str(p), "big"], [tbx, "cat", str(p), "big", "--as", "f32"]):
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        proc.stdout.read(10)
        proc.stdout.close()
        err = proc.stderr.read()
        rc = proc.wait(timeout=60)
        assert rc == 1, f"{argv}: exit {rc}, stderr {err!r}"
        assert err == b"", f"{argv}: message on a closed pipe: {err!r}"


def test_validate_several_files_and_quiet(tbx, sample, tmp_path):
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(st_build({"t": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]}},
                             b"\x00\x00"))
    r = run(tbx, "validate", sample, sample)
    assert r.rc == 0, r.describe()
    assert r.out.decode().count(": valid (") == 2, r.describe()
    r = run(tbx, "validate", sample, bad)
    assert_clean_exit(r)
    assert r.rc == 1, r.describe()
    text = r.out.decode()
    assert str(sample) in text and str(bad) in text, r.describe()
    for argv in (["validate", "--quiet", bad], ["validate", "-q", sample, bad]):
        r = run(tbx, *argv)
        assert r.rc == 1 and r.out == b"" and r.err == b"", r.describe()
    r = run(tbx, "validate", "-q", sample)
    assert r.rc == 0 and r.out == b"" and r.err == b"", r.describe()


@pytest.mark.parametrize("cmd", ["info", "validate", "cat", "convert"])
def test_command_help(tbx, cmd):
    for argv in (["help", cmd], [cmd, "--help"], [cmd, "-h"]):
        r = run(tbx, *argv)
        assert r.rc == 0, r.describe()
        assert f"tbx {cmd}" in r.out.decode(), r.describe()


def test_demo_script(tbx):
    """examples/demo.sh runs end to end with this tbx and shows the byte-identical convert."""
    import subprocess
    script = REPO / "examples" / "demo.sh"
    proc = subprocess.run(["bash", str(script), tbx], capture_output=True, timeout=300)
    out = proc.stdout.decode(errors="replace")
    assert proc.returncode == 0, out + proc.stderr.decode(errors="replace")
    for heading in ("==> tbx info", "==> tbx validate", "==> tbx cat", "==> tbx convert"):
        assert heading in out, f"missing step {heading!r}:\n{out}"
    assert "byte-identical to the source" in out


def test_u64_and_i64_extremes_print_exactly(tbx, tmp_path):
    """Typed metadata (GGUF, written by the `gguf` package): 2^64-1 and -2^63 appear digit for
    digit in the text of `info --json` and of the summary (no float rounding anywhere)."""
    gguf = need("gguf")
    p = tmp_path / "extremes.gguf"
    w = gguf.GGUFWriter(str(p), "llama")
    w.add_uint64("test.u64_max", 2**64 - 1)
    w.add_int64("test.i64_min", -(2**63))
    w.add_tensor("t", np.zeros(4, np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    r = run(tbx, "info", p, "--json")
    assert r.rc == 0, r.describe()
    text = r.out.decode()
    assert '"test.u64_max": 18446744073709551615' in text, text
    assert '"test.i64_min": -9223372036854775808' in text, text
    r = run(tbx, "info", p, "--json", "--types")
    assert r.rc == 0, r.describe()
    typed = json.loads(r.out)["metadata"]
    assert typed["test.u64_max"] == {"type": "u64", "value": 2**64 - 1}
    assert typed["test.i64_min"] == {"type": "i64", "value": -(2**63)}
    r = run(tbx, "info", p)
    assert r.rc == 0, r.describe()
    assert "18446744073709551615" in r.out.decode() and "-9223372036854775808" in r.out.decode()


# What each format's writer can honour, from the formats' own descriptions (docs/formats/):
# zTensor compresses and records digests; GGUF, zTensor, OINF and MCF place their tensor data
# at a configurable alignment; safetensors (8-byte rule of the format), EMBD and the legacy
# layout have none of these.
HONOURS = {
    ".safetensors": set(), ".gguf": {"alignment"}, ".zt": {"alignment", "compress", "digest"},
    ".oinf": {"alignment"}, ".mcf": {"alignment"}, ".weights": set(), ".bin": set(),
}
OPTION_ARGS = {"alignment": ("--alignment", "128"), "compress": ("--compress", "3"),
               "digest": ("--digest", "sha256")}


@pytest.mark.parametrize("suffix", sorted(HONOURS))
@pytest.mark.parametrize("option", sorted(OPTION_ARGS))
def test_write_options_a_format_has_no_use_for_are_refused(tbx, tmp_path, suffix, option):
    """An option the target cannot honour stops the conversion with an error naming it and
    leaves no file (before, safetensors and EMBD ignored --alignment and --compress, GGUF,
    OINF and MCF --compress and --digest, and wrote the file as if nothing had been asked)."""
    src = REPO / "examples" / "tiny-mlp.safetensors"
    out = tmp_path / ("o" + suffix)
    extra = ("--to", "embd-legacy") if suffix == ".bin" else ()
    lossy = ("--drop-meta",) if suffix in (".oinf", ".bin", ".weights") else ()
    if suffix == ".weights":
        lossy += ("--meta", "model_name=m", "--meta", "model_version=1",
                  "--meta", "num_attention_heads=1")
    r = run(tbx, "convert", src, out, *extra, *lossy, *OPTION_ARGS[option])
    assert_clean_exit(r)
    if option in HONOURS[suffix]:
        assert r.rc == 0 or b"alignment" not in r.err, r.describe()
        return
    assert r.rc == 1, r.describe()
    word = {"alignment": b"alignment", "compress": b"compress", "digest": b"digest"}[option]
    assert word in r.err and not out.exists(), r.describe()


def test_control_bytes_of_a_name_are_escaped_in_messages(tbx, sample):
    """A name given on the command line holding control bytes (ESC, TAB) is printed escaped:
    one line, no terminal escape sequence."""
    r = run(tbx, "cat", sample, "a\x1b[31mb\tc")
    assert r.rc == 1, r.describe()
    assert r.err == f"tbx: no tensor named 'a\\x1b[31mb\\x09c' in {sample}\n".encode(), r.err
    r = run(tbx, "info", sample, "--bad\x1b")
    assert r.rc == 2 and b"\x1b" not in r.err and b"--bad\\x1b" in r.err, r.describe()


def test_demo_does_not_build_llama_cpp(tbx, tmp_path):
    """make demo shows tensorbox without building llama.cpp (issue 19): its bootstrap is the
    Debian packages only and it builds only tbx; the tour itself, with a Python that has no
    llama_cpp, finishes quickly and says in one line that `make test` builds llama.cpp."""
    import subprocess
    import sys
    import time
    env = {k: v for k, v in os.environ.items() if k not in ("TBX_BOOTSTRAPPED", "MAKEFLAGS")}
    plan = subprocess.run(["make", "-n", "demo"], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=60)
    assert plan.returncode == 0, plan.stderr
    assert "scripts/bootstrap.sh --system-only" in plan.stdout, plan.stdout
    assert "--target tbx" in plan.stdout, plan.stdout
    assert "--llama" not in plan.stdout, plan.stdout
    # the tour with a Python that cannot import llama_cpp (never the shared .venv's)
    nollama = tmp_path / "python"
    nollama.write_text(f"#!/bin/sh\nexec {sys.executable} -I -S \"$@\"\n")
    nollama.chmod(0o755)
    assert subprocess.run([str(nollama), "-c", "import llama_cpp"],
                          capture_output=True).returncode != 0
    t0 = time.monotonic()
    r = subprocess.run(["bash", str(REPO / "examples" / "demo.sh")], capture_output=True,
                       text=True, timeout=120, env=dict(env, TBX=str(tbx), PY=str(nollama)))
    took = time.monotonic() - t0
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    lines = [l for l in r.stdout.splitlines() if "llama.cpp" in l and "make test" in l]
    assert len(lines) == 1 and "not built" in lines[0], r.stdout
    assert took < 60, f"the tour took {took:.1f} s"
    # bootstrap's arguments are checked
    b = subprocess.run(["bash", str(REPO / "scripts" / "bootstrap.sh"), "--bogus"], cwd=REPO,
                       capture_output=True, text=True, timeout=60)
    assert b.returncode == 2 and "--system-only" in b.stderr, b.stderr


def test_main_help_names_every_format_a_file_can_be(tbx, tmp_path):
    """`tbx --help` names the formats from the registry (it said "safetensors, GGUF, zTensor,
    OINF" long after MCF and EMBD came): every format a real file of the test data is detected
    as appears in it."""
    src = REPO / "examples" / "tiny-mlp.safetensors"
    files = [src, REPO / "tests" / "data" / "mcf" / "files" / "plain_dtypes.mcf",
             REPO / "tests" / "data" / "embd" / "tiny-legacy.bin"]
    for sfx, extra in ((".gguf", ()), (".zt", ()), (".oinf", ("--drop-meta",)), (".weights", ())):
        out = tmp_path / ("m" + sfx)
        inp = REPO / "examples" / "tiny-embedder" if sfx == ".weights" else src
        r = run(tbx, "convert", inp, out, *extra)
        assert r.rc == 0, r.describe()
        files.append(out)
    names = {info_json(tbx, f)["format"] for f in files}
    assert len(names) == 7, names
    r = run(tbx, "--help")
    assert r.rc == 0
    listed = r.out.decode().split("weight files\n(", 1)[1].split(").", 1)[0]
    assert names <= {n.strip() for n in listed.split(",")}, (names, listed)
