/* consumer.c - the smallest program that uses an installed libtensorbox.
 * Prints the runtime version and checks it against the header it was compiled with. */
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
    return 0;
}
