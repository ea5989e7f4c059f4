/*
 * test_mapguard.c - an input that shrinks while it is open: TBX_E_TRUNCATED, never SIGBUS.
 *
 * A file is mapped (TBX_OPEN_MMAP) or read through pread, then truncated behind the handle's
 * back (a copy in a temporary directory). Every read API (tbx_tensor_read, _read_range,
 * _read_f32, tbx_tensor_map, tbx_read_batch on worker threads, tbx_validate, tbx_check_input,
 * tbx_convert to every writable format and with quantization) must then answer
 * TBX_E_TRUNCATED for what lies past the new end, leave no output and no temporary file, and
 * still read what lies below it. The process must not die: a mapped access past the end of the
 * file raises SIGBUS, which the library's handler (src/io/mapguard.c) turns into zeros plus the
 * error; tbx_mapguard_repairs_() proves that the faults happened and were repaired.
 *
 * Inputs: a safetensors file built here byte by byte (three f32 tensors with known values),
 * and what tbx_convert makes of it through pread before any truncation: GGUF, OINF, zTensor
 * with zstd and sha256 (decoded straight from the mapping), MCF quantized to k4 (decoded from
 * the mapping) and EMBD with its CRC-32s (checked through a temporary mapping).
 * TBX_TEST_LABEL_THREADS: also run under ThreadSanitizer (faults on worker threads).
 */
#define _GNU_SOURCE
#include "api.h"
#include "tbx_test.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* ------------------------------------------------------------------------------------------ */
/* Fixtures                                                                                    */
/* ------------------------------------------------------------------------------------------ */
#define NT 3
static const char *const tname[NT] = {"a", "b", "c"};
static const uint64_t tshape[NT][2] = {{64, 64}, {512, 512}, {256, 1024}};

/* The value of element i of tensor t: a deterministic spread of finite floats. */
static float value_of(int t, uint64_t i) {
    uint32_t h = (uint32_t)(i * 2654435761u) ^ (uint32_t)(t * 40503u);
    return ((float)(h % 20001u) - 10000.0f) / 1000.0f;
}

static char workdir[512];

static void path_in(char *out, size_t cap, const char *name) {
    snprintf(out, cap, "%s/%s", workdir, name);
}

static void write_all(const char *path, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f || (n && fwrite(p, 1, n, f) != n)) { perror(path); exit(2); }
    fclose(f);
}

static void copy_file(const char *from, const char *to) {
    size_t n;
    uint8_t *p = tbx_test_slurp(from, &n);
    if (!p) { perror(from); exit(2); }
    write_all(to, p, n);
    free(p);
}

static uint64_t file_size(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 ? (uint64_t)sb.st_size : 0;
}

/* Entries of dir whose name contains `part`. */
static int count_named(const char *dir, const char *part) {
    DIR *d = opendir(dir);
    int n = 0;
    if (!d) return -1;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) n += strstr(de->d_name, part) != NULL;
    closedir(d);
    return n;
}

/* The safetensors file: header (JSON padded to 8 bytes with spaces) and the three tensors. */
static void build_safetensors(const char *path) {
    char hdr[512];
    uint64_t off = 0;
    int n = snprintf(hdr, sizeof hdr, "{");
    for (int t = 0; t < NT; t++) {
        uint64_t nb = tshape[t][0] * tshape[t][1] * 4;
        n += snprintf(hdr + n, sizeof hdr - (size_t)n,
                      "%s\"%s\":{\"dtype\":\"F32\",\"shape\":[%" PRIu64 ",%" PRIu64
                      "],\"data_offsets\":[%" PRIu64 ",%" PRIu64 "]}",
                      t ? "," : "", tname[t], tshape[t][0], tshape[t][1], off, off + nb);
        off += nb;
    }
    n += snprintf(hdr + n, sizeof hdr - (size_t)n, "}");
    while (n % 8) hdr[n++] = ' ';
    size_t total = 8 + (size_t)n + (size_t)off;
    uint8_t *p = malloc(total);
    tbx_st64(p, (uint64_t)n);
    memcpy(p + 8, hdr, (size_t)n);
    uint8_t *d = p + 8 + n;
    for (int t = 0; t < NT; t++)
        for (uint64_t i = 0; i < tshape[t][0] * tshape[t][1]; i++, d += 4) {
            float v = value_of(t, i);
            uint32_t u;
            memcpy(&u, &v, 4);
            tbx_st32(d, u);
        }
    write_all(path, p, total);
    free(p);
}

/* One input variant: a file in workdir, and whether its tensors are the f32 values above. */
typedef struct variant {
    const char *file;      /* name in workdir */
    bool exact;            /* stored bytes are the f32 values (raw, lossless) */
    bool raw;              /* tensors are served raw (tbx_tensor_map, range reads of bytes) */
} variant;

#define NV 6
static const variant variants[NV] = {
    {"in.safetensors", true, true}, {"in.gguf", true, true},      {"in.oinf", true, true},
    {"in.zt", true, false},         {"in.k4.mcf", false, false}, {"in.weights", true, true},
};

static tbx_status convert_path(const char *from, const char *to, tbx_format fmt, tbx_dtype quant,
                               int level, const char *digest, tbx_error *e) {
    tbx_open_options oo;
    tbx_open_options_init(&oo);
    tbx_file *f;
    tbx_status st = tbx_open_path(&f, from, &oo, e);
    if (st != TBX_OK) return st;
    tbx_convert_options co;
    tbx_convert_options_init(&co);
    co.write.format = fmt;
    co.write.flags = TBX_WRITE_OVERWRITE | TBX_WRITE_NO_SYNC;
    co.write.compress_level = level;
    co.write.digest = digest;
    co.quant_to = quant;
    st = tbx_convert(f, to, &co, e);
    tbx_close(f);
    return st;
}

static void make_inputs(void) {
    if (workdir[0]) return;
    tbx_test_tmppath(workdir, sizeof workdir, "tbx_test_mapguard_XXXXXX");
    if (!mkdtemp(workdir)) { perror("mkdtemp"); exit(2); }
    char st_path[600], p[600];
    path_in(st_path, sizeof st_path, "in.safetensors");
    build_safetensors(st_path);
    tbx_error e;
    struct { const char *file; tbx_format fmt; tbx_dtype q; int level; const char *digest; } mk[] = {
        {"in.gguf", TBX_FORMAT_GGUF, TBX_DT_INVALID, 0, NULL},
        {"in.oinf", TBX_FORMAT_OINF, TBX_DT_INVALID, 0, NULL},
        {"in.zt", TBX_FORMAT_ZTENSOR, TBX_DT_INVALID, 3, "sha256"},
        {"in.k4.mcf", TBX_FORMAT_MCF, TBX_DT_MCF_K4, 0, NULL},
        {"in.weights", TBX_FORMAT_EMBD, TBX_DT_INVALID, 0, NULL},
    };
    for (size_t k = 0; k < sizeof mk / sizeof mk[0]; k++) {
        path_in(p, sizeof p, mk[k].file);
        tbx_status st = convert_path(st_path, p, mk[k].fmt, mk[k].q, mk[k].level, mk[k].digest, &e);
        if (st != TBX_OK) {
            fprintf(stderr, "cannot make %s: %s\n", mk[k].file, e.message);
            exit(2);
        }
    }
}

/* ------------------------------------------------------------------------------------------ */
/* The checks                                                                                  */
/* ------------------------------------------------------------------------------------------ */
typedef struct tinfo {
    uint64_t off, nbytes, nelems, end;
    float *base;           /* the values read before the truncation */
    uint8_t *raw;          /* the stored bytes read before the truncation (raw variants) */
} tinfo;

static void problem_cb(void *ud, const tbx_error *p) {
    uint32_t *seen = ud;
    if (p->code > 0 && p->code < 32) *seen |= 1u << p->code;
}

/* A truncation error: the code, a field and a message. */
#define CHECK_TRUNC(st, e)                                                                     \
    do {                                                                                       \
        CHECK_EQ((st), TBX_E_TRUNCATED);                                                       \
        CHECK_EQ((e).code, TBX_E_TRUNCATED);                                                   \
        CHECK((e).message[0] != '\0');                                                         \
        CHECK((e).offset != TBX_NO_OFFSET);                                                    \
    } while (0)

/* Writable formats: name and the extension their writer is known by. */
static int writable_formats(tbx_format *fmts, const char **exts, int cap) {
    int n = 0;
    for (size_t i = 0; i < tbx_format_count() && n < cap; i++) {
        tbx_format_caps c = TBX_FORMAT_CAPS_INIT;
        if (tbx_format_caps_get(tbx_format_at(i), &c) != TBX_OK || !(c.flags & TBX_FCAP_WRITE))
            continue;
        fmts[n] = c.format;
        exts[n] = c.name;
        n++;
    }
    return n;
}

/* Converts `f` to every writable format, and with GGUF q8_0 and MCF k4 quantization: every
 * conversion the intact file allows must fail with TBX_E_TRUNCATED and leave no file. */
static void convert_all(tbx_file *f, const char *path, const char *from_intact, const char *tag) {
    tbx_format fmts[16];
    const char *names[16];
    int nf = writable_formats(fmts, names, 16);
    CHECK(nf >= 5);
    char out[700], ref[700];
    for (int k = 0; k < nf + 2; k++) {
        tbx_format fmt = k < nf ? fmts[k] : k == nf ? TBX_FORMAT_GGUF : TBX_FORMAT_MCF;
        tbx_dtype q = k < nf ? TBX_DT_INVALID : k == nf ? TBX_DT_Q8_0 : TBX_DT_MCF_K4;
        snprintf(out, sizeof out, "%s/out-%s-%d.%s", workdir, tag, k, tbx_format_name(fmt));
        snprintf(ref, sizeof ref, "%s/ref-%s-%d.%s", workdir, tag, k, tbx_format_name(fmt));
        tbx_error e;
        /* what the intact input gives (converted through pread from its pristine copy) */
        tbx_status want = convert_path(from_intact, ref, fmt, q, 0, NULL, &e);
        unlink(ref);
        tbx_convert_options co;
        tbx_convert_options_init(&co);
        co.write.format = fmt;
        co.write.flags = TBX_WRITE_NO_SYNC;
        co.quant_to = q;
        memset(&e, 0, sizeof e);
        tbx_status st = tbx_convert(f, out, &co, &e);
        if (want == TBX_OK) {
            if (st != TBX_E_TRUNCATED)
                fprintf(stderr, "%s -> %s (quant %d): %s %s\n", tag, tbx_format_name(fmt), (int)q,
                        tbx_status_name(st), e.message);
            CHECK_TRUNC(st, e);
            /* found where the missing bytes were read (a tensor), not only by the check of the
             * input before the commit (which names the file) */
            CHECK(strcmp(e.field, path) != 0);
        } else {
            CHECK(st != TBX_OK);
        }
        CHECK(access(out, F_OK) != 0);
        CHECK_EQ(count_named(workdir, "tbx-tmp"), 0);
    }
}

/* Opens variant v (a fresh copy), reads everything, truncates the copy to `cut(v)`, and checks
 * every read API on the handle. `mapped`: TBX_OPEN_MMAP, else pread. */
typedef uint64_t (*cut_fn)(const tinfo *ti, int n, uint64_t size);

static void shrink_case(const variant *v, bool mapped, cut_fn cutf, bool partial_page,
                        bool faults) {
    make_inputs();
    char pristine[600], path[600];
    path_in(pristine, sizeof pristine, v->file);
    snprintf(path, sizeof path, "%s/work-%s", workdir, v->file);
    copy_file(pristine, path);
    const uint64_t size = file_size(path);

    tbx_open_options oo;
    tbx_open_options_init(&oo);
    oo.flags = mapped ? TBX_OPEN_MMAP : 0;
    oo.threads = 2;
    tbx_file *f;
    tbx_error e;
    CHECK_OK(tbx_open_path(&f, path, &oo, &e));
    if (!f) return;
    int n = (int)tbx_tensor_count(f);
    CHECK_EQ(n, NT);
    tinfo ti[NT];
    memset(ti, 0, sizeof ti);
    for (int i = 0; i < n; i++) {
        tbx_tensor_info info = TBX_TENSOR_INFO_INIT;
        CHECK_OK(tbx_tensor_info_get(f, (uint64_t)i, &info));
        ti[i].off = info.offset;
        ti[i].nbytes = info.nbytes;
        ti[i].end = info.offset + info.nbytes;
        ti[i].nelems = info.nelems;
        ti[i].base = malloc(info.nelems * sizeof(float));
        CHECK_OK(tbx_tensor_read_f32(f, (uint64_t)i, 0, info.nelems, ti[i].base, &e));
        if (v->exact) /* the values the file was built from */
            for (uint64_t k = 0; k < info.nelems; k++)
                if (ti[i].base[k] != value_of(i, k)) { CHECK(!"value differs"); break; }
        if (v->raw) {
            ti[i].raw = malloc(info.nbytes);
            CHECK_OK(tbx_tensor_read(f, (uint64_t)i, ti[i].raw, info.nbytes, NULL, &e));
        }
    }
    const uint64_t cut = cutf(ti, n, size);
    int below = 0, past = 0;
    for (int i = 0; i < n; i++) *(ti[i].end <= cut ? &below : &past) += 1;
    CHECK(below >= 1);
    CHECK(past >= 1);

    const uint64_t repairs0 = tbx_mapguard_repairs_();
    CHECK_EQ(truncate(path, (off_t)cut), 0);

    /* first, before any access past the cut: a range that ends in the page holding the new end
     * (those bytes read as zeros without a fault: only the check's look past the range, or the
     * file's size, can tell) */
    int last = 0;
    for (int i = 0; i < n; i++) if (ti[i].off > ti[last].off) last = i;
    if (partial_page) {
        CHECK(ti[last].off + 16 <= cut && cut % 4096 >= 16 && cut % 4096 <= 4096 - 16);
        uint8_t buf[16];
        tbx_status st = tbx_tensor_read_range(f, (uint64_t)last, cut - 8 - ti[last].off, buf, 16, &e);
        CHECK_TRUNC(st, e);
        st = tbx_tensor_read_range(f, (uint64_t)last, cut - 16 - ti[last].off, buf, 8, &e);
        CHECK_OK(st);
        CHECK(memcmp(buf, ti[last].raw + (cut - 16 - ti[last].off), 8) == 0);
    }

    /* every read API, tensor by tensor */
    for (int i = 0; i < n; i++) {
        const bool ok = ti[i].end <= cut;
        uint8_t *buf = malloc(ti[i].nbytes ? ti[i].nbytes : 1);
        float *fl = malloc(ti[i].nelems * sizeof(float));
        tbx_status st;
        memset(&e, 0, sizeof e);
        if (v->raw) {
            st = tbx_tensor_read(f, (uint64_t)i, buf, ti[i].nbytes, NULL, &e);
            if (ok) { CHECK_OK(st); CHECK(memcmp(buf, ti[i].raw, ti[i].nbytes) == 0); }
            else CHECK_TRUNC(st, e);
            /* the bytes of the tensor below the cut still read */
            uint64_t head = ok ? ti[i].nbytes : (cut > ti[i].off ? (cut - ti[i].off) / 2 : 0);
            if (head) {
                CHECK_OK(tbx_tensor_read_range(f, (uint64_t)i, 0, buf, (size_t)head, &e));
                CHECK(memcmp(buf, ti[i].raw, (size_t)head) == 0);
            }
            if (!ok) {
                st = tbx_tensor_read_range(f, (uint64_t)i, ti[i].nbytes - 4, buf, 4, &e);
                CHECK_TRUNC(st, e);
            }
            const void *mp = NULL;
            size_t ml = 0;
            st = tbx_tensor_map(f, (uint64_t)i, &mp, &ml, &e);
            if (!mapped) CHECK_EQ(st, TBX_E_UNSUPPORTED);
            else if (ok) { CHECK_OK(st); CHECK(mp && memcmp(mp, ti[i].raw, ml) == 0); }
            else CHECK_TRUNC(st, e);
        }
        memset(&e, 0, sizeof e);
        st = tbx_tensor_read_f32(f, (uint64_t)i, 0, ti[i].nelems, fl, &e);
        if (ok) {
            CHECK_OK(st);
            CHECK(memcmp(fl, ti[i].base, ti[i].nelems * sizeof(float)) == 0);
        } else {
            CHECK_TRUNC(st, e);
        }
        free(buf);
        free(fl);
    }

    /* tbx_read_batch on two worker threads */
    tbx_read_req req[NT];
    uint8_t *bufs[NT];
    for (int i = 0; i < n; i++) {
        tbx_read_req r = TBX_READ_REQ_INIT;
        size_t need = 0;
        tbx_component_read(f, (uint64_t)i, 0, NULL, 0, &need, NULL);
        bufs[i] = malloc(need ? need : 1);
        r.tensor = (uint64_t)i;
        r.buf = bufs[i];
        r.cap = need;
        req[i] = r;
    }
    tbx_status bst = tbx_read_batch(f, req, (size_t)n, 2, &e);
    CHECK_EQ(bst, TBX_E_TRUNCATED);
    for (int i = 0; i < n; i++) {
        if (ti[i].end <= cut) CHECK_OK(req[i].status);
        else CHECK_TRUNC(req[i].status, req[i].error);
        free(bufs[i]);
    }

    /* validation: the shrink is reported as such (no checksum or format verdict on zeros) */
    uint32_t seen = 0;
    uint64_t np = 0;
    CHECK(tbx_validate(f, problem_cb, &seen, &np) != TBX_OK);
    CHECK(np >= 1);
    CHECK(seen & (1u << TBX_E_TRUNCATED));
    CHECK(!(seen & (1u << TBX_E_CHECKSUM)));
    memset(&e, 0, sizeof e);
    tbx_status cst = tbx_check_input(f, &e);
    CHECK_TRUNC(cst, e);
    CHECK_EQ(e.offset, cut);

    convert_all(f, path, pristine, v->file);

    /* what lies below the cut still reads, after all of that */
    for (int i = 0; i < n; i++) {
        if (ti[i].end > cut) continue;
        float *fl = malloc(ti[i].nelems * sizeof(float));
        CHECK_OK(tbx_tensor_read_f32(f, (uint64_t)i, 0, ti[i].nelems, fl, &e));
        CHECK(memcmp(fl, ti[i].base, ti[i].nelems * sizeof(float)) == 0);
        free(fl);
    }
    /* a mapped handle met faults, and each was repaired (else this process would be dead);
     * a cut inside the mapping's last page makes none (the file's size tells) */
    if (mapped && faults) CHECK(tbx_mapguard_repairs_() > repairs0);
    if (mapped && !faults) CHECK_EQ(tbx_mapguard_repairs_(), repairs0);
    tbx_close(f);
    for (int i = 0; i < n; i++) { free(ti[i].base); free(ti[i].raw); }
    unlink(path);
}

/* A cut inside the last tensor, inside a page (not page-aligned) */
static uint64_t cut_mid_last(const tinfo *ti, int n, uint64_t size) {
    (void)size;
    int last = 0;
    for (int i = 0; i < n; i++) if (ti[i].off > ti[last].off) last = i;
    uint64_t c = (ti[last].off + ti[last].nbytes / 2) & ~(uint64_t)4095;
    if (c < ti[last].off + 4096) c += 4096;
    return c + 2000;
}

/* 10 bytes cut off the end of the file (the last tensor of safetensors ends there: its last
 * page is the mapping's last page, so only the file's size can tell) */
static uint64_t cut_tail(const tinfo *ti, int n, uint64_t size) {
    (void)ti; (void)n;
    return size - 10;
}

/* A cut at the start of the last tensor's page-aligned middle */
static uint64_t cut_page(const tinfo *ti, int n, uint64_t size) {
    return cut_mid_last(ti, n, size) - 2000;
}

/* ------------------------------------------------------------------------------------------ */
/* Tests                                                                                       */
/* ------------------------------------------------------------------------------------------ */

/* First in this file, so that it runs before this process maps anything: a SIGBUS handler
 * installed before the library's keeps getting the faults that are not the library's. */
static void user_bus_handler(int sig, siginfo_t *si, void *uc) {
    (void)sig; (void)si; (void)uc;
    _exit(42);
}

TBX_TEST(handler_chains_to_the_previous_one) {
    make_inputs();
    char pristine[600], path[600], other[600];
    path_in(pristine, sizeof pristine, "in.safetensors");
    path_in(path, sizeof path, "chain.safetensors");
    path_in(other, sizeof other, "chain.other");
    copy_file(pristine, path);
    copy_file(pristine, other);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = user_bus_handler;
        sa.sa_flags = SA_SIGINFO;
        sigemptyset(&sa.sa_mask);
        if (sigaction(SIGBUS, &sa, NULL) != 0) _exit(3);
        tbx_open_options oo;
        tbx_open_options_init(&oo);
        oo.flags = TBX_OPEN_MMAP;
        tbx_file *f;
        tbx_error e;
        if (tbx_open_path(&f, path, &oo, &e) != TBX_OK) _exit(4);
        if (truncate(path, 4096) != 0) _exit(5);
        float x[16];
        /* the library's own mapping: repaired, an error, no call of the user's handler */
        if (tbx_tensor_read_f32(f, 2, 0, 16, x, &e) != TBX_E_TRUNCATED) _exit(6);
        /* someone else's mapping: the user's handler gets the fault (it exits with 42) */
        int fd = open(other, O_RDONLY);
        size_t len = (size_t)file_size(other);
        const volatile uint8_t *m = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
        if (m == MAP_FAILED || truncate(other, 0) != 0) _exit(7);
        (void)m[len - 1];
        _exit(8); /* not reached: the access faults */
    }
    int status = 0;
    CHECK_EQ(waitpid(pid, &status, 0), pid);
    CHECK(WIFEXITED(status));
    CHECK_EQ(WEXITSTATUS(status), 42);
    unlink(path);
    unlink(other);
}

/* A SIGBUS that is not the library's is not swallowed: with no handler before the library's,
 * the fault of someone else's mapping of a truncated file still ends the process (by SIGBUS,
 * or under a sanitizer by its report). */
TBX_TEST(foreign_fault_is_not_swallowed) {
    make_inputs();
    char pristine[600], path[600], other[600];
    path_in(pristine, sizeof pristine, "in.safetensors");
    path_in(path, sizeof path, "foreign.safetensors");
    path_in(other, sizeof other, "foreign.other");
    copy_file(pristine, path);
    copy_file(pristine, other);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        tbx_open_options oo;
        tbx_open_options_init(&oo);
        oo.flags = TBX_OPEN_MMAP;
        tbx_file *f;
        tbx_error e;
        if (tbx_open_path(&f, path, &oo, &e) != TBX_OK) _exit(4); /* the handler is in */
        int fd = open(other, O_RDONLY);
        size_t len = (size_t)file_size(other);
        const volatile uint8_t *m = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
        if (m == MAP_FAILED || truncate(other, 0) != 0) _exit(7);
        /* a sanitizer's report of the fault is expected here: not into the test's log */
        int dn = open("/dev/null", O_WRONLY);
        if (dn < 0 || dup2(dn, 2) < 0) _exit(9);
        (void)m[len - 1];
        _exit(8); /* the fault was swallowed */
    }
    int status = 0;
    CHECK_EQ(waitpid(pid, &status, 0), pid);
    CHECK((WIFSIGNALED(status) && WTERMSIG(status) == SIGBUS) ||
          (WIFEXITED(status) && WEXITSTATUS(status) != 0 && WEXITSTATUS(status) != 4 &&
           WEXITSTATUS(status) != 7 && WEXITSTATUS(status) != 8 &&
           WEXITSTATUS(status) != 9));
    if (WIFEXITED(status)) fprintf(stderr, "(foreign fault: child exited %d)\n", WEXITSTATUS(status));
    unlink(path);
    unlink(other);
}

TBX_TEST(mapped_safetensors_cut_inside_a_page) { shrink_case(&variants[0], true, cut_mid_last, true, true); }
TBX_TEST(mapped_safetensors_cut_at_a_page) { shrink_case(&variants[0], true, cut_page, false, true); }
TBX_TEST(mapped_safetensors_cut_at_the_tail) { shrink_case(&variants[0], true, cut_tail, false, false); }
TBX_TEST(mapped_gguf) { shrink_case(&variants[1], true, cut_mid_last, true, true); }
TBX_TEST(mapped_oinf) { shrink_case(&variants[2], true, cut_mid_last, true, true); }
TBX_TEST(mapped_ztensor_zstd_sha256) { shrink_case(&variants[3], true, cut_mid_last, false, true); }
TBX_TEST(mapped_mcf_k4) { shrink_case(&variants[4], true, cut_mid_last, false, true); }
TBX_TEST(mapped_embd) { shrink_case(&variants[5], true, cut_mid_last, true, true); }

TBX_TEST(pread_safetensors) { shrink_case(&variants[0], false, cut_mid_last, true, true); }
TBX_TEST(pread_safetensors_tail) { shrink_case(&variants[0], false, cut_tail, false, false); }
TBX_TEST(pread_gguf) { shrink_case(&variants[1], false, cut_mid_last, true, true); }
TBX_TEST(pread_ztensor_zstd_sha256) { shrink_case(&variants[3], false, cut_mid_last, false, true); }
TBX_TEST(pread_mcf_k4) { shrink_case(&variants[4], false, cut_mid_last, false, true); }
TBX_TEST(pread_embd) { shrink_case(&variants[5], false, cut_mid_last, true, true); }

/* A shrink after the conversion read every byte it needed (10 bytes off the end, after the
 * last tensor was written) still fails it before the commit: the output must not stand for a
 * file that no longer exists whole. Mapped and pread. */
typedef struct late_cut {
    const char *path;
    uint64_t cut;
    int done;
} late_cut;

static int cut_when_done(void *ud, uint64_t done, uint64_t total) {
    late_cut *lc = ud;
    if (done == total && !lc->done++) CHECK_EQ(truncate(lc->path, (off_t)lc->cut), 0);
    return 0;
}

static void late_shrink(bool mapped) {
    make_inputs();
    char pristine[600], path[600], out[600];
    path_in(pristine, sizeof pristine, "in.safetensors");
    path_in(path, sizeof path, "late.safetensors");
    path_in(out, sizeof out, "late-out.gguf");
    copy_file(pristine, path);
    tbx_open_options oo;
    tbx_open_options_init(&oo);
    oo.flags = mapped ? TBX_OPEN_MMAP : 0;
    tbx_file *f;
    tbx_error e;
    CHECK_OK(tbx_open_path(&f, path, &oo, &e));
    if (!f) return;
    late_cut lc = {path, file_size(path) - 10, 0};
    tbx_convert_options co;
    tbx_convert_options_init(&co);
    co.write.flags = TBX_WRITE_NO_SYNC;
    co.write.format = TBX_FORMAT_GGUF;
    co.progress = cut_when_done;
    co.progress_ud = &lc;
    memset(&e, 0, sizeof e);
    tbx_status st = tbx_convert(f, out, &co, &e);
    CHECK(lc.done >= 1);
    CHECK_TRUNC(st, e);
    CHECK_EQ(e.offset, lc.cut);
    CHECK_STR(e.field, path);
    CHECK(access(out, F_OK) != 0);
    CHECK_EQ(count_named(workdir, "tbx-tmp"), 0);
    tbx_close(f);
    unlink(path);
}

TBX_TEST(shrink_after_the_last_read_fails_the_convert_mapped) { late_shrink(true); }
TBX_TEST(shrink_after_the_last_read_fails_the_convert_pread) { late_shrink(false); }

/* A quantizing conversion hands the mapping to its workers chunk by chunk (2 MiB of f32 each,
 * at most threads + 2 in flight): a file that shrinks while they work is caught on the chunk a
 * worker read (the error names the tensor), not only by the check before the commit. The input
 * is cut when the first byte of output is written: a 16 MiB tensor's chunks past the cut are
 * read after that. */
static char quant_cut_path[600];
static uint64_t quant_cut_at;
static int cut_on_first_write(void) {
    if (quant_cut_path[0]) {
        CHECK_EQ(truncate(quant_cut_path, (off_t)quant_cut_at), 0);
        quant_cut_path[0] = '\0';
    }
    return 0;
}

TBX_TEST(quantizing_workers_check_the_chunks_they_read) {
    make_inputs();
    char path[600], out[600];
    path_in(path, sizeof path, "quant.safetensors");
    path_in(out, sizeof out, "quant-out.gguf");
    const uint64_t rows = 2048, cols = 2048, nb = rows * cols * 4;
    char hdr[160];
    int n = snprintf(hdr, sizeof hdr,
                     "{\"w\":{\"dtype\":\"F32\",\"shape\":[%" PRIu64 ",%" PRIu64
                     "],\"data_offsets\":[0,%" PRIu64 "]}}", rows, cols, nb);
    while (n % 8) hdr[n++] = ' ';
    uint8_t *p = malloc(8 + (size_t)n + nb);
    tbx_st64(p, (uint64_t)n);
    memcpy(p + 8, hdr, (size_t)n);
    for (uint64_t i = 0; i < rows * cols; i++) {
        float v = value_of(7, i);
        memcpy(p + 8 + n + 4 * i, &v, 4);
    }
    write_all(path, p, 8 + (size_t)n + nb);
    free(p);
    tbx_open_options oo;
    tbx_open_options_init(&oo);
    oo.flags = TBX_OPEN_MMAP;
    tbx_file *f;
    tbx_error e;
    CHECK_OK(tbx_open_path(&f, path, &oo, &e));
    if (!f) return;
    snprintf(quant_cut_path, sizeof quant_cut_path, "%s", path);
    quant_cut_at = 8 + (uint64_t)n + nb / 2 + 100; /* chunks 5..8 past it */
    tbx_convert_options co;
    tbx_convert_options_init(&co);
    co.write.flags = TBX_WRITE_NO_SYNC;
    co.write.format = TBX_FORMAT_GGUF;
    co.quant_to = TBX_DT_Q8_0;
    tbx_out_fault_hook_ = cut_on_first_write;
    memset(&e, 0, sizeof e);
    tbx_status st = tbx_convert(f, out, &co, &e);
    tbx_out_fault_hook_ = NULL;
    CHECK_EQ(quant_cut_path[0], '\0'); /* the cut happened */
    CHECK_TRUNC(st, e);
    CHECK_STR(e.field, "w");
    CHECK(access(out, F_OK) != 0);
    CHECK_EQ(count_named(workdir, "tbx-tmp"), 0);
    tbx_close(f);
    unlink(path);
}

/* A raw zTensor component with a digest, on a mapped handle that verifies digests: handing out
 * its pointer first hashes its bytes in place; a file that shrank is TBX_E_TRUNCATED, not a
 * digest mismatch computed over zeros. */
TBX_TEST(verified_map_of_a_raw_digest_component) {
    make_inputs();
    char st_path[600], path[600];
    path_in(st_path, sizeof st_path, "in.safetensors");
    path_in(path, sizeof path, "raw-digest.zt");
    tbx_error e;
    CHECK_OK(convert_path(st_path, path, TBX_FORMAT_ZTENSOR, TBX_DT_INVALID, 0, "sha256", &e));
    tbx_open_options oo;
    tbx_open_options_init(&oo);
    oo.flags = TBX_OPEN_MMAP | TBX_OPEN_VERIFY_DIGESTS;
    tbx_file *f;
    CHECK_OK(tbx_open_path(&f, path, &oo, &e));
    if (!f) return;
    uint64_t c;
    CHECK_OK(tbx_tensor_find(f, "c", &c));
    tbx_tensor_info info = TBX_TENSOR_INFO_INIT;
    CHECK_OK(tbx_tensor_info_get(f, c, &info));
    CHECK_EQ(truncate(path, (off_t)(info.offset + info.nbytes / 2 + 100)), 0);
    const void *ptr = NULL;
    size_t len = 0;
    memset(&e, 0, sizeof e);
    tbx_status st = tbx_tensor_map(f, c, &ptr, &len, &e);
    CHECK_TRUNC(st, e);
    tbx_close(f);
    unlink(path);
}

/* An EMBD handle reading through pread with TBX_OPEN_VERIFY_DIGESTS checks its CRC-32s on
 * the first read; a small read hashes the data region through a temporary mapping
 * (tbx_source_view): a file that shrank before that pass is TBX_E_TRUNCATED, not a checksum
 * mismatch computed over zeros. */
TBX_TEST(embd_crc_view_of_a_shrunk_file) {
    make_inputs();
    char pristine[600], path[600];
    path_in(pristine, sizeof pristine, "in.weights");
    path_in(path, sizeof path, "view.weights");
    copy_file(pristine, path);
    tbx_open_options oo;
    tbx_open_options_init(&oo);
    oo.flags = TBX_OPEN_VERIFY_DIGESTS;
    tbx_file *f;
    tbx_error e;
    CHECK_OK(tbx_open_path(&f, path, &oo, &e));
    if (!f) return;
    uint64_t a;
    CHECK_OK(tbx_tensor_find(f, "a", &a));
    const uint64_t repairs0 = tbx_mapguard_repairs_();
    CHECK_EQ(truncate(path, (off_t)(file_size(path) / 2 + 1234)), 0);
    float x[16];
    memset(&e, 0, sizeof e);
    tbx_status st = tbx_tensor_read_f32(f, a, 0, 16, x, &e);
    CHECK_TRUNC(st, e);
    CHECK(tbx_mapguard_repairs_() > repairs0); /* the view met the missing pages */
    uint32_t seen = 0;
    uint64_t np = 0;
    CHECK(tbx_validate(f, problem_cb, &seen, &np) != TBX_OK);
    CHECK(seen & (1u << TBX_E_TRUNCATED));
    CHECK(!(seen & (1u << TBX_E_CHECKSUM)));
    tbx_close(f);
    unlink(path);
}

/* The bounded cursor over a mapped source (what every driver parses through, at open): a field
 * in a page found past the new end is TBX_E_TRUNCATED naming the field; one below reads.
 * tbx_source_read is exact (it also sees the zeros of the page holding the new end). */
TBX_TEST(cursor_and_source_reads_of_a_shrunk_mapping) {
    make_inputs();
    char pristine[600], path[600];
    path_in(pristine, sizeof pristine, "in.safetensors");
    path_in(path, sizeof path, "cursor.bin");
    copy_file(pristine, path);
    size_t n;
    uint8_t *ref = tbx_test_slurp(path, &n);
    tbx_source s;
    tbx_error e;
    CHECK_OK(tbx_source_open_path(&s, path, true, &e));
    CHECK_EQ(s.kind, TBX_SRC_MMAP);
    tbx_alloc al;
    tbx_alloc_init(&al, NULL);
    tbx_cursor c;
    CHECK_OK(tbx_cursor_init(&c, &s, &al, 0, s.size, &e));
    const uint64_t cut = 3 * 4096 + 1000;
    CHECK_EQ(truncate(path, (off_t)cut), 0);
    uint32_t v = 0;
    /* in the page of the new end, past it: no fault; tbx_source_read still sees it */
    uint8_t buf[64];
    memset(&e, 0, sizeof e);
    tbx_status st = tbx_source_read(&s, cut + 4, buf, 8, "read.past", &e);
    CHECK_TRUNC(st, e);
    CHECK_STR(e.field, "read.past");
    CHECK_EQ(e.offset, cut + 4); /* the field's own offset: the file ended before it */
    CHECK(strstr(e.message, "file ended at byte 13288") != NULL);
    /* a field far past it: the fault is seen by the cursor */
    CHECK_OK(tbx_cur_seek(&c, s.size - 100, "x", &e));
    memset(&e, 0, sizeof e);
    st = tbx_cur_u32(&c, &v, "field.far", &e);
    CHECK_TRUNC(st, e);
    CHECK_STR(e.field, "field.far");
    CHECK_EQ(c.pos, s.size - 100); /* a failed read leaves the position */
    /* then every field of a page past the one of the new end */
    CHECK_OK(tbx_cur_seek(&c, 5 * 4096 + 12, "x", &e));
    CHECK_EQ(tbx_cur_u32(&c, &v, "field.after", &e), TBX_E_TRUNCATED);
    /* below the new end, in its page and before */
    CHECK_OK(tbx_cur_seek(&c, cut - 8, "x", &e));
    CHECK_OK(tbx_cur_u32(&c, &v, "field.below", &e));
    CHECK_EQ(v, tbx_ld32(ref + cut - 8));
    CHECK_OK(tbx_source_read(&s, 4096, buf, sizeof buf, "read.below", &e));
    CHECK(memcmp(buf, ref + 4096, sizeof buf) == 0);
    st = tbx_source_read(&s, 5 * 4096, buf, sizeof buf, "read.far", &e);
    CHECK_TRUNC(st, e);
    tbx_cursor_free(&c);
    tbx_source_close(&s);
    free(ref);
    unlink(path);
}

/* A file cut while it is being opened (parsed): the allocator truncates it on its k-th call,
 * for every k the open makes. A mapped open then fails with TBX_E_TRUNCATED, whatever the
 * parse made of the zeros (a field in the page holding the new end reads as zero without a
 * fault: the size check at the end of the open sees it, and an error found on the zeros is
 * reported as the shrink); it never succeeds on a file that shrank, and never crashes. Cuts in
 * the header (the page of the first tensor infos) and in the data. */
static const char *open_cut_path;
static uint64_t open_cut_at, open_cut_dev, open_cut_ino;
static int open_cut_calls, open_cut_when;
/* Counts the allocations made while the file is open (in the registry of open inputs: its
 * source exists, so the cut happens under the parse, not before the open) and cuts at the k-th. */
static void open_cut_tick(void) {
    if (!tbx_inputs_contains(open_cut_dev, open_cut_ino)) return;
    if (++open_cut_calls == open_cut_when) CHECK_EQ(truncate(open_cut_path, (off_t)open_cut_at), 0);
}
static void *cut_alloc(void *ud, size_t size) {
    (void)ud;
    open_cut_tick();
    return malloc(size ? size : 1);
}
static void *cut_realloc(void *ud, void *p, size_t old, size_t size) {
    (void)ud; (void)old;
    open_cut_tick();
    return realloc(p, size ? size : 1);
}
static void cut_free(void *ud, void *p, size_t size) { (void)ud; (void)size; free(p); }
static const tbx_allocator cut_allocator = {cut_alloc, cut_realloc, cut_free, NULL};

static void open_while_cut(const char *file, uint64_t (*cut_of)(uint64_t size)) {
    make_inputs();
    char pristine[600], path[600];
    path_in(pristine, sizeof pristine, file);
    snprintf(path, sizeof path, "%s/opencut-%s", workdir, file);
    tbx_open_options oo;
    tbx_open_options_init(&oo);
    oo.flags = TBX_OPEN_MMAP;
    oo.allocator = &cut_allocator;
    int fired = 0;
    for (int k = 1; k < 100000; k++) {
        copy_file(pristine, path);
        open_cut_path = path;
        open_cut_at = cut_of(file_size(path));
        struct stat sb;
        CHECK_EQ(stat(path, &sb), 0);
        open_cut_dev = (uint64_t)sb.st_dev;
        open_cut_ino = (uint64_t)sb.st_ino;
        open_cut_calls = 0;
        open_cut_when = k;
        tbx_file *f = NULL;
        tbx_error e;
        memset(&e, 0, sizeof e);
        tbx_status st = tbx_open_path(&f, path, &oo, &e);
        const bool cut = open_cut_calls >= k;
        if (cut) {
            fired++;
            if (st != TBX_E_TRUNCATED)
                fprintf(stderr, "%s cut at allocation %d: %s %s\n", file, k, tbx_status_name(st),
                        e.message);
            CHECK_TRUNC(st, e);
            CHECK(f == NULL);
        } else {
            CHECK_OK(st); /* the open made fewer than k allocations: it saw the whole file */
        }
        tbx_close(f);
        if (!cut) break;
    }
    CHECK(fired >= 3);
    unlink(path);
}

static uint64_t first_page_cut = 300;
static uint64_t cut_in_first_page(uint64_t size) { (void)size; return first_page_cut; }
static uint64_t cut_in_half(uint64_t size) { return size / 2 + 77; }

TBX_TEST(open_of_a_file_cut_while_parsed_gguf_header) {
    for (first_page_cut = 24; first_page_cut < 4096; first_page_cut += 331)
        open_while_cut("in.gguf", cut_in_first_page);
    first_page_cut = 300;
}
TBX_TEST(open_of_a_file_cut_while_parsed_gguf_data) { open_while_cut("in.gguf", cut_in_half); }
TBX_TEST(open_of_a_file_cut_while_parsed_mcf) { open_while_cut("in.k4.mcf", cut_in_half); }
TBX_TEST(open_of_a_file_cut_while_parsed_embd) { open_while_cut("in.weights", cut_in_first_page); }
TBX_TEST(open_of_a_file_cut_while_parsed_zt) { open_while_cut("in.zt", cut_in_half); }

/* With every guard slot taken, a mapped open reads through pread (never unguarded). */
TBX_TEST(full_guard_table_falls_back_to_pread) {
    make_inputs();
    long pg = sysconf(_SC_PAGESIZE);
    void *m = mmap(NULL, (size_t)pg, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(m != MAP_FAILED);
    int *slots = malloc(8192 * sizeof *slots);
    int taken = 0;
    for (int s; taken < 8192 && (s = tbx_mapguard_add(m, (size_t)pg)) >= 0;) slots[taken++] = s;
    CHECK(taken > 0 && taken < 8192);
    char path[600];
    path_in(path, sizeof path, "in.safetensors");
    tbx_open_options oo;
    tbx_open_options_init(&oo);
    oo.flags = TBX_OPEN_MMAP;
    tbx_file *f;
    tbx_error e;
    CHECK_OK(tbx_open_path(&f, path, &oo, &e));
    const void *p = NULL;
    size_t len = 0;
    CHECK_EQ(tbx_tensor_map(f, 0, &p, &len, &e), TBX_E_UNSUPPORTED);
    float x[4];
    CHECK_OK(tbx_tensor_read_f32(f, 1, 0, 4, x, &e));
    CHECK(x[0] == value_of(1, 0) && x[3] == value_of(1, 3));
    tbx_close(f);
    for (int i = 0; i < taken; i++) tbx_mapguard_remove(slots[i]);
    free(slots);
    munmap(m, (size_t)pg);
    /* and with room again, the same open maps */
    CHECK_OK(tbx_open_path(&f, path, &oo, &e));
    CHECK_OK(tbx_tensor_map(f, 0, &p, &len, &e));
    tbx_close(f);
}

/* Last: removes the fixtures. */
TBX_TEST(cleanup) {
    CHECK(workdir[0] != '\0');
    DIR *d = opendir(workdir);
    struct dirent *de;
    char p[800];
    while (d && (de = readdir(d)) != NULL) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
        snprintf(p, sizeof p, "%s/%s", workdir, de->d_name);
        unlink(p);
    }
    if (d) closedir(d);
    CHECK_EQ(rmdir(workdir), 0);
}

TBX_TEST_MAIN()
