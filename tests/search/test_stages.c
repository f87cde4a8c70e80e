/*
 * test_stages.c — the pipeline-cut DP (search/stages.h) against brute force
 * over every cut and every mode per stage: on random layer sequences (1 to
 * 9 layers, 1 to 5 stages, 1 to 12 micro-batches, 1 to 3 modes (recompute
 * none / full / selective: random per-layer times and activation memory
 * per mode, also modes that trade time for memory as recomputation does),
 * random sends and static memory, and a memory limit), the DP's estimate
 * equals the least estimate over all cuts and modes that fit, its cut and
 * modes fit, and it reports infeasible exactly when nothing fits. A case
 * where only per-stage modes fit (the first stage holds the most
 * micro-batches in flight) and beat the one mode that fits everywhere.
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

/* Least estimate over all cuts (first[1..S-1] strictly increasing) and all
 * modes per stage (mode[0..S-1]) that fit. */
static double brute_modes(const ss_stage_problem *p, const int *first, int s, int *mode,
                          double best)
{
    int S = p->stages, K = p->n_modes > 0 ? p->n_modes : 1;
    if (s == S) {
        double peak, t = ss_stage_estimate(p, first, mode, &peak);
        return (p->mem_limit <= 0 || peak <= p->mem_limit) && t < best ? t : best;
    }
    for (int r = 0; r < K; r++) {
        mode[s] = r;
        best = brute_modes(p, first, s + 1, mode, best);
    }
    return best;
}

static double brute(const ss_stage_problem *p, int s, int *first, double best)
{
    int S = p->stages, n = p->n_layers;
    if (s == S) {
        int mode[MAXL];
        first[S] = n;
        return brute_modes(p, first, 0, mode, best);
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
    int feasible = 0, infeasible = 0, mixed = 0;
    for (int it = 0; it < 3000; it++) {
        double t[3][MAXL], snd[MAXL], w[MAXL], a[3][MAXL];
        ss_stage_problem p = {0};
        p.n_layers = 1 + (int)(rnd() * MAXL);
        p.n_modes = it % 3 == 0 ? 0 : 1 + (int)(rnd() * 3); /* 0: one mode, as 1 */
        int K = p.n_modes > 0 ? p.n_modes : 1;
        for (int i = 0; i < p.n_layers; i++) {
            t[0][i] = floor(1 + rnd() * 100);
            a[0][i] = floor(rnd() * 10);
            snd[i] = floor(rnd() * 20);
            w[i] = floor(rnd() * 50);
            for (int r = 1; r < K; r++) {
                if (it % 2) { /* recomputation: more time, fewer activations */
                    t[r][i] = t[0][i] + floor(rnd() * t[0][i]);
                    a[r][i] = floor(rnd() * (a[0][i] + 1));
                } else { /* anything */
                    t[r][i] = floor(1 + rnd() * 100);
                    a[r][i] = floor(rnd() * 10);
                }
            }
        }
        for (int r = 0; r < K; r++) {
            p.time_us[r] = t[r];
            p.act_bytes[r] = a[r];
        }
        p.stage_us = it % 3 ? floor(rnd() * 30) : 0;
        p.send_us = it % 4 ? snd : NULL;
        p.static_bytes = w;
        p.stages = 1 + (int)(rnd() * (p.n_layers < 5 ? p.n_layers : 5));
        p.microbatches = 1 + (int)(rnd() * 12);
        p.mem_limit = it % 5 ? floor(rnd() * 50 * p.n_layers / p.stages + 20) : 0;
        int first[MAXL + 1] = {0}, got[MAXL + 1], mode[MAXL];
        for (int s = 0; s < MAXL; s++)
            mode[s] = -1;
        double want = brute(&p, 1, first, HUGE_VAL), est = -1;
        ss_diag d;
        ss_diag_init(&d);
        ss_status st = ss_stage_solve(&p, got, mode, &est, &d);
        if (want == HUGE_VAL) {
            assert_int_equal(st, SS_ERR_INFEASIBLE);
            infeasible++;
            continue;
        }
        if (st != SS_OK)
            fail_msg("case %d: %s (brute force %.1f)", it, d.msg, want);
        feasible++;
        double peak, again = ss_stage_estimate(&p, got, mode, &peak);
        assert_true(again == est);
        if (fabs(est - want) > 1e-9)
            fail_msg("case %d: DP %.3f, brute force %.3f", it, est, want);
        assert_int_equal(got[0], 0);
        assert_int_equal(got[p.stages], p.n_layers);
        for (int s = 0; s < p.stages; s++) {
            assert_true(got[s] < got[s + 1]);
            assert_true(mode[s] >= 0 && mode[s] < K);
            mixed += s > 0 && mode[s] != mode[0];
        }
        if (p.mem_limit > 0)
            assert_true(peak <= p.mem_limit);
    }
    assert_true(feasible > 800);
    assert_true(infeasible > 80);
    assert_true(mixed > 100); /* the per-stage choice is exercised */
}

/* Two modes (0: no recompute, fast and heavy; 1: recompute, slower and
 * light), 4 equal layers, 4 stages, 8 micro-batches: stage s holds 4 - s
 * micro-batches in flight, so mode 0 overflows on the first stages only.
 * The DP recomputes there and nowhere else, and beats the one mode that
 * fits everywhere. */
static void test_per_stage_pays(void **state)
{
    (void)state;
    double t0[4] = {100, 100, 100, 100}, t1[4] = {130, 130, 130, 130};
    double a0[4] = {10, 10, 10, 10}, a1[4] = {1, 1, 1, 1}, w[4] = {5, 5, 5, 5};
    ss_stage_problem p = {.n_layers = 4, .n_modes = 2, .time_us = {t0, t1},
                          .act_bytes = {a0, a1}, .static_bytes = w, .stages = 4,
                          .microbatches = 8, .mem_limit = 25};
    int first[5], mode[4];
    double est, one;
    ss_diag d;
    ss_diag_init(&d);
    assert_int_equal(ss_stage_solve(&p, first, mode, &est, &d), SS_OK);
    /* memory 5 + (4 - s) * 10 in mode 0: fits stages 2 and 3 (25, 15) */
    assert_int_equal(mode[0], 1);
    assert_int_equal(mode[1], 1);
    assert_int_equal(mode[2], 0);
    assert_int_equal(mode[3], 0);
    /* 130 + 130 + 100 + 100 + 7 * 130 */
    assert_true(fabs(est - (460 + 7 * 130)) < 1e-9);
    p.n_modes = 1;
    p.time_us[0] = t1;
    p.act_bytes[0] = a1;
    assert_int_equal(ss_stage_solve(&p, first, NULL, &one, &d), SS_OK);
    assert_true(fabs(one - (520 + 7 * 130)) < 1e-9);
    assert_true(est < one);
    p.time_us[0] = t0;
    p.act_bytes[0] = a0;
    assert_int_equal(ss_stage_solve(&p, first, NULL, &one, &d), SS_ERR_INFEASIBLE);
    p.n_modes = 4;
    assert_int_equal(ss_stage_solve(&p, first, NULL, &one, &d), SS_ERR_INVALID);
}

/* A heavy first and last layer (embedding, LM head): the DP gives them
 * stages of their own weight, not an even layer count. */
static void test_uneven(void **state)
{
    (void)state;
    double t[8] = {300, 100, 100, 100, 100, 100, 100, 300};
    ss_stage_problem p = {.n_layers = 8, .time_us = {t}, .stages = 3, .microbatches = 64};
    int first[12];
    double est;
    ss_diag d;
    ss_diag_init(&d);
    assert_int_equal(ss_stage_solve(&p, first, NULL, &est, &d), SS_OK);
    /* stages {0, 1}, {2..5}, {6, 7}: 400 each, 1200 + 63 * 400 */
    assert_true(fabs(est - (1200 + 63 * 400)) < 1e-9);
    assert_int_equal(first[1], 2);
    assert_int_equal(first[2], 6);
    p.stages = 9;
    ss_diag_init(&d);
    assert_int_equal(ss_stage_solve(&p, first, NULL, &est, &d), SS_ERR_INVALID);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random_vs_brute),
        cmocka_unit_test(test_uneven),
        cmocka_unit_test(test_per_stage_pays),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
