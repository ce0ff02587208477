/* Clocks and a comparator shared by the bench_*.c programs (header only: each bench is one
 * translation unit linked against libdga.a). */
#ifndef DGA_BENCH_UTIL_H
#define DGA_BENCH_UTIL_H

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

#endif
