"""GGUF split sets read as one model: `tbx info/cat/convert/validate` on the first shard of a set
written by `tbx gguf split` see every tensor of every shard.

The original file is written with gguf-py's GGUFWriter and read back with gguf-py's GGUFReader;
the shards come from `tbx gguf split`.
"""
from __future__ import annotations

import struct
from pathlib import Path

import pytest

from conftest import assert_clean_exit, info_json, need, run, write_gguf

np = need("numpy")
gguf = need("gguf")

QT = gguf.GGMLQuantizationType


def tensors_of(path: Path) -> dict:
    """name -> (tensor_type, row-major shape, raw bytes) as gguf-py reads them."""
    r = gguf.GGUFReader(str(path))
    out = {}
    for t in r.tensors:
        shape = tuple(int(x) for x in reversed(list(t.shape)))
        out[t.name] = (t.tensor_type, shape, bytes(np.asarray(t.data).tobytes()))
    return out


DTYPE_NAMES = {QT.F32: "f32", QT.F16: "f16", QT.I32: "i32", QT.Q8_0: "q8_0"}


@pytest.fixture()
def model(tmp_path):
    rng = np.random.default_rng(11)

    def fill(w):
        w.add_string("general.name", "split set")
        w.add_uint32("test.u32", 9)
        for i in range(9):
            kind = i % 4
            if kind == 0:
                w.add_tensor(f"blk.{i}.w", rng.standard_normal((8, 64)).astype(np.float32))
            elif kind == 1:
                w.add_tensor(f"blk.{i}.h", rng.standard_normal((4, 3, 32)).astype(np.float16))
            elif kind == 2:
                w.add_tensor(f"blk.{i}.i", rng.integers(-99, 99, size=(70,), dtype=np.int32))
            else:
                w.add_tensor(f"blk.{i}.q", rng.integers(0, 256, size=(4, 68), dtype=np.uint8),
                             raw_dtype=QT.Q8_0)

    return write_gguf(tmp_path / "orig.gguf", fill)


def split(tbx, src: Path, stem: Path, max_size: int = 3000) -> list[Path]:
    stem.parent.mkdir(parents=True, exist_ok=True)
    r = run(tbx, "gguf", "split", src, stem, "--max-size", str(max_size))
    assert r.rc == 0, r.describe()
    shards = sorted(stem.parent.glob(stem.name + "-*-of-*.gguf"))
    assert len(shards) >= 3
    return shards


@pytest.mark.parametrize("mmap", [False, True])
def test_info_lists_every_tensor_of_the_set(tbx, model, tmp_path, mmap):
    shards = split(tbx, model, tmp_path / "s" / "m")
    orig = tensors_of(model)
    args = ["info", shards[0], "--json"] + (["--mmap"] if mmap else [])
    r = run(tbx, *args)
    assert r.rc == 0, r.describe()
    import json
    doc = json.loads(r.out.decode())
    got = [(t["name"], tuple(t["shape"]), t["dtype"]) for t in doc["tensors"]]
    want = [(k, v[1], DTYPE_NAMES[v[0]]) for k, v in orig.items()]
    assert got == want
    # metadata from shard 1, split.* keys as they are
    meta = doc["metadata"]
    assert meta["general.name"] == "split set"
    assert meta["split.no"] == 0
    assert meta["split.count"] == len(shards)
    assert meta["split.tensors.count"] == len(orig)


@pytest.mark.parametrize("mmap", [False, True])
def test_cat_reads_tensors_from_every_shard(tbx_asan, model, tmp_path, mmap):
    shards = split(tbx_asan, model, tmp_path / "m")
    orig = tensors_of(model)
    # every shard holds at least one tensor: cat all of them through shard 1
    per_shard = [list(tensors_of(s)) for s in shards]
    assert all(per_shard)
    for name, (_, _, data) in orig.items():
        args = ["cat", shards[0], name] + (["--mmap"] if mmap else [])
        r = run(tbx_asan, *args)
        assert_clean_exit(r)
        assert r.rc == 0, r.describe()
        assert r.out == data, name
    # decoded values too (tbx_tensor_read_f32), for an f32 tensor in the last shard
    last = [n for n in per_shard[-1] if n.endswith(".w")]
    if last:
        r = run(tbx_asan, "cat", shards[0], last[0], "--as", "f32")
        assert r.rc == 0, r.describe()
        assert r.out == orig[last[0]][2]


def test_convert_first_shard_gives_the_whole_model(tbx, model, tmp_path):
    shards = split(tbx, model, tmp_path / "m")
    out = tmp_path / "out.gguf"
    r = run(tbx, "convert", shards[0], out)
    assert r.rc == 0, r.describe()
    assert tensors_of(out) == tensors_of(model)
    assert list(tensors_of(out)) == list(tensors_of(model))


def test_validate_checks_every_shard(tbx, model, tmp_path):
    shards = split(tbx, model, tmp_path / "m")
    r = run(tbx, "validate", shards[0])
    assert r.rc == 0, r.describe()
    r = run(tbx, "validate", "--ggml", shards[0])
    assert r.rc == 0, r.describe()
    # a non-zero padding byte after a tensor of a later shard is found through shard 1
    hit = None
    for k, sh in enumerate(shards[1:], start=2):
        for t in gguf.GGUFReader(str(sh)).tensors:
            if int(t.n_bytes) % 32:
                hit = (k, sh, int(t.data_offset) + int(t.n_bytes))
                break
        if hit:
            break
    assert hit, "no shard after the first has a padded tensor"
    k, sh, end = hit
    blob = bytearray(sh.read_bytes())
    assert end < len(blob) and blob[end] == 0
    blob[end] = 0x5A
    sh.write_bytes(bytes(blob))
    r = run(tbx, "validate", shards[0])
    assert_clean_exit(r)
    assert r.rc == 1, r.describe()
    assert f"shard {k} of {len(shards)}" in r.text, r.describe()


def test_missing_shard_names_the_file(tbx_asan, model, tmp_path):
    shards = split(tbx_asan, model, tmp_path / "m")
    shards[1].rename(tmp_path / "elsewhere.gguf")
    r = run(tbx_asan, "info", shards[0])
    assert_clean_exit(r)
    assert r.rc == 1, r.describe()
    assert shards[1].name in r.text, r.describe()
    assert f"shard 2 of {len(shards)}" in r.text, r.describe()
    # the other shards still open on their own
    r = run(tbx_asan, "info", shards[2], "--json")
    assert r.rc == 0, r.describe()


def set_split_no(path: Path, value: int):
    """Overwrites the u16 split.no value in place (found by its key bytes)."""
    blob = bytearray(path.read_bytes())
    key = b"split.no"
    i = blob.find(struct.pack("<Q", len(key)) + key)
    assert i > 0
    at = i + 8 + len(key)
    assert struct.unpack_from("<I", blob, at)[0] == 2  # u16
    struct.pack_into("<H", blob, at + 4, value)
    path.write_bytes(bytes(blob))


def test_wrong_split_no_is_rejected(tbx_asan, model, tmp_path):
    shards = split(tbx_asan, model, tmp_path / "m")
    set_split_no(shards[2], 7)
    r = run(tbx_asan, "info", shards[0])
    assert_clean_exit(r)
    assert r.rc == 1, r.describe()
    assert "split.no" in r.text and shards[2].name in r.text, r.describe()


def test_shard_of_another_set_is_rejected(tbx, model, tmp_path):
    """A shard with the right split.no from a different split of the same model (other
    tensor count) is caught by split.count / split.tensors.count."""
    shards = split(tbx, model, tmp_path / "a" / "m", 3000)
    other = split(tbx, model, tmp_path / "b" / "m", 1)
    assert len(other) != len(shards)
    shards[1].write_bytes(other[1].read_bytes())
    r = run(tbx, "info", shards[0])
    assert r.rc == 1, r.describe()
    assert "split.count" in r.text, r.describe()


def test_other_shards_and_renamed_first_shard_open_alone(tbx, model, tmp_path):
    shards = split(tbx, model, tmp_path / "m")
    d = info_json(tbx, shards[1])
    assert [t["name"] for t in d["tensors"]] == list(tensors_of(shards[1]))
    solo = tmp_path / "first.gguf"
    solo.write_bytes(shards[0].read_bytes())
    d = info_json(tbx, solo)
    assert [t["name"] for t in d["tensors"]] == list(tensors_of(shards[0]))


def test_writer_never_replaces_a_shard_of_the_open_set(tbx, model, tmp_path):
    shards = split(tbx, model, tmp_path / "m")
    for target in (shards[0], shards[-1]):
        before = target.read_bytes()
        r = run(tbx, "convert", shards[0], target, "--force")
        assert_clean_exit(r)
        assert r.rc == 1, r.describe()
        assert target.read_bytes() == before


def test_merge_and_tools_still_work_per_shard(tbx, model, tmp_path):
    shards = split(tbx, model, tmp_path / "m")
    out = tmp_path / "merged.gguf"
    r = run(tbx, "gguf", "merge", shards[0], out)
    assert r.rc == 0, r.describe()
    assert out.read_bytes() == model.read_bytes()
    # editing shard 1 (a rewrite: the value grows) keeps it a shard of its own tensors
    own = tensors_of(shards[0])
    r = run(tbx, "gguf", "set", shards[0], "general.name=renamed split set")
    assert r.rc == 0, r.describe()
    assert tensors_of(shards[0]) == own
    d = info_json(tbx, shards[0])
    assert [t["name"] for t in d["tensors"]] == list(tensors_of(model))
