/*
 * chain_fixture.h — the 16-linear chain the hierarchical-evaluator and
 * per-stage-recompute tests share (test_hier.c, test_recompute_stage.c):
 * an input of 64 x 1000 f32 and LIN = 16 linears of 1000 features, SGD,
 * fp32, batch 64. Header-only: each test includes it once.
 */
#ifndef SS_TEST_CHAIN_FIXTURE_H
#define SS_TEST_CHAIN_FIXTURE_H

#include "testutil.h"

#include <stdio.h>

#define LIN 16

static inline ss_graph *chain16(void)
{
    ss_diag d;
    ss_diag_init(&d);
    ss_graph *g = ss_graph_new("chain16");
    assert_non_null(g);
    ss_op_attrs a = {0};
    a.ndim = 2;
    a.shape[0] = 64;
    a.shape[1] = 1000;
    a.kind[0] = SS_DIM_SAMPLE;
    a.kind[1] = SS_DIM_PARAMETER;
    a.dtype = SS_F32;
    int op = ss_graph_add(g, "x", SS_OP_INPUT, &a, 0, NULL, &d);
    assert_true(op >= 0);
    for (int i = 0; i < LIN; i++) {
        char name[16];
        snprintf(name, sizeof name, "fc%d", i + 1);
        ss_op_attrs l = {0};
        l.out_features = 1000;
        int in = ss_graph_out(g, op);
        op = ss_graph_add(g, name, SS_OP_LINEAR, &l, 1, &in, &d);
        assert_true(op >= 0);
    }
    ss_graph_set_training(g, 64, SS_OPT_SGD, SS_PREC_FP32);
    return g;
}

#endif
