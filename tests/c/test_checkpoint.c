/* safetensors reader/writer and checkpoints: round trips, exact resume, and a clear
 * DGA_ERR_FORMAT for every kind of malformed file. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "test_tmpdir.h"

#include <stdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "adamw.h"
#include "checkpoint.h"
#include "gpt.h"
#include "safetensors.h"

static char dir[64];

static const char *tmp_path(const char *name)
{
    static char buf[4][160];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", dir, name);
    return buf[k];
}

static int setup(void **state)
{
    (void)state;
    return test_tmpdir_make(dir, sizeof dir, "ckpt");
}

static int teardown(void **state)
{
    (void)state;
    return test_tmpdir_remove(dir);
}

static long file_size(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fclose(f);
    return n;
}

static unsigned char *slurp(const char *path, long *n)
{
    *n = file_size(path);
    assert_true(*n >= 0);
    unsigned char *p = malloc((size_t)*n + 1);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    assert_int_equal(fread(p, 1, (size_t)*n, f), (size_t)*n);
    fclose(f);
    return p;
}

static void spit(const char *path, const void *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(p, 1, n, f), n);
    fclose(f);
}

/* A raw file: the given JSON header (not padded) then `data` bytes of zeros. */
static void write_raw(const char *path, const char *json, size_t data)
{
    size_t h = strlen(json);
    unsigned char *p = calloc(1, 8 + h + data + 1);
    for (int b = 0; b < 8; b++) p[b] = (unsigned char)((uint64_t)h >> (8 * b));
    memcpy(p + 8, json, h);
    spit(path, p, 8 + h + data);
    free(p);
}

/* Opens path and expects DGA_ERR_FORMAT with `fragment` in the message. */
static void expect_format_error(const char *path, const char *fragment)
{
    dga_safetensors *st = NULL;
    dga_status s = dga_safetensors_open(path, &st);
    if (s != DGA_ERR_FORMAT || !strstr(dga_last_error(), fragment) ||
        !strstr(dga_last_error(), path))
        print_error("expected a format error with '%s', got status %d: %s\n", fragment, s,
                    dga_last_error());
    assert_int_equal(s, DGA_ERR_FORMAT);
    assert_non_null(strstr(dga_last_error(), fragment));
    assert_null(st);
}

static void test_safetensors_round_trip(void **state)
{
    (void)state;
    const char *path = tmp_path("rt.safetensors");
    float w[6] = {1, -2, 3.5f, 4, 5, 6};
    int32_t ids[3] = {7, -8, 9};
    int64_t big[2] = {INT64_C(1) << 40, -3};
    const char blob[5] = "a\0b\xff";
    dga_st_entry e[4] = {
        {.name = "u8blob", .dtype = DGA_ST_U8, .ndim = 1, .shape = {5}, .data = blob},
        {.name = "w", .dtype = DGA_ST_F32, .ndim = 2, .shape = {2, 3}, .data = w},
        {.name = "ids", .dtype = DGA_ST_I32, .ndim = 1, .shape = {3}, .data = ids},
        {.name = "big", .dtype = DGA_ST_I64, .ndim = 1, .shape = {2}, .data = big},
    };
    dga_st_meta m[2] = {{"hello", "world"}, {"n", "42"}};
    assert_int_equal(dga_safetensors_write(path, e, 4, m, 2), DGA_OK);
    assert_int_equal(access(tmp_path("rt.safetensors.tmp"), F_OK), -1);

    /* The header length is a multiple of 8 and the header is JSON padded with spaces. */
    long n;
    unsigned char *raw = slurp(path, &n);
    uint64_t h = 0;
    for (int b = 0; b < 8; b++) h |= (uint64_t)raw[b] << (8 * b);
    assert_int_equal(h % 8, 0);
    assert_int_equal(raw[8], '{');
    assert_int_equal((long)(8 + h + 5 + 24 + 12 + 16), n);
    free(raw);

    dga_safetensors *st = NULL;
    assert_int_equal(dga_safetensors_open(path, &st), DGA_OK);
    assert_int_equal(dga_safetensors_count(st), 4);
    /* Data order: larger elements first, so every tensor is aligned. */
    assert_string_equal(dga_safetensors_entry(st, 0)->name, "big");
    assert_string_equal(dga_safetensors_entry(st, 3)->name, "u8blob");
    const dga_st_entry *x = dga_safetensors_find(st, "w");
    assert_non_null(x);
    assert_int_equal(x->ndim, 2);
    assert_int_equal(x->shape[1], 3);
    assert_memory_equal(x->data, w, sizeof w);
    assert_memory_equal(dga_safetensors_find(st, "ids")->data, ids, sizeof ids);
    assert_memory_equal(dga_safetensors_find(st, "big")->data, big, sizeof big);
    assert_memory_equal(dga_safetensors_find(st, "u8blob")->data, blob, 5);
    assert_null(dga_safetensors_find(st, "nope"));
    assert_string_equal(dga_safetensors_meta(st, "hello"), "world");
    assert_string_equal(dga_safetensors_meta(st, "n"), "42");
    assert_null(dga_safetensors_meta(st, "absent"));
    dga_safetensors_close(st);
}

static void test_writer_rejects_bad_entries(void **state)
{
    (void)state;
    float w[2] = {0};
    dga_st_entry e[2] = {
        {.name = "a", .dtype = DGA_ST_F32, .ndim = 1, .shape = {2}, .data = w},
        {.name = "a", .dtype = DGA_ST_F32, .ndim = 1, .shape = {2}, .data = w},
    };
    const char *path = tmp_path("bad.safetensors");
    assert_int_equal(dga_safetensors_write(path, e, 2, NULL, 0), DGA_ERR_INVALID);
    assert_non_null(strstr(dga_last_error(), "'a' appears twice"));
    e[1].name = "__metadata__";
    assert_int_equal(dga_safetensors_write(path, e, 2, NULL, 0), DGA_ERR_INVALID);
    e[1].name = "b";
    e[1].shape[0] = -1;
    assert_int_equal(dga_safetensors_write(path, e, 2, NULL, 0), DGA_ERR_INVALID);
    assert_int_equal(access(path, F_OK), -1);
}

/* A save that fails half-way leaves the previous file byte for byte, and no temp file. */
static void test_failed_write_keeps_old_file(void **state)
{
    (void)state;
    const char *path = tmp_path("keep.safetensors");
    float w[4] = {1, 2, 3, 4};
    dga_st_entry good = {.name = "w", .dtype = DGA_ST_F32, .ndim = 1, .shape = {4}, .data = w};
    assert_int_equal(dga_safetensors_write(path, &good, 1, NULL, 0), DGA_OK);
    long n0;
    unsigned char *before = slurp(path, &n0);

    dga_st_entry two[2] = {good, {.name = "z", .dtype = DGA_ST_F32, .ndim = 1, .shape = {3},
                                  .data = NULL}};
    assert_int_equal(dga_safetensors_write(path, two, 2, NULL, 0), DGA_ERR_INVALID);
    assert_non_null(strstr(dga_last_error(), "'z' has no data"));
    long n1;
    unsigned char *after = slurp(path, &n1);
    assert_int_equal(n0, n1);
    assert_memory_equal(before, after, (size_t)n0);
    char tmp[256];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    assert_int_equal(access(tmp, F_OK), -1);
    free(before);
    free(after);

    /* An unwritable destination is an I/O error naming the file. */
    assert_int_equal(dga_safetensors_write("/nonexistent-dir/x.safetensors", &good, 1, NULL, 0),
                     DGA_ERR_IO);
    assert_non_null(strstr(dga_last_error(), "/nonexistent-dir/x.safetensors"));
}

static void test_malformed_files(void **state)
{
    (void)state;
    const char *p = tmp_path("m.safetensors");
    const char *ok_hdr = "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}";

    write_raw(p, ok_hdr, 8);
    dga_safetensors *st = NULL;
    assert_int_equal(dga_safetensors_open(p, &st), DGA_OK);   /* the baseline is valid */
    dga_safetensors_close(st);

    spit(p, "abc", 3);
    expect_format_error(p, "too short");
    write_raw(p, ok_hdr, 5);
    expect_format_error(p, "truncated: header says 8 bytes of data, file has 5");
    write_raw(p, ok_hdr, 12);
    expect_format_error(p, "4 bytes after the last tensor");
    /* A header length beyond the end of the file. */
    unsigned char hl[12] = {200, 0, 0, 0, 0, 0, 0, 0, '{', '}', ' ', ' '};
    spit(p, hl, sizeof hl);
    expect_format_error(p, "truncated: header says 200 bytes of JSON");
    /* Not a safetensors file at all: an absurd length, or text. */
    spit(p, "PK\003\004garbage-garbage-garbage", 27);
    expect_format_error(p, "implausible");
    write_raw(p, "[1, 2]", 0);
    expect_format_error(p, "does not start with '{'");
    write_raw(p, "{\"a\": {\"dtype\": \"F32\", ", 0);
    expect_format_error(p, "not valid JSON");
    write_raw(p, "{\"a\":{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[0,4]}}", 4);
    expect_format_error(p, "unsupported dtype \"F16\"");
    write_raw(p, "{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 8);
    expect_format_error(p, "shape needs 12 bytes of F32 but data_offsets span 8");
    write_raw(p, "{\"a\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}", 8);
    expect_format_error(p, "shape entry 1");
    write_raw(p, "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,0]}}", 8);
    expect_format_error(p, "end before they begin");
    write_raw(p, "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                 "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", 12);
    expect_format_error(p, "overlap");
    write_raw(p, "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                 "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}", 12);
    expect_format_error(p, "gap");
    write_raw(p, "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                 "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8);
    expect_format_error(p, "not valid JSON");   /* duplicate key */
    write_raw(p, "{\"__metadata__\":{\"k\":3}}", 0);
    expect_format_error(p, "value of 'k' is not a string");
    write_raw(p, "{\"a\":{\"shape\":[2],\"data_offsets\":[0,8]}}", 8);
    expect_format_error(p, "missing or non-string \"dtype\"");

    /* A flipped byte inside a valid header. */
    float w[2] = {1, 2};
    dga_st_entry e = {.name = "a", .dtype = DGA_ST_F32, .ndim = 1, .shape = {2}, .data = w};
    assert_int_equal(dga_safetensors_write(p, &e, 1, NULL, 0), DGA_OK);
    long n;
    unsigned char *raw = slurp(p, &n);
    unsigned char *colon = memchr(raw + 8, ':', (size_t)n - 8);
    *colon ^= 0x20;
    spit(p, raw, (size_t)n);
    expect_format_error(p, "not valid JSON");
    free(raw);

    dga_safetensors *none = NULL;
    assert_int_equal(dga_safetensors_open(tmp_path("absent"), &none), DGA_ERR_IO);
    assert_non_null(strstr(dga_last_error(), "No such file"));
}

/* Every truncation of a valid file is a format error; every single-bit flip either still
 * parses (a flipped data byte, a space in the padding) or is a format error, never a crash. */
static void test_every_truncation_and_bit_flip(void **state)
{
    (void)state;
    const char *p = tmp_path("flip.safetensors"), *q = tmp_path("flip2.safetensors");
    float w[3] = {1, 2, 3};
    int32_t ids[2] = {4, 5};
    dga_st_entry e[2] = {
        {.name = "w", .dtype = DGA_ST_F32, .ndim = 1, .shape = {3}, .data = w},
        {.name = "ids", .dtype = DGA_ST_I32, .ndim = 2, .shape = {1, 2}, .data = ids},
    };
    dga_st_meta m = {"k", "v"};
    assert_int_equal(dga_safetensors_write(p, e, 2, &m, 1), DGA_OK);
    long n;
    unsigned char *raw = slurp(p, &n);
    for (long len = 0; len < n; len++) {
        spit(q, raw, (size_t)len);
        dga_safetensors *st = NULL;
        assert_int_equal(dga_safetensors_open(q, &st), DGA_ERR_FORMAT);
    }
    int parsed = 0, rejected = 0;
    for (long i = 0; i < n; i++)
        for (int bit = 0; bit < 8; bit++) {
            raw[i] ^= (unsigned char)(1u << bit);
            spit(q, raw, (size_t)n);
            dga_safetensors *st = NULL;
            dga_status s = dga_safetensors_open(q, &st);
            assert_true(s == DGA_OK || s == DGA_ERR_FORMAT);
            if (s == DGA_OK) parsed++; else rejected++;
            dga_safetensors_close(st);
            raw[i] ^= (unsigned char)(1u << bit);
        }
    assert_true(parsed >= 20 * 8);   /* at least the 20 data bytes */
    assert_true(rejected > 0);
    free(raw);
}

/* ---- checkpoints ---- */

static const dga_gpt_config CFG = {.n_layer = 2, .n_head = 2, .n_embd = 16, .n_ctx = 8,
                                   .vocab_size = 32};
enum { B = 2, T = 8 };

static void make_batch(int32_t *in, int32_t *tg, int shift)
{
    for (int i = 0; i < B * T; i++) {
        in[i] = (i * 7 + shift) % CFG.vocab_size;
        tg[i] = (i * 5 + 3 + shift) % CFG.vocab_size;
    }
}

static dga_adamw *make_opt(dga_model *m)
{
    dga_adamw_config c = dga_adamw_defaults();
    c.lr = 1e-2f;
    size_t r[1][2] = {{0, dga_model_num_params(m)}};
    dga_adamw *opt = NULL;
    assert_int_equal(dga_adamw_create(dga_model_num_params(m), &c, (const size_t(*)[2])r, 1,
                                      &opt), DGA_OK);
    return opt;
}

static float train_step(dga_model *m, dga_adamw *opt, int shift)
{
    int32_t in[B * T], tg[B * T];
    make_batch(in, tg, shift);
    float loss;
    dga_model_zero_grad(m);
    assert_int_equal(dga_model_forward(m, in, tg, B, T, &loss), DGA_OK);
    assert_int_equal(dga_model_backward(m), DGA_OK);
    assert_int_equal(dga_adamw_step(opt, dga_model_params(m), dga_model_grads(m), 1e-2f), DGA_OK);
    return loss;
}

/* Train 3 steps, save, train 2 more; a fresh model + optimizer loaded from the file and
 * trained the same 2 steps must end bit-identical. */
static void test_checkpoint_exact_resume(void **state)
{
    (void)state;
    const char *path = tmp_path("ck.safetensors");
    dga_model *a = NULL, *b = NULL;
    assert_int_equal(dga_gpt_create(&CFG, B, &a), DGA_OK);
    assert_int_equal(dga_gpt_create(&CFG, B, &b), DGA_OK);
    dga_rng rng;
    dga_rng_seed(&rng, 5);
    dga_model_init_weights(a, &rng);
    dga_adamw *oa = make_opt(a), *ob = make_opt(b);
    for (int s = 0; s < 3; s++) train_step(a, oa, s);

    float mix[3] = {0.2f, 0.3f, 0.5f};
    dga_st_entry extra = {.name = "extra.mix", .dtype = DGA_ST_F32, .ndim = 1, .shape = {3},
                          .data = mix};
    dga_st_meta meta = {"user.run", "test"};
    assert_int_equal(dga_checkpoint_save(path, a, oa, &extra, 1, &meta, 1), DGA_OK);

    dga_checkpoint *ck = NULL;
    assert_int_equal(dga_checkpoint_open(path, &ck), DGA_OK);
    assert_memory_equal(dga_checkpoint_config(ck), &CFG, sizeof CFG);
    assert_int_equal(dga_checkpoint_max_batch(ck), B);
    assert_true(dga_checkpoint_has_optimizer(ck));
    const dga_safetensors *f = dga_checkpoint_file(ck);
    assert_null(dga_safetensors_find(f, "lm_head.weight"));   /* tied to wte */
    assert_non_null(dga_safetensors_find(f, "transformer.h.1.mlp.c_fc.weight"));
    assert_non_null(dga_safetensors_find(f, "optimizer.v.transformer.wte.weight"));
    assert_string_equal(dga_safetensors_meta(f, "n_embd"), "16");
    assert_string_equal(dga_safetensors_meta(f, "user.run"), "test");
    assert_memory_equal(dga_safetensors_find(f, "extra.mix")->data, mix, sizeof mix);
    assert_int_equal(dga_checkpoint_load_model(ck, b), DGA_OK);
    assert_int_equal(dga_checkpoint_load_optimizer(ck, b, ob), DGA_OK);
    dga_checkpoint_close(ck);

    size_t np = dga_model_num_params(a);
    assert_memory_equal(dga_model_params(a), dga_model_params(b), np * sizeof(float));
    assert_memory_equal(dga_adamw_m(oa), dga_adamw_m(ob), np * sizeof(float));
    assert_memory_equal(dga_adamw_v(oa), dga_adamw_v(ob), np * sizeof(float));
    assert_int_equal(dga_adamw_steps(ob), 3);
    assert_true(dga_adamw_get_config(ob)->lr == 1e-2f);
    for (int s = 3; s < 5; s++) {
        float la = train_step(a, oa, s), lb = train_step(b, ob, s);
        assert_true(la == lb);
    }
    assert_memory_equal(dga_model_params(a), dga_model_params(b), np * sizeof(float));
    dga_adamw_free(oa);
    dga_adamw_free(ob);
    dga_model_free(a);
    dga_model_free(b);
}

static void test_checkpoint_errors(void **state)
{
    (void)state;
    const char *path = tmp_path("ck2.safetensors");
    dga_model *a = NULL, *other = NULL;
    assert_int_equal(dga_gpt_create(&CFG, 1, &a), DGA_OK);
    dga_gpt_config c2 = CFG;
    c2.n_embd = 32;
    assert_int_equal(dga_gpt_create(&c2, 1, &other), DGA_OK);
    assert_int_equal(dga_checkpoint_save(path, a, NULL, NULL, 0, NULL, 0), DGA_OK);

    dga_checkpoint *ck = NULL;
    assert_int_equal(dga_checkpoint_open(path, &ck), DGA_OK);
    assert_false(dga_checkpoint_has_optimizer(ck));
    assert_int_equal(dga_checkpoint_load_model(ck, other), DGA_ERR_INVALID);
    assert_non_null(strstr(dga_last_error(), "config mismatch: file has n_embd=16, model has "
                                             "n_embd=32"));
    dga_adamw *oa = make_opt(a);
    assert_int_equal(dga_checkpoint_load_optimizer(ck, a, oa), DGA_ERR_FORMAT);
    assert_non_null(strstr(dga_last_error(), "no optimizer state"));
    dga_checkpoint_close(ck);

    /* Reserved names and keys. */
    dga_st_meta bad_meta = {"n_layer", "7"};
    assert_int_equal(dga_checkpoint_save(path, a, NULL, NULL, 0, &bad_meta, 1), DGA_ERR_INVALID);
    float x = 1;
    dga_st_entry bad = {.name = "transformer.wte.weight", .dtype = DGA_ST_F32, .ndim = 1,
                        .shape = {1}, .data = &x};
    assert_int_equal(dga_checkpoint_save(path, a, NULL, &bad, 1, NULL, 0), DGA_ERR_INVALID);

    /* A safetensors file that is not a checkpoint. */
    const char *plain = tmp_path("plain.safetensors");
    bad.name = "x";
    assert_int_equal(dga_safetensors_write(plain, &bad, 1, NULL, 0), DGA_OK);
    assert_int_equal(dga_checkpoint_open(plain, &ck), DGA_ERR_FORMAT);
    assert_non_null(strstr(dga_last_error(), "not a dgalua checkpoint"));

    /* A checkpoint with a tensor missing, and one with a wrong shape. */
    const char *cut = tmp_path("cut.safetensors");
    dga_safetensors *f = NULL;
    assert_int_equal(dga_safetensors_open(path, &f), DGA_OK);
    int n = dga_safetensors_count(f);
    dga_st_entry *e = calloc((size_t)n, sizeof *e);
    int k = 0;
    for (int i = 0; i < n; i++)
        if (strcmp(dga_safetensors_entry(f, i)->name, "transformer.h.1.ln_2.bias"))
            e[k++] = *dga_safetensors_entry(f, i);
    /* the metadata as written, less the checksum: each rewrite below gets a fresh one, so
     * that what is checked is the missing or misshapen tensor, not the CRC */
    int nm = 0;
    dga_st_meta *m = calloc((size_t)dga_safetensors_meta_count(f), sizeof *m);
    for (int i = 0; i < dga_safetensors_meta_count(f); i++)
        if (strcmp(dga_safetensors_meta_at(f, i)->key, "dgalua.crc32"))
            m[nm++] = *dga_safetensors_meta_at(f, i);
    assert_string_equal(dga_safetensors_meta(f, "format"), "pt");   /* for HF's loader */
    assert_string_equal(dga_safetensors_meta(f, "dgalua.format"), DGA_CHECKPOINT_FORMAT);
    assert_int_equal(dga_safetensors_write_crc(cut, e, k, m, nm, "dgalua.crc32"), DGA_OK);
    assert_int_equal(dga_checkpoint_open(cut, &ck), DGA_OK);
    assert_int_equal(dga_checkpoint_load_model(ck, a), DGA_ERR_FORMAT);
    assert_non_null(strstr(dga_last_error(), "missing tensor 'transformer.h.1.ln_2.bias'"));
    dga_checkpoint_close(ck);
    for (int i = 0; i < n; i++) e[i] = *dga_safetensors_entry(f, i);
    for (int i = 0; i < n; i++)
        if (!strcmp(e[i].name, "transformer.wpe.weight")) {
            e[i].shape[0] /= 2;
            e[i].shape[1] *= 2;
        }
    assert_int_equal(dga_safetensors_write_crc(cut, e, n, m, nm, "dgalua.crc32"), DGA_OK);
    assert_int_equal(dga_checkpoint_open(cut, &ck), DGA_OK);
    assert_int_equal(dga_checkpoint_load_model(ck, a), DGA_ERR_FORMAT);
    assert_non_null(strstr(dga_last_error(), "'transformer.wpe.weight' is F32[4x32], expected "
                                             "F32[8x16]"));
    dga_checkpoint_close(ck);

    /* The same bytes without a checksum: not accepted as a current checkpoint. */
    for (int i = 0; i < n; i++) e[i] = *dga_safetensors_entry(f, i);
    assert_int_equal(dga_safetensors_write(cut, e, n, m, nm), DGA_OK);
    assert_int_equal(dga_checkpoint_open(cut, &ck), DGA_ERR_FORMAT);
    assert_non_null(strstr(dga_last_error(), "no \"dgalua.crc32\""));

    /* Non-finite values with a valid checksum (a diverged run saved as it was): the load
     * refuses, naming the tensor, for parameters and for the Adam moments alike. */
    const char *full = tmp_path("full.safetensors");
    assert_int_equal(dga_checkpoint_save(full, a, oa, NULL, 0, NULL, 0), DGA_OK);
    dga_safetensors *g = NULL;
    assert_int_equal(dga_safetensors_open(full, &g), DGA_OK);
    int ng = dga_safetensors_count(g), nmg = 0;
    dga_st_entry *eg = calloc((size_t)ng, sizeof *eg);
    dga_st_meta *mg = calloc((size_t)dga_safetensors_meta_count(g), sizeof *mg);
    for (int i = 0; i < dga_safetensors_meta_count(g); i++)
        if (strcmp(dga_safetensors_meta_at(g, i)->key, "dgalua.crc32"))
            mg[nmg++] = *dga_safetensors_meta_at(g, i);
    /* Issue 22: and a finite weight too large for a forward pass (3e38 loaded, then failed at
     * the first step as a NaN gradient). */
    const char *names[5] = {"transformer.h.0.mlp.c_fc.weight", "optimizer.v.transformer.ln_f.bias",
                            "optimizer.v.transformer.h.1.attn.c_proj.weight", "transformer.wte.weight",
                            "transformer.h.1.ln_1.bias"};
    const float poison[5] = {NAN, -INFINITY, -1.0f, 3e38f, -2e9f};
    const char *says[5] = {"holds NaN", "holds an infinity", "holds -1 at index", "holds 3e+38 at index",
                           "holds -2e+09 at index"};
    for (int c = 0; c < 5; c++) {
        float *copy = NULL;
        for (int i = 0; i < ng; i++) {
            eg[i] = *dga_safetensors_entry(g, i);
            if (!strcmp(eg[i].name, names[c])) {
                size_t nb = dga_st_entry_nbytes(&eg[i]);
                copy = malloc(nb);
                memcpy(copy, eg[i].data, nb);
                copy[nb / 4 - 1] = poison[c];
                eg[i].data = copy;
            }
        }
        assert_non_null(copy);
        assert_int_equal(dga_safetensors_write_crc(cut, eg, ng, mg, nmg, "dgalua.crc32"), DGA_OK);
        assert_int_equal(dga_checkpoint_open(cut, &ck), DGA_OK);
        dga_status s = c == 0 || c >= 3 ? dga_checkpoint_load_model(ck, a)
                                        : dga_checkpoint_load_optimizer(ck, a, oa);
        assert_int_equal(s, DGA_ERR_FORMAT);
        assert_non_null(strstr(dga_last_error(), names[c]));
        assert_non_null(strstr(dga_last_error(), says[c]));
        assert_non_null(strstr(dga_last_error(), cut));
        dga_checkpoint_close(ck);
        free(copy);
    }
    /* Impossible metadata with a valid checksum: a hyper-parameter out of its range (strtod
     * reads "nan") and a config gpt cannot build, whose cause must survive the wrapping. */
    for (int i = 0; i < ng; i++) eg[i] = *dga_safetensors_entry(g, i);
    const struct { const char *key, *val, *says; } bad_md[] = {
        {"optimizer.lr", "nan", "\"optimizer.lr\" is \"nan\" (expected a finite number"},
        {"optimizer.beta2", "1", "\"optimizer.beta2\" is \"1\""},
        {"optimizer.eps", "-1e-8", "\"optimizer.eps\" is \"-1e-8\""},
        {"optimizer.weight_decay", "inf", "\"optimizer.weight_decay\" is \"inf\""},
        {"n_head", "3", "invalid model config: gpt config: width 16 is not a multiple of heads 3"},
        /* issue 22: gpt's own message ("gpt: batch = ...") named neither the file nor the key */
        {"dgalua.max_batch", "2000000000", "\"dgalua.max_batch\" is \"2000000000\" (expected an integer in [1, 1048576])"},
    };
    for (size_t c = 0; c < sizeof bad_md / sizeof bad_md[0]; c++) {
        const char *keep = NULL;
        for (int i = 0; i < nmg; i++)
            if (!strcmp(mg[i].key, bad_md[c].key)) keep = mg[i].value, mg[i].value = bad_md[c].val;
        assert_non_null(keep);
        assert_int_equal(dga_safetensors_write_crc(cut, eg, ng, mg, nmg, "dgalua.crc32"), DGA_OK);
        dga_status s = dga_checkpoint_open(cut, &ck);
        if (s == DGA_OK) s = dga_checkpoint_load_optimizer(ck, a, oa);
        if (!strstr(dga_last_error(), bad_md[c].says))
            print_error("expected '%s', got: %s\n", bad_md[c].says, dga_last_error());
        assert_int_equal(s, DGA_ERR_FORMAT);
        assert_non_null(strstr(dga_last_error(), bad_md[c].says));
        assert_non_null(strstr(dga_last_error(), cut));
        dga_checkpoint_close(ck);
        ck = NULL;
        for (int i = 0; i < nmg; i++)
            if (!strcmp(mg[i].key, bad_md[c].key)) mg[i].value = keep;
    }
    free(eg);
    free(mg);
    dga_safetensors_close(g);

    /* One flipped bit in the payload of a checkpoint: the checksum catches it at open. */
    long len;
    unsigned char *raw = slurp(path, &len);
    raw[len - 5] ^= 0x01;
    spit(cut, raw, (size_t)len);
    free(raw);
    assert_int_equal(dga_checkpoint_open(cut, &ck), DGA_ERR_FORMAT);
    assert_non_null(strstr(dga_last_error(), "corrupted"));
    free(e);
    free(m);
    dga_safetensors_close(f);
    dga_adamw_free(oa);
    dga_model_free(a);
    dga_model_free(other);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_safetensors_round_trip),
        cmocka_unit_test(test_writer_rejects_bad_entries),
        cmocka_unit_test(test_failed_write_keeps_old_file),
        cmocka_unit_test(test_malformed_files),
        cmocka_unit_test(test_every_truncation_and_bit_flip),
        cmocka_unit_test(test_checkpoint_exact_resume),
        cmocka_unit_test(test_checkpoint_errors),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
