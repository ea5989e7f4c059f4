/*
 * test_meta.c - the metadata convenience lookups (typed getters, "{arch}" templates, string
 * arrays) on a GGUF file written through the public writer API.
 */
#define _GNU_SOURCE
#include "tbx_test.h"
#include "tensorbox.h"

#include <stdlib.h>
#include <unistd.h>

static char dir_[512], path[600];

static void add(tbx_writer *w, const char *key, tbx_value *v) {
    CHECK(v != NULL);
    CHECK_OK(tbx_writer_add_meta(w, key, strlen(key), v, NULL));
    tbx_value_free(v);
}

static tbx_file *make_file(void) {
    tbx_test_tmppath(dir_, sizeof dir_, "tbx-meta-XXXXXX");
    if (!mkdtemp(dir_)) return NULL;
    snprintf(path, sizeof path, "%s/m.gguf", dir_);
    tbx_writer *w;
    tbx_error err;
    if (tbx_writer_open(&w, path, NULL, &err) != TBX_OK) return NULL;
    add(w, "general.architecture", tbx_value_new_string("llama", 5));
    add(w, "llama.context_length", tbx_value_new_uint(TBX_V_U32, 4096));
    add(w, "llama.rope.freq_base", tbx_value_new_float(TBX_V_F32, 10000.0));
    add(w, "general.offset", tbx_value_new_int(TBX_V_I64, -7));
    add(w, "big", tbx_value_new_uint(TBX_V_U64, UINT64_MAX));
    tbx_value *toks = tbx_value_new_array(TBX_V_STRING);
    CHECK_OK(tbx_value_array_push(toks, tbx_value_new_string("<s>", 3)));
    CHECK_OK(tbx_value_array_push(toks, tbx_value_new_string("a\0b", 3)));
    add(w, "tokenizer.ggml.tokens", toks);
    tbx_value *scores = tbx_value_new_array(TBX_V_F32);
    CHECK_OK(tbx_value_array_push(scores, tbx_value_new_float(TBX_V_F32, 0.5)));
    add(w, "tokenizer.ggml.scores", scores);
    if (tbx_writer_finish(w, &err) != TBX_OK) return NULL;
    tbx_file *f = NULL;
    if (tbx_open_path(&f, path, NULL, &err) != TBX_OK) return NULL;
    return f;
}

TBX_TEST(typed_getters_arch_templates_and_string_arrays) {
    tbx_file *f = make_file();
    CHECK(f != NULL);
    if (!f) return;
    uint64_t u = 0;
    int64_t i = 0;
    double d = 0;
    size_t len = 0;
    CHECK_OK(tbx_meta_get_u64(f, "llama.context_length", &u));
    CHECK_EQ(u, 4096);
    CHECK_OK(tbx_meta_get_i64(f, "general.offset", &i));
    CHECK_EQ(i, -7);
    CHECK_EQ(tbx_meta_get_u64(f, "general.offset", &u), TBX_E_OVERFLOW);
    CHECK_EQ(tbx_meta_get_i64(f, "big", &i), TBX_E_OVERFLOW);
    CHECK_OK(tbx_meta_get_u64(f, "big", &u));
    CHECK(u == UINT64_MAX);
    CHECK_EQ(tbx_meta_get_u64(f, "absent", &u), TBX_E_NOT_FOUND);
    CHECK_EQ(tbx_meta_get_u64(f, "general.architecture", &u), TBX_E_INVALID_ARG);
    CHECK_OK(tbx_meta_get_f64(f, "llama.rope.freq_base", &d));
    CHECK(d == 10000.0);
    const char *s = tbx_meta_get_str(f, "general.architecture", &len);
    CHECK(s && len == 5 && memcmp(s, "llama", 5) == 0);
    CHECK(tbx_meta_get_str(f, "llama.context_length", &len) == NULL);

    const tbx_value *v = tbx_meta_find_arch(f, "{arch}.context_length");
    CHECK(v != NULL && tbx_value_type_of(v) == TBX_V_U32);
    CHECK(tbx_meta_find_arch(f, "{arch}.missing") == NULL);
    CHECK(tbx_meta_find_arch(f, "general.offset") != NULL); /* no template: plain lookup */

    s = tbx_meta_array_str(f, "tokenizer.ggml.tokens", 1, &len);
    CHECK(s && len == 3 && memcmp(s, "a\0b", 3) == 0); /* embedded NUL kept */
    CHECK(tbx_meta_array_str(f, "tokenizer.ggml.tokens", 2, &len) == NULL);
    CHECK(tbx_meta_array_str(f, "tokenizer.ggml.scores", 0, &len) == NULL); /* not strings */

    /* The reader stores the string array compactly: every accessor sees the same strings. */
    const tbx_value *toks = tbx_meta_find(f, "tokenizer.ggml.tokens");
    CHECK_EQ(tbx_value_len(toks), 2);
    CHECK_EQ(tbx_value_elem_type(toks), TBX_V_STRING);
    s = tbx_value_str_at(toks, 0, &len);
    CHECK(s && len == 3 && strcmp(s, "<s>") == 0); /* NUL-terminated in place */
    CHECK(tbx_value_str_at(toks, 2, &len) == NULL && len == 0);
    CHECK(tbx_value_str_at(tbx_meta_find(f, "tokenizer.ggml.scores"), 0, &len) == NULL);
    const tbx_value *e = tbx_value_at(toks, 1);
    CHECK(e && tbx_value_type_of(e) == TBX_V_STRING);
    s = tbx_value_get_str(e, &len);
    CHECK(s && len == 3 && memcmp(s, "a\0b", 3) == 0);
    CHECK(tbx_value_at(toks, 1) == e); /* materialised once */
    /* a copy stays equal, and pushing onto it turns it into an ordinary array */
    tbx_value *c = tbx_value_clone(toks);
    CHECK(c != NULL);
    s = tbx_value_str_at(c, 1, &len);
    CHECK(s && len == 3 && memcmp(s, "a\0b", 3) == 0);
    CHECK_OK(tbx_value_array_push(c, tbx_value_new_string("", 0)));
    CHECK_EQ(tbx_value_len(c), 3);
    s = tbx_value_str_at(c, 0, &len);
    CHECK(s && len == 3 && strcmp(s, "<s>") == 0);
    s = tbx_value_str_at(c, 2, &len);
    CHECK(s && len == 0);
    tbx_value_free(c);
    tbx_close(f);
    unlink(path);
    rmdir(dir_);
}

TBX_TEST(arch_template_without_architecture) {
    char dir[512];
    CHECK(mkdtemp(tbx_test_tmppath(dir, sizeof dir, "tbx-meta2-XXXXXX")) != NULL);
    char p[600];
    snprintf(p, sizeof p, "%s/n.gguf", dir);
    tbx_writer *w;
    CHECK_OK(tbx_writer_open(&w, p, NULL, NULL));
    add(w, "x.context_length", tbx_value_new_uint(TBX_V_U32, 1));
    CHECK_OK(tbx_writer_finish(w, NULL));
    tbx_file *f = NULL;
    CHECK_OK(tbx_open_path(&f, p, NULL, NULL));
    CHECK(tbx_meta_find_arch(f, "{arch}.context_length") == NULL);
    CHECK(tbx_meta_find_arch(NULL, "x") == NULL);
    tbx_close(f);
    unlink(p);
    rmdir(dir);
}

TBX_TEST_MAIN()
