#include "npy.h"
#include "fileio.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static const struct {
    const char *descr;
    size_t      size;
} dtypes[] = {
    [DGA_NPY_F32] = {"<f4", 4}, [DGA_NPY_I32] = {"<i4", 4}, [DGA_NPY_I64] = {"<i8", 8},
    [DGA_NPY_U16] = {"<u2", 2}, [DGA_NPY_U64] = {"<u8", 8}, [DGA_NPY_U8] = {"|u1", 1},
};
#define NDTYPES ((int)(sizeof dtypes / sizeof dtypes[0]))

size_t dga_npy_dtype_size(dga_npy_dtype dtype) { return dtypes[dtype].size; }
const char *dga_npy_dtype_descr(dga_npy_dtype dtype) { return dtypes[dtype].descr; }

/* ------------------------------------------------------------------ write */

dga_status dga_npy_write(const char *path, dga_npy_dtype dtype, int ndim, const int64_t *shape,
                         const void *data)
{
    if ((int)dtype < 0 || (int)dtype >= NDTYPES)
        return dga_fail(DGA_ERR_INVALID, "%s: unknown npy dtype %d", path, (int)dtype);
    if (ndim < 0 || ndim > DGA_NPY_MAX_DIMS)
        return dga_fail(DGA_ERR_INVALID, "%s: %d dimensions (expected 0..%d)", path, ndim,
                        DGA_NPY_MAX_DIMS);
    char head[512];
    int len = snprintf(head, sizeof head, "{'descr': '%s', 'fortran_order': False, 'shape': (",
                       dtypes[dtype].descr);
    int64_t numel = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0)
            return dga_fail(DGA_ERR_INVALID, "%s: negative dimension %lld", path,
                            (long long)shape[i]);
        numel *= shape[i];
        len += snprintf(head + len, sizeof head - (size_t)len, "%s%lld", i ? ", " : "",
                        (long long)shape[i]);
    }
    len += snprintf(head + len, sizeof head - (size_t)len, "%s), }", ndim == 1 ? "," : "");
    /* Pad with spaces so the data starts on a 64-byte boundary (the format's rule). */
    size_t total = 10 + (size_t)len + 1;
    size_t padded = (total + 63) / 64 * 64;
    unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, 0, 0};
    size_t hlen = padded - 10;
    pre[8] = (unsigned char)(hlen & 0xff);
    pre[9] = (unsigned char)(hlen >> 8);
    memset(head + len, ' ', hlen - 1 - (size_t)len);
    head[hlen - 1] = '\n';
    const void *parts[3] = {pre, head, data};
    size_t sizes[3] = {sizeof pre, hlen, (size_t)numel * dtypes[dtype].size};
    return dga_write_file_atomic(path, 3, parts, sizes);
}

/* ------------------------------------------------------------------ header parsing */

static const char *skip_ws(const char *p, const char *end)
{
    while (p < end && isspace((unsigned char)*p)) p++;
    return p;
}

/* Finds `'key'` followed by ':' and returns a pointer to the value (whitespace skipped). */
static const char *find_key(const char *h, const char *end, const char *key)
{
    size_t kl = strlen(key);
    for (const char *p = h; p + kl + 2 <= end; p++) {
        if ((*p == '\'' || *p == '"') && memcmp(p + 1, key, kl) == 0 && p[kl + 1] == *p) {
            const char *q = skip_ws(p + kl + 2, end);
            if (q < end && *q == ':') {
                q = skip_ws(q + 1, end);
                return q < end ? q : NULL;   /* the header may end the buffer: no *end */
            }
        }
    }
    return NULL;
}

dga_status dga_npy_parse_header(const char *path, const unsigned char *buf, size_t size,
                                dga_npy *out, size_t *data_offset)
{
    memset(out, 0, sizeof *out);
    if (size < 10 || memcmp(buf, "\x93NUMPY", 6) != 0)
        return dga_fail(DGA_ERR_FORMAT, "%s: not a .npy file (missing \\x93NUMPY magic)", path);
    int major = buf[6];
    size_t hlen, start;
    if (major == 1) {
        hlen = (size_t)buf[8] | (size_t)buf[9] << 8;
        start = 10;
    } else if (major == 2 || major == 3) {
        if (size < 12) return dga_fail(DGA_ERR_FORMAT, "%s: truncated .npy header", path);
        hlen = (size_t)buf[8] | (size_t)buf[9] << 8 | (size_t)buf[10] << 16 | (size_t)buf[11] << 24;
        start = 12;
    } else {
        return dga_fail(DGA_ERR_FORMAT, "%s: unsupported .npy format version %d.%d", path, major,
                        buf[7]);
    }
    if (start + hlen > size)
        return dga_fail(DGA_ERR_FORMAT,
                        "%s: truncated .npy header (header says %zu bytes, file has %zu)", path,
                        hlen, size - start);
    const char *h = (const char *)buf + start, *end = h + hlen;

    const char *v = find_key(h, end, "descr");
    if (!v || (*v != '\'' && *v != '"'))
        return dga_fail(DGA_ERR_FORMAT, "%s: .npy header has no 'descr' string", path);
    const char *ve = memchr(v + 1, *v, (size_t)(end - v - 1));
    if (!ve) return dga_fail(DGA_ERR_FORMAT, "%s: .npy header: unterminated 'descr'", path);
    size_t dl = (size_t)(ve - v - 1);
    int dt = -1;
    for (int i = 0; i < NDTYPES; i++)
        if (strlen(dtypes[i].descr) == dl && memcmp(dtypes[i].descr, v + 1, dl) == 0) dt = i;
    /* One-byte types may be written with either byte-order mark. */
    if (dt < 0 && dl == 3 && memcmp(v + 1, "<u1", 3) == 0) dt = DGA_NPY_U8;
    if (dt < 0)
        return dga_fail(DGA_ERR_FORMAT,
                        "%s: unsupported .npy dtype '%.*s' (expected one of <f4 <i4 <i8 <u2 <u8 "
                        "|u1, little-endian)",
                        path, (int)dl, v + 1);
    out->dtype = (dga_npy_dtype)dt;

    v = find_key(h, end, "fortran_order");
    if (!v) return dga_fail(DGA_ERR_FORMAT, "%s: .npy header has no 'fortran_order'", path);
    if ((size_t)(end - v) >= 4 && memcmp(v, "True", 4) == 0)
        return dga_fail(DGA_ERR_FORMAT, "%s: Fortran-order .npy arrays are not supported", path);
    if ((size_t)(end - v) < 5 || memcmp(v, "False", 5) != 0)
        return dga_fail(DGA_ERR_FORMAT, "%s: .npy header: 'fortran_order' is not False", path);

    v = find_key(h, end, "shape");
    if (!v || *v != '(')
        return dga_fail(DGA_ERR_FORMAT, "%s: .npy header has no 'shape' tuple", path);
    const char *p = v + 1;
    int64_t numel = 1;
    for (;;) {
        p = skip_ws(p, end);
        if (p >= end) return dga_fail(DGA_ERR_FORMAT, "%s: .npy header: unterminated shape", path);
        if (*p == ')') break;
        if (!isdigit((unsigned char)*p))
            return dga_fail(DGA_ERR_FORMAT, "%s: .npy header: bad shape entry at '%.*s'", path,
                            (int)(end - p < 10 ? end - p : 10), p);
        if (out->ndim == DGA_NPY_MAX_DIMS)
            return dga_fail(DGA_ERR_FORMAT, "%s: .npy array has more than %d dimensions", path,
                            DGA_NPY_MAX_DIMS);
        int64_t d = 0;
        while (p < end && isdigit((unsigned char)*p)) {
            if (d > (INT64_MAX - 9) / 10)
                return dga_fail(DGA_ERR_FORMAT, "%s: .npy shape entry too large", path);
            d = d * 10 + (*p++ - '0');
        }
        while (p < end && (*p == 'L' || *p == 'l')) p++;   /* Python 2 longs */
        if (d > 0 && numel > INT64_MAX / d)
            return dga_fail(DGA_ERR_FORMAT, "%s: .npy shape too large", path);
        numel *= d;
        out->shape[out->ndim++] = d;
        p = skip_ws(p, end);
        if (p < end && *p == ',') p++;
    }
    out->numel = numel;
    *data_offset = start + hlen;
    return DGA_OK;
}

static dga_status check_size(const char *path, const dga_npy *a, size_t data_bytes)
{
    if ((uint64_t)a->numel > SIZE_MAX / dtypes[a->dtype].size)
        return dga_fail(DGA_ERR_FORMAT, "%s: .npy shape too large (%lld elements)", path,
                        (long long)a->numel);
    size_t need = (size_t)a->numel * dtypes[a->dtype].size;
    if (data_bytes < need)
        return dga_fail(DGA_ERR_FORMAT,
                        "%s: truncated .npy file: shape needs %zu data bytes, file has %zu", path,
                        need, data_bytes);
    if (data_bytes > need)
        return dga_fail(DGA_ERR_FORMAT,
                        "%s: .npy file has %zu bytes of data, shape needs %zu (trailing garbage)",
                        path, data_bytes, need);
    return DGA_OK;
}

/* ------------------------------------------------------------------ read / map */

dga_status dga_npy_map(const char *path, dga_npy *out)
{
    memset(out, 0, sizeof *out);
    int fd;
    dga_status ost = dga_open_regular(path, &fd);
    if (ost != DGA_OK) return ost;
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        dga_status st = dga_fail_errno(DGA_ERR_IO, "%s: cannot stat", path);
        close(fd);
        return st;
    }
    size_t size = (size_t)sb.st_size;
    if (size < 10) {
        close(fd);
        return dga_fail(DGA_ERR_FORMAT, "%s: truncated .npy file (%zu bytes)", path, size);
    }
    void *base = mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    if (base == MAP_FAILED) return dga_fail_errno(DGA_ERR_IO, "%s: cannot mmap", path);
    size_t off;
    dga_npy a;
    dga_status st = dga_npy_parse_header(path, base, size, &a, &off);
    if (st == DGA_OK) st = check_size(path, &a, size - off);
    if (st != DGA_OK) {
        munmap(base, size);
        return st;
    }
    a.data = (char *)base + off;
    a.map_base = base;
    a.map_size = size;
    *out = a;
    return DGA_OK;
}

dga_status dga_npy_read(const char *path, dga_npy *out)
{
    dga_npy m;
    dga_status st = dga_npy_map(path, &m);
    if (st != DGA_OK) {
        memset(out, 0, sizeof *out);
        return st;
    }
    size_t bytes = (size_t)m.numel * dtypes[m.dtype].size;
    void *copy = malloc(bytes ? bytes : 1);
    if (!copy) {
        dga_npy_free(&m);
        memset(out, 0, sizeof *out);
        return dga_fail(DGA_ERR_NOMEM, "%s: cannot allocate %zu bytes", path, bytes);
    }
    memcpy(copy, m.data, bytes);
    *out = m;
    out->data = copy;
    out->map_base = NULL;
    out->map_size = 0;
    munmap(m.map_base, m.map_size);
    return DGA_OK;
}

dga_status dga_npy_map_expect(const char *path, dga_npy_dtype dtype, int ndim, dga_npy *out)
{
    dga_status st = dga_npy_map(path, out);
    if (st != DGA_OK) return st;
    if (out->dtype != dtype || out->ndim != ndim) {
        st = dga_fail(DGA_ERR_FORMAT, "%s: expected a %d-D '%s' array, found a %d-D '%s' array",
                      path, ndim, dtypes[dtype].descr, out->ndim, dtypes[out->dtype].descr);
        dga_npy_free(out);
    }
    return st;
}

void dga_npy_free(dga_npy *a)
{
    if (!a) return;
    if (a->map_base)
        munmap(a->map_base, a->map_size);
    else
        free(a->data);
    memset(a, 0, sizeof *a);
}
