/* Token shards in the llm.c / nanoGPT layout: a header of 256 little-endian int32, then the
 * tokens.
 *   header[0] = 20240520 (magic)
 *   header[1] = version: 1 = uint16 tokens (vocab <= 65536), 2 = uint32 tokens
 *   header[2] = number of tokens
 *   header[3] = vocabulary size (our addition; 0 = unknown; llm.c ignores it)
 *   the rest  = 0
 * Readers check every field against the file: magic, version, token count against the file
 * size, and (when header[3] is set) every token against the vocabulary. */
#ifndef DGA_SHARD_H
#define DGA_SHARD_H

#include <stddef.h>
#include <stdint.h>

#include "status.h"

#define DGA_SHARD_MAGIC 20240520
#define DGA_SHARD_HEADER_INTS 256
#define DGA_SHARD_HEADER_BYTES (DGA_SHARD_HEADER_INTS * 4)
#define DGA_SHARD_MAX_TOKENS 2147483647u   /* the count is an int32 in the header */

typedef struct {
    int    version;       /* 1 (uint16) or 2 (uint32) */
    size_t n_tokens;
    int    vocab_size;    /* 0 when the file does not say */
    int    token_bytes;   /* 2 or 4 */
    int32_t max_id;       /* largest token (dga_shard_read); -1 when empty or not read */
} dga_shard_info;

/* Writes tokens atomically (tmp file, fsync, rename). Every token must be in
 * [0, vocab_size); 1 <= vocab_size; version 1 when vocab_size <= 65536, else version 2. */
dga_status dga_shard_write(const char *path, const int32_t *tokens, size_t n, int vocab_size);

/* Reads a whole shard into a new malloc'ed array *tokens (free() it; may be NULL when the
 * shard is empty); info may be NULL. */
dga_status dga_shard_read(const char *path, int32_t **tokens, size_t *n, dga_shard_info *info);

/* Reads and validates only the header (and the file size). */
dga_status dga_shard_read_info(const char *path, dga_shard_info *info);

#endif
