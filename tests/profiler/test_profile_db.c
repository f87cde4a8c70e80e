/*
 * test_profile_db.c — the profile database (profiler/profile_db.c): put /
 * find / replace, a save-load round trip, strict loading of malformed text,
 * the cost provider in the cost model's chain (measured entries first,
 * analytic for the rest), a writer killed with SIGKILL in the middle of
 * writes (the file is always the old or the new one, complete), and two
 * concurrent writer processes that lose no entry.
 */
#include "testutil.h"
#include "profiler/profile_db.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void entry(ss_profile_entry *e, const char *dt, int i, double fwd)
{
    memset(e, 0, sizeof *e);
    snprintf(e->device_type, sizeof e->device_type, "%s", dt);
    snprintf(e->signature, sizeof e->signature, "linear;attrs:,out_features=%d;tile:[4x%d]", i, i);
    e->op_type = SS_OP_LINEAR;
    e->dtype = SS_F32;
    snprintf(e->backend, sizeof e->backend, "cpu");
    snprintf(e->device, sizeof e->device, "test");
    ss_profile_now(e->date);
    e->reps = 5;
    e->fwd_us = fwd;
    e->fwd_spread_us = 0.5;
    e->bwd_us = 2 * fwd;
    e->bwd_spread_us = 1;
}

static char tmpdir[64];

static int setup(void **state)
{
    (void)state;
    snprintf(tmpdir, sizeof tmpdir, "/tmp/ss_profile_XXXXXX");
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

static void test_put_find_roundtrip(void **state)
{
    (void)state;
    ss_diag d;
    ss_diag_init(&d);
    ss_profile_db *db = ss_profile_db_new();
    ss_profile_entry e;
    for (int i = 1; i <= 100; i++) {
        entry(&e, i % 2 ? "CPU-core" : "A100", i, i);
        assert_int_equal(ss_profile_db_put(db, &e, &d), SS_OK);
    }
    entry(&e, "CPU-core", 3, 99); /* same key: replaces */
    assert_int_equal(ss_profile_db_put(db, &e, &d), SS_OK);
    assert_int_equal(ss_profile_db_count(db), 100);
    e.reps = 0; /* out of range: refused */
    assert_int_equal(ss_profile_db_put(db, &e, &d), SS_ERR_INVALID);
    char path[128];
    snprintf(path, sizeof path, "%s/db.json", tmpdir);
    ss_diag_init(&d);
    assert_int_equal(ss_profile_db_save(db, path, &d), SS_OK);
    ss_profile_db *back = NULL;
    assert_int_equal(ss_profile_db_load(path, &back, &d), SS_OK);
    assert_int_equal(ss_profile_db_count(back), 100);
    entry(&e, "CPU-core", 3, 0);
    const ss_profile_entry *f = ss_profile_db_find(back, "CPU-core", e.signature);
    assert_non_null(f);
    assert_true(f->fwd_us == 99 && f->bwd_us == 198 && f->reps == 5);
    assert_null(ss_profile_db_find(back, "A100", e.signature)); /* 3 is odd: CPU only */
    ss_profile_db_free(back);
    ss_profile_db_free(db);
    /* open: a missing file is an empty database, load refuses it */
    snprintf(path, sizeof path, "%s/none.json", tmpdir);
    assert_int_equal(ss_profile_db_open(path, &back, &d), SS_OK);
    assert_int_equal(ss_profile_db_count(back), 0);
    ss_profile_db_free(back);
    assert_int_equal(ss_profile_db_load(path, &back, &d), SS_ERR_IO);
}

static void test_strict(void **state)
{
    (void)state;
    static const char *bad[][2] = {
        {"{\"format\": \"simsearch-profile\", \"version\": 1}", "entries"},
        {"{\"format\": \"simsearch-profile\", \"version\": 1, \"entries\": [], \"x\": 1}",
         "unknown key \"x\""},
        {"{\"format\": \"simsearch-profile\", \"version\": 1, \"entries\": [{}]}",
         "$.entries[0]"},
        {"{\"format\": \"simsearch-profile\", \"version\": 1,\n \"entries\": [}", "t.json:2:"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ss_diag d;
        ss_diag_init(&d);
        ss_profile_db *db = NULL;
        assert_int_equal(ss_profile_db_load_string(bad[i][0], "t.json", &db, &d), SS_ERR_PARSE);
        assert_null(db);
        if (!strstr(d.msg, bad[i][1]))
            fail_msg("case %zu: message '%s' lacks '%s'", i, d.msg, bad[i][1]);
    }
}

/* The provider answers for tiles it has, the analytic model for the rest. */
static void test_provider(void **state)
{
    (void)state;
    ss_diag d;
    ss_diag_init(&d);
    ss_machine *m = NULL;
    assert_int_equal(ss_machine_load(ss_test_path("topologies/local-cpu.json"), &m, &d), SS_OK);
    ss_graph *g = NULL;
    assert_int_equal(ss_model_build("mlp:layers=1,hidden=32,in=16,classes=4", 8, 1, &g, &d),
                     SS_OK);
    int fc = ss_graph_find_op(g, "fc1"), relu = ss_graph_find_op(g, "relu1");
    const ss_op *op = ss_graph_op(g, fc);
    ss_tile t;
    ss_op_full_tile(g, op, &t);
    ss_profile_db *db = ss_profile_db_new();
    ss_profile_entry e;
    entry(&e, "CPU-core", 0, 123);
    assert_true(ss_profile_signature(g, op, &t, e.signature, sizeof e.signature) > 0);
    assert_non_null(strstr(e.signature, "linear;"));
    assert_int_equal(ss_profile_db_put(db, &e, &d), SS_OK);
    ss_costmodel *cm = ss_cost_new(m);
    ss_cost_provider p = ss_profile_provider(db);
    assert_int_equal(ss_cost_add_provider(cm, &p, &d), SS_OK);
    ss_cost c;
    assert_int_equal(ss_cost_tile(cm, g, op, &t, 0, &c), SS_OK);
    assert_int_equal(c.source, SS_COST_PROFILE);
    assert_true(c.fwd_us == 123 && c.bwd_us == 246);
    assert_true(c.work.fwd_flops > 0);
    /* the other half of the batch is another signature: analytic */
    t.out.r[0].hi /= 2;
    assert_int_equal(ss_cost_tile(cm, g, op, &t, 0, &c), SS_OK);
    assert_int_equal(c.source, SS_COST_ANALYTIC);
    ss_op_full_tile(g, ss_graph_op(g, relu), &t);
    assert_int_equal(ss_cost_tile(cm, g, ss_graph_op(g, relu), &t, 0, &c), SS_OK);
    assert_int_equal(c.source, SS_COST_ANALYTIC);
    /* shares over the single-device plan: fc1's measured time against the rest */
    ss_plan *pl = ss_plan_new(g, m);
    double share[3];
    assert_int_equal(ss_cost_plan_sources(cm, g, m, pl, share, &d), SS_OK);
    assert_true(share[SS_COST_PROFILE] > 0 && share[SS_COST_ANALYTIC] > 0);
    assert_true(fabs(share[0] + share[1] + share[2] - 1) < 1e-12);
    ss_plan_free(pl);
    ss_cost_free(cm);
    ss_profile_db_free(db);
    ss_graph_free(g);
    ss_machine_free(m);
}

/* A child rewrites a large database over and over; SIGKILL lands in the
 * middle of one of those writes. The file must load, complete. */
static void test_kill_during_write(void **state)
{
    (void)state;
    char path[128];
    snprintf(path, sizeof path, "%s/killed.json", tmpdir);
    ss_diag d;
    ss_diag_init(&d);
    ss_profile_db *db = ss_profile_db_new();
    ss_profile_entry e;
    for (int i = 0; i < 3000; i++) {
        entry(&e, "CPU-core", i, i + 1);
        assert_int_equal(ss_profile_db_put(db, &e, &d), SS_OK);
    }
    assert_int_equal(ss_profile_db_save(db, path, &d), SS_OK);
    for (int round = 0; round < 3; round++) {
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            ss_profile_entry x;
            for (int i = 0;; i++) {
                entry(&x, "CPU-core", 100000 + i, 1);
                ss_profile_db_put(db, &x, NULL);
                ss_profile_db_save(db, path, NULL);
            }
        }
        struct timespec ts = {0, 30000000L + round * 20000000L};
        nanosleep(&ts, NULL);
        kill(pid, SIGKILL);
        int status;
        waitpid(pid, &status, 0);
        assert_true(WIFSIGNALED(status));
        ss_profile_db *back = NULL;
        ss_diag_init(&d);
        if (ss_profile_db_load(path, &back, &d) != SS_OK)
            fail_msg("after kill -9: %s", d.msg);
        assert_true(ss_profile_db_count(back) >= 3000);
        entry(&e, "CPU-core", 2999, 0);
        assert_non_null(ss_profile_db_find(back, "CPU-core", e.signature));
        ss_profile_db_free(back);
    }
    ss_profile_db_free(db);
}

/* Two processes each add 40 entries to one file, saving after each. */
static void test_concurrent_writers(void **state)
{
    (void)state;
    char path[128];
    snprintf(path, sizeof path, "%s/shared.json", tmpdir);
    pid_t pid[2];
    for (int w = 0; w < 2; w++) {
        pid[w] = fork();
        assert_true(pid[w] >= 0);
        if (pid[w] == 0) {
            for (int i = 0; i < 40; i++) {
                ss_profile_db *mine = ss_profile_db_new();
                ss_profile_entry e;
                entry(&e, w ? "A100" : "CPU-core", i, i + 1);
                int bad = ss_profile_db_put(mine, &e, NULL) != SS_OK ||
                          ss_profile_db_save(mine, path, NULL) != SS_OK;
                ss_profile_db_free(mine);
                if (bad)
                    _exit(1);
            }
            _exit(0);
        }
    }
    for (int w = 0; w < 2; w++) {
        int status;
        waitpid(pid[w], &status, 0);
        assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    ss_diag d;
    ss_diag_init(&d);
    ss_profile_db *back = NULL;
    assert_int_equal(ss_profile_db_load(path, &back, &d), SS_OK);
    assert_int_equal(ss_profile_db_count(back), 80);
    ss_profile_db_free(back);
}

/* Allocation failures at every step of load, put and serialise: each call
 * succeeds or fails cleanly (no result, nothing leaked: ASan), and a failed
 * put leaves the database as it was. jansson reports some of its own
 * allocation failures as syntax errors, so a load may also say SS_ERR_PARSE. */
static void test_alloc_failures(void **state)
{
    (void)state;
    ss_diag d;
    ss_profile_db *db = ss_profile_db_new();
    ss_profile_entry e;
    for (int i = 0; i < 40; i++) {
        entry(&e, "CPU-core", i, i + 1);
        ss_diag_init(&d);
        assert_int_equal(ss_profile_db_put(db, &e, &d), SS_OK);
    }
    char *text = NULL;
    ss_diag_init(&d);
    assert_int_equal(ss_profile_db_to_string(db, &text, &d), SS_OK);
    int ok_seen = 0;
    for (long n = 0; n < 20000 && !ok_seen; n++) {
        ss_test_fail_after(n);
        ss_profile_db *back = NULL;
        ss_diag_init(&d);
        ss_status st = ss_profile_db_load_string(text, "t.json", &back, &d);
        char *s2 = NULL;
        if (st == SS_OK) {
            st = ss_profile_db_to_string(back, &s2, &d);
            ok_seen = st == SS_OK;
        }
        ss_test_fail_after(-1);
        if (st != SS_OK && st != SS_ERR_NOMEM && st != SS_ERR_PARSE)
            fail_msg("allocation %ld failing: status %d: %s", n, (int)st, d.msg);
        if (st == SS_OK)
            assert_string_equal(s2, text);
        else if (!s2 && st != SS_OK)
            assert_true(back == NULL || ss_profile_db_count(back) == 40);
        ss_free(s2);
        ss_profile_db_free(back);
    }
    assert_true(ok_seen);
    for (long n = 0; n < 10; n++) {
        ss_test_fail_after(n);
        entry(&e, "A100", 1000 + (int)n, 1);
        ss_diag_init(&d);
        ss_status st = ss_profile_db_put(db, &e, &d);
        ss_test_fail_after(-1);
        assert_true(st == SS_OK || st == SS_ERR_NOMEM);
        assert_true((ss_profile_db_find(db, "A100", e.signature) != NULL) == (st == SS_OK));
    }
    ss_free(text);
    ss_profile_db_free(db);
}

/* The journal: appends load after the file (a later line replaces an
 * earlier entry), a torn last line is skipped, the file is not rewritten
 * by an append, a compaction merges the journal and removes it, and no lock
 * file stays behind. */
static void test_journal(void **state)
{
    (void)state;
    ss_diag d;
    ss_diag_init(&d);
    char path[128], jpath[160], lock[160];
    snprintf(path, sizeof path, "%s/j.json", tmpdir);
    snprintf(jpath, sizeof jpath, "%s.journal", path);
    snprintf(lock, sizeof lock, "%s.lock", path);
    ss_profile_db *db = ss_profile_db_new();
    ss_profile_entry e;
    for (int i = 1; i <= 50; i++) {
        entry(&e, "CPU-core", i, i);
        assert_int_equal(ss_profile_db_put(db, &e, &d), SS_OK);
    }
    assert_int_equal(ss_profile_db_save(db, path, &d), SS_OK);
    assert_int_equal(access(lock, F_OK), -1);
    struct stat before, after;
    assert_int_equal(stat(path, &before), 0);
    entry(&e, "CPU-core", 51, 51); /* new */
    assert_int_equal(ss_profile_db_append(path, &e, &d), SS_OK);
    entry(&e, "CPU-core", 7, 700); /* replaces the file's */
    assert_int_equal(ss_profile_db_append(path, &e, &d), SS_OK);
    assert_int_equal(access(lock, F_OK), -1);
    assert_int_equal(stat(path, &after), 0);
    assert_true(before.st_ino == after.st_ino && before.st_size == after.st_size);
    FILE *f = fopen(jpath, "a"); /* a writer killed mid-append */
    assert_non_null(f);
    fputs("{\"device_type\": \"CPU-core\", \"signa", f);
    fclose(f);
    ss_profile_db *back = NULL;
    assert_int_equal(ss_profile_db_load(path, &back, &d), SS_OK);
    assert_int_equal(ss_profile_db_count(back), 51);
    entry(&e, "CPU-core", 7, 0);
    assert_true(ss_profile_db_find(back, "CPU-core", e.signature)->fwd_us == 700);
    ss_profile_db_free(back);
    /* a small journal stays at a quarter; ratio 0 merges it */
    assert_int_equal(ss_profile_db_compact(path, 0.25, &d), SS_OK);
    assert_int_equal(access(jpath, F_OK), 0);
    assert_int_equal(ss_profile_db_compact(path, 0, &d), SS_OK);
    assert_int_equal(access(jpath, F_OK), -1);
    assert_int_equal(access(lock, F_OK), -1);
    back = NULL;
    assert_int_equal(ss_profile_db_load(path, &back, &d), SS_OK);
    assert_int_equal(ss_profile_db_count(back), 51);
    assert_true(ss_profile_db_find(back, "CPU-core", e.signature)->fwd_us == 700);
    ss_profile_db_free(back);
    /* a bad line that is not the last is an error naming the journal */
    f = fopen(jpath, "w");
    assert_non_null(f);
    fputs("{\"x\": 1}\n", f);
    fclose(f);
    back = NULL;
    assert_int_equal(ss_profile_db_load(path, &back, &d), SS_ERR_PARSE);
    assert_non_null(strstr(d.msg, "j.json.journal: line 1"));
    assert_null(back);
    unlink(jpath);
    ss_profile_db_free(db);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_put_find_roundtrip),
        cmocka_unit_test(test_strict),
        cmocka_unit_test(test_provider),
        cmocka_unit_test(test_kill_during_write),
        cmocka_unit_test(test_concurrent_writers),
        cmocka_unit_test(test_alloc_failures),
        cmocka_unit_test(test_journal),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
