/*
 * stats.c - `tbx info --stats FILE`: what the values of a file look like.
 *
 * The view follows the output of openinfer-oinf's verify_oinf.py, for every format:
 *
 *   B := 4                                            size variables (OINF)
 *
 *   mode: str = "clamp_up"                            metadata, with explicit types
 *   scale: f32[4] = { 0.5, 0.25, 1, 2 }
 *
 *   w1: f32[16, 32] = { 0.345584, ..., -1.11202 }     first 5 ... last 5 values
 *   - [nbytes: 2048, min: -2.71, max: 3.1, mean: -0.04, median: -0.0035, std: 0.92]
 *   - hist:
 *       [-2.71129, -2.13015)  ██████▍                  9
 *       ...
 *
 * Values are decoded to f32 with tbx_tensor_read_f32 in chunks of 2^20 elements, so memory stays
 * bounded. Over the finite values (NaN and infinities are counted apart) min, max, mean and std
 * (population, in double, chunks combined pairwise) are exact; the median is exact for tensors of
 * up to 2^24 elements (their finite values are kept and radix-selected) and estimated from a
 * deterministic reservoir sample of 2^20 values above that ("median≈"); the histogram is exact
 * (bigger tensors are read a second time to bin them). Previews of 8- to 64-bit integers and of
 * f64 are read exactly from the stored bytes. A tensor whose dtype cannot be decoded
 * gets one line saying so. Only the public API is used.
 */
#define _GNU_SOURCE
#include "cli.h"

#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define ST_CHUNK ((uint64_t)1 << 20)        /* elements decoded per read */
#define ST_EXACT_MAX ((uint64_t)1 << 24)    /* exact median up to this many elements */
#define ST_RESERVOIR ((size_t)1 << 20)      /* sample size above it */
#define ST_PREVIEW 5
#define ST_BINS 10
#define ST_INT_BINS 20                      /* integer values: one bin each when max-min <= 20 */
#define ST_BAR 40                           /* bar width in terminal cells */

/* "%.6g" like Python's format(v, ".6g") ("nan", "inf", "-inf" for non-finite values). */
static void fmt_g(char *buf, size_t cap, double v) {
    if (isnan(v)) snprintf(buf, cap, "nan");
    else if (isinf(v)) snprintf(buf, cap, v < 0 ? "-inf" : "inf");
    else snprintf(buf, cap, "%.6g", v);
}

/* A decoded element for a preview: integers as integers, bools as true/false. */
static void fmt_elem(char *buf, size_t cap, double v, tbx_dtype dt) {
    const tbx_dtype_info *di = tbx_dtype_get(dt);
    if (dt == TBX_DT_BOOL) snprintf(buf, cap, "%s", v != 0 ? "true" : "false");
    else if (di && (di->flags & TBX_DTF_INT || dt == TBX_DT_BITSET) && isfinite(v) &&
             fabs(v) < 9.3e18)
        snprintf(buf, cap, "%lld", (long long)v);
    else fmt_g(buf, cap, v);
}

static void print_shape(FILE *fp, const uint64_t *shape, uint32_t ndim) {
    fputc('[', fp);
    for (uint32_t d = 0; d < ndim && shape; d++) fprintf(fp, "%s%" PRIu64, d ? ", " : "", shape[d]);
    fputc(']', fp);
}

/* ------------------------------------------------------------------------------------------ */
/* Metadata                                                                                    */
/* ------------------------------------------------------------------------------------------ */

/* Element k of an NDARRAY value as a double (exact for integers up to 2^53). `dec` holds the
 * decoded values of packed dtypes. */
static double nd_elem(tbx_dtype dt, const unsigned char *p, uint64_t k, const float *dec) {
    if (dec) return dec[k];
    switch (dt) {
    case TBX_DT_I8: return (int8_t)p[k];
    case TBX_DT_U8: case TBX_DT_BOOL: case TBX_DT_BITSET: return p[k];
    case TBX_DT_I16: { int16_t x; memcpy(&x, p + 2 * k, 2); return x; }
    case TBX_DT_U16: { uint16_t x; memcpy(&x, p + 2 * k, 2); return x; }
    case TBX_DT_I32: { int32_t x; memcpy(&x, p + 4 * k, 4); return x; }
    case TBX_DT_U32: { uint32_t x; memcpy(&x, p + 4 * k, 4); return x; }
    case TBX_DT_I64: { int64_t x; memcpy(&x, p + 8 * k, 8); return (double)x; }
    case TBX_DT_U64: { uint64_t x; memcpy(&x, p + 8 * k, 8); return (double)x; }
    case TBX_DT_F16: { uint16_t x; memcpy(&x, p + 2 * k, 2); return tbx_f16_to_f32(x); }
    case TBX_DT_BF16: { uint16_t x; memcpy(&x, p + 2 * k, 2); return tbx_bf16_to_f32(x); }
    case TBX_DT_F32: { float x; memcpy(&x, p + 4 * k, 4); return x; }
    case TBX_DT_F64: { double x; memcpy(&x, p + 8 * k, 8); return x; }
    case TBX_DT_F8_E4M3: case TBX_DT_F8_E5M2: case TBX_DT_F8_E4M3FNUZ: case TBX_DT_F8_E5M2FNUZ:
    case TBX_DT_F8_E8M0:
        return tbx_f8_to_f32(dt, p[k]);
    default: return NAN;
    }
}

/* Exact integer rendering of 64-bit NDARRAY elements (doubles lose digits past 2^53). */
static int nd_elem_int64(char *buf, size_t cap, tbx_dtype dt, const unsigned char *p, uint64_t k) {
    if (dt == TBX_DT_I64) { int64_t x; memcpy(&x, p + 8 * k, 8); snprintf(buf, cap, "%" PRId64, x); return 1; }
    if (dt == TBX_DT_U64) { uint64_t x; memcpy(&x, p + 8 * k, 8); snprintf(buf, cap, "%" PRIu64, x); return 1; }
    return 0;
}

static void meta_ndarray(FILE *fp, const tbx_value *v) {
    tbx_dtype dt = TBX_DT_INVALID;
    uint32_t ndim = 0;
    const uint64_t *shape = NULL;
    size_t nbytes = 0;
    const unsigned char *data = tbx_value_data(v, &nbytes);
    tbx_value_ndarray(v, &dt, &ndim, &shape);
    uint64_t count = tbx_value_len(v);
    const tbx_dtype_info *di = tbx_dtype_get(dt);
    fputs(cli_dtype_name(dt), fp);
    if (ndim > 0) print_shape(fp, shape, ndim);
    fputs(" = ", fp);
    if (!di || !data || count == 0) {
        fputs(count == 0 ? "{ }\n" : "(no data)\n", fp);
        return;
    }
    float *dec = NULL;
    int fixed = di->block_size == 1 && !(di->flags & (TBX_DTF_PACKED | TBX_DTF_SHAPED)) &&
                di->bits >= 8 && di->bits % 8 == 0 && !(di->flags & TBX_DTF_COMPLEX);
    if (fixed && count > nbytes / (di->bits / 8)) fixed = 0;
    if (!fixed) {
        if (!(di->flags & TBX_DTF_DECODE) || count > (uint64_t)nbytes * 8 ||
            count > SIZE_MAX / sizeof(float) || !(dec = malloc((size_t)count * sizeof(float))) ||
            tbx_decode_f32(dt, data, nbytes, count, dec) != TBX_OK) {
            free(dec);
            fprintf(fp, "(%zu bytes, not decodable)\n", nbytes);
            return;
        }
    }
    char b[48];
    if (ndim == 0) {
        if (!nd_elem_int64(b, sizeof b, dt, data, 0)) fmt_elem(b, sizeof b, nd_elem(dt, data, 0, dec), dt);
        fprintf(fp, "%s\n", b);
        free(dec);
        return;
    }
    fputs("{ ", fp);
    for (uint64_t k = 0; k < count; k++) {
        if (count > 2 * ST_PREVIEW && k == ST_PREVIEW) {
            fputs("..., ", fp);
            k = count - ST_PREVIEW;
        }
        if (!nd_elem_int64(b, sizeof b, dt, data, k)) fmt_elem(b, sizeof b, nd_elem(dt, data, k, dec), dt);
        fprintf(fp, "%s%s", b, k + 1 < count ? ", " : "");
    }
    fputs(" }\n", fp);
    free(dec);
}

static void meta_line(FILE *fp, const char *key, size_t klen, const tbx_value *v) {
    jout_write_escaped(fp, key, klen);
    fputs(": ", fp);
    tbx_value_type t = tbx_value_type_of(v);
    char b[48];
    switch (t) {
    case TBX_V_BOOL: case TBX_V_U8: case TBX_V_U16: case TBX_V_U32: case TBX_V_U64: {
        uint64_t u = 0;
        tbx_value_get_u64(v, &u);
        if (t == TBX_V_BOOL) fprintf(fp, "bool = %s\n", u ? "true" : "false");
        else fprintf(fp, "%s = %" PRIu64 "\n", tbx_value_type_name(t), u);
        return;
    }
    case TBX_V_I8: case TBX_V_I16: case TBX_V_I32: case TBX_V_I64: {
        int64_t i = 0;
        tbx_value_get_i64(v, &i);
        fprintf(fp, "%s = %" PRId64 "\n", tbx_value_type_name(t), i);
        return;
    }
    case TBX_V_F16: case TBX_V_BF16: case TBX_V_F32: case TBX_V_F64: {
        double d = 0;
        tbx_value_get_f64(v, &d);
        fmt_g(b, sizeof b, d);
        fprintf(fp, "%s = %s\n", tbx_value_type_name(t), b);
        return;
    }
    case TBX_V_STRING: {
        size_t n = 0;
        const char *s = tbx_value_get_str(v, &n);
        size_t shown = jout_utf8_cut(s ? s : "", s ? n : 0, 256);
        fputs("str = \"", fp);
        jout_write_escaped(fp, s ? s : "", shown);
        fputs(shown < n ? "\"...\n" : "\"\n", fp);
        return;
    }
    case TBX_V_NDARRAY:
        meta_ndarray(fp, v);
        return;
    case TBX_V_BITSET: {
        size_t nbytes = 0;
        const unsigned char *bits = tbx_value_data(v, &nbytes);
        fprintf(fp, "bitset[%" PRIu64 "] =", tbx_value_len(v));
        for (size_t k = 0; bits && k < nbytes && k < 8; k++) fprintf(fp, " %02x", bits[k]);
        fputs(nbytes > 8 ? " ...\n" : "\n", fp);
        return;
    }
    default: {
        json_out j;
        cli_value_style st = {0, 16, 256};
        cli_describe_type(fp, v);
        fputs(" = ", fp);
        jout_init(&j, fp, 0);
        j.human = 1;
        cli_emit_value(&j, v, &st);
        fputc('\n', fp);
        return;
    }
    }
}

/* ------------------------------------------------------------------------------------------ */
/* Tensor statistics                                                                           */
/* ------------------------------------------------------------------------------------------ */
typedef struct st_acc {
    uint64_t n;            /* finite values */
    uint64_t nan, inf;
    double mean, m2, min, max;
    uint32_t *keep;        /* exact median: every finite value (as an order key) */
    size_t nkeep, cap_keep;
    uint32_t *res;         /* approximate median: reservoir of finite values (order keys) */
    size_t nres;
    uint64_t rng;
    float head[ST_PREVIEW], tail[ST_PREVIEW];
    uint64_t seen;         /* all values, for the preview */
} st_acc;

static uint64_t splitmix(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Order-preserving keys of floats (no NaN): comparing keys compares the values. */
static uint32_t fkey(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return (u & 0x80000000u) ? ~u : u | 0x80000000u;
}
static float unkey(uint32_t k) {
    uint32_t u = (k & 0x80000000u) ? k & 0x7FFFFFFFu : ~k;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* Adds a chunk: previews, counts, min/max, and mean/M2 combined chunk by chunk (two passes over
 * the chunk, then Chan et al.'s pairwise update), which keeps Welford's accuracy at the cost of
 * a few additions per element. */
static void acc_add(st_acc *a, const float *x, uint64_t n) {
    for (uint64_t k = 0; k < n && a->seen + k < ST_PREVIEW; k++) a->head[a->seen + k] = x[k];
    for (uint64_t k = n > ST_PREVIEW ? n - ST_PREVIEW : 0; k < n; k++)
        a->tail[(a->seen + k) % ST_PREVIEW] = x[k];
    a->seen += n;
    uint64_t cn = 0;
    double sum = 0, mn = 0, mx = 0;
    for (uint64_t k = 0; k < n; k++) {
        float v = x[k];
        if (!isfinite(v)) {
            if (isnan(v)) a->nan++;
            else a->inf++;
            continue;
        }
        double d = v;
        if (cn == 0) mn = mx = d;
        else {
            mn = d < mn ? d : mn;
            mx = d > mx ? d : mx;
        }
        sum += d;
        cn++;
        if (a->keep) a->keep[a->nkeep++] = fkey(v);
    }
    if (cn == 0) return;
    double cmean = sum / (double)cn, m2 = 0;
    for (uint64_t k = 0; k < n; k++) {
        if (!isfinite(x[k])) continue;
        double d = (double)x[k] - cmean;
        m2 += d * d;
    }
    if (a->n == 0) {
        a->min = mn;
        a->max = mx;
        a->mean = cmean;
        a->m2 = m2;
    } else {
        if (mn < a->min) a->min = mn;
        if (mx > a->max) a->max = mx;
        double na = (double)a->n, nb = (double)cn, nt = na + nb, delta = cmean - a->mean;
        a->mean += delta * nb / nt;
        a->m2 += m2 + delta * delta * na * nb / nt;
    }
    uint64_t before = a->n;
    a->n += cn;
    if (a->res) { /* reservoir sampling (algorithm R) over the finite values */
        uint64_t seen = before;
        for (uint64_t k = 0; k < n; k++) {
            if (!isfinite(x[k])) continue;
            seen++;
            if (a->nres < ST_RESERVOIR) a->res[a->nres++] = fkey(x[k]);
            else {
                uint64_t j = splitmix(&a->rng) % seen;
                if (j < ST_RESERVOIR) a->res[j] = fkey(x[k]);
            }
        }
    }
}

/* Order statistics k1 and k2 (k2 == k1 or k1 + 1) of the keys a[0..m): a radix selection,
 * one byte at a time from the top (a counting pass, then the matching keys are kept in place);
 * when the two fall in different buckets they are the largest key of the first and the smallest
 * of the second. Linear time whatever the values; a[] is overwritten. */
static void radix_select2(uint32_t *a, size_t m, size_t k1, size_t k2, uint32_t *v1,
                          uint32_t *v2) {
    for (int shift = 24; shift >= 0; shift -= 8) {
        size_t cnt[256];
        memset(cnt, 0, sizeof cnt);
        for (size_t i = 0; i < m; i++) cnt[(a[i] >> shift) & 255u]++;
        size_t b1 = 0, b2 = 0;
        while (k1 >= cnt[b1]) k1 -= cnt[b1++];
        while (k2 >= cnt[b2]) k2 -= cnt[b2++];
        if (b1 != b2) {
            uint32_t mx = 0, mn = UINT32_MAX;
            for (size_t i = 0; i < m; i++) {
                size_t b = (a[i] >> shift) & 255u;
                if (b == b1 && a[i] > mx) mx = a[i];
                if (b == b2 && a[i] < mn) mn = a[i];
            }
            *v1 = mx;
            *v2 = mn;
            return;
        }
        size_t w = 0;
        for (size_t i = 0; i < m; i++)
            if (((a[i] >> shift) & 255u) == b1) a[w++] = a[i];
        m = w;
    }
    *v1 = *v2 = a[0]; /* every remaining key is the same */
}

/* Median of the keys a[0..n) (numpy's: mean of the two middle values for an even count). */
static double median_of(uint32_t *a, size_t n) {
    if (n == 0) return NAN;
    uint32_t lo, hi;
    radix_select2(a, n, (n - 1) / 2, n / 2, &lo, &hi);
    return ((double)unkey(lo) + (double)unkey(hi)) / 2;
}

typedef struct st_hist {
    int nb;
    int integer;           /* one bin per integer value */
    double lo, hi;
    uint64_t count[ST_INT_BINS + 1];
} st_hist;

static void hist_init(st_hist *h, const st_acc *a, int int_values) {
    memset(h, 0, sizeof *h);
    h->lo = a->min;
    h->hi = a->max;
    if (int_values && a->max - a->min <= ST_INT_BINS) {
        h->integer = 1;
        h->nb = (int)(a->max - a->min) + 1;
    } else {
        h->nb = a->max > a->min ? ST_BINS : 1;
    }
}

static void hist_add(st_hist *h, const float *x, uint64_t n) {
    /* numpy's rule: bin = floor((x - lo) * nb / (hi - lo)), the maximum in the last bin */
    double scale = h->integer || h->nb == 1 ? 1.0 : h->nb / (h->hi - h->lo);
    for (uint64_t k = 0; k < n; k++) {
        double d = x[k];
        if (!isfinite(d)) continue;
        int b = h->nb == 1 ? 0 : (int)((d - h->lo) * scale);
        if (b < 0) b = 0;
        if (b >= h->nb) b = h->nb - 1;
        h->count[b]++;
    }
}

static void hist_add_keys(st_hist *h, const uint32_t *k, uint64_t n) {
    float buf[1024];
    while (n > 0) {
        size_t m = n < 1024 ? (size_t)n : 1024;
        for (size_t i = 0; i < m; i++) buf[i] = unkey(k[i]);
        hist_add(h, buf, m);
        k += m;
        n -= m;
    }
}

/* A bar of `cells` eighths of a terminal cell, padded to ST_BAR cells. */
static void print_bar(FILE *fp, uint64_t eighths) {
    static const char *const part[8] = {"", "▏", "▎", "▍", "▌", "▋", "▊", "▉"};
    uint64_t full = eighths / 8, rest = eighths % 8, cells = full + (rest != 0);
    for (uint64_t i = 0; i < full; i++) fputs("█", fp);
    fputs(part[rest], fp);
    for (uint64_t i = cells; i < ST_BAR; i++) fputc(' ', fp);
}

static void hist_print(FILE *fp, const st_hist *h) {
    uint64_t maxc = 0, total = 0;
    for (int b = 0; b < h->nb; b++) {
        if (h->count[b] > maxc) maxc = h->count[b];
        total += h->count[b];
    }
    char labels[ST_INT_BINS + 1][96];
    size_t wl = 0;
    double w = (h->hi - h->lo) / h->nb;
    for (int b = 0; b < h->nb; b++) {
        if (h->integer) {
            snprintf(labels[b], sizeof labels[b], "%lld", (long long)(h->lo + b));
        } else if (h->nb == 1) {
            char x[32];
            fmt_g(x, sizeof x, h->lo);
            snprintf(labels[b], sizeof labels[b], "[%s, %s]", x, x);
        } else {
            char x[32], y[32];
            fmt_g(x, sizeof x, h->lo + w * b);
            fmt_g(y, sizeof y, b + 1 == h->nb ? h->hi : h->lo + w * (b + 1));
            snprintf(labels[b], sizeof labels[b], "[%s, %s%c", x, y, b + 1 == h->nb ? ']' : ')');
        }
        if (strlen(labels[b]) > wl) wl = strlen(labels[b]);
    }
    fputs("- hist:\n", fp);
    for (int b = 0; b < h->nb; b++) {
        uint64_t e = maxc ? (h->count[b] * 8 * ST_BAR + maxc / 2) / maxc : 0;
        if (h->count[b] && e == 0) e = 1;
        fprintf(fp, "    %*s  ", (int)wl, labels[b]);
        print_bar(fp, e);
        fprintf(fp, " %" PRIu64 "\n", h->count[b]);
    }
    (void)total;
}

/* Exact preview of element k of an 8- to 64-bit integer or f64 tensor (f32 decoding rounds
 * them): reads its stored bytes. Returns 0 when the tensor is not such a tensor or cannot
 * be read that way (the caller then shows the decoded value). */
static int exact_int(tbx_file *f, uint64_t i, tbx_dtype dt, uint64_t k, char *buf, size_t cap) {
    unsigned w;
    switch (dt) {
    case TBX_DT_F64: w = 8; break;
    case TBX_DT_I8: case TBX_DT_U8: w = 1; break;
    case TBX_DT_I16: case TBX_DT_U16: w = 2; break;
    case TBX_DT_I32: case TBX_DT_U32: w = 4; break;
    case TBX_DT_I64: case TBX_DT_U64: w = 8; break;
    default: return 0;
    }
    unsigned char b[8];
    tbx_error err;
    if (tbx_tensor_read_range(f, i, k * w, b, w, &err) != TBX_OK) return 0;
    uint64_t u = 0;
    for (unsigned j = w; j-- > 0;) u = u << 8 | b[j]; /* stored little-endian */
    if (dt == TBX_DT_F64) {
        double d;
        memcpy(&d, &u, 8);
        fmt_g(buf, cap, d);
        return 1;
    }
    bool is_signed = dt == TBX_DT_I8 || dt == TBX_DT_I16 || dt == TBX_DT_I32 || dt == TBX_DT_I64;
    if (is_signed && w < 8 && (u >> (8 * w - 1)) & 1) u |= ~(uint64_t)0 << (8 * w);
    if (is_signed) snprintf(buf, cap, "%" PRId64, (int64_t)u);
    else snprintf(buf, cap, "%" PRIu64, u);
    return 1;
}

/* Reads tensor i in chunks, feeding `fn` (the accumulator or the histogram). */
typedef void (*chunk_fn)(void *ctx, const float *x, uint64_t n);

static tbx_status stream_tensor(tbx_file *f, uint64_t i, uint64_t nelems, float *buf,
                                chunk_fn fn, void *ctx, tbx_error *err) {
    for (uint64_t first = 0; first < nelems; first += ST_CHUNK) {
        uint64_t n = nelems - first < ST_CHUNK ? nelems - first : ST_CHUNK;
        tbx_status st = tbx_tensor_read_f32(f, i, first, n, buf, err);
        if (st != TBX_OK) return st;
        fn(ctx, buf, n);
    }
    return TBX_OK;
}

static void feed_acc(void *ctx, const float *x, uint64_t n) { acc_add(ctx, x, n); }
static void feed_hist(void *ctx, const float *x, uint64_t n) { hist_add(ctx, x, n); }

/* One tensor's block of the view. Returns CLI_OK, or CLI_FAIL after a read error. */
static int tensor_stats(FILE *fp, tbx_file *f, uint64_t i, const char *path, float *buf) {
    tbx_tensor_info ti = TBX_TENSOR_INFO_INIT;
    if (tbx_tensor_info_get(f, i, &ti) != TBX_OK) return CLI_FAIL;
    jout_write_escaped(fp, ti.name, ti.name_len);
    fprintf(fp, ": %s", cli_dtype_name(ti.dtype));
    /* the values shown are tbx_tensor_read_f32's: reals for a linearly quantized tensor (OINF
     * v2), whatever the dtype of its stored codes */
    tbx_quant_info qi;
    qi.struct_size = sizeof qi;
    const bool linear = tbx_tensor_quant_get(f, i, &qi) == TBX_OK && qi.method == TBX_QUANT_LINEAR;
    const tbx_dtype vdt = linear ? TBX_DT_F32 : ti.dtype; /* how the values are printed */
    const tbx_dtype_info *di = tbx_dtype_get(vdt);
    if (ti.ndim > 0) print_shape(fp, ti.shape, ti.ndim);
    if (ti.ncomponents == 0) {
        fputs(" -- uninitialized\n\n", fp);
        return CLI_OK;
    }
    if (ti.nelems == 0) {
        fputs(" = { } -- empty\n\n", fp);
        return CLI_OK;
    }
    tbx_error err;
    memset(&err, 0, sizeof err);
    st_acc a;
    memset(&a, 0, sizeof a);
    a.rng = 0x5EED0F57A75ull ^ i;
    int rc = CLI_OK;
    if (ti.ndim > 0 && ti.nelems <= ST_EXACT_MAX) {
        a.keep = malloc((size_t)ti.nelems * sizeof *a.keep);
        a.cap_keep = (size_t)ti.nelems;
    } else if (ti.ndim > 0) {
        a.res = malloc(ST_RESERVOIR * sizeof *a.res);
    }
    if (ti.ndim > 0 && !a.keep && !a.res) {
        fputs(" -- out of memory\n\n", fp);
        return CLI_FAIL;
    }
    tbx_status st = stream_tensor(f, i, ti.nelems, buf, feed_acc, &a, &err);
    if (st != TBX_OK) {
        if (st == TBX_E_UNSUPPORTED) {
            fprintf(fp, " -- values not shown: %s\n\n", err.message[0] ? err.message :
                    "the dtype cannot be decoded to f32");
        } else {
            fputs(" -- read error\n\n", fp);
            fflush(fp);
            cli_report(path, st, &err);
            rc = CLI_FAIL;
        }
        free(a.keep);
        free(a.res);
        return rc;
    }
    char b[48];
    if (ti.ndim == 0) {
        if (linear || !exact_int(f, i, vdt, 0, b, sizeof b)) fmt_elem(b, sizeof b, a.head[0], vdt);
        fprintf(fp, " = %s\n\n", b);
        return CLI_OK;
    }
    /* preview */
    fputs(" = { ", fp);
    uint64_t n = ti.nelems;
    for (uint64_t k = 0; k < n && k < ST_PREVIEW; k++) {
        if (linear || !exact_int(f, i, vdt, k, b, sizeof b)) fmt_elem(b, sizeof b, a.head[k], vdt);
        fprintf(fp, "%s%s", k ? ", " : "", b);
    }
    if (n > 2 * ST_PREVIEW) fputs(", ...", fp);
    for (uint64_t k = n > 2 * ST_PREVIEW ? n - ST_PREVIEW : ST_PREVIEW; k < n; k++) {
        if (linear || !exact_int(f, i, vdt, k, b, sizeof b))
            fmt_elem(b, sizeof b, a.tail[k % ST_PREVIEW], vdt);
        fprintf(fp, ", %s", b);
    }
    fputs(" }\n", fp);

    /* statistics */
    /* the histogram first: the median selection overwrites the kept keys */
    st_hist h;
    int have_hist = 0;
    if (a.n > 0) {
        int int_values = di && (di->flags & TBX_DTF_INT || vdt == TBX_DT_BOOL ||
                                vdt == TBX_DT_BITSET);
        hist_init(&h, &a, int_values);
        if (a.keep) hist_add_keys(&h, a.keep, a.nkeep);
        else st = stream_tensor(f, i, ti.nelems, buf, feed_hist, &h, &err);
        if (st == TBX_OK) have_hist = 1;
    }
    double median = NAN;
    int approx = 0;
    if (a.keep) median = median_of(a.keep, a.nkeep);
    else { median = median_of(a.res, a.nres); approx = a.n > a.nres; }
    char smin[32], smax[32], smean[32], smed[32], sstd[32];
    double std = a.n ? sqrt(a.m2 / (double)a.n) : NAN;
    fmt_g(smin, sizeof smin, a.n ? a.min : NAN);
    fmt_g(smax, sizeof smax, a.n ? a.max : NAN);
    fmt_g(smean, sizeof smean, a.n ? a.mean : NAN);
    fmt_g(smed, sizeof smed, median);
    fmt_g(sstd, sizeof sstd, std);
    fprintf(fp, "- [nbytes: %" PRIu64 ", min: %s, max: %s, mean: %s, %s: %s, std: %s", ti.nbytes,
            smin, smax, smean, approx ? "median≈" : "median", smed, sstd);
    if (a.nan) fprintf(fp, ", nan: %" PRIu64, a.nan);
    if (a.inf) fprintf(fp, ", inf: %" PRIu64, a.inf);
    fputs("]\n", fp);

    /* histogram */
    if (have_hist) {
        hist_print(fp, &h);
    } else if (st != TBX_OK) {
        fflush(fp);
        cli_report(path, st, &err);
        rc = CLI_FAIL;
    }
    fputc('\n', fp);
    free(a.keep);
    free(a.res);
    return rc;
}

int cli_info_stats(tbx_file *f, const char *path) {
    FILE *fp = stdout;
    uint64_t nt = tbx_tensor_count(f), nmeta = tbx_meta_count(f);
    fputs("# ", fp);
    jout_write_escaped(fp, path, strlen(path));
    fprintf(fp, ": %s v%" PRIu32 ", %" PRIu64 " bytes, %" PRIu64 " metadata entr%s, %" PRIu64
            " tensor%s\n\n", tbx_format_name(tbx_file_format(f)), tbx_file_version(f),
            tbx_file_size(f), nmeta, nmeta == 1 ? "y" : "ies", nt, nt == 1 ? "" : "s");
    uint64_t nsv = tbx_sizevar_count(f);
    for (uint64_t k = 0; k < nsv; k++) {
        const char *name = NULL;
        size_t len = 0;
        uint64_t value = 0;
        if (tbx_sizevar_get(f, k, &name, &len, &value) != TBX_OK) continue;
        jout_write_escaped(fp, name, len);
        fprintf(fp, " := %" PRIu64 "\n", value);
    }
    if (nsv) fputc('\n', fp);
    for (uint64_t k = 0; k < nmeta && !ferror(fp); k++) {
        size_t klen = 0;
        const char *key = tbx_meta_key(f, k, &klen);
        meta_line(fp, key ? key : "", key ? klen : 0, tbx_meta_value(f, k));
    }
    if (nmeta) fputc('\n', fp);
    float *buf = malloc((size_t)ST_CHUNK * sizeof(float));
    if (!buf) {
        cli_error("out of memory");
        return CLI_FAIL;
    }
    int rc = CLI_OK;
    for (uint64_t i = 0; i < nt && !ferror(fp); i++)
        if (tensor_stats(fp, f, i, path, buf) != CLI_OK) rc = CLI_FAIL;
    free(buf);
    return rc;
}
