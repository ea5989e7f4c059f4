"""Memory and time bounds of every command on files built to amplify memory (issue 9, item 3).

Small files can describe very many small things: a GGUF array of millions of empty strings
(8 bytes each in the file), a safetensors header of hundreds of thousands of one-element tensors
(about 75 bytes each). A reader that spends a heap object per string, or a JSON tree per
tensor, needs 15-20 times the file size. The rule checked here: every command (info,
info --json, validate, validate --ggml, cat, convert to each writable format) stays within
2 x file size + 64 MiB of peak RSS, measured per process by GNU time, and within a time bound
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


TIME_BIN = "/usr/bin/time"


def run_measured(cmd: list[str], tmp: Path) -> tuple[int, int, float, bytes]:
    """Runs cmd under GNU time; returns (exit status, peak RSS in bytes, seconds, stderr).

    Not wait4() from this process: on Linux a child's peak RSS starts at what it inherited at
    fork, i.e. the whole pytest process, and survives exec. GNU time forks tbx from a small
    process, so its figure is tbx's own."""
    if not (os.path.isfile(TIME_BIN) and os.access(TIME_BIN, os.X_OK)):
        pytest.fail(f"{TIME_BIN} (GNU time) is needed to measure peak RSS", pytrace=False)
    rep = tmp / "time.txt"
    t0 = time.monotonic()
    p = subprocess.run([TIME_BIN, "-o", str(rep), "-f", "%M"] + cmd, stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE)
    secs = time.monotonic() - t0
    kb = int(rep.read_text().split()[-1])
    return p.returncode, kb * 1024, secs, p.stderr


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("amplify")
    g = d / "strings.gguf"
    s = d / "tensors.safetensors"
    build_gguf_strings(g, N_STRINGS)
    build_safetensors_tensors(s, N_TENSORS)
    return {"gguf": (g, "t"), "safetensors": (s, "t0000007")}


def commands(path: Path, tensor: str, out: Path):
    """(name, arguments after tbx, accepted exit codes) of every command on one file."""
    p = str(path)
    # --ggml on a safetensors file reports one problem (not GGUF): exit 1, still bounded
    cmds = [("info", ["info", p], {0}),
            ("info --json", ["info", "--json", p], {0}),
            ("validate", ["validate", p], {0}),
            ("validate --ggml", ["validate", "--ggml", p], {0, 1}),
            ("cat", ["cat", p, tensor], {0}),
            ("cat --as f32", ["cat", p, tensor, "--as", "f32"], {0})]
    for fmt in WRITABLE:
        # lossless: a target that cannot store the metadata refuses with exit 1
        cmds.append((f"convert --to {fmt}",
                     ["convert", p, f"{out}.{fmt}", "--to", fmt, "--force"], {0, 1}))
        # lossy: OINF strings are identifiers, so it drops what it cannot store
        lossy = "--drop-meta" if fmt == "oinf" else "--stringify-meta"
        cmds.append((f"convert --to {fmt} {lossy}",
                     ["convert", p, f"{out}.s.{fmt}", "--to", fmt, "--force", lossy], {0}))
    return cmds


COMMAND_NAMES = [c[0] for c in commands(Path("f"), "t", Path("o"))]

def cases():
    for kind in ("gguf", "safetensors"):
        for name in COMMAND_NAMES:
            yield pytest.param(kind, name, id=f"{kind}-{name}")


@pytest.mark.parametrize("kind,name", list(cases()))
def test_command_within_memory_and_time_bounds(tbx, files, tmp_path, kind, name):
    path, tensor = files[kind]
    size = path.stat().st_size
    bound = 2 * size + 64 * MIB
    args, ok_codes = next((a, ok) for n, a, ok in commands(path, tensor, tmp_path / "out")
                          if n == name)
    rc, rss, secs, err = run_measured([tbx] + args, tmp_path)
    assert rc in ok_codes, f"{name}: exit {rc}: {err.decode(errors='replace')[:300]}"
    assert rss <= bound, (f"{kind} file of {size / MIB:.1f} MiB: tbx {name} peaked at "
                          f"{rss / MIB:.0f} MiB, bound 2 x file + 64 MiB = {bound / MIB:.0f} MiB")
    assert secs <= TIME_LIMIT, f"tbx {name} took {secs:.1f} s (limit {TIME_LIMIT:.0f} s)"


def test_measurement_sees_tbx_alone(tbx, tmp_path):
    """The figure is tbx's own: a trivial command stays far below this process's size."""
    rc, rss, _, _ = run_measured([tbx, "--version"], tmp_path)
    assert rc == 0
    assert rss < 16 * MIB, f"tbx --version measured at {rss / MIB:.0f} MiB"


def test_ztensor_string_array_round_trip(tbx, files, tmp_path):
    """A zTensor file written from the GGUF of millions of empty strings reads back (the reader
    once refused what the writer wrote: one value node charged per string), within the bound of
    its own size, and converts back to the same tokens."""
    src, _ = files["gguf"]
    zt = tmp_path / "strings.ztensor"
    p = subprocess.run([tbx, "convert", str(src), str(zt), "--to", "ztensor"], capture_output=True)
    assert p.returncode == 0, p.stderr.decode(errors="replace")[:300]
    bound = 2 * zt.stat().st_size + 64 * MIB
    for args in (["info", str(zt)], ["validate", str(zt)]):
        rc, rss, secs, err = run_measured([tbx] + args, tmp_path)
        assert rc == 0, f"{args[0]}: exit {rc}: {err.decode(errors='replace')[:300]}"
        assert rss <= bound, f"tbx {args[0]} on the zTensor file peaked at {rss / MIB:.0f} MiB"
        assert secs <= TIME_LIMIT
    back = tmp_path / "back.gguf"
    p = subprocess.run([tbx, "convert", str(zt), str(back), "--to", "gguf"], capture_output=True)
    assert p.returncode == 0, p.stderr.decode(errors="replace")[:300]
    # the GGUF read back: the same array header (type string, N_STRINGS items), all empty
    data = back.read_bytes()
    key = _gguf_str(b"tokenizer.ggml.tokens")
    at = data.index(key) + len(key)
    assert struct.unpack_from("<IIQ", data, at) == (9, 8, N_STRINGS)
    at += 16
    assert data[at:at + 8 * N_STRINGS] == bytes(8 * N_STRINGS)


def test_ztensor_mixed_array_after_strings(tbx, tmp_path):
    """An attribute array that starts with strings (stored compactly) and then holds other
    values is read in full, in order."""
    import json
    from test_ztensor_malformed import AREA, dense, manifest, zt_file
    p = tmp_path / "mixed.ztensor"
    p.write_bytes(zt_file(AREA, manifest({"x": dense()},
                                         attributes={"mix": ["a", "", 7, None, "bc", [1]],
                                                     "strs": ["u", "", "vw"]})))
    r = subprocess.run([tbx, "info", "--json", str(p)], capture_output=True)
    assert r.returncode == 0, r.stderr.decode(errors="replace")[:300]
    text = r.stdout.decode()
    assert '"a"' in text and '"bc"' in text and '"vw"' in text
    doc = json.loads(text)
    found = json.dumps(doc)
    assert '"a", "", 7, null, "bc", [1]' in found, found[:400]
    assert '"u", "", "vw"' in found, found[:400]


N_STRINGS_BACK = 5_000_000  # the old writer path needed ~96 MB here, the bound is ~77 MB


def test_ztensor_strings_back_to_gguf_within_bound(tbx, tmp_path):
    """Converting the zTensor file written from a GGUF of millions of empty strings back to
    GGUF stays within 2 x its (zTensor) size + 64 MiB: the writer borrows the input's values
    instead of cloning them and writes the GGUF header in pieces (it held the array three
    times before: the model, the writer's copy, the whole header)."""
    g = tmp_path / "strings5m.gguf"
    build_gguf_strings(g, N_STRINGS_BACK)
    zt = tmp_path / "strings5m.ztensor"
    p = subprocess.run([tbx, "convert", str(g), str(zt), "--to", "ztensor"], capture_output=True)
    assert p.returncode == 0, p.stderr.decode(errors="replace")[:300]
    g.unlink()
    bound = 2 * zt.stat().st_size + 64 * MIB
    back = tmp_path / "back.gguf"
    for fmt, out in (("gguf", back), ("ztensor", tmp_path / "again.ztensor")):
        rc, rss, secs, err = run_measured([tbx, "convert", str(zt), str(out), "--to", fmt],
                                          tmp_path)
        assert rc == 0, f"--to {fmt}: exit {rc}: {err.decode(errors='replace')[:300]}"
        assert rss <= bound, (f"zTensor of {zt.stat().st_size / MIB:.1f} MiB --to {fmt} peaked "
                              f"at {rss / MIB:.0f} MiB, bound {bound / MIB:.0f} MiB")
        assert secs <= TIME_LIMIT
    data = back.read_bytes()
    key = _gguf_str(b"tokenizer.ggml.tokens")
    at = data.index(key) + len(key)
    assert struct.unpack_from("<IIQ", data, at) == (9, 8, N_STRINGS_BACK)


def test_ztensor_mixed_signs_stay_packed(tbx, tmp_path):
    """An int32 GGUF array of alternating signs is encoded as CBOR unsigned and negative
    integers. The zTensor reader once kept one value node (~150 bytes) per element of such an
    array, refused more than max(1000000, manifest bytes / 8) of them, and the writer refused to
    write what it would refuse; it now packs unsigned and negative integers together as i64
    (8 bytes an element), so 1.1 million of them convert, read back within 2 x file + 64 MiB,
    and come back to GGUF with their values (read by gguf-py). A writer refusing what its
    reader refuses is checked by test_ztensor.c (writer_refuses_what_reader_refuses)."""
    gguf = pytest.importorskip("gguf")
    n = 1_100_000
    vals = [1, -1] * (n // 2)
    src = tmp_path / "signs.gguf"
    with open(src, "wb") as f:
        f.write(b"GGUF" + struct.pack("<IQQ", 3, 1, 2))
        f.write(_gguf_str(b"general.architecture") + struct.pack("<I", 8) + _gguf_str(b"llama"))
        f.write(_gguf_str(b"mixed.signs") + struct.pack("<IIQ", 9, 5, n))
        f.write(struct.pack("<%di" % n, *vals))
        f.write(_gguf_str(b"t") + struct.pack("<IQIQ", 1, 4, 0, 0))
        f.write(bytes((-f.tell()) % 32))
        f.write(struct.pack("<4f", 1, 2, 3, 4))
    zt = tmp_path / "signs.ztensor"
    p = subprocess.run([tbx, "convert", str(src), str(zt), "--to", "ztensor"], capture_output=True)
    assert p.returncode == 0, p.stderr.decode(errors="replace")[:300]
    bound = 2 * zt.stat().st_size + 64 * MIB
    back = tmp_path / "back.gguf"
    for args in (["info", str(zt)], ["validate", str(zt)],
                 ["convert", str(zt), str(back), "--to", "gguf"]):
        rc, rss, secs, err = run_measured([tbx] + args, tmp_path)
        assert rc == 0, f"{args[0]}: exit {rc}: {err.decode(errors='replace')[:300]}"
        assert rss <= bound, f"tbx {args[0]} peaked at {rss / MIB:.0f} MiB, bound {bound / MIB:.0f}"
        assert secs <= TIME_LIMIT
    field = gguf.GGUFReader(str(back)).fields["mixed.signs"]
    got = [int(field.parts[i][0]) for i in field.data]
    assert got == vals
