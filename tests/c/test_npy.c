/* .npy writing and reading: round trips, header layout, clear errors on bad files. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "npy.h"
#include "test_tmpdir.h"

static char dir[256];

static const char *tmp_path(const char *name)
{
    static char buf[512];
    snprintf(buf, sizeof buf, "%s/%s", dir, name);
    return buf;
}

static void write_raw(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, n, f), n);
    fclose(f);
}

static void roundtrip_f32(void **state)
{
    float x[12];
    for (int i = 0; i < 12; i++) x[i] = (float)i * 0.5f - 3.0f;
    int64_t shape[2] = {3, 4};
    const char *p = tmp_path("a.npy");
    assert_int_equal(dga_npy_write(p, DGA_NPY_F32, 2, shape, x), DGA_OK);
    dga_npy a;
    assert_int_equal(dga_npy_read(p, &a), DGA_OK);
    assert_int_equal(a.dtype, DGA_NPY_F32);
    assert_int_equal(a.ndim, 2);
    assert_int_equal(a.shape[0], 3);
    assert_int_equal(a.shape[1], 4);
    assert_memory_equal(a.data, x, sizeof x);
    dga_npy_free(&a);
    /* The data starts on a 64-byte boundary and the header says what numpy would. */
    FILE *f = fopen(p, "rb");
    unsigned char head[128];
    size_t n = fread(head, 1, sizeof head, f);
    fclose(f);
    assert_true(n == 128);
    size_t hlen = head[8] | head[9] << 8;
    assert_int_equal((10 + hlen) % 64, 0);
    assert_non_null(strstr((char *)head + 10, "'descr': '<f4'"));
    assert_non_null(strstr((char *)head + 10, "'shape': (3, 4)"));
    assert_int_equal(head[10 + hlen - 1], '\n');
}

static void roundtrip_int_types(void **state)
{
    int32_t a32[5] = {-1, 0, 1, 2147483647, -2147483647 - 1};
    int64_t a64[3] = {INT64_MIN, 0, INT64_MAX};
    uint16_t u16[4] = {0, 1, 65535, 300};
    uint64_t u64[2] = {0, UINT64_MAX};
    struct {
        dga_npy_dtype dt;
        void *data;
        int64_t n;
        size_t bytes;
    } cases[] = {{DGA_NPY_I32, a32, 5, sizeof a32},
                 {DGA_NPY_I64, a64, 3, sizeof a64},
                 {DGA_NPY_U16, u16, 4, sizeof u16},
                 {DGA_NPY_U64, u64, 2, sizeof u64}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const char *p = tmp_path("i.npy");
        assert_int_equal(dga_npy_write(p, cases[c].dt, 1, &cases[c].n, cases[c].data), DGA_OK);
        dga_npy a;
        assert_int_equal(dga_npy_map(p, &a), DGA_OK);
        assert_int_equal(a.dtype, cases[c].dt);
        assert_int_equal(a.ndim, 1);
        assert_int_equal(a.numel, cases[c].n);
        assert_memory_equal(a.data, cases[c].data, cases[c].bytes);
        dga_npy_free(&a);
    }
    /* An empty array and a scalar. */
    int64_t zero = 0;
    assert_int_equal(dga_npy_write(tmp_path("e.npy"), DGA_NPY_F32, 1, &zero, NULL), DGA_OK);
    dga_npy e;
    assert_int_equal(dga_npy_read(tmp_path("e.npy"), &e), DGA_OK);
    assert_int_equal(e.numel, 0);
    dga_npy_free(&e);
    float s = 2.5f;
    assert_int_equal(dga_npy_write(tmp_path("s.npy"), DGA_NPY_F32, 0, NULL, &s), DGA_OK);
    assert_int_equal(dga_npy_read(tmp_path("s.npy"), &e), DGA_OK);
    assert_int_equal(e.ndim, 0);
    assert_int_equal(e.numel, 1);
    assert_true(((float *)e.data)[0] == 2.5f);
    dga_npy_free(&e);
}

/* A hand-made header in numpy's own spelling (v1.0, double quotes accepted too). */
static void reads_foreign_header(void **state)
{
    const char *hdr = "{'descr': '<i4', 'fortran_order': False, 'shape': (2, 2), }";
    unsigned char buf[128 + 16];
    memset(buf, ' ', 128);
    memcpy(buf, "\x93NUMPY\x01\x00", 8);
    buf[8] = 118;
    buf[9] = 0;
    memcpy(buf + 10, hdr, strlen(hdr));
    buf[127] = '\n';
    int32_t v[4] = {7, 8, 9, 10};
    memcpy(buf + 128, v, 16);
    write_raw(tmp_path("f.npy"), buf, sizeof buf);
    dga_npy a;
    assert_int_equal(dga_npy_read(tmp_path("f.npy"), &a), DGA_OK);
    assert_int_equal(a.dtype, DGA_NPY_I32);
    assert_memory_equal(a.data, v, 16);
    dga_npy_free(&a);
}

static void expect_error(const char *path, dga_status want, const char *needle)
{
    dga_npy a;
    dga_status st = dga_npy_read(path, &a);
    assert_int_equal(st, want);
    if (!strstr(dga_last_error(), needle)) fail_msg("message '%s' lacks '%s'", dga_last_error(), needle);
    assert_null(a.data);
}

/* A header that ends the buffer exactly, with a bad shape entry or a key whose value is
 * missing: the parser must not read past it, not even for its message (found by fuzz_npy). */
static void header_at_buffer_end(void **state)
{
    (void)state;
    const char *heads[] = {"{'descr': '<f4', 'fortran_order': False, 'shape': (4, x",
                           "{'descr': '<f4', 'fortran_order': False, 'shape':",
                           "{'descr':   ", "{'descr': '<f4', 'fortran_order':"};
    const char *why[] = {"bad shape entry at 'x'", "no 'shape'", "no 'descr'", "no 'fortran_order'"};
    for (int i = 0; i < 4; i++) {
        size_t hl = strlen(heads[i]);
        unsigned char *buf = malloc(10 + hl);   /* exact size, so ASan sees any overread */
        memcpy(buf, "\x93NUMPY\x01\x00", 8);
        buf[8] = (unsigned char)hl;
        buf[9] = 0;
        memcpy(buf + 10, heads[i], hl);
        dga_npy a;
        size_t off;
        assert_int_equal(dga_npy_parse_header("mem.npy", buf, 10 + hl, &a, &off), DGA_ERR_FORMAT);
        if (!strstr(dga_last_error(), why[i])) fail_msg("'%s' lacks '%s'", dga_last_error(), why[i]);
        free(buf);
    }
}

static void header_errors(void **state)
{
    float x[6] = {1, 2, 3, 4, 5, 6};
    int64_t shape[1] = {6};
    const char *p = tmp_path("t.npy");
    assert_int_equal(dga_npy_write(p, DGA_NPY_F32, 1, shape, x), DGA_OK);
    /* Truncated data. */
    assert_int_equal(truncate(p, 64 + 20), 0);
    expect_error(p, DGA_ERR_FORMAT, "truncated");
    /* Truncated header. */
    assert_int_equal(truncate(p, 30), 0);
    expect_error(p, DGA_ERR_FORMAT, "truncated .npy header");
    /* Not a .npy at all. */
    write_raw(p, "hello world, not numpy", 22);
    expect_error(p, DGA_ERR_FORMAT, "magic");
    /* Unsupported dtype and Fortran order. */
    const char *bad[] = {"{'descr': '>f8', 'fortran_order': False, 'shape': (1,), }",
                         "{'descr': '<f4', 'fortran_order': True, 'shape': (1,), }",
                         "{'descr': '<f4', 'fortran_order': False, }"};
    const char *why[] = {"unsupported .npy dtype '>f8'", "Fortran", "no 'shape'"};
    for (int i = 0; i < 3; i++) {
        unsigned char buf[64 + 8];
        memset(buf, ' ', 64);
        memcpy(buf, "\x93NUMPY\x01\x00", 8);
        buf[8] = 54;
        buf[9] = 0;
        memcpy(buf + 10, bad[i], strlen(bad[i]) < 53 ? strlen(bad[i]) : 53);
        buf[63] = '\n';
        memset(buf + 64, 0, 8);
        write_raw(p, buf, sizeof buf);
        expect_error(p, DGA_ERR_FORMAT, why[i]);
    }
    /* Missing file. */
    expect_error(tmp_path("missing.npy"), DGA_ERR_IO, "missing.npy");
    /* map_expect checks the type. */
    assert_int_equal(dga_npy_write(p, DGA_NPY_F32, 1, shape, x), DGA_OK);
    dga_npy a;
    assert_int_equal(dga_npy_map_expect(p, DGA_NPY_I32, 1, &a), DGA_ERR_FORMAT);
    assert_non_null(strstr(dga_last_error(), "expected a 1-D '<i4' array"));
}

static void atomic_write_leaves_no_temp(void **state)
{
    const char *p = tmp_path("atomic.npy");
    float x = 1;
    int64_t one = 1;
    assert_int_equal(dga_npy_write(p, DGA_NPY_F32, 1, &one, &x), DGA_OK);
    char tmp[600];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", p, (long)getpid());
    assert_int_not_equal(access(tmp, F_OK), 0);
    /* A write into a missing directory fails cleanly. */
    assert_int_equal(dga_npy_write(tmp_path("nodir/x.npy"), DGA_NPY_F32, 1, &one, &x), DGA_ERR_IO);
}

static int setup(void **state)
{
    return test_tmpdir_make(dir, sizeof dir, "npy");
}

static int teardown(void **state)
{
    return test_tmpdir_remove(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(roundtrip_f32),
        cmocka_unit_test(roundtrip_int_types),
        cmocka_unit_test(reads_foreign_header),
        cmocka_unit_test(header_errors),
        cmocka_unit_test(header_at_buffer_end),
        cmocka_unit_test(atomic_write_leaves_no_temp),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
