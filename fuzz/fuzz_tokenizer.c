/* Fuzz target: the tokenizer.json loader on arbitrary files. A tokenizer that loads must
 * encode any bytes into ids below its vocabulary and decode them back to the same bytes.
 * Any input must give DGA_OK or an error naming the file: never a crash, a leak or a hang. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bpe.h"

static char path[256];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!path[0]) {
        const char *dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
        snprintf(path, sizeof path, "%s/fuzz_tokenizer_%ld.json", dir, (long)getpid());
    }
    FILE *f = fopen(path, "wb");
    if (!f) abort();
    if (size && fwrite(data, 1, size, f) != size) abort();
    fclose(f);

    dga_bpe *tok = NULL;
    dga_status s = dga_bpe_load(path, &tok);
    if (s != DGA_OK) {
        if (tok || !strstr(dga_last_error(), path)) abort();
    } else {
        /* The input's own bytes are a text the merges were likely written for. */
        static const char extra[] = " the fuzzer: \xff\x00 caf\xc3\xa9";
        size_t len = size < 512 ? size : 512;
        char *text = malloc(len + sizeof extra);
        if (!text) abort();
        memcpy(text, data, len);
        memcpy(text + len, extra, sizeof extra - 1);
        len += sizeof extra - 1;
        int32_t *ids = malloc((len + 1) * sizeof *ids);
        size_t m = 0;
        char *back = NULL;
        size_t blen = 0;
        if (!ids || dga_bpe_encode(tok, text, len, ids, len + 1, &m) != DGA_OK) abort();
        for (size_t i = 0; i < m; i++)
            if (ids[i] < 0 || ids[i] >= dga_bpe_vocab_size(tok)) abort();
        if (dga_bpe_decode(tok, ids, m, &back, &blen) != DGA_OK) abort();
        if (blen != len || memcmp(back, text, len) != 0) abort();
        free(back);
        free(ids);
        free(text);
        dga_bpe_free(tok);
    }
    unlink(path);
    return 0;
}
