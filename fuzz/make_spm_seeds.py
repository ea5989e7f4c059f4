#!/usr/bin/env python3
"""Seeds for fuzz/fuzz_spm.c: SentencePiece tokenizer.model files (protobuf ModelProto),
encoded here by hand from the message layout (field 1: repeated SentencePiece {1: piece bytes,
2: score float, 3: type enum}; field 2: trainer spec; field 3: normalizer spec), plus broken ones.

    .venv/bin/python fuzz/make_spm_seeds.py [OUT_DIR]   (default fuzz/corpus/spm)
"""
import struct
import sys
from pathlib import Path


def varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def key(field: int, wire: int) -> bytes:
    return varint(field << 3 | wire)


def ld(field: int, payload: bytes) -> bytes:  # length-delimited
    return key(field, 2) + varint(len(payload)) + payload


def piece(text: str, score: float, ptype=None) -> bytes:
    m = ld(1, text.encode("utf-8")) + key(2, 5) + struct.pack("<f", score)
    if ptype is not None:
        m += key(3, 0) + varint(ptype)
    return ld(1, m)


def model(pieces, extra=b"") -> bytes:
    return b"".join(piece(*p) for p in pieces) + extra


BASE = [("<unk>", 0.0, 2), ("<s>", 0.0, 3), ("</s>", 0.0, 3)] + \
       [(f"<0x{b:02X}>", 0.0, 6) for b in range(4)] + \
       [("\u2581the", -1.0, None), ("\u2581a", -2.0, 1), ("ing", -3.5, 1), ("caf\u00e9", -4.0, 1),
        ("\u65e5\u672c", -5.0, 1), ("[USER]", 0.0, 4), ("<unused>", 0.0, 5)]
TRAINER = ld(2, ld(1, b"input.txt") + key(3, 0) + varint(2) + key(4, 0) + varint(16))
NORMALIZER = ld(3, ld(1, b"identity") + key(3, 0) + varint(1))

SEEDS = {
    "valid.model": model(BASE, TRAINER + NORMALIZER),
    "valid_pieces_only.model": model(BASE),
    "valid_one_piece.model": model(BASE[:1]),
    "valid_unknown_fields.model": model(BASE[:3], key(9, 0) + varint(7) + key(10, 1) + b"\0" * 8 +
                                        key(11, 5) + b"\0" * 4),
    "bad_truncated.model": model(BASE)[:-3],
    "bad_no_pieces.model": TRAINER,
    "bad_type.model": model([("x", 0.0, 9)]),
    "bad_nan_score.model": ld(1, ld(1, b"x") + key(2, 5) + struct.pack("<I", 0x7FC00000)),
    "bad_utf8.model": ld(1, ld(1, b"\xff\xfe") + key(2, 5) + struct.pack("<f", 0.0)),
    "bad_group.model": key(1, 3) + key(1, 4),
    "bad_field0.model": key(0, 0) + varint(1),
    "bad_long_varint.model": key(1, 2) + b"\xff" * 11,
    "bad_length.model": key(1, 2) + varint(1 << 40),
}


def main() -> int:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).parent / "corpus" / "spm"
    out.mkdir(parents=True, exist_ok=True)
    for name, blob in SEEDS.items():
        (out / name).write_bytes(blob)
    print(f"wrote {len(SEEDS)} seeds to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
