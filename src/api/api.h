/*
 * api.h - the façade's private header (src/api/): everything below it (the model, io, access,
 * the registry) and what only the façade provides internally. The façade implements the public
 * functions that need the registry or several layers at once: opening (format detection, sets
 * of files), opening a writer for a format, conversions (the plan of src/models or the plain
 * one, carried out by src/convert), validation of a path, and the GGUF file tools. Unit tests,
 * fuzz targets and benchmarks include it to reach any internal function.
 */
#ifndef TBX_API_H
#define TBX_API_H

#include "access.h"
#include "registry.h"

/* tbx_validate_path for a file in memory or behind a read callback (same contract; the open
 * options' allocator, limits, format and threads apply). Internal for now: the fuzz targets and
 * the fault-injection test run the validation pass on their inputs through these. */
tbx_status tbx_validate_memory_(const void *data, size_t size, const tbx_open_options *opt,
                                tbx_problem_fn cb, void *ud, uint64_t *nproblems);
tbx_status tbx_validate_callback_(tbx_read_at_fn read_at, void *read_ud, uint64_t size,
                                  const tbx_open_options *opt, tbx_problem_fn cb, void *ud,
                                  uint64_t *nproblems);

/* tbx_open_path for the path of a provider (src/io/provider.h): a set a driver claims, else the
 * provider's file of that path (prov->ops->open with name NULL), detected by its first bytes.
 * The handle takes the provider (freed by tbx_close, or here when the open fails). How a
 * non-local provider (issue 24: HTTP range requests, S3, hf://) plugs in: it fills the same
 * record and operations, and no driver changes. Internal for now (tests/unit/test_provider.c
 * opens an in-memory provider through it). */
tbx_status tbx_open_provider_(tbx_file **out, tbx_provider *prov, const tbx_open_options *opt,
                              tbx_error *err);

/* tbx_writer_open with internal flags (TBX_WRITE_EDIT_). */
tbx_status tbx_writer_open_(tbx_writer **out, const char *path, const tbx_write_options *opt,
                            uint32_t internal_flags, tbx_error *err);

/* tbx_diff's arithmetic (diff.c), for tests/unit/test_diff.c: the sums of n value pairs (a the
 * reference) as out = {n, equal, nonfinite, nonfinite mismatches, sum (b-a)^2, sum a^2, sum b^2,
 * sum ab, max |b-a|} (finite pairs only in the sums); the metrics of such sums as m = {max_abs,
 * rmse, nmse, cosine} (NaN when undefined); llama's q/k row order (plan.h
 * TBX_XF_PERMUTE_HEADS) of rows x cols values in heads of d rows, in to out. */
void tbx_diff_sums_(const float *a, const float *b, uint64_t n, double out[9]);
/* Its fast path (every value finite; 0 otherwise, out unusable): simd 0 the scalar lanes,
 * else the AVX2 kernel when the CPU has it (the same bits). */
int tbx_diff_sums_finite_(const float *a, const float *b, uint64_t n, double out[9], int simd);
void tbx_diff_metrics_(const double s[9], double m[4]);
void tbx_diff_permute_(const float *in, float *out, uint64_t rows, uint64_t cols, uint64_t d);

#endif /* TBX_API_H */
