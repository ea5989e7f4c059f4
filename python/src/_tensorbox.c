/*
 * _tensorbox.c - the C extension behind the Python package `tensorbox`.
 *
 * A thin layer over the public C API (tensorbox.h, plus tensorbox/gguf.h for the ggml lint):
 * no format is parsed here, nothing is special-cased per format. What it adds is what Python
 * needs:
 *
 *   - _File: an open tbx_file (mapped: TBX_OPEN_MMAP) shared through a reference-counted
 *     `handle`. close() drops the File's reference; the tbx_file is closed when the last
 *     zero-copy view (_View) of its mapping is gone too, so an array never outlives its bytes.
 *     A per-handle lock serialises the library calls on one handle (handles are not
 *     shared-safe), and every read and decode runs with the GIL released.
 *   - _View: a read-only buffer-protocol object over one tensor's mapped bytes; numpy arrays
 *     made with numpy.frombuffer keep it (and so the handle) alive through their .base.
 *   - conversion of tbx_value metadata to Python values (types kept; packed arrays go through a
 *     hook the Python side installs, which makes numpy arrays) and of tagged Python values back.
 *   - write(), convert(), validate(): tbx_writer_*, tbx_convert, tbx_validate.
 *   - errors: one exception hierarchy (tensorbox.Error and subclasses), each carrying .code
 *     (the stable status name), .status (its number), .offset (None when none) and .field.
 *
 * Only the public headers are included, like any user of the library.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <pythread.h>

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "tensorbox.h"
#define TBX_EXPERIMENTAL
#include "tensorbox/gguf.h"

/* ------------------------------------------------------------------------------------------ */
/* Exceptions                                                                                  */
/* ------------------------------------------------------------------------------------------ */
static PyObject *Error, *FormatError, *LimitError, *UnsupportedError, *NotFoundError,
    *ChecksumError, *ExistsError, *LossyError, *TbxIOError, *InvalidArgumentError,
    *TbxMemoryError, *StateError;

static PyObject *hook_array = NULL; /* tensorbox._np_array(elem_name, bytes, shape) */

static PyObject *error_class(tbx_status st) {
    switch (st) {
    case TBX_E_TRUNCATED: case TBX_E_BAD_MAGIC: case TBX_E_BAD_VERSION: case TBX_E_FORMAT:
    case TBX_E_OVERFLOW: case TBX_E_DUPLICATE: case TBX_E_RANGE: case TBX_E_PADDING:
        return FormatError;
    case TBX_E_LIMIT: return LimitError;
    case TBX_E_UNSUPPORTED: return UnsupportedError;
    case TBX_E_NOT_FOUND: return NotFoundError;
    case TBX_E_CHECKSUM: return ChecksumError;
    case TBX_E_EXISTS: return ExistsError;
    case TBX_E_LOSSY: return LossyError;
    case TBX_E_IO: return TbxIOError;
    case TBX_E_INVALID_ARG: case TBX_E_BUFFER_TOO_SMALL: return InvalidArgumentError;
    case TBX_E_NOMEM: return TbxMemoryError;
    case TBX_E_STATE: return StateError;
    default: return Error;
    }
}

static PyObject *offset_obj(uint64_t off) {
    if (off == TBX_NO_OFFSET) Py_RETURN_NONE;
    return PyLong_FromUnsignedLongLong(off);
}

/* A str from bytes that may not be UTF-8 (invalid bytes kept as surrogate escapes). */
static PyObject *str_from(const char *s, size_t n) {
    return PyUnicode_DecodeUTF8(s ? s : "", s ? (Py_ssize_t)n : 0, "surrogateescape");
}

/* Raises the exception of `st` with err's message, code, offset and field. Returns NULL. */
static PyObject *raise_tbx(tbx_status st, const tbx_error *err) {
    tbx_status code = (err && err->code != TBX_OK) ? err->code : st;
    const char *msg = (err && err->message[0]) ? err->message : tbx_strerror(code);
    PyObject *cls = error_class(code);
    PyObject *text = str_from(msg, strnlen(msg, sizeof err->message));
    if (!text) return NULL;
    PyObject *exc = PyObject_CallOneArg(cls, text);
    Py_DECREF(text);
    if (!exc) return NULL;
    PyObject *v;
    v = PyUnicode_FromString(tbx_status_name(code));
    if (v) { PyObject_SetAttrString(exc, "code", v); Py_DECREF(v); }
    v = PyLong_FromLong((long)code);
    if (v) { PyObject_SetAttrString(exc, "status", v); Py_DECREF(v); }
    v = offset_obj(err ? err->offset : TBX_NO_OFFSET);
    if (v) { PyObject_SetAttrString(exc, "offset", v); Py_DECREF(v); }
    v = err ? str_from(err->field, strnlen(err->field, sizeof err->field))
            : PyUnicode_FromString("");
    if (v) { PyObject_SetAttrString(exc, "field", v); Py_DECREF(v); }
    if (PyErr_Occurred()) { Py_DECREF(exc); return NULL; }
    PyErr_SetObject(cls, exc);
    Py_DECREF(exc);
    return NULL;
}

static PyObject *raise_simple(tbx_status st, const char *fmt, ...) {
    tbx_error e;
    memset(&e, 0, sizeof e);
    e.code = st;
    e.offset = TBX_NO_OFFSET;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e.message, sizeof e.message, fmt, ap);
    va_end(ap);
    return raise_tbx(st, &e);
}

/* A name given by the caller, for a message: Python's repr of it ('a\x00b'), so that a NUL or
 * any other control character shows escaped instead of cutting or breaking the message. */
static void name_repr(char *dst, size_t cap, PyObject *name) {
    dst[0] = '\0';
    PyObject *r = name ? PyObject_Repr(name) : NULL;
    const char *u = r ? PyUnicode_AsUTF8(r) : NULL;
    if (u) snprintf(dst, cap, "%s", u);
    else { PyErr_Clear(); snprintf(dst, cap, "?"); }
    Py_XDECREF(r);
}

static void err_clear(tbx_error *e) {
    memset(e, 0, sizeof *e);
    e->offset = TBX_NO_OFFSET;
}

/* ------------------------------------------------------------------------------------------ */
/* Handles: a tbx_file shared by a _File and its views                                        */
/* ------------------------------------------------------------------------------------------ */
typedef struct handle {
    tbx_file *f;
    PyThread_type_lock lock; /* one library call on the handle at a time (GIL released) */
    Py_ssize_t refs;         /* changed with the GIL held */
    PyObject *data;          /* the bytes object a memory handle reads (NULL: a file) */
} handle;

/* Called with the GIL held. */
static void handle_decref(handle *h) {
    if (!h || --h->refs > 0) return;
    tbx_file *f = h->f;
    h->f = NULL;
    if (f) {
        Py_BEGIN_ALLOW_THREADS
        PyThread_acquire_lock(h->lock, WAIT_LOCK);
        tbx_close(f);
        PyThread_release_lock(h->lock);
        Py_END_ALLOW_THREADS
    }
    Py_XDECREF(h->data); /* only once the handle that reads it is closed */
    PyThread_free_lock(h->lock);
    PyMem_Free(h);
}

/* Runs `stmt` on the handle with the GIL released, holding the handle's lock, and a reference
 * so that a close() from another thread meanwhile cannot free the handle under the call. */
#define LOCKED_CALL(h, stmt)                                                                   \
    do {                                                                                       \
        (h)->refs++;                                                                           \
        Py_BEGIN_ALLOW_THREADS                                                                 \
        PyThread_acquire_lock((h)->lock, WAIT_LOCK);                                           \
        stmt;                                                                                  \
        PyThread_release_lock((h)->lock);                                                      \
        Py_END_ALLOW_THREADS                                                                   \
        handle_decref(h);                                                                      \
    } while (0)

/* ------------------------------------------------------------------------------------------ */
/* _View: read-only buffer over mapped tensor bytes                                            */
/* ------------------------------------------------------------------------------------------ */
typedef struct {
    PyObject_HEAD
    handle *h;
    const void *ptr;
    Py_ssize_t len;
} ViewObject;

static int view_getbuffer(PyObject *self, Py_buffer *view, int flags) {
    ViewObject *v = (ViewObject *)self;
    return PyBuffer_FillInfo(view, self, (void *)v->ptr, v->len, 1, flags);
}

static PyBufferProcs view_as_buffer = {view_getbuffer, NULL};

static void view_dealloc(PyObject *self) {
    ViewObject *v = (ViewObject *)self;
    handle_decref(v->h);
    Py_TYPE(self)->tp_free(self);
}

static PyObject *view_address(PyObject *self, PyObject *Py_UNUSED(ignored)) {
    return PyLong_FromVoidPtr((void *)((ViewObject *)self)->ptr);
}

/* tbx_check_input on a handle: None, or the error (a file that shrank: FormatError with code
 * TBX_E_TRUNCATED; its mapped bytes past the new end read as zeros). */
static PyObject *handle_check_input(handle *h) {
    tbx_error err;
    err_clear(&err);
    tbx_status st;
    LOCKED_CALL(h, st = tbx_check_input(h->f, &err));
    if (st != TBX_OK) return raise_tbx(st, &err);
    Py_RETURN_NONE;
}

static PyObject *view_check_input(PyObject *self, PyObject *Py_UNUSED(ignored)) {
    return handle_check_input(((ViewObject *)self)->h);
}

static PyMethodDef view_methods[] = {
    {"address", view_address, METH_NOARGS, "Address of the first byte (for tests)."},
    {"check_input", view_check_input, METH_NOARGS,
     "None when the file still holds every byte it had when opened, else raises the error."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject ViewType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "tensorbox._tensorbox._View",
    .tp_basicsize = sizeof(ViewObject),
    .tp_dealloc = view_dealloc,
    .tp_as_buffer = &view_as_buffer,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Read-only bytes of one tensor inside a mapped file; keeps the file open.",
    .tp_methods = view_methods,
};

/* ------------------------------------------------------------------------------------------ */
/* Values: tbx_value -> Python                                                                 */
/* ------------------------------------------------------------------------------------------ */
static const char *dtype_name(tbx_dtype dt) {
    const tbx_dtype_info *in = tbx_dtype_get(dt);
    return (in && in->name) ? in->name : "invalid";
}

static PyObject *call_array_hook(const char *elem, const void *data, size_t nbytes,
                                 PyObject *shape) {
    if (!hook_array) {
        PyErr_SetString(PyExc_RuntimeError, "tensorbox: array hook not installed");
        return NULL;
    }
    PyObject *b = PyBytes_FromStringAndSize((const char *)data, (Py_ssize_t)nbytes);
    if (!b) return NULL;
    PyObject *r = PyObject_CallFunction(hook_array, "sOO", elem, b, shape ? shape : Py_None);
    Py_DECREF(b);
    return r;
}

static PyObject *value_to_py(const tbx_value *v, int depth);

static PyObject *value_typed(const tbx_value *v) {
    tbx_value_type t = tbx_value_type_of(v);
    PyObject *d = PyDict_New();
    if (!d) return NULL;
    PyObject *x = PyUnicode_FromString(tbx_value_type_name(t));
    if (!x || PyDict_SetItemString(d, "type", x) < 0) goto fail;
    Py_DECREF(x);
    x = NULL;
    if (t == TBX_V_ARRAY) {
        x = PyUnicode_FromString(tbx_value_type_name(tbx_value_elem_type(v)));
        if (!x || PyDict_SetItemString(d, "elem", x) < 0) goto fail;
        Py_CLEAR(x);
    } else if (t == TBX_V_NDARRAY) {
        tbx_dtype dt = TBX_DT_INVALID;
        uint32_t ndim = 0;
        const uint64_t *shape = NULL;
        if (tbx_value_ndarray(v, &dt, &ndim, &shape) == TBX_OK) {
            x = PyUnicode_FromString(dtype_name(dt));
            if (!x || PyDict_SetItemString(d, "dtype", x) < 0) goto fail;
            Py_CLEAR(x);
            x = PyList_New(ndim);
            if (!x) goto fail;
            for (uint32_t k = 0; k < ndim; k++)
                PyList_SET_ITEM(x, k, PyLong_FromUnsignedLongLong(shape[k]));
            if (PyDict_SetItemString(d, "shape", x) < 0) goto fail;
            Py_CLEAR(x);
        }
    }
    x = value_to_py(v, 0);
    if (!x || PyDict_SetItemString(d, "value", x) < 0) goto fail;
    Py_DECREF(x);
    return d;
fail:
    Py_XDECREF(x);
    Py_DECREF(d);
    return NULL;
}

static PyObject *value_to_py(const tbx_value *v, int depth) {
    if (!v) Py_RETURN_NONE;
    if (depth > 64) {
        PyErr_SetString(PyExc_RecursionError, "tensorbox: metadata nested too deeply");
        return NULL;
    }
    tbx_value_type t = tbx_value_type_of(v);
    switch (t) {
    case TBX_V_NULL: Py_RETURN_NONE;
    case TBX_V_BOOL: {
        uint64_t u = 0;
        tbx_value_get_u64(v, &u);
        return PyBool_FromLong(u != 0);
    }
    case TBX_V_U8: case TBX_V_U16: case TBX_V_U32: case TBX_V_U64: {
        uint64_t u = 0;
        tbx_value_get_u64(v, &u);
        return PyLong_FromUnsignedLongLong(u);
    }
    case TBX_V_I8: case TBX_V_I16: case TBX_V_I32: case TBX_V_I64: {
        int64_t i = 0;
        tbx_value_get_i64(v, &i);
        return PyLong_FromLongLong(i);
    }
    case TBX_V_F16: case TBX_V_BF16: case TBX_V_F32: case TBX_V_F64: {
        double d = 0;
        tbx_value_get_f64(v, &d);
        return PyFloat_FromDouble(d);
    }
    case TBX_V_STRING: {
        size_t n = 0;
        const char *s = tbx_value_get_str(v, &n);
        return str_from(s, n);
    }
    case TBX_V_BYTES: {
        size_t n = 0;
        const char *s = tbx_value_get_str(v, &n);
        return PyBytes_FromStringAndSize(s ? s : "", s ? (Py_ssize_t)n : 0);
    }
    case TBX_V_ARRAY: {
        size_t nbytes = 0;
        const void *data = tbx_value_data(v, &nbytes);
        tbx_value_type et = tbx_value_elem_type(v);
        if (data && et != TBX_V_NULL && et != TBX_V_STRING)
            return call_array_hook(tbx_value_type_name(et), data, nbytes, NULL);
        uint64_t n = tbx_value_len(v);
        if (n > (uint64_t)PY_SSIZE_T_MAX) return PyErr_NoMemory();
        PyObject *list = PyList_New((Py_ssize_t)n);
        if (!list) return NULL;
        for (uint64_t i = 0; i < n; i++) {
            PyObject *item;
            size_t sl = 0;
            const char *s = et == TBX_V_STRING ? tbx_value_str_at(v, i, &sl) : NULL;
            if (s)
                item = str_from(s, sl);
            else
                item = value_to_py(tbx_value_at(v, i), depth + 1);
            if (!item) {
                Py_DECREF(list);
                return NULL;
            }
            PyList_SET_ITEM(list, (Py_ssize_t)i, item);
        }
        return list;
    }
    case TBX_V_MAP: {
        PyObject *d = PyDict_New();
        if (!d) return NULL;
        uint64_t n = tbx_value_len(v);
        for (uint64_t i = 0; i < n; i++) {
            size_t kl = 0;
            const char *k = tbx_value_key_at(v, i, &kl);
            PyObject *key = str_from(k, kl);
            PyObject *item = key ? value_to_py(tbx_value_at(v, i), depth + 1) : NULL;
            if (!item || PyDict_SetItem(d, key, item) < 0) {
                Py_XDECREF(key);
                Py_XDECREF(item);
                Py_DECREF(d);
                return NULL;
            }
            Py_DECREF(key);
            Py_DECREF(item);
        }
        return d;
    }
    case TBX_V_NDARRAY: {
        tbx_dtype dt = TBX_DT_INVALID;
        uint32_t ndim = 0;
        const uint64_t *shape = NULL;
        size_t nbytes = 0;
        const void *data = tbx_value_data(v, &nbytes);
        if (tbx_value_ndarray(v, &dt, &ndim, &shape) != TBX_OK) Py_RETURN_NONE;
        PyObject *sh = PyTuple_New(ndim);
        if (!sh) return NULL;
        for (uint32_t k = 0; k < ndim; k++)
            PyTuple_SET_ITEM(sh, k, PyLong_FromUnsignedLongLong(shape[k]));
        PyObject *r = call_array_hook(dtype_name(dt), data ? data : "", data ? nbytes : 0, sh);
        Py_DECREF(sh);
        return r;
    }
    case TBX_V_BITSET: {
        size_t nbytes = 0;
        const void *data = tbx_value_data(v, &nbytes);
        PyObject *n = PyLong_FromUnsignedLongLong(tbx_value_len(v));
        if (!n) return NULL;
        PyObject *r = call_array_hook("bitset", data ? data : "", data ? nbytes : 0, n);
        Py_DECREF(n);
        return r;
    }
    default: Py_RETURN_NONE;
    }
}

/* ------------------------------------------------------------------------------------------ */
/* Values: tagged Python -> tbx_value (the Python side tags: (type_name, payload...))          */
/* ------------------------------------------------------------------------------------------ */
static tbx_value_type vtype_from_name(const char *s) {
    for (int t = 0; t <= TBX_V_BITSET; t++)
        if (strcmp(tbx_value_type_name((tbx_value_type)t), s) == 0) return (tbx_value_type)t;
    return (tbx_value_type)-1;
}

static tbx_value *tagged_to_value(PyObject *o, int depth);

static tbx_value *value_oom(void) {
    if (!PyErr_Occurred()) PyErr_NoMemory();
    return NULL;
}

/* ("array", elem_name, [tagged...]) or ("packed", elem_name, bytes) */
static tbx_value *tagged_to_value(PyObject *o, int depth) {
    if (depth > 32) {
        PyErr_SetString(PyExc_ValueError, "tensorbox: metadata nested too deeply");
        return NULL;
    }
    if (!PyTuple_Check(o) || PyTuple_GET_SIZE(o) < 2 || !PyUnicode_Check(PyTuple_GET_ITEM(o, 0))) {
        PyErr_SetString(PyExc_TypeError, "tensorbox: internal: bad tagged value");
        return NULL;
    }
    const char *tag = PyUnicode_AsUTF8(PyTuple_GET_ITEM(o, 0));
    PyObject *p = PyTuple_GET_ITEM(o, 1);
    if (!tag) return NULL;
    if (strcmp(tag, "array") == 0 || strcmp(tag, "packed") == 0) {
        if (PyTuple_GET_SIZE(o) != 3 || !PyUnicode_Check(p)) goto bad;
        tbx_value_type et = vtype_from_name(PyUnicode_AsUTF8(p));
        if ((int)et < 0) goto bad;
        PyObject *items = PyTuple_GET_ITEM(o, 2);
        tbx_value *arr = tbx_value_new_array(et);
        if (!arr) return value_oom();
        if (strcmp(tag, "packed") == 0) {
            /* native-endian elements of `et` in a bytes object */
            Py_buffer b;
            if (PyObject_GetBuffer(items, &b, PyBUF_SIMPLE) < 0) { tbx_value_free(arr); return NULL; }
            size_t es = 0;
            switch (et) {
            case TBX_V_BOOL: case TBX_V_U8: case TBX_V_I8: es = 1; break;
            case TBX_V_U16: case TBX_V_I16: case TBX_V_F16: case TBX_V_BF16: es = 2; break;
            case TBX_V_U32: case TBX_V_I32: case TBX_V_F32: es = 4; break;
            case TBX_V_U64: case TBX_V_I64: case TBX_V_F64: es = 8; break;
            default: break;
            }
            if (es == 0 || (size_t)b.len % es) {
                PyBuffer_Release(&b);
                tbx_value_free(arr);
                goto bad;
            }
            const unsigned char *q = (const unsigned char *)b.buf;
            for (size_t k = 0; k < (size_t)b.len / es; k++) {
                tbx_value *it = NULL;
                const unsigned char *e = q + k * es;
                uint8_t u8; uint16_t u16; uint32_t u32; uint64_t u64;
                float f; double d;
                switch (et) {
                case TBX_V_BOOL: memcpy(&u8, e, 1); it = tbx_value_new_bool(u8 != 0); break;
                case TBX_V_U8: memcpy(&u8, e, 1); it = tbx_value_new_uint(et, u8); break;
                case TBX_V_I8: memcpy(&u8, e, 1); it = tbx_value_new_int(et, (int8_t)u8); break;
                case TBX_V_U16: memcpy(&u16, e, 2); it = tbx_value_new_uint(et, u16); break;
                case TBX_V_I16: memcpy(&u16, e, 2); it = tbx_value_new_int(et, (int16_t)u16); break;
                case TBX_V_F16: memcpy(&u16, e, 2); it = tbx_value_new_float(et, tbx_f16_to_f32(u16)); break;
                case TBX_V_BF16: memcpy(&u16, e, 2); it = tbx_value_new_float(et, tbx_bf16_to_f32(u16)); break;
                case TBX_V_U32: memcpy(&u32, e, 4); it = tbx_value_new_uint(et, u32); break;
                case TBX_V_I32: memcpy(&u32, e, 4); it = tbx_value_new_int(et, (int32_t)u32); break;
                case TBX_V_F32: memcpy(&f, e, 4); it = tbx_value_new_float(et, f); break;
                case TBX_V_U64: memcpy(&u64, e, 8); it = tbx_value_new_uint(et, u64); break;
                case TBX_V_I64: memcpy(&u64, e, 8); it = tbx_value_new_int(et, (int64_t)u64); break;
                case TBX_V_F64: memcpy(&d, e, 8); it = tbx_value_new_float(et, d); break;
                default: break;
                }
                if (!it || tbx_value_array_push(arr, it) != TBX_OK) {
                    PyBuffer_Release(&b);
                    tbx_value_free(arr);
                    return value_oom();
                }
            }
            PyBuffer_Release(&b);
            return arr;
        }
        if (!PyList_Check(items)) { tbx_value_free(arr); goto bad; }
        for (Py_ssize_t k = 0; k < PyList_GET_SIZE(items); k++) {
            tbx_value *it = tagged_to_value(PyList_GET_ITEM(items, k), depth + 1);
            if (!it) { tbx_value_free(arr); return NULL; }
            if (tbx_value_array_push(arr, it) != TBX_OK) {
                tbx_value_free(arr);
                PyErr_SetString(PyExc_TypeError,
                                "tensorbox: metadata list elements must all have one type");
                return NULL;
            }
        }
        return arr;
    }
    if (strcmp(tag, "map") == 0) {
        if (!PyList_Check(p)) goto bad;
        tbx_value *m = tbx_value_new_map();
        if (!m) return value_oom();
        for (Py_ssize_t k = 0; k < PyList_GET_SIZE(p); k++) {
            PyObject *kv = PyList_GET_ITEM(p, k);
            if (!PyTuple_Check(kv) || PyTuple_GET_SIZE(kv) != 2) { tbx_value_free(m); goto bad; }
            Py_ssize_t kl = 0;
            const char *key = PyUnicode_AsUTF8AndSize(PyTuple_GET_ITEM(kv, 0), &kl);
            if (!key) { tbx_value_free(m); return NULL; }
            tbx_value *it = tagged_to_value(PyTuple_GET_ITEM(kv, 1), depth + 1);
            if (!it) { tbx_value_free(m); return NULL; }
            tbx_status st = tbx_value_map_put(m, key, (size_t)kl, it);
            if (st != TBX_OK) {
                tbx_value_free(m);
                char q[256];
                name_repr(q, sizeof q, PyTuple_GET_ITEM(kv, 0));
                return (tbx_value *)raise_simple(st, "metadata map key %s: %s", q,
                                                 tbx_strerror(st));
            }
        }
        return m;
    }
    if (strcmp(tag, "ndarray") == 0) {
        /* ("ndarray", dtype_name, shape tuple, bytes) */
        if (PyTuple_GET_SIZE(o) != 4 || !PyUnicode_Check(p)) goto bad;
        tbx_dtype dt = tbx_dtype_from_name(PyUnicode_AsUTF8(p));
        PyObject *shp = PyTuple_GET_ITEM(o, 2);
        if (dt == TBX_DT_INVALID || !PyTuple_Check(shp) || PyTuple_GET_SIZE(shp) > 64) goto bad;
        uint64_t shape[64];
        uint32_t ndim = (uint32_t)PyTuple_GET_SIZE(shp);
        for (uint32_t k = 0; k < ndim; k++) {
            shape[k] = PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(shp, k));
            if (PyErr_Occurred()) return NULL;
        }
        Py_buffer b;
        if (PyObject_GetBuffer(PyTuple_GET_ITEM(o, 3), &b, PyBUF_SIMPLE) < 0) return NULL;
        tbx_value *r = tbx_value_new_ndarray(dt, shape, ndim, b.buf, (size_t)b.len);
        PyBuffer_Release(&b);
        return r ? r : value_oom();
    }
    tbx_value_type t = vtype_from_name(tag);
    tbx_value *r = NULL;
    switch ((int)t) {
    case TBX_V_NULL: return (r = tbx_value_new_null()) ? r : value_oom();
    case TBX_V_BOOL: return (r = tbx_value_new_bool(PyObject_IsTrue(p))) ? r : value_oom();
    case TBX_V_U8: case TBX_V_U16: case TBX_V_U32: case TBX_V_U64: {
        unsigned long long u = PyLong_AsUnsignedLongLong(p);
        if (PyErr_Occurred()) return NULL;
        return (r = tbx_value_new_uint(t, u)) ? r : value_oom();
    }
    case TBX_V_I8: case TBX_V_I16: case TBX_V_I32: case TBX_V_I64: {
        long long i = PyLong_AsLongLong(p);
        if (PyErr_Occurred()) return NULL;
        return (r = tbx_value_new_int(t, i)) ? r : value_oom();
    }
    case TBX_V_F16: case TBX_V_BF16: case TBX_V_F32: case TBX_V_F64: {
        double d = PyFloat_AsDouble(p);
        if (PyErr_Occurred()) return NULL;
        return (r = tbx_value_new_float(t, d)) ? r : value_oom();
    }
    case TBX_V_STRING: {
        /* surrogateescape: strings read with invalid UTF-8 bytes write back the same bytes */
        PyObject *b = PyUnicode_AsEncodedString(p, "utf-8", "surrogateescape");
        if (!b) return NULL;
        r = tbx_value_new_string(PyBytes_AS_STRING(b), (size_t)PyBytes_GET_SIZE(b));
        Py_DECREF(b);
        return r ? r : value_oom();
    }
    case TBX_V_BYTES: {
        Py_buffer b;
        if (PyObject_GetBuffer(p, &b, PyBUF_SIMPLE) < 0) return NULL;
        r = tbx_value_new_bytes(b.buf, (size_t)b.len);
        PyBuffer_Release(&b);
        return r ? r : value_oom();
    }
    default: break;
    }
bad:
    PyErr_Format(PyExc_TypeError, "tensorbox: internal: bad tagged value %R", o);
    return NULL;
}

/* ------------------------------------------------------------------------------------------ */
/* _File                                                                                       */
/* ------------------------------------------------------------------------------------------ */
typedef struct {
    PyObject_HEAD
    handle *h; /* NULL once closed */
} FileObject;

static int file_init(PyObject *self, PyObject *args, PyObject *kw) {
    FileObject *fo = (FileObject *)self;
    static char *kwlist[] = {"path", "mmap", "verify", "threads", "data", NULL};
    PyObject *pathobj = NULL, *data = NULL;
    int use_mmap = 1, verify = 0;
    unsigned int threads = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O&|ppIS", kwlist, PyUnicode_FSConverter,
                                     &pathobj, &use_mmap, &verify, &threads, &data))
        return -1;
    if (fo->h) {
        Py_DECREF(pathobj);
        PyErr_SetString(PyExc_RuntimeError, "tensorbox: _File initialised twice");
        return -1;
    }
    tbx_open_options opt;
    tbx_open_options_init(&opt);
    if (use_mmap) opt.flags |= TBX_OPEN_MMAP;
    if (verify) opt.flags |= TBX_OPEN_VERIFY_DIGESTS;
    opt.threads = threads;
    tbx_file *f = NULL;
    tbx_error err;
    err_clear(&err);
    tbx_status st;
    if (data) {
        /* data (a bytes object: immutable) is read in place, not copied: the handle keeps a
         * reference to it until the handle and every view of it are gone (`path` is unused) */
        const char *p = PyBytes_AS_STRING(data);
        size_t n = (size_t)PyBytes_GET_SIZE(data);
        Py_BEGIN_ALLOW_THREADS
        st = tbx_open_memory(&f, p, n, &opt, &err);
        Py_END_ALLOW_THREADS
    } else {
        const char *path = PyBytes_AS_STRING(pathobj);
        Py_BEGIN_ALLOW_THREADS
        st = tbx_open_path(&f, path, &opt, &err);
        Py_END_ALLOW_THREADS
    }
    Py_DECREF(pathobj);
    if (st != TBX_OK) {
        raise_tbx(st, &err);
        return -1;
    }
    handle *h = PyMem_Calloc(1, sizeof *h);
    if (h) h->lock = PyThread_allocate_lock();
    if (!h || !h->lock) {
        PyMem_Free(h);
        tbx_close(f);
        PyErr_NoMemory();
        return -1;
    }
    h->f = f;
    h->refs = 1;
    h->data = data;
    Py_XINCREF(data);
    fo->h = h;
    return 0;
}

static void file_dealloc(PyObject *self) {
    FileObject *fo = (FileObject *)self;
    handle_decref(fo->h);
    fo->h = NULL;
    Py_TYPE(self)->tp_free(self);
}

static handle *file_handle(FileObject *fo) {
    if (!fo->h) {
        PyErr_SetString(PyExc_ValueError, "tensorbox: the file is closed");
        return NULL;
    }
    return fo->h;
}

static int check_index(handle *h, unsigned long long i) {
    if (i >= tbx_tensor_count(h->f)) {
        raise_simple(TBX_E_INVALID_ARG, "tensor index %llu out of range (%llu tensors)", i,
                     (unsigned long long)tbx_tensor_count(h->f));
        return -1;
    }
    return 0;
}

static PyObject *file_close(PyObject *self, PyObject *Py_UNUSED(ignored)) {
    FileObject *fo = (FileObject *)self;
    handle *h = fo->h;
    fo->h = NULL;
    handle_decref(h);
    Py_RETURN_NONE;
}

static PyObject *file_closed(PyObject *self, void *Py_UNUSED(c)) {
    return PyBool_FromLong(((FileObject *)self)->h == NULL);
}

static PyObject *file_format(PyObject *self, void *Py_UNUSED(c)) {
    handle *h = file_handle((FileObject *)self);
    return h ? PyUnicode_FromString(tbx_format_name(tbx_file_format(h->f))) : NULL;
}

static PyObject *file_version(PyObject *self, void *Py_UNUSED(c)) {
    handle *h = file_handle((FileObject *)self);
    return h ? PyLong_FromUnsignedLong(tbx_file_version(h->f)) : NULL;
}

static PyObject *file_size(PyObject *self, void *Py_UNUSED(c)) {
    handle *h = file_handle((FileObject *)self);
    return h ? PyLong_FromUnsignedLongLong(tbx_file_size(h->f)) : NULL;
}

static PyObject *file_names(PyObject *self, PyObject *Py_UNUSED(ignored)) {
    handle *h = file_handle((FileObject *)self);
    if (!h) return NULL;
    uint64_t n = tbx_tensor_count(h->f);
    PyObject *list = PyList_New((Py_ssize_t)n);
    if (!list) return NULL;
    for (uint64_t i = 0; i < n; i++) {
        tbx_tensor_info ti = TBX_TENSOR_INFO_INIT;
        PyObject *s = tbx_tensor_info_get(h->f, i, &ti) == TBX_OK ? str_from(ti.name, ti.name_len)
                                                                   : PyUnicode_FromString("");
        if (!s) { Py_DECREF(list); return NULL; }
        PyList_SET_ITEM(list, (Py_ssize_t)i, s);
    }
    return list;
}

static PyObject *file_find(PyObject *self, PyObject *arg) {
    handle *h = file_handle((FileObject *)self);
    if (!h) return NULL;
    PyObject *b = PyUnicode_AsEncodedString(arg, "utf-8", "surrogateescape");
    if (!b) return NULL;
    uint64_t idx = 0;
    tbx_status st = TBX_E_NOT_FOUND;
    if (strlen(PyBytes_AS_STRING(b)) == (size_t)PyBytes_GET_SIZE(b))
        st = tbx_tensor_find(h->f, PyBytes_AS_STRING(b), &idx);
    if (st != TBX_OK) {
        tbx_error e;
        err_clear(&e);
        e.code = st;
        snprintf(e.field, sizeof e.field, "tensor");
        char q[256];
        name_repr(q, sizeof q, arg);
        snprintf(e.message, sizeof e.message, "no tensor named %s", q);
        Py_DECREF(b);
        return raise_tbx(st, &e);
    }
    Py_DECREF(b);
    return PyLong_FromUnsignedLongLong(idx);
}

/* tensor_info(i) -> (name, dtype, shape, layout, ncomponents, offset, nbytes, encoded) */
static PyObject *file_tensor_info(PyObject *self, PyObject *arg) {
    handle *h = file_handle((FileObject *)self);
    if (!h) return NULL;
    unsigned long long i = PyLong_AsUnsignedLongLong(arg);
    if (PyErr_Occurred() || check_index(h, i) < 0) return NULL;
    tbx_tensor_info ti = TBX_TENSOR_INFO_INIT;
    tbx_status st = tbx_tensor_info_get(h->f, i, &ti);
    if (st != TBX_OK) return raise_simple(st, "tensor %llu: no information", i);
    PyObject *shape = PyTuple_New(ti.ndim);
    if (!shape) return NULL;
    for (uint32_t d = 0; d < ti.ndim; d++)
        PyTuple_SET_ITEM(shape, d, PyLong_FromUnsignedLongLong(ti.shape[d]));
    int encoded = 0;
    for (uint32_t c = 0; c < ti.ncomponents; c++) {
        tbx_component_info ci = TBX_COMPONENT_INFO_INIT;
        if (tbx_component_info_get(h->f, i, c, &ci) == TBX_OK && ci.encoding != TBX_ENC_RAW)
            encoded = 1;
    }
    const char *ln = tbx_layout_name(ti.layout);
    return Py_BuildValue("(NsNsIKKO)", str_from(ti.name, ti.name_len), dtype_name(ti.dtype), shape,
                         ln ? ln : "?", ti.ncomponents, (unsigned long long)ti.offset,
                         (unsigned long long)ti.nbytes, encoded ? Py_True : Py_False);
}

/* map(i) -> _View, or None when the bytes cannot be mapped (pread, encoded, ...) */
static PyObject *file_map(PyObject *self, PyObject *arg) {
    handle *h = file_handle((FileObject *)self);
    if (!h) return NULL;
    unsigned long long i = PyLong_AsUnsignedLongLong(arg);
    if (PyErr_Occurred() || check_index(h, i) < 0) return NULL;
    const void *ptr = NULL;
    size_t len = 0;
    tbx_error err;
    err_clear(&err);
    tbx_status st;
    h->refs++; /* the view's reference, taken before the call (a close() may run meanwhile) */
    LOCKED_CALL(h, st = tbx_tensor_map(h->f, i, &ptr, &len, &err));
    ViewObject *v = NULL;
    if (st == TBX_OK && len <= (size_t)PY_SSIZE_T_MAX) v = PyObject_New(ViewObject, &ViewType);
    if (!v) {
        handle_decref(h);
        if (PyErr_Occurred()) return NULL;
        if (st == TBX_OK || st == TBX_E_UNSUPPORTED || st == TBX_E_INVALID_ARG) Py_RETURN_NONE;
        return raise_tbx(st, &err);
    }
    v->h = h;
    v->ptr = ptr ? ptr : (const void *)"";
    v->len = (Py_ssize_t)len;
    return (PyObject *)v;
}

/* read_into(i, buf): the tensor's stored (decoded) bytes; buf must be exactly their size */
static PyObject *file_read_into(PyObject *self, PyObject *args) {
    handle *h = file_handle((FileObject *)self);
    if (!h) return NULL;
    unsigned long long i;
    Py_buffer b;
    if (!PyArg_ParseTuple(args, "Kw*", &i, &b)) return NULL;
    if (check_index(h, i) < 0) { PyBuffer_Release(&b); return NULL; }
    tbx_error err;
    err_clear(&err);
    size_t needed = 0;
    tbx_status st;
    LOCKED_CALL(h, st = tbx_tensor_read(h->f, i, b.buf, (size_t)b.len, &needed, &err));
    PyBuffer_Release(&b);
    if (st != TBX_OK) return raise_tbx(st, &err);
    return PyLong_FromSize_t(needed);
}

/* read_range_into(i, pos, buf): len(buf) bytes at byte pos of the tensor's decoded data */
static PyObject *file_read_range_into(PyObject *self, PyObject *args) {
    handle *h = file_handle((FileObject *)self);
    if (!h) return NULL;
    unsigned long long i, pos;
    Py_buffer b;
    if (!PyArg_ParseTuple(args, "KKw*", &i, &pos, &b)) return NULL;
    if (check_index(h, i) < 0) { PyBuffer_Release(&b); return NULL; }
    tbx_error err;
    err_clear(&err);
    tbx_status st;
    LOCKED_CALL(h, st = tbx_tensor_read_range(h->f, i, pos, b.buf, (size_t)b.len, &err));
    PyBuffer_Release(&b);
    if (st != TBX_OK) return raise_tbx(st, &err);
    Py_RETURN_NONE;
}

/* read_f32_into(i, first, buf): len(buf)/4 elements from element `first`, as float32 */
static PyObject *file_read_f32_into(PyObject *self, PyObject *args) {
    handle *h = file_handle((FileObject *)self);
    if (!h) return NULL;
    unsigned long long i, first;
    Py_buffer b;
    if (!PyArg_ParseTuple(args, "KKw*", &i, &first, &b)) return NULL;
    if (check_index(h, i) < 0 || b.len % 4 != 0) {
        PyBuffer_Release(&b);
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "tensorbox: f32 buffer size not a multiple of 4");
        return NULL;
    }
    tbx_error err;
    err_clear(&err);
    tbx_status st;
    LOCKED_CALL(h, st = tbx_tensor_read_f32(h->f, i, first, (uint64_t)b.len / 4, (float *)b.buf,
                                            &err));
    PyBuffer_Release(&b);
    if (st != TBX_OK) return raise_tbx(st, &err);
    Py_RETURN_NONE;
}

static PyObject *file_metadata(PyObject *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"types", NULL};
    int typed = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|p", kwlist, &typed)) return NULL;
    handle *h = file_handle((FileObject *)self);
    if (!h) return NULL;
    PyObject *d = PyDict_New();
    if (!d) return NULL;
    uint64_t n = tbx_meta_count(h->f);
    for (uint64_t i = 0; i < n; i++) {
        size_t kl = 0;
        const char *k = tbx_meta_key(h->f, i, &kl);
        const tbx_value *v = tbx_meta_value(h->f, i);
        PyObject *key = str_from(k, kl);
        PyObject *val = key ? (typed && v ? value_typed(v) : value_to_py(v, 0)) : NULL;
        if (!val || PyDict_SetItem(d, key, val) < 0) {
            Py_XDECREF(key);
            Py_XDECREF(val);
            Py_DECREF(d);
            return NULL;
        }
        Py_DECREF(key);
        Py_DECREF(val);
    }
    return d;
}

static int set_item(PyObject *d, const char *k, PyObject *v) {
    if (!v) return -1;
    int r = PyDict_SetItemString(d, k, v);
    Py_DECREF(v);
    return r;
}

/* Appends v, a new reference (NULL: its construction failed), to list; the reference is
 * dropped either way (a successful append keeps the item alive: v may still be used as a
 * borrowed reference). -1 on failure, with the Python error set. */
static int append_new(PyObject *list, PyObject *v) {
    if (!v) return -1;
    int r = PyList_Append(list, v);
    Py_DECREF(v);
    return r;
}

/* ------------------------------------------------------------------------------------------ */
/* The description of a file (tbx_file_describe): `tbx info --json`'s document as Python       */
/* objects, built from the library's pieces; this file knows no key of it but "quant".         */
/* ------------------------------------------------------------------------------------------ */
typedef struct doc_builder {
    PyObject *doc;        /* the document (dict) */
    PyObject *open;       /* the member being given item by item (dict or list), or NULL */
    PyObject *item;       /* tbx_tensor_describe: the one item */
} doc_builder;

static tbx_status doc_piece(void *ud, const tbx_describe_part *p) {
    doc_builder *b = ud;
    PyObject *key = NULL, *v = NULL;
    int r = 0;
    switch (p->event) {
    case TBX_DESCRIBE_MEMBER:
        key = str_from(p->key, p->key_len);
        v = key ? value_to_py(p->value, 0) : NULL;
        r = v ? PyDict_SetItem(b->doc, key, v) : -1;
        break;
    case TBX_DESCRIBE_BEGIN:
        Py_CLEAR(b->open);
        b->open = p->container == TBX_V_MAP ? PyDict_New() : PyList_New(0);
        r = b->open ? 0 : -1;
        break;
    case TBX_DESCRIBE_ITEM:
        v = value_to_py(p->value, 0);
        if (!v) {
            r = -1;
        } else if (!b->open) { /* a lone item: tbx_tensor_describe */
            Py_XSETREF(b->item, Py_NewRef(v));
        } else if (p->container == TBX_V_MAP) {
            key = str_from(p->key, p->key_len);
            r = key ? PyDict_SetItem(b->open, key, v) : -1;
        } else {
            r = PyList_Append(b->open, v);
        }
        break;
    case TBX_DESCRIBE_END:
        key = str_from(p->key, p->key_len);
        r = key && b->open ? PyDict_SetItem(b->doc, key, b->open) : -1;
        Py_CLEAR(b->open);
        break;
    }
    Py_XDECREF(key);
    Py_XDECREF(v);
    return r < 0 ? TBX_E_NOMEM : TBX_OK; /* the Python error is set; stops the description */
}

/* info(types=False): the document of `tbx info --json` (docs/cli.md) as Python objects */
static PyObject *file_info(PyObject *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"types", NULL};
    int typed = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|p", kwlist, &typed)) return NULL;
    handle *h = file_handle((FileObject *)self);
    if (!h) return NULL;
    doc_builder b = {PyDict_New(), NULL, NULL};
    if (!b.doc) return NULL;
    tbx_error err;
    err_clear(&err);
    tbx_status st = tbx_file_describe(h->f, typed ? TBX_DESCRIBE_TYPES : 0, doc_piece, &b, &err);
    Py_XDECREF(b.open);
    Py_XDECREF(b.item);
    if (st != TBX_OK) {
        Py_DECREF(b.doc);
        return PyErr_Occurred() ? NULL : raise_tbx(st, &err);
    }
    return b.doc;
}

/* quant(i): tensor i's "quant" object of that document, or None */
static PyObject *file_quant(PyObject *self, PyObject *arg) {
    handle *h = file_handle((FileObject *)self);
    if (!h) return NULL;
    unsigned long long i = PyLong_AsUnsignedLongLong(arg);
    if (PyErr_Occurred() || check_index(h, i) < 0) return NULL;
    doc_builder b = {NULL, NULL, NULL};
    tbx_error err;
    err_clear(&err);
    tbx_status st = tbx_tensor_describe(h->f, i, 0, doc_piece, &b, &err);
    if (st != TBX_OK) {
        Py_XDECREF(b.item);
        return PyErr_Occurred() ? NULL : raise_tbx(st, &err);
    }
    PyObject *q = b.item ? PyDict_GetItemString(b.item, "quant") : NULL;
    PyObject *r = Py_NewRef(q ? q : Py_None);
    Py_XDECREF(b.item);
    return r;
}

static PyObject *file_sections(PyObject *self, PyObject *Py_UNUSED(ignored)) {
    handle *h = file_handle((FileObject *)self);
    if (!h) return NULL;
    uint64_t n = tbx_section_count(h->f);
    PyObject *list = PyList_New(0);
    if (!list) return NULL;
    for (uint64_t i = 0; i < n; i++) {
        tbx_section_info si = TBX_SECTION_INFO_INIT;
        if (tbx_section_info_get(h->f, i, &si) != TBX_OK) continue;
        PyObject *t = Py_BuildValue("(NIKK)", str_from(si.name, si.name ? strlen(si.name) : 0),
                                    si.type, (unsigned long long)si.offset,
                                    (unsigned long long)si.size);
        if (append_new(list, t) < 0) {
            Py_DECREF(list);
            return NULL;
        }
    }
    return list;
}

static PyObject *file_read_section(PyObject *self, PyObject *arg) {
    handle *h = file_handle((FileObject *)self);
    if (!h) return NULL;
    unsigned long long i = PyLong_AsUnsignedLongLong(arg);
    if (PyErr_Occurred()) return NULL;
    tbx_section_info si = TBX_SECTION_INFO_INIT;
    tbx_status st = tbx_section_info_get(h->f, i, &si);
    if (st != TBX_OK) return raise_simple(st, "section %llu: no such section", i);
    if (si.size > (uint64_t)PY_SSIZE_T_MAX) return PyErr_NoMemory();
    PyObject *b = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)si.size);
    if (!b) return NULL;
    tbx_error err;
    err_clear(&err);
    size_t needed = 0;
    char *buf = PyBytes_AS_STRING(b);
    LOCKED_CALL(h, st = tbx_section_read(h->f, i, buf, (size_t)si.size, &needed, &err));
    if (st != TBX_OK) {
        Py_DECREF(b);
        return raise_tbx(st, &err);
    }
    return b;
}

static PyObject *file_check_input(PyObject *self, PyObject *Py_UNUSED(ignored)) {
    handle *h = file_handle((FileObject *)self);
    if (!h) return NULL;
    return handle_check_input(h);
}

static PyMethodDef file_methods[] = {
    {"close", file_close, METH_NOARGS, "Drop this reference; the file closes with its last view."},
    {"names", file_names, METH_NOARGS, "Tensor names in file order."},
    {"find", file_find, METH_O, "Index of a tensor by name (NotFoundError when absent)."},
    {"tensor_info", file_tensor_info, METH_O,
     "(name, dtype, shape, layout, ncomponents, offset, nbytes, encoded) of tensor i."},
    {"map", file_map, METH_O, "Zero-copy _View of tensor i's bytes, or None."},
    {"read_into", file_read_into, METH_VARARGS, "Read tensor i's bytes into a writable buffer."},
    {"read_range_into", file_read_range_into, METH_VARARGS,
     "Read len(buf) bytes at byte pos of tensor i."},
    {"read_f32_into", file_read_f32_into, METH_VARARGS,
     "Decode len(buf)/4 elements of tensor i from element `first` to float32."},
    {"metadata", (PyCFunction)(void (*)(void))file_metadata, METH_VARARGS | METH_KEYWORDS,
     "Metadata as a dict of Python values."},
    {"info", (PyCFunction)(void (*)(void))file_info, METH_VARARGS | METH_KEYWORDS,
     "The `tbx info --json` document."},
    {"quant", file_quant, METH_O, "The quant description of tensor i, or None."},
    {"sections", file_sections, METH_NOARGS, "[(name, type, offset, size)]."},
    {"read_section", file_read_section, METH_O, "Bytes of section i."},
    {"check_input", file_check_input, METH_NOARGS,
     "None when the file still holds every byte it had when opened, else raises the error."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef file_getset[] = {
    {"closed", file_closed, NULL, "True after close()", NULL},
    {"format", file_format, NULL, "format name", NULL},
    {"version", file_version, NULL, "format version (0: none)", NULL},
    {"size", file_size, NULL, "file size in bytes", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject FileType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "tensorbox._tensorbox._File",
    .tp_basicsize = sizeof(FileObject),
    .tp_dealloc = file_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "_File(path, mmap=True, verify=False, threads=0): an open tensorbox file.",
    .tp_methods = file_methods,
    .tp_getset = file_getset,
    .tp_init = file_init,
    .tp_new = PyType_GenericNew,
};

/* ------------------------------------------------------------------------------------------ */
/* Module functions                                                                            */
/* ------------------------------------------------------------------------------------------ */
typedef struct problems_ctx {
    PyObject *list;
    int failed;
} problems_ctx;

/* Called with the GIL released (tbx_validate may call from worker threads: under its lock). */
static void on_problem(void *ud, const tbx_error *p) {
    problems_ctx *c = (problems_ctx *)ud;
    PyGILState_STATE g = PyGILState_Ensure();
    if (!c->failed) {
        size_t ml = strnlen(p->message, sizeof p->message);
        PyObject *t = Py_BuildValue("(sNNN)", tbx_status_name(p->code),
                                    str_from(p->field, strnlen(p->field, sizeof p->field)),
                                    offset_obj(p->offset),
                                    ml ? str_from(p->message, ml)
                                       : PyUnicode_FromString(tbx_strerror(p->code)));
        if (append_new(c->list, t) < 0) c->failed = 1;
    }
    PyGILState_Release(g);
}

/* validate(path, ggml=False, threads=0) -> [(code, field, offset, message)] */
static PyObject *mod_validate(PyObject *m, PyObject *args, PyObject *kw) {
    (void)m;
    static char *kwlist[] = {"path", "ggml", "threads", NULL};
    PyObject *pathobj = NULL;
    int ggml = 0;
    unsigned int threads = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O&|pI", kwlist, PyUnicode_FSConverter, &pathobj,
                                     &ggml, &threads))
        return NULL;
    problems_ctx c = {PyList_New(0), 0};
    if (!c.list) { Py_DECREF(pathobj); return NULL; }
    tbx_open_options opt;
    tbx_open_options_init(&opt);
    opt.on_problem = on_problem;
    opt.problem_ud = &c;
    opt.flags |= TBX_OPEN_VERIFY_DIGESTS;
    opt.threads = threads;
    tbx_file *f = NULL;
    tbx_error err;
    err_clear(&err);
    tbx_status st;
    const char *path = PyBytes_AS_STRING(pathobj);
    Py_BEGIN_ALLOW_THREADS
    st = tbx_open_path(&f, path, &opt, &err);
    if (st == TBX_OK) {
        tbx_validate(f, on_problem, &c, NULL);
        if (ggml) {
            if (tbx_file_format(f) == TBX_FORMAT_GGUF) {
                tbx_gguf_lint(f, on_problem, &c);
            } else {
                tbx_error e;
                err_clear(&e);
                e.code = TBX_E_UNSUPPORTED;
                snprintf(e.field, sizeof e.field, "ggml");
                snprintf(e.message, sizeof e.message, "ggml=True applies to GGUF files; this is %s",
                         tbx_format_name(tbx_file_format(f)));
                on_problem(&c, &e);
            }
        }
        tbx_close(f);
    } else {
        if (err.code == TBX_OK) err.code = st;
        on_problem(&c, &err);
    }
    Py_END_ALLOW_THREADS
    Py_DECREF(pathobj);
    if (c.failed) {
        Py_DECREF(c.list);
        return NULL;
    }
    return c.list;
}

static tbx_status format_from(PyObject *fmt, tbx_format *out) {
    *out = TBX_FORMAT_UNKNOWN;
    if (fmt == Py_None) return TBX_OK;
    const char *s = PyUnicode_AsUTF8(fmt);
    if (!s) return TBX_E_INVALID_ARG;
    *out = tbx_format_from_name(s);
    if (*out == TBX_FORMAT_UNKNOWN) {
        raise_simple(TBX_E_INVALID_ARG, "unknown format '%.100s'", s);
        return TBX_E_INVALID_ARG;
    }
    return TBX_OK;
}

static tbx_status dtype_from(PyObject *o, const char *what, tbx_dtype *out) {
    *out = TBX_DT_INVALID;
    if (o == Py_None) return TBX_OK;
    const char *s = PyUnicode_AsUTF8(o);
    if (!s) return TBX_E_INVALID_ARG;
    *out = tbx_dtype_from_name(s);
    if (*out == TBX_DT_INVALID) {
        raise_simple(TBX_E_INVALID_ARG, "%s: unknown dtype '%.100s'", what, s);
        return TBX_E_INVALID_ARG;
    }
    return TBX_OK;
}

/* Writer options from keywords (the names of `tbx convert`'s options). */
typedef struct wopts {
    PyObject *format, *digest;
    int force;
    unsigned int alignment, version, threads;
    int compress;
    int sync; /* 0: TBX_WRITE_NO_SYNC */
    PyObject *options; /* the format's own options: a tagged ("map", [...]) or None */
} wopts;
#define WOPTS_INIT {Py_None, Py_None, 0, 0, 0, 0, 0, 1, Py_None}

/* *options (freed by the caller, NULL when none) holds the value o->options points at. */
static int fill_write_options(const wopts *w, tbx_write_options *o, PyObject **digest_bytes,
                              tbx_value **options) {
    tbx_write_options_init(o);
    *options = NULL;
    *digest_bytes = NULL;
    if (w->options != Py_None) {
        *options = tagged_to_value(w->options, 0);
        if (!*options) return -1;
        o->options = *options;
    }
    if (format_from(w->format, &o->format) != TBX_OK) return -1;
    if (w->force) o->flags |= TBX_WRITE_OVERWRITE;
    if (!w->sync) o->flags |= TBX_WRITE_NO_SYNC;
    o->alignment = w->alignment;
    o->compress_level = w->compress;
    o->version = w->version;
    o->threads = w->threads;
    if (w->digest != Py_None) {
        *digest_bytes = PyUnicode_AsUTF8String(w->digest);
        if (!*digest_bytes) return -1;
        o->digest = PyBytes_AS_STRING(*digest_bytes);
    }
    return 0;
}

/* write(path, tensors, metadata, format, force, alignment, compress, digest, version, threads,
 *       sync)
 * tensors: [(name, dtype_name, shape tuple, buffer)]; metadata: [(key, tagged value)] */
static PyObject *mod_write(PyObject *m, PyObject *args, PyObject *kw) {
    (void)m;
    static char *kwlist[] = {"path", "tensors", "metadata", "format", "force", "alignment",
                             "compress", "digest", "format_version", "threads", "sync", "options",
                             NULL};
    PyObject *pathobj = NULL, *tensors, *meta;
    wopts w = WOPTS_INIT;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O&O!O!|OpIiOIIpO", kwlist, PyUnicode_FSConverter,
                                     &pathobj, &PyList_Type, &tensors, &PyList_Type, &meta,
                                     &w.format, &w.force, &w.alignment, &w.compress, &w.digest,
                                     &w.version, &w.threads, &w.sync, &w.options))
        return NULL;
    tbx_write_options o;
    tbx_value *options = NULL;
    PyObject *digest_bytes = NULL;
    Py_ssize_t nt = PyList_GET_SIZE(tensors);
    Py_buffer *bufs = NULL;
    Py_ssize_t nbufs = 0;
    tbx_writer *wr = NULL;
    tbx_error err;
    err_clear(&err);
    tbx_status st;
    PyObject *result = NULL;
    if (fill_write_options(&w, &o, &digest_bytes, &options) < 0) goto done;
    bufs = PyMem_Calloc((size_t)nt + 1, sizeof *bufs);
    if (!bufs) { PyErr_NoMemory(); goto done; }
    const char *path = PyBytes_AS_STRING(pathobj);
    st = tbx_writer_open(&wr, path, &o, &err);
    if (st != TBX_OK) { raise_tbx(st, &err); wr = NULL; goto done; }
    for (Py_ssize_t k = 0; k < PyList_GET_SIZE(meta); k++) {
        PyObject *kv = PyList_GET_ITEM(meta, k);
        Py_ssize_t kl = 0;
        const char *key;
        if (!PyTuple_Check(kv) || PyTuple_GET_SIZE(kv) != 2 ||
            !(key = PyUnicode_AsUTF8AndSize(PyTuple_GET_ITEM(kv, 0), &kl))) {
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "metadata keys must be str");
            goto done;
        }
        tbx_value *v = tagged_to_value(PyTuple_GET_ITEM(kv, 1), 0);
        if (!v) goto done;
        st = tbx_writer_add_meta(wr, key, (size_t)kl, v, &err);
        tbx_value_free(v);
        if (st != TBX_OK) { raise_tbx(st, &err); goto done; }
    }
    uint64_t *indexes = PyMem_Calloc((size_t)nt + 1, sizeof *indexes);
    if (!indexes) { PyErr_NoMemory(); goto done; }
    for (Py_ssize_t k = 0; k < nt; k++) {
        PyObject *t = PyList_GET_ITEM(tensors, k);
        const char *name, *dtn;
        Py_ssize_t name_len;
        PyObject *shp, *data;
        if (!PyArg_ParseTuple(t, "s#sO!O", &name, &name_len, &dtn, &PyTuple_Type, &shp, &data))
            goto done_idx;
        tbx_dtype dt = tbx_dtype_from_name(dtn);
        char q[256]; /* the name for a message, only when one is raised */
        if (dt == TBX_DT_INVALID) {
            name_repr(q, sizeof q, PyTuple_GET_ITEM(t, 0));
            raise_simple(TBX_E_INVALID_ARG, "tensor %s: unknown dtype '%s'", q, dtn);
            goto done_idx;
        }
        Py_ssize_t nd = PyTuple_GET_SIZE(shp);
        if (nd > 64) {
            name_repr(q, sizeof q, PyTuple_GET_ITEM(t, 0));
            raise_simple(TBX_E_LIMIT, "tensor %s: %zd dimensions", q, nd);
            goto done_idx;
        }
        uint64_t shape[64];
        for (Py_ssize_t d = 0; d < nd; d++) {
            shape[d] = PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(shp, d));
            if (PyErr_Occurred()) goto done_idx;
        }
        if (PyObject_GetBuffer(data, &bufs[k], PyBUF_C_CONTIGUOUS) < 0) goto done_idx;
        nbufs = k + 1;
        tbx_tensor_desc desc = TBX_TENSOR_DESC_INIT;
        desc.name = name;
        desc.name_len = (size_t)name_len;
        desc.dtype = dt;
        desc.ndim = (uint32_t)nd;
        desc.shape = shape;
        desc.has_data = 1;
        st = tbx_writer_add_tensor(wr, &desc, &indexes[k], &err);
        if (st != TBX_OK) { raise_tbx(st, &err); goto done_idx; }
    }
    st = TBX_OK;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t k = 0; k < nt && st == TBX_OK; k++)
        st = tbx_writer_write_tensor(wr, indexes[k], bufs[k].buf, (size_t)bufs[k].len, &err);
    if (st == TBX_OK) {
        tbx_writer *wf = wr;
        wr = NULL;
        st = tbx_writer_finish(wf, &err);
    }
    Py_END_ALLOW_THREADS
    if (st != TBX_OK) { raise_tbx(st, &err); goto done_idx; }
    result = Py_NewRef(Py_None);
done_idx:
    PyMem_Free(indexes);
done:
    if (wr) tbx_writer_abort(wr);
    for (Py_ssize_t k = 0; k < nbufs; k++)
        if (bufs[k].obj) PyBuffer_Release(&bufs[k]);
    PyMem_Free(bufs);
    tbx_value_free(options);
    Py_XDECREF(digest_bytes);
    Py_DECREF(pathobj);
    return result;
}

/* ------------------------------------------------------------------------------------------ */
/* Conversion: options, and the library's report of each tensor                               */
/* ------------------------------------------------------------------------------------------ */
/* An error of the package's hierarchy naming the argument (field) it is about. Returns NULL. */
static PyObject *raise_arg(const char *field, const char *fmt, ...) {
    tbx_error e;
    err_clear(&e);
    e.code = TBX_E_INVALID_ARG;
    snprintf(e.field, sizeof e.field, "%s", field);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e.message, sizeof e.message, fmt, ap);
    va_end(ap);
    return raise_tbx(TBX_E_INVALID_ARG, &e);
}

/* The conversion keywords (the names of `tbx convert`'s options) as the caller gave them. */
typedef struct copts {
    PyObject *cast, *quant, *quant_method, *quant_clip, *meta;
    int stringify, drop_meta, drop_sections, drop_unreadable, dequantize, requantize, strict;
    PyObject *imatrix;   /* None or a path */
    PyObject *imatrix_b; /* its bytes (fill_convert_options; the caller drops the reference) */
} copts;
#define COPTS_INIT {Py_None, Py_None, Py_None, Py_None, Py_None, 0, 0, 0, 0, 0, 0, 0, Py_None, NULL}

/* Fills co from the writer and conversion keywords for output `dst`, refusing before any work
 * what `tbx convert` refuses as a usage error: requantize without quant, a quant_method that
 * is not a str, a quant_clip that is not (min, max); the rest is the library's
 * (tbx_convert_check: quant_method / quant_clip are MCF's write options). quant takes the
 * names the CLI does (tbx_quant_from_name: for an MCF output, q8 q4 k6 k4 k3 k2 int8 int4).
 * *meta (freed by the caller, NULL when none) holds the map of `meta` (a tagged
 * ("map", [...]) or None); *options the write options, with those two added. Returns -1 with
 * an exception set. */
static int fill_convert_options(const wopts *w, copts *c, const char *src, const char *dst,
                                tbx_convert_options *co, PyObject **digest_bytes,
                                tbx_value **meta, tbx_value **options) {
    tbx_convert_options_init(co);
    *meta = NULL;
    if (fill_write_options(w, &co->write, digest_bytes, options) < 0) return -1;
    if (dtype_from(c->cast, "cast", &co->cast_to) != TBX_OK) return -1;
    const tbx_format fmt = co->write.format ? co->write.format : tbx_format_from_path(dst);
    if (c->quant != Py_None) {
        /* the names tbx convert --quant takes: the library's (a format's own types without
         * its prefix: MCF's q8 .. int4) */
        const char *s = PyUnicode_AsUTF8(c->quant);
        if (!s) return -1;
        /* a GGUF output (or an MCF one from a directory, a Hugging Face model): llama-quantize's
         * presets first (as tbx convert --quant) */
        struct stat ist;
        const int mcf_preset = fmt == TBX_FORMAT_MCF && src && stat(src, &ist) == 0 &&
                               S_ISDIR(ist.st_mode);
        const char *pn;
        for (size_t i = 0; (fmt == TBX_FORMAT_GGUF || mcf_preset) &&
                           (pn = tbx_quant_preset_at(i, NULL, NULL, NULL)) != NULL; i++)
            if (strcasecmp(pn, s) == 0) {
                co->quant_preset = pn;
                break;
            }
        if (!co->quant_preset) co->quant_to = tbx_quant_from_name(fmt, s);
    }
    if (co->quant_to == TBX_DT_INVALID && !co->quant_preset &&
        dtype_from(c->quant, "quant", &co->quant_to) != TBX_OK)
        return -1;
    /* imatrix=PATH: the importance matrix (tbx_convert_options.imatrix) */
    if (c->imatrix != Py_None) {
        if (!PyUnicode_FSConverter(c->imatrix, &c->imatrix_b)) return -1;
        co->imatrix = PyBytes_AS_STRING(c->imatrix_b);
    }
    if (c->stringify) co->flags |= TBX_CONVERT_STRINGIFY_META;
    if (c->drop_meta) co->flags |= TBX_CONVERT_DROP_META;
    if (c->drop_sections) co->flags |= TBX_CONVERT_DROP_SECTIONS;
    if (c->drop_unreadable) co->flags |= TBX_CONVERT_DROP_UNREADABLE;
    if (c->dequantize) co->flags |= TBX_CONVERT_DEQUANTIZE;
    if (c->strict) co->flags |= TBX_CONVERT_STRICT;
    if (c->requantize) {
        if (co->quant_to == TBX_DT_INVALID && !co->quant_preset) {
            raise_arg("requantize", "requantize=True applies to quant= (the type to quantize "
                                    "already-quantized tensors to again)");
            return -1;
        }
        co->flags |= TBX_CONVERT_REQUANTIZE;
    }
    /* quant_method= and quant_clip=(min, max): spellings of MCF's write options quant_method,
     * quant_clip_min and quant_clip_max, added to `options` (the library checks them, and that
     * quant= asks for one of MCF's families: tbx_convert_check) */
    if (c->quant_method != Py_None || c->quant_clip != Py_None) {
        const char *ms = NULL;
        double lo = 0, hi = 0;
        if (c->quant_method != Py_None) {
            ms = PyUnicode_Check(c->quant_method) ? PyUnicode_AsUTF8(c->quant_method) : NULL;
            if (!ms) {
                if (!PyErr_Occurred())
                    raise_arg("quant_method", "quant_method must be a string (MCF: 'best' or "
                              "'mantle'; GGUF: 'ggml' or 'search'), not a %s",
                              Py_TYPE(c->quant_method)->tp_name);
                return -1;
            }
        }
        if (c->quant_clip != Py_None) {
            if (!PyTuple_Check(c->quant_clip) || PyTuple_GET_SIZE(c->quant_clip) != 2) {
                raise_arg("quant_clip", "quant_clip must be (min, max)");
                return -1;
            }
            lo = PyFloat_AsDouble(PyTuple_GET_ITEM(c->quant_clip, 0));
            if (lo == -1.0 && PyErr_Occurred()) return -1;
            hi = PyFloat_AsDouble(PyTuple_GET_ITEM(c->quant_clip, 1));
            if (hi == -1.0 && PyErr_Occurred()) return -1;
        }
        if (!*options && !(*options = tbx_value_new_map())) {
            PyErr_NoMemory();
            return -1;
        }
        co->write.options = *options;
        struct { const char *key; tbx_value *v; int given; } add[3] = {
            {"quant_method", ms ? tbx_value_new_string(ms, strlen(ms)) : NULL, ms != NULL},
            {"quant_clip_min", c->quant_clip != Py_None ? tbx_value_new_float(TBX_V_F64, lo) : NULL,
             c->quant_clip != Py_None},
            {"quant_clip_max", c->quant_clip != Py_None ? tbx_value_new_float(TBX_V_F64, hi) : NULL,
             c->quant_clip != Py_None},
        };
        int rc = 0;
        for (int i = 0; i < 3; i++) {
            if (!add[i].given) continue;
            tbx_status st = rc == 0 ? tbx_value_map_put(*options, add[i].key, strlen(add[i].key),
                                                        add[i].v)
                                    : (tbx_value_free(add[i].v), TBX_OK);
            if (rc == 0 && st == TBX_E_DUPLICATE) {
                raise_arg(add[i].key, "%s is given twice: as %s= and in options",
                          add[i].key, i == 0 ? "quant_method" : "quant_clip");
                rc = -1;
            } else if (rc == 0 && st != TBX_OK) {
                PyErr_NoMemory();
                rc = -1;
            }
        }
        if (rc < 0) return -1;
    }
    if (c->meta != Py_None) {
        *meta = tagged_to_value(c->meta, 0);
        if (!*meta) return -1;
        co->meta = *meta;
    }
    return 0;
}

/* The reports of one conversion, collected with the GIL released (on_tensor appends a copy:
 * the library's pointers live for the call only) and turned into Python objects after. */
typedef struct rep_entry {
    tbx_convert_report r; /* name, reason: NULL here; offsets into the text below */
    size_t name_off, name_len, reason_off, reason_len;
    int has_rmse;         /* quantized to an MCF family: on_quant's error; a ggml K type with
                           * quant_method=search: the report's rmse */
    double rmse;
    int has_rmse_ggml;    /* quant_method=search: ggml's reference on the same values */
    double rmse_ggml;
} rep_entry;

typedef struct rep_list {
    rep_entry *v;
    size_t n, cap;
    char *text;
    size_t tlen, tcap;
    int nomem; /* a record could not be kept: the call's result is an error */
    /* on_quant's figures of the tensor being converted (it is called just before on_tensor
     * for that tensor, on the same thread) */
    int has_q;
    uint64_t q_tensor, q_nvalues;
    double q_sse;
    /* progress=: the callable (borrowed), and what it raised (owned; the call fails with it) */
    PyObject *progress;
    PyObject *exc_type, *exc_value, *exc_tb;
} rep_list;

static int rep_text(rep_list *l, const char *s, size_t *off, size_t *len) {
    size_t n = s ? strlen(s) : 0;
    if (n > SIZE_MAX / 2 - l->tlen) return -1;
    if (l->tlen + n > l->tcap) {
        size_t cap = l->tcap ? l->tcap : 4096;
        while (cap < l->tlen + n) cap *= 2;
        char *t = PyMem_RawRealloc(l->text, cap);
        if (!t) return -1;
        l->text = t;
        l->tcap = cap;
    }
    if (n) memcpy(l->text + l->tlen, s, n);
    *off = l->tlen;
    *len = n;
    l->tlen += n;
    return 0;
}

/* tbx_convert_options.progress with progress=: called with the GIL released, on the calling
 * thread (the library's calls come at job granularity, a few MiB each, so taking the GIL costs
 * nothing measurable). The callable gets (done, total); what it raises is kept and cancels
 * the conversion (non-zero: TBX_E_CANCELLED, no output), then is raised by convert(). */
static int on_progress_py(void *ud, uint64_t done, uint64_t total) {
    rep_list *l = (rep_list *)ud;
    if (!l->progress || l->exc_type) return l->exc_type != NULL;
    PyGILState_STATE g = PyGILState_Ensure();
    PyObject *r = PyObject_CallFunction(l->progress, "KK", (unsigned long long)done,
                                        (unsigned long long)total);
    int cancel = 0;
    if (!r) {
        PyErr_Fetch(&l->exc_type, &l->exc_value, &l->exc_tb);
        cancel = 1;
    }
    Py_XDECREF(r);
    PyGILState_Release(g);
    return cancel;
}

/* tbx_convert_options.on_tensor: called with the GIL released, once per tensor, in order. */
static void on_tensor_report(void *ud, const tbx_convert_report *r) {
    rep_list *l = (rep_list *)ud;
    if (l->nomem) return;
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 64;
        rep_entry *v = cap <= SIZE_MAX / sizeof *v ? PyMem_RawRealloc(l->v, cap * sizeof *v)
                                                   : NULL;
        if (!v) { l->nomem = 1; return; }
        l->v = v;
        l->cap = cap;
    }
    rep_entry *e = &l->v[l->n];
    memset(e, 0, sizeof *e);
    /* a library's struct may be shorter (older) than ours: its missing fields stay 0 */
    size_t sz = r->struct_size && r->struct_size < sizeof e->r ? r->struct_size : sizeof e->r;
    memcpy(&e->r, r, sz);
    e->r.name = e->r.reason = NULL;
    if (l->has_q && l->q_tensor == r->tensor) {
        e->has_rmse = 1;
        e->rmse = l->q_nvalues ? sqrt(l->q_sse / (double)l->q_nvalues) : 0.0;
    }
    if (sz >= offsetof(tbx_convert_report, rmse_ggml) + sizeof r->rmse_ggml && !isnan(r->rmse)) {
        e->has_rmse = e->has_rmse_ggml = 1;
        e->rmse = r->rmse;
        e->rmse_ggml = r->rmse_ggml;
    }
    l->has_q = 0;
    if (rep_text(l, r->name, &e->name_off, &e->name_len) < 0 ||
        rep_text(l, r->reason, &e->reason_off, &e->reason_len) < 0) {
        l->nomem = 1;
        return;
    }
    l->n++;
}

/* tbx_convert_options.on_quant (MCF families): kept for the report that follows. */
static void on_quant_report(void *ud, uint64_t tensor, uint64_t nvalues, double sse) {
    rep_list *l = (rep_list *)ud;
    l->has_q = 1;
    l->q_tensor = tensor;
    l->q_nvalues = nvalues;
    l->q_sse = sse;
}

static void rep_free(rep_list *l) {
    Py_XDECREF(l->exc_type);
    Py_XDECREF(l->exc_value);
    Py_XDECREF(l->exc_tb);
    PyMem_RawFree(l->v);
    PyMem_RawFree(l->text);
    memset(l, 0, sizeof *l);
}

static const char *action_name(tbx_convert_action a) {
    switch (a) {
    case TBX_CONVERT_KEPT: return "kept";
    case TBX_CONVERT_CAST: return "cast";
    case TBX_CONVERT_QUANTIZED: return "quantized";
    case TBX_CONVERT_FALLBACK: return "fallback";
    case TBX_CONVERT_DEQUANTIZED: return "dequantized";
    case TBX_CONVERT_REQUANTIZED: return "requantized";
    }
    return "?";
}

/* [(index, name, in_dtype, out_dtype, action, reason, nvalues, beyond, nonfinite, range,
 *   max_abs, rmse or None, rmse_ggml or None)] of the collected reports (with the GIL). */
static PyObject *rep_to_list(const rep_list *l) {
    PyObject *list = PyList_New(0);
    if (!list) return NULL;
    for (size_t k = 0; k < l->n; k++) {
        const rep_entry *e = &l->v[k];
        PyObject *rmse = e->has_rmse ? PyFloat_FromDouble(e->rmse) : Py_NewRef(Py_None);
        PyObject *rmse_g = e->has_rmse_ggml ? PyFloat_FromDouble(e->rmse_ggml)
                                            : Py_NewRef(Py_None);
        PyObject *t = Py_BuildValue("(KNssNNKKKddNN)", (unsigned long long)e->r.tensor,
                                    str_from(l->text + e->name_off, e->name_len),
                                    dtype_name(e->r.from), dtype_name(e->r.to),
                                    PyUnicode_FromString(action_name(e->r.action)),
                                    str_from(l->text + e->reason_off, e->reason_len),
                                    (unsigned long long)e->r.nvalues,
                                    (unsigned long long)e->r.beyond,
                                    (unsigned long long)e->r.nonfinite, e->r.range,
                                    e->r.max_abs, rmse, rmse_g);
        if (append_new(list, t) < 0) {
            Py_DECREF(list);
            return NULL;
        }
    }
    return list;
}

#define CONVERT_KW                                                                             \
    "cast", "quant", "stringify_meta", "drop_meta", "drop_sections", "sync", "drop_unreadable", \
        "dequantize", "requantize", "strict", "quant_method", "quant_clip", "meta", "options", \
        "imatrix"

/* convert(src, dst, format, force, alignment, compress, digest, format_version, threads,
 *         cast, quant, stringify_meta, drop_meta, drop_sections, sync, drop_unreadable,
 *         dequantize, requantize, strict, quant_method, quant_clip, meta)
 *   -> [report tuple] (rep_to_list), one per output tensor in order.
 * The whole conversion runs with the GIL released; the reports are collected in C meanwhile
 * and made Python objects once it returns. */
/* A type name of a preset's refinement (output_tensor_type=, tensor_types=): 0, or -1 with
 * InvalidArgumentError naming `what`. */
static int ggml_type_arg(PyObject *o, const char *what, tbx_dtype *out) {
    const char *s = PyUnicode_Check(o) ? PyUnicode_AsUTF8(o) : NULL;
    *out = s ? tbx_dtype_from_name(s) : TBX_DT_INVALID;
    if (*out != TBX_DT_INVALID) return 0;
    if (!PyErr_Occurred()) raise_arg(what, "%s: not a type name (%R)", what, o);
    return -1;
}

/* tensor_types= ({pattern: type} or [(pattern, type), ...]) as rules (PyMem; the patterns
 * borrowed from `obj`, alive for the call). -1 with an exception set. */
static int tensor_type_rules(PyObject *obj, tbx_tensor_type_rule **out, size_t *n) {
    *out = NULL;
    *n = 0;
    if (obj == Py_None) return 0;
    PyObject *items = PyDict_Check(obj) ? PyDict_Items(obj) : PySequence_List(obj);
    if (!items) return -1;
    const Py_ssize_t k = PyList_GET_SIZE(items);
    tbx_tensor_type_rule *r = PyMem_Calloc(k ? (size_t)k : 1, sizeof *r);
    if (!r) {
        Py_DECREF(items);
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < k; i++) {
        PyObject *it = PyList_GET_ITEM(items, i);
        PyObject *pat = PyTuple_Check(it) && PyTuple_GET_SIZE(it) == 2 ? PyTuple_GET_ITEM(it, 0)
                                                                      : NULL;
        r[i].pattern = pat && PyUnicode_Check(pat) ? PyUnicode_AsUTF8(pat) : NULL;
        if (!r[i].pattern || ggml_type_arg(PyTuple_GET_ITEM(it, 1), "tensor_types",
                                           &r[i].type) < 0) {
            if (!PyErr_Occurred())
                raise_arg("tensor_types", "tensor_types: each rule is (pattern, type), got %R",
                          it);
            PyMem_Free(r);
            Py_DECREF(items);
            return -1;
        }
    }
    Py_DECREF(items); /* (the patterns' strings are held by `obj`'s items) */
    *out = r;
    *n = (size_t)k;
    return 0;
}

static PyObject *mod_convert(PyObject *m, PyObject *args, PyObject *kw) {
    (void)m;
    static char *kwlist[] = {"src", "dst", "format", "force", "alignment", "compress", "digest",
                             "format_version", "threads", CONVERT_KW, "pure", "dry_run",
                             "output_tensor_type", "token_embedding_type", "tensor_types",
                             "keep_split", "leave_output_tensor", "progress", "max_shard_size",
                             NULL};
    PyObject *srcobj = NULL, *dstobj = NULL;
    wopts w = WOPTS_INIT;
    copts c = COPTS_INIT;
    int pure = 0, dry_run = 0, keep_split = 0, leave_output = 0;
    unsigned long long max_shard = 0;
    PyObject *ott = Py_None, *tet = Py_None, *tts = Py_None, *prog = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O&O&|OpIiOIIOOppppppppOOOOOppOOOppOK", kwlist,
                                     PyUnicode_FSConverter, &srcobj, PyUnicode_FSConverter,
                                     &dstobj, &w.format, &w.force, &w.alignment, &w.compress,
                                     &w.digest, &w.version, &w.threads, &c.cast, &c.quant,
                                     &c.stringify, &c.drop_meta, &c.drop_sections, &w.sync,
                                     &c.drop_unreadable, &c.dequantize, &c.requantize, &c.strict,
                                     &c.quant_method, &c.quant_clip, &c.meta, &w.options,
                                     &c.imatrix, &pure, &dry_run, &ott, &tet, &tts,
                                     &keep_split, &leave_output, &prog, &max_shard))
        return NULL;
    if (prog != Py_None && !PyCallable_Check(prog)) {
        Py_DECREF(srcobj);
        Py_DECREF(dstobj);
        PyErr_Format(PyExc_TypeError, "progress: a callable (done, total) or None, got %R", prog);
        return NULL;
    }
    PyObject *result = NULL, *digest_bytes = NULL;
    tbx_value *meta = NULL, *options = NULL;
    tbx_tensor_type_rule *rules = NULL;
    rep_list reps;
    memset(&reps, 0, sizeof reps);
    const char *src = PyBytes_AS_STRING(srcobj), *dst = PyBytes_AS_STRING(dstobj);
    tbx_convert_options co;
    if (fill_convert_options(&w, &c, src, dst, &co, &digest_bytes, &meta, &options) < 0) goto done;
    /* llama-quantize's refinements of a preset (the library refuses them without one) */
    if (pure) co.preset_flags |= TBX_PRESET_PURE;
    if (dry_run) co.preset_flags |= TBX_PRESET_DRY_RUN;
    if (keep_split) co.preset_flags |= TBX_PRESET_KEEP_SPLIT;
    if (leave_output) co.preset_flags |= TBX_PRESET_LEAVE_OUTPUT;
    co.max_shard_size = (uint64_t)max_shard; /* 0: one file */
    if (ott != Py_None && ggml_type_arg(ott, "output_tensor_type", &co.output_tensor_type) < 0)
        goto done;
    if (tet != Py_None &&
        ggml_type_arg(tet, "token_embedding_type", &co.token_embedding_type) < 0)
        goto done;
    if (tensor_type_rules(tts, &rules, &co.n_tensor_types) < 0) goto done;
    co.tensor_types = rules;
    co.on_tensor = on_tensor_report;
    co.on_quant = on_quant_report;
    co.progress_ud = &reps;
    if (prog != Py_None) {
        reps.progress = prog;
        co.progress = on_progress_py;
    }
    tbx_open_options oo;
    tbx_open_options_init(&oo);
    oo.flags |= TBX_OPEN_MMAP;
    tbx_file *f = NULL;
    tbx_error err;
    err_clear(&err);
    tbx_status st;
    Py_BEGIN_ALLOW_THREADS
    /* the options, and that dst can be written, before src (a model directory, maybe) is
     * opened */
    st = tbx_convert_check(dst, &co, &err);
    if (st == TBX_OK) st = tbx_open_path(&f, src, &oo, &err);
    if (st == TBX_OK) {
        st = tbx_convert(f, dst, &co, &err);
        tbx_close(f);
    }
    Py_END_ALLOW_THREADS
    if (reps.exc_type) {
        /* progress= raised: the conversion was cancelled (no output); raise what it raised */
        PyErr_Restore(reps.exc_type, reps.exc_value, reps.exc_tb);
        reps.exc_type = reps.exc_value = reps.exc_tb = NULL;
        goto done;
    }
    if (st != TBX_OK) { raise_tbx(st, &err); goto done; }
    if (reps.nomem) {
        /* the file is written, but what was done to it cannot be told: not a success */
        raise_simple(TBX_E_NOMEM, "%s was written, but the report of its tensors ran out of "
                                  "memory after %zu tensors", dst, reps.n);
        goto done;
    }
    result = rep_to_list(&reps);
done:
    PyMem_Free(rules);
    rep_free(&reps);
    Py_XDECREF(c.imatrix_b);
    tbx_value_free(meta);
    tbx_value_free(options);
    Py_XDECREF(digest_bytes);
    Py_DECREF(srcobj);
    Py_DECREF(dstobj);
    return result;
}

/* hf_from_gguf(src, dst, dtype=None, max_shard_size=0, weights_only=False, sync=True)
 *   -> [report tuple] (rep_to_list): tbx_hf_from_gguf, a GGUF model as a Hugging Face
 * directory dst; the directory checked before src is opened, the GIL released throughout. */
static PyObject *mod_hf_from_gguf(PyObject *m, PyObject *args, PyObject *kw) {
    (void)m;
    static char *kwlist[] = {"src", "dst", "dtype", "max_shard_size", "weights_only", "sync",
                             NULL};
    PyObject *srcobj = NULL, *dstobj = NULL, *dtobj = Py_None;
    unsigned long long max_shard = 0;
    int weights_only = 0, sync = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O&O&|OKpp", kwlist, PyUnicode_FSConverter,
                                     &srcobj, PyUnicode_FSConverter, &dstobj, &dtobj, &max_shard,
                                     &weights_only, &sync))
        return NULL;
    PyObject *result = NULL;
    rep_list reps;
    memset(&reps, 0, sizeof reps);
    tbx_hf_from_gguf_options o;
    tbx_hf_from_gguf_options_init(&o);
    if (dtobj != Py_None) {
        const char *dn = PyUnicode_Check(dtobj) ? PyUnicode_AsUTF8(dtobj) : NULL;
        o.dtype = dn ? tbx_dtype_from_name(dn) : TBX_DT_INVALID;
        if (o.dtype != TBX_DT_F32 && o.dtype != TBX_DT_F16 && o.dtype != TBX_DT_BF16) {
            if (!PyErr_Occurred())
                raise_arg("dtype", "dtype: a Hugging Face directory is written as f32, f16 or "
                                   "bf16, not %R", dtobj);
            goto done;
        }
    }
    o.max_shard_size = (uint64_t)max_shard;
    if (weights_only) o.flags |= TBX_HF_WEIGHTS_ONLY;
    if (!sync) o.write_flags |= TBX_WRITE_NO_SYNC;
    o.on_tensor = on_tensor_report;
    o.progress_ud = &reps;
    const char *src = PyBytes_AS_STRING(srcobj), *dst = PyBytes_AS_STRING(dstobj);
    tbx_open_options oo;
    tbx_open_options_init(&oo);
    oo.flags |= TBX_OPEN_MMAP;
    tbx_file *f = NULL;
    tbx_error err;
    err_clear(&err);
    tbx_status st;
    Py_BEGIN_ALLOW_THREADS
    st = tbx_hf_from_gguf_check(dst, &err);
    if (st == TBX_OK) st = tbx_open_path(&f, src, &oo, &err);
    if (st == TBX_OK) {
        st = tbx_hf_from_gguf(f, dst, &o, &err);
        tbx_close(f);
    }
    Py_END_ALLOW_THREADS
    if (st != TBX_OK) { raise_tbx(st, &err); goto done; }
    if (reps.nomem) {
        raise_simple(TBX_E_NOMEM, "%s was written, but the report of its tensors ran out of "
                                  "memory after %zu tensors", dst, reps.n);
        goto done;
    }
    result = rep_to_list(&reps);
done:
    rep_free(&reps);
    Py_DECREF(srcobj);
    Py_DECREF(dstobj);
    return result;
}

/* check_output(path, format=None, force=False, **conversion options): tbx_convert_check,
 * raising like write(), after checking the conversion options as convert() does (so that
 * save_file refuses them before it gathers and writes any tensor) */
static PyObject *mod_check_output(PyObject *m, PyObject *args, PyObject *kw) {
    (void)m;
    static char *kwlist[] = {"path", "format", "force", CONVERT_KW, NULL};
    PyObject *pathobj = NULL;
    wopts w = WOPTS_INIT;
    copts c = COPTS_INIT;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O&|OpOOppppppppOOOOO", kwlist,
                                     PyUnicode_FSConverter, &pathobj, &w.format, &w.force,
                                     &c.cast, &c.quant, &c.stringify, &c.drop_meta,
                                     &c.drop_sections, &w.sync, &c.drop_unreadable,
                                     &c.dequantize, &c.requantize, &c.strict, &c.quant_method,
                                     &c.quant_clip, &c.meta, &w.options, &c.imatrix))
        return NULL;
    PyObject *result = NULL, *digest_bytes = NULL;
    tbx_value *meta = NULL, *options = NULL;
    tbx_convert_options co;
    tbx_error err;
    err_clear(&err);
    const char *path = PyBytes_AS_STRING(pathobj);
    if (fill_convert_options(&w, &c, NULL, path, &co, &digest_bytes, &meta, &options) == 0) {
        tbx_status st;
        Py_BEGIN_ALLOW_THREADS
        st = tbx_convert_check(path, &co, &err);
        Py_END_ALLOW_THREADS
        if (st != TBX_OK) raise_tbx(st, &err);
        else result = Py_NewRef(Py_None);
    }
    Py_XDECREF(c.imatrix_b);
    tbx_value_free(meta);
    tbx_value_free(options);
    Py_XDECREF(digest_bytes);
    Py_DECREF(pathobj);
    return result;
}

/* dtype_info(name) -> (name, bits, block_size, block_bytes, flags) or None */
static PyObject *mod_dtype_info(PyObject *m, PyObject *arg) {
    (void)m;
    const char *s = PyUnicode_AsUTF8(arg);
    if (!s) return NULL;
    const tbx_dtype_info *in = tbx_dtype_get(tbx_dtype_from_name(s));
    if (!in) Py_RETURN_NONE;
    return Py_BuildValue("(sIIII)", in->name, in->bits, in->block_size, in->block_bytes,
                         in->flags);
}

/* decode_f32(dtype, src, out): tbx_decode_f32 of the bytes of src (a buffer) into out (a
 * writable float32 buffer of the element count) */
static PyObject *mod_decode_f32(PyObject *m, PyObject *args) {
    (void)m;
    const char *s;
    Py_buffer src, dst;
    if (!PyArg_ParseTuple(args, "sy*w*", &s, &src, &dst)) return NULL;
    PyObject *r = NULL;
    tbx_dtype dt = tbx_dtype_from_name(s);
    size_t n = (size_t)dst.len / sizeof(float);
    tbx_status st = dt == TBX_DT_INVALID ? TBX_E_INVALID_ARG
                                         : tbx_decode_f32(dt, src.buf, (size_t)src.len, n, dst.buf);
    if (st != TBX_OK) raise_simple(st, "dtype '%.100s': cannot decode %zu values: %s", s, n,
                                   tbx_strerror(st));
    else r = Py_NewRef(Py_None);
    PyBuffer_Release(&src);
    PyBuffer_Release(&dst);
    return r;
}

/* nbytes(dtype, shape) -> stored bytes of a tensor (tbx_dtype_nbytes_shape) */
static PyObject *mod_nbytes(PyObject *m, PyObject *args) {
    (void)m;
    const char *s;
    PyObject *shp;
    if (!PyArg_ParseTuple(args, "sO!", &s, &PyTuple_Type, &shp)) return NULL;
    Py_ssize_t nd = PyTuple_GET_SIZE(shp);
    if (nd > 64) return raise_simple(TBX_E_LIMIT, "%zd dimensions", nd);
    uint64_t shape[64], out = 0;
    for (Py_ssize_t d = 0; d < nd; d++) {
        shape[d] = PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(shp, d));
        if (PyErr_Occurred()) return NULL;
    }
    tbx_status st = tbx_dtype_nbytes_shape(tbx_dtype_from_name(s), shape, (uint32_t)nd, &out);
    if (st != TBX_OK) return raise_simple(st, "dtype %s: size of this shape: %s", s, tbx_strerror(st));
    return PyLong_FromUnsignedLongLong(out);
}

static PyObject *mod_formats(PyObject *m, PyObject *Py_UNUSED(ignored)) {
    (void)m;
    PyObject *list = PyList_New(0);
    if (!list) return NULL;
    for (size_t i = 0; i < tbx_format_count(); i++) {
        tbx_format_caps c = TBX_FORMAT_CAPS_INIT;
        if (tbx_format_caps_get(tbx_format_at(i), &c) != TBX_OK) continue;
        PyObject *t = Py_BuildValue("(sssO)", c.name, c.extensions ? c.extensions : "",
                                    c.aliases ? c.aliases : "",
                                    (c.flags & TBX_FCAP_WRITE) ? Py_True : Py_False);
        if (append_new(list, t) < 0) {
            Py_DECREF(list);
            return NULL;
        }
    }
    return list;
}

/* [(model_type, architecture)]: the Hugging Face architectures tbx_gguf_from_hf converts (the
 * library's architecture table, tbx_gguf_hf_arch_at). */
static PyObject *mod_hf_architectures(PyObject *m, PyObject *Py_UNUSED(ignored)) {
    (void)m;
    PyObject *list = PyList_New(0);
    if (!list) return NULL;
    for (size_t i = 0; i < tbx_gguf_hf_arch_count(); i++) {
        const char *arch = NULL, *mt = tbx_gguf_hf_arch_at(i, &arch);
        if (append_new(list, Py_BuildValue("(ss)", mt, arch ? arch : "")) < 0) {
            Py_DECREF(list);
            return NULL;
        }
    }
    return list;
}

static PyObject *mod_format_from_path(PyObject *m, PyObject *arg) {
    (void)m;
    PyObject *b = NULL;
    if (!PyUnicode_FSConverter(arg, &b)) return NULL;
    tbx_format f = tbx_format_from_path(PyBytes_AS_STRING(b));
    Py_DECREF(b);
    if (f == TBX_FORMAT_UNKNOWN) Py_RETURN_NONE;
    return PyUnicode_FromString(tbx_format_name(f));
}

static PyObject *mod_set_hooks(PyObject *m, PyObject *arg) {
    (void)m;
    if (!PyCallable_Check(arg)) {
        PyErr_SetString(PyExc_TypeError, "hook must be callable");
        return NULL;
    }
    Py_XSETREF(hook_array, Py_NewRef(arg));
    Py_RETURN_NONE;
}

/* diff(a, b, map="auto", nmse=-1.0, max_abs=-1.0, threads=0, progress=None) -> the tbx_diff
 * document; progress= as convert's (what it raises cancels the diff and is raised) */
static PyObject *mod_diff(PyObject *m, PyObject *args, PyObject *kw) {
    (void)m;
    static char *kwlist[] = {"a", "b", "map", "nmse", "max_abs", "threads", "progress", NULL};
    PyObject *pa = NULL, *pb = NULL, *prog = Py_None;
    const char *map = "auto";
    double nmse = -1, max_abs = -1;
    unsigned int threads = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O&O&|sddIO", kwlist, PyUnicode_FSConverter, &pa,
                                     PyUnicode_FSConverter, &pb, &map, &nmse, &max_abs, &threads,
                                     &prog))
        return NULL;
    if (prog != Py_None && !PyCallable_Check(prog)) {
        Py_DECREF(pa);
        Py_DECREF(pb);
        PyErr_Format(PyExc_TypeError, "progress: a callable (done, total) or None, got %R", prog);
        return NULL;
    }
    tbx_diff_options o;
    tbx_diff_options_init(&o);
    if (!strcmp(map, "none")) o.map = TBX_DIFF_MAP_NONE;
    else if (strcmp(map, "auto")) {
        Py_DECREF(pa);
        Py_DECREF(pb);
        return raise_simple(TBX_E_INVALID_ARG, "map: '%s' (auto or none)", map);
    }
    o.tol_nmse = nmse;
    o.tol_max_abs = max_abs;
    o.threads = threads;
    rep_list reps;
    memset(&reps, 0, sizeof reps);
    if (prog != Py_None) {
        reps.progress = prog;
        o.progress = on_progress_py;
        o.progress_ud = &reps;
    }
    tbx_open_options opt;
    tbx_open_options_init(&opt);
    tbx_file *fa = NULL, *fb = NULL;
    tbx_value *doc = NULL;
    tbx_error err;
    err_clear(&err);
    tbx_status st;
    const char *sa = PyBytes_AS_STRING(pa), *sb = PyBytes_AS_STRING(pb);
    Py_BEGIN_ALLOW_THREADS
    st = tbx_open_path(&fa, sa, &opt, &err);
    if (st == TBX_OK) st = tbx_open_path(&fb, sb, &opt, &err);
    if (st == TBX_OK) st = tbx_diff(fa, fb, &o, &doc, &err);
    tbx_close(fa);
    tbx_close(fb);
    Py_END_ALLOW_THREADS
    Py_DECREF(pa);
    Py_DECREF(pb);
    if (reps.exc_type) {
        /* progress= raised: the diff was cancelled; raise what it raised */
        tbx_value_free(doc);
        PyErr_Restore(reps.exc_type, reps.exc_value, reps.exc_tb);
        reps.exc_type = reps.exc_value = reps.exc_tb = NULL;
        rep_free(&reps);
        return NULL;
    }
    rep_free(&reps);
    if (st != TBX_OK) return raise_tbx(st, &err);
    PyObject *r = value_to_py(doc, 0);
    tbx_value_free(doc);
    return r;
}

static PyObject *mod_version(PyObject *m, PyObject *Py_UNUSED(ignored)) {
    (void)m;
    return PyUnicode_FromString(tbx_version());
}

static PyMethodDef mod_methods[] = {
    {"validate", (PyCFunction)(void (*)(void))mod_validate, METH_VARARGS | METH_KEYWORDS,
     "validate(path, ggml=False, threads=0) -> [(code, field, offset, message)]"},
    {"write", (PyCFunction)(void (*)(void))mod_write, METH_VARARGS | METH_KEYWORDS,
     "write(path, tensors, metadata, **options): tbx_writer over [(name, dtype, shape, buf)]"},
    {"convert", (PyCFunction)(void (*)(void))mod_convert, METH_VARARGS | METH_KEYWORDS,
     "convert(src, dst, **options) -> [report]: tbx_convert"},
    {"hf_from_gguf", (PyCFunction)(void (*)(void))mod_hf_from_gguf, METH_VARARGS | METH_KEYWORDS,
     "hf_from_gguf(src, dst, dtype=None, max_shard_size=0, weights_only=False, sync=True) -> "
     "[report]: tbx_hf_from_gguf"},
    {"check_output", (PyCFunction)(void (*)(void))mod_check_output, METH_VARARGS | METH_KEYWORDS,
     "check_output(path, format=None, force=False, **conversion options): tbx_writer_check"},
    {"dtype_info", mod_dtype_info, METH_O, "(name, bits, block_size, block_bytes, flags) or None"},
    {"decode_f32", mod_decode_f32, METH_VARARGS, "decode_f32(dtype, src, out): values as float32"},
    {"nbytes", mod_nbytes, METH_VARARGS, "nbytes(dtype, shape): stored bytes"},
    {"formats", mod_formats, METH_NOARGS, "[(name, extensions, aliases, writable)]"},
    {"format_from_path", mod_format_from_path, METH_O, "format name from an extension, or None"},
    {"hf_architectures", mod_hf_architectures, METH_NOARGS,
     "[(model_type, architecture)] of the Hugging Face -> GGUF architecture table"},
    {"diff", (PyCFunction)(void (*)(void))mod_diff, METH_VARARGS | METH_KEYWORDS,
     "diff(a, b, map='auto', nmse=-1.0, max_abs=-1.0, threads=0, progress=None): the tbx_diff "
     "document"},
    {"_set_array_hook", mod_set_hooks, METH_O, "internal"},
    {"library_version", mod_version, METH_NOARGS, "version of libtensorbox"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef moddef = {
    PyModuleDef_HEAD_INIT, "_tensorbox",
    "Low-level binding of libtensorbox; use the `tensorbox` package instead.", -1, mod_methods,
    NULL, NULL, NULL, NULL,
};

static PyObject *new_error(PyObject *mod, const char *name, PyObject *bases, const char *doc) {
    char full[96];
    snprintf(full, sizeof full, "tensorbox.%s", name);
    PyObject *cls = PyErr_NewExceptionWithDoc(full, doc, bases, NULL);
    if (!cls) return NULL;
    if (PyModule_AddObjectRef(mod, name, cls) < 0) {
        Py_DECREF(cls);
        return NULL;
    }
    return cls;
}

static PyObject *new_sub(PyObject *mod, const char *name, PyObject *extra, const char *doc) {
    PyObject *bases = extra ? PyTuple_Pack(2, Error, extra) : PyTuple_Pack(1, Error);
    if (!bases) return NULL;
    PyObject *cls = new_error(mod, name, bases, doc);
    Py_DECREF(bases);
    return cls;
}

PyMODINIT_FUNC PyInit__tensorbox(void) {
    if (PyType_Ready(&FileType) < 0 || PyType_Ready(&ViewType) < 0) return NULL;
    PyObject *mod = PyModule_Create(&moddef);
    if (!mod) return NULL;
    if (PyModule_AddObjectRef(mod, "_File", (PyObject *)&FileType) < 0 ||
        PyModule_AddObjectRef(mod, "_View", (PyObject *)&ViewType) < 0)
        goto fail;
    Error = new_error(mod, "Error", PyExc_Exception,
                      "Base of every tensorbox error: .code (stable name, e.g. "
                      "'TBX_E_TRUNCATED'), .status (its number), .offset (byte offset in the "
                      "file or None), .field (the field involved, may be '').");
    if (!Error) goto fail;
    if (!(FormatError = new_sub(mod, "FormatError", PyExc_ValueError,
                                "The file is malformed: truncated, bad magic/version, bad "
                                "structure, overflow, duplicate, bad range or padding.")) ||
        !(LimitError = new_sub(mod, "LimitError", NULL,
                               "A declared count or size exceeds a configured limit.")) ||
        !(UnsupportedError = new_sub(mod, "UnsupportedError", NULL,
                                     "Valid, but this operation cannot handle it.")) ||
        !(NotFoundError = new_sub(mod, "NotFoundError", PyExc_KeyError,
                                  "No tensor, key or section of that name.")) ||
        !(ChecksumError = new_sub(mod, "ChecksumError", NULL,
                                  "A stored digest or CRC does not match.")) ||
        !(ExistsError = new_sub(mod, "ExistsError", PyExc_FileExistsError,
                                "The output exists (pass force=True) or is an open input.")) ||
        !(LossyError = new_sub(mod, "LossyError", NULL,
                               "The step would lose data and was not explicitly allowed.")) ||
        !(TbxIOError = new_sub(mod, "IOError", PyExc_OSError, "open/read/write/rename failed.")) ||
        !(InvalidArgumentError = new_sub(mod, "InvalidArgumentError", PyExc_ValueError,
                                         "A bad argument or option.")) ||
        !(TbxMemoryError = new_sub(mod, "OutOfMemoryError", PyExc_MemoryError,
                                   "An allocation failed.")) ||
        !(StateError = new_sub(mod, "StateError", NULL,
                               "The call is not valid in the object's current state.")))
        goto fail;
    return mod;
fail:
    Py_DECREF(mod);
    return NULL;
}
