"""An input truncated while tbx (or the Python package) reads it: exit 0 or 1, never a signal.

Issue 19, item 2: with ``--mmap``, truncating the input while ``tbx convert … .mcf``, ``… .zt``
or ``tbx cat`` ran killed tbx with SIGBUS (exit 135) and left ``.*.tbx-tmp.*`` behind. Here a
192 MiB f32 safetensors file (and a zTensor copy with sha256 digests, which ``validate``
hashes) is truncated to 40 % of its size while each command runs, mapped and buffered, at
three delays taken from the command's own measured duration. Every time: the exit status is 0
or 1 (never a signal: returncode < 0 or > 128), no temporary file is left, and when the exit
status is 0 the output is complete and holds the tensors the input was built from (read back
with the peers: safetensors, gguf-py, ztensor; MCF with tensorbox). For each command and mode
at least one trial must have been in progress at the truncation and have noticed it ("file
ended"), so the test cannot pass on runs that finished before the cut.

The Python reads run in this process (pytest has faulthandler enabled, whose SIGBUS handler
the library's chains to): zero-copy arrays of a mapped file read zeros past the cut, and
``tensorbox.check_input(array)`` must then raise ``FormatError`` (``TBX_E_TRUNCATED``);
buffered reads raise it from the read.
"""
from __future__ import annotations

import faulthandler
import glob
import os
import shutil
import subprocess
import threading
import time
import zlib

import numpy as np
import pytest

from conftest import need

NT = 4
SHAPE = (3072, 4096)  # 48 MiB of f32 per tensor, 192 MiB in all
CUT_FRACTION = 0.4
DELAYS = (0.1, 0.35, 0.6)  # fractions of the command's measured duration
RETRIES = 4  # when no cut fell inside the work (a loaded machine): up to 4 more, each earlier


def _delays(dur, noticed):
    """The delays of the trials: DELAYS of the measured duration, then, while no trial has
    noticed a cut made during its reading (noticed() false), earlier and earlier ones."""
    for frac in DELAYS:
        yield max(0.003, dur * frac)
    d = max(0.003, dur * DELAYS[0])
    for _ in range(RETRIES):
        if noticed():
            return
        d = max(0.002, d / 2)
        yield d


def _arrays():
    n = SHAPE[0] * SHAPE[1]
    base = (np.arange(n, dtype=np.uint32) % 65521).astype(np.float32)
    return {f"t{i}": (base * np.float32(i + 1) + np.float32(i)).reshape(SHAPE) for i in range(NT)}


def _crc(a) -> int:
    return zlib.crc32(memoryview(np.ascontiguousarray(a)).cast("B"))


@pytest.fixture(scope="module")
def inputs(tmp_path_factory, tbx):
    st_np = need("safetensors.numpy")
    d = tmp_path_factory.mktemp("shrink")
    arrays = _arrays()
    crcs = {k: _crc(v) for k, v in arrays.items()}
    raw = {k: v.tobytes() for k, v in arrays.items() if k == f"t{NT - 1}"}
    src = d / "pristine.safetensors"
    st_np.save_file(arrays, str(src))
    del arrays
    zt = d / "pristine.zt"
    r = subprocess.run([tbx, "convert", str(src), str(zt), "--digest", "sha256", "--no-sync"],
                       capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return {"dir": d, "st": src, "zt": zt, "crcs": crcs, "last_raw": raw[f"t{NT - 1}"]}


def _tmp_left(d) -> list:
    return glob.glob(os.path.join(str(d), ".*tbx-tmp*"))


# ---- what a complete output must hold (the tensors the input was built from) ----------------
def _check_safetensors(path, crcs):
    st_np = need("safetensors.numpy")
    got = st_np.load_file(str(path))
    assert {k: _crc(v) for k, v in got.items()} == crcs


def _check_gguf(path, crcs):
    gguf = need("gguf")
    got = {t.name: _crc(np.asarray(t.data)) for t in gguf.GGUFReader(str(path)).tensors}
    assert got == crcs


def _check_zt(path, crcs):
    ztensor = need("ztensor")
    zr = ztensor.Reader(str(path))
    got = {n: _crc(np.array(zr.read_tensor(n, to="numpy"), copy=True)) for n in zr.tensor_names}
    assert got == crcs


def _check_mcf(path, crcs):
    tensorbox = need("tensorbox")
    with tensorbox.safe_open(str(path)) as f:
        got = {k: _crc(f.get_tensor(k)) for k in f.keys()}
    assert got == crcs


CONVERTS = {".mcf": _check_mcf, ".zt": _check_zt, ".gguf": _check_gguf,
            ".safetensors": _check_safetensors}


def _commands(inputs, work):
    """(name, argv builder, input kind, output check) for every command under test."""
    cmds = []
    for ext, check in CONVERTS.items():
        out = work / f"out{ext}"
        cmds.append((f"convert{ext}", lambda tbx, inp, out=out: [tbx, "convert", inp, str(out)],
                     "st", out, check))
    cmds.append(("cat", lambda tbx, inp: [tbx, "cat", inp, f"t{NT - 1}"], "st", None, None))
    cmds.append(("validate", lambda tbx, inp: [tbx, "validate", inp], "zt", None, None))
    return cmds


def _one_run(argv, inp, cut, delay, stdout_path):
    """Starts argv, truncates inp to cut after delay seconds (None: never); returns
    (returncode, stderr, in_progress_at_cut, seconds)."""
    t0 = time.monotonic()
    with open(stdout_path, "wb") as so:
        p = subprocess.Popen(argv, stdout=so, stderr=subprocess.PIPE)
        in_progress = None
        if delay is not None:
            time.sleep(delay)
            in_progress = p.poll() is None
            os.truncate(inp, cut)
        try:
            _, err = p.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            p.kill()
            p.communicate()
            pytest.fail(f"{argv}: hung")
    return p.returncode, err.decode(errors="replace"), in_progress, time.monotonic() - t0


@pytest.mark.parametrize("mode", ["mmap", "buffered"])
def test_cli_shrinking_input(inputs, tbx, tmp_path, mode):
    extra = ["--mmap"] if mode == "mmap" else []
    crcs = inputs["crcs"]
    for name, build, kind, out, check in _commands(inputs, tmp_path):
        pristine = inputs[kind]
        inp = str(tmp_path / f"in{pristine.suffix}")
        size = os.path.getsize(pristine)
        cut = int(size * CUT_FRACTION) + 123  # not page-aligned
        stdout_path = tmp_path / "stdout.bin"

        def outcome_ok(rc, err, label):
            assert 0 <= rc <= 1, f"{label}: exit {rc} (a signal or a crash)\n{err}"
            assert not _tmp_left(tmp_path), f"{label}: temporary files left: {_tmp_left(tmp_path)}"
            if rc == 0 and check is not None:
                check(out, crcs)
            if rc == 0 and name == "cat":
                assert stdout_path.read_bytes() == inputs["last_raw"], label

        # the untruncated run: its duration places the cuts, and its output must be right
        shutil.copyfile(pristine, inp)
        rc, err, _, dur = _one_run(build(tbx, inp) + extra, inp, cut, None, stdout_path)
        assert rc == 0, f"{name} {mode} (no cut): exit {rc}\n{err}"
        outcome_ok(rc, err, f"{name} {mode} (no cut)")
        if out is not None:
            out.unlink()

        noticed = []
        for delay in _delays(dur, lambda: bool(noticed)):
            shutil.copyfile(pristine, inp)
            label = f"{name} {mode} cut at {delay:.3f} s of {dur:.3f} s"
            rc, err, in_progress, _ = _one_run(build(tbx, inp) + extra, inp, cut, delay,
                                               stdout_path)
            print(f"{label}: exit {rc}, in progress {in_progress}, {err.strip()[:100]!r}")
            outcome_ok(rc, err, label)
            if name == "validate":  # its problems go to stdout
                err += stdout_path.read_bytes().decode(errors="replace")
            if rc == 1:
                assert "file ended" in err or "past the end of the file" in err, f"{label}: {err}"
            if in_progress and rc == 1 and "file ended" in err:
                noticed.append(delay)
            if out is not None and out.exists():
                out.unlink()
        assert noticed, f"{name} {mode}: no trial was cut while reading (duration {dur:.3f} s)"


def _python_read(path, mapped, state):
    """Reads every tensor of path; returns {name: crc}. Mapped: the zero-copy arrays are all
    handed out first (nothing is read yet), then read (the cut falls there: their bytes past it
    read as zeros), each checked with tensorbox.check_input after use; buffered: pread into
    arrays."""
    tensorbox = need("tensorbox")
    from tensorbox import _tensorbox as _tb

    got = {}
    if mapped:
        with tensorbox.safe_open(path) as f:
            arrays = {k: f.get_tensor(k) for k in f.keys()}
    state["reading"] = True
    try:
        if mapped:
            for k, a in arrays.items():
                assert a.base is not None  # a view of the mapping, not a copy
                got[k] = _crc(a)
                tensorbox.check_input(a)
        else:
            f = _tb._File(path, mmap=False)
            try:
                for i, k in enumerate(f.names()):
                    a = np.empty(SHAPE, np.float32)
                    f.read_into(i, a.reshape(-1).view(np.uint8))
                    got[k] = _crc(a)
            finally:
                f.close()
    finally:
        state["reading"] = False
    return got


@pytest.mark.parametrize("mode", ["mmap", "buffered"])
def test_python_shrinking_input(inputs, tmp_path, mode):
    tensorbox = need("tensorbox")
    assert faulthandler.is_enabled()  # pytest's: the library's handler must chain past it
    mapped = mode == "mmap"
    inp = str(tmp_path / "in.safetensors")
    size = os.path.getsize(inputs["st"])
    cut = int(size * CUT_FRACTION) + 123
    shutil.copyfile(inputs["st"], inp)
    t0 = time.monotonic()
    assert _python_read(inp, mapped, {}) == inputs["crcs"]
    dur = time.monotonic() - t0
    noticed = 0
    for delay in _delays(dur, lambda: noticed > 0):
        shutil.copyfile(inputs["st"], inp)
        state = {"reading": False}
        seen = {}

        def cut_now(state=state, seen=seen):
            seen["in_progress"] = state["reading"]
            os.truncate(inp, cut)

        timer = threading.Timer(delay, cut_now)
        timer.start()
        try:
            got = _python_read(inp, mapped, state)
            print(f"python {mode} cut at {delay:.3f} s of {dur:.3f} s: complete")
        except tensorbox.FormatError as e:
            print(f"python {mode} cut at {delay:.3f} s of {dur:.3f} s: {e.code}, "
                  f"in progress {seen.get('in_progress')}: {e}")
            assert e.code == "TBX_E_TRUNCATED", e
            assert e.offset is not None
            noticed += bool(seen.get("in_progress"))
        else:
            assert got == inputs["crcs"]  # complete: read before the cut
        finally:
            timer.join()
    assert noticed, f"python {mode}: no read was cut while in progress ({dur:.3f} s)"


def test_python_check_input_after_a_cut(inputs, tmp_path):
    """Deterministic: arrays handed out, then the file cut; nothing crashes, the arrays read
    zeros past the cut, check_input raises for them and for the file, not for copies."""
    tensorbox = need("tensorbox")
    inp = str(tmp_path / "in.safetensors")
    shutil.copyfile(inputs["st"], inp)
    size = os.path.getsize(inp)
    cut = int(size * CUT_FRACTION) + 123
    with tensorbox.safe_open(inp) as f:
        arrays = {k: f.get_tensor(k) for k in f.keys()}
        copy0 = np.array(arrays["t0"], copy=True)
        tensorbox.check_input(arrays["t0"])  # intact: no error
        f.check_input()
        os.truncate(inp, cut)
        # t3 lies wholly past the cut: its zero-copy bytes now read as zeros, no signal
        assert not np.any(arrays[f"t{NT - 1}"])
        with pytest.raises(tensorbox.FormatError) as ei:
            tensorbox.check_input(arrays[f"t{NT - 1}"][5:7])  # through a slice's .base chain
        assert ei.value.code == "TBX_E_TRUNCATED" and ei.value.offset == cut
        with pytest.raises(tensorbox.FormatError):
            f.check_input()
        tensorbox.check_input(copy0)  # owns its bytes
        # a new read: below the cut it works, past it it raises
        assert _crc(f.get_tensor("t0")) == inputs["crcs"]["t0"]
        with pytest.raises(tensorbox.FormatError) as ei:
            f.get_tensor(f"t{NT - 1}")
        assert ei.value.code == "TBX_E_TRUNCATED"
