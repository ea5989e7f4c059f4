/*
 * fuzz_tokjson.c - libFuzzer target: the input is a Hugging Face tokenizer.json.
 *
 * Reads the bytes with tbx_tokj_read (src/formats/hf_tokenizer.c: the walker behind the
 * Hugging Face -> GGUF conversion and the EMBD writer's vocabulary, which builds no tree of the
 * vocabulary) and holds it to jansson, the JSON reader it replaces there:
 *   - it accepts exactly what json_loadb(JSON_REJECT_DUPLICATES) reads as an object (a refusal
 *     for its own limits, TBX_E_LIMIT, or for memory excepted; and jansson's one quirk taken
 *     out, a NUL byte after a number or literal that it skips), and a refusal names its field
 *     and an offset inside the input;
 *   - what it reads is what jansson's tree holds: model.vocab member by member (key, integer or
 *     not, value), model.merges and added_tokens element by element (strings, integers,
 *     `true`, members looked up by name), and the settings it decodes (normalizer,
 *     pre_tokenizer, post_processor, the model's other members) equal to jansson's;
 *   - every block it allocates is freed with its size (a checking allocator).
 * Seeds: fuzz/make_tokjson_seeds.py.
 *
 * Build: cmake -DTBX_FUZZ=ON (clang) -> build/fuzz/fuzz_tokjson; every build also makes
 * build/fuzz/replay_tokjson, which replays fuzz/corpus/tokjson/ (see replay_main.c).
 */
#include "hf_tokenizer.h"
#include "fuzz_heap.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The string at `at` equals jansson's string j. */
static void same_str(const tbx_tokj *t, size_t at, json_t *j, tbx_tokj_buf *b) {
    size_t len;
    const char *s = tbx_tokj_str(t, at, b, &len);
    FZ_CHECK(json_is_string(j) == (s != NULL), "a string where jansson has one");
    if (s)
        FZ_CHECK(len == json_string_length(j) && memcmp(s, json_string_value(j), len) == 0,
                 "a string decodes to jansson's bytes");
}

/* The scalar at `at` reads as jansson's value j. */
static void same_scalar(const tbx_tokj *t, size_t at, json_t *j, tbx_tokj_buf *b) {
    int64_t v;
    bool isint = tbx_tokj_int(t, at, &v);
    FZ_CHECK(isint == json_is_integer(j), "an integer where jansson has one");
    if (isint) FZ_CHECK(v == json_integer_value(j), "the integer's value");
    FZ_CHECK(tbx_tokj_true(t, at) == json_is_true(j), "true where jansson has true");
    char k = tbx_tokj_kind(t, at);
    FZ_CHECK((k == '{') == json_is_object(j) && (k == '[') == json_is_array(j) &&
                 (k == 'n') == json_is_null(j) && (k == 'f') == json_is_false(j) &&
                 (k == '0') == json_is_number(j),
             "the kind of value jansson has");
    same_str(t, at, j, b);
}

/* The array or object at `at` walks like jansson's j, element by element. */
static void same_members(const tbx_tokj *t, size_t at, json_t *j, tbx_tokj_buf *b) {
    size_t it = at, key, val, n = 0;
    if (json_is_array(j)) {
        while (tbx_tokj_next(t, &it, &key, &val)) {
            FZ_CHECK(key == TBX_TOKJ_NONE && n < json_array_size(j), "an element of an array");
            json_t *e = json_array_get(j, n++);
            same_scalar(t, val, e, b);
            if (json_is_object(e)) {
                /* added tokens and merges: members looked up by name */
                static const char *const names[] = {"id", "content", "special", "a"};
                for (size_t k = 0; k < 4; k++) {
                    size_t v = tbx_tokj_get(t, val, names[k]);
                    json_t *m = json_object_get(e, names[k]);
                    FZ_CHECK((v == TBX_TOKJ_NONE) == (m == NULL), "a member found by name");
                    if (m) same_scalar(t, v, m, b);
                }
            } else if (json_is_array(e)) {
                size_t it2 = val, k2, v2, m = 0;
                while (tbx_tokj_next(t, &it2, &k2, &v2))
                    same_scalar(t, v2, json_array_get(e, m++), b);
                FZ_CHECK(m == json_array_size(e), "every element of a nested array");
            }
        }
        FZ_CHECK(n == json_array_size(j), "every element of an array");
    } else if (json_is_object(j)) {
        const char *k;
        json_t *v;
        void *iter = json_object_iter(j);
        tbx_tokj_buf kb = {b->al, NULL, 0};
        while (tbx_tokj_next(t, &it, &key, &val)) {
            FZ_CHECK(iter != NULL && key != TBX_TOKJ_NONE, "a member of an object");
            k = json_object_iter_key(iter);
            v = json_object_iter_value(iter);
            size_t kl;
            const char *ks = tbx_tokj_str(t, key, &kb, &kl);
            FZ_CHECK(ks && kl == strlen(k) && memcmp(ks, k, kl) == 0, "members in jansson's order");
            same_scalar(t, val, v, b);
            iter = json_object_iter_next(j, iter);
            n++;
        }
        tbx_tokj_buf_free(&kb);
        FZ_CHECK(iter == NULL, "every member of an object");
    }
    FZ_CHECK(tbx_tokj_count(t, at) == n, "the count is the walk's");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fz_heap heap = {0, SIZE_MAX};
    tbx_allocator user = {fz_alloc, fz_realloc, fz_dealloc, &heap};
    tbx_alloc al;
    tbx_alloc_init(&al, &user);
    tbx_tokj t;
    tbx_error err;
    memset(&err, 0, sizeof err);
    tbx_status st = tbx_tokj_read(&t, &al, (const char *)data, size, "tokenizer.json", &err);
    /* jansson's lexer drops a NUL byte that follows a number or a literal (a put-back NUL reads
     * as the end of its buffer); the walker refuses that invalid JSON. jansson is given every
     * NUL as 0x01, a byte it refuses wherever a NUL is invalid. */
    char *copy = NULL;
    const char *jtext = (const char *)data;
    if (memchr(data, 0, size)) {
        copy = malloc(size);
        if (!copy) abort();
        for (size_t i = 0; i < size; i++) copy[i] = data[i] ? (char)data[i] : 1;
        jtext = copy;
    }
    json_error_t je;
    json_t *ref = json_loadb(jtext, size, JSON_REJECT_DUPLICATES, &je);
    free(copy);
    bool ref_ok = ref && json_is_object(ref);
    if (st != TBX_OK) {
        FZ_CHECK(err.code == st && err.message[0] != 0, "a failure is described");
        FZ_CHECK(strcmp(err.field, "tokenizer.json") == 0, "a failure names the file");
        FZ_CHECK(err.offset == TBX_NO_OFFSET || err.offset <= size, "an offset in the input");
        if (st != TBX_E_LIMIT && st != TBX_E_NOMEM)
            FZ_CHECK(!ref_ok, "what the walker refuses jansson refuses");
        if (st == TBX_E_LIMIT && ref_ok)
            FZ_CHECK(strstr(err.message, "settings read as a whole") != NULL,
                     "the only limit jansson does not have is the settings' size");
        FZ_CHECK(heap.live == 0, "a failed read frees everything");
        json_decref(ref);
        return 0;
    }
    FZ_CHECK(ref_ok, "what the walker reads jansson reads");
    tbx_tokj_buf b = {&al, NULL, 0};
    json_t *model = json_object_get(ref, "model");
    json_t *vocab = json_is_object(model) ? json_object_get(model, "vocab") : NULL;
    json_t *merges = json_is_object(model) ? json_object_get(model, "merges") : NULL;
    json_t *added = json_object_get(ref, "added_tokens");
    FZ_CHECK((t.vocab == TBX_TOKJ_NONE) == (vocab == NULL), "model.vocab found");
    FZ_CHECK((t.merges == TBX_TOKJ_NONE) == (merges == NULL), "model.merges found");
    FZ_CHECK((t.added == TBX_TOKJ_NONE) == (added == NULL), "added_tokens found");
    if (vocab) { same_scalar(&t, t.vocab, vocab, &b); same_members(&t, t.vocab, vocab, &b); }
    if (merges) { same_scalar(&t, t.merges, merges, &b); same_members(&t, t.merges, merges, &b); }
    if (added) { same_scalar(&t, t.added, added, &b); same_members(&t, t.added, added, &b); }
    /* the settings */
    FZ_CHECK(t.small != NULL, "settings object");
    static const char *const top[] = {"normalizer", "pre_tokenizer", "post_processor"};
    for (size_t k = 0; k < 3; k++) {
        json_t *a = json_object_get(ref, top[k]), *c = json_object_get(t.small, top[k]);
        FZ_CHECK((a == NULL) == (c == NULL) && (!a || json_equal(a, c)), "a setting as jansson's");
    }
    json_t *sm = json_object_get(t.small, "model");
    FZ_CHECK(json_is_object(model) == (sm != NULL), "model's settings when model is an object");
    if (sm) {
        const char *k;
        json_t *v;
        size_t want = 0;
        json_object_foreach(model, k, v) {
            if (!strcmp(k, "vocab") || !strcmp(k, "merges")) continue;
            want++;
            FZ_CHECK(json_equal(v, json_object_get(sm, k)), "a model setting as jansson's");
        }
        FZ_CHECK(json_object_size(sm) == want, "every model setting");
    }
    tbx_tokj_buf_free(&b);
    tbx_tokj_free(&t);
    json_decref(ref);
    FZ_CHECK(heap.live == 0, "everything freed");
    return 0;
}
