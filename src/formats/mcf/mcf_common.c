/*
 * mcf_common.c - what the MCF reader (mcf.c) and writer (mcf_write.c) share: the dtype codes
 * and the driver's own dtype entries, payload sizes, section names and the ModelInfo field
 * table. It calls neither.
 */
#include "mcf_int.h"

static const struct { uint32_t code; tbx_dtype dt; } g_codes[] = {
    {MCF_DT_F32, TBX_DT_F32}, {MCF_DT_F16, TBX_DT_F16}, {MCF_DT_BF16, TBX_DT_BF16},
    {MCF_DT_F64, TBX_DT_F64}, {MCF_DT_I8, TBX_DT_I8}, {MCF_DT_U8, TBX_DT_U8},
    {MCF_DT_I16, TBX_DT_I16}, {MCF_DT_U16, TBX_DT_U16}, {MCF_DT_I32, TBX_DT_I32},
    {MCF_DT_U32, TBX_DT_U32}, {MCF_DT_I64, TBX_DT_I64}, {MCF_DT_U64, TBX_DT_U64},
    {MCF_DT_INT8, TBX_DT_MCF_INT8}, {MCF_DT_INT4, TBX_DT_MCF_INT4},
    {MCF_DT_Q8, TBX_DT_MCF_Q8}, {MCF_DT_Q4, TBX_DT_MCF_Q4},
    {MCF_DT_K6, TBX_DT_MCF_K6}, {MCF_DT_K4, TBX_DT_MCF_K4},
    {MCF_DT_K3, TBX_DT_MCF_K3}, {MCF_DT_K2, TBX_DT_MCF_K2},
};
#define NCODES (sizeof g_codes / sizeof g_codes[0])

tbx_dtype mcf_dtype_from_code(uint32_t code) {
    for (size_t i = 0; i < NCODES; i++)
        if (g_codes[i].code == code) return g_codes[i].dt;
    return TBX_DT_INVALID;
}

uint32_t mcf_code_from_dtype(tbx_dtype dt) {
    for (size_t i = 0; i < NCODES; i++)
        if (g_codes[i].dt == dt) return g_codes[i].code;
    return 0;
}

bool mcf_w_dtype_ok(tbx_dtype dt) { return mcf_code_from_dtype(dt) != 0; }

void mcf_quant_geometry(tbx_dtype dt, uint16_t *block, uint16_t *super) {
    *block = mcf_is_qk(dt) ? 32 : 0;
    *super = dt >= TBX_DT_MCF_K6 && dt <= TBX_DT_MCF_K2 ? 256 : 0;
}

const tbx_dtype_info mcf_dtypes[8] = {
    {TBX_DT_MCF_INT8, "mcf_int8", 8, 1, 0, TBX_DTF_SHAPED},
    {TBX_DT_MCF_INT4, "mcf_int4", 4, 1, 0, TBX_DTF_SHAPED},
    {TBX_DT_MCF_Q8, "mcf_q8", 8, 1, 0, TBX_DTF_SHAPED},
    {TBX_DT_MCF_Q4, "mcf_q4", 4, 1, 0, TBX_DTF_SHAPED},
    {TBX_DT_MCF_K6, "mcf_k6", 6, 1, 0, TBX_DTF_SHAPED},
    {TBX_DT_MCF_K4, "mcf_k4", 4, 1, 0, TBX_DTF_SHAPED},
    {TBX_DT_MCF_K3, "mcf_k3", 3, 1, 0, TBX_DTF_SHAPED},
    {TBX_DT_MCF_K2, "mcf_k2", 2, 1, 0, TBX_DTF_SHAPED},
};

tbx_status mcf_payload_size(tbx_dtype dt, const uint64_t *shape, uint32_t ndim, int domain,
                            uint64_t *out, const char **why) {
    static const char *no = "";
    if (why) *why = no;
    uint64_t n = 1;
    for (uint32_t d = 0; d < ndim; d++)
        if (!tbx_mul_u64(n, shape[d], &n)) return TBX_E_OVERFLOW;
    if (!mcf_is_quant(dt)) {
        const tbx_dtype_info *e = tbx_dtype_core_get(dt);
        if (!e || !tbx_mul_u64(n, e->block_bytes, out)) return e ? TBX_E_OVERFLOW : TBX_E_FORMAT;
        return TBX_OK;
    }
    if (dt == TBX_DT_MCF_INT8 || dt == TBX_DT_MCF_INT4) {
        uint64_t codes = dt == TBX_DT_MCF_INT8 ? n : n / 2 + (n & 1);
        return tbx_add_u64(codes, mcf_int_codes_off(domain), out) ? TBX_OK : TBX_E_OVERFLOW;
    }
    if (ndim != 2) {
        if (why) *why = "the q/k families are rank 2 only";
        return TBX_E_FORMAT;
    }
    if (shape[0] == 0 || shape[1] == 0) {
        if (why) *why = "the q/k families have no zero dimension";
        return TBX_E_FORMAT;
    }
    tbx_mcfq_layout L;
    tbx_status st = tbx_mcfq_layout_get(mcf_kind(dt), shape[0], shape[1], &L);
    if (st == TBX_OK) *out = L.total;
    return st;
}

tbx_status mcf_dtype_nbytes(tbx_dtype dtype, const uint64_t *shape, uint32_t ndim,
                            uint64_t *out) {
    if (!mcf_is_quant(dtype)) return TBX_E_INVALID_ARG;
    return mcf_payload_size(dtype, shape, ndim, MCF_DOMAIN_WEIGHTS, out, NULL);
}

static const struct { uint32_t type; const char *name; } g_sections[] = {
    {MCF_SEC_MODELINFO, "ModelInfo"}, {MCF_SEC_QUANTINFO, "QuantInfo"},
    {MCF_SEC_TENSORINDEX, "TensorIndex"}, {MCF_SEC_TENSORDATA, "TensorData"},
    {MCF_SEC_HF_CONFIG, "config.json"}, {MCF_SEC_HF_GENCONFIG, "generation_config.json"},
    {MCF_SEC_HF_TOKENIZER, "tokenizer.json"}, {MCF_SEC_HF_TOKCONFIG, "tokenizer_config.json"},
    {MCF_SEC_HF_VOCAB, "vocab.json"}, {MCF_SEC_HF_MERGES, "merges.txt"},
};

const char *mcf_section_name(uint32_t type) {
    for (size_t i = 0; i < sizeof g_sections / sizeof g_sections[0]; i++)
        if (g_sections[i].type == type) return g_sections[i].name;
    return "unknown";
}

uint32_t mcf_hf_type(const char *name, size_t len) {
    for (size_t i = 4; i < sizeof g_sections / sizeof g_sections[0]; i++)
        if (strlen(g_sections[i].name) == len && memcmp(g_sections[i].name, name, len) == 0)
            return g_sections[i].type;
    return 0;
}

const mcf_mi_field mcf_mi_fields[] = {
    {"mcf.arch", 8, TBX_V_U32},           {"mcf.vocab_size", 16, TBX_V_U32},
    {"mcf.hidden_size", 20, TBX_V_U32},   {"mcf.layer_count", 24, TBX_V_U32},
    {"mcf.head_count", 28, TBX_V_U32},    {"mcf.head_count_kv", 32, TBX_V_U32},
    {"mcf.context_length", 36, TBX_V_U32},{"mcf.train_context", 40, TBX_V_U32},
    {"mcf.rope_type", 44, TBX_V_U32},     {"mcf.rope_freq_base", 48, TBX_V_F32},
    {"mcf.rope_scale", 52, TBX_V_F32},
};
const size_t mcf_mi_nfields = sizeof mcf_mi_fields / sizeof mcf_mi_fields[0];

const char *mcf_arch_name(uint32_t arch) {
    static const char *const names[] = {"unknown", "llama", "mistral", "qwen", "gemma",
                                        "granite", "smollm3"};
    return arch < sizeof names / sizeof names[0] ? names[arch] : "?";
}
