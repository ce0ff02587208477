/* hash384 embedder: determinism, normalisation, word rules, idf fitting, save/load. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "test_tmpdir.h"

#include "embed.h"

#define D DGA_HASH_DIM

static const char *corpus[] = {
    "The court held that the statute applies to every contract signed after 1990.",
    "A contract is void when the court finds fraud; the statute is clear.",
    "def main(): return sum(x * x for x in range(10))",
    "import numpy as np; x = np.zeros(10); print(x.sum())",
    "The mitochondria is the powerhouse of the cell, producing ATP.",
    "Cells divide by mitosis; the cell membrane protects the cell.",
};
#define N (int64_t)(sizeof corpus / sizeof corpus[0])

static double dot(const float *a, const float *b)
{
    double s = 0;
    for (int i = 0; i < D; i++) s += (double)a[i] * b[i];
    return s;
}

static void unknown_name_is_an_error(void **state)
{
    dga_embedder *e = (dga_embedder *)1;
    assert_int_equal(dga_embedder_new("bert", &e), DGA_ERR_INVALID);
    assert_null(e);
    assert_non_null(strstr(dga_last_error(), "unknown embedder 'bert'"));
    assert_int_equal(dga_embedder_new("hash1024", &e), DGA_OK);
    assert_int_equal(e->dim, 1024);
    float x[1024];
    assert_int_equal(e->embed(e, "some words here", 15, x), DGA_OK);
    double s = 0;
    for (int i = 0; i < 1024; i++) s += (double)x[i] * x[i];
    assert_float_equal(s, 1.0, 1e-5);
    dga_embedder_free(e);
}

static void deterministic_and_normalised(void **state)
{
    dga_embedder *a, *b;
    assert_int_equal(dga_embedder_new("hash384", &a), DGA_OK);
    assert_int_equal(dga_embedder_new("hash384", &b), DGA_OK);
    assert_int_equal(a->dim, D);
    assert_int_equal(dga_embedder_fit(a, N, corpus, NULL), DGA_OK);
    assert_int_equal(dga_embedder_fit(b, N, corpus, NULL), DGA_OK);
    float *ea = malloc(N * D * sizeof(float)), *eb = malloc(N * D * sizeof(float));
    assert_int_equal(dga_embedder_embed_many(a, N, corpus, NULL, ea), DGA_OK);
    assert_int_equal(dga_embedder_embed_many(b, N, corpus, NULL, eb), DGA_OK);
    assert_memory_equal(ea, eb, N * D * sizeof(float));
    for (int64_t i = 0; i < N; i++) assert_float_equal(dot(ea + i * D, ea + i * D), 1.0, 1e-5);
    /* Same-topic pairs are closer than cross-topic pairs. */
    for (int t = 0; t < 3; t++) {
        double same = dot(ea + (2 * t) * D, ea + (2 * t + 1) * D);
        for (int u = 0; u < 3; u++)
            if (u != t) assert_true(same > dot(ea + (2 * t) * D, ea + (2 * u) * D));
    }
    free(ea);
    free(eb);
    dga_embedder_free(a);
    dga_embedder_free(b);
}

static void word_rules(void **state)
{
    dga_embedder *e;
    assert_int_equal(dga_embedder_new("hash384", &e), DGA_OK);
    float x[D], y[D], z[D];
    /* Case and non-word bytes do not matter; word order does (bigrams). */
    assert_int_equal(e->embed(e, "Hello, World!", 13, x), DGA_OK);
    assert_int_equal(e->embed(e, "  hello world  ", 15, y), DGA_OK);
    assert_memory_equal(x, y, sizeof x);
    assert_int_equal(e->embed(e, "world hello", 11, z), DGA_OK);
    assert_true(dot(x, z) < 0.999);
    /* UTF-8 bytes are word bytes: "café" is not "caf". */
    assert_int_equal(e->embed(e, "caf\xc3\xa9", 5, x), DGA_OK);
    assert_int_equal(e->embed(e, "caf", 3, y), DGA_OK);
    assert_true(dot(x, y) < 0.999);
    /* Curly quotes, dashes and a no-break space separate words like ASCII punctuation. */
    const char *fancy = "\xe2\x80\x9cHello\xe2\x80\x9d\xc2\xa0world\xe2\x80\x94";
    assert_int_equal(e->embed(e, fancy, strlen(fancy), x), DGA_OK);
    assert_int_equal(e->embed(e, "hello world", 11, y), DGA_OK);
    assert_memory_equal(x, y, sizeof x);
    /* No words: zero vector. */
    assert_int_equal(e->embed(e, " ,.;! ", 6, x), DGA_OK);
    for (int i = 0; i < D; i++) assert_true(x[i] == 0.0f);
    /* The documented hash: unigram "a" is fmix64(FNV-1a("a")). */
    assert_true(dga_hash_feature("A", 1) == dga_hash_feature("a", 1));
    assert_true(dga_hash_feature("a", 1) != dga_hash_feature("b", 1));
    dga_embedder_free(e);
}

static void idf_downweights_common_words(void **state)
{
    dga_embedder *e;
    assert_int_equal(dga_embedder_new("hash384", &e), DGA_OK);
    const float *idf = dga_hash384_idf(e);
    uint32_t b_the = (uint32_t)(dga_hash_feature("the", 3) >> 44);
    uint32_t b_atp = (uint32_t)(dga_hash_feature("atp", 3) >> 44);
    assert_float_equal(idf[b_the], 1.0, 0);
    assert_int_equal(dga_embedder_fit(e, N, corpus, NULL), DGA_OK);
    assert_int_equal(dga_hash384_fitted_texts(e), N);
    /* "the" is in 3 texts, "atp" in 1: idf = ln(7/(1+df)) + 1. */
    assert_float_equal(idf[b_atp], log(7.0 / 2.0) + 1, 1e-5);
    assert_true(idf[b_the] < idf[b_atp]);
    dga_embedder_free(e);
}

static void save_load_roundtrip(void **state)
{
    char dir[64];
    assert_int_equal(test_tmpdir_make(dir, sizeof dir, "embed"), 0);
    dga_embedder *a, *b;
    assert_int_equal(dga_embedder_new("hash384", &a), DGA_OK);
    assert_int_equal(dga_embedder_fit(a, N, corpus, NULL), DGA_OK);
    assert_int_equal(a->save(a, dir), DGA_OK);
    assert_int_equal(dga_embedder_new("hash384", &b), DGA_OK);
    assert_int_equal(b->load(b, dir), DGA_OK);
    assert_int_equal(dga_hash384_fitted_texts(b), N);
    float x[D], y[D];
    const char *t = "a new text about the court and a contract";
    assert_int_equal(a->embed(a, t, strlen(t), x), DGA_OK);
    assert_int_equal(b->embed(b, t, strlen(t), y), DGA_OK);
    assert_memory_equal(x, y, sizeof x);
    /* A missing state file is a clear error. */
    assert_int_equal(b->load(b, "/nonexistent-dir"), DGA_ERR_IO);
    assert_non_null(strstr(dga_last_error(), "idf.npy"));
    assert_int_equal(test_tmpdir_remove(dir), 0);
    dga_embedder_free(a);
    dga_embedder_free(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(unknown_name_is_an_error),
        cmocka_unit_test(deterministic_and_normalised),
        cmocka_unit_test(word_rules),
        cmocka_unit_test(idf_downweights_common_words),
        cmocka_unit_test(save_load_roundtrip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
