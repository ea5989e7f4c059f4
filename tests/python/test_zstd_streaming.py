"""zstd-compressed zTensor data is decoded in one streaming pass, in bounded memory.

The file is a "bomb": 256 MiB of zeros (f32[8192, 8192]) in zstd RLE blocks, 8 KB on disk,
assembled here byte by byte (RFC 8878 frame, RFC 8949 manifest). It is a valid file, so every
command must succeed with the right result, and it must do so in memory bounded by a few MiB
of buffers (not by the 256 MiB the file declares) and in time linear in the decoded size (the
old code decoded the whole component once per 1M-element chunk: quadratic).

Each tbx run goes through a small Python wrapper that reports its exit status, the child's
peak RSS (getrusage(RUSAGE_CHILDREN) of the wrapper, which has no other child) and the wall
time, and counts stdout bytes.
"""
from __future__ import annotations

import json
import os
import struct
import subprocess
import sys

import pytest

from filebuild import cbor

ROWS = COLS = 8192
NBYTES = ROWS * COLS * 4             # 256 MiB declared and decoded
RSS_LIMIT_KB = 64 * 1024             # far below the 256 MiB a whole-component decode needs
TIME_LIMIT_S = 10.0

WRAPPER = r"""
import resource, subprocess, sys, time
t0 = time.monotonic()
p = subprocess.Popen(sys.argv[1:], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
n = zeros = 0
while True:
    b = p.stdout.read(1 << 20)
    if not b:
        break
    n += len(b)
    zeros += b.count(0)
err = p.stderr.read()
rc = p.wait()
dt = time.monotonic() - t0
rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
sys.stdout.write("%d %d %.3f %d %d\n" % (rc, rss, dt, n, zeros))
sys.stdout.write(err.decode("utf-8", "replace"))
"""


def rle_frame(count: int) -> bytes:
    """One zstd frame (window 2 MiB, no content size) of `count` zero bytes in RLE blocks."""
    out = b"\x28\xb5\x2f\xfd" + bytes([0x00, 0x58])
    nblocks = (count + (1 << 17) - 1) >> 17
    for k in range(nblocks):
        size = min(1 << 17, count - (k << 17))
        last = 1 if k == nblocks - 1 else 0
        out += (last | (1 << 1) | (size << 3)).to_bytes(3, "little") + b"\x00"
    return out


def bomb() -> bytes:
    frame = rle_frame(NBYTES)
    manifest = cbor({"version": "1.1.0", "objects": {"w": {
        "shape": [ROWS, COLS], "format": "dense",
        "components": {"data": {"dtype": "f32", "offset": 64, "length": len(frame),
                                "encoding": "zstd"}}}}})
    return (b"ZTEN1000" + bytes(56) + frame + manifest + struct.pack("<Q", len(manifest)) +
            b"ZTEN1000")


@pytest.fixture(scope="module")
def bomb_path(tmp_path_factory):
    p = tmp_path_factory.mktemp("zstream") / "bomb.zt"
    p.write_bytes(bomb())
    assert p.stat().st_size < 16 * 1024
    return p


def measured(tbx, *args, env=None):
    """(exit status, peak RSS in KiB, seconds, stdout bytes, stdout zero bytes, stderr)."""
    e = dict(os.environ)
    e.update(env or {})
    p = subprocess.run([sys.executable, "-c", WRAPPER, tbx, *map(str, args)],
                       capture_output=True, timeout=300, env=e)
    assert p.returncode == 0, p.stderr.decode()
    first, _, rest = p.stdout.decode().partition("\n")
    rc, rss, dt, n, zeros = first.split()
    return int(rc), int(rss), float(dt), int(n), int(zeros), rest


def bounded(what, rc, rss, dt, err):
    assert rc == 0, f"{what}: exit {rc}: {err}"
    assert rss < RSS_LIMIT_KB, f"{what}: peak RSS {rss} KiB (limit {RSS_LIMIT_KB})"
    assert dt < TIME_LIMIT_S, f"{what}: took {dt:.1f} s (limit {TIME_LIMIT_S})"


def test_stats_of_a_zstd_bomb(tbx, bomb_path):
    rc, rss, dt, n, _, err = measured(tbx, "info", "--stats", bomb_path)
    bounded("info --stats", rc, rss, dt, err)
    rc2, _, _, _, _, _ = measured(tbx, "info", "--stats", bomb_path)
    assert rc2 == 0
    p = subprocess.run([tbx, "info", "--stats", str(bomb_path)], capture_output=True, timeout=60)
    out = p.stdout.decode()
    assert "min: 0, max: 0" in out and "std: 0" in out, out


@pytest.mark.parametrize("as_f32", [False, True], ids=["stored", "f32"])
def test_cat_of_a_zstd_bomb(tbx, bomb_path, as_f32):
    args = ["cat", bomb_path, "w"] + (["--as", "f32"] if as_f32 else [])
    rc, rss, dt, n, zeros, err = measured(tbx, *args)
    bounded("cat", rc, rss, dt, err)
    assert n == NBYTES and zeros == NBYTES


@pytest.mark.parametrize("extra,out_name,min_size", [
    ([], "copy.safetensors", NBYTES),
    (["--cast", "f16"], "half.safetensors", NBYTES // 2),
    (["--quant", "q8_0"], "q.gguf", NBYTES // 4),
    # compressing zTensor writer: the tensor is compressed as a stream, not gathered whole
    (["--compress", "3", "--digest", "sha256"], "z.zt", 0),
], ids=["copy", "cast-f16", "quant-q8_0", "zt-compress"])
def test_convert_of_a_zstd_bomb(tbx, bomb_path, tmp_path, extra, out_name, min_size):
    out = tmp_path / out_name
    rc, rss, dt, _, _, err = measured(tbx, "convert", bomb_path, out, *extra,
                                      env={"TBX_THREADS": "2"})
    bounded("convert " + " ".join(extra), rc, rss, dt, err)
    assert out.stat().st_size >= min_size
    if out_name.endswith(".safetensors"):
        with open(out, "rb") as fp:
            (hl,) = struct.unpack("<Q", fp.read(8))
            head = json.loads(fp.read(hl))
            assert head["w"]["shape"] == [ROWS, COLS]
            fp.seek(8 + hl + (NBYTES // 2 if "f16" in extra else NBYTES) // 2)
            assert fp.read(1 << 16) == bytes(1 << 16)
    if out_name.endswith(".zt"):
        assert out.stat().st_size < 64 * 1024  # zeros compress
        p = subprocess.run([tbx, "info", "--json", str(out)], capture_output=True, timeout=60)
        assert p.returncode == 0 and b'"zstd"' in p.stdout, p.stdout[:400]
        rc, rss, dt, _, _, err = measured(tbx, "validate", out)
        bounded("validate of the converted file", rc, rss, dt, err)
    out.unlink()


def test_validate_of_a_zstd_bomb(tbx, bomb_path):
    rc, rss, dt, _, _, err = measured(tbx, "validate", bomb_path)
    bounded("validate", rc, rss, dt, err)


# ------------------------------------------------------------------------------------------
# Many decoders at once: 8 components whose zstd frames each declare a 128 MiB window (no
# content size) and decode to 128 MiB, 34 KB on disk. zstd allocates (and the RLE blocks
# touch) the whole window of every frame it decodes; tbx_validate and tbx_read_batch decode
# up to 8 components at once, so without a budget 8 threads held 8 windows (~0.8-1 GB RSS).
# The decoders of a handle now share one budget of max_decode_window (128 MiB by default):
# each command stays under that window plus 64 MiB.
# ------------------------------------------------------------------------------------------
WIN_N = 8
WIN_BYTES = 1 << 27
WIN_RSS_LIMIT_KB = (128 + 64) * 1024


def window_frame(count: int) -> bytes:
    """One zstd frame, window 128 MiB (descriptor 0x88), no content size, `count` bytes in RLE
    blocks of 128 KiB; block k repeats the byte k & 0xFF."""
    out = b"\x28\xb5\x2f\xfd" + bytes([0x00, 0x88])
    nblocks = (count + (1 << 17) - 1) >> 17
    for k in range(nblocks):
        size = min(1 << 17, count - (k << 17))
        last = 1 if k == nblocks - 1 else 0
        out += (last | (1 << 1) | (size << 3)).to_bytes(3, "little") + bytes([k & 0xFF])
    return out


@pytest.fixture(scope="module")
def windows_path(tmp_path_factory):
    objs, blob = {}, b""
    for i in range(WIN_N):
        fr = window_frame(WIN_BYTES)
        objs["t%d" % i] = {"shape": [WIN_BYTES], "format": "dense", "components": {"data": {
            "dtype": "u8", "offset": 64 + len(blob), "length": len(fr), "encoding": "zstd"}}}
        blob += fr + bytes(-len(fr) % 64)
    manifest = cbor({"version": "1.1.0", "objects": objs})
    p = tmp_path_factory.mktemp("zwindows") / "windows.zt"
    p.write_bytes(b"ZTEN1000" + bytes(56) + blob + manifest + struct.pack("<Q", len(manifest)) +
                  b"ZTEN1000")
    assert p.stat().st_size < 64 * 1024
    return p


def within_budget(what, rc, rss, err):
    assert rc == 0, f"{what}: exit {rc}: {err}"
    assert rss < WIN_RSS_LIMIT_KB, f"{what}: peak RSS {rss} KiB (limit {WIN_RSS_LIMIT_KB})"


@pytest.mark.parametrize("args", [
    ["validate"], ["info", "--stats"], ["cat"], ["convert"],
], ids=["validate", "info-stats", "cat", "convert"])
def test_many_large_windows_share_one_budget(tbx, windows_path, tmp_path, args):
    env = {"TBX_THREADS": "8"}
    if args == ["cat"]:
        rc, rss, _, n, zeros, err = measured(tbx, "cat", windows_path, "t5", env=env)
        within_budget("cat", rc, rss, err)
        assert n == WIN_BYTES and zeros == WIN_BYTES // 256  # blocks 0, 256, 512, 768
        return
    if args == ["convert"]:
        out = tmp_path / "w.safetensors"
        rc, rss, _, _, _, err = measured(tbx, "convert", windows_path, out, env=env)
        within_budget("convert", rc, rss, err)
        with open(out, "rb") as fp:
            (hl,) = struct.unpack("<Q", fp.read(8))
            head = json.loads(fp.read(hl))
            assert head["t7"]["shape"] == [WIN_BYTES]
            b = head["t7"]["data_offsets"][0]
            fp.seek(8 + hl + b + (3 << 17))
            assert fp.read(1 << 17) == bytes([3]) * (1 << 17)
        out.unlink()
        return
    rc, rss, _, _, _, err = measured(tbx, *args, windows_path, env=env)
    within_budget(" ".join(args), rc, rss, err)
