/*
 * test_embd.c - the EMBD driver through the public API (tensorbox.h, tensorbox/embd.h):
 * the legacy fixture made by cpp_embedder's own converter (tests/data/embd) and its vocabulary
 * against vocab.txt; legacy -> EMBD with the required metadata completed; the Hugging Face
 * mapping from sections (config.json, tokenizer.json, pooling config); tensors written out of
 * file order (the CRCs read back); the writer's refusals; the extras' argument checks. The
 * hostile-file tables and the byte-level checks against an independent builder are in
 * tests/python/test_embd_*.py. tbx_convert with extra metadata (tbx_convert_options.meta, `tbx
 * convert --meta`) on the legacy fixture. Reads of one handle from several threads
 * (TBX_TEST_LABEL_THREADS: also run under ThreadSanitizer by `make tsan`).
 */
#define _POSIX_C_SOURCE 200809L /* setenv, unsetenv, pthread_barrier_t */
#include "embd_int.h" /* em_crc32_combine (internal), tensorbox/embd.h */
#include "tbx_test.h"

#include <pthread.h>
#include <stdint.h>
#include <sys/stat.h>

static char g_src[1024];
static const char *data_path(const char *rel) {
    const char *root = getenv("TBX_SOURCE_DIR");
    snprintf(g_src, sizeof g_src, "%s/tests/data/embd/%s", root && *root ? root : ".", rel);
    return g_src;
}

static tbx_file *open_file(const char *path, uint32_t flags) {
    tbx_open_options o;
    tbx_open_options_init(&o);
    o.flags = flags;
    tbx_file *f = NULL;
    tbx_error e;
    tbx_status st = tbx_open_path(&f, path, &o, &e);
    if (st != TBX_OK) fprintf(stderr, "open %s: %s\n", path, e.message);
    return f;
}

/* The lines of tests/data/embd/vocab.txt (the vocabulary given to the origin's converter). */
static char **read_lines(const char *path, size_t *n) {
    size_t len = 0;
    char *all = (char *)tbx_test_slurp(path, &len);
    *n = 0;
    if (!all) return NULL;
    char **lines = calloc(len + 1, sizeof *lines);
    char *p = all;
    while (p < all + len) {
        char *nl = memchr(p, '\n', (size_t)(all + len - p));
        if (!nl) nl = all + len;
        *nl = 0;
        lines[(*n)++] = p;
        p = nl + 1;
    }
    return lines;
}

static size_t line_index(char **lines, size_t n, const char *s) {
    for (size_t i = 0; i < n; i++)
        if (strcmp(lines[i], s) == 0) return i;
    return (size_t)-1;
}

static int meta_is(const tbx_file *f, const char *key, const char *want) {
    size_t len = 0;
    const char *s = tbx_value_get_str(tbx_meta_find(f, key), &len);
    if (!s || len != strlen(want) || memcmp(s, want, len) != 0) {
        fprintf(stderr, "metadata %s = %.*s, expected %s\n", key, s ? (int)len : 6,
                s ? s : "(none)", want);
        return 0;
    }
    return 1;
}

static uint8_t *read_tensor(tbx_file *f, const char *name, size_t *n) {
    uint64_t i;
    *n = 0;
    if (tbx_tensor_find(f, name, &i) != TBX_OK) return NULL;
    size_t need = 0;
    tbx_error e;
    tbx_tensor_read(f, i, NULL, 0, &need, &e);
    uint8_t *buf = malloc(need ? need : 1);
    if (tbx_tensor_read(f, i, buf, need, n, &e) != TBX_OK) { free(buf); return NULL; }
    return buf;
}

TBX_TEST(legacy_fixture_vocabulary) {
    tbx_file *f = open_file(data_path("tiny-legacy.bin"), 0);
    CHECK(f != NULL);
    if (!f) return;
    CHECK_EQ(tbx_file_format(f), TBX_FORMAT_EMBD_LEGACY);
    size_t n = 0;
    char **lines = read_lines(data_path("vocab.txt"), &n);
    CHECK(lines != NULL && n == 16);
    CHECK_EQ(tbx_embd_vocab_count(f), n);
    for (size_t i = 0; lines && i < n; i++) {
        const char *p = NULL;
        size_t len = 0;
        CHECK_OK(tbx_embd_token(f, i, &p, &len));
        CHECK(len == strlen(lines[i]) && memcmp(p, lines[i], len) == 0);
    }
    tbx_embd_special sp = TBX_EMBD_SPECIAL_INIT;
    CHECK_OK(tbx_embd_special_get(f, &sp));
    CHECK_EQ(sp.pad_id, line_index(lines, n, "[PAD]"));
    CHECK_EQ(sp.unk_id, line_index(lines, n, "[UNK]"));
    CHECK_EQ(sp.cls_id, line_index(lines, n, "[CLS]"));
    CHECK_EQ(sp.sep_id, line_index(lines, n, "[SEP]"));
    CHECK_EQ(sp.mask_id, line_index(lines, n, "[MASK]"));
    tbx_embd_header h = TBX_EMBD_HEADER_INIT;
    CHECK_EQ(tbx_embd_header_get(f, &h), TBX_E_INVALID_ARG); /* no such header */
    CHECK_EQ(tbx_section_count(f), 1);
    tbx_section_info si = TBX_SECTION_INFO_INIT;
    CHECK_OK(tbx_section_info_get(f, 0, &si));
    CHECK_STR(si.name, "vocab");
    CHECK_EQ(si.type, 2);
    if (lines) free(lines[0]);
    free(lines);
    tbx_close(f);
}

/* An EMBD writer on `out`, replacing it. */
static tbx_status open_embd_writer(tbx_writer **w, const char *out, tbx_error *e) {
    tbx_write_options wo;
    tbx_write_options_init(&wo);
    wo.format = TBX_FORMAT_EMBD;
    wo.flags = TBX_WRITE_OVERWRITE;
    return tbx_writer_open(w, out, &wo, e);
}

/* Copies a legacy file into an EMBD writer: its vocabulary section, the given metadata, every
 * tensor (in reverse order when `reverse`). Returns the finish status. */
static tbx_status legacy_to_embd(const char *out, const char *const *meta, int reverse,
                                 tbx_error *e) {
    tbx_file *in = open_file(data_path("tiny-legacy.bin"), 0);
    if (!in) return TBX_E_IO;
    tbx_writer *w = NULL;
    tbx_status st = open_embd_writer(&w, out, e);
    if (st != TBX_OK) { tbx_close(in); return st; }
    for (size_t i = 0; meta && meta[i]; i += 2) {
        tbx_value *v = tbx_value_new_string(meta[i + 1], strlen(meta[i + 1]));
        st = tbx_writer_add_meta(w, meta[i], strlen(meta[i]), v, e);
        tbx_value_free(v);
        if (st != TBX_OK) goto fail;
    }
    size_t need = 0, got = 0;
    tbx_section_read(in, 0, NULL, 0, &need, e);
    uint8_t *sec = malloc(need);
    st = tbx_section_read(in, 0, sec, need, &got, e);
    if (st == TBX_OK) st = tbx_writer_add_section(w, "vocab", 2, sec, got, e);
    free(sec);
    uint64_t nt = tbx_tensor_count(in);
    for (uint64_t i = 0; st == TBX_OK && i < nt; i++) {
        tbx_tensor_info ti = TBX_TENSOR_INFO_INIT;
        tbx_tensor_info_get(in, i, &ti);
        tbx_tensor_desc d = TBX_TENSOR_DESC_INIT;
        d.name = ti.name;
        d.name_len = ti.name_len;
        d.dtype = ti.dtype;
        d.ndim = ti.ndim;
        d.shape = ti.shape;
        d.has_data = 1;
        st = tbx_writer_add_tensor(w, &d, NULL, e);
    }
    for (uint64_t k = 0; st == TBX_OK && k < nt; k++) {
        uint64_t i = reverse ? nt - 1 - k : k;
        tbx_tensor_info ti = TBX_TENSOR_INFO_INIT;
        tbx_tensor_info_get(in, i, &ti);
        size_t n = 0;
        uint8_t *buf = read_tensor(in, ti.name, &n);
        st = buf ? tbx_writer_write_tensor(w, i, buf, n, e) : TBX_E_IO;
        free(buf);
    }
    if (st != TBX_OK) goto fail;
    st = tbx_writer_finish(w, e);
    tbx_close(in);
    return st;
fail:
    tbx_writer_abort(w);
    tbx_close(in);
    return st;
}

static const char *const META3[] = {"model_name", "tiny-random-bert", "model_version", "0.1",
                                    "num_attention_heads", "2", NULL};

static uint64_t count_problems(const char *path) {
    uint64_t n = UINT64_MAX;
    tbx_validate_path(path, NULL, NULL, NULL, &n);
    return n;
}

TBX_TEST(legacy_to_embd_completes_metadata) {
    char out[512];
    tbx_test_tmppath(out, sizeof out, "embd_legacy_%d.weights", (int)getpid());
    setenv("SOURCE_DATE_EPOCH", "86400", 1);
    tbx_error e;
    tbx_status st = legacy_to_embd(out, META3, 0, &e);
    unsetenv("SOURCE_DATE_EPOCH");
    CHECK_OK(st);
    if (st != TBX_OK) { fprintf(stderr, "%s\n", e.message); return; }
    CHECK_EQ(count_problems(out), 0);
    tbx_file *f = open_file(out, TBX_OPEN_VERIFY_DIGESTS);
    tbx_file *in = open_file(data_path("tiny-legacy.bin"), 0);
    CHECK(f && in);
    if (!f || !in) { tbx_close(f); tbx_close(in); return; }
    CHECK_EQ(tbx_file_format(f), TBX_FORMAT_EMBD);
    /* given, then derived from the vocabulary and the tensors (hidden 8, 6 layers, FFN 12,
     * 10 positions), created_at from SOURCE_DATE_EPOCH */
    CHECK(meta_is(f, "model_name", "tiny-random-bert"));
    CHECK(meta_is(f, "vocab_size", "16"));
    CHECK(meta_is(f, "hidden_size", "8"));
    CHECK(meta_is(f, "embedding_dim", "8"));
    CHECK(meta_is(f, "num_layers", "6"));
    CHECK(meta_is(f, "intermediate_size", "12"));
    CHECK(meta_is(f, "max_position_emb", "10"));
    CHECK(meta_is(f, "created_at", "1970-01-02T00:00:00Z"));
    CHECK_EQ(tbx_tensor_count(f), tbx_tensor_count(in));
    for (uint64_t i = 0; i < tbx_tensor_count(in); i++) {
        tbx_tensor_info a = TBX_TENSOR_INFO_INIT, b = TBX_TENSOR_INFO_INIT;
        tbx_tensor_info_get(in, i, &a);
        tbx_tensor_info_get(f, i, &b);
        CHECK_STR(b.name, a.name);
        CHECK(a.ndim == b.ndim && memcmp(a.shape, b.shape, a.ndim * sizeof *a.shape) == 0);
        CHECK_EQ(b.offset % 64, 0);
        size_t na, nb;
        uint8_t *pa = read_tensor(in, a.name, &na), *pb = read_tensor(f, a.name, &nb);
        CHECK(pa && pb && na == nb && memcmp(pa, pb, na) == 0);
        free(pa);
        free(pb);
    }
    CHECK_EQ(tbx_embd_vocab_count(f), 16);
    tbx_embd_special sp = TBX_EMBD_SPECIAL_INIT;
    CHECK_OK(tbx_embd_special_get(f, &sp));
    CHECK(sp.pad_id == 0 && sp.unk_id == 2 && sp.cls_id == 3 && sp.sep_id == 4 && sp.mask_id == 5);
    tbx_close(f);
    tbx_close(in);

    /* tensors handed over in reverse order: the same bytes (the CRCs come from reading back) */
    char out2[512];
    tbx_test_tmppath(out2, sizeof out2, "embd_legacy_rev_%d.weights", (int)getpid());
    setenv("SOURCE_DATE_EPOCH", "86400", 1);
    st = legacy_to_embd(out2, META3, 1, &e);
    unsetenv("SOURCE_DATE_EPOCH");
    CHECK_OK(st);
    size_t n1 = 0, n2 = 0;
    uint8_t *b1 = tbx_test_slurp(out, &n1), *b2 = tbx_test_slurp(out2, &n2);
    CHECK(b1 && b2 && n1 == n2 && memcmp(b1, b2, n1) == 0);
    free(b1);
    free(b2);
    unlink(out);
    unlink(out2);
}

TBX_TEST(missing_required_metadata_refused) {
    char out[512];
    tbx_test_tmppath(out, sizeof out, "embd_missing_%d.weights", (int)getpid());
    unlink(out);
    static const char *const meta[] = {"model_version", "0.1", "num_attention_heads", "2", NULL};
    tbx_error e;
    CHECK_EQ(legacy_to_embd(out, meta, 0, &e), TBX_E_FORMAT);
    CHECK(strstr(e.message, "model_name") != NULL);
    struct stat sb;
    CHECK(stat(out, &sb) != 0); /* nothing left behind */
}

static int write_text(const char *dir, const char *rel, const char *text) {
    char p[700];
    snprintf(p, sizeof p, "%s/%s", dir, rel);
    FILE *f = fopen(p, "wb");
    if (!f) return -1;
    size_t n = fwrite(text, 1, strlen(text), f);
    return fclose(f) == 0 && n == strlen(text) ? 0 : -1;
}

static void remove_tree(const char *dir) {
    static const char *const rel[] = {"config.json", "1_Pooling/config.json", "tokenizer.json",
                                      "model.safetensors", "1_Pooling", NULL};
    char p[700];
    for (size_t i = 0; rel[i]; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, rel[i]);
        remove(p);
    }
    rmdir(dir);
}

/* A small Hugging Face model directory converted by tbx_convert (src/models' import): names
 * mapped, buffers and tensors outside EMBD's table left out, vocabulary from tokenizer.json (an
 * added token included), metadata from config.json and the pooling config. The writer itself
 * refuses the directory's files handed over as sections, naming the import. */
TBX_TEST(hugging_face_sections) {
    static const char cfg[] =
        "{\"_name_or_path\": \"tiny/hf\", \"hidden_size\": 4, \"num_hidden_layers\": 1, "
        "\"num_attention_heads\": 2, \"intermediate_size\": 6, \"max_position_embeddings\": 9}";
    static const char pool[] = "{\"word_embedding_dimension\": 4, \"pooling_mode_mean_tokens\": true}";
    static const char tok[] =
        "{\"added_tokens\": [{\"id\": 6, \"content\": \"<extra>\"}, {\"id\": 0, \"content\": "
        "\"[PAD]\"}], \"model\": {\"type\": \"WordPiece\", \"vocab\": {\"[UNK]\": 1, \"[CLS]\": 2, "
        "\"[PAD]\": 0, \"[SEP]\": 3, \"[MASK]\": 4, \"##\\u00e9t\\u00e9\": 5}}}";
    char dir[512], out[600], st_path[700], sub[600];
    tbx_writer *w = NULL;
    tbx_error e;
    /* the writer alone: a Hugging Face file is no section of EMBD's */
    tbx_test_tmppath(out, sizeof out, "embd_hf_%d.weights", (int)getpid());
    CHECK_OK(open_embd_writer(&w, out, &e));
    if (!w) return;
    CHECK_EQ(tbx_writer_add_section(w, "config.json", 0, cfg, strlen(cfg), &e), TBX_E_LOSSY);
    CHECK(strstr(e.message, "a conversion of the directory imports them") != NULL);
    CHECK_EQ(tbx_writer_add_section(w, "tokenizer.json", 0, tok, strlen(tok), &e), TBX_E_LOSSY);
    CHECK_EQ(tbx_writer_add_section(w, "README.md", 0, "x", 1, &e), TBX_E_LOSSY);
    tbx_writer_abort(w);
    w = NULL;
    /* the directory, its model.safetensors written by tensorbox's safetensors writer */
    tbx_test_tmppath(dir, sizeof dir, "embd_hfdir_%d", (int)getpid());
    remove_tree(dir);
    CHECK(mkdir(dir, 0755) == 0);
    snprintf(sub, sizeof sub, "%s/1_Pooling", dir);
    CHECK(mkdir(sub, 0755) == 0);
    CHECK(write_text(dir, "config.json", cfg) == 0);
    CHECK(write_text(dir, "1_Pooling/config.json", pool) == 0);
    CHECK(write_text(dir, "tokenizer.json", tok) == 0);
    snprintf(st_path, sizeof st_path, "%s/model.safetensors", dir);
    tbx_write_options wo;
    tbx_write_options_init(&wo);
    wo.format = TBX_FORMAT_SAFETENSORS;
    CHECK_OK(tbx_writer_open(&w, st_path, &wo, &e));
    if (!w) { remove_tree(dir); return; }
    struct { const char *name; tbx_dtype dt; uint64_t shape[2]; uint32_t ndim; } t[] = {
        {"bert.embeddings.word_embeddings.weight", TBX_DT_F32, {7, 4}, 2},
        {"embeddings.position_ids", TBX_DT_I64, {1, 9}, 2},
        {"bert.encoder.layer.0.attention.output.LayerNorm.gamma", TBX_DT_F32, {4, 0}, 1},
        {"cls.predictions.bias", TBX_DT_F32, {7, 0}, 1},
        {"pooler.dense.bias", TBX_DT_F32, {4, 0}, 1},
    };
    float vals[64];
    for (int i = 0; i < 64; i++) vals[i] = (float)i * 0.5f - 3.0f;
    for (size_t i = 0; i < 5; i++) {
        tbx_tensor_desc d = TBX_TENSOR_DESC_INIT;
        d.name = t[i].name;
        d.dtype = t[i].dt;
        d.ndim = t[i].ndim;
        d.shape = t[i].shape;
        d.has_data = 1;
        CHECK_OK(tbx_writer_add_tensor(w, &d, NULL, &e));
    }
    for (size_t i = 0; i < 5; i++) {
        size_t n = (size_t)t[i].shape[0] * (t[i].ndim == 2 ? t[i].shape[1] : 1) *
                   (t[i].dt == TBX_DT_I64 ? 8 : 4);
        CHECK_OK(tbx_writer_write_tensor(w, i, vals, n, &e));
    }
    CHECK_OK(tbx_writer_finish(w, &e));
    tbx_file *in = open_file(dir, 0);
    CHECK(in != NULL);
    if (!in) { remove_tree(dir); return; }
    tbx_convert_options co;
    tbx_convert_options_init(&co);
    co.write.flags = TBX_WRITE_OVERWRITE;
    tbx_status st = tbx_convert(in, out, &co, &e);
    tbx_close(in);
    remove_tree(dir);
    CHECK_OK(st);
    if (st != TBX_OK) { fprintf(stderr, "%s\n", e.message); return; }
    CHECK_EQ(count_problems(out), 0);
    tbx_file *f = open_file(out, TBX_OPEN_VERIFY_DIGESTS);
    CHECK(f != NULL);
    if (!f) return;
    CHECK_EQ(tbx_tensor_count(f), 3);
    uint64_t i;
    CHECK_OK(tbx_tensor_find(f, "embeddings.word_embeddings.weight", &i));
    CHECK_OK(tbx_tensor_find(f, "encoder.layer.0.attention.output.LayerNorm.weight", &i));
    CHECK_OK(tbx_tensor_find(f, "pooler.dense.bias", &i));
    CHECK_EQ(tbx_tensor_find(f, "embeddings.position_ids", &i), TBX_E_NOT_FOUND);
    size_t n;
    uint8_t *b = read_tensor(f, "pooler.dense.bias", &n);
    CHECK(b && n == 16 && memcmp(b, vals, 16) == 0);
    free(b);
    CHECK(meta_is(f, "model_name", "tiny/hf"));
    CHECK(meta_is(f, "num_attention_heads", "2"));
    CHECK(meta_is(f, "intermediate_size", "6"));
    CHECK(meta_is(f, "max_position_emb", "9"));
    CHECK(meta_is(f, "vocab_size", "7"));
    CHECK_EQ(tbx_embd_vocab_count(f), 7);
    const char *p;
    size_t len;
    CHECK_OK(tbx_embd_token(f, 5, &p, &len));
    CHECK(len == 7 && memcmp(p, "##\xc3\xa9t\xc3\xa9", 7) == 0);
    CHECK_OK(tbx_embd_token(f, 6, &p, &len));
    CHECK(len == 7 && memcmp(p, "<extra>", 7) == 0);
    tbx_embd_special sp = TBX_EMBD_SPECIAL_INIT;
    CHECK_OK(tbx_embd_special_get(f, &sp));
    CHECK(sp.pad_id == 0 && sp.unk_id == 1 && sp.cls_id == 2 && sp.sep_id == 3 && sp.mask_id == 4);
    tbx_close(f);
    unlink(out);
}

TBX_TEST(writer_refusals) {
    char out[512];
    tbx_test_tmppath(out, sizeof out, "embd_refuse_%d.weights", (int)getpid());
    tbx_writer *w = NULL;
    tbx_error e;
    CHECK_OK(open_embd_writer(&w, out, &e));
    if (!w) return;
    uint64_t s5[5] = {1, 1, 1, 1, 2}, s1[1] = {2};
    tbx_tensor_desc d = TBX_TENSOR_DESC_INIT;
    d.name = "a";
    d.dtype = TBX_DT_I64;
    d.ndim = 1;
    d.shape = s1;
    d.has_data = 1;
    CHECK_EQ(tbx_writer_add_tensor(w, &d, NULL, &e), TBX_E_UNSUPPORTED);
    CHECK(strstr(e.message, "i64") != NULL);
    d.dtype = TBX_DT_F32;
    d.ndim = 5;
    d.shape = s5;
    CHECK_EQ(tbx_writer_add_tensor(w, &d, NULL, &e), TBX_E_UNSUPPORTED);
    d.ndim = 0;
    CHECK_EQ(tbx_writer_add_tensor(w, &d, NULL, &e), TBX_E_UNSUPPORTED);
    tbx_value *v = tbx_value_new_uint(TBX_V_U32, 5);
    CHECK_EQ(tbx_writer_add_meta(w, "n", 1, v, &e), TBX_E_LOSSY);
    tbx_value_free(v);
    CHECK_EQ(tbx_writer_add_section(w, "vocab", 4, "x", 1, &e), TBX_E_UNSUPPORTED);
    CHECK_OK(tbx_writer_add_section(w, "vocab", 1, "bad!", 4, &e)); /* parsed at layout */
    CHECK_EQ(tbx_writer_finish(w, &e), TBX_E_TRUNCATED);
    struct stat sb;
    CHECK(stat(out, &sb) != 0);
}

TBX_TEST(extras_argument_checks) {
    tbx_file *f = open_file(data_path("tiny-legacy.bin"), 0);
    CHECK(f != NULL);
    if (!f) return;
    CHECK_EQ(tbx_embd_token(f, 16, NULL, NULL), TBX_E_INVALID_ARG);
    CHECK_EQ(tbx_embd_token(NULL, 0, NULL, NULL), TBX_E_INVALID_ARG);
    tbx_embd_special sp = TBX_EMBD_SPECIAL_INIT;
    sp.struct_size = 4;
    CHECK_EQ(tbx_embd_special_get(f, &sp), TBX_E_INVALID_ARG);
    CHECK_EQ(tbx_embd_vocab_count(NULL), 0);
    tbx_embd_header h = TBX_EMBD_HEADER_INIT;
    CHECK_EQ(tbx_embd_header_get(NULL, &h), TBX_E_INVALID_ARG);
    tbx_close(f);
}

/* CRC(A||B) from CRC(A), CRC(B) and |B| equals libdeflate's CRC of the whole, for splits at
 * every position of a random buffer (and lengths past 2^32 reduce like any other). */
TBX_TEST(crc32_combine_matches_one_pass) {
    uint8_t buf[700];
    uint32_t x = 12345;
    for (size_t i = 0; i < sizeof buf; i++) { x = x * 1103515245u + 12345u; buf[i] = (uint8_t)(x >> 16); }
    uint32_t whole = em_crc32(0, buf, sizeof buf);
    int bad = 0;
    for (size_t k = 0; k <= sizeof buf; k++) {
        uint32_t a = em_crc32(0, buf, k), b = em_crc32(0, buf + k, sizeof buf - k);
        if (em_crc32_combine(a, b, sizeof buf - k) != whole) bad++;
    }
    CHECK_EQ(bad, 0);
    CHECK_EQ(em_crc32_combine(0x1234u, 0, 0), 0x1234u);
    /* zero bytes: CRC(A || 0^n) computed both ways, n around a page */
    static uint8_t z[5000];
    uint32_t a = em_crc32(0, buf, 10);
    uint32_t az = em_crc32(a, z, sizeof z);
    CHECK_EQ(em_crc32_combine(a, em_crc32(0, z, sizeof z), sizeof z), az);
}

/* em_crc32_split (the data and file checksums of the verification pass, hashed in slices on worker
 * threads) gives the one-pass CRC-32 for every length and thread count (more threads than
 * EM_CRC_JOBS or than bytes included), and the same verdict on a buffer with one bit flipped
 * right before, at or after every slice boundary. */
TBX_TEST(crc32_split_matches_one_pass) {
    const size_t cap = ((size_t)1 << 20) + 13;
    uint8_t *buf = malloc(cap);
    CHECK(buf != NULL);
    if (!buf) return;
    uint32_t x = 777;
    for (size_t i = 0; i < cap; i++) { x = x * 1103515245u + 12345u; buf[i] = (uint8_t)(x >> 16); }
    tbx_alloc al;
    tbx_alloc_init(&al, NULL);
    const size_t lens[] = {0, 1, 2, 3, 7, 8, 9, 15, 16, 17, 63, 64, 65, 4095, 4096, 4097,
                           65535, 65536, 65537, cap - 1, cap};
    int bad = 0, missed = 0;
    for (int nth = 1; nth <= EM_CRC_JOBS + 1; nth++) {
        for (size_t l = 0; l < sizeof lens / sizeof lens[0]; l++) {
            size_t n = lens[l];
            uint32_t want = em_crc32(0, buf, n);
            if (em_crc32_split(&al, buf, n, nth, 0) != want) bad++;
            if (em_crc32_split(&al, buf, n, nth, (uint64_t)n + 1) != want) bad++; /* serial */
            if (n < 2 || l % 4) continue;
            size_t per = n / (size_t)(nth > EM_CRC_JOBS ? EM_CRC_JOBS : nth);
            for (int i = 1; i <= EM_CRC_JOBS && per; i++) {
                for (int d = -1; d <= 1; d++) {
                    size_t at = per * (size_t)i + (size_t)d;
                    if (at >= n) continue;
                    buf[at] ^= (uint8_t)(1u << (at % 8));
                    uint32_t got = em_crc32_split(&al, buf, n, nth, 0);
                    if (got != em_crc32(0, buf, n)) bad++;
                    if (got == want) missed++;
                    buf[at] ^= (uint8_t)(1u << (at % 8));
                }
            }
        }
    }
    CHECK_EQ(bad, 0);
    CHECK_EQ(missed, 0);
    free(buf);
}

/* tbx_convert of the legacy fixture with the three keys it cannot derive given as
 * tbx_convert_options.meta (typed as a string; an input key is replaced): converts, and the
 * derived keys are those of the BertConfig the fixture was made from (tests/data/embd/README.md). */
TBX_TEST(convert_legacy_with_extra_meta) {
    char out[512];
    tbx_test_tmppath(out, sizeof out, "embd_convmeta_%d.weights", (int)getpid());
    unlink(out);
    tbx_file *in = open_file(data_path("tiny-legacy.bin"), 0);
    CHECK(in != NULL);
    if (!in) return;
    tbx_convert_options co;
    tbx_convert_options_init(&co);
    co.write.format = TBX_FORMAT_EMBD;
    co.write.flags = TBX_WRITE_OVERWRITE;
    tbx_error e;
    /* without the keys: every missing one named in one message */
    CHECK_EQ(tbx_convert(in, out, &co, &e), TBX_E_FORMAT);
    CHECK(strstr(e.message, "\"model_name\"") && strstr(e.message, "\"model_version\"") &&
          strstr(e.message, "\"num_attention_heads\""));
    CHECK(!strstr(e.message, "\"hidden_size\""));
    /* not a map: refused */
    tbx_value *bad = tbx_value_new_string("x", 1);
    co.meta = bad;
    CHECK_EQ(tbx_convert(in, out, &co, &e), TBX_E_INVALID_ARG);
    tbx_value_free(bad);
    tbx_value *m = tbx_value_new_map();
    for (size_t i = 0; META3[i]; i += 2)
        CHECK_OK(tbx_value_map_put(m, META3[i], strlen(META3[i]),
                                   tbx_value_new_string(META3[i + 1], strlen(META3[i + 1]))));
    co.meta = m;
    tbx_status st = tbx_convert(in, out, &co, &e);
    if (st != TBX_OK) fprintf(stderr, "convert: %s\n", e.message);
    CHECK_OK(st);
    tbx_close(in);
    tbx_file *f = open_file(out, TBX_OPEN_VERIFY_DIGESTS);
    CHECK(f != NULL);
    if (f) {
        CHECK(meta_is(f, "model_name", "tiny-random-bert"));
        CHECK(meta_is(f, "num_attention_heads", "2"));
        CHECK(meta_is(f, "hidden_size", "8"));
        CHECK(meta_is(f, "num_layers", "6"));
        CHECK(meta_is(f, "intermediate_size", "12"));
        CHECK(meta_is(f, "max_position_emb", "10"));
        CHECK(meta_is(f, "vocab_size", "16"));
        tbx_close(f);
    }
    CHECK_EQ(count_problems(out), 0);
    /* a typed value EMBD cannot store: refused naming the key */
    in = open_file(data_path("tiny-legacy.bin"), 0);
    CHECK_OK(tbx_value_map_put(m, "extra", 5, tbx_value_new_uint(TBX_V_U32, 7)));
    CHECK_EQ(tbx_convert(in, out, &co, &e), TBX_E_LOSSY);
    CHECK(strstr(e.message, "extra") != NULL);
    tbx_close(in);
    tbx_value_free(m);
    unlink(out);
}

/* Several threads reading one EMBD handle: each reads every tensor whole (tbx_tensor_read) and
 * as f32 in uneven chunks (tbx_tensor_read_f32), and compares with the legacy fixture's values
 * read on one thread (interop tests check those against the PyTorch originals). */
static tbx_status write_big(const char *out, tbx_error *e);

/* Threads released together at their first read of a pending (not yet verified) handle. */
typedef struct big_job {
    tbx_file *f;
    pthread_barrier_t *go;
    int k;
    int bad;
} big_job;

static void *big_worker(void *arg) {
    big_job *j = arg;
    static const uint64_t nel[3] = {256 * 1024, 100, 512 * 512};
    pthread_barrier_wait(j->go);
    for (int r = 0; r < 3; r++) {
        uint64_t i = (uint64_t)(j->k + r) % 3;
        float *v = malloc((size_t)nel[i] * sizeof *v);
        tbx_error e;
        size_t need = 0;
        tbx_status st = j->k == 3 ? tbx_tensor_read_f32(j->f, i, 0, nel[i], v, &e)
                                  : tbx_tensor_read(j->f, i, v, (size_t)nel[i] * 4, &need, &e);
        if (st != TBX_OK) j->bad++;
        for (uint64_t x = 0; st == TBX_OK && x < nel[i]; x++)
            if (v[x] != (float)(x % 1000) + (float)i) { j->bad++; break; }
        free(v);
    }
    return NULL;
}

typedef struct rd_job {
    tbx_file *f;
    float **want;       /* per tensor */
    uint64_t *nelems;
    uint64_t nt;
    int seed;
    int bad;            /* mismatches or errors seen (checked on the main thread) */
} rd_job;

static void *rd_worker(void *arg) {
    rd_job *j = arg;
    for (int rep = 0; rep < 20; rep++) {
        for (uint64_t k = 0; k < j->nt; k++) {
            uint64_t i = (k * 7 + (uint64_t)j->seed * 13 + (uint64_t)rep) % j->nt;
            uint64_t n = j->nelems[i];
            float *got = malloc((size_t)(n ? n : 1) * sizeof *got);
            tbx_error e;
            size_t need = 0;
            if (!got) { j->bad++; continue; }
            if (tbx_tensor_read(j->f, i, got, (size_t)n * 4, &need, &e) != TBX_OK ||
                memcmp(got, j->want[i], (size_t)n * 4) != 0)
                j->bad++;
            memset(got, 0, (size_t)n * 4);
            uint64_t step = (uint64_t)(j->seed + rep) % 5 + 3;
            for (uint64_t at = 0; at < n; at += step) {
                uint64_t c = n - at < step ? n - at : step;
                if (tbx_tensor_read_f32(j->f, i, at, c, got + at, &e) != TBX_OK) j->bad++;
            }
            if (memcmp(got, j->want[i], (size_t)n * 4) != 0) j->bad++;
            free(got);
        }
    }
    return NULL;
}

TBX_TEST(threads_share_one_handle) {
    char out[512];
    tbx_test_tmppath(out, sizeof out, "embd_threads_%d.weights", (int)getpid());
    tbx_error e;
    CHECK_OK(legacy_to_embd(out, META3, 0, &e));
    tbx_file *ref = open_file(data_path("tiny-legacy.bin"), 0);
    CHECK(ref != NULL);
    if (!ref) return;
    uint64_t nt = tbx_tensor_count(ref);
    float **want = calloc((size_t)nt, sizeof *want);
    uint64_t *nel = calloc((size_t)nt, sizeof *nel);
    static const uint32_t modes[] = {0, TBX_OPEN_VERIFY_DIGESTS, TBX_OPEN_MMAP,
                                     TBX_OPEN_MMAP | TBX_OPEN_VERIFY_DIGESTS};
    for (size_t m = 0; m < sizeof modes / sizeof *modes; m++) {
        tbx_file *f = open_file(out, modes[m]);
        CHECK(f != NULL);
        if (!f) continue;
        CHECK_EQ(tbx_tensor_count(f), nt);
        /* the same tensors in the same order (the writer keeps the declaration order) */
        for (uint64_t i = 0; i < nt && m == 0; i++) {
            tbx_tensor_info ti = TBX_TENSOR_INFO_INIT, tr = TBX_TENSOR_INFO_INIT;
            tbx_tensor_info_get(f, i, &ti);
            tbx_tensor_info_get(ref, i, &tr);
            CHECK_STR(ti.name, tr.name);
            nel[i] = tr.nelems;
            want[i] = malloc((size_t)(tr.nelems ? tr.nelems : 1) * sizeof(float));
            CHECK_OK(tbx_tensor_read_f32(ref, i, 0, tr.nelems, want[i], &e));
        }
        rd_job jobs[4];
        pthread_t th[4];
        for (int k = 0; k < 4; k++) {
            jobs[k] = (rd_job){f, want, nel, nt, k, 0};
            CHECK(pthread_create(&th[k], NULL, rd_worker, &jobs[k]) == 0);
        }
        /* meanwhile, tbx_read_batch of every tensor on 3 worker threads */
        tbx_read_req *rq = calloc((size_t)nt, sizeof *rq);
        for (uint64_t i = 0; i < nt; i++) {
            rq[i].struct_size = sizeof *rq;
            rq[i].tensor = i;
            rq[i].buf = malloc((size_t)(nel[i] ? nel[i] : 1) * 4);
            rq[i].cap = (size_t)nel[i] * 4;
        }
        CHECK_OK(tbx_read_batch(f, rq, (size_t)nt, 3, &e));
        for (uint64_t i = 0; i < nt; i++) {
            CHECK_OK(rq[i].status);
            CHECK(memcmp(rq[i].buf, want[i], (size_t)nel[i] * 4) == 0);
            free(rq[i].buf);
        }
        free(rq);
        for (int k = 0; k < 4; k++) {
            pthread_join(th[k], NULL);
            CHECK_EQ(jobs[k].bad, 0);
        }
        tbx_close(f);
    }
    for (uint64_t i = 0; i < nt; i++) free(want[i]);
    free(want);
    free(nel);
    tbx_close(ref);
    /* a 2 MiB file whose first reads (the verification pass of a buffered handle, deferred to
     * them) come from five threads at once: tensors whole, as f32, and a whole batch */
    CHECK_OK(write_big(out, &e));
    for (int rep = 0; rep < 4; rep++) {
        tbx_file *f = open_file(out, TBX_OPEN_VERIFY_DIGESTS);
        CHECK(f != NULL);
        if (!f) break;
        pthread_barrier_t go;
        pthread_barrier_init(&go, NULL, 5);
        big_job bj[4];
        pthread_t th[4];
        for (int k = 0; k < 4; k++) {
            bj[k] = (big_job){f, &go, k + rep, 0};
            CHECK(pthread_create(&th[k], NULL, big_worker, &bj[k]) == 0);
        }
        pthread_barrier_wait(&go);
        tbx_read_req rq[3];
        memset(rq, 0, sizeof rq);
        static const size_t nb[3] = {(size_t)1 << 20, 400, (size_t)1 << 20};
        for (int i = 0; i < 3; i++) {
            rq[i].struct_size = sizeof rq[i];
            rq[i].tensor = (uint64_t)i;
            rq[i].buf = malloc(nb[i]);
            rq[i].cap = nb[i];
        }
        CHECK_OK(tbx_read_batch(f, rq, 3, 2, &e));
        for (int i = 0; i < 3; i++) {
            CHECK_OK(rq[i].status);
            CHECK(((float *)rq[i].buf)[7] == 7.0f + (float)i);
            free(rq[i].buf);
        }
        for (int k = 0; k < 4; k++) {
            pthread_join(th[k], NULL);
            CHECK_EQ(bj[k].bad, 0);
        }
        pthread_barrier_destroy(&go);
        tbx_close(f);
    }
    unlink(out);
}

/* A file in memory served through a callback that counts the bytes it hands out. */
typedef struct cb_file {
    uint8_t *p;
    size_t n;
    uint64_t served;
} cb_file;

static tbx_status cb_read(void *ud, uint64_t off, void *buf, size_t len) {
    cb_file *c = ud;
    if (off > c->n || len > c->n - off) return TBX_E_IO;
    memcpy(buf, c->p + off, len);
    c->served += len;
    return TBX_OK;
}

static tbx_file *open_cb(cb_file *c, uint32_t flags, tbx_error *e) {
    tbx_open_options o;
    tbx_open_options_init(&o);
    o.flags = flags;
    tbx_file *f = NULL;
    if (tbx_open_callback(&f, cb_read, c, c->n, &o, e) != TBX_OK) return NULL;
    return f;
}

/* Every tensor of f through one tbx_read_batch; returns its status, the buffers freed. */
static tbx_status batch_all(tbx_file *f, uint32_t threads, tbx_status *each, tbx_error *e) {
    uint64_t nt = tbx_tensor_count(f);
    tbx_read_req *rq = calloc((size_t)nt, sizeof *rq);
    for (uint64_t i = 0; i < nt; i++) {
        tbx_tensor_info ti = TBX_TENSOR_INFO_INIT;
        tbx_tensor_info_get(f, i, &ti);
        rq[i].struct_size = sizeof *rq;
        rq[i].tensor = i;
        rq[i].cap = (size_t)ti.nbytes;
        rq[i].buf = malloc(rq[i].cap ? rq[i].cap : 1);
    }
    tbx_status st = tbx_read_batch(f, rq, (size_t)nt, threads, e);
    *each = TBX_OK;
    for (uint64_t i = 0; i < nt; i++) {
        if (rq[i].status != TBX_OK && *each == TBX_OK) *each = rq[i].status;
        if (rq[i].status == TBX_OK && *each != TBX_OK) *each = TBX_E_STATE; /* mixed */
        free(rq[i].buf);
    }
    free(rq);
    return st;
}

/* A plain EMBD tensor container of about 2 MiB: three f32 tensors of counting values. */
static tbx_status write_big(const char *out, tbx_error *e) {
    tbx_writer *w = NULL;
    tbx_status st = open_embd_writer(&w, out, e);
    if (st != TBX_OK) return st;
    static const uint64_t shapes[3][2] = {{256, 1024}, {100, 1}, {512, 512}};
    static const char *const names[3] = {"a", "b", "c"};
    for (int i = 0; i < 3 && st == TBX_OK; i++) {
        tbx_tensor_desc d = TBX_TENSOR_DESC_INIT;
        d.name = names[i];
        d.name_len = 1;
        d.dtype = TBX_DT_F32;
        d.ndim = 2;
        d.shape = shapes[i];
        d.has_data = 1;
        st = tbx_writer_add_tensor(w, &d, NULL, e);
    }
    for (int i = 0; i < 3 && st == TBX_OK; i++) {
        size_t ne = (size_t)(shapes[i][0] * shapes[i][1]);
        float *v = malloc(ne * sizeof *v);
        for (size_t k = 0; k < ne; k++) v[k] = (float)(k % 1000) + (float)i;
        st = tbx_writer_write_tensor(w, (uint64_t)i, v, ne * sizeof *v, e);
        free(v);
    }
    if (st == TBX_OK) return tbx_writer_finish(w, e);
    tbx_writer_abort(w);
    return st;
}

/* Reading a whole file verified on a buffered handle reads each data byte once: the data CRC is
 * computed over the bytes handed to the caller (tbx_read_batch), not in a pass of its own. */
TBX_TEST(verified_batch_reads_each_byte_once) {
    char out[512];
    tbx_test_tmppath(out, sizeof out, "embd_once_%d.weights", (int)getpid());
    tbx_error e;
    CHECK_OK(write_big(out, &e));
    cb_file c = {NULL, 0, 0};
    c.p = tbx_test_slurp(out, &c.n);
    CHECK(c.p != NULL);
    if (!c.p) return;
    tbx_embd_header h;
    memset(&h, 0, sizeof h);
    h.struct_size = sizeof h;
    tbx_file *f = open_cb(&c, TBX_OPEN_VERIFY_DIGESTS, &e);
    CHECK(f != NULL);
    if (!f) { free(c.p); return; }
    CHECK_OK(tbx_embd_header_get(f, &h));
    tbx_status each;
    CHECK_OK(batch_all(f, 1, &each, &e));
    CHECK_OK(each);
    /* the whole file once (what open reads ahead, and the prefix again for its CRC), never
     * the data region twice */
    if (getenv("EMBD_TEST_VERBOSE") || c.served >= (uint64_t)c.n + (1u << 20))
        fprintf(stderr, "served %llu bytes of a %zu-byte file\n", (unsigned long long)c.served,
                c.n);
    CHECK(h.tensor_data_size > (2u << 20));
    CHECK(c.served < (uint64_t)c.n + (1u << 20));
    CHECK(c.served >= (uint64_t)c.n - 16);
    /* a second batch: plain reads, verified already */
    uint64_t before = c.served;
    CHECK_OK(batch_all(f, 1, &each, &e));
    CHECK(c.served - before <= h.tensor_data_size);
    tbx_close(f);
    free(c.p);
    unlink(out);
}

/* With TBX_OPEN_VERIFY_DIGESTS no byte of a file whose checksums do not match is served, whatever
 * the handle and the read: one flipped bit in a tensor's data, or in the metadata (only
 * file_checksum covers it). */
TBX_TEST(verified_reads_never_serve_bad_bytes) {
    char out[512];
    tbx_test_tmppath(out, sizeof out, "embd_bad_%d.weights", (int)getpid());
    tbx_error e;
    CHECK_OK(legacy_to_embd(out, META3, 0, &e));
    size_t n = 0;
    uint8_t *good = tbx_test_slurp(out, &n);
    CHECK(good != NULL);
    if (!good) return;
    tbx_embd_header h;
    memset(&h, 0, sizeof h);
    h.struct_size = sizeof h;
    {
        cb_file c0 = {good, n, 0};
        tbx_file *f = open_cb(&c0, 0, &e);
        CHECK(f && tbx_embd_header_get(f, &h) == TBX_OK);
        tbx_close(f);
    }
    const uint64_t flips[2] = {h.tensor_data_offset + h.tensor_data_size - 3, /* last tensor */
                               h.metadata_offset + 12};                       /* a key byte */
    const char *field[2] = {"footer.data_checksum", "footer.file_checksum"};
    for (int k = 0; k < 2; k++) {
        uint8_t *bad = malloc(n);
        memcpy(bad, good, n);
        bad[flips[k]] ^= 0x10;
        cb_file c = {bad, n, 0};
        /* callback source, strict */
        tbx_file *f = open_cb(&c, TBX_OPEN_VERIFY_DIGESTS, &e);
        if (f) {
            float v[4];
            size_t need = 0;
            uint8_t *buf = malloc(1 << 16);
            CHECK_EQ(tbx_tensor_read(f, 0, buf, 1 << 16, &need, &e), TBX_E_CHECKSUM);
            CHECK_STR(e.field, field[k]);
            CHECK_EQ(tbx_tensor_read_f32(f, 1, 0, 1, v, &e), TBX_E_CHECKSUM);
            CHECK_EQ(tbx_tensor_read_range(f, 2, 0, buf, 4, &e), TBX_E_CHECKSUM);
            tbx_status each;
            tbx_status st = batch_all(f, 2, &each, &e);
            CHECK_EQ(st, TBX_E_CHECKSUM);
            CHECK_EQ(each, TBX_E_CHECKSUM);
            CHECK_EQ(tbx_validate(f, NULL, NULL, NULL), TBX_E_CHECKSUM);
            free(buf);
            tbx_close(f);
        } else {
            CHECK_EQ(e.code, TBX_E_CHECKSUM); /* failing at open serves nothing either */
        }
        /* pread and mapped handles of the same bytes */
        char bp[600];
        snprintf(bp, sizeof bp, "%s.bad", out);
        FILE *fp = fopen(bp, "wb");
        CHECK(fp && fwrite(bad, 1, n, fp) == n);
        if (fp) fclose(fp);
        static const uint32_t fl[2] = {TBX_OPEN_VERIFY_DIGESTS,
                                       TBX_OPEN_VERIFY_DIGESTS | TBX_OPEN_MMAP};
        for (int m = 0; m < 2; m++) {
            tbx_open_options o;
            tbx_open_options_init(&o);
            o.flags = fl[m];
            tbx_file *g = NULL;
            tbx_status st = tbx_open_path(&g, bp, &o, &e);
            if (st == TBX_OK) {
                tbx_status each;
                CHECK_EQ(batch_all(g, 2, &each, &e), TBX_E_CHECKSUM);
                CHECK_EQ(each, TBX_E_CHECKSUM);
                tbx_close(g);
            } else {
                CHECK_EQ(st, TBX_E_CHECKSUM);
            }
        }
        unlink(bp);
        free(bad);
    }
    free(good);
    unlink(out);
}

/* The legacy writer through the API, as no conversion drives it: the fixture's tensors declared
 * in reverse order, their bytes handed over in reverse order in 7-byte pieces, its vocabulary as
 * a legacy section. The bytes must be cpp_embedder's converter's (tiny-cpp.bin, checked against
 * the converter itself by tools/embd-legacy-fixtures): the writer puts the tensors back in the
 * converter's order and transposes the linear weights from pieces. Then the refusals that need
 * the API: a metadata entry (TBX_E_LOSSY), an alignment (TBX_E_UNSUPPORTED). */
TBX_TEST(legacy_writer_gives_the_converters_bytes) {
    tbx_file *in = open_file(data_path("tiny-legacy.bin"), 0);
    CHECK(in != NULL);
    if (!in) return;
    char out[512];
    tbx_test_tmppath(out, sizeof out, "embd_legacy_w_%d.bin", (int)getpid());
    tbx_write_options wo;
    tbx_write_options_init(&wo);
    wo.format = TBX_FORMAT_EMBD_LEGACY;
    wo.flags = TBX_WRITE_OVERWRITE;
    tbx_writer *w = NULL;
    tbx_error e;
    CHECK_OK(tbx_writer_open(&w, out, &wo, &e));
    tbx_value *v = tbx_value_new_string("x", 1);
    CHECK_EQ(tbx_writer_add_meta(w, "model_name", 10, v, &e), TBX_E_LOSSY);
    tbx_value_free(v);
    size_t need = 0, got = 0;
    tbx_section_read(in, 0, NULL, 0, &need, &e);
    uint8_t *sec = malloc(need);
    CHECK_OK(tbx_section_read(in, 0, sec, need, &got, &e));
    CHECK_OK(tbx_writer_add_section(w, "vocab", 2, sec, got, &e));
    free(sec);
    const uint64_t nt = tbx_tensor_count(in);
    CHECK_EQ(nt, 101);
    for (uint64_t k = 0; k < nt; k++) { /* writer tensor k is input tensor nt - 1 - k */
        tbx_tensor_info ti = TBX_TENSOR_INFO_INIT;
        tbx_tensor_info_get(in, nt - 1 - k, &ti);
        tbx_tensor_desc d = TBX_TENSOR_DESC_INIT;
        d.name = ti.name;
        d.name_len = ti.name_len;
        d.dtype = ti.dtype;
        d.ndim = ti.ndim;
        d.shape = ti.shape;
        d.has_data = 1;
        CHECK_OK(tbx_writer_add_tensor(w, &d, NULL, &e));
    }
    for (uint64_t k = 0; k < nt; k++) {
        tbx_tensor_info ti = TBX_TENSOR_INFO_INIT;
        tbx_tensor_info_get(in, k, &ti);
        size_t n = 0;
        uint8_t *buf = read_tensor(in, ti.name, &n);
        CHECK(buf != NULL);
        for (size_t at = 0; buf && at < n; at += 7)
            CHECK_OK(tbx_writer_write_tensor(w, nt - 1 - k, buf + at, n - at < 7 ? n - at : 7,
                                             &e));
        free(buf);
    }
    CHECK_OK(tbx_writer_finish(w, &e));
    size_t na = 0, nb = 0;
    uint8_t *a = tbx_test_slurp(out, &na);
    uint8_t *b = tbx_test_slurp(data_path("tiny-cpp.bin"), &nb);
    CHECK(a && b && na == nb && memcmp(a, b, na) == 0);
    free(a);
    free(b);
    tbx_close(in);

    /* an option the layout has no use for is refused when the writer opens, never ignored */
    wo.alignment = 64;
    CHECK_EQ(tbx_writer_open(&w, out, &wo, &e), TBX_E_UNSUPPORTED);
    CHECK(w == NULL && strstr(e.message, "alignment 64") != NULL && !strcmp(e.field, "alignment"));
    wo.alignment = 0;
    wo.compress_level = 3;
    CHECK_EQ(tbx_writer_open(&w, out, &wo, &e), TBX_E_UNSUPPORTED);
    CHECK(strstr(e.message, "compression level 3") != NULL);
    unlink(out);
}

TBX_TEST_MAIN()
