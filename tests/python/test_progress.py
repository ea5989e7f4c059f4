"""Progress (issue 24): `tbx convert`'s bar on a terminal, none elsewhere, and Python's
progress= callable on tensorbox.convert.

The input is a safetensors file written here by PyPI `safetensors` (numpy); every expected
figure comes from the arrays written (their byte counts), never from tensorbox's output.
`tbx` runs under a real pseudo-terminal (python's pty module) for the terminal case.
"""
from __future__ import annotations

import os
import pty
import re
import select
import subprocess

import pytest

from conftest import need

np = need("numpy")
stn = need("safetensors.numpy")

ROWS, COLS = 2048, 2048  # "big": 16 MiB of f32, 8 jobs of the engine (2^19 values each)


def make_input(path):
    big = (np.arange(ROWS * COLS, dtype=np.float32) % 61 - 30).reshape(ROWS, COLS) / 8
    small = np.linspace(-1, 1, 3 * 64, dtype=np.float32).reshape(3, 64)
    stn.save_file({"big": big, "small": small}, str(path))
    return big.nbytes + small.nbytes


def human(n):
    """The size as the bar prints it: B, then one decimal of KiB, MiB, ..."""
    if n < 1024:
        return f"{n} B"
    x, u = float(n), 0
    units = ["B", "KiB", "MiB", "GiB", "TiB"]
    while x >= 1024 and u < 4:
        x /= 1024
        u += 1
    return f"{x:.1f} {units[u]}"


def run_pty(argv, timeout=120, stdout_file=None):
    """Runs argv with stderr on a pseudo-terminal; returns (returncode, stdout, terminal bytes).
    stdout_file: a path that takes stdout (large outputs: a pipe read only at the end would
    fill and stall the child)."""
    master, slave = pty.openpty()
    sink = open(stdout_file, "wb") if stdout_file else None
    p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=sink or subprocess.PIPE,
                         stderr=slave)
    os.close(slave)
    got = b""
    while True:
        r, _, _ = select.select([master], [], [], timeout)
        if not r:
            p.kill()
            raise AssertionError("no output from the terminal in time")
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the child closed its side
            break
        if not chunk:
            break
        got += chunk
    os.close(master)
    if sink:
        p.wait(timeout)
        sink.close()
        return p.returncode, open(stdout_file, "rb").read(), got
    out = p.stdout.read()
    p.wait(timeout)
    return p.returncode, out, got


def test_bar_on_a_terminal(tbx, tmp_path):
    src, dst = tmp_path / "in.safetensors", tmp_path / "out.gguf"
    total = make_input(src)
    rc, _, term = run_pty([tbx, "convert", str(src), str(dst), "--quant", "q8_0"])
    assert rc == 0, term
    text = term.decode()
    assert "\r\x1b[K" in text  # redrawn in place
    last = text.rstrip("\r\n").split("\r\x1b[K")[-1]
    # the final line: 100%, the bytes done of the total, a throughput and the time left
    m = re.search(r"converting +100\.0%  (\S+ \S+) / (\S+ \S+)  (\S+ \S+)/s  ETA (\S+)", last)
    assert m, repr(last)
    assert m.group(1) == m.group(2) == human(total)
    assert m.group(3)[0].isdigit()
    assert m.group(4) == "0:00"
    assert text.endswith("\n") or "\n" in text  # the line is finished, not left hanging
    assert dst.exists()


def test_no_bar_without_a_terminal(tbx, tmp_path):
    src, dst = tmp_path / "in.safetensors", tmp_path / "out.gguf"
    make_input(src)
    r = subprocess.run([tbx, "convert", str(src), str(dst), "--quant", "q8_0"],
                       stdin=subprocess.DEVNULL, capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert b"\r" not in r.stderr and b"\x1b" not in r.stderr and b"ETA" not in r.stderr
    assert b"converting" not in r.stderr


def test_quiet_on_a_terminal(tbx, tmp_path):
    src, dst = tmp_path / "in.safetensors", tmp_path / "out.gguf"
    make_input(src)
    rc, _, term = run_pty([tbx, "convert", str(src), str(dst), "--quant", "q8_0", "--quiet"])
    assert rc == 0, term
    assert b"\r" not in term.replace(b"\r\n", b"\n") and b"ETA" not in term, term


# ---- Python: progress= --------------------------------------------------------------------
tb = need("tensorbox")


def test_python_progress_calls(tmp_path):
    src, dst = tmp_path / "in.safetensors", tmp_path / "out.gguf"
    total = make_input(src)
    calls = []
    tb.convert(src, dst, quant="q8_0", progress=lambda d, t: calls.append((d, t)))
    assert len(calls) >= 3  # the jobs of "big", then its end, then "small"
    assert all(t == total for _, t in calls)
    done = [d for d, _ in calls]
    assert done == sorted(done)
    assert calls[-1] == (total, total)
    assert any(0 < d < ROWS * COLS * 4 for d in done)  # inside "big"


class Stop(Exception):
    pass


@pytest.mark.parametrize("at", [1, 3])
def test_python_progress_exception_cancels(tmp_path, at):
    src, dst = tmp_path / "in.safetensors", tmp_path / "out.gguf"
    make_input(src)
    n = [0]

    def cb(done, total):
        n[0] += 1
        if n[0] == at:
            raise Stop(f"stop at {done} of {total}")

    with pytest.raises(Stop, match="stop at"):
        tb.convert(src, dst, quant="q8_0", progress=cb)
    assert n[0] == at  # no call after the one that raised
    assert not dst.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.safetensors"]


def test_python_progress_exception_keeps_existing_output(tmp_path):
    src, dst = tmp_path / "in.safetensors", tmp_path / "out.gguf"
    make_input(src)
    dst.write_bytes(b"old contents")

    def cb(done, total):
        if done == total:
            raise Stop("at the end")

    with pytest.raises(Stop):
        tb.convert(src, dst, quant="q8_0", progress=cb, force=True)
    assert dst.read_bytes() == b"old contents"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.safetensors", "out.gguf"]


def test_python_progress_not_callable(tmp_path):
    src, dst = tmp_path / "in.safetensors", tmp_path / "out.gguf"
    make_input(src)
    with pytest.raises(TypeError, match="progress"):
        tb.convert(src, dst, progress=42)
    assert not dst.exists()


def test_diff_bar_on_a_terminal_only(tbx, tmp_path):
    src = tmp_path / "in.safetensors"
    total = make_input(src)
    rc, _, term = run_pty([tbx, "diff", str(src), str(src)])
    assert rc == 0, term
    last = term.decode().rstrip("\r\n").split("\r\x1b[K")[-1]
    m = re.search(r"comparing +100\.0%  (\S+ \S+) / (\S+ \S+)  \S+ \S+/s  ETA 0:00", last)
    assert m and m.group(1) == m.group(2) == human(2 * total), repr(last)
    r = subprocess.run([tbx, "diff", str(src), str(src)], stdin=subprocess.DEVNULL,
                       capture_output=True, timeout=120)
    assert r.returncode == 0 and b"\r" not in r.stderr and b"ETA" not in r.stderr, r.stderr


# ---- validate and remote reads ------------------------------------------------------------


def test_validate_bar_on_a_terminal_only(tbx, tmp_path):
    """tbx validate's pass over digested components: a zTensor stored raw with a crc32c per
    tensor, so the bytes the pass verifies are the arrays' bytes."""
    src, zt = tmp_path / "in.safetensors", tmp_path / "d.zt"
    total = make_input(src)
    r = subprocess.run([tbx, "convert", str(src), str(zt), "--digest", "crc32c"],
                       stdin=subprocess.DEVNULL, capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr
    rc, out, term = run_pty([tbx, "validate", str(zt)])
    assert rc == 0, term
    assert out.startswith(f"{zt}: valid".encode()), out
    last = term.decode().rstrip("\r\n").split("\r\x1b[K")[-1]
    m = re.search(r"validate +100\.0%  (\S+ \S+) / (\S+ \S+)  \S+ \S+/s  ETA 0:00", last)
    assert m and m.group(1) == m.group(2) == human(total), repr(term)
    r = subprocess.run([tbx, "validate", str(zt)], stdin=subprocess.DEVNULL,
                       capture_output=True, timeout=120)
    assert r.returncode == 0 and r.stderr == b"", r.stderr
    rc, _, term = run_pty([tbx, "validate", "--quiet", str(zt)])
    assert rc == 0 and b"ETA" not in term, term
    # a plain file has no pass over its data: no bar
    rc, _, term = run_pty([tbx, "validate", str(src)])
    assert rc == 0 and b"ETA" not in term, term


def test_cat_url_bar_on_a_terminal_only(tbx, tmp_path):
    """tbx cat of a URL (nginx on 127.0.0.1): the bytes come over the network, a bar shows
    them on a terminal; the bytes written are the array's."""
    from remote_servers import Nginx
    root = tmp_path / "www"
    root.mkdir()
    make_input(root / "in.safetensors")
    big = stn.load_file(str(root / "in.safetensors"))["big"]
    web = Nginx(tmp_path / "nginx", root).start()
    try:
        url = f"{web.url}/in.safetensors"
        rc, out, term = run_pty([tbx, "cat", url, "big"], stdout_file=tmp_path / "o")
        assert rc == 0, term
        assert out == big.tobytes()
        last = term.decode().rstrip("\r\n").split("\r\x1b[K")[-1]
        m = re.search(r"cat +100\.0%  (\S+ \S+) / (\S+ \S+)  \S+ \S+/s  ETA 0:00", last)
        assert m and m.group(1) == m.group(2) == human(big.nbytes), repr(term)
        rc, out, term = run_pty([tbx, "cat", url, "big", "--as", "f32", "--quiet"],
                                stdout_file=tmp_path / "o")
        assert rc == 0 and out == big.tobytes() and b"ETA" not in term, term
        r = subprocess.run([tbx, "cat", url, "big"], stdin=subprocess.DEVNULL,
                           capture_output=True, timeout=120)
        assert r.returncode == 0 and r.stdout == big.tobytes() and r.stderr == b"", r.stderr
    finally:
        web.stop()


def test_python_diff_progress(tmp_path):
    src = tmp_path / "in.safetensors"
    total = make_input(src)
    calls = []
    doc = tb.diff(src, src, progress=lambda d, t: calls.append((d, t)))
    assert doc["identical"]
    assert len(calls) >= 3  # "big" is several jobs on each side
    assert all(t == 2 * total for _, t in calls)  # both sides' stored bytes
    done = [d for d, _ in calls]
    assert done == sorted(done)
    assert calls[-1] == (2 * total, 2 * total)


def test_python_diff_progress_exception_cancels(tmp_path):
    src = tmp_path / "in.safetensors"
    make_input(src)
    n = [0]

    def cb(done, total):
        n[0] += 1
        if n[0] == 2:
            raise Stop(f"stop at {done} of {total}")

    with pytest.raises(Stop, match="stop at"):
        tb.diff(src, src, progress=cb)
    assert n[0] == 2
    with pytest.raises(TypeError, match="progress"):
        tb.diff(src, src, progress=7)
