/*
 * hf_mcf.c - a Hugging Face model's config.json to MCF's ModelInfo, as mantle's `pack` fills
 * it (docs/formats/mcf.md "From a Hugging Face directory"): what the model is (its
 * architecture, sizes, rope base) said in MCF's own terms, the metadata keys the MCF reader
 * produces and the MCF writer takes ("mcf.arch", ...). The MCF writer knows only its container:
 * it stores config.json as a section and never reads it.
 *
 * The conversion façade (src/api/conversions.c) calls tbx_hf_mcf_write for an MCF output whose input
 * has a config.json section, after the input's and the caller's metadata are in the writer. When
 * that metadata already holds a ModelInfo field (mcf.arch ... mcf.rope_scale, mcf.model_name,
 * mcf.base_model: an MCF file converted, or --meta), nothing is added, as ModelInfo then comes
 * from it. Otherwise config.json (jansson, integers as reals as Go decodes them, NUL allowed; not
 * a JSON object: nothing added) gives
 *   mcf.arch             model_type containing (ASCII case-insensitively) "llama" 1,
 *                        "mistral" 2, "qwen" 3, "gemma" 4, "smollm3" 6, else 0;
 *   mcf.vocab_size, mcf.hidden_size, mcf.layer_count, mcf.head_count, mcf.head_count_kv,
 *   mcf.context_length   vocab_size, hidden_size, num_hidden_layers, num_attention_heads,
 *                        num_key_value_heads, max_position_embeddings: pack's readU32 (a JSON
 *                        number in [0, 2^32-1], truncated; else 0);
 *   mcf.rope_freq_base   rope_theta when a finite number within f32's range (f32);
 * and the extras hf.model_type (model_type, a string), hf.rope_scaling "present" (a non-empty
 * object rope_scaling) and hf.config_json_present (u32 1), each unless the metadata has that
 * key. Nothing here writes bytes: the writer lays the values out as ModelInfo.
 */
#include "models.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>

/* The metadata keys of MCF's ModelInfo fields (the reader produces them; the writer takes them
 * as fields rather than extras). */
static const char *const hm_fields[] = {
    "mcf.arch", "mcf.vocab_size", "mcf.hidden_size", "mcf.layer_count", "mcf.head_count",
    "mcf.head_count_kv", "mcf.context_length", "mcf.train_context", "mcf.rope_type",
    "mcf.rope_freq_base", "mcf.rope_scale", "mcf.model_name", "mcf.base_model", NULL,
};

bool tbx_hf_mcf_applies(const tbx_file *in, tbx_format to) {
    return in && to == TBX_FORMAT_MCF && tbx_file_find_section(in, "config.json") >= 0;
}

static bool hm_has_meta(const tbx_writer *w, const char *key) {
    size_t kl = strlen(key);
    for (size_t i = 0; i < w->nmeta; i++)
        if (w->meta[i].key_len == kl && memcmp(w->meta[i].key, key, kl) == 0) return true;
    return false;
}

/* pack's readU32: a JSON number in [0, 2^32-1] truncated, else 0. */
static uint32_t hm_u32(json_t *o, const char *k) {
    json_t *v = json_object_get(o, k);
    if (!v || !json_is_number(v)) return 0;
    double d = json_number_value(v);
    if (!(d >= 0) || d > 4294967295.0) return 0;
    return (uint32_t)d;
}

static bool hm_contains_ci(const char *s, const char *sub) {
    size_t n = strlen(sub);
    for (; *s; s++) {
        size_t i = 0;
        while (i < n && s[i] && (char)((s[i] >= 'A' && s[i] <= 'Z') ? s[i] + 32 : s[i]) == sub[i])
            i++;
        if (i == n) return true;
    }
    return false;
}

/* Adds key = v (taken: freed here). */
static tbx_status hm_add(tbx_writer *w, const char *key, tbx_value *v, tbx_error *err) {
    if (!v) return tbx_err_nomem(err, "metadata");
    tbx_status st = tbx_writer_add_meta(w, key, strlen(key), v, err);
    tbx_value_free(v);
    return st;
}

tbx_status tbx_hf_mcf_write(tbx_file *in, tbx_writer *w, tbx_error *err) {
    for (size_t k = 0; hm_fields[k]; k++)
        if (hm_has_meta(w, hm_fields[k])) return TBX_OK;
    const int64_t sec = tbx_file_find_section(in, "config.json");
    if (sec < 0) return TBX_OK;
    void *buf = NULL;
    size_t n = 0;
    tbx_status st = tbx_section_load_(in, (uint64_t)sec, &buf, &n, err);
    if (st != TBX_OK) return st;
    json_t *cfg = json_loadb(buf, n, JSON_DECODE_INT_AS_REAL | JSON_ALLOW_NUL, NULL);
    tbx_free(&in->al, buf, n ? n : 1);
    if (!cfg || !json_is_object(cfg)) {
        json_decref(cfg);
        return TBX_OK;
    }
    json_t *mt = json_object_get(cfg, "model_type");
    uint32_t arch = 0;
    if (json_is_string(mt)) {
        const char *m = json_string_value(mt);
        arch = hm_contains_ci(m, "llama") ? 1 : hm_contains_ci(m, "mistral") ? 2
             : hm_contains_ci(m, "qwen") ? 3 : hm_contains_ci(m, "gemma") ? 4
             : hm_contains_ci(m, "smollm3") ? 6 : 0;
    }
    static const struct { const char *key, *cfg; } u32s[] = {
        {"mcf.vocab_size", "vocab_size"}, {"mcf.hidden_size", "hidden_size"},
        {"mcf.layer_count", "num_hidden_layers"}, {"mcf.head_count", "num_attention_heads"},
        {"mcf.head_count_kv", "num_key_value_heads"},
        {"mcf.context_length", "max_position_embeddings"},
    };
    st = hm_add(w, "mcf.arch", tbx_value_new_uint(TBX_V_U32, arch), err);
    for (size_t k = 0; k < sizeof u32s / sizeof u32s[0] && st == TBX_OK; k++)
        st = hm_add(w, u32s[k].key, tbx_value_new_uint(TBX_V_U32, hm_u32(cfg, u32s[k].cfg)), err);
    json_t *th = json_object_get(cfg, "rope_theta");
    if (st == TBX_OK && th && json_is_number(th)) {
        double d = json_number_value(th);
        if (isfinite(d) && fabs(d) <= 3.4028234663852886e38)
            st = hm_add(w, "mcf.rope_freq_base", tbx_value_new_float(TBX_V_F32, d), err);
    }
    /* the extras, unless the metadata has the same key */
    json_t *rs = json_object_get(cfg, "rope_scaling");
    if (st == TBX_OK && json_is_string(mt) && !hm_has_meta(w, "hf.model_type"))
        st = hm_add(w, "hf.model_type",
                    tbx_value_new_string(json_string_value(mt), json_string_length(mt)), err);
    if (st == TBX_OK && json_is_object(rs) && json_object_size(rs) > 0 &&
        !hm_has_meta(w, "hf.rope_scaling"))
        st = hm_add(w, "hf.rope_scaling", tbx_value_new_string("present", 7), err);
    if (st == TBX_OK && !hm_has_meta(w, "hf.config_json_present"))
        st = hm_add(w, "hf.config_json_present", tbx_value_new_uint(TBX_V_U32, 1), err);
    json_decref(cfg);
    return st;
}
