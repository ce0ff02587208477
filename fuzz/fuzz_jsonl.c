/* Fuzz target: the JSON Lines reader on arbitrary bytes (as a .jsonl file and as a .txt
 * file), then the BPE tokenizer on the same bytes: encode/decode must round-trip exactly.
 * Any input must give DGA_OK or an error status: never a crash, a leak or a bad read. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bpe.h"
#include "jsonl.h"

static char jsonl_path[256], txt_path[256];
static dga_bpe *tok;

static void write_file(const char *path, const uint8_t *data, size_t size)
{
    FILE *f = fopen(path, "wb");
    if (!f) abort();
    if (size && fwrite(data, 1, size, f) != size) abort();
    fclose(f);
}

static int check_doc(const dga_text_doc *d, void *ud)
{
    size_t *bytes = ud;
    if (!d->text || d->line < 1 || !d->file) abort();
    if (!dga_utf8_valid(d->text, d->len, NULL)) abort();   /* only valid UTF-8 is delivered */
    *bytes += d->len;
    return 0;
}

static void setup(void)
{
    const char *dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(jsonl_path, sizeof jsonl_path, "%s/fuzz_jsonl_%ld.jsonl", dir, (long)getpid());
    snprintf(txt_path, sizeof txt_path, "%s/fuzz_jsonl_%ld.txt", dir, (long)getpid());
    const char *texts[] = {"the theme of the thesis: there, then, these thermal themes 1234 ...",
                           "  indented  code(x) == y; // comment\n\n\tthe end's near"};
    size_t lens[] = {strlen(texts[0]), strlen(texts[1])};
    if (dga_bpe_train(texts, lens, 2, 400, &tok) != DGA_OK) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!tok) setup();
    dga_text_stats st;
    size_t bytes = 0;
    write_file(jsonl_path, data, size);
    if (dga_text_foreach(jsonl_path, check_doc, &bytes, &st) != DGA_OK) abort();
    if (st.docs + st.skipped + st.blank != st.lines) abort();
    if (st.bytes != bytes) abort();
    write_file(txt_path, data, size);
    if (dga_text_foreach(txt_path, check_doc, &bytes, &st) != DGA_OK) abort();
    if (st.docs + st.skipped != 1) abort();
    unlink(jsonl_path);
    unlink(txt_path);

    int32_t *ids = malloc((size + 1) * sizeof *ids);
    size_t n;
    if (!ids || dga_bpe_encode(tok, (const char *)data, size, ids, size, &n) != DGA_OK) abort();
    char *back;
    size_t len;
    if (dga_bpe_decode(tok, ids, n, &back, &len) != DGA_OK) abort();
    if (len != size || (size && memcmp(back, data, size) != 0)) abort();
    free(back);
    free(ids);
    return 0;
}
