#!/usr/bin/env python3
"""Writes the NumPy (.npy / .npz) fuzz seed corpus, deterministically.

    .venv/bin/python fuzz/make_npy_seeds.py [--check]

fuzz/corpus/npy/ - files numpy itself writes (numpy.save, numpy.lib.format.write_array for
                   versions 2.0 and 3.0, numpy.savez, numpy.savez_compressed): every dtype tbx
                   reads, big-endian, 0-d, empty and Fortran-order arrays; archives with Zip64
                   extra fields and without members; and a few malformed files (a bad header,
                   a refused dtype, a member CRC flipped, overlapping members, a bzip2 member).
The zip members are dated 1980-01-01 (numpy dates them with the clock) so that the bytes are
the same at every run. Files this script did not write are left alone. --check exits 1 when a
file differs.
"""
import io
import os
import struct
import sys
import zipfile

import numpy as np

ROOT = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(ROOT, "corpus", "npy")


def npy(arr, version=None) -> bytes:
    b = io.BytesIO()
    np.lib.format.write_array(b, arr, version=version, allow_pickle=False)
    return b.getvalue()


def npz(members: dict, method=zipfile.ZIP_STORED, zip64=True) -> bytes:
    """numpy.savez's layout (a member per array, "<key>.npy", Zip64 extra fields forced) with
    a fixed date."""
    b = io.BytesIO()
    with zipfile.ZipFile(b, "w", compression=method) as zf:
        for k, v in members.items():
            zi = zipfile.ZipInfo(k + ".npy", date_time=(1980, 1, 1, 0, 0, 0))
            zi.compress_type = method
            data = v if isinstance(v, bytes) else npy(v)
            with zf.open(zi, "w", force_zip64=zip64) as fh:
                fh.write(data)
    return b.getvalue()


def seeds():
    rng = np.random.default_rng(7)
    s = {}
    a = {
        "f4": np.arange(6, dtype=np.float32).reshape(2, 3),
        "b1": np.array([True, False, True]),
        "i1": np.array([-1, 2], np.int8), "u8": np.array([2**64 - 1], np.uint64),
        "f2": np.array([1.5, -0.0], np.float16), "c8": np.array([1 + 2j], np.complex64),
        "c16": np.array([[1 - 1j, 2j]]), "be_f8": np.arange(4, dtype=">f8"),
        "be_c8": np.array([3 + 4j], dtype=">c8"), "scalar": np.array(7, np.int16),
        "empty": np.zeros((2, 0), np.float32),
        "fortran": np.asfortranarray(np.arange(24, dtype=np.uint16).reshape(2, 3, 4)),
        "fortran_be": np.asfortranarray(np.arange(6, dtype=">i4").reshape(3, 2)),
    }
    for k, v in a.items():
        s[f"{k}.npy"] = npy(v)
    s["v2.npy"] = npy(a["f4"], (2, 0))
    s["v3.npy"] = npy(a["fortran_be"], (3, 0))
    s["stored.npz"] = npz(a)
    s["deflated.npz"] = npz(a, zipfile.ZIP_DEFLATED)
    s["nozip64.npz"] = npz({"x": a["f4"]}, zip64=False)
    s["empty.npz"] = npz({})
    s["big-deflated.npz"] = npz({"r": rng.standard_normal((64, 64)).astype(np.float32),
                                 "z": np.zeros((256, 256), np.uint8)}, zipfile.ZIP_DEFLATED)
    # malformed
    s["bad-shape.npy"] = npy(a["f4"]).replace(b"(2, 3)", b"(2,-3)")
    s["object.npy"] = npy(a["f4"]).replace(b"'<f4'", b"'|O' ")
    s["structured.npy"] = npy(np.zeros(2, dtype=[("x", "<f4")]))
    bad = bytearray(npz({"x": a["f4"]}))
    bad[bad.index(b"\x93NUMPY") + 130] ^= 1
    s["bad-crc.npz"] = bytes(bad)
    s["bzip2.npz"] = npz({"x": a["f4"]}, zipfile.ZIP_BZIP2)
    s["not-npy-member.npz"] = npz({"x": b"hello, world, not an array"})
    return s


def main():
    check = "--check" in sys.argv
    os.makedirs(OUT, exist_ok=True)
    bad = 0
    for name, data in sorted(seeds().items()):
        p = os.path.join(OUT, name)
        if check:
            if not os.path.exists(p) or open(p, "rb").read() != data:
                print(f"differs: {p}")
                bad = 1
            continue
        with open(p, "wb") as f:
            f.write(data)
    return bad


if __name__ == "__main__":
    sys.exit(main())
