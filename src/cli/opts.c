/*
 * opts.c - the option parser of the tbx tool and the help of one command.
 *
 * Options are long ("--json", "--cast f16", "--cast=f16"), some with a one-letter alias ("-q");
 * they may appear before, between or after the positional arguments; "--" ends the options.
 * Every command also accepts the common options below (--mmap, --help, --verbose).
 *
 * This file is the bottom of the CLI: it calls nothing else of it (util.c and the commands
 * call cli_flag/cli_value; main.c calls cli_parse_args and cli_print_command_help).
 */
#include "cli.h"

#include <string.h>

/* Options every command accepts. */
static const cli_option common_options[] = {
    {"mmap", 0, NULL, "map the input file into memory instead of reading it"},
    {"help", 'h', NULL, "show this help"},
    {"verbose", 0, NULL, "print every request made to a remote store (URL, range, status, "
                         "bytes, time) and its totals on stderr"},
    {NULL, 0, NULL, NULL},
};

/* ------------------------------------------------------------------------------------------ */
/* Options                                                                                     */
/* ------------------------------------------------------------------------------------------ */
static int count_options(const cli_option *o) {
    int n = 0;
    while (o && o[n].name) n++;
    return n;
}

/* The option at index i of a command's option space (its own options, then the common ones). */
static const cli_option *option_at(const cli_command *cmd, int i) {
    int nc = count_options(cmd->options);
    if (i < nc) return &cmd->options[i];
    i -= nc;
    return i < count_options(common_options) ? &common_options[i] : NULL;
}

static int find_long(const cli_command *cmd, const char *name, size_t len) {
    for (int i = 0;; i++) {
        const cli_option *o = option_at(cmd, i);
        if (!o) return -1;
        if (strlen(o->name) == len && memcmp(o->name, name, len) == 0) return i;
    }
}

static int find_short(const cli_command *cmd, char c) {
    for (int i = 0;; i++) {
        const cli_option *o = option_at(cmd, i);
        if (!o) return -1;
        if (o->short_name && o->short_name == c) return i;
    }
}

int cli_flag(const cli_args *a, const char *name) { return cli_value(a, name) != NULL; }

const char *cli_value(const cli_args *a, const char *name) {
    int i = find_long(a->cmd, name, strlen(name));
    return (i >= 0 && i < CLI_MAX_OPTIONS) ? a->val[i] : NULL;
}

int cli_option_index(const cli_args *a, const char *name) {
    return find_long(a->cmd, name, strlen(name));
}

const char *cli_value_at(const cli_args *a, const char *name, int k) {
    int i = find_long(a->cmd, name, strlen(name));
    for (int r = 0; i >= 0 && r < a->nrep; r++)
        if (a->rep_opt[r] == i && k-- == 0) return a->rep_val[r];
    return NULL;
}

/* Does the option take several values (its arg placeholder ends in "...")? */
static int repeatable(const cli_option *o) {
    size_t n = o->arg ? strlen(o->arg) : 0;
    return n > 3 && strcmp(o->arg + n - 3, "...") == 0;
}

/* See cli.h. */
int cli_parse_args(const cli_command *cmd, int argc, char **argv, cli_args *a, int *stop,
                      char *msg, size_t msgcap) {
    int opts_done = 0;
    *stop = argc;
    for (int i = 0; i < argc; i++) {
        char *arg = argv[i];
        if (!opts_done && strcmp(arg, "--") == 0) {
            opts_done = 1;
            continue;
        }
        int idx = -1;
        const char *inline_val = NULL;
        if (!opts_done && arg[0] == '-' && arg[1] == '-') {
            const char *name = arg + 2;
            const char *eq = strchr(name, '=');
            size_t len = eq ? (size_t)(eq - name) : strlen(name);
            idx = find_long(cmd, name, len);
            if (idx < 0) {
                snprintf(msg, msgcap, "unknown option '--%.*s'", (int)len, name);
                return -1;
            }
            if (eq) inline_val = eq + 1;
        } else if (!opts_done && arg[0] == '-' && arg[1] != 0) {
            idx = arg[2] == 0 ? find_short(cmd, arg[1]) : -1;
            if (idx < 0) {
                snprintf(msg, msgcap, "unknown option '%s'", arg);
                return -1;
            }
        } else {
            if (cmd->subcommands) {
                *stop = i;
                return 0;
            }
            a->pos[a->npos++] = arg;
            continue;
        }
        const cli_option *o = option_at(cmd, idx);
        if (idx >= CLI_MAX_OPTIONS) {
            snprintf(msg, msgcap, "too many options declared for this command");
            return -1;
        }
        if (!o->arg) {
            if (inline_val) {
                snprintf(msg, msgcap, "option '--%s' takes no argument", o->name);
                return -1;
            }
            a->val[idx] = "";
        } else if (inline_val) {
            a->val[idx] = inline_val;
        } else if (i + 1 < argc) {
            a->val[idx] = argv[++i];
        } else {
            snprintf(msg, msgcap, "option '--%s' needs an argument (%s)", o->name, o->arg);
            return -1;
        }
        if (o->arg && repeatable(o)) {
            if (a->nrep >= CLI_MAX_REPEATS) {
                snprintf(msg, msgcap, "option '--%s' given more than %d times", o->name,
                         CLI_MAX_REPEATS);
                return -1;
            }
            a->rep_opt[a->nrep] = idx;
            a->rep_val[a->nrep++] = a->val[idx];
        }
    }
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Help                                                                                        */
/* ------------------------------------------------------------------------------------------ */
static void print_option(FILE *fp, const cli_option *o) {
    char left[64];
    int n;
    if (o->short_name)
        n = snprintf(left, sizeof left, "  -%c, --%s", o->short_name, o->name);
    else
        n = snprintf(left, sizeof left, "      --%s", o->name);
    if (o->arg && n > 0 && (size_t)n < sizeof left)
        snprintf(left + n, sizeof left - (size_t)n, " %s", o->arg);
    fprintf(fp, "%-26s %s\n", left, o->help ? o->help : "");
}

void cli_print_command_help(FILE *fp, const cli_command *cmd, const char *path) {
    fprintf(fp, "usage: %s%s%s\n\n", path, cmd->synopsis && *cmd->synopsis ? " " : "",
            cmd->synopsis ? cmd->synopsis : "");
    fprintf(fp, "%s.\n", cmd->summary);
    if (cmd->subcommands) {
        fprintf(fp, "\ncommands:\n");
        for (int i = 0; cmd->subcommands[i]; i++)
            fprintf(fp, "  %-10s %s\n", cmd->subcommands[i]->name, cmd->subcommands[i]->summary);
    }
    fprintf(fp, "\noptions:\n");
    for (int i = 0; cmd->options && cmd->options[i].name; i++) print_option(fp, &cmd->options[i]);
    for (int i = 0; common_options[i].name; i++) print_option(fp, &common_options[i]);
    if (cmd->details) fprintf(fp, "\n%s", cmd->details);
}
