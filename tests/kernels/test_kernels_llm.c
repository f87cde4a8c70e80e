/*
 * test_kernels_llm.c — the CPU kernels of kernels/cpu_llm.c (rmsnorm,
 * rotary, moe_dispatch, expert_linear, moe_combine) and the unary silu and
 * relu2: forward against naive references written here, backward against
 * central finite differences, and tiles composing to the whole op (rotary's
 * positions are global; dispatch and combine tiles hold their token boxes),
 * plus the balanced routing itself: every token lands in exactly topk
 * distinct experts and padding slots are zero.
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


static void test_rmsnorm_and_unary(void **state)
{
    (void)state;
    rng_state = 31;
    new_graph();
    int64_t xs[3] = {2, 3, 5};
    int x = input("x", 3, xs, SS_F32);
    ss_op_attrs at = {0};
    int op = add("rms", SS_OP_RMSNORM, &at, 1, &x);
    assert_int_equal(OP(op)->n_w, 1); /* gamma only */
    ss_kargs a;
    run(op, NULL, &a, 700);
    double ref[30];
    for (int r = 0; r < 6; r++) {
        double s = 0;
        for (int i = 0; i < 5; i++)
            s += (double)X(&a, 0)[r * 5 + i] * X(&a, 0)[r * 5 + i];
        double q = 1 / sqrt(s / 5 + 1e-5);
        for (int i = 0; i < 5; i++)
            ref[r * 5 + i] = X(&a, 0)[r * 5 + i] * q * X(&a, 1)[i];
    }
    expect_close(Y(&a, 0), ref, 30, 1e-5, "rmsnorm");
    check_grad(&a, "rmsnorm");
    ss_kernel_release(&a, SS_BACKEND_CPU);
    for (int u = SS_UNARY_SILU; u <= SS_UNARY_RELU2; u++) {
        new_graph();
        x = input("x", 3, xs, SS_F32);
        ss_op_attrs ua = {0};
        ua.unary = (ss_unary_kind)u;
        op = add("un", SS_OP_UNARY, &ua, 1, &x);
        run(op, NULL, &a, 710 + (uint64_t)u);
        for (int i = 0; i < 30; i++) {
            double v = X(&a, 0)[i];
            ref[i] = u == SS_UNARY_SILU ? v / (1 + exp(-v)) : (v > 0 ? v * v : 0);
        }
        expect_close(Y(&a, 0), ref, 30, 1e-5, u == SS_UNARY_SILU ? "silu" : "relu2");
        check_grad(&a, "unary");
        ss_kernel_release(&a, SS_BACKEND_CPU);
    }
}

/* Rotate-half RoPE at global positions; a tile of positions [2, 5) gives
 * the whole op's rows. */
static void test_rotary(void **state)
{
    (void)state;
    rng_state = 32;
    new_graph();
    enum { N = 2, S = 5, H = 3, D = 4 };
    int64_t xs[4] = {N, S, H, D};
    int x = input("x", 4, xs, SS_F32);
    ss_op_attrs at = {0};
    at.dim = D;
    int op = add("rope", SS_OP_ROTARY, &at, 1, &x);
    ss_kargs a;
    run(op, NULL, &a, 720);
    static double ref[N * S * H * D];
    for (int n = 0; n < N; n++)
        for (int s = 0; s < S; s++)
            for (int h = 0; h < H; h++)
                for (int i = 0; i < D / 2; i++) {
                    int k = ((n * S + s) * H + h) * D;
                    double th = s * pow(10000.0, -2.0 * i / D);
                    double x1 = X(&a, 0)[k + i], x2 = X(&a, 0)[k + i + D / 2];
                    ref[k + i] = x1 * cos(th) - x2 * sin(th);
                    ref[k + i + D / 2] = x2 * cos(th) + x1 * sin(th);
                }
    expect_close(Y(&a, 0), ref, N * S * H * D, 1e-5, "rotary");
    check_grad(&a, "rotary");
    ss_tile t;
    ss_op_full_tile(G, OP(op), &t);
    t.out.r[1] = (ss_range){2, 5};
    t.out.r[0] = (ss_range){1, 2};
    ss_kargs b;
    run(op, &t, &b, 720); /* same seed: the tile's x is a fresh draw, so compare via ref */
    double rt[3 * H * D];
    for (int s = 2; s < 5; s++)
        for (int h = 0; h < H; h++)
            for (int i = 0; i < D / 2; i++) {
                int k = ((s - 2) * H + h) * D;
                double th = s * pow(10000.0, -2.0 * i / D);
                double x1 = X(&b, 0)[k + i], x2 = X(&b, 0)[k + i + D / 2];
                rt[k + i] = x1 * cos(th) - x2 * sin(th);
                rt[k + i + D / 2] = x2 * cos(th) + x1 * sin(th);
            }
    expect_close(Y(&b, 0), rt, 3 * H * D, 1e-5, "rotary tile");
    ss_kernel_release(&a, SS_BACKEND_CPU);
    ss_kernel_release(&b, SS_BACKEND_CPU);
}

/* x [2, 4, 3] over 4 experts, top-2: groups of g = 2 tokens, 4 groups. */
static void moe_graph(double capacity, int *disp, int *lin, int *comb)
{
    new_graph();
    int64_t xs[3] = {2, 4, 3}, ps[3] = {2, 4, 4};
    int x = input("x", 3, xs, SS_F32), p = input("p", 3, ps, SS_F32);
    ss_op_attrs at = {0};
    at.topk = 2;
    at.capacity = capacity;
    int in[2] = {x, p};
    *disp = add("dispatch", SS_OP_MOE_DISPATCH, &at, 2, in);
    ss_op_attrs la = {0};
    la.out_features = 3;
    la.use_bias = 1;
    la.topk = 2;
    int sl = ss_graph_out(G, *disp);
    *lin = add("experts", SS_OP_EXPERT_LINEAR, &la, 1, &sl);
    in[0] = ss_graph_out(G, *lin);
    in[1] = p;
    *comb = add("combine", SS_OP_MOE_COMBINE, &at, 2, in);
}

static void test_moe(void **state)
{
    (void)state;
    rng_state = 33;
    int disp, lin, comb;
    moe_graph(0, &disp, &lin, &comb);
    const ss_tensor *slots = ss_graph_tensor(G, ss_graph_out(G, disp));
    assert_int_equal(slots->shape[0], 4);
    assert_int_equal(slots->shape[1], 4); /* 8 tokens x 2 / 4 experts */
    /* dispatch: slot (e, c) holds token c * 2 + e mod 2 */
    ss_kargs a;
    run(disp, NULL, &a, 730);
    for (int e = 0; e < 4; e++)
        for (int c = 0; c < 4; c++)
            for (int i = 0; i < 3; i++)
                assert_true(Y(&a, 0)[(e * 4 + c) * 3 + i] == X(&a, 0)[(c * 2 + e % 2) * 3 + i]);
    check_grad(&a, "moe_dispatch");
    ss_kernel_release(&a, SS_BACKEND_CPU);
    /* expert_linear: one GEMM per expert, plus its bias */
    run(lin, NULL, &a, 731);
    double ref[48];
    for (int e = 0; e < 4; e++)
        for (int c = 0; c < 4; c++)
            for (int o = 0; o < 3; o++) {
                double s = X(&a, 2)[e * 3 + o];
                for (int k = 0; k < 3; k++)
                    s += (double)X(&a, 0)[(e * 4 + c) * 3 + k] * X(&a, 1)[(e * 3 + k) * 3 + o];
                ref[(e * 4 + c) * 3 + o] = s;
            }
    expect_close(Y(&a, 0), ref, 48, 1e-5, "expert_linear");
    check_grad(&a, "expert_linear");
    ss_kernel_release(&a, SS_BACKEND_CPU);
    /* combine: token t sums p[t, e] * slots[e, t / 2] over its experts e = t mod 2 + 2j */
    run(comb, NULL, &a, 732);
    double out[24];
    for (int t = 0; t < 8; t++)
        for (int i = 0; i < 3; i++) {
            double s = 0;
            for (int j = 0; j < 2; j++) {
                int e = t % 2 + 2 * j;
                s += (double)X(&a, 1)[t * 4 + e] * X(&a, 0)[(e * 4 + t / 2) * 3 + i];
            }
            out[t * 3 + i] = s;
        }
    expect_close(Y(&a, 0), out, 24, 1e-5, "moe_combine");
    check_grad(&a, "moe_combine");
    /* a tile of sample 1 reads slots [2, 4) and gives the whole op's rows */
    ss_tile t;
    ss_op_full_tile(G, OP(comb), &t);
    t.out.r[0] = (ss_range){1, 2};
    ss_kargs b;
    ss_diag d;
    ss_diag_init(&d);
    assert_int_equal(ss_kernel_setup(&b, SS_BACKEND_CPU, G, OP(comb), &t, &d), SS_OK);
    assert_int_equal(b.xr[0].r[1].lo, 2);
    assert_int_equal(b.xr[0].r[1].hi, 4);
    assert_int_equal(ss_kernel_alloc(&b, SS_BACKEND_CPU, 0, 9, &d), SS_OK);
    for (int e = 0; e < 4; e++)
        for (int c = 2; c < 4; c++)
            memcpy((float *)b.x[0] + (e * 2 + c - 2) * 3, X(&a, 0) + (e * 4 + c) * 3,
                   3 * sizeof(float));
    memcpy(b.x[1], X(&a, 1) + 16, 16 * sizeof(float));
    assert_int_equal(ss_kernel_forward(SS_BACKEND_CPU, &b, &d), SS_OK);
    expect_close(Y(&b, 0), out + 12, 12, 1e-5, "moe_combine tile");
    ss_kernel_release(&b, SS_BACKEND_CPU);
    ss_kernel_release(&a, SS_BACKEND_CPU);
}

/* Capacity factor 1.5: 6 slots per expert; every token is in exactly two
 * distinct experts, the two padding slots of each expert are zero. */
static void test_moe_capacity(void **state)
{
    (void)state;
    rng_state = 34;
    int disp, lin, comb;
    moe_graph(1.5, &disp, &lin, &comb);
    assert_int_equal(ss_graph_tensor(G, ss_graph_out(G, disp))->shape[1], 6);
    ss_kargs a;
    run(disp, NULL, &a, 740);
    int seen[8] = {0}, zero = 0;
    for (int e = 0; e < 4; e++)
        for (int c = 0; c < 6; c++) {
            const float *s = Y(&a, 0) + (e * 6 + c) * 3;
            int hit = -1;
            for (int t = 0; t < 8; t++)
                if (!memcmp(s, X(&a, 0) + t * 3, 3 * sizeof(float)))
                    hit = t;
            if (hit >= 0) {
                seen[hit]++;
                assert_int_equal(hit % 2, e % 2);
            } else {
                assert_true(s[0] == 0 && s[1] == 0 && s[2] == 0);
                zero++;
            }
        }
    for (int t = 0; t < 8; t++)
        assert_int_equal(seen[t], 2);
    assert_int_equal(zero, 4 * 2);
    check_grad(&a, "moe_dispatch capacity");
    ss_kernel_release(&a, SS_BACKEND_CPU);
    run(comb, NULL, &a, 741);
    check_grad(&a, "moe_combine capacity");
    ss_kernel_release(&a, SS_BACKEND_CPU);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_rmsnorm_and_unary, teardown),
        cmocka_unit_test_teardown(test_rotary, teardown),
        cmocka_unit_test_teardown(test_moe, teardown),
        cmocka_unit_test_teardown(test_moe_capacity, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
