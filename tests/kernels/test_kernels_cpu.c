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

/* ------------------------------------------------------------ helpers */

static uint64_t rng_state;
static int64_t rnd(int64_t lo, int64_t hi) /* [lo, hi] */
{
    rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
    return lo + (int64_t)((rng_state >> 33) % (uint64_t)(hi - lo + 1));
}

static ss_graph *G;

static int input(const char *name, int nd, const int64_t *shape, ss_dtype t)
{
    ss_op_attrs a = {0};
    a.ndim = nd;
    for (int i = 0; i < nd; i++) {
        a.shape[i] = shape[i];
        a.kind[i] = i == 0 ? SS_DIM_SAMPLE : (nd == 4 && i >= 2) ? SS_DIM_ATTRIBUTE
                                                                   : SS_DIM_PARAMETER;
    }
    a.dtype = t;
    ss_diag d;
    ss_diag_init(&d);
    int op = ss_graph_add(G, name, SS_OP_INPUT, &a, 0, NULL, &d);
    if (op < 0)
        fail_msg("%s", d.msg);
    return ss_graph_out(G, op);
}

static int add(const char *name, ss_op_type type, const ss_op_attrs *a, int n, const int *in)
{
    ss_diag d;
    ss_diag_init(&d);
    int op = ss_graph_add(G, name, type, a, n, in, &d);
    if (op < 0)
        fail_msg("%s", d.msg);
    return op;
}

static const ss_op *OP(int op) { return ss_graph_op(G, op); }

/* Set up and run the forward of a tile (the whole op when t is NULL). */
static void run(int op, const ss_tile *t, ss_kargs *a, uint64_t seed)
{
    ss_tile full;
    ss_op_full_tile(G, OP(op), &full);
    ss_diag d;
    ss_diag_init(&d);
    if (ss_kernel_setup(a, SS_BACKEND_CPU, G, OP(op), t ? t : &full, &d) != SS_OK ||
        ss_kernel_alloc(a, SS_BACKEND_CPU, 0, seed, &d) != SS_OK ||
        ss_kernel_forward(SS_BACKEND_CPU, a, &d) != SS_OK)
        fail_msg("%s", d.msg);
}

static float *X(const ss_kargs *a, int i) { return a->x[i]; }
static float *Y(const ss_kargs *a, int k) { return a->y[k]; }
static int64_t nx(const ss_kargs *a, int i) { return ss_region_volume(&a->xr[i]); }
static int64_t ny(const ss_kargs *a, int k) { return ss_region_volume(&a->yr[k]); }

static void expect_close(const float *got, const double *want, int64_t n, double tol,
                         const char *what)
{
    for (int64_t i = 0; i < n; i++)
        if (!(fabs(got[i] - want[i]) <= tol * (1 + fabs(want[i]))))
            fail_msg("%s: element %lld is %g, reference %g", what, (long long)i, got[i],
                     want[i]);
}

static double loss(const ss_kargs *a)
{
    double s = 0;
    for (int k = 0; k < a->n_y; k++)
        for (int64_t i = 0; i < ny(a, k); i++)
            s += (double)Y(a, k)[i] * ((float *)a->dy[k])[i];
    return s;
}

/* Backward vs central differences on up to `samples` elements per float operand. */
static void check_grad(ss_kargs *a, const char *what)
{
    ss_diag d;
    ss_diag_init(&d);
    assert_int_equal(ss_kernel_backward(SS_BACKEND_CPU, a, &d), SS_OK);
    float *grads[SS_MAX_OPERANDS] = {0};
    for (int i = 0; i < a->n_x; i++)
        if (a->dx[i]) {
            grads[i] = malloc(ss_kernel_x_bytes(a, i));
            memcpy(grads[i], a->dx[i], ss_kernel_x_bytes(a, i));
        }
    const float h = 1e-2f;
    for (int i = 0; i < a->n_x; i++) {
        if (!grads[i])
            continue;
        int64_t n = nx(a, i);
        for (int s = 0; s < 6 && n > 0; s++) {
            int64_t j = rnd(0, n - 1);
            float *x = X(a, i), keep = x[j];
            x[j] = keep + h;
            ss_kernel_forward(SS_BACKEND_CPU, a, &d);
            double lp = loss(a);
            x[j] = keep - h;
            ss_kernel_forward(SS_BACKEND_CPU, a, &d);
            double lm = loss(a);
            x[j] = keep;
            double fd = (lp - lm) / (2 * h), an = grads[i][j];
            if (!(fabs(fd - an) <= 2e-2 * (1 + fabs(an))))
                fail_msg("%s: d/d operand %d [%lld]: backward %g, finite difference %g", what,
                         i, (long long)j, an, fd);
        }
        free(grads[i]);
    }
    ss_kernel_forward(SS_BACKEND_CPU, a, &d);
}

static void new_graph(void)
{
    ss_graph_free(G);
    G = ss_graph_new("k");
    assert_non_null(G);
}

static int teardown(void **state)
{
    (void)state;
    ss_graph_free(G);
    G = NULL;
    return 0;
}

/* ------------------------------------------------------------- linear */

static void test_linear(void **state)
{
    (void)state;
    rng_state = 11;
    for (int rep = 0; rep < 4; rep++) {
        new_graph();
        int64_t M = rnd(1, 9), K = rnd(1, 13), N = rnd(1, 11);
        int64_t xs[3] = {2, M, K};
        int x = input("x", 3, xs, SS_F32);
        ss_op_attrs at = {0};
        at.out_features = N;
        at.use_bias = rep & 1;
        int op = add("fc", SS_OP_LINEAR, &at, 1, &x);
        ss_kargs a;
        run(op, NULL, &a, 100 + rep);
        double *ref = calloc((size_t)ny(&a, 0), sizeof *ref);
        for (int64_t m = 0; m < 2 * M; m++)
            for (int64_t n = 0; n < N; n++) {
                double s = at.use_bias ? X(&a, 2)[n] : 0;
                for (int64_t k = 0; k < K; k++)
                    s += (double)X(&a, 0)[m * K + k] * X(&a, 1)[k * N + n];
                ref[m * N + n] = s;
            }
        expect_close(Y(&a, 0), ref, ny(&a, 0), 1e-4, "linear");
        check_grad(&a, "linear");
        /* a split contraction: the two partial sums add up to the whole */
        if (K >= 2) {
            ss_tile t;
            ss_op_full_tile(G, OP(op), &t);
            double *sum = calloc((size_t)ny(&a, 0), sizeof *sum);
            for (int p = 0; p < 2; p++) {
                t.red = p ? (ss_range){K / 2, K} : (ss_range){0, K / 2};
                ss_kargs b;
                run(op, &t, &b, 100 + rep); /* different data: recompute the reference */
                ss_kargs f;
                run(op, NULL, &f, 100 + rep);
                /* place the full op's operands into the tile's regions */
                for (int64_t r = 0; r < 2 * M; r++)
                    memcpy(X(&b, 0) + r * (t.red.hi - t.red.lo), X(&f, 0) + r * K + t.red.lo,
                           (size_t)(t.red.hi - t.red.lo) * sizeof(float));
                memcpy(X(&b, 1), X(&f, 1) + t.red.lo * N,
                       (size_t)((t.red.hi - t.red.lo) * N) * sizeof(float));
                if (at.use_bias)
                    memcpy(X(&b, 2), X(&f, 2), (size_t)N * sizeof(float));
                ss_diag d;
                ss_diag_init(&d);
                ss_kernel_forward(SS_BACKEND_CPU, &b, &d);
                for (int64_t i = 0; i < ny(&b, 0); i++)
                    sum[i] += Y(&b, 0)[i];
                if (p == 1)
                    for (int64_t i = 0; i < ny(&f, 0); i++)
                        assert_true(fabs(sum[i] - Y(&f, 0)[i]) <= 1e-4 * (1 + fabs(sum[i])));
                ss_kernel_release(&b, SS_BACKEND_CPU);
                ss_kernel_release(&f, SS_BACKEND_CPU);
            }
            free(sum);
        }
        free(ref);
        ss_kernel_release(&a, SS_BACKEND_CPU);
    }
    /* a tied head: the weight given transposed [N, K] */
    new_graph();
    int64_t xs[2] = {5, 7}, ws[2] = {9, 7};
    int x = input("x", 2, xs, SS_F32);
    /* the table is an embedding's weight, as in GPT's tied head */
    int64_t is[1] = {3};
    int ids = input("ids", 1, is, SS_I32);
    ss_op_attrs ea = {0};
    ea.vocab = ws[0];
    ea.dim = ws[1];
    ea.dtype = SS_F32;
    int w = OP(add("emb", SS_OP_EMBEDDING, &ea, 1, &ids))->weights[0];
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
    int op = ss_graph_add_op(G, &sp, &d);
    if (op < 0)
        fail_msg("%s", d.msg);
    ss_kargs a;
    run(op, NULL, &a, 7);
    double ref[45];
    for (int m = 0; m < 5; m++)
        for (int n = 0; n < 9; n++) {
            double s = 0;
            for (int k = 0; k < 7; k++)
                s += (double)X(&a, 0)[m * 7 + k] * X(&a, 1)[n * 7 + k];
            ref[m * 9 + n] = s;
        }
    expect_close(Y(&a, 0), ref, 45, 1e-4, "linear trans_b");
    check_grad(&a, "linear trans_b");
    ss_kernel_release(&a, SS_BACKEND_CPU);
}

/* ------------------------------------------------------- batch_matmul */

static void test_batch_matmul(void **state)
{
    (void)state;
    rng_state = 12;
    for (int rep = 0; rep < 4; rep++) {
        new_graph();
        int ta = rep & 1, tb = (rep >> 1) & 1;
        int64_t B = rnd(1, 3), M = rnd(1, 7), K = rnd(1, 8), N = rnd(1, 6);
        int64_t as[3] = {B, ta ? K : M, ta ? M : K}, bs[3] = {B, tb ? N : K, tb ? K : N};
        int in[2] = {input("a", 3, as, SS_F32), input("b", 3, bs, SS_F32)};
        ss_op_attrs at = {0};
        at.trans_a = ta;
        at.trans_b = tb;
        int op = add("bmm", SS_OP_BATCH_MATMUL, &at, 2, in);
        ss_kargs a;
        run(op, NULL, &a, 200 + rep);
        double *ref = calloc((size_t)ny(&a, 0), sizeof *ref);
        for (int64_t b = 0; b < B; b++)
            for (int64_t m = 0; m < M; m++)
                for (int64_t n = 0; n < N; n++) {
                    double s = 0;
                    for (int64_t k = 0; k < K; k++) {
                        float av = X(&a, 0)[b * M * K + (ta ? k * M + m : m * K + k)];
                        float bv = X(&a, 1)[b * K * N + (tb ? n * K + k : k * N + n)];
                        s += (double)av * bv;
                    }
                    ref[(b * M + m) * N + n] = s;
                }
        expect_close(Y(&a, 0), ref, ny(&a, 0), 1e-4, "batch_matmul");
        check_grad(&a, "batch_matmul");
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
                    double s = at->use_bias ? X(a, 2)[o] : 0;
                    int64_t gi = o / og;
                    for (int64_t c = 0; c < cg; c++)
                        for (int64_t i = 0; i < at->kernel[0]; i++)
                            for (int64_t j = 0; j < at->kernel[1]; j++) {
                                int64_t h = oh * sh - at->pad[0] + i, w = ow * sw - at->pad[1] + j;
                                if (h < 0 || h >= H || w < 0 || w >= W)
                                    continue;
                                s += (double)X(a, 0)[((n * C + gi * cg + c) * H + h) * W + w] *
                                     X(a, 1)[((o * cg + c) * at->kernel[0] + i) * at->kernel[1] + j];
                            }
                    ref[((n * O + o) * Ho + oh) * Wo + ow] = s;
                }
}

static void test_conv2d(void **state)
{
    (void)state;
    rng_state = 13;
    for (int rep = 0; rep < 4; rep++) {
        new_graph();
        int64_t Gp = rep == 3 ? 2 : 1;
        int64_t N = rnd(1, 2), C = Gp * rnd(1, 3), H = rnd(4, 8), W = rnd(4, 8),
                O = Gp * rnd(1, 3);
        int64_t xs[4] = {N, C, H, W};
        int x = input("x", 4, xs, SS_F32);
        ss_op_attrs at = {0};
        at.out_channels = O;
        at.groups = Gp;
        at.use_bias = rep != 1;
        at.kernel[0] = rnd(1, 3);
        at.kernel[1] = rnd(1, 3);
        at.stride[0] = rnd(1, 2);
        at.stride[1] = rnd(1, 2);
        at.pad[0] = rnd(0, at.kernel[0] - 1);
        at.pad[1] = rnd(0, at.kernel[1] - 1);
        int op = add("conv", SS_OP_CONV2D, &at, 1, &x);
        ss_kargs a;
        run(op, NULL, &a, 300 + rep);
        H = a.xr[0].r[2].hi; /* the input rows and columns the windows reach */
        W = a.xr[0].r[3].hi;
        double *ref = calloc((size_t)ny(&a, 0), sizeof *ref);
        conv_ref(&a, &at, N, C, H, W, O, ref);
        expect_close(Y(&a, 0), ref, ny(&a, 0), 1e-4, "conv2d");
        check_grad(&a, "conv2d");
        /* a tile of the lower output rows reads its halo and gives the same rows */
        int64_t Ho = a.yr[0].r[2].hi, Wo = a.yr[0].r[3].hi;
        if (Ho >= 2) {
            ss_tile t;
            ss_op_full_tile(G, OP(op), &t);
            t.out.r[2].lo = Ho / 2;
            ss_kargs b;
            ss_diag d;
            ss_diag_init(&d);
            assert_int_equal(ss_kernel_setup(&b, SS_BACKEND_CPU, G, OP(op), &t, &d), SS_OK);
            assert_int_equal(ss_kernel_alloc(&b, SS_BACKEND_CPU, 0, 1, &d), SS_OK);
            int64_t r0 = b.xr[0].r[2].lo, rh = b.xr[0].r[2].hi - r0;
            for (int64_t nc = 0; nc < N * C; nc++)
                memcpy(X(&b, 0) + nc * rh * W, X(&a, 0) + (nc * H + r0) * W,
                       (size_t)(rh * W) * sizeof(float));
            for (int i = 1; i < b.n_x; i++)
                memcpy(X(&b, i), X(&a, i), ss_kernel_x_bytes(&b, i));
            ss_kernel_forward(SS_BACKEND_CPU, &b, &d);
            int64_t rows = Ho - Ho / 2;
            for (int64_t no = 0; no < N * O; no++)
                for (int64_t r = 0; r < rows * Wo; r++)
                    assert_true(fabs(Y(&b, 0)[no * rows * Wo + r] -
                                     Y(&a, 0)[(no * Ho + Ho / 2) * Wo + r]) < 1e-4);
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
    rng_state = 14;
    for (int rep = 0; rep < 4; rep++) {
        new_graph();
        int64_t N = rnd(1, 2), C = rnd(1, 3), H = rnd(3, 7), W = rnd(3, 7);
        int64_t xs[4] = {N, C, H, W};
        int x = input("x", 4, xs, SS_F32);
        ss_op_attrs at = {0};
        at.pool = rep & 1 ? SS_POOL_AVG : SS_POOL_MAX;
        at.kernel[0] = rnd(1, 3);
        at.kernel[1] = rnd(1, 3);
        at.stride[0] = rnd(1, 2);
        at.stride[1] = rnd(1, 2);
        at.pad[0] = rnd(0, at.kernel[0] - 1);
        at.pad[1] = rnd(0, at.kernel[1] - 1);
        int op = add("pool", SS_OP_POOL2D, &at, 1, &x);
        ss_kargs a;
        run(op, NULL, &a, 400 + rep);
        H = a.xr[0].r[2].hi; /* the input rows and columns the windows reach */
        W = a.xr[0].r[3].hi;
        int64_t Ho = a.yr[0].r[2].hi, Wo = a.yr[0].r[3].hi;
        double *ref = calloc((size_t)ny(&a, 0), sizeof *ref);
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
                            double v = X(&a, 0)[(c * H + h) * W + w];
                            s += v;
                            best = v > best ? v : best;
                        }
                    ref[(c * Ho + oh) * Wo + ow] =
                        at.pool == SS_POOL_MAX ? best : s / (double)(at.kernel[0] * at.kernel[1]);
                }
        expect_close(Y(&a, 0), ref, ny(&a, 0), 1e-5, "pool2d");
        check_grad(&a, "pool2d");
        free(ref);
        ss_kernel_release(&a, SS_BACKEND_CPU);
    }
}

/* ------------------------------------------------------ normalisations */

static void test_norms(void **state)
{
    (void)state;
    rng_state = 15;
    for (int rep = 0; rep < 4; rep++) {
        new_graph();
        int layer = rep < 2;
        int64_t xs[4] = {rnd(2, 4), rnd(1, 4), rnd(2, 4), rnd(2, 5)};
        int x = input("x", layer ? 3 : 4, xs, SS_F32);
        ss_op_attrs at = {0};
        int op = add("norm", layer ? SS_OP_LAYERNORM : SS_OP_BATCHNORM, &at, 1, &x);
        ss_kargs a;
        run(op, NULL, &a, 500 + rep);
        int64_t n = ny(&a, 0);
        double *ref = calloc((size_t)n, sizeof *ref);
        /* groups: layernorm rows of the last dim; batchnorm channels over N, H, W */
        int64_t G_ = layer ? n / xs[2] : xs[1];
        for (int64_t g = 0; g < G_; g++) {
            double s = 0, s2 = 0, m = 0;
            for (int64_t i = 0; i < n; i++) {
                int in_g = layer ? i / xs[2] == g : (i / (xs[2] * xs[3])) % xs[1] == g;
                if (in_g) {
                    s += X(&a, 0)[i];
                    m++;
                }
            }
            double mu = s / m;
            for (int64_t i = 0; i < n; i++) {
                int in_g = layer ? i / xs[2] == g : (i / (xs[2] * xs[3])) % xs[1] == g;
                if (in_g)
                    s2 += (X(&a, 0)[i] - mu) * (X(&a, 0)[i] - mu);
            }
            double r = 1 / sqrt(s2 / m + 1e-5);
            for (int64_t i = 0; i < n; i++) {
                int in_g = layer ? i / xs[2] == g : (i / (xs[2] * xs[3])) % xs[1] == g;
                int64_t p = layer ? i % xs[2] : g;
                if (in_g)
                    ref[i] = (X(&a, 0)[i] - mu) * r * X(&a, 1)[p] + X(&a, 2)[p];
            }
        }
        expect_close(Y(&a, 0), ref, n, 1e-4, layer ? "layernorm" : "batchnorm");
        check_grad(&a, layer ? "layernorm" : "batchnorm");
        free(ref);
        ss_kernel_release(&a, SS_BACKEND_CPU);
    }
}

/* ---------------------------------------------- elementwise and softmax */

static void test_elementwise(void **state)
{
    (void)state;
    rng_state = 16;
    for (int u = 0; u < 6; u++) {
        new_graph();
        int64_t xs[3] = {rnd(1, 4), rnd(1, 5), rnd(1, 6)};
        int in[2] = {input("x", 3, xs, SS_F32), input("z", 3, xs, SS_F32)};
        ss_op_attrs at = {0};
        int op;
        if (u < 4) {
            at.unary = (ss_unary_kind)u;
            op = add("un", SS_OP_UNARY, &at, 1, in);
        } else {
            at.binary = u == 4 ? SS_BINARY_ADD : SS_BINARY_MUL;
            op = add("bin", SS_OP_BINARY, &at, 2, in);
        }
        ss_kargs a;
        run(op, NULL, &a, 600 + u);
        int64_t n = ny(&a, 0);
        double *ref = calloc((size_t)n, sizeof *ref);
        for (int64_t i = 0; i < n; i++) {
            double x = X(&a, 0)[i];
            switch (u) {
            case 0: ref[i] = x > 0 ? x : 0; break;
            case 1: ref[i] = 0.5 * x * (1 + erf(x / sqrt(2.0))); break;
            case 2: ref[i] = tanh(x); break;
            case 3: ref[i] = 1 / (1 + exp(-x)); break;
            case 4: ref[i] = x + X(&a, 1)[i]; break;
            default: ref[i] = x * X(&a, 1)[i]; break;
            }
        }
        expect_close(Y(&a, 0), ref, n, 1e-5, "elementwise");
        check_grad(&a, "elementwise");
        free(ref);
        ss_kernel_release(&a, SS_BACKEND_CPU);
    }
}

static void test_softmax(void **state)
{
    (void)state;
    rng_state = 17;
    for (int ax = 0; ax < 3; ax++) {
        new_graph();
        int64_t xs[3] = {rnd(1, 4), rnd(2, 5), rnd(2, 6)};
        int x = input("x", 3, xs, SS_F32);
        ss_op_attrs at = {0};
        at.axis = ax == 2 ? -1 : ax;
        int op = add("sm", SS_OP_SOFTMAX, &at, 1, &x);
        ss_kargs a;
        run(op, NULL, &a, 700 + ax);
        int a3 = ax == 2 ? 2 : ax;
        int64_t n = ny(&a, 0), st = a3 == 2 ? 1 : a3 == 1 ? xs[2] : xs[1] * xs[2];
        double *ref = calloc((size_t)n, sizeof *ref);
        for (int64_t i = 0; i < n; i++) {
            int64_t pos = (i / st) % xs[a3], base = i - pos * st;
            double s = 0;
            for (int64_t l = 0; l < xs[a3]; l++)
                s += exp(X(&a, 0)[base + l * st]);
            ref[i] = exp(X(&a, 0)[i]) / s;
        }
        expect_close(Y(&a, 0), ref, n, 1e-5, "softmax");
        check_grad(&a, "softmax");
        free(ref);
        ss_kernel_release(&a, SS_BACKEND_CPU);
    }
}

static void test_dropout(void **state)
{
    (void)state;
    new_graph();
    int64_t xs[2] = {40, 50};
    int x = input("x", 2, xs, SS_F32);
    ss_op_attrs at = {0};
    at.rate = 0.25;
    int op = add("drop", SS_OP_DROPOUT, &at, 1, &x);
    ss_kargs a;
    run(op, NULL, &a, 800);
    int64_t zeros = 0;
    for (int64_t i = 0; i < 2000; i++) {
        float y = Y(&a, 0)[i], x0 = X(&a, 0)[i];
        if (y == 0)
            zeros++;
        else
            assert_true(fabsf(y - x0 / 0.75f) < 1e-6f);
    }
    assert_true(zeros > 400 && zeros < 600); /* about 25% of 2000 */
    rng_state = 18;
    check_grad(&a, "dropout");
    ss_kernel_release(&a, SS_BACKEND_CPU);
}

/* ---------------------------------------------------------- embedding */

static void test_embedding(void **state)
{
    (void)state;
    rng_state = 19;
    for (int rep = 0; rep < 2; rep++) {
        new_graph();
        int64_t xs[2] = {rnd(1, 4), rnd(1, 6)};
        int ids = input("ids", 2, xs, rep ? SS_I64 : SS_I32);
        ss_op_attrs at = {0};
        at.vocab = rnd(3, 12);
        at.dim = rnd(1, 8);
        at.dtype = SS_F32;
        int op = add("emb", SS_OP_EMBEDDING, &at, 1, &ids);
        ss_kargs a;
        run(op, NULL, &a, 900 + rep);
        int64_t rows = nx(&a, 0);
        double *ref = calloc((size_t)ny(&a, 0), sizeof *ref);
        for (int64_t r = 0; r < rows; r++) {
            int64_t id = rep ? ((int64_t *)a.x[0])[r] : ((int32_t *)a.x[0])[r];
            assert_true(id >= 0 && id < at.vocab);
            for (int64_t c = 0; c < at.dim; c++)
                ref[r * at.dim + c] = X(&a, 1)[id * at.dim + c];
        }
        expect_close(Y(&a, 0), ref, ny(&a, 0), 0, "embedding");
        check_grad(&a, "embedding");
        /* a vocabulary shard: its rows where the id falls in it, zeros elsewhere */
        ss_tile t;
        ss_op_full_tile(G, OP(op), &t);
        t.red = (ss_range){1, at.vocab};
        ss_kargs b;
        ss_diag d;
        ss_diag_init(&d);
        assert_int_equal(ss_kernel_setup(&b, SS_BACKEND_CPU, G, OP(op), &t, &d), SS_OK);
        assert_int_equal(ss_kernel_alloc(&b, SS_BACKEND_CPU, 0, 1, &d), SS_OK);
        memcpy(b.x[0], a.x[0], ss_kernel_x_bytes(&a, 0));
        memcpy(X(&b, 1), X(&a, 1) + at.dim, ss_kernel_x_bytes(&b, 1));
        ss_kernel_forward(SS_BACKEND_CPU, &b, &d);
        for (int64_t r = 0; r < rows; r++) {
            int64_t id = rep ? ((int64_t *)a.x[0])[r] : ((int32_t *)a.x[0])[r];
            for (int64_t c = 0; c < at.dim; c++)
                assert_true(Y(&b, 0)[r * at.dim + c] == (id ? Y(&a, 0)[r * at.dim + c] : 0.0f));
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
    rng_state = 20;
    /* concat of two along axis 1, then split it back, transpose, reshape */
    new_graph();
    int64_t as[3] = {2, 3, 4}, bs[3] = {2, 5, 4};
    int in[2] = {input("a", 3, as, SS_F32), input("b", 3, bs, SS_F32)};
    ss_op_attrs at = {0};
    at.axis = 1;
    int cat = add("cat", SS_OP_CONCAT, &at, 2, in);
    ss_kargs a;
    run(cat, NULL, &a, 1000);
    for (int64_t n = 0; n < 2; n++)
        for (int64_t c = 0; c < 8; c++)
            for (int64_t w = 0; w < 4; w++) {
                float want = c < 3 ? X(&a, 0)[(n * 3 + c) * 4 + w] : X(&a, 1)[(n * 5 + c - 3) * 4 + w];
                assert_true(Y(&a, 0)[(n * 8 + c) * 4 + w] == want);
            }
    check_grad(&a, "concat");
    ss_kernel_release(&a, SS_BACKEND_CPU);

    int cat_out = ss_graph_out(G, cat);
    ss_op_attrs sp = {0};
    sp.axis = -2;
    sp.n_split = 3;
    sp.split_sizes[0] = 2;
    sp.split_sizes[1] = 5;
    sp.split_sizes[2] = 1;
    int split = add("split", SS_OP_SPLIT, &sp, 1, &cat_out);
    run(split, NULL, &a, 1001);
    int64_t off[3] = {0, 2, 7};
    for (int k = 0; k < 3; k++)
        for (int64_t n = 0; n < 2; n++)
            for (int64_t c = 0; c < sp.split_sizes[k]; c++)
                for (int64_t w = 0; w < 4; w++)
                    assert_true(Y(&a, k)[(n * sp.split_sizes[k] + c) * 4 + w] ==
                                X(&a, 0)[(n * 8 + off[k] + c) * 4 + w]);
    check_grad(&a, "split");
    ss_kernel_release(&a, SS_BACKEND_CPU);

    ss_op_attrs tp = {0};
    tp.perm[0] = 2;
    tp.perm[1] = 0;
    tp.perm[2] = 1;
    int tr = add("tr", SS_OP_TRANSPOSE, &tp, 1, &cat_out);
    run(tr, NULL, &a, 1002);
    for (int64_t w = 0; w < 4; w++)
        for (int64_t n = 0; n < 2; n++)
            for (int64_t c = 0; c < 8; c++)
                assert_true(Y(&a, 0)[(w * 2 + n) * 8 + c] == X(&a, 0)[(n * 8 + c) * 4 + w]);
    check_grad(&a, "transpose");
    ss_kernel_release(&a, SS_BACKEND_CPU);

    ss_op_attrs rs = {0};
    rs.ndim = 2;
    rs.shape[0] = 16;
    rs.shape[1] = 4;
    int re = add("re", SS_OP_RESHAPE, &rs, 1, &cat_out);
    run(re, NULL, &a, 1003);
    assert_memory_equal(a.y[0], a.x[0], 64 * sizeof(float));
    check_grad(&a, "reshape");
    ss_kernel_release(&a, SS_BACKEND_CPU);
}

/* ---------------------------------------------------------------- lstm */

static double sg(double v) { return 1 / (1 + exp(-v)); }

static void test_lstm(void **state)
{
    (void)state;
    rng_state = 21;
    for (int rep = 0; rep < 3; rep++) {
        new_graph();
        int cell = rep == 2;
        int64_t N = rnd(1, 3), S = cell ? 1 : rnd(1, 4), IN = rnd(1, 4), H = rnd(1, 4);
        ss_op_attrs at = {0};
        at.hidden = H;
        at.lstm_mode = cell ? SS_LSTM_CELL : SS_LSTM_SEQUENCE;
        at.return_sequences = rep == 0;
        int op;
        if (cell) {
            int64_t xs[2] = {N, IN}, hs[2] = {N, H};
            int in[3] = {input("x", 2, xs, SS_F32), input("h", 2, hs, SS_F32),
                         input("c", 2, hs, SS_F32)};
            op = add("lstm", SS_OP_LSTM, &at, 3, in);
        } else {
            int64_t xs[3] = {N, S, IN};
            int x = input("x", 3, xs, SS_F32);
            op = add("lstm", SS_OP_LSTM, &at, 1, &x);
        }
        ss_kargs a;
        run(op, NULL, &a, 1100 + rep);
        int wi = cell ? 3 : 1;
        const float *W = X(&a, wi), *b = X(&a, wi + 1);
        double *h = calloc((size_t)(N * H), sizeof *h), *c = calloc((size_t)(N * H), sizeof *c);
        double *hn = calloc((size_t)(N * H), sizeof *hn);
        if (cell)
            for (int64_t i = 0; i < N * H; i++) {
                h[i] = X(&a, 1)[i];
                c[i] = X(&a, 2)[i];
            }
        for (int64_t t = 0; t < S; t++) {
            for (int64_t n = 0; n < N; n++)
                for (int64_t j = 0; j < H; j++) {
                    double g4[4];
                    for (int q = 0; q < 4; q++) {
                        double s = b[q * H + j];
                        for (int64_t k = 0; k < IN; k++)
                            s += (double)X(&a, 0)[(n * S + t) * IN + k] * W[k * 4 * H + q * H + j];
                        for (int64_t k = 0; k < H; k++)
                            s += h[n * H + k] * W[(IN + k) * 4 * H + q * H + j];
                        g4[q] = s;
                    }
                    double cn = sg(g4[1]) * c[n * H + j] + sg(g4[0]) * tanh(g4[2]);
                    c[n * H + j] = cn;
                    hn[n * H + j] = sg(g4[3]) * tanh(cn);
                    if (at.return_sequences)
                        assert_true(fabs(Y(&a, 0)[(n * S + t) * H + j] - hn[n * H + j]) < 1e-4);
                }
            memcpy(h, hn, (size_t)(N * H) * sizeof *h);
        }
        if (!at.return_sequences)
            expect_close(Y(&a, 0), h, N * H, 1e-4, "lstm h");
        if (cell)
            expect_close(Y(&a, 1), c, N * H, 1e-4, "lstm c");
        check_grad(&a, "lstm");
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
    rng_state = 22;
    for (int rep = 0; rep < 3; rep++) {
        new_graph();
        int64_t heads = rnd(1, 3), dh = rnd(1, 3), E = heads * dh, N = rnd(1, 2), S = rnd(2, 5);
        int64_t xs[3] = {N, S, E};
        int q = input("q", 3, xs, SS_F32), kv = input("kv", 3, xs, SS_F32);
        int in[3] = {q, kv, kv};
        ss_op_attrs at = {0};
        at.heads = heads;
        at.causal = rep != 0;
        at.use_bias = rep != 2;
        int op = add("attn", SS_OP_ATTENTION, &at, 3, in);
        ss_kargs a;
        run(op, NULL, &a, 1200 + rep);
        const float *Wq = X(&a, 3), *Wk = X(&a, 4), *Wv = X(&a, 5), *Wo = X(&a, 6);
        double *ctx = calloc((size_t)(N * S * E), sizeof *ctx), *ref = calloc((size_t)(N * S * E), sizeof *ref);
        for (int64_t n = 0; n < N; n++)
            for (int64_t hd = 0; hd < heads; hd++)
                for (int64_t i = 0; i < S; i++) {
                    double sc[8], mx = -INFINITY, sum = 0;
                    for (int64_t j = 0; j < S; j++) {
                        double dot = 0;
                        for (int64_t d = 0; d < dh; d++) {
                            int64_t col = hd * dh + d;
                            double qv = at.use_bias ? X(&a, 7)[col] : 0, kvv = at.use_bias ? X(&a, 8)[col] : 0;
                            for (int64_t e = 0; e < E; e++) {
                                qv += (double)X(&a, 0)[(n * S + i) * E + e] * Wq[e * E + col];
                                kvv += (double)X(&a, 1)[(n * S + j) * E + e] * Wk[e * E + col];
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
                            double vv = at.use_bias ? X(&a, 9)[col] : 0;
                            for (int64_t e = 0; e < E; e++)
                                vv += (double)X(&a, 2)[(n * S + j) * E + e] * Wv[e * E + col];
                            s += sc[j] / sum * vv;
                        }
                        ctx[(n * S + i) * E + col] = s;
                    }
                }
        for (int64_t r = 0; r < N * S; r++)
            for (int64_t o = 0; o < E; o++) {
                double s = at.use_bias ? X(&a, 10)[o] : 0;
                for (int64_t e = 0; e < E; e++)
                    s += ctx[r * E + e] * Wo[e * E + o];
                ref[r * E + o] = s;
            }
        expect_close(Y(&a, 0), ref, N * S * E, 1e-4, "attention");
        check_grad(&a, "attention");
        /* causal: the later query rows as a tile give the same rows */
        if (at.causal) {
            ss_tile t;
            ss_op_full_tile(G, OP(op), &t);
            t.out.r[1].lo = S / 2;
            ss_kargs b;
            ss_diag d;
            ss_diag_init(&d);
            assert_int_equal(ss_kernel_setup(&b, SS_BACKEND_CPU, G, OP(op), &t, &d), SS_OK);
            assert_int_equal(ss_kernel_alloc(&b, SS_BACKEND_CPU, 0, 1, &d), SS_OK);
            int64_t sq = S - S / 2;
            for (int64_t n = 0; n < N; n++)
                memcpy(X(&b, 0) + n * sq * E, X(&a, 0) + (n * S + S / 2) * E,
                       (size_t)(sq * E) * sizeof(float));
            for (int i = 1; i < b.n_x; i++)
                memcpy(b.x[i], a.x[i], ss_kernel_x_bytes(&b, i));
            ss_kernel_forward(SS_BACKEND_CPU, &b, &d);
            for (int64_t n = 0; n < N; n++)
                for (int64_t r = 0; r < sq * E; r++)
                    assert_true(fabs(Y(&b, 0)[n * sq * E + r] - ref[(n * S + S / 2) * E + r]) < 1e-4);
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
    rng_state = 23;
    new_graph();
    int64_t xs[3] = {2, 3, 7}, ls[2] = {2, 3};
    int in[2] = {input("logits", 3, xs, SS_F32), input("labels", 2, ls, SS_I32)};
    ss_op_attrs at = {0};
    int op = add("loss", SS_OP_SOFTMAX_CE, &at, 2, in);
    ss_kargs a;
    run(op, NULL, &a, 1300);
    double ref[6];
    for (int r = 0; r < 6; r++) {
        double s = 0;
        for (int v = 0; v < 7; v++)
            s += exp(X(&a, 0)[r * 7 + v]);
        int lab = ((int32_t *)a.x[1])[r];
        assert_true(lab >= 0 && lab < 7);
        ref[r] = log(s) - X(&a, 0)[r * 7 + lab];
    }
    expect_close(Y(&a, 0), ref, 6, 1e-5, "softmax_ce");
    check_grad(&a, "softmax_ce");
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
    new_graph();
    int64_t xs[2] = {4, 8};
    int x = input("x", 2, xs, SS_BF16);
    ss_op_attrs at = {0};
    at.out_features = 4;
    int op = add("fc", SS_OP_LINEAR, &at, 1, &x);
    ss_tile t;
    ss_op_full_tile(G, OP(op), &t);
    ss_kargs a;
    ss_diag d;
    ss_diag_init(&d);
    assert_int_equal(ss_kernel_setup(&a, SS_BACKEND_CPU, G, OP(op), &t, &d), SS_ERR_UNSUPPORTED);
    assert_non_null(strstr(d.msg, "bf16"));
    new_graph();
    int64_t ls[3] = {2, 3, 4};
    x = input("x", 3, ls, SS_F32);
    ss_op_attrs la = {0};
    la.hidden = 6;
    op = add("lstm", SS_OP_LSTM, &la, 1, &x);
    ss_op_full_tile(G, OP(op), &t);
    t.out.r[1].hi = 3;
    ss_diag_init(&d);
    assert_int_equal(ss_kernel_setup(&a, SS_BACKEND_CPU, G, OP(op), &t, &d), SS_ERR_UNSUPPORTED);
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
    /* A test binary linked with COIN-OR CLP (search/averaging.c, ilp.c: the
     * ASan build keeps every library it names) maps LAPACK, whose BLAS may
     * be OpenBLAS, at start-up: then only our own opening is checked. */
    if (before > 0 && lib_mapped("liblapack") > 0)
        print_message("OpenBLAS mapped at start by LAPACK (COIN-OR CLP's dependency): "
                      "the /proc/self/maps check is skipped\n");
    else if (before >= 0)
        assert_int_equal(before, 0);
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
        cmocka_unit_test_teardown(test_linear, teardown),
        cmocka_unit_test_teardown(test_batch_matmul, teardown),
        cmocka_unit_test_teardown(test_conv2d, teardown),
        cmocka_unit_test_teardown(test_pool2d, teardown),
        cmocka_unit_test_teardown(test_norms, teardown),
        cmocka_unit_test_teardown(test_elementwise, teardown),
        cmocka_unit_test_teardown(test_softmax, teardown),
        cmocka_unit_test_teardown(test_dropout, teardown),
        cmocka_unit_test_teardown(test_embedding, teardown),
        cmocka_unit_test_teardown(test_movers, teardown),
        cmocka_unit_test_teardown(test_lstm, teardown),
        cmocka_unit_test_teardown(test_attention, teardown),
        cmocka_unit_test_teardown(test_softmax_ce, teardown),
        cmocka_unit_test_teardown(test_table, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
