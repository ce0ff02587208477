/* Text embedders: text -> float32 vector of `dim` entries, L2-normalised.
 *
 * An embedder is a struct of function pointers, so a second one (a neural encoder, say) can
 * be added without touching the domain store or k-means. Embedders that learn corpus
 * statistics (like idf) have a two-pass life: fit_add() every text of the corpus, fit_end(),
 * then embed(); save()/load() put that state into a store directory so texts embedded later
 * (importance-sampling sets) land in the same space.
 *
 * Built-in "hash384" (deterministic, no model files):
 *   words    maximal runs of bytes that are ASCII letters, ASCII digits or any byte >= 0x80
 *            (so UTF-8 letters stay inside words); ASCII letters are lower-cased. Separators:
 *            every other ASCII byte, and the UTF-8 encodings of U+00A0..U+00BF (C2 A0..BF:
 *            no-break space, Latin-1 punctuation) and U+2000..U+207F (E2 80 xx, E2 81 xx:
 *            curly quotes, dashes, ellipsis), so that a quoted word is the same word.
 *   features each word (unigram) and each pair of consecutive words (bigram, hashed as the
 *            bytes "w1 w2" with one space).
 *   hash     h = fmix64(FNV-1a-64(feature bytes)) (FNV offset 0xcbf29ce484222325, prime
 *            0x100000001b3; fmix64 is MurmurHash3's 64-bit finaliser, which spreads FNV's
 *            weak low bits), then bit 0 set to 0 for a unigram and 1 for a bigram.
 *            bucket = h >> 44 (2^20 buckets, the idf table index);
 *            dimension = (h & 0xffffffff) % 384; sign = +1 if bit 32 of h is 0, else -1.
 *   idf      idf[b] = ln((1 + N) / (1 + df[b])) + 1 over the N fitted texts (df counts texts
 *            containing a feature of bucket b); idf = 1 everywhere before any fit.
 *   weight   (1 + ln tf) * sqrt(idf[bucket]) * (0.5 for a bigram), tf = count of the
 *            feature in the text.
 *            Why sqrt(idf) and half-weight bigrams rather than the textbook tf-idf: signed
 *            hashing into only 384 dimensions adds collision noise in proportion to the
 *            weight of features no other text shares, and those are exactly the high-idf
 *            ones (most bigrams). Measured on the real corpus (0.5 MB per source, 129-token
 *            sequences, spherical k-means k = 64, mean of 3 seeds), source purity of the
 *            clusters: plain (1+ln tf)*idf with full bigrams 0.31; unigrams only 0.37;
 *            sqrt(idf) 0.49; sqrt(idf) with bigrams at 0.5 0.53 (0.68 with 1024 dims).
 *   output   sum of sign * weight per dimension, then L2-normalised; a text with no words
 *            embeds to the zero vector.
 *   state    idf.npy (float32 [2^20]) and the fitted text count in idf_meta.npy.
 * "hash1024" is the same with 1024 dimensions (purer clusters, 2.7x the k-means cost and
 * embedding memory).
 *
 * "gpt:CKPT" (embed_gpt.c): the mean over positions of a trained dgalua model's final
 * layernorm output, L2-normalised; dim = the model's width; the tokenizer is tokenizer.json
 * beside CKPT. Nothing to fit; save()/load() copy the model and tokenizer into a store, whose
 * manifest then names it "gpt". */
#ifndef DGA_EMBED_H
#define DGA_EMBED_H

#include <stddef.h>
#include <stdint.h>

#include "status.h"

typedef struct dga_embedder dga_embedder;
struct dga_embedder {
    const char *name;
    int         dim;
    void       *state;
    /* Fitting (NULL when the embedder has nothing to fit). */
    dga_status (*fit_add)(dga_embedder *e, const char *text, size_t len);
    dga_status (*fit_end)(dga_embedder *e);
    /* out: dim floats. Thread-safe (reads state only). */
    dga_status (*embed)(const dga_embedder *e, const char *text, size_t len, float *out);
    /* Persist / restore fitted state into / from directory `dir` (NULL when stateless). */
    dga_status (*save)(const dga_embedder *e, const char *dir);
    dga_status (*load)(dga_embedder *e, const char *dir);
    void (*destroy)(dga_embedder *e);
};

#define DGA_HASH_BUCKETS (1u << 20)
#define DGA_HASH_DIM     384
#define DGA_HASH_BIGRAM_WEIGHT 0.5

/* A new embedder by name ("hash384", "hash1024", "gpt:CKPT"; "gpt" alone makes an empty one
 * for load()); an error naming the known ones otherwise. */
dga_status dga_embedder_new(const char *name, dga_embedder **out);
/* The model embedder of a checkpoint (NULL: empty, to be filled by load()). */
dga_status dga_embedder_gpt_new(const char *checkpoint, dga_embedder **out);
void       dga_embedder_free(dga_embedder *e);   /* NULL is fine */

/* Convenience over the function pointers. */
dga_status dga_embedder_fit(dga_embedder *e, int64_t n, const char *const *texts,
                            const size_t *lens);
dga_status dga_embedder_embed_many(const dga_embedder *e, int64_t n, const char *const *texts,
                                   const size_t *lens, float *out /* n x dim */);

/* hash embedder specifics (for tests and inspection). */
/* fmix64(FNV-1a-64(bytes)) of a feature's bytes (ASCII lower-cased), before bit 0 is set. */
uint64_t     dga_hash_feature(const char *bytes, size_t len);
const float *dga_hash384_idf(const dga_embedder *e);     /* 2^20 entries */
int64_t      dga_hash384_fitted_texts(const dga_embedder *e);

#endif
