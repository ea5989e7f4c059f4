/*
 * fuzz_hfindex.c - libFuzzer target: the input is the model.safetensors.index.json of a Hugging
 * Face model directory (src/formats/safetensors_set.c).
 *
 * A directory is made once per process (under $TMPDIR) with two valid shards
 * (model-00001-of-00002.safetensors: a, b; model-00002-of-00002.safetensors: c), a config.json
 * and a 1_Pooling/config.json; every input is written there as the index, and the directory is
 * opened through tbx_open_path with the fuzz limits and the checking allocator (fuzz_walk.h).
 * A failed open must name its field and free everything; an open set is walked (metadata, every
 * tensor and section read, a batch read, the parts named) and closed with nothing left
 * allocated; the validation pass of the directory must accept exactly what opens.
 *
 * Build: cmake -DTBX_FUZZ=ON (clang) -> build/fuzz/fuzz_hfindex; every build also makes
 * build/fuzz/replay_hfindex (replay_main.c), which replays fuzz/corpus/hfindex/.
 */
#define _GNU_SOURCE
#include "fuzz_walk.h"

#include <dirent.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char hf_dir[512];
static char hf_index[600];

static void hf_write(const char *name, const void *p, size_t n) {
    char path[700];
    snprintf(path, sizeof path, "%s/%s", hf_dir, name);
    FILE *fp = fopen(path, "wb");
    if (!fp || (n && fwrite(p, 1, n, fp) != n)) abort();
    if (fclose(fp) != 0) abort();
}

static void hf_st(const char *name, const char *header, const void *body, size_t blen) {
    uint8_t buf[1024];
    size_t h = strlen(header), pad = (8 - h % 8) % 8;
    uint64_t n = h + pad;
    if (8 + n + blen > sizeof buf) abort();
    for (int i = 0; i < 8; i++) buf[i] = (uint8_t)(n >> (8 * i));
    memcpy(buf + 8, header, h);
    memset(buf + 8 + h, ' ', pad);
    memcpy(buf + 8 + n, body, blen);
    hf_write(name, buf, 8 + n + blen);
}

static void hf_cleanup(void) {
    const char *names[] = {"model.safetensors.index.json", "model-00001-of-00002.safetensors",
                           "model-00002-of-00002.safetensors", "config.json",
                           "1_Pooling/config.json", "1_Pooling"};
    char path[700];
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", hf_dir, names[i]);
        if (remove(path) != 0) { /* gone already */ }
    }
    rmdir(hf_dir);
}

static void hf_setup(void) {
    const char *t = getenv("TMPDIR");
    snprintf(hf_dir, sizeof hf_dir, "%s/tbx_fuzz_hfindex_XXXXXX", t && *t ? t : "/tmp");
    if (!mkdtemp(hf_dir)) abort();
    atexit(hf_cleanup);
    static const float ab[3] = {1, 2, 3}, c[2] = {4, 5};
    hf_st("model-00001-of-00002.safetensors",
          "{\"__metadata__\":{\"format\":\"pt\"},"
          "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
          "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}", ab, sizeof ab);
    hf_st("model-00002-of-00002.safetensors",
          "{\"__metadata__\":{\"format\":\"pt\"},"
          "\"c\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", c, sizeof c);
    hf_write("config.json", "{\"model_type\":\"bert\"}", 21);
    char sub[600];
    snprintf(sub, sizeof sub, "%s/1_Pooling", hf_dir);
    if (mkdir(sub, 0700) != 0) abort();
    hf_write("1_Pooling/config.json", "{}", 2);
    snprintf(hf_index, sizeof hf_index, "%s/model.safetensors.index.json", hf_dir);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fz_input(size);
    (void)fz_walk; /* its checks assume one file: the parts are walked here instead */
    if (!hf_dir[0]) hf_setup();
    hf_write("model.safetensors.index.json", data, size);

    fz_heap heap = {0, 0};
    tbx_allocator alloc = fz_allocator(&heap);
    tbx_limits lim;
    fz_limits(&lim);
    tbx_open_options opt;
    tbx_open_options_init(&opt);
    opt.limits = &lim;
    opt.allocator = &alloc;
    opt.threads = 1;
    tbx_file *f = NULL;
    tbx_error err;
    fz_err_reset(&err);
    /* the directory, then the index by path: both name the same set */
    const char *paths[2] = {hf_dir, hf_index};
    tbx_status first = TBX_OK;
    for (int k = 0; k < 2; k++) {
        tbx_status st = tbx_open_path(&f, paths[k], &opt, &err);
        fz_check_status(st, &err, "open");
        if (k == 0) first = st;
        else FZ_CHECK(st == first, "the directory and its index open alike");
        if (st != TBX_OK) {
            FZ_CHECK(f == NULL, "no handle after a failed open");
            FZ_CHECK(heap.live_blocks == 0 && heap.live_bytes == 0,
                     "a failed open frees everything it allocated");
            continue;
        }
        FZ_CHECK(tbx_file_format(f) == TBX_FORMAT_SAFETENSORS, "a set is safetensors");
        fz_ctx cx = {f, NULL, 0, FZ_MAX_VALUES};
        fz_meta(&cx);
        uint64_t nt = tbx_tensor_count(f);
        FZ_CHECK(nt <= 3, "a set holds only its shards' tensors");
        for (uint64_t i = 0; i < nt; i++) {
            size_t len = 0;
            void *buf = fz_read(&cx, 1, i, 0, &len);
            FZ_CHECK(buf != NULL, "every tensor of an open set reads");
            free(buf);
        }
        for (uint64_t i = 0; i < tbx_section_count(f); i++) {
            size_t len = 0;
            void *buf = fz_read(&cx, 2, i, 0, &len);
            FZ_CHECK(buf != NULL, "every section of an open set reads");
            free(buf);
        }
        fz_batch(&cx);
        uint64_t np = tbx_file_part_count(f);
        for (uint64_t i = 0; i < np; i++)
            FZ_CHECK(tbx_file_part_path(f, i, NULL) != NULL, "every part of a set is named");
        tbx_close(f);
        f = NULL;
        FZ_CHECK(heap.live_blocks == 0 && heap.live_bytes == 0,
                 "tbx_close frees everything the handle allocated");
    }
    uint64_t n = UINT64_MAX;
    tbx_status vst = tbx_validate_path(hf_dir, &opt, NULL, NULL, &n);
    FZ_CHECK((vst == TBX_OK) == (first == TBX_OK), "validation accepts exactly what opens");
    FZ_CHECK(heap.live_blocks == 0 && heap.live_bytes == 0,
             "the validation pass frees everything it allocated");
    return 0;
}
