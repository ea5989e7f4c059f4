/*
 * relname.c - the rule every name inside a set obeys (tbx_provider_name_ok, provider.h): a
 * relative path of plain components, so no name can reach outside the set's directory. Alone
 * in its file because it depends on nothing: the providers (provider.c, remote_prov.c) and the
 * Hub's tree parser (http_parse.c) both apply it.
 *
 *   "a/b.safetensors"  ok        "/etc/x"  absolute       "a//b", "a/"  empty component
 *   "../x", "a/../b"   leads out "./a"     a "." component
 */
#include "provider.h"

#include <string.h>

#define NAME_MAX_BYTES 4095u
#define COMPONENT_MAX_BYTES 255u

const char *tbx_provider_name_ok(const char *name) {
    if (!name || !*name) return "is empty";
    if (name[0] == '/') return "is an absolute path";
    size_t n = strlen(name);
    if (n > NAME_MAX_BYTES) return "is longer than 4095 bytes";
    for (const char *c = name; *c;) {
        const char *e = strchr(c, '/');
        size_t k = e ? (size_t)(e - c) : strlen(c);
        if (k == 0) return "has an empty component (\"//\" or a trailing '/')";
        if (k == 2 && c[0] == '.' && c[1] == '.') return "leads out of the set's directory (\"..\")";
        if (k == 1 && c[0] == '.') return "has a component \".\"";
        if (k > COMPONENT_MAX_BYTES) return "has a component longer than 255 bytes";
        if (!e) break;
        c = e + 1;
        if (!*c) return "has an empty component (\"//\" or a trailing '/')";
    }
    return NULL;
}
