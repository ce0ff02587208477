/* Fuzz target: the token-shard reader and the tokenizer.json loader on arbitrary files.
 * A shard that reads must agree with its header; a tokenizer that loads must round-trip
 * text. Any input must give DGA_OK or an error status: never a crash, a leak or a bad read. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bpe.h"
#include "shard.h"

static char path[256];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!path[0]) {
        const char *dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
        snprintf(path, sizeof path, "%s/fuzz_shard_%ld.bin", dir, (long)getpid());
    }
    FILE *f = fopen(path, "wb");
    if (!f) abort();
    if (size && fwrite(data, 1, size, f) != size) abort();
    fclose(f);

    int32_t *tokens = NULL;
    size_t n = 0;
    dga_shard_info info;
    if (dga_shard_read(path, &tokens, &n, &info) == DGA_OK) {
        if (n != info.n_tokens) abort();
        if ((size_t)DGA_SHARD_HEADER_BYTES + n * (size_t)info.token_bytes != size) abort();
        for (size_t i = 0; i < n; i++)
            if (tokens[i] < 0 || (info.vocab_size && tokens[i] >= info.vocab_size)) abort();
        free(tokens);
    } else if (tokens || n) {
        abort();
    }

    dga_bpe *tok = NULL;
    if (dga_bpe_load(path, &tok) == DGA_OK) {
        static const char s[] = "fuzzing the loader: \xff\x00 bytes";
        size_t len = sizeof s - 1;
        int32_t ids[64];
        size_t m;
        char *back;
        size_t blen;
        if (dga_bpe_encode(tok, s, len, ids, 64, &m) != DGA_OK) abort();
        if (dga_bpe_decode(tok, ids, m, &back, &blen) != DGA_OK) abort();
        if (blen != len || memcmp(back, s, len) != 0) abort();
        free(back);
        dga_bpe_free(tok);
    } else if (tok) {
        abort();
    }
    unlink(path);
    return 0;
}
