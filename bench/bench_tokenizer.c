/* Tokenizer throughput on the real corpus, one core: training an 8192-token vocabulary on a
 * sample spread over the domains, then encoding the whole corpus (cold cache, then warm),
 * and decoding it back (checked byte for byte).
 *   bench_tokenizer [build_dir] [corpus_dir] [sample_mb=20] [vocab=8192]
 * corpus_dir defaults to $DGA_SHARED_DATA/corpus (or ../shared/data/corpus). Prints one
 * "RESULT {json}" line per measurement for bench/run. Target: encode >= 5 MB/s. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "bench_util.h"
#include "bpe.h"
#include "jsonl.h"

typedef struct {
    char   *buf;     /* documents back to back */
    size_t  n, cap;
    size_t *ends;    /* end offset of each document */
    size_t  docs, cap_docs;
    size_t  limit;   /* stop after this many bytes (0: no limit) */
} texts;

static int add_doc(const dga_text_doc *d, void *ud)
{
    texts *t = ud;
    if (t->n + d->len > t->cap) {
        t->cap = (t->n + d->len) * 2 + (1 << 20);
        t->buf = realloc(t->buf, t->cap);
        if (!t->buf) { fprintf(stderr, "out of memory\n"); exit(1); }
    }
    if (t->docs == t->cap_docs) {
        t->cap_docs = t->cap_docs ? t->cap_docs * 2 : 1024;
        t->ends = realloc(t->ends, t->cap_docs * sizeof *t->ends);
        if (!t->ends) { fprintf(stderr, "out of memory\n"); exit(1); }
    }
    memcpy(t->buf + t->n, d->text, d->len);
    t->n += d->len;
    t->ends[t->docs++] = t->n;
    return t->limit && t->n >= t->limit;
}

static int is_dir(const char *p)
{
    struct stat sb;
    return stat(p, &sb) == 0 && S_ISDIR(sb.st_mode);
}

int main(int argc, char **argv)
{
    char corpus[4096];
    const char *root = getenv("DGA_SHARED_DATA");
    if (argc > 2) snprintf(corpus, sizeof corpus, "%s", argv[2]);
    else snprintf(corpus, sizeof corpus, "%s/corpus", root ? root : "../shared/data");
    double sample_mb = argc > 3 ? atof(argv[3]) : 20;
    int vocab = argc > 4 ? atoi(argv[4]) : 8192;
    if (!is_dir(corpus)) {
        printf("bench_tokenizer: no corpus at %s: skipped\n", corpus);
        return 0;
    }
    const char *domains[] = {"arxiv_abstracts", "books_public_domain", "code_python",
                             "dictionary_gcide", "dm_mathematics", "latex", "licenses",
                             "manpages", "pubmed_bmc_fulltext", "stackexchange",
                             "us_legislation"};
    size_t nd = sizeof domains / sizeof domains[0];

    /* the whole corpus, and a training sample of sample_mb / nd MB per domain */
    texts all = {0}, sample = {0};
    double t0 = bench_now();
    for (size_t i = 0; i < nd; i++) {
        char p[4200];
        snprintf(p, sizeof p, "%s/%s", corpus, domains[i]);
        if (!is_dir(p)) continue;
        if (dga_text_foreach(p, add_doc, &all, NULL) != DGA_OK) {
            fprintf(stderr, "%s\n", dga_last_error());
            return 1;
        }
        sample.limit = sample.n + (size_t)(sample_mb * 1e6 / (double)nd);
        dga_text_foreach(p, add_doc, &sample, NULL);
    }
    double t_read = bench_now() - t0;
    printf("read %.1f MB (%zu docs) in %.2f s; sample %.1f MB\n", all.n / 1e6, all.docs, t_read,
           sample.n / 1e6);

    t0 = bench_now();
    dga_bpe_trainer *tr;
    dga_bpe *tok;
    if (dga_bpe_trainer_new(&tr) != DGA_OK) return 1;
    size_t start = 0;
    for (size_t d = 0; d < sample.docs; d++) {
        dga_bpe_trainer_add(tr, sample.buf + start, sample.ends[d] - start);
        start = sample.ends[d];
    }
    double t_count = bench_now() - t0;
    if (dga_bpe_trainer_finish(tr, vocab, &tok) != DGA_OK) {
        fprintf(stderr, "%s\n", dga_last_error());
        return 1;
    }
    dga_bpe_trainer_free(tr);
    double t_train = bench_now() - t0;
    printf("train: vocab %d on %.1f MB in %.2f s (chunk counting %.2f s)\n",
           dga_bpe_vocab_size(tok), sample.n / 1e6, t_train, t_count);
    printf("RESULT {\"kind\":\"bpe_train\",\"vocab\":%d,\"sample_mb\":%.2f,\"seconds\":%.3f}\n",
           dga_bpe_vocab_size(tok), sample.n / 1e6, t_train);

    int32_t *ids = malloc(all.n * sizeof *ids);
    if (!ids) { fprintf(stderr, "out of memory\n"); return 1; }
    size_t n_tok = 0;
    for (int pass = 0; pass < 2; pass++) {
        n_tok = 0;
        t0 = bench_now();
        start = 0;
        for (size_t d = 0; d < all.docs; d++) {
            size_t m;
            if (dga_bpe_encode(tok, all.buf + start, all.ends[d] - start, ids + n_tok,
                               all.n - n_tok, &m) != DGA_OK) {
                fprintf(stderr, "%s\n", dga_last_error());
                return 1;
            }
            n_tok += m;
            start = all.ends[d];
        }
        double dt = bench_now() - t0;
        printf("encode (%s cache): %.1f MB -> %zu tokens (%.2f bytes/token) in %.2f s = %.1f MB/s\n",
               pass ? "warm" : "cold", all.n / 1e6, n_tok, (double)all.n / (double)n_tok, dt,
               all.n / 1e6 / dt);
        printf("RESULT {\"kind\":\"bpe_encode_%s\",\"mb\":%.2f,\"tokens\":%zu,\"mb_per_s\":%.2f,"
               "\"bytes_per_token\":%.3f}\n", pass ? "warm" : "cold", all.n / 1e6, n_tok,
               all.n / 1e6 / dt, (double)all.n / (double)n_tok);
    }

    t0 = bench_now();
    char *back;
    size_t len;
    if (dga_bpe_decode(tok, ids, n_tok, &back, &len) != DGA_OK) return 1;
    double dt = bench_now() - t0;
    int same = len == all.n && memcmp(back, all.buf, len) == 0;
    printf("decode: %.1f MB in %.3f s = %.0f MB/s; round trip %s\n", len / 1e6, dt, len / 1e6 / dt,
           same ? "exact" : "MISMATCH");
    printf("RESULT {\"kind\":\"bpe_decode\",\"mb_per_s\":%.1f,\"exact\":%s}\n", len / 1e6 / dt,
           same ? "true" : "false");
    free(back);
    free(ids);
    dga_bpe_free(tok);
    free(all.buf);
    free(all.ends);
    free(sample.buf);
    free(sample.ends);
    return same ? 0 : 1;
}
