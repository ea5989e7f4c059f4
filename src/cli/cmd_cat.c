/*
 * cmd_cat.c - `tbx cat FILE TENSOR [--as f32]`: a tensor's bytes to stdout;
 * `tbx cat FILE --section NAME`: a section's bytes (MCF's config.json, ...) verbatim.
 *
 * Without --as, the stored bytes, decompressed: a dense tensor is streamed with
 * tbx_tensor_read_range in 4 MiB chunks, a sparse or grouped tensor gives its components'
 * decoded bytes one after the other, in component order, each streamed with
 * tbx_component_read_range (compressed data is decoded once, in bounded memory, whatever size
 * it declares). Only a format that cannot read ranges of encoded data has it read whole.
 *
 * With --as f32, the values decoded to little-endian float32 in row-major order
 * (tbx_tensor_read_f32), in chunks whose element count is a multiple of the dtype's block size
 * (and of the row length for dtypes whose payload depends on the shape).
 *
 * A reader that goes away (EPIPE) ends the command quietly with status 1.
 */
#define _GNU_SOURCE
#include "cli.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const cli_option cat_options[] = {
    {"as", 0, "TYPE", "decode the values instead of copying bytes; TYPE: f32"},
    {"section", 0, "NAME", "write the bytes of the section NAME instead of a tensor's"},
    {NULL, 0, NULL, NULL},
};

#define CAT_CHUNK_BYTES ((size_t)4 << 20)
#define CAT_CHUNK_ELEMS ((uint64_t)1 << 20)

static int host_is_little_endian(void) {
    const uint16_t one = 1;
    unsigned char b;
    memcpy(&b, &one, 1);
    return b == 1;
}

/* Reads a whole buffer with one of the size-query read functions and writes it out. */
typedef tbx_status (*whole_read_fn)(tbx_file *f, uint64_t i, uint32_t c, void *buf, size_t cap,
                                    size_t *needed, tbx_error *err);

static int write_whole(tbx_file *f, uint64_t i, uint32_t c, whole_read_fn fn, const char *path) {
    tbx_error err;
    memset(&err, 0, sizeof err);
    size_t needed = 0;
    tbx_status st = fn(f, i, c, NULL, 0, &needed, &err);
    if (st == TBX_OK) return CLI_OK; /* nothing to write */
    if (st != TBX_E_BUFFER_TOO_SMALL) {
        cli_report(path, st, &err);
        return CLI_FAIL;
    }
    void *buf = malloc(needed ? needed : 1);
    if (!buf) {
        cli_error("%s: out of memory reading %zu bytes", path, needed);
        return CLI_FAIL;
    }
    memset(&err, 0, sizeof err);
    st = fn(f, i, c, buf, needed, &needed, &err);
    int rc;
    if (st != TBX_OK) {
        cli_report(path, st, &err);
        rc = CLI_FAIL;
    } else {
        rc = cli_write_stdout(buf, needed);
    }
    free(buf);
    return rc;
}

/* The bar of a remote read (a URL: the bytes come over the network): bytes done of total. */
typedef struct cat_bar {
    cli_progress p;
    uint64_t done, total;
} cat_bar;

static int is_url(const char *s) {
    return !strncmp(s, "http://", 7) || !strncmp(s, "https://", 8) || !strncmp(s, "s3://", 5) ||
           !strncmp(s, "hf://", 5);
}

static void bar_step(cat_bar *b, uint64_t n) {
    if (!b) return;
    b->done += n;
    cli_progress_cb(&b->p, b->done, b->total);
}

/* Streams component c of tensor i (dense: the tensor's bytes) in 4 MiB ranges. */
static int cat_component(tbx_file *f, uint64_t i, uint32_t c, const char *path, cat_bar *bar) {
    tbx_component_info ci = TBX_COMPONENT_INFO_INIT;
    if (tbx_component_info_get(f, i, c, &ci) != TBX_OK) {
        cli_error("%s: no component %u", path, c);
        return CLI_FAIL;
    }
    uint64_t total = ci.nbytes;
    size_t cap = total < CAT_CHUNK_BYTES ? (size_t)total : CAT_CHUNK_BYTES;
    void *buf = malloc(cap ? cap : 1);
    if (!buf) {
        cli_error("out of memory");
        return CLI_FAIL;
    }
    int rc = CLI_OK;
    for (uint64_t pos = 0; pos < total; ) {
        size_t len = total - pos < cap ? (size_t)(total - pos) : cap;
        tbx_error err;
        memset(&err, 0, sizeof err);
        tbx_status st = tbx_component_read_range(f, i, c, pos, buf, len, &err);
        if (st == TBX_E_UNSUPPORTED && pos == 0) {
            /* the library cannot stream this one: read it whole */
            free(buf);
            return write_whole(f, i, c, tbx_component_read, path);
        }
        if (st != TBX_OK) {
            cli_report(path, st, &err);
            rc = CLI_FAIL;
            break;
        }
        rc = cli_write_stdout(buf, len);
        if (rc != CLI_OK) break;
        pos += len;
        bar_step(bar, len);
    }
    free(buf);
    return rc;
}

static int cat_stored(tbx_file *f, uint64_t i, const tbx_tensor_info *ti, const char *path,
                      cat_bar *bar) {
    if (bar) {
        for (uint32_t c = 0; c < ti->ncomponents; c++) {
            tbx_component_info ci = TBX_COMPONENT_INFO_INIT;
            if (tbx_component_info_get(f, i, c, &ci) == TBX_OK) bar->total += ci.nbytes;
        }
        cli_progress_cb(&bar->p, 0, bar->total);
    }
    for (uint32_t c = 0; c < ti->ncomponents; c++) {
        int rc = cat_component(f, i, c, path, bar);
        if (rc != CLI_OK) return rc;
    }
    return CLI_OK;
}

static uint64_t gcd_u64(uint64_t a, uint64_t b) {
    while (b) {
        uint64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

static int cat_f32(tbx_file *f, uint64_t i, const tbx_tensor_info *ti, const char *path,
                   cat_bar *bar) {
    const tbx_dtype_info *di = tbx_dtype_get(ti->dtype);
    uint64_t unit = (di && di->block_size > 0) ? di->block_size : 1;
    if (di && (di->flags & TBX_DTF_SHAPED) && ti->ndim > 0 && ti->shape &&
        ti->shape[ti->ndim - 1] > 0) {
        uint64_t row = ti->shape[ti->ndim - 1];
        uint64_t g = gcd_u64(unit, row);
        if (unit / g > UINT64_MAX / row) {
            cli_error("%s: tensor too large to decode in chunks", path);
            return CLI_FAIL;
        }
        unit = unit / g * row;
    }
    uint64_t chunk = CAT_CHUNK_ELEMS / unit * unit;
    if (chunk == 0) chunk = unit;
    if (chunk > ti->nelems) chunk = ti->nelems;
    if (chunk == 0) return CLI_OK; /* no elements */
    if (chunk > SIZE_MAX / sizeof(float)) {
        cli_error("%s: tensor too large to decode in chunks", path);
        return CLI_FAIL;
    }
    float *buf = malloc((size_t)chunk * sizeof(float));
    if (!buf) {
        cli_error("%s: out of memory", path);
        return CLI_FAIL;
    }
    int swap = !host_is_little_endian();
    int rc = CLI_OK;
    if (bar) { /* the values decoded, as 4-byte floats */
        bar->total = ti->nelems * sizeof(float);
        cli_progress_cb(&bar->p, 0, bar->total);
    }
    for (uint64_t first = 0; first < ti->nelems; ) {
        uint64_t count = ti->nelems - first < chunk ? ti->nelems - first : chunk;
        tbx_error err;
        memset(&err, 0, sizeof err);
        tbx_status st = tbx_tensor_read_f32(f, i, first, count, buf, &err);
        if (st != TBX_OK) {
            cli_report(path, st, &err);
            rc = CLI_FAIL;
            break;
        }
        if (swap) {
            for (uint64_t k = 0; k < count; k++) {
                unsigned char *p = (unsigned char *)&buf[k], t;
                t = p[0]; p[0] = p[3]; p[3] = t;
                t = p[1]; p[1] = p[2]; p[2] = t;
            }
        }
        rc = cli_write_stdout(buf, (size_t)count * sizeof(float));
        bar_step(bar, count * sizeof(float));
        if (rc != CLI_OK) break;
        first += count;
    }
    free(buf);
    return rc;
}

/* A section's bytes, read whole (sections are metadata-sized: config.json, tokenizer.json). */
static int cat_section(tbx_file *f, const char *name, const char *path) {
    uint64_t ns = tbx_section_count(f), i;
    tbx_section_info si = TBX_SECTION_INFO_INIT;
    for (i = 0; i < ns; i++)
        if (tbx_section_info_get(f, i, &si) == TBX_OK && si.name && strcmp(si.name, name) == 0)
            break;
    if (i == ns) {
        cli_error("no section named '%s' in %s", name, path);
        return CLI_FAIL;
    }
    if (si.size > SIZE_MAX) {
        cli_error("section '%s' in %s is too large", name, path);
        return CLI_FAIL;
    }
    void *buf = malloc(si.size ? (size_t)si.size : 1);
    if (!buf) {
        cli_error("out of memory for section '%s' (%" PRIu64 " bytes)", name, si.size);
        return CLI_FAIL;
    }
    tbx_error err;
    memset(&err, 0, sizeof err);
    size_t needed = 0;
    int rc = CLI_OK;
    tbx_status st = tbx_section_read(f, i, buf, (size_t)si.size, &needed, &err);
    if (st != TBX_OK) {
        cli_report(path, st, &err);
        rc = CLI_FAIL;
    } else if (si.size && fwrite(buf, 1, (size_t)si.size, stdout) != si.size) {
        rc = CLI_FAIL;
    }
    if (rc == CLI_OK && fflush(stdout) != 0) rc = CLI_FAIL;
    free(buf);
    return rc;
}

static int cat_run(const cli_args *a) {
    const char *path = a->pos[0], *name = a->npos > 1 ? a->pos[1] : NULL;
    const char *as = cli_value(a, "as"), *section = cli_value(a, "section");
    if (as && strcasecmp(as, "f32") != 0)
        return cli_usage_error(a, "--as %s: only f32 is supported", as);
    if (section && (name || as))
        return cli_usage_error(a, "--section takes no TENSOR and no --as");
    if (!section && !name) return cli_usage_error(a, "missing TENSOR (or --section NAME)");
    if (section) {
        tbx_file *sf = cli_open(a, path);
        if (!sf) return CLI_FAIL;
        int src = cat_section(sf, section, path);
        tbx_close(sf);
        return src;
    }

    tbx_file *f = cli_open(a, path);
    if (!f) return CLI_FAIL;
    int rc;
    uint64_t idx = 0;
    tbx_tensor_info ti = TBX_TENSOR_INFO_INIT;
    tbx_status st = tbx_tensor_find(f, name, &idx);
    if (st == TBX_E_NOT_FOUND) {
        cli_error("no tensor named '%s' in %s", name, path);
        rc = CLI_FAIL;
    } else if (st != TBX_OK || (st = tbx_tensor_info_get(f, idx, &ti)) != TBX_OK) {
        cli_report(path, st, NULL);
        rc = CLI_FAIL;
    } else if (ti.ncomponents == 0) {
        cli_error("tensor '%s' in %s has no data", name, path);
        rc = CLI_FAIL;
    } else {
        /* a URL's bytes come over the network: a bar on a terminal (cli_progress) */
        cat_bar bar;
        memset(&bar, 0, sizeof bar);
        int shown = is_url(path) && cli_progress_init(&bar.p, a, "cat");
        rc = as ? cat_f32(f, idx, &ti, path, shown ? &bar : NULL)
                : cat_stored(f, idx, &ti, path, shown ? &bar : NULL);
        if (shown) cli_progress_end(&bar.p, rc == CLI_OK);
    }
    tbx_close(f);
    return rc;
}

const cli_command cli_cmd_cat = {
    "cat",
    "FILE TENSOR [--as f32] | FILE --section NAME",
    "Write a tensor's stored bytes (or its values as float32), or a section, to standard output",
    "Without --as: the stored bytes (decompressed when the file compresses them; for sparse\n"
    "tensors each component's bytes in turn). With --as f32: the values decoded to\n"
    "little-endian float32, row-major (quantized data dequantized, sparse data densified).\n"
    "With --section NAME: the bytes of that section (e.g. an MCF file's config.json) verbatim.\n",
    cat_options,
    1,
    2,
    cat_run,
    NULL,
};
