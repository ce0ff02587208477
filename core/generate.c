/* Text generation from a prompt: greedy or temperature sampling, one forward-only pass over
 * the current window per new token (no KV cache: a window is at most n_ctx tokens, and the
 * models trained here are small). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"

typedef struct {
    double p;
    int id;
} ranked;

/* Most probable first; the lower id first on ties, so the order (and a draw) is deterministic. */
static int by_prob_desc(const void *a, const void *b)
{
    const ranked *x = a, *y = b;
    if (x->p != y->p) return x->p > y->p ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

/* A draw restricted to the top_k most likely tokens, then to the smallest prefix of those
 * (renormalised) whose probability reaches top_p: the order of Hugging Face's TopK and TopP
 * warpers (Holtzman et al., 2020, "The Curious Case of Neural Text Degeneration", for the
 * nucleus). probs holds the unnormalised softmax; rank is V entries of scratch. */
static int pick_restricted(const double *probs, int V, int top_k, double top_p, dga_rng *rng,
                           ranked *rank)
{
    for (int i = 0; i < V; i++) rank[i] = (ranked){probs[i], i};
    qsort(rank, (size_t)V, sizeof *rank, by_prob_desc);
    int keep = top_k > 0 && top_k < V ? top_k : V;
    double total = 0;
    for (int i = 0; i < keep; i++) total += rank[i].p;
    if (top_p < 1) {
        double acc = 0;
        int n = 0;
        while (n < keep) {
            acc += rank[n++].p;
            if (acc >= top_p * total) break;
        }
        keep = n;
        total = acc;
    }
    double u = dga_rng_uniform(rng) * total, acc = 0;
    for (int i = 0; i < keep; i++) {
        acc += rank[i].p;
        if (u < acc) return rank[i].id;
    }
    return rank[keep - 1].id;   /* only reached through rounding at the very top */
}

/* argmax (lowest id on ties) when temperature is 0, else a draw from softmax(logits / temp),
 * restricted by top_k / top_p when they are set; -1 if a logit is not finite. probs: V
 * doubles of scratch, rank: V entries (used only when restricted). */
static int pick_token(const float *logits, int V, const dga_sample_opts *o, dga_rng *rng,
                      double *probs, ranked *rank)
{
    int best = 0;
    for (int i = 0; i < V; i++) {
        if (!isfinite(logits[i])) return -1;
        if (logits[i] > logits[best]) best = i;
    }
    double temperature = o->temperature;
    if (temperature == 0) return best;
    double mx = logits[best], total = 0;
    for (int i = 0; i < V; i++) {
        probs[i] = exp(((double)logits[i] - mx) / temperature);
        total += probs[i];
    }
    if ((o->top_k > 0 && o->top_k < V) || o->top_p < 1)
        return pick_restricted(probs, V, o->top_k, o->top_p, rng, rank);
    double u = dga_rng_uniform(rng) * total, acc = 0;
    for (int i = 0; i < V; i++) {
        acc += probs[i];
        if (u < acc) return i;
    }
    return best;   /* only reached through rounding at the very top */
}

dga_status dga_model_generate(dga_model *m, const int32_t *prompt, int n_prompt, int n_new,
                            double temperature, dga_rng *rng, int32_t *out)
{
    dga_sample_opts o = {.temperature = temperature, .top_k = 0, .top_p = 1.0};
    return dga_model_generate_sampled(m, prompt, n_prompt, n_new, &o, rng, out);
}

dga_status dga_model_generate_sampled(dga_model *m, const int32_t *prompt, int n_prompt,
                                      int n_new, const dga_sample_opts *opts, dga_rng *rng,
                                      int32_t *out)
{
    if (!opts) return dga_fail(DGA_ERR_INVALID, "generate: no sampling options");
    dga_sample_opts o = *opts;
    double temperature = o.temperature;
    if (o.top_k < 0) return dga_fail(DGA_ERR_INVALID, "generate: top_k %d, expected >= 0", o.top_k);
    if (!(o.top_p > 0 && o.top_p <= 1))
        return dga_fail(DGA_ERR_INVALID, "generate: top_p %g, expected a number in (0, 1]", o.top_p);
    const int V = dga_model_vocab(m), ctx = dga_model_context(m);
    if (!prompt || n_prompt < 1) return dga_fail(DGA_ERR_INVALID, "generate: empty prompt");
    if (n_new < 0 || (n_new > 0 && !out))
        return dga_fail(DGA_ERR_INVALID, "generate: %d new tokens", n_new);
    if (!(temperature >= 0 && isfinite(temperature)))
        return dga_fail(DGA_ERR_INVALID, "generate: temperature %g, expected a finite number >= 0",
                        temperature);
    if (temperature > 0 && !rng)
        return dga_fail(DGA_ERR_INVALID, "generate: sampling (temperature > 0) needs an rng");
    if (temperature > 0 && temperature < 1e-6) temperature = 0;   /* exp would overflow */
    o.temperature = temperature;
    dga_status st = dga_model_check_ids(m, "generate", prompt, 1, n_prompt, 0);
    if (st != DGA_OK) return st;
    int keep = n_prompt > ctx ? ctx - 1 : n_prompt;
    if (keep < 1) keep = 1;
    size_t total = (size_t)keep + (size_t)n_new;
    int32_t *seq = malloc(total * sizeof *seq);
    float *logits = malloc((size_t)V * sizeof *logits);
    double *probs = malloc((size_t)V * sizeof *probs);
    ranked *rank = malloc((size_t)V * sizeof *rank);
    if (!seq || !logits || !probs || !rank) {
        st = dga_fail(DGA_ERR_NOMEM, "generate: out of memory for %zu tokens", total);
        goto done;
    }
    memcpy(seq, prompt + (n_prompt - keep), (size_t)keep * sizeof *seq);
    size_t len = (size_t)keep;
    for (int i = 0; i < n_new; i++) {
        int win = len > (size_t)ctx ? ctx : (int)len;
        if ((st = dga_model_next_logits(m, seq + (len - (size_t)win), win, logits))) goto done;
        int id = pick_token(logits, V, &o, rng, probs, rank);
        if (id < 0) {
            st = dga_fail(DGA_ERR_INVALID, "generate: non-finite logits at new token %d "
                          "(diverged parameters?)", i + 1);
            goto done;
        }
        seq[len++] = out[i] = id;
    }
done:
    free(seq), free(logits), free(probs), free(rank);
    return st;
}
