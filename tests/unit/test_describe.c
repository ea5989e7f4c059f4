/*
 * test_describe.c - the description of a file (tbx_file_describe, tbx_tensor_describe): the
 * document `tbx info --json` prints and Python's info() returns, built once, in the library.
 *   - the pieces come in the documented order, BEGIN/END paired, items in their container;
 *     the values are what the model holds (expected values from the calls that wrote the
 *     file, never from tbx's own output): metadata values are the handle's own (the same
 *     pointers), typed wrappers name their types;
 *   - a format's member comes from its driver hook under its row's key (MCF's directory one
 *     item per entry, as tensorbox/mcf.h lists it; EMBD's header as tensorbox/embd.h gives it);
 *   - bounded memory: describing 20,000 tensors holds no more at its peak than describing 20
 *     (one piece at a time), every allocation through the handle's allocator and given back;
 *   - a receiver that stops (any status) stops the description with that status; every
 *     allocation failure is TBX_E_NOMEM, never a crash or a partial success;
 *   - tbx_tensor_describe gives the file description's object of one tensor.
 */
#define TBX_EXPERIMENTAL 1
#include "tbx_test.h"
#include "tensorbox.h"
#include "tensorbox/embd.h"
#include "tensorbox/mcf.h"

#include <stdbool.h>
#include <unistd.h>

static char *temp_path(const char *tag, const char *ext) {
    static int counter;
    char *path = malloc(600);
    tbx_test_tmppath(path, 600, "tbx_test_describe_%d_%s_%d%s", (int)getpid(), tag, counter++,
                     ext);
    unlink(path);
    return path;
}

/* ------------------------------------------------------------------------------------------ */
/* A receiver that records the pieces                                                          */
/* ------------------------------------------------------------------------------------------ */
#define MAX_MEMBERS 16

typedef struct rec {
    char keys[MAX_MEMBERS][32];   /* top-level keys, in order */
    int nkeys;
    int open;                     /* inside BEGIN .. END */
    tbx_value_type container;
    uint64_t items[MAX_MEMBERS];  /* items per member */
    int bad;                      /* a protocol violation */
    const tbx_file *f;
    uint64_t meta_same;           /* metadata items that are the handle's own values */
    tbx_value *keep[MAX_MEMBERS]; /* MEMBER values, cloned */
    tbx_value *first_item[MAX_MEMBERS]; /* the first item of each member, cloned */
    uint64_t stop_at;             /* stop with `stop_with` at this piece (0: never) */
    tbx_status stop_with;
    uint64_t pieces;
} rec;

static void rec_free(rec *r) {
    for (int i = 0; i < MAX_MEMBERS; i++) {
        tbx_value_free(r->keep[i]);
        tbx_value_free(r->first_item[i]);
    }
}

static int key_index(const rec *r, const char *k) {
    for (int i = 0; i < r->nkeys; i++)
        if (strcmp(r->keys[i], k) == 0) return i;
    return -1;
}

static tbx_status record(void *ud, const tbx_describe_part *p) {
    rec *r = ud;
    r->pieces++;
    if (r->stop_at && r->pieces == r->stop_at) return r->stop_with;
    switch (p->event) {
    case TBX_DESCRIBE_MEMBER:
    case TBX_DESCRIBE_BEGIN:
        if (r->open || !p->key || p->key_len >= 32 || r->nkeys == MAX_MEMBERS) {
            r->bad++;
            break;
        }
        memcpy(r->keys[r->nkeys], p->key, p->key_len);
        r->keys[r->nkeys][p->key_len] = 0;
        if (p->event == TBX_DESCRIBE_MEMBER) {
            if (!p->value) r->bad++;
            r->keep[r->nkeys] = tbx_value_clone(p->value);
        } else {
            if (p->value || (p->container != TBX_V_MAP && p->container != TBX_V_ARRAY)) r->bad++;
            r->open = 1;
            r->container = p->container;
        }
        r->nkeys++;
        break;
    case TBX_DESCRIBE_ITEM: {
        int k = r->nkeys - 1;
        if (!r->open || k < 0 || p->container != r->container || !p->value ||
            (p->container == TBX_V_MAP) != (p->key != NULL)) {
            r->bad++;
            break;
        }
        if (r->items[k]++ == 0) r->first_item[k] = tbx_value_clone(p->value);
        if (strcmp(r->keys[k], "metadata") == 0 && p->key) {
            uint64_t i = r->items[k] - 1;
            size_t kl = 0;
            const char *mk = tbx_meta_key(r->f, i, &kl);
            if (mk && kl == p->key_len && memcmp(mk, p->key, kl) == 0 &&
                tbx_meta_value(r->f, i) == p->value)
                r->meta_same++;
        }
        break;
    }
    case TBX_DESCRIBE_END:
        if (!r->open || p->container != r->container || r->nkeys == 0 ||
            p->key_len != strlen(r->keys[r->nkeys - 1]) ||
            memcmp(p->key, r->keys[r->nkeys - 1], p->key_len) != 0)
            r->bad++;
        r->open = 0;
        break;
    }
    return TBX_OK;
}

/* Member `key` of a MAP value. */
static const tbx_value *get(const tbx_value *m, const char *key) {
    for (uint64_t i = 0; i < tbx_value_len(m); i++) {
        size_t kl = 0;
        const char *k = tbx_value_key_at(m, i, &kl);
        if (k && kl == strlen(key) && memcmp(k, key, kl) == 0) return tbx_value_at(m, i);
    }
    return NULL;
}

static uint64_t get_u64(const tbx_value *m, const char *key) {
    uint64_t v = UINT64_MAX;
    tbx_value_get_u64(get(m, key), &v);
    return v;
}

static const char *get_str(const tbx_value *m, const char *key) {
    return tbx_value_get_str(get(m, key), NULL);
}

/* ------------------------------------------------------------------------------------------ */
/* Files                                                                                       */
/* ------------------------------------------------------------------------------------------ */
/* A file of `format` with `ntensors` f32 tensors [2, 32] "tNNNNNN" and two metadata entries
 * (when the format stores strings); sizevars for OINF. A format that holds one array (.npy)
 * refuses the second tensor naming "tensors": the file then has the tensors it took, and
 * *held (when not NULL) says how many. */
static char *write_file_n(tbx_format format, const char *ext, uint64_t ntensors, uint64_t *held) {
    char *path = temp_path("f", ext);
    tbx_write_options wo;
    tbx_write_options_init(&wo);
    wo.format = format;
    tbx_writer *w = NULL;
    tbx_error e;
    CHECK_OK(tbx_writer_open(&w, path, &wo, &e));
    if (!w) return path;
    tbx_format_caps c = TBX_FORMAT_CAPS_INIT;
    tbx_format_caps_get(format, &c);
    if (c.meta_types >> TBX_V_STRING & 1u) {
        tbx_value *v = tbx_value_new_string("tiny", 4);
        CHECK_OK(tbx_writer_add_meta(w, "model_name", 10, v, &e));
        tbx_value_free(v);
        v = tbx_value_new_string("two", 3);
        CHECK_OK(tbx_writer_add_meta(w, "second", 6, v, &e));
        tbx_value_free(v);
    }
    if (format == TBX_FORMAT_OINF) {
        CHECK_OK(tbx_writer_add_sizevar(w, "B", 4, &e));
        CHECK_OK(tbx_writer_add_sizevar(w, "A", 9, &e));
    }
    static const uint64_t shape[2] = {2, 32};
    float data[64];
    for (int i = 0; i < 64; i++) data[i] = (float)i;
    for (uint64_t i = 0; i < ntensors; i++) {
        char name[32];
        snprintf(name, sizeof name, "t%06llu", (unsigned long long)i);
        tbx_tensor_desc d = TBX_TENSOR_DESC_INIT;
        d.name = name;
        d.dtype = TBX_DT_F32;
        d.ndim = 2;
        d.shape = shape;
        d.has_data = 1;
        tbx_status st = tbx_writer_add_tensor(w, &d, NULL, &e);
        if (held && i > 0 && st == TBX_E_UNSUPPORTED && strcmp(e.field, "tensors") == 0) {
            ntensors = i;
            break;
        }
        CHECK_OK(st);
    }
    if (held) *held = ntensors;
    for (uint64_t i = 0; i < ntensors; i++)
        CHECK_OK(tbx_writer_write_tensor(w, i, data, sizeof data, &e));
    tbx_status st = tbx_writer_finish(w, &e);
    if (st != TBX_OK) fprintf(stderr, "%s: %s\n", ext, e.message);
    CHECK_OK(st);
    return path;
}

static char *write_file(tbx_format format, const char *ext, uint64_t ntensors) {
    return write_file_n(format, ext, ntensors, NULL);
}

static tbx_file *open_path(const char *path, const tbx_open_options *o) {
    tbx_file *f = NULL;
    tbx_error e;
    tbx_status st = tbx_open_path(&f, path, o, &e);
    if (st != TBX_OK) fprintf(stderr, "%s: %s\n", path, e.message);
    CHECK_OK(st);
    return f;
}

/* ------------------------------------------------------------------------------------------ */
/* Tests                                                                                       */
/* ------------------------------------------------------------------------------------------ */
TBX_TEST(pieces_in_order_with_the_models_values) {
    char *path = write_file(TBX_FORMAT_OINF, ".oinf", 3);
    tbx_file *f = open_path(path, NULL);
    if (!f) goto done;
    rec r;
    memset(&r, 0, sizeof r);
    r.f = f;
    tbx_error e;
    CHECK_OK(tbx_file_describe(f, 0, record, &r, &e));
    CHECK_EQ(r.bad, 0);
    CHECK_EQ(r.open, 0);
    /* format, version, sizevars (OINF), metadata, tensors; no sections, no files */
    static const char *const want[] = {"format", "version", "sizevars", "metadata", "tensors"};
    CHECK_EQ(r.nkeys, 5);
    for (int i = 0; i < 5 && i < r.nkeys; i++) CHECK_STR(r.keys[i], want[i]);
    CHECK_STR(tbx_value_get_str(r.keep[0], NULL), "oinf");
    uint64_t v = 0;
    CHECK_OK(tbx_value_get_u64(r.keep[1], &v));
    CHECK_EQ(v, 1);
    CHECK_EQ(r.items[2], 2); /* the writer's two size variables (sorted by name: A, B) */
    uint64_t sv = 0;
    CHECK_OK(tbx_value_get_u64(r.first_item[2], &sv));
    CHECK_EQ(sv, 9);
    CHECK_EQ(r.items[3], 2);
    CHECK_EQ(r.meta_same, 2); /* the handle's own values, borrowed */
    CHECK_EQ(r.items[4], 3);
    const tbx_value *t0 = r.first_item[4];
    CHECK_STR(get_str(t0, "name"), "t000000");
    CHECK_STR(get_str(t0, "dtype"), "f32");
    const tbx_value *sh = get(t0, "shape");
    CHECK_EQ(tbx_value_len(sh), 2);
    uint64_t d0 = 0, d1 = 0;
    tbx_value_get_u64(tbx_value_at(sh, 0), &d0);
    tbx_value_get_u64(tbx_value_at(sh, 1), &d1);
    CHECK(d0 == 2 && d1 == 32);
    CHECK_EQ(get_u64(t0, "nbytes"), 256);
    tbx_tensor_info ti = TBX_TENSOR_INFO_INIT;
    CHECK_OK(tbx_tensor_info_get(f, 0, &ti));
    CHECK_EQ(get_u64(t0, "offset"), ti.offset);
    CHECK_EQ(tbx_value_len(t0), 5); /* a plain tensor: five keys */
    rec_free(&r);

    /* with types: metadata values wrapped, naming their type */
    memset(&r, 0, sizeof r);
    r.f = f;
    CHECK_OK(tbx_file_describe(f, TBX_DESCRIBE_TYPES, record, &r, &e));
    CHECK_EQ(r.bad, 0);
    CHECK_EQ(r.meta_same, 0);
    int k = key_index(&r, "metadata");
    CHECK(k >= 0);
    if (k >= 0) {
        const tbx_value *m = r.first_item[k];
        CHECK_STR(get_str(m, "type"), "string");
        CHECK_STR(tbx_value_get_str(get(m, "value"), NULL), "tiny");
        CHECK_EQ(tbx_value_len(m), 2);
    }
    rec_free(&r);

    /* flags this library does not know; NULL arguments */
    CHECK_EQ(tbx_file_describe(f, 0x100, record, &r, &e), TBX_E_INVALID_ARG);
    CHECK_STR(e.field, "flags");
    CHECK_EQ(tbx_file_describe(f, 0, NULL, &r, &e), TBX_E_INVALID_ARG);
    CHECK_EQ(tbx_file_describe(NULL, 0, record, &r, &e), TBX_E_INVALID_ARG);
    tbx_close(f);
done:
    unlink(path);
    free(path);
}

/* Every format: the members in the documented order, the format's own member last under the
 * key its row names, tbx_tensor_describe equal to the file's item. */
TBX_TEST(every_format_and_its_own_member) {
    static const char *const order[] = {"format", "version", "files", "sizevars", "metadata",
                                        "tensors", "sections"};
    for (size_t fi = 0; fi < tbx_format_count(); fi++) {
        tbx_format fmt = tbx_format_at(fi);
        tbx_format_caps c = TBX_FORMAT_CAPS_INIT;
        CHECK_OK(tbx_format_caps_get(fmt, &c));
        if (!(c.flags & TBX_FCAP_WRITE)) continue;
        uint64_t held = 0;
        char *path = write_file_n(fmt, c.extensions, 2, &held);
        tbx_open_options o;
        tbx_open_options_init(&o);
        o.format = fmt;
        tbx_file *f = open_path(path, &o);
        if (!f) {
            unlink(path);
            free(path);
            continue;
        }
        rec r;
        memset(&r, 0, sizeof r);
        r.f = f;
        tbx_error e;
        CHECK_OK(tbx_file_describe(f, 0, record, &r, &e));
        CHECK_EQ(r.bad, 0);
        /* the common members in their order; anything else is the format's, after them */
        int last = -1, own = -1;
        for (int i = 0; i < r.nkeys; i++) {
            int pos = -1;
            for (int j = 0; j < 7; j++)
                if (strcmp(r.keys[i], order[j]) == 0) pos = j;
            if (pos < 0) {
                CHECK_EQ(own, -1); /* one member of its own at most */
                own = i;
                continue;
            }
            CHECK(pos > last && own < 0);
            last = pos;
        }
        CHECK(key_index(&r, "metadata") >= 0 && key_index(&r, "tensors") >= 0);
        CHECK(held >= 1);
        CHECK_EQ(r.items[key_index(&r, "tensors")], held);
        if (fmt == TBX_FORMAT_MCF) {
            /* the directory, one item per entry, as tensorbox/mcf.h lists it */
            CHECK(own >= 0);
            if (own >= 0) {
                CHECK_STR(r.keys[own], "mcf_directory");
                CHECK_EQ(r.items[own], tbx_mcf_section_count(f));
                tbx_mcf_section s0;
                CHECK_OK(tbx_mcf_section_get(f, 0, &s0));
                CHECK_EQ(get_u64(r.first_item[own], "type"), s0.type);
                CHECK_STR(get_str(r.first_item[own], "name"), s0.name);
                CHECK_EQ(get_u64(r.first_item[own], "offset"), s0.offset);
                CHECK_EQ(get_u64(r.first_item[own], "size"), s0.size);
            }
        } else if (fmt == TBX_FORMAT_EMBD) {
            CHECK(own >= 0);
            if (own >= 0) {
                CHECK_STR(r.keys[own], "embd");
                tbx_embd_header h = TBX_EMBD_HEADER_INIT;
                CHECK_OK(tbx_embd_header_get(f, &h));
                const tbx_value *hv = get(r.keep[own], "header");
                CHECK_EQ(get_u64(hv, "file_checksum"), h.file_checksum);
                CHECK_EQ(get_u64(hv, "total_file_size"), h.total_file_size);
                CHECK_EQ(tbx_value_len(hv), 15);
            }
        } else if (fmt == TBX_FORMAT_EMBD_LEGACY) {
            CHECK(own >= 0 && strcmp(r.keys[own], "embd") == 0);
        } else {
            CHECK_EQ(own, -1);
        }
        /* one tensor alone: the file's object of it */
        rec t;
        memset(&t, 0, sizeof t);
        t.open = 1;
        t.container = TBX_V_ARRAY;
        t.nkeys = 1;
        strcpy(t.keys[0], "tensors");
        CHECK_OK(tbx_tensor_describe(f, 0, 0, record, &t, &e));
        CHECK_EQ(t.pieces, 1);
        CHECK_EQ(t.bad, 0);
        int tk = key_index(&r, "tensors");
        CHECK(t.first_item[0] && tk >= 0 && r.first_item[tk]);
        if (t.first_item[0] && tk >= 0 && r.first_item[tk]) {
            CHECK_EQ(tbx_value_len(t.first_item[0]), tbx_value_len(r.first_item[tk]));
            CHECK_STR(get_str(t.first_item[0], "name"), get_str(r.first_item[tk], "name"));
            CHECK_EQ(get_u64(t.first_item[0], "offset"), get_u64(r.first_item[tk], "offset"));
        }
        CHECK_EQ(tbx_tensor_describe(f, 2, 0, record, &t, &e), TBX_E_INVALID_ARG);
        rec_free(&t);
        rec_free(&r);
        tbx_close(f);
        unlink(path);
        free(path);
    }
}

/* An allocator that counts live bytes and their peak, and can fail the n-th allocation. */
typedef struct counting {
    size_t live, peak;
    long calls, fail_at; /* fail_at > 0: the fail_at-th allocation (from now) returns NULL */
} counting;

static void *c_alloc(void *ud, size_t n) {
    counting *c = ud;
    if (c->fail_at > 0 && ++c->calls == c->fail_at) return NULL;
    void *p = malloc(n);
    if (p) {
        c->live += n;
        if (c->live > c->peak) c->peak = c->live;
    }
    return p;
}
static void *c_realloc(void *ud, void *p, size_t o, size_t n) {
    counting *c = ud;
    if (c->fail_at > 0 && ++c->calls == c->fail_at) return NULL;
    void *q = realloc(p, n);
    if (q) {
        c->live = c->live - o + n;
        if (c->live > c->peak) c->peak = c->live;
    }
    return q;
}
static void c_free(void *ud, void *p, size_t n) {
    counting *c = ud;
    free(p);
    c->live -= n;
}

static tbx_status ignore(void *ud, const tbx_describe_part *p) {
    (void)ud;
    (void)p;
    return TBX_OK;
}

/* Peak bytes the handle's allocator held while describing the file at `path` (above what the
 * open handle holds), checking that everything is given back. */
static size_t describe_peak(const char *path) {
    counting c = {0, 0, 0, 0};
    tbx_allocator a = {c_alloc, c_realloc, c_free, &c};
    tbx_open_options o;
    tbx_open_options_init(&o);
    o.allocator = &a;
    tbx_file *f = open_path(path, &o);
    if (!f) return SIZE_MAX;
    size_t before = c.live;
    c.peak = c.live;
    tbx_error e;
    CHECK_OK(tbx_file_describe(f, TBX_DESCRIBE_TYPES, ignore, NULL, &e));
    CHECK_EQ(c.live, before); /* nothing kept */
    size_t peak = c.peak - before;
    tbx_close(f);
    CHECK_EQ(c.live, 0);
    return peak;
}

TBX_TEST(one_piece_at_a_time) {
    char *small = write_file(TBX_FORMAT_SAFETENSORS, ".safetensors", 20);
    char *big = write_file(TBX_FORMAT_SAFETENSORS, ".safetensors", 20000);
    size_t ps = describe_peak(small), pb = describe_peak(big);
    if (pb > ps) fprintf(stderr, "peak: 20 tensors %zu bytes, 20000 tensors %zu bytes\n", ps, pb);
    CHECK(ps > 0);
    CHECK(pb <= ps); /* the same arena chunk, whatever the tensor count */
    CHECK(pb < 256 * 1024);
    unlink(small);
    unlink(big);
    free(small);
    free(big);
}

TBX_TEST(a_receiver_stops_it) {
    char *path = write_file(TBX_FORMAT_OINF, ".oinf", 3);
    tbx_file *f = open_path(path, NULL);
    if (f) {
        rec all;
        memset(&all, 0, sizeof all);
        tbx_error e;
        CHECK_OK(tbx_file_describe(f, 0, record, &all, &e));
        rec_free(&all);
        for (uint64_t k = 1; k <= all.pieces; k++) {
            rec r;
            memset(&r, 0, sizeof r);
            r.stop_at = k;
            r.stop_with = k % 2 ? TBX_E_IO : TBX_E_STATE;
            CHECK_EQ(tbx_file_describe(f, 0, record, &r, &e), r.stop_with);
            CHECK_EQ(r.pieces, k); /* nothing after the stop */
            CHECK_STR(e.field, "describe");
            rec_free(&r);
        }
        tbx_close(f);
    }
    unlink(path);
    free(path);
}

TBX_TEST(allocation_failures_are_nomem) {
    char *path = write_file(TBX_FORMAT_MCF, ".mcf", 3);
    counting c = {0, 0, 0, 0};
    tbx_allocator a = {c_alloc, c_realloc, c_free, &c};
    tbx_open_options o;
    tbx_open_options_init(&o);
    o.allocator = &a;
    tbx_file *f = open_path(path, &o);
    if (f) {
        int failed = 0;
        for (long n = 1; n < 200; n++) {
            c.calls = 0;
            c.fail_at = n;
            size_t before = c.live;
            tbx_error e;
            tbx_status st = tbx_file_describe(f, TBX_DESCRIBE_TYPES, ignore, NULL, &e);
            c.fail_at = 0;
            CHECK_EQ(c.live, before);
            if (st == TBX_OK) break; /* past the last allocation */
            CHECK_EQ(st, TBX_E_NOMEM);
            failed++;
        }
        CHECK(failed >= 1);
        tbx_close(f);
    }
    unlink(path);
    free(path);
}

TBX_TEST_MAIN()
