/*
 * cmd_validate.c - `tbx validate FILE... [--quiet]`: full structural and data check.
 *
 * Opens the file once with problem reporting on (and digest verification), then runs
 * tbx_validate on the handle, which reads every tensor's stored bytes. A valid file prints "FILE: valid (<format> v<version>, N tensors)" and
 * exits 0; otherwise each problem prints as "FILE: <field>: <message>" and the exit status is 1.
 * --quiet prints nothing: the exit status alone tells. Problems are the command's output, so
 * they go to stdout; messages from the library are kept to one line.
 *
 * --json prints the same as JSON Lines: one object per problem with its status code name, field
 * and byte offset (what the hostile-file tests check exactly), or one object for a valid file.
 *
 * --ggml also checks a GGUF file against the stricter rules of ggml's own loader
 * (tbx_gguf_lint, tensorbox/gguf.h): each violation is one more problem line. A file that is not GGUF
 * fails --ggml with one problem line.
 */
#define _GNU_SOURCE
#include "cli.h"

#define TBX_EXPERIMENTAL /* tbx_gguf_lint: experimental API, as for any user */
#include <tensorbox/gguf.h>

#include <stdbool.h>

#include <inttypes.h>
#include <string.h>

static const cli_option validate_options[] = {
    {"quiet", 'q', NULL, "print nothing; the exit status tells (0 valid, 1 not)"},
    {"ggml", 0, NULL, "also check a GGUF file against ggml's loader rules"},
    {"json", 0, NULL, "one JSON object per line: each problem (code, field, offset), or valid"},
    {NULL, 0, NULL, NULL},
};

typedef struct validate_ctx {
    const char *path;
    int quiet;
    int json;          /* --json: JSON Lines instead of text */
    uint64_t printed;
    cli_progress *bar; /* the data pass's bar (erased before a problem line) */
} validate_ctx;

/* Writes text with line breaks and other control characters turned into spaces. */
static void put_one_line(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        fputc(c < 0x20 || c == 0x7F ? ' ' : c, stdout);
    }
}

/* --json: {"file", "code" (TBX_E_*), "field", "offset" (null: none), "message"} on one line. */
static void print_problem_json(const validate_ctx *c, const tbx_error *p) {
    json_out j;
    jout_init(&j, stdout, 0);
    jout_begin_object(&j);
    jout_keyz(&j, "file");
    jout_stringz(&j, c->path);
    jout_keyz(&j, "code");
    jout_stringz(&j, tbx_status_name(p->code));
    jout_keyz(&j, "field");
    jout_string(&j, p->field, strnlen(p->field, sizeof p->field));
    jout_keyz(&j, "offset");
    if (p->offset == TBX_NO_OFFSET) jout_null(&j);
    else jout_u64(&j, p->offset);
    jout_keyz(&j, "message");
    size_t mlen = strnlen(p->message, sizeof p->message);
    if (mlen) jout_string(&j, p->message, mlen);
    else jout_stringz(&j, tbx_strerror(p->code));
    jout_end_object(&j);
    jout_finish(&j);
}

static void print_problem(validate_ctx *c, const tbx_error *p) {
    c->printed++;
    if (c->quiet) return;
    if (c->bar) cli_progress_end(c->bar, 0); /* redrawn at the next step */
    if (c->json) {
        print_problem_json(c, p);
        return;
    }
    size_t flen = strnlen(p->field, sizeof p->field);
    size_t mlen = strnlen(p->message, sizeof p->message);
    fputs(c->path, stdout);
    fputs(": ", stdout);
    /* most messages already begin with their field ("attributes: ..."): name it once */
    bool named = flen > 0 && mlen > flen + 1 && memcmp(p->message, p->field, flen) == 0 &&
                 p->message[flen] == ':';
    if (flen > 0 && !named) {
        put_one_line(p->field, flen);
        fputs(": ", stdout);
    }
    if (mlen > 0)
        put_one_line(p->message, mlen);
    else
        fputs(tbx_strerror(p->code), stdout);
    fputc('\n', stdout);
}

static void on_problem(void *ud, const tbx_error *problem) {
    if (problem) print_problem((validate_ctx *)ud, problem);
}

/* --ggml: runs the ggml lint on the open handle; returns the number of problem lines printed. */
static uint64_t ggml_lint(tbx_file *f, validate_ctx *ctx) {
    uint64_t before = ctx->printed;
    if (tbx_file_format(f) != TBX_FORMAT_GGUF) {
        tbx_error e;
        memset(&e, 0, sizeof e);
        e.code = TBX_E_UNSUPPORTED;
        e.offset = TBX_NO_OFFSET;
        snprintf(e.field, sizeof e.field, "ggml");
        snprintf(e.message, sizeof e.message, "--ggml applies to GGUF files; this is %s",
                 tbx_format_name(tbx_file_format(f)));
        print_problem(ctx, &e);
    } else {
        tbx_gguf_lint(f, on_problem, ctx);
    }
    return ctx->printed - before;
}

/* Validates one file, opening it once: the open reports its recoverable problems, tbx_validate
 * the data pass, the --ggml lint and the summary use the same handle. Returns CLI_OK when
 * valid. */
static int validate_one(const cli_args *a, const char *path, int quiet) {
    tbx_open_options opt;
    cli_open_options(a, &opt);
    cli_progress bar;
    cli_progress_init(&bar, a, "validate");
    validate_ctx ctx = {path, quiet, cli_flag(a, "json"), 0, &bar};
    opt.on_problem = on_problem;
    opt.problem_ud = &ctx;
    opt.progress = cli_progress_cb;
    opt.progress_ud = &bar;
    opt.flags |= TBX_OPEN_VERIFY_DIGESTS;
    tbx_file *f = NULL;
    tbx_error err;
    memset(&err, 0, sizeof err);
    tbx_status st = tbx_open_path(&f, path, &opt, &err);
    if (st == TBX_OK && !f) st = TBX_E_IO;
    if (st != TBX_OK) {
        /* a fatal problem: the file cannot be opened at all (--ggml has nothing to lint) */
        if (err.code == TBX_OK) err.code = st;
        print_problem(&ctx, &err);
        return CLI_FAIL;
    }
    st = tbx_validate(f, on_problem, &ctx, NULL);
    cli_progress_end(&bar, st == TBX_OK);
    int rc = CLI_OK;
    if (st != TBX_OK) {
        if (ctx.printed == 0) {
            /* the library failed without a message: say what it returned */
            tbx_error e;
            memset(&e, 0, sizeof e);
            e.code = st;
            e.offset = TBX_NO_OFFSET;
            snprintf(e.message, sizeof e.message, "%s (%s)", tbx_strerror(st),
                     tbx_status_name(st));
            print_problem(&ctx, &e);
        }
        rc = CLI_FAIL;
    }
    if (cli_flag(a, "ggml") && ggml_lint(f, &ctx) > 0) rc = CLI_FAIL;
    if (rc == CLI_OK && !quiet && ctx.json) {
        json_out j;
        jout_init(&j, stdout, 0);
        jout_begin_object(&j);
        jout_keyz(&j, "file");
        jout_stringz(&j, path);
        jout_keyz(&j, "valid");
        jout_bool(&j, 1);
        jout_keyz(&j, "format");
        jout_stringz(&j, tbx_format_name(tbx_file_format(f)));
        jout_keyz(&j, "version");
        jout_u64(&j, tbx_file_version(f));
        jout_keyz(&j, "tensors");
        jout_u64(&j, tbx_tensor_count(f));
        jout_end_object(&j);
        jout_finish(&j);
    } else if (rc == CLI_OK && !quiet) {
        printf("%s: valid (%s v%" PRIu32 ", %" PRIu64 " tensors)\n", path,
               tbx_format_name(tbx_file_format(f)), tbx_file_version(f), tbx_tensor_count(f));
    }
    tbx_close(f);
    return rc;
}

static int validate_run(const cli_args *a) {
    int quiet = cli_flag(a, "quiet");
    int rc = CLI_OK;
    for (int i = 0; i < a->npos; i++) {
        if (validate_one(a, a->pos[i], quiet) != CLI_OK) rc = CLI_FAIL;
        if (ferror(stdout)) break;
    }
    return rc;
}

const cli_command cli_cmd_validate = {
    "validate",
    "FILE... [--quiet] [--ggml] [--json]",
    "Check a file completely: structure, limits, offsets, padding, digests, data",
    "Prints \"FILE: valid (FORMAT vVERSION, N tensors)\" for a valid file, else one line per\n"
    "problem, \"FILE: FIELD: MESSAGE\" (the message names the value and the byte offset).\n"
    "--ggml adds the rules of ggml's own GGUF loader (n_dims <= 4, names < 64 bytes, tensors\n"
    "packed in order, no nested arrays, general.alignment a u32, v2/v3 little-endian).\n"
    "On a terminal, stderr shows the progress of the pass over the data (the bytes of the\n"
    "compressed or digested components it decodes or verifies; not with --quiet).\n"
    "--json prints one JSON object per line instead: per problem {\"file\", \"code\" (TBX_E_*),\n"
    "\"field\", \"offset\" (null when none), \"message\"}; for a valid file {\"file\", \"valid\": true,\n"
    "\"format\", \"version\", \"tensors\"}.\n"
    "Exit status: 0 every file valid, 1 a file is invalid or unreadable, 2 usage error.\n",
    validate_options,
    1,
    -1,
    validate_run,
    NULL,
};
