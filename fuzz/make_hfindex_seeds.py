#!/usr/bin/env python3
"""Writes the seed corpus of fuzz/fuzz_hfindex.c (fuzz/corpus/hfindex/), deterministically.

    .venv/bin/python fuzz/make_hfindex_seeds.py [--check]

Each seed is a model.safetensors.index.json for the directory the target builds: two shards,
model-00001-of-00002.safetensors (tensors a, b) and model-00002-of-00002.safetensors (c). The
valid index as transformers writes it (indent 2, sorted keys), a compact one, one with escaped
names, and one of each hostile kind the reader checks (duplicates, traversal, absolute paths,
missing or unmapped shards and tensors, a tensor in the wrong shard, bad JSON, bad UTF-8).
--check exits 1 when a file on disk differs from what the script would write (or is missing).
"""
import argparse
import json
import os
import sys

ROOT = os.path.dirname(os.path.abspath(__file__))
S1 = "model-00001-of-00002.safetensors"
S2 = "model-00002-of-00002.safetensors"


def idx(wm: str, before: str = '"metadata":{"total_size":20},') -> bytes:
    return ("{" + before + '"weight_map":' + wm + "}").encode()


def seeds() -> dict:
    good = {"metadata": {"total_size": 20}, "weight_map": {"a": S1, "b": S1, "c": S2}}
    m = '{"a":"%s","b":"%s","c":"%s"}'
    return {
        "valid_hf.json": (json.dumps(good, indent=2, sort_keys=True) + "\n").encode(),
        "valid_compact.json": idx(m % (S1, S1, S2)),
        "valid_escaped.json": idx('{"\\u0061":"%s","b":"model-0000\\u0031-of-00002.safetensors",'
                                  '"c":"%s"}' % (S1, S2)),
        "valid_no_metadata.json": idx(m % (S1, S1, S2), before=""),
        "dup_top_key.json": b'{"weight_map":{},"weight_map":' + (m % (S1, S1, S2)).encode() + b"}",
        "dup_tensor.json": idx('{"a":"%s","a":"%s","b":"%s","c":"%s"}' % (S1, S1, S1, S2)),
        "traversal.json": idx(m % ("../" + S1, S1, S2)),
        "absolute.json": idx(m % ("/tmp/" + S1, S1, S2)),
        "missing_shard.json": idx(m % (S1, S1, "model-00003-of-00003.safetensors")),
        "missing_tensor.json": idx('{"a":"%s","b":"%s","c":"%s","d":"%s"}' % (S1, S1, S2, S2)),
        "wrong_shard.json": idx(m % (S2, S1, S2)),
        "unmapped_shard.json": idx('{"a":"%s","b":"%s"}' % (S1, S1)),
        "unmapped_tensor.json": idx('{"a":"%s","c":"%s"}' % (S1, S2)),
        "value_not_string.json": idx('{"a":1,"b":"%s","c":"%s"}' % (S1, S2)),
        "map_array.json": idx("[]"),
        "truncated.json": idx(m % (S1, S1, S2))[:-5],
        "trailing.json": idx(m % (S1, S1, S2)) + b" {}",
        "bad_utf8.json": idx(m % (S1, S1, S2)).replace(b'"b"', b'"\xff"'),
        "deep_metadata.json": idx(m % (S1, S1, S2), before='"metadata":' + "[" * 64 + "]" * 64 + ","),
        "nul_name.json": idx('{"a\\u0000":"%s","b":"%s","c":"%s"}' % (S1, S1, S2)),
    }


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--check", action="store_true")
    a = ap.parse_args()
    d = os.path.join(ROOT, "corpus", "hfindex")
    os.makedirs(d, exist_ok=True)
    bad = 0
    for name, data in sorted(seeds().items()):
        p = os.path.join(d, name)
        if a.check:
            if not os.path.isfile(p) or open(p, "rb").read() != data:
                print(f"differs: {p}", file=sys.stderr)
                bad = 1
        else:
            with open(p, "wb") as fh:
                fh.write(data)
    return bad


if __name__ == "__main__":
    sys.exit(main())
