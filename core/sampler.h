/* Mixture sampler over k domains, and sparse basis histograms for distribution reweighting.
 *
 * A draw picks a domain i ~ Categorical(w) from a Vose alias table (O(1) per draw, built in
 * double whenever the weights change), then the next sequence of domain i in a seeded random
 * permutation without replacement. When the permutation runs out a new epoch starts with a
 * fresh permutation. The permutation of (domain d, epoch e) is a pure function of
 * (seed, d, e): permutations are created lazily on a domain's first draw (memory stays
 * O(k) for domains never drawn, O(total sequences) at most) and need not be stored in a
 * checkpoint; the state is cursors, counters, the weights and the generators.
 *
 * Token-limited regime: `budget[d]` (or one number for all) keeps only the first budget
 * sequences of domain d: available(d) = min(size(d), budget(d)).
 * Epoch cap E > 0: once a domain has completed E epochs it is "capped": removed from the
 * mixture, which is renormalised over the remaining domains (draws reject capped domains,
 * and the alias table is rebuilt once the rejected mass exceeds one half, so a draw stays
 * O(1) expected). Capping events are recorded in order (dga_sampler_capped).
 *
 * Indices are 0-based here; the Lua binding adds 1.
 *
 * draw_from (one domain, used for alignment probe batches) samples uniformly among the
 * available sequences of the domain, without replacement within a call when n fits, from a
 * second generator: probes do not advance the training permutations, the counters or the
 * caps (an alignment batch is a gradient probe, not training data). */
#ifndef DGA_SAMPLER_H
#define DGA_SAMPLER_H

#include <stddef.h>
#include <stdint.h>

#include "status.h"

typedef struct dga_sampler dga_sampler;

/* k >= 1 domains with sizes[d] >= 0 sequences (< 2^32). budget may be NULL (no limit);
 * budget[d] < 0 also means no limit. epoch_cap <= 0: no cap. At least one domain must have
 * an available sequence. Initial weights: the natural mixture (proportional to available
 * sequences). */
dga_status dga_sampler_create(int64_t k, const int64_t *sizes, const int64_t *budget,
                              int64_t epoch_cap, uint64_t seed, dga_sampler **out);
void       dga_sampler_free(dga_sampler *s);          /* NULL is fine */

int64_t    dga_sampler_k(const dga_sampler *s);
int64_t    dga_sampler_epoch_cap(const dga_sampler *s);
uint64_t   dga_sampler_seed(const dga_sampler *s);
const int64_t *dga_sampler_available(const dga_sampler *s);   /* k: min(size, budget) */

/* New mixture weights (n must equal k): finite, >= 0, positive sum; they need not sum to 1
 * (normalised here). Positive weight on a domain with no available sequence is an error;
 * so is a mixture whose whole mass sits on capped domains ("every domain reached its epoch
 * cap" when all are capped). On error the previous weights stay in force. */
dga_status dga_sampler_set_weights(dga_sampler *s, const float *w, int64_t n);
dga_status dga_sampler_set_weights_f64(dga_sampler *s, const double *w, int64_t n);

/* The mixture currently sampled (k doubles, sums to 1): the weights last set, with capped
 * domains zeroed and renormalised. All zeros when every weighted domain is capped. */
void       dga_sampler_weights(const dga_sampler *s, double *out);

/* n training draws: domains[i] and indices[i] (0-based sequence index inside the domain).
 * Advances permutations and counters; may cap domains. Fails with "every domain reached its
 * epoch cap" when no weighted uncapped domain is left (outputs before that point are set). */
dga_status dga_sampler_draw(dga_sampler *s, int64_t n, int32_t *domains, int32_t *indices);

/* n probe indices from one domain (see the top comment). Error if the domain is out of
 * range or has no available sequence. */
dga_status dga_sampler_draw_from(dga_sampler *s, int64_t domain, int64_t n, int32_t *indices);

const int64_t *dga_sampler_drawn(const dga_sampler *s);   /* k: training sequences drawn */
const int64_t *dga_sampler_epochs(const dga_sampler *s);  /* k: epochs started (0 = never drawn) */
/* Domains capped so far, in the order they were capped (*n of them). */
const int32_t *dga_sampler_capped(const dga_sampler *s, int64_t *n);
int        dga_sampler_is_capped(const dga_sampler *s, int64_t domain);

/* Complete state as a self-describing byte buffer (malloc'd; free() it): the generators,
 * weights, cursors, counters, caps. Restoring into a sampler created with the same sizes,
 * budget, cap and seed gives the same next draws; anything else is DGA_ERR_FORMAT /
 * DGA_ERR_INVALID with a message. On error the sampler is unchanged. */
dga_status dga_sampler_state_save(const dga_sampler *s, void **buf, size_t *len);
/* The same into caller memory: size first, then write exactly that many bytes. */
size_t     dga_sampler_state_size(const dga_sampler *s);
void       dga_sampler_state_write(const dga_sampler *s, void *buf);
dga_status dga_sampler_state_load(dga_sampler *s, const void *buf, size_t len);

/* ---- basis histograms (distribution reweighting) ----
 * P is k x N: column j is the histogram p_j of basis set j over the k leaf domains. Stored
 * by columns, non-zeros only; each column is normalised to sum to 1 (counts are fine as
 * input). The training mixture of a distribution alpha over the N bases is P alpha. */
typedef struct dga_basis dga_basis;

/* From N dense columns of k floats each (columns[j][i]). Entries must be finite and >= 0,
 * each column must have a positive sum. */
dga_status dga_basis_create(int64_t k, int64_t n, const float *const *columns, dga_basis **out);
void       dga_basis_free(dga_basis *P);
int64_t    dga_basis_k(const dga_basis *P);
int64_t    dga_basis_n(const dga_basis *P);
int64_t    dga_basis_nnz(const dga_basis *P);
/* Column j densely into out (k floats). */
dga_status dga_basis_column(const dga_basis *P, int64_t j, float *out);

/* out_weights (k) = P alpha_dist; alpha_dist (n entries) finite, >= 0, positive sum
 * (normalised here), otherwise DGA_ERR_INVALID. */
dga_status dga_mix_dist(const dga_basis *P, const float *alpha_dist, int64_t n,
                        float *out_weights);

/* n draws from mix(p_j): domains from column j (alias table over its non-zeros, built on
 * first use), sequence indices as dga_sampler_draw_from does, all from the sampler's probe
 * generator (so checkpointing the sampler covers it). */
dga_status dga_basis_draw(dga_basis *P, int64_t j, dga_sampler *s, int64_t n, int32_t *domains,
                          int32_t *indices);

#endif
