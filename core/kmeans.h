/* k-means and hierarchical k-means over float32 points (n x d, row-major).
 *
 * Seeding: k-means++ (Arthur & Vassilvitskii, 2007) with a seeded dga_rng. For large n the
 * seeding runs on a uniform sample of min(n, seed_sample) points (default 256 * k, at least
 * 10,000): seeding is k sequential passes, and a sample that size already places seeds in
 * every well-populated region. Lloyd iterations then use all points.
 *
 * Distances go through cblas_sgemm in blocks of points: scores = X_block C^T, then
 *   Euclidean: ||x - c||^2 = ||x||^2 - 2 x.c + ||c||^2 (nearest = smallest),
 *   spherical: centroids are L2-normalised after every update and the nearest centroid is
 *              the one with the largest x.c (cosine when the points are L2-normalised, as
 *              embeddings are). Ties go to the lowest centroid index.
 * Empty clusters are re-seeded from the points farthest from their centroid (the farthest
 * first, one distinct point per empty cluster). Iteration stops when no assignment changes
 * or after `iters` rounds. Same input, options and OpenBLAS thread count => same result.
 * After the last round, clusters still empty (possible only with many duplicate points) are
 * dropped and the others renumbered, so *k_out <= k and every cluster is non-empty.
 *
 * Hierarchical: level 0 clusters all points into levels[0] clusters; each cluster of level
 * l is re-clustered into levels[l+1] children. A cluster with fewer points than children
 * gets one child per point (and possibly fewer, see above). Children of one parent get
 * contiguous ids, in parent order, so every domain at every level covers a contiguous range
 * of leaves; the number of leaves under a parent varies and the total can be less than
 * prod(levels). Each child re-clustering uses seed + a per-parent offset, so results do not
 * depend on anything but the input and options. */
#ifndef DGA_KMEANS_H
#define DGA_KMEANS_H

#include <stdint.h>

#include "status.h"

typedef struct {
    int      k;
    int      iters;         /* Lloyd rounds (default 25 when 0) */
    uint64_t seed;
    int      spherical;     /* 1: normalised centroids, cosine assignment */
    int64_t  seed_sample;   /* 0: default (see above) */
    int      verbose;       /* progress lines on stderr */
} dga_kmeans_opts;

/* centroids: k x d (written), assign: n (written; 0-based). *k_out: clusters kept (<= k;
 * centroids rows beyond it are unspecified). inertia (may be NULL): sum of squared
 * distances (Euclidean) or sum of (1 - x.c) (spherical). Needs n >= 1, 1 <= k <= n. */
dga_status dga_kmeans(const float *x, int64_t n, int d, const dga_kmeans_opts *opts,
                      float *centroids, int32_t *assign, int *k_out, double *inertia);

/* Nearest centroid of each point (and its score: squared distance, or x.c when spherical). */
dga_status dga_kmeans_assign(const float *x, int64_t n, int d, const float *centroids, int k,
                             int spherical, int32_t *assign, float *score);

/* Result of a hierarchical clustering. Levels are 0-based here (0 = coarsest). */
typedef struct {
    int      nlevels;
    int      d;
    int64_t  n;
    int64_t  k[8];          /* domains at each level */
    float   *centroids[8];  /* k[l] x d */
    int64_t *ranges[8];     /* k[l] + 1 leaf boundaries: domain j of level l = leaves
                               ranges[l][j] .. ranges[l][j+1]-1; the last level is 0..k */
    int32_t *leaf;          /* n: leaf id of each point */
} dga_hkmeans;

#define DGA_HKMEANS_MAX_LEVELS 8

dga_status dga_kmeans_hierarchical(const float *x, int64_t n, int d, const int *levels,
                                   int nlevels, const dga_kmeans_opts *opts, dga_hkmeans *out);
void dga_hkmeans_free(dga_hkmeans *h);

#endif
