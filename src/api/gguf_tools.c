/*
 * gguf_tools.c - GGUF file tools built on the common model and the writer: metadata editing
 * (tbx_gguf_set_meta, tbx_gguf_del_meta), splitting into shards (tbx_gguf_split) and merging a
 * shard set (tbx_gguf_merge). Declared in tensorbox/gguf.h ("GGUF file tools"). The wire rules
 * are the GGUF driver's: this file asks it through src/formats/gguf/gguf_edit.h.
 *
 * Tensor bytes always go through unchanged: they are copied in bounded chunks with
 * tbx_tensor_read_range into a GGUF writer, which lays them out in the same order and with the
 * same alignment (general.alignment is copied, or passed as the alignment option).
 *
 * The only in-place edit is a metadata value whose serialised bytes (type tag + value) have the
 * same length as the old ones, in a v2/v3 file, for any key but general.alignment: the driver
 * says where the old bytes are (tbx_gguf_kv_span_: as its reader found them when the locked file
 * was opened) and what the new ones are (tbx_gguf_kv_value_bytes_), which pwrite puts in their
 * place. Anything else rewrites the file through a writer whose temporary file is renamed over
 * <path>.
 *
 * Every edit first takes the file's lock (tbx_edit_lock: symbolic links resolved, LOCK_EX, the
 * name checked to still be the locked file), then parses the file and writes in place through
 * that same descriptor, or renames the rewritten file over it, before letting go. Two edits of
 * one file therefore take turns, and the second one works on the first one's result.
 */
#define _GNU_SOURCE
#include "api.h"
#define TBX_EXPERIMENTAL 1 /* the GGUF extras: experimental public API */
#include "tensorbox/gguf.h"
#include "gguf_edit.h" /* the GGUF driver's answers: where a value lies, its bytes */

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#define GT_CHUNK ((size_t)4 << 20)

static bool key_is(const char *k, size_t n, const char *z) {
    return n == strlen(z) && memcmp(k, z, n) == 0;
}

/* Opens a little-endian GGUF file (pread); only that file, never the split set it starts. */
static tbx_status open_gguf(tbx_file **out, const char *path, tbx_error *err) {
    tbx_open_options oo;
    tbx_open_options_init(&oo);
    oo.format = TBX_FORMAT_GGUF;
    oo.flags = TBX_OPEN_SINGLE_FILE_;
    tbx_file *f = NULL;
    tbx_status st = tbx_open_path(&f, path, &oo, err);
    if (st != TBX_OK) return st;
    if (tbx_gguf_big_endian_(f)) {
        tbx_close(f);
        return tbx_err(err, TBX_E_UNSUPPORTED, TBX_NO_OFFSET, "version",
                       "%s: big-endian GGUF files cannot be edited, split or merged", path);
    }
    *out = f;
    return TBX_OK;
}

/* Locks `path` for an edit and opens the locked file. */
static tbx_status open_locked(tbx_edit *lk, tbx_file **out, const char *path, tbx_error *err) {
    tbx_status st = tbx_edit_lock(lk, NULL, path, err);
    if (st != TBX_OK) return st;
    st = open_gguf(out, lk->path, err);
    if (st == TBX_OK && ((*out)->src.dev != lk->dev || (*out)->src.ino != lk->ino)) {
        /* only a process that ignores the lock can have replaced it meanwhile */
        tbx_close(*out);
        *out = NULL;
        st = tbx_err(err, TBX_E_IO, TBX_NO_OFFSET, "path",
                     "%s was replaced by another process during the edit; nothing was written",
                     path);
    }
    if (st != TBX_OK) tbx_edit_unlock(lk);
    return st;
}

/* Declares every tensor of `in` in [from, to) on the writer. */
static tbx_status declare_tensors(tbx_file *in, size_t from, size_t to, tbx_writer *w,
                                  tbx_error *err) {
    for (size_t i = from; i < to; i++) {
        const tbx_tensor *t = &in->tensors[i];
        tbx_tensor_desc d = {sizeof(tbx_tensor_desc), t->name, t->name_len, t->dtype, t->ndim, t->shape, t->ncomp == 1};
        tbx_status st = tbx_writer_add_tensor(w, &d, NULL, err);
        if (st != TBX_OK) return st;
    }
    return TBX_OK;
}

/* Copies the stored bytes of tensor i of `in` to writer tensor wi. */
static tbx_status copy_data(tbx_file *in, size_t i, tbx_writer *w, uint64_t wi, uint8_t *buf,
                            tbx_error *err) {
    const tbx_tensor *t = &in->tensors[i];
    if (t->ncomp == 0) return TBX_OK;
    uint64_t n = t->comp[0].nbytes;
    for (uint64_t p = 0; p < n; p += GT_CHUNK) {
        size_t len = (size_t)(n - p < GT_CHUNK ? n - p : GT_CHUNK);
        tbx_status st = tbx_tensor_read_range(in, i, p, buf, len, err);
        if (st == TBX_OK) st = tbx_writer_write_tensor(w, wi, buf, len, err);
        if (st != TBX_OK) return st;
    }
    return TBX_OK;
}

static tbx_status writer_for(tbx_writer **w, const char *path, uint32_t flags, uint32_t version,
                             uint32_t alignment, tbx_error *err) {
    tbx_write_options wo;
    tbx_write_options_init(&wo);
    wo.format = TBX_FORMAT_GGUF;
    wo.flags = flags & TBX_WRITE_OVERWRITE;
    wo.version = version == 2 ? 2 : 0;
    wo.alignment = alignment;
    return tbx_writer_open_(w, path, &wo, flags & TBX_WRITE_EDIT_, err);
}

/* Can a GGUF file be written at `path` now (tbx_writer_check)? Checked before any work. */
static tbx_status check_out(const char *path, uint32_t flags, tbx_error *err) {
    tbx_write_options wo;
    tbx_write_options_init(&wo);
    wo.format = TBX_FORMAT_GGUF;
    wo.flags = flags & TBX_WRITE_OVERWRITE;
    return tbx_writer_check(path, &wo, err);
}

/* The alignment to pass to a writer for a file's tensors: general.alignment when it is a u32
 * (the writer then keeps it), else 0 (the default, 32). */
static uint32_t file_alignment(const tbx_file *f) {
    const tbx_value *a = tbx_meta_find(f, "general.alignment");
    return a && a->type == TBX_V_U32 ? (uint32_t)a->v.u : 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Metadata editing                                                                            */
/* ------------------------------------------------------------------------------------------ */
/* Writes in place through the locked descriptor. */
static tbx_status pwrite_all(const tbx_edit *lk, const char *path, uint64_t off, const void *data,
                             size_t len, tbx_error *err) {
    if (!lk->writable)
        return tbx_err(err, TBX_E_IO, TBX_NO_OFFSET, "file", "%s: cannot open for writing: %s",
                       path, strerror(EACCES));
    const uint8_t *p = data;
    while (len > 0) {
        ssize_t k = pwrite(lk->fd, p, len, (off_t)off);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0)
            return tbx_err(err, TBX_E_IO, off, "file", "%s: write: %s", path,
                           k < 0 ? strerror(errno) : "no progress");
        p += k;
        off += (uint64_t)k;
        len -= (size_t)k;
    }
    int rc;
    while ((rc = fsync(lk->fd)) != 0 && errno == EINTR) {
    }
    if (rc != 0)
        return tbx_err(err, TBX_E_IO, TBX_NO_OFFSET, "file", "%s: fsync: %s", path, strerror(errno));
    return TBX_OK;
}

/* Rewrites `in` (the locked file lk) with `key` set to `value` (NULL: removed), through a
 * writer that renames its temporary file over the file; closes `in`. */
static tbx_status rewrite_edit(tbx_file *in, const tbx_edit *lk, const char *key, size_t key_len,
                               const tbx_value *value, tbx_error *err) {
    tbx_writer *w = NULL;
    tbx_status st = writer_for(&w, lk->path, TBX_WRITE_EDIT_, in->version, file_alignment(in), err);
    bool found = false;
    for (size_t i = 0; st == TBX_OK && i < in->nmeta; i++) {
        const tbx_meta_entry *m = &in->meta[i];
        if (m->key_len == key_len && memcmp(m->key, key, key_len) == 0) {
            found = true;
            if (value) st = tbx_writer_add_meta(w, key, key_len, value, err);
        } else {
            st = tbx_writer_add_meta(w, m->key, m->key_len, m->value, err);
        }
    }
    if (st == TBX_OK && !found && value) st = tbx_writer_add_meta(w, key, key_len, value, err);
    if (st == TBX_OK) st = declare_tensors(in, 0, in->ntensors, w, err);
    uint8_t *buf = NULL;
    if (st == TBX_OK && !(buf = malloc(GT_CHUNK))) st = tbx_err_nomem(err, "copy buffer");
    for (size_t i = 0; st == TBX_OK && i < in->ntensors; i++) st = copy_data(in, i, w, i, buf, err);
    free(buf);
    if (st == TBX_OK) st = tbx_writer_finish(w, err);
    else tbx_writer_abort(w);
    tbx_close(in);
    return st;
}

tbx_status tbx_gguf_set_meta(const char *path, const char *key, size_t key_len,
                             const tbx_value *value, int *in_place, tbx_error *err) {
    tbx_error local;
    if (!err) err = &local;
    if (in_place) *in_place = 0;
    if (!path || !key || !value)
        return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "gguf", "NULL argument");
    if (key_len == 0) key_len = strlen(key);
    if (key_len == 0)
        return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "metadata.key", "empty key");
    tbx_edit lk;
    tbx_file *f;
    tbx_status st = open_locked(&lk, &f, path, err);
    if (st != TBX_OK) return st;

    /* in place? */
    uint64_t idx = UINT64_MAX;
    for (size_t i = 0; i < f->nmeta; i++)
        if (f->meta[i].key_len == key_len && memcmp(f->meta[i].key, key, key_len) == 0) idx = i;
    if (idx != UINT64_MAX && (f->version == 2 || f->version == 3) &&
        !key_is(key, key_len, "general.alignment")) {
        uint64_t type_at = 0, end = 0;
        st = tbx_gguf_kv_span_(f, idx, &type_at, &end, err);
        if (st != TBX_OK) { tbx_close(f); tbx_edit_unlock(&lk); return st; }
        /* the new value's bytes (a scalar or a string), when they are exactly as many */
        size_t new_len = tbx_gguf_kv_value_bytes_(value, NULL, 0);
        if (new_len && new_len == end - type_at) {
            tbx_close(f);
            uint8_t *p = malloc(new_len);
            if (!p) {
                st = tbx_err_nomem(err, "metadata value");
            } else {
                tbx_gguf_kv_value_bytes_(value, p, new_len);
                st = pwrite_all(&lk, path, type_at, p, new_len, err);
                free(p);
            }
            tbx_edit_unlock(&lk);
            if (st == TBX_OK && in_place) *in_place = 1;
            return st;
        }
    }
    st = rewrite_edit(f, &lk, key, key_len, value, err);
    tbx_edit_unlock(&lk);
    return st;
}

tbx_status tbx_gguf_del_meta(const char *path, const char *key, size_t key_len, tbx_error *err) {
    tbx_error local;
    if (!err) err = &local;
    if (!path || !key)
        return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "gguf", "NULL argument");
    if (key_len == 0) key_len = strlen(key);
    tbx_edit lk;
    tbx_file *f;
    tbx_status st = open_locked(&lk, &f, path, err);
    if (st != TBX_OK) return st;
    bool found = false;
    for (size_t i = 0; i < f->nmeta; i++)
        if (f->meta[i].key_len == key_len && memcmp(f->meta[i].key, key, key_len) == 0) found = true;
    if (!found) {
        char q[96];
        tbx_quote_bytes(q, sizeof q, key, key_len, 64);
        tbx_close(f);
        tbx_edit_unlock(&lk);
        return tbx_err(err, TBX_E_NOT_FOUND, TBX_NO_OFFSET, "metadata.key",
                       "%s has no metadata key \"%s\"", path, q);
    }
    st = rewrite_edit(f, &lk, key, key_len, NULL, err);
    tbx_edit_unlock(&lk);
    return st;
}

/* ------------------------------------------------------------------------------------------ */
/* Split and merge                                                                             */
/* ------------------------------------------------------------------------------------------ */
static char *shard_name(const char *stem, uint32_t no, uint32_t count) {
    size_t sl = strlen(stem), n = tbx_gguf_shard_name_(NULL, 0, stem, sl, no, count) + 1;
    char *p = malloc(n);
    if (p) tbx_gguf_shard_name_(p, n, stem, sl, no, count);
    return p;
}

static tbx_status add_split_keys(tbx_writer *w, uint32_t no, uint32_t count, uint64_t ntensors,
                                 tbx_error *err) {
    const tbx_gguf_split_key *sk = tbx_gguf_split_keys_; /* u16, u16, i32 */
    tbx_value *v[3] = {tbx_value_new_uint(sk[0].type, no), tbx_value_new_uint(sk[1].type, count),
                       tbx_value_new_int(sk[2].type, (int64_t)ntensors)};
    tbx_status st = TBX_OK;
    for (int k = 0; k < 3; k++) {
        if (st == TBX_OK && !v[k]) st = tbx_err_nomem(err, "split keys");
        if (st == TBX_OK) st = tbx_writer_add_meta(w, sk[k].key, strlen(sk[k].key), v[k], err);
    }
    for (int k = 0; k < 3; k++) tbx_value_free(v[k]);
    return st;
}

tbx_status tbx_gguf_split(const char *path, uint64_t max_bytes, const char *out_stem,
                          uint32_t flags, uint32_t *nshards, tbx_error *err) {
    tbx_error local;
    if (!err) err = &local;
    if (!path || !out_stem || max_bytes == 0)
        return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "split",
                       "a path, a stem and a non-zero maximum size are needed");
    tbx_file *in;
    tbx_status st = open_gguf(&in, path, err);
    if (st != TBX_OK) return st;
    if (in->ntensors > INT32_MAX) {
        tbx_close(in);
        return tbx_err(err, TBX_E_LIMIT, TBX_NO_OFFSET, "split.tensors.count",
                       "%zu tensors do not fit split.tensors.count (i32)", in->ntensors);
    }
    uint32_t align = file_alignment(in);
    uint64_t a = align ? align : 32;
    /* first[s] = first tensor of shard s; greedy, whole tensors */
    size_t *first = calloc(in->ntensors + 2, sizeof *first);
    if (!first) { tbx_close(in); return tbx_err_nomem(err, "split plan"); }
    uint32_t n = 1;
    uint64_t cur = 0;
    for (size_t i = 0; i < in->ntensors; i++) {
        uint64_t sz = in->tensors[i].ncomp ? in->tensors[i].comp[0].nbytes : 0, padded;
        if (!tbx_align_up_u64(sz, a, &padded)) padded = UINT64_MAX;
        if (i > 0 && (cur > max_bytes || padded > max_bytes - cur)) {
            first[n++] = i;
            cur = 0;
        }
        cur = padded > UINT64_MAX - cur ? UINT64_MAX : cur + padded;
    }
    first[n] = in->ntensors;
    if (n > TBX_GGUF_SPLIT_MAX) {
        free(first);
        tbx_close(in);
        return tbx_err(err, TBX_E_LIMIT, TBX_NO_OFFSET, "split.count",
                       "%" PRIu32 " shards do not fit split.count (u16); raise the maximum size", n);
    }
    char **names = calloc(n, sizeof *names);
    uint8_t *buf = malloc(GT_CHUNK);
    if (!names || !buf) st = tbx_err_nomem(err, "split");
    /* every shard can be written (its directory exists, an existing one only with overwrite)
     * before the first byte of any */
    for (uint32_t s = 0; st == TBX_OK && s < n; s++) {
        names[s] = shard_name(out_stem, s + 1, n);
        if (!names[s]) st = tbx_err_nomem(err, "shard name");
        else st = check_out(names[s], flags, err);
    }
    uint32_t written = 0;
    for (uint32_t s = 0; st == TBX_OK && s < n; s++) {
        tbx_writer *w = NULL;
        st = writer_for(&w, names[s], flags & TBX_WRITE_OVERWRITE, 3, align, err);
        if (st != TBX_OK) break;
        for (size_t i = 0; s == 0 && st == TBX_OK && i < in->nmeta; i++) {
            const tbx_meta_entry *m = &in->meta[i];
            if (!tbx_gguf_is_split_key_(m->key, m->key_len))
                st = tbx_writer_add_meta(w, m->key, m->key_len, m->value, err);
        }
        if (st == TBX_OK) st = add_split_keys(w, s, n, in->ntensors, err);
        if (st == TBX_OK) st = declare_tensors(in, first[s], first[s + 1], w, err);
        for (size_t i = first[s]; st == TBX_OK && i < first[s + 1]; i++)
            st = copy_data(in, i, w, i - first[s], buf, err);
        if (st == TBX_OK) st = tbx_writer_finish(w, err);
        else tbx_writer_abort(w);
        if (st == TBX_OK) written++;
    }
    if (st != TBX_OK)
        for (uint32_t s = 0; s < written; s++) unlink(names[s]);
    for (uint32_t s = 0; names && s < n; s++) free(names[s]);
    free(names);
    free(buf);
    free(first);
    tbx_close(in);
    if (st == TBX_OK && nshards) *nshards = n;
    return st;
}

/* A u64 metadata value of a shard, or fails naming the key. */
static tbx_status shard_u64(tbx_file *f, const char *path, const char *key, uint64_t *out,
                            tbx_error *err) {
    const tbx_value *v = tbx_meta_find(f, key);
    int64_t i;
    if (!v || tbx_value_get_i64(v, &i) != TBX_OK || i < 0)
        return tbx_err(err, TBX_E_FORMAT, TBX_NO_OFFSET, key,
                       "%s: missing or invalid %s (not a shard of a split set?)", path, key);
    *out = (uint64_t)i;
    return TBX_OK;
}

tbx_status tbx_gguf_merge(const char *first_shard, const char *out_path, uint32_t flags,
                          tbx_error *err) {
    tbx_error local;
    if (!err) err = &local;
    if (!first_shard || !out_path)
        return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "merge", "NULL argument");
    /* "{stem}-00001-of-NNNNN.gguf" */
    size_t len = strlen(first_shard), stem_len = 0;
    unsigned count = tbx_gguf_shard1_count_(first_shard, len, &stem_len);
    if (count == 0 || count > TBX_GGUF_SPLIT_MAX)
        return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "merge",
                       "%s: the first shard is named STEM-00001-of-NNNNN.gguf", first_shard);
    tbx_status st = check_out(out_path, flags, err); /* before opening any shard */
    if (st != TBX_OK) return st;
    char *stem = malloc(stem_len + 1);
    if (stem) {
        memcpy(stem, first_shard, stem_len);
        stem[stem_len] = 0;
    }
    tbx_file **in = calloc(count, sizeof *in);
    uint8_t *buf = malloc(GT_CHUNK);
    st = (!stem || !in || !buf) ? tbx_err_nomem(err, "merge") : TBX_OK;
    uint64_t total = 0, declared = 0;
    for (unsigned s = 0; st == TBX_OK && s < count; s++) {
        char *name = shard_name(stem, s + 1, count);
        if (!name) { st = tbx_err_nomem(err, "shard name"); break; }
        st = open_gguf(&in[s], name, err);
        uint64_t no = 0, cnt = 0, tc = 0;
        const tbx_gguf_split_key *sk = tbx_gguf_split_keys_;
        if (st == TBX_OK) st = shard_u64(in[s], name, sk[0].key, &no, err);
        if (st == TBX_OK) st = shard_u64(in[s], name, sk[1].key, &cnt, err);
        if (st == TBX_OK) st = shard_u64(in[s], name, sk[2].key, &tc, err);
        if (st == TBX_OK && (no != s || cnt != count || (s > 0 && tc != declared)))
            st = tbx_err(err, TBX_E_FORMAT, TBX_NO_OFFSET, "split.no",
                         "%s: split.no %" PRIu64 ", split.count %" PRIu64
                         ", split.tensors.count %" PRIu64 "; expected shard %u of %u", name, no,
                         cnt, tc, s, count);
        if (st == TBX_OK) {
            declared = tc;
            total += in[s]->ntensors;
        }
        free(name);
    }
    if (st == TBX_OK && total != declared)
        st = tbx_err(err, TBX_E_FORMAT, TBX_NO_OFFSET, "split.tensors.count",
                     "the shards hold %" PRIu64 " tensors, split.tensors.count says %" PRIu64,
                     total, declared);
    tbx_writer *w = NULL;
    if (st == TBX_OK)
        st = writer_for(&w, out_path, flags & TBX_WRITE_OVERWRITE, 3, file_alignment(in[0]), err);
    for (size_t i = 0; st == TBX_OK && i < in[0]->nmeta; i++) {
        const tbx_meta_entry *m = &in[0]->meta[i];
        if (!tbx_gguf_is_split_key_(m->key, m->key_len))
            st = tbx_writer_add_meta(w, m->key, m->key_len, m->value, err);
    }
    for (unsigned s = 0; st == TBX_OK && s < count; s++)
        st = declare_tensors(in[s], 0, in[s]->ntensors, w, err);
    uint64_t wi = 0;
    for (unsigned s = 0; st == TBX_OK && s < count; s++)
        for (size_t i = 0; st == TBX_OK && i < in[s]->ntensors; i++)
            st = copy_data(in[s], i, w, wi++, buf, err);
    if (w) {
        if (st == TBX_OK) st = tbx_writer_finish(w, err);
        else tbx_writer_abort(w);
    }
    for (unsigned s = 0; in && s < count; s++) tbx_close(in[s]);
    free(in);
    free(buf);
    free(stem);
    return st;
}
