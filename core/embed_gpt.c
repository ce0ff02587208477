/* The second embedder: mean-pooled hidden states of a trained dgalua model ("gpt:CKPT").
 *
 * A text is encoded with the model's tokenizer, cut into windows of the model's context,
 * run through the trunk (forward only), and the final layernorm's outputs are averaged over
 * every position of every window, then L2-normalised; a text with no tokens embeds to zero.
 * The tokenizer is the tokenizer.json in the checkpoint's directory (where a dgalua run or
 * a domain store keeps it). In a store, save() copies both files in (embedder_model.
 * safetensors, embedder_tokenizer.json), so the store stays self-contained and texts
 * embedded later (IS histograms) use the same model; the manifest names the embedder "gpt".
 *
 * Not thread-safe: embedding runs in the model's inference buffers (no embedder is called
 * from several threads here). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bpe.h"
#include "checkpoint.h"
#include "embed.h"
#include "fileio.h"
#include "model.h"

#define MODEL_FILE "embedder_model.safetensors"
#define TOKENIZER_FILE "embedder_tokenizer.json"

typedef struct {
    dga_model *model;
    dga_bpe *tok;
    char    *model_path;   /* where the two came from (save copies them) */
    char    *tok_path;
} gpt_state;

static dga_status gpt_embed(const dga_embedder *e, const char *text, size_t len, float *out)
{
    gpt_state *s = e->state;
    if (!s->model) return dga_fail(DGA_ERR_INVALID, "embed gpt: no model loaded");
    const int C = e->dim, ctx = dga_model_context(s->model);
    dga_bpe_ids ids = {0};
    dga_status st = dga_bpe_encode_append(s->tok, text, len, &ids);
    memset(out, 0, (size_t)C * sizeof *out);
    for (size_t i = 0; st == DGA_OK && i < ids.n; i += (size_t)ctx) {
        int n = ids.n - i < (size_t)ctx ? (int)(ids.n - i) : ctx;
        st = dga_model_hidden_sum(s->model, ids.ids + i, n, out);
    }
    if (st == DGA_OK) {
        double sq = 0;
        for (int c = 0; c < C; c++) sq += (double)out[c] * out[c];
        if (sq > 0)
            for (int c = 0; c < C; c++) out[c] = (float)(out[c] / sqrt(sq));
    }
    dga_bpe_ids_free(&ids);
    return st;
}

/* Loads the model of a checkpoint and the tokenizer, and checks they fit each other. */
static dga_status gpt_load_files(gpt_state *s, const char *model_path, const char *tok_path,
                                 int *dim)
{
    dga_checkpoint *ck = NULL;
    dga_model *m = NULL;
    dga_bpe *tok = NULL;
    dga_status st = dga_checkpoint_open(model_path, &ck);
    if (st == DGA_OK) st = dga_checkpoint_new_model(ck, 1, &m);
    dga_checkpoint_close(ck);
    if (st == DGA_OK && (st = dga_bpe_load(tok_path, &tok)) != DGA_OK)
        st = dga_fail(st, "embed gpt: the model's tokenizer: %s (a gpt:CKPT embedder reads "
                      "tokenizer.json beside the checkpoint)", dga_last_error());
    if (st == DGA_OK && dga_bpe_vocab_size(tok) > dga_model_vocab(m))
        st = dga_fail(DGA_ERR_INVALID, "embed gpt: %s has %d tokens, the model %s only %d",
                      tok_path, dga_bpe_vocab_size(tok), model_path,
                      dga_model_vocab(m));
    char *mp = st == DGA_OK ? strdup(model_path) : NULL, *tp = st == DGA_OK ? strdup(tok_path) : NULL;
    if (st == DGA_OK && (!mp || !tp)) st = dga_fail(DGA_ERR_NOMEM, "embed gpt: out of memory");
    if (st != DGA_OK) {
        dga_model_free(m), dga_bpe_free(tok), free(mp), free(tp);
        return st;
    }
    dga_model_free(s->model), dga_bpe_free(s->tok), free(s->model_path), free(s->tok_path);
    s->model = m, s->tok = tok, s->model_path = mp, s->tok_path = tp;
    *dim = dga_model_width(m);
    return DGA_OK;
}

static dga_status gpt_save(const dga_embedder *e, const char *dir)
{
    const gpt_state *s = e->state;
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, MODEL_FILE);
    dga_status st = dga_file_copy_atomic(s->model_path, path);
    if (st != DGA_OK) return st;
    snprintf(path, sizeof path, "%s/%s", dir, TOKENIZER_FILE);
    return dga_file_copy_atomic(s->tok_path, path);
}

static dga_status gpt_load(dga_embedder *e, const char *dir)
{
    char mp[4200], tp[4200];
    snprintf(mp, sizeof mp, "%s/%s", dir, MODEL_FILE);
    snprintf(tp, sizeof tp, "%s/%s", dir, TOKENIZER_FILE);
    return gpt_load_files(e->state, mp, tp, &e->dim);
}

static void gpt_destroy(dga_embedder *e)
{
    gpt_state *s = e->state;
    if (s) {
        dga_model_free(s->model);
        dga_bpe_free(s->tok);
        free(s->model_path);
        free(s->tok_path);
        free(s);
    }
    free(e);
}

dga_status dga_embedder_gpt_new(const char *checkpoint, dga_embedder **out)
{
    *out = NULL;
    dga_embedder *e = calloc(1, sizeof *e);
    gpt_state *s = calloc(1, sizeof *s);
    if (!e || !s) {
        free(e), free(s);
        return dga_fail(DGA_ERR_NOMEM, "embed gpt: out of memory");
    }
    e->name = "gpt";
    e->state = s;
    e->embed = gpt_embed;
    e->save = gpt_save;
    e->load = gpt_load;
    e->destroy = gpt_destroy;
    if (checkpoint) {
        char tok_path[4200];
        const char *slash = strrchr(checkpoint, '/');
        int dir_len = slash ? (int)(slash - checkpoint) : 1;
        snprintf(tok_path, sizeof tok_path, "%.*s/tokenizer.json", dir_len, slash ? checkpoint : ".");
        dga_status st = gpt_load_files(s, checkpoint, tok_path, &e->dim);
        if (st != DGA_OK) {
            gpt_destroy(e);
            return st;
        }
    }
    *out = e;
    return DGA_OK;
}
