"""Cost of the progress callback on a conversion (issue 24): tensorbox.convert of a 256 MiB f32
safetensors file to q8_0 GGUF, without progress= and with a Python callable (the worst case:
the GIL taken at every call), alternating, N runs each; medians in one run.

    PYTHONPATH=.pyext .venv/bin/python bench/bench_progress.py [N]
"""
import os
import statistics
import sys
import tempfile
import time

import numpy as np
import safetensors.numpy as stn
import tensorbox as tb

N = int(sys.argv[1]) if len(sys.argv) > 1 else 7
with tempfile.TemporaryDirectory() as d:
    src, dst = os.path.join(d, "in.safetensors"), os.path.join(d, "out.gguf")
    rng = np.random.default_rng(1)
    stn.save_file({f"w{i}": rng.standard_normal((4096, 2048), dtype=np.float32)
                   for i in range(8)}, src)
    calls = [0]

    def cb(done, total):
        calls[0] += 1

    times = {"none": [], "callable": []}
    for _ in range(N):
        for k in times:
            t0 = time.perf_counter()
            tb.convert(src, dst, quant="q8_0", force=True, sync=False,
                       progress=cb if k == "callable" else None)
            times[k].append(time.perf_counter() - t0)
    size = os.path.getsize(src)
    for k, v in times.items():
        med = statistics.median(v)
        print(f"{k:9s} median {med * 1000:8.1f} ms  {size / med / 1e6:7.1f} MB/s  "
              f"runs {', '.join(f'{x * 1000:.0f}' for x in v)}")
    print(f"callback calls per conversion: {calls[0] // N}")
    a, b = statistics.median(times["none"]), statistics.median(times["callable"])
    print(f"difference: {(b - a) / a * 100:+.2f}%")
