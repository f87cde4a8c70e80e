/*
 * test_bound.c — the search's compute lower bound (search/bound.h) on a real
 * model: kept incrementally over one-op and many-op moves (committed or not)
 * it equals a fresh bound computed from scratch (bit for bit after a
 * many-op move, whose unchanged rows come from the base; up to rounding
 * after a one-op move), and it never exceeds the simulated iteration time.
 * The bound remembers tile costs per (op, degrees, reduction, device types):
 * every bound is also checked against one summed here straight from the
 * cost model, on a homogeneous machine and on one with several device types
 * (where a memo that ignored the types would reuse a row priced on another
 * device).
 */
#include "testutil.h"
#include "search/bound.h"
#include "search/space.h"

#include <math.h>
#include <string.h>

/* The bound of p from scratch, without ss_bound: per op a row of per-device
 * tile costs (tile order), rows summed per device in op order. */
static double reference_bound(const ss_graph *g, const ss_machine *m, ss_costmodel *cm,
                              const ss_plan *p)
{
    int n_dev = ss_machine_n_devices(m), n_ops = ss_graph_n_ops(g);
    int recompute = ss_plan_settings_get(p)->recompute == SS_RECOMPUTE_FULL;
    double load[64] = {0}, row[64];
    assert_true(n_dev <= 64);
    for (int o = 0; o < n_ops; o++) {
        memset(row, 0, sizeof row);
        const ss_op *op = ss_graph_op(g, o);
        const ss_pconfig *c = ss_plan_config(p, o);
        for (int i = 0; op->type != SS_OP_INPUT && i < c->ntiles; i++) {
            ss_tile t;
            ss_cost cost;
            ss_pconfig_tile(g, op, c, i, &t);
            assert_int_equal(ss_cost_tile(cm, g, op, &t,
                                          ss_machine_device(m, c->devices[i])->type, &cost),
                             SS_OK);
            row[c->devices[i]] += cost.fwd_us + cost.bwd_us + (recompute ? cost.fwd_us : 0);
        }
        for (int k = 0; k < n_dev; k++)
            load[k] += row[k];
    }
    double mx = 0;
    for (int k = 0; k < n_dev; k++)
        if (load[k] > mx)
            mx = load[k];
    return mx * (1 - 1e-9);
}

static void check_model(const char *spec, const char *topo, int moves)
{
    ss_diag d;
    ss_diag_init(&d);
    ss_machine *m = NULL;
    assert_int_equal(ss_machine_load(ss_test_path(topo), &m, &d), SS_OK);
    ss_graph *g = NULL;
    assert_int_equal(ss_model_build(spec, 0, 4, &g, &d), SS_OK);
    ss_costmodel *cm = ss_cost_new(m);
    ss_space_opts so = {ss_machine_n_devices(m), 0};
    ss_space *sp = NULL;
    assert_int_equal(ss_space_new(g, &so, &sp, &d), SS_OK);
    ss_sim *sim = NULL;
    assert_int_equal(ss_sim_new(g, m, cm, NULL, &sim, &d), SS_OK);
    ss_bound *inc = NULL;
    assert_int_equal(ss_bound_new(g, m, cm, &inc, &d), SS_OK);
    ss_plan *cur = NULL;
    assert_int_equal(ss_plan_data_parallel(g, m, 0, &cur, &d), SS_OK);
    ss_plan *p = ss_plan_clone(cur), *prev = ss_plan_clone(cur);
    assert_non_null(p);
    assert_non_null(prev);
    double lb;
    assert_int_equal(ss_bound_eval(inc, cur, -1, &lb, &d), SS_OK);
    ss_bound_commit(inc);

    int n_ops = ss_graph_n_ops(g), devs[64];
    ss_pconfig c;
    c.devices = devs;
    ss_rng rng;
    ss_rng_seed(&rng, 4242);
    ss_sim_result r = {0};
    for (int k = 0; k < moves; k++) {
        /* one op, or up to 8 ops at once (the search's group moves), or
         * back to the plan before the last commit (its ops return to
         * configs the base held before: rows of the base must not be
         * reused for them) */
        int kind = (int)ss_rng_below(&rng, 4);
        int many = kind >= 2, n = kind == 3 ? 0 : many ? 1 + (int)ss_rng_below(&rng, 8) : 1;
        int changed = -1;
        if (kind == 3)
            assert_int_equal(ss_plan_copy(p, prev), SS_OK);
        for (int j = 0; j < n; j++) {
            int op = (int)ss_rng_below(&rng, n_ops);
            ss_space_random(sp, op, &rng, &c, devs);
            c.stage = 0;
            assert_int_equal(ss_plan_set_config(p, op, &c, &d), SS_OK);
            changed = op;
        }
        if (many)
            changed = -1;
        double got, want;
        assert_int_equal(ss_bound_eval(inc, p, changed, &got, &d), SS_OK);
        ss_bound *fresh = NULL;
        assert_int_equal(ss_bound_new(g, m, cm, &fresh, &d), SS_OK);
        assert_int_equal(ss_bound_eval(fresh, p, -1, &want, &d), SS_OK);
        ss_bound_free(fresh);
        /* a many-op move sums every op's row in op order, as from scratch:
         * bit for bit; a one-op move updates the base's sums (load - old +
         * new): equal up to rounding */
        if (many ? got != want : fabs(got - want) > 1e-12 * want)
            fail_msg("%s move %d (%s): incremental bound %.17g, from scratch %.17g", spec, k,
                     many ? "many ops" : "one op", got, want);
        double ref = reference_bound(g, m, cm, p);
        if (many ? got != ref : fabs(got - ref) > 1e-12 * ref)
            fail_msg("%s on %s move %d: bound %.17g, summed from the cost model %.17g", spec,
                     topo, k, got, ref);
        assert_int_equal(ss_sim_run(sim, p, &r, &d), SS_OK);
        assert_true(got > 0 && got <= r.iteration_us);
        /* commit about half of the moves; otherwise go back to the base */
        if (ss_rng_below(&rng, 2) == 0) {
            ss_bound_commit(inc);
            assert_int_equal(ss_plan_copy(prev, cur), SS_OK);
            assert_int_equal(ss_plan_copy(cur, p), SS_OK);
        } else {
            assert_int_equal(ss_plan_copy(p, cur), SS_OK);
        }
    }
    ss_sim_result_clear(&r);
    ss_plan_free(p);
    ss_plan_free(prev);
    ss_plan_free(cur);
    ss_bound_free(inc);
    ss_sim_free(sim);
    ss_space_free(sp);
    ss_cost_free(cm);
    ss_graph_free(g);
    ss_machine_free(m);
}

static void test_incremental_equals_fresh_mlp(void **state)
{
    (void)state;
    check_model("mlp", "topologies/p100x16.json", 300);
}

/* Peers of five device types: equal degrees on other devices cost differently. */
static void test_incremental_equals_fresh_mixed_devices(void **state)
{
    (void)state;
    check_model("mlp", "topologies/volunteers40.json", 300);
}

static void test_incremental_equals_fresh_rnnlm(void **state)
{
    (void)state;
    check_model("rnnlm", "topologies/p100x16.json", 60);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_incremental_equals_fresh_mlp),
        cmocka_unit_test(test_incremental_equals_fresh_rnnlm),
        cmocka_unit_test(test_incremental_equals_fresh_mixed_devices),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
