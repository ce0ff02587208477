/* Fuzz target: the safetensors reader and the checkpoint loader on arbitrary files. An
 * entry that opens must lie inside the file; a checkpoint that opens with a small config is
 * loaded into a model and an optimizer, whose values must then be finite (and v >= 0). Any
 * input must give DGA_OK or an error status naming the file: never a crash or a leak. */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "adamw.h"
#include "checkpoint.h"
#include "gpt.h"
#include "safetensors.h"

static char path[256];

static void expect_named(dga_status st)
{
    if (st != DGA_OK && !strstr(dga_last_error(), path)) abort();
}

/* Models the loader would allocate for a checkpoint; larger configs are only opened. */
static int small_config(const dga_gpt_config *c)
{
    double p = (double)c->vocab_size * c->n_embd + (double)c->n_ctx * c->n_embd +
               12.0 * c->n_layer * c->n_embd * c->n_embd;
    return p < 2e5 && (double)c->n_ctx * c->vocab_size < 2e5;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!path[0]) {
        const char *dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
        snprintf(path, sizeof path, "%s/fuzz_safetensors_%ld.safetensors", dir, (long)getpid());
    }
    FILE *f = fopen(path, "wb");
    if (!f) abort();
    if (size && fwrite(data, 1, size, f) != size) abort();
    fclose(f);

    dga_safetensors *st = NULL;
    dga_status s = dga_safetensors_open(path, &st);
    expect_named(s);
    if (s == DGA_OK) {
        int n = dga_safetensors_count(st);
        for (int i = 0; i < n; i++) {
            const dga_st_entry *e = dga_safetensors_entry(st, i);
            size_t nb = dga_st_entry_nbytes(e);
            if (nb > size) abort();
            if (nb) {   /* touch both ends, so ASan sees a read outside the file */
                volatile unsigned char a = ((const unsigned char *)e->data)[0];
                volatile unsigned char b = ((const unsigned char *)e->data)[nb - 1];
                (void)a, (void)b;
            }
            if (dga_safetensors_find(st, e->name) != e) abort();
        }
        for (int i = 0; i < dga_safetensors_meta_count(st); i++)
            if (!dga_safetensors_meta_at(st, i)->key || !dga_safetensors_meta_at(st, i)->value)
                abort();
        dga_safetensors_close(st);
    } else if (st) {
        abort();
    }

    dga_checkpoint *ck = NULL;
    s = dga_checkpoint_open(path, &ck);
    expect_named(s);
    if (s == DGA_OK && small_config(dga_checkpoint_config(ck))) {
        dga_model *m = NULL;
        dga_adamw *opt = NULL;
        if (dga_gpt_create(dga_checkpoint_config(ck), 1, &m) != DGA_OK) abort();
        s = dga_checkpoint_load_model(ck, m);
        expect_named(s);
        if (s == DGA_OK) {
            const float *theta = dga_model_params(m);
            for (size_t i = 0; i < dga_model_num_params(m); i++)
                if (!isfinite(theta[i])) abort();
        }
        if (dga_checkpoint_has_optimizer(ck) &&
            dga_adamw_create(dga_model_num_params(m), NULL, NULL, 0, &opt) == DGA_OK) {
            s = dga_checkpoint_load_optimizer(ck, m, opt);
            expect_named(s);
            if (s == DGA_OK) {
                const float *mo = dga_adamw_m(opt), *v = dga_adamw_v(opt);
                for (size_t i = 0; i < dga_model_num_params(m); i++)
                    if (!isfinite(mo[i]) || !isfinite(v[i]) || v[i] < 0) abort();
                const dga_adamw_config *c = dga_adamw_get_config(opt);
                if (!isfinite(c->lr) || !(c->beta1 >= 0 && c->beta1 < 1) ||
                    !(c->beta2 >= 0 && c->beta2 < 1) || !(c->eps >= 0) || !isfinite(c->eps))
                    abort();
            }
            dga_adamw_free(opt);
        }
        dga_model_free(m);
    }
    dga_checkpoint_close(ck);
    unlink(path);
    return 0;
}
