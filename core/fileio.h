/* Whole-file reading and atomic file writing, in one place for every format of the core.
 *
 * Atomic writes: the bytes go to <path>.tmp.<pid>; commit fsyncs it, renames it over <path>
 * and syncs the parent directory, so a reader sees either the old file or the complete new
 * one, never a torn one, even after a crash. Every failure is recorded with dga_fail_errno
 * naming the file and the step that failed.
 *
 *     dga_atomic_file af;
 *     dga_status st = dga_atomic_file_open(path, &af);
 *     if (st) return st;
 *     st = dga_atomic_file_write(&af, header, n);
 *     if (st == DGA_OK) st = dga_atomic_file_write(&af, body, m);
 *     return st == DGA_OK ? dga_atomic_file_commit(&af) : (dga_atomic_file_abort(&af), st);
 */
#ifndef DGA_FILEIO_H
#define DGA_FILEIO_H

#include <stddef.h>

#include "status.h"

typedef struct {
    int   fd;     /* -1 once committed or aborted */
    char *path;   /* the destination */
    char *tmp;    /* <path>.tmp.<pid>, where the bytes go until commit */
} dga_atomic_file;

/* Creates <path>.tmp.<pid> for writing. On failure nothing is left behind and `af` needs no
 * abort (aborting it anyway is harmless). */
dga_status dga_atomic_file_open(const char *path, dga_atomic_file *af);

/* Appends n bytes (retrying short writes and EINTR). After a failure, abort the file. */
dga_status dga_atomic_file_write(dga_atomic_file *af, const void *buf, size_t n);

/* fsync, close, rename over the destination, sync the directory. Releases `af` whether it
 * succeeds or not; on failure the temporary file is removed and the destination untouched. */
dga_status dga_atomic_file_commit(dga_atomic_file *af);

/* Closes and removes the temporary file; the destination is untouched. Idempotent, and a
 * no-op after commit. Keeps the message of the failure that led to it. */
void dga_atomic_file_abort(dga_atomic_file *af);

/* Writes the concatenation of `nparts` buffers to `path` atomically (open, write, commit). */
dga_status dga_write_file_atomic(const char *path, int nparts, const void *const *parts,
                                 const size_t *sizes);

/* Copies the regular file src to dst atomically (read whole, write to a temporary, rename). */
dga_status dga_file_copy_atomic(const char *src, const char *dst);

/* Copies `path` into out[size] without its trailing slashes ("store/" -> "store"; "/" stays
 * "/"), so that "<path>.tmp" names a sibling, not a file inside. DGA_ERR_INVALID if the path
 * is empty or does not fit. */
dga_status dga_path_trim(char *out, size_t size, const char *path);

/* Reads a whole regular file into malloc'd memory: *buf holds *len bytes followed by a NUL
 * (not counted in *len), so text can be parsed in place. Free with free(). A directory, a
 * device or a pipe is an error (it has no whole to read). On failure *buf is NULL. */
dga_status dga_file_read_all(const char *path, char **buf, size_t *len);

#endif
