/* Clocks and a comparator shared by the bench_*.c programs (header only: each bench is one
 * translation unit linked against libdga.a). */
#ifndef DGA_BENCH_UTIL_H
#define DGA_BENCH_UTIL_H

#include <stdlib.h>
#include <time.h>

/* Wall-clock seconds (monotonic). */
static inline double bench_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* CPU seconds of the whole process, all threads: what a step costs even on a busy machine. */
static inline double bench_cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* qsort comparator for doubles, ascending (medians). */
static inline int bench_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The thread counts to measure: argv[2..] if given (argv[1] is the build directory), else
 * $OPENBLAS_NUM_THREADS, else 1 and 2. Fills threads[max]; returns how many. */
static inline int bench_thread_list(int argc, char **argv, int *threads, int max)
{
    int n = 0;
    for (int i = 2; i < argc && n < max; i++) threads[n++] = atoi(argv[i]);
    if (n == 0) {
        const char *env = getenv("OPENBLAS_NUM_THREADS");
        if (env && atoi(env) > 0) threads[n++] = atoi(env);
        else threads[n++] = 1, threads[n++] = 2;
    }
    return n;
}

#endif
