/*
 * npy_common.c - what the NumPy readers and writers share: the table of numpy dtypes tbx has
 * (docs/formats/npy.md, "dtypes"). numpy writes a dtype as byte order + kind + size ('<f4',
 * '|b1', '>c16'); the byte order is the reader's business, the table maps kind and size.
 */
#include "npy_int.h"

static const npy_dtype npy_dtypes[] = {
    {TBX_DT_BOOL, 'b', 1, 1},
    {TBX_DT_I8, 'i', 1, 1},   {TBX_DT_I16, 'i', 2, 2}, {TBX_DT_I32, 'i', 4, 4},
    {TBX_DT_I64, 'i', 8, 8},  {TBX_DT_U8, 'u', 1, 1},  {TBX_DT_U16, 'u', 2, 2},
    {TBX_DT_U32, 'u', 4, 4},  {TBX_DT_U64, 'u', 8, 8}, {TBX_DT_F16, 'f', 2, 2},
    {TBX_DT_F32, 'f', 4, 4},  {TBX_DT_F64, 'f', 8, 8},
    {TBX_DT_C64, 'c', 8, 4},  /* complex64: (re, im) f32, each swapped on its own */
    {TBX_DT_C128, 'c', 16, 8},
};

const npy_dtype *npy_dtype_of_kind(char kind, unsigned size) {
    for (size_t i = 0; i < sizeof npy_dtypes / sizeof npy_dtypes[0]; i++)
        if (npy_dtypes[i].kind == kind && npy_dtypes[i].size == size) return &npy_dtypes[i];
    return NULL;
}

const npy_dtype *npy_dtype_of(tbx_dtype dt) {
    for (size_t i = 0; i < sizeof npy_dtypes / sizeof npy_dtypes[0]; i++)
        if (npy_dtypes[i].dtype == dt) return &npy_dtypes[i];
    return NULL;
}

bool npy_w_dtype_ok(tbx_dtype dt) { return npy_dtype_of(dt) != NULL; }
