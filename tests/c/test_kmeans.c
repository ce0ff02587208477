/* k-means: recovers separated blobs, is deterministic, hierarchical leaf ranges are
 * contiguous and cover every point, small clusters get fewer children, bad input is an error. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kmeans.h"
#include "rng.h"

/* n points around `nb` random centres (scale 10) with noise 0.1; label[i] = true blob. */
static float *blobs(int64_t n, int d, int nb, uint64_t seed, int *label, int normalise)
{
    dga_rng r;
    dga_rng_seed(&r, seed);
    float *centres = malloc((size_t)nb * d * sizeof(float));
    for (int i = 0; i < nb * d; i++) centres[i] = (float)(10 * dga_rng_normal(&r));
    float *x = malloc((size_t)n * d * sizeof(float));
    for (int64_t i = 0; i < n; i++) {
        int b = (int)(i % nb);
        label[i] = b;
        double s = 0;
        for (int t = 0; t < d; t++) {
            x[i * d + t] = centres[b * d + t] + (float)(0.1 * dga_rng_normal(&r));
            s += (double)x[i * d + t] * x[i * d + t];
        }
        if (normalise)
            for (int t = 0; t < d; t++) x[i * d + t] /= (float)sqrt(s);
    }
    free(centres);
    return x;
}

/* Every found cluster is exactly one blob (a bijection between labels and clusters). */
static void assert_recovers(const int32_t *a, const int *label, int64_t n, int k)
{
    int *map = malloc((size_t)k * sizeof *map);
    for (int j = 0; j < k; j++) map[j] = -1;
    for (int64_t i = 0; i < n; i++) {
        assert_in_range(a[i], 0, k - 1);
        if (map[label[i]] < 0) map[label[i]] = a[i];
        assert_int_equal(map[label[i]], a[i]);
    }
    for (int j = 0; j < k; j++)
        for (int u = j + 1; u < k; u++) assert_int_not_equal(map[j], map[u]);
    free(map);
}

static void recovers_blobs(void **state)
{
    for (int spherical = 0; spherical <= 1; spherical++) {
        int64_t n = 2000;
        int d = 16, k = 8;
        int *label = malloc((size_t)n * sizeof *label);
        float *x = blobs(n, d, k, 7 + spherical, label, spherical);
        float *c = malloc((size_t)k * d * sizeof *c);
        int32_t *a = malloc((size_t)n * sizeof *a);
        dga_kmeans_opts o = {.k = k, .iters = 50, .seed = 1, .spherical = spherical};
        int kept;
        double inertia;
        assert_int_equal(dga_kmeans(x, n, d, &o, c, a, &kept, &inertia), DGA_OK);
        assert_int_equal(kept, k);
        assert_recovers(a, label, n, k);
        if (spherical)
            for (int j = 0; j < k; j++) {
                double s = 0;
                for (int t = 0; t < d; t++) s += (double)c[j * d + t] * c[j * d + t];
                assert_float_equal(s, 1.0, 1e-4);
            }
        /* assign() agrees with the clustering. */
        int32_t *b = malloc((size_t)n * sizeof *b);
        assert_int_equal(dga_kmeans_assign(x, n, d, c, k, spherical, b, NULL), DGA_OK);
        assert_memory_equal(a, b, (size_t)n * sizeof *a);
        free(label), free(x), free(c), free(a), free(b);
    }
}

static void deterministic(void **state)
{
    int64_t n = 1500;
    int d = 8, k = 12;
    int *label = malloc((size_t)n * sizeof *label);
    float *x = blobs(n, d, 5, 3, label, 1);   /* more clusters than blobs: seeding matters */
    float *c1 = malloc((size_t)k * d * sizeof(float)), *c2 = malloc((size_t)k * d * sizeof(float));
    int32_t *a1 = malloc((size_t)n * 4), *a2 = malloc((size_t)n * 4);
    dga_kmeans_opts o = {.k = k, .iters = 20, .seed = 42, .spherical = 1, .seed_sample = 500};
    int k1, k2;
    assert_int_equal(dga_kmeans(x, n, d, &o, c1, a1, &k1, NULL), DGA_OK);
    assert_int_equal(dga_kmeans(x, n, d, &o, c2, a2, &k2, NULL), DGA_OK);
    assert_int_equal(k1, k2);
    assert_memory_equal(a1, a2, (size_t)n * 4);
    assert_memory_equal(c1, c2, (size_t)k1 * d * sizeof(float));
    free(label), free(x), free(c1), free(c2), free(a1), free(a2);
}

static void duplicates_drop_empty_clusters(void **state)
{
    /* 10 points, only 3 distinct: at most 3 non-empty clusters survive. */
    float x[10 * 2];
    for (int i = 0; i < 10; i++) {
        x[2 * i] = (float)(i % 3);
        x[2 * i + 1] = 1;
    }
    float c[5 * 2];
    int32_t a[10];
    int kept;
    dga_kmeans_opts o = {.k = 5, .iters = 10, .seed = 0};
    assert_int_equal(dga_kmeans(x, 10, 2, &o, c, a, &kept, NULL), DGA_OK);
    assert_in_range(kept, 1, 3);
    int seen[5] = {0};
    for (int i = 0; i < 10; i++) {
        assert_in_range(a[i], 0, kept - 1);
        seen[a[i]] = 1;
    }
    for (int j = 0; j < kept; j++) assert_true(seen[j]);
}

static void hierarchical_ranges(void **state)
{
    int64_t n = 3000;
    int d = 12;
    int *label = malloc((size_t)n * sizeof *label);
    float *x = blobs(n, d, 6, 11, label, 1);
    int levels[3] = {6, 4, 3};
    dga_kmeans_opts o = {.iters = 30, .seed = 5, .spherical = 1};
    dga_hkmeans h;
    assert_int_equal(dga_kmeans_hierarchical(x, n, d, levels, 3, &o, &h), DGA_OK);
    assert_int_equal(h.k[0], 6);
    int64_t kleaf = h.k[2];
    assert_true(kleaf <= 6 * 4 * 3 && kleaf > 6);
    assert_int_equal(h.ranges[2][0], 0);
    assert_int_equal(h.ranges[2][kleaf], kleaf);
    for (int l = 0; l < 3; l++) {
        assert_int_equal(h.ranges[l][0], 0);
        assert_int_equal(h.ranges[l][h.k[l]], kleaf);
        for (int64_t j = 0; j < h.k[l]; j++) assert_true(h.ranges[l][j] < h.ranges[l][j + 1]);
    }
    /* Coarse domains are the blobs; each leaf belongs to exactly one coarse range; every
     * leaf is used. */
    int64_t *leaf_count = calloc((size_t)kleaf, sizeof *leaf_count);
    int *blob_of_coarse = malloc(6 * sizeof(int));
    for (int j = 0; j < 6; j++) blob_of_coarse[j] = -1;
    for (int64_t i = 0; i < n; i++) {
        int32_t lf = h.leaf[i];
        assert_in_range(lf, 0, kleaf - 1);
        leaf_count[lf]++;
        int coarse = -1;
        for (int j = 0; j < 6; j++)
            if (lf >= h.ranges[0][j] && lf < h.ranges[0][j + 1]) coarse = j;
        assert_true(coarse >= 0);
        if (blob_of_coarse[coarse] < 0) blob_of_coarse[coarse] = label[i];
        assert_int_equal(blob_of_coarse[coarse], label[i]);
    }
    for (int64_t j = 0; j < kleaf; j++) assert_true(leaf_count[j] > 0);
    free(leaf_count), free(blob_of_coarse);
    dga_hkmeans_free(&h);

    /* Tiny input: 5 points, levels {2, 4}: a cluster with fewer points than 4 gets fewer
     * children, and the leaves still cover everything contiguously. */
    int lv2[2] = {2, 4};
    assert_int_equal(dga_kmeans_hierarchical(x, 5, d, lv2, 2, &o, &h), DGA_OK);
    assert_true(h.k[0] <= 2);
    assert_true(h.k[1] <= 5);
    assert_int_equal(h.ranges[0][h.k[0]], h.k[1]);
    dga_hkmeans_free(&h);
    free(label), free(x);
}

static void bad_input(void **state)
{
    float x[4] = {1, 2, 3, NAN};
    float c[4];
    int32_t a[2];
    int kept;
    dga_kmeans_opts o = {.k = 3};
    assert_int_equal(dga_kmeans(x, 2, 2, &o, c, a, &kept, NULL), DGA_ERR_INVALID);
    assert_non_null(strstr(dga_last_error(), "k = 3"));
    o.k = 1;
    assert_int_equal(dga_kmeans(x, 2, 2, &o, c, a, &kept, NULL), DGA_ERR_INVALID);
    assert_non_null(strstr(dga_last_error(), "point 1, coordinate 1"));
    int lv[1] = {0};
    dga_hkmeans h;
    assert_int_equal(dga_kmeans_hierarchical(x, 1, 2, lv, 1, &o, &h), DGA_ERR_INVALID);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(recovers_blobs),
        cmocka_unit_test(deterministic),
        cmocka_unit_test(duplicates_drop_empty_clusters),
        cmocka_unit_test(hierarchical_ranges),
        cmocka_unit_test(bad_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
