/* Byte-level BPE: chunking, training (hand-worked merges and a naive reference), exact round
 * trips, tokenizer.json save/load, error reporting. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "test_tmpdir.h"

#include "bpe.h"
#include "jsonl.h"
#include "rng.h"

/* ---------- helpers ---------- */

typedef struct {
    char   chunks[64][64];
    size_t n;
} chunk_list;

static void collect(const char *c, size_t len, void *ud)
{
    chunk_list *l = ud;
    assert_true(l->n < 64 && len < 64);
    memcpy(l->chunks[l->n], c, len);
    l->chunks[l->n][len] = '\0';
    l->n++;
}

static dga_bpe *train_strings(const char **texts, size_t n, int vocab)
{
    size_t *lens = malloc(n * sizeof *lens);
    for (size_t i = 0; i < n; i++) lens[i] = strlen(texts[i]);
    dga_bpe *tok = NULL;
    dga_status st = dga_bpe_train(texts, lens, n, vocab, &tok);
    if (st != DGA_OK) fail_msg("train: %s", dga_last_error());
    free(lens);
    return tok;
}

static void assert_round_trip(dga_bpe *tok, const char *bytes, size_t len)
{
    int32_t *ids = malloc((len + 1) * sizeof *ids);
    size_t n;
    assert_int_equal(dga_bpe_encode(tok, bytes, len, ids, len, &n), DGA_OK);
    assert_true(n <= len);
    for (size_t i = 0; i < n; i++) {
        assert_true(ids[i] >= 0);
        assert_true(ids[i] < dga_bpe_eot(tok));   /* text never yields the special token */
    }
    char *back;
    size_t blen;
    assert_int_equal(dga_bpe_decode(tok, ids, n, &back, &blen), DGA_OK);
    assert_int_equal(blen, len);
    assert_memory_equal(back, bytes, len);
    free(back);
    free(ids);
}

static const char *sample_text =
    "The quick brown fox jumps over the lazy dog. The dog's owner isn't amused;\n"
    "she'll say: 'they're here, we've won'. In 2024, 3.14159 and 42 were numbers.\n"
    "    def f(x):\n        return x ** 2  # square\n\n\n"
    "Ünïcödé wörds, naïve café, 日本語のテキスト, emoji 😀!\t\tTabs\r\n"
    "the the the then there these those them theme thermal <|endoftext|> end.\n";

/* ---------- chunking ---------- */

static void test_split_gpt2_style(void **state)
{
    (void)state;
    const char *s = "Hello world's  x\n\n123abc...!? it'S";
    chunk_list l = {0};
    dga_bpe_split(s, strlen(s), collect, &l);
    /* "\n\n" before a digit: \s+(?!\S) backs off one newline, then \s+ takes the other */
    const char *want[] = {"Hello", " world", "'s", " ", " x", "\n", "\n", "123", "abc", "...!?",
                          " it", "'", "S"};
    size_t nw = sizeof want / sizeof want[0];
    assert_int_equal(l.n, nw);
    for (size_t i = 0; i < nw; i++) assert_string_equal(l.chunks[i], want[i]);
}

static void test_split_spaces_and_utf8(void **state)
{
    (void)state;
    /* trailing spaces stay one chunk; a lone newline before a word is its own chunk;
     * a multi-byte character is never cut */
    const char *s = "a   b\nc  \xc3\xa9t\xc3\xa9  ";
    chunk_list l = {0};
    dga_bpe_split(s, strlen(s), collect, &l);
    const char *want[] = {"a", "  ", " b", "\n", "c", " ", " \xc3\xa9t\xc3\xa9", "  "};
    size_t nw = sizeof want / sizeof want[0];
    assert_int_equal(l.n, nw);
    for (size_t i = 0; i < nw; i++) assert_string_equal(l.chunks[i], want[i]);
    /* the chunks always tile the input exactly */
    size_t total = 0;
    for (size_t i = 0; i < l.n; i++) total += strlen(l.chunks[i]);
    assert_int_equal(total, strlen(s));
}

static void test_split_unicode_classes(void **state)
{
    (void)state;
    /* Unicode punctuation, no-break spaces and number characters are classed as
     * Hugging Face's GPT-2 regex classes them (\p{L}, \p{N}, \s, other); bytes that are not
     * UTF-8 count as letters. */
    const char *s = "it\xe2\x80\x99s x\xc2\xa0\xc2\xa0y \xc2\xbd \xe2\x82\xac" "5 \xff\xfe" "ab"
                    " \xe6\x97\xa5\xe6\x9c\xac\xe3\x80\x82";
    chunk_list l = {0};
    dga_bpe_split(s, strlen(s), collect, &l);
    const char *want[] = {"it", "\xe2\x80\x99", "s", " x", "\xc2\xa0", "\xc2\xa0", "y",
                          " \xc2\xbd", " \xe2\x82\xac", "5", " \xff\xfe\x61\x62",
                          " \xe6\x97\xa5\xe6\x9c\xac", "\xe3\x80\x82"};
    size_t nw = sizeof want / sizeof want[0];
    assert_int_equal(l.n, nw);
    for (size_t i = 0; i < nw; i++) assert_string_equal(l.chunks[i], want[i]);
}

/* ---------- training ---------- */

static void test_train_first_merges_by_hand(void **state)
{
    (void)state;
    /* Chunks: "aaab", " aaab", " ab" (once each). Pair counts (overlapping, per chunk):
     * (a,a) = 2 + 2 = 4, (a,b) = 3, (' ',a) = 2  -> merge 0 is "a a" -> 256.
     * Then [aa a b], [' ' aa a b], [' ' a b]: (a,b) = 3, (aa,a) = 2   -> merge 1 "a b" -> 257.
     * Then [aa ab], [' ' aa ab], [' ' ab]: (aa,ab) = 2                  -> merge 2 -> 258.
     * Then (' ',aaab) = 1 and (' ',ab) = 1 tie: smaller right id 257    -> merge 3 " ab".
     * Then (' ',aaab)                                                    -> merge 4 " aaab".
     * Then no pair is left: 5 merges, vocabulary 256 + 5 + 1. */
    const char *texts[] = {"aaab aaab ab"};
    dga_bpe *tok = train_strings(texts, 1, 300);
    assert_int_equal(dga_bpe_num_merges(tok), 5);
    assert_int_equal(dga_bpe_vocab_size(tok), 262);
    assert_int_equal(dga_bpe_eot(tok), 261);
    int32_t want[5][2] = {{'a', 'a'}, {'a', 'b'}, {256, 257}, {' ', 257}, {' ', 258}};
    for (int r = 0; r < 5; r++) {
        int32_t a, b;
        assert_int_equal(dga_bpe_merge(tok, r, &a, &b), DGA_OK);
        assert_int_equal(a, want[r][0]);
        assert_int_equal(b, want[r][1]);
    }
    const char *bytes;
    size_t len;
    assert_int_equal(dga_bpe_token_bytes(tok, 260, &bytes, &len), DGA_OK);
    assert_int_equal(len, 5);
    assert_memory_equal(bytes, " aaab", 5);
    /* the training text itself becomes three tokens */
    int32_t ids[16];
    size_t n;
    assert_int_equal(dga_bpe_encode(tok, texts[0], strlen(texts[0]), ids, 16, &n), DGA_OK);
    assert_int_equal(n, 3);
    assert_int_equal(ids[0], 258);
    assert_int_equal(ids[1], 260);
    assert_int_equal(ids[2], 259);
    dga_bpe_free(tok);
}

/* A deliberately slow reference: recount every pair over all chunks after every merge. */
typedef struct {
    int32_t sym[64];
    int     len;
    long    count;
    char    key[64];
    size_t  klen;
} ref_word;

typedef struct {
    ref_word *w;
    int       n, cap;
} ref_corpus;

static void ref_add_chunk(const char *c, size_t len, void *ud)
{
    ref_corpus *rc = ud;
    if (len < 2) return;
    assert_true(len < 64);
    for (int i = 0; i < rc->n; i++)
        if (rc->w[i].klen == len && memcmp(rc->w[i].key, c, len) == 0) {
            rc->w[i].count++;
            return;
        }
    if (rc->n == rc->cap) {
        rc->cap = rc->cap ? rc->cap * 2 : 64;
        rc->w = realloc(rc->w, (size_t)rc->cap * sizeof *rc->w);
    }
    ref_word *w = &rc->w[rc->n++];
    memcpy(w->key, c, len);
    w->klen = len;
    w->len = (int)len;
    w->count = 1;
    for (size_t i = 0; i < len; i++) w->sym[i] = (unsigned char)c[i];
}

static void test_train_matches_naive_reference(void **state)
{
    (void)state;
    /* random words over a small alphabet, so many pairs tie and merges chain */
    dga_rng rng;
    dga_rng_seed(&rng, 7);
    char text[6000];
    size_t n = 0;
    const char alpha[] = "aabbcde  .";
    while (n + 1 < sizeof text) {
        int wl = 1 + (int)dga_rng_below(&rng, 7);
        for (int k = 0; k < wl && n + 1 < sizeof text; k++)
            text[n++] = alpha[dga_rng_below(&rng, sizeof alpha - 1)];
        if (n + 1 < sizeof text) text[n++] = ' ';
    }
    text[n] = '\0';
    const char *texts[] = {text};
    int vocab = 257 + 120;
    dga_bpe *tok = train_strings(texts, 1, vocab);

    ref_corpus rc = {0};
    dga_bpe_split(text, n, ref_add_chunk, &rc);
    /* byte strings of the tokens so far, to refuse duplicate merges as the trainer does */
    static char tb[512][64];
    static size_t tl[512];
    for (int b = 0; b < 256; b++) { tb[b][0] = (char)b; tl[b] = 1; }
    int banned[512][512];
    memset(banned, 0, sizeof banned);
    int m = 0;
    while (m < vocab - 257) {
        static long cnt[512][512];
        memset(cnt, 0, sizeof cnt);
        for (int i = 0; i < rc.n; i++)
            for (int k = 0; k + 1 < rc.w[i].len; k++)
                cnt[rc.w[i].sym[k]][rc.w[i].sym[k + 1]] += rc.w[i].count;
        long best = 0;
        int ba = -1, bb = -1;
        for (int a = 0; a < 256 + m; a++)
            for (int b = 0; b < 256 + m; b++)
                if (cnt[a][b] > best && !banned[a][b]) { best = cnt[a][b]; ba = a; bb = b; }
        if (ba < 0) break;
        size_t l = tl[ba] + tl[bb];
        char s[64];
        memcpy(s, tb[ba], tl[ba]);
        memcpy(s + tl[ba], tb[bb], tl[bb]);
        int dup = 0;
        for (int t = 0; t < 256 + m; t++)
            if (tl[t] == l && memcmp(tb[t], s, l) == 0) dup = 1;
        if (dup) { banned[ba][bb] = 1; continue; }
        int32_t a, b;
        assert_int_equal(dga_bpe_merge(tok, m, &a, &b), DGA_OK);
        if (a != ba || b != bb) print_message("merge %d: ref (%d,%d) count %ld cnt(mine)=%ld, mine (%d,%d)\n", m, ba, bb, best, cnt[a][b], a, b);
        assert_int_equal(a, ba);
        assert_int_equal(b, bb);
        int c = 256 + m;
        memcpy(tb[c], s, l);
        tl[c] = l;
        for (int i = 0; i < rc.n; i++) {
            ref_word *w = &rc.w[i];
            int j = 0;
            for (int k = 0; k < w->len;) {
                if (k + 1 < w->len && w->sym[k] == ba && w->sym[k + 1] == bb) { w->sym[j++] = c; k += 2; }
                else w->sym[j++] = w->sym[k++];
            }
            w->len = j;
        }
        m++;
    }
    assert_int_equal(dga_bpe_num_merges(tok), m);
    free(rc.w);
    dga_bpe_free(tok);
}

static void test_train_rejects_bad_vocab(void **state)
{
    (void)state;
    const char *texts[] = {"abc"};
    size_t lens[] = {3};
    dga_bpe *tok = NULL;
    assert_int_equal(dga_bpe_train(texts, lens, 1, 256, &tok), DGA_ERR_INVALID);
    assert_null(tok);
    assert_non_null(strstr(dga_last_error(), "256"));
    /* no text at all (no documents, or only empty ones): an error, not a byte-only tokenizer */
    assert_int_equal(dga_bpe_train(texts, lens, 0, 1000, &tok), DGA_ERR_INVALID);
    assert_null(tok);
    assert_non_null(strstr(dga_last_error(), "corpus is empty"));
    const char *empty[] = {"", ""};
    size_t zero[] = {0, 0};
    assert_int_equal(dga_bpe_train(empty, zero, 2, 1000, &tok), DGA_ERR_INVALID);
    assert_null(tok);
    /* text without a single pair: a valid, merge-free tokenizer */
    const char *one[] = {"a"};
    size_t len1[] = {1};
    assert_int_equal(dga_bpe_train(one, len1, 1, 1000, &tok), DGA_OK);
    assert_int_equal(dga_bpe_vocab_size(tok), 257);
    assert_round_trip(tok, "hello", 5);
    dga_bpe_free(tok);
}

/* ---------- round trips ---------- */

static void test_round_trip_random_bytes(void **state)
{
    (void)state;
    const char *texts[] = {sample_text};
    dga_bpe *tok = train_strings(texts, 1, 600);
    assert_true(dga_bpe_num_merges(tok) > 50);
    dga_rng rng;
    dga_rng_seed(&rng, 42);
    char buf[5000];
    size_t lengths[] = {0, 1, 2, 3, 5, 8, 13, 64, 255, 256, 1000, 4999};
    for (size_t li = 0; li < sizeof lengths / sizeof lengths[0]; li++) {
        for (int rep = 0; rep < 20; rep++) {
            size_t len = lengths[li];
            int mode = rep % 3;   /* raw bytes, text-like bytes, NUL-heavy bytes */
            for (size_t i = 0; i < len; i++) {
                if (mode == 0) buf[i] = (char)dga_rng_below(&rng, 256);
                else if (mode == 1) buf[i] = sample_text[dga_rng_below(&rng, strlen(sample_text))];
                else buf[i] = dga_rng_below(&rng, 3) ? 0 : (char)dga_rng_below(&rng, 256);
            }
            assert_round_trip(tok, buf, len);
        }
    }
    assert_round_trip(tok, sample_text, strlen(sample_text));
    dga_bpe_free(tok);
}

static void test_encode_append_and_eot(void **state)
{
    (void)state;
    const char *texts[] = {sample_text};
    dga_bpe *tok = train_strings(texts, 1, 500);
    dga_bpe_ids ids = {0};
    assert_int_equal(dga_bpe_encode_append(tok, "the dog", 7, &ids), DGA_OK);
    size_t first = ids.n;
    assert_int_equal(dga_bpe_ids_push(&ids, dga_bpe_eot(tok)), DGA_OK);
    assert_int_equal(dga_bpe_encode_append(tok, "<|endoftext|>", 13, &ids), DGA_OK);
    /* the literal text is ordinary bytes, never the special id */
    for (size_t i = first + 1; i < ids.n; i++) assert_true(ids.ids[i] != dga_bpe_eot(tok));
    char *out;
    size_t len;
    assert_int_equal(dga_bpe_decode(tok, ids.ids, ids.n, &out, &len), DGA_OK);
    assert_string_equal(out, "the dog<|endoftext|><|endoftext|>");
    free(out);
    dga_bpe_ids_free(&ids);
    /* a fixed buffer that is too small is an error, not an overflow */
    int32_t small[2];
    size_t n;
    assert_int_equal(dga_bpe_encode(tok, "a b c d e", 9, small, 2, &n), DGA_ERR_INVALID);
    assert_non_null(strstr(dga_last_error(), "capacity"));
    /* decode names a bad id and its position */
    int32_t bad[] = {'a', 99999};
    assert_int_equal(dga_bpe_decode(tok, bad, 2, &out, &len), DGA_ERR_INVALID);
    assert_non_null(strstr(dga_last_error(), "99999"));
    assert_non_null(strstr(dga_last_error(), "position 1"));
    dga_bpe_free(tok);
}

typedef struct {
    char  *buf;
    size_t n, cap, limit;
    int    docs;
} gather;

static int gather_doc(const dga_text_doc *d, void *ud)
{
    gather *g = ud;
    if (g->n + d->len + 1 > g->cap) {
        g->cap = (g->n + d->len + 1) * 2;
        g->buf = realloc(g->buf, g->cap);
    }
    memcpy(g->buf + g->n, d->text, d->len);
    g->n += d->len;
    g->docs++;
    return g->n >= g->limit;
}

static void test_round_trip_corpus_domains(void **state)
{
    (void)state;
    const char *root = getenv("DGA_SHARED_DATA");
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/corpus", root ? root : "../shared/data");
    char **files;
    size_t nf;
    if (access(dir, R_OK) != 0) skip();
    assert_int_equal(dga_text_list_files(dir, &files, &nf), DGA_OK);
    dga_text_free_files(files, nf);
    const char *domains[] = {"arxiv_abstracts", "books_public_domain", "code_python",
                             "dictionary_gcide", "dm_mathematics", "latex", "licenses",
                             "manpages", "pubmed_bmc_fulltext", "stackexchange",
                             "us_legislation"};
    size_t nd = sizeof domains / sizeof domains[0];
    gather g[sizeof domains / sizeof domains[0]];
    memset(g, 0, sizeof g);
    dga_bpe_trainer *tr;
    assert_int_equal(dga_bpe_trainer_new(&tr), DGA_OK);
    int present = 0;
    for (size_t i = 0; i < nd; i++) {
        char p[4200];
        snprintf(p, sizeof p, "%s/%s", dir, domains[i]);
        if (access(p, R_OK) != 0) continue;
        present++;
        g[i].limit = 60000;
        dga_text_stats st;
        assert_int_equal(dga_text_foreach(p, gather_doc, &g[i], &st), DGA_OK);
        assert_int_equal(st.skipped, 0);
        assert_true(g[i].docs > 0);
        assert_int_equal(dga_bpe_trainer_add(tr, g[i].buf, g[i].n / 2), DGA_OK);
    }
    if (!present) { dga_bpe_trainer_free(tr); skip(); }
    dga_bpe *tok;
    assert_int_equal(dga_bpe_trainer_finish(tr, 2048, &tok), DGA_OK);
    dga_bpe_trainer_free(tr);
    assert_int_equal(dga_bpe_vocab_size(tok), 2048);
    for (size_t i = 0; i < nd; i++) {
        if (!g[i].buf) continue;
        assert_round_trip(tok, g[i].buf, g[i].n);
        /* compression: a trained tokenizer packs several bytes per token on real text */
        int32_t *ids = malloc(g[i].n * sizeof *ids);
        size_t n;
        assert_int_equal(dga_bpe_encode(tok, g[i].buf, g[i].n, ids, g[i].n, &n), DGA_OK);
        assert_true(n * 3 < g[i].n * 2);   /* > 1.5 bytes per token (dm_mathematics: ~1.9) */
        free(ids);
        free(g[i].buf);
    }
    dga_bpe_free(tok);
}

/* ---------- tokenizer.json ---------- */

static char tmpdir[256];

static int make_tmpdir(void **state)
{
    (void)state;
    return test_tmpdir_make(tmpdir, sizeof tmpdir, "bpe");
}

static int remove_tmpdir(void **state)
{
    (void)state;
    return test_tmpdir_remove(tmpdir);
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void test_save_load_identical(void **state)
{
    (void)state;
    const char *texts[] = {sample_text};
    dga_bpe *tok = train_strings(texts, 1, 700);
    char path[512];
    snprintf(path, sizeof path, "%s/tok.json", tmpdir);
    assert_int_equal(dga_bpe_save(tok, path), DGA_OK);
    dga_bpe *back;
    if (dga_bpe_load(path, &back) != DGA_OK) fail_msg("load: %s", dga_last_error());
    assert_int_equal(dga_bpe_vocab_size(back), dga_bpe_vocab_size(tok));
    for (int r = 0; r < dga_bpe_num_merges(tok); r++) {
        int32_t a1, b1, a2, b2;
        dga_bpe_merge(tok, r, &a1, &b1);
        dga_bpe_merge(back, r, &a2, &b2);
        assert_int_equal(a1, a2);
        assert_int_equal(b1, b2);
    }
    size_t len = strlen(sample_text);
    int32_t *x = malloc(len * sizeof *x), *y = malloc(len * sizeof *y);
    size_t nx, ny;
    assert_int_equal(dga_bpe_encode(tok, sample_text, len, x, len, &nx), DGA_OK);
    assert_int_equal(dga_bpe_encode(back, sample_text, len, y, len, &ny), DGA_OK);
    assert_int_equal(nx, ny);
    assert_memory_equal(x, y, nx * sizeof *x);
    free(x);
    free(y);
    /* the file is Hugging Face's layout: spot-check a few fields */
    FILE *f = fopen(path, "rb");
    char head[65536];
    size_t got = fread(head, 1, sizeof head - 1, f);
    head[got] = '\0';
    fclose(f);
    assert_non_null(strstr(head, "\"type\": \"BPE\""));
    assert_non_null(strstr(head, "\"type\": \"ByteLevel\""));
    assert_non_null(strstr(head, "\"\xc4\xa0\": 32"));   /* ' ' is spelled U+0120 */
    assert_non_null(strstr(head, "<|endoftext|>"));
    dga_bpe_free(back);
    dga_bpe_free(tok);
}

static void test_load_errors(void **state)
{
    (void)state;
    char path[512];
    dga_bpe *tok = NULL;
    snprintf(path, sizeof path, "%s/missing.json", tmpdir);
    assert_int_equal(dga_bpe_load(path, &tok), DGA_ERR_IO);
    assert_non_null(strstr(dga_last_error(), "missing.json"));

    snprintf(path, sizeof path, "%s/bad.json", tmpdir);
    write_file(path, "{\"model\": {\"type\": \"BPE\",");
    assert_int_equal(dga_bpe_load(path, &tok), DGA_ERR_FORMAT);
    assert_non_null(strstr(dga_last_error(), "not valid JSON"));

    write_file(path, "{\"model\": {\"type\": \"WordPiece\", \"vocab\": {}, \"merges\": []}}");
    assert_int_equal(dga_bpe_load(path, &tok), DGA_ERR_FORMAT);
    assert_non_null(strstr(dga_last_error(), "model.type"));

    write_file(path, "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []}}");
    assert_int_equal(dga_bpe_load(path, &tok), DGA_ERR_FORMAT);
    assert_non_null(strstr(dga_last_error(), "model.vocab"));

    /* a real file with one merge corrupted */
    const char *texts[] = {sample_text};
    dga_bpe *good = train_strings(texts, 1, 300);
    snprintf(path, sizeof path, "%s/good.json", tmpdir);
    assert_int_equal(dga_bpe_save(good, path), DGA_OK);
    dga_bpe_free(good);
    FILE *f = fopen(path, "rb");
    static char text[1 << 20];
    size_t got = fread(text, 1, sizeof text - 1, f);
    text[got] = '\0';
    fclose(f);
    char *merges = strstr(text, "\"merges\"");
    assert_non_null(merges);
    char *first = strchr(merges, '[');
    char *q = strchr(first, '"');   /* the opening quote of merge 0 */
    assert_non_null(q);
    memmove(q + 1 + 4, q + 1, strlen(q + 1) + 1);
    memcpy(q + 1, "zzzz", 4);   /* an unknown left token */
    snprintf(path, sizeof path, "%s/corrupt.json", tmpdir);
    write_file(path, text);
    assert_int_equal(dga_bpe_load(path, &tok), DGA_ERR_FORMAT);
    assert_non_null(strstr(dga_last_error(), "model.merges[0]"));
    assert_null(tok);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_split_gpt2_style),
        cmocka_unit_test(test_split_spaces_and_utf8),
        cmocka_unit_test(test_split_unicode_classes),
        cmocka_unit_test(test_train_first_merges_by_hand),
        cmocka_unit_test(test_train_matches_naive_reference),
        cmocka_unit_test(test_train_rejects_bad_vocab),
        cmocka_unit_test(test_round_trip_random_bytes),
        cmocka_unit_test(test_encode_append_and_eot),
        cmocka_unit_test(test_round_trip_corpus_domains),
        cmocka_unit_test(test_save_load_identical),
        cmocka_unit_test(test_load_errors),
    };
    return cmocka_run_group_tests(tests, make_tmpdir, remove_tmpdir);
}
