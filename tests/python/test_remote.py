"""Remote sources (src/io/remote.c, remote_prov.c) against real servers on 127.0.0.1.

nginx (Debian) serves a temporary root over HTTP and HTTPS (a certificate made here with
openssl) with the Hub's URL layout and the failure cases; gofakes3 (built from the Go module
proxy by scripts/bootstrap.sh) is the S3-compatible store. The files are written by the
reference writers (gguf-py, safetensors); what tbx prints for a URL is compared with those
writers' arrays and with what it prints for the local file, and what it transferred is
counted from nginx's access log.
"""
from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from conftest import need, run  # noqa: E402
from remote_servers import S3, Nginx, free_port, make_files  # noqa: E402

MIB = 1 << 20


def header_bytes_gguf(path: Path) -> int:
    gguf = need("gguf")
    return int(gguf.GGUFReader(str(path)).data_offset)


def header_bytes_st(path: Path) -> int:
    with open(path, "rb") as f:
        return 8 + int.from_bytes(f.read(8), "little")


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """The files served, with the arrays they hold."""
    root = tmp_path_factory.mktemp("www")
    return {"root": root, "arrays": make_files(root, need)}


@pytest.fixture(scope="module")
def web(data, tmp_path_factory):
    n = Nginx(tmp_path_factory.mktemp("nginx"), data["root"]).start()
    yield n
    n.stop()


def tbx_run(binary, *args, env=None, timeout=120):
    e = dict(os.environ)
    e.setdefault("TBX_HTTP_RETRIES", "1")
    if env:
        e.update(env)
    p = subprocess.run([binary, *map(str, args)], capture_output=True, env=e, timeout=timeout)
    return p


def info(binary, target, env=None):
    p = tbx_run(binary, "info", "--json", target, env=env)
    assert p.returncode == 0, p.stderr.decode()
    return json.loads(p.stdout)


# ------------------------------------------------------------------------------------------
# Reading little more than what is asked
# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name,header", [("m.gguf", header_bytes_gguf),
                                         ("m.safetensors", header_bytes_st)])
def test_info_transfers_little_more_than_the_header(tbx_asan, web, data, name, header):
    local = data["root"] / name
    mark = web.mark()
    remote = info(tbx_asan, f"{web.url}/{name}")
    reqs = web.requests(mark)
    assert remote == info(tbx_asan, local)
    sent = sum(r["bytes"] for r in reqs)
    h = header(local)
    assert all(r["status"] == 206 for r in reqs), reqs
    assert len(reqs) <= 4, reqs
    assert sent <= 2 * h + MIB, (sent, h)
    assert sent < local.stat().st_size // 4


@pytest.mark.parametrize("tensor", ["small", "mid", "big"])
def test_cat_transfers_little_more_than_the_tensor(tbx_asan, web, data, tensor):
    want = data["arrays"][tensor].tobytes()
    local = data["root"] / "m.gguf"
    mark = web.mark()
    p = tbx_run(tbx_asan, "cat", f"{web.url}/m.gguf", tensor)
    reqs = web.requests(mark)
    assert p.returncode == 0, p.stderr.decode()
    assert p.stdout == want
    sent = sum(r["bytes"] for r in reqs)
    assert sent <= header_bytes_gguf(local) * 2 + len(want) + 2 * MIB, (sent, reqs)
    if tensor == "big":  # parallel ranges of 8 MiB: 8 + 8 + 4 MiB
        ranges = [r for r in reqs if r["range"] != "bytes=0-65535"]
        assert sum(1 for r in ranges if r["bytes"] >= 4 * MIB) == 3, reqs


def test_convert_from_url_equals_local(tbx, web, data, tmp_path):
    for src, out, extra in (("m.safetensors", "a.gguf", ()),
                            ("m.gguf", "b.gguf", ("--quant", "q8_0"))):
        p1 = tbx_run(tbx, "convert", f"{web.url}/{src}", tmp_path / ("r-" + out), *extra)
        p2 = tbx_run(tbx, "convert", data["root"] / src, tmp_path / ("l-" + out), *extra)
        assert p1.returncode == 0 and p2.returncode == 0, (p1.stderr, p2.stderr)
        assert (tmp_path / ("r-" + out)).read_bytes() == (tmp_path / ("l-" + out)).read_bytes()


def test_convert_reads_each_tensor_in_one_request(tbx_asan, web, data, tmp_path):
    """A conversion reads each tensor in parts of 1 MiB (f16 cast to f32: the engine's jobs,
    below the parallel-range size), having said that its reads go through the tensor: the
    first miss in each tensor takes the rest of it in one request (6 MiB here), not a ramp of
    doubling read-aheads (1 + 1 + 2 + 4 MiB ...). The file stores the tensors in the reverse
    order of their names, so the order the engine reads them in does not matter."""
    np = need("numpy")
    st = need("safetensors.numpy")
    rng = np.random.default_rng(7)
    names = [f"t{i}" for i in range(4)]
    arrays = {n: rng.standard_normal((3 * 1024, 1024), dtype=np.float32).astype(np.float16)
              for n in names}                                              # 6 MiB each
    # a safetensors file by hand: the header lists t0..t3, the data holds t3 first
    hdr, off = {}, 0
    for n in reversed(names):
        nb = arrays[n].nbytes
        hdr[n] = {"dtype": "F16", "shape": list(arrays[n].shape), "data_offsets": [off, off + nb]}
        off += nb
    hb = json.dumps(hdr).encode()
    hb += b" " * (-len(hb) % 8)
    src = data["root"] / "jumps.safetensors"
    with open(src, "wb") as f:
        f.write(len(hb).to_bytes(8, "little") + hb)
        for n in reversed(names):
            f.write(arrays[n].tobytes())
    assert set(st.load_file(str(src))) == set(names)  # the reference reader takes it
    mark = web.mark()
    out = tmp_path / "r.safetensors"
    p = tbx_run(tbx_asan, "convert", f"{web.url}/jumps.safetensors", out, "--cast", "f32")
    reqs = [r for r in web.requests(mark) if r["uri"] == "/jumps.safetensors"]
    assert p.returncode == 0, p.stderr.decode()
    got = st.load_file(str(out))
    for n in names:
        assert np.array_equal(got[n], arrays[n].astype(np.float32)), n
    data_reqs = [r for r in reqs if r["range"] != "bytes=0-65535"]
    assert len(data_reqs) <= len(names), [(r["range"], r["bytes"]) for r in reqs]
    sent = sum(r["bytes"] for r in reqs)
    assert sent <= src.stat().st_size + 64 * 1024 + len(reqs) * 1024, (sent, reqs)


def test_sharded_index_over_http(tbx_asan, web, data):
    url = f"{web.url}/hfset/model.safetensors.index.json"
    d = info(tbx_asan, url)
    assert d == info(tbx_asan, data["root"] / "hfset" / "model.safetensors.index.json")
    assert sorted(t["name"] for t in d["tensors"]) == ["big", "mid", "small"]
    p = tbx_run(tbx_asan, "cat", url, "big")
    assert p.returncode == 0 and p.stdout == data["arrays"]["big"].tobytes()


def test_gguf_split_set_over_http(tbx, tbx_asan, web, data):
    (data["root"] / "split").mkdir(exist_ok=True)
    p = tbx_run(tbx, "gguf", "split", data["root"] / "m.gguf", data["root"] / "split" / "m",
                "--max-size", "8MiB", "--force")
    assert p.returncode == 0, p.stderr
    first = sorted((data["root"] / "split").glob("m-00001-of-*.gguf"))
    assert len(first) == 1 and not first[0].name.endswith("-of-00001.gguf"), first
    url = f"{web.url}/split/{first[0].name}"
    d, local = info(tbx_asan, url), info(tbx_asan, first[0])
    base = f"{web.url}/split/"
    assert [f["path"] for f in d.pop("files")] == \
        [base + Path(f["path"]).name for f in local.pop("files")]
    assert d == local
    assert sorted(t["name"] for t in d["tensors"]) == ["big", "mid", "small"]
    for name in ("small", "big"):
        p = tbx_run(tbx_asan, "cat", url, name)
        assert p.returncode == 0 and p.stdout == data["arrays"][name].tobytes(), p.stderr


def test_http_directory_found_through_its_index(tbx_asan, web, data):
    d = info(tbx_asan, f"{web.url}/hfset/")
    assert d == info(tbx_asan, data["root"] / "hfset")


def test_hf_tree_in_pages(tbx_asan, web, data):
    """The Hub pages its tree listing (a Link header names the next page): a repository listed
    in three pages (the next page a path, then an absolute URL on the same server, beside
    another link) opens as the same directory as the local copy, every page asked for with the
    token; a next page on another origin is refused before anything is sent there."""
    env = {"HF_ENDPOINT": web.url, "HF_TOKEN": "hf_secret_token_24"}
    mark = web.mark()
    d = info(tbx_asan, "hf://org/paged", env=env)
    reqs = web.requests(mark)
    assert d == info(tbx_asan, data["root"] / "hfset")
    uris = [r["uri"] for r in reqs]
    pages = ["/api/models/org/paged/tree/main", "/api/pages/paged/2", "/api/pages/paged/3"]
    assert [u for u in uris if u.startswith("/api/")] == pages, uris
    assert all(r["auth"] == "Bearer hf_secret_token_24" for r in reqs
               if r["uri"].startswith("/api/")), reqs
    mark = web.mark()
    p = tbx_run(tbx_asan, "info", "hf://org/evilpage", env=env)
    assert p.returncode != 0 and b"another origin" in p.stderr, p.stderr
    assert b"hf_secret_token_24" not in p.stderr
    assert [r["uri"] for r in web.requests(mark)] == ["/api/models/org/evilpage/tree/main"]


def test_hf_repository_and_file(tbx_asan, web, data, tmp_path):
    env = {"HF_ENDPOINT": web.url, "HF_TOKEN": "hf_secret_token_24"}
    mark = web.mark()
    d = info(tbx_asan, "hf://org/repo", env=env)
    reqs = web.requests(mark)
    assert d == info(tbx_asan, data["root"] / "hfset")
    uris = [r["uri"] for r in reqs]
    assert "/api/models/org/repo/tree/main" in uris
    assert any(u.startswith("/org/repo/resolve/main/") for u in uris)       # the Hub's URL
    assert any(u.startswith("/cdn/org/repo/main/") for u in uris)           # its redirect
    hub = [r for r in reqs if not r["uri"].startswith("/cdn/")]
    assert hub and all(r["auth"] == "Bearer hf_secret_token_24" for r in hub), hub
    p = tbx_run(tbx_asan, "cat", "hf://org/repo@main/model-00002-of-00002.safetensors", "big",
                env=env)
    assert p.returncode == 0 and p.stdout == data["arrays"]["big"].tobytes()
    # a conversion of the repository equals the conversion of the local directory
    p1 = tbx_run(tbx_asan, "convert", "hf://org/repo", tmp_path / "r.mcf", env=env)
    local = tmp_path / "repo"  # MCF records the directory's name: the repository's
    shutil.copytree(data["root"] / "hfset", local)
    p2 = tbx_run(tbx_asan, "convert", local, tmp_path / "l.mcf")
    assert p1.returncode == 0 and p2.returncode == 0, (p1.stderr, p2.stderr)
    assert (tmp_path / "r.mcf").read_bytes() == (tmp_path / "l.mcf").read_bytes()
    # a missing revision: the tree's 404, named, and the token never shown
    p = tbx_run(tbx_asan, "info", "--verbose", "hf://org/repo@nope", env=env)
    assert p.returncode != 0
    assert b"HTTP 404" in p.stderr
    assert b"hf_secret_token_24" not in p.stderr + p.stdout


def test_https_verified_with_the_ca_bundle(tbx_asan, web, data, tmp_path):
    url = f"{web.tls_url}/m.safetensors"
    p = tbx_run(tbx_asan, "info", url)
    assert p.returncode != 0
    assert b"certificate" in p.stderr.lower(), p.stderr
    d = info(tbx_asan, url, env={"TBX_HTTP_CA_BUNDLE": str(web.cert)})
    assert d == info(tbx_asan, data["root"] / "m.safetensors")


def test_verbose_prints_every_request(tbx, web):
    mark = web.mark()
    p = tbx_run(tbx, "cat", "--verbose", f"{web.url}/m.gguf", "big")
    reqs = web.requests(mark)
    lines = [ln for ln in p.stderr.decode().splitlines() if ln.startswith("tbx: GET ")]
    assert p.returncode == 0
    assert len(lines) == len(reqs)
    total = [ln for ln in p.stderr.decode().splitlines() if "requests," in ln]
    assert total and f"{len(reqs)} requests" in total[0]


def test_tiny_and_empty_files_read_as_locally(tbx_asan, web, data):
    """A file shorter than the open's first range (206 with its own end) and an empty one (416
    for every range) give the driver's own message, as the local file does."""
    for name, blob in (("empty.gguf", b""), ("tiny.gguf", b"GGUF"), ("half.safetensors",
                                                                       (data["root"] / "m.safetensors").read_bytes()[:40000])):
        f = data["root"] / name
        f.write_bytes(blob)
        pr = tbx_run(tbx_asan, "info", f"{web.url}/{name}")
        pl = tbx_run(tbx_asan, "info", f)
        assert pr.returncode == pl.returncode != 0
        assert pr.stderr.replace(f"{web.url}/".encode(), b"") == \
            pl.stderr.replace(f"{data['root']}/".encode(), b""), (pr.stderr, pl.stderr)


# ------------------------------------------------------------------------------------------
# Failures: a clear error, never wrong bytes
# ------------------------------------------------------------------------------------------
class ShortBody(threading.Thread):
    """A server that promises every range asked for and sends half of it, then closes."""

    def __init__(self):
        super().__init__(daemon=True)
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]

    def run(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            with c:
                req = b""
                while b"\r\n\r\n" not in req:
                    chunk = c.recv(4096)
                    if not chunk:
                        break
                    req += chunk
                a, b = 0, 65535
                for line in req.decode("latin-1").split("\r\n"):
                    if line.lower().startswith("range: bytes="):
                        a, b = (int(x) for x in line.split("=", 1)[1].split("-"))
                n = b - a + 1
                c.sendall(f"HTTP/1.1 206 Partial Content\r\nContent-Range: bytes {a}-{b}/1000000"
                          f"\r\nContent-Length: {n}\r\nConnection: close\r\n\r\n".encode()
                          + b"G" * (n // 2))


def test_failures_are_clear_errors(tbx_asan, web, data):
    short = ShortBody()
    short.start()
    dead = free_port()
    cases = [
        (f"{web.url}/norange/m.safetensors", {}, b"ignored the range request"),
        (f"{web.url}/nope.gguf", {}, b"HTTP 404 Not Found"),
        (f"{web.url}/forbidden/m.gguf", {}, b"HTTP 403"),
        (f"http://127.0.0.1:{dead}/m.gguf", {}, b"after 2 attempts"),
        (f"{web.url}/loop/m.gguf", {}, b"redirects"),
        (f"{web.url}/slow/m.gguf", {"TBX_HTTP_TIMEOUT": "1", "TBX_HTTP_RETRIES": "0"},
         b"Timeout"),
        (f"http://127.0.0.1:{short.port}/m.gguf", {}, b"partial"),
        (f"http://user:pw_24_secret@127.0.0.1:{web.port}/nope.gguf", {}, b"HTTP 404"),
        # what the server says is parsed strictly (src/io/http_parse.c): the header is named
        (f"{web.url}/badrange/m.safetensors", {}, b"Content-Range: \"bytes 0-x/10\": the last byte is not a number"),
        (f"{web.url}/badetag/m.safetensors", {}, b"ETag: has 302 bytes, more than the 255 accepted"),
        ("hf://org/badtree", {"HF_ENDPOINT": web.url},
         b"entry 0 of the Hub's tree, \"../escape.bin\", leads out"),
        ("hf://org/evilpage", {"HF_ENDPOINT": web.url, "HF_TOKEN": "pw_24_secret"},
         b"is on another origin"),
    ]
    for url, env, words in cases:
        t = time.monotonic()
        p = tbx_run(tbx_asan, "info", url, env=env, timeout=60)
        assert p.returncode != 0, url
        assert p.stdout == b"", url
        assert words.lower() in p.stderr.lower(), (url, p.stderr)
        assert b"pw_24_secret" not in p.stderr, p.stderr
        assert time.monotonic() - t < 20, url
    short.sock.close()


# ------------------------------------------------------------------------------------------
# S3
# ------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def s3(tmp_path_factory, data):
    """gofakes3, and nginx in front of it logging the Authorization header of each request
    (gofakes3 does not check signatures: the log shows what tensorbox signed with)."""
    s = S3(tmp_path_factory.mktemp("s3")).start()
    front = Nginx(tmp_path_factory.mktemp("s3front"), data["root"], s3_upstream=s.port).start()
    s.front = f"http://127.0.0.1:{front.s3_port}"
    s.auth = front.s3_auth_lines
    yield s
    front.stop()
    s.stop()


def test_s3_signed_reads(tbx_asan, s3, data, tmp_path):
    user, secret = "AKIDTEST24", "s3-secret-24"
    s3.put("models", "dir/m.safetensors", (data["root"] / "m.safetensors").read_bytes(),
           user, secret)
    env = {"AWS_ENDPOINT_URL": s3.front, "AWS_ACCESS_KEY_ID": user,
           "AWS_SECRET_ACCESS_KEY": secret, "AWS_REGION": "us-east-1"}
    n0 = len(s3.auth())
    d = info(tbx_asan, "s3://models/dir/m.safetensors", env=env)
    assert d == info(tbx_asan, data["root"] / "m.safetensors")
    auth = s3.auth()[n0:]
    assert auth and all(a.startswith(f"AWS4-HMAC-SHA256 Credential={user}/") and
                        "/us-east-1/s3/aws4_request" in a for a in auth), auth
    assert not any(secret in a for a in auth)
    p = tbx_run(tbx_asan, "cat", "s3://models/dir/m.safetensors", "big", env=env)
    assert p.returncode == 0 and p.stdout == data["arrays"]["big"].tobytes()
    # credentials from a profile file instead of the environment
    cred = tmp_path / "credentials"
    cred.write_text(f"[default]\naws_access_key_id = other\n[p24]\naws_access_key_id = {user}\n"
                    f"aws_secret_access_key = {secret}\n")
    env2 = {"AWS_ENDPOINT_URL": s3.front, "AWS_SHARED_CREDENTIALS_FILE": str(cred),
            "AWS_PROFILE": "p24", "AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": "",
            "AWS_REGION": "eu-west-3"}
    n0 = len(s3.auth())
    assert info(tbx_asan, "s3://models/dir/m.safetensors", env=env2) == d
    auth = s3.auth()[n0:]
    assert auth and all(a.startswith(f"AWS4-HMAC-SHA256 Credential={user}/") and
                        "/eu-west-3/s3/aws4_request" in a for a in auth), auth
    # an empty object: the store's answer to a range of it (S3: 416) is an empty file
    s3.put("models", "dir/empty.gguf", b"", user, secret)
    (tmp_path / "empty.gguf").write_bytes(b"")
    pr = tbx_run(tbx_asan, "info", "s3://models/dir/empty.gguf", env=env)
    pl = tbx_run(tbx_asan, "info", tmp_path / "empty.gguf")
    assert pr.returncode == pl.returncode != 0
    assert pr.stderr.replace(b"s3://models/dir/", b"") == \
        pl.stderr.replace(f"{tmp_path}/".encode(), b""), (pr.stderr, pl.stderr)
    p = tbx_run(tbx_asan, "info", "--verbose", "s3://models/dir/missing.gguf", env=env)
    assert p.returncode != 0 and b"HTTP 404" in p.stderr, p.stderr
    assert secret.encode() not in p.stderr


# ------------------------------------------------------------------------------------------
# The prefetch: the next tensor's bytes fetched while the engine works on the current one
# ------------------------------------------------------------------------------------------
def write_reversed_st(path: Path, arrays: dict, pad: int = 0) -> dict:
    """A safetensors file whose data holds the tensors in the reverse order of the header's
    names (after a header of `pad` bytes more: metadata); returns each tensor's file offset."""
    hdr, off = ({"__metadata__": {"pad": "x" * pad}} if pad else {}), 0
    for n in reversed(list(arrays)):
        nb = arrays[n].nbytes
        hdr[n] = {"dtype": "F16", "shape": list(arrays[n].shape), "data_offsets": [off, off + nb]}
        off += nb
    hb = json.dumps(hdr).encode()
    hb += b" " * (-len(hb) % 8)
    with open(path, "wb") as f:
        f.write(len(hb).to_bytes(8, "little") + hb)
        for n in reversed(list(arrays)):
            f.write(arrays[n].tobytes())
    return {n: 8 + len(hb) + hdr[n]["data_offsets"][0] for n in arrays}


def test_convert_prefetch_equals_local(tbx_asan, web, data, tmp_path):
    """With the prefetch (the default) a remote conversion fetches the next tensor, and the rest
    of a tensor past its first 16 MiB, on a thread of its own while the engine works: the
    output is the local conversion's, the prefetch requests are there (TBX_HTTP_VERBOSE names
    them), no byte is fetched twice, and there are no more requests than without it."""
    np = need("numpy")
    st = need("safetensors.numpy")
    rng = np.random.default_rng(11)
    shapes = {"a0": (3 * 1024, 1024), "a1": (20 * 1024, 1024), "a2": (1024, 1024),
              "a3": (3 * 1024, 1024), "a4": (64,)}   # 6, 40, 2, 6 MiB and 128 bytes of f16
    arrays = {n: rng.standard_normal(s, dtype=np.float32).astype(np.float16)
              for n, s in shapes.items()}
    src = data["root"] / "pf.safetensors"
    write_reversed_st(src, arrays)
    assert set(st.load_file(str(src))) == set(arrays)
    url = f"{web.url}/pf.safetensors"
    runs = {}
    for label, env in (("on", {}), ("off", {"TBX_HTTP_PREFETCH": "0"})):
        out = tmp_path / f"{label}.safetensors"
        mark = web.mark()
        p = tbx_run(tbx_asan, "convert", url, out, "--cast", "f32",
                    env={"TBX_HTTP_VERBOSE": "1", **env})
        assert p.returncode == 0, p.stderr.decode()
        reqs = [r for r in web.requests(mark) if r["uri"] == "/pf.safetensors"]
        runs[label] = (out.read_bytes(), reqs, p.stderr.decode().count("GET (prefetch)"))
    local = tmp_path / "local.safetensors"
    p = tbx_run(tbx_asan, "convert", src, local, "--cast", "f32")
    assert p.returncode == 0, p.stderr.decode()
    got = st.load_file(str(tmp_path / "on.safetensors"))
    for n, a in arrays.items():
        assert np.array_equal(got[n], a.astype(np.float32)), n
    assert runs["on"][0] == local.read_bytes() == runs["off"][0]
    on, off = runs["on"][1], runs["off"][1]
    assert runs["on"][2] >= 3 and runs["off"][2] == 0, (runs["on"][2], runs["off"][2])
    assert len(on) <= len(off), ([r["range"] for r in on], [r["range"] for r in off])
    sent = sum(r["bytes"] for r in on)
    assert sent <= src.stat().st_size + 64 * 1024 + len(on) * 1024, (sent, on)


def test_prefetch_error_reported_on_read(tbx_asan, web, data, tmp_path):
    """A prefetched range the server refuses (503, no retry) fails the read that reaches it,
    with the message a read's own request gives (the same as without the prefetch), and
    nothing is written."""
    np = need("numpy")
    rng = np.random.default_rng(12)
    arrays = {f"b{i}": rng.standard_normal((3 * 1024, 1024), dtype=np.float32)
              .astype(np.float16) for i in range(3)}
    offs = write_reversed_st(data["root"] / "pfx.safetensors", arrays)
    url = f"{web.url}/fail/{offs['b1']}/pfx.safetensors"  # b2 is read first (file order), then b1
    lines = {}
    for label, env in (("on", {}), ("off", {"TBX_HTTP_PREFETCH": "0"})):
        out = tmp_path / f"{label}.safetensors"
        p = tbx_run(tbx_asan, "convert", url, out, "--cast", "f32",
                    env={"TBX_HTTP_VERBOSE": "1", "TBX_HTTP_RETRIES": "0", **env})
        err = p.stderr.decode()
        assert p.returncode != 0 and not out.exists(), err
        verbose = [ln for ln in err.splitlines() if ln.startswith("tbx: GET")]
        failed = [ln for ln in verbose if "-> 503" in ln]
        assert len(failed) == 1, verbose
        assert ("(prefetch)" in failed[0]) == (label == "on"), failed
        assert f"bytes={offs['b1']}-" in failed[0], failed
        lines[label] = [ln for ln in err.splitlines() if "HTTP 503" in ln and "GET" not in ln]
    assert lines["on"] and lines["on"] == lines["off"], lines
    assert '"b1"' in lines["on"][0] or "b1:" in lines["on"][0], lines


def test_close_ends_a_prefetch_under_way(tbx_asan, web, data, tmp_path):
    """The first tensor's read fails (503, sent after 0.4 s: time for the prefetch to be
    under way on a loaded machine; it starts as the first tensor is set up) while the next
    tensor's prefetch is running (/slowfail/ sends 4 MiB/s, 6 MiB take 1.5 s): the file's
    close ends that request at once instead of waiting for it, and frees everything (ASan)."""
    np = need("numpy")
    rng = np.random.default_rng(13)
    arrays = {f"c{i}": rng.standard_normal((3 * 1024, 1024), dtype=np.float32)
              .astype(np.float16) for i in range(2)}
    offs = write_reversed_st(data["root"] / "pfc.safetensors", arrays)
    # where c1's (first in the file) own request starts (the header's read-ahead may hold its
    # start): the first range nginx logged inside c1 for a conversion without the prefetch
    mark = web.mark()
    p = tbx_run(tbx_asan, "convert", f"{web.url}/pfc.safetensors", tmp_path / "n.safetensors",
                "--cast", "f32", env={"TBX_HTTP_PREFETCH": "0"})
    assert p.returncode == 0, p.stderr.decode()
    starts = [int(r["range"][6:].split("-")[0]) for r in web.requests(mark) if r["range"]]
    n = min(a for a in starts if offs["c1"] <= a < offs["c0"])
    url = f"{web.url}/slowfail/{n}/pfc.safetensors"
    out = tmp_path / "o.safetensors"
    t = time.monotonic()
    p = tbx_run(tbx_asan, "convert", url, out, "--cast", "f32",
                env={"TBX_HTTP_VERBOSE": "1", "TBX_HTTP_RETRIES": "0"})
    dt = time.monotonic() - t
    err = p.stderr.decode()
    assert p.returncode != 0 and not out.exists(), err
    assert "c1: " in err and "HTTP 503" in err, err
    pf = [ln for ln in err.splitlines() if ln.startswith("tbx: GET (prefetch)")]
    assert pf and f"bytes={offs['c0']}-" in pf[0] and "abort" in pf[0].lower(), err
    assert dt < 1.2, (dt, err)
