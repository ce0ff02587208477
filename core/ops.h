/* Fused forward/backward kernels of the GPT-2 layers, on flat float buffers.
 *
 * Conventions (llm.c's): N = B*T rows, row-major activations [N, C]; linear weights are
 * stored [in, out] (Hugging Face Conv1D); every matmul goes through cblas_sgemm.
 * Backward kernels ACCUMULATE into parameter gradients (dw, db) so a step can sum several
 * batches; for activation gradients each function says whether it overwrites or accumulates.
 * No kernel allocates memory, checks arguments or fails: callers (gpt.c) validate first.
 *
 * Forward mode: dga_op_<op>_jvp is the tangent rule of <op>. Given the primal inputs and the
 * tangents (directional derivatives along one direction) of the inputs and the parameters,
 * it writes the tangent of the output (OVERWRITTEN). A JVP is the transpose of the
 * backward: <v, jvp(u)> = <bwd(v), u> for every u and v, which is how tests check them. */
#ifndef DGA_OPS_H
#define DGA_OPS_H

#include <stddef.h>
#include <stdint.h>

/* exp(x) for float, vectorisable (Cody-Waite range reduction + degree-7 polynomial, relative
 * error < 5e-7 on [-87, 88]; clamps its argument to that interval, so it never returns 0 or
 * inf; NaN stays NaN). */
float dga_fast_expf(float x);

/* out[b,t,:] = wte[tok[b,t],:] + wpe[t,:].  tok [B,T] must already be valid ids.
 * wte [V,C], wpe [T_max,C], out [B,T,C]. */
void dga_op_embed_fwd(float *out, const int32_t *tok, const float *wte, const float *wpe,
                      int B, int T, int C);
/* dwte[tok] += dout, dwpe[t] += dout (sequential: deterministic). */
void dga_op_embed_bwd(float *dwte, float *dwpe, const float *dout, const int32_t *tok,
                      int B, int T, int C);

/* dout [B,T,C] = dwte[tok] + dwpe[t]: the embedding is linear in its tables. */
void dga_op_embed_jvp(float *dout, const int32_t *tok, const float *dwte, const float *dwpe,
                      int B, int T, int C);

/* out = (x - mean) * rstd * w + b per row, eps 1e-5; mean, rstd [N] saved (may be NULL). */
void dga_op_layernorm_fwd(float *out, float *mean, float *rstd, const float *inp,
                          const float *w, const float *b, size_t N, int C);
/* dinp += ..., dw += ..., db += ...  (inp, mean, rstd as saved by the forward). */
void dga_op_layernorm_bwd(float *dinp, float *dw, float *db, const float *dout,
                          const float *inp, const float *w, const float *mean,
                          const float *rstd, size_t N, int C);

/* dout [N,C] = (r (dx - mean(dx) - xhat mean(xhat dx))) * w + xhat * dw + db per row, with
 * xhat = (x - mean) * rstd; inp, dinp [N,C]; w, dw, db [C]; mean, rstd [N] as saved by the
 * forward on the same inp. */
void dga_op_layernorm_jvp(float *dout, const float *inp, const float *dinp, const float *w,
                          const float *dw, const float *db, const float *mean,
                          const float *rstd, size_t N, int C);

/* out [N,OC] = inp [N,IC] @ w [IC,OC] + bias [OC] (bias may be NULL). */
void dga_op_linear_fwd(float *out, const float *inp, const float *w, const float *bias,
                       size_t N, int IC, int OC);
/* dinp [N,IC] = dout @ w^T (OVERWRITTEN; skipped if NULL); dw += inp^T @ dout;
 * db += column sums of dout (skipped if NULL). */
void dga_op_linear_bwd(float *dinp, float *dw, float *db, const float *dout,
                       const float *inp, const float *w, size_t N, int IC, int OC);

/* dout [N,OC] = dinp [N,IC] @ w + inp @ dw [IC,OC] + dbias [OC]: two sgemms.
 * dinp NULL: the input is constant (term skipped); dbias NULL: no bias tangent. */
void dga_op_linear_jvp(float *dout, const float *inp, const float *dinp, const float *w,
                       const float *dw, const float *dbias, size_t N, int IC, int OC);

/* Tied output head: logits [N,V] = inp [N,C] @ wte^T, wte [V,C]. */
void dga_op_lmhead_fwd(float *logits, const float *inp, const float *wte, size_t N, int C,
                       int V);
/* dinp [N,C] = dlogits @ wte (OVERWRITTEN); dwte += dlogits^T @ inp. */
void dga_op_lmhead_bwd(float *dinp, float *dwte, const float *dlogits, const float *inp,
                       const float *wte, size_t N, int C, int V);

/* dlogits [N,V] = dinp [N,C] @ wte^T + inp @ dwte^T (wte, dwte [V,C]). */
void dga_op_lmhead_jvp(float *dlogits, const float *inp, const float *dinp, const float *wte,
                       const float *dwte, size_t N, int C, int V);

/* Causal multi-head attention over qkv [B,T,3C] (q|k|v, heads contiguous within each):
 * out [B,T,C]. Softmax probabilities are written to att + (b*NH + h) * att_stride as [T,T]
 * (row i holds keys 0..i, zeros after); att_stride = T*T keeps them all for backward,
 * att_stride = 0 reuses one [T,T] scratch (inference). */
void dga_op_attention_fwd(float *out, float *att, size_t att_stride, const float *qkv,
                          int B, int T, int C, int NH);
/* dqkv [B,T,3C] OVERWRITTEN; datt is a [T,T] scratch. att as saved with stride T*T. */
void dga_op_attention_bwd(float *dqkv, float *datt, const float *dout, const float *qkv,
                          const float *att, int B, int T, int C, int NH);

/* Forward and tangent of attention together: out [B,T,C] as dga_op_attention_fwd writes it
 * and dout [B,T,C] from dqkv [B,T,3C]. Per head, with P = softmax(S), S = scale Q K^T:
 *   dS = scale (dQ K^T + Q dK^T),  dP = P * (dS - rowsum(P * dS)),  dY = dP V + P dV.
 * The probabilities of one head live only in scratch [2,T,T] (P, then dS/dP), so nothing of
 * size B*NH*T*T is stored: the tangent needs P only while its head is being processed. */
void dga_op_attention_jvp(float *out, float *dout, float *scratch, const float *qkv,
                          const float *dqkv, int B, int T, int C, int NH);

/* GELU, tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). */
void dga_op_gelu_fwd(float *out, const float *inp, size_t n);
/* dinp = gelu'(inp) * dout (OVERWRITTEN; dinp may alias dout). */
void dga_op_gelu_bwd(float *dinp, const float *inp, const float *dout, size_t n);

/* dout = gelu'(inp) * dinp (dout may alias dinp): elementwise, so the same numbers as the
 * backward, applied to a tangent instead of a cotangent. */
void dga_op_gelu_jvp(float *dout, const float *inp, const float *dinp, size_t n);

/* out = a + b (out may alias a). */
void dga_op_residual_fwd(float *out, const float *a, const float *b, size_t n);
/* da += dout, db += dout. */
void dga_op_residual_bwd(float *da, float *db, const float *dout, size_t n);

/* dout = da + db (dout may alias da). */
void dga_op_residual_jvp(float *dout, const float *da, const float *db, size_t n);

/* Negative log-likelihood -log softmax(logits)[target] of one row of V logits (double). */
double dga_op_xent_row(const float *logits, int V, int target);

/* Fused softmax + cross-entropy + its backward, for training: for each of the N rows with
 * targets[i] != DGA_IGNORE (-1), adds -log softmax(row)[target] to the returned sum, stores
 * it in row_loss[i] (row_loss may be NULL; 0 for ignored rows) and replaces the row by
 * dscale * (softmax(row) - onehot(target)); rows with ignored targets become zeros. Targets
 * must already be valid. */
double dga_op_xent_fwd_bwd(float *logits, float *row_loss, const int32_t *targets, size_t N,
                           int V, float dscale);

/* Cross-entropy and its directional derivative, logits left intact: over the N rows whose
 * target is not DGA_IGNORE (exactly the rows dga_op_xent_fwd_bwd counts), returns the sum of
 * -log softmax(row)[target] and sets *dloss = dscale * sum (softmax(row) - onehot) . drow.
 * With dscale = 1 / (number of such rows) that is the derivative of the mean loss, as
 * dga_op_xent_fwd_bwd's dscale makes its gradient. logits, dlogits [N,V]; the sums are
 * accumulated in double. */
double dga_op_xent_jvp(const float *logits, const float *dlogits, const int32_t *targets,
                       size_t N, int V, float dscale, double *dloss);

#endif
