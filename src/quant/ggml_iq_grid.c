/*
 * ggml_iq_grid.c - the row quantizers of ggml's codebook ("grid") types: iq2_xxs, iq2_xs, iq2_s,
 * iq3_xxs, iq3_s, iq1_s, iq1_m (ggml.h, tbx_quant_rows_fn). They give the bytes of
 * ggml_quantize_chunk of llama.cpp's libggml (ggml-quants.c, quantize_iq*), written from its
 * algorithms:
 *
 *   Each super-block of 256 values is cut into sub-blocks (16 or 32 values) and those into
 *   groups of 8 (or 4) values, each group one entry of the type's codebook (ggml_tables.h):
 *   levels 2l+1 (l = 0 .. L-1) times the sub-block's scale, signs stored apart.
 *   a. weights: the importance matrix qw times sqrt(sigma^2 + x^2) (sigma^2 the super-block's
 *      mean square, or twice it), or without one x^2 (iq2_s: sigma^2/4 + x^2);
 *   b. signs: the group's values are taken in magnitude; iq2_xxs, iq2_xs, iq3_xxs store 7 sign
 *      bits per 8 values (even parity), so a group with an odd count of negatives flips the
 *      sign of its least important value (smallest w*x^2);
 *   c. scale search: for each candidate inverse scale (a fixed fan around (2L-1)/max), every
 *      value is rounded to its level, each group's point is looked up in the lattice map; a
 *      point not in the codebook takes the closest codebook entry (weighted distance) among
 *      its precomputed neighbours (the entries at the 1..3 smallest lattice distances); the
 *      candidate maximizing (sum w x q)^2 / sum w q^2 is kept, with its least-squares scale;
 *   d. groups that were off the codebook are snapped again with the kept scale, and the scale
 *      refitted;
 *   e. the super-block's f16 scale is max sub-block scale / 31 (times a per-type factor), the
 *      4-bit sub-block scales round((s/d - 1)/2).
 *   iq1_s / iq1_m: levels {-1, 0, 1} + a shift of +-1/8 per group; the best split of the sorted
 *   values into three level sets is found exhaustively from prefix sums (ties of equal values
 *   keep column order: a stable sort, as glibc's qsort, which ggml calls, is), then the groups
 *   are snapped to the codebook as above; iq1_m refits the super-block scale at the end.
 *
 * Every sum, product and rounding is ggml's, in ggml's order (f32, no fused multiply-add), so
 * the bytes are identical for finite inputs, including ggml's quirks: iq3_s packs the codes of
 * the sub-blocks that are not all zero one after the other (a zero sub-block leaves no gap).
 * Where ggml aborts or reads out of bounds (a NaN defeats every comparison; its full-codebook
 * fallback of iq1's neighbour search indexes past the group) this file takes the first
 * neighbour or the group's own values: defined, crash-free blocks, not ggml's.
 * ggml refuses iq2_xxs, iq2_xs and iq1_s without an importance matrix (callers check
 * tbx_ggml_quant_requires_imatrix first); given qw NULL they weight every column 1.
 *
 * The lattice maps and neighbour lists are built on first use (pthread_once, one per lattice)
 * into static storage of fixed size (about 1.7 MB for all six lattices) and never freed.
 */
#include "ggml.h"
#include "ggml_tables.h"
#include "core.h"

#include <float.h>
#include <math.h>
#include <pthread.h>
#include <string.h>

#define QK_K 256

/* ggml's nearest_int: round through the float adder (ties to even); beyond 2^22 and for
 * Inf/NaN the low mantissa bits, as ggml (defined: IEEE add, bit copy, int subtract). */
static inline int iq_nearest(float f) {
    const float v = f + 12582912.0f;
    int32_t i;
    memcpy(&i, &v, 4);
    return (i & 0x007fffff) - 0x00400000;
}
static inline float iq_max(float a, float b) { return a > b ? a : b; } /* ggml's MAX */
static inline int iq_clamp(int l, int hi) { return l < 0 ? 0 : l > hi ? hi : l; }

/* ========================================================================================== */
/* Lattices: the codebook's points, the map of every lattice point, neighbour lists             */
/* ========================================================================================== */
/* A lattice point is `dim` levels l in [0, nlev); its index is sum l_i * nlev^i. The map gives
 * a point's codebook entry (>= 0), or -(1 + o): nb[o] is the count of its neighbours and
 * nb[o+1 ..] their entries, by increasing distance then entry. */
typedef struct iq_lattice {
    int dim, nlev, ngrid, nwant;
    int npoints;
    size_t nb_cap;
    int8_t *pos;          /* [ngrid][dim]: 2l+1 */
    uint8_t *lev;         /* [ngrid][dim]: l */
    int32_t *map;         /* [npoints] */
    uint16_t *nb;         /* [nb_cap] */
    pthread_once_t once;
    void (*levels)(struct iq_lattice *g); /* fills pos from ggml_tables.h */
} iq_lattice;

/* Exact sizes of the neighbour storage: per off-codebook point, its count and its list. */
enum {
    NB_2X256 = 6305 + 113157, NB_2X512 = 6049 + 181721, NB_2X1024 = 5537 + 44716,
    NB_1X2048 = 4513 + 327721, NB_3X256 = 3840 + 18985, NB_3X512 = 3584 + 24733,
    PTS_8D = 6561, PTS_4D = 4096
};
static int8_t pos_2x256[256 * 8], pos_2x512[512 * 8], pos_2x1024[1024 * 8], pos_1x2048[2048 * 8];
static int8_t pos_3x256[256 * 4], pos_3x512[512 * 4];
static uint8_t pos_2x256_l[256 * 8], pos_2x512_l[512 * 8], pos_2x1024_l[1024 * 8];
static uint8_t pos_1x2048_l[2048 * 8], pos_3x256_l[256 * 4], pos_3x512_l[512 * 4];
static int32_t map_2x256[PTS_8D], map_2x512[PTS_8D], map_2x1024[PTS_8D], map_1x2048[PTS_8D];
static int32_t map_3x256[PTS_4D], map_3x512[PTS_4D];
static uint16_t nb_2x256[NB_2X256], nb_2x512[NB_2X512], nb_2x1024[NB_2X1024];
static uint16_t nb_1x2048[NB_1X2048], nb_3x256[NB_3X256], nb_3x512[NB_3X512];

/* The level of a codebook byte among the type's sorted values (-1: none). */
static int level_of(uint8_t b, const uint8_t *vals, int n) {
    for (int i = 0; i < n; i++)
        if (vals[i] == b) return i;
    return -1;
}
static void lev_u64(iq_lattice *g, const uint64_t *grid, const uint8_t *vals, int n) {
    for (int k = 0; k < g->ngrid; k++)
        for (int j = 0; j < 8; j++)
            g->pos[8 * k + j] = (int8_t)(2 * level_of((uint8_t)(grid[k] >> 8 * j), vals, n) + 1);
}
static void lev_u32(iq_lattice *g, const uint32_t *grid, const uint8_t *vals, int n) {
    for (int k = 0; k < g->ngrid; k++)
        for (int j = 0; j < 4; j++)
            g->pos[4 * k + j] = (int8_t)(2 * level_of((uint8_t)(grid[k] >> 8 * j), vals, n) + 1);
}
static const uint8_t V_IQ2[3] = {0x08, 0x19, 0x2b};
static const uint8_t V_IQ1[3] = {0xff, 0x00, 0x01};
static const uint8_t V_IQ3XXS[8] = {4, 12, 20, 28, 36, 44, 52, 62};
static const uint8_t V_IQ3S[8] = {1, 3, 5, 7, 9, 11, 13, 15};
static void lev_2x256(iq_lattice *g) { lev_u64(g, tbx_iq2xxs_grid, V_IQ2, 3); }
static void lev_2x512(iq_lattice *g) { lev_u64(g, tbx_iq2xs_grid, V_IQ2, 3); }
static void lev_2x1024(iq_lattice *g) { lev_u64(g, tbx_iq2s_grid, V_IQ2, 3); }
static void lev_1x2048(iq_lattice *g) { lev_u64(g, tbx_iq1s_grid, V_IQ1, 3); }
static void lev_3x256(iq_lattice *g) { lev_u32(g, tbx_iq3xxs_grid, V_IQ3XXS, 8); }
static void lev_3x512(iq_lattice *g) { lev_u32(g, tbx_iq3s_grid, V_IQ3S, 8); }

#define LATTICE(dim, nlev, ngrid, nwant, npts, cap, P, M, N, LEV)                                 \
    {dim, nlev, ngrid, nwant, npts, cap, P, P##_l, M, N, PTHREAD_ONCE_INIT, LEV}
/* iq2_xxs, iq2_xs, iq2_s, iq1_s/iq1_m, iq3_xxs, iq3_s (ggml's nwant: 2, 2, 1, 3, 2, 3) */
static iq_lattice L_IQ2XXS = LATTICE(8, 3, 256, 2, PTS_8D, NB_2X256, pos_2x256, map_2x256,
                                     nb_2x256, lev_2x256);
static iq_lattice L_IQ2XS = LATTICE(8, 3, 512, 2, PTS_8D, NB_2X512, pos_2x512, map_2x512,
                                    nb_2x512, lev_2x512);
static iq_lattice L_IQ2S = LATTICE(8, 3, 1024, 1, PTS_8D, NB_2X1024, pos_2x1024, map_2x1024,
                                   nb_2x1024, lev_2x1024);
static iq_lattice L_IQ1S = LATTICE(8, 3, 2048, 3, PTS_8D, NB_1X2048, pos_1x2048, map_1x2048,
                                   nb_1x2048, lev_1x2048);
static iq_lattice L_IQ3XXS = LATTICE(4, 8, 256, 2, PTS_4D, NB_3X256, pos_3x256, map_3x256,
                                     nb_3x256, lev_3x256);
static iq_lattice L_IQ3S = LATTICE(4, 8, 512, 3, PTS_4D, NB_3X512, pos_3x512, map_3x512,
                                   nb_3x512, lev_3x512);

static void lattice_build(iq_lattice *g) {
    g->levels(g);
    const int dim = g->dim;
    for (int k = 0; k < g->ngrid * dim; k++) g->lev[k] = (uint8_t)((g->pos[k] - 1) / 2);
    for (int p = 0; p < g->npoints; p++) g->map[p] = -1;
    for (int k = 0; k < g->ngrid; k++) {
        int idx = 0;
        for (int j = dim - 1; j >= 0; j--) idx = idx * g->nlev + (g->pos[dim * k + j] - 1) / 2;
        g->map[idx] = k;
    }
    int d2[2048];
    size_t o = 0;
    for (int p = 0; p < g->npoints; p++) {
        if (g->map[p] >= 0) continue;
        int pt[8];
        for (int j = 0, r = p; j < dim; j++, r /= g->nlev) pt[j] = 2 * (r % g->nlev) + 1;
        for (int k = 0; k < g->ngrid; k++) {
            int s = 0;
            for (int j = 0; j < dim; j++) {
                const int d = g->pos[dim * k + j] - pt[j];
                s += d * d;
            }
            d2[k] = s;
        }
        /* the nwant smallest distinct distances, then their entries in (distance, entry) order */
        int shell[3], nsh = 0;
        for (; nsh < g->nwant; nsh++) {
            int m = INT32_MAX;
            for (int k = 0; k < g->ngrid; k++)
                if (d2[k] < m && (nsh == 0 || d2[k] > shell[nsh - 1])) m = d2[k];
            if (m == INT32_MAX) break;
            shell[nsh] = m;
        }
        const size_t start = o;
        if (o >= g->nb_cap) break; /* the sizes are exact: never taken */
        g->map[p] = -(int32_t)(start + 1);
        o++;
        for (int s = 0; s < nsh; s++)
            for (int k = 0; k < g->ngrid && o < g->nb_cap; k++)
                if (d2[k] == shell[s]) g->nb[o++] = (uint16_t)k;
        g->nb[start] = (uint16_t)(o - start - 1);
    }
}

static void once_2x256(void) { lattice_build(&L_IQ2XXS); }
static void once_2x512(void) { lattice_build(&L_IQ2XS); }
static void once_2x1024(void) { lattice_build(&L_IQ2S); }
static void once_1x2048(void) { lattice_build(&L_IQ1S); }
static void once_3x256(void) { lattice_build(&L_IQ3XXS); }
static void once_3x512(void) { lattice_build(&L_IQ3S); }

static const iq_lattice *lattice(iq_lattice *g) {
    void (*fn)(void) = g == &L_IQ2XXS ? once_2x256 : g == &L_IQ2XS ? once_2x512
                     : g == &L_IQ2S ? once_2x1024 : g == &L_IQ1S ? once_1x2048
                     : g == &L_IQ3XXS ? once_3x256 : once_3x512;
    (void)pthread_once(&g->once, fn);
    return g;
}

/* The map entry of a group's levels. */
static inline int32_t lat_lookup(const iq_lattice *g, const int8_t *l) {
    int idx = 0;
    for (int j = g->dim - 1; j >= 0; j--) idx = idx * g->nlev + l[j];
    return g->map[idx];
}
static inline const uint16_t *lat_neighbours(const iq_lattice *g, int32_t m) {
    return g->nb + (-(int64_t)m - 1);
}
static inline void lat_levels(const iq_lattice *g, int k, int8_t *l) {
    for (int j = 0; j < g->dim; j++) l[j] = (int8_t)g->lev[g->dim * k + j];
}

/* The neighbour closest to scale*q in weighted distance (first on ties); its levels into l.
 * The terms w*(scale*q - x)^2 depend only on the coordinate and its level: computed once per
 * (coordinate, level), each neighbour's distance is the same sum in the same order. */
static int best_neighbour(const iq_lattice *g, const uint16_t *nb, const float *xval,
                          const float *w, float scale, int8_t *l) {
    const int dim = g->dim, nlev = g->nlev;
    float best = FLT_MAX;
    int gi = -1;
    if (nb[0] <= nlev) { /* few neighbours (iq3's lattices): the terms as they come */
        for (int j = 1; j <= nb[0]; j++) {
            const uint8_t *lg = g->lev + dim * nb[j];
            float d2 = 0;
            for (int i = 0; i < dim; i++) {
                const float diff = scale * (float)(2 * lg[i] + 1) - xval[i];
                d2 += w[i] * diff * diff;
            }
            if (d2 < best) {
                best = d2;
                gi = nb[j];
            }
        }
    } else {
        float t[8][8];
        for (int i = 0; i < dim; i++)
            for (int v = 0; v < nlev; v++) {
                const float diff = scale * (float)(2 * v + 1) - xval[i];
                t[i][v] = w[i] * diff * diff;
            }
        for (int j = 1; j <= nb[0]; j++) {
            const uint8_t *lg = g->lev + dim * nb[j];
            float d2 = 0;
            for (int i = 0; i < dim; i++) d2 += t[i][lg[i]];
            if (d2 < best) {
                best = d2;
                gi = nb[j];
            }
        }
    }
    if (gi < 0) gi = nb[0] ? nb[1] : 0; /* NaN: ggml aborts */
    lat_levels(g, gi, l);
    return gi;
}

/* The entry of a group's levels: the map's, else (only for NaN input; ggml aborts) the first
 * neighbour, whose levels replace l. */
static int group_entry(const iq_lattice *g, int8_t *l) {
    const int32_t m = lat_lookup(g, l);
    if (m >= 0) return m;
    const uint16_t *nb = lat_neighbours(g, m);
    const int gi = nb[0] ? nb[1] : 0;
    lat_levels(g, gi, l);
    return gi;
}

/* ========================================================================================== */
/* iq2_*, iq3_*: magnitudes on the codebook, signs apart                                       */
/* ========================================================================================== */
static void sq_weights(const float *xb, const float *qw, int n, float sigma2, bool quarter,
                       float *w) {
    if (qw) {
        for (int i = 0; i < n; i++) w[i] = qw[i] * sqrtf(sigma2 + xb[i] * xb[i]);
    } else if (quarter) {
        for (int i = 0; i < n; i++) w[i] = 0.25f * sigma2 + xb[i] * xb[i];
    } else {
        for (int i = 0; i < n; i++) w[i] = xb[i] * xb[i];
    }
}

/* Magnitudes of 8 values and their sign bits; with `parity`, an odd count of negatives flips
 * the least important value (its magnitude goes negative) and 7 bits are kept. */
static uint8_t signs8(const float *xb, const float *w, bool parity, float *xval) {
    int nflip = 0;
    uint8_t s = 0;
    for (int i = 0; i < 8; i++) {
        if (xb[i] >= 0) xval[i] = xb[i];
        else {
            xval[i] = -xb[i];
            nflip++;
            s |= (uint8_t)(1u << i);
        }
    }
    if (!parity) return s;
    if (nflip % 2) {
        int imin = 0;
        float mn = w[0] * xb[0] * xb[0];
        for (int i = 1; i < 8; i++) {
            const float a = w[i] * xb[i] * xb[i];
            if (a < mn) {
                mn = a;
                imin = i;
            }
        }
        xval[imin] = -xval[imin];
        s ^= (uint8_t)(1u << imin);
    }
    return s & 127;
}

/* ggml's make_qp_quants (levels 0..nmax, weighted), only its scale: iq2_xxs's first guess. The
 * levels live in bytes as ggml's do (a negative level wraps, and is read back wrapped). */
static float qp_scale(int n, int nmax, const float *x, const float *w) {
    uint8_t L[32];
    float max = 0;
    for (int i = 0; i < n; i++) max = iq_max(max, x[i]);
    if (max < 1e-15f) return 0.f;
    float iscale = (float)nmax / max;
    for (int i = 0; i < n; i++) L[i] = (uint8_t)iq_nearest(iscale * x[i]);
    const float scale = 1 / iscale;
    float best_mse = 0;
    for (int i = 0; i < n; i++) {
        const float diff = x[i] - scale * (float)L[i];
        best_mse += w[i] * diff * diff;
    }
    for (int is = -4; is <= 4; ++is) {
        if (is == 0) continue;
        const float iscale_is = (0.1f * (float)is + (float)nmax) / max;
        const float scale_is = 1 / iscale_is;
        float mse = 0;
        for (int i = 0; i < n; i++) {
            int l = iq_nearest(iscale_is * x[i]);
            l = l < nmax ? l : nmax;
            const float diff = x[i] - scale_is * (float)l;
            mse += w[i] * diff * diff;
        }
        if (mse < best_mse) {
            best_mse = mse;
            iscale = iscale_is;
        }
    }
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; i++) {
        int l = iq_nearest(iscale * x[i]);
        l = l < nmax ? l : nmax;
        L[i] = (uint8_t)l;
        sumlx += w[i] * x[i] * (float)l;
        suml2 += w[i] * (float)l * (float)l;
    }
    for (int itry = 0; itry < 5; ++itry) {
        int changed = 0;
        for (int i = 0; i < n; i++) {
            const float wi = w[i];
            float slx = sumlx - wi * x[i] * (float)L[i];
            float sl2 = suml2 - wi * (float)L[i] * (float)L[i];
            if (slx > 0 && sl2 > 0) {
                int nl = iq_nearest(x[i] * sl2 / slx);
                nl = nl < nmax ? nl : nmax;
                if (nl != (int)L[i]) {
                    slx += wi * x[i] * (float)nl;
                    sl2 += wi * (float)nl * (float)nl;
                    if (slx * slx * suml2 > sumlx * sumlx * sl2) {
                        L[i] = (uint8_t)nl;
                        sumlx = slx;
                        suml2 = sl2;
                        ++changed;
                    }
                }
            }
        }
        if (!changed) break;
    }
    return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

/* Which groups the final step snaps again with the kept scale. */
enum { RESNAP_OFF_GRID, RESNAP_ALL_IF_ANY_OFF, RESNAP_ALL };

typedef struct grid_search {
    const iq_lattice *g;
    int n;             /* values in the sub-block */
    int kmax;          /* levels per coordinate (2l+1 <= 2*kmax-1) */
    int is_max;        /* candidates is = -is_max .. is_max */
    float step;        /* inverse scale (2*kmax-1 + is*step) / div */
    bool on_grid0;     /* whether the groups count as on the codebook before any candidate */
    int resnap;
} grid_search;

/* Steps c and d for one sub-block: L gets its groups' levels (each a codebook entry), the
 * return value the scale (scale0 when no candidate improves on nothing). */
static float search_sub(const grid_search *S, const float *xval, const float *w,
                        const float *waux, float div, float scale0, int8_t *L) {
    const iq_lattice *g = S->g;
    const int dim = g->dim, ng = S->n / dim, km = S->kmax - 1;
    int8_t Laux[32];
    bool on[8], on_aux[8];
    float best = 0, scale = scale0;
    for (int k = 0; k < ng; k++) on[k] = S->on_grid0;
    for (int is = -S->is_max; is <= S->is_max; ++is) {
        const float id = ((float)(2 * S->kmax - 1) + (float)is * S->step) / div;
        const float this_scale = 1 / id;
        for (int k = 0; k < ng; k++) {
            for (int i = 0; i < dim; i++) {
                const int l = iq_nearest(0.5f * (id * xval[dim * k + i] - 1));
                Laux[dim * k + i] = (int8_t)iq_clamp(l, km);
            }
            const int32_t m = lat_lookup(g, Laux + dim * k);
            on_aux[k] = true;
            if (m < 0) {
                on_aux[k] = false;
                best_neighbour(g, lat_neighbours(g, m), xval + dim * k, waux + dim * k,
                               this_scale, Laux + dim * k);
            }
        }
        float sumqx = 0, sumq2 = 0;
        for (int i = 0; i < S->n; i++) {
            const float q = (float)(2 * Laux[i] + 1);
            sumqx += w[i] * xval[i] * q;
            sumq2 += w[i] * q * q;
        }
        if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
            scale = sumqx / sumq2;
            best = scale * sumqx;
            memcpy(L, Laux, (size_t)S->n);
            memcpy(on, on_aux, sizeof on);
        }
    }
    int n_off = 0;
    for (int k = 0; k < ng; k++) n_off += !on[k];
    if ((S->resnap == RESNAP_ALL || n_off > 0) && scale > 0) {
        const float id = 1 / scale;
        for (int k = 0; k < ng; k++) {
            if (S->resnap == RESNAP_OFF_GRID && on[k]) continue;
            int8_t *lk = L + dim * k;
            for (int i = 0; i < dim; i++)
                lk[i] = (int8_t)iq_clamp(iq_nearest(0.5f * (id * xval[dim * k + i] - 1)), km);
            const int32_t m = lat_lookup(g, lk);
            if (m < 0)
                best_neighbour(g, lat_neighbours(g, m), xval + dim * k, waux + dim * k, scale,
                               lk);
        }
        float sumqx = 0, sumq2 = 0;
        for (int i = 0; i < S->n; i++) {
            const float q = (float)(2 * L[i] + 1);
            sumqx += w[i] * xval[i] * q;
            sumq2 += w[i] * q * q;
        }
        if (sumq2 > 0) scale = sumqx / sumq2;
    }
    return scale;
}

static float sumsq256(const float *x) {
    float s = 0;
    for (int i = 0; i < QK_K; i++) s += x[i] * x[i];
    return s;
}

/* The 4-bit sub-block scale of s under 1/d. */
static inline int scale4(float id, float s) {
    return iq_clamp(iq_nearest(0.5f * (id * s - 1)), 15);
}

/* ---- iq2_xxs: 66 bytes: d, then per 32 values 4 entry bytes and 4x7 sign bits + 4-bit scale -- */
static void iq2xxs_block(const iq_lattice *g, const float *xbl, const float *qwb, uint8_t *y) {
    static const grid_search S = {NULL, 32, 3, 6, 0.1f, true, RESNAP_ALL};
    grid_search s = S;
    s.g = g;
    float scales[8], w[32], waux[32], xval[32];
    int8_t L[32];
    uint32_t q2[16];
    memset(q2, 0, sizeof q2);
    float max_scale = 0;
    const float sigma2 = sumsq256(xbl) / QK_K;
    for (int ib = 0; ib < 8; ib++) {
        const float *xb = xbl + 32 * ib;
        uint8_t sg[4];
        sq_weights(xb, qwb + 32 * ib, 32, sigma2, false, w);
        for (int i = 0; i < 32; i++) waux[i] = sqrtf(w[i]);
        for (int k = 0; k < 4; k++) sg[k] = signs8(xb + 8 * k, w + 8 * k, true, xval + 8 * k);
        float max = xval[0];
        for (int i = 1; i < 32; i++) max = iq_max(max, xval[i]);
        scales[ib] = 0;
        if (max < 1e-15f) continue;
        const float s0 = qp_scale(32, 4, xval, w);
        const float eff_max = s0 * 3;
        if (eff_max <= 0) continue;
        memset(L, 0, sizeof L);
        float scale = search_sub(&s, xval, w, waux, eff_max, s0, L);
        if (scale < 0) {
            scale = -scale;
            for (int k = 0; k < 4; k++) sg[k] = (uint8_t)(~sg[k] & 127);
        }
        for (int k = 0; k < 4; k++) {
            const int gi = group_entry(g, L + 8 * k);
            q2[2 * ib] |= (uint32_t)gi << 8 * k;
            q2[2 * ib + 1] |= (uint32_t)sg[k] << 7 * k;
        }
        scales[ib] = scale;
        max_scale = iq_max(max_scale, scale);
    }
    memset(y, 0, 66);
    if (!max_scale) return;
    const float d = max_scale / 31;
    tbx_st16(y, tbx_f32_to_f16(d));
    const float id = 1 / d;
    for (int ib = 0; ib < 8; ib++) q2[2 * ib + 1] |= (uint32_t)scale4(id, scales[ib]) << 28;
    for (int i = 0; i < 16; i++) tbx_st32(y + 2 + 4 * i, q2[i]);
}

/* ---- iq2_xs: 74 bytes: d, per 8 values a u16 (9-bit entry, 7 sign bits), 16 4-bit scales --- */
/* ---- iq2_s: 82 bytes: d, 32 entry low bytes, 32 sign bytes, 8 bytes of entry high bits,
 *      16 4-bit scales ------------------------------------------------------------------------ */
static void iq2xs_s_block(const iq_lattice *g, bool is_s, const float *xbl, const float *qwb,
                          uint8_t *y) {
    const grid_search s = {g, 16, 3, 9, 0.1f, true, RESNAP_OFF_GRID};
    float scales[16], w[16], waux[16], xval[16];
    int8_t L[16];
    uint16_t q2[32];
    memset(q2, 0, sizeof q2);
    memset(y, 0, is_s ? 82 : 74);
    float max_scale = 0;
    const float sigma2 = is_s ? 2 * sumsq256(xbl) / QK_K : sumsq256(xbl) / QK_K;
    for (int ib = 0; ib < 16; ib++) {
        const float *xb = xbl + 16 * ib;
        uint8_t sg[2];
        sq_weights(xb, qwb ? qwb + 16 * ib : NULL, 16, sigma2, true, w);
        for (int i = 0; i < 16; i++) waux[i] = sqrtf(w[i]);
        for (int k = 0; k < 2; k++) sg[k] = signs8(xb + 8 * k, w + 8 * k, !is_s, xval + 8 * k);
        float max = xval[0];
        for (int i = 1; i < 16; i++) max = iq_max(max, xval[i]);
        memset(L, 0, sizeof L);
        scales[ib] = 0;
        if (max < (is_s ? 1e-8f : 1e-15f)) continue;
        float scale = search_sub(&s, xval, w, waux, max, max / 5, L);
        if (scale < 0) {
            scale = -scale;
            for (int k = 0; k < 2; k++) sg[k] = (uint8_t)(is_s ? ~sg[k] : ~sg[k] & 127);
        }
        for (int k = 0; k < 2; k++) {
            const int gi = group_entry(g, L + 8 * k);
            if (is_s) {
                const int i8 = 2 * ib + k;
                y[2 + i8] = (uint8_t)(gi & 255);
                y[2 + 64 + i8 / 4] |= (uint8_t)((gi >> 8) << 2 * (i8 % 4));
                y[2 + 32 + i8] = sg[k];
            } else {
                q2[2 * ib + k] = (uint16_t)(gi | (sg[k] << 9));
            }
        }
        scales[ib] = scale;
        max_scale = iq_max(max_scale, scale);
    }
    if (!max_scale) {
        if (!is_s) memset(y, 0, 74);
        return;
    }
    const float d = max_scale / 31;
    tbx_st16(y, tbx_f32_to_f16(is_s ? d * 0.9875f : d));
    const float id = 1 / d;
    uint8_t *sc = y + (is_s ? 2 + 64 + 8 : 2 + 64);
    for (int ib = 0; ib < 16; ib++) {
        const int l = scale4(id, scales[ib]);
        if (ib % 2 == 0) sc[ib / 2] = (uint8_t)l;
        else sc[ib / 2] |= (uint8_t)(l << 4);
    }
    if (!is_s)
        for (int i = 0; i < 32; i++) tbx_st16(y + 2 + 2 * i, q2[i]);
}

/* ---- iq3_xxs: 98 bytes: d, 64 entry bytes, per 32 values 4x7 sign bits + 4-bit scale ------ */
/* ---- iq3_s: 110 bytes: d, 64 entry low bytes, 8 bytes of high bits, 32 sign bytes, 8 4-bit
 *      scales ------------------------------------------------------------------------------- */
static void iq3_block(const iq_lattice *g, bool is_s, const float *xbl, const float *qwb,
                      uint8_t *y) {
    const grid_search s = {g, 32, 8, is_s ? 9 : 15, 0.2f, !is_s,
                           is_s ? RESNAP_ALL_IF_ANY_OFF : RESNAP_OFF_GRID};
    float scales[8], w[32], waux[32], xval[32];
    int8_t L[32];
    uint8_t q3[64];
    uint32_t ss[8];
    memset(q3, 0, sizeof q3);
    memset(ss, 0, sizeof ss);
    memset(y, 0, is_s ? 110 : 98);
    uint8_t *qs = y + 2, *qh = y + 66, *sgn = y + 74; /* iq3_s: codes packed (see above) */
    float max_scale = 0;
    const float sigma2 = 2 * sumsq256(xbl) / QK_K;
    for (int ib = 0; ib < 8; ib++) {
        const float *xb = xbl + 32 * ib;
        uint8_t sg[4];
        sq_weights(xb, qwb ? qwb + 32 * ib : NULL, 32, sigma2, false, w);
        for (int i = 0; i < 32; i++) waux[i] = sqrtf(w[i]);
        for (int k = 0; k < 4; k++) sg[k] = signs8(xb + 8 * k, w + 8 * k, !is_s, xval + 8 * k);
        float max = xval[0];
        for (int i = 1; i < 32; i++) max = iq_max(max, xval[i]);
        memset(L, 0, sizeof L);
        scales[ib] = 0;
        if (is_s ? !max : max < 1e-8f) continue;
        float scale = search_sub(&s, xval, w, waux, max, max / 15, L);
        if (scale < 0) {
            scale = -scale;
            for (int k = 0; k < 4; k++) sg[k] = (uint8_t)(is_s ? ~sg[k] : ~sg[k] & 127);
        }
        for (int k = 0; k < 8; k++) {
            const int gi = group_entry(g, L + 4 * k);
            if (is_s) {
                qs[k] = (uint8_t)(gi & 255);
                qh[ib] |= (uint8_t)((gi >> 8) << k);
            } else {
                q3[8 * ib + k] = (uint8_t)gi;
            }
        }
        if (is_s) {
            qs += 8;
            memcpy(sgn, sg, 4);
            sgn += 4;
        } else {
            ss[ib] = sg[0] | ((uint32_t)sg[1] << 7) | ((uint32_t)sg[2] << 14) |
                     ((uint32_t)sg[3] << 21);
        }
        scales[ib] = scale;
        max_scale = iq_max(max_scale, scale);
    }
    if (!max_scale) {
        if (!is_s) memset(y, 0, 98);
        return;
    }
    const float d = max_scale / 31;
    tbx_st16(y, tbx_f32_to_f16(d * (is_s ? 1.033f : 1.0125f)));
    const float id = 1 / d;
    if (is_s) {
        for (int ib = 0; ib < 8; ib += 2)
            y[106 + ib / 2] = (uint8_t)(scale4(id, scales[ib]) | (scale4(id, scales[ib + 1]) << 4));
        return;
    }
    for (int ib = 0; ib < 8; ib++) ss[ib] |= (uint32_t)scale4(id, scales[ib]) << 28;
    memcpy(y + 2, q3, 64);
    for (int ib = 0; ib < 8; ib++) tbx_st32(y + 66 + 4 * ib, ss[ib]);
}

/* ========================================================================================== */
/* iq1_s, iq1_m: levels {-1, 0, 1} shifted by +-1/8                                            */
/* ========================================================================================== */
/* Values of a sub-block sorted ascending, ties in column order (glibc's qsort of ggml is a
 * stable merge sort): idx gets the columns. */
static void sort_cols(const float *x, int n, int *idx) {
    for (int j = 0; j < n; j++) {
        int i = j;
        while (i > 0 && x[idx[i - 1]] > x[j]) {
            idx[i] = idx[i - 1];
            i--;
        }
        idx[i] = j;
    }
}

/* The codebook entry of a group closest to scale*xg[l] (weighted; first on ties); levels
 * into l. */
static int iq1_neighbour(const iq_lattice *g, const uint16_t *nb, const float *xb, const float *w,
                         float scale, const float *xg, int8_t *l) {
    float t[8][3]; /* as in best_neighbour */
    for (int i = 0; i < 8; i++)
        for (int v = 0; v < 3; v++) {
            const float diff = scale * xg[v] - xb[i];
            t[i][v] = w[i] * diff * diff;
        }
    float best = FLT_MAX;
    int gi = -1;
    for (int j = 1; j <= nb[0]; j++) {
        const uint8_t *lg = g->lev + 8 * nb[j];
        float d2 = 0;
        for (int i = 0; i < 8; i++) d2 += t[i][lg[i]];
        if (d2 < best) {
            best = d2;
            gi = nb[j];
        }
    }
    if (gi < 0) { /* every distance Inf/NaN: the whole codebook (ggml's fallback, in bounds) */
        for (int k = 0; k < g->ngrid; k++) {
            const int8_t *pg = g->pos + 8 * k;
            float d2 = 0;
            for (int i = 0; i < 8; i++) {
                const float q = xg[(pg[i] - 1) / 2];
                const float diff = scale * q - xb[i];
                d2 += w[i] * diff * diff;
            }
            if (d2 < best) {
                best = d2;
                gi = k;
            }
        }
        if (gi < 0) gi = nb[0] ? nb[1] : 0;
    }
    lat_levels(g, gi, l);
    return gi;
}

static const float X_P[3] = {-1 + TBX_IQ1S_DELTA, TBX_IQ1S_DELTA, 1 + TBX_IQ1S_DELTA};
static const float X_M[3] = {-1 - TBX_IQ1S_DELTA, -TBX_IQ1S_DELTA, 1 - TBX_IQ1S_DELTA};

/* Entries of a sub-block's groups (index), snapped where the levels are off the codebook;
 * returns whether all were on it. xx(k): the shifted levels of group k. */
static bool iq1_snap(const iq_lattice *g, int ngroups, const float *xb, const float *w,
                     float scale, const float *const *xx, int8_t *L, uint16_t *index) {
    bool all = true;
    for (int k = 0; k < ngroups; k++) {
        int32_t m = lat_lookup(g, L + 8 * k);
        if (m < 0) {
            all = false;
            m = iq1_neighbour(g, lat_neighbours(g, m), xb + 8 * k, w + 8 * k, scale, xx[k],
                              L + 8 * k);
        }
        index[k] = (uint16_t)m;
    }
    return all;
}

/* The refit of a sub-block's scale on its entries (sumqx, sumq2 > 0), else the scale kept. */
static float iq1_refit(const iq_lattice *g, int ngroups, const float *xb, const float *w,
                       const float *const *xx, const uint16_t *index, float scale) {
    float sumqx = 0, sumq2 = 0;
    for (int k = 0; k < ngroups; k++) {
        const int8_t *pg = g->pos + 8 * index[k];
        for (int j = 0; j < 8; j++) {
            const float q = xx[k][(pg[j] - 1) / 2];
            sumqx += w[8 * k + j] * q * xb[8 * k + j];
            sumq2 += w[8 * k + j] * q * q;
        }
    }
    return sumqx > 0 && sumq2 > 0 ? sumqx / sumq2 : scale;
}

/* ---- iq1_s: 50 bytes: d, 32 entry low bytes, per 32 values a u16 (4x3 high bits, 3-bit scale,
 *      shift sign) -------------------------------------------------------------------------- */
static void iq1s_block(const iq_lattice *g, const float *xbl, const float *qwb, uint8_t *y) {
    float scales[8], w[32], sumx[33], sumw[33];
    int8_t L[32], shifts[8];
    int idx[32];
    uint16_t index[4], qh[8];
    memset(y, 0, 50);
    memset(qh, 0, sizeof qh);
    float max_scale = 0;
    const float sigma2 = 2 * sumsq256(xbl) / QK_K;
    for (int ib = 0; ib < 8; ib++) {
        const float *xb = xbl + 32 * ib;
        if (qwb) {
            for (int i = 0; i < 32; i++) w[i] = qwb[32 * ib + i] * sqrtf(sigma2 + xb[i] * xb[i]);
        } else {
            for (int i = 0; i < 32; i++) w[i] = sqrtf(sigma2 + xb[i] * xb[i]);
        }
        float max = fabsf(xb[0]);
        for (int i = 1; i < 32; i++) max = iq_max(max, fabsf(xb[i]));
        scales[ib] = 0;
        shifts[ib] = 1;
        if (max < 1e-12f) continue;
        sort_cols(xb, 32, idx);
        sumx[0] = sumw[0] = 0;
        for (int j = 0; j < 32; j++) {
            sumx[j + 1] = sumx[j] + w[idx[j]] * xb[idx[j]];
            sumw[j + 1] = sumw[j] + w[idx[j]];
        }
        float best = -FLT_MAX, scale = max;
        int b1 = -1, b2 = -1, shift = 0;
        for (int i1 = 0; i1 <= 32; i1++)
            for (int i2 = i1; i2 <= 32; i2++) {
                for (int t = 0; t < 2; t++) {
                    const float *v = t ? X_M : X_P;
                    const float sumqx = (sumx[i1] - sumx[0]) * v[0] + (sumx[i2] - sumx[i1]) * v[1] +
                                        (sumx[32] - sumx[i2]) * v[2];
                    const float sumq2 = (sumw[i1] - sumw[0]) * v[0] * v[0] +
                                        (sumw[i2] - sumw[i1]) * v[1] * v[1] +
                                        (sumw[32] - sumw[i2]) * v[2] * v[2];
                    if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
                        scale = sumqx / sumq2;
                        best = scale * sumqx;
                        b1 = i1;
                        b2 = i2;
                        shift = t ? -1 : 1;
                    }
                }
            }
        if (b1 < 0 || b2 < 0 || shift == 0) continue;
        for (int j = 0; j < 32; j++) L[idx[j]] = (int8_t)(j < b1 ? 0 : j < b2 ? 1 : 2);
        if (scale < 0) {
            for (int j = 0; j < 32; j++) L[j] = (int8_t)(2 - L[j]);
            scale = -scale;
            shift = -shift;
        }
        const float *xs = shift == 1 ? X_P : X_M;
        const float *xx[4] = {xs, xs, xs, xs};
        if (!iq1_snap(g, 4, xb, w, scale, xx, L, index))
            scale = iq1_refit(g, 4, xb, w, xx, index, scale);
        uint16_t h = 0;
        for (int k = 0; k < 4; k++) {
            y[2 + 4 * ib + k] = (uint8_t)(index[k] & 255);
            h |= (uint16_t)((index[k] >> 8) << 3 * k);
        }
        qh[ib] = h;
        scales[ib] = scale;
        shifts[ib] = (int8_t)shift;
        max_scale = iq_max(max_scale, scale);
    }
    if (max_scale) {
        const float d = max_scale / 15;
        tbx_st16(y, tbx_f32_to_f16(d * 1.125f));
        const float id = 1 / d;
        for (int ib = 0; ib < 8; ib++) {
            int l = iq_clamp(iq_nearest(0.5f * (id * scales[ib] - 1)), 7);
            if (shifts[ib] == -1) l |= 8;
            qh[ib] |= (uint16_t)(l << 12);
        }
    }
    for (int ib = 0; ib < 8; ib++) tbx_st16(y + 34 + 2 * ib, qh[ib]);
}

/* ---- iq1_m: 56 bytes: 32 entry low bytes, per 16 values a byte (2x3 high bits, 2 shift
 *      signs), 16 3-bit scales and the f16 super-block scale in their top nibbles ------------- */
static void iq1m_weights(const float *xb, const float *qw, float sigma2, float *w) {
    if (qw) {
        for (int i = 0; i < 16; i++) w[i] = qw[i] * sqrtf(sigma2 + xb[i] * xb[i]);
    } else {
        for (int i = 0; i < 16; i++) w[i] = xb[i] * xb[i];
    }
}

static void iq1m_block(const iq_lattice *g, const float *xbl, const float *qwb, uint8_t *y) {
    static const uint8_t masks[4] = {0x00, 0x80, 0x08, 0x88};
    float scales[16], w[16];
    int8_t L[16], shifts[16];
    int idx[16];
    uint16_t index[2], sc[4] = {0, 0, 0, 0};
    uint8_t *qs = y, *qh = y + 32;
    memset(y, 0, 56);
    float max_scale = 0;
    const float sigma2 = 2 * sumsq256(xbl) / QK_K;
    const float p2 = X_P[2], m2 = X_M[2];
    const float cp1 = X_P[0] * X_P[0] - X_P[1] * X_P[1], cp2 = X_P[1] * X_P[1] - X_P[2] * X_P[2];
    const float cm1 = X_M[0] * X_M[0] - X_M[1] * X_M[1], cm2 = X_M[1] * X_M[1] - X_M[2] * X_M[2];
    for (int ib = 0; ib < 16; ib++) {
        const float *xb = xbl + 16 * ib;
        iq1m_weights(xb, qwb ? qwb + 16 * ib : NULL, sigma2, w);
        float max = fabsf(xb[0]);
        for (int i = 1; i < 16; i++) max = iq_max(max, fabsf(xb[i]));
        scales[ib] = 0;
        shifts[ib] = 0;
        if (max < 1e-7f) continue;
        sort_cols(xb, 16, idx);
        /* prefix sums per half of the sub-block (each half has its own shift) */
        float px[2][17], pw[2][17];
        px[0][0] = px[1][0] = pw[0][0] = pw[1][0] = 0;
        for (int j = 0; j < 16; j++) {
            const int i = idx[j], h = i < 8 ? 0 : 1;
            px[h][j + 1] = px[h][j] + w[i] * xb[i];
            px[1 - h][j + 1] = px[1 - h][j];
            pw[h][j + 1] = pw[h][j] + w[i];
            pw[1 - h][j + 1] = pw[1 - h][j];
        }
        const float txs[2] = {px[0][16], px[1][16]}, tws[2] = {pw[0][16], pw[1][16]};
        float best = -FLT_MAX, scale = max;
        int b1 = -1, b2 = -1, bk = -1;
        for (int i1 = 0; i1 <= 16; i1++)
            for (int i2 = i1; i2 <= 16; i2++) {
                float qxp[2], qxm[2], q2p[2], q2m[2];
                for (int h = 0; h < 2; h++) {
                    const float sx = px[h][i1] + px[h][i2];
                    qxp[h] = txs[h] * p2 - sx;
                    qxm[h] = txs[h] * m2 - sx;
                    q2p[h] = tws[h] * p2 * p2 + pw[h][i1] * cp1 + pw[h][i2] * cp2;
                    q2m[h] = tws[h] * m2 * m2 + pw[h][i1] * cm1 + pw[h][i2] * cm2;
                }
                const float sqx[4] = {qxp[0] + qxp[1], qxp[0] + qxm[1], qxm[0] + qxp[1],
                                      qxm[0] + qxm[1]};
                const float sq2[4] = {q2p[0] + q2p[1], q2p[0] + q2m[1], q2m[0] + q2p[1],
                                      q2m[0] + q2m[1]};
                for (int k = 0; k < 4; k++)
                    if (sq2[k] > 0 && sqx[k] * sqx[k] > best * sq2[k]) {
                        scale = sqx[k] / sq2[k];
                        best = scale * sqx[k];
                        b1 = i1;
                        b2 = i2;
                        bk = k;
                    }
            }
        if (b1 < 0 || b2 < 0 || bk < 0) continue;
        for (int j = 0; j < 16; j++) L[idx[j]] = (int8_t)(j < b1 ? 0 : j < b2 ? 1 : 2);
        if (scale < 0) {
            for (int j = 0; j < 16; j++) L[j] = (int8_t)(2 - L[j]);
            scale = -scale;
            bk = 3 - bk;
        }
        const float *xx[2] = {bk < 2 ? X_P : X_M, bk % 2 == 0 ? X_P : X_M};
        if (!iq1_snap(g, 2, xb, w, scale, xx, L, index))
            scale = iq1_refit(g, 2, xb, w, xx, index, scale);
        qs[2 * ib] = (uint8_t)(index[0] & 255);
        qs[2 * ib + 1] = (uint8_t)(index[1] & 255);
        qh[ib] = (uint8_t)((index[0] >> 8) | ((index[1] >> 8) << 4));
        scales[ib] = scale;
        shifts[ib] = (int8_t)bk;
        max_scale = iq_max(max_scale, scale);
    }
    if (!max_scale) return;
    float d = max_scale / 15;
    const float id = 1 / d;
    float sumqx = 0, sumq2 = 0;
    for (int ib = 0; ib < 16; ib++) {
        const int l = iq_clamp(iq_nearest(0.5f * (id * scales[ib] - 1)), 7);
        sc[ib / 4] |= (uint16_t)(l << 3 * (ib % 4));
        qh[ib] |= masks[shifts[ib]];
        const float *xb = xbl + 16 * ib;
        iq1m_weights(xb, qwb ? qwb + 16 * ib : NULL, sigma2, w);
        for (int k = 0; k < 2; k++) {
            const float *xx = (k == 0 ? shifts[ib] < 2 : shifts[ib] % 2 == 0) ? X_P : X_M;
            const int e = qs[2 * ib + k] + ((qh[ib] << (8 - 4 * k)) & 0x700);
            const int8_t *pg = g->pos + 8 * e;
            for (int j = 0; j < 8; j++) {
                const float q = xx[(pg[j] - 1) / 2] * (float)(2 * l + 1);
                sumqx += w[8 * k + j] * q * xb[8 * k + j];
                sumq2 += w[8 * k + j] * q * q;
            }
        }
    }
    if (sumq2 > 0) d = sumqx / sumq2;
    const uint16_t s = tbx_f32_to_f16(d * 1.1125f);
    sc[0] |= (uint16_t)((s & 0x000f) << 12);
    sc[1] |= (uint16_t)((s & 0x00f0) << 8);
    sc[2] |= (uint16_t)((s & 0x0f00) << 4);
    sc[3] |= (uint16_t)(s & 0xf000);
    for (int i = 0; i < 4; i++) tbx_st16(y + 48 + 2 * i, sc[i]);
}

/* ========================================================================================== */
/* Row quantizers                                                                              */
/* ========================================================================================== */
/* A row of the type whose super-block encoder is `blk`: nrows rows of n values (n % 256 == 0),
 * each super-block with the matching 256 columns of qw. */
typedef void (*iq_block_fn)(const iq_lattice *g, int variant, const float *x, const float *qw,
                            uint8_t *y);

static void run_rows(iq_lattice *lat, iq_block_fn blk, int variant, size_t bytes,
                     const float *x, void *dst, int64_t nrows, int64_t n, const float *qw) {
    if (nrows <= 0 || n <= 0 || n % QK_K) return;
    const iq_lattice *g = lattice(lat);
    uint8_t *y = dst;
    const int64_t nb = n / QK_K;
    for (int64_t r = 0; r < nrows; r++)
        for (int64_t b = 0; b < nb; b++, y += bytes)
            blk(g, variant, x + r * n + b * QK_K, qw ? qw + b * QK_K : NULL, y);
}

/* iq2_xxs, iq2_xs, iq1_s need weights: NULL means 1 per column (ggml refuses; see the top). */
static const float *ones256(void) {
    static const float one[QK_K] = {
#define O4 1.f, 1.f, 1.f, 1.f
#define O32 O4, O4, O4, O4, O4, O4, O4, O4
        O32, O32, O32, O32, O32, O32, O32, O32
#undef O32
#undef O4
    };
    return one;
}

static void b_iq2xxs(const iq_lattice *g, int v, const float *x, const float *qw, uint8_t *y) {
    (void)v;
    iq2xxs_block(g, x, qw ? qw : ones256(), y);
}
static void b_iq2xs(const iq_lattice *g, int v, const float *x, const float *qw, uint8_t *y) {
    (void)v;
    iq2xs_s_block(g, false, x, qw ? qw : ones256(), y);
}
static void b_iq2s(const iq_lattice *g, int v, const float *x, const float *qw, uint8_t *y) {
    (void)v;
    iq2xs_s_block(g, true, x, qw, y);
}
static void b_iq3(const iq_lattice *g, int v, const float *x, const float *qw, uint8_t *y) {
    iq3_block(g, v != 0, x, qw, y);
}
static void b_iq1s(const iq_lattice *g, int v, const float *x, const float *qw, uint8_t *y) {
    (void)v;
    iq1s_block(g, x, qw, y);
}
static void b_iq1m(const iq_lattice *g, int v, const float *x, const float *qw, uint8_t *y) {
    (void)v;
    iq1m_block(g, x, qw, y);
}

void tbx_iq_rows_iq2_xxs(const float *x, void *d, int64_t nrows, int64_t n, const float *qw) {
    run_rows(&L_IQ2XXS, b_iq2xxs, 0, 66, x, d, nrows, n, qw);
}
void tbx_iq_rows_iq2_xs(const float *x, void *d, int64_t nrows, int64_t n, const float *qw) {
    run_rows(&L_IQ2XS, b_iq2xs, 0, 74, x, d, nrows, n, qw);
}
void tbx_iq_rows_iq2_s(const float *x, void *d, int64_t nrows, int64_t n, const float *qw) {
    run_rows(&L_IQ2S, b_iq2s, 0, 82, x, d, nrows, n, qw);
}
void tbx_iq_rows_iq3_xxs(const float *x, void *d, int64_t nrows, int64_t n, const float *qw) {
    run_rows(&L_IQ3XXS, b_iq3, 0, 98, x, d, nrows, n, qw);
}
void tbx_iq_rows_iq3_s(const float *x, void *d, int64_t nrows, int64_t n, const float *qw) {
    run_rows(&L_IQ3S, b_iq3, 1, 110, x, d, nrows, n, qw);
}
void tbx_iq_rows_iq1_s(const float *x, void *d, int64_t nrows, int64_t n, const float *qw) {
    run_rows(&L_IQ1S, b_iq1s, 0, 50, x, d, nrows, n, qw);
}
void tbx_iq_rows_iq1_m(const float *x, void *d, int64_t nrows, int64_t n, const float *qw) {
    run_rows(&L_IQ1S, b_iq1m, 0, 56, x, d, nrows, n, qw);
}
