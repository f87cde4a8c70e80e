/*
 * test_space.c — the per-op candidate configs of the search space and the
 * seeded PRNG (search/space.h). Expected counts are derived by hand in the
 * comments from the splittable dims, contraction and device count.
 */
#include "testutil.h"
#include "search/space.h"

#include <string.h>

/* x: input [8, 6] (sample, parameter); fc: linear 6 -> 4, out [8, 4],
 * contraction 6. */
static ss_graph *two_op_graph(void)
{
    ss_diag d;
    ss_diag_init(&d);
    ss_graph *g = ss_graph_new("two");
    assert_non_null(g);
    ss_op_attrs a;
    memset(&a, 0, sizeof a);
    a.ndim = 2;
    a.shape[0] = 8;
    a.shape[1] = 6;
    a.kind[0] = SS_DIM_SAMPLE;
    a.kind[1] = SS_DIM_PARAMETER;
    a.dtype = SS_F32;
    int x = ss_graph_add(g, "x", SS_OP_INPUT, &a, 0, NULL, &d);
    assert_int_equal(x, 0);
    memset(&a, 0, sizeof a);
    a.out_features = 4;
    int in = ss_graph_out(g, x);
    int fc = ss_graph_add(g, "fc", SS_OP_LINEAR, &a, 1, &in, &d);
    assert_int_equal(fc, 1);
    ss_graph_set_training(g, 8, SS_OPT_SGD, SS_PREC_FP32);
    return g;
}

static ss_space *make_space(const ss_graph *g, int n_dev)
{
    ss_space_opts o = {n_dev, 0};
    ss_space *s = NULL;
    ss_diag d;
    ss_diag_init(&d);
    assert_int_equal(ss_space_new(g, &o, &s, &d), SS_OK);
    assert_non_null(s);
    return s;
}

/* On 4 devices (tile counts must divide 4):
 *   x  dims 8 and 6 split; degrees (1,1) (1,2) (2,1) (2,2) (4,1): 5 tuples.
 *      placements: T=1 -> 4 single devices; T=2 -> 2 blocks + 2 strided = 4;
 *      T=4 -> 1 block (strided == block when T == N). 4 + 4 + 4 + 1 + 1 = 14.
 *   fc dims 8, 4 and red over 6 (only 2 divides both 6 and 4):
 *      T=1: (1,1,1); T=2: (1,1,2) (1,2,1) (2,1,1);
 *      T=4: (1,2,2) (1,4,1) (2,1,2) (2,2,1) (4,1,1): 9 tuples,
 *      4 + 3*4 + 5*1 = 21 candidates. */
static void test_counts(void **state)
{
    (void)state;
    ss_graph *g = two_op_graph();
    ss_space *s = make_space(g, 4);
    assert_int_equal(ss_space_n_ops(s), 2);
    assert_int_equal(ss_space_n_tuples(s, 0), 5);
    assert_int_equal(ss_space_n_candidates(s, 0), 14);
    assert_int_equal(ss_space_n_tuples(s, 1), 9);
    assert_int_equal(ss_space_n_candidates(s, 1), 21);
    assert_true(ss_space_log10_size(s) > 2.468 && ss_space_log10_size(s) < 2.469); /* log10(294) */
    ss_space_free(s);

    /* One device: only the unsplit config on device 0. */
    s = make_space(g, 1);
    assert_int_equal(ss_space_n_candidates(s, 0), 1);
    assert_int_equal(ss_space_n_candidates(s, 1), 1);
    ss_space_free(s);

    /* max_tiles 2 on 4 devices: fc keeps T<=2: 4 + 3*4 = 16. */
    ss_space_opts o = {4, 2};
    ss_diag d;
    ss_diag_init(&d);
    assert_int_equal(ss_space_new(g, &o, &s, &d), SS_OK);
    assert_int_equal(ss_space_n_candidates(s, 1), 16);
    ss_space_free(s);

    /* Invalid: no devices. */
    ss_space_opts bad = {0, 0};
    s = NULL;
    assert_int_equal(ss_space_new(g, &bad, &s, &d), SS_ERR_INVALID);
    assert_null(s);
    ss_graph_free(g);
}

/* Every candidate is valid, distinct from the others, and found again. */
static void test_candidates_valid_distinct(void **state)
{
    (void)state;
    ss_graph *g = two_op_graph();
    ss_space *s = make_space(g, 4);
    int devs[64][4];
    ss_pconfig c[64];
    for (int op = 0; op < 2; op++) {
        const ss_tensor *out = ss_graph_tensor(g, ss_graph_out(g, op));
        int64_t n = ss_space_n_candidates(s, op);
        for (int64_t i = 0; i < n; i++) {
            c[i].devices = devs[i];
            ss_space_candidate(s, op, i, &c[i], devs[i]);
            int64_t prod = c[i].red;
            for (int k = 0; k < c[i].ndim; k++) {
                assert_int_equal(out->shape[k] % c[i].deg[k], 0);
                prod *= c[i].deg[k];
            }
            assert_int_equal(prod, c[i].ntiles);
            assert_int_equal(4 % c[i].ntiles, 0);
            for (int k = 0; k < c[i].ntiles; k++) {
                assert_in_range(c[i].devices[k], 0, 3);
                for (int l = 0; l < k; l++)
                    assert_int_not_equal(c[i].devices[k], c[i].devices[l]);
            }
            assert_true(ss_space_allows(s, op, &c[i]));
            assert_int_equal(ss_space_find(s, op, &c[i]), i);
            for (int64_t j = 0; j < i; j++) {
                int same = c[i].ntiles == c[j].ntiles && c[i].red == c[j].red &&
                           !memcmp(c[i].deg, c[j].deg, sizeof c[i].deg) &&
                           !memcmp(c[i].devices, c[j].devices,
                                   (size_t)c[i].ntiles * sizeof(int));
                assert_false(same);
            }
        }
    }
    ss_space_free(s);
    ss_graph_free(g);
}

/* Placements of a T=2 tuple on 4 devices: blocks {0,1} {2,3}, strided
 * {0,2} {1,3}. fc's candidates in order: T=1 tuple (1,1,1) is enumerated
 * first (degrees grow depth-first from dim 0: (1,1,1) (1,1,2) (1,2,1) (1,2,2)
 * (1,4,1) (2,1,1) ...), so candidates 0..3 are single devices 0..3, and
 * candidates 4..7 are tuple (1,1,2): {0,1} {2,3} {0,2} {1,3}. */
static void test_placements(void **state)
{
    (void)state;
    ss_graph *g = two_op_graph();
    ss_space *s = make_space(g, 4);
    int devs[4];
    ss_pconfig c;
    c.devices = devs;
    for (int i = 0; i < 4; i++) {
        ss_space_candidate(s, 1, i, &c, devs);
        assert_int_equal(c.ntiles, 1);
        assert_int_equal(c.devices[0], i);
    }
    static const int want[4][2] = {{0, 1}, {2, 3}, {0, 2}, {1, 3}};
    for (int i = 0; i < 4; i++) {
        ss_space_candidate(s, 1, 4 + i, &c, devs);
        assert_int_equal(c.ntiles, 2);
        assert_int_equal(c.red, 2);
        assert_int_equal(c.deg[0], 1);
        assert_int_equal(c.deg[1], 1);
        assert_int_equal(c.devices[0], want[i][0]);
        assert_int_equal(c.devices[1], want[i][1]);
        assert_int_equal(c.stage, 0);
    }
    ss_space_free(s);
    ss_graph_free(g);
}

static void test_allows(void **state)
{
    (void)state;
    ss_graph *g = two_op_graph();
    ss_space *s = make_space(g, 4);
    int devs[4] = {3, 1, 0, 2};
    ss_pconfig c;
    memset(&c, 0, sizeof c);
    c.devices = devs;
    c.ndim = 2;
    c.deg[0] = 2;
    c.deg[1] = 2;
    c.red = 1;
    c.rep = 1;
    c.ntiles = 4;
    /* A permuted placement is allowed (starts may use their own). */
    assert_true(ss_space_allows(s, 1, &c));
    assert_int_equal(ss_space_find(s, 1, &c), -1);
    devs[1] = 3; /* duplicate device */
    assert_false(ss_space_allows(s, 1, &c));
    devs[1] = 4; /* out of range */
    assert_false(ss_space_allows(s, 1, &c));
    devs[1] = 1;
    c.deg[1] = 4; /* 8 tiles > 4 devices */
    c.ntiles = 8;
    assert_false(ss_space_allows(s, 1, &c));
    c.deg[1] = 1;
    c.red = 3; /* 3 divides 6 but not the device count */
    c.ntiles = 6;
    assert_false(ss_space_allows(s, 1, &c));
    c.red = 1;
    c.ntiles = 2;
    c.ndim = 3; /* wrong rank */
    assert_false(ss_space_allows(s, 1, &c));
    ss_space_free(s);
    ss_graph_free(g);
}

/* The PRNG: same seed, same stream; different seeds differ; ranges. And
 * ss_space_random picks tuples uniformly: 9,000 draws over fc's 9 tuples
 * give each about 1,000 (binomial sd ~31.6; +-200 is > 6 sd). */
static void test_rng_and_random(void **state)
{
    (void)state;
    ss_rng a, b;
    ss_rng_seed(&a, 42);
    ss_rng_seed(&b, 42);
    for (int i = 0; i < 100; i++)
        assert_true(ss_rng_next(&a) == ss_rng_next(&b));
    ss_rng_seed(&b, 43);
    assert_false(ss_rng_next(&a) == ss_rng_next(&b));
    for (int i = 0; i < 10000; i++) {
        double u = ss_rng_unit(&a);
        assert_true(u >= 0 && u < 1);
        int64_t k = ss_rng_below(&a, 7);
        assert_true(k >= 0 && k < 7);
    }

    ss_graph *g = two_op_graph();
    ss_space *s = make_space(g, 4);
    int devs[4];
    ss_pconfig c;
    c.devices = devs;
    int key[9], count[9] = {0}, n_keys = 0;
    ss_rng_seed(&a, 7);
    for (int i = 0; i < 9000; i++) {
        ss_space_random(s, 1, &a, &c, devs);
        assert_true(ss_space_find(s, 1, &c) >= 0);
        int k = c.deg[0] * 100 + c.deg[1] * 10 + c.red, t = 0;
        while (t < n_keys && key[t] != k)
            t++;
        if (t == n_keys) {
            assert_true(n_keys < 9);
            key[n_keys++] = k;
        }
        count[t]++;
    }
    assert_int_equal(n_keys, 9);
    for (int t = 0; t < 9; t++)
        assert_in_range(count[t], 800, 1200);

    /* Random plans: every op set to a candidate of the space. */
    ss_plan *p = ss_plan_new(g, NULL);
    ss_diag d;
    ss_diag_init(&d);
    assert_int_equal(ss_space_random_plan(s, &a, p, &d), SS_OK);
    for (int op = 0; op < 2; op++)
        assert_true(ss_space_find(s, op, ss_plan_config(p, op)) >= 0);
    ss_plan_free(p);
    ss_space_free(s);
    ss_graph_free(g);
}

/* Allocation failures while building the space: clean error, no leak. */
static void test_nomem(void **state)
{
    (void)state;
    ss_graph *g = two_op_graph();
    ss_space_opts o = {4, 0};
    for (long k = 0; k < 20; k++) {
        ss_space *s = NULL;
        ss_diag d;
        ss_diag_init(&d);
        ss_test_fail_after(k);
        ss_status st = ss_space_new(g, &o, &s, &d);
        ss_test_fail_after(-1);
        if (st == SS_OK) {
            assert_int_equal(ss_space_n_candidates(s, 1), 21);
            ss_space_free(s);
            break;
        }
        assert_int_equal(st, SS_ERR_NOMEM);
        assert_null(s);
    }
    ss_graph_free(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_counts),
        cmocka_unit_test(test_candidates_valid_distinct),
        cmocka_unit_test(test_placements),
        cmocka_unit_test(test_allows),
        cmocka_unit_test(test_rng_and_random),
        cmocka_unit_test(test_nomem),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
