/*
 * fuzz_oinf.c - libFuzzer target: the input is an OINF file.
 *
 * Each input is opened twice with tbx_open_memory, the format forced to OINF (so every input
 * reaches the parser whatever its first bytes), small limits and an allocator that checks the
 * size handed back to free()/realloc() and that nothing is left allocated after tbx_close():
 *   1. strict (no problem callback): the first problem fails the open;
 *   2. tolerant (a problem callback, as tbx_validate uses): recoverable problems are counted and
 *      the open goes on, reaching the code after them.
 * An open handle is walked through every read-only accessor (fuzz_walk.h) and the OINF ones of
 * src/formats/oinf.h (size variables, quantization parameters), whose promises are checked:
 * names match the charset, per-channel counts equal the shape along the axis. Then the
 * validation pass runs on the input (fz_validate); a file it accepts must open strictly.
 *
 * Build: cmake -DTBX_FUZZ=ON (clang) -> build/fuzz/fuzz_oinf; every build also makes
 * build/fuzz/replay_oinf, which replays files and directories (see replay_main.c). Seeds:
 * fuzz/corpus/oinf (fuzz/make_oinf_seeds.py).
 */
#include "fuzz_walk.h"
#include "oinf.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

static int fz_name_ok(const char *s, size_t n) {
    if (n == 0 || strlen(s) != n) return 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-'))
            return 0;
    }
    return 1;
}

/* The OINF-specific accessors and what they promise. */
static void fz_oinf(tbx_file *f, size_t size) {
    (void)size;
    uint64_t nsv = tbx_oinf_sizevar_count(f);
    for (uint64_t i = 0; i < nsv && i < FZ_MAX_TENSORS; i++) {
        const char *name = NULL;
        size_t len = 0;
        uint64_t value = 0;
        FZ_CHECK(tbx_oinf_sizevar_get(f, i, &name, &len, &value) == TBX_OK, "sizevar in range");
        FZ_CHECK(name && fz_name_ok(name, len), "sizevar names match the charset");
        fz_touch(name, len);
    }
    FZ_CHECK(tbx_oinf_sizevar_get(f, nsv, NULL, NULL, NULL) != TBX_OK, "sizevar out of range");
    uint64_t nt = tbx_tensor_count(f);
    for (uint64_t i = 0; i < nt && i < FZ_MAX_TENSORS; i++) {
        tbx_tensor_info ti = TBX_TENSOR_INFO_INIT;
        FZ_CHECK(tbx_tensor_info_get(f, i, &ti) == TBX_OK, "tensor info");
        FZ_CHECK(fz_name_ok(ti.name, ti.name_len), "tensor names match the charset");
        tbx_oinf_quant q;
        tbx_status st = tbx_oinf_tensor_quant(f, i, &q);
        FZ_CHECK(st == TBX_OK || st == TBX_E_NOT_FOUND, "quant lookup");
        if (st != TBX_OK) continue;
        FZ_CHECK(tbx_file_version(f) >= 2, "quantization parameters only in version 2");
        FZ_CHECK(ti.ncomponents == 1, "quantized tensors have data");
        FZ_CHECK(q.scale_count == (q.scale_mode == 2 ? ti.shape[q.scale_axis] : 1),
                 "scale count matches the mode and shape");
        FZ_CHECK(q.zp_count == (q.zp_mode == 2 ? ti.shape[q.zp_axis] : q.zp_mode),
                 "zero point count matches the mode and shape");
        fz_touch(q.scales, (size_t)q.scale_count * sizeof *q.scales);
        if (q.zp_count) fz_touch(q.zero_points, (size_t)q.zp_count * sizeof *q.zero_points);
    }
    for (uint64_t i = 0; i < tbx_meta_count(f) && i < FZ_MAX_TENSORS; i++) {
        size_t klen = 0;
        const char *key = tbx_meta_key(f, i, &klen);
        FZ_CHECK(key && fz_name_ok(key, klen), "metadata keys match the charset");
        const tbx_value *v = tbx_meta_value(f, i);
        size_t slen = 0;
        const char *s = tbx_value_get_str(v, &slen);
        if (tbx_value_type_of(v) == TBX_V_STRING)
            FZ_CHECK(fz_name_ok(s, slen), "string values match the charset");
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fz_input(size);
    fz_open_both_and_validate(data, size, TBX_FORMAT_OINF, 0, 1u << 1 | 1u << 2, fz_oinf);
    return 0;
}
