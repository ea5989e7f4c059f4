/*
 * provider.h - where the files of a set come from (src/io/provider.c): a model kept as several
 * files (a Hugging Face directory, a sharded safetensors index, a GGUF split set) is opened
 * through a provider handed down with the handle (tbx_file.prov), never by path. A driver asks
 * the provider for the names in the set's directory (bounded), what a name is (a regular file,
 * a directory, missing) and its size, and to open a name as a tbx_source (pread or guarded
 * mmap, or any other kind a provider serves); it never calls stat, open or opendir itself.
 *
 * A provider is a record and a table of operations. The local directory (tbx_provider_local,
 * made by tbx_open_path) is the first; another (HTTP range requests, S3, hf://) fills the same
 * table and is handed to the façade's tbx_open_provider_ (src/api/open.c): no driver changes.
 *
 * Names. The path given to the open names either the set's directory itself (is_dir, entry
 * NULL) or a file in it (entry: its base name). Every other name a driver hands to the
 * provider is relative to that directory: one or more plain components joined by '/' (a side
 * file at depth 1: "1_Pooling/config.json"), none of them empty, "." or "..", none longer than
 * 255 bytes, the whole at most 4095 bytes, never starting with '/'. Any other name is refused
 * with TBX_E_INVALID_ARG (tbx_provider_name_ok says why): a set can never reach outside its
 * directory. A '\\' is an ordinary byte of a name here (it is one in a POSIX file name, and a
 * remote provider encodes names in its own addresses); a driver that reads names from a file
 * refuses more with its own message (a Hugging Face index: no '\\', a plain file name).
 *
 * Errors. TBX_E_NOMEM is always an allocation failure and never stands for a missing file;
 * a missing name is TBX_ENTRY_MISSING (tbx_provider_kind) or the open's TBX_E_IO naming it.
 */
#ifndef TBX_PROVIDER_H
#define TBX_PROVIDER_H

#include "model.h"

/* What a name of the set is (tbx_provider_kind). Symbolic links are followed. */
typedef enum tbx_entry_kind {
    TBX_ENTRY_MISSING = 0, /* no such name (a dangling link included) */
    TBX_ENTRY_FILE,        /* a regular file */
    TBX_ENTRY_DIR,         /* a directory */
    TBX_ENTRY_OTHER        /* a FIFO, socket or device, or a name that cannot be examined */
} tbx_entry_kind;

/* Names listed by tbx_provider_list: each NUL-terminated, made with the caller's allocator;
 * free with tbx_namelist_free. */
typedef struct tbx_namelist {
    char **names;
    size_t n, cap;
} tbx_namelist;
void tbx_namelist_free(const tbx_alloc *al, tbx_namelist *l);

/* The operations of a provider. `name` is a checked relative name (see the top), or NULL for
 * open: the path given itself. Every operation may run while other handles use other
 * providers; one provider is used by one handle (one thread at a time). */
typedef struct tbx_provider_ops {
    /* What `name` is, and its size in bytes (files; 0 otherwise). A missing name is TBX_OK
     * with TBX_ENTRY_MISSING; an error status only for what is not an answer (allocation,
     * a remote store that does not reply). */
    tbx_status (*kind)(const tbx_provider *p, const char *name, tbx_entry_kind *kind,
                       uint64_t *size, tbx_error *err);
    /* Every name in directory `dir` (NULL: the set's directory; else a relative name of a
     * directory), without "." and "..", in any order, names the provider would refuse left
     * out; made with `al`. More than `max` names: TBX_E_LIMIT naming the directory. */
    tbx_status (*list)(const tbx_provider *p, const char *dir, size_t max, const tbx_alloc *al,
                       tbx_namelist *out, tbx_error *err);
    /* Opens `name` (NULL: the path given) into *s: any source kind; a file that is not a
     * regular file (or a block device, for the path given) fails. The source is closed by
     * tbx_source_close, before the provider is freed. */
    tbx_status (*open)(const tbx_provider *p, const char *name, bool use_mmap, tbx_source *s,
                       tbx_error *err);
    /* Frees the provider and everything it holds (tbx_provider_free). */
    void (*free)(tbx_provider *p);
} tbx_provider_ops;

struct tbx_provider {
    const tbx_provider_ops *ops;
    /* The location given (tbx_open_path's path; a URL for a remote provider), NUL-terminated. */
    const char *path;
    /* The set's directory as messages name it ("directory %s ...": for the local provider the
     * path given when it is a directory, else its part before the last '/', "" when none). */
    const char *dir;
    /* A member's name as messages and part names show it is prefix + name (local: the path
     * up to and with its last '/' when it names a file; the directory and a '/' otherwise). */
    const char *prefix;
    /* The base name of the file the path names, NULL when it names the directory (is_dir). */
    const char *entry;
    bool is_dir;
    /* The base name of the set's directory, as Go's filepath.Base gives it ("." for the current
     * directory, "/" for the root): what MCF's writer records as mantle's pack does. */
    const char *base;
    size_t base_len;
    void *ud; /* the provider's own state */
};

/* The local directory: `path` as tbx_open_path got it (non-empty). One stat (links followed)
 * decides whether it names a directory; nothing else is touched until asked. The provider
 * allocates with a copy of *al. TBX_E_NOMEM only. */
tbx_status tbx_provider_local(tbx_provider **out, const tbx_alloc *al, const char *path,
                              tbx_error *err);
/* Calls ops->free (accepts NULL). */
void tbx_provider_free(tbx_provider *p);

/* NULL when `name` is a relative name of the set (see the top), else why not ("is empty",
 * "is an absolute path", "leads out of the set's directory (\"..\")", ...). */
const char *tbx_provider_name_ok(const char *name);

/* The operations, with the name checked (TBX_E_INVALID_ARG naming it) and, for list, the
 * bound checked again and the names sorted (strcmp). */
tbx_status tbx_provider_kind(const tbx_provider *p, const char *name, tbx_entry_kind *kind,
                             uint64_t *size, tbx_error *err);
tbx_status tbx_provider_list(const tbx_provider *p, const char *dir, size_t max,
                             const tbx_alloc *al, tbx_namelist *out, tbx_error *err);
tbx_status tbx_provider_open(const tbx_provider *p, const char *name, bool use_mmap,
                             tbx_source *s, tbx_error *err);

/* prefix + name as messages show it, written into buf (cap bytes, truncated, always
 * NUL-terminated when cap > 0); returns the length of the whole (snprintf's rule). */
size_t tbx_provider_show(const tbx_provider *p, const char *name, char *buf, size_t cap);
/* The same made with `al` (free strlen + 1 bytes), NULL when the allocation fails. */
char *tbx_provider_show_dup(const tbx_provider *p, const char *name, const tbx_alloc *al);

#endif /* TBX_PROVIDER_H */
