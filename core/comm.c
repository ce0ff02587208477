/* Collectives (see comm.h): MPI with DGA_MPI, a one-rank stub without. */
#include "comm.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef DGA_MPI
#include <mpi.h>
#endif

/* MPI counts are int: larger buffers go in pieces of this many elements */
#define PIECE ((size_t)1 << 30)

static dga_status check_root(int root, int size, const char *what)
{
    if (root < 0 || root >= size)
        return dga_fail(DGA_ERR_INVALID, "%s: root %d outside 0..%d", what, root, size - 1);
    return DGA_OK;
}

/* The reduction between dga_comm_reduce_begin and _finish: floats started, pieces posted. */
static struct {
    int    active;
    size_t started, posted;
} red;

static dga_status check_op(dga_reduce_op op, const char *what)
{
    if (op != DGA_REDUCE_SUM && op != DGA_REDUCE_MEAN)
        return dga_fail(DGA_ERR_INVALID, "%s: unknown operation %d", what, (int)op);
    return DGA_OK;
}

static dga_status check_active(const char *what)
{
    if (!red.active)
        return dga_fail(DGA_ERR_INVALID, "%s: no reduction in progress (reduce_begin first)",
                        what);
    return DGA_OK;
}

static dga_status begin_reduction(void)
{
    if (red.active)
        return dga_fail(DGA_ERR_INVALID, "reduce_begin: a reduction is already in progress");
    red.active = 1, red.started = red.posted = 0;
    return DGA_OK;
}

/* Ends the reduction at finish: its ranges must have covered the buffer's n floats. */
static dga_status end_reduction(size_t n)
{
    red.active = 0;
    if (red.started != n)
        return dga_fail(DGA_ERR_INVALID, "reduce_finish: the ranges started cover %zu floats, "
                        "the buffer has %zu", red.started, n);
    return DGA_OK;
}

#ifndef DGA_MPI

int dga_comm_has_mpi(void) { return 0; }

/* A launcher tells each process it starts how many it started (Open MPI's mpirun:
 * OMPI_COMM_WORLD_SIZE; MPICH's: PMI_SIZE). This build cannot reach the others, so with more
 * than one each would run the whole job alone, and they would write over each other's runs. */
dga_status dga_comm_init(void)
{
    static const char *const launcher_sizes[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"};
    for (size_t i = 0; i < sizeof launcher_sizes / sizeof launcher_sizes[0]; i++) {
        const char *v = getenv(launcher_sizes[i]);
        if (v && atoi(v) > 1)
            return dga_fail(DGA_ERR_INVALID, "started by mpirun as one of %s processes, but "
                            "this build has no MPI: run build/mpi/dgalua (make MPI=1)", v);
    }
    return DGA_OK;
}
void dga_comm_finalize(int status) { (void)status; }
int dga_comm_rank(void) { return 0; }
int dga_comm_size(void) { return 1; }

dga_status dga_comm_allreduce(float *buf, size_t n, dga_reduce_op op)
{
    (void)buf, (void)n;
    return check_op(op, "allreduce");   /* one rank: the sum and the mean are the buffer */
}

dga_status dga_comm_reduce_begin(size_t n, size_t max_ranges)
{
    (void)n, (void)max_ranges;
    return begin_reduction();
}

dga_status dga_comm_reduce_start(float *buf, size_t n)
{
    (void)buf;
    dga_status st = check_active("reduce_start");
    if (st == DGA_OK) red.started += n;
    return st;
}

dga_status dga_comm_reduce_finish(float *buf, size_t n, dga_reduce_op op)
{
    (void)buf;
    dga_status st = check_active("reduce_finish");
    if (st == DGA_OK) st = end_reduction(n);
    if (st == DGA_OK) st = check_op(op, "reduce_finish");
    return st;   /* one rank: the sum and the mean of one buffer are the buffer */
}

dga_status dga_comm_reduce_abandon(dga_status st)
{
    red.active = 0;
    return st;
}

dga_status dga_comm_bcast(void *buf, size_t bytes, int root)
{
    (void)buf, (void)bytes;
    return check_root(root, 1, "bcast");
}

dga_status dga_comm_allgather_counts(size_t n, size_t *counts)
{
    counts[0] = n;
    return DGA_OK;
}

dga_status dga_comm_allgatherv(const float *send, size_t n, float *recv, const size_t *counts)
{
    if (counts[0] != n)
        return dga_fail(DGA_ERR_INVALID, "allgatherv: %zu elements but counts[0] = %zu", n,
                        counts[0]);
    if (n) memmove(recv, send, n * sizeof *recv);
    return DGA_OK;
}

#else

static int started, finished, g_rank, g_size = 1;

int dga_comm_has_mpi(void) { return 1; }

static void at_exit(int status, void *arg)
{
    (void)arg;
    dga_comm_finalize(status);
}

dga_status dga_comm_init(void)
{
    if (started) return DGA_OK;
    int flag = 0;
    MPI_Initialized(&flag);
    if (!flag) {
        int provided = 0;
        if (MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
            return dga_fail(DGA_ERR_IO, "MPI_Init_thread failed");
    }
    /* the default, said explicitly: a failed MPI call ends the job rather than returning */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_size);
    started = 1;
    on_exit(at_exit, NULL);
    return DGA_OK;
}

void dga_comm_finalize(int status)
{
    if (!started || finished) return;
    finished = 1;
    if (status != 0 && g_size > 1) {
        /* the other ranks may be waiting in a collective this rank will never join */
        fprintf(stderr, "dgalua: rank %d of %d exits with status %d; aborting the job\n",
                g_rank, g_size, status);
        fflush(stderr);
        MPI_Abort(MPI_COMM_WORLD, status);
    }
    MPI_Finalize();
}

int dga_comm_rank(void)
{
    return dga_comm_init() == DGA_OK ? g_rank : 0;
}

int dga_comm_size(void)
{
    return dga_comm_init() == DGA_OK ? g_size : 1;
}

/* Sum to rank 0, then broadcast: every rank gets rank 0's bits, which a plain MPI_Allreduce
 * does not promise (its algorithms may add in a different order on different ranks). */
dga_status dga_comm_allreduce(float *buf, size_t n, dga_reduce_op op)
{
    dga_status st = check_op(op, "allreduce");
    if (st == DGA_OK) st = dga_comm_init();
    if (st != DGA_OK) return st;
    for (size_t off = 0; off < n; off += PIECE) {
        int m = (int)(n - off < PIECE ? n - off : PIECE);
        if (g_rank == 0)
            MPI_Reduce(MPI_IN_PLACE, buf + off, m, MPI_FLOAT, MPI_SUM, 0, MPI_COMM_WORLD);
        else
            MPI_Reduce(buf + off, NULL, m, MPI_FLOAT, MPI_SUM, 0, MPI_COMM_WORLD);
        MPI_Bcast(buf + off, m, MPI_FLOAT, 0, MPI_COMM_WORLD);
    }
    if (op == DGA_REDUCE_MEAN) {
        float s = (float)g_size;
        for (size_t i = 0; i < n; i++) buf[i] /= s;
    }
    return DGA_OK;
}

/* The requests of the reduction in progress: room reserved by reduce_begin, so that
 * nothing is allocated between two posts. */
static MPI_Request *reqs;
static size_t n_reqs, cap_reqs;

static void wait_pending(void)
{
    if (n_reqs) MPI_Waitall((int)n_reqs, reqs, MPI_STATUSES_IGNORE);
    n_reqs = 0;
}

dga_status dga_comm_reduce_begin(size_t n, size_t max_ranges)
{
    if (red.active) return begin_reduction();   /* the error, before reqs can move */
    dga_status st = dga_comm_init();
    if (st != DGA_OK) return st;
    /* a range of k floats is at most k / PIECE + 1 pieces; the ranges add up to n floats */
    size_t need = max_ranges + n / PIECE + 1;
    if (need > (size_t)INT_MAX) need = INT_MAX;   /* MPI_Waitall's count; more waits first */
    if (need > cap_reqs) {
        MPI_Request *r = realloc(reqs, need * sizeof *r);
        if (!r) return dga_fail(DGA_ERR_NOMEM, "reduce_begin: cannot allocate %zu requests", need);
        reqs = r, cap_reqs = need;
    }
    n_reqs = 0;
    return begin_reduction();
}

dga_status dga_comm_reduce_start(float *buf, size_t n)
{
    dga_status st = check_active("reduce_start");
    if (st != DGA_OK) return st;
    for (size_t off = 0; off < n; off += PIECE) {
        /* more ranges than begin was told: wait for the posted ones rather than allocate
         * (every rank posts the same sequence, so the wait ends) */
        if (n_reqs == cap_reqs) wait_pending();
        int m = (int)(n - off < PIECE ? n - off : PIECE);
        MPI_Request *r = &reqs[n_reqs++];
        if (g_rank == 0)
            MPI_Ireduce(MPI_IN_PLACE, buf + off, m, MPI_FLOAT, MPI_SUM, 0, MPI_COMM_WORLD, r);
        else
            MPI_Ireduce(buf + off, NULL, m, MPI_FLOAT, MPI_SUM, 0, MPI_COMM_WORLD, r);
        red.posted++;
    }
    red.started += n;
    /* Open MPI moves a non-blocking collective on only inside an MPI call: this one lets
     * the posted reductions advance while the caller computes the next range. */
    int done = 0;
    if (n_reqs) MPI_Testall((int)n_reqs, reqs, &done, MPI_STATUSES_IGNORE);
    if (done) n_reqs = 0;
    return DGA_OK;
}

dga_status dga_comm_reduce_finish(float *buf, size_t n, dga_reduce_op op)
{
    dga_status st = check_active("reduce_finish");
    if (st != DGA_OK) return st;
    wait_pending();   /* first: whatever the checks say, nothing stays pending */
    if ((st = end_reduction(n)) != DGA_OK) return st;
    if ((st = check_op(op, "reduce_finish")) != DGA_OK) return st;
    for (size_t off = 0; off < n; off += PIECE)
        MPI_Bcast(buf + off, (int)(n - off < PIECE ? n - off : PIECE), MPI_FLOAT, 0,
                  MPI_COMM_WORLD);
    if (op == DGA_REDUCE_MEAN) {
        float s = (float)g_size;
        for (size_t i = 0; i < n; i++) buf[i] /= s;
    }
    return DGA_OK;
}

dga_status dga_comm_reduce_abandon(dga_status st)
{
    if (!red.active) return st;
    red.active = 0;
    if (red.posted == 0 || g_size == 1) {
        wait_pending();   /* one rank: its own requests complete without anyone else */
        return st;
    }
    /* The other ranks have posted the same reductions and will wait in them, or in the
     * broadcast, for ever: MPI cannot cancel a collective, so the job ends. */
    fprintf(stderr, "dgalua: rank %d of %d: %s (during a gradient reduction)\n", g_rank,
            g_size, dga_last_error());
    dga_comm_finalize(st != DGA_OK ? (int)st : 1);
    return st;   /* not reached: MPI_Abort ends the process */
}

dga_status dga_comm_bcast(void *buf, size_t bytes, int root)
{
    dga_status st = dga_comm_init();
    if (st != DGA_OK) return st;
    if ((st = check_root(root, g_size, "bcast")) != DGA_OK) return st;
    /* every rank learns the root's size first: a mismatch is an error, not an overrun */
    unsigned long long len = bytes;
    MPI_Bcast(&len, 1, MPI_UNSIGNED_LONG_LONG, root, MPI_COMM_WORLD);
    if (len != bytes)
        return dga_fail(DGA_ERR_INVALID, "bcast: rank %d has %zu bytes, root %d has %llu",
                        g_rank, bytes, root, len);
    for (size_t off = 0; off < bytes; off += PIECE)
        MPI_Bcast((char *)buf + off, (int)(bytes - off < PIECE ? bytes - off : PIECE), MPI_BYTE,
                  root, MPI_COMM_WORLD);
    return DGA_OK;
}

dga_status dga_comm_allgather_counts(size_t n, size_t *counts)
{
    dga_status st = dga_comm_init();
    if (st != DGA_OK) return st;
    unsigned long long mine = n, *all = malloc((size_t)g_size * sizeof *all);
    if (!all) return dga_fail(DGA_ERR_NOMEM, "allgather: cannot allocate %d counts", g_size);
    MPI_Allgather(&mine, 1, MPI_UNSIGNED_LONG_LONG, all, 1, MPI_UNSIGNED_LONG_LONG,
                  MPI_COMM_WORLD);
    for (int r = 0; r < g_size; r++) counts[r] = (size_t)all[r];
    free(all);
    return DGA_OK;
}

dga_status dga_comm_allgatherv(const float *send, size_t n, float *recv, const size_t *counts)
{
    dga_status st = dga_comm_init();
    if (st != DGA_OK) return st;
    if (counts[g_rank] != n)
        return dga_fail(DGA_ERR_INVALID, "allgatherv: rank %d sends %zu elements but counts "
                        "says %zu", g_rank, n, counts[g_rank]);
    int *cnt = malloc(2 * (size_t)g_size * sizeof *cnt);
    if (!cnt) return dga_fail(DGA_ERR_NOMEM, "allgatherv: cannot allocate %d counts", g_size);
    int *disp = cnt + g_size;
    size_t total = 0;
    for (int r = 0; r < g_size; r++) {
        if (counts[r] > (size_t)INT_MAX - total) {
            free(cnt);
            return dga_fail(DGA_ERR_INVALID, "allgatherv: %zu elements from rank %d at offset "
                            "%zu: more than MPI's int counts allow", counts[r], r, total);
        }
        cnt[r] = (int)counts[r];
        disp[r] = (int)total;
        total += counts[r];
    }
    MPI_Allgatherv(send, (int)n, MPI_FLOAT, recv, cnt, disp, MPI_FLOAT, MPI_COMM_WORLD);
    free(cnt);
    return DGA_OK;
}

#endif
