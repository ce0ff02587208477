/* CRC-32 of a store's files (store_crc.h). */
#include "store_crc.h"

#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "fileio.h"

#define CRC_CHUNK ((size_t)1 << 20)

static dga_status file_crc(const char *path, uint32_t *out)
{
    int fd;
    dga_status st = dga_open_regular(path, &fd);
    if (st != DGA_OK) return st;
    unsigned char *buf = malloc(CRC_CHUNK);
    if (!buf) {
        close(fd);
        return dga_fail(DGA_ERR_NOMEM, "%s: out of memory for its checksum", path);
    }
    uLong crc = crc32(0L, Z_NULL, 0);
    for (;;) {
        ssize_t r = read(fd, buf, CRC_CHUNK);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            st = dga_fail_errno(DGA_ERR_IO, "%s: read failed", path);
            break;
        }
        if (r == 0) break;
        crc = crc32(crc, buf, (uInt)r);
    }
    free(buf);
    close(fd);
    *out = (uint32_t)crc;
    return st;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

dga_status dga_store_checksums_make(const char *dir, json_t **out)
{
    *out = NULL;
    DIR *d = opendir(dir);
    if (!d) return dga_fail_errno(DGA_ERR_IO, "%s: cannot list the store to checksum it", dir);
    char **names = NULL;
    size_t n = 0, cap = 0;
    dga_status st = DGA_OK;
    struct dirent *e;
    char path[4096];
    while (st == DGA_OK && (e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.' || !strcmp(e->d_name, "manifest.json")) continue;
        struct stat sb;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (stat(path, &sb) != 0 || !S_ISREG(sb.st_mode)) continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 32;
            char **grown = realloc(names, cap * sizeof *grown);
            if (!grown) { st = dga_fail(DGA_ERR_NOMEM, "%s: out of memory", dir); break; }
            names = grown;
        }
        if (!(names[n] = strdup(e->d_name))) st = dga_fail(DGA_ERR_NOMEM, "%s: out of memory", dir);
        else n++;
    }
    closedir(d);
    if (n > 1) qsort(names, n, sizeof *names, cmp_str);
    json_t *sums = st == DGA_OK ? json_object() : NULL;
    for (size_t i = 0; i < n && st == DGA_OK; i++) {
        uint32_t crc;
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        st = file_crc(path, &crc);
        char hex[9];
        snprintf(hex, sizeof hex, "%08x", (unsigned)crc);
        if (st == DGA_OK) json_object_set_new(sums, names[i], json_string(hex));
    }
    for (size_t i = 0; i < n; i++) free(names[i]);
    free(names);
    if (st != DGA_OK) {
        json_decref(sums);
        return st;
    }
    *out = sums;
    return DGA_OK;
}

dga_status dga_store_checksums_verify(const char *dir, const char *mpath, json_t *sums)
{
    if (!json_is_object(sums) || json_object_size(sums) == 0)
        return dga_fail(DGA_ERR_FORMAT, "%s: field 'checksums': expected an object of file CRC-32s", mpath);
    const char *name;
    json_t *v;
    char path[4096];
    json_object_foreach(sums, name, v) {
        unsigned want;
        char extra;
        if (!*name || strchr(name, '/') || name[0] == '.')
            return dga_fail(DGA_ERR_FORMAT, "%s: field 'checksums': '%s' is not a file of the store", mpath, name);
        if (!json_is_string(v) || strlen(json_string_value(v)) != 8 ||
            sscanf(json_string_value(v), "%8x%c", &want, &extra) != 1)
            return dga_fail(DGA_ERR_FORMAT, "%s: field 'checksums'.'%s': expected 8 hex digits", mpath, name);
        int len = snprintf(path, sizeof path, "%s/%s", dir, name);
        if (len < 0 || (size_t)len >= sizeof path) return dga_fail(DGA_ERR_INVALID, "%s: path too long", dir);
        uint32_t got;
        dga_status st = file_crc(path, &got);
        if (st != DGA_OK)
            return dga_fail_wrap(DGA_ERR_FORMAT, "%s: the store is incomplete (its manifest lists %s); rebuild it",
                                 dir, name);
        if (got != want)
            return dga_fail(DGA_ERR_FORMAT, "%s: checksum mismatch (CRC-32 %08x, manifest.json says %08x): the "
                            "store is damaged; rebuild it (build_store.lua, or remove it from the cache)",
                            path, (unsigned)got, want);
    }
    return DGA_OK;
}
