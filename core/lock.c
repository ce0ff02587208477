/* Directory ownership by flock (lock.h). */
#include "lock.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

struct dga_lock {
    int fd;
    char *path;
};

/* The pid written by the holder, or 0 when the file does not hold one (yet). */
static long holder_pid(int fd)
{
    char buf[32];
    ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
    if (n <= 0) return 0;
    buf[n] = '\0';
    char *end;
    long pid = strtol(buf, &end, 10);
    return (end != buf && pid > 0) ? pid : 0;
}

dga_status dga_lock_acquire(const char *path, dga_lock **out)
{
    *out = NULL;
    if (!path || !*path) return dga_fail(DGA_ERR_INVALID, "lock: empty path");
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return dga_fail_errno(DGA_ERR_IO, "%s: cannot open the lock file", path);
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        int err = errno;
        long pid = err == EWOULDBLOCK ? holder_pid(fd) : 0;
        close(fd);
        if (err != EWOULDBLOCK) {
            errno = err;
            return dga_fail_errno(DGA_ERR_IO, "%s: cannot lock", path);
        }
        if (pid > 0)
            return dga_fail(DGA_ERR_IO, "%s: locked by process %ld, which is writing there; wait for it "
                            "to finish or stop it", path, pid);
        /* The holder takes the lock before it writes its pid: a narrow window. */
        return dga_fail(DGA_ERR_IO, "%s: locked by another process, which is writing there (its pid "
                        "is not written yet)", path);
    }
    char pid[32];
    int len = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
    if (ftruncate(fd, 0) != 0 || pwrite(fd, pid, (size_t)len, 0) != len) {
        dga_status st = dga_fail_errno(DGA_ERR_IO, "%s: cannot write the holder's pid", path);
        close(fd);
        return st;
    }
    dga_lock *lock = malloc(sizeof *lock);
    char *copy = lock ? strdup(path) : NULL;
    if (!copy) {
        free(lock);
        close(fd);
        return dga_fail(DGA_ERR_NOMEM, "%s: out of memory for the lock", path);
    }
    lock->fd = fd;
    lock->path = copy;
    *out = lock;
    return DGA_OK;
}

void dga_lock_release(dga_lock *lock)
{
    if (!lock) return;
    /* The pid goes first, so a reader never names a process that no longer holds the lock;
     * a failure here changes nothing that matters, the close below releases the lock. */
    if (ftruncate(lock->fd, 0) != 0) { /* nothing to do */ }
    close(lock->fd);
    free(lock->path);
    free(lock);
}

const char *dga_lock_path(const dga_lock *lock)
{
    return lock ? lock->path : NULL;
}
