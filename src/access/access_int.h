/*
 * access_int.h - what read.c, batch.c and validate.c share (private to src/access).
 */
#ifndef TBX_ACCESS_INT_H
#define TBX_ACCESS_INT_H

#include "access.h"

tbx_status bad_index(tbx_error *err, const tbx_file *f, uint64_t i);
bool via_driver(const tbx_file *f, const tbx_tensor *t, uint32_t c);
tbx_status read_comp_into(tbx_file *f, const tbx_tensor *t, uint32_t c, void *buf,
                          tbx_error *err);

typedef struct batch_job {
    tbx_task task;           /* first member: the pool sees only this */
    tbx_file *f;
    const tbx_tensor *t;
    uint32_t c;
    void *buf;               /* NULL: check only (decode and verify, keep nothing) */
    size_t idx;              /* the caller's index */
    tbx_status st;
    tbx_error err;
} batch_job;

/* fill: set up the job for index idx (false: nothing to run for it); done: take its result.
 * done runs on the calling thread in index order, whatever the thread count. */
typedef bool (*batch_fill_fn)(void *ctx, size_t idx, batch_job *j);
typedef void (*batch_done_fn)(void *ctx, batch_job *j);

int batch_threads(const tbx_file *f, uint32_t threads);
tbx_status batch_drive(tbx_file *f, int nth, size_t n, batch_fill_fn fill,
                       batch_done_fn done, void *ctx, tbx_error *err);

#endif /* TBX_ACCESS_INT_H */
