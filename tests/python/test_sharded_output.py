"""Sharded output (issue 24): `tbx convert IN OUT --max-shard-size SIZE`.

- safetensors: the shards and OUT.index.json as Hugging Face lays them out. The reference for
  which tensor goes into which file is huggingface_hub's split_torch_state_dict_into_shards
  (what transformers' save_pretrained calls) run on the same tensors; the index's total_size
  and weight_map are computed here from the tensors' bytes; every shard is read with PyPI
  safetensors and the index with transformers' own shard-list reader, and the tensors compared
  with the input's and with the unsharded output's.
- GGUF: a split set as llama.cpp's gguf-split --split-max-size cuts one (its rule computed here
  from gguf-py's reading of the single file), each part read with gguf-py, and the set loaded by
  llama.cpp (llama_cpp) giving the single file's logits.
- A failing conversion leaves no file of the set behind; existing shards are refused.
A missing peer is a failure, never a skip.
"""
from __future__ import annotations

import json
import os

import pytest
from pathlib import Path

from conftest import assert_clean_exit, run, need

np = need("numpy")
stn = need("safetensors.numpy")
safetensors = need("safetensors")
gguf = need("gguf")
torch = need("torch")
hub_ser = need("huggingface_hub.serialization")
tf_hub = need("transformers.utils.hub")
llama_cpp = need("llama_cpp")

from test_hf_gguf import make_decoder  # noqa: E402  (the tiny llama of test_hf_gguf)


def tbx_ok(tbx, *args):
    r = run(tbx, *args)
    assert_clean_exit(r)
    assert r.rc == 0, r.describe()
    return r


def state_dict(seed=3):
    """Tensors of several dtypes and sizes; `big` (2400 bytes) is above the 1000-byte limit
    and comes after smaller ones, where huggingface_hub's rule differs from a plain cut."""
    rng = np.random.default_rng(seed)
    return {
        "a.weight": rng.standard_normal((10, 10)).astype(np.float32),     # 400
        "b.weight": rng.standard_normal((8, 20)).astype(np.float16),      # 320
        "big.weight": rng.standard_normal((30, 20)).astype(np.float32),   # 2400
        "c.bias": rng.standard_normal((50,)).astype(np.float32),          # 200
        "d.ids": rng.integers(-9, 9, (30, 5)).astype(np.int32),           # 600
        "e.weight": rng.standard_normal((4, 25)).astype(np.float32),      # 400
        "f.mask": rng.integers(0, 2, (300,)).astype(np.uint8),            # 300
        "g.weight": rng.standard_normal((250,)).astype(np.float32),       # 1000: exactly fits
        "h.weight": rng.standard_normal((2, 3)).astype(np.float16),       # 12
    }


def file_order(path: Path) -> list[str]:
    """The tensors of a safetensors file in the order of their bytes (PyPI safetensors writes
    them by dtype alignment, then name: the order a conversion reads and writes them in)."""
    raw = path.read_bytes()
    hdr = json.loads(raw[8:8 + int.from_bytes(raw[:8], "little")])
    return [k for _, k in sorted((v["data_offsets"][0], k) for k, v in hdr.items()
                                 if k != "__metadata__")]


def hub_split(sd: dict, stem: str, max_size: int, order: list[str]):
    """huggingface_hub's split of the state dict in the given order."""
    tsd = {k: torch.from_numpy(sd[k]) for k in order}
    return hub_ser.split_torch_state_dict_into_shards(
        tsd, filename_pattern=stem + "{suffix}.safetensors", max_shard_size=max_size)


def test_safetensors_shards_as_huggingface(tbx, tmp_path):
    sd = state_dict()
    src = tmp_path / "in.safetensors"
    stn.save_file(sd, str(src), metadata={"format": "pt"})
    single = tmp_path / "single.safetensors"
    tbx_ok(tbx, "convert", src, single)
    out = tmp_path / "model.safetensors"
    tbx_ok(tbx, "convert", src, out, "--max-shard-size", "1KB")  # = 1000 bytes

    ref = hub_split(sd, "model", 1000, file_order(src))
    assert ref.is_sharded and len(ref.filename_to_tensors) >= 4
    written = sorted(p.name for p in tmp_path.iterdir())
    assert written == sorted(["in.safetensors", "single.safetensors",
                              "model.safetensors.index.json", *ref.filename_to_tensors]), written
    # each shard holds the tensors huggingface_hub puts in it, in that order
    for fname, names in ref.filename_to_tensors.items():
        with safetensors.safe_open(str(tmp_path / fname), "np") as f:
            assert list(f.keys()) == sorted(names)  # safetensors lists keys sorted
            assert f.metadata() == {"format": "pt"}
        assert file_order(tmp_path / fname) == names, fname
    # the index: computed here from the tensors' bytes and element counts
    idx = json.loads((tmp_path / "model.safetensors.index.json").read_text())
    assert idx["metadata"]["total_size"] == sum(v.nbytes for v in sd.values())
    assert idx["metadata"]["total_size"] == ref.metadata["total_size"]
    assert idx["metadata"]["total_parameters"] == sum(v.size for v in sd.values())
    assert idx["weight_map"] == ref.tensor_to_filename
    # transformers' reading of an index: the shard list, then each shard with safetensors
    files, meta = tf_hub.get_checkpoint_shard_files(str(tmp_path),
                                                    str(tmp_path / "model.safetensors.index.json"))
    assert sorted(Path(f).name for f in files) == sorted(ref.filename_to_tensors)
    got = {}
    for f in files:
        got.update(stn.load_file(f))
    want = stn.load_file(str(single))
    assert set(got) == set(want) == set(sd)
    for k in sd:
        assert got[k].dtype == sd[k].dtype and got[k].shape == sd[k].shape, k
        assert got[k].tobytes() == sd[k].tobytes() == want[k].tobytes(), k


def test_safetensors_one_shard_is_the_plain_file(tbx, tmp_path):
    sd = state_dict(4)
    src = tmp_path / "in.safetensors"
    stn.save_file(sd, str(src))
    out = tmp_path / "m.safetensors"
    tbx_ok(tbx, "convert", src, out, "--max-shard-size", "2GiB")
    ref = hub_split(sd, "m", 2 << 30, file_order(src))
    assert not ref.is_sharded and list(ref.filename_to_tensors) == ["m.safetensors"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.safetensors", "m.safetensors"]
    got = stn.load_file(str(out))
    assert {k: v.tobytes() for k, v in got.items()} == {k: v.tobytes() for k, v in sd.items()}


def gguf_split_rule(sizes: list[int], max_size: int) -> list[int]:
    """llama.cpp's gguf-split --split-max-size: shard index of each tensor (sizes padded to 32;
    a new file when the next tensor would pass the limit)."""
    out, cur, s = [], 0, 0
    for i, b in enumerate(sizes):
        b = (b + 31) // 32 * 32
        if i and cur + b > max_size:
            s, cur = s + 1, 0
        out.append(s)
        cur += b
    return out


def test_gguf_split_set_loads_in_llama_cpp(tbx, tmp_path):
    W, cfg = make_decoder(tmp_path / "hf", "llama", 7)
    single = tmp_path / "single.gguf"
    tbx_ok(tbx, "convert", tmp_path / "hf", single)
    sr = gguf.GGUFReader(str(single))
    sizes = [int(t.n_bytes) for t in sr.tensors]
    limit = 300_000
    want_shard = gguf_split_rule(sizes, limit)
    n = want_shard[-1] + 1
    assert n >= 3, sizes
    tbx_ok(tbx, "convert", single, tmp_path / "split.gguf", "--max-shard-size", "300KB")
    parts = [tmp_path / f"split-{i + 1:05d}-of-{n:05d}.gguf" for i in range(n)]
    assert sorted(p.name for p in tmp_path.glob("split*")) == [p.name for p in parts]
    single_kv = {f.name: f.contents() for f in sr.fields.values() if not f.name.startswith("GGUF.")}
    got_tensors = []
    for i, p in enumerate(parts):
        r = gguf.GGUFReader(str(p))
        kv = {f.name: f.contents() for f in r.fields.values() if not f.name.startswith("GGUF.")}
        assert kv["split.no"] == i and kv["split.count"] == n
        assert kv["split.tensors.count"] == len(sr.tensors)
        assert r.fields["split.no"].types == [gguf.GGUFValueType.UINT16]
        assert r.fields["split.count"].types == [gguf.GGUFValueType.UINT16]
        assert r.fields["split.tensors.count"].types == [gguf.GGUFValueType.INT32]
        rest = {k: v for k, v in kv.items() if not k.startswith("split.")}
        assert rest == (single_kv if i == 0 else {}), p.name
        assert list(kv)[-3:] == ["split.no", "split.count", "split.tensors.count"]
        got_tensors += [(i, t.name, t.tensor_type, bytes(np.asarray(t.data).tobytes()))
                        for t in r.tensors]
    assert [(s, t.name, t.tensor_type, bytes(np.asarray(t.data).tobytes()))
            for s, t in zip(want_shard, sr.tensors)] == got_tensors
    # llama.cpp loads the set from its first file and computes what the single file gives
    ids = [0, 5, 17, 42, 99, 7, 3]
    logits = []
    for path in (single, parts[0]):
        llm = llama_cpp.Llama(model_path=str(path), n_ctx=32, logits_all=True, verbose=False,
                              type_k=0, type_v=0)
        llm.eval(ids)
        logits.append(np.asarray(llm.scores[:len(ids)], dtype=np.float64))
        del llm
    diff = float(np.abs(logits[0] - logits[1]).max())
    print(f"{n} parts; max |logit diff| split vs single {diff:.3g}")
    assert diff == 0.0, diff
    # and back: the set joined into one file (and into safetensors) carries none of the set's
    # split.* keys, which describe its files: a single GGUF with split.count N would send
    # llama.cpp looking for N - 1 other parts
    joined = tmp_path / "joined.gguf"
    tbx_ok(tbx, "convert", parts[0], joined)
    jr = gguf.GGUFReader(str(joined))
    jkv = {f.name: f.contents() for f in jr.fields.values() if not f.name.startswith("GGUF.")}
    assert jkv == single_kv
    assert [(t.name, bytes(np.asarray(t.data).tobytes())) for t in jr.tensors] == \
        [(t.name, bytes(np.asarray(t.data).tobytes())) for t in sr.tensors]
    llm = llama_cpp.Llama(model_path=str(joined), n_ctx=32, logits_all=True, verbose=False,
                          type_k=0, type_v=0)
    llm.eval(ids)
    assert np.array_equal(np.asarray(llm.scores[:len(ids)], dtype=np.float64), logits[0])
    del llm
    st = tmp_path / "joined.safetensors"
    tbx_ok(tbx, "convert", parts[0], st, "--stringify-meta")
    with open(st, "rb") as fh:
        head = json.loads(fh.read(int.from_bytes(fh.read(8), "little")))
    assert not [k for k in head.get("__metadata__", {}) if k.startswith("split.")], head


def test_failure_leaves_no_shard(tbx, tmp_path):
    sd = state_dict(5)
    # the last tensor cannot become f16 (65504 is f16's largest): --strict fails the
    # conversion there, after the first shards were written
    sd["z.weight"] = np.full((4, 4), 1e6, dtype=np.float32)
    src = tmp_path / "in.safetensors"
    stn.save_file(sd, str(src))
    for out in ("model.safetensors", "model.gguf"):
        r = run(tbx, "convert", src, tmp_path / out, "--max-shard-size", "1000",
                "--cast", "f16", "--strict")
        assert_clean_exit(r)
        assert r.rc != 0, r.describe()
        assert sorted(p.name for p in tmp_path.iterdir()) == ["in.safetensors"], out
    # an existing shard is refused (no --force) and nothing is written
    second = list(hub_split(sd, "model", 1000, file_order(src)).filename_to_tensors)[1]
    (tmp_path / second).write_bytes(b"keep")
    r = run(tbx, "convert", src, tmp_path / "model.safetensors", "--max-shard-size", "1000")
    assert_clean_exit(r)
    assert r.rc != 0 and "exists" in r.text, r.describe()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.safetensors", second]
    assert (tmp_path / second).read_bytes() == b"keep"


def test_bad_sizes_and_formats_refused(tbx, tmp_path):
    src = tmp_path / "in.safetensors"
    stn.save_file(state_dict(6), str(src))
    for bad in ("5XB", "0", "-3GB", "GB"):
        r = run(tbx, "convert", src, tmp_path / "o.safetensors", "--max-shard-size", bad)
        assert r.rc == 2 and "not a size" in r.text, r.describe()
    r = run(tbx, "convert", src, tmp_path / "o.npz", "--max-shard-size", "1MB")
    assert r.rc != 0 and "max-shard-size" in r.text, r.describe()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.safetensors"]


# ---- Python: convert(..., max_shard_size=) -------------------------------------------------
tb = need("tensorbox")


def test_python_max_shard_size(tmp_path):
    """tensorbox.convert takes max_shard_size= as tbx convert takes --max-shard-size (an int of
    bytes, or "1KB"-style strings): the shards are huggingface_hub's split, the GGUF set
    gguf-split's rule computed here from gguf-py's reading of the single file."""
    sd = state_dict(8)
    src = tmp_path / "in.safetensors"
    stn.save_file(sd, str(src), metadata={"format": "pt"})
    order = file_order(src)
    for size, d in ((1000, "int"), ("1KB", "str"), ("0.001MB", "float_str")):
        out = tmp_path / d / "model.safetensors"
        out.parent.mkdir()
        tb.convert(src, out, max_shard_size=size)
        ref = hub_split(sd, "model", 1000, order)
        written = sorted(p.name for p in out.parent.iterdir())
        assert written == sorted(["model.safetensors.index.json", *ref.filename_to_tensors]), d
        idx = json.loads((out.parent / "model.safetensors.index.json").read_text())
        assert idx["weight_map"] == ref.tensor_to_filename
        assert idx["metadata"]["total_size"] == sum(v.nbytes for v in sd.values())
        for fname, names in ref.filename_to_tensors.items():
            got = stn.load_file(str(out.parent / fname))
            assert sorted(got) == sorted(names)
            for k in names:
                assert got[k].tobytes() == sd[k].tobytes(), k
    # GGUF: the split set (GGUF has no u8)
    src = tmp_path / "in_g.safetensors"
    stn.save_file({k: v for k, v in sd.items() if v.dtype != np.uint8}, str(src))
    single = tmp_path / "single.gguf"
    tb.convert(src, single)
    sizes = [int(t.n_bytes) for t in gguf.GGUFReader(str(single)).tensors]
    names = [t.name for t in gguf.GGUFReader(str(single)).tensors]
    rule = gguf_split_rule(sizes, 1000)
    n = rule[-1] + 1
    assert n >= 3
    gdir = tmp_path / "g"
    gdir.mkdir()
    tb.convert(src, gdir / "model.gguf", max_shard_size=1000)
    parts = sorted(p.name for p in gdir.iterdir())
    assert parts == [f"model-{i:05d}-of-{n:05d}.gguf" for i in range(1, n + 1)], parts
    for i, p in enumerate(parts):
        r = gguf.GGUFReader(str(gdir / p))
        assert [t.name for t in r.tensors] == [nm for nm, s in zip(names, rule) if s == i], p
    # what is not a size, and options for directory outputs only
    for bad in ("5XB", 0, -3, "GB", True):
        with pytest.raises(tb.InvalidArgumentError, match="max_shard_size"):
            tb.convert(src, tmp_path / "bad.safetensors", max_shard_size=bad)
    with pytest.raises(tb.InvalidArgumentError):
        tb.convert(src, tmp_path / "bad.npz", max_shard_size=1000)
    assert not list(tmp_path.glob("bad*"))
    # a directory output still takes it (GGUF -> Hugging Face) and refuses dtype/weights_only
    # for files
    with pytest.raises(tb.InvalidArgumentError, match="weights_only"):
        tb.convert(src, tmp_path / "bad.safetensors", weights_only=True)


# ---- temporary files: none left by a failed, cancelled or interrupted sharded write --------
def temp_names(d: Path) -> list[str]:
    return sorted(p.name for p in d.iterdir() if ".tbx-" in p.name)


def test_cancelled_sharded_write_leaves_no_temporary_file(tmp_path):
    """progress= raising after the first shards were written: no shard, no temporary name."""
    sd = state_dict(9)
    src = tmp_path / "in.safetensors"
    stn.save_file(sd, str(src))
    total = sum(v.nbytes for v in sd.values())
    for out in ("model.safetensors", "model.gguf"):
        if out.endswith(".gguf"):
            stn.save_file({k: v for k, v in sd.items() if v.dtype != np.uint8}, str(src))
            total = sum(v.nbytes for v in sd.values() if v.dtype != np.uint8)
        seen = []

        def cb(done, t):
            seen.append(sorted(p.name for p in tmp_path.iterdir()))
            if done > total // 2:
                raise KeyboardInterrupt("stop")

        with pytest.raises(KeyboardInterrupt):
            tb.convert(src, tmp_path / out, max_shard_size=1000, progress=cb)
        # the cancel came after at least one shard was written under its temporary name
        assert any(".tbx-set." in n for names in seen for n in names), (out, seen[-1])
        # one operation over every shard: done never decreasing, one total (the arrays' bytes)
        calls = []
        tb.convert(src, tmp_path / ("ok_" + out), max_shard_size=1000,
                   progress=lambda d, t: calls.append((d, t)))
        assert [d for d, _ in calls] == sorted(d for d, _ in calls), calls
        assert {t for _, t in calls} == {total} and calls[-1] == (total, total), calls
        for q in tmp_path.iterdir():
            if q.name.startswith("ok_") or "-of-" in q.name:
                q.unlink()
        assert sorted(p.name for p in tmp_path.iterdir()) == ["in.safetensors"], out


def test_interrupted_sharded_write_leaves_no_temporary_file(tbx, tmp_path):
    """tbx convert --max-shard-size stopped by SIGINT once shards sit under their temporary
    names: its handler (tbx_remove_temp_files) removes them all."""
    import signal
    import subprocess
    import time
    rng = np.random.default_rng(11)
    big = {f"t{i:02d}.weight": rng.standard_normal((512, 2048)).astype(np.float32)
           for i in range(48)}  # 48 x 4 MiB
    src = tmp_path / "in.safetensors"
    stn.save_file(big, str(src))
    out = tmp_path / "o" / "model.gguf"
    out.parent.mkdir()
    p = subprocess.Popen([tbx, "convert", str(src), str(out), "--quant", "q4_k",
                          "--max-shard-size", "3MB", "--no-sync"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    t0 = time.monotonic()
    while time.monotonic() - t0 < 60 and p.poll() is None:
        if sum(".tbx-set." in n for n in temp_names(out.parent)) >= 2:
            break
        time.sleep(0.01)
    assert p.poll() is None, "the conversion ended before two shards were written: no test"
    before = temp_names(out.parent)
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=60)
    assert p.returncode != 0
    assert sum(".tbx-set." in n for n in before) >= 2, before
    assert sorted(q.name for q in out.parent.iterdir()) == [], (before, err)
