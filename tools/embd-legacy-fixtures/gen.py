"""Regenerates tests/data/embd/'s embd-legacy files and what cpp_embedder's own code says of them
(origin-verdicts.json). Run by gen.sh, by hand, never by CI: it needs a checkout of the origin.

What it does, every step recorded in the verdicts:
  1. builds the inputs: the tiny random BERT of tests/data/embd (tiny-expected.npz, vocab.txt) as
     a Hugging Face directory, and plain.safetensors (a few f32 tensors of 1-4 dimensions, not a
     BERT);
  2. writes them with tbx: tiny-cpp.bin and plain.bin (--to embd-legacy), tiny-spec.weights (the
     specification's layout, for the loader's refusal);
  3. runs the origin's converter (its write_binary, imported from the checkout: torch is not
     needed for it) on the same state dict and vocabulary, at the checkout's commit and at
     613f9bb (the version before the transposition, which made tiny-legacy.bin), and compares
     the bytes;
  4. loads every file with the origin's C++ WeightLoader (loader_check load);
  5. with --minilm DIR (all-MiniLM-L6-v2): tbx's conversion timed (/usr/bin/time -v), the
     converter's bytes compared, the loader's verdict, and the origin's runtime (Embedder) run
     on tbx's file and on the untransposed variant, its embeddings compared with numpy forward
     passes of the safetensors weights (token ids from the tokenizers library): the model as
     sentence-transformers computes it, and cpp_embedder's own arithmetic (reference_embedding).
"""
import argparse
import hashlib
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import safetensors.numpy as stn

SENTENCES = ["the cat sat on the mat", "a man is playing a guitar",
             "tensor files travel between runtimes"]


def sha256(p):
    return hashlib.sha256(Path(p).read_bytes()).hexdigest()


def run(cmd, **kw):
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kw)
    if r.returncode != 0:
        sys.exit(f"failed ({r.returncode}): {' '.join(map(str, cmd))}\n{r.stderr}")
    return r


def converter(path):
    """The origin's convert_weights.py as a module (its top level imports numpy only)."""
    spec = importlib.util.spec_from_file_location(f"cw_{abs(hash(str(path)))}", path)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


def vocab_lines(path):
    """The vocabulary as the converter's load_checkpoint reads it (text mode, rstrip("\\n"))."""
    with open(path, "r", encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f]


def loader(loader_bin, *files):
    out = run([loader_bin, "load", *files]).stdout
    recs = [json.loads(line) for line in out.splitlines()]
    for r in recs:
        r["file"] = Path(r["file"]).name
    return recs


def gelu(x, tanh=False):
    if tanh:
        return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x ** 3)))
    from math import erf
    return 0.5 * x * (1.0 + np.vectorize(erf)(x / np.sqrt(2.0)))


def layer_norm(x, w, b, eps):
    m = x.mean(-1, keepdims=True)
    v = ((x - m) ** 2).mean(-1, keepdims=True)
    return (x - m) / np.sqrt(v + eps) * w + b


def reference_embedding(sd, cfg, ids, origin=False):
    """A sentence embedding by a plain numpy BERT forward pass of the safetensors weights
    (PyTorch's [out, in] linear weights), mean pooling and L2 normalisation, in float64.
    origin=False: the model as sentence-transformers computes it (erf GELU, LayerNorm eps
    1e-12, no padding). origin=True: the arithmetic of cpp_embedder's runtime, read from its
    source (tanh GELU, eps 1e-5, the ids padded with [PAD] to its max_seq_length 256 and no
    attention mask, the mean over the non-[PAD] positions)."""
    g = {k: v.astype(np.float64) for k, v in sd.items()}
    eps = 1e-5 if origin else 1e-12
    real = len(ids)
    if origin:
        ids = list(ids) + [0] * (256 - len(ids))
    n = len(ids)
    x = g["embeddings.word_embeddings.weight"][ids] + \
        g["embeddings.position_embeddings.weight"][:n] + \
        g["embeddings.token_type_embeddings.weight"][0]
    x = layer_norm(x, g["embeddings.LayerNorm.weight"], g["embeddings.LayerNorm.bias"], eps)
    nh = cfg["num_attention_heads"]
    hd = x.shape[1] // nh
    for L in range(cfg["num_hidden_layers"]):
        p = f"encoder.layer.{L}."
        lin = lambda h, name: h @ g[p + name + ".weight"].T + g[p + name + ".bias"]
        q, k, v = (lin(x, f"attention.self.{s}").reshape(n, nh, hd).transpose(1, 0, 2)
                   for s in ("query", "key", "value"))
        s = q @ k.transpose(0, 2, 1) / np.sqrt(hd)
        s = np.exp(s - s.max(-1, keepdims=True))
        ctx = (s / s.sum(-1, keepdims=True) @ v).transpose(1, 0, 2).reshape(n, -1)
        x = layer_norm(x + lin(ctx, "attention.output.dense"),
                       g[p + "attention.output.LayerNorm.weight"],
                       g[p + "attention.output.LayerNorm.bias"], eps)
        h = lin(gelu(lin(x, "intermediate.dense"), tanh=origin), "output.dense")
        x = layer_norm(x + h, g[p + "output.LayerNorm.weight"], g[p + "output.LayerNorm.bias"],
                       eps)
    e = x[:real].mean(0)
    return e / np.linalg.norm(e)


def timed_convert(tbx, src, dst, *args):
    r = run(["/usr/bin/time", "-v", tbx, "convert", src, dst, "--to", "embd-legacy", "--force",
             *args])
    wall = re.search(r"Elapsed \(wall clock\) time.*: (\S+)", r.stderr).group(1)
    rss = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", r.stderr).group(1))
    m, s = wall.split(":")[-2:]
    return {"wall_s": round(int(m) * 60 + float(s), 3), "max_rss_kib": rss}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tbx", required=True)
    ap.add_argument("--loader", required=True, help="loader_check built by gen.sh")
    ap.add_argument("--origin", required=True, help="checkout of the origin repository")
    ap.add_argument("--out", required=True, help="tests/data/embd")
    ap.add_argument("--minilm", help="all-MiniLM-L6-v2 Hugging Face directory (optional)")
    a = ap.parse_args()
    out, origin = Path(a.out), Path(a.origin)
    commit = run(["git", "-C", origin, "rev-parse", "HEAD"]).stdout.strip()
    work = Path(tempfile.mkdtemp(prefix="embd-legacy-fixtures."))
    try:
        head_cw = converter(origin / "cpp_embedder/tools/convert_weights.py")
        old_src = work / "convert_weights_613f9bb.py"
        old_src.write_text(run(["git", "-C", origin, "show",
                                "613f9bb:cpp_embedder/tools/convert_weights.py"]).stdout)
        old_cw = converter(old_src)
        v = {"origin": {"repository": "a-bekheet/vectorized-physics-citations",
                        "directory": "cpp_embedder", "commit": commit,
                        "converter": "cpp_embedder/tools/convert_weights.py (write_binary)",
                        "loader": "cpp_embedder/src/model/weights.cpp (WeightLoader::load)",
                        "runtime": "cpp_embedder/src/model/embedder.cpp (Embedder)"},
             "files": {}}

        # 1-2: the tiny BERT as a Hugging Face directory, written by tbx
        sd = dict(np.load(out / "tiny-expected.npz"))
        hf = work / "tiny-hf"
        hf.mkdir()
        stn.save_file(sd, str(hf / "model.safetensors"))
        shutil.copy(out / "vocab.txt", hf / "vocab.txt")
        (hf / "config.json").write_text(json.dumps({
            "architectures": ["BertModel"], "model_type": "bert", "vocab_size": 16,
            "hidden_size": 8, "num_hidden_layers": 6, "num_attention_heads": 2,
            "intermediate_size": 12, "max_position_embeddings": 10, "type_vocab_size": 2}))
        run([a.tbx, "convert", hf, out / "tiny-cpp.bin", "--to", "embd-legacy", "--force"])
        run([a.tbx, "convert", hf, out / "tiny-spec.weights", "--meta", "model_name=tiny-bert",
             "--force"], env={**os.environ, "SOURCE_DATE_EPOCH": "0"})
        rng = np.random.default_rng(19)
        plain = {"a": rng.standard_normal(3), "b": rng.standard_normal((2, 3)),
                 "c": rng.standard_normal((2, 1, 2)), "d": rng.standard_normal((1, 2, 1, 2)),
                 "fc.weight": rng.standard_normal((3, 2))}
        stn.save_file({k: x.astype(np.float32) for k, x in plain.items()},
                      str(out / "plain.safetensors"))
        run([a.tbx, "convert", out / "plain.safetensors", out / "plain.bin", "--to",
             "embd-legacy", "--force"])

        # 3: the converter's bytes for the same state dict and vocabulary
        voc = vocab_lines(out / "vocab.txt")
        head_cw.write_binary(str(work / "tiny-head.bin"), sd, voc)
        old_cw.write_binary(str(work / "tiny-613f9bb.bin"), sd, voc)
        v["files"]["tiny-cpp.bin"] = {
            "written_by": "tbx convert TINY_HF_DIR tiny-cpp.bin --to embd-legacy",
            "sha256": sha256(out / "tiny-cpp.bin"),
            "origin_converter_sha256": sha256(work / "tiny-head.bin"),
            "identical_to_origin_converter": (out / "tiny-cpp.bin").read_bytes() ==
                                             (work / "tiny-head.bin").read_bytes()}
        v["files"]["tiny-legacy.bin"] = {
            "written_by": "cpp_embedder's converter at 613f9bb (before the transposition)",
            "sha256": sha256(out / "tiny-legacy.bin"),
            "identical_to_converter_613f9bb": (out / "tiny-legacy.bin").read_bytes() ==
                                              (work / "tiny-613f9bb.bin").read_bytes()}
        v["files"]["tiny-spec.weights"] = {
            "written_by": "SOURCE_DATE_EPOCH=0 tbx convert TINY_HF_DIR tiny-spec.weights "
                          "--meta model_name=tiny-bert",
            "sha256": sha256(out / "tiny-spec.weights")}
        v["files"]["plain.bin"] = {
            "written_by": "tbx convert plain.safetensors plain.bin --to embd-legacy",
            "sha256": sha256(out / "plain.bin")}

        # 4: the origin's loader
        for r in loader(a.loader, out / "tiny-cpp.bin", out / "tiny-legacy.bin",
                        out / "tiny-spec.weights", out / "plain.bin"):
            v["files"][r.pop("file")]["loader"] = r

        # 5: the real model
        if a.minilm:
            mdir = Path(a.minilm)
            m = {"command": "tbx convert all-MiniLM-L6-v2/ out.bin --to embd-legacy --drop-meta"}
            mo = work / "minilm-tbx.bin"
            m["tbx_figures"] = [timed_convert(a.tbx, mdir, mo, "--drop-meta") for _ in range(5)]
            m["bytes"] = mo.stat().st_size
            m["sha256"] = sha256(mo)
            # the converter's --model path: AutoModel's state_dict (the safetensors arrays,
            # .astype(float32)) and AutoTokenizer.get_vocab(), i.e. the tokenizers library's
            import tokenizers
            msd = {k: x.astype(np.float32) for k, x in
                   stn.load_file(str(mdir / "model.safetensors")).items()}
            tv = tokenizers.Tokenizer.from_file(str(mdir / "tokenizer.json"))
            tv.no_padding()  # the file pads to 128 for batches; one sentence needs no padding
            tv.no_truncation()
            gv = tv.get_vocab(with_added_tokens=True)
            mvoc = [""] * len(gv)
            for t, i in gv.items():
                if i < len(mvoc):
                    mvoc[i] = t
            m["origin_validate_tensors"] = bool(head_cw.validate_tensors(msd))
            head_cw.write_binary(str(work / "minilm-head.bin"), msd, mvoc)
            old_cw.write_binary(str(work / "minilm-613f9bb.bin"), msd, mvoc)
            m["origin_converter_sha256"] = sha256(work / "minilm-head.bin")
            m["identical_to_origin_converter"] = mo.read_bytes() == \
                (work / "minilm-head.bin").read_bytes()
            rec = loader(a.loader, mo)[0]
            m["loader"] = {k: rec[k] for k in rec if k != "tensors"}
            m["loader"]["tensor_count"] = len(rec.get("tensors", []))
            # the runtime: its tokenizer takes a vocab.txt (the embedded one is not used)
            vt = work / "vocab.txt"
            vt.write_text("".join(t + "\n" for t in mvoc), encoding="utf-8")
            cfg = json.loads((mdir / "config.json").read_text())
            e = json.loads(run([a.loader, "embed", mo, vt, *SENTENCES]).stdout)
            m["runtime"] = {"built": e["built"], "sentences": []}
            for item in e.get("embeddings", []):
                ids = tv.encode(item["text"]).ids
                got = np.array(item["vector"], dtype=np.float64)
                rec = {"text": item["text"], "dims": len(got)}
                for key, origin_math in (("model", False), ("origin_arithmetic", True)):
                    ref = reference_embedding(msd, cfg, ids, origin=origin_math)
                    rec[f"cosine_to_{key}"] = float(got @ ref / np.linalg.norm(got))
                    rec[f"max_abs_diff_to_{key}"] = float(np.abs(got - ref).max())
                m["runtime"]["sentences"].append(rec)
            e = json.loads(run([a.loader, "embed", work / "minilm-613f9bb.bin", vt,
                                SENTENCES[0]]).stdout)
            m["runtime_untransposed_613f9bb"] = {k: e[k] for k in ("built", "error") if k in e}
            v["minilm"] = m

        (out / "origin-verdicts.json").write_text(json.dumps(v, indent=1, ensure_ascii=False)
                                                  + "\n", encoding="utf-8")
        print(json.dumps({k: (x if k != "files" else {f: {kk: vv for kk, vv in d.items()
                                                          if kk != "loader"}
                                                      for f, d in x.items()})
                          for k, x in v.items()}, indent=1)[:6000])
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
