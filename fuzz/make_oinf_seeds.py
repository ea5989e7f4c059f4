#!/usr/bin/env python3
"""Writes the OINF fuzz seed corpus, deterministically.

    .venv/bin/python fuzz/make_oinf_seeds.py [--check]

fuzz/corpus/oinf/  - valid version 1 files built by hand from the layout (every metadata kind,
                     every tensor dtype, scalars, tensors without data, size variables);
                   - valid version 2 files with quantization parameters (per tensor / per
                     channel, symmetric / asymmetric);
                   - files written by openinfer-oinf 0.1.1 (the reference writer);
                   - a few malformed files (bad offsets, bad nbytes, bad charset, bad quant).

Every file is a few KB at most. The same run gives the same bytes (fixed data, no timestamps).
Files this script did not write are left alone (fuzzer finds copied into the corpus stay).
--check exits 1 when a file on disk differs from what the script would write (or is missing).
"""
import argparse
import dataclasses
import os
import struct
import sys
import tempfile

ROOT = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(ROOT, "corpus", "oinf")


def al8(n):
    return (n + 7) // 8 * 8


def pstr(s):
    return struct.pack("<I", len(s)) + s + b"\x00" * (al8(4 + len(s)) - 4 - len(s))


def pad8(b):
    return b + b"\x00" * (al8(len(b)) - len(b))


def build(version, sv, md, tn):
    """sv: [(name, value)], md: [(key, type, payload)], tn: [(name, dtype, dims, flags, data,
    quant)]. Lays the file out like the reference encoder (tables in the given order)."""
    svt = b"".join(pstr(n) + struct.pack("<Q", v) for n, v in sv)
    mds = sum(len(pstr(k)) + 24 for k, _, _ in md)
    tns = sum(len(pstr(t[0])) + 12 + 8 * len(t[2]) + 16 + (16 if version >= 2 else 0) for t in tn)
    off_sv = 72
    off_md = al8(off_sv + len(svt))
    off_tn = al8(off_md + mds)
    off_data = al8(off_tn + tns)
    cur = off_data
    moff, doff, qoff = [], [], []
    for _, _, p in md:
        moff.append(cur)
        cur += al8(len(p))
    for _, _, _, fl, data, quant in tn:
        doff.append(cur if fl & 1 else 0)
        cur += al8(len(data)) if fl & 1 else 0
        qoff.append(cur if fl & 2 else 0)
        cur += al8(len(quant)) if fl & 2 else 0
    out = bytearray(b"OINF\x00")
    out += struct.pack("<IIIIIIQQQQQ", version, 0, len(sv), len(md), len(tn), 0, off_sv, off_md,
                       off_tn, off_data, cur)
    out += b"\x00" * 3 + svt
    out += b"\x00" * (off_md - len(out))
    for (k, ty, p), o in zip(md, moff):
        out += pstr(k) + struct.pack("<IIQQ", ty, 0, len(p), o)
    out += b"\x00" * (off_tn - len(out))
    for (name, dt, dims, fl, data, quant), d, q in zip(tn, doff, qoff):
        out += pstr(name) + struct.pack("<III", dt, len(dims), fl)
        out += b"".join(struct.pack("<Q", x) for x in dims)
        out += struct.pack("<QQ", len(data) if fl & 1 else 0, d)
        if version >= 2:
            out += struct.pack("<QQ", len(quant) if fl & 2 else 0, q)
    out += b"\x00" * (off_data - len(out))
    for _, _, p in md:
        out += pad8(p)
    for _, _, _, fl, data, quant in tn:
        if fl & 1:
            out += pad8(data)
        if fl & 2:
            out += pad8(quant)
    assert len(out) == cur
    return bytes(out)


def quant(scheme, smode, zmode, saxis, scales, zaxis, zps):
    b = struct.pack("<IIIIQQQQ", scheme, smode, zmode, 0, saxis, len(scales), zaxis, len(zps))
    b += b"".join(struct.pack("<f", s) for s in scales) + b"".join(struct.pack("<i", z) for z in zps)
    return pad8(b)


def seeds():
    out = {}
    # --- version 1, every metadata kind ---
    md = [
        (b"a.bf16", 16, struct.pack("<H", 0x4049)),
        (b"a.bool", 12, b"\x01"),
        (b"a.f16", 9, struct.pack("<H", 0x3C00)),
        (b"a.f32", 10, struct.pack("<f", 0.5)),
        (b"a.f64", 11, struct.pack("<d", -1e-300)),
        (b"a.f8", 17, b"\x3c"),
        (b"a.i16", 2, struct.pack("<h", -300)),
        (b"a.i32", 3, struct.pack("<i", -70000)),
        (b"a.i4", 18, b"\x0d"),
        (b"a.i64", 4, struct.pack("<q", -2**40)),
        (b"a.i8", 1, b"\x80"),
        (b"a.t1", 25, b"\x01"),
        (b"a.t2", 24, b"\x03"),
        (b"a.u1", 23, b"\x01"),
        (b"a.u16", 6, struct.pack("<H", 65535)),
        (b"a.u2", 22, b"\x02"),
        (b"a.u32", 7, struct.pack("<I", 2**32 - 1)),
        (b"a.u4", 21, b"\x0f"),
        (b"a.u64", 8, struct.pack("<Q", 2**64 - 1)),
        (b"a.u8", 5, b"\xff"),
        (b"b.bits", 13, pad8(struct.pack("<II", 11, 2) + b"\xa5\x03")),
        (b"b.str", 14, pstr(b"clamp_up")),
        (b"c.nd.f32", 15, pad8(struct.pack("<IIQQ", 10, 2, 2, 2) + struct.pack("<4f", 1, 2, 3, 4))),
        (b"c.nd.i4", 15, pad8(struct.pack("<IIQ", 18, 1, 5) + b"\x21\x43\x05")),
        (b"c.nd.bool", 15, pad8(struct.pack("<IIQ", 12, 1, 3) + b"\x01\x00\x01")),
        (b"c.nd.scalar", 15, pad8(struct.pack("<II", 7, 0) + struct.pack("<I", 9))),
    ]
    f32 = struct.pack("<6f", 0.5, -1.0, 2.25, 3.0, -4.5, 100.0)
    tn = [
        (b"t.bf16", 16, [3], 1, struct.pack("<3H", 0x3F80, 0xC000, 0x7F80), b""),
        (b"t.bitset", 13, [4], 1, b"\x00\x01\xfe\xff", b""),
        (b"t.bool", 12, [5], 1, b"\x01\x00\x01\x01\x00", b""),
        (b"t.f16", 9, [2, 2], 1, struct.pack("<4H", 0x3C00, 0xC000, 0x7BFF, 0x0001), b""),
        (b"t.f32", 10, [2, 3], 1, f32, b""),
        (b"t.f64", 11, [2], 1, struct.pack("<2d", 1.5, -2.5), b""),
        (b"t.f8", 17, [4], 1, b"\x3c\x3f\x7b\xfc", b""),
        (b"t.i1", 20, [9], 1, b"\xa5\x01", b""),
        (b"t.i2", 19, [5], 1, b"\x1b\x02", b""),
        (b"t.i4", 18, [3], 1, b"\x8f\x07", b""),
        (b"t.i64", 4, [2], 1, struct.pack("<2q", -1, 2**62), b""),
        (b"t.i8", 1, [3], 1, b"\x80\x7f\x00", b""),
        (b"t.scalar", 10, [], 1, struct.pack("<f", 10.35), b""),
        (b"t.t1", 25, [7], 1, b"\x55", b""),
        (b"t.t2", 24, [5], 1, b"\x71\x00", b""),
        (b"t.u1", 23, [3], 1, b"\x05", b""),
        (b"t.u16", 6, [2], 1, struct.pack("<2H", 1, 65535), b""),
        (b"t.u2", 22, [4], 1, b"\xe4", b""),
        (b"t.u4", 21, [3], 1, b"\x21\x0f", b""),
        (b"t.u8", 5, [0, 3], 1, b"", b""),
        (b"u.none", 10, [4, 4], 0, b"", b""),
    ]
    out["v1_every_kind.oinf"] = build(1, [(b"B", 4), (b"D", 16)], md, tn)
    out["v1_empty.oinf"] = build(1, [], [], [])
    out["v1_sizevars_only.oinf"] = build(1, [(b"B", 1), (b"N.max", 2**64 - 1)], [], [])
    # --- version 2, quantization ---
    out["v2_quant.oinf"] = build(2, [(b"D", 3)], [(b"name", 14, pstr(b"q"))], [
        (b"qs", 21, [3], 3, b"\x21\x0f", quant(1, 1, 0, 0, [0.125], 0, [])),
        (b"qw", 1, [2, 3], 3, struct.pack("<6b", -3, 0, 5, 127, -128, 1),
         quant(2, 2, 2, 0, [0.5, 0.25], 0, [3, -7])),
        (b"qz", 1, [2, 3], 3, bytes(6), quant(2, 2, 1, 1, [1.0, 2.0, 3.0], 0, [5])),
        (b"w", 10, [2], 1, struct.pack("<2f", 1, 2), b""),
    ])
    out["v2_plain.oinf"] = build(2, [], [(b"k", 5, b"\x01")], [(b"w", 10, [1], 1, b"\x00" * 4, b"")])
    # --- malformed ---
    good = out["v1_every_kind.oinf"]
    b = bytearray(good)
    struct.pack_into("<Q", b, 45, 40)
    out["bad_offsets_decreasing.oinf"] = bytes(b)
    b = bytearray(good)
    b[76] = ord(" ")
    out["bad_sizevar_charset.oinf"] = bytes(b)
    out["bad_truncated.oinf"] = good[: len(good) // 2]
    q = bytearray(out["v2_quant.oinf"])
    q[-60:-52] = struct.pack("<Q", 7)
    out["bad_quant_tail.oinf"] = bytes(q)
    out["bad_version.oinf"] = good[:5] + struct.pack("<I", 9) + good[9:]
    # --- reference writer ---
    ref = reference_files()
    out.update(ref)
    return out


def reference_files():
    """Files written by openinfer-oinf 0.1.1, when it is installed (it is in .venv)."""
    try:
        import numpy as np
        from dataclass_to_oinf import Bitset, ScalarValue, SizeVar, TensorSpec, UninitializedTensor, write_oinf
    except Exception as e:  # pragma: no cover
        sys.exit(f"make_oinf_seeds: needs numpy and openinfer-oinf ({e}); run with .venv/bin/python")

    @dataclasses.dataclass
    class Small:
        B: SizeVar
        w: TensorSpec
        b: TensorSpec
        q: TensorSpec
        mode: str
        alpha: float
        flags: Bitset
        h: ScalarValue
        nd: list
        u: UninitializedTensor

    inst = Small(B=SizeVar(2), w=TensorSpec(np.arange(6, dtype=np.float32).reshape(2, 3)),
                 b=TensorSpec(np.array([True, False])), q=TensorSpec([1, -2, 3], dtype="i4"),
                 mode="m", alpha=0.25, flags=Bitset([1, 0, 1]), h=ScalarValue(1.5, "bf16"),
                 nd=[[1, 2], [3, 4]], u=UninitializedTensor("f16", (2,)))
    with tempfile.TemporaryDirectory() as d:
        p = os.path.join(d, "ref.oinf")
        write_oinf(inst, p)
        with open(p, "rb") as f:
            return {"ref_small.oinf": f.read()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args()
    files = seeds()
    os.makedirs(OUT, exist_ok=True)
    bad = 0
    for name, data in sorted(files.items()):
        path = os.path.join(OUT, name)
        if args.check:
            try:
                with open(path, "rb") as f:
                    same = f.read() == data
            except OSError:
                same = False
            if not same:
                print(f"differs or missing: {path}")
                bad += 1
            continue
        with open(path, "wb") as f:
            f.write(data)
    if not args.check:
        print(f"wrote {len(files)} files to {OUT}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
