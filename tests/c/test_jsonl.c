/* JSON Lines / .txt reading: sorted recursive walk, skip accounting with file:line messages,
 * errors for missing paths, early stop. */
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

#include "test_tmpdir.h"

#include "jsonl.h"

static char dir[256];

static void write_bytes(const char *rel, const char *bytes, size_t len)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, rel);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(bytes, 1, len, f), len);
    fclose(f);
}

static void write_text(const char *rel, const char *text) { write_bytes(rel, text, strlen(text)); }

static int setup(void **state)
{
    (void)state;
    if (test_tmpdir_make(dir, sizeof dir, "jsonl")) return -1;
    char sub[300];
    snprintf(sub, sizeof sub, "%s/b_sub", dir);
    mkdir(sub, 0755);
    snprintf(sub, sizeof sub, "%s/.hidden", dir);
    mkdir(sub, 0755);
    /* a.jsonl: every kind of bad line between good ones */
    const char a[] =
        "{\"text\": \"first doc\", \"meta\": 1}\n"       /* 1 good */
        "{\"text\": \"broken\"\n"                          /* 2 bad json */
        "[1, 2, 3]\n"                                      /* 3 not an object */
        "{\"title\": \"no text here\"}\n"                  /* 4 no text */
        "\n"                                               /* 5 blank */
        "{\"text\": 42}\n"                                 /* 6 text not a string */
        "{\"text\": \"bad \xff byte\"}\n"                  /* 7 invalid utf-8 */
        "{\"text\": \"nul \\u0000 inside\"}\r\n"           /* 8 good, with NUL and CRLF */
        "{\"text\": \"last, no newline\"}";                /* 9 good */
    write_bytes("a.jsonl", a, sizeof a - 1);
    write_text("b_sub/c.txt", "a plain text file\nwith two lines\n");
    write_text("b_sub/d.jsonl", "\xEF\xBB\xBF{\"text\": \"in the subdir\"}\n");   /* with a BOM */
    write_text("b_sub/ignored.csv", "x,y\n");
    write_text(".hidden/e.jsonl", "{\"text\": \"hidden\"}\n");
    write_bytes("bad.txt", "ok line\nsecond\ncaf\xc3", 19);   /* truncated UTF-8 on line 3 */
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    return test_tmpdir_remove(dir);
}

typedef struct {
    char   texts[16][64];
    size_t lens[16];
    char   files[16][300];
    size_t lines[16];
    int    n, stop_after;
} seen;

static int record(const dga_text_doc *d, void *ud)
{
    seen *s = ud;
    assert_true(s->n < 16 && d->len < 64);
    assert_int_equal(d->index, (size_t)s->n);
    memcpy(s->texts[s->n], d->text, d->len);
    s->texts[s->n][d->len] = '\0';
    s->lens[s->n] = d->len;
    snprintf(s->files[s->n], sizeof s->files[s->n], "%s", d->file);
    s->lines[s->n] = d->line;
    s->n++;
    return s->stop_after && s->n >= s->stop_after;
}

static int ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

static void test_walk_sorted_and_counted(void **state)
{
    (void)state;
    seen s = {0};
    dga_text_stats st;
    assert_int_equal(dga_text_foreach(dir, record, &s, &st), DGA_OK);
    /* a.jsonl (3 good), b_sub/c.txt, b_sub/d.jsonl; bad.txt skipped; .hidden and .csv ignored */
    assert_int_equal(s.n, 5);
    assert_string_equal(s.texts[0], "first doc");
    assert_int_equal(s.lines[0], 1);
    assert_int_equal(s.lens[1], strlen("nul ") + 1 + strlen(" inside"));
    assert_memory_equal(s.texts[1], "nul \0 inside", s.lens[1]);
    assert_int_equal(s.lines[1], 8);
    assert_string_equal(s.texts[2], "last, no newline");
    assert_int_equal(s.lines[2], 9);
    assert_string_equal(s.texts[3], "a plain text file\nwith two lines\n");
    assert_true(ends_with(s.files[3], "/b_sub/c.txt"));
    assert_string_equal(s.texts[4], "in the subdir");
    assert_true(ends_with(s.files[4], "/b_sub/d.jsonl"));

    assert_int_equal(st.files, 4);
    assert_int_equal(st.lines, 10);
    assert_int_equal(st.docs, 5);
    assert_int_equal(st.blank, 1);
    assert_int_equal(st.bad_json, 1);
    assert_int_equal(st.not_object, 1);
    assert_int_equal(st.no_text, 2);
    assert_int_equal(st.bad_utf8, 2);
    assert_int_equal(st.skipped, 6);
    assert_int_equal(st.n_messages, 6);
    const char *want[] = {"a.jsonl:2: not valid JSON", "a.jsonl:3: expected a JSON object",
                          "a.jsonl:4: no \"text\" field", "a.jsonl:6: \"text\" is not a string",
                          "a.jsonl:7: invalid UTF-8", "bad.txt:3: invalid UTF-8 at byte 19"};
    for (int i = 0; i < 6; i++)
        if (!strstr(st.messages[i], want[i]))
            fail_msg("message %d is \"%s\", expected it to contain \"%s\"", i, st.messages[i],
                     want[i]);
}

static void test_single_file_and_reader(void **state)
{
    (void)state;
    char path[512];
    snprintf(path, sizeof path, "%s/b_sub/d.jsonl", dir);
    dga_text_reader *r;
    assert_int_equal(dga_text_open(path, &r), DGA_OK);
    dga_text_doc d;
    assert_int_equal(dga_text_next(r, &d), DGA_OK);
    assert_non_null(d.text);
    assert_int_equal(d.len, strlen("in the subdir"));
    assert_int_equal(dga_text_next(r, &d), DGA_OK);
    assert_null(d.text);   /* the end */
    assert_int_equal(dga_text_next(r, &d), DGA_OK);
    assert_null(d.text);   /* and it stays at the end */
    assert_int_equal(dga_text_reader_stats(r)->docs, 1);
    dga_text_close(r);
}

static void test_stop_early(void **state)
{
    (void)state;
    seen s = {0};
    s.stop_after = 2;
    dga_text_stats st;
    assert_int_equal(dga_text_foreach(dir, record, &s, &st), DGA_OK);
    assert_int_equal(s.n, 2);
    assert_int_equal(st.docs, 2);
}

static void test_missing_path(void **state)
{
    (void)state;
    char path[512];
    snprintf(path, sizeof path, "%s/no_such_dir", dir);
    seen s = {0};
    dga_text_stats st;
    assert_int_equal(dga_text_foreach(path, record, &s, &st), DGA_ERR_IO);
    assert_non_null(strstr(dga_last_error(), "no_such_dir"));
    assert_int_equal(s.n, 0);
    dga_text_reader *r = (dga_text_reader *)&s;
    assert_int_equal(dga_text_open(path, &r), DGA_ERR_IO);
    assert_null(r);
}

/* Empty directories anywhere in the tree, the root included: no files, no error (and no
 * qsort of a NULL array, which UBSan reports). */
static void test_empty_directories(void **state)
{
    (void)state;
    char root[300], sub[340];
    snprintf(root, sizeof root, "%s/empties", dir);
    assert_int_equal(mkdir(root, 0755), 0);
    char **files = NULL;
    size_t n = 7;
    assert_int_equal(dga_text_list_files(root, &files, &n), DGA_OK);
    assert_int_equal(n, 0);
    dga_text_free_files(files, n);
    snprintf(sub, sizeof sub, "%s/inner", root);
    assert_int_equal(mkdir(sub, 0755), 0);
    seen s = {0};
    dga_text_stats st;
    assert_int_equal(dga_text_foreach(root, record, &s, &st), DGA_OK);
    assert_int_equal(s.n, 0);
    assert_int_equal(st.files, 0);
    assert_int_equal(rmdir(sub), 0);
    assert_int_equal(rmdir(root), 0);
}

static void test_utf8_validator(void **state)
{
    (void)state;
    size_t off;
    assert_true(dga_utf8_valid("", 0, NULL));
    const char *good = "h\xc3\xa9llo \xe2\x82\xac \xf0\x9f\x98\x80";
    assert_true(dga_utf8_valid(good, strlen(good), NULL));
    assert_false(dga_utf8_valid("ab\xc0\xaf", 4, &off));   /* overlong '/' */
    assert_int_equal(off, 2);
    assert_false(dga_utf8_valid("\xed\xa0\x80", 3, &off));  /* a surrogate */
    assert_false(dga_utf8_valid("\xf4\x90\x80\x80", 4, &off));  /* > U+10FFFF */
    assert_false(dga_utf8_valid("x\xe2\x82", 3, &off));      /* truncated */
    assert_int_equal(off, 1);
}

static void test_real_corpus_domain(void **state)
{
    (void)state;
    const char *root = getenv("DGA_SHARED_DATA");
    char path[4096];
    snprintf(path, sizeof path, "%s/corpus/arxiv_abstracts", root ? root : "../shared/data");
    if (access(path, R_OK) != 0) skip();
    dga_text_stats st;
    dga_text_reader *r;
    assert_int_equal(dga_text_open(path, &r), DGA_OK);
    dga_text_doc d;
    size_t docs = 0;
    while (dga_text_next(r, &d) == DGA_OK && d.text && docs < 500) {
        assert_true(d.len > 0);
        assert_true(dga_utf8_valid(d.text, d.len, NULL));
        docs++;
    }
    st = *dga_text_reader_stats(r);
    dga_text_close(r);
    assert_int_equal(docs, 500);
    assert_int_equal(st.skipped, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_walk_sorted_and_counted),
        cmocka_unit_test(test_single_file_and_reader),
        cmocka_unit_test(test_stop_early),
        cmocka_unit_test(test_missing_path),
        cmocka_unit_test(test_empty_directories),
        cmocka_unit_test(test_utf8_validator),
        cmocka_unit_test(test_real_corpus_domain),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
