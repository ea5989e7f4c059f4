/*
 * progress.c - the one-line progress bar of long commands (convert, diff, validate, cat of a
 * URL) on stderr.
 *
 * Shown only when stderr is a terminal and --quiet was not given: a line redrawn in place
 * ("\r" + erase to the end of the line) at most ten times a second, with the share done, the
 * bytes done of the total, the throughput since the start and the time left at that rate.
 * When the command ends the line is completed (success) or erased (failure), so what follows
 * starts on a clean line. A pipe or a file gets no progress byte at all.
 */
#define _GNU_SOURCE
#include "cli.h"

#include <inttypes.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int cli_progress_init(cli_progress *p, const cli_args *a, const char *label) {
    memset(p, 0, sizeof *p);
    p->label = label;
    p->active = !cli_flag(a, "quiet") && isatty(STDERR_FILENO);
    p->start = p->last = now_seconds();
    return p->active;
}

static void eta_text(char buf[32], double secs) {
    if (!(secs >= 0) || secs > 359999) {
        snprintf(buf, 32, "--:--");
        return;
    }
    const unsigned s = (unsigned)(secs + 0.5);
    if (s >= 3600) snprintf(buf, 32, "%u:%02u:%02u", s / 3600, s / 60 % 60, s % 60);
    else snprintf(buf, 32, "%u:%02u", s / 60, s % 60);
}

static void draw(cli_progress *p, uint64_t done, uint64_t total, double t) {
    const double pct = total ? 100.0 * (double)done / (double)total : 100.0;
    const double secs = t - p->start;
    const double rate = secs > 0 ? (double)done / secs : 0.0;
    char d[32], tt[32], r[32], eta[32];
    cli_format_size(d, done);
    cli_format_size(tt, total);
    cli_format_size(r, (uint64_t)rate);
    eta_text(eta, done >= total ? 0.0 : rate > 0 ? (double)(total - done) / rate : -1.0);
    fprintf(stderr, "\r\033[K%s %5.1f%%  %s / %s  %s/s  ETA %s", p->label, pct, d, tt, r, eta);
    fflush(stderr);
    p->shown = 1;
    p->complete = done >= total;
    p->total = total;
}

int cli_progress_cb(void *ud, uint64_t done, uint64_t total) {
    cli_progress *p = ud;
    if (!p->active || total == 0) return 0; /* nothing to show for 0 of 0 */
    const double t = now_seconds();
    if (done < total && t - p->last < 0.1) return 0; /* at most ten redraws a second */
    p->last = t;
    draw(p, done, total, t);
    return 0;
}

void cli_progress_end(cli_progress *p, int ok) {
    if (!p->active || !p->shown) return;
    if (ok) {
        if (!p->complete) draw(p, p->total, p->total, now_seconds());
        fputc('\n', stderr);
    } else {
        fputs("\r\033[K", stderr);
    }
    fflush(stderr);
    p->shown = 0;
}
