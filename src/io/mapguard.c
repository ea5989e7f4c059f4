/*
 * mapguard.c - file mappings that outlive their file shrinking: zeros and an error, not SIGBUS.
 *
 * A mapped file that another process truncates does not shrink the mapping: a later access to
 * a page that lies wholly past the new end of the file makes the kernel raise SIGBUS, which
 * kills the process. The library maps files (TBX_OPEN_MMAP, temporary views for checksums),
 * and cannot stop other processes from truncating them, so every mapping it makes is entered
 * here and one SIGBUS handler repairs such faults:
 *
 *   fault at address a inside a registered mapping [base, base + len)
 *     -> the mapping's `valid` (bytes from base still known to be the file's) is lowered to
 *        the faulting page's offset,
 *     -> anonymous zero pages are mapped (MAP_FIXED) over that page and every later page of
 *        the mapping (a page past the end of the file has only pages past the end after it),
 *     -> the handler returns and the access reads zeros.
 *
 * Every library access to mapped bytes then asks tbx_mapguard_check (tbx_mapguard_probe inline,
 * through tbx_source_check), after the access and before the bytes are used or handed on,
 * whether [0, end) of the mapping is still the file's; the caller turns "no" into
 * TBX_E_TRUNCATED. A fault lowers `valid`, so a range that touched a repaired page fails the
 * check. Bytes past the new end that share a page with its last byte read as zeros without a
 * fault (the kernel maps that page whole), so the check also reads one byte of the page after
 * the range: a page of the file still exists there only when the file still reaches past the
 * range. When that page lies outside the mapping, or already reads as zeros, the check cannot
 * tell and the caller compares the file's size (fstat). The cursor, which parses fields at
 * open, compares with `valid` only; the open then compares the file's size (api/file.c).
 *
 * The handler is installed once, on the first registration, and chains to the handler it
 * replaced for every other fault (not a BUS_ADRERR, not in a registered mapping, or a repair
 * that failed), so sanitizers, Python's faulthandler and applications keep theirs. The table
 * is a fixed array read by the handler with lock-free atomics (async-signal-safe); a mapping
 * that does not fit (the table is full, or the handler could not be installed) is not made:
 * the caller reads through pread instead. The zero pages are mapped with the raw system call,
 * past any sanitizer's mmap interceptor.
 */
#define _GNU_SOURCE
#include "io.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#define GUARD_SLOTS 4096

typedef struct guard_slot {
    _Atomic uintptr_t base; /* page-aligned start of the mapping; 0: free */
    _Atomic size_t len;     /* bytes mapped */
    _Atomic size_t valid;   /* bytes [0, valid) not yet found past the end of the file */
} guard_slot;

static guard_slot slots[GUARD_SLOTS];
static _Atomic size_t slots_hi;          /* slots [slots_hi, GUARD_SLOTS) have never been used */
static bool slot_used[GUARD_SLOTS];      /* under slots_lock */
static pthread_mutex_t slots_lock = PTHREAD_MUTEX_INITIALIZER;

static pthread_once_t install_once = PTHREAD_ONCE_INIT;
static bool installed;
static struct sigaction prev_action;     /* written before our handler is installed */
static size_t page_size = 4096;
static _Atomic uint64_t repairs;         /* faults repaired (tests) */

/* Passes a fault that is not ours to the handler we replaced. */
static void chain(int sig, siginfo_t *si, void *uc) {
    const struct sigaction *p = &prev_action;
    if (p->sa_flags & SA_SIGINFO) {
        if (p->sa_sigaction) p->sa_sigaction(sig, si, uc);
        return;
    }
    if (p->sa_handler != SIG_DFL && p->sa_handler != SIG_IGN) {
        p->sa_handler(sig);
        return;
    }
    /* default action: restore it; a fault then repeats on return and kills the process as it
     * would have without us, a sent signal is sent again (delivered when we return) */
    struct sigaction d;
    memset(&d, 0, sizeof d);
    d.sa_handler = SIG_DFL;
    sigemptyset(&d.sa_mask);
    sigaction(sig, &d, NULL);
    if (!si || si->si_code <= 0) raise(sig);
}

static void on_sigbus(int sig, siginfo_t *si, void *uc) {
    const int saved_errno = errno;
    if (si && si->si_code == BUS_ADRERR) {
        const uintptr_t a = (uintptr_t)si->si_addr;
        const size_t hi = atomic_load_explicit(&slots_hi, memory_order_acquire);
        for (size_t i = 0; i < hi; i++) {
            guard_slot *g = &slots[i];
            const uintptr_t b = atomic_load_explicit(&g->base, memory_order_acquire);
            if (!b || a < b) continue;
            const size_t len = atomic_load_explicit(&g->len, memory_order_relaxed);
            if (a - b >= len || atomic_load_explicit(&g->base, memory_order_acquire) != b)
                continue;
            const size_t from = (size_t)(a - b) & ~(page_size - 1);
            const size_t span = ((len + page_size - 1) & ~(page_size - 1)) - from;
            /* lower `valid` before the zeros appear: a thread that reads them sees it lowered */
            size_t v = atomic_load_explicit(&g->valid, memory_order_relaxed);
            while (v > from && !atomic_compare_exchange_weak_explicit(
                                   &g->valid, &v, from, memory_order_seq_cst, memory_order_relaxed)) {
            }
            long r = syscall(SYS_mmap, (void *)(b + from), span, PROT_READ,
                             MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
            if (r != -1) {
                atomic_fetch_add_explicit(&repairs, 1, memory_order_relaxed);
                errno = saved_errno;
                return;
            }
            break; /* could not repair: the fault stays fatal */
        }
    }
    errno = saved_errno;
    chain(sig, si, uc);
}

static void install(void) {
    long pg = sysconf(_SC_PAGESIZE);
    if (pg > 0 && tbx_is_pow2((uint64_t)pg)) page_size = (size_t)pg;
    /* read the current action first, so prev_action is complete before ours can run */
    if (sigaction(SIGBUS, NULL, &prev_action) != 0) return;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_sigbus;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    installed = sigaction(SIGBUS, &sa, NULL) == 0;
}

int tbx_mapguard_add(const void *base, size_t len) {
    if (!base || !len) return -1;
    pthread_once(&install_once, install);
    if (!installed || ((uintptr_t)base & (page_size - 1))) return -1;
    int slot = -1;
    pthread_mutex_lock(&slots_lock);
    for (size_t i = 0; i < GUARD_SLOTS; i++) {
        if (slot_used[i]) continue;
        slot_used[i] = true;
        guard_slot *g = &slots[i];
        atomic_store_explicit(&g->len, len, memory_order_relaxed);
        atomic_store_explicit(&g->valid, len, memory_order_relaxed);
        atomic_store_explicit(&g->base, (uintptr_t)base, memory_order_release);
        if (i >= atomic_load_explicit(&slots_hi, memory_order_relaxed))
            atomic_store_explicit(&slots_hi, i + 1, memory_order_release);
        slot = (int)i;
        break;
    }
    pthread_mutex_unlock(&slots_lock);
    return slot;
}

void tbx_mapguard_remove(int slot) {
    if (slot < 0 || slot >= GUARD_SLOTS) return;
    pthread_mutex_lock(&slots_lock);
    atomic_store_explicit(&slots[slot].base, 0, memory_order_release);
    slot_used[slot] = false;
    pthread_mutex_unlock(&slots_lock);
}

size_t tbx_mapguard_valid(int slot) {
    if (slot < 0 || slot >= GUARD_SLOTS) return 0;
    return atomic_load_explicit(&slots[slot].valid, memory_order_acquire);
}

const _Atomic size_t *tbx_mapguard_valid_ptr(int slot) {
    if (slot < 0 || slot >= GUARD_SLOTS) return NULL;
    return &slots[slot].valid;
}

int tbx_mapguard_check(int slot, size_t end) {
    if (slot < 0 || slot >= GUARD_SLOTS) return -1;
    guard_slot *g = &slots[slot];
    const uint8_t *base = (const uint8_t *)atomic_load_explicit(&g->base, memory_order_relaxed);
    const size_t len = atomic_load_explicit(&g->len, memory_order_relaxed);
    return tbx_mapguard_probe(base, len, &g->valid, end, page_size);
}

size_t tbx_mapguard_page(void) {
    pthread_once(&install_once, install);
    return page_size;
}

uint64_t tbx_mapguard_repairs_(void) {
    return atomic_load_explicit(&repairs, memory_order_relaxed);
}
