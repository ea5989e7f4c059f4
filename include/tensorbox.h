/*
 * tensorbox.h - the public C API of libtensorbox.
 *
 * tensorbox reads, writes, validates, inspects and converts the container files that
 * machine-learning weights travel in. Which formats this build has, and what each can do, is
 * asked at run time, never listed here: tbx_format_count / tbx_format_at / tbx_format_caps_get
 * (their values are the tbx_format enum below).
 *
 * Model of a file
 * ---------------
 * An opened file (tbx_file) is a read-only view made of
 *   - metadata: an ordered list of (key, typed value) pairs;
 *   - tensors:  name, dtype, shape (row-major: slowest dimension first), storage layout and one or
 *               more components (stored byte ranges: e.g. "data", or "values"/"indices"/"indptr");
 *   - sections: named auxiliary blobs (a tokenizer file, a vocabulary, ...).
 * Everything a handle returns (names, values, shapes) is owned by the handle and stays valid
 * until tbx_close(). Every function that can fail returns a tbx_status and, when `err` is not NULL,
 * fills it with the code, the byte offset in the file (or TBX_NO_OFFSET), the field involved and
 * a message naming the field, the value and the offset.
 *
 * Safety
 * ------
 * Every declared count, length, shape and offset in a file is checked against the file size and
 * the configured limits (tbx_limits) before anything is allocated. Hostile input yields an error,
 * never a crash, a hang or an allocation larger than the file justifies.
 *
 * Writing
 * -------
 * A tbx_writer collects metadata, sections and tensor declarations, then receives tensor bytes in
 * chunks (never the whole model at once), and on tbx_writer_finish() renames a temporary file in
 * the destination directory over the output path. Output is deterministic: the same calls give
 * the same bytes. A writer never replaces an existing file unless TBX_WRITE_OVERWRITE is set, and
 * never replaces a file that is open for reading through this library in the same process.
 *
 * Destinations, for every writer (tbx_writer_*, tbx_convert, the GGUF tools): a symbolic link
 * is followed and the file it points to is replaced, the link is kept (a dangling link counts as
 * an existing output: with TBX_WRITE_OVERWRITE the file it points to is created). Only a regular
 * file is ever replaced: a directory, FIFO, socket or device fails with TBX_E_EXISTS even with
 * TBX_WRITE_OVERWRITE.
 *
 * Concurrency: a writer replacing an existing file, and every GGUF edit, holds an exclusive
 * advisory lock (flock(2) LOCK_EX) on that file from its checks until the new file has been
 * renamed into place (or the in-place bytes written), so they take turns; one that was waiting
 * on a file that got replaced meanwhile starts over on the new file, so an edit is never lost.
 * If a process that ignores the lock replaces the file during a write, the write fails
 * (TBX_E_IO) rather than overwrite that update. A second writer or edit of a file this
 * process holds locked fails at once with TBX_E_STATE (it would wait for itself). Readers take no lock and need none: a rewrite is
 * an atomic rename, so a reader that opened the file sees the old or the new complete file.
 * Only an in-place GGUF edit changes bytes of a file under a reader: the value bytes of one
 * metadata entry, same size, one pwrite (structure and offsets unchanged); a reader needing to
 * exclude that can take flock(LOCK_SH) on the file while it reads.
 *
 * Interruption: the temporary file (".NAME.tbx-tmp.XXXXXX" next to the output) is removed on
 * every error and by tbx_remove_temp_files(), which a signal handler may call. One left by a
 * killed process (SIGKILL, a crash) is removed by the next write to the same output: a live
 * writer holds flock(LOCK_EX) on its temporary file, so an unlocked one is provably dead.
 *
 * Threading: handles are not shared-safe; distinct handles may be used from distinct threads.
 * Some calls start worker threads of their own (tbx_read_batch, tbx_validate_path, a compressing
 * tbx_writer, quantizing tbx_convert): the count comes from an option or env TBX_THREADS (default:
 * the online CPUs, at most 8), results never depend on it, and a custom allocator must then be
 * thread-safe. Destructors accept NULL.
 *
 * Versioned structs: every public struct that may grow starts with `uint32_t struct_size`. The
 * caller sets it to sizeof the struct as its header declares it (the tbx_*_init functions and
 * TBX_*_INIT macros do); 0 means the full size of this header's version. The library reads and
 * writes only the first struct_size bytes: a caller built against an older, shorter struct gets
 * the fields it knows filled, and fields it does not know take their defaults (0 unless said
 * otherwise); a larger struct_size (a newer caller) is served up to the fields this library
 * knows, the rest left as the caller set it. struct_size must be the size of some published
 * version of the struct (a value that cuts a field gives that field partially).
 *
 * Stable and experimental API: everything declared here is the stable API (ABI kept within a
 * major version; values of enums and status codes are never reused). The format extras (GGUF
 * lint, type mapping and file tools; zTensor sparse and quantized_group writers; OINF
 * quantization parameters for the writer) are exported too, but declared in per-format headers
 * that are experimental: they may change in any minor version, and each refuses to compile
 * unless the program defines TBX_EXPERIMENTAL before including it:
 *     #define TBX_EXPERIMENTAL
 *     #include <tensorbox/gguf.h>      (also tensorbox/ztensor.h, tensorbox/oinf.h)
 *
 * Mapped files that shrink (TBX_OPEN_MMAP): another process may truncate a file while a handle
 * has it mapped. Touching a page of a mapping that lies wholly past the new end of the file
 * raises SIGBUS, which would kill the process; the library guards every mapping it makes. On
 * its first mapping it installs a SIGBUS handler (SA_SIGINFO | SA_ONSTACK) that, for a fault
 * inside one of its own mappings (on any thread), maps zero pages over the rest of that mapping
 * and returns, and passes every other SIGBUS to the handler that was installed before it.
 * Install your own handler before the first mapped open, or chain to the one you replace: a
 * handler installed later that does not chain turns these faults back into crashes. What a
 * caller of a mapped handle can expect once its file shrank:
 *   - every call that reads the file's bytes (tbx_tensor_read, _read_range, _read_f32,
 *     tbx_component_read*, tbx_read_batch, tbx_section_read, tbx_tensor_map, ...) checks the
 *     bytes it used after reading them, before returning anything made from them, and fails
 *     with TBX_E_TRUNCATED, naming the field and the byte where the file now ends, when any of
 *     them lay past the new end. Bytes below the new end read as before. No signal, no data
 *     or verdict built from missing bytes;
 *   - tbx_open_path with TBX_OPEN_MMAP fails with TBX_E_TRUNCATED when the file shrank during
 *     the open, whatever the parse made of the missing bytes;
 *   - tbx_convert fails with TBX_E_TRUNCATED when its input shrank at any time before the
 *     output is committed (mapped or not), leaving no output and no temporary file;
 *     tbx_validate reports a shrink during its pass as a TBX_E_TRUNCATED problem;
 *   - a zero-copy pointer (tbx_tensor_map) is checked when it is handed out; the bytes read
 *     through it after the file shrank below them are zeros (never a signal), and
 *     tbx_check_input tells afterwards whether they were still the file's;
 *   - at most 4096 mappings are guarded at once in a process: a handle opened beyond that
 *     reads through pread (tbx_tensor_map then says TBX_E_UNSUPPORTED), never unguarded.
 * Handles reading through pread report a file that shrank as TBX_E_TRUNCATED ("file ended") on
 * the first read past its new end. A file rewritten in place (truncated, then written again)
 * changes under any reader, mapped or not: no check can see that; tensorbox's own writers
 * replace files by rename and never do it.
 *
 * Lifetime: tbx_close(), tbx_writer_finish() (whatever its result) and tbx_writer_abort() free
 * their handle, like free(): passing the same pointer again to any function, a second close,
 * finish or abort included, is undefined behaviour the library cannot detect (the memory may
 * already belong to another handle). Set the pointer to NULL after the call; NULL is accepted.
 */
#ifndef TENSORBOX_H
#define TENSORBOX_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32) && defined(TBX_SHARED_BUILD)
#define TBX_API __declspec(dllexport)
#elif defined(__GNUC__)
#define TBX_API __attribute__((visibility("default")))
#else
#define TBX_API
#endif

/* ---------------------------------------------------------------------------------------------
 * Version
 * ------------------------------------------------------------------------------------------- */
#define TBX_VERSION_MAJOR 0
#define TBX_VERSION_MINOR 1
#define TBX_VERSION_PATCH 0
#define TBX_VERSION_STRING "0.1.0"
#define TBX_VERSION_NUMBER (TBX_VERSION_MAJOR * 10000 + TBX_VERSION_MINOR * 100 + TBX_VERSION_PATCH)

/* Runtime version of the linked library, e.g. "0.1.0". Static storage. */
TBX_API const char *tbx_version(void);
/* Runtime TBX_VERSION_NUMBER of the linked library. */
TBX_API int tbx_version_number(void);

/* ---------------------------------------------------------------------------------------------
 * Status codes and errors. The numeric values are stable and never reused.
 * ------------------------------------------------------------------------------------------- */
typedef enum tbx_status {
    TBX_OK = 0,
    TBX_E_INVALID_ARG = 1,      /* a NULL handle, a bad option, a name that does not exist */
    TBX_E_NOMEM = 2,            /* the allocator returned NULL */
    TBX_E_IO = 3,               /* open/read/write/rename failed (errno in the message) */
    TBX_E_TRUNCATED = 4,        /* a field runs past the end of the file */
    TBX_E_BAD_MAGIC = 5,        /* not a file of the expected/any known format */
    TBX_E_BAD_VERSION = 6,      /* known format, unsupported version */
    TBX_E_FORMAT = 7,           /* structurally invalid (bad type tag, bad JSON, bad UTF-8, ...) */
    TBX_E_LIMIT = 8,            /* a declared count/length exceeds a tbx_limits value */
    TBX_E_OVERFLOW = 9,         /* a size computation overflows 64 bits */
    TBX_E_DUPLICATE = 10,       /* a duplicate key or tensor name */
    TBX_E_RANGE = 11,           /* offset outside its region, overlap, gap, misalignment */
    TBX_E_UNSUPPORTED = 12,     /* valid, but this operation cannot handle it (e.g. decode dtype) */
    TBX_E_NOT_FOUND = 13,       /* no tensor/key/section of that name */
    TBX_E_CHECKSUM = 14,        /* a digest or CRC does not match */
    TBX_E_BUFFER_TOO_SMALL = 15,/* caller buffer too small; the needed size is returned */
    TBX_E_STATE = 16,           /* call not valid in the object's current state */
    TBX_E_EXISTS = 17,          /* output exists (no TBX_WRITE_OVERWRITE) or is an input */
    TBX_E_LOSSY = 18,           /* the step would lose data and was not explicitly allowed */
    TBX_E_PADDING = 19,         /* padding bytes are not zero */
    TBX_E_CANCELLED = 20        /* a progress callback asked to stop (tbx_progress_fn) */
} tbx_status;

#define TBX_NO_OFFSET UINT64_MAX

typedef struct tbx_error {
    tbx_status code;
    uint64_t offset;   /* byte offset in the file the problem is at, or TBX_NO_OFFSET */
    char field[64];    /* the field involved, e.g. "header.data_offsets" (may be empty) */
    char message[320]; /* one line: field, value, offset and what was expected */
} tbx_error;

/* Short stable description of a status ("truncated", "bad magic", ...). Static storage. */
TBX_API const char *tbx_strerror(tbx_status status);
/* Stable identifier of a status ("TBX_E_TRUNCATED"). Static storage. */
TBX_API const char *tbx_status_name(tbx_status status);

/* ---------------------------------------------------------------------------------------------
 * Formats
 * ------------------------------------------------------------------------------------------- */
typedef enum tbx_format {
    TBX_FORMAT_UNKNOWN = 0,
    TBX_FORMAT_SAFETENSORS = 1,
    TBX_FORMAT_GGUF = 2,
    TBX_FORMAT_ZTENSOR = 3,
    TBX_FORMAT_OINF = 4,
    TBX_FORMAT_MCF = 5,          /* mantle's Model Container Format (docs/formats/mcf.md) */
    TBX_FORMAT_EMBD = 6,         /* EMBD .weights (cpp_embedder's specification) */
    TBX_FORMAT_EMBD_LEGACY = 7   /* the layout cpp_embedder loads (its converter's; no extension) */
    /* A format added later may have no name in this list: its value is its driver's own (each
     * value one format's, never reused), listed by tbx_format_at and tbx_format_count, named
     * and found by tbx_format_name / tbx_format_from_name / tbx_format_from_path like these. */
} tbx_format;

/* Lower-case name of a format with a driver in this library (its row's: "safetensors",
 * "gguf", "ztensor", ...; tbx_format_at lists them); "unknown" for any other value. */
TBX_API const char *tbx_format_name(tbx_format format);
/* Parses a format name (as printed by tbx_format_name, or an alias such as "zt");
 * TBX_FORMAT_UNKNOWN if no driver has that name. */
TBX_API tbx_format tbx_format_from_name(const char *name);
/* Detects the format from the first bytes of a file (magic numbers, never the extension).
 * `head` holds the first `len` bytes of the file (64 are always enough); `file_size` is the total
 * size of the file. Returns TBX_FORMAT_UNKNOWN when nothing matches. */
TBX_API tbx_format tbx_detect_format(const void *head, size_t len, uint64_t file_size);
/* Guesses the format from a path's extension (each format's tbx_format_caps.extensions, e.g.
 * .safetensors, .gguf, .zt; case-insensitive); TBX_FORMAT_UNKNOWN if no driver claims the
 * extension. Used only for writing. */
TBX_API tbx_format tbx_format_from_path(const char *path);

/* What a format's driver can do (tbx_format_caps.flags) */
#define TBX_FCAP_READ          0x01u /* files can be opened */
#define TBX_FCAP_WRITE         0x02u /* files can be written (tbx_writer_open, tbx_convert) */
#define TBX_FCAP_SECTIONS      0x04u /* the writer stores sections (tbx_writer_add_section) */
#define TBX_FCAP_SIZEVARS      0x08u /* size variables (tbx_sizevar_*, tbx_writer_add_sizevar) */
#define TBX_FCAP_NO_DATA       0x10u /* the writer stores tensors without data (has_data 0) */
#define TBX_FCAP_COMPRESSION   0x20u /* the writer compresses (tbx_write_options.compress_level) */
#define TBX_FCAP_DIGESTS       0x40u /* the writer records digests (tbx_write_options.digest) */
#define TBX_FCAP_ALIGNMENT     0x80u /* the writer honours tbx_write_options.alignment */

/* Capabilities of a format, as its driver declares them (one source: the library's checks
 * use the same data). Versioned: set struct_size (TBX_FORMAT_CAPS_INIT). */
typedef struct tbx_format_caps {
    uint32_t struct_size;
    tbx_format format;
    const char *name;          /* as tbx_format_name */
    const char *aliases;       /* other names tbx_format_from_name accepts, space-separated ("") */
    const char *extensions;    /* space-separated, e.g. ".zt"; the first one is the usual one */
    uint32_t flags;            /* TBX_FCAP_* */
    uint32_t read_versions;    /* bit v set: version v can be read (bit 0: the format has none) */
    uint32_t write_versions;   /* bit v set: version v can be written (0 when not writable) */
    uint32_t write_version;    /* the version written by default (tbx_write_options.version 0) */
    uint64_t meta_types;       /* bit t set: metadata values of tbx_value_type t are stored as
                                * such (others need TBX_CONVERT_STRINGIFY_META or DROP_META) */
} tbx_format_caps;
#define TBX_FORMAT_CAPS_INIT { .struct_size = sizeof(tbx_format_caps) }

/* Number of formats this library has a driver for; tbx_format_at(i) for i below it lists them
 * (in a fixed order; TBX_FORMAT_UNKNOWN past the end). */
TBX_API size_t tbx_format_count(void);
TBX_API tbx_format tbx_format_at(size_t i);
/* Fills *caps (its first caps->struct_size bytes) for `format`. TBX_E_NOT_FOUND when the
 * library has no driver for it, TBX_E_INVALID_ARG for a NULL caps. */
TBX_API tbx_status tbx_format_caps_get(tbx_format format, tbx_format_caps *caps);

/* ---------------------------------------------------------------------------------------------
 * Data types. One table drives every size computation (tbx_dtype_info).
 * The numeric values are stable.
 * ------------------------------------------------------------------------------------------- */
typedef enum tbx_dtype {
    TBX_DT_INVALID = 0,
    /* floating point */
    TBX_DT_F64 = 1, TBX_DT_F32 = 2, TBX_DT_F16 = 3, TBX_DT_BF16 = 4,
    TBX_DT_F8_E4M3 = 5,      /* OCP E4M3FN: no Inf, NaN = S.1111.111, max 448 */
    TBX_DT_F8_E5M2 = 6,      /* IEEE-like E5M2 (bias 15), Inf and NaN */
    TBX_DT_F8_E4M3FNUZ = 7,  /* bias 8, no Inf, NaN = 0x80 only, no -0 */
    TBX_DT_F8_E5M2FNUZ = 8,  /* bias 16, no Inf, NaN = 0x80 only, no -0 */
    TBX_DT_F8_E8M0 = 9,      /* unsigned exponent-only: 2^(e-127), 0xFF = NaN */
    TBX_DT_F6_E2M3 = 10,     /* 6-bit OCP MX float, no Inf/NaN; packed */
    TBX_DT_F6_E3M2 = 11,     /* 6-bit OCP MX float, no Inf/NaN; packed */
    TBX_DT_F4_E2M1 = 12,     /* 4-bit OCP MX float (safetensors "F4"); packed, low nibble first */
    TBX_DT_C64 = 13,         /* complex of two f32 (re, im) */
    TBX_DT_C128 = 14,        /* complex of two f64 (re, im) */
    /* integers */
    TBX_DT_I8 = 20, TBX_DT_I16 = 21, TBX_DT_I32 = 22, TBX_DT_I64 = 23,
    TBX_DT_U8 = 24, TBX_DT_U16 = 25, TBX_DT_U32 = 26, TBX_DT_U64 = 27,
    TBX_DT_BOOL = 28,        /* one byte per element, 0 or 1 */
    TBX_DT_BITSET = 29,      /* OINF BITSET tensor: one byte per element */
    /* packed sub-byte integers: one LSB-first bitstream, ceil(n*bits/8) bytes */
    TBX_DT_I4 = 30, TBX_DT_I2 = 31, TBX_DT_I1 = 32,
    TBX_DT_U4 = 33, TBX_DT_U2 = 34, TBX_DT_U1 = 35,
    TBX_DT_T2 = 36,          /* ternary, 2-bit two's complement in {-1,0,1} */
    TBX_DT_T1 = 37,          /* binary: bit 0 -> -1, bit 1 -> +1 */
    /* ggml block types (block size, bytes per block in tbx_dtype_info) */
    TBX_DT_Q4_0 = 50, TBX_DT_Q4_1 = 51, TBX_DT_Q5_0 = 52, TBX_DT_Q5_1 = 53,
    TBX_DT_Q8_0 = 54, TBX_DT_Q8_1 = 55,
    TBX_DT_Q2_K = 56, TBX_DT_Q3_K = 57, TBX_DT_Q4_K = 58, TBX_DT_Q5_K = 59,
    TBX_DT_Q6_K = 60, TBX_DT_Q8_K = 61,
    TBX_DT_IQ2_XXS = 62, TBX_DT_IQ2_XS = 63, TBX_DT_IQ3_XXS = 64, TBX_DT_IQ1_S = 65,
    TBX_DT_IQ4_NL = 66, TBX_DT_IQ3_S = 67, TBX_DT_IQ2_S = 68, TBX_DT_IQ4_XS = 69,
    TBX_DT_IQ1_M = 70, TBX_DT_TQ1_0 = 71, TBX_DT_TQ2_0 = 72, TBX_DT_MXFP4 = 73,
    TBX_DT_NVFP4 = 74, TBX_DT_Q1_0 = 75, TBX_DT_Q2_0 = 76,
    /* MCF's quantization families: driver-specific dtypes (TBX_DTF_SHAPED) the MCF driver
     * declares; one payload per tensor whose size follows from the whole shape (rank 2 for the
     * q/k families), decoded exactly as mantle does (docs/formats/mcf.md). int8/int4: f32
     * tensor scale (and zero point, activations domain) regions before the codes; q8/q4: f16
     * scale per block of 32; k6..k2: f16 scale per super-block of 256 and a 6-bit sub-scale
     * per block of 32. mantle's runtime loads q8 .. k2 only: it refuses int8/int4 tensors
     * ("unsupported dtype 16/17"), which tensorbox alone reads. */
    TBX_DT_MCF_INT8 = 90, TBX_DT_MCF_INT4 = 91, TBX_DT_MCF_Q8 = 92, TBX_DT_MCF_Q4 = 93,
    TBX_DT_MCF_K6 = 94, TBX_DT_MCF_K4 = 95, TBX_DT_MCF_K3 = 96, TBX_DT_MCF_K2 = 97,
    TBX_DT_COUNT_ = 98       /* one past the largest value reserved so far */
} tbx_dtype;

/* tbx_dtype_info.flags */
#define TBX_DTF_FLOAT    0x01u  /* floating point values */
#define TBX_DTF_INT      0x02u  /* integer values */
#define TBX_DTF_SIGNED   0x04u  /* signed (ints), always set for floats */
#define TBX_DTF_COMPLEX  0x08u
#define TBX_DTF_PACKED   0x10u  /* sub-byte elements in one LSB-first bitstream */
#define TBX_DTF_BLOCK    0x20u  /* quantized blocks: block_size elements in block_bytes */
#define TBX_DTF_SHAPED   0x40u  /* driver-specific: declared by a format driver, which computes
                                   the stored size from the whole shape */
#define TBX_DTF_DECODE   0x80u  /* tbx_decode_f32 can decode it */

typedef struct tbx_dtype_info {
    tbx_dtype dtype;
    const char *name;      /* lower-case name: "f32", "bf16", "q4_k", "f8_e4m3", "i4", ... */
    uint32_t bits;         /* bits per element; for block types 8*block_bytes/block_size rounded */
    uint32_t block_size;   /* elements per block: 1 for plain types */
    uint32_t block_bytes;  /* bytes per block; 0 for packed types (size = ceil(n*bits/8)) */
    uint32_t flags;        /* TBX_DTF_* */
} tbx_dtype_info;

/* The table entry of a dtype (the core table, or the driver that declares a driver-specific
 * one), or NULL for an invalid value. Static storage. */
TBX_API const tbx_dtype_info *tbx_dtype_get(tbx_dtype dtype);
/* Looks a dtype up by its lower-case name (case-insensitive); TBX_DT_INVALID if unknown. */
TBX_API tbx_dtype tbx_dtype_from_name(const char *name);
/* Stored byte size of `nelems` elements of `dtype` (checked arithmetic). Fails with
 * TBX_E_FORMAT when nelems is not a multiple of the block size, TBX_E_OVERFLOW on overflow,
 * TBX_E_UNSUPPORTED for TBX_DTF_SHAPED types (use tbx_dtype_nbytes_shape). */
TBX_API tbx_status tbx_dtype_nbytes(tbx_dtype dtype, uint64_t nelems, uint64_t *out);
/* Stored byte size of a tensor of this row-major shape; handles every dtype, including
 * row-wise block rules (the last dimension must be a multiple of the block size) and
 * driver-specific (TBX_DTF_SHAPED) dtypes, whose size the declaring driver computes. */
TBX_API tbx_status tbx_dtype_nbytes_shape(tbx_dtype dtype, const uint64_t *shape, uint32_t ndim,
                                          uint64_t *out);
/* 1 when the writer of `format` can store tensors of `dtype` (at some shape; see
 * tbx_format_caps_get), else 0. */
TBX_API int tbx_format_writes_dtype(tbx_format format, tbx_dtype dtype);
/* 1 when tbx_convert can quantize values to `dtype` (tbx_convert_options.quant_to: a ggml
 * block type this library has a quantizer for, or one of MCF's families), else 0. Walk the
 * values 1 .. TBX_DT_COUNT_ - 1 for the list (with tbx_format_writes_dtype: a format's). */
TBX_API int tbx_dtype_quantizable(tbx_dtype dtype);
/* 1 when tbx_convert can cast float tensors to `dtype` (tbx_convert_options.cast_to: a float
 * dtype the library encodes value by value), else 0. Walk 1 .. TBX_DT_COUNT_ - 1 for the list. */
TBX_API int tbx_dtype_castable(tbx_dtype dtype);
/* The quantization type `name` stands for with an output of `format`: a quantizable dtype of
 * that name (case-insensitive), or one of the format's own dtypes named without the
 * "<format>_" prefix of its name (MCF: "q4" is mcf_q4). TBX_DT_INVALID when it names none (a
 * type the format cannot store is still returned: tbx_convert refuses it, naming it). */
TBX_API tbx_dtype tbx_quant_from_name(tbx_format format, const char *name);
/* llama-quantize's preset i (tbx_convert_options.quant_preset: its type name, "Q4_K_M", ...;
 * NULL past the last): *ftype its llama_ftype (general.file_type), *deflt its default type
 * (TBX_DT_INVALID for COPY), *alias 1 when the name spells another preset (Q4_K: Q4_K_M).
 * Any out pointer may be NULL. */
TBX_API const char *tbx_quant_preset_at(size_t i, uint32_t *ftype, tbx_dtype *deflt,
                                        int *alias);

/* Scalar conversions (round to nearest even; NaN stays NaN; Inf and subnormals handled). */
TBX_API float tbx_f16_to_f32(uint16_t h);
TBX_API uint16_t tbx_f32_to_f16(float f);
TBX_API float tbx_bf16_to_f32(uint16_t h);
TBX_API uint16_t tbx_f32_to_bf16(float f);
/* 8-bit floats; `dtype` is one of the TBX_DT_F8_* values. Out-of-range values saturate to the
 * largest finite value for formats without Inf (E4M3, FNUZ) and become Inf for E5M2. */
TBX_API float tbx_f8_to_f32(tbx_dtype dtype, uint8_t v);
TBX_API uint8_t tbx_f32_to_f8(tbx_dtype dtype, float f);

/* Decodes `nelems` elements of stored data `src` (`src_len` bytes, starting at element 0 of a
 * block) to float32. Plain floats/ints/bool convert exactly where representable; block types use
 * the dequantizer of the format. TBX_E_UNSUPPORTED when the dtype is not decodable,
 * TBX_E_TRUNCATED when src_len is too small. */
TBX_API tbx_status tbx_decode_f32(tbx_dtype dtype, const void *src, size_t src_len,
                                  uint64_t nelems, float *dst);

/* ---------------------------------------------------------------------------------------------
 * Limits and allocator
 * ------------------------------------------------------------------------------------------- */
typedef struct tbx_limits {
    uint32_t struct_size;          /* sizeof(tbx_limits) (see "Versioned structs"); a field past
                                    * a shorter caller's struct_size takes its default */
    uint64_t max_tensors;          /* default 1,000,000 */
    uint64_t max_metadata_entries; /* default 1,000,000 (top-level keys) */
    uint64_t max_string_len;       /* default 1 GiB (one string / key / name) */
    uint64_t max_array_len;        /* default 2^30 elements in one array */
    uint64_t max_header_bytes;     /* default 1 GiB (JSON header, CBOR manifest, ...) */
    uint64_t max_tensor_bytes;     /* default 2^48 (one tensor's stored bytes) */
    uint32_t max_ndim;             /* default 64 */
    uint32_t max_depth;            /* default 32 (nesting of arrays/maps) */
    /* Decompression (zstd in zTensor). Default 2^27 (128 MiB, zstd's own default): the window
     * (history) one decoder may keep. Encoded data is always decoded in a streaming pass
     * through bounded buffers, never into a buffer sized by the declared decoded size unless
     * the caller passes one (tbx_tensor_read, tbx_component_read, tbx_read_batch): reading a
     * component in ranges, decoding it to f32, cat, stats, convert and validation hold the
     * decoder (this window at most, and at most what the component's decoded size needs, at
     * least 8 MiB, plus ~200 KiB) and a few MiB of buffers, whatever the component declares. A
     * small file may declare a huge decoded size (zstd reaches ~32,000:1 on zeros; a 33 KB
     * file can decode to 1 GiB): that costs decoding time linear in the decoded size, not
     * memory. A frame asking for a larger window fails with TBX_E_LIMIT. This is also the budget
     * of all the handle's zstd decoders together (rounded down to a power of two, at most
     * 128 MiB): each frame's header is read before its decoder starts, and decoders wait
     * (tbx_read_batch and tbx_validate_path workers) or parked range-read cursors are closed
     * until the windows fit; a frame needing the whole budget decodes alone. So a hostile file
     * costs at most about this much for windows, plus ~1.5 MiB of fixed state per thread,
     * whatever its frames declare and however many threads decode. Frames of zstd levels
     * <= 19 need at most 8 MiB (16 decode side by side), levels 20..22 up to 128 MiB. */
    uint64_t max_decode_window;
    /* Default 2^28 (256 MiB): one side file of a model, read whole where it is needed. A
     * Hugging Face model directory lists every side file it has as a section (config.json,
     * tokenizer.json, tokenizer.model, vocab.txt, ... at depth <= 1), whatever its size: opening
     * reads none of them. What reads a section whole checks this limit first: tbx_convert
     * carrying sections into the output (MCF's Hugging Face sections, EMBD's vocabulary, a
     * directory's files) and the Hugging Face -> GGUF conversion (config.json, tokenizer.json,
     * tokenizer.model, ...); a larger one fails with TBX_E_LIMIT naming the file, its size and
     * this limit, never silently left out. Real tokenizer.json files of 100k+ vocabularies are
     * tens of MB, some above 64 MiB. Parsing a JSON side file (the GGUF conversion, EMBD's
     * vocabulary) costs several times its size in memory (docs/reliability.md). */
    uint64_t max_side_file_bytes;
    /* The amplification budget. A file can make a reader expand, share or repeat its bytes: one
     * string-table window named by a million tensors, one value behind thousands of keys, a
     * short run of dimensions that every shape reuses, an empty array that becomes a heap value.
     * What a handle holds decoded from its file(s) (metadata keys and values, tensor names and
     * shapes, the tensor, component and section tables and their indexes, a driver's own
     * tables) is charged, as it is built and before it is allocated, against
     *     meta_budget_per_byte x (bytes of the file or files the handle opened) + meta_budget_base
     * (defaults 1 and 32 MiB). Past it the open fails with TBX_E_LIMIT naming the field and the
     * byte offset of the entry that would not fit. Tensors that share stored bytes (MCF and OINF
     * entries may point at one payload) are held to the same rule: their bytes, counted once
     * per tensor, may pass the file's own size by at most the budget (TBX_E_LIMIT, field
     * "tensor.data"), so a conversion never copies more than that. A real model is far inside
     * both: its tensor data alone makes up the file. A hostile file costs at most about the
     * file's size plus 32 MiB to open, so every command stays within 2 x file size + 64 MiB of
     * memory, in time linear in the file's size. meta_budget_base = UINT64_MAX: no budget.
     * A shorter caller's struct gets the defaults. */
    uint64_t meta_budget_per_byte;
    uint64_t meta_budget_base;
} tbx_limits;

/* Fills `limits` (this header's whole struct) with the defaults above and sets struct_size. */
TBX_API void tbx_limits_default(tbx_limits *limits);

/* Optional allocator: every allocation a handle makes goes through it. `free` receives the size
 * that was asked for. NULL members are not allowed; pass a NULL allocator for malloc/free. */
typedef struct tbx_allocator {
    void *(*alloc)(void *ud, size_t size);
    void *(*realloc)(void *ud, void *ptr, size_t old_size, size_t new_size);
    void (*free)(void *ud, void *ptr, size_t size);
    void *ud;
} tbx_allocator;

/* ---------------------------------------------------------------------------------------------
 * Typed values (metadata). Values read from a file are owned by the file handle.
 * ------------------------------------------------------------------------------------------- */
typedef enum tbx_value_type {
    TBX_V_NULL = 0,
    TBX_V_BOOL = 1,
    TBX_V_U8 = 2, TBX_V_I8 = 3, TBX_V_U16 = 4, TBX_V_I16 = 5,
    TBX_V_U32 = 6, TBX_V_I32 = 7, TBX_V_U64 = 8, TBX_V_I64 = 9,
    TBX_V_F16 = 10, TBX_V_BF16 = 11, TBX_V_F32 = 12, TBX_V_F64 = 13,
    TBX_V_STRING = 14,  /* bytes, usually UTF-8; may contain NUL; kept whole */
    TBX_V_BYTES = 15,   /* opaque byte blob */
    TBX_V_ARRAY = 16,   /* list; tbx_value_elem_type tells the declared element type */
    TBX_V_MAP = 17,     /* ordered (key string, value) pairs */
    TBX_V_NDARRAY = 18, /* typed n-d array: element dtype + row-major shape + packed data */
    TBX_V_BITSET = 19   /* bit list, LSB first */
} tbx_value_type;

typedef struct tbx_value tbx_value;

/* Lower-case name of a value type ("u8", "string", "array", ...). Static storage. */
TBX_API const char *tbx_value_type_name(tbx_value_type t);

TBX_API tbx_value_type tbx_value_type_of(const tbx_value *v);
/* Scalar getters. Return TBX_E_INVALID_ARG when the value is not of a compatible kind;
 * integer getters fail with TBX_E_OVERFLOW when the value does not fit. Booleans read as 0/1. */
TBX_API tbx_status tbx_value_get_u64(const tbx_value *v, uint64_t *out);
TBX_API tbx_status tbx_value_get_i64(const tbx_value *v, int64_t *out);
TBX_API tbx_status tbx_value_get_f64(const tbx_value *v, double *out);
/* Bytes of a STRING or BYTES value; *len gets the length. The bytes are followed by a NUL that
 * is not part of the value (so C-string use is safe when the value has no embedded NUL). */
TBX_API const char *tbx_value_get_str(const tbx_value *v, size_t *len);
/* Number of elements of an ARRAY, MAP, NDARRAY (all elements) or BITSET; bytes of STRING/BYTES;
 * 1 for scalars; 0 for NULL. */
TBX_API uint64_t tbx_value_len(const tbx_value *v);
/* Declared element type of an ARRAY (TBX_V_NULL for untyped/heterogeneous arrays). */
TBX_API tbx_value_type tbx_value_elem_type(const tbx_value *v);
/* Element i of an ARRAY or value i of a MAP; NULL when out of range. Works for every array
 * (scalar elements of packed arrays and strings of compact string arrays are materialised on
 * demand inside the handle, and kept until the array is freed: about 100 bytes per element
 * touched; prefer tbx_value_data() and tbx_value_str_at() to walk large arrays). */
TBX_API const tbx_value *tbx_value_at(const tbx_value *v, uint64_t i);
/* String i of an ARRAY of strings (bytes + length, NUL-terminated like tbx_value_get_str), read
 * in place without materialising a value: readers store arrays of strings (e.g. GGUF
 * tokenizer.ggml.tokens) compactly, one offsets array plus one byte blob. NULL (and *len 0) when
 * v is not an array, i is out of range or element i is not a STRING. */
TBX_API const char *tbx_value_str_at(const tbx_value *v, uint64_t i, size_t *len);
/* Key i of a MAP (bytes + length); NULL when out of range. */
TBX_API const char *tbx_value_key_at(const tbx_value *v, uint64_t i, size_t *len);
/* Packed element storage of an ARRAY of fixed-size scalars, NDARRAY or BITSET: native-endian
 * elements of tbx_value_elem_type() (NDARRAY: *dtype gets the element dtype; BITSET: bytes, LSB
 * first). NULL when the value has no packed storage. */
TBX_API const void *tbx_value_data(const tbx_value *v, size_t *nbytes);
/* NDARRAY shape (row-major) and element dtype. */
TBX_API tbx_status tbx_value_ndarray(const tbx_value *v, tbx_dtype *dtype, uint32_t *ndim,
                                     const uint64_t **shape);

/* Building values for writers. A new value is owned by the caller until freed with
 * tbx_value_free() or handed to a function that says it takes ownership. Return NULL on OOM and
 * on a bad argument: NULL bytes (s, p, data, bits, shape) with a non-zero length or count
 * (NULL with length 0 makes an empty value). */
TBX_API tbx_value *tbx_value_new_null(void);
TBX_API tbx_value *tbx_value_new_bool(int b);
TBX_API tbx_value *tbx_value_new_uint(tbx_value_type t, uint64_t u);  /* U8..U64 */
TBX_API tbx_value *tbx_value_new_int(tbx_value_type t, int64_t i);    /* I8..I64 */
TBX_API tbx_value *tbx_value_new_float(tbx_value_type t, double f);   /* F16..F64 (rounded) */
TBX_API tbx_value *tbx_value_new_string(const char *s, size_t len);   /* copies */
TBX_API tbx_value *tbx_value_new_bytes(const void *p, size_t len);    /* copies */
/* An empty array whose elements are declared to be of type `elem` (TBX_V_NULL: any). */
TBX_API tbx_value *tbx_value_new_array(tbx_value_type elem);
TBX_API tbx_value *tbx_value_new_map(void);
/* NDARRAY of `dtype` with `shape`; copies the packed element bytes (size from the core dtype table:
 * driver-specific dtypes, TBX_DTF_SHAPED, are not accepted as ndarray elements). */
TBX_API tbx_value *tbx_value_new_ndarray(tbx_dtype dtype, const uint64_t *shape, uint32_t ndim,
                                         const void *data, size_t nbytes);
TBX_API tbx_value *tbx_value_new_bitset(const uint8_t *bits, uint64_t nbits);
/* Appends `item` to an ARRAY (takes ownership of item, also on failure). TBX_E_INVALID_ARG when
 * the item's type does not match a declared element type. */
TBX_API tbx_status tbx_value_array_push(tbx_value *array, tbx_value *item);
/* Appends (key, item) to a MAP (takes ownership of item, also on failure); duplicate keys are
 * rejected with TBX_E_DUPLICATE. */
TBX_API tbx_status tbx_value_map_put(tbx_value *map, const char *key, size_t key_len,
                                     tbx_value *item);
/* Deep copy; NULL on OOM. */
TBX_API tbx_value *tbx_value_clone(const tbx_value *v);
/* Frees a value built with tbx_value_new_*; accepts NULL. Never call on a handle's values. */
TBX_API void tbx_value_free(tbx_value *v);

/* ---------------------------------------------------------------------------------------------
 * Opening files
 * ------------------------------------------------------------------------------------------- */
typedef struct tbx_file tbx_file;

/* Open flags */
#define TBX_OPEN_MMAP            0x01u /* map the file (zero-copy tbx_tensor_map); default pread */
#define TBX_OPEN_VERIFY_DIGESTS  0x02u /* verify stored digests/CRCs while opening/reading */

/* Called for every problem found while validating (see tbx_validate). */
typedef void (*tbx_problem_fn)(void *ud, const tbx_error *problem);

/* Progress of a long operation (tbx_convert_options.progress, tbx_diff_options.progress,
 * tbx_open_options.progress: tbx_validate_path and tbx_validate), with
 * its options' progress_ud. done_bytes and total_bytes count INPUT bytes (the stored bytes of
 * the input tensors the operation reads; total_bytes is planned before the first is read and
 * does not change during the call). Calls come on the calling thread, in order, done_bytes
 * never decreasing; the last call of an operation that succeeds has done_bytes ==
 * total_bytes (0 of 0 when there is nothing to read). They come at the granularity of the
 * work (a tensor, a job of a few MiB, a 64 MiB copy piece): throttling a display is the
 * callback's business. Returning 0 goes on; any other value cancels: the operation stops at
 * once and fails with TBX_E_CANCELLED, and a conversion leaves no output file (its temporary
 * file is removed; an existing output is left as it was). */
typedef int (*tbx_progress_fn)(void *ud, uint64_t done_bytes, uint64_t total_bytes);

typedef struct tbx_open_options {
    uint32_t struct_size;              /* sizeof(tbx_open_options) */
    tbx_format format;                 /* 0: detect from magic bytes */
    uint32_t flags;                    /* TBX_OPEN_* */
    const tbx_limits *limits;          /* NULL: defaults */
    const tbx_allocator *allocator;    /* NULL: malloc */
    /* When set, recoverable problems (non-zero padding, bad digest, a lint) are reported here and
     * opening continues; when NULL the first problem fails the open. */
    tbx_problem_fn on_problem;
    void *problem_ud;
    /* Worker threads for tbx_validate_path and tbx_read_batch (decoding and verifying distinct
     * components at once); 0: env TBX_THREADS, else the online CPUs, at most 8; 1: none. */
    uint32_t threads;
    /* Progress of validation's pass over the data (tbx_validate_path, and tbx_validate of a
     * handle opened with it; may be NULL; with progress_ud): done and total count the stored
     * bytes of the components the pass decodes or verifies (encoded ones and those with a
     * digest; plain stored bytes need no pass: 0 of 0). Non-zero cancels: the pass stops and
     * the validation fails with TBX_E_CANCELLED (reported as a problem, field "progress"). */
    tbx_progress_fn progress;
    void *progress_ud;
} tbx_open_options;

/* Fills `opt` with defaults (detect format, pread, default limits, malloc). */
TBX_API void tbx_open_options_init(tbx_open_options *opt);

/* Opens a file by path. On success *out is a handle to close with tbx_close(). The format comes
 * from opt->format or else from the file's magic bytes; only when no magic matches is the
 * extension used, so that a damaged file gets its format's precise error message.
 *
 * Sets of files open as one handle (tbx_file_part_count/_path name the files):
 *   - shard 1 of a GGUF split set ("NAME-00001-of-0000N.gguf") opens the whole set;
 *   - a Hugging Face model directory opens as one safetensors file: its
 *     model.safetensors.index.json and the shards it names (else model.safetensors, else the
 *     only *.safetensors.index.json or *.safetensors in it), the tensors of every shard in one
 *     table, each read from its own shard, the shards' __metadata__ merged, and its small side
 *     files (*.json, *.txt, *.model, *.jinja, *.tiktoken, at most one directory deep, at most
 *     64 MiB each: config.json, tokenizer.json, 1_Pooling/config.json, ...) as sections named by
 *     their path relative to the directory; a path to a *.safetensors.index.json does the same.
 *     The index is checked as hostile input: errors name the index, the field and the byte
 *     offset; a shard's errors name the shard and the offset in it. One shard opened by its own
 *     path is just that file. Rules: docs/formats/safetensors.md, "Directories and sharded sets".
 * Opening a set costs about what opening its files one after the other costs; the handle keeps
 * one descriptor per file.
 * A path that starts with http://, https://, s3:// or hf:// is a URL: the file (or the set:
 * a directory URL ending in '/', hf://ORG/REPO, an index, shard 1 of a GGUF split set) is read
 * through HTTP range requests, never downloaded whole, with the same rules and messages;
 * settings and credentials come from the environment (docs/remote.md). TBX_OPEN_MMAP is
 * ignored for a URL. A file that changes on the server while it is read fails with TBX_E_IO;
 * a server that ignores range requests with TBX_E_UNSUPPORTED. */
TBX_API tbx_status tbx_open_path(tbx_file **out, const char *path, const tbx_open_options *opt,
                                 tbx_error *err);
/* Opens a memory buffer. The buffer is not copied and must outlive the handle. */
TBX_API tbx_status tbx_open_memory(tbx_file **out, const void *data, size_t size,
                                   const tbx_open_options *opt, tbx_error *err);
/* Read-at callback: read exactly `len` bytes at `offset` into `buf`; return TBX_OK, or an error
 * (short reads are errors). Lets remote range reads plug in. */
typedef tbx_status (*tbx_read_at_fn)(void *ud, uint64_t offset, void *buf, size_t len);
TBX_API tbx_status tbx_open_callback(tbx_file **out, tbx_read_at_fn read_at, void *ud,
                                     uint64_t size, const tbx_open_options *opt, tbx_error *err);
/* Closes a handle and frees it; accepts NULL. Never call it twice on one handle (see Lifetime). */
TBX_API void tbx_close(tbx_file *f);

TBX_API tbx_format tbx_file_format(const tbx_file *f);
/* Format version as the file records it (e.g. GGUF 3); 0 when the format has none. */
TBX_API uint32_t tbx_file_version(const tbx_file *f);
/* Size in bytes of the file opened; of a set opened as one handle, of its first part (the GGUF
 * shard 1, the safetensors index or model.safetensors; see tbx_file_part_count). */
TBX_API uint64_t tbx_file_size(const tbx_file *f);
/* The files a handle reads: 1 for a single file; a set opened as one handle has more (a GGUF
 * split set: shard 1 then the others; a Hugging Face directory: the index file or
 * model.safetensors, the shards, then the side files its sections come from). */
TBX_API uint64_t tbx_file_part_count(const tbx_file *f);
/* Path of part i (< tbx_file_part_count) as the handle names it (part 0 of a single file: the
 * path given to tbx_open_path; the parts of a directory: relative to it), NULL when unknown or
 * out of range (memory and callback handles); *size (may be NULL) gets its size in bytes. */
TBX_API const char *tbx_file_part_path(const tbx_file *f, uint64_t i, uint64_t *size);

/* Validates an open file without opening it again: the pass tbx_validate_path runs after its
 * open. Every component is read in bounded memory (encoded ones decoded, digests verified
 * when the handle was opened with TBX_OPEN_VERIFY_DIGESTS), then the format's deep checks
 * run. Each problem of this pass goes to `cb` (may be NULL), in file order. Problems found while
 * opening went to the open's on_problem when it was set (without it the first one failed the
 * open): they are counted too, and come first. *nproblems (may be NULL) gets open-time plus
 * this pass's problems; returns TBX_OK when there are none, else the code of the first one.
 * For the checks of tbx_validate_path, open with on_problem set and TBX_OPEN_VERIFY_DIGESTS.
 * Meant once per handle: a second call runs the pass again but need not report again what the
 * first found (a digest found bad is remembered). Not on one handle from two threads. */
TBX_API tbx_status tbx_validate(tbx_file *f, tbx_problem_fn cb, void *ud, uint64_t *nproblems);

/* Validates a file: opens it with on_problem set and then reads every tensor's stored bytes
 * (decompressing, checking digests and format-specific value rules; distinct components on
 * opt->threads worker threads). Every problem found is passed to `cb` (may be NULL), in file
 * order whatever the thread count; *nproblems (may be NULL) gets their count.
 * Returns TBX_OK when the file is valid, otherwise the code of the first problem. */
TBX_API tbx_status tbx_validate_path(const char *path, const tbx_open_options *opt,
                                     tbx_problem_fn cb, void *ud, uint64_t *nproblems);

/* ---------------------------------------------------------------------------------------------
 * Metadata
 * ------------------------------------------------------------------------------------------- */
TBX_API uint64_t tbx_meta_count(const tbx_file *f);
/* Key i (bytes + length) and value i in file order; NULL when out of range. */
TBX_API const char *tbx_meta_key(const tbx_file *f, uint64_t i, size_t *len);
TBX_API const tbx_value *tbx_meta_value(const tbx_file *f, uint64_t i);
/* Value of `key` (NUL-terminated), or NULL. */
TBX_API const tbx_value *tbx_meta_find(const tbx_file *f, const char *key);
/* Typed getters: look `key` up and read it as the type asked for (see tbx_value_get_*).
 * TBX_E_NOT_FOUND when the key is absent, TBX_E_INVALID_ARG when the value is of another kind,
 * TBX_E_OVERFLOW when it does not fit. */
TBX_API tbx_status tbx_meta_get_u64(const tbx_file *f, const char *key, uint64_t *out);
TBX_API tbx_status tbx_meta_get_i64(const tbx_file *f, const char *key, int64_t *out);
TBX_API tbx_status tbx_meta_get_f64(const tbx_file *f, const char *key, double *out);
/* The bytes of a STRING value (see tbx_value_get_str), or NULL when absent or not a string. */
TBX_API const char *tbx_meta_get_str(const tbx_file *f, const char *key, size_t *len);
/* Looks up a key template in which every "{arch}" stands for the value of the string key
 * general.architecture (GGUF convention), e.g. "{arch}.context_length" -> "llama.context_length".
 * NULL when the template names {arch} and the file has no general.architecture, or when the
 * resulting key is absent or longer than 1023 bytes. */
TBX_API const tbx_value *tbx_meta_find_arch(const tbx_file *f, const char *key_template);
/* Element i of the array stored under `key` as string bytes (e.g. GGUF tokenizer.ggml.tokens),
 * read in place (tbx_value_str_at); NULL when the key is absent, not an array of strings, or i is
 * out of range. */
TBX_API const char *tbx_meta_array_str(const tbx_file *f, const char *key, uint64_t i,
                                       size_t *len);

/* ---------------------------------------------------------------------------------------------
 * Size variables: named integers a format records for its shapes (OINF "B := 4"). Formats
 * without them have none. Owned by the handle.
 * ------------------------------------------------------------------------------------------- */
TBX_API uint64_t tbx_sizevar_count(const tbx_file *f);
/* Name (bytes + length, NUL-terminated) and value of size variable i, in file order.
 * TBX_E_INVALID_ARG when i is out of range. */
TBX_API tbx_status tbx_sizevar_get(const tbx_file *f, uint64_t i, const char **name,
                                   size_t *name_len, uint64_t *value);

/* ---------------------------------------------------------------------------------------------
 * Tensors
 * ------------------------------------------------------------------------------------------- */
typedef enum tbx_layout {
    TBX_LAYOUT_DENSE = 0,
    TBX_LAYOUT_SPARSE_CSR = 1,    /* components values, indices, indptr */
    TBX_LAYOUT_SPARSE_COO = 2,    /* components values, coords */
    TBX_LAYOUT_QUANT_GROUP = 3    /* components packed_weight, scales, zeros (zTensor) */
} tbx_layout;

TBX_API const char *tbx_layout_name(tbx_layout layout);

typedef enum tbx_encoding {
    TBX_ENC_RAW = 0,
    TBX_ENC_ZSTD = 1
    /* A format may store components in an encoding of its own, not named in this list: its
     * value is its driver's (each value one encoding's), named by tbx_encoding_name. */
} tbx_encoding;

/* Lower-case name of an encoding ("raw", "zstd", or one a format declares), as `tbx info`
 * prints it; "unknown" for any other value. Static storage. */
TBX_API const char *tbx_encoding_name(tbx_encoding encoding);

typedef struct tbx_tensor_info {
    uint32_t struct_size;   /* set by the caller: sizeof(tbx_tensor_info) (TBX_TENSOR_INFO_INIT) */
    const char *name;       /* NUL-terminated (names cannot contain NUL) */
    size_t name_len;
    tbx_dtype dtype;        /* element dtype of the logical tensor */
    uint32_t ndim;
    const uint64_t *shape;  /* row-major, ndim entries (NULL when ndim == 0) */
    uint64_t nelems;        /* product of shape (1 for a scalar) */
    tbx_layout layout;
    uint32_t ncomponents;   /* >= 1 when the tensor has data, 0 for "no data" tensors */
    uint64_t offset;        /* absolute file offset of the first component's stored bytes */
    uint64_t nbytes;        /* stored bytes of all components together */
    uint32_t flags;         /* TBX_TENSOR_* */
} tbx_tensor_info;

/* The file lists the tensor but its values cannot be read: its stored bytes are not what its
 * dtype needs, in a way the format's reference accepts (an MCF int8/int4 tensor holding its
 * codes without their scale, as `mantle pack --quant-embed` writes them). Every read of it
 * (raw, range, map, f32, batch) fails with an error naming it and saying why; tbx_validate
 * reports it; tbx_convert refuses it unless TBX_CONVERT_DROP_UNREADABLE leaves it out. The
 * rest of the file reads as usual. */
#define TBX_TENSOR_UNREADABLE 0x1u

typedef struct tbx_component_info {
    uint32_t struct_size;   /* set by the caller (TBX_COMPONENT_INFO_INIT) */
    const char *name;       /* "data", "values", "indices", "indptr", "coords", "scales", ... */
    tbx_dtype dtype;
    uint64_t nelems;        /* decoded elements */
    uint64_t offset;        /* absolute file offset of the stored bytes */
    uint64_t stored_bytes;  /* bytes in the file (compressed size when encoded) */
    uint64_t nbytes;        /* decoded bytes */
    tbx_encoding encoding;
    const char *digest;     /* "sha256:..." / "crc32c:0x..." or NULL */
} tbx_component_info;

#define TBX_TENSOR_INFO_INIT { .struct_size = sizeof(tbx_tensor_info) }
#define TBX_COMPONENT_INFO_INIT { .struct_size = sizeof(tbx_component_info) }

TBX_API uint64_t tbx_tensor_count(const tbx_file *f);
/* Fills the first info->struct_size bytes of `info` for tensor i (file order); the pointers
 * inside stay valid until tbx_close. tbx_component_info_get and tbx_section_info_get work the
 * same way. */
TBX_API tbx_status tbx_tensor_info_get(const tbx_file *f, uint64_t i, tbx_tensor_info *info);
/* Index of the tensor named `name` (NUL-terminated). TBX_E_NOT_FOUND if absent. */
TBX_API tbx_status tbx_tensor_find(const tbx_file *f, const char *name, uint64_t *index);
TBX_API tbx_status tbx_component_info_get(const tbx_file *f, uint64_t i, uint32_t c,
                                          tbx_component_info *info);
/* Reads the decoded bytes of component c of tensor i into buf. Call with buf == NULL (or a small
 * cap) to learn the size: *needed gets it and TBX_E_BUFFER_TOO_SMALL is returned. */
TBX_API tbx_status tbx_component_read(tbx_file *f, uint64_t i, uint32_t c, void *buf, size_t cap,
                                      size_t *needed, tbx_error *err);
/* Reads the stored bytes of a dense tensor (its single component, decoded). Size query as
 * tbx_component_read. */
TBX_API tbx_status tbx_tensor_read(tbx_file *f, uint64_t i, void *buf, size_t cap, size_t *needed,
                                   tbx_error *err);
/* Reads `len` bytes at byte `pos` of a dense tensor's decoded data (streaming access), as
 * tbx_component_read_range for its single component. */
TBX_API tbx_status tbx_tensor_read_range(tbx_file *f, uint64_t i, uint64_t pos, void *buf,
                                         size_t len, tbx_error *err);
/* Reads `len` decoded bytes at byte `pos` of component c of tensor i, in bounded memory.
 * Raw components are read straight from the file. Encoded (zstd) components are decoded by a
 * cursor the handle keeps per component: a read that starts at or after where the previous
 * read of that component ended continues the decoding, so reading a component front to back
 * in ranges costs one decoding pass (linear time); a read that goes backwards decodes again
 * from the component's first byte. The end of the encoded data is checked when the last byte
 * is read (trailing data or a short stream: TBX_E_FORMAT). With TBX_OPEN_VERIFY_DIGESTS a
 * digest not yet verified is verified first, in one bounded pass (TBX_E_CHECKSUM), so no byte
 * of a mismatching component is handed out. TBX_E_RANGE outside the component,
 * TBX_E_UNSUPPORTED when the format cannot decode ranges (then read it whole). Not for use on
 * the same handle from two threads (tbx_read_batch is the threaded path). */
TBX_API tbx_status tbx_component_read_range(tbx_file *f, uint64_t i, uint32_t c, uint64_t pos,
                                            void *buf, size_t len, tbx_error *err);
/* One component to read with tbx_read_batch. */
typedef struct tbx_read_req {
    uint32_t struct_size;   /* sizeof(tbx_read_req) (TBX_READ_REQ_INIT); the same in every
                             * element: it is also the array's stride */
    uint64_t tensor;        /* tensor index */
    uint32_t component;     /* component index (0 for a dense tensor) */
    void *buf;              /* the caller's buffer, at least the component's nbytes */
    size_t cap;             /* its size */
    tbx_status status;      /* out: this request's result */
    tbx_error error;        /* out: its error when status != TBX_OK */
} tbx_read_req;
#define TBX_READ_REQ_INIT { .struct_size = sizeof(tbx_read_req) }

/* Reads the decoded bytes of n components (as tbx_component_read each), decoding and verifying
 * up to `threads` of them at once: zstd decompression and digests of distinct components run
 * on worker threads. threads 0: the handle's (tbx_open_options.threads); 1: the calling thread
 * only. Handles opened with a read callback always use one thread.
 * Every request gets its own status and error; the call returns TBX_OK when all succeeded,
 * else the first failed request's status with its error copied to *err (may be NULL).
 * With more than one thread the handle's allocator is called from the workers (a custom one
 * must be thread-safe) and on_problem is called under a lock, in no particular order. The
 * handle must not be used by other threads during the call. Memory: each decoder's fixed
 * state (~1.5 MiB) per thread, and zstd windows that together stay within max_decode_window
 * (the handle's decoder budget: a worker whose frame's window does not fit waits for others to
 * finish; results keep request order); no copy of the data. */
TBX_API tbx_status tbx_read_batch(tbx_file *f, tbx_read_req *reqs, size_t n, uint32_t threads,
                                  tbx_error *err);
/* Zero-copy pointer to a dense raw tensor's stored bytes when the file is mapped or in memory.
 * TBX_E_UNSUPPORTED when the handle reads through pread/callback or the data is encoded. With
 * TBX_OPEN_VERIFY_DIGESTS a digest not yet verified is verified first (TBX_E_CHECKSUM).
 * TBX_E_TRUNCATED when the mapped file has shrunk below the tensor's bytes. The pointer stays
 * valid until tbx_close; if the file shrinks later, its bytes past the new end read as zeros
 * (no signal: see "Mapped files that shrink" above) and tbx_check_input reports it. */
TBX_API tbx_status tbx_tensor_map(tbx_file *f, uint64_t i, const void **ptr, size_t *len,
                                  tbx_error *err);
/* Does the handle's input still hold every byte it held when opened? TBX_OK when each file of
 * the handle (every part of a set) is at least as long as when it was opened and no mapped byte
 * of it was found past its end; TBX_E_TRUNCATED naming the file and the byte where it now ends
 * otherwise. One fstat per file. Call it after using bytes of tbx_tensor_map pointers: TBX_OK
 * then means they were the file's (unless the file was truncated and grown again meanwhile, a
 * rewrite in place that no check can see). TBX_OK for memory and callback handles. */
TBX_API tbx_status tbx_check_input(const tbx_file *f, tbx_error *err);
/* Decodes elements [first, first+count) of tensor i to float32 in row-major order (sparse
 * tensors densified, quantized ones dequantized). For block dtypes `first` must be a multiple of
 * the block size and `count` too unless it reaches the end. TBX_E_UNSUPPORTED when the dtype
 * has no f32 decoding; TBX_E_INVALID_ARG when `out` is NULL and count > 0 (checked first).
 * Linear quantization with parameters held by the description (OINF v2) gives
 * (float(code) - zero) * scale in float32 (docs/formats/oinf.md); the stored codes stay
 * readable with tbx_tensor_read / tbx_component_read.
 * Memory: a few MiB of buffers besides `out`. Compressed data goes through the cursors of
 * tbx_component_read_range: reading a tensor in consecutive chunks decodes it once (dense, CSR
 * and quantized_group zTensor tensors; a COO tensor is scanned whole for every call, its
 * entries being in no order). */
TBX_API tbx_status tbx_tensor_read_f32(tbx_file *f, uint64_t i, uint64_t first, uint64_t count,
                                       float *out, tbx_error *err);

/* ---------------------------------------------------------------------------------------------
 * Quantization: how a tensor's stored codes become real values, the same description for every
 * format (GGUF block types, OINF v2 quantization payloads, zTensor quantized_group, ...).
 *
 * A quantized tensor stores integer codes plus the parameters that map them back to reals.
 * tbx_tensor_quant_get describes that mapping; tbx_tensor_read_f32 applies it. The description
 * is owned by the handle (valid until tbx_close) and read-only.
 * ------------------------------------------------------------------------------------------- */
typedef enum tbx_quant_method {
    TBX_QUANT_NONE = 0,    /* not quantized (never returned by tbx_tensor_quant_get) */
    /* A ggml block type (GGUF): codes and scales live together in self-contained blocks of the
     * tensor's dtype (tbx_dtype_info.block_bytes bytes for super_block_size, or block_size when
     * there is no super-block, elements). The exact reconstruction is the type's own (the
     * dtype names it); scale/zero describe what each block carries. */
    TBX_QUANT_GGML = 1,
    /* Linear (affine) quantization with parameters held apart from the codes:
     * value = ((float)code - zero) * scale, zero = 0 when zero.scope is NONE. */
    TBX_QUANT_LINEAR = 2
    /* later versions may add methods: treat an unknown value as "quantized, not understood" */
} tbx_quant_method;

/* Where the scales (or the zero points) of a quantized tensor are and what they cover. */
typedef enum tbx_quant_scope {
    TBX_QSCOPE_NONE = 0,    /* absent (zero points: every zero is 0) */
    TBX_QSCOPE_BLOCK = 1,   /* inside every stored block, next to its codes (ggml); count 0 */
    TBX_QSCOPE_TENSOR = 2,  /* one value for the whole tensor; count 1 */
    TBX_QSCOPE_CHANNEL = 3, /* one value per index of dimension `axis`; count shape[axis] */
    /* one value per group of block_size consecutive elements of a row (the last dimension;
     * rows = the product of the other dimensions; groups restart at each row, the last one of
     * a row may be short); count rows * ceil(cols / block_size), row-major */
    TBX_QSCOPE_GROUP = 4
} tbx_quant_scope;

/* What the quantized values are (formats that record it; MCF's QuantInfo domain). */
typedef enum tbx_quant_domain {
    TBX_QDOMAIN_UNSPECIFIED = 0, /* the format does not say */
    TBX_QDOMAIN_WEIGHTS = 1,     /* weights: symmetric ranges */
    TBX_QDOMAIN_ACTIVATIONS = 2  /* activations: asymmetric ranges with zero points */
} tbx_quant_domain;

/* Scales or zero points of a quantized tensor. */
typedef struct tbx_quant_param {
    tbx_quant_scope scope;
    tbx_dtype dtype;        /* element dtype of the stored values (ggml: f16 for most types);
                             * TBX_DT_INVALID when scope is NONE */
    uint32_t axis;          /* CHANNEL: the dimension (< ndim); 0 otherwise */
    int32_t component;      /* >= 0: the tensor component holding the values (read them with
                             * tbx_component_read / tbx_component_read_range); -1: none */
    uint64_t count;         /* number of values (see tbx_quant_scope); 0 for NONE and BLOCK */
    /* The values themselves when the format keeps them in its header (OINF): `count` elements
     * of `dtype` in native byte order, owned by the handle. NULL when they are in a component
     * or inside the blocks. */
    const void *values;
} tbx_quant_param;

typedef struct tbx_quant_info {
    /* Versioning: the caller sets struct_size = sizeof(tbx_quant_info) before the call. It
     * must be at least the size of this first version (TBX_E_INVALID_ARG otherwise); later
     * versions only append members and fill the ones that fit in struct_size, so a program
     * built against an older header keeps working. On return struct_size is the number of
     * bytes the library filled (a larger caller struct keeps its tail untouched). */
    uint32_t struct_size;
    tbx_quant_method method;
    tbx_dtype code_dtype;   /* dtype of the stored codes: the block type (GGML), the tensor's
                             * element dtype (OINF: i8, u4, ...) or the word dtype the codes are
                             * packed in (zTensor quantized_group: params "codes_per_word") */
    uint32_t bits;          /* bits per code (GGML: the nominal width, e.g. 4 for q4_k, 2 for
                             * iq2_xxs, 2 for tq1_0's ternary digits) */
    uint32_t code_signed;   /* 1: codes are two's complement; 0: unsigned */
    uint64_t block_size;    /* elements sharing one scale (GGML: the (sub-)block, 16 or 32 for
                             * K types; GROUP scope: the group size); 0 when the scale is per
                             * tensor or per channel */
    uint64_t super_block_size; /* elements of a super-block that groups blocks under a common
                             * outer scale (ggml K and i-quant types, MCF k*: 256); 0 when none */
    tbx_quant_param scale;  /* the scales (always present: scope != NONE) */
    tbx_quant_param zero;   /* the zero points / block minimums (scope NONE when symmetric) */
    tbx_quant_domain domain;
    uint32_t has_clip;      /* 1: clip_min/clip_max hold the clipping range the quantizer used */
    double clip_min, clip_max;
    /* Format-specific parameters as typed values: a MAP (never NULL, possibly empty) owned by
     * the handle. GGUF: "ggml_type" (u32, the file's type id), "block_bytes" (u32). OINF:
     * "scheme", "scale_mode", "zp_mode" (u32, the file's codes). zTensor: "codes_per_word"
     * (u32). Keys are documented per format in docs/formats/. */
    const tbx_value *params;
} tbx_quant_info;

/* Lower-case names: "none", "ggml", "linear" / "none", "block", "tensor", "channel", "group" /
 * "unspecified", "weights", "activations"; "?" for unknown values. Static storage. */
TBX_API const char *tbx_quant_method_name(tbx_quant_method m);
TBX_API const char *tbx_quant_scope_name(tbx_quant_scope s);
TBX_API const char *tbx_quant_domain_name(tbx_quant_domain d);

/* Describes how tensor i is quantized. q->struct_size must be set (see tbx_quant_info).
 * TBX_E_NOT_FOUND when the tensor is not quantized (plain dtypes, sparse tensors, OINF tensors
 * without quantization parameters), TBX_E_INVALID_ARG for a bad handle, index or struct_size.
 * Pointers in *q stay valid until tbx_close. */
TBX_API tbx_status tbx_tensor_quant_get(const tbx_file *f, uint64_t i, tbx_quant_info *q);

/* ---------------------------------------------------------------------------------------------
 * Sections (auxiliary named blobs)
 * ------------------------------------------------------------------------------------------- */
typedef struct tbx_section_info {
    uint32_t struct_size;   /* set by the caller (TBX_SECTION_INFO_INIT) */
    const char *name;   /* e.g. "tokenizer.json", "vocab" */
    uint32_t type;      /* format-specific type code, 0 when none */
    uint64_t offset;    /* absolute file offset */
    uint64_t size;      /* bytes */
} tbx_section_info;
#define TBX_SECTION_INFO_INIT { .struct_size = sizeof(tbx_section_info) }

TBX_API uint64_t tbx_section_count(const tbx_file *f);
TBX_API tbx_status tbx_section_info_get(const tbx_file *f, uint64_t i, tbx_section_info *info);
/* Reads section i's bytes; size query as tbx_component_read. */
TBX_API tbx_status tbx_section_read(tbx_file *f, uint64_t i, void *buf, size_t cap,
                                    size_t *needed, tbx_error *err);

/* ---------------------------------------------------------------------------------------------
 * The description of a file: the document `tbx info --json` prints and Python's info() returns
 * (schema in docs/cli.md), built by the library for every front end.
 * ------------------------------------------------------------------------------------------- */
/* The document is a JSON-like object whose members come in order: "format", "version", "files"
 * (a set opened as one handle), "sizevars" (formats with size variables), "metadata",
 * "tensors", "sections" (when there are some), then the format's own member, if any (EMBD
 * "embd", MCF "mcf_directory"). It is handed to a callback piece by piece, never built whole,
 * so that describing a file of a million tensors holds one tensor's description at a time:
 *   TBX_DESCRIBE_MEMBER  a member, whole: key and value;
 *   TBX_DESCRIBE_BEGIN   a member that comes item by item (files, sizevars, metadata, tensors,
 *                        sections, a format's table): key, container TBX_V_MAP or TBX_V_ARRAY;
 *   TBX_DESCRIBE_ITEM    one item of it: value, and key when the container is a MAP;
 *   TBX_DESCRIBE_END     the member is complete (key and container as at BEGIN).
 * Values are borrowed for the call only (do not free or keep them; tbx_value_clone to keep
 * one). Metadata values are the handle's own; with TBX_DESCRIBE_TYPES each becomes
 * {"type", "elem" (arrays) | "dtype", "shape" (ndarrays), "value"}, and so do tensors'
 * quant.params. Numbers of the document's own are u64 (integers), f64 (clip) and packed
 * f32 / i32 arrays (quant scale / zero "values"); its own lists (shape, components, clip) are
 * arrays with no declared element type. */
typedef enum tbx_describe_event {
    TBX_DESCRIBE_MEMBER = 0,
    TBX_DESCRIBE_BEGIN = 1,
    TBX_DESCRIBE_ITEM = 2,
    TBX_DESCRIBE_END = 3
} tbx_describe_event;

typedef struct tbx_describe_part {
    tbx_describe_event event;
    tbx_value_type container;  /* BEGIN, ITEM, END: TBX_V_MAP or TBX_V_ARRAY */
    const char *key;           /* MEMBER, BEGIN, END: the member's key; ITEM of a MAP: the
                                * item's key (bytes, NUL-terminated); NULL otherwise */
    size_t key_len;
    const tbx_value *value;    /* MEMBER, ITEM: the value; NULL otherwise */
} tbx_describe_part;

/* Returns TBX_OK to go on; any other status stops the description, and tbx_file_describe
 * returns it. */
typedef tbx_status (*tbx_describe_fn)(void *ud, const tbx_describe_part *part);

#define TBX_DESCRIBE_TYPES 0x1u /* metadata values and quant.params with their types */

/* Describes an open file to `fn` (see above). TBX_E_INVALID_ARG for a NULL handle or callback
 * or an unknown flag, TBX_E_NOMEM, or the status fn stopped it with. The pieces depend only
 * on the file (the same for every thread count, every open). */
TBX_API tbx_status tbx_file_describe(const tbx_file *f, uint32_t flags, tbx_describe_fn fn,
                                     void *ud, tbx_error *err);
/* Tensor i's object of that description alone (one TBX_DESCRIBE_ITEM piece, container
 * TBX_V_ARRAY), as tbx_file_describe gives it: TBX_E_INVALID_ARG for an index out of range. */
TBX_API tbx_status tbx_tensor_describe(const tbx_file *f, uint64_t i, uint32_t flags,
                                       tbx_describe_fn fn, void *ud, tbx_error *err);

/* ---------------------------------------------------------------------------------------------
 * Writing
 * ------------------------------------------------------------------------------------------- */
typedef struct tbx_writer tbx_writer;

#define TBX_WRITE_OVERWRITE 0x01u /* replace an existing output file (never an open input) */
/* Formats that store a tensor whose dtype, shape and bytes equal an earlier one's only once
 * (MCF, as mantle's pack --dedup) give every tensor its own payload (pack --dedup=false). */
#define TBX_WRITE_NO_DEDUP  0x02u
/* Skip the fsyncs (of the file before the rename, of its directory after) and the early
 * writeback: the bytes reach the disk whenever the kernel writes them back, as for `cp`. The
 * rename stays atomic for readers, but after a crash or power loss the file may be missing,
 * empty or partly written; for scratch outputs that can be made again. */
#define TBX_WRITE_NO_SYNC   0x04u
/* Any other bit in tbx_write_options.flags is refused with TBX_E_INVALID_ARG. */

/* A write option of a format's own (tbx_write_options.options), as its driver declares it. */
typedef struct tbx_format_option {
    const char *key;         /* e.g. "dedup" */
    tbx_value_type type;     /* TBX_V_BOOL; TBX_V_U64: an integer (of any integer value type)
                              * in [min, max]; TBX_V_F64: a finite number (of any integer or
                              * float value type); TBX_V_STRING: one of `choices` */
    uint64_t min, max;       /* TBX_V_U64 */
    const char *choices;     /* TBX_V_STRING: the values, space-separated */
    const char *help;        /* one line for people, with the default */
} tbx_format_option;

/* Write option i (from 0) of `format`, NULL past the last one (and for a format without any,
 * or no writer). Static storage. */
TBX_API const tbx_format_option *tbx_format_option_at(tbx_format format, size_t i);

typedef struct tbx_write_options {
    uint32_t struct_size;            /* sizeof(tbx_write_options) */
    tbx_format format;               /* 0: from the output path's extension */
    uint32_t flags;                  /* TBX_WRITE_* */
    const tbx_allocator *allocator;  /* NULL: malloc */
    uint32_t alignment;              /* tensor data alignment; 0: the format's default */
    int compress_level;              /* zstd level for formats that compress; 0: store raw */
    const char *digest;              /* "sha256", "crc32c" or NULL (formats with digests) */
    uint32_t version;                /* format version to write; 0: the default */
    /* Compressing writers (zTensor with compress_level > 0) compress and hash distinct tensors
     * on worker threads: 0: env TBX_THREADS, else the online CPUs, at most 8; 1: none. The
     * bytes written do not depend on it. */
    uint32_t threads;
    /* The most tensor bytes such a writer holds in memory for its workers at once; 0: 1 GiB.
     * A dense tensor of more than min(buffer_limit / (threads + 1), 32 MiB) bytes is not held:
     * it is compressed as a stream on the calling thread (256 KiB of buffer plus zstd's window
     * state, whatever its size). Memory is about twice the bytes held. The bytes written do
     * not depend on it. */
    uint64_t buffer_limit;
    /* Options of the output format's own, by name: a MAP value (read during tbx_writer_open,
     * which keeps a copy; NULL: none), each key one the format declares (tbx_format_option_at),
     * e.g. MCF {"dedup": false}. The writer's open refuses, naming the key
     * ("options.KEY"), a key the format does not declare and a value of another type or out of
     * its range (TBX_E_INVALID_ARG), before anything is written; so does tbx_writer_check. */
    const tbx_value *options;
} tbx_write_options;

TBX_API void tbx_write_options_init(tbx_write_options *opt);

/* Describes one tensor to write. */
typedef struct tbx_tensor_desc {
    uint32_t struct_size;    /* sizeof(tbx_tensor_desc) (TBX_TENSOR_DESC_INIT); 0: this version */
    const char *name;
    size_t name_len;         /* 0: strlen(name) */
    tbx_dtype dtype;
    uint32_t ndim;
    const uint64_t *shape;   /* row-major */
    int has_data;            /* 0: a tensor without data (formats that allow it) */
} tbx_tensor_desc;
#define TBX_TENSOR_DESC_INIT { .struct_size = sizeof(tbx_tensor_desc) }

/* Creates a writer for `path`. Fails with TBX_E_EXISTS when the path exists (unless
 * TBX_WRITE_OVERWRITE) or is a file open for reading through this library. */
TBX_API tbx_status tbx_writer_open(tbx_writer **out, const char *path,
                                   const tbx_write_options *opt, tbx_error *err);
/* Checks, before any work, that tbx_writer_open(path, opt) would succeed now: the format and
 * options, the destination rules (an existing file needs TBX_WRITE_OVERWRITE; never an input,
 * a directory, FIFO or device) and that a temporary file can be created in the destination's
 * directory (one is created and removed at once: nothing is left behind). The status and
 * message are tbx_writer_open's. tbx_convert, tbx_gguf_split, tbx_gguf_merge and
 * tbx_gguf_from_hf call it first, so a directory that does not exist fails in milliseconds,
 * not after the work; a caller that opens a big input first should call it before. */
TBX_API tbx_status tbx_writer_check(const char *path, const tbx_write_options *opt,
                                    tbx_error *err);
/* Adds a metadata entry (the value is copied). TBX_E_DUPLICATE for a repeated key;
 * TBX_E_UNSUPPORTED / TBX_E_LOSSY when the format cannot store the value's type. */
TBX_API tbx_status tbx_writer_add_meta(tbx_writer *w, const char *key, size_t key_len,
                                       const tbx_value *value, tbx_error *err);
/* Adds an auxiliary section (bytes copied). TBX_E_UNSUPPORTED for formats without sections. */
TBX_API tbx_status tbx_writer_add_section(tbx_writer *w, const char *name, uint32_t type,
                                          const void *data, size_t len, tbx_error *err);
/* Adds a size variable (OINF). TBX_E_UNSUPPORTED for formats without size variables,
 * TBX_E_DUPLICATE for a repeated name, TBX_E_FORMAT for a name the format cannot store. */
TBX_API tbx_status tbx_writer_add_sizevar(tbx_writer *w, const char *name, uint64_t value,
                                          tbx_error *err);
/* Declares a tensor; *index (may be NULL) gets its index for tbx_writer_write_tensor. All
 * tensors are declared before any tensor data is written. The writer keeps 40 bytes per tensor
 * and refuses (TBX_E_LIMIT) names of 4 GiB or more and more than 65535 dimensions. */
TBX_API tbx_status tbx_writer_add_tensor(tbx_writer *w, const tbx_tensor_desc *desc,
                                         uint64_t *index, tbx_error *err);
/* Declares a quantized tensor: tbx_writer_add_tensor plus how its stored codes map to reals
 * (see "Quantization"; quant NULL: the same as tbx_writer_add_tensor). The description and
 * everything it points to (values, params) are copied; it is checked first (struct_size,
 * method, scopes and counts against the shape: TBX_E_INVALID_ARG naming the member).
 * The tensor's bytes are what tbx_component_read gives for each of its components, one after
 * the other: the stored codes for TBX_QUANT_GGML (desc->dtype the block type) and for
 * TBX_QUANT_LINEAR with the scales and zero points in `values` (desc->dtype the codes' dtype,
 * quant->code_dtype); codes, scales and zero points for a description whose parameters are in
 * components (`component` >= 0: zTensor quantized_group). A format stores the description
 * exactly or refuses the tensor, never drops it: TBX_QUANT_GGML wherever the block type is
 * stored (the type is the description); TBX_QUANT_LINEAR where the format's writer takes it
 * (this release: OINF version 2, scopes TENSOR or CHANNEL with f32 scales and i32 zero points
 * in `values`; zTensor, GROUP scope with scales and zeros in components 1 and 2 as
 * quantized_group; docs/formats/); a domain or clip range the format cannot record is
 * TBX_E_LOSSY, anything else it cannot hold TBX_E_UNSUPPORTED, naming the tensor and the
 * member. On any failure nothing is declared. */
TBX_API tbx_status tbx_writer_add_quant_tensor(tbx_writer *w, const tbx_tensor_desc *desc,
                                               const tbx_quant_info *quant, uint64_t *index,
                                               tbx_error *err);
/* Appends `len` bytes of stored data to tensor `index`. Tensors are written one at a time, in
 * any order: starting another tensor requires the current one to be complete. Writing more bytes
 * than the tensor's size is TBX_E_RANGE. */
TBX_API tbx_status tbx_writer_write_tensor(tbx_writer *w, uint64_t index, const void *data,
                                           size_t len, tbx_error *err);
/* Checks that every tensor received exactly its size, writes the file and renames it over the
 * output path. The writer is freed whatever the result (do not finish or abort it again); on
 * failure no output file is left. */
TBX_API tbx_status tbx_writer_finish(tbx_writer *w, tbx_error *err);
/* Abandons a writer, removing its temporary file, and frees it; accepts NULL. Not after
 * tbx_writer_finish, which has freed the writer already. */
TBX_API void tbx_writer_abort(tbx_writer *w);
/* Removes (unlinks) the temporary file of every writer of this process that has not finished:
 * async-signal-safe, for a handler of SIGINT/SIGTERM/SIGHUP that then ends the process (as the
 * tbx tool does). The writers themselves are left as they are: a later tbx_writer_finish on one
 * fails. The names of at most 32 concurrent writers (paths under 4096 bytes) are tracked; any
 * other temporary file is removed as stale by the next write to its output. */
TBX_API void tbx_remove_temp_files(void);

/* ---------------------------------------------------------------------------------------------
 * Conversion
 * ------------------------------------------------------------------------------------------- */
#define TBX_CONVERT_STRINGIFY_META 0x01u /* store metadata the target cannot type as strings */
#define TBX_CONVERT_DROP_META      0x02u /* drop metadata the target cannot store */
#define TBX_CONVERT_DROP_SECTIONS  0x04u /* drop sections the target cannot store */
/* dequantize every quantized tensor: written as f32 (cast_to when set), without its
 * quantization (see tbx_convert) */
#define TBX_CONVERT_DEQUANTIZE     0x08u
/* 0x10u and 0x20u were TBX_CONVERT_QUANT_MANTLE and TBX_CONVERT_QUANT_CLIP: MCF's quantization
 * method and clip range are now MCF's write options quant_method and quant_clip_min /
 * quant_clip_max (tbx_write_options.options; see tbx_convert). tbx_convert refuses both bits
 * (TBX_E_INVALID_ARG naming those options); they are not reused. */
/* a Hugging Face model to GGUF, EMBD or MCF: leave out the model import (no llama.cpp
 * architecture, tokenizer and names; no EMBD names, vocabulary and header values; no MCF
 * ModelInfo from config.json): tensors, metadata and sections as they are, each target then
 * storing or refusing them as any input's. Refused (TBX_E_INVALID_ARG, field "raw") by a
 * conversion that has no import to leave out. */
#define TBX_CONVERT_RAW            0x40u
/* leave out the tensors the input lists but cannot read (TBX_TENSOR_UNREADABLE); without it
 * such a tensor fails the conversion, naming it, before anything is written */
#define TBX_CONVERT_DROP_UNREADABLE 0x80u
/* quant_to set: a quantized tensor it applies to (2-D) that is of another type is decoded and
 * its values quantized again (llama-quantize's --allow-requantize: the errors add up). Without
 * it such a tensor fails the conversion (TBX_E_LOSSY naming it and its type). Without quant_to
 * it would apply to nothing: refused (TBX_E_INVALID_ARG). */
#define TBX_CONVERT_REQUANTIZE     0x100u
/* A tensor whose converted values carry a warning (tbx_convert_report.warnings: values beyond
 * the output type's range, Inf/NaN made of finite inputs) fails the conversion with
 * TBX_E_LOSSY naming it, instead of being written with the warning. */
#define TBX_CONVERT_STRICT         0x200u
/* Any other bit in tbx_convert_options.flags is refused with TBX_E_INVALID_ARG. */


/* What tbx_convert did with one tensor (tbx_convert_report.action). */
typedef enum tbx_convert_action {
    TBX_CONVERT_KEPT = 0,        /* written as it was: the same dtype and values (a quantized
                                  * tensor keeps its quantization and stored bytes) */
    TBX_CONVERT_CAST = 1,        /* a float tensor converted to another float dtype (cast_to) */
    TBX_CONVERT_QUANTIZED = 2,   /* a float tensor quantized to quant_to */
    TBX_CONVERT_FALLBACK = 3,    /* a float tensor quantized to another block type, or cast to f16,
                                  * because its rows cannot take quant_to (llama-quantize's
                                  * fallback; the reason says why) */
    TBX_CONVERT_DEQUANTIZED = 4, /* a quantized tensor decoded to f32, or to cast_to */
    TBX_CONVERT_REQUANTIZED = 5  /* a quantized tensor decoded and quantized again to quant_to (or
                                  * its fallback): TBX_CONVERT_REQUANTIZE */
} tbx_convert_action;

/* tbx_convert_report.warnings */
#define TBX_CONVERT_WARN_NONFINITE 0x1u /* finite input values came out as Inf or NaN (a scale that
                                         * overflowed, a cast beyond f16's range) */
#define TBX_CONVERT_WARN_RANGE     0x2u /* finite input values beyond the largest magnitude the
                                         * output type can represent (`range`): no finite scale
                                         * of its type (an f16) reaches them; they get what the
                                         * reference quantizer (ggml, mantle) gives them */

/* One tensor of a conversion, as the conversion decided and did it: the same record whether the
 * values were copied, cast, quantized or decoded, so a caller can tell what happened without
 * opening the output. Pointers are valid during the call only. */
typedef struct tbx_convert_report {
    uint32_t struct_size;      /* sizeof(tbx_convert_report) of the library: fields past a
                                * caller's own struct are newer ones */
    uint64_t tensor;           /* its index in the input (in the output too, unless tensors
                                * were left out: TBX_CONVERT_DROP_UNREADABLE, a Hugging Face
                                * directory's buffers to EMBD; Hugging Face -> GGUF: the
                                * output's, see tensorbox/gguf.h) */
    const char *name;          /* its name (NUL-terminated; the output's) */
    tbx_dtype from, to;        /* its dtype in the input, in the output */
    tbx_convert_action action;
    const char *reason;        /* why this action, a phrase for people ("requested type", "1-D",
                                * "rows of 384 values are not a multiple of q4_k's block of 256",
                                * "already q8_0", ...); "" when nothing was asked of the tensor */
    uint32_t warnings;         /* TBX_CONVERT_WARN_* */
    uint64_t nvalues;          /* values decoded and re-encoded (0 when written as it was) */
    uint64_t nonfinite;        /* finite inputs that came out Inf or NaN */
    uint64_t beyond;           /* finite inputs of magnitude above `range` */
    double range;              /* the largest magnitude `to` represents (INFINITY: no bound) */
    double max_abs;            /* the largest finite |input| among the nvalues */
    /* A ggml K type quantized with tensorbox's own search (GGUF's write option
     * quant_method=search): the RMSE of what was written, and of ggml's reference algorithm
     * (ggml_quantize_chunk's bytes, the default) on the same values, sqrt(sum over the finite
     * inputs of (decoded - input)^2 / nvalues). NAN otherwise (nothing measured). */
    double rmse, rmse_ggml;
    /* A dry run (TBX_PRESET_DRY_RUN: nothing is written): the bytes of the tensor's values in
     * the input (its sources') and in the output's dtype (an MCF family: its whole payload).
     * 0 in a conversion that writes. */
    uint64_t size_in, size_out;
} tbx_convert_report;

typedef void (*tbx_convert_report_fn)(void *ud, const tbx_convert_report *r);

typedef struct tbx_convert_options {
    uint32_t struct_size;            /* sizeof(tbx_convert_options) */
    tbx_write_options write;         /* output format and writer options */
    uint32_t flags;                  /* TBX_CONVERT_* (each one is an explicitly lossy step) */
    tbx_dtype cast_to;               /* TBX_DT_INVALID: keep dtypes (lossless); else a dtype
                                        tbx_dtype_castable accepts */
    tbx_progress_fn progress;        /* may be NULL */
    void *progress_ud;
    tbx_dtype quant_to; /* TBX_DT_INVALID: none; else quantize eligible 2-D float tensors (lossy, explicit) */
    /* Called (may be NULL; with progress_ud) after each tensor quantized to an MCF family: its
     * index, its number of values and the sum of the squared differences between the decoded
     * payload and the input values (finite ones; summed in f64, the same for any thread
     * count). RMSE = sqrt(sse / nvalues). */
    void (*on_quant)(void *ud, uint64_t tensor, uint64_t nvalues, double sse);
    /* Reserved, must be 0 (TBX_E_INVALID_ARG otherwise): once quant_clip_min / quant_clip_max,
     * now MCF's write options quant_clip_min / quant_clip_max (write.options). */
    float reserved1[2];
    /* Metadata to set on the output (tbx convert --meta), or NULL: a MAP value (borrowed for the
     * call) whose entries are added after the input's, typed as they are; an input entry with
     * the same key is left out (the given value replaces it). The writer checks each as it
     * checks any metadata (a type the target cannot store: TBX_E_LOSSY naming the key; no
     * stringify or drop applies to them). Not a MAP: TBX_E_INVALID_ARG. Refused
     * (TBX_E_UNSUPPORTED) for the Hugging Face -> GGUF conversion (use tbx_gguf_set_meta). */
    const tbx_value *meta;
    /* Called (may be NULL; with progress_ud) once per output tensor, in order, after its bytes
     * went to the writer: what was done to it and why (tbx_convert_report). The record comes
     * from the step that decided and converted the tensor, never from reading the output back.
     * Under TBX_CONVERT_STRICT a tensor with warnings is reported, then fails the conversion. */
    tbx_convert_report_fn on_tensor;

    /* ---- llama-quantize's presets and per-tensor rules (issue 21; tbx convert --quant
     * PRESET, --pure, --tensor-type, --output-tensor-type, --token-embedding-type, --dry-run)
     * ---- quant_preset: NULL, or one of llama-quantize's type names (case-insensitive: Q4_0,
     * Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q2_K_S, Q3_K_S/M/L, Q4_K_S/M, Q5_K_S/M, Q6_K, IQ2_XXS,
     * IQ2_XS, IQ2_S, IQ2_M, IQ3_XXS, IQ3_XS, IQ3_S, IQ3_M, IQ1_S, IQ1_M, IQ4_NL, IQ4_XS, TQ1_0,
     * TQ2_0, Q1_0, Q2_0, MXFP4_MOE, F16, BF16, F32, COPY; aliases Q3_K, Q4_K, Q5_K for the _M
     * mixes), with quant_to TBX_DT_INVALID. For a GGUF input whose general.architecture is
     * one llama.cpp knows (llama, qwen2, bert, ...) and a GGUF output, or a Hugging Face
     * directory to GGUF, each tensor gets the type llama.cpp's llama_model_quantize gives it
     * under that preset (its mix by tensor role and
     * layer position, the fallback for rows a type's block does not divide, 1-D tensors, norms
     * and the like kept), and the output is the file llama_model_quantize writes: tensors in
     * its order (blk.N by N, then by name), metadata in the input's order with
     * general.quantization_version and general.file_type (the preset's) last, split keys
     * dropped. A tensor already quantized to another type needs TBX_CONVERT_REQUANTIZE; a type
     * llama.cpp refuses without an importance matrix (IQ1/IQ2 types, IQ3_XXS, Q2_K of Q2_K_S)
     * fails with TBX_E_UNSUPPORTED. Any other input (no such architecture): a name that spells a
     * ggml type (Q8_0, Q4_K, IQ2_S, ...: that type, not the preset's bulk type) quantizes every
     * 2-D float tensor to it as quant_to does (iq2_xxs, iq2_xs, iq1_s only with `imatrix`); a
     * mix (Q4_K_M, ...) is refused (TBX_E_INVALID_ARG). A Hugging Face directory to MCF: each
     * tensor stored in MCF's family of the type llama.cpp gives it (q8_0 mcf_q8, q4_0 mcf_q4,
     * q6_K/q4_K/q3_K/q2_K mcf_k6/_k4/_k3/_k2, the preset's own type where llama.cpp falls back;
     * f32/f16/bf16 kept or cast), a type without one refused (TBX_E_UNSUPPORTED naming the
     * tensor); docs/formats/mcf.md. */
    const char *quant_preset;
    uint32_t preset_flags;          /* TBX_PRESET_* */
    tbx_dtype output_tensor_type;   /* TBX_DT_INVALID: the preset's; else output.weight's type */
    tbx_dtype token_embedding_type; /* TBX_DT_INVALID: the preset's; else token_embd.weight's */
    /* --tensor-type PATTERN=TYPE rules (n_tensor_types of them; first match wins): a tensor
     * whose name the pattern matches anywhere (llama-quantize's std::regex_search, ECMAScript;
     * tensorbox compiles it as a POSIX extended expression with \d \w \s understood, and
     * lower-cases it as llama-quantize does) gets TYPE instead of the mix's, with the
     * fallback. Only with quant_preset. */
    const struct tbx_tensor_type_rule *tensor_types;
    size_t n_tensor_types;

    /* ---- importance matrix (llama-quantize's --imatrix) ---------------------------------- */
    /* NULL, or the path of an importance matrix as llama.cpp's llama-imatrix writes it, either
     * form: GGUF (NAME.in_sum2 + NAME.counts tensors, imatrix.* keys) or the legacy .dat
     * (docs/formats/imatrix.md). Only with quant_to a ggml block type (else TBX_E_INVALID_ARG,
     * "imatrix"). Read with the input's limits and allocator before anything is written; each
     * tensor's vector is what llama-quantize computes from the file (GGUF: sums / counts per
     * expert, 1 where a count is 0; .dat: values / ncall); a non-finite value, a file of no
     * entry or a malformed one fails the conversion (TBX_E_FORMAT / _TRUNCATED / _LIMIT naming
     * the field and byte offset, "importance matrix PATH" appended). Each tensor quantized to a
     * ggml block type is quantized in whole rows with the vector of its output name
     * (ggml_quantize_chunk(type, rows, ..., vector) of llama.cpp's libggml, experts of a 3-D
     * tensor with their own slice): its length must be the tensor's columns times its experts,
     * else TBX_E_INVALID_ARG naming the tensor and both sizes (token_embd.weight and
     * per_layer_token_embd.weight: quantized without it, as llama-quantize does). A tensor the
     * matrix has no entry for is quantized without one (its report's reason says "without an
     * importance matrix"), unless its type needs one (TBX_E_UNSUPPORTED naming it). GGUF's
     * quant_method=search with a matrix is refused (the search uses none). The output records,
     * after the input's metadata and as llama-quantize does, quantize.imatrix.file (the path as
     * given, at most 127 bytes), quantize.imatrix.dataset (the first dataset, when the file
     * names one), quantize.imatrix.entries_count (u32) and quantize.imatrix.chunks_count (u32,
     * when positive); a key given in `meta` keeps the caller's value. Applies to the Hugging
     * Face -> GGUF conversion made by tbx_convert too. */
    const char *imatrix;

    /* ---- sharded output (tbx convert --max-shard-size; issue 24) ------------------------- */
    /* 0: one output file. Else the output is cut into files of at most this many tensor bytes
     * (a tensor larger than that alone in its file), as the format's own tools lay them out:
     *   - safetensors: as huggingface_hub's split_torch_state_dict_into_shards packs a state
     *     dict (tensors in order; one larger than the limit goes alone into a shard of its own
     *     at once; the shard being filled is closed when the next tensor would take it past the
     *     limit; sizes are the output's tensor bytes). One shard: OUT itself, as without the
     *     option. More: STEM-0000I-of-0000N.safetensors beside OUT (STEM: OUT without
     *     ".safetensors") and OUT.index.json = {"metadata": {"total_size": bytes},
     *     "weight_map": {tensor: shard file}} (keys sorted); each shard has the metadata.
     *   - GGUF: a split set as llama.cpp's gguf-split --split-max-size writes one (consecutive
     *     tensors, a new file when the next tensor, padded to 32 bytes, would pass the limit):
     *     STEM-0000I-of-0000N.gguf, the first with the metadata, each with split.no (u16),
     *     split.count (u16) and split.tensors.count (i32) last; one file: STEM-00001-of-00001.gguf
     *     as gguf-split names it. llama.cpp loads the set from the first file.
     * Every file is written under a temporary name first and all are renamed into place only
     * when all were written (the index, or GGUF's first file, last): a failure leaves none.
     * Other formats, TBX_PRESET_KEEP_SPLIT and the Hugging Face -> GGUF conversion:
     * TBX_E_INVALID_ARG / TBX_E_UNSUPPORTED. */
    uint64_t max_shard_size;
} tbx_convert_options;

/* A --tensor-type rule (tbx_convert_options.tensor_types). */
typedef struct tbx_tensor_type_rule {
    const char *pattern;
    tbx_dtype type;
} tbx_tensor_type_rule;

/* tbx_convert_options.preset_flags */
#define TBX_PRESET_PURE    0x1u /* every quantized tensor gets the preset's default type
                                   (llama-quantize --pure), fallback and overrides apply */
#define TBX_PRESET_KEEP_SPLIT 0x4u /* a GGUF split set in: as many files out (llama-quantize
                                   --keep-split): OUT without ".gguf", "-0000I-of-0000N.gguf"
                                   appended; each shard's tensors in the input's order (the
                                   mix's counters follow it), the first shard with the
                                   metadata, the others with the split keys only */
#define TBX_PRESET_DRY_RUN 0x2u /* decide every tensor and report it (on_tensor: action,
                                   dtypes, reason, size_in / size_out), write nothing: no
                                   output file */
#define TBX_PRESET_LEAVE_OUTPUT 0x8u /* output.weight keeps its type (llama-quantize
                                   --leave-output-tensor) */

TBX_API void tbx_convert_options_init(tbx_convert_options *opt);

/* Checks, before any input is opened, what tbx_convert would refuse of `opt` and `out_path`
 * without looking at the input: the flags (an unknown or former bit), reserved fields, cast_to,
 * quant_to, meta, write options that apply to a quant_to not asked for (MCF's quant_method,
 * quant_clip_min / quant_clip_max without quant_to one of MCF's families), then
 * tbx_writer_check (the output's destination, the format's write options and their ranges).
 * The status and message are tbx_convert's. tbx_convert calls it first; `tbx convert` and the
 * Python package call it before they open the input. */
TBX_API tbx_status tbx_convert_check(const char *out_path, const tbx_convert_options *opt,
                                     tbx_error *err);

/* Writes every metadata entry, section and tensor of `in` to a new file at `out_path`, streaming
 * tensor bytes in bounded chunks (values decoded and encoded on worker threads: TBX_THREADS,
 * else the online CPUs, at most 8; the bytes never depend on it). The output format is
 * opt->write.format, else the one out_path's extension names. Lossless unless an option allows
 * a lossy step: a dtype or
 * metadata type the target cannot store fails with TBX_E_LOSSY / TBX_E_UNSUPPORTED naming it.
 * The options and the output are checked first (tbx_convert_check): an output that cannot be
 * created fails before any work. What becomes of each tensor is decided before anything is
 * written, and reported once its bytes are written (on_tensor: tbx_convert_report).
 *
 * cast_to (explicit, lossy): a dtype tbx_dtype_castable accepts (f32, f16, bf16, f64). Every
 * float tensor is converted to it (an integer tensor is kept), a quantized one decoded to f32
 * and then converted. A GGUF output
 * keeps 1-D tensors as they are (llama.cpp computes norms and biases in f32; llama.cpp's own
 * MOSTLY_F16 does the same).
 *
 * quant_to (explicit, lossy): a ggml block type with a quantizer (q8_0, q4_0, q4_1, q5_0, q5_1,
 * q2_k .. q6_k, iq4_nl, iq4_xs, tq1_0, tq2_0, mxfp4, nvfp4, q1_0, q2_0, iq2_s, iq3_xxs, iq3_s,
 * iq1_m; else TBX_E_UNSUPPORTED;
 * iq2_xxs, iq2_xs and iq1_s, which ggml quantizes only with an importance matrix, are refused
 * with TBX_E_UNSUPPORTED before anything is written). A tensor is quantized when it is
 * dense, 2-D ([rows, cols] row-major) and of dtype f32, f16, bf16 or f64; its rows are decoded
 * to f32 and quantized row by row, streamed in chunks of whole rows. When cols is not a multiple
 * of the type's block size the tensor gets llama-quantize's fallback type instead (q4_K -> q5_0,
 * q5_K -> q5_1, q6_K -> q8_0, q2_K/q3_K -> q4_0, and f16 when that does not fit either; see
 * tbx_gguf_quant_fallback in tensorbox/gguf.h). Every other tensor is written as cast_to says
 * (or unchanged). The target format must store the block types (GGUF does). A 2-D tensor
 * already quantized to another type fails the conversion (TBX_E_LOSSY naming it and its type,
 * before the output is created) unless TBX_CONVERT_REQUANTIZE (decoded and quantized again) or
 * TBX_CONVERT_DEQUANTIZE; one of the requested type is kept as it is. Every ggml type gets the
 * bytes llama.cpp's ggml_quantize_chunk gives the same rows (no importance matrix; q2_K .. q6_K
 * through a built-in copy of ggml's reference algorithm). GGUF's write option quant_method
 * (write.options; "ggml", the default, or "search") asks with "search" for tensorbox's own
 * K-quant encoder instead (q2_K .. q6_K: other bytes, a lower error; slower, since each tensor
 * is encoded with ggml's algorithm too to measure it): the tensor's report then carries the RMSE
 * of both (tbx_convert_report.rmse, rmse_ggml). "search" with another quant_to, or quant_method
 * without quant_to, is refused (TBX_E_INVALID_ARG naming "options.quant_method"). The Hugging
 * Face -> GGUF conversion (tbx_gguf_from_hf) applies it too.
 *
 * quant_to may also be one of MCF's families (TBX_DT_MCF_Q8 .. _K2, _INT8, _INT4; the target
 * must be MCF): every dense 2-D f32/f16/bf16/f64 tensor with non-zero dimensions is quantized
 * (any row length: the last block of a row is padded), with the clip range [-m, m], m the
 * largest |value| among its finite values, or one range for every tensor given as MCF's write
 * options quant_clip_min and quant_clip_max (write.options: finite numbers within f32's range,
 * both or neither, min <= max; recorded in the file's QuantInfo, weights domain);
 * int8/int4 use one f32 scale m / 127 (m / 7): files tensorbox reads, but mantle's runtime
 * does not load ("unsupported dtype 16/17"; q8 .. k2 load). q/k use the method MCF's write
 * option quant_method names: "best" (the default: nearest f16 scales, codes against the stored
 * scale, sub-scales searched: a lower error) or "mantle" (mantle's `quantize` byte for byte:
 * truncated f16 scales, codes against the unrounded scale); int8/int4 have one method (either
 * name gives the same bytes). Those options given without quant_to one of MCF's families are
 * refused (TBX_E_INVALID_ARG naming "options.KEY"), as is an MCF writer opened with them by
 * tbx_writer_open (it quantizes nothing: refused when its layout is made). Deterministic, the
 * same bytes for any thread count; on_quant reports each tensor's error. NaN inputs count as 0
 * in the default method.
 *
 * Values a quantized type cannot represent (beyond 65504 times its largest code and sub-scale:
 * no finite f16 scale reaches them) get what the reference quantizer gives them: ggml's
 * (an Inf, NaN or zero scale, whatever ggml_quantize_chunk writes) and mantle's (an Inf scale).
 * The tensor's report then carries TBX_CONVERT_WARN_RANGE (and TBX_CONVERT_WARN_NONFINITE for
 * finite values that came out Inf or NaN, also from a cast beyond f16's range); with
 * TBX_CONVERT_STRICT such a tensor fails the conversion (TBX_E_LOSSY naming it).
 *
 * Quantized tensors (tbx_tensor_quant_get succeeds) are declared with their description
 * (tbx_writer_add_quant_tensor) and keep their stored bytes when the target stores the
 * description exactly (a ggml block type in GGUF; OINF v2 parameters in OINF version 2; a
 * zTensor quantized_group in zTensor; an MCF family in MCF).
 * Otherwise the conversion fails with the writer's TBX_E_UNSUPPORTED / TBX_E_LOSSY naming the
 * tensor. With TBX_CONVERT_DEQUANTIZE every quantized tensor is written as f32 (cast_to when
 * set) from tbx_tensor_read_f32, without a description, whatever the target could store. A
 * quantization is never dropped silently.
 *
 * When the conversion changes tensors (a cast, a quantization, ...), an input's
 * "general.file_type" (llama.cpp's LLAMA_FTYPE) is written as the u32 that describes the output:
 * the requested type's with quant_to, else the dtype most tensors of 2+ dimensions have (f32 0,
 * f16 1, q4_0 2, q4_1 3, q8_0 7, ..., bf16 32; 1024 "guessed" for one llama.cpp has none for).
 * Every other metadata entry keeps its type and value.
 *
 * A tensor the input lists but cannot read (TBX_TENSOR_UNREADABLE) fails the conversion before
 * anything is written, with the reader's error naming it (and a count of the others), unless
 * flags has TBX_CONVERT_DROP_UNREADABLE: such tensors are then left out.
 *
 * A GGUF target from an input that carries a "config.json" section (a Hugging Face model
 * directory) is written for llama.cpp by tbx_gguf_from_hf (tensorbox/gguf.h: architecture,
 * hyper-parameters, tokenizer, llama.cpp tensor names; cast_to and quant_to apply to 2-D
 * weights, 1-D tensors become f32; on_tensor and TBX_CONVERT_STRICT as here), unless flags has
 * TBX_CONVERT_RAW (an input with unreadable tensors: TBX_E_UNSUPPORTED, they are not left out
 * there). */
TBX_API tbx_status tbx_convert(tbx_file *in, const char *out_path, const tbx_convert_options *opt,
                               tbx_error *err);

/* ---------------------------------------------------------------------------------------------
 * Comparing two models (tbx diff)
 * ------------------------------------------------------------------------------------------- */
#define TBX_DIFF_MAP_NONE 0u /* tensors pair by name */
/* a Hugging Face directory against a GGUF file (either order) pairs through the architecture's
 * HF -> GGUF name map with its layout changes undone; any other two inputs pair by name */
#define TBX_DIFF_MAP_AUTO 1u

typedef struct tbx_diff_options {
    uint32_t struct_size;   /* sizeof(tbx_diff_options) */
    uint32_t map;           /* TBX_DIFF_MAP_* (default AUTO) */
    /* Tolerances (negative: not given, the default). With either given, the verdict is about
     * tensors only: every compared tensor identical or meeting every bound given (nmse <=
     * tol_nmse, max_abs <= tol_max_abs), none added, removed or not comparable. */
    double tol_nmse;
    double tol_max_abs;
    uint32_t threads;       /* 0: env TBX_THREADS, else the online CPUs (at most 8); 1: none */
    /* Called (may be NULL; with progress_ud) as the tensors' bytes are read: done and total
     * count the stored bytes of both sides' compared tensors (tbx_progress_fn; non-zero
     * cancels with TBX_E_CANCELLED and no report). */
    tbx_progress_fn progress;
    void *progress_ud;
} tbx_diff_options;

TBX_API void tbx_diff_options_init(tbx_diff_options *opt);

/* Compares two open models of any formats and returns the report as a MAP value (*report, to
 * free with tbx_value_free; `tbx diff --json` prints it, Python's tensorbox.diff returns it):
 *   a, b                {path, format, tensors, metadata, sections} of each input
 *   map                 "none", "hf-gguf" or "gguf-hf" (A is the GGUF); architecture (mapped)
 *   metadata            {compared, added [{key, type, value}], removed [...], changed [{key,
 *                       a_type, b_type, a, b, first_difference (arrays)}]}: scalars and strings
 *                       up to 256 bytes as they are, longer values described ("<array<string>
 *                       [32000]>"); not compared across a mapped pair (compared false)
 *   sections            {added, removed, changed}: names (not with a mapped pair)
 *   tensors             {added, removed: [{name, dtype, shape}], skipped (mapped: HF names the
 *                       conversion leaves out), compared: [{name, a_name / b_name (mapped: the
 *                       HF name), sources, transform, a_dtype, b_dtype, a_shape, b_shape,
 *                       elements, identical, max_abs, rmse, nmse, cosine, nonfinite,
 *                       nonfinite_mismatch, within_tolerance}] sorted by nmse, worst first,
 *                       not_compared: [{name, why}] (values counts differ, undecodable dtype)}
 *   layers              per layer number found in the names (null: the others, last):
 *                       {layer, tensors, identical, elements, max_abs, rmse, nmse, cosine, worst}
 *   tolerance, summary  the bounds; counts and the metrics over every compared value
 *   identical, within_tolerance (null without tolerance), differs (the verdict)
 * Values are decoded to f32 (quantized ones dequantized) and compared in double, with A as the
 * reference, over the pairs of finite values: max_abs = max |b - a|, rmse = sqrt(sum (b-a)^2 /
 * n), nmse = sum (b-a)^2 / sum a^2, cosine = sum ab / sqrt(sum a^2 sum b^2) (null when
 * undefined). Streamed in jobs of 2^18 values on `threads` workers in bounded memory; the
 * report does not depend on the thread count. Errors: what reading either input gives (a
 * malformed tensor, a file that shrank), --map auto with a model_type without a name map
 * (TBX_E_UNSUPPORTED) or a GGUF without the head counts it needs (TBX_E_NOT_FOUND). */
TBX_API tbx_status tbx_diff(tbx_file *a, tbx_file *b, const tbx_diff_options *opt,
                            tbx_value **report, tbx_error *err);

#ifdef __cplusplus
}
#endif
#endif /* TENSORBOX_H */
