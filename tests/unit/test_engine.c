/*
 * test_engine.c - the conversion engine (src/convert/engine.c) running plans built here by hand
 * (plan.h), into writers opened here:
 *
 *  - every transform against the values moved or computed directly from the input written
 *    here: llama's q/k row order by heads, transposes (tiles at odd sizes, bands and pieces of
 *    rows), scale, add; as stored bytes and through an encoder;
 *  - splitting one input into several outputs, joining several into one, stacking experts;
 *  - a generated tensor (the plan's hook);
 *  - MXFP4 blocks and scales repacked to ggml's MXFP4 (TBX_XF_MXFP4_HF), rows taken apart;
 *  - every encoder of the table against its kernel called directly (floats, ggml block types
 *    against the scalar quantizers, MCF families against the row quantizers);
 *  - 1, 2, 3 and 4 threads give the same bytes, also with jobs cut small;
 *  - every allocation failing in turn: TBX_E_NOMEM, nothing left behind, nothing leaked;
 *  - an input that ends while it is read (pread and mapped): TBX_E_TRUNCATED, no output;
 *  - a plan that does not fit its input is refused before anything is written.
 * Job sizes are the engine's test option (tbx_engine_opts.chunk) so that small tensors run as
 * many jobs.
 */
#define _GNU_SOURCE /* mkdtemp */
#include "tbx_test.h" /* TBX_TEST_LABEL_THREADS: ctest label "threads", run under TSan too */
#include "tbx_test_dir.h"
#include "api.h"
#include "convert.h"
#include "encode.h"
#include "ggml.h"
#include "mcfq.h"

#include <dirent.h>
#include <math.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *tmp(char *buf, size_t cap, const char *name) {
    return tbx_test_dir_file(buf, cap, "tbx_test_engine", name);
}

/* Files of the test directory (a conversion that failed leaves none). */
static int count_files(void) { return tbx_test_dir_count(); }

/* ------------------------------------------------------------------------------------------ */
/* Inputs: a safetensors file of f32 / f16 tensors, values of the test's own formulas          */
/* ------------------------------------------------------------------------------------------ */
typedef struct tin {
    const char *name;
    tbx_dtype dtype;          /* F32, F16 or U8 */
    uint32_t ndim;
    uint64_t shape[3];
    float (*value)(uint64_t i);
} tin;

static uint64_t tin_count(const tin *t) {
    uint64_t n = 1;
    for (uint32_t d = 0; d < t->ndim; d++) n *= t->shape[d];
    return n;
}

/* small dyadic values: exact in f16, and after x 0.5 or + 1 */
static float v_small(uint64_t i) { return (float)((int)(i % 61) - 30) / 8.0f; }
static float v_other(uint64_t i) { return (float)((int)((i * 7) % 97) - 48) / 16.0f; }
/* values of a normal-ish spread for the quantizers */
static float v_noise(uint64_t i) {
    uint64_t x = i * 0x9E3779B97F4A7C15ull + 12345;
    x ^= x >> 29; x *= 0xBF58476D1CE4E5B9ull; x ^= x >> 32;
    return ((float)(x % 20001) - 10000.0f) / 4096.0f;
}

static void write_input(const char *path, const tin *ts, size_t n) {
    tbx_write_options wo;
    tbx_write_options_init(&wo);
    wo.format = TBX_FORMAT_SAFETENSORS;
    wo.flags = TBX_WRITE_OVERWRITE | TBX_WRITE_NO_SYNC;
    tbx_writer *w = NULL;
    tbx_error e;
    if (tbx_writer_open(&w, path, &wo, &e) != TBX_OK) abort();
    for (size_t k = 0; k < n; k++) {
        tbx_tensor_desc d = TBX_TENSOR_DESC_INIT;
        d.name = ts[k].name;
        d.dtype = ts[k].dtype;
        d.ndim = ts[k].ndim;
        d.shape = ts[k].shape;
        d.has_data = 1;
        if (tbx_writer_add_tensor(w, &d, NULL, &e) != TBX_OK) abort();
    }
    for (size_t k = 0; k < n; k++) {
        const uint64_t c = tin_count(&ts[k]);
        const size_t es = ts[k].dtype == TBX_DT_U8 ? 1 : ts[k].dtype == TBX_DT_F16 ? 2 : 4;
        uint8_t *b = malloc((size_t)c * es + 1);
        for (uint64_t i = 0; i < c; i++) {
            const float v = ts[k].value(i);
            if (es == 4) memcpy(b + i * 4, &v, 4);
            else if (es == 1) b[i] = (uint8_t)v; /* U8: the formula's byte */
            else tbx_st16(b + i * 2, tbx_f32_to_f16(v));
        }
        if (tbx_writer_write_tensor(w, k, b, (size_t)c * es, &e) != TBX_OK) abort();
        free(b);
    }
    if (tbx_writer_finish(w, &e) != TBX_OK) abort();
}

/* ------------------------------------------------------------------------------------------ */
/* Running a plan                                                                              */
/* ------------------------------------------------------------------------------------------ */
typedef void (*plan_fn)(tbx_plan *p, const tbx_file *in);
/* The first failure of the plan helpers below (an allocation): the run returns it. */
static tbx_status g_build_st;
static const tbx_file *g_in; /* the input the plan is built for */

typedef struct run_opts {
    tbx_format fmt;            /* of the output */
    int threads;               /* 0: default */
    uint64_t chunk;            /* 0: default */
    uint32_t open_flags;       /* TBX_OPEN_MMAP ... */
    const tbx_allocator *al;   /* of the input (and so of the plan and the engine) */
    int *armed;                /* set while the conversion runs (failing allocators) */
    void (*before_run)(void);  /* after the open, before the engine (cut the input) */
    tbx_convert_report_fn on_tensor;
    void *ud;
} run_opts;

static tbx_status run(const char *in_path, const char *out_path, plan_fn build,
                      const run_opts *ro, tbx_error *e) {
    tbx_open_options oo;
    tbx_open_options_init(&oo);
    oo.flags = ro->open_flags;
    oo.allocator = ro->al;
    tbx_file *f = NULL;
    tbx_status st = tbx_open_path(&f, in_path, &oo, e);
    if (st != TBX_OK) return st;
    if (ro->armed) *ro->armed = 1;
    if (ro->before_run) ro->before_run();
    tbx_plan p;
    tbx_plan_init(&p, &f->al);
    g_build_st = TBX_OK;
    g_in = f;
    build(&p, f);
    st = g_build_st;
    tbx_write_options wo;
    tbx_write_options_init(&wo);
    wo.format = ro->fmt ? ro->fmt : TBX_FORMAT_SAFETENSORS;
    wo.flags = TBX_WRITE_OVERWRITE | TBX_WRITE_NO_SYNC;
    tbx_writer *w = NULL;
    if (st == TBX_OK) st = tbx_writer_open(&w, out_path, &wo, e);
    if (st == TBX_OK) {
        tbx_engine_opts eo;
        memset(&eo, 0, sizeof eo);
        eo.threads = ro->threads;
        eo.chunk = ro->chunk;
        eo.on_tensor = ro->on_tensor;
        eo.ud = ro->ud;
        st = tbx_engine_run(f, &p, w, &eo, e); /* (the façade checks the sources after it:
                                                  not here, so what the engine sees counts) */
        if (st == TBX_OK) st = tbx_writer_finish(w, e);
        else tbx_writer_abort(w);
    }
    if (ro->armed) *ro->armed = 0;
    tbx_plan_free(&p);
    tbx_close(f);
    return st;
}

/* Output tensor `name` of `path` decoded to f32 (malloc'd, *n values), NULL when absent. */
static float *read_f32(const char *path, const char *name, uint64_t *n) {
    tbx_file *g = NULL;
    tbx_error e;
    if (tbx_open_path(&g, path, NULL, &e) != TBX_OK) return NULL;
    uint64_t i;
    float *v = NULL;
    if (tbx_tensor_find(g, name, &i) == TBX_OK) {
        tbx_tensor_info ti = TBX_TENSOR_INFO_INIT;
        tbx_tensor_info_get(g, i, &ti);
        *n = 1;
        for (uint32_t d = 0; d < ti.ndim; d++) *n *= ti.shape[d];
        v = malloc((size_t)*n * 4 + 4);
        if (tbx_tensor_read_f32(g, i, 0, *n, v, &e) != TBX_OK) { free(v); v = NULL; }
    }
    tbx_close(g);
    return v;
}

/* Output tensor `name`'s stored bytes (malloc'd). */
static uint8_t *read_bytes(const char *path, const char *name, size_t *n) {
    tbx_file *g = NULL;
    tbx_error e;
    *n = 0;
    if (tbx_open_path(&g, path, NULL, &e) != TBX_OK) return NULL;
    uint64_t i;
    uint8_t *b = NULL;
    if (tbx_tensor_find(g, name, &i) == TBX_OK) {
        tbx_tensor_read(g, i, NULL, 0, n, &e);
        b = malloc(*n + 1);
        if (tbx_tensor_read(g, i, b, *n, NULL, &e) != TBX_OK) { free(b); b = NULL; }
    }
    tbx_close(g);
    return b;
}

/* Plan helpers */
static void add_out(tbx_plan *p, const char *name, tbx_dtype dt, uint32_t ndim,
                    const uint64_t *shape, uint8_t enc, uint8_t flags) {
    tbx_plan_tensor t;
    memset(&t, 0, sizeof t);
    t.name = name;
    t.name_len = (uint32_t)strlen(name);
    t.dtype = (uint16_t)dt;
    t.ndim = (uint16_t)ndim;
    if (g_build_st != TBX_OK) return;
    uint64_t *sh = tbx_plan_alloc(p, ndim * sizeof *sh + 1);
    if (!sh) { g_build_st = TBX_E_NOMEM; return; }
    memcpy(sh, shape, ndim * sizeof *sh);
    t.shape = sh;
    t.enc = enc;
    t.flags = flags;
    g_build_st = tbx_plan_add(p, &t, NULL, NULL);
}

/* Input tensor `name` of the file being converted (g_in). */
static uint64_t idx(const char *name) {
    uint64_t i = UINT64_MAX;
    if (tbx_tensor_find(g_in, name, &i) != TBX_OK) abort();
    return i;
}

static void add_src(tbx_plan *p, const char *tensor, uint64_t first, uint64_t rows,
                    uint64_t cols, uint8_t xform, uint32_t heads, float k) {
    tbx_plan_src s;
    memset(&s, 0, sizeof s);
    s.tensor = idx(tensor);
    s.first = first;
    s.rows = rows;
    s.cols = cols;
    s.xform = xform;
    s.heads = heads;
    s.k = k;
    if (g_build_st == TBX_OK) g_build_st = tbx_plan_add_src(p, &s, NULL);
}

/* ------------------------------------------------------------------------------------------ */
/* Transforms                                                                                  */
/* ------------------------------------------------------------------------------------------ */
enum { PR = 24, PC = 10, PH = 3 }; /* heads of d = 8 rows */
static const tin PERM_IN[] = {{"w", TBX_DT_F32, 2, {PR, PC}, v_small},
                              {"h", TBX_DT_F16, 2, {PR, PC}, v_other}};

static void plan_perm(tbx_plan *p, const tbx_file *in) {
    (void)in;
    const uint64_t sh[2] = {PR, PC};
    add_out(p, "stored", TBX_DT_F32, 2, sh, TBX_PENC_STORED, 0);
    add_src(p, "w", 0, PR, PC, TBX_XF_PERMUTE_HEADS, PH, 0);
    add_out(p, "cast", TBX_DT_F16, 2, sh, TBX_PENC_ENCODE, 0);
    add_src(p, "w", 0, PR, PC, TBX_XF_PERMUTE_HEADS, PH, 0);
    add_out(p, "from16", TBX_DT_F32, 2, sh, TBX_PENC_ENCODE, 0);
    add_src(p, "h", 0, PR, PC, TBX_XF_PERMUTE_HEADS, PH, 0);
    add_out(p, "stored16", TBX_DT_F16, 2, sh, TBX_PENC_STORED, 0);
    add_src(p, "h", 0, PR, PC, TBX_XF_PERMUTE_HEADS, PH, 0);
}

/* llama.cpp's order, written out: in each head of d rows, the first half's rows and the
 * second half's alternate (out 0 <- in 0, out 1 <- in d/2, out 2 <- in 1, ...). */
static uint64_t llama_row(uint64_t r) {
    const uint64_t d = PR / PH, h = r / d, w = r % d;
    return h * d + (w % 2 == 0 ? w / 2 : d / 2 + w / 2);
}

TBX_TEST(permute_heads_moves_the_rows_llama_cpp_expects) {
    char in[600], out[600];
    tmp(in, sizeof in, "perm.safetensors");
    tmp(out, sizeof out, "perm-out.safetensors");
    write_input(in, PERM_IN, 2);
    /* jobs: pieces of rows (4 < 10 values), rows gathered (30: 3 rows < a head), whole heads
     * read at once (200: 16 rows), and the default */
    static const uint64_t chunks[] = {4, 30, 200, 0};
    for (size_t c = 0; c < sizeof chunks / sizeof chunks[0]; c++) {
        run_opts ro = {0};
        ro.chunk = chunks[c];
        tbx_error e;
        CHECK_OK(run(in, out, plan_perm, &ro, &e));
        static const char *const names[] = {"stored", "cast", "from16", "stored16"};
        for (int k = 0; k < 4; k++) {
            uint64_t n = 0;
            float *v = read_f32(out, names[k], &n);
            CHECK(v != NULL && n == PR * PC);
            int same = 1;
            for (uint64_t r = 0; v && r < PR; r++)
                for (uint64_t col = 0; col < PC; col++) {
                    const uint64_t i = llama_row(r) * PC + col;
                    const float want = k < 2 ? v_small(i) : v_other(i);
                    same &= v[r * PC + col] == want;
                }
            CHECK(same);
            if (!same) fprintf(stderr, "chunk %llu, %s differs\n", (unsigned long long)chunks[c],
                               names[k]);
            free(v);
        }
    }
}

static void plan_unperm(tbx_plan *p, const tbx_file *in) {
    (void)in;
    const uint64_t sh[2] = {PR, PC};
    add_out(p, "stored", TBX_DT_F32, 2, sh, TBX_PENC_STORED, 0);
    add_src(p, "w", 0, PR, PC, TBX_XF_UNPERMUTE_HEADS, PH, 0);
    add_out(p, "cast", TBX_DT_F16, 2, sh, TBX_PENC_ENCODE, 0);
    add_src(p, "w", 0, PR, PC, TBX_XF_UNPERMUTE_HEADS, PH, 0);
    add_out(p, "from16", TBX_DT_F32, 2, sh, TBX_PENC_ENCODE, 0);
    add_src(p, "h", 0, PR, PC, TBX_XF_UNPERMUTE_HEADS, PH, 0);
    add_out(p, "stored16", TBX_DT_F16, 2, sh, TBX_PENC_STORED, 0);
    add_src(p, "h", 0, PR, PC, TBX_XF_UNPERMUTE_HEADS, PH, 0);
}

/* The way back (GGUF -> Hugging Face): output row r is input row inv[r], where llama's order
 * moved input row llama_row(q) to q, i.e. inv[llama_row(q)] = q: the output with llama's
 * order applied again is the input, for every job kind. */
TBX_TEST(unpermute_heads_undoes_llama_cpp_order) {
    char in[600], out[600];
    tmp(in, sizeof in, "unperm.safetensors");
    tmp(out, sizeof out, "unperm-out.safetensors");
    write_input(in, PERM_IN, 2);
    uint64_t inv[PR];
    for (uint64_t r = 0; r < PR; r++) inv[llama_row(r)] = r;
    static const uint64_t chunks[] = {4, 30, 200, 0};
    for (size_t c = 0; c < sizeof chunks / sizeof chunks[0]; c++) {
        run_opts ro = {0};
        ro.chunk = chunks[c];
        tbx_error e;
        CHECK_OK(run(in, out, plan_unperm, &ro, &e));
        static const char *const names[] = {"stored", "cast", "from16", "stored16"};
        for (int k = 0; k < 4; k++) {
            uint64_t n = 0;
            float *v = read_f32(out, names[k], &n);
            CHECK(v != NULL && n == PR * PC);
            int same = 1;
            /* llama's order applied to the output: output row llama_row(r) sits at r */
            for (uint64_t r = 0; v && r < PR; r++)
                for (uint64_t col = 0; col < PC; col++) {
                    const uint64_t i = inv[r] * PC + col;
                    const float want = k < 2 ? v_small(i) : v_other(i);
                    same &= v[r * PC + col] == want;
                }
            CHECK(same);
            if (!same) fprintf(stderr, "chunk %llu, %s differs\n", (unsigned long long)chunks[c],
                               names[k]);
            free(v);
        }
    }
}

/* transposes at odd sizes: [rows, cols] views */
static const struct { uint64_t r, c; } TSZ[] = {{67, 131}, {1, 5}, {130, 1}, {65, 64}, {3, 200}};
#define NTSZ (sizeof TSZ / sizeof TSZ[0])
static size_t g_tsz;

static void plan_transpose(tbx_plan *p, const tbx_file *in) {
    (void)in;
    const uint64_t R = TSZ[g_tsz].r, C = TSZ[g_tsz].c, sh[2] = {C, R};
    add_out(p, "stored", TBX_DT_F32, 2, sh, TBX_PENC_STORED, 0);
    add_src(p, "w", 0, R, C, TBX_XF_TRANSPOSE, 0, 0);
    add_out(p, "cast", TBX_DT_F16, 2, sh, TBX_PENC_ENCODE, 0);
    add_src(p, "w", 0, R, C, TBX_XF_TRANSPOSE, 0, 0);
    /* a view that starts inside the tensor: its last R * C values but one row */
    add_out(p, "offset", TBX_DT_F32, 2, (uint64_t[]){C, R - (R > 1)}, TBX_PENC_STORED, 0);
    add_src(p, "w", R > 1 ? C : 0, R - (R > 1), C, TBX_XF_TRANSPOSE, 0, 0);
}

TBX_TEST(transpose_in_tiles_at_odd_sizes) {
    char in[600], out[600];
    tmp(in, sizeof in, "tr.safetensors");
    tmp(out, sizeof out, "tr-out.safetensors");
    static const uint64_t chunks[] = {1, 7, 50, 1000, 0};
    for (g_tsz = 0; g_tsz < NTSZ; g_tsz++) {
        const uint64_t R = TSZ[g_tsz].r, C = TSZ[g_tsz].c;
        const tin t = {"w", TBX_DT_F32, 2, {R, C}, v_small};
        for (int mapped = 0; mapped < 2; mapped++) {
            write_input(in, &t, 1);
            for (size_t c = 0; c < sizeof chunks / sizeof chunks[0]; c++) {
                run_opts ro = {0};
                ro.chunk = chunks[c];
                ro.open_flags = mapped ? TBX_OPEN_MMAP : 0;
                tbx_error e;
                CHECK_OK(run(in, out, plan_transpose, &ro, &e));
                static const char *const names[] = {"stored", "cast", "offset"};
                for (int k = 0; k < 3; k++) {
                    const uint64_t skip = k == 2 && R > 1 ? 1 : 0, RR = R - skip;
                    uint64_t n = 0;
                    float *v = read_f32(out, names[k], &n);
                    CHECK(v != NULL && n == RR * C);
                    int same = 1;
                    for (uint64_t col = 0; v && col < C; col++)
                        for (uint64_t r = 0; r < RR; r++)
                            same &= v[col * RR + r] == v_small((r + skip) * C + col);
                    CHECK(same);
                    if (!same)
                        fprintf(stderr, "[%llu, %llu] chunk %llu mapped %d: %s differs\n",
                                (unsigned long long)R, (unsigned long long)C,
                                (unsigned long long)chunks[c], mapped, names[k]);
                    free(v);
                }
            }
        }
    }
}

/* strided sources (tbx_plan_src.step): every second value of [SR, 2 x SC] inputs, from the
 * first or the second (gpt-oss's interleaved gate_up_proj), transposed or not, as stored
 * bytes, cast, or decoded from f16 */
enum { SR = 37, SC = 70 };
static const tin STEP_IN[] = {{"w", TBX_DT_F32, 2, {SR, 2 * SC}, v_small},
                              {"h", TBX_DT_F16, 2, {SR, 2 * SC}, v_other}};

static void add_src_step(tbx_plan *p, const char *tensor, uint64_t first, uint8_t xform) {
    tbx_plan_src s;
    memset(&s, 0, sizeof s);
    s.tensor = idx(tensor);
    s.first = first;
    s.rows = SR;
    s.cols = SC;
    s.step = 2;
    s.xform = xform;
    if (g_build_st == TBX_OK) g_build_st = tbx_plan_add_src(p, &s, NULL);
}

static void plan_step(tbx_plan *p, const tbx_file *in) {
    (void)in;
    const uint64_t tr[2] = {SC, SR}, sh[2] = {SR, SC};
    add_out(p, "even_t", TBX_DT_F32, 2, tr, TBX_PENC_STORED, 0);
    add_src_step(p, "w", 0, TBX_XF_TRANSPOSE);
    add_out(p, "odd_t16", TBX_DT_F16, 2, tr, TBX_PENC_ENCODE, 0);
    add_src_step(p, "w", 1, TBX_XF_TRANSPOSE);
    add_out(p, "odd_h", TBX_DT_F32, 2, sh, TBX_PENC_ENCODE, 0);
    add_src_step(p, "h", 1, TBX_XF_NONE);
    add_out(p, "even_h", TBX_DT_F16, 2, sh, TBX_PENC_STORED, 0);
    add_src_step(p, "h", 0, TBX_XF_NONE);
}

/* a strided view one value past its tensor's end */
static void plan_step_beyond(tbx_plan *p, const tbx_file *in) {
    (void)in;
    const uint64_t sh[2] = {SR, SC};
    add_out(p, "x", TBX_DT_F32, 2, sh, TBX_PENC_ENCODE, 0);
    add_src_step(p, "w", 2, TBX_XF_NONE);
}

TBX_TEST(strided_sources_take_every_other_value) {
    char in[600], out[600];
    tmp(in, sizeof in, "st.safetensors");
    tmp(out, sizeof out, "st-out.safetensors");
    write_input(in, STEP_IN, 2);
    static const uint64_t chunks[] = {1, 7, 50, 1000, 0};
    for (size_t c = 0; c < sizeof chunks / sizeof chunks[0]; c++)
        for (int mapped = 0; mapped < 2; mapped++) {
            run_opts ro = {0};
            ro.chunk = chunks[c];
            ro.open_flags = mapped ? TBX_OPEN_MMAP : 0;
            tbx_error e;
            CHECK_OK(run(in, out, plan_step, &ro, &e));
            static const char *const names[] = {"even_t", "odd_t16", "odd_h", "even_h"};
            for (int k = 0; k < 4; k++) {
                uint64_t n = 0;
                float *v = read_f32(out, names[k], &n);
                CHECK(v != NULL && n == (uint64_t)SR * SC);
                int same = 1;
                for (uint64_t r = 0; v && r < SR; r++)
                    for (uint64_t col = 0; col < SC; col++) {
                        const uint64_t i = r * 2 * SC + 2 * col + (k == 1 || k == 2);
                        const float want = k < 2 ? v_small(i) : v_other(i);
                        same &= (k < 2 ? v[col * SR + r] : v[r * SC + col]) == want;
                    }
                CHECK(same);
                if (!same) fprintf(stderr, "chunk %llu mapped %d: %s differs\n",
                                   (unsigned long long)chunks[c], mapped, names[k]);
                free(v);
            }
        }
    tbx_error e;
    CHECK(run(in, out, plan_step_beyond, &(run_opts){0}, &e) == TBX_E_INVALID_ARG);
    CHECK(strstr(e.message, "beyond") != NULL);
}

/* interleaved sources (tbx_plan_src.dstep): gpt-oss's gate_up_proj rebuilt on the way back,
 * the views [SR, SC] of "w" (f32) and "h" (f16) as two experts each, each expert transposed,
 * w's to the even and h's to the odd values of the output's last axis; and two f16 views kept
 * as stored bytes, interleaved untransposed */
static void add_src_il(tbx_plan *p, const char *tensor, uint64_t first, uint8_t xform,
                       uint8_t dstep) {
    tbx_plan_src s;
    memset(&s, 0, sizeof s);
    s.tensor = idx(tensor);
    s.first = first;
    s.rows = SR;
    s.cols = SC;
    s.xform = xform;
    s.dstep = dstep;
    if (g_build_st == TBX_OK) g_build_st = tbx_plan_add_src(p, &s, NULL);
}

static void plan_interleave(tbx_plan *p, const tbx_file *in) {
    (void)in;
    const uint64_t gu[3] = {2, SC, 2 * SR}, st[2] = {SR, 2 * SC};
    add_out(p, "gate_up", TBX_DT_F32, 3, gu, TBX_PENC_ENCODE, 0);
    for (uint64_t x = 0; x < 2; x++) {
        add_src_il(p, "w", x * SR * SC, TBX_XF_TRANSPOSE, 2);
        add_src_il(p, "h", x * SR * SC, TBX_XF_TRANSPOSE, 2);
    }
    add_out(p, "stored", TBX_DT_F16, 2, st, TBX_PENC_STORED, 0);
    add_src_il(p, "h", SR * SC, TBX_XF_NONE, 2);
    add_src_il(p, "h", 0, TBX_XF_NONE, 2);
}

/* a group of two with one source; a group into a ggml block type */
static void plan_interleave_short(tbx_plan *p, const tbx_file *in) {
    (void)in;
    const uint64_t sh[2] = {SR, SC};
    add_out(p, "x", TBX_DT_F32, 2, sh, TBX_PENC_ENCODE, 0);
    add_src_il(p, "w", 0, TBX_XF_NONE, 2);
}

static void plan_interleave_block(tbx_plan *p, const tbx_file *in) {
    (void)in;
    const uint64_t sh[2] = {SR, 2 * SC};
    add_out(p, "x", TBX_DT_Q8_0, 2, sh, TBX_PENC_ENCODE, 0);
    add_src_il(p, "w", 0, TBX_XF_NONE, 2);
    add_src_il(p, "w", SR * SC, TBX_XF_NONE, 2);
}

TBX_TEST(interleaved_sources_fill_one_run_together) {
    char in[600], out[600];
    tmp(in, sizeof in, "il.safetensors");
    tmp(out, sizeof out, "il-out.safetensors");
    write_input(in, STEP_IN, 2);
    static const uint64_t chunks[] = {1, 7, 50, 1000, 0};
    for (size_t c = 0; c < sizeof chunks / sizeof chunks[0]; c++)
        for (int mapped = 0; mapped < 2; mapped++)
            for (int th = 1; th <= 3; th += 2) {
                run_opts ro = {0};
                ro.chunk = chunks[c];
                ro.threads = th;
                ro.open_flags = mapped ? TBX_OPEN_MMAP : 0;
                tbx_error e;
                CHECK_OK(run(in, out, plan_interleave, &ro, &e));
                uint64_t n = 0, n2 = 0;
                float *v = read_f32(out, "gate_up", &n);
                CHECK(v != NULL && n == (uint64_t)4 * SR * SC);
                int same = 1;
                /* gate_up[x, col, 2 r + m] = (m ? h : w)[x SR SC + r SC + col] */
                for (uint64_t x = 0; v && x < 2; x++)
                    for (uint64_t col = 0; col < SC; col++)
                        for (uint64_t r = 0; r < SR; r++)
                            for (uint64_t m = 0; m < 2; m++) {
                                const uint64_t i = x * SR * SC + r * SC + col;
                                const float want = m ? v_other(i) : v_small(i);
                                same &= v[(x * SC + col) * 2 * SR + 2 * r + m] == want;
                            }
                float *u = read_f32(out, "stored", &n2);
                CHECK(u != NULL && n2 == (uint64_t)2 * SR * SC);
                /* stored[2 v + m] = h[(1 - m) SR SC + v] */
                for (uint64_t i = 0; u && i < (uint64_t)SR * SC; i++)
                    same &= u[2 * i] == v_other(SR * SC + i) && u[2 * i + 1] == v_other(i);
                CHECK(same);
                if (!same) fprintf(stderr, "chunk %llu mapped %d threads %d: interleave differs\n",
                                   (unsigned long long)chunks[c], mapped, th);
                free(v);
                free(u);
            }
    tbx_error e;
    CHECK(run(in, out, plan_interleave_short, &(run_opts){0}, &e) == TBX_E_INVALID_ARG);
    CHECK(strstr(e.message, "interleaved group") != NULL);
    CHECK(run(in, out, plan_interleave_block, &(run_opts){0}, &e) == TBX_E_INVALID_ARG);
    CHECK(strstr(e.message, "whole bytes") != NULL);
}

/* a transpose of a ggml block type (gpt-oss's experts quantized in the GGUF, written back):
 * "q" [2, BR, BC] encoded to q8_0 by the engine into a GGUF, then each expert of that file
 * transposed back to f32, in bands of whole blocks whatever the job size */
enum { BR = 64, BC = 96 };
static const tin BT_IN[] = {{"q", TBX_DT_F32, 3, {2, BR, BC}, v_noise}};

static void plan_bt_quant(tbx_plan *p, const tbx_file *in) {
    (void)in;
    const uint64_t sh[3] = {2, BR, BC};
    add_out(p, "q8", TBX_DT_Q8_0, 3, sh, TBX_PENC_ENCODE, 0);
    add_src(p, "q", 0, 2 * BR, BC, TBX_XF_NONE, 0, 0);
}

static void plan_bt_back(tbx_plan *p, const tbx_file *in) {
    (void)in;
    const uint64_t sh[3] = {2, BC, BR};
    add_out(p, "t", TBX_DT_F32, 3, sh, TBX_PENC_ENCODE, 0);
    for (uint64_t x = 0; x < 2; x++) add_src(p, "q8", x * BR * BC, BR, BC, TBX_XF_TRANSPOSE, 0, 0);
}

static void plan_bt_stored(tbx_plan *p, const tbx_file *in) {
    (void)in;
    const uint64_t sh[2] = {BC, BR};
    add_out(p, "t", TBX_DT_Q8_0, 2, sh, TBX_PENC_STORED, 0);
    add_src(p, "q8", 0, BR, BC, TBX_XF_TRANSPOSE, 0, 0);
}

TBX_TEST(transpose_of_a_block_type_decodes_whole_blocks) {
    char in[600], mid[600], out[600];
    tmp(in, sizeof in, "bt.safetensors");
    tmp(mid, sizeof mid, "bt.gguf");
    tmp(out, sizeof out, "bt-out.safetensors");
    write_input(in, BT_IN, 1);
    tbx_error e;
    run_opts rq = {0};
    rq.fmt = TBX_FORMAT_GGUF;
    CHECK_OK(run(in, mid, plan_bt_quant, &rq, &e));
    uint64_t nq = 0;
    float *q = read_f32(mid, "q8", &nq); /* the reference: the whole tensor decoded */
    CHECK(q != NULL && nq == (uint64_t)2 * BR * BC);
    static const uint64_t chunks[] = {1, 100, 3000, 4096, 0};
    for (size_t c = 0; q && c < sizeof chunks / sizeof chunks[0]; c++)
        for (int th = 1; th <= 3; th += 2) {
            run_opts ro = {0};
            ro.chunk = chunks[c];
            ro.threads = th;
            CHECK_OK(run(mid, out, plan_bt_back, &ro, &e));
            uint64_t n = 0;
            float *v = read_f32(out, "t", &n);
            CHECK(v != NULL && n == nq);
            int same = 1;
            for (uint64_t x = 0; v && x < 2; x++)
                for (uint64_t r = 0; r < BR; r++)
                    for (uint64_t col = 0; col < BC; col++)
                        same &= v[(x * BC + col) * BR + r] == q[(x * BR + r) * BC + col];
            CHECK(same);
            if (!same) fprintf(stderr, "chunk %llu threads %d: transpose of q8_0 differs\n",
                               (unsigned long long)chunks[c], th);
            free(v);
        }
    free(q);
    CHECK(run(mid, out, plan_bt_stored, &(run_opts){0}, &e) == TBX_E_INVALID_ARG);
    CHECK(strstr(e.message, "block type is decoded") != NULL);
}

static void plan_scale_add(tbx_plan *p, const tbx_file *in) {
    (void)in;
    const uint64_t sh[2] = {PR, PC};
    add_out(p, "half", TBX_DT_F32, 2, sh, TBX_PENC_ENCODE, 0);
    add_src(p, "w", 0, PR, PC, TBX_XF_SCALE, 0, 0.5f);
    add_out(p, "plus1", TBX_DT_F16, 2, sh, TBX_PENC_ENCODE, 0);
    add_src(p, "h", 0, PR, PC, TBX_XF_ADD, 0, 1.0f);
}

TBX_TEST(scale_and_add_a_constant) {
    char in[600], out[600];
    tmp(in, sizeof in, "sa.safetensors");
    tmp(out, sizeof out, "sa-out.safetensors");
    write_input(in, PERM_IN, 2);
    static const uint64_t chunks[] = {3, 0};
    for (size_t c = 0; c < 2; c++) {
        run_opts ro = {0};
        ro.chunk = chunks[c];
        tbx_error e;
        CHECK_OK(run(in, out, plan_scale_add, &ro, &e));
        uint64_t n = 0;
        float *a = read_f32(out, "half", &n), *b = read_f32(out, "plus1", &n);
        int same = a && b;
        for (uint64_t i = 0; same && i < PR * PC; i++)
            same &= a[i] == v_small(i) * 0.5f && b[i] == v_other(i) + 1.0f;
        CHECK(same);
        free(a);
        free(b);
    }
}

/* TBX_XF_ZERO: rows an output has and its input does not (RoBERTa's padding positions on the
 * way back from GGUF): a view of real rows written as +0, then the whole input after them,
 * into f32 and f16; a value -0.0 or NaN in the view is +0 too. */
enum { ZOFF = 2 };
static float v_signed(uint64_t i) { return i == 0 ? -0.0f : i == 1 ? NAN : -(float)i - 0.5f; }
static void plan_zero(tbx_plan *p, const tbx_file *in) {
    (void)in;
    const uint64_t sh[2] = {PR + ZOFF, PC};
    static const uint16_t dts[2] = {TBX_DT_F32, TBX_DT_F16};
    static const char *const names[2] = {"z32", "z16"};
    for (int k = 0; k < 2; k++) {
        add_out(p, names[k], dts[k], 2, sh, TBX_PENC_ENCODE, 0);
        add_src(p, "s", 0, ZOFF, PC, TBX_XF_ZERO, 0, 0);
        add_src(p, "s", 0, PR, PC, TBX_XF_NONE, 0, 0);
    }
}

TBX_TEST(zero_rows_before_an_input) {
    char in[600], out[600];
    tmp(in, sizeof in, "z.safetensors");
    tmp(out, sizeof out, "z-out.safetensors");
    const tin t = {"s", TBX_DT_F32, 2, {PR, PC}, v_signed};
    write_input(in, &t, 1);
    static const uint64_t chunks[] = {3, 0};
    for (size_t c = 0; c < 2; c++) {
        run_opts ro = {0};
        ro.chunk = chunks[c];
        tbx_error e;
        CHECK_OK(run(in, out, plan_zero, &ro, &e));
        for (int k = 0; k < 2; k++) {
            uint64_t n = 0;
            float *v = read_f32(out, k ? "z16" : "z32", &n);
            int same = v && n == (PR + ZOFF) * PC;
            for (uint64_t i = 0; same && i < ZOFF * PC; i++) {
                uint32_t u;
                memcpy(&u, &v[i], 4);
                same &= u == 0; /* +0, not -0 or NaN */
            }
            for (uint64_t i = 0; same && i < PR * PC; i++) {
                const float w = v_signed(i); /* f16 holds these exactly */
                const float g = v[ZOFF * PC + i];
                same &= isnan(w) ? isnan(g) : memcmp(&w, &g, 4) == 0;
            }
            CHECK(same);
            free(v);
        }
    }
}

/* ------------------------------------------------------------------------------------------ */
/* Splitting, joining, stacking, generating                                                    */
/* ------------------------------------------------------------------------------------------ */
enum { QH = 6, QC = 8, XR = 5, XC = 4, NEXP = 4 };
static const tin SJ_IN[] = {
    {"qkv", TBX_DT_F32, 2, {3 * QH, QC}, v_small},         /* fused q, k, v */
    {"b1", TBX_DT_F32, 1, {5}, v_other}, {"b2", TBX_DT_F16, 1, {7}, v_small},
    {"e0", TBX_DT_F32, 2, {XR, XC}, v_small}, {"e1", TBX_DT_F32, 2, {XR, XC}, v_other},
    {"e2", TBX_DT_F32, 2, {XR, XC}, v_small}, {"e3", TBX_DT_F32, 2, {XR, XC}, v_other},
};

static const char *const EXP[NEXP] = {"e0", "e1", "e2", "e3"};

static float gen_value(uint64_t i) { return (float)i * 0.25f - 3.0f; }

static tbx_status gen_hook(const tbx_plan *p, size_t k, uint64_t first, uint64_t n, float *out,
                           tbx_error *err) {
    (void)p;
    (void)k;
    (void)err;
    for (uint64_t i = 0; i < n; i++) out[i] = gen_value(first + i);
    return TBX_OK;
}

static void plan_sj(tbx_plan *p, const tbx_file *in) {
    (void)in;
    const uint64_t q[2] = {QH, QC};
    static const char *const part[] = {"q", "k", "v"};
    for (int j = 0; j < 3; j++) { /* split: three row ranges, stored and cast */
        add_out(p, part[j], TBX_DT_F32, 2, q, TBX_PENC_STORED, 0);
        add_src(p, "qkv", (uint64_t)j * QH * QC, QH, QC, TBX_XF_NONE, 0, 0);
    }
    add_out(p, "k16", TBX_DT_F16, 2, q, TBX_PENC_ENCODE, 0);
    add_src(p, "qkv", QH * QC, QH, QC, TBX_XF_NONE, 0, 0);
    const uint64_t b[1] = {12};
    add_out(p, "bias", TBX_DT_F32, 1, b, TBX_PENC_ENCODE, 0); /* join: f32 + f16 */
    add_src(p, "b1", 0, 1, 5, TBX_XF_NONE, 0, 0);
    add_src(p, "b2", 0, 1, 7, TBX_XF_NONE, 0, 0);
    const uint64_t x[3] = {NEXP, XR, XC};
    add_out(p, "experts", TBX_DT_F32, 3, x, TBX_PENC_STORED, 0); /* stack */
    for (int j = 0; j < NEXP; j++) add_src(p, EXP[j], 0, XR, XC, TBX_XF_NONE, 0, 0);
    add_out(p, "experts_t", TBX_DT_F16, 3, (uint64_t[]){NEXP, XC, XR}, TBX_PENC_ENCODE, 0);
    for (int j = 0; j < NEXP; j++) add_src(p, EXP[j], 0, XR, XC, TBX_XF_TRANSPOSE, 0, 0);
    const uint64_t g[1] = {37};
    p->generate = gen_hook;
    add_out(p, "gen", TBX_DT_F32, 1, g, TBX_PENC_ENCODE, TBX_PT_GEN);
    add_out(p, "gen16", TBX_DT_F16, 1, g, TBX_PENC_ENCODE, TBX_PT_GEN);
}

typedef struct reps { int n; char names[16][16]; uint64_t index[16], nvalues[16]; } reps;
static void on_rep(void *ud, const tbx_convert_report *r) {
    reps *s = ud;
    if (s->n < 16) {
        snprintf(s->names[s->n], sizeof s->names[0], "%s", r->name);
        s->index[s->n] = r->tensor;
        s->nvalues[s->n] = r->nvalues;
    }
    s->n++;
}

TBX_TEST(split_join_stack_and_generate) {
    char in[600], out[600];
    tmp(in, sizeof in, "sj.safetensors");
    tmp(out, sizeof out, "sj-out.safetensors");
    write_input(in, SJ_IN, sizeof SJ_IN / sizeof SJ_IN[0]);
    static const uint64_t chunks[] = {1, 3, 0};
    for (size_t c = 0; c < 6; c++) {
        run_opts ro = {0};
        ro.chunk = chunks[c % 3];
        ro.open_flags = c >= 3 ? TBX_OPEN_MMAP : 0;
        reps rs;
        memset(&rs, 0, sizeof rs);
        ro.on_tensor = on_rep;
        ro.ud = &rs;
        tbx_error e;
        CHECK_OK(run(in, out, plan_sj, &ro, &e));
        if (rs.n != 9) fprintf(stderr, "%s\n", e.message);
        CHECK_EQ(rs.n, 9);
        CHECK_STR(rs.names[0], "q");
        CHECK_EQ(rs.index[8], 8);  /* reports name the outputs (report_input_index false) */
        CHECK_EQ(rs.nvalues[0], 0); /* stored bytes: nothing encoded */
        CHECK_EQ(rs.nvalues[3], QH * QC);
        CHECK_EQ(rs.nvalues[7], 0); /* generated: no input values */
        uint64_t n;
        int same = 1;
        static const char *const part[] = {"q", "k", "v"};
        for (int j = 0; j < 3; j++) {
            float *v = read_f32(out, part[j], &n);
            same &= v && n == QH * QC;
            for (uint64_t i = 0; v && i < n; i++) same &= v[i] == v_small(j * QH * QC + i);
            free(v);
        }
        {
            float *v = read_f32(out, "k16", &n);
            for (uint64_t i = 0; v && i < n; i++) same &= v[i] == v_small(QH * QC + i);
            free(v);
        }
        float *v = read_f32(out, "bias", &n);
        same &= v && n == 12;
        for (uint64_t i = 0; v && i < 12; i++)
            same &= v[i] == (i < 5 ? v_other(i) : v_small(i - 5));
        free(v);
        v = read_f32(out, "experts", &n);
        same &= v && n == NEXP * XR * XC;
        for (uint64_t j = 0; v && j < NEXP; j++)
            for (uint64_t i = 0; i < XR * XC; i++)
                same &= v[j * XR * XC + i] == (j % 2 ? v_other(i) : v_small(i));
        free(v);
        v = read_f32(out, "experts_t", &n);
        same &= v && n == NEXP * XR * XC;
        for (uint64_t j = 0; v && j < NEXP; j++)
            for (uint64_t cc = 0; cc < XC; cc++)
                for (uint64_t r = 0; r < XR; r++) {
                    const uint64_t i = r * XC + cc;
                    same &= v[j * XR * XC + cc * XR + r] == (j % 2 ? v_other(i) : v_small(i));
                }
        free(v);
        v = read_f32(out, "gen", &n);
        float *w = read_f32(out, "gen16", &n);
        same &= v && w && n == 37;
        for (uint64_t i = 0; v && w && i < 37; i++)
            same &= v[i] == gen_value(i) && w[i] == gen_value(i);
        free(v);
        free(w);
        CHECK(same);
        if (!same)
            fprintf(stderr, "chunk %llu%s differs\n", (unsigned long long)chunks[c % 3],
                    c >= 3 ? " mapped" : "");
    }
}

/* ------------------------------------------------------------------------------------------ */
/* Encoders by table                                                                           */
/* ------------------------------------------------------------------------------------------ */
enum { ER = 6, EC = 512 };
static tbx_dtype g_enc_dt;
static bool g_enc_search; /* TBX_PT_SEARCH: the encoder's own search (q2_K .. q6_K) */
static float g_clip = 2.0f;

static void plan_encoder(tbx_plan *p, const tbx_file *in) {
    (void)in;
    const uint64_t sh[2] = {ER, EC};
    const tbx_encoder *enc = tbx_encoder_for(g_enc_dt);
    tbx_quant_info *clip = NULL;
    if (enc->clip) {
        if (!(clip = tbx_plan_alloc(p, sizeof *clip))) abort();
        clip->struct_size = sizeof *clip;
        clip->has_clip = 1;
        clip->clip_min = -g_clip;
        clip->clip_max = g_clip;
    }
    add_out(p, "w", g_enc_dt, 2, sh, TBX_PENC_ENCODE, g_enc_search ? TBX_PT_SEARCH : 0);
    p->t[p->n - 1].quant = clip;
    add_src(p, "x", 0, ER, EC, TBX_XF_NONE, 0, 0);
}

/* The bytes the encoder of dt must give for x (n values of [ER, EC]): its kernel, called here
 * (a ggml block type: ggml's algorithm, tbx_ggml_quant_ref_for, or the row quantizer of the
 * types without a block quantizer; with g_enc_search, tensorbox's own K search, whose scalar
 * kernel gives the same bytes as the SIMD one). */
static size_t expected(tbx_dtype dt, const float *x, uint8_t *out) {
    const uint64_t n = ER * EC;
    const tbx_encoder *enc = tbx_encoder_for(dt);
    if (enc->kind == TBX_ENC_FLOAT) {
        for (uint64_t i = 0; i < n; i++) {
            if (dt == TBX_DT_F32) memcpy(out + 4 * i, &x[i], 4);
            else if (dt == TBX_DT_F64) { double d = x[i]; memcpy(out + 8 * i, &d, 8); }
            else if (dt == TBX_DT_F16) tbx_st16(out + 2 * i, tbx_f32_to_f16(x[i]));
            else tbx_st16(out + 2 * i, tbx_f32_to_bf16(x[i]));
        }
        return (size_t)(n * (dt == TBX_DT_F64 ? 8 : dt == TBX_DT_F32 ? 4 : 2));
    }
    if (enc->kind == TBX_ENC_BLOCK) {
        const tbx_dtype_info *di = tbx_dtype_core_get(dt);
        /* the types without a block quantizer of their own (iq4_nl, nvfp4, ...): the row
         * quantizer, all values as one row (no importance matrix: block-local) */
        const tbx_quant_fn q =
            g_enc_search ? tbx_ggml_quant_scalar_for(dt) : tbx_ggml_quant_ref_for(dt);
        if (q)
            q(x, out, n / di->block_size);
        else
            tbx_ggml_quant_rows_for(dt)(x, out, 1, (int64_t)n, NULL);
        return (size_t)(n / di->block_size * di->block_bytes);
    }
    if (dt == TBX_DT_MCF_INT8 || dt == TBX_DT_MCF_INT4) {
        tbx_mcfi_layout I;
        if (tbx_mcfi_layout_get(dt == TBX_DT_MCF_INT8 ? 8 : 4, false, n, &I) != TBX_OK) abort();
        float sc, z;
        tbx_mcfi_params(&I, -g_clip, g_clip, &sc, &z);
        memset(out, 0, (size_t)I.total);
        memcpy(out + I.scale_off, &sc, 4);
        tbx_mcfi_quantize(&I, sc, z, -g_clip, g_clip, x, 0, n, out + I.codes_off);
        return (size_t)I.total;
    }
    tbx_mcfq_layout L;
    if (tbx_mcfq_layout_get((tbx_mcfq_kind)(dt - TBX_DT_MCF_Q8), ER, EC, &L) != TBX_OK) abort();
    memset(out, 0, (size_t)L.total);
    tbx_mcfq_quantize_rows(&L, TBX_MCFQ_METHOD_BEST, x, ER, -g_clip, g_clip, out + L.scales_off,
                           L.super ? out + L.sub_off : NULL, out + L.codes_off);
    return (size_t)L.total;
}

TBX_TEST(every_encoder_of_the_table_gives_its_kernel_bytes) {
    char in[600], out[600];
    tmp(in, sizeof in, "enc.safetensors");
    const tin t = {"x", TBX_DT_F32, 2, {ER, EC}, v_noise};
    write_input(in, &t, 1);
    float *x = malloc(ER * EC * 4);
    for (uint64_t i = 0; i < ER * EC; i++) x[i] = v_noise(i);
    uint8_t *want = malloc(ER * EC * 8 + 4096);
    int n = 0;
    for (size_t i = 0; tbx_encoder_at(i); i++) {
        const tbx_encoder *enc = tbx_encoder_at(i);
        if (tbx_encoder_for(enc->dtype) != enc) continue; /* no kernel in this build */
        g_enc_dt = enc->dtype;
        const tbx_format fmt = enc->kind == TBX_ENC_FLOAT   ? TBX_FORMAT_SAFETENSORS
                               : enc->kind == TBX_ENC_BLOCK ? TBX_FORMAT_GGUF
                                                            : TBX_FORMAT_MCF;
        tmp(out, sizeof out, fmt == TBX_FORMAT_SAFETENSORS ? "enc-out.safetensors"
                             : fmt == TBX_FORMAT_GGUF      ? "enc-out.gguf"
                                                           : "enc-out.mcf");
        for (int srch = 0; srch < (enc->search ? 2 : 1); srch++) {
            g_enc_search = srch != 0;
            const size_t wn = expected(enc->dtype, x, want);
            for (int c = 0; c < 2; c++) {
                run_opts ro = {0};
                ro.fmt = fmt;
                ro.chunk = c ? 1024 : 0; /* several jobs (whole blocks of every type) */
                tbx_error e;
                CHECK_OK(run(in, out, plan_encoder, &ro, &e));
                size_t gn = 0;
                uint8_t *got = read_bytes(out, "w", &gn);
                const bool same = got && gn == wn && memcmp(got, want, wn) == 0;
                CHECK(same);
                if (!same)
                    fprintf(stderr, "%s%s: %zu bytes, want %zu\n",
                            tbx_dtype_get(enc->dtype)->name, srch ? " (search)" : "", gn, wn);
                free(got);
            }
        }
        g_enc_search = false;
        n++;
    }
    CHECK(n >= 4 + 13 + 8); /* floats, ggml block types, MCF families */
    free(x);
    free(want);
}

/* ------------------------------------------------------------------------------------------ */
/* Threads                                                                                     */
/* ------------------------------------------------------------------------------------------ */
enum { TR = 96, TC = 512 };
static const tin TH_IN[] = {{"a", TBX_DT_F32, 2, {TR, TC}, v_noise},
                            {"b", TBX_DT_F16, 2, {TR, TC}, v_noise}};

static void plan_threads_gguf(tbx_plan *p, const tbx_file *in) {
    (void)in;
    const uint64_t sh[2] = {TR, TC}, tsh[2] = {TC, TR};
    add_out(p, "perm_q4k", TBX_DT_Q4_K, 2, sh, TBX_PENC_ENCODE, 0);
    add_src(p, "a", 0, TR, TC, TBX_XF_PERMUTE_HEADS, 4, 0);
    add_out(p, "perm16", TBX_DT_F16, 2, sh, TBX_PENC_STORED, 0);
    add_src(p, "b", 0, TR, TC, TBX_XF_PERMUTE_HEADS, 4, 0);
    add_out(p, "t_q8", TBX_DT_Q8_0, 2, tsh, TBX_PENC_ENCODE, 0);
    add_src(p, "b", 0, TR, TC, TBX_XF_TRANSPOSE, 0, 0);
    add_out(p, "cast", TBX_DT_BF16, 2, sh, TBX_PENC_ENCODE, 0);
    add_src(p, "a", 0, TR, TC, TBX_XF_NONE, 0, 0);
}

static void plan_threads_mcf(tbx_plan *p, const tbx_file *in) {
    (void)in;
    const uint64_t sh[2] = {TR, TC}, tsh[2] = {TC, TR};
    add_out(p, "k4", TBX_DT_MCF_K4, 2, sh, TBX_PENC_ENCODE, TBX_PT_CLIP_SCAN);
    add_src(p, "a", 0, TR, TC, TBX_XF_NONE, 0, 0);
    add_out(p, "int4_t", TBX_DT_MCF_INT4, 2, tsh, TBX_PENC_ENCODE, TBX_PT_CLIP_SCAN);
    add_src(p, "b", 0, TR, TC, TBX_XF_TRANSPOSE, 0, 0);
    add_out(p, "q8_perm", TBX_DT_MCF_Q8, 2, sh, TBX_PENC_ENCODE, TBX_PT_CLIP_SCAN);
    add_src(p, "a", 0, TR, TC, TBX_XF_PERMUTE_HEADS, 4, 0);
}

typedef struct sse_rec { int n; double sse[8]; } sse_rec;

TBX_TEST(thread_counts_give_the_same_bytes) {
    char in[600], out[600];
    tmp(in, sizeof in, "th.safetensors");
    write_input(in, TH_IN, 2);
    /* GGUF cannot store MCF's families: two outputs */
    for (int part = 0; part < 2; part++) {
        size_t n1 = 0;
        uint8_t *a = NULL;
        for (int th = 1; th <= 4; th++) {
            for (int mapped = 0; mapped < 2; mapped++) {
                tmp(out, sizeof out, part ? "th.mcf" : "th.gguf");
                run_opts ro = {0};
                ro.fmt = part ? TBX_FORMAT_MCF : TBX_FORMAT_GGUF;
                ro.threads = th;
                ro.chunk = 4096; /* many jobs in flight */
                ro.open_flags = mapped ? TBX_OPEN_MMAP : 0;
                tbx_error e;
                CHECK_OK(run(in, out, part ? plan_threads_mcf : plan_threads_gguf, &ro, &e));
                size_t n = 0;
                uint8_t *b = tbx_test_slurp(out, &n);
                CHECK(b != NULL);
                if (!a) { a = b; n1 = n; continue; }
                const bool same = b && n == n1 && memcmp(a, b, n) == 0;
                CHECK(same);
                if (!same) fprintf(stderr, "%s, %d threads, mapped %d: other bytes\n",
                                   part ? "mcf" : "gguf", th, mapped);
                free(b);
            }
        }
        free(a);
    }
}

/* ------------------------------------------------------------------------------------------ */
/* Failures: allocations, an input that ends early, plans that do not fit                      */
/* ------------------------------------------------------------------------------------------ */
static void plan_all_paths(tbx_plan *p, const tbx_file *in) {
    (void)in;
    const uint64_t sh[2] = {TR, TC}, tsh[2] = {TC, TR};
    tbx_plan_tensor t;
    memset(&t, 0, sizeof t);
    t.flags = TBX_PT_WHOLE; /* a whole tensor copied as stored */
    t.src = idx("b");
    t.dtype = TBX_DT_F16;
    g_build_st = tbx_plan_add(p, &t, NULL, NULL);
    add_out(p, "perm", TBX_DT_F16, 2, sh, TBX_PENC_ENCODE, 0);
    add_src(p, "a", 0, TR, TC, TBX_XF_PERMUTE_HEADS, 4, 0);
    add_out(p, "t", TBX_DT_F32, 2, tsh, TBX_PENC_STORED, 0);
    add_src(p, "a", 0, TR, TC, TBX_XF_TRANSPOSE, 0, 0);
    add_out(p, "k4", TBX_DT_MCF_K4, 2, sh, TBX_PENC_ENCODE, TBX_PT_CLIP_SCAN);
    add_src(p, "a", 0, TR, TC, TBX_XF_SCALE, 0, 2.0f);
}

/* Every allocation of the plan and the engine (the input's allocator; its open is not armed)
 * fails in turn: each run ends in TBX_E_NOMEM with no output and no temporary file left and
 * nothing leaked, or succeeds with the same bytes when the failure is one the engine tolerates
 * (a worker pool that cannot start: the jobs run on the calling thread). */
TBX_TEST(every_allocation_failure_is_clean) {
    char in[600], out[600];
    tmp(in, sizeof in, "al.safetensors");
    tmp(out, sizeof out, "al.mcf");
    write_input(in, TH_IN, 2);
    tbx_fail_al count = {0, 0, 0, 0};
    tbx_allocator cal = {tbx_fa_alloc, tbx_fa_realloc, tbx_fa_free, &count};
    run_opts ro = {0};
    ro.fmt = TBX_FORMAT_MCF;
    ro.threads = 3;
    ro.chunk = 8192;
    ro.al = &cal;
    ro.armed = &count.armed;
    tbx_error e;
    CHECK_OK(run(in, out, plan_all_paths, &ro, &e));
    const long total = count.calls;
    CHECK(total > 10);
    CHECK_EQ(count.live, 0);
    size_t n0 = 0;
    uint8_t *good = tbx_test_slurp(out, &n0);
    CHECK(good != NULL);
    int clean = 1, tolerated = 0;
    for (long k = 1; k <= total; k++) {
        unlink(out);
        const int files = count_files();
        tbx_fail_al a = {0, 0, k, 0};
        tbx_allocator al = {tbx_fa_alloc, tbx_fa_realloc, tbx_fa_free, &a};
        ro.al = &al;
        ro.armed = &a.armed;
        tbx_status st = run(in, out, plan_all_paths, &ro, &e);
        if (st == TBX_OK) {
            size_t n = 0;
            uint8_t *b = tbx_test_slurp(out, &n);
            if (!b || n != n0 || memcmp(b, good, n) != 0) {
                fprintf(stderr, "allocation %ld failed: success with other bytes\n", k);
                clean = 0;
            }
            free(b);
            tolerated++;
        } else if (st != TBX_E_NOMEM) {
            fprintf(stderr, "allocation %ld failed: status %d (%s)\n", k, (int)st, e.message);
            clean = 0;
        } else if (count_files() != files) {
            fprintf(stderr, "allocation %ld failed: a file left behind\n", k);
            clean = 0;
        }
        if (a.live != 0) {
            fprintf(stderr, "allocation %ld failed: %lld bytes leaked\n", k, a.live);
            clean = 0;
        }
    }
    CHECK(clean);
    CHECK(tolerated <= 1); /* the pool, at most */
    free(good);
}

/* The input cut after it is opened, before the engine runs, at g_cut_at. */
static char g_cut_path[600];
static uint64_t g_cut_at;
static void cut_input(void) {
    if (truncate(g_cut_path, (off_t)g_cut_at) != 0) abort();
}

/* Tensor "a" through the jobs only (no kernel copy or clip scan ahead of them): a cast of a
 * range of it (runs of the mapping), its heads reordered (whole heads from the mapping), its
 * transpose as stored bytes (bands of the mapping), an MCF family. */
static void plan_cut(tbx_plan *p, const tbx_file *in) {
    (void)in;
    const uint64_t sh[2] = {TR, TC}, rsh[2] = {TR - 1, TC}, tsh[2] = {TC, TR};
    add_out(p, "cast", TBX_DT_BF16, 2, rsh, TBX_PENC_ENCODE, 0);
    add_src(p, "a", TC, TR - 1, TC, TBX_XF_NONE, 0, 0);
    add_out(p, "perm", TBX_DT_F16, 2, sh, TBX_PENC_ENCODE, 0);
    add_src(p, "a", 0, TR, TC, TBX_XF_PERMUTE_HEADS, 4, 0);
    add_out(p, "t", TBX_DT_F32, 2, tsh, TBX_PENC_STORED, 0);
    add_src(p, "a", 0, TR, TC, TBX_XF_TRANSPOSE, 0, 0);
    /* a given clip range: no scan when it is declared (that would find the cut first) */
    tbx_quant_info *clip = tbx_plan_alloc(p, sizeof *clip);
    if (!clip) { g_build_st = TBX_E_NOMEM; return; }
    clip->struct_size = sizeof *clip;
    clip->has_clip = 1;
    clip->clip_min = -2;
    clip->clip_max = 2;
    add_out(p, "k4", TBX_DT_MCF_K4, 2, sh, TBX_PENC_ENCODE, 0);
    if (g_build_st == TBX_OK) p->t[p->n - 1].quant = clip;
    add_src(p, "a", 0, TR, TC, TBX_XF_NONE, 0, 0);
}

static int g_cut_armed;
static int cut_on_write(void) {
    if (g_cut_armed) {
        g_cut_armed = 0;
        cut_input();
    }
    return 0;
}

/* "a" cast to f16: jobs that read the mapping (12 of them with 4096 values a job). */
static void plan_cast_a(tbx_plan *p, const tbx_file *in) {
    (void)in;
    const uint64_t sh[2] = {TR, TC};
    add_out(p, "cast", TBX_DT_F16, 2, sh, TBX_PENC_ENCODE, 0);
    add_src(p, "a", 0, TR, TC, TBX_XF_NONE, 0, 0);
}

TBX_TEST(a_source_that_ends_early_fails_the_conversion) {
    char out[600];
    tmp(out, sizeof out, "cut.mcf");
    tmp(g_cut_path, sizeof g_cut_path, "cut.safetensors");
    write_input(g_cut_path, TH_IN, 2);
    tbx_file *f = NULL;
    tbx_error e;
    CHECK_OK(tbx_open_path(&f, g_cut_path, NULL, &e));
    if (!f) return;
    uint64_t ai = 0;
    CHECK_OK(tbx_tensor_find(f, "a", &ai));
    tbx_tensor_info ti = TBX_TENSOR_INFO_INIT;
    CHECK_OK(tbx_tensor_info_get(f, ai, &ti));
    tbx_close(f);
    /* cut in the middle of "a" or just before its end, mapped or read, one thread or three */
    for (int v = 0; v < 8; v++) {
        const int mapped = v & 1, threads = v & 2 ? 3 : 1;
        g_cut_at = v & 4 ? ti.offset + ti.nbytes - 100 : ti.offset + ti.nbytes / 2;
        write_input(g_cut_path, TH_IN, 2);
        unlink(out);
        const int files = count_files();
        run_opts ro = {0};
        ro.fmt = TBX_FORMAT_MCF;
        ro.threads = threads;
        ro.chunk = 3 * 4096; /* whole heads (24 rows of 512) */
        ro.open_flags = mapped ? TBX_OPEN_MMAP : 0;
        ro.before_run = cut_input;
        memset(&e, 0, sizeof e);
        tbx_status st = run(g_cut_path, out, plan_cut, &ro, &e);
        CHECK_EQ(st, TBX_E_TRUNCATED);
        if (st != TBX_E_TRUNCATED)
            fprintf(stderr, "mapped %d threads %d cut at %llu: %d %s\n", mapped, threads,
                    (unsigned long long)g_cut_at, (int)st, e.message);
        CHECK_EQ(count_files(), files); /* no output, no temporary file */
    }
    /* the input cut while the engine runs (at the first byte written): jobs read from the
     * mapping after the cut are caught by the check of what each worker read, naming the
     * tensor (not only by the façade's check of the whole input afterwards) */
    for (int threads = 1; threads <= 3; threads += 2) {
        g_cut_at = ti.offset + ti.nbytes / 2;
        write_input(g_cut_path, TH_IN, 2);
        unlink(out);
        const int files = count_files();
        run_opts ro = {0};
        ro.threads = threads;
        ro.chunk = 4096;
        ro.open_flags = TBX_OPEN_MMAP;
        g_cut_armed = 1;
        tbx_out_fault_hook_ = cut_on_write;
        memset(&e, 0, sizeof e);
        tbx_status st = run(g_cut_path, out, plan_cast_a, &ro, &e);
        tbx_out_fault_hook_ = NULL;
        CHECK_EQ(g_cut_armed, 0); /* the cut happened */
        CHECK_EQ(st, TBX_E_TRUNCATED);
        CHECK_STR(e.field, "a");
        CHECK_EQ(count_files(), files);
    }
}

/* Plans that do not fit their input: refused (TBX_E_INVALID_ARG) before any tensor is
 * declared. */
static int g_bad;
static void plan_bad(tbx_plan *p, const tbx_file *in) {
    (void)in;
    const uint64_t sh[2] = {TR, TC};
    switch (g_bad) {
    case 0: /* a source beyond its tensor */
        add_out(p, "x", TBX_DT_F32, 2, sh, TBX_PENC_ENCODE, 0);
        add_src(p, "a", 1, TR, TC, TBX_XF_NONE, 0, 0);
        break;
    case 1: /* sources that do not hold the output's values */
        add_out(p, "x", TBX_DT_F32, 2, sh, TBX_PENC_ENCODE, 0);
        add_src(p, "a", 0, TR - 1, TC, TBX_XF_NONE, 0, 0);
        break;
    case 2: /* stored bytes scaled */
        add_out(p, "x", TBX_DT_F32, 2, sh, TBX_PENC_STORED, 0);
        add_src(p, "a", 0, TR, TC, TBX_XF_SCALE, 0, 2);
        break;
    case 3: /* stored bytes of another dtype */
        add_out(p, "x", TBX_DT_F16, 2, sh, TBX_PENC_STORED, 0);
        add_src(p, "a", 0, TR, TC, TBX_XF_NONE, 0, 0);
        break;
    case 4: /* heads that do not split the rows evenly */
        add_out(p, "x", TBX_DT_F32, 2, sh, TBX_PENC_ENCODE, 0);
        add_src(p, "a", 0, TR, TC, TBX_XF_PERMUTE_HEADS, 5, 0);
        break;
    case 5: /* a block type over a transpose whose rows are no whole blocks */
        add_out(p, "x", TBX_DT_Q4_K, 2, (uint64_t[]){TC, TR}, TBX_PENC_ENCODE, 0);
        add_src(p, "a", 0, TR, TC, TBX_XF_TRANSPOSE, 0, 0);
        break;
    case 7: /* stored bytes zeroed */
        add_out(p, "x", TBX_DT_F32, 2, sh, TBX_PENC_STORED, 0);
        add_src(p, "a", 0, TR, TC, TBX_XF_ZERO, 0, 0);
        break;
    case 6: /* a generated tensor without a generator */
        add_out(p, "x", TBX_DT_F32, 2, sh, TBX_PENC_ENCODE, TBX_PT_GEN);
        break;
    default: /* an MCF family without a clip range or a scan */
        add_out(p, "x", TBX_DT_MCF_K4, 2, sh, TBX_PENC_ENCODE, 0);
        add_src(p, "a", 0, TR, TC, TBX_XF_NONE, 0, 0);
        break;
    }
}

TBX_TEST(plans_that_do_not_fit_are_refused) {
    char in[600], out[600];
    tmp(in, sizeof in, "bad.safetensors");
    tmp(out, sizeof out, "bad.gguf");
    write_input(in, TH_IN, 2);
    for (g_bad = 0; g_bad < 9; g_bad++) {
        unlink(out);
        run_opts ro = {0};
        ro.fmt = TBX_FORMAT_GGUF;
        tbx_error e;
        tbx_status st = run(in, out, plan_bad, &ro, &e);
        CHECK_EQ(st, TBX_E_INVALID_ARG);
        if (st != TBX_E_INVALID_ARG) fprintf(stderr, "bad plan %d: %d\n", g_bad, (int)st);
        else CHECK(strstr(e.message, "\"x\"") != NULL);
        CHECK(access(out, F_OK) != 0);
    }
}

/* MXFP4 blocks and scales of a Hugging Face checkpoint (TBX_XF_MXFP4_HF): uint8 blocks
 * [MX_E, MX_R, MX_C, 16] and scales [MX_E, MX_R, MX_C]; each expert's even rows and odd rows
 * (step 2) and all its rows (step 0), as stored MXFP4 in a GGUF. The expected bytes are built
 * here from the definitions: HF's byte j holds values 2j (low nibble) and 2j + 1; ggml's
 * block_mxfp4 is the scale byte, then byte j = value j | value j + 16 << 4. */
enum { MX_E = 2, MX_R = 6, MX_C = 3 };
static float v_mxb(uint64_t i) { return (float)((i * 151 + 7) % 256); }
static float v_mxs(uint64_t i) { return (float)(110 + (i * 13) % 25); }
static const tin MX_IN[] = {{"b", TBX_DT_U8, 4, {MX_E, MX_R, MX_C}, v_mxb},
                            {"s", TBX_DT_U8, 3, {MX_E, MX_R, MX_C}, v_mxs}};
static int g_mx_bad;

static void add_src_mx(tbx_plan *p, uint64_t first, uint64_t rows, uint32_t step) {
    tbx_plan_src s;
    memset(&s, 0, sizeof s);
    s.tensor = idx("b");
    s.aux = idx("s");
    s.first = first;
    s.rows = rows;
    s.cols = MX_C;
    s.step = step;
    s.xform = TBX_XF_MXFP4_HF;
    if (g_build_st == TBX_OK) g_build_st = tbx_plan_add_src(p, &s, NULL);
}

static void plan_mx(tbx_plan *p, const tbx_file *in) {
    (void)in;
    const uint64_t half[3] = {MX_E, MX_R / 2, MX_C * 32}, all[3] = {MX_E, MX_R, MX_C * 32};
    if (g_mx_bad) { /* one row past the blocks' end */
        add_out(p, "x", TBX_DT_MXFP4, 3, half, TBX_PENC_STORED, 0);
        for (uint64_t x = 0; x < MX_E; x++)
            add_src_mx(p, x * MX_R * MX_C + (x + 1 == MX_E ? 2 * MX_C : MX_C), MX_R / 2, 2);
        return;
    }
    add_out(p, "even", TBX_DT_MXFP4, 3, half, TBX_PENC_STORED, 0);
    for (uint64_t x = 0; x < MX_E; x++) add_src_mx(p, x * MX_R * MX_C, MX_R / 2, 2);
    add_out(p, "odd", TBX_DT_MXFP4, 3, half, TBX_PENC_STORED, 0);
    for (uint64_t x = 0; x < MX_E; x++) add_src_mx(p, x * MX_R * MX_C + MX_C, MX_R / 2, 2);
    add_out(p, "all", TBX_DT_MXFP4, 3, all, TBX_PENC_STORED, 0);
    add_src_mx(p, 0, MX_E * MX_R, 0);
}

TBX_TEST(mxfp4_blocks_repacked_to_ggml) {
    char in[600], out[600];
    tmp(in, sizeof in, "mx.safetensors");
    tmp(out, sizeof out, "mx.gguf");
    uint8_t hb[MX_E * MX_R * MX_C * 16];
    for (size_t i = 0; i < sizeof hb; i++) hb[i] = (uint8_t)v_mxb(i);
    /* mx.safetensors' blocks tensor is [E, R, C, 16] */
    tin ins[2] = {MX_IN[0], MX_IN[1]};
    ins[0].ndim = 3;
    ins[0].shape[2] = MX_C * 16; /* the same bytes as [E, R, C, 16] (tin holds 3 dimensions) */
    write_input(in, ins, 2);
    for (int mapped = 0; mapped < 2; mapped++) {
        g_mx_bad = 0;
        run_opts ro = {0};
        ro.fmt = TBX_FORMAT_GGUF;
        ro.open_flags = mapped ? TBX_OPEN_MMAP : 0;
        tbx_error e;
        CHECK_OK(run(in, out, plan_mx, &ro, &e));
        static const char *const names[] = {"even", "odd", "all"};
        for (int k = 0; k < 3; k++) {
            size_t n = 0;
            uint8_t *got = read_bytes(out, names[k], &n);
            const uint64_t rows = k == 2 ? MX_R : MX_R / 2;
            CHECK(got != NULL && n == MX_E * rows * MX_C * 17);
            int same = got != NULL;
            for (uint64_t x = 0; same && x < MX_E; x++)
                for (uint64_t r = 0; r < rows; r++)
                    for (uint64_t b = 0; b < MX_C; b++) {
                        const uint64_t hr = k == 2 ? r : 2 * r + (uint64_t)k;
                        const uint64_t blk = (x * MX_R + hr) * MX_C + b;
                        const uint8_t *o = got + ((x * rows + r) * MX_C + b) * 17;
                        const uint8_t *q = hb + blk * 16;
                        same &= o[0] == (uint8_t)v_mxs(blk);
                        for (int j = 0; j < 16; j++) {
                            const int vj = (q[j / 2] >> (j % 2 ? 4 : 0)) & 15;
                            const int vk = (q[(j + 16) / 2] >> ((j + 16) % 2 ? 4 : 0)) & 15;
                            same &= o[1 + j] == (uint8_t)(vj | vk << 4);
                        }
                    }
            CHECK(same);
            free(got);
        }
    }
    /* a view past the blocks: refused before anything is written */
    g_mx_bad = 1;
    unlink(out);
    run_opts ro = {0};
    ro.fmt = TBX_FORMAT_GGUF;
    tbx_error e;
    CHECK_EQ(run(in, out, plan_mx, &ro, &e), TBX_E_INVALID_ARG);
    CHECK(strstr(e.message, "\"x\"") != NULL && strstr(e.message, "MXFP4") != NULL);
    CHECK(access(out, F_OK) != 0);
    g_mx_bad = 0;
}

TBX_TEST_MAIN()
