/* Tensors: allocation, views and reference counts, elementwise math, reductions, errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <string.h>

#include "tensor.h"

static dga_tensor *vec(const float *x, int64_t n)
{
    dga_tensor *t = NULL;
    assert_int_equal(dga_tensor_new(DGA_F32, 1, &n, &t), DGA_OK);
    memcpy(t->data, x, (size_t)n * sizeof *x);
    return t;
}

static void test_new_and_describe(void **state)
{
    (void)state;
    int64_t shape[3] = {2, 3, 4};
    dga_tensor *t = NULL;
    assert_int_equal(dga_tensor_new(DGA_I32, 3, shape, &t), DGA_OK);
    assert_int_equal(t->numel, 24);
    for (int i = 0; i < 24; i++) assert_int_equal(dga_tensor_i32(t)[i], 0);
    char buf[64];
    assert_string_equal(dga_tensor_describe(t, buf, sizeof buf), "int32[2x3x4]");
    dga_tensor_release(t);

    int64_t bad[1] = {-1};
    assert_int_equal(dga_tensor_new(DGA_F32, 1, bad, &t), DGA_ERR_INVALID);
    assert_null(t);
    assert_non_null(strstr(dga_last_error(), "dimension 1 is -1"));
    assert_int_equal(dga_tensor_new(DGA_F32, 5, shape, &t), DGA_ERR_INVALID);
    assert_int_equal(dga_tensor_new(DGA_F32, 0, shape, &t), DGA_ERR_INVALID);
    int64_t zero[2] = {0, 5};
    assert_int_equal(dga_tensor_new(DGA_F32, 2, zero, &t), DGA_OK);
    assert_int_equal(t->numel, 0);
    dga_tensor_release(t);
    dga_tensor_release(NULL);
}

static void test_views_share_and_outlive(void **state)
{
    (void)state;
    const float x[6] = {1, 2, 3, 4, 5, 6};
    dga_tensor *t = vec(x, 6), *v = NULL, *vv = NULL;
    int64_t s2[2] = {2, 2};
    assert_int_equal(dga_tensor_view(t, 2, 2, s2, &v), DGA_OK);
    assert_ptr_equal(v->base, t);
    assert_int_equal(t->refcount, 2);
    dga_tensor_f32(v)[0] = 30;
    assert_true(dga_tensor_f32(t)[2] == 30);
    int64_t s1[1] = {2};
    assert_int_equal(dga_tensor_view(v, 1, 1, s1, &vv), DGA_OK);
    assert_ptr_equal(vv->base, t);    /* views of views point at the owner */
    assert_true(dga_tensor_f32(vv)[0] == 4);
    dga_tensor_release(t);            /* the views keep the data alive */
    dga_tensor_release(v);
    assert_true(dga_tensor_f32(vv)[1] == 5);
    int64_t s5[1] = {5};
    dga_tensor *bad = NULL;
    assert_int_equal(dga_tensor_view(vv, 0, 1, s5, &bad), DGA_ERR_INVALID);
    assert_non_null(strstr(dga_last_error(), "outside"));
    dga_tensor_release(vv);
}

static void test_clone_is_independent(void **state)
{
    (void)state;
    const float x[3] = {1, 2, 3};
    dga_tensor *t = vec(x, 3), *c = NULL;
    assert_int_equal(dga_tensor_clone(t, &c), DGA_OK);
    dga_tensor_f32(c)[0] = 9;
    assert_true(dga_tensor_f32(t)[0] == 1);
    dga_tensor_release(t);
    dga_tensor_release(c);
}

static void test_reductions(void **state)
{
    (void)state;
    const float x[5] = {3, -1, 7, 7, 2};
    dga_tensor *t = vec(x, 5);
    assert_true(dga_tensor_sum(t) == 18);
    assert_true(dga_tensor_min(t) == -1);
    assert_true(dga_tensor_max(t) == 7);
    assert_int_equal(dga_tensor_argmax(t), 2);   /* first of the ties */
    assert_true(fabs(dga_tensor_mean(t) - 3.6) < 1e-12);
    double var = (0.36 + 21.16 + 11.56 + 11.56 + 2.56) / 5;
    assert_true(fabs(dga_tensor_std(t) - sqrt(var)) < 1e-12);
    assert_true(fabs(dga_tensor_norm(t) - sqrt(9 + 1 + 49 + 49 + 4)) < 1e-12);
    dga_status st;
    assert_true(dga_tensor_dot(t, t, &st) == 112 && st == DGA_OK);
    dga_tensor *u = vec(x, 4);
    assert_true(isnan(dga_tensor_dot(t, u, &st)));
    assert_int_equal(st, DGA_ERR_INVALID);
    assert_non_null(strstr(dga_last_error(), "float32[5] vs float32[4]"));
    dga_tensor_release(u);
    dga_tensor_release(t);
}

/* Summing 2^24 + many ones in float would stall at 2^24; double accumulation does not. */
static void test_sum_accumulates_in_double(void **state)
{
    (void)state;
    int64_t n = 262144;
    dga_tensor *t = NULL;
    assert_int_equal(dga_tensor_new(DGA_F32, 1, &n, &t), DGA_OK);
    dga_tensor_f32(t)[0] = 16777216.0f;
    for (int64_t i = 1; i < n; i++) dga_tensor_f32(t)[i] = 1.0f;
    assert_true(dga_tensor_sum(t) == 16777216.0 + (double)(n - 1));
    dga_tensor_release(t);
}

static void test_elementwise(void **state)
{
    (void)state;
    const float a[3] = {1, 2, 4}, b[3] = {2, 2, 8};
    dga_tensor *x = vec(a, 3), *y = vec(b, 3);
    assert_int_equal(dga_tensor_binop_(x, y, DGA_OP_DIV), DGA_OK);
    assert_true(dga_tensor_f32(x)[0] == 0.5f && dga_tensor_f32(x)[2] == 0.5f);
    assert_int_equal(dga_tensor_scalar_op_(x, 1, DGA_OP_SUB, 1), DGA_OK);   /* 1 - x */
    assert_true(dga_tensor_f32(x)[1] == 0.0f);
    assert_int_equal(dga_tensor_add_(x, y), DGA_OK);
    assert_true(dga_tensor_f32(x)[2] == 8.5f);
    assert_int_equal(dga_tensor_mul_(x, y), DGA_OK);
    assert_true(dga_tensor_f32(x)[2] == 68.0f);
    dga_tensor_affine_(x, 2, 1);
    assert_true(dga_tensor_f32(x)[2] == 137.0f);
    dga_tensor_exp_(y);
    assert_true(fabsf(dga_tensor_f32(y)[0] - expf(2)) < 1e-5f);
    assert_int_equal(dga_tensor_log_(y), DGA_OK);
    assert_true(fabsf(dga_tensor_f32(y)[2] - 8) < 1e-5f);
    dga_tensor_f32(y)[1] = -1;
    float keep = dga_tensor_f32(y)[0];
    assert_int_equal(dga_tensor_log_(y), DGA_ERR_INVALID);
    assert_non_null(strstr(dga_last_error(), "entry 2 is -1"));
    assert_true(dga_tensor_f32(y)[0] == keep);   /* untouched on error */
    dga_tensor_release(x);
    dga_tensor_release(y);
}

static void test_int32_rules(void **state)
{
    (void)state;
    int64_t n = 2;
    dga_tensor *a = NULL, *b = NULL, *f = NULL;
    assert_int_equal(dga_tensor_new(DGA_I32, 1, &n, &a), DGA_OK);
    assert_int_equal(dga_tensor_new(DGA_I32, 1, &n, &b), DGA_OK);
    assert_int_equal(dga_tensor_new(DGA_F32, 1, &n, &f), DGA_OK);
    dga_tensor_i32(a)[0] = INT32_MAX;
    dga_tensor_i32(b)[0] = 1;
    assert_int_equal(dga_tensor_add_(a, b), DGA_ERR_INVALID);
    assert_non_null(strstr(dga_last_error(), "overflow"));
    assert_int_equal(dga_tensor_i32(a)[0], INT32_MAX);
    assert_int_equal(dga_tensor_binop_(a, b, DGA_OP_DIV), DGA_ERR_INVALID);
    assert_int_equal(dga_tensor_add_(a, f), DGA_ERR_INVALID);
    assert_non_null(strstr(dga_last_error(), "dtype mismatch"));
    assert_int_equal(dga_tensor_scalar_op_(b, 0.5, DGA_OP_ADD, 0), DGA_ERR_INVALID);
    assert_int_equal(dga_tensor_scalar_op_(b, 3, DGA_OP_MUL, 0), DGA_OK);
    assert_int_equal(dga_tensor_i32(b)[0], 3);
    assert_int_equal(dga_tensor_log_(b), DGA_ERR_INVALID);
    assert_int_equal(dga_tensor_normalize_(b), DGA_ERR_INVALID);
    assert_int_equal(dga_tensor_fill_(b, 2.5), DGA_ERR_INVALID);
    dga_tensor_f32(f)[0] = 1.5f;
    assert_int_equal(dga_tensor_copy_(b, f), DGA_ERR_INVALID);
    dga_tensor_f32(f)[0] = -4;
    assert_int_equal(dga_tensor_copy_(b, f), DGA_OK);
    assert_int_equal(dga_tensor_i32(b)[0], -4);
    assert_true(dga_tensor_sum(a) == (double)INT32_MAX);
    dga_tensor_release(a);
    dga_tensor_release(b);
    dga_tensor_release(f);
}

static void test_normalize_and_distribution(void **state)
{
    (void)state;
    const float w[4] = {1, 3, 0, 4};
    dga_tensor *t = vec(w, 4);
    assert_int_equal(dga_tensor_check_distribution(t, 1e-4, "w"), DGA_ERR_INVALID);
    assert_non_null(strstr(dga_last_error(), "w: not a probability vector"));
    assert_int_equal(dga_tensor_normalize_(t), DGA_OK);
    assert_true(fabsf(dga_tensor_f32(t)[1] - 0.375f) < 1e-7f);
    assert_int_equal(dga_tensor_check_distribution(t, 1e-4, "w"), DGA_OK);
    dga_tensor_f32(t)[0] += 2e-4f;
    assert_int_equal(dga_tensor_check_distribution(t, 1e-4, "w"), DGA_ERR_INVALID);
    dga_tensor_f32(t)[0] = -0.125f;
    dga_tensor_f32(t)[1] = 0.625f;
    assert_int_equal(dga_tensor_check_distribution(t, 1e-4, "w"), DGA_ERR_INVALID);
    assert_non_null(strstr(dga_last_error(), "entry 1 is -0.125"));
    dga_tensor_f32(t)[0] = NAN;
    assert_int_equal(dga_tensor_normalize_(t), DGA_ERR_INVALID);
    assert_int_equal(dga_tensor_fill_(t, 0), DGA_OK);
    assert_int_equal(dga_tensor_normalize_(t), DGA_ERR_INVALID);
    assert_non_null(strstr(dga_last_error(), "sum to 0"));
    dga_tensor_release(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_new_and_describe),
        cmocka_unit_test(test_views_share_and_outlive),
        cmocka_unit_test(test_clone_is_independent),
        cmocka_unit_test(test_reductions),
        cmocka_unit_test(test_sum_accumulates_in_double),
        cmocka_unit_test(test_elementwise),
        cmocka_unit_test(test_int32_rules),
        cmocka_unit_test(test_normalize_and_distribution),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
