/*
 * test_ops.c — operator semantics for every op type: shape inference (and its
 * error cases), dim kinds, weights, FLOPs against hand-computed numbers,
 * split masks, contraction and the tile -> operand region function. Ends with
 * a property test: random splits of random small ops cover the output exactly
 * once and their forward FLOPs sum to the whole op's.
 */
#include "testutil.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* ---- helpers ------------------------------------------------------ */

/* Add an input: kinds as letters ('s', 'a', 'p'), then ndim extents. */
static int input(ss_graph *g, const char *name, ss_dtype dt, const char *kinds, int ndim, ...)
{
    ss_op_attrs a;
    memset(&a, 0, sizeof a);
    a.ndim = ndim;
    a.dtype = dt;
    va_list ap;
    va_start(ap, ndim);
    for (int i = 0; i < ndim; i++) {
        a.shape[i] = va_arg(ap, int64_t);
        a.kind[i] = kinds[i] == 's' ? SS_DIM_SAMPLE : kinds[i] == 'a' ? SS_DIM_ATTRIBUTE : SS_DIM_PARAMETER;
    }
    va_end(ap);
    ss_diag d;
    ss_diag_init(&d);
    int op = ss_graph_add(g, name, SS_OP_INPUT, &a, 0, NULL, &d);
    if (op < 0)
        fail_msg("input %s: %s", name, d.msg);
    return ss_graph_out(g, op);
}

/* Add an op that must succeed; returns the op. */
static const ss_op *add(ss_graph *g, const char *name, ss_op_type type, const ss_op_attrs *a,
                        int n, int i0, int i1, int i2)
{
    int ins[3] = {i0, i1, i2};
    ss_diag d;
    ss_diag_init(&d);
    int id = ss_graph_add(g, name, type, a, n, ins, &d);
    if (id < 0)
        fail_msg("add %s: %s", name, d.msg);
    return ss_graph_op(g, id);
}

/* Add an op that must fail with a message containing `sub` and the op name;
 * the graph must be unchanged. */
static void add_fails(ss_graph *g, const char *name, ss_op_type type, const ss_op_attrs *a, int n,
                      int i0, int i1, int i2, const char *sub)
{
    int ins[3] = {i0, i1, i2};
    int nops = ss_graph_n_ops(g), nt = ss_graph_n_tensors(g);
    ss_diag d;
    ss_diag_init(&d);
    int id = ss_graph_add(g, name, type, a, n, ins, &d);
    if (id >= 0)
        fail_msg("add %s succeeded, expected failure with '%s'", name, sub);
    assert_int_equal(d.status, SS_ERR_INVALID);
    if (!strstr(d.msg, sub) || !strstr(d.msg, name))
        fail_msg("message '%s' lacks '%s' or the op name", d.msg, sub);
    assert_int_equal(ss_graph_n_ops(g), nops);
    assert_int_equal(ss_graph_n_tensors(g), nt);
}

static const ss_tensor *T(const ss_graph *g, const char *name)
{
    int id = ss_graph_find_tensor(g, name);
    if (id < 0)
        fail_msg("no tensor %s", name);
    return ss_graph_tensor(g, id);
}

/* Tensor has the given shape and kinds (letters). */
static void check_tensor(const ss_tensor *t, ss_dtype dt, const char *kinds, int ndim, ...)
{
    assert_int_equal(t->ndim, ndim);
    assert_int_equal(t->dtype, dt);
    va_list ap;
    va_start(ap, ndim);
    for (int i = 0; i < ndim; i++) {
        int64_t e = va_arg(ap, int64_t);
        assert_int_equal(t->shape[i], e);
        if (kinds) {
            ss_dim_kind k = kinds[i] == 's' ? SS_DIM_SAMPLE : kinds[i] == 'a' ? SS_DIM_ATTRIBUTE
                                                                               : SS_DIM_PARAMETER;
            if (t->kind[i] != k)
                fail_msg("%s dim %d kind %s, expected %c", t->name, i, ss_dim_kind_name(t->kind[i]),
                         kinds[i]);
        }
    }
    va_end(ap);
}

/* Region of operand equals the given (lo, hi) pairs. */
static void check_region(const ss_graph *g, const ss_op *op, const ss_tile *t, int operand,
                         int ndim, ...)
{
    ss_region r;
    ss_op_input_region(g, op, t, operand, &r);
    assert_int_equal(r.ndim, ndim);
    va_list ap;
    va_start(ap, ndim);
    for (int i = 0; i < ndim; i++) {
        int64_t lo = va_arg(ap, int64_t), hi = va_arg(ap, int64_t);
        if (r.r[i].lo != lo || r.r[i].hi != hi)
            fail_msg("%s operand %d dim %d: [%lld, %lld), expected [%lld, %lld)", op->name, operand,
                     i, (long long)r.r[i].lo, (long long)r.r[i].hi, (long long)lo, (long long)hi);
    }
    va_end(ap);
}

static ss_range R(int64_t lo, int64_t hi) { return (ss_range){lo, hi}; }

static ss_work work_full(const ss_graph *g, const ss_op *op)
{
    ss_tile t;
    ss_work w;
    ss_op_full_tile(g, op, &t);
    ss_op_tile_work(g, op, &t, &w);
    return w;
}

#define A0(a) ss_op_attrs a; memset(&a, 0, sizeof a)

/* ---- per-op tests ------------------------------------------------- */

static void test_input(void **state)
{
    (void)state;
    ss_graph *g = ss_graph_new("t");
    int x = input(g, "x", SS_BF16, "sap", 3, (int64_t)2, (int64_t)5, (int64_t)7);
    check_tensor(ss_graph_tensor(g, x), SS_BF16, "sap", 3, (int64_t)2, (int64_t)5, (int64_t)7);
    const ss_op *op = ss_graph_op(g, 0);
    assert_int_equal(ss_op_split_mask(g, op), 7);
    assert_int_equal(ss_op_contraction(g, op), 0);
    ss_work w = work_full(g, op);
    assert_true(w.fwd_flops == 0 && w.fwd_bytes == 0);
    A0(a);
    a.ndim = 0;
    add_fails(g, "noshape", SS_OP_INPUT, &a, 0, 0, 0, 0, "dims");
    a.ndim = 2;
    a.shape[0] = 4;
    a.shape[1] = 0;
    add_fails(g, "zero", SS_OP_INPUT, &a, 0, 0, 0, 0, "<= 0");
    a.shape[1] = -3;
    add_fails(g, "neg", SS_OP_INPUT, &a, 0, 0, 0, 0, "<= 0");
    a.shape[0] = (int64_t)1 << 30;
    a.shape[1] = (int64_t)1 << 30; /* 2^60 elements */
    add_fails(g, "huge", SS_OP_INPUT, &a, 0, 0, 0, 0, "absurd");
    a.shape[0] = (int64_t)1 << 62;
    a.shape[1] = 16; /* would overflow int64 */
    add_fails(g, "overflow", SS_OP_INPUT, &a, 0, 0, 0, 0, "absurd");
    a.shape[0] = 2;
    a.shape[1] = 2;
    add_fails(g, "withinput", SS_OP_INPUT, &a, 1, x, 0, 0, "expects 0 inputs");
    ss_graph_free(g);
}

static void test_linear(void **state)
{
    (void)state;
    ss_graph *g = ss_graph_new("t");
    int x = input(g, "x", SS_F32, "sp", 2, (int64_t)4, (int64_t)8);
    A0(a);
    a.out_features = 16;
    a.use_bias = 1;
    const ss_op *op = add(g, "fc", SS_OP_LINEAR, &a, 1, x, 0, 0);
    check_tensor(T(g, "fc"), SS_F32, "sp", 2, (int64_t)4, (int64_t)16);
    check_tensor(T(g, "fc.weight"), SS_F32, "pp", 2, (int64_t)8, (int64_t)16);
    check_tensor(T(g, "fc.bias"), SS_F32, "p", 1, (int64_t)16);
    assert_true(T(g, "fc.weight")->is_weight && T(g, "fc.weight")->producer == -1);
    assert_int_equal(T(g, "fc")->producer, op->id);
    assert_int_equal(op->n_w, 2);
    assert_int_equal(ss_op_contraction(g, op), 8);
    assert_int_equal(ss_op_split_mask(g, op), 3);
    ss_work w = work_full(g, op);
    assert_true(w.fwd_flops == 2.0 * 4 * 8 * 16 + 4 * 16); /* 1088 */
    assert_true(w.bwd_flops == 4.0 * 4 * 8 * 16 + 4 * 16); /* 2112 */
    /* read x 128 + W 512 + b 64, write 256 */
    assert_true(w.fwd_bytes == 960);
    assert_true(w.saved_bytes == 128);

    ss_tile t;
    ss_op_full_tile(g, op, &t);
    t.out.r[0] = R(1, 3);
    t.out.r[1] = R(4, 12);
    t.red = R(2, 6);
    check_region(g, op, &t, 0, 2, (int64_t)1, (int64_t)3, (int64_t)2, (int64_t)6);
    check_region(g, op, &t, 1, 2, (int64_t)2, (int64_t)6, (int64_t)4, (int64_t)12);
    check_region(g, op, &t, 2, 1, (int64_t)4, (int64_t)12);
    ss_op_tile_work(g, op, &t, &w);
    assert_true(w.fwd_flops == 2.0 * 2 * 4 * 8); /* no bias: not the first red range */

    /* trans_b: W stored [out, in] */
    a.trans_b = 1;
    a.use_bias = 0;
    const ss_op *tb = add(g, "head", SS_OP_LINEAR, &a, 1, x, 0, 0);
    check_tensor(T(g, "head.weight"), SS_F32, NULL, 2, (int64_t)16, (int64_t)8);
    assert_int_equal(tb->n_w, 1);
    check_region(g, tb, &t, 1, 2, (int64_t)4, (int64_t)12, (int64_t)2, (int64_t)6);

    /* 3-d input keeps its leading kinds */
    int s = input(g, "seq", SS_F16, "sap", 3, (int64_t)2, (int64_t)3, (int64_t)8);
    a.trans_b = 0;
    add(g, "proj", SS_OP_LINEAR, &a, 1, s, 0, 0);
    check_tensor(T(g, "proj"), SS_F16, "sap", 3, (int64_t)2, (int64_t)3, (int64_t)16);
    assert_int_equal(T(g, "proj.weight")->dtype, SS_F16);

    a.out_features = 0;
    add_fails(g, "bad", SS_OP_LINEAR, &a, 1, x, 0, 0, "out_features");
    a.out_features = 3;
    add_fails(g, "two", SS_OP_LINEAR, &a, 2, x, x, 0, "expects 1 input");
    add_fails(g, "dangling", SS_OP_LINEAR, &a, 1, 999, 0, 0, "does not exist");
    ss_graph_free(g);
}

static void test_batch_matmul(void **state)
{
    (void)state;
    ss_graph *g = ss_graph_new("t");
    int A = input(g, "A", SS_F32, "sap", 3, (int64_t)2, (int64_t)3, (int64_t)5);
    int B = input(g, "B", SS_F32, "spa", 3, (int64_t)2, (int64_t)5, (int64_t)4);
    A0(a);
    const ss_op *op = add(g, "mm", SS_OP_BATCH_MATMUL, &a, 2, A, B, 0);
    check_tensor(T(g, "mm"), SS_F32, "saa", 3, (int64_t)2, (int64_t)3, (int64_t)4);
    assert_int_equal(op->n_w, 0);
    assert_int_equal(ss_op_contraction(g, op), 5);
    assert_int_equal(ss_op_split_mask(g, op), 7);
    ss_work w = work_full(g, op);
    assert_true(w.fwd_flops == 2.0 * 2 * 3 * 5 * 4); /* 240 */
    assert_true(w.bwd_flops == 480);

    ss_tile t;
    ss_op_full_tile(g, op, &t);
    t.out.r[0] = R(1, 2);
    t.out.r[1] = R(0, 2);
    t.out.r[2] = R(3, 4);
    t.red = R(1, 4);
    check_region(g, op, &t, 0, 3, (int64_t)1, (int64_t)2, (int64_t)0, (int64_t)2, (int64_t)1, (int64_t)4);
    check_region(g, op, &t, 1, 3, (int64_t)1, (int64_t)2, (int64_t)1, (int64_t)4, (int64_t)3, (int64_t)4);

    /* trans_a, trans_b: A [2, 5, 3], B [2, 4, 5] */
    int At = input(g, "At", SS_F32, "sap", 3, (int64_t)2, (int64_t)5, (int64_t)3);
    int Bt = input(g, "Bt", SS_F32, "sps", 3, (int64_t)2, (int64_t)4, (int64_t)5);
    a.trans_a = a.trans_b = 1;
    const ss_op *tt = add(g, "mmt", SS_OP_BATCH_MATMUL, &a, 2, At, Bt, 0);
    check_tensor(T(g, "mmt"), SS_F32, "spp", 3, (int64_t)2, (int64_t)3, (int64_t)4);
    assert_int_equal(ss_op_contraction(g, tt), 5);
    check_region(g, tt, &t, 0, 3, (int64_t)1, (int64_t)2, (int64_t)1, (int64_t)4, (int64_t)0, (int64_t)2);
    check_region(g, tt, &t, 1, 3, (int64_t)1, (int64_t)2, (int64_t)3, (int64_t)4, (int64_t)1, (int64_t)4);

    a.trans_a = a.trans_b = 0;
    add_fails(g, "mismatch", SS_OP_BATCH_MATMUL, &a, 2, A, A, 0, "contraction dims differ");
    int C = input(g, "C", SS_F32, "sap", 3, (int64_t)3, (int64_t)5, (int64_t)4);
    add_fails(g, "batch", SS_OP_BATCH_MATMUL, &a, 2, A, C, 0, "batch dims differ");
    add_fails(g, "one", SS_OP_BATCH_MATMUL, &a, 1, A, 0, 0, "expects 2 inputs");
    ss_graph_free(g);
}

static void test_conv2d(void **state)
{
    (void)state;
    ss_graph *g = ss_graph_new("t");
    int x = input(g, "x", SS_F32, "spaa", 4, (int64_t)2, (int64_t)3, (int64_t)8, (int64_t)8);
    A0(a);
    a.out_channels = 4;
    a.kernel[0] = a.kernel[1] = 3;
    a.pad[0] = a.pad[1] = 1;
    a.use_bias = 1;
    const ss_op *op = add(g, "conv", SS_OP_CONV2D, &a, 1, x, 0, 0);
    check_tensor(T(g, "conv"), SS_F32, "spaa", 4, (int64_t)2, (int64_t)4, (int64_t)8, (int64_t)8);
    check_tensor(T(g, "conv.weight"), SS_F32, NULL, 4, (int64_t)4, (int64_t)3, (int64_t)3, (int64_t)3);
    check_tensor(T(g, "conv.bias"), SS_F32, NULL, 1, (int64_t)4);
    assert_int_equal(ss_op_contraction(g, op), 3);
    assert_int_equal(ss_op_split_mask(g, op), 15);
    ss_work w = work_full(g, op);
    /* 2 * (2*4*8*8) * 3 * 9 + bias 512 */
    assert_true(w.fwd_flops == 27648 + 512);
    assert_true(w.bwd_flops == 2 * 27648 + 512);
    assert_true(w.saved_bytes == 2 * 3 * 64 * 4);

    /* spatial split: halo rows, clamped to the input */
    ss_tile t;
    ss_op_full_tile(g, op, &t);
    t.out.r[2] = R(0, 4);
    check_region(g, op, &t, 0, 4, (int64_t)0, (int64_t)2, (int64_t)0, (int64_t)3, (int64_t)0, (int64_t)5,
                 (int64_t)0, (int64_t)8);
    t.out.r[2] = R(4, 8);
    t.out.r[1] = R(2, 4);
    t.red = R(1, 2);
    check_region(g, op, &t, 0, 4, (int64_t)0, (int64_t)2, (int64_t)1, (int64_t)2, (int64_t)3, (int64_t)8,
                 (int64_t)0, (int64_t)8);
    check_region(g, op, &t, 1, 4, (int64_t)2, (int64_t)4, (int64_t)1, (int64_t)2, (int64_t)0, (int64_t)3,
                 (int64_t)0, (int64_t)3);
    check_region(g, op, &t, 2, 1, (int64_t)2, (int64_t)4);

    /* stride 2: H' = (8 + 2 - 3) / 2 + 1 = 4; out rows [2, 4) need [3, 8) */
    a.stride[0] = a.stride[1] = 2;
    a.use_bias = 0;
    const ss_op *s2 = add(g, "conv2", SS_OP_CONV2D, &a, 1, x, 0, 0);
    check_tensor(T(g, "conv2"), SS_F32, NULL, 4, (int64_t)2, (int64_t)4, (int64_t)4, (int64_t)4);
    ss_op_full_tile(g, s2, &t);
    t.out.r[2] = R(2, 4);
    t.out.r[3] = R(0, 1);
    check_region(g, s2, &t, 0, 4, (int64_t)0, (int64_t)2, (int64_t)0, (int64_t)3, (int64_t)3, (int64_t)8,
                 (int64_t)0, (int64_t)2);

    /* groups: no contraction; out channels [4, 8) need input group 1 */
    int y = input(g, "y", SS_F32, "spaa", 4, (int64_t)1, (int64_t)4, (int64_t)5, (int64_t)5);
    memset(&a, 0, sizeof a);
    a.out_channels = 8;
    a.groups = 2;
    a.kernel[0] = a.kernel[1] = 1;
    const ss_op *gc = add(g, "gconv", SS_OP_CONV2D, &a, 1, y, 0, 0);
    check_tensor(T(g, "gconv.weight"), SS_F32, NULL, 4, (int64_t)8, (int64_t)2, (int64_t)1, (int64_t)1);
    assert_int_equal(ss_op_contraction(g, gc), 0);
    ss_op_full_tile(g, gc, &t);
    t.out.r[1] = R(4, 8);
    check_region(g, gc, &t, 0, 4, (int64_t)0, (int64_t)1, (int64_t)2, (int64_t)4, (int64_t)0, (int64_t)5,
                 (int64_t)0, (int64_t)5);
    w = work_full(g, gc);
    assert_true(w.fwd_flops == 2.0 * 8 * 25 * 2);

    /* errors */
    int small = input(g, "small", SS_F32, "spaa", 4, (int64_t)1, (int64_t)1, (int64_t)2, (int64_t)2);
    memset(&a, 0, sizeof a);
    a.out_channels = 2;
    a.kernel[0] = a.kernel[1] = 5;
    add_fails(g, "big", SS_OP_CONV2D, &a, 1, small, 0, 0, "larger than");
    a.kernel[0] = 0;
    add_fails(g, "k0", SS_OP_CONV2D, &a, 1, small, 0, 0, "kernel");
    a.kernel[0] = a.kernel[1] = 1;
    a.groups = 3;
    add_fails(g, "grp", SS_OP_CONV2D, &a, 1, y, 0, 0, "groups");
    int flat = input(g, "flat", SS_F32, "sp", 2, (int64_t)1, (int64_t)4);
    a.groups = 0;
    add_fails(g, "nchw", SS_OP_CONV2D, &a, 1, flat, 0, 0, "NCHW");
    ss_graph_free(g);
}

static void test_pool_batchnorm(void **state)
{
    (void)state;
    ss_graph *g = ss_graph_new("t");
    int x = input(g, "x", SS_F32, "spaa", 4, (int64_t)1, (int64_t)2, (int64_t)6, (int64_t)6);
    A0(a);
    a.kernel[0] = a.kernel[1] = 2;
    a.stride[0] = a.stride[1] = 2;
    const ss_op *p = add(g, "pool", SS_OP_POOL2D, &a, 1, x, 0, 0);
    check_tensor(T(g, "pool"), SS_F32, "spaa", 4, (int64_t)1, (int64_t)2, (int64_t)3, (int64_t)3);
    assert_int_equal(ss_op_split_mask(g, p), 15);
    assert_int_equal(ss_op_contraction(g, p), 0);
    ss_work w = work_full(g, p);
    assert_true(w.fwd_flops == 18 * 4);
    ss_tile t;
    ss_op_full_tile(g, p, &t);
    t.out.r[1] = R(1, 2);
    t.out.r[2] = R(1, 2);
    check_region(g, p, &t, 0, 4, (int64_t)0, (int64_t)1, (int64_t)1, (int64_t)2, (int64_t)2, (int64_t)4,
                 (int64_t)0, (int64_t)6);
    /* 3x3 stride 1 pad 1: rows [0, 3) need [0, 4) (halo below, clamped above) */
    a.kernel[0] = a.kernel[1] = 3;
    a.stride[0] = a.stride[1] = 1;
    a.pad[0] = a.pad[1] = 1;
    a.pool = SS_POOL_AVG;
    const ss_op *p3 = add(g, "pool3", SS_OP_POOL2D, &a, 1, x, 0, 0);
    check_tensor(T(g, "pool3"), SS_F32, NULL, 4, (int64_t)1, (int64_t)2, (int64_t)6, (int64_t)6);
    ss_op_full_tile(g, p3, &t);
    t.out.r[2] = R(0, 3);
    check_region(g, p3, &t, 0, 4, (int64_t)0, (int64_t)1, (int64_t)0, (int64_t)2, (int64_t)0, (int64_t)4,
                 (int64_t)0, (int64_t)6);
    assert_true(work_full(g, p3).saved_bytes == 0); /* avg pool keeps nothing */
    a.kernel[0] = a.kernel[1] = 9;
    a.pad[0] = a.pad[1] = 0;
    add_fails(g, "bigpool", SS_OP_POOL2D, &a, 1, x, 0, 0, "larger than");

    memset(&a, 0, sizeof a);
    const ss_op *bn = add(g, "bn", SS_OP_BATCHNORM, &a, 1, x, 0, 0);
    check_tensor(T(g, "bn"), SS_F32, "spaa", 4, (int64_t)1, (int64_t)2, (int64_t)6, (int64_t)6);
    check_tensor(T(g, "bn.gamma"), SS_F32, NULL, 1, (int64_t)2);
    check_tensor(T(g, "bn.beta"), SS_F32, NULL, 1, (int64_t)2);
    assert_int_equal(ss_op_split_mask(g, bn), 15);
    w = work_full(g, bn);
    assert_true(w.fwd_flops == 8 * 72 && w.bwd_flops == 16 * 72);
    ss_op_full_tile(g, bn, &t);
    t.out.r[1] = R(1, 2);
    check_region(g, bn, &t, 1, 1, (int64_t)1, (int64_t)2);
    check_region(g, bn, &t, 0, 4, (int64_t)0, (int64_t)1, (int64_t)1, (int64_t)2, (int64_t)0, (int64_t)6,
                 (int64_t)0, (int64_t)6);
    int v = input(g, "v", SS_F32, "sp", 2, (int64_t)1, (int64_t)2);
    add_fails(g, "bn2", SS_OP_BATCHNORM, &a, 1, v, 0, 0, "NCHW");
    ss_graph_free(g);
}

static void test_elementwise(void **state)
{
    (void)state;
    ss_graph *g = ss_graph_new("t");
    int x = input(g, "x", SS_F32, "sap", 3, (int64_t)2, (int64_t)5, (int64_t)8);
    int y = input(g, "y", SS_F32, "sap", 3, (int64_t)2, (int64_t)5, (int64_t)8);
    int z = input(g, "z", SS_F32, "sap", 3, (int64_t)2, (int64_t)5, (int64_t)4);
    A0(a);
    const ss_op *ln = add(g, "ln", SS_OP_LAYERNORM, &a, 1, x, 0, 0);
    check_tensor(T(g, "ln"), SS_F32, "sap", 3, (int64_t)2, (int64_t)5, (int64_t)8);
    check_tensor(T(g, "ln.gamma"), SS_F32, NULL, 1, (int64_t)8);
    assert_int_equal(ss_op_split_mask(g, ln), 3);
    assert_true(work_full(g, ln).fwd_flops == 8 * 80);

    a.unary = SS_UNARY_GELU;
    const ss_op *ge = add(g, "gelu", SS_OP_UNARY, &a, 1, x, 0, 0);
    assert_true(work_full(g, ge).fwd_flops == 8 * 80);
    assert_true(work_full(g, ge).bwd_flops == 16 * 80);
    assert_int_equal(ss_op_split_mask(g, ge), 7);
    a.unary = SS_UNARY_RELU;
    const ss_op *re = add(g, "relu", SS_OP_UNARY, &a, 1, x, 0, 0);
    ss_work w = work_full(g, re);
    assert_true(w.fwd_flops == 80 && w.saved_bytes == 320 && w.fwd_bytes == 640);
    ss_tile t;
    ss_op_full_tile(g, re, &t);
    t.out.r[1] = R(2, 4);
    check_region(g, re, &t, 0, 3, (int64_t)0, (int64_t)2, (int64_t)2, (int64_t)4, (int64_t)0, (int64_t)8);
    a.unary = (ss_unary_kind)9;
    add_fails(g, "badu", SS_OP_UNARY, &a, 1, x, 0, 0, "unary kind");

    memset(&a, 0, sizeof a);
    a.binary = SS_BINARY_MUL;
    const ss_op *mul = add(g, "mul", SS_OP_BINARY, &a, 2, x, y, 0);
    w = work_full(g, mul);
    assert_true(w.fwd_flops == 80 && w.saved_bytes == 640);
    check_region(g, mul, &t, 1, 3, (int64_t)0, (int64_t)2, (int64_t)2, (int64_t)4, (int64_t)0, (int64_t)8);
    add_fails(g, "addbad", SS_OP_BINARY, &a, 2, x, z, 0, "shapes differ");

    memset(&a, 0, sizeof a);
    a.axis = -1;
    const ss_op *sm = add(g, "sm", SS_OP_SOFTMAX, &a, 1, x, 0, 0);
    assert_int_equal(ss_op_split_mask(g, sm), 3);
    assert_true(work_full(g, sm).fwd_flops == 5 * 80);
    t.out.r[2] = R(0, 4); /* even a tile cut along the axis needs the whole row */
    check_region(g, sm, &t, 0, 3, (int64_t)0, (int64_t)2, (int64_t)2, (int64_t)4, (int64_t)0, (int64_t)8);
    a.axis = 1;
    assert_int_equal(ss_op_split_mask(g, add(g, "sm1", SS_OP_SOFTMAX, &a, 1, x, 0, 0)), 5);
    a.axis = 3;
    add_fails(g, "smbad", SS_OP_SOFTMAX, &a, 1, x, 0, 0, "axis");
    a.axis = -4;
    add_fails(g, "smbad2", SS_OP_SOFTMAX, &a, 1, x, 0, 0, "axis");

    memset(&a, 0, sizeof a);
    a.rate = 0.1;
    const ss_op *dr = add(g, "drop", SS_OP_DROPOUT, &a, 1, x, 0, 0);
    w = work_full(g, dr);
    assert_true(w.fwd_flops == 160 && w.saved_bytes == 80);
    a.rate = 1.0;
    add_fails(g, "drop1", SS_OP_DROPOUT, &a, 1, x, 0, 0, "rate");
    ss_graph_free(g);
}

static void test_embedding_softmax_ce(void **state)
{
    (void)state;
    ss_graph *g = ss_graph_new("t");
    int ids = input(g, "ids", SS_I32, "sa", 2, (int64_t)2, (int64_t)3);
    A0(a);
    a.vocab = 10;
    a.dim = 4;
    const ss_op *e = add(g, "emb", SS_OP_EMBEDDING, &a, 1, ids, 0, 0);
    check_tensor(T(g, "emb"), SS_F32, "sap", 3, (int64_t)2, (int64_t)3, (int64_t)4);
    check_tensor(T(g, "emb.weight"), SS_F32, "pp", 2, (int64_t)10, (int64_t)4);
    assert_int_equal(ss_op_contraction(g, e), 10);
    assert_int_equal(ss_op_split_mask(g, e), 7);
    ss_work w = work_full(g, e);
    assert_true(w.fwd_flops == 0 && w.bwd_flops == 24);
    /* ids 24 B + gathered rows 96 B + written 96 B */
    assert_true(w.fwd_bytes == 24 + 96 + 96);
    ss_tile t;
    ss_op_full_tile(g, e, &t);
    t.out.r[0] = R(1, 2);
    t.out.r[2] = R(1, 3);
    t.red = R(5, 10);
    check_region(g, e, &t, 0, 2, (int64_t)1, (int64_t)2, (int64_t)0, (int64_t)3);
    check_region(g, e, &t, 1, 2, (int64_t)5, (int64_t)10, (int64_t)1, (int64_t)3);
    a.dtype = SS_BF16;
    add(g, "emb16", SS_OP_EMBEDDING, &a, 1, ids, 0, 0);
    assert_int_equal(T(g, "emb16")->dtype, SS_BF16);
    assert_int_equal(T(g, "emb16.weight")->dtype, SS_BF16);
    int fl = input(g, "fl", SS_F32, "sa", 2, (int64_t)2, (int64_t)3);
    add_fails(g, "embf", SS_OP_EMBEDDING, &a, 1, fl, 0, 0, "i32 or i64");
    a.vocab = 0;
    add_fails(g, "emb0", SS_OP_EMBEDDING, &a, 1, ids, 0, 0, "vocab");

    int logits = input(g, "logits", SS_F16, "sp", 2, (int64_t)4, (int64_t)10);
    int labels = input(g, "labels", SS_I64, "s", 1, (int64_t)4);
    memset(&a, 0, sizeof a);
    const ss_op *ce = add(g, "loss", SS_OP_SOFTMAX_CE, &a, 2, logits, labels, 0);
    check_tensor(T(g, "loss"), SS_F32, "s", 1, (int64_t)4);
    assert_int_equal(ss_op_contraction(g, ce), 10);
    assert_int_equal(ss_op_split_mask(g, ce), 1);
    assert_true(work_full(g, ce).fwd_flops == 5 * 4 * 10);
    ss_op_full_tile(g, ce, &t);
    t.out.r[0] = R(1, 3);
    t.red = R(0, 5);
    check_region(g, ce, &t, 0, 2, (int64_t)1, (int64_t)3, (int64_t)0, (int64_t)5);
    check_region(g, ce, &t, 1, 1, (int64_t)1, (int64_t)3);
    int bad = input(g, "badlab", SS_I64, "s", 1, (int64_t)3);
    add_fails(g, "ce2", SS_OP_SOFTMAX_CE, &a, 2, logits, bad, 0, "labels");
    add_fails(g, "ce3", SS_OP_SOFTMAX_CE, &a, 2, logits, logits, 0, "labels");
    ss_graph_free(g);
}

static void test_concat_split(void **state)
{
    (void)state;
    ss_graph *g = ss_graph_new("t");
    int x = input(g, "x", SS_F32, "sp", 2, (int64_t)2, (int64_t)3);
    int y = input(g, "y", SS_F32, "sp", 2, (int64_t)2, (int64_t)5);
    A0(a);
    a.axis = 1;
    const ss_op *c = add(g, "cat", SS_OP_CONCAT, &a, 2, x, y, 0);
    check_tensor(T(g, "cat"), SS_F32, "sp", 2, (int64_t)2, (int64_t)8);
    assert_int_equal(ss_op_split_mask(g, c), 1);
    ss_work w = work_full(g, c);
    assert_true(w.fwd_flops == 0 && w.fwd_bytes == 2 * 64 && w.saved_bytes == 0);
    ss_tile t;
    ss_op_full_tile(g, c, &t);
    t.out.r[1] = R(2, 6);
    check_region(g, c, &t, 0, 2, (int64_t)0, (int64_t)2, (int64_t)2, (int64_t)3);
    check_region(g, c, &t, 1, 2, (int64_t)0, (int64_t)2, (int64_t)0, (int64_t)3);
    t.out.r[1] = R(3, 8);
    ss_region r;
    ss_op_input_region(g, c, &t, 0, &r);
    assert_int_equal(ss_region_volume(&r), 0);
    a.axis = 0;
    add_fails(g, "cat0", SS_OP_CONCAT, &a, 2, x, y, 0, "does not match");
    a.axis = 2;
    add_fails(g, "cat2", SS_OP_CONCAT, &a, 2, x, y, 0, "axis");

    memset(&a, 0, sizeof a);
    a.axis = -1;
    a.n_split = 2;
    a.split_sizes[0] = 3;
    a.split_sizes[1] = 5;
    int cat = ss_graph_find_tensor(g, "cat");
    const ss_op *s = add(g, "sp", SS_OP_SPLIT, &a, 1, cat, 0, 0);
    assert_int_equal(s->n_out, 2);
    check_tensor(T(g, "sp:0"), SS_F32, "sp", 2, (int64_t)2, (int64_t)3);
    check_tensor(T(g, "sp:1"), SS_F32, "sp", 2, (int64_t)2, (int64_t)5);
    assert_int_equal(ss_graph_find_tensor(g, "sp"), -1);
    assert_int_equal(ss_op_split_mask(g, s), 1);
    ss_op_full_tile(g, s, &t);
    t.out.r[0] = R(0, 1);
    ss_op_output_region(g, s, &t, 1, &r);
    assert_true(r.ndim == 2 && r.r[0].lo == 0 && r.r[0].hi == 1 && r.r[1].lo == 0 && r.r[1].hi == 5);
    check_region(g, s, &t, 0, 2, (int64_t)0, (int64_t)1, (int64_t)0, (int64_t)8);
    a.split_sizes[1] = 4;
    add_fails(g, "spbad", SS_OP_SPLIT, &a, 1, cat, 0, 0, "sum to 7");
    a.n_split = 0;
    add_fails(g, "spn", SS_OP_SPLIT, &a, 1, cat, 0, 0, "n_split");
    ss_graph_free(g);
}

static void test_reshape_transpose(void **state)
{
    (void)state;
    ss_graph *g = ss_graph_new("t");
    /* [N, S, 3E] -> [N, S, heads, 3dh] */
    int x = input(g, "x", SS_F32, "sap", 3, (int64_t)2, (int64_t)4, (int64_t)12);
    A0(a);
    a.ndim = 4;
    a.shape[0] = 2;
    a.shape[1] = 4;
    a.shape[2] = 3;
    a.shape[3] = 4;
    const ss_op *r = add(g, "rs", SS_OP_RESHAPE, &a, 1, x, 0, 0);
    check_tensor(T(g, "rs"), SS_F32, "sapp", 4, (int64_t)2, (int64_t)4, (int64_t)3, (int64_t)4);
    assert_int_equal(ss_op_split_mask(g, r), 7);
    ss_work w = work_full(g, r);
    assert_true(w.fwd_flops == 0 && w.fwd_bytes == 0 && w.bwd_bytes == 0 && w.saved_bytes == 0);
    ss_tile t;
    ss_op_full_tile(g, r, &t);
    t.out.r[0] = R(1, 2);
    t.out.r[2] = R(1, 2);
    check_region(g, r, &t, 0, 3, (int64_t)1, (int64_t)2, (int64_t)0, (int64_t)4, (int64_t)4, (int64_t)8);

    /* flatten [N, C, H, W] -> [N, C*H*W]: kind of C */
    int y = input(g, "y", SS_F32, "spaa", 4, (int64_t)2, (int64_t)3, (int64_t)4, (int64_t)4);
    memset(&a, 0, sizeof a);
    a.ndim = 2;
    a.shape[0] = 2;
    a.shape[1] = 48;
    const ss_op *fl = add(g, "flat", SS_OP_RESHAPE, &a, 1, y, 0, 0);
    check_tensor(T(g, "flat"), SS_F32, "sp", 2, (int64_t)2, (int64_t)48);
    assert_int_equal(ss_op_split_mask(g, fl), 3);
    ss_op_full_tile(g, fl, &t);
    t.out.r[1] = R(16, 32); /* aligned: channel 1 exactly */
    check_region(g, fl, &t, 0, 4, (int64_t)0, (int64_t)2, (int64_t)1, (int64_t)2, (int64_t)0, (int64_t)4,
                 (int64_t)0, (int64_t)4);
    t.out.r[1] = R(20, 24); /* inside channel 1, row 1 */
    check_region(g, fl, &t, 0, 4, (int64_t)0, (int64_t)2, (int64_t)1, (int64_t)2, (int64_t)1, (int64_t)2,
                 (int64_t)0, (int64_t)4);
    t.out.r[1] = R(8, 24); /* unaligned: conservative superset, channels 0..1 */
    check_region(g, fl, &t, 0, 4, (int64_t)0, (int64_t)2, (int64_t)0, (int64_t)2, (int64_t)0, (int64_t)4,
                 (int64_t)0, (int64_t)4);

    /* merge back [N, S, heads, dh] -> [N, S, E]: kind of the outer input dim */
    int h = ss_graph_find_tensor(g, "rs");
    memset(&a, 0, sizeof a);
    a.ndim = 3;
    a.shape[0] = 2;
    a.shape[1] = 4;
    a.shape[2] = 12;
    const ss_op *mg = add(g, "merge", SS_OP_RESHAPE, &a, 1, h, 0, 0);
    check_tensor(T(g, "merge"), SS_F32, "sap", 3, (int64_t)2, (int64_t)4, (int64_t)12);
    ss_op_full_tile(g, mg, &t);
    t.out.r[2] = R(4, 8);
    check_region(g, mg, &t, 0, 4, (int64_t)0, (int64_t)2, (int64_t)0, (int64_t)4, (int64_t)1, (int64_t)2,
                 (int64_t)0, (int64_t)4);
    a.shape[2] = 13;
    add_fails(g, "rsbad", SS_OP_RESHAPE, &a, 1, h, 0, 0, "element counts differ");
    a.shape[2] = 0;
    add_fails(g, "rs0", SS_OP_RESHAPE, &a, 1, h, 0, 0, "<= 0");

    memset(&a, 0, sizeof a);
    a.perm[0] = 2;
    a.perm[1] = 0;
    a.perm[2] = 1;
    const ss_op *tr = add(g, "tr", SS_OP_TRANSPOSE, &a, 1, x, 0, 0);
    check_tensor(T(g, "tr"), SS_F32, "psa", 3, (int64_t)12, (int64_t)2, (int64_t)4);
    assert_int_equal(ss_op_split_mask(g, tr), 7);
    ss_op_full_tile(g, tr, &t);
    t.out.r[0] = R(1, 2);
    t.out.r[2] = R(0, 1);
    check_region(g, tr, &t, 0, 3, (int64_t)0, (int64_t)2, (int64_t)0, (int64_t)1, (int64_t)1, (int64_t)2);
    assert_true(work_full(g, tr).fwd_bytes == 2 * 96 * 4);
    a.perm[1] = 2;
    add_fails(g, "trbad", SS_OP_TRANSPOSE, &a, 1, x, 0, 0, "permutation");
    a.perm[1] = 3;
    add_fails(g, "trbad2", SS_OP_TRANSPOSE, &a, 1, x, 0, 0, "permutation");
    ss_graph_free(g);
}

static void test_lstm(void **state)
{
    (void)state;
    ss_graph *g = ss_graph_new("t");
    int x = input(g, "x", SS_F32, "sap", 3, (int64_t)2, (int64_t)5, (int64_t)3);
    A0(a);
    a.lstm_mode = SS_LSTM_SEQUENCE;
    a.hidden = 4;
    a.return_sequences = 1;
    const ss_op *l = add(g, "lstm", SS_OP_LSTM, &a, 1, x, 0, 0);
    check_tensor(T(g, "lstm"), SS_F32, "sap", 3, (int64_t)2, (int64_t)5, (int64_t)4);
    check_tensor(T(g, "lstm.weight"), SS_F32, NULL, 2, (int64_t)7, (int64_t)16);
    check_tensor(T(g, "lstm.bias"), SS_F32, NULL, 1, (int64_t)16);
    assert_int_equal(ss_op_split_mask(g, l), 5);
    assert_int_equal(ss_op_contraction(g, l), 0);
    /* 5 steps * (2*2*7*16 + 10*2*4) */
    assert_true(work_full(g, l).fwd_flops == 5 * (448 + 80));
    assert_true(work_full(g, l).bwd_flops == 5 * (896 + 160));
    ss_tile t;
    ss_op_full_tile(g, l, &t);
    t.out.r[2] = R(1, 2);
    t.out.r[0] = R(0, 1);
    check_region(g, l, &t, 0, 3, (int64_t)0, (int64_t)1, (int64_t)0, (int64_t)5, (int64_t)0, (int64_t)3);
    /* gate blocks [1,2), [5,6), [9,10), [13,14): covering range [1, 14) */
    check_region(g, l, &t, 1, 2, (int64_t)0, (int64_t)7, (int64_t)1, (int64_t)14);
    check_region(g, l, &t, 2, 1, (int64_t)1, (int64_t)14);
    a.return_sequences = 0;
    const ss_op *l2 = add(g, "last", SS_OP_LSTM, &a, 1, x, 0, 0);
    check_tensor(T(g, "last"), SS_F32, "sp", 2, (int64_t)2, (int64_t)4);
    assert_int_equal(ss_op_split_mask(g, l2), 3);

    int xc = input(g, "xc", SS_F32, "sp", 2, (int64_t)2, (int64_t)3);
    int h = input(g, "h", SS_F32, "sp", 2, (int64_t)2, (int64_t)4);
    int c = input(g, "c", SS_F32, "sp", 2, (int64_t)2, (int64_t)4);
    a.lstm_mode = SS_LSTM_CELL;
    const ss_op *cell = add(g, "cell", SS_OP_LSTM, &a, 3, xc, h, c);
    assert_int_equal(cell->n_out, 2);
    check_tensor(T(g, "cell:0"), SS_F32, "sp", 2, (int64_t)2, (int64_t)4);
    check_tensor(T(g, "cell:1"), SS_F32, "sp", 2, (int64_t)2, (int64_t)4);
    assert_true(work_full(g, cell).fwd_flops == 448 + 80);
    ss_op_full_tile(g, cell, &t);
    t.out.r[1] = R(2, 4);
    check_region(g, cell, &t, 0, 2, (int64_t)0, (int64_t)2, (int64_t)0, (int64_t)3);
    check_region(g, cell, &t, 1, 2, (int64_t)0, (int64_t)2, (int64_t)0, (int64_t)4);
    check_region(g, cell, &t, 2, 2, (int64_t)0, (int64_t)2, (int64_t)2, (int64_t)4);
    check_region(g, cell, &t, 3, 2, (int64_t)0, (int64_t)7, (int64_t)2, (int64_t)16);
    ss_region r;
    ss_op_output_region(g, cell, &t, 1, &r);
    assert_true(r.r[1].lo == 2 && r.r[1].hi == 4);
    add_fails(g, "cellbad", SS_OP_LSTM, &a, 3, xc, xc, c, "state");
    add_fails(g, "cellone", SS_OP_LSTM, &a, 1, xc, 0, 0, "expects 3 inputs");
    a.hidden = 0;
    add_fails(g, "h0", SS_OP_LSTM, &a, 3, xc, h, c, "hidden");
    ss_graph_free(g);
}

static void test_attention(void **state)
{
    (void)state;
    ss_graph *g = ss_graph_new("t");
    int q = input(g, "q", SS_F32, "sap", 3, (int64_t)2, (int64_t)6, (int64_t)8);
    A0(a);
    a.heads = 2;
    const ss_op *at = add(g, "attn", SS_OP_ATTENTION, &a, 3, q, q, q);
    check_tensor(T(g, "attn"), SS_F32, "sap", 3, (int64_t)2, (int64_t)6, (int64_t)8);
    assert_int_equal(at->n_w, 4);
    check_tensor(T(g, "attn.wq"), SS_F32, NULL, 2, (int64_t)8, (int64_t)8);
    check_tensor(T(g, "attn.wo"), SS_F32, NULL, 2, (int64_t)8, (int64_t)8);
    assert_int_equal(ss_op_contraction(g, at), 2);
    assert_int_equal(ss_op_split_mask(g, at), 7);
    /* 8*N*S*E^2 = 6144, 4*N*S^2*E = 2304, softmax 5*N*h*S^2 = 720 */
    ss_work w = work_full(g, at);
    assert_true(w.fwd_flops == 6144 + 2304 + 720);
    assert_true(w.bwd_flops == 2 * w.fwd_flops);

    ss_tile t;
    ss_op_full_tile(g, at, &t);
    t.out.r[1] = R(2, 4);
    t.out.r[2] = R(0, 4);
    t.red = R(1, 2);
    check_region(g, at, &t, 0, 3, (int64_t)0, (int64_t)2, (int64_t)2, (int64_t)4, (int64_t)0, (int64_t)8);
    check_region(g, at, &t, 1, 3, (int64_t)0, (int64_t)2, (int64_t)0, (int64_t)6, (int64_t)0, (int64_t)8);
    check_region(g, at, &t, 3, 2, (int64_t)0, (int64_t)8, (int64_t)4, (int64_t)8); /* wq */
    check_region(g, at, &t, 6, 2, (int64_t)4, (int64_t)8, (int64_t)0, (int64_t)4); /* wo */

    a.causal = 1;
    a.use_bias = 1;
    const ss_op *ca = add(g, "causal", SS_OP_ATTENTION, &a, 3, q, q, q);
    assert_int_equal(ca->n_w, 8);
    check_tensor(T(g, "causal.bo"), SS_F32, NULL, 1, (int64_t)8);
    check_region(g, ca, &t, 2, 3, (int64_t)0, (int64_t)2, (int64_t)0, (int64_t)4, (int64_t)0, (int64_t)8);
    check_region(g, ca, &t, 1 + 3 + 4 + 1, 1, (int64_t)4, (int64_t)8); /* bv */
    check_region(g, ca, &t, 3 + 7, 1, (int64_t)0, (int64_t)4);          /* bo */

    a.causal = 0;
    a.heads = 3;
    add_fails(g, "h3", SS_OP_ATTENTION, &a, 3, q, q, q, "heads");
    a.heads = 2;
    int k = input(g, "k", SS_F32, "sap", 3, (int64_t)2, (int64_t)6, (int64_t)4);
    add_fails(g, "kbad", SS_OP_ATTENTION, &a, 3, q, k, k, "must be [N, Sk, E]");
    add_fails(g, "two", SS_OP_ATTENTION, &a, 2, q, q, 0, "expects 3 inputs");
    ss_graph_free(g);
}

/* rmsnorm, rotary and the mixture-of-experts types (core/ops_llm.c): shapes,
 * weights, masks, FLOPs, and the regions of the balanced routing — a split of
 * the slots that divides the groups reads only its own samples' tokens. */
static void test_llm_types(void **state)
{
    (void)state;
#define I(v) ((int64_t)(v))
    ss_graph *g = ss_graph_new("t");
    int x = input(g, "x", SS_F32, "sap", 3, I(4), I(4), I(8));
    A0(a);
    const ss_op *rms = add(g, "rms", SS_OP_RMSNORM, &a, 1, x, 0, 0);
    assert_int_equal(rms->n_w, 1);
    check_tensor(T(g, "rms.gamma"), SS_F32, NULL, 1, I(8));
    assert_int_equal(ss_op_split_mask(g, rms), 3);
    assert_true(work_full(g, rms).fwd_flops == 4 * 128);

    int h = input(g, "h", SS_F32, "sapp", 4, I(2), I(6), I(4), I(8));
    a.dim = 4;
    const ss_op *rope = add(g, "rope", SS_OP_ROTARY, &a, 1, h, 0, 0);
    assert_int_equal(ss_op_split_mask(g, rope), 7);
    assert_true(work_full(g, rope).fwd_flops == 3 * 384);
    a.dim = 3;
    add_fails(g, "rope3", SS_OP_ROTARY, &a, 1, h, 0, 0, "must be even");
    a.dim = 16;
    add_fails(g, "rope16", SS_OP_ROTARY, &a, 1, h, 0, 0, "divide the last dim 8");

    /* expand [2, 6, 1, 8] -> [2, 6, 5, 8] (MLA's shared rotary key): every dim
     * splits; a tile of copies reads the one element; materialised it moves
     * x in and the copies out, its backward adds the copies; as a view no
     * kernel */
    int kp = input(g, "kp", SS_BF16, "sapp", 4, I(2), I(6), I(1), I(8));
    A0(ea);
    ea.axis = 2;
    ea.dim = 5;
    const ss_op *ex5 = add(g, "ex5", SS_OP_EXPAND, &ea, 1, kp, 0, 0);
    check_tensor(T(g, "ex5"), SS_BF16, "sapp", 4, I(2), I(6), I(5), I(8));
    assert_int_equal(ss_op_split_mask(g, ex5), 15);
    assert_true(ss_op_has_kernel(ex5));
    ss_work ew = work_full(g, ex5);
    assert_true(ew.fwd_flops == 0 && ew.bwd_flops == 480 && ew.saved_bytes == 0);
    assert_true(ew.fwd_bytes == (96 + 480) * 2.0 && ew.bwd_bytes == ew.fwd_bytes);
    ss_tile et;
    ss_op_full_tile(g, ex5, &et);
    et.out.r[2] = R(2, 4);
    check_region(g, ex5, &et, 0, 4, I(0), I(2), I(0), I(6), I(0), I(1), I(0), I(8));
    ea.view = 1;
    assert_false(ss_op_has_kernel(add(g, "exv", SS_OP_EXPAND, &ea, 1, kp, 0, 0)));
    add_fails(g, "ex_wide", SS_OP_EXPAND, &ea, 1, h, 0, 0, "only an extent of 1 broadcasts");
    ea.dim = 0;
    add_fails(g, "ex0", SS_OP_EXPAND, &ea, 1, kp, 0, 0, "size = 0");

    /* 16 tokens over 4 experts, top-2: g = 2, Cr = 8 groups, C = 8 slots */
    int p = input(g, "p", SS_F32, "sap", 3, I(4), I(4), I(4));
    A0(m);
    m.topk = 2;
    const ss_op *dsp = add(g, "dsp", SS_OP_MOE_DISPATCH, &m, 2, x, p, 0);
    check_tensor(T(g, "dsp"), SS_F32, "psp", 3, I(4), I(8), I(8));
    ss_tile t;
    ss_op_full_tile(g, dsp, &t);
    t.out.r[1] = R(4, 8);
    t.out.r[0] = R(1, 2);
    check_region(g, dsp, &t, 0, 3, I(2), I(4), I(0), I(4), I(0), I(8));
    check_region(g, dsp, &t, 1, 3, I(2), I(4), I(0), I(4), I(0), I(4));
    /* capacity 1.5: 12 slots, group j in slot ceil(1.5 j); halves stay local */
    m.capacity = 1.5;
    const ss_op *dc = add(g, "dc", SS_OP_MOE_DISPATCH, &m, 2, x, p, 0);
    check_tensor(T(g, "dc"), SS_F32, "psp", 3, I(4), I(12), I(8));
    ss_op_full_tile(g, dc, &t);
    t.out.r[1] = R(6, 12);
    check_region(g, dc, &t, 0, 3, I(2), I(4), I(0), I(4), I(0), I(8));
    t.out.r[1] = R(0, 6);
    check_region(g, dc, &t, 0, 3, I(0), I(2), I(0), I(4), I(0), I(8));
    m.capacity = 0;
    m.topk = 3;
    add_fails(g, "k3", SS_OP_MOE_DISPATCH, &m, 2, x, p, 0, "topk = 3");
    m.topk = 2;
    int x3 = input(g, "x3", SS_F32, "sap", 3, I(1), I(3), I(8));
    int p3 = input(g, "p3", SS_F32, "sap", 3, I(1), I(3), I(4));
    add_fails(g, "odd", SS_OP_MOE_DISPATCH, &m, 2, x3, p3, 0, "not a multiple");

    A0(e);
    e.out_features = 16;
    e.topk = 2;
    int sl = ss_graph_find_tensor(g, "dsp");
    const ss_op *ex = add(g, "ex", SS_OP_EXPERT_LINEAR, &e, 1, sl, 0, 0);
    check_tensor(T(g, "ex"), SS_F32, "psp", 3, I(4), I(8), I(16));
    check_tensor(T(g, "ex.weight"), SS_F32, NULL, 3, I(4), I(8), I(16));
    assert_int_equal(ss_op_contraction(g, ex), 8);
    assert_true(work_full(g, ex).fwd_flops == 2.0 * 4 * 8 * 8 * 16);
    ss_op_full_tile(g, ex, &t);
    t.out.r[0] = R(2, 4);
    t.out.r[2] = R(8, 16);
    t.red = R(0, 4);
    check_region(g, ex, &t, 0, 3, I(2), I(4), I(0), I(8), I(0), I(4));
    check_region(g, ex, &t, 1, 3, I(2), I(4), I(0), I(4), I(8), I(16));

    const ss_op *cb = add(g, "cb", SS_OP_MOE_COMBINE, &m, 2, sl, p, 0);
    check_tensor(T(g, "cb"), SS_F32, "sap", 3, I(4), I(4), I(8));
    assert_int_equal(ss_op_split_mask(g, cb), 1);
    assert_true(work_full(g, cb).fwd_flops == 2.0 * 2 * 128);
    ss_op_full_tile(g, cb, &t);
    t.out.r[0] = R(2, 4);
    check_region(g, cb, &t, 0, 3, I(0), I(4), I(4), I(8), I(0), I(8));
    check_region(g, cb, &t, 1, 3, I(2), I(4), I(0), I(4), I(0), I(4));
    int wrong = ss_graph_find_tensor(g, "dc");
    add_fails(g, "cbad", SS_OP_MOE_COMBINE, &m, 2, wrong, p, 0, "has 12 slots");
#undef I
    ss_graph_free(g);
}

/* flash_attention: shapes, split mask (no d), regions of a tile (q: its
 * rows; k, v: every key), work against the closed form (causal halves),
 * saved bytes (q, k, v, o and the fp32 log-sum-exp; no score matrix), the
 * FLOPs of a row split summing to the whole, and shape errors. */
static void test_flash_attention(void **state)
{
    (void)state;
#define I(v) ((int64_t)(v))
    ss_graph *g = ss_graph_new("t");
    /* GQA rows: 2 samples, 4 kv heads, 8 positions x G = 2 rows, d 16, dv 8 */
    int q = input(g, "q", SS_BF16, "spap", 4, I(2), I(4), I(16), I(16));
    int k = input(g, "k", SS_BF16, "spap", 4, I(2), I(4), I(8), I(16));
    int v = input(g, "v", SS_BF16, "spap", 4, I(2), I(4), I(8), I(8));
    A0(a);
    a.causal = 1;
    const ss_op *f = add(g, "fa", SS_OP_FLASH_ATTENTION, &a, 3, q, k, v);
    check_tensor(T(g, "fa"), SS_BF16, "spap", 4, I(2), I(4), I(16), I(8));
    assert_int_equal(f->n_w, 0);
    assert_int_equal(ss_op_split_mask(g, f), 7);
    assert_int_equal(ss_op_contraction(g, f), 0);
    ss_work w = work_full(g, f);
    double rows = 2 * 4 * 16, fl = 2 * rows * 8 * (16 + 8) * 0.5;
    assert_true(w.fwd_flops == fl);
    assert_true(w.bwd_flops == 2.5 * fl);
    double qkvo = (2 * 4 * 16 * 16 + 2 * 4 * 8 * 16 + 2 * 4 * 8 * 8 + 2 * 4 * 16 * 8) * 2.0;
    assert_true(w.saved_bytes == qkvo + rows * 4);
    assert_true(w.fwd_bytes == qkvo + rows * 4);
    ss_tile t;
    ss_op_full_tile(g, f, &t);
    t.out.r[0] = R(1, 2);
    t.out.r[1] = R(2, 4);
    t.out.r[2] = R(4, 12);
    check_region(g, f, &t, 0, 4, I(1), I(2), I(2), I(4), I(4), I(12), I(0), I(16));
    check_region(g, f, &t, 1, 4, I(1), I(2), I(2), I(4), I(0), I(8), I(0), I(16));
    check_region(g, f, &t, 2, 4, I(1), I(2), I(2), I(4), I(0), I(8), I(0), I(8));
    double sum = 0;
    for (int r = 0; r < 16; r += 4) {
        ss_op_full_tile(g, f, &t);
        t.out.r[2] = R(r, r + 4);
        ss_op_tile_work(g, f, &t, &w);
        sum += w.fwd_flops;
    }
    assert_true(sum == fl);
    /* not causal: the whole square */
    a.causal = 0;
    const ss_op *nc = add(g, "fa_full", SS_OP_FLASH_ATTENTION, &a, 3, q, k, v);
    assert_true(work_full(g, nc).fwd_flops == 2 * fl);
    add_fails(g, "fa_bad", SS_OP_FLASH_ATTENTION, &a, 3, q, v, v, "must be [batch..., Sk, d]");
    int q3 = input(g, "q3", SS_BF16, "spap", 4, I(2), I(4), I(12), I(16));
    a.causal = 1;
    add_fails(g, "fa_rows", SS_OP_FLASH_ATTENTION, &a, 3, q3, k, v, "multiple of the keys");
    a.rate = 1.5;
    add_fails(g, "fa_rate", SS_OP_FLASH_ATTENTION, &a, 3, q, k, v, "dropout rate");
#undef I
    ss_graph_free(g);
}

static void test_regions(void **state)
{
    (void)state;
    ss_region a = {2, {{0, 4}, {2, 6}}}, b = {2, {{3, 8}, {0, 3}}}, o;
    assert_int_equal(ss_region_volume(&a), 16);
    assert_int_equal(ss_region_intersect(&a, &b, &o), 1);
    assert_true(o.r[0].lo == 3 && o.r[0].hi == 4 && o.r[1].lo == 2 && o.r[1].hi == 3);
    ss_region c = {2, {{4, 8}, {0, 8}}};
    assert_int_equal(ss_region_intersect(&a, &c, &o), 0);
    assert_int_equal(ss_region_volume(&o), 0);
    ss_region d1 = {1, {{0, 4}}};
    assert_int_equal(ss_region_intersect(&a, &d1, &o), 0);
}

/* ---- property test ------------------------------------------------ */

static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;
static int64_t rnd(int64_t lo, int64_t hi) /* [lo, hi] */
{
    rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
    return lo + (int64_t)((rng_state >> 33) % (uint64_t)(hi - lo + 1));
}

/* Build one random small op of kind k into g; returns it and sets *mask to
 * the dims a split may use for the additivity check. */
static const ss_op *random_op(ss_graph *g, int k, unsigned *mask, int *use_red)
{
    char nm[32];
    static int serial;
    snprintf(nm, sizeof nm, "op%d", serial++);
    int64_t n = rnd(1, 4), s = rnd(1, 6), e = rnd(1, 4) * 2;
    int x = input(g, strcat(strcpy((char[40]){0}, nm), "_x"), SS_F32, "sap", 3, n, s, e);
    A0(a);
    const ss_op *op = NULL;
    *use_red = 1;
    switch (k) {
    case 0:
        a.out_features = rnd(1, 7);
        a.use_bias = (int)rnd(0, 1);
        a.trans_b = (int)rnd(0, 1);
        op = add(g, nm, SS_OP_LINEAR, &a, 1, x, 0, 0);
        break;
    case 1: {
        int y = input(g, strcat(strcpy((char[40]){0}, nm), "_y"), SS_F32, "sap", 3, n, e, rnd(1, 5));
        op = add(g, nm, SS_OP_BATCH_MATMUL, &a, 2, x, y, 0);
        break;
    }
    case 2: {
        int y = input(g, strcat(strcpy((char[40]){0}, nm), "_y"), SS_F32, "spaa", 4, n, e, s + 2, rnd(3, 6));
        a.out_channels = rnd(1, 5);
        a.kernel[0] = rnd(1, 3);
        a.kernel[1] = rnd(1, 3);
        a.pad[0] = rnd(0, a.kernel[0] - 1);
        a.stride[0] = rnd(1, 2);
        a.use_bias = (int)rnd(0, 1);
        op = add(g, nm, (int)rnd(0, 1) ? SS_OP_CONV2D : SS_OP_POOL2D, &a, 1, y, 0, 0);
        break;
    }
    case 3:
        a.unary = (ss_unary_kind)rnd(0, 3);
        op = add(g, nm, SS_OP_UNARY, &a, 1, x, 0, 0);
        break;
    case 4:
        a.axis = (int)rnd(-3, 2);
        op = add(g, nm, rnd(0, 1) ? SS_OP_SOFTMAX : SS_OP_LAYERNORM, &a, 1, x, 0, 0);
        break;
    case 5: {
        int ids = input(g, strcat(strcpy((char[40]){0}, nm), "_i"), SS_I32, "sa", 2, n, s);
        a.vocab = rnd(1, 9);
        a.dim = rnd(1, 5);
        op = add(g, nm, SS_OP_EMBEDDING, &a, 1, ids, 0, 0);
        break;
    }
    case 6:
        a.lstm_mode = SS_LSTM_SEQUENCE;
        a.hidden = rnd(1, 5);
        a.return_sequences = (int)rnd(0, 1);
        op = add(g, nm, SS_OP_LSTM, &a, 1, x, 0, 0);
        break;
    case 7:
        a.heads = e / 2;
        a.use_bias = (int)rnd(0, 1);
        op = add(g, nm, SS_OP_ATTENTION, &a, 3, x, x, x);
        *mask = 1; /* query positions and features recompute K/V: not additive */
        return op;
    case 8: {
        int lab = input(g, strcat(strcpy((char[40]){0}, nm), "_l"), SS_I32, "sa", 2, n, s);
        op = add(g, nm, SS_OP_SOFTMAX_CE, &a, 2, x, lab, 0);
        break;
    }
    case 9: {
        a.perm[0] = 1;
        a.perm[1] = 2;
        a.perm[2] = 0;
        op = add(g, nm, SS_OP_TRANSPOSE, &a, 1, x, 0, 0);
        break;
    }
    default: {
        a.ndim = 2;
        a.shape[0] = n * s;
        a.shape[1] = e;
        op = add(g, nm, SS_OP_RESHAPE, &a, 1, x, 0, 0);
        break;
    }
    }
    *mask = ss_op_split_mask(g, op);
    return op;
}

static void test_property_random_splits(void **state)
{
    (void)state;
    ss_graph *g = ss_graph_new("prop");
    for (int iter = 0; iter < 400; iter++) {
        unsigned mask;
        int use_red;
        const ss_op *op = random_op(g, iter % 11, &mask, &use_red);
        ss_tile full;
        ss_op_full_tile(g, op, &full);
        ss_work wf;
        ss_op_tile_work(g, op, &full, &wf);
        int nd = full.out.ndim;
        int deg[SS_MAX_DIMS + 1], total = 1;
        for (int i = 0; i < nd; i++) {
            int64_t ext = full.out.r[i].hi;
            deg[i] = (mask >> i & 1u) ? (int)rnd(1, ext < 3 ? ext : 3) : 1;
            total *= deg[i];
        }
        int64_t K = ss_op_contraction(g, op);
        deg[nd] = (use_red && K > 0) ? (int)rnd(1, K < 3 ? K : 3) : 1;
        total *= deg[nd];
        ss_tile tiles[3 * 3 * 3 * 3 * 3];
        assert_true(total <= (int)(sizeof tiles / sizeof tiles[0]));
        double fwd = 0, bwd = 0;
        int64_t vol = 0;
        for (int ti = 0; ti < total; ti++) {
            ss_tile *t = &tiles[ti];
            *t = full;
            int rem = ti;
            for (int i = nd; i >= 0; i--) {
                int idx = rem % deg[i];
                rem /= deg[i];
                ss_range *r = i < nd ? &t->out.r[i] : &t->red;
                int64_t ext = i < nd ? full.out.r[i].hi : full.red.hi;
                *r = (ss_range){idx * ext / deg[i], (idx + 1) * ext / deg[i]};
            }
            ss_work w;
            ss_op_tile_work(g, op, t, &w);
            fwd += w.fwd_flops;
            bwd += w.bwd_flops;
            if (t->red.lo == 0)
                vol += ss_region_volume(&t->out);
            /* each operand region lies inside its tensor */
            for (int o = 0; o < op->n_in + op->n_w; o++) {
                ss_region r, whole, isect;
                ss_op_input_region(g, op, t, o, &r);
                const ss_tensor *T0 = ss_graph_tensor(g, o < op->n_in ? op->inputs[o] : op->weights[o - op->n_in]);
                whole.ndim = T0->ndim;
                for (int i = 0; i < T0->ndim; i++)
                    whole.r[i] = (ss_range){0, T0->shape[i]};
                assert_int_equal(ss_region_intersect(&r, &whole, &isect), ss_region_volume(&r));
            }
        }
        /* exact cover: volumes add up and tiles of one red slice are disjoint */
        assert_int_equal(vol, ss_region_volume(&full.out));
        for (int i = 0; i < total; i++)
            for (int j = i + 1; j < total; j++) {
                if (tiles[i].red.lo != tiles[j].red.lo)
                    continue;
                ss_region isect;
                assert_int_equal(ss_region_intersect(&tiles[i].out, &tiles[j].out, &isect), 0);
            }
        double tol = 1e-9 * (wf.fwd_flops + 1);
        if (fwd > wf.fwd_flops + tol || fwd < wf.fwd_flops - tol)
            fail_msg("%s (%s): tiles' fwd flops %.1f != op's %.1f", op->name,
                     ss_op_type_name(op->type), fwd, wf.fwd_flops);
        if (bwd > wf.bwd_flops + 1e-9 * (wf.bwd_flops + 1) || bwd < wf.bwd_flops - 1e-9 * (wf.bwd_flops + 1))
            fail_msg("%s (%s): tiles' bwd flops %.1f != op's %.1f", op->name,
                     ss_op_type_name(op->type), bwd, wf.bwd_flops);
    }
    assert_int_equal(ss_graph_validate(g, NULL), SS_OK);
    ss_graph_free(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_input),
        cmocka_unit_test(test_linear),
        cmocka_unit_test(test_batch_matmul),
        cmocka_unit_test(test_conv2d),
        cmocka_unit_test(test_pool_batchnorm),
        cmocka_unit_test(test_elementwise),
        cmocka_unit_test(test_embedding_softmax_ce),
        cmocka_unit_test(test_concat_split),
        cmocka_unit_test(test_reshape_transpose),
        cmocka_unit_test(test_lstm),
        cmocka_unit_test(test_attention),
        cmocka_unit_test(test_llm_types),
        cmocka_unit_test(test_flash_attention),
        cmocka_unit_test(test_regions),
        cmocka_unit_test(test_property_random_splits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
