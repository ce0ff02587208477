/* Leftovers of killed writers: removed at the next write of the same output when their PID
 * is gone, kept when it is alive or the name is not exactly one of the writers' forms. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "test_tmpdir.h"

#include "bpe.h"
#include "shard.h"
#include "stale.h"
#include "store.h"

static char dir[128];

static const char *at(const char *fmt, long pid)
{
    static char buf[4][300];
    static int k;
    k = (k + 1) % 4;
    char name[160];
    snprintf(name, sizeof name, fmt, pid);
    snprintf(buf[k], sizeof buf[k], "%s/%s", dir, name);
    return buf[k];
}

static void touch(const char *path)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("x", f);
    fclose(f);
}

static int exists(const char *path) { return access(path, F_OK) == 0; }

/* A PID that is certainly gone: a child that has exited and been reaped. */
static long dead_pid(void)
{
    pid_t p = fork();
    assert_true(p >= 0);
    if (p == 0) _exit(0);
    int status;
    assert_int_equal(waitpid(p, &status, 0), p);
    return (long)p;
}

static int setup(void **state)
{
    (void)state;
    return test_tmpdir_make(dir, sizeof dir, "stale");
}

static int teardown(void **state)
{
    (void)state;
    return test_tmpdir_remove(dir);
}

static void test_removes_only_dead_writers(void **state)
{
    (void)state;
    long dead = dead_pid(), alive = (long)getppid(), self = (long)getpid();
    /* a killed store build: its temporary store, the old store it was replacing, its tokenizer */
    char tmp_dir[300], old_dir[300], odd[300];
    snprintf(tmp_dir, sizeof tmp_dir, "%s", at("out.tmp.%ld", dead));
    snprintf(old_dir, sizeof old_dir, "%s", at("out.old.%ld", dead));
    assert_int_equal(mkdir(tmp_dir, 0755), 0);
    assert_int_equal(mkdir(old_dir, 0755), 0);
    char f[400];
    snprintf(f, sizeof f, "%s/tokens.npy", tmp_dir);
    touch(f);
    snprintf(f, sizeof f, "%s/manifest.json", old_dir);
    touch(f);
    touch(at("out.tokenizer.%ld.json", dead));
    /* kept: live writers, our own PID, other outputs, names not of the writers' forms */
    touch(at("out.tmp.%ld", alive));
    touch(at("out.tmp.%ld", self));
    touch(at("other.tmp.%ld", dead));
    touch(at("out.tmp.%ldx", dead));
    touch(at("out.tokenizer.%ld.jsonx", dead));
    touch(at("out.tmp.", 0));
    /* a directory holding more than files is not what a writer makes: left alone */
    snprintf(odd, sizeof odd, "%s", at("out.old.%ld", dead + 1000000));
    assert_int_equal(mkdir(odd, 0755), 0);
    snprintf(f, sizeof f, "%s/kept.npy", odd);
    touch(f);
    snprintf(f, sizeof f, "%s/sub", odd);
    assert_int_equal(mkdir(f, 0755), 0);

    int removed = -1;
    assert_int_equal(dga_stale_remove(at("out/", 0), &removed), DGA_OK);
    assert_int_equal(removed, 3);
    assert_false(exists(tmp_dir));
    assert_false(exists(old_dir));
    assert_false(exists(at("out.tokenizer.%ld.json", dead)));
    assert_true(exists(at("out.tmp.%ld", alive)));
    assert_true(exists(at("out.tmp.%ld", self)));
    assert_true(exists(at("other.tmp.%ld", dead)));
    assert_true(exists(at("out.tmp.%ldx", dead)));
    assert_true(exists(at("out.tokenizer.%ld.jsonx", dead)));
    assert_true(exists(at("out.tmp.", 0)));
    assert_true(exists(f));
    snprintf(f, sizeof f, "%s/kept.npy", odd);
    assert_true(exists(f));
}

static void test_shard_write_sweeps_its_output(void **state)
{
    (void)state;
    long dead = dead_pid();
    touch(at("s.bin.tmp.%ld", dead));
    int32_t ids[3] = {1, 2, 3};
    assert_int_equal(dga_shard_write(at("s.bin", 0), ids, 3, 8), DGA_OK);
    assert_false(exists(at("s.bin.tmp.%ld", dead)));
    assert_true(exists(at("s.bin", 0)));
}

/* A store build and a tokenizer save start by clearing what killed ones left of their output. */
static void test_store_build_and_tokenizer_sweep(void **state)
{
    (void)state;
    long dead = dead_pid();
    char corpus[300], f[400], tmp_dir[300], old_dir[300];
    snprintf(corpus, sizeof corpus, "%s", at("corpus", 0));
    assert_int_equal(mkdir(corpus, 0755), 0);
    snprintf(f, sizeof f, "%s/a.jsonl", corpus);
    FILE *fp = fopen(f, "w");
    assert_non_null(fp);
    for (int i = 0; i < 20; i++) fputs("{\"text\": \"the cat sat on the mat, the dog on the log\"}\n", fp);
    fclose(fp);
    snprintf(tmp_dir, sizeof tmp_dir, "%s", at("st.tmp.%ld", dead));
    snprintf(old_dir, sizeof old_dir, "%s", at("st.old.%ld", dead));
    assert_int_equal(mkdir(tmp_dir, 0755), 0);
    assert_int_equal(mkdir(old_dir, 0755), 0);
    snprintf(f, sizeof f, "%s/tokens.npy", old_dir);
    touch(f);
    touch(at("st.tokenizer.%ld.json", dead));
    dga_store_build_opts o = {.corpus = corpus, .out = at("st", 0), .seq_len = 9, .nlevels = 1,
                              .levels = {1}, .vocab = 260, .spherical = 1, .iters = 2};
    assert_int_equal(dga_store_build(&o), DGA_OK);
    assert_false(exists(tmp_dir));
    assert_false(exists(old_dir));
    assert_false(exists(at("st.tokenizer.%ld.json", dead)));
    assert_true(exists(at("st/manifest.json", 0)));

    const char *texts[1] = {"hello hello world"};
    size_t lens[1] = {17};
    dga_bpe *tok = NULL;
    assert_int_equal(dga_bpe_train(texts, lens, 1, 260, &tok), DGA_OK);
    touch(at("tok.json.tmp.%ld", dead));
    assert_int_equal(dga_bpe_save(tok, at("tok.json", 0)), DGA_OK);
    assert_false(exists(at("tok.json.tmp.%ld", dead)));
    dga_bpe_free(tok);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_removes_only_dead_writers),
        cmocka_unit_test(test_shard_write_sweeps_its_output),
        cmocka_unit_test(test_store_build_and_tokenizer_sweep),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
