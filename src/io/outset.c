/*
 * outset.c - an output that is a set of files beside each other (a sharded safetensors model
 * and its index, a GGUF split set): each file is written under a temporary name
 * "<dir>/.<base>.tbx-set.XXXXXX" (by the atomic writer, or tbx_outset_write), and the commit
 * renames them all to their names, the set's claim (the index, a split set's first file) last,
 * so a reader that opens the set through its claim finds every file. An abort, or a commit that
 * fails half way, removes every file of the set it wrote, renamed or not. Until its rename each
 * temporary name is in the table of temporary files (output.c), so a signal handler's
 * tbx_remove_temp_files removes the shards already written too. A process killed outright
 * (SIGKILL) leaves its ".tbx-set." files: nothing can tell them from a live writer's, so they
 * are not swept (docs/reliability.md).
 */
#define _GNU_SOURCE
#define _FILE_OFFSET_BITS 64
#include "output_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#define SET_TAG ".tbx-set."

void tbx_outset_init(tbx_outset *s, const tbx_alloc *al, unsigned flags) {
    memset(s, 0, sizeof *s);
    s->al = al;
    s->flags = flags;
}

static void free_entries(tbx_outset *s) {
    for (size_t i = 0; i < s->n; i++) {
        tbx_tmp_unregister_(s->e[i].slot);
        tbx_free(s->al, s->e[i].dst, strlen(s->e[i].dst) + 1);
        tbx_free(s->al, s->e[i].tmp, strlen(s->e[i].tmp) + 1);
    }
    tbx_free(s->al, s->e, s->cap * sizeof *s->e);
    s->e = NULL;
    s->n = s->cap = 0;
}

tbx_status tbx_outset_add(tbx_outset *s, const char *dst, const char **tmp, tbx_error *err) {
    struct stat sb;
    if (!(s->flags & TBX_OUT_OVERWRITE) && lstat(dst, &sb) == 0)
        return tbx_err(err, TBX_E_EXISTS, TBX_NO_OFFSET, "path", "%s already exists", dst);
    if ((s->flags & TBX_OUT_OVERWRITE) && lstat(dst, &sb) == 0 && !S_ISREG(sb.st_mode))
        return tbx_err(err, TBX_E_EXISTS, TBX_NO_OFFSET, "path", "%s exists and is not a "
                       "regular file", dst);
    if (!tbx_grow(s->al, (void **)&s->e, &s->cap, s->n + 1, sizeof *s->e))
        return tbx_err_nomem(err, "output set");
    char *dir = tbx_path_dir_(s->al, dst);
    if (!dir) return tbx_err_nomem(err, "output set");
    const char *base = tbx_path_base_(dst);
    char suf[TMP_SUFFIX_LEN + 1];
    tbx_out_tmp_suffix_(suf);
    char buf[4096];
    const int len = snprintf(buf, sizeof buf, "%s/.%s%s%s", dir, base, SET_TAG, suf);
    tbx_free(s->al, dir, strlen(dir) + 1);
    if (len < 0 || (size_t)len >= sizeof buf)
        return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "path", "output path too long");
    char *tt = tbx_memdup0(s->al, buf, (size_t)len);
    char *d = tbx_memdup0(s->al, dst, strlen(dst));
    if (!tt || !d) {
        if (tt) tbx_free(s->al, tt, (size_t)len + 1);
        if (d) tbx_free(s->al, d, strlen(d) + 1);
        return tbx_err_nomem(err, "output set");
    }
    s->e[s->n].dst = d;
    s->e[s->n].tmp = tt;
    s->e[s->n].renamed = false;
    s->e[s->n].slot = tbx_tmp_register_(tt);
    *tmp = tt;
    s->n++;
    return TBX_OK;
}

tbx_status tbx_outset_write(tbx_outset *s, const char *dst, const void *data, size_t n,
                            tbx_error *err) {
    const char *tmp;
    tbx_status st = tbx_outset_add(s, dst, &tmp, err);
    if (st != TBX_OK) return st;
    tbx_out o;
    memset(&o, 0, sizeof o);
    st = tbx_out_open(&o, s->al, tmp, s->flags & TBX_OUT_NO_SYNC, err);
    if (st == TBX_OK && n) st = tbx_out_pwrite(&o, 0, data, n, err);
    if (st == TBX_OK) st = tbx_out_commit(&o, n, err);
    tbx_out_abort(&o);
    return st;
}

tbx_status tbx_outset_commit(tbx_outset *s, size_t claim, tbx_error *err) {
    tbx_status st = TBX_OK;
    for (size_t k = 0; st == TBX_OK && k <= s->n; k++) {
        size_t i = k < s->n ? k : claim;
        if (k < s->n && k == claim) continue;
        if (i >= s->n) break;
        if (rename(s->e[i].tmp, s->e[i].dst) != 0) {
            st = tbx_err(err, TBX_E_IO, TBX_NO_OFFSET, "path", "cannot rename %s to %s: %s",
                         s->e[i].tmp, s->e[i].dst, strerror(errno));
        } else {
            tbx_tmp_unregister_(s->e[i].slot); /* the name is no longer a temporary file */
            s->e[i].slot = -1;
            s->e[i].renamed = true;
        }
    }
    if (st == TBX_OK && !(s->flags & TBX_OUT_NO_SYNC) && s->n) {
        char *dir = tbx_path_dir_(s->al, s->e[0].dst);
        int fd = dir ? open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
        if (fd >= 0) {
            fsync(fd);
            close(fd);
        }
        if (dir) tbx_free(s->al, dir, strlen(dir) + 1);
    }
    if (st != TBX_OK) return st; /* the abort removes what was renamed too */
    free_entries(s);
    return TBX_OK;
}

void tbx_outset_abort(tbx_outset *s) {
    if (!s || !s->e) return;
    for (size_t i = 0; i < s->n; i++) {
        tbx_tmp_unregister_(s->e[i].slot); /* before the unlink: never a name freed for reuse */
        s->e[i].slot = -1;
        unlink(s->e[i].renamed ? s->e[i].dst : s->e[i].tmp);
    }
    free_entries(s);
}
