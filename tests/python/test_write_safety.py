"""Write safety of every tbx writer: locking of edits, --force, symbolic links, signals.

Guarantees checked here (docs/reliability.md):

* Concurrent `tbx gguf set` edits of one file (two rewrites, or an in-place edit racing a
  rewrite) all land: no lost update, no corruption; each one exits 0 or fails with a message.
* `convert` / `gguf set` interrupted by SIGINT, SIGTERM, SIGHUP or SIGKILL at a random moment
  of the write leave the output absent (or old) or complete, the input untouched, and no
  temporary file after a catchable signal; one left by SIGKILL is removed by the next write.
* --force replaces only regular files (never a FIFO, socket, device, or what a symlink to one
  points to); a symbolic link OUT/FILE is followed: its target is written, the link stays; a
  dangling link needs --force, which creates the target.

Files are built and read back with gguf-py and numpy (independent of tbx).
"""
from __future__ import annotations

import hashlib
import os
import random
import signal
import socket
import stat
import subprocess
import time
from pathlib import Path

import pytest

from conftest import assert_clean_exit, need, run

np = need("numpy")
gguf = need("gguf")

BIG_ELEMS = 12 * 1024 * 1024  # 48 MiB of f32: big enough that a write is caught mid-way


def write_gguf(path: Path, tensors: dict, kvs: dict | None = None) -> Path:
    w = gguf.GGUFWriter(str(path), "test")
    w.add_string("general.name", "abcdef")
    w.add_uint32("test.u32", 17)
    for k, v in (kvs or {}).items():
        w.add_uint32(k, v)
    for name, arr in tensors.items():
        w.add_tensor(name, arr)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def read_gguf(path: Path):
    """(fields: key -> value, tensors: name -> raw bytes) as gguf-py reads them."""
    r = gguf.GGUFReader(str(path))
    fields = {k: f.contents() for k, f in r.fields.items() if not k.startswith("GGUF.")}
    tensors = {t.name: bytes(np.asarray(t.data).tobytes()) for t in r.tensors}
    return fields, tensors


def sha(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def hidden(d: Path) -> list:
    """Leftover temporary files: every hidden name in the directory."""
    return sorted(p.name for p in d.iterdir() if p.name.startswith("."))


def small_tensors(seed=1, n=256 * 1024):
    rng = np.random.default_rng(seed)
    return {"tok_embd.weight": rng.standard_normal(n).astype(np.float32),
            "output.weight": np.arange(1000, dtype=np.int32)}


# ------------------------------------------------------------------------------------------
# Concurrency of edits
# ------------------------------------------------------------------------------------------
def popen(tbx, *args):
    return subprocess.Popen([tbx, *map(str, args)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)


def finish(p, timeout=60):
    out, err = p.communicate(timeout=timeout)
    return p.returncode, (out + err).decode("utf-8", "replace")


def test_concurrent_rewrites_lose_no_update(tbx, tmp_path):
    """Two `gguf set` adding a key each (both rewrite the file) at the same time: both land."""
    path = write_gguf(tmp_path / "m.gguf", small_tensors(n=1024 * 1024))
    _, tensors0 = read_gguf(path)
    deadline = time.monotonic() + 20
    trials = 0
    lost = []
    while trials < 20 and time.monotonic() < deadline:
        ka, kb = f"race.a{trials}", f"race.b{trials}"
        pa = popen(tbx, "gguf", "set", path, f"{ka}={trials}")
        pb = popen(tbx, "gguf", "set", path, f"{kb}={trials + 1000}")
        (ra, ta), (rb, tb) = finish(pa), finish(pb)
        assert ra == 0, ta  # with the lock, both edits land (they take turns)
        assert rb == 0, tb
        fields, tensors = read_gguf(path)
        if fields.get(ka) != trials or fields.get(kb) != trials + 1000:
            lost.append((trials, fields.get(ka), fields.get(kb)))
        assert tensors == tensors0, f"trial {trials}: tensor data changed"
        trials += 1
    assert trials >= 5
    assert not lost, f"lost updates in {len(lost)} of {trials} trials: {lost[:5]}"
    # every key of every trial is still there
    fields, _ = read_gguf(path)
    for i in range(trials):
        assert fields[f"race.a{i}"] == i and fields[f"race.b{i}"] == i + 1000
    assert hidden(tmp_path) == []


def test_inplace_edit_racing_rewrite(tbx, tmp_path):
    """An in-place `gguf set` (same-size value) racing a rewriting one: both land, nothing is
    written at a stale offset (tensor names and bytes intact)."""
    path = write_gguf(tmp_path / "m.gguf", small_tensors(n=2 * 1024 * 1024))
    _, tensors0 = read_gguf(path)
    rng = random.Random(5)
    deadline = time.monotonic() + 20
    trials = 0
    bad = []
    while trials < 25 and time.monotonic() < deadline:
        key = f"race.k{trials}"
        pr = popen(tbx, "gguf", "set", path, f"{key}=1")
        time.sleep(rng.uniform(0, 0.03))
        pi = popen(tbx, "gguf", "set", path, f"test.u32={trials + 100}")
        (rr, tr), (ri, ti) = finish(pr), finish(pi)
        assert rr == 0, tr
        assert ri == 0, ti
        fields, tensors = read_gguf(path)
        assert set(tensors) == set(tensors0), f"trial {trials}: tensor names {sorted(tensors)}"
        assert tensors == tensors0, f"trial {trials}: tensor data changed"
        if fields.get("test.u32") != trials + 100 or fields.get(key) != 1:
            bad.append((trials, fields.get("test.u32"), fields.get(key)))
        trials += 1
    assert trials >= 5
    assert not bad, f"lost updates in {len(bad)} of {trials} trials: {bad[:5]}"


# ------------------------------------------------------------------------------------------
# Signals
# ------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def big_inputs(tmp_path_factory):
    d = tmp_path_factory.mktemp("big")
    rng = np.random.default_rng(3)
    t = {"w": rng.standard_normal(BIG_ELEMS).astype(np.float32),
         "v": np.arange(4096, dtype=np.int32)}
    src = write_gguf(d / "big.gguf", t)
    return src, read_gguf(src)


def run_and_kill(argv, outdir: Path, sig, rng):
    """Starts argv, waits until its temporary file shows up in outdir, lets it write a random
    while longer and sends `sig`. Returns (returncode, temp file seen)."""
    def default_signals():  # not inherited as ignored (a background job ignores SIGINT)
        for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(s, signal.SIG_DFL)

    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         preexec_fn=default_signals)
    seen = False
    t0 = time.monotonic()
    while p.poll() is None and time.monotonic() - t0 < 30:
        if hidden(outdir):
            seen = True
            break
    if seen:
        time.sleep(rng.uniform(0, 0.05))
    if p.poll() is None:
        p.send_signal(sig)
    p.communicate(timeout=60)
    return p.returncode, seen


SIGNALS = [signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGKILL]


@pytest.mark.parametrize("sig", SIGNALS, ids=lambda s: signal.Signals(s).name)
def test_convert_killed_midway(tbx, big_inputs, tmp_path, sig):
    src, (fields0, tensors0) = big_inputs
    src_sha = sha(src)
    outdir = tmp_path / "out"
    outdir.mkdir()
    out = outdir / "o.gguf"
    rng = random.Random(int(sig))
    interrupted = 0
    for trial in range(4):
        if out.exists():
            out.unlink()
        rc, seen = run_and_kill([tbx, "convert", src, out, "--force"], outdir, sig, rng)
        assert rc in (0, -sig), f"trial {trial}: exit {rc}"
        interrupted += rc == -sig and seen
        assert sha(src) == src_sha, "the input changed"
        if out.exists():  # then complete
            f, t = read_gguf(out)
            assert t == tensors0 and f["general.name"] == fields0["general.name"]
        if sig != signal.SIGKILL:
            assert hidden(outdir) == [], f"trial {trial}: temporary file left: {hidden(outdir)}"
        else:
            # What SIGKILL left behind is removed by the next write to the same output, and
            # a second writer running meanwhile does not take the live one's for stale.
            p1 = popen(tbx, "convert", src, out, "--force")
            time.sleep(rng.uniform(0, 0.1))
            r = run(tbx, "convert", src, out, "--force")
            rc1, t1 = finish(p1)
            assert rc1 == 0, t1
            assert_clean_exit(r)
            assert r.rc == 0, r.describe()
            assert read_gguf(out)[1] == tensors0
            assert hidden(outdir) == [], f"stale temporary file not removed: {hidden(outdir)}"
    assert interrupted >= 1, "no trial was interrupted mid-write (file too small?)"


@pytest.mark.parametrize("sig", SIGNALS, ids=lambda s: signal.Signals(s).name)
def test_gguf_set_killed_midway(tbx, big_inputs, tmp_path, sig):
    src, (fields0, tensors0) = big_inputs
    path = tmp_path / "e.gguf"
    path.write_bytes(src.read_bytes())
    rng = random.Random(100 + int(sig))
    interrupted = 0
    for trial in range(4):
        before = sha(path)
        fb, _ = read_gguf(path)
        key = f"kill.k{trial}"
        rc, seen = run_and_kill([tbx, "gguf", "set", path, f"{key}=7"], tmp_path, sig, rng)
        assert rc in (0, -sig), f"trial {trial}: exit {rc}"
        interrupted += rc == -sig and seen
        f, t = read_gguf(path)  # always a complete file: the old one or the edited one
        assert t == tensors0, f"trial {trial}: tensor data changed"
        if key in f:
            assert f[key] == 7 and {k: f[k] for k in fb} == fb
        else:
            assert sha(path) == before, f"trial {trial}: not edited but changed"
        if sig != signal.SIGKILL:
            assert hidden(tmp_path) == [], f"trial {trial}: temporary file left: {hidden(tmp_path)}"
        else:
            r = run(tbx, "gguf", "set", path, f"after.k{trial}=1")
            assert r.rc == 0, r.describe()
            assert hidden(tmp_path) == [], f"stale temporary file not removed: {hidden(tmp_path)}"
    assert interrupted >= 1, "no trial was interrupted mid-write (file too small?)"


# ------------------------------------------------------------------------------------------
# --force and file kinds
# ------------------------------------------------------------------------------------------
@pytest.fixture()
def small_src(tmp_path):
    return write_gguf(tmp_path / "src.gguf", small_tensors(n=1000))


def first_shard(tbx, src: Path, d: Path) -> Path:
    """Splits src into a shard set in d (for `gguf merge`); returns the first shard."""
    d.mkdir()
    r = run(tbx, "gguf", "split", src, d / "s", "--max-size", "100")
    assert r.rc == 0, r.describe()
    return Path(r.out.decode().split()[0])


def test_force_refuses_fifo(tbx, small_src, tmp_path):
    fifo = tmp_path / "out.gguf"
    os.mkfifo(fifo)
    r = run(tbx, "convert", small_src, fifo, "--force", timeout=20)
    assert_clean_exit(r)
    assert r.rc == 1, r.describe()
    assert "FIFO" in r.text and "regular file" in r.text, r.describe()
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    r = run(tbx, "gguf", "set", fifo, "a=1", "--type", "u32", timeout=20)  # nor edited
    assert r.rc == 1 and stat.S_ISFIFO(os.lstat(fifo).st_mode), r.describe()
    d = tmp_path / "dir.gguf"  # nor a directory: an existing directory is a Hugging Face
    d.mkdir()                  # directory target, which --force never replaces (a usage error)
    r = run(tbx, "convert", small_src, d, "--force")
    assert_clean_exit(r)
    assert r.rc == 2 and "--force" in r.text and d.is_dir() and not any(d.iterdir()), \
        r.describe()
    assert hidden(tmp_path) == []


def test_force_refuses_socket(tbx, small_src, tmp_path):
    sp = tmp_path / "out.gguf"
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.bind(str(sp))
        r = run(tbx, "convert", small_src, sp, "--force", timeout=20)
        assert r.rc == 1, r.describe()
        assert "socket" in r.text, r.describe()
        assert stat.S_ISSOCK(os.lstat(sp).st_mode)
    finally:
        s.close()


def test_force_refuses_char_device(tbx, small_src, tmp_path):
    if os.geteuid() == 0:  # a private copy of /dev/null's node: nothing shared is at risk
        dev = tmp_path / "null.gguf"
        os.mknod(dev, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
        r = run(tbx, "convert", small_src, dev, "--force", timeout=20)
        assert r.rc == 1, r.describe()
        assert "character device" in r.text, r.describe()
        assert stat.S_ISCHR(os.lstat(dev).st_mode)
    # a symbolic link to /dev/null: neither the link nor /dev/null may be replaced
    before = os.stat("/dev/null")
    link = tmp_path / "devnull.gguf"
    link.symlink_to("/dev/null")
    r = run(tbx, "convert", small_src, link, "--force", timeout=20)
    assert r.rc == 1, r.describe()
    assert "character device" in r.text, r.describe()
    assert link.is_symlink() and os.readlink(link) == "/dev/null"
    after = os.stat("/dev/null")
    assert stat.S_ISCHR(after.st_mode) and after.st_rdev == before.st_rdev
    shard = first_shard(tbx, small_src, tmp_path / "shards")
    r = run(tbx, "gguf", "merge", shard, link, "--force", timeout=20)
    assert r.rc == 1 and "character device" in r.text, r.describe()
    assert link.is_symlink()
    assert hidden(tmp_path) == []


# ------------------------------------------------------------------------------------------
# Symbolic links: the target is written, the link stays
# ------------------------------------------------------------------------------------------
def test_gguf_set_through_symlink_edits_target(tbx, small_src, tmp_path):
    target = tmp_path / "real.gguf"
    target.write_bytes(small_src.read_bytes())
    os.chmod(target, 0o640)
    link = tmp_path / "link.gguf"
    link.symlink_to("real.gguf")
    r = run(tbx, "gguf", "set", link, "new.key=5")  # a rewrite
    assert r.rc == 0 and "rewritten" in r.text, r.describe()
    assert link.is_symlink() and os.readlink(link) == "real.gguf"
    assert read_gguf(target)[0]["new.key"] == 5
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o640
    r = run(tbx, "gguf", "set", link, "test.u32=9")  # in place
    assert r.rc == 0 and "in place" in r.text, r.describe()
    assert link.is_symlink() and read_gguf(target)[0]["test.u32"] == 9
    r = run(tbx, "gguf", "del", link, "new.key")
    assert r.rc == 0, r.describe()
    assert link.is_symlink() and "new.key" not in read_gguf(target)[0]
    assert hidden(tmp_path) == []


def test_convert_force_through_symlink_replaces_target(tbx, small_src, tmp_path):
    sub = tmp_path / "sub"
    sub.mkdir()
    target = sub / "real.gguf"
    target.write_bytes(b"old contents")
    link = tmp_path / "link.gguf"
    link.symlink_to(target)
    r = run(tbx, "convert", small_src, link)
    assert r.rc == 1 and target.read_bytes() == b"old contents", r.describe()
    r = run(tbx, "convert", small_src, link, "--force")
    assert r.rc == 0, r.describe()
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert read_gguf(target)[1] == read_gguf(small_src)[1]
    assert hidden(tmp_path) == [] and hidden(sub) == []


def test_dangling_symlink_needs_force(tbx, small_src, tmp_path):
    link = tmp_path / "out.gguf"
    link.symlink_to("made.gguf")
    r = run(tbx, "convert", small_src, link)
    assert_clean_exit(r)
    assert r.rc == 1, r.describe()
    assert "dangling" in r.text, r.describe()
    assert link.is_symlink() and not (tmp_path / "made.gguf").exists()
    shard = first_shard(tbx, small_src, tmp_path / "shards")
    r = run(tbx, "gguf", "merge", shard, link)  # same rule for every writer
    assert r.rc == 1 and "dangling" in r.text, r.describe()
    assert not (tmp_path / "made.gguf").exists()
    r = run(tbx, "convert", small_src, link, "--force")
    assert r.rc == 0, r.describe()
    assert link.is_symlink() and os.readlink(link) == "made.gguf"
    assert read_gguf(tmp_path / "made.gguf")[1] == read_gguf(small_src)[1]


def test_no_sync_writes_the_same_file(tbx, small_src, tmp_path):
    """--no-sync (TBX_WRITE_NO_SYNC) changes when the bytes reach the disk, not what they are:
    the same output, renamed into place, no temporary file left, --force still needed; whether
    fsync is skipped is checked in tests/unit/test_io.c (output_no_sync)."""
    for fmt in ("gguf", "zt"):
        a, b = tmp_path / f"a.{fmt}", tmp_path / f"b.{fmt}"
        r = run(tbx, "convert", small_src, a)
        assert r.rc == 0, r.describe()
        r = run(tbx, "convert", small_src, b, "--no-sync")
        assert r.rc == 0, r.describe()
        assert a.read_bytes() == b.read_bytes()
        r = run(tbx, "convert", small_src, b, "--no-sync")
        assert r.rc == 1 and a.read_bytes() == b.read_bytes(), r.describe()
        assert hidden(tmp_path) == []
    assert read_gguf(tmp_path / "b.gguf")[1] == read_gguf(small_src)[1]
