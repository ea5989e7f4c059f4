"""tensorbox: read, inspect, validate, write and convert ML weight container files.

A C extension over libtensorbox (safetensors, GGUF including split sets, zTensor, OINF, and
every format the library gains a driver for). Nothing here parses a file: every byte is read
by the library, through its bounds-checked cursor and limits.

Reading, the safetensors way::

    import tensorbox
    with tensorbox.safe_open("model.gguf", framework="np") as f:
        for name in f.keys():
            a = f.get_tensor(name)             # numpy array
        rows = f.get_slice("emb")[10:20]       # reads only those rows' bytes
        meta = f.metadata()                    # typed Python values
    tensors = tensorbox.load_file("model.safetensors")

Plain dtypes come back as read-only numpy arrays that are views of the mapped file where the
file allows it (the array keeps the file open through its ``.base``), else as one copy. bf16
and the fp8 types come back as ``ml_dtypes`` types when ml_dtypes is installed, else as raw
unsigned integers (``tensor_dtype(name)`` names the real dtype). Block-quantized tensors
(ggml types, packed sub-byte types) come back as their raw bytes (uint8). ``dequantize=True``
asks for floats: every quantized tensor (also linear-quantized ones: OINF v2, zTensor
quantized_group) and every dtype numpy lacks (bf16, fp8, block, packed) is decoded to float32;
numpy's own dtypes are returned as stored. The GIL is released while the library reads and
decodes.

Inspecting: :func:`info` (the document of ``tbx info --json``), :func:`validate` (every
problem with its code, field and byte offset), :func:`check_input` (has the file behind an
array or a safe_open shrunk since it was opened? Its zero-copy arrays then read zeros past the
new end, never crash). Writing: :func:`save_file`, :func:`convert`,
with the options of ``tbx convert``; convert returns what became of each tensor
(:class:`ConvertReport`), and values a type could not keep are a :class:`ConversionWarning`
(an error with ``strict=True``).

Errors are :class:`Error` and its subclasses (:class:`FormatError`, :class:`LimitError`,
:class:`UnsupportedError`, :class:`NotFoundError`, :class:`ChecksumError`,
:class:`ExistsError`, :class:`LossyError`, :class:`IOError`, :class:`InvalidArgumentError`,
...), each with ``.code`` (e.g. ``"TBX_E_TRUNCATED"``), ``.offset`` (byte offset or None) and
``.field``.
"""
from __future__ import annotations

import math
import os
import threading
import warnings
from collections import namedtuple

import numpy as np

from . import _tensorbox as _tb
from ._tensorbox import (  # noqa: F401  (re-exported)
    ChecksumError,
    Error,
    ExistsError,
    FormatError,
    InvalidArgumentError,
    IOError,
    LimitError,
    LossyError,
    NotFoundError,
    OutOfMemoryError,
    StateError,
    UnsupportedError,
)

try:  # optional: bf16 / fp8 numpy dtypes
    import ml_dtypes as _ml
except ImportError:  # pragma: no cover - exercised by the fresh-venv test
    _ml = None

__all__ = [
    "safe_open", "load_file", "load", "info", "validate", "save_file", "convert", "Problem",
    "formats", "hf_architectures", "check_input", "diff", "ConvertReport", "ConversionWarning", "Error",
    "FormatError",
    "LimitError", "UnsupportedError", "NotFoundError", "ChecksumError", "ExistsError",
    "LossyError", "IOError", "InvalidArgumentError", "OutOfMemoryError", "StateError",
]

__version__ = _tb.library_version()

# ---------------------------------------------------------------------------------------------
# dtypes
# ---------------------------------------------------------------------------------------------
_PLAIN = {
    "f64": np.float64, "f32": np.float32, "f16": np.float16,
    "i8": np.int8, "i16": np.int16, "i32": np.int32, "i64": np.int64,
    "u8": np.uint8, "u16": np.uint16, "u32": np.uint32, "u64": np.uint64,
    "bool": np.bool_, "bitset": np.uint8, "c64": np.complex64, "c128": np.complex128,
}
# dtypes that need ml_dtypes; without it: the raw unsigned type of the same width
_ML_NAMES = {
    "bf16": ("bfloat16", np.uint16),
    "f8_e4m3": ("float8_e4m3fn", np.uint8),
    "f8_e5m2": ("float8_e5m2", np.uint8),
    "f8_e4m3fnuz": ("float8_e4m3fnuz", np.uint8),
    "f8_e5m2fnuz": ("float8_e5m2fnuz", np.uint8),
    "f8_e8m0": ("float8_e8m0fnu", np.uint8),
}


def _native(name: str) -> bool:
    """Does numpy itself hold dtype `name` (no ml_dtypes, no decoding)?"""
    return name in _PLAIN


def _np_dtype(name: str):
    """numpy dtype holding one element of tensorbox dtype `name`, or None (block/packed)."""
    t = _PLAIN.get(name)
    if t is not None:
        return np.dtype(t)
    ml = _ML_NAMES.get(name)
    if ml is not None:
        if _ml is not None and hasattr(_ml, ml[0]):
            return np.dtype(getattr(_ml, ml[0]))
        return np.dtype(ml[1])
    return None


def _tbx_dtype(dt: np.dtype):
    """tensorbox dtype name of a numpy dtype, or None."""
    dt = np.dtype(dt)
    for name, t in _PLAIN.items():
        if name != "bitset" and dt == np.dtype(t):
            return name
    if _ml is not None:
        for name, (mlname, _) in _ML_NAMES.items():
            if hasattr(_ml, mlname) and dt == np.dtype(getattr(_ml, mlname)):
                return name
    return None


_VALUE_NP = {
    "bool": np.bool_, "u8": np.uint8, "i8": np.int8, "u16": np.uint16, "i16": np.int16,
    "u32": np.uint32, "i32": np.int32, "u64": np.uint64, "i64": np.int64,
    "f16": np.float16, "f32": np.float32, "f64": np.float64,
}


def _np_array(elem: str, data: bytes, shape):
    """Hook of the extension: a packed metadata array (or ndarray, or bitset) as numpy."""
    if elem == "bitset":
        bits = np.unpackbits(np.frombuffer(data, np.uint8), bitorder="little")
        return bits[: int(shape)].astype(np.bool_)
    t = _VALUE_NP.get(elem)
    dt = np.dtype(t) if t is not None else _np_dtype(elem)
    if dt is None:  # an ndarray of a dtype numpy cannot hold: its bytes
        return np.frombuffer(bytearray(data), np.uint8)
    a = np.frombuffer(bytearray(data), dt)
    if t is None and not _native(elem) and dt.kind == "u":
        # bf16 / fp8 without ml_dtypes: the values as float32 (exact), as scalars come back as
        # floats, never their bit patterns
        a = _bits_to_f32(elem, a)
    return a.reshape(shape) if shape is not None else a


def _bits_to_f32(name: str, bits):
    """float32 values of bf16 / fp8 bit patterns (decoded by the library)."""
    out = np.empty(bits.size, np.float32)
    _tb.decode_f32(name, np.ascontiguousarray(bits).view(np.uint8), out)
    return out


_tb._set_array_hook(_np_array)


def _dtype_info(name: str):
    return _tb.dtype_info(name)  # (name, bits, block_size, block_bytes, flags) or None


_DTF_BLOCK = 0x20
_DTF_SHAPED = 0x40

# ---------------------------------------------------------------------------------------------
# Reading
# ---------------------------------------------------------------------------------------------
Problem = namedtuple("Problem", "code field offset message")
Problem.__doc__ = ("One validation problem: code (e.g. 'TBX_E_TRUNCATED'), field, byte offset "
                   "(None when none) and message.")


class _TensorRef:
    __slots__ = ("index", "name", "dtype", "shape", "layout", "ncomponents", "offset", "nbytes",
                 "encoded")

    def __init__(self, index, t):
        self.index = index
        (self.name, self.dtype, self.shape, self.layout, self.ncomponents, self.offset,
         self.nbytes, self.encoded) = t


def _raw_shape(ref: _TensorRef):
    """Shape of the raw-bytes view of a tensor without a numpy dtype."""
    di = _dtype_info(ref.dtype)
    if di is not None and di[4] & _DTF_BLOCK and not di[4] & _DTF_SHAPED and ref.shape:
        bs, bb = di[2], di[3]
        last = ref.shape[-1]
        if bs and last % bs == 0 and bb:
            return tuple(ref.shape[:-1]) + (last // bs * bb,)
    return (ref.nbytes,)


class _Reader:
    """Shared reading logic over one _File (thread-safe: the extension locks the handle)."""

    def __init__(self, path, verify=False, threads=0, data=None):
        if data is None:
            self._f = _tb._File(os.fspath(path), mmap=True, verify=verify, threads=threads)
        else:  # a bytes object read in place (tbx_open_memory); the handle keeps it alive
            self._f = _tb._File(path, verify=verify, threads=threads, data=data)
        self._refs = {}
        self._names = None
        self._lock = threading.Lock()

    def close(self):
        self._f.close()

    def names(self):
        if self._names is None:
            self._names = self._f.names()
        return list(self._names)

    def ref(self, name: str) -> _TensorRef:
        with self._lock:
            r = self._refs.get(name)
        if r is None:
            i = self._f.find(name)
            r = _TensorRef(i, self._f.tensor_info(i))
            with self._lock:
                self._refs[name] = r
        return r

    def is_quantized(self, r: _TensorRef) -> bool:
        return self._f.quant(r.index) is not None

    def wants_f32(self, r: _TensorRef) -> bool:
        """With dequantize=True: is the tensor decoded to float32? Quantized ones and every
        dtype numpy does not hold itself (bf16, fp8, block, packed, driver types) are; the
        caller asked for floats, so never bit patterns nor ml_dtypes types."""
        return not _native(r.dtype) or self.is_quantized(r)

    def decode_f32(self, r: _TensorRef, first=0, count=None):
        n = int(np.prod(r.shape, dtype=np.uint64)) if r.shape else 1
        if count is None:
            count = n - first
        out = np.empty(count, np.float32)
        self._f.read_f32_into(r.index, first, out)
        return out

    def tensor(self, name: str, dequantize: bool = False):
        r = self.ref(name)
        if r.ncomponents == 0:  # declared without data (OINF allows it)
            return None
        dt = _np_dtype(r.dtype)
        dense = r.layout == "dense" and r.ncomponents == 1
        if not dense or (dequantize and self.wants_f32(r)):
            # sparse / grouped layouts are densified; quantized ones and dtypes numpy lacks
            # (bf16, fp8, packed) decoded
            return self.decode_f32(r).reshape(r.shape)
        shape = r.shape if dt is not None else _raw_shape(r)
        if dt is None:
            dt = np.dtype(np.uint8)
        view = self._f.map(r.index)
        if view is not None:
            a = np.frombuffer(view, dt).reshape(shape)
        else:
            a = np.empty(shape, dt)
            self._f.read_into(r.index, a.reshape(-1).view(np.uint8))
        return a

    def rows(self, name: str, start: int, stop: int, dequantize: bool = False):
        """Rows [start, stop) of the first dimension, reading only their bytes."""
        r = self.ref(name)
        dt = _np_dtype(r.dtype)
        dense = r.layout == "dense" and r.ncomponents == 1
        if not r.shape or not dense or r.ncomponents == 0:
            return None
        nrows = r.shape[0]
        inner = tuple(r.shape[1:])
        per_row = int(np.prod(inner, dtype=np.uint64)) if inner else 1
        count = max(0, stop - start)
        if dequantize and self.wants_f32(r):
            di = _dtype_info(r.dtype)
            bs = di[2] if di else 1
            if (start * per_row) % bs or ((stop * per_row) % bs and stop != nrows):
                return None
            out = self.decode_f32(r, start * per_row, count * per_row)
            return out.reshape((count,) + inner)
        if dt is None:
            rshape = _raw_shape(r)
            if len(rshape) != len(r.shape):  # no whole-row raw layout: read everything
                return None
            row_bytes = int(np.prod(rshape[1:], dtype=np.uint64)) if len(rshape) > 1 else None
            if row_bytes is None:
                return None
            dt, inner, per_row_bytes = np.dtype(np.uint8), tuple(rshape[1:]), row_bytes
        else:
            per_row_bytes = per_row * dt.itemsize
        view = self._f.map(r.index)
        if view is not None:
            a = np.frombuffer(view, dt).reshape((nrows,) + inner)
            return a[start:stop]
        out = np.empty((count,) + inner, dt)
        if count:
            self._f.read_range_into(r.index, start * per_row_bytes, out.reshape(-1).view(np.uint8))
        return out


def _to_framework(a, framework):
    if framework in ("np", "numpy", None):
        return a
    if framework in ("pt", "torch"):
        import torch  # optional dependency: only for framework="pt"

        name = None
        if _ml is not None and a.dtype.type.__module__.startswith("ml_dtypes"):
            name = a.dtype.name
        a = np.array(a, copy=True)  # torch tensors are writable: never alias the mapping
        if name is not None:
            tmap = {"bfloat16": "bfloat16", "float8_e4m3fn": "float8_e4m3fn",
                    "float8_e5m2": "float8_e5m2", "float8_e4m3fnuz": "float8_e4m3fnuz",
                    "float8_e5m2fnuz": "float8_e5m2fnuz", "float8_e8m0fnu": "float8_e8m0fnu"}
            tdt = getattr(torch, tmap.get(name, ""), None)
            if tdt is None:
                raise UnsupportedError(f"torch has no dtype for {name}")
            raw = a.view(np.uint16 if a.dtype.itemsize == 2 else np.uint8)
            return torch.from_numpy(raw).view(tdt)
        return torch.from_numpy(a)
    raise InvalidArgumentError(f"framework must be 'np' or 'pt', not {framework!r}")


class _Slice:
    """``safe_open(...).get_slice(name)``: indexing reads only the rows it needs."""

    def __init__(self, reader: _Reader, name: str, framework, dequantize):
        self._r = reader
        self._name = name
        self._fw = framework
        self._deq = dequantize
        self._ref = reader.ref(name)

    def get_shape(self):
        return list(self._ref.shape)

    def get_dtype(self):
        """The tensorbox dtype name ("f32", "bf16", "q4_k", ...)."""
        return self._ref.dtype

    def __len__(self):
        return self._ref.shape[0] if self._ref.shape else 0

    def __getitem__(self, key):
        if not isinstance(key, tuple):
            key = (key,)
        shape = self._ref.shape
        a = None
        if shape and key and key[0] is not Ellipsis:
            k0 = key[0]
            n = shape[0]
            if isinstance(k0, slice):
                start, stop, step = k0.indices(n)
                rng = range(start, stop, step)
                lo, hi = (min(rng), max(rng) + 1) if len(rng) else (0, 0)
                part = self._r.rows(self._name, lo, hi, self._deq)
                if part is not None:
                    a = part[start - lo::step] if len(rng) else part
                    a = a[(slice(None),) + key[1:]] if len(key) > 1 else a
            elif isinstance(k0, (int, np.integer)):
                i = int(k0)
                if i < 0:
                    i += n
                if not 0 <= i < n:
                    raise IndexError(f"index {int(k0)} out of range for dimension 0 of {n}")
                part = self._r.rows(self._name, i, i + 1, self._deq)
                if part is not None:
                    a = part[0][key[1:]] if len(key) > 1 else part[0]
        if a is None:
            a = self._r.tensor(self._name, self._deq)[key]
        return _to_framework(a, self._fw)


class safe_open:
    """Opens a model file of any format tensorbox reads, like ``safetensors.safe_open``.

    ``safe_open(path, framework="np", device="cpu", dequantize=False, verify=False)``; use it
    as a context manager. ``framework="pt"`` returns torch tensors (torch must be installed).
    ``dequantize=True`` decodes quantized tensors and dtypes numpy lacks (bf16, fp8, block,
    packed) to float32; ``verify=True`` checks stored digests before handing bytes out.
    """

    def __init__(self, path, framework="np", device="cpu", dequantize=False, verify=False):
        if framework not in ("np", "numpy", "pt", "torch"):
            raise InvalidArgumentError(f"framework must be 'np' or 'pt', not {framework!r}")
        if device not in ("cpu", None):
            raise InvalidArgumentError("tensorbox reads to the CPU only (device='cpu')")
        self._fw = framework
        self._deq = dequantize
        self._r = _Reader(path, verify=verify)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def close(self):
        """Closes the file (arrays already returned keep their bytes mapped until freed)."""
        self._r.close()

    @property
    def format(self) -> str:
        return self._r._f.format

    @property
    def version(self) -> int:
        return self._r._f.version

    def keys(self):
        """Tensor names in file order."""
        return self._r.names()

    def offset_keys(self):
        return self._r.names()

    def metadata(self, types=False):
        """Metadata as a dict of Python values (int, float, str, bytes, list, dict, numpy
        arrays for packed numeric arrays); ``types=True`` wraps each value as
        ``{"type", "value"}`` like ``tbx info --json --types``."""
        return self._r._f.metadata(types=types)

    def info(self, types=False):
        """The document of ``tbx info --json`` for this file."""
        return self._r._f.info(types=types)

    def tensor_dtype(self, name) -> str:
        """The tensorbox dtype name of a tensor ("f32", "bf16", "q4_k", ...)."""
        return self._r.ref(name).dtype

    def tensor_shape(self, name):
        return list(self._r.ref(name).shape)

    def get_tensor(self, name):
        """The tensor as a numpy array (or torch tensor with framework="pt"); None for a
        tensor the file declares without data (OINF)."""
        a = self._r.tensor(name, self._deq)
        return None if a is None else _to_framework(a, self._fw)

    def get_slice(self, name):
        """A lazy slice: ``f.get_slice(name)[a:b]`` reads only rows a..b."""
        return _Slice(self._r, name, self._fw, self._deq)

    def sections(self):
        """Auxiliary sections: [(name, type, offset, size)]."""
        return self._r._f.sections()

    def check_input(self):
        """Raises :class:`FormatError` with code ``TBX_E_TRUNCATED`` when the file no longer
        holds every byte it held when opened (another process truncated it); returns None
        otherwise. See :func:`check_input`."""
        self._r._f.check_input()

    def read_section(self, name):
        """The bytes of the section called `name`."""
        for i, s in enumerate(self._r._f.sections()):
            if s[0] == name:
                return self._r._f.read_section(i)
        raise NotFoundError(f"no section named {name!r}")


def check_input(obj):
    """Did the file behind ``obj`` keep every byte it had when opened?

    ``obj`` is a :class:`safe_open` or an array returned by it or by :func:`load_file`.
    Raises :class:`FormatError` with code ``TBX_E_TRUNCATED`` (and the byte where the file now
    ends as ``.offset``) when the file has shrunk since it was opened; returns None otherwise,
    and for arrays that own their bytes (copies, decoded tensors, torch tensors), which a
    file's later change cannot touch.

    Zero-copy arrays are views of the mapped file. When another process truncates the file,
    their bytes past its new end read as zeros (never a crash), and every later read through
    the library raises this error; call ``check_input(a)`` after using ``a`` to know that what
    was read were the file's bytes."""
    if isinstance(obj, safe_open):
        return obj.check_input()
    base = obj
    while base is not None:
        if isinstance(base, _tb._View):
            return base.check_input()
        base = getattr(base, "base", None)
    return None


def load_file(path, framework="np", dequantize=False, verify=False):
    """Every tensor of a file as ``{name: array}`` (zero-copy views where the file allows)."""
    with safe_open(path, framework=framework, dequantize=dequantize, verify=verify) as f:
        return {k: f.get_tensor(k) for k in f.keys()}


def load(data: bytes, framework="np", dequantize=False):
    """Like load_file, for a file's bytes held in memory. A ``bytes`` object is read in place
    (no temporary file, no copy): the arrays are read-only views of it where the format
    allows, and keep it alive. Other buffers (bytearray, memoryview, ...) can change under
    the arrays, so they are copied once into ``bytes`` first."""
    if framework not in ("np", "numpy", "pt", "torch"):
        raise InvalidArgumentError(f"framework must be 'np' or 'pt', not {framework!r}")
    if not isinstance(data, bytes):
        data = bytes(data)
    r = _Reader("<memory>", data=data)
    try:
        out = {}
        for k in r.names():
            a = r.tensor(k, dequantize)
            out[k] = None if a is None else _to_framework(a, framework)
        return out
    finally:
        r.close()


def info(path, types=False):
    """The document of ``tbx info --json [--types]`` (the library's tbx_file_describe):
    format, version, files (a set), sizevars, metadata, tensors (name, dtype, shape, offset,
    nbytes, layout/components when not plain, quant when quantized), sections, and the
    format's own member (embd, mcf_directory); metadata values as Python values."""
    f = _tb._File(os.fspath(path), mmap=False)
    try:
        return f.info(types=types)
    finally:
        f.close()


def validate(path, ggml=False, threads=0):
    """Every problem of a file (``tbx validate``): a list of :class:`Problem` (code, field,
    offset, message); empty when the file is valid. ``ggml=True`` adds ggml's loader rules
    for GGUF files."""
    return [Problem(*p) for p in _tb.validate(os.fspath(path), ggml=ggml, threads=threads)]


def diff(a, b, map="auto", tolerance=None, max_abs=None, threads=0, progress=None):
    """What differs between two models of any formats (``tbx diff A B --json``; the library's
    tbx_diff): a dict with a, b, map, metadata (added / removed / changed), sections, tensors
    (added, removed, compared: per tensor dtypes, shapes, max_abs, rmse, nmse, cosine of the
    values decoded to f32 with A as the reference, sorted by nmse, worst first; not_compared),
    layers (per layer number), tolerance, summary, identical, within_tolerance, differs.
    ``map="auto"`` pairs a Hugging Face directory with a GGUF file through the architecture's
    name map (llama's q/k order, splits and stacks undone); ``"none"`` pairs by name.
    ``tolerance`` bounds the nmse, ``max_abs`` the largest difference of each tensor (then
    ``within_tolerance`` and ``differs`` judge the tensors only). ``progress``: None, or a
    callable ``progress(done, total)`` called as the tensors' bytes are read (both sides'
    stored bytes of the compared tensors; ``done`` never decreases, the last call of a diff
    that succeeds has ``done == total``); an exception raised by it cancels the diff and
    propagates. Raises the library's error for an input that cannot be opened or read."""
    for nm, v in (("tolerance", tolerance), ("max_abs", max_abs)):
        if v is not None and not (float(v) >= 0 and math.isfinite(float(v))):
            raise ValueError(f"{nm}: {v!r} is not a finite number >= 0")
    return _tb.diff(os.fspath(a), os.fspath(b), map=map,
                    nmse=-1.0 if tolerance is None else float(tolerance),
                    max_abs=-1.0 if max_abs is None else float(max_abs), threads=int(threads),
                    progress=progress)


def formats():
    """[(name, extensions, aliases, writable)] for every format of the library."""
    return _tb.formats()


def hf_architectures():
    """[(model_type, architecture)]: the Hugging Face architectures a model directory converts
    from to a GGUF file for llama.cpp (``convert(dir, "x.gguf")``), as config.json's model_type
    and the general.architecture written (the library's architecture table)."""
    return _tb.hf_architectures()


# ---------------------------------------------------------------------------------------------
# Writing
# ---------------------------------------------------------------------------------------------
_INT_RANGES = {"i64": (-(1 << 63), (1 << 63) - 1), "u64": (0, (1 << 64) - 1)}


def _tag(v, depth=0):
    """A Python metadata value as a tagged tuple for the extension (types kept)."""
    if depth > 32:
        raise ValueError("tensorbox: metadata nested too deeply")
    if v is None:
        return ("null", None)
    if isinstance(v, (bool, np.bool_)):
        return ("bool", bool(v))
    if isinstance(v, int):
        if _INT_RANGES["i64"][0] <= v <= _INT_RANGES["i64"][1]:
            return ("i64", v)
        if 0 <= v <= _INT_RANGES["u64"][1]:
            return ("u64", v)
        raise OverflowError(f"tensorbox: metadata integer {v} does not fit 64 bits")
    if isinstance(v, float):
        return ("f64", v)
    if isinstance(v, str):
        return ("string", v)
    if isinstance(v, (bytes, bytearray, memoryview)):
        return ("bytes", bytes(v))
    if isinstance(v, np.generic):
        name = _value_type_of(v.dtype)
        if name is None:
            raise TypeError(f"tensorbox: no metadata type for numpy {v.dtype}")
        return (name, v.item() if name not in ("bf16",) else float(v))
    if isinstance(v, np.ndarray):
        name = _value_type_of(v.dtype)
        if v.ndim == 1 and name is not None:
            native = np.ascontiguousarray(v, v.dtype.newbyteorder("="))
            return ("packed", name, native.tobytes())
        tname = _tbx_dtype(v.dtype)
        if tname is None:
            raise TypeError(f"tensorbox: no dtype for numpy {v.dtype}")
        return ("ndarray", tname, tuple(int(d) for d in v.shape),
                np.ascontiguousarray(v, v.dtype.newbyteorder("=")).tobytes())
    if isinstance(v, (list, tuple)):
        items = [_tag(x, depth + 1) for x in v]
        kinds = {t[0] for t in items}
        elem = "null"
        if len(kinds) == 1:
            k = next(iter(kinds))
            elem = {"packed": "array"}.get(k, k)
        return ("array", elem, items)
    if isinstance(v, dict):
        return ("map", [(str(k), _tag(x, depth + 1)) for k, x in v.items()])
    raise TypeError(f"tensorbox: cannot store a {type(v).__name__} as metadata")


def _value_type_of(dt):
    dt = np.dtype(dt)
    for name, t in _VALUE_NP.items():
        if dt == np.dtype(t):
            return name
    if _ml is not None and dt == np.dtype(_ml.bfloat16):
        return "bf16"
    return None


def _tensor_item(name, t):
    """(name, dtype, shape, buffer) of one tensor to write."""
    mod = type(t).__module__
    if mod.startswith("torch"):
        import torch

        t = t.detach().cpu().contiguous()
        tmap = {torch.bfloat16: "bf16"}
        for attr, nm in (("float8_e4m3fn", "f8_e4m3"), ("float8_e5m2", "f8_e5m2"),
                         ("float8_e4m3fnuz", "f8_e4m3fnuz"), ("float8_e5m2fnuz", "f8_e5m2fnuz"),
                         ("float8_e8m0fnu", "f8_e8m0")):
            if hasattr(torch, attr):
                tmap[getattr(torch, attr)] = nm
        if t.dtype in tmap:
            raw = t.view(torch.uint8 if t.element_size() == 1 else torch.int16).numpy()
            return (name, tmap[t.dtype], tuple(t.shape), _c_order(raw).reshape(-1).view(np.uint8))
        t = t.numpy()
    a = np.asarray(t)  # a numpy scalar (np.float32(3)) becomes a 0-d array: shape ()
    if a.dtype.byteorder not in ("=", "|", "<" if np.little_endian else ">"):
        a = a.astype(a.dtype.newbyteorder("="))
    dt = _tbx_dtype(a.dtype)
    if dt is None:
        raise UnsupportedError(f"tensor {name!r}: numpy dtype {a.dtype} has no tensorbox dtype")
    a = _c_order(a)
    return (name, dt, tuple(int(d) for d in a.shape), a.reshape(-1).view(np.uint8))


def _c_order(a):
    """`a` in C order, its shape kept (np.ascontiguousarray makes a 0-d array 1-d)."""
    return a if a.flags.c_contiguous else np.array(a, order="C")


class ConvertReport(namedtuple("ConvertReport", "index name in_dtype out_dtype action reason "
                                               "nvalues beyond nonfinite range max_abs rmse "
                                               "rmse_ggml", defaults=(None,))):
    """What a conversion did with one output tensor, as the library reported it while
    converting (``tbx_convert_report``; never read back from the output).

    ``index`` (its index in the input; in the output for a Hugging Face directory to GGUF,
    whose tensors are llama.cpp's), ``name`` (the output's), ``in_dtype`` and ``out_dtype``
    (dtype names),
    ``action`` ("kept", "cast", "quantized", "fallback", "dequantized" or "requantized"),
    ``reason`` (why: "requested type", "1-D, not 2-D", "already q8_0", ...; "" when nothing
    was asked of the tensor), ``nvalues`` (values decoded and re-encoded; 0 when written as
    it was), ``beyond`` (finite values beyond the largest magnitude ``out_dtype`` represents,
    ``range``), ``nonfinite`` (finite values that came out Inf or NaN), ``max_abs`` (the
    largest finite |value| among them) and ``rmse`` (for a tensor quantized to one of MCF's
    families: the root mean square difference between its decoded payload and its finite
    input values, what ``tbx convert -v`` prints; for a tensor quantized to a ggml K type with
    GGUF's ``quant_method="search"``: that of tensorbox's own search, which was written; None
    for every other tensor) and ``rmse_ggml`` (with ``quant_method="search"``: the RMSE of
    ggml's reference algorithm, the default, on the same values; else None)."""
    __slots__ = ()

    @property
    def warning(self):
        """The warning about this tensor's values (the text ``tbx convert`` prints after
        "warning: "), or None when its values were kept as well as the type allows."""
        if not self.beyond and not self.nonfinite:
            return None
        s = f'tensor "{self.name}" ({self.in_dtype} -> {self.out_dtype}):'
        if self.beyond:
            one = self.beyond == 1
            s += (" %d finite value%s beyond %s's range (+-%g: no finite f16 scale reaches %s; "
                  "the largest is %g)%s" % (self.beyond, "" if one else "s", self.out_dtype,
                                            self.range, "it" if one else "them", self.max_abs,
                                            ";" if self.nonfinite else ""))
        if self.nonfinite:
            s += " %d finite value%s came out as Inf or NaN" % (
                self.nonfinite, "" if self.nonfinite == 1 else "s")
        return s

    def describe(self) -> str:
        """One line as ``tbx convert -v`` prints it (after "tbx: "):
        ``NAME: OUT_DTYPE ACTION[ from IN_DTYPE][: REASON]``."""
        s = f"{self.name}: {self.out_dtype} {self.action}"
        if self.in_dtype != self.out_dtype:
            s += f" from {self.in_dtype}"
        if self.reason:
            s += f": {self.reason}"
        return s


class ConversionWarning(UserWarning):
    """A converted tensor whose values its output type could not keep: finite values beyond
    the type's range (no finite f16 scale reaches them: they get what the reference quantizer
    gives them) or finite values that came out Inf or NaN (a quantization, or a cast beyond
    f16's range). The message names the tensor as ``tbx convert`` does; ``.report`` is its
    :class:`ConvertReport`. ``strict=True`` makes such a tensor an error (:class:`LossyError`)
    instead."""

    def __init__(self, message, report=None):
        super().__init__(message)
        self.report = report


def _convert(src, dst, **opts):
    """_tb.convert, its reports as ConvertReport, their warnings as ConversionWarning pointing
    at the caller of convert() / save_file() (the only callers)."""
    reports = [ConvertReport(*t) for t in _tb.convert(src, dst, **opts)]
    for r in reports:
        text = r.warning
        if text is not None:
            # 1 here, 2 convert/save_file, 3 their caller
            warnings.warn(ConversionWarning(text, r), stacklevel=3)
    return reports


def _is_dir_target(dst):
    """dst names a directory: a trailing separator, or an existing directory (tbx convert's
    rule)."""
    d = os.fspath(dst)
    seps = (b"/", os.sep.encode()) if isinstance(d, bytes) else ("/", os.sep)
    return d.endswith(seps) or os.path.isdir(d)


_SIZE_UNITS = {"": 1, "B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12,
               "KIB": 2**10, "MIB": 2**20, "GIB": 2**30, "TIB": 2**40}


def _shard_size(v):
    """max_shard_size= as bytes (0: the default): an int, or "5GB" / "500MiB" as tbx
    convert --max-shard-size reads it."""
    if v is None:
        return 0
    if isinstance(v, bool):
        raise InvalidArgumentError(f"max_shard_size: not a size ({v!r})")
    if isinstance(v, int):
        if v < 1:
            raise InvalidArgumentError(f"max_shard_size: {v} is not a size")
        return v
    if isinstance(v, str):
        t = v.strip()
        i = len(t)
        while i and t[i - 1].isalpha():
            i -= 1
        unit = t[i:].upper()
        try:
            num = float(t[:i])
        except ValueError:
            num = -1
        if unit in _SIZE_UNITS and num > 0 and num * _SIZE_UNITS[unit] >= 1:
            return int(num * _SIZE_UNITS[unit])
    raise InvalidArgumentError(f"max_shard_size: {v!r} is not a size (5GB, "
                               f"500MB, 2GiB, bytes)")


def _clip(quant_clip):
    """quant_clip as the (min, max) tuple the extension takes (it refuses anything else)."""
    if quant_clip is None or isinstance(quant_clip, (str, bytes)):
        return quant_clip
    try:
        return tuple(quant_clip)
    except TypeError:
        return quant_clip


def _meta_map(meta, what="meta"):
    """``meta={key: value}`` of convert() (or ``options={...}``) as the tagged map the
    extension takes (None: none)."""
    if meta is None:
        return None
    if not isinstance(meta, dict):
        raise TypeError(f"tensorbox: {what} must be a dict, not {type(meta).__name__}")
    for k in meta:
        if not isinstance(k, str):
            raise TypeError(f"tensorbox: {what} keys must be str, not {type(k).__name__} ({k!r})")
    return ("map", [(k, _tag(v)) for k, v in meta.items()]) if meta else None


def save_file(tensors, path, metadata=None, format=None, *, force=False, alignment=0,
              compress=0, digest=None, format_version=0, threads=0, cast=None, quant=None,
              stringify_meta=False, drop_meta=False, drop_sections=False, sync=True,
              dequantize=False, requantize=False, strict=False, quant_method=None,
              quant_clip=None, options=None):
    """Writes ``{name: array}`` to `path` (numpy arrays, or torch tensors).

    The format comes from `format` ("safetensors", "gguf", "ztensor", "oinf", ...) or the
    extension. The options are those of ``tbx convert``: ``force`` (replace an existing file),
    ``alignment``, ``compress`` (compression level: zTensor's zstd level), ``digest``
    ("sha256"/"crc32c"), ``format_version``, ``threads``, ``options={key: value}`` (the output
    format's own options, ``tbx convert -O``: e.g. MCF ``{"dedup": False}``; the format's
    writer refuses a key it does not have or a value of another type, naming the key, before
    anything is written), and the explicitly lossy ``cast`` (dtype name), ``quant``
    (ggml type, e.g. "q4_k"; for an MCF output one of q8 q4 k6 k4 k3 k2 int8 int4, with
    ``quant_method`` "best" or "mantle" and ``quant_clip=(min, max)``: spellings of MCF's write
    options quant_method, quant_clip_min and quant_clip_max), ``stringify_meta``,
    ``drop_meta``, ``drop_sections``, and ``strict`` (a tensor whose values its type cannot
    keep raises :class:`LossyError` instead of a :class:`ConversionWarning`). ``dequantize`` and
    ``requantize`` are accepted as by :func:`convert`; arrays are never quantized, so they have
    nothing to do here (``requantize`` without ``quant`` is refused all the same).
    Metadata values keep their Python types (int -> i64, float -> f64, numpy scalars their own
    type, 1-D numpy arrays typed arrays). The file is written to a temporary file and renamed
    into place: it appears complete or not at all. ``sync=False`` skips the fsync before the
    rename (``tbx convert --no-sync``): faster, but a crash may leave the file partly written.
    """
    path = os.fspath(path)
    lossy = dict(cast=cast, quant=quant, stringify_meta=stringify_meta, drop_meta=drop_meta,
                 drop_sections=drop_sections)
    more = dict(dequantize=dequantize, requantize=requantize, strict=strict,
                quant_method=quant_method, quant_clip=_clip(quant_clip),
                options=_meta_map(options, "options"))
    # the file can be written (its directory exists, force for an existing one) and the options
    # go together, before the tensors are gathered and copied
    _tb.check_output(path, format=format, force=force, **lossy, **more)
    items = [_tensor_item(str(k), v) for k, v in tensors.items()]
    meta = [(str(k), _tag(v)) for k, v in (metadata or {}).items()]
    opts = dict(format=format, force=force, alignment=alignment, compress=compress,
                digest=digest, format_version=format_version, threads=threads, sync=sync)
    if not any(lossy.values()):
        # nothing converts a value: the arrays are written as they are
        _tb.write(path, items, meta, **opts, options=more["options"])
        return
    # Casting and quantizing are steps of tbx_convert: write the tensors as they are to a
    # temporary zTensor file next to the output (it stores every dtype and metadata type),
    # then convert that.
    d = os.path.dirname(os.path.abspath(path))
    tmp = os.path.join(d, f".{os.path.basename(path)}.tbx-py-{os.getpid()}-{threading.get_ident()}.zt")
    try:
        _tb.write(tmp, items, meta, format="ztensor", force=True, sync=False)  # scratch
        _convert(tmp, path, **opts, **lossy, **more)
    finally:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass


def convert(src, dst, format=None, *, force=False, alignment=0, compress=0, digest=None,
            format_version=0, threads=0, cast=None, quant=None, stringify_meta=False,
            drop_meta=False, drop_sections=False, sync=True, drop_unreadable=False,
            dequantize=False, requantize=False, strict=False, quant_method=None,
            quant_clip=None, meta=None, options=None, imatrix=None, pure=False,
            dry_run=False, output_tensor_type=None, token_embedding_type=None,
            tensor_types=None, keep_split=False, leave_output_tensor=False, progress=None,
            dtype=None, max_shard_size=None, weights_only=False):
    """Converts a file to another format (``tbx convert``) and returns what became of each
    tensor: a list of :class:`ConvertReport`, one per output tensor in order.

    ``progress``: None, or a callable ``progress(done, total)`` called during the conversion
    (from the calling thread, at the granularity of the work: a tensor or a job of a few MiB)
    with the input bytes done and the total planned; ``done`` never decreases and the last call
    of a conversion that succeeds has ``done == total``. An exception raised by it cancels the
    conversion (nothing is written; an existing ``dst`` is left as it was) and propagates out of
    ``convert``.

    A ``dst`` that names a directory (a trailing ``/``, or an existing directory) and no
    ``format``: a GGUF model written as a Hugging Face model directory (``tbx convert
    model.gguf OUT/``: config.json, generation_config.json, the tokenizer, safetensors with the
    Hugging Face names), every tensor as ``dtype`` ("f32", "f16" or "bf16"; None: the dtype
    most of the GGUF's unquantized tensors have, bf16 when all are quantized), in shards of
    at most ``max_shard_size`` bytes (an int, or a string such as ``"5GB"``, ``"500MiB"``;
    None: transformers' 50 GB) with ``model.safetensors.index.json`` when there are more than
    one; ``weights_only=True`` writes the tensors under their GGUF names only. The directory
    must not exist yet (or be empty); it is written whole or not at all. Only ``sync`` of the
    other options applies: any other (``progress`` included) raises InvalidArgumentError.

    ``max_shard_size`` (an int of bytes, or a string as ``tbx convert --max-shard-size``
    takes it: ``"5GB"``, ``"500MiB"``, ``"1000"``) with a safetensors ``dst``: shards of at
    most that many tensor bytes, ``STEM-0000I-of-0000N.safetensors`` beside ``dst`` and
    ``dst`` + ``.index.json`` as Hugging Face lays them out (one shard: ``dst`` itself); with a
    GGUF ``dst``: a split set as llama.cpp's gguf-split cuts one, ``STEM-0000I-of-0000N.gguf``.
    Every file is written under a temporary name and all are renamed at the end: a failure
    leaves none. Other formats raise InvalidArgumentError or UnsupportedError.

    For a GGUF output ``quant`` may name one of llama-quantize's presets (``"Q4_K_M"``,
    ``"Q5_K_S"``, ``"IQ4_XS"``, ..., ``"COPY"``; case-insensitive): a GGUF model naming its
    architecture, or a Hugging Face model directory, gets llama.cpp's type for each tensor and
    the file llama-quantize writes; refined by ``pure=True``, ``output_tensor_type``,
    ``token_embedding_type`` (type names), ``tensor_types`` (``{pattern: type}`` or
    ``[(pattern, type), ...]``: llama-quantize's ``--tensor-type``, first match wins) and
    ``dry_run=True`` (the reports of what each tensor would become; nothing is written),
    ``keep_split=True`` (a GGUF split set in: as many files out, ``dst`` without
    ``.gguf`` + ``-0000I-of-0000N.gguf``) and ``leave_output_tensor=True`` (output.weight keeps
    its type). An MCF ``dst`` from a Hugging Face directory: llama.cpp's choice in MCF's
    families (docs/formats/mcf.md).

    Same options as save_file, plus those of ``tbx convert``: ``dequantize`` (every quantized
    tensor written dequantized, as f32 or the ``cast`` dtype, GGUF -> GGUF too),
    ``requantize`` (with ``quant``: a tensor quantized to another type is decoded and quantized
    again; without it such a tensor raises LossyError), ``strict`` (a tensor whose values its
    type cannot keep raises LossyError instead of a :class:`ConversionWarning`),
    ``quant_method``/``quant_clip`` (MCF quantization: MCF's write options ``quant_method``,
    ``quant_clip_min``/``quant_clip_max``, which ``options`` may give instead; GGUF:
    ``quant_method`` "ggml", the default, ggml_quantize_chunk's bytes, or "search", tensorbox's
    own K-quant search, reported with ``rmse`` and ``rmse_ggml``), ``imatrix=PATH`` (with a ggml
    ``quant``: an importance matrix as llama-imatrix writes it, GGUF or legacy .dat, applied
    per tensor as ``llama-quantize --imatrix`` does, its ``quantize.imatrix.*`` keys recorded;
    ``tbx convert --imatrix``), ``meta={key:
    value}`` (metadata set on
    the output, replacing the input's entry of that key; typed as ``--meta KEY:TYPE=VALUE``:
    int -> i64, float -> f64, str, bool, numpy scalars their own type, lists, dicts and numpy
    arrays as in save_file) and ``drop_unreadable`` (tensors the input lists but cannot read,
    which ``info()`` marks ``"unreadable"``, are left out instead of raising FormatError).
    Lossless unless a lossy option is given: what the target cannot store raises LossyError or
    UnsupportedError naming it. Options that do not go together (``requantize`` without
    ``quant``, ``quant_method`` or ``quant_clip`` without an MCF ``quant``: field
    ``options.quant_method`` ...) raise InvalidArgumentError before any work. Values beyond a type's range, or made Inf/NaN,
    are reported as :class:`ConversionWarning` (``warnings.warn``) naming the tensor, as ``tbx
    convert`` prints them."""
    if format is None and _is_dir_target(dst):
        given = {k: v for k, v in dict(
            force=force, alignment=alignment, compress=compress, digest=digest,
            format_version=format_version, threads=threads, cast=cast, quant=quant,
            stringify_meta=stringify_meta, drop_meta=drop_meta, drop_sections=drop_sections,
            drop_unreadable=drop_unreadable, dequantize=dequantize, requantize=requantize,
            strict=strict, quant_method=quant_method, quant_clip=quant_clip, meta=meta,
            options=options, imatrix=imatrix, pure=pure, dry_run=dry_run,
            output_tensor_type=output_tensor_type, token_embedding_type=token_embedding_type,
            tensor_types=tensor_types, keep_split=keep_split,
            leave_output_tensor=leave_output_tensor, progress=progress).items() if v}
        if given:
            raise InvalidArgumentError(
                f"{', '.join(sorted(given))}: not for a Hugging Face directory output "
                f"(dtype, max_shard_size, weights_only, sync are)")
        return [ConvertReport(*t) for t in _tb.hf_from_gguf(
            os.fspath(src), os.fspath(dst), dtype=dtype,
            max_shard_size=_shard_size(max_shard_size), weights_only=weights_only, sync=sync)]
    if dtype is not None or weights_only:
        raise InvalidArgumentError("dtype and weights_only apply to a Hugging Face directory "
                                   "output (dst a directory: a trailing '/')")
    return _convert(os.fspath(src), os.fspath(dst), format=format, force=force,
                    alignment=alignment, compress=compress, digest=digest,
                    format_version=format_version, threads=threads, cast=cast, quant=quant,
                    stringify_meta=stringify_meta, drop_meta=drop_meta,
                    drop_sections=drop_sections, sync=sync, drop_unreadable=drop_unreadable,
                    dequantize=dequantize, requantize=requantize, strict=strict,
                    quant_method=quant_method, quant_clip=_clip(quant_clip),
                    meta=_meta_map(meta), options=_meta_map(options, "options"),
                    imatrix=None if imatrix is None else os.fspath(imatrix), pure=pure,
                    dry_run=dry_run, output_tensor_type=output_tensor_type,
                    token_embedding_type=token_embedding_type, tensor_types=tensor_types,
                    keep_split=keep_split, leave_output_tensor=leave_output_tensor,
                    progress=progress, max_shard_size=_shard_size(max_shard_size))
