/* Precisions of the model's matrix products (gemm_dnnl.h, dga_gpt_set_precision).
 *
 * bf16 tolerance. bf16 keeps p = 8 significant bits, so rounding a value x gives
 * x (1 + d) with |d| <= u = 2^-8. A product term a_ik b_kj of two rounded inputs is
 * a_ik b_kj (1 + d1)(1 + d2), off by at most (2u + u^2) |a_ik| |b_kj|; fp32 accumulation of K
 * terms adds at most K 2^-24 of the same sum (gamma_K, first order). Hence, elementwise,
 * |C_bf16 - C| <= e(K) (|A| |B|) with e(K) = 2u + u^2 + K 2^-24, and in the Frobenius norm
 * ||C_bf16 - C|| <= e(K) || |A| |B| ||. test_bf16_products asserts that bound. Through a
 * whole model the errors of the products on a path add up to first order: the forward runs
 * 4L + 1 rounded products one after the other, the backward 4L + 1 more to reach the
 * deepest weight gradient, plus that gradient's own product, so the loss and the gradient
 * are asserted within (8L + 3) 2u of fp32 relative to their norm (the products' condition,
 * || |A||B| || / ||A B||, is about 1 at initialisation). A wrong transpose, a stale weight copy
 * or a missing conversion moves them by O(1); and they must differ from fp32 by more than fp32
 * rounding, or the inputs were not rounded at all.
 *
 * Where oneDNN has no native bf16 matmul (AVX2: it refuses with "unimplemented"), the bf16
 * numerics are checked through the emulation (dga_dnnl_set_emulate_bf16: the same rounding,
 * fp32 products), the fallback of a model asking for bf16 is checked, and the tests say they
 * skipped the native (speed) path. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gemm_dnnl.h"
#include "gpt.h"
#include "pool.h"
#include "rng.h"

#define U_BF16 (1.0 / 256.0)

static void fill(float *x, size_t n, dga_rng *r, double scale)
{
    for (size_t i = 0; i < n; i++) x[i] = (float)(scale * dga_rng_normal(r));
}

static uint32_t bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static void test_names(void **state)
{
    (void)state;
    for (int p = 0; p < 3; p++) {
        dga_precision q = DGA_PREC_BF16;
        assert_int_equal(dga_precision_parse(dga_precision_name((dga_precision)p), &q), DGA_OK);
        assert_int_equal(q, p);
    }
    dga_precision q;
    assert_int_equal(dga_precision_parse("fp16", &q), DGA_ERR_INVALID);
    assert_non_null(strstr(dga_last_error(), "fp16"));
    assert_non_null(strstr(dga_last_error(), "fp32-onednn"));
}

/* Round to nearest even, at the halfway points and around the special values. */
static void test_bf16_rounding(void **state)
{
    (void)state;
    static const struct { uint32_t in; uint16_t out; } cases[] = {
        {0x3f800000u, 0x3f80},   /* 1 */
        {0x3f808000u, 0x3f80},   /* 1 + 2^-8, halfway: to the even 0x3f80 */
        {0x3f818000u, 0x3f82},   /* halfway above an odd one: up to the even 0x3f82 */
        {0x3f808001u, 0x3f81},   /* just above halfway: up */
        {0x3f807fffu, 0x3f80},   /* just below: down */
        {0xbf808001u, 0xbf81},   /* the sign is kept */
        {0x7f800000u, 0x7f80},   /* inf */
        {0x7f7fffffu, 0x7f80},   /* the largest float rounds to inf, as it should */
        {0x00000001u, 0x0000},   /* the smallest subnormal rounds to zero */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        float f = from_bits(cases[i].in);
        uint16_t b;
        dga_bf16_from_f32(&b, &f, 1);
        assert_int_equal(b, cases[i].out);
    }
    float nan = from_bits(0x7f800001u);   /* a NaN whose carry would make it inf */
    uint16_t b;
    dga_bf16_from_f32(&b, &nan, 1);
    assert_true(isnan(dga_bf16_to_f32(b)));
}

/* The products of the model's kernels: every transpose, both with and without accumulation,
 * at shapes not multiples of anything, on 1 and 2 threads. */
typedef struct { int ta, tb, acc, M, N, K; } shape;
static const shape shapes[] = {
    {0, 0, 0, 37, 53, 29}, {0, 1, 0, 64, 33, 71}, {1, 0, 1, 45, 19, 130},
    {1, 0, 0, 3, 70, 9},   {0, 0, 1, 130, 7, 40}, {0, 1, 1, 1, 90, 64},
};

/* ||got - want||_F and || |A| |B| ||_F (the bound's scale), want = op(A) op(B) (+ C0). */
static void compare(const shape *s, const float *A, const float *B, const float *C0,
                    const float *got, double *err, double *scale)
{
    int lda = s->ta ? s->M : s->K, ldb = s->tb ? s->K : s->N;
    double e = 0, sc = 0;
    for (int i = 0; i < s->M; i++)
        for (int j = 0; j < s->N; j++) {
            double w = s->acc ? C0[(size_t)i * s->N + j] : 0, a = 0;
            for (int k = 0; k < s->K; k++) {
                double x = s->ta ? A[(size_t)k * lda + i] : A[(size_t)i * lda + k];
                double y = s->tb ? B[(size_t)j * ldb + k] : B[(size_t)k * ldb + j];
                w += x * y;
                a += fabs(x * y);
            }
            double d = got[(size_t)i * s->N + j] - w;
            e += d * d;
            sc += a * a;
        }
    *err = sqrt(e);
    *scale = sqrt(sc);
}

/* Runs every shape through a context of precision p; returns the largest err / bound. */
static double run_shapes(dga_precision p, double (*bound)(int K), double *min_rel)
{
    dga_rng r;
    dga_rng_seed(&r, 3);
    double worst = 0;
    *min_rel = 1e30;
    for (int threads = 1; threads <= 2; threads++) {
        assert_int_equal(dga_pool_set_threads(threads), DGA_OK);
        dga_dnnl *g = NULL;
        assert_int_equal(dga_dnnl_create(p, &g), DGA_OK);
        for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
            const shape *s = &shapes[i];
            size_t na = (size_t)s->M * s->K, nb = (size_t)s->K * s->N, nc = (size_t)s->M * s->N;
            float *A = malloc(na * sizeof *A), *B = malloc(nb * sizeof *B);
            float *C0 = malloc(nc * sizeof *C0), *C = malloc(nc * sizeof *C);
            fill(A, na, &r, 1.0);
            fill(B, nb, &r, 1.0);
            fill(C0, nc, &r, 1.0);
            memcpy(C, C0, nc * sizeof *C);
            int lda = s->ta ? s->M : s->K, ldb = s->tb ? s->K : s->N;
            /* twice: the second run reuses the cached primitive */
            for (int rep = 0; rep < 2; rep++) {
                if (rep) memcpy(C, C0, nc * sizeof *C);
                assert_int_equal(dga_dnnl_gemm(g, s->ta, s->tb, s->M, s->N, s->K, A, lda, B,
                                               ldb, C, s->N, s->acc), DGA_OK);
            }
            double err, scale;
            compare(s, A, B, C0, C, &err, &scale);
            double ratio = err / (bound(s->K) * scale);
            if (ratio > worst) worst = ratio;
            if (err / scale < *min_rel) *min_rel = err / scale;
            free(A), free(B), free(C0), free(C);
        }
        assert_int_equal(dga_dnnl_take_status(g), DGA_OK);
        dga_dnnl_free(g);
    }
    assert_int_equal(dga_pool_set_threads(1), DGA_OK);
    return worst;
}

static double fp32_bound(int K) { return 2.0 * K * ldexp(1.0, -24); }
static double bf16_bound(int K) { return 2 * U_BF16 + U_BF16 * U_BF16 + K * ldexp(1.0, -24); }

static void test_fp32_onednn_products(void **state)
{
    (void)state;
    double min_rel, worst = run_shapes(DGA_PREC_FP32_ONEDNN, fp32_bound, &min_rel);
    print_message("fp32-onednn: worst error / (2 K 2^-24 || |A||B| ||) = %.3g\n", worst);
    assert_true(worst <= 1.0);
}

/* Native bf16 where oneDNN has it, the emulated rounding elsewhere. */
static int bf16_setup(void)
{
    if (dga_dnnl_bf16_native()) return 0;
    print_message("bf16: oneDNN has no native bf16 matmul here (ISA %s): numerics checked "
                  "through the emulated rounding; the native (speed) path is skipped\n",
                  dga_dnnl_isa_name());
    dga_dnnl_set_emulate_bf16(1);
    return 1;
}

static void test_bf16_products(void **state)
{
    (void)state;
    int emulated = bf16_setup();
    double min_rel, worst = run_shapes(DGA_PREC_BF16, bf16_bound, &min_rel);
    dga_dnnl_set_emulate_bf16(0);
    print_message("bf16%s: worst error / bound = %.3g, smallest relative error %.3g\n",
                  emulated ? " (emulated)" : "", worst, min_rel);
    assert_true(worst <= 1.0);
    /* the inputs were rounded: far above fp32's error, near bf16's */
    assert_true(min_rel > 1e-4);
}

/* Operands inside the mirrored range are read from their copy as of the last refresh. */
static void test_mirror(void **state)
{
    (void)state;
    bf16_setup();
    dga_dnnl *g = NULL;
    assert_int_equal(dga_dnnl_create(DGA_PREC_BF16, &g), DGA_OK);
    dga_dnnl_set_emulate_bf16(0);
    float params[4 + 16], A[4 * 4], C[16], C2[16];
    dga_rng r;
    dga_rng_seed(&r, 9);
    fill(params, 20, &r, 1.0);
    fill(A, 16, &r, 1.0);
    float *W = params + 4;   /* a 4 x 4 matrix inside the range */
    assert_int_equal(dga_dnnl_mirror(g, params, 20), DGA_OK);
    dga_dnnl_mirror_refresh(g, 4, 16);
    assert_int_equal(dga_dnnl_gemm(g, 0, 0, 4, 4, 4, A, 4, W, 4, C, 4, 0), DGA_OK);
    for (int i = 0; i < 16; i++) W[i] *= 3.0f;   /* not refreshed: the product is unchanged */
    assert_int_equal(dga_dnnl_gemm(g, 0, 0, 4, 4, 4, A, 4, W, 4, C2, 4, 0), DGA_OK);
    assert_memory_equal(C, C2, sizeof C);
    dga_dnnl_mirror_refresh(g, 4, 16);
    assert_int_equal(dga_dnnl_gemm(g, 0, 0, 4, 4, 4, A, 4, W, 4, C2, 4, 0), DGA_OK);
    /* 3 W needs two more bits than W: it is rounded again, so 3 C up to bf16's rounding */
    double d = 0, s = 0;
    for (int i = 0; i < 16; i++) {
        d += (C2[i] - 3.0 * C[i]) * (C2[i] - 3.0 * C[i]);
        s += 9.0 * C[i] * C[i];
    }
    assert_true(sqrt(d) <= 4 * U_BF16 * sqrt(s) * 4);   /* K = 4 terms */
    dga_dnnl_free(g);
}

/* --------------------------------------------------------------------- the model */

static const dga_gpt_config CFG = {.n_layer = 2, .n_head = 2, .n_embd = 32, .n_ctx = 16,
                                   .vocab_size = 64};
enum { B = 3 };

/* Loss and gradient of one batch (a fixed model and batch for every call). */
static float model_grad(dga_precision p, float *grad, size_t *n, dga_precision *ran)
{
    dga_model *m = NULL;
    assert_int_equal(dga_gpt_create(&CFG, B, &m), DGA_OK);
    dga_rng r;
    dga_rng_seed(&r, 5);
    dga_model_init_weights(m, &r);
    if (p != DGA_PREC_FP32 || ran) {
        assert_int_equal(dga_gpt_set_precision(m, p, NULL), DGA_OK);
        if (ran) *ran = dga_gpt_precision(m);
    }
    int32_t in[B * 16], tg[B * 16];
    for (int i = 0; i < B * 16; i++) {
        in[i] = (int32_t)dga_rng_below(&r, 64);
        tg[i] = i % 7 == 3 ? DGA_IGNORE : (int32_t)dga_rng_below(&r, 64);
    }
    float loss;
    dga_model_zero_grad(m);
    assert_int_equal(dga_model_forward(m, in, tg, B, 16, &loss), DGA_OK);
    assert_int_equal(dga_model_backward(m), DGA_OK);
    *n = dga_model_num_params(m);
    if (grad) memcpy(grad, dga_model_grads(m), *n * sizeof *grad);
    dga_model_free(m);
    return loss;
}

static double rel_diff(const float *a, const float *b, size_t n)
{
    double d = 0, s = 0;
    for (size_t i = 0; i < n; i++) {
        d += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        s += (double)b[i] * b[i];
    }
    return sqrt(d / s);
}

/* fp32 set explicitly, or after another precision, is the default's bits. */
static void test_model_fp32_bits(void **state)
{
    (void)state;
    size_t n;
    model_grad(DGA_PREC_FP32, NULL, &n, NULL);
    float *g0 = malloc(n * sizeof *g0), *g1 = malloc(n * sizeof *g1);
    dga_precision ran;
    float l0 = model_grad(DGA_PREC_FP32, g0, &n, NULL);
    float l1 = model_grad(DGA_PREC_FP32, g1, &n, &ran);
    assert_int_equal(ran, DGA_PREC_FP32);
    assert_int_equal(bits(l0), bits(l1));
    assert_memory_equal(g0, g1, n * sizeof *g0);

    dga_model *m = NULL;
    assert_int_equal(dga_gpt_create(&CFG, B, &m), DGA_OK);
    assert_int_equal(dga_gpt_precision(m), DGA_PREC_FP32);
    assert_int_equal(dga_gpt_set_precision(m, DGA_PREC_FP32_ONEDNN, NULL), DGA_OK);
    assert_int_equal(dga_gpt_precision(m), DGA_PREC_FP32_ONEDNN);
    assert_int_equal(dga_gpt_set_precision(m, DGA_PREC_FP32, NULL), DGA_OK);
    assert_int_equal(dga_gpt_precision(m), DGA_PREC_FP32);
    dga_model_free(m);
    free(g0), free(g1);
}

static void test_model_fp32_onednn(void **state)
{
    (void)state;
    size_t n;
    model_grad(DGA_PREC_FP32, NULL, &n, NULL);
    float *g0 = malloc(n * sizeof *g0), *g1 = malloc(n * sizeof *g1);
    float l0 = model_grad(DGA_PREC_FP32, g0, &n, NULL);
    float l1 = model_grad(DGA_PREC_FP32_ONEDNN, g1, &n, NULL);
    double rg = rel_diff(g1, g0, n);
    print_message("fp32-onednn vs fp32: loss %.9g vs %.9g, gradient relative difference %.3g\n",
                  l1, l0, rg);
    assert_true(fabs(l1 - l0) <= 1e-5 * fabs(l0));
    assert_true(rg <= 1e-5);
    free(g0), free(g1);
}

static void test_model_bf16(void **state)
{
    (void)state;
    int emulated = bf16_setup();
    size_t n;
    model_grad(DGA_PREC_FP32, NULL, &n, NULL);
    float *g0 = malloc(n * sizeof *g0), *g1 = malloc(n * sizeof *g1);
    float l0 = model_grad(DGA_PREC_FP32, g0, &n, NULL);
    dga_precision ran;
    float l1 = model_grad(DGA_PREC_BF16, g1, &n, &ran);
    dga_dnnl_set_emulate_bf16(0);
    assert_int_equal(ran, DGA_PREC_BF16);
    double tol = (8.0 * CFG.n_layer + 3) * 2 * U_BF16, rg = rel_diff(g1, g0, n);
    double rl = fabs((double)l1 - l0) / fabs(l0);
    print_message("bf16%s vs fp32: loss %.7g vs %.7g (relative %.3g), gradient relative "
                  "difference %.3g; tolerance %.3g\n", emulated ? " (emulated)" : "", l1, l0,
                  rl, rg, tol);
    assert_true(rl <= tol);
    assert_true(rg <= tol);
    assert_true(rg > 1e-5);   /* rounded, not fp32 in disguise */
    free(g0), free(g1);
}

/* bf16 where oneDNN has no bf16 matmul: fp32 (OpenBLAS, the default's bits) and one line. */
static void test_bf16_fallback(void **state)
{
    (void)state;
    dga_model *m = NULL;
    assert_int_equal(dga_gpt_create(&CFG, B, &m), DGA_OK);
    const char *note = NULL;
    assert_int_equal(dga_gpt_set_precision(m, DGA_PREC_BF16, &note), DGA_OK);
    if (dga_dnnl_bf16_native()) {
        print_message("bf16 is native here (ISA %s): no fallback to check\n",
                      dga_dnnl_isa_name());
        assert_null(note);
        assert_int_equal(dga_gpt_precision(m), DGA_PREC_BF16);
    } else {
        assert_non_null(note);
        print_message("fallback: %s\n", note);
        assert_non_null(strstr(note, dga_dnnl_isa_name()));
        assert_non_null(strstr(note, "running fp32"));
        assert_null(strchr(note, '\n'));
        assert_int_equal(dga_gpt_precision(m), DGA_PREC_FP32);
        /* and so the default's bits */
        size_t n;
        model_grad(DGA_PREC_FP32, NULL, &n, NULL);
        float *g0 = malloc(n * sizeof *g0), *g1 = malloc(n * sizeof *g1);
        dga_precision ran;
        float l0 = model_grad(DGA_PREC_FP32, g0, &n, NULL);
        float l1 = model_grad(DGA_PREC_BF16, g1, &n, &ran);
        assert_int_equal(ran, DGA_PREC_FP32);
        assert_int_equal(bits(l0), bits(l1));
        assert_memory_equal(g0, g1, n * sizeof *g0);
        free(g0), free(g1);
    }
    dga_model_free(m);
}

/* A precision set between a forward and its backward: the backward reads the new context's
 * weight copy, which must already hold the weights (it was left unfilled before). */
static void test_set_between(void **state)
{
    (void)state;
    int emulated = bf16_setup();
    size_t n;
    model_grad(DGA_PREC_FP32, NULL, &n, NULL);
    float *g0 = malloc(n * sizeof *g0);
    model_grad(DGA_PREC_FP32, g0, &n, NULL);
    dga_model *m = NULL;
    assert_int_equal(dga_gpt_create(&CFG, B, &m), DGA_OK);
    dga_rng r;
    dga_rng_seed(&r, 5);
    dga_model_init_weights(m, &r);
    int32_t in[B * 16], tg[B * 16];
    for (int i = 0; i < B * 16; i++) {   /* model_grad's batch */
        in[i] = (int32_t)dga_rng_below(&r, 64);
        tg[i] = i % 7 == 3 ? DGA_IGNORE : (int32_t)dga_rng_below(&r, 64);
    }
    float loss;
    dga_model_zero_grad(m);
    assert_int_equal(dga_model_forward(m, in, tg, B, 16, &loss), DGA_OK);
    assert_int_equal(dga_gpt_set_precision(m, DGA_PREC_BF16, NULL), DGA_OK);
    dga_dnnl_set_emulate_bf16(0);
    assert_int_equal(dga_model_backward(m), DGA_OK);
    double rg = rel_diff(dga_model_grads(m), g0, n);
    print_message("bf16%s backward after an fp32 forward: gradient relative difference %.3g\n",
                  emulated ? " (emulated)" : "", rg);
    assert_true(rg <= (8.0 * CFG.n_layer + 3) * 2 * U_BF16);
    dga_model_free(m);
    free(g0);
}

/* eval and next_logits use the precision too; a model freed with a context leaks nothing
 * (the ASan build checks). */
static void test_model_eval(void **state)
{
    (void)state;
    dga_model *a = NULL, *b = NULL;
    assert_int_equal(dga_gpt_create(&CFG, B, &a), DGA_OK);
    assert_int_equal(dga_gpt_create(&CFG, B, &b), DGA_OK);
    dga_rng r;
    dga_rng_seed(&r, 5);
    dga_model_init_weights(a, &r);
    memcpy(dga_model_params(b), dga_model_params(a), dga_model_num_params(a) * sizeof(float));
    assert_int_equal(dga_gpt_set_precision(b, DGA_PREC_FP32_ONEDNN, NULL), DGA_OK);
    int32_t tok[16];
    for (int i = 0; i < 16; i++) tok[i] = (int32_t)dga_rng_below(&r, 64);
    float la[64], lb[64];
    assert_int_equal(dga_model_next_logits(a, tok, 16, la), DGA_OK);
    assert_int_equal(dga_model_next_logits(b, tok, 16, lb), DGA_OK);
    for (int i = 0; i < 64; i++) assert_true(fabsf(la[i] - lb[i]) <= 1e-4f);
    dga_model_free(a);
    dga_model_free(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_bf16_rounding),
        cmocka_unit_test(test_fp32_onednn_products),
        cmocka_unit_test(test_bf16_products),
        cmocka_unit_test(test_mirror),
        cmocka_unit_test(test_model_fp32_bits),
        cmocka_unit_test(test_model_fp32_onednn),
        cmocka_unit_test(test_model_bf16),
        cmocka_unit_test(test_bf16_fallback),
        cmocka_unit_test(test_set_between),
        cmocka_unit_test(test_model_eval),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
