/*
 * test_build_host.c — host dispatch and the per-micro-batch overhead
 * (simulator/build_host.c), derived by hand on a two-layer chain x[64,1000]
 * -> fc1 (1000 -> 1000) -> fc2 (1000 -> 250), fp32, SGD, on one device of
 * type "unit-gpu": 1 TFLOP/s f32, 1000 GB/s, flat efficiency 1, and the
 * launch overhead, dispatch window and micro-batch overhead each test names.
 *
 * With N samples fc1 runs 2N us forward (one kernel) and 4N us backward
 * (two kernels: input and weight gradients), fc2 N/2 and N us (the memory
 * terms are far smaller); the host time is launch_us per kernel. The tiles
 * of one micro-batch on a device fall into windows of dispatch_window
 * operators (0: all of them); a window's pass with GPU time G and host time
 * H takes max(G, H), the excess over G shared by its tasks in proportion to
 * their host time; the first forward task of each micro-batch on a device
 * also carries mb_overhead_us. Updates: 1e6 and 2.5e5 fp32 parameters, 12
 * B each: 12 + 3 us.
 */
#include "build_fixture.h"
#include "search/bound.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static const char *model_json =
    "{\"format\": \"simsearch-model\", \"version\": 1, \"name\": \"chain2b\", \"batch\": 64,\n"
    " \"optimizer\": \"sgd\", \"precision\": \"fp32\",\n"
    " \"tensors\": [{\"name\": \"x\", \"role\": \"input\", \"shape\": [64, 1000], \"dtype\": \"f32\",\n"
    "              \"kinds\": [\"sample\", \"parameter\"]},\n"
    "             {\"name\": \"fc1.weight\", \"role\": \"weight\", \"shape\": [1000, 1000], \"dtype\": \"f32\"},\n"
    "             {\"name\": \"fc2.weight\", \"role\": \"weight\", \"shape\": [1000, 250], \"dtype\": \"f32\"}],\n"
    " \"operators\": [{\"name\": \"x\", \"type\": \"input\"},\n"
    "   {\"name\": \"fc1\", \"type\": \"linear\", \"inputs\": [\"x\"], \"out_features\": 1000, \"use_bias\": false},\n"
    "   {\"name\": \"fc2\", \"type\": \"linear\", \"inputs\": [\"fc1\"], \"out_features\": 250, \"use_bias\": false}]}\n";


#define NEAR(a, b) assert_true(fabs((double)(a) - (double)(b)) < 1e-6 * (1 + fabs((double)(b))))

/* The chain on one unit-gpu with launch_us, dispatch_window and
 * mb_overhead_us; every op on device 0, split `mb` ways on the sample dim
 * (mb micro-batches). */
static void setup(fix *f, double launch, int win, double mbo, int mb)
{
    ss_diag d;
    ss_diag_init(&d);
    memset(f, 0, sizeof *f);
    char js[2048];
    assert_int_equal(ss_model_load_string(model_json, "chain2b", &f->g, &d), SS_OK);
    snprintf(js, sizeof js,
             "{\"format\": \"simsearch-topology\", \"version\": 1, \"name\": \"one\",\n"
             " \"device_types\": [{\"name\": \"unit-gpu\", \"peak_tflops\": {\"f32\": 1},\n"
             "   \"mem_gbps\": 1000, \"mem_gib\": 16, \"launch_us\": %g,\n"
             "   \"dispatch_window\": %d, \"mb_overhead_us\": %g,\n"
             "   \"eff_flops\": [[1, 1.0]], \"eff_mem\": [[1, 1.0]]}],\n"
             " \"hosts\": [{\"name\": \"h0\"}],\n"
             " \"devices\": [{\"name\": \"gpu0\", \"type\": \"unit-gpu\", \"host\": \"h0\"}],\n"
             " \"links\": []}\n",
             launch, win, mbo);
    if (ss_machine_load_string(js, "one", &f->m, &d) != SS_OK)
        print_error("%s\n", d.msg);
    assert_non_null(f->m);
    fix_complete(f);
    static const int dv[2] = {0, 0};
    static const char *ops[] = {"x", "fc1", "fc2"};
    for (int i = 0; i < 3; i++) {
        int op = ss_graph_find_op(f->g, ops[i]);
        assert_true(op >= 0);
        ss_pconfig c = *ss_plan_config(f->p, op);
        for (int k = 0; k < SS_MAX_DIMS; k++)
            c.deg[k] = 1;
        c.deg[0] = mb;
        c.red = 1;
        c.ntiles = mb;
        c.devices = (int *)dv;
        c.stage = 0;
        assert_int_equal(ss_plan_set_config(f->p, op, &c, &d), SS_OK);
    }
    ss_plan_settings_of(f->p)->microbatches = mb;
}

static void run(fix *f)
{
    ss_diag d;
    ss_diag_init(&d);
    assert_int_equal(ss_plan_validate(f->p, f->g, f->m, &d), SS_OK);
    assert_int_equal(ss_build_run(f->b, f->p, f->tg, f->mm, &d), SS_OK);
    ss_engine_config ec = {.policy = ss_build_policy(f->b)};
    assert_int_equal(ss_engine_run(f->e, f->tg, &ec, &d), SS_OK);
    f->r = ss_engine_result_of(f->e);
    assert_non_null(f->r);
}

static void teardown(fix *f)
{
    fix_free(f);
}

/* Duration of the task of kind k of op `name` in micro-batch mb. */
static double dur(const fix *f, ss_task_kind k, const char *name, int mb)
{
    int id = ss_graph_find_op(f->g, name);
    for (int t = 0; t < f->tg->n_tasks; t++)
        if (f->tg->kind[t] == k && f->tg->op[t] == id && f->tg->mb[t] == mb)
            return f->tg->dur[t];
    fail_msg("no task for %s mb %d", name, mb);
    return -1;
}

/* The cost model's split: GPU time without the floor, host time = kernels
 * x launch_us, and the per-op time their maximum (fc2 is host-bound). */
static void test_cost_split(void **state)
{
    (void)state;
    fix f;
    setup(&f, 100, 1, 0, 1);
    static const char *ops[] = {"fc1", "fc2"};
    static const double gf[] = {128, 32}, gb[] = {256, 64}, tf[] = {128, 100}, tb[] = {256, 200};
    for (int i = 0; i < 2; i++) {
        int op = ss_graph_find_op(f.g, ops[i]);
        ss_tile t;
        ss_pconfig_tile(f.g, ss_graph_op(f.g, op), ss_plan_config(f.p, op), 0, &t);
        ss_cost c;
        assert_int_equal(ss_cost_tile(f.cm, f.g, ss_graph_op(f.g, op), &t, 0, &c), SS_OK);
        NEAR(c.fwd_gpu_us, gf[i]);
        NEAR(c.fwd_host_us, 100);
        NEAR(c.fwd_us, tf[i]);
        NEAR(c.bwd_gpu_us, gb[i]);
        NEAR(c.bwd_host_us, 200);
        NEAR(c.bwd_us, tb[i]);
    }
    teardown(&f);
}

/*
 * One micro-batch, launch 100 us.
 * Window 1 (the launch floor per operator): fc1 128 / 256, fc2 100 / 200:
 *   128 + 100 + 256 + 200 + 15 = 699 us; with a 50 us micro-batch overhead
 *   (on fc1's forward, the micro-batch's first kernel) 749 us.
 * Window 0 or 2 (the whole pass): forward G = 128 + 32 = 160, H = 200:
 *   excess 40, 20 each: fc1 148, fc2 52; backward G = 320, H = 400: excess
 *   80: fc1 296, fc2 104; 148 + 52 + 296 + 104 + 15 = 615 us (+ 50 = 665).
 * Full recomputation adds each op's forward (as the window gives it) to its
 *   backward: fc1 296 + 148 = 444, fc2 104 + 52 = 156: 815 us.
 */
static void test_one_microbatch(void **state)
{
    (void)state;
    fix f;
    for (int mbo = 0; mbo <= 50; mbo += 50) {
        setup(&f, 100, 1, mbo, 1);
        run(&f);
        NEAR(dur(&f, SS_TASK_FWD, "fc1", 0), 128 + mbo);
        NEAR(dur(&f, SS_TASK_FWD, "fc2", 0), 100);
        NEAR(dur(&f, SS_TASK_BWD, "fc1", 0), 256);
        NEAR(dur(&f, SS_TASK_BWD, "fc2", 0), 200);
        NEAR(dur(&f, SS_TASK_FWD, "x", 0), 0); /* a graph input: no kernel, no overhead */
        NEAR(f.r->makespan, 699 + mbo);
        teardown(&f);
    }
    static const int wins[] = {0, 2, 5};
    for (int i = 0; i < 3; i++)
        for (int mbo = 0; mbo <= 50; mbo += 50) {
            setup(&f, 100, wins[i], mbo, 1);
            run(&f);
            NEAR(dur(&f, SS_TASK_FWD, "fc1", 0), 148 + mbo);
            NEAR(dur(&f, SS_TASK_FWD, "fc2", 0), 52);
            NEAR(dur(&f, SS_TASK_BWD, "fc1", 0), 296);
            NEAR(dur(&f, SS_TASK_BWD, "fc2", 0), 104);
            NEAR(f.r->makespan, 615 + mbo);
            teardown(&f);
        }
    setup(&f, 100, 0, 0, 1);
    ss_plan_settings_of(f.p)->recompute = SS_RECOMPUTE_FULL;
    run(&f);
    NEAR(dur(&f, SS_TASK_BWD, "fc1", 0), 444);
    NEAR(dur(&f, SS_TASK_BWD, "fc2", 0), 156);
    NEAR(f.r->makespan, 815);
    teardown(&f);
}

/*
 * Two micro-batches (each op split 2 ways on the sample dim, N = 32),
 * launch 100 us, window 0, overhead 50 us. Per micro-batch: forward G =
 * 64 + 16 = 80, H = 200, excess 120, 60 each: fc1 124 + 50, fc2 76;
 * backward G = 128 + 32 = 160, H = 400, excess 240: fc1 248, fc2 152. The
 * overhead comes once per micro-batch: 2 x (174 + 76 + 248 + 152) + 15 =
 * 1315 us.
 */
static void test_per_microbatch(void **state)
{
    (void)state;
    fix f;
    setup(&f, 100, 0, 50, 2);
    run(&f);
    for (int mb = 0; mb < 2; mb++) {
        NEAR(dur(&f, SS_TASK_FWD, "fc1", mb), 174);
        NEAR(dur(&f, SS_TASK_FWD, "fc2", mb), 76);
        NEAR(dur(&f, SS_TASK_BWD, "fc1", mb), 248);
        NEAR(dur(&f, SS_TASK_BWD, "fc2", mb), 152);
    }
    NEAR(f.r->makespan, 1315);
    teardown(&f);
}

/* The search's compute lower bound stays below the simulated time: with a
 * window of one operator it sums the per-operator floors (fc1 128 + 256,
 * fc2 100 + 200, below the 699 us iteration), with a longer window only the
 * GPU times (128 + 256 + 32 + 64 = 480 us, below 615 us), since the window
 * may hide a tile's host time. */
static void test_search_bound(void **state)
{
    (void)state;
    static const int wins[] = {1, 0};
    static const double want[] = {684, 480}, span[] = {699, 615};
    for (int i = 0; i < 2; i++) {
        fix f;
        setup(&f, 100, wins[i], 0, 1);
        run(&f);
        NEAR(f.r->makespan, span[i]);
        ss_diag d;
        ss_diag_init(&d);
        ss_bound *bd = NULL;
        assert_int_equal(ss_bound_new(f.g, f.m, f.cm, &bd, &d), SS_OK);
        double lb = 0;
        assert_int_equal(ss_bound_eval(bd, f.p, -1, &lb, &d), SS_OK);
        NEAR(lb, want[i]);
        assert_true(lb <= f.r->makespan);
        ss_bound_free(bd);
        teardown(&f);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cost_split),
        cmocka_unit_test(test_one_microbatch),
        cmocka_unit_test(test_per_microbatch),
        cmocka_unit_test(test_search_bound),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
