#include "safetensors.h"
#include "fileio.h"

#include <inttypes.h>
#include <jansson.h>
#include <zlib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A header is JSON text describing tensors: anything beyond this is not a real file. */
#define MAX_HEADER (100u << 20)

static const char *const dtype_names[] = {"F32", "I32", "U8", "I64"};
static const size_t dtype_sizes[] = {4, 4, 1, 8};
#define N_DTYPES 4

size_t dga_st_dtype_size(dga_st_dtype d) { return (unsigned)d < N_DTYPES ? dtype_sizes[d] : 0; }

const char *dga_st_dtype_name(dga_st_dtype d)
{
    return (unsigned)d < N_DTYPES ? dtype_names[d] : "?";
}

int64_t dga_st_entry_numel(const dga_st_entry *e)
{
    int64_t n = 1;
    for (int d = 0; d < e->ndim; d++) n *= e->shape[d];
    return n;
}

size_t dga_st_entry_nbytes(const dga_st_entry *e)
{
    return (size_t)dga_st_entry_numel(e) * dga_st_dtype_size(e->dtype);
}

/* ------------------------------------------------------------------ writer */

/* Larger elements first, then by name: every tensor starts aligned to its element size. */
static int cmp_write_order(const void *a, const void *b, void *ctx)
{
    const dga_st_entry *base = ctx;
    const dga_st_entry *x = &base[*(const int *)a], *y = &base[*(const int *)b];
    size_t sx = dga_st_dtype_size(x->dtype), sy = dga_st_dtype_size(y->dtype);
    if (sx != sy) return sx > sy ? -1 : 1;
    return strcmp(x->name, y->name);
}

static dga_status check_entries(const char *path, const dga_st_entry *e, int n,
                                const dga_st_meta *meta, int n_meta)
{
    for (int i = 0; i < n; i++) {
        if (!e[i].name || !*e[i].name || !strcmp(e[i].name, "__metadata__"))
            return dga_fail(DGA_ERR_INVALID, "%s: entry %d: invalid tensor name '%s'", path,
                            i + 1, e[i].name ? e[i].name : "(null)");
        if ((unsigned)e[i].dtype >= N_DTYPES)
            return dga_fail(DGA_ERR_INVALID, "%s: tensor '%s': unknown dtype %d", path,
                            e[i].name, (int)e[i].dtype);
        if (e[i].ndim < 0 || e[i].ndim > DGA_ST_MAX_DIMS)
            return dga_fail(DGA_ERR_INVALID, "%s: tensor '%s': %d dimensions (expected 0 to %d)",
                            path, e[i].name, e[i].ndim, DGA_ST_MAX_DIMS);
        for (int d = 0; d < e[i].ndim; d++)
            if (e[i].shape[d] < 0)
                return dga_fail(DGA_ERR_INVALID, "%s: tensor '%s': dimension %d is negative",
                                path, e[i].name, d + 1);
        for (int j = 0; j < i; j++)
            if (!strcmp(e[i].name, e[j].name))
                return dga_fail(DGA_ERR_INVALID, "%s: tensor name '%s' appears twice", path,
                                e[i].name);
    }
    for (int i = 0; i < n_meta; i++) {
        if (!meta[i].key || !meta[i].value)
            return dga_fail(DGA_ERR_INVALID, "%s: metadata entry %d has no key or value", path,
                            i + 1);
        for (int j = 0; j < i; j++)
            if (!strcmp(meta[i].key, meta[j].key))
                return dga_fail(DGA_ERR_INVALID, "%s: metadata key '%s' appears twice", path,
                                meta[i].key);
    }
    return DGA_OK;
}

/* The JSON header for entries in `order`, padded with spaces to a multiple of 8. */
static char *build_header(const dga_st_entry *e, const int *order, int n,
                          const dga_st_meta *meta, int n_meta, size_t *len)
{
    json_t *root = json_object();
    int bad = !root;
    if (n_meta > 0 && !bad) {
        json_t *m = json_object();
        for (int i = 0; m && i < n_meta; i++)
            bad |= json_object_set_new(m, meta[i].key, json_string(meta[i].value));
        bad |= !m || json_object_set_new(root, "__metadata__", m);
    }
    uint64_t offset = 0;
    for (int k = 0; k < n && !bad; k++) {
        const dga_st_entry *x = &e[order[k]];
        json_t *shape = json_array(), *offs = json_array(), *obj = json_object();
        for (int d = 0; shape && d < x->ndim; d++)
            bad |= json_array_append_new(shape, json_integer(x->shape[d]));
        uint64_t end = offset + dga_st_entry_nbytes(x);
        bad |= !offs || json_array_append_new(offs, json_integer((json_int_t)offset));
        bad |= !offs || json_array_append_new(offs, json_integer((json_int_t)end));
        bad |= !obj || json_object_set_new(obj, "dtype", json_string(dga_st_dtype_name(x->dtype)));
        bad |= !obj || json_object_set_new(obj, "shape", shape);
        bad |= !obj || json_object_set_new(obj, "data_offsets", offs);
        bad |= json_object_set_new(root, x->name, obj);
        offset = end;
    }
    char *text = bad ? NULL : json_dumps(root, JSON_COMPACT);
    json_decref(root);
    if (!text) return NULL;
    size_t raw = strlen(text), padded = (raw + 7) / 8 * 8;
    char *out = malloc(padded + 1);
    if (out) {
        memcpy(out, text, raw);
        memset(out + raw, ' ', padded - raw);
        out[padded] = 0;
        *len = padded;
    }
    free(text);
    return out;
}

/* CRC-32 of tensors' bytes taken in the given order (the data section, when that is the
 * file's order); a tensor without data counts as no bytes (the write fails on it anyway). */
static uint32_t data_crc(const dga_st_entry *e, const int *order, int n)
{
    uLong crc = crc32(0L, Z_NULL, 0);
    for (int k = 0; k < n; k++) {
        const dga_st_entry *x = &e[order ? order[k] : k];
        const unsigned char *p = x->data;
        for (size_t left = p ? dga_st_entry_nbytes(x) : 0; left > 0;) {
            uInt chunk = left > (1u << 30) ? (1u << 30) : (uInt)left;   /* zlib takes uInt */
            crc = crc32(crc, p, chunk);
            p += chunk;
            left -= chunk;
        }
    }
    return (uint32_t)crc;
}

dga_status dga_safetensors_write(const char *path, const dga_st_entry *entries, int n,
                                 const dga_st_meta *meta, int n_meta)
{
    return dga_safetensors_write_crc(path, entries, n, meta, n_meta, NULL);
}

dga_status dga_safetensors_write_crc(const char *path, const dga_st_entry *entries, int n,
                                     const dga_st_meta *meta, int n_meta, const char *crc_key)
{
    if (n < 0 || n_meta < 0 || (n > 0 && !entries) || (n_meta > 0 && !meta))
        return dga_fail(DGA_ERR_INVALID, "%s: invalid entry list", path);
    dga_status st = check_entries(path, entries, n, meta, n_meta);
    if (st != DGA_OK) return st;
    for (int i = 0; crc_key && i < n_meta; i++)
        if (!strcmp(meta[i].key, crc_key))
            return dga_fail(DGA_ERR_INVALID, "%s: metadata key '%s' is reserved for the checksum",
                            path, crc_key);

    int *order = malloc((size_t)(n > 0 ? n : 1) * sizeof *order);
    dga_st_meta *all = malloc((size_t)(n_meta + 1) * sizeof *all);
    if (!order || !all) {
        free(order), free(all);
        return dga_fail(DGA_ERR_NOMEM, "%s: out of memory", path);
    }
    for (int i = 0; i < n; i++) order[i] = i;
    qsort_r(order, (size_t)n, sizeof *order, cmp_write_order, (void *)entries);
    if (n_meta) memcpy(all, meta, (size_t)n_meta * sizeof *all);
    char crc_hex[9];
    if (crc_key) {
        snprintf(crc_hex, sizeof crc_hex, "%08" PRIx32, data_crc(entries, order, n));
        all[n_meta++] = (dga_st_meta){crc_key, crc_hex};
    }
    size_t hlen = 0;
    char *header = build_header(entries, order, n, all, n_meta, &hlen);
    free(all);
    if (!header) {
        free(order);
        return dga_fail(DGA_ERR_NOMEM, "%s: cannot build the JSON header", path);
    }

    unsigned char len8[8];
    for (int b = 0; b < 8; b++) len8[b] = (unsigned char)((uint64_t)hlen >> (8 * b));
    dga_atomic_file af;
    st = dga_atomic_file_open(path, &af);
    if (st == DGA_OK) st = dga_atomic_file_write(&af, len8, 8);
    if (st == DGA_OK) st = dga_atomic_file_write(&af, header, hlen);
    for (int k = 0; k < n && st == DGA_OK; k++) {
        const dga_st_entry *x = &entries[order[k]];
        size_t nb = dga_st_entry_nbytes(x);
        if (nb && !x->data)
            st = dga_fail(DGA_ERR_INVALID, "%s: tensor '%s' has no data", path, x->name);
        else if (nb)
            st = dga_atomic_file_write(&af, x->data, nb);
    }
    if (st == DGA_OK)
        st = dga_atomic_file_commit(&af);
    else
        dga_atomic_file_abort(&af);
    free(header);
    free(order);
    return st;
}

/* ------------------------------------------------------------------ reader */

struct dga_safetensors {
    char          *path;
    unsigned char *buf;        /* the whole file */
    int            n, n_meta;
    dga_st_entry  *entries;    /* in data order */
    int           *by_name;    /* indices sorted by name */
    dga_st_meta   *meta;
    uint64_t      *begin;      /* data offsets, parallel to entries */
};

void dga_safetensors_close(dga_safetensors *st)
{
    if (!st) return;
    for (int i = 0; i < st->n; i++) free((char *)st->entries[i].name);
    for (int i = 0; i < st->n_meta; i++) {
        free((char *)st->meta[i].key);
        free((char *)st->meta[i].value);
    }
    free(st->entries);
    free(st->by_name);
    free(st->meta);
    free(st->begin);
    free(st->buf);
    free(st->path);
    free(st);
}

static int json_uint(const json_t *v, uint64_t *out)
{
    if (!json_is_integer(v) || json_integer_value(v) < 0) return 0;
    *out = (uint64_t)json_integer_value(v);
    return 1;
}

static dga_status parse_metadata(dga_safetensors *st, json_t *m)
{
    const char *path = st->path;
    if (!json_is_object(m))
        return dga_fail(DGA_ERR_FORMAT, "%s: __metadata__ is not a JSON object", path);
    st->meta = calloc(json_object_size(m) + 1, sizeof *st->meta);
    if (!st->meta) return dga_fail(DGA_ERR_NOMEM, "%s: out of memory", path);
    const char *key;
    json_t *v;
    json_object_foreach(m, key, v) {
        if (!json_is_string(v))
            return dga_fail(DGA_ERR_FORMAT, "%s: __metadata__ value of '%s' is not a string",
                            path, key);
        dga_st_meta *x = &st->meta[st->n_meta];
        x->key = strdup(key);
        x->value = strdup(json_string_value(v));
        st->n_meta++;
        if (!x->key || !x->value) return dga_fail(DGA_ERR_NOMEM, "%s: out of memory", path);
    }
    return DGA_OK;
}

/* One tensor's header record into entry i (data pointer filled later). */
static dga_status parse_tensor(dga_safetensors *st, int i, const char *name, json_t *obj,
                               uint64_t *end)
{
    const char *path = st->path;
    dga_st_entry *e = &st->entries[i];
    e->name = strdup(name);
    if (!e->name) return dga_fail(DGA_ERR_NOMEM, "%s: out of memory", path);
    if (!json_is_object(obj))
        return dga_fail(DGA_ERR_FORMAT, "%s: tensor '%s': header entry is not a JSON object",
                        path, name);
    json_t *dt = json_object_get(obj, "dtype"), *shape = json_object_get(obj, "shape");
    json_t *offs = json_object_get(obj, "data_offsets");
    if (!json_is_string(dt))
        return dga_fail(DGA_ERR_FORMAT, "%s: tensor '%s': missing or non-string \"dtype\"", path,
                        name);
    int d;
    for (d = 0; d < N_DTYPES; d++)
        if (!strcmp(json_string_value(dt), dtype_names[d])) break;
    if (d == N_DTYPES)
        return dga_fail(DGA_ERR_FORMAT, "%s: tensor '%s': unsupported dtype \"%s\" (expected "
                        "F32, I32, U8 or I64)", path, name, json_string_value(dt));
    e->dtype = (dga_st_dtype)d;
    if (!json_is_array(shape) || json_array_size(shape) > DGA_ST_MAX_DIMS)
        return dga_fail(DGA_ERR_FORMAT, "%s: tensor '%s': \"shape\" must be an array of at most "
                        "%d integers", path, name, DGA_ST_MAX_DIMS);
    e->ndim = (int)json_array_size(shape);
    uint64_t numel = 1;
    for (int k = 0; k < e->ndim; k++) {
        uint64_t v;
        if (!json_uint(json_array_get(shape, (size_t)k), &v) || v > (UINT64_C(1) << 48))
            return dga_fail(DGA_ERR_FORMAT, "%s: tensor '%s': shape entry %d is not a valid "
                            "dimension", path, name, k + 1);
        e->shape[k] = (int64_t)v;
        numel = v && numel > UINT64_MAX / 16 / v ? UINT64_MAX / 16 : numel * v;
    }
    uint64_t b, en;
    if (!json_is_array(offs) || json_array_size(offs) != 2 ||
        !json_uint(json_array_get(offs, 0), &b) || !json_uint(json_array_get(offs, 1), &en))
        return dga_fail(DGA_ERR_FORMAT, "%s: tensor '%s': \"data_offsets\" must be two "
                        "non-negative integers", path, name);
    if (en < b)
        return dga_fail(DGA_ERR_FORMAT, "%s: tensor '%s': data_offsets [%" PRIu64 ", %" PRIu64
                        "] end before they begin", path, name, b, en);
    uint64_t need = numel * dga_st_dtype_size(e->dtype);
    if (en - b != need)
        return dga_fail(DGA_ERR_FORMAT, "%s: tensor '%s': shape needs %" PRIu64 " bytes of %s "
                        "but data_offsets span %" PRIu64, path, name, need,
                        dtype_names[e->dtype], en - b);
    st->begin[i] = b;
    *end = en;
    return DGA_OK;
}

static int cmp_begin(const void *a, const void *b, void *ctx)
{
    const dga_safetensors *st = ctx;
    uint64_t x = st->begin[*(const int *)a], y = st->begin[*(const int *)b];
    return x < y ? -1 : x > y;
}

static int cmp_name(const void *a, const void *b, void *ctx)
{
    const dga_safetensors *st = ctx;
    return strcmp(st->entries[*(const int *)a].name, st->entries[*(const int *)b].name);
}

static dga_status parse(dga_safetensors *st, size_t size)
{
    const char *path = st->path;
    if (size < 8)
        return dga_fail(DGA_ERR_FORMAT, "%s: truncated: %zu bytes, too short for the 8-byte "
                        "header length (not a safetensors file?)", path, size);
    uint64_t hlen = 0;
    for (int b = 0; b < 8; b++) hlen |= (uint64_t)st->buf[b] << (8 * b);
    if (hlen > MAX_HEADER)
        return dga_fail(DGA_ERR_FORMAT, "%s: header length %" PRIu64 " is implausible (not a "
                        "safetensors file?)", path, hlen);
    if (hlen > size - 8)
        return dga_fail(DGA_ERR_FORMAT, "%s: truncated: header says %" PRIu64 " bytes of JSON, "
                        "file has %zu after the length", path, hlen, size - 8);
    if (hlen == 0 || st->buf[8] != '{')
        return dga_fail(DGA_ERR_FORMAT, "%s: header does not start with '{' (not a safetensors "
                        "file?)", path);
    json_error_t err;
    json_t *root = json_loadb((const char *)st->buf + 8, (size_t)hlen, JSON_REJECT_DUPLICATES,
                              &err);
    if (!root)
        return dga_fail(DGA_ERR_FORMAT, "%s: header is not valid JSON: %s (at byte %d of the "
                        "header)", path, err.text, err.position);
    dga_status s = DGA_OK;
    if (!json_is_object(root)) {
        s = dga_fail(DGA_ERR_FORMAT, "%s: header is not a JSON object", path);
        goto done;
    }
    size_t cap = json_object_size(root) + 1;
    st->entries = calloc(cap, sizeof *st->entries);
    st->begin = calloc(cap, sizeof *st->begin);
    uint64_t *end = calloc(cap, sizeof *end);
    int *order = calloc(cap, sizeof *order);
    st->by_name = calloc(cap, sizeof *st->by_name);
    if (!st->entries || !st->begin || !end || !order || !st->by_name) {
        s = dga_fail(DGA_ERR_NOMEM, "%s: out of memory", path);
        goto free_tmp;
    }
    const char *key;
    json_t *v;
    json_object_foreach(root, key, v) {
        if (!strcmp(key, "__metadata__")) {
            s = parse_metadata(st, v);
        } else {
            s = parse_tensor(st, st->n, key, v, &end[st->n]);
            st->n++;
        }
        if (s != DGA_OK) goto free_tmp;
    }
    uint64_t data = (uint64_t)size - 8 - hlen, total = 0;
    for (int i = 0; i < st->n; i++)
        if (end[i] > total) total = end[i];
    if (total > data) {
        s = dga_fail(DGA_ERR_FORMAT, "%s: truncated: header says %" PRIu64 " bytes of data, file "
                     "has %" PRIu64, path, total, data);
        goto free_tmp;
    }
    /* Tensors must tile the data section: sorted by start, each begins where the last ended. */
    for (int i = 0; i < st->n; i++) order[i] = i;
    qsort_r(order, (size_t)st->n, sizeof *order, cmp_begin, st);
    uint64_t pos = 0;
    for (int k = 0; k < st->n; k++) {
        int i = order[k];
        if (st->begin[i] != pos) {
            const char *prev = k ? st->entries[order[k - 1]].name : "(start)";
            s = dga_fail(DGA_ERR_FORMAT, "%s: tensor '%s' starts at byte %" PRIu64 " but '%s' "
                         "ends at %" PRIu64 " (%s)", path, st->entries[i].name, st->begin[i],
                         prev, pos, st->begin[i] < pos ? "overlap" : "gap");
            goto free_tmp;
        }
        pos = end[i];
    }
    if (pos != data) {
        s = dga_fail(DGA_ERR_FORMAT, "%s: %" PRIu64 " bytes after the last tensor (the data "
                     "section has %" PRIu64 ", tensors cover %" PRIu64 ")", path, data - pos,
                     data, pos);
        goto free_tmp;
    }
    /* Store entries in data order, with their data pointers. */
    dga_st_entry *sorted = calloc(cap, sizeof *sorted);
    uint64_t *begins = calloc(cap, sizeof *begins);
    if (!sorted || !begins) {
        free(sorted);
        free(begins);
        s = dga_fail(DGA_ERR_NOMEM, "%s: out of memory", path);
        goto free_tmp;
    }
    for (int k = 0; k < st->n; k++) {
        sorted[k] = st->entries[order[k]];
        begins[k] = st->begin[order[k]];
        sorted[k].data = st->buf + 8 + hlen + begins[k];
    }
    free(st->entries);
    free(st->begin);
    st->entries = sorted;
    st->begin = begins;
    for (int i = 0; i < st->n; i++) st->by_name[i] = i;
    qsort_r(st->by_name, (size_t)st->n, sizeof *st->by_name, cmp_name, st);
free_tmp:
    free(end);
    free(order);
done:
    json_decref(root);
    return s;
}

dga_status dga_safetensors_open(const char *path, dga_safetensors **out)
{
    *out = NULL;
    dga_safetensors *st = calloc(1, sizeof *st);
    if (!st || !(st->path = strdup(path))) {
        free(st);
        return dga_fail(DGA_ERR_NOMEM, "%s: out of memory", path);
    }
    size_t size = 0;
    char *bytes = NULL;
    dga_status s = dga_file_read_all(path, &bytes, &size);
    st->buf = (unsigned char *)bytes;
    if (s == DGA_OK) s = parse(st, size);
    if (s != DGA_OK) {
        dga_safetensors_close(st);
        return s;
    }
    *out = st;
    return DGA_OK;
}

const char *dga_safetensors_path(const dga_safetensors *st) { return st->path; }
int dga_safetensors_count(const dga_safetensors *st) { return st->n; }

const dga_st_entry *dga_safetensors_entry(const dga_safetensors *st, int i)
{
    return i >= 0 && i < st->n ? &st->entries[i] : NULL;
}

const dga_st_entry *dga_safetensors_find(const dga_safetensors *st, const char *name)
{
    int lo = 0, hi = st->n - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        const dga_st_entry *e = &st->entries[st->by_name[mid]];
        int c = strcmp(name, e->name);
        if (!c) return e;
        if (c < 0) hi = mid - 1; else lo = mid + 1;
    }
    return NULL;
}

int dga_safetensors_meta_count(const dga_safetensors *st) { return st->n_meta; }

const dga_st_meta *dga_safetensors_meta_at(const dga_safetensors *st, int i)
{
    return i >= 0 && i < st->n_meta ? &st->meta[i] : NULL;
}

const char *dga_safetensors_meta(const dga_safetensors *st, const char *key)
{
    for (int i = 0; i < st->n_meta; i++)
        if (!strcmp(st->meta[i].key, key)) return st->meta[i].value;
    return NULL;
}

dga_status dga_safetensors_check_crc(const dga_safetensors *st, const char *crc_key)
{
    const char *want = dga_safetensors_meta(st, crc_key);
    if (!want)
        return dga_fail(DGA_ERR_FORMAT, "%s: metadata has no \"%s\" (the data checksum)",
                        st->path, crc_key);
    char got[9];
    snprintf(got, sizeof got, "%08" PRIx32, data_crc(st->entries, NULL, st->n));
    if (strcmp(got, want))
        return dga_fail(DGA_ERR_FORMAT, "%s: corrupted: the tensor data has CRC-32 %s, the "
                        "file says %s (\"%s\"); the file was damaged after it was written",
                        st->path, got, want, crc_key);
    return DGA_OK;
}
