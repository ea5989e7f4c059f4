/*
 * cli.h - what the parts of the `tbx` command-line tool share.
 *
 * The tool is a table of commands (cli_command). Each command declares its positional arguments
 * and its options; one generic parser (main.c) fills a cli_args and calls the command's run
 * function, which returns an exit code (CLI_OK, CLI_FAIL, CLI_USAGE). A command can instead
 * carry a table of subcommands ("tbx gguf set ..."), dispatched the same way.
 *
 * Alongside: a small JSON emitter (json.c), shortest round-trip float printing (numfmt.c), the
 * rendering of metadata values as JSON or human text (value.c) and error helpers (util.c).
 * Everything here uses only the public API in tensorbox.h.
 */
#ifndef TBX_CLI_H
#define TBX_CLI_H

#include "tensorbox.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Exit codes. */
enum { CLI_OK = 0, CLI_FAIL = 1, CLI_USAGE = 2 };

/* ------------------------------------------------------------------------------------------ */
/* Commands and options                                                                        */
/* ------------------------------------------------------------------------------------------ */
typedef struct cli_option {
    const char *name;   /* long name without the leading "--"; NULL ends a table */
    char short_name;    /* single-letter alias ("-q"), 0 when none */
    const char *arg;    /* NULL for a flag, else the placeholder shown in help ("DTYPE") */
    const char *help;   /* one line */
} cli_option;

/* Most options one command can have (its own plus the common ones). */
#define CLI_MAX_OPTIONS 48
/* Most values of repeatable options (e.g. --meta) on one command line. */
#define CLI_MAX_REPEATS 256

struct cli_command;

typedef struct cli_args {
    const struct cli_command *cmd;
    const char *path;                 /* "tbx info", "tbx gguf set": for messages */
    int npos;
    char **pos;                       /* positional arguments, in order */
    const char *val[CLI_MAX_OPTIONS]; /* per option: NULL when absent, "" for a given flag */
    /* every value of the repeatable options (arg placeholder ending in "..."), in order */
    int nrep;
    int rep_opt[CLI_MAX_REPEATS];
    const char *rep_val[CLI_MAX_REPEATS];
} cli_args;

typedef struct cli_command {
    const char *name;
    const char *synopsis;          /* arguments after the command name, for the usage line */
    const char *summary;           /* one line, for the command list */
    const char *details;           /* further paragraphs for `tbx help CMD`; may be NULL */
    const cli_option *options;     /* command options, NULL-name terminated; may be NULL */
    int min_args, max_args;        /* positional argument count; max_args < 0: no maximum */
    int (*run)(const cli_args *a); /* NULL for a group of subcommands */
    const struct cli_command *const *subcommands; /* NULL-terminated, or NULL */
} cli_command;

/* The commands (one per cmd_*.c). main.c lists them in its command table. */
extern const cli_command cli_cmd_info;
extern const cli_command cli_cmd_validate;
extern const cli_command cli_cmd_cat;
extern const cli_command cli_cmd_convert;
/* The writable formats and their extensions, from the driver table (`tbx convert --help`). */
void cli_convert_help_formats(FILE *fp);
extern const cli_command cli_cmd_gguf;
extern const cli_command cli_cmd_diff;

/* `tbx info --stats` (stats.c): the values view of an open file (size variables, typed metadata,
 * per-tensor preview, statistics and histogram) on stdout. Returns CLI_OK, or CLI_FAIL when a
 * tensor could not be read (after reporting it; the other tensors are still shown). */
int cli_info_stats(tbx_file *f, const char *path);

/* ------------------------------------------------------------------------------------------ */
/* Options and help of one command (opts.c: calls nothing else of the CLI)                    */
/* ------------------------------------------------------------------------------------------ */
/* Parses argv[0..argc) into *a (a->cmd, a->pos set by the caller). For a group command, parsing
 * stops at the first positional argument (the subcommand): *stop gets its index. Returns 0, or
 * -1 with a message in msg. */
int cli_parse_args(const cli_command *cmd, int argc, char **argv, cli_args *a, int *stop,
                   char *msg, size_t msgcap);
/* Was flag `name` given? (Works for any option of the command, including common ones.) */
int cli_flag(const cli_args *a, const char *name);
/* The argument of option `name`, or NULL when the option was not given (a repeatable option:
 * its last value). */
const char *cli_value(const cli_args *a, const char *name);
/* The k-th value (from 0) of a repeatable option `name` (one whose arg placeholder ends in
 * "...", e.g. "KEY=VALUE..."), or NULL past the last one. */
const char *cli_value_at(const cli_args *a, const char *name, int k);
/* The index of long option `name` of the command (a->rep_opt's numbering), -1 when none. */
int cli_option_index(const cli_args *a, const char *name);

/* Prints the help of a command (usage, options, details) to `fp`. */
void cli_print_command_help(FILE *fp, const cli_command *cmd, const char *path);

/* ------------------------------------------------------------------------------------------ */
/* Messages and files (util.c)                                                                 */
/* ------------------------------------------------------------------------------------------ */
/* "tbx: <message>" on stderr. */
void cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Usage error: "tbx: <message>" plus a pointer to the command's help; returns CLI_USAGE. */
int cli_usage_error(const cli_args *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Reports a library error: "tbx: [PATH: ]<err->message>" (PATH omitted when NULL or when the
 * message already names it); falls back to tbx_strerror(status) when there is no message. */
void cli_report(const char *path, tbx_status status, const tbx_error *err);
/* Would --force let a write to `path` replace it: a regular file (through symbolic links) or a
 * dangling symbolic link. Decides the "use --force" hint after TBX_E_EXISTS. */
int cli_force_would_help(const char *path);

/* tbx_open_options for a command: TBX_OPEN_MMAP when --mmap was given. */
void cli_open_options(const cli_args *a, tbx_open_options *opt);
/* Opens `path` for a command; on failure reports the error and returns NULL. */
tbx_file *cli_open(const cli_args *a, const char *path);

/* Writes `len` bytes to stdout. Returns CLI_OK, or CLI_FAIL after reporting a write error
 * (quietly when the reader went away: EPIPE). */
int cli_write_stdout(const void *data, size_t len);
/* Flushes stdout and reports a pending write error the same way. */
int cli_finish_stdout(void);

/* Lower-case dtype name ("f32"), "invalid" for an unknown value. */
const char *cli_dtype_name(tbx_dtype dt);

/* ------------------------------------------------------------------------------------------ */
/* Numbers (numfmt.c)                                                                          */
/* ------------------------------------------------------------------------------------------ */
/* Formats a finite or non-finite float with the fewest significant digits that read back as
 * the same value in the precision of `kind` (TBX_V_F16, TBX_V_BF16, TBX_V_F32, anything else:
 * f64). Positional notation for decimal exponents -4..15 (always with a '.', "1.0"), scientific
 * otherwise ("1e+16", "2.5e-07"); non-finite values give "nan", "inf", "-inf". Returns buf. */
#define CLI_FLOAT_BUF 40
char *cli_format_float(char buf[CLI_FLOAT_BUF], double v, tbx_value_type kind);
/* "1.5 KiB", "3.2 GiB": a rounded size for human output. */
char *cli_format_size(char buf[32], uint64_t bytes);

/* ------------------------------------------------------------------------------------------ */
/* JSON emitter (json.c)                                                                       */
/* ------------------------------------------------------------------------------------------ */
/* Its functions are jout_*, not json_*: the library links jansson, whose json_string and
 * json_null an executable's own functions of those names would interpose on (the dynamic
 * linker binds the library's calls to the executable's symbols). */
typedef struct json_out {
    FILE *fp;
    int depth;       /* containers open */
    int pretty;      /* members of containers at depth <= pretty go on their own lines */
    int need_comma;  /* a member was written in the current container */
    int after_key;   /* a key was written; its value comes next */
    int human;       /* human text: non-finite floats bare (nan), not quoted */
} json_out;

void jout_init(json_out *j, FILE *fp, int pretty);
void jout_begin_object(json_out *j);
void jout_end_object(json_out *j);
void jout_begin_array(json_out *j);
void jout_end_array(json_out *j);
/* Object key: bytes escaped like strings. */
void jout_key(json_out *j, const char *key, size_t len);
void jout_keyz(json_out *j, const char *key);
void jout_string(json_out *j, const char *s, size_t len);
void jout_stringz(json_out *j, const char *s);
void jout_u64(json_out *j, uint64_t v);
void jout_i64(json_out *j, int64_t v);
void jout_bool(json_out *j, int v);
void jout_null(json_out *j);
/* A float of precision `kind` (see cli_format_float); non-finite values as strings in JSON. */
void jout_float(json_out *j, double v, tbx_value_type kind);
/* Lowercase hex string of bytes. */
void jout_hex(json_out *j, const void *data, size_t len);
/* A preformatted value (as a member: separators are written). */
void jout_raw_value(json_out *j, const char *text);
/* Text written right after the previous output, no separator ("..." after a cut string). */
void jout_append(json_out *j, const char *text);
/* Ends the document with a newline. */
void jout_finish(json_out *j);

/* Writes the escaped body of a string (no quotes): valid UTF-8 as is, '"' and '\\' escaped,
 * control characters (0x00-0x1f, 0x7f) as \u00XX, each byte of invalid UTF-8 0xNN as \udcNN. */
void jout_write_escaped(FILE *fp, const char *s, size_t len);
/* Columns the escaped body of `s` takes (one per character, six per \u escape). */
size_t jout_escaped_width(const char *s, size_t len);
/* The same, counted only until it reaches `cap` (a column that wide needs no more): a table of
 * long names costs the widths of its columns, not of its names. */
size_t jout_escaped_width_upto(const char *s, size_t len, size_t cap);
/* The longest prefix of s[0, len) not longer than `max` that does not split a UTF-8 sequence. */
size_t jout_utf8_cut(const char *s, size_t len, size_t max);

/* ------------------------------------------------------------------------------------------ */
/* Metadata values (value.c)                                                                   */
/* ------------------------------------------------------------------------------------------ */
typedef struct cli_value_style {
    int typed;          /* wrap the value as {"type", ["elem"], "value"} (top level only) */
    uint64_t max_items; /* human output: list items shown per list (0: all) */
    size_t max_bytes;   /* human output: string/bytes shown (0: all) */
} cli_value_style;

/* Emits a metadata value. With j->human and limits set, long lists and strings are cut and
 * marked with "...". */
void cli_emit_value(json_out *j, const tbx_value *v, const cli_value_style *st);
/* Human description of a value's type: "u32", "string", "array<string>[3]", "map[2]",
 * "ndarray<f32>[2x3]", "bitset[10]", "bytes[16]". */
void cli_describe_type(FILE *fp, const tbx_value *v);

#endif /* TBX_CLI_H */
