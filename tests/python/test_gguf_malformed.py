"""Hostile GGUF files: every class must make `tbx validate` (and `tbx info`) exit 1 with a message
naming what is wrong -- never a signal, never a hang, never a sanitizer report. Each case is a
conftest.Case: `tbx validate --json` must report exactly its (code, field, byte offset) first.

The files are built byte by byte from the format description (u32/u64 little-endian fields,
strings as u64 length + bytes, arrays as u32 element type + u64 count + elements, tensor infos
as name, u32 n_dims, u64 ne[], u32 ggml type, u64 offset). Run with TBX_ASAN=/path/to/asan/tbx
to check them under AddressSanitizer + UBSan.
"""
from __future__ import annotations

import struct

import pytest

from conftest import Case, assert_clean_exit, check_case, need, run
from filebuild import GGUFBytes

np = need("numpy")
gguf = need("gguf")


B = GGUFBytes


def one_tensor(ne, typ=0, off=0, data=64, kvs=None, nkv=0):
    b = B().hdr(3, 1, nkv)
    if kvs:
        kvs(b)
    return b.ti("t", ne, typ, off).pad().zeros(data).done()


def sample() -> bytes:
    """A small valid file written by gguf-py."""
    import os
    import tempfile
    fd, path = tempfile.mkstemp(suffix=".gguf")
    os.close(fd)
    try:
        w = gguf.GGUFWriter(path, "test")
        w.add_uint32("x.u32", 5)
        w.add_array("x.arr", ["a", "bb"])
        w.add_tensor("a", np.arange(6, dtype=np.float32).reshape(2, 3))
        w.add_tensor("b", np.arange(5, dtype=np.int8))
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
        with open(path, "rb") as fp:
            return fp.read()
    finally:
        os.unlink(path)


# Offsets, from the format description (v2/v3 little-endian unless said otherwise):
HDR = 4 + 4 + 8 + 8          # magic, version, tensor_count, kv_count: the first entry starts here
KEY_K = HDR + 8 + 1          # after the key "k" (u64 length + 1 byte): the value type
VAL_K = KEY_K + 4            # the value of "k" (a string's length, an array's element type)
TI_T = HDR + 8 + 1           # tensor info "t": after its name, the u32 n_dims
NE_T = TI_T + 4              # ne[0] of "t"
TYPE_T1 = NE_T + 8           # the ggml type of a 1-D "t"
OFF_T1 = TYPE_T1 + 4         # the data offset of a 1-D "t"
TI_END_T1 = OFF_T1 + 8       # end of a 1-D tensor info "t" (or "a")
ALIGN_KEY = HDR + 8 + len("general.alignment")  # after the key: the value type, then the value
E, D, F, L, O, R, T, P, M, V = ("TBX_E_" + x for x in (
    "BAD_MAGIC", "DUPLICATE", "FORMAT", "LIMIT", "OVERFLOW", "RANGE", "TRUNCATED", "PADDING",
    "BAD_VERSION", "BAD_VERSION"))


def _sample_b_offset_field(s: bytes) -> int:
    """Byte offset of tensor "b"'s data offset field in the sample, found by gguf-py's reader
    (its tensor info: u64 name length, name, u32 n_dims, u64 ne[n_dims], u32 type, u64 offset)."""
    import os
    import tempfile
    fd, path = tempfile.mkstemp(suffix=".gguf")
    os.write(fd, s)
    os.close(fd)
    try:
        t = [t for t in gguf.GGUFReader(path).tensors if t.name == "b"][0]
        return t.field.offset + 8 + len("b") + 4 + 8 * len(t.shape) + 4
    finally:
        os.unlink(path)


def cases() -> list[Case]:
    """Each case: the bytes and the exact first problem `tbx validate` must report."""
    s = sample()
    deep = B().hdr(3, 0, 1).s("deep").u32(9)
    for _ in range(1000):
        deep.u32(9).u64(1)
    deep = deep.u32(0).u64(0).done()
    deep_val = HDR + 8 + len("deep") + 4  # the outer array value; each level is 12 bytes deeper
    kv1 = lambda b: b.kv_u32("general.alignment", 0)  # noqa: E731
    out = [
        Case("bad_magic", b"GGUX" + s[4:], E, "magic", 0, ("GGUX",)),
        Case("version_0", s[:4] + struct.pack("<I", 0) + s[8:], M, "version", 4, ("version 0",)),
        Case("version_4", s[:4] + struct.pack("<I", 4) + s[8:], M, "version", 4, ("version 4",)),
        Case("version_be_9", s[:4] + struct.pack(">I", 9) + s[8:], V, "version", 4,
             ("version 9", "big-endian")),
        Case("too_short", b"GGUF\x03\x00", T, "version", 4, ("version",)),
        # the tensor infos alone cannot fit: tensor_count; the metadata entries alone: kv_count
        Case("tensor_count_2^40", B().hdr(3, 1 << 40, 0).zeros(64).done(), T, "tensor_count", 8,
             ("1099511627776 tensor infos",)),
        Case("kv_count_max", B().hdr(3, 0, (1 << 64) - 1).zeros(64).done(), T, "kv_count", 16,
             ("metadata entries",)),
        Case("key_length_2^40", B().hdr(3, 0, 1).u64(1 << 40).zeros(64).done(), T,
             "metadata[0].key", HDR, ("key",)),
        Case("string_length_max",
             B().hdr(3, 0, 1).s("k").u32(8).u64((1 << 64) - 1).zeros(64).done(), T,
             'metadata "k"', VAL_K, ("string of 18446744073709551615 bytes",)),
        Case("array_2^40_u8", B().hdr(3, 0, 1).s("k").u32(9).u32(0).u64(1 << 40).zeros(1024).done(),
             T, 'metadata "k"', VAL_K, ("array of 1099511627776 u8",)),
        Case("array_count_wraps", B().hdr(3, 0, 1).s("k").u32(9).u32(12).u64(1 << 62).zeros(64).done(),
             T, 'metadata "k"', VAL_K, ("array",)),
        Case("nested_wide_bomb", B().hdr(3, 0, 1).s("w").u32(9).u32(9).u64(1 << 40).zeros(64).done(),
             T, 'metadata "w"', VAL_K, ("array elements",)),
        # max_depth = 32 (tbx_limits default): the array 32 levels below the outer one is refused
        Case("nested_deep_bomb", deep, L, 'metadata "deep"', deep_val + 32 * 12, ("max_depth",)),
        Case("value_type_13", B().hdr(3, 0, 1).s("k").u32(13).zeros(8).done(), F, 'metadata "k"',
             KEY_K, ("value type 13",)),
        Case("elem_type_99", B().hdr(3, 0, 1).s("k").u32(9).u32(99).u64(1).zeros(8).done(), F,
             'metadata "k"', VAL_K, ("element type 99",)),
        Case("bool_2", B().hdr(3, 0, 1).s("flag").u32(7).u8(2).done(), F, 'metadata "flag"',
             HDR + 8 + 4 + 4, ("bool", "got 2")),
        Case("empty_key", B().hdr(3, 0, 1).kv_u32("", 1).done(), F, "metadata[0].key", HDR,
             ("empty key",)),
        Case("duplicate_key", B().hdr(3, 0, 2).kv_u32("k", 1).kv_u32("k", 2).done(), D,
             "metadata.key", VAL_K + 4, ("duplicate metadata key",)),
        Case("duplicate_tensor", B().hdr(3, 2, 0).ti("t", [8]).ti("t", [8], 0, 32).pad().zeros(64).done(),
             D, "tensor.name", TI_END_T1, ("duplicate tensor name",)),
        Case("empty_tensor_name", B().hdr(3, 1, 0).ti("", [8]).pad().zeros(32).done(), F,
             "tensor[0].name", HDR, ("empty name",)),
        Case("n_dims_2^32-1", B().hdr(3, 1, 0).s("t").u32(0xFFFFFFFF).zeros(64).done(), T,
             "tensor[0].n_dims", TI_T, ("n_dims",)),
        Case("n_dims_100", one_tensor([1] * 100), L, "tensor[0].n_dims", TI_T, ("n_dims = 100",)),
        Case("ne_overflow", one_tensor([1 << 40, 1 << 40]), O, "tensor[0].ne", NE_T + 8,
             ("ne[1] = 1099511627776", "overflow")),
        Case("size_wraps_ggml", one_tensor([(1 << 62) - 1]), L, "tensor[0].ne", NE_T,
             ("max_tensor_bytes",)),
        Case("size_overflows", one_tensor([1 << 62]), O, "tensor[0].ne", NE_T, ("overflows",)),
        Case("block_size", one_tensor([33], typ=2), F, "tensor[0].ne", NE_T, ("block size 32",)),
        Case("unknown_type_43", one_tensor([1], typ=43), F, "tensor[0].type", TYPE_T1,
             ("type id 43",)),
        *[Case(f"removed_type_{t}", one_tensor([32], typ=t), F, "tensor[0].type", TYPE_T1,
               (f"type id {t}", "removed")) for t in (4, 5, 31, 32, 33, 36, 37, 38)],
        Case("unaligned_offset", one_tensor([2], off=4), R, "tensor[0].offset", OFF_T1,
             ("not a multiple of the alignment",)),
        Case("offset_past_end", one_tensor([2], off=1 << 20), T, "tensor[0].offset", OFF_T1,
             ("past the end of the file",)),
        Case("offset_wraps", one_tensor([16], off=(1 << 64) - 32), O, "tensor[0].offset", OFF_T1,
             ("overflows",)),
        Case("overlap", B().hdr(3, 2, 0).ti("a", [16]).ti("b", [16], 0, 32).pad().zeros(128).done(),
             R, "tensor[1].offset", TI_END_T1 + (OFF_T1 - HDR), ("overlaps",)),
        Case("alignment_0", one_tensor([8], nkv=1, kvs=kv1), F, 'metadata "general.alignment"',
             ALIGN_KEY + 4, ("general.alignment = 0",)),
        Case("alignment_3",
             one_tensor([8], nkv=1, kvs=lambda b: b.kv_u32("general.alignment", 3)), F,
             'metadata "general.alignment"', ALIGN_KEY + 4, ("general.alignment = 3",)),
        # the value type is what is wrong
        Case("alignment_u64",
             one_tensor([8], nkv=1, kvs=lambda b: b.s("general.alignment").u32(10).u64(32)), F,
             'metadata "general.alignment"', ALIGN_KEY, ("must be a u32",)),
        # the file ends where the tensor infos end, before the (aligned) data section
        Case("data_start_past_end", B().hdr(3, 1, 0).ti("t", [0]).done(), T, "data", TI_END_T1,
             ("data section starts",)),
        Case("data_truncated", s[:-40], T, "tensor[1].offset", _sample_b_offset_field(s),
             ("past the end of the file",)),
        # the 8 bytes after tensor "a" (24 bytes, padded to 32) are padding; byte 4 of them is 7
        Case("padding_nonzero", s[:len(s) - 64 + 28] + b"\x07" + s[len(s) - 64 + 29:], P,
             "padding", len(s) - 64 + 28, ("padding", "0x07")),
        # v1: u32 lengths and counts (header 16 bytes, key "a" 4 + 1)
        Case("v1_truncated_array",
             B(v1=True).hdr(1, 0, 1).s("a").u32(9).u32(0).u32(1 << 30).done(), T, 'metadata "a"',
             16 + 4 + 1 + 4, ("array",)),
        Case("be_huge_string", B(be=True).hdr(3, 0, 1).s("k").u32(8).u64(1 << 50).zeros(8).done(),
             T, 'metadata "k"', VAL_K, ("string",)),
    ]
    return out


CASE_LIST = cases()
CASES = {c.name: c for c in CASE_LIST}
assert len(CASES) == len(CASE_LIST)


@pytest.mark.parametrize("case", CASE_LIST, ids=lambda c: c.name)
def test_validate_rejects(tbx_asan, tmp_path, case):
    check_case(tbx_asan, tmp_path, case, ".gguf")


def _check_rejected(binary, path, words, *args):
    r = run(binary, *args, path)
    assert_clean_exit(r)
    assert r.rc == 1, "expected exit 1\n" + r.describe()
    text = r.text.lower()
    assert str(path).lower() in text or "gguf" in text or len(text.strip()) > 0, r.describe()
    for w in words:
        assert w.lower() in text, f"message lacks {w!r}\n" + r.describe()
    return r


@pytest.mark.parametrize("case", [c for c in CASE_LIST if c.name != "padding_nonzero"],
                         ids=lambda c: c.name)
def test_info_rejects(tbx_asan, tmp_path, case):
    p = tmp_path / f"{case.name}.gguf"
    p.write_bytes(case.data)
    _check_rejected(tbx_asan, p, case.words, "info")


def test_padding_is_checked_only_by_validate(tbx_asan, tmp_path):
    blob = CASES["padding_nonzero"].data
    p = tmp_path / "pad.gguf"
    p.write_bytes(blob)
    r = run(tbx_asan, "info", p, "--json")
    assert_clean_exit(r)
    assert r.rc == 0, r.describe()


def test_sample_is_valid(tbx_asan, tmp_path):
    p = tmp_path / "ok.gguf"
    p.write_bytes(sample())
    r = run(tbx_asan, "validate", p)
    assert_clean_exit(r)
    assert r.rc == 0, r.describe()


def test_gguf_py_rejects_what_it_can_parse_badly():
    """Sanity check of the builders: gguf-py also refuses a few of the cases."""
    import tempfile
    import os
    for case in ("bad_magic", "version_4", "duplicate_key", "alignment_3", "alignment_u64"):
        blob = CASES[case].data
        fd, path = tempfile.mkstemp(suffix=".gguf")
        os.write(fd, blob)
        os.close(fd)
        try:
            with pytest.raises(Exception):
                gguf.GGUFReader(path)
        finally:
            os.unlink(path)


def test_truncation_at_every_offset(tbx_asan, tmp_path):
    s = sample()
    last_end = len(s) - (32 - 5)  # tensor "b" (5 bytes) is last, padded to 32
    p = tmp_path / "cut.gguf"
    for cut in range(last_end):
        p.write_bytes(s[:cut])
        r = run(tbx_asan, "validate", p)
        assert_clean_exit(r)
        assert r.rc == 1, f"cut at {cut}\n" + r.describe()
        assert r.text.strip(), f"cut at {cut}: no message\n" + r.describe()
    # trailing padding after the last tensor may go: the file is still complete
    for cut in range(last_end, len(s) + 1):
        p.write_bytes(s[:cut])
        r = run(tbx_asan, "validate", p)
        assert_clean_exit(r)
        assert r.rc == 0, f"cut at {cut}\n" + r.describe()


def test_single_byte_corruption_never_crashes(tbx_asan, tmp_path):
    s = bytearray(sample())
    p = tmp_path / "flip.gguf"
    header_end = len(s) - 64  # the data start: two tensors, each padded to 32 bytes
    for i in range(header_end):
        for v in (0xFF, s[i] ^ 0x80):
            t = bytearray(s)
            t[i] = v
            p.write_bytes(bytes(t))
            r = run(tbx_asan, "validate", p)
            assert_clean_exit(r)
            assert r.rc in (0, 1), f"byte {i} = {v:#x}\n" + r.describe()


def test_more_than_4_dims_reported_by_validate(tbx_asan, tmp_path):
    """The GGUF specification caps n_dimensions at 4 ("currently at most 4") and ggml refuses
    more; gguf-py writes and reads such a file. tensorbox opens it (info exits 0, as gguf-py
    reads it) but `tbx validate` reports the field and the offset of that n_dims."""
    p = tmp_path / "five.gguf"
    w = gguf.GGUFWriter(str(p), "test")
    w.add_tensor("ok", np.zeros((2, 2, 2, 2), dtype=np.float32))
    w.add_tensor("five", np.zeros((1, 2, 1, 2, 3), dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    reader = gguf.GGUFReader(str(p))
    five = [t for t in reader.tensors if t.name == "five"][0]
    assert len(five.shape) == 5  # the peer reads it
    n_dims_off = five.field.offset + 8 + len("five")  # u64 name length, name, then u32 n_dims
    blob = p.read_bytes()
    assert struct.unpack_from("<I", blob, n_dims_off)[0] == 5
    r = run(tbx_asan, "info", p)
    assert_clean_exit(r)
    assert r.rc == 0, r.describe()
    r = run(tbx_asan, "validate", p)
    assert_clean_exit(r)
    assert r.rc == 1, r.describe()
    text = r.text.lower()
    assert "tensor[1].n_dims" in text and "n_dims = 5" in text, r.describe()
    assert f"at byte {n_dims_off}" in text, r.describe()
    assert "tensor[0]" not in text, r.describe()
