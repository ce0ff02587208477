/* Text generation from a prompt: greedy or temperature sampling, one forward-only pass over
 * the current window per new token (no KV cache: a window is at most n_ctx tokens, and the
 * models trained here are small). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gpt.h"

/* argmax (lowest id on ties) when temperature is 0, else a draw from softmax(logits / temp);
 * -1 if a logit is not finite. probs: V doubles of scratch. */
static int pick_token(const float *logits, int V, double temperature, dga_rng *rng,
                      double *probs)
{
    int best = 0;
    for (int i = 0; i < V; i++) {
        if (!isfinite(logits[i])) return -1;
        if (logits[i] > logits[best]) best = i;
    }
    if (temperature == 0) return best;
    double mx = logits[best], total = 0;
    for (int i = 0; i < V; i++) {
        probs[i] = exp(((double)logits[i] - mx) / temperature);
        total += probs[i];
    }
    double u = dga_rng_uniform(rng) * total, acc = 0;
    for (int i = 0; i < V; i++) {
        acc += probs[i];
        if (u < acc) return i;
    }
    return best;   /* only reached through rounding at the very top */
}

dga_status dga_gpt_generate(dga_gpt *m, const int32_t *prompt, int n_prompt, int n_new,
                            double temperature, dga_rng *rng, int32_t *out)
{
    const dga_gpt_config *c = dga_gpt_get_config(m);
    const int V = c->vocab_size, ctx = c->n_ctx;
    if (!prompt || n_prompt < 1) return dga_fail(DGA_ERR_INVALID, "generate: empty prompt");
    if (n_new < 0 || (n_new > 0 && !out))
        return dga_fail(DGA_ERR_INVALID, "generate: %d new tokens", n_new);
    if (!(temperature >= 0 && isfinite(temperature)))
        return dga_fail(DGA_ERR_INVALID, "generate: temperature %g, expected a finite number >= 0",
                        temperature);
    if (temperature > 0 && !rng)
        return dga_fail(DGA_ERR_INVALID, "generate: sampling (temperature > 0) needs an rng");
    if (temperature > 0 && temperature < 1e-6) temperature = 0;   /* exp would overflow */
    for (int i = 0; i < n_prompt; i++)
        if (prompt[i] < 0 || prompt[i] >= V)
            return dga_fail(DGA_ERR_INVALID, "generate: prompt token %d at position %d outside "
                            "the vocabulary [0, %d)", prompt[i], i + 1, V);
    int keep = n_prompt > ctx ? ctx - 1 : n_prompt;
    if (keep < 1) keep = 1;
    size_t total = (size_t)keep + (size_t)n_new;
    int32_t *seq = malloc(total * sizeof *seq);
    float *logits = malloc((size_t)V * sizeof *logits);
    double *probs = malloc((size_t)V * sizeof *probs);
    dga_status st = DGA_OK;
    if (!seq || !logits || !probs) {
        st = dga_fail(DGA_ERR_NOMEM, "generate: out of memory for %zu tokens", total);
        goto done;
    }
    memcpy(seq, prompt + (n_prompt - keep), (size_t)keep * sizeof *seq);
    size_t len = (size_t)keep;
    for (int i = 0; i < n_new; i++) {
        int win = len > (size_t)ctx ? ctx : (int)len;
        if ((st = dga_gpt_next_logits(m, seq + (len - (size_t)win), win, logits))) goto done;
        int id = pick_token(logits, V, temperature, rng, probs);
        if (id < 0) {
            st = dga_fail(DGA_ERR_INVALID, "generate: non-finite logits at new token %d "
                          "(diverged parameters?)", i + 1);
            goto done;
        }
        seq[len++] = out[i] = id;
    }
done:
    free(seq), free(logits), free(probs);
    return st;
}
