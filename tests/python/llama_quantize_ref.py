"""llama.cpp's own quantizer (llama_model_quantize of libllama in .venv, llama-cpp-python's
ctypes bindings) as the reference of tensorbox's llama-quantize presets: the tests quantize the
same f32 GGUF with both and compare the files.

`quantize(src, dst, ftype, **params)` runs it with llama_model_quantize_params fields by name
(nthread defaults to 1); `tensor_types` is a list of (pattern, ggml type name) pairs
(tt_overrides). It returns llama.cpp's log as text (the per-tensor lines of --dry-run)."""
from __future__ import annotations

import ctypes
from pathlib import Path

import pytest

# llama_ftype by llama-quantize's preset name (tools/quantize/quantize.cpp, aliases too)
FTYPES = {
    "Q4_0": 2, "Q4_1": 3, "Q8_0": 7, "Q5_0": 8, "Q5_1": 9, "Q2_K": 10, "Q3_K_S": 11,
    "Q3_K_M": 12, "Q3_K": 12, "Q3_K_L": 13, "Q4_K_S": 14, "Q4_K_M": 15, "Q4_K": 15,
    "Q5_K_S": 16, "Q5_K_M": 17, "Q5_K": 17, "Q6_K": 18, "IQ2_XXS": 19, "IQ2_XS": 20,
    "Q2_K_S": 21, "IQ3_XS": 22, "IQ3_XXS": 23, "IQ1_S": 24, "IQ4_NL": 25, "IQ3_S": 26,
    "IQ3_M": 27, "IQ2_S": 28, "IQ2_M": 29, "IQ4_XS": 30, "IQ1_M": 31, "BF16": 32,
    "TQ1_0": 36, "TQ2_0": 37, "MXFP4_MOE": 38, "Q1_0": 40, "Q2_0": 41, "F32": 0, "F16": 1,
}

_LOG: list[str] = []
_CB = None


def _lib():
    try:
        import llama_cpp
        from llama_cpp import llama_cpp as L
    except ImportError:
        pytest.fail("llama_cpp (llama-cpp-python) is not installed in .venv", pytrace=False)
    global _CB
    if _CB is None:
        L.llama_backend_init()

        @ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p)
        def cb(level, text, ud):
            _LOG.append(text.decode("utf-8", "replace"))
        _CB = cb
        L.llama_log_set(_CB, None)
    return L


def ggml_type_id(name: str) -> int:
    import gguf
    return int(gguf.GGMLQuantizationType[name.upper()])


KV_TAGS = {"int": 0, "float": 1, "bool": 2, "str": 3}  # LLAMA_KV_OVERRIDE_TYPE_*


def quantize(src: Path, dst: Path, preset: str, *, nthread: int = 1, tensor_types=(),
             output_tensor_type: str | None = None, token_embedding_type: str | None = None,
             kv_overrides=(), **params) -> str:
    L = _lib()
    p = L.llama_model_quantize_default_params()
    p.nthread = nthread
    if preset == "COPY":
        p.ftype = 0
        p.only_copy = True
    else:
        p.ftype = FTYPES[preset]
    if output_tensor_type:
        p.output_tensor_type = ggml_type_id(output_tensor_type)
    if token_embedding_type:
        p.token_embedding_type = ggml_type_id(token_embedding_type)
    for k, v in params.items():
        setattr(p, k, v)
    keep = None
    if tensor_types:
        arr = (L.llama_model_tensor_override * (len(tensor_types) + 1))()
        keep = [pat.lower().encode() for pat, _ in tensor_types]
        for i, (pat, t) in enumerate(tensor_types):
            arr[i].pattern = keep[i]
            arr[i].type = ggml_type_id(t)
        arr[len(tensor_types)].pattern = None
        arr[len(tensor_types)].type = 43  # GGML_TYPE_COUNT
        p.tt_overrides = ctypes.cast(arr, type(p.tt_overrides))
    kvs = None
    if kv_overrides:  # (key, "int" | "float" | "bool" | "str", value), as --override-kv
        kvs = (L.llama_model_kv_override * (len(kv_overrides) + 1))()
        for i, (key, tag, val) in enumerate(kv_overrides):
            kvs[i].key = key.encode()
            kvs[i].tag = KV_TAGS[tag]
            if tag == "int":
                kvs[i].value.val_i64 = val
            elif tag == "float":
                kvs[i].value.val_f64 = val
            elif tag == "bool":
                kvs[i].value.val_bool = val
            else:
                kvs[i].value.val_str = val.encode()
        kvs[len(kv_overrides)].key = b""
        p.kv_overrides = ctypes.cast(kvs, type(p.kv_overrides))
    _LOG.clear()
    rc = L.llama_model_quantize(str(src).encode(), str(dst).encode(), ctypes.byref(p))
    log = "".join(_LOG)
    del keep, kvs
    if rc != 0:
        raise RuntimeError(f"llama_model_quantize failed ({rc}):\n{log[-3000:]}")
    return log
