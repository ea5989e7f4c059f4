#!/usr/bin/env python3
"""Generates the sample model files of examples/ (deterministically).

    .venv/bin/python examples/make_examples.py [--out-dir DIR]

tiny-mlp.safetensors: a small two-layer transformer-shaped set of weights (about 1.6 MB):
f16 token embeddings, bf16 attention projections, f32 MLP weights, biases and layer norms,
an i64 position-ids tensor and an f32 scalar, written by the safetensors library.

tiny-embedder/: a Hugging Face sentence-transformers directory shaped like all-MiniLM-L6-v2 (a
BERT encoder with mean pooling), at toy size (about 200 KB): config.json, model.safetensors,
a WordPiece tokenizer over the characters and words of a few sentences, saved by the
`tokenizers` package (tokenizer.json and vocab.txt), tokenizer_config.json, special_tokens_map.json, modules.json,
sentence_bert_config.json and 1_Pooling/config.json. Random weights (fixed seed): it is a sample
for the conversions (`tbx convert examples/tiny-embedder model.gguf|.mcf|.weights`), not a model
that embeds anything usefully.

Determinism: the values come from a fixed numpy seed. The safetensors library writes the
entries of `__metadata__` in an unspecified (hash) order, so after writing, the header is
re-serialised with the metadata keys in the order given below. The re-serialisation uses
the same compact JSON and the same padding, and is checked to reproduce the library's own
bytes for the order it chose, so the result is exactly a file the library could write.
"""
from __future__ import annotations

import argparse
import json
import struct
import sys
from collections import OrderedDict
from pathlib import Path

try:
    import ml_dtypes
    import numpy as np
    import safetensors
    import safetensors.numpy as stn
except ImportError as e:  # pragma: no cover
    sys.exit(f"make_examples.py: missing Python package ({e}); "
             f"run: .venv/bin/pip install -r python/requirements-dev.txt")

SEED = 20240611
D_MODEL = 128
D_FF = 512
VOCAB = 1000
N_LAYERS = 2
N_POS = 64

METADATA = OrderedDict([
    ("format", "pt"),
    ("model", "tiny-mlp"),
    ("license", "CC0-1.0"),
    ("description", "tensorbox sample: 2-layer transformer-shaped random weights"),
    ("d_model", str(D_MODEL)),
    ("n_layers", str(N_LAYERS)),
])


def tiny_mlp_tensors() -> dict:
    rng = np.random.default_rng(SEED)

    def normal(shape, scale):
        return rng.standard_normal(shape) * scale

    t = {}
    t["embed_tokens.weight"] = normal((VOCAB, D_MODEL), 0.02).astype(np.float16)
    t["embed_positions.position_ids"] = np.arange(N_POS, dtype=np.int64).reshape(1, N_POS)
    for i in range(N_LAYERS):
        p = f"layers.{i}."
        for proj in ("q_proj", "k_proj", "v_proj", "o_proj"):
            t[p + f"attn.{proj}.weight"] = normal((D_MODEL, D_MODEL), D_MODEL ** -0.5).astype(ml_dtypes.bfloat16)
        t[p + "attn.o_proj.bias"] = np.zeros(D_MODEL, dtype=ml_dtypes.bfloat16)
        t[p + "mlp.up.weight"] = normal((D_FF, D_MODEL), D_MODEL ** -0.5).astype(np.float32)
        t[p + "mlp.up.bias"] = normal((D_FF,), 0.01).astype(np.float32)
        t[p + "mlp.down.weight"] = normal((D_MODEL, D_FF), D_FF ** -0.5).astype(np.float32)
        t[p + "mlp.down.bias"] = normal((D_MODEL,), 0.01).astype(np.float32)
        t[p + "norm.weight"] = (1.0 + normal((D_MODEL,), 0.05)).astype(np.float32)
        t[p + "norm.bias"] = normal((D_MODEL,), 0.01).astype(np.float32)
    t["final_norm.weight"] = np.ones(D_MODEL, dtype=np.float32)
    t["final_norm.bias"] = np.zeros(D_MODEL, dtype=np.float32)
    t["logit_scale"] = np.array(1.0 / np.sqrt(D_MODEL), dtype=np.float32)
    return t


def _dump(obj) -> bytes:
    # The reference writer's JSON: compact separators, UTF-8 (non-ASCII not escaped).
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def with_metadata_order(blob: bytes, order) -> bytes:
    """Re-serialises the header of `blob` with __metadata__ keys in `order`."""
    (n,) = struct.unpack_from("<Q", blob, 0)
    raw = blob[8:8 + n]
    body = raw.rstrip(b" ")
    header = json.loads(body.decode("utf-8"), object_pairs_hook=OrderedDict)
    if _dump(header) != body:
        raise SystemExit("make_examples.py: cannot reproduce the safetensors header bytes; "
                         "refusing to rewrite it")
    meta = header["__metadata__"]
    if set(meta) != set(order):
        raise SystemExit("make_examples.py: metadata keys changed while writing")
    header["__metadata__"] = OrderedDict((k, meta[k]) for k in order)
    new_body = _dump(header)
    assert len(new_body) == len(body)
    return blob[:8] + new_body + raw[len(body):] + blob[8 + n:]


def write_tiny_mlp(out_dir: Path) -> Path:
    tensors = tiny_mlp_tensors()
    blob = stn.save(tensors, metadata=dict(METADATA))
    blob = with_metadata_order(blob, list(METADATA))
    # Self-check through the library before writing.
    loaded = dict(safetensors.deserialize(blob))
    assert set(loaded) == set(tensors)
    for name, arr in tensors.items():
        assert bytes(loaded[name]["data"]) == arr.tobytes(), name
    path = out_dir / "tiny-mlp.safetensors"
    tmp = path.with_suffix(".safetensors.tmp")
    tmp.write_bytes(blob)
    tmp.replace(path)
    return path


EMB_SEED = 20261124
EMB_CORPUS = [
    "tensorbox reads, writes, validates and converts model files.",
    "A sentence embedder maps a sentence to a vector.",
    "The quick brown fox jumps over the lazy dog.",
    "Weights travel in containers: safetensors, GGUF, MCF, EMBD and more.",
    "Every byte is read through one bounds-checked cursor.",
]
EMB_SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def _write_json(path: Path, obj) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj, indent=2) + "\n")


def write_tiny_embedder(out_dir: Path) -> Path:
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors
    d = out_dir / "tiny-embedder"
    d.mkdir(parents=True, exist_ok=True)
    # the vocabulary is built here, not trained (the trainer's order is not deterministic):
    # special tokens, then every character alone and as a ##continuation, then the words
    words = sorted({w.strip(".,:").lower() for line in EMB_CORPUS for w in line.split()} - {""})
    chars = sorted({c for line in EMB_CORPUS for c in line.lower() if not c.isspace()})
    tokens = EMB_SPECIAL + chars + ["##" + c for c in chars] + [w for w in words if len(w) > 1]
    tok = Tokenizer(models.WordPiece(vocab={t: i for i, t in enumerate(tokens)},
                                     unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece(prefix="##")
    tok.add_special_tokens(EMB_SPECIAL)  # "added_tokens", flagged special, as BERT's have them
    cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", cls), ("[SEP]", sep)])
    tok.save(str(d / "tokenizer.json"))
    vocab = sorted(tok.get_vocab().items(), key=lambda kv: kv[1])
    (d / "vocab.txt").write_text("".join(t + "\n" for t, _ in vocab))
    V, E, L, H, FF, P = len(vocab), 32, 2, 4, 64, 64
    _write_json(d / "config.json", {
        "_name_or_path": "tensorbox/tiny-embedder", "architectures": ["BertModel"],
        "model_type": "bert", "vocab_size": V, "hidden_size": E, "num_hidden_layers": L,
        "num_attention_heads": H, "intermediate_size": FF, "hidden_act": "gelu",
        "max_position_embeddings": P, "type_vocab_size": 2, "layer_norm_eps": 1e-12,
        "pad_token_id": 0, "position_embedding_type": "absolute", "torch_dtype": "float32"})
    _write_json(d / "tokenizer_config.json", {
        "do_lower_case": True, "unk_token": "[UNK]", "sep_token": "[SEP]", "pad_token": "[PAD]",
        "cls_token": "[CLS]", "mask_token": "[MASK]", "tokenizer_class": "BertTokenizer",
        "model_max_length": P})
    _write_json(d / "special_tokens_map.json", {
        "unk_token": "[UNK]", "sep_token": "[SEP]", "pad_token": "[PAD]", "cls_token": "[CLS]",
        "mask_token": "[MASK]"})
    _write_json(d / "modules.json", [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling",
         "type": "sentence_transformers.models.Pooling"},
        {"idx": 2, "name": "2", "path": "2_Normalize",
         "type": "sentence_transformers.models.Normalize"}])
    _write_json(d / "sentence_bert_config.json", {"max_seq_length": P, "do_lower_case": False})
    _write_json(d / "1_Pooling" / "config.json", {
        "word_embedding_dimension": E, "pooling_mode_cls_token": False,
        "pooling_mode_mean_tokens": True, "pooling_mode_max_tokens": False,
        "pooling_mode_mean_sqrt_len_tokens": False})
    rng = np.random.default_rng(EMB_SEED)
    g = lambda *s, sc=0.05: (rng.standard_normal(s) * sc).astype(np.float32)  # noqa: E731
    W = OrderedDict()
    W["embeddings.position_ids"] = np.arange(P, dtype=np.int64).reshape(1, P)
    W["embeddings.word_embeddings.weight"] = g(V, E, sc=0.5)
    W["embeddings.position_embeddings.weight"] = g(P, E, sc=0.1)
    W["embeddings.token_type_embeddings.weight"] = g(2, E, sc=0.1)
    W["embeddings.LayerNorm.weight"] = 1 + g(E)
    W["embeddings.LayerNorm.bias"] = g(E)
    for l in range(L):
        p = f"encoder.layer.{l}."
        for m in ("query", "key", "value"):
            W[p + f"attention.self.{m}.weight"] = g(E, E, sc=0.2)
            W[p + f"attention.self.{m}.bias"] = g(E)
        W[p + "attention.output.dense.weight"] = g(E, E, sc=0.2)
        W[p + "attention.output.dense.bias"] = g(E)
        W[p + "attention.output.LayerNorm.weight"] = 1 + g(E)
        W[p + "attention.output.LayerNorm.bias"] = g(E)
        W[p + "intermediate.dense.weight"] = g(FF, E, sc=0.2)
        W[p + "intermediate.dense.bias"] = g(FF)
        W[p + "output.dense.weight"] = g(E, FF, sc=0.2)
        W[p + "output.dense.bias"] = g(E)
        W[p + "output.LayerNorm.weight"] = 1 + g(E)
        W[p + "output.LayerNorm.bias"] = g(E)
    W["pooler.dense.weight"] = g(E, E, sc=0.2)
    W["pooler.dense.bias"] = g(E)
    # one metadata key: the library's (hash) order of several keys would not be deterministic
    stn.save_file(dict(W), str(d / "model.safetensors"), metadata={"format": "pt"})
    return d


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out-dir", type=Path, default=Path(__file__).resolve().parent,
                    help="output directory (default: examples/)")
    args = ap.parse_args(argv)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    p = write_tiny_mlp(args.out_dir)
    print(f"wrote {p} ({p.stat().st_size} bytes)")
    d = write_tiny_embedder(args.out_dir)
    size = sum(f.stat().st_size for f in d.rglob("*") if f.is_file())
    print(f"wrote {d}/ ({size} bytes in all)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
