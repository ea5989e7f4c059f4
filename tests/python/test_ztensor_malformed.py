"""Hostile and malformed zTensor files through the CLI.

Every file is built here byte by byte: manifests with the CBOR encoder of filebuild.py
(RFC 8949), zstd frames of raw and RLE blocks assembled from RFC 8878 (below).
For each one the commands that must refuse it exit 1 (not 0, not the usage code 2, not a
signal) with a message naming the field, and no sanitizer report appears when TBX_ASAN is set.
"""
from __future__ import annotations

import struct
import time

import pytest

from conftest import assert_clean_exit, run
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
# Cases: id -> (blob, commands that must fail, field words (one must appear in the output))
# ------------------------------------------------------------------------------------------
OPEN = ("info", "validate", "cat")   # refused at open
READ = ("validate", "cat")            # opens, refused when the data is read
VALIDATE = ("validate",)              # only the full check finds it


def cases():
    c = {}
    good = manifest({"x": dense()})
    # container
    c["bad_header_magic"] = (zt_file(AREA, good, header=b"ZTEN2000"), OPEN, ("magic",))
    c["bad_footer_magic"] = (zt_file(AREA, good, footer=b"ZTEN100X"), OPEN, ("magic",))
    c["legacy_v01_magic"] = (zt_file(AREA, good, header=b"ZTEN0001"), OPEN, ("v0.1", "magic"))
    c["v2_magic"] = (zt_file(AREA, good, header=b"\x89ZT2\r\n\x1a\n"), OPEN, ("v2", "magic"))
    c["short_file"] = (MAGIC + b"\0\0\0\0" + MAGIC, OPEN, ("24 bytes", "footer", "magic"))
    c["only_magics"] = (MAGIC + struct.pack("<Q", 0) + MAGIC, OPEN, ("manifest_size",))
    c["manifest_size_past_header"] = (zt_file(AREA, good, size_field=len(AREA) + len(good) + 9),
                                      OPEN, ("manifest_size",))
    c["manifest_size_u64_max"] = (zt_file(AREA, good, size_field=2**64 - 1), OPEN, ("manifest_size",))
    c["manifest_size_over_1GiB"] = (zt_file(AREA, good, size_field=2**30 + 1), OPEN, ("manifest_size",))
    c["manifest_size_zero"] = (zt_file(AREA, good, size_field=0), OPEN, ("manifest_size",))
    c["manifest_size_short_by_one"] = (zt_file(AREA, good, size_field=len(good) - 1), OPEN,
                                       ("manifest", "version", "objects"))
    # CBOR structure
    c["manifest_not_a_map"] = (zt_file(AREA, cbor([1, 2])), OPEN, ("manifest",))
    c["truncated_cbor"] = (zt_file(AREA, good[:-5]), OPEN, ("manifest", "component", "object"))
    c["trailing_bytes_in_manifest"] = (zt_file(AREA, good + b"\x00"), OPEN, ("manifest",))
    c["huge_objects_count"] = (zt_file(AREA, Raw(b"\xa2") + cbor("version") + cbor("1.1.0") +
                                       cbor("objects") + head(5, 2**40)), OPEN, ("objects",))
    c["huge_array_count"] = (zt_file(AREA, manifest({"x": dense()}, attributes={"a": Raw(head(4, 2**62))})),
                             OPEN, ("attributes",))
    c["huge_string_length"] = (zt_file(AREA, Raw(b"\xa2") + cbor("version") + head(3, 2**63 - 1) + b"1.1.0"),
                               OPEN, ("version", "manifest"))
    c["deep_nesting"] = (zt_file(AREA, manifest({"x": dense()}, attributes={"a": Raw(b"\x81" * 100000 + b"\x00")})),
                         OPEN, ("attributes", "nesting", "depth"))
    c["deep_nesting_unknown_key"] = (zt_file(AREA, cbor({"version": "1.1.0", "junk": Raw(b"\x9f" * 50000),
                                                         "objects": {}})), OPEN, ("nesting", "depth"))
    c["reserved_additional_info"] = (zt_file(AREA, Raw(b"\xa2") + cbor("version") + b"\x7c"), OPEN,
                                     ("version", "malformed"))
    c["invalid_utf8_name"] = (zt_file(AREA, Raw(b"\xa2") + cbor("version") + cbor("1.1.0") + cbor("objects") +
                                      b"\xa1" + head(3, 2) + b"\xc3\x28" + cbor(dense())), OPEN,
                              ("utf-8", "name"))
    c["tag_in_attribute"] = (zt_file(AREA, manifest({"x": dense()}, attributes={"a": Raw(b"\xc2\x41\x01")})),
                             OPEN, ("tag", "attributes"))
    # types and required keys
    c["missing_version"] = (zt_file(AREA, cbor({"objects": {"x": dense()}})), OPEN, ("version",))
    c["missing_objects"] = (zt_file(AREA, cbor({"version": "1.1.0"})), OPEN, ("objects",))
    c["version_not_text"] = (zt_file(AREA, manifest({"x": dense()}, version=110)), OPEN, ("version",))
    c["objects_is_array"] = (zt_file(AREA, cbor({"version": "1.1.0", "objects": []})), OPEN, ("objects",))
    c["shape_is_text"] = (zt_file(AREA, manifest({"x": {**dense(), "shape": "4"}})), OPEN, ("shape",))
    c["negative_dim"] = (zt_file(AREA, manifest({"x": dense(shape=(-4,))})), OPEN, ("shape",))
    c["shape_overflow"] = (zt_file(AREA, manifest({"x": dense(shape=(2**40, 2**40))})), OPEN, ("shape", "overflow"))
    c["offset_is_text"] = (zt_file(AREA, manifest({"x": dense(offset="64")})), OPEN, ("offset",))
    c["missing_length"] = (zt_file(AREA, manifest({"x": {"shape": [4], "format": "dense",
                                                        "components": {"data": {"dtype": "f32", "offset": 64}}}})),
                           OPEN, ("length",))
    # duplicates
    c["duplicate_root_key"] = (zt_file(AREA, Raw(b"\xa3") + cbor("version") + cbor("1.1.0") + cbor("version") +
                                       cbor("1.1.0") + cbor("objects") + cbor({"x": dense()})), OPEN,
                               ("duplicate",))
    c["duplicate_object"] = (zt_file(AREA, Raw(b"\xa2") + cbor("version") + cbor("1.1.0") + cbor("objects") +
                                     b"\xa2" + cbor("x") + cbor(dense()) + cbor("x") + cbor(dense())), OPEN,
                             ("duplicate",))
    c["duplicate_attribute"] = (zt_file(AREA, Raw(b"\xa3") + cbor("version") + cbor("1.1.0") + cbor("attributes") +
                                        b"\xa2" + cbor("a") + cbor(1) + cbor("a") + cbor(2) + cbor("objects") +
                                        cbor({"x": dense()})), OPEN, ("duplicate",))
    # components
    c["component_past_manifest"] = (zt_file(AREA, manifest({"x": dense(offset=128)})), OPEN, ("manifest", "component"))
    c["component_misaligned"] = (zt_file(AREA, manifest({"x": dense(offset=72, length=16)})), OPEN, ("offset",))
    c["component_in_header"] = (zt_file(AREA, manifest({"x": dense(shape=(1,), offset=0, length=4)})), OPEN,
                                ("offset", "header"))
    c["components_overlap"] = (zt_file(AREA, manifest({"x": dense(), "y": dense(shape=(2,), length=8)})), OPEN,
                               ("overlaps",))
    c["raw_length_mismatch"] = (zt_file(AREA, manifest({"x": dense(length=12)})), OPEN, ("length",))
    c["unknown_dtype"] = (zt_file(AREA, manifest({"x": dense(dtype="float32")})), OPEN, ("dtype",))
    c["unknown_encoding"] = (zt_file(AREA, manifest({"x": dense(encoding="lz4")})), OPEN, ("encoding",))
    c["unknown_format"] = (zt_file(AREA, manifest({"x": {**dense(), "format": "blocked"}})), OPEN, ("format",))
    c["unknown_role"] = (zt_file(AREA, manifest({"x": {"shape": [4], "format": "dense",
                                                      "components": {"weights": comp()}}})), OPEN, ("component",))
    c["csr_without_indptr"] = (zt_file(AREA, manifest({"x": {"shape": [2, 2], "format": "sparse_csr",
                                                            "components": {"values": comp(length=8),
                                                                           "indices": comp("u64", 0, 0)}}})),
                               OPEN, ("indptr", "component"))
    # zstd (found when the data is read)
    c["zstd_short"] = (zstd_file(zstd_frame(DATA[:12])), READ, ("zstd",))
    c["zstd_long"] = (zstd_file(zstd_frame(DATA + b"\0\0\0\0")), READ, ("zstd",))
    c["zstd_truncated_frame"] = (zstd_file(zstd_frame(DATA)[:-2]), READ, ("zstd",))
    c["zstd_garbage"] = (zstd_file(b"this is not zstd"), READ, ("zstd",))
    c["zstd_empty"] = (zstd_file(b""), READ, ("zstd",))
    c["zstd_bomb_rle_1GiB"] = (zstd_file(zstd_frame(rle=(0, 1 << 30))), READ, ("zstd",))
    c["zstd_content_size_lies"] = (zstd_file(zstd_frame(DATA, content_size=1 << 40)), READ, ("zstd",))
    # sparse indices, digests, padding, bool values (validate only)
    vals, ind, ptr = struct.pack("<2f", 1, 2), struct.pack("<2Q", 0, 5), struct.pack("<3Q", 0, 1, 2)
    area = bytes(56) + vals + bytes(56) + ind + bytes(48) + ptr
    c["csr_index_out_of_range"] = (zt_file(area, manifest({"s": {"shape": [2, 3], "format": "sparse_csr",
                                                                 "components": {"values": comp(length=8),
                                                                                "indices": comp("u64", 128, 16),
                                                                                "indptr": comp("u64", 192, 24)}}})),
                                   VALIDATE, ("indices",))
    ptr_bad = struct.pack("<3Q", 0, 2, 1)
    area_b = bytes(56) + vals + bytes(56) + struct.pack("<2Q", 0, 1) + bytes(48) + ptr_bad
    c["csr_indptr_not_monotonic"] = (zt_file(area_b, manifest({"s": {"shape": [2, 3], "format": "sparse_csr",
                                                                     "components": {"values": comp(length=8),
                                                                                    "indices": comp("u64", 128, 16),
                                                                                    "indptr": comp("u64", 192, 24)}}})),
                                     VALIDATE, ("indptr",))
    coords = struct.pack("<4H", 0, 2, 1, 1)  # dim 0 index 2 >= 2
    area_c = bytes(56) + vals + bytes(56) + coords
    c["coo_coordinate_out_of_range"] = (zt_file(area_c, manifest({"s": {"shape": [2, 2], "format": "sparse_coo",
                                                                        "components": {"values": comp(length=8),
                                                                                       "coords": comp("u16", 128, 8)}}})),
                                        VALIDATE, ("coord",))
    c["digest_mismatch"] = (zt_file(AREA, manifest({"x": dense(digest="crc32c:0x00000000")})), VALIDATE, ("digest",))
    c["digest_sha256_mismatch"] = (zt_file(AREA, manifest({"x": dense(digest="sha256:" + "ab" * 32)})),
                                   VALIDATE, ("digest",))
    c["digest_unknown_algorithm"] = (zt_file(AREA, manifest({"x": dense(digest="md5:00")})), VALIDATE, ("digest",))
    c["digest_malformed"] = (zt_file(AREA, manifest({"x": dense(digest="crc32c:zz")})), VALIDATE, ("digest",))
    c["nonzero_padding"] = (zt_file(b"\x01" + AREA[1:], manifest({"x": dense()})), VALIDATE, ("padding",))
    c["bool_value_2"] = (zt_file(bytes(56) + b"\x01\x02", manifest({"b": dense(shape=(2,), dtype="bool", length=2)})),
                         VALIDATE, ("bool",))
    return c


CASES = cases()


@pytest.mark.parametrize("case", sorted(CASES))
def test_hostile_file_refused(tbx_asan, tmp_path, case):
    blob, must_fail, words = CASES[case]
    path = tmp_path / f"{case}.zt"
    path.write_bytes(blob)
    t0 = time.monotonic()
    name = "b" if case.startswith("bool") else "s" if case.startswith(("csr", "coo")) else "x"
    for cmd in ("info", "validate", "cat"):
        args = ["cat", path, name] if cmd == "cat" else [cmd, path]
        r = run(tbx_asan, *args)
        assert_clean_exit(r)
        if cmd in must_fail:
            assert r.rc == 1, f"`tbx {cmd}` should refuse {case}\n" + r.describe()
            text = r.text.lower()
            assert any(w.lower() in text for w in words), \
                f"`tbx {cmd}` message names none of {words}\n" + r.describe()
            if cmd != "cat":
                assert "at byte" in text or "offset" in text or "byte" in text, r.describe()
        else:
            assert r.rc == 0, f"`tbx {cmd}` should accept {case}\n" + r.describe()
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
    blob = valid_file()
    path = tmp_path / "t.zt"
    failures = []
    for k in range(len(blob)):
        path.write_bytes(blob[:k])
        for cmd in ("validate", "info"):
            r = run(tbx_asan, cmd, path)
            if r.rc != 1 or "Sanitizer" in r.text or "runtime error:" in r.text:
                failures.append(f"cut at {k}: `tbx {cmd}` exit {r.rc}: {r.text.strip()[:200]}")
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
