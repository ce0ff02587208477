/* Byte-level BPE: chunking, training (pair counts with incremental updates and an indexed
 * max-heap), cached encoding, decoding. tokenizer.json I/O lives in bpe_json.c. */
#include "bpe.h"
#include "bpe_internal.h"

#include <limits.h>
#ifdef DGA_BPE_VERIFY
#include <stdio.h>
#endif
#include <stdlib.h>
#include <string.h>

/* ================= chunking ================= */

enum { C_SPACE = DGA_BPE_SPACE, C_LETTER = DGA_BPE_LETTER, C_DIGIT = DGA_BPE_DIGIT,
       C_OTHER = DGA_BPE_OTHER };

static unsigned char g_class[128];
static int g_class_ready;

static void class_init(void)
{
    if (g_class_ready) return;
    for (int c = 0; c < 128; c++) {
        unsigned char k = C_OTHER;
        if (c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r') k = C_SPACE;
        else if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) k = C_LETTER;
        else if (c >= '0' && c <= '9') k = C_DIGIT;
        g_class[c] = k;
    }
    g_class_ready = 1;   /* idempotent: racing threads write the same bytes */
}

/* Class and byte length of the character at s[0] (n > 0 bytes left). */
static inline int char_class(const unsigned char *s, size_t n, size_t *len)
{
    if (s[0] < 0x80) {
        *len = 1;
        return g_class[s[0]];
    }
    return dga_bpe_nonascii_class(s, n, len);
}

/* End of the run of characters of class k starting at byte j. */
static inline size_t run_end(const unsigned char *s, size_t n, size_t j, int k)
{
    while (j < n) {
        size_t l;
        if (char_class(s + j, n - j, &l) != k) break;
        j += l;
    }
    return j;
}

/* Length of the chunk starting at s[0] (n > 0 bytes left). */
static size_t chunk_len(const unsigned char *s, size_t n)
{
    unsigned char c = s[0];
    if (c == '\'' && n >= 2) {   /* GPT-2's contractions, case-sensitive like its regex */
        unsigned char d = s[1];
        if (n >= 3) {
            unsigned char e = s[2];
            if ((d == 'r' && e == 'e') || (d == 'v' && e == 'e') || (d == 'l' && e == 'l'))
                return 3;
        }
        if (d == 's' || d == 't' || d == 'm' || d == 'd') return 2;
    }
    size_t l0, l1;
    if (c == ' ' && n >= 2) {   /* ' ?X+': one ASCII space may lead a run */
        int k1 = char_class(s + 1, n - 1, &l1);
        if (k1 != C_SPACE) return run_end(s, n, 1 + l1, k1);
    }
    int k0 = char_class(s, n, &l0);
    if (k0 != C_SPACE) return run_end(s, n, l0, k0);
    /* whitespace: \s+(?!\S) leaves the last space character to what follows, then \s+ */
    size_t j = l0, last = 0;
    while (j < n) {
        size_t l;
        if (char_class(s + j, n - j, &l) != C_SPACE) break;
        last = j;
        j += l;
    }
    if (j < n && last > 0) j = last;
    return j;
}

void dga_bpe_split(const char *text, size_t len, dga_bpe_chunk_fn fn, void *ud)
{
    class_init();
    const unsigned char *s = (const unsigned char *)text;
    size_t i = 0;
    while (i < len) {
        size_t k = chunk_len(s + i, len - i);
        fn(text + i, k, ud);
        i += k;
    }
}

/* ================= hashing and maps ================= */

static uint64_t hash_bytes(const char *p, size_t n)
{
    /* FNV-1a over 8-byte words, then a final mix: fast enough for short chunks. */
    uint64_t h = 0xcbf29ce484222325ull ^ (uint64_t)n;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        h = (h ^ w) * 0x100000001b3ull;
        h ^= h >> 29;
    }
    for (; i < n; i++) h = (h ^ (unsigned char)p[i]) * 0x100000001b3ull;
    h ^= h >> 32;
    h *= 0xd6e8feb86659fd93ull;
    h ^= h >> 32;
    return h;
}

static uint64_t hash_u64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    return x;
}

/* ---- u64 -> u32 map (open addressing; key UINT64_MAX = empty) ---- */

dga_status dga_u64map_init(dga_u64map *m, size_t expect)
{
    size_t cap = 16;
    while (cap < expect * 2) cap *= 2;
    m->keys = malloc(cap * sizeof *m->keys);
    m->vals = malloc(cap * sizeof *m->vals);
    if (!m->keys || !m->vals) {
        free(m->keys);
        free(m->vals);
        m->keys = NULL;
        m->vals = NULL;
        return dga_fail(DGA_ERR_NOMEM, "tokenizer: out of memory");
    }
    memset(m->keys, 0xff, cap * sizeof *m->keys);
    m->cap = cap;
    m->n = 0;
    return DGA_OK;
}

void dga_u64map_free(dga_u64map *m)
{
    free(m->keys);
    free(m->vals);
    memset(m, 0, sizeof *m);
}

static dga_status u64map_grow(dga_u64map *m)
{
    dga_u64map bigger;
    dga_status st = dga_u64map_init(&bigger, m->cap);
    if (st != DGA_OK) return st;
    for (size_t i = 0; i < m->cap; i++)
        if (m->keys[i] != UINT64_MAX) dga_u64map_put(&bigger, m->keys[i], m->vals[i]);
    dga_u64map_free(m);
    *m = bigger;
    return DGA_OK;
}

dga_status dga_u64map_put(dga_u64map *m, uint64_t key, uint32_t val)
{
    if ((m->n + 1) * 2 > m->cap) {
        dga_status st = u64map_grow(m);
        if (st != DGA_OK) return st;
    }
    size_t mask = m->cap - 1, i = hash_u64(key) & mask;
    while (m->keys[i] != UINT64_MAX && m->keys[i] != key) i = (i + 1) & mask;
    if (m->keys[i] == UINT64_MAX) {
        m->keys[i] = key;
        m->n++;
    }
    m->vals[i] = val;
    return DGA_OK;
}

int dga_u64map_get(const dga_u64map *m, uint64_t key, uint32_t *val)
{
    if (!m->cap) return 0;
    size_t mask = m->cap - 1, i = hash_u64(key) & mask;
    for (;;) {
        uint64_t k = m->keys[i];
        if (k == key) { *val = m->vals[i]; return 1; }
        if (k == UINT64_MAX) return 0;
        i = (i + 1) & mask;
    }
}

/* ---- bytes -> u64 map; keys copied into an arena ---- */

typedef struct {
    uint64_t hash;
    size_t   off;     /* key offset in the arena */
    uint32_t len;     /* key length; UINT32_MAX = empty slot */
    uint64_t val;
} bslot;

typedef struct {
    bslot  *slots;
    size_t  cap, n;
    char   *arena;
    size_t  arena_n, arena_cap;
} bmap;

static dga_status bmap_init(bmap *m, size_t cap)
{
    memset(m, 0, sizeof *m);
    m->slots = malloc(cap * sizeof *m->slots);
    if (!m->slots) return dga_fail(DGA_ERR_NOMEM, "tokenizer: out of memory");
    for (size_t i = 0; i < cap; i++) m->slots[i].len = UINT32_MAX;
    m->cap = cap;
    return DGA_OK;
}

static void bmap_free(bmap *m)
{
    free(m->slots);
    free(m->arena);
    memset(m, 0, sizeof *m);
}

static void bmap_clear(bmap *m)
{
    for (size_t i = 0; i < m->cap; i++) m->slots[i].len = UINT32_MAX;
    m->n = 0;
    m->arena_n = 0;
}

static bslot *bmap_find(const bmap *m, const char *key, size_t len, uint64_t h)
{
    size_t mask = m->cap - 1, i = h & mask;
    for (;;) {
        bslot *s = &m->slots[i];
        if (s->len == UINT32_MAX) return s;
        if (s->hash == h && s->len == len && memcmp(m->arena + s->off, key, len) == 0) return s;
        i = (i + 1) & mask;
    }
}

static dga_status bmap_grow(bmap *m)
{
    size_t cap = m->cap * 2;
    bslot *slots = malloc(cap * sizeof *slots);
    if (!slots) return dga_fail(DGA_ERR_NOMEM, "tokenizer: out of memory");
    for (size_t i = 0; i < cap; i++) slots[i].len = UINT32_MAX;
    for (size_t i = 0; i < m->cap; i++) {
        if (m->slots[i].len == UINT32_MAX) continue;
        size_t j = m->slots[i].hash & (cap - 1);
        while (slots[j].len != UINT32_MAX) j = (j + 1) & (cap - 1);
        slots[j] = m->slots[i];
    }
    free(m->slots);
    m->slots = slots;
    m->cap = cap;
    return DGA_OK;
}

/* The slot for key, inserted (val 0) if absent; *added says whether it was new. */
static dga_status bmap_upsert(bmap *m, const char *key, size_t len, bslot **out, int *added)
{
    if (len >= UINT32_MAX) return dga_fail(DGA_ERR_INVALID, "tokenizer: chunk too long");
    if ((m->n + 1) * 4 > m->cap * 3) {   /* keep load <= 3/4 */
        dga_status st = bmap_grow(m);
        if (st != DGA_OK) return st;
    }
    uint64_t h = hash_bytes(key, len);
    bslot *s = bmap_find(m, key, len, h);
    *added = 0;
    if (s->len == UINT32_MAX) {
        if (m->arena_n + len > m->arena_cap) {
            size_t cap = m->arena_cap ? m->arena_cap : 1 << 16;
            while (cap < m->arena_n + len) cap *= 2;
            char *a = realloc(m->arena, cap);
            if (!a) return dga_fail(DGA_ERR_NOMEM, "tokenizer: out of memory");
            m->arena = a;
            m->arena_cap = cap;
        }
        if (len) memcpy(m->arena + m->arena_n, key, len);
        s->hash = h;
        s->off = m->arena_n;
        s->len = (uint32_t)len;
        s->val = 0;
        m->arena_n += len;
        m->n++;
        *added = 1;
    }
    *out = s;
    return DGA_OK;
}

/* ================= the tokenizer object ================= */

#define CACHE_MAX_ENTRIES (1u << 18)
#define CACHE_MAX_IDS (1u << 24)

struct dga_bpe {
    int      n_merges;
    int32_t *left, *right;      /* merge r: left[r] + right[r] -> 256 + r */
    size_t  *tok_off;           /* token id (< 256 + n_merges) -> bytes in tok_bytes */
    uint32_t *tok_len;
    char    *tok_bytes;
    dga_u64map ranks;           /* (left << 32 | right) -> rank */
    /* encode cache: chunk bytes -> (offset << 32 | count) in cache_ids */
    bmap     cache;
    int32_t *cache_ids;
    size_t   cache_n, cache_cap;
    int32_t *work;              /* scratch symbols for one chunk */
    size_t   work_cap;
};

static inline uint64_t pair_key(int32_t a, int32_t b)
{
    return (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
}

/* Builds a tokenizer from its merges (validated by the caller: ids in range). Takes
 * ownership of left/right. */
dga_status dga_bpe_from_merges(int32_t *left, int32_t *right, int n_merges, dga_bpe **out)
{
    class_init();
    *out = NULL;
    dga_bpe *t = calloc(1, sizeof *t);
    if (!t) {
        free(left);
        free(right);
        return dga_fail(DGA_ERR_NOMEM, "tokenizer: out of memory");
    }
    t->n_merges = n_merges;
    t->left = left;
    t->right = right;
    size_t n_tok = 256 + (size_t)n_merges;
    t->tok_off = malloc(n_tok * sizeof *t->tok_off);
    t->tok_len = malloc(n_tok * sizeof *t->tok_len);
    dga_status st = DGA_OK;
    if (!t->tok_off || !t->tok_len) { st = dga_fail(DGA_ERR_NOMEM, "tokenizer: out of memory"); goto fail; }
    size_t total = 256;
    for (int r = 0; r < n_merges; r++) {
        if (left[r] < 0 || right[r] < 0 || left[r] >= 256 + r || right[r] >= 256 + r) {
            st = dga_fail(DGA_ERR_INVALID, "tokenizer: merge %d uses an id not yet defined", r);
            goto fail;
        }
    }
    /* token lengths first, then bytes */
    for (int b = 0; b < 256; b++) t->tok_len[b] = 1;
    for (int r = 0; r < n_merges; r++) {
        uint64_t l = (uint64_t)t->tok_len[left[r]] + t->tok_len[right[r]];
        if (l > UINT32_MAX / 2) { st = dga_fail(DGA_ERR_INVALID, "tokenizer: merge %d too long", r); goto fail; }
        t->tok_len[256 + r] = (uint32_t)l;
        total += l;
    }
    t->tok_bytes = malloc(total);
    if (!t->tok_bytes) { st = dga_fail(DGA_ERR_NOMEM, "tokenizer: out of memory"); goto fail; }
    size_t off = 0;
    for (int b = 0; b < 256; b++) {
        t->tok_off[b] = off;
        t->tok_bytes[off++] = (char)b;
    }
    for (int r = 0; r < n_merges; r++) {
        int32_t a = left[r], c = right[r];
        t->tok_off[256 + r] = off;
        memcpy(t->tok_bytes + off, t->tok_bytes + t->tok_off[a], t->tok_len[a]);
        memcpy(t->tok_bytes + off + t->tok_len[a], t->tok_bytes + t->tok_off[c], t->tok_len[c]);
        off += t->tok_len[256 + r];
    }
    if ((st = dga_u64map_init(&t->ranks, (size_t)n_merges + 1)) != DGA_OK) goto fail;
    for (int r = 0; r < n_merges; r++)
        if ((st = dga_u64map_put(&t->ranks, pair_key(left[r], right[r]), (uint32_t)r)) != DGA_OK)
            goto fail;
    if ((st = bmap_init(&t->cache, 1 << 12)) != DGA_OK) goto fail;
    *out = t;
    return DGA_OK;
fail:
    dga_bpe_free(t);
    return st;
}

void dga_bpe_free(dga_bpe *t)
{
    if (!t) return;
    free(t->left);
    free(t->right);
    free(t->tok_off);
    free(t->tok_len);
    free(t->tok_bytes);
    dga_u64map_free(&t->ranks);
    bmap_free(&t->cache);
    free(t->cache_ids);
    free(t->work);
    free(t);
}

int32_t dga_bpe_eot(const dga_bpe *t) { return 256 + t->n_merges; }
int dga_bpe_vocab_size(const dga_bpe *t) { return 257 + t->n_merges; }
int dga_bpe_num_merges(const dga_bpe *t) { return t->n_merges; }

dga_status dga_bpe_merge(const dga_bpe *t, int r, int32_t *left, int32_t *right)
{
    if (r < 0 || r >= t->n_merges)
        return dga_fail(DGA_ERR_INVALID, "merge rank %d outside [0, %d)", r, t->n_merges);
    *left = t->left[r];
    *right = t->right[r];
    return DGA_OK;
}

dga_status dga_bpe_token_bytes(const dga_bpe *t, int32_t id, const char **bytes, size_t *len)
{
    if (id == dga_bpe_eot(t)) {
        *bytes = DGA_BPE_EOT_TEXT;
        *len = sizeof DGA_BPE_EOT_TEXT - 1;
        return DGA_OK;
    }
    if (id < 0 || id > dga_bpe_eot(t))
        return dga_fail(DGA_ERR_INVALID, "token id %d outside vocabulary [0, %d)", id,
                        dga_bpe_vocab_size(t));
    *bytes = t->tok_bytes + t->tok_off[id];
    *len = t->tok_len[id];
    return DGA_OK;
}

/* ================= encoding ================= */

/* Applies merges by rank to sym[0..n) in place; returns the new length. Each round finds the
 * lowest-ranked adjacent pair and merges all its occurrences left to right, which is what
 * GPT-2 (and Hugging Face's BPE) compute. */
static size_t merge_chunk(const dga_bpe *t, int32_t *sym, size_t n)
{
    while (n >= 2) {
        uint32_t best = UINT32_MAX, r;
        for (size_t i = 0; i + 1 < n; i++)
            if (dga_u64map_get(&t->ranks, pair_key(sym[i], sym[i + 1]), &r) && r < best) best = r;
        if (best == UINT32_MAX) break;
        int32_t a = t->left[best], b = t->right[best], c = 256 + (int32_t)best;
        size_t j = 0;
        for (size_t i = 0; i < n;) {
            if (i + 1 < n && sym[i] == a && sym[i + 1] == b) {
                sym[j++] = c;
                i += 2;
            } else {
                sym[j++] = sym[i++];
            }
        }
        n = j;
    }
    return n;
}

/* Encodes one chunk, through the cache; *ids points into the cache (or work) buffer, valid
 * until the next call. */
static dga_status encode_chunk(dga_bpe *t, const char *p, size_t len, const int32_t **ids,
                               size_t *n)
{
    if (len == 1) {   /* a single byte is its own token: skip the cache */
        if (t->work_cap < 1) {
            t->work = malloc(16 * sizeof *t->work);
            if (!t->work) return dga_fail(DGA_ERR_NOMEM, "tokenizer: out of memory");
            t->work_cap = 16;
        }
        t->work[0] = (unsigned char)p[0];
        *ids = t->work;
        *n = 1;
        return DGA_OK;
    }
    uint64_t h = hash_bytes(p, len);
    if (len < UINT32_MAX) {
        bslot *s = bmap_find(&t->cache, p, len, h);
        if (s->len != UINT32_MAX) {
            *ids = t->cache_ids + (s->val >> 32);
            *n = (size_t)(s->val & 0xffffffffu);
            return DGA_OK;
        }
    }
    if (t->work_cap < len) {
        int32_t *w = realloc(t->work, len * sizeof *w);
        if (!w) return dga_fail(DGA_ERR_NOMEM, "tokenizer: out of memory for a %zu-byte chunk", len);
        t->work = w;
        t->work_cap = len;
    }
    for (size_t i = 0; i < len; i++) t->work[i] = (unsigned char)p[i];
    size_t m = merge_chunk(t, t->work, len);
    *ids = t->work;
    *n = m;
    /* Cache it, unless it is huge; a full cache is simply emptied (chunks repeat locally). */
    if (len > 256) return DGA_OK;
    if (t->cache.n >= CACHE_MAX_ENTRIES || t->cache_n + m > CACHE_MAX_IDS) {
        bmap_clear(&t->cache);
        t->cache_n = 0;
    }
    if (t->cache_n + m > t->cache_cap) {
        size_t cap = t->cache_cap ? t->cache_cap : 1 << 14;
        while (cap < t->cache_n + m) cap *= 2;
        int32_t *c = realloc(t->cache_ids, cap * sizeof *c);
        if (!c) return DGA_OK;   /* caching is optional */
        t->cache_ids = c;
        t->cache_cap = cap;
    }
    bslot *s;
    int added;
    if (bmap_upsert(&t->cache, p, len, &s, &added) != DGA_OK) return DGA_OK;
    memcpy(t->cache_ids + t->cache_n, t->work, m * sizeof *t->work);
    s->val = (uint64_t)t->cache_n << 32 | m;
    t->cache_n += m;
    return DGA_OK;
}

dga_status dga_bpe_ids_push(dga_bpe_ids *buf, int32_t id)
{
    if (buf->n == buf->cap) {
        size_t cap = buf->cap ? buf->cap * 2 : 1024;
        int32_t *p = realloc(buf->ids, cap * sizeof *p);
        if (!p) return dga_fail(DGA_ERR_NOMEM, "tokenizer: out of memory for %zu ids", cap);
        buf->ids = p;
        buf->cap = cap;
    }
    buf->ids[buf->n++] = id;
    return DGA_OK;
}

void dga_bpe_ids_free(dga_bpe_ids *buf)
{
    free(buf->ids);
    memset(buf, 0, sizeof *buf);
}

/* Shared loop of both encoders: out grows (buf) or is fixed (fixed/cap). */
static dga_status encode_into(dga_bpe *t, const char *bytes, size_t len, dga_bpe_ids *buf,
                              int32_t *fixed, size_t cap, size_t *count)
{
    class_init();
    const unsigned char *s = (const unsigned char *)bytes;
    size_t i = 0, n = 0;
    while (i < len) {
        size_t k = chunk_len(s + i, len - i);
        const int32_t *ids = NULL;
        size_t m = 0;
        dga_status st = encode_chunk(t, bytes + i, k, &ids, &m);
        if (st != DGA_OK) return st;
        if (buf) {
            if (buf->n + m > buf->cap) {
                size_t c = buf->cap ? buf->cap : 1024;
                while (c < buf->n + m) c *= 2;
                int32_t *p = realloc(buf->ids, c * sizeof *p);
                if (!p) return dga_fail(DGA_ERR_NOMEM, "tokenizer: out of memory for %zu ids", c);
                buf->ids = p;
                buf->cap = c;
            }
            memcpy(buf->ids + buf->n, ids, m * sizeof *ids);
            buf->n += m;
        } else {
            if (n + m > cap)
                return dga_fail(DGA_ERR_INVALID,
                                "encode: output capacity %zu too small (%zu bytes of input; "
                                "a capacity of the input length always suffices)", cap, len);
            memcpy(fixed + n, ids, m * sizeof *ids);
        }
        n += m;
        i += k;
    }
    if (count) *count = n;
    return DGA_OK;
}

dga_status dga_bpe_encode(dga_bpe *t, const char *bytes, size_t len, int32_t *out, size_t cap,
                          size_t *n)
{
    *n = 0;
    if (len && !bytes) return dga_fail(DGA_ERR_INVALID, "encode: no input bytes");
    return encode_into(t, bytes, len, NULL, out, cap, n);
}

dga_status dga_bpe_encode_append(dga_bpe *t, const char *bytes, size_t len, dga_bpe_ids *buf)
{
    if (len && !bytes) return dga_fail(DGA_ERR_INVALID, "encode: no input bytes");
    return encode_into(t, bytes, len, buf, NULL, 0, NULL);
}

dga_status dga_bpe_decode(const dga_bpe *t, const int32_t *ids, size_t n, char **out,
                          size_t *len)
{
    *out = NULL;
    *len = 0;
    int32_t eot = dga_bpe_eot(t);
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        int32_t id = ids[i];
        if (id < 0 || id > eot)
            return dga_fail(DGA_ERR_INVALID,
                            "decode: token id %d at position %zu outside vocabulary [0, %d)", id,
                            i, dga_bpe_vocab_size(t));
        total += id == eot ? sizeof DGA_BPE_EOT_TEXT - 1 : t->tok_len[id];
    }
    char *p = malloc(total + 1);
    if (!p) return dga_fail(DGA_ERR_NOMEM, "decode: out of memory for %zu bytes", total);
    size_t off = 0;
    for (size_t i = 0; i < n; i++) {
        const char *b;
        size_t l;
        dga_bpe_token_bytes(t, ids[i], &b, &l);
        memcpy(p + off, b, l);
        off += l;
    }
    p[off] = '\0';
    *out = p;
    *len = off;
    return DGA_OK;
}

/* ================= training ================= */

struct dga_bpe_trainer {
    bmap chunks;   /* chunk bytes -> count */
    size_t bytes;  /* text added so far */
    dga_status err;
};

dga_status dga_bpe_trainer_new(dga_bpe_trainer **out)
{
    class_init();
    *out = NULL;
    dga_bpe_trainer *tr = calloc(1, sizeof *tr);
    if (!tr) return dga_fail(DGA_ERR_NOMEM, "tokenizer training: out of memory");
    dga_status st = bmap_init(&tr->chunks, 1 << 16);
    if (st != DGA_OK) {
        free(tr);
        return st;
    }
    *out = tr;
    return DGA_OK;
}

void dga_bpe_trainer_free(dga_bpe_trainer *tr)
{
    if (!tr) return;
    bmap_free(&tr->chunks);
    free(tr);
}

dga_status dga_bpe_trainer_add(dga_bpe_trainer *tr, const char *text, size_t len)
{
    if (len && !text) return dga_fail(DGA_ERR_INVALID, "tokenizer training: no text");
    tr->bytes += len;
    const unsigned char *s = (const unsigned char *)text;
    size_t i = 0;
    while (i < len) {
        size_t k = chunk_len(s + i, len - i);
        if (k >= 2) {   /* a one-byte chunk holds no pair: it cannot affect training */
            bslot *slot;
            int added;
            dga_status st = bmap_upsert(&tr->chunks, text + i, k, &slot, &added);
            if (st != DGA_OK) return st;
            slot->val++;
        }
        i += k;
    }
    return DGA_OK;
}

/* A word is one distinct chunk: its current symbols and its frequency. */
typedef struct {
    size_t   off;        /* into syms */
    uint32_t len;
    uint32_t stamp;      /* last merge that processed this word (dedupe) */
    uint64_t count;
} word;

typedef struct {
    int32_t  a, b;
    int64_t  count;
    int32_t  heap_pos;   /* -1 when not in the heap */
    int      banned;     /* would duplicate an existing token: never merged */
    uint32_t *words;     /* words that contain (or once contained) the pair */
    uint32_t nw, cw;
} pairrec;

typedef struct {
    word     *words;
    size_t    n_words;
    int32_t  *syms;
    pairrec  *pairs;
    size_t    n_pairs, cap_pairs;
    dga_u64map pair_index;
    uint32_t *heap;      /* pair indices, max-heap by (count desc, a asc, b asc) */
    size_t    heap_n;
} trainer_state;

static int pair_before(const pairrec *p, const pairrec *q)
{
    if (p->count != q->count) return p->count > q->count;
    if (p->a != q->a) return p->a < q->a;
    return p->b < q->b;
}

static void heap_swap(trainer_state *s, size_t i, size_t j)
{
    uint32_t t = s->heap[i];
    s->heap[i] = s->heap[j];
    s->heap[j] = t;
    s->pairs[s->heap[i]].heap_pos = (int32_t)i;
    s->pairs[s->heap[j]].heap_pos = (int32_t)j;
}

static void heap_up(trainer_state *s, size_t i)
{
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!pair_before(&s->pairs[s->heap[i]], &s->pairs[s->heap[p]])) break;
        heap_swap(s, i, p);
        i = p;
    }
}

static void heap_down(trainer_state *s, size_t i)
{
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, best = i;
        if (l < s->heap_n && pair_before(&s->pairs[s->heap[l]], &s->pairs[s->heap[best]])) best = l;
        if (r < s->heap_n && pair_before(&s->pairs[s->heap[r]], &s->pairs[s->heap[best]])) best = r;
        if (best == i) break;
        heap_swap(s, i, best);
        i = best;
    }
}

static void heap_remove(trainer_state *s, uint32_t pi)
{
    int32_t pos = s->pairs[pi].heap_pos;
    if (pos < 0) return;
    size_t last = --s->heap_n;
    if ((size_t)pos != last) {
        heap_swap(s, (size_t)pos, last);
        s->pairs[pi].heap_pos = -1;
        heap_up(s, (size_t)pos);
        heap_down(s, (size_t)pos);
    } else {
        s->pairs[pi].heap_pos = -1;
    }
}

/* Puts pair pi where its current count belongs (in, out, up or down). */
static void heap_fix(trainer_state *s, uint32_t pi)
{
    pairrec *p = &s->pairs[pi];
    if (p->count <= 0 || p->banned) {
        heap_remove(s, pi);
        return;
    }
    if (p->heap_pos < 0) {
        p->heap_pos = (int32_t)s->heap_n;
        s->heap[s->heap_n++] = pi;
        heap_up(s, (size_t)p->heap_pos);
    } else {
        heap_up(s, (size_t)p->heap_pos);
        heap_down(s, (size_t)p->heap_pos);
    }
}

static dga_status pair_get(trainer_state *s, int32_t a, int32_t b, uint32_t *out)
{
    uint64_t key = pair_key(a, b);
    if (dga_u64map_get(&s->pair_index, key, out)) return DGA_OK;
    if (s->n_pairs == s->cap_pairs) {
        size_t cap = s->cap_pairs ? s->cap_pairs * 2 : 1 << 16;
        pairrec *p = realloc(s->pairs, cap * sizeof *p);
        uint32_t *h = realloc(s->heap, cap * sizeof *h);
        if (h) s->heap = h;
        if (p) s->pairs = p;
        if (!p || !h) return dga_fail(DGA_ERR_NOMEM, "tokenizer training: out of memory");
        s->cap_pairs = cap;
    }
    if (s->n_pairs >= UINT32_MAX - 1)
        return dga_fail(DGA_ERR_NOMEM, "tokenizer training: too many distinct pairs");
    uint32_t pi = (uint32_t)s->n_pairs++;
    pairrec *p = &s->pairs[pi];
    memset(p, 0, sizeof *p);
    p->a = a;
    p->b = b;
    p->heap_pos = -1;
    dga_status st = dga_u64map_put(&s->pair_index, key, pi);
    if (st != DGA_OK) return st;
    *out = pi;
    return DGA_OK;
}

static dga_status pair_add_word(pairrec *p, uint32_t w)
{
    if (p->nw && p->words[p->nw - 1] == w) return DGA_OK;
    if (p->nw == p->cw) {
        uint32_t cw = p->cw ? p->cw * 2 : 4;
        uint32_t *ws = realloc(p->words, cw * sizeof *ws);
        if (!ws) return dga_fail(DGA_ERR_NOMEM, "tokenizer training: out of memory");
        p->words = ws;
        p->cw = cw;
    }
    p->words[p->nw++] = w;
    return DGA_OK;
}

/* Adds sign * count of word w to each of its pairs; registers w in the lists of pairs that
 * contain `fresh` (the new symbol) when adding. */
static dga_status word_pairs(trainer_state *s, uint32_t w, int sign, int32_t fresh)
{
    word *wd = &s->words[w];
    const int32_t *y = s->syms + wd->off;
    for (uint32_t i = 0; i + 1 < wd->len; i++) {
        uint32_t pi;
        dga_status st = pair_get(s, y[i], y[i + 1], &pi);
        if (st != DGA_OK) return st;
        pairrec *p = &s->pairs[pi];
        p->count += sign * (int64_t)wd->count;
        if (sign > 0 && (y[i] == fresh || y[i + 1] == fresh))
            if ((st = pair_add_word(p, w)) != DGA_OK) return st;
        /* Fix the heap at every change: an indexed heap is only restored by one sift when
         * a single key is out of place. */
        heap_fix(s, pi);
    }
    return DGA_OK;
}

static void state_free(trainer_state *s)
{
    free(s->words);
    free(s->syms);
    for (size_t i = 0; i < s->n_pairs; i++) free(s->pairs[i].words);
    free(s->pairs);
    free(s->heap);
    dga_u64map_free(&s->pair_index);
}

dga_status dga_bpe_trainer_finish(dga_bpe_trainer *tr, int vocab_size, dga_bpe **out)
{
    *out = NULL;
    if (vocab_size < 257 || vocab_size > DGA_BPE_MAX_VOCAB)
        return dga_fail(DGA_ERR_INVALID,
                        "tokenizer training: vocabulary size %d outside [257, %d] (256 bytes + "
                        "merges + <|endoftext|>)", vocab_size, DGA_BPE_MAX_VOCAB);
    /* A corpus that turned out empty (no files, every line skipped) is a mistake upstream;
     * a byte-only tokenizer would hide it until the first model trained on it. */
    if (tr->bytes == 0)
        return dga_fail(DGA_ERR_INVALID, "tokenizer training: the corpus is empty (no text was "
                        "added)");
    int want = vocab_size - 257;
    trainer_state s;
    memset(&s, 0, sizeof s);
    bmap tokens;   /* byte strings of all tokens so far: a merge may not duplicate one */
    memset(&tokens, 0, sizeof tokens);
    int32_t *left = malloc(((size_t)want + 1) * sizeof *left);
    int32_t *right = malloc(((size_t)want + 1) * sizeof *right);
    char *scratch = NULL;
    size_t scratch_cap = 0;
    dga_status st = DGA_OK;
    if (!left || !right) { st = dga_fail(DGA_ERR_NOMEM, "tokenizer training: out of memory"); goto done; }

    /* words from the chunk table */
    const bmap *c = &tr->chunks;
    s.words = malloc((c->n + 1) * sizeof *s.words);
    s.syms = malloc((c->arena_n + 1) * sizeof *s.syms);
    if (!s.words || !s.syms) { st = dga_fail(DGA_ERR_NOMEM, "tokenizer training: out of memory"); goto done; }
    size_t off = 0;
    for (size_t i = 0; i < c->cap; i++) {
        const bslot *sl = &c->slots[i];
        if (sl->len == UINT32_MAX) continue;
        word *w = &s.words[s.n_words++];
        w->off = off;
        w->len = sl->len;
        w->count = sl->val;
        w->stamp = UINT32_MAX;
        for (uint32_t k = 0; k < sl->len; k++)
            s.syms[off + k] = (unsigned char)c->arena[sl->off + k];
        off += sl->len;
    }
    if ((st = dga_u64map_init(&s.pair_index, 1 << 16)) != DGA_OK) goto done;
    for (size_t w = 0; w < s.n_words; w++) {
        word *wd = &s.words[w];
        for (uint32_t i = 0; i + 1 < wd->len; i++) {
            uint32_t pi;
            if ((st = pair_get(&s, s.syms[wd->off + i], s.syms[wd->off + i + 1], &pi)) != DGA_OK) goto done;
            s.pairs[pi].count += (int64_t)wd->count;
            if ((st = pair_add_word(&s.pairs[pi], (uint32_t)w)) != DGA_OK) goto done;
        }
    }
    for (size_t pi = 0; pi < s.n_pairs; pi++) heap_fix(&s, (uint32_t)pi);

    /* token strings: the 256 bytes; token lengths are tracked to build merged strings */
    if ((st = bmap_init(&tokens, 1 << 12)) != DGA_OK) goto done;
    size_t *toff = malloc(((size_t)want + 256) * sizeof *toff);
    uint32_t *tlen = malloc(((size_t)want + 256) * sizeof *tlen);
    if (!toff || !tlen) {
        free(toff);
        free(tlen);
        st = dga_fail(DGA_ERR_NOMEM, "tokenizer training: out of memory");
        goto done;
    }
    for (int b = 0; b < 256; b++) {
        char ch = (char)b;
        bslot *sl;
        int added;
        if ((st = bmap_upsert(&tokens, &ch, 1, &sl, &added)) != DGA_OK) break;
        toff[b] = sl->off;
        tlen[b] = 1;
    }
    int m = 0;
    while (st == DGA_OK && m < want && s.heap_n > 0) {
        uint32_t pi = s.heap[0];
        int32_t a = s.pairs[pi].a, b = s.pairs[pi].b;
        /* the merged byte string; refuse duplicates of an existing token */
        size_t la = tlen[a], lb = tlen[b];
        if (la + lb > scratch_cap) {
            size_t cap = (la + lb) * 2;
            char *p = realloc(scratch, cap);
            if (!p) { st = dga_fail(DGA_ERR_NOMEM, "tokenizer training: out of memory"); break; }
            scratch = p;
            scratch_cap = cap;
        }
        memcpy(scratch, tokens.arena + toff[a], la);
        memcpy(scratch + la, tokens.arena + toff[b], lb);
        bslot *sl;
        int added;
        if ((st = bmap_upsert(&tokens, scratch, la + lb, &sl, &added)) != DGA_OK) break;
        if (!added) {
            s.pairs[pi].banned = 1;
            heap_remove(&s, pi);
            continue;
        }
        int32_t cid = 256 + m;
        toff[cid] = sl->off;
        tlen[cid] = (uint32_t)(la + lb);
        left[m] = a;
        right[m] = b;
        uint32_t stamp = (uint32_t)m;
        /* the list may grow while we walk it (pairs (a,b) never gain words, but realloc of
         * other pairs' lists is fine); copy the bounds first */
        uint32_t nw = s.pairs[pi].nw;
        for (uint32_t k = 0; k < nw && st == DGA_OK; k++) {
            uint32_t w = s.pairs[pi].words[k];
            word *wd = &s.words[w];
            if (wd->stamp == stamp) continue;
            wd->stamp = stamp;
            int32_t *y = s.syms + wd->off;
            int has = 0;
            for (uint32_t i = 0; i + 1 < wd->len; i++)
                if (y[i] == a && y[i + 1] == b) { has = 1; break; }
            if (!has) continue;
            if ((st = word_pairs(&s, w, -1, -1)) != DGA_OK) break;
            uint32_t j = 0;
            for (uint32_t i = 0; i < wd->len;) {
                if (i + 1 < wd->len && y[i] == a && y[i + 1] == b) {
                    y[j++] = cid;
                    i += 2;
                } else {
                    y[j++] = y[i++];
                }
            }
            wd->len = j;
            st = word_pairs(&s, w, +1, cid);
        }
        if (st != DGA_OK) break;
#ifdef DGA_BPE_VERIFY
        /* Debug builds (-DDGA_BPE_VERIFY, slow): recount every pair and check the heap. */
        for (size_t q = 0; q < s.n_pairs; q++) {
            int64_t want = 0;
            for (size_t w = 0; w < s.n_words; w++)
                for (uint32_t i = 0; i + 1 < s.words[w].len; i++)
                    if (s.syms[s.words[w].off + i] == s.pairs[q].a && s.syms[s.words[w].off + i + 1] == s.pairs[q].b)
                        want += (int64_t)s.words[w].count;
            if (want != s.pairs[q].count)
                fprintf(stderr, "merge %d (%d,%d): pair (%d,%d) count %lld, should be %lld\n", m, a, b,
                        s.pairs[q].a, s.pairs[q].b, (long long)s.pairs[q].count, (long long)want);
        }
        for (size_t h = 1; h < s.heap_n; h++)
            if (pair_before(&s.pairs[s.heap[h]], &s.pairs[s.heap[(h - 1) / 2]]))
                fprintf(stderr, "merge %d: heap broken at %zu\n", m, h);
        for (size_t q = 0; q < s.n_pairs; q++)
            if (s.pairs[q].count > 0 && !s.pairs[q].banned && s.pairs[q].heap_pos < 0 && q != pi)
                fprintf(stderr, "merge %d: pair (%d,%d) count %lld missing from heap\n", m, s.pairs[q].a, s.pairs[q].b, (long long)s.pairs[q].count);
#endif
        free(s.pairs[pi].words);   /* (a,b) is gone for good */
        s.pairs[pi].words = NULL;
        s.pairs[pi].nw = s.pairs[pi].cw = 0;
        heap_remove(&s, pi);
        m++;
    }
    free(toff);
    free(tlen);
    if (st != DGA_OK) goto done;
    st = dga_bpe_from_merges(left, right, m, out);
    left = right = NULL;   /* owned by the tokenizer now (or freed on failure) */
done:
    free(left);
    free(right);
    free(scratch);
    bmap_free(&tokens);
    state_free(&s);
    return st;
}

dga_status dga_bpe_train(const char *const *texts, const size_t *lens, size_t n, int vocab_size,
                         dga_bpe **out)
{
    *out = NULL;
    dga_bpe_trainer *tr;
    dga_status st = dga_bpe_trainer_new(&tr);
    if (st != DGA_OK) return st;
    for (size_t i = 0; i < n && st == DGA_OK; i++) st = dga_bpe_trainer_add(tr, texts[i], lens[i]);
    if (st == DGA_OK) st = dga_bpe_trainer_finish(tr, vocab_size, out);
    dga_bpe_trainer_free(tr);
    return st;
}
