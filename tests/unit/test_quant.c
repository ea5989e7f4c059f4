/*
 * test_quant.c - the common quantization description and its kernels:
 *   - the split-layout dequantizer (src/quant/split.h) against an independent reference (bit
 *     extraction from a byte stream and parameter indices by division, written from the
 *     documented rules, not from the kernel);
 *   - tbx_tensor_quant_get on GGUF block types (against the dtype table) and its argument
 *     checks;
 *   - tbx_tensor_read_f32 routing a dense tensor of a driver-specific dtype to the driver that
 *     claims it (read_f32 hook), and refusing it when the driver has none.
 * OINF and zTensor descriptions are checked in test_oinf.c / test_ztensor.c, and against files
 * written by the peers in tests/python/test_quant_info.py.
 */
#include "tbx_test.h"
#include "api.h"
#include "split.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint64_t rnd(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

/* Bit b of a little-endian byte stream. */
static unsigned bit_at(const uint8_t *p, uint64_t b) { return (p[b / 8] >> (b % 8)) & 1u; }

/* Reference: element e of a split layout, from first principles. */
static float ref_value(const tbx_split_geom *g, const uint8_t *words, const float *scales,
                       const float *zeros, const uint64_t *shape, uint32_t ndim, uint32_t axis,
                       uint64_t e) {
    uint64_t word = e / g->per_word, slot = e % g->per_word;
    uint64_t start = word * 8u * g->word_bytes + slot * g->bits;
    uint64_t u = 0;
    for (uint32_t k = 0; k < g->bits; k++) u |= (uint64_t)bit_at(words, start + k) << k;
    double code = (double)u;
    if (g->code_signed && g->bits < 64 && (u >> (g->bits - 1)) & 1u)
        code = (double)u - ldexp(1.0, (int)g->bits);
    uint64_t cols = ndim ? shape[ndim - 1] : 1;
    uint64_t inner = 1;
    for (uint32_t d = axis + 1; d < ndim; d++) inner *= shape[d];
    uint64_t idx[2];
    tbx_quant_scope sc[2] = {g->scale_scope, g->zero_scope};
    for (int k = 0; k < 2; k++) {
        switch (sc[k]) {
        case TBX_QSCOPE_GROUP: {
            uint64_t row = e / cols, col = e % cols, gpr = (cols + g->group - 1) / g->group;
            idx[k] = row * gpr + col / g->group;
            break;
        }
        case TBX_QSCOPE_CHANNEL: idx[k] = (e / inner) % shape[axis]; break;
        default: idx[k] = 0; break;
        }
    }
    float z = g->zero_scope == TBX_QSCOPE_NONE ? 0.0f : zeros[idx[1]];
    return ((float)code - z) * scales[idx[0]];
}

TBX_TEST(split_kernel_matches_reference) {
    static const tbx_dtype words_dt[4] = {TBX_DT_U8, TBX_DT_U16, TBX_DT_U32, TBX_DT_U64};
    static const uint32_t wbytes[4] = {1, 2, 4, 8};
    uint64_t bad = 0, checked = 0;
    for (int trial = 0; trial < 400; trial++) {
        int wi = (int)(rnd() % 4);
        uint32_t wbits = 8 * wbytes[wi];
        uint32_t bits = 1 + (uint32_t)(rnd() % (wbits < 16 ? wbits : 16));
        uint32_t per = 1 + (uint32_t)(rnd() % (wbits / bits)); /* possibly unused high slots */
        uint64_t shape[3];
        uint32_t ndim = 1 + (uint32_t)(rnd() % 3);
        uint64_t n = 1;
        for (uint32_t d = 0; d < ndim; d++) { shape[d] = 1 + rnd() % 9; n *= shape[d]; }
        uint32_t axis = (uint32_t)(rnd() % ndim);
        tbx_quant_info q;
        memset(&q, 0, sizeof q);
        q.method = TBX_QUANT_LINEAR;
        q.code_dtype = words_dt[wi];
        q.bits = bits;
        q.code_signed = (uint32_t)(rnd() % 2);
        q.block_size = 1 + rnd() % 5;
        static const tbx_quant_scope scopes[3] = {TBX_QSCOPE_TENSOR, TBX_QSCOPE_CHANNEL,
                                                  TBX_QSCOPE_GROUP};
        q.scale.scope = scopes[rnd() % 3];
        q.zero.scope = rnd() % 4 == 0 ? TBX_QSCOPE_NONE : scopes[rnd() % 3];
        q.scale.axis = q.zero.axis = axis;
        tbx_split_geom g;
        CHECK_OK(tbx_split_geom_init(&g, &q, shape, ndim, per));
        uint64_t nwords = (n + per - 1) / per;
        uint8_t *words = malloc(nwords * wbytes[wi]);
        for (uint64_t k = 0; k < nwords * wbytes[wi]; k++) words[k] = (uint8_t)rnd();
        uint64_t nparam = n + 1; /* enough for any scope */
        float *scales = malloc(nparam * sizeof *scales), *zeros = malloc(nparam * sizeof *zeros);
        for (uint64_t k = 0; k < nparam; k++) {
            scales[k] = (float)(rnd() % 1000) / 64.0f - 7.0f;
            zeros[k] = (float)(rnd() % 33) - 16.0f;
        }
        float *out = malloc(n * sizeof *out);
        uint64_t first = rnd() % n, count = 1 + rnd() % (n - first);
        /* the kernel takes the words from first's word on and, for GROUP, the slice of
         * parameters from first's group on */
        const uint8_t *wslice = words + (first / per) * wbytes[wi];
        uint64_t s0 = g.scale_scope == TBX_QSCOPE_GROUP
                          ? tbx_split_param_index(&g, TBX_QSCOPE_GROUP, first) : 0;
        uint64_t z0 = g.zero_scope == TBX_QSCOPE_GROUP
                          ? tbx_split_param_index(&g, TBX_QSCOPE_GROUP, first) : 0;
        tbx_dequant_split_fn fn = tbx_dequant_split_for(&g);
        CHECK(fn != NULL);
        fn(&g, wslice, scales + s0, zeros + z0, first, count, out);
        for (uint64_t k = 0; k < count; k++) {
            float want = ref_value(&g, words, scales, zeros, shape, ndim, axis, first + k);
            checked++;
            if (memcmp(&want, &out[k], 4) != 0) {
                if (bad++ < 5)
                    fprintf(stderr, "trial %d: element %llu: %g, want %g (bits %u per %u)\n",
                            trial, (unsigned long long)(first + k), out[k], want, bits, per);
            }
        }
        free(words);
        free(scales);
        free(zeros);
        free(out);
    }
    CHECK_EQ(bad, 0);
    CHECK(checked > 1000);
}

TBX_TEST(split_geometry_refusals) {
    tbx_quant_info q;
    memset(&q, 0, sizeof q);
    uint64_t shape[2] = {4, 8};
    tbx_split_geom g;
    q.method = TBX_QUANT_GGML;
    q.code_dtype = TBX_DT_U8;
    q.bits = 4;
    q.scale.scope = TBX_QSCOPE_TENSOR;
    CHECK_EQ(tbx_split_geom_init(&g, &q, shape, 2, 2), TBX_E_UNSUPPORTED); /* not linear */
    q.method = TBX_QUANT_LINEAR;
    CHECK_OK(tbx_split_geom_init(&g, &q, shape, 2, 2));
    CHECK_EQ(tbx_split_geom_init(&g, &q, shape, 2, 3), TBX_E_UNSUPPORTED); /* 12 bits > 8 */
    q.code_dtype = TBX_DT_F32;
    CHECK_EQ(tbx_split_geom_init(&g, &q, shape, 2, 1), TBX_E_UNSUPPORTED); /* float words */
    q.code_dtype = TBX_DT_U8;
    q.scale.scope = TBX_QSCOPE_BLOCK;
    CHECK_EQ(tbx_split_geom_init(&g, &q, shape, 2, 1), TBX_E_UNSUPPORTED);
    q.scale.scope = TBX_QSCOPE_CHANNEL;
    q.scale.axis = 2;
    CHECK_EQ(tbx_split_geom_init(&g, &q, shape, 2, 1), TBX_E_UNSUPPORTED); /* axis >= ndim */
    q.scale.scope = TBX_QSCOPE_GROUP;
    q.block_size = 0;
    CHECK_EQ(tbx_split_geom_init(&g, &q, shape, 2, 1), TBX_E_UNSUPPORTED); /* no group size */
}

static char *temp_path(const char *ext) {
    static int counter;
    char *path = malloc(600);
    tbx_test_tmppath(path, 600, "tbx_test_quant_%d_%d%s", (int)getpid(), counter++, ext);
    unlink(path);
    return path;
}

/* A GGUF file with tensors of the given dtypes (shape [2, 256], zero bytes). */
static char *write_gguf(const tbx_dtype *dts, int n) {
    char *path = temp_path(".gguf");
    tbx_write_options wo;
    tbx_write_options_init(&wo);
    wo.format = TBX_FORMAT_GGUF;
    tbx_writer *w = NULL;
    tbx_error e;
    if (tbx_writer_open(&w, path, &wo, &e) != TBX_OK) { free(path); return NULL; }
    uint64_t shape[2] = {2, 256};
    for (int k = 0; k < n; k++) {
        char name[32];
        snprintf(name, sizeof name, "t%d", k);
        tbx_tensor_desc d = TBX_TENSOR_DESC_INIT;
        d.name = name;
        d.dtype = dts[k];
        d.ndim = 2;
        d.shape = shape;
        d.has_data = 1;
        uint64_t idx, nb = 0;
        if (tbx_writer_add_tensor(w, &d, &idx, &e) != TBX_OK ||
            tbx_dtype_nbytes_shape(dts[k], shape, 2, &nb) != TBX_OK) {
            tbx_writer_abort(w);
            free(path);
            return NULL;
        }
    }
    for (int k = 0; k < n; k++) {
        uint64_t nb = 0;
        tbx_dtype_nbytes_shape(dts[k], shape, 2, &nb);
        void *z = calloc(1, nb);
        tbx_status st = tbx_writer_write_tensor(w, (uint64_t)k, z, nb, &e);
        free(z);
        if (st != TBX_OK) { tbx_writer_abort(w); free(path); return NULL; }
    }
    if (tbx_writer_finish(w, &e) != TBX_OK) { free(path); return NULL; }
    return path;
}

TBX_TEST(gguf_block_types_are_described) {
    const tbx_dtype dts[] = {TBX_DT_F32, TBX_DT_Q4_0, TBX_DT_Q4_1, TBX_DT_Q8_0, TBX_DT_Q4_K,
                             TBX_DT_Q6_K, TBX_DT_Q8_K, TBX_DT_IQ4_XS, TBX_DT_MXFP4, TBX_DT_Q4_K};
    const int n = (int)(sizeof dts / sizeof dts[0]);
    char *path = write_gguf(dts, n);
    CHECK(path != NULL);
    if (!path) return;
    tbx_file *f = NULL;
    tbx_error e;
    CHECK_OK(tbx_open_path(&f, path, NULL, &e));
    if (f) {
        tbx_quant_info q;
        q.struct_size = sizeof q;
        CHECK_EQ(tbx_tensor_quant_get(f, 0, &q), TBX_E_NOT_FOUND); /* f32 */
        for (int k = 1; k < n; k++) {
            memset(&q, 0xA5, sizeof q);
            q.struct_size = sizeof q;
            CHECK_OK(tbx_tensor_quant_get(f, (uint64_t)k, &q));
            const tbx_dtype_info *di = tbx_dtype_get(dts[k]);
            CHECK_EQ(q.struct_size, sizeof q);
            CHECK_EQ(q.method, TBX_QUANT_GGML);
            CHECK_EQ(q.code_dtype, dts[k]);
            CHECK(q.bits >= 1 && q.bits <= 8);
            /* the self-contained block of the dtype table is the super-block, or the block */
            CHECK_EQ(q.super_block_size ? q.super_block_size : q.block_size, di->block_size);
            CHECK(q.block_size >= 1 && di->block_size % q.block_size == 0);
            CHECK_EQ(q.scale.scope, TBX_QSCOPE_BLOCK);
            CHECK_EQ(q.scale.count, 0);
            CHECK_EQ(q.scale.component, -1);
            CHECK(q.scale.values == NULL);
            CHECK_EQ(q.domain, TBX_QDOMAIN_UNSPECIFIED);
            CHECK_EQ(q.has_clip, 0);
            uint64_t bb = 0;
            CHECK_STR(tbx_value_key_at(q.params, 1, NULL), "block_bytes");
            CHECK_OK(tbx_value_get_u64(tbx_value_at(q.params, 1), &bb));
            CHECK_EQ(bb, di->block_bytes);
        }
        /* what the blocks carry: q4_1 and q4_k a minimum, q4_0 / q8_0 / q6_k none */
        CHECK_OK(tbx_tensor_quant_get(f, 2, &q));
        CHECK_EQ(q.zero.scope, TBX_QSCOPE_BLOCK);
        CHECK_EQ(q.scale.dtype, TBX_DT_F16);
        CHECK_OK(tbx_tensor_quant_get(f, 4, &q));
        CHECK_EQ(q.zero.scope, TBX_QSCOPE_BLOCK);
        CHECK_EQ(q.block_size, 32);
        CHECK_EQ(q.super_block_size, 256);
        CHECK_EQ(q.bits, 4);
        CHECK_OK(tbx_tensor_quant_get(f, 3, &q));
        CHECK_EQ(q.zero.scope, TBX_QSCOPE_NONE);
        CHECK_EQ(q.bits, 8);
        CHECK_OK(tbx_tensor_quant_get(f, 8, &q));
        CHECK_EQ(q.scale.dtype, TBX_DT_F8_E8M0);
        /* one description per type: two q4_k tensors share it */
        tbx_quant_info q2;
        q2.struct_size = sizeof q2;
        CHECK_OK(tbx_tensor_quant_get(f, 4, &q));
        CHECK_OK(tbx_tensor_quant_get(f, 9, &q2));
        CHECK(q.params == q2.params);
        /* argument checks */
        q.struct_size = sizeof q - 1;
        CHECK_EQ(tbx_tensor_quant_get(f, 1, &q), TBX_E_INVALID_ARG);
        q.struct_size = sizeof q;
        CHECK_EQ(tbx_tensor_quant_get(f, (uint64_t)n, &q), TBX_E_INVALID_ARG);
        CHECK_EQ(tbx_tensor_quant_get(f, 1, NULL), TBX_E_INVALID_ARG);
        CHECK_EQ(tbx_tensor_quant_get(NULL, 1, &q), TBX_E_INVALID_ARG);
        /* a newer caller's larger struct: its tail is left alone, struct_size says what was
         * filled */
        struct { tbx_quant_info q; uint64_t later; } big;
        memset(&big, 0, sizeof big);
        big.later = 77;
        big.q.struct_size = sizeof big;
        CHECK_OK(tbx_tensor_quant_get(f, 1, &big.q));
        CHECK_EQ(big.q.struct_size, sizeof(tbx_quant_info));
        CHECK_EQ(big.later, 77);
        CHECK_EQ(big.q.method, TBX_QUANT_GGML);
        tbx_close(f);
    }
    CHECK_STR(tbx_quant_method_name(TBX_QUANT_LINEAR), "linear");
    CHECK_STR(tbx_quant_scope_name(TBX_QSCOPE_GROUP), "group");
    CHECK_STR(tbx_quant_domain_name(TBX_QDOMAIN_ACTIVATIONS), "activations");
    CHECK_STR(tbx_quant_method_name((tbx_quant_method)99), "?");
    unlink(path);
    free(path);
}

/* ------------------------------------------------------------------------------------------ */
/* read_f32 routing: a dense tensor of a dtype without a core decoder goes to its driver       */
/* ------------------------------------------------------------------------------------------ */
static int fake_calls;
static uint64_t fake_first, fake_count;
static tbx_status fake_read_f32(tbx_file *f, uint64_t i, uint64_t first, uint64_t count,
                                float *out, tbx_error *err) {
    (void)f; (void)i; (void)err;
    fake_calls++;
    fake_first = first;
    fake_count = count;
    for (uint64_t k = 0; k < count; k++) out[k] = (float)(first + k) * 0.5f;
    return TBX_OK;
}

/* a driver-specific dtype (sizes and decoding belong to its driver), as MCF's will be */
static const tbx_dtype_info fake_dtypes[1] = {{(tbx_dtype)93, "fake_q4", 4, 1, 0, TBX_DTF_SHAPED}};

TBX_TEST(read_f32_routes_driver_dtypes_to_the_driver) {
    const tbx_dtype dts[1] = {TBX_DT_F32};
    char *path = write_gguf(dts, 1);
    CHECK(path != NULL);
    if (!path) return;
    tbx_file *f = NULL;
    tbx_error e;
    CHECK_OK(tbx_open_path(&f, path, NULL, &e));
    if (f) {
        const tbx_driver *orig = f->drv;
        tbx_driver claiming = *orig, not_claiming = *orig;
        claiming.read_f32 = fake_read_f32;
        not_claiming.read_f32 = NULL;
        claiming.dtypes = not_claiming.dtypes = fake_dtypes;
        claiming.ndtypes = not_claiming.ndtypes = 1;
        tbx_dtype saved = f->tensors[0].dtype;
        float out[8];
        /* a dtype of the handle's own driver: the claiming driver decodes it */
        f->tensors[0].dtype = fake_dtypes[0].dtype;
        f->drv = &claiming;
        fake_calls = 0;
        CHECK_OK(tbx_tensor_read_f32(f, 0, 3, 8, out, &e));
        CHECK_EQ(fake_calls, 1);
        CHECK_EQ(fake_first, 3);
        CHECK_EQ(fake_count, 8);
        CHECK(out[0] == 1.5f && out[7] == 5.0f);
        /* the core still checks the range first */
        CHECK_EQ(tbx_tensor_read_f32(f, 0, 510, 8, out, &e), TBX_E_RANGE);
        CHECK_EQ(fake_calls, 1);
        /* without a hook: refused, naming the dtype */
        f->drv = &not_claiming;
        CHECK_EQ(tbx_tensor_read_f32(f, 0, 0, 8, out, &e), TBX_E_UNSUPPORTED);
        CHECK(strstr(e.message, "fake_q4") != NULL);
        /* a core-decodable dtype never goes to the driver */
        f->tensors[0].dtype = saved;
        f->drv = &claiming;
        CHECK_OK(tbx_tensor_read_f32(f, 0, 0, 8, out, &e));
        CHECK_EQ(fake_calls, 1);
        CHECK(out[0] == 0.0f);
        f->drv = orig;
        tbx_close(f);
    }
    unlink(path);
    free(path);
}

TBX_TEST_MAIN()
