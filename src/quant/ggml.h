/*
 * ggml.h - kernels of the ggml block types (GGUF tensor types): dequantizers and quantizers.
 *
 * Dequantizers (tbx_dequant_fn, see plain.h) decode `nblocks` consecutive blocks of
 * tbx_dtype_info.block_bytes bytes each into nblocks * block_size floats. `src` needs no
 * alignment. The scalar kernels (ggml_dequant.c) compute in f32 in the order of ggml's reference
 * dequantizers, so they give the same bits as ggml's to_float for every block, NaN/Inf scales
 * included (tests/python/test_ggml_dequant_identical.py; bench_ggml_quant --random): q1_0 quiets
 * a signalling-NaN scale as ggml's f16 conversion does, and the codebook types iq2_xxs, iq2_xs,
 * iq2_s, iq3_xxs, iq3_s negate the product db * grid as ggml's compiled code does, so a NaN
 * output's sign follows the sign flag; gguf-py keeps the NaN's sign there (the only bits in
 * which tensorbox and gguf-py differ). The SIMD kernels (ggml_simd_avx2.c,
 * ggml_simd_avx2_dq.c, ggml_simd_avx512.c) perform the same IEEE operations in the same order
 * and give the same bits as the scalar kernels (checked by tests/unit/test_ggml_quant.c).
 * Every type has an AVX2 kernel; the dispatched ones run at memory speed (64 MiB of output,
 * one thread: bench_ggml_quant --no-quant).
 *
 * Layers: the scalar files (ggml_dequant.c, ggml_quant.c) never dispatch; the SIMD files
 * (ggml_simd_*.c) never call the scalar files; dispatch.c alone reads cpuid and picks, and is
 * the only file that knows both.
 *
 * What is quantizable, and with which bytes: every type below has a row quantizer
 * (tbx_ggml_quant_rows_for, the contract of ggml_quantize_chunk, see below) giving the bytes of
 * ggml_quantize_chunk of llama.cpp's libggml for finite input, without and with an importance
 * matrix (tests/unit/test_ggml_rows_vs_ggml.c compares them all with libggml):
 *   q8_0, tq1_0, tq2_0, mxfp4, nvfp4, q1_0, q2_0: block-local; ggml ignores the importance
 *     matrix, so do they (ggml_rows.c, ggml_lowbit.c);
 *   q4_0, q4_1, q5_0, q5_1, q2_K .. q6_K: without a matrix ggml's reference quantizers (the
 *     block quantizers below); with one ggml's weighted algorithms (ggml_quant_w.c; their
 *     symmetric and affine fits run eight groups at a time on AVX2 kernels on AVX2 CPUs:
 *     tbx_wq_symm8_fn, tbx_wq_aff8_fn below, the same bytes);
 *   iq4_nl, iq4_xs: ggml's algorithm, weighted by x^2 without a matrix (ggml_iq4.c).
 * Block quantizers (tbx_quant_fn) encode nblocks * block_size floats into nblocks blocks.
 *   - q8_0, q4_0, q4_1, q5_0, q5_1, tq1_0, tq2_0, mxfp4: the same bytes as gguf-py's
 *     gguf.quants.quantize (= ggml's quantize_row_*_ref) for finite inputs.
 *   - q2_K .. q6_K: two quantizers. ggml's reference algorithm (tbx_ggml_quant_ref_for,
 *     written from ggml's quantize_row_*_ref: the same bytes as ggml_quantize_chunk of
 *     llama.cpp's libggml without an importance matrix, tests/python/
 *     test_ggml_quant_identical.py), the default of every conversion (tbx_ggml_quant_default_for,
 *     on AVX2 CPUs its AVX2 kernels tbx_ggml_quant_kref_avx2_for: the same bytes);
 *     and tensorbox's own encoder (least-squares search, super-block refit, local search on the
 *     quantized sub-scales; see ggml_quant.c; tbx_ggml_quant_for / tbx_ggml_quant_search_for),
 *     asked for explicitly (GGUF's write option quant_method=search): on every test
 *     distribution its reconstruction RMSE is below the reference's. A super-block holding a
 *     value the type cannot represent (beyond tbx_quant_range, check.h) or Inf/NaN gets the
 *     reference's bytes from it too: the values ggml itself gives it.
 *   - iq2_xxs, iq2_xs, iq2_s, iq3_xxs, iq3_s, iq1_s, iq1_m (ggml_iq_grid.c): row quantizers
 *     only (tbx_ggml_quant_rows_for, below), ggml_quantize_chunk's bytes with and without an
 *     importance matrix (tests/unit/test_ggml_rows_vs_ggml.c).
 *   Every quantizer is deterministic: the same input gives the same bytes on every CPU path.
 *   Other non-finite inputs give unspecified (but defined, crash-free) blocks.
 */
#ifndef TBX_GGML_H
#define TBX_GGML_H

#include "plain.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

/* Bit-exactness needs every multiply and add rounded on its own: no fused multiply-add. Every
 * file of this module includes this header first. (gcc contracts only outside ISO C mode.) */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__) && !defined(__STRICT_ANSI__)
#pragma GCC optimize("fp-contract=off")
#endif

typedef void (*tbx_quant_fn)(const float *src, void *dst, uint64_t nblocks);

/* The write option (GGUF's row, gguf_write.c) choosing the quantizer of a conversion to a ggml
 * block type: "ggml" (the default: ggml_quantize_chunk's bytes) or "search" (q2_K .. q6_K:
 * tensorbox's own search; its error and the reference's reported per tensor). Applied by the
 * conversion's plans (src/convert/plain.c, src/models/hf_gguf.c). */
#define TBX_GGML_OPT_METHOD    "quant_method"
#define TBX_GGML_METHOD_GGML   "ggml"
#define TBX_GGML_METHOD_SEARCH "search"

/* Instruction sets a kernel may use (bit mask). */
#define TBX_GGML_ISA_AVX2 0x1u    /* avx2 */
#define TBX_GGML_ISA_AVX512 0x2u  /* avx512f + avx512bw + avx512vl (+ f16c) */

/* The ISAs this CPU supports and this build has kernels for (none when built for another
 * architecture or with -DTBX_GGML_NO_SIMD). */
unsigned tbx_ggml_cpu_isa(void);

/* Best dequantizer for this CPU (SIMD when available for the type, else scalar); NULL if the
 * dtype is not a ggml block type. */
tbx_dequant_fn tbx_ggml_dequant_for(tbx_dtype dt);
/* The portable scalar dequantizer of a ggml block type, or NULL. */
tbx_dequant_fn tbx_ggml_dequant_scalar_for(tbx_dtype dt);
/* The AVX2 / AVX-512 kernel of a type, or NULL when there is none. They do NOT check the CPU:
 * call them only when tbx_ggml_cpu_isa() has the bit. */
tbx_dequant_fn tbx_ggml_dequant_avx2_for(tbx_dtype dt);
tbx_dequant_fn tbx_ggml_dequant_avx512_for(tbx_dtype dt);
/* The AVX2 kernels of ggml_simd_avx2_dq.c, for the types tbx_ggml_dequant_avx2_for has none of
 * (q8_1, q2_K, q3_K, iq2_xxs, iq2_xs, iq2_s, iq3_xxs, iq3_s, mxfp4, nvfp4, q1_0), or NULL. The two
 * lists are disjoint; dispatch.c asks ggml_simd_avx2.c first. */
tbx_dequant_fn tbx_ggml_dequant_avx2_dq_for(tbx_dtype dt);

/* Best quantizer for this CPU, or NULL when the type has none. */
tbx_quant_fn tbx_ggml_quant_for(tbx_dtype dt);
/* The portable scalar quantizer (same bytes as tbx_ggml_quant_for), or NULL. */
tbx_quant_fn tbx_ggml_quant_scalar_for(tbx_dtype dt);
/* AVX2 quantizer (same bytes as the scalar one), or NULL; does not check the CPU. */
tbx_quant_fn tbx_ggml_quant_avx2_for(tbx_dtype dt);
/* A SIMD quantizer that hands the blocks it does not encode itself (NaN, signed zeros) to
 * `fallback`, the scalar quantizer of the same type, one block at a time. SIMD files never look
 * up scalar kernels themselves: dispatch.c passes them in. */
typedef void (*tbx_quant_fb_fn)(const float *src, void *dst, uint64_t nblocks,
                                tbx_quant_fn fallback);
/* The AVX2 kernels of q8_0, q4_0, q4_1, q5_0, q5_1, mxfp4, tq1_0, tq2_0 (ggml_simd_avx2.c;
 * wrapped by tbx_ggml_quant_avx2_for), and of q1_0, q2_0 (wrapped by
 * tbx_ggml_quant_default_for, with tbx_gq_q1_0_blocks / tbx_gq_q2_0_blocks as their fallback),
 * or NULL for other types or builds without them. */
tbx_quant_fb_fn tbx_ggml_quant_legacy_avx2_for(tbx_dtype dt);
/* ggml's reference quantizer algorithm (quantize_row_*_ref, no importance matrix) for q2_K,
 * q3_K, q4_K, q5_K, q6_K, scalar (ggml_quant.c: the reference every SIMD variant is tested
 * against, and their fallback); for the other quantizable types the same as
 * tbx_ggml_quant_for. */
tbx_quant_fn tbx_ggml_quant_ref_for(tbx_dtype dt);
/* The AVX2 kernels of the same algorithm for q2_K .. q6_K (ggml_simd_avx2_kref.c: the
 * sub-blocks of a super-block as vector lanes, each lane the scalar's operations in the
 * scalar's order), the same bytes as tbx_ggml_quant_ref_for for every input: a super-block
 * holding a NaN or an infinity goes to `fallback` (dispatch.c passes the scalar reference). NULL
 * for other types or builds without them; does not check the CPU. */
tbx_quant_fb_fn tbx_ggml_quant_kref_avx2_for(tbx_dtype dt);
/* The quantizer a conversion uses by default: ggml_quantize_chunk's bytes for every type (q2_K
 * .. q6_K: the reference algorithm, its AVX2 kernels when the CPU has AVX2, else scalar; q1_0,
 * q2_0: ggml_lowbit.c's, AVX2 when the CPU has it; the others: tbx_ggml_quant_for, the same
 * bytes as ggml's), or NULL when the type has no block quantizer (see the row quantizers). */
tbx_quant_fn tbx_ggml_quant_default_for(tbx_dtype dt);
/* ggml's reference quantizers of q1_0 and q2_0 (ggml_lowbit.c), scalar. */
void tbx_gq_q1_0_blocks(const float *x, void *dst, uint64_t nb);
void tbx_gq_q2_0_blocks(const float *x, void *dst, uint64_t nb);
/* tensorbox's own K-quant search (q2_K .. q6_K: tbx_ggml_quant_for, SIMD when the CPU has it),
 * NULL for every other type (their only quantizer is ggml's algorithm). */
tbx_quant_fn tbx_ggml_quant_search_for(tbx_dtype dt);

/* ---- ggml_quantize_chunk's contract: whole rows, an optional importance matrix ------------
 * Some of ggml's quantizers are not block-local: with an importance matrix (llama-imatrix's
 * per-column weights) q4_0 .. q5_1 and q2_K .. q6_K weight each value by qw[column] and by a
 * statistic of its row, and the IQ types always do. A row quantizer encodes `nrows` rows of
 * `n_per_row` values each (a multiple of the block size) into nrows * n_per_row / block_size
 * blocks, with qw the importance of the n_per_row columns (NULL: no importance matrix), and
 * gives the bytes of ggml_quantize_chunk(type, src, dst, 0, nrows, n_per_row, qw) of
 * llama.cpp's libggml (ggml-quants.c, quantize_<type>). Types whose ggml quantizer ignores
 * the matrix (q8_0, tq1_0, tq2_0, mxfp4, nvfp4, q1_0, q2_0) ignore it here too. (ggml_rows.c:
 * the table.) */
typedef void (*tbx_quant_rows_fn)(const float *src, void *dst, int64_t nrows, int64_t n_per_row,
                                  const float *qw);
/* The row quantizer of a ggml block type, or NULL when this build has none. */
tbx_quant_rows_fn tbx_ggml_quant_rows_for(tbx_dtype dt);
/* The codebook types (ggml_iq_grid.c): iq2_xxs, iq2_xs, iq2_s, iq3_xxs, iq3_s, iq1_s, iq1_m,
 * the entries of tbx_ggml_quant_rows_for. Each 256-value block is weighted by its own mean
 * square (so without qw they are block-local) and, when qw is given, by column.
 * ggml_quantize_chunk refuses iq2_xxs, iq2_xs and iq1_s without an importance matrix (callers
 * refuse first: tbx_ggml_quant_requires_imatrix); given qw NULL these weight every column 1
 * (defined bytes, not ggml's). The lattice tables they search are built once on first use
 * (thread-safe, static storage, never freed). */
void tbx_iq_rows_iq2_xxs(const float *x, void *dst, int64_t nrows, int64_t n, const float *qw);
void tbx_iq_rows_iq2_xs(const float *x, void *dst, int64_t nrows, int64_t n, const float *qw);
void tbx_iq_rows_iq2_s(const float *x, void *dst, int64_t nrows, int64_t n, const float *qw);
void tbx_iq_rows_iq3_xxs(const float *x, void *dst, int64_t nrows, int64_t n, const float *qw);
void tbx_iq_rows_iq3_s(const float *x, void *dst, int64_t nrows, int64_t n, const float *qw);
void tbx_iq_rows_iq1_s(const float *x, void *dst, int64_t nrows, int64_t n, const float *qw);
void tbx_iq_rows_iq1_m(const float *x, void *dst, int64_t nrows, int64_t n, const float *qw);
/* 1 when ggml refuses to quantize the type without an importance matrix
 * (ggml_quantize_requires_imatrix: iq2_xxs, iq2_xs, iq1_s), else 0. */
bool tbx_ggml_quant_requires_imatrix(tbx_dtype dt);

/* Row quantizers with ggml's importance-matrix algorithms (ggml_quant_w.c): with qw, ggml's
 * quantize_row_<type>_impl (each value weighted by qw[column] * sqrt(sigma2 + x^2), sigma2 the
 * mean square of the row for q4_0 .. q5_1, twice that of the super-block for q3_K .. q5_K,
 * q6_K by qw alone); without, the block quantizer's bytes (tbx_ggml_quant_default_for). */
void tbx_gq_rows_q4_0(const float *x, void *dst, int64_t nrows, int64_t n, const float *qw);
void tbx_gq_rows_q4_1(const float *x, void *dst, int64_t nrows, int64_t n, const float *qw);
void tbx_gq_rows_q5_0(const float *x, void *dst, int64_t nrows, int64_t n, const float *qw);
void tbx_gq_rows_q5_1(const float *x, void *dst, int64_t nrows, int64_t n, const float *qw);
void tbx_gq_rows_q2_K(const float *x, void *dst, int64_t nrows, int64_t n, const float *qw);
void tbx_gq_rows_q3_K(const float *x, void *dst, int64_t nrows, int64_t n, const float *qw);
void tbx_gq_rows_q4_K(const float *x, void *dst, int64_t nrows, int64_t n, const float *qw);
void tbx_gq_rows_q5_K(const float *x, void *dst, int64_t nrows, int64_t n, const float *qw);
void tbx_gq_rows_q6_K(const float *x, void *dst, int64_t nrows, int64_t n, const float *qw);
/* The weighted symmetric fit of ggml_quant_w.c (make_qx_quants with weights: 19 trial scales,
 * levels -nmax..nmax-1) over 8 consecutive groups of n (16 or 32) values x + n*k with weights
 * w + n*k: scales[k] and L[n*k + i] = level + nmax (0 and all-zero levels for a group whose
 * max |x| is below 1e-15); false (nothing written) when the kernel hands the groups back
 * (non-finite x or w). The AVX2 kernel (ggml_simd_avx2.c) or NULL; ggml_quant_w.c's scalar fit
 * is the reference and runs when it is NULL or refuses. The weighted row quantizers of q4_0,
 * q5_0, q3_K and q6_K take it (tbx_gq_rows_*_with); dispatch.c defines tbx_gq_rows_q4_0 etc.
 * with the best one (the bytes do not depend on it). */
typedef bool (*tbx_wq_symm8_fn)(const float *x, const float *w, int n, int nmax, float *scales,
                                uint8_t *L);
tbx_wq_symm8_fn tbx_wq_symm8_avx2(void); /* does not check the CPU */
void tbx_gq_rows_q4_0_with(tbx_wq_symm8_fn symm8, const float *x, void *dst, int64_t nrows,
                           int64_t n, const float *qw);
void tbx_gq_rows_q5_0_with(tbx_wq_symm8_fn symm8, const float *x, void *dst, int64_t nrows,
                           int64_t n, const float *qw);
void tbx_gq_rows_q3_K_with(tbx_wq_symm8_fn symm8, const float *x, void *dst, int64_t nrows,
                           int64_t n, const float *qw);
void tbx_gq_rows_q6_K_with(tbx_wq_symm8_fn symm8, const float *x, void *dst, int64_t nrows,
                           int64_t n, const float *qw);
/* The weighted affine fit of ggml_quant_w.c (fit_affine: ggml's make_qkx3-like search, 37 trial
 * inverse scales, weighted least squares, levels 0..nmax) over 8 consecutive groups of n (16 or
 * 32) values x + n*k with weights w + n*k: scales[k], mins[k] (the offset, y = scale*l - min) and
 * L[n*k + i]; false (nothing written) when the kernel hands the groups back (non-finite x or w).
 * The AVX2 kernel (ggml_simd_avx2.c) or NULL; ggml_quant_w.c's scalar fit is the reference and
 * runs when it is NULL or refuses. The weighted row quantizers of q4_1, q5_1, q2_K, q4_K and
 * q5_K take it (tbx_gq_rows_*_with); dispatch.c defines tbx_gq_rows_q4_1 etc. with the best one
 * (the bytes do not depend on it). */
typedef bool (*tbx_wq_aff8_fn)(const float *x, const float *w, int n, int nmax, float *scales,
                               float *mins, uint8_t *L);
tbx_wq_aff8_fn tbx_wq_aff8_avx2(void); /* does not check the CPU */
void tbx_gq_rows_q4_1_with(tbx_wq_aff8_fn aff8, const float *x, void *dst, int64_t nrows,
                           int64_t n, const float *qw);
void tbx_gq_rows_q5_1_with(tbx_wq_aff8_fn aff8, const float *x, void *dst, int64_t nrows,
                           int64_t n, const float *qw);
void tbx_gq_rows_q2_K_with(tbx_wq_aff8_fn aff8, const float *x, void *dst, int64_t nrows,
                           int64_t n, const float *qw);
void tbx_gq_rows_q4_K_with(tbx_wq_aff8_fn aff8, const float *x, void *dst, int64_t nrows,
                           int64_t n, const float *qw);
void tbx_gq_rows_q5_K_with(tbx_wq_aff8_fn aff8, const float *x, void *dst, int64_t nrows,
                           int64_t n, const float *qw);
/* Row quantizers of iq4_nl and iq4_xs (ggml_iq4.c: ggml's quantize_iq4_nl / quantize_iq4_xs,
 * weighted by qw[column] * sqrt(sigma2 + x^2) with an importance matrix, by x^2 without) and of
 * nvfp4, q1_0, q2_0 (ggml_lowbit.c: ggml's reference quantizers; qw unused, as in ggml). */
void tbx_gq_rows_iq4_nl(const float *x, void *dst, int64_t nrows, int64_t n, const float *qw);
void tbx_gq_rows_iq4_xs(const float *x, void *dst, int64_t nrows, int64_t n, const float *qw);
/* The kernels of the iq4 quantizers, over 8 consecutive groups of 32 values (an iq4_xs
 * super-block, or 8 iq4_nl blocks): scales8 gives ggml's searched scale of each group for the
 * weights w (false: the kernel hands the groups back, non-finite x or w; nothing written);
 * indices8 gives L[32k + j], the index of the iq4 level nearest to id[k] * x[32k + j]. The
 * scalar ones (ggml_iq4.c) are the reference; the AVX2 ones (ggml_simd_avx2.c) give the same
 * results. tbx_gq_rows_iq4_*_with run the row quantizers on given kernels (dispatch.c passes the
 * best; the bytes do not depend on them). */
typedef struct tbx_iq4_ops {
    bool (*scales8)(const float *x, const float *w, float *scales);
    void (*indices8)(const float *x, const float *id, uint8_t *L);
} tbx_iq4_ops;
const tbx_iq4_ops *tbx_iq4_ops_scalar(void);
const tbx_iq4_ops *tbx_iq4_ops_avx2(void); /* NULL without them; does not check the CPU */
void tbx_gq_rows_iq4_nl_with(const tbx_iq4_ops *ops, const float *x, void *dst, int64_t nrows,
                             int64_t n, const float *qw);
void tbx_gq_rows_iq4_xs_with(const tbx_iq4_ops *ops, const float *x, void *dst, int64_t nrows,
                             int64_t n, const float *qw);
void tbx_gq_rows_nvfp4(const float *x, void *dst, int64_t nrows, int64_t n, const float *qw);
void tbx_gq_rows_q1_0(const float *x, void *dst, int64_t nrows, int64_t n, const float *qw);
void tbx_gq_rows_q2_0(const float *x, void *dst, int64_t nrows, int64_t n, const float *qw);

/* ---- helpers shared by the quantizer files (internal to this module) ---------------------- */
/* Round to nearest (ties to even) through the float adder, as ggml's nearest_int (which asserts
 * |f| <= 4194303 in debug builds only). Beyond that, and for Inf/NaN, the result is the low
 * mantissa bits of the sum, as in a release build of ggml: defined behaviour (IEEE addition, a
 * bit copy, an int subtraction that cannot overflow), and callers clamp it. Not clamping the
 * argument keeps the blocks of values beyond a type's range identical to ggml's. */
static inline int tbx_gq_nearest(float f) {
    const float v = f + 12582912.0f;
    int32_t i;
    memcpy(&i, &v, 4);
    return (i & 0x007fffff) - 0x00400000;
}
/* The index of the E2M1 value (kvalues_mxfp4: twice the FP4 values, signed) nearest to x / e,
 * the first on ties: mxfp4 and nvfp4. */
static inline int tbx_gq_best_mxfp4(float x, float e) {
    static const int8_t kv[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
    int best = 0;
    float best_err = fabsf((float)kv[0] * e - x);
    for (int i = 1; i < 16; i++) {
        const float err = fabsf((float)kv[i] * e - x);
        if (err < best_err) {
            best = i;
            best_err = err;
        }
    }
    return best;
}
/* 32 levels 0..31 to q5_0/q5_1's high-bit word (qh_dst, little-endian) and 16 nibble bytes. */
static inline void tbx_gq_pack_q5(uint8_t *qh_dst, uint8_t *qs, const int *q) {
    uint32_t qh = 0;
    for (int j = 0; j < 16; j++) {
        qs[j] = (uint8_t)((q[j] & 15) | ((q[j + 16] & 15) << 4));
        qh |= (uint32_t)((q[j] >> 4) & 1) << j;
        qh |= (uint32_t)((q[j + 16] >> 4) & 1) << (j + 16);
    }
    tbx_st32(qh_dst, qh);
}
/* K-quant block packing (tbx_gq_pack_*: static inline, shared by the scalar and SIMD files). */
#include "kpack.h"

/* ---- lane kernels of the K-quant encoder (internal to this module) -------------------------
 * Eight sub-blocks are processed side by side: xt[8*i + j] is value i of sub-block j ("lane"
 * j), n values per sub-block. Each lane accumulates its sums in increasing i, so the scalar
 * kernels (ggml_quant.c) and the AVX2 ones (ggml_simd_avx2.c) give bit-identical results. */
/* Parameters of one requantization round of 8 lanes (one group of 8 sub-blocks). */
typedef struct tbx_kq_round {
    float d, dm;        /* super-block scale and min scale (f16 values); dm unused (symmetric) */
    float id, idm;      /* recip0(d), recip0(dm) */
    float nmax, smax;   /* top level; top quantized sub-scale */
    const float *ts;    /* [8] continuous sub-block scales */
    const float *tm;    /* [8] continuous sub-block mins (affine) */
    const float *sx;    /* [8] sum of x per lane (affine) */
} tbx_kq_round;

typedef struct tbx_kq_ops {
    /* xt[8*i + j] = x[j*n + i] for j < 8, i < n */
    void (*transpose)(const float *x, int n, float *xt);
    /* The inverse for levels, plus a constant (mod 256): L[k*n + i] = Lt[8n(k/8) + 8i + k%8] + add
     * for the 8*ngroups sub-blocks k. */
    void (*untranspose)(const uint8_t *Lt, int n, int ngroups, uint8_t add, uint8_t *L);
    /* Affine fit y = s*l + b (b <= 0), levels 0..nmax: for each candidate
     * iscale = (nmax + delta[k]) / (max - min(0, min)), least-squares (s, b) for the rounded
     * levels; keeps the candidate of smallest squared error (s = 0, b = min for flat lanes);
     * then `nlloyd` rounds of: levels round((x - b)/s), least-squares refit, kept if better.
     * sx gets each lane's sum of x. */
    void (*search_affine)(const float *xt, int n, float nmax, const float *delta, int nd,
                          int nlloyd, float *s, float *b, float *sx);
    /* Symmetric fit y = s*l, levels -nmax..nmax-1: candidates iscale = -(nmax + delta[k]) / v
     * with v the first value of largest magnitude; keeps the largest sxl^2/sl2. */
    void (*search_symm)(const float *xt, int n, float nmax, const float *delta, int nd, float *s);
    /* One round with quantized scales. Affine: a = clamp(round(ts*id), 0, smax),
     * q = clamp(round(tm*idm), 0, smax), levels l = clamp(round((x + dm*q) / (d*a)), 0, nmax);
     * out per lane a, q, the squared error of the decoded values, sum l, sum l^2, sum x*l and
     * the least-squares sub-block scale/min for these levels (ts2, tm2). Symmetric:
     * a = clamp(round(ts*id), -smax, smax-1), l = clamp(round(x / (d*a)), -nmax, nmax-1). The levels
     * themselves are not stored (local_* writes the final ones). */
    void (*requant_affine)(const float *xt, int n, const tbx_kq_round *r, float *a, float *q,
                           float *err, float *sl, float *sl2, float *sxl, float *ts2, float *tm2);
    void (*requant_symm)(const float *xt, int n, const tbx_kq_round *r, float *a, float *err,
                         float *sl2, float *sxl, float *ts2);
    /* Local search: each lane's (a, q) moved to (a-1, q), (a+1, q), (a, q-1), (a, q+1) (clamped)
     * or kept, whichever decodes with the smallest squared error (e0: the error of the kept
     * (a, q), as requant computed it); a/q updated in place, Lt gets the levels. Symmetric:
     * a-1, a, a+1. */
    void (*local_affine)(const float *xt, int n, float nmax, float smax, float d, float dm,
                         const float *e0, float *a, float *q, uint8_t *Lt);
    void (*local_symm)(const float *xt, int n, float nmax, float smax, float d, const float *e0,
                       float *a, int8_t *Lt);
} tbx_kq_ops;

/* The AVX2 lane kernels, or NULL when this build has none (does not check the CPU). */
const tbx_kq_ops *tbx_kq_ops_avx2(void);
/* The scalar lane kernels (ggml_quant.c). */
const tbx_kq_ops *tbx_kq_ops_scalar(void);
/* The K-quant encoder (q2_K..q6_K; other types: no-op) running on the given lane kernels; the
 * bytes do not depend on `ops`. */
void tbx_kq_quantize(tbx_dtype dt, const tbx_kq_ops *ops, const float *x, void *dst,
                     uint64_t nblocks);

#endif /* TBX_GGML_H */
