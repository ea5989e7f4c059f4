/*
 * test_gguf_hf_spm.c - the protobuf reader of SentencePiece's tokenizer.model (tbx_spm_parse):
 * a model written byte by byte here from the protobuf encoding rules (pieces with and without
 * score and type, fields of every wire type to skip), then a table of hostile inputs, each with
 * the status, field and byte offset it must fail with, then every truncation of the valid model.
 * Then a tiny llama directory with that tokenizer.model (plus added_tokens.json and
 * tokenizer_config.json's added_tokens_decoder) converted to GGUF: the vocabulary arrays as
 * llama.cpp's converter rules give them, and every allocation failure of the conversion clean.
 * (tests/python/test_hf_gguf_spm.py checks real sentencepiece models end to end in llama.cpp.)
 */
#define _GNU_SOURCE /* mkdtemp */
#include "api.h"
#include "spm.h"
#include "tbx_test.h"
#include "tensorbox.h"

#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ModelProto {
 *   pieces { piece: "<unk>" score: 0 type: UNKNOWN }        @0
 *   trainer_spec (field 2, bytes: skipped)                   @16
 *   pieces { piece: "\xe2\x96\x81a" score: -1.5 }            @21 (type absent: NORMAL)
 *   field 7 fixed64, field 8 varint, field 9 fixed32: skipped @34
 *   pieces { type: BYTE  piece: "<0x41>"  field 4 varint (skipped) }   @51
 * } */
static const uint8_t MODEL[] = {
    0x0a, 0x0e, /* pieces, 14 bytes */
    0x0a, 0x05, '<', 'u', 'n', 'k', '>', /* piece */
    0x15, 0x00, 0x00, 0x00, 0x00,        /* score 0 */
    0x18, 0x02,                          /* type UNKNOWN */
    0x12, 0x03, 0x08, 0x96, 0x01,        /* trainer_spec {1: 150} */
    0x0a, 0x0b, /* pieces, 11 bytes */
    0x0a, 0x04, 0xe2, 0x96, 0x81, 'a',   /* piece "▁a" */
    0x15, 0x00, 0x00, 0xc0, 0xbf,        /* score -1.5 */
    0x39, 1, 2, 3, 4, 5, 6, 7, 8,        /* field 7, fixed64 */
    0x40, 0xff, 0x01,                    /* field 8, varint */
    0x4d, 1, 2, 3, 4,                    /* field 9, fixed32 */
    0x0a, 0x0c, /* pieces, 12 bytes */
    0x18, 0x06,                          /* type BYTE */
    0x0a, 0x06, '<', '0', 'x', '4', '1', '>',
    0x20, 0x05,                          /* field 4, varint */
};

static tbx_alloc g_al;

static tbx_status parse(const uint8_t *b, size_t n, uint64_t max, tbx_spm_vocab *v, tbx_error *e) {
    tbx_alloc_init(&g_al, NULL);
    memset(e, 0, sizeof *e);
    return tbx_spm_parse(b, n, &g_al, max, v, e);
}

TBX_TEST(spm_parses_pieces_and_skips_the_rest) {
    /* the piece length bytes above are right (a broken fixture would prove nothing) */
    CHECK_EQ(sizeof MODEL, 65);
    tbx_spm_vocab v;
    tbx_error e;
    CHECK_OK(parse(MODEL, sizeof MODEL, 100, &v, &e));
    CHECK_EQ(v.n, 3);
    if (v.n != 3) return;
    CHECK(v.pieces[0].len == 5 && memcmp(v.pieces[0].text, "<unk>", 5) == 0);
    CHECK_EQ(v.pieces[0].type, TBX_SPM_UNKNOWN);
    CHECK(v.pieces[0].score == 0.0f);
    CHECK(v.pieces[1].len == 4 && memcmp(v.pieces[1].text, "\xe2\x96\x81" "a", 4) == 0);
    CHECK_EQ(v.pieces[1].type, TBX_SPM_NORMAL);
    CHECK(v.pieces[1].score == -1.5f);
    CHECK(v.pieces[2].len == 6 && memcmp(v.pieces[2].text, "<0x41>", 6) == 0);
    CHECK_EQ(v.pieces[2].type, TBX_SPM_BYTE);
    tbx_spm_free(&v, &g_al);
    CHECK(v.pieces == NULL && v.n == 0);
    tbx_spm_free(NULL, &g_al);
}

TBX_TEST(spm_piece_limit_checked_before_allocating) {
    tbx_spm_vocab v;
    tbx_error e;
    CHECK_EQ(parse(MODEL, sizeof MODEL, 2, &v, &e), TBX_E_LIMIT);
    CHECK_STR(e.field, "pieces");
    CHECK_EQ(e.offset, 51); /* the third piece's tag */
    CHECK(v.pieces == NULL);
}

typedef struct bad_case {
    const char *name;
    const uint8_t *bytes;
    size_t n;
    tbx_status code;
    const char *field;
    uint64_t offset;
} bad_case;

#define B(...) (const uint8_t[]){__VA_ARGS__}, sizeof((const uint8_t[]){__VA_ARGS__})

TBX_TEST(spm_hostile_inputs_fail_naming_field_and_offset) {
    static const uint8_t empty[1] = {0};
    const bad_case cases[] = {
        {"empty", empty, 0, TBX_E_FORMAT, "pieces", 0},
        {"only a spec", B(0x12, 0x01, 0x00), TBX_E_FORMAT, "pieces", 0},
        {"field number 0", B(0x02, 0x00), TBX_E_FORMAT, "ModelProto", 0},
        {"group wire type", B(0x13), TBX_E_FORMAT, "ModelProto", 0},
        {"wire type 7", B(0x17), TBX_E_FORMAT, "ModelProto", 0},
        {"pieces as varint", B(0x08, 0x01), TBX_E_FORMAT, "pieces", 0},
        {"varint 11 bytes", B(0x0a, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80,
                              0x00), TBX_E_FORMAT, "pieces", 1},
        {"varint past 64 bits", B(0x0a, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                                  0x02), TBX_E_FORMAT, "pieces", 1},
        {"varint cut", B(0x0a, 0x80), TBX_E_TRUNCATED, "pieces", 2},
        {"length past end", B(0x0a, 0x05, 0x0a, 0x01), TBX_E_TRUNCATED, "pieces", 2},
        {"huge length", B(0x0a, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f),
         TBX_E_TRUNCATED, "pieces", 10},
        {"skipped field past end", B(0x12, 0x09, 0x00), TBX_E_TRUNCATED, "ModelProto", 2},
        {"fixed64 cut", B(0x19, 1, 2, 3), TBX_E_TRUNCATED, "ModelProto", 1},
        {"piece text past its message", B(0x0a, 0x03, 0x0a, 0x05, 'a'),
         TBX_E_TRUNCATED, "pieces[0].piece", 4},
        {"score cut by its message", B(0x0a, 0x05, 0x0a, 0x01, 'a', 0x15, 0x00),
         TBX_E_TRUNCATED, "pieces[0].score", 6},
        {"piece text as varint", B(0x0a, 0x02, 0x08, 0x01), TBX_E_FORMAT, "pieces[0].piece", 2},
        {"score as varint", B(0x0a, 0x05, 0x0a, 0x01, 'a', 0x10, 0x01), TBX_E_FORMAT,
         "pieces[0].score", 5},
        {"type as fixed32", B(0x0a, 0x08, 0x0a, 0x01, 'a', 0x1d, 0, 0, 0, 0), TBX_E_FORMAT,
         "pieces[0].type", 5},
        {"type 0", B(0x0a, 0x05, 0x0a, 0x01, 'a', 0x18, 0x00), TBX_E_FORMAT, "pieces[0].type", 6},
        {"type 7", B(0x0a, 0x05, 0x0a, 0x01, 'a', 0x18, 0x07), TBX_E_FORMAT, "pieces[0].type", 6},
        {"NaN score", B(0x0a, 0x08, 0x0a, 0x01, 'a', 0x15, 0x00, 0x00, 0xc0, 0x7f), TBX_E_FORMAT,
         "pieces[0].score", 6},
        {"infinite score", B(0x0a, 0x08, 0x0a, 0x01, 'a', 0x15, 0x00, 0x00, 0x80, 0xff),
         TBX_E_FORMAT, "pieces[0].score", 6},
        {"no text", B(0x0a, 0x02, 0x18, 0x01), TBX_E_FORMAT, "pieces[0].piece", 2},
        {"empty text", B(0x0a, 0x02, 0x0a, 0x00), TBX_E_FORMAT, "pieces[0].piece", 2},
        {"bad UTF-8", B(0x0a, 0x04, 0x0a, 0x02, 'a', 0xc0), TBX_E_FORMAT, "pieces[0].piece", 5},
        {"second piece bad", B(0x0a, 0x03, 0x0a, 0x01, 'a', 0x0a, 0x03, 0x0a, 0x01, 0xff),
         TBX_E_FORMAT, "pieces[1].piece", 9},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const bad_case *c = &cases[i];
        tbx_spm_vocab v;
        tbx_error e;
        tbx_status st = parse(c->bytes, c->n, 100, &v, &e);
        if (st != c->code || strcmp(e.field, c->field) != 0 || e.offset != c->offset)
            fprintf(stderr, "case \"%s\": status %d field \"%s\" offset %llu (%s)\n", c->name,
                    (int)st, e.field, (unsigned long long)e.offset, e.message);
        CHECK_EQ(st, c->code);
        CHECK_STR(e.field, c->field);
        CHECK_EQ(e.offset, c->offset);
        CHECK(v.pieces == NULL && v.n == 0);
    }
}

/* Every prefix of the valid model: whole pieces parse (the prefix ends between fields), any
 * other cut fails as truncated; never a crash, a leak or a read past the prefix (ASan). */
TBX_TEST(spm_every_truncation) {
    size_t ok = 0;
    for (size_t n = 0; n < sizeof MODEL; n++) {
        uint8_t *copy = malloc(n ? n : 1); /* exactly n bytes: ASan sees any overread */
        memcpy(copy, MODEL, n);
        tbx_spm_vocab v;
        tbx_error e;
        tbx_status st = parse(copy, n, 100, &v, &e);
        if (st == TBX_OK) {
            ok++;
            CHECK(v.n >= 1 && v.n < 3);
            tbx_spm_free(&v, &g_al);
        } else {
            CHECK(st == TBX_E_TRUNCATED || (n == 0 && st == TBX_E_FORMAT));
            CHECK(e.field[0] != 0 && e.offset <= n);
        }
        free(copy);
    }
    CHECK_EQ(ok, 6); /* after each of the 6 top-level fields before the last piece */
}

/* ------------------------------------------------------------------------------------------ */
/* A tiny llama directory with MODEL as its tokenizer.model                                     */
/* ------------------------------------------------------------------------------------------ */
static char g_dir[512];
static char g_out[600];

static void rm_tmp(void) {
    static const char *files[] = {"config.json", "tokenizer.model", "tokenizer_config.json",
                                  "added_tokens.json", "model.safetensors", NULL};
    char p[800];
    for (int i = 0; files[i]; i++) {
        snprintf(p, sizeof p, "%s/%s", g_dir, files[i]);
        unlink(p);
    }
    rmdir(g_dir);
    unlink(g_out);
}

static void write_bytes(const char *name, const void *b, size_t n) {
    char p[800];
    snprintf(p, sizeof p, "%s/%s", g_dir, name);
    FILE *f = fopen(p, "wb");
    if (!f || fwrite(b, 1, n, f) != n) abort();
    fclose(f);
}

/* vocab_size 5: the 3 pieces, id 3 from added_tokens.json, id 4 a [PAD4] */
static const char CONFIG[] =
    "{\"model_type\": \"llama\", \"hidden_size\": 8, \"intermediate_size\": 16,"
    " \"num_hidden_layers\": 1, \"num_attention_heads\": 2, \"num_key_value_heads\": 1,"
    " \"max_position_embeddings\": 32, \"rms_norm_eps\": 1e-05, \"vocab_size\": 5,"
    " \"bos_token_id\": 1, \"eos_token_id\": 2}";
/* id 2 (a byte piece) overridden: "<|x|>" looks special to llama.cpp -> control; id 1 gets a
 * user-defined token whose U+2581 becomes a space; id 9 is past vocab_size: ignored */
static const char TOKCFG[] =
    "{\"add_bos_token\": true, \"add_prefix_space\": false, \"added_tokens_decoder\": {"
    "\"2\": {\"content\": \"<|x|>\", \"special\": false},"
    "\"1\": {\"content\": \"\xe2\x96\x81hi\xe2\x96\x81there\", \"special\": false},"
    "\"9\": {\"content\": \"<far>\", \"special\": true}}}";
static const char ADDED[] = "{\"<extra>\": 3, \"<beyond>\": 7}";

static const struct { const char *name; uint64_t rows, cols; } TENSORS[] = {
    {"model.embed_tokens.weight", 5, 8}, {"model.norm.weight", 0, 8}, {"lm_head.weight", 5, 8},
    {"model.layers.0.input_layernorm.weight", 0, 8},
    {"model.layers.0.post_attention_layernorm.weight", 0, 8},
    {"model.layers.0.self_attn.q_proj.weight", 8, 8},
    {"model.layers.0.self_attn.k_proj.weight", 4, 8},
    {"model.layers.0.self_attn.v_proj.weight", 4, 8},
    {"model.layers.0.self_attn.o_proj.weight", 8, 8},
    {"model.layers.0.mlp.gate_proj.weight", 16, 8}, {"model.layers.0.mlp.up_proj.weight", 16, 8},
    {"model.layers.0.mlp.down_proj.weight", 8, 16},
};
#define NTENS (sizeof TENSORS / sizeof TENSORS[0])

static void new_model(void) {
    if (!g_dir[0]) {
        if (!mkdtemp(tbx_test_tmppath(g_dir, sizeof g_dir, "tbx_test_spm_XXXXXX"))) abort();
        snprintf(g_out, sizeof g_out, "%s.out.gguf", g_dir);
        atexit(rm_tmp);
    }
    write_bytes("config.json", CONFIG, strlen(CONFIG));
    write_bytes("tokenizer.model", MODEL, sizeof MODEL);
    write_bytes("tokenizer_config.json", TOKCFG, strlen(TOKCFG));
    write_bytes("added_tokens.json", ADDED, strlen(ADDED));
    char p[800];
    snprintf(p, sizeof p, "%s/model.safetensors", g_dir);
    unlink(p);
    tbx_write_options wo;
    tbx_write_options_init(&wo);
    wo.format = TBX_FORMAT_SAFETENSORS;
    tbx_writer *w = NULL;
    tbx_error e;
    if (tbx_writer_open(&w, p, &wo, &e) != TBX_OK) abort();
    for (size_t k = 0; k < NTENS; k++) {
        uint64_t shape[2] = {TENSORS[k].rows, TENSORS[k].cols};
        tbx_tensor_desc d = TBX_TENSOR_DESC_INIT;
        d.name = TENSORS[k].name;
        d.name_len = strlen(TENSORS[k].name);
        d.dtype = TBX_DT_F32;
        d.ndim = TENSORS[k].rows ? 2 : 1;
        d.shape = TENSORS[k].rows ? shape : shape + 1;
        d.has_data = 1;
        if (tbx_writer_add_tensor(w, &d, NULL, &e) != TBX_OK) abort();
    }
    for (size_t k = 0; k < NTENS; k++) {
        uint64_t n = (TENSORS[k].rows ? TENSORS[k].rows : 1) * TENSORS[k].cols;
        for (uint64_t i = 0; i < n; i++) {
            float x = 0.01f * (float)(i % 7);
            if (tbx_writer_write_tensor(w, k, &x, 4, &e) != TBX_OK) abort();
        }
    }
    if (tbx_writer_finish(w, &e) != TBX_OK) abort();
}

static tbx_status convert_dir(const tbx_allocator *al, int *armed, tbx_error *e) {
    return tbx_test_convert_gguf(al, armed, g_dir, g_out, 0, TBX_DT_INVALID, e);
}

TBX_TEST(spm_directory_vocabulary_as_llama_cpp_converts_it) {
    new_model();
    tbx_error e;
    CHECK_OK(convert_dir(NULL, NULL, &e));
    tbx_file *g = NULL;
    CHECK_OK(tbx_open_path(&g, g_out, NULL, &e));
    if (!g) return;
    size_t n = 0;
    const char *s = tbx_value_get_str(tbx_meta_find(g, "tokenizer.ggml.model"), &n);
    CHECK(s && n == 5 && memcmp(s, "llama", 5) == 0);
    s = tbx_value_get_str(tbx_meta_find(g, "tokenizer.ggml.pre"), &n);
    CHECK(s && n == 7 && memcmp(s, "default", 7) == 0);
    CHECK(tbx_meta_find(g, "tokenizer.ggml.merges") == NULL);
    const tbx_value *asp = tbx_meta_find(g, "tokenizer.ggml.add_space_prefix");
    CHECK(asp && tbx_value_type_of(asp) == TBX_V_BOOL);
    const tbx_value *toks = tbx_meta_find(g, "tokenizer.ggml.tokens");
    const tbx_value *sc = tbx_meta_find(g, "tokenizer.ggml.scores");
    const tbx_value *ty = tbx_meta_find(g, "tokenizer.ggml.token_type");
    CHECK(toks && sc && ty && tbx_value_len(toks) == 5 && tbx_value_len(sc) == 5 &&
          tbx_value_len(ty) == 5);
    CHECK(sc && tbx_value_elem_type(sc) == TBX_V_F32);
    CHECK(ty && tbx_value_elem_type(ty) == TBX_V_I32);
    if (!toks || !sc || !ty || tbx_value_len(toks) != 5) { tbx_close(g); return; }
    static const char *want_tok[5] = {"<unk>", " hi there", "<|x|>", "<extra>", "[PAD4]"};
    static const float want_sc[5] = {0.0f, -1000.0f, -1000.0f, -1000.0f, -10000.0f};
    /* unknown, user-defined, control, user-defined, unused */
    static const int32_t want_ty[5] = {2, 4, 3, 4, 5};
    size_t nb = 0;
    const float *f = tbx_value_data(sc, &nb);
    const int32_t *tt = tbx_value_data(ty, &nb);
    for (uint64_t i = 0; i < 5; i++) {
        const char *p = tbx_value_str_at(toks, i, &n);
        CHECK(p && n == strlen(want_tok[i]) && memcmp(p, want_tok[i], n) == 0);
        CHECK(f && f[i] == want_sc[i]);
        CHECK(tt && tt[i] == want_ty[i]);
    }
    uint64_t u = 0;
    CHECK(tbx_value_get_u64(tbx_meta_find(g, "tokenizer.ggml.bos_token_id"), &u) == TBX_OK &&
          u == 1);
    tbx_close(g);
}

TBX_TEST(spm_directory_without_override_keeps_piece_types) {
    new_model();
    write_bytes("tokenizer_config.json", "{}", 2);
    write_bytes("added_tokens.json", "{}", 2);
    tbx_error e;
    CHECK_OK(convert_dir(NULL, NULL, &e));
    tbx_file *g = NULL;
    CHECK_OK(tbx_open_path(&g, g_out, NULL, &e));
    if (!g) return;
    const tbx_value *ty = tbx_meta_find(g, "tokenizer.ggml.token_type");
    const tbx_value *sc = tbx_meta_find(g, "tokenizer.ggml.scores");
    size_t nb = 0;
    const int32_t *tt = ty ? tbx_value_data(ty, &nb) : NULL;
    const float *f = sc ? tbx_value_data(sc, &nb) : NULL;
    CHECK(tt && tt[0] == 2 && tt[1] == 1 && tt[2] == 6 && tt[3] == 5 && tt[4] == 5);
    CHECK(f && f[0] == 0.0f && f[1] == -1.5f && f[2] == 0.0f && f[3] == -10000.0f);
    CHECK(tbx_meta_find(g, "tokenizer.ggml.add_space_prefix") == NULL);
    tbx_close(g);
}

/* Every allocation of the conversion fails in turn: TBX_E_NOMEM (or success where the library
 * tolerates it), no leak, no output file. */
TBX_TEST(spm_every_allocation_failure_is_clean) {
    new_model();
    tbx_error e;
    tbx_fail_al count = {0, 0, 0, 0};
    tbx_allocator cal = {tbx_fa_alloc, tbx_fa_realloc, tbx_fa_free, &count};
    CHECK_OK(convert_dir(&cal, &count.armed, &e));
    const long total = count.calls;
    CHECK(total > 10);
    int clean = 1;
    for (long k = 1; k <= total; k++) {
        unlink(g_out);
        tbx_fail_al a = {0, 0, k, 0};
        tbx_allocator al = {tbx_fa_alloc, tbx_fa_realloc, tbx_fa_free, &a};
        tbx_status st = convert_dir(&al, &a.armed, &e);
        struct stat sb;
        if (st != TBX_E_NOMEM && st != TBX_OK) {
            fprintf(stderr, "allocation %ld failed: status %d (%s)\n", k, (int)st, e.message);
            clean = 0;
        }
        if (st != TBX_OK && stat(g_out, &sb) == 0) {
            fprintf(stderr, "allocation %ld failed: output left behind\n", k);
            clean = 0;
        }
        if (a.live != 0) {
            fprintf(stderr, "allocation %ld failed: %lld bytes leaked\n", k, a.live);
            clean = 0;
        }
    }
    CHECK(clean);
}

/* ---- the specs of a Unigram model (tbx_spm_parse_specs, xlm-roberta's sentencepiece.bpe.model)
 * ModelProto {
 *   pieces { piece: "a" }                                               @0
 *   trainer_spec { 1: "x" (skipped), model_type (3): 2 BPE }            @5
 *   normalizer_spec { 1: "n" (skipped), precompiled_charsmap (2):
 *                     01 02 03, add_dummy_prefix (3): 0,
 *                     remove_extra_whitespaces (4): 1 }                 @12
 * } */
static const uint8_t SPECS[] = {
    0x0a, 0x03, 0x0a, 0x01, 'a',
    0x12, 0x05, 0x0a, 0x01, 'x', 0x18, 0x02,
    0x1a, 0x0c, 0x0a, 0x01, 'n', 0x12, 0x03, 1, 2, 3, 0x18, 0x00, 0x20, 0x01,
};

TBX_TEST(spm_specs_read_when_asked) {
    CHECK_EQ(sizeof SPECS, 26);
    tbx_spm_vocab v;
    tbx_error e;
    tbx_alloc_init(&g_al, NULL);
    memset(&e, 0, sizeof e);
    CHECK_OK(tbx_spm_parse_specs(SPECS, sizeof SPECS, &g_al, 10, &v, &e));
    CHECK_EQ(v.n, 1);
    CHECK_EQ(v.model_type, TBX_SPM_BPE);
    CHECK_EQ(v.add_dummy_prefix, 0);
    CHECK_EQ(v.remove_extra_ws, 1);
    CHECK_EQ(v.charsmap_len, 3);
    CHECK(v.charsmap == SPECS + 19);
    tbx_spm_free(&v, &g_al);
    /* tbx_spm_parse leaves them at protobuf's defaults */
    CHECK_OK(parse(SPECS, sizeof SPECS, 10, &v, &e));
    CHECK_EQ(v.model_type, TBX_SPM_UNIGRAM);
    CHECK_EQ(v.add_dummy_prefix, 1);
    CHECK_EQ(v.remove_extra_ws, 1);
    CHECK_EQ(v.charsmap_len, 0);
    tbx_spm_free(&v, &g_al);
    /* hostile specs, each failing with its field and offset */
    static const struct { const char *name; uint8_t b[12]; size_t n; tbx_status st;
                          const char *field; uint64_t off; } BAD[] = {
        {"model_type 9", {0x12, 0x02, 0x18, 0x09}, 4, TBX_E_FORMAT, "trainer_spec.model_type", 2},
        {"model_type as bytes", {0x12, 0x03, 0x1a, 0x01, 0x00}, 5, TBX_E_FORMAT,
         "trainer_spec.model_type", 2},
        {"charsmap past spec", {0x1a, 0x03, 0x12, 0x05, 0x00, 0x00}, 6, TBX_E_TRUNCATED,
         "normalizer_spec.precompiled_charsmap", 4},
        {"spec past end", {0x1a, 0x07, 0x18, 0x00}, 4, TBX_E_TRUNCATED, "normalizer_spec", 2},
    };
    for (size_t i = 0; i < sizeof BAD / sizeof BAD[0]; i++) {
        memset(&e, 0, sizeof e);
        tbx_status st = tbx_spm_parse_specs(BAD[i].b, BAD[i].n, &g_al, 10, &v, &e);
        if (st != BAD[i].st || strcmp(e.field, BAD[i].field) || e.offset != BAD[i].off)
            fprintf(stderr, "case \"%s\": status %d field \"%s\" offset %llu (%s)\n", BAD[i].name,
                    (int)st, e.field, (unsigned long long)e.offset, e.message);
        CHECK_EQ(st, BAD[i].st);
        CHECK_STR(e.field, BAD[i].field);
        CHECK_EQ(e.offset, BAD[i].off);
        tbx_spm_free(&v, &g_al);
    }
}

/* tbx_spm_write: a Unigram vocabulary with a charsmap and a BPE one, each read back by
 * tbx_spm_parse_specs with the same pieces and specs; the pad id -1 is protobuf's ten-byte
 * negative varint (the reader skips the trainer spec's ids, so the bytes are checked here); no
 * piece or a bad model type is refused. (test_gguf_to_hf.py loads a written model in
 * SentencePiece itself.) */
TBX_TEST(spm_write_reads_back) {
    static const uint8_t CMAP[] = {7, 0, 9};
    tbx_spm_piece P[] = {{"<unk>", 5, 0.0f, TBX_SPM_UNKNOWN}, {"<s>", 3, 0.0f, TBX_SPM_CONTROL},
                         {"\xe2\x96\x81" "a", 4, -1.5f, TBX_SPM_NORMAL},
                         {"<0x41>", 6, 0.0f, TBX_SPM_BYTE}};
    tbx_error e;
    tbx_alloc_init(&g_al, NULL);
    for (int k = 0; k < 2; k++) {
        tbx_spm_vocab w = {P, 4, 4, k ? TBX_SPM_BPE : TBX_SPM_UNIGRAM, k == 0, k == 1,
                           k ? NULL : CMAP, k ? 0 : sizeof CMAP};
        tbx_spm_ids ids = {0, 1, -1, -1};
        uint8_t *buf = NULL;
        size_t n = 0;
        memset(&e, 0, sizeof e);
        CHECK_OK(tbx_spm_write(&w, &ids, &g_al, &buf, &n, &e));
        tbx_spm_vocab v;
        CHECK_OK(tbx_spm_parse_specs(buf, n, &g_al, 10, &v, &e));
        CHECK_EQ(v.n, 4);
        for (size_t i = 0; i < 4; i++) {
            CHECK_EQ(v.pieces[i].len, P[i].len);
            CHECK(!memcmp(v.pieces[i].text, P[i].text, P[i].len));
            CHECK(v.pieces[i].score == P[i].score);
            CHECK_EQ(v.pieces[i].type, P[i].type);
        }
        CHECK_EQ(v.model_type, w.model_type);
        CHECK_EQ(v.add_dummy_prefix, w.add_dummy_prefix);
        CHECK_EQ(v.remove_extra_ws, w.remove_extra_ws);
        CHECK_EQ(v.charsmap_len, w.charsmap_len);
        if (w.charsmap_len) CHECK(!memcmp(v.charsmap, CMAP, sizeof CMAP));
        /* eos_id -1 (field 42): tag 0xd0 0x02, then ff ff ff ff ff ff ff ff ff 01 */
        static const uint8_t NEG[] = {0xd0, 0x02, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                                      0xff, 0xff, 0x01};
        CHECK(memmem(buf, n, NEG, sizeof NEG) != NULL);
        /* byte_fallback (field 35 = 1): a BYTE piece is there */
        static const uint8_t BF[] = {0x98, 0x02, 0x01};
        CHECK(memmem(buf, n, BF, sizeof BF) != NULL);
        tbx_spm_free(&v, &g_al);
        tbx_free(&g_al, buf, n);
    }
    tbx_spm_vocab none = {P, 0, 0, TBX_SPM_BPE, true, false, NULL, 0};
    tbx_spm_ids ids = {0, 1, 2, -1};
    uint8_t *buf = (uint8_t *)1;
    size_t n = 1;
    CHECK_EQ(tbx_spm_write(&none, &ids, &g_al, &buf, &n, &e), TBX_E_INVALID_ARG);
    CHECK(buf == NULL && n == 0);
    none.n = 4;
    none.model_type = 7;
    CHECK_EQ(tbx_spm_write(&none, &ids, &g_al, &buf, &n, &e), TBX_E_INVALID_ARG);
    CHECK_STR(e.field, "trainer_spec.model_type");
}

TBX_TEST_MAIN()
