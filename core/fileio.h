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
#include <stdio.h>

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

/* Opens an input for reading and returns its descriptor in *fd (close-on-exec, blocking).
 * Anything but a regular file (a FIFO, a directory, a device, a socket) is refused with a
 * message naming the path and what it is: the open itself is non-blocking, so a FIFO nobody
 * writes to cannot hang the caller before the check. Every reader of the core opens its
 * inputs here. *fd is -1 on failure. */
dga_status dga_open_regular(const char *path, int *fd);

/* Like dga_open_regular, as a stdio stream ("rb"). *fp is NULL on failure. */
dga_status dga_fopen_regular(const char *path, FILE **fp);

/* Whether two paths name the same file once links are followed (same device and inode);
 * a path that does not exist names no file. */
int dga_same_file(const char *a, const char *b);

/* Refuses an output that would destroy an input, before anything is written: `out` is the
 * input itself once links are followed (same device and inode), an existing .jsonl / .txt
 * document inside the input when the input is a (corpus) directory, or a directory holding
 * the input (a store directory is replaced whole). `what` names the input in the message
 * (e.g. "--corpus"). DGA_ERR_INVALID naming both paths; DGA_OK otherwise, also when either
 * path does not exist yet. */
dga_status dga_output_check(const char *out, const char *in, const char *what);

/* Reads a whole regular file into malloc'd memory: *buf holds *len bytes followed by a NUL
 * (not counted in *len), so text can be parsed in place. Free with free(). A directory, a
 * device or a pipe is an error (it has no whole to read). On failure *buf is NULL. */
dga_status dga_file_read_all(const char *path, char **buf, size_t *len);

#endif
