/*
 * test_classes.c — structural classes of operators (search/classes.h) and
 * the op signature they start from (ss_op_signature). Expected classes are
 * read off the zoo's unrolled RNN (rnnlm: tokens, embed, l0, l1, proj,
 * labels, loss per step, initial states l{0,1}.{h0,c0}) and a hand-built
 * graph of two identical branches.
 */
#include "testutil.h"
#include "search/classes.h"

#include <stdlib.h>
#include <string.h>

static ss_graph *zoo(const char *spec)
{
    ss_graph *g = NULL;
    ss_diag d;
    ss_diag_init(&d);
    assert_int_equal(ss_model_build(spec, 8, 1, &g, &d), SS_OK);
    return g;
}

static int cls(const ss_graph *g, const int *c, const char *name)
{
    int op = ss_graph_find_op(g, name);
    assert_true(op >= 0);
    return c[op];
}

/* rnnlm with 5 steps and 2 layers (step t: tokens.t -> embed.t -> l0.t ->
 * l1.t -> proj.t -> loss.t <- labels.t; l0.t also reads l0.t-1, and l0.t0
 * reads the initial states l0.h0 and l0.c0). Round 0 (signature + weights):
 * every step of a layer together (they share the layer's weights and have
 * one shape), l0 apart from l1 (other weights of the same shape). Round 1:
 * t0 reads the initial states, the later steps the previous step, and the
 * last step feeds no next step: t0 and t4 leave their layer's class, t1..t3
 * stay together. */
static void test_rnn_steps(void **state)
{
    (void)state;
    ss_graph *g = zoo("rnnlm:steps=5,layers=2,hidden=64,vocab=100");
    int n = ss_graph_n_ops(g), nc;
    int *c = malloc((size_t)n * sizeof *c);
    ss_diag d;
    ss_diag_init(&d);

    assert_int_equal(ss_op_classes(g, 0, c, &nc, &d), SS_OK);
    assert_int_equal(cls(g, c, "l0.t0"), cls(g, c, "l0.t3"));
    assert_int_not_equal(cls(g, c, "l0.t1"), cls(g, c, "l1.t1"));
    assert_int_equal(cls(g, c, "tokens.t0"), cls(g, c, "tokens.t3"));
    assert_int_equal(cls(g, c, "loss.t0"), cls(g, c, "loss.t2"));
    assert_int_not_equal(cls(g, c, "tokens.t0"), cls(g, c, "loss.t0"));
    int nc0 = nc;

    assert_int_equal(ss_op_classes(g, 1, c, &nc, &d), SS_OK);
    assert_true(nc > nc0);
    assert_int_not_equal(cls(g, c, "l0.t0"), cls(g, c, "l0.t1"));
    assert_int_equal(cls(g, c, "l0.t1"), cls(g, c, "l0.t2"));
    assert_int_equal(cls(g, c, "l0.t1"), cls(g, c, "l0.t3"));
    assert_int_not_equal(cls(g, c, "l0.t1"), cls(g, c, "l0.t4"));
    assert_int_equal(cls(g, c, "l1.t1"), cls(g, c, "l1.t3"));
    assert_int_not_equal(cls(g, c, "l0.t1"), cls(g, c, "l1.t1"));
    assert_int_equal(cls(g, c, "tokens.t0"), cls(g, c, "tokens.t4"));
    assert_int_equal(cls(g, c, "embed.t0"), cls(g, c, "embed.t4"));
    assert_int_equal(cls(g, c, "proj.t0"), cls(g, c, "proj.t4"));
    assert_int_equal(cls(g, c, "labels.t1"), cls(g, c, "labels.t2"));
    assert_int_equal(cls(g, c, "loss.t0"), cls(g, c, "loss.t4"));

    /* ids dense and numbered by first op; the same every time */
    int *again = malloc((size_t)n * sizeof *again);
    int nc2;
    assert_int_equal(ss_op_classes(g, 1, again, &nc2, &d), SS_OK);
    assert_int_equal(nc2, nc);
    assert_memory_equal(c, again, (size_t)n * sizeof *c);
    int next = 0;
    for (int o = 0; o < n; o++) {
        assert_true(c[o] >= 0 && c[o] <= next);
        if (c[o] == next)
            next++;
    }
    assert_int_equal(next, nc);

    /* enough rounds separate every step from both ends of the loop */
    assert_int_equal(ss_op_classes(g, 4, c, &nc, &d), SS_OK);
    assert_int_not_equal(cls(g, c, "l0.t1"), cls(g, c, "l0.t2"));
    free(again);
    free(c);
    ss_graph_free(g);
}

static int add_input(ss_graph *g, const char *name, int64_t cols)
{
    ss_op_attrs a;
    memset(&a, 0, sizeof a);
    a.ndim = 2;
    a.shape[0] = 8;
    a.shape[1] = cols;
    a.kind[0] = SS_DIM_SAMPLE;
    a.kind[1] = SS_DIM_PARAMETER;
    a.dtype = SS_F32;
    ss_diag d;
    ss_diag_init(&d);
    int op = ss_graph_add(g, name, SS_OP_INPUT, &a, 0, NULL, &d);
    assert_true(op >= 0);
    return op;
}

static int add_linear(ss_graph *g, const char *name, int in_op, int64_t out, int n_w,
                      const int *w)
{
    ss_op_spec s;
    memset(&s, 0, sizeof s);
    s.name = name;
    s.type = SS_OP_LINEAR;
    s.attrs.out_features = out;
    s.n_in = 1;
    s.inputs[0] = ss_graph_out(g, in_op);
    s.n_w = n_w;
    for (int k = 0; k < n_w && k < SS_MAX_WEIGHTS; k++)
        s.weights[k] = w[k];
    ss_diag d;
    ss_diag_init(&d);
    int op = ss_graph_add_op(g, &s, &d);
    assert_true(op >= 0);
    return op;
}

/* Two branches x -> a1 -> a2 and y -> b1 -> b2 of equal shapes, b1 reusing
 * a1's weights, a2 and b2 with weights of their own: a1 and b1 share a class
 * at round 0, a2 and b2 do not (other weights); an input of another width
 * never joins. */
static void test_weights_and_shapes(void **state)
{
    (void)state;
    ss_diag d;
    ss_diag_init(&d);
    ss_graph *g = ss_graph_new("branches");
    int x = add_input(g, "x", 16), y = add_input(g, "y", 16), z = add_input(g, "z", 32);
    int a1 = add_linear(g, "a1", x, 16, -1, NULL);
    int a2 = add_linear(g, "a2", a1, 4, -1, NULL);
    const ss_op *o1 = ss_graph_op(g, a1);
    int b1 = add_linear(g, "b1", y, 16, o1->n_w, o1->weights); /* weight and bias */
    int b2 = add_linear(g, "b2", b1, 4, -1, NULL);
    ss_graph_set_training(g, 8, SS_OPT_SGD, SS_PREC_FP32);

    assert_int_equal(ss_op_signature(g, a2), ss_op_signature(g, b2));
    assert_int_equal(ss_op_signature(g, x), ss_op_signature(g, y));
    assert_int_not_equal(ss_op_signature(g, x), ss_op_signature(g, z));
    assert_int_not_equal(ss_op_signature(g, a1), ss_op_signature(g, a2));
    assert_true(ss_op_signature(g, -1) == 0 && ss_op_signature(g, 99) == 0);

    int n = ss_graph_n_ops(g), nc;
    int c[8];
    assert_int_equal(n, 7);
    assert_int_equal(ss_op_classes(g, 0, c, &nc, &d), SS_OK);
    assert_int_equal(c[x], c[y]);
    assert_int_not_equal(c[x], c[z]);
    assert_int_equal(c[a1], c[b1]);     /* shared weights */
    assert_int_not_equal(c[a2], c[b2]); /* own weights of one shape */
    assert_int_equal(nc, 5);
    /* round 1: a1 and b1 feed a2 and b2, now apart; x and y still feed
     * ops of one round-0 class */
    assert_int_equal(ss_op_classes(g, 1, c, &nc, &d), SS_OK);
    assert_int_equal(c[x], c[y]);
    assert_int_not_equal(c[a1], c[b1]);
    assert_int_equal(nc, 6);
    ss_graph_free(g);
}

/* Allocation failure: NOMEM, class_of untouched. */
static void test_nomem(void **state)
{
    (void)state;
    ss_graph *g = zoo("rnnlm:steps=2,layers=1,hidden=32,vocab=50");
    int n = ss_graph_n_ops(g), nc = -7;
    int *c = malloc((size_t)n * sizeof *c);
    for (int o = 0; o < n; o++)
        c[o] = -3;
    ss_diag d;
    ss_diag_init(&d);
    ss_test_fail_after(2);
    ss_status st = ss_op_classes(g, 1, c, &nc, &d);
    ss_test_fail_after(-1);
    assert_int_equal(st, SS_ERR_NOMEM);
    assert_int_equal(nc, -7);
    for (int o = 0; o < n; o++)
        assert_int_equal(c[o], -3);
    free(c);
    ss_graph_free(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rnn_steps),
        cmocka_unit_test(test_weights_and_shapes),
        cmocka_unit_test(test_nomem),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
