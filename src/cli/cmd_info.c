/*
 * cmd_info.c - `tbx info FILE [--json] [--types] [--stats]`: what a file holds.
 *
 * The human summary gives format, version and size, one "key (type) = value" line per metadata
 * entry (long lists and strings cut), a table of tensors (name, dtype, shape, offset, stored
 * bytes) and a table of sections. --json prints one JSON object instead (schema in docs/cli.md):
 * complete values, keys in file order; --types wraps each metadata value with its type.
 *
 * --stats prints the values view of stats.c instead (decoded previews, statistics, histograms).
 * Size variables (OINF) are shown by both printers (tbx_sizevar_count / tbx_sizevar_get), and
 * an MCF file's whole section directory (type, name, version, offset, size; tensorbox/mcf.h).
 */
#define _GNU_SOURCE
#include "cli.h"

#define TBX_EXPERIMENTAL 1 /* format extras (MCF directory, EMBD header and vocabulary):
                            * experimental API, as for any user */
#include <tensorbox/mcf.h>
#include <tensorbox/embd.h>

#include <inttypes.h>
#include <string.h>

static const cli_option info_options[] = {
    {"json", 0, NULL, "print one JSON object instead of the summary"},
    {"types", 0, NULL, "with --json: each metadata value as {\"type\": ..., \"value\": ...}"},
    {"stats", 0, NULL, "decode every tensor: preview, min/max/mean/median/std, histogram"},
    {NULL, 0, NULL, NULL},
};

static void print_mcf_directory(FILE *fp, const tbx_file *f);

/* Human output: how much of a long value to show. */
#define INFO_MAX_ITEMS 16
#define INFO_MAX_BYTES 256
/* Name column width cap, so that one long name does not widen the whole table. */
#define INFO_NAME_COL_MAX 60

/* "[2, 3]" into buf (truncated with "...]" when it does not fit). Returns the length. */
static size_t format_shape(char *buf, size_t cap, const uint64_t *shape, uint32_t ndim) {
    size_t n = 0;
    buf[n++] = '[';
    for (uint32_t d = 0; d < ndim && shape; d++) {
        char num[32];
        int k = snprintf(num, sizeof num, "%s%" PRIu64, d ? ", " : "", shape[d]);
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

/* Where a scale / zero of a quantization lives, for the short form: "tensor", "channel[1]",
 * "group[128]", "block". */
static void quant_param_short(char *buf, size_t cap, const tbx_quant_param *p, uint64_t block) {
    switch (p->scope) {
    case TBX_QSCOPE_CHANNEL: snprintf(buf, cap, "channel[%" PRIu32 "]", p->axis); break;
    case TBX_QSCOPE_GROUP: snprintf(buf, cap, "group[%" PRIu64 "]", block); break;
    default: snprintf(buf, cap, "%s", tbx_quant_scope_name(p->scope)); break;
    }
}

/* The short form of a tensor's quantization: "ggml 4-bit b32/256", "linear 8-bit
 * scale:channel[0] zero:tensor"; "" when it is not quantized. */
static void quant_short(const tbx_file *f, uint64_t i, char *buf, size_t cap) {
    tbx_quant_info q;
    q.struct_size = sizeof q;
    buf[0] = 0;
    if (tbx_tensor_quant_get(f, i, &q) != TBX_OK) return;
    if (q.method == TBX_QUANT_GGML) {
        snprintf(buf, cap, "ggml %" PRIu32 "-bit b%" PRIu64 "%s", q.bits, q.block_size,
                 q.super_block_size ? "/" : "");
        if (q.super_block_size) {
            size_t n = strlen(buf);
            snprintf(buf + n, cap - n, "%" PRIu64, q.super_block_size);
        }
        return;
    }
    char sc[48], zr[48];
    quant_param_short(sc, sizeof sc, &q.scale, q.block_size);
    quant_param_short(zr, sizeof zr, &q.zero, q.block_size);
    snprintf(buf, cap, "%s %" PRIu32 "-bit scale:%s%s%s", tbx_quant_method_name(q.method), q.bits,
             sc, q.zero.scope != TBX_QSCOPE_NONE ? " zero:" : "",
             q.zero.scope != TBX_QSCOPE_NONE ? zr : "");
}

/* Short note on how a tensor is stored when that is not plain dense raw bytes ("" if it is):
 * layout, quantization (short form), zstd. */
static void storage_note(const tbx_file *f, uint64_t i, const tbx_tensor_info *ti, char *buf,
                         size_t cap) {
    buf[0] = 0;
    if (ti->ncomponents == 0) {
        snprintf(buf, cap, "no data");
        return;
    }
    if (ti->flags & TBX_TENSOR_UNREADABLE) { /* tbx validate and every read say why */
        snprintf(buf, cap, "unreadable (see tbx validate)");
        return;
    }
    size_t n = 0;
    if (ti->layout != TBX_LAYOUT_DENSE) {
        const char *ln = tbx_layout_name(ti->layout);
        int k = snprintf(buf, cap, "%s", ln ? ln : "?");
        if (k > 0) n = (size_t)k < cap ? (size_t)k : cap - 1;
    }
    char qs[160];
    quant_short(f, i, qs, sizeof qs);
    if (qs[0]) {
        int k = snprintf(buf + n, cap - n, "%s%s", n ? ", " : "", qs);
        if (k > 0) n = n + (size_t)k < cap ? n + (size_t)k : cap - 1;
    }
    for (uint32_t c = 0; c < ti->ncomponents; c++) {
        tbx_component_info ci = TBX_COMPONENT_INFO_INIT;
        if (tbx_component_info_get(f, i, c, &ci) != TBX_OK) continue;
        if (ci.encoding != TBX_ENC_RAW) {
            snprintf(buf + n, cap - n, "%s%s", n ? ", " : "", tbx_encoding_name(ci.encoding));
            break;
        }
    }
}

static void print_pad(FILE *fp, size_t have, size_t want) {
    for (size_t k = have; k < want; k++) fputc(' ', fp);
}

/* EMBD files: the header and footer fields, the vocabulary size and the special-token ids
 * (tensorbox/embd.h); embd-legacy files: the vocabulary. */
static const char *const embd_special_names[5] = {"pad_id", "unk_id", "cls_id", "sep_id",
                                                  "mask_id"};
static int embd_special(const tbx_file *f, uint32_t ids[5]) {
    tbx_embd_special sp = TBX_EMBD_SPECIAL_INIT;
    if (tbx_embd_special_get(f, &sp) != TBX_OK) return 0;
    ids[0] = sp.pad_id; ids[1] = sp.unk_id; ids[2] = sp.cls_id; ids[3] = sp.sep_id;
    ids[4] = sp.mask_id;
    return 1;
}

static void info_embd_human(const tbx_file *f, FILE *fp) {
    tbx_format fmt = tbx_file_format(f);
    if (fmt != TBX_FORMAT_EMBD && fmt != TBX_FORMAT_EMBD_LEGACY) return;
    tbx_embd_header h = TBX_EMBD_HEADER_INIT;
    if (tbx_embd_header_get(f, &h) == TBX_OK) {
        fprintf(fp, "header:    version %u.%u, flags 0x%08" PRIx32 "%s%s%s%s\n",
                (unsigned)h.version_major, (unsigned)h.version_minor, h.flags,
                h.flags & TBX_EMBD_F_VOCAB_EMBEDDED ? " VOCAB_EMBEDDED" : "",
                h.flags & TBX_EMBD_F_TENSORS_ALIGNED ? " TENSORS_ALIGNED" : "",
                h.flags & TBX_EMBD_F_CHECKSUM_ENABLED ? " CHECKSUM_ENABLED" : "",
                h.flags & TBX_EMBD_F_COMPRESSED ? " COMPRESSED" : "");
        fprintf(fp, "  metadata @%" PRIu32 " +%" PRIu32 ", vocab @%" PRIu32 " +%" PRIu32
                ", index @%" PRIu32 " x%" PRIu32 ", data @%" PRIu32 " +%" PRIu64
                ", file %" PRIu64 "\n", h.metadata_offset, h.metadata_size, h.vocab_offset,
                h.vocab_size, h.tensor_index_offset, h.tensor_index_count, h.tensor_data_offset,
                h.tensor_data_size, h.total_file_size);
        fprintf(fp, "  crc32: header 0x%08" PRIx32 ", data 0x%08" PRIx32 ", file 0x%08" PRIx32
                "\n", h.header_checksum, h.data_checksum, h.file_checksum);
    }
    uint64_t nv = tbx_embd_vocab_count(f);
    fprintf(fp, "vocab:     %" PRIu64 " tokens", nv);
    uint32_t ids[5];
    if (embd_special(f, ids)) {
        for (int k = 0; k < 5; k++) {
            const char *p = NULL;
            size_t len = 0;
            fprintf(fp, "%s %s=%" PRIu32, k ? "," : ";", embd_special_names[k], ids[k]);
            if (tbx_embd_token(f, ids[k], &p, &len) == TBX_OK) {
                fputs(" ", fp);
                json_write_escaped(fp, p, len);
            }
        }
    }
    fputc('\n', fp);
}

static void info_embd_json(const tbx_file *f, json_out *j) {
    tbx_format fmt = tbx_file_format(f);
    if (fmt != TBX_FORMAT_EMBD && fmt != TBX_FORMAT_EMBD_LEGACY) return;
    json_keyz(j, "embd");
    json_begin_object(j);
    tbx_embd_header h = TBX_EMBD_HEADER_INIT;
    if (tbx_embd_header_get(f, &h) == TBX_OK) {
        const struct { const char *k; uint64_t v; } fields[] = {
            {"version_major", h.version_major}, {"version_minor", h.version_minor},
            {"flags", h.flags}, {"metadata_offset", h.metadata_offset},
            {"metadata_size", h.metadata_size}, {"vocab_offset", h.vocab_offset},
            {"vocab_size", h.vocab_size}, {"tensor_index_offset", h.tensor_index_offset},
            {"tensor_index_count", h.tensor_index_count},
            {"tensor_data_offset", h.tensor_data_offset}, {"tensor_data_size", h.tensor_data_size},
            {"total_file_size", h.total_file_size}, {"header_checksum", h.header_checksum},
            {"data_checksum", h.data_checksum}, {"file_checksum", h.file_checksum}};
        json_keyz(j, "header");
        json_begin_object(j);
        for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
            json_keyz(j, fields[i].k);
            json_u64(j, fields[i].v);
        }
        json_end_object(j);
    }
    json_keyz(j, "vocab_tokens");
    json_u64(j, tbx_embd_vocab_count(f));
    uint32_t ids[5];
    if (embd_special(f, ids)) {
        json_keyz(j, "special_tokens");
        json_begin_object(j);
        for (int k = 0; k < 5; k++) {
            json_keyz(j, embd_special_names[k]);
            json_u64(j, ids[k]);
        }
        json_end_object(j);
    }
    json_end_object(j);
}

static void info_human(tbx_file *f, const char *path) {
    FILE *fp = stdout;
    char sz[32];
    uint64_t size = tbx_file_size(f);
    fputs("file:      ", fp);
    json_write_escaped(fp, path, strlen(path));
    fprintf(fp, "\nformat:    %s\n", tbx_format_name(tbx_file_format(f)));
    fprintf(fp, "version:   %" PRIu32 "\n", tbx_file_version(f));
    fprintf(fp, "size:      %" PRIu64 " bytes", size);
    if (size >= 1024) fprintf(fp, " (%s)", cli_format_size(sz, size));
    fputc('\n', fp);
    info_embd_human(f, fp);
    /* a set opened as one file (GGUF split set, Hugging Face directory): its files */
    uint64_t nparts = tbx_file_part_count(f);
    if (nparts > 1) {
        uint64_t all = 0, psize = 0;
        size_t wpart = 4;
        for (uint64_t i = 0; i < nparts; i++) {
            const char *pp = tbx_file_part_path(f, i, &psize);
            size_t w = pp ? json_escaped_width(pp, strlen(pp)) : 10;
            if (w > wpart) wpart = w;
            all += psize;
        }
        if (wpart > INFO_NAME_COL_MAX) wpart = INFO_NAME_COL_MAX;
        fprintf(fp, "files:     %" PRIu64 " (%" PRIu64 " bytes in all)\n", nparts, all);
        for (uint64_t i = 0; i < nparts && !ferror(fp); i++) {
            const char *pp = tbx_file_part_path(f, i, &psize);
            fputs("  ", fp);
            if (pp) json_write_escaped(fp, pp, strlen(pp));
            else fputs("(unnamed)", fp);
            print_pad(fp, pp ? json_escaped_width(pp, strlen(pp)) : 9, wpart);
            fprintf(fp, "  %12" PRIu64 "\n", psize);
        }
    }
    /* size variables (OINF): "NAME := VALUE" */
    uint64_t nsv = tbx_sizevar_count(f);
    if (nsv > 0) fprintf(fp, "sizevars:  %" PRIu64 "\n", nsv);
    for (uint64_t i = 0; i < nsv && !ferror(fp); i++) {
        const char *name = NULL;
        size_t nlen = 0;
        uint64_t value = 0;
        if (tbx_sizevar_get(f, i, &name, &nlen, &value) != TBX_OK) continue;
        fputs("  ", fp);
        json_write_escaped(fp, name, nlen);
        fprintf(fp, " := %" PRIu64 "\n", value);
    }

    /* metadata */
    uint64_t nmeta = tbx_meta_count(f);
    fprintf(fp, "metadata:  %" PRIu64 " %s\n", nmeta, nmeta == 1 ? "entry" : "entries");
    json_out j;
    json_init(&j, fp, 0);
    j.human = 1;
    cli_value_style st = {0, INFO_MAX_ITEMS, INFO_MAX_BYTES};
    for (uint64_t i = 0; i < nmeta && !ferror(fp); i++) {
        size_t klen = 0;
        const char *key = tbx_meta_key(f, i, &klen);
        const tbx_value *v = tbx_meta_value(f, i);
        fputs("  ", fp);
        if (key) json_write_escaped(fp, key, klen);
        fputs(" (", fp);
        if (v)
            cli_describe_type(fp, v);
        else
            fputs("?", fp);
        fputs(") = ", fp);
        json_init(&j, fp, 0);
        j.human = 1;
        cli_emit_value(&j, v, &st);
        fputc('\n', fp);
    }

    /* tensors: one pass for the column widths and totals, one to print */
    uint64_t nt = tbx_tensor_count(f);
    size_t wname = 4, wdtype = 5, wshape = 5, woff = 6, wbytes = 6;
    uint64_t total_bytes = 0, total_elems = 0;
    int any_note = 0;
    char shape[2048], note[256];
    for (uint64_t i = 0; i < nt; i++) {
        tbx_tensor_info ti = TBX_TENSOR_INFO_INIT;
        if (tbx_tensor_info_get(f, i, &ti) != TBX_OK) continue;
        size_t w = json_escaped_width_upto(ti.name ? ti.name : "", ti.name ? ti.name_len : 0,
                                           INFO_NAME_COL_MAX);
        if (w > wname) wname = w;
        w = strlen(cli_dtype_name(ti.dtype));
        if (w > wdtype) wdtype = w;
        w = format_shape(shape, sizeof shape, ti.shape, ti.ndim);
        if (w > wshape) wshape = w;
        if ((size_t)digits_u64(ti.offset) > woff) woff = (size_t)digits_u64(ti.offset);
        if ((size_t)digits_u64(ti.nbytes) > wbytes) wbytes = (size_t)digits_u64(ti.nbytes);
        total_bytes += ti.nbytes;
        total_elems += ti.nelems;
        storage_note(f, i, &ti, note, sizeof note);
        if (note[0]) any_note = 1;
    }
    if (wname > INFO_NAME_COL_MAX) wname = INFO_NAME_COL_MAX;
    fprintf(fp, "tensors:   %" PRIu64, nt);
    if (nt > 0)
        fprintf(fp, " (%" PRIu64 " elements, %" PRIu64 " bytes of data)", total_elems,
                total_bytes);
    fputc('\n', fp);
    if (nt > 0) {
        fprintf(fp, "  %-*s  %-*s  %-*s  %*s  %*s%s\n", (int)wname, "NAME", (int)wdtype, "DTYPE",
                (int)wshape, "SHAPE", (int)woff, "OFFSET", (int)wbytes, "NBYTES",
                any_note ? "  STORAGE" : "");
    }
    for (uint64_t i = 0; i < nt && !ferror(fp); i++) {
        tbx_tensor_info ti = TBX_TENSOR_INFO_INIT;
        if (tbx_tensor_info_get(f, i, &ti) != TBX_OK) {
            fprintf(fp, "  (tensor %" PRIu64 ": no information)\n", i);
            continue;
        }
        const char *name = ti.name ? ti.name : "";
        size_t nlen = ti.name ? ti.name_len : 0;
        fputs("  ", fp);
        json_write_escaped(fp, name, nlen);
        print_pad(fp, json_escaped_width_upto(name, nlen, wname), wname);
        fprintf(fp, "  %-*s  ", (int)wdtype, cli_dtype_name(ti.dtype));
        size_t sl = format_shape(shape, sizeof shape, ti.shape, ti.ndim);
        fputs(shape, fp);
        print_pad(fp, sl, wshape);
        fprintf(fp, "  %*" PRIu64 "  %*" PRIu64, (int)woff, ti.offset, (int)wbytes, ti.nbytes);
        if (any_note) {
            storage_note(f, i, &ti, note, sizeof note);
            if (note[0]) fprintf(fp, "  %s", note);
        }
        fputc('\n', fp);
    }

    /* sections */
    uint64_t ns = tbx_section_count(f);
    if (ns > 0) {
        size_t wsec = 4;
        for (uint64_t i = 0; i < ns; i++) {
            tbx_section_info si = TBX_SECTION_INFO_INIT;
            if (tbx_section_info_get(f, i, &si) != TBX_OK || !si.name) continue;
            size_t w = json_escaped_width(si.name, strlen(si.name));
            if (w > wsec) wsec = w;
        }
        if (wsec > INFO_NAME_COL_MAX) wsec = INFO_NAME_COL_MAX;
        fprintf(fp, "sections:  %" PRIu64 "\n", ns);
        fprintf(fp, "  %-*s  %10s  %12s  %12s\n", (int)wsec, "NAME", "TYPE", "OFFSET", "SIZE");
        for (uint64_t i = 0; i < ns && !ferror(fp); i++) {
            tbx_section_info si = TBX_SECTION_INFO_INIT;
            if (tbx_section_info_get(f, i, &si) != TBX_OK) continue;
            const char *name = si.name ? si.name : "";
            fputs("  ", fp);
            json_write_escaped(fp, name, strlen(name));
            print_pad(fp, json_escaped_width(name, strlen(name)), wsec);
            fprintf(fp, "  %10" PRIu32 "  %12" PRIu64 "  %12" PRIu64 "\n", si.type, si.offset,
                    si.size);
        }
    }
    print_mcf_directory(fp, f);
}

/* An MCF file's section directory (human output). */
static void print_mcf_directory(FILE *fp, const tbx_file *f) {
    uint64_t n = tbx_mcf_section_count(f);
    if (n == 0) return;
    fprintf(fp, "directory: %" PRIu64 " MCF sections\n", n);
    fprintf(fp, "  %-6s  %-22s  %7s  %12s  %12s\n", "TYPE", "NAME", "VERSION", "OFFSET", "SIZE");
    for (uint64_t i = 0; i < n && !ferror(fp); i++) {
        tbx_mcf_section e;
        if (tbx_mcf_section_get(f, i, &e) != TBX_OK) continue;
        fprintf(fp, "  0x%04" PRIx32 "  %-22s  %7" PRIu32 "  %12" PRIu64 "  %12" PRIu64 "\n", e.type,
                e.name, e.version, e.offset, e.size);
    }
}

/* Component list of a tensor that is not plain dense raw data (JSON). */
static void json_components(json_out *j, const tbx_file *f, uint64_t i,
                            const tbx_tensor_info *ti) {
    json_keyz(j, "components");
    json_begin_array(j);
    for (uint32_t c = 0; c < ti->ncomponents; c++) {
        tbx_component_info ci = TBX_COMPONENT_INFO_INIT;
        if (tbx_component_info_get(f, i, c, &ci) != TBX_OK) continue;
        json_begin_object(j);
        json_keyz(j, "name");
        json_stringz(j, ci.name ? ci.name : "");
        json_keyz(j, "dtype");
        json_stringz(j, cli_dtype_name(ci.dtype));
        json_keyz(j, "offset");
        json_u64(j, ci.offset);
        json_keyz(j, "stored_bytes");
        json_u64(j, ci.stored_bytes);
        json_keyz(j, "nbytes");
        json_u64(j, ci.nbytes);
        json_keyz(j, "encoding");
        json_stringz(j, tbx_encoding_name(ci.encoding));
        if (ci.digest) {
            json_keyz(j, "digest");
            json_stringz(j, ci.digest);
        }
        json_end_object(j);
    }
    json_end_array(j);
}

/* A scale / zero member of the "quant" object (docs/cli.md). */
static void json_quant_param(json_out *j, const tbx_file *f, uint64_t i, const char *key,
                             const tbx_quant_param *p) {
    json_keyz(j, key);
    json_begin_object(j);
    json_keyz(j, "scope");
    json_stringz(j, tbx_quant_scope_name(p->scope));
    if (p->scope != TBX_QSCOPE_NONE) {
        json_keyz(j, "dtype");
        json_stringz(j, cli_dtype_name(p->dtype));
    }
    if (p->scope == TBX_QSCOPE_CHANNEL) {
        json_keyz(j, "axis");
        json_u64(j, p->axis);
    }
    if (p->count) {
        json_keyz(j, "count");
        json_u64(j, p->count);
    }
    tbx_component_info ci;
    if (p->component >= 0 && tbx_component_info_get(f, i, (uint32_t)p->component, &ci) == TBX_OK) {
        json_keyz(j, "component");
        json_stringz(j, ci.name ? ci.name : "");
    }
    if (p->values) {
        json_keyz(j, "values");
        json_begin_array(j);
        for (uint64_t k = 0; k < p->count && !ferror(stdout); k++) {
            const unsigned char *b = (const unsigned char *)p->values;
            if (p->dtype == TBX_DT_F32) {
                float v;
                memcpy(&v, b + 4 * k, 4);
                json_float(j, v, TBX_V_F32);
            } else if (p->dtype == TBX_DT_I32) {
                int32_t v;
                memcpy(&v, b + 4 * k, 4);
                json_i64(j, v);
            } else {
                json_null(j);
            }
        }
        json_end_array(j);
    }
    json_end_object(j);
}

/* The "quant" object of a quantized tensor: the same schema for every format. */
static void json_quant(json_out *j, const tbx_file *f, uint64_t i, const cli_value_style *st) {
    tbx_quant_info q;
    q.struct_size = sizeof q;
    if (tbx_tensor_quant_get(f, i, &q) != TBX_OK) return;
    json_keyz(j, "quant");
    json_begin_object(j);
    json_keyz(j, "method");
    json_stringz(j, tbx_quant_method_name(q.method));
    json_keyz(j, "code_dtype");
    json_stringz(j, cli_dtype_name(q.code_dtype));
    json_keyz(j, "bits");
    json_u64(j, q.bits);
    json_keyz(j, "signed");
    json_bool(j, q.code_signed != 0);
    json_keyz(j, "block_size");
    json_u64(j, q.block_size);
    json_keyz(j, "super_block_size");
    json_u64(j, q.super_block_size);
    json_quant_param(j, f, i, "scale", &q.scale);
    json_quant_param(j, f, i, "zero", &q.zero);
    json_keyz(j, "domain");
    json_stringz(j, tbx_quant_domain_name(q.domain));
    json_keyz(j, "clip");
    if (q.has_clip) {
        json_begin_array(j);
        json_float(j, q.clip_min, TBX_V_F64);
        json_float(j, q.clip_max, TBX_V_F64);
        json_end_array(j);
    } else {
        json_null(j);
    }
    json_keyz(j, "params");
    cli_emit_value(j, q.params, st);
    json_end_object(j);
}

/* Is tensor i stored as anything but one raw component of a dense tensor without a digest? */
static int is_plain(const tbx_file *f, uint64_t i, const tbx_tensor_info *ti) {
    if (ti->layout != TBX_LAYOUT_DENSE) return 0;
    if (ti->ncomponents == 0) return 1;
    if (ti->ncomponents > 1) return 0;
    tbx_component_info ci = TBX_COMPONENT_INFO_INIT;
    if (tbx_component_info_get(f, i, 0, &ci) != TBX_OK) return 1;
    return ci.encoding == TBX_ENC_RAW && ci.digest == NULL;
}

static void info_json(tbx_file *f, int typed) {
    json_out j;
    json_init(&j, stdout, 2);
    json_begin_object(&j);
    json_keyz(&j, "format");
    json_stringz(&j, tbx_format_name(tbx_file_format(f)));
    json_keyz(&j, "version");
    json_u64(&j, tbx_file_version(f));
    /* a set opened as one file: its files (part 0 first) */
    uint64_t nparts = tbx_file_part_count(f);
    if (nparts > 1) {
        json_keyz(&j, "files");
        json_begin_array(&j);
        for (uint64_t i = 0; i < nparts && !ferror(stdout); i++) {
            uint64_t psize = 0;
            const char *pp = tbx_file_part_path(f, i, &psize);
            json_begin_object(&j);
            json_keyz(&j, "path");
            if (pp) json_stringz(&j, pp);
            else json_null(&j);
            json_keyz(&j, "size");
            json_u64(&j, psize);
            json_end_object(&j);
        }
        json_end_array(&j);
    }
    /* size variables: for OINF files (always) and any file that has some */
    uint64_t nsv = tbx_sizevar_count(f);
    if (nsv > 0 || tbx_file_format(f) == TBX_FORMAT_OINF) {
        json_keyz(&j, "sizevars");
        json_begin_object(&j);
        for (uint64_t i = 0; i < nsv && !ferror(stdout); i++) {
            const char *name = NULL;
            size_t nlen = 0;
            uint64_t value = 0;
            if (tbx_sizevar_get(f, i, &name, &nlen, &value) != TBX_OK) continue;
            json_key(&j, name, nlen);
            json_u64(&j, value);
        }
        json_end_object(&j);
    }

    info_embd_json(f, &j);

    json_keyz(&j, "metadata");
    json_begin_object(&j);
    cli_value_style st = {typed, 0, 0};
    uint64_t nmeta = tbx_meta_count(f);
    for (uint64_t i = 0; i < nmeta && !ferror(stdout); i++) {
        size_t klen = 0;
        const char *key = tbx_meta_key(f, i, &klen);
        json_key(&j, key ? key : "", key ? klen : 0);
        cli_emit_value(&j, tbx_meta_value(f, i), &st);
    }
    json_end_object(&j);

    json_keyz(&j, "tensors");
    json_begin_array(&j);
    uint64_t nt = tbx_tensor_count(f);
    for (uint64_t i = 0; i < nt && !ferror(stdout); i++) {
        tbx_tensor_info ti = TBX_TENSOR_INFO_INIT;
        if (tbx_tensor_info_get(f, i, &ti) != TBX_OK) continue;
        json_begin_object(&j);
        json_keyz(&j, "name");
        json_string(&j, ti.name ? ti.name : "", ti.name ? ti.name_len : 0);
        json_keyz(&j, "dtype");
        json_stringz(&j, cli_dtype_name(ti.dtype));
        json_keyz(&j, "shape");
        json_begin_array(&j);
        for (uint32_t d = 0; d < ti.ndim && ti.shape; d++) json_u64(&j, ti.shape[d]);
        json_end_array(&j);
        json_keyz(&j, "offset");
        json_u64(&j, ti.offset);
        json_keyz(&j, "nbytes");
        json_u64(&j, ti.nbytes);
        if (ti.flags & TBX_TENSOR_UNREADABLE) {
            json_keyz(&j, "unreadable");
            json_bool(&j, 1);
        }
        if (!is_plain(f, i, &ti)) {
            const char *ln = tbx_layout_name(ti.layout);
            json_keyz(&j, "layout");
            json_stringz(&j, ln ? ln : "?");
            json_components(&j, f, i, &ti);
        }
        json_quant(&j, f, i, &st);
        json_end_object(&j);
    }
    json_end_array(&j);

    uint64_t ns = tbx_section_count(f);
    if (ns > 0) {
        json_keyz(&j, "sections");
        json_begin_array(&j);
        for (uint64_t i = 0; i < ns && !ferror(stdout); i++) {
            tbx_section_info si = TBX_SECTION_INFO_INIT;
            if (tbx_section_info_get(f, i, &si) != TBX_OK) continue;
            json_begin_object(&j);
            json_keyz(&j, "name");
            json_stringz(&j, si.name ? si.name : "");
            json_keyz(&j, "type");
            json_u64(&j, si.type);
            json_keyz(&j, "offset");
            json_u64(&j, si.offset);
            json_keyz(&j, "size");
            json_u64(&j, si.size);
            json_end_object(&j);
        }
        json_end_array(&j);
    }
    uint64_t nd = tbx_mcf_section_count(f);
    if (nd > 0) {
        json_keyz(&j, "mcf_directory");
        json_begin_array(&j);
        for (uint64_t i = 0; i < nd && !ferror(stdout); i++) {
            tbx_mcf_section e;
            if (tbx_mcf_section_get(f, i, &e) != TBX_OK) continue;
            json_begin_object(&j);
            json_keyz(&j, "type");
            json_u64(&j, e.type);
            json_keyz(&j, "name");
            json_stringz(&j, e.name);
            json_keyz(&j, "version");
            json_u64(&j, e.version);
            json_keyz(&j, "offset");
            json_u64(&j, e.offset);
            json_keyz(&j, "size");
            json_u64(&j, e.size);
            json_end_object(&j);
        }
        json_end_array(&j);
    }
    json_end_object(&j);
    json_finish(&j);
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
        info_json(f, cli_flag(a, "types"));
    else
        info_human(f, path);
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
