#include "kmeans.h"

#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rng.h"

#define BLOCK 2048   /* points per sgemm block: the B x k score block stays in cache */

static dga_status check_args(const float *x, int64_t n, int d, int k)
{
    if (n < 1) return dga_fail(DGA_ERR_INVALID, "kmeans: no points (n = %lld)", (long long)n);
    if (d < 1) return dga_fail(DGA_ERR_INVALID, "kmeans: dimension %d (expected >= 1)", d);
    if (k < 1 || k > n)
        return dga_fail(DGA_ERR_INVALID, "kmeans: k = %d (expected 1 <= k <= n = %lld)", k,
                        (long long)n);
    for (int64_t i = 0; i < n * (int64_t)d; i++)
        if (!isfinite(x[i]))
            return dga_fail(DGA_ERR_INVALID, "kmeans: point %lld, coordinate %d is %g",
                            (long long)(i / d), (int)(i % d), (double)x[i]);
    return DGA_OK;
}

static void normalize_row(float *c, int d)
{
    double s = 0;
    for (int j = 0; j < d; j++) s += (double)c[j] * c[j];
    if (s > 0) {
        float inv = (float)(1.0 / sqrt(s));
        for (int j = 0; j < d; j++) c[j] *= inv;
    }
}

/* Assigns points to their nearest centroid. cost[i] (if non-NULL) is the squared distance
 * (Euclidean) or 1 - x.c (spherical). scratch: BLOCK * k floats. Returns changed count when
 * `assign` already held an assignment (changed counts entries that differ). */
static int64_t assign_points(const float *x, int64_t n, int d, const float *c, int k,
                             int spherical, const float *cnorm, float *scratch, int32_t *assign,
                             float *cost, float *score, double *total)
{
    int64_t changed = 0;
    double sum = 0;
    for (int64_t b0 = 0; b0 < n; b0 += BLOCK) {
        int bn = (int)(n - b0 < BLOCK ? n - b0 : BLOCK);
        const float *xb = x + b0 * d;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, bn, k, d, 1.0f, xb, d, c, d, 0.0f,
                    scratch, k);
        for (int i = 0; i < bn; i++) {
            const float *s = scratch + (size_t)i * k;
            int best = 0;
            float bv;
            if (spherical) {
                bv = s[0];
                for (int j = 1; j < k; j++)
                    if (s[j] > bv) bv = s[j], best = j;
            } else {
                bv = cnorm[0] - 2 * s[0];
                for (int j = 1; j < k; j++) {
                    float v = cnorm[j] - 2 * s[j];
                    if (v < bv) bv = v, best = j;
                }
                double xn = 0;
                const float *xi = xb + (size_t)i * d;
                for (int j = 0; j < d; j++) xn += (double)xi[j] * xi[j];
                bv = (float)(xn + bv);
                if (bv < 0) bv = 0;
            }
            int64_t p = b0 + i;
            if (assign[p] != best) changed++;
            assign[p] = best;
            float cst = spherical ? 1.0f - bv : bv;
            if (cost) cost[p] = cst;
            if (score) score[p] = bv;
            sum += cst;
        }
    }
    if (total) *total = sum;
    return changed;
}

static void centroid_norms(const float *c, int k, int d, float *cnorm)
{
    for (int j = 0; j < k; j++) {
        double s = 0;
        for (int t = 0; t < d; t++) s += (double)c[(size_t)j * d + t] * c[(size_t)j * d + t];
        cnorm[j] = (float)s;
    }
}

dga_status dga_kmeans_assign(const float *x, int64_t n, int d, const float *centroids, int k,
                             int spherical, int32_t *assign, float *score)
{
    if (n < 0 || d < 1 || k < 1)
        return dga_fail(DGA_ERR_INVALID, "kmeans_assign: n = %lld, d = %d, k = %d", (long long)n,
                        d, k);
    float *cnorm = malloc((size_t)k * sizeof *cnorm);
    float *scratch = malloc((size_t)BLOCK * k * sizeof *scratch);
    if (!cnorm || !scratch) {
        free(cnorm);
        free(scratch);
        return dga_fail(DGA_ERR_NOMEM, "kmeans_assign: out of memory (k = %d)", k);
    }
    centroid_norms(centroids, k, d, cnorm);
    for (int64_t i = 0; i < n; i++) assign[i] = -1;
    assign_points(x, n, d, centroids, k, spherical, cnorm, scratch, assign, NULL, score, NULL);
    free(cnorm);
    free(scratch);
    return DGA_OK;
}

/* k-means++ on a sample of the points; writes k centroids. */
static dga_status seed_plusplus(const float *x, int64_t n, int d, int k, int64_t m,
                                dga_rng *rng, float *c)
{
    int64_t *idx = malloc((size_t)n * sizeof *idx);
    if (!idx) return dga_fail(DGA_ERR_NOMEM, "kmeans: out of memory (seeding, n = %lld)", (long long)n);
    for (int64_t i = 0; i < n; i++) idx[i] = i;
    if (m < n)   /* partial Fisher-Yates: the first m entries are a uniform sample */
        for (int64_t i = 0; i < m; i++) {
            int64_t j = i + (int64_t)dga_rng_below(rng, (uint64_t)(n - i));
            int64_t t = idx[i];
            idx[i] = idx[j];
            idx[j] = t;
        }
    float *xs = malloc((size_t)m * d * sizeof *xs);
    double *d2 = malloc((size_t)m * sizeof *d2);
    float *dots = malloc((size_t)m * sizeof *dots);
    float *xn = malloc((size_t)m * sizeof *xn);
    if (!xs || !d2 || !dots || !xn) {
        free(idx), free(xs), free(d2), free(dots), free(xn);
        return dga_fail(DGA_ERR_NOMEM, "kmeans: out of memory (seeding sample of %lld)", (long long)m);
    }
    for (int64_t i = 0; i < m; i++) {
        memcpy(xs + i * d, x + idx[i] * d, (size_t)d * sizeof *xs);
        double s = 0;
        for (int t = 0; t < d; t++) s += (double)xs[i * d + t] * xs[i * d + t];
        xn[i] = (float)s;
        d2[i] = INFINITY;
    }
    int64_t pick = (int64_t)dga_rng_below(rng, (uint64_t)m);
    for (int j = 0; j < k; j++) {
        memcpy(c + (size_t)j * d, xs + pick * d, (size_t)d * sizeof *c);
        if (j == k - 1) break;
        const float *cj = c + (size_t)j * d;
        cblas_sgemv(CblasRowMajor, CblasNoTrans, (int)m, d, 1.0f, xs, d, cj, 1, 0.0f, dots, 1);
        double cn = xn[pick], total = 0;
        for (int64_t i = 0; i < m; i++) {
            double v = xn[i] - 2.0 * dots[i] + cn;
            if (v < 0) v = 0;
            if (v < d2[i]) d2[i] = v;
            total += d2[i];
        }
        if (total > 0) {
            double r = dga_rng_uniform(rng) * total, acc = 0;
            pick = m - 1;
            for (int64_t i = 0; i < m; i++) {
                acc += d2[i];
                if (acc > r && d2[i] > 0) {
                    pick = i;
                    break;
                }
            }
        } else {
            /* Every sampled point coincides with a chosen seed: the duplicate seeds end up as
             * empty clusters, which are dropped at the end. */
            pick = (int64_t)dga_rng_below(rng, (uint64_t)m);
        }
    }
    free(idx), free(xs), free(d2), free(dots), free(xn);
    return DGA_OK;
}

dga_status dga_kmeans(const float *x, int64_t n, int d, const dga_kmeans_opts *opts,
                      float *centroids, int32_t *assign, int *k_out, double *inertia)
{
    int k = opts->k;
    dga_status st = check_args(x, n, d, k);
    if (st != DGA_OK) return st;
    int iters = opts->iters > 0 ? opts->iters : 25;
    int64_t m = opts->seed_sample > 0 ? opts->seed_sample : 256 * (int64_t)k;
    if (m < 10000) m = 10000;
    if (m > n) m = n;
    dga_rng rng;
    dga_rng_seed(&rng, opts->seed);
    st = seed_plusplus(x, n, d, k, m, &rng, centroids);
    if (st != DGA_OK) return st;
    if (opts->spherical)
        for (int j = 0; j < k; j++) normalize_row(centroids + (size_t)j * d, d);

    float *cnorm = malloc((size_t)k * sizeof *cnorm);
    float *scratch = malloc((size_t)BLOCK * k * sizeof *scratch);
    float *cost = malloc((size_t)n * sizeof *cost);
    double *sum = malloc((size_t)k * d * sizeof *sum);
    int64_t *count = malloc((size_t)k * sizeof *count);
    if (!cnorm || !scratch || !cost || !sum || !count) {
        free(cnorm), free(scratch), free(cost), free(sum), free(count);
        return dga_fail(DGA_ERR_NOMEM, "kmeans: out of memory (n = %lld, k = %d)", (long long)n, k);
    }
    for (int64_t i = 0; i < n; i++) assign[i] = -1;
    double total = 0;
    for (int it = 0; it < iters; it++) {
        if (dga_interrupt_check("kmeans") != DGA_OK) {
            free(cnorm), free(scratch), free(cost), free(sum), free(count);
            return DGA_ERR_INTERRUPTED;
        }
        centroid_norms(centroids, k, d, cnorm);
        int64_t changed = assign_points(x, n, d, centroids, k, opts->spherical, cnorm, scratch,
                                        assign, cost, NULL, &total);
        if (opts->verbose)
            fprintf(stderr, "  kmeans k=%d iter %d: %lld changed, cost %.6g\n", k, it + 1,
                    (long long)changed, total);
        if (changed == 0) break;
        /* Update: centroid = mean of its points (double accumulation). */
        memset(sum, 0, (size_t)k * d * sizeof *sum);
        memset(count, 0, (size_t)k * sizeof *count);
        for (int64_t i = 0; i < n; i++) {
            double *s = sum + (size_t)assign[i] * d;
            const float *xi = x + i * d;
            for (int t = 0; t < d; t++) s[t] += xi[t];
            count[assign[i]]++;
        }
        int last = it == iters - 1;
        for (int j = 0; j < k; j++) {
            float *cj = centroids + (size_t)j * d;
            if (count[j] > 0) {
                double sq = 0;
                for (int t = 0; t < d; t++) sq += (sum[(size_t)j * d + t] / count[j]) *
                                                  (sum[(size_t)j * d + t] / count[j]);
                /* A spherical mean of zero length has no direction: keep the old one. */
                if (opts->spherical && !(sq > 0)) continue;
                for (int t = 0; t < d; t++) cj[t] = (float)(sum[(size_t)j * d + t] / count[j]);
                if (opts->spherical) normalize_row(cj, d);
            } else if (!last) {
                /* Re-seed from the farthest remaining point. */
                int64_t far = -1;
                for (int64_t i = 0; i < n; i++)
                    if (cost[i] >= 0 && (far < 0 || cost[i] > cost[far])) far = i;
                if (far >= 0) {
                    memcpy(cj, x + far * d, (size_t)d * sizeof *cj);
                    if (opts->spherical) normalize_row(cj, d);
                    cost[far] = -1;
                }
            }
        }
        if (last) {
            /* The centroids are now the means of the final assignment; nothing to re-assign. */
        }
    }
    /* Drop empty clusters, keeping order. */
    memset(count, 0, (size_t)k * sizeof *count);
    for (int64_t i = 0; i < n; i++) count[assign[i]]++;
    int kept = 0;
    int *remap = (int *)scratch;   /* k ints fit in BLOCK * k floats */
    for (int j = 0; j < k; j++) {
        if (count[j] == 0) {
            remap[j] = -1;
            continue;
        }
        if (kept != j)
            memmove(centroids + (size_t)kept * d, centroids + (size_t)j * d, (size_t)d * sizeof *centroids);
        remap[j] = kept++;
    }
    if (kept != k)
        for (int64_t i = 0; i < n; i++) assign[i] = remap[assign[i]];
    if (k_out) *k_out = kept;
    if (inertia) *inertia = total;
    free(cnorm), free(scratch), free(cost), free(sum), free(count);
    return DGA_OK;
}

/* ------------------------------------------------------------------ hierarchical */

void dga_hkmeans_free(dga_hkmeans *h)
{
    if (!h) return;
    for (int l = 0; l < DGA_HKMEANS_MAX_LEVELS; l++) {
        free(h->centroids[l]);
        free(h->ranges[l]);
    }
    free(h->leaf);
    memset(h, 0, sizeof *h);
}

dga_status dga_kmeans_hierarchical(const float *x, int64_t n, int d, const int *levels,
                                   int nlevels, const dga_kmeans_opts *opts, dga_hkmeans *out)
{
    memset(out, 0, sizeof *out);
    if (nlevels < 1 || nlevels > DGA_HKMEANS_MAX_LEVELS)
        return dga_fail(DGA_ERR_INVALID, "kmeans: %d levels (expected 1..%d)", nlevels,
                        DGA_HKMEANS_MAX_LEVELS);
    for (int l = 0; l < nlevels; l++)
        if (levels[l] < 1)
            return dga_fail(DGA_ERR_INVALID, "kmeans: levels[%d] = %d (expected >= 1)", l + 1,
                            levels[l]);
    dga_status st = check_args(x, n, d, 1);
    if (st != DGA_OK) return st;
    out->nlevels = nlevels;
    out->d = d;
    out->n = n;

    /* order: points grouped by their domain at the current level; seg: domain boundaries
     * in `order`; first_child[l][j]: id of the first child of domain j of level l. */
    int64_t *order = malloc((size_t)n * sizeof *order);
    int64_t *next_order = malloc((size_t)n * sizeof *next_order);
    int64_t *seg = malloc(2 * sizeof *seg);
    int64_t *first_child[DGA_HKMEANS_MAX_LEVELS] = {0};
    float *buf = NULL;
    int32_t *a = NULL;
    int64_t *cnt = NULL;
    int64_t nseg = 1;
    if (!order || !next_order || !seg) {
        st = dga_fail(DGA_ERR_NOMEM, "kmeans: out of memory (n = %lld)", (long long)n);
        goto done;
    }
    for (int64_t i = 0; i < n; i++) order[i] = i;
    seg[0] = 0;
    seg[1] = n;
    for (int l = 0; l < nlevels; l++) {
        int64_t maxk = nseg * (int64_t)levels[l];
        if (maxk > n) maxk = n;
        float *cent = malloc((size_t)maxk * d * sizeof *cent);
        int64_t *nseg_arr = malloc((size_t)(maxk + 1) * sizeof *nseg_arr);
        first_child[l] = malloc((size_t)(nseg + 1) * sizeof *first_child[l]);
        out->centroids[l] = cent;
        if (!cent || !nseg_arr || !first_child[l]) {
            free(nseg_arr);
            st = dga_fail(DGA_ERR_NOMEM, "kmeans: out of memory (level %d, %lld domains)", l + 1,
                          (long long)maxk);
            goto done;
        }
        int64_t kl = 0;
        for (int64_t j = 0; j < nseg; j++) {
            int64_t s0 = seg[j], sn = seg[j + 1] - seg[j];
            int kk = sn < levels[l] ? (int)sn : levels[l];
            buf = malloc((size_t)sn * d * sizeof *buf);
            a = malloc((size_t)sn * sizeof *a);
            cnt = calloc((size_t)kk + 1, sizeof *cnt);
            if (!buf || !a || !cnt) {
                free(nseg_arr);
                st = dga_fail(DGA_ERR_NOMEM, "kmeans: out of memory (segment of %lld)", (long long)sn);
                goto done;
            }
            for (int64_t i = 0; i < sn; i++)
                memcpy(buf + i * d, x + order[s0 + i] * d, (size_t)d * sizeof *buf);
            dga_kmeans_opts o = *opts;
            o.k = kk;
            o.seed = opts->seed + 0x9e3779b97f4a7c15ULL * (uint64_t)(l + 1) + (uint64_t)j;
            o.verbose = opts->verbose > 1;
            int kept = 0;
            st = dga_kmeans(buf, sn, d, &o, cent + kl * d, a, &kept, NULL);
            if (st != DGA_OK) {
                free(nseg_arr);
                goto done;
            }
            /* Stable counting sort of the segment by child. */
            for (int64_t i = 0; i < sn; i++) cnt[a[i] + 1]++;
            for (int c = 0; c < kept; c++) {
                nseg_arr[kl + c] = s0 + cnt[c];
                cnt[c + 1] += cnt[c];
            }
            for (int64_t i = 0; i < sn; i++) next_order[s0 + cnt[a[i]]++] = order[s0 + i];
            first_child[l][j] = kl;
            kl += kept;
            free(buf), free(a), free(cnt);
            buf = NULL, a = NULL, cnt = NULL;
        }
        first_child[l][nseg] = kl;
        nseg_arr[kl] = n;
        out->k[l] = kl;
        free(seg);
        seg = nseg_arr;
        nseg = kl;
        int64_t *t = order;
        order = next_order;
        next_order = t;
        if (opts->verbose)
            fprintf(stderr, "kmeans level %d: %lld domains\n", l + 1, (long long)kl);
    }
    /* Leaf ids and leaf ranges per level. */
    out->leaf = malloc((size_t)n * sizeof *out->leaf);
    if (!out->leaf) {
        st = dga_fail(DGA_ERR_NOMEM, "kmeans: out of memory (leaf ids)");
        goto done;
    }
    for (int64_t j = 0; j < nseg; j++)
        for (int64_t i = seg[j]; i < seg[j + 1]; i++) out->leaf[order[i]] = (int32_t)j;
    for (int l = nlevels - 1; l >= 0; l--) {
        out->ranges[l] = malloc((size_t)(out->k[l] + 1) * sizeof *out->ranges[l]);
        if (!out->ranges[l]) {
            st = dga_fail(DGA_ERR_NOMEM, "kmeans: out of memory (ranges)");
            goto done;
        }
        for (int64_t j = 0; j <= out->k[l]; j++)
            out->ranges[l][j] = l == nlevels - 1 ? j : out->ranges[l + 1][first_child[l + 1][j]];
    }
done:
    free(order), free(next_order), free(seg), free(buf), free(a), free(cnt);
    for (int l = 0; l < DGA_HKMEANS_MAX_LEVELS; l++) free(first_child[l]);
    if (st != DGA_OK) dga_hkmeans_free(out);
    return st;
}
