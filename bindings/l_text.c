/* Text in Lua: JSON Lines reading (dga.read_jsonl, dga.read_texts), the BPE tokenizer
 * (dga.tokenizer_train, dga.tokenizer_load, tok:encode/decode/save/...), and token shards
 * (dga.shard_write, dga.shard_read).
 *
 * Every C object lives in a userdata box that starts closed (NULL) and is filled after, so a
 * Lua error anywhere (a bad argument, an iterator that raises) never leaks it: __gc frees it. */
#include <stdlib.h>
#include <string.h>

#include "dgal.h"
#include "dgal_text.h"
#include "jsonl.h"
#include "shard.h"

/* ================= tokenizer ================= */

dga_bpe *dgal_check_tokenizer(lua_State *L, int idx)
{
    return dgal_box_check(L, idx, DGAL_TOKENIZER);
}

void dgal_push_tokenizer(lua_State *L, dga_bpe *tok)
{
    dgal_box_new(L, DGAL_TOKENIZER, 0)->p = tok;
}

static int tok_release(lua_State *L)
{
    dga_bpe_free(dgal_box_take(L, 1, DGAL_TOKENIZER));
    return 0;
}

static int tok_tostring(lua_State *L)
{
    dga_bpe *tok = dgal_box_get(L, 1, DGAL_TOKENIZER);
    if (!tok)
        lua_pushliteral(L, "dga.tokenizer (closed)");
    else
        lua_pushfstring(L, "dga.tokenizer(byte-level BPE; vocab=%d: 256 bytes + %d merges + "
                           "<|endoftext|>=%d)", dga_bpe_vocab_size(tok),
                        dga_bpe_num_merges(tok), (int)dga_bpe_eot(tok));
    return 1;
}

/* Training state that must not leak if a Lua iterator raises. */
#define TRAINER_BOX "dga.bpe_trainer"

static int trainer_gc(lua_State *L)
{
    dga_bpe_trainer_free(dgal_box_take(L, 1, TRAINER_BOX));
    return 0;
}

static void add_text(lua_State *L, dga_bpe_trainer *tr, int idx, const char *what,
                     lua_Integer i)
{
    if (lua_type(L, idx) != LUA_TSTRING)
        luaL_error(L, "bad argument #1 to 'tokenizer_train' (%s %I is a %s, expected a string)",
                   what, i, luaL_typename(L, idx));
    size_t len;
    const char *s = lua_tolstring(L, idx, &len);
    dga_status st = dga_bpe_trainer_add(tr, s, len);
    if (st != DGA_OK) dgal_error(L, st);
}

/* dga.tokenizer_train(texts, {vocab = 8192}): texts is a table of strings, or a function
 * (or callable, e.g. a dga.read_jsonl reader) returning the next string, nil at the end. */
static int l_tokenizer_train(lua_State *L)
{
    int t = lua_type(L, 1);
    int callable = t == LUA_TFUNCTION;
    if (!callable && luaL_getmetafield(L, 1, "__call") != LUA_TNIL) {
        lua_pop(L, 1);
        callable = 1;
    }
    if (t != LUA_TTABLE && !callable)
        return luaL_typeerror(L, 1, "table of strings or iterator function");
    if (!lua_isnoneornil(L, 2)) luaL_checktype(L, 2, LUA_TTABLE);
    int vocab = (int)dgal_opt_int(L, 2, "vocab", 8192, 257, DGA_BPE_MAX_VOCAB);
    lua_settop(L, 2);
    dgal_box *box = dgal_box_new(L, TRAINER_BOX, 0);   /* index 3 */
    dga_bpe_trainer *tr;
    DGAL_CHECK(L, dga_bpe_trainer_new(&tr));
    box->p = tr;
    if (t == LUA_TTABLE && !callable) {
        lua_Integer n = luaL_len(L, 1);
        for (lua_Integer i = 1; i <= n; i++) {
            lua_geti(L, 1, i);
            add_text(L, tr, -1, "texts entry", i);
            lua_pop(L, 1);
        }
    } else {
        for (lua_Integer i = 1;; i++) {
            lua_pushvalue(L, 1);
            lua_call(L, 0, 1);
            if (lua_isnil(L, -1)) { lua_pop(L, 1); break; }
            add_text(L, tr, -1, "iterator value", i);
            lua_pop(L, 1);
        }
    }
    dgal_box *out = dgal_box_new(L, DGAL_TOKENIZER, 0);
    dga_bpe *tok;
    dga_status st = dga_bpe_trainer_finish(tr, vocab, &tok);
    if (st == DGA_OK) out->p = tok;
    dga_bpe_trainer_free(dgal_box_take(L, 3, TRAINER_BOX));
    if (st != DGA_OK) return dgal_error(L, st);
    return 1;
}

static int l_tokenizer_load(lua_State *L)
{
    const char *path = luaL_checkstring(L, 1);
    dgal_box *b = dgal_box_new(L, DGAL_TOKENIZER, 0);
    dga_bpe *tok;
    DGAL_CHECK(L, dga_bpe_load(path, &tok));
    b->p = tok;
    return 1;
}

static int tok_encode(lua_State *L)
{
    dga_bpe *tok = dgal_check_tokenizer(L, 1);
    size_t len;
    const char *s = luaL_checklstring(L, 2, &len);
    int64_t shape[1] = {0};
    dga_tensor *t = NULL;
    if (len == 0) {
        DGAL_CHECK(L, dga_tensor_new(DGA_I32, 1, shape, &t));
        dgal_push_tensor(L, t);
        return 1;
    }
    /* The ids go straight into a tensor sized for the worst case (one id per byte), then
     * into one of the right size; the big one lives in a box so an error cannot leak it. */
    dga_tensor **tmp = lua_newuserdatauv(L, sizeof *tmp, 0);
    *tmp = NULL;
    luaL_setmetatable(L, DGAL_TENSOR);
    shape[0] = (int64_t)len;
    DGAL_CHECK(L, dga_tensor_new(DGA_I32, 1, shape, tmp));
    size_t n;
    DGAL_CHECK(L, dga_bpe_encode(tok, s, len, dga_tensor_i32(*tmp), len, &n));
    shape[0] = (int64_t)n;
    DGAL_CHECK(L, dga_tensor_new(DGA_I32, 1, shape, &t));
    memcpy(dga_tensor_i32(t), dga_tensor_i32(*tmp), n * sizeof(int32_t));
    dga_tensor_release(*tmp);
    *tmp = NULL;
    dgal_push_tensor(L, t);
    return 1;
}

static int tok_decode(lua_State *L)
{
    dga_bpe *tok = dgal_check_tokenizer(L, 1);
    if (lua_isinteger(L, 2)) {   /* a single id */
        lua_Integer id = lua_tointeger(L, 2);
        const char *b;
        size_t l;
        if (id < 0 || id >= dga_bpe_vocab_size(tok) || dga_bpe_token_bytes(tok, (int32_t)id, &b, &l) != DGA_OK)
            return luaL_argerror(L, 2, lua_pushfstring(L, "token id %I outside vocabulary [0, %d)",
                                                       id, dga_bpe_vocab_size(tok)));
        lua_pushlstring(L, b, l);
        return 1;
    }
    dga_tensor *t = dgal_to_tensor(L, 2, DGA_I32);
    const int32_t *ids = dga_tensor_i32(t);
    size_t n = (size_t)t->numel;
    int vocab = dga_bpe_vocab_size(tok);
    for (size_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= vocab) {
            int32_t bad = ids[i];
            dga_tensor_release(t);
            return luaL_argerror(L, 2, lua_pushfstring(L, "token id %d at [%d] outside vocabulary "
                                                          "[0, %d)", (int)bad, (int)(i + 1), vocab));
        }
    }
    char *out;
    size_t len;
    dga_status st = dga_bpe_decode(tok, ids, n, &out, &len);
    dga_tensor_release(t);
    if (st != DGA_OK) return dgal_error(L, st);
    lua_pushlstring(L, out, len);
    free(out);
    return 1;
}

static int tok_save(lua_State *L)
{
    dga_bpe *tok = dgal_check_tokenizer(L, 1);
    DGAL_CHECK(L, dga_bpe_save(tok, luaL_checkstring(L, 2)));
    lua_settop(L, 1);
    return 1;
}

static int tok_vocab_size(lua_State *L)
{
    lua_pushinteger(L, dga_bpe_vocab_size(dgal_check_tokenizer(L, 1)));
    return 1;
}

static int tok_eot(lua_State *L)
{
    lua_pushinteger(L, dga_bpe_eot(dgal_check_tokenizer(L, 1)));
    return 1;
}

static int tok_num_merges(lua_State *L)
{
    lua_pushinteger(L, dga_bpe_num_merges(dgal_check_tokenizer(L, 1)));
    return 1;
}

/* tok:merge(r) -> left_id, right_id of merge r (0-based rank; it makes id 256 + r). */
static int tok_merge(lua_State *L)
{
    dga_bpe *tok = dgal_check_tokenizer(L, 1);
    lua_Integer r = luaL_checkinteger(L, 2);
    int32_t a, b;
    if (r < 0 || r >= dga_bpe_num_merges(tok) || dga_bpe_merge(tok, (int)r, &a, &b) != DGA_OK)
        return luaL_argerror(L, 2, lua_pushfstring(L, "merge rank %I outside [0, %d)", r,
                                                   dga_bpe_num_merges(tok)));
    lua_pushinteger(L, a);
    lua_pushinteger(L, b);
    return 2;
}

/* ================= text reading ================= */

typedef struct {
    dga_text_reader *r;
    dga_text_stats   stats;   /* kept after close */
} reader_box;

static reader_box *check_reader(lua_State *L, int idx)
{
    return luaL_checkudata(L, idx, DGAL_TEXT_READER);
}

static void reader_finish(reader_box *b)
{
    if (!b->r) return;
    b->stats = *dga_text_reader_stats(b->r);
    dga_text_close(b->r);
    b->r = NULL;
}

static int reader_close(lua_State *L)
{
    reader_finish(check_reader(L, 1));
    return 0;
}

static reader_box *open_reader(lua_State *L, const char *path)
{
    reader_box *b = lua_newuserdatauv(L, sizeof *b, 0);
    memset(b, 0, sizeof *b);
    luaL_setmetatable(L, DGAL_TEXT_READER);
    dga_status st = dga_text_open(path, &b->r);
    if (st != DGA_OK) dgal_error(L, st);
    return b;
}

/* The next document: text, file, line; nil at the end (the reader then closes itself). */
static int reader_next(lua_State *L)
{
    reader_box *b = check_reader(L, 1);
    if (!b->r) return 0;
    dga_text_doc d;
    dga_status st = dga_text_next(b->r, &d);
    if (st != DGA_OK) {
        reader_finish(b);
        return dgal_error(L, st);
    }
    if (!d.text) {
        reader_finish(b);
        lua_pushnil(L);
        return 1;
    }
    lua_pushlstring(L, d.text, d.len);
    lua_pushstring(L, d.file);
    lua_pushinteger(L, (lua_Integer)d.line);
    return 3;
}

void dgal_push_text_stats(lua_State *L, const dga_text_stats *s)
{
    lua_createtable(L, 0, 12);
#define FIELD(name)                                   \
    lua_pushinteger(L, (lua_Integer)s->name);         \
    lua_setfield(L, -2, #name)
    FIELD(files);
    FIELD(lines);
    FIELD(docs);
    FIELD(bytes);
    FIELD(blank);
    FIELD(bad_json);
    FIELD(not_object);
    FIELD(no_text);
    FIELD(bad_utf8);
    FIELD(skipped);
#undef FIELD
    lua_createtable(L, s->n_messages, 0);
    for (int i = 0; i < s->n_messages; i++) {
        lua_pushstring(L, s->messages[i]);
        lua_rawseti(L, -2, i + 1);
    }
    lua_setfield(L, -2, "messages");
}

static int reader_stats(lua_State *L)
{
    reader_box *b = check_reader(L, 1);
    dgal_push_text_stats(L, b->r ? dga_text_reader_stats(b->r) : &b->stats);
    return 1;
}

static int reader_tostring(lua_State *L)
{
    reader_box *b = check_reader(L, 1);
    const dga_text_stats *s = b->r ? dga_text_reader_stats(b->r) : &b->stats;
    lua_pushfstring(L, "dga.text_reader(%s; %d docs read, %d skipped)",
                    b->r ? "open" : "closed", (int)s->docs, (int)s->skipped);
    return 1;
}

/* dga.read_jsonl(path_or_dir) -> reader, nil, nil, reader: a generic-for iterator
 *   for text, file, line in dga.read_jsonl(dir) do ... end
 * that closes itself at the end or when the loop is left (the 4th value is to-be-closed);
 * keep the reader to call reader:stats() afterwards. */
static int l_read_jsonl(lua_State *L)
{
    const char *path = luaL_checkstring(L, 1);
    open_reader(L, path);
    lua_pushnil(L);
    lua_pushnil(L);
    lua_pushvalue(L, -3);
    return 4;
}

/* dga.read_texts(path_or_dir [, max_docs]) -> {text, ...}, stats */
static int l_read_texts(lua_State *L)
{
    const char *path = luaL_checkstring(L, 1);
    lua_Integer max = luaL_optinteger(L, 2, -1);
    lua_settop(L, 2);
    reader_box *b = open_reader(L, path);   /* index 3 */
    lua_newtable(L);                          /* index 4 */
    lua_Integer n = 0;
    while (max < 0 || n < max) {
        dga_text_doc d;
        dga_status st = dga_text_next(b->r, &d);
        if (st != DGA_OK) {
            reader_finish(b);
            return dgal_error(L, st);
        }
        if (!d.text) break;
        lua_pushlstring(L, d.text, d.len);
        lua_rawseti(L, 4, ++n);
    }
    reader_finish(b);
    dgal_push_text_stats(L, &b->stats);
    return 2;
}

/* dga.text_files(path_or_dir) -> list of the .jsonl / .txt paths a walk reads, in order. */
static int l_text_files(lua_State *L)
{
    const char *path = luaL_checkstring(L, 1);
    char **files;
    size_t n;
    DGAL_CHECK(L, dga_text_list_files(path, &files, &n));
    /* a Lua error (memory) below would leak the list: build the table in one protected go */
    if (!lua_checkstack(L, 4)) {
        dga_text_free_files(files, n);
        return luaL_error(L, "text_files: stack overflow");
    }
    lua_createtable(L, n > 1000000 ? 1000000 : (int)n, 0);
    for (size_t i = 0; i < n; i++) {
        lua_pushstring(L, files[i]);
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    dga_text_free_files(files, n);
    return 1;
}

/* tok:encode_corpus(path_or_dir [, {max_docs=, progress=function(docs, bytes, tokens)}])
 *   -> int32 tensor, stats
 * All documents in walk order, each preceded by <|endoftext|> (llm.c's convention), encoded
 * in C: a corpus of 100 MB never becomes Lua strings. progress is called about every 4 MB. */
typedef struct {
    dga_text_reader *r;
    dga_bpe_ids      ids;
} corpus_box;

static int corpus_gc(lua_State *L)
{
    corpus_box *b = luaL_checkudata(L, 1, "dga.corpus_scratch");
    dga_text_close(b->r);
    b->r = NULL;
    dga_bpe_ids_free(&b->ids);
    return 0;
}

static int tok_encode_corpus(lua_State *L)
{
    dga_bpe *tok = dgal_check_tokenizer(L, 1);
    const char *path = luaL_checkstring(L, 2);
    if (!lua_isnoneornil(L, 3)) luaL_checktype(L, 3, LUA_TTABLE);
    int max_docs = (int)dgal_opt_int(L, 3, "max_docs", -1, -1, 2147483647);
    lua_settop(L, 3);
    if (!lua_isnil(L, 3)) {
        lua_getfield(L, 3, "progress");   /* index 4 */
        if (!lua_isnil(L, 4)) luaL_checktype(L, 4, LUA_TFUNCTION);
    } else {
        lua_pushnil(L);
    }
    corpus_box *b = lua_newuserdatauv(L, sizeof *b, 0);   /* index 5 */
    memset(b, 0, sizeof *b);
    luaL_setmetatable(L, "dga.corpus_scratch");
    DGAL_CHECK(L, dga_text_open(path, &b->r));
    size_t next_report = 4u << 20, docs = 0;
    int32_t eot = dga_bpe_eot(tok);
    while (max_docs < 0 || docs < (size_t)max_docs) {
        dga_text_doc d;
        DGAL_CHECK(L, dga_text_next(b->r, &d));
        if (!d.text) break;
        DGAL_CHECK(L, dga_bpe_ids_push(&b->ids, eot));
        DGAL_CHECK(L, dga_bpe_encode_append(tok, d.text, d.len, &b->ids));
        docs++;
        const dga_text_stats *s = dga_text_reader_stats(b->r);
        if (s->bytes >= next_report && !lua_isnil(L, 4)) {
            next_report = s->bytes + (4u << 20);
            lua_pushvalue(L, 4);
            lua_pushinteger(L, (lua_Integer)s->docs);
            lua_pushinteger(L, (lua_Integer)s->bytes);
            lua_pushinteger(L, (lua_Integer)b->ids.n);
            lua_call(L, 3, 0);
        }
    }
    if (b->ids.n > (size_t)INT64_MAX / 8) return luaL_error(L, "encode_corpus: too many tokens");
    int64_t shape[1] = {(int64_t)b->ids.n};
    dga_tensor *t;
    DGAL_CHECK(L, dga_tensor_new(DGA_I32, 1, shape, &t));
    if (b->ids.n) memcpy(dga_tensor_i32(t), b->ids.ids, b->ids.n * sizeof(int32_t));
    dga_bpe_ids_free(&b->ids);
    dgal_push_tensor(L, t);
    dgal_push_text_stats(L, dga_text_reader_stats(b->r));
    dga_text_close(b->r);
    b->r = NULL;
    return 2;
}

/* ================= shards ================= */

/* dga.shard_write(path, int32_tensor_or_table, vocab_size) */
static int l_shard_write(lua_State *L)
{
    const char *path = luaL_checkstring(L, 1);
    lua_Integer vocab = luaL_checkinteger(L, 3);
    luaL_argcheck(L, vocab >= 1 && vocab <= 2147483647, 3, "vocabulary size must be in [1, 2^31)");
    dga_tensor *t = dgal_to_tensor(L, 2, DGA_I32);
    dga_status st = dga_shard_write(path, dga_tensor_i32(t), (size_t)t->numel, (int)vocab);
    dga_tensor_release(t);
    if (st != DGA_OK) return dgal_error(L, st);
    return 0;
}

/* dga.shard_read(path) -> int32 tensor, {version=, n_tokens=, vocab_size=, token_bytes=} */
static int l_shard_read(lua_State *L)
{
    const char *path = luaL_checkstring(L, 1);
    dga_shard_info info;
    /* The tensor sits in a box on the stack while it is filled, so an error cannot leak it. */
    dga_tensor **box = lua_newuserdatauv(L, sizeof *box, 0);
    *box = NULL;
    luaL_setmetatable(L, DGAL_TENSOR);
    int32_t *tokens;
    size_t n;
    DGAL_CHECK(L, dga_shard_read(path, &tokens, &n, &info));
    int64_t shape[1] = {(int64_t)n};
    dga_status st = dga_tensor_new(DGA_I32, 1, shape, box);
    if (st == DGA_OK && n) memcpy(dga_tensor_i32(*box), tokens, n * sizeof *tokens);
    free(tokens);
    if (st != DGA_OK) return dgal_error(L, st);
    lua_createtable(L, 0, 4);
    lua_pushinteger(L, info.version);
    lua_setfield(L, -2, "version");
    lua_pushinteger(L, (lua_Integer)info.n_tokens);
    lua_setfield(L, -2, "n_tokens");
    lua_pushinteger(L, info.vocab_size);
    lua_setfield(L, -2, "vocab_size");
    lua_pushinteger(L, info.token_bytes);
    lua_setfield(L, -2, "token_bytes");
    return 2;
}

/* ================= registration ================= */

void dgal_open_text(lua_State *L)
{
    static const luaL_Reg tok_methods[] = {
        {"encode", tok_encode},         {"decode", tok_decode},
        {"save", tok_save},             {"vocab_size", tok_vocab_size},
        {"eot", tok_eot},               {"num_merges", tok_num_merges},
        {"merge", tok_merge},           {"encode_corpus", tok_encode_corpus},
        {"close", tok_release},         {NULL, NULL},
    };
    static const luaL_Reg tok_meta[] = {
        {"__gc", tok_release}, {"__close", tok_release}, {"__tostring", tok_tostring}, {NULL, NULL},
    };
    dgal_new_class(L, DGAL_TOKENIZER, tok_methods, tok_meta);

    static const luaL_Reg reader_methods[] = {
        {"next", reader_next}, {"stats", reader_stats}, {"close", reader_close}, {NULL, NULL},
    };
    static const luaL_Reg reader_meta[] = {
        {"__gc", reader_close},     {"__close", reader_close}, {"__call", reader_next},
        {"__tostring", reader_tostring}, {NULL, NULL},
    };
    dgal_new_class(L, DGAL_TEXT_READER, reader_methods, reader_meta);

    static const luaL_Reg trainer_meta[] = {{"__gc", trainer_gc}, {NULL, NULL}};
    dgal_new_class(L, "dga.bpe_trainer", NULL, trainer_meta);
    static const luaL_Reg corpus_meta[] = {{"__gc", corpus_gc}, {NULL, NULL}};
    dgal_new_class(L, "dga.corpus_scratch", NULL, corpus_meta);

    static const luaL_Reg fns[] = {
        {"read_jsonl", l_read_jsonl},
        {"read_texts", l_read_texts},
        {"text_files", l_text_files},
        {"tokenizer_train", l_tokenizer_train},
        {"tokenizer_load", l_tokenizer_load},
        {"shard_write", l_shard_write},
        {"shard_read", l_shard_read},
        {NULL, NULL},
    };
    luaL_setfuncs(L, fns, 0);
}
