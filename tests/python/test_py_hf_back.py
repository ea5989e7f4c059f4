"""Python: tensorbox.convert("model.gguf", "OUT/") writes a Hugging Face directory (issue 23).

The GGUF is tbx's f32 conversion of test_hf_runtime's tiny llama (built with transformers'
own classes); what the package writes is checked against the ORIGINAL directory, read by PyPI
safetensors and rounded by torch (never against tensorbox's output):
* dtype="bf16" / "f16": every tensor equals the original rounded to that dtype, config.json
  says it, transformers loads the directory;
* max_shard_size (bytes or "50KB"): shards of at most that many bytes of tensor data (or one
  tensor alone), the index transformers reads, the same tensors;
* the reports: one per output tensor, with the Hugging Face names;
* weights_only=True: the GGUF's names (gguf-py's reader);
* errors: a dtype that is not f32/f16/bf16, an option of file conversions with a directory
  target, dtype= with a file target, a bad size, an existing non-empty directory (nothing
  written, the error the library names).

The package must be installed in the interpreter running pytest (make test does it): a missing
package or peer is a failure, never a skip.
"""
from __future__ import annotations

import json

import pytest

from conftest import need
from test_hf_runtime import tiny  # noqa: F401 (the fixture)
from test_hf_gguf import convert

tb = need("tensorbox")
torch = need("torch")
gguf = need("gguf")
st = need("safetensors.torch")
transformers = need("transformers")

NOT_CARRIED_TENSORS = {"embeddings.position_ids"}


def load_dir(d):
    idx = d / "model.safetensors.index.json"
    files = sorted(set(json.loads(idx.read_text())["weight_map"].values())) if idx.is_file() \
        else ["model.safetensors"]
    out = {}
    for f in files:
        t = st.load_file(str(d / f))
        assert not set(t) & set(out)
        out.update(t)
    return out


@pytest.fixture(scope="module")
def llama_gguf(tbx, tiny, tmp_path_factory):  # noqa: F811
    d = tiny("llama")["dir"]
    g = tmp_path_factory.mktemp("pyback") / "m.gguf"
    convert(tbx, d, g)  # f32: the original's values
    return d, g


@pytest.mark.parametrize("dtype", ["bf16", "f16"])
def test_convert_to_directory_dtype(llama_gguf, tmp_path, dtype):
    d, g = llama_gguf
    out = tmp_path / "back"
    reps = tb.convert(g, str(out) + "/", dtype=dtype)
    orig = {k: v for k, v in load_dir(d).items() if k not in NOT_CARRIED_TENSORS}
    got = load_dir(out)
    assert set(got) == set(orig)
    assert sorted(r.name for r in reps) == sorted(orig)
    want_dt = {"bf16": torch.bfloat16, "f16": torch.float16}[dtype]
    for k, v in orig.items():
        w = v.to(want_dt)
        assert got[k].dtype == want_dt and torch.equal(got[k].view(torch.uint8),
                                                       w.view(torch.uint8)), k
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["torch_dtype"] == {"bf16": "bfloat16", "f16": "float16"}[dtype]
    assert transformers.LlamaForCausalLM.from_pretrained(str(out)) is not None


@pytest.mark.parametrize("size", [50_000, "50KB"])
def test_convert_to_directory_sharded(llama_gguf, tmp_path, size):
    d, g = llama_gguf
    out = tmp_path / "back"
    tb.convert(str(g), str(out) + "/", max_shard_size=size, dtype="f32")
    idx = json.loads((out / "model.safetensors.index.json").read_text())
    files = sorted(set(idx["weight_map"].values()))
    n = len(files)
    assert n > 3 and files == [f"model-{i:05d}-of-{n:05d}.safetensors" for i in range(1, n + 1)]
    for f in files:
        t = st.load_file(str(out / f))
        size_b = sum(v.numel() * v.element_size() for v in t.values())
        assert size_b <= 50_000 or len(t) == 1, (f, size_b)
    orig = {k: v for k, v in load_dir(d).items() if k not in NOT_CARRIED_TENSORS}
    got = load_dir(out)
    assert set(got) == set(orig)
    for k, v in orig.items():
        assert torch.equal(got[k].view(torch.uint8), v.view(torch.uint8)), k


def test_convert_to_directory_weights_only(llama_gguf, tmp_path):
    _, g = llama_gguf
    out = tmp_path / "w"
    tb.convert(g, str(out) + "/", weights_only=True)
    assert set(st.load_file(str(out / "model.safetensors"))) == \
        {t.name for t in gguf.GGUFReader(str(g)).tensors}
    assert not (out / "config.json").exists()


def test_convert_to_directory_errors(llama_gguf, tmp_path):
    _, g = llama_gguf
    with pytest.raises(tb.InvalidArgumentError, match="dtype"):
        tb.convert(g, str(tmp_path / "a") + "/", dtype="q8_0")
    with pytest.raises(tb.InvalidArgumentError, match="cast"):
        tb.convert(g, str(tmp_path / "b") + "/", cast="f16")
    with pytest.raises(tb.InvalidArgumentError, match="max_shard_size"):
        tb.convert(g, str(tmp_path / "c") + "/", max_shard_size="lots")
    with pytest.raises(tb.InvalidArgumentError, match="dtype"):
        tb.convert(g, tmp_path / "x.safetensors", dtype="f16")
    for p in ("a", "b", "c", "x.safetensors"):
        assert not (tmp_path / p).exists(), p
    full = tmp_path / "full"
    full.mkdir()
    (full / "keep.txt").write_text("mine")
    with pytest.raises(tb.ExistsError, match="not empty"):
        tb.convert(g, full)  # an existing directory is a directory target
    assert sorted(p.name for p in full.iterdir()) == ["keep.txt"]


# issue 23's rows back through the package: what each writes to config.json from the GGUF,
# checked against the original directory's config (transformers' AutoConfig of both)
@pytest.mark.parametrize("family", ["gemma2", "gemma3", "phi3_longrope"])
def test_convert_to_directory_new_rows(tbx, tiny, tmp_path, family):  # noqa: F811
    d = tiny(family)["dir"]
    g = tmp_path / "m.gguf"
    convert(tbx, d, g)
    out = tmp_path / "back"
    reps = tb.convert(g, str(out) + "/")
    assert not {r.name for r in reps} & {"rope_factors_long.weight", "rope_factors_short.weight"}
    ca = transformers.AutoConfig.from_pretrained(str(d)).to_dict()
    cb = transformers.AutoConfig.from_pretrained(str(out)).to_dict()
    assert cb["architectures"] == ca["architectures"] and cb["model_type"] == ca["model_type"]
    keys = {"gemma2": ("query_pre_attn_scalar", "layer_types", "sliding_window",
                       "attn_logit_softcapping", "final_logit_softcapping"),
            "gemma3": ("query_pre_attn_scalar", "layer_types", "sliding_window",
                       "rope_parameters"),
            "phi3_longrope": ("original_max_position_embeddings", "max_position_embeddings")}
    for k in keys[family]:
        assert cb[k] == ca[k], (k, ca[k], cb[k])
    if family == "phi3_longrope":  # the factors to f32, as the GGUF holds them
        for k in ("long_factor", "short_factor"):
            assert [float(torch.tensor(x, dtype=torch.float32)) for x in ca["rope_parameters"][k]] \
                == [float(torch.tensor(x, dtype=torch.float32)) for x in cb["rope_parameters"][k]]
