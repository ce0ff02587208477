/* Internals shared by bpe.c (training, encoding) and bpe_json.c (tokenizer.json I/O).
 * Not part of the public API. */
#ifndef DGA_BPE_INTERNAL_H
#define DGA_BPE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "bpe.h"

/* Open-addressing map from uint64 keys (never UINT64_MAX) to uint32 values. */
typedef struct {
    uint64_t *keys;
    uint32_t *vals;
    size_t    cap, n;
} dga_u64map;

dga_status dga_u64map_init(dga_u64map *m, size_t expect);
dga_status dga_u64map_put(dga_u64map *m, uint64_t key, uint32_t val);
int        dga_u64map_get(const dga_u64map *m, uint64_t key, uint32_t *val);
void       dga_u64map_free(dga_u64map *m);

/* Character classes of the chunker (GPT-2's regex: \s, \p{L}, \p{N}, the rest). */
enum { DGA_BPE_SPACE, DGA_BPE_LETTER, DGA_BPE_DIGIT, DGA_BPE_OTHER };

/* Class of the character starting at s[0] (s[0] >= 0x80, n >= 1 bytes left); *len gets its
 * length in bytes (1 for a byte that does not start valid UTF-8: such bytes are letters). */
int dga_bpe_nonascii_class(const unsigned char *s, size_t n, size_t *len);

/* A tokenizer from its merge list (takes ownership of left and right, even on failure). */
dga_status dga_bpe_from_merges(int32_t *left, int32_t *right, int n_merges, dga_bpe **out);

#endif
