/*
 * test_mesh.c — device meshes and operator shardings (search/mesh.h), and
 * the level-2 planner end to end (search/level2.h).
 *
 * Meshes: 16 devices in nodes of 8 give exactly the ordered factorizations
 * whose inner products divide 8 or are multiples of it (16, 2x8, 4x4, 8x2,
 * 2x2x4, 2x4x2, 4x2x2); 12 devices in nodes of 6 never give 3x4 (inner 4
 * straddles a node); groups walk the axes with their strides.
 * Shardings: every sharding of every op of a small GPT on a 2x4 mesh gives
 * a config that ss_plan_validate accepts (as the only non-trivial config of
 * a plan), whose tile at mesh coordinate c sits on the device base + c .
 * stride, and whose tile count is mesh devices x micro-batches.
 * Level 2: on a small GPT over 8 A100s (one node) the plan is valid, fits
 * memory when simulated, and is no slower than 1.25x the Megatron plan
 * tp=8 (within the simulator's judgment of both); on a 4-layer GPT with a
 * forced pipeline depth the stages are contiguous and every stage is used;
 * the same inputs give the same plan text; an impossible memory limit is
 * SS_ERR_INFEASIBLE with no plan; where activations fill the memory (GPT
 * 8 x 4096, sequence 8,192, pp 8 forced) the stage DP recomputes on the
 * first stages only and the plan is as fast as the hand plan
 * selective*2/none*6 (none everywhere overflows, selective everywhere is
 * 10% slower).
 */
#include "testutil.h"
#include "search/level2.h"
#include "search/mesh.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static void test_enumerate(void **state)
{
    (void)state;
    ss_dmesh ms[64];
    int n = ss_dmesh_enumerate(16, 8, 3, ms, 64);
    char names[64][32];
    for (int i = 0; i < n; i++)
        ss_dmesh_name(&ms[i], names[i], sizeof names[i]);
    /* 1 axis: 16; 2 axes: 2x8, 4x4, 8x2 (16 = inner 16: multiple of 8 fine;
     * 8x2 inner 2 divides 8); 3 axes: 2x2x4, 2x4x2, 4x2x2 (inner products
     * 4/8, 2/8, 2/4 all fine) */
    const char *want[] = {"16", "2x8", "4x4", "8x2", "2x2x4", "2x4x2", "4x2x2"};
    assert_int_equal(n, 7);
    for (int i = 0; i < n; i++)
        assert_string_equal(names[i], want[i]);
    /* nodes of 6 devices on 12: inner 4 neither divides 6 nor is a multiple */
    n = ss_dmesh_enumerate(12, 6, 2, ms, 64);
    for (int i = 0; i < n; i++) {
        ss_dmesh_name(&ms[i], names[i], sizeof names[i]);
        assert_true(strcmp(names[i], "3x4") != 0);
    }
    assert_int_equal(ss_dmesh_enumerate(1, 8, 2, ms, 64), 1);
    assert_int_equal(ms[0].n_axes, 0);
    /* 4x4: the group of axis 0 through base 2 is 2, 6, 10, 14 */
    n = ss_dmesh_enumerate(16, 8, 2, ms, 64);
    int devs[16], k = -1;
    for (int i = 0; i < n; i++)
        if (ms[i].n_axes == 2 && ms[i].size[0] == 4)
            k = i;
    assert_true(k >= 0);
    assert_int_equal(ss_dmesh_group(&ms[k], 2, 1u, devs), 4);
    assert_int_equal(devs[0], 2);
    assert_int_equal(devs[1], 6);
    assert_int_equal(devs[3], 14);
    assert_int_equal(ss_dmesh_group(&ms[k], 0, 3u, devs), 16);
    for (int i = 0; i < 16; i++)
        assert_int_equal(devs[i], i);
}

static void test_shardings_valid(void **state)
{
    (void)state;
    ss_diag d;
    ss_diag_init(&d);
    ss_machine *m = NULL;
    assert_int_equal(ss_machine_load_nodes(ss_test_path("topologies/dgx-a100.json"), 1, &m, &d),
                     SS_OK);
    ss_graph *g = NULL;
    assert_int_equal(ss_model_build("gpt:layers=1,hidden=64,heads=4,seq=32,vocab=256", 16, 8,
                                    &g, &d),
                     SS_OK);
    ss_dmesh ms[16];
    int nm = ss_dmesh_enumerate(8, 8, 2, ms, 16), total = 0;
    ss_dmesh M = ms[0];
    for (int i = 0; i < nm; i++)
        if (ms[i].n_axes == 2 && ms[i].size[0] == 2)
            M = ms[i];
    assert_int_equal(M.n_axes, 2);
    int mb = 2, *devs = malloc((size_t)M.n * mb * sizeof *devs);
    ss_plan *p = ss_plan_new(g, m);
    ss_plan_settings_of(p)->microbatches = mb;
    for (int o = 0; o < ss_graph_n_ops(g); o++) {
        const ss_op *op = ss_graph_op(g, o);
        ss_sharding sh[256];
        int n = ss_sharding_enumerate(g, op, &M, mb, sh, 256);
        assert_true(n >= 1 && n <= 256);
        for (int k = 0; k < n; k++) {
            ss_pconfig c;
            ss_sharding_config(g, op, &M, &sh[k], mb, 0, 0, &c, devs);
            int mbe = ss_sharding_mb(g, op, &M, &sh[k], mb);
            assert_int_equal(c.ntiles, M.n * mbe);
            assert_int_equal(ss_plan_set_config(p, o, &c, &d), SS_OK);
            ss_diag_init(&d);
            if (ss_plan_validate(p, g, m, &d) != SS_OK)
                fail_msg("op %s sharding %d: %s", op->name, k, d.msg);
            for (int a = 0; a < M.size[0]; a++)
                for (int b = 0; b < M.size[1]; b++) {
                    int coord[2] = {a, b};
                    int t = ss_sharding_tile_index(g, op, &M, &sh[k], mb, coord);
                    assert_int_equal(c.devices[t], a * M.stride[0] + b * M.stride[1]);
                    ss_tile t1, t2;
                    ss_sharding_tile(g, op, &M, &sh[k], mb, coord, &t1);
                    ss_pconfig_tile(g, op, &c, t, &t2);
                    assert_memory_equal(&t1, &t2, sizeof t1);
                }
            total++;
        }
        ss_plan_free(p); /* a fresh plan for the next op: every op on one device */
        p = ss_plan_new(g, m);
        ss_plan_settings_of(p)->microbatches = mb;
    }
    assert_true(total > 100);
    free(devs);
    ss_plan_free(p);
    ss_graph_free(g);
    ss_machine_free(m);
}

/* Plan, validate, simulate: returns the simulated time (us); asserts fit. */
static double plan_and_simulate(const char *spec, int64_t batch, const ss_level2_config *cfg,
                                const char *baseline, double *base_us, ss_level2_report *rep)
{
    ss_diag d;
    ss_diag_init(&d);
    ss_machine *m = NULL;
    assert_int_equal(ss_machine_load_nodes(ss_test_path("topologies/dgx-a100.json"), 1, &m, &d),
                     SS_OK);
    ss_graph *g = NULL;
    assert_int_equal(ss_model_build_tp(spec, batch, 8, 8, &g, &d), SS_OK);
    ss_costmodel *cm = ss_cost_new(m);
    ss_plan *p = NULL;
    if (ss_level2_plan(g, m, cm, cfg, &p, rep, &d) != SS_OK)
        fail_msg("level 2 on %s: %s", spec, d.msg);
    assert_int_equal(ss_plan_validate(p, g, m, &d), SS_OK);
    ss_sim *sim = NULL;
    ss_sim_result r = {0};
    assert_int_equal(ss_sim_new(g, m, cm, NULL, &sim, &d), SS_OK);
    assert_int_equal(ss_sim_run(sim, p, &r, &d), SS_OK);
    assert_true(r.fits);
    double t = r.iteration_us;
    if (baseline) {
        ss_plan *b = NULL;
        assert_int_equal(ss_plan_from_spec(baseline, g, m, &b, &d), SS_OK);
        assert_int_equal(ss_sim_run(sim, b, &r, &d), SS_OK);
        *base_us = r.iteration_us;
        ss_plan_free(b);
    }
    ss_sim_result_clear(&r);
    ss_sim_free(sim);
    ss_plan_free(p);
    ss_cost_free(cm);
    ss_graph_free(g);
    ss_machine_free(m);
    return t;
}

static void test_level2_small_gpt(void **state)
{
    (void)state;
    ss_level2_report rep;
    double base = 0;
    double t = plan_and_simulate("gpt:layers=2,hidden=256,heads=8,seq=128,vocab=1024", 16, NULL,
                                 "megatron:tp=8,pp=1,dp=1", &base, &rep);
    assert_true(rep.ilp_solves > 0);
    assert_true(rep.simulated >= 1);
    assert_true(fabs(rep.simulated_us - t) <= 1e-6 * t);
    assert_true(t <= 1.25 * base);
    /* a forced pipeline depth: contiguous, non-empty stages */
    ss_level2_config cfg = {0};
    cfg.pp = 2;
    t = plan_and_simulate("gpt:layers=4,hidden=256,heads=8,seq=128,vocab=1024", 16, &cfg, NULL,
                          NULL, &rep);
    assert_int_equal(rep.pp, 2);
    assert_int_equal(rep.stage_first[0], 0);
    assert_true(rep.stage_first[1] > 0 && rep.stage_first[1] < rep.n_layers);
    assert_int_equal(rep.stage_first[2], rep.n_layers);
    assert_true(rep.microbatches >= 4);
}

/* Per-stage recompute: the first stages hold the most micro-batches in
 * flight, so they recompute and the last ones do not. */
static void test_level2_recompute_per_stage(void **state)
{
    (void)state;
    ss_level2_report rep;
    ss_level2_config cfg = {0};
    cfg.pp = 8;
    double hand = 0, t;
    t = plan_and_simulate("gpt:layers=8,hidden=4096,heads=32,seq=8192", 32, &cfg,
                          "megatron:tp=1,pp=8,dp=1,mbs=1,recompute=selective*2/none*6", &hand,
                          &rep);
    print_message("level 2 %.1f ms (%s), hand plan %.1f ms\n", t / 1e3, rep.recompute_text,
                  hand / 1e3);
    assert_int_equal(rep.pp, 8);
    assert_false(rep.recompute_uniform);
    assert_true(rep.stage_recompute[0] != SS_RECOMPUTE_NONE);
    assert_int_equal(rep.stage_recompute[7], SS_RECOMPUTE_NONE);
    assert_true(strncmp(rep.recompute_text, "recompute ", 10) == 0);
    assert_true(t <= 1.002 * hand);
    double sel = 0;
    plan_and_simulate("gpt:layers=8,hidden=4096,heads=32,seq=8192", 32, &cfg,
                      "megatron:tp=1,pp=8,dp=1,mbs=1,recompute=selective", &sel, &rep);
    assert_true(t < 0.95 * sel);
}

/* The same inputs give the same plan, byte for byte. */
static void test_level2_deterministic(void **state)
{
    (void)state;
    ss_diag d;
    ss_diag_init(&d);
    ss_machine *m = NULL;
    assert_int_equal(ss_machine_load_nodes(ss_test_path("topologies/dgx-a100.json"), 1, &m, &d),
                     SS_OK);
    ss_graph *g = NULL;
    assert_int_equal(ss_model_build("gpt:layers=3,hidden=256,heads=8,seq=128,vocab=1024", 32, 8,
                                    &g, &d),
                     SS_OK);
    char *text[2] = {NULL, NULL};
    for (int run = 0; run < 2; run++) {
        ss_costmodel *cm = ss_cost_new(m);
        ss_plan *p = NULL;
        assert_int_equal(ss_level2_plan(g, m, cm, NULL, &p, NULL, &d), SS_OK);
        assert_int_equal(ss_plan_to_string(p, g, &text[run], &d), SS_OK);
        ss_plan_free(p);
        ss_cost_free(cm);
    }
    assert_string_equal(text[0], text[1]);
    ss_free(text[0]);
    ss_free(text[1]);
    ss_graph_free(g);
    ss_machine_free(m);
}

static void test_level2_infeasible(void **state)
{
    (void)state;
    ss_diag d;
    ss_diag_init(&d);
    ss_machine *m = NULL;
    assert_int_equal(ss_machine_load_nodes(ss_test_path("topologies/dgx-a100.json"), 1, &m, &d),
                     SS_OK);
    ss_graph *g = NULL;
    assert_int_equal(ss_model_build("gpt:layers=2,hidden=256,heads=4,seq=128,vocab=1024", 16, 8,
                                    &g, &d),
                     SS_OK);
    ss_costmodel *cm = ss_cost_new(m);
    ss_level2_config cfg = {0};
    cfg.mem_fraction = 1e-6; /* 80 KiB per device */
    ss_plan *p = (ss_plan *)&cfg;
    assert_int_equal(ss_level2_plan(g, m, cm, &cfg, &p, NULL, &d), SS_ERR_INFEASIBLE);
    assert_null(p);
    assert_non_null(strstr(d.msg, "fits"));
    ss_cost_free(cm);
    ss_graph_free(g);
    ss_machine_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_enumerate),
        cmocka_unit_test(test_shardings_valid),
        cmocka_unit_test(test_level2_small_gpt),
        cmocka_unit_test(test_level2_recompute_per_stage),
        cmocka_unit_test(test_level2_deterministic),
        cmocka_unit_test(test_level2_infeasible),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
