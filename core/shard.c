/* llm.c-style token shards: validated reading, atomic writing. */
#include "shard.h"
#include "fileio.h"
#include "stale.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* The header is little-endian on disk; convert explicitly so a big-endian host still reads
 * the same files. */
static void put_le32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)v;
    p[1] = (unsigned char)(v >> 8);
    p[2] = (unsigned char)(v >> 16);
    p[3] = (unsigned char)(v >> 24);
}

static uint32_t get_le32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

dga_status dga_shard_write(const char *path, const int32_t *tokens, size_t n, int vocab_size)
{
    if (vocab_size < 1)
        return dga_fail(DGA_ERR_INVALID, "%s: vocabulary size %d (expected >= 1)", path,
                        vocab_size);
    if (n > DGA_SHARD_MAX_TOKENS)
        return dga_fail(DGA_ERR_INVALID, "%s: %zu tokens do not fit one shard (at most %u)",
                        path, n, DGA_SHARD_MAX_TOKENS);
    if (n > 0 && !tokens) return dga_fail(DGA_ERR_INVALID, "%s: no token array", path);
    dga_stale_remove(path, NULL);
    for (size_t i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= vocab_size)
            return dga_fail(DGA_ERR_INVALID,
                            "%s: token %d at index %zu outside vocabulary [0, %d)", path,
                            tokens[i], i, vocab_size);
    int version = vocab_size <= 65536 ? 1 : 2;
    size_t width = version == 1 ? 2 : 4;

    unsigned char header[DGA_SHARD_HEADER_BYTES];
    memset(header, 0, sizeof header);
    put_le32(header + 0, DGA_SHARD_MAGIC);
    put_le32(header + 4, (uint32_t)version);
    put_le32(header + 8, (uint32_t)n);
    put_le32(header + 12, (uint32_t)vocab_size);

    dga_atomic_file af;
    dga_status st = dga_atomic_file_open(path, &af);
    if (st == DGA_OK) st = dga_atomic_file_write(&af, header, sizeof header);
    /* Convert in blocks so a large shard needs no second full-size buffer. */
    unsigned char block[1 << 16];
    size_t per = sizeof block / width;
    for (size_t i = 0; st == DGA_OK && i < n; i += per) {
        size_t m = n - i < per ? n - i : per;
        for (size_t k = 0; k < m; k++) {
            uint32_t v = (uint32_t)tokens[i + k];
            if (width == 2) {
                block[2 * k] = (unsigned char)v;
                block[2 * k + 1] = (unsigned char)(v >> 8);
            } else {
                put_le32(block + 4 * k, v);
            }
        }
        st = dga_atomic_file_write(&af, block, width * m);
    }
    if (st != DGA_OK) {
        dga_atomic_file_abort(&af);
        return st;
    }
    return dga_atomic_file_commit(&af);
}

/* Opens path and validates the header against the file size. */
static dga_status open_checked(const char *path, FILE **out, dga_shard_info *info)
{
    FILE *fp;
    dga_status ost = dga_fopen_regular(path, &fp);
    if (ost != DGA_OK) return ost;
    struct stat sb;
    if (fstat(fileno(fp), &sb) != 0) {
        dga_status st = dga_fail_errno(DGA_ERR_IO, "%s: cannot stat", path);
        fclose(fp);
        return st;
    }
    unsigned char header[DGA_SHARD_HEADER_BYTES];
    size_t got = fread(header, 1, sizeof header, fp);
    dga_status st = DGA_OK;
    if (got != sizeof header) {
        st = dga_fail(DGA_ERR_FORMAT, "%s: truncated: %zu bytes, shorter than the %d-byte header",
                      path, got, DGA_SHARD_HEADER_BYTES);
        goto fail;
    }
    uint32_t magic = get_le32(header), version = get_le32(header + 4);
    uint32_t count = get_le32(header + 8), vocab = get_le32(header + 12);
    if (magic != DGA_SHARD_MAGIC) {
        st = dga_fail(DGA_ERR_FORMAT, "%s: bad magic %u (expected %d): not a token shard", path,
                      magic, DGA_SHARD_MAGIC);
        goto fail;
    }
    if (version != 1 && version != 2) {
        st = dga_fail(DGA_ERR_FORMAT,
                      "%s: unsupported version %u (expected 1 = uint16 tokens or 2 = uint32)",
                      path, version);
        goto fail;
    }
    if (count > DGA_SHARD_MAX_TOKENS) {
        st = dga_fail(DGA_ERR_FORMAT, "%s: header says %u tokens (more than %u)", path, count,
                      DGA_SHARD_MAX_TOKENS);
        goto fail;
    }
    if (vocab > (version == 1 ? 65536u : 2147483647u)) {
        st = dga_fail(DGA_ERR_FORMAT, "%s: vocabulary size %u does not fit version %u", path,
                      vocab, version);
        goto fail;
    }
    int width = version == 1 ? 2 : 4;
    uint64_t body = (uint64_t)sb.st_size - DGA_SHARD_HEADER_BYTES;
    uint64_t holds = body / (uint64_t)width;
    if (holds < count || body % (uint64_t)width) {
        if (holds < count)
            st = dga_fail(DGA_ERR_FORMAT, "%s: truncated: header says %u tokens, file holds %llu",
                          path, count, (unsigned long long)holds);
        else
            st = dga_fail(DGA_ERR_FORMAT, "%s: %llu stray bytes after the last %d-byte token",
                          path, (unsigned long long)(body % (uint64_t)width), width);
        goto fail;
    }
    if (holds > count) {
        st = dga_fail(DGA_ERR_FORMAT,
                      "%s: header says %u tokens, but the file holds %llu (trailing data)", path,
                      count, (unsigned long long)holds);
        goto fail;
    }
    info->version = (int)version;
    info->n_tokens = count;
    info->vocab_size = (int)vocab;
    info->token_bytes = width;
    info->max_id = -1;
    *out = fp;
    return DGA_OK;
fail:
    fclose(fp);
    return st;
}

dga_status dga_shard_read_info(const char *path, dga_shard_info *info)
{
    FILE *fp;
    dga_status st = open_checked(path, &fp, info);
    if (st == DGA_OK) fclose(fp);
    return st;
}

dga_status dga_shard_read(const char *path, int32_t **tokens, size_t *n, dga_shard_info *info)
{
    *tokens = NULL;
    *n = 0;
    dga_shard_info local;
    if (!info) info = &local;
    FILE *fp;
    dga_status st = open_checked(path, &fp, info);
    if (st != DGA_OK) return st;
    size_t count = info->n_tokens, width = (size_t)info->token_bytes;
    int32_t *out = NULL;
    if (count > 0) {
        out = malloc(count * sizeof *out);
        if (!out) {
            fclose(fp);
            return dga_fail(DGA_ERR_NOMEM, "%s: out of memory for %zu tokens", path, count);
        }
    }
    unsigned char block[1 << 16];
    size_t per = sizeof block / width;
    for (size_t i = 0; i < count; i += per) {
        size_t m = count - i < per ? count - i : per;
        if (fread(block, width, m, fp) != m) {
            st = dga_fail(DGA_ERR_IO, "%s: read failed at token %zu", path, i);
            break;
        }
        for (size_t k = 0; k < m; k++) {
            uint32_t v = width == 2 ? (uint32_t)block[2 * k] | (uint32_t)block[2 * k + 1] << 8
                                    : get_le32(block + 4 * k);
            if (v > 2147483647u) {
                st = dga_fail(DGA_ERR_FORMAT, "%s: token %u at index %zu does not fit int32",
                              path, v, i + k);
                break;
            }
            if (info->vocab_size > 0 && v >= (uint32_t)info->vocab_size) {
                st = dga_fail(DGA_ERR_FORMAT,
                              "%s: token %u at index %zu outside vocabulary [0, %d)", path, v,
                              i + k, info->vocab_size);
                break;
            }
            out[i + k] = (int32_t)v;
            if ((int32_t)v > info->max_id) info->max_id = (int32_t)v;
        }
        if (st != DGA_OK) break;
    }
    fclose(fp);
    if (st != DGA_OK) {
        free(out);
        return st;
    }
    *tokens = out;
    *n = count;
    return DGA_OK;
}
