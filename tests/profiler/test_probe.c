/*
 * test_probe.c — reading the link probe's document (profiler/probe.c):
 * derived figures (latency of the smallest message, the bandwidth plateau
 * of messages >= 64 KiB, the best bus bandwidth), a round trip through
 * ss_probe_to_string, strict rejection of malformed documents, and the
 * refusal of the nccl backend.
 */
#include "testutil.h"
#include "profiler/probe.h"

#include <string.h>

static const char *GOOD =
    "{\"format\": \"simsearch-probe\", \"version\": 1, \"backend\": \"mpi\", \"ranks\": 2,"
    " \"host\": \"h\", \"reps\": 5,"
    " \"p2p\": [{\"bytes\": 8, \"us\": 0.5, \"gbps\": 0.016},"
    "          {\"bytes\": 32768, \"us\": 5, \"gbps\": 12.0},"
    "          {\"bytes\": 131072, \"us\": 13, \"gbps\": 10.0},"
    "          {\"bytes\": 524288, \"us\": 50, \"gbps\": 10.5}],"
    " \"allreduce\": [{\"bytes\": 8, \"us\": 1, \"busbw_gbps\": 0.01},"
    "                {\"bytes\": 524288, \"us\": 300, \"busbw_gbps\": 1.7}]}";

static void test_parse(void **state)
{
    (void)state;
    ss_diag d;
    ss_diag_init(&d);
    ss_probe_result r;
    assert_int_equal(ss_probe_parse(GOOD, "good", &r, &d), SS_OK);
    assert_int_equal(r.ranks, 2);
    assert_int_equal(r.n_p2p, 4);
    assert_true(r.latency_us == 0.5);
    assert_true(r.p2p_gbps == 10.5); /* 12 at 32 KiB is below the plateau sizes */
    assert_true(r.busbw_gbps == 1.7);
    char *s = NULL;
    assert_int_equal(ss_probe_to_string(&r, &s, &d), SS_OK);
    ss_probe_result back;
    assert_int_equal(ss_probe_parse(s, "back", &back, &d), SS_OK);
    assert_true(back.p2p_gbps == r.p2p_gbps && back.n_allreduce == 2);
    ss_free(s);
}

static void test_strict(void **state)
{
    (void)state;
    static const char *bad[][2] = {
        {"{\"format\": \"simsearch-probe\", \"version\": 1, \"backend\": \"mpi\", \"ranks\": 1,"
         " \"host\": \"h\", \"reps\": 5, \"p2p\": [], \"allreduce\": []}", "$.ranks"},
        {"{\"format\": \"simsearch-probe\", \"version\": 1, \"backend\": \"tcp\", \"ranks\": 2,"
         " \"host\": \"h\", \"reps\": 5, \"p2p\": [{\"bytes\": 8, \"us\": 1, \"gbps\": 1}],"
         " \"allreduce\": [{\"bytes\": 8, \"us\": 1, \"busbw_gbps\": 1}]}", "$.backend"},
        {"{\"format\": \"simsearch-probe\", \"version\": 1, \"backend\": \"mpi\", \"ranks\": 2,"
         " \"host\": \"h\", \"reps\": 5, \"p2p\": [{\"bytes\": 8, \"us\": -1, \"gbps\": 1}],"
         " \"allreduce\": [{\"bytes\": 8, \"us\": 1, \"busbw_gbps\": 1}]}", "$.p2p[0]"},
        {"{\"format\": \"simsearch-probe\", \"version\": 1, \"backend\": \"mpi\", \"ranks\": 2,"
         " \"host\": \"h\", \"reps\": 5, \"p2p\": [{\"bytes\": 8, \"us\": 1, \"gbps\": 1, \"x\": 0}],"
         " \"allreduce\": [{\"bytes\": 8, \"us\": 1, \"busbw_gbps\": 1}]}", "unknown key \"x\""},
        {"{\"format\": \"simsearch-probe\", \"version\": 1,", "invalid JSON"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ss_diag d;
        ss_diag_init(&d);
        ss_probe_result r;
        ss_status st = ss_probe_parse(bad[i][0], "bad.json", &r, &d);
        assert_true(st == SS_ERR_PARSE || st == SS_ERR_INVALID);
        if (!strstr(d.msg, bad[i][1]) || !strstr(d.msg, "bad.json"))
            fail_msg("case %zu: '%s' lacks '%s'", i, d.msg, bad[i][1]);
    }
}

static void test_backends(void **state)
{
    (void)state;
    ss_diag d;
    ss_diag_init(&d);
    ss_probe_result r;
    ss_probe_config c = {"nccl", 2, 1, 64, NULL};
    assert_int_equal(ss_probe_run(&c, &r, &d), SS_ERR_UNSUPPORTED);
    assert_non_null(strstr(d.msg, "NCCL"));
    ss_diag_init(&d);
    c.backend = "mpi";
    c.helper = "/nonexistent/simsearch-probe";
    assert_int_equal(ss_probe_run(&c, &r, &d), SS_ERR_UNSUPPORTED);
    assert_non_null(strstr(d.msg, "missing"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse),
        cmocka_unit_test(test_strict),
        cmocka_unit_test(test_backends),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
