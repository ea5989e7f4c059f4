/*
 * hf_tokenizer.h - a Hugging Face tokenizer.json read without a tree of its large members
 * (internal; src/models/hf_tokenizer.c). One reader shared by the Hugging Face -> GGUF
 * conversion (hf_gguf.c) and the Hugging Face -> EMBD import's vocabulary (hf_embd.c).
 *
 * tbx_tokj_read checks the whole text as jansson with JSON_REJECT_DUPLICATES would (syntax,
 * UTF-8, escapes, no \u0000, 64-bit integers, finite reals, duplicate keys in every object,
 * nesting up to jansson's 2048 levels; the top level an object) without building a tree: it
 * walks the text once, keeping only the keys of the objects still open (to find duplicates).
 * It then notes where model.vocab, model.merges and added_tokens are (value offsets into the
 * text) and decodes the few small members the converters read as settings into one jansson
 * object, `small`:
 *
 *   {"normalizer": ..., "pre_tokenizer": ..., "post_processor": ...,
 *    "model": {every member but vocab, merges}}
 *
 * (present members only; at most TBX_TOKJ_SMALL_MAX bytes of their text in all). The large
 * members stay text: callers walk them element by element with tbx_tokj_next and decode each
 * small value (tbx_tokj_int, tbx_tokj_str), so a vocabulary costs what the caller builds from
 * it. The text is borrowed: it must outlive the tbx_tokj. Offsets are byte offsets into it
 * (errors carry them); TBX_TOKJ_NONE stands for "absent".
 */
#ifndef TBX_HF_TOKENIZER_H
#define TBX_HF_TOKENIZER_H

#include "core.h"

#include <jansson.h>

#define TBX_TOKJ_NONE SIZE_MAX
#define TBX_TOKJ_MAX_DEPTH 2048                 /* jansson's own parse depth limit */
#define TBX_TOKJ_SMALL_MAX ((size_t)1 << 20)    /* text of the members decoded into `small` */
#define TBX_TOKJ_MAX_BYTES ((size_t)1 << 30)   /* offsets and key indices fit 32 bits */

typedef struct tbx_tokj {
    const tbx_alloc *al;
    const char *p;          /* the text (borrowed) */
    size_t n;
    const char *name;       /* the file's name: field and prefix of messages */
    json_t *small;          /* the settings (above); never NULL after a successful read */
    size_t vocab, merges, added; /* values of model.vocab, model.merges, added_tokens */
} tbx_tokj;

/* A growing buffer for decoded strings (tbx_tokj_str); zero-initialise, free with
 * tbx_tokj_buf_free. */
typedef struct tbx_tokj_buf {
    const tbx_alloc *al;
    char *p;
    size_t cap;
} tbx_tokj_buf;

/* Checks and reads `text` (n bytes) as tokenizer.json named `name`. Errors: TBX_E_FORMAT
 * (syntax, bad UTF-8, control characters, escapes, not an object), TBX_E_TRUNCATED (the text
 * ends inside the JSON), TBX_E_DUPLICATE (a key twice in one object), TBX_E_UNSUPPORTED (a
 * string with \u0000), TBX_E_OVERFLOW (an integer beyond signed 64 bits, a real beyond a
 * double), TBX_E_LIMIT (nesting deeper than TBX_TOKJ_MAX_DEPTH, settings above
 * TBX_TOKJ_SMALL_MAX, a text above TBX_TOKJ_MAX_BYTES), TBX_E_NOMEM; every one with field
 * `name`, the byte offset and the place in the JSON ("model.vocab"). On failure *t holds
 * nothing to free (tbx_tokj_free accepts it). */
tbx_status tbx_tokj_read(tbx_tokj *t, const tbx_alloc *al, const char *text, size_t n,
                         const char *name, tbx_error *err);
void tbx_tokj_free(tbx_tokj *t);
void tbx_tokj_buf_free(tbx_tokj_buf *b);

/* The kind of the value at `at`: '{', '[', '"', '0' (a number), 't', 'f', 'n'; 0 for
 * TBX_TOKJ_NONE. */
char tbx_tokj_kind(const tbx_tokj *t, size_t at);
/* Members of the object or elements of the array at `at` (0 for anything else). */
size_t tbx_tokj_count(const tbx_tokj *t, size_t at);

/* Walks the object or array at `at`: set *it = at, then each tbx_tokj_next gives the next
 * member (*key: its key's '"', *val: its value) or element (*key = TBX_TOKJ_NONE), in text
 * order, and false at the end (at once for a value that is no object or array). */
bool tbx_tokj_next(const tbx_tokj *t, size_t *it, size_t *key, size_t *val);
/* The value of member `key` of the object at `obj`, or TBX_TOKJ_NONE (no such member, or no
 * object). */
size_t tbx_tokj_get(const tbx_tokj *t, size_t obj, const char *key);

/* The integer at `at` (a number without fraction or exponent), or false. */
bool tbx_tokj_int(const tbx_tokj *t, size_t at, int64_t *v);
/* The number at `at` as a double (strtod's nearest; a number of 64 bytes or more, or beyond a
 * double, is refused), or false. */
bool tbx_tokj_real(const tbx_tokj *t, size_t at, double *v);
/* Is the value at `at` `true`? */
bool tbx_tokj_true(const tbx_tokj *t, size_t at);
/* The decoded bytes of the string at `at` (its '"'), *len of them, NUL-terminated when
 * decoded into `b` (a string without escapes points into the text, unterminated). NULL when
 * the value is no string (*len = 0) or when `b` cannot grow (*len = SIZE_MAX). Valid until
 * the next call with the same buffer. */
const char *tbx_tokj_str(const tbx_tokj *t, size_t at, tbx_tokj_buf *b, size_t *len);

/* The split regex of llama.cpp's pre-tokenizer type `pre` ("llama-bpe", "qwen2": the
 * tokenizer.json regexes tensorbox recognises, hf_gguf.c), NULL for another name. */
const char *tbx_hf_bpe_pre_regex_(const char *pre);

#endif /* TBX_HF_TOKENIZER_H */
