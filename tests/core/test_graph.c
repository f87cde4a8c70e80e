/*
 * test_graph.c — the graph container: names and lookups, consumers, shared
 * weights, parameter and FLOP totals, validation (duplicate names, shape
 * mismatches, cycles), fingerprints, and allocation-failure injection on
 * ss_graph_add_op (the graph must stay unchanged and usable).
 */
#include "testutil.h"

#include <stdio.h>
#include <string.h>

static int input2(ss_graph *g, const char *name, int64_t a, int64_t b)
{
    ss_op_attrs at;
    memset(&at, 0, sizeof at);
    at.ndim = 2;
    at.shape[0] = a;
    at.shape[1] = b;
    at.kind[0] = SS_DIM_SAMPLE;
    at.kind[1] = SS_DIM_PARAMETER;
    ss_diag d;
    ss_diag_init(&d);
    int op = ss_graph_add(g, name, SS_OP_INPUT, &at, 0, NULL, &d);
    assert_true(op >= 0);
    return ss_graph_out(g, op);
}

static int linear(ss_graph *g, const char *name, int x, int64_t out, int bias)
{
    ss_op_attrs a;
    memset(&a, 0, sizeof a);
    a.out_features = out;
    a.use_bias = bias;
    ss_diag d;
    ss_diag_init(&d);
    int op = ss_graph_add(g, name, SS_OP_LINEAR, &a, 1, &x, &d);
    if (op < 0)
        fail_msg("%s", d.msg);
    return ss_graph_out(g, op);
}

static int relu(ss_graph *g, const char *name, int x)
{
    ss_op_attrs a;
    memset(&a, 0, sizeof a);
    a.unary = SS_UNARY_RELU;
    int op = ss_graph_add(g, name, SS_OP_UNARY, &a, 1, &x, NULL);
    assert_true(op >= 0);
    return ss_graph_out(g, op);
}

/* x[4, 8] -> fc1(16, bias) -> relu -> fc2(2, no bias) */
static ss_graph *mlp(double rate)
{
    ss_graph *g = ss_graph_new("mlp");
    int x = input2(g, "x", 4, 8);
    int h = linear(g, "fc1", x, 16, 1);
    h = relu(g, "relu1", h);
    ss_op_attrs a;
    memset(&a, 0, sizeof a);
    a.rate = rate;
    h = ss_graph_out(g, ss_graph_add(g, "drop", SS_OP_DROPOUT, &a, 1, &h, NULL));
    linear(g, "fc2", h, 2, 0);
    return g;
}

static void test_build_and_lookup(void **state)
{
    (void)state;
    ss_graph *g = mlp(0.1);
    assert_string_equal(ss_graph_name(g), "mlp");
    assert_int_equal(ss_graph_n_ops(g), 5);
    /* x, fc1, fc1.weight, fc1.bias, relu1, drop, fc2, fc2.weight */
    assert_int_equal(ss_graph_n_tensors(g), 8);
    assert_int_equal(ss_graph_find_op(g, "relu1"), 2);
    assert_int_equal(ss_graph_find_op(g, "nope"), -1);
    int w = ss_graph_find_tensor(g, "fc1.weight");
    assert_true(w >= 0);
    assert_string_equal(ss_graph_tensor(g, w)->name, "fc1.weight");
    assert_int_equal(ss_graph_tensor(g, w)->id, w);
    assert_null(ss_graph_op(g, 5));
    assert_null(ss_graph_op(g, -1));
    assert_null(ss_graph_tensor(g, 8));
    assert_int_equal(ss_graph_out(g, 99), -1);
    assert_int_equal(ss_graph_out(g, 1), ss_graph_find_tensor(g, "fc1"));
    /* defaults and training settings */
    assert_int_equal(ss_graph_batch(g), 1);
    ss_graph_set_training(g, 64, SS_OPT_ADAM, SS_PREC_MIXED);
    assert_int_equal(ss_graph_batch(g), 64);
    assert_int_equal(ss_graph_optimizer(g), SS_OPT_ADAM);
    assert_int_equal(ss_graph_precision(g), SS_PREC_MIXED);
    /* totals: 8*16 + 16 + 16*2 = 176 params; flops 2*4*8*16 + 64 + 64 + 2*64 + 2*4*16*2 */
    assert_int_equal(ss_graph_parameters(g), 176);
    assert_true(ss_graph_forward_flops(g) == 1024 + 64 + 64 + 128 + 256);
    assert_int_equal(ss_graph_validate(g, NULL), SS_OK);

    /* duplicate names are rejected by add */
    ss_diag d;
    ss_diag_init(&d);
    int x = ss_graph_find_tensor(g, "x");
    ss_op_attrs a;
    memset(&a, 0, sizeof a);
    a.out_features = 3;
    assert_int_equal(ss_graph_add(g, "fc1", SS_OP_LINEAR, &a, 1, &x, &d), -1);
    assert_non_null(strstr(d.msg, "duplicate op name 'fc1'"));
    /* an op whose tensor name collides with an existing tensor */
    ss_diag_init(&d);
    assert_int_equal(ss_graph_add(g, "fc1.weight", SS_OP_LINEAR, &a, 1, &x, &d), -1);
    assert_non_null(strstr(d.msg, "already exists"));
    ss_diag_init(&d);
    assert_int_equal(ss_graph_add(g, "", SS_OP_LINEAR, &a, 1, &x, &d), -1);
    assert_non_null(strstr(d.msg, "empty name"));
    char longname[128];
    memset(longname, 'a', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    ss_diag_init(&d);
    assert_int_equal(ss_graph_add(g, longname, SS_OP_LINEAR, &a, 1, &x, &d), -1);
    assert_non_null(strstr(d.msg, "too long"));
    assert_int_equal(ss_graph_n_ops(g), 5);
    ss_graph_free(g);
    ss_graph_free(NULL);
}

static void test_consumers(void **state)
{
    (void)state;
    ss_graph *g = ss_graph_new("c");
    int x = input2(g, "x", 2, 4);
    int a = relu(g, "a", x);
    int b = relu(g, "b", x);
    ss_op_attrs at;
    memset(&at, 0, sizeof at);
    int ins[2] = {a, a}; /* the same tensor twice: one consumer entry */
    int s = ss_graph_out(g, ss_graph_add(g, "sq", SS_OP_BINARY, &at, 2, ins, NULL));
    ins[0] = s;
    ins[1] = b;
    ss_graph_add(g, "sum", SS_OP_BINARY, &at, 2, ins, NULL);
    assert_int_equal(ss_graph_n_consumers(g, x), 2);
    assert_int_equal(ss_graph_consumer(g, x, 0), 1);
    assert_int_equal(ss_graph_consumer(g, x, 1), 2);
    assert_int_equal(ss_graph_consumer(g, x, 2), -1);
    assert_int_equal(ss_graph_n_consumers(g, a), 1);
    assert_int_equal(ss_graph_consumer(g, a, 0), 3);
    assert_int_equal(ss_graph_n_consumers(g, b), 1);
    assert_int_equal(ss_graph_consumer(g, b, 0), 4);
    assert_int_equal(ss_graph_n_consumers(g, ss_graph_find_tensor(g, "sum")), 0);
    assert_int_equal(ss_graph_n_consumers(g, 999), 0);
    ss_graph_free(g);
}

static void test_shared_weights(void **state)
{
    (void)state;
    ss_graph *g = ss_graph_new("shared");
    int x = input2(g, "x", 4, 8);
    int h = linear(g, "step0", x, 8, 1);
    const ss_op *s0 = ss_graph_op(g, 1);
    ss_op_spec sp;
    memset(&sp, 0, sizeof sp);
    sp.name = "step1";
    sp.type = SS_OP_LINEAR;
    sp.attrs.out_features = 8;
    sp.attrs.use_bias = 1;
    sp.n_in = 1;
    sp.inputs[0] = h;
    sp.n_w = 2;
    sp.weights[0] = s0->weights[0];
    sp.weights[1] = s0->weights[1];
    ss_diag d;
    ss_diag_init(&d);
    int id = ss_graph_add_op(g, &sp, &d);
    assert_true(id >= 0);
    assert_int_equal(ss_graph_op(g, id)->weights[0], s0->weights[0]);
    assert_int_equal(ss_graph_find_tensor(g, "step1.weight"), -1);
    /* 8*8 + 8 counted once */
    assert_int_equal(ss_graph_parameters(g), 72);
    assert_true(ss_graph_forward_flops(g) == 2 * (2.0 * 4 * 8 * 8 + 32));
    assert_int_equal(ss_graph_validate(g, NULL), SS_OK);

    /* wrong count, wrong shape, not a weight */
    sp.name = "bad1";
    sp.n_w = 1;
    ss_diag_init(&d);
    assert_int_equal(ss_graph_add_op(g, &sp, &d), -1);
    assert_non_null(strstr(d.msg, "expects 2 weights, 1 given"));
    sp.name = "bad2";
    sp.n_w = 2;
    sp.attrs.out_features = 4;
    ss_diag_init(&d);
    assert_int_equal(ss_graph_add_op(g, &sp, &d), -1);
    assert_non_null(strstr(d.msg, "shared weight 0 'step0.weight'"));
    assert_non_null(strstr(d.msg, "bad2"));
    sp.name = "bad3";
    sp.attrs.out_features = 8;
    sp.weights[0] = h; /* an activation */
    ss_diag_init(&d);
    assert_int_equal(ss_graph_add_op(g, &sp, &d), -1);
    assert_non_null(strstr(d.msg, "non-weight"));
    sp.weights[0] = 12345;
    ss_diag_init(&d);
    assert_int_equal(ss_graph_add_op(g, &sp, &d), -1);
    assert_non_null(strstr(d.msg, "does not exist"));
    assert_int_equal(ss_graph_n_ops(g), 3);

    /* GPT-style tied LM head: linear with trans_b reuses the embedding table */
    ss_op_attrs ia;
    memset(&ia, 0, sizeof ia);
    ia.ndim = 2;
    ia.shape[0] = 2;
    ia.shape[1] = 3;
    ia.dtype = SS_I32;
    int ids = ss_graph_out(g, ss_graph_add(g, "ids", SS_OP_INPUT, &ia, 0, NULL, NULL));
    ss_op_attrs ea;
    memset(&ea, 0, sizeof ea);
    ea.vocab = 10;
    ea.dim = 4;
    int emb = ss_graph_add(g, "emb", SS_OP_EMBEDDING, &ea, 1, &ids, NULL);
    assert_true(emb >= 0);
    memset(&sp, 0, sizeof sp);
    sp.name = "lm_head";
    sp.type = SS_OP_LINEAR;
    sp.attrs.out_features = 10;
    sp.attrs.trans_b = 1;
    sp.n_in = 1;
    sp.inputs[0] = ss_graph_out(g, emb);
    sp.n_w = 1;
    sp.weights[0] = ss_graph_op(g, emb)->weights[0];
    ss_diag_init(&d);
    int head = ss_graph_add_op(g, &sp, &d);
    if (head < 0)
        fail_msg("%s", d.msg);
    assert_int_equal(ss_graph_tensor(g, ss_graph_out(g, head))->shape[2], 10);
    assert_int_equal(ss_graph_parameters(g), 72 + 40);
    assert_int_equal(ss_graph_validate(g, NULL), SS_OK);
    sp.name = "untied";
    sp.attrs.trans_b = 0; /* would need [4, 10] */
    ss_diag_init(&d);
    assert_int_equal(ss_graph_add_op(g, &sp, &d), -1);
    assert_non_null(strstr(d.msg, "expected a weight [4x10]"));
    ss_graph_free(g);
}

static void test_validate_catches_corruption(void **state)
{
    (void)state;
    ss_diag d;
    /* duplicate op names */
    ss_graph *g = mlp(0.1);
    ss_op *op = (ss_op *)ss_graph_op(g, 2);
    strcpy(op->name, "fc1");
    ss_diag_init(&d);
    assert_int_equal(ss_graph_validate(g, &d), SS_ERR_INVALID);
    assert_non_null(strstr(d.msg, "duplicate op name 'fc1'"));
    ss_graph_free(g);

    /* duplicate tensor names */
    g = mlp(0.1);
    ss_tensor *t = (ss_tensor *)ss_graph_tensor(g, ss_graph_find_tensor(g, "relu1"));
    strcpy(t->name, "fc1");
    ss_diag_init(&d);
    assert_int_equal(ss_graph_validate(g, &d), SS_ERR_INVALID);
    assert_non_null(strstr(d.msg, "duplicate tensor name 'fc1'"));
    ss_graph_free(g);

    /* a shape that does not match inference */
    g = mlp(0.1);
    t = (ss_tensor *)ss_graph_tensor(g, ss_graph_find_tensor(g, "fc2"));
    t->shape[1] = 3;
    ss_diag_init(&d);
    assert_int_equal(ss_graph_validate(g, &d), SS_ERR_INVALID);
    assert_non_null(strstr(d.msg, "'fc2'"));
    assert_non_null(strstr(d.msg, "inferred"));
    ss_graph_free(g);

    /* an op consuming a later tensor (a cycle) */
    g = mlp(0.1);
    op = (ss_op *)ss_graph_op(g, 2);
    op->inputs[0] = ss_graph_find_tensor(g, "fc2");
    ss_diag_init(&d);
    assert_int_equal(ss_graph_validate(g, &d), SS_ERR_INVALID);
    assert_non_null(strstr(d.msg, "cycle"));
    assert_non_null(strstr(d.msg, "relu1"));
    ss_graph_free(g);

    /* an input reference out of range */
    g = mlp(0.1);
    op = (ss_op *)ss_graph_op(g, 3);
    op->inputs[0] = 77;
    ss_diag_init(&d);
    assert_int_equal(ss_graph_validate(g, &d), SS_ERR_INVALID);
    assert_non_null(strstr(d.msg, "out of range"));
    ss_graph_free(g);

    /* a corrupted attribute that the op no longer accepts */
    g = mlp(0.1);
    op = (ss_op *)ss_graph_op(g, 3);
    op->attrs.rate = 2.0;
    ss_diag_init(&d);
    assert_int_equal(ss_graph_validate(g, &d), SS_ERR_INVALID);
    assert_non_null(strstr(d.msg, "'drop'"));
    ss_graph_free(g);
}

static void test_fingerprint(void **state)
{
    (void)state;
    ss_graph *a = mlp(0.1), *b = mlp(0.1), *c = mlp(0.2);
    assert_true(ss_graph_fingerprint(a) == ss_graph_fingerprint(b));
    assert_true(ss_graph_fingerprint(a) != ss_graph_fingerprint(c));
    ss_graph_set_training(b, 32, SS_OPT_SGD, SS_PREC_FP32);
    assert_true(ss_graph_fingerprint(a) != ss_graph_fingerprint(b));
    ss_graph_set_training(b, 1, SS_OPT_SGD, SS_PREC_FP32);
    assert_true(ss_graph_fingerprint(a) == ss_graph_fingerprint(b));
    ss_graph_set_training(b, 1, SS_OPT_ADAM, SS_PREC_FP32);
    assert_true(ss_graph_fingerprint(a) != ss_graph_fingerprint(b));
    /* same structure, one op renamed */
    ss_graph *r = ss_graph_new("mlp");
    int x = input2(r, "x", 4, 8);
    int h = linear(r, "fc1", x, 16, 1);
    h = relu(r, "relu_renamed", h);
    ss_op_attrs at;
    memset(&at, 0, sizeof at);
    at.rate = 0.1;
    h = ss_graph_out(r, ss_graph_add(r, "drop", SS_OP_DROPOUT, &at, 1, &h, NULL));
    linear(r, "fc2", h, 2, 0);
    assert_true(ss_graph_fingerprint(a) != ss_graph_fingerprint(r));
    ss_graph_free(a);
    ss_graph_free(b);
    ss_graph_free(c);
    ss_graph_free(r);
}

/* Many ops: exercises array and hash-table growth. */
static void test_many_ops(void **state)
{
    (void)state;
    ss_graph *g = ss_graph_new("deep");
    int h = input2(g, "x", 2, 3);
    const ss_op *first = ss_graph_op(g, 0);
    const ss_tensor *tx = ss_graph_tensor(g, h);
    char nm[32];
    for (int i = 0; i < 500; i++) {
        snprintf(nm, sizeof nm, "r%d", i);
        h = relu(g, nm, h);
    }
    assert_int_equal(ss_graph_n_ops(g), 501);
    /* borrowed pointers survive growth */
    assert_ptr_equal(first, ss_graph_op(g, 0));
    assert_ptr_equal(tx, ss_graph_tensor(g, 0));
    assert_string_equal(first->name, "x");
    assert_int_equal(ss_graph_n_consumers(g, 0), 1);
    for (int i = 0; i < 500; i += 37) {
        snprintf(nm, sizeof nm, "r%d", i);
        assert_int_equal(ss_graph_find_op(g, nm), i + 1);
        assert_int_equal(ss_graph_find_tensor(g, nm), i + 1);
    }
    assert_int_equal(ss_graph_validate(g, NULL), SS_OK);
    ss_graph_free(g);
}

/* Allocation failures at every point of ss_graph_add_op leave the graph
 * unchanged and usable. */
static void test_fault_injection(void **state)
{
    (void)state;
    /* no growth; a new tensor chunk (256) and name-table growth; a new op chunk */
    static const int pads[3] = {0, 247, 251};
    for (int pass = 0; pass < 3; pass++) {
        ss_graph *g = mlp(0.1);
        {
            int h = ss_graph_find_tensor(g, "fc2");
            for (int i = 0; i < pads[pass]; i++) {
                char nm[16];
                snprintf(nm, sizeof nm, "pad%d", i);
                h = relu(g, nm, h);
            }
        }
        int nops = ss_graph_n_ops(g), nt = ss_graph_n_tensors(g);
        uint64_t fp = ss_graph_fingerprint(g);
        int x = ss_graph_find_tensor(g, "x");
        int nc = ss_graph_n_consumers(g, x);
        ss_op_attrs a;
        memset(&a, 0, sizeof a);
        a.out_features = 5;
        a.use_bias = 1;
        int ok = 0;
        for (long n = 0; n < 64 && !ok; n++) {
            ss_diag d;
            ss_diag_init(&d);
            ss_test_fail_after(n);
            int id = ss_graph_add(g, "extra", SS_OP_LINEAR, &a, 1, &x, &d);
            ss_test_fail_after(-1);
            if (id >= 0) {
                ok = 1;
                break;
            }
            assert_int_equal(d.status, SS_ERR_NOMEM);
            assert_non_null(strstr(d.msg, "extra"));
            assert_int_equal(ss_graph_n_ops(g), nops);
            assert_int_equal(ss_graph_n_tensors(g), nt);
            assert_int_equal(ss_graph_n_consumers(g, x), nc);
            assert_int_equal(ss_graph_find_op(g, "extra"), -1);
            assert_int_equal(ss_graph_find_tensor(g, "extra.weight"), -1);
            assert_true(ss_graph_fingerprint(g) == fp);
            assert_int_equal(ss_graph_validate(g, NULL), SS_OK);
        }
        assert_true(ok);
        assert_int_equal(ss_graph_n_ops(g), nops + 1);
        assert_int_equal(ss_graph_n_consumers(g, x), nc + 1);
        assert_int_equal(ss_graph_validate(g, NULL), SS_OK);
        ss_graph_free(g);
    }
    /* ss_graph_new under failure */
    for (long n = 0; n < 4; n++) {
        ss_test_fail_after(n);
        ss_graph *g = ss_graph_new("x");
        ss_test_fail_after(-1);
        ss_graph_free(g);
    }
    /* validate under failure: NOMEM, never a crash */
    ss_graph *g = mlp(0.1);
    ss_diag d;
    ss_diag_init(&d);
    ss_test_fail_after(0);
    ss_status st = ss_graph_validate(g, &d);
    ss_test_fail_after(-1);
    assert_int_equal(st, SS_ERR_NOMEM);
    ss_graph_free(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_build_and_lookup),
        cmocka_unit_test(test_consumers),
        cmocka_unit_test(test_shared_weights),
        cmocka_unit_test(test_validate_catches_corruption),
        cmocka_unit_test(test_fingerprint),
        cmocka_unit_test(test_many_ops),
        cmocka_unit_test(test_fault_injection),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
