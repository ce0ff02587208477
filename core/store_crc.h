/* Checksums of a store directory's files (store.h), kept in manifest.json under "checksums":
 * {"tokens.npy": "1a2b3c4d", ...}, the CRC-32 of each file's bytes. The writer lists every
 * file it made but the manifest; the reader recomputes each one at open, so a flipped byte
 * anywhere in the arrays is an error naming the file instead of a silently different
 * training. Internal to the store (store.c). */
#ifndef DGA_STORE_CRC_H
#define DGA_STORE_CRC_H

#include <jansson.h>

#include "status.h"

/* *out: a new JSON object, file name -> CRC-32 as 8 hex digits, for every regular file of dir
 * except manifest.json, in name order. */
dga_status dga_store_checksums_make(const char *dir, json_t **out);

/* Recomputes the CRC-32 of every file listed in `sums` (manifest's "checksums") under dir.
 * mpath names the manifest in messages. A file named outside dir, a missing file or a
 * mismatch is DGA_ERR_FORMAT with a message saying to rebuild the store. */
dga_status dga_store_checksums_verify(const char *dir, const char *mpath, json_t *sums);

#endif
