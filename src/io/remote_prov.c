/*
 * remote_prov.c - the provider of a URL (provider.h): the files of a set on a web server, an
 * S3-compatible object store or the Hugging Face Hub, opened as remote sources (remote.c).
 *
 *   http://HOST/DIR/FILE, https://...   the URL itself; members are DIR/ + name
 *   s3://BUCKET/KEY                     AWS_ENDPOINT_URL_S3 or AWS_ENDPOINT_URL (an S3-compatible
 *                                       store; path-style BUCKET/KEY under it), else
 *                                       https://s3.REGION.amazonaws.com; requests signed with
 *                                       SigV4 (region AWS_REGION, AWS_DEFAULT_REGION or
 *                                       us-east-1) when AWS_ACCESS_KEY_ID and
 *                                       AWS_SECRET_ACCESS_KEY (+ AWS_SESSION_TOKEN) are set, or
 *                                       the profile AWS_PROFILE (default "default") of the file
 *                                       AWS_SHARED_CREDENTIALS_FILE (default ~/.aws/credentials)
 *                                       has them; anonymous otherwise
 *   hf://ORG/REPO[@REV][/FILE]          HF_ENDPOINT (default https://huggingface.co)
 *                                       /ORG/REPO/resolve/REV/FILE (its redirect to the CDN
 *                                       followed), HF_TOKEN as a bearer token to the Hub's host
 *
 * A URL ending in '/' (and hf:// without FILE) names a directory. A web server or a bucket
 * cannot be listed here: the listing of an http(s) or s3 set is the file given and which of a
 * fixed list of Hugging Face names exist beside it (one HEAD each:
 * model.safetensors.index.json, model.safetensors, config.json, ...); shards named by an index
 * and GGUF split parts are opened by name. The Hub lists a repository: one request to
 * HF_ENDPOINT/api/models/ORG/REPO/tree/REV?recursive=true answers every kind and list.
 */
#define _GNU_SOURCE
#include "io.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

enum { RS_HTTP, RS_S3, RS_HF };

#define TREE_MAX_BYTES ((size_t)64 << 20)
#define TREE_MAX_ENTRIES 100000
#define TREE_MAX_PAGES 1000 /* the Hub's pages hold 1000 entries or more */
#define SECRET_MAX 4096

typedef struct remote_prov {
    tbx_provider p;
    tbx_alloc al;
    int scheme;
    char *strs[12];       /* every string made (freed at the end) */
    int nstrs;
    const char *main_url; /* the URL of the path given */
    const char *base_url; /* members: base_url + encoded name */
    const char *tree_url; /* hf: the listing */
    const char *tree_dir; /* hf: the set's directory inside the repository ("" or "a/b/") */
    /* credentials */
    char *bearer, *sigv4, *userpwd, *header;
    tbx_remote_auth auth;
    /* hf: the repository's tree, loaded at the first kind or list */
    bool tree_loaded;
    tbx_hf_tree tree;     /* names relative to the set's directory */
} remote_prov;

static remote_prov *rp_of(const tbx_provider *p) { return (remote_prov *)(uintptr_t)p; }

static void secret_free(const tbx_alloc *al, char *s) {
    if (!s) return;
    size_t n = strlen(s);
    explicit_bzero(s, n);
    tbx_free(al, s, n + 1);
}

/* Percent-encodes every byte of s but unreserved ones (and '/' when keep_slash). */
static char *url_encode_(const tbx_alloc *al, const char *s, bool keep_slash) {
    size_t n = strlen(s);
    char *o = tbx_malloc(al, 3 * n + 1);
    if (!o) return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
            c == '-' || c == '_' || c == '.' || c == '~' || (c == '/' && keep_slash)) {
            o[k++] = (char)c;
        } else {
            static const char hx[] = "0123456789ABCDEF";
            o[k++] = '%';
            o[k++] = hx[c >> 4];
            o[k++] = hx[c & 15];
        }
    }
    o[k] = 0;
    char *r = tbx_memdup0(al, o, k);
    tbx_free(al, o, 3 * n + 1);
    return r;
}

static char *url_encode(const tbx_alloc *al, const char *s) { return url_encode_(al, s, true); }

/* printf into a string of the provider's allocator kept until the end. */
static const char *rp_fmt(remote_prov *rp, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static const char *rp_fmt(remote_prov *rp, const char *fmt, ...) {
    if (rp->nstrs >= (int)(sizeof rp->strs / sizeof rp->strs[0])) return NULL;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) return NULL;
    char *s = tbx_malloc(&rp->al, (size_t)n + 1);
    if (!s) return NULL;
    va_start(ap, fmt);
    vsnprintf(s, (size_t)n + 1, fmt, ap);
    va_end(ap);
    rp->strs[rp->nstrs++] = s;
    return s;
}

static char *dup_str(const tbx_alloc *al, const char *s) {
    return s ? tbx_memdup0(al, s, strlen(s)) : NULL;
}

static const char *env_nz(const char *name) {
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

/* ------------------------------------------------------------------------------------------ */
/* Credentials                                                                                 */
/* ------------------------------------------------------------------------------------------ */
/* The key, secret and token of `profile` in an AWS credentials file (INI); false when absent. */
static bool aws_profile(const char *file, const char *profile, char *key, char *secret,
                        char *token, size_t cap) {
    FILE *fp = fopen(file, "re");
    if (!fp) return false;
    char line[SECRET_MAX];
    bool in = false;
    key[0] = secret[0] = token[0] = 0;
    while (fgets(line, sizeof line, fp)) {
        char *s = line;
        while (*s == ' ' || *s == '\t') s++;
        size_t n = strlen(s);
        while (n && (s[n - 1] == '\n' || s[n - 1] == '\r' || s[n - 1] == ' ')) s[--n] = 0;
        if (*s == '[') {
            char *e = strchr(s, ']');
            if (e) *e = 0;
            const char *nm = s + 1;
            if (!strncmp(nm, "profile ", 8)) nm += 8;
            in = !strcmp(nm, profile);
            continue;
        }
        if (!in || *s == '#' || *s == ';') continue;
        char *eq = strchr(s, '=');
        if (!eq) continue;
        char *k = s, *v = eq + 1;
        char *ke = eq;
        while (ke > k && (ke[-1] == ' ' || ke[-1] == '\t')) ke--;
        *ke = 0;
        while (*v == ' ' || *v == '\t') v++;
        char *dst = !strcmp(k, "aws_access_key_id") ? key
                  : !strcmp(k, "aws_secret_access_key") ? secret
                  : !strcmp(k, "aws_session_token") ? token : NULL;
        if (dst && strlen(v) < cap) strcpy(dst, v);
    }
    explicit_bzero(line, sizeof line);
    fclose(fp);
    return key[0] && secret[0];
}

static tbx_status s3_auth(remote_prov *rp, const char *region, tbx_error *err) {
    char key[SECRET_MAX], secret[SECRET_MAX], token[SECRET_MAX];
    const char *ek = env_nz("AWS_ACCESS_KEY_ID"), *es = env_nz("AWS_SECRET_ACCESS_KEY");
    bool have = false;
    if (ek && es && strlen(ek) < sizeof key && strlen(es) < sizeof secret) {
        strcpy(key, ek);
        strcpy(secret, es);
        const char *et = env_nz("AWS_SESSION_TOKEN");
        token[0] = 0;
        if (et && strlen(et) < sizeof token) strcpy(token, et);
        have = true;
    } else {
        const char *file = env_nz("AWS_SHARED_CREDENTIALS_FILE");
        char path[4096];
        if (!file) {
            const char *home = env_nz("HOME");
            if (home && (size_t)snprintf(path, sizeof path, "%s/.aws/credentials", home) <
                            sizeof path)
                file = path;
        }
        const char *profile = env_nz("AWS_PROFILE");
        if (file) have = aws_profile(file, profile ? profile : "default", key, secret, token,
                                     sizeof key);
    }
    tbx_status st = TBX_OK;
    if (have) {
        size_t a = strlen(key), b = strlen(secret);
        rp->userpwd = tbx_malloc(&rp->al, a + b + 2);
        const char *sig = rp_fmt(rp, "aws:amz:%s:s3", region);
        rp->sigv4 = sig ? dup_str(&rp->al, sig) : NULL;
        if (rp->userpwd) {
            memcpy(rp->userpwd, key, a);
            rp->userpwd[a] = ':';
            memcpy(rp->userpwd + a + 1, secret, b + 1);
        }
        if (token[0]) {
            size_t t = strlen(token);
            rp->header = tbx_malloc(&rp->al, t + 32);
            if (rp->header) snprintf(rp->header, t + 32, "x-amz-security-token: %s", token);
        }
        if (!rp->userpwd || !rp->sigv4 || (token[0] && !rp->header))
            st = tbx_err_nomem(err, "credentials");
        rp->auth.sigv4 = rp->sigv4;
        rp->auth.userpwd = rp->userpwd;
        rp->auth.header = rp->header;
    }
    explicit_bzero(key, sizeof key);
    explicit_bzero(secret, sizeof secret);
    explicit_bzero(token, sizeof token);
    return st;
}

/* ------------------------------------------------------------------------------------------ */
/* The Hub's tree                                                                              */
/* ------------------------------------------------------------------------------------------ */
/* The listing, page by page: the Hub answers a page of entries with a Link header naming the
 * next page (same origin only: the token goes with every request), at most TREE_MAX_PAGES
 * pages; a page naming itself is a loop (a longer loop lists names twice: TBX_E_DUPLICATE). */
static tbx_status hf_tree(remote_prov *rp, tbx_error *err) {
    if (rp->tree_loaded) return TBX_OK;
    char shown[1024];
    snprintf(shown, sizeof shown, "the listing of %s", rp->p.dir);
    const size_t L = TBX_HTTP_LINK_MAX;
    char *url = tbx_malloc(&rp->al, 3 * L);
    if (!url) return tbx_err_nomem(err, "the Hub's tree");
    char *link = url + L, *next = link + L;
    tbx_status st = TBX_OK;
    if (snprintf(url, L, "%s", rp->tree_url) >= (int)L)
        st = tbx_err(err, TBX_E_LIMIT, TBX_NO_OFFSET, "url", "%s: the URL is too long", shown);
    for (unsigned page = 1; st == TBX_OK; page++) {
        char *body;
        size_t len;
        st = tbx_remote_get_page(&rp->al, url, NULL, &rp->auth, TREE_MAX_BYTES, &body, &len,
                                 link, L, err);
        if (st != TBX_OK) break;
        st = tbx_hf_tree_parse(&rp->al, body, len, rp->tree_dir, shown, TREE_MAX_ENTRIES,
                               &rp->tree, err);
        tbx_free(&rp->al, body, len + 1);
        if (st != TBX_OK || !link[0]) break;
        if (page >= TREE_MAX_PAGES)
            st = tbx_err(err, TBX_E_LIMIT, TBX_NO_OFFSET, "Link", "%s: more than %d pages",
                         shown, TREE_MAX_PAGES);
        else if ((st = tbx_http_next_url(url, link, next, L, err)) == TBX_OK) {
            if (!strcmp(next, url))
                st = tbx_err(err, TBX_E_FORMAT, TBX_NO_OFFSET, "Link", "%s: page %u names "
                             "itself as the next page", shown, page);
            else memcpy(url, next, L);
        }
    }
    tbx_free(&rp->al, url, 3 * L);
    if (st == TBX_OK) rp->tree_loaded = true;
    else tbx_hf_tree_free(&rp->al, &rp->tree);
    return st;
}

/* ------------------------------------------------------------------------------------------ */
/* The operations                                                                              */
/* ------------------------------------------------------------------------------------------ */
static char *member_url(remote_prov *rp, const char *name) {
    char *enc = url_encode(&rp->al, name);
    if (!enc) return NULL;
    size_t a = strlen(rp->base_url), b = strlen(enc);
    char *u = tbx_malloc(&rp->al, a + b + 1);
    if (u) {
        memcpy(u, rp->base_url, a);
        memcpy(u + a, enc, b + 1);
    }
    tbx_free(&rp->al, enc, b + 1);
    return u;
}

static tbx_status rp_kind(const tbx_provider *p, const char *name, tbx_entry_kind *kind,
                          uint64_t *size, tbx_error *err) {
    remote_prov *rp = rp_of(p);
    *kind = TBX_ENTRY_MISSING;
    if (rp->scheme == RS_HF) {
        tbx_status st = hf_tree(rp, err);
        if (st != TBX_OK) return st;
        for (size_t i = 0; i < rp->tree.n; i++) {
            if (strcmp(rp->tree.e[i].name, name) != 0) continue;
            *kind = rp->tree.e[i].dir ? TBX_ENTRY_DIR : TBX_ENTRY_FILE;
            *size = rp->tree.e[i].size;
        }
        return TBX_OK;
    }
    char *u = member_url(rp, name);
    if (!u) return tbx_err_nomem(err, "path");
    char *shown = tbx_provider_show_dup(p, name, &rp->al);
    bool exists = false;
    tbx_status st = shown ? tbx_remote_head(&rp->al, u, shown, &rp->auth, rp->scheme == RS_S3,
                                            &exists, size, err)
                          : tbx_err_nomem(err, "path");
    if (st == TBX_OK && exists) *kind = TBX_ENTRY_FILE;
    if (shown) tbx_free(&rp->al, shown, strlen(shown) + 1);
    tbx_free(&rp->al, u, strlen(u) + 1);
    return st;
}

static bool push_name(const tbx_alloc *al, tbx_namelist *out, const char *nm, size_t n) {
    if (!tbx_grow(al, (void **)&out->names, &out->cap, out->n + 1, sizeof *out->names))
        return false;
    char *c = tbx_memdup0(al, nm, n);
    if (!c) return false;
    out->names[out->n++] = c;
    return true;
}

/* What a listing of a web server's or a bucket's directory probes for. */
static const char *const probe_names[] = {
    "model.safetensors.index.json", "model.safetensors", "config.json", "generation_config.json",
    "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "tokenizer.model",
    "vocab.json", "merges.txt", NULL};

static tbx_status rp_list(const tbx_provider *p, const char *dir, size_t max,
                          const tbx_alloc *al, tbx_namelist *out, tbx_error *err) {
    remote_prov *rp = rp_of(p);
    tbx_status st = TBX_OK;
    if (rp->scheme == RS_HF) {
        st = hf_tree(rp, err);
        if (st != TBX_OK) return st;
        size_t dl = dir ? strlen(dir) : 0;
        for (size_t i = 0; i < rp->tree.n && st == TBX_OK; i++) {
            const char *nm = rp->tree.e[i].name;
            if (dir && (strncmp(nm, dir, dl) != 0 || nm[dl] != '/')) continue;
            const char *rel = dir ? nm + dl + 1 : nm;
            if (strchr(rel, '/')) continue;
            if (out->n >= max)
                return tbx_err(err, TBX_E_LIMIT, TBX_NO_OFFSET, "path",
                               "directory %s%s has more than %zu entries", p->prefix,
                               dir ? dir : "", max);
            if (!push_name(al, out, rel, strlen(rel))) st = tbx_err_nomem(err, "directory list");
        }
        return st;
    }
    if (dir) return TBX_OK; /* a subdirectory of a web server: nothing known */
    if (!p->is_dir && !push_name(al, out, p->entry, strlen(p->entry)))
        return tbx_err_nomem(err, "directory list");
    for (size_t i = 0; probe_names[i] && st == TBX_OK; i++) {
        if (p->entry && !strcmp(p->entry, probe_names[i])) continue;
        tbx_entry_kind k;
        uint64_t sz;
        st = rp_kind(p, probe_names[i], &k, &sz, err);
        if (st == TBX_OK && k == TBX_ENTRY_FILE && out->n < max &&
            !push_name(al, out, probe_names[i], strlen(probe_names[i])))
            st = tbx_err_nomem(err, "directory list");
    }
    return st;
}

static tbx_status rp_open(const tbx_provider *p, const char *name, bool use_mmap, tbx_source *s,
                          tbx_error *err) {
    (void)use_mmap;
    remote_prov *rp = rp_of(p);
    if (!name) {
        if (p->is_dir) {
            memset(s, 0, sizeof *s);
            s->fd = -1;
            s->guard = -1;
            return tbx_err(err, TBX_E_IO, TBX_NO_OFFSET, "path", "cannot read %s: is a directory",
                           p->path);
        }
        return tbx_remote_open(s, &rp->al, rp->main_url, p->path, &rp->auth, err);
    }
    char *u = member_url(rp, name);
    char *shown = tbx_provider_show_dup(p, name, &rp->al);
    tbx_status st;
    if (!u || !shown) {
        memset(s, 0, sizeof *s);
        s->fd = -1;
        s->guard = -1;
        st = tbx_err_nomem(err, "path");
    } else {
        st = tbx_remote_open(s, &rp->al, u, shown, &rp->auth, err);
    }
    if (u) tbx_free(&rp->al, u, strlen(u) + 1);
    if (shown) tbx_free(&rp->al, shown, strlen(shown) + 1);
    return st;
}

static void rp_free(tbx_provider *p) {
    remote_prov *rp = rp_of(p);
    const tbx_alloc al = rp->al;
    tbx_hf_tree_free(&al, &rp->tree);
    for (int i = 0; i < rp->nstrs; i++) tbx_free(&al, rp->strs[i], strlen(rp->strs[i]) + 1);
    secret_free(&al, rp->bearer);
    secret_free(&al, rp->userpwd);
    secret_free(&al, rp->header);
    if (rp->sigv4) tbx_free(&al, rp->sigv4, strlen(rp->sigv4) + 1);
    tbx_free(&al, rp, sizeof *rp);
}

static const tbx_provider_ops remote_ops = {rp_kind, rp_list, rp_open, rp_free};

/* Splits "DIR/FILE" (or "DIR/" or "FILE") of a location: dir keeps its '/'. */
static void split_last(const char *s, size_t *dir_len) {
    const char *sl = strrchr(s, '/');
    *dir_len = sl ? (size_t)(sl - s) + 1 : 0;
}

static tbx_status bad_url(const char *url, const char *why, tbx_error *err) {
    char q[300];
    tbx_quote_bytes(q, sizeof q, url, strlen(url), 200);
    return tbx_err(err, TBX_E_INVALID_ARG, TBX_NO_OFFSET, "path", "\"%s\": %s", q, why);
}

tbx_status tbx_provider_remote(tbx_provider **out, const tbx_alloc *al, const char *url,
                               tbx_error *err) {
    *out = NULL;
    if (!tbx_remote_is_url(url)) return bad_url(url, "not an http(s)://, s3:// or hf:// URL", err);
    remote_prov *rp = tbx_malloc(al, sizeof *rp);
    if (!rp) return tbx_err_nomem(err, "path");
    memset(rp, 0, sizeof *rp);
    rp->al = *al;
    tbx_provider *p = &rp->p;
    p->ops = &remote_ops;
    tbx_status st = TBX_OK;
    const char *path = NULL, *dir = NULL, *prefix = NULL;
    const char *loc;   /* the part after the scheme naming the file or directory */
    if (!strncmp(url, "hf://", 5)) {
        rp->scheme = RS_HF;
        const char *s = url + 5;
        const char *s1 = strchr(s, '/');
        if (!s1 || s1 == s) { st = bad_url(url, "expected hf://ORG/REPO[@REVISION][/FILE]", err); goto fail; }
        const char *repo = s1 + 1;
        size_t rl = strcspn(repo, "/");
        const char *at = memchr(repo, '@', rl);
        size_t name_len = at ? (size_t)(at - repo) : rl;
        if (name_len == 0 || (at && rl - name_len - 1 == 0)) {
            st = bad_url(url, "expected hf://ORG/REPO[@REVISION][/FILE]", err);
            goto fail;
        }
        char org[256], rname[256], rev[256];
        if ((size_t)(s1 - s) >= sizeof org || name_len >= sizeof rname ||
            (at && rl - name_len - 1 >= sizeof rev)) {
            st = bad_url(url, "an organisation, repository or revision longer than 255 bytes", err);
            goto fail;
        }
        memcpy(org, s, (size_t)(s1 - s)); org[s1 - s] = 0;
        memcpy(rname, repo, name_len); rname[name_len] = 0;
        if (at) { memcpy(rev, at + 1, rl - name_len - 1); rev[rl - name_len - 1] = 0; }
        else strcpy(rev, "main");
        const char *file = repo[rl] == '/' ? repo + rl + 1 : "";
        p->is_dir = !*file || file[strlen(file) - 1] == '/';
        const char *endpoint = env_nz("HF_ENDPOINT");
        if (!endpoint) endpoint = "https://huggingface.co";
        size_t el = strlen(endpoint);
        while (el && endpoint[el - 1] == '/') el--;
        size_t fdl;
        split_last(file, &fdl);
        /* a revision such as refs/pr/1 is one path segment of the URL */
        char *erev = url_encode_(al, rev, false), *efile = url_encode(al, file);
        if (!erev || !efile) {
            if (erev) tbx_free(al, erev, strlen(erev) + 1);
            if (efile) tbx_free(al, efile, strlen(efile) + 1);
            st = tbx_err_nomem(err, "path");
            goto fail;
        }
        rp->main_url = rp_fmt(rp, "%.*s/%s/%s/resolve/%s/%s", (int)el, endpoint, org, rname, erev,
                              efile);
        rp->base_url = rp_fmt(rp, "%.*s/%s/%s/resolve/%s/%.*s", (int)el, endpoint, org, rname,
                              erev, (int)fdl, file);
        rp->tree_url = rp_fmt(rp, "%.*s/api/models/%s/%s/tree/%s?recursive=true", (int)el,
                              endpoint, org, rname, erev);
        tbx_free(al, erev, strlen(erev) + 1);
        tbx_free(al, efile, strlen(efile) + 1);
        rp->tree_dir = rp_fmt(rp, "%.*s", (int)fdl, file);
        path = rp_fmt(rp, "%s", url);
        prefix = rp_fmt(rp, "hf://%s/%s@%s/%.*s", org, rname, rev, (int)fdl, file);
        const char *tok = env_nz("HF_TOKEN");
        if (tok) {
            rp->bearer = dup_str(al, tok);
            if (!rp->bearer) { st = tbx_err_nomem(err, "path"); goto fail; }
            rp->auth.bearer = rp->bearer;
        }
        loc = file;
    } else if (!strncmp(url, "s3://", 5)) {
        rp->scheme = RS_S3;
        const char *b = url + 5;
        const char *sl = strchr(b, '/');
        if (!sl || sl == b) { st = bad_url(url, "expected s3://BUCKET/KEY", err); goto fail; }
        const char *key = sl + 1;
        p->is_dir = !*key || key[strlen(key) - 1] == '/';
        const char *endpoint = env_nz("AWS_ENDPOINT_URL_S3");
        if (!endpoint) endpoint = env_nz("AWS_ENDPOINT_URL");
        const char *region = env_nz("AWS_REGION");
        if (!region) region = env_nz("AWS_DEFAULT_REGION");
        if (!region) region = "us-east-1";
        const char *ep = endpoint ? endpoint : rp_fmt(rp, "https://s3.%s.amazonaws.com", region);
        if (!ep) { st = tbx_err_nomem(err, "path"); goto fail; }
        size_t el = strlen(ep);
        while (el && ep[el - 1] == '/') el--;
        size_t kdl;
        split_last(key, &kdl);
        char *ekey = url_encode(al, key);
        if (!ekey) { st = tbx_err_nomem(err, "path"); goto fail; }
        rp->main_url = rp_fmt(rp, "%.*s/%.*s/%s", (int)el, ep, (int)(sl - b), b, ekey);
        tbx_free(al, ekey, strlen(ekey) + 1);
        rp->base_url = rp_fmt(rp, "%.*s/%.*s/%.*s", (int)el, ep, (int)(sl - b), b, (int)kdl, key);
        path = rp_fmt(rp, "%s", url);
        prefix = rp_fmt(rp, "%.*s", (int)(key - url + kdl), url);
        st = s3_auth(rp, region, err);
        if (st != TBX_OK) goto fail;
        loc = key;
    } else {
        rp->scheme = RS_HTTP;
        const char *host = strstr(url, "://") + 3;
        const char *pth = host + strcspn(host, "/?#");
        if (pth == host) { st = bad_url(url, "no host", err); goto fail; }
        size_t ul = strcspn(url, "?#");
        const char *q = url + ul;
        p->is_dir = ul > 0 && url[ul - 1] == '/';
        size_t dl = 0;
        for (const char *c = pth; c < q; c++)
            if (*c == '/') dl = (size_t)(c - url) + 1;
        if (!dl) dl = ul;
        rp->main_url = rp_fmt(rp, "%s", url);
        rp->base_url = rp_fmt(rp, "%.*s%s", (int)dl, url, dl == ul ? "/" : "");
        /* as messages show it: without user info (user:password@) and query */
        const char *at = NULL;
        for (const char *c = host; c < pth; c++)
            if (*c == '@') at = c;
        const char *vis = at ? at + 1 : host;
        int sl = (int)(host - url);
        path = rp_fmt(rp, "%.*s%.*s%s", sl, url, (int)(url + ul - vis), vis, *q ? "?..." : "");
        prefix = rp_fmt(rp, "%.*s%.*s%s", sl, url, (int)(url + dl - vis), vis,
                        dl == ul ? "/" : "");
        loc = dl <= ul ? url + dl : "";
        if (*q && !p->is_dir) {
            /* the entry is the last path segment; members share no query */
            char *e = tbx_memdup0(al, url + dl, ul - dl);
            if (!e) { st = tbx_err_nomem(err, "path"); goto fail; }
            rp->strs[rp->nstrs++] = e;
            loc = e;
        }
    }
    if (!rp->main_url || !rp->base_url || !path || !prefix ||
        (rp->scheme == RS_HF && (!rp->tree_url || !rp->tree_dir))) {
        st = tbx_err_nomem(err, "path");
        goto fail;
    }
    p->path = path;
    p->prefix = prefix;
    size_t pl = strlen(prefix);
    dir = rp_fmt(rp, "%.*s", (int)(pl > 1 && prefix[pl - 1] == '/' ? pl - 1 : pl), prefix);
    if (!dir) { st = tbx_err_nomem(err, "path"); goto fail; }
    p->dir = dir;
    if (!p->is_dir) {
        const char *sl = strrchr(loc, '/');
        p->entry = sl ? sl + 1 : loc;
        if (!*p->entry) p->is_dir = true, p->entry = NULL;
    }
    /* the directory's base name: a repository's own name at its root */
    if (rp->scheme == RS_HF && !*rp->tree_dir) {
        const char *s1 = strchr(url + 5, '/') + 1;
        size_t n = strcspn(s1, "@/");
        p->base = s1;
        p->base_len = n;
    } else {
        size_t e = strlen(dir);
        size_t a = e;
        while (a && dir[a - 1] != '/') a--;
        p->base = dir + a;
        p->base_len = e - a;
    }
    *out = p;
    return TBX_OK;
fail:
    rp_free(p);
    return st;
}
