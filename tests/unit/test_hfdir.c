/* test_hfdir.c - a Hugging Face model directory / sharded safetensors set opened as one file
 * (src/formats/safetensors/safetensors_set.c, docs/formats/safetensors.md "Directories and sharded sets"):
 * the model, the sections, the parts, every allocation failure handled without a leak, and a
 * few hostile indexes (the full table is tests/python/test_hfdir.py). */
#define _GNU_SOURCE
#include "tbx_test.h"
#include "tensorbox.h"

#include <dirent.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

static char g_dir[512];

static void rm_tree(const char *dir) {
    DIR *d = opendir(dir);
    if (d) {
        struct dirent *e;
        char p[1024];
        while ((e = readdir(d)) != NULL) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
            snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
            struct stat sb;
            if (lstat(p, &sb) == 0 && S_ISDIR(sb.st_mode)) rm_tree(p);
            else unlink(p);
        }
        closedir(d);
    }
    rmdir(dir);
}

static void rm_tmp(void) { rm_tree(g_dir); }

/* g_dir/name (a fresh directory per test is made by new_dir). */
static const char *path_of(const char *name) {
    static char buf[8][800];
    static int k;
    k = (k + 1) % 8;
    snprintf(buf[k], sizeof buf[k], "%s/%s", g_dir, name);
    return buf[k];
}

static void write_file(const char *name, const void *data, size_t len) {
    FILE *fp = fopen(path_of(name), "wb");
    if (!fp || fwrite(data, 1, len, fp) != len) abort();
    fclose(fp);
}

static void write_str(const char *name, const char *s) { write_file(name, s, strlen(s)); }

/* A safetensors file: the header text given, padded with spaces, then `data`. */
static void write_st(const char *name, const char *header, const void *data, size_t dlen) {
    static uint8_t buf[4096];
    size_t h = strlen(header), pad = (8 - (h % 8)) % 8;
    uint64_t n = h + pad;
    if (8 + n + dlen > sizeof buf) abort();
    for (int i = 0; i < 8; i++) buf[i] = (uint8_t)(n >> (8 * i));
    memcpy(buf + 8, header, h);
    memset(buf + 8 + h, ' ', pad);
    memcpy(buf + 8 + n, data, dlen);
    write_file(name, buf, 8 + n + dlen);
}

#define S1 "model-00001-of-00002.safetensors"
#define S2 "model-00002-of-00002.safetensors"
#define IDX "model.safetensors.index.json"
static const float A[2] = {1, 2}, B[1] = {3}, C[2] = {4, 5};
static const char CONFIG[] = "{\"architectures\": [\"Test\"]}";
static const char POOL[] = "{\"pooling_mode_mean_tokens\": true}";

/* A fresh set: S1 {a, b}, S2 {c}, the index text given, config.json, 1_Pooling/config.json. */
static void new_set(const char *index) {
    if (g_dir[0]) rm_tree(g_dir);
    else atexit(rm_tmp);
    tbx_test_tmppath(g_dir, sizeof g_dir, "tbx_test_hfdir_XXXXXX");
    if (!mkdtemp(g_dir)) abort();
    uint8_t d1[12];
    memcpy(d1, A, 8);
    memcpy(d1 + 8, B, 4);
    write_st(S1, "{\"__metadata__\":{\"format\":\"pt\"},"
                 "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                 "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}", d1, 12);
    write_st(S2, "{\"__metadata__\":{\"format\":\"pt\",\"extra\":\"2\"},"
                 "\"c\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", C, 8);
    write_str(IDX, index);
    write_str("config.json", CONFIG);
    if (mkdir(path_of("1_Pooling"), 0700) != 0) abort();
    write_str("1_Pooling/config.json", POOL);
}

static const char GOOD[] = "{\"metadata\": {\"total_size\": 20}, \"weight_map\": {\"a\": \"" S1
                           "\", \"b\": \"" S1 "\", \"c\": \"" S2 "\"}}";

static void check_set(tbx_file *f) {
    CHECK_EQ(tbx_file_format(f), TBX_FORMAT_SAFETENSORS);
    CHECK_EQ(tbx_tensor_count(f), 3);
    const char *want[3] = {"a", "b", "c"};
    const float *vals[3] = {A, B, C};
    for (uint64_t i = 0; i < 3 && i < tbx_tensor_count(f); i++) {
        tbx_tensor_info ti = TBX_TENSOR_INFO_INIT;
        CHECK_OK(tbx_tensor_info_get(f, i, &ti));
        CHECK_STR(ti.name, want[i]);
        float got[2] = {0, 0};
        size_t need = 0;
        tbx_error e;
        CHECK_OK(tbx_tensor_read(f, i, got, sizeof got, &need, &e));
        CHECK(memcmp(got, vals[i], need) == 0);
    }
    /* the shards' __metadata__, merged */
    CHECK_EQ(tbx_meta_count(f), 2);
    CHECK(tbx_meta_find(f, "format") != NULL && tbx_meta_find(f, "extra") != NULL);
    /* the side files, by relative path */
    CHECK_EQ(tbx_section_count(f), 2);
    const char *sn[2] = {"1_Pooling/config.json", "config.json"};
    const char *sv[2] = {POOL, CONFIG};
    for (uint64_t i = 0; i < 2 && i < tbx_section_count(f); i++) {
        tbx_section_info si = TBX_SECTION_INFO_INIT;
        CHECK_OK(tbx_section_info_get(f, i, &si));
        CHECK_STR(si.name, sn[i]);
        char buf[128] = {0};
        size_t need = 0;
        tbx_error e;
        CHECK_OK(tbx_section_read(f, i, buf, sizeof buf - 1, &need, &e));
        CHECK_EQ(need, strlen(sv[i]));
        CHECK_STR(buf, sv[i]);
    }
    /* the parts: the index, the shards, the side files */
    CHECK_EQ(tbx_file_part_count(f), 5);
    const char *pn[5] = {IDX, S1, S2, "1_Pooling/config.json", "config.json"};
    for (uint64_t i = 0; i < 5; i++) {
        uint64_t size = 0;
        CHECK_STR(tbx_file_part_path(f, i, &size), pn[i]);
        CHECK(size > 0);
    }
    CHECK(tbx_file_part_path(f, 5, NULL) == NULL);
}

TBX_TEST(directory_and_index_open_as_one_file) {
    new_set(GOOD);
    tbx_file *f = NULL;
    tbx_error e;
    CHECK_OK(tbx_open_path(&f, g_dir, NULL, &e));
    if (f) { check_set(f); tbx_close(f); }
    CHECK_OK(tbx_open_path(&f, path_of(IDX), NULL, &e));
    if (f) { check_set(f); tbx_close(f); }
    /* a shard alone is itself */
    CHECK_OK(tbx_open_path(&f, path_of(S2), NULL, &e));
    if (f) {
        CHECK_EQ(tbx_tensor_count(f), 1);
        CHECK_EQ(tbx_section_count(f), 0);
        CHECK_EQ(tbx_file_part_count(f), 1);
        tbx_close(f);
    }
    /* mapped: tensor c comes straight from shard 2's mapping */
    tbx_open_options o;
    tbx_open_options_init(&o);
    o.flags = TBX_OPEN_MMAP;
    CHECK_OK(tbx_open_path(&f, g_dir, &o, &e));
    if (f) {
        const void *p = NULL;
        size_t len = 0;
        CHECK_OK(tbx_tensor_map(f, 2, &p, &len, &e));
        CHECK(len == 8 && p && memcmp(p, C, 8) == 0);
        tbx_close(f);
    }
    uint64_t np = 99;
    CHECK_OK(tbx_validate_path(g_dir, NULL, NULL, NULL, &np));
    CHECK_EQ(np, 0);
}

TBX_TEST(convert_a_directory) {
    new_set(GOOD);
    tbx_file *f = NULL, *g = NULL;
    tbx_error e;
    CHECK_OK(tbx_open_path(&f, g_dir, NULL, &e));
    if (!f) return;
    tbx_convert_options co;
    tbx_convert_options_init(&co);
    char out[800];
    snprintf(out, sizeof out, "%s.out.safetensors", g_dir);
    /* safetensors stores no sections: refused unless dropped */
    CHECK(tbx_convert(f, out, &co, &e) != TBX_OK);
    co.flags = TBX_CONVERT_DROP_SECTIONS;
    CHECK_OK(tbx_convert(f, out, &co, &e));
    tbx_close(f);
    CHECK_OK(tbx_open_path(&g, out, NULL, &e));
    if (g) {
        CHECK_EQ(tbx_tensor_count(g), 3);
        uint64_t i = 9;
        CHECK_OK(tbx_tensor_find(g, "c", &i));
        float got[2] = {0, 0};
        CHECK_OK(tbx_tensor_read(g, i, got, sizeof got, NULL, &e));
        CHECK(memcmp(got, C, 8) == 0);
        tbx_close(g);
    }
    unlink(out);
}

/* A directory with one model.safetensors {a, b, c} and the side files of new_set. */
static void new_single(void) {
    new_set(GOOD);
    unlink(path_of(S1));
    unlink(path_of(S2));
    unlink(path_of(IDX));
    uint8_t d[20];
    memcpy(d, A, 8);
    memcpy(d + 8, B, 4);
    memcpy(d + 12, C, 8);
    write_st("model.safetensors", "{\"__metadata__\":{\"format\":\"pt\"},"
             "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
             "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]},"
             "\"c\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[12,20]}}", d, 20);
}

/* What every open of new_single's directory must give: the tensors and both side files. */
static void check_single(tbx_file *f) {
    CHECK_EQ(tbx_tensor_count(f), 3);
    const float *vals[3] = {A, B, C};
    for (uint64_t i = 0; i < 3 && i < tbx_tensor_count(f); i++) {
        float got[2] = {0, 0};
        size_t need = 0;
        tbx_error e;
        CHECK_OK(tbx_tensor_read(f, i, got, sizeof got, &need, &e));
        CHECK(memcmp(got, vals[i], need) == 0);
    }
    CHECK_EQ(tbx_section_count(f), 2);
    const char *sn[2] = {"1_Pooling/config.json", "config.json"};
    for (uint64_t i = 0; i < 2 && i < tbx_section_count(f); i++) {
        tbx_section_info si = TBX_SECTION_INFO_INIT;
        CHECK_OK(tbx_section_info_get(f, i, &si));
        CHECK_STR(si.name, sn[i]);
    }
    CHECK_EQ(tbx_file_part_count(f), 3);
}

/* Every allocation of the open fails in turn (until an open makes fewer allocations than the
 * one that would fail), for a sharded set and for a single-file directory: each run ends in
 * TBX_E_NOMEM without a leak, or (a failure the library tolerates) opens the whole model: no
 * entry of the directory may be skipped for want of memory (it was: a side file dropped, or
 * "holds no safetensors model"). */
TBX_TEST(every_allocation_failure_is_clean) {
    for (int layout = 0; layout < 2; layout++) {
        if (layout == 0) new_set(GOOD);
        else new_single();
        long k;
        int clean = 1, done = 0;
        for (k = 1; k < 20000 && !done; k++) {
            tbx_fail_al a = {1, 0, k, 0};
            tbx_allocator al = {tbx_fa_alloc, tbx_fa_realloc, tbx_fa_free, &a};
            tbx_open_options o;
            tbx_open_options_init(&o);
            o.allocator = &al;
            tbx_file *f = NULL;
            tbx_error e;
            tbx_status st = tbx_open_path(&f, g_dir, &o, &e);
            const long opened_after = a.calls;
            a.fail_at = -1; /* the checks below allocate freely */
            if (st == TBX_OK) {
                const int fails = tbx_cur_failed_;
                if (layout == 0) check_set(f);
                else check_single(f);
                if (tbx_cur_failed_ != fails) {
                    fprintf(stderr, "layout %d, allocation %ld failed: opened incomplete\n",
                            layout, k);
                    clean = 0;
                }
                tbx_close(f);
            } else if (st != TBX_E_NOMEM) {
                fprintf(stderr, "layout %d, allocation %ld failed: status %d (%s)\n", layout, k,
                        (int)st, e.message);
                clean = 0;
            }
            if (a.live != 0) {
                fprintf(stderr, "layout %d, allocation %ld failed: %lld bytes leaked\n", layout,
                        k, a.live);
                clean = 0;
            }
            if (opened_after < k) done = 1; /* nothing failed: every allocation was tried */
        }
        CHECK(done);
        CHECK(k > 10); /* the open allocates: the first allocations did fail */
        CHECK(clean);
    }
}

/* Section `name` of f: its index, or UINT64_MAX. */
static uint64_t section_of(tbx_file *f, const char *name) {
    for (uint64_t i = 0; i < tbx_section_count(f); i++) {
        tbx_section_info si = TBX_SECTION_INFO_INIT;
        if (tbx_section_info_get(f, i, &si) == TBX_OK && strcmp(si.name, name) == 0) return i;
    }
    return UINT64_MAX;
}

/* Converts g_dir to `out` with max_side_file_bytes = limit (open and convert). */
static tbx_status convert_limited(uint64_t limit, const char *out, tbx_format fmt, uint32_t flags,
                                  tbx_error *e) {
    tbx_limits lim;
    tbx_limits_default(&lim);
    lim.max_side_file_bytes = limit;
    tbx_open_options o;
    tbx_open_options_init(&o);
    o.limits = &lim;
    tbx_file *f = NULL;
    tbx_status st = tbx_open_path(&f, g_dir, &o, e);
    if (st != TBX_OK) return st;
    /* the open lists every side file whatever the limit */
    CHECK(section_of(f, "tokenizer.json") != UINT64_MAX);
    CHECK(section_of(f, "notes.txt") != UINT64_MAX);
    tbx_convert_options co;
    tbx_convert_options_init(&co);
    co.write.format = fmt;
    co.write.flags = TBX_WRITE_OVERWRITE;
    co.flags = flags;
    st = tbx_convert(f, out, &co, e);
    tbx_close(f);
    return st;
}

/* One limit for every side file read whole (tbx_limits.max_side_file_bytes, issue 19): the open
 * lists every side file whatever its size; a conversion that needs one above the limit fails
 * with TBX_E_LIMIT naming the file, its size and the limit (the MCF writer's sections, the
 * Hugging Face -> GGUF conversion), and a side file the writer does not take is dropped, when
 * asked, without being read. */
TBX_TEST(side_file_limit_is_one_and_named) {
    tbx_limits lim;
    tbx_limits_default(&lim);
    CHECK_EQ(lim.max_side_file_bytes, (uint64_t)256 << 20);
    new_single();
    unlink(path_of("1_Pooling/config.json")); /* notes.txt is the one side file MCF refuses */
    rmdir(path_of("1_Pooling"));
    static char tok[1000], notes[2000];
    memset(tok, ' ', sizeof tok);
    memcpy(tok, "{\"model\": {}}", 13); /* 1000 bytes of valid JSON */
    write_file("tokenizer.json", tok, sizeof tok);
    memset(notes, 'n', sizeof notes); /* MCF has no section for it */
    write_file("notes.txt", notes, sizeof notes);
    char out[800], gout[800];
    snprintf(out, sizeof out, "%s.out.mcf", g_dir);
    snprintf(gout, sizeof gout, "%s.out.gguf", g_dir);
    struct stat sb;
    tbx_error e;
    memset(&e, 0, sizeof e);
    /* below tokenizer.json's size: refused, named, no output */
    CHECK_EQ(convert_limited(999, out, TBX_FORMAT_MCF, TBX_CONVERT_DROP_SECTIONS, &e),
             TBX_E_LIMIT);
    CHECK(strstr(e.message, "tokenizer.json") && strstr(e.message, "1000") &&
          strstr(e.message, "999") && strstr(e.message, "max_side_file_bytes"));
    CHECK_STR(e.field, "tokenizer.json");
    CHECK(stat(out, &sb) != 0);
    /* the GGUF conversion for llama.cpp reads its side files through the same limit */
    memset(&e, 0, sizeof e);
    CHECK_EQ(convert_limited(999, gout, TBX_FORMAT_GGUF, 0, &e), TBX_E_LIMIT);
    CHECK(strstr(e.message, "tokenizer.json") && strstr(e.message, "1000") &&
          strstr(e.message, "999"));
    CHECK(stat(gout, &sb) != 0);
    /* at the limit: converted; notes.txt (2000 bytes, over it) is dropped unread */
    CHECK_OK(convert_limited(1000, out, TBX_FORMAT_MCF, TBX_CONVERT_DROP_SECTIONS, &e));
    tbx_file *g = NULL;
    CHECK_OK(tbx_open_path(&g, out, NULL, &e));
    if (g) {
        uint64_t i = section_of(g, "tokenizer.json");
        CHECK(i != UINT64_MAX);
        static char back[1000];
        size_t need = 0;
        if (i != UINT64_MAX) CHECK_OK(tbx_section_read(g, i, back, sizeof back, &need, &e));
        CHECK(need == sizeof tok && memcmp(back, tok, sizeof tok) == 0);
        CHECK(section_of(g, "notes.txt") == UINT64_MAX);
        tbx_close(g);
    }
    /* without --drop-sections the refusal names notes.txt, not the limit */
    memset(&e, 0, sizeof e);
    CHECK_EQ(convert_limited(1000, out, TBX_FORMAT_MCF, 0, &e), TBX_E_LOSSY);
    CHECK(strstr(e.message, "notes.txt") && strstr(e.message, "--drop-sections"));
    unlink(out);
    unlink(gout);
}

typedef struct hcase {
    const char *name;
    const char *index;
    tbx_status code;
    const char *field;
    const char *at;   /* the offset is where this text starts in the index */
} hcase;

TBX_TEST(hostile_indexes) {
    static const hcase cases[] = {
        {"traversal", "{\"weight_map\": {\"a\": \"../x.safetensors\"}}", TBX_E_FORMAT,
         "weight_map", "\"../x"},
        {"absolute", "{\"weight_map\": {\"a\": \"/tmp/" S1 "\"}}", TBX_E_FORMAT, "weight_map",
         "\"/tmp"},
        {"dup_tensor", "{\"weight_map\": {\"a\": \"" S1 "\", \"b\": \"" S1 "\", \"a \": \"" S1
         "\", \"a\": \"" S2 "\"}}", TBX_E_DUPLICATE, "weight_map", "\"a\": \"" S2},
        {"missing_shard", "{\"weight_map\": {\"a\": \"" S1 "\", \"b\": \"" S1
         "\", \"c\": \"model-00009-of-00009.safetensors\"}}", TBX_E_NOT_FOUND, "weight_map",
         "\"model-00009"},
        {"wrong_shard", "{\"weight_map\": {\"a\": \"" S2 "\", \"b\": \"" S1 "\", \"c\": \"" S2
         "\"}}", TBX_E_FORMAT, "weight_map", "\"" S2},
        {"unmapped_shard", "{\"weight_map\": {\"a\": \"" S1 "\", \"b\": \"" S1 "\"}}",
         TBX_E_FORMAT, "weight_map", "{\"a\""},
        {"not_json", "{\"weight_map\": {\"a\": \"" S1 "\",}}", TBX_E_FORMAT, "index.json", "}}"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const hcase *c = &cases[i];
        new_set(c->index);
        tbx_file *f = NULL;
        tbx_error e;
        memset(&e, 0, sizeof e);
        tbx_status st = tbx_open_path(&f, g_dir, NULL, &e);
        uint64_t want_at = (uint64_t)(strstr(c->index, c->at) - c->index);
        if (st != c->code || strcmp(e.field, c->field) != 0 || e.offset != want_at ||
            !strstr(e.message, IDX))
            fprintf(stderr, "%s: got %d %s %" PRIu64 " (%s)\n", c->name, (int)st, e.field,
                    e.offset, e.message);
        CHECK_EQ(st, c->code);
        CHECK_STR(e.field, c->field);
        CHECK_EQ(e.offset, want_at);
        CHECK(strstr(e.message, IDX) != NULL);
        CHECK(f == NULL);
        tbx_close(f);
    }
}

TBX_TEST_MAIN()
