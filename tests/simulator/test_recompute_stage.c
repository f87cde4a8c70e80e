/*
 * test_recompute_stage.c — per-stage activation recomputation
 * (ss_plan_settings.recompute_stage) in the task-graph builder and the
 * exact symmetry evaluator (one data-parallel block per DGX node).
 *
 * Golden fixture: a chain of 16 linears 1000 x 1000 (fp32, no bias) on the
 * "line4" machine of unit GPUs (as tests/simulator/test_hier.c): 4 stages
 * of 4 linears, one per GPU, batch 64 in 8 micro-batches of 8 samples,
 * 1F1B. A linear costs 16 us forward and 32 us backward per micro-batch.
 * With stage 0 full and the others none, stage 0's backward tasks also pay
 * their forward (8 x 4 x 16 = 512 us more compute on gpu 0) and keep no
 * activations between forward and backward (a lower peak on gpu 0 only);
 * gpus 1-3 compute and hold exactly what they do with no recompute.
 */
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chain_fixture.h"

#define P 4
#define MB 8

/* Stage s = fc(4s+1) .. fc(4s+4) on gpu s, 8 micro-batches, 1F1B; stage
 * k's recompute mode modes[k]. */
static ss_plan *chain16_plan(const ss_graph *g, const ss_machine *m, const ss_recompute *modes)
{
    ss_diag d;
    ss_diag_init(&d);
    ss_plan *p = ss_plan_new(g, m);
    assert_non_null(p);
    ss_plan_settings *s = ss_plan_settings_of(p);
    s->stages = P;
    s->microbatches = MB;
    s->schedule = SS_PIPE_1F1B;
    s->queue = SS_QUEUE_BACKWARD_FIRST;
    s->sync = SS_SYNC_BULK;
    assert_int_equal(ss_plan_set_recompute(s, modes, P, "test", &d), SS_OK);
    for (int o = 0; o < ss_graph_n_ops(g); o++) {
        int stage = o == 0 ? 0 : (o - 1) / (LIN / P);
        int devs[MB];
        for (int k = 0; k < MB; k++)
            devs[k] = stage;
        ss_pconfig c = *ss_plan_config(p, o);
        for (int k = 0; k < SS_MAX_DIMS; k++)
            c.deg[k] = 1;
        c.deg[0] = MB;
        c.red = c.rep = 1;
        c.ntiles = MB;
        c.devices = devs;
        c.stage = stage;
        assert_int_equal(ss_plan_set_config(p, o, &c, &d), SS_OK);
    }
    ss_status st = ss_plan_validate(p, g, m, &d);
    if (st != SS_OK)
        print_error("%s\n", d.msg);
    assert_int_equal(st, SS_OK);
    return p;
}

static void run(const ss_graph *g, const ss_machine *m, ss_costmodel *cm, ss_evaluator e,
                const ss_plan *p, ss_sim_result *r)
{
    ss_diag d;
    ss_diag_init(&d);
    ss_sim_config sc = {.evaluator = e};
    ss_sim *s = NULL;
    assert_int_equal(ss_sim_new(g, m, cm, &sc, &s, &d), SS_OK);
    ss_status st = ss_sim_run(s, p, r, &d);
    if (st)
        print_error("%s\n", d.msg);
    assert_int_equal(st, SS_OK);
    ss_sim_free(s);
}

static void test_builder_golden(void **state)
{
    (void)state;
    ss_diag d;
    ss_diag_init(&d);
    ss_graph *g = chain16();
    ss_machine *m = NULL;
    assert_int_equal(ss_machine_load(ss_test_path("tests/data/sim/line4.json"), &m, &d), SS_OK);
    ss_costmodel *cm = ss_cost_new(m);
    assert_non_null(cm);
    static const ss_recompute none[P] = {SS_RECOMPUTE_NONE, SS_RECOMPUTE_NONE,
                                         SS_RECOMPUTE_NONE, SS_RECOMPUTE_NONE};
    static const ss_recompute full[P] = {SS_RECOMPUTE_FULL, SS_RECOMPUTE_FULL,
                                         SS_RECOMPUTE_FULL, SS_RECOMPUTE_FULL};
    static const ss_recompute mixed[P] = {SS_RECOMPUTE_FULL, SS_RECOMPUTE_NONE,
                                          SS_RECOMPUTE_NONE, SS_RECOMPUTE_NONE};
    ss_plan *pn = chain16_plan(g, m, none), *pf = chain16_plan(g, m, full),
            *pm = chain16_plan(g, m, mixed);
    assert_true(ss_plan_recompute_uniform(ss_plan_settings_get(pn)));
    assert_false(ss_plan_recompute_uniform(ss_plan_settings_get(pm)));
    ss_sim_result rn = {0}, rf = {0}, rm = {0};
    run(g, m, cm, SS_EVAL_FULL, pn, &rn);
    run(g, m, cm, SS_EVAL_FULL, pf, &rf);
    run(g, m, cm, SS_EVAL_FULL, pm, &rm);
    /* compute: stage 0 pays its forward again in the backward, the others not */
    assert_true(fabs(rm.compute_us[0] - rn.compute_us[0] - MB * (LIN / P) * 16.0) < 1e-6);
    assert_true(fabs(rf.compute_us[0] - rm.compute_us[0]) < 1e-6);
    for (int i = 1; i < P; i++) {
        assert_true(fabs(rm.compute_us[i] - rn.compute_us[i]) < 1e-6);
        assert_true(rf.compute_us[i] > rm.compute_us[i] + 1);
    }
    /* memory: stage 0 holds what it holds under full recompute, less than
     * without; the other stages exactly what they hold without */
    assert_true(rm.peak_memory_bytes[0] < rn.peak_memory_bytes[0]);
    assert_true(rm.peak_memory_bytes[0] == rf.peak_memory_bytes[0]);
    for (int i = 1; i < P; i++) {
        assert_true(rm.peak_memory_bytes[i] == rn.peak_memory_bytes[i]);
        assert_true(rm.peak_memory_bytes[i] > rf.peak_memory_bytes[i]);
    }
    assert_true(rm.iteration_us > rn.iteration_us);
    assert_true(rm.iteration_us < rf.iteration_us);
    ss_sim_result_clear(&rn);
    ss_sim_result_clear(&rf);
    ss_sim_result_clear(&rm);
    ss_plan_free(pn);
    ss_plan_free(pf);
    ss_plan_free(pm);
    ss_cost_free(cm);
    ss_machine_free(m);
    ss_graph_free(g);
}

/* The symmetry evaluator (exact) equals the full simulation, bit for bit,
 * on Megatron plans of a small GPT whose stages recompute differently. */
static void test_symmetry_exact(void **state)
{
    (void)state;
    static const char *const plans[] = {
        "megatron:tp=4,pp=2,dp=4,mb=8,recompute=full/none",
        "megatron:tp=2,pp=4,dp=4,mb=8,recompute=selective/selective/none/full,sp=1",
        "megatron:tp=2,pp=2,dp=8,mb=4,vp=2,recompute=full/selective,distopt=1",
    };
    ss_diag d;
    ss_diag_init(&d);
    ss_machine *m = NULL;
    assert_int_equal(
        ss_machine_load_nodes(ss_test_path("topologies/dgx-a100.json"), 4, &m, &d), SS_OK);
    ss_graph *g = NULL;
    assert_int_equal(ss_model_build("gpt:layers=8,hidden=64,heads=8,seq=32,vocab=512", 64, 32,
                                    &g, &d),
                     SS_OK);
    ss_costmodel *cm = ss_cost_new(m);
    for (size_t i = 0; i < sizeof plans / sizeof plans[0]; i++) {
        ss_plan *p = NULL;
        if (ss_plan_from_spec(plans[i], g, m, &p, &d))
            fail_msg("%s: %s", plans[i], d.msg);
        ss_sim_result rs = {0}, rf = {0};
        run(g, m, cm, SS_EVAL_SYMMETRY, p, &rs);
        run(g, m, cm, SS_EVAL_FULL, p, &rf);
        assert_string_equal(rs.evaluator, "symmetry");
        if (rs.iteration_us != rf.iteration_us)
            print_error("%s: symmetry %.3f us, full %.3f us\n", plans[i], rs.iteration_us,
                        rf.iteration_us);
        assert_true(rs.iteration_us == rf.iteration_us);
        for (int k = 0; k < rf.n_devices; k++)
            assert_true(rs.peak_memory_bytes[k] == rf.peak_memory_bytes[k]);
        ss_sim_result_clear(&rs);
        ss_sim_result_clear(&rf);
        ss_plan_free(p);
    }
    ss_cost_free(cm);
    ss_graph_free(g);
    ss_machine_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_builder_golden),
        cmocka_unit_test(test_symmetry_exact),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
