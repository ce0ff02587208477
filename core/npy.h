/* NumPy .npy files (format versions 1.0 and 2.0 read, 1.0 written), little-endian, C order.
 *
 * Embeddings, centroids, histograms and every array of the domain store are .npy files, so
 * `numpy.load` reads them as they are. Supported element types: '<f4', '<i4', '<i8', '<u2',
 * '<u8' ('|u1' too, for bytes). Reading either copies the data into memory (dga_npy_read) or
 * maps the file read-only (dga_npy_map, used by the domain store for multi-GB token arrays);
 * both validate the header and check that the file holds exactly the bytes its shape needs,
 * so a truncated file is a clear error, not a crash later. Writing is atomic
 * (<path>.tmp.<pid>, fsync, rename). */
#ifndef DGA_NPY_H
#define DGA_NPY_H

#include <stddef.h>
#include <stdint.h>

#include "status.h"

typedef enum {
    DGA_NPY_F32 = 0,   /* '<f4' */
    DGA_NPY_I32,       /* '<i4' */
    DGA_NPY_I64,       /* '<i8' */
    DGA_NPY_U16,       /* '<u2' */
    DGA_NPY_U64,       /* '<u8' */
    DGA_NPY_U8,        /* '|u1' */
} dga_npy_dtype;

#define DGA_NPY_MAX_DIMS 8

typedef struct {
    dga_npy_dtype dtype;
    int           ndim;                       /* 0 for a scalar */
    int64_t       shape[DGA_NPY_MAX_DIMS];
    int64_t       numel;
    void         *data;                       /* numel elements */
    /* private: how data is owned */
    void         *map_base;
    size_t        map_size;
} dga_npy;

size_t      dga_npy_dtype_size(dga_npy_dtype dtype);
const char *dga_npy_dtype_descr(dga_npy_dtype dtype);   /* "<f4", ... */

/* Writes an array atomically. */
dga_status dga_npy_write(const char *path, dga_npy_dtype dtype, int ndim, const int64_t *shape,
                         const void *data);

/* Reads a whole file into malloc'd memory. On failure *out is zeroed. Free with dga_npy_free. */
dga_status dga_npy_read(const char *path, dga_npy *out);
/* Maps a file read-only; data points into the mapping. Free with dga_npy_free. */
dga_status dga_npy_map(const char *path, dga_npy *out);
/* Parses a header from the first `size` bytes of a file named `path` (for messages): fills
 * dtype/ndim/shape/numel and *data_offset. Checks nothing about the data that follows. */
dga_status dga_npy_parse_header(const char *path, const unsigned char *buf, size_t size,
                                dga_npy *out, size_t *data_offset);
/* Like dga_npy_map, and also an error unless the array has the given dtype and ndim
 * (`what` names the array in messages). */
dga_status dga_npy_map_expect(const char *path, dga_npy_dtype dtype, int ndim, dga_npy *out);
void       dga_npy_free(dga_npy *a);

#endif
