/*
 * cmd_gguf.c - `tbx gguf set|del|split|merge`: GGUF-specific editing tools.
 *
 *   tbx gguf set FILE KEY=VALUE [--type T]   set (or add) one metadata value
 *   tbx gguf del FILE KEY                    remove one metadata key
 *   tbx gguf split IN OUTSTEM --max-size S   write OUTSTEM-00001-of-0000N.gguf ...
 *   tbx gguf merge FIRST_SHARD OUT           join a shard set into one file
 *
 * Front ends to the GGUF tools of tensorbox/gguf.h (experimental API; src/formats/gguf_tools.c).
 * `set` and `del` are the only commands that replace their input: in place when the header size does not
 * change, else by writing a complete new file next to it and renaming it over FILE. Both lock
 * FILE (flock) for the whole edit, so concurrent edits take turns and none is lost; a symbolic
 * link FILE edits the file it points to.
 *
 * set's VALUE is parsed as --type says; without --type, an existing key keeps its type, and a
 * new key (or one holding an array) gets: true/false -> bool, an integer -> u32 when it fits
 * (negative: i32), else u64 / i64, a number with a fraction or exponent -> f32, else string
 * (the types llama.cpp's own keys use).
 */
#define _GNU_SOURCE
#include "cli.h"

#define TBX_EXPERIMENTAL /* the GGUF tools: experimental API, as for any user */
#include <tensorbox/gguf.h>

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------------------------ */
/* set / del                                                                                   */
/* ------------------------------------------------------------------------------------------ */
static const cli_option set_options[] = {
    {"type", 0, "T", "u8 i8 u16 i16 u32 i32 u64 i64 f32 f64 bool string (default: infer)"},
    {NULL, 0, NULL, NULL},
};

static const struct { const char *name; tbx_value_type t; } set_types[] = {
    {"u8", TBX_V_U8}, {"i8", TBX_V_I8}, {"u16", TBX_V_U16}, {"i16", TBX_V_I16},
    {"u32", TBX_V_U32}, {"i32", TBX_V_I32}, {"u64", TBX_V_U64}, {"i64", TBX_V_I64},
    {"f32", TBX_V_F32}, {"f64", TBX_V_F64}, {"bool", TBX_V_BOOL}, {"string", TBX_V_STRING},
    {NULL, TBX_V_NULL},
};

static int parse_i64(const char *s, int64_t *out) {
    if (!*s || isspace((unsigned char)*s)) return -1;
    errno = 0;
    char *end;
    long long v = strtoll(s, &end, 10);
    if (errno || *end) return -1;
    *out = v;
    return 0;
}

static int parse_u64(const char *s, uint64_t *out) {
    if (!*s || *s == '-' || isspace((unsigned char)*s)) return -1;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end) return -1;
    *out = v;
    return 0;
}

static int parse_f64(const char *s, double *out) {
    if (!*s || isspace((unsigned char)*s)) return -1;
    errno = 0;
    char *end;
    double v = strtod(s, &end);
    if (*end || (errno == ERANGE && isinf(v))) return -1;
    *out = v;
    return 0;
}

/* The inferred type of a new key's VALUE. */
static tbx_value_type infer_type(const char *s) {
    int64_t i;
    uint64_t u;
    double d;
    if (strcmp(s, "true") == 0 || strcmp(s, "false") == 0) return TBX_V_BOOL;
    if (parse_u64(s, &u) == 0) return u <= UINT32_MAX ? TBX_V_U32 : TBX_V_U64;
    if (parse_i64(s, &i) == 0) return i >= INT32_MIN ? TBX_V_I32 : TBX_V_I64;
    if (strpbrk(s, "0123456789") && parse_f64(s, &d) == 0) return TBX_V_F32;
    return TBX_V_STRING;
}

/* Builds a value of type t from text; NULL with *why set when the text does not fit. */
static tbx_value *make_value(tbx_value_type t, const char *s, const char **why) {
    int64_t i;
    uint64_t u;
    double d;
    *why = NULL;
    switch (t) {
    case TBX_V_BOOL:
        if (strcmp(s, "true") == 0 || strcmp(s, "1") == 0) return tbx_value_new_bool(1);
        if (strcmp(s, "false") == 0 || strcmp(s, "0") == 0) return tbx_value_new_bool(0);
        *why = "not a bool (true, false, 1, 0)";
        return NULL;
    case TBX_V_U8: case TBX_V_U16: case TBX_V_U32: case TBX_V_U64: {
        uint64_t max = t == TBX_V_U8 ? UINT8_MAX : t == TBX_V_U16 ? UINT16_MAX
                     : t == TBX_V_U32 ? UINT32_MAX : UINT64_MAX;
        if (parse_u64(s, &u) != 0 || u > max) { *why = "not an unsigned integer of that size"; return NULL; }
        return tbx_value_new_uint(t, u);
    }
    case TBX_V_I8: case TBX_V_I16: case TBX_V_I32: case TBX_V_I64: {
        int64_t lo = t == TBX_V_I8 ? INT8_MIN : t == TBX_V_I16 ? INT16_MIN
                   : t == TBX_V_I32 ? INT32_MIN : INT64_MIN;
        int64_t hi = t == TBX_V_I8 ? INT8_MAX : t == TBX_V_I16 ? INT16_MAX
                   : t == TBX_V_I32 ? INT32_MAX : INT64_MAX;
        if (parse_i64(s, &i) != 0 || i < lo || i > hi) { *why = "not an integer of that size"; return NULL; }
        return tbx_value_new_int(t, i);
    }
    case TBX_V_F32: case TBX_V_F64:
        if (parse_f64(s, &d) != 0) { *why = "not a number"; return NULL; }
        return tbx_value_new_float(t, d);
    case TBX_V_STRING: return tbx_value_new_string(s, strlen(s));
    default: *why = "GGUF cannot store this type"; return NULL;
    }
}

static int set_run(const cli_args *a) {
    const char *path = a->pos[0], *kv = a->pos[1];
    const char *eq = strchr(kv, '=');
    if (!eq || eq == kv) return cli_usage_error(a, "expected KEY=VALUE, got '%s'", kv);
    size_t klen = (size_t)(eq - kv);
    const char *text = eq + 1;
    char *key = strndup(kv, klen);
    if (!key) { cli_error("out of memory"); return CLI_FAIL; }

    tbx_value_type t = TBX_V_NULL;
    const char *ts = cli_value(a, "type");
    if (ts) {
        for (int k = 0; set_types[k].name; k++)
            if (strcmp(ts, set_types[k].name) == 0) t = set_types[k].t;
        if (t == TBX_V_NULL) {
            free(key);
            return cli_usage_error(a, "--type: '%s' is not one of u8 i8 u16 i16 u32 i32 u64 i64 "
                                      "f32 f64 bool string", ts);
        }
    } else {
        tbx_file *f = cli_open(a, path);
        if (!f) { free(key); return CLI_FAIL; }
        const tbx_value *old = tbx_meta_find(f, key);
        tbx_value_type ot = old ? tbx_value_type_of(old) : TBX_V_NULL;
        for (int k = 0; set_types[k].name; k++)
            if (set_types[k].t == ot) t = ot;
        tbx_close(f);
        if (t == TBX_V_NULL) t = infer_type(text);
    }
    const char *why;
    tbx_value *v = make_value(t, text, &why);
    if (!v) {
        free(key);
        if (why) return cli_usage_error(a, "value '%s' for a %s: %s", text, tbx_value_type_name(t), why);
        cli_error("out of memory");
        return CLI_FAIL;
    }
    tbx_error err;
    memset(&err, 0, sizeof err);
    int in_place = 0;
    tbx_status st = tbx_gguf_set_meta(path, key, klen, v, &in_place, &err);
    tbx_value_free(v);
    if (st != TBX_OK) {
        cli_report(path, st, &err);
        free(key);
        return CLI_FAIL;
    }
    printf("%s: %s = %s (%s, %s)\n", path, key, text, tbx_value_type_name(t),
           in_place ? "in place" : "rewritten");
    free(key);
    return CLI_OK;
}

static int del_run(const cli_args *a) {
    const char *path = a->pos[0], *key = a->pos[1];
    tbx_error err;
    memset(&err, 0, sizeof err);
    tbx_status st = tbx_gguf_del_meta(path, key, strlen(key), &err);
    if (st != TBX_OK) {
        cli_report(path, st, &err);
        return CLI_FAIL;
    }
    printf("%s: deleted %s (rewritten)\n", path, key);
    return CLI_OK;
}

/* ------------------------------------------------------------------------------------------ */
/* split / merge                                                                               */
/* ------------------------------------------------------------------------------------------ */
static const cli_option split_options[] = {
    {"max-size", 0, "S", "tensor data per shard: bytes, or with K M G (x1000) / KiB MiB GiB"},
    {"force", 'f', NULL, "replace existing shard files"},
    {NULL, 0, NULL, NULL},
};

static const cli_option merge_options[] = {
    {"force", 'f', NULL, "replace OUT when it exists"},
    {NULL, 0, NULL, NULL},
};

/* "300M", "2G", "1.5GiB", "4096" -> bytes; -1 when not a size. */
static int parse_size(const char *s, uint64_t *out) {
    errno = 0;
    char *end;
    if (!*s || !isdigit((unsigned char)*s)) return -1;
    double v = strtod(s, &end);
    if (errno) return -1;
    static const struct { const char *sfx; double mul; } units[] = {
        {"", 1}, {"B", 1}, {"K", 1e3}, {"M", 1e6}, {"G", 1e9}, {"T", 1e12},
        {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12},
        {"KiB", 1024.0}, {"MiB", 1048576.0}, {"GiB", 1073741824.0}, {"TiB", 1099511627776.0},
    };
    for (size_t k = 0; k < sizeof units / sizeof units[0]; k++) {
        if (strcmp(end, units[k].sfx) == 0) {
            double b = v * units[k].mul;
            if (!(b >= 1) || b >= 1.8e19) return -1;
            *out = (uint64_t)b;
            return 0;
        }
    }
    return -1;
}

static int split_run(const cli_args *a) {
    const char *ms = cli_value(a, "max-size");
    uint64_t max;
    if (!ms) return cli_usage_error(a, "--max-size S is required");
    if (parse_size(ms, &max) != 0)
        return cli_usage_error(a, "--max-size: '%s' is not a size (e.g. 4096, 500M, 2G, 1GiB)", ms);
    tbx_error err;
    memset(&err, 0, sizeof err);
    uint32_t n = 0;
    tbx_status st = tbx_gguf_split(a->pos[0], max, a->pos[1],
                                   cli_flag(a, "force") ? TBX_WRITE_OVERWRITE : 0, &n, &err);
    if (st != TBX_OK) {
        cli_report(NULL, st, &err);
        if (st == TBX_E_EXISTS && !cli_flag(a, "force"))
            fprintf(stderr, "tbx: use --force to replace existing shards\n");
        return CLI_FAIL;
    }
    for (uint32_t s = 1; s <= n; s++) printf("%s-%05" PRIu32 "-of-%05" PRIu32 ".gguf\n", a->pos[1], s, n);
    return CLI_OK;
}

static int merge_run(const cli_args *a) {
    tbx_error err;
    memset(&err, 0, sizeof err);
    tbx_status st = tbx_gguf_merge(a->pos[0], a->pos[1],
                                   cli_flag(a, "force") ? TBX_WRITE_OVERWRITE : 0, &err);
    if (st != TBX_OK) {
        cli_report(NULL, st, &err);
        if (st == TBX_E_EXISTS && !cli_flag(a, "force") && cli_force_would_help(a->pos[1]))
            fprintf(stderr, "tbx: use --force to replace %s\n", a->pos[1]);
        return CLI_FAIL;
    }
    return CLI_OK;
}

static const cli_command cmd_set = {
    "set", "FILE KEY=VALUE [--type T]", "Set (or add) one metadata value of a GGUF file, in place",
    "Overwrites the value in place when its size does not change (same-size scalar, string of\n"
    "the same length); otherwise writes a complete new file next to FILE and renames it over\n"
    "FILE. Tensor data stays byte-identical. FILE is locked (flock) during the edit: concurrent\n"
    "edits of one file take turns. A symbolic link FILE edits its target and stays a link.\n"
    "Without --type an existing key keeps its type; a\n"
    "new key gets bool (true/false), u32 (i32 when negative; u64/i64 when too large), f32 (a\n"
    "number with a fraction or exponent) or string.\n",
    set_options, 2, 2, set_run, NULL,
};

static const cli_command cmd_del = {
    "del", "FILE KEY", "Remove one metadata key of a GGUF file (rewrites FILE)",
    "Writes a complete new file next to FILE without KEY and renames it over FILE; tensor data\n"
    "stays byte-identical. A missing KEY is an error (exit 1).\n",
    NULL, 2, 2, del_run, NULL,
};

static const cli_command cmd_split = {
    "split", "IN OUTSTEM --max-size S [--force]",
    "Split a GGUF file into OUTSTEM-00001-of-0000N.gguf shards",
    "Whole tensors, in order; a shard's tensor data (padded) stays within S unless one tensor\n"
    "is larger. The first shard has all metadata; every shard has split.no (u16, from 0),\n"
    "split.count (u16) and split.tensors.count (i32). Prints the shard names.\n",
    split_options, 2, 2, split_run, NULL,
};

static const cli_command cmd_merge = {
    "merge", "FIRST_SHARD OUT [--force]", "Merge a GGUF shard set back into one file",
    "FIRST_SHARD is STEM-00001-of-0000N.gguf; the other shards are found by name and checked\n"
    "(split.no, split.count, split.tensors.count). OUT has the first shard's metadata without\n"
    "split.* keys and every tensor in order, bytes unchanged.\n",
    merge_options, 2, 2, merge_run, NULL,
};

static const cli_command *const gguf_subcommands[] = {&cmd_set, &cmd_del, &cmd_split, &cmd_merge,
                                                      NULL};

const cli_command cli_cmd_gguf = {
    "gguf", "COMMAND ...", "GGUF tools: set/del metadata, split/merge shards",
    NULL, NULL, 0, -1, NULL, gguf_subcommands,
};
