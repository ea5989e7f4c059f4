/*
 * batch.c - many components at once: tbx_read_batch, and the scheduler validation's pass over
 * the data runs on too (validate.c).
 *
 * The scheduler (tbx_batch_drive_) keeps a window of jobs in flight: a ring of 2 x threads jobs,
 * each one component to read into the caller's buffer (or, with no buffer, to decode and verify
 * only), run on a worker pool (tbx_pool, core.h). Jobs are filled in index order by the
 * caller's `fill` and their results taken in the same order by its `done`, on the calling
 * thread, so results, errors and problem reports come out in the same order whatever the thread
 * count, and memory stays bounded by the window whatever the number of requests. One thread (no
 * pool) when the source is a read callback, which may not be reentrant. While workers run, a
 * problem callback of the handle is called under a lock (f->problem_lock).
 *
 * A driver may take a whole batch itself (its read_batch hook: EMBD reads its data region in
 * file order and checks its CRC over those very bytes); otherwise each job reads through
 * tbx_comp_read_into_ (read.c): raw bytes from the source, encoded ones through the driver's
 * read_component, which must allow distinct components to be read on several threads at once.
 */
#include "access_int.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>

static void batch_run(tbx_task *task) {
    tbx_batch_job *j = (tbx_batch_job *)task;
    tbx_file *f = j->f;
    const tbx_tensor *t = j->t;
    if (j->buf) {
        j->st = tbx_comp_read_into_(f, t, j->c, j->buf, &j->err);
        return;
    }
    if (f->drv->check_component) {
        j->st = f->drv->check_component(f, t, j->c, &j->err);
        return;
    }
    /* No bounded-memory check: read it whole into a buffer (bounded by max_tensor_bytes). */
    const tbx_component *k = &t->comp[j->c];
    if (k->nbytes > SIZE_MAX || k->nbytes > f->limits.max_tensor_bytes) {
        j->st = tbx_err(&j->err, TBX_E_LIMIT, k->offset, t->name,
                        "tensor \"%s\": %llu decoded bytes exceed max_tensor_bytes", t->name,
                        (unsigned long long)k->nbytes);
        return;
    }
    void *buf = tbx_malloc(&f->al, (size_t)k->nbytes);
    if (!buf) {
        j->st = tbx_err_nomem(&j->err, t->name);
        return;
    }
    j->st = tbx_comp_read_into_(f, t, j->c, buf, &j->err);
    tbx_free(&f->al, buf, (size_t)k->nbytes);
}

/* Worker threads for a batch on f: `threads`, else the handle's, else the default. */
int tbx_batch_threads_(const tbx_file *f, uint32_t threads) {
    if (f->src.kind == TBX_SRC_CALLBACK) return 1; /* the caller's callback may not be reentrant */
    if (!threads) threads = f->threads;
    if (!threads) return tbx_threads_default();
    return threads > TBX_POOL_MAX ? TBX_POOL_MAX : (int)threads;
}

tbx_status tbx_batch_drive_(tbx_file *f, int nth, size_t n, tbx_batch_fill_fn fill,
                            tbx_batch_done_fn done, void *ctx, tbx_error *err) {
    tbx_pool *pool = nth > 1 && n > 1 ? tbx_pool_start(&f->al, nth) : NULL;
    const size_t win = pool ? 2 * (size_t)tbx_pool_threads(pool) : 1;
    tbx_batch_job *ring = tbx_calloc(&f->al, win, sizeof *ring);
    if (!ring) {
        tbx_pool_stop(pool);
        return tbx_err_nomem(err, "batch jobs");
    }
    pthread_mutex_t mu;
    bool locked = pool && f->on_problem && pthread_mutex_init(&mu, NULL) == 0;
    if (pool && f->on_problem && !locked) { /* no lock: report problems from one thread */
        tbx_pool_stop(pool);
        pool = NULL;
    }
    if (locked) f->problem_lock = &mu;
    uint64_t sub = 0, fin = 0;
    size_t next = 0;
    for (;;) {
        while (sub - fin < win && next < n) {
            tbx_batch_job *j = &ring[sub % win];
            memset(j, 0, sizeof *j);
            j->task.run = batch_run;
            j->f = f;
            j->idx = next;
            if (fill(ctx, next++, j)) {
                tbx_pool_submit(pool, &j->task);
                sub++;
            }
        }
        if (fin == sub) break;
        tbx_batch_job *j = &ring[fin++ % win];
        tbx_pool_wait(pool, &j->task, true);
        done(ctx, j);
    }
    tbx_pool_stop(pool);
    if (locked) {
        f->problem_lock = NULL;
        pthread_mutex_destroy(&mu);
    }
    tbx_free(&f->al, ring, win * sizeof *ring);
    return TBX_OK;
}

typedef struct read_batch_ctx {
    tbx_read_req *reqs;
} read_batch_ctx;

static bool read_batch_fill(void *ctx, size_t idx, tbx_batch_job *j) {
    tbx_read_req *r = &((read_batch_ctx *)ctx)->reqs[idx];
    tbx_file *f = j->f;
    size_t needed = 0;
    /* the checks of tbx_component_read (index, size, buffer), without reading */
    r->status = tbx_component_read(f, r->tensor, r->component, NULL, 0, &needed, &r->error);
    if (r->status == TBX_E_BUFFER_TOO_SMALL && r->buf && r->cap >= needed) r->status = TBX_OK;
    else if (r->status == TBX_E_BUFFER_TOO_SMALL)
        tbx_err(&r->error, TBX_E_BUFFER_TOO_SMALL, TBX_NO_OFFSET, "buffer",
                "tensor \"%s\" component %u needs a buffer of %zu bytes, got %zu",
                f->tensors[r->tensor].name, r->component, needed, r->buf ? r->cap : 0);
    if (r->status != TBX_OK) return false;
    memset(&r->error, 0, sizeof r->error);
    j->t = &f->tensors[r->tensor];
    j->c = r->component;
    j->buf = r->buf;
    return true;
}

static void read_batch_done(void *ctx, tbx_batch_job *j) {
    tbx_read_req *r = &((read_batch_ctx *)ctx)->reqs[j->idx];
    r->status = j->st;
    if (j->st != TBX_OK) r->error = j->err;
}

tbx_status tbx_read_batch(tbx_file *f, tbx_read_req *reqs, size_t n, uint32_t threads,
                          tbx_error *err) {
    if (!f) return tbx_bad_index_(err, f, 0);
    if (n && !reqs)
        return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "reqs", "NULL request array");
    if (n == 0) return TBX_OK;
    /* The caller's elements are struct_size bytes apart (an older caller's may be shorter than
     * ours): work on full copies, hand back the prefix each element has. */
    uint32_t ss = reqs[0].struct_size;
    size_t stride = ss ? ss : sizeof(tbx_read_req), have = tbx_struct_bytes(ss, sizeof(tbx_read_req));
    if (stride < sizeof ss)
        return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "reqs.struct_size",
                       "struct_size %" PRIu32 " is too small", ss);
    uint8_t *base = (uint8_t *)reqs;
    tbx_read_req *work = (ss == 0 || ss == sizeof(tbx_read_req)) ? reqs : NULL;
    if (!work) {
        work = tbx_calloc(&f->al, n, sizeof *work);
        if (!work) return tbx_err_nomem(err, "read requests");
        for (size_t i = 0; i < n; i++) {
            uint32_t si;
            memcpy(&si, base + i * stride, sizeof si);
            if (si != ss) {
                tbx_free(&f->al, work, n * sizeof *work);
                return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "reqs.struct_size",
                               "request %zu has struct_size %" PRIu32 ", request 0 has %" PRIu32
                               " (one array, one struct_size)", i, si, ss);
            }
            memcpy(&work[i], base + i * stride, have);
        }
    } else {
        for (size_t i = 1; i < n; i++)
            if (reqs[i].struct_size != ss)
                return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "reqs.struct_size",
                               "request %zu has struct_size %" PRIu32 ", request 0 has %" PRIu32
                               " (one array, one struct_size)", i, reqs[i].struct_size, ss);
    }
    read_batch_ctx ctx = {work};
    bool handled = false;
    tbx_status st = TBX_OK;
    if (f->drv->read_batch) st = f->drv->read_batch(f, work, n, threads, &handled, err);
    if (!handled)
        st = tbx_batch_drive_(f, tbx_batch_threads_(f, threads), n, read_batch_fill,
                              read_batch_done, &ctx, err);
    tbx_status first = TBX_OK;
    if (st == TBX_OK)
        for (size_t i = 0; i < n; i++)
            if (work[i].status != TBX_OK) {
                if (err) *err = work[i].error;
                first = work[i].status;
                break;
            }
    if (work != reqs) {
        for (size_t i = 0; i < n; i++) memcpy(base + i * stride, &work[i], have);
        tbx_free(&f->al, work, n * sizeof *work);
    }
    return st != TBX_OK ? st : first;
}
