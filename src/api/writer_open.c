/*
 * writer_open.c - opening a writer for a format (tbx_writer_open, tbx_writer_check): the
 * output format from the options or the path's extension, its driver from the registry. The
 * writer itself (its checks, states and streaming) is src/access/write.c.
 */
#include "api.h"

tbx_status tbx_writer_open_(tbx_writer **out, const char *path, const tbx_write_options *opt,
                           uint32_t internal_flags,
                            tbx_error *err) {
    if (!out || !path)
        return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "path", "NULL argument");
    *out = NULL;
    tbx_write_options o;
    tbx_write_options_init(&o);
    if (opt) {
        /* callers built against an older, shorter struct leave the newer fields at defaults */
        size_t n = tbx_struct_bytes(opt->struct_size, sizeof o);
        memcpy(&o, opt, n);
        o.struct_size = sizeof o;
    }
    tbx_format fmt = o.format ? o.format : tbx_format_from_path(path);
    if (fmt == TBX_FORMAT_UNKNOWN)
        return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "format",
                       "cannot tell the output format of \"%s\" from its extension; name one", path);
    const tbx_driver *drv = tbx_driver_for(fmt);
    if (!drv || !drv->w_layout)
        return tbx_err(err, TBX_E_UNSUPPORTED, TBX_NO_OFFSET, "format",
                       "this build cannot write %s files", tbx_format_name(fmt));
    return tbx_writer_create_(out, drv, path, &o, internal_flags, tbx_drivers, err);
}

tbx_status tbx_writer_open(tbx_writer **out, const char *path, const tbx_write_options *opt,
                           tbx_error *err) {
    const uint32_t known = TBX_WRITE_OVERWRITE | TBX_WRITE_NO_DEDUP | TBX_WRITE_NO_SYNC;
    if (opt && (opt->flags & ~known)) {
        if (out) *out = NULL;
        return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "flags",
                       "unknown write flags 0x%x", (unsigned)(opt->flags & ~known));
    }
    return tbx_writer_open_(out, path, opt, 0, err);
}

tbx_status tbx_writer_check(const char *path, const tbx_write_options *opt, tbx_error *err) {
    tbx_writer *w = NULL;
    tbx_status st = tbx_writer_open(&w, path, opt, err);
    tbx_writer_abort(w); /* removes the temporary file, releases a lock on the destination */
    return st;
}
