/* test_provider.c - the files of a set come from a provider (src/io/provider.h).
 *
 *   - A provider that is not the local directory plugs in without any driver knowing: an
 *     in-memory provider (a test double standing for a remote store: its files are served
 *     through read callbacks, its path "mem://hub/..." exists nowhere on disk) serves a Hugging
 *     Face directory (a single model.safetensors with a side file one level down; a sharded
 *     index), the index of a sharded set by name, and a GGUF split set; each opens as the same
 *     files on disk do (tensors and their bytes, metadata, sections and their bytes, parts) and
 *     converts to every format with the same status and the same bytes (MCF records the
 *     directory's base name: the provider's).
 *   - The shared checks: names that would leave the set are refused before any provider sees
 *     them; a provider listing a name that is no plain file name, or more names than asked for,
 *     is an error.
 *   - The local directory's rules: links followed (a dangling one is missing), a FIFO is
 *     neither a file nor a directory and is refused at once when opened, a directory cannot be
 *     opened, names with "..", absolute paths, empty or "." components are refused, listings
 *     are bounded (TBX_E_LIMIT naming the directory) and sorted; the directory, prefix, entry
 *     and base name of a path.
 *   - Allocation failures: with the Nth allocation failing, every provider call and every open
 *     of a directory or a split set ends in success or TBX_E_NOMEM, never in a missing file,
 *     and frees everything.
 */
#define _GNU_SOURCE
#include "tbx_test.h"
#include "tensorbox.h"
#define TBX_EXPERIMENTAL 1
#include "tensorbox/gguf.h"
#include "api.h"

#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

/* ------------------------------------------------------------------------------------------ */
/* Temporary files                                                                             */
/* ------------------------------------------------------------------------------------------ */
static char g_tmp[512];

static void rm_tree(const char *dir) {
    DIR *d = opendir(dir);
    if (d) {
        struct dirent *e;
        char p[1200];
        while ((e = readdir(d)) != NULL) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
            snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
            struct stat sb;
            if (lstat(p, &sb) == 0 && S_ISDIR(sb.st_mode)) rm_tree(p);
            else unlink(p);
        }
        closedir(d);
    }
    rmdir(dir);
}

static void rm_tmp(void) { rm_tree(g_tmp); }

/* g_tmp/rel (made once per process). */
static const char *tmp(const char *rel) {
    static char buf[8][900];
    static int k;
    if (!g_tmp[0]) {
        tbx_test_tmppath(g_tmp, sizeof g_tmp, "tbx_test_provider_XXXXXX");
        if (!mkdtemp(g_tmp)) abort();
        atexit(rm_tmp);
    }
    k = (k + 1) % 8;
    snprintf(buf[k], sizeof buf[k], "%s/%s", g_tmp, rel);
    return buf[k];
}

static void write_file(const char *path, const void *p, size_t n) {
    FILE *fp = fopen(path, "wb");
    if (!fp || (n && fwrite(p, 1, n, fp) != n)) abort();
    if (fclose(fp) != 0) abort();
}

static const char *src_path(const char *rel) {
    static char buf[4][1024];
    static int k;
    const char *root = getenv("TBX_SOURCE_DIR");
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", root ? root : ".", rel);
    return buf[k];
}

/* ------------------------------------------------------------------------------------------ */
/* An in-memory provider: a test double for a store that is not the local directory           */
/* ------------------------------------------------------------------------------------------ */
#define MEM_MAX 64

typedef struct mem_ent {
    char name[256];  /* relative: "config.json", "1_Pooling", "1_Pooling/config.json" */
    bool dir;
    uint8_t *data;
    size_t n;
} mem_ent;

typedef struct memfs {
    mem_ent e[MEM_MAX];
    size_t n;
    uint64_t opens, reads, lists, kinds; /* what the drivers asked of it */
    const char *extra_listed;            /* listed besides the entries (a faulty store) */
    bool ignore_max;                     /* lists everything whatever the bound (faulty) */
} memfs;

typedef struct mem_prov {
    tbx_provider p;
    memfs *fs;
    char path[300], dir[300], prefix[300], base[100];
} mem_prov;

static void memfs_free(memfs *fs) {
    for (size_t i = 0; i < fs->n; i++) free(fs->e[i].data);
    memset(fs, 0, sizeof *fs);
}

static mem_ent *memfs_add(memfs *fs, const char *name, bool dir) {
    if (fs->n >= MEM_MAX) abort();
    mem_ent *e = &fs->e[fs->n++];
    memset(e, 0, sizeof *e);
    if (strlen(name) >= sizeof e->name) abort();
    memcpy(e->name, name, strlen(name) + 1);
    e->dir = dir;
    return e;
}

static void memfs_remove(memfs *fs, const char *name) {
    for (size_t i = 0; i < fs->n; i++)
        if (!strcmp(fs->e[i].name, name)) {
            free(fs->e[i].data);
            fs->e[i] = fs->e[--fs->n];
            return;
        }
    abort();
}

/* The regular files of `root` and of its subdirectories (one level), read whole. */
static void memfs_load(memfs *fs, const char *root) {
    memset(fs, 0, sizeof *fs);
    char sub[2][256];
    size_t nsub = 0;
    for (int pass = 0; pass < 2; pass++) {
        for (size_t s = 0; s < (pass ? nsub : 1); s++) {
            char dir[1024];
            snprintf(dir, sizeof dir, "%s%s%s", root, pass ? "/" : "", pass ? sub[s] : "");
            DIR *d = opendir(dir);
            if (!d) abort();
            struct dirent *de;
            while ((de = readdir(d)) != NULL) {
                if (de->d_name[0] == '.') continue;
                char p[1300], rel[600];
                snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
                snprintf(rel, sizeof rel, "%s%s%s", pass ? sub[s] : "", pass ? "/" : "",
                         de->d_name);
                struct stat sb;
                if (stat(p, &sb) != 0) abort();
                if (S_ISDIR(sb.st_mode)) {
                    if (pass || nsub >= 2) abort();
                    snprintf(sub[nsub++], sizeof sub[0], "%s", de->d_name);
                    memfs_add(fs, rel, true);
                } else if (S_ISREG(sb.st_mode)) {
                    mem_ent *e = memfs_add(fs, rel, false);
                    e->data = tbx_test_slurp(p, &e->n);
                    if (!e->data) abort();
                }
            }
            closedir(d);
        }
    }
}

static const mem_ent *mem_find(const memfs *fs, const char *name) {
    for (size_t i = 0; i < fs->n; i++)
        if (!strcmp(fs->e[i].name, name)) return &fs->e[i];
    return NULL;
}

static memfs *fs_of(const tbx_provider *p) { return ((const mem_prov *)p)->fs; }

static tbx_status mem_kind(const tbx_provider *p, const char *name, tbx_entry_kind *kind,
                           uint64_t *size, tbx_error *err) {
    (void)err;
    memfs *fs = fs_of(p);
    fs->kinds++;
    const mem_ent *e = mem_find(fs, name);
    *kind = !e ? TBX_ENTRY_MISSING : e->dir ? TBX_ENTRY_DIR : TBX_ENTRY_FILE;
    *size = e && !e->dir ? e->n : 0;
    return TBX_OK;
}

static bool mem_push(const tbx_alloc *al, tbx_namelist *out, const char *name) {
    if (!tbx_grow(al, (void **)&out->names, &out->cap, out->n + 1, sizeof *out->names))
        return false;
    char *c = tbx_memdup0(al, name, strlen(name));
    if (!c) return false;
    out->names[out->n++] = c;
    return true;
}

static tbx_status mem_list(const tbx_provider *p, const char *dir, size_t max,
                           const tbx_alloc *al, tbx_namelist *out, tbx_error *err) {
    memfs *fs = fs_of(p);
    fs->lists++;
    size_t dl = dir ? strlen(dir) : 0;
    if (dir && (!mem_find(fs, dir) || !mem_find(fs, dir)->dir))
        return tbx_err(err, TBX_E_IO, TBX_NO_OFFSET, "path", "mem: no directory %s%s",
                       p->prefix, dir);
    for (size_t i = fs->n; i-- > 0;) { /* in no particular order: the caller sorts */
        const char *nm = fs->e[i].name;
        if (dir) {
            if (strncmp(nm, dir, dl) != 0 || nm[dl] != '/') continue;
            nm += dl + 1;
        }
        if (strchr(nm, '/')) continue;
        if (!fs->ignore_max && out->n >= max)
            return tbx_err(err, TBX_E_LIMIT, TBX_NO_OFFSET, "path",
                           "mem: directory %s has more than %zu entries", p->dir, max);
        if (!mem_push(al, out, nm)) return tbx_err_nomem(err, "mem list");
    }
    if (fs->extra_listed && !dir && !mem_push(al, out, fs->extra_listed))
        return tbx_err_nomem(err, "mem list");
    return TBX_OK;
}

static tbx_status mem_read_at(void *ud, uint64_t off, void *buf, size_t len) {
    const mem_ent *e = ud;
    if (off > e->n || len > e->n - off) return TBX_E_TRUNCATED;
    memcpy(buf, e->data + off, len);
    return TBX_OK;
}

/* Every read goes through here (the handle's sources are callbacks into the store). */
static memfs *g_counting;
static tbx_status mem_read_counted(void *ud, uint64_t off, void *buf, size_t len) {
    if (g_counting) g_counting->reads++;
    return mem_read_at(ud, off, buf, len);
}

static tbx_status mem_open(const tbx_provider *p, const char *name, bool use_mmap,
                           tbx_source *s, tbx_error *err) {
    (void)use_mmap;
    memfs *fs = fs_of(p);
    fs->opens++;
    const char *nm = name ? name : p->entry;
    const mem_ent *e = nm ? mem_find(fs, nm) : NULL;
    if (!e || e->dir)
        return tbx_err(err, TBX_E_IO, TBX_NO_OFFSET, "path", "mem: cannot open %s%s: %s",
                       p->prefix, nm ? nm : "", e ? "is a directory" : "no such file");
    tbx_source_open_callback(s, mem_read_counted, (void *)e, e->n);
    return TBX_OK;
}

static void mem_free(tbx_provider *p) { free(p); }

static const tbx_provider_ops mem_ops = {mem_kind, mem_list, mem_open, mem_free};

/* The provider of "mem://hub/DIR" (entry NULL) or "mem://hub/DIR/ENTRY". */
static tbx_provider *mem_provider(memfs *fs, const char *dir, const char *entry) {
    mem_prov *m = calloc(1, sizeof *m);
    if (!m) abort();
    m->fs = fs;
    snprintf(m->dir, sizeof m->dir, "mem://hub/%s", dir);
    snprintf(m->prefix, sizeof m->prefix, "mem://hub/%s/", dir);
    snprintf(m->path, sizeof m->path, "mem://hub/%s%s%s", dir, entry ? "/" : "",
             entry ? entry : "");
    snprintf(m->base, sizeof m->base, "%s", dir);
    m->p.ops = &mem_ops;
    m->p.path = m->path;
    m->p.dir = m->dir;
    m->p.prefix = m->prefix;
    m->p.entry = entry ? m->path + strlen(m->prefix) : NULL;
    m->p.is_dir = entry == NULL;
    m->p.base = m->base;
    m->p.base_len = strlen(m->base);
    return &m->p;
}

/* ------------------------------------------------------------------------------------------ */
/* The same model, two ways                                                                    */
/* ------------------------------------------------------------------------------------------ */
/* Part i's path without its prefix (the directory differs between disk and memory). */
static const char *part_rel(const tbx_file *f, uint64_t i, const char *prefix, uint64_t *size) {
    const char *p = tbx_file_part_path(f, i, size);
    if (p && prefix && !strncmp(p, prefix, strlen(prefix))) p += strlen(prefix);
    return p;
}

static void same_model(tbx_file *a, tbx_file *b, const char *a_prefix, const char *b_prefix) {
    CHECK_EQ(tbx_file_format(a), tbx_file_format(b));
    CHECK_EQ(tbx_file_version(a), tbx_file_version(b));
    CHECK_EQ(tbx_file_size(a), tbx_file_size(b));
    CHECK_EQ(tbx_tensor_count(a), tbx_tensor_count(b));
    CHECK(tbx_tensor_count(a) > 0);
    for (uint64_t i = 0; i < tbx_tensor_count(a) && i < tbx_tensor_count(b); i++) {
        tbx_tensor_info ta = TBX_TENSOR_INFO_INIT, tb = TBX_TENSOR_INFO_INIT;
        CHECK_OK(tbx_tensor_info_get(a, i, &ta));
        CHECK_OK(tbx_tensor_info_get(b, i, &tb));
        CHECK_STR(tb.name, ta.name);
        CHECK_EQ(tb.dtype, ta.dtype);
        CHECK_EQ(tb.ndim, ta.ndim);
        CHECK(ta.ndim == tb.ndim && (!ta.ndim || !memcmp(ta.shape, tb.shape, ta.ndim * 8)));
        CHECK_EQ(tb.nbytes, ta.nbytes);
        size_t na = 0, nb = 0;
        tbx_error e;
        CHECK_EQ(tbx_tensor_read(a, i, NULL, 0, &na, &e), TBX_E_BUFFER_TOO_SMALL);
        uint8_t *ba = malloc(na ? na : 1), *bb = malloc(na ? na : 1);
        CHECK_OK(tbx_tensor_read(a, i, ba, na, &na, &e));
        CHECK_OK(tbx_tensor_read(b, i, bb, na, &nb, &e));
        CHECK(na == nb && memcmp(ba, bb, na) == 0);
        free(ba);
        free(bb);
    }
    CHECK_EQ(tbx_meta_count(a), tbx_meta_count(b));
    for (uint64_t i = 0; i < tbx_meta_count(a) && i < tbx_meta_count(b); i++) {
        size_t la = 0, lb = 0;
        const char *ka = tbx_meta_key(a, i, &la), *kb = tbx_meta_key(b, i, &lb);
        CHECK(la == lb && ka && kb && !memcmp(ka, kb, la));
        CHECK_EQ(tbx_value_type_of(tbx_meta_value(a, i)), tbx_value_type_of(tbx_meta_value(b, i)));
    }
    CHECK_EQ(tbx_section_count(a), tbx_section_count(b));
    for (uint64_t i = 0; i < tbx_section_count(a) && i < tbx_section_count(b); i++) {
        tbx_section_info sa = TBX_SECTION_INFO_INIT, sb = TBX_SECTION_INFO_INIT;
        CHECK_OK(tbx_section_info_get(a, i, &sa));
        CHECK_OK(tbx_section_info_get(b, i, &sb));
        CHECK_STR(sb.name, sa.name);
        CHECK_EQ(sb.size, sa.size);
        size_t n = (size_t)sa.size, m = 0;
        uint8_t *x = malloc(n ? n : 1), *y = malloc(n ? n : 1);
        tbx_error e;
        CHECK_OK(tbx_section_read(a, i, x, n, &m, &e));
        CHECK_OK(tbx_section_read(b, i, y, n, &m, &e));
        CHECK(memcmp(x, y, n) == 0);
        free(x);
        free(y);
    }
    CHECK_EQ(tbx_file_part_count(a), tbx_file_part_count(b));
    for (uint64_t i = 0; i < tbx_file_part_count(a) && i < tbx_file_part_count(b); i++) {
        uint64_t sa = 0, sb = 0;
        CHECK_STR(part_rel(b, i, b_prefix, &sb), part_rel(a, i, a_prefix, &sa));
        CHECK_EQ(sb, sa);
    }
}

#define NTARGETS 6
static const tbx_format targets[NTARGETS] = {TBX_FORMAT_SAFETENSORS, TBX_FORMAT_GGUF,
                                             TBX_FORMAT_ZTENSOR, TBX_FORMAT_OINF,
                                             TBX_FORMAT_MCF, TBX_FORMAT_EMBD};

/* Converts both handles to every format (as they are, and with the lossy options): the same
 * status and, on success, the same bytes. Returns the successful conversions. */
static int same_conversions(tbx_file *a, tbx_file *b, const char *tag) {
    int ok = 0;
    for (int lossy = 0; lossy < 2; lossy++)
        for (int k = 0; k < NTARGETS; k++) {
            char pa[300], pb[300];
            snprintf(pa, sizeof pa, "%s", tmp("out_disk"));
            snprintf(pb, sizeof pb, "%s", tmp("out_mem"));
            unlink(pa);
            unlink(pb);
            tbx_convert_options co;
            tbx_convert_options_init(&co);
            co.write.format = targets[k];
            co.write.threads = 1;
            if (lossy)
                co.flags = TBX_CONVERT_STRINGIFY_META | TBX_CONVERT_DROP_SECTIONS |
                           TBX_CONVERT_DEQUANTIZE;
            tbx_error ea, eb;
            memset(&ea, 0, sizeof ea);
            memset(&eb, 0, sizeof eb);
            tbx_status sa = tbx_convert(a, pa, &co, &ea);
            tbx_status sb = tbx_convert(b, pb, &co, &eb);
            CHECK_EQ(sb, sa);
            if (sa != sb)
                fprintf(stderr, "%s -> %s%s: disk %s (%s), memory %s (%s)\n", tag,
                        tbx_format_name(targets[k]), lossy ? " lossy" : "",
                        tbx_status_name(sa), ea.message, tbx_status_name(sb), eb.message);
            if (sa == TBX_OK && sb == TBX_OK) {
                size_t na = 0, nb = 0;
                uint8_t *x = tbx_test_slurp(pa, &na), *y = tbx_test_slurp(pb, &nb);
                CHECK(x && y && na == nb && na > 0 && memcmp(x, y, na) == 0);
                free(x);
                free(y);
                ok++;
            }
            unlink(pa);
            unlink(pb);
        }
    return ok;
}

/* Opens `disk` by path and `prov` through the façade; both must open and agree. */
static void check_same(const char *disk, tbx_provider *prov, memfs *fs, const char *disk_prefix,
                       int min_conversions, const char *tag) {
    tbx_file *a = NULL, *b = NULL;
    tbx_error e;
    memset(&e, 0, sizeof e);
    CHECK_OK(tbx_open_path(&a, disk, NULL, &e));
    if (!a) { fprintf(stderr, "%s: %s\n", disk, e.message); tbx_provider_free(prov); return; }
    char prefix[300];
    snprintf(prefix, sizeof prefix, "%s", prov->prefix);
    fs->opens = fs->reads = 0;
    g_counting = fs;
    CHECK_OK(tbx_open_provider_(&b, prov, NULL, &e));
    if (!b) { fprintf(stderr, "%s (memory): %s\n", tag, e.message); tbx_close(a); return; }
    CHECK(fs->opens >= 2 && fs->reads > 0); /* the store served the files */
    same_model(a, b, disk_prefix, prefix);
    int ok = same_conversions(a, b, tag);
    CHECK(ok >= min_conversions);
    /* the validation pass reads every byte through the store too */
    uint64_t np = 1;
    CHECK_OK(tbx_validate(b, NULL, NULL, &np));
    CHECK_EQ(np, 0);
    g_counting = NULL;
    tbx_close(a);
    tbx_close(b);
}

TBX_TEST(memory_provider_hf_directory) {
    /* a model.safetensors and side files, one of them a level down (1_Pooling/config.json) */
    memfs fs;
    memfs_load(&fs, src_path("examples/tiny-embedder"));
    CHECK(mem_find(&fs, "1_Pooling/config.json") != NULL);
    char prefix[1100];
    snprintf(prefix, sizeof prefix, "%s/", src_path("examples/tiny-embedder"));
    check_same(src_path("examples/tiny-embedder"), mem_provider(&fs, "tiny-embedder", NULL), &fs,
               prefix, 8, "tiny-embedder");
    memfs_free(&fs);
}

TBX_TEST(memory_provider_sharded_index) {
    /* an index and two shards: the directory, and the index named by its own path */
    memfs fs;
    const char *d = src_path("tests/data/mcf/hf/sharded-qwen");
    memfs_load(&fs, d);
    check_same(d, mem_provider(&fs, "sharded-qwen", NULL), &fs, NULL, 5, "sharded-qwen");
    char idx[1100];
    snprintf(idx, sizeof idx, "%s/model.safetensors.index.json", d);
    check_same(idx, mem_provider(&fs, "sharded-qwen", "model.safetensors.index.json"), &fs, NULL,
               5, "sharded-qwen index");

    /* MCF records the directory's base name as the provider gives it (mantle's pack name) */
    tbx_file *m = NULL;
    tbx_error me;
    CHECK_OK(tbx_open_provider_(&m, mem_provider(&fs, "renamed-qwen", NULL), NULL, &me));
    tbx_convert_options co;
    tbx_convert_options_init(&co);
    co.write.format = TBX_FORMAT_MCF;
    co.write.flags = TBX_WRITE_OVERWRITE;
    CHECK_OK(tbx_convert(m, tmp("renamed.mcf"), &co, &me));
    tbx_close(m);
    size_t mn = 0;
    uint8_t *mb = tbx_test_slurp(tmp("renamed.mcf"), &mn);
    CHECK(mb && memmem(mb, mn, "renamed-qwen", 12) && !memmem(mb, mn, "sharded-qwen", 12));
    free(mb);
    CHECK_OK(tbx_open_path(&m, d, NULL, &me));
    CHECK_OK(tbx_convert(m, tmp("disk.mcf"), &co, &me));
    tbx_close(m);
    mb = tbx_test_slurp(tmp("disk.mcf"), &mn);
    CHECK(mb && memmem(mb, mn, "sharded-qwen", 12) && !memmem(mb, mn, "renamed-qwen", 12));
    free(mb);

    /* a shard the store does not have: the index's own message, as on disk */
    memfs_remove(&fs, "model-00002-of-00002.safetensors");
    tbx_file *f = NULL;
    tbx_error e;
    CHECK_EQ(tbx_open_provider_(&f, mem_provider(&fs, "sharded-qwen", NULL), NULL, &e),
             TBX_E_NOT_FOUND);
    CHECK(f == NULL);
    CHECK(strstr(e.message, "model.safetensors.index.json: weight_map names shard "
                            "\"model-00002-of-00002.safetensors\", which does not exist") != NULL);
    memfs_free(&fs);
}

/* A GGUF split set "DIR/STEM-0000K-of-0000N.gguf" made from examples/tiny-mlp.safetensors;
 * returns N (0 on failure). */
static unsigned make_split_stem(const char *dir, const char *stem_name) {
    mkdir(tmp(dir), 0700);
    char orig[600], stem[600];
    snprintf(orig, sizeof orig, "%s", tmp("split-orig.gguf"));
    snprintf(stem, sizeof stem, "%s/%s", tmp(dir), stem_name);
    tbx_file *f = NULL;
    tbx_error e;
    if (tbx_open_path(&f, src_path("examples/tiny-mlp.safetensors"), NULL, &e) != TBX_OK) return 0;
    tbx_convert_options co;
    tbx_convert_options_init(&co);
    co.write.format = TBX_FORMAT_GGUF;
    co.write.flags = TBX_WRITE_OVERWRITE;
    tbx_status st = tbx_convert(f, orig, &co, &e);
    tbx_close(f);
    uint32_t n = 0;
    if (st == TBX_OK) st = tbx_gguf_split(orig, 300000, stem, TBX_WRITE_OVERWRITE, &n, &e);
    if (st != TBX_OK) fprintf(stderr, "make_split: %s\n", e.message);
    unlink(orig);
    return st == TBX_OK ? n : 0;
}

static unsigned make_split(const char *dir) { return make_split_stem(dir, "mlp"); }

/* A set named with a byte that is a separator elsewhere ('\\') opens as any other: the local
 * directory takes the names a POSIX directory has. */
TBX_TEST(local_provider_odd_names) {
    unsigned n = make_split_stem("split-odd", "ml\\p");
    CHECK(n >= 3);
    char first[700];
    snprintf(first, sizeof first, "%s/ml\\p-00001-of-%05u.gguf", tmp("split-odd"), n);
    tbx_file *f = NULL, *g = NULL;
    tbx_error e;
    CHECK_OK(tbx_open_path(&f, first, NULL, &e));
    CHECK_OK(tbx_open_path(&g, src_path("examples/tiny-mlp.safetensors"), NULL, &e));
    if (f && g) {
        CHECK_EQ(tbx_file_part_count(f), n);
        CHECK_EQ(tbx_tensor_count(f), tbx_tensor_count(g));
    }
    tbx_close(f);
    tbx_close(g);
}

TBX_TEST(memory_provider_gguf_split_set) {
    unsigned n = make_split("split");
    CHECK(n >= 3);
    if (n < 3) return;
    memfs fs;
    memfs_load(&fs, tmp("split"));
    CHECK_EQ(fs.n, n);
    char first[64], disk[700], prefix[700];
    snprintf(first, sizeof first, "mlp-00001-of-%05u.gguf", n);
    snprintf(disk, sizeof disk, "%s/%s", tmp("split"), first);
    snprintf(prefix, sizeof prefix, "%s/", tmp("split"));
    check_same(disk, mem_provider(&fs, "split", first), &fs, prefix, 6, "gguf split set");

    /* the parts are named by the provider */
    tbx_file *f = NULL;
    tbx_error e;
    CHECK_OK(tbx_open_provider_(&f, mem_provider(&fs, "split", first), NULL, &e));
    CHECK_EQ(tbx_file_part_count(f), n);
    char want[300];
    snprintf(want, sizeof want, "mem://hub/split/mlp-%05u-of-%05u.gguf", n, n);
    CHECK_STR(tbx_file_part_path(f, n - 1, NULL), want);
    tbx_close(f);

    /* a missing shard: the driver's message names it as the provider shows it */
    char second[64];
    snprintf(second, sizeof second, "mlp-00002-of-%05u.gguf", n);
    memfs_remove(&fs, second);
    f = NULL;
    CHECK_EQ(tbx_open_provider_(&f, mem_provider(&fs, "split", first), NULL, &e), TBX_E_IO);
    CHECK(f == NULL);
    snprintf(want, sizeof want, "split set: shard 2 of %u 'mem://hub/split/%s' cannot be opened: "
             "mem: cannot open mem://hub/split/%s: no such file", n, second, second);
    CHECK_STR(e.message, want);
    memfs_free(&fs);
}

TBX_TEST(provider_checks_shared_by_every_provider) {
    memfs fs;
    memfs_load(&fs, src_path("tests/data/mcf/hf/sharded-qwen"));
    tbx_provider *p = mem_provider(&fs, "sharded-qwen", NULL);
    tbx_alloc al;
    tbx_alloc_init(&al, NULL);
    tbx_error e;
    /* names that leave the set never reach the provider */
    const char *bad[] = {"..", "../x.json", "sub/../../x.json", "/etc/passwd", "sub/..", "",
                         ".", "./x.json", "sub//x.json", "sub/", NULL};
    for (int i = 0; i < 11; i++) {
        fs.kinds = fs.opens = fs.lists = 0;
        tbx_entry_kind k = TBX_ENTRY_FILE;
        tbx_source s;
        tbx_namelist l;
        CHECK_EQ(tbx_provider_kind(p, bad[i], &k, NULL, &e), TBX_E_INVALID_ARG);
        CHECK_EQ(k, TBX_ENTRY_MISSING);
        if (bad[i]) { /* NULL is the path itself for open, the set's directory for list */
            CHECK_EQ(tbx_provider_open(p, bad[i], false, &s, &e), TBX_E_INVALID_ARG);
            CHECK_EQ(s.fd, -1);
            CHECK_EQ(tbx_provider_list(p, bad[i], 100, &al, &l, &e), TBX_E_INVALID_ARG);
            CHECK_EQ(l.n, 0);
        }
        CHECK(fs.kinds == 0 && fs.opens == 0 && fs.lists == 0);
    }
    char longname[300];
    memset(longname, 'a', 256);
    longname[256] = 0;
    tbx_entry_kind k;
    CHECK_EQ(tbx_provider_kind(p, longname, &k, NULL, &e), TBX_E_INVALID_ARG);
    CHECK(tbx_provider_name_ok("1_Pooling/config.json") == NULL);
    CHECK(tbx_provider_name_ok("..x.json") == NULL);

    /* listings come back sorted whatever order the store used */
    tbx_namelist l;
    CHECK_OK(tbx_provider_list(p, NULL, 100, &al, &l, &e));
    CHECK_EQ(l.n, fs.n);
    for (size_t i = 1; i < l.n; i++) CHECK(strcmp(l.names[i - 1], l.names[i]) < 0);
    tbx_namelist_free(&al, &l);
    /* a store listing a name that is no plain file name, or more names than asked for */
    fs.extra_listed = "../escape.json";
    CHECK_EQ(tbx_provider_list(p, NULL, 100, &al, &l, &e), TBX_E_STATE);
    CHECK(strstr(e.message, "\"../escape.json\", which is not a plain file name") != NULL);
    CHECK(l.n == 0 && l.names == NULL);
    fs.extra_listed = "sub/x.json";
    CHECK_EQ(tbx_provider_list(p, NULL, 100, &al, &l, &e), TBX_E_STATE);
    fs.extra_listed = NULL;
    fs.ignore_max = true;
    CHECK_EQ(tbx_provider_list(p, NULL, 3, &al, &l, &e), TBX_E_LIMIT);
    CHECK(strstr(e.message, "more than the 3 asked for") != NULL);
    CHECK(l.n == 0 && l.names == NULL);
    fs.ignore_max = false;
    /* an HF directory whose listing the store refuses: its error, as the local one's */
    CHECK_EQ(tbx_provider_list(p, NULL, 3, &al, &l, &e), TBX_E_LIMIT);
    tbx_provider_free(p);
    memfs_free(&fs);
}

/* ------------------------------------------------------------------------------------------ */
/* The local directory                                                                         */
/* ------------------------------------------------------------------------------------------ */
/* tmp("loc"): set/ {model.json, link.json -> model.json, dangling.json -> nowhere, fifo.json
 * (a FIFO), sub/inner.json, sublink -> sub, we\ird.json}, outside.json beside set/. */
static const char *make_local(void) {
    static char set[600];
    if (set[0]) return set;
    mkdir(tmp("loc"), 0700);
    snprintf(set, sizeof set, "%s/set", tmp("loc"));
    char p[800];
    mkdir(set, 0700);
    snprintf(p, sizeof p, "%s/outside.json", tmp("loc"));
    write_file(p, "{\"outside\":1}", 13);
    snprintf(p, sizeof p, "%s/model.json", set);
    write_file(p, "{}", 2);
    snprintf(p, sizeof p, "%s/link.json", set);
    if (symlink("model.json", p) != 0) abort();
    snprintf(p, sizeof p, "%s/dangling.json", set);
    if (symlink("nowhere.json", p) != 0) abort();
    snprintf(p, sizeof p, "%s/fifo.json", set);
    if (mkfifo(p, 0600) != 0) abort();
    snprintf(p, sizeof p, "%s/sub", set);
    mkdir(p, 0700);
    snprintf(p, sizeof p, "%s/sub/inner.json", set);
    write_file(p, "[1]", 3);
    snprintf(p, sizeof p, "%s/sublink", set);
    if (symlink("sub", p) != 0) abort();
    snprintf(p, sizeof p, "%s/we\\ird.json", set);
    write_file(p, "{}", 2);
    return set;
}

TBX_TEST(local_provider_rules) {
    const char *set = make_local();
    tbx_alloc al;
    tbx_alloc_init(&al, NULL);
    tbx_provider *p = NULL;
    tbx_error e;
    CHECK_OK(tbx_provider_local(&p, &al, set, &e));
    if (!p) return;
    CHECK(p->is_dir && p->entry == NULL);
    CHECK_STR(p->dir, set);
    char want[700];
    snprintf(want, sizeof want, "%s/", set);
    CHECK_STR(p->prefix, want);
    CHECK(p->base_len == 3 && !memcmp(p->base, "set", 3));

    /* kinds: links followed, a dangling one missing, a FIFO neither file nor directory */
    struct { const char *name; tbx_entry_kind kind; uint64_t size; } kinds[] = {
        {"model.json", TBX_ENTRY_FILE, 2}, {"link.json", TBX_ENTRY_FILE, 2},
        {"dangling.json", TBX_ENTRY_MISSING, 0}, {"fifo.json", TBX_ENTRY_OTHER, 0},
        {"sub", TBX_ENTRY_DIR, 0}, {"sublink", TBX_ENTRY_DIR, 0},
        {"sub/inner.json", TBX_ENTRY_FILE, 3}, {"sublink/inner.json", TBX_ENTRY_FILE, 3},
        {"nope.json", TBX_ENTRY_MISSING, 0}, {"model.json/x", TBX_ENTRY_OTHER, 0},
    };
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        tbx_entry_kind k = TBX_ENTRY_OTHER;
        uint64_t size = 99;
        CHECK_OK(tbx_provider_kind(p, kinds[i].name, &k, &size, &e));
        CHECK_EQ(k, kinds[i].kind);
        CHECK_EQ(size, kinds[i].size);
    }

    /* opening: a regular file (through a link too); a FIFO refused at once (no writer is
     * waited for), a dangling link and a directory refused */
    tbx_source s;
    CHECK_OK(tbx_provider_open(p, "sublink/inner.json", false, &s, &e));
    uint8_t buf[3];
    CHECK_OK(tbx_source_read(&s, 0, buf, 3, "x", &e));
    CHECK(!memcmp(buf, "[1]", 3));
    tbx_source_close(&s);
    CHECK_EQ(tbx_provider_open(p, "fifo.json", true, &s, &e), TBX_E_IO);
    snprintf(want, sizeof want, "cannot read %s/fifo.json: not a regular file or block device",
             set);
    CHECK_STR(e.message, want);
    CHECK_EQ(tbx_provider_open(p, "dangling.json", false, &s, &e), TBX_E_IO);
    snprintf(want, sizeof want, "cannot open %s/dangling.json: %s", set, strerror(ENOENT));
    CHECK_STR(e.message, want);
    CHECK_EQ(tbx_provider_open(p, "sub", false, &s, &e), TBX_E_IO);
    CHECK(strstr(e.message, "is a directory") != NULL);
    /* the path itself: a directory */
    CHECK_EQ(tbx_provider_open(p, NULL, false, &s, &e), TBX_E_IO);

    /* nothing outside the set: outside.json is one level up */
    const char *bad[] = {"../outside.json", "sub/../../outside.json", "..", "/etc/passwd",
                         "sub/..", "sub//inner.json", "./model.json"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        tbx_entry_kind k;
        CHECK_EQ(tbx_provider_kind(p, bad[i], &k, NULL, &e), TBX_E_INVALID_ARG);
        CHECK_EQ(tbx_provider_open(p, bad[i], false, &s, &e), TBX_E_INVALID_ARG);
        CHECK(strstr(e.message, "a name in the set of") != NULL);
        CHECK_EQ(s.fd, -1);
    }

    /* listings: sorted, without "." and ".." ('\\' is a byte like any other) */
    tbx_namelist l;
    CHECK_OK(tbx_provider_list(p, NULL, 7, &al, &l, &e));
    const char *names[] = {"dangling.json", "fifo.json", "link.json", "model.json", "sub",
                           "sublink", "we\\ird.json"};
    CHECK_EQ(l.n, 7);
    for (size_t i = 0; i < 7 && i < l.n; i++) CHECK_STR(l.names[i], names[i]);
    tbx_namelist_free(&al, &l);
    CHECK_OK(tbx_provider_list(p, "sublink", 1, &al, &l, &e));
    CHECK(l.n == 1 && !strcmp(l.names[0], "inner.json"));
    tbx_namelist_free(&al, &l);
    tbx_entry_kind wk;
    uint64_t wsize = 0;
    CHECK_OK(tbx_provider_kind(p, "we\\ird.json", &wk, &wsize, &e));
    CHECK(wk == TBX_ENTRY_FILE && wsize == 2);
    /* too many entries: an error naming the directory, nothing kept */
    CHECK_EQ(tbx_provider_list(p, NULL, 6, &al, &l, &e), TBX_E_LIMIT);
    snprintf(want, sizeof want, "directory %s has more than 6 entries", set);
    CHECK_STR(e.message, want);
    CHECK(l.n == 0 && l.names == NULL);
    CHECK_EQ(tbx_provider_list(p, "nope", 5, &al, &l, &e), TBX_E_IO);
    snprintf(want, sizeof want, "cannot list directory %s/nope: %s", set, strerror(ENOENT));
    CHECK_STR(e.message, want);
    tbx_provider_free(p);
}

TBX_TEST(local_provider_paths) {
    const char *set = make_local();
    char setslash[700], file[700], dslash[700];
    snprintf(setslash, sizeof setslash, "%s/", set);
    snprintf(file, sizeof file, "%s/model.json", set);
    snprintf(dslash, sizeof dslash, "%s//model.json", set);
    /* path, directory, prefix, entry (NULL: the path is the directory), base name */
    struct { const char *path, *dir, *prefix, *entry, *base; } t[] = {
        {set, set, setslash, NULL, "set"},
        {setslash, setslash, setslash, NULL, "set"},
        {file, set, setslash, "model.json", "set"},
        {dslash, setslash, NULL, "model.json", "set"},
        {"no-such-model.gguf", "", "", "no-such-model.gguf", "."},
        {"/no-such-model.gguf", "/", "/", "no-such-model.gguf", "/"},
        {"/", "/", "/", NULL, "/"},
        {"a//b/x-00001-of-00002.gguf", "a//b", "a//b/", "x-00001-of-00002.gguf", "b"},
        {"a/b//x.gguf", "a/b/", "a/b//", "x.gguf", "b"},
        {"x.gguf/", "x.gguf", "x.gguf/", "", "x.gguf"},
    };
    tbx_alloc al;
    tbx_alloc_init(&al, NULL);
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        tbx_provider *p = NULL;
        tbx_error e;
        CHECK_OK(tbx_provider_local(&p, &al, t[i].path, &e));
        if (!p) continue;
        CHECK_STR(p->path, t[i].path);
        CHECK_STR(p->dir, t[i].dir);
        char pre[800];
        snprintf(pre, sizeof pre, "%s", t[i].prefix ? t[i].prefix : "");
        if (!t[i].prefix) snprintf(pre, sizeof pre, "%s//", set);
        CHECK_STR(p->prefix, pre);
        CHECK_EQ(p->is_dir, t[i].entry == NULL);
        if (t[i].entry) CHECK_STR(p->entry, t[i].entry);
        else CHECK(p->entry == NULL);
        CHECK(p->base_len == strlen(t[i].base) && !memcmp(p->base, t[i].base, p->base_len));
        char shown[900], want[900];
        snprintf(want, sizeof want, "%sy.json", pre);
        CHECK_EQ(tbx_provider_show(p, "y.json", shown, sizeof shown), strlen(want));
        CHECK_STR(shown, want);
        tbx_provider_free(p);
    }
    tbx_provider *p = (tbx_provider *)1;
    tbx_error e;
    CHECK_EQ(tbx_provider_local(&p, &al, "", &e), TBX_E_INVALID_ARG);
    CHECK(p == NULL);
}

/* An HF directory beside the local rules: a FIFO side file and a dangling link are no side
 * files; a shard that is a dangling link does not exist; a shard that is a FIFO cannot be
 * opened (and the open does not wait for a writer). */
static void write_st(const char *path, const char *header, const void *data, size_t dlen) {
    uint8_t buf[1024];
    size_t h = strlen(header), pad = (8 - h % 8) % 8;
    uint64_t n = h + pad;
    if (8 + n + dlen > sizeof buf) abort();
    for (int i = 0; i < 8; i++) buf[i] = (uint8_t)(n >> (8 * i));
    memcpy(buf + 8, header, h);
    memset(buf + 8 + h, ' ', pad);
    memcpy(buf + 8 + n, data, dlen);
    write_file(path, buf, 8 + n + dlen);
}

TBX_TEST(local_provider_in_hf_directories) {
    char d[600], p[800];
    snprintf(d, sizeof d, "%s", tmp("hfloc"));
    mkdir(d, 0700);
    static const float v[2] = {1, 2};
    snprintf(p, sizeof p, "%s/model.safetensors", d);
    write_st(p, "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", v, 8);
    snprintf(p, sizeof p, "%s/config.json", d);
    write_file(p, "{}", 2);
    snprintf(p, sizeof p, "%s/fifo.json", d);
    if (mkfifo(p, 0600) != 0) abort();
    snprintf(p, sizeof p, "%s/dangling.json", d);
    if (symlink("nowhere.json", p) != 0) abort();
    snprintf(p, sizeof p, "%s/we\\ird.json", d); /* an odd name, but a file's name */
    write_file(p, "[]", 2);
    tbx_file *f = NULL;
    tbx_error e;
    CHECK_OK(tbx_open_path(&f, d, NULL, &e));
    CHECK_EQ(tbx_section_count(f), 2);
    const char *secs[2] = {"config.json", "we\\ird.json"};
    for (uint64_t i = 0; i < 2 && i < tbx_section_count(f); i++) {
        tbx_section_info si = TBX_SECTION_INFO_INIT;
        CHECK_OK(tbx_section_info_get(f, i, &si));
        CHECK_STR(si.name, secs[i]);
    }
    tbx_close(f);

    /* sharded: shard 2 a dangling link, then a FIFO */
    snprintf(p, sizeof p, "%s/model.safetensors", d);
    unlink(p);
    snprintf(p, sizeof p, "%s/model-00001-of-00002.safetensors", d);
    write_st(p, "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", v, 8);
    snprintf(p, sizeof p, "%s/model-00002-of-00002.safetensors", d);
    if (symlink("nowhere.safetensors", p) != 0) abort();
    const char *index = "{\"weight_map\":{\"a\":\"model-00001-of-00002.safetensors\","
                        "\"b\":\"model-00002-of-00002.safetensors\"}}";
    char ip[800];
    snprintf(ip, sizeof ip, "%s/model.safetensors.index.json", d);
    write_file(ip, index, strlen(index));
    CHECK_EQ(tbx_open_path(&f, d, NULL, &e), TBX_E_NOT_FOUND);
    CHECK(strstr(e.message, "\"model-00002-of-00002.safetensors\", which does not exist") != NULL);
    unlink(p);
    if (mkfifo(p, 0600) != 0) abort();
    CHECK_EQ(tbx_open_path(&f, d, NULL, &e), TBX_E_IO);
    CHECK(strstr(e.message, "shard \"model-00002-of-00002.safetensors\" cannot be opened: "
                            "cannot read ") != NULL);
    CHECK(strstr(e.message, "not a regular file or block device") != NULL);
    CHECK(f == NULL);
}

/* ------------------------------------------------------------------------------------------ */
/* Allocation failures                                                                         */
/* ------------------------------------------------------------------------------------------ */
typedef struct fa_state {
    uint64_t n, fail_at;
    bool fired;
    int64_t live_blocks, live_bytes;
} fa_state;
static fa_state FA;

#define HDR 16u
static void *fa_alloc(void *ud, size_t size) {
    (void)ud;
    if (++FA.n == FA.fail_at) { FA.fired = true; return NULL; }
    unsigned char *p = malloc(size + HDR);
    if (!p) return NULL;
    memcpy(p, &size, sizeof size);
    FA.live_blocks++;
    FA.live_bytes += (int64_t)size;
    return p + HDR;
}
static void fa_free(void *ud, void *ptr, size_t size) {
    (void)ud;
    if (!ptr) return;
    size_t was;
    memcpy(&was, (unsigned char *)ptr - HDR, sizeof was);
    if (was != size) abort(); /* every free gives back the size allocated */
    FA.live_blocks--;
    FA.live_bytes -= (int64_t)was;
    free((unsigned char *)ptr - HDR);
}
static void *fa_realloc(void *ud, void *ptr, size_t old_size, size_t new_size) {
    if (!ptr) return fa_alloc(ud, new_size);
    if (++FA.n == FA.fail_at) { FA.fired = true; return NULL; }
    size_t was;
    memcpy(&was, (unsigned char *)ptr - HDR, sizeof was);
    if (was != old_size) abort();
    unsigned char *p = realloc((unsigned char *)ptr - HDR, new_size + HDR);
    if (!p) return NULL;
    memcpy(p, &new_size, sizeof new_size);
    FA.live_bytes += (int64_t)new_size - (int64_t)was;
    return p + HDR;
}
static const tbx_allocator FAIL_ALLOC = {fa_alloc, fa_realloc, fa_free, NULL};

/* A copy of make_local()'s set at a path of more than 1 KiB (names are joined on the heap). */
static const char *make_deep(void) {
    static char deep[2000];
    if (deep[0]) return deep;
    char comp[201];
    memset(comp, 'd', 200);
    comp[200] = 0;
    snprintf(deep, sizeof deep, "%s", tmp("deep"));
    mkdir(deep, 0700);
    for (int i = 0; i < 5; i++) {
        size_t n = strlen(deep);
        snprintf(deep + n, sizeof deep - n, "/%s", comp);
        if (mkdir(deep, 0700) != 0) abort();
    }
    size_t n = strlen(deep);
    snprintf(deep + n, sizeof deep - n, "/set");
    mkdir(deep, 0700);
    const char *files[][2] = {{"model.json", "{}"}, {"dangling.json", NULL},
                              {"fifo.json", NULL}, {"link.json", NULL}, {"sub", NULL},
                              {"sub/inner.json", "[1]"}, {"sublink", NULL}, {"we\\ird.json", "{}"}};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char p[2300];
        snprintf(p, sizeof p, "%s/%s", deep, files[i][0]);
        if (files[i][1]) write_file(p, files[i][1], strlen(files[i][1]));
        else if (!strcmp(files[i][0], "sub")) mkdir(p, 0700);
        else if (!strcmp(files[i][0], "fifo.json")) { if (mkfifo(p, 0600) != 0) abort(); }
        else if (symlink(!strcmp(files[i][0], "link.json") ? "model.json"
                         : !strcmp(files[i][0], "sublink") ? "sub" : "nowhere.json", p) != 0)
            abort();
    }
    if (strlen(deep) <= 1024) abort();
    return deep;
}

/* Every call of the local provider with the Nth allocation failing: TBX_OK or TBX_E_NOMEM,
 * a kind answered is the true one, nothing left allocated; at a short path and at one of more
 * than 1 KiB. */
static void local_calls_under_failures(const char *set) {
    tbx_alloc al;
    tbx_alloc_init(&al, &FAIL_ALLOC);
    uint64_t runs = 0, bad = 0;
    for (uint64_t at = 1; at < 1000; at++) {
        memset(&FA, 0, sizeof FA);
        FA.fail_at = at;
        tbx_provider *p = NULL;
        tbx_error e;
        tbx_status st[5];
        int nst = 0;
        st[nst++] = tbx_provider_local(&p, &al, set, &e);
        if (p) {
            tbx_namelist l;
            st[nst++] = tbx_provider_list(p, NULL, 100, &al, &l, &e);
            if (st[nst - 1] == TBX_OK && l.n != 7) bad++;
            tbx_namelist_free(&al, &l);
            tbx_entry_kind k = TBX_ENTRY_OTHER;
            st[nst++] = tbx_provider_kind(p, "link.json", &k, NULL, &e);
            if (st[nst - 1] == TBX_OK && k != TBX_ENTRY_FILE) bad++;
            tbx_source s;
            st[nst++] = tbx_provider_open(p, "sub/inner.json", false, &s, &e);
            tbx_source_close(&s);
            st[nst++] = tbx_provider_list(p, "sub", 100, &al, &l, &e);
            tbx_namelist_free(&al, &l);
            tbx_provider_free(p);
        }
        for (int i = 0; i < nst; i++)
            if (st[i] != TBX_OK && (st[i] != TBX_E_NOMEM || e.code != TBX_E_NOMEM)) bad++;
        if (FA.live_blocks || FA.live_bytes) bad++;
        if (!FA.fired) break;
        runs++;
    }
    CHECK_EQ(bad, 0);
    CHECK(runs >= 6);
    printf("local provider calls (a path of %zu bytes): %llu allocation failures injected\n",
           strlen(set), (unsigned long long)runs);
}

TBX_TEST(local_provider_allocation_failures) {
    local_calls_under_failures(make_local());
    local_calls_under_failures(make_deep());
}

/* Opening a set by path with the Nth allocation failing: the set opens whole (every tensor,
 * every section) or fails with TBX_E_NOMEM: never a missing shard, side file or model. */
static void open_under_failures(const char *path) {
    tbx_open_options o;
    tbx_open_options_init(&o);
    o.allocator = &FAIL_ALLOC;
    memset(&FA, 0, sizeof FA);
    tbx_file *f = NULL;
    tbx_error e;
    CHECK_OK(tbx_open_path(&f, path, &o, &e));
    if (!f) return;
    const uint64_t nt = tbx_tensor_count(f), ns = tbx_section_count(f),
                   np = tbx_file_part_count(f);
    tbx_close(f);
    uint64_t runs = 0, bad = 0;
    for (uint64_t at = 1; at < 100000; at++) {
        memset(&FA, 0, sizeof FA);
        FA.fail_at = at;
        f = NULL;
        memset(&e, 0, sizeof e);
        tbx_status st = tbx_open_path(&f, path, &o, &e);
        bool ok = st == TBX_OK ? tbx_tensor_count(f) == nt && tbx_section_count(f) == ns &&
                                     tbx_file_part_count(f) == np
                               : st == TBX_E_NOMEM && e.code == TBX_E_NOMEM && f == NULL;
        tbx_close(f);
        ok = ok && !FA.live_blocks && !FA.live_bytes;
        if (!ok && bad++ < 3)
            fprintf(stderr, "%s: allocation %llu failing: %s (%s)\n", path,
                    (unsigned long long)at, tbx_status_name(st), e.message);
        if (!FA.fired) break;
        runs++;
    }
    CHECK_EQ(bad, 0);
    CHECK(runs >= 10);
    printf("%-60.60s %5llu allocation failures injected\n", path, (unsigned long long)runs);
}

TBX_TEST(set_opens_under_allocation_failures) {
    open_under_failures(src_path("tests/data/mcf/hf/sharded-qwen"));
    open_under_failures(src_path("examples/tiny-embedder"));
    unsigned n = make_split("split-fa");
    CHECK(n >= 3);
    char first[700];
    snprintf(first, sizeof first, "%s/mlp-00001-of-%05u.gguf", tmp("split-fa"), n);
    open_under_failures(first);
}

TBX_TEST_MAIN()
