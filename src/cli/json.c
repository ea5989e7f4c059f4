/*
 * json.c - a small streaming JSON emitter for the tbx tool.
 *
 * Output goes straight to a FILE as it is produced (no document tree), so a file with millions
 * of tensors or a vocabulary of 150,000 strings costs no memory. Separators are handled by two
 * flags instead of a per-level stack, so nesting depth is unbounded. Containers up to a chosen
 * depth are laid out one member per line; deeper ones stay on one line.
 *
 * Strings are bytes: valid UTF-8 is written as is, '"' and '\' are escaped, control characters
 * become \u00XX and every byte that is not part of valid UTF-8 becomes \udcXX (the lone
 * surrogate U+DC80..U+DCFF, Python's "surrogateescape" convention, which keeps the original
 * bytes recoverable).
 */
#define _GNU_SOURCE
#include "cli.h"

#include <inttypes.h>
#include <string.h>

void jout_init(json_out *j, FILE *fp, int pretty) {
    memset(j, 0, sizeof *j);
    j->fp = fp;
    j->pretty = pretty;
}

static void indent(json_out *j, int level) {
    fputc('\n', j->fp);
    for (int i = 0; i < level; i++) fputs("  ", j->fp);
}

/* Before a new member of the current container (array item or object key). */
static void member_start(json_out *j) {
    if (j->depth == 0) {
        j->need_comma = 0;
        return;
    }
    if (j->need_comma) fputc(',', j->fp);
    if (j->depth <= j->pretty)
        indent(j, j->depth);
    else if (j->need_comma)
        fputc(' ', j->fp);
}

/* Before a value: after a key nothing, else it is an array member. */
static void value_start(json_out *j) {
    if (j->after_key)
        j->after_key = 0;
    else
        member_start(j);
}

static void value_end(json_out *j) { j->need_comma = 1; }

static void begin(json_out *j, char open) {
    value_start(j);
    fputc(open, j->fp);
    j->depth++;
    j->need_comma = 0;
}

static void end(json_out *j, char close) {
    if (j->depth <= 0) return;
    if (j->need_comma && j->depth <= j->pretty) indent(j, j->depth - 1);
    fputc(close, j->fp);
    j->depth--;
    value_end(j);
}

void jout_begin_object(json_out *j) { begin(j, '{'); }
void jout_end_object(json_out *j) { end(j, '}'); }
void jout_begin_array(json_out *j) { begin(j, '['); }
void jout_end_array(json_out *j) { end(j, ']'); }

/* Length of the valid UTF-8 sequence at s (1..4), or 0 when the byte at s does not start one.
 * Rejects overlong forms, surrogates (U+D800..U+DFFF) and values above U+10FFFF. */
static size_t utf8_seq(const unsigned char *s, size_t n) {
    unsigned char c = s[0];
    if (c < 0x80) return 1;
    size_t need;
    unsigned char lo = 0x80, hi = 0xBF; /* allowed range of the second byte */
    if (c >= 0xC2 && c <= 0xDF) {
        need = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
        need = 3;
        if (c == 0xE0) lo = 0xA0;
        if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        need = 4;
        if (c == 0xF0) lo = 0x90;
        if (c == 0xF4) hi = 0x8F;
    } else {
        return 0;
    }
    if (n < need) return 0;
    if (s[1] < lo || s[1] > hi) return 0;
    for (size_t k = 2; k < need; k++)
        if ((s[k] & 0xC0) != 0x80) return 0;
    return need;
}

void jout_write_escaped(FILE *fp, const char *str, size_t len) {
    static const char hex[] = "0123456789abcdef";
    const unsigned char *s = (const unsigned char *)str;
    size_t i = 0, run = 0; /* s[run, i) is pending plain text */
    while (i < len) {
        unsigned char c = s[i];
        if (c >= 0x20 && c < 0x7F && c != '"' && c != '\\') {
            i++;
            continue;
        }
        size_t k = c >= 0x80 ? utf8_seq(s + i, len - i) : 0;
        if (k > 0) {
            i += k;
            continue;
        }
        if (i > run) fwrite(s + run, 1, i - run, fp);
        if (c == '"' || c == '\\') {
            fputc('\\', fp);
            fputc(c, fp);
        } else {
            char esc[7] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15], 0};
            if (c >= 0x80) { esc[2] = 'd'; esc[3] = 'c'; }
            fputs(esc, fp);
        }
        i++;
        run = i;
    }
    if (i > run) fwrite(s + run, 1, i - run, fp);
}

size_t jout_escaped_width(const char *str, size_t len) {
    return jout_escaped_width_upto(str, len, SIZE_MAX);
}

size_t jout_escaped_width_upto(const char *str, size_t len, size_t cap) {
    const unsigned char *s = (const unsigned char *)str;
    size_t i = 0, w = 0;
    while (i < len && w < cap) {
        unsigned char c = s[i];
        if (c >= 0x20 && c < 0x7F) {
            w += (c == '"' || c == '\\') ? 2 : 1;
            i++;
            continue;
        }
        size_t k = c >= 0x80 ? utf8_seq(s + i, len - i) : 0;
        if (k > 0) {
            w += 1;
            i += k;
        } else {
            w += 6;
            i++;
        }
    }
    return w;
}

size_t jout_utf8_cut(const char *str, size_t len, size_t max) {
    const unsigned char *s = (const unsigned char *)str;
    if (len <= max) return len;
    size_t i = 0;
    while (i < max) {
        size_t k = utf8_seq(s + i, len - i);
        if (k == 0) k = 1; /* an invalid byte stands alone */
        if (i + k > max) break;
        i += k;
    }
    return i;
}

void jout_key(json_out *j, const char *key, size_t len) {
    member_start(j);
    fputc('"', j->fp);
    jout_write_escaped(j->fp, key, len);
    fputs("\": ", j->fp);
    j->after_key = 1;
}

void jout_keyz(json_out *j, const char *key) { jout_key(j, key, strlen(key)); }

void jout_string(json_out *j, const char *s, size_t len) {
    value_start(j);
    fputc('"', j->fp);
    jout_write_escaped(j->fp, s, len);
    fputc('"', j->fp);
    value_end(j);
}

void jout_stringz(json_out *j, const char *s) { jout_string(j, s, strlen(s)); }

void jout_u64(json_out *j, uint64_t v) {
    value_start(j);
    fprintf(j->fp, "%" PRIu64, v);
    value_end(j);
}

void jout_i64(json_out *j, int64_t v) {
    value_start(j);
    fprintf(j->fp, "%" PRId64, v);
    value_end(j);
}

void jout_bool(json_out *j, int v) { jout_raw_value(j, v ? "true" : "false"); }

void jout_null(json_out *j) { jout_raw_value(j, "null"); }

void jout_float(json_out *j, double v, tbx_value_type kind) {
    char buf[CLI_FLOAT_BUF];
    cli_format_float(buf, v, kind);
    value_start(j);
    if (v != v || v - v != 0) { /* NaN or infinite */
        if (j->human)
            fputs(buf, j->fp);
        else
            fprintf(j->fp, "\"%s\"", buf);
    } else {
        fputs(buf, j->fp);
    }
    value_end(j);
}

void jout_hex(json_out *j, const void *data, size_t len) {
    static const char hex[] = "0123456789abcdef";
    const unsigned char *p = (const unsigned char *)data;
    char chunk[512];
    value_start(j);
    fputc('"', j->fp);
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        chunk[n++] = hex[p[i] >> 4];
        chunk[n++] = hex[p[i] & 15];
        if (n == sizeof chunk) {
            fwrite(chunk, 1, n, j->fp);
            n = 0;
        }
    }
    if (n) fwrite(chunk, 1, n, j->fp);
    fputc('"', j->fp);
    value_end(j);
}

void jout_raw_value(json_out *j, const char *text) {
    value_start(j);
    fputs(text, j->fp);
    value_end(j);
}

void jout_append(json_out *j, const char *text) { fputs(text, j->fp); }

void jout_finish(json_out *j) { fputc('\n', j->fp); }
