"""Byte-level builders shared by the malformed-file tests and the fuzz seed generators.

Hostile files are built here byte by byte, independently of tensorbox (so a bug in our writers
cannot hide in the inputs): a CBOR encoder written from RFC 8949 (zTensor manifests) and a GGUF
byte builder. fuzz/make_*_seeds.py import this module too, so tests and seeds build files the
same way.
"""
from __future__ import annotations

import struct


# ------------------------------------------------------------------------------------------
# CBOR encoder (RFC 8949). Maps keep the insertion order given (callers choose the order);
# Raw(b) inserts pre-encoded bytes; Half/Single wrap floats of that width (others are f64).
# ------------------------------------------------------------------------------------------
class Raw(bytes):
    pass


class Half(float):
    pass


class Single(float):
    pass


def head(mt: int, n: int) -> bytes:
    if n < 24:
        return bytes([mt << 5 | n])
    for ai, size in ((24, 1), (25, 2), (26, 4), (27, 8)):
        if n < 1 << (8 * size):
            return bytes([mt << 5 | ai]) + n.to_bytes(size, "big")
    raise ValueError(n)


def cbor(v) -> bytes:
    if isinstance(v, Raw):
        return bytes(v)
    if v is None:
        return b"\xf6"
    if v is True:
        return b"\xf5"
    if v is False:
        return b"\xf4"
    if isinstance(v, Half):
        return b"\xf9" + struct.pack(">e", v)
    if isinstance(v, Single):
        return b"\xfa" + struct.pack(">f", v)
    if isinstance(v, float):
        return b"\xfb" + struct.pack(">d", v)
    if isinstance(v, int):
        return head(0, v) if v >= 0 else head(1, -1 - v)
    if isinstance(v, bytes):
        return head(2, len(v)) + v
    if isinstance(v, str):
        b = v.encode("utf-8")
        return head(3, len(b)) + b
    if isinstance(v, (list, tuple)):
        return head(4, len(v)) + b"".join(cbor(x) for x in v)
    if isinstance(v, dict):
        return head(5, len(v)) + b"".join(cbor(k) + cbor(x) for k, x in v.items())
    raise TypeError(type(v))


# ------------------------------------------------------------------------------------------
# GGUF byte builder
# ------------------------------------------------------------------------------------------
class GGUFBytes:
    """GGUF byte builder; v1 uses u32 lengths, counts and dims; be writes big-endian."""

    def __init__(self, v1: bool = False, be: bool = False):
        self.b = bytearray()
        self.v1 = v1
        self.e = ">" if be else "<"

    def raw(self, x: bytes):
        self.b += x
        return self

    def u8(self, v): return self.raw(struct.pack("B", v))
    def u32(self, v): return self.raw(struct.pack(self.e + "I", v & 0xFFFFFFFF))
    def u64(self, v): return self.raw(struct.pack(self.e + "Q", v & 0xFFFFFFFFFFFFFFFF))
    def ln(self, v): return self.u32(v) if self.v1 else self.u64(v)

    def s(self, t):
        t = t.encode() if isinstance(t, str) else t
        return self.ln(len(t)).raw(t)

    def hdr(self, version=3, nt=0, nkv=0):
        return self.raw(b"GGUF").u32(version).ln(nt).ln(nkv)

    def kv_u32(self, k, v): return self.s(k).u32(4).u32(v)

    def ti(self, name, ne, typ=0, off=0):
        self.s(name).u32(len(ne))
        for x in ne:
            self.ln(x)
        return self.u32(typ).u64(off)

    def pad(self, a=32):
        while len(self.b) % a:
            self.b.append(0)
        return self

    def zeros(self, n): return self.raw(bytes(n))

    def done(self) -> bytes: return bytes(self.b)
