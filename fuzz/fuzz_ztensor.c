/*
 * fuzz_ztensor.c - libFuzzer target: the input is a zTensor (.zt) file.
 *
 * Opens the bytes with tbx_open_memory, the format forced to zTensor (so every input reaches
 * the parser whatever its first bytes), small limits, and an allocator that checks the size
 * handed back to free()/realloc() and that nothing is left allocated after tbx_close() (zstd's
 * own allocations go through it too). Then:
 *   1. walks everything the handle offers (fuzz_walk.h), every component read bounded;
 *   2. decodes every tensor of at most FZ_MAX_DECODE elements with tbx_tensor_read_f32
 *      (densified sparse, dequantized quantized_group) and a sub-range of it;
 *   3. reopens with digest verification and problem reporting on and reads every component
 *      again, so the verification paths run too;
 *   4. runs the validation pass of `tbx validate` on the input (fz_validate: every component
 *      decoded, digests verified, the driver's checks of padding, sparse indices and bool
 *      values); a file it accepts must have opened strictly.
 *
 * Build: cmake -DTBX_FUZZ=ON (clang) -> build/fuzz/fuzz_ztensor; every build also makes
 * build/fuzz/replay_ztensor, which replays files and directories (see replay_main.c).
 * Seeds: fuzz/corpus/ztensor/, written by fuzz/make_ztensor_seeds.py.
 */
#include "fuzz_walk.h"

#include "api.h"
#include "ztensor.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

static void fz_problem(void *ud, const tbx_error *e) {
    uint64_t *n = (uint64_t *)ud;
    FZ_CHECK(e != NULL && e->code != TBX_OK, "a problem has a code");
    FZ_CHECK(memchr(e->message, 0, sizeof e->message) != NULL, "problem message terminated");
    (*n)++;
}

/* Decodes every small tensor to f32, whole and a sub-range that must agree. */
static void fz_decode_all(tbx_file *f) {
    uint64_t nt = tbx_tensor_count(f);
    for (uint64_t i = 0; i < nt && i < FZ_MAX_TENSORS; i++) {
        tbx_tensor_info ti = TBX_TENSOR_INFO_INIT;
        FZ_CHECK(tbx_tensor_info_get(f, i, &ti) == TBX_OK, "tensor info");
        tbx_quant_info q;
        q.struct_size = sizeof q;
        tbx_status qst = tbx_tensor_quant_get(f, i, &q);
        FZ_CHECK((qst == TBX_OK) == (ti.layout == TBX_LAYOUT_QUANT_GROUP),
                 "quantized_group tensors, and only they, are described as quantized");
        if (qst == TBX_OK) {
            tbx_component_info sc;
            FZ_CHECK(tbx_component_info_get(f, i, (uint32_t)q.scale.component, &sc) == TBX_OK &&
                         sc.nelems == q.scale.count && q.block_size >= 1,
                     "quant description matches the scales component");
        }
        if (ti.nelems == 0 || ti.nelems > FZ_MAX_DECODE) continue;
        float *all = malloc((size_t)ti.nelems * sizeof(float));
        float *part = malloc((size_t)ti.nelems * sizeof(float));
        if (!all || !part) { free(all); free(part); continue; }
        tbx_error err;
        fz_err_reset(&err);
        tbx_status st = tbx_tensor_read_f32(f, i, 0, ti.nelems, all, &err);
        fz_check_status(st, &err, "tensor_read_f32");
        if (st == TBX_OK && ti.nelems > 2) {
            uint64_t first = ti.nelems / 3, count = ti.nelems - first - 1;
            fz_err_reset(&err);
            tbx_status st2 = tbx_tensor_read_f32(f, i, first, count, part, &err);
            fz_check_status(st2, &err, "tensor_read_f32 range");
            if (st2 == TBX_OK)
                FZ_CHECK(memcmp(part, all + first, (size_t)count * sizeof(float)) == 0,
                         "a sub-range decodes to the same values as the whole");
        }
        fz_err_reset(&err);
        st = tbx_tensor_read_f32(f, i, ti.nelems, 1, part, &err);
        FZ_CHECK(st != TBX_OK, "a range past the end is refused");
        free(all);
        free(part);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fz_input(size);
    fz_heap heap = {0, 0};
    tbx_status strict;
    tbx_file *f = fz_open_forced(data, size, TBX_FORMAT_ZTENSOR, 0, &heap, NULL, NULL, &strict);
    if (f) {
        fz_walk(f, data, size);
        fz_decode_all(f);
        tbx_close(f);
        FZ_CHECK(heap.live_blocks == 0 && heap.live_bytes == 0,
                 "tbx_close frees everything the handle allocated");
    }

    /* again with verification and problem reporting, plus the driver's validation */
    uint64_t problems = 0;
    f = fz_open_forced(data, size, TBX_FORMAT_ZTENSOR, TBX_OPEN_VERIFY_DIGESTS, &heap, fz_problem,
                       &problems, NULL);
    if (f) {
        tbx_error err;
        tbx_status st;
        uint64_t nt = tbx_tensor_count(f);
        for (uint64_t i = 0; i < nt && i < FZ_MAX_TENSORS; i++) {
            tbx_tensor_info ti = TBX_TENSOR_INFO_INIT;
            tbx_tensor_info_get(f, i, &ti);
            for (uint32_t c = 0; c < ti.ncomponents; c++) {
                size_t need = 0;
                fz_err_reset(&err);
                st = tbx_component_read(f, i, c, NULL, 0, &need, &err);
                if (st != TBX_E_BUFFER_TOO_SMALL || need > FZ_MAX_READ) continue;
                void *buf = malloc(need ? need : 1);
                if (!buf) continue;
                fz_err_reset(&err);
                st = tbx_component_read(f, i, c, buf, need, &need, &err);
                fz_check_status(st, &err, "read (verify)");
                free(buf);
            }
        }
        tbx_close(f);
    }
    FZ_CHECK(heap.live_blocks == 0 && heap.live_bytes == 0,
             "the verifying pass frees everything too");

    if (fz_validate(data, size, TBX_FORMAT_ZTENSOR, &heap) == TBX_OK)
        FZ_CHECK(strict == TBX_OK, "a file the validation accepts opens strictly");
    return 0;
}
