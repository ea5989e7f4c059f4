#!/usr/bin/env python3
"""Writes the GGUF fuzz seed corpus (fuzz/corpus/gguf/), deterministically.

    .venv/bin/python fuzz/make_gguf_seeds.py [--check]

valid_*  files written by gguf-py's GGUFWriter (every metadata type, nested arrays, raw bytes
         of the ggml block types, a custom alignment, big-endian, no tensors, a scalar and an
         empty tensor) and a few built by hand (GGUF v1, v2);
bad_*    hostile files, each breaking one rule (truncations, huge counts and lengths, nesting
         bombs, bad alignments, misaligned / overlapping / out-of-file tensors, removed type ids,
         duplicate keys and names, a bool that is 2, an element count that overflows).

Every file is a few KB at most; the same run gives the same bytes (seeded random data). Files
this script did not write are left alone (a fuzzer's finds copied into the corpus stay).
--check exits 1 when a file on disk differs from what the script would write (or is missing).
"""
import argparse
import os
import struct
import sys
import tempfile

import numpy as np

try:
    import gguf
except ImportError:  # pragma: no cover
    sys.exit("make_gguf_seeds.py needs the `gguf` package (pip install gguf)")

ROOT = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(ROOT, "..", "tests", "python"))
from filebuild import GGUFBytes  # noqa: E402  (shared with the tests)
OUT = os.path.join(ROOT, "corpus", "gguf")
SEED = 20240611


def rng(tag):
    return np.random.default_rng([SEED, sum(tag.encode()) * 131 + len(tag)])


# ------------------------------------------------------------------------------------------
# Files from gguf-py's writer
# ------------------------------------------------------------------------------------------
def with_writer(fill, arch="test", **kw):
    """Runs fill(writer) on a GGUFWriter and returns the bytes it wrote."""
    fd, path = tempfile.mkstemp(suffix=".gguf")
    os.close(fd)
    try:
        w = gguf.GGUFWriter(path, arch, **kw)
        fill(w)
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
        with open(path, "rb") as fp:
            return fp.read()
    finally:
        os.unlink(path)


def all_meta(w):
    w.add_uint8("t.u8", 255)
    w.add_int8("t.i8", -128)
    w.add_uint16("t.u16", 65535)
    w.add_int16("t.i16", -32768)
    w.add_uint32("t.u32", 2**32 - 1)
    w.add_int32("t.i32", -2**31)
    w.add_uint64("t.u64", 2**64 - 1)
    w.add_int64("t.i64", -2**63)
    w.add_float32("t.f32", 0.1)
    w.add_float64("t.f64", -1e300)
    w.add_bool("t.bool", True)
    w.add_string("t.str", "h\u00e9llo \u4e16\u754c")
    w.add_array("t.arr_i32", [1, -2, 3])
    w.add_array("t.arr_f32", [0.5, -1.5])
    w.add_array("t.arr_bool", [True, False, True])
    w.add_array("t.arr_str", ["a", "", "ccc"])
    w.add_array("t.nested", [[1, 2], [3]])
    w.add_array("t.nested_str", [["x"], ["y", "z"]])
    w.add_tensor("w", np.arange(6, dtype=np.float32).reshape(2, 3))
    w.add_tensor("b", np.arange(3, dtype=np.int16))


# (type, blocks) for raw block tensors; gguf-py computes the element shape from the byte shape
RAW_TYPES = [
    "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "Q8_K",
    "IQ2_XXS", "IQ2_XS", "IQ3_XXS", "IQ1_S", "IQ4_NL", "IQ3_S", "IQ2_S", "IQ4_XS", "IQ1_M",
    "TQ1_0", "TQ2_0", "MXFP4", "NVFP4", "Q1_0",
]


def raw_types(names):
    def fill(w):
        r = rng("raw" + names[0])
        for name in names:
            qt = gguf.GGMLQuantizationType[name]
            _, type_size = gguf.GGML_QUANT_SIZES[qt]
            data = r.integers(0, 256, size=(1, type_size), dtype=np.uint8)
            w.add_tensor(name.lower(), data, raw_dtype=qt)
        w.add_tensor("bf16", r.integers(0, 65536, size=(2, 2), dtype=np.uint16).view(np.uint8),
                     raw_dtype=gguf.GGMLQuantizationType.BF16)
        w.add_tensor("f16", np.array([1, -2], dtype=np.float16))
        w.add_tensor("f64", np.array([1.0], dtype=np.float64))
        w.add_tensor("i8", np.array([-1, 2], dtype=np.int8))
        w.add_tensor("i64", np.array([2**40], dtype=np.int64))
    return fill


def alignment64(w):
    w.add_custom_alignment(64)
    w.add_tensor("a", np.ones(3, dtype=np.float32))
    w.add_tensor("b", np.ones(5, dtype=np.float16))


def big_endian(w):
    w.add_uint32("be.u32", 0x01020304)
    w.add_array("be.arr", [1.5, -2.0])
    w.add_string("be.s", "big")
    w.add_tensor("f32", np.array([1, 2, 3], dtype=np.float32))
    w.add_tensor("f16", np.array([1, 2], dtype=np.float16))
    q = rng("be").integers(0, 256, size=(1, 34), dtype=np.uint8)
    w.add_tensor("q8", q, raw_dtype=gguf.GGMLQuantizationType.Q8_0)


def no_tensors(w):
    w.add_uint32("k", 1)


def scalar_and_empty(w):
    w.add_tensor("scalar", np.array(3.5, dtype=np.float32))
    w.add_tensor("empty", np.zeros((0, 4), dtype=np.float32))
    w.add_tensor("x", np.ones((2, 2), dtype=np.float32))


# ------------------------------------------------------------------------------------------
# Hand-built files
# ------------------------------------------------------------------------------------------
B = GGUFBytes


def v1_file():
    b = B(v1=True).hdr(1, 1, 2)
    b.s("v1.name").u32(8).s("old")
    b.s("v1.arr").u32(9).u32(4).ln(2).u32(7).u32(8)
    b.ti("w", [2, 2], 0, 0).pad()
    return b.raw(struct.pack("<4f", 1, 2, 3, 4)).done()


def simple(nt_infos, data_len=64, nkv=0, kvs=b"", version=3):
    """Header + raw KV bytes + tensor infos [(name, ne, type, off)] + pad + zero data."""
    b = B().hdr(version, len(nt_infos), nkv).raw(kvs)
    for name, ne, typ, off in nt_infos:
        b.ti(name, ne, typ, off)
    return b.pad().zeros(data_len).done()


def kv(build):
    b = B()
    build(b)
    return b.done()


def bad_files(valid):
    out = {}
    base = valid["valid_all_meta.gguf"]
    for cut in (3, 11, 30, 100, len(base) // 2, len(base) - 40):
        out[f"bad_truncated_at_{cut}"] = base[:cut]
    out["bad_magic"] = b"GGUX" + base[4:]
    out["bad_version_0"] = base[:4] + struct.pack("<I", 0) + base[8:]
    out["bad_version_4"] = base[:4] + struct.pack("<I", 4) + base[8:]
    out["bad_huge_tensor_count"] = B().hdr(3, 1 << 40, 0).zeros(32).done()
    out["bad_huge_kv_count"] = B().hdr(3, 0, (1 << 64) - 1).zeros(32).done()
    out["bad_huge_key_len"] = B().hdr(3, 0, 1).u64(1 << 40).zeros(32).done()
    out["bad_huge_string"] = B().hdr(3, 0, 1).s("k").u32(8).u64((1 << 64) - 1).zeros(16).done()
    out["bad_huge_array"] = B().hdr(3, 0, 1).s("k").u32(9).u32(0).u64(1 << 40).zeros(64).done()
    deep = B().hdr(3, 0, 1).s("deep").u32(9)
    for _ in range(200):
        deep.u32(9).u64(1)
    out["bad_deep_nesting"] = deep.u32(0).u64(0).done()
    out["bad_wide_nesting"] = B().hdr(3, 0, 1).s("w").u32(9).u32(9).u64(1 << 40).zeros(64).done()
    out["bad_bool_2"] = B().hdr(3, 0, 1).s("flag").u32(7).u8(2).done()
    out["bad_value_type"] = B().hdr(3, 0, 1).s("k").u32(13).zeros(8).done()
    out["bad_empty_key"] = B().hdr(3, 0, 1).kv_u32("", 1).done()
    out["bad_duplicate_key"] = B().hdr(3, 0, 2).kv_u32("k", 1).kv_u32("k", 2).done()
    out["bad_duplicate_name"] = simple([("t", [8], 0, 0), ("t", [8], 0, 32)])
    out["bad_alignment_0"] = simple([("t", [8], 0, 0)], nkv=1,
                                    kvs=kv(lambda b: b.kv_u32("general.alignment", 0)))
    out["bad_alignment_3"] = simple([("t", [8], 0, 0)], nkv=1,
                                    kvs=kv(lambda b: b.kv_u32("general.alignment", 3)))
    out["bad_alignment_type"] = simple(
        [("t", [8], 0, 0)], nkv=1,
        kvs=kv(lambda b: b.s("general.alignment").u32(10).u64(32)))
    out["bad_unaligned_offset"] = simple([("t", [2], 0, 4)])
    out["bad_offset_past_end"] = simple([("t", [2], 0, 1 << 20)])
    out["bad_offset_wraps"] = simple([("t", [16], 0, (1 << 64) - 32)])
    out["bad_overlap"] = simple([("a", [16], 0, 0), ("b", [16], 0, 32)], data_len=128)
    out["bad_removed_type_31"] = simple([("t", [32], 31, 0)])
    out["bad_unknown_type_43"] = simple([("t", [1], 43, 0)])
    out["bad_block_size"] = simple([("t", [33], 2, 0)])
    out["bad_ne_overflow"] = simple([("t", [1 << 40, 1 << 40], 0, 0)])
    out["bad_size_wraps"] = simple([("t", [(1 << 62) - 1], 0, 0)])
    out["bad_ndims_huge"] = B().hdr(3, 1, 0).s("t").u32(0xFFFFFFFF).zeros(32).done()
    out["bad_ndims_70"] = simple([("t", [1] * 70, 0, 0)])
    out["bad_data_start_past_end"] = B().hdr(3, 1, 0).ti("t", [0], 0, 0).done()
    out["bad_padding_nonzero"] = valid["valid_alignment64.gguf"][:-1] + b"\x01"
    return out


def generate():
    files = {
        "valid_all_meta.gguf": with_writer(all_meta),
        "valid_raw_types_a.gguf": with_writer(raw_types(RAW_TYPES[:12])),
        "valid_raw_types_b.gguf": with_writer(raw_types(RAW_TYPES[12:])),
        "valid_alignment64.gguf": with_writer(alignment64),
        "valid_big_endian.gguf": with_writer(big_endian, endianess=gguf.GGUFEndian.BIG),
        "valid_no_tensors.gguf": with_writer(no_tensors),
        "valid_scalar_and_empty.gguf": with_writer(scalar_and_empty),
        "valid_v1.gguf": v1_file(),
    }
    v3 = files["valid_scalar_and_empty.gguf"]
    files["valid_v2.gguf"] = v3[:4] + struct.pack("<I", 2) + v3[8:]
    files.update(bad_files(files))
    for name, blob in files.items():
        assert len(blob) <= 8192, (name, len(blob))
    return files


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="only compare with the files on disk")
    args = ap.parse_args()
    files = generate()
    if args.check:
        bad = []
        for name, blob in sorted(files.items()):
            p = os.path.join(OUT, name)
            if not os.path.exists(p) or open(p, "rb").read() != blob:
                bad.append(name)
        for name in bad:
            print(f"differs or missing: fuzz/corpus/gguf/{name}")
        return 1 if bad else 0
    os.makedirs(OUT, exist_ok=True)
    for name, blob in sorted(files.items()):
        with open(os.path.join(OUT, name), "wb") as fp:
            fp.write(blob)
    print(f"wrote {len(files)} files to {os.path.relpath(OUT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
