"""The error of llama-quantize's presets written to MCF (docs/formats/mcf.md, "llama-quantize's
presets") beside llama.cpp's own file of the same preset: RMSE over every quantized weight, MCF's
payloads decoded by numpy (tests/python/test_mcf_presets.py) against the Hugging Face weights,
llama.cpp's tensors (llama_model_quantize on tbx's f32 GGUF of the directory) dequantized by
gguf-py against that f32 GGUF; and the two files' sizes.

    TBX=build/tbx .venv/bin/python bench/bench_mcf_presets.py HF_DIR NAME PRESET...
"""
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "python"))

import numpy as np  # noqa: E402
import gguf  # noqa: E402
from gguf.quants import dequantize  # noqa: E402
from safetensors.numpy import load_file  # noqa: E402

import llama_quantize_ref as ref  # noqa: E402
import test_mcf_presets as T  # noqa: E402


def main():
    tbx = os.environ.get("TBX", "build/tbx")
    hf, name, presets = Path(sys.argv[1]), sys.argv[2], sys.argv[3:]
    W = load_file(str(hf / "model.safetensors"))
    d = Path(tempfile.mkdtemp(prefix="bench_mcf_presets."))
    f32 = d / f"{name}-f32.gguf"
    subprocess.run([tbx, "convert", hf, f32], check=True, capture_output=True)
    fr = {t.name: t for t in gguf.GGUFReader(str(f32)).tensors}
    for preset in presets:
        rq = d / f"{preset}.gguf"
        ref.quantize(f32, rq, preset)
        se_l = n_l = 0
        for lt in gguf.GGUFReader(str(rq)).tensors:
            if lt.tensor_type.name in ("F32", "F16", "BF16"):
                continue
            o = np.asarray(fr[lt.name].data, dtype=np.float64)
            l = dequantize(lt.data, lt.tensor_type).reshape(o.shape)
            se_l += ((l - o) ** 2).sum()
            n_l += o.size
        mq = d / f"{preset}.mcf"
        for method in ("best", "mantle"):
            r = subprocess.run([tbx, "convert", hf, mq, "--force", "--drop-sections", "--quant",
                                preset, "--quant-method", method], capture_output=True, text=True)
            if r.returncode:
                print(name, preset, "refused:", r.stderr.strip().splitlines()[-1][:200])
                break
            se = n = 0
            for hn, t in T.mcf_tensors(mq.read_bytes()).items():
                if t[0] not in T.KIND:
                    continue
                x = W[hn].astype(np.float64)
                se += ((T.decoded(t).astype(np.float64) - x) ** 2).sum()
                n += x.size
            a, b = np.sqrt(se / n), np.sqrt(se_l / n_l)
            print(f"{name} {preset} {method}: MCF RMSE {a:.4g} ({mq.stat().st_size} B), "
                  f"llama.cpp RMSE {b:.4g} ({rq.stat().st_size} B), ratio {a / b:.3f}")


if __name__ == "__main__":
    main()
