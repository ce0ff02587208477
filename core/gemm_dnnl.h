/* Matrix products through oneDNN's matmul primitive, for the model's precisions.
 *
 * Precisions (dga.gpt{precision = ...}):
 *   fp32         the default: every product is OpenBLAS's cblas_sgemm, as always (this file
 *                is not used at all, so the bits are those of every earlier release).
 *   bf16         the linear layers' and the LM head's products (forward and both backward
 *                products) take bf16 inputs (round to nearest even) and accumulate and write
 *                fp32; everything else stays fp32. Only where oneDNN has a native bf16 matmul
 *                (dga_dnnl_bf16_native): elsewhere the model runs fp32 and says so.
 *   fp32-onednn  the same products in fp32 through oneDNN instead of OpenBLAS (other bits).
 *
 * A context caches one primitive per product shape (created on the first product of that
 * shape, then reused) and the buffers the bf16 conversions write into (grown on first use,
 * never shrunk), so a training step allocates nothing once the first one has run.
 * Operands inside a registered "mirror" range (the model's parameters) are read from their
 * bf16 copy, which the model refreshes once per forward (dga_dnnl_mirror_refresh); all
 * others are converted at each product.
 *
 * Threads: the products follow the pool's thread count (dga_pool_threads). By default each
 * pool task runs one oneDNN product over its block of output rows with one OpenMP thread,
 * so no OpenMP team ever exists to spin against the pool or OpenBLAS (README, Performance,
 * has the measurement against oneDNN's own OpenMP threads). DGA_DNNL_THREADS=omp selects
 * oneDNN's OpenMP threads instead (for measurement; OMP_WAIT_POLICY applies then).
 *
 * A context is used by one thread at a time (the pool's owner). */
#ifndef DGA_GEMM_DNNL_H
#define DGA_GEMM_DNNL_H

#include <stddef.h>
#include <stdint.h>

#include "status.h"

typedef enum {
    DGA_PREC_FP32 = 0,
    DGA_PREC_BF16,
    DGA_PREC_FP32_ONEDNN,
} dga_precision;

/* "fp32", "bf16", "fp32-onednn". */
const char *dga_precision_name(dga_precision p);
/* The precision named s; DGA_ERR_INVALID (listing the names) otherwise. */
dga_status  dga_precision_parse(const char *s, dga_precision *out);

/* oneDNN's effective CPU ISA, as its short name ("avx2", "avx512_core_bf16", ...). */
const char *dga_dnnl_isa_name(void);
/* 1 if oneDNN has a native bf16 matmul here (an ISA with bf16 dot products, AVX512-BF16 or
 * AMX, and the primitive can be created), else 0. On other CPUs oneDNN 2.6 either has no
 * bf16 matmul (AVX2: "unimplemented") or emulates it more slowly than fp32 (AVX-512 without
 * BF16). */
int         dga_dnnl_bf16_native(void);

/* Test hook: with on = 1, bf16 products run where there is no native bf16 matmul by rounding
 * both inputs to bf16 (stored back as fp32) and multiplying them in fp32 through oneDNN:
 * the same rounding as bf16, so the same numerics up to the accumulation order, at fp32's
 * speed. Read when a context is created; also set by DGA_BF16_EMULATE=1. */
void        dga_dnnl_set_emulate_bf16(int on);
int         dga_dnnl_emulate_bf16(void);

/* The precision a model asked for `requested` actually runs here: bf16 without a native
 * (or emulated) bf16 matmul becomes fp32, with *why set to a one-line reason (else NULL). */
dga_precision dga_dnnl_effective(dga_precision requested, const char **why);

typedef struct dga_dnnl dga_dnnl;

/* A context for precision p (bf16 or fp32-onednn; fp32 needs none). */
dga_status dga_dnnl_create(dga_precision p, dga_dnnl **out);
void       dga_dnnl_free(dga_dnnl *g);
dga_precision dga_dnnl_precision(const dga_dnnl *g);

/* Registers [base, base + n) as having a bf16 copy (bf16 only; allocated here), and refreshes
 * the copy of its sub-ranges [off, off + len): the model's matrices, once per forward. */
dga_status dga_dnnl_mirror(dga_dnnl *g, const float *base, size_t n);
void       dga_dnnl_mirror_refresh(dga_dnnl *g, size_t off, size_t len);

/* C[M,N] = op(A)[M,K] op(B)[K,N] (+ C if accumulate), all row-major with leading dimensions
 * lda, ldb, ldc; op(X) = X^T where tX. A failure (no memory, a primitive oneDNN refuses) is
 * recorded in the context and returned; products after it are skipped until
 * dga_dnnl_take_status, so a forward reports the first failure once. */
dga_status dga_dnnl_gemm(dga_dnnl *g, int ta, int tb, int M, int N, int K, const float *A,
                         int lda, const float *B, int ldb, float *C, int ldc, int accumulate);
/* The first failure since the last call (DGA_OK if none), its message restored as the
 * calling thread's last error; clears it. */
dga_status dga_dnnl_take_status(dga_dnnl *g);

/* f32 -> bf16, round to nearest even (NaN stays NaN), n values; pooled over the threads. */
void dga_bf16_from_f32(uint16_t *dst, const float *src, size_t n);
float dga_bf16_to_f32(uint16_t b);

#endif
