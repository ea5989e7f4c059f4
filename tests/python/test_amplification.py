"""The amplification budget (issue 19, "the rule behind 3-5"): files built to make a reader
expand, share or repeat bytes as much as their format allows, one family per reader, through
every command, within 2 x file size + 64 MiB of peak RSS and a time bound linear in the file.

Each reader gets two kinds of file (builders in ampgen.py, written from the format layouts,
independently of tensorbox):

- an *edge* file: every way the format has to share or overlap (names, values, shapes,
  references) at once, scaled to stay inside the default budget (1 x file + 32 MiB of decoded
  metadata, names and tables). It must open and validate (a legal file is never refused), and
  info, validate, cat (bytes and f32) and convert to each writable format stay within bounds;
- *over* files: one sharing trick each, scaled far past the budget (the old code spent 2-40
  times the bound on them). The answer must be TBX_E_LIMIT naming the field and the byte offset
  the builder put the over-budget reference at, still within bounds for every command.

Peak RSS comes from GNU time (as in test_memory_bounds.py); the time bound is a fixed 5 s plus
2 s per MiB of input: linear code needs a small fraction of it, the quadratic and amplifying
code of before took far longer on the over files. The whole module runs in about a minute.
"""
from __future__ import annotations

import json
import os
import struct
import subprocess
import time
from pathlib import Path

import pytest

import ampgen
from conftest import help_formats
from test_memory_bounds import run_measured

MIB = 1024 * 1024


def size_of(p: Path) -> int:
    if p.is_dir():
        return sum(q.stat().st_size for q in p.rglob("*") if q.is_file())
    return p.stat().st_size


def time_bound(size: int) -> float:
    return 5.0 + 2.0 * size / MIB


def convert_args(path: Path, out: Path, fmt: str) -> list[str]:
    """Sections dropped (most targets cannot hold them); metadata kept as it is where the target
    types it (GGUF, zTensor), as strings where it stores strings (safetensors, MCF), dropped where
    its values are restricted (OINF identifiers, EMBD strings) or the source has size variables
    (OINF) that only OINF stores."""
    a = ["convert", str(path), str(out), "--to", fmt, "--force", "--drop-sections"]
    if path.suffix == ".oinf" and fmt != "oinf":
        a.append("--drop-meta")  # size variables: only OINF stores them
    elif fmt in ("safetensors", "mcf"):
        a.append("--stringify-meta")
    elif fmt not in ("gguf", "ztensor"):
        a.append("--drop-meta")  # OINF identifiers, EMBD strings, NumPy: no metadata
    if fmt == "gguf" and path.is_dir():
        a.append("--raw")  # the directory's tensors as they are, not a llama.cpp model
    return a


def check_bounds(tbx: str, path: Path, args: list[str], tmp: Path, ok=(0,)) -> tuple[int, bytes]:
    size = size_of(path)
    bound = 2 * size + 64 * MIB
    rc, rss, secs, err = run_measured([tbx] + args, tmp)
    what = f"tbx {' '.join(args[:1] + args[2:3])} on {path.name} ({size / MIB:.1f} MiB)"
    assert rc in ok, f"{what}: exit {rc}: {err.decode(errors='replace')[:400]}"
    assert rss <= bound, f"{what} peaked at {rss / MIB:.0f} MiB, bound {bound / MIB:.0f} MiB"
    assert secs <= time_bound(size), f"{what} took {secs:.1f} s (bound {time_bound(size):.0f} s)"
    return rc, err


# ------------------------------------------------------------------------------------------
# Edge files: everything at once, inside the budget
# ------------------------------------------------------------------------------------------
MCF_NAME_LEN = 32


def build_edge(kind: str, d: Path) -> tuple[Path, str]:
    """(path, a tensor to cat)."""
    if kind == "hf":
        p = d / "hf"
        ampgen.hf_worst(p, 4, 15000, 1000)
        return p, "0.0"
    p = d / f"edge.{kind.split('-')[0]}"
    if kind == "mcf":
        # 60k overlapping 32-byte names, 8-dim shapes from one dims run, one shared 256-byte
        # payload, 20 KV extras sharing one 500 KB value
        data = ampgen.mcf_worst(60000, MCF_NAME_LEN, 8, 20, 500000, 256)
        name = ampgen.distinct_bytes(60000 + MCF_NAME_LEN)[:MCF_NAME_LEN].decode()
    elif kind == "mcf-sections":
        # 200k sections of distinct types: the directory, once searched per entry (quadratic:
        # 15 s for 160k), must take linear time
        data, name = ampgen.mcf_many_sections(200000), None
    elif kind == "safetensors":
        data, name = ampgen.st_worst(30000, 40000, 4), "0"
    elif kind == "gguf":
        # and 2M u8 in one array: --stringify-meta once kept a 150-byte value per element
        data, name = ampgen.gguf_worst(30000, 50000, 30000, 2000000), "t0"
    elif kind == "ztensor":
        data, name = ampgen.zt_worst(30000, 50000, 50000), "x"
    elif kind == "oinf":
        data, name = ampgen.oinf_worst(20000, 100, 100000, 20000, 512), "t0"
    elif kind == "embd":
        data, name = ampgen.embd_worst(40000, 1000000, 40000), "0"
    else:
        raise ValueError(kind)
    p.write_bytes(data)
    return p, name


EDGE_KINDS = ["mcf", "mcf-sections", "safetensors", "gguf", "ztensor", "oinf", "embd", "hf"]


@pytest.mark.parametrize("kind", EDGE_KINDS)
def test_edge_file_opens_and_every_command_stays_bounded(tbx, tmp_path, kind):
    path, tensor = build_edge(kind, tmp_path)
    # a legal file inside the budget is never refused
    p = subprocess.run([tbx, "validate", "--json", str(path)], capture_output=True)
    doc = json.loads(p.stdout.decode().splitlines()[-1])
    assert p.returncode == 0 and doc.get("valid") is True, p.stdout.decode()[:400]
    check_bounds(tbx, path, ["info", str(path)], tmp_path)
    check_bounds(tbx, path, ["validate", str(path)], tmp_path)
    if tensor is not None:
        check_bounds(tbx, path, ["cat", str(path), tensor], tmp_path)
        check_bounds(tbx, path, ["cat", str(path), tensor, "--as", "f32"], tmp_path)
    converted = 0
    for fmt in (name for name, _ in help_formats(tbx)):
        out = tmp_path / f"out.{fmt}"
        # a target may refuse what it cannot store (a u8 tensor in GGUF, ...): exit 1, bounded
        rc, err = check_bounds(tbx, path, convert_args(path, out, fmt), tmp_path, ok=(0, 1))
        assert b"meta_budget" not in err, err.decode(errors="replace")[:400]
        converted += rc == 0
    assert converted >= 3, f"only {converted} of the conversions of {kind} ran to the end"


# ------------------------------------------------------------------------------------------
# Over files: one trick each, far past the budget
# ------------------------------------------------------------------------------------------
def al(n: int, a: int) -> int:
    return (n + a - 1) // a * a


def mcf_names(d):
    n, length = 150000, 1000
    p = d / "names.mcf"
    p.write_bytes(ampgen.mcf_overlapping_names(n, length))
    # TensorData (empty) and TensorIndex both at 40; entries at 40 + 48, 40 bytes each
    return p, {"tensor.name"}, lambda o: o >= 88 and (o - 88) % 40 == 0 and o < 88 + 40 * n


def mcf_kv(d):
    n, length = 300, 1000000
    p = d / "kv.mcf"
    p.write_bytes(ampgen.mcf_shared_kv_value(n, length))
    # ModelInfo at 40: 88 fixed bytes, the value blob, n 16-byte key blobs, then the KV table
    kv = 40 + al(88 + al(4 + length, 8) + 16 * n, 8)
    return p, {"modelinfo.kv.value_off"}, lambda o: (o - kv - 16) % 24 == 0 and kv < o < kv + 24 * n


def mcf_alias(d):
    p = d / "alias.mcf"
    p.write_bytes(ampgen.mcf_worst(50000, 8, 2, 0, 0, 4096))
    return p, {"tensor.data"}, lambda o: o == 40  # the one payload, at the start of TensorData


def st_meta(d):
    p = d / "meta.safetensors"
    p.write_bytes(ampgen.st_worst(600000, 0, 1))
    # the __metadata__ object: 8-byte length, then '{"__metadata__":' (16 bytes)
    return p, {"header.__metadata__"}, lambda o: o == 8 + 16


def st_shapes(d):
    p = d / "shapes.safetensors"
    p.write_bytes(ampgen.st_worst(0, 150000, 64))
    hlen = struct.unpack_from("<Q", p.read_bytes(), 0)[0]
    return p, {"tensor.shape", "header.json", "tensor.name"}, lambda o: 8 <= o < 8 + hlen


def gguf_arrays(d):
    n = 1500000
    p = d / "arrays.gguf"
    p.write_bytes(ampgen.gguf_worst(0, n, 0))
    # header 24, general.architecture 45 bytes, then "nest": key 12, type 4, array head 12,
    # n inner arrays of 12
    start = 24 + 45
    return p, {'metadata "nest"'}, lambda o: start <= o < start + 12 + 4 + 12 + 12 * n


def gguf_kv(d):
    n = 600000
    p = d / "kv.gguf"
    p.write_bytes(ampgen.gguf_worst(n, 0, 0))
    starts, at = set(), 24 + 45
    for i in range(n):
        starts.add(at)
        at += 8 + len(b"%x" % i) + 4 + 1
    return p, {"metadata"}, lambda o: o in starts


def zt_nulls(d):
    n = 900000
    p = d / "nulls.zt"
    data = ampgen.zt_worst(0, n, 0)
    p.write_bytes(data)
    # the manifest starts after the 8-byte magic and the 72-byte data area
    head = 8 + 72
    return p, {"attributes"}, lambda o: head <= o < len(data) - 16


def oinf_values(d):
    n, length = 2000, 200000
    p = d / "values.oinf"
    p.write_bytes(ampgen.oinf_worst(0, n, length, 0, 0))
    fields, at = set(), 72  # no size variables: the metadata table at 72
    for i in range(n):
        key = len(ampgen._ostr(b"k%x" % i))
        fields.add(at + key + 16)  # after the key: u32 type, u32 flags, u64 nbytes, u64 offset
        at += key + 24
    return p, {"metadata.value_offset"}, lambda o: o in fields


def oinf_alias(d):
    n, payload = 50000, 4096
    p = d / "alias.oinf"
    data = ampgen.oinf_worst(0, 0, 0, n, payload)
    p.write_bytes(data)
    off_data = struct.unpack_from("<Q", data, 53)[0]
    data_off = al(off_data + 8, 8)  # after the (empty) string value payload
    return p, {"tensor.data"}, lambda o: o == data_off


def embd_meta(d):
    n = 800000
    p = d / "meta.weights"
    p.write_bytes(ampgen.embd_worst(n, 0, 0))
    starts, at = set(), 64 + 8
    req = [(b"model_name", b"w"), (b"model_version", b"1"), (b"embedding_dim", b"1"),
           (b"vocab_size", b"0"), (b"num_layers", b"1"), (b"num_attention_heads", b"1"),
           (b"hidden_size", b"1"), (b"intermediate_size", b"1"), (b"max_position_emb", b"1"),
           (b"created_at", b"2024-01-01T00:00:00Z")]
    for k, v in req:
        starts.add(at)
        at += 4 + len(k) + len(v)
    for i in range(n):
        starts.add(at)
        at += 4 + len(b"%x" % i)
    return p, {"metadata"}, lambda o: o in starts


def hf_meta(d):
    p = d / "hfmeta"
    ampgen.hf_worst(p, 2, 10, 400000)
    return p, {"header.__metadata__"}, lambda o: o == 8 + 16


OVER = {"mcf-names": mcf_names, "mcf-kv": mcf_kv, "mcf-alias": mcf_alias,
        "safetensors-meta": st_meta, "safetensors-shapes": st_shapes,
        "gguf-arrays": gguf_arrays, "gguf-kv": gguf_kv, "ztensor-nulls": zt_nulls,
        "oinf-values": oinf_values, "oinf-alias": oinf_alias, "embd-meta": embd_meta,
        "hf-meta": hf_meta}


@pytest.mark.parametrize("case", list(OVER))
def test_over_budget_file_refused_with_field_and_offset(tbx, tmp_path, case):
    path, fields, at_ok = OVER[case](tmp_path)
    rc, err = check_bounds(tbx, path, ["validate", "--json", str(path)], tmp_path, ok=(1,))
    p = subprocess.run([tbx, "validate", "--json", str(path)], capture_output=True)
    doc = json.loads(p.stdout.decode().splitlines()[-1])
    assert doc.get("code") == "TBX_E_LIMIT", doc
    assert doc.get("field") in fields, doc
    assert at_ok(doc.get("offset")), doc
    assert "meta_budget" in doc.get("message", ""), doc
    for args in (["info", str(path)], ["cat", str(path), "t0"],
                 convert_args(path, tmp_path / "out.gguf", "gguf")):
        rc, err = check_bounds(tbx, path, args, tmp_path, ok=(1,))
        assert b"meta_budget" in err, err.decode(errors="replace")[:300]
