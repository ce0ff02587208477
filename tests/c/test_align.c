/* Gradient alignment: agreement with separately computed gradients, normalisations,
 * chunked batches, the sign on two synthetic domains, and fd / jvp against exact. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "adamw.h"
#include "align.h"
#include "gpt.h"
#include "rng.h"

enum { V = 32, T = 8, HALF = 16 };

static dga_model *tiny(int max_batch, uint64_t seed)
{
    dga_gpt_config cfg = {.n_layer = 1, .n_head = 2, .n_embd = 16, .n_ctx = T, .vocab_size = V};
    dga_model *m = NULL;
    assert_int_equal(dga_gpt_create(&cfg, max_batch, &m), DGA_OK);
    dga_rng r;
    dga_rng_seed(&r, seed);
    dga_model_init_weights(m, &r);
    return m;
}

/* Domain 0: counting in [0, 16); domain 1: counting by two in [16, 32). A sequence of T + 1
 * tokens gives inputs [0, T) and targets [1, T]. */
static void make_batch(int domain, int B, dga_rng *r, int32_t *in, int32_t *tg)
{
    for (int b = 0; b < B; b++) {
        int s = (int)dga_rng_below(r, HALF);
        for (int t = 0; t <= T; t++) {
            int32_t x = domain == 0 ? (s + t) % HALF : HALF + (s + 2 * t) % HALF;
            if (t < T) in[b * T + t] = x;
            if (t > 0) tg[b * T + t - 1] = x;
        }
    }
}

static double dot(const float *a, const float *b, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++) s += (double)a[i] * b[i];
    return s;
}

static void grad_of(dga_model *m, const int32_t *in, const int32_t *tg, int B, float *out, float *loss)
{
    dga_model_zero_grad(m);
    assert_int_equal(dga_model_forward(m, in, tg, B, T, loss), DGA_OK);
    assert_int_equal(dga_model_backward(m), DGA_OK);
    memcpy(out, dga_model_grads(m), dga_model_num_params(m) * sizeof(float));
}

static void test_matches_separate_gradients(void **state)
{
    (void)state;
    enum { B = 4, K = 3 };
    dga_model *m = tiny(B, 1);
    size_t np = dga_model_num_params(m);
    dga_rng r;
    dga_rng_seed(&r, 2);
    int32_t in[K + 1][B * T], tg[K + 1][B * T];
    for (int i = 0; i <= K; i++) make_batch(i % 2, B, &r, in[i], tg[i]);
    tg[2][3] = DGA_IGNORE;   /* ignored targets are fine */

    float *gt = malloc(np * sizeof *gt), *gi = malloc(np * sizeof *gi);
    float lt, li[K];
    double expect[K], norms[K];
    grad_of(m, in[K], tg[K], B, gt, &lt);
    for (int i = 0; i < K; i++) {
        grad_of(m, in[i], tg[i], B, gi, &li[i]);
        expect[i] = dot(gi, gt, np);
        norms[i] = sqrt(dot(gi, gi, np));
    }

    dga_align_ws *ws = NULL;
    assert_int_equal(dga_align_ws_create(np, &ws), DGA_OK);
    dga_batch tb = {in[K], tg[K], B, T}, db[K];
    for (int i = 0; i < K; i++) db[i] = (dga_batch){in[i], tg[i], B, T};
    double a[K], l[K], gn[K];
    dga_align_result res = {.dot = a, .loss = l, .grad_norm = gn};
    dga_align_opts none = {.method = DGA_ALIGN_EXACT};
    assert_int_equal(dga_align(m, ws, &tb, db, K, &none, &res), DGA_OK);
    assert_true(fabs(res.target_loss - lt) < 1e-6);
    assert_true(fabs(res.target_norm - sqrt(dot(gt, gt, np))) < 1e-6 * res.target_norm);
    for (int i = 0; i < K; i++) {
        assert_true(fabs(a[i] - expect[i]) <= 1e-5 * fabs(expect[i]) + 1e-9);
        assert_true(fabs(l[i] - li[i]) < 1e-6);
        assert_true(fabs(gn[i] - norms[i]) < 1e-5 * norms[i]);
    }
    assert_memory_equal(dga_align_ws_target_grad(ws), gt, np * sizeof(float));

    /* a bad domain batch names itself */
    int32_t bad[B * T];
    memcpy(bad, in[1], sizeof bad);
    bad[5] = V + 3;
    db[1].inputs = bad;
    assert_int_not_equal(dga_align(m, ws, &tb, db, K, &none, &res), DGA_OK);
    assert_non_null(strstr(dga_last_error(), "domain batch #2"));
    res.dot = NULL;   /* the inner products are the result: not optional */
    assert_int_equal(dga_align(m, ws, &tb, db, K, &none, &res), DGA_ERR_INVALID);
    res.dot = a;
    dga_align_ws *small = NULL;
    assert_int_equal(dga_align_ws_create(np - 1, &small), DGA_OK);
    assert_int_equal(dga_align(m, small, &tb, db, K, &none, &res), DGA_ERR_INVALID);
    dga_align_ws_free(small);
    dga_align_ws_free(ws);
    free(gt);
    free(gi);
    dga_model_free(m);
}

/* A batch of 7 rows through a model whose max batch is 3 gives the one-pass gradient. */
static void test_chunked_batch(void **state)
{
    (void)state;
    enum { B = 7 };
    dga_model *big = tiny(B, 5), *small = tiny(3, 5);
    size_t np = dga_model_num_params(big);
    dga_rng r;
    dga_rng_seed(&r, 9);
    int32_t in[B * T], tg[B * T];
    make_batch(0, B, &r, in, tg);
    for (int t = 0; t < T; t++) tg[3 * T + t] = DGA_IGNORE;   /* one empty row, uneven chunks */
    tg[5 * T + 2] = DGA_IGNORE;
    dga_batch b = {in, tg, B, T};
    double l_big, l_small;
    assert_int_equal(dga_batch_grad(big, &b, &l_big), DGA_OK);
    assert_int_equal(dga_batch_grad(small, &b, &l_small), DGA_OK);
    assert_true(fabs(l_big - l_small) < 1e-5);
    const float *g1 = dga_model_grads(big), *g2 = dga_model_grads(small);
    double num = 0, den = 0;
    for (size_t i = 0; i < np; i++) {
        num += ((double)g1[i] - g2[i]) * ((double)g1[i] - g2[i]);
        den += (double)g1[i] * g1[i];
    }
    assert_true(den > 0 && sqrt(num / den) < 1e-5);
    dga_model_free(big);
    dga_model_free(small);
}

/* Trained a little on the mix, the model's gradient on a target set from domain d aligns
 * more with domain d's gradient than with the other's. */
static void test_sign_two_domains(void **state)
{
    (void)state;
    enum { B = 8 };
    dga_model *m = tiny(B, 3);
    size_t np = dga_model_num_params(m);
    dga_adamw_config cfg = dga_adamw_defaults();
    dga_adamw *opt = NULL;
    assert_int_equal(dga_adamw_create(np, &cfg, NULL, 0, &opt), DGA_OK);
    dga_rng r;
    dga_rng_seed(&r, 4);
    int32_t in[B * T], tg[B * T];
    for (int step = 0; step < 20; step++) {
        make_batch(step % 2, B, &r, in, tg);
        dga_model_zero_grad(m);
        float l;
        assert_int_equal(dga_model_forward(m, in, tg, B, T, &l), DGA_OK);
        assert_int_equal(dga_model_backward(m), DGA_OK);
        assert_int_equal(dga_adamw_step(opt, dga_model_params(m), dga_model_grads(m), 3e-3f), DGA_OK);
    }
    dga_align_ws *ws = NULL;
    assert_int_equal(dga_align_ws_create(np, &ws), DGA_OK);
    int32_t din[2][B * T], dtg[2][B * T], tin[B * T], ttg[B * T];
    make_batch(0, B, &r, din[0], dtg[0]);
    make_batch(1, B, &r, din[1], dtg[1]);
    dga_batch db[2] = {{din[0], dtg[0], B, T}, {din[1], dtg[1], B, T}};
    for (int target = 0; target < 2; target++) {
        make_batch(target, B, &r, tin, ttg);
        dga_batch tb = {tin, ttg, B, T};
        double a[2], l[2], gn[2];
        dga_align_result res = {.dot = a, .loss = l, .grad_norm = gn};
        assert_int_equal(dga_align(m, ws, &tb, db, 2, NULL, &res), DGA_OK);
        assert_true(a[target] > a[1 - target]);
        assert_true(a[target] > 0);
    }
    dga_align_ws_free(ws);
    dga_adamw_free(opt);
    dga_model_free(m);
}

/* Central differences agree with exact alignments and leave the parameters bit-identical. */
static void test_fd_matches_exact(void **state)
{
    (void)state;
    enum { B = 6, K = 4 };
    dga_model *m = tiny(4, 21);   /* B > max batch: chunked evaluation */
    size_t np = dga_model_num_params(m);
    dga_rng r;
    dga_rng_seed(&r, 22);
    int32_t in[K + 1][B * T], tg[K + 1][B * T];
    for (int i = 0; i <= K; i++) make_batch(i % 2, B, &r, in[i], tg[i]);
    dga_batch tb = {in[K], tg[K], B, T}, db[K];
    for (int i = 0; i < K; i++) db[i] = (dga_batch){in[i], tg[i], B, T};
    dga_align_ws *ws = NULL;
    assert_int_equal(dga_align_ws_create(np, &ws), DGA_OK);
    double ae[K], le[K], ge[K], af[K], lf[K], gf[K];
    dga_align_result exact = {.dot = ae, .loss = le, .grad_norm = ge};
    dga_align_result fd = {.dot = af, .loss = lf, .grad_norm = gf};
    dga_align_opts oe = {.method = DGA_ALIGN_EXACT}, of = {.method = DGA_ALIGN_FD};
    float *before = malloc(np * sizeof *before);
    memcpy(before, dga_model_params(m), np * sizeof *before);
    assert_int_equal(dga_align(m, ws, &tb, db, K, &oe, &exact), DGA_OK);
    assert_int_equal(dga_align(m, ws, &tb, db, K, &of, &fd), DGA_OK);
    assert_memory_equal(before, dga_model_params(m), np * sizeof *before);
    double amax = 0;
    for (int i = 0; i < K; i++) amax = fmax(amax, fabs(ae[i]));
    assert_true(amax > 0);
    for (int i = 0; i < K; i++) {
        assert_true(fabs(af[i] - ae[i]) <= 2e-2 * amax);
        assert_true(fabs(lf[i] - le[i]) <= 1e-4 * le[i]);
        assert_true(isnan(gf[i]));
    }
    free(before);
    dga_align_ws_free(ws);
    dga_model_free(m);
}

/* Forward mode equals exact: a_i within 1e-4 relative (|a_jvp - a_exact| <= 1e-4 |a_exact|,
 * each domain; measured ~1e-7), losses within 1e-5 relative, with chunked batches (B = 6 >
 * max batch 4), scattered ignored targets, a fully ignored row and a fully ignored domain
 * batch (a = 0, loss = 0 under both methods). Parameters are left bit-identical. */
static void test_jvp_matches_exact(void **state)
{
    (void)state;
    enum { B = 6, K = 5 };
    dga_model *m = tiny(4, 31);
    size_t np = dga_model_num_params(m);
    dga_rng r;
    dga_rng_seed(&r, 32);
    int32_t in[K + 1][B * T], tg[K + 1][B * T];
    for (int i = 0; i <= K; i++) make_batch(i % 2, B, &r, in[i], tg[i]);
    for (int t = 0; t < T; t++) tg[1][4 * T + t] = DGA_IGNORE;   /* a row in the second chunk */
    tg[2][3] = tg[2][T + 5] = tg[K][7] = DGA_IGNORE;
    for (int t = 0; t < B * T; t++) tg[3][t] = DGA_IGNORE;        /* nothing to learn from */
    dga_batch tb = {in[K], tg[K], B, T}, db[K];
    for (int i = 0; i < K; i++) db[i] = (dga_batch){in[i], tg[i], B, T};
    dga_align_ws *ws = NULL;
    assert_int_equal(dga_align_ws_create(np, &ws), DGA_OK);
    double ae[K], le[K], ge[K], aj[K], lj[K], gj[K];
    dga_align_result exact = {.dot = ae, .loss = le, .grad_norm = ge};
    dga_align_result jvp = {.dot = aj, .loss = lj, .grad_norm = gj};
    dga_align_opts oe = {.method = DGA_ALIGN_EXACT}, oj = {.method = DGA_ALIGN_JVP};
    float *before = malloc(np * sizeof *before);
    memcpy(before, dga_model_params(m), np * sizeof *before);
    assert_int_equal(dga_align(m, ws, &tb, db, K, &oe, &exact), DGA_OK);
    assert_int_equal(dga_align(m, ws, &tb, db, K, &oj, &jvp), DGA_OK);
    assert_memory_equal(before, dga_model_params(m), np * sizeof *before);
    assert_true(jvp.target_loss == exact.target_loss && jvp.target_norm == exact.target_norm);
    double worst = 0;
    for (int i = 0; i < K; i++) {
        if (i == 3) {
            assert_true(ae[i] == 0.0 && aj[i] == 0.0 && le[i] == 0.0 && lj[i] == 0.0);
            continue;
        }
        assert_true(fabs(ae[i]) > 0);
        double rel = fabs(aj[i] - ae[i]) / fabs(ae[i]);
        if (!(rel < 1e-4)) fail_msg("domain %d: jvp %.10g, exact %.10g", i, aj[i], ae[i]);
        worst = fmax(worst, rel);
        assert_true(fabs(lj[i] - le[i]) <= 1e-5 * le[i]);
        assert_true(isnan(gj[i]));
    }
    print_message("# jvp vs exact: worst relative error %.2e\n", worst);
    dga_align_opts bad = {.method = (dga_align_method)7};
    assert_int_equal(dga_align(m, ws, &tb, db, K, &bad, &jvp), DGA_ERR_INVALID);
    assert_non_null(strstr(dga_last_error(), "method"));
    dga_align_method meth;
    assert_int_equal(dga_align_method_parse("jvp", &meth), DGA_OK);
    assert_int_equal(meth, DGA_ALIGN_JVP);
    assert_string_equal(dga_align_method_name(meth), "jvp");
    assert_int_equal(dga_align_method_parse("JVP", &meth), DGA_ERR_INVALID);
    /* a bad domain batch names itself */
    int32_t badin[B * T];
    memcpy(badin, in[2], sizeof badin);
    badin[9] = -2;
    db[2].inputs = badin;
    assert_int_not_equal(dga_align(m, ws, &tb, db, K, &oj, &jvp), DGA_OK);
    assert_non_null(strstr(dga_last_error(), "domain batch #3"));
    free(before);
    dga_align_ws_free(ws);
    dga_model_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matches_separate_gradients),
        cmocka_unit_test(test_chunked_batch),
        cmocka_unit_test(test_sign_two_domains),
        cmocka_unit_test(test_fd_matches_exact),
        cmocka_unit_test(test_jvp_matches_exact),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
