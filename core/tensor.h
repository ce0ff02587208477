/* Tensors: contiguous row-major arrays of float32 or int32, up to 4-D, reference counted.
 *
 * A tensor either owns its data or is a view into another tensor's data (it then holds a
 * reference on that base). Lua userdata box a dga_tensor* and release one reference in
 * __gc/__close, so C code may keep a tensor alive beyond the Lua value (Torch7's design).
 *
 * The elementwise helpers below serve the mixing policies, where vectors have k entries
 * (k up to 262,144): reductions accumulate in double. */
#ifndef DGA_TENSOR_H
#define DGA_TENSOR_H

#include <stddef.h>
#include <stdint.h>

#include "status.h"

typedef enum { DGA_F32 = 0, DGA_I32 = 1 } dga_dtype;

#define DGA_MAX_DIMS 4

typedef struct dga_tensor {
    dga_dtype dtype;
    int       ndim;
    int64_t   shape[DGA_MAX_DIMS];
    int64_t   numel;
    void     *data;
    int       refcount;
    struct dga_tensor *base;   /* non-NULL for a view: data lives in base */
} dga_tensor;

/* New zero-filled tensor; refcount 1. ndim 1..4, every dimension >= 0. */
dga_status dga_tensor_new(dga_dtype dtype, int ndim, const int64_t *shape, dga_tensor **out);
/* A view of `numel(shape)` elements starting at element `offset` of base (same dtype). */
dga_status dga_tensor_view(dga_tensor *base, int64_t offset, int ndim, const int64_t *shape,
                           dga_tensor **out);
dga_status dga_tensor_clone(const dga_tensor *src, dga_tensor **out);
void       dga_tensor_retain(dga_tensor *t);
void       dga_tensor_release(dga_tensor *t);     /* NULL is fine; frees at refcount 0 */

static inline float   *dga_tensor_f32(const dga_tensor *t) { return (float *)t->data; }
static inline int32_t *dga_tensor_i32(const dga_tensor *t) { return (int32_t *)t->data; }

/* "float32[3x4]" into buf; returns buf. */
const char *dga_tensor_describe(const dga_tensor *t, char *buf, size_t size);

/* --- float32 vector math (any shape, treated as flat; shapes of a and b must match) --- */
dga_status dga_tensor_check_finite(const dga_tensor *t, const char *what);
double     dga_tensor_sum(const dga_tensor *t);
double     dga_tensor_dot(const dga_tensor *a, const dga_tensor *b, dga_status *st);
double     dga_tensor_min(const dga_tensor *t);
double     dga_tensor_max(const dga_tensor *t);
int64_t    dga_tensor_argmax(const dga_tensor *t);
/* In place: t = t + b, t = t * b (elementwise), t = a*t + c, exp(t), log(t) */
dga_status dga_tensor_add_(dga_tensor *t, const dga_tensor *b);
dga_status dga_tensor_mul_(dga_tensor *t, const dga_tensor *b);
void       dga_tensor_affine_(dga_tensor *t, double a, double c);
void       dga_tensor_exp_(dga_tensor *t);
dga_status dga_tensor_log_(dga_tensor *t);        /* error on negative entries */
/* t = t / sum(t); an error unless every entry is finite and >= 0 and the sum is > 0. */
dga_status dga_tensor_normalize_(dga_tensor *t);
/* An error (naming `what`) unless t is a probability vector: finite, >= 0, sums to 1 within
 * tol. */
dga_status dga_tensor_check_distribution(const dga_tensor *t, double tol, const char *what);

/* --- additions (tensor engineer): the rest of the elementwise API behind dga.tensor --- */
size_t      dga_dtype_size(dga_dtype dtype);            /* 4 for both */
const char *dga_dtype_name(dga_dtype dtype);            /* "float32" / "int32" */
int         dga_tensor_same_shape(const dga_tensor *a, const dga_tensor *b);
/* Element i (flat) as a double, whatever the dtype. */
double      dga_tensor_get(const dga_tensor *t, int64_t i);

typedef enum { DGA_OP_ADD = 0, DGA_OP_SUB, DGA_OP_MUL, DGA_OP_DIV } dga_binop;
/* t = t op b elementwise. Same shape and dtype; int32 division and int32 overflow are
 * errors (and leave t untouched). */
dga_status dga_tensor_binop_(dga_tensor *t, const dga_tensor *b, dga_binop op);
/* t = t op x, or t = x op t when `reversed`. For int32, x must be an integer. */
dga_status dga_tensor_scalar_op_(dga_tensor *t, double x, dga_binop op, int reversed);
dga_status dga_tensor_fill_(dga_tensor *t, double x);     /* int32: x must be an integer */
/* Same number of elements (shapes may differ); int32 <- float32 needs integral values. */
dga_status dga_tensor_copy_(dga_tensor *t, const dga_tensor *src);
/* Reductions in double; mean/std of an empty tensor are NaN; std is the population std
 * (divides by n, as numpy.std). min/max of an empty tensor are NaN; argmax of one is -1
 * (0-based here; the binding adds 1). dot needs the same shape. */
double     dga_tensor_mean(const dga_tensor *t);
double     dga_tensor_std(const dga_tensor *t);
double     dga_tensor_norm(const dga_tensor *t);

#endif
