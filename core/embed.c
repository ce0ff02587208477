#include "embed.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "npy.h"

#define FNV_OFFSET 0xcbf29ce484222325ULL
#define FNV_PRIME  0x100000001b3ULL

static inline uint64_t fmix64(uint64_t k)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    k *= 0xc4ceb9fe1a85ec53ULL;
    k ^= k >> 33;
    return k;
}

/* Bytes of the separator starting at p (0 if p starts a word byte). ASCII bytes other than
 * letters and digits separate; so do the UTF-8 encodings of U+00A0..U+00BF (no-break space,
 * Latin-1 punctuation: C2 A0..C2 BF) and of U+2000..U+207F (general punctuation: curly
 * quotes, dashes, ellipsis: E2 80 xx and E2 81 xx), so that "\u201cword" is the word "word". */
static inline size_t sep_len(const unsigned char *p, const unsigned char *end)
{
    unsigned char c = p[0];
    if (c < 0x80)
        return ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) ? 0 : 1;
    if (c == 0xC2 && end - p >= 2 && p[1] >= 0xA0 && p[1] <= 0xBF) return 2;
    if (c == 0xE2 && end - p >= 3 && (p[1] == 0x80 || p[1] == 0x81) && p[2] >= 0x80 && p[2] <= 0xBF)
        return 3;
    return 0;
}

static inline unsigned char lower(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') ? (unsigned char)(c + 32) : c;
}

static inline uint64_t fnv_bytes(uint64_t h, const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        h ^= lower(p[i]);
        h *= FNV_PRIME;
    }
    return h;
}

uint64_t dga_hash_feature(const char *bytes, size_t len)
{
    return fmix64(fnv_bytes(FNV_OFFSET, (const unsigned char *)bytes, len));
}

/* ------------------------------------------------------------------ hash384 */

typedef struct {
    float    *idf;        /* DGA_HASH_BUCKETS */
    uint32_t *df;         /* during fitting only */
    uint32_t *last_seen;  /* per bucket: 1 + index of the last text that counted it */
    int64_t   fitted;     /* texts seen by fit_add in the current fit */
    int64_t   n_fit;      /* texts behind the current idf table */
    int       dim;
} hash_state;

/* The feature hashes of a text, in a growable buffer. */
typedef struct {
    uint64_t *h;
    size_t    n, cap;
} feats;

static dga_status feats_push(feats *f, uint64_t h)
{
    if (f->n == f->cap) {
        size_t cap = f->cap ? f->cap * 2 : 256;
        uint64_t *nh = realloc(f->h, cap * sizeof *nh);
        if (!nh) return dga_fail(DGA_ERR_NOMEM, "embed: cannot grow feature buffer to %zu", cap);
        f->h = nh;
        f->cap = cap;
    }
    f->h[f->n++] = h;
    return DGA_OK;
}

static dga_status extract(const char *text, size_t len, feats *f)
{
    const unsigned char *p = (const unsigned char *)text, *end = p + len;
    const unsigned char *prev = NULL;
    size_t prev_len = 0;
    f->n = 0;
    while (p < end) {
        size_t sl;
        while (p < end && (sl = sep_len(p, end)) > 0) p += sl;
        if (p >= end) break;
        const unsigned char *w = p;
        while (p < end && sep_len(p, end) == 0) p++;
        size_t wl = (size_t)(p - w);
        dga_status st = feats_push(f, fmix64(fnv_bytes(FNV_OFFSET, w, wl)) & ~1ULL);
        if (st != DGA_OK) return st;
        if (prev) {
            uint64_t h = fnv_bytes(FNV_OFFSET, prev, prev_len);
            h = (h ^ ' ') * FNV_PRIME;
            st = feats_push(f, fmix64(fnv_bytes(h, w, wl)) | 1ULL);
            if (st != DGA_OK) return st;
        }
        prev = w;
        prev_len = wl;
    }
    return DGA_OK;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

static dga_status hash_fit_add(dga_embedder *e, const char *text, size_t len)
{
    hash_state *s = e->state;
    if (!s->df) {
        s->df = calloc(DGA_HASH_BUCKETS, sizeof *s->df);
        s->last_seen = calloc(DGA_HASH_BUCKETS, sizeof *s->last_seen);
        if (!s->df || !s->last_seen) {
            free(s->df);
            free(s->last_seen);
            s->df = s->last_seen = NULL;
            return dga_fail(DGA_ERR_NOMEM, "embed: cannot allocate the document-frequency table");
        }
        s->fitted = 0;
    }
    if (s->fitted >= UINT32_MAX - 1)
        return dga_fail(DGA_ERR_INVALID, "embed: more than 2^32 texts in one fit");
    feats f = {0};
    dga_status st = extract(text, len, &f);
    if (st == DGA_OK) {
        uint32_t mark = (uint32_t)(s->fitted + 1);
        for (size_t i = 0; i < f.n; i++) {
            uint32_t b = (uint32_t)(f.h[i] >> 44);
            if (s->last_seen[b] != mark) {
                s->last_seen[b] = mark;
                s->df[b]++;
            }
        }
        s->fitted++;
    }
    free(f.h);
    return st;
}

static dga_status hash_fit_end(dga_embedder *e)
{
    hash_state *s = e->state;
    int64_t n = s->df ? s->fitted : 0;
    for (uint32_t b = 0; b < DGA_HASH_BUCKETS; b++) {
        double df = s->df ? s->df[b] : 0;
        s->idf[b] = n ? (float)(log((1.0 + (double)n) / (1.0 + df)) + 1.0) : 1.0f;
    }
    s->n_fit = n;
    free(s->df);
    free(s->last_seen);
    s->df = s->last_seen = NULL;
    s->fitted = 0;
    return DGA_OK;
}

static dga_status hash_embed(const dga_embedder *e, const char *text, size_t len, float *out)
{
    const hash_state *s = e->state;
    feats f = {0};
    int D = s->dim;
    double *acc = calloc((size_t)D, sizeof *acc);
    if (!acc) return dga_fail(DGA_ERR_NOMEM, "embed: out of memory");
    dga_status st = extract(text, len, &f);
    if (st != DGA_OK) {
        free(f.h);
        free(acc);
        return st;
    }
    /* tf per feature: equal hashes are adjacent after sorting. */
    if (f.n > 1) qsort(f.h, f.n, sizeof *f.h, cmp_u64);
    for (size_t i = 0; i < f.n;) {
        size_t j = i + 1;
        while (j < f.n && f.h[j] == f.h[i]) j++;
        uint64_t h = f.h[i];
        double w = (1.0 + log((double)(j - i))) * sqrt((double)s->idf[h >> 44]);
        if (h & 1) w *= DGA_HASH_BIGRAM_WEIGHT;
        int dim = (int)((h & 0xffffffffULL) % (uint64_t)D);
        acc[dim] += ((h >> 32) & 1) ? -w : w;
        i = j;
    }
    free(f.h);
    double norm = 0;
    for (int d = 0; d < D; d++) norm += acc[d] * acc[d];
    double inv = norm > 0 ? 1.0 / sqrt(norm) : 0.0;
    for (int d = 0; d < D; d++) out[d] = (float)(acc[d] * inv);
    free(acc);
    return DGA_OK;
}

static dga_status hash_save(const dga_embedder *e, const char *dir)
{
    const hash_state *s = e->state;
    char path[4096];
    snprintf(path, sizeof path, "%s/idf.npy", dir);
    int64_t shape = DGA_HASH_BUCKETS;
    dga_status st = dga_npy_write(path, DGA_NPY_F32, 1, &shape, s->idf);
    if (st != DGA_OK) return st;
    snprintf(path, sizeof path, "%s/idf_meta.npy", dir);
    int64_t one = 1;
    return dga_npy_write(path, DGA_NPY_I64, 1, &one, &s->n_fit);
}

static dga_status hash_load(dga_embedder *e, const char *dir)
{
    hash_state *s = e->state;
    char path[4096];
    snprintf(path, sizeof path, "%s/idf.npy", dir);
    dga_npy a;
    dga_status st = dga_npy_map_expect(path, DGA_NPY_F32, 1, &a);
    if (st != DGA_OK) return st;
    if (a.numel != DGA_HASH_BUCKETS) {
        dga_npy_free(&a);
        return dga_fail(DGA_ERR_FORMAT, "%s: expected %u idf entries, found %lld", path,
                        DGA_HASH_BUCKETS, (long long)a.numel);
    }
    const float *idf = a.data;
    for (uint32_t b = 0; b < DGA_HASH_BUCKETS; b++)
        if (!(idf[b] > 0) || !isfinite(idf[b])) {
            st = dga_fail(DGA_ERR_FORMAT, "%s: idf[%u] = %g (expected a positive finite number)",
                          path, b, (double)idf[b]);
            dga_npy_free(&a);
            return st;
        }
    memcpy(s->idf, idf, DGA_HASH_BUCKETS * sizeof *s->idf);
    dga_npy_free(&a);
    snprintf(path, sizeof path, "%s/idf_meta.npy", dir);
    if (dga_npy_map_expect(path, DGA_NPY_I64, 1, &a) == DGA_OK) {
        if (a.numel == 1) s->n_fit = ((int64_t *)a.data)[0];
        dga_npy_free(&a);
    }
    return DGA_OK;
}

static void hash_destroy(dga_embedder *e)
{
    hash_state *s = e->state;
    if (s) {
        free(s->idf);
        free(s->df);
        free(s->last_seen);
        free(s);
    }
    free(e);
}

static dga_status hash_new(const char *name, int dim, dga_embedder **out)
{
    dga_embedder *e = calloc(1, sizeof *e);
    hash_state *s = calloc(1, sizeof *s);
    float *idf = malloc(DGA_HASH_BUCKETS * sizeof *idf);
    if (!e || !s || !idf) {
        free(e);
        free(s);
        free(idf);
        return dga_fail(DGA_ERR_NOMEM, "embed: cannot allocate the hash384 embedder");
    }
    for (uint32_t b = 0; b < DGA_HASH_BUCKETS; b++) idf[b] = 1.0f;
    s->idf = idf;
    s->dim = dim;
    e->name = name;
    e->dim = dim;
    e->state = s;
    e->fit_add = hash_fit_add;
    e->fit_end = hash_fit_end;
    e->embed = hash_embed;
    e->save = hash_save;
    e->load = hash_load;
    e->destroy = hash_destroy;
    *out = e;
    return DGA_OK;
}

const float *dga_hash384_idf(const dga_embedder *e) { return ((const hash_state *)e->state)->idf; }
int64_t dga_hash384_fitted_texts(const dga_embedder *e)
{
    return ((const hash_state *)e->state)->n_fit;
}

/* ------------------------------------------------------------------ generic */

dga_status dga_embedder_new(const char *name, dga_embedder **out)
{
    *out = NULL;
    if (name && strcmp(name, "hash384") == 0) return hash_new("hash384", DGA_HASH_DIM, out);
    if (name && strcmp(name, "hash1024") == 0) return hash_new("hash1024", 1024, out);
    if (name && strncmp(name, "gpt:", 4) == 0 && name[4]) return dga_embedder_gpt_new(name + 4, out);
    if (name && strcmp(name, "gpt") == 0) return dga_embedder_gpt_new(NULL, out);
    return dga_fail(DGA_ERR_INVALID, "unknown embedder '%s' (known: hash384, hash1024, gpt:CHECKPOINT)",
                    name ? name : "(null)");
}

void dga_embedder_free(dga_embedder *e)
{
    if (e) e->destroy(e);
}

dga_status dga_embedder_fit(dga_embedder *e, int64_t n, const char *const *texts,
                            const size_t *lens)
{
    if (!e->fit_add) return DGA_OK;
    for (int64_t i = 0; i < n; i++) {
        dga_status st = e->fit_add(e, texts[i], lens ? lens[i] : strlen(texts[i]));
        if (st != DGA_OK) return st;
    }
    return e->fit_end(e);
}

dga_status dga_embedder_embed_many(const dga_embedder *e, int64_t n, const char *const *texts,
                                   const size_t *lens, float *out)
{
    for (int64_t i = 0; i < n; i++) {
        dga_status st = e->embed(e, texts[i], lens ? lens[i] : strlen(texts[i]),
                                 out + (size_t)i * (size_t)e->dim);
        if (st != DGA_OK) return st;
    }
    return DGA_OK;
}
