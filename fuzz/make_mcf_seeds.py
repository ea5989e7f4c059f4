#!/usr/bin/env python3
"""Writes the MCF fuzz seed corpus, deterministically.

    .venv/bin/python fuzz/make_mcf_seeds.py [--check]

fuzz/corpus/mcf/ - the small files of mantle's corpus (tests/data/mcf/files and mutated, each
                   at most 24 KB: every section type, every dtype and quantized family, aliases,
                   ModelInfo with every field, hostile variants), copied as they are;
                 - a few files cut or patched here (truncated directory, a q/k payload whose
                   scale region is cut short, an int8 tensor in the activations domain).

The same run gives the same bytes. Files this script did not write are left alone (fuzzer finds
copied into the corpus stay). --check exits 1 when a file differs from what it would write.
"""
import argparse
import os
import struct
import sys

ROOT = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(ROOT, "corpus", "mcf")
SRC = os.path.join(ROOT, "..", "tests", "data", "mcf")
MAX = 24 * 1024


def al(n, a):
    return (n + a - 1) // a * a


def int8_activations():
    """One mcf int8 tensor [2, 3] in the activations domain with its QuantInfo record."""
    payload = struct.pack("<f", 0.5) + bytes(60) + struct.pack("<f", 1.0) + bytes(60) + \
        bytes([1, 0xFF, 5, 0x80, 0x7F, 3])
    name = b"act"
    ti = struct.pack("<IIIIQQQQ", 1, 3, 1, 2, 48, 88, 104, len(name))
    data_off = 64
    ti += struct.pack("<IIIIIIQQ", 0, len(name), 0x10, 2, 0, 0, data_off, len(payload))
    ti += struct.pack("<QQ", 2, 3) + name
    qi = struct.pack("<II", 1, 1) + struct.pack("<IBBHH6sff", 0, 0x10, 1, 0, 0, bytes(6), -1, 1)
    body = bytearray(64)
    td_off = 40
    body[td_off:] = b""
    body = bytearray(al(40, 64))[:40]
    body += bytes(data_off - len(body)) + payload
    td = (40, len(body) - 40)
    body += bytes(al(len(body), 8) - len(body))
    ti_off = len(body)
    body += ti
    body += bytes(al(len(body), 8) - len(body))
    qi_off = len(body)
    body += qi
    body += bytes(al(len(body), 8) - len(body))
    dir_off = len(body)
    secs = sorted([(2, qi_off, len(qi)), (3, ti_off, len(ti)), (4, td[0], td[1])])
    for t, o, s in secs:
        body += struct.pack("<IIQQ", t, 1, o, s)
    hdr = b"MCF\x00" + struct.pack("<HHIIQQQ", 1, 1, 40, len(secs), dir_off, len(body), 1)
    body[:40] = hdr
    return bytes(body)


def seeds():
    out = {}
    for sub in ("files", "mutated"):
        d = os.path.join(SRC, sub)
        for n in sorted(os.listdir(d)):
            p = os.path.join(d, n)
            if n.endswith(".mcf") and os.path.getsize(p) <= MAX:
                with open(p, "rb") as f:
                    out[f"{sub}_{n}"] = f.read()
    base = out.get("files_mixed_quant.mcf")
    if base:
        out["cut_directory.mcf"] = base[:-10]
        out["cut_payload.mcf"] = base[:2000]
    out["int8_activations.mcf"] = int8_activations()
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--check", action="store_true")
    a = ap.parse_args()
    os.makedirs(OUT, exist_ok=True)
    bad = 0
    for name, data in seeds().items():
        p = os.path.join(OUT, name)
        if a.check:
            if not os.path.exists(p) or open(p, "rb").read() != data:
                print(f"differs: {p}")
                bad = 1
            continue
        with open(p, "wb") as f:
            f.write(data)
    return bad


if __name__ == "__main__":
    sys.exit(main())
