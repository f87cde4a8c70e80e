/*
 * test_averaging.c — the averaging round's load balancing
 * (search/averaging.h): golden cases (equal bandwidths give the butterfly
 * optimum 2 (n-1) V / (n b); a client-only peer's share is 0; a peer with
 * twice the bandwidth reduces the analytic larger share), the LP against an
 * independent optimum on random swarms (bisection on the round time: a time
 * xi is feasible iff every peer's bytes at share 0 fit and the accepting
 * peers' largest shares at xi sum to at least 1), the equal split and the
 * ring's closed forms, and the refusals. Runs first: COIN-OR CLP is opened
 * by the first LP (search/coin.h), not before, and LAPACK comes with it.
 */
#include "testutil.h"
#include "search/averaging.h"
#include "search/coin.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define V 100e6 /* bytes */

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static double rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (double)(rng >> 11) / 9007199254740992.0;
}

/* 1 if a library whose path contains `lib` is mapped in this process, 0 if
 * not, -1 without /proc. */
static int lib_mapped(const char *lib)
{
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f)
        return -1;
    char line[4096];
    int found = 0;
    while (!found && fgets(line, sizeof line, f))
        found = strstr(line, lib) != NULL;
    fclose(f);
    return found;
}

static void test_clp_on_first_use(void **state)
{
    (void)state;
    assert_false(ss_coin_clp_loaded());
    assert_true(lib_mapped("libClp") <= 0);
    assert_true(lib_mapped("liblapack") <= 0);
    ss_avg_peer p[2] = {{1e6, 1e6, 0, 1}, {1e6, 1e6, 0, 1}};
    double w[2], t;
    assert_int_equal(ss_averaging_solve(SS_AVG_EQUAL, p, 2, V, w, &t, NULL), SS_OK);
    assert_false(ss_coin_clp_loaded()); /* the equal split needs no LP */
    assert_int_equal(ss_averaging_solve(SS_AVG_LP, p, 2, V, w, &t, NULL), SS_OK);
    assert_true(ss_coin_clp_loaded());
    assert_true(lib_mapped("libClp") != 0);
}

static void test_butterfly_optimum(void **state)
{
    (void)state;
    for (int n = 2; n <= 12; n++) {
        ss_avg_peer p[12];
        double w[12], t;
        double b = 12.5e6; /* 100 Mb/s */
        for (int i = 0; i < n; i++)
            p[i] = (ss_avg_peer){b, b, 0, 1};
        assert_int_equal(ss_averaging_solve(SS_AVG_LP, p, n, V, w, &t, NULL), SS_OK);
        double want = 2.0 * (n - 1) * V / (n * b);
        assert_true(fabs(t - want) <= 1e-9 * want);
        assert_int_equal(ss_averaging_solve(SS_AVG_EQUAL, p, n, V, w, &t, NULL), SS_OK);
        assert_true(fabs(t - want) <= 1e-9 * want);
        for (int i = 0; i < n; i++)
            assert_true(fabs(w[i] - 1.0 / n) < 1e-12);
        assert_int_equal(ss_averaging_solve(SS_AVG_RING, p, n, V, w, &t, NULL), SS_OK);
        assert_true(fabs(t - want) <= 1e-9 * want);
    }
}

static void test_client_gets_nothing(void **state)
{
    (void)state;
    ss_avg_peer p[4] = {{50e6, 50e6, 0, 1}, {50e6, 50e6, 0, 1}, {100e6, 100e6, 0, 0},
                        {10e6, 10e6, 0, 1}};
    double w[4], t;
    assert_int_equal(ss_averaging_solve(SS_AVG_LP, p, 4, V, w, &t, NULL), SS_OK);
    assert_true(w[2] == 0.0);
    assert_true(fabs(w[0] + w[1] + w[3] - 1.0) < 1e-9);
    assert_int_equal(ss_averaging_solve(SS_AVG_EQUAL, p, 4, V, w, &t, NULL), SS_OK);
    assert_true(w[2] == 0.0 && fabs(w[0] - 1.0 / 3) < 1e-12);
}

/* Four peers, one with bandwidth 2b: (n-2) = 2, so at the optimum the times
 * V (1 + 2 w_i) / b_i are equal: 1 + 2 w = (1 + 2 w') / 2 with 3 w + w' = 1
 * gives w = 0.1, w' = 0.7, xi = 1.2 V / b (the equal split: 1.5 V / b). */
static void test_double_bandwidth(void **state)
{
    (void)state;
    double b = 10e6;
    ss_avg_peer p[4] = {{b, b, 0, 1}, {b, b, 0, 1}, {b, b, 0, 1}, {2 * b, 2 * b, 0, 1}};
    double w[4], t;
    assert_int_equal(ss_averaging_solve(SS_AVG_LP, p, 4, V, w, &t, NULL), SS_OK);
    for (int i = 0; i < 3; i++)
        assert_true(fabs(w[i] - 0.1) < 1e-7);
    assert_true(fabs(w[3] - 0.7) < 1e-7);
    assert_true(fabs(t - 1.2 * V / b) < 1e-6 * t);
    double te;
    assert_int_equal(ss_averaging_solve(SS_AVG_EQUAL, p, 4, V, w, &te, NULL), SS_OK);
    assert_true(fabs(te - 1.5 * V / b) < 1e-6 * te);
}

/* Is round time xi feasible? (the LP's constraints, solved by hand) */
static int feasible(const ss_avg_peer *p, int n, double xi)
{
    double cap = 0;
    for (int i = 0; i < n; i++) {
        double far = 0;
        for (int j = 0; j < n; j++)
            if (j != i)
                far = fmax(far, p[j].latency_s);
        double L = 2 * (p[i].latency_s + far);
        double b = fmin(p[i].up_Bps, p[i].down_Bps);
        double room = (xi - L) * b / V - 1.0; /* (n-2) w_i <= room */
        if (room < 0)
            return 0;
        if (p[i].accepts)
            cap += n > 2 ? fmin(1.0, room / (n - 2)) : 1.0;
    }
    return cap >= 1.0;
}

static void test_lp_against_bisection(void **state)
{
    (void)state;
    for (int trial = 0; trial < 300; trial++) {
        int n = 2 + (int)(rnd() * 14);
        ss_avg_peer p[16];
        int acc = 0;
        for (int i = 0; i < n; i++) {
            double up = 1e6 * (1 + 124 * rnd()), down = up * (1 + 9 * rnd());
            p[i] = (ss_avg_peer){up, down, 0.05 * rnd(), rnd() < 0.7};
            acc += p[i].accepts;
        }
        if (!acc)
            p[0].accepts = 1;
        double w[16], t;
        assert_int_equal(ss_averaging_solve(SS_AVG_LP, p, n, V, w, &t, NULL), SS_OK);
        double lo = 0, hi = 1e6;
        for (int it = 0; it < 200; it++) {
            double mid = 0.5 * (lo + hi);
            if (feasible(p, n, mid))
                hi = mid;
            else
                lo = mid;
        }
        assert_true(fabs(t - hi) <= 1e-6 * hi);
        double sum = 0;
        for (int i = 0; i < n; i++) {
            assert_true(w[i] >= 0 && (p[i].accepts || w[i] == 0));
            sum += w[i];
        }
        assert_true(fabs(sum - 1) < 1e-9);
        /* the LP never loses to the equal split */
        double te;
        assert_int_equal(ss_averaging_solve(SS_AVG_EQUAL, p, n, V, w, &te, NULL), SS_OK);
        assert_true(t <= te * (1 + 1e-9));
    }
}

static void test_ring_closed_form(void **state)
{
    (void)state;
    ss_avg_peer p[4] = {{10e6, 20e6, 0.01, 1}, {40e6, 40e6, 0.02, 1}, {5e6, 50e6, 0.03, 0},
                        {100e6, 100e6, 0.0, 1}};
    double w[4], t;
    assert_int_equal(ss_averaging_solve(SS_AVG_RING, p, 4, V, w, &t, NULL), SS_OK);
    double want = 2.0 * 3 / 4 * V / 5e6 + 2.0 * 3 * 0.05;
    assert_true(fabs(t - want) < 1e-9 * want);
    assert_true(fabs(w[2] - 0.25) < 1e-12);
}

static void test_refusals(void **state)
{
    (void)state;
    ss_avg_peer p[3] = {{1e6, 1e6, 0, 0}, {1e6, 1e6, 0, 0}, {1e6, 1e6, 0, 1}};
    double w[3] = {7, 7, 7}, t = 7;
    ss_diag d = {0};
    assert_int_equal(ss_averaging_solve(SS_AVG_RING, p, 3, V, w, &t, &d), SS_ERR_INFEASIBLE);
    assert_non_null(strstr(d.msg, "client-only"));
    p[2].accepts = 0;
    ss_diag_init(&d);
    assert_int_equal(ss_averaging_solve(SS_AVG_LP, p, 3, V, w, &t, &d), SS_ERR_INFEASIBLE);
    assert_true(w[0] == 7 && t == 7);
    p[1].up_Bps = 0;
    ss_diag_init(&d);
    assert_int_equal(ss_averaging_solve(SS_AVG_LP, p, 3, V, w, &t, &d), SS_ERR_INVALID);
    assert_non_null(strstr(d.msg, "peer 1"));
    assert_int_equal(ss_averaging_solve(SS_AVG_LP, p + 2, 1, V, w, &t, NULL), SS_OK);
    assert_true(w[0] == 1 && t == 0);
    ss_avg_method m;
    assert_int_equal(ss_avg_method_parse("ring", &m), 0);
    assert_int_equal(m, SS_AVG_RING);
    assert_int_equal(ss_avg_method_parse("rings", &m), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_clp_on_first_use),
        cmocka_unit_test(test_butterfly_optimum),  cmocka_unit_test(test_client_gets_nothing),
        cmocka_unit_test(test_double_bandwidth),   cmocka_unit_test(test_lp_against_bisection),
        cmocka_unit_test(test_ring_closed_form),   cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
