/* Exclusive ownership by flock, on a directory or a lock file (lock.h). */
#include "lock.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

/* How many times an acquirer starts over because the file it locked was removed meanwhile;
 * each round needs another process to release (or a user to delete) in between. */
#define DGA_LOCK_ROUNDS 64

struct dga_lock {
    int fd;
    int is_dir;
    char *path;
};

/* The pid written in a lock file, or 0 when it does not hold one (yet). */
static long file_holder(int fd)
{
    char buf[32];
    ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
    if (n <= 0) return 0;
    buf[n] = '\0';
    char *end;
    long pid = strtol(buf, &end, 10);
    return (end != buf && pid > 0) ? pid : 0;
}

/* The pid holding a flock on the inode of fd, from /proc/locks ("1: FLOCK  ADVISORY  WRITE
 * <pid> <major hex>:<minor hex>:<inode> 0 EOF"); 0 when not found. */
static long proc_holder(int fd)
{
    struct stat sb;
    if (fstat(fd, &sb) != 0) return 0;
    FILE *fp = fopen("/proc/locks", "re");
    if (!fp) return 0;
    char line[256];
    long found = 0;
    while (!found && fgets(line, sizeof line, fp)) {
        char kind[16], mode[16];
        long pid;
        unsigned maj, min;
        unsigned long long ino;
        if (strstr(line, "->")) continue;   /* a waiter, not the holder */
        if (sscanf(line, "%*d: %15s %*s %15s %ld %x:%x:%llu", kind, mode, &pid, &maj, &min, &ino) == 6 &&
            !strcmp(kind, "FLOCK") && !strcmp(mode, "WRITE") && ino == (unsigned long long)sb.st_ino &&
            maj == major(sb.st_dev) && min == minor(sb.st_dev))
            found = pid;
    }
    fclose(fp);
    return found;
}

static dga_status busy(const char *path, long pid)
{
    if (pid > 0)
        return dga_fail(DGA_ERR_IO, "%s: locked by process %ld, which is writing there; wait for it "
                        "to finish or stop it", path, pid);
    /* The holder takes the lock before it writes its pid: a narrow window. */
    return dga_fail(DGA_ERR_IO, "%s: locked by another process, which is writing there (its pid "
                    "is not known yet)", path);
}

/* flock(LOCK_EX | LOCK_NB) on fd, retried on EINTR; on failure fd is closed and the status
 * names the holder. */
static dga_status take(int fd, const char *path, int is_dir)
{
    int rc;
    do rc = flock(fd, LOCK_EX | LOCK_NB);
    while (rc != 0 && errno == EINTR);
    if (rc == 0) return DGA_OK;
    int err = errno;
    long pid = err == EWOULDBLOCK ? (is_dir ? proc_holder(fd) : file_holder(fd)) : 0;
    close(fd);
    if (err != EWOULDBLOCK) {
        errno = err;
        return dga_fail_errno(DGA_ERR_IO, "%s: cannot lock", path);
    }
    return busy(path, pid);
}

/* Whether path names the file open as fd (same device and inode). */
static int names(const char *path, int fd)
{
    struct stat a, b;
    return fstat(fd, &a) == 0 && stat(path, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

static dga_status lock_file(const char *path, int *out)
{
    for (int round = 0; round < DGA_LOCK_ROUNDS; round++) {
        int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOCTTY | O_NONBLOCK, 0644);
        if (fd < 0) return dga_fail_errno(DGA_ERR_IO, "%s: cannot open the lock file", path);
        struct stat sb;
        if (fstat(fd, &sb) == 0 && !S_ISREG(sb.st_mode)) {
            close(fd);
            return dga_fail(DGA_ERR_IO, "%s: the lock file is not a regular file", path);
        }
        dga_status st = take(fd, path, 0);
        if (st != DGA_OK) return st;
        /* Locked; but the holder before may have removed the file between our open and our
         * lock, and then whoever creates the new one is not excluded by ours. */
        if (!names(path, fd)) {
            close(fd);
            continue;
        }
        char pid[32];
        int len = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
        if (ftruncate(fd, 0) != 0 || pwrite(fd, pid, (size_t)len, 0) != len) {
            st = dga_fail_errno(DGA_ERR_IO, "%s: cannot write the holder's pid", path);
            unlink(path);
            close(fd);
            return st;
        }
        *out = fd;
        return DGA_OK;
    }
    return dga_fail(DGA_ERR_IO, "%s: the lock file keeps being removed while being locked", path);
}

dga_status dga_lock_acquire(const char *path, dga_lock **out)
{
    *out = NULL;
    if (!path || !*path) return dga_fail(DGA_ERR_INVALID, "lock: empty path");
    struct stat sb;
    int is_dir = stat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
    int fd = -1;
    dga_status st = DGA_OK;
    if (is_dir) {
        fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0) return dga_fail_errno(DGA_ERR_IO, "%s: cannot open the directory to lock", path);
        st = take(fd, path, 1);
    } else {
        st = lock_file(path, &fd);
    }
    if (st != DGA_OK) return st;
    dga_lock *lock = malloc(sizeof *lock);
    char *copy = lock ? strdup(path) : NULL;
    if (!copy) {
        free(lock);
        if (!is_dir) unlink(path);
        close(fd);
        return dga_fail(DGA_ERR_NOMEM, "%s: out of memory for the lock", path);
    }
    lock->fd = fd;
    lock->is_dir = is_dir;
    lock->path = copy;
    *out = lock;
    return DGA_OK;
}

dga_status dga_lock_check(const dga_lock *lock)
{
    if (!lock) return dga_fail(DGA_ERR_INVALID, "lock: checked after release");
    if (names(lock->path, lock->fd)) return DGA_OK;
    return dga_fail(DGA_ERR_IO, "%s: this %s was removed or replaced while locked (by hand?); another "
                    "process may be writing there now", lock->path, lock->is_dir ? "directory" : "lock file");
}

void dga_lock_release(dga_lock *lock)
{
    if (!lock) return;
    /* Removed while still locked: an acquirer that opened it before sees, once it gets the
     * lock, that the path no longer names it, and starts over. A file that is no longer ours
     * (deleted by hand, then made again by another process) is left to its owner. */
    if (!lock->is_dir && names(lock->path, lock->fd)) unlink(lock->path);
    close(lock->fd);
    free(lock->path);
    free(lock);
}

const char *dga_lock_path(const dga_lock *lock)
{
    return lock ? lock->path : NULL;
}
