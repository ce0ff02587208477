/* MMLU reading, the a/b split and the harness prompt text. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "mmlu.h"

/* ------------------------------------------------------------------ helpers */

static const char *mmlu_dir(void)
{
    static char path[4096];
    const char *root = getenv("DGA_SHARED_DATA");
    snprintf(path, sizeof path, "%s/mmlu", root ? root : "../shared/data");
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISDIR(sb.st_mode) ? path : NULL;
}

/* NULL when the data is absent: the caller then returns, so the test passes as skipped
 * (cmocka's skip() prints "not ok N # SKIP", which TAP counters take for a failure). */
static dga_mmlu *load_real_or_skip(void)
{
    const char *dir = mmlu_dir();
    if (!dir) {
        print_message("# skip: MMLU data absent (DGA_SHARED_DATA/mmlu)\n");
        return NULL;
    }
    dga_mmlu *mm = NULL;
    dga_status st = dga_mmlu_load(dir, &mm);
    if (st != DGA_OK) print_error("%s\n", dga_last_error());
    assert_int_equal(st, DGA_OK);
    return mm;
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fputs(text, f);
    assert_int_equal(fclose(f), 0);
}

/* A temp release with one subject "toy" whose test file holds `test_csv`. */
static void make_release(char *dir, size_t size, const char *test_csv)
{
    snprintf(dir, size, "/tmp/dga_mmlu_XXXXXX");
    assert_non_null(mkdtemp(dir));
    char path[4200];
    static const char *const splits[3] = {"dev", "val", "test"};
    for (int s = 0; s < 3; s++) {
        snprintf(path, sizeof path, "%s/%s", dir, splits[s]);
        assert_int_equal(mkdir(path, 0700), 0);
        snprintf(path, sizeof path, "%s/%s/toy_%s.csv", dir, splits[s], splits[s]);
        write_file(path, s == 2 ? test_csv : "q,a,b,c,d,A\n");
    }
}

static void remove_release(const char *dir)
{
    char path[4200];
    static const char *const splits[3] = {"dev", "val", "test"};
    for (int s = 0; s < 3; s++) {
        snprintf(path, sizeof path, "%s/%s/toy_%s.csv", dir, splits[s], splits[s]);
        unlink(path);
        snprintf(path, sizeof path, "%s/%s", dir, splits[s]);
        rmdir(path);
    }
    rmdir(dir);
}

/* Loads a one-subject release whose test file is `csv`; returns the status and leaves the
 * message in dga_last_error(). */
static dga_status load_toy(const char *csv, dga_mmlu **out)
{
    char dir[64];
    make_release(dir, sizeof dir, csv);
    dga_status st = dga_mmlu_load(dir, out);
    remove_release(dir);
    return st;
}

static void assert_error_mentions(const char *a, const char *b)
{
    const char *msg = dga_last_error();
    if (!strstr(msg, a) || (b && !strstr(msg, b)))
        fail_msg("error \"%s\" should mention \"%s\" and \"%s\"", msg, a, b ? b : "");
}

/* ------------------------------------------------------------------ real data */

static void test_counts(void **state)
{
    (void)state;
    dga_mmlu *mm = load_real_or_skip();
    if (!mm) return;
    assert_int_equal(dga_mmlu_num_subjects(mm), 57);
    assert_int_equal(dga_mmlu_count(mm, DGA_MMLU_TEST), 14042);
    assert_int_equal(dga_mmlu_count(mm, DGA_MMLU_DEV), 285);
    assert_int_equal(dga_mmlu_count(mm, DGA_MMLU_VAL), 1531);
    for (int i = 1; i < dga_mmlu_num_subjects(mm); i++)
        assert_true(strcmp(dga_mmlu_subject(mm, i - 1), dga_mmlu_subject(mm, i)) < 0);
    /* 5 dev questions per subject, grouped by subject in subject order */
    const dga_mmlu_question *dev = dga_mmlu_questions(mm, DGA_MMLU_DEV);
    for (int i = 0; i < 57; i++)
        for (int j = 0; j < 5; j++)
            assert_string_equal(dev[5 * i + j].subject, dga_mmlu_subject(mm, i));
    /* professional_law has 1534 test questions */
    const dga_mmlu_question *t = dga_mmlu_questions(mm, DGA_MMLU_TEST);
    size_t law = 0;
    for (size_t i = 0; i < dga_mmlu_count(mm, DGA_MMLU_TEST); i++)
        law += strcmp(t[i].subject, "professional_law") == 0;
    assert_int_equal(law, 1534);
    dga_mmlu_free(mm);
}

/* nutrition_test.csv, read by hand: the row starting at line 538 is
 *   "Which of the following foods might be considered a ""goitrogen""?
 *   ",Fish,Meat,Rice,Brassicas,D
 * (doubled quotes, a newline inside the quoted question), the 268th row of the file. */
static void test_render_known_question(void **state)
{
    (void)state;
    dga_mmlu *mm = load_real_or_skip();
    if (!mm) return;
    const dga_mmlu_question *t = dga_mmlu_questions(mm, DGA_MMLU_TEST);
    size_t n = dga_mmlu_count(mm, DGA_MMLU_TEST), first = n;
    for (size_t i = 0; i < n && first == n; i++)
        if (strcmp(t[i].subject, "nutrition") == 0) first = i;
    assert_true(first + 268 < n);
    const dga_mmlu_question *q = &t[first + 267];
    assert_string_equal(q->question,
                        "Which of the following foods might be considered a \"goitrogen\"?\n");
    assert_int_equal(q->line, 538);
    assert_int_equal(t[first + 268].line, 540);
    assert_int_equal(q->answer, 3);
    char *s = NULL;
    assert_int_equal(dga_mmlu_render(q, NULL, 0, 0, &s), DGA_OK);
    assert_string_equal(s, "The following are multiple choice questions (with answers) about "
                           "nutrition.\n\nWhich of the following foods might be considered a "
                           "\"goitrogen\"?\nA. Fish\nB. Meat\nC. Rice\nD. Brassicas\nAnswer:");
    free(s);
    assert_int_equal(dga_mmlu_render(q, NULL, 0, 1, &s), DGA_OK);
    assert_non_null(strstr(s, "\nD. Brassicas\nAnswer: D"));
    assert_int_equal(s[strlen(s) - 1], 'D');
    free(s);
    dga_mmlu_free(mm);
}

static int contains(const size_t *v, size_t n, size_t x)
{
    size_t lo = 0, hi = n;   /* v ascending */
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (v[mid] < x) lo = mid + 1;
        else hi = mid;
    }
    return lo < n && v[lo] == x;
}

static void test_split_ab(void **state)
{
    (void)state;
    dga_mmlu *mm = load_real_or_skip();
    if (!mm) return;
    size_t n = dga_mmlu_count(mm, DGA_MMLU_TEST);
    size_t *a, *b, na, nb, *a2, *b2, na2, nb2, *a3, *b3, na3, nb3;
    assert_int_equal(dga_mmlu_split_ab(mm, 7, &a, &na, &b, &nb), DGA_OK);
    assert_int_equal(na + nb, n);
    for (size_t i = 1; i < na; i++) assert_true(a[i - 1] < a[i]);
    for (size_t i = 1; i < nb; i++) assert_true(b[i - 1] < b[i]);
    for (size_t x = 0; x < n; x++)   /* a partition: every question in exactly one half */
        assert_int_equal(contains(a, na, x) + contains(b, nb, x), 1);
    /* per subject: floor(n_s / 2) in a */
    const dga_mmlu_question *t = dga_mmlu_questions(mm, DGA_MMLU_TEST);
    for (int s = 0; s < dga_mmlu_num_subjects(mm); s++) {
        size_t ns = 0, in_a = 0;
        for (size_t x = 0; x < n; x++)
            if (strcmp(t[x].subject, dga_mmlu_subject(mm, s)) == 0) {
                ns++;
                in_a += contains(a, na, x);
            }
        assert_int_equal(in_a, ns / 2);
    }
    assert_int_equal(dga_mmlu_split_ab(mm, 7, &a2, &na2, &b2, &nb2), DGA_OK);
    assert_int_equal(na2, na);
    assert_memory_equal(a, a2, na * sizeof *a);
    assert_memory_equal(b, b2, nb * sizeof *b);
    assert_int_equal(dga_mmlu_split_ab(mm, 8, &a3, &na3, &b3, &nb3), DGA_OK);
    assert_int_equal(na3, na);
    size_t same = 0;
    for (size_t i = 0; i < na; i++) same += contains(a3, na3, a[i]);
    assert_true(same < na);          /* another seed, another split */
    assert_true(same > na / 4);      /* ... but a random one: about half overlaps */
    free(a), free(b), free(a2), free(b2), free(a3), free(b3);
    dga_mmlu_free(mm);
}

/* ------------------------------------------------------------------ synthetic files */

static void test_render_shots(void **state)
{
    (void)state;
    dga_mmlu_question shots[2] = {
        {.subject = "high_school_physics", .question = "S1?", .choices = {"a", "b", "c", "d"},
         .answer = 2},
        {.subject = "high_school_physics", .question = " S2?\n", .choices = {"1", "2", "3", "4 "},
         .answer = 0},
    };
    dga_mmlu_question q = {.subject = "high_school_physics", .question = "\t Q?  ",
                           .choices = {"w", "x", "y", "z"}, .answer = 1};
    char *s = NULL;
    assert_int_equal(dga_mmlu_render(&q, shots, 2, 0, &s), DGA_OK);
    assert_string_equal(s, "The following are multiple choice questions (with answers) about high "
                           "school physics.\n\n"
                           "S1?\nA. a\nB. b\nC. c\nD. d\nAnswer: C\n\n"
                           "S2?\nA. 1\nB. 2\nC. 3\nD. 4 \nAnswer: A\n\n"
                           "Q?\nA. w\nB. x\nC. y\nD. z\nAnswer:");
    free(s);
    q.answer = 4;
    assert_int_equal(dga_mmlu_render(&q, NULL, 0, 1, &s), DGA_ERR_INVALID);
    assert_null(s);
}

static void test_parse_quotes_and_lines(void **state)
{
    (void)state;
    const char csv[] = "\"multi\nline, \"\"quoted\"\"\",a,b,c,d,B\n"
                       "\n"
                       "plain,\" a \",b ,c,d,D\r\n"
                       "last,1,2,3,4,C";   /* no final newline */
    dga_mmlu_question *qs = NULL;
    size_t n = 0;
    assert_int_equal(dga_mmlu_parse_csv("mem.csv", csv, sizeof csv - 1, "toy", &qs, &n), DGA_OK);
    assert_int_equal(n, 3);
    assert_string_equal(qs[0].question, "multi\nline, \"quoted\"");
    assert_int_equal(qs[0].line, 1);
    assert_int_equal(qs[0].answer, 1);
    assert_string_equal(qs[1].choices[0], " a ");   /* spaces kept */
    assert_string_equal(qs[1].choices[1], "b ");
    assert_int_equal(qs[1].line, 4);
    assert_int_equal(qs[1].answer, 3);
    assert_int_equal(qs[2].line, 5);
    assert_string_equal(qs[2].subject, "toy");
    dga_mmlu_questions_free(qs, n);
}

static void test_five_columns(void **state)
{
    (void)state;
    dga_mmlu *mm = NULL;
    assert_int_equal(load_toy("\"q1\nmore\",a,b,c,d,A\nq2,a,b,c,D\nq3,a,b,c,d,A\n", &mm),
                     DGA_ERR_FORMAT);
    assert_null(mm);
    assert_error_mentions("toy_test.csv: line 3:", "found 5");
}

static void test_bad_answer(void **state)
{
    (void)state;
    dga_mmlu *mm = NULL;
    assert_int_equal(load_toy("q1,a,b,c,d,A\n\nq2,a,b,c,d,E\n", &mm), DGA_ERR_FORMAT);
    assert_error_mentions("toy_test.csv: line 3:", "\"E\"");
    assert_int_equal(load_toy("q1,a,b,c,d,a\n", &mm), DGA_ERR_FORMAT);
    assert_error_mentions("line 1:", "\"a\"");
    assert_int_equal(load_toy("q1,a,b,c,d,AB\n", &mm), DGA_ERR_FORMAT);
    assert_error_mentions("line 1:", "\"AB\"");
}

static void test_unterminated_quote(void **state)
{
    (void)state;
    dga_mmlu *mm = NULL;
    assert_int_equal(load_toy("q1,a,b,c,d,A\nq2,a,b,c,d,B\n\"q3 never closed,a,b,c,d,C\nq4\n", &mm),
                     DGA_ERR_FORMAT);
    assert_error_mentions("toy_test.csv: line 3:", "unterminated");
    /* text after a closing quote is malformed too */
    assert_int_equal(load_toy("q1,a,b,c,d,A\n\"q2\"x,a,b,c,d,B\n", &mm), DGA_ERR_FORMAT);
    assert_error_mentions("toy_test.csv: line 2:", NULL);
}

static void test_empty_bom_nul(void **state)
{
    (void)state;
    dga_mmlu *mm = NULL;
    /* an empty (or blank) test file is an error, not a subject without questions */
    assert_int_equal(load_toy("", &mm), DGA_ERR_FORMAT);
    assert_null(mm);
    assert_error_mentions("toy_test.csv: line 1:", "no questions");
    assert_int_equal(load_toy("\n\r\n", &mm), DGA_ERR_FORMAT);
    assert_error_mentions("toy_test.csv: line 1:", "no questions");
    /* so is an empty dev file */
    char dir[64], path[200];
    make_release(dir, sizeof dir, "q,a,b,c,d,A\n");
    snprintf(path, sizeof path, "%s/dev/toy_dev.csv", dir);
    write_file(path, "");
    assert_int_equal(dga_mmlu_load(dir, &mm), DGA_ERR_FORMAT);
    assert_error_mentions("dev/toy_dev.csv: line 1:", "no questions");
    remove_release(dir);
    /* and an empty val file (issue 22: it loaded silently, and --split val scored nothing) */
    make_release(dir, sizeof dir, "q,a,b,c,d,A\n");
    snprintf(path, sizeof path, "%s/val/toy_val.csv", dir);
    write_file(path, "");
    assert_int_equal(dga_mmlu_load(dir, &mm), DGA_ERR_FORMAT);
    assert_null(mm);
    assert_error_mentions("val/toy_val.csv: line 1:", "no questions");
    remove_release(dir);

    /* a byte-order mark is stripped, also before a quoted field */
    dga_mmlu_question *qs = NULL;
    size_t n = 0;
    const char bom[] = "\xEF\xBB\xBFq1,a,b,c,d,A\n";
    assert_int_equal(dga_mmlu_parse_csv("bom.csv", bom, sizeof bom - 1, "toy", &qs, &n), DGA_OK);
    assert_int_equal(n, 1);
    assert_string_equal(qs[0].question, "q1");
    dga_mmlu_questions_free(qs, n);
    qs = NULL, n = 0;
    const char bomq[] = "\xEF\xBB\xBF\"q1\",a,b,c,d,A\n";
    assert_int_equal(dga_mmlu_parse_csv("bom.csv", bomq, sizeof bomq - 1, "toy", &qs, &n), DGA_OK);
    assert_string_equal(qs[0].question, "q1");
    dga_mmlu_questions_free(qs, n);

    /* a NUL byte would cut a field short: an error naming the line */
    qs = NULL, n = 0;
    const char nul[] = "q1,a,b,c,d,A\nq2,a,b\0tail,c,d,B\n";
    assert_int_equal(dga_mmlu_parse_csv("nul.csv", nul, sizeof nul - 1, "toy", &qs, &n),
                     DGA_ERR_FORMAT);
    assert_error_mentions("nul.csv: line 2:", "NUL byte in field 3");
    dga_mmlu_questions_free(qs, n);
}

/* A 2 MB quoted field parses whole (libcsv's default 128-byte growth made this quadratic). */
static void test_long_field(void **state)
{
    (void)state;
    const size_t big = (size_t)2 << 20;
    char *csv = malloc(big + 32);
    assert_non_null(csv);
    size_t k = 0;
    csv[k++] = '"';
    for (size_t i = 0; i < big; i++) csv[k++] = (char)('a' + i % 26);
    memcpy(csv + k, "\",a,b,c,d,C\n", 12);
    k += 12;
    dga_mmlu_question *qs = NULL;
    size_t n = 0;
    assert_int_equal(dga_mmlu_parse_csv("big.csv", csv, k, "toy", &qs, &n), DGA_OK);
    assert_int_equal(n, 1);
    assert_int_equal(strlen(qs[0].question), big);
    assert_int_equal(qs[0].answer, 2);
    dga_mmlu_questions_free(qs, n);
    free(csv);
}

static void test_missing(void **state)
{
    (void)state;
    dga_mmlu *mm = NULL;
    assert_int_equal(dga_mmlu_load("/nonexistent/mmlu", &mm), DGA_ERR_IO);
    assert_error_mentions("/nonexistent/mmlu/test", NULL);
    /* a subject whose dev file is missing */
    char dir[64], path[200];
    make_release(dir, sizeof dir, "q,a,b,c,d,A\n");
    snprintf(path, sizeof path, "%s/dev/toy_dev.csv", dir);
    unlink(path);
    assert_int_equal(dga_mmlu_load(dir, &mm), DGA_ERR_IO);
    assert_error_mentions("dev/toy_dev.csv", NULL);
    remove_release(dir);
    /* a good toy release loads */
    assert_int_equal(load_toy("q,a,b,c,d,A\nr,a,b,c,d,B\n", &mm), DGA_OK);
    assert_int_equal(dga_mmlu_count(mm, DGA_MMLU_TEST), 2);
    assert_int_equal(dga_mmlu_count(mm, DGA_MMLU_DEV), 1);
    assert_string_equal(dga_mmlu_subject(mm, 0), "toy");
    dga_mmlu_free(mm);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_counts),
        cmocka_unit_test(test_render_known_question),
        cmocka_unit_test(test_split_ab),
        cmocka_unit_test(test_render_shots),
        cmocka_unit_test(test_parse_quotes_and_lines),
        cmocka_unit_test(test_five_columns),
        cmocka_unit_test(test_bad_answer),
        cmocka_unit_test(test_unterminated_quote),
        cmocka_unit_test(test_empty_bom_nul),
        cmocka_unit_test(test_long_field),
        cmocka_unit_test(test_missing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
