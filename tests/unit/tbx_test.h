/* tbx_test.h - the minimal unit-test harness of tensorbox's C tests.
 *
 *   TBX_TEST(name) { CHECK(cond); CHECK_EQ(a, b); CHECK_OK(status_expr); }
 *   int main(void) { return tbx_test_main(); }   // or TBX_TEST_MAIN()
 *
 * Every test registers itself (constructor attribute); the runner prints one line per failed
 * check and a closing line "N passed, N failed" and exits non-zero on any failure. A test that
 * performs no check counts as failed: a test that cannot fail is a defect. Tests beyond
 * TBX_TEST_MAX in one program are counted as failed, never silently dropped.
 *
 * Temporary files: tests write under tbx_test_tmpdir() ($TMPDIR, or /tmp when it is unset or
 * empty), never under a hard-coded directory; tbx_test_tmppath() builds a path there.
 * tbx_test_fast_tmpdir() is for tests that write and fsync a lot (test_faults): it is
 * $TBX_TEST_FAST_TMPDIR when set; otherwise, only while TMPDIR is unset, /dev/shm when writable
 * (memory-backed, so fsync is free); otherwise tbx_test_tmpdir(). A TMPDIR the caller sets is
 * always honoured.
 */
#ifndef TBX_TEST_H
#define TBX_TEST_H
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tensorbox.h" /* tbx_test_convert_gguf */

typedef void (*tbx_test_fn)(void);
struct tbx_test_case { const char *name; tbx_test_fn fn; };
#ifndef TBX_TEST_MAX
#define TBX_TEST_MAX 1024
#endif
static struct tbx_test_case tbx_tests_[TBX_TEST_MAX];
static int tbx_ntests_, tbx_ndropped_;
static int tbx_cur_checks_, tbx_cur_failed_;

#define TBX_TEST(test_)                                                                   \
    static void test_(void);                                                              \
    __attribute__((constructor)) static void test_##_register(void) {                     \
        if (tbx_ntests_ < TBX_TEST_MAX) { tbx_tests_[tbx_ntests_].name = #test_;          \
                                          tbx_tests_[tbx_ntests_++].fn = test_; }         \
        else tbx_ndropped_++;                                                             \
    }                                                                                     \
    static void test_(void)

#define CHECK(cond) do { tbx_cur_checks_++; if (!(cond)) { tbx_cur_failed_++;            \
    fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); } } while (0)
#define CHECK_EQ(a, b) do { long long a_ = (long long)(a), b_ = (long long)(b);           \
    tbx_cur_checks_++; if (a_ != b_) { tbx_cur_failed_++;                                 \
    fprintf(stderr, "%s:%d: CHECK_EQ failed: %s == %lld, %s == %lld\n", __FILE__, __LINE__, \
            #a, a_, #b, b_); } } while (0)
#define CHECK_STR(a, b) do { const char *a_ = (a), *b_ = (b); tbx_cur_checks_++;          \
    if (!a_ || !b_ || strcmp(a_, b_) != 0) { tbx_cur_failed_++;                           \
    fprintf(stderr, "%s:%d: CHECK_STR failed: %s == \"%s\", expected \"%s\"\n", __FILE__, \
            __LINE__, #a, a_ ? a_ : "(null)", b_ ? b_ : "(null)"); } } while (0)
/* CHECK_OK(expr): expr is a tbx_status that must be TBX_OK. */
#define CHECK_OK(expr) CHECK_EQ((expr), 0)

static inline const char *tbx_test_tmpdir(void) {
    const char *t = getenv("TMPDIR");
    return t && *t ? t : "/tmp";
}

static inline const char *tbx_test_fast_tmpdir(void) {
    const char *f = getenv("TBX_TEST_FAST_TMPDIR");
    if (f && *f) return f;
    const char *t = getenv("TMPDIR");
    if ((!t || !*t) && access("/dev/shm", W_OK) == 0) return "/dev/shm";
    return tbx_test_tmpdir();
}

/* buf = tbx_test_tmpdir() + "/" + the formatted name (which may end in XXXXXX for mkdtemp).
 * Exits the test program when the path does not fit in cap bytes. Returns buf. */
__attribute__((format(printf, 3, 4)))
static inline char *tbx_test_tmppath(char *buf, size_t cap, const char *fmt, ...) {
    int n = snprintf(buf, cap, "%s/", tbx_test_tmpdir());
    va_list ap;
    va_start(ap, fmt);
    int m = n >= 0 && (size_t)n < cap ? vsnprintf(buf + n, cap - (size_t)n, fmt, ap) : -1;
    va_end(ap);
    if (m < 0 || (size_t)n + (size_t)m >= cap) {
        fprintf(stderr, "tbx_test_tmppath: temporary path too long (TMPDIR=%s)\n", tbx_test_tmpdir());
        exit(2);
    }
    return buf;
}

static inline int tbx_test_main(void) {
    int passed = 0, failed = 0;
    for (int i = 0; i < tbx_ntests_; i++) {
        tbx_cur_checks_ = 0; tbx_cur_failed_ = 0;
        tbx_tests_[i].fn();
        if (tbx_cur_checks_ == 0) {
            fprintf(stderr, "%s: no checks ran\n", tbx_tests_[i].name);
            tbx_cur_failed_ = 1;
        }
        if (tbx_cur_failed_) { failed++; fprintf(stderr, "FAIL %s\n", tbx_tests_[i].name); }
        else passed++;
    }
    if (tbx_ndropped_) { /* never run fewer tests than were written */
        fprintf(stderr, "%d tests were not registered (more than TBX_TEST_MAX = %d)\n",
                tbx_ndropped_, TBX_TEST_MAX);
        failed += tbx_ndropped_;
    }
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
#define TBX_TEST_MAIN() int main(void) { return tbx_test_main(); }

/* The whole file at `path` (malloc'd, caller frees) and its size in *n; NULL (and *n = 0) when
 * it cannot be opened or read whole. */
static inline uint8_t *tbx_test_slurp(const char *path, size_t *n) {
    FILE *fp = fopen(path, "rb");
    *n = 0;
    if (!fp) return NULL;
    fseek(fp, 0, SEEK_END);
    long len = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    const size_t want = len > 0 ? (size_t)len : 0;
    uint8_t *p = malloc(want ? want : 1);
    if (p && fread(p, 1, want, fp) != want) { free(p); p = NULL; }
    fclose(fp);
    if (p) *n = want;
    return p;
}

/* An allocator for allocation-failure tests: tbx_allocator's alloc, realloc and free with ud a
 * tbx_fail_al. Once armed, it counts its allocations and reallocations in `calls` and fails
 * the fail_at-th (1-based; 0 or less: none); `live` is the number of bytes outstanding all
 * along, so a test can check that nothing leaked. */
typedef struct tbx_fail_al {
    int armed;
    long calls, fail_at;
    long long live;
} tbx_fail_al;
static inline int tbx_fa_fails_(tbx_fail_al *a) { return a->armed && ++a->calls == a->fail_at; }
static inline void *tbx_fa_alloc(void *ud, size_t n) {
    tbx_fail_al *a = (tbx_fail_al *)ud;
    if (tbx_fa_fails_(a)) return NULL;
    void *p = malloc(n ? n : 1);
    if (p) a->live += (long long)n;
    return p;
}
static inline void *tbx_fa_realloc(void *ud, void *p, size_t old, size_t n) {
    tbx_fail_al *a = (tbx_fail_al *)ud;
    if (tbx_fa_fails_(a)) return NULL;
    void *q = realloc(p, n ? n : 1);
    if (q) a->live += (long long)n - (long long)old;
    return q;
}
static inline void tbx_fa_free(void *ud, void *p, size_t n) {
    tbx_fail_al *a = (tbx_fail_al *)ud;
    if (p) a->live -= (long long)n;
    free(p);
}

/* Opens `in` (with allocator `al` when not NULL; *armed, when not NULL, is set once the open is
 * done, so a failing allocator fails the conversion's allocations only) and converts it to a
 * GGUF at `out` (overwritten) with tbx_convert's `flags` and `quant` (TBX_DT_INVALID: none). */
static inline tbx_status tbx_test_convert_gguf(const tbx_allocator *al, int *armed,
                                               const char *in, const char *out, uint32_t flags,
                                               tbx_dtype quant, tbx_error *e) {
    tbx_open_options oo;
    tbx_open_options_init(&oo);
    oo.allocator = al;
    tbx_file *f = NULL;
    tbx_status st = tbx_open_path(&f, in, &oo, e);
    if (st != TBX_OK) return st;
    if (armed) *armed = 1;
    tbx_convert_options co;
    tbx_convert_options_init(&co);
    co.write.format = TBX_FORMAT_GGUF;
    co.write.flags = TBX_WRITE_OVERWRITE;
    co.flags = flags;
    co.quant_to = quant;
    st = tbx_convert(f, out, &co, e);
    if (armed) *armed = 0;
    tbx_close(f);
    return st;
}
#endif
