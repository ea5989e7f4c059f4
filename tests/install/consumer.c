/* consumer.c - the smallest program that uses an installed libtensorbox.
 * Prints the runtime version and checks it against the header it was compiled with, and reads
 * one format's capabilities through a versioned struct (struct_size), and calls one function of
 * an experimental header (opt-in: TBX_EXPERIMENTAL). */
#include <stdio.h>
#include <string.h>

#include <tensorbox.h>

#define TBX_EXPERIMENTAL /* tensorbox/gguf.h refuses to compile without it */
#include <tensorbox/gguf.h>

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
    /* experimental API: ggml type id 12 is Q4_K (ggml.h, enum ggml_type) */
    const char *tn = tbx_gguf_type_name(12);
    if (tbx_gguf_type_dtype(12) != TBX_DT_Q4_K || !tn || strcmp(tn, "Q4_K") != 0 ||
        tbx_gguf_dtype_type(TBX_DT_Q4_K) != 12) {
        fprintf(stderr, "consumer: the ggml type mapping of tensorbox/gguf.h failed\n");
        return 1;
    }
    return 0;
}
