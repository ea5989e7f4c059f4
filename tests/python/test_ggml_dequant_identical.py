"""Every ggml block type tbx decodes gives ggml's own f32 bits (issue 21, dequantizers).

For every quantized type llama.cpp's libggml (.venv's llama_cpp/lib/libggml-base.so, through
ctypes) can decode (type_traits.to_float), random blocks are written as one tensor each into a
GGUF file built here byte by byte, and `tbx cat FILE TENSOR --as f32` (the dispatched kernel:
AVX2 / AVX-512 on this CPU) must print exactly the bits ggml's to_float gives the same bytes:
NaN payloads and signs included. The blocks are random bytes, blocks of all 0x00 and all 0xFF,
and blocks whose f16 / E8M0 / UE4M3 scale fields hold NaN (quiet and signalling, both signs),
Inf, zeros, subnormals and the largest finite halves. A missing llama_cpp / numpy, or a type
ggml decodes and tbx does not, is a failure, never a skip.
"""
from __future__ import annotations

import ctypes
import struct
from pathlib import Path

import pytest

from conftest import assert_clean_exit, ggml_base_lib, need, run

np = need("numpy")

GGML_TYPE_COUNT = 43  # llama.cpp's ggml.h of the release in .venv: q2_0 (42) is the last type
SPECIAL_F16 = [0x0000, 0x8000, 0x7C00, 0xFC00, 0x7E00, 0xFE00, 0x7C01, 0xFC01, 0x7D55, 0xFDFF,
               0x0001, 0x8001, 0x03FF, 0x0400, 0x7BFF, 0xFBFF, 0x3C00, 0xBC00]
# Offsets of the scale fields of each type (ggml-common.h's block layouts): f16 unless noted.
SCALES = {
    "q4_0": [0], "q4_1": [0, 2], "q5_0": [0], "q5_1": [0, 2], "q8_0": [0],
    "q2_K": [80, 82], "q3_K": [108], "q4_K": [0, 2], "q5_K": [0, 2], "q6_K": [208],
    "iq2_xxs": [0], "iq2_xs": [0], "iq2_s": [0], "iq3_xxs": [0], "iq3_s": [0], "iq1_s": [0],
    "iq4_nl": [0], "iq4_xs": [0], "tq1_0": [52], "tq2_0": [64], "q1_0": [0], "q2_0": [0],
    "iq1_m": [], "mxfp4": ["e8m0"], "nvfp4": ["ue4m3"],
}


class TypeTraits(ctypes.Structure):  # struct ggml_type_traits (ggml.h), its leading fields
    _fields_ = [("type_name", ctypes.c_char_p), ("blck_size", ctypes.c_int64),
                ("blck_size_interleave", ctypes.c_int64), ("type_size", ctypes.c_size_t),
                ("is_quantized", ctypes.c_bool), ("to_float", ctypes.c_void_p),
                ("from_float_ref", ctypes.c_void_p)]


TO_FLOAT = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)


@pytest.fixture(scope="module")
def ggml_types():
    """[(id, name, block_size, block_bytes, to_float)] of every type libggml-base decodes."""
    lib = ggml_base_lib()
    lib.ggml_get_type_traits.restype = ctypes.POINTER(TypeTraits)
    lib.ggml_get_type_traits.argtypes = [ctypes.c_int]
    assert lib.ggml_get_type_traits(GGML_TYPE_COUNT - 1).contents.type_name == b"q2_0"
    out = []
    for t in range(GGML_TYPE_COUNT):
        tt = lib.ggml_get_type_traits(t).contents
        if tt.is_quantized and tt.to_float and tt.blck_size > 0 and tt.type_size > 0:
            out.append((t, tt.type_name.decode(), tt.blck_size, tt.type_size, TO_FLOAT(tt.to_float)))
    assert len(out) >= 25, [o[1] for o in out]  # the 25 of today at least: none lost silently
    return out


def blocks_for(name: str, nblocks: int, bb: int, rng) -> np.ndarray:
    b = rng.integers(0, 256, size=(nblocks, bb), dtype=np.uint8)
    fields = SCALES[name]  # a type missing here fails (KeyError): add its layout
    for i in range(nblocks):
        mode = i % 6
        if mode == 4:
            b[i, :] = 0x00
        elif mode == 5:
            b[i, :] = 0xFF
        for f in fields:
            if f == "e8m0":  # every exponent byte in turn, then random
                b[i, 0] = i % 256
            elif f == "ue4m3":
                for k in range(4):
                    b[i, k] = (4 * i + k) % 256
            elif mode == 0:
                b[i, f:f + 2] = np.frombuffer(struct.pack("<H", SPECIAL_F16[(i // 6 + f) % len(SPECIAL_F16)]),
                                              np.uint8)
            elif mode == 1:  # a NaN of either sign, quiet or signalling, random payload
                h = 0x7C00 | int(rng.integers(1, 0x400)) | (int(rng.integers(0, 2)) << 15)
                b[i, f:f + 2] = np.frombuffer(struct.pack("<H", h), np.uint8)
        if name == "iq1_m" and mode in (0, 1):  # its f16 scale: the top nibbles of 4 u16 words
            h = SPECIAL_F16[(i // 6) % len(SPECIAL_F16)] if mode == 0 else 0x7C00 | int(rng.integers(1, 0x400))
            for k in range(4):
                b[i, 49 + 2 * k] = (b[i, 49 + 2 * k] & 0x0F) | (((h >> (4 * k)) & 0xF) << 4)
    return b


def gguf_bytes(tensors: list[tuple[str, int, int, bytes]]) -> bytes:
    """A GGUF v3 file: no metadata, the tensors (name, ggml type, elements, bytes), 32-aligned."""
    head = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), 0)
    infos, data = b"", b""
    for name, t, n, raw in tensors:
        nm = name.encode()
        infos += struct.pack("<Q", len(nm)) + nm + struct.pack("<IQIQ", 1, n, t, len(data))
        data += raw + b"\0" * (-len(raw) % 32)
    blob = head + infos
    return blob + b"\0" * (-len(blob) % 32) + data


def test_every_type_decodes_to_ggml_bits(tbx, tmp_path, ggml_types):
    rng = np.random.default_rng(20261127)
    tensors, want = [], {}
    for t, name, bs, bb, to_float in ggml_types:
        nblocks = max(24, 96 * 256 // bs)  # 96 super-blocks' worth: 24576 values or more
        blk = np.ascontiguousarray(blocks_for(name, nblocks, bb, rng))
        y = np.zeros(nblocks * bs, np.float32)
        to_float(blk.ctypes.data, y.ctypes.data, nblocks * bs)
        tensors.append((f"t_{name}", t, nblocks * bs, blk.tobytes()))
        want[name] = y.view("<u4")
    path = tmp_path / "blocks.gguf"
    path.write_bytes(gguf_bytes(tensors))
    bad = []
    for _, name, _, _, _ in ggml_types:
        r = run(tbx, "cat", path, f"t_{name}", "--as", "f32")
        assert_clean_exit(r)
        assert r.rc == 0, f"{name}: tbx cannot decode a type ggml decodes\n" + r.describe()
        got = np.frombuffer(r.out, "<u4")
        assert got.size == want[name].size, name
        diff = np.nonzero(got != want[name])[0]
        if diff.size:
            k = diff[0]
            bad.append(f"{name}: {diff.size} of {got.size} values differ, first at {k}: "
                       f"tbx {got[k]:08x} ggml {want[name][k]:08x}")
    assert not bad, "\n".join(bad)
    # the edge blocks did produce the values that matter (not a vacuous comparison)
    for name in ("q1_0", "iq2_xxs", "iq3_s", "q4_K"):
        f = want[name].view(np.float32)
        assert np.isnan(f).any() and np.isinf(f).any(), name
