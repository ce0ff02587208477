/* Mixture sampler: frequencies, permutations, caps, budgets, state, errors, basis mixing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sampler.h"

static dga_sampler *make(int64_t k, const int64_t *sizes, const int64_t *budget, int64_t cap,
                         uint64_t seed)
{
    dga_sampler *s = NULL;
    assert_int_equal(dga_sampler_create(k, sizes, budget, cap, seed, &s), DGA_OK);
    assert_non_null(s);
    return s;
}

/* Pearson chi-square of the domain counts against the weights, k - 1 degrees of freedom. */
static void test_frequencies_match_weights(void **state)
{
    (void)state;
    enum { K = 10, N = 200000 };
    int64_t sizes[K];
    for (int i = 0; i < K; i++) sizes[i] = 50000;
    dga_sampler *s = make(K, sizes, NULL, 0, 42);
    float w[K] = {0.30f, 0.20f, 0.15f, 0.10f, 0.08f, 0.07f, 0.05f, 0.03f, 0.02f, 0.0f};
    assert_int_equal(dga_sampler_set_weights(s, w, K), DGA_OK);
    int32_t *dom = malloc(N * sizeof *dom), *idx = malloc(N * sizeof *idx);
    assert_int_equal(dga_sampler_draw(s, N, dom, idx), DGA_OK);
    double count[K] = {0};
    for (int t = 0; t < N; t++) {
        assert_true(dom[t] >= 0 && dom[t] < K);
        count[dom[t]] += 1;
    }
    assert_true(count[K - 1] == 0);   /* zero weight is never drawn */
    double chi2 = 0;
    for (int i = 0; i < K - 1; i++) {
        double e = (double)N * w[i];
        chi2 += (count[i] - e) * (count[i] - e) / e;
    }
    /* 8 degrees of freedom: P(chi2 > 26.12) = 0.001 under the null. */
    assert_true(chi2 < 26.12);
    const int64_t *drawn = dga_sampler_drawn(s);
    for (int i = 0; i < K; i++) assert_true(drawn[i] == (int64_t)count[i]);
    free(dom);
    free(idx);
    dga_sampler_free(s);
}

/* Within each epoch every sequence of a domain comes exactly once. */
static void test_no_repeat_within_epoch(void **state)
{
    (void)state;
    enum { K = 3, N = 3000 };
    int64_t sizes[K] = {7, 13, 1};
    dga_sampler *s = make(K, sizes, NULL, 0, 7);
    int32_t dom[N], idx[N];
    assert_int_equal(dga_sampler_draw(s, N, dom, idx), DGA_OK);
    int64_t seen[K] = {0};
    int mark[K][13];
    memset(mark, 0, sizeof mark);
    for (int t = 0; t < N; t++) {
        int d = dom[t];
        assert_true(idx[t] >= 0 && idx[t] < sizes[d]);
        int64_t epoch = seen[d] / sizes[d];
        assert_true(mark[d][idx[t]] == epoch);   /* not yet drawn in this epoch */
        mark[d][idx[t]] = (int)epoch + 1;
        seen[d]++;
    }
    const int64_t *ep = dga_sampler_epochs(s);
    for (int d = 0; d < K; d++) assert_true(ep[d] == (seen[d] + sizes[d] - 1) / sizes[d]);
    dga_sampler_free(s);
}

/* A domain at its cap leaves the mixture; all capped is an error with a clear message. */
static void test_epoch_cap(void **state)
{
    (void)state;
    int64_t sizes[2] = {5, 50};
    dga_sampler *s = make(2, sizes, NULL, 2, 3);
    float w[2] = {0.5f, 0.5f};
    assert_int_equal(dga_sampler_set_weights(s, w, 2), DGA_OK);
    int32_t dom[200], idx[200];
    int64_t total = 0;
    dga_status st = DGA_OK;
    while (total < 200 && (st = dga_sampler_draw(s, 1, dom + total, idx + total)) == DGA_OK) {
        int64_t nc;
        dga_sampler_capped(s, &nc);
        if (nc == 1) {   /* domain 0 capped: the mixture is now all domain 1 */
            double wt[2];
            dga_sampler_weights(s, wt);
            assert_true(dga_sampler_is_capped(s, 0));
            assert_true(wt[0] == 0.0 && wt[1] == 1.0);
        }
        total++;
    }
    assert_int_equal(st, DGA_ERR_INVALID);
    assert_non_null(strstr(dga_last_error(), "every domain reached its epoch cap"));
    assert_true(total == 2 * 5 + 2 * 50);
    const int64_t *drawn = dga_sampler_drawn(s), *ep = dga_sampler_epochs(s);
    assert_true(drawn[0] == 10 && drawn[1] == 100);
    assert_true(ep[0] == 2 && ep[1] == 2);
    int64_t nc;
    const int32_t *capped = dga_sampler_capped(s, &nc);
    assert_true(nc == 2 && capped[0] == 0 && capped[1] == 1);
    /* setting weights after everything is capped is the same error */
    assert_int_equal(dga_sampler_set_weights(s, w, 2), DGA_ERR_INVALID);
    assert_non_null(strstr(dga_last_error(), "every domain reached its epoch cap"));
    dga_sampler_free(s);
}

/* Every draw caps a domain (size 1, cap 1): must stay fast (no O(k) rebuild per cap). */
static void test_many_caps_large_k(void **state)
{
    (void)state;
    const int64_t K = 262144;
    int64_t *sizes = malloc((size_t)K * sizeof *sizes);
    for (int64_t i = 0; i < K; i++) sizes[i] = 1;
    dga_sampler *s = make(K, sizes, NULL, 1, 11);
    int32_t *dom = malloc((size_t)K * sizeof *dom), *idx = malloc((size_t)K * sizeof *idx);
    assert_int_equal(dga_sampler_draw(s, K, dom, idx), DGA_OK);
    char *hit = calloc((size_t)K, 1);
    for (int64_t t = 0; t < K; t++) {
        assert_true(idx[t] == 0);
        assert_true(!hit[dom[t]]);   /* a capped domain is never drawn again */
        hit[dom[t]] = 1;
    }
    int32_t d1, i1;
    assert_int_equal(dga_sampler_draw(s, 1, &d1, &i1), DGA_ERR_INVALID);
    assert_non_null(strstr(dga_last_error(), "every domain reached its epoch cap"));
    free(hit); free(dom); free(idx); free(sizes);
    dga_sampler_free(s);
}

static void test_budget(void **state)
{
    (void)state;
    int64_t sizes[3] = {100, 100, 100}, budget[3] = {10, -1, 0};
    dga_sampler *s = make(3, sizes, budget, 0, 5);
    const int64_t *av = dga_sampler_available(s);
    assert_true(av[0] == 10 && av[1] == 100 && av[2] == 0);
    float w[3] = {0.5f, 0.5f, 0.0f};
    assert_int_equal(dga_sampler_set_weights(s, w, 3), DGA_OK);
    enum { N = 2000 };
    int32_t dom[N], idx[N];
    assert_int_equal(dga_sampler_draw(s, N, dom, idx), DGA_OK);
    for (int t = 0; t < N; t++) {
        assert_true(dom[t] != 2);
        if (dom[t] == 0) assert_true(idx[t] < 10);
    }
    float bad[3] = {0.5f, 0.25f, 0.25f};   /* weight on the domain with a budget of 0 */
    assert_int_equal(dga_sampler_set_weights(s, bad, 3), DGA_ERR_INVALID);
    assert_non_null(strstr(dga_last_error(), "domain #3"));
    dga_sampler_free(s);
}

static void draw_many(dga_sampler *s, int n, int32_t *dom, int32_t *idx, int32_t *probe)
{
    assert_int_equal(dga_sampler_draw(s, n, dom, idx), DGA_OK);
    assert_int_equal(dga_sampler_draw_from(s, 1, 3, probe), DGA_OK);
}

/* Save, draw; restore (into the same and into a fresh sampler), draw: identical. */
static void test_state_roundtrip(void **state)
{
    (void)state;
    int64_t sizes[4] = {3, 9, 20, 1};
    dga_sampler *s = make(4, sizes, NULL, 3, 99);
    float w[4] = {0.4f, 0.3f, 0.2f, 0.1f};
    assert_int_equal(dga_sampler_set_weights(s, w, 4), DGA_OK);
    int32_t d0[40], i0[40], p0[3];
    draw_many(s, 25, d0, i0, p0);   /* mid-epoch for several domains, some capped */
    void *buf;
    size_t len;
    assert_int_equal(dga_sampler_state_save(s, &buf, &len), DGA_OK);
    int32_t da[30], ia[30], pa[3], db[30], ib[30], pb[3];
    draw_many(s, 30, da, ia, pa);
    int64_t nca;
    dga_sampler_capped(s, &nca);
    assert_int_equal(dga_sampler_state_load(s, buf, len), DGA_OK);
    draw_many(s, 30, db, ib, pb);
    assert_memory_equal(da, db, sizeof da);
    assert_memory_equal(ia, ib, sizeof ia);
    assert_memory_equal(pa, pb, sizeof pa);

    dga_sampler *t = make(4, sizes, NULL, 3, 99);
    assert_int_equal(dga_sampler_state_load(t, buf, len), DGA_OK);
    draw_many(t, 30, db, ib, pb);
    assert_memory_equal(da, db, sizeof da);
    assert_memory_equal(ia, ib, sizeof ia);
    int64_t nct;
    dga_sampler_capped(t, &nct);
    assert_true(nct == nca);

    /* mismatches are errors and leave the sampler alone */
    int64_t other[4] = {3, 9, 21, 1};
    dga_sampler *u = make(4, other, NULL, 3, 99);
    assert_int_equal(dga_sampler_state_load(u, buf, len), DGA_ERR_INVALID);
    assert_non_null(strstr(dga_last_error(), "domain #3"));
    /* issue 22: the message says what happened (the data changed), not only the counts */
    assert_non_null(strstr(dga_last_error(), "had 20 available sequences when it was saved, this sampler has 21: "
                                             "the data changed since the run started"));
    assert_int_equal(dga_sampler_state_load(t, buf, len - 1), DGA_ERR_FORMAT);
    ((char *)buf)[0] ^= 1;
    assert_int_equal(dga_sampler_state_load(t, buf, len), DGA_ERR_FORMAT);
    assert_non_null(strstr(dga_last_error(), "magic"));
    free(buf);
    dga_sampler_free(u);
    dga_sampler_free(t);
    dga_sampler_free(s);
}

static void expect_bad(dga_sampler *s, const float *w, int64_t n, const char *phrase)
{
    assert_int_equal(dga_sampler_set_weights(s, w, n), DGA_ERR_INVALID);
    if (!strstr(dga_last_error(), phrase)) fail_msg("message \"%s\" lacks \"%s\"", dga_last_error(), phrase);
}

static void test_bad_weights(void **state)
{
    (void)state;
    int64_t sizes[3] = {10, 0, 10};
    dga_sampler *s = make(3, sizes, NULL, 0, 1);
    float good[3] = {1.0f, 0.0f, 3.0f};
    assert_int_equal(dga_sampler_set_weights(s, good, 3), DGA_OK);
    float neg[3] = {0.5f, 0.0f, -0.1f}, nan_w[3] = {NAN, 0.0f, 1.0f}, inf_w[3] = {1.0f, 0.0f, INFINITY},
          zero[3] = {0, 0, 0}, empty[3] = {0.5f, 0.5f, 0.0f};
    expect_bad(s, neg, 3, "expected >= 0");
    expect_bad(s, nan_w, 3, "finite");
    expect_bad(s, inf_w, 3, "finite");
    expect_bad(s, good, 2, "expected k = 3");
    expect_bad(s, zero, 3, "sum to zero");
    expect_bad(s, empty, 3, "no available sequence");
    /* the previous weights are still in force */
    double wt[3];
    dga_sampler_weights(s, wt);
    assert_true(fabs(wt[0] - 0.25) < 1e-12 && wt[1] == 0 && fabs(wt[2] - 0.75) < 1e-12);

    dga_sampler *bad = NULL;
    int64_t none[2] = {0, 0}, negsize[2] = {3, -1};
    assert_int_equal(dga_sampler_create(2, none, NULL, 0, 1, &bad), DGA_ERR_INVALID);
    assert_null(bad);
    assert_int_equal(dga_sampler_create(2, negsize, NULL, 0, 1, &bad), DGA_ERR_INVALID);
    assert_int_equal(dga_sampler_create(0, negsize, NULL, 0, 1, &bad), DGA_ERR_INVALID);
    int32_t idx[2];
    assert_int_equal(dga_sampler_draw_from(s, 1, 2, idx), DGA_ERR_INVALID);   /* empty domain */
    assert_int_equal(dga_sampler_draw_from(s, 3, 2, idx), DGA_ERR_INVALID);   /* out of range */
    dga_sampler_free(s);
}

/* Probes: distinct within a call, inside the budget, no effect on training counters. */
static void test_draw_from(void **state)
{
    (void)state;
    int64_t sizes[2] = {1000, 50}, budget[2] = {-1, 20};
    dga_sampler *s = make(2, sizes, budget, 0, 8);
    int32_t idx[20];
    for (int rep = 0; rep < 50; rep++) {
        assert_int_equal(dga_sampler_draw_from(s, 1, 20, idx), DGA_OK);
        int seen[20] = {0};
        for (int i = 0; i < 20; i++) {
            assert_true(idx[i] >= 0 && idx[i] < 20);
            assert_false(seen[idx[i]]);
            seen[idx[i]] = 1;
        }
    }
    assert_true(dga_sampler_drawn(s)[1] == 0 && dga_sampler_epochs(s)[1] == 0);
    /* the training stream is independent of probes */
    dga_sampler *t = make(2, sizes, budget, 0, 8);
    int32_t da[50], ia[50], db[50], ib[50];
    assert_int_equal(dga_sampler_draw(s, 50, da, ia), DGA_OK);
    assert_int_equal(dga_sampler_draw(t, 50, db, ib), DGA_OK);
    assert_memory_equal(da, db, sizeof da);
    assert_memory_equal(ia, ib, sizeof ia);
    dga_sampler_free(t);
    dga_sampler_free(s);
}

static void test_basis(void **state)
{
    (void)state;
    enum { K = 5, NB = 3 };
    float c0[K] = {2, 0, 0, 2, 0}, c1[K] = {0, 1, 0, 0, 0}, c2[K] = {1, 1, 1, 1, 0};
    const float *cols[NB] = {c0, c1, c2};
    dga_basis *P = NULL;
    assert_int_equal(dga_basis_create(K, NB, cols, &P), DGA_OK);
    assert_true(dga_basis_nnz(P) == 7);
    float a[NB] = {0.5f, 0.25f, 0.25f}, w[K];
    assert_int_equal(dga_mix_dist(P, a, NB, w), DGA_OK);
    /* dense P alpha with normalised columns */
    const float *raw[NB] = {c0, c1, c2};
    for (int i = 0; i < K; i++) {
        double e = 0;
        for (int j = 0; j < NB; j++) {
            double sum = 0;
            for (int r = 0; r < K; r++) sum += raw[j][r];
            e += a[j] * raw[j][i] / sum;
        }
        assert_true(fabs(w[i] - e) < 1e-6);
    }
    float badalpha[NB] = {1, -1, 0};
    assert_int_equal(dga_mix_dist(P, badalpha, NB, w), DGA_ERR_INVALID);
    assert_int_equal(dga_mix_dist(P, a, NB - 1, w), DGA_ERR_INVALID);

    int64_t sizes[K] = {10, 10, 10, 10, 10};
    dga_sampler *s = make(K, sizes, NULL, 0, 4);
    enum { N = 40000 };
    int32_t *dom = malloc(N * sizeof *dom), *idx = malloc(N * sizeof *idx);
    assert_int_equal(dga_basis_draw(P, 2, s, N, dom, idx), DGA_OK);
    double count[K] = {0};
    for (int t = 0; t < N; t++) {
        count[dom[t]]++;
        assert_true(idx[t] >= 0 && idx[t] < 10);
    }
    assert_true(count[4] == 0);
    double chi2 = 0;
    for (int i = 0; i < 4; i++) chi2 += (count[i] - N / 4.0) * (count[i] - N / 4.0) / (N / 4.0);
    assert_true(chi2 < 16.27);   /* 3 degrees of freedom, p = 0.001 */
    assert_int_equal(dga_basis_draw(P, 1, s, 100, dom, idx), DGA_OK);
    for (int t = 0; t < 100; t++) assert_true(dom[t] == 1);
    assert_int_equal(dga_basis_draw(P, 3, s, 1, dom, idx), DGA_ERR_INVALID);
    free(dom);
    free(idx);

    float zero[K] = {0}, negc[K] = {1, -1, 0, 0, 0};
    const float *bad1[1] = {zero}, *bad2[1] = {negc};
    dga_basis *Q = NULL;
    assert_int_equal(dga_basis_create(K, 1, bad1, &Q), DGA_ERR_INVALID);
    assert_int_equal(dga_basis_create(K, 1, bad2, &Q), DGA_ERR_INVALID);
    assert_null(Q);
    dga_sampler_free(s);
    dga_basis_free(P);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_frequencies_match_weights),
        cmocka_unit_test(test_no_repeat_within_epoch),
        cmocka_unit_test(test_epoch_cap),
        cmocka_unit_test(test_many_caps_large_k),
        cmocka_unit_test(test_budget),
        cmocka_unit_test(test_state_roundtrip),
        cmocka_unit_test(test_bad_weights),
        cmocka_unit_test(test_draw_from),
        cmocka_unit_test(test_basis),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
