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
/* buf[0..bytes) <- root's, on every rank. */
dga_status dga_comm_bcast(void *buf, size_t bytes, int root);
/* counts[r] <- rank r's n, for every rank r (counts has dga_comm_size() entries). */
dga_status dga_comm_allgather_counts(size_t n, size_t *counts);
/* recv <- every rank's send concatenated in rank order; counts as dga_comm_allgather_counts
 * gave them (counts[own rank] must equal n). */
dga_status dga_comm_allgatherv(const float *send, size_t n, float *recv, const size_t *counts);

#endif
