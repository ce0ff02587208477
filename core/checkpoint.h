/* Training checkpoints as one safetensors file that PyTorch / Hugging Face can read.
 *
 * Layout of the file (format "dgalua-checkpoint-2"):
 *   model      every GPT-2 tensor under its Hugging Face name ("transformer.h.0.attn.c_attn.
 *              weight", ...), F32, matrices [in, out] as HF's Conv1D. No "lm_head.weight":
 *              GPT2LMHeadModel ties it to transformer.wte.weight.
 *   optimizer  (optional) the AdamW moments per model tensor, "optimizer.m.<name>" and
 *              "optimizer.v.<name>", same shapes; no entries cover padding of the flat buffer.
 *   extras     caller-named tensors, written verbatim (the Lua binding uses "extra.<name>"
 *              for tensors and "blob.<name>" for U8 blobs).
 *   metadata   GPT2Config keys: "model_type"="gpt2", "n_layer", "n_head", "n_embd",
 *              "n_positions", "vocab_size"; "format"="pt" (what Hugging Face's loader
 *              requires); "dgalua.format"="dgalua-checkpoint-2"; "dgalua.max_batch";
 *              "dgalua.crc32" = CRC-32 of the data section, checked on open, so a bit flip
 *              in the payload is an error, not silently different weights; with an optimizer "optimizer.steps", "optimizer.lr",
 *              "optimizer.beta1", "optimizer.beta2", "optimizer.eps",
 *              "optimizer.weight_decay"; then the caller's pairs, verbatim (the binding
 *              uses "user.<key>" for strings and "user_number.<key>" for numbers).
 * Numbers in metadata are decimal strings (floats with 9 significant digits: exact for
 * float32). */
#ifndef DGA_CHECKPOINT_H
#define DGA_CHECKPOINT_H

#include "adamw.h"
#include "gpt.h"
#include "safetensors.h"
#include "status.h"

#define DGA_CHECKPOINT_FORMAT "dgalua-checkpoint-2"

/* opt may be NULL; its size must equal the model's parameter count. Names or keys that
 * collide with the ones above are errors. Written atomically. */
dga_status dga_checkpoint_save(const char *path, dga_model *model, dga_adamw *opt,
                               const dga_st_entry *extras, int n_extras,
                               const dga_st_meta *meta, int n_meta);

typedef struct dga_checkpoint dga_checkpoint;

/* Opens and validates the file: safetensors structure, "dgalua.format", the data checksum
 * and a valid config. (Files of format 1, which had no checksum, are still read.) The load
 * functions below also reject tensors holding NaN or infinities. */
dga_status dga_checkpoint_open(const char *path, dga_checkpoint **out);
void       dga_checkpoint_close(dga_checkpoint *ck);                   /* NULL is fine */
const dga_gpt_config *dga_checkpoint_config(const dga_checkpoint *ck);
int        dga_checkpoint_max_batch(const dga_checkpoint *ck);         /* 1 if not recorded */
int        dga_checkpoint_has_optimizer(const dga_checkpoint *ck);
const dga_safetensors *dga_checkpoint_file(const dga_checkpoint *ck);

/* Copies the parameters into model after checking that its config matches the file and that
 * every tensor is present with its shape (nothing is copied on a failure). */
dga_status dga_checkpoint_load_model(const dga_checkpoint *ck, dga_model *model);
/* A new model of the file's architecture and config, for batches up to max_batch (<= 0: the
 * batch the file records), holding the file's parameters. */
dga_status dga_checkpoint_new_model(const dga_checkpoint *ck, int max_batch, dga_model **out);
/* Restores moments, step count and hyperparameters into opt; `model` gives the layout (its
 * config must match the file). Nothing is changed on a failure. */
dga_status dga_checkpoint_load_optimizer(const dga_checkpoint *ck, const dga_model *model,
                                         dga_adamw *opt);

#endif
