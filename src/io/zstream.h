/*
 * zstream.h - zstd streaming decoding of stored bytes of a source (src/io/zstream.c), for any
 * driver whose data is compressed: zstd contexts whose memory comes from a tbx_alloc, the check
 * of a frame header before its window is allocated, the budget of decoder windows one handle
 * shares among its threads, and the decoding cursor over one stored range.
 *
 * Not in io.h: it needs <zstd.h> (the stable API; zstream.c alone uses the advanced one).
 */
#ifndef TBX_ZSTREAM_H
#define TBX_ZSTREAM_H

#include "io.h"

#include <pthread.h>
#include <zstd.h>

/* ------------------------------------------------------------------------------------------ */
/* zstd contexts and frame headers                                                            */
/* ------------------------------------------------------------------------------------------ */
/* zstd contexts whose memory comes from `al` when libzstd offers its advanced API
 * (ZSTD_customMem, ZSTD_create?Ctx_advanced, ZSTD_getFrameProgression: "static linking only",
 * so CMake checks that the libzstd found exports them and then defines TBX_HAVE_ZSTD_ADVANCED).
 * Without it they come from ZSTD_createDCtx/CCtx: zstd's own state (window, tables) then
 * bypasses the caller's tbx_allocator and its counting. NULL when out of memory. Free with
 * ZSTD_freeDCtx/CCtx. */
ZSTD_DCtx *tbx_zstd_dctx_new(const tbx_alloc *al);
ZSTD_CCtx *tbx_zstd_cctx_new(const tbx_alloc *al);
/* Bytes the compressor has produced and consumed in its current frame (ZSTD_getFrameProgression,
 * advanced API too); false (both 0) when libzstd does not offer it. */
bool tbx_zstd_cctx_progress(ZSTD_CCtx *cctx, uint64_t *produced, uint64_t *consumed);
/* The decoding buffer a zstd frame starting with the n bytes at p will allocate (its window,
 * ZSTD_getFrameHeader + ZSTD_decodingBufferSize_min, advanced API): 0 for a skippable frame,
 * a window over max_window (the decoder refuses it) or a header the decoder will reject.
 * Without the advanced API *cost is max_window (every frame is assumed to use the largest
 * window, so decoders under a shared budget run one at a time) and false is returned. */
bool tbx_zstd_frame_cost(const void *p, size_t n, uint64_t max_window, uint64_t *cost);
/* The largest window log a decoder may use: 27 (128 MiB, zstd's default limit), lowered to
 * max_decode_window (tbx_limits), at least 10. */
unsigned tbx_zstd_wlog_max(uint64_t max_decode_window);

/* ------------------------------------------------------------------------------------------ */
/* The window budget of a handle                                                               */
/* ------------------------------------------------------------------------------------------ */
/* A zstd decoder allocates its window (up to 128 MiB) when it reads a frame header, so a small
 * file can ask for many large windows. Before a decoder under a budget starts a frame, its
 * header is read (tbx_zstd_frame_cost) and the window it will allocate is taken from the
 * budget: decoders wait while the windows already running would exceed the cap; one whose
 * window alone exceeds it runs when no other holds any (so a pass always progresses). A waiting
 * thread holds no window of its own (a later, larger frame of the same stream frees its decoder
 * before it waits), so waiting cannot deadlock. */
typedef struct tbx_zbudget {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool init;               /* take and give do nothing on a budget not initialised */
    uint64_t used, cap;
} tbx_zbudget;

/* TBX_E_NOMEM ("decoder budget") when the lock cannot be made. */
tbx_status tbx_zbudget_init(tbx_zbudget *b, uint64_t cap, tbx_error *err);
void tbx_zbudget_free(tbx_zbudget *b);
/* Waits until `cost` more fits (or nothing is held), then holds it. NULL or cost 0: nothing. */
void tbx_zbudget_take(tbx_zbudget *b, uint64_t cost);
void tbx_zbudget_give(tbx_zbudget *b, uint64_t cost);

/* ------------------------------------------------------------------------------------------ */
/* The decoding cursor over one stored range                                                   */
/* ------------------------------------------------------------------------------------------ */
/* What a cursor decodes, and how its errors name it. */
typedef struct tbx_zsrc {
    const tbx_source *src;
    const tbx_alloc *al;     /* the input buffer and zstd's memory */
    uint64_t offset, stored; /* the stored bytes [offset, offset + stored), inside the source */
    bool zstd;               /* false: raw, the stored bytes are the decoded ones */
    uint64_t max_window;     /* tbx_limits.max_decode_window */
    tbx_zbudget *budget;     /* the handle's window budget (NULL: none) */
    /* Errors: source reads name read_field; decoding errors name zfield (raw data that ends
     * early: field) and the byte `offset`, their message starts with the subject that
     * name(ctx, part, ...) writes (e.g. `component "w"/data`). */
    const char *read_field, *field, *zfield;
    void (*name)(const void *ctx, uint32_t part, char *dst, size_t cap);
    const void *ctx;
    uint32_t part;
} tbx_zsrc;

/* Called with every stored byte, in order, as the cursor takes it (digests). */
typedef void (*tbx_zhash_fn)(void *ud, const void *p, size_t n);

/* A cursor yields the decoded bytes of its range in chunks, never more than `bound`: a "bomb"
 * stops at the declared size. Its decoder's window is what the data may need, at least 8 MiB
 * (what compressors use for streams of unknown size up to level 19), at most 128 MiB and
 * max_window: the memory is this window plus ~200 KiB whatever the decoded size (a frame asking
 * for more fails with TBX_E_LIMIT). Mapped stored bytes go to the decoder straight from the
 * mapping, each checked to have still been the file's (tbx_source_check) as it is consumed;
 * others through an input buffer of ZSTD_DStreamInSize() bytes. Read-only for the caller:
 * produced, bound, frame_done, cost, dctx (NULL: raw). */
typedef struct tbx_zstream {
    tbx_zsrc in;
    uint64_t in_off, in_end;  /* stored bytes not yet handed to the decoder */
    uint64_t produced;        /* decoded bytes delivered */
    uint64_t bound;           /* decoded bytes allowed */
    ZSTD_DCtx *dctx;
    uint8_t *ibuf;
    size_t ibuf_cap;
    ZSTD_inBuffer zin;
    bool frame_done;
    tbx_zhash_fn hash;        /* when set, every stored byte is hashed */
    void *hash_ud;
    unsigned wlog;            /* the decoder's windowLogMax */
    uint64_t cost;            /* window bytes the current frame makes zstd allocate */
    bool admit;               /* cost taken from the budget (else: the caller accounts for it) */
} tbx_zstream;

/* Opens a cursor over `in` (copied) yielding at most `bound` decoded bytes. admit: the decoder's
 * window is taken from in->budget (tbx_zbudget_take; may wait for other threads' decoders to
 * finish); else the caller accounts for r->cost (e.g. by keeping cursors under the cap). On
 * failure nothing is held. */
tbx_status tbx_zstream_open(tbx_zstream *r, const tbx_zsrc *in, uint64_t bound, bool admit,
                            tbx_zhash_fn hash, void *hash_ud, tbx_error *err);
/* Frees the decoder and buffers and gives back the window; accepts a closed cursor. */
void tbx_zstream_close(tbx_zstream *r);
/* Up to cap decoded bytes (never past the bound); *got < cap only at the end of the data. */
tbx_status tbx_zstream_read(tbx_zstream *r, void *out, size_t cap, size_t *got, tbx_error *err);
/* Exactly n decoded bytes into out (NULL: through a scratch buffer, dropped); shorter data is an
 * error naming both sizes. */
tbx_status tbx_zstream_full(tbx_zstream *r, uint8_t *out, uint64_t n, tbx_error *err);
/* After the bound was reached: no more decoded bytes, all input consumed, the frame complete;
 * otherwise the data is invalid. */
tbx_status tbx_zstream_finish(tbx_zstream *r, tbx_error *err);
/* A raw cursor moves n bytes forward without reading them (n <= bound - produced). */
static inline void tbx_zstream_skip_raw(tbx_zstream *r, uint64_t n) {
    r->in_off += n;
    r->produced += n;
}

#endif /* TBX_ZSTREAM_H */
