/*
 * test_search.c — the public search (ss_search_run) with the real simulator:
 * it finds the exhaustive optimum on small cases (3 operators, 4 devices:
 * every plan of the space enumerated and simulated), it is deterministic
 * (with and without path moves), and the JSON report has the documented
 * fields.
 */
#include "testutil.h"
#include "search/space.h"

#include <jansson.h>
#include <math.h>
#include <string.h>

/* x: input [batch, in] -> fc1 linear in->hid -> fc2 linear hid->out. */
static ss_graph *tiny(int64_t batch, int64_t in, int64_t hid, int64_t out)
{
    ss_diag d;
    ss_diag_init(&d);
    ss_graph *g = ss_graph_new("tiny");
    ss_op_attrs a;
    memset(&a, 0, sizeof a);
    a.ndim = 2;
    a.shape[0] = batch;
    a.shape[1] = in;
    a.kind[0] = SS_DIM_SAMPLE;
    a.kind[1] = SS_DIM_PARAMETER;
    a.dtype = SS_F32;
    int x = ss_graph_add(g, "x", SS_OP_INPUT, &a, 0, NULL, &d);
    memset(&a, 0, sizeof a);
    a.out_features = hid;
    int t = ss_graph_out(g, x);
    int f1 = ss_graph_add(g, "fc1", SS_OP_LINEAR, &a, 1, &t, &d);
    a.out_features = out;
    t = ss_graph_out(g, f1);
    int f2 = ss_graph_add(g, "fc2", SS_OP_LINEAR, &a, 1, &t, &d);
    assert_int_equal(f2, 2);
    ss_graph_set_training(g, batch, SS_OPT_SGD, SS_PREC_FP32);
    return g;
}

static ss_machine *four_p100(void)
{
    ss_machine *m = NULL;
    ss_diag d;
    ss_diag_init(&d);
    assert_int_equal(ss_machine_load_nodes(ss_test_path("topologies/p100x16.json"), 1, &m, &d),
                     SS_OK);
    assert_int_equal(ss_machine_n_devices(m), 4);
    return m;
}

/* Every plan of the space, simulated: the best time among plans that fit,
 * and how many plans there are. */
static double exhaustive(const ss_graph *g, const ss_machine *m, ss_costmodel *cm, long *n_plans)
{
    ss_diag d;
    ss_diag_init(&d);
    ss_space *sp = NULL;
    ss_space_opts so = {ss_machine_n_devices(m), 0};
    assert_int_equal(ss_space_new(g, &so, &sp, &d), SS_OK);
    ss_sim *sim = NULL;
    assert_int_equal(ss_sim_new(g, m, cm, NULL, &sim, &d), SS_OK);
    ss_plan *p = NULL;
    assert_int_equal(ss_plan_data_parallel(g, m, 0, &p, &d), SS_OK);
    int devs[3][8];
    ss_pconfig c[3];
    int64_t n[3];
    for (int k = 0; k < 3; k++) {
        c[k].devices = devs[k];
        n[k] = ss_space_n_candidates(sp, k);
    }
    ss_sim_result r;
    memset(&r, 0, sizeof r);
    double best = HUGE_VAL;
    *n_plans = 0;
    for (int64_t i = 0; i < n[0]; i++) {
        ss_space_candidate(sp, 0, i, &c[0], devs[0]);
        assert_int_equal(ss_plan_set_config(p, 0, &c[0], &d), SS_OK);
        for (int64_t j = 0; j < n[1]; j++) {
            ss_space_candidate(sp, 1, j, &c[1], devs[1]);
            assert_int_equal(ss_plan_set_config(p, 1, &c[1], &d), SS_OK);
            for (int64_t k = 0; k < n[2]; k++) {
                ss_space_candidate(sp, 2, k, &c[2], devs[2]);
                assert_int_equal(ss_plan_set_config(p, 2, &c[2], &d), SS_OK);
                assert_int_equal(ss_sim_run(sim, p, &r, &d), SS_OK);
                (*n_plans)++;
                if (r.fits && r.iteration_us < best)
                    best = r.iteration_us;
            }
        }
    }
    ss_sim_result_clear(&r);
    ss_plan_free(p);
    ss_sim_free(sim);
    ss_space_free(sp);
    return best;
}

static void search_case(int64_t batch, int64_t in, int64_t hid, int64_t out)
{
    ss_machine *m = four_p100();
    ss_graph *g = tiny(batch, in, hid, out);
    ss_costmodel *cm = ss_cost_new(m);
    long n_plans;
    double opt = exhaustive(g, m, cm, &n_plans);
    assert_true(isfinite(opt));
    ss_search_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.budget = 4000;
    cfg.seed = 11;
    ss_search_result r;
    memset(&r, 0, sizeof r);
    ss_diag d;
    ss_diag_init(&d);
    assert_int_equal(ss_search_run(g, m, cm, &cfg, &r, &d), SS_OK);
    if (r.best_sim.iteration_us != opt)
        fail_msg("batch %lld dims %lld/%lld/%lld: search %.6f us, exhaustive optimum %.6f us "
                 "over %ld plans",
                 (long long)batch, (long long)in, (long long)hid, (long long)out,
                 r.best_sim.iteration_us, opt, n_plans);
    assert_true(r.best_sim.fits);
    assert_true(r.dp_sim.iteration_us >= opt);
    assert_true(r.speedup_vs_dp >= 1.0);
    assert_true(r.proposals <= cfg.budget);
    assert_int_equal(ss_plan_validate(r.best, g, m, &d), SS_OK);
    ss_search_result_clear(&r);
    ss_cost_free(cm);
    ss_graph_free(g);
    ss_machine_free(m);
}

/* Two shapes: a compute-heavy one (big batch and features: splitting pays)
 * and a small one (latency-bound: few devices pay). */
static void test_exhaustive_optimum(void **state)
{
    (void)state;
    search_case(256, 1024, 2048, 1024);
    search_case(8, 64, 64, 32);
}

/* Same seed and budget => the same plan file, byte for byte, with path
 * moves (the default) and without. */
static void test_deterministic(void **state)
{
    (void)state;
    ss_diag d;
    ss_diag_init(&d);
    ss_machine *m = NULL;
    assert_int_equal(ss_machine_load_nodes(ss_test_path("topologies/p100x16.json"), 2, &m, &d),
                     SS_OK);
    ss_graph *g = NULL;
    assert_int_equal(ss_model_build("mlp", 0, 8, &g, &d), SS_OK);
    ss_costmodel *cm = ss_cost_new(m);
    /* 0, 1: the defaults (path moves on); 2, 3: path moves off */
    char *text[4] = {NULL, NULL, NULL, NULL};
    int64_t accepted[4];
    for (int k = 0; k < 4; k++) {
        ss_search_config cfg;
        memset(&cfg, 0, sizeof cfg);
        cfg.budget = 600;
        cfg.seed = 2024;
        cfg.p_path = k >= 2 ? -1 : 0;
        ss_search_result r;
        memset(&r, 0, sizeof r);
        assert_int_equal(ss_search_run(g, m, cm, &cfg, &r, &d), SS_OK);
        assert_int_equal(ss_plan_to_string(r.best, g, &text[k], &d), SS_OK);
        accepted[k] = r.accepted;
        ss_search_result_clear(&r);
    }
    assert_string_equal(text[0], text[1]);
    assert_int_equal(accepted[0], accepted[1]);
    assert_string_equal(text[2], text[3]);
    assert_int_equal(accepted[2], accepted[3]);
    for (int k = 0; k < 4; k++)
        ss_free(text[k]);
    ss_cost_free(cm);
    ss_graph_free(g);
    ss_machine_free(m);
}

static int stop_now(void *ctx)
{
    int *n = ctx;
    return ++*n > 20;
}

/* The JSON report, and a stop callback (SIGINT) that ends the search early
 * with the best plan so far. */
static void test_json_and_stop(void **state)
{
    (void)state;
    ss_machine *m = four_p100();
    ss_graph *g = tiny(64, 256, 256, 64);
    ss_costmodel *cm = ss_cost_new(m);
    ss_search_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.budget = 100000;
    cfg.seed = 5;
    int polls = 0;
    cfg.stop = stop_now;
    cfg.cb_ctx = &polls;
    ss_search_result r;
    memset(&r, 0, sizeof r);
    ss_diag d;
    ss_diag_init(&d);
    assert_int_equal(ss_search_run(g, m, cm, &cfg, &r, &d), SS_OK);
    assert_true(r.interrupted);
    assert_string_equal(r.stopped_by, "interrupted");
    assert_true(r.proposals <= 20);
    assert_true(r.best_sim.iteration_us <= r.dp_sim.iteration_us);
    char *js = NULL;
    assert_int_equal(ss_search_result_to_json(&r, "out.json", NULL, &js, &d), SS_OK);
    json_error_t err;
    json_t *o = json_loads(js, 0, &err);
    assert_non_null(o);
    json_t *best = json_object_get(o, "best");
    assert_non_null(best);
    assert_non_null(json_object_get(best, "iteration_time_ms"));
    assert_non_null(json_object_get(best, "peak_memory_bytes"));
    assert_true(fabs(json_real_value(json_object_get(best, "iteration_time_ms")) -
                     r.best_sim.iteration_us / 1000) < 1e-9);
    json_t *base = json_object_get(o, "baselines");
    assert_non_null(json_object_get(base, "data_parallel"));
    assert_non_null(json_object_get(base, "expert"));
    assert_non_null(json_object_get(o, "speedup_vs_data_parallel"));
    json_t *s = json_object_get(o, "search");
    assert_int_equal(json_integer_value(json_object_get(s, "proposals")), r.proposals);
    assert_non_null(json_object_get(s, "accepted"));
    assert_non_null(json_object_get(s, "time_s"));
    assert_non_null(json_object_get(s, "evals_per_s"));
    assert_int_equal(json_integer_value(json_object_get(s, "pruned")), r.pruned);
    assert_int_equal(json_integer_value(json_object_get(s, "cut")), r.cut);
    assert_true(json_is_true(json_object_get(s, "interrupted")));
    assert_string_equal(json_string_value(json_object_get(o, "plan_file")), "out.json");
    json_decref(o);
    ss_free(js);
    ss_search_result_clear(&r);
    ss_cost_free(cm);
    ss_graph_free(g);
    ss_machine_free(m);
}

/* Allocation failures anywhere in the search (sampled over every allocation
 * a small search makes): a clean NOMEM (or an error naming the failure), the
 * result left cleared, nothing leaked (the sanitizer build checks that). */
static void test_nomem(void **state)
{
    (void)state;
    ss_machine *m = four_p100();
    ss_graph *g = tiny(64, 256, 256, 64);
    ss_costmodel *cm = ss_cost_new(m);
    ss_search_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.budget = 60;
    cfg.seed = 9;
    ss_search_result r;
    memset(&r, 0, sizeof r);
    ss_diag d;
    ss_diag_init(&d);
    ss_test_fail_after(-1);
    (void)ss_test_alloc_count();
    ss_test_fail_after(1L << 40); /* count only */
    assert_int_equal(ss_search_run(g, m, cm, &cfg, &r, &d), SS_OK);
    long total = ss_test_alloc_count();
    ss_test_fail_after(-1);
    ss_search_result_clear(&r);
    assert_true(total > 10);
    long step = total / 150 + 1;
    for (long k = 0; k < total; k += step) {
        ss_diag_init(&d);
        ss_test_fail_after(k);
        ss_status st = ss_search_run(g, m, cm, &cfg, &r, &d);
        ss_test_fail_after(-1);
        if (st == SS_OK) {
            ss_search_result_clear(&r);
            continue;
        }
        assert_int_not_equal(d.msg[0], '\0');
        assert_null(r.best);
        assert_null(r.sim);
    }
    ss_cost_free(cm);
    ss_graph_free(g);
    ss_machine_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exhaustive_optimum),
        cmocka_unit_test(test_deterministic),
        cmocka_unit_test(test_json_and_stop),
        cmocka_unit_test(test_nomem),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
