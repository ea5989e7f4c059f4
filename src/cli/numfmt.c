/*
 * numfmt.c - number formatting for the tbx tool.
 *
 * Floats are printed with the fewest significant digits that read back as the same value in
 * the value's own precision: an f32 metadata value 0.1f prints as 0.1, not 0.10000000149011612.
 * The search tries 1, 2, ... significant digits with "%.*e" and checks each candidate by parsing
 * it back (strtod for f64, strtof for f32; for f16/bf16 by checking that the parsed number lies
 * within the rounding interval of the value, computed exactly from its neighbours). The digits
 * found are then laid out positionally for decimal exponents -4..15 and in scientific notation
 * otherwise, which for f64 gives the same text as Python's repr().
 */
#define _GNU_SOURCE
#include "cli.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Does the decimal `text`, parsed as `d`, round to `v` in a 16-bit float format? `enc`/`dec`
 * convert to and from the format; `inf_bits` is the bit pattern of +Inf. The rounding interval
 * of v is bounded by the midpoints to its neighbours (exact in double: these formats have at
 * most 11 significant bits); ties go to the even pattern. */
static int roundtrips16(double d, double v, uint16_t (*enc)(float), float (*dec)(uint16_t),
                        uint16_t inf_bits) {
    double a = fabs(v), x = fabs(d);
    uint16_t m = (uint16_t)(enc((float)a) & 0x7FFF);
    double mag = dec(m);
    if (mag != a) return x == a; /* not a value of the format: exact match only */
    double up, down;
    if ((uint16_t)(m + 1) < inf_bits)
        up = dec((uint16_t)(m + 1));
    else
        up = mag + (mag - dec((uint16_t)(m - 1))); /* overflow threshold: one more ulp */
    down = m > 0 ? (double)dec((uint16_t)(m - 1)) : -(double)dec(1);
    double hi = (mag + up) / 2, lo = (mag + down) / 2;
    if (x > lo && x < hi) return 1;
    return (x == lo || x == hi) && (m & 1) == 0;
}

static int roundtrips(const char *text, double v, tbx_value_type kind) {
    switch (kind) {
    case TBX_V_F32:
        return strtof(text, NULL) == (float)v;
    case TBX_V_F16:
        return roundtrips16(strtod(text, NULL), v, tbx_f32_to_f16, tbx_f16_to_f32, 0x7C00);
    case TBX_V_BF16:
        return roundtrips16(strtod(text, NULL), v, tbx_f32_to_bf16, tbx_bf16_to_f32, 0x7F80);
    default:
        return strtod(text, NULL) == v;
    }
}

char *cli_format_float(char buf[CLI_FLOAT_BUF], double v, tbx_value_type kind) {
    if (isnan(v)) {
        strcpy(buf, "nan");
        return buf;
    }
    if (isinf(v)) {
        strcpy(buf, v < 0 ? "-inf" : "inf");
        return buf;
    }
    if (kind == TBX_V_F32 || kind == TBX_V_F16 || kind == TBX_V_BF16)
        v = (double)(float)v; /* the value as stored (exact for these kinds) */

    /* Shortest "%.*e" that reads back as v. 17 digits always do for f64. */
    char sci[64];
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(sci, sizeof sci, "%.*e", prec - 1, v);
        if (roundtrips(sci, v, kind)) break;
    }

    /* Split "-d.ddde+XX" into sign, digits and decimal exponent. */
    const char *p = sci;
    int neg = 0;
    if (*p == '-') {
        neg = 1;
        p++;
    }
    char digits[32];
    size_t nd = 0;
    for (; *p && *p != 'e' && *p != 'E'; p++)
        if (*p >= '0' && *p <= '9' && nd < sizeof digits - 1) digits[nd++] = *p;
    while (nd > 1 && digits[nd - 1] == '0') nd--; /* "1.0e+00" style leftovers */
    digits[nd] = 0;
    int exp10 = (*p == 'e' || *p == 'E') ? atoi(p + 1) : 0;

    char *o = buf;
    if (neg) *o++ = '-';
    if (exp10 >= -4 && exp10 < 16) {
        if (exp10 >= 0) {
            /* integer part: digits[0..exp10], padded with zeros */
            for (int k = 0; k <= exp10; k++) *o++ = (size_t)k < nd ? digits[k] : '0';
            *o++ = '.';
            if ((size_t)exp10 + 1 < nd)
                for (size_t k = (size_t)exp10 + 1; k < nd; k++) *o++ = digits[k];
            else
                *o++ = '0';
        } else {
            *o++ = '0';
            *o++ = '.';
            for (int k = 0; k < -exp10 - 1; k++) *o++ = '0';
            for (size_t k = 0; k < nd; k++) *o++ = digits[k];
        }
        *o = 0;
    } else {
        *o++ = digits[0];
        if (nd > 1) {
            *o++ = '.';
            for (size_t k = 1; k < nd; k++) *o++ = digits[k];
        }
        snprintf(o, (size_t)(buf + CLI_FLOAT_BUF - o), "e%c%02d", exp10 < 0 ? '-' : '+',
                 exp10 < 0 ? -exp10 : exp10);
    }
    return buf;
}

char *cli_format_size(char buf[32], uint64_t bytes) {
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    if (bytes < 1024) {
        snprintf(buf, 32, "%" PRIu64 " B", bytes);
        return buf;
    }
    double x = (double)bytes;
    int u = 0;
    while (x >= 1024 && u < 6) {
        x /= 1024;
        u++;
    }
    snprintf(buf, 32, "%.1f %s", x, units[u]);
    return buf;
}
