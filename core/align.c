#include "align.h"

#include <cblas.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eval.h"

struct dga_align_ws {
    size_t n;
    float *target;    /* the target gradient */
};

const char *dga_align_method_name(dga_align_method m)
{
    switch (m) {
    case DGA_ALIGN_EXACT: return "exact";
    case DGA_ALIGN_FD: return "fd";
    case DGA_ALIGN_JVP: return "jvp";
    }
    return "?";
}

dga_status dga_align_method_parse(const char *name, dga_align_method *out)
{
    if (name && strcmp(name, "exact") == 0) *out = DGA_ALIGN_EXACT;
    else if (name && strcmp(name, "fd") == 0) *out = DGA_ALIGN_FD;
    else if (name && strcmp(name, "jvp") == 0) *out = DGA_ALIGN_JVP;
    else
        return dga_fail(DGA_ERR_INVALID, "align: method = \"%s\", expected \"exact\", \"fd\" or \"jvp\"",
                        name ? name : "(null)");
    return DGA_OK;
}

dga_status dga_align_ws_create(size_t num_params, dga_align_ws **out)
{
    *out = NULL;
    if (num_params == 0) return dga_fail(DGA_ERR_INVALID, "align: workspace for 0 parameters");
    dga_align_ws *ws = calloc(1, sizeof *ws);
    if (ws) ws->target = calloc(num_params, sizeof(float));
    if (!ws || !ws->target) {
        if (ws) free(ws);
        return dga_fail(DGA_ERR_NOMEM, "align: out of memory for a %zu-parameter gradient buffer", num_params);
    }
    ws->n = num_params;
    *out = ws;
    return DGA_OK;
}

void dga_align_ws_free(dga_align_ws *ws)
{
    if (!ws) return;
    free(ws->target);
    free(ws);
}

const float *dga_align_ws_target_grad(const dga_align_ws *ws) { return ws->target; }

/* Dot product of float vectors accumulated in double (cblas_dsdot), in blasint-sized pieces. */
static double dot_f64(const float *a, const float *b, size_t n)
{
    double s = 0;
    const size_t piece = (size_t)1 << 30;
    for (size_t off = 0; off < n; off += piece) {
        size_t m = n - off < piece ? n - off : piece;
        s += cblas_dsdot((blasint)m, a + off, 1, b + off, 1);
    }
    return s;
}

static void scale(float *g, size_t n, float a)
{
    for (size_t i = 0; i < n; i++) g[i] *= a;
}

static int count_valid(const int32_t *targets, size_t n)
{
    int c = 0;
    for (size_t i = 0; i < n; i++) c += targets[i] != DGA_IGNORE;
    return c;
}

dga_status dga_batch_grad(dga_model *model, const dga_batch *b, double *loss)
{
    if (!b || !b->inputs || !b->targets || b->B < 1 || b->T < 1)
        return dga_fail(DGA_ERR_INVALID, "batch: expected B >= 1 rows of T >= 1 tokens with inputs and targets");
    const int mb = dga_model_max_batch(model);
    const size_t np = dga_model_num_params(model), T = (size_t)b->T;
    float *g = dga_model_grads(model);
    dga_model_zero_grad(model);
    if (b->B <= mb) {
        float l = 0;
        dga_status st = dga_model_forward(model, b->inputs, b->targets, b->B, b->T, &l);
        if (st == DGA_OK) st = dga_model_backward(model);
        *loss = l;
        return st;
    }
    /* Chunks: g = sum_c (n_c / N) g_c. Backward adds into g, so before chunk c the running
     * sum is divided by n_c and multiplied back after: g <- (g / n_c + g_c) n_c. */
    int total = count_valid(b->targets, (size_t)b->B * T), seen = 0;
    double sum_loss = 0;
    for (int r = 0; r < b->B && total > 0; r += mb) {
        int nb = b->B - r < mb ? b->B - r : mb;
        int nc = count_valid(b->targets + (size_t)r * T, (size_t)nb * T);
        if (nc == 0) continue;
        if (seen) scale(g, np, 1.0f / (float)nc);
        float l = 0;
        dga_status st = dga_model_forward(model, b->inputs + (size_t)r * T, b->targets + (size_t)r * T,
                                        nb, b->T, &l);
        if (st == DGA_OK) st = dga_model_backward(model);
        if (st != DGA_OK) return st;
        scale(g, np, (float)nc);
        sum_loss += (double)l * nc;
        seen = 1;
    }
    if (total > 0) scale(g, np, 1.0f / (float)total);
    *loss = total > 0 ? sum_loss / total : 0.0;
    return DGA_OK;
}

/* Re-raises the last error with the batch it came from in front. */
static dga_status annotate(dga_status st, const char *what, int i)
{
    char msg[768];
    snprintf(msg, sizeof msg, "%s", dga_last_error());
    if (i >= 0) return dga_fail(st, "align: %s #%d: %s", what, i + 1, msg);
    return dga_fail(st, "align: %s: %s", what, msg);
}

/* Token-mean loss of a batch by forward-only passes, in chunks of the model's max batch. */
static dga_status batch_eval(dga_model *model, const dga_batch *b, double *loss)
{
    if (!b || !b->inputs || !b->targets || b->B < 1 || b->T < 1)
        return dga_fail(DGA_ERR_INVALID, "batch: expected B >= 1 rows of T >= 1 tokens with inputs and targets");
    return dga_eval_mean_loss(model, b->inputs, b->targets, (size_t)b->T, (size_t)b->B, b->T, 0, loss);
}

/* theta = base + s * dir */
static void axpy_from(float *theta, const float *base, const float *dir, float s, size_t n)
{
    for (size_t i = 0; i < n; i++) theta[i] = base[i] + s * dir[i];
}

/* The fd rounds: theta + h g_t for every domain, then theta - h g_t, then theta restored
 * from the backup held in the model's gradient buffer. */
static dga_status align_fd(dga_model *model, dga_align_ws *ws, const dga_batch *domains, int k,
                           double eps, dga_align_result *out)
{
    const size_t np = dga_model_num_params(model);
    float *theta = dga_model_params(model), *backup = dga_model_grads(model);
    memcpy(backup, theta, np * sizeof(float));
    double h = out->target_norm > 0 ? eps / out->target_norm : 0.0;
    dga_status st = DGA_OK;
    for (int side = 0; side < 2 && st == DGA_OK && h > 0; side++) {
        axpy_from(theta, backup, ws->target, (float)(side == 0 ? h : -h), np);
        for (int i = 0; i < k; i++) {
            double l = 0;
            st = batch_eval(model, &domains[i], &l);
            if (st != DGA_OK) {
                st = annotate(st, "domain batch", i);
                break;
            }
            if (side == 0) out->loss[i] = l;
            else {
                out->dot[i] = (out->loss[i] - l) / (2 * h);
                out->loss[i] = 0.5 * (out->loss[i] + l);
            }
        }
    }
    memcpy(theta, backup, np * sizeof(float));
    if (st == DGA_OK && !(h > 0))   /* zero target gradient: every alignment is 0 */
        for (int i = 0; i < k && st == DGA_OK; i++) {
            out->dot[i] = 0;
            st = batch_eval(model, &domains[i], &out->loss[i]);
            if (st != DGA_OK) st = annotate(st, "domain batch", i);
        }
    for (int i = 0; i < k; i++) out->grad_norm[i] = NAN;
    return st;
}

/* The jvp rounds: each domain batch's loss and its derivative along the target gradient,
 * one tangent-carrying forward per chunk of the model's max batch. A chunk's mean and
 * derivative are weighted by its share of the batch's targets, as dga_batch_grad does. */
static dga_status align_jvp(dga_model *model, const dga_align_ws *ws, const dga_batch *domains,
                            int k, dga_align_result *out)
{
    const int mb = dga_model_max_batch(model);
    for (int i = 0; i < k; i++) {
        const dga_batch *b = &domains[i];
        if (!b->inputs || !b->targets || b->B < 1 || b->T < 1)
            return annotate(dga_fail(DGA_ERR_INVALID, "batch: expected B >= 1 rows of T >= 1 tokens "
                                     "with inputs and targets"), "domain batch", i);
        const size_t T = (size_t)b->T;
        int total = count_valid(b->targets, (size_t)b->B * T);
        double loss = 0, deriv = 0;
        for (int r = 0; r < b->B; r += mb) {
            int nb = b->B - r < mb ? b->B - r : mb;
            double l = 0, d = 0;
            dga_status st = dga_model_jvp(model, b->inputs + (size_t)r * T, b->targets + (size_t)r * T, nb,
                                        b->T, ws->target, &l, &d);
            if (st != DGA_OK) return annotate(st, "domain batch", i);
            int nc = count_valid(b->targets + (size_t)r * T, (size_t)nb * T);
            double w = total > 0 ? (double)nc / total : 0.0;
            loss += w * l;
            deriv += w * d;
        }
        out->loss[i] = loss;
        out->dot[i] = deriv;
        out->grad_norm[i] = NAN;
    }
    return DGA_OK;
}

dga_status dga_align(dga_model *model, dga_align_ws *ws, const dga_batch *target,
                     const dga_batch *domains, int k, const dga_align_opts *opts,
                     dga_align_result *out)
{
    const size_t np = dga_model_num_params(model);
    if (!ws || ws->n != np)
        return dga_fail(DGA_ERR_INVALID, "align: workspace holds %zu parameters, the model has %zu",
                        ws ? ws->n : 0, np);
    if (k < 1 || !domains)
        return dga_fail(DGA_ERR_INVALID, "align: %d domain batches, expected at least 1", k);
    if (!out || !out->dot || !out->loss || !out->grad_norm)
        return dga_fail(DGA_ERR_INVALID, "align: result arrays are missing");
    dga_align_opts o = {.method = DGA_ALIGN_EXACT};
    if (opts) o = *opts;
    if (o.method != DGA_ALIGN_EXACT && o.method != DGA_ALIGN_FD && o.method != DGA_ALIGN_JVP)
        return dga_fail(DGA_ERR_INVALID, "align: unknown method %d", (int)o.method);
    if (!isfinite(o.fd_eps)) return dga_fail(DGA_ERR_INVALID, "align: fd_eps = %g, expected a finite number", o.fd_eps);

    double tl = 0;
    dga_status st = dga_batch_grad(model, target, &tl);
    if (st != DGA_OK) return annotate(st, "target batch", -1);
    const float *g = dga_model_grads(model);
    memcpy(ws->target, g, np * sizeof(float));
    out->target_loss = tl;
    out->target_norm = sqrt(dot_f64(ws->target, ws->target, np));
    if (o.method == DGA_ALIGN_FD) return align_fd(model, ws, domains, k, o.fd_eps > 0 ? o.fd_eps : 1e-3, out);
    if (o.method == DGA_ALIGN_JVP) return align_jvp(model, ws, domains, k, out);

    for (int i = 0; i < k; i++) {
        double l = 0;
        st = dga_batch_grad(model, &domains[i], &l);
        if (st != DGA_OK) return annotate(st, "domain batch", i);
        out->loss[i] = l;
        out->dot[i] = dot_f64(g, ws->target, np);
        out->grad_norm[i] = sqrt(dot_f64(g, g, np));
    }
    return DGA_OK;
}
