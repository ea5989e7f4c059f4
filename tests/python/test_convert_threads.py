"""convert --quant runs its decode+quantize on worker threads; the output must not depend on how
many (TBX_THREADS), including chunk boundaries that do not divide the tensor evenly."""
import os
import subprocess

import numpy as np
from safetensors.numpy import save_file


def _convert(tbx, src, dst, qtype, threads):
    env = dict(os.environ, TBX_THREADS=str(threads))
    r = subprocess.run([tbx, "convert", str(src), str(dst), "--quant", qtype],
                       env=env, capture_output=True, timeout=300)
    assert r.returncode == 0, r.stderr.decode()
    return dst.read_bytes()


def test_quantized_output_independent_of_thread_count(tbx, tmp_path):
    rng = np.random.default_rng(7)
    tensors = {
        # 3 x 819200 elements: 2 MiB work chunks do not divide it evenly
        "big": rng.standard_normal((3, 819200), dtype=np.float32),
        "odd_rows": rng.standard_normal((37, 512), dtype=np.float32).astype(np.float16),
        "bias": rng.standard_normal(512, dtype=np.float32),          # 1-D: copied
        "ragged": rng.standard_normal((4, 100), dtype=np.float32),   # cols % 256 != 0 for K
    }
    src = tmp_path / "m.safetensors"
    save_file(tensors, str(src))
    for qtype in ("q8_0", "q5_1", "q4_k"):
        outs = [_convert(tbx, src, tmp_path / f"{qtype}-{n}.gguf", qtype, n) for n in (1, 2, 5)]
        assert outs[0] == outs[1] == outs[2], qtype
        assert len(outs[0]) > 0
