#include "mmlu.h"

#include <csv.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fileio.h"
#include "rng.h"

struct dga_mmlu {
    int                n_subjects;
    char             **subjects;
    dga_mmlu_question *q[3];
    size_t             n[3];
};

static const char *const split_names[3] = {"dev", "val", "test"};

/* ------------------------------------------------------------------ CSV reading */

#define MMLU_COLS 6

typedef struct {
    const char        *name;
    const char        *subject;
    dga_mmlu_question **qs;
    size_t            *n;
    size_t             cap;
    char              *fields[MMLU_COLS];
    int                nfields;     /* fields seen in the current row (may exceed 6) */
    int                line;        /* line of the chunk being fed (1-based, counted by '\n') */
    int                row_line;    /* line where the current row started */
    int                between;     /* no field of a new row seen yet */
    dga_status         st;          /* first failure; later rows are ignored */
} csv_state;

static void drop_fields(csv_state *s)
{
    for (int i = 0; i < MMLU_COLS; i++) {
        free(s->fields[i]);
        s->fields[i] = NULL;
    }
    s->nfields = 0;
}

static void on_field(void *data, size_t len, void *ud)
{
    csv_state *s = ud;
    if (s->between) {            /* a row that began mid-chunk (after a bare '\r') */
        s->row_line = s->line;
        s->between = 0;
    }
    if (s->st != DGA_OK) return;
    if (len && memchr(data, '\0', len)) {   /* would silently cut the field short */
        s->st = dga_fail(DGA_ERR_FORMAT, "%s: line %d: a NUL byte in field %d of the row",
                         s->name, s->line, s->nfields + 1);
        return;
    }
    if (s->nfields < MMLU_COLS) {
        char *copy = malloc(len + 1);
        if (!copy) {
            s->st = dga_fail(DGA_ERR_NOMEM, "%s: out of memory", s->name);
            return;
        }
        if (len) memcpy(copy, data, len);
        copy[len] = '\0';
        s->fields[s->nfields] = copy;
    }
    s->nfields++;
}

static void on_row(int term, void *ud)
{
    csv_state *s = ud;
    (void)term;
    s->between = 1;
    if (s->st != DGA_OK) {
        drop_fields(s);
        return;
    }
    if (s->nfields != MMLU_COLS) {
        s->st = dga_fail(DGA_ERR_FORMAT,
                         "%s: line %d: expected 6 columns (question,A,B,C,D,answer), found %d",
                         s->name, s->row_line, s->nfields);
        drop_fields(s);
        return;
    }
    const char *ans = s->fields[5];
    if (!(ans[0] >= 'A' && ans[0] <= 'D' && ans[1] == '\0')) {
        s->st = dga_fail(DGA_ERR_FORMAT, "%s: line %d: answer must be one of A, B, C, D, found \"%.20s\"",
                         s->name, s->row_line, ans);
        drop_fields(s);
        return;
    }
    if (*s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 64;
        dga_mmlu_question *grown = realloc(*s->qs, cap * sizeof *grown);
        if (!grown) {
            s->st = dga_fail(DGA_ERR_NOMEM, "%s: out of memory", s->name);
            drop_fields(s);
            return;
        }
        *s->qs = grown;
        s->cap = cap;
    }
    dga_mmlu_question *q = &(*s->qs)[(*s->n)++];
    q->subject = s->subject;
    q->question = s->fields[0];
    for (int i = 0; i < 4; i++) q->choices[i] = s->fields[1 + i];
    q->answer = ans[0] - 'A';
    q->line = s->row_line;
    free(s->fields[5]);
    for (int i = 0; i < MMLU_COLS; i++) s->fields[i] = NULL;
    s->nfields = 0;
}

/* Fields are kept verbatim: MMLU choices can end in meaningful spaces ("$30 "). */
static int never_space(unsigned char c)
{
    (void)c;
    return 0;
}

static int is_blank_line(const char *p, size_t len)
{
    return (len == 1 && p[0] == '\n') || (len == 2 && p[0] == '\r' && p[1] == '\n');
}

dga_status dga_mmlu_parse_csv(const char *name, const void *data, size_t len, const char *subject,
                              dga_mmlu_question **qs, size_t *n)
{
    struct csv_parser p;
    if (csv_init(&p, CSV_STRICT | CSV_STRICT_FINI | CSV_APPEND_NULL) != 0)
        return dga_fail(DGA_ERR_NOMEM, "%s: cannot initialise the CSV parser", name);
    csv_set_space_func(&p, never_space);
    /* libcsv grows a field's buffer by blk_size bytes at a time (128 by default), which is
     * quadratic in a long field: no field is longer than the file, up to a 1 MB step. */
    csv_set_blk_size(&p, len < ((size_t)1 << 20) ? len + 1 : (size_t)1 << 20);
    if (len >= 3 && memcmp(data, "\xEF\xBB\xBF", 3) == 0) {
        data = (const char *)data + 3;   /* a UTF-8 byte-order mark: not part of the question */
        len -= 3;
    }

    csv_state s = {.name = name, .subject = subject, .qs = qs, .n = n, .cap = *n,
                   .line = 1, .row_line = 1, .between = 1, .st = DGA_OK};
    /* The row callback cannot see byte offsets, so the input is fed one line at a time: every
     * callback then knows the line it is on, and a row's first line is the first non-blank
     * line fed while no row was open (quoted fields may span lines). */
    const char *pos = data, *end = pos + len;
    while (pos < end && s.st == DGA_OK) {
        const char *nl = memchr(pos, '\n', (size_t)(end - pos));
        size_t chunk = nl ? (size_t)(nl - pos) + 1 : (size_t)(end - pos);
        if (s.between && !is_blank_line(pos, chunk)) {
            s.row_line = s.line;
            s.between = 0;
        }
        size_t used = csv_parse(&p, pos, chunk, on_field, on_row, &s);
        if (used != chunk && s.st == DGA_OK) {
            int err = csv_error(&p);
            if (err == CSV_EPARSE)
                s.st = dga_fail(DGA_ERR_FORMAT,
                                "%s: line %d: malformed CSV (a quote inside an unquoted field, or "
                                "text after a closing quote) in the row starting at line %d",
                                name, s.line, s.row_line);
            else
                s.st = dga_fail(err == CSV_ENOMEM ? DGA_ERR_NOMEM : DGA_ERR_FORMAT,
                                "%s: line %d: %s", name, s.line, csv_strerror(err));
        }
        pos += chunk;
        if (nl) s.line++;
    }
    if (s.st == DGA_OK) {
        int open_row = !s.between;
        if (csv_fini(&p, on_field, on_row, &s) != 0 && s.st == DGA_OK)
            s.st = dga_fail(DGA_ERR_FORMAT,
                            "%s: line %d: unterminated quoted field (the row starting here runs "
                            "to the end of the file)",
                            name, open_row ? s.row_line : s.line);
    }
    drop_fields(&s);
    csv_free(&p);
    return s.st;
}

void dga_mmlu_questions_free(dga_mmlu_question *qs, size_t n)
{
    if (!qs) return;
    for (size_t i = 0; i < n; i++) {
        free((void *)qs[i].question);
        for (int j = 0; j < 4; j++) free((void *)qs[i].choices[j]);
    }
    free(qs);
}

/* ------------------------------------------------------------------ loading */

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Subjects = names of DIR/test/SUBJECT_test.csv, sorted. */
static dga_status list_subjects(const char *dir, dga_mmlu *mm)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/test", dir);
    DIR *d = opendir(path);
    if (!d)
        return dga_fail_errno(DGA_ERR_IO,
                              "%s: cannot open the MMLU test directory (expected the original "
                              "release layout DIR/{dev,val,test}/SUBJECT_{split}.csv)",
                              path);
    static const char suffix[] = "_test.csv";
    const size_t sl = sizeof suffix - 1;
    int cap = 0;
    struct dirent *e;
    dga_status st = DGA_OK;
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (len <= sl || strcmp(e->d_name + len - sl, suffix) != 0) continue;
        if (mm->n_subjects == cap) {
            cap = cap ? 2 * cap : 64;
            char **grown = realloc(mm->subjects, (size_t)cap * sizeof *grown);
            if (!grown) {
                st = dga_fail(DGA_ERR_NOMEM, "out of memory listing %s", path);
                break;
            }
            mm->subjects = grown;
        }
        char *name = strndup(e->d_name, len - sl);
        if (!name) {
            st = dga_fail(DGA_ERR_NOMEM, "out of memory listing %s", path);
            break;
        }
        mm->subjects[mm->n_subjects++] = name;
    }
    closedir(d);
    if (st != DGA_OK) return st;
    if (mm->n_subjects == 0)
        return dga_fail(DGA_ERR_IO, "%s: no SUBJECT_test.csv files (is this an MMLU release?)",
                        path);
    qsort(mm->subjects, (size_t)mm->n_subjects, sizeof *mm->subjects, cmp_str);
    return DGA_OK;
}

dga_status dga_mmlu_load(const char *dir, dga_mmlu **out)
{
    *out = NULL;
    dga_mmlu *mm = calloc(1, sizeof *mm);
    if (!mm) return dga_fail(DGA_ERR_NOMEM, "out of memory loading MMLU");
    dga_status st = list_subjects(dir, mm);
    for (int split = 0; split < 3 && st == DGA_OK; split++) {
        for (int i = 0; i < mm->n_subjects && st == DGA_OK; i++) {
            char path[4096];
            int len = snprintf(path, sizeof path, "%s/%s/%s_%s.csv", dir, split_names[split],
                               mm->subjects[i], split_names[split]);
            if (len < 0 || (size_t)len >= sizeof path) {
                st = dga_fail(DGA_ERR_INVALID, "%s: MMLU path too long", dir);
                break;
            }
            char *data = NULL;
            size_t n = 0;
            st = dga_file_read_all(path, &data, &n);
            if (st != DGA_OK) break;
            size_t before = mm->n[split];
            st = dga_mmlu_parse_csv(path, data, n, mm->subjects[i], &mm->q[split], &mm->n[split]);
            free(data);
            /* The test questions are what is scored, the dev ones the 5-shot examples and the
             * val ones a split of their own (--split val): a subject with an empty file would
             * silently be scored on nothing, or without its examples. */
            if (st == DGA_OK && mm->n[split] == before)
                st = dga_fail(DGA_ERR_FORMAT, "%s: line 1: no questions (an empty file?)", path);
        }
    }
    if (st != DGA_OK) {
        dga_mmlu_free(mm);
        return st;
    }
    *out = mm;
    return DGA_OK;
}

void dga_mmlu_free(dga_mmlu *mm)
{
    if (!mm) return;
    for (int s = 0; s < 3; s++) dga_mmlu_questions_free(mm->q[s], mm->n[s]);
    for (int i = 0; i < mm->n_subjects; i++) free(mm->subjects[i]);
    free(mm->subjects);
    free(mm);
}

int dga_mmlu_num_subjects(const dga_mmlu *mm) { return mm->n_subjects; }

const char *dga_mmlu_subject(const dga_mmlu *mm, int i)
{
    return i >= 0 && i < mm->n_subjects ? mm->subjects[i] : NULL;
}

size_t dga_mmlu_count(const dga_mmlu *mm, dga_mmlu_split split)
{
    return (unsigned)split < 3 ? mm->n[split] : 0;
}

const dga_mmlu_question *dga_mmlu_questions(const dga_mmlu *mm, dga_mmlu_split split)
{
    return (unsigned)split < 3 ? mm->q[split] : NULL;
}

/* ------------------------------------------------------------------ MMLU_a / MMLU_b */

static uint64_t fnv1a64(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 0x100000001b3ULL;
    }
    return h;
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

dga_status dga_mmlu_split_ab(const dga_mmlu *mm, uint64_t seed, size_t **a, size_t *n_a,
                             size_t **b, size_t *n_b)
{
    size_t n = mm->n[DGA_MMLU_TEST];
    const dga_mmlu_question *q = mm->q[DGA_MMLU_TEST];
    *a = *b = NULL;
    *n_a = *n_b = 0;
    size_t *ia = malloc((n ? n : 1) * sizeof *ia), *ib = malloc((n ? n : 1) * sizeof *ib);
    uint32_t *perm = malloc((n ? n : 1) * sizeof *perm);
    if (!ia || !ib || !perm) {
        free(ia);
        free(ib);
        free(perm);
        return dga_fail(DGA_ERR_NOMEM, "out of memory splitting MMLU");
    }
    size_t na = 0, nb = 0;
    /* The test split is ordered by subject, so each subject is one contiguous run. */
    for (size_t start = 0; start < n;) {
        size_t stop = start + 1;
        while (stop < n && strcmp(q[stop].subject, q[start].subject) == 0) stop++;
        size_t m = stop - start;
        for (size_t i = 0; i < m; i++) perm[i] = (uint32_t)i;
        dga_rng rng;
        dga_rng_seed(&rng, seed ^ fnv1a64(q[start].subject));
        dga_rng_shuffle_u32(&rng, perm, m);
        size_t half = m / 2;
        qsort(perm, half, sizeof *perm, cmp_u32);
        qsort(perm + half, m - half, sizeof *perm, cmp_u32);
        for (size_t i = 0; i < half; i++) ia[na++] = start + perm[i];
        for (size_t i = half; i < m; i++) ib[nb++] = start + perm[i];
        start = stop;
    }
    free(perm);
    *a = ia;
    *n_a = na;
    *b = ib;
    *n_b = nb;
    return DGA_OK;
}

/* ------------------------------------------------------------------ rendering */

typedef struct {
    char  *s;
    size_t len, cap;
    int    failed;
} strbuf;

static void sb_add(strbuf *b, const char *s, size_t n)
{
    if (b->failed) return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1) cap *= 2;
        char *grown = realloc(b->s, cap);
        if (!grown) {
            b->failed = 1;
            return;
        }
        b->s = grown;
        b->cap = cap;
    }
    memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = '\0';
}

static void sb_str(strbuf *b, const char *s) { sb_add(b, s, strlen(s)); }

/* Length of the whitespace character (Python's str.isspace) starting at p, or 0. */
static size_t space_at(const unsigned char *p, size_t n)
{
    if (n >= 1 && ((p[0] >= 0x09 && p[0] <= 0x0d) || p[0] == ' ' || (p[0] >= 0x1c && p[0] <= 0x1f)))
        return 1;
    if (n >= 2 && p[0] == 0xc2 && (p[1] == 0x85 || p[1] == 0xa0)) return 2;
    if (n >= 3 && p[0] == 0xe1 && p[1] == 0x9a && p[2] == 0x80) return 3;            /* U+1680 */
    if (n >= 3 && p[0] == 0xe2 && p[1] == 0x80 &&
        (p[2] <= 0x8a || p[2] == 0xa8 || p[2] == 0xa9 || p[2] == 0xaf))
        return 3;                                                                     /* U+2000.. */
    if (n >= 3 && p[0] == 0xe2 && p[1] == 0x81 && p[2] == 0x9f) return 3;            /* U+205F */
    if (n >= 3 && p[0] == 0xe3 && p[1] == 0x80 && p[2] == 0x80) return 3;            /* U+3000 */
    return 0;
}

/* The question stripped as Python's str.strip() would. */
static void sb_stripped(strbuf *b, const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t n = strlen(s), k;
    while (n && (k = space_at(p, n))) {
        p += k;
        n -= k;
    }
    for (;;) {
        size_t cut = 0;
        for (k = 1; k <= 3 && k <= n; k++)
            if (space_at(p + n - k, k) == k) {
                cut = k;
                break;
            }
        if (!cut) break;
        n -= cut;
    }
    sb_add(b, (const char *)p, n);
}

static void render_one(strbuf *b, const dga_mmlu_question *q, int with_answer)
{
    static const char letters[] = "ABCD";
    sb_stripped(b, q->question ? q->question : "");
    for (int i = 0; i < 4; i++) {
        char head[5] = {'\n', letters[i], '.', ' ', '\0'};
        sb_str(b, head);
        sb_str(b, q->choices[i] ? q->choices[i] : "");
    }
    sb_str(b, "\nAnswer:");
    if (with_answer) {
        char tail[3] = {' ', letters[q->answer], '\0'};
        sb_str(b, tail);
    }
}

dga_status dga_mmlu_render(const dga_mmlu_question *q, const dga_mmlu_question *shots,
                           int n_shots, int with_answer, char **out)
{
    *out = NULL;
    if (q->answer < 0 || q->answer > 3)
        return dga_fail(DGA_ERR_INVALID, "MMLU question: answer index %d outside 0..3", q->answer);
    for (int i = 0; i < n_shots; i++)
        if (shots[i].answer < 0 || shots[i].answer > 3)
            return dga_fail(DGA_ERR_INVALID, "MMLU shot %d: answer index %d outside 0..3", i + 1,
                            shots[i].answer);
    strbuf b = {0};
    sb_str(&b, "The following are multiple choice questions (with answers) about ");
    for (const char *s = q->subject ? q->subject : ""; *s; s++) sb_add(&b, *s == '_' ? " " : s, 1);
    sb_str(&b, ".\n\n");
    for (int i = 0; i < n_shots; i++) {
        render_one(&b, &shots[i], 1);
        sb_str(&b, "\n\n");
    }
    render_one(&b, q, with_answer);
    if (b.failed) {
        free(b.s);
        return dga_fail(DGA_ERR_NOMEM, "out of memory rendering an MMLU prompt");
    }
    *out = b.s;
    return DGA_OK;
}
