/* oneDNN matmul contexts (see gemm_dnnl.h). */
#include "gemm_dnnl.h"

#include <omp.h>
#include <oneapi/dnnl/dnnl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pool.h"

/* ---------------------------------------------------------------- precision names */

static const char *const prec_names[] = {"fp32", "bf16", "fp32-onednn"};

const char *dga_precision_name(dga_precision p)
{
    return (unsigned)p < sizeof prec_names / sizeof prec_names[0] ? prec_names[p] : "?";
}

dga_status dga_precision_parse(const char *s, dga_precision *out)
{
    for (size_t i = 0; s && i < sizeof prec_names / sizeof prec_names[0]; i++)
        if (strcmp(s, prec_names[i]) == 0) {
            *out = (dga_precision)i;
            return DGA_OK;
        }
    return dga_fail(DGA_ERR_INVALID, "precision '%s': expected fp32, bf16 or fp32-onednn",
                    s ? s : "(null)");
}

/* ---------------------------------------------------------------- bf16 conversion */

/* Round to nearest even on the upper 16 bits: adding 0x7fff plus the lowest kept bit carries
 * into the kept bits exactly when the dropped half is above one half, or equal to it with an
 * odd kept part. A NaN is kept quiet instead (the carry could turn it into an infinity). */
static inline uint16_t bf16_round(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    uint32_t nan = (u & 0x7fffffffu) > 0x7f800000u;
    uint32_t r = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    return (uint16_t)(nan ? (u >> 16) | 0x40u : r);
}

float dga_bf16_to_f32(uint16_t b)
{
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

typedef struct {
    void *dst;
    const float *src;
    size_t n;
    int as_f32;   /* write the rounded value back as fp32 (emulation) */
} conv_args;

static void conv_range(const conv_args *a, size_t lo, size_t hi)
{
    if (a->as_f32) {
        float *d = a->dst;
        for (size_t i = lo; i < hi; i++) d[i] = dga_bf16_to_f32(bf16_round(a->src[i]));
    } else {
        uint16_t *d = a->dst;
        for (size_t i = lo; i < hi; i++) d[i] = bf16_round(a->src[i]);
    }
}

static void conv_task(void *p, int t, int nt)
{
    const conv_args *a = p;
    size_t lo, hi;
    dga_pool_range(a->n, 16, t, nt, &lo, &hi);
    conv_range(a, lo, hi);
}

static void convert(void *dst, const float *src, size_t n, int as_f32)
{
    conv_args a = {dst, src, n, as_f32};
    if (dga_pool_threads() == 1 || n < dga_pool_min_work()) conv_range(&a, 0, n);
    else dga_pool_run(conv_task, &a);
}

void dga_bf16_from_f32(uint16_t *dst, const float *src, size_t n) { convert(dst, src, n, 0); }

/* ---------------------------------------------------------------- engine, detection */

static struct {
    pthread_once_t once;
    dnnl_engine_t engine;
    dnnl_status_t engine_status;
    int bf16_native;
    int emulate;
} lib = {.once = PTHREAD_ONCE_INIT};

/* Whether a small bf16 matmul primitive can be created at all. */
static int bf16_matmul_exists(void)
{
    dnnl_memory_desc_t a, b, c;
    dnnl_dims_t da = {64, 64}, db = {64, 64};
    dnnl_memory_desc_init_by_tag(&a, 2, da, dnnl_bf16, dnnl_ab);
    dnnl_memory_desc_init_by_tag(&b, 2, db, dnnl_bf16, dnnl_ab);
    dnnl_memory_desc_init_by_tag(&c, 2, da, dnnl_f32, dnnl_ab);
    dnnl_matmul_desc_t d;
    dnnl_primitive_desc_t pd;
    if (dnnl_matmul_desc_init(&d, &a, &b, NULL, &c) != dnnl_success) return 0;
    if (dnnl_primitive_desc_create(&pd, &d, NULL, lib.engine, NULL) != dnnl_success) return 0;
    dnnl_primitive_desc_destroy(pd);
    return 1;
}

static void lib_init(void)
{
    lib.engine_status = dnnl_engine_create(&lib.engine, dnnl_cpu, 0);
    const char *e = getenv("DGA_BF16_EMULATE");
    if (e && strcmp(e, "1") == 0) lib.emulate = 1;
    if (lib.engine_status != dnnl_success) return;
    /* The ISA values are bit sets, each including its predecessors' bits. */
    unsigned isa = (unsigned)dnnl_get_effective_cpu_isa();
    unsigned bf16 = (unsigned)dnnl_cpu_isa_avx512_core_bf16;
    lib.bf16_native = (isa & bf16) == bf16 && bf16_matmul_exists();
}

const char *dga_dnnl_isa_name(void)
{
    static const struct { dnnl_cpu_isa_t isa; const char *name; } names[] = {
        {dnnl_cpu_isa_avx512_core_amx, "avx512_core_amx"},
        {dnnl_cpu_isa_avx512_core_bf16, "avx512_core_bf16"},
        {dnnl_cpu_isa_avx512_core_vnni, "avx512_core_vnni"},
        {dnnl_cpu_isa_avx512_core, "avx512_core"},
        {dnnl_cpu_isa_avx2_vnni, "avx2_vnni"},
        {dnnl_cpu_isa_avx2, "avx2"},
        {dnnl_cpu_isa_avx, "avx"},
        {dnnl_cpu_isa_sse41, "sse41"},
    };
    dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (isa == names[i].isa) return names[i].name;
    return "other";
}

int dga_dnnl_bf16_native(void)
{
    pthread_once(&lib.once, lib_init);
    return lib.bf16_native;
}

void dga_dnnl_set_emulate_bf16(int on)
{
    pthread_once(&lib.once, lib_init);
    lib.emulate = on != 0;
}

int dga_dnnl_emulate_bf16(void)
{
    pthread_once(&lib.once, lib_init);
    return lib.emulate;
}

dga_precision dga_dnnl_effective(dga_precision requested, const char **why)
{
    static char reason[200];
    pthread_once(&lib.once, lib_init);
    if (why) *why = NULL;
    if (requested == DGA_PREC_BF16 && !lib.bf16_native && !lib.emulate) {
        snprintf(reason, sizeof reason, "precision bf16: oneDNN has no native bf16 matmul on "
                 "this CPU (its ISA: %s); running fp32 (OpenBLAS)", dga_dnnl_isa_name());
        if (why) *why = reason;
        return DGA_PREC_FP32;
    }
    return requested;
}

/* ---------------------------------------------------------------- the primitive cache */

typedef struct {
    int M, N, K, ta, tb, lda, ldb, ldc, acc, nthr, ntasks;
    dnnl_data_type_t dt;
    dnnl_primitive_t prim;
    dnnl_memory_t *mem;   /* [ntasks][3]: src, weights, dst, one set per task */
} entry;

struct dga_dnnl {
    dga_precision prec;
    int emulated;                     /* bf16 rounding, fp32 products */
    int use_omp;                      /* oneDNN's OpenMP threads instead of row blocks */
    entry *cache;
    int n_cache, cap_cache;
    dnnl_stream_t *streams;           /* one per task */
    int n_streams;
    void *abuf, *bbuf;                /* converted operands */
    size_t abuf_n, bbuf_n;            /* in elements */
    const float *mbase;               /* the mirrored range and its copy */
    size_t mlen;
    void *mirror;
    dga_status status;
    char error[256];
};

dga_status dga_dnnl_create(dga_precision p, dga_dnnl **out)
{
    *out = NULL;
    pthread_once(&lib.once, lib_init);
    if (lib.engine_status != dnnl_success)
        return dga_fail(DGA_ERR_INVALID, "oneDNN: cannot create a CPU engine (status %d)",
                        (int)lib.engine_status);
    if (p != DGA_PREC_BF16 && p != DGA_PREC_FP32_ONEDNN)
        return dga_fail(DGA_ERR_INVALID, "oneDNN context: precision %s needs none",
                        dga_precision_name(p));
    if (p == DGA_PREC_BF16 && !lib.bf16_native && !lib.emulate)
        return dga_fail(DGA_ERR_INVALID, "oneDNN has no bf16 matmul on this CPU (ISA %s)",
                        dga_dnnl_isa_name());
    dga_dnnl *g = calloc(1, sizeof *g);
    if (!g) return dga_fail(DGA_ERR_NOMEM, "oneDNN context: out of memory");
    g->prec = p;
    g->emulated = p == DGA_PREC_BF16 && !lib.bf16_native;
    const char *t = getenv("DGA_DNNL_THREADS");
    g->use_omp = t && strcmp(t, "omp") == 0;
    *out = g;
    return DGA_OK;
}

dga_precision dga_dnnl_precision(const dga_dnnl *g) { return g->prec; }

void dga_dnnl_free(dga_dnnl *g)
{
    if (!g) return;
    for (int i = 0; i < g->n_cache; i++) {
        entry *e = &g->cache[i];
        for (int j = 0; j < 3 * e->ntasks; j++)
            if (e->mem[j]) dnnl_memory_destroy(e->mem[j]);
        free(e->mem);
        dnnl_primitive_destroy(e->prim);
    }
    for (int i = 0; i < g->n_streams; i++) dnnl_stream_destroy(g->streams[i]);
    free(g->streams);
    free(g->cache);
    free(g->abuf);
    free(g->bbuf);
    free(g->mirror);
    free(g);
}

/* Records the first failure (its message, so a later one does not overwrite it). */
static dga_status record(dga_dnnl *g, dga_status st)
{
    if (st != DGA_OK && g->status == DGA_OK) {
        g->status = st;
        snprintf(g->error, sizeof g->error, "%s", dga_last_error());
    }
    return st;
}

dga_status dga_dnnl_take_status(dga_dnnl *g)
{
    dga_status st = g->status;
    if (st != DGA_OK) dga_fail(st, "%s", g->error);
    g->status = DGA_OK;
    return st;
}

/* Element size of the converted operands. */
static size_t op_size(const dga_dnnl *g)
{
    return g->prec == DGA_PREC_BF16 && !g->emulated ? sizeof(uint16_t) : sizeof(float);
}

dga_status dga_dnnl_mirror(dga_dnnl *g, const float *base, size_t n)
{
    if (g->prec != DGA_PREC_BF16) return DGA_OK;
    void *m = realloc(g->mirror, n * op_size(g));
    if (!m) return dga_fail(DGA_ERR_NOMEM, "oneDNN: cannot allocate a %zu MiB bf16 copy of "
                            "the weights", (n * op_size(g)) >> 20);
    g->mirror = m;
    g->mbase = base;
    g->mlen = n;
    return DGA_OK;
}

void dga_dnnl_mirror_refresh(dga_dnnl *g, size_t off, size_t len)
{
    if (g->prec != DGA_PREC_BF16 || !g->mirror || off + len > g->mlen) return;
    convert((char *)g->mirror + off * op_size(g), g->mbase + off, len, g->emulated);
}

/* The memory descriptor of a rows x cols operand stored row-major with leading dimension ld,
 * transposed (read as its transpose) if t. */
static void operand_md(dnnl_memory_desc_t *md, int rows, int cols, int t, int ld,
                       dnnl_data_type_t dt)
{
    dnnl_dims_t dims = {rows, cols};
    dnnl_dims_t strides = {t ? 1 : ld, t ? ld : 1};
    dnnl_memory_desc_init_by_strides(md, 2, dims, dt, strides);
}

static dga_status dnnl_fail(dnnl_status_t s, const char *what, int M, int N, int K)
{
    return dga_fail(s == dnnl_out_of_memory ? DGA_ERR_NOMEM : DGA_ERR_INVALID,
                    "oneDNN: %s failed for a %dx%dx%d product (status %d)", what, M, N, K,
                    (int)s);
}

/* The cached primitive for this key, created (with its per-task memory objects) if new. */
static dga_status find_entry(dga_dnnl *g, const entry *key, entry **out)
{
    for (int i = 0; i < g->n_cache; i++) {
        const entry *e = &g->cache[i];
        if (e->M == key->M && e->N == key->N && e->K == key->K && e->ta == key->ta &&
            e->tb == key->tb && e->lda == key->lda && e->ldb == key->ldb &&
            e->ldc == key->ldc && e->acc == key->acc && e->nthr == key->nthr &&
            e->ntasks == key->ntasks && e->dt == key->dt) {
            *out = &g->cache[i];
            return DGA_OK;
        }
    }
    if (g->n_cache == g->cap_cache) {
        int cap = g->cap_cache ? 2 * g->cap_cache : 16;
        entry *c = realloc(g->cache, (size_t)cap * sizeof *c);
        if (!c) return dga_fail(DGA_ERR_NOMEM, "oneDNN: cannot grow the primitive cache");
        g->cache = c;
        g->cap_cache = cap;
    }
    entry e = *key;
    dnnl_memory_desc_t a, b, c;
    operand_md(&a, e.M, e.K, e.ta, e.lda, e.dt);
    operand_md(&b, e.K, e.N, e.tb, e.ldb, e.dt);
    operand_md(&c, e.M, e.N, 0, e.ldc, dnnl_f32);
    dnnl_matmul_desc_t d;
    dnnl_status_t s = dnnl_matmul_desc_init(&d, &a, &b, NULL, &c);
    if (s != dnnl_success) return dnnl_fail(s, "matmul descriptor", e.M, e.N, e.K);
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t po = NULL;
    if (e.acc) {   /* C += A B: the sum post-op adds the old destination */
        if ((s = dnnl_primitive_attr_create(&attr)) != dnnl_success ||
            (s = dnnl_post_ops_create(&po)) != dnnl_success ||
            (s = dnnl_post_ops_append_sum(po, 1.0f)) != dnnl_success ||
            (s = dnnl_primitive_attr_set_post_ops(attr, po)) != dnnl_success) {
            if (po) dnnl_post_ops_destroy(po);
            if (attr) dnnl_primitive_attr_destroy(attr);
            return dnnl_fail(s, "sum post-op", e.M, e.N, e.K);
        }
    }
    /* the primitive is blocked for the threads it will run with */
    omp_set_num_threads(e.nthr);
    dnnl_primitive_desc_t pd;
    s = dnnl_primitive_desc_create(&pd, &d, attr, lib.engine, NULL);
    if (po) dnnl_post_ops_destroy(po);
    if (attr) dnnl_primitive_attr_destroy(attr);
    if (s != dnnl_success) return dnnl_fail(s, "matmul primitive descriptor", e.M, e.N, e.K);
    s = dnnl_primitive_create(&e.prim, pd);
    dnnl_primitive_desc_destroy(pd);
    if (s != dnnl_success) return dnnl_fail(s, "matmul primitive", e.M, e.N, e.K);
    e.mem = calloc((size_t)3 * e.ntasks, sizeof *e.mem);
    if (!e.mem) {
        dnnl_primitive_destroy(e.prim);
        return dga_fail(DGA_ERR_NOMEM, "oneDNN: cannot allocate memory objects");
    }
    const dnnl_memory_desc_t *mds[3] = {&a, &b, &c};
    for (int j = 0; j < 3 * e.ntasks; j++)
        if ((s = dnnl_memory_create(&e.mem[j], mds[j % 3], lib.engine, DNNL_MEMORY_NONE)) !=
            dnnl_success) {
            for (int i = 0; i < j; i++) dnnl_memory_destroy(e.mem[i]);
            free(e.mem);
            dnnl_primitive_destroy(e.prim);
            return dnnl_fail(s, "memory object", e.M, e.N, e.K);
        }
    g->cache[g->n_cache] = e;
    *out = &g->cache[g->n_cache++];
    return DGA_OK;
}

static dga_status need_streams(dga_dnnl *g, int n)
{
    if (n <= g->n_streams) return DGA_OK;
    dnnl_stream_t *s = realloc(g->streams, (size_t)n * sizeof *s);
    if (!s) return dga_fail(DGA_ERR_NOMEM, "oneDNN: cannot allocate streams");
    g->streams = s;
    for (; g->n_streams < n; g->n_streams++) {
        dnnl_status_t st = dnnl_stream_create(&s[g->n_streams], lib.engine,
                                              dnnl_stream_default_flags);
        if (st != dnnl_success) return dnnl_fail(st, "stream", 0, 0, 0);
    }
    return DGA_OK;
}

/* Grows a conversion buffer to n elements (first use of a larger shape only). */
static dga_status need_buf(dga_dnnl *g, void **buf, size_t *have, size_t n)
{
    if (n <= *have) return DGA_OK;
    void *p = realloc(*buf, n * op_size(g));
    if (!p) return dga_fail(DGA_ERR_NOMEM, "oneDNN: cannot allocate %zu MiB for bf16 operands",
                            (n * op_size(g)) >> 20);
    *buf = p;
    *have = n;
    return DGA_OK;
}

/* An operand as the primitive reads it: the fp32 matrix itself, its mirror copy, or its
 * conversion into buf. rows x ld elements as stored. */
static dga_status operand(dga_dnnl *g, const float *x, size_t n, void **buf, size_t *have,
                          const void **out)
{
    if (g->prec != DGA_PREC_BF16) {
        *out = x;
        return DGA_OK;
    }
    if (g->mirror && x >= g->mbase && x + n <= g->mbase + g->mlen) {
        *out = (const char *)g->mirror + (size_t)(x - g->mbase) * op_size(g);
        return DGA_OK;
    }
    dga_status st = need_buf(g, buf, have, n);
    if (st != DGA_OK) return st;
    convert(*buf, x, n, g->emulated);
    *out = *buf;
    return DGA_OK;
}

typedef struct {
    dga_dnnl *g;
    entry *e[2];          /* the primitives of the two block heights (dga_pool_range) */
    int ta, M, lda, ldc;
    size_t esz;
    const void *A, *B;
    float *C;
    dnnl_status_t fail;
} run_args;

static dnnl_status_t run_block(dga_dnnl *g, entry *e, int task, const void *A, const void *B,
                               float *C)
{
    dnnl_memory_t *m = &e->mem[3 * task];
    dnnl_status_t s;
    if ((s = dnnl_memory_set_data_handle(m[0], (void *)A)) != dnnl_success ||
        (s = dnnl_memory_set_data_handle(m[1], (void *)B)) != dnnl_success ||
        (s = dnnl_memory_set_data_handle(m[2], C)) != dnnl_success)
        return s;
    dnnl_exec_arg_t args[3] = {
        {DNNL_ARG_SRC, m[0]}, {DNNL_ARG_WEIGHTS, m[1]}, {DNNL_ARG_DST, m[2]}};
    if ((s = dnnl_primitive_execute(e->prim, g->streams[task], 3, args)) != dnnl_success)
        return s;
    return dnnl_stream_wait(g->streams[task]);
}

static void run_task(void *p, int t, int nt)
{
    run_args *a = p;
    size_t lo, hi;
    dga_pool_range((size_t)a->M, 1, t, nt, &lo, &hi);
    if (hi == lo) return;
    entry *e = (int)(hi - lo) == a->e[0]->M ? a->e[0] : a->e[1];
    /* a row block of op(A) is a row block of A, or a column block of A^T */
    size_t aoff = a->ta ? lo : lo * (size_t)a->lda;
    omp_set_num_threads(1);
    dnnl_status_t s = run_block(a->g, e, t, (const char *)a->A + aoff * a->esz, a->B,
                                a->C + lo * (size_t)a->ldc);
    if (s != dnnl_success) __atomic_store_n(&a->fail, s, __ATOMIC_RELAXED); /* any will do */
}

dga_status dga_dnnl_gemm(dga_dnnl *g, int ta, int tb, int M, int N, int K, const float *A,
                         int lda, const float *B, int ldb, float *C, int ldc, int accumulate)
{
    if (g->status != DGA_OK) return g->status;
    if (M <= 0 || N <= 0) return DGA_OK;
    const void *a, *b;
    dga_status st;
    /* stored shapes: A is M x K (K x M if ta), B is K x N (N x K if tb) */
    size_t an = (size_t)(ta ? K : M) * (size_t)lda, bn = (size_t)(tb ? N : K) * (size_t)ldb;
    if ((st = operand(g, A, an, &g->abuf, &g->abuf_n, &a)) != DGA_OK ||
        (st = operand(g, B, bn, &g->bbuf, &g->bbuf_n, &b)) != DGA_OK)
        return record(g, st);
    const int threads = dga_pool_threads();
    const int blocks = g->use_omp ? 1 : (threads < M ? threads : M);
    entry key = {.N = N, .K = K, .ta = ta, .tb = tb, .lda = lda, .ldb = ldb, .ldc = ldc,
                 .acc = accumulate != 0, .nthr = g->use_omp ? threads : 1,
                 .ntasks = g->use_omp ? 1 : threads,
                 .dt = g->prec == DGA_PREC_BF16 && !g->emulated ? dnnl_bf16 : dnnl_f32};
    if ((st = need_streams(g, key.ntasks)) != DGA_OK) return record(g, st);
    run_args r = {.g = g, .ta = ta, .M = M, .lda = lda, .ldc = ldc, .esz = op_size(g),
                  .A = a, .B = b, .C = C};
    /* dga_pool_range gives blocks of two heights at most: ceil and floor of M / blocks */
    key.M = (M + blocks - 1) / blocks;
    if ((st = find_entry(g, &key, &r.e[0])) != DGA_OK) return record(g, st);
    key.M = M / blocks;
    r.e[1] = r.e[0];
    if (key.M != r.e[0]->M && key.M > 0 && (st = find_entry(g, &key, &r.e[1])) != DGA_OK)
        return record(g, st);
    if (g->use_omp) {
        omp_set_num_threads(threads);
        r.fail = run_block(g, r.e[0], 0, a, b, C);
    } else if (threads == 1) {
        run_task(&r, 0, 1);
    } else {
        dga_pool_run(run_task, &r);
    }
    if (r.fail != dnnl_success) return record(g, dnnl_fail(r.fail, "execution", M, N, K));
    return DGA_OK;
}
