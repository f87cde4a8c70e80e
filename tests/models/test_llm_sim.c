/*
 * test_llm_sim.c — the Llama-style (GQA, SwiGLU, RMSNorm, rotary) and MoE
 * graphs through the simulator on a Hopper machine: the exact evaluators
 * (full and symmetry) agree bit for bit and the hierarchical one within its
 * stated 0.5% on Megatron plans with tp, pp, dp, sequence parallelism and
 * selective recomputation; FP8 GEMMs make the iteration faster and the
 * selective recomputation of grouped-query scores lowers the peak memory.
 */
#include "testutil.h"

#include <math.h>
#include <string.h>

typedef struct run {
    double us, peak, act; /* iteration; device 0's peak and peak - static memory */
} run;

static run simulate_on(const char *model, const char *plan, ss_evaluator ev, int nodes)
{
    ss_diag d;
    ss_diag_init(&d);
    ss_graph *g = NULL;
    ss_machine *m = NULL;
    ss_plan *p = NULL;
    ss_sim *s = NULL;
    assert_int_equal(ss_model_build_tp(model, 8, 16, 4, &g, &d), SS_OK);
    assert_int_equal(
        ss_machine_load_nodes(ss_test_path("topologies/dgx-h100.json"), nodes, &m, &d), SS_OK);
    if (ss_plan_from_spec(plan, g, m, &p, &d) != SS_OK)
        print_error("%s: %s\n", plan, d.msg);
    assert_non_null(p);
    ss_costmodel *cm = ss_cost_new(m);
    ss_sim_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.evaluator = ev;
    assert_int_equal(ss_sim_new(g, m, cm, &cfg, &s, &d), SS_OK);
    ss_sim_result r;
    memset(&r, 0, sizeof r);
    if (ss_sim_run(s, p, &r, &d) != SS_OK)
        print_error("%s: %s\n", model, d.msg);
    run out = {r.iteration_us, r.peak_memory_bytes[0],
               r.peak_memory_bytes[0] - r.static_memory_bytes[0]};
    ss_sim_result_clear(&r);
    ss_sim_free(s);
    ss_cost_free(cm);
    ss_plan_free(p);
    ss_machine_free(m);
    ss_graph_free(g);
    return out;
}

static run simulate(const char *model, const char *plan, ss_evaluator ev)
{
    return simulate_on(model, plan, ev, 2);
}

static void test_evaluators_agree(void **state)
{
    (void)state;
    static const char *const models[] = {"llama:size=8b,layers=4,seq=1024,tp=4",
                                         "mixtral:layers=4,seq=512,tp=4"};
    const char *plan = "megatron:tp=4,pp=2,dp=2,mbs=1,recompute=selective,sp=1";
    for (int i = 0; i < 2; i++) {
        run f = simulate(models[i], plan, SS_EVAL_FULL);
        run s = simulate(models[i], plan, SS_EVAL_SYMMETRY);
        run h = simulate(models[i], plan, SS_EVAL_HIER);
        assert_true(f.us > 0);
        assert_true(f.us == s.us && f.peak == s.peak);
        assert_true(fabs(h.us - f.us) <= 0.005 * f.us);
    }
}

static void test_fp8_and_recompute(void **state)
{
    (void)state;
    const char *plan = "megatron:tp=4,pp=2,dp=2,mbs=1,sp=1";
    run b = simulate("llama:size=8b,layers=4,seq=2048,tp=4", plan, SS_EVAL_FULL);
    run f = simulate("llama:size=8b,layers=4,seq=2048,tp=4,precision=fp8", plan, SS_EVAL_FULL);
    assert_true(f.us < 0.9 * b.us);
    assert_true(f.peak < b.peak);
    run sel = simulate("llama:size=8b,layers=4,seq=2048,tp=4",
                       "megatron:tp=4,pp=2,dp=2,mbs=1,sp=1,recompute=selective", SS_EVAL_FULL);
    assert_true(sel.peak < b.peak);
}

/* Context parallelism: the sequence split cp ways between tp and dp ranks;
 * the scores' query rows and the keys split, attention reads every cp
 * rank's keys; the hierarchical evaluator stays within 0.5% of the full
 * one; half the sequence per device halves the activations. */
static void test_context_parallel(void **state)
{
    (void)state;
    const char *model = "llama:size=8b,layers=4,seq=4096,tp=4";
    ss_diag d;
    ss_diag_init(&d);
    ss_graph *g = NULL;
    ss_machine *m = NULL;
    ss_plan *p = NULL;
    assert_int_equal(ss_model_build_tp(model, 4, 16, 4, &g, &d), SS_OK);
    assert_int_equal(ss_machine_load_nodes(ss_test_path("topologies/dgx-h100.json"), 2, &m, &d),
                     SS_OK);
    assert_int_equal(ss_plan_from_spec("megatron:tp=4,pp=1,dp=2,cp=2,mbs=1", g, m, &p, &d),
                     SS_OK);
    const ss_pconfig *s = ss_plan_config(p, ss_graph_find_op(g, "l1.attn.scores"));
    assert_int_equal(s->deg[1], 4); /* kv heads over tp */
    assert_int_equal(s->deg[2], 2); /* query rows over cp */
    assert_int_equal(s->deg[3], 1); /* every key */
    /* tile (sample 0, kv 0, rows 1): cp rank 1, tp rank 0 -> device 4 */
    assert_int_equal(s->devices[(0 * 4 + 0) * 2 + 1], 4);
    const ss_pconfig *k = ss_plan_config(p, ss_graph_find_op(g, "l1.attn.k_rope"));
    assert_int_equal(k->deg[1], 2);
    ss_plan_free(p);
    p = NULL;
    assert_int_equal(ss_plan_from_spec("megatron:tp=4,pp=1,dp=4,cp=2", g, m, &p, &d),
                     SS_ERR_INVALID);
    ss_plan_free(p);
    ss_machine_free(m);
    ss_graph_free(g);

    const char *plan = "megatron:tp=4,pp=2,dp=1,cp=2,sp=1,mbs=1,recompute=selective";
    run f = simulate(model, plan, SS_EVAL_FULL), h = simulate(model, plan, SS_EVAL_HIER);
    assert_true(fabs(h.us - f.us) <= 0.005 * f.us);
    run one = simulate_on(model, "megatron:tp=4,pp=1,dp=2,mbs=1,sp=1", SS_EVAL_FULL, 1);
    run two = simulate_on(model, "megatron:tp=4,pp=1,dp=2,cp=2,mbs=1,sp=1", SS_EVAL_FULL, 2);
    assert_true(fabs(two.act - 0.5 * one.act) < 0.05 * one.act);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_context_parallel),
        cmocka_unit_test(test_evaluators_agree),
        cmocka_unit_test(test_fp8_and_recompute),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
