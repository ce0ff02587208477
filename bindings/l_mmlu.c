/* MMLU from Lua: dga.mmlu_load, mm:split / mm:subjects / mm:count, dga.mmlu_render,
 * dga.mmlu_score, and dga.eval_loss_seqs.
 *
 * A question is a plain Lua table {subject=, question=, choices={a,b,c,d}, answer="A".."D"}
 * (questions read from a release also carry line= and, for test-derived splits, index=, the
 * 1-based position in the test split). C views of such tables point into the Lua strings,
 * which the tables keep alive while they sit on the stack; the arrays of views live in
 * userdata, so a Lua error half-way leaks nothing.
 *
 * The tokenizer is any object with an encode(self, text) method returning an int32 tensor or
 * a table of ids (dga's tokenizer is one). It is called under lua_pcall from the core's
 * tokenizer hook, so a tokenizer error comes back as a status and the core cleans up. */
#include <stdlib.h>
#include <string.h>

#include "dgal.h"
#include "eval.h"
#include "gpt.h"
#include "mmlu.h"

#define DGAL_MMLU "dga.mmlu"

static dga_mmlu *check_mmlu(lua_State *L, int idx)
{
    return dgal_box_check(L, idx, DGAL_MMLU);
}

static int mm_release(lua_State *L)
{
    dga_mmlu_free(dgal_box_take(L, 1, DGAL_MMLU));
    return 0;
}

static int mm_tostring(lua_State *L)
{
    dga_mmlu *mm = dgal_box_get(L, 1, DGAL_MMLU);
    if (!mm) {
        lua_pushliteral(L, "dga.mmlu (closed)");
        return 1;
    }
    lua_pushfstring(L, "dga.mmlu(%d subjects; test %I, val %I, dev %I)",
                    dga_mmlu_num_subjects(mm),
                    (lua_Integer)dga_mmlu_count(mm, DGA_MMLU_TEST),
                    (lua_Integer)dga_mmlu_count(mm, DGA_MMLU_VAL),
                    (lua_Integer)dga_mmlu_count(mm, DGA_MMLU_DEV));
    return 1;
}

/* dga.mmlu_load(dir) */
static int l_mmlu_load(lua_State *L)
{
    const char *dir = luaL_checkstring(L, 1);
    dgal_box *b = dgal_box_new(L, DGAL_MMLU, 0);
    dga_mmlu *mm;
    DGAL_CHECK(L, dga_mmlu_load(dir, &mm));
    b->p = mm;
    return 1;
}

/* ------------------------------------------------------------------ C <-> Lua questions */

static void push_question(lua_State *L, const dga_mmlu_question *q, lua_Integer test_index)
{
    lua_createtable(L, 0, 6);
    lua_pushstring(L, q->subject);
    lua_setfield(L, -2, "subject");
    lua_pushstring(L, q->question);
    lua_setfield(L, -2, "question");
    lua_createtable(L, 4, 0);
    for (int i = 0; i < 4; i++) {
        lua_pushstring(L, q->choices[i]);
        lua_rawseti(L, -2, i + 1);
    }
    lua_setfield(L, -2, "choices");
    char ans[2] = {(char)('A' + q->answer), '\0'};
    lua_pushstring(L, ans);
    lua_setfield(L, -2, "answer");
    lua_pushinteger(L, q->line);
    lua_setfield(L, -2, "line");
    if (test_index > 0) {
        lua_pushinteger(L, test_index);
        lua_setfield(L, -2, "index");
    }
}

/* A string field of the table at idx (absolute), or an argument error. */
static const char *str_field(lua_State *L, int arg, int idx, const char *field, const char *who)
{
    lua_getfield(L, idx, field);
    const char *s = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
    if (!s)
        luaL_argerror(L, arg, lua_pushfstring(L, "%s: field '%s' must be a string, got %s", who,
                                              field, luaL_typename(L, -1)));
    lua_pop(L, 1);   /* still referenced by the table */
    return s;
}

/* The question table at idx as a C view; `who` names it in errors ("question 3"). */
static void to_question(lua_State *L, int arg, int idx, const char *who, dga_mmlu_question *q)
{
    idx = lua_absindex(L, idx);
    if (!lua_istable(L, idx))
        luaL_argerror(L, arg, lua_pushfstring(L, "%s must be a question table, got %s", who,
                                              luaL_typename(L, idx)));
    memset(q, 0, sizeof *q);
    q->subject = str_field(L, arg, idx, "subject", who);
    q->question = str_field(L, arg, idx, "question", who);
    lua_getfield(L, idx, "choices");
    if (!lua_istable(L, -1) || lua_rawlen(L, -1) != 4)
        luaL_argerror(L, arg, lua_pushfstring(L, "%s: field 'choices' must be a list of 4 strings",
                                              who));
    for (int i = 0; i < 4; i++) {
        if (lua_rawgeti(L, -1, i + 1) != LUA_TSTRING)
            luaL_argerror(L, arg, lua_pushfstring(L, "%s: choices[%d] must be a string, got %s",
                                                  who, i + 1, luaL_typename(L, -1)));
        q->choices[i] = lua_tostring(L, -1);
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
    const char *ans = str_field(L, arg, idx, "answer", who);
    if (!(ans[0] >= 'A' && ans[0] <= 'D' && ans[1] == '\0'))
        luaL_argerror(L, arg, lua_pushfstring(L, "%s: answer must be one of \"A\", \"B\", \"C\", "
                                              "\"D\", got \"%s\"", who, ans));
    q->answer = ans[0] - 'A';
}

/* The list of questions at idx as an array of views held by a userdata pushed on the stack. */
static dga_mmlu_question *to_questions(lua_State *L, int arg, int idx, const char *what, size_t *n)
{
    idx = lua_absindex(L, idx);
    if (!lua_istable(L, idx))
        luaL_argerror(L, arg, lua_pushfstring(L, "%s must be a list of question tables, got %s",
                                              what, luaL_typename(L, idx)));
    *n = lua_rawlen(L, idx);
    dga_mmlu_question *qs = lua_newuserdatauv(L, (*n ? *n : 1) * sizeof *qs, 0);
    for (size_t i = 0; i < *n; i++) {
        lua_rawgeti(L, idx, (lua_Integer)i + 1);
        lua_pushfstring(L, "%s[%I]", what, (lua_Integer)i + 1);
        to_question(L, arg, -2, lua_tostring(L, -1), &qs[i]);
        lua_pop(L, 2);   /* the element stays referenced by the list */
    }
    return qs;
}

/* ------------------------------------------------------------------ mm methods */

static int mm_subjects(lua_State *L)
{
    dga_mmlu *mm = check_mmlu(L, 1);
    int n = dga_mmlu_num_subjects(mm);
    lua_createtable(L, n, 0);
    for (int i = 0; i < n; i++) {
        lua_pushstring(L, dga_mmlu_subject(mm, i));
        lua_rawseti(L, -2, i + 1);
    }
    return 1;
}

static const char *const split_opts[] = {"dev", "val", "test", "a", "b", NULL};

/* mm:split(name [, seed]): name "test" | "val" | "dev" | "a" | "b"; seed (default 0) picks
 * the a/b halves (see dga_mmlu_split_ab). */
static int mm_split(lua_State *L)
{
    dga_mmlu *mm = check_mmlu(L, 1);
    int which = luaL_checkoption(L, 2, NULL, split_opts);
    lua_Integer seed = luaL_optinteger(L, 3, 0);
    if (which < 3) {
        size_t n = dga_mmlu_count(mm, (dga_mmlu_split)which);
        const dga_mmlu_question *q = dga_mmlu_questions(mm, (dga_mmlu_split)which);
        lua_createtable(L, (int)n, 0);
        for (size_t i = 0; i < n; i++) {
            push_question(L, &q[i], which == DGA_MMLU_TEST ? (lua_Integer)i + 1 : 0);
            lua_rawseti(L, -2, (lua_Integer)i + 1);
        }
        return 1;
    }
    size_t *a, *b, na, nb;
    DGAL_CHECK(L, dga_mmlu_split_ab(mm, (uint64_t)seed, &a, &na, &b, &nb));
    const size_t *pick = which == 3 ? a : b;
    size_t n = which == 3 ? na : nb;
    const dga_mmlu_question *t = dga_mmlu_questions(mm, DGA_MMLU_TEST);
    /* copy the indices to the stack first so an allocation error in Lua cannot leak them */
    size_t *idx = lua_newuserdatauv(L, (n ? n : 1) * sizeof *idx, 0);
    if (n) memcpy(idx, pick, n * sizeof *idx);
    free(a);
    free(b);
    lua_createtable(L, (int)n, 0);
    for (size_t i = 0; i < n; i++) {
        push_question(L, &t[idx[i]], (lua_Integer)idx[i] + 1);
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    return 1;
}

/* mm:count(name) -> number of questions in the split */
static int mm_count(lua_State *L)
{
    dga_mmlu *mm = check_mmlu(L, 1);
    int which = luaL_checkoption(L, 2, NULL, split_opts);
    size_t n;
    if (which < 3) {
        n = dga_mmlu_count(mm, (dga_mmlu_split)which);
    } else {
        size_t *a, *b, na, nb;
        DGAL_CHECK(L, dga_mmlu_split_ab(mm, (uint64_t)luaL_optinteger(L, 3, 0), &a, &na, &b, &nb));
        free(a);
        free(b);
        n = which == 3 ? na : nb;
    }
    lua_pushinteger(L, (lua_Integer)n);
    return 1;
}

/* ------------------------------------------------------------------ rendering */

/* dga.mmlu_render(q, {with_answer=false, shots=list}) -> string */
static int l_mmlu_render(lua_State *L)
{
    lua_settop(L, 2);
    dga_mmlu_question q;
    to_question(L, 1, 1, "question", &q);
    int with_answer = 0;
    size_t n_shots = 0;
    dga_mmlu_question *shots = NULL;
    if (!lua_isnoneornil(L, 2)) {
        luaL_checktype(L, 2, LUA_TTABLE);
        with_answer = dgal_opt_bool(L, 2, "with_answer", 0);
        lua_getfield(L, 2, "shots");
        if (!lua_isnil(L, -1)) shots = to_questions(L, 2, -1, "shots", &n_shots);
        if (n_shots > 64)
            luaL_argerror(L, 2, lua_pushfstring(L, "shots: at most 64 examples, got %I", (lua_Integer)n_shots));
    }
    char *text = NULL;
    DGAL_CHECK(L, dga_mmlu_render(&q, shots, (int)n_shots, with_answer, &text));
    lua_pushstring(L, text);
    free(text);
    return 1;
}

/* ------------------------------------------------------------------ scoring */

typedef struct {
    lua_State *L;
    int        tok;   /* stack index of the tokenizer */
} lua_encoder;

/* Under pcall: tok:encode(text) converted to an int32 dga.tensor. */
static int encode_protected(lua_State *L)
{
    /* 1 = tokenizer, 2 = text */
    lua_getfield(L, 1, "encode");
    lua_pushvalue(L, 1);
    lua_pushvalue(L, 2);
    lua_call(L, 2, 1);
    if (lua_isnil(L, -1)) return luaL_error(L, "tokenizer:encode returned nil");
    dga_tensor *t = dgal_to_tensor_at(L, -1, DGA_I32, 0, "tokenizer:encode's result");
    dgal_push_tensor(L, t);
    return 1;
}

static dga_status lua_encode(void *ud, const char *text, size_t len, int32_t **ids, size_t *n)
{
    lua_encoder *e = ud;
    lua_State *L = e->L;
    *ids = NULL;
    *n = 0;
    lua_pushcfunction(L, encode_protected);
    lua_pushvalue(L, e->tok);
    lua_pushlstring(L, text, len);
    if (lua_pcall(L, 2, 1, 0) != LUA_OK) {
        dga_status st = dga_fail(DGA_ERR_INVALID, "mmlu_score: tokenizer failed: %s",
                                 lua_isstring(L, -1) ? lua_tostring(L, -1) : "(no message)");
        lua_pop(L, 1);
        return st;
    }
    dga_tensor **box = luaL_testudata(L, -1, DGAL_TENSOR);
    dga_tensor *t = box ? *box : NULL;
    dga_status st = DGA_OK;
    if (!t || t->dtype != DGA_I32) {
        st = dga_fail(DGA_ERR_INVALID, "mmlu_score: tokenizer did not return int32 ids");
    } else {
        *ids = malloc((size_t)(t->numel ? t->numel : 1) * sizeof **ids);
        if (!*ids) st = dga_fail(DGA_ERR_NOMEM, "mmlu_score: out of memory");
        else {
            if (t->numel) memcpy(*ids, t->data, (size_t)t->numel * sizeof **ids);
            *n = (size_t)t->numel;
        }
    }
    lua_pop(L, 1);
    return st;
}

/* dga.mmlu_score(model, tok, questions, {shots=0, dev=list_or_mmlu, batch=max})
 *   -> {accuracy=, answer_loss=, n=, correct=, loglik=float32 [n x 4],
 *       shots=int32 [n] (examples in each prompt scored), shortened=, truncated=,
 *       by_subject={[subject]={n=, correct=, accuracy=, shortened=, shots_used=}}} */
static int l_mmlu_score(lua_State *L)
{
    lua_settop(L, 4);
    dga_model *model = dgal_check_model(L, 1);
    if (lua_isnoneornil(L, 2)) luaL_argerror(L, 2, "tokenizer expected (an object with :encode)");
    size_t n, n_dev = 0;
    dga_mmlu_question *qs = to_questions(L, 3, 3, "questions", &n);   /* pushes a userdata */
    if (!lua_isnoneornil(L, 4)) luaL_checktype(L, 4, LUA_TTABLE);
    int shots = (int)dgal_opt_int(L, 4, "shots", 0, 0, 64);
    int batch = (int)dgal_opt_int(L, 4, "batch", 0, 0, dga_model_max_batch(model));
    const dga_mmlu_question *dev = NULL;
    if (shots > 0) {
        lua_getfield(L, 4, "dev");
        dgal_box *b = luaL_testudata(L, -1, DGAL_MMLU);
        if (b && b->p) {
            dev = dga_mmlu_questions(b->p, DGA_MMLU_DEV);
            n_dev = dga_mmlu_count(b->p, DGA_MMLU_DEV);
        } else if (lua_istable(L, -1)) {
            dev = to_questions(L, 4, -1, "dev", &n_dev);
        } else {
            luaL_argerror(L, 4, "option 'dev' (a list of dev questions or a dga.mmlu) is needed "
                                "when shots > 0");
        }
    }
    int max = dga_model_max_batch(model);
    if (batch < 0 || batch > max)
        luaL_argerror(L, 4, lua_pushfstring(L, "option 'batch' must be in [1, %d] (the model's "
                                            "max batch), got %d", max, batch));
    int64_t shape[2] = {(int64_t)n, 4};
    dga_tensor *ll = NULL;
    DGAL_CHECK(L, dga_tensor_new(DGA_F32, 2, shape, &ll));
    dgal_push_tensor(L, ll);   /* Lua owns it from here */
    double *buf = lua_newuserdatauv(L, (n ? n : 1) * 4 * sizeof *buf, 0);
    dga_mmlu_fit *fit = lua_newuserdatauv(L, (n ? n : 1) * sizeof *fit, 0);
    dga_tensor *used = NULL;
    int64_t n_q = (int64_t)n;
    DGAL_CHECK(L, dga_tensor_new(DGA_I32, 1, &n_q, &used));
    dgal_push_tensor(L, used);   /* loglik, buf, fit, used */
    lua_encoder enc = {L, 2};
    dga_mmlu_result res;
    DGAL_CHECK(L, dga_eval_mmlu(model, lua_encode, &enc, qs, n, dev, n_dev, shots, batch, &res,
                                buf, fit));
    float *out = dga_tensor_f32(ll);
    size_t correct = 0;
    lua_newtable(L);          /* by_subject: subject -> {n=, correct=, accuracy=, shortened=, shots_used=} */
    for (size_t i = 0; i < n; i++) {
        int best = 0;
        for (int c = 0; c < 4; c++) {
            out[4 * i + c] = (float)buf[4 * i + c];
            if (buf[4 * i + c] > buf[4 * i + best]) best = c;
        }
        correct += best == qs[i].answer;
        if (lua_getfield(L, -1, qs[i].subject) != LUA_TTABLE) {
            lua_pop(L, 1);
            lua_createtable(L, 0, 3);
            lua_pushinteger(L, 0);
            lua_setfield(L, -2, "n");
            lua_pushinteger(L, 0);
            lua_setfield(L, -2, "correct");
            lua_pushvalue(L, -1);
            lua_setfield(L, -3, qs[i].subject);
        }
        lua_getfield(L, -1, "n");
        lua_Integer sn = lua_tointeger(L, -1) + 1;
        lua_getfield(L, -2, "correct");
        lua_Integer sc = lua_tointeger(L, -1) + (best == qs[i].answer);
        lua_pop(L, 2);
        lua_pushinteger(L, sn);
        lua_setfield(L, -2, "n");
        lua_pushinteger(L, sc);
        lua_setfield(L, -2, "correct");
        lua_pushnumber(L, (lua_Number)sc / (lua_Number)sn);
        lua_setfield(L, -2, "accuracy");
        int shortened = fit[i].shots < shots || fit[i].cut_tokens > 0;
        lua_getfield(L, -1, "shortened");
        lua_pushinteger(L, lua_tointeger(L, -1) + shortened);
        lua_setfield(L, -3, "shortened");
        lua_getfield(L, -2, "shots_used");
        lua_pushinteger(L, lua_tointeger(L, -1) + fit[i].shots);
        lua_setfield(L, -4, "shots_used");
        lua_pop(L, 3);
        dga_tensor_i32(used)[i] = fit[i].shots;
    }
    lua_remove(L, -4);        /* buf */
    lua_remove(L, -3);        /* fit; loglik, used, by_subject on top */
    lua_createtable(L, 0, 9);
    lua_pushvalue(L, -2);
    lua_setfield(L, -2, "by_subject");
    lua_pushvalue(L, -3);
    lua_setfield(L, -2, "shots");
    lua_pushinteger(L, (lua_Integer)res.shortened);
    lua_setfield(L, -2, "shortened");
    lua_pushinteger(L, (lua_Integer)res.truncated);
    lua_setfield(L, -2, "truncated");
    lua_pushnumber(L, res.accuracy);
    lua_setfield(L, -2, "accuracy");
    lua_pushnumber(L, res.answer_loss);
    lua_setfield(L, -2, "answer_loss");
    lua_pushinteger(L, (lua_Integer)res.n);
    lua_setfield(L, -2, "n");
    lua_pushinteger(L, (lua_Integer)correct);
    lua_setfield(L, -2, "correct");
    lua_pushvalue(L, -4);
    lua_setfield(L, -2, "loglik");
    return 1;
}

/* The arguments of eval_loss_seqs and eval_row_losses (model, seqs [N x L int32], batch),
 * checked; the sequences' tokens, their count and length. */
static const int32_t *check_eval_seqs(lua_State *L, dga_model **model_out, size_t *n_out,
                                      int *len_out, int *batch_out)
{
    lua_settop(L, 3);   /* scratch values are anchored above the arguments */
    dga_model *model = dgal_check_model(L, 1);
    dga_tensor *seqs = dgal_to_tensor(L, 2, DGA_I32);
    dgal_push_tensor(L, seqs);   /* released by Lua, even on error */
    int batch = (int)luaL_optinteger(L, 3, 0);
    int max = dga_model_max_batch(model);
    if (batch < 0 || batch > max)
        luaL_argerror(L, 3, lua_pushfstring(L, "batch must be in [1, %d] (the model's max "
                                            "batch), got %d", max, batch));
    if (seqs->ndim != 2) {
        char d[64];
        luaL_argerror(L, 2, lua_pushfstring(L, "sequences must be a 2-D N x L int32 tensor, got %s",
                                            dga_tensor_describe(seqs, d, sizeof d)));
    }
    int n_ctx = dga_model_context(model);
    if (seqs->shape[1] < 2 || seqs->shape[1] > n_ctx + 1)
        luaL_argerror(L, 2, lua_pushfstring(L, "sequence length %I outside [2, %d] (the model's "
                                            "context + 1)", (lua_Integer)seqs->shape[1], n_ctx + 1));
    const int32_t *s = dga_tensor_i32(seqs);
    /* Token ids are checked here because a sequence's last token is only a target: the
     * message then names its place in seqs, not in the shifted inputs. */
    dga_status st = dga_model_check_ids(model, "eval_loss_seqs", s, (int)seqs->shape[0],
                                        (int)seqs->shape[1], 0);
    if (st != DGA_OK) dgal_error(L, st);   /* raises */
    *model_out = model;
    *n_out = (size_t)seqs->shape[0];
    *len_out = (int)seqs->shape[1];
    *batch_out = batch;
    return s;
}

/* dga.eval_loss_seqs(model, seqs [N x L int32], batch) -> mean next-token loss */
static int l_eval_loss_seqs(lua_State *L)
{
    dga_model *model;
    size_t n;
    int len, batch;
    const int32_t *s = check_eval_seqs(L, &model, &n, &len, &batch);
    double mean;
    DGAL_CHECK(L, dga_eval_mean_loss_seqs(model, s, n, len, batch, &mean));
    lua_pushnumber(L, mean);
    return 1;
}

/* dga.eval_row_losses(model, seqs [N x L int32], batch) -> {row loss sums}, {row target
 * counts}: what eval_loss_seqs sums, row by row (for evaluation split over processes) */
static int l_eval_row_losses(lua_State *L)
{
    dga_model *model;
    size_t n;
    int len, batch;
    const int32_t *s = check_eval_seqs(L, &model, &n, &len, &batch);
    double *nll = dgal_scratch(L, n * (sizeof(double) + sizeof(int)) + 1);
    int *cnt = (int *)(nll + n);
    DGAL_CHECK(L, dga_eval_row_losses_seqs(model, s, n, len, batch, nll, cnt));
    lua_createtable(L, (int)n, 0);
    for (size_t i = 0; i < n; i++) {
        lua_pushnumber(L, nll[i]);
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    lua_createtable(L, (int)n, 0);
    for (size_t i = 0; i < n; i++) {
        lua_pushinteger(L, cnt[i]);
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    return 2;
}

void dgal_open_mmlu(lua_State *L)
{
    static const luaL_Reg methods[] = {
        {"split", mm_split},
        {"subjects", mm_subjects},
        {"count", mm_count},
        {"close", mm_release},
        {NULL, NULL},
    };
    static const luaL_Reg meta[] = {
        {"__gc", mm_release},
        {"__close", mm_release},
        {"__tostring", mm_tostring},
        {NULL, NULL},
    };
    dgal_new_class(L, DGAL_MMLU, methods, meta);
    static const luaL_Reg funcs[] = {
        {"mmlu_load", l_mmlu_load},
        {"mmlu_render", l_mmlu_render},
        {"mmlu_score", l_mmlu_score},
        {"eval_loss_seqs", l_eval_loss_seqs},
        {"eval_row_losses", l_eval_row_losses},
        {NULL, NULL},
    };
    luaL_setfuncs(L, funcs, 0);
}
