/*
 * test_hf_tokenizer.c - the tokenizer.json reader (src/models/hf_tokenizer.c) that the
 * Hugging Face -> GGUF conversion and the EMBD writer share.
 *
 * A small tokenizer.json written here (escaped and raw non-ASCII keys, both forms of merges,
 * added tokens, numbers and literals in the settings) is read and walked: every key, id, merge
 * and added token as the text above says. Then the hostile side, each case with its status,
 * byte offset and place: every truncation of that text, a key twice (one by one and through the
 * index of a large object, plain and escaped), a vocabulary that is not an object, nesting at
 * and past jansson's 2048 levels, strings, escapes, UTF-8 and numbers at their edges (reals
 * against strtod, the reference jansson itself relies on), the settings' size limit. Every case
 * is also given to jansson (json_loadb with JSON_REJECT_DUPLICATES, which this reader replaces),
 * which must agree on accept or refuse, and a run of seeded mutations holds the two together.
 * Finally every allocation failure of a read ends in TBX_E_NOMEM without a leak.
 */
#include "api.h"
#include "hf_tokenizer.h"
#include "tbx_test.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* The valid tokenizer.json the tests read (ASCII source; the two raw non-ASCII keys as bytes).
 * vocab: "a" 0, "b" 1, "ab" 2, "\u0120a" (Ġa, escaped) 3, "Ġb" (raw UTF-8) 4, "c\"d" 5,
 * "\ud83d\ude00" (U+1F600) 6; merges: "a b" and ["\u0120", "a"]; added_tokens: <|end|> id 7
 * special, "x y" id 8 not special. */
static const char TOK[] =
    "{\"version\": \"1.0\", \"truncation\": null, \"padding\": {\"n\": -12.5e-3},\n"
    " \"added_tokens\": [{\"id\": 7, \"content\": \"<|end|>\", \"special\": true},\n"
    "                  {\"special\": false, \"content\": \"x y\", \"id\": 8}],\n"
    " \"normalizer\": {\"type\": \"NFC\", \"list\": [1, 2.0, true, false, null, \"\\/\"]},\n"
    " \"pre_tokenizer\": {\"type\": \"ByteLevel\", \"use_regex\": true},\n"
    " \"post_processor\": null,\n"
    " \"model\": {\"type\": \"BPE\", \"dropout\": null, \"byte_fallback\": false,\n"
    "   \"vocab\": {\"a\": 0, \"b\": 1, \"ab\": 2, \"\\u0120a\": 3, \"\xc4\xa0"
    "b\": 4, \"c\\\"d\": 5,\n"
    "             \"\\ud83d\\ude00\": 6},\n"
    "   \"merges\": [\"a b\", [\"\\u0120\", \"a\"]]}}\n  \n";

static tbx_alloc g_al;

static tbx_status rd(tbx_tokj *t, const char *s, size_t n, tbx_error *e) {
    tbx_alloc_init(&g_al, NULL);
    memset(e, 0, sizeof *e);
    return tbx_tokj_read(t, &g_al, s, n, "tokenizer.json", e);
}

static int jansson_raw(const char *s, size_t n) {
    json_error_t je;
    json_t *j = json_loadb(s, n, JSON_REJECT_DUPLICATES, &je);
    int ok = j && json_is_object(j);
    json_decref(j);
    return ok;
}

/* jansson's verdict on the same text (the reader must agree on accept or refuse), with its one
 * quirk taken out: its lexer drops a NUL byte that follows a number or a literal (a put-back
 * NUL reads as the end of its buffer), so every NUL is given to it as 0x01, a byte it refuses
 * wherever a NUL is invalid JSON. */
static int jansson_reads(const char *s, size_t n) {
    if (!memchr(s, 0, n)) return jansson_raw(s, n);
    char *c = malloc(n ? n : 1);
    for (size_t i = 0; i < n; i++) c[i] = s[i] ? s[i] : 1;
    int ok = jansson_raw(c, n);
    free(c);
    return ok;
}

static int str_is(const tbx_tokj *t, size_t at, tbx_tokj_buf *b, const char *want, size_t wl) {
    size_t len;
    const char *s = tbx_tokj_str(t, at, b, &len);
    return s && len == wl && memcmp(s, want, wl) == 0;
}

TBX_TEST(reads_vocab_merges_added_and_settings) {
    tbx_tokj t;
    tbx_error e;
    CHECK(jansson_reads(TOK, sizeof TOK - 1));
    CHECK_OK(rd(&t, TOK, sizeof TOK - 1, &e));
    tbx_tokj_buf b = {&g_al, NULL, 0};
    /* the vocabulary, in text order */
    static const struct { const char *k; size_t kl; int64_t id; } V[] = {
        {"a", 1, 0}, {"b", 1, 1}, {"ab", 2, 2}, {"\xc4\xa0" "a", 3, 3}, {"\xc4\xa0" "b", 3, 4},
        {"c\"d", 3, 5}, {"\xf0\x9f\x98\x80", 4, 6}};
    CHECK_EQ(tbx_tokj_kind(&t, t.vocab), '{');
    CHECK_EQ(tbx_tokj_count(&t, t.vocab), 7);
    size_t it = t.vocab, key, val, n = 0;
    while (tbx_tokj_next(&t, &it, &key, &val) && n < 7) {
        int64_t id = -1;
        CHECK(str_is(&t, key, &b, V[n].k, V[n].kl));
        CHECK(tbx_tokj_int(&t, val, &id));
        CHECK_EQ(id, V[n].id);
        n++;
    }
    CHECK_EQ(n, 7);
    /* merges: a string, then a pair */
    it = t.merges;
    CHECK(tbx_tokj_next(&t, &it, &key, &val));
    CHECK_EQ(key, TBX_TOKJ_NONE);
    CHECK(str_is(&t, val, &b, "a b", 3));
    CHECK(tbx_tokj_next(&t, &it, &key, &val));
    CHECK_EQ(tbx_tokj_kind(&t, val), '[');
    size_t it2 = val, k2, v2;
    CHECK(tbx_tokj_next(&t, &it2, &k2, &v2) && str_is(&t, v2, &b, "\xc4\xa0", 2));
    CHECK(tbx_tokj_next(&t, &it2, &k2, &v2) && str_is(&t, v2, &b, "a", 1));
    CHECK(!tbx_tokj_next(&t, &it2, &k2, &v2));
    CHECK(!tbx_tokj_next(&t, &it, &key, &val));
    /* added tokens: members by name, in any order */
    it = t.added;
    int64_t id = -1;
    CHECK(tbx_tokj_next(&t, &it, &key, &val));
    CHECK(tbx_tokj_int(&t, tbx_tokj_get(&t, val, "id"), &id) && id == 7);
    CHECK(str_is(&t, tbx_tokj_get(&t, val, "content"), &b, "<|end|>", 7));
    CHECK(tbx_tokj_true(&t, tbx_tokj_get(&t, val, "special")));
    CHECK(tbx_tokj_next(&t, &it, &key, &val));
    CHECK(tbx_tokj_int(&t, tbx_tokj_get(&t, val, "id"), &id) && id == 8);
    CHECK(!tbx_tokj_true(&t, tbx_tokj_get(&t, val, "special")));
    CHECK_EQ(tbx_tokj_get(&t, val, "lstrip"), TBX_TOKJ_NONE);
    CHECK(!tbx_tokj_next(&t, &it, &key, &val));
    /* not an integer: a real, a string */
    CHECK(!tbx_tokj_int(&t, tbx_tokj_get(&t, t.added, "id"), &id)); /* no object */
    /* the settings: pre_tokenizer, post_processor, the model's members but vocab and merges */
    json_t *pt = json_object_get(t.small, "pre_tokenizer");
    CHECK_STR(json_string_value(json_object_get(pt, "type")), "ByteLevel");
    CHECK(json_is_null(json_object_get(t.small, "post_processor")));
    json_t *nz = json_object_get(t.small, "normalizer"); /* read: its lowercase flags */
    CHECK_STR(json_string_value(json_object_get(nz, "type")), "NFC");
    CHECK_EQ(json_array_size(json_object_get(nz, "list")), 6);
    CHECK(json_object_get(t.small, "decoder") == NULL);
    json_t *m = json_object_get(t.small, "model");
    CHECK_STR(json_string_value(json_object_get(m, "type")), "BPE");
    CHECK(json_is_false(json_object_get(m, "byte_fallback")));
    CHECK_EQ(json_object_size(m), 3);
    CHECK(json_object_get(m, "vocab") == NULL && json_object_get(m, "merges") == NULL);
    tbx_tokj_buf_free(&b);
    tbx_tokj_free(&t);
}

TBX_TEST(every_truncation_is_truncated) {
    /* the object ends at its last '}'; after it only whitespace */
    const size_t n = sizeof TOK - 1;
    size_t end = n;
    while (TOK[end - 1] != '}') end--;
    int ok = 1;
    for (size_t k = 0; k < n; k++) {
        tbx_tokj t;
        tbx_error e;
        tbx_status st = rd(&t, TOK, k, &e);
        int want_ok = k >= end;
        if (want_ok ? st != TBX_OK
                    : (st != TBX_E_TRUNCATED || e.offset != k ||
                       strcmp(e.field, "tokenizer.json") != 0 || !strstr(e.message, "truncated"))) {
            fprintf(stderr, "prefix of %zu bytes: status %d at %llu: %s\n", k, (int)st,
                    (unsigned long long)e.offset, e.message);
            ok = 0;
        }
        if (jansson_reads(TOK, k) != want_ok) {
            fprintf(stderr, "prefix of %zu bytes: jansson disagrees\n", k);
            ok = 0;
        }
        tbx_tokj_free(&t);
    }
    CHECK(ok);
}

/* A failing read: status, offset, and every needle in the message. */
static void fails(const char *s, size_t n, tbx_status want, uint64_t at, const char *n1,
                  const char *n2, int line) {
    tbx_tokj t;
    tbx_error e;
    tbx_status st = rd(&t, s, n, &e);
    int good = st == want && e.offset == at && strcmp(e.field, "tokenizer.json") == 0 &&
               (!n1 || strstr(e.message, n1)) && (!n2 || strstr(e.message, n2));
    CHECK(good);
    if (!good)
        fprintf(stderr, "line %d: status %d at %llu: %s\n", line, (int)st,
                (unsigned long long)e.offset, e.message);
    CHECK(!jansson_reads(s, n));
    tbx_tokj_free(&t);
}
#define FAILS(s, want, at, n1, n2) fails((s), strlen(s), (want), (at), (n1), (n2), __LINE__)

static size_t off(const char *s, const char *sub) { return (size_t)(strstr(s, sub) - s); }
static size_t off_last(const char *s, const char *sub) {
    const char *p = NULL;
    for (const char *q = strstr(s, sub); q; q = strstr(q + 1, sub)) p = q;
    return (size_t)(p - s);
}

TBX_TEST(a_key_twice_is_refused_where_it_is) {
    char msg[200];
    /* one by one (an object's first keys) */
    const char *a = "{\"model\": {\"vocab\": {\"a\": 0, \"b\": 1, \"a\": 2}}}";
    snprintf(msg, sizeof msg, "duplicate key \"a\" (first at byte %zu)", off(a, "\"a\""));
    FAILS(a, TBX_E_DUPLICATE, off_last(a, "\"a\""), msg, "(in model.vocab)");
    /* the same key escaped */
    const char *b = "{\"model\": {\"vocab\": {\"a\": 0, \"\\u0061\": 1}}}";
    snprintf(msg, sizeof msg, "duplicate key \"a\" (first at byte %zu)", off(b, "\"a\""));
    FAILS(b, TBX_E_DUPLICATE, off(b, "\"\\u0061\""), msg, "(in model.vocab)");
    /* through the index of a large object (more keys than are compared one by one), plain
     * and escaped, at the top level and inside a member nobody reads */
    char big[2048] = "{\"model\": {\"vocab\": {";
    for (int i = 0; i < 40; i++)
        snprintf(big + strlen(big), sizeof big - strlen(big), "\"t%d\": %d, ", i, i);
    size_t first = off(big, "\"t33\"");
    strcat(big, "\"\\u007433\": 99}}}");
    snprintf(msg, sizeof msg, "duplicate key \"t33\" (first at byte %zu)", first);
    FAILS(big, TBX_E_DUPLICATE, off(big, "\"\\u007433\""), msg, "(in model.vocab)");
    char esc[2048] = "{\"decoder\": {\"rules\": {";
    for (int i = 0; i < 40; i++)
        snprintf(esc + strlen(esc), sizeof esc - strlen(esc), "\"\\u00e9%d\": %d, ", i, i);
    first = off(esc, "\"\\u00e97\"");
    strcat(esc, "\"\xc3\xa9" "7\": 0}}}");
    snprintf(msg, sizeof msg, "duplicate key \"\\xc3\\xa97\" (first at byte %zu)", first);
    FAILS(esc, TBX_E_DUPLICATE, off(esc, "\"\xc3\xa9" "7\""), msg, "(in decoder.rules)");
    const char *top = "{\"model\": {}, \"x\": 1, \"model\": {}}";
    FAILS(top, TBX_E_DUPLICATE, off_last(top, "\"model\""), "duplicate key \"model\" (first at "
          "byte 1)", "(in the top-level object)");
    /* the escaped keys of an object outlive the objects nested in it: "\u0061" is still "a"
     * after "n" closed and "\u0063" was added */
    const char *nest = "{\"o\": {\"\\u0061\": 1, \"n\": {\"\\u0062\": 2}, \"\\u0063\": 3, "
                       "\"a\": 4}}";
    FAILS(nest, TBX_E_DUPLICATE, off(nest, "\"a\""), "duplicate key \"a\" (first at byte 7)",
          "(in o)");
    /* the same key in two objects, or in an object opened after one closed, is no duplicate */
    const char *ok = "{\"a\": {\"\\u0078\": 1, \"y\": [{\"\\u0078\": 2}]}, \"b\": {\"\\u0078\": 1},"
                     " \"c\": [{\"x\": {}}, {\"x\": {}}]}";
    tbx_tokj t;
    tbx_error e;
    CHECK_OK(rd(&t, ok, strlen(ok), &e));
    CHECK(jansson_reads(ok, strlen(ok)));
    tbx_tokj_free(&t);
}

TBX_TEST(a_vocab_that_is_no_object_is_read_as_what_it_is) {
    /* the reader reads it; the converters refuse it (tests/python/test_hfdir.py) */
    const char *s = "{\"model\": {\"vocab\": [\"a\", \"b\"], \"merges\": {\"a\": 1}}}";
    tbx_tokj t;
    tbx_error e;
    CHECK_OK(rd(&t, s, strlen(s), &e));
    CHECK_EQ(tbx_tokj_kind(&t, t.vocab), '[');
    CHECK_EQ(t.vocab, off(s, "[\"a\""));
    CHECK_EQ(tbx_tokj_kind(&t, t.merges), '{');
    CHECK_EQ(t.added, TBX_TOKJ_NONE);
    tbx_tokj_free(&t);
}

TBX_TEST(nesting_up_to_jansson_depth) {
    size_t cap = 2 * 2100 + 16;
    char *s = malloc(cap);
    /* {"a": [[...]]}: the object is level 1, so 2047 brackets reach level 2048 */
    for (int levels = 2048; levels <= 2049; levels++) {
        size_t n = 0;
        n += (size_t)sprintf(s, "{\"a\": ");
        for (int i = 1; i < levels; i++) s[n++] = '[';
        for (int i = 1; i < levels; i++) s[n++] = ']';
        s[n++] = '}';
        tbx_tokj t;
        tbx_error e;
        tbx_status st = rd(&t, s, n, &e);
        if (levels == 2048) {
            CHECK_OK(st);
            CHECK(jansson_reads(s, n));
        } else {
            /* the 2048th '[' opens level 2049 */
            CHECK_EQ(st, TBX_E_LIMIT);
            CHECK_EQ(e.offset, 6 + 2047);
            CHECK(strstr(e.message, "nested deeper than 2048 levels") != NULL);
            CHECK(strstr(e.message, "(in a[0][0][0]") != NULL);
            CHECK(!jansson_reads(s, n));
        }
        tbx_tokj_free(&t);
    }
    /* objects too: {"k":{"k":...}} */
    size_t n = 0;
    s = realloc(s, 2049 * 6 + 2049 + 16);
    for (int i = 0; i < 2049; i++) n += (size_t)sprintf(s + n, "{\"k\":");
    n += (size_t)sprintf(s + n, "0");
    for (int i = 0; i < 2049; i++) s[n++] = '}';
    FAILS(s, TBX_E_LIMIT, 2048 * 5, "nested deeper than 2048 levels", "(in k.k.k.k");
    free(s);
}

TBX_TEST(strings_escapes_and_utf8_at_their_edges) {
    FAILS("{\"s\": \"\\u0000\"}", TBX_E_UNSUPPORTED, 7, "NUL (\\u0000) is not supported",
          "(in s)");
    FAILS("{\"s\": \"ab\\ud800\"}", TBX_E_FORMAT, 9, "\\uD800 is a high surrogate without a "
          "low one after it", NULL);
    FAILS("{\"s\": \"\\ud800\\u0041\"}", TBX_E_FORMAT, 7, "high surrogate", NULL);
    FAILS("{\"s\": \"\\udc00\"}", TBX_E_FORMAT, 7, "\\uDC00 is a low surrogate without a "
          "high one", NULL);
    FAILS("{\"s\": \"\\x\"}", TBX_E_FORMAT, 7, "invalid escape \\x", NULL);
    FAILS("{\"s\": \"\\u12g4\"}", TBX_E_FORMAT, 7, "\\u without 4 hex digits", NULL);
    FAILS("{\"s\": \"a\nb\"}", TBX_E_FORMAT, 8, "control byte 0x0a in a string", NULL);
    FAILS("{\"s\": \"\x7f\x01\"}", TBX_E_FORMAT, 8, "control byte 0x01", NULL);
    FAILS("{\"s\": \"\xc3\x28\"}", TBX_E_FORMAT, 7, "invalid UTF-8 (byte 0xc3)", NULL);
    FAILS("{\"s\": \"\xed\xa0\x80\"}", TBX_E_FORMAT, 7, "invalid UTF-8 (byte 0xed)", NULL);
    FAILS("{\"s\": \"\xc0\xaf\"}", TBX_E_FORMAT, 7, "invalid UTF-8 (byte 0xc0)", NULL);
    FAILS("{\"s\": \"\xf4\x90\x80\x80\"}", TBX_E_FORMAT, 7, "invalid UTF-8 (byte 0xf4)", NULL);
    FAILS("{\"\xff\": 1}", TBX_E_FORMAT, 2, "invalid UTF-8 (byte 0xff)", "(in the top-level");
    FAILS("{\"a\": 1, \xc3\xa9: 2}", TBX_E_FORMAT, 9, "expected '\"' (an object key), found "
          "byte 0xc3", NULL);
    /* the largest code points, escaped and raw */
    const char *ok = "{\"s\": \"\\udbff\\udfff\xf4\x8f\xbf\xbf\\u00e9\\/\\b\\f\\n\\r\\t\\\"\\\\\"}";
    tbx_tokj t;
    tbx_error e;
    CHECK_OK(rd(&t, ok, strlen(ok), &e));
    CHECK(jansson_reads(ok, strlen(ok)));
    tbx_tokj_free(&t);
}

TBX_TEST(syntax_errors_name_the_byte) {
    FAILS("[1]", TBX_E_FORMAT, 0, "tokenizer.json is not a JSON object", NULL);
    FAILS("  \"a\"", TBX_E_FORMAT, 2, "is not a JSON object", NULL);
    FAILS("", TBX_E_TRUNCATED, 0, "the file is empty", NULL);
    FAILS(" \n", TBX_E_TRUNCATED, 2, "only whitespace", NULL);
    FAILS("{\"a\": 1}x", TBX_E_FORMAT, 8, "data after the top-level object", NULL);
    FAILS("{\"a\": 1} {}", TBX_E_FORMAT, 9, "data after the top-level object", NULL);
    FAILS("{\"a\" 1}", TBX_E_FORMAT, 5, "expected ':' after an object key, found '1'", "(in a)");
    FAILS("{\"a\": 1 \"b\": 2}", TBX_E_FORMAT, 8, "expected ',' or '}' after an object member",
          NULL);
    FAILS("{\"a\": 1,}", TBX_E_FORMAT, 8, "expected '\"' (an object key), found '}'", NULL);
    FAILS("{\"a\": [1,]}", TBX_E_FORMAT, 9, "expected a JSON value, found ']'", "(in a[1])");
    FAILS("{\"a\": [1 2]}", TBX_E_FORMAT, 9, "expected ',' or ']' after an array element",
          "(in a)");
    FAILS("{a: 1}", TBX_E_FORMAT, 1, "expected '\"' (an object key) or '}', found 'a'", NULL);
    FAILS("{\"a\": tru}", TBX_E_FORMAT, 9, "expected a JSON value, found '}'", NULL);
    FAILS("{\"a\": nul }", TBX_E_FORMAT, 9, "expected a JSON value", NULL);
    FAILS("{\"a\": True}", TBX_E_FORMAT, 6, "expected a JSON value, found 'T'", NULL);
    FAILS("{\"a\": .5}", TBX_E_FORMAT, 6, "expected a JSON value, found '.'", NULL);
    FAILS("{\"a\": 01}", TBX_E_FORMAT, 7, "expected ',' or '}'", NULL);
    FAILS("{\"a\": -a}", TBX_E_FORMAT, 7, "expected a digit", NULL);
    FAILS("{\"a\": 1.}", TBX_E_FORMAT, 8, "a digit after '.'", NULL);
    FAILS("{\"a\": 1e+}", TBX_E_FORMAT, 9, "a digit in the exponent", NULL);
    FAILS("{\"a\": +1}", TBX_E_FORMAT, 6, "expected a JSON value, found '+'", NULL);
    fails("{\"a\": 1}\x00", 9, TBX_E_FORMAT, 8, "data after", NULL, __LINE__);
    /* a NUL after a number or a literal: invalid JSON, refused (jansson skips it: the one
     * difference, see hf_tokenizer.c) */
    fails("{\"a\": 1\x00}", 9, TBX_E_FORMAT, 7, "expected ',' or '}' after an object member, "
          "found byte 0x00", NULL, __LINE__);
    fails("{\"a\": [true\x00]}", 14, TBX_E_FORMAT, 11, "after an array element", NULL,
          __LINE__);
    CHECK(jansson_raw("{\"a\": 1\x00}", 9) && jansson_raw("{\"a\": [true\x00]}", 14));
    fails("{\"a\": \"b\x00\"}", 11, TBX_E_FORMAT, 8, "control byte 0x00", NULL, __LINE__);
}

TBX_TEST(integers_within_64_bits_and_reals_within_a_double) {
    static const char *const INTS_OK[] = {"9223372036854775807", "-9223372036854775808", "-0",
                                          "0"};
    static const char *const INTS_BAD[] = {"9223372036854775808", "-9223372036854775809",
                                           "18446744073709551616", "99999999999999999999999"};
    char s[700];
    for (size_t i = 0; i < 4; i++) {
        snprintf(s, sizeof s, "{\"n\": %s}", INTS_OK[i]);
        tbx_tokj t;
        tbx_error e;
        CHECK_OK(rd(&t, s, strlen(s), &e));
        int64_t v = 1;
        CHECK(tbx_tokj_int(&t, tbx_tokj_get(&t, 0, "n"), &v));
        CHECK_EQ(v, strtoll(INTS_OK[i], NULL, 10));
        tbx_tokj_free(&t);
    }
    for (size_t i = 0; i < 4; i++) {
        snprintf(s, sizeof s, "{\"n\": %s}", INTS_BAD[i]);
        FAILS(s, TBX_E_OVERFLOW, 6, "is out of range (JSON integers are read as signed 64-bit)",
              "(in n)");
    }
    /* reals: refused exactly when strtod overflows to infinity (what jansson refuses) */
    static const char *const REALS[] = {
        "1.7976931348623157e308", "1.7976931348623158e308", "1.7976931348623159e308",
        "-1.7976931348623159e308", "2e308", "1e309", "0.1e309", "0.2e309", "1e-400",
        "0.000000000000000000001e328", "0.000000000000000000001e330", "1e99999999999",
        "1e-99999999999", "123456789012345678901234567890e280",
        "179769313486231580793728971405303415079934132710037826936173778980444968292764750946"
        "649017977587207096330286416692887910946555547851940402630657488671505820681908902000"
        "708383676273854845817711531764475730270069855571366959622842914819860834936475292719"
        "074168444365510704342711559699508093042880177904174497792.0",
        "179769313486231580793728971405303415079934132710037826936173778980444968292764750946"
        "649017977587207096330286416692887910946555547851940402630657488671505820681908902000"
        "708383676273854845817711531764475730270069855571366959622842914819860834936475292719"
        "074168444365510704342711559699508093042880177904174497791.999",
        "1.79769313486231580793728971405303415079934132710037826936173778980444968292764750946e308",
        "1.79769313486231580793728971405303415079934132710037826936173778980444968292764750945e308",
    };
    int overflowed = 0, finite = 0;
    for (size_t i = 0; i < sizeof REALS / sizeof REALS[0]; i++) {
        snprintf(s, sizeof s, "{\"n\": %s}", REALS[i]);
        int inf = isinf(strtod(REALS[i], NULL));
        overflowed += inf;
        finite += !inf;
        if (inf) {
            FAILS(s, TBX_E_OVERFLOW, 6, "is beyond the range of a double", NULL);
        } else {
            tbx_tokj t;
            tbx_error e;
            tbx_status st = rd(&t, s, strlen(s), &e);
            CHECK_OK(st);
            if (st) fprintf(stderr, "%s: %s\n", REALS[i], e.message);
            CHECK(jansson_reads(s, strlen(s)));
            tbx_tokj_free(&t);
        }
    }
    /* the table holds both sides of the edge */
    CHECK(overflowed >= 7 && finite >= 7);
}

TBX_TEST(the_settings_read_as_a_tree_are_bounded) {
    /* a pre_tokenizer or normalizer of more than 1 MiB of JSON is refused; the same bytes in
     * a member no converter reads (decoder) are checked and left as text */
    static const char *const MEMBER[] = {"pre_tokenizer", "normalizer", "decoder"};
    size_t big = TBX_TOKJ_SMALL_MAX + 10;
    char *s = malloc(big + 64);
    for (int which = 0; which < 3; which++) {
        size_t n = (size_t)sprintf(s, "{\"%s\": \"", MEMBER[which]);
        size_t at = n - 1;
        memset(s + n, 'x', big);
        n += big;
        n += (size_t)sprintf(s + n, "\"}");
        tbx_tokj t;
        tbx_error e;
        tbx_status st = rd(&t, s, n, &e);
        if (which == 2) {
            CHECK_OK(st);
        } else {
            char want[64];
            snprintf(want, sizeof want, "%s is 1048588 bytes of JSON", MEMBER[which]);
            CHECK_EQ(st, TBX_E_LIMIT);
            CHECK_EQ(e.offset, at);
            CHECK(strstr(e.message, want) != NULL);
        }
        tbx_tokj_free(&t);
    }
    free(s);
}

/* A tiny deterministic generator for the mutations below. */
static uint64_t g_rng = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(uint32_t n) {
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (uint32_t)(g_rng % n);
}

TBX_TEST(mutations_read_exactly_as_jansson_reads_them) {
    static const char *const PIECES[] = {"{", "}", "[", "]", "\"", ",", ":", "\\", "\\u0000",
                                         "\\ud800", "\\udc00", "\\u00e9", "1e999", "-",
                                         "\"a\":1,", "\x00", "\x1f", "\xc3", "\xed\xa0\x80",
                                         "\xf4\x90", "9223372036854775808", "true", " "};
    const size_t n0 = sizeof TOK - 1;
    char *buf = malloc(n0 + 256);
    int agree = 1, accepted = 0, refused = 0;
    for (int round = 0; round < 20000; round++) {
        memcpy(buf, TOK, n0);
        size_t n = n0;
        for (uint32_t m = 0, k = 1 + rnd(3); m < k && n > 0; m++) {
            size_t i = rnd((uint32_t)n);
            switch (rnd(4)) {
            case 0: buf[i] = (char)rnd(256); break;
            case 1: memmove(buf + i, buf + i + 1, n - i - 1); n--; break;
            case 2: {
                const char *p = PIECES[rnd(sizeof PIECES / sizeof PIECES[0])];
                size_t l = p[0] ? strlen(p) : 1;
                if (n + l > n0 + 200) break;
                memmove(buf + i + l, buf + i, n - i);
                memcpy(buf + i, p, l);
                n += l;
                break;
            }
            default: { /* a key of the vocabulary repeated */
                size_t j = rnd((uint32_t)n);
                buf[i] = buf[j];
                break;
            }
            }
        }
        tbx_tokj t;
        tbx_error e;
        tbx_status st = rd(&t, buf, n, &e);
        int ours = st == TBX_OK, theirs = jansson_reads(buf, n);
        accepted += ours;
        refused += !ours;
        if (ours != theirs || (!ours && (e.offset > n || !e.message[0]))) {
            if (agree) fprintf(stderr, "round %d: status %d (%s), jansson %s\n", round, (int)st,
                               e.message, theirs ? "reads it" : "refuses it");
            agree = 0;
        }
        tbx_tokj_free(&t);
    }
    free(buf);
    CHECK(agree);
    CHECK(accepted > 1000 && refused > 1000); /* both sides exercised */
}

/* An allocator that tracks the bytes live and their peak. */
typedef struct peak_al { long long live, peak; } peak_al;
static void *pk_alloc(void *ud, size_t n) {
    peak_al *a = ud;
    void *p = malloc(n ? n : 1);
    if (p && (a->live += (long long)n) > a->peak) a->peak = a->live;
    return p;
}
static void *pk_realloc(void *ud, void *p, size_t o, size_t n) {
    peak_al *a = ud;
    void *q = realloc(p, n ? n : 1);
    if (q && (a->live += (long long)n - (long long)o) > a->peak) a->peak = a->live;
    return q;
}
static void pk_free(void *ud, void *p, size_t n) {
    if (p) ((peak_al *)ud)->live -= (long long)n;
    free(p);
}

TBX_TEST(a_large_object_costs_one_index_sized_for_it) {
    /* 10,000 keys: the keys of an open object are held as an index of their positions, 8
     * bytes a slot at most 3/4 full; sized at once that is 10.7 bytes a key, grown by doubling
     * it would be 16,384 slots plus the 8,192 of the table it replaces (196,608 bytes) */
    enum { N = 10000 };
    size_t cap = (size_t)N * 24 + 64, n = 0;
    char *s = malloc(cap);
    n += (size_t)snprintf(s, cap, "{\"model\": {\"vocab\": {");
    for (int i = 0; i < N; i++)
        n += (size_t)snprintf(s + n, cap - n, "%s\"w%d\": %d", i ? ", " : "", i, i);
    n += (size_t)snprintf(s + n, cap - n, "}}}");
    peak_al pa = {0, 0};
    tbx_allocator user = {pk_alloc, pk_realloc, pk_free, &pa};
    tbx_alloc al;
    tbx_alloc_init(&al, &user);
    tbx_tokj t;
    tbx_error e;
    CHECK_OK(tbx_tokj_read(&t, &al, s, n, "tokenizer.json", &e));
    CHECK_EQ(tbx_tokj_count(&t, t.vocab), N);
    tbx_tokj_free(&t);
    CHECK_EQ(pa.live, 0);
    CHECK(pa.peak >= N * 32 / 3);             /* the index is there */
    CHECK(pa.peak <= N * 32 / 3 + 16 * 1024); /* and sized once */
    if (pa.peak > N * 32 / 3 + 16 * 1024) fprintf(stderr, "peak %lld bytes\n", pa.peak);
    free(s);
}

/* Every allocation of a read fails in turn: each run ends in TBX_E_NOMEM without a leak, or
 * succeeds when the failure is one the reader tolerates (an index sized at once that could not
 * be: it grows instead). */
TBX_TEST(every_allocation_failure_is_clean) {
    /* keys escaped and more than are compared one by one (the index and the key stack), and
     * enough of them for the index to be sized at once */
    char s[8192] = "{\"model\": {\"vocab\": {";
    for (int i = 0; i < 100; i++)
        snprintf(s + strlen(s), sizeof s - strlen(s), "\"\\u00e9%d\": %d, ", i, i);
    strcat(s, "\"z\": 30}, \"type\": \"BPE\"}, \"pre_tokenizer\": {\"a\": [1, {\"b\": null}]}}");
    tbx_fail_al count = {1, 0, 0, 0};
    tbx_allocator cal = {tbx_fa_alloc, tbx_fa_realloc, tbx_fa_free, &count};
    tbx_alloc al;
    tbx_alloc_init(&al, &cal);
    tbx_tokj t;
    tbx_error e;
    CHECK_OK(tbx_tokj_read(&t, &al, s, strlen(s), "tokenizer.json", &e));
    tbx_tokj_free(&t);
    const long total = count.calls;
    CHECK(total >= 4);
    CHECK_EQ(count.live, 0);
    int clean = 1, nomem = 0;
    for (long k = 1; k <= total; k++) {
        tbx_fail_al a = {1, 0, k, 0};
        tbx_allocator fal = {tbx_fa_alloc, tbx_fa_realloc, tbx_fa_free, &a};
        tbx_alloc_init(&al, &fal);
        tbx_status st = tbx_tokj_read(&t, &al, s, strlen(s), "tokenizer.json", &e);
        nomem += st == TBX_E_NOMEM;
        if (st != TBX_E_NOMEM && st != TBX_OK) {
            fprintf(stderr, "allocation %ld failed: status %d\n", k, (int)st);
            clean = 0;
        }
        if (a.live != 0) {
            fprintf(stderr, "allocation %ld failed: %lld bytes leaked\n", k, a.live);
            clean = 0;
        }
        tbx_tokj_free(&t);
    }
    CHECK(clean);
    CHECK(nomem >= total - 1); /* only the sizing of the index is tolerated */
}

TBX_TEST_MAIN()
