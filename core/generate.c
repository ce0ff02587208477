/* Text generation from a prompt: greedy or temperature sampling, one forward-only pass over
 * the current window per new token (no KV cache: a window is at most n_ctx tokens, and the
 * models trained here are small). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"

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

dga_status dga_model_generate(dga_model *m, const int32_t *prompt, int n_prompt, int n_new,
                            double temperature, dga_rng *rng, int32_t *out)
{
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
    dga_status st = dga_model_check_ids(m, "generate", prompt, 1, n_prompt, 0);
    if (st != DGA_OK) return st;
    int keep = n_prompt > ctx ? ctx - 1 : n_prompt;
    if (keep < 1) keep = 1;
    size_t total = (size_t)keep + (size_t)n_new;
    int32_t *seq = malloc(total * sizeof *seq);
    float *logits = malloc((size_t)V * sizeof *logits);
    double *probs = malloc((size_t)V * sizeof *probs);
    if (!seq || !logits || !probs) {
        st = dga_fail(DGA_ERR_NOMEM, "generate: out of memory for %zu tokens", total);
        goto done;
    }
    memcpy(seq, prompt + (n_prompt - keep), (size_t)keep * sizeof *seq);
    size_t len = (size_t)keep;
    for (int i = 0; i < n_new; i++) {
        int win = len > (size_t)ctx ? ctx : (int)len;
        if ((st = dga_model_next_logits(m, seq + (len - (size_t)win), win, logits))) goto done;
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
