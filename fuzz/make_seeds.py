#!/usr/bin/env python3
"""Writes the fuzz seed corpora, deterministically.

    .venv/bin/python fuzz/make_seeds.py [--check]

fuzz/corpus/safetensors/  valid safetensors files (numpy + the safetensors package, plus
                          hand-built ones for dtypes numpy lacks), scalars, zero-size tensors,
                          metadata, and a set of malformed files.
fuzz/corpus/detect/       a few files of each format the Python peers can write (safetensors,
                          GGUF, zTensor, OINF), a few MCF and EMBD files taken from
                          fuzz/corpus/mcf and fuzz/corpus/embd (so make_mcf_seeds.py and
                          make_embd_seeds.py run first: `make seeds` runs the scripts in name
                          order) and some bytes that are no format at all.

Every file is a few KB at most. The same run gives the same bytes: seeded random data, no
timestamps. Files this script did not write are left alone (a fuzzer's finds copied into a
corpus stay); a file it writes is named after what it holds. --check exits 1 when a file on
disk differs from what the script would write (or is missing).
"""
import argparse
import dataclasses
import json
import os
import struct
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.abspath(__file__))
RNG_SEED = 20240601


def rng(tag):
    """A generator seeded from a fixed seed and a tag, so seeds do not shift when one is added."""
    return np.random.default_rng([RNG_SEED, sum(tag.encode()) * 131 + len(tag)])


# ------------------------------------------------------------------------------------------
# safetensors, built by hand: header length (u64 LE) + JSON header (space padded to 8) + data
# ------------------------------------------------------------------------------------------
def st_raw(header_obj, data, pad=True, header_text=None):
    if header_text is None:
        header_text = json.dumps(header_obj, separators=(",", ":"))
    h = header_text.encode("utf-8") if isinstance(header_text, str) else header_text
    if pad:
        h += b" " * ((8 - len(h) % 8) % 8)
    return struct.pack("<Q", len(h)) + h + data


def st_build(tensors, metadata=None):
    """tensors: list of (name, dtype string, shape, raw bytes), in file order."""
    header = {}
    if metadata is not None:
        header["__metadata__"] = metadata
    data = b""
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": list(shape),
                        "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    return st_raw(header, data)


def safetensors_seeds():
    from safetensors.numpy import save

    out = {}
    r = rng("st")

    # Valid files written by the reference implementation.
    out["valid_f32_matrix.safetensors"] = save(
        {"weight": r.standard_normal((4, 8)).astype(np.float32)})
    out["valid_all_numpy_dtypes.safetensors"] = save({
        "f64": r.standard_normal(5).astype(np.float64),
        "f32": r.standard_normal(5).astype(np.float32),
        "f16": r.standard_normal(5).astype(np.float16),
        "i8": r.integers(-128, 127, 6, dtype=np.int8),
        "i16": r.integers(-30000, 30000, 6, dtype=np.int16),
        "i32": r.integers(-2**31, 2**31 - 1, 6, dtype=np.int32),
        "i64": r.integers(-2**62, 2**62, 6, dtype=np.int64),
        "u8": r.integers(0, 255, 7, dtype=np.uint8),
        "u16": r.integers(0, 65535, 7, dtype=np.uint16),
        "u32": r.integers(0, 2**32 - 1, 7, dtype=np.uint32),
        "u64": r.integers(0, 2**63, 7, dtype=np.uint64),
        "flag": np.array([True, False, True]),
    })
    out["valid_scalars.safetensors"] = save({
        "scalar_f32": np.array(3.5, dtype=np.float32),
        "scalar_i64": np.array(-7, dtype=np.int64),
        "scalar_bool": np.array(True),
    })
    out["valid_zero_size.safetensors"] = save({
        "empty_vec": np.zeros((0,), dtype=np.float32),
        "empty_mat": np.zeros((3, 0), dtype=np.float16),
        "empty_3d": np.zeros((0, 2, 5), dtype=np.int32),
        "after": np.arange(4, dtype=np.float32),
    })
    # (The reference writer orders __metadata__ keys by hash: built by hand to stay stable.)
    out["valid_metadata.safetensors"] = st_build(
        [("a.bias", "F32", [2], np.ones(2, dtype="<f4").tobytes()),
         ("a.weight", "F32", [2, 3], np.arange(6, dtype="<f4").tobytes())],
        metadata={"format": "pt", "model": "tiny", "unicode": "h\u00e9llo \u4e16\u754c",
                  "empty": "", "json": "{\"nested\": [1, 2]}"})
    out["valid_4d.safetensors"] = save(
        {"conv": r.standard_normal((2, 3, 2, 2)).astype(np.float32)})
    out["valid_empty_file.safetensors"] = save({})
    out["valid_many_tensors.safetensors"] = save(
        {"layer.%02d.w" % i: np.full((2,), i, dtype=np.float16) for i in range(40)})

    # Valid files with dtypes numpy has no type for.
    def b(n, tag):
        return bytes(rng(tag).integers(0, 256, n, dtype=np.uint8))

    out["valid_exotic_dtypes.safetensors"] = st_build([
        ("bf16", "BF16", [2, 3], b(12, "bf16")),
        ("f8_e4m3", "F8_E4M3", [8], b(8, "e4m3")),
        ("f8_e5m2", "F8_E5M2", [8], b(8, "e5m2")),
        ("f8_e8m0", "F8_E8M0", [4], b(4, "e8m0")),
        ("c64", "C64", [2], np.array([1, -1, 0.5, 2], dtype=np.float32).tobytes()),
        ("f4", "F4", [2, 4], b(4, "f4")),
        ("f6_e2m3", "F6_E2M3", [4], b(3, "e2m3")),
        ("f6_e3m2", "F6_E3M2", [8], b(6, "e3m2")),
    ])
    out["valid_bf16_metadata_only.safetensors"] = st_build(
        [("x", "BF16", [4], b(8, "bf16b"))], metadata={"k": "v"})
    out["valid_header_padding.safetensors"] = st_raw(
        {"t": {"dtype": "U8", "shape": [3], "data_offsets": [0, 3]}}, b"\x01\x02\x03",
        header_text='{"t":{"dtype":"U8","shape":[3],"data_offsets":[0,3]}}' + " " * 13)
    out["valid_key_order.safetensors"] = st_raw(
        None, b"\x00" * 8,
        header_text='{"b":{"shape":[2],"data_offsets":[4,8],"dtype":"I16"},'
                    '"__metadata__":{"z":"1","a":"2"},'
                    '"a":{"data_offsets":[0,4],"dtype":"F32","shape":[]}}')

    # Malformed files: each breaks one rule.
    one = {"t": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}
    good = st_raw(one, b"\x00" * 8)
    out["bad_empty"] = b""
    out["bad_short_length"] = b"\x10\x00\x00"
    out["bad_length_only"] = struct.pack("<Q", 0)
    out["bad_length_past_end"] = struct.pack("<Q", 4096) + b"{}"
    out["bad_length_huge"] = struct.pack("<Q", 2**63 + 5) + b"{}      "
    out["bad_truncated_data"] = good[:-3]
    out["bad_not_json"] = st_raw(None, b"", header_text="this is not json")
    out["bad_json_array"] = st_raw(None, b"", header_text="[1,2,3]")
    out["bad_json_unterminated"] = st_raw(None, b"", header_text='{"t":{"dtype":"F32"')
    out["bad_offsets_out_of_range"] = st_raw(
        {"t": {"dtype": "F32", "shape": [2], "data_offsets": [0, 800]}}, b"\x00" * 8)
    out["bad_offsets_reversed"] = st_raw(
        {"t": {"dtype": "U8", "shape": [0], "data_offsets": [8, 0]}}, b"\x00" * 8)
    out["bad_overlap"] = st_raw(
        {"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
         "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}}, b"\x00" * 12)
    out["bad_gap"] = st_raw(
        {"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
         "b": {"dtype": "F32", "shape": [1], "data_offsets": [8, 12]}}, b"\x00" * 12)
    out["bad_size_mismatch"] = st_raw(
        {"t": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}}, b"\x00" * 8)
    out["bad_unknown_dtype"] = st_raw(
        {"t": {"dtype": "F128", "shape": [1], "data_offsets": [0, 16]}}, b"\x00" * 16)
    out["bad_negative_dim"] = st_raw(
        {"t": {"dtype": "U8", "shape": [-1], "data_offsets": [0, 0]}}, b"")
    out["bad_shape_overflow"] = st_raw(
        {"t": {"dtype": "F64", "shape": [2**32, 2**32, 16], "data_offsets": [0, 0]}}, b"")
    out["bad_float_offsets"] = st_raw(
        None, b"\x00" * 8,
        header_text='{"t":{"dtype":"F32","shape":[2],"data_offsets":[0,8.0]}}')
    out["bad_duplicate_name"] = st_raw(
        None, b"\x00" * 8,
        header_text='{"t":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},'
                    '"t":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}')
    out["bad_invalid_utf8"] = st_raw(
        None, b"\x00" * 4,
        header_text=b'{"\xff\xfe":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}')
    out["bad_nul_in_name"] = st_raw(
        None, b"\x00" * 4,
        header_text='{"a\\u0000b":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}')
    out["bad_metadata_not_string"] = st_raw(
        {"__metadata__": {"n": 5, "l": [1, 2], "o": {"x": None}},
         "t": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]}}, b"\x07")
    out["bad_metadata_not_object"] = st_raw(
        {"__metadata__": "text",
         "t": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]}}, b"\x07")
    out["bad_missing_field"] = st_raw(
        {"t": {"dtype": "U8", "data_offsets": [0, 1]}}, b"\x07")
    out["edge_extra_field"] = st_raw(
        {"t": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1], "extra": 1}}, b"\x07")
    out["bad_deep_nesting"] = st_raw(
        None, b"", header_text='{"__metadata__":' + "[" * 600 + "]" * 600 + "}")
    out["bad_f4_odd_elements"] = st_raw(
        {"t": {"dtype": "F4", "shape": [3], "data_offsets": [0, 1]}}, b"\x12")
    out["bad_trailing_bytes"] = good + b"\x00\x00\x00\x00"
    out["bad_header_not_padded_nul"] = st_raw(
        None, b"\x00" * 8,
        header_text=b'{"t":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}\x00', pad=False)
    out["bad_big_offsets"] = st_raw(
        {"t": {"dtype": "U8", "shape": [1],
               "data_offsets": [18446744073709551615, 18446744073709551616]}}, b"")
    return out


# ------------------------------------------------------------------------------------------
# Other formats, through their Python peers (files written to a temporary directory)
# ------------------------------------------------------------------------------------------
def gguf_seeds(tmp):
    import gguf

    out = {}

    def write(name, fill):
        path = os.path.join(tmp, name)
        w = gguf.GGUFWriter(path, "llama")
        fill(w)
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
        with open(path, "rb") as fh:
            out[name] = fh.read()

    r = rng("gguf")

    def basic(w):
        w.add_uint32("tiny.u32", 7)
        w.add_int8("tiny.i8", -3)
        w.add_float32("tiny.f32", 0.25)
        w.add_float64("tiny.f64", -1e300)
        w.add_bool("tiny.bool", True)
        w.add_string("tiny.name", "seed")
        w.add_array("tiny.ints", [1, 2, 3])
        w.add_array("tiny.strs", ["a", "bc", ""])
        w.add_tensor("tok_embd", r.standard_normal((4, 8)).astype(np.float32))
        w.add_tensor("norm", np.ones(8, dtype=np.float16))
        w.add_tensor("ids", np.arange(5, dtype=np.int32))

    def quant(w):
        from gguf.quants import quantize
        x = r.standard_normal((2, 64)).astype(np.float32)
        for qt in (gguf.GGMLQuantizationType.Q8_0, gguf.GGMLQuantizationType.Q4_0):
            q = quantize(x, qt)
            w.add_tensor("w_" + qt.name.lower(), q, raw_shape=q.shape, raw_dtype=qt)

    write("tiny.gguf", basic)
    write("quant.gguf", quant)
    write("empty.gguf", lambda w: None)
    return out


def ztensor_seeds(tmp):
    import ztensor

    out = {}
    r = rng("zt")

    def write(name, tensors):
        path = os.path.join(tmp, name)
        with ztensor.Writer(path) as w:
            for tname, arr, comp in tensors:
                w.add_tensor(tname, arr, compress=comp)
        with open(path, "rb") as fh:
            out[name] = fh.read()

    write("raw.zt", [("a", r.standard_normal((3, 4)).astype(np.float32), False),
                     ("b", np.arange(6, dtype=np.int16), False)])
    write("zstd.zt", [("z", np.tile(np.arange(16, dtype=np.float32), 8), True)])
    return out


def oinf_seeds():
    try:
        import oinf_encoder
    except ImportError:
        return {}
    r = rng("oinf")

    @dataclasses.dataclass
    class Tiny:
        n: int
        scale: float
        label: str
        weight: np.ndarray
        bias: np.ndarray

    inst = Tiny(n=3, scale=0.5, label="seed",
                weight=r.standard_normal((2, 3)).astype(np.float32),
                bias=np.arange(3, dtype=np.int8))
    return {"tiny.oinf": oinf_encoder.dataclass_to_oinf(inst)}


def detect_seeds(st):
    out = {}
    for name in ("valid_f32_matrix.safetensors", "valid_metadata.safetensors",
                 "valid_exotic_dtypes.safetensors", "bad_overlap", "bad_empty"):
        out["st_" + name] = st[name]
    with tempfile.TemporaryDirectory() as tmp:
        for maker in (gguf_seeds, ztensor_seeds):
            try:
                out.update(maker(tmp))
            except Exception as exc:  # a peer that fails is reported, not fatal
                print("make_seeds: %s failed: %s" % (maker.__name__, exc), file=sys.stderr)
    try:
        out.update(oinf_seeds())
    except Exception as exc:
        print("make_seeds: oinf_seeds failed: %s" % exc, file=sys.stderr)
    # MCF (plain, q4, k3, int8, HF sections, a bad offset) and EMBD (spec, bad checksum, legacy)
    for target, names in (("mcf", ("files_plain_dtypes.mcf", "files_quant_edge_q4.mcf",
                                   "files_quant_edge_k3.mcf", "int8_activations.mcf",
                                   "files_hf_sharded_qwen.mcf", "mutated_ti_data_past_eof.mcf")),
                          ("embd", ("sample.weights", "bad-hash.weights", "legacy-small.bin"))):
        for name in names:
            with open(os.path.join(ROOT, "corpus", target, name), "rb") as fh:
                out[target + "_" + name] = fh.read()
    out["noise_64"] = bytes(rng("noise").integers(0, 256, 64, dtype=np.uint8))
    out["magic_gguf_truncated"] = b"GGUF\x03\x00\x00\x00"
    out["magic_gguf_huge_counts"] = (b"GGUF" + struct.pack("<IQQ", 3, 2**62, 2**62))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true",
                    help="compare with the files on disk instead of writing")
    args = ap.parse_args()

    st = safetensors_seeds()
    corpora = {"safetensors": st, "detect": detect_seeds(st)}
    differ = 0
    for target, files in corpora.items():
        d = os.path.join(ROOT, "corpus", target)
        os.makedirs(d, exist_ok=True)
        for name, blob in sorted(files.items()):
            assert len(blob) <= 16384, (name, len(blob))
            path = os.path.join(d, name)
            old = None
            if os.path.exists(path):
                with open(path, "rb") as fh:
                    old = fh.read()
            if old == blob:
                continue
            differ += 1
            if args.check:
                print("make_seeds: %s differs" % os.path.relpath(path, ROOT))
            else:
                with open(path, "wb") as fh:
                    fh.write(blob)
        print("make_seeds: %s: %d files" % (target, len(files)))
    if args.check and differ:
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
