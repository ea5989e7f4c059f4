/*
 * pool.c - a small fixed pool of worker threads running caller-owned tasks in FIFO order.
 *
 * Used wherever independent pieces of work can overlap: the conversion engine's jobs
 * (src/convert/engine.c), decoding and verifying components (tbx_read_batch, tbx_validate),
 * compressing tensors (the zTensor writer). Tasks live in the caller's memory (no allocation per task); the caller submits them
 * and later waits for each one, usually in submission order, so results are consumed in a
 * deterministic order whatever the thread count. Without workers (one thread asked for, or
 * threads could not be started) a task runs inside tbx_pool_submit: the same code path, serial.
 */
#define _GNU_SOURCE
#include "core.h"

#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

struct tbx_pool {
    const tbx_alloc *al;
    pthread_mutex_t mu;
    pthread_cond_t work, fin;
    tbx_task *head, *tail;   /* submitted, not yet taken */
    uint64_t pending;        /* submitted, not yet finished */
    bool quit;
    int nth;
    pthread_t th[TBX_POOL_MAX];
};

int tbx_threads_default(void) {
    const char *e = getenv("TBX_THREADS");
    long n = e && *e ? strtol(e, NULL, 10) : sysconf(_SC_NPROCESSORS_ONLN);
    if (n < 1) n = 1;
    return n > TBX_THREADS_DEFAULT_MAX ? TBX_THREADS_DEFAULT_MAX : (int)n;
}

static void *worker(void *arg) {
    tbx_pool *p = arg;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->quit && !p->head) pthread_cond_wait(&p->work, &p->mu);
        tbx_task *t = p->head;
        if (!t) break; /* quit and nothing left */
        p->head = t->next;
        if (!p->head) p->tail = NULL;
        pthread_mutex_unlock(&p->mu);
        t->run(t);
        pthread_mutex_lock(&p->mu);
        t->done = true;
        p->pending--;
        pthread_cond_broadcast(&p->fin);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

tbx_pool *tbx_pool_start(const tbx_alloc *al, int nthreads) {
    if (nthreads <= 1) return NULL;
    if (nthreads > TBX_POOL_MAX) nthreads = TBX_POOL_MAX;
    tbx_pool *p = tbx_calloc(al, 1, sizeof *p);
    if (!p) return NULL;
    p->al = al;
    if (pthread_mutex_init(&p->mu, NULL) != 0) goto fail_mu;
    if (pthread_cond_init(&p->work, NULL) != 0) goto fail_work;
    if (pthread_cond_init(&p->fin, NULL) != 0) goto fail_fin;
    for (int k = 0; k < nthreads; k++) {
        if (pthread_create(&p->th[k], NULL, worker, p) != 0) break;
        p->nth++;
    }
    if (p->nth > 0) return p;
    pthread_cond_destroy(&p->fin);
fail_fin:
    pthread_cond_destroy(&p->work);
fail_work:
    pthread_mutex_destroy(&p->mu);
fail_mu:
    tbx_free(al, p, sizeof *p);
    return NULL; /* serial then */
}

int tbx_pool_threads(const tbx_pool *p) { return p ? p->nth : 0; }

void tbx_pool_submit(tbx_pool *p, tbx_task *t) {
    t->next = NULL;
    if (!p) {
        t->run(t);
        t->done = true;
        return;
    }
    pthread_mutex_lock(&p->mu);
    t->done = false;
    if (p->tail) p->tail->next = t;
    else p->head = t;
    p->tail = t;
    p->pending++;
    pthread_cond_signal(&p->work);
    pthread_mutex_unlock(&p->mu);
}

bool tbx_pool_wait(tbx_pool *p, tbx_task *t, bool block) {
    if (!p) return true;
    pthread_mutex_lock(&p->mu);
    while (block && !t->done) pthread_cond_wait(&p->fin, &p->mu);
    const bool d = t->done;
    pthread_mutex_unlock(&p->mu);
    return d;
}

void tbx_pool_drain(tbx_pool *p) {
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    while (p->pending) pthread_cond_wait(&p->fin, &p->mu);
    pthread_mutex_unlock(&p->mu);
}

void tbx_pool_stop(tbx_pool *p) {
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    p->quit = true;
    pthread_cond_broadcast(&p->work);
    pthread_mutex_unlock(&p->mu);
    for (int k = 0; k < p->nth; k++) pthread_join(p->th[k], NULL);
    pthread_cond_destroy(&p->fin);
    pthread_cond_destroy(&p->work);
    pthread_mutex_destroy(&p->mu);
    tbx_free(p->al, p, sizeof *p);
}
