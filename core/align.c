#include "align.h"

#include <cblas.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct dga_align_ws {
    size_t n;
    float *target;    /* the target gradient */
};

const char *dga_align_norm_name(dga_align_norm n)
{
    switch (n) {
    case DGA_ALIGN_NONE: return "none";
    case DGA_ALIGN_COSINE: return "cosine";
    case DGA_ALIGN_MEAN_NORM: return "mean_norm";
    }
    return "?";
}

dga_status dga_align_norm_parse(const char *name, dga_align_norm *out)
{
    static const dga_align_norm all[] = {DGA_ALIGN_NONE, DGA_ALIGN_COSINE, DGA_ALIGN_MEAN_NORM};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (name && strcmp(name, dga_align_norm_name(all[i])) == 0) {
            *out = all[i];
            return DGA_OK;
        }
    return dga_fail(DGA_ERR_INVALID, "align: normalize = \"%s\", expected \"none\", \"cosine\" or \"mean_norm\"",
                    name ? name : "(null)");
}

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

dga_status dga_batch_grad(dga_gpt *model, const dga_batch *b, double *loss)
{
    if (!b || !b->inputs || !b->targets || b->B < 1 || b->T < 1)
        return dga_fail(DGA_ERR_INVALID, "batch: expected B >= 1 rows of T >= 1 tokens with inputs and targets");
    const int mb = dga_gpt_max_batch(model);
    const size_t np = dga_gpt_num_params(model), T = (size_t)b->T;
    float *g = dga_gpt_grads(model);
    dga_gpt_zero_grad(model);
    if (b->B <= mb) {
        float l = 0;
        dga_status st = dga_gpt_forward(model, b->inputs, b->targets, b->B, b->T, &l);
        if (st == DGA_OK) st = dga_gpt_backward(model);
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
        dga_status st = dga_gpt_forward(model, b->inputs + (size_t)r * T, b->targets + (size_t)r * T,
                                        nb, b->T, &l);
        if (st == DGA_OK) st = dga_gpt_backward(model);
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
static dga_status batch_eval(dga_gpt *model, const dga_batch *b, double *nll, int *cnt, double *loss)
{
    if (!b || !b->inputs || !b->targets || b->B < 1 || b->T < 1)
        return dga_fail(DGA_ERR_INVALID, "batch: expected B >= 1 rows of T >= 1 tokens with inputs and targets");
    const int mb = dga_gpt_max_batch(model);
    const size_t T = (size_t)b->T;
    double sum = 0;
    long long n = 0;
    for (int r = 0; r < b->B; r += mb) {
        int nb = b->B - r < mb ? b->B - r : mb;
        dga_status st = dga_gpt_eval(model, b->inputs + (size_t)r * T, b->targets + (size_t)r * T, nb,
                                     b->T, nll, cnt);
        if (st != DGA_OK) return st;
        for (int i = 0; i < nb; i++) {
            sum += nll[i];
            n += cnt[i];
        }
    }
    *loss = n > 0 ? sum / (double)n : 0.0;
    return DGA_OK;
}

/* theta = base + s * dir */
static void axpy_from(float *theta, const float *base, const float *dir, float s, size_t n)
{
    for (size_t i = 0; i < n; i++) theta[i] = base[i] + s * dir[i];
}

/* The fd rounds: theta + h g_t for every domain, then theta - h g_t, then theta restored
 * from the backup held in the model's gradient buffer. */
static dga_status align_fd(dga_gpt *model, dga_align_ws *ws, const dga_batch *domains, int k,
                           double eps, dga_align_result *out)
{
    const size_t np = dga_gpt_num_params(model);
    const int mb = dga_gpt_max_batch(model);
    float *theta = dga_gpt_params(model), *backup = dga_gpt_grads(model);
    double *nll = malloc((size_t)mb * sizeof *nll);
    int *cnt = malloc((size_t)mb * sizeof *cnt);
    if (!nll || !cnt) {
        free(nll);
        free(cnt);
        return dga_fail(DGA_ERR_NOMEM, "align: out of memory");
    }
    memcpy(backup, theta, np * sizeof(float));
    double h = out->target_norm > 0 ? eps / out->target_norm : 0.0;
    dga_status st = DGA_OK;
    for (int side = 0; side < 2 && st == DGA_OK && h > 0; side++) {
        axpy_from(theta, backup, ws->target, (float)(side == 0 ? h : -h), np);
        for (int i = 0; i < k; i++) {
            double l = 0;
            st = batch_eval(model, &domains[i], nll, cnt, &l);
            if (st != DGA_OK) {
                st = annotate(st, "domain batch", i);
                break;
            }
            if (side == 0) out->loss[i] = l;
            else {
                out->align[i] = (out->loss[i] - l) / (2 * h);
                out->loss[i] = 0.5 * (out->loss[i] + l);
            }
        }
    }
    memcpy(theta, backup, np * sizeof(float));
    if (st == DGA_OK && !(h > 0))   /* zero target gradient: every alignment is 0 */
        for (int i = 0; i < k && st == DGA_OK; i++) {
            out->align[i] = 0;
            st = batch_eval(model, &domains[i], nll, cnt, &out->loss[i]);
            if (st != DGA_OK) st = annotate(st, "domain batch", i);
        }
    for (int i = 0; i < k; i++) {
        out->grad_norm[i] = NAN;
        if (out->dot) out->dot[i] = out->align[i];
    }
    free(nll);
    free(cnt);
    return st;
}

/* The jvp rounds: each domain batch's loss and its derivative along the target gradient,
 * one tangent-carrying forward per chunk of the model's max batch. A chunk's mean and
 * derivative are weighted by its share of the batch's targets, as dga_batch_grad does. */
static dga_status align_jvp(dga_gpt *model, const dga_align_ws *ws, const dga_batch *domains,
                            int k, dga_align_result *out)
{
    const int mb = dga_gpt_max_batch(model);
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
            dga_status st = dga_gpt_jvp(model, b->inputs + (size_t)r * T, b->targets + (size_t)r * T, nb,
                                        b->T, ws->target, &l, &d);
            if (st != DGA_OK) return annotate(st, "domain batch", i);
            int nc = count_valid(b->targets + (size_t)r * T, (size_t)nb * T);
            double w = total > 0 ? (double)nc / total : 0.0;
            loss += w * l;
            deriv += w * d;
        }
        out->loss[i] = loss;
        out->align[i] = deriv;
        out->grad_norm[i] = NAN;
        if (out->dot) out->dot[i] = deriv;
    }
    return DGA_OK;
}

dga_status dga_align(dga_gpt *model, dga_align_ws *ws, const dga_batch *target,
                     const dga_batch *domains, int k, const dga_align_opts *opts,
                     dga_align_result *out)
{
    const size_t np = dga_gpt_num_params(model);
    if (!ws || ws->n != np)
        return dga_fail(DGA_ERR_INVALID, "align: workspace holds %zu parameters, the model has %zu",
                        ws ? ws->n : 0, np);
    if (k < 1 || !domains)
        return dga_fail(DGA_ERR_INVALID, "align: %d domain batches, expected at least 1", k);
    if (!out || !out->align || !out->loss || !out->grad_norm)
        return dga_fail(DGA_ERR_INVALID, "align: result arrays are missing");
    dga_align_opts o = {.normalize = DGA_ALIGN_NONE};
    if (opts) o = *opts;
    if (o.normalize != DGA_ALIGN_NONE && o.normalize != DGA_ALIGN_COSINE && o.normalize != DGA_ALIGN_MEAN_NORM)
        return dga_fail(DGA_ERR_INVALID, "align: unknown normalisation %d", (int)o.normalize);
    if (o.use_lr && !(isfinite(o.lr) && o.lr >= 0))
        return dga_fail(DGA_ERR_INVALID, "align: lr = %g, expected a finite number >= 0", o.lr);
    if (o.method != DGA_ALIGN_EXACT && o.method != DGA_ALIGN_FD && o.method != DGA_ALIGN_JVP)
        return dga_fail(DGA_ERR_INVALID, "align: unknown method %d", (int)o.method);
    if (o.method != DGA_ALIGN_EXACT && o.normalize != DGA_ALIGN_NONE)
        return dga_fail(DGA_ERR_INVALID, "align: normalize = \"%s\" needs per-domain gradient norms, "
                        "which method = \"%s\" does not compute (use normalize = \"none\" or method = \"exact\")",
                        dga_align_norm_name(o.normalize), dga_align_method_name(o.method));
    if (!isfinite(o.fd_eps)) return dga_fail(DGA_ERR_INVALID, "align: fd_eps = %g, expected a finite number", o.fd_eps);

    double tl = 0;
    dga_status st = dga_batch_grad(model, target, &tl);
    if (st != DGA_OK) return annotate(st, "target batch", -1);
    const float *g = dga_gpt_grads(model);
    memcpy(ws->target, g, np * sizeof(float));
    out->target_loss = tl;
    out->target_norm = sqrt(dot_f64(ws->target, ws->target, np));
    if (o.method != DGA_ALIGN_EXACT) {
        st = o.method == DGA_ALIGN_FD ? align_fd(model, ws, domains, k, o.fd_eps > 0 ? o.fd_eps : 1e-3, out)
                                      : align_jvp(model, ws, domains, k, out);
        if (st == DGA_OK && o.use_lr)
            for (int i = 0; i < k; i++) out->align[i] *= o.lr;
        return st;
    }

    double sum_norm = 0;
    for (int i = 0; i < k; i++) {
        double l = 0;
        st = dga_batch_grad(model, &domains[i], &l);
        if (st != DGA_OK) return annotate(st, "domain batch", i);
        double d = dot_f64(g, ws->target, np);
        out->loss[i] = l;
        out->grad_norm[i] = sqrt(dot_f64(g, g, np));
        out->align[i] = d;
        if (out->dot) out->dot[i] = d;
        sum_norm += out->grad_norm[i];
    }
    double mean_norm = sum_norm / k;
    for (int i = 0; i < k; i++) {
        double a = out->align[i];
        if (o.normalize == DGA_ALIGN_COSINE) {
            double den = out->grad_norm[i] * out->target_norm;
            a = den > 0 ? a / den : 0.0;
        } else if (o.normalize == DGA_ALIGN_MEAN_NORM) {
            a = mean_norm > 0 ? a / mean_norm : 0.0;
        }
        if (o.use_lr) a *= o.lr;
        out->align[i] = a;
    }
    return DGA_OK;
}
