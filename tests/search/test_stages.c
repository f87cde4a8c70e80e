/*
 * test_stages.c — the pipeline-cut DP (search/stages.h) against brute force
 * over every cut: on random layer sequences (1 to 9 layers, 1 to 5 stages,
 * 1 to 12 micro-batches, random per-layer times, sends, static and
 * activation memory, and a memory limit), the DP's estimate equals the
 * least estimate over all cuts that fit, its cut fits, and it reports
 * infeasible exactly when no cut fits.
 */
#include "testutil.h"
#include "search/stages.h"

#include <math.h>
#include <string.h>

#define MAXL 9

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static double rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (double)(rng >> 11) / 9007199254740992.0;
}

/* Least estimate over all cuts (first[1..S-1] strictly increasing) that fit. */
static double brute(const ss_stage_problem *p, int s, int *first, double best)
{
    int S = p->stages, n = p->n_layers;
    if (s == S) {
        first[S] = n;
        double peak, t = ss_stage_estimate(p, first, &peak);
        return (p->mem_limit <= 0 || peak <= p->mem_limit) && t < best ? t : best;
    }
    for (int j = first[s - 1] + 1; j <= n - (S - s); j++) {
        first[s] = j;
        best = brute(p, s + 1, first, best);
    }
    return best;
}

static void test_random_vs_brute(void **state)
{
    (void)state;
    int feasible = 0, infeasible = 0;
    for (int it = 0; it < 2000; it++) {
        double t[MAXL], snd[MAXL], w[MAXL], a[MAXL];
        ss_stage_problem p = {0};
        p.n_layers = 1 + (int)(rnd() * MAXL);
        for (int i = 0; i < p.n_layers; i++) {
            t[i] = floor(1 + rnd() * 100);
            snd[i] = floor(rnd() * 20);
            w[i] = floor(rnd() * 50);
            a[i] = floor(rnd() * 10);
        }
        p.time_us = t;
        p.stage_us = it % 3 ? floor(rnd() * 30) : 0;
        p.send_us = it % 4 ? snd : NULL;
        p.static_bytes = w;
        p.act_bytes = a;
        p.stages = 1 + (int)(rnd() * (p.n_layers < 5 ? p.n_layers : 5));
        p.microbatches = 1 + (int)(rnd() * 12);
        p.mem_limit = it % 5 ? floor(rnd() * 50 * p.n_layers / p.stages + 20) : 0;
        int first[MAXL + 1] = {0}, got[MAXL + 1];
        double want = brute(&p, 1, first, HUGE_VAL), est = -1;
        ss_diag d;
        ss_diag_init(&d);
        ss_status st = ss_stage_solve(&p, got, &est, &d);
        if (want == HUGE_VAL) {
            assert_int_equal(st, SS_ERR_INFEASIBLE);
            infeasible++;
            continue;
        }
        if (st != SS_OK)
            fail_msg("case %d: %s (brute force %.1f)", it, d.msg, want);
        feasible++;
        double peak, again = ss_stage_estimate(&p, got, &peak);
        assert_true(again == est);
        if (fabs(est - want) > 1e-9)
            fail_msg("case %d: DP %.3f, brute force %.3f", it, est, want);
        assert_int_equal(got[0], 0);
        assert_int_equal(got[p.stages], p.n_layers);
        for (int s = 0; s < p.stages; s++)
            assert_true(got[s] < got[s + 1]);
        if (p.mem_limit > 0)
            assert_true(peak <= p.mem_limit);
    }
    assert_true(feasible > 500);
    assert_true(infeasible > 50);
}

/* A heavy first and last layer (embedding, LM head): the DP gives them
 * stages of their own weight, not an even layer count. */
static void test_uneven(void **state)
{
    (void)state;
    double t[8] = {300, 100, 100, 100, 100, 100, 100, 300};
    ss_stage_problem p = {.n_layers = 8, .time_us = t, .stages = 3, .microbatches = 64};
    int first[12];
    double est;
    ss_diag d;
    ss_diag_init(&d);
    assert_int_equal(ss_stage_solve(&p, first, &est, &d), SS_OK);
    /* stages {0, 1}, {2..5}, {6, 7}: 400 each, 1200 + 63 * 400 */
    assert_true(fabs(est - (1200 + 63 * 400)) < 1e-9);
    assert_int_equal(first[1], 2);
    assert_int_equal(first[2], 6);
    p.stages = 9;
    ss_diag_init(&d);
    assert_int_equal(ss_stage_solve(&p, first, &est, &d), SS_ERR_INVALID);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random_vs_brute),
        cmocka_unit_test(test_uneven),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
