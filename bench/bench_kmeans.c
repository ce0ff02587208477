/* Hierarchical spherical k-means on synthetic embeddings: n points in d = 384 dimensions,
 * levels 64 x 64 x 64 by default, on two kinds of points:
 *   random     i.i.d. Gaussian directions (the "300,000 random 384-d points": no
 *              structure, so Lloyd never settles early and every clustering runs all iters)
 *   clustered  L2-normalised mixtures of 512 random directions plus noise (like text
 *              embeddings)
 * Prints wall time per kind and the domain counts per level.
 *   bench_kmeans [build_dir] [n=300000] [levels=64,64,64] [iters=25] [kind=both|random|clustered]
 * The first argument is the build directory, as bench/run passes it to every bench_*; unused. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_util.h"
#include "kmeans.h"
#include "rng.h"

int main(int argc, char **argv)
{
    int64_t n = argc > 2 ? atoll(argv[2]) : 300000;
    int levels[DGA_HKMEANS_MAX_LEVELS] = {64, 64, 64}, nlevels = 3;
    if (argc > 3) {
        nlevels = 0;
        for (char *p = strtok(argv[3], ","); p && nlevels < DGA_HKMEANS_MAX_LEVELS; p = strtok(NULL, ","))
            levels[nlevels++] = atoi(p);
    }
    int iters = argc > 4 ? atoi(argv[4]) : 25;
    if (n <= 0 || iters <= 0) {
        fprintf(stderr, "usage: bench_kmeans [build_dir] [n > 0] [levels] [iters > 0]\n");
        return 2;
    }
    const char *only = argc > 5 ? argv[5] : "both";
    const int d = 384, topics = 512;
    float *dir = malloc((size_t)topics * d * sizeof *dir);
    float *x = malloc((size_t)n * d * sizeof *x);
    if (!dir || !x) {
        fprintf(stderr, "out of memory\n");
        return 1;
    }
    static const char *const kinds[2] = {"random", "clustered"};
    for (int kind = 0; kind < 2; kind++) {
        if (strcmp(only, "both") && strcmp(only, kinds[kind])) continue;
        dga_rng r;
        dga_rng_seed(&r, 1);
        for (int i = 0; i < topics * d; i++) dir[i] = (float)dga_rng_normal(&r);
        for (int64_t i = 0; i < n; i++) {
            int a = (int)dga_rng_below(&r, topics), b = (int)dga_rng_below(&r, topics);
            double w = dga_rng_uniform(&r), s = 0;
            float *xi = x + i * d;
            for (int t = 0; t < d; t++) {
                xi[t] = kind == 0 ? (float)dga_rng_normal(&r)
                                  : (float)(w * dir[a * d + t] + (1 - w) * dir[b * d + t] +
                                            0.5 * dga_rng_normal(&r));
                s += (double)xi[t] * xi[t];
            }
            for (int t = 0; t < d; t++) xi[t] /= (float)sqrt(s);
        }
        printf("bench_kmeans: %s points, n = %lld, d = %d, levels =", kinds[kind], (long long)n, d);
        for (int l = 0; l < nlevels; l++) printf(" %d", levels[l]);
        printf(", iters = %d\n", iters);
        fflush(stdout);
        dga_kmeans_opts o = {.iters = iters, .seed = 1, .spherical = 1, .verbose = 0};
        dga_hkmeans h;
        double t0 = bench_now();
        dga_status st = dga_kmeans_hierarchical(x, n, d, levels, nlevels, &o, &h);
        double t = bench_now() - t0;
        if (st != DGA_OK) {
            fprintf(stderr, "%s\n", dga_last_error());
            return 1;
        }
        printf("hierarchical k-means (%s): %.1f s; domains per level:", kinds[kind], t);
        for (int l = 0; l < nlevels; l++) printf(" %lld", (long long)h.k[l]);
        printf("\n");
        printf("RESULT {\"kind\":\"hkmeans\",\"points\":\"%s\",\"n\":%lld,\"d\":%d,\"leaves\":%lld,"
               "\"seconds\":%.2f}\n", kinds[kind], (long long)n, d, (long long)h.k[nlevels - 1], t);
        fflush(stdout);
        dga_hkmeans_free(&h);
    }
    free(dir);
    free(x);
    return 0;
}
