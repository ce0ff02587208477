/* AdamW with torch.optim.AdamW's arithmetic (see adamw.h). */
#include "adamw.h"

#include <math.h>
#if defined __AVX512F__ || defined __AVX2__
#include <immintrin.h>
#endif
#include <stdlib.h>
#include <string.h>

#include "pool.h"

struct dga_adamw {
    dga_adamw_config cfg;
    size_t n;
    int64_t t;
    float *m, *v;
    /* [0, n) cut into segments at the range ends; decay[i] says whether segment i decays */
    size_t *cut;     /* n_seg + 1 boundaries */
    char *decay;
    int n_seg;
};

dga_adamw_config dga_adamw_defaults(void)
{
    dga_adamw_config c = {.lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f,
                          .weight_decay = 0.1f};
    return c;
}

static int cmp_size(const void *a, const void *b)
{
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return x < y ? -1 : x > y;
}

static dga_status check_config(const dga_adamw_config *c)
{
    if (!(c->beta1 >= 0.0f && c->beta1 < 1.0f))
        return dga_fail(DGA_ERR_INVALID, "adamw: beta1 = %g, expected [0, 1)", c->beta1);
    if (!(c->beta2 >= 0.0f && c->beta2 < 1.0f))
        return dga_fail(DGA_ERR_INVALID, "adamw: beta2 = %g, expected [0, 1)", c->beta2);
    if (!(c->eps >= 0.0f && isfinite(c->eps)))
        return dga_fail(DGA_ERR_INVALID, "adamw: eps = %g, expected >= 0", c->eps);
    if (!(c->weight_decay >= 0.0f && isfinite(c->weight_decay)))
        return dga_fail(DGA_ERR_INVALID, "adamw: weight_decay = %g, expected >= 0",
                        c->weight_decay);
    if (!(c->lr >= 0.0f && isfinite(c->lr)))
        return dga_fail(DGA_ERR_INVALID, "adamw: lr = %g, expected >= 0", c->lr);
    return DGA_OK;
}

dga_status dga_adamw_create(size_t n, const dga_adamw_config *cfg,
                            const size_t (*decay_ranges)[2], int n_ranges, dga_adamw **out)
{
    if (!out) return dga_fail(DGA_ERR_INVALID, "adamw: out is NULL");
    *out = NULL;
    dga_adamw_config c = cfg ? *cfg : dga_adamw_defaults();
    dga_status st = check_config(&c);
    if (st != DGA_OK) return st;
    if (n_ranges < 0 || (n_ranges > 0 && !decay_ranges))
        return dga_fail(DGA_ERR_INVALID, "adamw: %d decay ranges but no range array", n_ranges);
    for (int i = 0; i < n_ranges; i++)
        if (decay_ranges[i][0] > decay_ranges[i][1] || decay_ranges[i][1] > n)
            return dga_fail(DGA_ERR_INVALID, "adamw: decay range %d = [%zu, %zu) is not "
                            "inside [0, %zu)", i + 1, decay_ranges[i][0], decay_ranges[i][1],
                            n);
    dga_adamw *o = calloc(1, sizeof *o);
    if (!o) return dga_fail(DGA_ERR_NOMEM, "adamw: cannot allocate the optimizer");
    o->cfg = c;
    o->n = n;
    size_t ncut = 2 + 2 * (size_t)n_ranges;
    o->m = calloc(n ? n : 1, sizeof(float));
    o->v = calloc(n ? n : 1, sizeof(float));
    o->cut = malloc(ncut * sizeof *o->cut);
    o->decay = malloc(ncut);
    if (!o->m || !o->v || !o->cut || !o->decay) {
        dga_adamw_free(o);
        return dga_fail(DGA_ERR_NOMEM, "adamw: cannot allocate moments for %zu parameters", n);
    }
    /* Segment boundaries: 0, n and every range end, sorted and deduplicated; a segment
     * decays if it lies inside some range (ranges may overlap). */
    size_t k = 0;
    o->cut[k++] = 0;
    o->cut[k++] = n;
    for (int i = 0; i < n_ranges; i++) {
        o->cut[k++] = decay_ranges[i][0];
        o->cut[k++] = decay_ranges[i][1];
    }
    qsort(o->cut, k, sizeof *o->cut, cmp_size);
    size_t u = 1;
    for (size_t i = 1; i < k; i++)
        if (o->cut[i] != o->cut[u - 1]) o->cut[u++] = o->cut[i];
    o->n_seg = (int)u - 1;
    for (int s = 0; s < o->n_seg; s++) {
        o->decay[s] = 0;
        for (int i = 0; i < n_ranges; i++)
            if (decay_ranges[i][0] <= o->cut[s] && o->cut[s + 1] <= decay_ranges[i][1])
                o->decay[s] = 1;
    }
    *out = o;
    return DGA_OK;
}

void dga_adamw_free(dga_adamw *o)
{
    if (!o) return;
    free(o->m);
    free(o->v);
    free(o->cut);
    free(o->decay);
    free(o);
}

dga_adamw_config *dga_adamw_get_config(dga_adamw *o) { return &o->cfg; }
size_t dga_adamw_size(const dga_adamw *o) { return o->n; }
int64_t dga_adamw_steps(const dga_adamw *o) { return o->t; }
void dga_adamw_set_steps(dga_adamw *o, int64_t t) { o->t = t < 0 ? 0 : t; }
float *dga_adamw_m(dga_adamw *o) { return o->m; }
float *dga_adamw_v(dga_adamw *o) { return o->v; }

/* One segment of the update, in PyTorch's order of operations (single-tensor path):
 * param *= 1 - lr wd; m = lerp(m, g, 1-b1); v = b2 v + (1-b2) g^2;
 * param -= (lr / bc1) * m / (sqrt(v) / sqrt(bc2) + eps).
 * sqrtf may set errno, so GCC will not vectorise it under the project's flags; with AVX-512
 * (or AVX2) the same arithmetic (IEEE sqrt is exactly rounded either way) runs 16 (or 8)
 * lanes at a time. */
static inline float update_one(float *p, const float *g, float *m, float *v, float decay_mul,
                               float b1, float b2, float step_size, float bc2_sqrt, float eps)
{
    float gi = *g;
    float pi = *p * decay_mul;
    float mi = *m + (gi - *m) * (1.0f - b1);
    float vi = *v * b2 + (1.0f - b2) * gi * gi;
    *m = mi;
    *v = vi;
    return pi - step_size * (mi / (sqrtf(vi) / bc2_sqrt + eps));
}

static void update(float *restrict p, const float *restrict g, float *restrict m,
                   float *restrict v, size_t n, float decay_mul, float b1, float b2,
                   float step_size, float bc2_sqrt, float eps)
{
    size_t i = 0;
#ifdef __AVX512F__
    const __m512 vdecay = _mm512_set1_ps(decay_mul), vb1 = _mm512_set1_ps(1.0f - b1);
    const __m512 vb2 = _mm512_set1_ps(b2), vb2c = _mm512_set1_ps(1.0f - b2);
    const __m512 vstep = _mm512_set1_ps(step_size), vbc2 = _mm512_set1_ps(bc2_sqrt);
    const __m512 veps = _mm512_set1_ps(eps);
    for (; i + 16 <= n; i += 16) {
        __m512 gi = _mm512_loadu_ps(g + i), mi = _mm512_loadu_ps(m + i);
        __m512 vi = _mm512_loadu_ps(v + i);
        __m512 pi = _mm512_mul_ps(_mm512_loadu_ps(p + i), vdecay);
        /* same operation order as update_one (no fused multiply-adds: bit-identical) */
        mi = _mm512_add_ps(mi, _mm512_mul_ps(_mm512_sub_ps(gi, mi), vb1));
        vi = _mm512_add_ps(_mm512_mul_ps(vi, vb2), _mm512_mul_ps(_mm512_mul_ps(vb2c, gi), gi));
        _mm512_storeu_ps(m + i, mi);
        _mm512_storeu_ps(v + i, vi);
        __m512 den = _mm512_add_ps(_mm512_div_ps(_mm512_sqrt_ps(vi), vbc2), veps);
        _mm512_storeu_ps(p + i, _mm512_sub_ps(pi, _mm512_mul_ps(vstep, _mm512_div_ps(mi, den))));
    }
#elif defined __AVX2__
    /* the same operations 8 lanes at a time, for AVX2 machines (Zen 3 has no AVX-512) */
    const __m256 vdecay = _mm256_set1_ps(decay_mul), vb1 = _mm256_set1_ps(1.0f - b1);
    const __m256 vb2 = _mm256_set1_ps(b2), vb2c = _mm256_set1_ps(1.0f - b2);
    const __m256 vstep = _mm256_set1_ps(step_size), vbc2 = _mm256_set1_ps(bc2_sqrt);
    const __m256 veps = _mm256_set1_ps(eps);
    for (; i + 8 <= n; i += 8) {
        __m256 gi = _mm256_loadu_ps(g + i), mi = _mm256_loadu_ps(m + i);
        __m256 vi = _mm256_loadu_ps(v + i);
        __m256 pi = _mm256_mul_ps(_mm256_loadu_ps(p + i), vdecay);
        mi = _mm256_add_ps(mi, _mm256_mul_ps(_mm256_sub_ps(gi, mi), vb1));
        vi = _mm256_add_ps(_mm256_mul_ps(vi, vb2), _mm256_mul_ps(_mm256_mul_ps(vb2c, gi), gi));
        _mm256_storeu_ps(m + i, mi);
        _mm256_storeu_ps(v + i, vi);
        __m256 den = _mm256_add_ps(_mm256_div_ps(_mm256_sqrt_ps(vi), vbc2), veps);
        _mm256_storeu_ps(p + i, _mm256_sub_ps(pi, _mm256_mul_ps(vstep, _mm256_div_ps(mi, den))));
    }
#endif
    for (; i < n; i++)
        p[i] = update_one(p + i, g + i, m + i, v + i, decay_mul, b1, b2, step_size, bc2_sqrt,
                          eps);
}

/* The threaded step: each task takes a contiguous chunk of [0, n) (a multiple of 16
 * elements) and updates the part of every segment inside it. Elementwise, so the same bits
 * as the sequential loop at any thread count. */
typedef struct {
    const dga_adamw *o;
    float *params;
    const float *grads;
    float decay_mul, step_size, bc2_sqrt;
    unsigned char *bad;   /* per task: a non-finite gradient in its chunk */
} step_args;

static void check_task(void *p, int t, int nt)
{
    const step_args *a = p;
    size_t lo, hi;
    dga_pool_range(a->o->n, 16, t, nt, &lo, &hi);
    uint32_t bad = 0;
    for (size_t i = lo; i < hi; i++) {
        uint32_t bits;
        memcpy(&bits, &a->grads[i], sizeof bits);
        bad |= (uint32_t)((bits & 0x7f800000u) == 0x7f800000u);
    }
    a->bad[t] = (unsigned char)bad;
}

static void step_task(void *p, int t, int nt)
{
    const step_args *a = p;
    const dga_adamw *o = a->o;
    const dga_adamw_config *c = &o->cfg;
    size_t lo, hi;
    dga_pool_range(o->n, 16, t, nt, &lo, &hi);
    for (int s = 0; s < o->n_seg; s++) {
        size_t b = o->cut[s] > lo ? o->cut[s] : lo;
        size_t e = o->cut[s + 1] < hi ? o->cut[s + 1] : hi;
        if (b >= e) continue;
        update(a->params + b, a->grads + b, o->m + b, o->v + b, e - b,
               o->decay[s] ? a->decay_mul : 1.0f, c->beta1, c->beta2, a->step_size,
               a->bc2_sqrt, c->eps);
    }
}

static int threaded(size_t n)
{
    return dga_pool_threads() > 1 && n >= dga_pool_min_work();
}

dga_status dga_adamw_step(dga_adamw *o, float *params, const float *grads, float lr)
{
    if (!params || !grads) return dga_fail(DGA_ERR_INVALID, "adamw step: NULL buffer");
    if (!(lr >= 0.0f && isfinite(lr)))
        return dga_fail(DGA_ERR_INVALID, "adamw step: lr = %g, expected a finite value >= 0",
                        lr);
    dga_status st = check_config(&o->cfg);
    if (st != DGA_OK) return st;
    /* Check before touching anything so a bad gradient leaves the state as it was. */
    uint32_t bad = 0;   /* exponent all ones = inf or NaN; integer OR vectorises */
    unsigned char bad_task[DGA_POOL_MAX_THREADS];
    step_args sa = {.o = o, .params = params, .grads = grads, .bad = bad_task};
    int par = threaded(o->n);
    if (par) {
        dga_pool_run(check_task, &sa);
        for (int t = 0; t < dga_pool_threads(); t++) bad |= bad_task[t];
    } else {
        for (size_t i = 0; i < o->n; i++) {
            uint32_t bits;
            memcpy(&bits, &grads[i], sizeof bits);
            bad |= (uint32_t)((bits & 0x7f800000u) == 0x7f800000u);
        }
    }
    if (bad) {
        for (size_t i = 0; i < o->n; i++)
            if (!isfinite(grads[i]))
                return dga_fail(DGA_ERR_INVALID, "adamw step: gradient element %zu is %g "
                                "(non-finite); parameters left unchanged", i, grads[i]);
    }
    const dga_adamw_config *c = &o->cfg;
    o->t++;
    double bc1 = 1.0 - pow(c->beta1, (double)o->t);
    double bc2 = 1.0 - pow(c->beta2, (double)o->t);
    float step_size = (float)(lr / bc1);
    float bc2_sqrt = (float)sqrt(bc2);
    float decay_mul = 1.0f - lr * c->weight_decay;
    if (par) {
        sa.decay_mul = decay_mul;
        sa.step_size = step_size;
        sa.bc2_sqrt = bc2_sqrt;
        dga_pool_run(step_task, &sa);
        return DGA_OK;
    }
    for (int s = 0; s < o->n_seg; s++) {
        size_t a = o->cut[s], len = o->cut[s + 1] - a;
        update(params + a, grads + a, o->m + a, o->v + a, len, o->decay[s] ? decay_mul : 1.0f,
               c->beta1, c->beta2, step_size, bc2_sqrt, c->eps);
    }
    return DGA_OK;
}

/* Sum of squares of g[0, n) in double, four partial sums (vectorisable, fixed order). */
static double sum_squares(const float *g, size_t n)
{
    double s[4] = {0, 0, 0, 0};
    size_t i = 0;
    for (; i + 4 <= n; i += 4)
        for (int j = 0; j < 4; j++) s[j] += (double)g[i + j] * g[i + j];
    for (; i < n; i++) s[0] += (double)g[i] * g[i];
    return (s[0] + s[1]) + (s[2] + s[3]);
}

/* Threaded, the norm is a sum over fixed chunks of NORM_CHUNK elements, each chunk's partial
 * sum stored and then added in chunk order: the result depends on n only, not on the thread
 * count or on which thread ran which chunk. It differs in the last bits from the one-thread
 * sum, whose single pass has no chunks. */
#define NORM_CHUNK ((size_t)1 << 16)

typedef struct {
    float *g;
    size_t n;
    double *part;
    float scale;
} norm_args;

static void norm_task(void *p, int t, int nt)
{
    const norm_args *a = p;
    size_t nchunks = (a->n + NORM_CHUNK - 1) / NORM_CHUNK, lo, hi;
    dga_pool_range(nchunks, 1, t, nt, &lo, &hi);
    for (size_t c = lo; c < hi; c++) {
        size_t b = c * NORM_CHUNK, e = b + NORM_CHUNK < a->n ? b + NORM_CHUNK : a->n;
        a->part[c] = sum_squares(a->g + b, e - b);
    }
}

static void scale_task(void *p, int t, int nt)
{
    const norm_args *a = p;
    size_t lo, hi;
    dga_pool_range(a->n, 16, t, nt, &lo, &hi);
    for (size_t i = lo; i < hi; i++) a->g[i] *= a->scale;
}

double dga_vec_norm(const float *g, size_t n)
{
    size_t nchunks = (n + NORM_CHUNK - 1) / NORM_CHUNK;
    double *part;
    if (threaded(n) && nchunks > 1 &&
        (part = dga_pool_scratch(nchunks * sizeof *part)) != NULL) {
        norm_args a = {.g = (float *)g, .n = n, .part = part};
        dga_pool_run(norm_task, &a);
        double s = 0.0;
        for (size_t c = 0; c < nchunks; c++) s += part[c];
        return sqrt(s);
    }
    return sqrt(sum_squares(g, n));
}

double dga_grad_clip(float *g, size_t n, double max_norm)
{
    double norm = dga_vec_norm(g, n);
    if (max_norm > 0.0 && isfinite(norm)) {
        double coef = max_norm / (norm + 1e-6);   /* clip_grad_norm_'s formula */
        if (coef < 1.0) {
            float f = (float)coef;
            if (threaded(n)) {
                norm_args a = {.g = g, .n = n, .scale = f};
                dga_pool_run(scale_task, &a);
            } else {
                for (size_t i = 0; i < n; i++) g[i] *= f;
            }
        }
    }
    return norm;
}
