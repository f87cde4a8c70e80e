/*
 * test_cost.c — the analytic roofline (profiler/analytic.c) checked by hand
 * on a toy device (10 TFLOP/s f32, 40 bf16, 500 GB/s, 5 us launch, flat
 * efficiencies 0.5 compute / 0.8 memory; the launch overhead is a floor per
 * kernel, max(k * launch, roofline time); tensor-core alignment factors),
 * and the cost model
 * (profiler/cost.c): provider order and fallback, the cache, update costs.
 */
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *TOY =
    "{\"format\": \"simsearch-topology\", \"version\": 1, \"name\": \"toy2\","
    " \"device_types\": [{\"name\": \"toy\", \"peak_tflops\": {\"f32\": 10, \"bf16\": 40},"
    "   \"mem_gbps\": 500, \"mem_gib\": 16, \"launch_us\": 5,"
    "   \"eff_flops\": [[1e6, 0.5]], \"eff_mem\": [[1e3, 0.8]]}],"
    " \"compact\": {\"nodes\": 1, \"devices_per_node\": 2, \"device_type\": \"toy\","
    " \"intra\": {\"kind\": \"nvlink\", \"topology\": \"all-to-all\", \"gbps\": 20, \"latency_us\": 1},"
    " \"inter\": {\"kind\": \"infiniband\", \"gbps\": 12.5, \"latency_us\": 1, \"nics_per_node\": 1}}}";

typedef struct fixture {
    ss_machine *m;
    const ss_device_type *dt;
    ss_graph *g;
    int gemm, gemm16, relu_big, relu_tiny, relu_tiny2, reshape, mid;
} fixture;

static int input(ss_graph *g, const char *name, int64_t a, int64_t b, ss_dtype t)
{
    ss_op_attrs at = {0};
    at.ndim = 2;
    at.shape[0] = a;
    at.shape[1] = b;
    at.kind[0] = SS_DIM_SAMPLE;
    at.kind[1] = SS_DIM_PARAMETER;
    at.dtype = t;
    ss_diag d;
    ss_diag_init(&d);
    int op = ss_graph_add(g, name, SS_OP_INPUT, &at, 0, NULL, &d);
    assert_true(op >= 0);
    return ss_graph_out(g, op);
}

static int add(ss_graph *g, const char *name, ss_op_type type, const ss_op_attrs *a, int x)
{
    ss_diag d;
    ss_diag_init(&d);
    int op = ss_graph_add(g, name, type, a, 1, &x, &d);
    if (op < 0)
        fail_msg("%s", d.msg);
    return op;
}

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    ss_diag d;
    ss_diag_init(&d);
    if (ss_machine_load_string(TOY, "toy2", &f->m, &d))
        fail_msg("%s", d.msg);
    f->dt = ss_machine_type(f->m, 0);
    f->g = ss_graph_new("costs");
    ss_op_attrs lin = {0};
    lin.out_features = 4096;
    f->gemm = add(f->g, "gemm", SS_OP_LINEAR, &lin, input(f->g, "x", 1024, 4096, SS_F32));
    f->gemm16 = add(f->g, "gemm16", SS_OP_LINEAR, &lin, input(f->g, "x16", 1024, 4096, SS_BF16));
    ss_op_attrs none = {0};
    f->relu_big = add(f->g, "relu_big", SS_OP_UNARY, &none, input(f->g, "y", 4096, 4096, SS_F32));
    int tiny = input(f->g, "t", 4, 4, SS_F32);
    f->relu_tiny = add(f->g, "relu_tiny", SS_OP_UNARY, &none, tiny);
    f->relu_tiny2 = add(f->g, "relu_tiny2", SS_OP_UNARY, &none, input(f->g, "t2", 4, 4, SS_F32));
    ss_op_attrs rs = {0};
    rs.ndim = 1;
    rs.shape[0] = 16;
    f->reshape = add(f->g, "flat", SS_OP_RESHAPE, &rs, tiny);
    lin.out_features = 1000;
    f->mid = add(f->g, "mid", SS_OP_LINEAR, &lin, input(f->g, "z", 100, 500, SS_F32));
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    ss_graph_free(f->g);
    ss_machine_free(f->m);
    free(f);
    ss_test_fail_after(-1);
    return 0;
}

static void cost_of(fixture *f, const ss_device_type *dt, int op, ss_cost *c)
{
    ss_tile t;
    const ss_op *o = ss_graph_op(f->g, op);
    ss_op_full_tile(f->g, o, &t);
    ss_cost_analytic(dt, f->g, o, &t, c);
}

#define NEAR(a, b) assert_true(fabs((double)(a) - (double)(b)) <= 1e-9 * fabs((double)(b)) + 1e-9)

/* Compute bound: 2*1024*4096*4096 FLOPs at 10 TFLOP/s x 0.5; bytes
 * (x 16 MiB + W 64 MiB + y 16 MiB = 100663296) at 500 GB/s x 0.8 take only
 * 251.7 us. Backward: twice the FLOPs in 2 kernels; both far above the
 * launch floor (5 us per kernel), which therefore adds nothing. */
static void test_gemm_compute_bound(void **state)
{
    fixture *f = *state;
    ss_cost c;
    cost_of(f, f->dt, f->gemm, &c);
    double flops = 2.0 * 1024 * 4096 * 4096;
    assert_true(c.work.fwd_flops == flops);
    assert_true(c.work.fwd_bytes == 100663296.0);
    NEAR(c.fwd_us, flops / (10e12 * 0.5) * 1e6); /* 6871.95 us */
    NEAR(c.bwd_us, 2 * flops / (10e12 * 0.5) * 1e6);
    assert_int_equal(c.source, SS_COST_ANALYTIC);
    /* bf16 uses its own peak (40): 4x faster compute; bytes halve */
    cost_of(f, f->dt, f->gemm16, &c);
    NEAR(c.fwd_us, flops / (40e12 * 0.5) * 1e6);
    /* a type without a bf16 rate falls back to f32's */
    ss_device_type no16 = *f->dt;
    no16.peak_tflops[SS_BF16] = 0;
    cost_of(f, &no16, f->gemm16, &c);
    NEAR(c.fwd_us, flops / (10e12 * 0.5) * 1e6);
}

/* Memory bound: relu over 4096x4096 f32 reads and writes 64 MiB each:
 * 134217728 B / (500 GB/s x 0.8) = 335.54432 us, vs 16.8 MFLOP / 5 TFLOP/s
 * = 3.4 us. Backward moves twice the bytes, one kernel (no weights). Both
 * exceed the 5 us launch floor. */
static void test_elementwise_memory_bound(void **state)
{
    fixture *f = *state;
    ss_cost c;
    cost_of(f, f->dt, f->relu_big, &c);
    assert_true(c.work.fwd_bytes == 134217728.0);
    NEAR(c.fwd_us, 335.54432);
    NEAR(c.bwd_us, 2 * 335.54432);
}

/* Launch bound: a 4x4 relu (128 B, 16 FLOPs: 0.00032 us of memory time)
 * takes the launch floor, exactly 5 us forward and 5 us backward (one
 * kernel each). A reshape is a view: no kernel, 0 us. */
static void test_tiny_and_view(void **state)
{
    fixture *f = *state;
    ss_cost c;
    cost_of(f, f->dt, f->relu_tiny, &c);
    NEAR(c.fwd_us, 5);
    NEAR(c.bwd_us, 5);
    cost_of(f, f->dt, f->reshape, &c);
    assert_true(c.fwd_us == 0 && c.bwd_us == 0);
    /* A 4x4 transpose is a copy kernel (the 5 us floor), unless it is a
     * strided view (attrs.view): then no kernel, 0 us. The same for split. */
    ss_op_attrs tr = {0};
    tr.perm[0] = 1;
    tr.perm[1] = 0;
    int x = input(f->g, "tv", 4, 4, SS_F32);
    int copy = add(f->g, "t_copy", SS_OP_TRANSPOSE, &tr, x);
    tr.view = 1;
    int view = add(f->g, "t_view", SS_OP_TRANSPOSE, &tr, x);
    cost_of(f, f->dt, copy, &c);
    NEAR(c.fwd_us, 5);
    NEAR(c.bwd_us, 5);
    cost_of(f, f->dt, view, &c);
    assert_true(c.fwd_us == 0 && c.bwd_us == 0);
    ss_op_attrs sp = {0};
    sp.axis = 1;
    sp.n_split = 2;
    sp.split_sizes[0] = sp.split_sizes[1] = 2;
    sp.view = 1;
    cost_of(f, f->dt, add(f->g, "s_view", SS_OP_SPLIT, &sp, x), &c);
    assert_true(c.fwd_us == 0 && c.bwd_us == 0);
    sp.view = 0;
    cost_of(f, f->dt, add(f->g, "s_copy", SS_OP_SPLIT, &sp, x), &c);
    NEAR(c.fwd_us, 5);
}

/* Efficiency is read at the per-kernel size, log-linearly: with points
 * (1e6, 0.1) and (1e10, 0.5), a 1e8-FLOP kernel gets 0.3. The 100x500x1000
 * GEMM does 1e8 FLOPs forward (33.33 us at 10 TFLOP/s x 0.3; its 2.6 MB take
 * 6.5 us) and 2e8 backward in two 1e8 kernels (66.67 us); both above the
 * launch floors (5 and 10 us). With a 40 us launch the forward is floored
 * at 40 us and the backward at 2 x 40 = 80 us. */
static void test_efficiency_per_kernel(void **state)
{
    fixture *f = *state;
    ss_device_type dt = *f->dt;
    dt.n_eff_flops = 2;
    dt.eff_flops_x[0] = 1e6;
    dt.eff_flops_y[0] = 0.1;
    dt.eff_flops_x[1] = 1e10;
    dt.eff_flops_y[1] = 0.5;
    ss_cost c;
    cost_of(f, &dt, f->mid, &c);
    assert_true(c.work.fwd_flops == 1e8);
    NEAR(c.fwd_us, 1e8 / (10e12 * 0.3) * 1e6);
    NEAR(c.bwd_us, 2e8 / (10e12 * 0.3) * 1e6);
    dt.launch_us = 40;
    cost_of(f, &dt, f->mid, &c);
    NEAR(c.fwd_us, 40);
    NEAR(c.bwd_us, 80);
}

/* Tensor-core alignment: a bf16 x[1024, K] . W -> [1024, N] linear's compute
 * efficiency is multiplied by eff_align[0] / [1] / [2] when K and N share
 * only 8 / 4 / <= 2 bytes of power-of-two factor (4 / 2 / 1 bf16 elements).
 * Factors 0.5, 0.4, 0.25 on the toy device (bf16 40 TFLOP/s x 0.5); every
 * case below is compute bound (>= 1.7 ms of compute vs <= 0.26 ms of memory).
 *   K 4096, N 4104 = 8 * 513: 16 bytes, no penalty;
 *   N 4100 = 4 * 1025: 8 bytes, x 0.5;  N 4098 = 2 * 2049: 4 bytes, x 0.4;
 *   N 4097 (odd): 2 bytes, x 0.25;  K 4098, N 4096: 4 bytes, x 0.4;
 *   the N 4104 op's half tile (2052 = 4 * 513 columns): 8 bytes, x 0.5;
 *   f32 (no tensor cores) with N 4097, and factors left at 0: no penalty. */
static void test_tensor_core_alignment(void **state)
{
    fixture *f = *state;
    ss_device_type dt = *f->dt;
    dt.eff_align[0] = 0.5;
    dt.eff_align[1] = 0.4;
    dt.eff_align[2] = 0.25;
    static const struct { int64_t k, n; ss_dtype t; double fac; } cases[] = {
        {4096, 4104, SS_BF16, 1.0}, {4096, 4100, SS_BF16, 0.5}, {4096, 4098, SS_BF16, 0.4},
        {4096, 4097, SS_BF16, 0.25}, {4098, 4096, SS_BF16, 0.4}, {4096, 4097, SS_F32, 1.0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ss_op_attrs lin = {0};
        lin.out_features = cases[i].n;
        char name[32];
        snprintf(name, sizeof name, "al%zu", i);
        int x = input(f->g, name, 1024, cases[i].k, cases[i].t);
        snprintf(name, sizeof name, "lin%zu", i);
        int op = add(f->g, name, SS_OP_LINEAR, &lin, x);
        ss_cost c;
        cost_of(f, &dt, op, &c);
        double flops = 2.0 * 1024 * (double)cases[i].k * (double)cases[i].n;
        double peak = cases[i].t == SS_BF16 ? 40e12 : 10e12;
        NEAR(c.fwd_us, flops / (peak * 0.5 * cases[i].fac) * 1e6);
        NEAR(c.bwd_us, 2 * flops / (peak * 0.5 * cases[i].fac) * 1e6);
        if (i == 0) {
            /* half of its output columns: 2052 = 4 * 513 */
            const ss_op *o = ss_graph_op(f->g, op);
            ss_tile t;
            ss_op_full_tile(f->g, o, &t);
            t.out.r[1].hi = 2052;
            ss_cost_analytic(&dt, f->g, o, &t, &c);
            NEAR(c.fwd_us, flops / 2 / (40e12 * 0.5 * 0.5) * 1e6);
            /* factors unset (0) read as 1 */
            ss_device_type z = dt;
            memset(z.eff_align, 0, sizeof z.eff_align);
            ss_cost_analytic(&z, f->g, o, &t, &c);
            NEAR(c.fwd_us, flops / 2 / (40e12 * 0.5) * 1e6);
        }
    }
}

/* ---------------------------------------------------------- cost model */

typedef struct prov_ctx {
    int calls;
    int answer; /* 0: decline */
    double fwd;
} prov_ctx;

static int lookup(void *ctx, const ss_graph *g, const ss_op *op, const ss_tile *t,
                  const ss_device_type *dt, ss_cost *out)
{
    (void)g;
    (void)op;
    (void)t;
    (void)dt;
    prov_ctx *p = ctx;
    p->calls++;
    if (!p->answer)
        return 0;
    out->fwd_us = p->fwd;
    out->bwd_us = 2 * p->fwd;
    out->source = SS_COST_PROFILE;
    return 1;
}

static void tile_cost(fixture *f, ss_costmodel *cm, int op, int index_deg, ss_cost *c)
{
    const ss_op *o = ss_graph_op(f->g, op);
    ss_tile t;
    ss_op_full_tile(f->g, o, &t);
    if (index_deg > 1)
        t.out.r[0].hi = t.out.r[0].lo + (t.out.r[0].hi - t.out.r[0].lo) / index_deg;
    assert_int_equal(ss_cost_tile(cm, f->g, o, &t, 0, c), SS_OK);
}

static void test_provider_order_and_fallback(void **state)
{
    fixture *f = *state;
    ss_diag d;
    ss_diag_init(&d);
    ss_costmodel *cm = ss_cost_new(f->m);
    prov_ctx a = {0, 0, 0}, b = {0, 1, 7.0}, c2 = {0, 1, 9.0};
    ss_cost_provider pa = {"declines", &a, lookup}, pb = {"profile", &b, lookup},
                     pc = {"later", &c2, lookup};
    assert_int_equal(ss_cost_add_provider(cm, &pa, &d), SS_OK);
    ss_cost c;
    /* only a declining provider: the analytic model answers */
    tile_cost(f, cm, f->gemm, 1, &c);
    ss_cost ref;
    cost_of(f, f->dt, f->gemm, &ref);
    assert_int_equal(c.source, SS_COST_ANALYTIC);
    assert_true(c.fwd_us == ref.fwd_us && c.bwd_us == ref.bwd_us);
    assert_int_equal(a.calls, 1);
    /* the first provider that answers wins; later ones are not asked */
    assert_int_equal(ss_cost_add_provider(cm, &pb, &d), SS_OK);
    assert_int_equal(ss_cost_add_provider(cm, &pc, &d), SS_OK);
    tile_cost(f, cm, f->gemm, 1, &c);
    assert_int_equal(c.source, SS_COST_PROFILE);
    assert_true(c.fwd_us == 7.0 && c.bwd_us == 14.0);
    assert_int_equal(a.calls, 2);
    assert_int_equal(b.calls, 1);
    assert_int_equal(c2.calls, 0);
    assert_string_equal(ss_cost_source_name(c.source), "profile");
    /* errors */
    ss_cost_provider bad = {"bad", NULL, NULL};
    assert_int_equal(ss_cost_add_provider(cm, &bad, &d), SS_ERR_INVALID);
    const ss_op *o = ss_graph_op(f->g, f->gemm);
    ss_tile t;
    ss_op_full_tile(f->g, o, &t);
    assert_int_equal(ss_cost_tile(cm, f->g, o, &t, 1, &c), SS_ERR_INVALID);
    ss_cost_free(cm);
    ss_cost_free(NULL);
}

static void test_cache(void **state)
{
    fixture *f = *state;
    ss_diag d;
    ss_diag_init(&d);
    ss_costmodel *cm = ss_cost_new(f->m);
    prov_ctx a = {0, 0, 0};
    ss_cost_provider pa = {"counting", &a, lookup};
    assert_int_equal(ss_cost_add_provider(cm, &pa, &d), SS_OK);
    ss_cost c1, c2;
    tile_cost(f, cm, f->relu_big, 1, &c1);
    tile_cost(f, cm, f->relu_big, 1, &c2);
    assert_int_equal(a.calls, 1);
    assert_memory_equal(&c1, &c2, sizeof c1);
    /* same signature, different op (and name): shared entry */
    tile_cost(f, cm, f->relu_tiny, 1, &c1);
    tile_cost(f, cm, f->relu_tiny2, 1, &c2);
    assert_int_equal(a.calls, 2);
    assert_memory_equal(&c1, &c2, sizeof c1);
    /* a different tile is a different entry, and equals the uncached value */
    tile_cost(f, cm, f->relu_big, 2, &c1);
    assert_int_equal(a.calls, 3);
    NEAR(c1.fwd_us, 335.54432 / 2); /* half the bytes, above the 5 us floor */
    /* many entries: the table grows and still answers every one */
    for (int rep = 0; rep < 2; rep++)
        for (int k = 1; k <= 2048; k++) {
            const ss_op *o = ss_graph_op(f->g, f->relu_big);
            ss_tile t;
            ss_op_full_tile(f->g, o, &t);
            t.out.r[1].hi = k;
            ss_cost c;
            assert_int_equal(ss_cost_tile(cm, f->g, o, &t, 0, &c), SS_OK);
            /* 0.08192 us per column: floored at 5 us below 62 columns */
            NEAR(c.fwd_us, fmax(5, (2.0 * 4096 * k * 4) / (500e9 * 0.8) * 1e6));
        }
    assert_int_equal(a.calls, 3 + 2048);
    /* a cached lookup is fast (well under a microsecond in optimized builds;
     * the bound here also holds for sanitizer builds) */
    const ss_op *o = ss_graph_op(f->g, f->gemm);
    ss_tile t;
    ss_op_full_tile(f->g, o, &t);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    double sum = 0;
    for (int i = 0; i < 200000; i++) {
        ss_cost c;
        ss_cost_tile(cm, f->g, o, &t, 0, &c);
        sum += c.fwd_us;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double per_us = ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / 1e3 / 200000;
    print_message("cached lookup: %.3f us\n", per_us);
    assert_true(sum > 0);
    assert_true(per_us < 20);
    ss_cost_free(cm);
}

/* Allocation failures in the cache: answers are still right, just not kept. */
static void test_cache_nomem(void **state)
{
    fixture *f = *state;
    ss_costmodel *cm = ss_cost_new(f->m);
    ss_cost c, ref;
    cost_of(f, f->dt, f->gemm, &ref);
    ss_test_fail_after(0);
    tile_cost(f, cm, f->gemm, 1, &c);
    ss_test_fail_after(-1);
    assert_true(c.fwd_us == ref.fwd_us);
    tile_cost(f, cm, f->gemm, 1, &c);
    assert_true(c.fwd_us == ref.fwd_us);
    ss_cost_free(cm);
    ss_test_fail_after(0);
    assert_null(ss_cost_new(f->m));
    ss_test_fail_after(-1);
}

/* Update: bytes per parameter / (500 GB/s x 0.8), no launch overhead.
 * 1e6 parameters: SGD 12 B -> 30 us, momentum 20 B -> 50 us, Adam 28 B ->
 * 70 us; mixed precision adds 2 B (the half copy): Adam 30 B -> 75 us. */
static void test_update_cost(void **state)
{
    fixture *f = *state;
    ss_costmodel *cm = ss_cost_new(f->m);
    double sgd = ss_cost_update_us(cm, 0, 1000000, SS_OPT_SGD, SS_PREC_FP32);
    double mom = ss_cost_update_us(cm, 0, 1000000, SS_OPT_SGD_MOMENTUM, SS_PREC_FP32);
    double adam = ss_cost_update_us(cm, 0, 1000000, SS_OPT_ADAM, SS_PREC_FP32);
    double adam_mixed = ss_cost_update_us(cm, 0, 1000000, SS_OPT_ADAM, SS_PREC_MIXED);
    assert_true(sgd < mom && mom < adam && adam < adam_mixed);
    /* 1e6 params x 12 / 20 / 28 / 30 bytes at 500 GB/s x 0.8, no launch
     * overhead (one fused multi-tensor kernel per device, not per shard) */
    NEAR(sgd, 30);
    NEAR(mom, 50);
    NEAR(adam, 70);
    NEAR(adam_mixed, 75);
    assert_true(ss_cost_update_us(cm, 0, 0, SS_OPT_ADAM, SS_PREC_FP32) == 0);
    assert_true(ss_cost_update_us(cm, 7, 1000, SS_OPT_ADAM, SS_PREC_FP32) == 0);
    ss_cost_free(cm);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_gemm_compute_bound, setup, teardown),
        cmocka_unit_test_setup_teardown(test_elementwise_memory_bound, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tiny_and_view, setup, teardown),
        cmocka_unit_test_setup_teardown(test_efficiency_per_kernel, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tensor_core_alignment, setup, teardown),
        cmocka_unit_test_setup_teardown(test_provider_order_and_fallback, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cache, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cache_nomem, setup, teardown),
        cmocka_unit_test_setup_teardown(test_update_cost, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
