/* A seedable random number generator with a state that can be saved and restored.
 *
 * xoshiro256** (Blackman & Vigna, 2018), seeded through splitmix64. Each consumer (weight
 * init, sampler, generation) owns its own dga_rng, so drawing from one never shifts another,
 * and a checkpoint stores each state as four uint64 words for a bit-identical resume. */
#ifndef DGA_RNG_H
#define DGA_RNG_H

#include <stdint.h>

typedef struct {
    uint64_t s[4];
} dga_rng;

void     dga_rng_seed(dga_rng *rng, uint64_t seed);
uint64_t dga_rng_next(dga_rng *rng);                  /* 64 uniform random bits */
double   dga_rng_uniform(dga_rng *rng);               /* [0, 1), 53-bit resolution */
uint64_t dga_rng_below(dga_rng *rng, uint64_t n);     /* uniform in [0, n), unbiased; n > 0 */
double   dga_rng_normal(dga_rng *rng);                /* standard normal */
void     dga_rng_shuffle_u32(dga_rng *rng, uint32_t *items, uint64_t n); /* Fisher-Yates */

#endif
