"""The Python package reads URLs (src/io/remote.c through tbx_open_path): the same model as the
local file, and a file that changes on the server while it is read is an error, never a mix.
Against nginx on 127.0.0.1 (tests/python/remote_servers.py)."""
from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from conftest import need  # noqa: E402
from remote_servers import Nginx, make_files  # noqa: E402


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("www")
    return {"root": root, "arrays": make_files(root, need)}


@pytest.fixture(scope="module")
def web(data, tmp_path_factory):
    n = Nginx(tmp_path_factory.mktemp("nginx"), data["root"]).start()
    yield n
    n.stop()


def test_a_file_changed_mid_read_fails(web, data, tmp_path):
    """Python package: a URL opens like a path; a file replaced after the open is an error."""
    tensorbox = need("tensorbox")
    src = data["root"] / "m.gguf"
    target = data["root"] / "changing.gguf"
    shutil.copy(src, target)
    url = f"{web.url}/changing.gguf"
    assert tensorbox.info(url) == tensorbox.info(str(src))
    with tensorbox.safe_open(url) as f:
        assert f.get_tensor("mid").tobytes() == data["arrays"]["mid"].tobytes()
        st = target.stat()
        os.utime(target, (st.st_atime, st.st_mtime + 10))    # nginx's ETag is mtime-size
        with pytest.raises(Exception) as ei:
            f.get_tensor("big")
        assert "changed while it was read" in str(ei.value), str(ei.value)
    target.unlink()


