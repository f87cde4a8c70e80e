/*
 * test_delta.c — delta simulation equals full simulation (simulator/delta.h).
 *
 * Property test: a random walk over plans that mimics the MCMC (one-op
 * moves from a committed base, some accepted, most rejected; now and then a
 * multi-op jump with changed = -1), over four models and two machines, for
 * 10,000 proposals in all. EVERY proposal is evaluated by the delta
 * simulator and by ss_sim_run, and the iteration time, fits and every
 * device's peak memory must be bit-for-bit equal.
 */
#include "testutil.h"
#include "search/space.h"
#include "simulator/delta.h"

#include <string.h>

typedef struct walk_case {
    const char *model;
    int64_t batch;
    const char *topology;
    int nodes;
    int proposals;
    const char *plan; /* the base plan's spec; NULL = data parallelism */
} walk_case;

static const walk_case cases[] = {
    {"mlp:layers=3,hidden=256,in=256,classes=16", 64, "topologies/p100x16.json", 2, 2500, NULL},
    {"alexnet", 32, "topologies/k80x64.json", 1, 2500, NULL},
    {"rnnlm:steps=3,hidden=256,vocab=1000", 32, "topologies/p100x16.json", 1, 2500, NULL},
    {"gpt:layers=2,hidden=128,heads=4,seq=32,vocab=512", 16, "topologies/p100x16.json", 2,
     2500, NULL},
    /* Megatron tp = 8 over two pipeline stages on two nodes: replicas,
     * partial-sum all-reduces, blocking 1F1B sends and scatter-gather
     * stage sends in the base plan */
    {"gpt:layers=2,hidden=128,heads=8,seq=32,vocab=512", 16, "topologies/dgx-a100.json", 2,
     400, "megatron:tp=8,pp=2,dp=1,mb=2"},
};

typedef struct totals {
    long proposals, full_equal, delta_runs;
    int64_t tasks_total, tasks_resim;
} totals;

static void check_equal(const ss_sim_result *full, const ss_delta_eval *de, int n_dev,
                        const char *model, int step)
{
    if (full->iteration_us != de->iteration_us)
        fail_msg("%s step %d: delta %.17g us, full %.17g us", model, step, de->iteration_us,
                 full->iteration_us);
    assert_int_equal(full->fits, de->fits);
    assert_int_equal(full->n_tasks, de->n_tasks);
    for (int k = 0; k < n_dev; k++)
        if (full->peak_memory_bytes[k] != de->peak_memory_bytes[k])
            fail_msg("%s step %d: device %d peak delta %.17g, full %.17g", model, step, k,
                     de->peak_memory_bytes[k], full->peak_memory_bytes[k]);
}

static void walk(const walk_case *wc, uint64_t seed, totals *tot)
{
    ss_diag d;
    ss_diag_init(&d);
    ss_machine *m = NULL;
    assert_int_equal(ss_machine_load_nodes(ss_test_path(wc->topology), wc->nodes, &m, &d), SS_OK);
    int N = ss_machine_n_devices(m);
    ss_graph *g = NULL;
    if (ss_model_build(wc->model, wc->batch, N, &g, &d) != SS_OK)
        fail_msg("%s: %s", wc->model, d.msg);
    ss_costmodel *cm = ss_cost_new(m);
    ss_sim *sim = NULL;
    assert_int_equal(ss_sim_new(g, m, cm, NULL, &sim, &d), SS_OK);
    ss_delta *dl = NULL;
    assert_int_equal(ss_delta_new(g, m, cm, &dl, &d), SS_OK);
    ss_space *sp = NULL;
    ss_space_opts so = {N, 0};
    assert_int_equal(ss_space_new(g, &so, &sp, &d), SS_OK);

    ss_plan *p = NULL;
    if (wc->plan)
        assert_int_equal(ss_plan_from_spec(wc->plan, g, m, &p, &d), SS_OK);
    else
        assert_int_equal(ss_plan_data_parallel(g, m, 0, &p, &d), SS_OK);
    ss_rng rng;
    ss_rng_seed(&rng, seed);
    int *buf = test_malloc((size_t)N * sizeof *buf), *old_buf = test_malloc((size_t)N * 64 * sizeof(int));
    ss_pconfig prop, old;
    prop.devices = buf;
    old.devices = old_buf;
    ss_sim_result full;
    memset(&full, 0, sizeof full);
    ss_delta_eval de;

    /* the base: DP, committed */
    assert_int_equal(ss_delta_run(dl, p, -1, &de, &d), SS_OK);
    assert_int_equal(ss_sim_run(sim, p, &full, &d), SS_OK);
    check_equal(&full, &de, N, wc->model, -1);
    ss_delta_commit(dl);

    int n_ops = ss_graph_n_ops(g);
    for (int step = 0; step < wc->proposals; step++) {
        if (ss_rng_below(&rng, 200) == 0) {
            /* a jump: a fresh random plan (changed = -1), committed */
            assert_int_equal(ss_space_random_plan(sp, &rng, p, &d), SS_OK);
            assert_int_equal(ss_delta_run(dl, p, -1, &de, &d), SS_OK);
            assert_int_equal(ss_sim_run(sim, p, &full, &d), SS_OK);
            check_equal(&full, &de, N, wc->model, step);
            ss_delta_commit(dl);
            tot->proposals++;
            continue;
        }
        int op = (int)ss_rng_below(&rng, n_ops);
        ss_space_random(sp, op, &rng, &prop);
        const ss_pconfig *c = ss_plan_config(p, op);
        memcpy(old_buf, c->devices, (size_t)c->ntiles * sizeof(int));
        old = *c;
        old.devices = old_buf;
        prop.stage = c->stage;
        assert_int_equal(ss_plan_set_config(p, op, &prop, &d), SS_OK);
        ss_status s1 = ss_delta_run(dl, p, op, &de, &d);
        ss_diag d2;
        ss_diag_init(&d2);
        ss_status s2 = ss_sim_run(sim, p, &full, &d2);
        assert_int_equal(s1, s2);
        tot->proposals++;
        if (s1 == SS_OK) {
            check_equal(&full, &de, N, wc->model, step);
            tot->full_equal++;
        }
        ss_diag_init(&d);
        /* accept about a third of the runnable moves */
        if (s1 == SS_OK && ss_rng_below(&rng, 3) == 0)
            ss_delta_commit(dl);
        else
            assert_int_equal(ss_plan_set_config(p, op, &old, &d), SS_OK);
    }
    const ss_delta_stats *ds = ss_delta_stats_of(dl);
    tot->delta_runs += ds->delta_runs;
    tot->tasks_total += ds->tasks_total;
    tot->tasks_resim += ds->tasks_resimulated;
    assert_true(ds->delta_runs > 0);
    assert_int_equal(ds->refused, 0);
    assert_true(ds->tasks_resimulated < ds->tasks_total);

    test_free(buf);
    test_free(old_buf);
    ss_sim_result_clear(&full);
    ss_plan_free(p);
    ss_space_free(sp);
    ss_delta_free(dl);
    ss_sim_free(sim);
    ss_cost_free(cm);
    ss_graph_free(g);
    ss_machine_free(m);
}

static void test_delta_equals_full(void **state)
{
    (void)state;
    totals tot;
    memset(&tot, 0, sizeof tot);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        walk(&cases[i], 1000 + i, &tot);
    assert_true(tot.proposals >= 10000);
    assert_true(tot.full_equal >= 9000);
    print_message("delta = full on %ld proposals (%ld compared), %ld delta runs, "
                  "%.1f%% of tasks re-simulated\n",
                  tot.proposals, tot.full_equal, tot.delta_runs,
                  100.0 * (double)tot.tasks_resim / (double)tot.tasks_total);
}

/* The protocol: without commit the next run is relative to the old base;
 * evaluating the base again gives its own time. */
static void test_protocol(void **state)
{
    (void)state;
    ss_diag d;
    ss_diag_init(&d);
    ss_machine *m = NULL;
    assert_int_equal(ss_machine_load_nodes(ss_test_path("topologies/p100x16.json"), 1, &m, &d),
                     SS_OK);
    ss_graph *g = NULL;
    assert_int_equal(ss_model_build("mlp", 64, 4, &g, &d), SS_OK);
    ss_costmodel *cm = ss_cost_new(m);
    ss_delta *dl = NULL;
    assert_int_equal(ss_delta_new(g, m, cm, &dl, &d), SS_OK);
    ss_plan *p = NULL;
    assert_int_equal(ss_plan_data_parallel(g, m, 0, &p, &d), SS_OK);
    ss_delta_eval e0, e1, e2;
    assert_int_equal(ss_delta_run(dl, p, -1, &e0, &d), SS_OK);
    double base = e0.iteration_us;
    ss_delta_commit(dl);
    /* move the first linear op onto device 0 alone: a different time (4x
     * its compute on device 0, no gradient all-reduce for its weight) */
    int op = 0;
    while (ss_graph_op(g, op)->type != SS_OP_LINEAR)
        op++;
    ss_pconfig c = *ss_plan_config(p, op);
    assert_int_equal(c.ntiles, 4);
    int dev0 = 0;
    ss_pconfig one = c;
    for (int k = 0; k < SS_MAX_DIMS; k++)
        one.deg[k] = 1;
    one.red = 1;
    one.ntiles = 1;
    one.devices = &dev0;
    int saved[4];
    memcpy(saved, c.devices, sizeof saved);
    c.devices = saved;
    assert_int_equal(ss_plan_set_config(p, op, &one, &d), SS_OK);
    assert_int_equal(ss_delta_run(dl, p, op, &e1, &d), SS_OK);
    assert_true(e1.iteration_us != base);
    /* reject: restore, evaluate again relative to the same base */
    assert_int_equal(ss_plan_set_config(p, op, &c, &d), SS_OK);
    assert_int_equal(ss_delta_run(dl, p, op, &e2, &d), SS_OK);
    assert_true(e2.iteration_us == base);
    const ss_delta_stats *st = ss_delta_stats_of(dl);
    assert_int_equal(st->runs, 3);
    assert_int_equal(st->full_runs, 1);
    assert_int_equal(st->delta_runs, 2);
    ss_plan_free(p);
    ss_delta_free(dl);
    ss_cost_free(cm);
    ss_graph_free(g);
    ss_machine_free(m);
}

/* Allocation failures anywhere in ss_delta_new / ss_delta_run (full and
 * delta) give SS_ERR_NOMEM; after one, the same delta object, with the
 * allocator healthy again, still evaluates the proposal exactly as
 * ss_sim_run does (the base was left unchanged). Loops over every
 * allocation point until a run needs none of them to fail. */
static void test_alloc_failures(void **state)
{
    (void)state;
    ss_diag d;
    ss_diag_init(&d);
    ss_machine *m = NULL;
    assert_int_equal(ss_machine_load_nodes(ss_test_path("topologies/p100x16.json"), 1, &m, &d),
                     SS_OK);
    ss_graph *g = NULL;
    assert_int_equal(ss_model_build("mlp", 64, 4, &g, &d), SS_OK);
    ss_plan *p = NULL;
    assert_int_equal(ss_plan_data_parallel(g, m, 0, &p, &d), SS_OK);
    int op = 0;
    while (ss_graph_op(g, op)->type != SS_OP_LINEAR)
        op++;
    ss_pconfig base = *ss_plan_config(p, op), one = base;
    int saved[4], dev0 = 0;
    memcpy(saved, base.devices, sizeof saved);
    base.devices = saved;
    for (int k = 0; k < SS_MAX_DIMS; k++)
        one.deg[k] = 1;
    one.red = 1;
    one.ntiles = 1;
    one.devices = &dev0;
    /* the expected numbers, from the full simulator */
    ss_costmodel *cm0 = ss_cost_new(m);
    ss_sim *sim = NULL;
    assert_int_equal(ss_sim_new(g, m, cm0, NULL, &sim, &d), SS_OK);
    ss_sim_result want0, want1;
    memset(&want0, 0, sizeof want0);
    memset(&want1, 0, sizeof want1);
    assert_int_equal(ss_sim_run(sim, p, &want0, &d), SS_OK);
    assert_int_equal(ss_plan_set_config(p, op, &one, &d), SS_OK);
    assert_int_equal(ss_sim_run(sim, p, &want1, &d), SS_OK);
    assert_int_equal(ss_plan_set_config(p, op, &base, &d), SS_OK);

    int done = 0, failures = 0;
    for (long k = 0; k < 100000 && !done; k++) {
        ss_costmodel *cm = ss_cost_new(m);
        assert_non_null(cm);
        ss_delta *dl = NULL;
        ss_delta_eval e;
        int hit = 0;
        ss_test_fail_after(k);
        ss_status st = ss_delta_new(g, m, cm, &dl, &d);
        if (st == SS_OK) {
            st = ss_delta_run(dl, p, -1, &e, &d);
            if (st != SS_OK) {
                hit = 1;
                assert_int_equal(st, SS_ERR_NOMEM);
                ss_test_fail_after(-1);
                assert_int_equal(ss_delta_run(dl, p, -1, &e, &d), SS_OK);
                ss_test_fail_after(k);
            }
            assert_true(e.iteration_us == want0.iteration_us);
            ss_delta_commit(dl);
            assert_int_equal(ss_plan_set_config(p, op, &one, &d), SS_OK);
            st = ss_delta_run(dl, p, op, &e, &d);
            if (st != SS_OK) {
                assert_int_equal(st, SS_ERR_NOMEM);
                ss_test_fail_after(-1);
                assert_int_equal(ss_delta_run(dl, p, op, &e, &d), SS_OK);
            } else {
                done = !hit && ss_test_alloc_count() <= k; /* nothing was made to fail */
            }
            assert_true(e.iteration_us == want1.iteration_us);
            for (int i = 0; i < 4; i++)
                assert_true(e.peak_memory_bytes[i] == want1.peak_memory_bytes[i]);
            assert_int_equal(ss_plan_set_config(p, op, &base, &d), SS_OK);
        } else {
            assert_int_equal(st, SS_ERR_NOMEM);
            assert_null(dl);
        }
        failures += !done;
        ss_test_fail_after(-1);
        ss_delta_free(dl);
        ss_cost_free(cm);
    }
    assert_true(done);
    assert_true(failures > 10);
    ss_sim_result_clear(&want0);
    ss_sim_result_clear(&want1);
    ss_sim_free(sim);
    ss_cost_free(cm0);
    ss_plan_free(p);
    ss_graph_free(g);
    ss_machine_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_protocol),
        cmocka_unit_test(test_alloc_failures),
        cmocka_unit_test(test_delta_equals_full),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
