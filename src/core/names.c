/*
 * names.c - a hash set of indices keyed by byte strings, for duplicate detection and lookups.
 *
 * The set stores only (index + 1) per slot; keys live in the caller's storage and are fetched
 * through key_of(ctx, index). Open addressing with linear probing; the table grows (doubles)
 * before it gets more than three quarters full, so inserts and lookups are O(1) on average. A
 * table sized at once (tbx_names_reserve) has exactly the slots that load needs, not a power of
 * two: the home slot of a hash is (hash * nslots) >> 32.
 *
 * Keys come from untrusted files, so the table mixes a per-process random seed into the hash:
 * a file cannot be crafted to make every name collide and turn loading into quadratic work.
 * tbx_hash_bytes itself is unseeded and stable across runs.
 */
#define _GNU_SOURCE
#include "core.h"

#include <pthread.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#define P1 0x9E3779B185EBCA87ull
#define P2 0xC2B2AE3D27D4EB4Full
#define P3 0x165667B19E3779F9ull

static inline uint64_t rotl64(uint64_t x, unsigned r) { return (x << r) | (x >> (64 - r)); }

/* Final avalanche: every input bit affects every output bit. */
static inline uint64_t fmix(uint64_t h) {
    h ^= h >> 33;
    h *= P2;
    h ^= h >> 29;
    h *= P3;
    h ^= h >> 32;
    return h;
}

static inline uint64_t round64(uint64_t h, uint64_t w) {
    h ^= w * P2;
    h = rotl64(h, 31) * P1;
    return h;
}

static uint64_t hash_seeded(const void *p, size_t n, uint64_t seed) {
    const uint8_t *b = (const uint8_t *)p;
    uint64_t h = seed ^ ((uint64_t)n * P1) ^ P3;
    while (n >= 8) {
        h = round64(h, tbx_ld64(b));
        b += 8;
        n -= 8;
    }
    if (n) {
        uint64_t w = 0;
        for (size_t i = 0; i < n; i++) w |= (uint64_t)b[i] << (8 * i);
        h = round64(h, w ^ P3);
    }
    return fmix(h);
}

uint64_t tbx_hash_bytes(const void *p, size_t n) { return hash_seeded(p, n, 0); }

/* Per-process seed, fixed once for the life of the process (tables stay consistent). */
static uint64_t process_seed;
static pthread_once_t seed_once = PTHREAD_ONCE_INIT;

static void seed_init(void) {
    /* the kernel's random bytes (getrandom: no file is opened, the library opens files only in
     * src/io); without them the time and an address still vary from run to run */
    uint64_t s = 0;
    if (getrandom(&s, sizeof s, GRND_NONBLOCK) != (ssize_t)sizeof s) s = 0;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t mix[4] = {s, (uint64_t)ts.tv_sec, (uint64_t)ts.tv_nsec, (uint64_t)(uintptr_t)&ts};
    process_seed = hash_seeded(mix, sizeof mix, (uint64_t)getpid());
}

static uint64_t table_seed(void) {
    pthread_once(&seed_once, seed_init);
    return process_seed;
}

void tbx_names_init(tbx_names *n, const tbx_alloc *al,
                    const char *(*key_of)(const void *ctx, uint64_t index, size_t *len),
                    const void *ctx) {
    if (!n) return;
    memset(n, 0, sizeof *n);
    n->al = al;
    n->key_of = key_of;
    n->ctx = ctx;
}

/* The table is one allocation of 2 * nslots 32-bit words: slots[0, nslots) hold (index + 1)
 * as the contract describes, slots[nslots, 2 * nslots) a 32-bit hash of each occupied slot (the
 * home slot is that hash masked, so growing never re-reads or re-hashes a key). Probes compare
 * hashes before fetching keys. 8 bytes a slot, at most 3/4 full: 10.7 bytes an entry when
 * reserved, up to 21 when grown.
 * Indices must stay below 2^32 - 1 (far above every count limit). */
static inline uint32_t *hashes_of(const tbx_names *n) { return n->slots + n->nslots; }

static size_t table_bytes(size_t nslots) { return nslots * 2 * sizeof(uint32_t); }

static inline uint32_t hash32(uint64_t h) { return (uint32_t)(h ^ (h >> 32)); }

/* The home slot of hash h in a table of nslots (< 2^32 + 1) slots. */
static inline size_t home_of(uint32_t h, size_t nslots) {
    return (size_t)(((uint64_t)h * (uint64_t)nslots) >> 32);
}

void tbx_names_free(tbx_names *n) {
    if (!n) return;
    if (n->slots) tbx_free(n->al, n->slots, table_bytes(n->nslots));
    n->slots = NULL;
    n->nslots = 0;
    n->count = 0;
}

static const char *key_at(const tbx_names *n, uint64_t index, size_t *len) {
    *len = 0;
    const char *k = n->key_of(n->ctx, index, len);
    if (!k) *len = 0;
    return k;
}

static bool key_eq(const char *a, size_t alen, const char *b, size_t blen) {
    return alen == blen && (alen == 0 || memcmp(a, b, alen) == 0);
}

/* Probes for key; returns true and *slot = its slot when present, else false and *slot = the
 * first empty slot of its probe sequence. The table must have at least one empty slot. */
static bool probe(const tbx_names *n, const char *key, size_t len, uint32_t h, size_t *slot) {
    const uint32_t *hashes = hashes_of(n);
    size_t i = home_of(h, n->nslots);
    for (;;) {
        uint32_t v = n->slots[i];
        if (v == 0) {
            *slot = i;
            return false;
        }
        if (hashes[i] == h) {
            size_t olen;
            const char *other = key_at(n, (uint64_t)v - 1, &olen);
            if (key_eq(key, len, other, olen)) {
                *slot = i;
                return true;
            }
        }
        if (++i == n->nslots) i = 0;
    }
}

static bool rehash(tbx_names *n, size_t nslots) {
    if (nslots > SIZE_MAX / (2 * sizeof(uint32_t)) || nslots > ((size_t)1 << 32)) return false;
    uint32_t *slots = (uint32_t *)tbx_calloc(n->al, nslots * 2, sizeof(uint32_t));
    if (!slots) return false;
    uint32_t *hashes = slots + nslots;
    const uint32_t *old_hashes = n->slots ? hashes_of(n) : NULL;
    for (size_t j = 0; j < n->nslots; j++) {
        uint32_t v = n->slots[j];
        if (!v) continue;
        uint32_t h = old_hashes[j];
        size_t i = home_of(h, nslots);
        while (slots[i]) if (++i == nslots) i = 0;
        slots[i] = v;
        hashes[i] = h;
    }
    if (n->slots) tbx_free(n->al, n->slots, table_bytes(n->nslots));
    n->slots = slots;
    n->nslots = nslots;
    return true;
}

/* May a table of nslots slots hold count entries (a load of at most 3/4, one slot empty)? */
static bool fits(size_t count, size_t nslots) {
    return count < nslots && count <= nslots / 4 * 3 + (nslots % 4) * 3 / 4;
}

/* Slots for `count` entries: growing, `have` doubled until they fit; reserving (have 0 and
 * exact), the fewest that fit. */
static bool slots_for(size_t count, size_t have, bool exact, size_t *out) {
    if (count >= SIZE_MAX / 4) return false;
    if (exact) {
        size_t want = count / 3 * 4 + (count % 3) * 2 + 1;
        if (want < 8) want = 8;
        while (!fits(count, want)) want++;
        *out = want;
        return true;
    }
    size_t want = have ? have : 8;
    while (!fits(count, want)) {
        if (want > SIZE_MAX / 2) return false;
        want *= 2;
    }
    *out = want;
    return true;
}

tbx_status tbx_names_reserve(tbx_names *n, size_t count) {
    if (!n) return TBX_E_INVALID_ARG;
    size_t want;
    if (fits(count, n->nslots)) return TBX_OK;
    if (!slots_for(count, n->nslots, n->count == 0, &want)) return TBX_E_NOMEM;
    if (want > n->nslots && !rehash(n, want)) return TBX_E_NOMEM;
    return TBX_OK;
}

tbx_status tbx_names_insert(tbx_names *n, uint64_t index, uint64_t *existing) {
    if (!n || !n->key_of || index >= UINT32_MAX) return TBX_E_INVALID_ARG;
    size_t len;
    const char *key = key_at(n, index, &len);
    uint32_t h = hash32(hash_seeded(key, len, table_seed()));
    size_t slot = 0;

    if (n->nslots && probe(n, key, len, h, &slot)) {
        if (existing) *existing = (uint64_t)n->slots[slot] - 1;
        return TBX_E_DUPLICATE;
    }
    /* Keep the load at or below three quarters. */
    if (!fits(n->count + 1, n->nslots)) {
        size_t want;
        if (!slots_for(n->count + 1, n->nslots, false, &want) || !rehash(n, want))
            return TBX_E_NOMEM;
        probe(n, key, len, h, &slot);
    }
    n->slots[slot] = (uint32_t)(index + 1);
    hashes_of(n)[slot] = h;
    n->count++;
    return TBX_OK;
}

bool tbx_names_find(const tbx_names *n, const char *key, size_t len, uint64_t *index) {
    if (!n || !n->slots || !n->nslots || !n->key_of) return false;
    if (!key && len) return false;
    size_t slot = 0;
    if (!probe(n, key ? key : "", len, hash32(hash_seeded(key, len, table_seed())), &slot))
        return false;
    if (index) *index = (uint64_t)n->slots[slot] - 1;
    return true;
}
