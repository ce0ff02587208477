/* AdamW against hand-computed steps, decay ranges, non-finite gradients, clipping. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <string.h>

#include "adamw.h"

/* lr 0.1, betas (0.9, 0.95), eps 1e-8, wd 0.1; one parameter starting at 1 with gradients
 * 0.5, -0.25, 0.125. By hand:
 *  t=1: m = 0.05, v = 0.0125, m^ = 0.5, v^ = 0.25  -> step 0.1 * 0.5 / (0.5 + 1e-8);
 *       decayed: 1 * (1 - 0.01) - 0.1 = 0.89;  not decayed: 0.9
 *  t=2: m = 0.045 - 0.025 = 0.02, v = 0.011875 + 0.003125 = 0.015,
 *       m^ = 0.02 / 0.19, v^ = 0.015 / 0.0975 -> step 0.0268369421
 *       decayed: 0.89 * 0.99 - 0.02683694 = 0.85426306;  not decayed: 0.87316306
 *  t=3: m = 0.0305, v = 0.01503125 -> decayed 0.81105227, not decayed 0.83849490 */
static const double DECAYED[3] = {0.890000002, 0.8542630578558273, 0.8110522654784148};
static const double PLAIN[3] = {0.900000002, 0.8731630578758274, 0.8384948960769731};

static void test_hand_steps(void **state)
{
    (void)state;
    dga_adamw_config c = dga_adamw_defaults();
    assert_true(c.beta1 == 0.9f && c.beta2 == 0.95f && c.eps == 1e-8f && c.weight_decay == 0.1f);
    /* elements 0..5; decayed: [1, 3) and [4, 5) */
    const size_t ranges[2][2] = {{1, 3}, {4, 5}};
    dga_adamw *opt = NULL;
    assert_int_equal(dga_adamw_create(6, &c, ranges, 2, &opt), DGA_OK);
    assert_int_equal(dga_adamw_size(opt), 6);
    float p[6] = {1, 1, 1, 1, 1, 1};
    const float gs[3] = {0.5f, -0.25f, 0.125f};
    const int decayed[6] = {0, 1, 1, 0, 1, 0};
    for (int t = 0; t < 3; t++) {
        float g[6];
        for (int i = 0; i < 6; i++) g[i] = gs[t];
        assert_int_equal(dga_adamw_step(opt, p, g, 0.1f), DGA_OK);
        assert_int_equal(dga_adamw_steps(opt), t + 1);
        for (int i = 0; i < 6; i++) {
            double want = decayed[i] ? DECAYED[t] : PLAIN[t];
            if (fabs(p[i] - want) > 2e-7)
                fail_msg("step %d element %d: %.9f, expected %.9f", t + 1, i, p[i], want);
        }
    }
    /* moments after three steps: m = 0.0305, v = 0.01503125 */
    assert_true(fabsf(dga_adamw_m(opt)[0] - 0.0305f) < 1e-8f);
    assert_true(fabsf(dga_adamw_v(opt)[5] - 0.01503125f) < 1e-8f);
    dga_adamw_set_steps(opt, 100);
    assert_int_equal(dga_adamw_steps(opt), 100);
    dga_adamw_free(opt);
    dga_adamw_free(NULL);
}

/* A long vector (vectorised path) with decay ranges cut at odd places, against the update
 * written out per element in double. */
static void test_long_vector(void **state)
{
    (void)state;
    enum { N = 1003 };
    static float p[N], g[N];
    static double pd[N], md[N], vd[N];
    const size_t ranges[2][2] = {{5, 400}, {517, 1001}};
    dga_adamw_config c = dga_adamw_defaults();
    dga_adamw *opt = NULL;
    assert_int_equal(dga_adamw_create(N, &c, ranges, 2, &opt), DGA_OK);
    for (int i = 0; i < N; i++) pd[i] = p[i] = (float)sin(i * 0.37) * 0.5f;
    for (int t = 1; t <= 3; t++) {
        for (int i = 0; i < N; i++) g[i] = (float)cos(i * 0.11 + t) * (float)(1 + i % 7);
        assert_int_equal(dga_adamw_step(opt, p, g, 0.01f), DGA_OK);
        double bc1 = 1 - pow(0.9, t), bc2 = 1 - pow(0.95, t);
        for (int i = 0; i < N; i++) {
            int dec = (i >= 5 && i < 400) || (i >= 517 && i < 1001);
            if (dec) pd[i] *= 1 - 0.01 * 0.1;
            md[i] = 0.9 * md[i] + 0.1 * g[i];
            vd[i] = 0.95 * vd[i] + 0.05 * (double)g[i] * g[i];
            pd[i] -= 0.01 / bc1 * md[i] / (sqrt(vd[i]) / sqrt(bc2) + 1e-8);
            if (fabs(p[i] - pd[i]) > 1e-6)
                fail_msg("step %d element %d: %.9f, expected %.9f", t, i, p[i], pd[i]);
        }
    }
    dga_adamw_free(opt);
}

/* The vector path (AVX-512 or AVX2, whichever the build has) against the scalar formula in
 * float, in the same order of operations: equal bit for bit, at every length's tail too. */
static void test_simd_matches_scalar(void **state)
{
    (void)state;
    enum { N = 1003 };
    static float p[N], g[N], ps[N], ms[N], vs[N];
    const size_t ranges[1][2] = {{3, 700}};
    dga_adamw_config c = dga_adamw_defaults();
    dga_adamw *opt = NULL;
    assert_int_equal(dga_adamw_create(N, &c, ranges, 1, &opt), DGA_OK);
    for (int i = 0; i < N; i++) ps[i] = p[i] = (float)sin(i * 0.53) * 0.7f;
    const float lr = 3e-3f;
    for (int t = 1; t <= 4; t++) {
        for (int i = 0; i < N; i++) g[i] = (float)cos(i * 0.07 + 2 * t) * (float)(1 + i % 5) * 0.1f;
        assert_int_equal(dga_adamw_step(opt, p, g, lr), DGA_OK);
        float step = (float)(lr / (1.0 - pow(c.beta1, t)));
        float bc2_sqrt = (float)sqrt(1.0 - pow(c.beta2, t));
        float decay_mul = 1.0f - lr * c.weight_decay;
        for (int i = 0; i < N; i++) {
            float pi = ps[i] * ((i >= 3 && i < 700) ? decay_mul : 1.0f);
            ms[i] = ms[i] + (g[i] - ms[i]) * (1.0f - c.beta1);
            vs[i] = vs[i] * c.beta2 + (1.0f - c.beta2) * g[i] * g[i];
            ps[i] = pi - step * (ms[i] / (sqrtf(vs[i]) / bc2_sqrt + c.eps));
            if (memcmp(&p[i], &ps[i], sizeof p[i]) != 0)
                fail_msg("step %d element %d: %.9g, the scalar formula gives %.9g", t, i, p[i], ps[i]);
        }
    }
    dga_adamw_free(opt);
}

static void test_ranges(void **state)
{
    (void)state;
    dga_adamw_config c = dga_adamw_defaults();
    c.weight_decay = 0.5f;
    dga_adamw *opt = NULL;
    /* overlapping and empty ranges; zero gradient isolates the decay */
    const size_t ranges[3][2] = {{2, 6}, {4, 8}, {9, 9}};
    assert_int_equal(dga_adamw_create(10, &c, ranges, 3, &opt), DGA_OK);
    float p[10], g[10] = {0};
    for (int i = 0; i < 10; i++) p[i] = 2.0f;
    assert_int_equal(dga_adamw_step(opt, p, g, 0.1f), DGA_OK);
    for (int i = 0; i < 10; i++) {
        float want = (i >= 2 && i < 8) ? 2.0f * (1.0f - 0.05f) : 2.0f;
        assert_true(fabsf(p[i] - want) < 1e-7f);
    }
    dga_adamw_free(opt);
    /* no ranges: nothing decays */
    assert_int_equal(dga_adamw_create(10, &c, NULL, 0, &opt), DGA_OK);
    assert_int_equal(dga_adamw_step(opt, p, g, 0.1f), DGA_OK);
    assert_true(p[0] == 2.0f && p[5] == 1.9f);
    dga_adamw_free(opt);
    /* bad ranges and configs */
    const size_t bad[1][2] = {{3, 11}};
    assert_int_equal(dga_adamw_create(10, &c, bad, 1, &opt), DGA_ERR_INVALID);
    assert_null(opt);
    assert_non_null(strstr(dga_last_error(), "[3, 11)"));
    const size_t rev[1][2] = {{5, 4}};
    assert_int_equal(dga_adamw_create(10, &c, rev, 1, &opt), DGA_ERR_INVALID);
    c.beta2 = 1.0f;
    assert_int_equal(dga_adamw_create(10, &c, NULL, 0, &opt), DGA_ERR_INVALID);
    assert_non_null(strstr(dga_last_error(), "beta2"));
}

static void test_nonfinite(void **state)
{
    (void)state;
    dga_adamw *opt = NULL;
    const size_t all[1][2] = {{0, 5}};
    assert_int_equal(dga_adamw_create(5, NULL, all, 1, &opt), DGA_OK);
    float p[5] = {1, 2, 3, 4, 5}, g[5] = {0.1f, 0.2f, 0.3f, 0.4f, 0.5f};
    assert_int_equal(dga_adamw_step(opt, p, g, 0.01f), DGA_OK);
    float p1[5], m1[5], v1[5];
    memcpy(p1, p, sizeof p);
    memcpy(m1, dga_adamw_m(opt), sizeof m1);
    memcpy(v1, dga_adamw_v(opt), sizeof v1);
    const float bad[2] = {NAN, INFINITY};
    for (int k = 0; k < 2; k++) {
        g[3] = bad[k];
        assert_int_equal(dga_adamw_step(opt, p, g, 0.01f), DGA_ERR_INVALID);
        assert_non_null(strstr(dga_last_error(), "element 3"));
        assert_memory_equal(p, p1, sizeof p);
        assert_memory_equal(dga_adamw_m(opt), m1, sizeof m1);
        assert_memory_equal(dga_adamw_v(opt), v1, sizeof v1);
        assert_int_equal(dga_adamw_steps(opt), 1);
    }
    g[3] = 0.4f;
    assert_int_equal(dga_adamw_step(opt, p, g, NAN), DGA_ERR_INVALID);
    assert_int_equal(dga_adamw_step(opt, p, g, 0.01f), DGA_OK);
    assert_int_equal(dga_adamw_steps(opt), 2);
    dga_adamw_free(opt);
}

static void test_clip(void **state)
{
    (void)state;
    float g[4] = {3, 0, -4, 0};
    assert_true(fabs(dga_vec_norm(g, 4) - 5.0) < 1e-12);
    /* below the limit: untouched */
    assert_true(fabs(dga_grad_clip(g, 4, 10.0) - 5.0) < 1e-12);
    assert_true(g[0] == 3.0f && g[2] == -4.0f);
    /* disabled */
    assert_true(fabs(dga_grad_clip(g, 4, 0.0) - 5.0) < 1e-12);
    assert_true(g[0] == 3.0f);
    /* above: scaled by max_norm / (norm + 1e-6) as clip_grad_norm_ does */
    double n = dga_grad_clip(g, 4, 1.0);
    assert_true(fabs(n - 5.0) < 1e-12);
    assert_true(fabsf(g[0] - (float)(3.0 / (5.0 + 1e-6))) < 1e-7f);
    assert_true(fabsf(g[2] - (float)(-4.0 / (5.0 + 1e-6))) < 1e-7f);
    assert_true(fabs(dga_vec_norm(g, 4) - 1.0) < 1e-6);
    /* a long vector: the double accumulation is exact enough */
    static float big[100003];
    for (size_t i = 0; i < 100003; i++) big[i] = 0.5f;
    assert_true(fabs(dga_vec_norm(big, 100003) - 0.5 * sqrt(100003.0)) < 1e-9);
    /* a non-finite norm is reported and nothing is scaled */
    big[7] = INFINITY;
    assert_true(isinf(dga_grad_clip(big, 100003, 1.0)));
    assert_true(big[0] == 0.5f);
    assert_true(dga_vec_norm(big, 0) == 0.0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hand_steps),
        cmocka_unit_test(test_long_vector),
        cmocka_unit_test(test_simd_matches_scalar),
        cmocka_unit_test(test_ranges),
        cmocka_unit_test(test_nonfinite),
        cmocka_unit_test(test_clip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
