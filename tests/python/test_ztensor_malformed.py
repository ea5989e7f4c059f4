"""Hostile and malformed zTensor files through the CLI.

Every file is built here byte by byte: manifests with the CBOR encoder of filebuild.py
(RFC 8949), zstd frames of raw and RLE blocks assembled from RFC 8878 (below).
For each one the commands that must refuse it exit 1 (not 0, not the usage code 2, not a
signal), `tbx validate --json` reports first exactly the case's (status code, field, byte
offset) -- a conftest.Case, the offsets worked out from the bytes built -- and no sanitizer
report appears when TBX_ASAN is set.
"""
from __future__ import annotations

import struct
import time

import pytest

from conftest import Case, assert_clean_exit, check_case, run, validate_json
from filebuild import Raw, cbor, head

MAGIC = b"ZTEN1000"


def zt_file(area: bytes, manifest: bytes, size_field: int | None = None,
            footer: bytes = MAGIC, header: bytes = MAGIC) -> bytes:
    """header magic + area (at offset 8; manifest offsets are absolute) + manifest + size +
    footer magic."""
    n = len(manifest) if size_field is None else size_field
    return header + area + manifest + struct.pack("<Q", n) + footer


def comp(dtype="f32", offset=64, length=16, **extra):
    d = {"dtype": dtype, "offset": offset, "length": length}
    d.update(extra)
    return d


def dense(shape=(4,), **c):
    return {"shape": list(shape), "format": "dense", "components": {"data": comp(**c)}}


def manifest(objects, attributes=None, version="1.1.0"):
    m = {"version": version}
    if attributes is not None:
        m["attributes"] = attributes
    m["objects"] = objects
    return cbor(m)


DATA = struct.pack("<4f", 1.0, -2.0, 0.5, 3.0)
AREA = bytes(56) + DATA  # the base tensor "x" at offset 64


def valid_file() -> bytes:
    return zt_file(AREA, manifest({"x": dense()}, attributes={"note": "sample"}))


# ------------------------------------------------------------------------------------------
# zstd frames built by hand (RFC 8878): raw blocks and RLE blocks only
# ------------------------------------------------------------------------------------------
def zstd_frame(payload: bytes | None = None, rle: tuple[int, int] | None = None,
               content_size: int | None = None) -> bytes:
    """One frame: single segment when the content size is given, else a window descriptor.
    `payload` goes in raw blocks (<= 128 KiB each); `rle` = (byte, count) in RLE blocks."""
    if content_size is not None:
        fhd = 0x20 | 0xC0  # single segment, 8-byte content size
        out = b"\x28\xb5\x2f\xfd" + bytes([fhd]) + struct.pack("<Q", content_size)
    else:
        out = b"\x28\xb5\x2f\xfd" + bytes([0x00, 0x58])  # window 2 MiB, no content size
    blocks = []
    if payload is not None:
        for i in range(0, max(len(payload), 1), 1 << 17):
            blocks.append((0, payload[i:i + (1 << 17)], len(payload[i:i + (1 << 17)])))
    if rle is not None:
        b, count = rle
        while count > 0:
            n = min(count, 1 << 17)
            blocks.append((1, bytes([b]), n))
            count -= n
    for k, (typ, body, size) in enumerate(blocks):
        last = 1 if k == len(blocks) - 1 else 0
        hdr = last | (typ << 1) | (size << 3)
        out += hdr.to_bytes(3, "little") + body
    return out


def zstd_file(frame: bytes, nelems: int = 4) -> bytes:
    area = bytes(56) + frame
    return zt_file(area, manifest({"x": dense(shape=(nelems,), length=len(frame), encoding="zstd")}))


# ------------------------------------------------------------------------------------------
# Cases: conftest.Case (the exact first problem of `tbx validate --json`) + the commands that
# must refuse the file. Offsets (docs/formats/ztensor.md, "Errors"): the footer fields from the
# end of the file; in the manifest (which starts right after the area, at 8 + len(area)) the
# CBOR item concerned -- a key's value, the object's map for a whole-object problem, the
# component's map for its placement and size, the repeated key of a duplicate; the component's
# data for what is found when it is read.
# ------------------------------------------------------------------------------------------
OPEN = ("info", "validate", "cat")   # refused at open
READ = ("validate", "cat")            # opens, refused when the data is read
VALIDATE = ("validate",)              # only the full check finds it
E, V, C, D, F, L, O, R, T, U, P = ("TBX_E_" + x for x in (
    "BAD_MAGIC", "BAD_VERSION", "CHECKSUM", "DUPLICATE", "FORMAT", "LIMIT", "OVERFLOW", "RANGE",
    "TRUNCATED", "UNSUPPORTED", "PADDING"))


def mstart(blob: bytes) -> int:
    """Where the manifest starts: before its size field and the footer magic."""
    (n,) = struct.unpack_from("<Q", blob, len(blob) - 16)
    return len(blob) - 16 - n


def item(blob: bytes, needle: bytes, nth: int = 0) -> int:
    """Byte offset of the nth occurrence of `needle` in the manifest."""
    i = mstart(blob) - 1
    for _ in range(nth + 1):
        i = blob.index(needle, i + 1)
    return i


def value(blob: bytes, key: str, nth: int = 0) -> int:
    """The item after the nth text key `key` in the manifest: its value."""
    return item(blob, cbor(key), nth) + len(cbor(key))


COMP = cbor(comp())  # the default component map, as built


def cases():
    out = []

    def add(name, blob, must_fail, code, field, where):
        out.append((Case(name, blob, code, field, where(blob) if callable(where) else where),
                    must_fail))

    good = manifest({"x": dense()})
    footer_size = lambda b: len(b) - 16  # noqa: E731  the manifest size field
    obj = lambda name: (lambda b: value(b, name))  # noqa: E731  an object's map
    # container
    add("bad_header_magic", zt_file(AREA, good, header=b"ZTEN2000"), OPEN, E, "magic", 0)
    add("bad_footer_magic", zt_file(AREA, good, footer=b"ZTEN100X"), OPEN, E, "footer.magic",
        lambda b: len(b) - 8)
    add("legacy_v01_magic", zt_file(AREA, good, header=b"ZTEN0001"), OPEN, V, "magic", 0)
    add("v2_magic", zt_file(AREA, good, header=b"\x89ZT2\r\n\x1a\n"), OPEN, V, "magic", 0)
    add("short_file", MAGIC + b"\0\0\0\0" + MAGIC, OPEN, T, "footer", 0)
    add("only_magics", MAGIC + struct.pack("<Q", 0) + MAGIC, OPEN, F, "footer.manifest_size", 8)
    add("manifest_size_past_header", zt_file(AREA, good, size_field=len(AREA) + len(good) + 9),
        OPEN, T, "footer.manifest_size", footer_size)
    add("manifest_size_u64_max", zt_file(AREA, good, size_field=2**64 - 1), OPEN, L,
        "footer.manifest_size", footer_size)
    add("manifest_size_over_1GiB", zt_file(AREA, good, size_field=2**30 + 1), OPEN, L,
        "footer.manifest_size", footer_size)
    add("manifest_size_zero", zt_file(AREA, good, size_field=0), OPEN, F, "footer.manifest_size",
        footer_size)
    # the manifest then starts one byte late, at the text "version": not a map
    add("manifest_size_short_by_one", zt_file(AREA, good, size_field=len(good) - 1), OPEN, F,
        "manifest", 8 + len(AREA) + 1)
    # CBOR structure
    add("manifest_not_a_map", zt_file(AREA, cbor([1, 2])), OPEN, F, "manifest", 8 + len(AREA))
    # the last key "length" (6 bytes) keeps 2 of them: the text item runs past the manifest
    add("truncated_cbor", zt_file(AREA, good[:-5]), OPEN, T, "component",
        lambda b: item(b, cbor("length")[:3]))
    add("trailing_bytes_in_manifest", zt_file(AREA, good + b"\x00"), OPEN, F, "manifest",
        lambda b: len(b) - 17)
    add("huge_objects_count", zt_file(AREA, Raw(b"\xa2") + cbor("version") + cbor("1.1.0") +
                                      cbor("objects") + head(5, 2**40)), OPEN, T,
        "manifest.objects", lambda b: value(b, "objects"))
    add("huge_array_count", zt_file(AREA, manifest({"x": dense()},
                                                   attributes={"a": Raw(head(4, 2**62))})),
        OPEN, T, "attributes", lambda b: value(b, "a"))
    add("huge_string_length", zt_file(AREA, Raw(b"\xa2") + cbor("version") + head(3, 2**63 - 1) +
                                      b"1.1.0"), OPEN, T, "manifest",
        lambda b: value(b, "version"))
    # max_depth 32, counted as in GGUF's metadata: an attribute's value (or an unknown key's)
    # is level 1, so the 33rd nested array is refused
    add("deep_nesting", zt_file(AREA, manifest({"x": dense()},
                                               attributes={"a": Raw(b"\x81" * 100000 + b"\x00")})),
        OPEN, L, "attributes", lambda b: value(b, "a") + 32)
    add("deep_nesting_unknown_key", zt_file(AREA, cbor({"version": "1.1.0",
                                                        "junk": Raw(b"\x9f" * 50000),
                                                        "objects": {}})),
        OPEN, L, "manifest", lambda b: value(b, "junk") + 32)
    add("reserved_additional_info", zt_file(AREA, Raw(b"\xa2") + cbor("version") + b"\x7c"),
        OPEN, F, "manifest", lambda b: value(b, "version"))
    add("invalid_utf8_name", zt_file(AREA, Raw(b"\xa2") + cbor("version") + cbor("1.1.0") +
                                     cbor("objects") + b"\xa1" + head(3, 2) + b"\xc3\x28" +
                                     cbor(dense())), OPEN, F, "object.name",
        lambda b: item(b, head(3, 2) + b"\xc3\x28"))
    add("tag_in_attribute", zt_file(AREA, manifest({"x": dense()},
                                                   attributes={"a": Raw(b"\xc2\x41\x01")})),
        OPEN, U, "attributes", lambda b: value(b, "a"))
    # types and required keys: a missing key at the map that lacks it
    add("missing_version", zt_file(AREA, cbor({"objects": {"x": dense()}})), OPEN, F,
        "manifest.version", mstart)
    add("missing_objects", zt_file(AREA, cbor({"version": "1.1.0"})), OPEN, F,
        "manifest.objects", mstart)
    add("version_not_text", zt_file(AREA, manifest({"x": dense()}, version=110)), OPEN, F,
        "manifest.version", lambda b: value(b, "version"))
    add("objects_is_array", zt_file(AREA, cbor({"version": "1.1.0", "objects": []})), OPEN, F,
        "manifest.objects", lambda b: value(b, "objects"))
    add("shape_is_text", zt_file(AREA, manifest({"x": {**dense(), "shape": "4"}})), OPEN, F,
        "object.shape", lambda b: value(b, "shape"))
    add("negative_dim", zt_file(AREA, manifest({"x": dense(shape=(-4,))})), OPEN, F,
        "object.shape", lambda b: value(b, "shape") + 1)  # the element after the array head
    add("shape_overflow", zt_file(AREA, manifest({"x": dense(shape=(2**40, 2**40))})), OPEN, O,
        "object.shape", obj("x"))
    add("missing_shape", zt_file(AREA, manifest({"x": {"format": "dense",
                                                       "components": {"data": comp()}}})),
        OPEN, F, "object.shape", obj("x"))
    add("offset_is_text", zt_file(AREA, manifest({"x": dense(offset="64")})), OPEN, F,
        "component.offset", lambda b: value(b, "offset"))
    add("missing_length", zt_file(AREA, manifest({"x": {"shape": [4], "format": "dense",
                                                       "components": {"data": {"dtype": "f32",
                                                                               "offset": 64}}}})),
        OPEN, F, "component.length", lambda b: value(b, "data"))
    # duplicates: at the repeated key
    add("duplicate_root_key", zt_file(AREA, Raw(b"\xa3") + cbor("version") + cbor("1.1.0") +
                                      cbor("version") + cbor("1.1.0") + cbor("objects") +
                                      cbor({"x": dense()})), OPEN, D, "manifest",
        lambda b: item(b, cbor("version"), 1))
    add("duplicate_object", zt_file(AREA, Raw(b"\xa2") + cbor("version") + cbor("1.1.0") +
                                    cbor("objects") + b"\xa2" + cbor("x") + cbor(dense()) +
                                    cbor("x") + cbor(dense())), OPEN, D, "tensor.name",
        lambda b: item(b, cbor("x") + b"\xa3", 1))
    add("duplicate_attribute", zt_file(AREA, Raw(b"\xa3") + cbor("version") + cbor("1.1.0") +
                                       cbor("attributes") + b"\xa2" + cbor("a") + cbor(1) +
                                       cbor("a") + cbor(2) + cbor("objects") +
                                       cbor({"x": dense()})), OPEN, D, "metadata.key",
        lambda b: item(b, cbor("a") + cbor(2)))
    # components: placement and size at the component's map
    cmap = lambda role="data", nth=0: (lambda b: value(b, role, nth))  # noqa: E731
    # the area is 72 bytes: the manifest starts at 80. Offset 128 starts past it (the offset is
    # at fault); [64, +32) starts inside and runs past it (the length is at fault)
    add("component_past_manifest", zt_file(AREA, manifest({"x": dense(offset=128)})), OPEN, R,
        "component.offset", cmap())
    add("component_runs_into_manifest", zt_file(AREA, manifest({"x": dense(shape=(8,), length=32)})),
        OPEN, R, "component.length", cmap())
    add("component_misaligned", zt_file(AREA, manifest({"x": dense(offset=72, length=16)})),
        OPEN, R, "component.offset", cmap())
    add("component_in_header", zt_file(AREA, manifest({"x": dense(shape=(1,), offset=0,
                                                                  length=4)})),
        OPEN, R, "component.offset", cmap())
    # x [64, 80) and y [64, 72): at the data byte where they overlap
    add("components_overlap", zt_file(AREA, manifest({"x": dense(),
                                                      "y": dense(shape=(2,), length=8)})),
        OPEN, R, "component.offset", 64)
    add("raw_length_mismatch", zt_file(AREA, manifest({"x": dense(length=12)})), OPEN, F,
        "component.length", cmap())
    add("unknown_dtype", zt_file(AREA, manifest({"x": dense(dtype="float32")})), OPEN, U,
        "component.dtype", lambda b: value(b, "dtype"))
    add("unknown_encoding", zt_file(AREA, manifest({"x": dense(encoding="lz4")})), OPEN, U,
        "component.encoding", lambda b: value(b, "encoding"))
    add("unknown_format", zt_file(AREA, manifest({"x": {**dense(), "format": "blocked"}})), OPEN,
        U, "object.format", lambda b: value(b, "format"))
    add("unknown_role", zt_file(AREA, manifest({"x": {"shape": [4], "format": "dense",
                                                     "components": {"weights": comp()}}})),
        OPEN, F, "object.components", lambda b: item(b, cbor("weights")))
    add("csr_without_indptr", zt_file(AREA, manifest({"x": {
        "shape": [2, 2], "format": "sparse_csr",
        "components": {"values": comp(length=8), "indices": comp("u64", 0, 0)}}})),
        OPEN, F, "object.components", obj("x"))
    # zstd (found when the data is read): at the component's data, byte 64
    for name, frame in (("zstd_short", zstd_frame(DATA[:12])),
                        ("zstd_long", zstd_frame(DATA + b"\0\0\0\0")),
                        ("zstd_truncated_frame", zstd_frame(DATA)[:-2]),
                        ("zstd_garbage", b"this is not zstd"),
                        ("zstd_empty", b""),
                        ("zstd_bomb_rle_1GiB", zstd_frame(rle=(0, 1 << 30))),
                        ):
        add(name, zstd_file(frame), READ, F, "component.zstd", 64)
    # a single-segment frame's window is its content size: 1 TiB is over max_decode_window
    add("zstd_content_size_lies", zstd_file(zstd_frame(DATA, content_size=1 << 40)), READ, L,
        "component.zstd", 64)
    # sparse indices, digests, padding, bool values (validate only): at the component's data
    vals, ind, ptr = struct.pack("<2f", 1, 2), struct.pack("<2Q", 0, 5), struct.pack("<3Q", 0, 1, 2)
    area = bytes(56) + vals + bytes(56) + ind + bytes(48) + ptr
    csr = {"values": comp(length=8), "indices": comp("u64", 128, 16),
           "indptr": comp("u64", 192, 24)}
    add("csr_index_out_of_range", zt_file(area, manifest({"s": {
        "shape": [2, 3], "format": "sparse_csr", "components": csr}})),
        VALIDATE, F, "component.indices", 128)
    ptr_bad = struct.pack("<3Q", 0, 2, 1)
    area_b = bytes(56) + vals + bytes(56) + struct.pack("<2Q", 0, 1) + bytes(48) + ptr_bad
    add("csr_indptr_not_monotonic", zt_file(area_b, manifest({"s": {
        "shape": [2, 3], "format": "sparse_csr", "components": csr}})),
        VALIDATE, F, "component.indptr", 192)
    coords = struct.pack("<4H", 0, 2, 1, 1)  # dim 0 index 2 >= 2
    area_c = bytes(56) + vals + bytes(56) + coords
    add("coo_coordinate_out_of_range", zt_file(area_c, manifest({"s": {
        "shape": [2, 2], "format": "sparse_coo",
        "components": {"values": comp(length=8), "coords": comp("u16", 128, 8)}}})),
        VALIDATE, F, "component.coords", 128)
    for name, digest, code in (("digest_mismatch", "crc32c:0x00000000", C),
                               ("digest_sha256_mismatch", "sha256:" + "ab" * 32, C),
                               ("digest_unknown_algorithm", "md5:00", U),
                               ("digest_malformed", "crc32c:zz", F)):
        add(name, zt_file(AREA, manifest({"x": dense(digest=digest)})), VALIDATE, code,
            "component.digest", 64)
    add("nonzero_padding", zt_file(b"\x01" + AREA[1:], manifest({"x": dense()})), VALIDATE, P,
        "padding", 8)
    add("bool_value_2", zt_file(bytes(56) + b"\x01\x02",
                                manifest({"b": dense(shape=(2,), dtype="bool", length=2)})),
        VALIDATE, F, "component.data", 64)
    return out


_ALL = cases()
CASE_LIST = [c for c, _ in _ALL]
MUST_FAIL = {c.name: m for c, m in _ALL}
CASES = {c.name: c for c in CASE_LIST}
assert len(CASES) == len(CASE_LIST)


@pytest.mark.parametrize("case", CASE_LIST, ids=lambda c: c.name)
def test_validate_reports_exact_problem(tbx_asan, tmp_path, case):
    check_case(tbx_asan, tmp_path, case, ".zt")


@pytest.mark.parametrize("case", CASE_LIST, ids=lambda c: c.name)
def test_hostile_file_refused(tbx_asan, tmp_path, case):
    must_fail = MUST_FAIL[case.name]
    path = tmp_path / f"{case.name}.zt"
    path.write_bytes(case.data)
    t0 = time.monotonic()
    name = "b" if case.name.startswith("bool") else \
        "s" if case.name.startswith(("csr", "coo")) else "x"
    for cmd in ("info", "validate", "cat"):
        args = ["cat", path, name] if cmd == "cat" else [cmd, path]
        r = run(tbx_asan, *args)
        assert_clean_exit(r)
        if cmd in must_fail:
            assert r.rc == 1, f"`tbx {cmd}` should refuse {case.name}\n" + r.describe()
            assert r.text.replace(str(path), "").strip(" :\n"), \
                f"`tbx {cmd}` failed without a message\n" + r.describe()
            if cmd != "cat":
                assert "byte" in r.text.lower(), r.describe()
        else:
            assert r.rc == 0, f"`tbx {cmd}` should accept {case.name}\n" + r.describe()
    assert time.monotonic() - t0 < 30, "too slow: a hang?"


def test_valid_sample_and_indefinite_lengths_accepted(tbx_asan, tmp_path):
    """The base file is valid, and so is the same manifest with indefinite-length maps,
    arrays and chunked strings (RFC 8949 allows them; tensorbox accepts them)."""
    path = tmp_path / "ok.zt"
    path.write_bytes(valid_file())
    r = run(tbx_asan, "validate", path)
    assert r.rc == 0, r.describe()
    indef = (b"\xbf" + cbor("version") + b"\x7f" + cbor("1.1") + cbor(".0") + b"\xff" +
             cbor("objects") + b"\xbf" + cbor("x") + b"\xbf" + cbor("shape") + b"\x9f\x04\xff" +
             cbor("format") + cbor("dense") + cbor("components") + b"\xbf" + cbor("data") +
             cbor(comp()) + b"\xff" + b"\xff" + b"\xff" + b"\xff")
    path.write_bytes(zt_file(AREA, indef))
    r = run(tbx_asan, "validate", path)
    assert r.rc == 0, r.describe()
    r = run(tbx_asan, "cat", path, "x", "--as", "f32")
    assert r.rc == 0 and r.out == DATA, r.describe()


# Well-formed CBOR that tensorbox does not accept in attribute values (libcbor's own decoder
# refuses the first two kinds): the message must call the item valid and name its kind, its
# value and its byte offset, never "malformed". Truly malformed heads stay "malformed".
UNSUPPORTED_ITEMS = {
    "unassigned_tag_6": (b"\xc6\x01", ("tag 6", "valid cbor")),
    "unassigned_tag_20": (b"\xd4\x01", ("tag 20", "valid cbor")),
    "simple_value_16": (b"\xf0", ("simple value 16", "valid cbor")),
    "simple_value_64_two_bytes": (b"\xf8\x40", ("simple value 64", "valid cbor")),
    "tag_64_two_bytes": (b"\xd8\x40\x01", ("tag 64", "valid cbor")),
}
MALFORMED_ITEMS = {
    "simple_value_16_in_two_bytes": b"\xf8\x10",  # RFC 8949 3.3: not well-formed
    "reserved_ai_28": b"\xfc",
    "tag_ai_31": b"\xdf\x01",
}


@pytest.mark.parametrize("case", sorted(UNSUPPORTED_ITEMS))
def test_valid_but_unsupported_cbor_is_not_called_malformed(tbx_asan, tmp_path, case):
    raw, words = UNSUPPORTED_ITEMS[case]
    m = manifest({"x": dense()}, attributes={"a": Raw(raw)})
    blob = zt_file(AREA, m)
    offset = 8 + len(AREA) + m.index(b"\xa1\x61a" + raw) + 3  # after {"a": ...
    path = tmp_path / f"{case}.zt"
    path.write_bytes(blob)
    r = run(tbx_asan, "validate", path)
    assert_clean_exit(r)
    assert r.rc == 1, r.describe()
    text = r.text.lower()
    assert "malformed" not in text, r.describe()
    for w in words + ("not supported", f"at byte {offset}"):
        assert w in text, f"message lacks {w!r}\n" + r.describe()
    assert "attributes: attributes:" not in text, "field named twice\n" + r.describe()
    # under a key the driver ignores, the same item is skipped like any valid CBOR
    ignored = zt_file(AREA, cbor({"version": "1.1.0", "x-vendor": Raw(raw), "objects": {"x": dense()}}))
    path.write_bytes(ignored)
    r = run(tbx_asan, "validate", path)
    assert r.rc == 0, r.describe()


@pytest.mark.parametrize("case", sorted(MALFORMED_ITEMS))
def test_malformed_cbor_head_is_called_malformed(tbx_asan, tmp_path, case):
    path = tmp_path / f"{case}.zt"
    path.write_bytes(zt_file(AREA, manifest({"x": dense()}, attributes={"a": Raw(MALFORMED_ITEMS[case])})))
    r = run(tbx_asan, "validate", path)
    assert_clean_exit(r)
    assert r.rc == 1 and "malformed" in r.text.lower(), r.describe()


def test_zstd_bomb_fails_fast_with_bounded_memory(tbx, tmp_path):
    """1 GiB of zeros in RLE blocks declared as 16 bytes: refused at once, in bounded memory
    (run with a 512 MiB address-space limit)."""
    import resource

    path = tmp_path / "bomb.zt"
    path.write_bytes(zstd_file(zstd_frame(rle=(0, 1 << 30))))

    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (512 << 20, 512 << 20))

    import subprocess
    t0 = time.monotonic()
    p = subprocess.run([tbx, "validate", str(path)], capture_output=True, timeout=60,
                       preexec_fn=limit)
    took = time.monotonic() - t0
    assert p.returncode == 1, p.stdout + p.stderr
    assert b"zstd" in p.stdout + p.stderr
    assert took < 5, f"took {took:.1f}s"


def test_truncation_at_every_offset(tbx_asan, tmp_path):
    """Every prefix is refused: shorter than 24 bytes the footer is missing (TBX_E_TRUNCATED at
    0), else its last 8 bytes are not the footer magic (TBX_E_BAD_MAGIC at k - 8)."""
    blob = valid_file()
    path = tmp_path / "t.zt"
    failures = []
    for k in range(len(blob)):
        path.write_bytes(blob[:k])
        want = ("TBX_E_TRUNCATED", "footer", 0) if k < 24 else \
            ("TBX_E_BAD_MAGIC", "footer.magic", k - 8)
        r, objs = validate_json(tbx_asan, path)
        got = (objs[0].get("code"), objs[0].get("field"), objs[0].get("offset")) if objs else None
        if r.rc != 1 or got != want:
            failures.append(f"cut at {k}: `tbx validate` exit {r.rc}, {got} != {want}")
        r = run(tbx_asan, "info", path)
        if r.rc != 1 or "Sanitizer" in r.text or "runtime error:" in r.text:
            failures.append(f"cut at {k}: `tbx info` exit {r.rc}: {r.text.strip()[:200]}")
    assert not failures, f"{len(failures)} failures:\n" + "\n".join(failures[:20])


def test_single_byte_corruption_of_the_manifest(tbx_asan, tmp_path):
    """Every manifest byte replaced by a few hostile values: valid (0) or invalid (1), never a
    crash, a hang, a sanitizer report."""
    blob = valid_file()
    (n,) = struct.unpack_from("<Q", blob, len(blob) - 16)
    start = len(blob) - 16 - n
    path = tmp_path / "c.zt"
    failures = []
    outcomes = {0: 0, 1: 0}
    for pos in range(start, len(blob) - 16):
        for v in (0x00, 0xFF, 0x9F, 0x1B, 0x7B):
            b = bytearray(blob)
            b[pos] = v
            path.write_bytes(bytes(b))
            r = run(tbx_asan, "validate", path)
            if r.rc not in (0, 1) or "Sanitizer" in r.text or "runtime error:" in r.text:
                failures.append(f"byte {pos} = 0x{v:02x}: exit {r.rc}: {r.text.strip()[:200]}")
            else:
                outcomes[r.rc] += 1
    assert not failures, f"{len(failures)} failures:\n" + "\n".join(failures[:20])
    assert outcomes[1] > outcomes[0]  # most corruptions are caught
