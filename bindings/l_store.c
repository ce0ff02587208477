/* Lua bindings: domain store, embeddings, k-means, .npy files.
 *
 *   s = dga.store_open(dir)
 *   s:levels(); s:k(level); s:seq_len(); s:vocab_size(); s:num_sequences(); s:dir()
 *   s:domain_sizes(level)   -> int32 [k]: sequences per domain
 *   s:domain_tokens(level)  -> float32 [k]: tokens per domain (sizes * seq_len; float so that
 *                              it normalises directly into natural weights)
 *   s:sequence(level, d, i) -> int32 [seq_len]  (1-based d, i)
 *   s:info(level, d, i)     -> {row=, doc=, source=} (row/doc 1-based, source = corpus dir)
 *   s:gather(level, domains, indices) -> inputs, targets: int32 [B, seq_len-1], shifted by one
 *   s:leaves(level, d)      -> first leaf (1-based), leaf count
 *   s:centroids(level)      -> float32 [k, dim]
 *   s:sources(level)        -> names (list), counts (int32 [k, #names])
 *   s:histogram(texts, level) -> float32 [k] (normalised), number of texts counted
 *   s:nearest(text, level, n) -> ids (1-based list), scores (list), best first
 *   s:tokenizer()           -> dga.tokenizer_load(dir/tokenizer.json), cached per store
 *   s:manifest()            -> manifest.json as a string
 *   s:close() / __close / __gc
 *   dga.store_build{corpus=, out=, levels={64}, seq_len=129, tokenizer=nil, vocab=8192,
 *                   max_mb=0, train_mb=0, spherical=true, iters=25, seed=1,
 *                   embedder="hash384", save_embeddings=false, verbose=false}
 *       -> out, stats (the text readers' counters: skipped = malformed lines, messages =
 *          the first "file:line: reason"s; see dga.read_texts)
 *     docs = {[source] = {doc, ...}} (optional): only these sources, and of each only these
 *          documents (1-based, in dga.read_texts order), enter the store and its tokenizer
 *   dga.embed(texts [, store]) -> float32 [n, dim] (without a store: idf fitted on texts)
 *   dga.kmeans(points, k, {seed=0, iters=25, spherical=false, seed_sample=0})
 *       -> centroids float32 [k', d], assignment int32 [n] (1-based); k' <= k
 *   dga.kmeans_hierarchical(points, {64, 64}, {seed=0, iters=25, spherical=true})
 *       -> {k = {k1, k2, ...}, leaf = int32 [n] (1-based leaf of each point),
 *           ranges = {int32 [k_l + 1] per level: domain d covers leaves ranges[d] ..
 *                     ranges[d+1]-1, 1-based}, centroids = {float32 [k_l, d] per level}}
 *   dga.npy_save(path, t); dga.npy_load(path) -> tensor (float32 or int32) */
#include <lauxlib.h>
#include <lua.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dgal.h"
#include "dgal_text.h"
#include "embed.h"
#include "fileio.h"
#include "kmeans.h"
#include "npy.h"
#include "store.h"

#define DGAL_STORE "dga.store"

static dga_store *check_store(lua_State *L, int idx)
{
    return dgal_box_check(L, idx, DGAL_STORE);
}

static dga_tensor *new_tensor(lua_State *L, dga_dtype dt, int ndim, const int64_t *shape)
{
    dga_tensor *t;
    dga_status st = dga_tensor_new(dt, ndim, shape, &t);
    if (st != DGA_OK) dgal_error(L, st);   /* does not return */
    dgal_push_tensor(L, t);
    return t;
}

static int check_level(lua_State *L, dga_store *s, int idx)
{
    lua_Integer level = luaL_checkinteger(L, idx);
    if (level < 1 || level > dga_store_levels(s))
        return luaL_argerror(L, idx, lua_pushfstring(L, "level %I outside [1, %d]", level,
                                                     dga_store_levels(s)));
    return (int)level - 1;
}

static int64_t check_domain(lua_State *L, dga_store *s, int level, int idx)
{
    lua_Integer d = luaL_checkinteger(L, idx);
    int64_t k = dga_store_k(s, level);
    if (d < 1 || d > k)
        luaL_argerror(L, idx, lua_pushfstring(L, "domain %I outside [1, %I] at level %d", d,
                                              (lua_Integer)k, level + 1));
    return (int64_t)d - 1;
}

/* A list of strings at idx: pointers and lengths in Lua-owned scratch (pushed). */
static int64_t check_texts(lua_State *L, int idx, const char ***texts, size_t **lens)
{
    luaL_checktype(L, idx, LUA_TTABLE);
    int64_t n = (int64_t)lua_rawlen(L, idx);
    *texts = dgal_scratch(L, (size_t)n * sizeof **texts);
    *lens = dgal_scratch(L, (size_t)n * sizeof **lens);
    for (int64_t i = 0; i < n; i++) {
        lua_rawgeti(L, idx, i + 1);
        if (lua_type(L, -1) != LUA_TSTRING)
            luaL_argerror(L, idx, lua_pushfstring(L, "texts[%I] is a %s, expected a string",
                                                  (lua_Integer)i + 1, luaL_typename(L, -1)));
        (*texts)[i] = lua_tolstring(L, -1, &(*lens)[i]);   /* anchored by the table */
        lua_pop(L, 1);
    }
    return n;
}

/* ------------------------------------------------------------------ store methods */

static int l_store_open(lua_State *L)
{
    const char *dir = luaL_checkstring(L, 1);
    dgal_box *b = dgal_box_new(L, DGAL_STORE, 1);
    dga_store *s;
    DGAL_CHECK(L, dga_store_open(dir, &s));
    b->p = s;
    return 1;
}

static int l_store_close(lua_State *L)
{
    dga_store_close(dgal_box_take(L, 1, DGAL_STORE));
    return 0;
}

static int l_store_tostring(lua_State *L)
{
    dga_store *s = dgal_box_get(L, 1, DGAL_STORE);
    if (!s) {
        lua_pushliteral(L, "dga.store (closed)");
        return 1;
    }
    luaL_Buffer buf;
    luaL_buffinit(L, &buf);
    lua_pushfstring(L, "dga.store(%s; k = ", dga_store_dir(s));
    luaL_addvalue(&buf);
    for (int l = 0; l < dga_store_levels(s); l++) {
        lua_pushfstring(L, "%s%I", l ? "/" : "", (lua_Integer)dga_store_k(s, l));
        luaL_addvalue(&buf);
    }
    lua_pushfstring(L, "; %I sequences of %d tokens; %d sources)",
                    (lua_Integer)dga_store_num_sequences(s), dga_store_seq_len(s),
                    dga_store_num_sources(s));
    luaL_addvalue(&buf);
    luaL_pushresult(&buf);
    return 1;
}

static int l_levels(lua_State *L)
{
    lua_pushinteger(L, dga_store_levels(check_store(L, 1)));
    return 1;
}

static int l_k(lua_State *L)
{
    dga_store *s = check_store(L, 1);
    int level = lua_isnoneornil(L, 2) ? 0 : check_level(L, s, 2);
    lua_pushinteger(L, (lua_Integer)dga_store_k(s, level));
    return 1;
}

static int l_seq_len(lua_State *L)
{
    lua_pushinteger(L, dga_store_seq_len(check_store(L, 1)));
    return 1;
}

static int l_vocab_size(lua_State *L)
{
    lua_pushinteger(L, dga_store_vocab_size(check_store(L, 1)));
    return 1;
}

static int l_num_sequences(lua_State *L)
{
    lua_pushinteger(L, (lua_Integer)dga_store_num_sequences(check_store(L, 1)));
    return 1;
}

static int l_dir(lua_State *L)
{
    lua_pushstring(L, dga_store_dir(check_store(L, 1)));
    return 1;
}

static int l_domain_sizes(lua_State *L)
{
    dga_store *s = check_store(L, 1);
    int level = check_level(L, s, 2);
    int64_t k = dga_store_k(s, level);
    int64_t *sz = dgal_scratch(L, (size_t)k * sizeof *sz);
    DGAL_CHECK(L, dga_store_domain_sizes(s, level, sz));
    dga_tensor *t = new_tensor(L, DGA_I32, 1, &k);
    for (int64_t d = 0; d < k; d++) dga_tensor_i32(t)[d] = (int32_t)sz[d];
    return 1;
}

static int l_domain_tokens(lua_State *L)
{
    dga_store *s = check_store(L, 1);
    int level = check_level(L, s, 2);
    int64_t k = dga_store_k(s, level);
    int64_t *sz = dgal_scratch(L, (size_t)k * sizeof *sz);
    DGAL_CHECK(L, dga_store_domain_sizes(s, level, sz));
    dga_tensor *t = new_tensor(L, DGA_F32, 1, &k);
    for (int64_t d = 0; d < k; d++) dga_tensor_f32(t)[d] = (float)((double)sz[d] * dga_store_seq_len(s));
    return 1;
}

/* The store row of (store, level, domain, index) at arguments 1..4, all 1-based. */
static int64_t check_row(lua_State *L, dga_store *s)
{
    int level = check_level(L, s, 2);
    int64_t d = check_domain(L, s, level, 3);
    lua_Integer i = luaL_checkinteger(L, 4);
    int64_t first, count;
    dga_status st = dga_store_domain_rows(s, level, d, &first, &count);
    if (st != DGA_OK) dgal_error(L, st);
    if (i < 1 || i > count)
        luaL_argerror(L, 4, lua_pushfstring(L, "index %I outside [1, %I] in domain %I", i,
                                            (lua_Integer)count, (lua_Integer)d + 1));
    return first + i - 1;
}

static int l_sequence(lua_State *L)
{
    dga_store *s = check_store(L, 1);
    int64_t r = check_row(L, s);
    int64_t n = dga_store_seq_len(s);
    dga_tensor *t = new_tensor(L, DGA_I32, 1, &n);
    DGAL_CHECK(L, dga_store_row(s, r, dga_tensor_i32(t)));
    return 1;
}

static int l_info(lua_State *L)
{
    dga_store *s = check_store(L, 1);
    int64_t r = check_row(L, s);
    lua_createtable(L, 0, 3);
    lua_pushinteger(L, (lua_Integer)r + 1);
    lua_setfield(L, -2, "row");
    lua_pushinteger(L, (lua_Integer)dga_store_row_doc(s, r) + 1);
    lua_setfield(L, -2, "doc");
    lua_pushstring(L, dga_store_source_name(s, dga_store_row_source(s, r)));
    lua_setfield(L, -2, "source");
    return 1;
}

/* Reads a 1-D list of B integers (tensor or table) into int32, 1-based -> 0-based. */
static int32_t *check_ids(lua_State *L, int idx, const char *what, int64_t *n)
{
    dga_tensor *t = dgal_to_tensor(L, idx, DGA_I32);
    int64_t m = t->numel;
    int32_t *out = dgal_scratch(L, (size_t)m * sizeof *out);
    for (int64_t i = 0; i < m; i++) out[i] = dga_tensor_i32(t)[i] - 1;
    dga_tensor_release(t);
    (void)what;
    *n = m;
    return out;
}

static int l_gather(lua_State *L)
{
    dga_store *s = check_store(L, 1);
    int level = check_level(L, s, 2);
    int64_t nd, ni;
    int32_t *dom = check_ids(L, 3, "domains", &nd);
    int32_t *idx = check_ids(L, 4, "indices", &ni);
    if (nd != ni)
        return luaL_argerror(L, 4, lua_pushfstring(L, "%I indices for %I domains (expected as many)",
                                                   (lua_Integer)ni, (lua_Integer)nd));
    if (nd < 1) return luaL_argerror(L, 3, "empty batch (expected at least one domain)");
    int64_t shape[2] = {nd, dga_store_seq_len(s) - 1};
    dga_tensor *in = new_tensor(L, DGA_I32, 2, shape);
    dga_tensor *tg = new_tensor(L, DGA_I32, 2, shape);
    DGAL_CHECK(L, dga_store_gather(s, level, dom, idx, nd, dga_tensor_i32(in), dga_tensor_i32(tg)));
    return 2;
}

static int l_leaves(lua_State *L)
{
    dga_store *s = check_store(L, 1);
    int level = check_level(L, s, 2);
    int64_t d = check_domain(L, s, level, 3);
    int64_t first, count;
    DGAL_CHECK(L, dga_store_domain_leaves(s, level, d, &first, &count));
    lua_pushinteger(L, (lua_Integer)first + 1);
    lua_pushinteger(L, (lua_Integer)count);
    return 2;
}

static int l_centroids(lua_State *L)
{
    dga_store *s = check_store(L, 1);
    int level = check_level(L, s, 2);
    int dim = dga_store_embedder(s)->dim;
    int64_t shape[2] = {dga_store_k(s, level), dim};
    dga_tensor *t = new_tensor(L, DGA_F32, 2, shape);
    memcpy(t->data, dga_store_centroids(s, level), (size_t)shape[0] * dim * sizeof(float));
    return 1;
}

static int l_sources(lua_State *L)
{
    dga_store *s = check_store(L, 1);
    int level = lua_isnoneornil(L, 2) ? 0 : check_level(L, s, 2);
    int ns = dga_store_num_sources(s);
    int64_t k = dga_store_k(s, level);
    int64_t *c = dgal_scratch(L, (size_t)k * ns * sizeof *c);
    DGAL_CHECK(L, dga_store_source_counts(s, level, c));
    lua_createtable(L, ns, 0);
    for (int j = 0; j < ns; j++) {
        lua_pushstring(L, dga_store_source_name(s, j));
        lua_rawseti(L, -2, j + 1);
    }
    int64_t shape[2] = {k, ns};
    dga_tensor *t = new_tensor(L, DGA_I32, 2, shape);
    for (int64_t i = 0; i < k * ns; i++) dga_tensor_i32(t)[i] = (int32_t)c[i];
    return 2;
}

static int l_histogram(lua_State *L)
{
    dga_store *s = check_store(L, 1);
    int level = check_level(L, s, 3);
    const char **texts;
    size_t *lens;
    int64_t n = check_texts(L, 2, &texts, &lens);
    if (n < 1) return luaL_argerror(L, 2, "no texts (expected a non-empty list of strings)");
    int64_t k = dga_store_k(s, level), used = 0;
    dga_tensor *t = new_tensor(L, DGA_F32, 1, &k);
    DGAL_CHECK(L, dga_store_histogram(s, level, n, texts, lens, dga_tensor_f32(t), &used));
    lua_pushinteger(L, (lua_Integer)used);
    return 2;
}

static int l_nearest(lua_State *L)
{
    dga_store *s = check_store(L, 1);
    size_t len;
    const char *text = luaL_checklstring(L, 2, &len);
    int level = check_level(L, s, 3);
    lua_Integer n = luaL_optinteger(L, 4, 5);
    if (n < 1) return luaL_argerror(L, 4, "expected n >= 1");
    int64_t k = dga_store_k(s, level);
    if (n > k) n = k;
    int64_t *ids = dgal_scratch(L, (size_t)n * sizeof *ids);
    float *sc = dgal_scratch(L, (size_t)n * sizeof *sc);
    int got;
    DGAL_CHECK(L, dga_store_nearest(s, level, text, len, (int)n, ids, sc, &got));
    lua_createtable(L, got, 0);
    lua_createtable(L, got, 0);
    for (int j = 0; j < got; j++) {
        lua_pushinteger(L, (lua_Integer)ids[j] + 1);
        lua_rawseti(L, -3, j + 1);
        lua_pushnumber(L, sc[j]);
        lua_rawseti(L, -2, j + 1);
    }
    return 2;
}

static int l_tokenizer(lua_State *L)
{
    dga_store *s = check_store(L, 1);
    if (lua_getiuservalue(L, 1, 1) != LUA_TNIL) return 1;
    lua_pop(L, 1);
    lua_pushvalue(L, lua_upvalueindex(1));   /* the dga module table */
    lua_getfield(L, -1, "tokenizer_load");
    if (!lua_isfunction(L, -1))
        return luaL_error(L, "store %s: dga.tokenizer_load is not available in this build",
                          dga_store_dir(s));
    lua_pushfstring(L, "%s/tokenizer.json", dga_store_dir(s));
    lua_call(L, 1, 1);
    lua_pushvalue(L, -1);
    lua_setiuservalue(L, 1, 1);
    return 1;
}

static int l_manifest(lua_State *L)
{
    dga_store *s = check_store(L, 1);
    lua_pushfstring(L, "%s/manifest.json", dga_store_dir(s));
    char *text;
    size_t len;
    DGAL_CHECK(L, dga_file_read_all(lua_tostring(L, -1), &text, &len));
    lua_pushlstring(L, text, len);   /* only raises when out of memory (then `text` leaks) */
    free(text);
    return 1;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Field `docs` = {[source] = {doc, ...}} (1-based document numbers in reading order) into a
 * filter in Lua-owned scratch; the source names stay anchored in the options table. */
static int check_doc_filter(lua_State *L, int t, dga_store_doc_filter **out)
{
    *out = NULL;
    if (lua_getfield(L, t, "docs") == LUA_TNIL) {
        lua_pop(L, 1);
        return 0;
    }
    if (!lua_istable(L, -1))
        luaL_argerror(L, t, "field 'docs' must be a table {[source] = {document, ...}}");
    int docs = lua_gettop(L), n = 0;
    for (lua_pushnil(L); lua_next(L, docs); lua_pop(L, 1)) n++;
    if (n == 0) luaL_argerror(L, t, "field 'docs' names no source (expected at least one)");
    dga_store_doc_filter *f = dgal_scratch(L, (size_t)n * sizeof *f);
    lua_createtable(L, n, 0);   /* anchors every list's scratch until the build returns */
    int anchor = lua_gettop(L), i = 0;
    for (lua_pushnil(L); lua_next(L, docs); lua_pop(L, 1), i++) {
        if (lua_type(L, -2) != LUA_TSTRING || !lua_istable(L, -1))
            luaL_argerror(L, t, "field 'docs' must map source names to lists of document numbers");
        const char *name = lua_tostring(L, -2);
        size_t m = lua_rawlen(L, -1);
        int64_t *ids = dgal_scratch(L, (m ? m : 1) * sizeof *ids);
        lua_rawseti(L, anchor, i + 1);
        for (size_t j = 0; j < m; j++) {
            lua_rawgeti(L, -1, (lua_Integer)j + 1);
            int ok;
            lua_Integer v = lua_tointegerx(L, -1, &ok);
            if (!ok || v < 1)
                luaL_argerror(L, t, lua_pushfstring(L, "docs['%s'][%d] must be a document number >= 1",
                                                    name, (int)j + 1));
            ids[j] = (int64_t)v - 1;
            lua_pop(L, 1);
        }
        qsort(ids, m, sizeof *ids, cmp_i64);
        for (size_t j = 1; j < m; j++)
            if (ids[j] == ids[j - 1])
                luaL_argerror(L, t, lua_pushfstring(L, "docs['%s'] lists document %d twice", name,
                                                    (int)ids[j] + 1));
        f[i] = (dga_store_doc_filter){.source = name, .docs = ids, .n = m};
    }
    *out = f;
    return n;
}

/* ------------------------------------------------------------------ functions */

static lua_Number opt_number(lua_State *L, int t, const char *key, lua_Number dflt)
{
    lua_Number v = dflt;
    if (lua_getfield(L, t, key) != LUA_TNIL) {
        if (!lua_isnumber(L, -1))
            luaL_argerror(L, t, lua_pushfstring(L, "field '%s' is a %s, expected a number", key,
                                                luaL_typename(L, -1)));
        v = lua_tonumber(L, -1);
    }
    lua_pop(L, 1);
    return v;
}

static lua_Integer opt_int(lua_State *L, int t, const char *key, lua_Integer dflt)
{
    lua_Integer v = dflt;
    if (lua_getfield(L, t, key) != LUA_TNIL) {
        int ok;
        v = lua_tointegerx(L, -1, &ok);
        if (!ok)
            luaL_argerror(L, t, lua_pushfstring(L, "field '%s' is a %s, expected an integer", key,
                                                luaL_typename(L, -1)));
    }
    lua_pop(L, 1);
    return v;
}

/* A string field; the string stays anchored in the options table. */
static const char *opt_string(lua_State *L, int t, const char *key, const char *dflt)
{
    const char *v = dflt;
    if (lua_getfield(L, t, key) != LUA_TNIL) {
        if (lua_type(L, -1) != LUA_TSTRING)
            luaL_argerror(L, t, lua_pushfstring(L, "field '%s' is a %s, expected a string", key,
                                                luaL_typename(L, -1)));
        v = lua_tostring(L, -1);
    }
    lua_pop(L, 1);
    return v;
}

static int opt_bool(lua_State *L, int t, const char *key, int dflt)
{
    int v = dflt;
    if (lua_getfield(L, t, key) != LUA_TNIL) v = lua_toboolean(L, -1);
    lua_pop(L, 1);
    return v;
}

static int l_store_build(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TTABLE);
    dga_store_build_opts o = {0};
    o.corpus = opt_string(L, 1, "corpus", NULL);
    o.out = opt_string(L, 1, "out", NULL);
    if (!o.corpus) return luaL_argerror(L, 1, "field 'corpus' (a directory) is required");
    if (!o.out) return luaL_argerror(L, 1, "field 'out' (the store directory) is required");
    o.seq_len = (int)opt_int(L, 1, "seq_len", 129);
    if (o.seq_len < 2) return luaL_argerror(L, 1, "field 'seq_len' must be >= 2");
    o.tokenizer = opt_string(L, 1, "tokenizer", NULL);
    o.vocab = (int)opt_int(L, 1, "vocab", 8192);
    o.max_mb = opt_number(L, 1, "max_mb", 0);
    o.train_mb = opt_number(L, 1, "train_mb", 0);
    o.spherical = opt_bool(L, 1, "spherical", 1);
    o.iters = (int)opt_int(L, 1, "iters", 25);
    o.seed = (uint64_t)opt_int(L, 1, "seed", 1);
    o.embedder = opt_string(L, 1, "embedder", "hash384");
    o.save_embeddings = opt_bool(L, 1, "save_embeddings", 0);
    o.verbose = opt_bool(L, 1, "verbose", 0);
    dga_text_stats stats = {0};
    o.text_stats = &stats;
    o.nlevels = 1;
    o.levels[0] = 64;
    if (lua_getfield(L, 1, "levels") != LUA_TNIL) {
        if (!lua_istable(L, -1)) return luaL_argerror(L, 1, "field 'levels' must be a list of integers");
        int n = (int)lua_rawlen(L, -1);
        if (n < 1 || n > DGA_STORE_MAX_LEVELS)
            return luaL_argerror(L, 1, lua_pushfstring(L, "field 'levels' has %d entries, expected 1..%d",
                                                       n, DGA_STORE_MAX_LEVELS));
        o.nlevels = n;
        for (int i = 0; i < n; i++) {
            lua_rawgeti(L, -1, i + 1);
            int ok;
            lua_Integer v = lua_tointegerx(L, -1, &ok);
            if (!ok || v < 1 || v > (1 << 24))
                return luaL_argerror(L, 1, lua_pushfstring(L, "levels[%d] must be an integer >= 1", i + 1));
            o.levels[i] = (int)v;
            lua_pop(L, 1);
        }
    }
    lua_pop(L, 1);
    dga_store_doc_filter *filter;
    o.nfilter = check_doc_filter(L, 1, &filter);
    o.filter = filter;
    DGAL_CHECK(L, dga_store_build(&o));
    lua_pushstring(L, o.out);
    dgal_push_text_stats(L, &stats);
    return 2;
}

/* embedder box so the embedder is freed if an error unwinds */
#define DGAL_EMBEDDER "dga.embedder"
static int l_emb_gc(lua_State *L)
{
    dga_embedder_free(dgal_box_take(L, 1, DGAL_EMBEDDER));
    return 0;
}

static int l_embed(lua_State *L)
{
    const dga_embedder *e = lua_isnoneornil(L, 2) ? NULL : dga_store_embedder(check_store(L, 2));
    lua_settop(L, 2);
    const char **texts;
    size_t *lens;
    int64_t n = check_texts(L, 1, &texts, &lens);
    if (!e) {
        dgal_box *b = dgal_box_new(L, DGAL_EMBEDDER, 0);
        dga_embedder *fresh;
        DGAL_CHECK(L, dga_embedder_new("hash384", &fresh));
        b->p = fresh;
        DGAL_CHECK(L, dga_embedder_fit(fresh, n, texts, lens));
        e = fresh;
    }
    int64_t shape[2] = {n, e->dim};
    dga_tensor *t = new_tensor(L, DGA_F32, 2, shape);
    DGAL_CHECK(L, dga_embedder_embed_many(e, n, texts, lens, dga_tensor_f32(t)));
    return 1;
}

static int l_kmeans(lua_State *L)
{
    dga_tensor *x = dgal_check_tensor(L, 1);
    if (x->dtype != DGA_F32 || x->ndim != 2)
        return luaL_argerror(L, 1, "expected a float32 tensor [n, d]");
    int64_t n = x->shape[0], d = x->shape[1];
    lua_Integer k = luaL_checkinteger(L, 2);
    if (k < 1 || k > n)
        return luaL_argerror(L, 2, lua_pushfstring(L, "k = %I, expected 1 <= k <= n = %I", k, (lua_Integer)n));
    dga_kmeans_opts o = {.k = (int)k, .iters = 25};
    if (!lua_isnoneornil(L, 3)) {
        luaL_checktype(L, 3, LUA_TTABLE);
        o.seed = (uint64_t)opt_int(L, 3, "seed", 0);
        o.iters = (int)opt_int(L, 3, "iters", 25);
        o.spherical = opt_bool(L, 3, "spherical", 0);
        o.seed_sample = opt_int(L, 3, "seed_sample", 0);
    }
    float *c = dgal_scratch(L, (size_t)k * d * sizeof *c);
    int64_t ashape = n;
    dga_tensor *a = new_tensor(L, DGA_I32, 1, &ashape);
    int kept;
    DGAL_CHECK(L, dga_kmeans(dga_tensor_f32(x), n, (int)d, &o, c, dga_tensor_i32(a), &kept, NULL));
    for (int64_t i = 0; i < n; i++) dga_tensor_i32(a)[i] += 1;
    int64_t cshape[2] = {kept, d};
    dga_tensor *ct = new_tensor(L, DGA_F32, 2, cshape);
    memcpy(ct->data, c, (size_t)kept * d * sizeof *c);
    lua_insert(L, -2);   /* centroids, assignment */
    return 2;
}

#define DGAL_HKMEANS "dga.hkmeans_tmp"
static int l_hk_gc(lua_State *L)
{
    dga_hkmeans_free(luaL_checkudata(L, 1, DGAL_HKMEANS));
    return 0;
}

static int l_kmeans_hierarchical(lua_State *L)
{
    dga_tensor *x = dgal_check_tensor(L, 1);
    if (x->dtype != DGA_F32 || x->ndim != 2)
        return luaL_argerror(L, 1, "expected a float32 tensor [n, d]");
    luaL_checktype(L, 2, LUA_TTABLE);
    int levels[DGA_HKMEANS_MAX_LEVELS], nl = (int)lua_rawlen(L, 2);
    if (nl < 1 || nl > DGA_HKMEANS_MAX_LEVELS)
        return luaL_argerror(L, 2, lua_pushfstring(L, "%d levels, expected 1..%d", nl,
                                                   DGA_HKMEANS_MAX_LEVELS));
    for (int l = 0; l < nl; l++) {
        lua_rawgeti(L, 2, l + 1);
        int ok;
        lua_Integer v = lua_tointegerx(L, -1, &ok);
        if (!ok || v < 1 || v > (1 << 24))
            return luaL_argerror(L, 2, lua_pushfstring(L, "levels[%d] must be an integer >= 1", l + 1));
        levels[l] = (int)v;
        lua_pop(L, 1);
    }
    dga_kmeans_opts o = {.iters = 25, .spherical = 1};
    if (!lua_isnoneornil(L, 3)) {
        luaL_checktype(L, 3, LUA_TTABLE);
        o.seed = (uint64_t)opt_int(L, 3, "seed", 0);
        o.iters = (int)opt_int(L, 3, "iters", 25);
        o.spherical = opt_bool(L, 3, "spherical", 1);
        o.seed_sample = opt_int(L, 3, "seed_sample", 0);
    }
    lua_settop(L, 3);
    dga_hkmeans *h = lua_newuserdatauv(L, sizeof *h, 0);   /* index 4: freed by the GC */
    memset(h, 0, sizeof *h);
    luaL_setmetatable(L, DGAL_HKMEANS);
    int64_t n = x->shape[0], d = x->shape[1];
    DGAL_CHECK(L, dga_kmeans_hierarchical(dga_tensor_f32(x), n, (int)d, levels, nl, &o, h));
    lua_createtable(L, 0, 4);
    lua_createtable(L, nl, 0);
    for (int l = 0; l < nl; l++) {
        lua_pushinteger(L, (lua_Integer)h->k[l]);
        lua_rawseti(L, -2, l + 1);
    }
    lua_setfield(L, -2, "k");
    dga_tensor *leaf = new_tensor(L, DGA_I32, 1, &n);
    for (int64_t i = 0; i < n; i++) dga_tensor_i32(leaf)[i] = h->leaf[i] + 1;
    lua_setfield(L, -2, "leaf");
    lua_createtable(L, nl, 0);
    for (int l = 0; l < nl; l++) {
        int64_t m = h->k[l] + 1;
        dga_tensor *r = new_tensor(L, DGA_I32, 1, &m);
        for (int64_t j = 0; j < m; j++) dga_tensor_i32(r)[j] = (int32_t)h->ranges[l][j] + 1;
        lua_rawseti(L, -2, l + 1);
    }
    lua_setfield(L, -2, "ranges");
    lua_createtable(L, nl, 0);
    for (int l = 0; l < nl; l++) {
        int64_t shape[2] = {h->k[l], d};
        dga_tensor *c = new_tensor(L, DGA_F32, 2, shape);
        memcpy(c->data, h->centroids[l], (size_t)h->k[l] * d * sizeof(float));
        lua_rawseti(L, -2, l + 1);
    }
    lua_setfield(L, -2, "centroids");
    return 1;
}

static int l_npy_save(lua_State *L)
{
    const char *path = luaL_checkstring(L, 1);
    dga_tensor *t = dgal_check_tensor(L, 2);
    DGAL_CHECK(L, dga_npy_write(path, t->dtype == DGA_F32 ? DGA_NPY_F32 : DGA_NPY_I32, t->ndim,
                                t->shape, t->data));
    return 0;
}

typedef struct {
    dga_npy a;
} npy_box;

static int l_npy_gc(lua_State *L)
{
    npy_box *b = luaL_checkudata(L, 1, "dga.npy_tmp");
    dga_npy_free(&b->a);
    return 0;
}

static int l_npy_load(lua_State *L)
{
    const char *path = luaL_checkstring(L, 1);
    npy_box *b = lua_newuserdatauv(L, sizeof *b, 0);
    memset(b, 0, sizeof *b);
    luaL_setmetatable(L, "dga.npy_tmp");
    DGAL_CHECK(L, dga_npy_map(path, &b->a));
    dga_npy *a = &b->a;
    if (a->ndim > DGA_MAX_DIMS)
        return luaL_error(L, "%s: %d dimensions, tensors have at most %d", path, a->ndim, DGA_MAX_DIMS);
    int ndim = a->ndim ? a->ndim : 1;
    int64_t shape[DGA_MAX_DIMS] = {1};
    for (int i = 0; i < a->ndim; i++) shape[i] = a->shape[i];
    dga_dtype dt = a->dtype == DGA_NPY_F32 ? DGA_F32 : DGA_I32;
    dga_tensor *t = new_tensor(L, dt, ndim, shape);
    int64_t n = a->numel;
    switch (a->dtype) {
    case DGA_NPY_F32:
    case DGA_NPY_I32: memcpy(t->data, a->data, (size_t)n * 4); break;
    case DGA_NPY_U16:
        for (int64_t i = 0; i < n; i++) dga_tensor_i32(t)[i] = ((const uint16_t *)a->data)[i];
        break;
    case DGA_NPY_U8:
        for (int64_t i = 0; i < n; i++) dga_tensor_i32(t)[i] = ((const uint8_t *)a->data)[i];
        break;
    case DGA_NPY_I64:
        for (int64_t i = 0; i < n; i++) {
            int64_t v = ((const int64_t *)a->data)[i];
            if (v < INT32_MIN || v > INT32_MAX)
                return luaL_error(L, "%s: entry %I (%I) does not fit an int32 tensor", path,
                                  (lua_Integer)i, (lua_Integer)v);
            dga_tensor_i32(t)[i] = (int32_t)v;
        }
        break;
    case DGA_NPY_U64:
        for (int64_t i = 0; i < n; i++) {
            uint64_t v = ((const uint64_t *)a->data)[i];
            if (v > INT32_MAX)
                return luaL_error(L, "%s: entry %I does not fit an int32 tensor", path, (lua_Integer)i);
            dga_tensor_i32(t)[i] = (int32_t)v;
        }
        break;
    }
    dga_npy_free(a);
    return 1;
}

void dgal_open_store(lua_State *L)
{
    static const luaL_Reg methods[] = {
        {"levels", l_levels},
        {"k", l_k},
        {"seq_len", l_seq_len},
        {"vocab_size", l_vocab_size},
        {"num_sequences", l_num_sequences},
        {"dir", l_dir},
        {"domain_sizes", l_domain_sizes},
        {"domain_tokens", l_domain_tokens},
        {"sequence", l_sequence},
        {"info", l_info},
        {"gather", l_gather},
        {"leaves", l_leaves},
        {"centroids", l_centroids},
        {"sources", l_sources},
        {"histogram", l_histogram},
        {"nearest", l_nearest},
        {"manifest", l_manifest},
        {"close", l_store_close},
        {NULL, NULL},
    };
    static const luaL_Reg meta[] = {
        {"__gc", l_store_close},
        {"__close", l_store_close},
        {"__tostring", l_store_tostring},
        {NULL, NULL},
    };
    dgal_new_class(L, DGAL_STORE, methods, meta);
    /* s:tokenizer() needs the module table (an upvalue) to reach dga.tokenizer_load. */
    luaL_getmetatable(L, DGAL_STORE);
    lua_getfield(L, -1, "__index");
    lua_pushvalue(L, -3);
    lua_pushcclosure(L, l_tokenizer, 1);
    lua_setfield(L, -2, "tokenizer");
    lua_pop(L, 2);
    static const luaL_Reg emb_meta[] = {{"__gc", l_emb_gc}, {NULL, NULL}};
    dgal_new_class(L, DGAL_EMBEDDER, NULL, emb_meta);
    static const luaL_Reg npy_meta[] = {{"__gc", l_npy_gc}, {NULL, NULL}};
    static const luaL_Reg hk_meta[] = {{"__gc", l_hk_gc}, {NULL, NULL}};
    dgal_new_class(L, DGAL_HKMEANS, NULL, hk_meta);
    dgal_new_class(L, "dga.npy_tmp", NULL, npy_meta);

    static const luaL_Reg funcs[] = {
        {"store_open", l_store_open},
        {"store_build", l_store_build},
        {"embed", l_embed},
        {"kmeans", l_kmeans},
        {"kmeans_hierarchical", l_kmeans_hierarchical},
        {"npy_save", l_npy_save},
        {"npy_load", l_npy_load},
        {NULL, NULL},
    };
    luaL_setfuncs(L, funcs, 0);
}
