/*
 * cmd_convert.c - `tbx convert IN OUT [--to FORMAT] [options]`: rewrite a file in a format.
 *
 * A thin front end to tbx_convert. The output format comes from --to or from OUT's extension.
 * Conversion is lossless unless an option allows a lossy step, one option per kind of loss:
 * --stringify-meta, --drop-meta, --drop-sections, --cast DTYPE, --quant TYPE, --dequantize,
 * --requantize, --drop-unreadable. What became of each tensor is printed from the library's
 * report of it (tbx_convert_options.on_tensor), never by reading OUT back. OUT is checked
 * (tbx_writer_check) before IN is opened. --force allows
 * replacing an existing OUT when it is a regular file (the library still never replaces the
 * input, nor a FIFO, device, socket or directory); a symbolic link OUT is followed. While converting, a single
 * updating progress line (percent, MB/s) goes to stderr when stderr is a terminal.
 */
#define _GNU_SOURCE
#include "cli.h"
#define TBX_EXPERIMENTAL /* tbx_gguf_hf_arch_*: the Hugging Face architectures */
#include <tensorbox/gguf.h>

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static const cli_option convert_options[] = {
    {"to", 0, "FORMAT", "output format (default: from OUT's extension)"},
    {"force", 'f', NULL, "replace OUT when it exists"},
    {"stringify-meta", 0, NULL, "lossy: store metadata the target cannot type as strings"},
    {"drop-meta", 0, NULL, "lossy: drop metadata the target cannot store"},
    {"drop-sections", 0, NULL, "lossy: drop sections the target cannot store"},
    {"cast", 0, "DTYPE", "lossy: convert every float tensor to DTYPE (the cast types are "
                         "listed below), quantized ones decoded first"},
    {"quant", 0, "TYPE", "lossy: quantize 2-D float tensors to TYPE (each format's types are "
                         "listed below; MCF's int8/int4: mantle's runtime cannot load them); "
                         "to GGUF, also one of llama-quantize's presets (listed below): for a "
                         "GGUF model of an architecture llama.cpp knows (or a Hugging Face "
                         "directory), the file llama-quantize writes; to MCF from a Hugging "
                         "Face directory, llama-quantize's choice in MCF's families"},
    {"pure", 0, NULL, "with a preset: every quantized tensor gets the preset's default type "
                      "(llama-quantize --pure)"},
    {"tensor-type", 0, "PATTERN=TYPE...", "with a preset: tensors whose name the regular "
                                          "expression matches get TYPE (repeatable; the first "
                                          "match wins; llama-quantize --tensor-type)"},
    {"output-tensor-type", 0, "TYPE", "with a preset: the type of output.weight"},
    {"token-embedding-type", 0, "TYPE", "with a preset: the type of token_embd.weight"},
    {"dry-run", 0, NULL, "with a preset: print every tensor's type and the sizes, write "
                         "nothing"},
    {"keep-split", 0, NULL, "with a preset and a GGUF split set in: as many files out, "
                            "OUT-0000I-of-0000N.gguf (llama-quantize --keep-split)"},
    {"tensor-type-file", 0, "FILE...", "with a preset: --tensor-type rules read from FILE, "
                                       "PATTERN=TYPE separated by white space "
                                       "(llama-quantize --tensor-type-file)"},
    {"leave-output-tensor", 0, NULL, "with a preset: output.weight keeps its type "
                                     "(llama-quantize --leave-output-tensor)"},
    {"override-kv", 0, "KEY=TYPE:VALUE...", "with a preset: set metadata KEY of the output as "
                                            "llama-quantize --override-kv does (TYPE int: a "
                                            "u32 of |VALUE|, float: f32, bool: true|false, "
                                            "str: at most 127 bytes)"},
    {"quant-method", 0, "METHOD", "MCF --quant: best (default, lower error) or mantle (mantle's "
                                  "quantizer byte for byte); GGUF --quant: ggml (default, "
                                  "ggml's bytes) or search (q2_k .. q6_k: tensorbox's own, "
                                  "lower error, printed next to ggml's); -O quant_method="
                                  "METHOD"},
    {"quant-clip", 0, "MIN,MAX", "MCF --quant: clamp every tensor to [MIN, MAX] (default: each "
                                 "tensor's +-max|value|); -O quant_clip_min=MIN -O "
                                 "quant_clip_max=MAX"},
    {"imatrix", 0, "FILE", "GGUF --quant: weight the quantization by an importance matrix "
                           "(llama-imatrix's GGUF or legacy .dat), as llama-quantize --imatrix"},
    {"verbose", 'v', NULL, "one line per tensor: what became of it and why (with --quant to "
                           "MCF, or --quant-method search, also its error)"},
    {"dequantize", 0, NULL, "lossy: write every quantized tensor dequantized, as f32 (or the "
                            "--cast dtype)"},
    {"requantize", 0, NULL, "lossy: with --quant, decode tensors quantized to another type and "
                            "quantize them again (else they stop the conversion)"},
    {"strict", 0, NULL, "a tensor whose values the conversion cannot keep (beyond the type's "
                        "range, or Inf/NaN made of finite values) stops it instead of a warning"},
    {"drop-unreadable", 0, NULL, "lossy: leave out tensors the input lists but cannot read (MCF "
                                 "int8/int4 codes without their scale)"},
    {"raw", 0, NULL, "a Hugging Face model to GGUF, EMBD or MCF: no model import (tensors, "
                     "metadata and sections as they are)"},
    {"dtype", 0, "DTYPE", "a GGUF to a Hugging Face directory (OUT/): f32, f16 or bf16 for every "
                          "tensor (default: the GGUF's unquantized tensors' dtype, bf16 when "
                          "all are quantized)"},
    {"max-shard-size", 0, "SIZE", "a GGUF to a Hugging Face directory: shards above SIZE bytes "
                                  "(5GB, 500MB, 2GiB, or bytes; default 50GB as transformers' "
                                  "save_pretrained)"},
    {"weights-only", 0, NULL, "a GGUF to a Hugging Face directory: only the safetensors, every "
                              "tensor under its GGUF name"},
    {"alignment", 0, "N", "tensor data alignment in bytes (default: the format's)"},
    {"no-dedup", 0, NULL, "store every tensor's own bytes (formats that share identical "
                          "payloads: MCF)"},
    {"no-sync", 0, NULL, "do not fsync OUT (as cp: faster, but a crash may leave it partly "
                         "written)"},
    {"compress", 0, "LEVEL", "compression level, for formats that compress (default 0: raw; "
                             "the format's writer checks its range: zTensor zstd 1..22)"},
    {"digest", 0, "ALGO", "sha256 or crc32c, for formats that store digests"},
    {"format-version", 0, "N", "format version to write (default: the format's default)"},
    {"meta", 0, "KEY=VALUE...", "set a metadata entry of OUT (repeatable); a string, or typed: "
                                "KEY:TYPE=VALUE (u8..u64 i8..i64 f32 f64 bool str)"},
    {"option", 'O', "KEY=VALUE...", "an option of OUT's format (repeatable; the formats' "
                                    "options are listed below)"},
    {NULL, 0, NULL, NULL},
};

/* ------------------------------------------------------------------------------------------ */
/* Quantization report (MCF targets; a ggml K type with --quant-method search, its error next */
/* to ggml's reference on the same values): RMSE of the tensors quantized, per tensor with -v  */
/* ------------------------------------------------------------------------------------------ */
typedef struct qreport {
    tbx_file *f;
    int verbose;
    uint64_t tensors, values;
    double sse;
    /* --quant-method search (tbx_convert_report.rmse / rmse_ggml) */
    uint64_t searched, svalues;
    double ssse, ssse_ref;
} qreport;

static void qreport_search(qreport *r, const tbx_convert_report *t) {
    if (t->struct_size < offsetof(tbx_convert_report, rmse_ggml) + sizeof t->rmse_ggml ||
        isnan(t->rmse) || !t->nvalues)
        return;
    const double n = (double)t->nvalues;
    r->searched++;
    r->svalues += t->nvalues;
    r->ssse += t->rmse * t->rmse * n;
    r->ssse_ref += t->rmse_ggml * t->rmse_ggml * n;
    if (r->verbose)
        fprintf(stderr, "quantized %s: %" PRIu64 " values, RMSE %.6g (ggml's reference on the "
                "same values: %.6g)\n", t->name, t->nvalues, t->rmse, t->rmse_ggml);
}

static void qreport_tensor(qreport *r, uint64_t i, uint64_t n, double sse) {
    r->tensors++;
    r->values += n;
    r->sse += sse;
    if (!r->verbose) return;
    tbx_tensor_info ti = TBX_TENSOR_INFO_INIT;
    const char *name = tbx_tensor_info_get(r->f, i, &ti) == TBX_OK ? ti.name : "?";
    fprintf(stderr, "quantized %s: %" PRIu64 " values, RMSE %.6g\n", name, n,
            n ? sqrt(sse / (double)n) : 0.0);
}

/* ------------------------------------------------------------------------------------------ */
/* Progress line                                                                               */
/* ------------------------------------------------------------------------------------------ */
typedef struct progress {
    double start, last;
    int shown;    /* a progress line is on the screen */
    int complete; /* it shows 100% */
} progress;

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void progress_line(progress *p, uint64_t done, uint64_t total, double t) {
    double pct = total ? 100.0 * (double)done / (double)total : 100.0;
    double secs = t - p->start;
    double mbs = secs > 0 ? (double)done / 1e6 / secs : 0.0;
    fprintf(stderr, "\r\033[Kconverting: %5.1f%%  %.1f MB/s", pct, mbs);
    fflush(stderr);
    p->shown = 1;
    p->complete = done >= total;
}

/* ------------------------------------------------------------------------------------------ */
/* What the conversion did, from the library's report of each tensor (on_tensor): warnings     */
/* when they come, one line per tensor with -v, and a summary by type when done.              */
/* ------------------------------------------------------------------------------------------ */
#define SUMMARY_GROUPS 64

typedef struct sgroup {
    tbx_dtype from, to;
    tbx_convert_action action;
    char reason[160];
    uint64_t n;
} sgroup;

typedef struct summary {
    sgroup g[SUMMARY_GROUPS];
    size_t ng;
    uint64_t other;   /* tensors beyond SUMMARY_GROUPS groups */
    uint64_t warned;  /* tensors with warnings */
    int verbose;
    int strict;       /* a warning is the library's error: not printed twice */
} summary;

static const char *action_word(tbx_convert_action a) {
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

static const char *dtname(tbx_dtype dt) {
    const tbx_dtype_info *di = tbx_dtype_get(dt);
    return di ? di->name : "?";
}

/* "ACTION[ from FROM][: REASON]" */
static void describe(FILE *fp, tbx_convert_action a, tbx_dtype from, tbx_dtype to,
                     const char *reason) {
    fprintf(fp, "%s", action_word(a));
    if (from != to) fprintf(fp, " from %s", dtname(from));
    if (reason && *reason) fprintf(fp, ": %s", reason);
}

static void summary_tensor(summary *sm, const tbx_convert_report *r) {
    if (r->warnings && !sm->strict) {
        sm->warned++;
        fprintf(stderr, "tbx: warning: tensor \"%s\" (%s -> %s):", r->name, dtname(r->from),
                dtname(r->to));
        if (r->beyond)
            fprintf(stderr, " %" PRIu64 " finite value%s beyond %s's range (+-%g: no finite f16 "
                            "scale reaches %s; the largest is %g)%s", r->beyond,
                    r->beyond == 1 ? "" : "s", dtname(r->to), r->range,
                    r->beyond == 1 ? "it" : "them", r->max_abs, r->nonfinite ? ";" : "");
        if (r->nonfinite)
            fprintf(stderr, " %" PRIu64 " finite value%s came out as Inf or NaN", r->nonfinite,
                    r->nonfinite == 1 ? "" : "s");
        fputc('\n', stderr);
    }
    if (sm->verbose) {
        fprintf(stderr, "tbx: %s: %s ", r->name, dtname(r->to));
        describe(stderr, r->action, r->from, r->to, r->reason);
        fputc('\n', stderr);
    }
    for (size_t k = 0; k < sm->ng; k++) {
        sgroup *g = &sm->g[k];
        if (g->from == r->from && g->to == r->to && g->action == r->action &&
            strncmp(g->reason, r->reason, sizeof g->reason - 1) == 0) {
            g->n++;
            return;
        }
    }
    if (sm->ng == SUMMARY_GROUPS) {
        sm->other++;
        return;
    }
    sgroup *g = &sm->g[sm->ng++];
    g->from = r->from;
    g->to = r->to;
    g->action = r->action;
    snprintf(g->reason, sizeof g->reason, "%s", r->reason);
    g->n = 1;
}

/* One line per group (stderr): the output dtype, the count, what was done and why. */
static void summary_print(const summary *sm) {
    for (size_t k = 0; k < sm->ng; k++) {
        const sgroup *g = &sm->g[k];
        fprintf(stderr, "tbx: %-6s %6" PRIu64 " tensor%s  ", dtname(g->to), g->n,
                g->n == 1 ? " " : "s");
        describe(stderr, g->action, g->from, g->to, g->reason);
        fputc('\n', stderr);
    }
    if (sm->other)
        fprintf(stderr, "tbx: %" PRIu64 " more tensor%s (-v lists every tensor)\n", sm->other,
                sm->other == 1 ? "" : "s");
    if (sm->warned)
        fprintf(stderr, "tbx: %" PRIu64 " tensor%s with warnings (above; --strict makes them "
                        "errors)\n", sm->warned, sm->warned == 1 ? "" : "s");
}

/* What the library's callbacks get (progress_ud): progress first (on_progress casts to it). */
typedef struct convert_ud {
    progress prog;
    qreport rep;
    summary sum;
    /* --dry-run: one line per tensor, and the sizes before and after */
    int dry_run;
    uint64_t size_in, size_out, nelems;
} convert_ud;

static void on_tensor(void *ud, const tbx_convert_report *r) {
    convert_ud *cu = ud;
    if (cu->dry_run) {
        /* the sizes the library reports (the input's tensor, the output's dtype) */
        cu->size_in += r->size_in;
        cu->size_out += r->size_out;
        const tbx_dtype_info *fi = tbx_dtype_get(r->from);
        if (fi && fi->block_size && fi->block_bytes)
            cu->nelems += r->size_in / fi->block_bytes * fi->block_size;
        printf("%-40s %-8s -> %-8s %10.3f MiB -> %10.3f MiB  %s\n", r->name, dtname(r->from),
               dtname(r->to), (double)r->size_in / 1048576.0, (double)r->size_out / 1048576.0,
               r->reason);
        return;
    }
    summary_tensor(&cu->sum, r);
    qreport_search(&cu->rep, r);
}

static void on_quant(void *ud, uint64_t tensor, uint64_t nvalues, double sse) {
    qreport_tensor(&((convert_ud *)ud)->rep, tensor, nvalues, sse);
}

static void on_progress(void *ud, uint64_t done, uint64_t total) {
    progress *p = (progress *)ud;
    double t = now_seconds();
    if (done < total && t - p->last < 0.1) return; /* at most ten updates a second */
    p->last = t;
    progress_line(p, done, total, t);
}

/* ------------------------------------------------------------------------------------------ */
/* Arguments                                                                                   */
/* ------------------------------------------------------------------------------------------ */
/* The formats this library can write (tbx_format_caps_get: TBX_FCAP_WRITE), comma-separated. */
static void list_formats(char *buf, size_t cap) {
    size_t n = 0;
    buf[0] = 0;
    for (size_t i = 0; i < tbx_format_count(); i++) {
        tbx_format_caps c = TBX_FORMAT_CAPS_INIT;
        if (tbx_format_caps_get(tbx_format_at(i), &c) != TBX_OK || !(c.flags & TBX_FCAP_WRITE))
            continue;
        int k = snprintf(buf + n, cap - n, "%s%s", n ? ", " : "", c.name);
        if (k < 0 || (size_t)k >= cap - n) break;
        n += (size_t)k;
    }
}

/* Parses a non-negative decimal number; -1 when `s` is not one (or exceeds max). */
static int parse_uint(const char *s, uint64_t max, uint64_t *out) {
    if (!s || *s < '0' || *s > '9') return -1;
    errno = 0;
    char *end = NULL;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end || v > max) return -1;
    *out = v;
    return 0;
}

/* The quantization types `fmt` stores (tbx_dtype_quantizable, tbx_format_writes_dtype), as
 * --quant takes them (a format's own dtypes without its "<format>_" prefix), space-separated
 * into buf. Returns how many. */
static size_t quant_types(tbx_format fmt, char *buf, size_t cap) {
    const char *fname = tbx_format_name(fmt);
    size_t fl = strlen(fname), n = 0, at = 0;
    buf[0] = 0;
    for (int v = 1; v < TBX_DT_COUNT_; v++) {
        tbx_dtype dt = (tbx_dtype)v;
        if (!tbx_dtype_quantizable(dt) || !tbx_format_writes_dtype(fmt, dt)) continue;
        const char *name = tbx_dtype_get(dt)->name;
        if (strncmp(name, fname, fl) == 0 && name[fl] == '_') name += fl + 1;
        int k = snprintf(buf + at, cap - at, "%s%s", at ? " " : "", name);
        if (k < 0 || (size_t)k >= cap - at) break;
        at += (size_t)k;
        n++;
    }
    return n;
}

/* `tbx convert --help`: one line per writable format, from the driver table, then the types
 * each can be quantized to and the options of its own each declares (tbx_format_option_at). */
static void help_hf_archs(FILE *fp);
static void help_presets(FILE *fp);

void cli_convert_help_formats(FILE *fp) {
    fprintf(fp, "Formats:\n");
    int any = 0;
    for (size_t i = 0; i < tbx_format_count(); i++) {
        tbx_format_caps c = TBX_FORMAT_CAPS_INIT;
        if (tbx_format_caps_get(tbx_format_at(i), &c) != TBX_OK || !(c.flags & TBX_FCAP_WRITE))
            continue;
        fprintf(fp, "  %-12s %s", c.name,
                *c.extensions ? c.extensions : "(no extension: --to only)");
        if (*c.aliases) fprintf(fp, "  (--to also accepts: %s)", c.aliases);
        fputc('\n', fp);
        any |= tbx_format_option_at(tbx_format_at(i), 0) != NULL;
    }
    fprintf(fp, "Cast types (--cast DTYPE):\n ");
    for (int v = 1; v < TBX_DT_COUNT_; v++)
        if (tbx_dtype_castable((tbx_dtype)v)) fprintf(fp, " %s", tbx_dtype_get((tbx_dtype)v)->name);
    fputc('\n', fp);
    fprintf(fp, "Quantization types (--quant TYPE):\n");
    for (size_t i = 0; i < tbx_format_count(); i++) {
        char types[1024];
        if (!quant_types(tbx_format_at(i), types, sizeof types)) continue;
        /* wrapped under the format's name */
        const char *p = types;
        fprintf(fp, "  %-12s", tbx_format_name(tbx_format_at(i)));
        size_t col = 15;
        while (*p) {
            size_t w = strcspn(p, " ");
            if (col > 15 && col + 1 + w > 96) {
                fprintf(fp, "\n  %-12s", "");
                col = 15;
            }
            fprintf(fp, " %.*s", (int)w, p);
            col += 1 + w;
            p += w;
            while (*p == ' ') p++;
        }
        fputc('\n', fp);
    }
    if (any) fprintf(fp, "Options of a format's own (-O KEY=VALUE):\n");
    for (size_t i = 0; any && i < tbx_format_count(); i++) {
        const tbx_format_option *o;
        for (size_t k = 0; (o = tbx_format_option_at(tbx_format_at(i), k)) != NULL; k++) {
            char what[160];
            if (o->type == TBX_V_BOOL)
                snprintf(what, sizeof what, "%s=true|false", o->key);
            else if (o->type == TBX_V_U64)
                snprintf(what, sizeof what, "%s=%" PRIu64 "..%" PRIu64, o->key, o->min, o->max);
            else if (o->type == TBX_V_F64)
                snprintf(what, sizeof what, "%s=NUMBER", o->key);
            else
                snprintf(what, sizeof what, "%s=%s", o->key, o->choices ? o->choices : "");
            for (char *p = what + strlen(o->key); *p; p++)
                if (*p == ' ') *p = '|';
            fprintf(fp, "  %-12s %s\n  %-12s   %s\n", tbx_format_name(tbx_format_at(i)), what,
                    "", o->help);
        }
    }
    help_hf_archs(fp);
    help_presets(fp);
}

/* `tbx convert --help`: llama-quantize's presets (the library's table). */
static void help_presets(FILE *fp) {
    fprintf(fp, "llama-quantize's presets (--quant PRESET, a GGUF output; case-insensitive):\n ");
    size_t col = 1;
    const char *pn;
    for (size_t i = 0; (pn = tbx_quant_preset_at(i, NULL, NULL, NULL)) != NULL; i++) {
        if (col + 1 + strlen(pn) > 96) {
            fprintf(fp, "\n ");
            col = 1;
        }
        col += (size_t)fprintf(fp, " %s", pn);
    }
    fprintf(fp, "\n  A GGUF model of an architecture llama.cpp knows (or a Hugging Face "
                "directory) gets\n  llama-quantize's type for each tensor and its file, byte "
                "for byte (Q3_K, Q4_K, Q5_K\n  are the _M mixes; COPY copies). Any other input: "
                "a preset naming a type (Q8_0,\n  Q4_K, ...) quantizes every 2-D float tensor "
                "to it.\n  To MCF from a Hugging Face directory: each tensor gets MCF's "
                "family of llama.cpp's\n  type (q8_0 q8, q4_0 q4, q6_K k6, q4_K k4, q3_K k3, "
                "q2_K k2; f32/f16/bf16 kept\n  or cast); a tensor of any other type is refused.\n");
}

/* `tbx convert --help`: the Hugging Face architectures a model directory converts from, to a
 * GGUF file for llama.cpp (the library's architecture table). */
static void help_hf_archs(FILE *fp) {
    fprintf(fp, "Hugging Face architectures (config.json model_type -> GGUF general.architecture):\n ");
    for (size_t i = 0; i < tbx_gguf_hf_arch_count(); i++) {
        const char *arch = NULL, *mt = tbx_gguf_hf_arch_at(i, &arch);
        fprintf(fp, " %s", mt);
        if (arch && strcmp(arch, mt) != 0) fprintf(fp, " (-> %s)", arch);
    }
    fputc('\n', fp);
}

/* --option KEY=VALUE of OUT's format `fmt`: the value as the format declares the option
 * (bool, integer, string); an option the format does not declare is passed as a string, for
 * the writer to refuse naming it. Every --option as one MAP (*out NULL when none). */
static int option_map(const cli_args *a, tbx_format fmt, tbx_value **out) {
    *out = NULL;
    /* --quant-method M and --quant-clip MIN,MAX: spellings of the write options quant_method=M
     * (MCF's and GGUF's), quant_clip_min=MIN and quant_clip_max=MAX (MCF's); the library checks
     * them: their values, and that --quant asks for a type they apply to */
    const char *qm = cli_value(a, "quant-method"), *qc = cli_value(a, "quant-clip");
    if (qm || qc) *out = tbx_value_new_map();
    if ((qm || qc) && !*out) {
        cli_error("out of memory");
        return CLI_FAIL;
    }
    if (qm && tbx_value_map_put(*out, "quant_method", 12,
                                tbx_value_new_string(qm, strlen(qm))) != TBX_OK) {
        tbx_value_free(*out);
        *out = NULL;
        cli_error("out of memory");
        return CLI_FAIL;
    }
    if (qc) {
        char *e1 = NULL, *e2 = NULL;
        double lo = strtod(qc, &e1);
        double hi = e1 && *e1 == ',' ? strtod(e1 + 1, &e2) : 0.0;
        if (e1 == qc || *e1 != ',' || !e2 || e2 == e1 + 1 || *e2) {
            tbx_value_free(*out);
            *out = NULL;
            return cli_usage_error(a, "--quant-clip: '%s' is not MIN,MAX", qc);
        }
        if (tbx_value_map_put(*out, "quant_clip_min", 14,
                              tbx_value_new_float(TBX_V_F64, lo)) != TBX_OK ||
            tbx_value_map_put(*out, "quant_clip_max", 14,
                              tbx_value_new_float(TBX_V_F64, hi)) != TBX_OK) {
            tbx_value_free(*out);
            *out = NULL;
            cli_error("out of memory");
            return CLI_FAIL;
        }
    }
    const char *kv;
    for (int k = 0; (kv = cli_value_at(a, "option", k)) != NULL; k++) {
        const char *eq = strchr(kv, '=');
        if (!eq || eq == kv) {
            tbx_value_free(*out);
            *out = NULL;
            return cli_usage_error(a, "--option: expected KEY=VALUE, got '%s'", kv);
        }
        size_t kl = (size_t)(eq - kv);
        const char *val = eq + 1;
        const tbx_format_option *o = NULL;
        for (size_t i = 0; (o = tbx_format_option_at(fmt, i)) != NULL; i++)
            if (strlen(o->key) == kl && memcmp(o->key, kv, kl) == 0) break;
        tbx_value *v = NULL;
        const char *why = NULL;
        if (o && o->type == TBX_V_BOOL) {
            if (!strcmp(val, "true") || !strcmp(val, "1") || !strcmp(val, "yes"))
                v = tbx_value_new_bool(1);
            else if (!strcmp(val, "false") || !strcmp(val, "0") || !strcmp(val, "no"))
                v = tbx_value_new_bool(0);
            else
                why = "not true or false";
        } else if (o && o->type == TBX_V_U64) {
            uint64_t n;
            if (parse_uint(val, UINT64_MAX, &n) == 0) v = tbx_value_new_uint(TBX_V_U64, n);
            else why = "not a non-negative integer";
        } else if (o && o->type == TBX_V_F64) {
            char *end = NULL;
            double d = *val ? strtod(val, &end) : 0;
            if (*val && !*end) v = tbx_value_new_float(TBX_V_F64, d);
            else why = "not a number";
        } else {
            v = tbx_value_new_string(val, strlen(val));
        }
        if (!*out && !why) *out = tbx_value_new_map();
        tbx_status st = why ? TBX_E_INVALID_ARG
                        : (!v || !*out) ? TBX_E_NOMEM
                                        : tbx_value_map_put(*out, kv, kl, v);
        if (why) {
            tbx_value_free(*out);
            *out = NULL;
            return cli_usage_error(a, "--option %.*s: '%s' is %s", (int)kl, kv, val, why);
        }
        if (st != TBX_OK) {
            tbx_value_free(*out);
            *out = NULL;
            if (st == TBX_E_DUPLICATE)
                return cli_usage_error(a, "--option %.*s given twice%s", (int)kl, kv,
                                       (qm && kl == 12 && !memcmp(kv, "quant_method", 12)) ||
                                       (qc && kl == 14 && !memcmp(kv, "quant_clip_m", 12))
                                           ? " (--quant-method / --quant-clip spell it too)"
                                           : "");
            cli_error("out of memory");
            return CLI_FAIL;
        }
    }
    return CLI_OK;
}

static int same_file(const char *a, const char *b) {
    struct stat sa, sb;
    if (stat(a, &sa) != 0 || stat(b, &sb) != 0) return 0;
    return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

/* --meta KEY[:TYPE]=VALUE: the value as typed (a string without TYPE); NULL with *why set when
 * VALUE does not fit TYPE. TYPE is recognised only when it names a type, so a key may contain
 * ':' ("a:b=c" is the string "c" under the key "a:b"). */
static const struct { const char *name; tbx_value_type t; } meta_types[] = {
    {"u8", TBX_V_U8},   {"u16", TBX_V_U16}, {"u32", TBX_V_U32}, {"u64", TBX_V_U64},
    {"i8", TBX_V_I8},   {"i16", TBX_V_I16}, {"i32", TBX_V_I32}, {"i64", TBX_V_I64},
    {"f32", TBX_V_F32}, {"f64", TBX_V_F64}, {"bool", TBX_V_BOOL}, {"str", TBX_V_STRING},
    {NULL, TBX_V_NULL},
};

static tbx_value *meta_value(tbx_value_type t, const char *s, const char **why) {
    char *end = NULL;
    errno = 0;
    switch (t) {
    case TBX_V_STRING: return tbx_value_new_string(s, strlen(s));
    case TBX_V_BOOL:
        if (!strcmp(s, "true") || !strcmp(s, "1")) return tbx_value_new_bool(1);
        if (!strcmp(s, "false") || !strcmp(s, "0")) return tbx_value_new_bool(0);
        *why = "not true, false, 1 or 0";
        return NULL;
    case TBX_V_U8: case TBX_V_U16: case TBX_V_U32: case TBX_V_U64: {
        const uint64_t max = t == TBX_V_U8 ? UINT8_MAX : t == TBX_V_U16 ? UINT16_MAX
                             : t == TBX_V_U32 ? UINT32_MAX : UINT64_MAX;
        unsigned long long v = (*s >= '0' && *s <= '9') ? strtoull(s, &end, 10) : 0;
        if (!(*s >= '0' && *s <= '9') || errno || *end || v > max) {
            *why = "not an unsigned integer in range";
            return NULL;
        }
        return tbx_value_new_uint(t, v);
    }
    case TBX_V_I8: case TBX_V_I16: case TBX_V_I32: case TBX_V_I64: {
        const int64_t max = t == TBX_V_I8 ? INT8_MAX : t == TBX_V_I16 ? INT16_MAX
                            : t == TBX_V_I32 ? INT32_MAX : INT64_MAX;
        long long v = *s ? strtoll(s, &end, 10) : 0;
        if (!*s || errno || *end || v > max || v < -max - 1) {
            *why = "not an integer in range";
            return NULL;
        }
        return tbx_value_new_int(t, v);
    }
    case TBX_V_F32: case TBX_V_F64: {
        double v = *s ? strtod(s, &end) : 0;
        if (!*s || *end) { *why = "not a number"; return NULL; }
        return tbx_value_new_float(t, v);
    }
    default: *why = "unsupported type"; return NULL;
    }
}

/* Every --meta of the command line as one MAP (*out NULL when none). */
static int meta_map(const cli_args *a, tbx_value **out) {
    *out = NULL;
    const char *kv;
    for (int k = 0; (kv = cli_value_at(a, "meta", k)) != NULL; k++) {
        const char *eq = strchr(kv, '=');
        if (!eq || eq == kv) {
            tbx_value_free(*out);
            *out = NULL;
            return cli_usage_error(a, "--meta: expected KEY=VALUE or KEY:TYPE=VALUE, got '%s'", kv);
        }
        size_t kl = (size_t)(eq - kv);
        tbx_value_type t = TBX_V_STRING;
        const char *colon = memrchr(kv, ':', kl);
        if (colon && colon > kv) {
            for (int i = 0; meta_types[i].name; i++)
                if (strlen(meta_types[i].name) == (size_t)(eq - colon - 1) &&
                    !memcmp(meta_types[i].name, colon + 1, (size_t)(eq - colon - 1))) {
                    t = meta_types[i].t;
                    kl = (size_t)(colon - kv);
                }
        }
        const char *why = NULL;
        if (!*out && !(*out = tbx_value_new_map())) {
            cli_error("out of memory");
            return CLI_FAIL;
        }
        tbx_value *v = meta_value(t, eq + 1, &why);
        if (!v) {
            tbx_value_free(*out);
            *out = NULL;
            if (!why) { cli_error("out of memory"); return CLI_FAIL; }
            return cli_usage_error(a, "--meta %s: value '%s' for a %s: %s", kv, eq + 1,
                                   tbx_value_type_name(t), why);
        }
        tbx_status st = tbx_value_map_put(*out, kv, kl, v);
        if (st != TBX_OK) {
            tbx_value_free(*out);
            *out = NULL;
            if (st == TBX_E_DUPLICATE)
                return cli_usage_error(a, "--meta: key '%.*s' given twice", (int)kl, kv);
            cli_error("out of memory");
            return CLI_FAIL;
        }
    }
    return CLI_OK;
}

/* ------------------------------------------------------------------------------------------ */
/* A GGUF to a Hugging Face model directory (OUT ends with '/' or is a directory)              */
/* ------------------------------------------------------------------------------------------ */
typedef struct hfd_count { uint64_t tensors; int verbose; } hfd_count;

static void hfd_on_tensor(void *ud, const tbx_convert_report *r) {
    hfd_count *c = ud;
    c->tensors++;
    if (c->verbose) {
        printf("%s: ", r->name);
        describe(stdout, r->action, r->from, r->to, r->reason);
        fputc('\n', stdout);
    }
}

/* "5GB", "500MB", "2GiB", "123" -> bytes (transformers' units: KB/MB/GB powers of 10, KiB/MiB/
 * GiB powers of 2); false when it is none. */
static bool parse_size(const char *s, uint64_t *out) {
    char *end;
    double v = strtod(s, &end);
    if (end == s || !(v > 0)) return false;
    static const struct { const char *u; double m; } U[] = {
        {"", 1}, {"B", 1}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12},
        {"KiB", 1024.0}, {"MiB", 1048576.0}, {"GiB", 1073741824.0}, {"TiB", 1099511627776.0},
    };
    for (size_t i = 0; i < sizeof U / sizeof U[0]; i++)
        if (strcmp(end, U[i].u) == 0) {
            double b = v * U[i].m;
            if (b >= 1.8e19 || b < 1) return false;
            *out = (uint64_t)b;
            return true;
        }
    return false;
}

static int hf_dir_run(const cli_args *a, const char *in, const char *out) {
    tbx_hf_from_gguf_options o;
    tbx_hf_from_gguf_options_init(&o);
    const char *dt = cli_value(a, "dtype");
    if (dt) {
        o.dtype = tbx_dtype_from_name(dt);
        if (o.dtype != TBX_DT_F32 && o.dtype != TBX_DT_F16 && o.dtype != TBX_DT_BF16)
            return cli_usage_error(a, "--dtype: '%s' is not f32, f16 or bf16", dt);
    }
    const char *ms = cli_value(a, "max-shard-size");
    if (ms && !parse_size(ms, &o.max_shard_size))
        return cli_usage_error(a, "--max-shard-size: '%s' is not a size (5GB, 500MB, 2GiB, "
                                  "bytes)", ms);
    if (cli_flag(a, "weights-only")) o.flags |= TBX_HF_WEIGHTS_ONLY;
    if (cli_flag(a, "no-sync")) o.write_flags |= TBX_WRITE_NO_SYNC;
    static const char *const other[] = {"cast", "quant", "dequantize", "requantize", "raw",
                                        "stringify-meta", "drop-meta", "drop-sections",
                                        "imatrix", "pure", "keep-split", "dry-run", "meta",
                                        "option", "alignment", "compress", "digest",
                                        "format-version", "quant-method", "quant-clip",
                                        "tensor-type", "output-tensor-type",
                                        "token-embedding-type", "no-dedup", "drop-unreadable",
                                        "force", "strict", "leave-output-tensor",
                                        "tensor-type-file", "override-kv"};
    for (size_t i = 0; i < sizeof other / sizeof other[0]; i++)
        if (cli_flag(a, other[i]))
            return cli_usage_error(a, "--%s does not apply to a Hugging Face directory output "
                                      "(--dtype, --max-shard-size, --weights-only, -v do)",
                                   other[i]);
    tbx_error err;
    memset(&err, 0, sizeof err);
    tbx_status st = tbx_hf_from_gguf_check(out, &err);
    if (st != TBX_OK) {
        cli_report(NULL, st, &err);
        return CLI_FAIL;
    }
    tbx_file *f = cli_open(a, in);
    if (!f) return CLI_FAIL;
    hfd_count c = {0, cli_flag(a, "verbose")};
    o.on_tensor = hfd_on_tensor;
    o.progress_ud = &c;
    st = tbx_hf_from_gguf(f, out, &o, &err);
    tbx_close(f);
    if (st != TBX_OK) {
        cli_report(NULL, st, &err);
        return CLI_FAIL;
    }
    fprintf(stderr, "wrote %" PRIu64 " tensors to %s\n", c.tensors, out);
    return CLI_OK;
}

/* OUT names a directory: a trailing slash, or an existing directory. */
static bool is_dir_target(const char *out) {
    size_t n = strlen(out);
    struct stat st;
    return (n && out[n - 1] == '/') || (stat(out, &st) == 0 && S_ISDIR(st.st_mode));
}

/* --override-kv KEY=TYPE:VALUE (llama-quantize's, common's string_parse_kv_override): into the
 * --meta map, after its entries, as llama_model_quantize sets them (int: u32 of |VALUE| as atol
 * reads it; float: f32 of atof; bool: true | false; str: at most 127 bytes). The keys its
 * loader reads as the rules' hyper-parameters are refused: tensorbox applies an override to the
 * output's metadata only. */
static int override_kv(const cli_args *a, tbx_value **map) {
    static const char *const hparams[] = {".block_count", ".attention.head_count",
                                          ".attention.head_count_kv", ".expert_count"};
    const char *kv;
    for (int k = 0; (kv = cli_value_at(a, "override-kv", k)) != NULL; k++) {
        const char *eq = strchr(kv, '=');
        if (!eq || eq == kv || eq - kv >= 128)
            return cli_usage_error(a, "--override-kv: expected KEY=TYPE:VALUE (a key of at most "
                                      "127 bytes), got '%s'", kv);
        const size_t kl = (size_t)(eq - kv);
        for (size_t h = 0; h < sizeof hparams / sizeof hparams[0]; h++) {
            const size_t hl = strlen(hparams[h]);
            if (kl > hl && !memcmp(kv + kl - hl, hparams[h], hl))
                return cli_usage_error(a, "--override-kv %.*s: llama.cpp reads this key as a "
                                          "hyper-parameter of its quantization rules; tensorbox "
                                          "overrides the output's metadata only", (int)kl, kv);
        }
        const char *v = eq + 1;
        tbx_value *val = NULL;
        if (!strncmp(v, "int:", 4)) {
            long long n = strtoll(v + 4, NULL, 10);
            val = tbx_value_new_uint(TBX_V_U32, (uint32_t)(n < 0 ? -(unsigned long long)n
                                                                 : (unsigned long long)n));
        } else if (!strncmp(v, "float:", 6)) {
            val = tbx_value_new_float(TBX_V_F32, (float)strtod(v + 6, NULL));
        } else if (!strncmp(v, "bool:", 5)) {
            if (strcmp(v + 5, "true") && strcmp(v + 5, "false"))
                return cli_usage_error(a, "--override-kv %s: a bool is true or false", kv);
            val = tbx_value_new_bool(!strcmp(v + 5, "true"));
        } else if (!strncmp(v, "str:", 4)) {
            if (strlen(v + 4) > 127)
                return cli_usage_error(a, "--override-kv %.*s: a string of at most 127 bytes",
                                       (int)kl, kv);
            val = tbx_value_new_string(v + 4, strlen(v + 4));
        } else {
            return cli_usage_error(a, "--override-kv %s: TYPE is int, float, bool or str", kv);
        }
        if (!*map && !(*map = tbx_value_new_map())) {
            tbx_value_free(val);
            cli_error("out of memory");
            return CLI_FAIL;
        }
        tbx_status st = val ? tbx_value_map_put(*map, kv, kl, val) : TBX_E_NOMEM;
        if (st == TBX_E_DUPLICATE)
            return cli_usage_error(a, "--override-kv: key '%.*s' given twice (or also by --meta)",
                                   (int)kl, kv);
        if (st != TBX_OK) {
            cli_error("out of memory");
            return CLI_FAIL;
        }
    }
    return CLI_OK;
}

static int convert_run(const cli_args *a) {
    const char *in = a->pos[0], *out = a->pos[1];
    if (!cli_value(a, "to") && is_dir_target(out)) return hf_dir_run(a, in, out);
    if (cli_value(a, "dtype") || cli_value(a, "max-shard-size") || cli_flag(a, "weights-only"))
        return cli_usage_error(a, "--dtype, --max-shard-size and --weights-only apply to a "
                                  "Hugging Face directory output (OUT/, a trailing slash)");
    tbx_convert_options opt;
    tbx_convert_options_init(&opt);
    char formats[128];
    list_formats(formats, sizeof formats);

    const char *to = cli_value(a, "to");
    tbx_format fmt;
    if (to) {
        fmt = tbx_format_from_name(to);
        if (fmt == TBX_FORMAT_UNKNOWN)
            return cli_usage_error(a, "unknown format '%s' (writable: %s)", to, formats);
    } else {
        fmt = tbx_format_from_path(out);
        if (fmt == TBX_FORMAT_UNKNOWN)
            return cli_usage_error(a, "cannot tell the output format from '%s'; use --to FORMAT "
                                      "(%s)", out, formats);
    }
    tbx_format_caps caps = TBX_FORMAT_CAPS_INIT;
    if (tbx_format_caps_get(fmt, &caps) != TBX_OK || !(caps.flags & TBX_FCAP_WRITE))
        return cli_usage_error(a, "tensorbox cannot write %s files (writable: %s)",
                               tbx_format_name(fmt), formats);
    opt.write.format = fmt;
    if (cli_flag(a, "force")) opt.write.flags |= TBX_WRITE_OVERWRITE;
    if (cli_flag(a, "stringify-meta")) opt.flags |= TBX_CONVERT_STRINGIFY_META;
    if (cli_flag(a, "drop-meta")) opt.flags |= TBX_CONVERT_DROP_META;
    if (cli_flag(a, "drop-sections")) opt.flags |= TBX_CONVERT_DROP_SECTIONS;
    if (cli_flag(a, "dequantize")) opt.flags |= TBX_CONVERT_DEQUANTIZE;
    if (cli_flag(a, "drop-unreadable")) opt.flags |= TBX_CONVERT_DROP_UNREADABLE;
    if (cli_flag(a, "requantize")) opt.flags |= TBX_CONVERT_REQUANTIZE;
    if (cli_flag(a, "strict")) opt.flags |= TBX_CONVERT_STRICT;
    if (cli_flag(a, "no-dedup")) opt.write.flags |= TBX_WRITE_NO_DEDUP;
    if (cli_flag(a, "no-sync")) opt.write.flags |= TBX_WRITE_NO_SYNC;
    if (cli_flag(a, "raw")) opt.flags |= TBX_CONVERT_RAW;

    const char *cast = cli_value(a, "cast");
    if (cast) {
        opt.cast_to = tbx_dtype_from_name(cast);
        if (opt.cast_to == TBX_DT_INVALID)
            return cli_usage_error(a, "--cast: unknown dtype '%s'", cast);
    }
    const char *quant = cli_value(a, "quant");
    /* a GGUF output: llama-quantize's preset names first (Q4_K_M, ..., and Q4_0 or Q4_K, which
     * the library reads as the type itself for an input that is no llama.cpp model) */
    const char *preset_name = NULL;
    tbx_dtype preset_type = TBX_DT_INVALID; /* its default type, for the reports below */
    /* (an MCF output from a directory, a Hugging Face model: a preset maps llama.cpp's choice
     * to MCF's families; MCF's own names, q8 .. k2, int8, int4, are no preset's, and from a
     * file a ggml type's name stays the type MCF does not store) */
    struct stat ist;
    const int mcf_preset = fmt == TBX_FORMAT_MCF && stat(in, &ist) == 0 && S_ISDIR(ist.st_mode);
    for (size_t i = 0; quant && (fmt == TBX_FORMAT_GGUF || mcf_preset) && !preset_name; i++) {
        tbx_dtype dt = TBX_DT_INVALID;
        const char *pn = tbx_quant_preset_at(i, NULL, &dt, NULL);
        if (!pn) break;
        if (strcasecmp(pn, quant) == 0) {
            preset_name = pn;
            preset_type = dt;
        }
    }
    /* --tensor-type and --tensor-type-file rules, in command-line order (llama-quantize's) */
    tbx_tensor_type_rule rules[64];
    static char patterns[64][256]; /* the PATTERN part of each rule */
    size_t nrules = 0;
    const int tt_opt = cli_option_index(a, "tensor-type");
    const int tf_opt = cli_option_index(a, "tensor-type-file");
    for (int r = 0; r < a->nrep; r++) {
        if (a->rep_opt[r] != tt_opt && a->rep_opt[r] != tf_opt) continue;
        const int file = a->rep_opt[r] == tf_opt;
        const char *what = file ? "--tensor-type-file" : "--tensor-type";
        static char text[65536]; /* one file at a time: its words are copied into patterns */
        char *words = NULL, *save = NULL;
        const char *tt = a->rep_val[r];
        if (file) {
            FILE *fp = fopen(tt, "rb");
            if (!fp) return cli_usage_error(a, "--tensor-type-file: cannot open '%s': %s", tt,
                                            strerror(errno));
            size_t n = fread(text, 1, sizeof text - 1, fp);
            const int more = n == sizeof text - 1 && fgetc(fp) != EOF;
            fclose(fp);
            if (more) return cli_usage_error(a, "--tensor-type-file: '%s' is longer than %zu "
                                                "bytes", tt, sizeof text - 1);
            text[n] = 0;
            words = text;
            tt = strtok_r(words, " \t\n\r\v\f", &save);
        }
        for (; tt; tt = file ? strtok_r(NULL, " \t\n\r\v\f", &save) : NULL) {
            const char *eq = strrchr(tt, '=');
            if (!eq || eq == tt || !eq[1])
                return cli_usage_error(a, "%s: expected PATTERN=TYPE, got '%s'", what, tt);
            if (nrules == sizeof rules / sizeof rules[0])
                return cli_usage_error(a, "%s: at most %zu rules", what,
                                       sizeof rules / sizeof rules[0]);
            tbx_dtype t = tbx_dtype_from_name(eq + 1);
            if (t == TBX_DT_INVALID)
                return cli_usage_error(a, "%s: unknown type '%s'", what, eq + 1);
            if ((size_t)(eq - tt) >= sizeof patterns[0])
                return cli_usage_error(a, "%s: a pattern of at most %zu bytes", what,
                                       sizeof patterns[0] - 1);
            memcpy(patterns[nrules], tt, (size_t)(eq - tt));
            patterns[nrules][eq - tt] = 0;
            rules[nrules].pattern = patterns[nrules];
            rules[nrules++].type = t;
        }
    }
    const char *ott = cli_value(a, "output-tensor-type"), *tet = cli_value(a, "token-embedding-type");
    if (ott && (opt.output_tensor_type = tbx_dtype_from_name(ott)) == TBX_DT_INVALID)
        return cli_usage_error(a, "--output-tensor-type: unknown type '%s'", ott);
    if (tet && (opt.token_embedding_type = tbx_dtype_from_name(tet)) == TBX_DT_INVALID)
        return cli_usage_error(a, "--token-embedding-type: unknown type '%s'", tet);
    if (cli_flag(a, "pure")) opt.preset_flags |= TBX_PRESET_PURE;
    if (cli_flag(a, "dry-run")) opt.preset_flags |= TBX_PRESET_DRY_RUN;
    if (cli_flag(a, "keep-split")) opt.preset_flags |= TBX_PRESET_KEEP_SPLIT;
    if (cli_flag(a, "leave-output-tensor")) opt.preset_flags |= TBX_PRESET_LEAVE_OUTPUT;
    if ((nrules || ott || tet || opt.preset_flags || cli_value(a, "override-kv")) && !preset_name)
        return cli_usage_error(a, "--pure, --dry-run, --keep-split, --tensor-type, "
                                  "--tensor-type-file, --output-tensor-type, "
                                  "--token-embedding-type, --leave-output-tensor and "
                                  "--override-kv refine a llama-quantize preset (--quant "
                                  "Q4_K_M, ...)");
    opt.tensor_types = nrules ? rules : NULL;
    opt.n_tensor_types = nrules;
    if (preset_name) {
        opt.quant_preset = preset_name;
    } else if (quant) {
        /* the types come from the library's quantizers and the format's row: a type the
         * format stores, or (for a format that stores none) any, for the library to refuse */
        char types[1024];
        size_t ntypes = quant_types(fmt, types, sizeof types);
        opt.quant_to = tbx_quant_from_name(fmt, quant);
        if (opt.quant_to == TBX_DT_INVALID ||
            (ntypes && !tbx_format_writes_dtype(fmt, opt.quant_to))) {
            if (ntypes)
                return cli_usage_error(a, "--quant: '%s' is not a type %s files are quantized "
                                          "to (%s)", quant, tbx_format_name(fmt), types);
            return cli_usage_error(a, "--quant: '%s' is not a quantization type (tbx convert "
                                      "--help lists each format's)", quant);
        }
    }
    if (cli_flag(a, "requantize") && !quant)
        return cli_usage_error(a, "--requantize applies to --quant (the type to quantize to)");
    opt.imatrix = cli_value(a, "imatrix");
    if (opt.imatrix && !quant)
        return cli_usage_error(a, "--imatrix applies to --quant (a ggml type to quantize to)");
    uint64_t n;
    const char *s;
    if ((s = cli_value(a, "alignment")) != NULL) {
        if (parse_uint(s, UINT32_MAX, &n) != 0)
            return cli_usage_error(a, "--alignment: '%s' is not a byte count", s);
        opt.write.alignment = (uint32_t)n;
    }
    if ((s = cli_value(a, "compress")) != NULL) {
        /* the format's writer checks its range (tbx_writer_check below, before IN is read) */
        if (parse_uint(s, INT32_MAX, &n) != 0)
            return cli_usage_error(a, "--compress: '%s' is not a compression level", s);
        opt.write.compress_level = (int)n;
    }
    if ((s = cli_value(a, "digest")) != NULL) {
        if (strcmp(s, "sha256") != 0 && strcmp(s, "crc32c") != 0)
            return cli_usage_error(a, "--digest: '%s' is not sha256 or crc32c", s);
        opt.write.digest = s;
    }
    if ((s = cli_value(a, "format-version")) != NULL) {
        if (parse_uint(s, UINT32_MAX, &n) != 0)
            return cli_usage_error(a, "--format-version: '%s' is not a version number", s);
        opt.write.version = (uint32_t)n;
    }

    convert_ud cu;
    memset(&cu, 0, sizeof cu);
    progress *pp = &cu.prog;
    opt.progress_ud = &cu;
    if (isatty(STDERR_FILENO)) {
        pp->start = pp->last = now_seconds();
        opt.progress = on_progress;
    }
    cu.rep.verbose = cli_flag(a, "verbose");
    cu.dry_run = (opt.preset_flags & TBX_PRESET_DRY_RUN) != 0;
    cu.sum.verbose = cli_flag(a, "verbose");
    cu.sum.strict = cli_flag(a, "strict");
    if (fmt == TBX_FORMAT_MCF && quant) opt.on_quant = on_quant;
    opt.on_tensor = on_tensor;

    tbx_value *meta = NULL, *options = NULL;
    int mrc = meta_map(a, &meta);
    if (mrc == CLI_OK) mrc = override_kv(a, &meta);
    if (mrc != CLI_OK) {
        tbx_value_free(meta);
        return mrc;
    }
    opt.meta = meta;
    mrc = option_map(a, fmt, &options);
    if (mrc != CLI_OK) {
        tbx_value_free(meta);
        return mrc;
    }
    opt.write.options = options;

    /* OUT can be written (its directory exists, --force for an existing file) before IN is
     * opened: a model directory's index, tokenizer and shards take time and memory */
    tbx_error cerr;
    memset(&cerr, 0, sizeof cerr);
    tbx_status cst = same_file(in, out) ? TBX_OK : tbx_convert_check(out, &opt, &cerr);
    if (cst != TBX_OK) {
        tbx_value_free(meta);
        tbx_value_free(options);
        cli_report(NULL, cst, &cerr);
        if (cst == TBX_E_EXISTS && !cli_flag(a, "force") && cli_force_would_help(out))
            fprintf(stderr, "tbx: use --force to replace %s\n", out);
        /* options that do not go together, or a value a format's option does not take: the
         * command line's mistake, found before IN is read */
        return cst == TBX_E_INVALID_ARG ? CLI_USAGE : CLI_FAIL;
    }
    /* the method named in the summary: the write option's value (best when not given) */
    char qmethod[16] = "best";
    for (uint64_t i = 0, no = tbx_value_len(options); i < no; i++) {
        size_t kl = 0, vl = 0;
        const char *k = tbx_value_key_at(options, i, &kl);
        const char *v = tbx_value_get_str(tbx_value_at(options, i), &vl);
        if (k && v && kl == 12 && !memcmp(k, "quant_method", 12) && vl < sizeof qmethod) {
            memcpy(qmethod, v, vl);
            qmethod[vl] = 0;
        }
    }
    tbx_file *f = cli_open(a, in);
    if (!f) {
        tbx_value_free(meta);
        tbx_value_free(options);
        return CLI_FAIL;
    }
    cu.rep.f = f;
    tbx_error err;
    memset(&err, 0, sizeof err);
    tbx_status st = tbx_convert(f, out, &opt, &err);
    tbx_value_free(meta);
    tbx_value_free(options);
    uint64_t total = 0, left_out = 0;
    for (uint64_t i = 0, nt = tbx_tensor_count(f); i < nt; i++) {
        tbx_tensor_info ti = TBX_TENSOR_INFO_INIT;
        if (tbx_tensor_info_get(f, i, &ti) != TBX_OK) continue;
        total += ti.nbytes;
        /* the lossy step taken, said once: which tensors were left out */
        if (st != TBX_OK || !(ti.flags & TBX_TENSOR_UNREADABLE)) continue;
        fputs(left_out++ ? ", " : "tbx: left out unreadable tensors (tbx validate IN says why): ",
              stderr);
        jout_write_escaped(stderr, ti.name, ti.name_len);
    }
    if (left_out) fputc('\n', stderr);
    tbx_close(f);

    if (pp->shown) {
        if (st == TBX_OK) {
            if (!pp->complete) progress_line(pp, total, total, now_seconds());
            fputc('\n', stderr);
        } else {
            fputs("\r\033[K", stderr);
        }
    }
    if (st != TBX_OK) {
        cli_report(NULL, st, &err);
        if (st == TBX_E_EXISTS && !same_file(in, out) && !cli_flag(a, "force") &&
            cli_force_would_help(out))
            fprintf(stderr, "tbx: use --force to replace %s\n", out);
        else if (st == TBX_E_LOSSY && !strstr(err.message, " --"))
            /* the general list, unless the message already names what works */
            fprintf(stderr, "tbx: lossy steps need an explicit option: --stringify-meta, "
                            "--drop-meta, --drop-sections, --cast DTYPE, --quant TYPE, "
                            "--dequantize, --requantize\n");
        return CLI_FAIL;
    }
    if (cu.dry_run) {
        const double n = cu.nelems ? (double)cu.nelems : 1.0;
        printf("dry run: model size %.2f MiB (%.2f BPW), quantized size %.2f MiB (%.2f BPW); "
               "nothing written\n", (double)cu.size_in / 1048576.0, (double)cu.size_in * 8 / n,
               (double)cu.size_out / 1048576.0, (double)cu.size_out * 8 / n);
        return CLI_OK;
    }
    /* what became of the tensors, as the conversion reported it (never read back from OUT) */
    if (opt.quant_to != TBX_DT_INVALID || opt.cast_to != TBX_DT_INVALID || opt.quant_preset ||
        (opt.flags & (TBX_CONVERT_DEQUANTIZE | TBX_CONVERT_REQUANTIZE)) || cu.sum.warned)
        summary_print(&cu.sum);
    if (opt.on_quant && cu.rep.tensors) {
        const tbx_dtype_info *qi = tbx_dtype_get(opt.quant_to);
        char fams[64];
        if (!qi && opt.quant_preset) /* a preset to MCF: several families */
            snprintf(fams, sizeof fams, "MCF's families (%s)", opt.quant_preset);
        fprintf(stderr, "quantized %" PRIu64 " tensors (%" PRIu64 " values) to %s, method %s: RMSE %.6g\n",
                cu.rep.tensors, cu.rep.values, qi ? qi->name + 4 : opt.quant_preset ? fams : "?",
                qmethod,
                cu.rep.values ? sqrt(cu.rep.sse / (double)cu.rep.values) : 0.0);
    }
    if (cu.rep.searched) {
        const tbx_dtype_info *qi =
            tbx_dtype_get(opt.quant_to != TBX_DT_INVALID ? opt.quant_to : preset_type);
        const double nv = (double)cu.rep.svalues;
        fprintf(stderr, "quantized %" PRIu64 " tensors (%" PRIu64 " values) to %s, method "
                "search: RMSE %.6g; ggml's reference (method ggml, the default) on the same "
                "values: RMSE %.6g\n", cu.rep.searched, cu.rep.svalues, qi ? qi->name : "?",
                sqrt(cu.rep.ssse / nv), sqrt(cu.rep.ssse_ref / nv));
    }
    return CLI_OK;
}

const cli_command cli_cmd_convert = {
    "convert",
    "IN OUT [--to FORMAT] [--force] [--stringify-meta] [--drop-meta] [--cast DTYPE] [--quant TYPE]"
    " [--quant-method best|mantle|ggml|search] [--quant-clip MIN,MAX] [--imatrix FILE] [-v]"
    " [--dequantize] [--requantize]"
    " [--strict] [--drop-unreadable] [--raw] [--no-dedup] [--no-sync]"
    " [--meta KEY[:TYPE]=VALUE]... [-O KEY=VALUE]...\n"
    "       tbx convert MODEL.gguf OUT/ [--dtype f32|f16|bf16] [--max-shard-size SIZE]"
    " [--weights-only] [-v]",
    "Write the metadata, sections and tensors of a file to a new file in a given format",
    "Lossless by default: metadata, a section or a dtype the target format cannot store stops\n"
    "the conversion with an error naming it, and each lossy step needs its own option.\n"
    "OUT is checked before IN is opened (its directory exists, --force for an existing file),\n"
    "then written to a temporary file and renamed into place; the input is never replaced.\n"
    "A symbolic link OUT is followed: the file it points to is written and the link kept (a\n"
    "dangling one needs --force). --force replaces only a regular file.\n"
    "OUT/ (a trailing slash, or an existing directory): a llama.cpp GGUF written back as a\n"
    "Hugging Face model directory (config.json, tokenizer files, safetensors with the Hugging\n"
    "Face names, every ggml type decoded to --dtype; shards above --max-shard-size), from the\n"
    "same architecture table as the way in; OUT must be absent or empty and is written whole\n"
    "or not at all. --weights-only: only the safetensors, under the GGUF's names.\n"
    "--quant TYPE quantizes every dense 2-D f32/f16/bf16/f64 tensor; for ggml types, rows the\n"
    "type cannot take get llama-quantize's fallback (q4_k -> q5_0, q5_k -> q5_1, q6_k -> q8_0,\n"
    "q2_k/q3_k -> q4_0, else f16). Every ggml type gets the bytes ggml_quantize_chunk gives the\n"
    "same rows (llama-quantize without an importance matrix); --quant-method search (GGUF's\n"
    "-O quant_method=search, q2_k .. q6_k only) uses tensorbox's own scale search instead: other\n"
    "bytes, a lower error, slower; its RMSE and that of ggml's algorithm on the same values are\n"
    "printed on stderr (each tensor's with -v).\n"
    "--imatrix FILE (GGUF --quant to a ggml type) weights the quantization by an importance\n"
    "matrix as llama-imatrix writes it (GGUF, or the legacy .dat): each tensor's rows are\n"
    "quantized with the vector of its name, as llama-quantize --imatrix does (the same bytes as\n"
    "ggml_quantize_chunk given that vector); a tensor the matrix has no entry for is quantized\n"
    "without one (said on stderr), a vector of another length stops the conversion, and the\n"
    "output records quantize.imatrix.file, .dataset, .entries_count and .chunks_count.\n"
    "A tensor already quantized to another type stops the conversion unless --requantize\n"
    "(decoded and quantized again) or --dequantize.\n"
    "After --quant, --cast, --dequantize or --requantize, stderr gets what was done to the\n"
    "tensors, by type and reason (-v: tensor by tensor), as the conversion did it. A tensor\n"
    "holding values its type cannot represent (beyond the range of its f16 scales: they get\n"
    "ggml's or mantle's result) or turned Inf/NaN gets a warning; --strict makes it an error.\n"
    "For an MCF output TYPE is one of MCF's families q8 q4 k6 k4 k3 k2 int8 int4 (any row\n"
    "length); --quant-method best (default: nearest f16 scales, searched sub-scales, a lower\n"
    "error) or mantle (mantle's quantize, byte for byte); --quant-clip MIN,MAX clamps every\n"
    "tensor to one range (mantle's --min-clip/--max-clip). Both spell MCF's write options\n"
    "(-O quant_method=M, -O quant_clip_min=MIN -O quant_clip_max=MAX), refused without an MCF\n"
    "--quant (they would apply to nothing). The RMSE of the quantized tensors is\n"
    "printed on stderr when done (each tensor's with -v). int8 and int4 are read by tensorbox\n"
    "only: mantle's runtime refuses them (\"unsupported dtype 16/17\"); q8 .. k2 load in mantle.\n"
    "A quantized tensor (ggml block type, OINF v2 parameters, zTensor quantized_group, MCF\n"
    "family) keeps its quantization when the target stores it exactly; otherwise the conversion\n"
    "stops. --dequantize writes every quantized tensor dequantized, as f32 (or the --cast\n"
    "dtype); --cast alone decodes them too. A GGUF OUT keeps 1-D tensors under --cast (llama.cpp\n"
    "computes norms in f32), and its general.file_type describes the tensors written.\n"
    "A tensor the input lists but cannot read (an MCF int8/int4 table of codes without its\n"
    "scale, as mantle pack --quant-embed writes them) stops the conversion naming it, unless\n"
    "--drop-unreadable leaves such tensors out (they are named on stderr).\n"
    "IN a Hugging Face model directory (config.json, tokenizer.json, safetensors) and OUT a\n"
    "GGUF file: written for llama.cpp (architecture keys, tokenizer, tensor names: the\n"
    "architectures listed below; 1-D tensors\n"
    "in f32; --cast and --quant apply to the 2-D weights); --raw copies the tensors as they are.\n"
    "--meta KEY=VALUE (repeatable) sets a metadata entry of OUT, replacing the input's entry of\n"
    "that key: a string, or typed with KEY:TYPE=VALUE (u8 u16 u32 u64 i8 i16 i32 i64 f32 f64\n"
    "bool str), e.g. --meta model_name=minilm --meta general.alignment:u32=64. A type the\n"
    "target cannot store stops the conversion (EMBD stores strings only).\n"
    "The output formats (those this library can write) follow, with their extensions.\n",
    convert_options,
    2,
    2,
    convert_run,
    NULL,
};
