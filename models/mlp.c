/*
 * mlp.c — the `mlp` zoo family: a stack of fully connected layers.
 *
 * Graph: x[N, in] -> (fcI -> reluI) for I = 1..layers -> out[N, classes]
 * -> loss (softmax cross-entropy against labels[N]). Keys (zoo.c order):
 * layers, hidden, in, classes. Parameters: in*h + h + (layers-1)(h*h + h)
 * + h*classes + classes.
 */
#include "zoo.h"

void ss_zoo_build_mlp(zb *b, int64_t batch, const int64_t *p)
{
    int64_t layers = p[0], hidden = p[1], in = p[2], classes = p[3];
    int64_t xs[2] = {batch, in};
    ss_dim_kind xk[2] = {SS_DIM_SAMPLE, SS_DIM_PARAMETER};
    int x = zb_input(b, "x", 2, xs, xk, b->act);
    ss_dim_kind lk[1] = {SS_DIM_SAMPLE};
    int labels = zb_input(b, "labels", 1, &batch, lk, SS_I32);
    for (int64_t l = 1; l <= layers; l++) {
        x = zb_linear(b, zb_name(b, "fc%lld", (long long)l), x, hidden, 1);
        x = zb_unary(b, zb_name(b, "relu%lld", (long long)l), x, SS_UNARY_RELU);
    }
    x = zb_linear(b, "out", x, classes, 1);
    zb_softmax_ce(b, "loss", x, labels);
}
