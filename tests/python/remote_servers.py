"""Real servers on 127.0.0.1 for the remote-source tests and bench/bench_remote.py.

* ``Nginx``: Debian's nginx with a generated configuration and a temporary root, HTTP and
  HTTPS (a self-signed certificate made with openssl), a location that ignores Range
  (``/norange/``: ``max_ranges 0``), a redirect loop (``/loop/``), a 403 (``/forbidden/``),
  a slow answer (``/slow/``: the echo module sleeps), a range that fails
  (``/fail/N/FILE``: FILE at 4 MiB/s, but 503 for a range request that starts at byte N;
  ``/slowfail/N/FILE``: the same 503 after 0.4 s), the
  Hub's URL layout
  (``/ORG/REPO/resolve/REV/FILE`` -> 302 -> ``/cdn/ORG/REPO/REV/FILE``; ``/api/...`` the
  tree listings as files), ``/badrange/`` and ``/badetag/`` (a second, malformed Content-Range;
  an ETag of 302 bytes), and an access log of every request with its bytes.
* ``S3``: gofakes3 (an S3-compatible store built from the Go module proxy by
  scripts/bootstrap.sh into .cache/s3/) serving a temporary directory.

Nothing here is a mock of tensorbox: these are the servers the library talks to.
"""
from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ECHO_MODULE = "/usr/lib/nginx/modules/ngx_http_echo_module.so"
GOFAKES3 = REPO / ".cache" / "s3" / "gofakes3"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port: int, proc: subprocess.Popen, what: str, timeout: float = 15.0) -> None:
    t = time.monotonic() + timeout
    while time.monotonic() < t:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode} before listening")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"{what} did not listen on port {port} within {timeout} s")


class Nginx:
    """nginx serving `root` on http://127.0.0.1:port and https://localhost:tls_port."""

    def __init__(self, workdir: Path, root: Path, s3_upstream: int | None = None,
                 limit_rate: str | None = None):
        self.workdir = Path(workdir)
        self.limit_rate = limit_rate  # nginx's limit_rate (bytes/s of each answer), e.g. "100m"
        self.s3_upstream = s3_upstream  # a port: s3_port proxies to it, logging Authorization
        self.s3_port = free_port() if s3_upstream else None
        self.s3_log = self.workdir / "s3.log"
        self.root = Path(root)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.root.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.tls_port = free_port()
        self.log = self.workdir / "access.log"
        self.cert = self.workdir / "cert.pem"
        self.key = self.workdir / "key.pem"
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def tls_url(self) -> str:
        return f"https://localhost:{self.tls_port}"

    def _config(self) -> str:
        w = self.workdir
        temps = " ".join(f"{k}_temp_path {w}/{k};" for k in
                         ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
        return f"""
load_module {ECHO_MODULE};
worker_processes 1;
daemon off;
master_process off;
pid {w}/nginx.pid;
error_log {w}/error.log;
events {{ worker_connections 256; }}
http {{
  log_format tbx '$request_method $uri $status $bytes_sent "$http_range" "$http_authorization"';
  access_log {self.log} tbx;
  {f"limit_rate {self.limit_rate};" if self.limit_rate else ""}
  map "$uri|$http_range" $tbx_fail {{ default 0; "~^/fail/(\\d+)/[^|]*\\|bytes=\\1-" 1; }}
  map "$uri|$http_range" $tbx_slowfail {{ default 0; "~^/slowfail/(\\d+)/[^|]*\\|bytes=\\1-" 1; }}
  {temps}
  default_type application/octet-stream;
  sendfile on;
  keepalive_requests 100000;
  server {{
    listen 127.0.0.1:{self.port};
    listen 127.0.0.1:{self.tls_port} ssl;
    ssl_certificate {self.cert};
    ssl_certificate_key {self.key};
    root {self.root};
    location /norange/ {{ max_ranges 0; }}
    location /badrange/ {{ add_header Content-Range "bytes 0-x/10" always; }}
    location /badetag/ {{ add_header ETag "\\"{'e' * 300}\\"" always; }}
    location /loop/ {{ return 302 /loop/; }}
    location /forbidden/ {{ return 403; }}
    location /slow/ {{ echo_sleep 5; echo "late"; }}
    location /cdn/ {{ }}
    location /fail/ {{
      limit_rate 4m;
      if ($tbx_fail) {{ return 503; }}
      rewrite ^/fail/\\d+/(.*)$ /$1 break;
    }}
    location /slowfail/ {{
      limit_rate 4m;
      error_page 418 = @slow503;
      if ($tbx_slowfail) {{ return 418; }}
      rewrite ^/slowfail/\\d+/(.*)$ /$1 break;
    }}
    location @slow503 {{ echo_sleep 0.4; echo_status 503; echo "busy"; }}
    location /api/ {{ default_type application/json; }}
    location = /api/models/org/paged/tree/main {{
      default_type application/json;
      add_header Link '<https://example.com/s.css>; rel="preload", </api/pages/paged/2?c=x,y>; rel="next"';
    }}
    location = /api/pages/paged/2 {{
      default_type application/json;
      add_header Link '<http://127.0.0.1:{self.port}/api/pages/paged/3>; rel="next"';
    }}
    location = /api/models/org/evilpage/tree/main {{
      default_type application/json;
      add_header Link '<http://localhost:{self.port}/api/pages/paged/2>; rel="next"';
    }}
    location ~ ^/([^/]+)/([^/]+)/resolve/([^/]+)/(.*)$ {{ return 302 /cdn/$1/$2/$3/$4; }}
  }}
{self._s3_proxy()}
}}
"""

    def _s3_proxy(self) -> str:
        if not self.s3_upstream:
            return ""
        return f"""
  log_format tbxauth '$request_method $uri $status $bytes_sent "$http_authorization"';
  server {{
    listen 127.0.0.1:{self.s3_port};
    access_log {self.s3_log} tbxauth;
    location / {{
      proxy_pass http://127.0.0.1:{self.s3_upstream};
      proxy_set_header Host $http_host;
      proxy_buffering off;
    }}
  }}"""

    def s3_auth_lines(self) -> list[str]:
        """The Authorization header of every request the S3 proxy passed on."""
        time.sleep(0.05)
        return [ln.split('"')[1]
                for ln in self.s3_log.read_text().splitlines()] if self.s3_log.exists() else []

    def start(self) -> "Nginx":
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                        "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost",
                        "-keyout", str(self.key), "-out", str(self.cert)],
                       check=True, capture_output=True)
        conf = self.workdir / "nginx.conf"
        conf.write_text(self._config())
        nginx = shutil.which("nginx") or "/usr/sbin/nginx"
        self.proc = subprocess.Popen([nginx, "-c", str(conf), "-p", str(self.workdir)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        wait_port(self.port, self.proc, "nginx")
        return self

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def mark(self) -> int:
        """The log's current length: requests() after it are those made since."""
        return self.log.stat().st_size if self.log.exists() else 0

    def requests(self, since: int = 0) -> list[dict]:
        """Every logged request after `since`: method, uri, status, bytes (sent, headers too),
        range, auth (the Authorization header)."""
        time.sleep(0.05)  # nginx writes a line when the request ends
        out = []
        with open(self.log, "rb") as f:
            f.seek(since)
            for line in f.read().decode().splitlines():
                head, rng, _, auth, _ = line.split('"')
                parts = head.split()
                out.append({"method": parts[0], "uri": parts[1], "status": int(parts[2]),
                            "bytes": int(parts[3]), "range": rng,
                            "auth": "" if auth == "-" else auth})
        return out


class S3:
    """gofakes3 on http://127.0.0.1:port storing buckets under `root`."""

    def __init__(self, root: Path):
        self.root = Path(root)
        self.port = free_port()
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> "S3":
        if not GOFAKES3.is_file():
            raise RuntimeError(f"{GOFAKES3} is missing: scripts/bootstrap.sh builds it "
                               f"(go install github.com/johannesboyne/gofakes3/cmd/gofakes3)")
        self.root.mkdir(parents=True, exist_ok=True)
        self.proc = subprocess.Popen([str(GOFAKES3), "-backend", "fs", "-fs.path", str(self.root),
                                      "-fs.create", "-autobucket", "-host",
                                      f"127.0.0.1:{self.port}"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_port(self.port, self.proc, "gofakes3")
        return self

    def put(self, bucket: str, key: str, data: bytes, user: str, secret: str) -> None:
        """Stores an object with a SigV4-signed PUT made by curl (not by tensorbox)."""
        subprocess.run(["curl", "-sf", "-X", "PUT", "--aws-sigv4", "aws:amz:us-east-1:s3",
                        "--user", f"{user}:{secret}", "--data-binary", "@-",
                        f"{self.url}/{bucket}/{key}"], input=data, check=True,
                       capture_output=True)

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None


def make_files(root: Path, need) -> dict:
    """Writes the files the remote tests serve into `root` with the reference writers (gguf-py,
    safetensors): m.gguf (a 60,000-token vocabulary: a ~1 MB header), m.safetensors, a sharded
    Hugging Face set hfset/ (index + 2 shards + config.json), its copy in the Hub's layout
    (cdn/org/repo/main/ and the tree listing api/models/org/repo/tree/main), and norange/.
    Returns the arrays they hold. `need` imports a module or fails the test."""
    np = need("numpy")
    gguf = need("gguf")
    st = need("safetensors.numpy")
    rng = np.random.default_rng(24)
    arrays = {
        "small": rng.standard_normal(1000, dtype=np.float32),
        "mid": rng.standard_normal((1024, 1024), dtype=np.float32),         # 4 MiB: one range
        "big": rng.standard_normal((5, 1024, 1024), dtype=np.float32),      # 20 MiB: parallel
    }
    w = gguf.GGUFWriter(str(root / "m.gguf"), "llama")
    w.add_token_list([f"tok{i:06d}".encode() for i in range(60000)])         # ~1 MB header
    for k, a in arrays.items():
        w.add_tensor(k, a)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    st.save_file(arrays, str(root / "m.safetensors"), metadata={"what": "remote test"})
    # a sharded Hugging Face set: index + 2 shards, as transformers lays it out
    hf = root / "hfset"
    hf.mkdir()
    shards = {"model-00001-of-00002.safetensors": {"small": arrays["small"], "mid": arrays["mid"]},
              "model-00002-of-00002.safetensors": {"big": arrays["big"]}}
    wm = {}
    for name, ts in shards.items():
        st.save_file(ts, str(hf / name), metadata={"format": "pt"})
        wm.update({t: name for t in ts})
    total = sum(a.nbytes for a in arrays.values())
    (hf / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {"total_size": total}, "weight_map": wm}, indent=2))
    (hf / "config.json").write_text(json.dumps({"model_type": "test", "hidden_size": 1024}))
    # the Hub's layout: resolve -> 302 -> /cdn/ORG/REPO/REV/FILE; the tree listing as a file
    cdn = root / "cdn" / "org" / "repo" / "main"
    shutil.copytree(hf, cdn)
    tree = [{"type": "file", "path": p.name, "size": p.stat().st_size} for p in sorted(hf.iterdir())]
    tree.append({"type": "directory", "path": "sub", "size": 0})
    api = root / "api" / "models" / "org" / "repo" / "tree"
    api.mkdir(parents=True)
    (api / "main").write_text(json.dumps(tree))
    (root / "norange").mkdir()
    shutil.copy(root / "m.safetensors", root / "norange" / "m.safetensors")
    # answers with a second, malformed Content-Range or a second, different ETag
    for d in ("badrange", "badetag"):
        (root / d).mkdir()
        shutil.copy(root / "m.safetensors", root / d / "m.safetensors")
    # the same repository listed in three pages, each naming the next in a Link header (the
    # Hub's paging: a path on the same server, then an absolute URL), and one whose next page
    # is on another origin (localhost: the token must not go there)
    shutil.copytree(hf, root / "cdn" / "org" / "paged" / "main")
    pages = [tree[:2], tree[2:4], tree[4:]]
    for d, page in ((root / "api" / "models" / "org" / "paged" / "tree" / "main", pages[0]),
                    (root / "api" / "pages" / "paged" / "2", pages[1]),
                    (root / "api" / "pages" / "paged" / "3", pages[2])):
        d.parent.mkdir(parents=True, exist_ok=True)
        d.write_text(json.dumps(page))
    shutil.copytree(hf, root / "cdn" / "org" / "evilpage" / "main")
    evil = root / "api" / "models" / "org" / "evilpage" / "tree"
    evil.mkdir(parents=True)
    (evil / "main").write_text(json.dumps(pages[0]))
    # a repository whose tree listing names a path outside it
    bad = root / "api" / "models" / "org" / "badtree" / "tree"
    bad.mkdir(parents=True)
    (bad / "main").write_text(json.dumps([{"type": "file", "path": "../escape.bin", "size": 1}]))
    return arrays
