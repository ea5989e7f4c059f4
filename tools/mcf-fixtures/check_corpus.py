#!/usr/bin/env python3
"""Cross-check of tests/data/mcf/ without mantle (numpy only).

1. Every file listed in manifest.json exists with the recorded size and sha256, every
   tensor's payload has its raw_sha256, every value file has its sha256 and
   prod(shape) float32 values.
2. An independent decoder written from ../../shared/specs/NOTES.md (payload sizes, region
   offsets, LSB-first bitstream, f16 scales with subnormals flushed, w = q * S) must give the
   same f32 bits as mantle's decoder for every q*/k* tensor, and f32/f16/bf16 tensors must
   convert to mantle's values. A mismatch means NOTES and mantle disagree.

Usage: .venv/bin/python tools/mcf-fixtures/check_corpus.py [tests/data/mcf]
"""
import hashlib
import json
import os
import sys

import numpy as np

BITS = {0x20: 8, 0x21: 4, 0x30: 6, 0x31: 4, 0x32: 3, 0x33: 2}


def a64(n):
    return (n + 63) & ~63


def f16_scales(raw):
    """mantle's scale conversion: f16 -> f32, subnormals flushed to +-0."""
    h = np.frombuffer(raw, dtype="<u2")
    sub = (h & 0x7C00) == 0
    h = np.where(sub, h & 0x8000, h).astype("<u2")
    return h.view("<f2").astype(np.float32)


def codes(data, n, bits):
    """n signed codes from one LSB-first bitstream (value k, bit i -> stream bit k*bits+i)."""
    stream = np.unpackbits(np.frombuffer(data, dtype=np.uint8), bitorder="little")
    v = stream[: n * bits].reshape(n, bits).astype(np.int32)
    u = (v << np.arange(bits, dtype=np.int32)).sum(axis=1)
    return np.where(u >= 1 << (bits - 1), u - (1 << bits), u).astype(np.float32)


def payload_size(dt, rows, cols):
    bits = BITS[dt]
    bpr = -(-cols // 32)
    tb = rows * bpr
    data = tb * 32 * bits // 8
    if dt < 0x30:
        return a64(2 * tb) + data
    ts = rows * -(-bpr // 8)
    return a64(a64(2 * ts) + tb) + data


def decode_quant(raw, dt, rows, cols):
    bits = BITS[dt]
    bpr = -(-cols // 32)
    tb = rows * bpr
    assert len(raw) == payload_size(dt, rows, cols), "payload size formula"
    with np.errstate(invalid="ignore", over="ignore"):
        if dt < 0x30:
            scale = f16_scales(raw[: 2 * tb])
            q = codes(raw[a64(2 * tb):], tb * 32, bits).reshape(tb, 32)
            w = q * scale[:, None]
            w[scale == 0] = 0  # mantle writes +0 for a zero (or -0) scale
        else:
            ts = rows * -(-bpr // 8)
            sup = f16_scales(raw[: 2 * ts])
            sub = np.frombuffer(raw, dtype=np.uint8, count=tb, offset=a64(2 * ts)) & 0x3F
            q = codes(raw[a64(a64(2 * ts) + tb):], tb * 32, bits).reshape(tb, 32)
            blk = np.arange(tb)
            s_idx = (blk // bpr) * -(-bpr // 8) + (blk % bpr) // 8
            s = sup[s_idx]
            scale = s * (sub.astype(np.float32) / np.float32(32))
            w = q * scale[:, None]
            w[(s == 0) | (sub == 0)] = 0
    return w.reshape(rows, bpr * 32)[:, :cols].astype(np.float32)


def decode_plain(raw, dt, n):
    if dt == 1:
        return np.frombuffer(raw, dtype="<f4", count=n)
    if dt == 2:
        return np.frombuffer(raw, dtype="<f2", count=n).astype(np.float32)
    if dt == 3:
        return (np.frombuffer(raw, dtype="<u2", count=n).astype(np.uint32) << 16).view(np.float32)
    return None


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "../../tests/data/mcf")
    man = json.load(open(os.path.join(root, "manifest.json")))
    errors, checked, decoded = [], 0, 0
    for f in man["fixtures"]:
        data = open(os.path.join(root, f["file"]), "rb").read()
        if len(data) != f["size"] or hashlib.sha256(data).hexdigest() != f["sha256"]:
            errors.append(f"{f['file']}: size/sha256")
            continue
        for t in f.get("tensors") or []:
            raw = data[t["data_off"]: t["data_off"] + t["data_size"]]
            if t.get("raw_sha256") and hashlib.sha256(raw).hexdigest() != t["raw_sha256"]:
                errors.append(f"{f['file']} {t['name']}: raw_sha256")
            if not t.get("f32"):
                continue
            vb = open(os.path.join(root, t["f32"]), "rb").read()
            n = int(np.prod(t["shape"], dtype=np.int64)) if t["shape"] else 1
            if hashlib.sha256(vb).hexdigest() != t["f32_sha256"] or len(vb) != 4 * n:
                errors.append(f"{f['file']} {t['name']}: value file")
                continue
            checked += 1
            dt = t["dtype"]
            if dt in BITS:
                mine = decode_quant(raw, dt, t["shape"][0], t["shape"][1])
            else:
                mine = decode_plain(raw, dt, n)
            if mine is None:
                continue
            decoded += 1
            want = np.frombuffer(vb, dtype="<u4")
            got = np.ascontiguousarray(mine, dtype=np.float32).reshape(-1).view("<u4")
            if not np.array_equal(want, got):
                bad = int(np.argmax(want != got))
                errors.append(f"{f['file']} {t['name']} ({t['dtype_name']}): element {bad}: "
                              f"mantle {want[bad]:08x}, NOTES decoder {got[bad]:08x}")
    print(f"{len(man['fixtures'])} fixtures, {checked} value files, {decoded} re-decoded from NOTES: "
          f"{len(errors)} problems")
    for e in errors:
        print("  " + e)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
