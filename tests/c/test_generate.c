/* Restricted sampling (core/generate.c): with top_k and top_p the drawn tokens stay inside
 * the restricted set and follow softmax(logits / T) renormalised over it; the defaults draw
 * exactly as plain temperature sampling; bad values are refused. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gpt.h"
#include "rng.h"
#include "status.h"

static const dga_gpt_config TINY = {.n_layer = 2, .n_head = 2, .n_embd = 16, .n_ctx = 8,
                                    .vocab_size = 32};

static dga_model *make_peaked(void)
{
    dga_model *m = NULL;
    assert_int_equal(dga_gpt_create(&TINY, 2, &m), DGA_OK);
    dga_rng r;
    dga_rng_seed(&r, 23);
    dga_model_init_weights(m, &r);
    for (size_t i = 0; i < dga_model_num_params(m); i++)   /* larger weights: a non-flat model */
        dga_model_params(m)[i] *= 6.0f;
    return m;
}

/* softmax(logits / T) in p[], and the ids sorted most probable first (lower id on ties). */
static void ranked_probs(const float *lg, int V, double T, double *p, int *order)
{
    double mx = lg[0], z = 0;
    for (int v = 0; v < V; v++) mx = fmax(mx, lg[v]);
    for (int v = 0; v < V; v++) z += p[v] = exp((lg[v] - mx) / T);
    for (int v = 0; v < V; v++) p[v] /= z;
    for (int v = 0; v < V; v++) order[v] = v;
    for (int i = 1; i < V; i++)   /* insertion sort: V is 32 */
        for (int j = i; j > 0 && (p[order[j]] > p[order[j - 1]] ||
                                  (p[order[j]] == p[order[j - 1]] && order[j] < order[j - 1])); j--) {
            int t = order[j];
            order[j] = order[j - 1];
            order[j - 1] = t;
        }
}

/* Draws N first tokens with opts and checks them against q (the expected distribution):
 * zero-probability tokens never, the others within 5 binomial standard deviations. */
static void check_frequencies(dga_model *m, const int32_t *prompt, const dga_sample_opts *o,
                              const double *q, int V)
{
    int counts[64] = {0}, N = 4000;
    dga_rng r;
    dga_rng_seed(&r, 7);
    for (int s = 0; s < N; s++) {
        int32_t one;
        assert_int_equal(dga_model_generate_sampled(m, prompt, 3, 1, o, &r, &one), DGA_OK);
        counts[one]++;
    }
    for (int v = 0; v < V; v++) {
        if (q[v] == 0) {
            if (counts[v]) fail_msg("token %d outside the restricted set drawn %d times", v, counts[v]);
            continue;
        }
        double sd = sqrt(N * q[v] * (1 - q[v])) + 1;
        if (fabs(counts[v] - N * q[v]) > 5 * sd)
            fail_msg("token %d: %d draws, expected %.1f", v, counts[v], N * q[v]);
    }
}

static void test_top_k_top_p(void **state)
{
    (void)state;
    dga_model *m = make_peaked();
    const int V = TINY.vocab_size;
    const double T = 2.0;   /* a flatter distribution: the restriction matters */
    int32_t prompt[3] = {1, 5, 2};
    float lg[64];
    double p[64], q[64];
    int order[64];
    assert_int_equal(dga_model_next_logits(m, prompt, 3, lg), DGA_OK);
    ranked_probs(lg, V, T, p, order);

    /* top_k = 5: the five most likely tokens, renormalised */
    dga_sample_opts ok = {.temperature = T, .top_k = 5, .top_p = 1.0};
    double z = 0;
    memset(q, 0, sizeof q);
    for (int i = 0; i < 5; i++) z += p[order[i]];
    for (int i = 0; i < 5; i++) q[order[i]] = p[order[i]] / z;
    check_frequencies(m, prompt, &ok, q, V);

    /* top_p = 0.5: the smallest prefix of the ranking whose mass reaches one half */
    dga_sample_opts op = {.temperature = T, .top_k = 0, .top_p = 0.5};
    double acc = 0;
    int n = 0;
    while (acc < 0.5) acc += p[order[n++]];
    assert_true(n >= 2 && n < V);   /* the case is not degenerate */
    memset(q, 0, sizeof q);
    for (int i = 0; i < n; i++) q[order[i]] = p[order[i]] / acc;
    check_frequencies(m, prompt, &op, q, V);

    /* both: top_p applies to the top_k tokens renormalised */
    dga_sample_opts kp = {.temperature = T, .top_k = 8, .top_p = 0.6};
    z = 0;
    for (int i = 0; i < 8; i++) z += p[order[i]];
    acc = 0;
    n = 0;
    while (n < 8 && acc < 0.6 * z) acc += p[order[n++]];
    memset(q, 0, sizeof q);
    for (int i = 0; i < n; i++) q[order[i]] = p[order[i]] / acc;
    check_frequencies(m, prompt, &kp, q, V);

    /* top_k = 1 is greedy */
    dga_sample_opts k1 = {.temperature = T, .top_k = 1, .top_p = 1.0};
    int32_t g[6], s[6];
    dga_rng r;
    dga_rng_seed(&r, 3);
    assert_int_equal(dga_model_generate(m, prompt, 3, 6, 0.0, NULL, g), DGA_OK);
    assert_int_equal(dga_model_generate_sampled(m, prompt, 3, 6, &k1, &r, s), DGA_OK);
    assert_memory_equal(g, s, sizeof g);

    /* the defaults draw exactly what plain temperature sampling draws */
    dga_sample_opts plain = {.temperature = T, .top_k = 0, .top_p = 1.0};
    dga_rng ra, rb;
    dga_rng_seed(&ra, 11);
    dga_rng_seed(&rb, 11);
    assert_int_equal(dga_model_generate(m, prompt, 3, 6, T, &ra, g), DGA_OK);
    assert_int_equal(dga_model_generate_sampled(m, prompt, 3, 6, &plain, &rb, s), DGA_OK);
    assert_memory_equal(g, s, sizeof g);

    /* bad values */
    dga_sample_opts bad = {.temperature = T, .top_k = -1, .top_p = 1.0};
    assert_int_equal(dga_model_generate_sampled(m, prompt, 3, 1, &bad, &r, g), DGA_ERR_INVALID);
    assert_non_null(strstr(dga_last_error(), "top_k"));
    bad = (dga_sample_opts){.temperature = T, .top_k = 0, .top_p = 0.0};
    assert_int_equal(dga_model_generate_sampled(m, prompt, 3, 1, &bad, &r, g), DGA_ERR_INVALID);
    assert_non_null(strstr(dga_last_error(), "top_p"));
    bad.top_p = 1.5;
    assert_int_equal(dga_model_generate_sampled(m, prompt, 3, 1, &bad, &r, g), DGA_ERR_INVALID);
    assert_int_equal(dga_model_generate_sampled(m, prompt, 3, 1, NULL, &r, g), DGA_ERR_INVALID);
    dga_model_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_top_k_top_p)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
