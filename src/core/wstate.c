/*
 * wstate.c - the writer's state as a driver reads it while it lays a file out or receives
 * tensor bytes: the declared tensors' quantization descriptions, a tensor found by name, and the
 * dtype entry a declared tensor has (the core table's or the writer's own driver's). The
 * writer's checks and states are src/access/write.c.
 */
#include "model.h"

const tbx_quant_info *tbx_writer_tensor_quant_(const tbx_writer *w, uint64_t index) {
    size_t lo = 0, hi = w->nquants; /* entries by increasing index */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (w->quants[mid].index < index) lo = mid + 1;
        else hi = mid;
    }
    return lo < w->nquants && w->quants[lo].index == index ? w->quants[lo].q : NULL;
}

bool tbx_writer_find_tensor_(const tbx_writer *w, const char *name, size_t len, uint64_t *index) {
    uint64_t i;
    if (!tbx_names_find(w->lent_names ? w->lent_names : &w->tensor_names, name, len, &i) ||
        i >= w->ntensors)
        return false;
    *index = i;
    return true;
}

/* The value of option `key`, NULL when the caller did not give it. */
static const tbx_value *opt_value(const tbx_writer *w, const char *key) {
    const tbx_value *m = w ? w->options : NULL;
    size_t kl = strlen(key);
    for (uint64_t i = 0, n = tbx_value_len(m); i < n; i++) {
        size_t len = 0;
        const char *k = tbx_value_key_at(m, i, &len);
        if (k && len == kl && memcmp(k, key, kl) == 0) return tbx_value_at(m, i);
    }
    return NULL;
}

bool tbx_writer_opt_bool(const tbx_writer *w, const char *key, bool dflt) {
    uint64_t u;
    const tbx_value *v = opt_value(w, key);
    return v && tbx_value_get_u64(v, &u) == TBX_OK ? u != 0 : dflt;
}

uint64_t tbx_writer_opt_u64(const tbx_writer *w, const char *key, uint64_t dflt) {
    uint64_t u;
    const tbx_value *v = opt_value(w, key);
    return v && tbx_value_get_u64(v, &u) == TBX_OK ? u : dflt;
}

double tbx_writer_opt_f64(const tbx_writer *w, const char *key, double dflt) {
    double d;
    const tbx_value *v = opt_value(w, key);
    return v && tbx_value_get_f64(v, &d) == TBX_OK ? d : dflt;
}

const char *tbx_writer_opt_str(const tbx_writer *w, const char *key, const char *dflt) {
    const char *s = tbx_value_get_str(opt_value(w, key), NULL);
    return s ? s : dflt;
}

const tbx_dtype_info *tbx_writer_dtype(const tbx_writer *w, tbx_dtype dtype) {
    const tbx_dtype_info *e = tbx_dtype_core_get(dtype);
    if (e || !w || !w->drv) return e;
    const tbx_driver *own[2] = {w->drv, NULL};
    return tbx_dtype_get_in(own, dtype);
}
