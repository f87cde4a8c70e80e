/*
 * test_hier.c — the hierarchical evaluator (simulator/hier.h): golden
 * pipelines (1F1B, GPipe, interleaved) against their formulas, agreement
 * with the full simulation (the oracle) on small GPT and BERT plans, the
 * memo, and the plans it must refuse.
 *
 * Golden fixture: a chain of 16 linears 1000 x 1000 (fp32, no bias) on the
 * "line4" machine of unit GPUs (1 TFLOP/s, 1000 GB/s memory, links of 1e6
 * GB/s and 0 us: a micro-batch's activation, 8 x 1000 x 4 B, crosses a
 * stage in 3.2e-5 us). Batch 64 in 8 micro-batches of 8 samples: a linear
 * costs 16 us forward and 32 us backward, a stage of 4 linears t_f = 64 and
 * t_b = 128 us. Each device updates its 4 weights of 1e6 parameters (SGD,
 * 12 B/param / 1000 GB/s = 12 us each) after its last backward; stage 0's
 * last backward ends last.
 *
 * SS_HIER_VERBOSE=1 in the environment prints every agreement case's
 * iteration times and worst peak-memory difference (docs/simulator.md).
 */
#include "testutil.h"
#include "simulator/hier.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chain_fixture.h"

#define P 4
#define MB 8

/* Stage s = fc(4s+1) .. fc(4s+4) on gpu s, each op split 8 ways on the
 * sample dim on its own device (8 micro-batches). With v > 1 (interleaved
 * 1F1B, settings.virtual_stages): 4v chunks of 16/(4v) linears, chunk c on
 * gpu c mod 4. */
static ss_plan *chain16_plan_v(const ss_graph *g, const ss_machine *m, ss_pipe_schedule sched,
                               int v)
{
    ss_diag d;
    ss_diag_init(&d);
    ss_plan *p = ss_plan_new(g, m);
    assert_non_null(p);
    ss_plan_settings *s = ss_plan_settings_of(p);
    s->stages = P * v;
    s->virtual_stages = v;
    s->microbatches = MB;
    s->schedule = sched;
    s->queue = sched == SS_PIPE_1F1B ? SS_QUEUE_BACKWARD_FIRST : SS_QUEUE_FIFO;
    s->sync = SS_SYNC_BULK; /* updates after every backward */
    for (int o = 0; o < ss_graph_n_ops(g); o++) {
        int stage = o == 0 ? 0 : (o - 1) / (LIN / (P * v));
        int devs[MB];
        for (int k = 0; k < MB; k++)
            devs[k] = stage % P;
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
    if (v > 1 && sched != SS_PIPE_1F1B)
        return p; /* not a valid plan: for the refusals */
    ss_status st = ss_plan_validate(p, g, m, &d);
    if (st != SS_OK)
        print_error("%s\n", d.msg);
    assert_int_equal(st, SS_OK);
    return p;
}

static ss_plan *chain16_plan(const ss_graph *g, const ss_machine *m, ss_pipe_schedule sched)
{
    return chain16_plan_v(g, m, sched, 1);
}

typedef struct golden {
    ss_graph *g;
    ss_machine *m;
    ss_costmodel *cm;
} golden;

static void golden_setup(golden *f)
{
    ss_diag d;
    ss_diag_init(&d);
    f->g = chain16();
    assert_int_equal(ss_machine_load(ss_test_path("tests/data/sim/line4.json"), &f->m, &d),
                     SS_OK);
    f->cm = ss_cost_new(f->m);
    assert_non_null(f->cm);
}

static void golden_teardown(golden *f)
{
    ss_cost_free(f->cm);
    ss_machine_free(f->m);
    ss_graph_free(f->g);
}

static double full_iteration(const ss_graph *g, const ss_machine *m, ss_costmodel *cm,
                             const ss_plan *p, ss_sim_result *r)
{
    ss_diag d;
    ss_diag_init(&d);
    ss_sim *s = NULL;
    assert_int_equal(ss_sim_new(g, m, cm, NULL, &s, &d), SS_OK);
    assert_int_equal(ss_sim_run(s, p, r, &d), SS_OK);
    ss_sim_free(s);
    return r->iteration_us;
}

/* 1F1B and GPipe on 4 equal stages: (m + p - 1)(t_f + t_b) = 11 * 192 =
 * 2112 us, plus the sends (3.2e-5 us each) and stage 0's updates (48 us):
 * 2160 us, as the full simulation gives; each stage computes m (t_f + t_b)
 * = 1536 us plus its updates. */
static void test_golden_pipeline(void **state)
{
    (void)state;
    golden f;
    golden_setup(&f);
    ss_diag d;
    ss_diag_init(&d);
    ss_hier *h = ss_hier_new(f.g, f.m, f.cm, NULL);
    assert_non_null(h);
    for (int sc = 0; sc < 2; sc++) {
        ss_plan *p = chain16_plan(f.g, f.m, sc ? SS_PIPE_1F1B : SS_PIPE_GPIPE);
        ss_sim_result r = {0}, fr = {0};
        assert_int_equal(ss_hier_eval(h, p, &r, &d), SS_OK);
        if (fabs(r.iteration_us - 2160) >= 1e-2)
            print_error("schedule %d: %.4f us (full %.4f)\n", sc, r.iteration_us,
                        full_iteration(f.g, f.m, f.cm, p, &fr));
        assert_true(fabs(r.iteration_us - 2160) < 1e-2);
        assert_true(fabs(r.iteration_us - full_iteration(f.g, f.m, f.cm, p, &fr)) < 1e-3);
        for (int dev = 0; dev < P; dev++) {
            assert_true(fabs(r.compute_us[dev] - (1536 + 48)) < 1e-2);
            assert_true(fabs(r.compute_us[dev] - fr.compute_us[dev]) < 1e-2);
            assert_true(fabs(r.static_memory_bytes[dev] - fr.static_memory_bytes[dev]) < 1);
            /* within 1% (the model of in-flight activations and buffers
             * is not the full sweep: docs/simulator.md) */
            if (fabs(r.peak_memory_bytes[dev] - fr.peak_memory_bytes[dev]) >=
                1e-2 * fr.peak_memory_bytes[dev])
                print_error("schedule %d device %d: peak %.6g, full %.6g\n", sc, dev,
                            r.peak_memory_bytes[dev], fr.peak_memory_bytes[dev]);
            assert_true(fabs(r.peak_memory_bytes[dev] - fr.peak_memory_bytes[dev]) <
                        1e-2 * fr.peak_memory_bytes[dev]);
        }
        /* blocks: the 4 linears of a stage, extrapolated from 1..3 */
        const ss_hier_stats *st = ss_hier_stats_of(h);
        assert_int_equal(st->stages, P);
        assert_int_equal(st->blocks, LIN);
        assert_int_equal(st->block_ops, 1);
        assert_int_equal(st->full_stages, 0);
        ss_sim_result_clear(&r);
        ss_sim_result_clear(&fr);
        ss_plan_free(p);
    }
    ss_hier_free(h);
    golden_teardown(&f);
}

/* Interleaved 1F1B through the plan's virtual_stages, v = 2 (8 chunks of
 * 2 linears, t_f / 2 and t_b / 2 each, chunk c on gpu c mod 4): m (t_f +
 * t_b) + (p - 1)(t_f + t_b) / v = 1536 + 288 = 1824 us, plus the updates:
 * 1872 us, as the full simulation gives; v = 4 (16 chunks of one linear):
 * bubble 3 * 48 = 144 us. Every chunk has its own sub-problem: the first
 * has no incoming send, the others one (memoized alike). */
static void test_golden_interleaved(void **state)
{
    (void)state;
    golden f;
    golden_setup(&f);
    ss_diag d;
    ss_diag_init(&d);
    ss_hier *h = ss_hier_new(f.g, f.m, f.cm, NULL);
    static const int vs[] = {2, 4};
    static const double want[] = {1872, 1536 + 144 + 48};
    for (int i = 0; i < 2; i++) {
        ss_plan *p = chain16_plan_v(f.g, f.m, SS_PIPE_1F1B, vs[i]);
        ss_sim_result r = {0}, fr = {0};
        ss_status st0 = ss_hier_eval(h, p, &r, &d);
        if (st0)
            print_error("%s\n", d.msg);
        assert_int_equal(st0, SS_OK);
        double full = full_iteration(f.g, f.m, f.cm, p, &fr);
        if (fabs(r.iteration_us - want[i]) >= 1e-2)
            print_error("interleaved v=%d: %.3f (full %.3f)\n", vs[i], r.iteration_us, full);
        assert_true(fabs(r.iteration_us - want[i]) < 1e-2);
        assert_true(fabs(full - want[i]) < 1e-2);
        const ss_hier_stats *st = ss_hier_stats_of(h);
        assert_int_equal(st->stages, P * vs[i]);
        assert_true(st->sub_sims > 0);
        /* again: every chunk's sub-problems memoized, the same result */
        ss_sim_result r2 = {0};
        assert_int_equal(ss_hier_eval(h, p, &r2, &d), SS_OK);
        assert_int_equal(ss_hier_stats_of(h)->sub_sims, 0);
        assert_true(ss_hier_stats_of(h)->memo_hits > 0);
        assert_true(r2.iteration_us == r.iteration_us);
        for (int dev = 0; dev < P; dev++)
            assert_true(r2.peak_memory_bytes[dev] == r.peak_memory_bytes[dev]);
        ss_sim_result_clear(&r2);
        for (int dev = 0; dev < P; dev++) {
            /* each gpu computes its v chunks' m (t_f + t_b) and updates */
            assert_true(fabs(r.compute_us[dev] - (1536 + 48)) < 1e-2);
            assert_true(fabs(r.static_memory_bytes[dev] - fr.static_memory_bytes[dev]) < 1);
            assert_true(fabs(r.weight_bytes[dev] - fr.weight_bytes[dev]) < 1);
            if (fabs(r.peak_memory_bytes[dev] - fr.peak_memory_bytes[dev]) >=
                1e-2 * fr.peak_memory_bytes[dev])
                print_error("v=%d device %d: peak %.6g, full %.6g\n", vs[i], dev,
                            r.peak_memory_bytes[dev], fr.peak_memory_bytes[dev]);
            assert_true(fabs(r.peak_memory_bytes[dev] - fr.peak_memory_bytes[dev]) <
                        1e-2 * fr.peak_memory_bytes[dev]);
        }
        ss_sim_result_clear(&r);
        ss_sim_result_clear(&fr);
        ss_plan_free(p);
    }
    /* a chunk on devices other than its rank's: fc5 (chunk 2, rank 2)
     * also on gpu 3 */
    ss_plan *p = chain16_plan_v(f.g, f.m, SS_PIPE_1F1B, 2);
    ss_sim_result r = {0};
    int op = ss_graph_find_op(f.g, "fc5");
    int devs[MB] = {3, 3, 3, 3, 3, 3, 3, 3};
    ss_pconfig c = *ss_plan_config(p, op);
    c.devices = devs;
    assert_int_equal(ss_plan_set_config(p, op, &c, &d), SS_OK);
    assert_int_equal((ss_diag_init(&d), ss_hier_eval(h, p, &r, &d)), SS_ERR_UNSUPPORTED);
    assert_non_null(strstr(d.msg, "pipeline ranks 2 and 3"));
    /* the same chunks read as 2 ranks x 4 chunks: chunk 2 (rank 0) runs on
     * gpu 2, not on gpu 0 as rank 0's other chunks do */
    ss_plan_free(p);
    p = chain16_plan_v(f.g, f.m, SS_PIPE_1F1B, 2);
    ss_plan_settings_of(p)->virtual_stages = 4;
    assert_int_equal((ss_diag_init(&d), ss_hier_eval(h, p, &r, &d)), SS_ERR_UNSUPPORTED);
    if (!strstr(d.msg, "stage 2 (chunk 1 of pipeline rank 0) does not use device 0"))
        print_error("%s\n", d.msg);
    assert_non_null(strstr(d.msg, "stage 2 (chunk 1 of pipeline rank 0) does not use device 0"));
    /* GPipe has no interleaving */
    ss_plan_free(p);
    p = chain16_plan_v(f.g, f.m, SS_PIPE_GPIPE, 2);
    assert_int_equal((ss_diag_init(&d), ss_hier_eval(h, p, &r, &d)), SS_ERR_UNSUPPORTED);
    assert_non_null(strstr(d.msg, "not an interleaved 1F1B pipeline"));
    assert_int_equal(r.n_devices, 0);
    ss_plan_free(p);
    ss_hier_free(h);
    golden_teardown(&f);
}

/* A second evaluation finds every sub-problem memoized and gives the same
 * result bit for bit; an evaluator without a memo gives it too. */
static void test_memo(void **state)
{
    (void)state;
    golden f;
    golden_setup(&f);
    ss_diag d;
    ss_diag_init(&d);
    ss_hier *h = ss_hier_new(f.g, f.m, f.cm, NULL);
    ss_plan *p = chain16_plan(f.g, f.m, SS_PIPE_1F1B);
    ss_sim_result a = {0}, b = {0};
    assert_int_equal(ss_hier_eval(h, p, &a, &d), SS_OK);
    assert_true(ss_hier_stats_of(h)->sub_sims > 0);
    assert_int_equal(ss_hier_stats_of(h)->memo_hits, 0);
    assert_int_equal(ss_hier_eval(h, p, &b, &d), SS_OK);
    assert_int_equal(ss_hier_stats_of(h)->sub_sims, 0);
    assert_true(ss_hier_stats_of(h)->memo_hits > 0);
    assert_true(a.iteration_us == b.iteration_us);
    for (int i = 0; i < a.n_devices; i++)
        assert_true(a.peak_memory_bytes[i] == b.peak_memory_bytes[i] &&
                    a.compute_us[i] == b.compute_us[i]);
    /* skip_memory: peaks are the static memory, as ss_sim gives them */
    ss_sim_config cfg = {0};
    cfg.skip_memory = 1;
    ss_hier *hs = ss_hier_new(f.g, f.m, f.cm, &cfg);
    assert_int_equal(ss_hier_eval(hs, p, &b, &d), SS_OK);
    assert_true(b.iteration_us == a.iteration_us);
    for (int i = 0; i < b.n_devices; i++)
        assert_true(b.peak_memory_bytes[i] == b.static_memory_bytes[i] &&
                    b.peak_memory_bytes[i] < a.peak_memory_bytes[i]);
    ss_hier_free(hs);
    ss_sim_result_clear(&a);
    ss_sim_result_clear(&b);
    ss_plan_free(p);
    ss_hier_free(h);
    golden_teardown(&f);
}

/* Delta at the block level: after a one-operator change (the replicas of
 * one LayerNorm in the last stage swapped between the tensor-parallel
 * ranks) only that stage's sub-problems are simulated again; the first
 * stage's come from the memo, and the result is a fresh evaluator's, bit
 * for bit. */
static void test_block_delta(void **state)
{
    (void)state;
    ss_diag d;
    ss_diag_init(&d);
    ss_machine *m = NULL;
    assert_int_equal(ss_machine_load_nodes(ss_test_path("topologies/dgx-a100.json"), 1, &m, &d),
                     SS_OK);
    ss_graph *g = NULL;
    assert_int_equal(ss_model_build("gpt:layers=8,hidden=64,heads=8,seq=32,vocab=512", 16, 8, &g,
                                    &d), SS_OK);
    ss_costmodel *cm = ss_cost_new(m);
    ss_plan *p = NULL;
    assert_int_equal(ss_plan_from_spec("megatron:tp=2,pp=2,dp=2,mb=4", g, m, &p, &d), SS_OK);
    ss_hier *h = ss_hier_new(g, m, cm, NULL);
    ss_sim_result a = {0}, b = {0};
    assert_int_equal(ss_hier_eval(h, p, &a, &d), SS_OK);
    int first = ss_hier_stats_of(h)->sub_sims;
    assert_true(first >= 2);
    int op = ss_graph_find_op(g, "l7.ln2");
    assert_true(op >= 0);
    const ss_pconfig *c0 = ss_plan_config(p, op);
    assert_int_equal(c0->rep, 2);
    assert_int_equal(c0->stage, 1);
    ss_pconfig c = *c0;
    int *devs = malloc((size_t)c.ntiles * sizeof *devs);
    for (int t = 0; t < c.ntiles; t++) /* tiles (..., replica, red = 1): pairs */
        devs[t] = c0->devices[t ^ 1];
    c.devices = devs;
    assert_int_equal(ss_plan_set_config(p, op, &c, &d), SS_OK);
    free(devs);
    assert_int_equal(ss_hier_eval(h, p, &a, &d), SS_OK);
    const ss_hier_stats *st = ss_hier_stats_of(h);
    print_message("block delta: %d sub-problems, then %d (%d memo hits)\n", first, st->sub_sims, st->memo_hits);
    assert_true(st->sub_sims >= 1 && st->sub_sims < first);
    assert_true(st->memo_hits >= 1);
    ss_hier *fresh = ss_hier_new(g, m, cm, NULL);
    assert_int_equal(ss_hier_eval(fresh, p, &b, &d), SS_OK);
    assert_true(a.iteration_us == b.iteration_us);
    assert_memory_equal(a.compute_us, b.compute_us, (size_t)a.n_devices * sizeof(double));
    assert_memory_equal(a.peak_memory_bytes, b.peak_memory_bytes,
                        (size_t)a.n_devices * sizeof(double));
    ss_hier_free(fresh);
    ss_hier_free(h);
    ss_sim_result_clear(&a);
    ss_sim_result_clear(&b);
    ss_plan_free(p);
    ss_cost_free(cm);
    ss_graph_free(g);
    ss_machine_free(m);
}

/* Plans it refuses, with the reason. */
static void test_unsupported(void **state)
{
    (void)state;
    golden f;
    golden_setup(&f);
    ss_diag d;
    ss_diag_init(&d);
    ss_hier *h = ss_hier_new(f.g, f.m, f.cm, NULL);
    ss_plan *p = chain16_plan(f.g, f.m, SS_PIPE_1F1B);
    ss_sim_result r = {0};
    /* micro-batches of fc3 on two devices */
    int devs[MB] = {0, 0, 0, 0, 1, 1, 1, 1};
    int op = ss_graph_find_op(f.g, "fc3");
    ss_pconfig c = *ss_plan_config(p, op);
    c.devices = devs;
    assert_int_equal(ss_plan_set_config(p, op, &c, &d), SS_OK);
    assert_int_equal((ss_diag_init(&d), ss_hier_eval(h, p, &r, &d)), SS_ERR_UNSUPPORTED);
    assert_non_null(strstr(d.msg, "\"fc3\" runs its micro-batches on different devices"));
    /* fc3 of stage 0 on gpu1, which stage 1 uses */
    for (int k = 0; k < MB; k++)
        devs[k] = 1;
    assert_int_equal(ss_plan_set_config(p, op, &c, &d), SS_OK);
    assert_int_equal((ss_diag_init(&d), ss_hier_eval(h, p, &r, &d)), SS_ERR_UNSUPPORTED);
    assert_non_null(strstr(d.msg, "device 1 holds ops of stages"));
    /* a data edge that skips a stage: fc8 (stage 1) moved to stage 3, fc9
     * (stage 2) to stage 1 */
    ss_plan_free(p);
    p = chain16_plan(f.g, f.m, SS_PIPE_1F1B);
    op = ss_graph_find_op(f.g, "fc8");
    c = *ss_plan_config(p, op);
    for (int k = 0; k < MB; k++)
        devs[k] = 3;
    c.devices = devs;
    c.stage = 3;
    assert_int_equal(ss_plan_set_config(p, op, &c, &d), SS_OK);
    op = ss_graph_find_op(f.g, "fc9");
    c = *ss_plan_config(p, op);
    for (int k = 0; k < MB; k++)
        devs[k] = 1;
    c.devices = devs;
    c.stage = 1;
    assert_int_equal(ss_plan_set_config(p, op, &c, &d), SS_OK);
    assert_int_equal((ss_diag_init(&d), ss_hier_eval(h, p, &r, &d)), SS_ERR_UNSUPPORTED);
    assert_non_null(strstr(d.msg, "only edges to the next stage"));
    /* the result was left alone */
    assert_int_equal(r.n_devices, 0);
    ss_plan_free(p);
    ss_hier_free(h);
    golden_teardown(&f);
}

/* ---- agreement with the full simulation ----------------------------------- */

typedef struct acase {
    const char *model;
    long batch;
    int nodes;        /* of dgx-a100 (8 A100s each); 0: p100x16 */
    const char *plan;
    int gpipe;        /* switch the Megatron plan to GPipe (FIFO queues) */
    double tol;       /* relative, iteration time */
    double mtol;      /* relative, peak memory per device */
} acase;

#define GPT "gpt:layers=8,hidden=1024,heads=16,seq=512"
#define BERT "bert:layers=8,hidden=1024,heads=16,seq=512"
#define GPT12 "gpt:layers=12,hidden=1024,heads=16,seq=512"
#define BERT12 "bert:layers=12,hidden=1024,heads=16,seq=512"

static const acase cases[] = {
    {GPT, 128, 4, "megatron:tp=8,pp=1,dp=4,mb=8", 0, 0.005, 0.05},
    {GPT, 128, 4, "megatron:tp=8,pp=2,dp=2,mb=8", 0, 0.005, 0.05},
    {GPT, 128, 4, "megatron:tp=1,pp=2,dp=16,mb=8", 0, 0.005, 0.05},
    {GPT, 128, 4, "megatron:tp=1,pp=4,dp=8,mb=8", 0, 0.005, 0.05},
    {GPT, 128, 4, "megatron:tp=1,pp=4,dp=8,mb=8,sync=bulk", 0, 0.005, 0.05},
    {GPT, 128, 4, "megatron:tp=8,pp=4,dp=1,mb=8", 0, 0.005, 0.05},
    {GPT, 128, 4, "megatron:tp=4,pp=8,dp=1,mb=16", 0, 0.005, 0.05},
    {GPT, 128, 4, "megatron:tp=8,pp=2,dp=2,mb=8,distopt=1", 0, 0.005, 0.05},
    {GPT, 128, 4, "megatron:tp=8,pp=2,dp=2,mb=8,sp=1", 0, 0.005, 0.05},
    {GPT, 128, 4, "megatron:tp=4,pp=2,dp=4,mb=8,recompute=selective", 0, 0.005, 0.05},
    {GPT, 128, 2, "megatron:tp=2,pp=2,dp=4,mb=4", 0, 0.005, 0.05},
    {GPT, 128, 2, "megatron:tp=4,pp=4,dp=1,mb=8,recompute=full", 0, 0.005, 0.05},
    {GPT, 128, 2, "megatron:tp=8,pp=2,dp=1,mb=16,sp=1", 0, 0.005, 0.05},
    {GPT, 128, 2, "megatron:tp=1,pp=8,dp=2,mb=16,sync=bulk", 0, 0.005, 0.05},
    {GPT, 128, 2, "megatron:tp=4,pp=2,dp=2,mb=8,recompute=selective,distopt=1", 0, 0.005, 0.05},
    {GPT, 128, 1, "megatron:tp=2,pp=4,dp=1,mb=8", 0, 0.005, 0.05},
    /* GPipe: the full simulation interleaves different micro-batches'
     * passes operator by operator (FIFO queues, no gating beyond the
     * forwards' program order), the stage-level schedule block by block
     * (docs/simulator.md, "Hierarchical evaluator"): within 4% and 15% */
    {GPT, 128, 4, "megatron:tp=8,pp=2,dp=2,mb=8", 1, 0.04, 0.15},
    {GPT, 128, 4, "megatron:tp=1,pp=4,dp=8,mb=8", 1, 0.04, 0.15},
    {GPT, 128, 2, "megatron:tp=4,pp=4,dp=1,mb=8,recompute=full,sync=bulk", 1, 0.04, 0.15},
    {BERT, 128, 4, "megatron:tp=8,pp=2,dp=2,mb=8", 0, 0.005, 0.05},
    {BERT, 128, 4, "megatron:tp=1,pp=4,dp=8,mb=8", 0, 0.005, 0.05},
    {BERT, 128, 4, "megatron:tp=4,pp=4,dp=2,mb=16,recompute=full", 0, 0.005, 0.05},
    {BERT, 128, 4, "megatron:tp=2,pp=2,dp=8,mb=4,sp=1", 0, 0.005, 0.05},
    {BERT, 128, 8, "megatron:tp=8,pp=4,dp=2,mb=8,distopt=1", 0, 0.005, 0.05},
    {BERT, 128, 4, "megatron:tp=4,pp=2,dp=4,mb=8", 1, 0.04, 0.15},
    /* one layer per stage, stages alternating intra- and inter-node sends:
     * the stage-level schedule lets a blocking send interrupt the busy
     * side at once, the full one at its next operator (docs/simulator.md,
     * "Hierarchical evaluator") */
    {GPT, 128, 2, "megatron:tp=2,pp=8,dp=1,mb=8", 0, 0.015, 0.05},
    /* interleaved 1F1B (the plan's virtual_stages): chunk by chunk */
    {GPT, 128, 4, "megatron:tp=8,pp=2,dp=2,mb=8,vp=2", 0, 0.005, 0.05},
    {GPT, 128, 4, "megatron:tp=1,pp=4,dp=8,mb=8,vp=2", 0, 0.005, 0.05},
    {GPT, 128, 4, "megatron:tp=4,pp=2,dp=4,mb=8,vp=2,recompute=selective", 0, 0.005, 0.05},
    {GPT, 128, 2, "megatron:tp=4,pp=4,dp=1,mb=8,vp=2,recompute=full", 0, 0.005, 0.05},
    {GPT, 128, 2, "megatron:tp=2,pp=2,dp=4,mb=4,vp=2", 0, 0.005, 0.05},
    {GPT, 128, 2, "megatron:tp=1,pp=4,dp=4,mb=16,vp=2,sync=bulk", 0, 0.005, 0.05},
    {GPT12, 128, 4, "megatron:tp=8,pp=2,dp=2,mb=8,vp=3", 0, 0.005, 0.05},
    {GPT12, 128, 4, "megatron:tp=2,pp=4,dp=4,mb=8,vp=3,recompute=full", 0, 0.005, 0.05},
    {GPT12, 128, 2, "megatron:tp=4,pp=2,dp=2,mb=4,vp=3,recompute=selective", 0, 0.005, 0.05},
    {BERT, 128, 4, "megatron:tp=8,pp=2,dp=2,mb=8,vp=2", 0, 0.005, 0.05},
    {BERT, 128, 4, "megatron:tp=4,pp=4,dp=2,mb=16,vp=2,recompute=full", 0, 0.005, 0.05},
    {BERT12, 128, 4, "megatron:tp=2,pp=2,dp=8,mb=4,vp=3", 0, 0.005, 0.05},
    /* FlexFlow's models, data parallel on 16 P100s: blocks found in resnet
     * and the unrolled RNNs; rnnlm's steps share their weights (no
     * extrapolation: the whole stage is simulated) */
    {"resnet101", 0, 0, "data-parallel", 0, 0.005, 0.05},
    {"rnnlm", 0, 0, "data-parallel", 0, 0.005, 0.05},
    {"nmt", 0, 0, "data-parallel", 0, 0.005, 0.05},
    {"mlp", 0, 0, "data-parallel", 0, 0.005, 0.05},
};

/* one_bucket: settings.bucket_bytes = 0 (one bucket per weight); priority:
 * settings.priority; refuse: a reason the evaluator must refuse the plan
 * with (SS_ERR_UNSUPPORTED; the full simulation must still run it), NULL:
 * it must agree */
static int check_case_set(const acase *c, int one_bucket, int priority, const char *refuse)
{
    int bad = 0;
    ss_diag d;
    ss_diag_init(&d);
    ss_machine *m = NULL;
    ss_graph *g = NULL;
    ss_plan *p = NULL;
    if (c->nodes)
        assert_int_equal(ss_machine_load_nodes(ss_test_path("topologies/dgx-a100.json"),
                                               c->nodes, &m, &d),
                         SS_OK);
    else
        assert_int_equal(ss_machine_load(ss_test_path("topologies/p100x16.json"), &m, &d), SS_OK);
    assert_int_equal(ss_model_build(c->model, c->batch, c->nodes ? ss_machine_n_devices(m) : 1,
                                    &g, &d),
                     SS_OK);
    assert_int_equal(ss_plan_from_spec(c->plan, g, m, &p, &d), SS_OK);
    if (c->gpipe) {
        ss_plan_settings_of(p)->schedule = SS_PIPE_GPIPE;
        ss_plan_settings_of(p)->queue = SS_QUEUE_FIFO;
    }
    if (one_bucket)
        ss_plan_settings_of(p)->bucket_bytes = 0;
    ss_plan_settings_of(p)->priority = priority;
    ss_costmodel *cm = ss_cost_new(m);
    ss_hier *h = ss_hier_new(g, m, cm, NULL);
    assert_non_null(h);
    ss_sim_result r = {0}, fr = {0};
    ss_status st = ss_hier_eval(h, p, &r, &d);
    if (refuse) {
        if (st != SS_ERR_UNSUPPORTED || !strstr(d.msg, refuse))
            print_error("%s %s: not refused (%s)\n", c->model, c->plan, d.msg);
        assert_int_equal(st, SS_ERR_UNSUPPORTED);
        assert_non_null(strstr(d.msg, refuse));
        if (getenv("SS_HIER_VERBOSE"))
            print_message("%s %s: refused: %s\n", c->model, c->plan, d.msg);
        assert_true(full_iteration(g, m, cm, p, &fr) > 0);
        ss_sim_result_clear(&fr);
        ss_hier_free(h);
        ss_cost_free(cm);
        ss_plan_free(p);
        ss_graph_free(g);
        ss_machine_free(m);
        return 0;
    }
    if (st != SS_OK)
        print_error("%s %s: %s\n", c->model, c->plan, d.msg);
    assert_int_equal(st, SS_OK);
    double full = full_iteration(g, m, cm, p, &fr);
    double err = (r.iteration_us - full) / full;
    if (fabs(err) > c->tol)
        print_error("%s %s%s: hier %.1f us, full %.1f us (%+.3f%%)\n", c->model, c->plan,
                    c->gpipe ? " gpipe" : "", r.iteration_us, full, 100 * err);
    bad += !(fabs(err) <= c->tol);
    if (getenv("SS_HIER_VERBOSE"))
        print_message("%s %s%s: hier %.1f us, full %.1f us (%+.4f%%)\n", c->model, c->plan,
                      c->gpipe ? " gpipe" : "", r.iteration_us, full, 100 * err);
    assert_int_equal(r.n_devices, fr.n_devices);
    double mworst = 0;
    for (int i = 0; i < r.n_devices; i++) {
        /* compute: kernels, blocking sends and updates, per device */
        if (fabs(r.compute_us[i] - fr.compute_us[i]) > 0.005 * fr.compute_us[i] + 1)
            print_error("%s %s device %d: compute %.1f, full %.1f\n", c->model, c->plan, i,
                        r.compute_us[i], fr.compute_us[i]);
        bad += !(fabs(r.compute_us[i] - fr.compute_us[i]) <= 0.005 * fr.compute_us[i] + 1);
        assert_true(fabs(r.static_memory_bytes[i] - fr.static_memory_bytes[i]) <=
                    1e-9 * fr.static_memory_bytes[i] + 1);
        assert_true(fabs(r.weight_bytes[i] - fr.weight_bytes[i]) <= 1e-9 * fr.weight_bytes[i] + 1);
        /* peak: one micro-batch's peak plus the other passes' activations
         * and stage-send buffers in flight (docs/simulator.md,
         * "Hierarchical evaluator") */
        if (fabs(r.peak_memory_bytes[i] - fr.peak_memory_bytes[i]) >
            c->mtol * fr.peak_memory_bytes[i])
            print_error("%s %s device %d: peak %.4g, full %.4g\n", c->model, c->plan, i,
                        r.peak_memory_bytes[i], fr.peak_memory_bytes[i]);
        bad += !(fabs(r.peak_memory_bytes[i] - fr.peak_memory_bytes[i]) <=
                 c->mtol * fr.peak_memory_bytes[i]);
        double me = fabs(r.peak_memory_bytes[i] - fr.peak_memory_bytes[i]) /
                    fr.peak_memory_bytes[i];
        mworst = me > mworst ? me : mworst;
        assert_true(r.capacity_bytes[i] == fr.capacity_bytes[i]);
    }
    assert_int_equal(r.fits, fr.fits);
    ss_sim_result_clear(&r);
    ss_sim_result_clear(&fr);
    ss_hier_free(h);
    ss_cost_free(cm);
    ss_plan_free(p);
    ss_graph_free(g);
    ss_machine_free(m);
    if (getenv("SS_HIER_VERBOSE"))
        print_message("  worst peak memory %.3f%%\n", 100 * mworst);
    return bad;
}

static int check_case(const acase *c)
{
    return check_case_set(c, 0, 0, NULL);
}

static void test_agrees_with_full(void **state)
{
    (void)state;
    int bad = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        bad += check_case(&cases[i]) > 0;
    assert_int_equal(bad, 0);
}

/* Small interleaved plans with the distributed optimizer and one bucket per
 * weight on 4 nodes (found by tests/simulator/test_symmetry.c's random
 * plans, 16-22% off): a rank's later chunk still synchronises its gradients
 * (latency-bound reduce-scatters and all-gathers, one per weight) when its
 * first chunk's last backward starts; the chunks' synchronisations and the
 * stage sends then share the rank's links, which the per-chunk sub-problems
 * do not see, so the evaluator refuses them (docs/simulator.md,
 * "Hierarchical evaluator"). */
#define BERTS "bert:layers=4,hidden=64,heads=8,seq=32,vocab=512"
#define GPTS "gpt:layers=4,hidden=64,heads=8,seq=32,vocab=512"

static void test_agrees_interleaved_distopt(void **state)
{
    (void)state;
    static const struct {
        acase c;
        int priority;
    } uc[] = {
        {{BERTS, 8, 4, "megatron:tp=4,pp=2,dp=4,mb=2,vp=2,recompute=selective,distopt=1", 0,
          0.005, 0.05},
         0},
        {{BERTS, 64, 4, "megatron:tp=1,pp=2,dp=16,mb=2,vp=2,distopt=1", 0, 0.005, 0.05}, 0},
        {{GPTS, 64, 4, "megatron:tp=2,pp=2,dp=8,mb=4,vp=2,recompute=full,distopt=1", 0, 0.005,
          0.05},
         1},
    };
    int bad = 0;
    for (size_t i = 0; i < sizeof uc / sizeof uc[0]; i++)
        bad += check_case_set(&uc[i].c, 1, uc[i].priority, "synchronisations would contend") > 0;
    /* not interleaved, one bucket per weight: the tied embedding's
     * synchronisation waits for the last stage's reduce-scatters (2.8%
     * short before the stage-level model took that wait) */
    static const acase tied = {BERTS, 64, 4, "megatron:tp=1,pp=2,dp=16,mb=2,distopt=1", 0, 0.005,
                               0.05};
    bad += check_case_set(&tied, 1, 0, NULL) > 0;
    assert_int_equal(bad, 0);
}

/* Small plans (hidden 64, pp 2 over 4 nodes) where the gradient
 * synchronisation dominates, found 0.8-2.8% off by test_symmetry's random
 * plans and traced (docs/simulator.md, "Hierarchical evaluator"): the tied
 * embedding's collectives start when every stage holding it reaches them
 * in its own order, keyed by when the last stage's gradient is ready (bulk
 * with one bucket per weight: the last stage synchronises it first; fused
 * buckets and the distributed optimizer: after its own reduce-scatters and
 * all-gathers); interleaved with the distributed optimizer, the other
 * chunk's all-gathers wait for the rank's last backward and share the
 * rank's network; a blocking gradient send that queues behind the
 * sender's all-reduces holds its receiver meanwhile. */
#define GPT2 "gpt:layers=2,hidden=64,heads=8,seq=32,vocab=512"
#define BERT1 "bert:layers=1,hidden=64,heads=8,seq=32,vocab=512"

static void test_agrees_shared_sync(void **state)
{
    (void)state;
    static const struct {
        acase c;
        int one_bucket, priority;
    } uc[] = {
        {{GPT2, 64, 4, "megatron:tp=1,pp=2,dp=16,mb=2,recompute=selective,sync=bulk", 0, 1e-4,
          0.05},
         1, 0},
        {{GPT2, 16, 4, "megatron:tp=2,pp=2,dp=8,mb=2,distopt=1", 0, 1e-4, 0.05}, 0, 0},
        {{GPTS, 64, 4, "megatron:tp=1,pp=2,dp=16,mb=2,vp=2,recompute=selective,distopt=1", 0,
          1e-4, 0.05},
         0, 1},
        {{BERT1, 16, 4, "megatron:tp=2,pp=2,dp=8,mb=2,recompute=full,sp=1,distopt=1", 0, 0.005,
          0.05},
         1, 1},
    };
    int bad = 0;
    for (size_t i = 0; i < sizeof uc / sizeof uc[0]; i++)
        bad += check_case_set(&uc[i].c, uc[i].one_bucket, uc[i].priority, NULL) > 0;
    assert_int_equal(bad, 0);
}

/* Per-stage recompute (settings.recompute_stage): each stage's sub-problem
 * runs under its own mode (the readers of a weight shared with other
 * stages, the tied embedding's, too), within the stated tolerance of the
 * full simulation (the uniform plans of the same structure: 0-0.11%; these
 * 0-0.17%). */
static void test_agrees_recompute_per_stage(void **state)
{
    (void)state;
    static const acase ok[] = {
        {GPT, 128, 4, "megatron:tp=1,pp=4,dp=8,mb=8,recompute=selective*2/none*2", 0, 0.005,
         0.05},
        {GPT, 128, 4, "megatron:tp=1,pp=4,dp=8,mb=8,recompute=full*2/none*2", 0, 0.005, 0.05},
        {GPT, 128, 2, "megatron:tp=4,pp=4,dp=1,mb=8,recompute=full/selective/none/full", 0, 0.005,
         0.05},
        {GPT, 128, 4, "megatron:tp=2,pp=4,dp=4,mb=8,recompute=full/full/selective/none", 0, 0.005,
         0.05},
        {GPT, 128, 4, "megatron:tp=4,pp=2,dp=4,mb=8,vp=2,recompute=selective/none", 0, 0.005,
         0.05},
        {GPT, 128, 4, "megatron:tp=4,pp=2,dp=4,mb=8,vp=2,recompute=full/none", 0, 0.005, 0.05},
        {GPT, 128, 4, "megatron:tp=4,pp=2,dp=4,mb=8,recompute=none/full,sync=bulk", 0, 0.005,
         0.05},
        {BERT, 128, 4, "megatron:tp=4,pp=2,dp=4,mb=8,recompute=full/none,distopt=1", 0, 0.005,
         0.05},
        {GPT12, 128, 4, "megatron:tp=2,pp=4,dp=4,mb=8,vp=3,recompute=full/selective/none/full",
         0, 0.005, 0.05},
    };
    int bad = 0;
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
        bad += check_case(&ok[i]) > 0;
    assert_int_equal(bad, 0);
}

/* ZeRO-3 (distopt 3): the per-micro-batch weight all-gathers and gradient
 * reduce-scatters in the stage sub-problems and on a link resource per
 * rank in the stage-level pipeline, within the stated tolerance of the
 * full simulation where the evaluator judges them (data parallelism inside
 * a node: the links busy 10-19% of a micro-batch's passes; all within
 * 0.25%), and refused, saying why, where it does not: links busy past 20%
 * (this plan: 23%, -0.55% off), a tied embedding (+0.9% off). */
#define GPTU "gpt:layers=8,hidden=1024,heads=16,seq=512,tied=0"

static void test_agrees_zero3(void **state)
{
    (void)state;
    static const acase ok[] = {
        {GPTU, 256, 1, "megatron:tp=1,pp=4,dp=2,mb=8,distopt=3", 0, 0.005, 0.05},
        {GPTU, 256, 1, "megatron:tp=2,pp=2,dp=2,mb=4,distopt=3", 0, 0.005, 0.05},
        {GPTU, 256, 1, "megatron:tp=1,pp=4,dp=2,mb=8,recompute=full,distopt=3", 0, 0.005, 0.05},
        {GPTU, 256, 1, "megatron:tp=2,pp=2,dp=2,mb=4,sp=1,distopt=3", 0, 0.005, 0.05},
        {GPTU, 256, 1, "megatron:tp=2,pp=2,dp=2,mb=8,distopt=3", 0, 0.005, 0.05},
        {GPTU, 256, 1, "megatron:tp=1,pp=4,dp=2,mb=16,distopt=3", 0, 0.005, 0.05},
        {GPTU, 256, 1, "megatron:tp=1,pp=1,dp=8,mb=2,distopt=3", 0, 0.005, 0.05},
        {GPTU, 256, 1, "megatron:tp=4,pp=1,dp=2,mb=4,distopt=3", 0, 0.005, 0.05},
        {GPTU, 256, 1, "megatron:tp=1,pp=2,dp=4,mb=4,recompute=selective,distopt=3", 0, 0.005,
         0.05},
    };
    static const acase no[] = {
        {GPTU, 256, 1, "megatron:tp=1,pp=2,dp=4,mb=8,distopt=3", 0, 0.005, 0.05},
        {GPT, 512, 1, "megatron:tp=1,pp=1,dp=8,mb=4,distopt=3", 0, 0.005, 0.05},
    };
    static const char *const why[] = {"data-parallel links", "tied embedding"};
    int bad = 0;
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
        bad += check_case(&ok[i]) > 0;
    for (size_t i = 0; i < sizeof no / sizeof no[0]; i++)
        bad += check_case_set(&no[i], 0, 0, why[i]) > 0;
    assert_int_equal(bad, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_golden_pipeline),
        cmocka_unit_test(test_agrees_interleaved_distopt),
        cmocka_unit_test(test_agrees_shared_sync),
        cmocka_unit_test(test_golden_interleaved),
        cmocka_unit_test(test_memo),
        cmocka_unit_test(test_block_delta),
        cmocka_unit_test(test_unsupported),
        cmocka_unit_test(test_agrees_with_full),
        cmocka_unit_test(test_agrees_recompute_per_stage),
        cmocka_unit_test(test_agrees_zero3),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
