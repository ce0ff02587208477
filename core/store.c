/* Domain store: the builder (sequences -> embeddings -> hierarchical k-means -> directory)
 * and the reader (mmap'ed arrays, validated at open). Layout in store.h. */
#include "store.h"

#include <cblas.h>
#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "bpe.h"
#include "fileio.h"
#include "npy.h"
#include "stale.h"
#include "store_crc.h"

#define FORMAT_NAME "dgalua-store"
/* 2 added "checksums" (store_crc.h). A version-1 store (built before) still opens, unchecked. */
#define FORMAT_VERSION 2

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ================================================================== builder */

struct dga_store_builder {
    int      seq_len, vocab;
    int32_t  eot;
    int32_t *tok;          /* nseq x seq_len */
    int64_t *seq_doc;
    int32_t *seq_source;
    int64_t  nseq, cap;
    int32_t *cur;          /* the current source's incomplete sequence */
    int      cur_n;
    int64_t  cur_doc;
    char   **sources;
    int      nsources;
    int64_t  ndocs;
    int64_t  dropped;      /* tokens of incomplete tails */
};

dga_status dga_store_builder_new(int seq_len, int vocab_size, int32_t eot,
                                 dga_store_builder **out)
{
    *out = NULL;
    if (seq_len < 2)
        return dga_fail(DGA_ERR_INVALID, "store: seq_len %d (expected >= 2)", seq_len);
    if (vocab_size < 1)
        return dga_fail(DGA_ERR_INVALID, "store: vocab_size %d (expected >= 1)", vocab_size);
    if (eot < 0 || eot >= vocab_size)
        return dga_fail(DGA_ERR_INVALID, "store: eot id %d outside [0, %d)", eot, vocab_size);
    dga_store_builder *b = calloc(1, sizeof *b);
    if (!b || !(b->cur = malloc((size_t)seq_len * sizeof *b->cur))) {
        free(b);
        return dga_fail(DGA_ERR_NOMEM, "store: cannot allocate a builder");
    }
    b->seq_len = seq_len;
    b->vocab = vocab_size;
    b->eot = eot;
    *out = b;
    return DGA_OK;
}

void dga_store_builder_free(dga_store_builder *b)
{
    if (!b) return;
    free(b->tok), free(b->seq_doc), free(b->seq_source), free(b->cur);
    for (int i = 0; i < b->nsources; i++) free(b->sources[i]);
    free(b->sources);
    free(b);
}

dga_status dga_store_builder_add_source(dga_store_builder *b, const char *name)
{
    char **ns = realloc(b->sources, (size_t)(b->nsources + 1) * sizeof *ns);
    if (!ns) return dga_fail(DGA_ERR_NOMEM, "store: cannot add source '%s'", name);
    b->sources = ns;
    if (!(ns[b->nsources] = strdup(name)))
        return dga_fail(DGA_ERR_NOMEM, "store: cannot add source '%s'", name);
    b->nsources++;
    b->dropped += b->cur_n;
    b->cur_n = 0;
    return DGA_OK;
}

static dga_status push_token(dga_store_builder *b, int32_t id)
{
    if (b->cur_n == 0) b->cur_doc = b->ndocs;
    b->cur[b->cur_n++] = id;
    if (b->cur_n < b->seq_len) return DGA_OK;
    if (b->nseq == b->cap) {
        int64_t cap = b->cap ? b->cap * 2 : 1024;
        int32_t *t = realloc(b->tok, (size_t)cap * b->seq_len * sizeof *t);
        if (t) b->tok = t;
        int64_t *d = realloc(b->seq_doc, (size_t)cap * sizeof *d);
        if (d) b->seq_doc = d;
        int32_t *s = realloc(b->seq_source, (size_t)cap * sizeof *s);
        if (s) b->seq_source = s;
        if (!t || !d || !s)
            return dga_fail(DGA_ERR_NOMEM, "store: cannot grow to %lld sequences", (long long)cap);
        b->cap = cap;
    }
    memcpy(b->tok + b->nseq * b->seq_len, b->cur, (size_t)b->seq_len * sizeof *b->cur);
    b->seq_doc[b->nseq] = b->cur_doc;
    b->seq_source[b->nseq] = b->nsources - 1;
    b->nseq++;
    b->cur_n = 0;
    return DGA_OK;
}

dga_status dga_store_builder_add_doc(dga_store_builder *b, const int32_t *ids, size_t n)
{
    if (b->nsources == 0)
        return dga_fail(DGA_ERR_INVALID, "store: add_doc before any add_source");
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= b->vocab)
            return dga_fail(DGA_ERR_INVALID,
                            "store: document %lld: token %zu is %d, outside [0, %d)",
                            (long long)b->ndocs, i, ids[i], b->vocab);
    for (size_t i = 0; i < n; i++) {
        dga_status st = push_token(b, ids[i]);
        if (st != DGA_OK) return st;
    }
    dga_status st = push_token(b, b->eot);
    b->ndocs++;
    return st;
}

int64_t dga_store_builder_sequences(const dga_store_builder *b) { return b->nseq; }
int64_t dga_store_builder_documents(const dga_store_builder *b) { return b->ndocs; }

/* ------------------------------------------------------------------ directory helpers */

static int path_join(char *buf, size_t size, const char *dir, const char *name)
{
    size_t a = strlen(dir), b = strlen(name);
    if (a + b + 2 > size) {
        buf[0] = 0;
        return 0;
    }
    memcpy(buf, dir, a);
    buf[a] = '/';
    memcpy(buf + a + 1, name, b + 1);
    return 1;
}

/* Removes a flat directory of files (what a store is). */
static dga_status remove_flat_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return dga_fail_errno(DGA_ERR_IO, "%s: cannot list", dir);
    struct dirent *e;
    char p[4096];
    dga_status st = DGA_OK;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        if (!path_join(p, sizeof p, dir, e->d_name) || unlink(p) != 0) {
            st = dga_fail_errno(DGA_ERR_IO, "%s: cannot remove", p);
            break;
        }
    }
    closedir(d);
    if (st == DGA_OK && rmdir(dir) != 0) st = dga_fail_errno(DGA_ERR_IO, "%s: cannot remove", dir);
    return st;
}

static int dir_is_empty(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return 0;
    struct dirent *e;
    int empty = 1;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) empty = 0;
    closedir(d);
    return empty;
}

/* ------------------------------------------------------------------ write */

/* Decoded text of sequence r: pieces between EOTs, joined by "\n\n". */
static dga_status decode_seq(const dga_store_builder *b, const dga_store_write_opts *o, int64_t r,
                             char **text, size_t *len)
{
    const int32_t *ids = b->tok + r * b->seq_len;
    size_t cap = 256, n = 0;
    char *out = malloc(cap);
    if (!out) return dga_fail(DGA_ERR_NOMEM, "store: out of memory decoding sequence %lld", (long long)r);
    int start = 0;
    for (int i = 0; i <= b->seq_len; i++) {
        if (i < b->seq_len && ids[i] != b->eot) continue;
        if (i > start) {
            char *piece = NULL;
            size_t pl = 0;
            dga_status st = o->decode(o->decode_ud, ids + start, (size_t)(i - start), &piece, &pl);
            if (st != DGA_OK) {
                free(out);
                return st;
            }
            if (n + pl + 3 > cap) {
                while (n + pl + 3 > cap) cap *= 2;
                char *no = realloc(out, cap);
                if (!no) {
                    free(out), free(piece);
                    return dga_fail(DGA_ERR_NOMEM, "store: out of memory decoding sequence %lld",
                                    (long long)r);
                }
                out = no;
            }
            if (n) {
                out[n++] = '\n';
                out[n++] = '\n';
            }
            memcpy(out + n, piece, pl);
            n += pl;
            free(piece);
        }
        start = i + 1;
    }
    out[n] = 0;
    *text = out;
    *len = n;
    return DGA_OK;
}

static json_t *u64_array(const int64_t *v, int n)
{
    json_t *a = json_array();
    for (int i = 0; i < n; i++) json_array_append_new(a, json_integer(v[i]));
    return a;
}

/* A store must be the same whatever thread count the process that builds it runs with (a
 * store is cached and shared by runs with other counts). OpenBLAS splits a matrix-vector
 * product differently over 1 and 2 threads, and the last bits move points between clusters, so
 * every store is embedded and clustered with this many BLAS threads, and texts are assigned to
 * its clusters (histograms, nearest domains) with the same count, so that an IS histogram does
 * not depend on the caller's count either. 2: the count the second edition's lowdata store was
 * built with. */
#define STORE_BLAS_THREADS 2

/* Sets the store's BLAS thread count and returns the caller's, for store_blas_leave. */
static int store_blas_enter(void)
{
    int caller = openblas_get_num_threads();
    openblas_set_num_threads(STORE_BLAS_THREADS);
    return caller;
}

static void store_blas_leave(int caller) { openblas_set_num_threads(caller); }

static dga_status write_manifest(const dga_store_builder *b, const dga_store_write_opts *o,
                                 const dga_embedder *emb, const dga_hkmeans *h, const char *dir,
                                 const char *tok_dtype, const int64_t *source_seqs)
{
    json_t *sums;
    dga_status cst = dga_store_checksums_make(dir, &sums);   /* every file is written by now */
    if (cst != DGA_OK) return cst;
    json_t *m = json_object();
    json_object_set_new(m, "format", json_string(FORMAT_NAME));
    json_object_set_new(m, "version", json_integer(FORMAT_VERSION));
    json_object_set_new(m, "seq_len", json_integer(b->seq_len));
    json_object_set_new(m, "vocab_size", json_integer(b->vocab));
    json_object_set_new(m, "eot", json_integer(b->eot));
    json_object_set_new(m, "token_dtype", json_string(tok_dtype));
    int64_t lv[DGA_STORE_MAX_LEVELS];
    for (int l = 0; l < o->nlevels; l++) lv[l] = o->levels[l];
    json_object_set_new(m, "levels", u64_array(lv, o->nlevels));
    json_object_set_new(m, "k", u64_array(h->k, o->nlevels));
    json_object_set_new(m, "spherical", json_boolean(o->spherical));
    json_object_set_new(m, "assignment",
                        json_string(o->spherical
                                        ? "cosine to L2-normalised centroids (spherical k-means)"
                                        : "euclidean to mean centroids"));
    json_t *e = json_object();
    json_object_set_new(e, "name", json_string(emb->name));
    json_object_set_new(e, "dim", json_integer(emb->dim));
    json_object_set_new(m, "embedder", e);
    json_t *km = json_object();
    json_object_set_new(km, "seed", json_integer((json_int_t)o->seed));
    json_object_set_new(km, "iters", json_integer(o->iters > 0 ? o->iters : 25));
    json_object_set_new(km, "blas_threads", json_integer(STORE_BLAS_THREADS));
    json_object_set_new(m, "kmeans", km);
    json_object_set_new(m, "tokenizer",
                        o->tokenizer_path ? json_string("tokenizer.json") : json_null());
    json_object_set_new(m, "sequences", json_integer(b->nseq));
    json_object_set_new(m, "tokens", json_integer(b->nseq * b->seq_len));
    json_object_set_new(m, "documents", json_integer(b->ndocs));
    json_t *src = json_array();
    for (int i = 0; i < b->nsources; i++) json_array_append_new(src, json_string(b->sources[i]));
    json_object_set_new(m, "sources", src);
    json_object_set_new(m, "source_sequences", u64_array(source_seqs, b->nsources));
    json_object_set_new(m, "checksums", sums);
    char *text = json_dumps(m, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    json_decref(m);
    if (!text) return dga_fail(DGA_ERR_NOMEM, "store: cannot serialise manifest.json");
    size_t len = strlen(text);
    char path[4096];
    path_join(path, sizeof path, dir, "manifest.json");
    const void *parts[2] = {text, "\n"};
    size_t sizes[2] = {len, 1};
    dga_status st = dga_write_file_atomic(path, 2, parts, sizes);
    free(text);
    return st;
}

/* x[r] <- x[perm[r]] for every row r, in place: each cycle of perm is walked once, with one
 * row held aside (the embeddings can be most of the memory, so no second copy). */
static dga_status permute_rows(float *x, const int64_t *perm, int64_t n, int dim)
{
    unsigned char *done = calloc((size_t)n, 1);
    float *held = malloc((size_t)dim * sizeof *held);
    if (!done || !held) {
        free(done), free(held);
        return dga_fail(DGA_ERR_NOMEM, "store: out of memory reordering embeddings");
    }
    const size_t row = (size_t)dim * sizeof *x;
    for (int64_t start = 0; start < n; start++) {
        if (done[start]) continue;
        memcpy(held, x + start * dim, row);
        for (int64_t r = start;;) {
            int64_t src = perm[r];
            done[r] = 1;
            if (src == start) {
                memcpy(x + r * dim, held, row);
                break;
            }
            memcpy(x + r * dim, x + src * dim, row);
            r = src;
        }
    }
    free(done), free(held);
    return DGA_OK;
}

/* x: the embeddings in builder order when o->save_embeddings (reordered here), else NULL. */
static dga_status write_arrays(const dga_store_builder *b, const dga_store_write_opts *o,
                               const dga_embedder *emb, const dga_hkmeans *h, float *x,
                               const char *dir)
{
    int L = o->nlevels;
    int64_t n = b->nseq, kleaf = h->k[L - 1];
    dga_status st = DGA_OK;
    char path[4096], name[64];
    /* Rows ordered by leaf, stable in corpus order. */
    int64_t *off = calloc((size_t)kleaf + 1, sizeof *off);
    int64_t *perm = malloc((size_t)n * sizeof *perm);
    int64_t *seq_doc = malloc((size_t)n * sizeof *seq_doc);
    int32_t *seq_src = malloc((size_t)n * sizeof *seq_src);
    void *tok = malloc((size_t)n * b->seq_len * sizeof(int32_t));
    int64_t *source_seqs = calloc((size_t)b->nsources + 1, sizeof *source_seqs);
    if (!off || !perm || !seq_doc || !seq_src || !tok || !source_seqs) {
        st = dga_fail(DGA_ERR_NOMEM, "store: out of memory writing %lld sequences", (long long)n);
        goto done;
    }
    for (int64_t i = 0; i < n; i++) off[h->leaf[i] + 1]++;
    for (int64_t j = 0; j < kleaf; j++) off[j + 1] += off[j];
    {
        int64_t *pos = malloc((size_t)kleaf * sizeof *pos);
        if (!pos) {
            st = dga_fail(DGA_ERR_NOMEM, "store: out of memory");
            goto done;
        }
        memcpy(pos, off, (size_t)kleaf * sizeof *pos);
        for (int64_t i = 0; i < n; i++) perm[pos[h->leaf[i]]++] = i;
        free(pos);
    }
    int small = b->vocab <= 65536;
    for (int64_t r = 0; r < n; r++) {
        int64_t i = perm[r];
        const int32_t *src = b->tok + i * b->seq_len;
        if (small)
            for (int t = 0; t < b->seq_len; t++)
                ((uint16_t *)tok)[r * b->seq_len + t] = (uint16_t)src[t];
        else
            memcpy((int32_t *)tok + r * b->seq_len, src, (size_t)b->seq_len * sizeof(int32_t));
        seq_doc[r] = b->seq_doc[i];
        seq_src[r] = b->seq_source[i];
        source_seqs[b->seq_source[i]]++;
    }
    int64_t shape2[2] = {n, b->seq_len}, n1 = n, kp1 = kleaf + 1;
    path_join(path, sizeof path, dir, "tokens.npy");
    if ((st = dga_npy_write(path, small ? DGA_NPY_U16 : DGA_NPY_I32, 2, shape2, tok))) goto done;
    path_join(path, sizeof path, dir, "leaf_offsets.npy");
    if ((st = dga_npy_write(path, DGA_NPY_U64, 1, &kp1, off))) goto done;
    path_join(path, sizeof path, dir, "seq_doc.npy");
    if ((st = dga_npy_write(path, DGA_NPY_I64, 1, &n1, seq_doc))) goto done;
    path_join(path, sizeof path, dir, "seq_source.npy");
    if ((st = dga_npy_write(path, DGA_NPY_I32, 1, &n1, seq_src))) goto done;
    path_join(path, sizeof path, dir, "seq_index.npy");
    if ((st = dga_npy_write(path, DGA_NPY_I64, 1, &n1, perm))) goto done;
    for (int l = 0; l < L; l++) {
        int64_t kl1 = h->k[l] + 1, cs[2] = {h->k[l], h->d};
        snprintf(name, sizeof name, "level%d_ranges.npy", l + 1);
        path_join(path, sizeof path, dir, name);
        if ((st = dga_npy_write(path, DGA_NPY_U64, 1, &kl1, h->ranges[l]))) goto done;
        snprintf(name, sizeof name, "level%d_centroids.npy", l + 1);
        path_join(path, sizeof path, dir, name);
        if ((st = dga_npy_write(path, DGA_NPY_F32, 2, cs, h->centroids[l]))) goto done;
    }
    if (x) {
        int64_t es[2] = {n, emb->dim};
        path_join(path, sizeof path, dir, "embeddings.npy");
        if ((st = permute_rows(x, perm, n, emb->dim)) ||
            (st = dga_npy_write(path, DGA_NPY_F32, 2, es, x)))
            goto done;
    }
    if (emb->save && (st = emb->save(emb, dir))) goto done;
    if (o->tokenizer_path) {
        path_join(path, sizeof path, dir, "tokenizer.json");
        if ((st = dga_file_copy_atomic(o->tokenizer_path, path))) goto done;
    }
    st = write_manifest(b, o, emb, h, dir, small ? "uint16" : "int32", source_seqs);
done:
    free(off), free(perm), free(seq_doc), free(seq_src), free(tok), free(source_seqs);
    return st;
}

dga_status dga_store_builder_write(dga_store_builder *b, const char *dir_arg,
                                   const dga_store_write_opts *o)
{
    char dir[3001];
    if (dga_path_trim(dir, sizeof dir, dir_arg) != DGA_OK)
        return dga_fail(DGA_ERR_INVALID, "store: output path empty or too long");
    dga_stale_remove(dir, NULL);
    if (b->nseq == 0)
        return dga_fail(DGA_ERR_INVALID,
                        "store: no complete sequence of %d tokens (%lld documents read)",
                        b->seq_len, (long long)b->ndocs);
    if (o->nlevels < 1 || o->nlevels > DGA_STORE_MAX_LEVELS)
        return dga_fail(DGA_ERR_INVALID, "store: %d levels (expected 1..%d)", o->nlevels,
                        DGA_STORE_MAX_LEVELS);
    if (!o->decode) return dga_fail(DGA_ERR_INVALID, "store: no decode function given");
    struct stat sb;
    int exists = stat(dir, &sb) == 0;
    char manifest[4096];
    path_join(manifest, sizeof manifest, dir, "manifest.json");
    if (exists && (!S_ISDIR(sb.st_mode) || (access(manifest, F_OK) != 0 && !dir_is_empty(dir))))
        return dga_fail(DGA_ERR_INVALID,
                        "%s: exists and is not a store (no manifest.json); refusing to replace it",
                        dir);

    dga_embedder *emb = NULL;
    dga_status st = dga_embedder_new(o->embedder ? o->embedder : "hash384", &emb);
    if (st != DGA_OK) return st;
    int64_t n = b->nseq;
    int dim = emb->dim;
    double t0 = now_s();
    float *x = malloc((size_t)n * dim * sizeof *x);
    char **texts = calloc((size_t)n, sizeof *texts);
    size_t *lens = malloc((size_t)n * sizeof *lens);
    dga_hkmeans h = {0};
    char tmp[4096];
    int made_tmp = 0, caller_threads = 0;
    if (!x || !texts || !lens) {
        st = dga_fail(DGA_ERR_NOMEM, "store: out of memory for %lld embeddings", (long long)n);
        goto done;
    }
    for (int64_t r = 0; r < n; r++)
        if ((st = decode_seq(b, o, r, &texts[r], &lens[r]))) goto done;
    caller_threads = store_blas_enter();
    if (emb->fit_add) {
        for (int64_t r = 0; r < n; r++)
            if ((st = emb->fit_add(emb, texts[r], lens[r]))) goto done;
        if ((st = emb->fit_end(emb))) goto done;
    }
    for (int64_t r = 0; r < n; r++) {
        if ((r & 1023) == 0 && (st = dga_interrupt_check("embedding"))) goto done;
        if ((st = emb->embed(emb, texts[r], lens[r], x + r * dim))) goto done;
        free(texts[r]);
        texts[r] = NULL;
    }
    if (o->verbose)
        fprintf(stderr, "store: embedded %lld sequences with %s in %.1f s\n", (long long)n,
                emb->name, now_s() - t0);
    t0 = now_s();
    dga_kmeans_opts ko = {.iters = o->iters, .seed = o->seed, .spherical = o->spherical,
                          .verbose = o->verbose};
    if ((st = dga_kmeans_hierarchical(x, n, dim, o->levels, o->nlevels, &ko, &h))) goto done;
    store_blas_leave(caller_threads);
    caller_threads = 0;
    if (o->verbose) {
        fprintf(stderr, "store: clustered into");
        for (int l = 0; l < o->nlevels; l++) fprintf(stderr, " %lld", (long long)h.k[l]);
        fprintf(stderr, " domains in %.1f s\n", now_s() - t0);
    }
    if (!o->save_embeddings) {
        free(x);
        x = NULL;
    }

    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", dir, (long)getpid());
    if (mkdir(tmp, 0755) != 0) {
        st = dga_fail_errno(DGA_ERR_IO, "%s: cannot create", tmp);
        goto done;
    }
    made_tmp = 1;
    if ((st = write_arrays(b, o, emb, &h, x, tmp))) goto done;
    /* Swap in: an old store moves aside first and is removed only once the new one is in. */
    if (exists) {
        char old[4200];
        snprintf(old, sizeof old, "%s.old.%ld", dir, (long)getpid());
        if (rename(dir, old) != 0) {
            st = dga_fail_errno(DGA_ERR_IO, "%s: cannot move the old store aside", dir);
            goto done;
        }
        if (rename(tmp, dir) != 0) {
            st = dga_fail_errno(DGA_ERR_IO, "%s: cannot rename to %s", tmp, dir);
            if (rename(old, dir) != 0)
                st = dga_fail_errno(DGA_ERR_IO, "%s: cannot rename to %s, and the old store "
                                    "could not be moved back: it is at %s", tmp, dir, old);
            goto done;
        }
        made_tmp = 0;
        if ((st = remove_flat_dir(old))) goto done;
    } else {
        if (rename(tmp, dir) != 0) {
            st = dga_fail_errno(DGA_ERR_IO, "%s: cannot rename to %s", tmp, dir);
            goto done;
        }
        made_tmp = 0;
    }
done:
    if (caller_threads > 0) store_blas_leave(caller_threads);
    if (made_tmp) {
        char keep[1024];
        snprintf(keep, sizeof keep, "%s", dga_last_error());
        remove_flat_dir(tmp);
        dga_fail(st, "%s", keep);
    }
    if (texts)
        for (int64_t r = 0; r < n; r++) free(texts[r]);
    free(texts), free(lens), free(x);
    dga_hkmeans_free(&h);
    dga_embedder_free(emb);
    return st;
}

/* ================================================================== reader */

struct dga_store {
    char        *dir;
    int          seq_len, vocab, nlevels, spherical, tok16, nsources, dim;
    int32_t      eot;
    int64_t      nseq, k[DGA_STORE_MAX_LEVELS];
    dga_npy      tokens, leaf_offsets, seq_doc, seq_source;
    dga_npy      ranges[DGA_STORE_MAX_LEVELS], centroids[DGA_STORE_MAX_LEVELS];
    char       **sources;
    dga_embedder *emb;
};

void dga_store_close(dga_store *s)
{
    if (!s) return;
    dga_npy_free(&s->tokens), dga_npy_free(&s->leaf_offsets);
    dga_npy_free(&s->seq_doc), dga_npy_free(&s->seq_source);
    for (int l = 0; l < DGA_STORE_MAX_LEVELS; l++) {
        dga_npy_free(&s->ranges[l]);
        dga_npy_free(&s->centroids[l]);
    }
    for (int i = 0; i < s->nsources; i++) free(s->sources[i]);
    free(s->sources);
    dga_embedder_free(s->emb);
    free(s->dir);
    free(s);
}

static dga_status get_int(const char *path, json_t *m, const char *key, int64_t lo, int64_t hi,
                          int64_t *v)
{
    json_t *j = json_object_get(m, key);
    if (!json_is_integer(j))
        return dga_fail(DGA_ERR_FORMAT, "%s: field '%s': expected an integer", path, key);
    *v = json_integer_value(j);
    if (*v < lo || *v > hi)
        return dga_fail(DGA_ERR_FORMAT, "%s: field '%s' = %lld, expected %lld..%lld", path, key,
                        (long long)*v, (long long)lo, (long long)hi);
    return DGA_OK;
}

static dga_status map_file(dga_store *s, const char *name, dga_npy_dtype dt, int ndim,
                           int64_t d0, int64_t d1, dga_npy *out)
{
    char path[4096];
    path_join(path, sizeof path, s->dir, name);
    dga_status st = dga_npy_map_expect(path, dt, ndim, out);
    if (st != DGA_OK) return st;
    if (out->shape[0] != d0 || (ndim == 2 && out->shape[1] != d1)) {
        if (ndim == 2)
            st = dga_fail(DGA_ERR_FORMAT, "%s: shape (%lld, %lld), manifest says (%lld, %lld)", path,
                          (long long)out->shape[0], (long long)out->shape[1], (long long)d0,
                          (long long)d1);
        else
            st = dga_fail(DGA_ERR_FORMAT, "%s: %lld entries, manifest says %lld", path,
                          (long long)out->shape[0], (long long)d0);
        dga_npy_free(out);
    }
    return st;
}

/* Offsets must start at 0, never decrease (strictly increase when `strict`) and end at `last`. */
static dga_status check_offsets(const char *dir, const char *name, const uint64_t *v, int64_t n,
                                uint64_t last, int strict)
{
    if (v[0] != 0) return dga_fail(DGA_ERR_FORMAT, "%s/%s: first entry is %llu, expected 0", dir, name,
                                   (unsigned long long)v[0]);
    for (int64_t i = 1; i < n; i++)
        if (v[i] < v[i - 1] || (strict && v[i] == v[i - 1]))
            return dga_fail(DGA_ERR_FORMAT, "%s/%s: entry %lld (%llu) is not above entry %lld (%llu)",
                            dir, name, (long long)i, (unsigned long long)v[i], (long long)(i - 1),
                            (unsigned long long)v[i - 1]);
    if (v[n - 1] != last)
        return dga_fail(DGA_ERR_FORMAT, "%s/%s: last entry is %llu, expected %llu", dir, name,
                        (unsigned long long)v[n - 1], (unsigned long long)last);
    return DGA_OK;
}

/* The store's tokenizer (when it keeps one) must have the manifest's vocabulary and
 * <|endoftext|>: text encoded with it becomes ids of the store's models. */
static dga_status check_tokenizer(const dga_store *s, json_t *m, const char *mpath)
{
    json_t *j = json_object_get(m, "tokenizer");
    if (!j || json_is_null(j)) return DGA_OK;
    if (!json_is_string(j) || !json_string_value(j)[0] || strchr(json_string_value(j), '/'))
        return dga_fail(DGA_ERR_FORMAT, "%s: field 'tokenizer': expected null or a file name", mpath);
    char path[4096];
    if (!path_join(path, sizeof path, s->dir, json_string_value(j)))
        return dga_fail(DGA_ERR_INVALID, "store: path too long");
    dga_bpe *tok = NULL;
    dga_status st = dga_bpe_load(path, &tok);
    if (st != DGA_OK) return dga_fail_wrap(st, "%s: field 'tokenizer'", mpath);
    int tv = dga_bpe_vocab_size(tok);
    int32_t te = dga_bpe_eot(tok);
    dga_bpe_free(tok);
    if (tv != s->vocab)
        return dga_fail(DGA_ERR_FORMAT, "%s: vocab_size %d, but %s has %d tokens", mpath, s->vocab,
                        path, tv);
    if (te != s->eot)
        return dga_fail(DGA_ERR_FORMAT, "%s: eot %d, but %s has <|endoftext|> = %d", mpath,
                        (int)s->eot, path, (int)te);
    return DGA_OK;
}

static dga_status open_checked(dga_store *s, json_t *m, const char *mpath)
{
    dga_status st;
    json_t *j = json_object_get(m, "format");
    if (!json_is_string(j) || strcmp(json_string_value(j), FORMAT_NAME) != 0)
        return dga_fail(DGA_ERR_FORMAT, "%s: field 'format': expected \"%s\"", mpath, FORMAT_NAME);
    int64_t v = 0;
    if ((st = get_int(mpath, m, "version", 1, FORMAT_VERSION, &v))) return st;
    /* First: every later check reads these bytes. */
    if (v >= 2 && (st = dga_store_checksums_verify(s->dir, mpath, json_object_get(m, "checksums")))) return st;
    if ((st = get_int(mpath, m, "seq_len", 2, 1 << 24, &v))) return st;
    s->seq_len = (int)v;
    if ((st = get_int(mpath, m, "vocab_size", 1, INT32_MAX, &v))) return st;
    s->vocab = (int)v;
    if ((st = get_int(mpath, m, "eot", 0, s->vocab - 1, &v))) return st;
    s->eot = (int32_t)v;
    if ((st = get_int(mpath, m, "sequences", 1, INT64_MAX / 1024, &s->nseq))) return st;
    j = json_object_get(m, "token_dtype");
    if (!json_is_string(j) || (strcmp(json_string_value(j), "uint16") && strcmp(json_string_value(j), "int32")))
        return dga_fail(DGA_ERR_FORMAT, "%s: field 'token_dtype': expected \"uint16\" or \"int32\"", mpath);
    s->tok16 = strcmp(json_string_value(j), "uint16") == 0;
    j = json_object_get(m, "spherical");
    if (!json_is_boolean(j)) return dga_fail(DGA_ERR_FORMAT, "%s: field 'spherical': expected a boolean", mpath);
    s->spherical = json_is_true(j);
    json_t *ks = json_object_get(m, "k");
    if (!json_is_array(ks) || json_array_size(ks) < 1 || json_array_size(ks) > DGA_STORE_MAX_LEVELS)
        return dga_fail(DGA_ERR_FORMAT, "%s: field 'k': expected an array of 1..%d integers", mpath,
                        DGA_STORE_MAX_LEVELS);
    s->nlevels = (int)json_array_size(ks);
    for (int l = 0; l < s->nlevels; l++) {
        json_t *e = json_array_get(ks, (size_t)l);
        if (!json_is_integer(e) || json_integer_value(e) < 1 || json_integer_value(e) > s->nseq)
            return dga_fail(DGA_ERR_FORMAT, "%s: field 'k'[%d]: expected an integer in 1..%lld", mpath,
                            l + 1, (long long)s->nseq);
        s->k[l] = json_integer_value(e);
    }
    json_t *src = json_object_get(m, "sources");
    if (!json_is_array(src) || json_array_size(src) < 1)
        return dga_fail(DGA_ERR_FORMAT, "%s: field 'sources': expected a non-empty array of names", mpath);
    s->sources = calloc(json_array_size(src), sizeof *s->sources);
    if (!s->sources) return dga_fail(DGA_ERR_NOMEM, "store: out of memory");
    for (size_t i = 0; i < json_array_size(src); i++) {
        json_t *e = json_array_get(src, i);
        if (!json_is_string(e))
            return dga_fail(DGA_ERR_FORMAT, "%s: field 'sources'[%zu]: expected a string", mpath, i + 1);
        if (!(s->sources[i] = strdup(json_string_value(e)))) return dga_fail(DGA_ERR_NOMEM, "store: out of memory");
        s->nsources = (int)i + 1;
    }
    json_t *e = json_object_get(m, "embedder");
    json_t *en = json_object_get(e, "name");
    if (!json_is_string(en)) return dga_fail(DGA_ERR_FORMAT, "%s: field 'embedder.name': expected a string", mpath);
    if ((st = dga_embedder_new(json_string_value(en), &s->emb))) return st;
    if (s->emb->load && (st = s->emb->load(s->emb, s->dir))) return st;
    s->dim = s->emb->dim;

    /* Arrays. */
    int L = s->nlevels;
    int64_t kleaf = s->k[L - 1];
    if ((st = map_file(s, "tokens.npy", s->tok16 ? DGA_NPY_U16 : DGA_NPY_I32, 2, s->nseq, s->seq_len,
                       &s->tokens)))
        return st;
    if ((st = map_file(s, "leaf_offsets.npy", DGA_NPY_U64, 1, kleaf + 1, 0, &s->leaf_offsets))) return st;
    if ((st = check_offsets(s->dir, "leaf_offsets.npy", s->leaf_offsets.data, kleaf + 1,
                            (uint64_t)s->nseq, 1)))
        return st;
    char name[64];
    for (int l = 0; l < L; l++) {
        snprintf(name, sizeof name, "level%d_ranges.npy", l + 1);
        if ((st = map_file(s, name, DGA_NPY_U64, 1, s->k[l] + 1, 0, &s->ranges[l]))) return st;
        if ((st = check_offsets(s->dir, name, s->ranges[l].data, s->k[l] + 1, (uint64_t)kleaf, 1)))
            return st;
        snprintf(name, sizeof name, "level%d_centroids.npy", l + 1);
        if ((st = map_file(s, name, DGA_NPY_F32, 2, s->k[l], s->dim, &s->centroids[l]))) return st;
        /* a NaN centroid loses every comparison, so assignment would pile all mass on one
         * domain instead of failing */
        const float *c = s->centroids[l].data;
        for (int64_t i = 0; i < s->k[l] * s->dim; i++)
            if (!isfinite(c[i]))
                return dga_fail(DGA_ERR_FORMAT, "%s/%s: centroid %lld holds %s at column %lld",
                                s->dir, name, (long long)(i / s->dim) + 1,
                                isnan(c[i]) ? "NaN" : "an infinity", (long long)(i % s->dim) + 1);
    }
    if ((st = map_file(s, "seq_doc.npy", DGA_NPY_I64, 1, s->nseq, 0, &s->seq_doc))) return st;
    int64_t ndocs = INT64_MAX;
    if (json_object_get(m, "documents") &&
        (st = get_int(mpath, m, "documents", 1, INT64_MAX, &ndocs)))
        return st;
    const int64_t *sd = s->seq_doc.data;
    for (int64_t r = 0; r < s->nseq; r++)
        if (sd[r] < 0 || sd[r] >= ndocs)
            return dga_fail(DGA_ERR_FORMAT, "%s/seq_doc.npy: entry %lld is %lld, outside [0, %lld)",
                            s->dir, (long long)r, (long long)sd[r], (long long)ndocs);
    if ((st = map_file(s, "seq_source.npy", DGA_NPY_I32, 1, s->nseq, 0, &s->seq_source))) return st;
    const int32_t *ss = s->seq_source.data;
    for (int64_t r = 0; r < s->nseq; r++)
        if (ss[r] < 0 || ss[r] >= s->nsources)
            return dga_fail(DGA_ERR_FORMAT, "%s/seq_source.npy: entry %lld is %d, outside [0, %d)",
                            s->dir, (long long)r, ss[r], s->nsources);
    if ((st = check_tokenizer(s, m, mpath))) return st;
    /* Token ids are checked once here so that gather never hands the model a bad id. */
    int64_t nt = s->nseq * s->seq_len;
    if (s->tok16) {
        const uint16_t *t = s->tokens.data;
        uint16_t mx = 0;
        for (int64_t i = 0; i < nt; i++) mx = t[i] > mx ? t[i] : mx;
        if (mx >= s->vocab)
            return dga_fail(DGA_ERR_FORMAT, "%s/tokens.npy: token id %u outside the vocabulary [0, %d)",
                            s->dir, mx, s->vocab);
    } else {
        const int32_t *t = s->tokens.data;
        for (int64_t i = 0; i < nt; i++)
            if (t[i] < 0 || t[i] >= s->vocab)
                return dga_fail(DGA_ERR_FORMAT,
                                "%s/tokens.npy: token %lld is %d, outside the vocabulary [0, %d)",
                                s->dir, (long long)i, t[i], s->vocab);
    }
    return DGA_OK;
}

dga_status dga_store_open(const char *dir, dga_store **out)
{
    *out = NULL;
    dga_store *s = calloc(1, sizeof *s);
    if (!s || !(s->dir = strdup(dir))) {
        free(s);
        return dga_fail(DGA_ERR_NOMEM, "store: out of memory");
    }
    char mpath[4096];
    if (!path_join(mpath, sizeof mpath, dir, "manifest.json")) {
        dga_store_close(s);
        return dga_fail(DGA_ERR_INVALID, "store: path too long");
    }
    json_error_t jerr;
    char *text = NULL;
    size_t tlen = 0;
    json_t *m = NULL;
    /* Read through dga_file_read_all, which refuses a FIFO instead of blocking on it. */
    if (access(mpath, F_OK) != 0) {
        dga_status st = dga_fail_errno(DGA_ERR_IO, "%s: not a store (cannot open manifest.json)", dir);
        dga_store_close(s);
        return st;
    }
    dga_status rst = dga_file_read_all(mpath, &text, &tlen);
    if (rst == DGA_OK) m = json_loadb(text, tlen, 0, &jerr);
    free(text);
    if (!m) {
        dga_status st = rst != DGA_OK ? rst : dga_fail(DGA_ERR_FORMAT, "%s: line %d: %s", mpath, jerr.line, jerr.text);
        dga_store_close(s);
        return st;
    }
    dga_status st = json_is_object(m) ? open_checked(s, m, mpath)
                                      : dga_fail(DGA_ERR_FORMAT, "%s: expected a JSON object", mpath);
    json_decref(m);
    if (st != DGA_OK) {
        dga_store_close(s);
        return st;
    }
    *out = s;
    return DGA_OK;
}

const char *dga_store_dir(const dga_store *s) { return s->dir; }
int dga_store_levels(const dga_store *s) { return s->nlevels; }
int64_t dga_store_k(const dga_store *s, int level)
{
    return level >= 0 && level < s->nlevels ? s->k[level] : -1;
}
int dga_store_seq_len(const dga_store *s) { return s->seq_len; }
int dga_store_vocab_size(const dga_store *s) { return s->vocab; }
int32_t dga_store_eot(const dga_store *s) { return s->eot; }
int dga_store_spherical(const dga_store *s) { return s->spherical; }
int64_t dga_store_num_sequences(const dga_store *s) { return s->nseq; }
int dga_store_num_sources(const dga_store *s) { return s->nsources; }
const char *dga_store_source_name(const dga_store *s, int i)
{
    return i >= 0 && i < s->nsources ? s->sources[i] : NULL;
}
const dga_embedder *dga_store_embedder(const dga_store *s) { return s->emb; }
const float *dga_store_centroids(const dga_store *s, int level)
{
    return level >= 0 && level < s->nlevels ? s->centroids[level].data : NULL;
}

static dga_status check_level(const dga_store *s, int level)
{
    if (level < 0 || level >= s->nlevels)
        return dga_fail(DGA_ERR_INVALID, "store %s: level %d outside [1, %d]", s->dir, level + 1,
                        s->nlevels);
    return DGA_OK;
}

dga_status dga_store_domain_leaves(const dga_store *s, int level, int64_t d, int64_t *first,
                                   int64_t *count)
{
    dga_status st = check_level(s, level);
    if (st != DGA_OK) return st;
    if (d < 0 || d >= s->k[level])
        return dga_fail(DGA_ERR_INVALID, "store %s: domain %lld outside [1, %lld] at level %d", s->dir,
                        (long long)d + 1, (long long)s->k[level], level + 1);
    const uint64_t *r = s->ranges[level].data;
    *first = (int64_t)r[d];
    *count = (int64_t)(r[d + 1] - r[d]);
    return DGA_OK;
}

dga_status dga_store_domain_rows(const dga_store *s, int level, int64_t d, int64_t *first,
                                 int64_t *count)
{
    int64_t lf = 0, lc = 0;
    dga_status st = dga_store_domain_leaves(s, level, d, &lf, &lc);
    if (st != DGA_OK) return st;
    const uint64_t *off = s->leaf_offsets.data;
    *first = (int64_t)off[lf];
    *count = (int64_t)(off[lf + lc] - off[lf]);
    return DGA_OK;
}

dga_status dga_store_domain_sizes(const dga_store *s, int level, int64_t *sizes)
{
    dga_status st = check_level(s, level);
    if (st != DGA_OK) return st;
    for (int64_t d = 0; d < s->k[level]; d++) {
        int64_t f = 0;
        dga_store_domain_rows(s, level, d, &f, &sizes[d]);
    }
    return DGA_OK;
}

static void copy_row(const dga_store *s, int64_t r, int start, int n, int32_t *out)
{
    if (s->tok16) {
        const uint16_t *t = (const uint16_t *)s->tokens.data + r * s->seq_len + start;
        for (int i = 0; i < n; i++) out[i] = t[i];
    } else {
        memcpy(out, (const int32_t *)s->tokens.data + r * s->seq_len + start, (size_t)n * sizeof *out);
    }
}

dga_status dga_store_row(const dga_store *s, int64_t r, int32_t *out)
{
    if (r < 0 || r >= s->nseq)
        return dga_fail(DGA_ERR_INVALID, "store %s: row %lld outside [0, %lld)", s->dir, (long long)r,
                        (long long)s->nseq);
    copy_row(s, r, 0, s->seq_len, out);
    return DGA_OK;
}

int64_t dga_store_row_doc(const dga_store *s, int64_t r)
{
    return r >= 0 && r < s->nseq ? ((const int64_t *)s->seq_doc.data)[r] : -1;
}
int32_t dga_store_row_source(const dga_store *s, int64_t r)
{
    return r >= 0 && r < s->nseq ? ((const int32_t *)s->seq_source.data)[r] : -1;
}

dga_status dga_store_sequence(const dga_store *s, int level, int64_t d, int64_t i, int32_t *out)
{
    int64_t first = 0, count = 0;
    dga_status st = dga_store_domain_rows(s, level, d, &first, &count);
    if (st != DGA_OK) return st;
    if (i < 0 || i >= count)
        return dga_fail(DGA_ERR_INVALID, "store %s: index %lld outside [1, %lld] in domain %lld of level %d",
                        s->dir, (long long)i + 1, (long long)count, (long long)d + 1, level + 1);
    copy_row(s, first + i, 0, s->seq_len, out);
    return DGA_OK;
}

dga_status dga_store_gather(const dga_store *s, int level, const int32_t *domains,
                            const int32_t *indices, int64_t B, int32_t *inputs, int32_t *targets)
{
    dga_status st = check_level(s, level);
    if (st != DGA_OK) return st;
    int T = s->seq_len - 1;
    const uint64_t *rg = s->ranges[level].data, *off = s->leaf_offsets.data;
    for (int64_t b = 0; b < B; b++) {
        int64_t d = domains[b], i = indices[b];
        if (d < 0 || d >= s->k[level])
            return dga_fail(DGA_ERR_INVALID, "gather: batch row %lld: domain %lld outside [1, %lld]",
                            (long long)b + 1, (long long)d + 1, (long long)s->k[level]);
        int64_t first = (int64_t)off[rg[d]], count = (int64_t)off[rg[d + 1]] - first;
        if (i < 0 || i >= count)
            return dga_fail(DGA_ERR_INVALID,
                            "gather: batch row %lld: index %lld outside [1, %lld] (domain %lld)",
                            (long long)b + 1, (long long)i + 1, (long long)count, (long long)d + 1);
        copy_row(s, first + i, 0, T, inputs + b * T);
        copy_row(s, first + i, 1, T, targets + b * T);
    }
    return DGA_OK;
}

dga_status dga_store_source_counts(const dga_store *s, int level, int64_t *counts)
{
    dga_status st = check_level(s, level);
    if (st != DGA_OK) return st;
    memset(counts, 0, (size_t)s->k[level] * s->nsources * sizeof *counts);
    const int32_t *src = s->seq_source.data;
    for (int64_t d = 0; d < s->k[level]; d++) {
        int64_t first = 0, count = 0;
        dga_store_domain_rows(s, level, d, &first, &count);
        for (int64_t r = first; r < first + count; r++) counts[d * s->nsources + src[r]]++;
    }
    return DGA_OK;
}

dga_status dga_store_histogram(const dga_store *s, int level, int64_t n,
                               const char *const *texts, const size_t *lens, float *hist,
                               int64_t *used)
{
    dga_status st = check_level(s, level);
    if (st != DGA_OK) return st;
    int64_t k = s->k[level];
    int dim = s->dim;
    float *x = malloc((size_t)(n > 0 ? n : 1) * dim * sizeof *x);
    int32_t *a = malloc((size_t)(n > 0 ? n : 1) * sizeof *a);
    if (!x || !a) {
        free(x), free(a);
        return dga_fail(DGA_ERR_NOMEM, "histogram: out of memory for %lld texts", (long long)n);
    }
    int64_t m = 0;
    for (int64_t i = 0; i < n; i++) {
        float *xi = x + m * dim;
        if ((st = s->emb->embed(s->emb, texts[i], lens ? lens[i] : strlen(texts[i]), xi))) goto done;
        double nn = 0;
        for (int t = 0; t < dim; t++) nn += (double)xi[t] * xi[t];
        if (nn > 0) m++;
    }
    if (m == 0) {
        st = dga_fail(DGA_ERR_INVALID, "histogram: none of the %lld texts has a word to embed", (long long)n);
        goto done;
    }
    int caller_threads = store_blas_enter();
    st = dga_kmeans_assign(x, m, dim, s->centroids[level].data, (int)k, s->spherical, a, NULL);
    store_blas_leave(caller_threads);
    if (st) goto done;
    for (int64_t d = 0; d < k; d++) hist[d] = 0;
    for (int64_t i = 0; i < m; i++) hist[a[i]] += 1.0f;
    for (int64_t d = 0; d < k; d++) hist[d] /= (float)m;
    if (used) *used = m;
done:
    free(x), free(a);
    return st;
}

dga_status dga_store_nearest(const dga_store *s, int level, const char *text, size_t len, int n,
                             int64_t *ids, float *scores, int *got)
{
    dga_status st = check_level(s, level);
    if (st != DGA_OK) return st;
    int64_t k = s->k[level];
    int dim = s->dim;
    float *x = malloc((size_t)dim * sizeof *x), *sc = malloc((size_t)k * sizeof *sc);
    if (!x || !sc) {
        free(x), free(sc);
        return dga_fail(DGA_ERR_NOMEM, "nearest: out of memory");
    }
    if ((st = s->emb->embed(s->emb, text, len, x))) goto done;
    const float *c = s->centroids[level].data;
    int caller_threads = store_blas_enter();
    cblas_sgemv(CblasRowMajor, CblasNoTrans, (int)k, dim, 1.0f, c, dim, x, 1, 0.0f, sc, 1);
    store_blas_leave(caller_threads);
    if (!s->spherical) {
        double xn = 0;
        for (int t = 0; t < dim; t++) xn += (double)x[t] * x[t];
        for (int64_t d = 0; d < k; d++) {
            double cn = 0;
            for (int t = 0; t < dim; t++) cn += (double)c[d * dim + t] * c[d * dim + t];
            sc[d] = (float)-(xn - 2.0 * sc[d] + cn);
        }
    }
    int m = n < k ? n : (int)k;
    if (m < 0) m = 0;
    /* Selection of the m best; ties keep the lower id. */
    for (int j = 0; j < m; j++) {
        int64_t best = -1;
        for (int64_t d = 0; d < k; d++) {
            int taken = 0;
            for (int u = 0; u < j && !taken; u++) taken = ids[u] == d;
            if (!taken && (best < 0 || sc[d] > sc[best])) best = d;
        }
        ids[j] = best;
        scores[j] = sc[best];
    }
    *got = m;
done:
    free(x), free(sc);
    return st;
}
