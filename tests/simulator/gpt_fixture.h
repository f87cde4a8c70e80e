/*
 * gpt_fixture.h — the fixture the evaluator and plan-view tests share
 * (test_evaluator.c, test_plan_view.c): GPT 8 x 1024 (batch 64) on 2
 * DGX-A100 nodes (16 GPUs) with the analytic cost model and the Megatron
 * plan tp 2, pp 2, dp 4, 8 micro-batches (the hierarchical and symmetric
 * evaluators both apply). Header-only: each test includes it once.
 */
#ifndef SS_TEST_GPT_FIXTURE_H
#define SS_TEST_GPT_FIXTURE_H

#include "testutil.h"

typedef struct fix {
    ss_graph *g;
    ss_machine *m;
    ss_costmodel *cm;
    ss_plan *p;
} fix;

/* Build the fixture; any failure fails the test. */
static inline void setup(fix *f)
{
    ss_diag d;
    ss_diag_init(&d);
    assert_int_equal(ss_machine_load_nodes(ss_test_path("topologies/dgx-a100.json"), 2, &f->m,
                                           &d),
                     SS_OK);
    assert_int_equal(ss_model_build("gpt:layers=8,hidden=1024,heads=16,seq=512", 64,
                                    ss_machine_n_devices(f->m), &f->g, &d),
                     SS_OK);
    assert_int_equal(ss_plan_from_spec("megatron:tp=2,pp=2,dp=4,mb=8", f->g, f->m, &f->p, &d),
                     SS_OK);
    f->cm = ss_cost_new(f->m);
    assert_non_null(f->cm);
}

static inline void teardown(fix *f)
{
    ss_plan_free(f->p);
    ss_cost_free(f->cm);
    ss_machine_free(f->m);
    ss_graph_free(f->g);
}

#endif
