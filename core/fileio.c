#include "fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* write(2) may write less than asked, and caps one call near 2 GiB on Linux. */
#define DGA_IO_CHUNK ((size_t)1 << 30)

static void release(dga_atomic_file *af)
{
    free(af->path);
    free(af->tmp);
    af->path = af->tmp = NULL;
    af->fd = -1;
}

dga_status dga_atomic_file_open(const char *path, dga_atomic_file *af)
{
    af->fd = -1;
    af->path = strdup(path);
    int n = snprintf(NULL, 0, "%s.tmp.%ld", path, (long)getpid());
    af->tmp = n > 0 ? malloc((size_t)n + 1) : NULL;
    if (!af->path || !af->tmp) {
        release(af);
        return dga_fail(DGA_ERR_NOMEM, "%s: out of memory", path);
    }
    snprintf(af->tmp, (size_t)n + 1, "%s.tmp.%ld", path, (long)getpid());
    af->fd = open(af->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (af->fd < 0) {
        dga_status st = dga_fail_errno(DGA_ERR_IO, "%s: cannot create", af->tmp);
        release(af);
        return st;
    }
    return DGA_OK;
}

dga_status dga_atomic_file_write(dga_atomic_file *af, const void *buf, size_t n)
{
    if (af->fd < 0) return dga_fail(DGA_ERR_INVALID, "atomic file written after commit or abort");
    const char *p = buf;
    while (n > 0) {
        ssize_t w = write(af->fd, p, n > DGA_IO_CHUNK ? DGA_IO_CHUNK : n);
        if (w < 0) {
            if (errno == EINTR) continue;
            return dga_fail_errno(DGA_ERR_IO, "%s: write failed", af->tmp);
        }
        p += w;
        n -= (size_t)w;
    }
    return DGA_OK;
}

void dga_atomic_file_abort(dga_atomic_file *af)
{
    if (af->fd < 0 && !af->tmp) return;
    if (af->fd >= 0) close(af->fd);
    if (af->tmp) unlink(af->tmp);
    release(af);
}

/* Makes the rename itself durable. Failing here loses no data already in place, so it is
 * best-effort. */
static void sync_parent_dir(const char *path)
{
    char *copy = strdup(path);
    if (!copy) return;
    int fd = open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        (void)fsync(fd);
        close(fd);
    }
    free(copy);
}

dga_status dga_atomic_file_commit(dga_atomic_file *af)
{
    if (af->fd < 0) return dga_fail(DGA_ERR_INVALID, "atomic file committed after commit or abort");
    dga_status st = DGA_OK;
    if (fsync(af->fd) != 0) st = dga_fail_errno(DGA_ERR_IO, "%s: fsync failed", af->tmp);
    int rc = close(af->fd);
    af->fd = -1;
    if (rc != 0 && st == DGA_OK) st = dga_fail_errno(DGA_ERR_IO, "%s: close failed", af->tmp);
    if (st == DGA_OK && rename(af->tmp, af->path) != 0)
        st = dga_fail_errno(DGA_ERR_IO, "%s: cannot rename to %s", af->tmp, af->path);
    if (st != DGA_OK) {
        dga_atomic_file_abort(af);
        return st;
    }
    sync_parent_dir(af->path);
    release(af);
    return DGA_OK;
}

dga_status dga_write_file_atomic(const char *path, int nparts, const void *const *parts,
                                 const size_t *sizes)
{
    dga_atomic_file af;
    dga_status st = dga_atomic_file_open(path, &af);
    for (int p = 0; p < nparts && st == DGA_OK; p++)
        st = dga_atomic_file_write(&af, parts[p], sizes[p]);
    if (st != DGA_OK) {
        dga_atomic_file_abort(&af);
        return st;
    }
    return dga_atomic_file_commit(&af);
}

static const char *kind_of(mode_t m)
{
    if (S_ISDIR(m)) return "a directory";
    if (S_ISFIFO(m)) return "a FIFO (named pipe)";
    if (S_ISCHR(m)) return "a character device";
    if (S_ISBLK(m)) return "a block device";
    if (S_ISSOCK(m)) return "a socket";
    return "neither a file nor a directory";
}

dga_status dga_open_regular(const char *path, int *out)
{
    *out = -1;
    /* O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer, for ever. */
    int fd;
    do fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    while (fd < 0 && errno == EINTR);
    if (fd < 0) return dga_fail_errno(DGA_ERR_IO, "%s: cannot open", path);
    struct stat sb;
    dga_status st = DGA_OK;
    if (fstat(fd, &sb) != 0)
        st = dga_fail_errno(DGA_ERR_IO, "%s: cannot stat", path);
    else if (!S_ISREG(sb.st_mode))
        st = dga_fail(DGA_ERR_IO, "%s: not a regular file (%s)", path, kind_of(sb.st_mode));
    else {
        int flags = fcntl(fd, F_GETFL);
        if (flags < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0)
            st = dga_fail_errno(DGA_ERR_IO, "%s: cannot make the descriptor blocking", path);
    }
    if (st != DGA_OK) {
        close(fd);
        return st;
    }
    *out = fd;
    return DGA_OK;
}

dga_status dga_fopen_regular(const char *path, FILE **out)
{
    *out = NULL;
    int fd;
    dga_status st = dga_open_regular(path, &fd);
    if (st != DGA_OK) return st;
    FILE *fp = fdopen(fd, "rb");
    if (!fp) {
        st = dga_fail_errno(DGA_ERR_IO, "%s: cannot open a stream", path);
        close(fd);
        return st;
    }
    *out = fp;
    return DGA_OK;
}

int dga_same_file(const char *a, const char *b)
{
    struct stat sa, sb;
    return a && b && stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev &&
           sa.st_ino == sb.st_ino;
}

/* realpath of path, or of its parent joined with its last component when path does not
 * exist yet (an output about to be created); NULL when neither resolves. Free with free(). */
static char *resolve(const char *path)
{
    char *r = realpath(path, NULL);
    if (r || errno != ENOENT) return r;
    char *copy = strdup(path), *copy2 = strdup(path);
    char *parent = copy && copy2 ? realpath(dirname(copy), NULL) : NULL;
    char *out = NULL;
    if (parent) {
        const char *base = basename(copy2);
        size_t n = strlen(parent) + strlen(base) + 2;
        out = malloc(n);
        if (out) snprintf(out, n, "%s/%s", strcmp(parent, "/") ? parent : "", base);
    }
    free(parent);
    free(copy);
    free(copy2);
    return out;
}

static int is_below(const char *path, const char *dir)
{
    size_t n = strlen(dir);
    if (n == 1 && dir[0] == '/') return path[0] == '/' && path[1] != '\0';
    return strncmp(path, dir, n) == 0 && path[n] == '/';
}

dga_status dga_output_check(const char *out, const char *in, const char *what)
{
    if (!out || !in || !*out || !*in) return DGA_OK;
    if (dga_same_file(out, in))
        return dga_fail(DGA_ERR_INVALID, "%s: this output is the input %s (%s); refusing to overwrite "
                        "an input", out, in, what);
    struct stat si, so;
    int in_dir = stat(in, &si) == 0 && S_ISDIR(si.st_mode);
    int out_there = stat(out, &so) == 0, out_dir = out_there && S_ISDIR(so.st_mode);
    if (!(in_dir && out_there) && !out_dir) return DGA_OK;
    char *ro = resolve(out), *ri = resolve(in);
    /* Inside an input directory, only an existing document of a corpus (what the text reader
     * reads; named as the link resolves) is an input: a shard or a report written beside the
     * documents, even again, is not. */
    size_t n = ro ? strlen(ro) : 0;
    int doc = (n > 6 && !strcmp(ro + n - 6, ".jsonl")) || (n > 4 && !strcmp(ro + n - 4, ".txt"));
    dga_status st = DGA_OK;
    if (ro && ri && in_dir && !out_dir && doc && is_below(ro, ri))
        st = dga_fail(DGA_ERR_INVALID, "%s: this output is a document of the input directory %s (%s); "
                      "refusing to overwrite an input", out, in, what);
    else if (ro && ri && out_dir && is_below(ri, ro))
        st = dga_fail(DGA_ERR_INVALID, "%s: this output directory holds the input %s (%s); "
                      "refusing to replace it", out, in, what);
    free(ro);
    free(ri);
    return st;
}

dga_status dga_file_read_all(const char *path, char **buf, size_t *len)
{
    *buf = NULL;
    *len = 0;
    int fd;
    dga_status st = dga_open_regular(path, &fd);
    if (st != DGA_OK) return st;
    struct stat sb;
    if (fstat(fd, &sb) != 0) st = dga_fail_errno(DGA_ERR_IO, "%s: cannot stat", path);
    /* The size is a hint: a file that grows while it is read is read to its end. */
    size_t cap = st == DGA_OK ? (size_t)sb.st_size + 1 : 0, n = 0;
    char *p = st == DGA_OK ? malloc(cap) : NULL;
    if (st == DGA_OK && !p) st = dga_fail(DGA_ERR_NOMEM, "%s: cannot allocate %zu bytes", path, cap);
    while (st == DGA_OK) {
        if (n + 1 == cap) {
            /* Full as stat said: probe for more before growing, so the usual case never
             * holds a second copy. */
            char probe[4096];
            ssize_t r = read(fd, probe, sizeof probe);
            if (r < 0 && errno == EINTR) continue;
            if (r < 0) st = dga_fail_errno(DGA_ERR_IO, "%s: read failed", path);
            if (r <= 0) break;
            size_t need = n + (size_t)r + 1, grow = cap * 2 > need ? cap * 2 : need;
            char *grown = realloc(p, grow);
            if (!grown) {
                st = dga_fail(DGA_ERR_NOMEM, "%s: cannot allocate %zu bytes", path, grow);
                break;
            }
            p = grown;
            cap = grow;
            memcpy(p + n, probe, (size_t)r);
            n += (size_t)r;
            continue;
        }
        size_t want = cap - 1 - n;
        ssize_t r = read(fd, p + n, want > DGA_IO_CHUNK ? DGA_IO_CHUNK : want);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) st = dga_fail_errno(DGA_ERR_IO, "%s: read failed", path);
        if (r <= 0) break;
        n += (size_t)r;
    }
    close(fd);
    if (st != DGA_OK) {
        free(p);
        return st;
    }
    p[n] = '\0';
    *buf = p;
    *len = n;
    return DGA_OK;
}

dga_status dga_path_trim(char *out, size_t size, const char *path)
{
    size_t n = path ? strlen(path) : 0;
    if (n == 0) return dga_fail(DGA_ERR_INVALID, "empty path");
    while (n > 1 && path[n - 1] == '/') n--;
    if (n >= size) return dga_fail(DGA_ERR_INVALID, "%.60s...: path too long (%zu bytes)", path, n);
    memcpy(out, path, n);
    out[n] = '\0';
    return DGA_OK;
}

dga_status dga_file_copy_atomic(const char *src, const char *dst)
{
    char *buf;
    size_t n;
    dga_status st = dga_file_read_all(src, &buf, &n);
    if (st != DGA_OK) return st;
    const void *parts[1] = {buf};
    st = dga_write_file_atomic(dst, 1, parts, &n);
    free(buf);
    return st;
}
