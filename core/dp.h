/* Data parallelism: one backward whose gradient is summed over the ranks while it is being
 * computed. Every rank differentiates its own rows of the global batch; as the architecture
 * announces each range of the gradient final (dga_model_backward: GPT-2's ln_f, then each
 * block from the last, then the embeddings), the range is scaled and its reduction to rank 0
 * started (dga_comm_reduce_start), so the reduction of the last blocks runs while the first
 * ones are differentiated; rank 0's sum is then broadcast (dga_comm_reduce_finish).
 *
 * The result is the sum over ranks of scale * each rank's gradient, the same bits on every
 * rank, as backward then scaling then dga_comm_allreduce gives it: bit for bit at one and two
 * ranks; at more ranks MPI may associate a range's sum differently from the whole buffer's,
 * so the last bits can differ from that non-overlapped sequence (comm.h). */
#ifndef DGA_DP_H
#define DGA_DP_H

#include "model.h"
#include "status.h"

/* dga_model_backward(m) with the gradient buffer then holding the sum over ranks of scale
 * times each rank's buffer (scale: this rank's share of the global batch, rows / B, makes it
 * the global batch's mean gradient). Every rank must call it, after a forward. A failure
 * before any range is sent (no forward) is returned; one after ends the job (comm.h). */
dga_status dga_dp_backward(dga_model *m, float scale);

/* The same sum after the backward, in one collective over the whole buffer (the
 * non-overlapped baseline, m:allreduce_grads): scale, then dga_comm_allreduce. */
dga_status dga_dp_allreduce(dga_model *m, float scale);

#endif
