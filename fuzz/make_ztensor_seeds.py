#!/usr/bin/env python3
"""Writes the zTensor fuzz seed corpus, deterministically.

    .venv/bin/python fuzz/make_ztensor_seeds.py [--check]

fuzz/corpus/ztensor/  files written by the reference (PyPI ztensor==1.1.1: dense dtypes, zstd,
                      CSR, COO, scalars, empty tensors) and hand-built ones for what it cannot
                      write (attributes of every CBOR type, indefinite lengths, digests,
                      quantized_group, narrow index dtypes, all-compressed sparse tensors), plus
                      malformed variants. Every file is a few KB at most.

The same run gives the same bytes (seeded data, no timestamps). --check exits 1 when a file on
disk differs from what the script would write (or is missing). Files it did not write are left
alone (a fuzzer's finds copied into the corpus stay).
"""
import argparse
import os
import struct
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(ROOT, "..", "tests", "python"))
from filebuild import Half, Raw, Single, cbor, head  # noqa: E402  (shared with the tests)

OUT = os.path.join(ROOT, "corpus", "ztensor")
MAGIC = b"ZTEN1000"


class Layout:
    """Blobs at 64-aligned offsets after the magic; build() appends the manifest."""

    def __init__(self):
        self.buf = bytearray(MAGIC)

    def add(self, blob):
        self.buf += bytes(-len(self.buf) % 64)
        off = len(self.buf)
        self.buf += blob
        return off

    def build(self, man, size_field=None):
        m = cbor(man) if not isinstance(man, (bytes, Raw)) else bytes(man)
        n = len(m) if size_field is None else size_field
        return bytes(self.buf) + m + struct.pack("<Q", n) + MAGIC


def zstd_raw_frame(payload):
    """A zstd frame of raw blocks (RFC 8878), no content size."""
    out = b"\x28\xb5\x2f\xfd" + bytes([0x00, 0x58])
    chunks = [payload[i:i + (1 << 17)] for i in range(0, len(payload), 1 << 17)] or [b""]
    for k, ch in enumerate(chunks):
        hdr = (1 if k == len(chunks) - 1 else 0) | (len(ch) << 3)
        out += hdr.to_bytes(3, "little") + ch
    return out


def comp(dtype, off, length, **extra):
    d = {"dtype": dtype, "offset": off, "length": length}
    d.update(extra)
    return d


def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
    return crc ^ 0xFFFFFFFF


# ------------------------------------------------------------------------------------------
# Seeds
# ------------------------------------------------------------------------------------------
def reference_seeds(tmp):
    import ml_dtypes
    import ztensor

    out = {}
    rng = np.random.default_rng(20240917)

    def write(name, fn):
        path = os.path.join(tmp, name)
        with ztensor.Writer(path) as w:
            fn(w)
        with open(path, "rb") as f:
            out[name] = f.read()

    def dense_all(w):
        for dt in (np.float64, np.float32, np.float16, np.int64, np.int32, np.int16, np.int8,
                   np.uint64, np.uint32, np.uint16, np.uint8):
            w.add_tensor(np.dtype(dt).name, (rng.standard_normal(6) * 50).astype(dt).reshape(2, 3))
        w.add_tensor("bfloat16", np.arange(4, dtype=ml_dtypes.bfloat16))
        w.add_tensor("bool", np.array([True, False, True]))
    write("ref_dense_all_dtypes.zt", dense_all)

    def zstd(w):
        w.add_tensor("zeros", np.zeros(512, np.float32), compress=True)
        w.add_tensor("ramp", np.arange(300, dtype=np.int16), compress=19)
        w.add_tensor("empty", np.zeros(0, np.float32), compress=True)
        w.add_tensor("noise", rng.integers(0, 255, 200, dtype=np.uint8), compress=3)
    write("ref_zstd.zt", zstd)

    def sparse(w):
        w.add_sparse_csr("csr", np.array([1.5, -2, 3], np.float32), np.array([0, 3, 1]),
                         np.array([0, 2, 2, 3]), (3, 4))
        w.add_sparse_coo("coo", np.array([7, -8], np.int32), np.array([[0, 1], [2, 0]]), (2, 3))
        w.add_tensor("d", np.arange(3, dtype=np.float32))
    write("ref_sparse.zt", sparse)

    def odd(w):
        w.add_tensor("scalar", np.array(3.5))
        w.add_tensor("empty2d", np.zeros((3, 0), np.float16))
        w.add_tensor("rank4", np.arange(24, dtype=np.int8).reshape(1, 2, 3, 4))
    write("ref_scalar_empty.zt", odd)
    return out


def hand_seeds():
    out = {}
    data = struct.pack("<4f", 1.0, -2.0, 0.5, 3.0)

    # global and object attributes of every CBOR kind
    L = Layout()
    off = L.add(data)
    attrs = {"s": "h\u00e9llo", "u": 2**64 - 1, "i": -42, "h": Half(1.5), "f": Single(0.25),
             "d": 0.1, "y": b"\x00\xff", "t": True, "n": None, "a": [1, 2, 3],
             "mix": [1, "x", None, [2.5]], "m": {"k": {"z": False}}}
    out["hand_attributes_all_types.zt"] = L.build({
        "version": "1.1.0", "attributes": attrs,
        "objects": {"x": {"shape": [4], "format": "dense", "attributes": {"role": "w", "k": [1]},
                          "components": {"data": comp("f32", off, 16)}}}})

    # indefinite-length maps, arrays and chunked strings
    L = Layout()
    off = L.add(data)
    man = (b"\xbf" + cbor("version") + b"\x7f" + cbor("1.1") + cbor(".0") + b"\xff" +
           cbor("objects") + b"\xbf" + cbor("x") + b"\xbf" + cbor("shape") + b"\x9f\x04\xff" +
           cbor("format") + cbor("dense") + cbor("components") + b"\xbf" + cbor("data") +
           cbor(comp("f32", off, 16)) + b"\xff\xff\xff\xff")
    out["hand_indefinite.zt"] = L.build(Raw(man))

    # digests (valid), sha256 computed here
    import hashlib
    L = Layout()
    o1 = L.add(data)
    o2 = L.add(data[::-1])
    out["hand_digests.zt"] = L.build({"version": "1.1.0", "objects": {
        "a": {"shape": [4], "format": "dense",
              "components": {"data": comp("f32", o1, 16, digest="crc32c:0x%08X" % crc32c(data))}},
        "b": {"shape": [16], "format": "dense",
              "components": {"data": comp("u8", o2, 16,
                                          digest="sha256:" + hashlib.sha256(data[::-1]).hexdigest())}}}})

    # quantized_group: [2, 8], 4-bit codes, 8 per u32, group 4, f16 scales and zeros
    codes = list(range(16))
    words = [sum(codes[w * 8 + k] << (4 * k) for k in range(8)) for w in range(2)]
    L = Layout()
    ow = L.add(struct.pack("<2I", *words))
    os_ = L.add(np.array([0.5, 1, 2, 4], np.float16).tobytes())
    oz = L.add(np.array([8, 0, 1, 2], np.float16).tobytes())
    out["hand_qgroup.zt"] = L.build({"version": "1.1.0", "objects": {"q": {
        "shape": [2, 8], "format": "quantized_group",
        "attributes": {"bits": 4, "group_size": 4, "packing": "8_per_u32"},
        "components": {"packed_weight": comp("u32", ow, 8), "scales": comp("f16", os_, 8),
                       "zeros": comp("f16", oz, 8)}}}})

    # sparse with narrow index dtypes
    L = Layout()
    ov = L.add(struct.pack("<3f", 1, 2, 3))
    oi = L.add(struct.pack("<3I", 1, 0, 2))
    op = L.add(struct.pack("<3h", 0, 1, 3))
    oc_v = L.add(struct.pack("<2d", 5, 6))
    oc_c = L.add(struct.pack("<6B", 0, 2, 1, 0, 1, 1))  # dim 0, dim 1, dim 2 of 2 entries
    out["hand_sparse_narrow_indices.zt"] = L.build({"version": "1.1.0", "objects": {
        "csr": {"shape": [2, 3], "format": "sparse_csr",
                "components": {"values": comp("f32", ov, 12), "indices": comp("u32", oi, 12),
                               "indptr": comp("i16", op, 6)}},
        "coo": {"shape": [3, 2, 2], "format": "sparse_coo",
                "components": {"values": comp("f64", oc_v, 16), "coords": comp("u8", oc_c, 6)}}}})

    # every component of a sparse tensor zstd-compressed (nnz from the decoded values)
    L = Layout()
    fv = zstd_raw_frame(struct.pack("<2f", 4, 5))
    fi = zstd_raw_frame(struct.pack("<2Q", 1, 0))
    fp = zstd_raw_frame(struct.pack("<3Q", 0, 1, 2))
    ov, oi, op = L.add(fv), L.add(fi), L.add(fp)
    out["hand_sparse_all_zstd.zt"] = L.build({"version": "1.1.0", "objects": {"s": {
        "shape": [2, 2], "format": "sparse_csr",
        "components": {"values": comp("f32", ov, len(fv), encoding="zstd"),
                       "indices": comp("u64", oi, len(fi), encoding="zstd"),
                       "indptr": comp("u64", op, len(fp), encoding="zstd")}}}})

    # f8, complex and bool dtypes the reference cannot write
    L = Layout()
    o8 = L.add(bytes(range(0, 256, 16)))
    oc = L.add(struct.pack("<4f", 1, 2, 3, 4))
    ob = L.add(b"\x01\x00\x01")
    out["hand_f8_complex_bool.zt"] = L.build({"version": "1.1.0", "objects": {
        "e4m3": {"shape": [16], "format": "dense", "components": {"data": comp("f8_e4m3", o8, 16)}},
        "c64": {"shape": [2], "format": "dense", "components": {"data": comp("complex64", oc, 16)}},
        "b": {"shape": [3], "format": "dense", "components": {"data": comp("bool", ob, 3)}}}})

    # --- malformed ---------------------------------------------------------------------------
    L = Layout()
    off = L.add(data)
    good = {"version": "1.1.0", "objects": {"x": {"shape": [4], "format": "dense",
                                                  "components": {"data": comp("f32", off, 16)}}}}
    out["bad_digest_mismatch.zt"] = L.build({"version": "1.1.0", "objects": {"x": {
        "shape": [4], "format": "dense",
        "components": {"data": comp("f32", off, 16, digest="crc32c:0x00000000")}}}})
    out["bad_manifest_size.zt"] = L.build(good, size_field=2**40)
    out["bad_overlap.zt"] = L.build({"version": "1.1.0", "objects": {
        "x": {"shape": [4], "format": "dense", "components": {"data": comp("f32", off, 16)}},
        "y": {"shape": [2], "format": "dense", "components": {"data": comp("f32", off, 8)}}}})
    out["bad_misaligned.zt"] = L.build({"version": "1.1.0", "objects": {"x": {
        "shape": [1], "format": "dense", "components": {"data": comp("f32", off + 4, 4)}}}})
    out["bad_huge_count.zt"] = L.build(Raw(b"\xa2" + cbor("version") + cbor("1.1.0") +
                                           cbor("objects") + head(5, 2**40)))
    out["bad_deep_nesting.zt"] = L.build({"version": "1.1.0", "objects": {},
                                          "junk": Raw(b"\x81" * 2000 + b"\x00")})
    out["bad_duplicate_key.zt"] = L.build(Raw(b"\xa3" + cbor("version") + cbor("1.1.0") +
                                              cbor("version") + cbor("1.1.0") + cbor("objects") +
                                              cbor(good["objects"])))
    L2 = Layout()
    off2 = L2.add(data)
    L2.buf[9] = 7  # non-zero padding
    out["bad_padding.zt"] = L2.build({"version": "1.1.0", "objects": {"x": {
        "shape": [4], "format": "dense", "components": {"data": comp("f32", off2, 16)}}}})
    L3 = Layout()
    fz = zstd_raw_frame(data[:12])
    o3 = L3.add(fz)
    out["bad_zstd_short.zt"] = L3.build({"version": "1.1.0", "objects": {"x": {
        "shape": [4], "format": "dense",
        "components": {"data": comp("f32", o3, len(fz), encoding="zstd")}}}})
    L4 = Layout()
    ov = L4.add(struct.pack("<2f", 1, 2))
    oi = L4.add(struct.pack("<2Q", 0, 9))
    op = L4.add(struct.pack("<3Q", 0, 1, 2))
    out["bad_csr_index.zt"] = L4.build({"version": "1.1.0", "objects": {"s": {
        "shape": [2, 3], "format": "sparse_csr",
        "components": {"values": comp("f32", ov, 8), "indices": comp("u64", oi, 16),
                       "indptr": comp("u64", op, 24)}}}})
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        seeds = reference_seeds(tmp)
    seeds.update(hand_seeds())
    os.makedirs(OUT, exist_ok=True)
    bad = 0
    for name, blob in sorted(seeds.items()):
        path = os.path.join(OUT, name)
        assert len(blob) < 16384, f"{name}: seeds stay small"
        if args.check:
            try:
                with open(path, "rb") as f:
                    same = f.read() == blob
            except OSError:
                same = False
            if not same:
                print(f"differs: {path}")
                bad += 1
        else:
            with open(path, "wb") as f:
                f.write(blob)
    if not args.check:
        print(f"wrote {len(seeds)} seeds to {OUT}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
