/* safetensors files (https://huggingface.co/docs/safetensors): read and write.
 *
 * Layout: an 8-byte little-endian header length N, N bytes of JSON (padded with spaces to a
 * multiple of 8), then the data section. The JSON maps each tensor name to
 * {"dtype", "shape", "data_offsets": [begin, end]} (byte offsets into the data section) and
 * may hold "__metadata__": {string: string}. Tensors cover the data section exactly: no
 * gaps, no overlap.
 *
 * The writer orders tensors by decreasing element size (then name), as the reference
 * implementation does, so every tensor starts aligned to its element size; it writes
 * atomically (<path>.tmp.<pid>, fsync, rename). The reader loads the whole file and rejects
 * every malformation with DGA_ERR_FORMAT and a message naming the file and the problem. */
#ifndef DGA_SAFETENSORS_H
#define DGA_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "status.h"

typedef enum { DGA_ST_F32 = 0, DGA_ST_I32, DGA_ST_U8, DGA_ST_I64 } dga_st_dtype;

#define DGA_ST_MAX_DIMS 8

typedef struct {
    const char  *name;
    dga_st_dtype dtype;
    int          ndim;                     /* 0 (a scalar) .. DGA_ST_MAX_DIMS */
    int64_t      shape[DGA_ST_MAX_DIMS];
    const void  *data;                     /* numel * element size bytes (little-endian) */
} dga_st_entry;

typedef struct {
    const char *key;
    const char *value;
} dga_st_meta;

size_t      dga_st_dtype_size(dga_st_dtype dtype);
const char *dga_st_dtype_name(dga_st_dtype dtype);   /* "F32", "I32", "U8", "I64" */
int64_t     dga_st_entry_numel(const dga_st_entry *e);
size_t      dga_st_entry_nbytes(const dga_st_entry *e);

/* Writes n entries and n_meta metadata pairs to path, atomically: on any failure the file
 * at path (if any) is left as it was and the temporary file is removed. Names must be
 * unique, non-empty and not "__metadata__"; an entry with data == NULL and a non-zero size
 * fails while the data is written (after the temporary file was opened). */
dga_status dga_safetensors_write(const char *path, const dga_st_entry *entries, int n,
                                 const dga_st_meta *meta, int n_meta);

/* As dga_safetensors_write, plus the metadata pair crc_key = CRC-32 (zlib) of the data
 * section as 8 hex digits, so that a reader can tell a damaged payload from a valid one
 * (dga_safetensors_check_crc). crc_key NULL: no checksum. */
dga_status dga_safetensors_write_crc(const char *path, const dga_st_entry *entries, int n,
                                     const dga_st_meta *meta, int n_meta, const char *crc_key);

typedef struct dga_safetensors dga_safetensors;

dga_status dga_safetensors_open(const char *path, dga_safetensors **out);
void       dga_safetensors_close(dga_safetensors *st);            /* NULL is fine */
const char *dga_safetensors_path(const dga_safetensors *st);
/* Entries in data order; their data points into the loaded file (valid until close, and
 * not necessarily aligned for foreign files: copy with memcpy). */
int        dga_safetensors_count(const dga_safetensors *st);
const dga_st_entry *dga_safetensors_entry(const dga_safetensors *st, int i);
const dga_st_entry *dga_safetensors_find(const dga_safetensors *st, const char *name);
int        dga_safetensors_meta_count(const dga_safetensors *st);
const dga_st_meta *dga_safetensors_meta_at(const dga_safetensors *st, int i);
const char *dga_safetensors_meta(const dga_safetensors *st, const char *key); /* NULL if absent */
/* DGA_OK if metadata crc_key holds the CRC-32 of the data section; DGA_ERR_FORMAT naming the
 * file if it is absent or differs. */
dga_status dga_safetensors_check_crc(const dga_safetensors *st, const char *crc_key);

#endif
