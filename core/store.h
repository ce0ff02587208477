/* The domain store: a tokenised corpus cut into fixed-length sequences, clustered by a
 * hierarchical k-means over sequence embeddings, stored ordered by leaf domain.
 *
 * One directory (every array a NumPy .npy file, so numpy reads the store as it is):
 *   manifest.json           format "dgalua-store", version 1, seq_len, vocab_size, eot,
 *                           levels (requested children per level), k (domains per level),
 *                           spherical, embedder {name, dim}, tokenizer file, counts, sources
 *   tokens.npy              [n_seq, seq_len] '<u2' (vocab <= 65536) or '<i4': the sequences,
 *                           ordered by leaf (within a leaf, in corpus order)
 *   leaf_offsets.npy        [k_leaf + 1] '<u8': leaf j = rows offsets[j] .. offsets[j+1]-1
 *   level<L>_ranges.npy     [k_L + 1] '<u8' for L = 1..levels: domain d of level L covers
 *                           leaves ranges[d] .. ranges[d+1]-1 (level 1 is the coarsest; the
 *                           last level is the leaves, ranges = 0..k_leaf)
 *   level<L>_centroids.npy  [k_L, dim] '<f4' (L2-normalised when spherical)
 *   seq_doc.npy             [n_seq] '<i8': 0-based corpus document holding the sequence's
 *                           first token (documents are numbered in reading order)
 *   seq_source.npy          [n_seq] '<i4': index into manifest "sources" (the corpus
 *                           subdirectory the sequence came from)
 *   seq_index.npy           [n_seq] '<i8': position of the sequence in the corpus stream
 *   idf.npy, idf_meta.npy   the embedder's fitted state (see embed.h)
 *   tokenizer.json          the tokenizer the tokens were made with (when given)
 * Document boundaries: documents are joined with the <|endoftext|> token (id `eot`), so an
 * EOT inside a sequence is a boundary; seq_doc names the document a sequence starts in.
 * Each source (corpus subdirectory) is its own token stream: a sequence never mixes sources,
 * and the incomplete tail of each source's stream is dropped.
 *
 * Building writes <dir>.tmp.<pid> and renames it over <dir> only when everything succeeded;
 * an existing directory is replaced only if it is a store (has manifest.json) or is empty.
 * Opening maps the arrays read-only and checks every shape, dtype and offset table against
 * the manifest, so a truncated or inconsistent store is a clear error at open time.
 *
 * C API levels, domains and indices are 0-based (the Lua API is 1-based). */
#ifndef DGA_STORE_H
#define DGA_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "embed.h"
#include "jsonl.h"
#include "kmeans.h"
#include "status.h"

#define DGA_STORE_MAX_LEVELS DGA_HKMEANS_MAX_LEVELS

/* ------------------------------------------------------------------ building */

typedef struct dga_store_builder dga_store_builder;

/* Decodes token ids to text (malloc'ed, *len bytes; the builder frees it). Never given the
 * EOT id: the builder decodes the pieces between EOTs and joins them with "\n\n". */
typedef dga_status (*dga_store_decode_fn)(void *ud, const int32_t *ids, size_t n, char **text,
                                          size_t *len);

typedef struct {
    int         nlevels;
    int         levels[DGA_STORE_MAX_LEVELS];   /* children per level, coarsest first */
    int         spherical;       /* 1 (default in the CLI): cosine + normalised centroids */
    int         iters;           /* k-means Lloyd rounds per clustering (0: 25) */
    uint64_t    seed;
    const char *embedder;        /* NULL: "hash384" */
    const char *tokenizer_path;  /* copied into the store as tokenizer.json (may be NULL) */
    int         save_embeddings; /* 1: also write embeddings.npy, float32 [sequences, dim] in
                                    store row order (4 * dim bytes per sequence) */
    dga_store_decode_fn decode;
    void       *decode_ud;
    int         verbose;         /* progress on stderr */
} dga_store_write_opts;

dga_status dga_store_builder_new(int seq_len, int vocab_size, int32_t eot,
                                 dga_store_builder **out);
void dga_store_builder_free(dga_store_builder *b);   /* NULL is fine */
/* Starts a new source (token stream); the previous source's incomplete tail is dropped. */
dga_status dga_store_builder_add_source(dga_store_builder *b, const char *name);
/* Appends a document (then an EOT) to the current source's stream. Ids must be in
 * [0, vocab_size). */
dga_status dga_store_builder_add_doc(dga_store_builder *b, const int32_t *ids, size_t n);
int64_t    dga_store_builder_sequences(const dga_store_builder *b);
int64_t    dga_store_builder_documents(const dga_store_builder *b);
/* Embeds, clusters and writes the store to `dir` (atomically replacing an existing store;
 * trailing slashes of `dir` are ignored: "store/" is the store "store"). */
dga_status dga_store_builder_write(dga_store_builder *b, const char *dir,
                                   const dga_store_write_opts *opts);

/* A document filter for one source: only these documents enter the store (0-based indices in
 * the reader's order, the order dga_text_next delivers them, strictly ascending). */
typedef struct {
    const char    *source;       /* a corpus subdirectory name */
    const int64_t *docs;
    size_t         n;
} dga_store_doc_filter;

/* The whole pipeline from a corpus directory (see store_build.c). */
typedef struct {
    const char *corpus;          /* a directory: each subdirectory is one source; a
                                    directory without subdirectories is one source */
    const char *out;
    int         seq_len;         /* 0: 129 */
    int         nlevels;
    int         levels[DGA_STORE_MAX_LEVELS];
    const char *tokenizer;       /* tokenizer.json to use; NULL: train one */
    int         vocab;           /* when training (0: 8192) */
    double      max_mb;          /* > 0: read at most this many MB of text per source */
    double      train_mb;        /* > 0: train the tokenizer on at most this many MB per source
                                    (0: on everything read) */
    int         spherical;
    int         iters;
    uint64_t    seed;
    const char *embedder;
    int         save_embeddings; /* as in dga_store_write_opts */
    int         verbose;
    dga_text_stats *text_stats;  /* may be NULL; receives the reading counters summed over all
                                    sources (malformed lines skipped, first messages) */
    /* NULL: every source, every document (up to max_mb). Otherwise only the nfilter sources
     * named here are read, and of each only the listed documents (for the tokenizer too), so
     * held-out documents of a source never reach the store; max_mb then counts kept bytes.
     * A named source missing from the corpus, or an index past a source's last document, is
     * an error. */
    const dga_store_doc_filter *filter;
    int         nfilter;
} dga_store_build_opts;

dga_status dga_store_build(const dga_store_build_opts *opts);

/* ------------------------------------------------------------------ reading */

typedef struct dga_store dga_store;

dga_status dga_store_open(const char *dir, dga_store **out);
void       dga_store_close(dga_store *s);   /* NULL is fine */

const char *dga_store_dir(const dga_store *s);
int         dga_store_levels(const dga_store *s);
int64_t     dga_store_k(const dga_store *s, int level);           /* -1 if level is out of range */
int         dga_store_seq_len(const dga_store *s);
int         dga_store_vocab_size(const dga_store *s);
int32_t     dga_store_eot(const dga_store *s);
int         dga_store_spherical(const dga_store *s);
int64_t     dga_store_num_sequences(const dga_store *s);
int         dga_store_num_sources(const dga_store *s);
const char *dga_store_source_name(const dga_store *s, int i);
const dga_embedder *dga_store_embedder(const dga_store *s);
const float *dga_store_centroids(const dga_store *s, int level);   /* k x dim */
/* Sequence rows of domain d at `level`: [*first, *first + *count). */
dga_status dga_store_domain_rows(const dga_store *s, int level, int64_t d, int64_t *first,
                                 int64_t *count);
/* Leaf range of domain d at `level`: leaves [*first, *first + *count). */
dga_status dga_store_domain_leaves(const dga_store *s, int level, int64_t d, int64_t *first,
                                   int64_t *count);
/* Sequences per domain at `level` (k entries). */
dga_status dga_store_domain_sizes(const dga_store *s, int level, int64_t *sizes);

/* One sequence (seq_len ids) of domain d, index i within the domain. */
dga_status dga_store_sequence(const dga_store *s, int level, int64_t d, int64_t i, int32_t *out);
/* Row r of the token array (seq_len ids), and its metadata. */
dga_status dga_store_row(const dga_store *s, int64_t r, int32_t *out);
int64_t    dga_store_row_doc(const dga_store *s, int64_t r);
int32_t    dga_store_row_source(const dga_store *s, int64_t r);
/* Training batch: for b < B, sequence indices[b] of domain domains[b]; inputs[b] = its first
 * seq_len-1 ids, targets[b] = its last seq_len-1 ids (B x (seq_len-1) each). */
dga_status dga_store_gather(const dga_store *s, int level, const int32_t *domains,
                            const int32_t *indices, int64_t B, int32_t *inputs, int32_t *targets);
/* counts[d * nsources + j] = sequences of domain d (at `level`) from source j. */
dga_status dga_store_source_counts(const dga_store *s, int level, int64_t *counts);

/* Importance sampling: embeds texts with the store's embedder, assigns each to the nearest
 * centroid at `level` (cosine when spherical), and writes the normalised histogram (k
 * floats). Texts without any word are skipped; *used (may be NULL) gets the number counted.
 * An error if no text has a word. */
dga_status dga_store_histogram(const dga_store *s, int level, int64_t n,
                               const char *const *texts, const size_t *lens, float *hist,
                               int64_t *used);
/* The n best domains at `level` for a text (ids and scores, best first; score = cosine when
 * spherical, negative squared distance otherwise). *got = min(n, k). */
dga_status dga_store_nearest(const dga_store *s, int level, const char *text, size_t len,
                             int n, int64_t *ids, float *scores, int *got);

#endif
