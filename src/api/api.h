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
#include "plan.h"

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

/* (shards.c) The shards of a sharded output: the plan's tensors packed by the rule of the
 * format's tool into shards of at most `max` bytes of output tensors (a larger tensor alone):
 * TBX_SHARD_HUB as huggingface_hub's split_torch_state_dict_into_shards (a tensor above the
 * limit becomes a shard at once, before the one being filled), TBX_SHARD_GGUF as llama.cpp's
 * gguf-split --split-max-size (consecutive; sizes padded to 32 bytes). The plan's tensors (and
 * its importance-matrix vectors) are put in shard order, stably, so shard s is the window
 * [start[s], start[s + 1]); names is cleared when that moved any. Free with tbx_shards_free. */
typedef enum tbx_shard_rule { TBX_SHARD_HUB, TBX_SHARD_GGUF } tbx_shard_rule;
typedef struct tbx_shards {
    size_t *start;          /* n + 1 entries */
    size_t n;               /* shards (at least 1) */
    size_t cap_;
    uint64_t total_bytes;   /* the output tensors' bytes (unpadded) */
    uint64_t total_values;  /* their elements */
} tbx_shards;
tbx_status tbx_shards_pack(tbx_plan *p, const tbx_file *in, uint64_t max, tbx_shard_rule rule,
                           tbx_shards *out, tbx_error *err);
void tbx_shards_free(tbx_plan *p, tbx_shards *s);

#endif /* TBX_API_H */
