/* dga_store_build: corpus directory -> tokenizer -> sequences -> domain store.
 *
 * Sources are the immediate subdirectories of the corpus, in byte-wise sorted order (a
 * directory without subdirectories is one source, named after it). Each source is read with
 * the jsonl reader (recursively, .jsonl and .txt), up to max_mb MB of text when set: the
 * document that crosses the limit is the last one read. The tokenizer is either loaded or
 * trained on the same documents (at most train_mb MB per source when set). A document filter
 * (opts.filter) narrows both passes to listed sources and documents: the rest are read past,
 * never tokenised. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "bpe.h"
#include "fileio.h"
#include "jsonl.h"
#include "stale.h"
#include "store.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

typedef struct {
    char **names;   /* display names */
    char **paths;
    int    n;
} source_list;

static void sources_free(source_list *s)
{
    for (int i = 0; i < s->n; i++) free(s->names[i]), free(s->paths[i]);
    free(s->names), free(s->paths);
    memset(s, 0, sizeof *s);
}

static dga_status list_sources(const char *corpus, source_list *out)
{
    memset(out, 0, sizeof *out);
    struct stat sb;
    if (stat(corpus, &sb) != 0) return dga_fail_errno(DGA_ERR_IO, "%s: cannot read the corpus", corpus);
    char **names = NULL;
    int n = 0;
    if (S_ISDIR(sb.st_mode)) {
        DIR *d = opendir(corpus);
        if (!d) return dga_fail_errno(DGA_ERR_IO, "%s: cannot list", corpus);
        struct dirent *e;
        while ((e = readdir(d))) {
            if (e->d_name[0] == '.') continue;
            char p[4096];
            snprintf(p, sizeof p, "%s/%s", corpus, e->d_name);
            if (stat(p, &sb) != 0 || !S_ISDIR(sb.st_mode)) continue;
            char **nn = realloc(names, (size_t)(n + 1) * sizeof *nn);
            if (!nn || !(nn[n] = strdup(e->d_name))) {
                if (nn) names = nn;
                for (int i = 0; i < n; i++) free(names[i]);
                free(names);
                closedir(d);
                return dga_fail(DGA_ERR_NOMEM, "store: out of memory listing %s", corpus);
            }
            names = nn;
            n++;
        }
        closedir(d);
    }
    if (n == 0) {
        /* One source: the corpus itself. */
        const char *slash = strrchr(corpus, '/');
        const char *base = slash && slash[1] ? slash + 1 : corpus;
        out->names = malloc(sizeof *out->names);
        out->paths = malloc(sizeof *out->paths);
        if (!out->names || !out->paths || !(out->names[0] = strdup(base)) ||
            !(out->paths[0] = strdup(corpus))) {
            free(out->names), free(out->paths);
            return dga_fail(DGA_ERR_NOMEM, "store: out of memory");
        }
        out->n = 1;
        return DGA_OK;
    }
    qsort(names, (size_t)n, sizeof *names, cmp_str);
    out->names = names;
    out->paths = calloc((size_t)n, sizeof *out->paths);
    out->n = n;
    if (!out->paths) {
        sources_free(out);
        return dga_fail(DGA_ERR_NOMEM, "store: out of memory");
    }
    for (int i = 0; i < n; i++) {
        size_t len = strlen(corpus) + strlen(names[i]) + 2;
        if (!(out->paths[i] = malloc(len))) {
            sources_free(out);
            return dga_fail(DGA_ERR_NOMEM, "store: out of memory");
        }
        snprintf(out->paths[i], len, "%s/%s", corpus, names[i]);
    }
    return DGA_OK;
}

/* Calls fn on each document of a source until `limit` bytes (0: no limit) have been read. */
typedef dga_status (*doc_fn)(void *ud, const char *text, size_t len);

/* The filter entry of source `name`, NULL if it has none. */
static const dga_store_doc_filter *filter_of(const dga_store_build_opts *o, const char *name)
{
    for (int i = 0; i < o->nfilter; i++)
        if (strcmp(o->filter[i].source, name) == 0) return &o->filter[i];
    return NULL;
}

/* Rejects what would silently keep the wrong documents: an unknown source, indices out of
 * order. */
static dga_status filter_check(const dga_store_build_opts *o, const source_list *src)
{
    if (o->nfilter > 0 && !o->filter) return dga_fail(DGA_ERR_INVALID, "store_build: filter is NULL");
    for (int i = 0; i < o->nfilter; i++) {
        const dga_store_doc_filter *f = &o->filter[i];
        if (!f->source) return dga_fail(DGA_ERR_INVALID, "store_build: filter %d has no source", i);
        int found = 0;
        for (int j = 0; j < src->n && !found; j++) found = strcmp(src->names[j], f->source) == 0;
        if (!found)
            return dga_fail(DGA_ERR_INVALID, "store_build: filter source '%s' is not a directory of %s",
                            f->source, o->corpus);
        for (size_t k = 0; k < f->n; k++) {
            if (f->docs[k] < 0 || (k > 0 && f->docs[k] <= f->docs[k - 1]))
                return dga_fail(DGA_ERR_INVALID, "store_build: filter of source '%s': document index "
                                "%lld at position %zu is negative or not above the one before",
                                f->source, (long long)f->docs[k], k);
        }
        for (int j = 0; j < i; j++)
            if (strcmp(o->filter[j].source, f->source) == 0)
                return dga_fail(DGA_ERR_INVALID, "store_build: source '%s' filtered twice", f->source);
    }
    return DGA_OK;
}

/* stats (may be NULL) accumulates the reader's counters. With a filter, only its documents
 * are passed to fn and counted. */
static dga_status walk_source(const char *path, const dga_store_doc_filter *filter,
                              double limit_mb, doc_fn fn, void *ud, size_t *docs, size_t *bytes,
                              dga_text_stats *stats)
{
    dga_text_reader *r;
    dga_status st = dga_text_open(path, &r);
    if (st != DGA_OK) return st;
    size_t limit = limit_mb > 0 ? (size_t)(limit_mb * 1e6) : 0;
    size_t next = 0;   /* the filter entry wanted next */
    int limited = 0;
    *docs = *bytes = 0;
    for (;;) {
        if (filter && next == filter->n) break;
        dga_text_doc doc;
        if ((st = dga_text_next(r, &doc)) != DGA_OK || !doc.text) break;
        if ((st = dga_interrupt_check("reading the corpus")) != DGA_OK) break;
        if (filter) {
            if ((int64_t)doc.index != filter->docs[next]) continue;
            next++;
        }
        if ((st = fn(ud, doc.text, doc.len)) != DGA_OK) break;
        (*docs)++;
        *bytes += doc.len;
        if (limit && *bytes >= limit) { limited = 1; break; }
    }
    if (st == DGA_OK && filter && !limited && next < filter->n)
        st = dga_fail(DGA_ERR_INVALID, "store_build: filter of %s names document index %lld "
                      "(0-based), but the source has only %zu documents", path, (long long)filter->docs[next],
                      dga_text_reader_stats(r)->docs);
    if (stats) dga_text_stats_add(stats, dga_text_reader_stats(r));
    dga_text_close(r);
    return st;
}

static dga_status train_add(void *ud, const char *text, size_t len)
{
    return dga_bpe_trainer_add(ud, text, len);
}

typedef struct {
    dga_bpe           *tok;
    dga_store_builder *b;
    dga_bpe_ids        ids;
    size_t             tokens;
} encode_ctx;

static dga_status encode_add(void *ud, const char *text, size_t len)
{
    encode_ctx *c = ud;
    c->ids.n = 0;
    dga_status st = dga_bpe_encode_append(c->tok, text, len, &c->ids);
    if (st != DGA_OK) return st;
    c->tokens += c->ids.n + 1;
    return dga_store_builder_add_doc(c->b, c->ids.ids, c->ids.n);
}

static dga_status decode_fn(void *ud, const int32_t *ids, size_t n, char **text, size_t *len)
{
    return dga_bpe_decode(ud, ids, n, text, len);
}

dga_status dga_store_build(const dga_store_build_opts *o)
{
    if (!o->corpus || !o->out) return dga_fail(DGA_ERR_INVALID, "store_build: corpus and out are required");
    char out[3001];
    if (dga_path_trim(out, sizeof out, o->out) != DGA_OK)
        return dga_fail(DGA_ERR_INVALID, "store_build: output path empty or too long");
    /* The store directory is replaced whole: it must hold none of what the build reads. */
    dga_status chk = dga_output_check(out, o->corpus, "the corpus");
    if (chk == DGA_OK && o->tokenizer) chk = dga_output_check(out, o->tokenizer, "the tokenizer");
    if (chk != DGA_OK) return chk;
    int swept = 0;
    if (dga_stale_remove(out, &swept) == DGA_OK && swept && o->verbose)
        fprintf(stderr, "store: removed %d leftover%s of a killed build of %s\n", swept,
                swept == 1 ? "" : "s", out);
    int seq_len = o->seq_len > 0 ? o->seq_len : 129;
    if (o->nlevels < 1 || o->nlevels > DGA_STORE_MAX_LEVELS)
        return dga_fail(DGA_ERR_INVALID, "store_build: %d levels (expected 1..%d)", o->nlevels,
                        DGA_STORE_MAX_LEVELS);
    /* Fail on a bad embedder name before minutes of tokenising. */
    dga_embedder *probe;
    dga_status st = dga_embedder_new(o->embedder ? o->embedder : "hash384", &probe);
    if (st != DGA_OK) return st;
    dga_embedder_free(probe);
    source_list src;
    st = list_sources(o->corpus, &src);
    if (st != DGA_OK) return st;
    if ((st = filter_check(o, &src)) != DGA_OK) {
        sources_free(&src);
        return st;
    }
    dga_bpe *tok = NULL;
    dga_store_builder *b = NULL;
    encode_ctx ec = {0};
    char tok_tmp[4200] = "";
    const char *tok_path = o->tokenizer;
    double t0 = now_s();
    size_t docs, bytes;
    dga_text_stats total = {0}, train_stats = {0};

    if (o->tokenizer) {
        if ((st = dga_bpe_load(o->tokenizer, &tok))) goto done;
    } else {
        dga_bpe_trainer *tr;
        if ((st = dga_bpe_trainer_new(&tr))) goto done;
        double lim = o->train_mb > 0 ? o->train_mb : o->max_mb;
        if (o->max_mb > 0 && lim > o->max_mb) lim = o->max_mb;
        for (int i = 0; i < src.n && st == DGA_OK; i++) {
            const dga_store_doc_filter *f = filter_of(o, src.names[i]);
            if (o->filter && !f) continue;
            st = walk_source(src.paths[i], f, lim, train_add, tr, &docs, &bytes, &train_stats);
        }
        if (st == DGA_OK) st = dga_bpe_trainer_finish(tr, o->vocab > 0 ? o->vocab : 8192, &tok);
        dga_bpe_trainer_free(tr);
        if (st != DGA_OK) goto done;
        snprintf(tok_tmp, sizeof tok_tmp, "%s.tokenizer.%ld.json", out, (long)getpid());
        if ((st = dga_bpe_save(tok, tok_tmp))) goto done;
        tok_path = tok_tmp;
        if (o->verbose)
            fprintf(stderr, "store: trained a tokenizer (vocab %d) in %.1f s\n",
                    dga_bpe_vocab_size(tok), now_s() - t0);
    }
    if ((st = dga_store_builder_new(seq_len, dga_bpe_vocab_size(tok), dga_bpe_eot(tok), &b))) goto done;
    ec.tok = tok;
    ec.b = b;
    for (int i = 0; i < src.n; i++) {
        const dga_store_doc_filter *f = filter_of(o, src.names[i]);
        if (o->filter && !f) continue;
        double ts = now_s();
        int64_t before = dga_store_builder_sequences(b);
        size_t tok_before = ec.tokens;
        dga_text_stats one = {0};
        if ((st = dga_store_builder_add_source(b, src.names[i]))) goto done;
        st = walk_source(src.paths[i], f, o->max_mb, encode_add, &ec, &docs, &bytes, &one);
        dga_text_stats_add(&total, &one);
        if (st != DGA_OK) goto done;
        if (o->verbose) {
            fprintf(stderr, "store: %-24s %7zu docs %8.1f MB %10zu tokens %8lld sequences (%.1f s)\n",
                    src.names[i], docs, (double)bytes / 1e6, ec.tokens - tok_before,
                    (long long)(dga_store_builder_sequences(b) - before), now_s() - ts);
            if (one.skipped)
                fprintf(stderr, "store: %-24s %zu malformed lines skipped, first: %s\n",
                        src.names[i], one.skipped, one.messages[0]);
        }
    }
    dga_store_write_opts wo = {.nlevels = o->nlevels, .spherical = o->spherical, .iters = o->iters,
                               .seed = o->seed, .embedder = o->embedder, .tokenizer_path = tok_path,
                               .save_embeddings = o->save_embeddings,
                               .decode = decode_fn, .decode_ud = tok, .verbose = o->verbose};
    memcpy(wo.levels, o->levels, sizeof wo.levels);
    st = dga_store_builder_write(b, out, &wo);
    if (st == DGA_OK && o->verbose)
        fprintf(stderr, "store: wrote %s (%lld sequences of %d tokens) in %.1f s total\n", out,
                (long long)dga_store_builder_sequences(b), seq_len, now_s() - t0);
done:
    /* A corpus of nothing but malformed lines fails far from its cause ("no complete
     * sequence", "the corpus is empty"): say what was skipped. The encoding pass read
     * everything the training pass did, when it got that far. */
    if (st != DGA_OK && st != DGA_ERR_INTERRUPTED) {
        const dga_text_stats *sk = total.files ? &total : &train_stats;
        if (sk->skipped) {
            char cause[1024];
            snprintf(cause, sizeof cause, "%s", dga_last_error());
            dga_fail(st, "%s; %zu malformed input line%s skipped, the first: %s", cause,
                     sk->skipped, sk->skipped == 1 ? "" : "s", sk->messages[0]);
        }
    }
    if (o->text_stats) *o->text_stats = total.files ? total : train_stats;
    if (tok_tmp[0]) unlink(tok_tmp);
    dga_bpe_ids_free(&ec.ids);
    dga_store_builder_free(b);
    dga_bpe_free(tok);
    sources_free(&src);
    return st;
}
