/*
 * main.c - entry point of the tbx tool: the command table, dispatch, `tbx help` and the signal
 * handlers. The option parser and the help of one command are in opts.c.
 *
 * Adding a command is one entry in `commands` below (plus its cmd_*.c file defining a
 * cli_command). A command with subcommands ("tbx gguf set ...") sets `subcommands` instead of
 * `run`; dispatch, option parsing and help then work one level down the same way.
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
    &cli_cmd_diff,
    &cli_cmd_gguf,
    &cli_cmd_help,
    NULL,
};


/* The help of one command; `tbx convert --help` also lists the writable formats. */
static void print_command_help(FILE *fp, const cli_command *cmd, const char *path) {
    cli_print_command_help(fp, cmd, path);
    if (cmd == &cli_cmd_convert) cli_convert_help_formats(fp);
}

static void print_main_help(FILE *fp) {
    fprintf(fp,
            "usage: tbx COMMAND [ARGUMENTS] [OPTIONS]\n"
            "\n"
            "Inspect, validate, extract and convert machine-learning weight files\n"
            "(");
    /* the formats this library has a driver for, from its registry */
    for (size_t i = 0, n = tbx_format_count(); i < n; i++)
        fprintf(fp, "%s%s", i ? ", " : "", tbx_format_name(tbx_format_at(i)));
    fprintf(fp,
            ").\n"
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
    print_command_help(stdout, cmd, path);
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
    int perr = cli_parse_args(cmd, argc, argv, &a, &stop, msg, sizeof msg);
    if (cli_flag(&a, "help")) {
        print_command_help(stdout, cmd, path);
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
        /* the library's remote sources print their requests when this is set (src/io/remote.c) */
        if (cli_flag(&a, "verbose")) setenv("TBX_HTTP_VERBOSE", "1", 1);
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
