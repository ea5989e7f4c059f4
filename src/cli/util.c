/*
 * util.c - messages, opening files and writing to stdout for the tbx tool.
 *
 * Every error goes to stderr as one line "tbx: <message>". Library errors use the message the
 * library built (which names the field, the value and the byte offset), prefixed with the path
 * when the message does not already name it. Writing to stdout treats a reader that went away
 * (EPIPE; SIGPIPE is ignored by main) as a quiet failure: exit status 1, no message.
 */
#define _GNU_SOURCE
#include "cli.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Writes "tbx: <message>" and a newline to stderr. The message stays one line: control bytes
 * (a tensor name given on the command line may hold any, e.g. ESC) are written as \xNN, as the
 * library escapes names in its own messages. */
static void vmessage(const char *fmt, va_list ap) {
    char small[1024], *p = small;
    va_list cp;
    va_copy(cp, ap);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    if (n >= (int)sizeof small && (p = malloc((size_t)n + 1)) != NULL) vsnprintf(p, (size_t)n + 1, fmt, cp);
    else if (n >= (int)sizeof small) p = small; /* out of memory: the cut message */
    va_end(cp);
    fflush(stdout);
    fputs("tbx: ", stderr);
    for (const char *s = n < 0 ? "" : p; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c < 0x20 || c == 0x7f) fprintf(stderr, "\\x%02x", c);
        else fputc(c, stderr);
    }
    fputc('\n', stderr);
    if (p != small) free(p);
}

void cli_error(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vmessage(fmt, ap);
    va_end(ap);
}

int cli_usage_error(const cli_args *a, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vmessage(fmt, ap);
    va_end(ap);
    if (a && a->path) fprintf(stderr, "Try '%s --help'.\n", a->path);
    return CLI_USAGE;
}

/* Does msg mention path as a word of its own (not just as a substring of another word)? */
static int mentions_path(const char *msg, const char *path) {
    size_t n = strlen(path);
    if (n == 0) return 1;
    for (const char *p = strstr(msg, path); p; p = strstr(p + 1, path)) {
        char before = p == msg ? ' ' : p[-1], after = p[n];
        if (strchr(" '\"`(", before) && (after == 0 || strchr(" '\"`):,;", after))) return 1;
    }
    return 0;
}

/* A URL as messages show it: without user info ("user:secret@") and without its query (a
 * signed URL's query is a credential), as the library names it; other paths as they are. */
static const char *shown_path(const char *path, char *buf, size_t cap) {
    const char *sep = strstr(path, "://");
    if (!sep || cap < 8) return path;
    const char *host = sep + 3;
    size_t hl = strcspn(host, "/?#");
    const char *at = NULL;
    for (size_t i = 0; i < hl; i++)
        if (host[i] == '@') at = host + i;
    const char *rest = at ? at + 1 : host;
    size_t keep = strcspn(rest, "?#");
    snprintf(buf, cap, "%.*s%.*s%s", (int)(host - path), path, (int)keep, rest,
             rest[keep] ? "?..." : "");
    return buf;
}

void cli_report(const char *path, tbx_status status, const tbx_error *err) {
    const char *msg = (err && err->message[0]) ? err->message : tbx_strerror(status);
    if (!msg) msg = "unknown error";
    char shown[4096];
    if (path) path = shown_path(path, shown, sizeof shown);
    if (path && !mentions_path(msg, path))
        cli_error("%s: %s", path, msg);
    else
        cli_error("%s", msg);
}

void cli_open_options(const cli_args *a, tbx_open_options *opt) {
    tbx_open_options_init(opt);
    if (a && cli_flag(a, "mmap")) opt->flags |= TBX_OPEN_MMAP;
}

tbx_file *cli_open(const cli_args *a, const char *path) {
    tbx_open_options opt;
    tbx_error err;
    tbx_file *f = NULL;
    memset(&err, 0, sizeof err);
    cli_open_options(a, &opt);
    tbx_status st = tbx_open_path(&f, path, &opt, &err);
    if (st != TBX_OK || !f) {
        if (st == TBX_OK) st = TBX_E_IO;
        cli_report(path, st, &err);
        tbx_close(f);
        return NULL;
    }
    return f;
}

static int stdout_failed; /* a write error was already reported */

static int stdout_error(int e) {
    if (!stdout_failed && e != EPIPE)
        cli_error("error writing to standard output: %s", strerror(e ? e : EIO));
    stdout_failed = 1;
    return CLI_FAIL;
}

int cli_write_stdout(const void *data, size_t len) {
    if (stdout_failed) return CLI_FAIL;
    if (len == 0) return CLI_OK;
    errno = 0;
    if (fwrite(data, 1, len, stdout) != len) return stdout_error(errno);
    return CLI_OK;
}

int cli_finish_stdout(void) {
    if (stdout_failed) return CLI_FAIL;
    errno = 0;
    if (fflush(stdout) != 0 || ferror(stdout)) return stdout_error(errno);
    return CLI_OK;
}

const char *cli_dtype_name(tbx_dtype dt) {
    const tbx_dtype_info *in = tbx_dtype_get(dt);
    return (in && in->name) ? in->name : "invalid";
}

int cli_force_would_help(const char *path) {
    struct stat sb;
    if (stat(path, &sb) == 0) return S_ISREG(sb.st_mode);
    return errno == ENOENT && lstat(path, &sb) == 0 && S_ISLNK(sb.st_mode);
}
