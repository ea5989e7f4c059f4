/*
 * access_int.h - what the reading files of src/access share among themselves (private to the
 * folder): read.c's component reads, which the batch scheduler (batch.c) runs on worker
 * threads, and the scheduler, which tbx_read_batch (batch.c) and validation's pass over the
 * data (validate.c) both drive.
 */
#ifndef TBX_ACCESS_INT_H
#define TBX_ACCESS_INT_H

#include "access.h"

/* ------------------------------------------------------------------------------------------ */
/* read.c                                                                                      */
/* ------------------------------------------------------------------------------------------ */
/* TBX_E_INVALID_ARG for a NULL handle or a tensor index out of range, naming the index. */
tbx_status tbx_bad_index_(tbx_error *err, const tbx_file *f, uint64_t i);
/* Must a read of component c go through the driver's read_component (encoded, or raw with a
 * check pending)? */
bool tbx_comp_via_driver_(const tbx_file *f, const tbx_tensor *t, uint32_t c);
/* Reads component c fully into buf (exactly comp->nbytes bytes): raw bytes straight from the
 * source, encoded ones (and raw ones with a pending check) through the driver. */
tbx_status tbx_comp_read_into_(tbx_file *f, const tbx_tensor *t, uint32_t c, void *buf,
                               tbx_error *err);

/* ------------------------------------------------------------------------------------------ */
/* The batch scheduler (batch.c)                                                               */
/* ------------------------------------------------------------------------------------------ */
typedef struct tbx_batch_job {
    tbx_task task;           /* first member: the pool sees only this */
    tbx_file *f;
    const tbx_tensor *t;
    uint32_t c;
    void *buf;               /* NULL: check only (decode and verify, keep nothing) */
    size_t idx;              /* the caller's index */
    tbx_status st;
    tbx_error err;
} tbx_batch_job;

/* fill: set up the job for index idx (false: nothing to run for it); done: take its result.
 * done runs on the calling thread in index order, whatever the thread count. */
typedef bool (*tbx_batch_fill_fn)(void *ctx, size_t idx, tbx_batch_job *j);
typedef void (*tbx_batch_done_fn)(void *ctx, tbx_batch_job *j);

/* Worker threads for a batch on f: `threads`, else the handle's, else the default (1 for a
 * callback source). */
int tbx_batch_threads_(const tbx_file *f, uint32_t threads);
/* Runs jobs for indices [0, n) on nth threads (at most 2 x nth in flight), calling fill and
 * done as above. TBX_OK unless the scheduler itself could not run (out of memory): the jobs'
 * own statuses go to done. */
tbx_status tbx_batch_drive_(tbx_file *f, int nth, size_t n, tbx_batch_fill_fn fill,
                            tbx_batch_done_fn done, void *ctx, tbx_error *err);

#endif /* TBX_ACCESS_INT_H */
