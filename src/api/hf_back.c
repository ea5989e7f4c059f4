/*
 * hf_back.c - tbx_hf_from_gguf, the façade of GGUF -> Hugging Face directory: the output
 * directory checked before any work, src/models' plan and JSON files (gguf_hf.c), the
 * directory opened as a temporary one (src/io/outdir.c), the JSON files written, the plan cut
 * into shards of at most max_shard_size bytes as huggingface_hub cuts a state dict
 * (tbx_shards_pack, shards.c, shared with tbx_convert's --max-shard-size; each shard one
 * safetensors writer and one run
 * of the engine over its window of the plan), the index written when there is more than one,
 * and the directory renamed into place only when everything succeeded (else removed).
 */
#include "api.h"
#include "convert.h"
#include "models.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>

/* The CLI defines functions named json_string and json_null of its own (src/cli/json.c) that
 * would take the place of jansson's in a call from here: strings go through json_stringn,
 * null through json_pack. */
static json_t *jstr0(const char *s) { return json_stringn(s, strlen(s)); }
static __attribute__((unused)) json_t *jnull(void) { return json_pack("n"); }

#define DEFAULT_SHARD ((uint64_t)50 * 1000 * 1000 * 1000) /* transformers 5: "50GB" */

void tbx_hf_from_gguf_options_init(tbx_hf_from_gguf_options *opt) {
    if (!opt) return;
    memset(opt, 0, sizeof *opt);
    opt->struct_size = sizeof *opt;
}

tbx_status tbx_hf_from_gguf_check(const char *out_dir, tbx_error *err) {
    return tbx_outdir_check(out_dir, err);
}

static tbx_status write_shard(tbx_file *in, tbx_outdir *od, const char *fname, tbx_plan *p,
                              size_t first, size_t end, const tbx_hf_from_gguf_options *o,
                              tbx_error *err) {
    char path[4096];
    tbx_status st = tbx_outdir_path(od, fname, path, sizeof path, err);
    if (st != TBX_OK) return st;
    tbx_write_options wo;
    tbx_write_options_init(&wo);
    wo.format = TBX_FORMAT_SAFETENSORS;
    wo.flags = o->write_flags & TBX_WRITE_NO_SYNC;
    tbx_writer *w = NULL;
    if ((st = tbx_writer_open_(&w, path, &wo, 0, err)) != TBX_OK) return st;
    /* transformers reads safetensors whose metadata says format "pt" */
    tbx_value *fv = tbx_value_new_string("pt", 2);
    st = fv ? tbx_writer_add_meta(w, "format", 6, fv, err) : tbx_err_nomem(err, "metadata");
    tbx_value_free(fv);
    tbx_plan_tensor *all = p->t;
    const size_t nall = p->n;
    p->t = all + first;
    p->n = end - first;
    if (st == TBX_OK) {
        tbx_engine_opts eo;
        memset(&eo, 0, sizeof eo);
        eo.progress = o->progress;
        eo.ud = o->progress_ud;
        eo.on_tensor = o->on_tensor;
        st = tbx_engine_run(in, p, w, &eo, err);
    }
    p->t = all;
    p->n = nall;
    if (st == TBX_OK) st = tbx_file_check_sources(in, err);
    if (st != TBX_OK) tbx_writer_abort(w);
    else st = tbx_writer_finish(w, err);
    return st;
}

tbx_status tbx_hf_from_gguf(tbx_file *in, const char *out_dir, const tbx_hf_from_gguf_options *opt,
                            tbx_error *err) {
    tbx_error local;
    if (!err) err = &local;
    if (!in || !out_dir)
        return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "convert", "NULL argument");
    tbx_hf_from_gguf_options o;
    tbx_hf_from_gguf_options_init(&o);
    if (opt) memcpy(&o, opt, tbx_struct_bytes(opt->struct_size, sizeof o));
    if (o.flags & ~TBX_HF_WEIGHTS_ONLY)
        return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "flags", "unknown flags 0x%x",
                       (unsigned)(o.flags & ~TBX_HF_WEIGHTS_ONLY));
    if (o.write_flags & ~(uint32_t)TBX_WRITE_NO_SYNC)
        return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "write_flags", "only "
                       "TBX_WRITE_NO_SYNC applies to a model directory");
    if (o.dtype != TBX_DT_INVALID && o.dtype != TBX_DT_F32 && o.dtype != TBX_DT_F16 &&
        o.dtype != TBX_DT_BF16)
        return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "dtype", "a Hugging Face "
                       "directory is written as f32, f16 or bf16");
    const uint64_t maxsh = o.max_shard_size ? o.max_shard_size : DEFAULT_SHARD;
    tbx_status st = tbx_outdir_check(out_dir, err);
    if (st != TBX_OK) return st;
    tbx_hf_back *h = NULL;
    st = tbx_hf_back_prepare(in, o.dtype, (o.flags & TBX_HF_WEIGHTS_ONLY) != 0, &h, err);
    if (st != TBX_OK) {
        tbx_hf_back_free(h);
        return st;
    }
    tbx_plan *p = tbx_hf_back_plan(h);
    /* the shards as huggingface_hub packs a state dict (shards.c; the plan put in their order) */
    tbx_shards sh;
    st = tbx_shards_pack(p, in, maxsh, TBX_SHARD_HUB, &sh, err);
    if (st != TBX_OK) {
        tbx_hf_back_free(h);
        return st;
    }
    const size_t nsh = sh.n;
    const size_t *start = sh.start;
    const uint64_t total = sh.total_bytes;
    tbx_outdir od;
    st = tbx_outdir_open(&od, &in->al, out_dir,
                         (o.write_flags & TBX_WRITE_NO_SYNC) ? TBX_OUT_NO_SYNC : 0, err);
    const char *fname, *data;
    size_t n;
    for (size_t i = 0; st == TBX_OK && (fname = tbx_hf_back_file(h, i, &data, &n)); i++) {
        const char *slash = strchr(fname, '/');
        if (slash) {
            char sub[64];
            snprintf(sub, sizeof sub, "%.*s", (int)(slash - fname), fname);
            st = tbx_outdir_mkdir(&od, sub, err);
        }
        if (st == TBX_OK) st = tbx_outdir_write(&od, fname, data, n, err);
    }
    json_t *wm = nsh > 1 ? json_object() : NULL;
    for (size_t s = 0; st == TBX_OK && s < nsh; s++) {
        char sf[64];
        if (nsh > 1) snprintf(sf, sizeof sf, "model-%05zu-of-%05zu.safetensors", s + 1, nsh);
        else snprintf(sf, sizeof sf, "model.safetensors");
        const size_t a = start[s], b = start[s + 1];
        st = write_shard(in, &od, sf, p, a, b, &o, err);
        for (size_t k = a; st == TBX_OK && wm && k < b; k++) {
            size_t nl;
            const char *nm = tbx_plan_name(p, in, k, &nl);
            char *key = tbx_memdup0(&in->al, nm, nl);
            if (!key || json_object_set_new(wm, key, jstr0(sf)) != 0)
                st = tbx_err_nomem(err, "index");
            tbx_free(&in->al, key, key ? nl + 1 : 0);
        }
    }
    if (st == TBX_OK && wm) {
        json_t *idx = json_pack("{s:{s:I},s:O}", "metadata", "total_size", (json_int_t)total,
                                "weight_map", wm);
        char *s = idx ? json_dumps(idx, JSON_INDENT(2) | JSON_SORT_KEYS) : NULL;
        json_decref(idx);
        if (!s) st = tbx_err_nomem(err, "index");
        else {
            size_t sl = strlen(s);
            s[sl] = '\n';
            st = tbx_outdir_write(&od, "model.safetensors.index.json", s, sl + 1, err);
            free(s);
        }
    }
    json_decref(wm);
    if (st == TBX_OK) st = tbx_outdir_commit(&od, err);
    tbx_outdir_abort(&od);
    tbx_shards_free(p, &sh);
    tbx_hf_back_free(h);
    return st;
}
