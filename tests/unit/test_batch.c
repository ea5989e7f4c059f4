/*
 * test_batch.c - reading many components on worker threads (tbx_read_batch), threaded
 * validation, raw zTensor data served straight from the file (maps, range reads) with digests
 * verified first, and zTensor writes that do not depend on the thread count.
 *
 * The files are written through the public writer with random and repetitive tensors, raw and
 * zstd, with and without digests; every expectation is checked against the data the test
 * generated, not against an earlier output of the library.
 */
#define _POSIX_C_SOURCE 200809L /* setenv, getpid */
#include "tbx_test.h" /* TBX_TEST_LABEL_THREADS: ctest label "threads", run under TSan too */

#include "tensorbox.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NT 24

static uint8_t *g_data[NT];
static size_t g_nb[NT];

static char *temp_path(const char *tag) {
    static int counter;
    char *path = malloc(600);
    tbx_test_tmppath(path, 600, "tbx_test_batch_%d_%s_%d.zt", (int)getpid(), tag, counter++);
    unlink(path);
    return path;
}

/* Tensors of varied sizes: even ones random (stay raw), odd ones repetitive (compress). */
static void make_data(void) {
    uint64_t x = 0x9E3779B97F4A7C15ull;
    for (size_t i = 0; i < NT; i++) {
        g_nb[i] = 4 * (1000 + 7919 * i % 50000);
        g_data[i] = malloc(g_nb[i]);
        for (size_t k = 0; k < g_nb[i]; k++) {
            x ^= x << 13; x ^= x >> 7; x ^= x << 17;
            g_data[i][k] = (i % 2) ? (uint8_t)((k / 4) % 13) : (uint8_t)x;
        }
    }
}

static void free_data(void) {
    for (size_t i = 0; i < NT; i++) free(g_data[i]);
}

/* Writes the NT tensors to a new zTensor file; returns TBX_OK or the failing status. */
static tbx_status write_zt(const char *path, int level, const char *digest, uint32_t threads,
                           uint64_t buffer_limit) {
    tbx_write_options o;
    tbx_write_options_init(&o);
    o.format = TBX_FORMAT_ZTENSOR;
    o.compress_level = level;
    o.digest = digest;
    o.threads = threads;
    o.buffer_limit = buffer_limit;
    tbx_writer *w = NULL;
    tbx_error e;
    tbx_status st = tbx_writer_open(&w, path, &o, &e);
    if (st != TBX_OK) return st;
    for (size_t i = 0; i < NT && st == TBX_OK; i++) {
        uint64_t shape[1] = {g_nb[i] / 4};
        char name[32];
        snprintf(name, sizeof name, "t%02zu", i);
        tbx_tensor_desc d = {sizeof(tbx_tensor_desc), name, 0, TBX_DT_F32, 1, shape, 1};
        st = tbx_writer_add_tensor(w, &d, NULL, &e);
    }
    /* in chunks, the way tbx convert feeds a writer */
    for (size_t i = 0; i < NT && st == TBX_OK; i++)
        for (size_t off = 0; off < g_nb[i] && st == TBX_OK; off += 65536) {
            size_t len = g_nb[i] - off < 65536 ? g_nb[i] - off : 65536;
            st = tbx_writer_write_tensor(w, i, g_data[i] + off, len, &e);
        }
    if (st != TBX_OK) {
        fprintf(stderr, "write: %s\n", e.message);
        tbx_writer_abort(w);
        return st;
    }
    st = tbx_writer_finish(w, &e);
    if (st != TBX_OK) fprintf(stderr, "finish: %s\n", e.message);
    return st;
}

static tbx_file *open_zt(const char *path, uint32_t flags, uint32_t threads) {
    tbx_open_options o;
    tbx_open_options_init(&o);
    o.flags = flags;
    o.threads = threads;
    tbx_file *f = NULL;
    tbx_error e;
    if (tbx_open_path(&f, path, &o, &e) != TBX_OK) {
        fprintf(stderr, "open %s: %s\n", path, e.message);
        return NULL;
    }
    return f;
}

/* Batch reads give every tensor's bytes whatever the thread count, encoded or not. */
TBX_TEST(batch_read_equals_data) {
    make_data();
    const char *digests[3] = {NULL, "crc32c", "sha256"};
    for (int dg = 0; dg < 3; dg++) {
        char *path = temp_path("read");
        CHECK_OK(write_zt(path, 3, digests[dg], 1, 0));
        const uint32_t threads[4] = {1, 2, 5, 0};
        for (int ti = 0; ti < 4; ti++) {
            tbx_file *f = open_zt(path, TBX_OPEN_VERIFY_DIGESTS | (ti % 2 ? TBX_OPEN_MMAP : 0),
                                  threads[ti]);
            CHECK(f != NULL);
            if (!f) continue;
            tbx_read_req req[NT];
            memset(req, 0, sizeof req);
            int nzstd = 0;
            for (size_t i = 0; i < NT; i++) {
                req[i].tensor = i;
                req[i].buf = malloc(g_nb[i]);
                req[i].cap = g_nb[i];
                req[i].status = TBX_E_STATE; /* overwritten */
                tbx_component_info ci = TBX_COMPONENT_INFO_INIT;
                CHECK_OK(tbx_component_info_get(f, i, 0, &ci));
                nzstd += ci.encoding == TBX_ENC_ZSTD;
            }
            CHECK_EQ(nzstd, NT / 2); /* both kinds are exercised */
            tbx_error e;
            CHECK_OK(tbx_read_batch(f, req, NT, threads[ti], &e));
            for (size_t i = 0; i < NT; i++) {
                CHECK_OK(req[i].status);
                CHECK(memcmp(req[i].buf, g_data[i], g_nb[i]) == 0);
                free(req[i].buf);
            }
            tbx_close(f);
        }
        unlink(path);
        free(path);
    }
    free_data();
}

/* Bad requests fail alone, each with its own error; the call returns the first failure. */
TBX_TEST(batch_bad_requests) {
    make_data();
    char *path = temp_path("bad");
    CHECK_OK(write_zt(path, 3, NULL, 1, 0));
    tbx_file *f = open_zt(path, 0, 2);
    CHECK(f != NULL);
    if (f) {
        tbx_read_req req[5];
        memset(req, 0, sizeof req);
        uint8_t *b1 = malloc(g_nb[1]), *b2 = malloc(g_nb[2]), *small = malloc(8);
        req[0] = (tbx_read_req){.tensor = 1, .buf = b1, .cap = g_nb[1]};
        req[1] = (tbx_read_req){.tensor = NT + 3, .buf = b1, .cap = g_nb[1]};
        req[2] = (tbx_read_req){.tensor = 3, .buf = small, .cap = 8};
        req[3] = (tbx_read_req){.tensor = 2, .component = 1, .buf = b2, .cap = g_nb[2]};
        req[4] = (tbx_read_req){.tensor = 2, .buf = b2, .cap = g_nb[2]};
        tbx_error e;
        CHECK_EQ(tbx_read_batch(f, req, 5, 0, &e), TBX_E_INVALID_ARG);
        CHECK(strstr(e.message, "out of range") != NULL);
        CHECK_OK(req[0].status);
        CHECK(memcmp(b1, g_data[1], g_nb[1]) == 0);
        CHECK_EQ(req[1].status, TBX_E_INVALID_ARG);
        CHECK_EQ(req[2].status, TBX_E_BUFFER_TOO_SMALL);
        CHECK(strstr(req[2].error.message, "needs a buffer") != NULL);
        CHECK_EQ(req[3].status, TBX_E_INVALID_ARG);
        CHECK(strstr(req[3].error.message, "no component 1") != NULL);
        CHECK_OK(req[4].status);
        CHECK(memcmp(b2, g_data[2], g_nb[2]) == 0);
        CHECK_OK(tbx_read_batch(f, NULL, 0, 0, &e));
        CHECK_EQ(tbx_read_batch(f, NULL, 1, 0, &e), TBX_E_INVALID_ARG);
        CHECK_EQ(tbx_read_batch(NULL, req, 1, 0, &e), TBX_E_INVALID_ARG);
        free(b1);
        free(b2);
        free(small);
    }
    tbx_close(f);
    unlink(path);
    free(path);
    free_data();
}

/* Flips one stored byte of tensor i's component (found through the public info). */
static void corrupt(const char *path, size_t i) {
    tbx_file *f = open_zt(path, 0, 1);
    tbx_component_info ci = TBX_COMPONENT_INFO_INIT;
    CHECK_OK(tbx_component_info_get(f, i, 0, &ci));
    tbx_close(f);
    FILE *fp = fopen(path, "r+b");
    fseek(fp, (long)(ci.offset + ci.stored_bytes / 2), SEEK_SET);
    int c = fgetc(fp);
    fseek(fp, (long)(ci.offset + ci.stored_bytes / 2), SEEK_SET);
    fputc(c ^ 0x40, fp);
    fclose(fp);
}

/* Raw zTensor data is mapped and range-read straight from the file; with verification on a
 * pending digest is checked first, and a bad one refuses the map, the range and the f32 read. */
TBX_TEST(raw_map_and_range_with_digests) {
    make_data();
    char *path = temp_path("map");
    CHECK_OK(write_zt(path, 3, "sha256", 1, 0));
    tbx_file *f = open_zt(path, TBX_OPEN_MMAP | TBX_OPEN_VERIFY_DIGESTS, 1);
    CHECK(f != NULL);
    if (f) {
        const void *p = NULL;
        size_t len = 0;
        tbx_error e;
        CHECK_OK(tbx_tensor_map(f, 0, &p, &len, &e)); /* tensor 0: random, stored raw */
        CHECK(len == g_nb[0] && memcmp(p, g_data[0], len) == 0);
        CHECK_EQ(tbx_tensor_map(f, 1, &p, &len, &e), TBX_E_UNSUPPORTED); /* zstd */
        uint8_t buf[100];
        CHECK_OK(tbx_tensor_read_range(f, 2, 40, buf, sizeof buf, &e));
        CHECK(memcmp(buf, g_data[2] + 40, sizeof buf) == 0);
    }
    tbx_close(f);

    corrupt(path, 4); /* raw */
    corrupt(path, 5); /* zstd */
    for (int mm = 0; mm < 2; mm++) {
        f = open_zt(path, TBX_OPEN_VERIFY_DIGESTS | (mm ? TBX_OPEN_MMAP : 0), 1);
        CHECK(f != NULL);
        if (!f) continue;
        tbx_error e;
        uint8_t buf[64];
        const void *p = NULL;
        size_t len = 0;
        CHECK_EQ(tbx_tensor_map(f, 4, &p, &len, &e), mm ? TBX_E_CHECKSUM : TBX_E_UNSUPPORTED);
        CHECK_EQ(tbx_tensor_read_range(f, 4, 0, buf, sizeof buf, &e), TBX_E_CHECKSUM);
        CHECK(strstr(e.message, "\"t04\"") != NULL);
        float fl[4];
        CHECK_EQ(tbx_tensor_read_f32(f, 4, 0, 4, fl, &e), TBX_E_CHECKSUM);
        /* a failed digest keeps failing; the neighbours still read */
        CHECK_EQ(tbx_tensor_read_range(f, 4, 0, buf, sizeof buf, &e), TBX_E_CHECKSUM);
        CHECK_OK(tbx_tensor_read_range(f, 6, 0, buf, sizeof buf, &e));
        CHECK(memcmp(buf, g_data[6], sizeof buf) == 0);
        tbx_read_req req[3] = {{.tensor = 3}, {.tensor = 4}, {.tensor = 5}};
        for (int k = 0; k < 3; k++) {
            req[k].cap = g_nb[req[k].tensor];
            req[k].buf = malloc(req[k].cap);
        }
        CHECK_EQ(tbx_read_batch(f, req, 3, 3, &e), TBX_E_CHECKSUM);
        CHECK(strstr(e.message, "\"t04\"") != NULL);
        CHECK_OK(req[0].status);
        CHECK(memcmp(req[0].buf, g_data[3], g_nb[3]) == 0);
        CHECK_EQ(req[1].status, TBX_E_CHECKSUM);
        CHECK_EQ(req[2].status, TBX_E_CHECKSUM);
        CHECK(strstr(req[2].error.message, "\"t05\"") != NULL);
        for (int k = 0; k < 3; k++) free(req[k].buf);
        tbx_close(f);
    }
    /* without verification the bytes are served as stored */
    f = open_zt(path, TBX_OPEN_MMAP, 1);
    if (f) {
        const void *p = NULL;
        size_t len = 0;
        tbx_error e;
        CHECK_OK(tbx_tensor_map(f, 4, &p, &len, &e));
        CHECK(len == g_nb[4] && memcmp(p, g_data[4], len) != 0);
    }
    tbx_close(f);
    unlink(path);
    free(path);
    free_data();
}

typedef struct probs {
    int n;
    char msg[8][400];
} probs;

static void collect(void *ud, const tbx_error *e) {
    probs *p = ud;
    if (p->n < 8) snprintf(p->msg[p->n], sizeof p->msg[0], "%d@%llu %s", (int)e->code,
                           (unsigned long long)e->offset, e->message);
    p->n++;
}

/* Validation reports the same problems in the same (file) order whatever the thread count. */
TBX_TEST(validate_order_independent_of_threads) {
    make_data();
    char *path = temp_path("val");
    CHECK_OK(write_zt(path, 3, "crc32c", 1, 0));
    corrupt(path, 3);
    corrupt(path, 8);
    corrupt(path, 17);
    corrupt(path, 20);
    probs ref;
    memset(&ref, 0, sizeof ref);
    const uint32_t threads[4] = {1, 2, 4, 7};
    for (int ti = 0; ti < 4; ti++) {
        tbx_open_options o;
        tbx_open_options_init(&o);
        o.threads = threads[ti];
        probs pr;
        memset(&pr, 0, sizeof pr);
        uint64_t np = 0;
        tbx_status st = tbx_validate_path(path, &o, collect, &pr, &np);
        CHECK(st == TBX_E_CHECKSUM || st == TBX_E_FORMAT);
        CHECK_EQ(np, 4);
        CHECK_EQ(pr.n, 4);
        if (ti == 0) {
            ref = pr;
            /* file order: t03 first, t20 last */
            CHECK(strstr(ref.msg[0], "\"t03\"") != NULL);
            CHECK(strstr(ref.msg[3], "\"t20\"") != NULL);
        } else {
            for (int k = 0; k < 4; k++) CHECK_STR(pr.msg[k], ref.msg[k]);
        }
    }
    unlink(path);
    free(path);
    free_data();
}

/* zTensor writes compress on worker threads; the bytes are the same for any thread count and
 * buffer limit, and read back as the data. */
TBX_TEST(zstd_write_independent_of_threads) {
    make_data();
    const char *digests[2] = {NULL, "sha256"};
    for (int dg = 0; dg < 2; dg++) {
        struct { uint32_t threads; uint64_t limit; } cfg[5] = {
            {1, 0}, {2, 0}, {5, 0}, {3, 100000}, {0, 1}};
        uint8_t *ref = NULL;
        size_t ref_n = 0;
        for (int k = 0; k < 5; k++) {
            char *path = temp_path("w");
            CHECK_OK(write_zt(path, 3, digests[dg], cfg[k].threads, cfg[k].limit));
            size_t n;
            uint8_t *p = tbx_test_slurp(path, &n);
            if (k == 0) {
                ref = p;
                ref_n = n;
                tbx_file *f = open_zt(path, TBX_OPEN_VERIFY_DIGESTS, 1);
                CHECK(f != NULL);
                for (size_t i = 0; f && i < NT; i++) {
                    uint8_t *buf = malloc(g_nb[i]);
                    size_t need = 0;
                    tbx_error e;
                    CHECK_OK(tbx_tensor_read(f, i, buf, g_nb[i], &need, &e));
                    CHECK(need == g_nb[i] && memcmp(buf, g_data[i], need) == 0);
                    tbx_component_info ci = TBX_COMPONENT_INFO_INIT;
                    CHECK_OK(tbx_component_info_get(f, i, 0, &ci));
                    CHECK_EQ(ci.encoding, i % 2 ? TBX_ENC_ZSTD : TBX_ENC_RAW);
                    CHECK_EQ(ci.offset % 64, 0);
                    free(buf);
                }
                tbx_close(f);
            } else {
                CHECK(p && n == ref_n && memcmp(p, ref, n) == 0);
                free(p);
            }
            unlink(path);
            free(path);
        }
        free(ref);
    }
    free_data();
}

/* tbx_convert quantizes on worker threads (env TBX_THREADS): the same bytes for 1, 2 and 5. */
TBX_TEST(convert_quantize_independent_of_threads) {
    char *src = temp_path("qsrc");
    size_t sl = strlen(src);
    memcpy(src + sl - 3, ".safetensors", 13); /* temp_path leaves room: 128 bytes */
    tbx_write_options o;
    tbx_write_options_init(&o);
    tbx_writer *w = NULL;
    tbx_error e;
    CHECK_OK(tbx_writer_open(&w, src, &o, &e));
    const uint64_t rows = 96, cols = 4096; /* 6 chunks of 2^19 elements: several jobs */
    float *vals = malloc(rows * cols * sizeof *vals);
    uint64_t x = 42;
    for (uint64_t i = 0; i < rows * cols; i++) {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        vals[i] = (float)((int64_t)(x % 2001) - 1000) / 250.0f;
    }
    uint64_t shape[2] = {rows, cols};
    tbx_tensor_desc d = {sizeof(tbx_tensor_desc), "w", 0, TBX_DT_F32, 2, shape, 1};
    CHECK_OK(tbx_writer_add_tensor(w, &d, NULL, &e));
    CHECK_OK(tbx_writer_write_tensor(w, 0, vals, rows * cols * sizeof *vals, &e));
    CHECK_OK(tbx_writer_finish(w, &e));
    free(vals);
    const char *dtypes[2] = {"q4_K", "q8_0"};
    for (int q = 0; q < 2; q++) {
        uint8_t *ref = NULL;
        size_t ref_n = 0;
        const char *threads[3] = {"1", "2", "5"};
        for (int k = 0; k < 3; k++) {
            setenv("TBX_THREADS", threads[k], 1);
            char *out = temp_path("q");
            sl = strlen(out);
            memcpy(out + sl - 3, ".gguf", 6);
            tbx_file *f = NULL;
            CHECK_OK(tbx_open_path(&f, src, NULL, &e));
            tbx_convert_options co;
            tbx_convert_options_init(&co);
            co.quant_to = tbx_dtype_from_name(dtypes[q]);
            CHECK(co.quant_to != TBX_DT_INVALID);
            CHECK_OK(tbx_convert(f, out, &co, &e));
            tbx_close(f);
            size_t n;
            uint8_t *p = tbx_test_slurp(out, &n);
            CHECK(p && n > rows * cols / 4);
            if (k == 0) {
                ref = p;
                ref_n = n;
            } else {
                CHECK(p && n == ref_n && memcmp(p, ref, n) == 0);
                free(p);
            }
            unlink(out);
            free(out);
        }
        free(ref);
    }
    unsetenv("TBX_THREADS");
    unlink(src);
    free(src);
}

/* tbx_tensor_read_f32 of MCF's quantized tensors from several threads on one handle (the
 * Python package reads one handle from many threads): the driver's decoding keeps its
 * scratch per call, so every thread gets the single-threaded values (and TSan sees no race;
 * before, every call shared one read buffer and one float buffer held by the handle). */
typedef struct mcf_job {
    tbx_file *f;
    float **ref;
    uint64_t *n;
    uint64_t nt;
    int bad;
} mcf_job;

static void *mcf_reader(void *ud) {
    mcf_job *j = ud;
    for (int round = 0; round < 20; round++)
        for (uint64_t i = 0; i < j->nt; i++) {
            if (!j->ref[i]) continue;
            float *v = malloc(j->n[i] * sizeof *v + 1);
            tbx_error e;
            if (!v || tbx_tensor_read_f32(j->f, i, 0, j->n[i], v, &e) != TBX_OK ||
                memcmp(v, j->ref[i], j->n[i] * sizeof *v) != 0)
                j->bad++;
            free(v);
        }
    return NULL;
}

TBX_TEST(mcf_read_f32_threads) {
    const char *root = getenv("TBX_SOURCE_DIR");
    char path[4096];
    snprintf(path, sizeof path, "%s/tests/data/mcf/files/mixed_quant.mcf", root ? root : ".");
    tbx_file *f = NULL;
    tbx_error e;
    CHECK_OK(tbx_open_path(&f, path, NULL, &e));
    if (!f) return;
    uint64_t nt = tbx_tensor_count(f), nq = 0;
    float **ref = calloc(nt, sizeof *ref);
    uint64_t *n = calloc(nt, sizeof *n);
    for (uint64_t i = 0; i < nt; i++) {
        tbx_tensor_info ti = TBX_TENSOR_INFO_INIT;
        CHECK_OK(tbx_tensor_info_get(f, i, &ti));
        const tbx_dtype_info *di = tbx_dtype_get(ti.dtype);
        if (!di || strncmp(di->name, "mcf_", 4) != 0) continue;
        n[i] = 1;
        for (uint32_t d = 0; d < ti.ndim; d++) n[i] *= ti.shape[d];
        ref[i] = malloc(n[i] * sizeof(float) + 1);
        CHECK_OK(tbx_tensor_read_f32(f, i, 0, n[i], ref[i], &e));
        nq++;
    }
    CHECK(nq >= 6); /* q8 q4 k6 k4 k3 k2 */
    mcf_job jobs[4];
    pthread_t th[4];
    for (int k = 0; k < 4; k++) {
        jobs[k] = (mcf_job){f, ref, n, nt, 0};
        CHECK_OK(pthread_create(&th[k], NULL, mcf_reader, &jobs[k]));
    }
    for (int k = 0; k < 4; k++) {
        pthread_join(th[k], NULL);
        CHECK_EQ(jobs[k].bad, 0);
    }
    for (uint64_t i = 0; i < nt; i++) free(ref[i]);
    free(ref);
    free(n);
    tbx_close(f);
}

TBX_TEST_MAIN()
