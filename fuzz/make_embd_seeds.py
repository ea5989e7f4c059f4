#!/usr/bin/env python3
"""Writes the EMBD fuzz seed corpus, deterministically.

    .venv/bin/python fuzz/make_embd_seeds.py [--check]

fuzz/corpus/embd/ - valid spec files built by tests/python/embdfile.py (an independent builder):
                    with and without checksums, aligned and not, with and without a vocabulary,
                    no tensors; legacy-layout files (a small one built here, and the fixture
                    made by cpp_embedder's own converter, tests/data/embd/tiny-legacy.bin);
                    a few malformed files (bad hash, overlap, special id out of range).
Files this script did not write are left alone. --check exits 1 when a file differs.
"""
import os
import struct
import sys

ROOT = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(ROOT, "corpus", "embd")
sys.path.insert(0, os.path.join(ROOT, "..", "tests", "python"))
import embdfile as E  # noqa: E402


def seeds():
    s = {}
    s["sample.weights"] = E.sample()[0]
    s["sample-nocrc.weights"] = E.sample(checksum=False)[0]
    s["sample-unaligned.weights"] = E.sample(aligned=False)[0]
    f32 = struct.pack("<4f", 1, 2, 3, 4)
    s["novocab.weights"] = E.build([("k", "v")], None, [("w", "f32", (2, 2), f32)])[0]
    s["empty.weights"] = E.build()[0]
    s["legacy-small.bin"] = E.legacy([("a.weight", (2, 2), f32), ("b", (4,), f32)],
                                     ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "x"])
    with open(os.path.join(ROOT, "..", "tests", "data", "embd", "tiny-legacy.bin"), "rb") as f:
        s["legacy-tiny.bin"] = f.read()
    b, p = E.sample()
    bad = bytearray(b)
    bad[p["desc"][0]] ^= 1
    s["bad-hash.weights"] = E.fix_crcs(bytes(bad))
    bad = bytearray(b)
    struct.pack_into("<Q", bad, p["desc"][1] + 24, 0)
    s["overlap.weights"] = E.fix_crcs(bytes(bad))
    bad = bytearray(b)
    struct.pack_into("<I", bad, p["vo"] + 12 + 0, 0)  # token 0 length -> 0 (total mismatch)
    s["bad-vocab.weights"] = E.fix_crcs(bytes(bad))
    return s


def main():
    check = "--check" in sys.argv[1:]
    os.makedirs(OUT, exist_ok=True)
    bad = 0
    for name, data in sorted(seeds().items()):
        path = os.path.join(OUT, name)
        if check:
            try:
                with open(path, "rb") as f:
                    same = f.read() == data
            except OSError:
                same = False
            if not same:
                print(f"differs: {path}")
                bad = 1
            continue
        with open(path, "wb") as f:
            f.write(data)
    return bad


if __name__ == "__main__":
    sys.exit(main())
