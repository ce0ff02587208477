/* Token shards: uint16 / uint32 round trips and header validation. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "rng.h"
#include "shard.h"
#include "test_tmpdir.h"

static char dir[256];

static int setup(void **state)
{
    (void)state;
    return test_tmpdir_make(dir, sizeof dir, "shard");
}

static int teardown(void **state)
{
    (void)state;
    return test_tmpdir_remove(dir);
}

static void path_of(char *buf, size_t size, const char *name)
{
    snprintf(buf, size, "%s/%s", dir, name);
}

static long file_size(const char *path)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fclose(f);
    return n;
}

static void round_trip(int vocab, size_t n, int want_version)
{
    char path[512];
    path_of(path, sizeof path, "rt.bin");
    dga_rng rng;
    dga_rng_seed(&rng, (uint64_t)vocab + n);
    int32_t *tok = malloc((n + 1) * sizeof *tok);
    for (size_t i = 0; i < n; i++) tok[i] = (int32_t)dga_rng_below(&rng, (uint64_t)vocab);
    if (n > 1) tok[0] = vocab - 1, tok[1] = 0;   /* the extremes */
    assert_int_equal(dga_shard_write(path, tok, n, vocab), DGA_OK);
    int width = want_version == 1 ? 2 : 4;
    assert_int_equal(file_size(path), DGA_SHARD_HEADER_BYTES + (long)n * width);
    int32_t *back;
    size_t m;
    dga_shard_info info;
    assert_int_equal(dga_shard_read(path, &back, &m, &info), DGA_OK);
    assert_int_equal(m, n);
    assert_int_equal(info.version, want_version);
    assert_int_equal(info.n_tokens, n);
    assert_int_equal(info.vocab_size, vocab);
    assert_int_equal(info.token_bytes, width);
    if (n) assert_memory_equal(back, tok, n * sizeof *tok);
    free(back);
    free(tok);
}

static void test_round_trip_uint16(void **state)
{
    (void)state;
    round_trip(8192, 100000, 1);
    round_trip(65536, 70000, 1);   /* the largest vocabulary that fits uint16 */
    round_trip(300, 0, 1);         /* an empty shard is valid */
}

static void test_round_trip_uint32(void **state)
{
    (void)state;
    round_trip(65537, 50000, 2);
    round_trip(1 << 20, 1000, 2);
}

/* The header the llm.c way, for hand-made files. */
static void write_raw(const char *path, int32_t magic, int32_t version, int32_t count,
                      size_t body_bytes)
{
    int32_t header[DGA_SHARD_HEADER_INTS] = {0};
    header[0] = magic;
    header[1] = version;
    header[2] = count;
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fwrite(header, sizeof header, 1, f);
    for (size_t i = 0; i < body_bytes; i++) fputc(i % 7, f);
    fclose(f);
}

static void expect_format_error(const char *path, const char *needle, int in_header)
{
    int32_t *tok = (int32_t *)path;   /* must be reset to NULL on failure */
    size_t n = 99;
    assert_int_equal(dga_shard_read(path, &tok, &n, NULL), DGA_ERR_FORMAT);
    assert_null(tok);
    assert_int_equal(n, 0);
    if (!strstr(dga_last_error(), needle))
        fail_msg("error \"%s\" does not mention \"%s\"", dga_last_error(), needle);
    dga_shard_info info;   /* read_info checks the header and the size, not the tokens */
    assert_int_equal(dga_shard_read_info(path, &info), in_header ? DGA_ERR_FORMAT : DGA_OK);
}

static void test_header_validation(void **state)
{
    (void)state;
    char path[512];
    path_of(path, sizeof path, "x.bin");

    write_raw(path, 12345, 1, 10, 20);
    expect_format_error(path, "bad magic 12345", 1);

    write_raw(path, DGA_SHARD_MAGIC, 3, 10, 40);
    expect_format_error(path, "unsupported version 3", 1);

    write_raw(path, DGA_SHARD_MAGIC, 1, 1000, 812 * 2);
    expect_format_error(path, "x.bin: truncated: header says 1000 tokens, file holds 812", 1);

    write_raw(path, DGA_SHARD_MAGIC, 2, 10, 40 + 4);
    expect_format_error(path, "trailing data", 1);

    write_raw(path, DGA_SHARD_MAGIC, 1, 10, 21);
    expect_format_error(path, "stray bytes", 1);

    FILE *f = fopen(path, "wb");
    fputs("short", f);
    fclose(f);
    expect_format_error(path, "shorter than the 1024-byte header", 1);

    /* a valid llm.c file (vocab field 0) reads fine */
    write_raw(path, DGA_SHARD_MAGIC, 1, 10, 20);
    int32_t *tok;
    size_t n;
    dga_shard_info info;
    assert_int_equal(dga_shard_read(path, &tok, &n, &info), DGA_OK);
    assert_int_equal(n, 10);
    assert_int_equal(info.vocab_size, 0);
    free(tok);
}

static void test_token_outside_vocab(void **state)
{
    (void)state;
    char path[512];
    path_of(path, sizeof path, "v.bin");
    int32_t tok[] = {1, 2, 300, 4};
    assert_int_equal(dga_shard_write(path, tok, 4, 256), DGA_ERR_INVALID);
    assert_non_null(strstr(dga_last_error(), "token 300 at index 2 outside vocabulary [0, 256)"));
    assert_int_equal(access(path, F_OK), -1);   /* nothing was written */
    int32_t neg[] = {-1};
    assert_int_equal(dga_shard_write(path, neg, 1, 256), DGA_ERR_INVALID);
    assert_int_equal(dga_shard_write(path, tok, 2, 0), DGA_ERR_INVALID);

    /* a file whose tokens exceed the vocabulary its header names */
    assert_int_equal(dga_shard_write(path, tok, 4, 1000), DGA_OK);
    FILE *f = fopen(path, "r+b");
    int32_t small = 100;
    fseek(f, 12, SEEK_SET);
    fwrite(&small, 4, 1, f);
    fclose(f);
    expect_format_error(path, "token 300 at index 2 outside vocabulary [0, 100)", 0);
}

static void test_missing_file(void **state)
{
    (void)state;
    char path[512];
    path_of(path, sizeof path, "none.bin");
    int32_t *tok;
    size_t n;
    assert_int_equal(dga_shard_read(path, &tok, &n, NULL), DGA_ERR_IO);
    assert_non_null(strstr(dga_last_error(), "none.bin"));
    /* writing into a missing directory fails cleanly too */
    path_of(path, sizeof path, "no/such/dir/x.bin");
    int32_t one = 1;
    assert_int_equal(dga_shard_write(path, &one, 1, 10), DGA_ERR_IO);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip_uint16),
        cmocka_unit_test(test_round_trip_uint32),
        cmocka_unit_test(test_header_validation),
        cmocka_unit_test(test_token_outside_vocab),
        cmocka_unit_test(test_missing_file),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
