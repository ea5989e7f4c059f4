/*
 * provider.c - the files of a set, found and opened by name (provider.h): the checks every
 * provider shares (names, the bound of a listing, sorting) and the local directory provider.
 *
 * The local provider is the one place where the library looks files up by name: stat follows
 * symbolic links (a link to a shard counts as the shard, a dangling one as missing), opendir
 * lists a directory without "." and "..", and the sources are opened by tbx_source_open_path,
 * which refuses FIFOs (without waiting for a writer), sockets and directories. The strings it
 * keeps (the path, its directory, the prefix of members) are made once at creation; a lookup
 * joins prefix + name on the stack, or in a buffer of the handle's allocator when the path is
 * longer than 1 KiB, whose allocation failure is TBX_E_NOMEM and never a missing file.
 */
#define _GNU_SOURCE
#define _FILE_OFFSET_BITS 64
#include "io.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

/* ------------------------------------------------------------------------------------------ */
/* Shared by every provider                                                                    */
/* ------------------------------------------------------------------------------------------ */
void tbx_namelist_free(const tbx_alloc *al, tbx_namelist *l) {
    if (!l) return;
    for (size_t i = 0; i < l->n; i++) tbx_free(al, l->names[i], strlen(l->names[i]) + 1);
    tbx_free(al, l->names, l->cap * sizeof *l->names);
    memset(l, 0, sizeof *l);
}

static tbx_status bad_name(const tbx_provider *p, const char *name, const char *why,
                           tbx_error *err) {
    char q[300];
    tbx_quote_bytes(q, sizeof q, name ? name : "", name ? strlen(name) : 0, 200);
    return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "path",
                   "\"%s\" %s: a name in the set of %s must be a relative path of plain file "
                   "names", q, why, p->path);
}

tbx_status tbx_provider_kind(const tbx_provider *p, const char *name, tbx_entry_kind *kind,
                             uint64_t *size, tbx_error *err) {
    *kind = TBX_ENTRY_MISSING;
    if (size) *size = 0;
    const char *why = tbx_provider_name_ok(name);
    if (why) return bad_name(p, name, why, err);
    uint64_t sz = 0;
    tbx_status st = p->ops->kind(p, name, kind, &sz, err);
    if (st == TBX_OK && size) *size = sz;
    return st;
}

static int name_cmp(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

tbx_status tbx_provider_list(const tbx_provider *p, const char *dir, size_t max,
                             const tbx_alloc *al, tbx_namelist *out, tbx_error *err) {
    memset(out, 0, sizeof *out);
    const char *why = dir ? tbx_provider_name_ok(dir) : NULL;
    if (why) return bad_name(p, dir, why, err);
    tbx_status st = p->ops->list(p, dir, max, al, out, err);
    if (st != TBX_OK) { tbx_namelist_free(al, out); return st; }
    for (size_t i = 0; i < out->n; i++) {
        const char *nm = out->names[i];
        if (tbx_provider_name_ok(nm) || strchr(nm, '/')) {
            char q[300];
            tbx_quote_bytes(q, sizeof q, nm, strlen(nm), 200);
            st = tbx_err(err, TBX_E_STATE, TBX_NO_OFFSET, "path",
                         "the provider of %s listed \"%s\", which is not a plain file name",
                         p->path, q);
            tbx_namelist_free(al, out);
            return st;
        }
    }
    if (out->n > max) {
        st = tbx_err(err, TBX_E_LIMIT, TBX_NO_OFFSET, "path",
                     "the provider of %s listed %zu names, more than the %zu asked for", p->path,
                     out->n, max);
        tbx_namelist_free(al, out);
        return st;
    }
    if (out->n > 1) qsort(out->names, out->n, sizeof *out->names, name_cmp);
    return TBX_OK;
}

tbx_status tbx_provider_open(const tbx_provider *p, const char *name, bool use_mmap,
                             tbx_source *s, tbx_error *err) {
    const char *why = name ? tbx_provider_name_ok(name) : NULL;
    if (why) {
        memset(s, 0, sizeof *s);
        s->fd = -1;
        s->guard = -1;
        return bad_name(p, name, why, err);
    }
    return p->ops->open(p, name, use_mmap, s, err);
}

size_t tbx_provider_show(const tbx_provider *p, const char *name, char *buf, size_t cap) {
    int k = snprintf(buf, cap, "%s%s", p->prefix, name ? name : "");
    return k < 0 ? 0 : (size_t)k;
}

char *tbx_provider_show_dup(const tbx_provider *p, const char *name, const tbx_alloc *al) {
    size_t a = strlen(p->prefix), b = name ? strlen(name) : 0;
    char *s = tbx_malloc(al, a + b + 1);
    if (!s) return NULL;
    memcpy(s, p->prefix, a);
    if (b) memcpy(s + a, name, b);
    s[a + b] = 0;
    return s;
}

void tbx_provider_free(tbx_provider *p) {
    if (p && p->ops && p->ops->free) p->ops->free(p);
}

/* ------------------------------------------------------------------------------------------ */
/* The local directory                                                                         */
/* ------------------------------------------------------------------------------------------ */
typedef struct local_prov {
    tbx_provider p;
    tbx_alloc al;
    /* path, dir, prefix are NUL-terminated strings made with al (entry points into path) */
    size_t path_cap, dir_cap, prefix_cap;
} local_prov;

static const local_prov *local_of(const tbx_provider *p) { return (const local_prov *)p; }

/* prefix + name made with the provider's allocator (strlen + 1 bytes), NULL on OOM. */
static char *local_join(const tbx_provider *p, const char *name) {
    return tbx_provider_show_dup(p, name, &local_of(p)->al);
}

static void local_strfree(const tbx_provider *p, char *s) {
    if (s) tbx_free(&local_of(p)->al, s, strlen(s) + 1);
}

/* prefix + name in buf (LOCAL_BUF bytes) when it fits, else made with the provider's
 * allocator (free with local_path_free); NULL on OOM. */
#define LOCAL_BUF 1024
static char *local_path(const tbx_provider *p, const char *name, char *buf) {
    size_t a = strlen(p->prefix), b = strlen(name);
    if (a + b >= LOCAL_BUF) return local_join(p, name);
    memcpy(buf, p->prefix, a);
    memcpy(buf + a, name, b + 1);
    return buf;
}

static void local_path_free(const tbx_provider *p, char *s, const char *buf) {
    if (s != buf) local_strfree(p, s);
}

static tbx_status local_kind(const tbx_provider *p, const char *name, tbx_entry_kind *kind,
                             uint64_t *size, tbx_error *err) {
    char buf[LOCAL_BUF];
    char *full = local_path(p, name, buf);
    if (!full) return tbx_err_nomem(err, "path");
    struct stat sb;
    int r = stat(full, &sb);
    int e = errno;
    local_path_free(p, full, buf);
    if (r != 0) {
        *kind = e == ENOENT ? TBX_ENTRY_MISSING : TBX_ENTRY_OTHER;
        return TBX_OK;
    }
    if (S_ISREG(sb.st_mode)) {
        *kind = TBX_ENTRY_FILE;
        *size = sb.st_size > 0 ? (uint64_t)sb.st_size : 0;
    } else {
        *kind = S_ISDIR(sb.st_mode) ? TBX_ENTRY_DIR : TBX_ENTRY_OTHER;
    }
    return TBX_OK;
}

static tbx_status local_list(const tbx_provider *p, const char *dir, size_t max,
                             const tbx_alloc *al, tbx_namelist *out, tbx_error *err) {
    /* the directory as messages name it: the set's own, or prefix + dir */
    char *sub = NULL;
    if (dir) {
        sub = local_join(p, dir);
        if (!sub) return tbx_err_nomem(err, "path");
    }
    const char *shown = dir ? sub : p->dir;
    DIR *d = opendir(*shown ? shown : ".");
    if (!d) {
        tbx_status st = tbx_err(err, TBX_E_IO, TBX_NO_OFFSET, "path",
                                "cannot list directory %s: %s", shown, strerror(errno));
        local_strfree(p, sub);
        return st;
    }
    struct dirent *de;
    tbx_status st = TBX_OK;
    while ((de = readdir(d)) != NULL) {
        const char *nm = de->d_name;
        if (!strcmp(nm, ".") || !strcmp(nm, "..")) continue;
        if (tbx_provider_name_ok(nm)) continue; /* a name no member can have (none locally) */
        if (!tbx_grow(al, (void **)&out->names, &out->cap, out->n + 1, sizeof *out->names)) {
            st = tbx_err_nomem(err, "directory list");
            break;
        }
        char *c = tbx_memdup0(al, nm, strlen(nm));
        if (!c) { st = tbx_err_nomem(err, "directory list"); break; }
        out->names[out->n++] = c;
        if (out->n > max) {
            st = tbx_err(err, TBX_E_LIMIT, TBX_NO_OFFSET, "path",
                         "directory %s has more than %zu entries", shown, max);
            break;
        }
    }
    closedir(d);
    local_strfree(p, sub);
    return st;
}

static tbx_status local_open(const tbx_provider *p, const char *name, bool use_mmap,
                             tbx_source *s, tbx_error *err) {
    if (!name) return tbx_source_open_path(s, p->path, use_mmap, err);
    char buf[LOCAL_BUF];
    char *full = local_path(p, name, buf);
    if (!full) {
        memset(s, 0, sizeof *s);
        s->fd = -1;
        s->guard = -1;
        return tbx_err_nomem(err, "path");
    }
    tbx_status st = tbx_source_open_path(s, full, use_mmap, err);
    local_path_free(p, full, buf);
    return st;
}

static void local_free(tbx_provider *p) {
    local_prov *lp = (local_prov *)p;
    const tbx_alloc al = lp->al;
    tbx_free(&al, (void *)(uintptr_t)p->path, lp->path_cap);
    tbx_free(&al, (void *)(uintptr_t)p->dir, lp->dir_cap);
    tbx_free(&al, (void *)(uintptr_t)p->prefix, lp->prefix_cap);
    tbx_free(&al, lp, sizeof *lp);
}

static const tbx_provider_ops local_ops = {local_kind, local_list, local_open, local_free};

tbx_status tbx_provider_local(tbx_provider **out, const tbx_alloc *al, const char *path,
                              tbx_error *err) {
    *out = NULL;
    if (!path || !*path)
        return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "path", "path is NULL or empty");
    local_prov *lp = tbx_malloc(al, sizeof *lp);
    if (!lp) return tbx_err_nomem(err, "path");
    memset(lp, 0, sizeof *lp);
    lp->al = *al;
    tbx_provider *p = &lp->p;
    p->ops = &local_ops;
    const size_t n = strlen(path);
    struct stat sb;
    p->is_dir = stat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
    char *cpath = tbx_memdup0(al, path, n);
    lp->path_cap = n + 1;
    p->path = cpath;
    /* dir: the path itself, or its part before the last '/' ("/" for a file in the root, ""
     * for one in the current directory); prefix: what a member's name follows */
    const char *slash = p->is_dir ? NULL : strrchr(path, '/');
    size_t dl = p->is_dir ? n : slash ? (size_t)(slash - path) + (slash == path) : 0;
    size_t pl = p->is_dir ? n + (path[n - 1] != '/') : slash ? (size_t)(slash - path) + 1 : 0;
    char *cdir = tbx_memdup0(al, path, dl);
    char *cpre = tbx_malloc(al, pl + 1);
    lp->dir_cap = dl + 1;
    lp->prefix_cap = pl + 1;
    p->dir = cdir;
    p->prefix = cpre;
    if (!cpath || !cdir || !cpre) {
        tbx_free(al, cpath, lp->path_cap);
        tbx_free(al, cdir, lp->dir_cap);
        tbx_free(al, cpre, lp->prefix_cap);
        tbx_free(al, lp, sizeof *lp);
        return tbx_err_nomem(err, "path");
    }
    memcpy(cpre, path, p->is_dir ? n : pl);
    if (p->is_dir && pl > n) cpre[n] = '/';
    cpre[pl] = 0;
    p->entry = p->is_dir ? NULL : cpath + (slash ? (size_t)(slash - path) + 1 : 0);
    /* the directory's base name as Go's filepath.Base gives it (trailing slashes dropped;
     * "" -> ".", only slashes -> "/") */
    size_t e = p->is_dir ? n : dl;
    if (!p->is_dir && slash) e = (size_t)(slash - path) + 1; /* "a//x": "a//" */
    while (e > 1 && cpath[e - 1] == '/') e--;
    if (e == 0) {
        p->base = ".";
        p->base_len = 1;
    } else if (e == 1 && cpath[0] == '/') {
        p->base = "/";
        p->base_len = 1;
    } else {
        size_t a = e;
        while (a && cpath[a - 1] != '/') a--;
        p->base = cpath + a;
        p->base_len = e - a;
    }
    p->ud = NULL;
    *out = p;
    return TBX_OK;
}
