/*
 * shards.c - how a plan is cut into the files of a sharded output (tbx_convert_options.
 * max_shard_size, the GGUF -> Hugging Face directory's shards): each output tensor's bytes, the
 * packing rule of the format's own tool, and the plan's tensors put in shard order so that each
 * shard is one window of the plan for the engine.
 */
#include "api.h"

/* The bytes tensor k of the plan takes in the output (its dtype and shape). */
static tbx_status out_bytes(const tbx_plan *p, const tbx_file *in, size_t k, uint64_t *out,
                            tbx_error *err) {
    uint32_t nd = 0;
    const uint64_t *sh = tbx_plan_shape(p, in, k, &nd);
    tbx_status st = tbx_dtype_nbytes_shape((tbx_dtype)p->t[k].dtype, sh, nd, out);
    if (st != TBX_OK) {
        size_t nl = 0;
        const char *nm = tbx_plan_name(p, in, k, &nl);
        return tbx_err(err, st, TBX_NO_OFFSET, "tensor", "tensor \"%.*s\": its size in the "
                       "output cannot be computed", (int)nl, nm);
    }
    return TBX_OK;
}

tbx_status tbx_shards_pack(tbx_plan *p, const tbx_file *in, uint64_t max, tbx_shard_rule rule,
                           tbx_shards *out, tbx_error *err) {
    memset(out, 0, sizeof *out);
    const size_t n = p->n;
    const tbx_alloc *al = &p->al;
    size_t *num = tbx_calloc(al, n + 1, sizeof *num);   /* group -> shard */
    size_t *grp = tbx_calloc(al, n + 1, sizeof *grp);   /* tensor -> group, then shard */
    size_t *start = tbx_calloc(al, n + 2, sizeof *start);
    tbx_status st = num && grp && start ? TBX_OK : tbx_err_nomem(err, "shards");
    size_t ng = 0, nsh = 0;
    size_t cur_g = SIZE_MAX;
    uint64_t cur = 0;
    for (size_t k = 0; st == TBX_OK && k < n; k++) {
        uint64_t b = 0;
        if ((st = out_bytes(p, in, k, &b, err)) != TBX_OK) break;
        out->total_bytes += b;
        uint64_t ne = 1;
        uint32_t nd = 0;
        const uint64_t *sh = tbx_plan_shape(p, in, k, &nd);
        for (uint32_t d = 0; d < nd; d++) ne *= sh[d];
        out->total_values += ne;
        if (rule == TBX_SHARD_GGUF) {
            /* gguf-split: the next tensor, padded to 32 bytes, would pass the limit */
            b = (b + 31) & ~(uint64_t)31;
            if (cur_g != SIZE_MAX && cur + b > max) {
                num[cur_g] = nsh++;
                cur_g = SIZE_MAX;
            }
        } else {
            /* huggingface_hub: a tensor above the limit is a shard of its own at once */
            if (b > max) {
                num[ng] = nsh++;
                grp[k] = ng++;
                continue;
            }
            if (cur_g != SIZE_MAX && cur + b > max) {
                num[cur_g] = nsh++;
                cur_g = SIZE_MAX;
            }
        }
        if (cur_g == SIZE_MAX) {
            cur_g = ng++;
            cur = 0;
        }
        grp[k] = cur_g;
        cur += b;
    }
    if (st == TBX_OK && cur_g != SIZE_MAX) num[cur_g] = nsh++;
    if (st == TBX_OK && nsh == 0) nsh = 1; /* no tensor: one file all the same */
    /* the plan in shard order (stable), each shard a window */
    tbx_plan_tensor *t2 = st == TBX_OK && n ? tbx_calloc(al, n, sizeof *t2) : NULL;
    const float **qw2 = st == TBX_OK && n && p->qw ? tbx_calloc(al, n, sizeof *qw2) : NULL;
    uint8_t *why2 = st == TBX_OK && n && p->qw_why ? tbx_calloc(al, n, 1) : NULL;
    if (st == TBX_OK && n && (!t2 || (p->qw && !qw2) || (p->qw_why && !why2)))
        st = tbx_err_nomem(err, "shards");
    if (st == TBX_OK && n) {
        for (size_t k = 0; k < n; k++) grp[k] = num[grp[k]]; /* tensor -> shard */
        for (size_t k = 0; k < n; k++) start[grp[k] + 1]++;
        for (size_t s = 0; s < nsh; s++) start[s + 1] += start[s];
        size_t *pos = num; /* reused: the next slot of each shard */
        for (size_t s = 0; s < nsh; s++) pos[s] = start[s];
        bool moved = false;
        for (size_t k = 0; k < n; k++) {
            const size_t j = pos[grp[k]]++;
            moved |= j != k;
            t2[j] = p->t[k];
            if (qw2) qw2[j] = p->qw[k];
            if (why2) why2[j] = p->qw_why[k];
        }
        if (moved) {
            /* the input's name index no longer matches the plan's order */
            memcpy(p->t, t2, n * sizeof *t2);
            if (qw2) memcpy((void *)p->qw, qw2, n * sizeof *qw2);
            if (why2) memcpy(p->qw_why, why2, n);
            p->names = NULL;
        }
    }
    if (t2) tbx_free(al, t2, n * sizeof *t2);
    if (qw2) tbx_free(al, qw2, n * sizeof *qw2);
    if (why2) tbx_free(al, why2, n);
    if (num) tbx_free(al, num, (n + 1) * sizeof *num);
    if (grp) tbx_free(al, grp, (n + 1) * sizeof *grp);
    if (st != TBX_OK) {
        if (start) tbx_free(al, start, (n + 2) * sizeof *start);
        return st;
    }
    out->start = start;
    out->n = nsh;
    out->cap_ = n + 2;
    return TBX_OK;
}

void tbx_shards_free(tbx_plan *p, tbx_shards *s) {
    if (!s || !s->start) return;
    tbx_free(&p->al, s->start, s->cap_ * sizeof *s->start);
    memset(s, 0, sizeof *s);
}
