/* One owner per directory or output: an exclusive advisory lock (flock).
 *
 * dga_lock_acquire(path) takes flock(LOCK_EX | LOCK_NB) on one of two things:
 *
 *  - path names an existing directory: the directory itself. Nothing is created, so nothing
 *    can look stale after a run, and no file a user deletes can let a second writer in (only
 *    removing the directory itself would, and that removes what it protects). Use this for a
 *    directory's owner (a run directory, a sweep's output).
 *  - otherwise, a lock file at path, created if needed, holding the holder's pid. It is removed
 *    when the lock is released, so a clean run leaves nothing behind; an acquirer that finds
 *    after locking that path no longer names the file it locked (released and removed in the
 *    meantime, or deleted by hand) starts over on the new one. Use this for an output that
 *    does not exist yet (a shard, a store being built: "<out>.lock").
 *
 * A second process (or a second acquire in the same process: flock locks belong to open file
 * descriptions) fails at once with DGA_ERR_IO, and the message names the holder's pid (for a
 * directory, as the kernel reports it in /proc/locks). The kernel drops the lock when the
 * holder's descriptor closes, so a killed holder never blocks the next one: a lock file it
 * leaves behind is taken over and removed by the next holder. The descriptor is
 * close-on-exec, so child programs (gnuplot) never inherit the lock. */
#ifndef DGA_LOCK_H
#define DGA_LOCK_H

#include "status.h"

typedef struct dga_lock dga_lock;

dga_status dga_lock_acquire(const char *path, dga_lock **out);

/* DGA_OK while path still names what is locked; DGA_ERR_IO, saying so, once a lock file was
 * deleted or replaced (by hand) while held: another process may then hold a lock of its own
 * on the new file. A long-running holder checks it now and then. */
dga_status dga_lock_check(const dga_lock *lock);

/* Releases the lock and frees it; NULL is a no-op. A lock file is removed first (while still
 * locked, and only if path still names it), then closed. */
void dga_lock_release(dga_lock *lock);

const char *dga_lock_path(const dga_lock *lock);

#endif
