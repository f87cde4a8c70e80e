/*
 * test_kernels_cpu.c — every CPU kernel (kernels/cpu_*.c) on random shapes
 * drawn from fixed seeds: the forward matches a naive reference written
 * here loop by loop, the backward matches central finite differences of
 * the loss L = sum_k <y_k, dy_k> (sampled elements of every float operand),
 * and split tiles compose to the whole op (partial sums of a split
 * contraction add up; spatial, query and vocabulary shards give the whole
 * op's slice).
 */
#include "testutil.h"
#include "kernels/kernels.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------- linear */

static void test_linear(void **state)
{
    (void)state;
    ss_kt_rng = 11;
    for (int rep = 0; rep < 4; rep++) {
        ss_kt_new_graph();
        int64_t M = ss_kt_rnd(1, 9), K = ss_kt_rnd(1, 13), N = ss_kt_rnd(1, 11);
        int64_t xs[3] = {2, M, K};
        int x = ss_kt_input("x", 3, xs, SS_F32);
        ss_op_attrs at = {0};
        at.out_features = N;
        at.use_bias = rep & 1;
        int op = ss_kt_add("fc", SS_OP_LINEAR, &at, 1, &x);
        ss_kargs a;
        ss_kt_run(op, NULL, &a, 100 + rep);
        double *ref = calloc((size_t)ss_kt_ny(&a, 0), sizeof *ref);
        for (int64_t m = 0; m < 2 * M; m++)
            for (int64_t n = 0; n < N; n++) {
                double s = at.use_bias ? ss_kt_x(&a, 2)[n] : 0;
                for (int64_t k = 0; k < K; k++)
                    s += (double)ss_kt_x(&a, 0)[m * K + k] * ss_kt_x(&a, 1)[k * N + n];
                ref[m * N + n] = s;
            }
        ss_kt_expect_close(ss_kt_y(&a, 0), ref, ss_kt_ny(&a, 0), 1e-4, "linear");
        ss_kt_check_grad(&a, "linear");
        /* a split contraction: the two partial sums add up to the whole */
        if (K >= 2) {
            ss_tile t;
            ss_op_full_tile(ss_kt_graph, ss_kt_op(op), &t);
            double *sum = calloc((size_t)ss_kt_ny(&a, 0), sizeof *sum);
            for (int p = 0; p < 2; p++) {
                t.red = p ? (ss_range){K / 2, K} : (ss_range){0, K / 2};
                ss_kargs b;
                ss_kt_run(op, &t, &b, 100 + rep); /* different data: recompute the reference */
                ss_kargs f;
                ss_kt_run(op, NULL, &f, 100 + rep);
                /* place the full op's operands into the tile's regions */
                for (int64_t r = 0; r < 2 * M; r++)
                    memcpy(ss_kt_x(&b, 0) + r * (t.red.hi - t.red.lo), ss_kt_x(&f, 0) + r * K + t.red.lo,
                           (size_t)(t.red.hi - t.red.lo) * sizeof(float));
                memcpy(ss_kt_x(&b, 1), ss_kt_x(&f, 1) + t.red.lo * N,
                       (size_t)((t.red.hi - t.red.lo) * N) * sizeof(float));
                if (at.use_bias)
                    memcpy(ss_kt_x(&b, 2), ss_kt_x(&f, 2), (size_t)N * sizeof(float));
                ss_diag d;
                ss_diag_init(&d);
                ss_kernel_forward(SS_BACKEND_CPU, &b, &d);
                for (int64_t i = 0; i < ss_kt_ny(&b, 0); i++)
                    sum[i] += ss_kt_y(&b, 0)[i];
                if (p == 1)
                    for (int64_t i = 0; i < ss_kt_ny(&f, 0); i++)
                        assert_true(fabs(sum[i] - ss_kt_y(&f, 0)[i]) <= 1e-4 * (1 + fabs(sum[i])));
                ss_kernel_release(&b, SS_BACKEND_CPU);
                ss_kernel_release(&f, SS_BACKEND_CPU);
            }
            free(sum);
        }
        free(ref);
        ss_kernel_release(&a, SS_BACKEND_CPU);
    }
    /* a tied head: the weight given transposed [N, K] */
    ss_kt_new_graph();
    int64_t xs[2] = {5, 7}, ws[2] = {9, 7};
    int x = ss_kt_input("x", 2, xs, SS_F32);
    /* the table is an embedding's weight, as in GPT's tied head */
    int64_t is[1] = {3};
    int ids = ss_kt_input("ids", 1, is, SS_I32);
    ss_op_attrs ea = {0};
    ea.vocab = ws[0];
    ea.dim = ws[1];
    ea.dtype = SS_F32;
    int w = ss_kt_op(ss_kt_add("emb", SS_OP_EMBEDDING, &ea, 1, &ids))->weights[0];
    ss_op_spec sp = {0};
    sp.name = "head";
    sp.type = SS_OP_LINEAR;
    sp.attrs.out_features = 9;
    sp.attrs.trans_b = 1;
    sp.n_in = 1;
    sp.inputs[0] = x;
    sp.n_w = 1;
    sp.weights[0] = w;
    ss_diag d;
    ss_diag_init(&d);
    int op = ss_graph_add_op(ss_kt_graph, &sp, &d);
    if (op < 0)
        fail_msg("%s", d.msg);
    ss_kargs a;
    ss_kt_run(op, NULL, &a, 7);
    double ref[45];
    for (int m = 0; m < 5; m++)
        for (int n = 0; n < 9; n++) {
            double s = 0;
            for (int k = 0; k < 7; k++)
                s += (double)ss_kt_x(&a, 0)[m * 7 + k] * ss_kt_x(&a, 1)[n * 7 + k];
            ref[m * 9 + n] = s;
        }
    ss_kt_expect_close(ss_kt_y(&a, 0), ref, 45, 1e-4, "linear trans_b");
    ss_kt_check_grad(&a, "linear trans_b");
    ss_kernel_release(&a, SS_BACKEND_CPU);
}

/* ------------------------------------------------------- batch_matmul */

static void test_batch_matmul(void **state)
{
    (void)state;
    ss_kt_rng = 12;
    for (int rep = 0; rep < 4; rep++) {
        ss_kt_new_graph();
        int ta = rep & 1, tb = (rep >> 1) & 1;
        int64_t B = ss_kt_rnd(1, 3), M = ss_kt_rnd(1, 7), K = ss_kt_rnd(1, 8), N = ss_kt_rnd(1, 6);
        int64_t as[3] = {B, ta ? K : M, ta ? M : K}, bs[3] = {B, tb ? N : K, tb ? K : N};
        int in[2] = {ss_kt_input("a", 3, as, SS_F32), ss_kt_input("b", 3, bs, SS_F32)};
        ss_op_attrs at = {0};
        at.trans_a = ta;
        at.trans_b = tb;
        int op = ss_kt_add("bmm", SS_OP_BATCH_MATMUL, &at, 2, in);
        ss_kargs a;
        ss_kt_run(op, NULL, &a, 200 + rep);
        double *ref = calloc((size_t)ss_kt_ny(&a, 0), sizeof *ref);
        for (int64_t b = 0; b < B; b++)
            for (int64_t m = 0; m < M; m++)
                for (int64_t n = 0; n < N; n++) {
                    double s = 0;
                    for (int64_t k = 0; k < K; k++) {
                        float av = ss_kt_x(&a, 0)[b * M * K + (ta ? k * M + m : m * K + k)];
                        float bv = ss_kt_x(&a, 1)[b * K * N + (tb ? n * K + k : k * N + n)];
                        s += (double)av * bv;
                    }
                    ref[(b * M + m) * N + n] = s;
                }
        ss_kt_expect_close(ss_kt_y(&a, 0), ref, ss_kt_ny(&a, 0), 1e-4, "batch_matmul");
        ss_kt_check_grad(&a, "batch_matmul");
        free(ref);
        ss_kernel_release(&a, SS_BACKEND_CPU);
    }
}

/* ------------------------------------------------------------- conv2d */

static void conv_ref(const ss_kargs *a, const ss_op_attrs *at, int64_t N, int64_t C, int64_t H,
                     int64_t W, int64_t O, double *ref)
{
    int64_t Gp = at->groups > 1 ? at->groups : 1, cg = C / Gp, og = O / Gp;
    int64_t Ho = a->yr[0].r[2].hi, Wo = a->yr[0].r[3].hi;
    int64_t sh = at->stride[0] ? at->stride[0] : 1, sw = at->stride[1] ? at->stride[1] : 1;
    for (int64_t n = 0; n < N; n++)
        for (int64_t o = 0; o < O; o++)
            for (int64_t oh = 0; oh < Ho; oh++)
                for (int64_t ow = 0; ow < Wo; ow++) {
                    double s = at->use_bias ? ss_kt_x(a, 2)[o] : 0;
                    int64_t gi = o / og;
                    for (int64_t c = 0; c < cg; c++)
                        for (int64_t i = 0; i < at->kernel[0]; i++)
                            for (int64_t j = 0; j < at->kernel[1]; j++) {
                                int64_t h = oh * sh - at->pad[0] + i, w = ow * sw - at->pad[1] + j;
                                if (h < 0 || h >= H || w < 0 || w >= W)
                                    continue;
                                s += (double)ss_kt_x(a, 0)[((n * C + gi * cg + c) * H + h) * W + w] *
                                     ss_kt_x(a, 1)[((o * cg + c) * at->kernel[0] + i) * at->kernel[1] + j];
                            }
                    ref[((n * O + o) * Ho + oh) * Wo + ow] = s;
                }
}

static void test_conv2d(void **state)
{
    (void)state;
    ss_kt_rng = 13;
    for (int rep = 0; rep < 4; rep++) {
        ss_kt_new_graph();
        int64_t Gp = rep == 3 ? 2 : 1;
        int64_t N = ss_kt_rnd(1, 2), C = Gp * ss_kt_rnd(1, 3), H = ss_kt_rnd(4, 8), W = ss_kt_rnd(4, 8),
                O = Gp * ss_kt_rnd(1, 3);
        int64_t xs[4] = {N, C, H, W};
        int x = ss_kt_input("x", 4, xs, SS_F32);
        ss_op_attrs at = {0};
        at.out_channels = O;
        at.groups = Gp;
        at.use_bias = rep != 1;
        at.kernel[0] = ss_kt_rnd(1, 3);
        at.kernel[1] = ss_kt_rnd(1, 3);
        at.stride[0] = ss_kt_rnd(1, 2);
        at.stride[1] = ss_kt_rnd(1, 2);
        at.pad[0] = ss_kt_rnd(0, at.kernel[0] - 1);
        at.pad[1] = ss_kt_rnd(0, at.kernel[1] - 1);
        int op = ss_kt_add("conv", SS_OP_CONV2D, &at, 1, &x);
        ss_kargs a;
        ss_kt_run(op, NULL, &a, 300 + rep);
        H = a.xr[0].r[2].hi; /* the input rows and columns the windows reach */
        W = a.xr[0].r[3].hi;
        double *ref = calloc((size_t)ss_kt_ny(&a, 0), sizeof *ref);
        conv_ref(&a, &at, N, C, H, W, O, ref);
        ss_kt_expect_close(ss_kt_y(&a, 0), ref, ss_kt_ny(&a, 0), 1e-4, "conv2d");
        ss_kt_check_grad(&a, "conv2d");
        /* a tile of the lower output rows reads its halo and gives the same rows */
        int64_t Ho = a.yr[0].r[2].hi, Wo = a.yr[0].r[3].hi;
        if (Ho >= 2) {
            ss_tile t;
            ss_op_full_tile(ss_kt_graph, ss_kt_op(op), &t);
            t.out.r[2].lo = Ho / 2;
            ss_kargs b;
            ss_diag d;
            ss_diag_init(&d);
            assert_int_equal(ss_kernel_setup(&b, SS_BACKEND_CPU, ss_kt_graph, ss_kt_op(op), &t, &d), SS_OK);
            assert_int_equal(ss_kernel_alloc(&b, SS_BACKEND_CPU, 0, 1, &d), SS_OK);
            int64_t r0 = b.xr[0].r[2].lo, rh = b.xr[0].r[2].hi - r0;
            for (int64_t nc = 0; nc < N * C; nc++)
                memcpy(ss_kt_x(&b, 0) + nc * rh * W, ss_kt_x(&a, 0) + (nc * H + r0) * W,
                       (size_t)(rh * W) * sizeof(float));
            for (int i = 1; i < b.n_x; i++)
                memcpy(ss_kt_x(&b, i), ss_kt_x(&a, i), ss_kernel_x_bytes(&b, i));
            ss_kernel_forward(SS_BACKEND_CPU, &b, &d);
            int64_t rows = Ho - Ho / 2;
            for (int64_t no = 0; no < N * O; no++)
                for (int64_t r = 0; r < rows * Wo; r++)
                    assert_true(fabs(ss_kt_y(&b, 0)[no * rows * Wo + r] -
                                     ss_kt_y(&a, 0)[(no * Ho + Ho / 2) * Wo + r]) < 1e-4);
            ss_kernel_release(&b, SS_BACKEND_CPU);
        }
        free(ref);
        ss_kernel_release(&a, SS_BACKEND_CPU);
    }
}

/* ------------------------------------------------------------- pool2d */

static void test_pool2d(void **state)
{
    (void)state;
    ss_kt_rng = 14;
    for (int rep = 0; rep < 4; rep++) {
        ss_kt_new_graph();
        int64_t N = ss_kt_rnd(1, 2), C = ss_kt_rnd(1, 3), H = ss_kt_rnd(3, 7), W = ss_kt_rnd(3, 7);
        int64_t xs[4] = {N, C, H, W};
        int x = ss_kt_input("x", 4, xs, SS_F32);
        ss_op_attrs at = {0};
        at.pool = rep & 1 ? SS_POOL_AVG : SS_POOL_MAX;
        at.kernel[0] = ss_kt_rnd(1, 3);
        at.kernel[1] = ss_kt_rnd(1, 3);
        at.stride[0] = ss_kt_rnd(1, 2);
        at.stride[1] = ss_kt_rnd(1, 2);
        at.pad[0] = ss_kt_rnd(0, at.kernel[0] - 1);
        at.pad[1] = ss_kt_rnd(0, at.kernel[1] - 1);
        int op = ss_kt_add("pool", SS_OP_POOL2D, &at, 1, &x);
        ss_kargs a;
        ss_kt_run(op, NULL, &a, 400 + rep);
        H = a.xr[0].r[2].hi; /* the input rows and columns the windows reach */
        W = a.xr[0].r[3].hi;
        int64_t Ho = a.yr[0].r[2].hi, Wo = a.yr[0].r[3].hi;
        double *ref = calloc((size_t)ss_kt_ny(&a, 0), sizeof *ref);
        for (int64_t c = 0; c < N * C; c++)
            for (int64_t oh = 0; oh < Ho; oh++)
                for (int64_t ow = 0; ow < Wo; ow++) {
                    double best = -INFINITY, s = 0;
                    for (int64_t i = 0; i < at.kernel[0]; i++)
                        for (int64_t j = 0; j < at.kernel[1]; j++) {
                            int64_t h = oh * at.stride[0] - at.pad[0] + i,
                                    w = ow * at.stride[1] - at.pad[1] + j;
                            if (h < 0 || h >= H || w < 0 || w >= W)
                                continue;
                            double v = ss_kt_x(&a, 0)[(c * H + h) * W + w];
                            s += v;
                            best = v > best ? v : best;
                        }
                    ref[(c * Ho + oh) * Wo + ow] =
                        at.pool == SS_POOL_MAX ? best : s / (double)(at.kernel[0] * at.kernel[1]);
                }
        ss_kt_expect_close(ss_kt_y(&a, 0), ref, ss_kt_ny(&a, 0), 1e-5, "pool2d");
        ss_kt_check_grad(&a, "pool2d");
        free(ref);
        ss_kernel_release(&a, SS_BACKEND_CPU);
    }
}

/* ------------------------------------------------------ normalisations */

static void test_norms(void **state)
{
    (void)state;
    ss_kt_rng = 15;
    for (int rep = 0; rep < 4; rep++) {
        ss_kt_new_graph();
        int layer = rep < 2;
        int64_t xs[4] = {ss_kt_rnd(2, 4), ss_kt_rnd(1, 4), ss_kt_rnd(2, 4), ss_kt_rnd(2, 5)};
        int x = ss_kt_input("x", layer ? 3 : 4, xs, SS_F32);
        ss_op_attrs at = {0};
        int op = ss_kt_add("norm", layer ? SS_OP_LAYERNORM : SS_OP_BATCHNORM, &at, 1, &x);
        ss_kargs a;
        ss_kt_run(op, NULL, &a, 500 + rep);
        int64_t n = ss_kt_ny(&a, 0);
        double *ref = calloc((size_t)n, sizeof *ref);
        /* groups: layernorm rows of the last dim; batchnorm channels over N, H, W */
        int64_t G_ = layer ? n / xs[2] : xs[1];
        for (int64_t g = 0; g < G_; g++) {
            double s = 0, s2 = 0, m = 0;
            for (int64_t i = 0; i < n; i++) {
                int in_g = layer ? i / xs[2] == g : (i / (xs[2] * xs[3])) % xs[1] == g;
                if (in_g) {
                    s += ss_kt_x(&a, 0)[i];
                    m++;
                }
            }
            double mu = s / m;
            for (int64_t i = 0; i < n; i++) {
                int in_g = layer ? i / xs[2] == g : (i / (xs[2] * xs[3])) % xs[1] == g;
                if (in_g)
                    s2 += (ss_kt_x(&a, 0)[i] - mu) * (ss_kt_x(&a, 0)[i] - mu);
            }
            double r = 1 / sqrt(s2 / m + 1e-5);
            for (int64_t i = 0; i < n; i++) {
                int in_g = layer ? i / xs[2] == g : (i / (xs[2] * xs[3])) % xs[1] == g;
                int64_t p = layer ? i % xs[2] : g;
                if (in_g)
                    ref[i] = (ss_kt_x(&a, 0)[i] - mu) * r * ss_kt_x(&a, 1)[p] + ss_kt_x(&a, 2)[p];
            }
        }
        ss_kt_expect_close(ss_kt_y(&a, 0), ref, n, 1e-4, layer ? "layernorm" : "batchnorm");
        ss_kt_check_grad(&a, layer ? "layernorm" : "batchnorm");
        free(ref);
        ss_kernel_release(&a, SS_BACKEND_CPU);
    }
}

/* ---------------------------------------------- elementwise and softmax */

static void test_elementwise(void **state)
{
    (void)state;
    ss_kt_rng = 16;
    for (int u = 0; u < 6; u++) {
        ss_kt_new_graph();
        int64_t xs[3] = {ss_kt_rnd(1, 4), ss_kt_rnd(1, 5), ss_kt_rnd(1, 6)};
        int in[2] = {ss_kt_input("x", 3, xs, SS_F32), ss_kt_input("z", 3, xs, SS_F32)};
        ss_op_attrs at = {0};
        int op;
        if (u < 4) {
            at.unary = (ss_unary_kind)u;
            op = ss_kt_add("un", SS_OP_UNARY, &at, 1, in);
        } else {
            at.binary = u == 4 ? SS_BINARY_ADD : SS_BINARY_MUL;
            op = ss_kt_add("bin", SS_OP_BINARY, &at, 2, in);
        }
        ss_kargs a;
        ss_kt_run(op, NULL, &a, 600 + u);
        int64_t n = ss_kt_ny(&a, 0);
        double *ref = calloc((size_t)n, sizeof *ref);
        for (int64_t i = 0; i < n; i++) {
            double x = ss_kt_x(&a, 0)[i];
            switch (u) {
            case 0: ref[i] = x > 0 ? x : 0; break;
            case 1: ref[i] = 0.5 * x * (1 + erf(x / sqrt(2.0))); break;
            case 2: ref[i] = tanh(x); break;
            case 3: ref[i] = 1 / (1 + exp(-x)); break;
            case 4: ref[i] = x + ss_kt_x(&a, 1)[i]; break;
            default: ref[i] = x * ss_kt_x(&a, 1)[i]; break;
            }
        }
        ss_kt_expect_close(ss_kt_y(&a, 0), ref, n, 1e-5, "elementwise");
        ss_kt_check_grad(&a, "elementwise");
        free(ref);
        ss_kernel_release(&a, SS_BACKEND_CPU);
    }
}

static void test_softmax(void **state)
{
    (void)state;
    ss_kt_rng = 17;
    for (int ax = 0; ax < 3; ax++) {
        ss_kt_new_graph();
        int64_t xs[3] = {ss_kt_rnd(1, 4), ss_kt_rnd(2, 5), ss_kt_rnd(2, 6)};
        int x = ss_kt_input("x", 3, xs, SS_F32);
        ss_op_attrs at = {0};
        at.axis = ax == 2 ? -1 : ax;
        int op = ss_kt_add("sm", SS_OP_SOFTMAX, &at, 1, &x);
        ss_kargs a;
        ss_kt_run(op, NULL, &a, 700 + ax);
        int a3 = ax == 2 ? 2 : ax;
        int64_t n = ss_kt_ny(&a, 0), st = a3 == 2 ? 1 : a3 == 1 ? xs[2] : xs[1] * xs[2];
        double *ref = calloc((size_t)n, sizeof *ref);
        for (int64_t i = 0; i < n; i++) {
            int64_t pos = (i / st) % xs[a3], base = i - pos * st;
            double s = 0;
            for (int64_t l = 0; l < xs[a3]; l++)
                s += exp(ss_kt_x(&a, 0)[base + l * st]);
            ref[i] = exp(ss_kt_x(&a, 0)[i]) / s;
        }
        ss_kt_expect_close(ss_kt_y(&a, 0), ref, n, 1e-5, "softmax");
        ss_kt_check_grad(&a, "softmax");
        free(ref);
        ss_kernel_release(&a, SS_BACKEND_CPU);
    }
}

static void test_dropout(void **state)
{
    (void)state;
    ss_kt_new_graph();
    int64_t xs[2] = {40, 50};
    int x = ss_kt_input("x", 2, xs, SS_F32);
    ss_op_attrs at = {0};
    at.rate = 0.25;
    int op = ss_kt_add("drop", SS_OP_DROPOUT, &at, 1, &x);
    ss_kargs a;
    ss_kt_run(op, NULL, &a, 800);
    int64_t zeros = 0;
    for (int64_t i = 0; i < 2000; i++) {
        float y = ss_kt_y(&a, 0)[i], x0 = ss_kt_x(&a, 0)[i];
        if (y == 0)
            zeros++;
        else
            assert_true(fabsf(y - x0 / 0.75f) < 1e-6f);
    }
    assert_true(zeros > 400 && zeros < 600); /* about 25% of 2000 */
    ss_kt_rng = 18;
    ss_kt_check_grad(&a, "dropout");
    ss_kernel_release(&a, SS_BACKEND_CPU);
}

/* ---------------------------------------------------------- embedding */

static void test_embedding(void **state)
{
    (void)state;
    ss_kt_rng = 19;
    for (int rep = 0; rep < 2; rep++) {
        ss_kt_new_graph();
        int64_t xs[2] = {ss_kt_rnd(1, 4), ss_kt_rnd(1, 6)};
        int ids = ss_kt_input("ids", 2, xs, rep ? SS_I64 : SS_I32);
        ss_op_attrs at = {0};
        at.vocab = ss_kt_rnd(3, 12);
        at.dim = ss_kt_rnd(1, 8);
        at.dtype = SS_F32;
        int op = ss_kt_add("emb", SS_OP_EMBEDDING, &at, 1, &ids);
        ss_kargs a;
        ss_kt_run(op, NULL, &a, 900 + rep);
        int64_t rows = ss_kt_nx(&a, 0);
        double *ref = calloc((size_t)ss_kt_ny(&a, 0), sizeof *ref);
        for (int64_t r = 0; r < rows; r++) {
            int64_t id = rep ? ((int64_t *)a.x[0])[r] : ((int32_t *)a.x[0])[r];
            assert_true(id >= 0 && id < at.vocab);
            for (int64_t c = 0; c < at.dim; c++)
                ref[r * at.dim + c] = ss_kt_x(&a, 1)[id * at.dim + c];
        }
        ss_kt_expect_close(ss_kt_y(&a, 0), ref, ss_kt_ny(&a, 0), 0, "embedding");
        ss_kt_check_grad(&a, "embedding");
        /* a vocabulary shard: its rows where the id falls in it, zeros elsewhere */
        ss_tile t;
        ss_op_full_tile(ss_kt_graph, ss_kt_op(op), &t);
        t.red = (ss_range){1, at.vocab};
        ss_kargs b;
        ss_diag d;
        ss_diag_init(&d);
        assert_int_equal(ss_kernel_setup(&b, SS_BACKEND_CPU, ss_kt_graph, ss_kt_op(op), &t, &d), SS_OK);
        assert_int_equal(ss_kernel_alloc(&b, SS_BACKEND_CPU, 0, 1, &d), SS_OK);
        memcpy(b.x[0], a.x[0], ss_kernel_x_bytes(&a, 0));
        memcpy(ss_kt_x(&b, 1), ss_kt_x(&a, 1) + at.dim, ss_kernel_x_bytes(&b, 1));
        ss_kernel_forward(SS_BACKEND_CPU, &b, &d);
        for (int64_t r = 0; r < rows; r++) {
            int64_t id = rep ? ((int64_t *)a.x[0])[r] : ((int32_t *)a.x[0])[r];
            for (int64_t c = 0; c < at.dim; c++)
                assert_true(ss_kt_y(&b, 0)[r * at.dim + c] == (id ? ss_kt_y(&a, 0)[r * at.dim + c] : 0.0f));
        }
        ss_kernel_release(&b, SS_BACKEND_CPU);
        free(ref);
        ss_kernel_release(&a, SS_BACKEND_CPU);
    }
}

/* ---------------------------------------------------------- data movers */

static void test_movers(void **state)
{
    (void)state;
    ss_kt_rng = 20;
    /* concat of two along axis 1, then split it back, transpose, reshape */
    ss_kt_new_graph();
    int64_t as[3] = {2, 3, 4}, bs[3] = {2, 5, 4};
    int in[2] = {ss_kt_input("a", 3, as, SS_F32), ss_kt_input("b", 3, bs, SS_F32)};
    ss_op_attrs at = {0};
    at.axis = 1;
    int cat = ss_kt_add("cat", SS_OP_CONCAT, &at, 2, in);
    ss_kargs a;
    ss_kt_run(cat, NULL, &a, 1000);
    for (int64_t n = 0; n < 2; n++)
        for (int64_t c = 0; c < 8; c++)
            for (int64_t w = 0; w < 4; w++) {
                float want = c < 3 ? ss_kt_x(&a, 0)[(n * 3 + c) * 4 + w] : ss_kt_x(&a, 1)[(n * 5 + c - 3) * 4 + w];
                assert_true(ss_kt_y(&a, 0)[(n * 8 + c) * 4 + w] == want);
            }
    ss_kt_check_grad(&a, "concat");
    ss_kernel_release(&a, SS_BACKEND_CPU);

    int cat_out = ss_graph_out(ss_kt_graph, cat);
    ss_op_attrs sp = {0};
    sp.axis = -2;
    sp.n_split = 3;
    sp.split_sizes[0] = 2;
    sp.split_sizes[1] = 5;
    sp.split_sizes[2] = 1;
    int split = ss_kt_add("split", SS_OP_SPLIT, &sp, 1, &cat_out);
    ss_kt_run(split, NULL, &a, 1001);
    int64_t off[3] = {0, 2, 7};
    for (int k = 0; k < 3; k++)
        for (int64_t n = 0; n < 2; n++)
            for (int64_t c = 0; c < sp.split_sizes[k]; c++)
                for (int64_t w = 0; w < 4; w++)
                    assert_true(ss_kt_y(&a, k)[(n * sp.split_sizes[k] + c) * 4 + w] ==
                                ss_kt_x(&a, 0)[(n * 8 + off[k] + c) * 4 + w]);
    ss_kt_check_grad(&a, "split");
    ss_kernel_release(&a, SS_BACKEND_CPU);

    ss_op_attrs tp = {0};
    tp.perm[0] = 2;
    tp.perm[1] = 0;
    tp.perm[2] = 1;
    int tr = ss_kt_add("tr", SS_OP_TRANSPOSE, &tp, 1, &cat_out);
    ss_kt_run(tr, NULL, &a, 1002);
    for (int64_t w = 0; w < 4; w++)
        for (int64_t n = 0; n < 2; n++)
            for (int64_t c = 0; c < 8; c++)
                assert_true(ss_kt_y(&a, 0)[(w * 2 + n) * 8 + c] == ss_kt_x(&a, 0)[(n * 8 + c) * 4 + w]);
    ss_kt_check_grad(&a, "transpose");
    ss_kernel_release(&a, SS_BACKEND_CPU);

    ss_op_attrs rs = {0};
    rs.ndim = 2;
    rs.shape[0] = 16;
    rs.shape[1] = 4;
    int re = ss_kt_add("re", SS_OP_RESHAPE, &rs, 1, &cat_out);
    ss_kt_run(re, NULL, &a, 1003);
    assert_memory_equal(a.y[0], a.x[0], 64 * sizeof(float));
    ss_kt_check_grad(&a, "reshape");
    ss_kernel_release(&a, SS_BACKEND_CPU);
}

/* ---------------------------------------------------------------- lstm */

static double sg(double v) { return 1 / (1 + exp(-v)); }

static void test_lstm(void **state)
{
    (void)state;
    ss_kt_rng = 21;
    for (int rep = 0; rep < 3; rep++) {
        ss_kt_new_graph();
        int cell = rep == 2;
        int64_t N = ss_kt_rnd(1, 3), S = cell ? 1 : ss_kt_rnd(1, 4), IN = ss_kt_rnd(1, 4), H = ss_kt_rnd(1, 4);
        ss_op_attrs at = {0};
        at.hidden = H;
        at.lstm_mode = cell ? SS_LSTM_CELL : SS_LSTM_SEQUENCE;
        at.return_sequences = rep == 0;
        int op;
        if (cell) {
            int64_t xs[2] = {N, IN}, hs[2] = {N, H};
            int in[3] = {ss_kt_input("x", 2, xs, SS_F32), ss_kt_input("h", 2, hs, SS_F32),
                         ss_kt_input("c", 2, hs, SS_F32)};
            op = ss_kt_add("lstm", SS_OP_LSTM, &at, 3, in);
        } else {
            int64_t xs[3] = {N, S, IN};
            int x = ss_kt_input("x", 3, xs, SS_F32);
            op = ss_kt_add("lstm", SS_OP_LSTM, &at, 1, &x);
        }
        ss_kargs a;
        ss_kt_run(op, NULL, &a, 1100 + rep);
        int wi = cell ? 3 : 1;
        const float *W = ss_kt_x(&a, wi), *b = ss_kt_x(&a, wi + 1);
        double *h = calloc((size_t)(N * H), sizeof *h), *c = calloc((size_t)(N * H), sizeof *c);
        double *hn = calloc((size_t)(N * H), sizeof *hn);
        if (cell)
            for (int64_t i = 0; i < N * H; i++) {
                h[i] = ss_kt_x(&a, 1)[i];
                c[i] = ss_kt_x(&a, 2)[i];
            }
        for (int64_t t = 0; t < S; t++) {
            for (int64_t n = 0; n < N; n++)
                for (int64_t j = 0; j < H; j++) {
                    double g4[4];
                    for (int q = 0; q < 4; q++) {
                        double s = b[q * H + j];
                        for (int64_t k = 0; k < IN; k++)
                            s += (double)ss_kt_x(&a, 0)[(n * S + t) * IN + k] * W[k * 4 * H + q * H + j];
                        for (int64_t k = 0; k < H; k++)
                            s += h[n * H + k] * W[(IN + k) * 4 * H + q * H + j];
                        g4[q] = s;
                    }
                    double cn = sg(g4[1]) * c[n * H + j] + sg(g4[0]) * tanh(g4[2]);
                    c[n * H + j] = cn;
                    hn[n * H + j] = sg(g4[3]) * tanh(cn);
                    if (at.return_sequences)
                        assert_true(fabs(ss_kt_y(&a, 0)[(n * S + t) * H + j] - hn[n * H + j]) < 1e-4);
                }
            memcpy(h, hn, (size_t)(N * H) * sizeof *h);
        }
        if (!at.return_sequences)
            ss_kt_expect_close(ss_kt_y(&a, 0), h, N * H, 1e-4, "lstm h");
        if (cell)
            ss_kt_expect_close(ss_kt_y(&a, 1), c, N * H, 1e-4, "lstm c");
        ss_kt_check_grad(&a, "lstm");
        free(h);
        free(c);
        free(hn);
        ss_kernel_release(&a, SS_BACKEND_CPU);
    }
}

/* ----------------------------------------------------------- attention */

static void test_attention(void **state)
{
    (void)state;
    ss_kt_rng = 22;
    for (int rep = 0; rep < 3; rep++) {
        ss_kt_new_graph();
        int64_t heads = ss_kt_rnd(1, 3), dh = ss_kt_rnd(1, 3), E = heads * dh, N = ss_kt_rnd(1, 2), S = ss_kt_rnd(2, 5);
        int64_t xs[3] = {N, S, E};
        int q = ss_kt_input("q", 3, xs, SS_F32), kv = ss_kt_input("kv", 3, xs, SS_F32);
        int in[3] = {q, kv, kv};
        ss_op_attrs at = {0};
        at.heads = heads;
        at.causal = rep != 0;
        at.use_bias = rep != 2;
        int op = ss_kt_add("attn", SS_OP_ATTENTION, &at, 3, in);
        ss_kargs a;
        ss_kt_run(op, NULL, &a, 1200 + rep);
        const float *Wq = ss_kt_x(&a, 3), *Wk = ss_kt_x(&a, 4), *Wv = ss_kt_x(&a, 5), *Wo = ss_kt_x(&a, 6);
        double *ctx = calloc((size_t)(N * S * E), sizeof *ctx), *ref = calloc((size_t)(N * S * E), sizeof *ref);
        for (int64_t n = 0; n < N; n++)
            for (int64_t hd = 0; hd < heads; hd++)
                for (int64_t i = 0; i < S; i++) {
                    double sc[8], mx = -INFINITY, sum = 0;
                    for (int64_t j = 0; j < S; j++) {
                        double dot = 0;
                        for (int64_t d = 0; d < dh; d++) {
                            int64_t col = hd * dh + d;
                            double qv = at.use_bias ? ss_kt_x(&a, 7)[col] : 0, kvv = at.use_bias ? ss_kt_x(&a, 8)[col] : 0;
                            for (int64_t e = 0; e < E; e++) {
                                qv += (double)ss_kt_x(&a, 0)[(n * S + i) * E + e] * Wq[e * E + col];
                                kvv += (double)ss_kt_x(&a, 1)[(n * S + j) * E + e] * Wk[e * E + col];
                            }
                            dot += qv * kvv;
                        }
                        sc[j] = (at.causal && j > i) ? -INFINITY : dot / sqrt((double)dh);
                        mx = sc[j] > mx ? sc[j] : mx;
                    }
                    for (int64_t j = 0; j < S; j++)
                        sum += (sc[j] = exp(sc[j] - mx));
                    for (int64_t d = 0; d < dh; d++) {
                        int64_t col = hd * dh + d;
                        double s = 0;
                        for (int64_t j = 0; j < S; j++) {
                            double vv = at.use_bias ? ss_kt_x(&a, 9)[col] : 0;
                            for (int64_t e = 0; e < E; e++)
                                vv += (double)ss_kt_x(&a, 2)[(n * S + j) * E + e] * Wv[e * E + col];
                            s += sc[j] / sum * vv;
                        }
                        ctx[(n * S + i) * E + col] = s;
                    }
                }
        for (int64_t r = 0; r < N * S; r++)
            for (int64_t o = 0; o < E; o++) {
                double s = at.use_bias ? ss_kt_x(&a, 10)[o] : 0;
                for (int64_t e = 0; e < E; e++)
                    s += ctx[r * E + e] * Wo[e * E + o];
                ref[r * E + o] = s;
            }
        ss_kt_expect_close(ss_kt_y(&a, 0), ref, N * S * E, 1e-4, "attention");
        ss_kt_check_grad(&a, "attention");
        /* causal: the later query rows as a tile give the same rows */
        if (at.causal) {
            ss_tile t;
            ss_op_full_tile(ss_kt_graph, ss_kt_op(op), &t);
            t.out.r[1].lo = S / 2;
            ss_kargs b;
            ss_diag d;
            ss_diag_init(&d);
            assert_int_equal(ss_kernel_setup(&b, SS_BACKEND_CPU, ss_kt_graph, ss_kt_op(op), &t, &d), SS_OK);
            assert_int_equal(ss_kernel_alloc(&b, SS_BACKEND_CPU, 0, 1, &d), SS_OK);
            int64_t sq = S - S / 2;
            for (int64_t n = 0; n < N; n++)
                memcpy(ss_kt_x(&b, 0) + n * sq * E, ss_kt_x(&a, 0) + (n * S + S / 2) * E,
                       (size_t)(sq * E) * sizeof(float));
            for (int i = 1; i < b.n_x; i++)
                memcpy(b.x[i], a.x[i], ss_kernel_x_bytes(&b, i));
            ss_kernel_forward(SS_BACKEND_CPU, &b, &d);
            for (int64_t n = 0; n < N; n++)
                for (int64_t r = 0; r < sq * E; r++)
                    assert_true(fabs(ss_kt_y(&b, 0)[n * sq * E + r] - ref[(n * S + S / 2) * E + r]) < 1e-4);
            ss_kernel_release(&b, SS_BACKEND_CPU);
        }
        free(ctx);
        free(ref);
        ss_kernel_release(&a, SS_BACKEND_CPU);
    }
}

/* ---------------------------------------------------------- softmax_ce */

static void test_softmax_ce(void **state)
{
    (void)state;
    ss_kt_rng = 23;
    ss_kt_new_graph();
    int64_t xs[3] = {2, 3, 7}, ls[2] = {2, 3};
    int in[2] = {ss_kt_input("logits", 3, xs, SS_F32), ss_kt_input("labels", 2, ls, SS_I32)};
    ss_op_attrs at = {0};
    int op = ss_kt_add("loss", SS_OP_SOFTMAX_CE, &at, 2, in);
    ss_kargs a;
    ss_kt_run(op, NULL, &a, 1300);
    double ref[6];
    for (int r = 0; r < 6; r++) {
        double s = 0;
        for (int v = 0; v < 7; v++)
            s += exp(ss_kt_x(&a, 0)[r * 7 + v]);
        int lab = ((int32_t *)a.x[1])[r];
        assert_true(lab >= 0 && lab < 7);
        ref[r] = log(s) - ss_kt_x(&a, 0)[r * 7 + lab];
    }
    ss_kt_expect_close(ss_kt_y(&a, 0), ref, 6, 1e-5, "softmax_ce");
    ss_kt_check_grad(&a, "softmax_ce");
    ss_kernel_release(&a, SS_BACKEND_CPU);
}

/* ------------------------------------------------------ table and refusals */

static void test_table(void **state)
{
    (void)state;
    for (int t = 0; t < SS_OP_TYPE_COUNT; t++) {
        const ss_kernel *k = ss_kernel_get(SS_BACKEND_CPU, (ss_op_type)t);
        assert_non_null(k);
        assert_non_null(k->fwd);
        assert_non_null(k->bwd);
        assert_non_null(k->sizes);
    }
    assert_int_equal(ss_kernel_device_count(SS_BACKEND_CPU), 1);
    /* bf16 is not a CPU compute dtype; an LSTM tile splitting the hidden state is refused */
    ss_kt_new_graph();
    int64_t xs[2] = {4, 8};
    int x = ss_kt_input("x", 2, xs, SS_BF16);
    ss_op_attrs at = {0};
    at.out_features = 4;
    int op = ss_kt_add("fc", SS_OP_LINEAR, &at, 1, &x);
    ss_tile t;
    ss_op_full_tile(ss_kt_graph, ss_kt_op(op), &t);
    ss_kargs a;
    ss_diag d;
    ss_diag_init(&d);
    assert_int_equal(ss_kernel_setup(&a, SS_BACKEND_CPU, ss_kt_graph, ss_kt_op(op), &t, &d), SS_ERR_UNSUPPORTED);
    assert_non_null(strstr(d.msg, "bf16"));
    ss_kt_new_graph();
    int64_t ls[3] = {2, 3, 4};
    x = ss_kt_input("x", 3, ls, SS_F32);
    ss_op_attrs la = {0};
    la.hidden = 6;
    op = ss_kt_add("lstm", SS_OP_LSTM, &la, 1, &x);
    ss_op_full_tile(ss_kt_graph, ss_kt_op(op), &t);
    t.out.r[1].hi = 3;
    ss_diag_init(&d);
    assert_int_equal(ss_kernel_setup(&a, SS_BACKEND_CPU, ss_kt_graph, ss_kt_op(op), &t, &d), SS_ERR_UNSUPPORTED);
    assert_non_null(strstr(d.msg, "hidden"));
}

/* 1 if a library whose path contains `lib` is mapped in this process, 0 if
 * not, -1 without /proc. */
static int lib_mapped(const char *lib)
{
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f)
        return -1;
    char line[4096];
    int found = 0;
    while (!found && fgets(line, sizeof line, f))
        found = strstr(line, lib) != NULL;
    fclose(f);
    return found;
}

static int blas_mapped(void) { return lib_mapped("libopenblas"); }

/* Runs first: OpenBLAS is not loaded at start-up, only by the first CPU GEMM
 * (here the measuring entry, [[1 2] [3 4]] x [[5 6] [7 8]]). */
static void test_blas_on_first_use(void **state)
{
    (void)state;
    int before = blas_mapped();
    assert_false(ss_cpu_blas_loaded());
    /* COIN-OR CBC/CLP, whose LAPACK would map OpenBLAS at start-up, are
     * opened on first use too (search/coin.c): nothing maps it before. */
    if (before >= 0)
        assert_int_equal(before, 0);
    assert_true(lib_mapped("liblapack") <= 0);
    const float a[4] = {1, 2, 3, 4}, b[4] = {5, 6, 7, 8};
    float c[4] = {0};
    ss_diag d;
    ss_diag_init(&d);
    assert_int_equal(ss_kernel_gemm_f32(2, 2, 2, a, b, c, &d), SS_OK);
    assert_true(c[0] == 19 && c[1] == 22 && c[2] == 43 && c[3] == 50);
    assert_true(ss_cpu_blas_loaded());
    if (before >= 0)
        assert_int_equal(blas_mapped(), 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_blas_on_first_use),
        cmocka_unit_test_teardown(test_linear, ss_kt_teardown),
        cmocka_unit_test_teardown(test_batch_matmul, ss_kt_teardown),
        cmocka_unit_test_teardown(test_conv2d, ss_kt_teardown),
        cmocka_unit_test_teardown(test_pool2d, ss_kt_teardown),
        cmocka_unit_test_teardown(test_norms, ss_kt_teardown),
        cmocka_unit_test_teardown(test_elementwise, ss_kt_teardown),
        cmocka_unit_test_teardown(test_softmax, ss_kt_teardown),
        cmocka_unit_test_teardown(test_dropout, ss_kt_teardown),
        cmocka_unit_test_teardown(test_embedding, ss_kt_teardown),
        cmocka_unit_test_teardown(test_movers, ss_kt_teardown),
        cmocka_unit_test_teardown(test_lstm, ss_kt_teardown),
        cmocka_unit_test_teardown(test_attention, ss_kt_teardown),
        cmocka_unit_test_teardown(test_softmax_ce, ss_kt_teardown),
        cmocka_unit_test_teardown(test_table, ss_kt_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
