"""Builders of legal files that share and overlap bytes as much as their formats allow.

Each builder writes a file byte by byte from the format's layout (docs/formats/*.md and the
specifications), independently of tensorbox, and returns nothing: the caller measures what
tbx spends on it. They serve tests/python/test_amplification.py and, at scales kept out of the
repository, the reproductions of issue 19 (run this module: `python ampgen.py KIND OUT N`).
"""
from __future__ import annotations

import struct
import sys


def al(n: int, a: int) -> int:
    return (n + a - 1) // a * a


def distinct_bytes(n: int, seed: int = 1) -> bytes:
    """n bytes of lower-case letters from an LCG: windows at distinct offsets of a few bytes
    or more are distinct (the sequence is not periodic at these lengths)."""
    out = bytearray(n)
    x = seed
    for i in range(n):
        x = (x * 6364136223846793005 + 1442695040888963407) & (2**64 - 1)
        out[i] = 97 + (x >> 59) % 26
    return bytes(out)


# ------------------------------------------------------------------------------------------
# MCF (docs/formats/mcf.md): 40-byte header, 8-aligned sections, directory last.
# ------------------------------------------------------------------------------------------
MCF_MODELINFO, MCF_TENSORINDEX, MCF_TENSORDATA = 1, 3, 4


def mcf_file(sections: list[tuple[int, bytes]], data_align: int = 8) -> bytes:
    """sections: (type, bytes) in file order. Returns the whole file."""
    body = bytearray(40)
    where = []
    for t, b in sections:
        body += bytes(al(len(body), 8) - len(body))
        where.append((t, len(body), len(b)))
        body += b
    body += bytes(al(len(body), 8) - len(body))
    dir_off = len(body)
    for t, o, s in sorted(where):
        body += struct.pack("<IIQQ", t, 1, o, s)
    body[:40] = b"MCF\x00" + struct.pack("<HHIIQQQ", 1, 1, 40, len(where), dir_off, len(body), 0)
    return bytes(body)


def mcf_tensor_index(entries, dims: list[int], strings: bytes, flags: int = 0) -> bytes:
    """entries: (name_off, name_len, dtype code, rank, dim_off, data_off, data_size)."""
    n = len(entries)
    entries_off = 48
    dims_off = entries_off + 40 * n
    strings_off = dims_off + 8 * len(dims)
    out = bytearray(struct.pack("<IIIIQQQQ", 1, flags, n, len(dims), entries_off, dims_off,
                                strings_off, len(strings)))
    pack = struct.Struct("<IIIIIIQQ").pack
    out += b"".join(pack(no, nl, code, rank, doff, 0, doff_data, dsize)
                    for no, nl, code, rank, doff, doff_data, dsize in entries)
    out += struct.pack("<%dQ" % len(dims), *dims)
    out += strings
    return bytes(out)


def mcf_overlapping_names(n: int, name_len: int) -> bytes:
    """Issue 19 item 3: n tensors whose names are the n windows [i, i + name_len) of one string
    table of n + name_len bytes; each tensor u8, rank 1, shape [0], no payload (data_size 0
    at the start of an empty TensorData section)."""
    strings = distinct_bytes(n + name_len)
    # TensorData first (empty), at offset 40; its payloads all start there
    td_off = 40
    entries = [(i, name_len, 6, 1, 0, td_off, 0) for i in range(n)]
    ti = mcf_tensor_index(entries, [0], strings)
    return mcf_file([(MCF_TENSORDATA, b""), (MCF_TENSORINDEX, ti)])


def mcf_many_sections(n: int) -> bytes:
    """A directory of n empty sections of distinct unknown types (0x1000 + i), all at offset 40:
    each is a section of the model (mcf.section.0xTTTT), and finding the first of each type once
    took a search of the whole directory per entry."""
    body = bytearray(40)
    body += b"".join(struct.pack("<IIQQ", 0x1000 + i, 1, 40, 0) for i in range(n))
    body[:40] = b"MCF\x00" + struct.pack("<HHIIQQQ", 1, 1, 40, n, 40, len(body), 0)
    return bytes(body)


def mcf_model_info(kvs: list[tuple[int, int, int]], blobs: bytes, blobs_at: int = 88) -> bytes:
    """A ModelInfo section: the 88-byte fixed part (arch 1, the numbers small, no name), the
    blobs (already laid out, starting at section offset `blobs_at` = 88) and the KV table
    (key_off, type, value_off) right after them."""
    kv_off = al(blobs_at + len(blobs), 8)
    fixed = struct.pack("<IIII", 1, 0, 1, 0) + struct.pack("<8I", 32, 8, 1, 1, 1, 16, 16, 0)
    fixed += struct.pack("<ff", 10000.0, 1.0) + struct.pack("<QQIIQ", 0, 0, len(kvs), 0, kv_off)
    assert len(fixed) == 88
    out = bytearray(fixed) + blobs
    out += bytes(kv_off - len(out))
    out += b"".join(struct.pack("<QIIQ", k, t, 0, v) for k, t, v in kvs)
    return bytes(out)


def mcf_blob(b: bytes) -> bytes:
    return struct.pack("<I", len(b)) + b + bytes(al(4 + len(b), 8) - 4 - len(b))


def mcf_shared_kv_value(nkeys: int, value_len: int) -> bytes:
    """Issue 19 item 4: nkeys string KV extras whose value_off all name one blob of
    value_len bytes (keys distinct, each its own small blob)."""
    blobs = bytearray()
    value_at = 88
    blobs += mcf_blob(b"v" * value_len)
    kvs = []
    for i in range(nkeys):
        kvs.append((88 + len(blobs), 3, value_at))
        blobs += mcf_blob(b"k%06d" % i)
    return mcf_file([(MCF_MODELINFO, mcf_model_info(kvs, bytes(blobs)))])


def mcf_worst(n: int, name_len: int, rank: int, nkv: int, kv_len: int, payload: int) -> bytes:
    """Everything MCF lets entries share at once: n tensors named by overlapping windows of one
    string table (name_len bytes each), all of one shape of `rank` dimensions read from the
    same run of dims ([1] * (rank - 1) + [payload / 4]) and all pointing at the same f32
    payload of `payload` bytes; a ModelInfo whose nkv string extras all name one value of
    kv_len bytes."""
    assert payload % 4 == 0
    strings = distinct_bytes(n + name_len)
    dims = [1] * (rank - 1) + [payload // 4]
    td_off = 40  # TensorData first, at the first 8-aligned offset after the header
    data = struct.pack("<f", 0.25) * (payload // 4)
    entries = [(i, name_len, 1, rank, 0, td_off, payload) for i in range(n)]
    ti = mcf_tensor_index(entries, dims, strings)
    secs = [(MCF_TENSORDATA, data), (MCF_TENSORINDEX, ti)]
    if nkv:
        blobs = bytearray(mcf_blob(b"v" * kv_len))
        kvs = []
        for i in range(nkv):
            kvs.append((88 + len(blobs), 3, 88))
            blobs += mcf_blob(b"k%06d" % i)
        secs.append((MCF_MODELINFO, mcf_model_info(kvs, bytes(blobs))))
    return mcf_file(secs)  # sections in list order: TensorData at 40


# ------------------------------------------------------------------------------------------
# safetensors (docs/formats/safetensors.md): u64 header length, JSON header, data.
# ------------------------------------------------------------------------------------------
def st_worst(nmeta: int, ntensors: int, ndim: int) -> bytes:
    """nmeta __metadata__ entries of empty strings under short keys, and ntensors one-element
    F32 tensors whose shapes have ndim dimensions of 1 (the longest shape per JSON byte)."""
    parts = ['"__metadata__":{' + ",".join('"%x":""' % i for i in range(nmeta)) + "}"]
    shape = "[" + ",".join(["1"] * ndim) + "]"
    parts += ['"%x":{"dtype":"F32","shape":%s,"data_offsets":[%d,%d]}' % (i, shape, 4 * i, 4 * i + 4)
              for i in range(ntensors)]
    h = ("{" + ",".join(parts) + "}").encode()
    h += b" " * ((-len(h)) % 8)
    return struct.pack("<Q", len(h)) + h + struct.pack("<f", 0.5) * ntensors


# ------------------------------------------------------------------------------------------
# GGUF v3 (docs/formats/gguf.md)
# ------------------------------------------------------------------------------------------
def _gstr(b: bytes) -> bytes:
    return struct.pack("<Q", len(b)) + b


def gguf_worst(nkv: int, narr: int, ntensors: int, npacked: int = 0) -> bytes:
    """nkv u8 entries under short keys, one array of narr empty u8 arrays (12 bytes each in the
    file), ntensors tensor infos with short names and 4 dimensions [0, 1, 1, 1] (no data, all at
    offset 0: a tensor without bytes overlaps nothing), and an array of npacked u8 (one byte
    each, what a reader or a converter may turn into a value per element)."""
    kvs = [_gstr(b"general.architecture") + struct.pack("<I", 8) + _gstr(b"llama")]
    kvs += [_gstr(b"%x" % i) + struct.pack("<IB", 0, i & 0xFF) for i in range(nkv)]
    if narr:
        kvs.append(_gstr(b"nest") + struct.pack("<IIQ", 9, 9, narr) +
                   struct.pack("<IQ", 0, 0) * narr)
    if npacked:
        kvs.append(_gstr(b"bytes") + struct.pack("<IIQ", 9, 0, npacked) +
                   bytes(range(256)) * (npacked // 256) + bytes(range(npacked % 256)))
    tis = b"".join(_gstr(b"t%x" % i) + struct.pack("<I4QIQ", 4, 0, 1, 1, 1, 0, 0)
                   for i in range(ntensors))
    out = b"GGUF" + struct.pack("<IQQ", 3, ntensors, len(kvs)) + b"".join(kvs) + tis
    return out + bytes((-len(out)) % 32)


# ------------------------------------------------------------------------------------------
# zTensor v1.1 (docs/formats/ztensor.md): magic, data area, CBOR manifest, size, magic.
# ------------------------------------------------------------------------------------------
def _cbor_head(mt: int, n: int) -> bytes:
    if n < 24:
        return bytes([mt << 5 | n])
    for ai, size in ((24, 1), (25, 2), (26, 4), (27, 8)):
        if n < 1 << (8 * size):
            return bytes([mt << 5 | ai]) + n.to_bytes(size, "big")
    raise ValueError(n)


def _cbor_text(s: str) -> bytes:
    b = s.encode()
    return _cbor_head(3, len(b)) + b


def zt_worst(nkeys: int, nnull: int, nempty: int) -> bytes:
    """Attributes that cost the most per manifest byte: nkeys keys mapped to null (3-4 bytes
    each), an array of nnull nulls and an array of nempty empty arrays (one byte each); one f32
    tensor "x" of 4 elements."""
    attrs = [(_cbor_text("%x" % i), b"\xf6") for i in range(nkeys)]
    attrs.append((_cbor_text("nulls"), _cbor_head(4, nnull) + b"\xf6" * nnull))
    attrs.append((_cbor_text("empties"), _cbor_head(4, nempty) + b"\x80" * nempty))
    a = _cbor_head(5, len(attrs)) + b"".join(k + v for k, v in attrs)
    comp = (_cbor_head(5, 3) + _cbor_text("dtype") + _cbor_text("f32") + _cbor_text("offset") +
            _cbor_head(0, 64) + _cbor_text("length") + _cbor_head(0, 16))
    obj = (_cbor_head(5, 3) + _cbor_text("shape") + _cbor_head(4, 1) + _cbor_head(0, 4) +
           _cbor_text("format") + _cbor_text("dense") + _cbor_text("components") +
           _cbor_head(5, 1) + _cbor_text("data") + comp)
    m = (_cbor_head(5, 3) + _cbor_text("version") + _cbor_text("1.1.0") +
         _cbor_text("attributes") + a + _cbor_text("objects") + _cbor_head(5, 1) +
         _cbor_text("x") + obj)
    area = bytes(56) + struct.pack("<4f", 1.0, -2.0, 0.5, 3.0)
    return b"ZTEN1000" + area + m + struct.pack("<Q", len(m)) + b"ZTEN1000"


# ------------------------------------------------------------------------------------------
# OINF v1 (docs/formats/oinf.md)
# ------------------------------------------------------------------------------------------
def _ostr(s: bytes) -> bytes:
    return struct.pack("<I", len(s)) + s + bytes(al(4 + len(s), 8) - 4 - len(s))


def oinf_worst(nsv: int, nmeta: int, value_len: int, ntensors: int, payload: int) -> bytes:
    """nsv size variables; nmeta STRING metadata entries whose payloads are all one string of
    value_len bytes; ntensors u8 tensors of shape [payload] whose data are all one payload."""
    sv = b"".join(_ostr(b"s%x" % i) + struct.pack("<Q", i) for i in range(nsv))
    keys = [_ostr(b"k%x" % i) for i in range(nmeta)]
    names = [_ostr(b"t%x" % i) for i in range(ntensors)]
    off_sv = 72
    off_md = al(off_sv + len(sv), 8)
    md_len = sum(len(k) + 24 for k in keys)
    off_tn = al(off_md + md_len, 8)
    tn_len = sum(len(nm) + 12 + 8 + 16 for nm in names)
    off_data = al(off_tn + tn_len, 8)
    value = _ostr(b"v" * value_len)
    val_off = off_data
    data_off = al(val_off + len(value), 8)
    end = al(data_off + payload, 8)
    out = bytearray(b"OINF\x00")
    out += struct.pack("<IIIIIIQQQQQ", 1, 0, nsv, nmeta, ntensors, 0, off_sv, off_md, off_tn,
                       off_data, end)
    out += bytes(3) + sv
    out += bytes(off_md - len(out))
    out += b"".join(k + struct.pack("<IIQQ", 14, 0, len(value), val_off) for k in keys)
    out += bytes(off_tn - len(out))
    out += b"".join(nm + struct.pack("<IIIQQQ", 5, 1, 1, payload, payload, data_off)
                    for nm in names)
    out += bytes(off_data - len(out))
    out += value
    out += bytes(data_off - len(out)) + b"\x05" * payload
    out += bytes(end - len(out))
    return bytes(out)


# ------------------------------------------------------------------------------------------
# EMBD (docs/formats/embd.md)
# ------------------------------------------------------------------------------------------
def _fnv1a(b: bytes) -> int:
    h = 2166136261
    for c in b:
        h = ((h ^ c) * 16777619) & 0xFFFFFFFF
    return h


def embd_worst(nmeta: int, ntokens: int, ntensors: int) -> bytes:
    """nmeta entries with a short key and an empty value (5-8 bytes each), a vocabulary of
    ntokens empty tokens (2 bytes each), ntensors u8 tensors of shape [0, 1, 1, 1] with short
    names (no data: nothing to overlap), checksums on."""
    import zlib
    required = [(b"model_name", b"w"), (b"model_version", b"1"), (b"embedding_dim", b"1"),
                (b"vocab_size", b"%d" % ntokens), (b"num_layers", b"1"),
                (b"num_attention_heads", b"1"), (b"hidden_size", b"1"),
                (b"intermediate_size", b"1"), (b"max_position_emb", b"1"),
                (b"created_at", b"2024-01-01T00:00:00Z")]
    entries = b"".join(struct.pack("<HH", len(k), len(v)) + k + v for k, v in required)
    entries += b"".join(struct.pack("<HH", len(k), 0) + k
                        for k in (b"%x" % i for i in range(nmeta)))
    msec = struct.pack("<II", nmeta + len(required), len(entries)) + entries
    mo = 64
    vo = al(mo + len(msec), 8)
    body = b"\x00\x00" * ntokens
    vsec = struct.pack("<III", ntokens, len(body), 12 + len(body)) + body + bytes(20)
    to = al(vo + len(vsec), 8)
    names = [b"%x" % i for i in range(ntensors)]
    descs = b"".join(struct.pack("<IBBH4IQ", _fnv1a(nm), 8, 4, len(nm), 0, 1, 1, 1, 0)
                     for nm in names)
    tdo = al(to + len(descs) + sum(map(len, names)), 64)
    tds = 0
    total = tdo + tds + 16
    head = struct.pack("<4sHHIIIIIIIIQQ", b"EMBD", 1, 0, 1 | 2 | 4, mo, len(msec), vo, len(vsec),
                       to, ntensors, tdo, tds, total)
    head += struct.pack("<II", zlib.crc32(head), 0)
    buf = bytearray(total)
    buf[0:64] = head
    buf[mo:mo + len(msec)] = msec
    buf[vo:vo + len(vsec)] = vsec
    buf[to:to + len(descs)] = descs
    nb = b"".join(names)
    buf[to + len(descs):to + len(descs) + len(nb)] = nb
    buf[total - 16:] = struct.pack("<II4sI", zlib.crc32(b""), zlib.crc32(bytes(buf[:total - 16])),
                                   b"DBME", 0)
    return bytes(buf)


# ------------------------------------------------------------------------------------------
# A Hugging Face directory: model.safetensors.index.json and its shards
# ------------------------------------------------------------------------------------------
def hf_worst(path, nshards: int, per_shard: int, nmeta: int) -> None:
    """Writes into directory `path` nshards shards of per_shard one-byte tensors with short
    names (and nmeta tiny __metadata__ entries each, distinct keys across shards), their index
    and a config.json."""
    import json
    import os
    os.makedirs(path, exist_ok=True)
    wm = []
    for s in range(nshards):
        shard = "model-%05d-of-%05d.safetensors" % (s + 1, nshards)
        meta = {"format": "pt"}
        meta.update({"m%x.%x" % (s, i): "" for i in range(nmeta)})
        parts = ['"__metadata__":' + json.dumps(meta, separators=(",", ":"))]
        for i in range(per_shard):
            name = "%x.%x" % (s, i)
            parts.append('"%s":{"dtype":"U8","shape":[1],"data_offsets":[%d,%d]}' % (name, i, i + 1))
            wm.append('"%s":"%s"' % (name, shard))
        h = ("{" + ",".join(parts) + "}").encode()
        h += b" " * ((-len(h)) % 8)
        with open(os.path.join(path, shard), "wb") as f:
            f.write(struct.pack("<Q", len(h)) + h + bytes(per_shard))
    with open(os.path.join(path, "model.safetensors.index.json"), "w") as f:
        f.write('{"metadata":{"total_size":%d},"weight_map":{%s}}' % (nshards * per_shard,
                                                                      ",".join(wm)))
    with open(os.path.join(path, "config.json"), "w") as f:
        f.write('{"model_type":"bert"}')


BUILDERS = {
    "mcf-names": mcf_overlapping_names,
    "mcf-kv": mcf_shared_kv_value,
    "mcf-sections": mcf_many_sections,
    "mcf": mcf_worst,
    "safetensors": st_worst,
    "gguf": gguf_worst,
    "ztensor": zt_worst,
    "oinf": oinf_worst,
    "embd": embd_worst,
}

if __name__ == "__main__":
    kind, out, args = sys.argv[1], sys.argv[2], [int(x) for x in sys.argv[3:]]
    with open(out, "wb") as f:
        f.write(BUILDERS[kind](*args))
