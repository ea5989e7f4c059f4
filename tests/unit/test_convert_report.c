/*
 * test_convert_report.c - what tbx_convert decides for each tensor and says it did (issue 19):
 *
 *  - tbx_convert_options.on_tensor reports every tensor once, in order, with the action, the
 *    dtypes and the reason, and the output holds what the report says;
 *  - quant_to on a tensor quantized to another type is refused naming it and its type, unless
 *    TBX_CONVERT_REQUANTIZE (then decoded and quantized again) or TBX_CONVERT_DEQUANTIZE;
 *  - cast_to and TBX_CONVERT_DEQUANTIZE apply to quantized tensors GGUF -> GGUF, the metadata
 *    keeps its types and general.file_type describes the output;
 *  - values beyond the target type's range are reported (TBX_CONVERT_WARN_*) and refused under
 *    TBX_CONVERT_STRICT;
 *  - an output that cannot be created fails before any work (tbx_writer_check).
 *
 * The input is a GGUF file written here with the writer; expected values are computed from the
 * bytes written (decoded with tbx_decode_f32, quantized with the scalar kernels, which
 * tests/python/test_quant_overflow.py and test_ggml_kernels.py compare with ggml and gguf-py).
 */
#define _GNU_SOURCE /* mkdtemp */
#include "tbx_test.h"
#include "tbx_test_dir.h"
#include "api.h"
#include "ggml.h"
#include "tensorbox.h"
#define TBX_EXPERIMENTAL 1 /* tbx_gguf_from_hf */
#include "tensorbox/gguf.h"

#include <dirent.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *tmp(char *buf, size_t cap, const char *name) {
    return tbx_test_dir_file(buf, cap, "tbx_test_convert_report", name);
}

/* Files in the test directory whose name contains `part` (temporary files left behind). */
static int count_files(const char *part) {
    DIR *d = opendir(tbx_test_dir_path("tbx_test_convert_report"));
    struct dirent *e;
    int n = 0;
    while (d && (e = readdir(d)) != NULL) n += strstr(e->d_name, part) != NULL;
    if (d) closedir(d);
    return n;
}

#define QROWS 4
#define QCOLS 64

/* The values of the input's tensors "q" (before q4_1) and "f". */
static float g_q[QROWS * QCOLS], g_f[2 * QCOLS], g_g[3 * 40];

static void add_t(tbx_writer *w, const char *name, tbx_dtype dt, uint32_t ndim,
                  const uint64_t *shape) {
    tbx_tensor_desc d = TBX_TENSOR_DESC_INIT;
    tbx_error e;
    d.name = name;
    d.dtype = dt;
    d.ndim = ndim;
    d.shape = shape;
    d.has_data = 1;
    if (tbx_writer_add_tensor(w, &d, NULL, &e) != TBX_OK) {
        fprintf(stderr, "add %s: %s\n", name, e.message);
        abort();
    }
}

static void add_meta(tbx_writer *w, const char *key, tbx_value *v) {
    tbx_error e;
    if (!v || tbx_writer_add_meta(w, key, strlen(key), v, &e) != TBX_OK) abort();
    tbx_value_free(v);
}

/* A GGUF with typed metadata (general.file_type 3 = mostly q4_1) and tensors:
 *   q [4, 64] q4_1   n [64] f32   i [4] i32   f [2, 64] f32 (f[0][5] = big)   g [3, 40] f32 */
static const char *make_input(char *path, size_t cap, float big) {
    tmp(path, cap, "in.gguf");
    unlink(path);
    for (int k = 0; k < QROWS * QCOLS; k++) g_q[k] = sinf((float)k * 0.37f) * 0.5f;
    for (int k = 0; k < 2 * QCOLS; k++) g_f[k] = cosf((float)k * 0.11f);
    for (int k = 0; k < 3 * 40; k++) g_g[k] = (float)(k % 7) - 3.0f;
    g_f[5] = big;
    tbx_write_options wo;
    tbx_write_options_init(&wo);
    wo.format = TBX_FORMAT_GGUF;
    tbx_writer *w = NULL;
    tbx_error e;
    if (tbx_writer_open(&w, path, &wo, &e) != TBX_OK) abort();
    add_meta(w, "general.architecture", tbx_value_new_string("test", 4));
    add_meta(w, "general.file_type", tbx_value_new_uint(TBX_V_U32, 3));
    add_meta(w, "test.context_length", tbx_value_new_uint(TBX_V_U32, 2048));
    add_meta(w, "test.rope.freq_base", tbx_value_new_float(TBX_V_F32, 10000.0));
    const uint64_t sq[2] = {QROWS, QCOLS}, sn[1] = {QCOLS}, si[1] = {4}, sf[2] = {2, QCOLS},
                   sg[2] = {3, 40};
    add_t(w, "q", TBX_DT_Q4_1, 2, sq);
    add_t(w, "n", TBX_DT_F32, 1, sn);
    add_t(w, "i", TBX_DT_I32, 1, si);
    add_t(w, "f", TBX_DT_F32, 2, sf);
    add_t(w, "g", TBX_DT_F32, 2, sg);
    uint8_t q41[QROWS * QCOLS / 32 * 20];
    tbx_ggml_quant_scalar_for(TBX_DT_Q4_1)(g_q, q41, QROWS * QCOLS / 32);
    float n[QCOLS];
    for (int k = 0; k < QCOLS; k++) n[k] = 1.0f + (float)k / 64.0f;
    const int32_t iv[4] = {1, -2, 3, -4};
    if (tbx_writer_write_tensor(w, 0, q41, sizeof q41, &e) != TBX_OK ||
        tbx_writer_write_tensor(w, 1, n, sizeof n, &e) != TBX_OK ||
        tbx_writer_write_tensor(w, 2, iv, sizeof iv, &e) != TBX_OK ||
        tbx_writer_write_tensor(w, 3, g_f, sizeof g_f, &e) != TBX_OK ||
        tbx_writer_write_tensor(w, 4, g_g, sizeof g_g, &e) != TBX_OK ||
        tbx_writer_finish(w, &e) != TBX_OK)
        abort();
    return path;
}

/* The reports of one conversion (names copied: the pointers live during the call only). */
typedef struct rec {
    int n;
    struct {
        char name[16], reason[200];
        tbx_dtype from, to;
        tbx_convert_action action;
        uint32_t warnings;
        uint64_t tensor, nvalues, nonfinite, beyond;
        double range, max_abs;
    } r[8];
} rec;

static void on_tensor(void *ud, const tbx_convert_report *r) {
    rec *c = ud;
    if (c->n >= 8 || r->struct_size < sizeof *r) abort();
    snprintf(c->r[c->n].name, sizeof c->r[c->n].name, "%s", r->name);
    snprintf(c->r[c->n].reason, sizeof c->r[c->n].reason, "%s", r->reason);
    c->r[c->n].from = r->from;
    c->r[c->n].to = r->to;
    c->r[c->n].action = r->action;
    c->r[c->n].warnings = r->warnings;
    c->r[c->n].tensor = r->tensor;
    c->r[c->n].nvalues = r->nvalues;
    c->r[c->n].nonfinite = r->nonfinite;
    c->r[c->n].beyond = r->beyond;
    c->r[c->n].range = r->range;
    c->r[c->n].max_abs = r->max_abs;
    c->n++;
}

static tbx_status convert(const char *in, const char *out, tbx_dtype quant, tbx_dtype cast,
                          uint32_t flags, rec *c, tbx_error *e) {
    tbx_file *f = NULL;
    if (tbx_open_path(&f, in, NULL, e) != TBX_OK) abort();
    tbx_convert_options o;
    tbx_convert_options_init(&o);
    o.write.flags = TBX_WRITE_OVERWRITE;
    o.quant_to = quant;
    o.cast_to = cast;
    o.flags = flags;
    o.on_tensor = on_tensor;
    o.progress_ud = c;
    memset(c, 0, sizeof *c);
    tbx_status st = tbx_convert(f, out, &o, e);
    tbx_close(f);
    return st;
}

static tbx_dtype dtype_of(tbx_file *f, uint64_t i) {
    tbx_tensor_info ti = TBX_TENSOR_INFO_INIT;
    return tbx_tensor_info_get(f, i, &ti) == TBX_OK ? ti.dtype : TBX_DT_INVALID;
}

static int64_t meta_int(tbx_file *f, const char *key, tbx_value_type *type) {
    const tbx_value *v = tbx_meta_find(f, key);
    int64_t x = -1;
    if (type) *type = v ? tbx_value_type_of(v) : TBX_V_NULL;
    if (!v || tbx_value_get_i64(v, &x) != TBX_OK) return -1;
    return x;
}

/* The stored bytes of tensor i. */
static size_t tensor_bytes(tbx_file *f, uint64_t i, uint8_t *buf, size_t cap) {
    size_t need = 0;
    tbx_error e;
    if (tbx_tensor_read(f, i, buf, cap, &need, &e) != TBX_OK) return 0;
    return need;
}

TBX_TEST(requantizing_is_refused_naming_the_tensor_and_its_type) {
    char in[700], out[700];
    make_input(in, sizeof in, 0.25f);
    tmp(out, sizeof out, "refused.gguf");
    unlink(out);
    rec c;
    tbx_error e;
    CHECK_EQ(convert(in, out, TBX_DT_Q8_0, TBX_DT_INVALID, 0, &c, &e), TBX_E_LOSSY);
    CHECK(strstr(e.message, "\"q\"") != NULL);
    CHECK(strstr(e.message, "q4_1") != NULL);
    CHECK(strstr(e.message, "--requantize") != NULL);
    CHECK_EQ(c.n, 0);                       /* refused before anything was written */
    CHECK(access(out, F_OK) != 0);
    CHECK_EQ(count_files("tbx-tmp"), 0);
}

TBX_TEST(requantize_reports_every_tensor_and_the_output_agrees) {
    char in[700], out[700];
    make_input(in, sizeof in, 0.25f);
    tmp(out, sizeof out, "requant.gguf");
    rec c;
    tbx_error e;
    CHECK_OK(convert(in, out, TBX_DT_Q8_0, TBX_DT_INVALID, TBX_CONVERT_REQUANTIZE, &c, &e));
    CHECK_EQ(c.n, 5);
    const struct { const char *name; tbx_dtype from, to; tbx_convert_action a; const char *why; }
        want[5] = {
            {"q", TBX_DT_Q4_1, TBX_DT_Q8_0, TBX_CONVERT_REQUANTIZED, "requested type"},
            {"n", TBX_DT_F32, TBX_DT_F32, TBX_CONVERT_KEPT, "1-D, not 2-D"},
            {"i", TBX_DT_I32, TBX_DT_I32, TBX_CONVERT_KEPT, "1-D, not 2-D"},
            {"f", TBX_DT_F32, TBX_DT_Q8_0, TBX_CONVERT_QUANTIZED, "requested type"},
            {"g", TBX_DT_F32, TBX_DT_F16, TBX_CONVERT_FALLBACK,
             "rows of 40 values are not a multiple of q8_0's block of 32, nor of its "
             "fallback's: f16"},
        };
    tbx_file *f = NULL;
    CHECK_OK(tbx_open_path(&f, out, NULL, &e));
    if (!f) return;
    for (int k = 0; k < 5 && k < c.n; k++) {
        CHECK_STR(c.r[k].name, want[k].name);
        CHECK_EQ(c.r[k].tensor, k);
        CHECK_EQ(c.r[k].from, want[k].from);
        CHECK_EQ(c.r[k].to, want[k].to);
        CHECK_EQ(c.r[k].action, want[k].a);
        CHECK_STR(c.r[k].reason, want[k].why);
        CHECK_EQ(c.r[k].warnings, 0);
        CHECK_EQ(dtype_of(f, (uint64_t)k), want[k].to); /* the file holds what was reported */
    }
    /* q: its q4_1 values decoded, then quantized to q8_0 */
    float deq[QROWS * QCOLS];
    uint8_t q41[QROWS * QCOLS / 32 * 20], q8[QROWS * QCOLS / 32 * 34], got[2048];
    tbx_ggml_quant_scalar_for(TBX_DT_Q4_1)(g_q, q41, QROWS * QCOLS / 32);
    CHECK_OK(tbx_decode_f32(TBX_DT_Q4_1, q41, sizeof q41, QROWS * QCOLS, deq));
    tbx_ggml_quant_scalar_for(TBX_DT_Q8_0)(deq, q8, QROWS * QCOLS / 32);
    CHECK_EQ(tensor_bytes(f, 0, got, sizeof got), sizeof q8);
    CHECK(memcmp(got, q8, sizeof q8) == 0);
    CHECK_EQ(c.r[0].nvalues, QROWS * QCOLS);
    /* general.file_type says q8_0 (LLAMA_FTYPE_MOSTLY_Q8_0 = 7), a u32; others keep types */
    tbx_value_type t;
    CHECK_EQ(meta_int(f, "general.file_type", &t), 7);
    CHECK_EQ(t, TBX_V_U32);
    CHECK_EQ(meta_int(f, "test.context_length", &t), 2048);
    CHECK_EQ(t, TBX_V_U32);
    const tbx_value *fb = tbx_meta_find(f, "test.rope.freq_base");
    CHECK(fb && tbx_value_type_of(fb) == TBX_V_F32);
    tbx_close(f);
}

TBX_TEST(dequantize_and_cast_apply_gguf_to_gguf) {
    char in[700], out[700];
    make_input(in, sizeof in, 0.25f);
    tmp(out, sizeof out, "deq.gguf");
    uint8_t q41[QROWS * QCOLS / 32 * 20];
    float deq[QROWS * QCOLS];
    tbx_ggml_quant_scalar_for(TBX_DT_Q4_1)(g_q, q41, QROWS * QCOLS / 32);
    CHECK_OK(tbx_decode_f32(TBX_DT_Q4_1, q41, sizeof q41, QROWS * QCOLS, deq));
    rec c;
    tbx_error e;
    /* --dequantize: q becomes f32 (its decoded values); the rest is kept */
    CHECK_OK(convert(in, out, TBX_DT_INVALID, TBX_DT_INVALID, TBX_CONVERT_DEQUANTIZE, &c, &e));
    CHECK_EQ(c.n, 5);
    CHECK_EQ(c.r[0].action, TBX_CONVERT_DEQUANTIZED);
    CHECK_EQ(c.r[0].to, TBX_DT_F32);
    CHECK_STR(c.r[0].reason, "dequantizing requested");
    CHECK_EQ(c.r[3].action, TBX_CONVERT_KEPT);
    CHECK_STR(c.r[3].reason, "not quantized");
    tbx_file *f = NULL;
    uint8_t got[4096];
    CHECK_OK(tbx_open_path(&f, out, NULL, &e));
    if (!f) return;
    CHECK_EQ(dtype_of(f, 0), TBX_DT_F32);
    CHECK_EQ(tensor_bytes(f, 0, got, sizeof got), sizeof deq);
    CHECK(memcmp(got, deq, sizeof deq) == 0);
    CHECK_EQ(meta_int(f, "general.file_type", NULL), 0); /* every 2-D tensor f32: ALL_F32 */
    tbx_close(f);
    /* --cast f16: q decoded then cast, the 2-D float tensors cast; the 1-D one kept (f32 for
     * llama.cpp), the integer one kept */
    tmp(out, sizeof out, "f16.gguf");
    CHECK_OK(convert(in, out, TBX_DT_INVALID, TBX_DT_F16, 0, &c, &e));
    CHECK_EQ(c.n, 5);
    CHECK_EQ(c.r[0].action, TBX_CONVERT_DEQUANTIZED);
    CHECK_EQ(c.r[0].to, TBX_DT_F16);
    CHECK_EQ(c.r[1].action, TBX_CONVERT_KEPT);
    CHECK(strstr(c.r[1].reason, "1-D: a GGUF keeps it") == c.r[1].reason);
    CHECK_EQ(c.r[2].action, TBX_CONVERT_KEPT);
    CHECK_STR(c.r[2].reason, "not a float tensor");
    CHECK_EQ(c.r[3].action, TBX_CONVERT_CAST);
    CHECK_STR(c.r[3].reason, "requested");
    CHECK_OK(tbx_open_path(&f, out, NULL, &e));
    if (!f) return;
    const tbx_dtype want16[5] = {TBX_DT_F16, TBX_DT_F32, TBX_DT_I32, TBX_DT_F16, TBX_DT_F16};
    for (uint64_t k = 0; k < 5; k++) CHECK_EQ(dtype_of(f, k), want16[k]);
    uint16_t h[QROWS * QCOLS];
    for (int k = 0; k < QROWS * QCOLS; k++) h[k] = tbx_f32_to_f16(deq[k]);
    CHECK_EQ(tensor_bytes(f, 0, got, sizeof got), sizeof h);
    CHECK(memcmp(got, h, sizeof h) == 0);
    CHECK_EQ(meta_int(f, "general.file_type", NULL), 1); /* MOSTLY_F16 */
    tbx_close(f);
}

TBX_TEST(a_conversion_that_changes_nothing_says_so_and_keeps_the_bytes) {
    char in[700], out[700];
    make_input(in, sizeof in, 0.25f);
    tmp(out, sizeof out, "same.gguf");
    rec c;
    tbx_error e;
    CHECK_OK(convert(in, out, TBX_DT_INVALID, TBX_DT_INVALID, 0, &c, &e));
    CHECK_EQ(c.n, 5);
    for (int k = 0; k < c.n; k++) {
        CHECK_EQ(c.r[k].action, TBX_CONVERT_KEPT);
        CHECK_STR(c.r[k].reason, "");
        CHECK_EQ(c.r[k].nvalues, 0);
    }
    /* the same file, byte for byte (general.file_type untouched) */
    FILE *a = fopen(in, "rb"), *b = fopen(out, "rb");
    CHECK(a && b);
    int same = a && b;
    while (same) {
        int x = fgetc(a), y = fgetc(b);
        if (x != y) same = 0;
        if (x == EOF || y == EOF) break;
    }
    CHECK(same);
    if (a) fclose(a);
    if (b) fclose(b);
    /* an already-q4_1 tensor under quant_to q4_1 is kept, bytes and all */
    CHECK_OK(convert(in, out, TBX_DT_Q4_1, TBX_DT_INVALID, 0, &c, &e));
    CHECK_EQ(c.r[0].action, TBX_CONVERT_KEPT);
    CHECK_STR(c.r[0].reason, "already q4_1");
}

TBX_TEST(values_beyond_the_type_are_reported_and_refused_when_strict) {
    char in[700], out[700];
    make_input(in, sizeof in, 3.4e38f);
    tmp(out, sizeof out, "big.gguf");
    rec c;
    tbx_error e;
    CHECK_OK(convert(in, out, TBX_DT_Q4_0, TBX_DT_INVALID, TBX_CONVERT_REQUANTIZE, &c, &e));
    CHECK_EQ(c.n, 5);
    CHECK_STR(c.r[3].name, "f");
    CHECK_EQ(c.r[3].warnings, TBX_CONVERT_WARN_RANGE | TBX_CONVERT_WARN_NONFINITE);
    CHECK_EQ(c.r[3].beyond, 1);
    CHECK_EQ(c.r[3].nonfinite, 32);   /* ggml's q4_0: an Inf scale, the whole block Inf/NaN */
    CHECK(c.r[3].range == 8.0 * 65504.0);
    CHECK(c.r[3].max_abs == (double)3.4e38f);
    CHECK_EQ(c.r[0].warnings, 0);
    CHECK_EQ(c.r[4].warnings, 0);
    /* strict: reported, then refused; nothing written */
    tmp(out, sizeof out, "big_strict.gguf");
    unlink(out);
    CHECK_EQ(convert(in, out, TBX_DT_Q4_0, TBX_DT_INVALID,
                     TBX_CONVERT_REQUANTIZE | TBX_CONVERT_STRICT, &c, &e), TBX_E_LOSSY);
    CHECK(strstr(e.message, "\"f\"") != NULL);
    CHECK(strstr(e.message, "q4_0") != NULL);
    CHECK_EQ(c.n, 4);
    CHECK(access(out, F_OK) != 0);
    CHECK_EQ(count_files("tbx-tmp"), 0);
    /* a cast beyond f16's range: Inf from a finite value */
    tmp(out, sizeof out, "big16.gguf");
    CHECK_OK(convert(in, out, TBX_DT_INVALID, TBX_DT_F16, 0, &c, &e));
    CHECK_EQ(c.r[3].warnings, TBX_CONVERT_WARN_NONFINITE);
    CHECK_EQ(c.r[3].nonfinite, 1);
}

TBX_TEST(an_output_that_cannot_be_created_fails_before_any_work) {
    char in[700], out[700];
    make_input(in, sizeof in, 0.25f);
    tmp(out, sizeof out, "no/such/dir/out.gguf");
    rec c;
    tbx_error e;
    CHECK_EQ(convert(in, out, TBX_DT_Q8_0, TBX_DT_INVALID, TBX_CONVERT_REQUANTIZE, &c, &e),
             TBX_E_IO);
    CHECK_EQ(c.n, 0);
    CHECK(strstr(e.message, "no/such/dir") != NULL);
    tbx_write_options wo;
    tbx_write_options_init(&wo);
    CHECK_EQ(tbx_writer_check(out, &wo, &e), TBX_E_IO);
    /* an existing file without overwrite; with it, checked and left untouched */
    struct stat before, after;
    CHECK_EQ(stat(in, &before), 0);
    char other[700];
    tmp(other, sizeof other, "in2.gguf");
    FILE *fp = fopen(other, "wb");
    CHECK(fp != NULL);
    if (fp) { fputs("x", fp); fclose(fp); }
    CHECK_EQ(tbx_writer_check(other, &wo, &e), TBX_E_EXISTS);
    wo.flags = TBX_WRITE_OVERWRITE;
    CHECK_OK(tbx_writer_check(other, &wo, &e));
    CHECK_EQ(stat(other, &after), 0);
    CHECK_EQ(after.st_size, 1);
    CHECK_EQ(count_files("tbx-tmp"), 0);
    (void)before;
}

/* A Hugging Face directory whose config.json is broken: tbx_convert (and tbx_gguf_from_hf) to a
 * GGUF in a missing directory say so before they parse the model (they used to fail on the
 * JSON, after reading the tokenizer). */
TBX_TEST(a_hugging_face_conversion_checks_its_output_first) {
    char dir[700], p[760];
    tmp(dir, sizeof dir, "hf");
    mkdir(dir, 0755);
    snprintf(p, sizeof p, "%s/config.json", dir);
    FILE *fp = fopen(p, "wb");
    CHECK(fp != NULL);
    if (!fp) return;
    fputs("{\"model_type\": \"llama\", broken", fp);
    fclose(fp);
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    tbx_write_options wo;
    tbx_write_options_init(&wo);
    tbx_writer *w = NULL;
    tbx_error e;
    const uint64_t shape[2] = {4, 8};
    float z[32] = {0};
    tbx_tensor_desc d = TBX_TENSOR_DESC_INIT;
    d.name = "model.embed_tokens.weight";
    d.dtype = TBX_DT_F32;
    d.ndim = 2;
    d.shape = shape;
    d.has_data = 1;
    CHECK_OK(tbx_writer_open(&w, p, &wo, &e));
    CHECK_OK(tbx_writer_add_tensor(w, &d, NULL, &e));
    CHECK_OK(tbx_writer_write_tensor(w, 0, z, sizeof z, &e));
    CHECK_OK(tbx_writer_finish(w, &e));
    tbx_file *f = NULL;
    CHECK_OK(tbx_open_path(&f, dir, NULL, &e));
    if (!f) return;
    char out[760];
    tmp(out, sizeof out, "ok.gguf");
    tbx_convert_options o;
    tbx_convert_options_init(&o);
    CHECK_EQ(tbx_convert(f, out, &o, &e), TBX_E_FORMAT); /* the broken config.json */
    tmp(out, sizeof out, "missing/out.gguf");
    CHECK_EQ(tbx_convert(f, out, &o, &e), TBX_E_IO);
    CHECK(strstr(e.message, "missing") != NULL);
    tbx_gguf_hf_options ho;
    tbx_gguf_hf_options_init(&ho);
    CHECK_EQ(tbx_gguf_from_hf(f, out, &ho, &e), TBX_E_IO);
    tbx_close(f);
}

TBX_TEST_MAIN()
