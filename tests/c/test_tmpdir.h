/* Temporary directories for the C tests: a fresh directory under /tmp, and its removal with
 * everything below it. Header-only because each test program is built from one .c file. */
#ifndef DGA_TEST_TMPDIR_H
#define DGA_TEST_TMPDIR_H

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

/* Makes /tmp/dga_test_<tag>_XXXXXX, its name written into buf: 0 on success, else -1 (the
 * return convention of a cmocka setup). */
static inline int test_tmpdir_make(char *buf, size_t size, const char *tag)
{
    int n = snprintf(buf, size, "/tmp/dga_test_%s_XXXXXX", tag);
    if (n < 0 || (size_t)n >= size) return -1;
    return mkdtemp(buf) ? 0 : -1;
}

static inline int test_tmpdir_remove_one(const char *path, const struct stat *sb, int type,
                                         struct FTW *ftw)
{
    (void)sb, (void)type, (void)ftw;
    return remove(path);
}

/* Removes dir and everything below it (symbolic links are removed, not followed): 0 on
 * success, else -1 (the return convention of a cmocka teardown). */
static inline int test_tmpdir_remove(const char *dir)
{
    return nftw(dir, test_tmpdir_remove_one, 16, FTW_DEPTH | FTW_PHYS) == 0 ? 0 : -1;
}

#endif
