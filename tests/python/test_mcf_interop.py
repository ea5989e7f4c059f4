"""MCF against mantle, the reference implementation: tests/data/mcf/ holds files written by
mantle's own Writer, `pack` and `quantize` (commit 803be32), the f32 values mantle's decoders
give for every tensor, and mutated files with mantle's verdicts (tests/data/mcf/README.md says
how they were made). The corpus is required: a missing file is a failure, never a skip.

1. Every fixture reads identically: header directory, ModelInfo, tensor table (names, dtypes,
   shapes, offsets, sizes, aliases), QuantInfo, HF sections byte for byte, and every tensor's
   f32 values bit for bit (raw bytes where mantle has no decoder).
2. Writing: converting a mantle file to MCF gives mantle's bytes back (pack outputs with dedup,
   plain Writer files), quantize outputs except the QuantInfo clip range (see docs/formats/mcf.md).
3. Mutated files get tensorbox's decisions, each named by exact (code, field, offset).
"""
from __future__ import annotations

import hashlib
import json
import os
import struct
import subprocess

import pytest

from conftest import REPO, run, info_json, validate_json, assert_clean_exit

MCF = REPO / "tests" / "data" / "mcf"


def _manifest() -> dict:
    p = MCF / "manifest.json"
    if not p.is_file():
        return {"fixtures": [{"file": "MISSING manifest.json", "missing": True}]}
    return json.loads(p.read_text())


MANIFEST = _manifest()
FIXTURES = [f for f in MANIFEST["fixtures"] if f["file"].startswith("files/")]
MUTATED = [f for f in MANIFEST["fixtures"] if f["file"].startswith("mutated/")]

DTYPE = {1: "f32", 2: "f16", 3: "bf16", 4: "f64", 5: "i8", 6: "u8", 7: "i16", 8: "u16",
         9: "i32", 10: "u32", 11: "i64", 12: "u64", 0x10: "mcf_int8", 0x11: "mcf_int4",
         0x20: "mcf_q8", 0x21: "mcf_q4", 0x30: "mcf_k6", 0x31: "mcf_k4", 0x32: "mcf_k3",
         0x33: "mcf_k2"}
HF_TYPES = range(0x100, 0x106)


def test_corpus_present():
    assert (MCF / "manifest.json").is_file(), f"MCF corpus missing: {MCF}/manifest.json"
    assert len(FIXTURES) >= 40 and len(MUTATED) >= 60, "MCF corpus incomplete"
    for f in MANIFEST["fixtures"]:
        assert (MCF / f["file"]).is_file(), f"fixture missing: {f['file']}"


def _raw(binary, *args) -> bytes:
    """tbx with byte arguments (non-UTF-8 tensor names); returns stdout, asserting success."""
    env = dict(os.environ)
    env.setdefault("ASAN_OPTIONS", "abort_on_error=0:detect_leaks=1")
    p = subprocess.run([binary, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=120, env=env)
    assert p.returncode == 0, f"tbx {args!r} failed: {p.stderr.decode(errors='replace')}"
    assert b"Sanitizer" not in p.stderr and b"runtime error" not in p.stderr
    return p.stdout


def _bits(x: float) -> int:
    return struct.unpack("<I", struct.pack("<f", x))[0]


def _entries_at(blob: bytes) -> int:
    """Absolute offset of TensorIndex entry 0 (header -> directory -> TensorIndex header)."""
    count, dir_off = struct.unpack_from("<IQ", blob, 12)
    secs = [struct.unpack_from("<IIQQ", blob, dir_off + 24 * i) for i in range(count)]
    base = next(s[2] for s in secs if s[0] == 3)
    return base + struct.unpack_from("<Q", blob, base + 16)[0]


def _bare(t) -> bool:
    """pack --quant-embed: int8/int4 codes alone, no scale region before them (NOTES): the
    tensor's data_size is exactly its codes (int4: two per byte)."""
    if t["dtype"] not in (0x10, 0x11):
        return False
    n = 1
    for d in t["shape"]:
        n *= d
    return t["data_size"] == (n if t["dtype"] == 0x10 else (n + 1) // 2)


@pytest.mark.parametrize("fx", FIXTURES, ids=[f["file"] for f in FIXTURES])
def test_fixture_reads_as_mantle_does(tbx_asan, fx):
    path = MCF / fx["file"]
    info = info_json(tbx_asan, path)
    assert info["format"] == "mcf"
    # the directory, as mantle parsed it
    d = info.get("mcf_directory", [])
    assert [(s["type"], s["version"], s["offset"], s["size"]) for s in d] == \
        [(s["type"], s["version"], s["offset"], s["size"]) for s in fx["sections"]]
    # HF sections: listed by file name, bytes verbatim
    for s in fx["sections"]:
        if s["type"] in HF_TYPES:
            data = _raw(tbx_asan, "cat", str(path), "--section", s["name"])
            assert hashlib.sha256(data).hexdigest() == s["sha256"], s["name"]
    # ModelInfo as metadata
    mi = fx.get("modelinfo")
    meta = info.get("metadata", {})
    if mi is not None and any(s["type"] == 1 for s in fx["sections"]):
        for k in ("arch", "vocab_size", "hidden_size", "layer_count", "head_count",
                  "head_count_kv", "context_length", "train_context", "rope_type"):
            assert meta[f"mcf.{k}"] == mi[k], k
        for k in ("rope_freq_base", "rope_scale"):
            assert _bits(meta[f"mcf.{k}"]) == int(mi[f"{k}_bits"], 16), k
        for k in ("model_name", "base_model"):
            if mi[k]:
                assert meta[f"mcf.{k}"] == mi[k], k
            else:
                assert f"mcf.{k}" not in meta, k
        for kv in mi.get("kv", []):
            v = meta[kv["key"]]
            if kv["type"] == 1:
                assert v == kv["u32"], kv
            elif kv["type"] == 2:
                assert _bits(v) == int(kv["f32_bits"], 16), kv
            else:
                want = bytes.fromhex(kv.get("string_hex", ""))
                if isinstance(v, str):
                    got = v.encode("utf-8", "surrogateescape")
                    if want and not want.decode("utf-8", "ignore").encode() == want:
                        continue  # not UTF-8: JSON cannot carry the raw bytes
                    assert got == want, kv
                else:
                    assert v in ("", None) or v == want.decode("latin-1"), kv
    # tensors: table, quantization and values
    tensors = info.get("tensors", [])
    assert len(tensors) == len(fx.get("tensors", []))
    for got, want in zip(tensors, fx.get("tensors", [])):
        nm = bytes.fromhex(want["name_hex"])
        try:
            assert got["name"] == nm.decode("utf-8")
        except UnicodeDecodeError:
            pass
        assert got["dtype"] == DTYPE[want["dtype"]], want["name"]
        assert got["shape"] == want["shape"], want["name"]
        assert got["offset"] == want["data_off"] and got["nbytes"] == want["data_size"]
        assert got.get("unreadable", False) == _bare(want), want["name"]
        if _bare(want):
            # listed, but no value can be read: every read fails naming it (mantle: its
            # runtime has no decoder either, "unsupported dtype 16/17")
            for extra in ((), ("--as", "f32")):
                r = run(tbx_asan, "cat", path, want["name"], *extra)
                assert r.rc == 1 and f'tensor "{want["name"]}"'.encode() in r.err, r.describe()
                assert b"without the f32 scale" in r.err, r.describe()
            continue
        q = want.get("quant")
        if q:
            gq = got["quant"]
            assert gq["block_size"] == q["block_size"]
            assert gq["super_block_size"] == q["super_size"]
            assert gq["domain"] == ("weights" if q["domain"] == 0 else "activations")
            assert [_bits(x) for x in gq["clip"]] == [int(q["min_clip_bits"], 16),
                                                        int(q["max_clip_bits"], 16)]
        if "f32" in want:
            data = _raw(tbx_asan, "cat", str(path), nm, "--as", "f32")
            vals = (MCF / want["f32"]).read_bytes()
            assert data == vals, f"{want['name']}: f32 values differ from mantle's"
        else:
            data = _raw(tbx_asan, "cat", str(path), nm)
            assert hashlib.sha256(data).hexdigest() == want["raw_sha256"], want["name"]


# ---------------------------------------------------------------------------------------
# Writing: mantle's bytes back
# ---------------------------------------------------------------------------------------
# Files whose layout tensorbox's writer cannot reproduce, and why (docs/formats/mcf.md):
NOT_REPRODUCED = {
    # Writer API files laid out in orders neither pack nor quantize uses
    "files/sections_in.mcf": "HF sections in type order (pack writes vocab.json before "
                             "tokenizer_config.json)",
    "files/unknown_sections.mcf": "empty vocab.json written after an unknown type",
    "files/mixed_quant.mcf": "config.json before ModelInfo in a file with quantized tensors",
    "files/alias_zero_unicode.mcf": "an alias of different dtype (pack dedups equal dtype+shape)",
    "files/modelinfo_full.mcf": "an orphan key blob (a nil extra) mantle leaves unreferenced",
}


def _tbx_args(fx) -> list[str]:
    """tbx convert options giving the layout of pack's flags (pack_args) in the manifest:
    --dedup=false -> --no-dedup, --tensor-align N -> --alignment N, --cast T -> --cast T."""
    a = list(fx.get("inputs", {}).get("pack_args", []))
    out = []
    while a:
        x = a.pop(0)
        if x == "--dedup=false":
            out.append("--no-dedup")
        elif x == "--tensor-align":
            out += ["--alignment", a.pop(0)]
        elif x == "--cast":
            out += ["--cast", a.pop(0)]
        else:
            raise AssertionError(f"{fx['file']}: no tbx option for pack's {x}")
    return out


def _quantinfo_clip_ranges(blob: bytes):
    """Byte ranges of the QuantInfo records' clip fields (the rest must be identical)."""
    magic, _, _, _, n, dir_off, _, _ = struct.unpack_from("<4sHHIIQQQ", blob, 0)
    out = []
    for i in range(n):
        t, _, off, size = struct.unpack_from("<IIQQ", blob, dir_off + 24 * i)
        if t == 2:
            (count,) = struct.unpack_from("<I", blob, off + 4)
            out += [(off + 8 + 24 * r + 16, off + 8 + 24 * r + 24) for r in range(count)]
    return out


def _quant_embed(fx) -> bool:
    return any(_bare(t) for t in fx.get("tensors", []))


QUANT_EMBED = [f for f in FIXTURES if _quant_embed(f)]


def test_quant_embed_fixtures_present():
    assert sorted(f["file"] for f in QUANT_EMBED) == ["files/hf_tiny_llama_int4.mcf",
                                                      "files/hf_tiny_llama_int8.mcf"]
    for f in QUANT_EMBED:
        assert "--quant-embed" in f["made_by"] and f["mantle"]["store"] == "ok"


@pytest.mark.parametrize("fx", QUANT_EMBED, ids=[f["file"] for f in QUANT_EMBED])
def test_quant_embed_bare_tensors_are_problems_not_refusals(tbx_asan, tmp_path, fx):
    """mantle pack --quant-embed's file (mantle's reader opens it, its runtime cannot decode
    the codes): tbx validate reports each bare tensor once, at its entry's data_size; the
    conversion refuses it naming it, or leaves exactly those out with --drop-unreadable, and
    every other tensor comes through with mantle's values."""
    path = MCF / fx["file"]
    blob = path.read_bytes()
    ent = _entries_at(blob)
    bare = [(i, t) for i, t in enumerate(fx["tensors"]) if _bare(t)]
    assert len(bare) == 3
    r, objs = validate_json(tbx_asan, path)
    assert r.rc == 1, r.describe()
    assert [(o["code"], o["field"], o["offset"]) for o in objs] == \
        [("TBX_E_FORMAT", "tensor.data_size", ent + 40 * i + 32) for i, _ in bare], objs
    for o, (_, t) in zip(objs, bare):
        assert f'"{t["name"]}"' in o["message"] and "--quant-embed" in o["message"], o
    out = tmp_path / "out.mcf"
    r = run(tbx_asan, "convert", path, out)
    assert r.rc == 1 and not out.exists(), r.describe()
    assert f'tensor "{bare[0][1]["name"]}"'.encode() in r.err and b"--drop-unreadable" in r.err
    r = run(tbx_asan, "convert", path, out, "--drop-unreadable")
    assert r.rc == 0, r.describe()
    names = ", ".join(t["name"] for _, t in bare)
    assert f"left out unreadable tensors (tbx validate IN says why): {names}".encode() in r.err
    assert run(tbx_asan, "validate", out).rc == 0
    got = info_json(tbx_asan, out)
    kept = [t for t in fx["tensors"] if not _bare(t)]
    assert sorted(t["name"] for t in got["tensors"]) == sorted(t["name"] for t in kept)
    for t in kept:
        nm = t["name"].encode()
        if "f32" in t:
            assert _raw(tbx_asan, "cat", str(out), nm, "--as", "f32") == \
                (MCF / t["f32"]).read_bytes(), t["name"]
        else:
            assert hashlib.sha256(_raw(tbx_asan, "cat", str(out), nm)).hexdigest() == \
                t["raw_sha256"], t["name"]


@pytest.mark.parametrize("fx", [f for f in FIXTURES if not _quant_embed(f)],
                         ids=[f["file"] for f in FIXTURES if not _quant_embed(f)])
def test_writer_gives_mantles_bytes(tbx, tmp_path, fx):
    src = MCF / fx["file"]
    out = tmp_path / "out.mcf"
    # the layout flags of pack (--dedup=false, --tensor-align N) apply to mantle's file too
    pa = fx.get("inputs", {}).get("pack_args", []) if fx["kind"] == "pack" else []
    args = _tbx_args(fx) if pa and pa[0] in ("--dedup=false", "--tensor-align") else []
    r = run(tbx, "convert", src, out, *args)
    assert r.rc == 0, r.describe()
    a, b = src.read_bytes(), out.read_bytes()
    if fx["file"] in NOT_REPRODUCED:
        # still the same model: same tensors and values
        ia, ib = info_json(tbx, src), info_json(tbx, out)
        assert [(t["name"], t["dtype"], t["shape"]) for t in ia["tensors"]] == \
               [(t["name"], t["dtype"], t["shape"]) for t in ib["tensors"]]
        assert ia.get("metadata") == ib.get("metadata")
        assert [(x["name"], x["size"]) for x in ia.get("sections", [])] == \
               [(x["name"], x["size"]) for x in ib.get("sections", [])]
        for t in fx["tensors"]:
            nm = bytes.fromhex(t["name_hex"])
            assert _raw(tbx, "cat", str(src), nm) == _raw(tbx, "cat", str(out), nm), t["name"]
        return
    if fx["kind"] == "quantize" or (fx["kind"] == "writer" and any(
            s["type"] == 2 for s in fx["sections"])):
        # identical except the clip ranges: mantle records the range of the unquantized data,
        # tensorbox (given only the quantized payload) +-max|decoded value|
        assert len(a) == len(b)
        masked = set()
        for lo, hi in _quantinfo_clip_ranges(a):
            masked.update(range(lo, hi))
        diff = [i for i in range(len(a)) if a[i] != b[i] and i not in masked]
        assert not diff, f"{fx['file']}: bytes differ at {diff[:8]}"
        return
    assert a == b, f"{fx['file']}: tensorbox's MCF differs from mantle's"


# ---------------------------------------------------------------------------------------
# Mutated files: tensorbox's decisions (docs/formats/mcf.md), exact (code, field, offset)
# ---------------------------------------------------------------------------------------
# None: the file is accepted (mantle accepts it too, or NOTES says accept);
# (code, field, offset) derived from the mutation (manifest field/field_offset) and the layout
# of mixed_quant.mcf: directory at 4400 (entries of 24 B: ModelInfo, QuantInfo, TensorIndex,
# TensorData, config.json), TensorIndex at 3712 (entries from 3760, 40 B each), QuantInfo at
# 4248 (records from 4256), ModelInfo at 64.
DIR = 4400
TI_E = 3712 + 48
QI_R = 4248 + 8
MUT = {
    "trunc_39": ("TBX_E_TRUNCATED", "header.flags", 32),
    "trunc_last_byte": ("TBX_E_FORMAT", "header.file_size", 24),
    "trunc_half": ("TBX_E_FORMAT", "header.file_size", 24),
    "bad_magic": ("TBX_E_BAD_MAGIC", "header.magic", 0),
    "major_2": ("TBX_E_BAD_VERSION", "header.major", 4),
    "minor_9": None,                        # unknown minor versions accepted
    "header_size_39": ("TBX_E_FORMAT", "header.header_size", 8),
    "header_size_64": ("TBX_E_RANGE", "section.offset", DIR + 4 * 24 + 8),  # config.json at 40
    "file_size_plus1": ("TBX_E_FORMAT", "header.file_size", 24),
    "section_count_0": ("TBX_E_FORMAT", "header.section_count", 12),
    "section_count_huge": ("TBX_E_RANGE", "header.section_dir_offset", 16),
    # one entry fewer: config.json's bytes (at 40, the header's end) are now covered by no
    # section, so they are non-zero padding (and so is the dropped directory entry)
    "section_count_minus1": ("TBX_E_PADDING", "section.padding", 40),
    "dir_offset_past_eof": ("TBX_E_RANGE", "header.section_dir_offset", 16),
    "dir_offset_in_header": ("TBX_E_RANGE", "header.section_dir_offset", 16),
    # directory read 4 bytes early (4396): entry 0's offset field is then 1 | 64 << 32
    "dir_offset_unaligned": ("TBX_E_RANGE", "section.offset", 4396 + 8),
    "flags_unknown_bits": None,
    "flags_aligned_cleared": ("TBX_E_FORMAT", "header.flags", 32),
    "sec_unaligned": ("TBX_E_RANGE", "section.offset", DIR + 2 * 24 + 8),
    "sec_overlap": ("TBX_E_RANGE", "section.offset", DIR + 4 * 24 + 8),
    "sec_overlaps_dir": ("TBX_E_RANGE", "section.size", DIR + 2 * 24 + 16),
    "sec_past_eof": ("TBX_E_RANGE", "section.size", DIR + 4 * 24 + 16),
    "sec_offset_wraps": ("TBX_E_RANGE", "section.offset", DIR + 4 * 24 + 8),
    "sec_in_header": ("TBX_E_RANGE", "section.offset", DIR + 0 * 24 + 8),
    "sec_dup_type": ("TBX_E_DUPLICATE", "section.type", DIR + 4 * 24),
    "sec_unknown_type": None,
    "no_tensor_index": ("TBX_E_FORMAT", "tensor_index", 16),
    "no_tensor_data": ("TBX_E_RANGE", "tensor.data_off", TI_E + 24),
    "ti_version_2": ("TBX_E_BAD_VERSION", "tensor_index.version", 3712),
    "ti_count_0": ("TBX_E_FORMAT", "tensor_index.tensor_count", 3720),
    "ti_count_huge": ("TBX_E_LIMIT", "tensor_index.tensor_count", 3720),
    "ti_entries_off_oob": ("TBX_E_RANGE", "tensor_index.entries_off", 3728),
    "ti_strings_wrap": ("TBX_E_RANGE", "tensor_index.strings_size", 3752),
    "ti_name_oob": ("TBX_E_RANGE", "tensor.name_off", TI_E),
    "ti_rank_huge": ("TBX_E_LIMIT", "tensor.rank", TI_E + 4 * 40 + 12),
    "ti_dim_off_oob": ("TBX_E_RANGE", "tensor.dim_off", TI_E + 4 * 40 + 16),
    # entry 0 renamed after entry 1: detected at entry 1
    "ti_names_unsorted": ("TBX_E_FORMAT", "tensor.name", TI_E + 40),
    "ti_dup_names": ("TBX_E_DUPLICATE", "tensor.name", TI_E + 40),
    "ti_name_not_utf8": ("TBX_E_FORMAT", "tensor.name", 4208),
    "ti_dtype_unknown": ("TBX_E_FORMAT", "tensor.dtype", TI_E + 4 * 40 + 8),
    "ti_dtype_over_u16": ("TBX_E_FORMAT", "tensor.dtype", TI_E + 4 * 40 + 8),
    "ti_plain_as_q8": ("TBX_E_FORMAT", "tensor.rank", TI_E + 4 * 40 + 12),  # rank 1
    "ti_data_outside_tensordata": ("TBX_E_RANGE", "tensor.data_off", TI_E + 4 * 40 + 24),
    "ti_data_past_eof": ("TBX_E_RANGE", "tensor.data_off", TI_E + 4 * 40 + 24),
    "ti_data_wraps": ("TBX_E_FORMAT", "tensor.data_size", TI_E + 4 * 40 + 32),
    "ti_data_size_small": ("TBX_E_FORMAT", "tensor.data_size", TI_E + 4 * 40 + 32),
    "ti_quant_unaligned": ("TBX_E_RANGE", "tensor.data_off", TI_E + 6 * 40 + 24),
    "ti_quant_size_mismatch": ("TBX_E_FORMAT", "tensor.data_size", TI_E + 6 * 40 + 32),
    "ti_quant_dim0": ("TBX_E_FORMAT", "tensor.dims", 4128),
    "ti_shape_overflow": ("TBX_E_OVERFLOW", "tensor.dims", 4104),
    "qi_version_2": ("TBX_E_BAD_VERSION", "quant_info.version", 4248),
    "qi_count_huge": ("TBX_E_RANGE", "quant_info.record_count", 4252),
    # one record fewer: the last quantized tensor has none (validate reports it, at its data)
    "qi_count_minus1": ("TBX_E_FORMAT", "quant_info", 3456),
    "qi_reserved": ("TBX_E_PADDING", "quant.reserved", QI_R + 10),
    "qi_domain_2": ("TBX_E_FORMAT", "quant.domain", QI_R + 5),
    "qi_domain_activations": ("TBX_E_FORMAT", "quant.domain", QI_R + 5),
    "qi_method_mismatch": ("TBX_E_FORMAT", "quant.method", QI_R + 4),
    "qi_method_unknown": ("TBX_E_FORMAT", "quant.method", QI_R + 4),
    "qi_tensor_index_oob": ("TBX_E_RANGE", "quant.tensor_index", QI_R),
    "qi_for_plain_tensor": ("TBX_E_FORMAT", "quant.tensor_index", QI_R),
    "qi_block_size": ("TBX_E_FORMAT", "quant.block_size", QI_R + 6),
    "qi_super_size": ("TBX_E_FORMAT", "quant.super_size", QI_R + 5 * 24 + 8),
    "qi_nan_clip": None,                     # NaN clip accepted (NOTES)
    # record 1 repeats record 0's tensor: tensor 1 (data at 1088) has none, then the duplicate
    "qi_dup_record": ("TBX_E_FORMAT", "quant_info", 1088),
    "payload_nan_scale": None,               # NaN/Inf scales accepted, decoded as mantle does
    "payload_inf_scale": None,
    "payload_subnormal_scale": None,
    "payload_negative_scale": None,
    "payload_u6_top_bits": ("TBX_E_FORMAT", "tensor.sub_scale", 1408),
    "payload_u6_zero": None,
    "mi_version_2": ("TBX_E_BAD_VERSION", "modelinfo.version", 64),
    "mi_kv_count_huge": ("TBX_E_RANGE", "modelinfo.kv_count", 64 + 72),
    "mi_name_off_oob": ("TBX_E_RANGE", "modelinfo.model_name_off", 64 + 56),
    "mi_rope_nan": None,
}


def test_mutation_table_complete():
    names = {f["mutation"]["name"] for f in MUTATED}
    assert names == set(MUT), (names ^ set(MUT))


@pytest.mark.parametrize("fx", MUTATED, ids=[f["mutation"]["name"] for f in MUTATED])
def test_mutated_file_decision(tbx_asan, fx):
    path = MCF / fx["file"]
    want = MUT[fx["mutation"]["name"]]
    r, objs = validate_json(tbx_asan, path)
    if want is None:
        assert r.rc == 0, r.describe()
        # and the values still decode (NaN/Inf scales as mantle decodes them)
        for t in fx.get("tensors", []):
            if "f32" in t and t["f32"]:
                data = _raw(tbx_asan, "cat", str(path), bytes.fromhex(t["name_hex"]), "--as", "f32")
                assert data == (MCF / t["f32"]).read_bytes(), t["name"]
        return
    assert r.rc == 1, r.describe()
    first = objs[0]
    assert (first["code"], first["field"], first["offset"]) == want, objs


# ---------------------------------------------------------------------------------------
# Padding: bytes no section or directory entry covers are zero in every mantle file
# ---------------------------------------------------------------------------------------
def _gaps(blob: bytes):
    """[lo, hi) ranges between the header, the sections and the directory (mantle: zeros)."""
    _, _, _, hsize, n, dir_off, _, _ = struct.unpack_from("<4sHHIIQQQ", blob, 0)
    cov = [(dir_off, dir_off + 24 * n)]
    for i in range(n):
        _, _, off, size = struct.unpack_from("<IIQQ", blob, dir_off + 24 * i)
        cov.append((off, off + size))
    out, pos = [], hsize
    for lo, hi in sorted(cov):
        if lo > pos:
            out.append((pos, lo))
        pos = max(pos, hi)
    if pos < len(blob):
        out.append((pos, len(blob)))
    return out


def _flip_and_validate(binary, tmp_path, blob: bytes, at: int):
    """Writes blob with byte `at` set to 0x5A, validates it (must find a problem): (path, problems)."""
    bad = bytearray(blob)
    bad[at] = 0x5A
    p = tmp_path / f"flip{at}.mcf"
    p.write_bytes(bytes(bad))
    r, objs = validate_json(binary, p)
    assert r.rc == 1, r.describe()
    return p, objs


@pytest.mark.parametrize("name", ["hf_tiny_llama", "hf_sharded_qwen", "sections_all"])
def test_validate_reports_nonzero_padding(tbx_asan, tmp_path, name):
    blob = (MCF / "files" / f"{name}.mcf").read_bytes()
    gaps = _gaps(blob)
    assert gaps and all(not any(blob[lo:hi]) for lo, hi in gaps), "mantle pads with zeros"
    r, objs = validate_json(tbx_asan, MCF / "files" / f"{name}.mcf")
    assert r.rc == 0, r.describe()
    for lo, hi in (gaps[0], gaps[-1]):
        at = hi - 1
        p, objs = _flip_and_validate(tbx_asan, tmp_path, blob, at)
        assert (objs[0]["code"], objs[0]["field"], objs[0]["offset"]) == \
            ("TBX_E_PADDING", "section.padding", at), objs
        # a recoverable problem: the file still opens and reads
        assert info_json(tbx_asan, p)["format"] == "mcf"


def _tensor_data_gaps(blob: bytes):
    """[(lo, hi, field)]: TensorData bytes no payload covers ("tensor_data.padding") and the
    bytes between the 64-aligned regions of q/k payloads ("tensor.padding"), computed here
    from the layout in docs/formats/mcf.md (mantle's quant package), independent of tbx."""
    _, _, _, hsize, n, dir_off, _, _ = struct.unpack_from("<4sHHIIQQQ", blob, 0)
    sec = {}
    for i in range(n):
        typ, _, off, size = struct.unpack_from("<IIQQ", blob, dir_off + 24 * i)
        sec.setdefault(typ, (off, size))
    if 3 not in sec or 4 not in sec:
        return []
    ti, _ = sec[3]
    _, _, count, _, ent_off, dims_off, _, _ = struct.unpack_from("<IIIIQQQQ", blob, ti)
    spans = []
    for i in range(count):
        _, _, code, rank, dim_off, _, off, size = struct.unpack_from("<IIIIIIQQ", blob, ti + ent_off + 40 * i)
        dims = struct.unpack_from(f"<{rank}Q", blob, ti + dims_off + 8 * dim_off) if rank else ()
        spans.append((off, off + size, code, dims))
    a64 = lambda x: (x + 63) // 64 * 64
    out, (pos, td_size) = [], sec[4]
    end = pos + td_size
    seen = set()
    for lo, hi, code, dims in sorted(spans):
        if lo > pos:
            out.append((pos, lo, "tensor_data.padding"))
        if lo not in seen and code in (0x20, 0x21, 0x30, 0x31, 0x32, 0x33) and len(dims) == 2:
            bits = {0x20: 8, 0x21: 4, 0x30: 6, 0x31: 4, 0x32: 3, 0x33: 2}[code]
            rows, cols = dims
            bpr = (cols + 31) // 32
            tb, ts = rows * bpr, rows * ((bpr + 7) // 8)
            regions = [2 * ts, tb] if code >= 0x30 else [2 * tb]
            at = 0
            for size in regions:
                nxt = a64(at + size)
                out.append((lo + at + size, lo + nxt, "tensor.padding"))
                at = nxt
            assert at + rows * bpr * 4 * bits == hi - lo, (code, dims)
        seen.add(lo)
        pos = max(pos, hi)
    if end > pos:
        out.append((pos, end, "tensor_data.padding"))
    return [g for g in out if g[0] < g[1]]


@pytest.mark.parametrize("name", ["mixed_quant", "hf_tiny_llama_k4", "quant_edge_k3", "hf_tiny_llama_q8"])
def test_validate_reports_nonzero_tensor_data_padding(tbx_asan, tmp_path, name):
    blob = (MCF / "files" / f"{name}.mcf").read_bytes()
    gaps = _tensor_data_gaps(blob)
    fields = {f for _, _, f in gaps}
    assert "tensor.padding" in fields, gaps
    assert all(not any(blob[lo:hi]) for lo, hi, _ in gaps), "mantle pads TensorData with zeros"
    r, objs = validate_json(tbx_asan, MCF / "files" / f"{name}.mcf")
    assert r.rc == 0, r.describe()
    picks = [gaps[0], gaps[-1]] + [g for g in gaps if g[2] == "tensor.padding"][:2]
    if "tensor_data.padding" in fields:
        picks.append([g for g in gaps if g[2] == "tensor_data.padding"][-1])
    for lo, hi, field in picks:
        for at in (lo, hi - 1):
            p, objs = _flip_and_validate(tbx_asan, tmp_path, blob, at)
            assert [(o["code"], o["field"], o["offset"]) for o in objs] == \
                [("TBX_E_PADDING", field, at)], objs
            assert info_json(tbx_asan, p)["format"] == "mcf"


# ---------------------------------------------------------------------------------------
# A Hugging Face directory in, pack's file out: tbx convert hf/<model> out.mcf [flags]
# ---------------------------------------------------------------------------------------
PACK = [f for f in FIXTURES if f["kind"] == "pack"]
# pack fixtures tensorbox does not make byte for byte from the directory, and why
PACK_NOT_REPRODUCED = {
    "files/hf_tiny_llama_nores.mcf": "pack --no-resources: no tbx option keeps config.json for "
                                     "ModelInfo while leaving every HF section out",
    "files/hf_tiny_llama_int8.mcf": "pack --quant-embed: bare codes without scales (NOTES)",
    "files/hf_tiny_llama_int4.mcf": "pack --quant-embed: bare codes without scales (NOTES)",
}
# --cast: pack's own rounding (NaN payloads -> Inf in bf16, f32 subnormals -> 0 in f16, every
# f16 NaN 0x7e00) differs from tbx --cast (NaN kept NaN, subnormals rounded) on the tensor made
# to probe it; every other byte is pack's
CAST_PROBE = "model.cast_probe"


def test_pack_fixtures_listed():
    assert len(PACK) >= 11
    for k in PACK_NOT_REPRODUCED:
        assert any(f["file"] == k for f in PACK), k


@pytest.mark.parametrize("fx", [f for f in PACK if f["file"] not in PACK_NOT_REPRODUCED],
                         ids=[f["file"] for f in PACK if f["file"] not in PACK_NOT_REPRODUCED])
def test_hf_directory_gives_packs_bytes(tbx_asan, tmp_path, fx):
    src = MCF / fx["inputs"]["hf_dir"]
    out = tmp_path / "out.mcf"
    r = run(tbx_asan, "convert", src, out, *_tbx_args(fx))
    assert r.rc == 0, r.describe()
    a, b = (MCF / fx["file"]).read_bytes(), out.read_bytes()
    if "--cast" not in fx["inputs"]["pack_args"]:
        assert a == b, f"{fx['file']}: tbx convert {fx['inputs']['hf_dir']} differs from pack"
        return
    # everything but the cast probe's payload is identical
    probe = [t for t in fx["tensors"] if t["name"] == CAST_PROBE]
    assert len(probe) == 1 and len(a) == len(b)
    lo, hi = probe[0]["data_off"], probe[0]["data_off"] + probe[0]["data_size"]
    diff = [i for i in range(len(a)) if a[i] != b[i] and not lo <= i < hi]
    assert not diff, f"{fx['file']}: bytes differ at {diff[:8]}"


def test_hf_directory_tokenizer_config_as_pack(tbx, tmp_path):
    """pack's tokenizer_config.json: Go's json.Marshal of the decoded object with
    chat_template.jinja merged (README of the corpus); the bytes differ from the file's."""
    for fx in (f for f in PACK if f["inputs"]["pack_args"] == []):
        d = MCF / fx["inputs"]["hf_dir"]
        want = [s for s in fx["sections"] if s["name"] == "tokenizer_config.json"]
        assert len(want) == 1
        out = tmp_path / (d.name + ".mcf")
        assert run(tbx, "convert", d, out).rc == 0
        got = _raw(tbx, "cat", str(out), "--section", "tokenizer_config.json")
        assert hashlib.sha256(got).hexdigest() == want[0]["sha256"]
        assert got != (d / "tokenizer_config.json").read_bytes()
        if b"chat_template" not in (d / "tokenizer_config.json").read_bytes():
            assert b'"chat_template":' in got  # merged from chat_template.jinja
        # the model name is the directory's
        assert info_json(tbx, out)["metadata"]["mcf.model_name"] == d.name


def test_hf_directory_other_sections_need_drop(tbx, tmp_path):
    """A side file MCF has no section for (and that pack ignores) is a lossy step to ask for."""
    d = tmp_path / "tiny-llama"
    d.mkdir()
    for p in (MCF / "hf" / "tiny-llama").iterdir():
        (d / p.name).write_bytes(p.read_bytes())
    (d / "special_tokens_map.json").write_text('{"bos_token": "<s>"}')
    r = run(tbx, "convert", d, tmp_path / "a.mcf")
    assert r.rc == 1 and "special_tokens_map.json" in r.text and "--drop-sections" in r.text
    r = run(tbx, "convert", d, tmp_path / "b.mcf", "--drop-sections")
    assert r.rc == 0, r.describe()
    assert (tmp_path / "b.mcf").read_bytes() == (MCF / "files" / "hf_tiny_llama.mcf").read_bytes()


QUANT_OF_PACK = [f for f in FIXTURES if f["kind"] == "quantize" and
                 f["inputs"].get("input") == "files/hf_tiny_llama.mcf" and
                 "min_clip" not in f["inputs"]]


@pytest.mark.parametrize("fx", QUANT_OF_PACK, ids=[f["file"] for f in QUANT_OF_PACK])
def test_hf_directory_quantized_gives_pack_then_quantize(tbx, tmp_path, fx):
    """`mantle pack` then `mantle quantize --method M` of the directory, in one tbx convert."""
    assert len(QUANT_OF_PACK) == 6
    out = tmp_path / "out.mcf"
    r = run(tbx, "convert", MCF / "hf" / "tiny-llama", out, "--quant", fx["inputs"]["method"],
            "--quant-method", "mantle")
    assert r.rc == 0, r.describe()
    assert out.read_bytes() == (MCF / fx["file"]).read_bytes(), fx["file"]


# ---------------------------------------------------------------------------------------
# A payload aliasing part of another one (issue 19): mantle reads it; tbx reports it
# ---------------------------------------------------------------------------------------
def _entry(blob: bytes, name: str):
    """(entry offset, data_off, data_size) of a tensor, from the file's own TensorIndex."""
    count, dir_off = struct.unpack_from("<IQ", blob, 12)
    secs = [struct.unpack_from("<IIQQ", blob, dir_off + 24 * i) for i in range(count)]
    base = next(s[2] for s in secs if s[0] == 3)
    _v, _f, n, _nd, eo, _do, so, _ss = struct.unpack_from("<IIIIQQQQ", blob, base)
    for i in range(n):
        at = base + eo + 40 * i
        noff, nlen = struct.unpack_from("<II", blob, at)
        if blob[base + so + noff:base + so + noff + nlen] == name.encode():
            off, size = struct.unpack_from("<QQ", blob, at + 24)
            return at, off, size
    raise KeyError(name)


@pytest.mark.parametrize("src,moved,into,shift", [
    ("files/hf_tiny_llama.mcf", "dup.shape_b", "dup.shape_a", 16),              # f32, unaligned
    ("files/hf_tiny_llama_q8.mcf", "model.embed_tokens.weight", "lm_head.weight", 128),  # q8
])
def test_partial_alias_is_a_reported_problem(tbx_asan, tmp_path, src, moved, into, shift):
    blob = bytearray((MCF / src).read_bytes())
    at, _, size = _entry(blob, moved)
    _, base, _ = _entry(blob, into)
    struct.pack_into("<Q", blob, at + 24, base + shift)
    p = tmp_path / "alias.mcf"
    p.write_bytes(bytes(blob))
    info = info_json(tbx_asan, p)  # opens
    t = next(t for t in info["tensors"] if t["name"] == moved)
    assert t["offset"] == base + shift and t["nbytes"] == size
    if t["dtype"] == "f32":  # its values are the bytes it now points at
        assert _raw(tbx_asan, "cat", str(p), moved) == bytes(blob[base + shift:base + shift + size])
    else:
        _raw(tbx_asan, "cat", str(p), moved, "--as", "f32")
    r, objs = validate_json(tbx_asan, p)
    assert r.rc == 1
    got = [(o["code"], o["field"], o["offset"]) for o in objs if o["field"] == "tensor.data_off"]
    assert got == [("TBX_E_RANGE", "tensor.data_off", at + 24)], objs
    assert f'"{moved}"' in next(o["message"] for o in objs if o["field"] == "tensor.data_off")
    r = run(tbx_asan, "convert", p, tmp_path / "out.mcf")
    assert r.rc == 0, r.describe()
