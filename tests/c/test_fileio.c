/* The shared file helpers: atomic writes (commit, abort, failures) and whole-file reads. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "fileio.h"
#include "test_tmpdir.h"

static char dir[256];

static const char *tmp_path(const char *name)
{
    static char buf[512];
    snprintf(buf, sizeof buf, "%s/%s", dir, name);
    return buf;
}

static const char *tmp_of(const char *path)
{
    static char buf[600];
    snprintf(buf, sizeof buf, "%s.tmp.%ld", path, (long)getpid());
    return buf;
}

static void assert_file_is(const char *path, const char *want)
{
    char *buf;
    size_t n;
    assert_int_equal(dga_file_read_all(path, &buf, &n), DGA_OK);
    assert_int_equal(n, strlen(want));
    assert_memory_equal(buf, want, n);
    assert_int_equal(buf[n], '\0');   /* text can be parsed in place */
    free(buf);
}

static void commit_writes_parts_in_order(void **state)
{
    const char *p = tmp_path("parts.txt");
    const void *parts[3] = {"alpha ", "", "beta\n"};
    size_t sizes[3] = {6, 0, 5};
    assert_int_equal(dga_write_file_atomic(p, 3, parts, sizes), DGA_OK);
    assert_file_is(p, "alpha beta\n");
    assert_int_not_equal(access(tmp_of(p), F_OK), 0);

    /* A second write replaces the first whole, even when shorter. */
    dga_atomic_file af;
    assert_int_equal(dga_atomic_file_open(p, &af), DGA_OK);
    assert_int_equal(access(tmp_of(p), F_OK), 0);
    assert_int_equal(dga_atomic_file_write(&af, "x", 1), DGA_OK);
    assert_file_is(p, "alpha beta\n");   /* untouched until commit */
    assert_int_equal(dga_atomic_file_commit(&af), DGA_OK);
    assert_file_is(p, "x");
    assert_int_not_equal(access(tmp_of(p), F_OK), 0);
    dga_atomic_file_abort(&af);   /* a no-op after commit */
    assert_file_is(p, "x");
}

static void abort_keeps_the_old_file(void **state)
{
    const char *p = tmp_path("keep.txt");
    const void *parts[1] = {"old"};
    size_t sizes[1] = {3};
    assert_int_equal(dga_write_file_atomic(p, 1, parts, sizes), DGA_OK);
    dga_atomic_file af;
    assert_int_equal(dga_atomic_file_open(p, &af), DGA_OK);
    assert_int_equal(dga_atomic_file_write(&af, "new content", 11), DGA_OK);
    dga_atomic_file_abort(&af);
    dga_atomic_file_abort(&af);   /* idempotent */
    assert_file_is(p, "old");
    assert_int_not_equal(access(tmp_of(p), F_OK), 0);
    assert_int_equal(dga_atomic_file_write(&af, "late", 4), DGA_ERR_INVALID);
    assert_int_equal(dga_atomic_file_commit(&af), DGA_ERR_INVALID);
}

static void failures_name_the_file(void **state)
{
    const char *p = tmp_path("no/such/dir/x.bin");
    dga_atomic_file af;
    assert_int_equal(dga_atomic_file_open(p, &af), DGA_ERR_IO);
    assert_non_null(strstr(dga_last_error(), "no/such/dir/x.bin"));
    assert_non_null(strstr(dga_last_error(), "cannot create"));
    dga_atomic_file_abort(&af);   /* harmless after a failed open */
    const void *parts[1] = {"x"};
    size_t sizes[1] = {1};
    assert_int_equal(dga_write_file_atomic(p, 1, parts, sizes), DGA_ERR_IO);

    char *buf = (char *)1;
    size_t n = 7;
    assert_int_equal(dga_file_read_all(tmp_path("absent"), &buf, &n), DGA_ERR_IO);
    assert_null(buf);
    assert_int_equal(n, 0);
    assert_non_null(strstr(dga_last_error(), "absent: cannot open"));
    /* A directory has no whole to read. */
    assert_int_equal(dga_file_read_all(dir, &buf, &n), DGA_ERR_IO);
    assert_non_null(strstr(dga_last_error(), "not a regular file"));
}

/* A FIFO nobody writes to would block open() for ever: every reader refuses it at once, and
 * so do a directory and a device, naming the path and what it is. The alarm turns a hang
 * into a failure. */
static void non_regular_inputs_are_refused_without_blocking(void **state)
{
    const char *fifo = tmp_path("fifo.json");
    assert_int_equal(mkfifo(fifo, 0600), 0);
    alarm(20);
    char *buf = (char *)1;
    size_t n = 7;
    assert_int_equal(dga_file_read_all(fifo, &buf, &n), DGA_ERR_IO);
    assert_null(buf);
    assert_non_null(strstr(dga_last_error(), "fifo.json: not a regular file (a FIFO"));
    int fd = 5;
    assert_int_equal(dga_open_regular(fifo, &fd), DGA_ERR_IO);
    assert_int_equal(fd, -1);
    FILE *fp = (FILE *)1;
    assert_int_equal(dga_fopen_regular(fifo, &fp), DGA_ERR_IO);
    assert_null(fp);
    assert_int_equal(dga_open_regular("/dev/null", &fd), DGA_ERR_IO);
    assert_non_null(strstr(dga_last_error(), "/dev/null: not a regular file (a character device)"));
    assert_int_equal(dga_open_regular(dir, &fd), DGA_ERR_IO);
    assert_non_null(strstr(dga_last_error(), "not a regular file (a directory)"));
    alarm(0);

    /* A regular file comes back blocking (the flag was only for the open). */
    const char *p = tmp_path("plain");
    const void *parts[1] = {"x"};
    size_t sizes[1] = {1};
    assert_int_equal(dga_write_file_atomic(p, 1, parts, sizes), DGA_OK);
    assert_int_equal(dga_open_regular(p, &fd), DGA_OK);
    assert_int_equal(fcntl(fd, F_GETFL) & O_NONBLOCK, 0);
    close(fd);
    assert_int_equal(dga_fopen_regular(p, &fp), DGA_OK);
    assert_int_equal(fgetc(fp), 'x');
    fclose(fp);
}

/* The output-is-an-input check follows links: a symlink and a hard link name the same file. */
static void same_file_follows_links(void **state)
{
    char a[600];
    snprintf(a, sizeof a, "%s", tmp_path("same-a"));
    const void *parts[1] = {"x"};
    size_t sizes[1] = {1};
    assert_int_equal(dga_write_file_atomic(a, 1, parts, sizes), DGA_OK);
    char sym[600], hard[600], other[600];
    snprintf(sym, sizeof sym, "%s", tmp_path("same-sym"));
    snprintf(hard, sizeof hard, "%s", tmp_path("same-hard"));
    snprintf(other, sizeof other, "%s", tmp_path("same-other"));
    assert_int_equal(symlink(a, sym), 0);
    assert_int_equal(link(a, hard), 0);
    assert_int_equal(dga_write_file_atomic(other, 1, parts, sizes), DGA_OK);
    assert_true(dga_same_file(a, a));
    assert_true(dga_same_file(a, sym));
    assert_true(dga_same_file(hard, sym));
    assert_false(dga_same_file(a, other));
    assert_false(dga_same_file(a, tmp_path("absent")));
}

static void reads_empty_and_binary_files(void **state)
{
    const char *p = tmp_path("empty");
    assert_int_equal(dga_write_file_atomic(p, 0, NULL, NULL), DGA_OK);
    assert_file_is(p, "");

    /* Bytes of every value, NULs included, come back exactly. */
    enum { N = 70000 };
    unsigned char *data = malloc(N);
    assert_non_null(data);
    for (size_t i = 0; i < N; i++) data[i] = (unsigned char)(i * 7 + i / 256);
    p = tmp_path("binary");
    const void *parts[1] = {data};
    size_t sizes[1] = {N};
    assert_int_equal(dga_write_file_atomic(p, 1, parts, sizes), DGA_OK);
    char *buf;
    size_t n;
    assert_int_equal(dga_file_read_all(p, &buf, &n), DGA_OK);
    assert_int_equal(n, N);
    assert_memory_equal(buf, data, N);
    free(buf);
    free(data);
}

static int setup(void **state)
{
    return test_tmpdir_make(dir, sizeof dir, "fileio");
}

static int teardown(void **state)
{
    return test_tmpdir_remove(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(commit_writes_parts_in_order),
        cmocka_unit_test(abort_keeps_the_old_file),
        cmocka_unit_test(failures_name_the_file),
        cmocka_unit_test(reads_empty_and_binary_files),
        cmocka_unit_test(non_regular_inputs_are_refused_without_blocking),
        cmocka_unit_test(same_file_follows_links),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
