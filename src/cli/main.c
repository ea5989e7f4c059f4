/*
 * main.c - entry point of the tbx tool: the command table, the option parser and help.
 *
 * Adding a command is one entry in `commands` below (plus its cmd_*.c file defining a
 * cli_command). A command with subcommands ("tbx gguf set ...") sets `subcommands` instead of
 * `run`; dispatch, option parsing and help then work one level down the same way.
 *
 * Options are long ("--json", "--cast f16", "--cast=f16"), some with a one-letter alias ("-q");
 * they may appear before, between or after the positional arguments; "--" ends the options.
 * Every command also accepts the common options below (--mmap, --help).
 */
#define _GNU_SOURCE
#include "cli.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

static int cmd_help_run(const cli_args *a);

static const cli_command cli_cmd_help = {
    "help", "[COMMAND [SUBCOMMAND]]", "Show the list of commands or the help of one command",
    NULL, NULL, 0, -1, cmd_help_run, NULL,
};

/* The command table: one entry per command, in the order `tbx help` lists them. */
static const cli_command *const commands[] = {
    &cli_cmd_info,
    &cli_cmd_validate,
    &cli_cmd_cat,
    &cli_cmd_convert,
    &cli_cmd_gguf,
    &cli_cmd_help,
    NULL,
};

/* Options every command accepts. */
static const cli_option common_options[] = {
    {"mmap", 0, NULL, "map the input file into memory instead of reading it"},
    {"help", 'h', NULL, "show this help"},
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

/* Parses argv[0..argc) into *a. For a group command, parsing stops at the first positional
 * argument (the subcommand): *stop gets its index. Returns 0, or -1 with a message in msg. */
static int parse_args(const cli_command *cmd, int argc, char **argv, cli_args *a, int *stop,
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
    if (cmd == &cli_cmd_convert) cli_convert_help_formats(fp);
}

static void print_main_help(FILE *fp) {
    fprintf(fp,
            "usage: tbx COMMAND [ARGUMENTS] [OPTIONS]\n"
            "\n"
            "Inspect, validate, extract and convert machine-learning weight files\n"
            "(safetensors, GGUF, zTensor, OINF).\n"
            "\n"
            "commands:\n");
    for (int i = 0; commands[i]; i++)
        fprintf(fp, "  %-10s %s\n", commands[i]->name, commands[i]->summary);
    fprintf(fp,
            "\n"
            "Run 'tbx help COMMAND' or 'tbx COMMAND --help' for the options of a command.\n"
            "'tbx --version' prints the version.\n"
            "\n"
            "exit status: 0 success, 1 a file or data problem, 2 a usage error.\n");
}

static const cli_command *find_in(const cli_command *const *table, const char *name) {
    for (int i = 0; table && table[i]; i++)
        if (strcmp(table[i]->name, name) == 0) return table[i];
    return NULL;
}

static int cmd_help_run(const cli_args *a) {
    if (a->npos == 0) {
        print_main_help(stdout);
        return CLI_OK;
    }
    const cli_command *const *table = commands;
    const cli_command *cmd = NULL;
    char path[256] = "tbx";
    for (int i = 0; i < a->npos; i++) {
        cmd = find_in(table, a->pos[i]);
        if (!cmd) {
            cli_error("unknown command '%s'", a->pos[i]);
            fprintf(stderr, "Run 'tbx help' for the list of commands.\n");
            return CLI_USAGE;
        }
        size_t n = strlen(path);
        snprintf(path + n, sizeof path - n, " %s", cmd->name);
        table = cmd->subcommands;
        if (!table && i + 1 < a->npos) {
            cli_error("'%s' has no subcommands", path);
            return CLI_USAGE;
        }
    }
    cli_print_command_help(stdout, cmd, path);
    return CLI_OK;
}

/* ------------------------------------------------------------------------------------------ */
/* Signals                                                                                     */
/* ------------------------------------------------------------------------------------------ */
/* SIGINT, SIGTERM, SIGHUP: remove the temporary files of unfinished writes, then die of the
 * same signal (the handler is one-shot: SA_RESETHAND restores the default action, and the
 * re-raised signal is delivered as soon as the handler returns). */
static void on_fatal_signal(int sig) {
    int saved = errno;
    tbx_remove_temp_files();
    raise(sig);
    errno = saved;
}

static void install_signal_handlers(void) {
    static const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
        struct sigaction old;
        if (sigaction(sigs[i], NULL, &old) == 0 && old.sa_handler == SIG_IGN)
            continue; /* ignored by our parent (nohup, a background shell): keep it so */
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_fatal_signal;
        sigemptyset(&sa.sa_mask);
        sa.sa_flags = SA_RESETHAND;
        (void)sigaction(sigs[i], &sa, NULL);
    }
}

/* ------------------------------------------------------------------------------------------ */
/* Dispatch                                                                                    */
/* ------------------------------------------------------------------------------------------ */
static int run_command(const cli_command *cmd, const char *path, int argc, char **argv) {
    cli_args a;
    memset(&a, 0, sizeof a);
    a.cmd = cmd;
    a.path = path;
    a.pos = malloc(sizeof(char *) * (size_t)(argc > 0 ? argc : 1));
    if (!a.pos) {
        cli_error("out of memory");
        return CLI_FAIL;
    }
    char msg[256];
    int stop = argc;
    int rc;
    int perr = parse_args(cmd, argc, argv, &a, &stop, msg, sizeof msg);
    if (cli_flag(&a, "help")) {
        cli_print_command_help(stdout, cmd, path);
        rc = CLI_OK;
    } else if (perr) {
        rc = cli_usage_error(&a, "%s", msg);
    } else if (cmd->subcommands) {
        if (stop >= argc) {
            rc = cli_usage_error(&a, "'%s' needs a command", path);
        } else {
            const cli_command *sub = find_in(cmd->subcommands, argv[stop]);
            if (!sub) {
                rc = cli_usage_error(&a, "unknown command '%s %s'", path, argv[stop]);
            } else {
                char subpath[256];
                snprintf(subpath, sizeof subpath, "%s %s", path, sub->name);
                rc = run_command(sub, subpath, argc - stop - 1, argv + stop + 1);
            }
        }
    } else if (a.npos < cmd->min_args) {
        rc = cli_usage_error(&a, "missing argument (usage: %s %s)", path, cmd->synopsis);
    } else if (cmd->max_args >= 0 && a.npos > cmd->max_args) {
        rc = cli_usage_error(&a, "unexpected argument '%s'", a.pos[cmd->max_args]);
    } else {
        rc = cmd->run(&a);
    }
    free(a.pos);
    return rc;
}

int main(int argc, char **argv) {
    /* A closed pipe shows up as EPIPE on write, handled quietly (see util.c). */
    signal(SIGPIPE, SIG_IGN);
    install_signal_handlers();

    if (argc < 2) {
        print_main_help(stderr);
        return CLI_USAGE;
    }
    const char *first = argv[1];
    int rc;
    if (strcmp(first, "--version") == 0 || strcmp(first, "-V") == 0) {
        if (strcmp(tbx_version(), TBX_VERSION_STRING) == 0)
            printf("tbx %s\n", TBX_VERSION_STRING);
        else
            printf("tbx %s (library %s)\n", TBX_VERSION_STRING, tbx_version());
        rc = CLI_OK;
    } else if (strcmp(first, "--help") == 0 || strcmp(first, "-h") == 0) {
        print_main_help(stdout);
        rc = CLI_OK;
    } else {
        const cli_command *cmd = find_in(commands, first);
        if (!cmd) {
            cli_error("unknown %s '%s'", first[0] == '-' ? "option" : "command", first);
            fprintf(stderr, "Run 'tbx help' for the list of commands.\n");
            return CLI_USAGE;
        }
        char path[64];
        snprintf(path, sizeof path, "tbx %s", cmd->name);
        rc = run_command(cmd, path, argc - 2, argv + 2);
    }
    int frc = cli_finish_stdout();
    return rc == CLI_OK ? frc : rc;
}
