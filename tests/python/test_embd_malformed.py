"""Hostile EMBD files (spec and legacy layouts): every case is built by tests/python/embdfile.py
(an independent writer of the layout), mutated at a known position, its CRC-32s recomputed when
the case is about something else, and checked with `tbx validate --json`: the FIRST problem must
be exactly (code, field, byte offset), worked out from the positions of the builder. Also run
against the sanitizer build (TBX_ASAN) when it is set."""
import struct

import pytest

import embdfile as E
from conftest import Case, check_case, validate_json


def _mut(fn, fix=True):
    b, p = E.sample()
    b = bytearray(b)
    fn(b, p)
    return E.fix_crcs(bytes(b)) if fix else bytes(b)


def _pos():
    return E.sample()[1]


P = _pos()
SIZE = P["footer"] + 16
SPECIAL = P["vo"] + 12 + (P["vocab_len"] - 12 - 20)  # the special-token block


def _set(fmt, at, v):
    return lambda b, p: struct.pack_into(fmt, b, at, v)


def _no_key(key):
    b, p = E.sample()
    # rebuild without one required key
    import numpy as np  # noqa: F401  (embdfile.sample needs it)
    meta = [(k, v) for k, v in [("model_name", "tiny"), ("model_version", "1.0.0"),
                                ("embedding_dim", "4"), ("vocab_size", "8"), ("num_layers", "1"),
                                ("num_attention_heads", "2"), ("hidden_size", "4"),
                                ("intermediate_size", "8"), ("max_position_emb", "16"),
                                ("created_at", "2025-01-16T12:00:00Z")] if k != key]
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    return E.build(meta, (tokens, [0, 1, 2, 3, 4]),
                   [("w", "f32", (2,), struct.pack("<2f", 1, 2))])[0]


def _dup_tensor():
    f = struct.pack("<2f", 1, 2)
    b, p = E.build([], None, [("w", "f32", (2,), f), ("w", "f32", (2,), f)])
    return b, p["desc"][1]


def _dup_meta():
    b, p = E.build([("k", "a"), ("k", "b")], None, [])
    return b, p["meta_entries"][1]


DUP_T, DUP_T_AT = _dup_tensor()
DUP_M, DUP_M_AT = _dup_meta()

SPEC_CASES = [
    # header
    Case("bad_version", _mut(_set("<H", 4, 2)), "TBX_E_BAD_VERSION", "header.version_major", 4),
    Case("header_crc", _mut(lambda b, p: b.__setitem__(56, b[56] ^ 1), fix=False),
         "TBX_E_CHECKSUM", "header.header_checksum", 56, ("[0, 56)",)),
    Case("compressed", _mut(_set("<I", 8, 0xF)), "TBX_E_UNSUPPORTED", "header.flags", 8),
    Case("reserved_flags", _mut(_set("<I", 8, 0x17)), "TBX_E_FORMAT", "header.flags", 8),
    Case("header_reserved", _mut(_set("<I", 60, 5)), "TBX_E_FORMAT", "header.reserved", 60),
    Case("trailing_bytes", E.fix_crcs(E.sample()[0]) + b"\0", "TBX_E_FORMAT",
         "header.total_file_size", 48, ("trailing",)),
    Case("end_magic", _mut(lambda b, p: b.__setitem__(SIZE - 8, ord("X"))), "TBX_E_BAD_MAGIC",
         "footer.magic_end", SIZE - 8),
    Case("footer_reserved", _mut(_set("<I", SIZE - 4, 1)), "TBX_E_FORMAT", "footer.reserved",
         SIZE - 4),
    Case("crc_when_disabled", E.fix_crcs(E.sample(checksum=False)[0])[:60] +
         E.sample(checksum=False)[0][60:], "TBX_E_FORMAT", "header.header_checksum", 56),
    # checksums of the data and of the whole file
    Case("data_crc", _mut(lambda b, p: b.__setitem__(p["tdo"], b[p["tdo"]] ^ 0x10), fix=False),
         "TBX_E_CHECKSUM", "footer.data_checksum", SIZE - 16, (f"[{P['tdo']}, {P['footer']})",)),
    Case("file_crc", _mut(lambda b, p: b.__setitem__(p["meta_entries"][0] + 4 + 10, ord("T")),
                          fix=False),
         "TBX_E_CHECKSUM", "footer.file_checksum", SIZE - 12, (f"[0, {P['footer']})",)),
    # sections, sizes and offsets
    Case("meta_size_past_eof", _mut(_set("<I", 16, 0x7FFFFFF0)), "TBX_E_RANGE",
         "header.metadata_size", 16),
    Case("meta_offset_unaligned", _mut(_set("<I", 12, 65)), "TBX_E_RANGE",
         "header.metadata_offset", 12),
    Case("vocab_offset_past_eof", _mut(_set("<I", 20, 0xFFFFFFF8)), "TBX_E_RANGE",
         "header.vocab_offset", 20),
    Case("vocab_overlaps_meta", _mut(_set("<I", 20, 64)), "TBX_E_RANGE", "header.vocab_offset",
         20, ("overlap",)),
    Case("index_count_limit", _mut(_set("<I", 32, 0xFFFFFFFF)), "TBX_E_LIMIT",
         "header.tensor_index_count", 32),
    Case("index_count_past_eof", _mut(_set("<I", 32, 100000)), "TBX_E_RANGE",
         "header.tensor_index_count", 32),
    Case("data_size_overflow", _mut(_set("<Q", 40, 2**64 - 1)), "TBX_E_RANGE",
         "header.tensor_data_size", 40),
    Case("data_offset_unaligned", _mut(_set("<I", 36, P["tdo"] + 8)), "TBX_E_RANGE",
         "header.tensor_data_offset", 36),
    # metadata
    Case("meta_count_huge", _mut(_set("<I", P["mo"], 0xFFFFFF)), "TBX_E_TRUNCATED",
         "metadata.entry_count", P["mo"]),
    Case("meta_total_size", _mut(_set("<I", P["mo"] + 4, 7)), "TBX_E_FORMAT",
         "metadata.total_size", P["mo"] + 4),
    Case("meta_bad_utf8", _mut(lambda b, p: b.__setitem__(p["meta_entries"][0] + 4 + 10, 0xFF)),
         "TBX_E_FORMAT", "metadata.value", P["meta_entries"][0] + 4 + 10),
    Case("meta_duplicate", DUP_M, "TBX_E_DUPLICATE", "metadata.key", DUP_M_AT),
    Case("meta_missing_key", _no_key("created_at"), "TBX_E_FORMAT", "metadata", 64,
         ("created_at",)),
    # vocabulary
    Case("vocab_count_huge", _mut(_set("<I", P["vo"], 0xFFFFFF)), "TBX_E_TRUNCATED",
         "vocab.token_count", P["vo"]),
    Case("vocab_token_past_section", _mut(_set("<H", P["vo"] + 12, 0x7FFF)), "TBX_E_RANGE",
         "vocab.token_length", P["vo"] + 12),
    # token 0 claims the bytes of the later tokens' length fields (a fuzzer found the overflow
    # this caused: tests/crashers/embd/)
    Case("vocab_token_eats_later_lengths",
         _mut(_set("<H", P["vo"] + 12, P["vocab_len"] - 12 - 20 - 2)), "TBX_E_RANGE",
         "vocab.token_length", P["vo"] + 12, ("later tokens",)),
    Case("vocab_special_offset", _mut(_set("<I", P["vo"] + 8, 12)), "TBX_E_FORMAT",
         "vocab.special_tokens", P["vo"] + 8),
    Case("special_id_out_of_range", _mut(_set("<I", SPECIAL + 4, 8)), "TBX_E_RANGE",
         "vocab.unk_id", SPECIAL + 4),
    # tensor index
    Case("hash_mismatch", _mut(lambda b, p: b.__setitem__(p["desc"][0], b[p["desc"][0]] ^ 1)),
         "TBX_E_CHECKSUM", "tensor.name_hash", P["desc"][0]),
    Case("dtype_code", _mut(lambda b, p: b.__setitem__(p["desc"][0] + 4, 9)), "TBX_E_FORMAT",
         "tensor.dtype", P["desc"][0] + 4),
    Case("ndim_zero", _mut(lambda b, p: b.__setitem__(p["desc"][0] + 5, 0)), "TBX_E_FORMAT",
         "tensor.ndim", P["desc"][0] + 5),
    Case("shape_past_ndim", _mut(_set("<I", P["desc"][1] + 12, 3)), "TBX_E_FORMAT",
         "tensor.shape", P["desc"][1] + 12),
    Case("shape_overflow", _mut(lambda b, p: (b.__setitem__(p["desc"][0] + 5, 4),
                                              struct.pack_into("<4I", b, p["desc"][0] + 8,
                                                               *[0xFFFFFFFF] * 4))),
         "TBX_E_OVERFLOW", "tensor.shape", P["desc"][0] + 8),
    Case("tensor_past_data", _mut(_set("<Q", P["desc"][8] + 24, 2**64 - 64)), "TBX_E_RANGE",
         "tensor.data_offset", P["desc"][8] + 24),
    Case("names_past_data", _mut(_set("<H", P["desc"][0] + 6, 0xFFFF)), "TBX_E_RANGE",
         "tensor.name_length", P["desc"][0] + 6),
    Case("tensor_duplicate", DUP_T, "TBX_E_DUPLICATE", "tensor.name", DUP_T_AT),
    Case("unaligned_tensor", _mut(_set("<Q", P["desc"][1] + 24, P["offs"][1] + 2)),
         "TBX_E_RANGE", "tensor.data_offset", P["desc"][1] + 24, ("multiple of 64",)),
    Case("overlapping_tensors", _mut(_set("<Q", P["desc"][1] + 24, 64)), "TBX_E_RANGE",
         "tensor.data_offset", P["desc"][1] + 24, ("overlaps",)),
    # padding
    Case("padding_after_meta", _mut(lambda b, p: b.__setitem__(p["mo"] + p["meta_len"], 1)),
         "TBX_E_PADDING", "padding", P["mo"] + P["meta_len"]),
    Case("padding_between_tensors",
         _mut(lambda b, p: b.__setitem__(p["tdo"] + p["offs"][1] + 6, 1)),
         "TBX_E_PADDING", "padding", P["tdo"] + P["offs"][1] + 6),
]


@pytest.mark.parametrize("case", SPEC_CASES, ids=lambda c: c.name)
def test_spec_hostile(tbx_asan, tmp_path, case):
    check_case(tbx_asan, tmp_path, case, ".weights")


def test_each_checksum_reported_with_range(tbx, tmp_path):
    """A flipped data byte breaks the data and the file checksum: both are reported, each with
    its byte range."""
    b = bytearray(E.sample()[0])
    b[P["tdo"] + 1] ^= 0x40
    path = tmp_path / "two.weights"
    path.write_bytes(bytes(b))
    r, objs = validate_json(tbx, path)
    assert r.rc == 1
    got = [(o["code"], o["field"], o["offset"]) for o in objs if "code" in o]
    assert got == [("TBX_E_CHECKSUM", "footer.data_checksum", SIZE - 16),
                   ("TBX_E_CHECKSUM", "footer.file_checksum", SIZE - 12)], r.describe()


def test_truncation_every_offset(tbx, tmp_path):
    """Every proper prefix of a valid file is refused; from 64 bytes on (the header whole, so its
    CRC still identifies the spec layout) with the exact field."""
    b = E.sample()[0]
    for n in range(len(b)):
        path = tmp_path / "t.weights"
        path.write_bytes(b[:n])
        r, objs = validate_json(tbx, path)
        assert r.rc == 1, f"prefix {n}\n" + r.describe()
        p = objs[0]
        if n >= 80:
            assert (p["code"], p["field"], p["offset"]) == \
                ("TBX_E_TRUNCATED", "header.total_file_size", 48), f"prefix {n}: {p}"
        elif n >= 64:
            assert (p["code"], p["field"], p["offset"]) == ("TBX_E_TRUNCATED", "header", 0), \
                f"prefix {n}: {p}"
        else:
            assert p["code"] in ("TBX_E_TRUNCATED", "TBX_E_BAD_MAGIC", "TBX_E_FORMAT"), \
                f"prefix {n}: {p}"


# ---------------------------------------------------------------------------------------------
# the legacy layout
# ---------------------------------------------------------------------------------------------
F4 = struct.pack("<4f", 1, 2, 3, 4)
LEG = E.legacy([("a", (2, 2), F4)], ["[PAD]", "[UNK]"])
# positions: 0 magic, 4 version, 8 count, 12 name_len, 16 name, 17 ndim, 21 dims, 29 data,
# 45 vocab_count, 49 token 0 length
LEGACY_CASES = [
    Case("legacy_ndim", LEG[:17] + struct.pack("<I", 5) + LEG[21:], "TBX_E_FORMAT", "tensor.ndim",
         17),
    Case("legacy_count_huge", LEG[:8] + struct.pack("<I", 0xFFFFFF) + LEG[12:], "TBX_E_LIMIT",
         "num_tensors", 8),
    Case("legacy_count_past_eof", LEG[:8] + struct.pack("<I", 50) + LEG[12:], "TBX_E_TRUNCATED",
         "num_tensors", 8),
    Case("legacy_dims_past_eof", LEG[:21] + struct.pack("<I", 1000) + LEG[25:], "TBX_E_TRUNCATED",
         "tensor.data", 29),
    Case("legacy_token_past_eof", LEG[:49] + struct.pack("<I", 99) + LEG[53:], "TBX_E_RANGE",
         "vocab.token_length", 49),
    Case("legacy_trailing", LEG + b"\0", "TBX_E_FORMAT", "vocab", len(LEG), ("trailing",)),
    Case("legacy_vocab_count", LEG[:45] + struct.pack("<I", 1000) + LEG[49:], "TBX_E_TRUNCATED",
         "vocab_count", 45),
]


@pytest.mark.parametrize("case", LEGACY_CASES, ids=lambda c: c.name)
def test_legacy_hostile(tbx_asan, tmp_path, case):
    check_case(tbx_asan, tmp_path, case, ".bin")


def test_legacy_truncation_every_offset(tbx, tmp_path):
    for n in range(12, len(LEG)):
        path = tmp_path / "t.bin"
        path.write_bytes(LEG[:n])
        r, objs = validate_json(tbx, path)
        assert r.rc == 1, f"prefix {n}\n" + r.describe()
        assert objs[0]["code"] in ("TBX_E_TRUNCATED", "TBX_E_RANGE"), f"prefix {n}: {objs[0]}"
