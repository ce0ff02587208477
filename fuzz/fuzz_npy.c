/* Fuzz target: the .npy header parser, reader and mapper on arbitrary files. An array that
 * reads must fit the file exactly as its header says, and the two ways of reading must
 * agree. Any input must give DGA_OK or an error naming the file: never a crash or a leak. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "npy.h"

static char path[256];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!path[0]) {
        const char *dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
        snprintf(path, sizeof path, "%s/fuzz_npy_%ld.npy", dir, (long)getpid());
    }
    dga_npy h;
    size_t off = 0;
    dga_status hs = dga_npy_parse_header(path, data, size, &h, &off);
    if (hs != DGA_OK && !strstr(dga_last_error(), path)) abort();
    if (hs == DGA_OK && (off > size || h.numel < 0)) abort();

    FILE *f = fopen(path, "wb");
    if (!f) abort();
    if (size && fwrite(data, 1, size, f) != size) abort();
    fclose(f);
    dga_npy a, b;
    dga_status sa = dga_npy_read(path, &a);
    if (sa != DGA_OK && !strstr(dga_last_error(), path)) abort();
    dga_status sb = dga_npy_map(path, &b);
    if (sb != DGA_OK && !strstr(dga_last_error(), path)) abort();
    if ((sa == DGA_OK) != (sb == DGA_OK)) abort();
    if (sa == DGA_OK) {
        size_t nb = (size_t)a.numel * dga_npy_dtype_size(a.dtype);
        if (hs != DGA_OK || off + nb != size) abort();
        if (a.numel != b.numel || a.dtype != b.dtype || a.ndim != b.ndim) abort();
        if (nb && memcmp(a.data, b.data, nb) != 0) abort();
        if (nb && memcmp(a.data, data + off, nb) != 0) abort();
        dga_npy_free(&a);
        dga_npy_free(&b);
    }
    unlink(path);
    return 0;
}
