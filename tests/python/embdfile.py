"""An EMBD .weights builder for the tests and the fuzz seeds, written from the specification
(../shared/specs/embd.md) and the decisions of NOTES.md, independently of the C writer:
struct for the layout, zlib for CRC-32, FNV-1a by hand.

    data, pos = build(meta=[("model_name", "x"), ...], vocab=(tokens, special_ids),
                      tensors=[("w", "f32", (2, 3), raw_bytes), ...])

`pos` names the byte offsets of every part (for hostile-file cases that point at a field).
`fix_crcs(data)` recomputes the three CRC-32s after a mutation, so that the mutation and not the
checksum is what a reader meets first. `legacy(...)` writes cpp_embedder's legacy layout.
"""
import struct
import zlib

DTYPES = {"f32": (0, 4), "f16": (1, 2), "bf16": (2, 2), "i32": (3, 4), "i16": (4, 2),
          "i8": (5, 1), "u32": (6, 4), "u16": (7, 2), "u8": (8, 1)}
REQUIRED = ["model_name", "model_version", "embedding_dim", "vocab_size", "num_layers",
            "num_attention_heads", "hidden_size", "intermediate_size", "max_position_emb",
            "created_at"]
F_VOCAB, F_ALIGNED, F_CHECKSUM, F_COMPRESSED = 1, 2, 4, 8


def fnv1a(b: bytes) -> int:
    h = 2166136261
    for c in b:
        h = ((h ^ c) * 16777619) & 0xFFFFFFFF
    return h


def al(n, a):
    return (n + a - 1) // a * a


def vocab_section(tokens, special):
    body = b"".join(struct.pack("<H", len(t.encode())) + t.encode() for t in tokens)
    return (struct.pack("<III", len(tokens), len(body), 12 + len(body)) + body +
            struct.pack("<5I", *special))


def build(meta=(), vocab=None, tensors=(), flags=None, checksum=True, aligned=True):
    """Returns (bytes, pos). tensors: (name, dtype, shape, raw bytes)."""
    if flags is None:
        flags = (F_VOCAB if vocab is not None else 0) | (F_ALIGNED if aligned else 0) | \
                (F_CHECKSUM if checksum else 0)
    pos = {}
    mo = 64
    entries = b""
    pos["meta_entries"] = []
    for k, v in meta:
        pos["meta_entries"].append(mo + 8 + len(entries))
        kb, vb = k.encode(), v.encode()
        entries += struct.pack("<HH", len(kb), len(vb)) + kb + vb
    msec = struct.pack("<II", len(meta), len(entries)) + entries
    end = mo + len(msec)
    if vocab is not None:
        vo = al(end, 8)
        vsec = vocab_section(*vocab)
        end = vo + len(vsec)
    else:
        vo, vsec = 0, b""
    to = al(end, 8)
    descs, names, data = b"", b"", b""
    pos["desc"] = []
    rel = 0
    offs = []
    for name, dt, shape, raw in tensors:
        code, size = DTYPES[dt]
        n = 1
        for d in shape:
            n *= d
        assert len(raw) == n * size, name
        if aligned:
            rel = al(rel, 64)
        offs.append(rel)
        nb = name.encode()
        sh = list(shape) + [0] * (4 - len(shape))
        pos["desc"].append(to + len(descs))
        descs += struct.pack("<IBBH4IQ", fnv1a(nb), code, len(shape), len(nb), *sh, rel)
        names += nb
        rel += len(raw)
    pos["names"] = to + len(descs)
    tdo = al(to + len(descs) + len(names), 64)
    tds = rel
    data = bytearray(tds)
    for (name, dt, shape, raw), o in zip(tensors, offs):
        data[o:o + len(raw)] = raw
    total = tdo + tds + 16
    head = struct.pack("<4sHHIIIIIIIIQQ", b"EMBD", 1, 0, flags, mo, len(msec), vo, len(vsec), to,
                       len(tensors), tdo, tds, total)
    head += struct.pack("<II", zlib.crc32(head) if flags & F_CHECKSUM else 0, 0)
    buf = bytearray(total)
    buf[0:64] = head
    buf[mo:mo + len(msec)] = msec
    if vocab is not None:
        buf[vo:vo + len(vsec)] = vsec
    buf[to:to + len(descs)] = descs
    buf[pos["names"]:pos["names"] + len(names)] = names
    buf[tdo:tdo + tds] = data
    dcrc = zlib.crc32(bytes(data)) if flags & F_CHECKSUM else 0
    fcrc = zlib.crc32(bytes(buf[:tdo + tds])) if flags & F_CHECKSUM else 0
    buf[tdo + tds:] = struct.pack("<II4sI", dcrc, fcrc, b"DBME", 0)
    pos.update(mo=mo, vo=vo, to=to, tdo=tdo, tds=tds, footer=tdo + tds, offs=offs,
               vocab_len=len(vsec), meta_len=len(msec))
    return bytes(buf), pos


def fix_crcs(b: bytes) -> bytes:
    """Recomputes header, data and file CRC-32 from the header's own fields (bytes that do not
    parse are left alone)."""
    b = bytearray(b)
    if len(b) < 80:
        return bytes(b)
    tdo, tds = struct.unpack_from("<IQ", b, 36)
    struct.pack_into("<I", b, 56, zlib.crc32(bytes(b[:56])))
    n = len(b)
    struct.pack_into("<I", b, n - 16, zlib.crc32(bytes(b[tdo:tdo + tds])))
    struct.pack_into("<I", b, n - 12, zlib.crc32(bytes(b[:n - 16])))
    return bytes(b)


def legacy(tensors, vocab):
    """cpp_embedder's legacy layout: tensors (name, shape, f32 raw), vocab tokens."""
    out = b"EMBD" + struct.pack("<II", 1, len(tensors))
    for name, shape, raw in tensors:
        nb = name.encode()
        out += struct.pack("<I", len(nb)) + nb + struct.pack("<I", len(shape))
        out += b"".join(struct.pack("<I", d) for d in shape) + raw
    out += struct.pack("<I", len(vocab))
    for t in vocab:
        out += struct.pack("<I", len(t.encode())) + t.encode()
    return out


def sample(checksum=True, aligned=True):
    """A small model file: every required key, a vocabulary, tensors of every dtype."""
    import numpy as np
    rng = np.random.default_rng(7)
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "##s", "caf\u00e9"]
    meta = [("model_name", "tiny"), ("model_version", "1.0.0"), ("embedding_dim", "4"),
            ("vocab_size", str(len(tokens))), ("num_layers", "1"), ("num_attention_heads", "2"),
            ("hidden_size", "4"), ("intermediate_size", "8"), ("max_position_emb", "16"),
            ("created_at", "2025-01-16T12:00:00Z")]
    tensors = [
        ("embeddings.word_embeddings.weight", "f32", (8, 4),
         rng.standard_normal((8, 4)).astype("<f4").tobytes()),
        ("h16", "f16", (3,), rng.standard_normal(3).astype("<f2").tobytes()),
        ("hb16", "bf16", (2, 1), bytes([0x80, 0x3f, 0x00, 0xc0])),
        ("i32", "i32", (2,), struct.pack("<2i", -5, 7)),
        ("i16", "i16", (1, 1, 3), struct.pack("<3h", -1, 2, 3)),
        ("i8", "i8", (5,), bytes([1, 255, 3, 4, 128])),
        ("u32", "u32", (1,), struct.pack("<I", 4000000000)),
        ("u16", "u16", (2, 2, 1, 1), struct.pack("<4H", 1, 2, 65535, 0)),
        ("u8", "u8", (3,), bytes([9, 8, 7])),
    ]
    return build(meta, (tokens, [0, 1, 2, 3, 4]), tensors, checksum=checksum, aligned=aligned)
