/* MMLU (Hendrycks et al.): reading the original CSV release, the paper's splits, and the
 * prompt text lm-evaluation-harness builds from a question.
 *
 * Layout: DIR/{dev,val,test}/SUBJECT_{split}.csv, no header, columns question,A,B,C,D,answer
 * (answer one of A-D). Subjects are those with a file in DIR/test, sorted by name (strcmp);
 * each must also have its dev and val files. Within a split, questions are ordered by subject,
 * then by row. Fields are kept verbatim (libcsv with no space trimming). */
#ifndef DGA_MMLU_H
#define DGA_MMLU_H

#include <stddef.h>
#include <stdint.h>

#include "status.h"

typedef enum { DGA_MMLU_DEV = 0, DGA_MMLU_VAL = 1, DGA_MMLU_TEST = 2 } dga_mmlu_split;

typedef struct {
    const char *subject;      /* "abstract_algebra" */
    const char *question;
    const char *choices[4];
    int         answer;       /* 0..3 for A..D */
    int         line;         /* line of the CSV where the row starts (0 if not from a file) */
} dga_mmlu_question;

typedef struct dga_mmlu dga_mmlu;

/* Reads the whole release. A missing directory or file is DGA_ERR_IO naming the path; a row
 * with a column count other than 6, an answer other than A-D or an unterminated quote is
 * DGA_ERR_FORMAT naming the file and the line where the row starts. */
dga_status dga_mmlu_load(const char *dir, dga_mmlu **out);
void       dga_mmlu_free(dga_mmlu *mm);                       /* NULL is fine */

int         dga_mmlu_num_subjects(const dga_mmlu *mm);
const char *dga_mmlu_subject(const dga_mmlu *mm, int i);      /* 0-based, sorted */
size_t      dga_mmlu_count(const dga_mmlu *mm, dga_mmlu_split split);
/* The split's questions, ordered by subject then row; owned by mm. */
const dga_mmlu_question *dga_mmlu_questions(const dga_mmlu *mm, dga_mmlu_split split);

/* The paper's MMLU_a / MMLU_b: for every subject, the indices (into the test split) of its
 * test questions are shuffled by a dga_rng seeded with seed ^ fnv1a64(subject name) (so a
 * subject's halves do not depend on which other subjects are present); the first
 * floor(n/2) go to a, the rest to b. Each half is returned in test order (ascending index).
 * *a and *b are malloc'd; the caller frees them. MMLU_dev is simply the dev split. */
dga_status dga_mmlu_split_ab(const dga_mmlu *mm, uint64_t seed, size_t **a, size_t *n_a,
                             size_t **b, size_t *n_b);

/* Parses one subject file held in memory (the loader and the fuzz target use it). `name`
 * appears in error messages; `subject` is stored (not copied) in every question. Rows are
 * appended to *qs (realloc'd; *n updated); on failure the rows already appended stay valid
 * and must still be freed with dga_mmlu_questions_free. */
dga_status dga_mmlu_parse_csv(const char *name, const void *data, size_t len,
                              const char *subject, dga_mmlu_question **qs, size_t *n);
/* Frees the strings of n parsed questions (not `subject`) and the array. */
void       dga_mmlu_questions_free(dga_mmlu_question *qs, size_t n);

/* The prompt exactly as lm-evaluation-harness's MMLU task (hendrycks format):
 *   "The following are multiple choice questions (with answers) about <subject, '_' -> ' '>.\n\n"
 * once, then for each shot "<question>\nA. <a>\nB. <b>\nC. <c>\nD. <d>\nAnswer: <X>\n\n", then
 * the question in the same form ending "Answer:" (plus " <X>" when with_answer). As the
 * harness does ({{question.strip()}}), questions are stripped of surrounding whitespace;
 * choices are verbatim. *out is malloc'd. */
dga_status dga_mmlu_render(const dga_mmlu_question *q, const dga_mmlu_question *shots,
                           int n_shots, int with_answer, char **out);

#endif
