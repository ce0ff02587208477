/* Directory ownership (core/lock.h): one holder at a time, a refusal that names the holder's
 * pid, release on release and on the holder's death. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "lock.h"
#include "test_tmpdir.h"

static char dir[256];
static char path[512];

static int setup(void **state)
{
    (void)state;
    if (test_tmpdir_make(dir, sizeof dir, "lock") != 0) return -1;
    snprintf(path, sizeof path, "%s/.lock", dir);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    return test_tmpdir_remove(dir);
}

static void one_holder_at_a_time(void **state)
{
    (void)state;
    dga_lock *a, *b;
    assert_int_equal(dga_lock_acquire(path, &a), DGA_OK);
    assert_string_equal(dga_lock_path(a), path);
    /* a second acquire, even in the same process, is refused and names the holder */
    assert_int_equal(dga_lock_acquire(path, &b), DGA_ERR_IO);
    assert_null(b);
    char want[600];
    snprintf(want, sizeof want, "%s: locked by process %ld,", path, (long)getpid());
    assert_non_null(strstr(dga_last_error(), want));
    dga_lock_release(a);
    assert_int_equal(dga_lock_acquire(path, &b), DGA_OK);
    dga_lock_release(b);
    dga_lock_release(NULL);
}

static void released_when_the_holder_dies(void **state)
{
    (void)state;
    int ready[2];
    assert_int_equal(pipe(ready), 0);
    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        dga_lock *l;
        char ok = dga_lock_acquire(path, &l) == DGA_OK ? 'y' : 'n';
        if (write(ready[1], &ok, 1) != 1) _exit(2);
        pause();   /* until killed */
        _exit(0);
    }
    char ok = 0;
    assert_int_equal(read(ready[0], &ok, 1), 1);
    assert_int_equal(ok, 'y');
    dga_lock *l;
    assert_int_equal(dga_lock_acquire(path, &l), DGA_ERR_IO);
    char want[64];
    snprintf(want, sizeof want, "locked by process %ld,", (long)child);
    assert_non_null(strstr(dga_last_error(), want));
    kill(child, SIGKILL);
    assert_int_equal(waitpid(child, NULL, 0), child);
    assert_int_equal(dga_lock_acquire(path, &l), DGA_OK);
    dga_lock_release(l);
    close(ready[0]);
    close(ready[1]);
}

/* Issue 22: a clean run leaves no lock file that looks stale, and neither does a refused one. */
static void lock_file_is_removed_on_release(void **state)
{
    (void)state;
    dga_lock *a, *b;
    assert_int_equal(dga_lock_acquire(path, &a), DGA_OK);
    assert_int_equal(access(path, F_OK), 0);
    assert_int_equal(dga_lock_acquire(path, &b), DGA_ERR_IO);
    assert_int_equal(access(path, F_OK), 0);   /* the refusal leaves the holder's file alone */
    assert_int_equal(dga_lock_check(a), DGA_OK);
    dga_lock_release(a);
    assert_int_not_equal(access(path, F_OK), 0);
}

/* A lock file deleted by hand while held: the holder can tell, and its release does not
 * remove the file of the process that locked the new one. */
static void deleting_a_held_lock_file_is_detected(void **state)
{
    (void)state;
    dga_lock *a, *b;
    assert_int_equal(dga_lock_acquire(path, &a), DGA_OK);
    assert_int_equal(unlink(path), 0);
    assert_int_equal(dga_lock_check(a), DGA_ERR_IO);
    assert_non_null(strstr(dga_last_error(), "was removed or replaced while locked"));
    assert_int_equal(dga_lock_acquire(path, &b), DGA_OK);
    dga_lock_release(a);
    assert_int_equal(access(path, F_OK), 0);
    assert_int_equal(dga_lock_check(b), DGA_OK);
    dga_lock_release(b);
    assert_int_not_equal(access(path, F_OK), 0);
}

/* A directory is locked itself: no file is made, so none can be deleted to defeat it, and
 * the refusal names the holder (another process: flock locks are per open file). */
static void a_directory_is_locked_itself(void **state)
{
    (void)state;
    char sub[600];
    snprintf(sub, sizeof sub, "%s/run", dir);
    assert_int_equal(mkdir(sub, 0700), 0);
    int ready[2], done[2];
    assert_int_equal(pipe(ready), 0);
    assert_int_equal(pipe(done), 0);
    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        dga_lock *l;
        char ok = dga_lock_acquire(sub, &l) == DGA_OK ? 'y' : 'n';
        if (write(ready[1], &ok, 1) != 1) _exit(2);
        char c;
        if (read(done[0], &c, 1) != 1) _exit(3);
        dga_lock_release(l);
        _exit(0);
    }
    char ok = 0;
    assert_int_equal(read(ready[0], &ok, 1), 1);
    assert_int_equal(ok, 'y');
    DIR *d = opendir(sub);
    assert_non_null(d);
    int entries = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) entries += e->d_name[0] != '.';
    closedir(d);
    assert_int_equal(entries, 0);
    dga_lock *l;
    assert_int_equal(dga_lock_acquire(sub, &l), DGA_ERR_IO);
    char want[700];
    snprintf(want, sizeof want, "%s: locked by process %ld,", sub, (long)child);
    assert_non_null(strstr(dga_last_error(), want));
    assert_int_equal(write(done[1], "x", 1), 1);
    assert_int_equal(waitpid(child, NULL, 0), child);
    assert_int_equal(dga_lock_acquire(sub, &l), DGA_OK);
    assert_int_equal(dga_lock_check(l), DGA_OK);
    dga_lock_release(l);
    assert_int_equal(rmdir(sub), 0);   /* still empty */
    close(ready[0]), close(ready[1]), close(done[0]), close(done[1]);
}

static void bad_paths(void **state)
{
    (void)state;
    dga_lock *l;
    assert_int_equal(dga_lock_acquire("", &l), DGA_ERR_INVALID);
    char missing[600];
    snprintf(missing, sizeof missing, "%s/no/such/dir/.lock", dir);
    assert_int_equal(dga_lock_acquire(missing, &l), DGA_ERR_IO);
    assert_null(l);
    assert_non_null(strstr(dga_last_error(), "cannot open the lock file: No such file or directory"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(one_holder_at_a_time),
        cmocka_unit_test(released_when_the_holder_dies),
        cmocka_unit_test(lock_file_is_removed_on_release),
        cmocka_unit_test(deleting_a_held_lock_file_is_detected),
        cmocka_unit_test(a_directory_is_locked_itself),
        cmocka_unit_test(bad_paths),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
