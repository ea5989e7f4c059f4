/*
 * validate.c - tbx_validate: everything the open did not check, reported as problems.
 *
 * The open parsed and checked every field the model needs; validation adds what costs a pass
 * over the data. First every component that is encoded or has a pending check (a digest) goes
 * through the driver, on worker threads (the batch scheduler, batch.c): decoded once to prove
 * that it decodes to its declared size, its digest verified. Then the driver's own deep checks
 * (its validate hook: padding, index rules, value ranges). Last, the sources must still hold
 * the bytes they held at open: a file that shrank during the pass is not the file checked.
 *
 * Problems come back in file order whatever the thread count: during the pass the handle's
 * on_problem is pointed at a collector, so the drivers' reports and the jobs' errors land in
 * one list; the problems the open reported count too, and come first.
 */
#include "access_int.h"

#include <inttypes.h>

typedef struct validate_ctx {
    tbx_problem_fn cb;
    void *ud;
    uint64_t n;
    tbx_status first;
} validate_ctx;

static void collect_problem(void *ud, const tbx_error *e) {
    validate_ctx *v = ud;
    if (v->n++ == 0) v->first = e->code;
    if (v->cb) v->cb(v->ud, e);
}

/* Validation's pass over the data: every component that is encoded or has a pending check is
 * decoded/verified (check_component or a whole read), on worker threads. Problems go to
 * `report` in file order: during the pass on_problem is off, so they come back as errors. */
typedef struct check_ctx {
    tbx_file *f;
    size_t i;                /* the next component to consider: tensor i, component c */
    uint32_t c;
    tbx_problem_fn report;
    void *ud;
    uint64_t done, total;    /* stored bytes of the components checked / to check */
    bool cancelled;          /* the progress callback asked to stop */
} check_ctx;

/* Jobs are filled in index order: each takes the next component that needs the driver. */
static bool check_fill(void *ctx, size_t idx, tbx_batch_job *j) {
    check_ctx *x = ctx;
    (void)idx;
    if (x->cancelled) return false;
    for (; x->i < x->f->ntensors; x->i++, x->c = 0)
        for (; x->c < x->f->tensors[x->i].ncomp; x->c++)
            if (tbx_comp_via_driver_(x->f, &x->f->tensors[x->i], x->c)) {
                j->t = &x->f->tensors[x->i];
                j->c = x->c++;
                return true;
            }
    return false;
}

static void check_done(void *ctx, tbx_batch_job *j) {
    check_ctx *x = ctx;
    if (j->st != TBX_OK) x->report(x->ud, &j->err);
    x->done += j->t->comp[j->c].stored_bytes;
    if (x->f->progress && !x->cancelled && x->f->progress(x->f->progress_ud, x->done, x->total))
        x->cancelled = true;
}

static tbx_status check_components(tbx_file *f, tbx_error *err, tbx_problem_fn report,
                                   void *ud) {
    size_t n = 0;
    uint64_t total = 0;
    for (size_t i = 0; i < f->ntensors; i++)
        for (uint32_t c = 0; c < f->tensors[i].ncomp; c++)
            if (tbx_comp_via_driver_(f, &f->tensors[i], c)) {
                n++;
                total += f->tensors[i].comp[c].stored_bytes;
            }
    if (f->progress && f->progress(f->progress_ud, 0, total))
        return tbx_err(err, TBX_E_CANCELLED, TBX_NO_OFFSET, "progress",
                       "validation cancelled by the progress callback");
    if (n == 0) return TBX_OK;
    check_ctx x = {f, 0, 0, report, ud, 0, total, false};
    tbx_problem_fn saved = f->on_problem;
    f->on_problem = NULL;
    tbx_status st =
        tbx_batch_drive_(f, tbx_batch_threads_(f, 0), n, check_fill, check_done, &x, err);
    f->on_problem = saved;
    if (st == TBX_OK && x.cancelled)
        st = tbx_err(err, TBX_E_CANCELLED, TBX_NO_OFFSET, "progress",
                     "validation cancelled by the progress callback after %" PRIu64 " of %"
                     PRIu64 " bytes", x.done, x.total);
    return st;
}

/* The pass after open: encoded components are decoded once (to prove they decode to their
 * declared size) and digests verified, on worker threads; then the driver's deep checks.
 * Problems go to v (in file order), also those the driver reports through on_problem. */
static void validate_pass(tbx_file *f, validate_ctx *v) {
    tbx_problem_fn saved = f->on_problem;
    void *saved_ud = f->problem_ud;
    f->on_problem = collect_problem;
    f->problem_ud = v;
    tbx_error e;
    tbx_status st = check_components(f, &e, collect_problem, v);
    if (st != TBX_OK) collect_problem(v, &e);
    if (st == TBX_E_CANCELLED) { /* nothing more: the caller asked to stop */
        f->on_problem = saved;
        f->problem_ud = saved_ud;
        return;
    }
    if (f->drv->validate) {
        st = f->drv->validate(f, &e);
        if (st != TBX_OK) collect_problem(v, &e);
    }
    /* a file that shrank during the pass is not the file that was checked */
    if ((st = tbx_file_check_sources(f, &e)) != TBX_OK) collect_problem(v, &e);
    f->on_problem = saved;
    f->problem_ud = saved_ud;
}

tbx_status tbx_validate(tbx_file *f, tbx_problem_fn cb, void *ud, uint64_t *nproblems) {
    if (!f) {
        if (nproblems) *nproblems = 0;
        return TBX_E_INVALID_ARG;
    }
    /* the problems the open reported (to the open's on_problem) count, and come first */
    uint64_t at_open = f->nproblems;
    tbx_status first_at_open = f->first_problem;
    validate_ctx v = { cb, ud, 0, TBX_OK };
    validate_pass(f, &v);
    f->nproblems = at_open; /* a second call counts its own pass again, not this one */
    f->first_problem = first_at_open;
    if (nproblems) *nproblems = at_open + v.n;
    if (at_open) return first_at_open;
    return v.n ? v.first : TBX_OK;
}

