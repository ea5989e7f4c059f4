"""Every conversion of a fixed corpus gives the bytes recorded in tests/data/convert-corpus.tsv.

This is the byte-stability net under structural work (issue 20: one conversion engine): each
case is one `tbx convert` (every format pair, every cast and quantization type, lossy options,
the Hugging Face directories of the tests and the real all-MiniLM-L6-v2), and the table records
its exit status and the sha256 of its output. A change that means to alter the bytes of a case
regenerates the table (TBX_CORPUS_UPDATE=1; the run then fails once, so that an update is never
silent) and says why in its commit; any other difference is a regression.

The inputs are committed files or are built here deterministically (fixed seeds, gguf-py's and
safetensors' writers, the tokenizer builders of test_hf_gguf.py / test_hf_gguf_spm.py).
"""
from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import pytest

from conftest import assert_clean_exit, need, run

np = need("numpy")
gguf = need("gguf")
stn = need("safetensors.numpy")

ROOT = Path(__file__).resolve().parents[2]
TABLE = ROOT / "tests" / "data" / "convert-corpus.tsv"
MCF = ROOT / "tests" / "data" / "mcf" / "files"

GGML_QUANTS = ["q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "q2_k", "q3_k", "q4_k", "q5_k", "q6_k",
               "tq1_0", "tq2_0", "mxfp4"]
MCF_QUANTS = ["q8", "q4", "k6", "k4", "k3", "k2", "int8", "int4"]
CASTS = ["f32", "f16", "bf16", "f64"]
TARGETS = {"safetensors": ".safetensors", "gguf": ".gguf", "ztensor": ".zt", "oinf": ".oinf",
           "mcf": ".mcf", "embd": ".weights"}


def _quant_gguf(path: Path):
    """A GGUF holding typed metadata, plain tensors and ggml block types (raw blocks with
    moderate f16 scales), written by gguf-py."""
    rng = np.random.default_rng(20)
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_uint32("llama.block_count", 1)
    w.add_float32("test.eps", 1e-5)
    w.add_bool("test.flag", True)
    w.add_array("test.ints", [1, 2, 3])
    w.add_string("general.name", "corpus")
    w.add_tensor("a.f32", rng.standard_normal((8, 64)).astype(np.float32))
    w.add_tensor("b.f16", rng.standard_normal((4, 64)).astype(np.float16))
    w.add_tensor("c.norm", rng.standard_normal(64).astype(np.float32))
    for qt in (gguf.GGMLQuantizationType.Q4_0, gguf.GGMLQuantizationType.Q8_0,
               gguf.GGMLQuantizationType.Q4_K, gguf.GGMLQuantizationType.Q6_K):
        bs, bb = gguf.GGML_QUANT_SIZES[qt]
        rows, cols = 4, 512
        raw = rng.integers(0, 256, rows * cols // bs * bb, dtype=np.uint8)
        raw[1::2] &= 0xBF  # finite, moderate f16 scales
        w.add_tensor(f"q.{qt.name.lower()}", raw.reshape(rows, cols // bs * bb), raw_dtype=qt)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def _plain_st(path: Path):
    """safetensors with every float dtype and an int tensor, and string metadata."""
    rng = np.random.default_rng(21)
    arrays = {
        "w32": rng.standard_normal((16, 64)).astype(np.float32),
        "w16": rng.standard_normal((8, 96)).astype(np.float16),
        "w64": rng.standard_normal((4, 32)).astype(np.float64),
        "odd": rng.standard_normal((3, 40)).astype(np.float32),  # rows no block divides
        "bias": rng.standard_normal(64).astype(np.float32),
        "ids": np.arange(12, dtype=np.int32).reshape(3, 4),
    }
    # one metadata key: the writer (Rust) orders several keys differently from run to run
    stn.save_file(arrays, str(path), metadata={"note": "corpus"})


@pytest.fixture(scope="module")
def inputs(tmp_path_factory, tbx, minilm_dir):
    """name -> path of every input of the corpus."""
    d = tmp_path_factory.mktemp("corpus-in")
    got = {}
    got["mlp.st"] = ROOT / "examples" / "tiny-mlp.safetensors"
    got["embedder.hf"] = ROOT / "examples" / "tiny-embedder"
    got["minilm.hf"] = minilm_dir
    p = d / "plain.safetensors"
    _plain_st(p)
    got["plain.st"] = p
    p = d / "quant.gguf"
    _quant_gguf(p)
    got["quant.gguf"] = p
    from test_hf_gguf import make_decoder
    for mt in ("llama", "qwen2"):
        hd = d / f"{mt}-hf"
        make_decoder(hd, mt, seed=5)
        got[f"{mt}.hf"] = hd
    for name in ("plain_dtypes", "quant_q4", "quant_k3", "mixed_quant", "sections_all",
                 "hf_tiny_llama_int8", "modelinfo_full"):
        got[f"{name}.mcf"] = MCF / f"{name}.mcf"
    got["legacy.embd"] = ROOT / "tests" / "data" / "embd" / "tiny-legacy.bin"
    # files of the other formats, written by tbx from committed or generated inputs
    for name, src, out, args in (
        ("plain.zt", got["plain.st"], "plain.zt", ("--compress", "3", "--digest", "sha256")),
        ("plain.oinf", got["plain.st"], "plain.oinf", ("--drop-meta",)),
        ("minilm.weights", minilm_dir, "minilm.weights", ()),
    ):
        r = run(tbx, "convert", src, d / out, "--force", *args, timeout=300)
        assert r.rc == 0, r.describe()
        got[name] = d / out
    return got


def _cases():
    """(case name, input name, output suffix, extra arguments)."""
    cases = []
    plain_inputs = ["mlp.st", "plain.st", "quant.gguf", "plain.zt", "plain.oinf",
                    "plain_dtypes.mcf", "quant_q4.mcf", "quant_k3.mcf", "mixed_quant.mcf",
                    "sections_all.mcf", "modelinfo_full.mcf", "legacy.embd", "minilm.weights",
                    "embedder.hf", "llama.hf"]
    for src in plain_inputs:
        for fmt, sfx in TARGETS.items():
            cases.append((f"{src}->{fmt}", src, sfx, ()))
            cases.append((f"{src}->{fmt}+lossy", src, sfx,
                          ("--stringify-meta", "--drop-sections", "--dequantize")))
    for src in ("plain.st", "quant.gguf", "plain.zt", "quant_q4.mcf"):
        for c in CASTS:
            for fmt in ("safetensors", "gguf", "ztensor"):
                cases.append((f"{src}->{fmt}+cast-{c}", src, TARGETS[fmt],
                              ("--cast", c, "--dequantize", "--stringify-meta")))
    for src in ("plain.st", "mlp.st"):
        for q in GGML_QUANTS:
            cases.append((f"{src}->gguf+quant-{q}", src, ".gguf", ("--quant", q)))
        for q in MCF_QUANTS:
            cases.append((f"{src}->mcf+quant-{q}", src, ".mcf", ("--quant", q)))
            cases.append((f"{src}->mcf+quant-{q}-mantle", src, ".mcf",
                          ("--quant", q, "--quant-method", "mantle")))
    cases.append(("plain.st->mcf+quant-k4-clip", "plain.st", ".mcf",
                  ("--quant", "k4", "--quant-clip", "-1,1")))
    cases.append(("plain.st->zt+zstd-crc32c", "plain.st", ".zt",
                  ("--compress", "9", "--digest", "crc32c")))
    cases.append(("plain.st->gguf+align64", "plain.st", ".gguf", ("--alignment", "64")))
    cases.append(("plain.st->oinf+v1", "plain.st", ".oinf", ("--drop-meta", "--format-version", "1")))
    cases.append(("plain.st->safetensors+meta", "plain.st", ".safetensors",
                  ("--meta", "a=b", "--meta", "n:u32=7")))
    cases.append(("quant.gguf->gguf+meta", "quant.gguf", ".gguf",
                  ("--meta", "general.name=x", "--meta", "test.n:i64=-3")))
    for hf in ("embedder.hf", "minilm.hf", "llama.hf", "qwen2.hf"):
        cases.append((f"{hf}->gguf+raw", hf, ".gguf", ("--raw",)))
        for extra in ((), ("--cast", "f16"), ("--cast", "bf16"), ("--quant", "q8_0"),
                      ("--quant", "q4_k"), ("--quant", "q4_0")):
            tag = "+" + "-".join(a.lstrip("-") for a in extra) if extra else ""
            cases.append((f"{hf}->gguf{tag}", hf, ".gguf", extra))
        cases.append((f"{hf}->mcf", hf, ".mcf", ()))
        cases.append((f"{hf}->mcf+quant-k4", hf, ".mcf", ("--quant", "k4")))
        cases.append((f"{hf}->weights", hf, ".weights", ()))
        cases.append((f"{hf}->safetensors+drop-sections", hf, ".safetensors", ("--drop-sections",)))
    unique = {}
    for c in cases:  # the same conversion reached twice (a directory as a plain input) runs once
        assert unique.setdefault(c[0], c) == c, f"two cases named {c[0]}"
    return list(unique.values())


CASES = _cases()


def _read_table() -> dict[str, tuple[int, str]]:
    out = {}
    if not TABLE.exists():
        return out
    for line in TABLE.read_text().splitlines():
        if not line or line.startswith("#"):
            continue
        name, rc, digest = line.split("\t")
        out[name] = (int(rc), digest)
    return out


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def test_convert_corpus_bytes(tbx, inputs, tmp_path):
    """Runs every case and compares exit status and output sha256 with the table."""
    got: dict[str, tuple[int, str]] = {}
    for name, src, sfx, args in CASES:
        out = tmp_path / ("out" + sfx)
        if out.exists():
            out.unlink()
        r = run(tbx, "convert", inputs[src], out, "--force", *args, timeout=300)
        assert_clean_exit(r)
        assert r.rc in (0, 1, 2), f"{name}: {r.describe()}"
        if r.rc == 0:
            got[name] = (0, _sha256(out))
        else:
            assert not out.exists(), f"{name}: failed (exit {r.rc}) but left {out}"
            got[name] = (r.rc, "-")
    if os.environ.get("TBX_CORPUS_UPDATE") == "1":
        lines = ["# tests/python/test_convert_corpus.py: case, exit status, sha256 of the output",
                 "# regenerate with TBX_CORPUS_UPDATE=1 only for a change meant to alter bytes"]
        lines += [f"{n}\t{rc}\t{d}" for n, (rc, d) in got.items()]
        TABLE.write_text("\n".join(lines) + "\n")
        pytest.fail(f"{TABLE} rewritten with {len(got)} cases: review and commit it")
    want = _read_table()
    assert want, f"{TABLE} is missing or empty"
    missing = sorted(set(got) - set(want))
    stale = sorted(set(want) - set(got))
    diff = [f"{n}: exit {want[n][0]} -> {got[n][0]}, {want[n][1][:12]} -> {got[n][1][:12]}"
            for n in got if n in want and got[n] != want[n]]
    assert not (missing or stale or diff), (
        f"{len(diff)} cases differ: {diff[:20]}; not in the table: {missing[:10]}; "
        f"in the table, not run: {stale[:10]}")
    # the corpus must exercise success and refusal alike
    assert sum(1 for rc, _ in got.values() if rc == 0) >= len(got) // 2
