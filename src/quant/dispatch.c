/*
 * dispatch.c - run-time choice of the ggml kernels, the one place that reads cpuid.
 *
 * The scalar kernels (ggml_dequant.c, ggml_quant.c) are the reference and never dispatch; the
 * SIMD kernels (ggml_simd_avx2.c, ggml_simd_avx2_dq.c, ggml_simd_avx512.c) are compiled with
 * function-level target attributes and never call back into the scalar files. This file sits above both: it asks the
 * CPU once what it has and hands out the best kernel of each type, wrapping the SIMD
 * quantizers with their scalar fallback (the AVX2 kernels of ggml's reference K-quant algorithm
 * with the scalar reference) and the K-quant encoder with the AVX2 lane kernels.
 * It also picks the SIMD row decoder of MCF's q / k payloads (mcf_simd_avx2.c) and of f16
 * (decode_simd_avx2.c).
 */
#include "ggml.h"
#include "mcfq.h"
#include "plain.h"

#include <stddef.h>
#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__)) && \
    !defined(TBX_GGML_NO_SIMD)
#include <cpuid.h>
#endif

unsigned tbx_ggml_cpu_isa(void) {
    /* asked once (cpuid traps to the hypervisor in a VM): bit 31 marks the cached answer, the
     * same for every thread (a benign race) */
    static unsigned cached;
    const unsigned c0 = __atomic_load_n(&cached, __ATOMIC_RELAXED);
    if (c0) return c0 & ~0x80000000u;
    unsigned isa = 0;
#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__)) && \
    !defined(TBX_GGML_NO_SIMD)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2")) isa |= TBX_GGML_ISA_AVX2;
    /* F16C (CPUID.1:ECX bit 29) for the scale conversions of the AVX-512 kernels: every CPU
     * with AVX-512 has it, asked all the same (__builtin_cpu_supports does not know it). */
    unsigned a = 0, b = 0, c = 0, d = 0;
    const int f16c = __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29));
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && f16c)
        isa |= TBX_GGML_ISA_AVX512;
#endif
    __atomic_store_n(&cached, isa | 0x80000000u, __ATOMIC_RELAXED);
    return isa;
}

/* ---- f16 rows ----------------------------------------------------------------------------- */
tbx_f16_row_fn tbx_f16_row_for(void) {
    static tbx_f16_row_fn cached; /* the same answer for every thread: a benign race */
    tbx_f16_row_fn f = __atomic_load_n(&cached, __ATOMIC_RELAXED);
    if (f) return f;
#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__)) && \
    !defined(TBX_GGML_NO_SIMD)
    f = (tbx_ggml_cpu_isa() & TBX_GGML_ISA_AVX2) ? tbx_f16_row_avx2 : tbx_f16_row_scalar;
#else
    f = tbx_f16_row_scalar;
#endif
    __atomic_store_n(&cached, f, __ATOMIC_RELAXED);
    return f;
}

/* ---- dequantizers ------------------------------------------------------------------------- */
tbx_dequant_fn tbx_ggml_dequant_for(tbx_dtype dt) {
    const unsigned isa = tbx_ggml_cpu_isa();
    tbx_dequant_fn f = NULL;
    if (isa & TBX_GGML_ISA_AVX512) f = tbx_ggml_dequant_avx512_for(dt);
    if (!f && (isa & TBX_GGML_ISA_AVX2)) f = tbx_ggml_dequant_avx2_for(dt);
    if (!f && (isa & TBX_GGML_ISA_AVX2)) f = tbx_ggml_dequant_avx2_dq_for(dt);
    return f ? f : tbx_ggml_dequant_scalar_for(dt);
}

/* The block dequantizer of any block dtype (today: the ggml types). */
tbx_dequant_fn tbx_dequant_for(tbx_dtype dt) { return tbx_ggml_dequant_for(dt); }

/* ---- quantizers --------------------------------------------------------------------------- */
/* The legacy AVX2 quantizers with their scalar fallback bound in. */
#define LEGACY_AVX2(name, DT)                                                                      \
    static void name(const float *x, void *d, uint64_t nb) {                                      \
        tbx_ggml_quant_legacy_avx2_for(DT)(x, d, nb, tbx_ggml_quant_scalar_for(DT));               \
    }
LEGACY_AVX2(qd_q8_0_avx2, TBX_DT_Q8_0)
LEGACY_AVX2(qd_q4_0_avx2, TBX_DT_Q4_0)
LEGACY_AVX2(qd_q4_1_avx2, TBX_DT_Q4_1)
LEGACY_AVX2(qd_q5_0_avx2, TBX_DT_Q5_0)
LEGACY_AVX2(qd_q5_1_avx2, TBX_DT_Q5_1)
LEGACY_AVX2(qd_mxfp4_avx2, TBX_DT_MXFP4)
LEGACY_AVX2(qd_tq1_0_avx2, TBX_DT_TQ1_0)
LEGACY_AVX2(qd_tq2_0_avx2, TBX_DT_TQ2_0)
/* q1_0 and q2_0 fall back on ggml_lowbit.c's scalar quantizers */
static void qd_q1_0_avx2(const float *x, void *d, uint64_t nb) {
    tbx_ggml_quant_legacy_avx2_for(TBX_DT_Q1_0)(x, d, nb, tbx_gq_q1_0_blocks);
}
static void qd_q2_0_avx2(const float *x, void *d, uint64_t nb) {
    tbx_ggml_quant_legacy_avx2_for(TBX_DT_Q2_0)(x, d, nb, tbx_gq_q2_0_blocks);
}

/* The K-quant encoder on the AVX2 lane kernels. */
#define KQ_AVX2(name, DT)                                                                          \
    static void name(const float *x, void *d, uint64_t nb) {                                      \
        tbx_kq_quantize(DT, tbx_kq_ops_avx2(), x, d, nb);                                          \
    }
KQ_AVX2(qd_q2_K_avx2, TBX_DT_Q2_K)
KQ_AVX2(qd_q3_K_avx2, TBX_DT_Q3_K)
KQ_AVX2(qd_q4_K_avx2, TBX_DT_Q4_K)
KQ_AVX2(qd_q5_K_avx2, TBX_DT_Q5_K)
KQ_AVX2(qd_q6_K_avx2, TBX_DT_Q6_K)

tbx_quant_fn tbx_ggml_quant_avx2_for(tbx_dtype dt) {
    if (tbx_ggml_quant_legacy_avx2_for(dt)) {
        switch (dt) {
        case TBX_DT_Q8_0: return qd_q8_0_avx2;
        case TBX_DT_Q4_0: return qd_q4_0_avx2;
        case TBX_DT_Q4_1: return qd_q4_1_avx2;
        case TBX_DT_Q5_0: return qd_q5_0_avx2;
        case TBX_DT_Q5_1: return qd_q5_1_avx2;
        case TBX_DT_MXFP4: return qd_mxfp4_avx2;
        case TBX_DT_TQ1_0: return qd_tq1_0_avx2;
        case TBX_DT_TQ2_0: return qd_tq2_0_avx2;
        default: return NULL;
        }
    }
    if (!tbx_kq_ops_avx2()) return NULL;
    switch (dt) {
    case TBX_DT_Q2_K: return qd_q2_K_avx2;
    case TBX_DT_Q3_K: return qd_q3_K_avx2;
    case TBX_DT_Q4_K: return qd_q4_K_avx2;
    case TBX_DT_Q5_K: return qd_q5_K_avx2;
    case TBX_DT_Q6_K: return qd_q6_K_avx2;
    default: return NULL;
    }
}

tbx_quant_fn tbx_ggml_quant_for(tbx_dtype dt) {
    tbx_quant_fn f = NULL;
    if (tbx_ggml_cpu_isa() & TBX_GGML_ISA_AVX2) f = tbx_ggml_quant_avx2_for(dt);
    return f ? f : tbx_ggml_quant_scalar_for(dt);
}

static bool k_type(tbx_dtype dt) {
    return dt == TBX_DT_Q2_K || dt == TBX_DT_Q3_K || dt == TBX_DT_Q4_K || dt == TBX_DT_Q5_K ||
           dt == TBX_DT_Q6_K;
}

/* The AVX2 kernels of ggml's reference K-quant algorithm with the scalar reference bound in as
 * their fallback (super-blocks holding NaN or Inf). */
#define KREF_AVX2(name, DT)                                                                        \
    static void name(const float *x, void *d, uint64_t nb) {                                      \
        tbx_ggml_quant_kref_avx2_for(DT)(x, d, nb, tbx_ggml_quant_ref_for(DT));                    \
    }
KREF_AVX2(qr_q2_K_avx2, TBX_DT_Q2_K)
KREF_AVX2(qr_q3_K_avx2, TBX_DT_Q3_K)
KREF_AVX2(qr_q4_K_avx2, TBX_DT_Q4_K)
KREF_AVX2(qr_q5_K_avx2, TBX_DT_Q5_K)
KREF_AVX2(qr_q6_K_avx2, TBX_DT_Q6_K)

static tbx_quant_fn kref_avx2(tbx_dtype dt) {
    if (!(tbx_ggml_cpu_isa() & TBX_GGML_ISA_AVX2) || !tbx_ggml_quant_kref_avx2_for(dt)) return NULL;
    switch (dt) {
    case TBX_DT_Q2_K: return qr_q2_K_avx2;
    case TBX_DT_Q3_K: return qr_q3_K_avx2;
    case TBX_DT_Q4_K: return qr_q4_K_avx2;
    case TBX_DT_Q5_K: return qr_q5_K_avx2;
    case TBX_DT_Q6_K: return qr_q6_K_avx2;
    default: return NULL;
    }
}

tbx_quant_fn tbx_ggml_quant_default_for(tbx_dtype dt) {
    const int avx2 = (tbx_ggml_cpu_isa() & TBX_GGML_ISA_AVX2) && tbx_ggml_quant_legacy_avx2_for(dt);
    if (dt == TBX_DT_Q1_0) return avx2 ? qd_q1_0_avx2 : tbx_gq_q1_0_blocks;
    if (dt == TBX_DT_Q2_0) return avx2 ? qd_q2_0_avx2 : tbx_gq_q2_0_blocks;
    if (!k_type(dt)) return tbx_ggml_quant_for(dt);
    const tbx_quant_fn f = kref_avx2(dt);
    return f ? f : tbx_ggml_quant_ref_for(dt);
}

tbx_quant_fn tbx_ggml_quant_search_for(tbx_dtype dt) {
    return k_type(dt) ? tbx_ggml_quant_for(dt) : NULL;
}

/* ---- iq4_nl / iq4_xs row quantizers on the best kernels ----------------------------------- */
static const tbx_iq4_ops *iq4_ops(void) {
    const tbx_iq4_ops *o = (tbx_ggml_cpu_isa() & TBX_GGML_ISA_AVX2) ? tbx_iq4_ops_avx2() : NULL;
    return o ? o : tbx_iq4_ops_scalar();
}
void tbx_gq_rows_iq4_nl(const float *x, void *dst, int64_t nrows, int64_t n, const float *qw) {
    tbx_gq_rows_iq4_nl_with(iq4_ops(), x, dst, nrows, n, qw);
}
void tbx_gq_rows_iq4_xs(const float *x, void *dst, int64_t nrows, int64_t n, const float *qw) {
    tbx_gq_rows_iq4_xs_with(iq4_ops(), x, dst, nrows, n, qw);
}

/* ---- weighted q4_0 / q5_0 / q3_K / q6_K rows on the best symmetric-fit kernel ------------- */
static tbx_wq_symm8_fn wq_symm8(void) {
    return (tbx_ggml_cpu_isa() & TBX_GGML_ISA_AVX2) ? tbx_wq_symm8_avx2() : NULL;
}
#define WQ_ROWS(name)                                                                               \
    void name(const float *x, void *dst, int64_t nrows, int64_t n, const float *qw) {            \
        name##_with(wq_symm8(), x, dst, nrows, n, qw);                                             \
    }
WQ_ROWS(tbx_gq_rows_q4_0)
WQ_ROWS(tbx_gq_rows_q5_0)
WQ_ROWS(tbx_gq_rows_q3_K)
WQ_ROWS(tbx_gq_rows_q6_K)

/* ---- weighted q4_1 / q5_1 / q2_K / q4_K / q5_K rows on the best affine-fit kernel --------- */
static tbx_wq_aff8_fn wq_aff8(void) {
    return (tbx_ggml_cpu_isa() & TBX_GGML_ISA_AVX2) ? tbx_wq_aff8_avx2() : NULL;
}
#define WQ_AFF_ROWS(name)                                                                           \
    void name(const float *x, void *dst, int64_t nrows, int64_t n, const float *qw) {            \
        name##_with(wq_aff8(), x, dst, nrows, n, qw);                                              \
    }
WQ_AFF_ROWS(tbx_gq_rows_q4_1)
WQ_AFF_ROWS(tbx_gq_rows_q5_1)
WQ_AFF_ROWS(tbx_gq_rows_q2_K)
WQ_AFF_ROWS(tbx_gq_rows_q4_K)
WQ_AFF_ROWS(tbx_gq_rows_q5_K)

/* ---- MCF q / k row decoders (mcfq.h) ------------------------------------------------------- */
tbx_mcfq_rows_fn tbx_mcfq_dequant_simd_for(tbx_mcfq_kind kind) {
    if (tbx_ggml_cpu_isa() & TBX_GGML_ISA_AVX2) return tbx_mcfq_dequant_avx2_for(kind);
    return NULL;
}

/* The decoder of mcfq.h: the SIMD variant when the CPU has one, else the scalar reference. */
void tbx_mcfq_dequant_rows(const tbx_mcfq_layout *L, const uint8_t *scales, const uint8_t *sub,
                           const uint8_t *codes, uint64_t n, float *out) {
    tbx_mcfq_rows_fn f = tbx_mcfq_dequant_simd_for(L->kind);
    (f ? f : tbx_mcfq_dequant_rows_ref)(L, scales, sub, codes, n, out);
}
