/* Fuzz target: the MMLU CSV reader on arbitrary bytes, then the prompt renderer on whatever
 * rows it accepted. Any input must give DGA_OK or an error status: never a crash, a leak or
 * an out-of-bounds read. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mmlu.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    dga_mmlu_question *qs = NULL;
    size_t n = 0;
    dga_status st = dga_mmlu_parse_csv("fuzz.csv", data, size, "fuzz_subject", &qs, &n);
    if (st != DGA_OK && strstr(dga_last_error(), "fuzz.csv") == NULL) abort();   /* file named */
    for (size_t i = 0; i < n; i++) {
        if (qs[i].answer < 0 || qs[i].answer > 3 || qs[i].line < 1) abort();
        char *text = NULL;
        if (dga_mmlu_render(&qs[i], qs, i < 5 ? (int)i : 5, 1, &text) == DGA_OK) free(text);
    }
    dga_mmlu_questions_free(qs, n);
    return 0;
}
