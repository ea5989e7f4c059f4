/*
 * cmd_diff.c - `tbx diff A B [--json] [--map auto|none] [--tolerance X] [--threads N]`: what
 * differs between two models, in any formats (files, directories, sets).
 *
 * The library compares (tbx_diff: the document of tensorbox.h); this file prints it. --json
 * prints the document as it is; the human view is
 *
 *   a: PATH (gguf, 291 tensors)
 *   b: PATH (gguf, 291 tensors)
 *   metadata: 1 changed, 0 added, 0 removed
 *     ~ general.file_type: u32 1 -> u32 15
 *   tensors: 291 compared (37 identical), 0 added, 0 removed; 254 dtype changes
 *   tensor                      a -> b          elements   max-abs      rmse      nmse    cosine
 *   blk.0.ffn_down.weight       f16 -> q4_K     11272192   0.0421    0.00152   0.00291  0.998546
 *   ...                                                      (sorted by nmse, worst first)
 *   layer  tensors  elements   max-abs      rmse      nmse    cosine  worst
 *   ...
 *   result: different
 *
 * Exit status: 0 identical (with --tolerance: every tensor within it), 1 different, 2 an error
 * (usage, an input that cannot be opened or read).
 */
#define _GNU_SOURCE
#include "cli.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static const cli_option diff_options[] = {
    {"json", 0, NULL, "print the report as one JSON object"},
    {"map", 0, "auto|none", "pair a Hugging Face directory with a GGUF through the name map "
                            "(auto, the default) or pair tensors by name (none)"},
    {"tolerance", 0, "X", "equal enough: nmse <= X; or nmse=X, max-abs=Y, both comma-separated"},
    {"threads", 0, "N", "worker threads (default: TBX_THREADS, else the CPUs, at most 8)"},
    {NULL, 0, NULL, NULL},
};

/* ---- reading the document (public value API) ---- */
static const tbx_value *get(const tbx_value *m, const char *key) {
    for (uint64_t i = 0, n = tbx_value_len(m); m && tbx_value_type_of(m) == TBX_V_MAP && i < n;
         i++) {
        size_t kl = 0;
        const char *k = tbx_value_key_at(m, i, &kl);
        if (k && kl == strlen(key) && memcmp(k, key, kl) == 0) return tbx_value_at(m, i);
    }
    return NULL;
}
static const char *gets(const tbx_value *m, const char *key) {
    const char *s = tbx_value_get_str(get(m, key), NULL);
    return s ? s : "";
}
static uint64_t getu(const tbx_value *m, const char *key) {
    uint64_t u = 0;
    tbx_value_get_u64(get(m, key), &u);
    return u;
}
static int getb(const tbx_value *m, const char *key) { return getu(m, key) != 0; }
static double getf(const tbx_value *m, const char *key) {
    const tbx_value *v = get(m, key);
    double d = NAN;
    if (v && tbx_value_type_of(v) != TBX_V_NULL) tbx_value_get_f64(v, &d);
    return d;
}

static void num(char *b, size_t cap, double v) {
    if (isnan(v)) snprintf(b, cap, "-");
    else snprintf(b, cap, "%.6g", v);
}

static void print_value(const tbx_value *v) {
    json_out j;
    jout_init(&j, stdout, 0);
    j.human = 1;
    cli_value_style st = {0, 8, 120};
    cli_emit_value(&j, v, &st);
}

static void print_shape(const tbx_value *s) {
    fputc('[', stdout);
    for (uint64_t i = 0, n = tbx_value_len(s); i < n; i++) {
        uint64_t u = 0;
        tbx_value_get_u64(tbx_value_at(s, i), &u);
        printf("%s%" PRIu64, i ? ", " : "", u);
    }
    fputc(']', stdout);
}

static void print_file(const char *label, const tbx_value *f) {
    printf("%s: ", label);
    const char *p = gets(f, "path");
    jout_write_escaped(stdout, p, strlen(p));
    printf(" (%s, %" PRIu64 " tensors)\n", gets(f, "format"), getu(f, "tensors"));
}

static void print_names(const tbx_value *list, char mark) {
    for (uint64_t i = 0, n = tbx_value_len(list); i < n; i++) {
        const tbx_value *x = tbx_value_at(list, i);
        printf("  %c ", mark);
        if (tbx_value_type_of(x) == TBX_V_STRING) {
            size_t l = 0;
            const char *s = tbx_value_get_str(x, &l);
            jout_write_escaped(stdout, s, l);
            fputc('\n', stdout);
            continue;
        }
        const char *s = gets(x, "name");
        jout_write_escaped(stdout, s, strlen(s));
        if (get(x, "dtype")) {
            printf("  %s ", gets(x, "dtype"));
            print_shape(get(x, "shape"));
        }
        fputc('\n', stdout);
    }
}

static void print_human(const tbx_value *d) {
    print_file("a", get(d, "a"));
    print_file("b", get(d, "b"));
    const char *map = gets(d, "map");
    if (strcmp(map, "none")) printf("map: %s (%s name map)\n", map, gets(d, "architecture"));

    const tbx_value *md = get(d, "metadata");
    if (getb(md, "compared")) {
        const tbx_value *ch = get(md, "changed"), *ad = get(md, "added"), *rm = get(md, "removed");
        printf("metadata: %" PRIu64 " changed, %" PRIu64 " added, %" PRIu64 " removed\n",
               tbx_value_len(ch), tbx_value_len(ad), tbx_value_len(rm));
        for (uint64_t i = 0; i < tbx_value_len(ch); i++) {
            const tbx_value *x = tbx_value_at(ch, i);
            const char *k = gets(x, "key");
            fputs("  ~ ", stdout);
            jout_write_escaped(stdout, k, strlen(k));
            printf(": %s ", gets(x, "a_type"));
            print_value(get(x, "a"));
            printf(" -> %s ", gets(x, "b_type"));
            print_value(get(x, "b"));
            if (get(x, "first_difference"))
                printf(" (first difference at item %" PRIu64 ")", getu(x, "first_difference"));
            fputc('\n', stdout);
        }
        for (int pass = 0; pass < 2; pass++) {
            const tbx_value *l = pass ? rm : ad;
            for (uint64_t i = 0; i < tbx_value_len(l); i++) {
                const tbx_value *x = tbx_value_at(l, i);
                const char *k = gets(x, "key");
                printf("  %c ", pass ? '-' : '+');
                jout_write_escaped(stdout, k, strlen(k));
                printf(": %s ", gets(x, "type"));
                print_value(get(x, "value"));
                fputc('\n', stdout);
            }
        }
    } else {
        printf("metadata: not compared (%s)\n", gets(md, "why"));
    }
    const tbx_value *sec = get(d, "sections");
    if (sec && (tbx_value_len(get(sec, "changed")) || tbx_value_len(get(sec, "added")) ||
                tbx_value_len(get(sec, "removed")))) {
        printf("sections: %" PRIu64 " changed, %" PRIu64 " added, %" PRIu64 " removed\n",
               tbx_value_len(get(sec, "changed")), tbx_value_len(get(sec, "added")),
               tbx_value_len(get(sec, "removed")));
        print_names(get(sec, "changed"), '~');
        print_names(get(sec, "added"), '+');
        print_names(get(sec, "removed"), '-');
    }

    const tbx_value *sm = get(d, "summary"), *t = get(d, "tensors");
    printf("tensors: %" PRIu64 " compared (%" PRIu64 " identical), %" PRIu64 " added, %" PRIu64
           " removed, %" PRIu64 " not compared; %" PRIu64 " dtype changes, %" PRIu64
           " shape changes\n",
           getu(sm, "tensors_compared"), getu(sm, "tensors_identical"), getu(sm, "tensors_added"),
           getu(sm, "tensors_removed"), getu(sm, "tensors_not_compared"),
           getu(sm, "dtype_changes"), getu(sm, "shape_changes"));
    print_names(get(t, "added"), '+');
    print_names(get(t, "removed"), '-');
    const tbx_value *nc = get(t, "not_compared");
    for (uint64_t i = 0; i < tbx_value_len(nc); i++) {
        const tbx_value *x = tbx_value_at(nc, i);
        printf("  ! %s: %s\n", gets(x, "name"), gets(x, "why"));
    }
    const tbx_value *dv = get(t, "derived");
    if (tbx_value_len(dv))
        printf("  (%" PRIu64 " GGUF tensors the conversion generates from config.json, values "
               "not compared)\n", tbx_value_len(dv));
    const tbx_value *sk = get(t, "skipped");
    if (tbx_value_len(sk))
        printf("  (%" PRIu64 " Hugging Face tensors the conversion leaves out, not compared)\n",
               tbx_value_len(sk));

    const tbx_value *cmp = get(t, "compared");
    const uint64_t n = tbx_value_len(cmp);
    int w = 6;
    for (uint64_t i = 0; i < n; i++) {
        size_t l = strlen(gets(tbx_value_at(cmp, i), "name"));
        if ((int)l > w) w = l > 56 ? 56 : (int)l;
    }
    char b1[32], b2[32], b3[32], b4[32], dt[48];
    if (n) {
        printf("\n%-*s  %-18s %12s %12s %12s %12s %10s\n", w, "tensor", "a -> b", "elements",
               "max-abs", "rmse", "nmse", "cosine");
        for (uint64_t i = 0; i < n; i++) {
            const tbx_value *x = tbx_value_at(cmp, i);
            num(b1, sizeof b1, getf(x, "max_abs"));
            num(b2, sizeof b2, getf(x, "rmse"));
            num(b3, sizeof b3, getf(x, "nmse"));
            num(b4, sizeof b4, getf(x, "cosine"));
            if (strcmp(gets(x, "a_dtype"), gets(x, "b_dtype")))
                snprintf(dt, sizeof dt, "%s -> %s", gets(x, "a_dtype"), gets(x, "b_dtype"));
            else
                snprintf(dt, sizeof dt, "%s", gets(x, "a_dtype"));
            printf("%-*s  %-18s %12" PRIu64 " %12s %12s %12s %10s%s%s%s\n", w, gets(x, "name"),
                   dt, getu(x, "elements"), b1, b2, b3, b4,
                   getb(x, "identical") ? "  identical" : "",
                   getu(x, "nonfinite_mismatch") ? "  non-finite values differ" : "",
                   get(x, "within_tolerance") && !getb(x, "identical")
                       ? (getb(x, "within_tolerance") ? "  within" : "  beyond tolerance") : "");
        }
    }
    const tbx_value *ly = get(d, "layers");
    if (tbx_value_len(ly)) {
        printf("\n%-6s %8s %12s %12s %12s %12s %10s  %s\n", "layer", "tensors", "elements",
               "max-abs", "rmse", "nmse", "cosine", "worst");
        for (uint64_t i = 0; i < tbx_value_len(ly); i++) {
            const tbx_value *x = tbx_value_at(ly, i);
            char lb[24];
            if (tbx_value_type_of(get(x, "layer")) == TBX_V_NULL) snprintf(lb, sizeof lb, "-");
            else snprintf(lb, sizeof lb, "%" PRIu64, getu(x, "layer"));
            num(b1, sizeof b1, getf(x, "max_abs"));
            num(b2, sizeof b2, getf(x, "rmse"));
            num(b3, sizeof b3, getf(x, "nmse"));
            num(b4, sizeof b4, getf(x, "cosine"));
            printf("%-6s %8" PRIu64 " %12" PRIu64 " %12s %12s %12s %10s  %s\n", lb,
                   getu(x, "tensors"), getu(x, "elements"), b1, b2, b3, b4, gets(x, "worst"));
        }
    }
    num(b1, sizeof b1, getf(sm, "max_abs"));
    num(b3, sizeof b3, getf(sm, "nmse"));
    num(b4, sizeof b4, getf(sm, "cosine"));
    printf("\noverall: nmse %s, max-abs %s, cosine %s over %" PRIu64 " values\n", b3, b1, b4,
           getu(sm, "elements"));
    const tbx_value *wt = get(d, "within_tolerance");
    if (tbx_value_type_of(wt) != TBX_V_NULL && wt)
        printf("result: %s\n", getb(d, "identical") ? "identical"
                               : getb(d, "within_tolerance") ? "within tolerance"
                                                             : "beyond tolerance");
    else
        printf("result: %s\n", getb(d, "identical") ? "identical" : "different");
}

/* "X", "nmse=X", "max-abs=Y", comma-separated: 0, or -1 with a message */
static int parse_tolerance(const char *s, tbx_diff_options *o, char *msg, size_t cap) {
    char buf[256];
    snprintf(buf, sizeof buf, "%s", s);
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        double *dst = &o->tol_nmse;
        char *eq = strchr(tok, '=');
        if (eq) {
            *eq = 0;
            if (!strcmp(tok, "nmse")) dst = &o->tol_nmse;
            else if (!strcmp(tok, "max-abs") || !strcmp(tok, "max_abs")) dst = &o->tol_max_abs;
            else {
                snprintf(msg, cap, "--tolerance: unknown bound '%s' (nmse, max-abs)", tok);
                return -1;
            }
            tok = eq + 1;
        }
        char *end = NULL;
        errno = 0;
        double v = strtod(tok, &end);
        if (!*tok || *end || errno || !(v >= 0) || !isfinite(v)) {
            snprintf(msg, cap, "--tolerance: '%s' is not a finite number >= 0", tok);
            return -1;
        }
        *dst = v;
    }
    if (o->tol_nmse < 0 && o->tol_max_abs < 0) {
        snprintf(msg, cap, "--tolerance: no bound given");
        return -1;
    }
    return 0;
}

static int diff_run(const cli_args *a) {
    tbx_diff_options o;
    tbx_diff_options_init(&o);
    const char *map = cli_value(a, "map");
    if (map) {
        if (!strcmp(map, "auto")) o.map = TBX_DIFF_MAP_AUTO;
        else if (!strcmp(map, "none")) o.map = TBX_DIFF_MAP_NONE;
        else return cli_usage_error(a, "--map: '%s' (auto or none)", map);
    }
    const char *tol = cli_value(a, "tolerance");
    char msg[160];
    if (tol && parse_tolerance(tol, &o, msg, sizeof msg)) return cli_usage_error(a, "%s", msg);
    const char *th = cli_value(a, "threads");
    if (th) {
        char *end = NULL;
        errno = 0;
        unsigned long v = strtoul(th, &end, 10);
        if (!*th || *end || errno || v < 1 || v > 64)
            return cli_usage_error(a, "--threads: '%s' (1 to 64)", th);
        o.threads = (uint32_t)v;
    }
    tbx_file *fa = cli_open(a, a->pos[0]);
    if (!fa) return CLI_USAGE;
    tbx_file *fb = cli_open(a, a->pos[1]);
    if (!fb) {
        tbx_close(fa);
        return CLI_USAGE;
    }
    tbx_value *doc = NULL;
    tbx_error err;
    memset(&err, 0, sizeof err);
    cli_progress prog;
    if (cli_progress_init(&prog, a, "comparing")) {
        o.progress = cli_progress_cb;
        o.progress_ud = &prog;
    }
    tbx_status st = tbx_diff(fa, fb, &o, &doc, &err);
    cli_progress_end(&prog, st == TBX_OK);
    tbx_close(fa);
    tbx_close(fb);
    if (st != TBX_OK) {
        cli_report(NULL, st, &err);
        return CLI_USAGE;
    }
    if (cli_flag(a, "json")) {
        json_out j;
        jout_init(&j, stdout, 3); /* one line per tensor, layer, metadata change */
        cli_emit_value(&j, doc, NULL);
        jout_finish(&j);
    } else {
        print_human(doc);
    }
    int rc = getb(doc, "differs") ? CLI_FAIL : CLI_OK;
    tbx_value_free(doc);
    if (cli_finish_stdout() != CLI_OK) return CLI_USAGE;
    return rc;
}

const cli_command cli_cmd_diff = {
    "diff",
    "A B [--json] [--map auto|none] [--tolerance X] [--threads N]",
    "Compare two models: metadata, tensors, and the error of every common tensor's values",
    "A and B are any inputs tbx opens (files of any format, GGUF split sets, Hugging Face\n"
    "directories). Reports metadata added, removed and changed; tensors added and removed;\n"
    "dtype and shape changes; and, for every tensor in both, the error of B's values against\n"
    "A's, both decoded to f32 (quantized types dequantized) and compared in double: max-abs,\n"
    "rmse, nmse = sum (b-a)^2 / sum a^2, cosine; sorted by nmse, worst first, then one line per\n"
    "layer (the number in the tensor names).\n"
    "--map auto (the default) pairs a Hugging Face directory with a GGUF file (either order)\n"
    "through the architecture's HF -> GGUF name map, with llama's q/k row order, split and\n"
    "stacked tensors, scales, offsets and dropped rows undone; metadata are then the GGUF's\n"
    "{arch}.* keys against those the conversion derives from config.json, and tensors the\n"
    "conversion generates (rope_freqs) are listed as derived. --map none pairs tensors by\n"
    "name.\n"
    "--tolerance X: B is equal enough when every tensor is in both with nmse <= X (or\n"
    "max-abs=Y, or both: nmse=X,max-abs=Y); metadata and dtypes are then reported but do not\n"
    "count. --json prints the report as one object (the schema: docs/cli.md).\n"
    "Exit status: 0 identical (or within --tolerance), 1 different, 2 an error.\n",
    diff_options,
    2,
    2,
    diff_run,
    NULL,
};
