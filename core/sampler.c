#include "sampler.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "rng.h"

enum { F_CAPPED = 1, F_EXCLUDED = 2 };   /* EXCLUDED: capped when the alias table was built */

struct dga_sampler {
    int64_t   k, cap;
    uint64_t  seed;
    dga_rng   rng;        /* training draws */
    dga_rng   probe;      /* draw_from / basis draws */
    int64_t  *avail;      /* min(size, budget) */
    double   *w;          /* weights last set, normalised */
    uint8_t  *flags;
    double   *q;          /* probabilities the alias table was built from */
    double   *prob;       /* alias table */
    int32_t  *alias;
    int32_t  *work;       /* 2k scratch for building */
    double    rejected;   /* q-mass of domains capped since the last build */
    int       table_empty;
    uint32_t **perm;      /* per domain, lazily: the permutation of the current epoch */
    int64_t  *cursor, *drawn, *epochs;
    int32_t  *capped;
    int64_t   n_capped;
};

/* ---- alias tables (Vose) ---- */

/* q: n >= 1 probabilities summing to 1 (some may be 0). Zero-probability entries can never be
 * returned: rounding leftovers with q = 0 point to the largest entry. */
static void alias_build(const double *q, int64_t n, double *prob, int32_t *alias, int32_t *work)
{
    int32_t *small = work, *large = work + n;
    int64_t ns = 0, nl = 0, best = 0;
    for (int64_t i = 0; i < n; i++) {
        prob[i] = q[i] * (double)n;
        alias[i] = (int32_t)i;
        if (q[i] > q[best]) best = i;
        if (prob[i] < 1.0) small[ns++] = (int32_t)i;
        else large[nl++] = (int32_t)i;
    }
    while (ns > 0 && nl > 0) {
        int32_t l = small[--ns], g = large[--nl];
        alias[l] = g;
        prob[g] = (prob[g] + prob[l]) - 1.0;
        if (prob[g] < 1.0) small[ns++] = g;
        else large[nl++] = g;
    }
    while (nl > 0) {
        int32_t g = large[--nl];
        prob[g] = 1.0;
        alias[g] = g;
    }
    while (ns > 0) {
        int32_t l = small[--ns];
        if (q[l] > 0) { prob[l] = 1.0; alias[l] = l; }
        else { prob[l] = 0.0; alias[l] = (int32_t)best; }
    }
}

static inline int64_t alias_draw(const double *prob, const int32_t *alias, int64_t n, dga_rng *r)
{
    int64_t i = (int64_t)dga_rng_below(r, (uint64_t)n);
    return dga_rng_uniform(r) < prob[i] ? i : alias[i];
}

/* ---- sampler ---- */

void dga_sampler_free(dga_sampler *s)
{
    if (!s) return;
    if (s->perm)
        for (int64_t d = 0; d < s->k; d++) free(s->perm[d]);
    free(s->perm);
    free(s->avail); free(s->w); free(s->flags); free(s->q); free(s->prob); free(s->alias);
    free(s->work); free(s->cursor); free(s->drawn); free(s->epochs); free(s->capped);
    free(s);
}

/* Builds the alias table from w restricted to uncapped domains. */
static void rebuild(dga_sampler *s)
{
    double live = 0;
    for (int64_t d = 0; d < s->k; d++) {
        if (s->flags[d] & F_CAPPED) s->flags[d] |= F_EXCLUDED;
        else { s->flags[d] &= (uint8_t)~F_EXCLUDED; live += s->w[d]; }
    }
    s->rejected = 0;
    s->table_empty = !(live > 0);
    if (s->table_empty) return;
    for (int64_t d = 0; d < s->k; d++)
        s->q[d] = (s->flags[d] & F_EXCLUDED) ? 0.0 : s->w[d] / live;
    alias_build(s->q, s->k, s->prob, s->alias, s->work);
}

dga_status dga_sampler_create(int64_t k, const int64_t *sizes, const int64_t *budget,
                              int64_t epoch_cap, uint64_t seed, dga_sampler **out)
{
    *out = NULL;
    if (k < 1 || k > INT32_MAX)
        return dga_fail(DGA_ERR_INVALID, "sampler: number of domains k = %lld, expected 1 <= k < 2^31",
                        (long long)k);
    if (!sizes) return dga_fail(DGA_ERR_INVALID, "sampler: sizes is NULL");
    int64_t total = 0;
    for (int64_t d = 0; d < k; d++) {
        if (sizes[d] < 0 || sizes[d] > (int64_t)UINT32_MAX)
            return dga_fail(DGA_ERR_INVALID,
                            "sampler: size of domain #%lld = %lld, expected 0 <= size < 2^32",
                            (long long)d + 1, (long long)sizes[d]);
        int64_t a = sizes[d];
        if (budget && budget[d] >= 0 && budget[d] < a) a = budget[d];
        total += a;
    }
    if (total == 0)
        return dga_fail(DGA_ERR_INVALID, "sampler: every domain is empty (no available sequence in %lld domains)",
                        (long long)k);

    dga_sampler *s = calloc(1, sizeof *s);
    if (!s) return dga_fail(DGA_ERR_NOMEM, "sampler: out of memory");
    size_t n = (size_t)k;
    s->k = k;
    s->cap = epoch_cap > 0 ? epoch_cap : 0;
    s->seed = seed;
    s->avail = malloc(n * sizeof *s->avail);
    s->w = malloc(n * sizeof *s->w);
    s->flags = calloc(n, 1);
    s->q = malloc(n * sizeof *s->q);
    s->prob = malloc(n * sizeof *s->prob);
    s->alias = malloc(n * sizeof *s->alias);
    s->work = malloc(2 * n * sizeof *s->work);
    s->perm = calloc(n, sizeof *s->perm);
    s->cursor = calloc(n, sizeof *s->cursor);
    s->drawn = calloc(n, sizeof *s->drawn);
    s->epochs = calloc(n, sizeof *s->epochs);
    s->capped = malloc(n * sizeof *s->capped);
    if (!s->avail || !s->w || !s->flags || !s->q || !s->prob || !s->alias || !s->work ||
        !s->perm || !s->cursor || !s->drawn || !s->epochs || !s->capped) {
        dga_sampler_free(s);
        return dga_fail(DGA_ERR_NOMEM, "sampler: out of memory for %lld domains", (long long)k);
    }
    for (int64_t d = 0; d < k; d++) {
        int64_t a = sizes[d];
        if (budget && budget[d] >= 0 && budget[d] < a) a = budget[d];
        s->avail[d] = a;
        s->w[d] = (double)a / (double)total;
    }
    /* Two independent streams from one seed: the probe stream is seeded from a derived value
     * so probes never shift training draws. */
    dga_rng_seed(&s->rng, seed);
    dga_rng_seed(&s->probe, seed ^ 0x70726f6265ULL /* "probe" */);
    rebuild(s);
    *out = s;
    return DGA_OK;
}

int64_t dga_sampler_k(const dga_sampler *s) { return s->k; }
int64_t dga_sampler_epoch_cap(const dga_sampler *s) { return s->cap; }
uint64_t dga_sampler_seed(const dga_sampler *s) { return s->seed; }
const int64_t *dga_sampler_available(const dga_sampler *s) { return s->avail; }
const int64_t *dga_sampler_drawn(const dga_sampler *s) { return s->drawn; }
const int64_t *dga_sampler_epochs(const dga_sampler *s) { return s->epochs; }

const int32_t *dga_sampler_capped(const dga_sampler *s, int64_t *n)
{
    *n = s->n_capped;
    return s->capped;
}

int dga_sampler_is_capped(const dga_sampler *s, int64_t d)
{
    return d >= 0 && d < s->k && (s->flags[d] & F_CAPPED);
}

static dga_status all_capped_error(const dga_sampler *s)
{
    int64_t open = 0;   /* domains with data left */
    for (int64_t d = 0; d < s->k; d++) open += s->avail[d] > 0 && !(s->flags[d] & F_CAPPED);
    if (open == 0)
        return dga_fail(DGA_ERR_INVALID, "sampler: every domain reached its epoch cap (%lld epochs)",
                        (long long)s->cap);
    return dga_fail(DGA_ERR_INVALID,
                    "sampler: every domain with positive weight reached its epoch cap (%lld epochs; "
                    "%lld of %lld domains capped)",
                    (long long)s->cap, (long long)s->n_capped, (long long)s->k);
}

/* get(i) reads weight i; validated fully before anything changes. */
static dga_status set_weights(dga_sampler *s, int64_t n, const float *wf, const double *wd)
{
    if (n != s->k)
        return dga_fail(DGA_ERR_INVALID, "sampler: weights have %lld entries, expected k = %lld",
                        (long long)n, (long long)s->k);
    if (!wf && !wd) return dga_fail(DGA_ERR_INVALID, "sampler: weights are NULL");
    double sum = 0, live = 0;
    for (int64_t d = 0; d < n; d++) {
        double x = wf ? (double)wf[d] : wd[d];
        if (!isfinite(x))
            return dga_fail(DGA_ERR_INVALID, "sampler: weight of domain #%lld is %g, expected a finite number",
                            (long long)d + 1, x);
        if (x < 0)
            return dga_fail(DGA_ERR_INVALID, "sampler: weight of domain #%lld is %g, expected >= 0",
                            (long long)d + 1, x);
        if (x > 0 && s->avail[d] == 0)
            return dga_fail(DGA_ERR_INVALID,
                            "sampler: weight %g on domain #%lld, which has no available sequence "
                            "(empty, or a budget of 0)",
                            x, (long long)d + 1);
        sum += x;
        if (!(s->flags[d] & F_CAPPED)) live += x;
    }
    if (!(sum > 0))
        return dga_fail(DGA_ERR_INVALID, "sampler: weights sum to zero (%lld entries), expected a positive sum",
                        (long long)n);
    if (!(live > 0)) return all_capped_error(s);
    for (int64_t d = 0; d < n; d++)
        s->w[d] = (wf ? (double)wf[d] : wd[d]) / sum;
    rebuild(s);
    return DGA_OK;
}

dga_status dga_sampler_set_weights(dga_sampler *s, const float *w, int64_t n)
{
    return set_weights(s, n, w, NULL);
}

dga_status dga_sampler_set_weights_f64(dga_sampler *s, const double *w, int64_t n)
{
    return set_weights(s, n, NULL, w);
}

void dga_sampler_weights(const dga_sampler *s, double *out)
{
    double live = 0;
    for (int64_t d = 0; d < s->k; d++)
        if (!(s->flags[d] & F_CAPPED)) live += s->w[d];
    for (int64_t d = 0; d < s->k; d++)
        out[d] = (live > 0 && !(s->flags[d] & F_CAPPED)) ? s->w[d] / live : 0.0;
}

/* The permutation of (domain, epoch) depends on nothing else: a checkpoint need not hold it. */
static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static dga_status make_perm(dga_sampler *s, int64_t d)
{
    uint64_t n = (uint64_t)s->avail[d];
    if (!s->perm[d]) {
        s->perm[d] = malloc(n * sizeof(uint32_t));
        if (!s->perm[d])
            return dga_fail(DGA_ERR_NOMEM, "sampler: out of memory for the permutation of domain #%lld (%llu sequences)",
                            (long long)d + 1, (unsigned long long)n);
    }
    for (uint64_t i = 0; i < n; i++) s->perm[d][i] = (uint32_t)i;
    dga_rng r;
    dga_rng_seed(&r, mix64(mix64(s->seed ^ 0x5045524dULL) ^ (uint64_t)d) ^
                         mix64((uint64_t)s->epochs[d] * 0x9e3779b97f4a7c15ULL));
    dga_rng_shuffle_u32(&r, s->perm[d], n);
    return DGA_OK;
}

static void cap_domain(dga_sampler *s, int64_t d)
{
    s->flags[d] |= F_CAPPED;
    s->capped[s->n_capped++] = (int32_t)d;
    free(s->perm[d]);
    s->perm[d] = NULL;
    if (!(s->flags[d] & F_EXCLUDED)) s->rejected += s->q[d];
    /* Rejection keeps draws exact; rebuilding once half the mass is rejected keeps them O(1). */
    if (s->rejected > 0.5) rebuild(s);
}

dga_status dga_sampler_draw(dga_sampler *s, int64_t n, int32_t *domains, int32_t *indices)
{
    if (n < 0) return dga_fail(DGA_ERR_INVALID, "sampler: draw count %lld, expected >= 0", (long long)n);
    for (int64_t t = 0; t < n; t++) {
        if (s->table_empty) return all_capped_error(s);
        int64_t d;
        do d = alias_draw(s->prob, s->alias, s->k, &s->rng);
        while (s->flags[d] & F_CAPPED);
        if (s->epochs[d] == 0 || s->cursor[d] == s->avail[d]) {
            if (!s->perm[d] && !(s->perm[d] = malloc((size_t)s->avail[d] * sizeof(uint32_t))))
                return dga_fail(DGA_ERR_NOMEM, "sampler: out of memory for the permutation of domain #%lld",
                                (long long)d + 1);
            s->epochs[d]++;
            s->cursor[d] = 0;
            (void)make_perm(s, d);   /* cannot fail: the buffer exists */
        } else if (!s->perm[d]) {   /* after a state restore */
            dga_status st = make_perm(s, d);
            if (st != DGA_OK) return st;
        }
        domains[t] = (int32_t)d;
        indices[t] = (int32_t)s->perm[d][s->cursor[d]++];
        s->drawn[d]++;
        if (s->cap > 0 && s->cursor[d] == s->avail[d] && s->epochs[d] >= s->cap) cap_domain(s, d);
    }
    return DGA_OK;
}

/* n distinct values in [0, m) (n <= m) by Floyd's algorithm with an open-addressing set,
 * then shuffled so the order carries no information. */
static dga_status sample_distinct(dga_rng *r, int64_t m, int64_t n, int32_t *out)
{
    size_t cap = 16;
    while (cap < 2 * (size_t)n) cap *= 2;
    int64_t *set = calloc(cap, sizeof *set);   /* value + 1; 0 = empty */
    if (!set) return dga_fail(DGA_ERR_NOMEM, "sampler: out of memory drawing %lld probes", (long long)n);
    int64_t got = 0;
    for (int64_t j = m - n; j < m; j++) {
        int64_t t = (int64_t)dga_rng_below(r, (uint64_t)j + 1);
        for (int pass = 0; pass < 2; pass++) {
            size_t h = (size_t)mix64((uint64_t)t) & (cap - 1);
            while (set[h] && set[h] != t + 1) h = (h + 1) & (cap - 1);
            if (!set[h]) { set[h] = t + 1; out[got++] = (int32_t)t; break; }
            t = j;   /* t was taken: j is new (Floyd) */
        }
    }
    free(set);
    for (int64_t i = n; i > 1; i--) {
        int64_t j = (int64_t)dga_rng_below(r, (uint64_t)i);
        int32_t x = out[i - 1]; out[i - 1] = out[j]; out[j] = x;
    }
    return DGA_OK;
}

static dga_status check_probe_domain(const dga_sampler *s, int64_t d)
{
    if (d < 0 || d >= s->k)
        return dga_fail(DGA_ERR_INVALID, "sampler: domain #%lld out of range [1, %lld]", (long long)d + 1,
                        (long long)s->k);
    if (s->avail[d] == 0)
        return dga_fail(DGA_ERR_INVALID, "sampler: domain #%lld has no available sequence", (long long)d + 1);
    return DGA_OK;
}

dga_status dga_sampler_draw_from(dga_sampler *s, int64_t d, int64_t n, int32_t *indices)
{
    dga_status st = check_probe_domain(s, d);
    if (st != DGA_OK) return st;
    if (n < 0) return dga_fail(DGA_ERR_INVALID, "sampler: draw count %lld, expected >= 0", (long long)n);
    if (n <= s->avail[d]) return sample_distinct(&s->probe, s->avail[d], n, indices);
    for (int64_t t = 0; t < n; t++)
        indices[t] = (int32_t)dga_rng_below(&s->probe, (uint64_t)s->avail[d]);
    return DGA_OK;
}

/* ---- state ---- */

#define STATE_MAGIC "DGASMPL"
#define STATE_VERSION 1u

typedef struct {
    char     magic[8];
    uint32_t version, pad;
    int64_t  k, cap;
    uint64_t seed;
    uint64_t rng[4], probe[4];
    int64_t  n_capped;
} state_header;

/* per domain: avail, w, cursor, drawn, epochs, flags; then the capped list */
static size_t state_size(int64_t k, int64_t n_capped)
{
    return sizeof(state_header) + (size_t)k * (5 * 8 + 1) + (size_t)n_capped * 4;
}

size_t dga_sampler_state_size(const dga_sampler *s) { return state_size(s->k, s->n_capped); }

void dga_sampler_state_write(const dga_sampler *s, void *buf)
{
    state_header h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, STATE_MAGIC, 8);
    h.version = STATE_VERSION;
    h.k = s->k; h.cap = s->cap; h.seed = s->seed; h.n_capped = s->n_capped;
    memcpy(h.rng, s->rng.s, sizeof h.rng);
    memcpy(h.probe, s->probe.s, sizeof h.probe);
    unsigned char *p = buf;
    memcpy(p, &h, sizeof h); p += sizeof h;
    size_t k = (size_t)s->k;
    memcpy(p, s->avail, k * 8); p += k * 8;
    memcpy(p, s->w, k * 8); p += k * 8;
    memcpy(p, s->cursor, k * 8); p += k * 8;
    memcpy(p, s->drawn, k * 8); p += k * 8;
    memcpy(p, s->epochs, k * 8); p += k * 8;
    memcpy(p, s->flags, k); p += k;
    memcpy(p, s->capped, (size_t)s->n_capped * 4);
}

dga_status dga_sampler_state_save(const dga_sampler *s, void **buf, size_t *len)
{
    size_t n = dga_sampler_state_size(s);
    void *b = malloc(n);
    if (!b) return dga_fail(DGA_ERR_NOMEM, "sampler: out of memory for a %zu-byte state", n);
    dga_sampler_state_write(s, b);
    *buf = b;
    *len = n;
    return DGA_OK;
}

dga_status dga_sampler_state_load(dga_sampler *s, const void *buf, size_t len)
{
    state_header h;
    if (!buf || len < sizeof h)
        return dga_fail(DGA_ERR_FORMAT, "sampler state: %zu bytes, too short for a header", len);
    memcpy(&h, buf, sizeof h);
    if (memcmp(h.magic, STATE_MAGIC, 8) != 0)
        return dga_fail(DGA_ERR_FORMAT, "sampler state: bad magic (not a dga sampler state)");
    if (h.version != STATE_VERSION)
        return dga_fail(DGA_ERR_FORMAT, "sampler state: version %u, expected %u", h.version, STATE_VERSION);
    if (h.k != s->k)
        return dga_fail(DGA_ERR_INVALID, "sampler state: saved for k = %lld domains, this sampler has %lld",
                        (long long)h.k, (long long)s->k);
    if (h.cap != s->cap || h.seed != s->seed)
        return dga_fail(DGA_ERR_INVALID,
                        "sampler state: saved with epoch_cap = %lld, seed = %llu; this sampler has "
                        "epoch_cap = %lld, seed = %llu",
                        (long long)h.cap, (unsigned long long)h.seed, (long long)s->cap,
                        (unsigned long long)s->seed);
    if (h.n_capped < 0 || h.n_capped > h.k || len != state_size(h.k, h.n_capped))
        return dga_fail(DGA_ERR_FORMAT, "sampler state: %zu bytes, inconsistent with its header", len);

    size_t k = (size_t)s->k;
    const unsigned char *p = (const unsigned char *)buf + sizeof h;
    const unsigned char *p_avail = p, *p_w = p + k * 8, *p_cur = p + 2 * k * 8,
                        *p_drawn = p + 3 * k * 8, *p_ep = p + 4 * k * 8, *p_flags = p + 5 * k * 8,
                        *p_capped = p_flags + k;
    int64_t n_cap_flags = 0;
    for (size_t d = 0; d < k; d++) {
        int64_t a, cur, dr, ep;
        double w;
        memcpy(&a, p_avail + d * 8, 8);
        memcpy(&w, p_w + d * 8, 8);
        memcpy(&cur, p_cur + d * 8, 8);
        memcpy(&dr, p_drawn + d * 8, 8);
        memcpy(&ep, p_ep + d * 8, 8);
        if (a != s->avail[d])
            return dga_fail(DGA_ERR_INVALID,
                            "sampler state: domain #%zu had %lld available sequences when it was saved, "
                            "this sampler has %lld: the data changed since the run started (its store "
                            "rebuilt or changed, or another budget); resume with the data it started with",
                            d + 1, (long long)a, (long long)s->avail[d]);
        if (!isfinite(w) || w < 0 || cur < 0 || cur > a || dr < 0 || ep < 0 || (p_flags[d] & ~3u))
            return dga_fail(DGA_ERR_FORMAT, "sampler state: corrupt entry for domain #%zu", d + 1);
        if (p_flags[d] & F_CAPPED) n_cap_flags++;
    }
    if (n_cap_flags != h.n_capped)
        return dga_fail(DGA_ERR_FORMAT, "sampler state: %lld capped flags but %lld capped entries",
                        (long long)n_cap_flags, (long long)h.n_capped);
    for (int64_t i = 0; i < h.n_capped; i++) {
        int32_t d;
        memcpy(&d, p_capped + (size_t)i * 4, 4);
        if (d < 0 || d >= s->k || !(p_flags[d] & F_CAPPED))
            return dga_fail(DGA_ERR_FORMAT, "sampler state: capped entry %lld is not a capped domain",
                            (long long)i + 1);
    }

    memcpy(s->rng.s, h.rng, sizeof h.rng);
    memcpy(s->probe.s, h.probe, sizeof h.probe);
    memcpy(s->w, p_w, k * 8);
    memcpy(s->cursor, p_cur, k * 8);
    memcpy(s->drawn, p_drawn, k * 8);
    memcpy(s->epochs, p_ep, k * 8);
    memcpy(s->flags, p_flags, k);
    memcpy(s->capped, p_capped, (size_t)h.n_capped * 4);
    s->n_capped = h.n_capped;
    for (size_t d = 0; d < k; d++) {   /* regenerated lazily from (seed, domain, epoch) */
        free(s->perm[d]);
        s->perm[d] = NULL;
    }
    /* Rebuild the table exactly as it was: from the weights minus the domains excluded then,
     * and re-reject the ones capped since. */
    double live = 0;
    for (size_t d = 0; d < k; d++)
        if (!(s->flags[d] & F_EXCLUDED)) live += s->w[d];
    s->rejected = 0;
    s->table_empty = !(live > 0);
    if (!s->table_empty) {
        for (size_t d = 0; d < k; d++)
            s->q[d] = (s->flags[d] & F_EXCLUDED) ? 0.0 : s->w[d] / live;
        alias_build(s->q, s->k, s->prob, s->alias, s->work);
        for (size_t d = 0; d < k; d++)
            if ((s->flags[d] & F_CAPPED) && !(s->flags[d] & F_EXCLUDED)) s->rejected += s->q[d];
    }
    return DGA_OK;
}

/* ---- basis histograms ---- */

struct dga_basis {
    int64_t  k, n, nnz;
    int64_t *colptr;     /* n + 1 */
    int32_t *rows;       /* nnz: leaf domain of each non-zero */
    double  *vals;       /* nnz: column-normalised */
    double  *prob;       /* nnz: per-column alias tables, built on first draw */
    int32_t *alias;      /* nnz: local positions inside the column */
    uint8_t *built;      /* n */
};

void dga_basis_free(dga_basis *P)
{
    if (!P) return;
    free(P->colptr); free(P->rows); free(P->vals); free(P->prob); free(P->alias); free(P->built);
    free(P);
}

dga_status dga_basis_create(int64_t k, int64_t n, const float *const *columns, dga_basis **out)
{
    *out = NULL;
    if (k < 1 || k > INT32_MAX || n < 1)
        return dga_fail(DGA_ERR_INVALID, "basis: k = %lld leaf domains and N = %lld columns, expected both >= 1",
                        (long long)k, (long long)n);
    int64_t nnz = 0;
    for (int64_t j = 0; j < n; j++) {
        if (!columns || !columns[j]) return dga_fail(DGA_ERR_INVALID, "basis: column #%lld is NULL", (long long)j + 1);
        double sum = 0;
        for (int64_t i = 0; i < k; i++) {
            float x = columns[j][i];
            if (!isfinite(x) || x < 0)
                return dga_fail(DGA_ERR_INVALID, "basis: column #%lld, entry #%lld is %g, expected finite and >= 0",
                                (long long)j + 1, (long long)i + 1, (double)x);
            if (x > 0) nnz++;
            sum += x;
        }
        if (!(sum > 0))
            return dga_fail(DGA_ERR_INVALID, "basis: column #%lld sums to zero, expected a histogram", (long long)j + 1);
    }
    dga_basis *P = calloc(1, sizeof *P);
    if (!P) return dga_fail(DGA_ERR_NOMEM, "basis: out of memory");
    P->k = k; P->n = n; P->nnz = nnz;
    P->colptr = malloc((size_t)(n + 1) * sizeof *P->colptr);
    P->rows = malloc((size_t)(nnz ? nnz : 1) * sizeof *P->rows);
    P->vals = malloc((size_t)(nnz ? nnz : 1) * sizeof *P->vals);
    P->prob = malloc((size_t)(nnz ? nnz : 1) * sizeof *P->prob);
    P->alias = malloc((size_t)(nnz ? nnz : 1) * sizeof *P->alias);
    P->built = calloc((size_t)n, 1);
    if (!P->colptr || !P->rows || !P->vals || !P->prob || !P->alias || !P->built) {
        dga_basis_free(P);
        return dga_fail(DGA_ERR_NOMEM, "basis: out of memory for %lld non-zeros", (long long)nnz);
    }
    int64_t pos = 0;
    for (int64_t j = 0; j < n; j++) {
        P->colptr[j] = pos;
        double sum = 0;
        for (int64_t i = 0; i < k; i++) sum += columns[j][i];
        for (int64_t i = 0; i < k; i++)
            if (columns[j][i] > 0) {
                P->rows[pos] = (int32_t)i;
                P->vals[pos] = columns[j][i] / sum;
                pos++;
            }
    }
    P->colptr[n] = pos;
    *out = P;
    return DGA_OK;
}

int64_t dga_basis_k(const dga_basis *P) { return P->k; }
int64_t dga_basis_n(const dga_basis *P) { return P->n; }
int64_t dga_basis_nnz(const dga_basis *P) { return P->nnz; }

dga_status dga_basis_column(const dga_basis *P, int64_t j, float *out)
{
    if (j < 0 || j >= P->n)
        return dga_fail(DGA_ERR_INVALID, "basis: column #%lld out of range [1, %lld]", (long long)j + 1,
                        (long long)P->n);
    memset(out, 0, (size_t)P->k * sizeof *out);
    for (int64_t p = P->colptr[j]; p < P->colptr[j + 1]; p++) out[P->rows[p]] = (float)P->vals[p];
    return DGA_OK;
}

dga_status dga_mix_dist(const dga_basis *P, const float *alpha, int64_t n, float *out)
{
    if (n != P->n)
        return dga_fail(DGA_ERR_INVALID, "mix_dist: alpha_dist has %lld entries, expected N = %lld basis columns",
                        (long long)n, (long long)P->n);
    double sum = 0;
    for (int64_t j = 0; j < n; j++) {
        if (!isfinite(alpha[j]) || alpha[j] < 0)
            return dga_fail(DGA_ERR_INVALID, "mix_dist: alpha_dist entry #%lld is %g, expected finite and >= 0",
                            (long long)j + 1, (double)alpha[j]);
        sum += alpha[j];
    }
    if (!(sum > 0)) return dga_fail(DGA_ERR_INVALID, "mix_dist: alpha_dist sums to zero");
    double *acc = calloc((size_t)P->k, sizeof *acc);
    if (!acc) return dga_fail(DGA_ERR_NOMEM, "mix_dist: out of memory");
    for (int64_t j = 0; j < n; j++) {
        double a = alpha[j] / sum;
        if (a == 0) continue;
        for (int64_t p = P->colptr[j]; p < P->colptr[j + 1]; p++) acc[P->rows[p]] += a * P->vals[p];
    }
    for (int64_t i = 0; i < P->k; i++) out[i] = (float)acc[i];
    free(acc);
    return DGA_OK;
}

dga_status dga_basis_draw(dga_basis *P, int64_t j, dga_sampler *s, int64_t n, int32_t *domains,
                          int32_t *indices)
{
    if (j < 0 || j >= P->n)
        return dga_fail(DGA_ERR_INVALID, "basis: column #%lld out of range [1, %lld]", (long long)j + 1,
                        (long long)P->n);
    if (P->k != s->k)
        return dga_fail(DGA_ERR_INVALID, "basis: has k = %lld leaf domains, the sampler has %lld",
                        (long long)P->k, (long long)s->k);
    if (n < 0) return dga_fail(DGA_ERR_INVALID, "basis: draw count %lld, expected >= 0", (long long)n);
    int64_t off = P->colptr[j], m = P->colptr[j + 1] - off;
    for (int64_t p = off; p < off + m; p++)
        if (s->avail[P->rows[p]] == 0)
            return dga_fail(DGA_ERR_INVALID,
                            "basis: column #%lld puts weight on domain #%d, which has no available sequence",
                            (long long)j + 1, P->rows[p] + 1);
    if (!P->built[j]) {
        int32_t *work = malloc((size_t)(2 * m) * sizeof *work);
        if (!work) return dga_fail(DGA_ERR_NOMEM, "basis: out of memory");
        alias_build(P->vals + off, m, P->prob + off, P->alias + off, work);
        free(work);
        P->built[j] = 1;
    }
    for (int64_t t = 0; t < n; t++) {
        int32_t d = P->rows[off + alias_draw(P->prob + off, P->alias + off, m, &s->probe)];
        domains[t] = d;
        if (indices) indices[t] = (int32_t)dga_rng_below(&s->probe, (uint64_t)s->avail[d]);
    }
    return DGA_OK;
}
