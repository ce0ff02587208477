/* Domain store on a synthetic corpus of two sources with disjoint vocabularies: the sources
 * land in different coarse domains, ranges cover every sequence, gather shifts by one, IS
 * histograms of one source put their mass on its domain, and damaged stores are clear
 * errors at open. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <cblas.h>

#include "test_tmpdir.h"

#include "npy.h"
#include "rng.h"
#include "store.h"
#include "store_crc.h"

/* Vocabulary: ids 0..49 "alphaN", 50..99 "betaN", 100 = EOT. */
#define NW 50
#define EOT 100
#define VOCAB 101
#define SEQ 17

static char root[256], store_dir[320];

static void word(int id, char *buf, size_t n)
{
    snprintf(buf, n, "%s%d", id < NW ? "alpha" : "beta", id % NW);
}

static dga_status decode(void *ud, const int32_t *ids, size_t n, char **text, size_t *len)
{
    (void)ud;
    char *out = malloc(n * 16 + 1);
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (ids[i] == EOT) return dga_fail(DGA_ERR_INVALID, "decode was given EOT");
        char w[16];
        word(ids[i], w, sizeof w);
        m += (size_t)sprintf(out + m, "%s%s", i ? " " : "", w);
    }
    out[m] = 0;
    *text = out;
    *len = m;
    return DGA_OK;
}

/* Random text of `nw` words from source src (0 = alpha, 1 = beta). */
static void random_doc(dga_rng *r, int src, int32_t *ids, int nw)
{
    for (int i = 0; i < nw; i++) ids[i] = src * NW + (int32_t)dga_rng_below(r, NW);
}

static void build(const char *dir, int levels0, int levels1)
{
    dga_store_builder *b;
    assert_int_equal(dga_store_builder_new(SEQ, VOCAB, EOT, &b), DGA_OK);
    dga_rng r;
    dga_rng_seed(&r, 9);
    int32_t ids[60];
    for (int src = 0; src < 2; src++) {
        assert_int_equal(dga_store_builder_add_source(b, src ? "beta_dir" : "alpha_dir"), DGA_OK);
        for (int d = 0; d < 120; d++) {
            int nw = 20 + (int)dga_rng_below(&r, 40);
            random_doc(&r, src, ids, nw);
            assert_int_equal(dga_store_builder_add_doc(b, ids, (size_t)nw), DGA_OK);
        }
    }
    assert_int_equal(dga_store_builder_documents(b), 240);
    assert_true(dga_store_builder_sequences(b) > 400);
    dga_store_write_opts o = {.nlevels = 2, .levels = {levels0, levels1}, .spherical = 1,
                              .iters = 20, .seed = 3, .decode = decode};
    assert_int_equal(dga_store_builder_write(b, dir, &o), DGA_OK);
    dga_store_builder_free(b);
}

static void builder_rejects_bad_input(void **state)
{
    dga_store_builder *b;
    assert_int_equal(dga_store_builder_new(1, VOCAB, EOT, &b), DGA_ERR_INVALID);
    assert_int_equal(dga_store_builder_new(SEQ, VOCAB, VOCAB, &b), DGA_ERR_INVALID);
    assert_int_equal(dga_store_builder_new(SEQ, VOCAB, EOT, &b), DGA_OK);
    int32_t bad[2] = {3, 500};
    assert_int_equal(dga_store_builder_add_doc(b, bad, 2), DGA_ERR_INVALID);   /* no source */
    assert_int_equal(dga_store_builder_add_source(b, "x"), DGA_OK);
    assert_int_equal(dga_store_builder_add_doc(b, bad, 2), DGA_ERR_INVALID);
    assert_non_null(strstr(dga_last_error(), "token 1 is 500"));
    dga_store_write_opts o = {.nlevels = 1, .levels = {2}, .decode = decode};
    char dir[400];
    snprintf(dir, sizeof dir, "%s/empty_store", root);
    assert_int_equal(dga_store_builder_write(b, dir, &o), DGA_ERR_INVALID);
    assert_non_null(strstr(dga_last_error(), "no complete sequence"));
    assert_int_not_equal(access(dir, F_OK), 0);
    dga_store_builder_free(b);
}

static void sources_split_into_coarse_domains(void **state)
{
    dga_store *s;
    assert_int_equal(dga_store_open(store_dir, &s), DGA_OK);
    assert_int_equal(dga_store_levels(s), 2);
    assert_int_equal(dga_store_k(s, 0), 2);
    int64_t kleaf = dga_store_k(s, 1);
    assert_true(kleaf >= 2 && kleaf <= 6);
    assert_int_equal(dga_store_seq_len(s), SEQ);
    assert_int_equal(dga_store_num_sources(s), 2);
    assert_string_equal(dga_store_source_name(s, 0), "alpha_dir");
    int64_t n = dga_store_num_sequences(s);

    /* Each coarse domain is pure: one source only, and the two differ. */
    int64_t counts[2 * 2];
    assert_int_equal(dga_store_source_counts(s, 0, counts), DGA_OK);
    for (int d = 0; d < 2; d++) assert_true((counts[d * 2] == 0) != (counts[d * 2 + 1] == 0));
    assert_true((counts[0] == 0) != (counts[2] == 0));

    /* Coarse leaf ranges are contiguous and cover all leaves; sizes add up at each level. */
    int64_t f0, c0, f1, c1;
    assert_int_equal(dga_store_domain_leaves(s, 0, 0, &f0, &c0), DGA_OK);
    assert_int_equal(dga_store_domain_leaves(s, 0, 1, &f1, &c1), DGA_OK);
    assert_int_equal(f0, 0);
    assert_int_equal(f1, c0);
    assert_int_equal(f1 + c1, kleaf);
    for (int l = 0; l < 2; l++) {
        int64_t sizes[8], tot = 0;
        assert_int_equal(dga_store_domain_sizes(s, l, sizes), DGA_OK);
        for (int64_t d = 0; d < dga_store_k(s, l); d++) {
            assert_true(sizes[d] > 0);
            tot += sizes[d];
        }
        assert_int_equal(tot, n);
    }
    /* Every token of a sequence belongs to its source's vocabulary (or is EOT). */
    int32_t seq[SEQ];
    for (int d = 0; d < 2; d++) {
        int src = counts[d * 2] ? 0 : 1;
        int64_t first, count;
        assert_int_equal(dga_store_domain_rows(s, 0, d, &first, &count), DGA_OK);
        for (int64_t i = 0; i < count; i++) {
            assert_int_equal(dga_store_sequence(s, 0, d, i, seq), DGA_OK);
            assert_int_equal(dga_store_row_source(s, first + i), src);
            for (int t = 0; t < SEQ; t++)
                assert_true(seq[t] == EOT || seq[t] / NW == src);
        }
    }
    dga_store_close(s);
}

static void gather_shifts_by_one(void **state)
{
    dga_store *s;
    assert_int_equal(dga_store_open(store_dir, &s), DGA_OK);
    int32_t dom[3] = {0, 1, 1}, idx[3] = {0, 2, 0};
    int32_t in[3 * (SEQ - 1)], tg[3 * (SEQ - 1)], seq[SEQ];
    assert_int_equal(dga_store_gather(s, 0, dom, idx, 3, in, tg), DGA_OK);
    for (int b = 0; b < 3; b++) {
        assert_int_equal(dga_store_sequence(s, 0, dom[b], idx[b], seq), DGA_OK);
        assert_memory_equal(in + b * (SEQ - 1), seq, (SEQ - 1) * sizeof(int32_t));
        assert_memory_equal(tg + b * (SEQ - 1), seq + 1, (SEQ - 1) * sizeof(int32_t));
    }
    dom[1] = 2;
    assert_int_equal(dga_store_gather(s, 0, dom, idx, 3, in, tg), DGA_ERR_INVALID);
    assert_non_null(strstr(dga_last_error(), "batch row 2: domain 3 outside [1, 2]"));
    dom[1] = 0;
    idx[2] = 1 << 30;
    assert_int_equal(dga_store_gather(s, 0, dom, idx, 3, in, tg), DGA_ERR_INVALID);
    assert_non_null(strstr(dga_last_error(), "batch row 3: index"));
    assert_int_equal(dga_store_gather(s, 5, dom, idx, 3, in, tg), DGA_ERR_INVALID);
    dga_store_close(s);
}

static void histogram_puts_mass_on_the_source_domain(void **state)
{
    dga_store *s;
    assert_int_equal(dga_store_open(store_dir, &s), DGA_OK);
    int64_t counts[4];
    assert_int_equal(dga_store_source_counts(s, 0, counts), DGA_OK);
    int beta_domain = counts[1] ? 0 : 1;
    /* Fresh beta texts (not in the store), plus one text without words (skipped). */
    dga_rng r;
    dga_rng_seed(&r, 1234);
    char *texts[11];
    for (int i = 0; i < 10; i++) {
        int32_t ids[30];
        random_doc(&r, 1, ids, 30);
        size_t len;
        assert_int_equal(decode(NULL, ids, 30, &texts[i], &len), DGA_OK);
    }
    texts[10] = strdup(" ... ");
    float hist[2];
    int64_t used;
    assert_int_equal(dga_store_histogram(s, 0, 11, (const char *const *)texts, NULL, hist, &used),
                     DGA_OK);
    assert_int_equal(used, 10);
    assert_float_equal(hist[beta_domain], 1.0, 1e-6);
    assert_float_equal(hist[1 - beta_domain], 0.0, 1e-6);
    /* At the leaf level the histogram is a distribution over beta's leaves only. */
    int64_t kleaf = dga_store_k(s, 1), lf, lc;
    float *h1 = malloc((size_t)kleaf * sizeof *h1);
    assert_int_equal(dga_store_histogram(s, 1, 10, (const char *const *)texts, NULL, h1, NULL), DGA_OK);
    assert_int_equal(dga_store_domain_leaves(s, 0, beta_domain, &lf, &lc), DGA_OK);
    double in = 0;
    for (int64_t j = lf; j < lf + lc; j++) in += h1[j];
    assert_float_equal(in, 1.0, 1e-6);
    /* Texts are assigned with the store's own BLAS thread count: the same histogram under 1 and
     * 3 threads, and the caller's count given back. */
    int caller = openblas_get_num_threads();
    float *h3 = malloc((size_t)kleaf * sizeof *h3);
    for (int c = 1; c <= 3; c += 2) {
        openblas_set_num_threads(c);
        assert_int_equal(dga_store_histogram(s, 1, 10, (const char *const *)texts, NULL, h3, NULL), DGA_OK);
        assert_int_equal(openblas_get_num_threads(), c);
        assert_memory_equal(h1, h3, (size_t)kleaf * sizeof *h3);
    }
    openblas_set_num_threads(caller);
    free(h3);
    free(h1);
    /* nearest ranks the beta domain first. */
    int64_t ids[2];
    float sc[2];
    int got;
    assert_int_equal(dga_store_nearest(s, 0, texts[0], strlen(texts[0]), 5, ids, sc, &got), DGA_OK);
    assert_int_equal(got, 2);
    assert_int_equal(openblas_get_num_threads(), caller);
    assert_int_equal(ids[0], beta_domain);
    assert_true(sc[0] >= sc[1]);
    /* Only wordless texts: an error. */
    assert_int_equal(dga_store_histogram(s, 0, 1, (const char *const *)texts + 10, NULL, hist, NULL),
                     DGA_ERR_INVALID);
    for (int i = 0; i < 11; i++) free(texts[i]);
    dga_store_close(s);
}

static int same_file(const char *a, const char *b)
{
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "cmp -s '%s' '%s'", a, b);
    return system(cmd) == 0;
}

/* The same corpus and options give the same store, byte for byte, whatever BLAS thread count
 * the building process runs with: the store is clustered with a fixed count (recorded in its
 * manifest), and the caller's count is given back. (On this small corpus 1 and 2 threads
 * happen to cluster alike; the real lowdata store did not, which is why the count is fixed.) */
static void rebuild_is_identical(void **state)
{
    char dir[400], a[500], b[500];
    int caller = openblas_get_num_threads();
    const int counts[] = {1, 3};
    for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
        openblas_set_num_threads(counts[c]);
        snprintf(dir, sizeof dir, "%s/twin%d", root, counts[c]);
        build(dir, 2, 3);
        assert_int_equal(openblas_get_num_threads(), counts[c]);
        const char *files[] = {"tokens.npy", "leaf_offsets.npy", "level1_ranges.npy",
                               "level2_centroids.npy", "seq_doc.npy", "idf.npy", "manifest.json"};
        for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
            snprintf(a, sizeof a, "%s/%s", store_dir, files[i]);
            snprintf(b, sizeof b, "%s/%s", dir, files[i]);
            if (!same_file(a, b))
                fail_msg("%s differs between two builds (the second with %d BLAS threads)", files[i],
                         counts[c]);
        }
    }
    openblas_set_num_threads(caller);
    snprintf(a, sizeof a, "%s/manifest.json", store_dir);
    json_error_t jerr;
    json_t *m = json_load_file(a, 0, &jerr);
    assert_non_null(m);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(m, "kmeans"), "blas_threads")), 2);
    json_decref(m);
}

static void copy_store(const char *from, const char *to)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && cp -r '%s' '%s'", to, from, to);
    assert_int_equal(system(cmd), 0);
}

/* Rewrites the manifest's checksums for the files as they are now (and sets `version`, with
 * no checksums at all for version 1), so that what a test damages is seen by the check
 * behind the checksum, as a writer's bug would be. A manifest that does not parse is left. */
static void reseal(const char *dir, int version)
{
    char mpath[500];
    snprintf(mpath, sizeof mpath, "%s/manifest.json", dir);
    json_error_t jerr;
    json_t *m = json_load_file(mpath, 0, &jerr);
    if (!m) return;
    json_t *sums = NULL;
    if (version >= 2) assert_int_equal(dga_store_checksums_make(dir, &sums), DGA_OK);
    if (sums) json_object_set_new(m, "checksums", sums);
    else json_object_del(m, "checksums");
    json_object_set_new(m, "version", json_integer(version));
    assert_int_equal(json_dump_file(m, mpath, JSON_INDENT(2) | JSON_PRESERVE_ORDER), 0);
    json_decref(m);
}

static void expect_open_error(const char *dir, const char *needle)
{
    reseal(dir, 2);
    dga_store *s = (dga_store *)1;
    assert_int_not_equal(dga_store_open(dir, &s), DGA_OK);
    assert_null(s);
    if (!strstr(dga_last_error(), needle))
        fail_msg("message '%s' lacks '%s'", dga_last_error(), needle);
}

static void damaged_stores_are_clear_errors(void **state)
{
    char dir[400], path[500];
    snprintf(dir, sizeof dir, "%s/damaged", root);
    /* Truncated tokens. */
    copy_store(store_dir, dir);
    snprintf(path, sizeof path, "%s/tokens.npy", dir);
    struct stat sb;
    assert_int_equal(stat(path, &sb), 0);
    assert_int_equal(truncate(path, sb.st_size - 10), 0);
    expect_open_error(dir, "tokens.npy: truncated");
    /* Missing centroid file. */
    copy_store(store_dir, dir);
    snprintf(path, sizeof path, "%s/level2_centroids.npy", dir);
    assert_int_equal(unlink(path), 0);
    expect_open_error(dir, "level2_centroids.npy");
    /* Offsets that do not add up. */
    copy_store(store_dir, dir);
    snprintf(path, sizeof path, "%s/leaf_offsets.npy", dir);
    dga_npy a;
    assert_int_equal(dga_npy_read(path, &a), DGA_OK);
    ((uint64_t *)a.data)[a.numel - 1] += 1;
    assert_int_equal(dga_npy_write(path, DGA_NPY_U64, 1, a.shape, a.data), DGA_OK);
    dga_npy_free(&a);
    expect_open_error(dir, "leaf_offsets.npy: last entry");
    /* Centroids that are all NaN (assignment would put everything in one domain). */
    copy_store(store_dir, dir);
    snprintf(path, sizeof path, "%s/level1_centroids.npy", dir);
    assert_int_equal(dga_npy_read(path, &a), DGA_OK);
    for (int64_t i = 0; i < a.numel; i++) ((float *)a.data)[i] = NAN;
    assert_int_equal(dga_npy_write(path, DGA_NPY_F32, 2, a.shape, a.data), DGA_OK);
    dga_npy_free(&a);
    expect_open_error(dir, "level1_centroids.npy: centroid 1 holds NaN at column 1");
    /* Document numbers outside [0, documents). */
    const int64_t bad_doc[2] = {-1, 240};
    for (int c = 0; c < 2; c++) {
        copy_store(store_dir, dir);
        snprintf(path, sizeof path, "%s/seq_doc.npy", dir);
        assert_int_equal(dga_npy_read(path, &a), DGA_OK);
        ((int64_t *)a.data)[3] = bad_doc[c];
        assert_int_equal(dga_npy_write(path, DGA_NPY_I64, 1, a.shape, a.data), DGA_OK);
        dga_npy_free(&a);
        expect_open_error(dir, c == 0 ? "seq_doc.npy: entry 3 is -1, outside [0, 240)"
                                      : "seq_doc.npy: entry 3 is 240, outside [0, 240)");
    }
    /* Broken manifest, missing manifest. */
    copy_store(store_dir, dir);
    snprintf(path, sizeof path, "%s/manifest.json", dir);
    FILE *f = fopen(path, "w");
    fputs("{\"format\": \"dgalua-store\", \"version\": 1, ", f);
    fclose(f);
    expect_open_error(dir, "manifest.json: line");
    unlink(path);
    expect_open_error(dir, "not a store");
}

/* Issue 22: a flipped byte used to train silently. The manifest's CRC-32s catch it at open,
 * naming the file; a store of version 1 (before checksums) still opens. */
static void a_flipped_byte_is_caught_at_open(void **state)
{
    char dir[400], path[500];
    snprintf(dir, sizeof dir, "%s/flipped", root);
    const char *files[3] = {"tokens.npy", "seq_index.npy", "tokenizer.json"};
    for (int i = 0; i < 3; i++) {
        copy_store(store_dir, dir);
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        FILE *f = fopen(path, "r+b");
        if (!f) {   /* a store built without a tokenizer */
            assert_int_equal(i, 2);
            continue;
        }
        assert_int_equal(fseek(f, -3, SEEK_END), 0);
        int c = fgetc(f);
        assert_int_equal(fseek(f, -3, SEEK_END), 0);
        fputc(c ^ 0x10, f);
        fclose(f);
        dga_store *s = (dga_store *)1;
        assert_int_equal(dga_store_open(dir, &s), DGA_ERR_FORMAT);
        assert_null(s);
        char want[600];
        snprintf(want, sizeof want, "%s: checksum mismatch", path);
        if (!strstr(dga_last_error(), want)) fail_msg("message '%s' lacks '%s'", dga_last_error(), want);
        assert_non_null(strstr(dga_last_error(), "rebuild it"));
    }
    /* The manifest lists every file the build wrote. */
    snprintf(path, sizeof path, "%s/manifest.json", store_dir);
    json_error_t jerr;
    json_t *m = json_load_file(path, 0, &jerr);
    assert_non_null(m);
    assert_int_equal(json_integer_value(json_object_get(m, "version")), 2);
    json_t *sums = json_object_get(m, "checksums");
    assert_non_null(json_object_get(sums, "tokens.npy"));
    assert_non_null(json_object_get(sums, "leaf_offsets.npy"));
    assert_non_null(json_object_get(sums, "idf.npy"));
    assert_null(json_object_get(sums, "manifest.json"));
    json_decref(m);
    /* A version-1 store (no checksums) opens as before. */
    copy_store(store_dir, dir);
    reseal(dir, 1);
    dga_store *s;
    assert_int_equal(dga_store_open(dir, &s), DGA_OK);
    dga_store_close(s);
    /* A version-2 manifest without its checksums does not. */
    copy_store(store_dir, dir);
    snprintf(path, sizeof path, "%s/manifest.json", dir);
    m = json_load_file(path, 0, &jerr);
    json_object_del(m, "checksums");
    assert_int_equal(json_dump_file(m, path, 0), 0);
    json_decref(m);
    assert_int_equal(dga_store_open(dir, &s), DGA_ERR_FORMAT);
    assert_non_null(strstr(dga_last_error(), "field 'checksums'"));
}

static void replaces_only_stores(void **state)
{
    char dir[400], path[500];
    /* Rebuilding over an existing store replaces it and leaves no temporary directory. */
    snprintf(dir, sizeof dir, "%s/again", root);
    copy_store(store_dir, dir);
    build(dir, 2, 2);
    dga_store *s;
    assert_int_equal(dga_store_open(dir, &s), DGA_OK);
    assert_true(dga_store_k(s, 1) <= 4);
    dga_store_close(s);
    snprintf(path, sizeof path, "%s.tmp.%ld", dir, (long)getpid());
    assert_int_not_equal(access(path, F_OK), 0);
    /* A directory that is not a store is left alone. */
    snprintf(dir, sizeof dir, "%s/precious", root);
    mkdir(dir, 0755);
    snprintf(path, sizeof path, "%s/data.txt", dir);
    FILE *f = fopen(path, "w");
    fputs("keep me", f);
    fclose(f);
    dga_store_builder *b;
    assert_int_equal(dga_store_builder_new(SEQ, VOCAB, EOT, &b), DGA_OK);
    assert_int_equal(dga_store_builder_add_source(b, "x"), DGA_OK);
    int32_t ids[40] = {0};
    assert_int_equal(dga_store_builder_add_doc(b, ids, 40), DGA_OK);
    dga_store_write_opts o = {.nlevels = 1, .levels = {1}, .decode = decode};
    assert_int_equal(dga_store_builder_write(b, dir, &o), DGA_ERR_INVALID);
    assert_non_null(strstr(dga_last_error(), "not a store"));
    assert_int_equal(access(path, F_OK), 0);
    dga_store_builder_free(b);
}

static int setup(void **state)
{
    if (test_tmpdir_make(root, sizeof root, "store")) return -1;
    snprintf(store_dir, sizeof store_dir, "%s/store", root);
    build(store_dir, 2, 3);
    return 0;
}

static int teardown(void **state)
{
    return test_tmpdir_remove(root);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(builder_rejects_bad_input),
        cmocka_unit_test(sources_split_into_coarse_domains),
        cmocka_unit_test(gather_shifts_by_one),
        cmocka_unit_test(histogram_puts_mass_on_the_source_domain),
        cmocka_unit_test(rebuild_is_identical),
        cmocka_unit_test(damaged_stores_are_clear_errors),
        cmocka_unit_test(a_flipped_byte_is_caught_at_open),
        cmocka_unit_test(replaces_only_stores),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
