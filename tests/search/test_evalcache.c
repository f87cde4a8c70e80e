/*
 * test_evalcache.c — the search's cache of plan evaluations
 * (search/evalcache.h): config and plan hashes, what a second answer for
 * the same plan may change, growth, emptying when full, allocation
 * failures.
 */
#include "testutil.h"
#include "search/evalcache.h"

#include <string.h>

static ss_graph *two_ops(void)
{
    ss_graph *g = NULL;
    ss_diag d;
    ss_diag_init(&d);
    assert_int_equal(ss_model_build("mlp", 8, 1, &g, &d), SS_OK);
    assert_true(ss_graph_n_ops(g) >= 2);
    return g;
}

static ss_pconfig config(int *devs, int d0, int d1, int ntiles)
{
    ss_pconfig c;
    memset(&c, 0, sizeof c);
    c.ndim = 2;
    c.deg[0] = ntiles;
    c.deg[1] = 1;
    c.red = 1;
    c.rep = 1;
    c.ntiles = ntiles;
    c.devices = devs;
    devs[0] = d0;
    if (ntiles > 1)
        devs[1] = d1;
    return c;
}

static int same_hash(ss_planhash x, ss_planhash y) { return x.a == y.a && x.b == y.b; }

/* Equal configs hash equally; op, device order, degrees, reduction and
 * stage each change the hash. */
static void test_config_hash(void **state)
{
    (void)state;
    int d1[2], d2[2];
    ss_pconfig a = config(d1, 0, 1, 2), b = config(d2, 0, 1, 2);
    assert_true(same_hash(ss_evalcache_config_hash(3, &a), ss_evalcache_config_hash(3, &b)));
    assert_false(same_hash(ss_evalcache_config_hash(3, &a), ss_evalcache_config_hash(4, &a)));
    b = config(d2, 1, 0, 2);
    assert_false(same_hash(ss_evalcache_config_hash(3, &a), ss_evalcache_config_hash(3, &b)));
    b = config(d2, 0, 1, 2);
    b.deg[0] = 1;
    b.red = 2;
    assert_false(same_hash(ss_evalcache_config_hash(3, &a), ss_evalcache_config_hash(3, &b)));
    b = config(d2, 0, 1, 2);
    b.stage = 1;
    assert_false(same_hash(ss_evalcache_config_hash(3, &a), ss_evalcache_config_hash(3, &b)));
}

/* A plan's key is the XOR of its ops' config hashes: changing one op and
 * changing it back restores the key, and the XOR update gives the key from
 * scratch. */
static void test_plan_hash(void **state)
{
    (void)state;
    ss_graph *g = two_ops();
    ss_plan *p = ss_plan_new(g, NULL);
    ss_diag d;
    ss_diag_init(&d);
    ss_planhash h0 = ss_evalcache_plan_hash(p);
    /* op 1 moves from device 0 (ss_plan_new's default) to device 1 */
    ss_pconfig old = *ss_plan_config(p, 1), c = old;
    assert_int_equal(old.ntiles, 1);
    int olddev = old.devices[0], newdev = 1;
    old.devices = &olddev;
    c.devices = &newdev;
    assert_int_equal(ss_plan_set_config(p, 1, &c, &d), SS_OK);
    ss_planhash h1 = ss_evalcache_plan_hash(p);
    assert_false(same_hash(h0, h1));
    ss_planhash was = ss_evalcache_config_hash(1, &old), now = ss_evalcache_config_hash(1, &c);
    ss_planhash upd = {h0.a ^ was.a ^ now.a, h0.b ^ was.b ^ now.b};
    assert_true(same_hash(upd, h1));
    assert_int_equal(ss_plan_set_config(p, 1, &old, &d), SS_OK);
    assert_true(same_hash(ss_evalcache_plan_hash(p), h0));
    ss_plan_free(p);
    ss_graph_free(g);
}

static ss_evalcache_entry entry(ss_evalcache_kind k, double t)
{
    ss_evalcache_entry e;
    memset(&e, 0, sizeof e);
    e.kind = k;
    e.e.time_us = t;
    e.e.fits = k == SS_EVALCACHE_EXACT;
    e.e.beyond = k == SS_EVALCACHE_BEYOND;
    return e;
}

/* Exact and invalid answers are final; a bound grows, and gives way to an
 * exact answer. */
static void test_put_get(void **state)
{
    (void)state;
    ss_evalcache *c = ss_evalcache_new();
    assert_non_null(c);
    ss_evalcache_entry e, out;
    ss_planhash k1 = {1, 2}, k2 = {1, 3}, k3 = {0, 0}, k4 = {7, 7};
    assert_int_equal(ss_evalcache_get(c, k1, &out), 0);
    e = entry(SS_EVALCACHE_BEYOND, 10);
    ss_evalcache_put(c, k1, &e);
    assert_int_equal(ss_evalcache_get(c, k1, &out), 1);
    assert_int_equal(out.kind, SS_EVALCACHE_BEYOND);
    assert_true(out.e.time_us == 10);
    assert_int_equal(ss_evalcache_get(c, k2, &out), 0); /* both halves of the key count */
    e = entry(SS_EVALCACHE_BEYOND, 8);
    ss_evalcache_put(c, k1, &e);
    ss_evalcache_get(c, k1, &out);
    assert_true(out.e.time_us == 10);
    e = entry(SS_EVALCACHE_BEYOND, 12);
    ss_evalcache_put(c, k1, &e);
    ss_evalcache_get(c, k1, &out);
    assert_true(out.e.time_us == 12);
    e = entry(SS_EVALCACHE_EXACT, 15);
    ss_evalcache_put(c, k1, &e);
    e = entry(SS_EVALCACHE_BEYOND, 20);
    ss_evalcache_put(c, k1, &e);
    ss_evalcache_get(c, k1, &out);
    assert_int_equal(out.kind, SS_EVALCACHE_EXACT);
    assert_true(out.e.time_us == 15 && out.e.fits == 1);
    e = entry(SS_EVALCACHE_INVALID, 0);
    ss_evalcache_put(c, k3, &e); /* the all-zero key is a key like any other */
    e = entry(SS_EVALCACHE_EXACT, 3);
    ss_evalcache_put(c, k3, &e);
    assert_int_equal(ss_evalcache_get(c, k3, &out), 1);
    assert_int_equal(out.kind, SS_EVALCACHE_INVALID);
    assert_int_equal(ss_evalcache_get(c, k4, &out), 0);
    assert_int_equal(ss_evalcache_size(c), 2);
    ss_evalcache_free(c);
    ss_evalcache_free(NULL);
}

static ss_planhash key(int64_t i)
{
    ss_planhash h = {(uint64_t)i * 0x9e3779b97f4a7c15ull, (uint64_t)i};
    return h;
}

/* 100,000 keys: the table grows and keeps all; 300,000: it is emptied
 * when full (at most 2^18 held), and the newest keys are still there. */
static void test_growth_and_flush(void **state)
{
    (void)state;
    ss_evalcache *c = ss_evalcache_new();
    ss_evalcache_entry e, out;
    for (int64_t i = 0; i < 100000; i++) {
        e = entry(SS_EVALCACHE_EXACT, (double)i);
        ss_evalcache_put(c, key(i), &e);
    }
    assert_int_equal(ss_evalcache_size(c), 100000);
    assert_int_equal(ss_evalcache_flushes(c), 0);
    for (int64_t i = 0; i < 100000; i++) {
        assert_int_equal(ss_evalcache_get(c, key(i), &out), 1);
        assert_true(out.e.time_us == (double)i);
    }
    for (int64_t i = 100000; i < 300000; i++) {
        e = entry(SS_EVALCACHE_EXACT, (double)i);
        ss_evalcache_put(c, key(i), &e);
    }
    assert_int_equal(ss_evalcache_flushes(c), 1);
    assert_true(ss_evalcache_size(c) <= (1 << 18));
    assert_int_equal(ss_evalcache_size(c), 300000 - (1 << 18));
    assert_int_equal(ss_evalcache_get(c, key(299999), &out), 1);
    assert_int_equal(ss_evalcache_get(c, key(5), &out), 0);
    ss_evalcache_free(c);
}

/* No memory for the cache: NULL. No memory to grow: the table keeps
 * filling, then empties, and put never fails. */
static void test_nomem(void **state)
{
    (void)state;
    ss_test_fail_after(0);
    assert_null(ss_evalcache_new());
    ss_test_fail_after(1);
    assert_null(ss_evalcache_new());
    ss_test_fail_after(-1);
    ss_evalcache *c = ss_evalcache_new();
    ss_test_fail_after(0);
    ss_evalcache_entry e = entry(SS_EVALCACHE_EXACT, 1), out;
    for (int64_t i = 0; i < 4095; i++)
        ss_evalcache_put(c, key(i), &e);
    assert_int_equal(ss_evalcache_size(c), 4095);
    assert_int_equal(ss_evalcache_get(c, key(4094), &out), 1);
    ss_evalcache_put(c, key(4095), &e);
    assert_int_equal(ss_evalcache_flushes(c), 1);
    assert_int_equal(ss_evalcache_size(c), 1);
    assert_int_equal(ss_evalcache_get(c, key(4095), &out), 1);
    ss_test_fail_after(-1);
    ss_evalcache_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_config_hash),
        cmocka_unit_test(test_plan_hash),
        cmocka_unit_test(test_put_get),
        cmocka_unit_test(test_growth_and_flush),
        cmocka_unit_test(test_nomem),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
