/*
 * open.c - opening a file, a set of files, a buffer or a read callback (tbx_open_*), and the
 * validation of a whole file (tbx_validate_path): the façade's use of the registry. A path is
 * handed to a provider (src/io/provider.h: the local directory, for now the only one), which
 * the handle keeps: a path that a driver claims as a set (a directory, an index file) goes to
 * that driver's open_path, which opens its files through the provider; any other input is the
 * provider's file of that path, detected by its first bytes (tbx_detect_format, never the
 * extension, which is only a hint when no magic matches) and opened by its driver (a GGUF split
 * set's shard 1 opens its siblings through the provider too). The handle itself, its reads and
 * the validation pass are src/access/.
 */
#include "api.h"

#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>

/* Detects the format (unless forced) and runs the driver. Closes f on failure. `hint` is the
 * format a path's extension names: it is used only when no magic matches, so that a damaged file
 * gets its own driver's precise error (e.g. an impossible safetensors header length) instead of
 * "unknown format". The magic always wins over the extension. */
static tbx_status finish_open(tbx_file *f, tbx_format hint, tbx_file **out, tbx_error *err) {
    uint8_t head[64];
    size_t hl = f->src.size < sizeof head ? (size_t)f->src.size : sizeof head;
    tbx_status st = tbx_source_read(&f->src, 0, head, hl, "magic", err);
    if (st != TBX_OK) { tbx_close(f); return st; }
    if (f->format == TBX_FORMAT_UNKNOWN) {
        f->format = tbx_detect_format(head, hl, f->src.size);
        if (f->format == TBX_FORMAT_UNKNOWN) f->format = hint;
        if (f->format == TBX_FORMAT_UNKNOWN) {
            char q[96];
            tbx_quote_bytes(q, sizeof q, (const char *)head, hl, 8);
            tbx_close(f);
            return tbx_err(err, TBX_E_BAD_MAGIC, 0, "magic",
                           "not a file of any known format (first bytes \"%s\", %llu bytes long)",
                           q, (unsigned long long)hl);
        }
    }
    f->drv = tbx_driver_for(f->format);
    if (!f->drv || !f->drv->open) {
        tbx_format fmt = f->format;
        tbx_close(f);
        return tbx_err(err, TBX_E_UNSUPPORTED, TBX_NO_OFFSET, "format",
                       "format %s cannot be read by this build", tbx_format_name(fmt));
    }
    return tbx_file_open_done_(f, f->drv->open(f, err), out, err);
}

/* The driver claiming the provider's path as a set of files (a directory, an index file), NULL
 * when none does: only the forced format's driver when the options name one. */
static const tbx_driver *set_driver(const tbx_provider *p, tbx_format forced) {
    for (size_t i = 0; tbx_drivers[i]; i++) {
        const tbx_driver *d = tbx_drivers[i];
        if (forced != TBX_FORMAT_UNKNOWN && d->format != forced) continue;
        if (d->claims_path && d->open_path && d->claims_path(p)) return d;
    }
    return NULL;
}

/* Opens the path of f->prov into f (closed on failure): a set a driver claims goes to its
 * open_path, anything else is the provider's file of that path, detected by its first bytes. */
static tbx_status open_from_provider(tbx_file *f, tbx_file **out, tbx_error *err) {
    const char *path = f->prov->path;
    const tbx_driver *sd = set_driver(f->prov, f->format);
    if (sd) {
        /* a set of files: the driver opens its sources through f->prov (core only routes) */
        f->path = tbx_memdup0(&f->al, path, strlen(path));
        if (!f->path) { tbx_close(f); return tbx_err_nomem(err, "path"); }
        f->format = sd->format;
        f->drv = sd;
        return tbx_file_open_done_(f, sd->open_path(f, err), out, err);
    }
    tbx_status st = tbx_provider_open(f->prov, NULL, (f->flags & TBX_OPEN_MMAP) != 0, &f->src,
                                      err);
    if (st != TBX_OK) { tbx_close(f); return st; }
    f->path = tbx_memdup0(&f->al, path, strlen(path));
    if (!f->path) { tbx_close(f); return tbx_err_nomem(err, "path"); }
    return finish_open(f, tbx_format_from_path(path), out, err);
}

tbx_status tbx_open_path(tbx_file **out, const char *path, const tbx_open_options *opt,
                         tbx_error *err) {
    if (!out || !path) return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "path", "NULL argument");
    *out = NULL;
    tbx_file *f;
    tbx_status st = tbx_file_new_(&f, opt, err);
    if (st != TBX_OK) return st;
    if (!*path) { /* the source's own error for an empty path */
        st = tbx_source_open_path(&f->src, path, false, err);
        tbx_close(f);
        return st;
    }
    /* the files of the path: a remote store's for a URL, else the local directory's */
    if (tbx_remote_is_url(path)) st = tbx_provider_remote(&f->prov, &f->al, path, err);
    else st = tbx_provider_local(&f->prov, &f->al, path, err);
    if (st != TBX_OK) { tbx_close(f); return st; }
    return open_from_provider(f, out, err);
}

tbx_status tbx_open_provider_(tbx_file **out, tbx_provider *prov, const tbx_open_options *opt,
                              tbx_error *err) {
    if (!out || !prov || !prov->ops || !prov->path || !*prov->path) {
        tbx_provider_free(prov);
        return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "path", "NULL argument");
    }
    *out = NULL;
    tbx_file *f;
    tbx_status st = tbx_file_new_(&f, opt, err);
    if (st != TBX_OK) { tbx_provider_free(prov); return st; }
    f->prov = prov;
    return open_from_provider(f, out, err);
}

tbx_status tbx_open_memory(tbx_file **out, const void *data, size_t size,
                           const tbx_open_options *opt, tbx_error *err) {
    if (!out || (!data && size)) return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "data", "NULL argument");
    *out = NULL;
    tbx_file *f;
    tbx_status st = tbx_file_new_(&f, opt, err);
    if (st != TBX_OK) return st;
    tbx_source_open_memory(&f->src, data, size);
    return finish_open(f, TBX_FORMAT_UNKNOWN, out, err);
}

tbx_status tbx_open_callback(tbx_file **out, tbx_read_at_fn read_at, void *ud, uint64_t size,
                             const tbx_open_options *opt, tbx_error *err) {
    if (!out || !read_at) return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "read_at", "NULL argument");
    *out = NULL;
    tbx_file *f;
    tbx_status st = tbx_file_new_(&f, opt, err);
    if (st != TBX_OK) return st;
    tbx_source_open_callback(&f->src, read_at, ud, size);
    return finish_open(f, TBX_FORMAT_UNKNOWN, out, err);
}

/* Where tbx_validate_* take the file from: a path, a memory buffer or a read callback. */
typedef struct validate_src {
    tbx_source_kind kind;    /* TBX_SRC_FD: path, TBX_SRC_MEMORY: data, TBX_SRC_CALLBACK */
    const char *path;
    const void *data;
    size_t size;
    tbx_read_at_fn read_at;
    void *read_ud;
} validate_src;

/* Counts the problems of the open and of the pass (in that order) and passes them on. */
typedef struct validate_ctx {
    tbx_problem_fn cb;
    void *ud;
    uint64_t n;
    tbx_status first;
} validate_ctx;

static void collect_problem(void *ud, const tbx_error *e) {
    validate_ctx *v = ud;
    if (v->n++ == 0) v->first = e->code;
    if (v->cb) v->cb(v->ud, e);
}

static tbx_status validate_from(const validate_src *vs, const tbx_open_options *opt,
                                tbx_problem_fn cb, void *ud, uint64_t *nproblems) {
    validate_ctx v = { cb, ud, 0, TBX_OK };
    tbx_open_options o;
    tbx_open_options_init(&o);
    if (opt) {
        size_t n = tbx_struct_bytes(opt->struct_size, sizeof o);
        memcpy(&o, opt, n);
        o.struct_size = sizeof o;
    }
    o.on_problem = collect_problem;
    o.problem_ud = &v;
    o.flags |= TBX_OPEN_VERIFY_DIGESTS;
    tbx_file *f = NULL;
    tbx_error e;
    tbx_status st;
    if (vs->kind == TBX_SRC_FD) st = tbx_open_path(&f, vs->path, &o, &e);
    else if (vs->kind == TBX_SRC_CALLBACK) st = tbx_open_callback(&f, vs->read_at, vs->read_ud, vs->size, &o, &e);
    else st = tbx_open_memory(&f, vs->data, vs->size, &o, &e);
    if (st != TBX_OK) collect_problem(&v, &e);
    else tbx_validate(f, collect_problem, &v, NULL); /* its pass's problems after the open's */
    tbx_close(f);
    if (nproblems) *nproblems = v.n;
    return v.n ? v.first : TBX_OK;
}

tbx_status tbx_validate_path(const char *path, const tbx_open_options *opt, tbx_problem_fn cb,
                             void *ud, uint64_t *nproblems) {
    validate_src vs = { TBX_SRC_FD, path, NULL, 0, NULL, NULL };
    return validate_from(&vs, opt, cb, ud, nproblems);
}

tbx_status tbx_validate_memory_(const void *data, size_t size, const tbx_open_options *opt,
                                tbx_problem_fn cb, void *ud, uint64_t *nproblems) {
    validate_src vs = { TBX_SRC_MEMORY, NULL, data, size, NULL, NULL };
    return validate_from(&vs, opt, cb, ud, nproblems);
}

tbx_status tbx_validate_callback_(tbx_read_at_fn read_at, void *read_ud, uint64_t size,
                                  const tbx_open_options *opt, tbx_problem_fn cb, void *ud,
                                  uint64_t *nproblems) {
    validate_src vs = { TBX_SRC_CALLBACK, NULL, NULL, size, read_at, read_ud };
    return validate_from(&vs, opt, cb, ud, nproblems);
}
