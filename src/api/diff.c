/*
 * diff.c - tbx_diff: what differs between two open models, in any formats, as one document
 * (a tbx_value MAP: `tbx diff --json` prints it, Python's tensorbox.diff returns it).
 *
 * Pairing. Without a name map, tensors pair by name: the others are "removed" (only in A) or
 * "added" (only in B). With TBX_DIFF_MAP_AUTO and a Hugging Face directory (a handle with a
 * config.json section) against a GGUF file, in either order, the directory's tensors are read
 * through its architecture's row (src/models/arch.h, the HF -> GGUF name map the conversion
 * uses): an HF_MAP_ONE entry pairs with the GGUF tensor its template names; an HF_MAP_SPLIT
 * entry with each part's GGUF tensor (a run of the HF tensor's rows, the parts' row counts read
 * from the GGUF tensors' shapes); an HF_MAP_STACK entry with expert e's slice of the stacked
 * GGUF tensor (one report row per GGUF tensor). The Hugging Face values get the entry's
 * transform before they are compared, as the conversion applies it: llama's q/k row order by
 * heads ({arch}.attention.head_count / head_count_kv read from the GGUF file), a scale or an
 * added constant (in f32). HF names the row leaves out are listed apart ("skipped"), names it
 * does not know and templates whose GGUF tensor is absent as "removed", GGUF tensors the
 * conversion generates (rope_freqs: tbx_hf_gguf_expect) as "derived", other GGUF tensors no HF
 * tensor reaches as "added". Rows the conversion drops (ARCH_POS_OFFSET's first positions,
 * ARCH_TRIM_VOCAB's rows past vocab_size) are left out of the HF side. Metadata: the GGUF's
 * {arch}.* keys against those the conversion derives from config.json (tbx_hf_gguf_expect:
 * the row's hyper-parameters through hf_gguf.c's own code); when the directory cannot be read
 * as the conversion reads it, "metadata.compared" is false with its message.
 *
 * Values. Every compared pair is decoded to f32 (block types dequantized by the same kernels
 * as tbx_tensor_read_f32) and compared in double: with a the first file's value (the
 * reference) and b the second's, over the pairs where both are finite,
 *   max_abs = max |b - a|,  rmse = sqrt(sum (b - a)^2 / n),  nmse = sum (b - a)^2 / sum a^2,
 *   cosine = sum ab / sqrt(sum a^2 sum b^2)
 * (n counts every element; nmse is null when sum a^2 = 0 and the values differ, 0 when they are
 * equal; cosine null when either sum of squares is 0). A pair where either value is NaN or
 * infinite is counted apart (nonfinite) and equal when both are the same value or both NaN.
 * A tensor is identical when every pair of values is equal.
 *
 * Work. Pairs are cut into jobs of about 2^18 values (whole blocks of both dtypes, whole heads
 * of a permutation). The calling thread reads each job's stored bytes (dense tensors of a
 * decodable dtype: tbx_tensor_read_range; anything else: values through tbx_tensor_read_f32,
 * handles are not shared between threads); a worker decodes, transforms and sums; the sums are
 * added in job order, so the document does not depend on the thread count. A ring of
 * threads + 2 jobs overlaps reading with the work. Memory: that ring (a few MiB per job, more
 * only when one head of a permuted tensor is larger), whatever the model size.
 *
 * Verdict: "identical" when no metadata entry or section differs (when compared), no tensor is
 * added, removed or not comparable, and every compared tensor is identical. With a tolerance
 * (nmse, max_abs or both), "within_tolerance" when no tensor is added, removed or not comparable
 * and each compared tensor is identical or meets every bound given; metadata and dtypes are
 * reported but do not count. "differs" is the verdict the exit status of `tbx diff` follows.
 */
#include "api.h"
#include "arch.h"
#include "models.h"
#include "plain.h"

#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define DF_CHUNK ((uint64_t)1 << 18)     /* values of a job */
#define DF_SLOTS_MAX (TBX_POOL_MAX + 2)
#define DF_SHORT_STRING 256              /* metadata strings shown whole up to this length */

void tbx_diff_options_init(tbx_diff_options *opt) {
    if (!opt) return;
    memset(opt, 0, sizeof *opt);
    opt->struct_size = sizeof *opt;
    opt->map = TBX_DIFF_MAP_AUTO;
    opt->tol_nmse = -1;
    opt->tol_max_abs = -1;
}

/* ------------------------------------------------------------------------------------------ */
/* Sums                                                                                        */
/* ------------------------------------------------------------------------------------------ */
typedef struct dacc {
    uint64_t n, nequal, nonfinite, nf_mismatch;
    double sse, saa, sbb, sab, maxabs;
} dacc;

static void acc_fold(dacc *d, const dacc *s) {
    d->n += s->n;
    d->nequal += s->nequal;
    d->nonfinite += s->nonfinite;
    d->nf_mismatch += s->nf_mismatch;
    d->sse += s->sse;
    d->saa += s->saa;
    d->sbb += s->sbb;
    d->sab += s->sab;
    if (s->maxabs > d->maxabs) d->maxabs = s->maxabs;
}

typedef struct lanes4 {
    double sse[4], saa[4], sbb[4], sab[4], mx[4];
    uint64_t eq[4];
} lanes4;

/* Pairs [k, n) into lane k % 4 (the scalar kernel, and the AVX2 one's tail). */
static void lanes_scalar(lanes4 *L, const float *a, const float *b, uint64_t k, uint64_t n) {
    for (; k < n; k++) {
        const int l = (int)(k & 3);
        const double x = a[k], y = b[k], d = y - x;
        L->sse[l] += d * d;
        L->saa[l] += x * x;
        L->sbb[l] += y * y;
        L->sab[l] += x * y;
        L->mx[l] = fabs(d) > L->mx[l] ? fabs(d) : L->mx[l];
        L->eq[l] += x == y;
    }
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
/* The same lanes, four pairs per step in one 256-bit register each: the same operations in the
 * same order per lane (no fused multiply-add), so the same bits as lanes_scalar. */
__attribute__((target("avx2"))) static void lanes_avx2(lanes4 *L, const float *a,
                                                        const float *b, uint64_t n) {
    __m256d sse = _mm256_setzero_pd(), saa = sse, sbb = sse, sab = sse, mx = sse;
    __m256i eq = _mm256_setzero_si256();
    const __m256d sign = _mm256_set1_pd(-0.0);
    uint64_t k = 0;
    for (; k + 4 <= n; k += 4) {
        const __m256d x = _mm256_cvtps_pd(_mm_loadu_ps(a + k));
        const __m256d y = _mm256_cvtps_pd(_mm_loadu_ps(b + k));
        const __m256d d = _mm256_sub_pd(y, x);
        sse = _mm256_add_pd(sse, _mm256_mul_pd(d, d));
        saa = _mm256_add_pd(saa, _mm256_mul_pd(x, x));
        sbb = _mm256_add_pd(sbb, _mm256_mul_pd(y, y));
        sab = _mm256_add_pd(sab, _mm256_mul_pd(x, y));
        const __m256d ad = _mm256_andnot_pd(sign, d);
        mx = _mm256_blendv_pd(mx, ad, _mm256_cmp_pd(ad, mx, _CMP_GT_OQ));
        eq = _mm256_sub_epi64(eq, _mm256_castpd_si256(_mm256_cmp_pd(x, y, _CMP_EQ_OQ)));
    }
    _mm256_storeu_pd(L->sse, sse);
    _mm256_storeu_pd(L->saa, saa);
    _mm256_storeu_pd(L->sbb, sbb);
    _mm256_storeu_pd(L->sab, sab);
    _mm256_storeu_pd(L->mx, mx);
    _mm256_storeu_si256((__m256i *)(void *)L->eq, eq);
    lanes_scalar(L, a, b, k, n);
}
static bool have_avx2(void) {
    static int have = -1;
    if (have < 0) have = __builtin_cpu_supports("avx2") ? 1 : 0;
    return have == 1;
}
#endif

/* The sums of n pairs when every value is finite: four lanes (pair k in lane k % 4), added
 * together at the end. false (the sums unusable) when a value was NaN or infinite: its sums
 * then are not finite (a finite float's square stays far below double's range). */
static bool sums_finite(const float *a, const float *b, uint64_t n, double out[9], bool simd) {
    lanes4 L;
    memset(&L, 0, sizeof L);
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    if (simd && have_avx2()) lanes_avx2(&L, a, b, n);
    else
#endif
        lanes_scalar(&L, a, b, 0, n);
    const double s4 = (L.sse[0] + L.sse[1]) + (L.sse[2] + L.sse[3]);
    const double a4 = (L.saa[0] + L.saa[1]) + (L.saa[2] + L.saa[3]);
    const double b4 = (L.sbb[0] + L.sbb[1]) + (L.sbb[2] + L.sbb[3]);
    const double ab = (L.sab[0] + L.sab[1]) + (L.sab[2] + L.sab[3]);
    if (!isfinite(s4) || !isfinite(a4) || !isfinite(b4) || !isfinite(ab)) return false;
    double m = L.mx[0];
    for (int l = 1; l < 4; l++) m = L.mx[l] > m ? L.mx[l] : m;
    out[0] = (double)n;
    out[1] = (double)(L.eq[0] + L.eq[1] + L.eq[2] + L.eq[3]);
    out[2] = 0;
    out[3] = 0;
    out[4] = s4; out[5] = a4; out[6] = b4; out[7] = ab; out[8] = m;
    return true;
}

int tbx_diff_sums_finite_(const float *a, const float *b, uint64_t n, double out[9], int simd) {
    return sums_finite(a, b, n, out, simd != 0);
}

void tbx_diff_sums_(const float *a, const float *b, uint64_t n, double out[9]) {
    if (sums_finite(a, b, n, out, true)) return;
    /* some value is not finite: pair by pair, the non-finite pairs counted apart */
    uint64_t eq = 0, nf = 0, nfm = 0;
    double sse = 0, saa = 0, sbb = 0, sab = 0, mx = 0;
    for (uint64_t k = 0; k < n; k++) {
        const double x = a[k], y = b[k];
        if (isfinite(x) && isfinite(y)) {
            const double d = y - x;
            sse += d * d;
            saa += x * x;
            sbb += y * y;
            sab += x * y;
            const double ad = fabs(d);
            if (ad > mx) mx = ad;
            eq += x == y;
        } else {
            nf++;
            if (x == y || (isnan(x) && isnan(y))) eq++;
            else nfm++;
        }
    }
    out[0] = (double)n; out[1] = (double)eq; out[2] = (double)nf; out[3] = (double)nfm;
    out[4] = sse; out[5] = saa; out[6] = sbb; out[7] = sab; out[8] = mx;
}

static void acc_add(dacc *d, const float *a, const float *b, uint64_t n) {
    double o[9];
    tbx_diff_sums_(a, b, n, o);
    dacc s = {(uint64_t)o[0], (uint64_t)o[1], (uint64_t)o[2], (uint64_t)o[3],
              o[4], o[5], o[6], o[7], o[8]};
    acc_fold(d, &s);
}

void tbx_diff_metrics_(const double s[9], double m[4]) {
    const double n = s[0], sse = s[4], saa = s[5], sbb = s[6], sab = s[7];
    m[0] = s[8];
    m[1] = n > 0 ? sqrt(sse / n) : 0;
    m[2] = saa > 0 ? sse / saa : (sse > 0 ? NAN : 0);
    m[3] = saa > 0 && sbb > 0 ? sab / sqrt(saa * sbb) : NAN;
}

static void acc_metrics(const dacc *a, double m[4]) {
    double s[9] = {(double)a->n, (double)a->nequal, (double)a->nonfinite, (double)a->nf_mismatch,
                   a->sse, a->saa, a->sbb, a->sab, a->maxabs};
    tbx_diff_metrics_(s, m);
}

/* llama's rotary row order (plan.h TBX_XF_PERMUTE_HEADS) of `rows` rows of `cols` values in
 * heads of d rows: out row h*d + 2j + i = in row h*d + i*d/2 + j. */
void tbx_diff_permute_(const float *in, float *out, uint64_t rows, uint64_t cols, uint64_t d) {
    const uint64_t half = d / 2;
    for (uint64_t h = 0; h + d <= rows; h += d)
        for (uint64_t j = 0; j < half; j++)
            for (uint64_t i = 0; i < 2; i++)
                memcpy(out + (h + 2 * j + i) * cols, in + (h + i * half + j) * cols,
                       (size_t)cols * sizeof(float));
}

/* ------------------------------------------------------------------------------------------ */
/* Pairs, segments, jobs                                                                       */
/* ------------------------------------------------------------------------------------------ */
enum { XF_NONE = 0, XF_PERMUTE = 1, XF_SCALE = 2, XF_ADD = 3 };

typedef struct dseg {
    uint64_t ta, tb;      /* tensors of A and B */
    uint64_t a0, b0, n;   /* the first value of each, the count */
    uint64_t cols, d;     /* XF_PERMUTE: row length and rows per head */
    float k;              /* XF_SCALE, XF_ADD */
    uint8_t xf;           /* XF_*, applied to the Hugging Face side */
    uint8_t hf_b;         /* the Hugging Face side is B */
    size_t pair;
} dseg;

typedef struct dpair {
    char *name;           /* the report's name (B's in a mapped pair: the GGUF name) */
    int64_t ta, tb;       /* A's and B's tensor (a mapped pair: A's first source) */
    uint64_t nelems;      /* values the pair covers (mapped: the GGUF tensor's) */
    uint64_t covered;     /* values the segments cover */
    uint32_t nsrc;        /* mapped: HF tensors feeding it */
    char xf[48];          /* the transform, for the report ("" none) */
    const char *why_not;  /* not comparable: why (static) */
    char why_buf[160];
    bool comparable;
    dacc acc;
    long layer;
} dpair;

typedef struct dctx dctx;

typedef struct dslot {
    tbx_task task;        /* first member */
    dctx *c;
    const dseg *s;
    uint64_t off, n;      /* values [off, off + n) of the segment */
    bool busy;
    bool raw[2];
    tbx_dtype dt[2];
    const tbx_dtype_info *di[2];
    uint8_t *raw_buf[2];
    size_t raw_cap[2], raw_len[2];
    float *f[2], *tmp;
    size_t fcap;
    dacc acc;
    tbx_status st;
    tbx_error err;
} dslot;

struct dctx {
    tbx_file *f[2];
    const tbx_diff_options *o;
    tbx_error *err;
    const tbx_alloc *al;
    dpair *pairs;
    size_t npairs, cap_pairs;
    dseg *segs;
    size_t nsegs, cap_segs;
    bool swapped;         /* mapped with the user's A a GGUF: the HF side (B) is in f[0] */
    bool oom;
    uint64_t done, total; /* progress: stored bytes of both sides read / to read */
};

/* The stored bytes of both sides behind n values of segment s (progress). */
static uint64_t seg_bytes(dctx *c, const dseg *s, uint64_t n) {
    double b = 0;
    const uint64_t t[2] = {(uint64_t)s->ta, (uint64_t)s->tb};
    for (int k = 0; k < 2; k++) {
        tbx_tensor_info ti = TBX_TENSOR_INFO_INIT;
        if (tbx_tensor_info_get(c->f[k], t[k], &ti) == TBX_OK && ti.nelems)
            b += (double)ti.nbytes * (double)n / (double)ti.nelems;
    }
    return (uint64_t)b;
}

/* Reports progress; a non-zero return of the callback cancels. */
static tbx_status diff_tick(dctx *c, uint64_t done) {
    if (!c->o->progress) return TBX_OK;
    if (done > c->total) done = c->total;
    if (done < c->done) done = c->done;
    c->done = done;
    if (c->o->progress(c->o->progress_ud, done, c->total) != 0)
        return tbx_err(c->err, TBX_E_CANCELLED, TBX_NO_OFFSET, "progress", "cancelled by the "
                       "progress callback at %" PRIu64 " of %" PRIu64 " bytes", done, c->total);
    return TBX_OK;
}

static tbx_status grow(dctx *c, void **p, size_t *cap, size_t n, size_t sz) {
    if (n < *cap) return TBX_OK;
    size_t nc = *cap ? *cap * 2 : 64;
    if (nc > SIZE_MAX / sz) return tbx_err_nomem(c->err, "diff table");
    void *q = realloc(*p, nc * sz);
    if (!q) return tbx_err_nomem(c->err, "diff table");
    *p = q;
    *cap = nc;
    return TBX_OK;
}

/* The layer number of a tensor name: its first dot-separated component of digits only. */
static long layer_of(const char *name) {
    const char *p = name;
    while (*p) {
        const char *q = p;
        while (*q >= '0' && *q <= '9') q++;
        if (q > p && (*q == '.' || !*q) && (p == name || p[-1] == '.') && q - p < 9)
            return strtol(p, NULL, 10);
        p = strchr(p, '.');
        if (!p) break;
        p++;
    }
    return -1;
}

static tbx_status new_pair(dctx *c, const char *name, int64_t ta, int64_t tb, size_t *k) {
    tbx_status st = grow(c, (void **)&c->pairs, &c->cap_pairs, c->npairs, sizeof *c->pairs);
    if (st != TBX_OK) return st;
    dpair *p = &c->pairs[c->npairs];
    memset(p, 0, sizeof *p);
    const size_t nl = strlen(name) + 1;
    p->name = malloc(nl);
    if (p->name) memcpy(p->name, name, nl);
    if (!p->name) return tbx_err_nomem(c->err, "diff table");
    p->ta = ta;
    p->tb = tb;
    p->comparable = true;
    p->layer = layer_of(name);
    *k = c->npairs++;
    return TBX_OK;
}

static tbx_status add_seg(dctx *c, const dseg *s) {
    tbx_status st = grow(c, (void **)&c->segs, &c->cap_segs, c->nsegs, sizeof *c->segs);
    if (st != TBX_OK) return st;
    c->segs[c->nsegs++] = *s;
    c->pairs[s->pair].covered += s->n;
    return TBX_OK;
}

/* Can tensor t of f be decoded to f32 at all? (else: why, static text) */
static const char *undecodable(const tbx_file *f, uint64_t t) {
    const tbx_tensor *x = &f->tensors[t];
    if (x->unreadable) return "its values cannot be read (see tbx validate)";
    if (x->ncomp == 0) return "it holds no data";
    const tbx_dtype_info *di = tbx_file_dtype(f, x->dtype);
    if (!di || (di->flags & TBX_DTF_COMPLEX)) return "its dtype cannot be decoded to f32";
    if (!(di->flags & (TBX_DTF_DECODE | TBX_DTF_BLOCK | TBX_DTF_SHAPED)))
        return "its dtype cannot be decoded to f32";
    return NULL;
}

/* Stored bytes read on the calling thread and decoded by a worker? (dense, one component
 * served raw from the file (not compressed, not byte-swapped), a core dtype with a decoder,
 * whole bytes per value or blocks, no parameters held apart) */
static bool raw_path(const tbx_file *f, uint64_t t, const tbx_dtype_info **di) {
    const tbx_tensor *x = &f->tensors[t];
    *di = tbx_dtype_core_get(x->dtype);
    if (x->ncomp != 1 || x->layout != TBX_LAYOUT_DENSE || x->unreadable || !*di ||
        !tbx_comp_served_raw(f, &x->comp[0]))
        return false;
    if (x->quant && x->quant->method == TBX_QUANT_LINEAR) return false;
    const tbx_dtype_info *e = *di;
    if (e->flags & TBX_DTF_BLOCK) return e->block_size > 1 && tbx_dequant_for(x->dtype) != NULL;
    return (e->flags & TBX_DTF_DECODE) && !(e->flags & (TBX_DTF_PACKED | TBX_DTF_COMPLEX)) &&
           e->block_size <= 1 && e->bits >= 8 && e->bits % 8 == 0;
}

static uint64_t block_of(const tbx_file *f, uint64_t t) {
    const tbx_dtype_info *di = tbx_file_dtype(f, f->tensors[t].dtype);
    return di && (di->flags & TBX_DTF_BLOCK) && di->block_size > 1 ? di->block_size : 1;
}

static uint64_t gcd64(uint64_t a, uint64_t b) {
    while (b) { uint64_t t = a % b; a = b; b = t; }
    return a;
}
static uint64_t lcm64(uint64_t a, uint64_t b) { return a / gcd64(a, b) * b; }

/* ------------------------------------------------------------------------------------------ */
/* The jobs                                                                                    */
/* ------------------------------------------------------------------------------------------ */
static bool ensure(void **p, size_t *cap, size_t n) {
    if (n <= *cap) return true;
    void *q = realloc(*p, n ? n : 1);
    if (!q) return false;
    *p = q;
    *cap = n;
    return true;
}

static void job_run(tbx_task *t) {
    dslot *sl = (dslot *)t;
    const dseg *s = sl->s;
    memset(&sl->acc, 0, sizeof sl->acc);
    for (int side = 0; side < 2 && sl->st == TBX_OK; side++) {
        if (!sl->raw[side]) continue;
        tbx_status st = tbx_decode_f32_info(sl->di[side], sl->dt[side], sl->raw_buf[side],
                                            sl->raw_len[side], sl->n, sl->f[side]);
        if (st != TBX_OK)
            sl->st = tbx_err(&sl->err, st, TBX_NO_OFFSET, "tensor", "tensor \"%s\": its %s "
                             "values could not be decoded (%s)",
                             sl->c->f[side]->tensors[side ? s->tb : s->ta].name,
                             sl->di[side]->name, tbx_strerror(st));
    }
    if (sl->st != TBX_OK) return;
    float *hv = sl->f[s->hf_b];
    switch (s->xf) {
    case XF_PERMUTE:
        tbx_diff_permute_(hv, sl->tmp, sl->n / s->cols, s->cols, s->d);
        memcpy(hv, sl->tmp, (size_t)sl->n * sizeof(float));
        break;
    case XF_SCALE:
        for (uint64_t k = 0; k < sl->n; k++) hv[k] *= s->k;
        break;
    case XF_ADD:
        for (uint64_t k = 0; k < sl->n; k++) hv[k] += s->k;
        break;
    default: break;
    }
    /* the user's A is the reference */
    if (sl->c->swapped) acc_add(&sl->acc, sl->f[1], sl->f[0], sl->n);
    else acc_add(&sl->acc, sl->f[0], sl->f[1], sl->n);
}

/* Reads side `side` of the slot's job on the calling thread. */
static tbx_status job_read(dctx *c, dslot *sl, int side) {
    tbx_file *f = c->f[side];
    const dseg *s = sl->s;
    const uint64_t t = side ? s->tb : s->ta;
    const uint64_t v0 = (side ? s->b0 : s->a0) + sl->off;
    const tbx_dtype_info *di = NULL;
    sl->raw[side] = raw_path(f, t, &di);
    sl->di[side] = di;
    sl->dt[side] = f->tensors[t].dtype;
    if (!sl->raw[side]) return tbx_tensor_read_f32(f, t, v0, sl->n, sl->f[side], c->err);
    uint64_t pos, len;
    if (di->flags & TBX_DTF_BLOCK) {
        pos = v0 / di->block_size * di->block_bytes;
        len = (sl->n + di->block_size - 1) / di->block_size * di->block_bytes;
    } else {
        pos = v0 * (di->bits / 8);
        len = sl->n * (di->bits / 8);
    }
    if (len > SIZE_MAX || !ensure((void **)&sl->raw_buf[side], &sl->raw_cap[side], (size_t)len))
        return tbx_err_nomem(c->err, "diff buffers");
    sl->raw_len[side] = (size_t)len;
    return tbx_tensor_read_range(f, t, pos, sl->raw_buf[side], (size_t)len, c->err);
}

static tbx_status slot_finish(dctx *c, tbx_pool *pool, dslot *sl) {
    if (!sl->busy) return TBX_OK;
    tbx_pool_wait(pool, &sl->task, true);
    sl->busy = false;
    if (sl->st != TBX_OK) {
        if (c->err) *c->err = sl->err;
        return sl->st;
    }
    acc_fold(&c->pairs[sl->s->pair].acc, &sl->acc);
    return TBX_OK;
}

static tbx_status run_jobs(dctx *c) {
    int threads = c->o->threads ? (int)c->o->threads : tbx_threads_default();
    if (threads < 1) threads = 1;
    if (threads > TBX_POOL_MAX) threads = TBX_POOL_MAX;
    tbx_pool *pool = threads > 1 ? tbx_pool_start(c->al, threads) : NULL;
    size_t ns = (size_t)(pool ? tbx_pool_threads(pool) : 0) + 2;
    if (ns > DF_SLOTS_MAX) ns = DF_SLOTS_MAX;
    dslot *slots = calloc(ns, sizeof *slots);
    if (!slots) {
        tbx_pool_stop(pool);
        return tbx_err_nomem(c->err, "diff buffers");
    }
    tbx_status st = TBX_OK;
    size_t job = 0;
    uint64_t read_bytes = 0;
    for (size_t si = 0; c->o->progress && si < c->nsegs; si++)
        if (c->pairs[c->segs[si].pair].comparable) c->total += seg_bytes(c, &c->segs[si],
                                                                          c->segs[si].n);
    for (size_t si = 0; si < c->nsegs && st == TBX_OK; si++) {
        const dseg *s = &c->segs[si];
        if (!c->pairs[s->pair].comparable) continue;
        const uint64_t before = read_bytes;
        uint64_t unit = lcm64(block_of(c->f[0], s->ta), block_of(c->f[1], s->tb));
        if (s->xf == XF_PERMUTE) unit = lcm64(unit, s->d * s->cols);
        uint64_t per = DF_CHUNK > unit ? DF_CHUNK - DF_CHUNK % unit : unit;
        for (uint64_t off = 0; off < s->n && st == TBX_OK; off += per) {
            dslot *sl = &slots[job++ % ns];
            if ((st = slot_finish(c, pool, sl)) != TBX_OK) break;
            sl->c = c;
            sl->s = s;
            sl->off = off;
            sl->n = s->n - off < per ? s->n - off : per;
            sl->st = TBX_OK;
            const size_t fb = (size_t)sl->n * sizeof(float);
            if (sl->n > SIZE_MAX / sizeof(float) / 2 || (sl->fcap < fb &&
                (!(sl->f[0] = realloc(sl->f[0], fb)) || !(sl->f[1] = realloc(sl->f[1], fb)) ||
                 (s->xf == XF_PERMUTE && !(sl->tmp = realloc(sl->tmp, fb)))))) {
                st = tbx_err_nomem(c->err, "diff buffers");
                sl->fcap = 0;
                break;
            }
            if (sl->fcap < fb) sl->fcap = fb;
            if (s->xf == XF_PERMUTE && !sl->tmp && !(sl->tmp = malloc(sl->fcap))) {
                st = tbx_err_nomem(c->err, "diff buffers");
                break;
            }
            if ((st = job_read(c, sl, 0)) != TBX_OK || (st = job_read(c, sl, 1)) != TBX_OK) break;
            if (c->o->progress &&
                (st = diff_tick(c, before + seg_bytes(c, s, off + sl->n))) != TBX_OK)
                break;
            sl->task.run = job_run;
            sl->busy = true;
            tbx_pool_submit(pool, &sl->task);
        }
        if (c->o->progress) read_bytes = before + seg_bytes(c, s, s->n);
    }
    /* the jobs still in flight, oldest first */
    for (size_t k = 0; k < ns; k++) {
        dslot *sl = &slots[(job + k) % ns];
        tbx_status s2 = slot_finish(c, pool, sl);
        if (st == TBX_OK) st = s2;
    }
    tbx_pool_stop(pool);
    for (size_t k = 0; k < ns; k++) {
        free(slots[k].raw_buf[0]);
        free(slots[k].raw_buf[1]);
        free(slots[k].f[0]);
        free(slots[k].f[1]);
        free(slots[k].tmp);
    }
    free(slots);
    if (st == TBX_OK) st = tbx_file_check_sources(c->f[0], c->err);
    if (st == TBX_OK) st = tbx_file_check_sources(c->f[1], c->err);
    /* the last call says done == total */
    if (st == TBX_OK && c->o->progress) {
        c->done = c->total;
        if (c->o->progress(c->o->progress_ud, c->total, c->total) != 0)
            st = tbx_err(c->err, TBX_E_CANCELLED, TBX_NO_OFFSET, "progress", "cancelled by "
                         "the progress callback at the end");
    }
    return st;
}

/* ------------------------------------------------------------------------------------------ */
/* Pairing by name                                                                             */
/* ------------------------------------------------------------------------------------------ */
static bool same_shape(const tbx_tensor *a, const tbx_tensor *b) {
    if (a->ndim != b->ndim) return false;
    for (uint32_t d = 0; d < a->ndim; d++)
        if (a->shape[d] != b->shape[d]) return false;
    return true;
}

static void check_comparable(dctx *c, dpair *p) {
    const char *w = undecodable(c->f[0], (uint64_t)p->ta);
    if (!w) w = undecodable(c->f[1], (uint64_t)p->tb);
    if (w) {
        snprintf(p->why_buf, sizeof p->why_buf, "%s: %s",
                 undecodable(c->f[0], (uint64_t)p->ta) ? "A" : "B", w);
        p->why_not = p->why_buf;
        p->comparable = false;
    }
}

static tbx_status pair_by_name(dctx *c, uint8_t *b_used) {
    tbx_file *a = c->f[0], *b = c->f[1];
    tbx_status st = TBX_OK;
    for (uint64_t i = 0; i < a->ntensors && st == TBX_OK; i++) {
        uint64_t j;
        if (tbx_tensor_find(b, a->tensors[i].name, &j) != TBX_OK) continue;
        b_used[j] = 1;
        size_t k;
        if ((st = new_pair(c, a->tensors[i].name, (int64_t)i, (int64_t)j, &k)) != TBX_OK) break;
        dpair *p = &c->pairs[k];
        p->nelems = b->tensors[j].nelems;
        if (a->tensors[i].nelems != b->tensors[j].nelems) {
            p->comparable = false;
            snprintf(p->why_buf, sizeof p->why_buf, "%llu values against %llu",
                     (unsigned long long)a->tensors[i].nelems,
                     (unsigned long long)b->tensors[j].nelems);
            p->why_not = p->why_buf;
            continue;
        }
        check_comparable(c, p);
        dseg s;
        memset(&s, 0, sizeof s);
        s.ta = i;
        s.tb = j;
        s.n = a->tensors[i].nelems;
        s.pair = k;
        st = add_seg(c, &s);
    }
    return st;
}

/* ------------------------------------------------------------------------------------------ */
/* Pairing through the architecture's name map (a Hugging Face directory against a GGUF)       */
/* ------------------------------------------------------------------------------------------ */
typedef struct dmap {
    const hf_arch *arch;
    uint64_t n_head, n_head_kv;
    size_t *pair_of_b;    /* GGUF tensor -> its pair + 1 (0: none yet) */
    tbx_value *skipped;   /* HF names the row leaves out */
    tbx_value *unknown;   /* HF names the row does not know, or whose GGUF tensor is absent */
    tbx_value *expect;    /* the {arch}.* metadata the conversion derives from the directory
                             (MAP; NULL: not derived, `why` says why) */
    tbx_value *derived;   /* GGUF tensors the conversion generates (rope_freqs, ...) */
    char why[400];
} dmap;

static tbx_status read_model_type(dctx *c, tbx_file *hf, char *mt, size_t cap) {
    int64_t si = tbx_file_find_section(hf, "config.json");
    void *buf = NULL;
    size_t len = 0;
    tbx_status st = tbx_section_load_(hf, (uint64_t)si, &buf, &len, c->err);
    if (st != TBX_OK) return st;
    json_error_t je;
    json_t *root = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &je);
    tbx_free(&hf->al, buf, len ? len : 1);
    const char *s = root && json_is_object(root) ? json_string_value(json_object_get(root, "model_type"))
                                                 : NULL;
    if (!s) {
        json_decref(root);
        return tbx_err(c->err, TBX_E_FORMAT, TBX_NO_OFFSET, "config.json",
                       "--map auto: config.json %s", root ? "has no string model_type"
                                                            : "is not valid JSON");
    }
    snprintf(mt, cap, "%s", s);
    json_decref(root);
    return TBX_OK;
}

static tbx_status gguf_u64(dctx *c, tbx_file *g, const char *arch, const char *key, bool req,
                           uint64_t *out) {
    char k[160];
    snprintf(k, sizeof k, "%s.%s", arch, key);
    if (tbx_meta_get_u64(g, k, out) == TBX_OK) return TBX_OK;
    if (!req) return TBX_E_NOT_FOUND;
    return tbx_err(c->err, TBX_E_NOT_FOUND, TBX_NO_OFFSET, k, "--map auto: the GGUF file has "
                   "no %s (needed to undo the q/k row order)", k);
}

/* The pair of GGUF tensor j (made on first use). */
static tbx_status gguf_pair(dctx *c, dmap *m, uint64_t j, int64_t ta, size_t *k) {
    if (m->pair_of_b[j]) {
        *k = m->pair_of_b[j] - 1;
        return TBX_OK;
    }
    tbx_status st = new_pair(c, c->f[1]->tensors[j].name, ta, (int64_t)j, k);
    if (st == TBX_OK) {
        m->pair_of_b[j] = *k + 1;
        c->pairs[*k].nelems = c->f[1]->tensors[j].nelems;
    }
    return st;
}

static uint8_t hf_xf(int x) {
    return x == HF_XF_PERMUTE_Q || x == HF_XF_PERMUTE_K ? XF_PERMUTE
           : x == HF_XF_SCALE ? XF_SCALE : x == HF_XF_ADD ? XF_ADD : XF_NONE;
}

static void not_comparable(dpair *p, const char *fmt, const char *name, unsigned long long x,
                           unsigned long long y) {
    if (!p->comparable) return;
    p->comparable = false;
    snprintf(p->why_buf, sizeof p->why_buf, fmt, name, x, y);
    p->why_not = p->why_buf;
}

/* One mapped run: HF tensor i (values [a0, a0 + n), `rows` rows of `cols`) against GGUF tensor
 * j from value b0, with transform x of the map. */
static tbx_status map_run(dctx *c, dmap *m, uint64_t i, uint64_t j, uint64_t a0, uint64_t b0,
                          uint64_t rows, uint64_t cols, int x, float kx, const char *what) {
    size_t k;
    tbx_status st = gguf_pair(c, m, j, (int64_t)i, &k);
    if (st != TBX_OK) return st;
    dpair *p = &c->pairs[k];
    p->nsrc++;
    const uint64_t n = rows * cols;
    if (b0 + n > c->f[1]->tensors[j].nelems) {
        not_comparable(p, "%s: %llu values from the Hugging Face side, %llu in the GGUF tensor",
                       c->f[0]->tensors[i].name, (unsigned long long)(b0 + n),
                       (unsigned long long)c->f[1]->tensors[j].nelems);
        return TBX_OK;
    }
    dseg s;
    memset(&s, 0, sizeof s);
    s.ta = i;
    s.tb = j;
    s.a0 = a0;
    s.b0 = b0;
    s.n = n;
    s.pair = k;
    s.xf = hf_xf(x);
    s.k = kx;
    s.cols = cols;
    if (s.xf == XF_PERMUTE) {
        uint64_t heads = x == HF_XF_PERMUTE_Q ? m->n_head : m->n_head_kv;
        if (!heads || rows % heads || (rows / heads) % 2) {
            not_comparable(p, "%s: %llu rows do not split into %llu heads of an even size",
                           c->f[0]->tensors[i].name, (unsigned long long)rows,
                           (unsigned long long)heads);
            return TBX_OK;
        }
        s.d = rows / heads;
    }
    const char *xn = s.xf == XF_PERMUTE ? (x == HF_XF_PERMUTE_Q ? "permute q" : "permute k")
                     : s.xf == XF_SCALE ? "scale" : s.xf == XF_ADD ? "add" : NULL;
    if (!p->xf[0] && (what || xn))
        snprintf(p->xf, sizeof p->xf, "%s%s%s", what ? what : "", what && xn ? ", " : "",
                 xn ? xn : "");
    const char *w = undecodable(c->f[0], i);
    if (!w) w = undecodable(c->f[1], j);
    if (w && p->comparable) {
        p->comparable = false;
        snprintf(p->why_buf, sizeof p->why_buf, "%s", w);
        p->why_not = p->why_buf;
    }
    if (w) return TBX_OK;
    return add_seg(c, &s);
}

static tbx_status list_push_str(tbx_value *list, const char *s) {
    return tbx_value_array_push(list, tbx_value_new_string(s, strlen(s)));
}

static tbx_status pair_by_map(dctx *c, dmap *m, uint8_t *b_used) {
    tbx_file *hf = c->f[0], *g = c->f[1];
    char name[256];
    tbx_status st = TBX_OK;
    for (uint64_t i = 0; i < hf->ntensors && st == TBX_OK; i++) {
        const tbx_tensor *t = &hf->tensors[i];
        hf_match mm;
        int r = tbx_hf_map_(m->arch, t->name, &mm);
        if (r == 0) { st = list_push_str(m->skipped, t->name); continue; }
        if (r < 0) { st = list_push_str(m->unknown, t->name); continue; }
        const uint64_t cols = t->ndim ? t->shape[t->ndim - 1] : 1;
        const uint64_t rows = cols ? t->nelems / cols : 0;
        uint64_t j;
        if (mm.m->kind == HF_MAP_ONE) {
            if (!tbx_hf_gguf_name_(mm.m->gguf, mm.layer, mm.suffix, name, sizeof name) ||
                tbx_tensor_find(g, name, &j) != TBX_OK) {
                st = list_push_str(m->unknown, t->name);
                continue;
            }
            b_used[j] = 1;
            /* rows the conversion drops: RoBERTa's first positions (ARCH_POS_OFFSET), the
             * embedding's rows past vocab_size (ARCH_TRIM_VOCAB): the GGUF's rows are compared
             * with the HF rows they came from */
            const uint64_t grows = cols ? g->tensors[j].nelems / cols : 0;
            const bool pos = (m->arch->flags & ARCH_POS_OFFSET) && !strcmp(name, "position_embd.weight");
            const bool trim = (m->arch->flags & ARCH_TRIM_VOCAB) && !strcmp(name, "token_embd.weight");
            if ((pos || trim) && t->ndim == 2 && g->tensors[j].ndim == 2 &&
                g->tensors[j].shape[1] == cols && grows && grows < rows) {
                const uint64_t r0 = pos ? rows - grows : 0;
                char what[64];
                snprintf(what, sizeof what, "rows %llu..%llu", (unsigned long long)r0,
                         (unsigned long long)(r0 + grows));
                st = map_run(c, m, i, j, r0 * cols, 0, grows, cols, mm.m->xform, mm.m->k, what);
                continue;
            }
            st = map_run(c, m, i, j, 0, 0, rows, cols, mm.m->xform, mm.m->k, NULL);
            if (st == TBX_OK && g->tensors[j].nelems != t->nelems)
                not_comparable(&c->pairs[m->pair_of_b[j] - 1], "%s: %llu values against %llu",
                               t->name, (unsigned long long)t->nelems,
                               (unsigned long long)g->tensors[j].nelems);
        } else if (mm.m->kind == HF_MAP_SPLIT) {
            uint64_t row0 = 0;
            bool any = false;
            for (const hf_part *pt = mm.m->parts; pt->gguf && st == TBX_OK; pt++) {
                if (!tbx_hf_gguf_name_(pt->gguf, mm.layer, mm.suffix, name, sizeof name) ||
                    tbx_tensor_find(g, name, &j) != TBX_OK)
                    break;
                any = true;
                b_used[j] = 1;
                const uint64_t prow = cols ? g->tensors[j].nelems / cols : 0;
                char what[48];
                snprintf(what, sizeof what, "rows %llu..%llu", (unsigned long long)row0,
                         (unsigned long long)(row0 + prow));
                if (row0 + prow > rows) {
                    st = map_run(c, m, i, j, 0, 0, 0, cols, HF_XF_NONE, 0, what);
                    if (st == TBX_OK)
                        not_comparable(&c->pairs[m->pair_of_b[j] - 1], "%s: part of %llu rows "
                                       "past its %llu rows", t->name,
                                       (unsigned long long)(row0 + prow), (unsigned long long)rows);
                    break;
                }
                st = map_run(c, m, i, j, row0 * cols, 0, prow, cols, pt->xform, pt->k, what);
                row0 += prow;
            }
            if (!any && st == TBX_OK) st = list_push_str(m->unknown, t->name);
        } else { /* HF_MAP_STACK: expert e's slice */
            if (!tbx_hf_gguf_name_(mm.m->gguf, mm.layer, mm.suffix, name, sizeof name) ||
                tbx_tensor_find(g, name, &j) != TBX_OK || mm.expert < 0) {
                st = list_push_str(m->unknown, t->name);
                continue;
            }
            b_used[j] = 1;
            st = map_run(c, m, i, j, 0, (uint64_t)mm.expert * t->nelems, rows, cols,
                         mm.m->xform, mm.m->k, "stack");
        }
    }
    /* a GGUF tensor its sources do not cover whole */
    for (size_t k = 0; k < c->npairs; k++) {
        dpair *p = &c->pairs[k];
        if (p->covered != p->nelems)
            not_comparable(p, "%s: the Hugging Face tensors cover %llu of its %llu values",
                           p->name, (unsigned long long)p->covered,
                           (unsigned long long)p->nelems);
    }
    return st;
}

/* ------------------------------------------------------------------------------------------ */
/* Metadata and sections                                                                       */
/* ------------------------------------------------------------------------------------------ */
/* Are two values the same (type and value)? *first gets the first differing element of two
 * arrays of one length (UINT64_MAX otherwise). */
static bool value_eq(const tbx_value *a, const tbx_value *b, uint64_t *first, int depth) {
    *first = UINT64_MAX;
    tbx_value_type t = tbx_value_type_of(a);
    if (t != tbx_value_type_of(b) || depth > 64) return false;
    switch (t) {
    case TBX_V_NULL: return true;
    case TBX_V_BOOL: case TBX_V_U8: case TBX_V_U16: case TBX_V_U32: case TBX_V_U64: {
        uint64_t x = 0, y = 0;
        tbx_value_get_u64(a, &x);
        tbx_value_get_u64(b, &y);
        return x == y;
    }
    case TBX_V_I8: case TBX_V_I16: case TBX_V_I32: case TBX_V_I64: {
        int64_t x = 0, y = 0;
        tbx_value_get_i64(a, &x);
        tbx_value_get_i64(b, &y);
        return x == y;
    }
    case TBX_V_F16: case TBX_V_BF16: case TBX_V_F32: case TBX_V_F64: {
        double x = 0, y = 0;
        tbx_value_get_f64(a, &x);
        tbx_value_get_f64(b, &y);
        return memcmp(&x, &y, sizeof x) == 0 || (isnan(x) && isnan(y));
    }
    case TBX_V_STRING: case TBX_V_BYTES: {
        size_t n = 0, m = 0;
        const char *x = tbx_value_get_str(a, &n), *y = tbx_value_get_str(b, &m);
        return n == m && (!n || memcmp(x, y, n) == 0);
    }
    case TBX_V_NDARRAY: case TBX_V_BITSET: {
        size_t n = 0, m = 0;
        const void *x = tbx_value_data(a, &n), *y = tbx_value_data(b, &m);
        if (t == TBX_V_NDARRAY) {
            tbx_dtype da, db;
            uint32_t na, nb;
            const uint64_t *sa, *sb;
            if (tbx_value_ndarray(a, &da, &na, &sa) != TBX_OK ||
                tbx_value_ndarray(b, &db, &nb, &sb) != TBX_OK || da != db || na != nb ||
                (na && memcmp(sa, sb, na * sizeof *sa)))
                return false;
        }
        return tbx_value_len(a) == tbx_value_len(b) && n == m && (!n || memcmp(x, y, n) == 0);
    }
    case TBX_V_ARRAY: case TBX_V_MAP: {
        uint64_t n = tbx_value_len(a);
        if (n != tbx_value_len(b)) return false;
        if (t == TBX_V_ARRAY && tbx_value_elem_type(a) != tbx_value_elem_type(b)) return false;
        size_t na = 0, nb = 0;
        const void *pa = t == TBX_V_ARRAY ? tbx_value_data(a, &na) : NULL;
        const void *pb = t == TBX_V_ARRAY ? tbx_value_data(b, &nb) : NULL;
        if (pa && pb && na == nb && n && na % n == 0) { /* packed scalars */
            const size_t es = na / n;
            for (uint64_t i = 0; i < n; i++)
                if (memcmp((const char *)pa + i * es, (const char *)pb + i * es, es)) {
                    *first = i;
                    return false;
                }
            return true;
        }
        for (uint64_t i = 0; i < n; i++) {
            size_t la = 0, lb = 0;
            const char *sa = t == TBX_V_ARRAY ? tbx_value_str_at(a, i, &la) : NULL;
            const char *sb = sa ? tbx_value_str_at(b, i, &lb) : NULL;
            if (sa && sb) {
                if (la != lb || (la && memcmp(sa, sb, la))) { *first = i; return false; }
                continue;
            }
            if (t == TBX_V_MAP) {
                size_t ka = 0, kb = 0;
                const char *xa = tbx_value_key_at(a, i, &ka), *xb = tbx_value_key_at(b, i, &kb);
                if (ka != kb || (ka && memcmp(xa, xb, ka))) { *first = i; return false; }
            }
            uint64_t sub;
            if (!value_eq(tbx_value_at(a, i), tbx_value_at(b, i), &sub, depth + 1)) {
                *first = i;
                return false;
            }
        }
        return true;
    }
    default: return false;
    }
}

/* The value as the report shows it: scalars and short strings whole, anything else described
 * ("array<string>[151936]"). */
static tbx_value *value_shown(const tbx_value *v) {
    tbx_value_type t = tbx_value_type_of(v);
    if (t <= TBX_V_F64) return tbx_value_clone(v);
    if (t == TBX_V_STRING && tbx_value_len(v) <= DF_SHORT_STRING) return tbx_value_clone(v);
    char b[96];
    if (t == TBX_V_ARRAY)
        snprintf(b, sizeof b, "<array<%s>[%llu]>", tbx_value_type_name(tbx_value_elem_type(v)),
                 (unsigned long long)tbx_value_len(v));
    else
        snprintf(b, sizeof b, "<%s, %llu %s>", tbx_value_type_name(t),
                 (unsigned long long)tbx_value_len(v),
                 t == TBX_V_STRING || t == TBX_V_BYTES ? "bytes" : "items");
    return tbx_value_new_string(b, strlen(b));
}

/* The document is built with the public value API; a failed put marks the context out of
 * memory (reported at the end). */
static void mput(dctx *c, tbx_value *m, const char *k, tbx_value *v) {
    if (!v || !m) {
        tbx_value_free(v);
        c->oom = true;
        return;
    }
    if (tbx_value_map_put(m, k, strlen(k), v) != TBX_OK) c->oom = true;
}
static void apush(dctx *c, tbx_value *a, tbx_value *v) {
    if (!v || !a) {
        tbx_value_free(v);
        c->oom = true;
        return;
    }
    if (tbx_value_array_push(a, v) != TBX_OK) c->oom = true;
}
static tbx_value *vstr(const char *s) { return tbx_value_new_string(s, strlen(s)); }
static tbx_value *vu64(uint64_t u) { return tbx_value_new_uint(TBX_V_U64, u); }
static tbx_value *vf64(double d) {
    return isfinite(d) ? tbx_value_new_float(TBX_V_F64, d) : tbx_value_new_null();
}

static tbx_value *meta_diff(dctx *c, uint64_t *nchanges) {
    tbx_file *a = c->f[0], *b = c->f[1];
    tbx_value *m = tbx_value_new_map();
    tbx_value *added = tbx_value_new_array(TBX_V_NULL), *removed = tbx_value_new_array(TBX_V_NULL),
              *changed = tbx_value_new_array(TBX_V_NULL);
    mput(c, m, "compared", tbx_value_new_bool(1));
    for (size_t i = 0; i < a->nmeta && !c->oom; i++) {
        const tbx_meta_entry *e = &a->meta[i];
        const tbx_value *bv = tbx_meta_find(b, e->key);
        if (!bv) {
            tbx_value *x = tbx_value_new_map();
            mput(c, x, "key", vstr(e->key));
            mput(c, x, "type", vstr(tbx_value_type_name(tbx_value_type_of(e->value))));
            mput(c, x, "value", value_shown(e->value));
            apush(c, removed, x);
            continue;
        }
        uint64_t first;
        if (value_eq(e->value, bv, &first, 0)) continue;
        tbx_value *x = tbx_value_new_map();
        mput(c, x, "key", vstr(e->key));
        mput(c, x, "a_type", vstr(tbx_value_type_name(tbx_value_type_of(e->value))));
        mput(c, x, "b_type", vstr(tbx_value_type_name(tbx_value_type_of(bv))));
        mput(c, x, "a", value_shown(e->value));
        mput(c, x, "b", value_shown(bv));
        if (first != UINT64_MAX) mput(c, x, "first_difference", vu64(first));
        apush(c, changed, x);
    }
    for (size_t i = 0; i < b->nmeta && !c->oom; i++) {
        const tbx_meta_entry *e = &b->meta[i];
        if (tbx_meta_find(a, e->key)) continue;
        tbx_value *x = tbx_value_new_map();
        mput(c, x, "key", vstr(e->key));
        mput(c, x, "type", vstr(tbx_value_type_name(tbx_value_type_of(e->value))));
        mput(c, x, "value", value_shown(e->value));
        apush(c, added, x);
    }
    *nchanges = tbx_value_len(added) + tbx_value_len(removed) + tbx_value_len(changed);
    mput(c, m, "added", added);
    mput(c, m, "removed", removed);
    mput(c, m, "changed", changed);
    return m;
}

/* --map auto: the {arch}.* keys the conversion derives from config.json (m->expect, the HF
 * side) against the GGUF's: "changed" when both have a key with other values, "removed" /
 * "added" (as the user's A and B) when the GGUF lacks one; the GGUF's {arch}.* keys the
 * directory does not give are listed apart ("not_derived", not counted: llama.cpp's converter
 * writes a few that tensorbox leaves to the runtime's defaults). */
static tbx_value *meta_mapped(dctx *c, const dmap *m, uint64_t *nchanges) {
    const tbx_file *g = c->f[1];
    const bool sw = c->swapped;
    tbx_value *md = tbx_value_new_map();
    tbx_value *added = tbx_value_new_array(TBX_V_NULL), *removed = tbx_value_new_array(TBX_V_NULL),
              *changed = tbx_value_new_array(TBX_V_NULL), *extra = tbx_value_new_array(TBX_V_NULL);
    mput(c, md, "compared", tbx_value_new_bool(1));
    mput(c, md, "from", vstr("config.json through the architecture's hyper-parameters (the "
                             "keys tbx convert writes)"));
    char prefix[160];
    snprintf(prefix, sizeof prefix, "%s.", m->arch->arch);
    const size_t pl = strlen(prefix);
    for (uint64_t i = 0; i < tbx_value_len(m->expect) && !c->oom; i++) {
        size_t kl = 0;
        const char *key = tbx_value_key_at(m->expect, i, &kl);
        const tbx_value *hv = tbx_value_at(m->expect, i);
        if (!key || kl < pl || memcmp(key, prefix, pl) != 0) continue;
        const tbx_value *gv = tbx_meta_find(g, key);
        tbx_value *x = tbx_value_new_map();
        mput(c, x, "key", vstr(key));
        if (!gv) {
            mput(c, x, "type", vstr(tbx_value_type_name(tbx_value_type_of(hv))));
            mput(c, x, "value", value_shown(hv));
            apush(c, sw ? added : removed, x);
            continue;
        }
        uint64_t first;
        if (value_eq(hv, gv, &first, 0)) { tbx_value_free(x); continue; }
        const tbx_value *ua = sw ? gv : hv, *ub = sw ? hv : gv;
        mput(c, x, "a_type", vstr(tbx_value_type_name(tbx_value_type_of(ua))));
        mput(c, x, "b_type", vstr(tbx_value_type_name(tbx_value_type_of(ub))));
        mput(c, x, "a", value_shown(ua));
        mput(c, x, "b", value_shown(ub));
        if (first != UINT64_MAX) mput(c, x, "first_difference", vu64(first));
        apush(c, changed, x);
    }
    for (size_t i = 0; i < g->nmeta && !c->oom; i++) {
        const tbx_meta_entry *e = &g->meta[i];
        bool have = false;
        if (strncmp(e->key, prefix, pl) != 0) continue;
        for (uint64_t k = 0; k < tbx_value_len(m->expect) && !have; k++) {
            size_t kl = 0;
            const char *key = tbx_value_key_at(m->expect, k, &kl);
            have = key && kl == strlen(e->key) && !memcmp(key, e->key, kl);
        }
        if (!have) apush(c, extra, vstr(e->key));
    }
    *nchanges = tbx_value_len(added) + tbx_value_len(removed) + tbx_value_len(changed);
    mput(c, md, "added", added);
    mput(c, md, "removed", removed);
    mput(c, md, "changed", changed);
    mput(c, md, "not_derived", extra);
    return md;
}

/* --map auto: what the conversion derives from the directory (m->expect, m->derived); a
 * directory the conversion cannot read leaves the metadata not compared, saying why. */
static void derive_expect(dctx *c, dmap *m) {
    tbx_gguf_hf_options ho;
    tbx_gguf_hf_options_init(&ho);
    tbx_error e2;
    memset(&e2, 0, sizeof e2);
    tbx_hf_gguf *h = NULL;
    m->expect = tbx_value_new_map();
    m->derived = tbx_value_new_array(TBX_V_STRING);
    tbx_status st = !m->expect || !m->derived ? TBX_E_NOMEM
                                              : tbx_hf_gguf_prepare(c->f[0], &ho, &h, &e2);
    if (st == TBX_OK) st = tbx_hf_gguf_expect(h, m->expect, m->derived, &e2);
    tbx_hf_gguf_free(h);
    if (st == TBX_OK) return;
    snprintf(m->why, sizeof m->why, "the conversion's hyper-parameters could not be derived "
             "from the directory: %.250s", st == TBX_E_NOMEM && !e2.message[0] ? "out of memory"
                                                                          : e2.message);
    tbx_value_free(m->expect);
    m->expect = NULL;
    tbx_value_free(m->derived);
    m->derived = NULL;
}

static tbx_status section_diff(dctx *c, tbx_value *doc, uint64_t *nchanges) {
    tbx_file *a = c->f[0], *b = c->f[1];
    tbx_value *added = tbx_value_new_array(TBX_V_NULL), *removed = tbx_value_new_array(TBX_V_NULL),
              *changed = tbx_value_new_array(TBX_V_NULL);
    tbx_status st = TBX_OK;
    for (size_t i = 0; i < a->nsections && st == TBX_OK; i++) {
        int64_t j = tbx_file_find_section(b, a->sections[i].name);
        if (j < 0) { apush(c, removed, vstr(a->sections[i].name)); continue; }
        if (a->sections[i].size != b->sections[j].size) {
            apush(c, changed, vstr(a->sections[i].name));
            continue;
        }
        void *x = NULL, *y = NULL;
        size_t nx = 0, ny = 0;
        st = tbx_section_load_(a, i, &x, &nx, c->err);
        if (st == TBX_OK) st = tbx_section_load_(b, (uint64_t)j, &y, &ny, c->err);
        if (st == TBX_OK && (nx != ny || (nx && memcmp(x, y, nx))))
            apush(c, changed, vstr(a->sections[i].name));
        if (x) tbx_free(&a->al, x, nx ? nx : 1);
        if (y) tbx_free(&b->al, y, ny ? ny : 1);
    }
    for (size_t i = 0; i < b->nsections && st == TBX_OK; i++)
        if (tbx_file_find_section(a, b->sections[i].name) < 0)
            apush(c, added, vstr(b->sections[i].name));
    *nchanges = tbx_value_len(added) + tbx_value_len(removed) + tbx_value_len(changed);
    tbx_value *m = tbx_value_new_map();
    mput(c, m, "added", added);
    mput(c, m, "removed", removed);
    mput(c, m, "changed", changed);
    mput(c, doc, "sections", m);
    return st;
}

/* ------------------------------------------------------------------------------------------ */
/* The report                                                                                  */
/* ------------------------------------------------------------------------------------------ */
static const char *dt_name(const tbx_file *f, tbx_dtype dt) {
    const tbx_dtype_info *di = tbx_file_dtype(f, dt);
    return di ? di->name : "?";
}

static tbx_value *shape_value(const tbx_tensor *t) {
    tbx_value *s = tbx_value_new_array(TBX_V_NULL);
    for (uint32_t d = 0; s && d < t->ndim; d++)
        if (tbx_value_array_push(s, vu64(t->shape[d])) != TBX_OK) {
            tbx_value_free(s);
            return NULL;
        }
    return s;
}

static tbx_value *tensor_brief(const tbx_file *f, uint64_t i) {
    tbx_value *x = tbx_value_new_map();
    const tbx_tensor *t = &f->tensors[i];
    if (!x) return NULL;
    if (tbx_value_map_put(x, "name", 4, vstr(t->name)) != TBX_OK ||
        tbx_value_map_put(x, "dtype", 5, vstr(dt_name(f, t->dtype))) != TBX_OK ||
        tbx_value_map_put(x, "shape", 5, shape_value(t)) != TBX_OK) {
        tbx_value_free(x);
        return NULL;
    }
    return x;
}

typedef struct drank { size_t k; double nmse; } drank;

static double rank_nmse(const dpair *p) {
    if (p->acc.nf_mismatch) return INFINITY;
    double m[4];
    acc_metrics(&p->acc, m);
    return isnan(m[2]) ? INFINITY : m[2];
}

static const dpair *sort_pairs;
static int by_nmse(const void *x, const void *y) {
    const drank *a = x, *b = y;
    if (a->nmse != b->nmse) return a->nmse > b->nmse ? -1 : 1;
    return strcmp(sort_pairs[a->k].name, sort_pairs[b->k].name);
}

static bool pair_identical(const dpair *p) { return p->acc.nequal == p->acc.n; }

static bool pair_within(const dctx *c, const dpair *p) {
    if (pair_identical(p)) return true;
    if (p->acc.nf_mismatch) return false;
    double m[4];
    acc_metrics(&p->acc, m);
    if (c->o->tol_nmse >= 0 && !(m[2] <= c->o->tol_nmse)) return false;
    if (c->o->tol_max_abs >= 0 && !(m[0] <= c->o->tol_max_abs)) return false;
    return c->o->tol_nmse >= 0 || c->o->tol_max_abs >= 0;
}

static void put_metrics(dctx *c, tbx_value *x, const dacc *a) {
    double m[4];
    acc_metrics(a, m);
    mput(c, x, "max_abs", vf64(m[0]));
    mput(c, x, "rmse", vf64(m[1]));
    mput(c, x, "nmse", vf64(m[2]));
    mput(c, x, "cosine", vf64(m[3]));
}

static int by_layer(const void *x, const void *y) {
    long a = *(const long *)x, b = *(const long *)y;
    if (a == b) return 0;
    if (a < 0) return 1;
    if (b < 0) return -1;
    return a < b ? -1 : 1;
}

static tbx_value *layers_doc(dctx *c) {
    tbx_value *list = tbx_value_new_array(TBX_V_NULL);
    long *ls = malloc((c->npairs ? c->npairs : 1) * sizeof *ls);
    if (!ls) { c->oom = true; return list; }
    size_t n = 0;
    for (size_t k = 0; k < c->npairs; k++)
        if (c->pairs[k].comparable) ls[n++] = c->pairs[k].layer;
    qsort(ls, n, sizeof *ls, by_layer);
    for (size_t i = 0; i < n; i++) {
        if (i && ls[i] == ls[i - 1]) continue;
        dacc acc;
        memset(&acc, 0, sizeof acc);
        uint64_t nt = 0, nid = 0;
        const dpair *worst = NULL;
        double wn = -1;
        for (size_t k = 0; k < c->npairs; k++) {
            const dpair *p = &c->pairs[k];
            if (!p->comparable || p->layer != ls[i]) continue;
            acc_fold(&acc, &p->acc);
            nt++;
            nid += pair_identical(p);
            double r = rank_nmse(p);
            if (r > wn) { wn = r; worst = p; }
        }
        tbx_value *x = tbx_value_new_map();
        mput(c, x, "layer", ls[i] >= 0 ? vu64((uint64_t)ls[i]) : tbx_value_new_null());
        mput(c, x, "tensors", vu64(nt));
        mput(c, x, "identical", vu64(nid));
        mput(c, x, "elements", vu64(acc.n));
        put_metrics(c, x, &acc);
        mput(c, x, "worst", vstr(worst ? worst->name : ""));
        apush(c, list, x);
    }
    free(ls);
    return list;
}

static void file_brief(dctx *c, tbx_value *doc, const char *key, const tbx_file *f) {
    tbx_value *x = tbx_value_new_map();
    mput(c, x, "path", f->path ? vstr(f->path) : tbx_value_new_null());
    mput(c, x, "format", vstr(tbx_format_name(f->format)));
    mput(c, x, "tensors", vu64(f->ntensors));
    mput(c, x, "metadata", vu64(f->nmeta));
    mput(c, x, "sections", vu64(f->nsections));
    mput(c, doc, key, x);
}

static tbx_status build_doc(dctx *c, const uint8_t *b_used, const dmap *m, tbx_value **out) {
    tbx_file *a = c->f[0], *b = c->f[1];
    const bool mapped = m != NULL;
    const bool tol = c->o->tol_nmse >= 0 || c->o->tol_max_abs >= 0;
    tbx_value *doc = tbx_value_new_map();
    const bool swapped = c->swapped;
    file_brief(c, doc, "a", swapped ? b : a);
    file_brief(c, doc, "b", swapped ? a : b);
    mput(c, doc, "map", vstr(mapped ? (swapped ? "gguf-hf" : "hf-gguf") : "none"));
    if (mapped) mput(c, doc, "architecture", vstr(m->arch->model_type));
    uint64_t nmeta = 0, nsec = 0;
    tbx_status st = TBX_OK;
    if (!mapped) {
        mput(c, doc, "metadata", meta_diff(c, &nmeta));
        st = section_diff(c, doc, &nsec);
    } else if (m->expect) {
        mput(c, doc, "metadata", meta_mapped(c, m, &nmeta));
    } else {
        tbx_value *md = tbx_value_new_map();
        mput(c, md, "compared", tbx_value_new_bool(0));
        mput(c, md, "why", vstr(m->why));
        mput(c, doc, "metadata", md);
    }
    if (st != TBX_OK) { tbx_value_free(doc); return st; }

    /* tensors: added / removed / compared / not compared */
    tbx_value *tens = tbx_value_new_map();
    tbx_value *added = tbx_value_new_array(TBX_V_NULL), *removed = tbx_value_new_array(TBX_V_NULL);
    uint64_t nadded = 0, nremoved = 0;
    tbx_value *derived = mapped ? tbx_value_new_array(TBX_V_NULL) : NULL;
    for (uint64_t j = 0; j < b->ntensors; j++) {
        if (b_used[j]) continue;
        bool gen = false; /* generated by the conversion from config.json (rope_freqs) */
        for (uint64_t k = 0; mapped && m->derived && k < tbx_value_len(m->derived) && !gen; k++) {
            size_t l = 0;
            const char *s = tbx_value_str_at(m->derived, k, &l);
            gen = s && l == strlen(b->tensors[j].name) && !memcmp(s, b->tensors[j].name, l);
        }
        if (gen) { apush(c, derived, tensor_brief(b, j)); continue; }
        apush(c, swapped ? removed : added, tensor_brief(b, j));
        nadded++;
    }
    if (mapped) mput(c, tens, "derived", derived);
    if (!mapped) {
        uint8_t *a_used = calloc(a->ntensors ? a->ntensors : 1, 1);
        if (!a_used) c->oom = true;
        for (size_t k = 0; a_used && k < c->npairs; k++) a_used[c->pairs[k].ta] = 1;
        for (uint64_t i = 0; a_used && i < a->ntensors; i++)
            if (!a_used[i]) { apush(c, removed, tensor_brief(a, i)); nremoved++; }
        free(a_used);
    } else {
        for (uint64_t i = 0; i < tbx_value_len(m->unknown); i++) {
            size_t l = 0;
            const char *s = tbx_value_str_at(m->unknown, i, &l);
            uint64_t ti;
            if (s && tbx_tensor_find(a, s, &ti) == TBX_OK)
                apush(c, swapped ? added : removed, tensor_brief(a, ti));
            nremoved++;
        }
        mput(c, tens, "skipped", tbx_value_clone(m->skipped));
    }
    if (swapped) { uint64_t t = nadded; nadded = nremoved; nremoved = t; }
    mput(c, tens, "added", added);
    mput(c, tens, "removed", removed);

    drank *rk = malloc((c->npairs ? c->npairs : 1) * sizeof *rk);
    if (!rk) c->oom = true;
    size_t nr = 0;
    tbx_value *cmp = tbx_value_new_array(TBX_V_NULL), *notc = tbx_value_new_array(TBX_V_NULL);
    uint64_t ndt = 0, nsh = 0, nid = 0, nwithin = 0, ncmp = 0;
    dacc all;
    memset(&all, 0, sizeof all);
    for (size_t k = 0; rk && k < c->npairs; k++) {
        dpair *p = &c->pairs[k];
        if (!p->comparable) {
            tbx_value *x = tbx_value_new_map();
            mput(c, x, "name", vstr(p->name));
            mput(c, x, "why", vstr(p->why_not ? p->why_not : "?"));
            apush(c, notc, x);
            continue;
        }
        rk[nr].k = k;
        rk[nr++].nmse = rank_nmse(p);
    }
    sort_pairs = c->pairs;
    if (rk) qsort(rk, nr, sizeof *rk, by_nmse);
    for (size_t r = 0; r < nr; r++) {
        const dpair *p = &c->pairs[rk[r].k];
        const tbx_tensor *ta = &a->tensors[p->ta], *tb = &b->tensors[p->tb];
        /* the user's A and B (a mapped pair holds the HF side in slot 0) */
        const tbx_tensor *ua = swapped ? tb : ta, *ub = swapped ? ta : tb;
        const tbx_file *fa = swapped ? b : a, *fb = swapped ? a : b;
        tbx_value *x = tbx_value_new_map();
        mput(c, x, "name", vstr(p->name));
        if (mapped) {
            mput(c, x, swapped ? "b_name" : "a_name", vstr(ta->name));
            if (p->nsrc > 1) mput(c, x, "sources", vu64(p->nsrc));
            if (p->xf[0]) mput(c, x, "transform", vstr(p->xf));
        }
        mput(c, x, "a_dtype", vstr(dt_name(fa, ua->dtype)));
        mput(c, x, "b_dtype", vstr(dt_name(fb, ub->dtype)));
        mput(c, x, "a_shape", shape_value(ua));
        mput(c, x, "b_shape", shape_value(ub));
        const bool dtc = ua->dtype != ub->dtype || strcmp(dt_name(fa, ua->dtype), dt_name(fb, ub->dtype));
        const bool shc = !mapped ? !same_shape(ua, ub) : p->nsrc == 1 && !same_shape(ua, ub) &&
                                                          !p->xf[0];
        ndt += dtc;
        nsh += shc;
        mput(c, x, "elements", vu64(p->acc.n));
        const bool idt = pair_identical(p);
        nid += idt;
        mput(c, x, "identical", tbx_value_new_bool(idt));
        put_metrics(c, x, &p->acc);
        mput(c, x, "nonfinite", vu64(p->acc.nonfinite));
        mput(c, x, "nonfinite_mismatch", vu64(p->acc.nf_mismatch));
        if (tol) {
            const bool w = pair_within(c, p);
            nwithin += w;
            mput(c, x, "within_tolerance", tbx_value_new_bool(w));
        }
        apush(c, cmp, x);
        acc_fold(&all, &p->acc);
        ncmp++;
    }
    free(rk);
    mput(c, tens, "compared", cmp);
    const uint64_t nnot = tbx_value_len(notc);
    mput(c, tens, "not_compared", notc);
    mput(c, doc, "tensors", tens);
    mput(c, doc, "layers", layers_doc(c));

    tbx_value *tv = tbx_value_new_map();
    mput(c, tv, "nmse", c->o->tol_nmse >= 0 ? vf64(c->o->tol_nmse) : tbx_value_new_null());
    mput(c, tv, "max_abs", c->o->tol_max_abs >= 0 ? vf64(c->o->tol_max_abs) : tbx_value_new_null());
    mput(c, doc, "tolerance", tv);

    const bool structural = nadded || nremoved || nnot;
    const bool identical = !structural && nid == ncmp && !nmeta && !nsec;
    const bool within = !structural && (tol ? nwithin == ncmp : nid == ncmp);
    tbx_value *sm = tbx_value_new_map();
    mput(c, sm, "tensors_compared", vu64(ncmp));
    mput(c, sm, "tensors_identical", vu64(nid));
    if (tol) mput(c, sm, "tensors_within_tolerance", vu64(nwithin));
    mput(c, sm, "tensors_added", vu64(nadded));
    mput(c, sm, "tensors_removed", vu64(nremoved));
    mput(c, sm, "tensors_not_compared", vu64(nnot));
    mput(c, sm, "dtype_changes", vu64(ndt));
    mput(c, sm, "shape_changes", vu64(nsh));
    mput(c, sm, "metadata_changes", vu64(nmeta));
    mput(c, sm, "section_changes", vu64(nsec));
    mput(c, sm, "elements", vu64(all.n));
    put_metrics(c, sm, &all);
    mput(c, doc, "summary", sm);
    mput(c, doc, "identical", tbx_value_new_bool(identical));
    mput(c, doc, "within_tolerance", tol ? tbx_value_new_bool(within) : tbx_value_new_null());
    mput(c, doc, "differs", tbx_value_new_bool(tol ? !within : !identical));
    if (c->oom) {
        tbx_value_free(doc);
        return tbx_err_nomem(c->err, "diff report");
    }
    *out = doc;
    return TBX_OK;
}

/* ------------------------------------------------------------------------------------------ */
/* Entry                                                                                       */
/* ------------------------------------------------------------------------------------------ */
static bool is_hf_dir(const tbx_file *f) {
    return f->format == TBX_FORMAT_SAFETENSORS && tbx_file_find_section(f, "config.json") >= 0;
}

tbx_status tbx_diff(tbx_file *a, tbx_file *b, const tbx_diff_options *opt, tbx_value **report,
                    tbx_error *err) {
    if (err) memset(err, 0, sizeof *err);
    if (!report) return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "report", "NULL report");
    *report = NULL;
    if (!a || !b) return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, a ? "b" : "a",
                                 "NULL file handle");
    tbx_diff_options o;
    tbx_diff_options_init(&o);
    if (opt) {
        if (opt->struct_size < 2 * sizeof(uint32_t) || opt->struct_size > sizeof o)
            return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "struct_size",
                           "tbx_diff_options.struct_size %u (expected %zu)",
                           (unsigned)opt->struct_size, sizeof o);
        memcpy(&o, opt, opt->struct_size);
        o.struct_size = sizeof o;
    }
    if (o.map != TBX_DIFF_MAP_NONE && o.map != TBX_DIFF_MAP_AUTO)
        return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "map", "map %u (TBX_DIFF_MAP_NONE "
                       "or TBX_DIFF_MAP_AUTO)", (unsigned)o.map);
    if (isnan(o.tol_nmse) || isnan(o.tol_max_abs))
        return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "tolerance", "a NaN tolerance");
    dctx c;
    memset(&c, 0, sizeof c);
    c.f[0] = a;
    c.f[1] = b;
    c.o = &o;
    c.err = err;
    c.al = &a->al;
    dmap m;
    memset(&m, 0, sizeof m);
    bool mapped = false;
    if (o.map == TBX_DIFF_MAP_AUTO) {
        if (is_hf_dir(a) && b->format == TBX_FORMAT_GGUF) mapped = true;
        else if (is_hf_dir(b) && a->format == TBX_FORMAT_GGUF) {
            mapped = true;
            c.swapped = true; /* the HF side goes in slot 0 */
            c.f[0] = b;
            c.f[1] = a;
        }
    }
    tbx_status st = TBX_OK;
    uint8_t *b_used = calloc(c.f[1]->ntensors ? c.f[1]->ntensors : 1, 1);
    if (!b_used) return tbx_err_nomem(err, "diff table");
    if (mapped) {
        char mt[128], arch[128];
        st = read_model_type(&c, c.f[0], mt, sizeof mt);
        if (st == TBX_OK && !(m.arch = tbx_hf_arch_find_(mt))) {
            char list[512];
            tbx_hf_arch_list_(0, list, sizeof list);
            st = tbx_err(err, TBX_E_UNSUPPORTED, TBX_NO_OFFSET, "model_type", "--map auto: "
                         "model_type \"%s\" has no name map (known: %s); use --map none", mt,
                         list);
        }
        if (st == TBX_OK) {
            size_t al = 0;
            const char *ga = tbx_meta_get_str(c.f[1], "general.architecture", &al);
            snprintf(arch, sizeof arch, "%.*s", ga ? (int)al : 0, ga ? ga : "");
            if (!ga)
                st = tbx_err(err, TBX_E_NOT_FOUND, TBX_NO_OFFSET, "general.architecture",
                             "--map auto: the GGUF file has no general.architecture");
        }
        if (st == TBX_OK) {
            bool perm = false;
            for (const hf_tmap *t = m.arch->tmap; t->hf; t++) {
                perm |= t->xform == HF_XF_PERMUTE_Q || t->xform == HF_XF_PERMUTE_K;
                for (const hf_part *p = t->kind == HF_MAP_SPLIT ? t->parts : NULL; p && p->gguf; p++)
                    perm |= p->xform == HF_XF_PERMUTE_Q || p->xform == HF_XF_PERMUTE_K;
            }
            if (perm) {
                st = gguf_u64(&c, c.f[1], arch, "attention.head_count", true, &m.n_head);
                if (st == TBX_OK &&
                    gguf_u64(&c, c.f[1], arch, "attention.head_count_kv", false, &m.n_head_kv) !=
                        TBX_OK)
                    m.n_head_kv = m.n_head;
            }
        }
        if (st == TBX_OK) {
            m.pair_of_b = calloc(c.f[1]->ntensors ? c.f[1]->ntensors : 1, sizeof *m.pair_of_b);
            m.skipped = tbx_value_new_array(TBX_V_STRING);
            m.unknown = tbx_value_new_array(TBX_V_STRING);
            if (!m.pair_of_b || !m.skipped || !m.unknown) st = tbx_err_nomem(err, "diff table");
        }
        if (st == TBX_OK) st = pair_by_map(&c, &m, b_used);
        if (st == TBX_OK) derive_expect(&c, &m);
    } else {
        st = pair_by_name(&c, b_used);
    }
    if (st == TBX_OK) st = run_jobs(&c);
    if (st == TBX_OK) st = build_doc(&c, b_used, mapped ? &m : NULL, report);
    for (size_t k = 0; k < c.npairs; k++) free(c.pairs[k].name);
    free(c.pairs);
    free(c.segs);
    free(b_used);
    free(m.pair_of_b);
    tbx_value_free(m.skipped);
    tbx_value_free(m.unknown);
    tbx_value_free(m.expect);
    tbx_value_free(m.derived);
    return st;
}
