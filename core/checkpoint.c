#include "checkpoint.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Fixed metadata keys, in the order they are written. */
enum { K_FORMAT, K_DGA_FORMAT, K_TYPE, K_LAYER, K_HEAD, K_EMBD, K_POS, K_VOCAB, K_BATCH,
       N_MODEL_KEYS };
enum { O_STEPS, O_LR, O_B1, O_B2, O_EPS, O_WD, N_OPT_KEYS };
static const char *const model_keys[N_MODEL_KEYS] = {
    "format", "dgalua.format", "model_type", "n_layer", "n_head", "n_embd", "n_positions",
    "vocab_size", "dgalua.max_batch",
};
#define CRC_KEY "dgalua.crc32"
#define LEGACY_FORMAT "dgalua-checkpoint-1"   /* no checksum, "format" held this */
static const char *const opt_keys[N_OPT_KEYS] = {
    "optimizer.steps", "optimizer.lr", "optimizer.beta1", "optimizer.beta2", "optimizer.eps",
    "optimizer.weight_decay",
};

static int is_reserved_key(const char *k)
{
    for (int i = 0; i < N_MODEL_KEYS; i++)
        if (!strcmp(k, model_keys[i])) return 1;
    return !strncmp(k, "optimizer.", 10) || !strcmp(k, CRC_KEY);
}

static void fill_model_entry(dga_st_entry *e, const dga_tensor_info *ti, const char *name,
                             const float *base)
{
    e->name = name;
    e->dtype = DGA_ST_F32;
    e->ndim = ti->ndim;
    for (int d = 0; d < ti->ndim; d++) e->shape[d] = ti->shape[d];
    e->data = base + ti->offset;
}

dga_status dga_checkpoint_save(const char *path, dga_model *model, dga_adamw *opt,
                               const dga_st_entry *extras, int n_extras,
                               const dga_st_meta *meta, int n_meta)
{
    if (!model) return dga_fail(DGA_ERR_INVALID, "%s: checkpoint needs a model", path);
    const dga_gpt_config *c = dga_gpt_get_config(model);
    if (!c)
        return dga_fail(DGA_ERR_INVALID, "%s: checkpoints hold GPT-2 models, this one is '%s'",
                        path, dga_model_arch(model));
    if (n_extras < 0 || n_meta < 0 || (n_extras && !extras) || (n_meta && !meta))
        return dga_fail(DGA_ERR_INVALID, "%s: invalid extras or metadata list", path);
    size_t np = dga_model_num_params(model);
    if (opt && dga_adamw_size(opt) != np)
        return dga_fail(DGA_ERR_INVALID, "%s: optimizer holds %zu parameters, model has %zu",
                        path, dga_adamw_size(opt), np);
    for (int i = 0; i < n_extras; i++) {
        const char *nm = extras[i].name ? extras[i].name : "";
        if (!strncmp(nm, "optimizer.", 10) || !strncmp(nm, "transformer.", 12) ||
            !strncmp(nm, "lm_head.", 8))
            return dga_fail(DGA_ERR_INVALID, "%s: extra tensor name '%s' is reserved for the "
                            "model or the optimizer", path, nm);
    }
    for (int i = 0; i < n_meta; i++)
        if (meta[i].key && is_reserved_key(meta[i].key))
            return dga_fail(DGA_ERR_INVALID, "%s: metadata key '%s' is reserved", path,
                            meta[i].key);

    int nt = dga_model_num_tensors(model), per = opt ? 3 : 1;
    int n = nt * per + n_extras, nm = N_MODEL_KEYS + (opt ? N_OPT_KEYS : 0) + n_meta;
    dga_st_entry *e = calloc((size_t)n + 1, sizeof *e);
    dga_st_meta *m = calloc((size_t)nm, sizeof *m);
    char (*names)[80] = calloc((size_t)nt * 2 + 1, sizeof *names);
    char (*vals)[40] = calloc(N_MODEL_KEYS + N_OPT_KEYS, sizeof *vals);
    dga_status st = DGA_OK;
    if (!e || !m || !names || !vals) {
        st = dga_fail(DGA_ERR_NOMEM, "%s: out of memory", path);
        goto out;
    }
    const float *theta = dga_model_params(model);
    int k = 0;
    for (int i = 0; i < nt; i++) {
        const dga_tensor_info *ti = dga_model_tensor(model, i);
        fill_model_entry(&e[k++], ti, ti->name, theta);
        if (opt) {
            snprintf(names[2 * i], sizeof names[0], "optimizer.m.%s", ti->name);
            snprintf(names[2 * i + 1], sizeof names[0], "optimizer.v.%s", ti->name);
            fill_model_entry(&e[k++], ti, names[2 * i], dga_adamw_m(opt));
            fill_model_entry(&e[k++], ti, names[2 * i + 1], dga_adamw_v(opt));
        }
    }
    for (int i = 0; i < n_extras; i++) e[k++] = extras[i];

    int q = 0;
    /* Hugging Face's from_pretrained accepts only "pt" (or tf/flax/mlx) under "format" */
    snprintf(vals[K_FORMAT], sizeof vals[0], "pt");
    snprintf(vals[K_DGA_FORMAT], sizeof vals[0], "%s", DGA_CHECKPOINT_FORMAT);
    snprintf(vals[K_TYPE], sizeof vals[0], "gpt2");
    snprintf(vals[K_LAYER], sizeof vals[0], "%d", c->n_layer);
    snprintf(vals[K_HEAD], sizeof vals[0], "%d", c->n_head);
    snprintf(vals[K_EMBD], sizeof vals[0], "%d", c->n_embd);
    snprintf(vals[K_POS], sizeof vals[0], "%d", c->n_ctx);
    snprintf(vals[K_VOCAB], sizeof vals[0], "%d", c->vocab_size);
    snprintf(vals[K_BATCH], sizeof vals[0], "%d", dga_model_max_batch(model));
    for (int i = 0; i < N_MODEL_KEYS; i++) m[q++] = (dga_st_meta){model_keys[i], vals[i]};
    if (opt) {
        const dga_adamw_config *oc = dga_adamw_get_config(opt);
        char (*ov)[40] = vals + N_MODEL_KEYS;
        snprintf(ov[O_STEPS], sizeof ov[0], "%" PRId64, dga_adamw_steps(opt));
        snprintf(ov[O_LR], sizeof ov[0], "%.9g", (double)oc->lr);
        snprintf(ov[O_B1], sizeof ov[0], "%.9g", (double)oc->beta1);
        snprintf(ov[O_B2], sizeof ov[0], "%.9g", (double)oc->beta2);
        snprintf(ov[O_EPS], sizeof ov[0], "%.9g", (double)oc->eps);
        snprintf(ov[O_WD], sizeof ov[0], "%.9g", (double)oc->weight_decay);
        for (int i = 0; i < N_OPT_KEYS; i++) m[q++] = (dga_st_meta){opt_keys[i], ov[i]};
    }
    for (int i = 0; i < n_meta; i++) m[q++] = meta[i];
    st = dga_safetensors_write_crc(path, e, n, m, nm, CRC_KEY);
out:
    free(e);
    free(m);
    free(names);
    free(vals);
    return st;
}

/* ------------------------------------------------------------------ loading */

struct dga_checkpoint {
    dga_safetensors *file;
    dga_gpt_config   cfg;
    int              max_batch;
    int              has_opt;
};

static dga_status meta_int(const dga_safetensors *f, const char *key, int required,
                           int64_t lo, int64_t hi, int64_t *out)
{
    const char *path = dga_safetensors_path(f);
    const char *v = dga_safetensors_meta(f, key);
    if (!v) {
        if (!required) return DGA_OK;
        return dga_fail(DGA_ERR_FORMAT, "%s: metadata has no \"%s\"", path, key);
    }
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (errno || end == v || *end || x < lo || x > hi)
        return dga_fail(DGA_ERR_FORMAT, "%s: metadata \"%s\" is \"%s\" (expected an integer in "
                        "[%" PRId64 ", %" PRId64 "])", path, key, v, lo, hi);
    *out = x;
    return DGA_OK;
}

/* A finite number in [lo, hi] (in [lo, hi) when hi_open). strtod reads "nan" and "inf",
 * which the range check must refuse: AdamW would spread them into every weight. */
static dga_status meta_float(const dga_safetensors *f, const char *key, double lo, double hi,
                             int hi_open, float *out)
{
    const char *path = dga_safetensors_path(f);
    const char *v = dga_safetensors_meta(f, key);
    if (!v) return dga_fail(DGA_ERR_FORMAT, "%s: metadata has no \"%s\"", path, key);
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (errno || end == v || *end)
        return dga_fail(DGA_ERR_FORMAT, "%s: metadata \"%s\" is \"%s\" (expected a number)",
                        path, key, v);
    float xf = (float)x;
    if (!isfinite(xf) || !(xf >= lo) || (hi_open ? !(xf < hi) : !(xf <= hi)))
        return dga_fail(DGA_ERR_FORMAT, "%s: metadata \"%s\" is \"%s\" (expected a finite "
                        "number in [%g, %g%c)", path, key, v, lo, hi, hi_open ? ')' : ']');
    *out = xf;
    return DGA_OK;
}

dga_status dga_checkpoint_open(const char *path, dga_checkpoint **out)
{
    *out = NULL;
    dga_checkpoint *ck = calloc(1, sizeof *ck);
    if (!ck) return dga_fail(DGA_ERR_NOMEM, "%s: out of memory", path);
    dga_status st = dga_safetensors_open(path, &ck->file);
    if (st != DGA_OK) {
        free(ck);
        return st;
    }
    const char *fmt = dga_safetensors_meta(ck->file, model_keys[K_DGA_FORMAT]);
    const char *legacy = dga_safetensors_meta(ck->file, model_keys[K_FORMAT]);
    if (fmt && !strcmp(fmt, DGA_CHECKPOINT_FORMAT)) {
        if ((st = dga_safetensors_check_crc(ck->file, CRC_KEY)) != DGA_OK) goto fail;
    } else if (!(legacy && !strcmp(legacy, LEGACY_FORMAT))) {
        st = dga_fail(DGA_ERR_FORMAT, "%s: metadata \"%s\" is %s%s%s (expected \"%s\": not a "
                      "dgalua checkpoint)", path, model_keys[K_DGA_FORMAT], fmt ? "\"" : "",
                      fmt ? fmt : "missing", fmt ? "\"" : "", DGA_CHECKPOINT_FORMAT);
        goto fail;
    }
    int64_t v[5], batch = 1;
    for (int i = 0; i < 5 && st == DGA_OK; i++)
        st = meta_int(ck->file, model_keys[K_LAYER + i], 1, 1, INT32_MAX, &v[i]);
    /* dga_gpt_create's bound, checked here so that the message names the file and the key */
    if (st == DGA_OK) st = meta_int(ck->file, model_keys[K_BATCH], 0, 1, 1 << 20, &batch);
    if (st == DGA_OK && batch * v[3] > INT_MAX / 4)
        st = dga_fail(DGA_ERR_FORMAT, "%s: metadata \"%s\" = %" PRId64 " times \"%s\" = %" PRId64
                      " is more rows than a batch can hold (%d)", path, model_keys[K_BATCH], batch,
                      model_keys[K_LAYER + 3], v[3], INT_MAX / 4);
    if (st != DGA_OK) goto fail;
    ck->cfg = (dga_gpt_config){.n_layer = (int)v[0], .n_head = (int)v[1], .n_embd = (int)v[2],
                               .n_ctx = (int)v[3], .vocab_size = (int)v[4]};
    ck->max_batch = (int)batch;
    st = dga_gpt_config_check(&ck->cfg);
    if (st != DGA_OK) {
        st = dga_fail_wrap(DGA_ERR_FORMAT, "%s: invalid model config", path);
        goto fail;
    }
    ck->has_opt = dga_safetensors_meta(ck->file, opt_keys[O_STEPS]) != NULL;
    *out = ck;
    return DGA_OK;
fail:
    dga_checkpoint_close(ck);
    return st;
}

void dga_checkpoint_close(dga_checkpoint *ck)
{
    if (!ck) return;
    dga_safetensors_close(ck->file);
    free(ck);
}

const dga_gpt_config *dga_checkpoint_config(const dga_checkpoint *ck) { return &ck->cfg; }
int dga_checkpoint_max_batch(const dga_checkpoint *ck) { return ck->max_batch; }
int dga_checkpoint_has_optimizer(const dga_checkpoint *ck) { return ck->has_opt; }
const dga_safetensors *dga_checkpoint_file(const dga_checkpoint *ck) { return ck->file; }

static dga_status check_config(const dga_checkpoint *ck, const dga_model *model)
{
    const char *path = dga_safetensors_path(ck->file);
    const dga_gpt_config *a = &ck->cfg, *b = dga_gpt_get_config(model);
    if (!b)
        return dga_fail(DGA_ERR_INVALID, "%s: holds a GPT-2 model, not a '%s'", path,
                        dga_model_arch(model));
    const int fa[5] = {a->n_layer, a->n_head, a->n_embd, a->n_ctx, a->vocab_size};
    const int fb[5] = {b->n_layer, b->n_head, b->n_embd, b->n_ctx, b->vocab_size};
    for (int i = 0; i < 5; i++)
        if (fa[i] != fb[i])
            return dga_fail(DGA_ERR_INVALID, "%s: config mismatch: file has %s=%d, model has "
                            "%s=%d", path, model_keys[K_LAYER + i], fa[i],
                            model_keys[K_LAYER + i], fb[i]);
    return DGA_OK;
}

/* The largest magnitude a loaded weight may have. Trained weights are O(1); one of 3e38 is
 * finite but overflows float32 in the first forward pass and surfaces steps later as a NaN
 * gradient. 1e9 leaves a square (a layer norm's variance) far below float32's 3.4e38. */
#define DGA_CHECKPOINT_MAX_WEIGHT 1e9f

/* An error naming the tensor if its data holds a NaN or an infinity: such a checkpoint would
 * load and then poison every step. With `nonneg` (Adam's second moment, a running mean of
 * squares) a negative value is refused too: sqrt(v) would write a NaN into the weight. With
 * `weights`, a magnitude above DGA_CHECKPOINT_MAX_WEIGHT is refused. */
static dga_status check_finite(const dga_checkpoint *ck, const dga_st_entry *e, int nonneg, int weights)
{
    const unsigned char *p = e->data;   /* possibly unaligned: read through memcpy */
    int64_t n = dga_st_entry_numel(e);
    for (int64_t i = 0; i < n; i++) {
        float x;
        memcpy(&x, p + 4 * i, 4);
        if (!isfinite(x))
            return dga_fail(DGA_ERR_FORMAT, "%s: tensor '%s' holds %s at index %" PRId64
                            " (a diverged run was saved?)", dga_safetensors_path(ck->file),
                            e->name, isnan(x) ? "NaN" : "an infinity", i);
        if (weights && fabsf(x) > DGA_CHECKPOINT_MAX_WEIGHT)
            return dga_fail(DGA_ERR_FORMAT, "%s: tensor '%s' holds %g at index %" PRId64
                            " (a weight beyond +-%g overflows float32 in the forward pass: a "
                            "diverged or damaged checkpoint?)", dga_safetensors_path(ck->file),
                            e->name, (double)x, i, (double)DGA_CHECKPOINT_MAX_WEIGHT);
        if (nonneg && x < 0)
            return dga_fail(DGA_ERR_FORMAT, "%s: tensor '%s' holds %g at index %" PRId64
                            " (a second moment must be >= 0)", dga_safetensors_path(ck->file),
                            e->name, (double)x, i);
    }
    return DGA_OK;
}

/* The entry `name` as F32 with the shape of ti, or an error. */
static dga_status find_like(const dga_checkpoint *ck, const char *name,
                            const dga_tensor_info *ti, const dga_st_entry **out)
{
    const char *path = dga_safetensors_path(ck->file);
    const dga_st_entry *e = dga_safetensors_find(ck->file, name);
    if (!e) return dga_fail(DGA_ERR_FORMAT, "%s: missing tensor '%s'", path, name);
    int ok = e->dtype == DGA_ST_F32 && e->ndim == ti->ndim;
    for (int d = 0; ok && d < ti->ndim; d++) ok = e->shape[d] == ti->shape[d];
    if (!ok) {
        char got[96] = "", want[48] = "";
        size_t n = 0;
        for (int d = 0; d < e->ndim && n < sizeof got; d++)
            n += (size_t)snprintf(got + n, sizeof got - n, d ? "x%" PRId64 : "%" PRId64,
                                  e->shape[d]);
        if (ti->ndim == 1) snprintf(want, sizeof want, "%d", ti->shape[0]);
        else snprintf(want, sizeof want, "%dx%d", ti->shape[0], ti->shape[1]);
        return dga_fail(DGA_ERR_FORMAT, "%s: tensor '%s' is %s[%s], expected F32[%s]", path,
                        name, dga_st_dtype_name(e->dtype), got, want);
    }
    *out = e;
    return DGA_OK;
}

dga_status dga_checkpoint_load_model(const dga_checkpoint *ck, dga_model *model)
{
    dga_status st = check_config(ck, model);
    int nt = dga_model_num_tensors(model);
    for (int i = 0; i < nt && st == DGA_OK; i++) {   /* validate everything, then copy */
        const dga_tensor_info *ti = dga_model_tensor(model, i);
        const dga_st_entry *e;
        st = find_like(ck, ti->name, ti, &e);
        if (st == DGA_OK) st = check_finite(ck, e, 0, 1);
    }
    if (st != DGA_OK) return st;
    float *theta = dga_model_params(model);
    for (int i = 0; i < nt; i++) {
        const dga_tensor_info *ti = dga_model_tensor(model, i);
        const dga_st_entry *e = dga_safetensors_find(ck->file, ti->name);
        memcpy(theta + ti->offset, e->data, ti->numel * sizeof(float));
    }
    return DGA_OK;
}

dga_status dga_checkpoint_load_optimizer(const dga_checkpoint *ck, const dga_model *model,
                                         dga_adamw *opt)
{
    const char *path = dga_safetensors_path(ck->file);
    if (!ck->has_opt)
        return dga_fail(DGA_ERR_FORMAT, "%s: the checkpoint holds no optimizer state", path);
    dga_status st = check_config(ck, model);
    if (st != DGA_OK) return st;
    if (dga_adamw_size(opt) != dga_model_num_params(model))
        return dga_fail(DGA_ERR_INVALID, "%s: optimizer holds %zu parameters, model has %zu",
                        path, dga_adamw_size(opt), dga_model_num_params(model));
    int64_t steps = 0;
    dga_adamw_config c = *dga_adamw_get_config(opt);
    st = meta_int(ck->file, opt_keys[O_STEPS], 1, 0, INT64_MAX, &steps);
    /* the ranges dga_adamw_create accepts */
    if (st == DGA_OK) st = meta_float(ck->file, opt_keys[O_LR], 0, HUGE_VAL, 0, &c.lr);
    if (st == DGA_OK) st = meta_float(ck->file, opt_keys[O_B1], 0, 1, 1, &c.beta1);
    if (st == DGA_OK) st = meta_float(ck->file, opt_keys[O_B2], 0, 1, 1, &c.beta2);
    if (st == DGA_OK) st = meta_float(ck->file, opt_keys[O_EPS], 0, HUGE_VAL, 0, &c.eps);
    if (st == DGA_OK) st = meta_float(ck->file, opt_keys[O_WD], 0, HUGE_VAL, 0, &c.weight_decay);
    int nt = dga_model_num_tensors(model);
    char name[96];
    for (int i = 0; i < nt && st == DGA_OK; i++) {
        const dga_tensor_info *ti = dga_model_tensor(model, i);
        const dga_st_entry *e;
        snprintf(name, sizeof name, "optimizer.m.%s", ti->name);
        st = find_like(ck, name, ti, &e);
        if (st == DGA_OK) st = check_finite(ck, e, 0, 0);
        snprintf(name, sizeof name, "optimizer.v.%s", ti->name);
        if (st == DGA_OK) st = find_like(ck, name, ti, &e);
        if (st == DGA_OK) st = check_finite(ck, e, 1, 0);
    }
    if (st != DGA_OK) return st;
    float *m = dga_adamw_m(opt), *v = dga_adamw_v(opt);
    for (int i = 0; i < nt; i++) {
        const dga_tensor_info *ti = dga_model_tensor(model, i);
        snprintf(name, sizeof name, "optimizer.m.%s", ti->name);
        memcpy(m + ti->offset, dga_safetensors_find(ck->file, name)->data,
               ti->numel * sizeof(float));
        snprintf(name, sizeof name, "optimizer.v.%s", ti->name);
        memcpy(v + ti->offset, dga_safetensors_find(ck->file, name)->data,
               ti->numel * sizeof(float));
    }
    *dga_adamw_get_config(opt) = c;
    dga_adamw_set_steps(opt, steps);
    return DGA_OK;
}

dga_status dga_checkpoint_new_model(const dga_checkpoint *ck, int max_batch, dga_model **out)
{
    *out = NULL;
    dga_model *m = NULL;
    dga_status st = dga_gpt_create(&ck->cfg, max_batch > 0 ? max_batch : ck->max_batch, &m);
    if (st == DGA_OK) st = dga_checkpoint_load_model(ck, m);
    if (st != DGA_OK) {
        dga_model_free(m);
        return st;
    }
    *out = m;
    return DGA_OK;
}
