"""Memory and time bounds of every command on files built to amplify memory (issue 9, item 3).

Small files can describe very many small things: a GGUF array of millions of empty strings
(8 bytes each in the file), a safetensors header of hundreds of thousands of one-element tensors
(about 75 bytes each). A reader that spends a heap object per string, or a JSON tree per
tensor, needs 15-20 times the file size. The rule checked here: every command (info,
info --json, validate, validate --ggml, cat, convert to each writable format) stays within
2 x file size + 64 MiB of peak RSS, measured per process with wait4(), and within a time bound
that a quadratic algorithm would not meet.

The files are scaled to keep the whole module well under a minute on two cores while the old
code (one heap value per string, a jansson tree per header, three opens for validate --ggml)
exceeds the bound several times over: 1.4 GB for a 96 MB GGUF, 1.37 GB for a 75 MB safetensors
file. The files are built byte by byte here, independently of tensorbox.
"""
from __future__ import annotations

import os
import struct
import subprocess
import time
from pathlib import Path

import pytest

MIB = 1024 * 1024
N_STRINGS = 2_500_000   # GGUF: 20 MB of string lengths
N_TENSORS = 200_000     # safetensors: ~15 MB of header
TIME_LIMIT = 20.0       # seconds per command; linear code needs well under 2 s here
WRITABLE = ["safetensors", "gguf", "ztensor", "oinf"]


def _gguf_str(s: bytes) -> bytes:
    return struct.pack("<Q", len(s)) + s


def build_gguf_strings(path: Path, n: int) -> None:
    """GGUF v3: general.architecture, an array of n empty strings, one 4-element f32 tensor."""
    with open(path, "wb") as f:
        f.write(b"GGUF" + struct.pack("<IQQ", 3, 1, 2))
        f.write(_gguf_str(b"general.architecture") + struct.pack("<I", 8) + _gguf_str(b"llama"))
        f.write(_gguf_str(b"tokenizer.ggml.tokens") + struct.pack("<IIQ", 9, 8, n))
        f.write(bytes(8 * n))  # n strings of length 0
        f.write(_gguf_str(b"t") + struct.pack("<IQIQ", 1, 4, 0, 0))
        f.write(bytes((-f.tell()) % 32))
        f.write(struct.pack("<4f", 1, 2, 3, 4))


def build_safetensors_tensors(path: Path, n: int) -> None:
    """n one-element F32 tensors tiling the data section, plus a little __metadata__."""
    parts = ['"__metadata__":{"format":"pt"}']
    parts += ['"t%07d":{"dtype":"F32","shape":[1],"data_offsets":[%d,%d]}' % (i, 4 * i, 4 * i + 4)
              for i in range(n)]
    h = ("{" + ",".join(parts) + "}").encode()
    h += b" " * ((-len(h)) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        f.write(struct.pack("<f", 1.5) * n)


def run_measured(cmd: list[str]) -> tuple[int, int, float, bytes]:
    """Runs cmd; returns (exit status, peak RSS in bytes of that process alone, seconds, stderr)."""
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    err = p.stderr.read()
    _, status, ru = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    return p.returncode, ru.ru_maxrss * 1024, time.monotonic() - t0, err


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("amplify")
    g = d / "strings.gguf"
    s = d / "tensors.safetensors"
    build_gguf_strings(g, N_STRINGS)
    build_safetensors_tensors(s, N_TENSORS)
    return {"gguf": (g, "t"), "safetensors": (s, "t0000007")}


def commands(tbx: str, path: Path, tensor: str, out: Path):
    yield "info", [tbx, "info", str(path)], {0}
    yield "info --json", [tbx, "info", "--json", str(path)], {0}
    yield "validate", [tbx, "validate", str(path)], {0}
    # --ggml on a safetensors file reports one problem (not GGUF): exit 1, still bounded
    yield "validate --ggml", [tbx, "validate", "--ggml", str(path)], {0, 1}
    yield "cat", [tbx, "cat", str(path), tensor], {0}
    yield "cat --as f32", [tbx, "cat", str(path), tensor, "--as", "f32"], {0}
    for fmt in WRITABLE:
        # lossless: a target that cannot store the metadata refuses with exit 1
        yield f"convert --to {fmt}", [tbx, "convert", str(path), str(out) + "." + fmt, "--to",
                                      fmt, "--force"], {0, 1}
        # lossy: OINF strings are identifiers, so it drops what it cannot store
        lossy = "--drop-meta" if fmt == "oinf" else "--stringify-meta"
        yield f"convert --to {fmt} {lossy}", [
            tbx, "convert", str(path), str(out) + ".s." + fmt, "--to", fmt, "--force", lossy], {0}


# The safetensors header is still parsed into one jansson tree (about 19x the header size);
# the streaming path is the remaining part of issue 9 item 3. strict: once it passes, the mark
# must go.
SAFETENSORS_OPEN = pytest.mark.xfail(strict=True, reason="safetensors header still parsed as "
                                     "one jansson tree (issue 9 item 3, remaining)")


@pytest.mark.parametrize("kind", ["gguf", pytest.param("safetensors", marks=SAFETENSORS_OPEN)])
def test_every_command_within_memory_and_time_bounds(tbx, files, tmp_path, kind):
    path, tensor = files[kind]
    size = path.stat().st_size
    bound = 2 * size + 64 * MIB
    over = []
    for name, cmd, ok_codes in commands(tbx, path, tensor, tmp_path / "out"):
        rc, rss, secs, err = run_measured(cmd)
        assert rc in ok_codes, f"{name}: exit {rc}: {err.decode(errors='replace')[:300]}"
        if rss > bound or secs > TIME_LIMIT:
            over.append(f"{name}: {rss / MIB:.0f} MiB, {secs:.1f} s")
        for p in tmp_path.glob("out*"):
            p.unlink()
    assert not over, (f"{kind} file of {size / MIB:.1f} MiB, bound {bound / MIB:.0f} MiB and "
                      f"{TIME_LIMIT:.0f} s per command; over: " + "; ".join(over))
