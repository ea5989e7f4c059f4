/*
 * replay_main.c - a main() for fuzz targets built without libFuzzer.
 *
 *   replay_<target> PATH...
 *
 * Calls LLVMFuzzerTestOneInput once on the contents of every file given; a directory is walked
 * recursively (entries in name order, names starting with '.' skipped). Arguments starting with
 * '-' are ignored, so libFuzzer-style flags do no harm. Prints "replayed N inputs" and exits 0;
 * exits 2 when a path cannot be read. A crashing input crashes this program, which then names the
 * input on stderr (on a fatal signal, or through the sanitizers' death callback).
 *
 * Set TBX_REPLAY_VERBOSE=1 to print every input's path before it runs.
 */
#define _POSIX_C_SOURCE 200809L

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
/* Optional in a target. */
int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));
/* Provided by the sanitizer runtimes when linked in. */
void __sanitizer_set_death_callback(void (*callback)(void)) __attribute__((weak));

static char current[4096];
static size_t current_len;
static unsigned long replayed;
static int verbose;

static void say_current(void) {
    static const char pre[] = "replay: crashed on input: ";
    if (current_len == 0) return;
    ssize_t r = write(2, pre, sizeof pre - 1);
    r = write(2, current, current_len);
    r = write(2, "\n", 1);
    (void)r;
}

static void on_signal(int sig) {
    say_current();
    signal(sig, SIG_DFL);
    raise(sig);
}

static int replay_file(const char *path) {
    FILE *fp = fopen(path, "rb");
    if (!fp) {
        fprintf(stderr, "replay: cannot open %s: %s\n", path, strerror(errno));
        return -1;
    }
    size_t cap = 4096, len = 0;
    uint8_t *buf = malloc(cap);
    if (!buf) {
        fclose(fp);
        fprintf(stderr, "replay: out of memory\n");
        return -1;
    }
    for (;;) {
        if (len == cap) {
            uint8_t *nb = realloc(buf, cap * 2);
            if (!nb) {
                free(buf);
                fclose(fp);
                fprintf(stderr, "replay: out of memory reading %s\n", path);
                return -1;
            }
            buf = nb;
            cap *= 2;
        }
        size_t n = fread(buf + len, 1, cap - len, fp);
        len += n;
        if (n == 0) break;
    }
    int bad = ferror(fp);
    fclose(fp);
    if (bad) {
        free(buf);
        fprintf(stderr, "replay: read error on %s\n", path);
        return -1;
    }

    size_t plen = strlen(path);
    if (plen >= sizeof current) plen = sizeof current - 1;
    memcpy(current, path, plen);
    current[plen] = '\0';
    current_len = plen;
    if (verbose) fprintf(stderr, "replay: %s (%zu bytes)\n", path, len);

    /* An exactly-sized copy, so that the sanitizers see reads past the end of the input. */
    uint8_t *input = malloc(len ? len : 1);
    if (!input) {
        free(buf);
        fprintf(stderr, "replay: out of memory\n");
        return -1;
    }
    memcpy(input, buf, len);
    free(buf);
    LLVMFuzzerTestOneInput(input, len);
    free(input);
    current_len = 0;
    replayed++;
    return 0;
}

static int name_cmp(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int replay_path(const char *path, int depth) {
    struct stat st;
    if (stat(path, &st) != 0) {
        fprintf(stderr, "replay: cannot stat %s: %s\n", path, strerror(errno));
        return -1;
    }
    if (!S_ISDIR(st.st_mode)) return replay_file(path);
    if (depth > 32) {
        fprintf(stderr, "replay: %s: directories nested too deep\n", path);
        return -1;
    }

    DIR *d = opendir(path);
    if (!d) {
        fprintf(stderr, "replay: cannot open directory %s: %s\n", path, strerror(errno));
        return -1;
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    int rc = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') continue;
        if (n == cap) {
            size_t ncap = cap ? cap * 2 : 64;
            char **nn = realloc(names, ncap * sizeof *nn);
            if (!nn) { rc = -1; break; }
            names = nn;
            cap = ncap;
        }
        names[n] = strdup(e->d_name);
        if (!names[n]) { rc = -1; break; }
        n++;
    }
    closedir(d);
    if (rc == 0 && n > 1) qsort(names, n, sizeof *names, name_cmp);
    for (size_t i = 0; i < n; i++) {
        if (rc == 0) {
            size_t len = strlen(path) + 1 + strlen(names[i]) + 1;
            char *child = malloc(len);
            if (!child) {
                rc = -1;
            } else {
                snprintf(child, len, "%s/%s", path, names[i]);
                if (replay_path(child, depth + 1) != 0) rc = -1;
                free(child);
            }
        }
        free(names[i]);
    }
    free(names);
    if (rc != 0) fprintf(stderr, "replay: failed inside %s\n", path);
    return rc;
}

int main(int argc, char **argv) {
    const char *v = getenv("TBX_REPLAY_VERBOSE");
    verbose = v && *v && strcmp(v, "0") != 0;
    if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
    if (__sanitizer_set_death_callback) __sanitizer_set_death_callback(say_current);
    signal(SIGSEGV, on_signal);
    signal(SIGBUS, on_signal);
    signal(SIGFPE, on_signal);
    signal(SIGILL, on_signal);
    signal(SIGABRT, on_signal);

    int paths = 0, rc = 0;
    for (int i = 1; i < argc; i++) {
        if (argv[i][0] == '-') continue;
        paths++;
        if (replay_path(argv[i], 0) != 0) rc = 2;
    }
    if (paths == 0) {
        fprintf(stderr, "usage: %s FILE_OR_DIR...\n", argv[0]);
        return 2;
    }
    printf("replayed %lu inputs\n", replayed);
    return rc;
}
