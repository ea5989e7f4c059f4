"""`tbx convert ... --to embd-legacy`: the layout cpp_embedder's runtime reads, byte for byte what
its converter writes. The expected bytes never come from tbx: tiny-legacy.bin (the converter
before its transposition commit, from tiny-expected.npz) with the linear weights transposed here
in numpy; tiny-cpp.bin and the all-MiniLM-L6-v2 SHA-256, which tools/embd-legacy-fixtures
checked against the converter itself; origin-verdicts.json, what the origin's C++ WeightLoader
loaded from the committed files (compared here with the files parsed by this module)."""
import hashlib
import json
import struct

import numpy as np
import pytest

from conftest import REPO, info_json, need, run
from embdfile import legacy

DATA = REPO / "tests" / "data" / "embd"
VERDICTS = json.loads((DATA / "origin-verdicts.json").read_text(encoding="utf-8"))
LINEAR = ("attention.self.query.weight", "attention.self.key.weight",
          "attention.self.value.weight", "attention.output.dense.weight",
          "intermediate.dense.weight", "output.dense.weight")
CONFIG = {"architectures": ["BertModel"], "model_type": "bert", "vocab_size": 16,
          "hidden_size": 8, "num_hidden_layers": 6, "num_attention_heads": 2,
          "intermediate_size": 12, "max_position_embeddings": 10, "type_vocab_size": 2}


def parse(b: bytes):
    """The legacy layout, strictly: [(name, shape, f32 bytes)], [tokens]."""
    assert b[:4] == b"EMBD" and struct.unpack_from("<I", b, 4)[0] == 1
    (n,) = struct.unpack_from("<I", b, 8)
    pos, tensors = 12, []
    for _ in range(n):
        (nl,) = struct.unpack_from("<I", b, pos)
        name = b[pos + 4:pos + 4 + nl].decode()
        pos += 4 + nl
        (nd,) = struct.unpack_from("<I", b, pos)
        shape = list(struct.unpack_from(f"<{nd}I", b, pos + 4))
        pos += 4 + 4 * nd
        nb = 4 * int(np.prod(shape))
        tensors.append((name, shape, b[pos:pos + nb]))
        pos += nb
    (vc,) = struct.unpack_from("<I", b, pos)
    pos += 4
    vocab = []
    for _ in range(vc):
        (tl,) = struct.unpack_from("<I", b, pos)
        vocab.append(b[pos + 4:pos + 4 + tl].decode())
        pos += 4 + tl
    assert pos == len(b), (pos, len(b))
    return tensors, vocab


def fnv64(data: bytes, h: int = 0xCBF29CE484222325) -> int:
    for c in data:
        h = ((h ^ c) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def tiny_dir(tmp_path, drop=(), change=None, vocab_txt=None):
    """tiny-expected.npz as a Hugging Face directory (config.json, model.safetensors, vocab.txt)."""
    stn = need("safetensors.numpy")
    sd = {k: v for k, v in np.load(DATA / "tiny-expected.npz").items() if k not in drop}
    if change:
        change(sd)
    d = tmp_path / "tiny-hf"
    d.mkdir(parents=True, exist_ok=True)
    stn.save_file(sd, str(d / "model.safetensors"))
    (d / "vocab.txt").write_bytes(vocab_txt if vocab_txt is not None else
                                  (DATA / "vocab.txt").read_bytes())
    (d / "config.json").write_text(json.dumps(CONFIG))
    return d


def convert(tbx, src, out, *args, rc=0, **kw):
    r = run(tbx, "convert", src, out, "--to", "embd-legacy", "--force", *args, **kw)
    assert r.rc == rc, r.describe()
    return r


def test_tiny_is_the_converters_bytes(tbx, tmp_path):
    # The expectation, independent of tbx: the converter before 613f9bb's successor wrote the
    # state dict as it is (tiny-legacy.bin); the converter since writes the same with every
    # linear weight of the encoder transposed (tensor.T.copy()), its shape [in, out].
    old_tensors, old_vocab = parse((DATA / "tiny-legacy.bin").read_bytes())
    want = b"EMBD" + struct.pack("<II", 1, len(old_tensors))
    transposed = 0
    for name, shape, raw in old_tensors:
        if name.startswith("encoder.layer.") and name.split(".", 3)[3] in LINEAR:
            a = np.frombuffer(raw, "<f4").reshape(shape).T.copy()
            shape, raw = list(a.shape), a.tobytes()
            transposed += 1
        want += struct.pack("<I", len(name.encode())) + name.encode()
        want += struct.pack(f"<{len(shape) + 1}I", len(shape), *shape) + raw
    want += struct.pack("<I", len(old_vocab))
    want += b"".join(struct.pack("<I", len(t.encode())) + t.encode() for t in old_vocab)
    assert transposed == 36
    assert (DATA / "tiny-cpp.bin").read_bytes() == want
    v = VERDICTS["files"]["tiny-cpp.bin"]
    assert v["identical_to_origin_converter"]
    assert hashlib.sha256(want).hexdigest() == v["origin_converter_sha256"]
    out = tmp_path / "tiny.bin"
    convert(tbx, tiny_dir(tmp_path), out)
    assert out.read_bytes() == want


def test_every_route_gives_the_same_bytes(tbx, tmp_path):
    want = (DATA / "tiny-cpp.bin").read_bytes()
    # the converter's older file (untransposed: [out, in] is read from the FFN shapes), a
    # file in the current converter's layout (already [in, out]: copied), the specification's
    # layout (its metadata has no place: --drop-meta)
    for i, (src, args) in enumerate(((DATA / "tiny-legacy.bin", ()),
                                     (DATA / "tiny-cpp.bin", ()),
                                     (DATA / "tiny-spec.weights", ("--drop-meta",)))):
        out = tmp_path / f"r{i}.bin"
        convert(tbx, src, out, *args)
        assert out.read_bytes() == want, src
    # safetensors alone: the same tensors, no vocabulary (count 0)
    sd = tiny_dir(tmp_path) / "model.safetensors"
    out = tmp_path / "st.bin"
    convert(tbx, sd, out)
    tensors, _ = parse(want)
    end = len(want) - sum(4 + len(t.encode()) for t in parse(want)[1]) - 4
    assert out.read_bytes() == want[:end] + struct.pack("<I", 0)
    # and tbx reads back what it wrote: shapes [in, out], values the transposed originals
    orig = dict(np.load(DATA / "tiny-expected.npz"))
    j = info_json(tbx, out)
    assert j["format"] == "embd-legacy"
    got = {t["name"]: t["shape"] for t in j["tensors"]}
    for name, shape, raw in tensors:
        assert got[name] == shape
        a = orig[name].T if name.split(".", 3)[-1] in LINEAR else orig[name]
        assert np.frombuffer(raw, "<f4").reshape(shape).tobytes() == a.astype("<f4").tobytes()


@pytest.mark.parametrize("name", ["tiny-cpp.bin", "tiny-legacy.bin", "plain.bin"])
def test_committed_files_are_what_the_origin_loader_loaded(tbx, name):
    b = (DATA / name).read_bytes()
    v = VERDICTS["files"][name]
    assert hashlib.sha256(b).hexdigest() == v["sha256"]
    ld = v["loader"]
    assert ld["loaded"] is True
    tensors, vocab = parse(b)
    assert [t["name"] for t in ld["tensors"]] == sorted(t[0] for t in tensors)
    by = {t[0]: t for t in tensors}
    j = {t["name"]: t for t in info_json(tbx, DATA / name)["tensors"]}
    for t in ld["tensors"]:
        _, shape, raw = by[t["name"]]
        assert t["shape"] == shape and t["fnv1a64"] == f"{fnv64(raw):016x}", t["name"]
        assert j[t["name"]]["shape"] == shape  # tbx reads the same
        r = run(tbx, "cat", DATA / name, t["name"])
        assert r.rc == 0 and r.out == raw, t["name"]
    assert ld["vocab_count"] == len(vocab)
    h = 0xCBF29CE484222325
    for tok in vocab:
        h = fnv64(tok.encode(), fnv64(struct.pack("<I", len(tok.encode())), h))
    assert ld["vocab_fnv1a64"] == f"{h:016x}"


def test_plain_container_and_the_spec_layout_still_written_alike(tbx, tmp_path):
    # plain.safetensors is no BERT: its tensors are written in order and as they are
    # ("fc.weight" is not transposed), and the loader took them (previous test)
    stn = need("safetensors.numpy")
    out = tmp_path / "plain.bin"
    convert(tbx, DATA / "plain.safetensors", out)
    assert out.read_bytes() == (DATA / "plain.bin").read_bytes()
    src = stn.load_file(str(DATA / "plain.safetensors"))
    tensors, vocab = parse(out.read_bytes())
    assert vocab == [] and [t[0] for t in tensors] == list(src)
    for name, shape, raw in tensors:
        assert shape == list(src[name].shape) and raw == src[name].astype("<f4").tobytes()
    # the specification's layout, which the loader refuses: its first 16 bytes read as magic,
    # version 1 (major 1, minor 0), "num_tensors" (the flags), a name length (metadata_offset,
    # 64), then 64 bytes of "name" and a u32 "ndim" from inside the metadata
    spec = tmp_path / "tiny.weights"
    r = run(tbx, "convert", tiny_dir(tmp_path), spec, "--meta", "model_name=tiny-bert",
            env={"SOURCE_DATE_EPOCH": "0"})
    assert r.rc == 0, r.describe()
    b = spec.read_bytes()
    assert b == (DATA / "tiny-spec.weights").read_bytes()
    ver, flags, name_len = struct.unpack_from("<III", b, 4)
    assert ver == 1 and name_len == 64
    (ndim,) = struct.unpack_from("<I", b, 16 + name_len)
    ld = VERDICTS["files"]["tiny-spec.weights"]["loader"]
    assert ld == {"loaded": False, "error": f"Invalid tensor dimensions: {ndim}"}


def test_minilm_is_the_converters_bytes(tbx, minilm_dir, tmp_path):
    m = VERDICTS["minilm"]
    assert m["identical_to_origin_converter"] and m["loader"]["loaded"]
    assert m["loader"]["missing_for_runtime"] == 0 and m["runtime"]["built"]
    out = tmp_path / "minilm.bin"
    # model.safetensors carries {"format": "pt"}: no place for it, and stringifying cannot help
    for args in ((), ("--stringify-meta",)):
        r = convert(tbx, minilm_dir, out, *args, rc=1)
        assert b"has no metadata" in r.err and b"--drop-meta" in r.err, r.describe()
        assert b"--stringify-meta or" not in r.err
        assert not out.exists()
    convert(tbx, minilm_dir, out, "--drop-meta", timeout=600)
    b = out.read_bytes()
    assert len(b) == m["bytes"] == 90590059
    assert hashlib.sha256(b).hexdigest() == m["origin_converter_sha256"]
    tensors, vocab = parse(b)
    tok = json.loads((minilm_dir / "tokenizer.json").read_text(encoding="utf-8"))
    assert vocab == [t for t, _ in sorted(tok["model"]["vocab"].items(), key=lambda kv: kv[1])]
    assert len(tensors) == 101 and not any(t[0].startswith("pooler") for t in tensors)
    shapes = {t[0]: t[1] for t in tensors}
    assert shapes["encoder.layer.5.intermediate.dense.weight"] == [384, 1536]
    assert shapes["encoder.layer.5.output.dense.weight"] == [1536, 384]


def test_refusals(tbx, tmp_path):
    stn = need("safetensors.numpy")
    out = tmp_path / "o.bin"

    def st(name, arrays, **kw):
        p = tmp_path / name
        stn.save_file(arrays, str(p), **kw)
        return p

    def refused(src, *args, msg, code=1):
        r = convert(tbx, src, out, *args, rc=code)
        assert msg in r.err, r.describe()
        assert not out.exists()

    f16 = st("h.safetensors", {"w": np.arange(6, dtype=np.float16).reshape(2, 3)})
    refused(f16, msg=b"stores f32 only, not f16 (convert with --cast f32)")
    convert(tbx, f16, out, "--cast", "f32")
    assert parse(out.read_bytes())[0] == [("w", [2, 3], np.arange(6, dtype="<f4").tobytes())]
    out.unlink()
    refused(st("5d.safetensors", {"w": np.zeros((1, 1, 1, 1, 2), np.float32)}),
            msg=b"stores 1 to 4 dimensions, not 5")
    refused(st("z.safetensors", {"w": np.zeros((2, 0), np.float32)}),
            msg=b"loader refuses 0")
    meta = st("m.safetensors", {"w": np.ones(2, np.float32)}, metadata={"k": "v"})
    refused(meta, msg=b"metadata \"k\": the legacy EMBD layout has no metadata (allow dropping "
                      b"it with --drop-meta)")
    refused(meta, "--stringify-meta", msg=b"has no metadata")
    refused(meta, "--drop-meta", "--alignment", "64", msg=b"no configurable alignment (alignment 64")
    convert(tbx, meta, out, "--drop-meta")
    out.unlink()
    # a BERT needs every tensor of the converter's table
    refused(tiny_dir(tmp_path / "a", drop=("encoder.layer.3.output.dense.bias",)),
            msg=b"missing: \"encoder.layer.3.output.dense.bias\"")
    # one layer's feed-forward already [in, out], the others not
    def flip(sd):
        sd["encoder.layer.2.intermediate.dense.weight"] = \
            np.ascontiguousarray(sd["encoder.layer.2.intermediate.dense.weight"].T)
    refused(tiny_dir(tmp_path / "b", change=flip),
            msg=b"tensor \"encoder.layer.2.intermediate.dense.weight\" is not [12, 8] ([out, in]")
    # the origin's loader takes at most 100,000 tokens: 100,000 pass (1.5 MB of vocabulary,
    # written through the writer's 1 MiB buffer), 100,001 do not
    ok = [f"token{i:06d}" for i in range(100000)]
    convert(tbx, tiny_dir(tmp_path / "v", vocab_txt="".join(t + "\n" for t in ok).encode()), out)
    assert parse(out.read_bytes())[1] == ok
    out.unlink()
    many = "".join(f"t{i}\n" for i in range(100001)).encode()
    refused(tiny_dir(tmp_path / "c", vocab_txt=many),
            msg=b"100001 tokens: cpp_embedder's loader refuses more than 100000")


def test_square_legacy_input_cannot_tell_its_orientation(tbx, tmp_path):
    # hidden = intermediate = 4: a legacy file's linear weights could be either way round
    rng = np.random.default_rng(3)
    names = ["embeddings.word_embeddings.weight", "embeddings.position_embeddings.weight",
             "embeddings.token_type_embeddings.weight", "embeddings.LayerNorm.weight",
             "embeddings.LayerNorm.bias"]
    shapes = [[6, 4], [5, 4], [2, 4], [4], [4]]
    for s in ("attention.self.query", "attention.self.key", "attention.self.value",
              "attention.output.dense", "attention.output.LayerNorm", "intermediate.dense",
              "output.dense", "output.LayerNorm"):
        for kind in ("weight", "bias"):
            names.append(f"encoder.layer.0.{s}.{kind}")
            shapes.append([4] if kind == "bias" or "LayerNorm" in s else [4, 4])
    tensors = [(n, s, rng.standard_normal(s).astype("<f4").tobytes())
               for n, s in zip(names, shapes)]
    p = tmp_path / "sq.bin"
    p.write_bytes(legacy(tensors, ["[PAD]", "a"]))
    r = convert(tbx, p, tmp_path / "o.bin", rc=1)
    assert b"do not tell whether its linear weights are [out, in]" in r.err, r.describe()
    # the same tensors from safetensors are PyTorch's [out, in]: transposed
    stn = need("safetensors.numpy")
    st = tmp_path / "sq.safetensors"
    stn.save_file({n: np.frombuffer(raw, "<f4").reshape(s) for n, s, raw in tensors}, str(st))
    convert(tbx, st, tmp_path / "o.bin")
    got = {n: (s, raw) for n, s, raw in parse((tmp_path / "o.bin").read_bytes())[0]}
    q = "encoder.layer.0.attention.self.query.weight"
    src = np.frombuffer(dict((n, raw) for n, s, raw in tensors)[q], "<f4").reshape(4, 4)
    assert got[q][1] == src.T.tobytes()
    # and from a Hugging Face directory with a vocabulary (src/models' import hands it over as a
    # model's token list, not as a legacy file's vocabulary): PyTorch's [out, in], transposed
    d = tmp_path / "sq-hf"
    d.mkdir()
    stn.save_file({"bert." + n: np.frombuffer(raw, "<f4").reshape(s) for n, s, raw in tensors},
                  str(d / "model.safetensors"))
    (d / "config.json").write_text(json.dumps(dict(CONFIG, hidden_size=4, intermediate_size=4,
                                                   num_hidden_layers=1)))
    (d / "vocab.txt").write_bytes(b"[PAD]\na\n")
    convert(tbx, d, tmp_path / "o2.bin")
    got_t, got_v = parse((tmp_path / "o2.bin").read_bytes())
    assert dict((n, raw) for n, s, raw in got_t)[q] == src.T.tobytes()
    assert got_v == ["[PAD]", "a"]


def test_bert_extras_follow_the_table_and_vocab_lines_as_python_reads_them(tbx, tmp_path):
    # the pooler is left out (as the converter leaves it out), another tensor follows the
    # table as it is; vocab.txt lines end at \n, \r\n or a lone \r (Python's text mode, which
    # the converter reads the file in)
    rng = np.random.default_rng(5)
    extra = {"pooler.dense.weight": rng.standard_normal((8, 8)).astype(np.float32),
             "pooler.dense.bias": rng.standard_normal(8).astype(np.float32),
             "classifier.weight": rng.standard_normal((3, 8)).astype(np.float32)}
    vt = "[PAD]\r\n[UNK]\ra b\n\nlast".encode()
    d = tiny_dir(tmp_path, change=lambda sd: sd.update(extra), vocab_txt=vt)
    out = tmp_path / "o.bin"
    convert(tbx, d, out)
    tensors, vocab = parse(out.read_bytes())
    with open(d / "vocab.txt", "r", encoding="utf-8") as f:
        assert vocab == [line.rstrip("\n") for line in f]
    assert vocab == ["[PAD]", "[UNK]", "a b", "", "last"]
    assert [t[0] for t in tensors[:101]] == [t[0] for t in parse(
        (DATA / "tiny-cpp.bin").read_bytes())[0]]
    assert tensors[101:] == [("classifier.weight", [3, 8],
                              extra["classifier.weight"].astype("<f4").tobytes())]


def test_spec_metadata_from_a_transposed_legacy_file(tbx, tmp_path):
    # intermediate_size is the intermediate bias's length, whichever way round the weights are
    # (from tiny-cpp.bin's [in, out] weight dim 0 it would be the hidden size, 8)
    for src in ("tiny-legacy.bin", "tiny-cpp.bin"):
        out = tmp_path / f"{src}.weights"
        r = run(tbx, "convert", DATA / src, out, "--meta", "model_name=t", "--meta",
                "model_version=1", "--meta", "num_attention_heads=2")
        assert r.rc == 0, r.describe()
        meta = info_json(tbx, out)["metadata"]
        got = {m["key"]: m["value"] for m in meta} if isinstance(meta, list) else meta
        assert got["intermediate_size"] == str(CONFIG["intermediate_size"]), got
        assert got["hidden_size"] == str(CONFIG["hidden_size"]), got
