/* Leftovers of a killed writer. Every writer of the core puts its bytes under a name derived
 * from the output and its own PID (<out>.tmp.<pid> for an atomic file or a store being
 * built, <out>.old.<pid> for the store it replaces, <out>.tokenizer.<pid>.json for the
 * tokenizer a store build trains), and renames or removes them when it ends. A writer that
 * is killed leaves them behind, and a whole old store can be gigabytes.
 *
 * dga_stale_remove(out) removes the leftovers of `out` whose writer is gone: only names of
 * exactly those forms, only when kill(pid, 0) fails with ESRCH (a live writer, or a PID of
 * another user, is left alone), never the caller's own. A directory is removed only if it
 * holds nothing but regular files (what the store writer makes). The writers call it when
 * they start on an output (dga_store_build, dga_store_builder_write, dga_shard_write,
 * dga_bpe_save). */
#ifndef DGA_STALE_H
#define DGA_STALE_H

#include "status.h"

/* *removed (may be NULL) gets the number of leftovers removed. Failing to remove one is not
 * an error (the next start tries again); only an output path that is empty or too long is. */
dga_status dga_stale_remove(const char *out, int *removed);

#endif
