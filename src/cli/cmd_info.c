/*
 * cmd_info.c - `tbx info FILE [--json] [--types] [--stats]`: what a file holds.
 *
 * Both views are renderings of the library's description of the file (tbx_file_describe: the
 * document of docs/cli.md, handed over piece by piece), so this file knows no format: --json
 * writes the pieces as they come (complete values, keys in file order; --types wraps each
 * metadata value with its type); the human summary reads them twice (once for the widths of
 * its columns, once to print): format, version and size, the files of a set, the size
 * variables, one "key (type) = value" line per metadata entry (long lists and strings cut), a
 * table of tensors (name, dtype, shape, offset, stored bytes, storage), a table of sections,
 * and the format's own member (EMBD's header and vocabulary, MCF's directory, ...) laid out
 * from its values alone.
 *
 * --stats prints the values view of stats.c instead (decoded previews, statistics, histograms).
 */
#define _GNU_SOURCE
#include "cli.h"

#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

static const cli_option info_options[] = {
    {"json", 0, NULL, "print one JSON object instead of the summary"},
    {"types", 0, NULL, "with --json: each metadata value as {\"type\": ..., \"value\": ...}"},
    {"stats", 0, NULL, "decode every tensor: preview, min/max/mean/median/std, histogram"},
    {NULL, 0, NULL, NULL},
};

/* "[2, 3]" into buf from a list of integers (truncated with "...]" when it does not fit).
 * Returns the length. */
static size_t format_shape(char *buf, size_t cap, const tbx_value *shape) {
    size_t n = 0;
    buf[n++] = '[';
    uint64_t nd = tbx_value_len(shape);
    for (uint64_t d = 0; d < nd; d++) {
        uint64_t v = 0;
        tbx_value_get_u64(tbx_value_at(shape, d), &v);
        char num[32];
        int k = snprintf(num, sizeof num, "%s%" PRIu64, d ? ", " : "", v);
        if (k < 0 || n + (size_t)k + 5 >= cap) {
            memcpy(buf + n, "...", 3);
            n += 3;
            break;
        }
        memcpy(buf + n, num, (size_t)k);
        n += (size_t)k;
    }
    buf[n++] = ']';
    buf[n] = 0;
    return n;
}

static int digits_u64(uint64_t v) {
    int n = 1;
    while (v >= 10) {
        v /= 10;
        n++;
    }
    return n;
}

static void print_pad(FILE *fp, size_t have, size_t want) {
    for (size_t k = have; k < want; k++) fputc(' ', fp);
}

/* ------------------------------------------------------------------------------------------ */
/* Reading the pieces                                                                          */
/* ------------------------------------------------------------------------------------------ */
/* Member `key` of a MAP value, NULL when absent. */
static const tbx_value *get(const tbx_value *m, const char *key) {
    uint64_t n = tbx_value_type_of(m) == TBX_V_MAP ? tbx_value_len(m) : 0;
    size_t kl = strlen(key);
    for (uint64_t i = 0; i < n; i++) {
        size_t len = 0;
        const char *k = tbx_value_key_at(m, i, &len);
        if (k && len == kl && memcmp(k, key, kl) == 0) return tbx_value_at(m, i);
    }
    return NULL;
}

static uint64_t u64_of(const tbx_value *v) {
    uint64_t u = 0;
    tbx_value_get_u64(v, &u);
    return u;
}

static uint64_t get_u64(const tbx_value *m, const char *key) { return u64_of(get(m, key)); }

/* A string member ("" when absent), with its length. */
static const char *get_str(const tbx_value *m, const char *key, size_t *len) {
    size_t n = 0;
    const char *s = tbx_value_get_str(get(m, key), &n);
    if (len) *len = s ? n : 0;
    return s ? s : "";
}

static int str_is(const tbx_value *m, const char *key, const char *want) {
    size_t n = 0;
    const char *s = get_str(m, key, &n);
    return n == strlen(want) && memcmp(s, want, n) == 0;
}

static int key_is(const tbx_describe_part *p, const char *key) {
    return p->key && p->key_len == strlen(key) && memcmp(p->key, key, p->key_len) == 0;
}

/* ------------------------------------------------------------------------------------------ */
/* JSON: the pieces as they come                                                               */
/* ------------------------------------------------------------------------------------------ */
static tbx_status json_piece(void *ud, const tbx_describe_part *p) {
    json_out *j = ud;
    switch (p->event) {
    case TBX_DESCRIBE_MEMBER:
        jout_key(j, p->key, p->key_len);
        cli_emit_value(j, p->value, NULL);
        break;
    case TBX_DESCRIBE_BEGIN:
        jout_key(j, p->key, p->key_len);
        if (p->container == TBX_V_MAP) jout_begin_object(j);
        else jout_begin_array(j);
        break;
    case TBX_DESCRIBE_ITEM:
        if (p->container == TBX_V_MAP) jout_key(j, p->key ? p->key : "", p->key_len);
        cli_emit_value(j, p->value, NULL);
        break;
    case TBX_DESCRIBE_END:
        if (p->container == TBX_V_MAP) jout_end_object(j);
        else jout_end_array(j);
        break;
    }
    return ferror(j->fp) ? TBX_E_IO : TBX_OK;
}

static int info_json(tbx_file *f, const char *path, int typed) {
    json_out j;
    jout_init(&j, stdout, 2);
    jout_begin_object(&j);
    tbx_error err;
    memset(&err, 0, sizeof err);
    tbx_status st = tbx_file_describe(f, typed ? TBX_DESCRIBE_TYPES : 0, json_piece, &j, &err);
    if (st != TBX_OK) {
        if (!ferror(stdout)) cli_report(path, st, &err);
        return CLI_FAIL;
    }
    jout_end_object(&j);
    jout_finish(&j);
    return CLI_OK;
}

/* ------------------------------------------------------------------------------------------ */
/* The human summary                                                                           */
/* ------------------------------------------------------------------------------------------ */
/* Human output: how much of a long value to show. */
#define INFO_MAX_ITEMS 16
#define INFO_MAX_BYTES 256
/* Name column width cap, so that one long name does not widen the whole table. */
#define INFO_NAME_COL_MAX 60
/* Columns of a format's table (its member given item by item) shown at most. */
#define INFO_TABLE_COLS 16
/* Formats' tables laid out per file at most (more are listed item by item). */
#define INFO_TABLES 4

/* A format's table: the keys of its first item are the columns. */
typedef struct ext_table {
    char key[64];               /* the member */
    uint64_t n;                 /* items */
    size_t ncols;
    char col[INFO_TABLE_COLS][32];   /* the keys */
    size_t w[INFO_TABLE_COLS];  /* widths (header and values) */
    unsigned char num[INFO_TABLE_COLS]; /* numbers (right-aligned), from the first item */
} ext_table;

enum { IN_NONE, IN_FILES, IN_SIZEVARS, IN_METADATA, IN_TENSORS, IN_SECTIONS, IN_FORMAT };

typedef struct human {
    FILE *fp;
    int print;                  /* 0: measuring pass, 1: printing pass */
    int in;                     /* IN_*: the member being given item by item */
    uint64_t size;              /* tbx_file_size (the document has no size) */
    /* measured in pass 1 */
    uint64_t nparts, parts_bytes, nsizevars, nmeta, ntensors, nsections;
    size_t wpart, wname, wdtype, wshape, woff, wbytes, wsec;
    uint64_t total_bytes, total_elems;
    int any_note;
    ext_table ext[INFO_TABLES];
    size_t next;
    ext_table *cur;             /* the table of the format's member being given */
} human;

/* Where a scale / zero of a quantization lives, for the short form: "tensor", "channel[1]",
 * "group[128]", "block". */
static void quant_param_short(char *buf, size_t cap, const tbx_value *p, uint64_t block) {
    if (str_is(p, "scope", "channel"))
        snprintf(buf, cap, "channel[%" PRIu64 "]", get_u64(p, "axis"));
    else if (str_is(p, "scope", "group"))
        snprintf(buf, cap, "group[%" PRIu64 "]", block);
    else
        snprintf(buf, cap, "%s", get_str(p, "scope", NULL));
}

/* The short form of a tensor's quantization: "ggml 4-bit b32/256", "linear 8-bit
 * scale:channel[0] zero:tensor"; "" when it is not quantized. */
static void quant_short(const tbx_value *q, char *buf, size_t cap) {
    buf[0] = 0;
    if (!q) return;
    uint64_t bits = get_u64(q, "bits"), block = get_u64(q, "block_size");
    uint64_t super = get_u64(q, "super_block_size");
    if (str_is(q, "method", "ggml")) {
        snprintf(buf, cap, "ggml %" PRIu64 "-bit b%" PRIu64 "%s", bits, block, super ? "/" : "");
        if (super) {
            size_t n = strlen(buf);
            snprintf(buf + n, cap - n, "%" PRIu64, super);
        }
        return;
    }
    char sc[48], zr[48];
    quant_param_short(sc, sizeof sc, get(q, "scale"), block);
    const tbx_value *z = get(q, "zero");
    quant_param_short(zr, sizeof zr, z, block);
    int has_zero = z && !str_is(z, "scope", "none");
    snprintf(buf, cap, "%s %" PRIu64 "-bit scale:%s%s%s", get_str(q, "method", NULL), bits, sc,
             has_zero ? " zero:" : "", has_zero ? zr : "");
}

/* A tensor's members, found in one walk of its object (a table of a million rows reads each
 * object once, not once per column). */
typedef struct tview {
    const tbx_value *name, *dtype, *shape, *offset, *nbytes, *unreadable, *layout, *components,
        *quant;
} tview;

static void tview_of(const tbx_value *t, tview *v) {
    static const struct { const char *key; size_t at; } keys[] = {
        {"name", offsetof(tview, name)}, {"dtype", offsetof(tview, dtype)},
        {"shape", offsetof(tview, shape)}, {"offset", offsetof(tview, offset)},
        {"nbytes", offsetof(tview, nbytes)}, {"unreadable", offsetof(tview, unreadable)},
        {"layout", offsetof(tview, layout)}, {"components", offsetof(tview, components)},
        {"quant", offsetof(tview, quant)}};
    memset(v, 0, sizeof *v);
    uint64_t n = tbx_value_len(t);
    for (uint64_t i = 0; i < n; i++) {
        size_t kl = 0;
        const char *k = tbx_value_key_at(t, i, &kl);
        for (size_t j = 0; k && j < sizeof keys / sizeof keys[0]; j++)
            if (kl == strlen(keys[j].key) && memcmp(k, keys[j].key, kl) == 0) {
                *(const tbx_value **)((char *)v + keys[j].at) = tbx_value_at(t, i);
                break;
            }
    }
}

/* Elements of a shape (the model checked that the product fits). */
static uint64_t shape_elems(const tbx_value *sh) {
    uint64_t ne = 1;
    for (uint64_t d = 0; d < tbx_value_len(sh); d++) ne *= u64_of(tbx_value_at(sh, d));
    return ne;
}

/* Short note on how a tensor is stored when that is not plain dense raw bytes ("" if it is):
 * no data, unreadable, layout, quantization (short form), the encoding. */
static void storage_note(const tview *t, char *buf, size_t cap) {
    buf[0] = 0;
    const tbx_value *comps = t->components;
    if (!comps && u64_of(t->nbytes) == 0 && shape_elems(t->shape) > 0) {
        /* a plain object of values but no bytes: the tensor has no data (OINF) */
        snprintf(buf, cap, "no data");
        return;
    }
    if (t->unreadable) { /* tbx validate and every read say why */
        snprintf(buf, cap, "unreadable (see tbx validate)");
        return;
    }
    if (!comps && !t->quant) return; /* plain: one raw dense component */
    size_t n = 0;
    size_t ll = 0;
    const char *layout = tbx_value_get_str(t->layout, &ll);
    if (layout && !(ll == 5 && memcmp(layout, "dense", 5) == 0)) {
        int k = snprintf(buf, cap, "%.*s", (int)ll, layout);
        if (k > 0) n = (size_t)k < cap ? (size_t)k : cap - 1;
    }
    char qs[160];
    quant_short(t->quant, qs, sizeof qs);
    if (qs[0]) {
        int k = snprintf(buf + n, cap - n, "%s%s", n ? ", " : "", qs);
        if (k > 0) n = n + (size_t)k < cap ? n + (size_t)k : cap - 1;
    }
    for (uint64_t c = 0; c < tbx_value_len(comps); c++) {
        const tbx_value *ci = tbx_value_at(comps, c);
        if (!str_is(ci, "encoding", "raw")) {
            snprintf(buf + n, cap - n, "%s%s", n ? ", " : "", get_str(ci, "encoding", NULL));
            break;
        }
    }
}

/* A value written for people (cut lists and strings, bare non-finite floats). */
static void human_value(FILE *fp, const tbx_value *v) {
    json_out j;
    jout_init(&j, fp, 0);
    j.human = 1;
    cli_value_style st = {0, INFO_MAX_ITEMS, INFO_MAX_BYTES};
    cli_emit_value(&j, v, &st);
}

/* Columns a table cell takes: a string escaped without quotes, anything else as
 * human_value writes it. */
static size_t cell_width(const tbx_value *v) {
    size_t n = 0;
    const char *s = tbx_value_get_str(v, &n);
    if (s && tbx_value_type_of(v) == TBX_V_STRING)
        return jout_escaped_width_upto(s, n, INFO_NAME_COL_MAX);
    char tmp[96];
    FILE *m = fmemopen(tmp, sizeof tmp, "w");
    if (!m) return 8;
    human_value(m, v);
    long w = ftell(m);
    fclose(m);
    return w > 0 ? (size_t)w : 1;
}

/* A cell: strings left-aligned (not padded in the last column), the rest right-aligned. */
static void print_cell(FILE *fp, const tbx_value *v, size_t width, int last) {
    size_t n = 0;
    const char *s = tbx_value_get_str(v, &n);
    if (s && tbx_value_type_of(v) == TBX_V_STRING) {
        jout_write_escaped(fp, s, n);
        if (!last) print_pad(fp, jout_escaped_width(s, n), width);
        return;
    }
    print_pad(fp, cell_width(v), width);
    human_value(fp, v);
}

/* A format's member given whole: its entries, one per line, nested maps indented. */
static void print_tree(FILE *fp, const tbx_value *v, int level) {
    uint64_t n = tbx_value_len(v);
    for (uint64_t i = 0; i < n && !ferror(fp); i++) {
        size_t kl = 0;
        const char *k = tbx_value_key_at(v, i, &kl);
        const tbx_value *x = tbx_value_at(v, i);
        for (int l = 0; l < level; l++) fputs("  ", fp);
        jout_write_escaped(fp, k ? k : "", k ? kl : 0);
        fputc(':', fp);
        if (tbx_value_type_of(x) == TBX_V_MAP) {
            fputc('\n', fp);
            print_tree(fp, x, level + 1);
        } else {
            fputc(' ', fp);
            human_value(fp, x);
            fputc('\n', fp);
        }
    }
}

/* "key:" padded to the column of the summary's values. */
static void print_label(FILE *fp, const char *key, size_t len) {
    jout_write_escaped(fp, key, len);
    fputc(':', fp);
    size_t w = jout_escaped_width(key, len) + 1;
    print_pad(fp, w, 10);
    fputc(' ', fp);
}

static ext_table *ext_find(human *h, const char *key, size_t len) {
    for (size_t i = 0; i < h->next; i++)
        if (strlen(h->ext[i].key) == len && memcmp(h->ext[i].key, key, len) == 0)
            return &h->ext[i];
    if (h->print || h->next == INFO_TABLES || len >= sizeof h->ext[0].key) return NULL;
    ext_table *t = &h->ext[h->next++];
    memset(t, 0, sizeof *t);
    memcpy(t->key, key, len);
    return t;
}

/* One tensor: measured, or printed as a row of the table. */
static void human_tensor(human *h, const tbx_value *t) {
    FILE *fp = h->fp;
    tview tv;
    tview_of(t, &tv);
    size_t nlen = 0, dlen = 0;
    const char *name = tbx_value_get_str(tv.name, &nlen);
    const char *dtype = tbx_value_get_str(tv.dtype, &dlen);
    if (!name) name = "", nlen = 0;
    if (!dtype) dtype = "", dlen = 0;
    const tbx_value *sh = tv.shape;
    char shape[2048], note[256];
    size_t sl = format_shape(shape, sizeof shape, sh);
    uint64_t off = u64_of(tv.offset), nbytes = u64_of(tv.nbytes);
    storage_note(&tv, note, sizeof note);
    if (!h->print) {
        h->ntensors++;
        size_t w = jout_escaped_width_upto(name, nlen, INFO_NAME_COL_MAX);
        if (w > h->wname) h->wname = w;
        if (dlen > h->wdtype) h->wdtype = dlen;
        if (sl > h->wshape) h->wshape = sl;
        if ((size_t)digits_u64(off) > h->woff) h->woff = (size_t)digits_u64(off);
        if ((size_t)digits_u64(nbytes) > h->wbytes) h->wbytes = (size_t)digits_u64(nbytes);
        h->total_bytes += nbytes;
        h->total_elems += shape_elems(sh);
        if (note[0]) h->any_note = 1;
        return;
    }
    fputs("  ", fp);
    jout_write_escaped(fp, name, nlen);
    print_pad(fp, jout_escaped_width_upto(name, nlen, h->wname), h->wname);
    fprintf(fp, "  %-*s  ", (int)h->wdtype, dtype);
    fputs(shape, fp);
    print_pad(fp, sl, h->wshape);
    fprintf(fp, "  %*" PRIu64 "  %*" PRIu64, (int)h->woff, off, (int)h->wbytes, nbytes);
    if (h->any_note && note[0]) fprintf(fp, "  %s", note);
    fputc('\n', fp);
}

/* One item of a format's table: measured, or printed as a row (a MAP item under the columns
 * its first item named; anything else on a line of its own). */
static void human_format_item(human *h, const tbx_value *v) {
    ext_table *t = h->cur;
    FILE *fp = h->fp;
    if (!h->print) {
        if (!t) return;
        if (t->n++ == 0 && tbx_value_type_of(v) == TBX_V_MAP) {
            uint64_t n = tbx_value_len(v);
            for (uint64_t i = 0; i < n && t->ncols < INFO_TABLE_COLS; i++) {
                size_t kl = 0;
                const char *k = tbx_value_key_at(v, i, &kl);
                if (!k || kl >= sizeof t->col[0]) continue;
                memcpy(t->col[t->ncols], k, kl);
                t->col[t->ncols][kl] = 0;
                tbx_value_type vt = tbx_value_type_of(tbx_value_at(v, i));
                t->num[t->ncols] = vt >= TBX_V_U8 && vt <= TBX_V_F64;
                t->w[t->ncols++] = kl;
            }
        }
        for (size_t c = 0; c < t->ncols; c++) {
            const tbx_value *x = get(v, t->col[c]);
            size_t w = x ? cell_width(x) : 0;
            if (w > t->w[c]) t->w[c] = w;
        }
        return;
    }
    fputs("  ", fp);
    if (!t || !t->ncols || tbx_value_type_of(v) != TBX_V_MAP) {
        human_value(fp, v);
    } else {
        for (size_t c = 0; c < t->ncols; c++) {
            const tbx_value *x = get(v, t->col[c]);
            int last = c + 1 == t->ncols;
            if (c) fputs("  ", fp);
            if (x) print_cell(fp, x, t->w[c], last);
            else if (!last) print_pad(fp, 0, t->w[c]);
        }
    }
    fputc('\n', fp);
}

static void human_begin(human *h, const tbx_describe_part *p) {
    FILE *fp = h->fp;
    h->cur = NULL;
    h->in = key_is(p, "files")      ? IN_FILES
            : key_is(p, "sizevars") ? IN_SIZEVARS
            : key_is(p, "metadata") ? IN_METADATA
            : key_is(p, "tensors")  ? IN_TENSORS
            : key_is(p, "sections") ? IN_SECTIONS
                                    : IN_FORMAT;
    if (h->in == IN_FORMAT) h->cur = ext_find(h, p->key, p->key_len);
    if (!h->print) return;
    switch (h->in) {
    case IN_FILES:
        if (h->wpart > INFO_NAME_COL_MAX) h->wpart = INFO_NAME_COL_MAX;
        fprintf(fp, "files:     %" PRIu64 " (%" PRIu64 " bytes in all)\n", h->nparts,
                h->parts_bytes);
        break;
    case IN_SIZEVARS:
        if (h->nsizevars > 0) fprintf(fp, "sizevars:  %" PRIu64 "\n", h->nsizevars);
        break;
    case IN_METADATA:
        fprintf(fp, "metadata:  %" PRIu64 " %s\n", h->nmeta, h->nmeta == 1 ? "entry" : "entries");
        break;
    case IN_TENSORS:
        if (h->wname > INFO_NAME_COL_MAX) h->wname = INFO_NAME_COL_MAX;
        fprintf(fp, "tensors:   %" PRIu64, h->ntensors);
        if (h->ntensors > 0)
            fprintf(fp, " (%" PRIu64 " elements, %" PRIu64 " bytes of data)", h->total_elems,
                    h->total_bytes);
        fputc('\n', fp);
        if (h->ntensors > 0)
            fprintf(fp, "  %-*s  %-*s  %-*s  %*s  %*s%s\n", (int)h->wname, "NAME", (int)h->wdtype,
                    "DTYPE", (int)h->wshape, "SHAPE", (int)h->woff, "OFFSET", (int)h->wbytes,
                    "NBYTES", h->any_note ? "  STORAGE" : "");
        break;
    case IN_SECTIONS:
        if (h->wsec > INFO_NAME_COL_MAX) h->wsec = INFO_NAME_COL_MAX;
        fprintf(fp, "sections:  %" PRIu64 "\n", h->nsections);
        fprintf(fp, "  %-*s  %10s  %12s  %12s\n", (int)h->wsec, "NAME", "TYPE", "OFFSET", "SIZE");
        break;
    default: { /* a format's table: "key:  N", then its column names */
        ext_table *t = h->cur;
        print_label(fp, p->key, p->key_len);
        if (t) fprintf(fp, "%" PRIu64, t->n);
        fputc('\n', fp);
        if (t && t->ncols && t->n) {
            fputs("  ", fp);
            for (size_t c = 0; c < t->ncols; c++) {
                size_t kl = strlen(t->col[c]);
                if (c) fputs("  ", fp);
                if (t->num[c]) print_pad(fp, kl, t->w[c]); /* over right-aligned numbers */
                for (const char *k = t->col[c]; *k; k++)
                    fputc(*k >= 'a' && *k <= 'z' ? *k - 32 : *k, fp);
                if (!t->num[c] && c + 1 < t->ncols) print_pad(fp, kl, t->w[c]);
            }
            fputc('\n', fp);
        }
        break;
    }
    }
}

static void human_item(human *h, const tbx_describe_part *p) {
    FILE *fp = h->fp;
    const tbx_value *v = p->value;
    switch (h->in) {
    case IN_FILES: {
        size_t pl = 0;
        const char *pp = tbx_value_get_str(get(v, "path"), &pl);
        uint64_t psize = get_u64(v, "size");
        if (!h->print) {
            size_t w = pp ? jout_escaped_width(pp, pl) : 10;
            if (w > h->wpart) h->wpart = w;
            h->parts_bytes += psize;
            h->nparts++;
            return;
        }
        fputs("  ", fp);
        if (pp) jout_write_escaped(fp, pp, pl);
        else fputs("(unnamed)", fp);
        print_pad(fp, pp ? jout_escaped_width(pp, pl) : 9, h->wpart);
        fprintf(fp, "  %12" PRIu64 "\n", psize);
        break;
    }
    case IN_SIZEVARS:
        if (!h->print) {
            h->nsizevars++;
            return;
        }
        fputs("  ", fp);
        jout_write_escaped(fp, p->key, p->key_len);
        fprintf(fp, " := %" PRIu64 "\n", u64_of(v));
        break;
    case IN_METADATA:
        if (!h->print) {
            h->nmeta++;
            return;
        }
        fputs("  ", fp);
        jout_write_escaped(fp, p->key, p->key_len);
        fputs(" (", fp);
        if (v) cli_describe_type(fp, v);
        else fputs("?", fp);
        fputs(") = ", fp);
        human_value(fp, v);
        fputc('\n', fp);
        break;
    case IN_TENSORS: human_tensor(h, v); break;
    case IN_SECTIONS: {
        size_t nl = 0;
        const char *name = get_str(v, "name", &nl);
        if (!h->print) {
            size_t w = jout_escaped_width(name, nl);
            if (w > h->wsec) h->wsec = w;
            h->nsections++;
            return;
        }
        fputs("  ", fp);
        jout_write_escaped(fp, name, nl);
        print_pad(fp, jout_escaped_width(name, nl), h->wsec);
        fprintf(fp, "  %10" PRIu64 "  %12" PRIu64 "  %12" PRIu64 "\n", get_u64(v, "type"),
                get_u64(v, "offset"), get_u64(v, "size"));
        break;
    }
    default: human_format_item(h, v); break;
    }
}

static tbx_status human_piece(void *ud, const tbx_describe_part *p) {
    human *h = ud;
    FILE *fp = h->fp;
    switch (p->event) {
    case TBX_DESCRIBE_MEMBER:
        if (!h->print) break;
        if (key_is(p, "format")) {
            size_t n = 0;
            const char *s = tbx_value_get_str(p->value, &n);
            fputs("format:    ", fp);
            jout_write_escaped(fp, s ? s : "", s ? n : 0);
            fputc('\n', fp);
        } else if (key_is(p, "version")) {
            char sz[32];
            fprintf(fp, "version:   %" PRIu64 "\n", u64_of(p->value));
            fprintf(fp, "size:      %" PRIu64 " bytes", h->size);
            if (h->size >= 1024) fprintf(fp, " (%s)", cli_format_size(sz, h->size));
            fputc('\n', fp);
        } else if (tbx_value_type_of(p->value) == TBX_V_MAP) { /* a format's member, whole */
            jout_write_escaped(fp, p->key, p->key_len);
            fputs(":\n", fp);
            print_tree(fp, p->value, 1);
        } else {
            print_label(fp, p->key, p->key_len);
            human_value(fp, p->value);
            fputc('\n', fp);
        }
        break;
    case TBX_DESCRIBE_BEGIN: human_begin(h, p); break;
    case TBX_DESCRIBE_ITEM: human_item(h, p); break;
    case TBX_DESCRIBE_END:
        h->in = IN_NONE;
        h->cur = NULL;
        break;
    }
    return ferror(fp) ? TBX_E_IO : TBX_OK;
}

static int info_human(tbx_file *f, const char *path) {
    human h;
    memset(&h, 0, sizeof h);
    h.fp = stdout;
    h.size = tbx_file_size(f);
    h.wpart = 4;
    h.wname = 4;
    h.wdtype = 5;
    h.wshape = 5;
    h.woff = 6;
    h.wbytes = 6;
    h.wsec = 4;
    tbx_error err;
    memset(&err, 0, sizeof err);
    /* pass 1: counts, widths and totals; pass 2: print */
    tbx_status st = tbx_file_describe(f, 0, human_piece, &h, &err);
    if (st == TBX_OK) {
        fputs("file:      ", stdout);
        jout_write_escaped(stdout, path, strlen(path));
        fputc('\n', stdout);
        h.print = 1;
        st = tbx_file_describe(f, 0, human_piece, &h, &err);
    }
    if (st != TBX_OK) {
        if (!ferror(stdout)) cli_report(path, st, &err);
        return CLI_FAIL;
    }
    return CLI_OK;
}

static int info_run(const cli_args *a) {
    const char *path = a->pos[0];
    if (cli_flag(a, "stats") && cli_flag(a, "json"))
        return cli_usage_error(a, "--stats prints a text view; it cannot be combined with --json");
    tbx_file *f = cli_open(a, path);
    if (!f) return CLI_FAIL;
    int rc = CLI_OK;
    if (cli_flag(a, "stats"))
        rc = cli_info_stats(f, path);
    else if (cli_flag(a, "json"))
        rc = info_json(f, path, cli_flag(a, "types"));
    else
        rc = info_human(f, path);
    tbx_close(f);
    return rc;
}

const cli_command cli_cmd_info = {
    "info",
    "FILE [--json] [--types] [--stats]",
    "Show the format, metadata, tensors and sections of a file",
    "The summary cuts long lists and strings; --json gives every value in full:\n"
    "  {\"format\", \"version\", \"metadata\": {key: value}, \"tensors\": [{\"name\", \"dtype\",\n"
    "   \"shape\", \"offset\", \"nbytes\", \"quant\"?}], \"sections\": [{\"name\", \"type\", \"offset\",\n"
    "   \"size\"}]}; \"quant\" describes a quantized tensor the same way for every format.\n"
    "Strings keep invalid UTF-8 bytes as \\udcXX escapes. See docs/cli.md for the full schema.\n"
    "--stats decodes every tensor (in bounded chunks) and prints, per tensor, the first and last\n"
    "5 values, nbytes, min, max, mean, median and std and a histogram; for OINF files the size\n"
    "variables (NAME := VALUE) come first. Metadata is shown with explicit types.\n",
    info_options,
    1,
    1,
    info_run,
    NULL,
};
