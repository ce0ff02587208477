/* One owner per directory: an exclusive advisory lock on a lock file.
 *
 * dga_lock_acquire opens (creating it if needed) the lock file, takes
 * flock(LOCK_EX | LOCK_NB) on it and writes the holder's pid into it. A second process (or a
 * second acquire in the same process: flock locks belong to open file descriptions) that asks
 * for the same file fails at once with DGA_ERR_IO, and the message names the holder's pid.
 * The kernel drops the lock when the holder's descriptor closes, so a killed holder leaves no
 * stale lock: the file stays, unlocked, and the next acquire takes it. The descriptor is
 * close-on-exec, so child programs (gnuplot) never inherit the lock. */
#ifndef DGA_LOCK_H
#define DGA_LOCK_H

#include "status.h"

typedef struct dga_lock dga_lock;

dga_status dga_lock_acquire(const char *path, dga_lock **out);

/* Releases the lock and frees it; NULL is a no-op. The lock file is left in place: removing
 * it would let a process that opened it just before hold a lock on a file nobody else sees. */
void dga_lock_release(dga_lock *lock);

const char *dga_lock_path(const dga_lock *lock);

#endif
