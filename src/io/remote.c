/*
 * remote.c - a file read through HTTP(S) range requests (libcurl): the source kind
 * TBX_SRC_REMOTE behind http://, https://, s3:// and hf:// (remote_prov.c makes the URLs).
 *
 * The open makes one range request for the first FIRST_BYTES bytes: its 206 answer's
 * Content-Range gives the size, its ETag and Last-Modified identify the version read, and its
 * bytes stay in the block cache. Every later answer must be a 206 for exactly the bytes asked,
 * of the same size, ETag and Last-Modified, or the read fails: a file that changed while it is
 * read is an error, never a mix of two versions. A server that answers a range request with
 * 200 (the whole file) fails at once, unless the whole file is what was asked for.
 *
 * Reads below DIRECT_MIN go through a small cache of segments (NSEG, least recently used
 * replaced) filled by one request each: the read itself, or more when it starts where the
 * last request ended (sequential reads, as a header parse makes), the read-ahead doubling from
 * AHEAD_MIN up to AHEAD_MAX each time and falling back to AHEAD_MIN on a jump; a miss inside
 * the extent the reader hinted (tbx_source_hint: a tensor read in parts) takes the rest of that
 * extent, up to AHEAD_MAX, in one request. Larger reads
 * go straight into the caller's buffer, in ranges of `part` bytes of which up to `conc` are in
 * flight at once (curl multi); when the reader said that its reads go on through an extent
 * (tbx_source_hint: the tensor being read in chunks), a large read at its start, or after the
 * previous one, fetches up to WIN_MAX bytes of that extent in those parallel ranges into a
 * window that serves the next reads. Nothing past the extent is fetched.
 *
 * The prefetch: when the reader says which bytes it reads after the current extent
 * (tbx_remote_hint_next: a conversion's next tensor), a thread of the file's own with its own
 * handle fetches them into a segment of the cache while the reader works, AHEAD_MAX at a time,
 * and the rest of the current extent once the reader went on past its first read; one request
 * in flight, into a segment that holds nothing ahead of the reader (the cache's memory). A
 * read that reaches bytes on their way waits; a prefetch that failed is the error of the read
 * that reaches its bytes (pf_settle), never bytes. TBX_HTTP_PREFETCH=0 turns it off. Failed requests (connection refused or reset, time-outs, a body
 * cut short, HTTP 408/429/5xx) are retried `retries` times, the pause doubling from 250 ms
 * (8 s at most); a resumed request asks only for the bytes still missing.
 *
 * Settings come from the environment, read at each open, each bounded:
 *   TBX_HTTP_TIMEOUT      seconds to connect, and without a byte received (1..3600; 30)
 *   TBX_HTTP_RETRIES      retries of a failed request (0..20; 3)
 *   TBX_HTTP_CA_BUNDLE    PEM file of the certificate authorities to trust (else the system's;
 *                         CURL_CA_BUNDLE is also honoured); TLS peers are always verified
 *   TBX_HTTP_CONCURRENCY  ranges in flight for a large read (1..64; 8)
 *   TBX_HTTP_PART_MIB     size of those ranges in MiB (1..256; 8)
 *   TBX_HTTP_PREFETCH     0: no prefetch (default on)
 *   TBX_HTTP_VERBOSE      1: one line per request on stderr (method, URL, range, status,
 *                         bytes, time) and the totals at close
 * Messages and verbose lines show URLs without user info and without their query (a signed
 * URL's query is a credential); tokens and keys are never printed.
 */
#define _GNU_SOURCE
#include "io.h"

#include <curl/curl.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>
#include <time.h>

#define KIB ((size_t)1024)
#define MIB (KIB * 1024)
#define FIRST_BYTES (64 * KIB)
#define AHEAD_MIN (256 * KIB)
#define AHEAD_MAX (16 * MIB)
#define DIRECT_MIN (2 * MIB)
#define NSEG 4
#define WIN_MAX (64 * MIB)
#define MAX_CONC 64
#define TAG_MAX TBX_HTTP_TAG_MAX

typedef struct rm_conf {
    long timeout_s;
    int retries;
    const char *ca;
    bool verbose;
    bool prefetch;
    int conc;
    size_t part;
} rm_conf;

static long env_long(const char *name, long lo, long hi, long dflt) {
    const char *v = getenv(name);
    if (!v || !*v) return dflt;
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno || *end || x < lo) return dflt == lo ? lo : (x < lo ? lo : dflt);
    return x > hi ? hi : x;
}

static void conf_load(rm_conf *c) {
    c->timeout_s = env_long("TBX_HTTP_TIMEOUT", 1, 3600, 30);
    c->retries = (int)env_long("TBX_HTTP_RETRIES", 0, 20, 3);
    c->ca = getenv("TBX_HTTP_CA_BUNDLE");
    if (!c->ca || !*c->ca) c->ca = getenv("CURL_CA_BUNDLE");
    if (c->ca && !*c->ca) c->ca = NULL;
    const char *v = getenv("TBX_HTTP_VERBOSE");
    c->verbose = v && *v && strcmp(v, "0") != 0;
    c->conc = (int)env_long("TBX_HTTP_CONCURRENCY", 1, MAX_CONC, 8);
    c->part = (size_t)env_long("TBX_HTTP_PART_MIB", 1, 256, 8) * MIB;
    v = getenv("TBX_HTTP_PREFETCH");
    c->prefetch = !v || !*v || strcmp(v, "0") != 0;
}

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc = CURLE_FAILED_INIT;
static void curl_init(void) { curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT); }

bool tbx_remote_is_url(const char *path) {
    return path && (!strncmp(path, "http://", 7) || !strncmp(path, "https://", 8) ||
                    !strncmp(path, "s3://", 5) || !strncmp(path, "hf://", 5));
}

/* The URL as messages show it: no user info, no query or fragment (made with al). */
static char *url_shown(const tbx_alloc *al, const char *url) {
    const char *scheme_end = strstr(url, "://");
    const char *host = scheme_end ? scheme_end + 3 : url;
    const char *path = host + strcspn(host, "/?#");
    const char *at = NULL;
    for (const char *c = host; c < path; c++)
        if (*c == '@') at = c;
    const char *q = path + strcspn(path, "?#");
    size_t a = (size_t)(host - url), b = (size_t)(q - (at ? at + 1 : host));
    char *s = tbx_malloc(al, a + b + 5);
    if (!s) return NULL;
    memcpy(s, url, a);
    memcpy(s + a, at ? at + 1 : host, b);
    s[a + b] = 0;
    if (*q) strcat(s, "?...");
    return s;
}

static void membuf_free(tbx_membuf *b) {
    if (b->p) tbx_free(b->al, b->p, b->cap);
    b->p = NULL;
    b->n = b->cap = 0;
}

static void str_free(const tbx_alloc *al, char *s) {
    if (s) tbx_free(al, s, strlen(s) + 1);
}

static char *str_dup(const tbx_alloc *al, const char *s) {
    return s ? tbx_memdup0(al, s, strlen(s)) : NULL;
}

/* ------------------------------------------------------------------------------------------ */
/* One request                                                                                 */
/* ------------------------------------------------------------------------------------------ */
typedef struct rm_seg {
    uint8_t *p;
    size_t cap, len;
    uint64_t off, stamp;
    /* a segment the prefetch thread fills: bytes [off, off + want) are on their way (busy),
     * or their request failed (failed: err says why, told to the read that reaches them) */
    size_t want;
    bool busy, failed;
    tbx_error err;
} rm_seg;

struct tbx_remote {
    tbx_alloc al;
    rm_conf conf;
    char *url, *shown, *eff;   /* eff: where the first request's redirects led (NULL: url) */
    char *bearer, *sigv4, *userpwd;
    struct curl_slist *hdrs;
    uint64_t size;
    char etag[TAG_MAX], lastmod[TAG_MAX];
    pthread_mutex_t lock;      /* the cache and `easy` */
    CURL *easy;
    rm_seg seg[NSEG];
    rm_seg win;                /* the window of a large read that goes on (tbx_remote_hint) */
    uint64_t hint_a, hint_b;   /* the extent the reads under way go through */
    uint64_t clock, seq_end;
    size_t ahead;
    pthread_mutex_t big;       /* multi and parts (large reads) */
    CURLM *multi;
    CURL *parts[MAX_CONC];
    _Atomic uint64_t nreq, nbytes;
    pthread_mutex_t urlm;      /* eff (every request reads it, a refused redirect resets it) */
    /* the prefetch (under `lock`): the extent the reader said comes after the one under way
     * (tbx_remote_hint_next), the thread, its handle, the segment it fills */
    uint64_t next_a, next_b;
    uint64_t pos_a, pos;       /* where the last read began and ended */
    pthread_cond_t pf_cv;      /* the thread waits for work, a reader for a busy segment */
    pthread_t pf_thread;
    bool pf_started, pf_running;
    _Atomic bool pf_quit;
    CURL *pf_easy;
    rm_seg *pf_seg;
};

typedef struct xfer {
    tbx_remote *r;        /* the file (NULL: a request made without one: HEAD, small GET) */
    uint8_t *dst;
    uint64_t off;
    size_t len, got;
    bool probe;           /* the open's request: learns the size and the version */
    bool whole;           /* a plain GET of a document (no range) */
    size_t max;           /* whole: the most bytes accepted */
    tbx_membuf *doc;         /* whole: where they go */
    tbx_http_head h;      /* the answer's headers (http_parse.c) */
    bool checked;
    bool discard;         /* the answer's body is not the file's (an empty file's 416) */
    tbx_status bad;       /* the answer was refused: why */
    char why[512];
    char range[64];
} xfer;

static size_t on_header(char *b, size_t sz, size_t nm, void *ud) {
    xfer *x = ud;
    size_t n = sz * nm;
    tbx_http_head_line(&x->h, b, n); /* a problem is kept and judged by check_answer */
    return n;
}

/* The answer's headers, checked once before its first byte is taken. */
static void check_answer(xfer *x) {
    x->checked = true;
    tbx_remote *r = x->r;
    tbx_http_want w = {.probe = x->probe, .whole = x->whole, .off = x->off, .len = x->len,
                       .max = x->max, .size = r ? r->size : 0, .etag = r ? r->etag : "",
                       .lastmod = r ? r->lastmod : ""};
    tbx_http_got g;
    tbx_error e;
    tbx_status st = tbx_http_check(&x->h, &w, &g, &e);
    if (st != TBX_OK) {
        x->bad = st;
        /* an error status is told by request_error ("HTTP 404 Not Found") */
        if (x->h.status >= 200 && x->h.status < 300) snprintf(x->why, sizeof x->why, "%s",
                                                              e.message);
        return;
    }
    if (x->whole) return;
    if (g.learn) {
        r->size = g.size;
        memcpy(r->etag, x->h.etag, TAG_MAX);
        memcpy(r->lastmod, x->h.lastmod, TAG_MAX);
    }
    x->len = g.len;
    x->discard = g.discard;
}

static size_t on_body(char *b, size_t sz, size_t nm, void *ud) {
    xfer *x = ud;
    size_t n = sz * nm;
    if (!x->checked) check_answer(x);
    if (x->bad) return 0;
    if (x->discard) return n;
    if (x->whole) {
        if (x->doc->n + n > x->max) {
            x->bad = TBX_E_LIMIT;
            snprintf(x->why, sizeof x->why, "the document has more than the %zu bytes accepted",
                     x->max);
            return 0;
        }
        tbx_membuf_put(x->doc, b, n);
        x->got += n;
        return x->doc->oom ? 0 : n;
    }
    if (n > x->len - x->got) {
        x->bad = TBX_E_IO;
        snprintf(x->why, sizeof x->why, "the server sent more than the %zu bytes asked for",
                 x->len);
        return 0;
    }
    memcpy(x->dst + x->got, b, n);
    x->got += n;
    return n;
}

/* The options every request of `auth` shares. */
static void setup_common(CURL *h, const rm_conf *c, const char *bearer, const char *sigv4,
                         const char *userpwd, struct curl_slist *hdrs) {
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(h, CURLOPT_MAXREDIRS, 10L);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(h, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, c->timeout_s);
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, c->timeout_s);
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 1L);
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 2L);
    if (c->ca) curl_easy_setopt(h, CURLOPT_CAINFO, c->ca);
    curl_easy_setopt(h, CURLOPT_USERAGENT, "tensorbox");
    curl_easy_setopt(h, CURLOPT_BUFFERSIZE, 512L * 1024); /* fewer, larger callbacks */
    curl_easy_setopt(h, CURLOPT_ACCEPT_ENCODING, NULL); /* bytes as stored: ranges index them */
    if (bearer) {
        curl_easy_setopt(h, CURLOPT_HTTPAUTH, CURLAUTH_BEARER);
        curl_easy_setopt(h, CURLOPT_XOAUTH2_BEARER, bearer);
    }
    if (sigv4 && userpwd) {
        curl_easy_setopt(h, CURLOPT_AWS_SIGV4, sigv4);
        curl_easy_setopt(h, CURLOPT_USERPWD, userpwd);
    }
    if (hdrs) curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
}

/* Returns whether the request goes where the first answer's redirects led (r->eff). */
static bool setup_range(CURL *h, tbx_remote *r, xfer *x) {
    curl_easy_reset(h);
    setup_common(h, &r->conf, r->bearer, r->sigv4, r->userpwd, r->hdrs);
    pthread_mutex_lock(&r->urlm); /* curl copies the string */
    const bool via_eff = r->eff != NULL;
    curl_easy_setopt(h, CURLOPT_URL, via_eff ? r->eff : r->url);
    pthread_mutex_unlock(&r->urlm);
    snprintf(x->range, sizeof x->range, "%" PRIu64 "-%" PRIu64, x->off, x->off + x->len - 1);
    curl_easy_setopt(h, CURLOPT_RANGE, x->range);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, x);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, x);
    curl_easy_setopt(h, CURLOPT_PRIVATE, x);
    return via_eff;
}

/* The prefetch thread's requests end early when the file is closed. */
static int pf_progress(void *ud, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un) {
    (void)dt; (void)dn; (void)ut; (void)un;
    return atomic_load(&((tbx_remote *)ud)->pf_quit) ? 1 : 0;
}

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static void verbose_line(const rm_conf *c, const char *method, const char *shown, const xfer *x,
                         CURLcode rc, double ms) {
    if (!c->verbose) return;
    if (x->range[0])
        fprintf(stderr, "tbx: %s %s bytes=%s -> %ld, %zu bytes, %.0f ms%s%s\n", method, shown,
                x->range, x->h.status, x->got, ms, rc ? ": " : "", rc ? curl_easy_strerror(rc) : "");
    else
        fprintf(stderr, "tbx: %s %s -> %ld, %zu bytes, %.0f ms%s%s\n", method, shown, x->h.status,
                x->got, ms, rc ? ": " : "", rc ? curl_easy_strerror(rc) : "");
}

static bool retryable(CURLcode rc, const xfer *x) {
    if (x->bad && x->h.status >= 200 && x->h.status < 300) return false; /* a refused answer */
    switch (rc) {
    case CURLE_OK:
        return x->h.status == 408 || x->h.status == 429 || x->h.status >= 500 || x->got < x->len;
    case CURLE_WRITE_ERROR:
        return x->h.status == 408 || x->h.status == 429 || x->h.status >= 500;
    case CURLE_COULDNT_CONNECT: case CURLE_OPERATION_TIMEDOUT: case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR: case CURLE_PARTIAL_FILE: case CURLE_GOT_NOTHING:
    case CURLE_HTTP2: case CURLE_HTTP2_STREAM: case CURLE_SSL_CONNECT_ERROR:
        return true;
    default:
        return false;
    }
}

static void backoff(int attempt) {
    long ms = 250L << (attempt < 5 ? attempt : 5);
    if (ms > 8000) ms = 8000;
    struct timespec t = { ms / 1000, (ms % 1000) * 1000000L };
    while (nanosleep(&t, &t) != 0 && errno == EINTR) {}
}

static const char *status_text(long s) {
    switch (s) {
    case 400: return " Bad Request";
    case 401: return " Unauthorized (credentials missing or refused)";
    case 403: return " Forbidden (credentials missing or refused)";
    case 404: return " Not Found";
    case 410: return " Gone";
    case 416: return " Range Not Satisfiable";
    case 429: return " Too Many Requests";
    default: return "";
    }
}

/* The error of a request that failed for good. */
static tbx_status request_error(const xfer *x, CURLcode rc, const char *shown, int attempts,
                                const char *field, tbx_error *err) {
    char tries[48] = "";
    if (attempts > 1) snprintf(tries, sizeof tries, " (after %d attempts)", attempts);
    /* the open's errors name the file only; a read's the field too */
    char head[1024];
    if (!field || !strcmp(field, "path")) snprintf(head, sizeof head, "%s", shown);
    else snprintf(head, sizeof head, "%s: %s", field, shown);
    const char *what = head;
    if (x->bad && x->why[0])
        return tbx_err_at(err, x->bad, x->off, field, "%s: %s%s", what, x->why, tries);
    if (x->h.status >= 300 && (rc == CURLE_OK || rc == CURLE_WRITE_ERROR))
        return tbx_err_at(err, TBX_E_IO, x->off, field, "%s: HTTP %ld%s%s%s%s", what,
                          x->h.status, status_text(x->h.status), x->range[0] ? " for bytes " : "",
                          x->range, tries);
    if (rc == CURLE_OK)
        return tbx_err_at(err, TBX_E_IO, x->off, field,
                          "%s: the body ended after %zu of %zu bytes%s", what, x->got,
                          x->len, tries);
    return tbx_err_at(err, TBX_E_IO, x->off, field, "%s: %s%s%s%s%s", what,
                      curl_easy_strerror(rc), x->range[0] ? " (bytes " : "", x->range,
                      x->range[0] ? ")" : "", tries);
}

/* Reads [off, off+len) of r into dst through handle h, with the retries. *got: the bytes
 * now in dst (a probe may get fewer than asked: the file is shorter). */
static tbx_status fetch(tbx_remote *r, CURL *h, uint8_t *dst, uint64_t off, size_t len,
                        bool probe, size_t *got, const char *field, tbx_error *err) {
    size_t done = 0;
    for (int attempt = 0;; attempt++) {
        xfer x;
        memset(&x, 0, sizeof x);
        x.r = r;
        x.dst = dst + done;
        x.off = off + done;
        x.len = len - done;
        x.probe = probe && done == 0;
        const bool via_eff = setup_range(h, r, &x);
        if (h == r->pf_easy) {
            curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
            curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, pf_progress);
            curl_easy_setopt(h, CURLOPT_XFERINFODATA, r);
        }
        double t0 = now_ms();
        CURLcode rc = curl_easy_perform(h);
        if (rc == CURLE_OK && !x.checked) check_answer(&x); /* an empty body */
        atomic_fetch_add(&r->nreq, 1);
        atomic_fetch_add(&r->nbytes, x.got);
        verbose_line(&r->conf, h == r->pf_easy ? "GET (prefetch)" : "GET", r->shown, &x, rc,
                     now_ms() - t0);
        if (x.probe && x.checked && !x.bad && !via_eff) {
            char *eff = NULL;
            pthread_mutex_lock(&r->urlm);
            if (!r->eff && curl_easy_getinfo(h, CURLINFO_EFFECTIVE_URL, &eff) == CURLE_OK &&
                eff && strcmp(eff, r->url) != 0)
                r->eff = str_dup(&r->al, eff);
            pthread_mutex_unlock(&r->urlm);
        }
        if (x.checked && !x.bad) done += x.got;
        if (rc == CURLE_OK && !x.bad && x.got == x.len) {
            if (x.probe) len = x.len;
            *got = done;
            return TBX_OK;
        }
        if (x.probe && x.checked && !x.bad) { len = x.len; probe = false; }
        if (via_eff && x.bad && (x.h.status == 401 || x.h.status == 403 ||
                                 x.h.status == 404 || x.h.status == 410)) {
            /* where the first answer's redirects led is refused now (a signed CDN address
             * that expired): ask the URL itself again, once */
            pthread_mutex_lock(&r->urlm);
            str_free(&r->al, r->eff);
            r->eff = NULL;
            pthread_mutex_unlock(&r->urlm);
            attempt--;
            continue;
        }
        if (!retryable(rc, &x) || attempt >= r->conf.retries ||
            (h == r->pf_easy && atomic_load(&r->pf_quit))) {
            *got = done;
            return request_error(&x, rc, r->shown, attempt + 1, field, err);
        }
        backoff(attempt);
    }
}

/* ------------------------------------------------------------------------------------------ */
/* Large reads: parallel ranges                                                                */
/* ------------------------------------------------------------------------------------------ */
static tbx_status read_parallel(tbx_remote *r, uint8_t *dst, uint64_t off, size_t len,
                                const char *field, tbx_error *err) {
    const size_t part = r->conf.part;
    const size_t nparts = (len + part - 1) / part;
    pthread_mutex_lock(&r->big);
    tbx_status st = TBX_OK;
    if (!r->multi) r->multi = curl_multi_init();
    xfer *xs = tbx_calloc(&r->al, nparts, sizeof *xs);
    if (!r->multi || !xs) {
        pthread_mutex_unlock(&r->big);
        tbx_free(&r->al, xs, nparts * sizeof *xs);
        return tbx_err_nomem(err, "remote read");
    }
    int conc = r->conf.conc < (int)nparts ? r->conf.conc : (int)nparts;
    for (int i = 0; i < conc; i++)
        if (!r->parts[i] && !(r->parts[i] = curl_easy_init())) conc = i;
    if (conc == 0) {
        pthread_mutex_unlock(&r->big);
        tbx_free(&r->al, xs, nparts * sizeof *xs);
        return tbx_err_nomem(err, "remote read");
    }
    bool *redo = tbx_calloc(&r->al, nparts, sizeof *redo);
    double *t0 = tbx_calloc(&r->al, (size_t)conc, sizeof *t0);
    size_t *slot_part = tbx_calloc(&r->al, (size_t)conc, sizeof *slot_part);
    if (!redo || !t0 || !slot_part) {
        st = tbx_err_nomem(err, "remote read");
        goto out;
    }
    size_t next = 0, running = 0;
    int free_slots[MAX_CONC], nfree = 0;
    for (int i = conc - 1; i >= 0; i--) free_slots[nfree++] = i;
    while (next < nparts || running > 0) {
        while (next < nparts && nfree > 0) {
            int sl = free_slots[--nfree];
            xfer *x = &xs[next];
            x->r = r;
            x->off = off + (uint64_t)next * part;
            x->len = next + 1 < nparts ? part : len - next * part;
            x->dst = dst + next * part;
            setup_range(r->parts[sl], r, x);
            curl_easy_setopt(r->parts[sl], CURLOPT_PRIVATE, (char *)(uintptr_t)(size_t)sl);
            slot_part[sl] = next;
            t0[sl] = now_ms();
            curl_multi_add_handle(r->multi, r->parts[sl]);
            next++;
            running++;
        }
        int still = 0, done_now = 0;
        CURLMcode mc = curl_multi_perform(r->multi, &still);
        if (mc != CURLM_OK) {
            st = tbx_err(err, TBX_E_IO, off, field, "%s: %s: %s", field ? field : "data",
                         r->shown, curl_multi_strerror(mc));
            break;
        }
        CURLMsg *m;
        int left;
        while ((m = curl_multi_info_read(r->multi, &left)) != NULL) {
            if (m->msg != CURLMSG_DONE) continue;
            char *pv = NULL;
            curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, &pv);
            int sl = (int)(uintptr_t)pv;
            size_t pi = slot_part[sl];
            xfer *x = &xs[pi];
            CURLcode rc = m->data.result;
            if (rc == CURLE_OK && !x->checked) check_answer(x);
            atomic_fetch_add(&r->nreq, 1);
            atomic_fetch_add(&r->nbytes, x->got);
            verbose_line(&r->conf, "GET", r->shown, x, rc, now_ms() - t0[sl]);
            curl_multi_remove_handle(r->multi, m->easy_handle);
            free_slots[nfree++] = sl;
            running--;
            done_now++;
            if (rc == CURLE_OK && !x->bad && x->got == x->len) continue;
            if (!retryable(rc, x)) {
                if (st == TBX_OK) st = request_error(x, rc, r->shown, 1, field, err);
                next = nparts; /* start nothing more */
            } else {
                redo[pi] = true;
            }
        }
        /* wait for the sockets only when nothing ended: a slot freed is refilled at once (a
         * wait here, with the finished transfer not yet read, stalled every round) */
        if (!done_now && running > 0) {
            mc = curl_multi_poll(r->multi, NULL, 0, 100, NULL);
            if (mc != CURLM_OK) {
                st = tbx_err(err, TBX_E_IO, off, field, "%s: %s: %s", field ? field : "data",
                             r->shown, curl_multi_strerror(mc));
                break;
            }
        }
    }
    /* parts whose request failed in a way worth retrying: one by one, with the retries */
    for (size_t i = 0; i < nparts && st == TBX_OK; i++) {
        if (!redo[i]) continue;
        size_t got = 0;
        st = fetch(r, r->parts[0], xs[i].dst, xs[i].off, xs[i].len, false, &got, field, err);
    }
out:
    for (int i = 0; i < conc; i++) curl_multi_remove_handle(r->multi, r->parts[i]);
    tbx_free(&r->al, redo, nparts * sizeof *redo);
    tbx_free(&r->al, t0, (size_t)conc * sizeof *t0);
    tbx_free(&r->al, slot_part, (size_t)conc * sizeof *slot_part);
    tbx_free(&r->al, xs, nparts * sizeof *xs);
    pthread_mutex_unlock(&r->big);
    return st;
}

/* ------------------------------------------------------------------------------------------ */
/* The source                                                                                  */
/* ------------------------------------------------------------------------------------------ */
static void remote_free(tbx_remote *r) {
    if (!r) return;
    const tbx_alloc al = r->al;
    if (r->pf_started) { /* its request under way ends at its next progress call */
        pthread_mutex_lock(&r->lock);
        atomic_store(&r->pf_quit, true);
        pthread_cond_broadcast(&r->pf_cv);
        pthread_mutex_unlock(&r->lock);
        pthread_join(r->pf_thread, NULL);
    }
    if (r->pf_easy) curl_easy_cleanup(r->pf_easy);
    if (r->conf.verbose && r->shown)
        fprintf(stderr, "tbx: %s: %" PRIu64 " requests, %" PRIu64 " bytes received\n", r->shown,
                (uint64_t)atomic_load(&r->nreq), (uint64_t)atomic_load(&r->nbytes));
    for (int i = 0; i < NSEG; i++) tbx_free(&al, r->seg[i].p, r->seg[i].cap);
    tbx_free(&al, r->win.p, r->win.cap);
    for (int i = 0; i < MAX_CONC; i++)
        if (r->parts[i]) curl_easy_cleanup(r->parts[i]);
    if (r->multi) curl_multi_cleanup(r->multi);
    if (r->easy) curl_easy_cleanup(r->easy);
    if (r->hdrs) curl_slist_free_all(r->hdrs);
    str_free(&al, r->url);
    str_free(&al, r->shown);
    str_free(&al, r->eff);
    str_free(&al, r->bearer);
    str_free(&al, r->sigv4);
    if (r->userpwd) { /* a secret: not left in freed memory */
        size_t n = strlen(r->userpwd);
        explicit_bzero(r->userpwd, n);
        tbx_free(&al, r->userpwd, n + 1);
    }
    pthread_mutex_destroy(&r->lock);
    pthread_mutex_destroy(&r->big);
    pthread_mutex_destroy(&r->urlm);
    pthread_cond_destroy(&r->pf_cv);
    tbx_free(&al, r, sizeof *r);
}

void tbx_remote_close(tbx_remote *r) { remote_free(r); }

static tbx_status remote_new(tbx_remote **out, const tbx_alloc *al, const char *url,
                             const char *shown, const tbx_remote_auth *auth, tbx_error *err) {
    *out = NULL;
    pthread_once(&curl_once, curl_init);
    if (curl_init_rc != CURLE_OK)
        return tbx_err(err, TBX_E_IO, TBX_NO_OFFSET, "path", "libcurl cannot start: %s",
                       curl_easy_strerror(curl_init_rc));
    tbx_remote *r = tbx_malloc(al, sizeof *r);
    if (!r) return tbx_err_nomem(err, "remote file");
    memset(r, 0, sizeof *r);
    r->al = *al;
    pthread_mutex_init(&r->lock, NULL);
    pthread_mutex_init(&r->big, NULL);
    pthread_mutex_init(&r->urlm, NULL);
    pthread_cond_init(&r->pf_cv, NULL);
    atomic_init(&r->pf_quit, false);
    conf_load(&r->conf);
    r->ahead = AHEAD_MIN;
    r->url = str_dup(al, url);
    r->shown = shown ? str_dup(al, shown) : url_shown(al, url);
    bool ok = r->url && r->shown;
    if (auth && auth->bearer) ok = ok && (r->bearer = str_dup(al, auth->bearer)) != NULL;
    if (auth && auth->sigv4 && auth->userpwd) {
        ok = ok && (r->sigv4 = str_dup(al, auth->sigv4)) != NULL;
        ok = ok && (r->userpwd = str_dup(al, auth->userpwd)) != NULL;
    }
    if (ok && auth && auth->header) ok = (r->hdrs = curl_slist_append(NULL, auth->header)) != NULL;
    if (ok) ok = (r->easy = curl_easy_init()) != NULL;
    if (!ok) {
        remote_free(r);
        return tbx_err_nomem(err, "remote file");
    }
    *out = r;
    return TBX_OK;
}

tbx_status tbx_remote_open(tbx_source *s, const tbx_alloc *al, const char *url, const char *shown,
                           const tbx_remote_auth *auth, tbx_error *err) {
    memset(s, 0, sizeof *s);
    s->fd = -1;
    s->guard = -1;
    tbx_remote *r;
    tbx_status st = remote_new(&r, al, url, shown, auth, err);
    if (st != TBX_OK) return st;
    rm_seg *g = &r->seg[0];
    g->p = tbx_malloc(al, FIRST_BYTES);
    if (!g->p) { remote_free(r); return tbx_err_nomem(err, "remote file"); }
    g->cap = FIRST_BYTES;
    size_t got = 0;
    st = fetch(r, r->easy, g->p, 0, FIRST_BYTES, true, &got, "path", err);
    if (st != TBX_OK) { remote_free(r); return st; }
    g->len = got;
    g->stamp = ++r->clock;
    r->seq_end = got;
    /* the prefetch's handle, made before any thread can compare with it (fetch) */
    if (r->conf.prefetch && !(r->pf_easy = curl_easy_init())) r->conf.prefetch = false;
    s->kind = TBX_SRC_REMOTE;
    s->size = r->size;
    s->remote = r;
    return TBX_OK;
}

/* fetch of exactly len bytes through the handle of the cache (r->lock held). */
static tbx_status fetch_all(tbx_remote *r, uint8_t *dst, uint64_t off, size_t len,
                            const char *field, tbx_error *err) {
    size_t got = 0;
    return fetch(r, r->easy, dst, off, len, false, &got, field, err);
}

/* ------------------------------------------------------------------------------------------ */
/* The prefetch: one thread per file, its own handle, one segment in flight                    */
/* ------------------------------------------------------------------------------------------ */
/* The end of the segment's bytes: received, or on their way / failed (busy, failed). */
static uint64_t seg_end(const rm_seg *g) {
    return g->off + (g->busy || g->failed ? g->want : g->len);
}

static bool seg_holds(const rm_seg *g, uint64_t x) {
    return (g->len || g->busy || g->failed) && x >= g->off && x < seg_end(g);
}

/* The first byte from x on that no segment holds or is fetching. */
static uint64_t covered_end(const tbx_remote *r, uint64_t x) {
    for (bool moved = true; moved;) {
        moved = false;
        for (int i = 0; i < NSEG; i++)
            if (seg_holds(&r->seg[i], x)) { x = seg_end(&r->seg[i]); moved = true; }
    }
    return x;
}

static void *pf_main(void *arg);

/* Starts, when there is one and nothing is in flight, the fetch of the bytes the reader comes
 * to next: the rest of the extent it reads in parts (once it went on past that extent's
 * first read), else the extent it said comes after (AHEAD_MAX at a time, as long as a
 * segment is free of bytes ahead of the reader).
 * The segment it fills is the least recently used one that holds none of the bytes at or
 * ahead of the reader; the prefetch's memory is the cache's (r->lock held). */
static void pf_plan(tbx_remote *r) {
    if (!r->conf.prefetch || r->pf_seg || atomic_load(&r->pf_quit) || !r->size) return;
    const uint64_t pos = r->pos;
    uint64_t a = 0, b = 0;
    if (r->pos_a > r->hint_a && pos < r->hint_b) { /* a second read of the extent */
        a = covered_end(r, pos);
        b = r->hint_b;
    }
    if (a >= b && r->next_b > r->next_a) {
        a = covered_end(r, r->next_a);
        b = r->next_b;
    }
    if (a >= b || a >= r->size) return;
    if (b > r->size) b = r->size;
    if (b - a > AHEAD_MAX) b = a + AHEAD_MAX;
    rm_seg *g = NULL;
    for (int i = 0; i < NSEG; i++) {
        rm_seg *c = &r->seg[i];
        if (c->busy || (pos && seg_holds(c, pos - 1)) || seg_holds(c, pos) ||
            (c->len && c->off >= pos && c->off < r->hint_b) ||
            (r->next_b > r->next_a && (seg_holds(c, r->next_a) ||
                                        (c->len && c->off >= r->next_a && c->off < r->next_b))))
            continue;
        if (!g || c->stamp < g->stamp) g = c;
    }
    if (!g) return;
    if (!r->pf_started) {
        if (!r->pf_easy) { r->conf.prefetch = false; return; }
        if (pthread_create(&r->pf_thread, NULL, pf_main, r) != 0) {
            r->conf.prefetch = false; /* reads go on without it */
            return;
        }
        r->pf_started = true;
    }
    const size_t want = (size_t)(b - a);
    if (g->cap < want) {
        tbx_free(&r->al, g->p, g->cap);
        g->cap = g->len = 0;
        g->failed = false;
        if (!(g->p = tbx_malloc(&r->al, want))) return; /* no prefetch; the read will say */
        g->cap = want;
    }
    g->len = 0;
    g->failed = false;
    g->off = a;
    g->want = want;
    g->busy = true;
    r->pf_seg = g;
    pthread_cond_broadcast(&r->pf_cv);
}

static void *pf_main(void *arg) {
    tbx_remote *r = arg;
    pthread_mutex_lock(&r->lock);
    for (;;) {
        while (!atomic_load(&r->pf_quit) && !(r->pf_seg && !r->pf_running))
            pthread_cond_wait(&r->pf_cv, &r->lock);
        if (atomic_load(&r->pf_quit)) break;
        rm_seg *g = r->pf_seg;
        const uint64_t off = g->off;
        const size_t want = g->want;
        r->pf_running = true;
        pthread_mutex_unlock(&r->lock);
        /* no field: the read that reaches these bytes names its own (pf_settle) */
        size_t got = 0;
        tbx_error e;
        memset(&e, 0, sizeof e);
        const tbx_status st = fetch(r, r->pf_easy, g->p, off, want, false, &got, NULL, &e);
        pthread_mutex_lock(&r->lock);
        r->pf_running = false;
        r->pf_seg = NULL;
        g->busy = false;
        if (st == TBX_OK) {
            g->len = got;
            g->stamp = ++r->clock;
        } else {
            g->len = 0;
            g->failed = true;
            g->err = e;
        }
        pthread_cond_broadcast(&r->pf_cv);
        if (st == TBX_OK) pf_plan(r);
    }
    pthread_mutex_unlock(&r->lock);
    return NULL;
}

/* Before a read at off goes to the network: waits for a prefetch under way of its bytes; a
 * prefetch of them that failed is this read's error, said as the read's own request would
 * have said it (r->lock held). */
static tbx_status pf_settle(tbx_remote *r, uint64_t off, const char *field, tbx_error *err) {
    for (;;) {
        rm_seg *g = NULL;
        for (int i = 0; i < NSEG; i++)
            if ((r->seg[i].busy || r->seg[i].failed) && seg_holds(&r->seg[i], off)) g = &r->seg[i];
        if (!g) return TBX_OK;
        if (g->busy) {
            pthread_cond_wait(&r->pf_cv, &r->lock);
            continue;
        }
        g->failed = false; /* said once; a later read asks again */
        g->len = 0;
        if (!field || !strcmp(field, "path"))
            return tbx_err_at(err, g->err.code, g->err.offset, field, "%s", g->err.message);
        return tbx_err_at(err, g->err.code, g->err.offset, field, "%s: %s", field,
                          g->err.message);
    }
}

void tbx_remote_hint(tbx_remote *r, uint64_t off, uint64_t len) {
    if (!r) return;
    pthread_mutex_lock(&r->lock);
    r->hint_a = off;
    r->hint_b = off + len < r->size ? off + len : r->size;
    if (r->next_b > r->next_a && off < r->next_b && r->hint_b > r->next_a)
        r->next_a = r->next_b = 0; /* the reader is there */
    pthread_mutex_unlock(&r->lock);
}

void tbx_remote_hint_next(tbx_remote *r, uint64_t off, uint64_t len) {
    if (!r) return;
    pthread_mutex_lock(&r->lock);
    r->next_a = off < r->size ? off : r->size;
    r->next_b = off + len < r->size && off + len >= off ? off + len : r->size;
    pf_plan(r);
    pthread_mutex_unlock(&r->lock);
}

/* A read of [off, off+len) is under way: where the reader is (r->lock held). */
static void reached(tbx_remote *r, uint64_t off, uint64_t len) {
    r->pos_a = off;
    r->pos = off + len;
    if (r->next_b > r->next_a && off < r->next_b && off + len > r->next_a)
        r->next_a = r->next_b = 0; /* the reader is there */
}

/* Copies what the cache holds of [off, off+len) from its start; returns the bytes copied. */
static size_t cache_take(tbx_remote *r, uint64_t off, uint8_t *dst, size_t len) {
    for (int i = 0; i < NSEG; i++) {
        rm_seg *g = &r->seg[i];
        if (!g->len || g->busy || off < g->off || off >= g->off + g->len) continue;
        size_t n = (size_t)(g->off + g->len - off);
        if (n > len) n = len;
        memcpy(dst, g->p + (off - g->off), n);
        g->stamp = ++r->clock;
        return n;
    }
    return 0;
}

tbx_status tbx_remote_read(tbx_remote *r, uint64_t off, void *buf, size_t len, const char *field,
                           tbx_error *err) {
    uint8_t *dst = buf;
    if (len >= DIRECT_MIN) {
        pthread_mutex_lock(&r->lock);
        rm_seg *w = &r->win;
        tbx_status st = pf_settle(r, off, field, err);
        if (st != TBX_OK) {
            pthread_mutex_unlock(&r->lock);
            return st;
        }
        reached(r, off, len);
        for (int i = 0; i < NSEG; i++) { /* a segment the prefetch filled */
            rm_seg *g = &r->seg[i];
            if (!g->len || g->busy || off < g->off || off + len > g->off + g->len) continue;
            memcpy(dst, g->p + (off - g->off), len);
            g->stamp = ++r->clock;
            r->seq_end = off + len;
            pf_plan(r);
            pthread_mutex_unlock(&r->lock);
            return TBX_OK;
        }
        if (w->len && off >= w->off && off + len <= w->off + w->len) {
            memcpy(dst, w->p + (off - w->off), len);
            r->seq_end = off + len;
            pthread_mutex_unlock(&r->lock);
            return TBX_OK;
        }
        /* a read that the extent hinted goes on past: a window of up to WIN_MAX bytes of it,
         * fetched in parallel ranges, serves this read and the next ones */
        uint64_t want = len;
        if (off >= r->hint_a && off + len < r->hint_b && (off == r->hint_a || off == r->seq_end)) {
            want = r->hint_b - off;
            if (want > WIN_MAX) want = WIN_MAX > len ? WIN_MAX : len;
        }
        if (want > len) {
            if (w->cap < want) {
                tbx_free(&r->al, w->p, w->cap);
                w->cap = w->len = 0;
                w->p = tbx_malloc(&r->al, (size_t)want);
                if (!w->p) st = tbx_err_nomem(err, "remote read window");
                else w->cap = (size_t)want;
            }
            if (st == TBX_OK) {
                w->len = 0;
                w->off = off;
                st = r->conf.conc > 1 && want >= 2 * r->conf.part
                         ? read_parallel(r, w->p, off, (size_t)want, field, err)
                         : fetch_all(r, w->p, off, (size_t)want, field, err);
                if (st == TBX_OK) {
                    w->len = (size_t)want;
                    memcpy(dst, w->p, len);
                    r->seq_end = off + len;
                }
            }
            pthread_mutex_unlock(&r->lock);
            return st;
        }
        pthread_mutex_unlock(&r->lock);
        if (len >= 2 * r->conf.part && r->conf.conc > 1)
            st = read_parallel(r, dst, off, len, field, err);
        else {
            pthread_mutex_lock(&r->lock);
            st = fetch_all(r, dst, off, len, field, err);
            pthread_mutex_unlock(&r->lock);
        }
        pthread_mutex_lock(&r->lock);
        r->seq_end = off + len;
        pthread_mutex_unlock(&r->lock);
        return st;
    }
    tbx_status st = TBX_OK;
    pthread_mutex_lock(&r->lock);
    reached(r, off, len);
    while (len > 0) {
        size_t n = cache_take(r, off, dst, len);
        if (n) { off += n; dst += n; len -= n; continue; }
        if ((st = pf_settle(r, off, field, err)) != TBX_OK) break;
        if ((n = cache_take(r, off, dst, len)) != 0) { off += n; dst += n; len -= n; continue; }
        /* a miss: one request for the read and the read-ahead */
        if (off >= r->hint_a && off < r->hint_b) {
            /* inside an extent read in parts: as much of the rest of it as the read-ahead may
             * take at once, not a ramp from AHEAD_MIN (a request per doubling, a round trip
             * each, for every tensor of a conversion) */
            uint64_t rest = r->hint_b - off;
            r->ahead = rest > AHEAD_MAX ? AHEAD_MAX : rest < AHEAD_MIN ? AHEAD_MIN : (size_t)rest;
        } else if (off == r->seq_end) {
            r->ahead = r->ahead * 2 > AHEAD_MAX ? AHEAD_MAX : r->ahead * 2;
        } else {
            r->ahead = AHEAD_MIN;
        }
        uint64_t want = len > r->ahead ? len : r->ahead;
        if (want > r->size - off) want = r->size - off;
        /* not the bytes a segment holds or the prefetch is fetching */
        for (int i = 0; i < NSEG; i++) {
            const rm_seg *c = &r->seg[i];
            if ((c->len || c->busy) && c->off > off && c->off - off < want)
                want = c->off - off > len ? c->off - off : len;
        }
        rm_seg *g = NULL;
        for (int i = 0; i < NSEG; i++)
            if (!r->seg[i].busy && (!g || r->seg[i].stamp < g->stamp)) g = &r->seg[i];
        if (g->cap < want) {
            tbx_free(&r->al, g->p, g->cap);
            g->cap = 0;
            g->len = 0;
            g->p = tbx_malloc(&r->al, (size_t)want);
            if (!g->p) { st = tbx_err_nomem(err, "remote cache"); break; }
            g->cap = (size_t)want;
        }
        g->len = 0;
        g->failed = false;
        g->off = off;
        size_t got = 0;
        st = fetch(r, r->easy, g->p, off, (size_t)want, false, &got, field, err);
        if (st != TBX_OK) break;
        g->len = got;
        g->stamp = ++r->clock;
        r->seq_end = off + got;
    }
    if (st == TBX_OK) pf_plan(r);
    pthread_mutex_unlock(&r->lock);
    return st;
}

/* ------------------------------------------------------------------------------------------ */
/* Requests without a file: HEAD, a small document                                             */
/* ------------------------------------------------------------------------------------------ */
tbx_status tbx_remote_head(const tbx_alloc *al, const char *url, const char *shown,
                           const tbx_remote_auth *auth, bool forbidden_missing, bool *exists,
                           uint64_t *size, tbx_error *err) {
    *exists = false;
    *size = 0;
    tbx_remote *r;
    tbx_status st = remote_new(&r, al, url, shown, auth, err);
    if (st != TBX_OK) return st;
    for (int attempt = 0;; attempt++) {
        xfer x;
        memset(&x, 0, sizeof x);
        curl_easy_reset(r->easy);
        setup_common(r->easy, &r->conf, r->bearer, r->sigv4, r->userpwd, r->hdrs);
        curl_easy_setopt(r->easy, CURLOPT_URL, url);
        curl_easy_setopt(r->easy, CURLOPT_NOBODY, 1L);
        curl_easy_setopt(r->easy, CURLOPT_HEADERDATA, &x);
        curl_easy_setopt(r->easy, CURLOPT_WRITEDATA, &x);
        double t0 = now_ms();
        CURLcode rc = curl_easy_perform(r->easy);
        verbose_line(&r->conf, "HEAD", r->shown, &x, rc, now_ms() - t0);
        if (rc == CURLE_OK && x.h.status >= 200 && x.h.status < 300 && x.h.err.code) {
            st = tbx_err_at(err, x.h.err.code, TBX_NO_OFFSET, "path", "%s: %s", r->shown,
                            x.h.err.message);
            break;
        }
        if (rc == CURLE_OK && x.h.status >= 200 && x.h.status < 300) {
            *exists = true;
            *size = x.h.has_clen ? x.h.clen : 0;
            break;
        }
        if (rc == CURLE_OK && (x.h.status == 404 || x.h.status == 410 ||
                               (forbidden_missing && x.h.status == 403)))
            break;
        x.len = 0;
        if (!retryable(rc, &x) || attempt >= r->conf.retries) {
            st = request_error(&x, rc, r->shown, attempt + 1, "path", err);
            break;
        }
        backoff(attempt);
    }
    r->conf.verbose = false; /* no totals line for a HEAD */
    remote_free(r);
    return st;
}

tbx_status tbx_remote_get(const tbx_alloc *al, const char *url, const char *shown,
                          const tbx_remote_auth *auth, size_t max, char **body, size_t *len,
                          tbx_error *err) {
    return tbx_remote_get_page(al, url, shown, auth, max, body, len, NULL, 0, err);
}

tbx_status tbx_remote_get_page(const tbx_alloc *al, const char *url, const char *shown,
                               const tbx_remote_auth *auth, size_t max, char **body, size_t *len,
                               char *next, size_t cap, tbx_error *err) {
    *body = NULL;
    *len = 0;
    if (next && cap) next[0] = 0;
    tbx_remote *r;
    tbx_status st = remote_new(&r, al, url, shown, auth, err);
    if (st != TBX_OK) return st;
    tbx_membuf doc;
    for (int attempt = 0;; attempt++) {
        memset(&doc, 0, sizeof doc);
        doc.al = al;
        xfer x;
        memset(&x, 0, sizeof x);
        x.whole = true;
        x.max = max;
        x.doc = &doc;
        curl_easy_reset(r->easy);
        setup_common(r->easy, &r->conf, r->bearer, r->sigv4, r->userpwd, r->hdrs);
        curl_easy_setopt(r->easy, CURLOPT_URL, url);
        curl_easy_setopt(r->easy, CURLOPT_HEADERDATA, &x);
        curl_easy_setopt(r->easy, CURLOPT_WRITEDATA, &x);
        double t0 = now_ms();
        CURLcode rc = curl_easy_perform(r->easy);
        if (rc == CURLE_OK && !x.checked) check_answer(&x);
        verbose_line(&r->conf, "GET", r->shown, &x, rc, now_ms() - t0);
        if (doc.oom) { st = tbx_err_nomem(err, "remote document"); break; }
        if (rc == CURLE_OK && !x.bad) {
            tbx_membuf_put(&doc, "", 1);
            if (doc.oom) { st = tbx_err_nomem(err, "remote document"); break; }
            *len = doc.n - 1;
            *body = tbx_memdup0(al, doc.p, *len);
            membuf_free(&doc);
            if (!*body) st = tbx_err_nomem(err, "remote document");
            if (next && cap) snprintf(next, cap, "%s", x.h.next);
            r->conf.verbose = false;
            remote_free(r);
            return st;
        }
        x.len = 0;
        if (!retryable(rc, &x) || attempt >= r->conf.retries) {
            st = request_error(&x, rc, r->shown, attempt + 1, "path", err);
            break;
        }
        membuf_free(&doc);
        backoff(attempt);
    }
    membuf_free(&doc);
    r->conf.verbose = false;
    remote_free(r);
    return st;
}
