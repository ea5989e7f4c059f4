/*
 * npy_int.h - private interface of the NumPy driver (src/formats/npy/): the .npy reader (npy.c,
 * which also holds the read hooks both rows share), the .npz reader (npz.c, the zip archive
 * through libzip), what both readers share (npy_header.c: the header parser, the reader
 * state), the writers (npy_write.c, npz_write.c), what readers and writers share
 * (npy_common.c: the dtype table) and the rows (npy_driver.c). Calls run one way: npy.c ->
 * npz.c -> npy_header.c -> npy_common.c; npz_write.c -> npy_write.c -> npy_common.c.
 *
 * A .npy file is one array:
 *
 *   0        6     7     8          8+L (L: u16 in v1.0, u32 in v2.0/3.0)
 *   +--------+-----+-----+----------+-------------------------------------+--------------+
 *   | \x93NUMPY | maj | min | L (LE)   | {'descr': '<f4', 'fortran_order': False,      | array bytes  |
 *   |        |     |     |          |  'shape': (2, 3), }  + spaces + '\n'  | (C or F order)|
 *   +--------+-----+-----+----------+-------------------------------------+--------------+
 *
 * the header a Python dict literal (latin-1 in v1/v2, UTF-8 in v3), padded so that the data
 * starts on a multiple of 64. A .npz file is a zip archive whose members are .npy files, one per
 * array, named "<key>.npy", stored or deflated (numpy.savez / savez_compressed).
 */
#ifndef TBX_NPY_INT_H
#define TBX_NPY_INT_H

#include "io.h"

#include <pthread.h>
#include <stdatomic.h>

/* The rows' values (npy_driver.c): tensorbox.h names no value for these formats and this
 * encoding; each is the row's own (src/core/model.h), unique among the rows (test_contract). */
#define NPY_FORMAT ((tbx_format)8)
#define NPZ_FORMAT ((tbx_format)9)
#define NPZ_ENC_DEFLATE ((tbx_encoding)2) /* a deflated .npz member (raw deflate, RFC 1951) */

#define NPY_MAGIC "\x93NUMPY"
#define NPY_MAGIC_LEN 6u
#define NPY_PREAMBLE 10u     /* magic, version, v1.0's u16 header length */
#define NPY_ALIGN 64u        /* numpy pads the header so that the data starts on a multiple */
#define NPY_MAX_DIM 64u      /* numpy's own NPY_MAXDIMS */
#define NPY_GROWTH_DIGITS 21 /* numpy's GROWTH_AXIS_MAX_DIGITS: spare room after the dict */

/* ---- npy_common.c: numpy dtypes <-> tbx dtypes (both halves) ------------------------------ */
typedef struct npy_dtype {
    tbx_dtype dtype;
    char kind;       /* numpy's kind: 'b' bool, 'i', 'u', 'f', 'c' */
    uint8_t size;    /* bytes per element */
    uint8_t unit;    /* bytes per byte-swapped unit (complex: its halves); 1: never swapped */
} npy_dtype;
/* The entry of a numpy kind and size ('f', 4), NULL when tbx has no such dtype. */
const npy_dtype *npy_dtype_of_kind(char kind, unsigned size);
/* The entry of a tbx dtype, NULL when numpy has none (bf16, f8, packed, block types...). */
const npy_dtype *npy_dtype_of(tbx_dtype dt);
bool npy_w_dtype_ok(tbx_dtype dt);

/* ---- npy_header.c: the header parser and the reader state (both readers) -------------------- */
typedef struct npy_hdr {
    uint8_t major, minor;
    uint64_t data_off;            /* bytes from the magic to the array data */
    const npy_dtype *dt;
    bool big_endian;              /* '>' with a multi-byte dtype: swapped on every read */
    bool fortran;                 /* fortran_order True */
    uint32_t ndim;
    uint64_t shape[NPY_MAX_DIM];
    uint64_t nelems, nbytes;
} npy_hdr;

/* Parses the preamble and header of an .npy stream through cursor c, positioned at its magic
 * (offset `base` in the cursor's source). `where` prefixes every message ("" or "member
 * \"w.npy\": "). Errors name the field ("magic", "version", "header_len", "header",
 * "header.descr", "header.shape", "header.fortran_order") and the byte offset in the cursor's
 * source. Checks nbytes against limits->max_tensor_bytes. */
tbx_status npy_parse_header(tbx_cursor *c, uint64_t base, const tbx_limits *lim,
                            const char *where, npy_hdr *h, tbx_error *err);
/* Is the array stored column-major in a way that differs from row-major (fortran_order with
 * two or more dimensions above 1)? It is then transposed on every read. */
bool npy_hdr_transposed(const npy_hdr *h);

/* What the read hooks know of each tensor (npy_state.rec[i] for tensor i). */
typedef struct npy_rec {
    uint64_t data_off;   /* stored: file offset of the array data; deflated: its offset in the
                            member's decoded bytes */
    uint64_t member_off; /* npz: file offset of the member's bytes (stored: the .npy magic,
                            deflated: the compressed stream) */
    uint64_t member_len; /* npz: the member's decoded size (.npy header + data) */
    int64_t zidx;        /* npz: the member's index in the archive; -1 for a .npy file */
    uint32_t crc;        /* npz: the member's CRC-32 (central directory) */
    uint8_t elem;        /* bytes per element */
    uint8_t unit;        /* byte-swap unit; 0: no swap */
    uint8_t deflated;
    uint8_t fortran;     /* stored column-major with >= 2 dimensions above 1: transposed on read */
    _Atomic uint8_t verified; /* npz: the CRC-32 was checked (TBX_OPEN_VERIFY_DIGESTS) */
} npy_rec;

struct npz_zip; /* npz.c: the archive opened through libzip, its lock and decoding cursors */

typedef struct npy_state {
    npy_rec *rec;
    size_t nrec;
    uint64_t charged;    /* budget charged for this state (given back at close) */
    bool verify;         /* TBX_OPEN_VERIFY_DIGESTS */
    struct npz_zip *zip; /* NULL for .npy files and archives without deflated members */
} npy_state;

/* Allocates f->drv_state with room for n records (charged to the budget at `offset`). */
tbx_status npy_state_new(tbx_file *f, size_t n, uint64_t offset, tbx_error *err);

/* ---- npy.c: the .npy reader and the read hooks both rows share ----------------------------- */
bool npy_probe(const uint8_t *head, size_t len, uint64_t file_size);
tbx_status npy_open(tbx_file *f, tbx_error *err);
void npy_close(tbx_file *f);
tbx_status npy_read_component(tbx_file *f, const tbx_tensor *t, uint32_t c, void *buf,
                              tbx_error *err);
tbx_status npy_read_component_range(tbx_file *f, const tbx_tensor *t, uint32_t c, uint64_t pos,
                                    void *buf, size_t len, tbx_error *err);
bool npy_raw_pending(const tbx_file *f, const tbx_tensor *t, uint32_t c);
tbx_status npy_check_component(tbx_file *f, const tbx_tensor *t, uint32_t c, tbx_error *err);

/* ---- npz.c -------------------------------------------------------------------------------- */
bool npz_probe(const uint8_t *head, size_t len, uint64_t file_size);
tbx_status npz_open(tbx_file *f, tbx_error *err);
void npz_zip_free(tbx_file *f, struct npz_zip *z);
/* Decoded bytes [pos, pos + len) of a deflated member (its .npy header included), through the
 * handle's decoding cursors (a read continuing the previous one of that member decodes only
 * the new bytes). Thread-safe (the archive's lock). */
tbx_status npz_read_decoded(tbx_file *f, const npy_rec *r, const char *name, uint64_t pos,
                            void *buf, size_t len, tbx_error *err);
/* Decodes a deflated member whole, discarding it: libzip checks its CRC-32 and size. */
tbx_status npz_check_deflated(tbx_file *f, const npy_rec *r, const char *name, tbx_error *err);
/* The CRC-32 of a stored member's bytes against its directory entry (TBX_E_CHECKSUM). */
tbx_status npz_check_stored(tbx_file *f, const npy_rec *r, const char *name, tbx_error *err);

/* ---- writers (npy_write.c, npz_write.c) --------------------------------------------------- */
/* The .npy header numpy writes for (dtype, shape) in C order, version `major` (1, 2 or 3):
 * preamble + dict + padding + '\n', written into buf (cap bytes). Returns its length, 0 when it
 * does not fit in cap or in the version's length field. */
size_t npy_header_build(tbx_dtype dt, const uint64_t *shape, uint32_t ndim, unsigned major,
                        uint8_t *buf, size_t cap);
/* Room npy_header_build needs at most for ndim dimensions. */
size_t npy_header_cap(uint32_t ndim);

tbx_status npy_w_check_meta(tbx_writer *w, const char *key, size_t key_len, const tbx_value *v,
                            tbx_error *err);
tbx_status npy_w_check_tensor(tbx_writer *w, tbx_wtensor *t, tbx_error *err);
tbx_status npy_w_layout(tbx_writer *w, tbx_error *err);

tbx_status npz_w_check_options(tbx_writer *w, tbx_error *err);
tbx_status npz_w_check_tensor(tbx_writer *w, tbx_wtensor *t, tbx_error *err);
tbx_status npz_w_layout(tbx_writer *w, tbx_error *err);
tbx_status npz_w_data(tbx_writer *w, tbx_wtensor *t, const void *data, size_t len,
                      tbx_error *err);
tbx_status npz_w_finish(tbx_writer *w, tbx_error *err);
void npz_w_free(tbx_writer *w);

#endif /* TBX_NPY_INT_H */
