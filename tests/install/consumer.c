/* consumer.c - the smallest program that uses an installed libtensorbox.
 * Prints the runtime version and checks it against the header it was compiled with, and reads
 * one format's capabilities through a versioned struct (struct_size). */
#include <stdio.h>
#include <string.h>

#include <tensorbox.h>

int main(void) {
    const char *v = tbx_version();
    printf("tensorbox %s\n", v ? v : "(null)");
    if (v == NULL || strcmp(v, TBX_VERSION_STRING) != 0) {
        fprintf(stderr, "consumer: header says %s, library says %s\n", TBX_VERSION_STRING,
                v ? v : "(null)");
        return 1;
    }
    if (tbx_version_number() != TBX_VERSION_NUMBER) {
        fprintf(stderr, "consumer: version number mismatch\n");
        return 1;
    }
    /* a versioned struct through the installed header: the capability query of one format */
    tbx_format_caps caps = TBX_FORMAT_CAPS_INIT;
    if (tbx_format_caps_get(TBX_FORMAT_GGUF, &caps) != TBX_OK || !caps.name ||
        strcmp(caps.name, "gguf") != 0 || !(caps.flags & TBX_FCAP_WRITE)) {
        fprintf(stderr, "consumer: tbx_format_caps_get(GGUF) failed\n");
        return 1;
    }
    return 0;
}
