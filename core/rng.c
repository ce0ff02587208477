#include "rng.h"

#include <math.h>

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

void dga_rng_seed(dga_rng *rng, uint64_t seed)
{
    uint64_t x = seed;
    for (int i = 0; i < 4; i++)
        rng->s[i] = splitmix64(&x);
}

uint64_t dga_rng_next(dga_rng *rng)
{
    uint64_t *s = rng->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

double dga_rng_uniform(dga_rng *rng) { return (double)(dga_rng_next(rng) >> 11) * 0x1.0p-53; }

uint64_t dga_rng_below(dga_rng *rng, uint64_t n)
{
    /* Rejection on the top of the range keeps every residue equally likely. */
    uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t x;
    do x = dga_rng_next(rng); while (x >= limit);
    return x % n;
}

double dga_rng_normal(dga_rng *rng)
{
    /* Box-Muller without a cached second value: the state then fully describes the stream. */
    double u1 = 1.0 - dga_rng_uniform(rng);   /* (0, 1]: log is finite */
    double u2 = dga_rng_uniform(rng);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

void dga_rng_shuffle_u32(dga_rng *rng, uint32_t *items, uint64_t n)
{
    for (uint64_t i = n; i > 1; i--) {
        uint64_t j = dga_rng_below(rng, i);
        uint32_t t = items[i - 1];
        items[i - 1] = items[j];
        items[j] = t;
    }
}
