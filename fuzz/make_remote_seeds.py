#!/usr/bin/env python3
"""Seeds for fuzz_http_head and fuzz_hf_tree: what servers answer the remote layer.

fuzz_http_head: header blocks captured from the real servers of tests/python/remote_servers.py
(Debian's nginx: 206 for a range, 200 where Range is ignored, 416 for an empty file, the Hub
layout's 302 followed by the CDN's 206, 404, 403; gofakes3, an S3-compatible store: a signed
GET of a range), each as curl received it (-D), prefixed by the target's two control bytes
(the request kind, the length asked). Without nginx or gofakes3 the script fails.

fuzz_hf_tree: listings in the Hugging Face Hub's JSON shape (api/models/ORG/REPO/tree/REV
?recursive=true: type, oid, size, path, lfs {oid, size, pointerSize}, xetHash), the test
servers' own listing, and a few edge shapes."""
import json
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests" / "python"))
import remote_servers as rs  # noqa: E402


def curl_head(url, rng=None, follow=False, extra=()):
    cmd = ["curl", "-s", "-o", "/dev/null", "-D", "-", "--max-time", "10"]
    if rng:
        cmd += ["-r", rng]
    if follow:
        cmd += ["-L"]
    return subprocess.run(cmd + list(extra) + [url], check=True, capture_output=True).stdout


def http_seeds():
    seeds = {}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        root = tmp / "root"
        (root / "norange").mkdir(parents=True)
        (root / "cdn" / "org" / "repo" / "main").mkdir(parents=True)
        data = bytes(range(256)) * 1024
        (root / "m.bin").write_bytes(data)
        (root / "empty.bin").write_bytes(b"")
        (root / "norange" / "m.bin").write_bytes(data)
        (root / "cdn" / "org" / "repo" / "main" / "model.safetensors").write_bytes(data)
        ng = rs.Nginx(tmp / "nginx", root).start()
        try:
            u = ng.url
            # (mode, length byte): mode 0 probe, 1 a range of the file, 2 a document
            seeds["nginx-206-probe"] = (0, 255, curl_head(f"{u}/m.bin", "0-65535"))
            seeds["nginx-206-range"] = (1, 16, curl_head(f"{u}/m.bin", "4096-8191"))
            seeds["nginx-200-norange"] = (0, 4, curl_head(f"{u}/norange/m.bin", "0-1023"))
            seeds["nginx-416-empty"] = (0, 255, curl_head(f"{u}/empty.bin", "0-65535"))
            seeds["nginx-302-206-hub"] = (0, 255, curl_head(
                f"{u}/org/repo/resolve/main/model.safetensors", "0-65535", follow=True))
            seeds["nginx-404"] = (1, 1, curl_head(f"{u}/missing.bin", "0-10"))
            seeds["nginx-403"] = (1, 1, curl_head(f"{u}/forbidden/x", "0-10"))
            seeds["nginx-200-doc"] = (2, 255, curl_head(f"{u}/m.bin"))
        finally:
            ng.stop()
        s3 = rs.S3(tmp / "s3").start()
        try:
            s3.put("bucket", "m.bin", data, "key", "secret")
            sig = ["--aws-sigv4", "aws:amz:us-east-1:s3", "--user", "key:secret"]
            seeds["gofakes3-206"] = (1, 255, curl_head(f"{s3.url}/bucket/m.bin", "0-65535",
                                                       extra=sig))
            seeds["gofakes3-404"] = (0, 255, curl_head(f"{s3.url}/bucket/none.bin", "0-65535",
                                                       extra=sig))
        finally:
            s3.stop()
    # hand-made edges: a chunk of each malformed form the parser refuses
    base = (b"HTTP/1.1 206 Partial Content\r\nContent-Length: 10\r\n"
            b"ETag: \"abc\"\r\nLast-Modified: Sat, 28 Nov 2026 01:59:58 GMT\r\n")
    seeds["edge-range-star"] = (0, 255, base + b"Content-Range: bytes */100\r\n\r\n")
    seeds["edge-range-big"] = (1, 255, base + b"Content-Range: bytes 0-9/9223372036854775807\r\n\r\n")
    seeds["edge-folded"] = (1, 255, base + b"Content-Range: bytes 0-9/10\r\n , 1\r\n\r\n")
    seeds["edge-twice"] = (1, 255, base + b"Content-Range: bytes 0-9/10\r\nETag: \"abd\"\r\n\r\n")
    seeds["edge-http2"] = (0, 255, b"HTTP/2 206\r\ncontent-range: bytes 0-9/10\r\n\r\n")
    # the Hub's paging of its tree listing: a next link among others
    seeds["edge-link-next"] = (2, 255, b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nLink: "
                               b"<https://x/s.css>; rel=preload; title=\"a, b\", "
                               b"</api/models/o/r/tree/main?cursor=eyJmIjoxfQ>; rel=\"next\"\r\n\r\n")
    seeds["edge-link-abs"] = (2, 255, b"HTTP/1.1 200 OK\r\nLink: <https://hf.example:8443/api/"
                              b"p/2>; rel=next\r\nLink: <https://hf.example:8443/api/p/2>; "
                              b"rel=\"next last\"\r\n\r\n")
    return seeds


def tree_seeds():
    hub = [
        {"type": "file", "oid": "a6344aac8c09253b3b630fb776ae94478aa0275b", "size": 1519,
         "path": ".gitattributes"},
        {"type": "directory", "oid": "4e7bd1a6c8d7ff1e4d4ac3a6ab4d0c1b2ff9a3e1", "size": 0,
         "path": "sub"},
        {"type": "file", "oid": "d1514c3162bbe87b343f565fadc62e6c06f04f03", "size": 190,
         "path": "sub/config.json"},
        {"type": "file", "oid": "72b987fd805cfa2b58c4c8c952b274a11bfd5a00", "size": 612,
         "path": "config.json"},
        {"type": "file", "oid": "6d1e4bd4b0d1e6b2a3c4d5e6f708192a3b4c5d6e", "size": 90868376,
         "lfs": {"oid": "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
                 "size": 90868376, "pointerSize": 134},
         "xetHash": "4b6f1a2c", "path": "model.safetensors"},
    ]
    test_tree = [{"type": "file", "path": n, "size": s} for n, s in
                 [("config.json", 44), ("model-00001-of-00002.safetensors", 4198568),
                  ("model-00002-of-00002.safetensors", 20971608),
                  ("model.safetensors.index.json", 200)]]
    test_tree.append({"type": "directory", "path": "sub", "size": 0})
    return {
        "hub-shape.json": json.dumps(hub).encode(),
        "hub-shape-indented.json": json.dumps(hub, indent=2).encode(),
        "test-servers.json": json.dumps(test_tree).encode(),
        "empty.json": b"[]",
        "escaped.json": json.dumps([{"type": "file", "path": "sub/a\u00e9]\"{,.bin",
                                     "size": 1}], ensure_ascii=True).encode(),
        "duplicate.json": json.dumps(hub[:2] + hub[:1]).encode(),
    }


def main() -> None:
    out = HERE / "corpus"
    (out / "http_head").mkdir(parents=True, exist_ok=True)
    (out / "hf_tree").mkdir(parents=True, exist_ok=True)
    for name, (mode, ln, block) in http_seeds().items():
        (out / "http_head" / name).write_bytes(bytes([mode, ln]) + block)
    for name, text in tree_seeds().items():
        (out / "hf_tree" / name).write_bytes(text)
    print(f"wrote {out}/http_head and {out}/hf_tree")


if __name__ == "__main__":
    main()
