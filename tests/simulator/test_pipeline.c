/*
 * test_pipeline.c — pipeline schedules against hand-derived golden figures:
 * GPipe, 1F1B and Megatron's interleaved 1F1B (virtual stages) on a
 * balanced chain of linears, with free and with costed stage sends, and
 * the peak activation memory of the first stage.
 *
 * Model chain8 (x -> fc1 -> ... -> fc8, batch 64, f32) on "line4" (4
 * unit-gpus in a line, links 1e6 GB/s, 0 us: a transfer of a micro-batch
 * activation, at most 16*1000*4 B, takes at most 6.4e-5 us) or "pair"
 * (2 unit-gpus, 10 GB/s, 5 us). Device type "unit-gpu": 1 TFLOP/s f32, launch 0,
 * efficiency 1: a linear on N samples costs forward 2N us and backward 4N us
 * (tests/simulator/test_build.c). With p pipeline ranks, v chunks per rank and
 * m micro-batches (N = 64/m), each chunk holds 8/(p v) linears, so per
 * micro-batch a chunk's forward takes t_f/v and its backward t_b/v, where
 * t_f = 2N * 8/p and t_b = 2 t_f are the per-rank (per-stage) times.
 */
#include "testutil.h"
#include "simulator/build.h"
#include "simulator/engine.h"
#include "simulator/memory.h"
#include "simulator/taskgraph.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct fix {
    ss_graph *g;
    ss_machine *m;
    ss_costmodel *cm;
    ss_plan *p;
    ss_builder *b;
    ss_taskgraph *tg;
    ss_memory *mm;
    ss_engine *e;
    const ss_engine_result *r;
} fix;

static void setup(fix *f, const char *topo)
{
    ss_diag d;
    ss_diag_init(&d);
    char path[4096];
    memset(f, 0, sizeof *f);
    snprintf(path, sizeof path, "%s", ss_test_path("tests/data/sim/chain8.json"));
    assert_int_equal(ss_model_load(path, &f->g, &d), SS_OK);
    snprintf(path, sizeof path, "%s", ss_test_path(topo));
    assert_int_equal(ss_machine_load(path, &f->m, &d), SS_OK);
    f->cm = ss_cost_new(f->m);
    f->p = ss_plan_new(f->g, f->m);
    f->b = ss_build_new(f->g, f->m, f->cm);
    f->tg = ss_taskgraph_new(0, 0);
    f->mm = ss_memory_new();
    f->e = ss_engine_new();
    assert_true(f->cm && f->p && f->b && f->tg && f->mm && f->e);
}

static void teardown(fix *f)
{
    ss_engine_free(f->e);
    ss_memory_free(f->mm);
    ss_taskgraph_free(f->tg);
    ss_build_free(f->b);
    ss_plan_free(f->p);
    ss_cost_free(f->cm);
    ss_machine_free(f->m);
    ss_graph_free(f->g);
}

/* p ranks, v chunks each, m micro-batches: linear fc(i+1) in chunk
 * i * p v / 8, on rank chunk mod p (device = rank), split m ways on the
 * sample dim on that device; x with fc1. */
static void pipeline(fix *f, int p, int v, int m, ss_pipe_schedule sched)
{
    ss_diag d;
    ss_diag_init(&d);
    ss_plan_settings *s = ss_plan_settings_of(f->p);
    s->stages = p * v;
    s->virtual_stages = v;
    s->microbatches = m;
    s->schedule = sched;
    int devs[64];
    for (int i = 0; i <= 8; i++) {
        char name[8];
        snprintf(name, sizeof name, i ? "fc%d" : "x", i);
        int op = ss_graph_find_op(f->g, name);
        assert_true(op >= 0);
        int chunk = (i ? i - 1 : 0) * p * v / 8;
        ss_pconfig c = *ss_plan_config(f->p, op);
        for (int k = 0; k < SS_MAX_DIMS; k++)
            c.deg[k] = 1;
        c.deg[0] = m;
        c.red = c.rep = 1;
        c.ntiles = m;
        for (int t = 0; t < m; t++)
            devs[t] = chunk % p;
        c.devices = devs;
        c.stage = chunk;
        assert_int_equal(ss_plan_set_config(f->p, op, &c, &d), SS_OK);
    }
}

static void run(fix *f)
{
    ss_diag d;
    ss_diag_init(&d);
    assert_int_equal(ss_plan_validate(f->p, f->g, f->m, &d), SS_OK);
    assert_int_equal(ss_build_run(f->b, f->p, f->tg, f->mm, &d), SS_OK);
    assert_int_equal(ss_build_memory(f->b, f->mm, &d), SS_OK);
    ss_engine_config ec = {.policy = ss_build_policy(f->b)};
    assert_int_equal(ss_engine_run(f->e, f->tg, &ec, &d), SS_OK);
    f->r = ss_engine_result_of(f->e);
    assert_non_null(f->r);
    assert_int_equal(ss_build_stats_of(f->b)->microbatch_gating, 1);
}

/* End of the last backward task: the iteration before the weight updates. */
static double bwd_span(const fix *f)
{
    double span = 0;
    for (int t = 0; t < f->tg->n_tasks; t++)
        if (f->tg->kind[t] == SS_TASK_BWD && f->r->end[t] > span)
            span = f->r->end[t];
    return span;
}

/* Compute busy time of device dev (forward and backward tasks). */
static double compute_busy(const fix *f, int dev)
{
    double busy = 0;
    for (int t = 0; t < f->tg->n_tasks; t++)
        if ((f->tg->kind[t] == SS_TASK_BWD || f->tg->kind[t] == SS_TASK_FWD) &&
            f->tg->res[f->tg->res_off[t]] == dev)
            busy += f->tg->dur[t];
    return busy;
}

static int uses(const fix *f, int t, int dev)
{
    for (int i = f->tg->res_off[t]; i < f->tg->res_off[t + 1]; i++)
        if (f->tg->res[i] == dev)
            return 1;
    return 0;
}

static void dump(const fix *f, int dev)
{
    for (int t = 0; t < f->tg->n_tasks; t++)
        if (uses(f, t, dev))
            printf("dev%d %s %s mb%d [%g, %g] ready %g blocker %d(%s) id %d\n", dev, f->tg->kind[t] == SS_TASK_FWD ? "F" : f->tg->kind[t] == SS_TASK_BWD ? "B" : "X",
                   ss_graph_op(f->g, f->tg->op[t])->name, f->tg->mb[t], f->r->start[t],
                   f->r->end[t], f->r->ready[t], f->r->blocker[t], f->r->blocker[t] >= 0 ? ss_graph_op(f->g, f->tg->op[f->r->blocker[t]])->name : "-", t);
}

static void test_explore(void **state)
{
    (void)state;
    fix f;
    setup(&f, "tests/data/sim/line4.json");
    int cases[][3] = {{4, 1, 8}, {4, 2, 8}, {4, 4, 8}, {2, 2, 4}, {2, 4, 8}, {4, 2, 4}, {4, 2, 16}};
    for (int c = 0; c < 7; c++) {
        int p = cases[c][0], v = cases[c][1], m = cases[c][2];
        pipeline(&f, p, v, m, SS_PIPE_1F1B);
        run(&f);
        double tf = 2.0 * 64 / m * 8 / p, tb = 2 * tf;
        printf("p=%d v=%d m=%d span %g formula %g\n", p, v, m, bwd_span(&f),
               m * (tf + tb) + (p - 1) * (tf + tb) / v);
        (void)compute_busy;
        if (c == 3)
            for (int dv = 0; dv < 4; dv++)
                dump(&f, dv);
    }
    teardown(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_explore),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
