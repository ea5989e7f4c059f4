/*
 * test_api_args.c - bad arguments to the public API: NULL pointers with non-zero lengths get the
 * error (or NULL) tensorbox.h promises, never a crash or arithmetic on a NULL pointer (the
 * sanitizer build runs this file too: UBSan reports "applying offset to null pointer").
 */
#define _GNU_SOURCE /* mkdtemp */
#include "tbx_test.h"
#include "tensorbox.h"

#include <stdint.h>
#include <string.h>
#include <unistd.h>

/* A one-tensor safetensors file in memory: "w", F32, shape [4], values 1..4. */
static const char st_header[] =
    "{\"w\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}";

static size_t st_file(uint8_t *buf, size_t cap) {
    size_t hl = sizeof st_header - 1;
    size_t n = 8 + hl + 16;
    if (n > cap) return 0;
    uint64_t len = hl;
    for (int i = 0; i < 8; i++) buf[i] = (uint8_t)(len >> (8 * i));
    memcpy(buf + 8, st_header, hl);
    const float v[4] = {1, 2, 3, 4};
    memcpy(buf + 8 + hl, v, sizeof v); /* the tests run on little-endian hosts */
    return n;
}

TBX_TEST(value_constructors_refuse_null_bytes_with_a_length) {
    CHECK(tbx_value_new_string(NULL, 5) == NULL);
    CHECK(tbx_value_new_bytes(NULL, 5) == NULL);
    CHECK(tbx_value_new_bitset(NULL, 100) == NULL);
    const uint64_t shape[1] = {4};
    CHECK(tbx_value_new_ndarray(TBX_DT_F32, shape, 1, NULL, 16) == NULL);
    CHECK(tbx_value_new_ndarray(TBX_DT_F32, NULL, 1, "0123456789abcdef", 16) == NULL);

    /* zero lengths with NULL are fine: empty values */
    tbx_value *s = tbx_value_new_string(NULL, 0);
    CHECK(s != NULL);
    size_t len = 99;
    const char *p = tbx_value_get_str(s, &len);
    CHECK(p != NULL && len == 0 && p[0] == '\0');
    tbx_value_free(s);
    tbx_value *b = tbx_value_new_bytes(NULL, 0);
    CHECK(b != NULL && tbx_value_len(b) == 0);
    tbx_value_free(b);
    tbx_value *bs = tbx_value_new_bitset(NULL, 0);
    CHECK(bs != NULL && tbx_value_len(bs) == 0);
    tbx_value_free(bs);
}

TBX_TEST(read_f32_with_a_null_output_is_invalid_arg) {
    uint8_t buf[256];
    size_t n = st_file(buf, sizeof buf);
    CHECK(n > 0);
    tbx_file *f = NULL;
    tbx_error err;
    CHECK_OK(tbx_open_memory(&f, buf, n, NULL, &err));
    if (!f) return;
    memset(&err, 0, sizeof err);
    CHECK_EQ(tbx_tensor_read_f32(f, 0, 0, 4, NULL, &err), TBX_E_INVALID_ARG);
    CHECK_EQ(err.code, TBX_E_INVALID_ARG);
    CHECK(err.message[0] != '\0');
    CHECK_EQ(tbx_tensor_read_f32(f, 0, 1, 2, NULL, &err), TBX_E_INVALID_ARG);
    /* nothing asked, nothing written: a NULL output is fine */
    CHECK_OK(tbx_tensor_read_f32(f, 0, 0, 0, NULL, &err));
    float out[4] = {0};
    CHECK_OK(tbx_tensor_read_f32(f, 0, 0, 4, out, &err));
    CHECK(out[0] == 1.0f && out[3] == 4.0f);
    CHECK_EQ(tbx_tensor_read_range(f, 0, 0, NULL, 4, &err), TBX_E_INVALID_ARG);
    tbx_close(f);
}

TBX_TEST(writer_refuses_null_data_with_a_length) {
    char dir[512];
    CHECK(mkdtemp(tbx_test_tmppath(dir, sizeof dir, "tbx_api_args_XXXXXX")) != NULL);
    char path[600];
    snprintf(path, sizeof path, "%s/out.gguf", dir);
    tbx_writer *w = NULL;
    tbx_error err;
    CHECK_OK(tbx_writer_open(&w, path, NULL, &err));
    if (!w) return;
    CHECK_EQ(tbx_writer_add_section(w, "s", 0, NULL, 5, &err), TBX_E_INVALID_ARG);
    CHECK_EQ(tbx_writer_add_meta(w, NULL, 3, NULL, &err), TBX_E_INVALID_ARG);
    const uint64_t shape[1] = {4};
    tbx_tensor_desc d = {sizeof(tbx_tensor_desc), "w", 0, TBX_DT_F32, 1, shape, 1};
    uint64_t idx = 0;
    CHECK_OK(tbx_writer_add_tensor(w, &d, &idx, &err));
    CHECK_EQ(tbx_writer_write_tensor(w, idx, NULL, 16, &err), TBX_E_INVALID_ARG);
    tbx_writer_abort(w);
    rmdir(dir);
}

/* Internal flags (the GGUF editor's "replace the locked file") are not reachable through the
 * public API: any flag but TBX_WRITE_OVERWRITE is refused, also when it comes in through
 * tbx_convert's write options. */
TBX_TEST(writer_refuses_unknown_flags) {
    char dir[512];
    CHECK(mkdtemp(tbx_test_tmppath(dir, sizeof dir, "tbx_api_flags_XXXXXX")) != NULL);
    char path[600];
    snprintf(path, sizeof path, "%s/out.gguf", dir);
    tbx_write_options wo;
    tbx_write_options_init(&wo);
    tbx_error err;
    for (unsigned bit = 3; bit < 32; bit++) { /* bits 1, 2: TBX_WRITE_NO_DEDUP, _NO_SYNC */
        wo.flags = 1u << bit;
        tbx_writer *w = (tbx_writer *)&wo; /* must be reset to NULL */
        CHECK_EQ(tbx_writer_open(&w, path, &wo, &err), TBX_E_INVALID_ARG);
        CHECK(w == NULL);
        CHECK(access(path, F_OK) != 0);
    }
    uint8_t buf[256];
    size_t n = st_file(buf, sizeof buf);
    tbx_file *f = NULL;
    CHECK_OK(tbx_open_memory(&f, buf, n, NULL, &err));
    tbx_convert_options co;
    tbx_convert_options_init(&co);
    co.write.flags = 0x80000000u;
    CHECK_EQ(tbx_convert(f, path, &co, &err), TBX_E_INVALID_ARG);
    CHECK(access(path, F_OK) != 0);
    co.write.flags = 0x40000000u; /* TBX_WRITE_QUANTIZING_ is internal too */
    CHECK_EQ(tbx_convert(f, path, &co, &err), TBX_E_INVALID_ARG);
    CHECK(access(path, F_OK) != 0);
    co.write.flags = 0;
    /* conversion flags: 0x10 / 0x20 (once QUANT_MANTLE / QUANT_CLIP, now MCF's write options)
     * and every bit above TBX_CONVERT_STRICT are refused, by tbx_convert_check too */
    for (unsigned bit = 4; bit < 32; bit++) {
        if (bit >= 6 && bit <= 9) continue; /* RAW, DROP_UNREADABLE, REQUANTIZE, STRICT */
        co.flags = 1u << bit;
        CHECK_EQ(tbx_convert_check(path, &co, &err), TBX_E_INVALID_ARG);
        CHECK_STR(err.field, "flags");
        CHECK_EQ(tbx_convert(f, path, &co, &err), TBX_E_INVALID_ARG);
        CHECK(access(path, F_OK) != 0);
    }
    /* a requantization with nothing to quantize to would be a silent no-op: refused */
    co.flags = TBX_CONVERT_REQUANTIZE;
    CHECK_EQ(tbx_convert_check(path, &co, &err), TBX_E_INVALID_ARG);
    CHECK(strstr(err.message, "quant_to") != NULL);
    CHECK_EQ(tbx_convert(f, path, &co, &err), TBX_E_INVALID_ARG);
    CHECK(access(path, F_OK) != 0);
    co.quant_to = TBX_DT_Q8_0; /* with one it is fine */
    CHECK_OK(tbx_convert_check(path, &co, &err));
    co.quant_to = TBX_DT_INVALID;
    co.flags = 0;
    CHECK_EQ(tbx_convert_check(NULL, &co, &err), TBX_E_INVALID_ARG);
    CHECK_OK(tbx_convert_check(path, NULL, &err));
    CHECK(access(path, F_OK) != 0); /* a check leaves nothing behind */
    tbx_close(f);
    rmdir(dir);
}

TBX_TEST_MAIN()
