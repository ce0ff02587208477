/* tokenizer.json (Hugging Face `tokenizers` format) for the byte-level BPE, via jansson. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bpe.h"
#include "bpe_internal.h"
#include "fileio.h"
#include "stale.h"

/* GPT-2's byte-to-unicode table: printable Latin-1 bytes stand for themselves, the other 68
 * bytes are moved to U+0100.. in byte order, so every token is printable text without
 * spaces (a space is 'Ġ', U+0120). */
static unsigned byte_cp[256];
static int cp_byte[324];   /* code point -> byte, -1 if unused; code points stay below 324 */

static void table_init(void)
{
    static int ready;
    if (ready) return;
    for (int i = 0; i < 324; i++) cp_byte[i] = -1;
    unsigned next = 256;
    for (int b = 0; b < 256; b++) {
        int printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
        byte_cp[b] = printable ? (unsigned)b : next++;
        cp_byte[byte_cp[b]] = b;
    }
    ready = 1;
}

/* Spells bytes in the byte-to-unicode alphabet (UTF-8, NUL-terminated) into *out. */
static dga_status spell(const char *bytes, size_t len, char **buf, size_t *cap)
{
    size_t need = 2 * len + 1;
    if (need > *cap) {
        char *p = realloc(*buf, need);
        if (!p) return dga_fail(DGA_ERR_NOMEM, "tokenizer: out of memory");
        *buf = p;
        *cap = need;
    }
    char *o = *buf;
    for (size_t i = 0; i < len; i++) {
        unsigned cp = byte_cp[(unsigned char)bytes[i]];
        if (cp < 0x80) {
            *o++ = (char)cp;
        } else {
            *o++ = (char)(0xC0 | (cp >> 6));
            *o++ = (char)(0x80 | (cp & 0x3F));
        }
    }
    *o = '\0';
    return DGA_OK;
}

/* The inverse: 1 and the bytes in out (capacity >= strlen(s)) if every character of s is in
 * the alphabet, else 0. */
static int unspell(const char *s, char *out, size_t *len)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t n = 0;
    while (*p) {
        unsigned cp;
        if (*p < 0x80) {
            cp = *p++;
        } else if ((*p & 0xE0) == 0xC0 && (p[1] & 0xC0) == 0x80) {
            cp = (unsigned)(*p & 0x1F) << 6 | (p[1] & 0x3F);
            p += 2;
        } else {
            return 0;
        }
        if (cp >= 324 || cp_byte[cp] < 0) return 0;
        out[n++] = (char)cp_byte[cp];
    }
    *len = n;
    return 1;
}

/* ---------------- save ---------------- */

static json_t *byte_level(int add_prefix_space, int trim_offsets)
{
    return json_pack("{s:s, s:b, s:b, s:b}", "type", "ByteLevel", "add_prefix_space",
                     add_prefix_space, "trim_offsets", trim_offsets, "use_regex", 1);
}

dga_status dga_bpe_save(const dga_bpe *tok, const char *path)
{
    table_init();
    dga_stale_remove(path, NULL);
    int n_merges = dga_bpe_num_merges(tok);
    int32_t eot = dga_bpe_eot(tok);
    json_t *vocab = json_object(), *merges = json_array();
    char *buf = NULL, *buf2 = NULL;
    size_t cap = 0, cap2 = 0;
    dga_status st = DGA_OK;
    if (!vocab || !merges) { st = dga_fail(DGA_ERR_NOMEM, "%s: out of memory", path); goto done; }
    for (int32_t id = 0; id < eot && st == DGA_OK; id++) {
        const char *b;
        size_t l;
        dga_bpe_token_bytes(tok, id, &b, &l);
        if ((st = spell(b, l, &buf, &cap)) != DGA_OK) break;
        if (json_object_set_new(vocab, buf, json_integer(id)) != 0)
            st = dga_fail(DGA_ERR_NOMEM, "%s: out of memory", path);
    }
    if (st == DGA_OK && json_object_set_new(vocab, DGA_BPE_EOT_TEXT, json_integer(eot)) != 0)
        st = dga_fail(DGA_ERR_NOMEM, "%s: out of memory", path);
    for (int r = 0; r < n_merges && st == DGA_OK; r++) {
        int32_t a, c;
        const char *ba, *bc;
        size_t la, lc;
        dga_bpe_merge(tok, r, &a, &c);
        dga_bpe_token_bytes(tok, a, &ba, &la);
        dga_bpe_token_bytes(tok, c, &bc, &lc);
        if ((st = spell(ba, la, &buf, &cap)) != DGA_OK) break;
        if ((st = spell(bc, lc, &buf2, &cap2)) != DGA_OK) break;
        /* "left right": unambiguous, since no spelled token contains a plain space */
        size_t n1 = strlen(buf), n2 = strlen(buf2);
        char *m = malloc(n1 + n2 + 2);
        if (!m) { st = dga_fail(DGA_ERR_NOMEM, "%s: out of memory", path); break; }
        memcpy(m, buf, n1);
        m[n1] = ' ';
        memcpy(m + n1 + 1, buf2, n2 + 1);
        if (json_array_append_new(merges, json_string(m)) != 0)
            st = dga_fail(DGA_ERR_NOMEM, "%s: out of memory", path);
        free(m);
    }
    if (st != DGA_OK) goto done;
    json_t *root = json_pack(
        "{s:s, s:n, s:n, s:[{s:i, s:s, s:b, s:b, s:b, s:b, s:b}], s:n, s:o, s:o, s:o, "
        "s:{s:s, s:n, s:n, s:n, s:n, s:b, s:b, s:o, s:o}}",
        "version", "1.0", "truncation", "padding", "added_tokens", "id", (json_int_t)eot,
        "content", DGA_BPE_EOT_TEXT, "single_word", 0, "lstrip", 0, "rstrip", 0, "normalized", 0,
        "special", 1, "normalizer", "pre_tokenizer", byte_level(0, 1), "post_processor",
        byte_level(1, 0), "decoder", byte_level(1, 1), "model", "type", "BPE", "dropout",
        "unk_token", "continuing_subword_prefix", "end_of_word_suffix", "fuse_unk", 0,
        "byte_fallback", 0, "vocab", vocab, "merges", merges);
    vocab = merges = NULL;   /* "o" stole them, even when json_pack failed */
    if (!root) { st = dga_fail(DGA_ERR_NOMEM, "%s: cannot build the JSON", path); goto done; }
    char *text = json_dumps(root, JSON_INDENT(2));
    json_decref(root);
    if (!text) { st = dga_fail(DGA_ERR_NOMEM, "%s: cannot serialise the JSON", path); goto done; }
    const void *parts[2] = {text, "\n"};
    size_t sizes[2] = {strlen(text), 1};
    st = dga_write_file_atomic(path, 2, parts, sizes);
    free(text);
done:
    json_decref(vocab);
    json_decref(merges);
    free(buf);
    free(buf2);
    return st;
}

/* ---------------- load ---------------- */

/* vocab[key] as an id in [0, limit), or -1. */
static int vocab_id(json_t *vocab, const char *key, int limit)
{
    json_t *v = json_object_get(vocab, key);
    if (!v || !json_is_integer(v)) return -1;
    json_int_t id = json_integer_value(v);
    return id >= 0 && id < limit ? (int)id : -1;
}

dga_status dga_bpe_load(const char *path, dga_bpe **out)
{
    table_init();
    *out = NULL;
    char *text = NULL;
    size_t text_len = 0;
    dga_status read_st = dga_file_read_all(path, &text, &text_len);
    if (read_st) return read_st;
    json_error_t err;
    json_t *root = json_loadb(text, text_len, 0, &err);
    free(text);
    if (!root)
        return dga_fail(DGA_ERR_FORMAT, "%s: line %d, column %d: not valid JSON: %s", path,
                        err.line, err.column, err.text);
    dga_status st = DGA_OK;
    int32_t *left = NULL, *right = NULL;
    char *bytes = NULL, *joined = NULL;
    json_t *model = json_object_get(root, "model");
    json_t *vocab = model ? json_object_get(model, "vocab") : NULL;
    json_t *merges = model ? json_object_get(model, "merges") : NULL;
    json_t *type = model ? json_object_get(model, "type") : NULL;
    json_t *pre = json_object_get(root, "pre_tokenizer");
    json_t *pre_type = json_is_object(pre) ? json_object_get(pre, "type") : NULL;
    if (!json_is_object(root) || !json_is_object(model)) {
        st = dga_fail(DGA_ERR_FORMAT, "%s: expected an object with a \"model\" object", path);
        goto done;
    }
    if (type && !(json_is_string(type) && strcmp(json_string_value(type), "BPE") == 0)) {
        st = dga_fail(DGA_ERR_FORMAT, "%s: model.type is %s (expected \"BPE\")", path,
                      json_is_string(type) ? json_string_value(type) : "not a string");
        goto done;
    }
    if (pre && !json_is_null(pre) &&
        !(json_is_string(pre_type) && strcmp(json_string_value(pre_type), "ByteLevel") == 0)) {
        st = dga_fail(DGA_ERR_FORMAT, "%s: pre_tokenizer.type must be \"ByteLevel\"", path);
        goto done;
    }
    if (!json_is_object(vocab) || !json_is_array(merges)) {
        st = dga_fail(DGA_ERR_FORMAT, "%s: model.vocab must be an object and model.merges an array",
                      path);
        goto done;
    }
    size_t m = json_array_size(merges);
    if (m > (size_t)DGA_BPE_MAX_VOCAB - 257) {
        st = dga_fail(DGA_ERR_FORMAT, "%s: %zu merges (at most %d)", path, m, DGA_BPE_MAX_VOCAB - 257);
        goto done;
    }
    int n_merges = (int)m, eot = 256 + n_merges;
    /* the vocabulary: exactly ids 0..eot-1 (and eot itself for <|endoftext|>, optional) */
    size_t n_vocab = json_object_size(vocab);
    if (n_vocab != (size_t)eot && n_vocab != (size_t)eot + 1) {
        st = dga_fail(DGA_ERR_FORMAT,
                      "%s: model.vocab has %zu entries, expected %d (256 bytes + %d merges, "
                      "plus <|endoftext|>)", path, n_vocab, eot + 1, n_merges);
        goto done;
    }
    for (int b = 0; b < 256; b++) {
        char one = (char)b, spelled[3];
        char *sp = spelled;
        size_t cap = sizeof spelled;
        if ((st = spell(&one, 1, &sp, &cap)) != DGA_OK) goto done;
        if (vocab_id(vocab, spelled, eot + 1) != b) {
            st = dga_fail(DGA_ERR_FORMAT,
                          "%s: model.vocab: byte 0x%02x (\"%s\") must have id %d (byte-level "
                          "layout: ids 0..255 are the bytes)", path, b, spelled, b);
            goto done;
        }
    }
    json_t *e = json_object_get(vocab, DGA_BPE_EOT_TEXT);
    if (e && vocab_id(vocab, DGA_BPE_EOT_TEXT, eot + 1) != eot) {
        st = dga_fail(DGA_ERR_FORMAT, "%s: model.vocab: %s must have the last id %d", path,
                      DGA_BPE_EOT_TEXT, eot);
        goto done;
    }
    /* <|endoftext|> among the added tokens, with the last id */
    json_t *added = json_object_get(root, "added_tokens");
    int found = 0;
    for (size_t i = 0; json_is_array(added) && i < json_array_size(added); i++) {
        json_t *a = json_array_get(added, i);
        json_t *c = json_object_get(a, "content"), *id = json_object_get(a, "id");
        if (json_is_string(c) && strcmp(json_string_value(c), DGA_BPE_EOT_TEXT) == 0) {
            if (!json_is_integer(id) || json_integer_value(id) != eot) {
                st = dga_fail(DGA_ERR_FORMAT, "%s: added_tokens: %s must have id %d", path,
                              DGA_BPE_EOT_TEXT, eot);
                goto done;
            }
            found = 1;
        } else {
            st = dga_fail(DGA_ERR_FORMAT, "%s: added_tokens[%zu]: only %s is supported", path,
                          i, DGA_BPE_EOT_TEXT);
            goto done;
        }
    }
    if (!found) {
        st = dga_fail(DGA_ERR_FORMAT, "%s: added_tokens has no %s", path, DGA_BPE_EOT_TEXT);
        goto done;
    }
    /* the merges, in rank order */
    left = malloc((m + 1) * sizeof *left);
    right = malloc((m + 1) * sizeof *right);
    if (!left || !right) { st = dga_fail(DGA_ERR_NOMEM, "%s: out of memory", path); goto done; }
    size_t jcap = 0;
    for (int r = 0; r < n_merges; r++) {
        json_t *x = json_array_get(merges, (size_t)r);
        const char *ls = NULL, *rs = NULL;
        char *split = NULL;
        if (json_is_string(x)) {
            const char *s = json_string_value(x);
            const char *sp = strchr(s, ' ');
            if (sp && !strchr(sp + 1, ' ')) {
                split = strdup(s);
                if (!split) { st = dga_fail(DGA_ERR_NOMEM, "%s: out of memory", path); goto done; }
                split[sp - s] = '\0';
                ls = split;
                rs = split + (sp - s) + 1;
            }
        } else if (json_is_array(x) && json_array_size(x) == 2 &&
                   json_is_string(json_array_get(x, 0)) && json_is_string(json_array_get(x, 1))) {
            ls = json_string_value(json_array_get(x, 0));
            rs = json_string_value(json_array_get(x, 1));
        }
        if (!ls) {
            st = dga_fail(DGA_ERR_FORMAT, "%s: model.merges[%d]: expected \"left right\" or "
                          "[left, right]", path, r);
            goto done;
        }
        int a = vocab_id(vocab, ls, 256 + r), b = vocab_id(vocab, rs, 256 + r);
        size_t need = strlen(ls) + strlen(rs) + 1;
        if (need > jcap) {
            char *p = realloc(joined, need);
            if (!p) { free(split); st = dga_fail(DGA_ERR_NOMEM, "%s: out of memory", path); goto done; }
            joined = p;
            jcap = need;
        }
        strcpy(joined, ls);
        strcat(joined, rs);
        int c = vocab_id(vocab, joined, eot);
        if (a < 0 || b < 0 || c != 256 + r) {
            st = dga_fail(DGA_ERR_FORMAT,
                          "%s: model.merges[%d] \"%s %s\": %s", path, r, ls, rs,
                          a < 0 || b < 0 ? "uses a token that is not in the vocabulary before it"
                                         : "the merged token must have id 256 + rank");
            free(split);
            goto done;
        }
        free(split);
        left[r] = a;
        right[r] = b;
    }
    /* every vocab entry must spell bytes (so decode knows them); ids are checked above */
    bytes = malloc(1024);
    size_t bcap = 1024;
    const char *key;
    json_t *val;
    json_object_foreach(vocab, key, val) {
        if (strcmp(key, DGA_BPE_EOT_TEXT) == 0) continue;
        size_t kl = strlen(key), bl;
        if (kl > bcap) {
            char *p = realloc(bytes, kl);
            if (!p) { st = dga_fail(DGA_ERR_NOMEM, "%s: out of memory", path); goto done; }
            bytes = p;
            bcap = kl;
        }
        if (!bytes || !unspell(key, bytes, &bl)) {
            st = dga_fail(DGA_ERR_FORMAT, "%s: model.vocab: \"%s\" is not spelled in the "
                          "byte-level alphabet", path, key);
            goto done;
        }
    }
    st = dga_bpe_from_merges(left, right, n_merges, out);
    left = right = NULL;
    /* Each merged token was checked to have id 256 + r, and each byte token its byte id: with
     * exactly eot (+1) entries, the vocabulary is exactly this layout. */
done:
    free(left);
    free(right);
    free(bytes);
    free(joined);
    json_decref(root);
    return st;
}
