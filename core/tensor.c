#include "tensor.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

size_t dga_dtype_size(dga_dtype dtype) { (void)dtype; return 4; }

const char *dga_dtype_name(dga_dtype dtype) { return dtype == DGA_I32 ? "int32" : "float32"; }

static dga_status check_shape(int ndim, const int64_t *shape, int64_t *numel)
{
    if (ndim < 1 || ndim > DGA_MAX_DIMS)
        return dga_fail(DGA_ERR_INVALID, "tensor: %d dimensions (expected 1 to %d)", ndim,
                        DGA_MAX_DIMS);
    int64_t n = 1;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] < 0)
            return dga_fail(DGA_ERR_INVALID, "tensor: dimension %d is %" PRId64
                            " (expected >= 0)", d + 1, shape[d]);
        if (shape[d] > 0 && n > INT64_MAX / 8 / shape[d])
            return dga_fail(DGA_ERR_INVALID, "tensor: shape too large");
        n *= shape[d];
    }
    *numel = n;
    return DGA_OK;
}

dga_status dga_tensor_new(dga_dtype dtype, int ndim, const int64_t *shape, dga_tensor **out)
{
    *out = NULL;
    if (dtype != DGA_F32 && dtype != DGA_I32)
        return dga_fail(DGA_ERR_INVALID, "tensor: unknown dtype %d", (int)dtype);
    int64_t numel;
    dga_status st = check_shape(ndim, shape, &numel);
    if (st != DGA_OK) return st;
    dga_tensor *t = calloc(1, sizeof *t);
    /* calloc(numel ? numel : 1): a 0-element tensor still gets a valid pointer. */
    void *data = calloc(numel > 0 ? (size_t)numel : 1, dga_dtype_size(dtype));
    if (!t || !data) {
        free(t);
        free(data);
        return dga_fail(DGA_ERR_NOMEM, "tensor: cannot allocate %" PRId64 " elements", numel);
    }
    t->dtype = dtype;
    t->ndim = ndim;
    memcpy(t->shape, shape, (size_t)ndim * sizeof *shape);
    t->numel = numel;
    t->data = data;
    t->refcount = 1;
    *out = t;
    return DGA_OK;
}

dga_status dga_tensor_view(dga_tensor *base, int64_t offset, int ndim, const int64_t *shape,
                           dga_tensor **out)
{
    *out = NULL;
    int64_t numel;
    dga_status st = check_shape(ndim, shape, &numel);
    if (st != DGA_OK) return st;
    if (offset < 0 || offset > base->numel || numel > base->numel - offset)
        return dga_fail(DGA_ERR_INVALID, "tensor view: elements [%" PRId64 ", %" PRId64
                        ") outside the %" PRId64 " elements of the base", offset,
                        offset + numel, base->numel);
    dga_tensor *t = calloc(1, sizeof *t);
    if (!t) return dga_fail(DGA_ERR_NOMEM, "tensor view: out of memory");
    /* A view of a view holds its reference on the owner, so chains never form. */
    dga_tensor *owner = base->base ? base->base : base;
    dga_tensor_retain(owner);
    t->dtype = base->dtype;
    t->ndim = ndim;
    memcpy(t->shape, shape, (size_t)ndim * sizeof *shape);
    t->numel = numel;
    t->data = (char *)base->data + offset * (int64_t)dga_dtype_size(base->dtype);
    t->refcount = 1;
    t->base = owner;
    *out = t;
    return DGA_OK;
}

dga_status dga_tensor_clone(const dga_tensor *src, dga_tensor **out)
{
    dga_status st = dga_tensor_new(src->dtype, src->ndim, src->shape, out);
    if (st != DGA_OK) return st;
    memcpy((*out)->data, src->data, (size_t)src->numel * dga_dtype_size(src->dtype));
    return DGA_OK;
}

void dga_tensor_retain(dga_tensor *t) { t->refcount++; }

void dga_tensor_release(dga_tensor *t)
{
    if (!t || --t->refcount > 0) return;
    if (t->base)
        dga_tensor_release(t->base);
    else
        free(t->data);
    free(t);
}

const char *dga_tensor_describe(const dga_tensor *t, char *buf, size_t size)
{
    size_t n = 0;
    int w = snprintf(buf, size, "%s[", dga_dtype_name(t->dtype));
    if (w > 0) n = (size_t)w;
    for (int d = 0; d < t->ndim && n < size; d++) {
        w = snprintf(buf + n, size - n, d ? "x%" PRId64 : "%" PRId64, t->shape[d]);
        if (w > 0) n += (size_t)w;
    }
    if (n < size) snprintf(buf + n, size - n, "]");
    return buf;
}

int dga_tensor_same_shape(const dga_tensor *a, const dga_tensor *b)
{
    if (a->ndim != b->ndim) return 0;
    for (int d = 0; d < a->ndim; d++)
        if (a->shape[d] != b->shape[d]) return 0;
    return 1;
}

double dga_tensor_get(const dga_tensor *t, int64_t i)
{
    return t->dtype == DGA_F32 ? (double)dga_tensor_f32(t)[i] : (double)dga_tensor_i32(t)[i];
}

static dga_status shape_mismatch(const char *op, const dga_tensor *a, const dga_tensor *b)
{
    char x[96], y[96];
    return dga_fail(DGA_ERR_INVALID, "%s: shape mismatch: %s vs %s", op,
                    dga_tensor_describe(a, x, sizeof x), dga_tensor_describe(b, y, sizeof y));
}

static dga_status need_f32(const dga_tensor *t, const char *op)
{
    if (t->dtype == DGA_F32) return DGA_OK;
    return dga_fail(DGA_ERR_INVALID, "%s: needs a float32 tensor, got int32", op);
}

static int is_int32_value(double x) { return x == floor(x) && x >= INT32_MIN && x <= INT32_MAX; }

/* ---- reductions ---- */

dga_status dga_tensor_check_finite(const dga_tensor *t, const char *what)
{
    if (t->dtype != DGA_F32) return DGA_OK;
    const float *x = dga_tensor_f32(t);
    for (int64_t i = 0; i < t->numel; i++)
        if (!isfinite(x[i]))
            return dga_fail(DGA_ERR_INVALID, "%s: entry %" PRId64 " is %g (expected finite)",
                            what, i + 1, (double)x[i]);
    return DGA_OK;
}

double dga_tensor_sum(const dga_tensor *t)
{
    double s = 0;
    if (t->dtype == DGA_F32) {
        const float *x = dga_tensor_f32(t);
        for (int64_t i = 0; i < t->numel; i++) s += x[i];
    } else {
        const int32_t *x = dga_tensor_i32(t);
        for (int64_t i = 0; i < t->numel; i++) s += x[i];
    }
    return s;
}

double dga_tensor_mean(const dga_tensor *t)
{
    return t->numel ? dga_tensor_sum(t) / (double)t->numel : NAN;
}

double dga_tensor_std(const dga_tensor *t)
{
    if (!t->numel) return NAN;
    /* Two passes: the textbook one-pass formula cancels badly for large means. */
    double mean = dga_tensor_mean(t), ss = 0;
    for (int64_t i = 0; i < t->numel; i++) {
        double d = dga_tensor_get(t, i) - mean;
        ss += d * d;
    }
    return sqrt(ss / (double)t->numel);
}

double dga_tensor_norm(const dga_tensor *t)
{
    double ss = 0;
    for (int64_t i = 0; i < t->numel; i++) {
        double v = dga_tensor_get(t, i);
        ss += v * v;
    }
    return sqrt(ss);
}

double dga_tensor_dot(const dga_tensor *a, const dga_tensor *b, dga_status *st)
{
    if (!dga_tensor_same_shape(a, b)) {
        dga_status s = shape_mismatch("dot", a, b);
        if (st) *st = s;
        return NAN;
    }
    if (st) *st = DGA_OK;
    double s = 0;
    if (a->dtype == DGA_F32 && b->dtype == DGA_F32) {
        const float *x = dga_tensor_f32(a), *y = dga_tensor_f32(b);
        for (int64_t i = 0; i < a->numel; i++) s += (double)x[i] * y[i];
    } else {
        for (int64_t i = 0; i < a->numel; i++) s += dga_tensor_get(a, i) * dga_tensor_get(b, i);
    }
    return s;
}

double dga_tensor_min(const dga_tensor *t)
{
    if (!t->numel) return NAN;
    double m = dga_tensor_get(t, 0);
    for (int64_t i = 1; i < t->numel; i++) {
        double v = dga_tensor_get(t, i);
        if (v < m || isnan(v)) m = v;
        if (isnan(m)) break;
    }
    return m;
}

double dga_tensor_max(const dga_tensor *t)
{
    if (!t->numel) return NAN;
    double m = dga_tensor_get(t, 0);
    for (int64_t i = 1; i < t->numel; i++) {
        double v = dga_tensor_get(t, i);
        if (v > m || isnan(v)) m = v;
        if (isnan(m)) break;
    }
    return m;
}

int64_t dga_tensor_argmax(const dga_tensor *t)
{
    if (!t->numel) return -1;
    int64_t best = 0;
    double m = dga_tensor_get(t, 0);
    for (int64_t i = 1; i < t->numel; i++) {
        double v = dga_tensor_get(t, i);
        if (v > m) { m = v; best = i; }   /* first maximum wins, as numpy.argmax */
    }
    return best;
}

/* ---- elementwise, in place ---- */

static dga_status int_result(int64_t r, int64_t i, const char *op)
{
    if (r < INT32_MIN || r > INT32_MAX)
        return dga_fail(DGA_ERR_INVALID, "%s: int32 overflow at entry %" PRId64 " (%" PRId64
                        ")", op, i + 1, r);
    return DGA_OK;
}

static const char *op_name(dga_binop op)
{
    static const char *names[] = {"add", "sub", "mul", "div"};
    return (unsigned)op < 4 ? names[op] : "?";
}

static int64_t int_apply(int64_t a, int64_t b, dga_binop op)
{
    switch (op) {
    case DGA_OP_ADD: return a + b;
    case DGA_OP_SUB: return a - b;
    default: return a * b;
    }
}

static float f_apply(double a, double b, dga_binop op)
{
    switch (op) {
    case DGA_OP_ADD: return (float)(a + b);
    case DGA_OP_SUB: return (float)(a - b);
    case DGA_OP_MUL: return (float)(a * b);
    default: return (float)(a / b);
    }
}

dga_status dga_tensor_binop_(dga_tensor *t, const dga_tensor *b, dga_binop op)
{
    const char *name = op_name(op);
    if ((unsigned)op > DGA_OP_DIV) return dga_fail(DGA_ERR_INVALID, "binop: unknown op %d", op);
    if (!dga_tensor_same_shape(t, b)) return shape_mismatch(name, t, b);
    if (t->dtype != b->dtype)
        return dga_fail(DGA_ERR_INVALID, "%s: dtype mismatch: %s vs %s", name,
                        dga_dtype_name(t->dtype), dga_dtype_name(b->dtype));
    if (t->dtype == DGA_F32) {
        float *x = dga_tensor_f32(t);
        const float *y = dga_tensor_f32(b);
        for (int64_t i = 0; i < t->numel; i++) x[i] = f_apply(x[i], y[i], op);
        return DGA_OK;
    }
    if (op == DGA_OP_DIV)
        return dga_fail(DGA_ERR_INVALID, "div: int32 division is not supported (use float32)");
    int32_t *x = dga_tensor_i32(t);
    const int32_t *y = dga_tensor_i32(b);
    for (int64_t i = 0; i < t->numel; i++) {   /* check first: an error leaves t untouched */
        dga_status st = int_result(int_apply(x[i], y[i], op), i, name);
        if (st != DGA_OK) return st;
    }
    for (int64_t i = 0; i < t->numel; i++) x[i] = (int32_t)int_apply(x[i], y[i], op);
    return DGA_OK;
}

dga_status dga_tensor_scalar_op_(dga_tensor *t, double s, dga_binop op, int reversed)
{
    const char *name = op_name(op);
    if ((unsigned)op > DGA_OP_DIV) return dga_fail(DGA_ERR_INVALID, "binop: unknown op %d", op);
    if (t->dtype == DGA_F32) {
        float *x = dga_tensor_f32(t);
        if (reversed)
            for (int64_t i = 0; i < t->numel; i++) x[i] = f_apply(s, x[i], op);
        else
            for (int64_t i = 0; i < t->numel; i++) x[i] = f_apply(x[i], s, op);
        return DGA_OK;
    }
    if (op == DGA_OP_DIV)
        return dga_fail(DGA_ERR_INVALID, "div: int32 division is not supported (use float32)");
    if (!is_int32_value(s))
        return dga_fail(DGA_ERR_INVALID, "%s: %g is not an int32 value (tensor is int32)",
                        name, s);
    int32_t *x = dga_tensor_i32(t);
    int64_t v = (int64_t)s;
    for (int64_t i = 0; i < t->numel; i++) {
        int64_t r = reversed ? int_apply(v, x[i], op) : int_apply(x[i], v, op);
        dga_status st = int_result(r, i, name);
        if (st != DGA_OK) return st;
    }
    for (int64_t i = 0; i < t->numel; i++)
        x[i] = (int32_t)(reversed ? int_apply(v, x[i], op) : int_apply(x[i], v, op));
    return DGA_OK;
}

dga_status dga_tensor_add_(dga_tensor *t, const dga_tensor *b)
{
    return dga_tensor_binop_(t, b, DGA_OP_ADD);
}

dga_status dga_tensor_mul_(dga_tensor *t, const dga_tensor *b)
{
    return dga_tensor_binop_(t, b, DGA_OP_MUL);
}

void dga_tensor_affine_(dga_tensor *t, double a, double c)
{
    if (t->dtype != DGA_F32) return;   /* float32 only: the binding rejects int32 */
    float *x = dga_tensor_f32(t);
    for (int64_t i = 0; i < t->numel; i++) x[i] = (float)(a * x[i] + c);
}

void dga_tensor_exp_(dga_tensor *t)
{
    if (t->dtype != DGA_F32) return;
    float *x = dga_tensor_f32(t);
    for (int64_t i = 0; i < t->numel; i++) x[i] = expf(x[i]);
}

dga_status dga_tensor_log_(dga_tensor *t)
{
    dga_status st = need_f32(t, "log");
    if (st != DGA_OK) return st;
    float *x = dga_tensor_f32(t);
    for (int64_t i = 0; i < t->numel; i++)
        if (x[i] < 0 || isnan(x[i]))
            return dga_fail(DGA_ERR_INVALID, "log: entry %" PRId64 " is %g (expected >= 0)",
                            i + 1, (double)x[i]);
    for (int64_t i = 0; i < t->numel; i++) x[i] = logf(x[i]);
    return DGA_OK;
}

dga_status dga_tensor_fill_(dga_tensor *t, double v)
{
    if (t->dtype == DGA_F32) {
        float *x = dga_tensor_f32(t);
        for (int64_t i = 0; i < t->numel; i++) x[i] = (float)v;
        return DGA_OK;
    }
    if (!is_int32_value(v))
        return dga_fail(DGA_ERR_INVALID, "fill: %g is not an int32 value (tensor is int32)", v);
    int32_t *x = dga_tensor_i32(t);
    for (int64_t i = 0; i < t->numel; i++) x[i] = (int32_t)v;
    return DGA_OK;
}

dga_status dga_tensor_copy_(dga_tensor *t, const dga_tensor *src)
{
    if (t->numel != src->numel) return shape_mismatch("copy", t, src);
    if (t->dtype == src->dtype) {
        memmove(t->data, src->data, (size_t)t->numel * dga_dtype_size(t->dtype));
        return DGA_OK;
    }
    if (t->dtype == DGA_F32) {
        float *x = dga_tensor_f32(t);
        const int32_t *y = dga_tensor_i32(src);
        for (int64_t i = 0; i < t->numel; i++) x[i] = (float)y[i];
        return DGA_OK;
    }
    const float *y = dga_tensor_f32(src);
    for (int64_t i = 0; i < t->numel; i++)
        if (!is_int32_value(y[i]))
            return dga_fail(DGA_ERR_INVALID, "copy: entry %" PRId64 " is %g, not an int32 value",
                            i + 1, (double)y[i]);
    int32_t *x = dga_tensor_i32(t);
    for (int64_t i = 0; i < t->numel; i++) x[i] = (int32_t)y[i];
    return DGA_OK;
}

/* Shared by normalize_ and check_distribution: every entry finite and >= 0. */
static dga_status check_nonneg(const dga_tensor *t, const char *what)
{
    const float *x = dga_tensor_f32(t);
    for (int64_t i = 0; i < t->numel; i++)
        if (!(x[i] >= 0) || isinf(x[i]))
            return dga_fail(DGA_ERR_INVALID, "%s: entry %" PRId64 " is %g (expected finite "
                            "and >= 0)", what, i + 1, (double)x[i]);
    return DGA_OK;
}

dga_status dga_tensor_normalize_(dga_tensor *t)
{
    dga_status st = need_f32(t, "normalize");
    if (st == DGA_OK) st = check_nonneg(t, "normalize");
    if (st != DGA_OK) return st;
    double s = dga_tensor_sum(t);
    if (!(s > 0))
        return dga_fail(DGA_ERR_INVALID, "normalize: the entries sum to %g (expected > 0)", s);
    float *x = dga_tensor_f32(t);
    for (int64_t i = 0; i < t->numel; i++) x[i] = (float)(x[i] / s);
    return DGA_OK;
}

dga_status dga_tensor_check_distribution(const dga_tensor *t, double tol, const char *what)
{
    if (!what) what = "distribution";
    if (t->dtype != DGA_F32)
        return dga_fail(DGA_ERR_INVALID, "%s: not a probability vector: int32 tensor "
                        "(expected float32)", what);
    if (t->numel == 0)
        return dga_fail(DGA_ERR_INVALID, "%s: not a probability vector: it is empty", what);
    dga_status st = check_nonneg(t, what);
    if (st != DGA_OK) return st;
    double s = dga_tensor_sum(t);
    if (!(fabs(s - 1.0) <= tol))
        return dga_fail(DGA_ERR_INVALID, "%s: not a probability vector: entries sum to %.9g "
                        "(expected 1 within %g)", what, s, tol);
    return DGA_OK;
}
