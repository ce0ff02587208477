/* Collective communication between the processes of a job: MPI when dgalua is built with
 * it (make MPI=1: build/mpi/dgalua, compiled with DGA_MPI), otherwise a one-process stub
 * with the same API (rank 0, size 1), so code written for several ranks runs unchanged on
 * one.
 *
 * - MPI starts on the first call that needs it (dga_comm_init, or any collective), with
 *   MPI_THREAD_FUNNELED: only the thread that drives the kernels calls MPI; the pool's
 *   workers never do.
 * - Failure: errors in MPI calls are fatal (MPI_ERRORS_ARE_FATAL, set explicitly), and a
 *   rank that exits with a non-zero status calls MPI_Abort after a message naming its rank,
 *   so the whole job ends non-zero instead of the other ranks waiting in a collective for
 *   ever. A rank killed by a signal is caught by mpirun, which ends the job the same way.
 *   A zero exit finalizes MPI.
 * - Every rank must make the same collective calls in the same order with matching sizes;
 *   sizes are checked where a mismatch would otherwise corrupt memory (bcast, allgatherv). */
#ifndef DGA_COMM_H
#define DGA_COMM_H

#include <stddef.h>

#include "status.h"

typedef enum { DGA_REDUCE_SUM = 0, DGA_REDUCE_MEAN = 1 } dga_reduce_op;

/* 1 if built with MPI. */
int        dga_comm_has_mpi(void);
/* Starts MPI if it is not running yet (idempotent; the stub: nothing to do). */
dga_status dga_comm_init(void);
/* Ends MPI (idempotent): MPI_Finalize for status 0, MPI_Abort(status) otherwise; called by
 * itself at exit, so programs rarely need it. */
void       dga_comm_finalize(int status);

/* This process's rank in 0..size-1 and the number of processes (starting MPI if needed;
 * 0 and 1 if it cannot start, with the error recorded). */
int        dga_comm_rank(void);
int        dga_comm_size(void);

/* buf[0..n) <- the elementwise sum (or mean) of every rank's buf, in place, the same bits
 * on every rank. */
dga_status dga_comm_allreduce(float *buf, size_t n, dga_reduce_op op);

/* The same sum, started range by range while the buffer is still being written (data
 * parallelism overlaps it with the backward pass: dp.h), finished once:
 *
 *   dga_comm_reduce_begin(n, max_ranges)     reserves room for every request (may fail:
 *                                            nothing is posted yet)
 *   dga_comm_reduce_start(buf + off, count)  for disjoint ranges covering buf[0..n) once,
 *                                            each final (not written again until finish)
 *   dga_comm_reduce_finish(buf, n, op)       buf[0..n) <- the sum (or mean), on every rank
 *
 * Each range is summed to rank 0 by MPI_Ireduce (pieces of at most 2^30 floats), and finish
 * waits for them all, then broadcasts rank 0's buffer: every rank gets the same bits. At two
 * ranks those are the bits of dga_comm_allreduce (one addition per element, whatever the
 * order); at more ranks MPI may associate the sum of a range differently from the one of
 * the whole buffer, so they can differ in the last bits from dga_comm_allreduce's (the same
 * on every rank still). Every rank must start the same ranges in the same order.
 * Open MPI's non-blocking collectives progress only inside MPI calls: every start also calls
 * MPI_Testall on the pending requests.
 * Failure: a reduction cannot be taken back once one of its ranges is posted (the other ranks
 * have posted theirs and wait for this one's), so dga_comm_reduce_abandon then ends the job
 * (dga_comm_finalize); before that it only resets. The stub: start does nothing, finish
 * checks op (one rank: the sum and the mean are the buffer). */
dga_status dga_comm_reduce_begin(size_t n, size_t max_ranges);
/* Fails, posting nothing, only outside begin .. finish. More than max_ranges ranges is
 * correct, only less overlapped: the pending requests are waited for to make room. */
dga_status dga_comm_reduce_start(float *buf, size_t n);
/* Waits for the ranges, then broadcasts. The ranges must have covered n floats (else an
 * error, on every rank alike, after the wait: nothing stays pending). */
dga_status dga_comm_reduce_finish(float *buf, size_t n, dga_reduce_op op);
/* After a failure between begin and finish: returns st when no range was started; ends the
 * job (a message naming the rank, then MPI_Abort) when one was, on more than one rank. */
dga_status dga_comm_reduce_abandon(dga_status st);

/* buf[0..bytes) <- root's, on every rank. */
dga_status dga_comm_bcast(void *buf, size_t bytes, int root);
/* counts[r] <- rank r's n, for every rank r (counts has dga_comm_size() entries). */
dga_status dga_comm_allgather_counts(size_t n, size_t *counts);
/* recv <- every rank's send concatenated in rank order; counts as dga_comm_allgather_counts
 * gave them (counts[own rank] must equal n). */
dga_status dga_comm_allgatherv(const float *send, size_t n, float *recv, const size_t *counts);

#endif
