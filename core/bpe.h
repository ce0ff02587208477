/* Byte-level BPE tokenizer (GPT-2 style), trained here, saved as a Hugging Face
 * tokenizer.json.
 *
 * Ids: 0..255 are the 256 bytes (id = byte value), 256..256+M-1 the M learned merges in rank
 * order (merge r makes id 256 + r), and the last id, 256 + M, is the special token
 * <|endoftext|>. So vocab_size = 257 + M.
 *
 * Text is first cut into chunks, as GPT-2's regex does
 *   's 't 're 've 'm 'll 'd | ' '?letters | ' '?digits | ' '?other+ | whitespace
 * (a run of whitespace followed by a non-space leaves its last character to the next chunk),
 * written by hand over UTF-8: ASCII classes exactly, and for other characters a table of the
 * Unicode ranges that are whitespace, numbers or punctuation/symbols in practice (curly
 * quotes, dashes, NBSP, math, CJK punctuation, emoji; see bpe_unicode.c); any other code
 * point, and any byte that is not valid UTF-8, counts as a letter. On the project's corpus
 * the encodings equal those of Hugging Face's tokenizers (tokenizers.js) loading our
 * tokenizer.json; scripts whose marks are not in the table may split differently there.
 * Merges never cross chunk boundaries.
 *
 * Encoding is exact for ANY byte string (NUL and invalid UTF-8 included): decode(encode(s))
 * == s. The literal text "<|endoftext|>" inside a document is encoded as ordinary bytes; only
 * dga_bpe_eot() is the special token (so documents cannot inject a separator).
 *
 * A dga_bpe caches chunk encodings, so encoding mutates it: use one tokenizer per thread
 * for encoding (decode and the accessors are read-only). */
#ifndef DGA_BPE_H
#define DGA_BPE_H

#include <stddef.h>
#include <stdint.h>

#include "status.h"

#define DGA_BPE_EOT_TEXT "<|endoftext|>"
#define DGA_BPE_MAX_VOCAB (1 << 24)

typedef struct dga_bpe dga_bpe;

/* ---- training ---- */
typedef struct dga_bpe_trainer dga_bpe_trainer;

dga_status dga_bpe_trainer_new(dga_bpe_trainer **out);
/* Adds one document (any bytes): cut into chunks, chunk counts accumulated. */
dga_status dga_bpe_trainer_add(dga_bpe_trainer *tr, const char *text, size_t len);
/* Learns up to vocab_size - 257 merges (257 <= vocab_size <= DGA_BPE_MAX_VOCAB), most
 * frequent pair first (pairs counted over the chunk multiset); ties go to the pair with the
 * smaller (left id, right id). Stops early when no adjacent pair is left, so a tiny corpus
 * may give a smaller vocabulary (check dga_bpe_vocab_size). No text added at all (an empty
 * corpus) is DGA_ERR_INVALID. Free the trainer afterwards. */
dga_status dga_bpe_trainer_finish(dga_bpe_trainer *tr, int vocab_size, dga_bpe **out);
void dga_bpe_trainer_free(dga_bpe_trainer *tr);   /* NULL is fine */

/* Convenience: train on n texts in memory (lens[i] bytes each). */
dga_status dga_bpe_train(const char *const *texts, const size_t *lens, size_t n, int vocab_size,
                         dga_bpe **out);

/* ---- encoding / decoding ---- */
/* Encodes bytes[0..len) into out (capacity cap); *n gets the count. cap >= len always
 * suffices (each token covers at least one byte). DGA_ERR_INVALID if cap is too small. */
dga_status dga_bpe_encode(dga_bpe *tok, const char *bytes, size_t len, int32_t *out, size_t cap,
                          size_t *n);

/* A growable id buffer; start from {0} and free with dga_bpe_ids_free. */
typedef struct {
    int32_t *ids;
    size_t   n, cap;
} dga_bpe_ids;
/* Appends the encoding of bytes[0..len) to buf. */
dga_status dga_bpe_encode_append(dga_bpe *tok, const char *bytes, size_t len, dga_bpe_ids *buf);
/* Appends one id (e.g. dga_bpe_eot(tok)). */
dga_status dga_bpe_ids_push(dga_bpe_ids *buf, int32_t id);
void dga_bpe_ids_free(dga_bpe_ids *buf);

/* Decodes ids into a new malloc'ed buffer *out of *len bytes (NUL-terminated as a
 * convenience; free() it). The EOT id decodes to "<|endoftext|>". An id outside
 * [0, vocab_size) is DGA_ERR_INVALID naming the id and its position. */
dga_status dga_bpe_decode(const dga_bpe *tok, const int32_t *ids, size_t n, char **out,
                          size_t *len);

/* The bytes of one token (not NUL-terminated; valid while tok lives). */
dga_status dga_bpe_token_bytes(const dga_bpe *tok, int32_t id, const char **bytes, size_t *len);

int32_t dga_bpe_eot(const dga_bpe *tok);          /* id of <|endoftext|> = vocab_size - 1 */
int     dga_bpe_vocab_size(const dga_bpe *tok);   /* 257 + number of merges */
int     dga_bpe_num_merges(const dga_bpe *tok);
/* Merge r (0-based rank) makes id 256 + r from ids *left and *right. */
dga_status dga_bpe_merge(const dga_bpe *tok, int r, int32_t *left, int32_t *right);

/* ---- files: Hugging Face tokenizer.json (model BPE, ByteLevel pre-tokenizer/decoder) ---- */
/* Written atomically (tmp file, fsync, rename). */
dga_status dga_bpe_save(const dga_bpe *tok, const char *path);
/* Loads and validates a tokenizer.json in the layout above (as dga_bpe_save writes it):
 * model.type "BPE", vocab ids 0..255 = the 256 byte tokens in GPT-2's byte-to-unicode
 * spelling, merge r = "left right" with vocab id 256 + r, <|endoftext|> the last id.
 * Anything else is DGA_ERR_FORMAT with a message naming the path and the field. */
dga_status dga_bpe_load(const char *path, dga_bpe **out);

void dga_bpe_free(dga_bpe *tok);   /* NULL is fine */

/* The chunking used by training and encoding: calls fn for each chunk of text in order.
 * Exposed for tests and tools. */
typedef void (*dga_bpe_chunk_fn)(const char *chunk, size_t len, void *ud);
void dga_bpe_split(const char *text, size_t len, dga_bpe_chunk_fn fn, void *ud);

#endif
