"""tensorbox's ggml block kernels against the live gguf-py (PyPI `gguf`).

* the codebooks in src/quant/ggml_tables.c equal gguf-py's copies, entry by entry;
* the committed vectors (tests/data/ggml) still match what the installed gguf-py computes;
* fresh vectors (another seed, four times as many blocks) written by make_ggml_vectors.py into a
  temporary directory pass the C comparison (tests/unit/test_ggml_quant.c, which also checks the
  SIMD kernels against the scalar ones).

The C test binary is TBX_TEST_GGML_QUANT or <repo>/build/tests/unit/test_ggml_quant. A missing
binary or module is a failure, never a skip.
"""
from __future__ import annotations

import os
import re
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import need

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "data" / "ggml"
TABLES = REPO / "src" / "quant" / "ggml_tables.c"
GEN = Path(__file__).resolve().parent / "make_ggml_vectors.py"


def ggml_test_binary() -> str:
    p = os.environ.get("TBX_TEST_GGML_QUANT") or str(REPO / "build" / "tests" / "unit" / "test_ggml_quant")
    if not (os.path.isfile(p) and os.access(p, os.X_OK)):
        pytest.fail(f"test_ggml_quant not built: {p!r} (build the project or set TBX_TEST_GGML_QUANT)",
                    pytrace=False)
    return p


# ------------------------------------------------------------------------------------------
# codebooks
# ------------------------------------------------------------------------------------------
def c_array(src: str, name: str) -> list[int]:
    m = re.search(r"\b" + re.escape(name) + r"\[(\d+)\]\s*=\s*\{(.*?)\};", src, re.S)
    assert m, f"{name} not found in {TABLES}"
    vals = [int(v, 0) for v in re.findall(r"-?0x[0-9a-fA-F]+|-?\d+", m.group(2))]
    assert len(vals) == int(m.group(1)), f"{name}: {len(vals)} values for [{m.group(1)}]"
    return vals


def grid_rows(cls) -> list[list[int]]:
    np = need("numpy")
    cls.init_grid()
    g = np.asarray(cls.grid).reshape(cls.grid_shape)
    return [[int(v) for v in row] for row in g]


@pytest.mark.parametrize("cname,pyname,width", [
    ("tbx_iq2xxs_grid", "IQ2_XXS", 8), ("tbx_iq2xs_grid", "IQ2_XS", 8), ("tbx_iq2s_grid", "IQ2_S", 8),
    ("tbx_iq3xxs_grid", "IQ3_XXS", 4), ("tbx_iq3s_grid", "IQ3_S", 4), ("tbx_iq1s_grid", "IQ1_S", 8),
])
def test_grid_tables_match_gguf_py(cname, pyname, width):
    quants = need("gguf.quants")
    src = TABLES.read_text()
    ours = c_array(src, cname)
    theirs = grid_rows(getattr(quants, pyname))
    assert len(ours) == len(theirs)
    for k, (packed, row) in enumerate(zip(ours, theirs)):
        assert len(row) == width
        # element j in byte j; iq1s bytes are int8 (0xff = -1)
        got = [(packed >> (8 * j)) & 0xFF for j in range(width)]
        want = [v & 0xFF for v in row]
        assert got == want, f"{cname}[{k}]: {got} != {want}"


def test_sign_and_value_tables_match_gguf_py():
    quants = need("gguf.quants")
    src = TABLES.read_text()
    assert bytes(c_array(src, "tbx_ksigns_iq2xs")) == quants.IQ2_XXS.ksigns
    assert tuple(c_array(src, "tbx_kvalues_iq4nl")) == tuple(quants.IQ4_NL.kvalues)
    assert tuple(c_array(src, "tbx_kvalues_mxfp4")) == tuple(quants.MXFP4.kvalues)
    assert tuple(quants.NVFP4.kvalues) == tuple(quants.MXFP4.kvalues)


# ------------------------------------------------------------------------------------------
# vectors
# ------------------------------------------------------------------------------------------
def read_vec(path: Path):
    np = need("numpy")
    blob = path.read_bytes()
    assert blob[:8] == b"TBXGGV01", path
    name = blob[8:24].rstrip(b"\0").decode()
    kind, gid, bs, bb, nb, _ = struct.unpack_from("<6I", blob, 24)
    body = blob[48:]
    if kind == 0:
        blocks = np.frombuffer(body[:nb * bb], dtype=np.uint8)
        f32 = np.frombuffer(body[nb * bb:], dtype="<f4")
    else:
        f32 = np.frombuffer(body[:nb * bs * 4], dtype="<f4")
        blocks = np.frombuffer(body[nb * bs * 4:], dtype=np.uint8)
    assert blocks.size == nb * bb and f32.size == nb * bs, path
    return name, kind, gid, bs, bb, nb, blocks, f32


def test_committed_vectors_match_live_gguf_py():
    np = need("numpy")
    quants = need("gguf.quants")
    T = need("gguf").GGMLQuantizationType
    files = sorted(DATA.glob("*.bin"))
    assert len(files) >= 31, f"committed vectors missing in {DATA}"
    for f in files:
        name, kind, gid, bs, bb, nb, blocks, f32 = read_vec(f)
        qt = T(gid)
        with np.errstate(all="ignore"):
            if kind == 0:
                y = np.asarray(quants.dequantize(blocks.copy(), qt), dtype="<f4").reshape(-1)
                assert y.view("<u4").tobytes() == f32.view("<u4").tobytes(), f"{f.name}: outputs changed"
            else:
                q = np.asarray(quants.quantize(f32.reshape(nb, bs).copy(), qt), dtype=np.uint8).reshape(-1)
                assert q.tobytes() == blocks.tobytes(), f"{f.name}: quantized bytes changed"


def test_fresh_vectors_against_the_c_kernels(tmp_path):
    need("numpy")
    need("gguf")
    binary = ggml_test_binary()
    out = tmp_path / "ggml"
    gen = subprocess.run([sys.executable, str(GEN), str(out), "--seed", "20240917", "--scale", "4"],
                         capture_output=True, text=True, timeout=600)
    assert gen.returncode == 0, gen.stdout + gen.stderr
    env = dict(os.environ, TBX_GGML_VECTORS=str(out), TBX_SOURCE_DIR=str(REPO))
    r = subprocess.run([binary], capture_output=True, text=True, timeout=600, env=env)
    assert r.returncode == 0, f"test_ggml_quant failed on fresh vectors:\n{r.stdout}\n{r.stderr[-4000:]}"
    assert " 0 failed" in r.stdout, r.stdout
