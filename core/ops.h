/* Fused forward/backward kernels of the GPT-2 layers, on flat float buffers.
 *
 * Conventions (llm.c's): N = B*T rows, row-major activations [N, C]; linear weights are
 * stored [in, out] (Hugging Face Conv1D); every matmul goes through cblas_sgemm, or, for
 * the linear layers and the head of a model in another precision, oneDNN (the _mm variants).
 * Backward kernels ACCUMULATE into parameter gradients (dw, db) so a step can sum several
 * batches; for activation gradients each function says whether it overwrites or accumulates.
 * No kernel allocates memory, checks arguments or fails: callers (gpt.c) validate first.
 *
 * Forward mode: dga_op_<op>_jvp is the tangent rule of <op>. Given the primal inputs and the
 * tangents (directional derivatives along one direction) of the inputs and the parameters,
 * it writes the tangent of the output (OVERWRITTEN). A JVP is the transpose of the
 * backward: <v, jvp(u)> = <bwd(v), u> for every u and v, which is how tests check them.
 * Tangents are named t* (tout, tinp, tw), gradients of the backward d* (dout, dinp, dw). */
#ifndef DGA_OPS_H
#define DGA_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "gemm_dnnl.h"

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

/* tout [B,T,C] = twte[tok] + twpe[t]: the embedding is linear in its tables. */
void dga_op_embed_jvp(float *tout, const int32_t *tok, const float *twte, const float *twpe,
                      int B, int T, int C);

/* out = (x - mean) * rstd * w + b per row, eps 1e-5; mean, rstd [N] saved (may be NULL). */
void dga_op_layernorm_fwd(float *out, float *mean, float *rstd, const float *inp,
                          const float *w, const float *b, size_t N, int C);
/* dinp += ..., dw += ..., db += ...  (inp, mean, rstd as saved by the forward). */
void dga_op_layernorm_bwd(float *dinp, float *dw, float *db, const float *dout,
                          const float *inp, const float *w, const float *mean,
                          const float *rstd, size_t N, int C);

/* tout [N,C] = (r (tx - mean(tx) - xhat mean(xhat tx))) * w + xhat * tw + tb per row, with
 * xhat = (x - mean) * rstd; inp, tinp [N,C]; w, tw, tb [C]; mean, rstd [N] as saved by the
 * forward on the same inp. */
void dga_op_layernorm_jvp(float *tout, const float *inp, const float *tinp, const float *w,
                          const float *tw, const float *tb, const float *mean,
                          const float *rstd, size_t N, int C);

/* out [N,OC] = inp [N,IC] @ w [IC,OC] + bias [OC] (bias may be NULL). */
void dga_op_linear_fwd(float *out, const float *inp, const float *w, const float *bias,
                       size_t N, int IC, int OC);
/* dinp [N,IC] = dout @ w^T (OVERWRITTEN; skipped if NULL); dw += inp^T @ dout;
 * db += column sums of dout (skipped if NULL). */
void dga_op_linear_bwd(float *dinp, float *dw, float *db, const float *dout,
                       const float *inp, const float *w, size_t N, int IC, int OC);

/* The same with the products in a oneDNN context's precision (gemm_dnnl.h); mm NULL is
 * OpenBLAS, exactly the functions above. A product's failure is kept in mm (taken by
 * dga_dnnl_take_status), so these stay void like every kernel. */
void dga_op_linear_fwd_mm(dga_dnnl *mm, float *out, const float *inp, const float *w,
                          const float *bias, size_t N, int IC, int OC);
void dga_op_linear_bwd_mm(dga_dnnl *mm, float *dinp, float *dw, float *db, const float *dout,
                          const float *inp, const float *w, size_t N, int IC, int OC);

/* tout [N,OC] = tinp [N,IC] @ w + inp @ tw [IC,OC] + tbias [OC]: two sgemms.
 * tinp NULL: the input is constant (term skipped); tbias NULL: no bias tangent. */
void dga_op_linear_jvp(float *tout, const float *inp, const float *tinp, const float *w,
                       const float *tw, const float *tbias, size_t N, int IC, int OC);

/* Tied output head: logits [N,V] = inp [N,C] @ wte^T, wte [V,C]. */
void dga_op_lmhead_fwd(float *logits, const float *inp, const float *wte, size_t N, int C,
                       int V);
/* dinp [N,C] = dlogits @ wte (OVERWRITTEN); dwte += dlogits^T @ inp. */
void dga_op_lmhead_bwd(float *dinp, float *dwte, const float *dlogits, const float *inp,
                       const float *wte, size_t N, int C, int V);

void dga_op_lmhead_fwd_mm(dga_dnnl *mm, float *logits, const float *inp, const float *wte,
                          size_t N, int C, int V);
void dga_op_lmhead_bwd_mm(dga_dnnl *mm, float *dinp, float *dwte, const float *dlogits,
                          const float *inp, const float *wte, size_t N, int C, int V);

/* tlogits [N,V] = tinp [N,C] @ wte^T + inp @ twte^T (wte, twte [V,C]). */
void dga_op_lmhead_jvp(float *tlogits, const float *inp, const float *tinp, const float *wte,
                       const float *twte, size_t N, int C, int V);

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
 * and tout [B,T,C] from tqkv [B,T,3C]. Per head, with P = softmax(S), S = scale Q K^T:
 *   dS = scale (dQ K^T + Q dK^T),  dP = P * (dS - rowsum(P * dS)),  dY = dP V + P dV.
 * The probabilities of one head live only in scratch [2,T,T] (P, then dS/dP), so nothing of
 * size B*NH*T*T is stored: the tangent needs P only while its head is being processed. */
void dga_op_attention_jvp(float *out, float *tout, float *scratch, const float *qkv,
                          const float *tqkv, int B, int T, int C, int NH);

/* GELU, tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). */
void dga_op_gelu_fwd(float *out, const float *inp, size_t n);
/* dinp = gelu'(inp) * dout (OVERWRITTEN; dinp may alias dout). */
void dga_op_gelu_bwd(float *dinp, const float *inp, const float *dout, size_t n);

/* tout = gelu'(inp) * tinp (tout may alias tinp): elementwise, so the same numbers as the
 * backward, applied to a tangent instead of a cotangent. */
void dga_op_gelu_jvp(float *tout, const float *inp, const float *tinp, size_t n);

/* out = a + b (out may alias a). */
void dga_op_residual_fwd(float *out, const float *a, const float *b, size_t n);
/* da += dout, db += dout. */
void dga_op_residual_bwd(float *da, float *db, const float *dout, size_t n);

/* tout = ta + tb (tout may alias ta). */
void dga_op_residual_jvp(float *tout, const float *ta, const float *tb, size_t n);

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
 * -log softmax(row)[target] and sets *tloss = dscale * sum (softmax(row) - onehot) . trow.
 * With dscale = 1 / (number of such rows) that is the derivative of the mean loss, as
 * dga_op_xent_fwd_bwd's dscale makes its gradient. logits, tlogits [N,V]; the sums are
 * accumulated in double. */
double dga_op_xent_jvp(const float *logits, const float *tlogits, const int32_t *targets,
                       size_t N, int V, float dscale, double *tloss);

#endif
