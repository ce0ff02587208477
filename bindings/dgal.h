/* Shared helpers of the Lua bindings (the `dga` module).
 *
 * Only this layer raises Lua errors: core functions return a dga_status, and a binding turns
 * a failure into a Lua error carrying the core's message (dga_last_error()).
 *
 * Userdata follow liolib.c: created in a safe closed state first (pointer NULL), then
 * filled; one idempotent release serves __gc and __close; methods live in an __index table.
 *
 * Each bindings/l_<thing>.c defines `void dgal_open_<thing>(lua_State *L)`, which adds its
 * functions to the module table on the top of the stack and registers its metatables.
 * module.c calls every one of them. */
#ifndef DGAL_H
#define DGAL_H

#include <lauxlib.h>
#include <lua.h>

#include "gpt.h"
#include "status.h"
#include "tensor.h"

/* Raises a Lua error with the core's message for `st` (never returns). */
int dgal_error(lua_State *L, dga_status st);

#define DGAL_CHECK(L, call)                                     \
    do {                                                        \
        dga_status dgal_st_ = (call);                           \
        if (dgal_st_ != DGA_OK) return dgal_error(L, dgal_st_); \
    } while (0)

/* Registers metatable `tname` with the given metamethods and an __index table of methods;
 * __name is set so luaL_checkudata's messages read naturally. Leaves nothing on the stack. */
void dgal_new_class(lua_State *L, const char *tname, const luaL_Reg *methods,
                    const luaL_Reg *metamethods);

/* Scratch memory owned by Lua: a fresh zeroed userdata of at least one byte, left on the
 * stack, so a Lua error raised half-way frees it with everything else. */
void *dgal_scratch(lua_State *L, size_t bytes);

/* Raises an argument error on idx unless every key of the table there is one of `allowed`
 * (NULL-terminated): "unknown <what> 'key' (expected a, b, c)". A misspelt option silently
 * ignored would change an experiment. */
void dgal_check_keys(lua_State *L, int idx, const char *const *allowed, const char *what);

/* ---- option tables ----
 * Field `name` of the options table at argument `arg`; def when the table (none or nil) or
 * the field is absent. A bad value raises one message for every function:
 *   bad argument #3 to 'fn' (option 'name' must be an integer in [1, 64], got 0.5)
 * A string stays valid while the table holds it. */
#define DGAL_LO_OPEN 1   /* dgal_opt_num: lo itself is excluded */
#define DGAL_HI_OPEN 2   /* ... hi itself is excluded */
lua_Integer dgal_opt_int(lua_State *L, int arg, const char *name, lua_Integer def,
                         lua_Integer lo, lua_Integer hi);
/* The same for a field that must be present. */
lua_Integer dgal_need_int(lua_State *L, int arg, const char *name, lua_Integer lo,
                          lua_Integer hi);
/* A finite number in [lo, hi] (bounds excluded per `open`; -HUGE_VAL/HUGE_VAL: unbounded). */
double      dgal_opt_num(lua_State *L, int arg, const char *name, double def, double lo,
                         double hi, int open);
/* A string, one of choices (NULL-terminated) unless choices is NULL. */
const char *dgal_opt_str(lua_State *L, int arg, const char *name, const char *def,
                         const char *const *choices);
int         dgal_opt_bool(lua_State *L, int arg, const char *name, int def);

/* ---- userdata that own one C object ----
 * The userdata is a dgal_box whose pointer is NULL until the object is made and again once it
 * is closed; the release metamethod (both __gc and __close) is then one line:
 *     static int x_release(lua_State *L) { dga_x_free(dgal_box_take(L, 1, TNAME)); return 0; } */
typedef struct {
    void *p;
} dgal_box;
/* Pushes an empty (closed) box with metatable tname and nuv user values. */
dgal_box *dgal_box_new(lua_State *L, const char *tname, int nuv);
/* The object in the box at idx; an argument error once it was closed. */
void *dgal_box_check(lua_State *L, int idx, const char *tname);
/* The object in the box at idx, NULL once closed (for __tostring). */
void *dgal_box_get(lua_State *L, int idx, const char *tname);
/* Empties the box at idx and returns what it held (NULL if it was already closed). */
void *dgal_box_take(lua_State *L, int idx, const char *tname);

/* ---- dga.tensor ---- */
#define DGAL_TENSOR "dga.tensor"
/* The tensor at idx (error if not a dga.tensor or already closed). */
dga_tensor *dgal_check_tensor(lua_State *L, int idx);
/* Pushes a userdata that takes over one reference of t (t may be released by Lua later). */
void        dgal_push_tensor(lua_State *L, dga_tensor *t);
/* A tensor from idx: a dga.tensor (retained, returned as is) or a Lua table of numbers,
 * nested for 2-D, converted to `dtype`. Caller must dga_tensor_release() the result.
 * On a bad argument raises a Lua error naming argument idx. */
dga_tensor *dgal_to_tensor(lua_State *L, int idx, dga_dtype dtype);
/* The same for a value that is not itself an argument (an entry of a table argument, a
 * returned value): errors name argument `arg` and start with `what` ("batches[2] inputs"),
 * so they never cite a stack slot as an argument number. arg 0: a plain error (no argument
 * to name, e.g. inside a protected call). */
dga_tensor *dgal_to_tensor_at(lua_State *L, int idx, dga_dtype dtype, int arg,
                              const char *what);

/* ---- objects other binding files need (defined by their owners) ---- */
struct dga_model;
struct dga_adamw;
#define DGAL_MODEL "dga.gpt"
#define DGAL_ADAMW "dga.adamw"
#define DGAL_RNG "dga.rng"
struct dga_model   *dgal_check_model(lua_State *L, int idx);   /* l_model.c */
struct dga_adamw *dgal_check_adamw(lua_State *L, int idx);   /* l_optim.c */
/* l_optim.c: the optimizer at idx, or NULL if idx is not a dga.adamw or it was closed. */
struct dga_adamw *dgal_test_adamw(lua_State *L, int idx);
/* l_model.c: pushes a new dga.gpt userdata that takes ownership of m (freed by its __gc). */
void              dgal_push_model(lua_State *L, struct dga_model *m);
/* l_model.c: the model at idx, or NULL if idx is not a dga.gpt or it was closed (no error). */
struct dga_model   *dgal_test_model(lua_State *L, int idx);
/* l_model.c: pushes {layers, width, heads, context, vocab, batch} (m:config()'s table). */
void              dgal_push_gpt_config(lua_State *L, const dga_gpt_config *c, int batch);
#include "rng.h"
dga_rng          *dgal_check_rng(lua_State *L, int idx);      /* l_rng.c */

/* The functions each binding file provides (see module.c). */
void dgal_open_tensor(lua_State *L);      /* dga.tensor, dga.vec, dga.zeros, ... */
void dgal_open_rng(lua_State *L);         /* dga.rng */
void dgal_open_model(lua_State *L);       /* dga.gpt */
void dgal_open_optim(lua_State *L);       /* dga.adamw */
void dgal_open_checkpoint(lua_State *L);  /* dga.save_checkpoint, dga.load_checkpoint */
void dgal_open_text(lua_State *L);        /* tokenizer, jsonl, shards */
void dgal_open_store(lua_State *L);       /* embeddings, k-means, domain store, npy, IS */
void dgal_open_mmlu(lua_State *L);        /* MMLU reading, rendering, scoring */
void dgal_open_mix(lua_State *L);         /* sampler, alignment, evaluation */
void dgal_open_lock(lua_State *L);        /* dga.lock: one owner per directory */
void dgal_open_sys(lua_State *L);         /* dga.isatty, getpid, getppid, kill (l_sys.c) */
void dgal_open_comm(lua_State *L);        /* dga.rank, dga.size, collectives (l_comm.c) */

int luaopen_dga(lua_State *L);

#endif
