/*
 * test_build.c — the task-graph builder on small real models and machines
 * with round numbers (tests/data/sim/): the tasks it makes, their durations
 * and the schedule the engine gives them, derived by hand below.
 *
 * Device type "unit-gpu" (every topology here): 1 TFLOP/s f32, 1000 GB/s
 * memory, launch 0, flat efficiency 1. A linear layer x[N,1000] . W[1000,1000]
 * costs forward 2*N*1e6 FLOPs = 2N us, backward twice that = 4N us (the
 * memory term is always smaller: e.g. N = 64 moves ~4.5 MB = 4.5 us < 128).
 * An SGD update of 1e6 fp32 parameters moves 12 B/param = 12 MB: 12 us.
 * A transfer of s bytes over a route takes latency + s / bandwidth.
 */
#include "build_fixture.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


static void setup(fix *f, const char *model, const char *topo)
{
    fix_load(f, model, topo);
}

static void teardown(fix *f)
{
    fix_free(f);
}

/* Set op `name`'s config: degree deg0 on dim 0 (sample), red, devices. */
static void set_cfg(fix *f, const char *name, int deg0, int red, const int *devs, int stage)
{
    ss_diag d;
    ss_diag_init(&d);
    int op = ss_graph_find_op(f->g, name);
    assert_true(op >= 0);
    ss_pconfig c = *ss_plan_config(f->p, op);
    for (int k = 0; k < SS_MAX_DIMS; k++)
        c.deg[k] = 1;
    c.deg[0] = deg0;
    c.red = red;
    c.ntiles = deg0 * red;
    c.devices = (int *)devs;
    c.stage = stage;
    assert_int_equal(ss_plan_set_config(f->p, op, &c, &d), SS_OK);
}

static void run(fix *f)
{
    ss_diag d;
    ss_diag_init(&d);
    assert_int_equal(ss_plan_validate(f->p, f->g, f->m, &d), SS_OK);
    assert_int_equal(ss_build_run(f->b, f->p, f->tg, f->mm, &d), SS_OK);
    assert_int_equal(ss_build_memory(f->b, f->mm, &d), SS_OK);
    ss_engine_config ec = {.policy = ss_build_policy(f->b)};
    assert_int_equal(ss_engine_run(f->e, f->tg, &ec, &d), SS_OK);
    f->r = ss_engine_result_of(f->e);
    assert_non_null(f->r);
}

/* The n-th task (0-based) of kind k (and op, unless op < 0). */
static int find_task(const fix *f, ss_task_kind k, const char *op, int nth)
{
    int id = op ? ss_graph_find_op(f->g, op) : -1;
    for (int t = 0; t < f->tg->n_tasks; t++)
        if (f->tg->kind[t] == k && (id < 0 || f->tg->op[t] == id) && nth-- == 0)
            return t;
    return -1;
}

#define NEAR(a, b) assert_true(fabs((double)(a) - (double)(b)) < 1e-6 * (1 + fabs((double)(b))))

/*
 * chain2 (x -> fc1 -> fc2, batch 64) on "pair" (gpu0 -- gpu1: 10 GB/s, 5 us),
 * x and fc1 on gpu0, fc2 on gpu1.
 *   fwd fc1 [0, 128]; transfer of fc1's output 64*1000*4 = 256000 B:
 *   5 + 256000 / 1e4 = 30.6 us [128, 158.6]; fwd fc2 [158.6, 286.6];
 *   bwd fc2 [286.6, 542.6]; gradient back 30.6 us [542.6, 573.2];
 *   bwd fc1 [573.2, 829.2]; update fc1 12 us -> iteration 841.2 us.
 * Tasks: 3 fwd (x, fc1, fc2), 2 bwd, 1 + 1 transfers, 2 updates, no collectives.
 */
static void test_two_devices_chain(void **state)
{
    (void)state;
    fix f;
    setup(&f, "tests/data/sim/chain2.json", "tests/data/sim/pair.json");
    static const int d0[] = {0}, d1[] = {1};
    set_cfg(&f, "x", 1, 1, d0, 0);
    set_cfg(&f, "fc1", 1, 1, d0, 0);
    set_cfg(&f, "fc2", 1, 1, d1, 0);
    run(&f);
    const ss_build_stats *st = ss_build_stats_of(f.b);
    assert_int_equal(st->fwd, 3);
    assert_int_equal(st->bwd, 2);
    assert_int_equal(st->xfer_fwd, 1);
    assert_int_equal(st->xfer_bwd, 1);
    assert_int_equal(st->updates, 2);
    assert_int_equal(st->coll_grad + st->coll_partial + st->coll_bcast, 0);
    assert_int_equal(f.tg->n_tasks, 9);
    int x = find_task(&f, SS_TASK_XFER, "fc1", 0);
    assert_true(x >= 0);
    NEAR(f.tg->dur[x], 30.6);
    NEAR(f.tg->bytes[x], 256000);
    NEAR(f.r->start[x], 128);
    int b1 = find_task(&f, SS_TASK_BWD, "fc1", 0);
    NEAR(f.r->start[b1], 573.2);
    NEAR(f.r->makespan, 841.2);
    /* activations: fc1 keeps its input x (64*1000*4 = 256000 B) from its
     * forward until its backward ends; static = 1e6 params * (4 + 4) B */
    double peak[2];
    ss_diag d;
    ss_diag_init(&d);
    assert_int_equal(ss_memory_sweep(f.mm, f.r->start, f.r->end, peak, &d), SS_OK);
    assert_true(ss_memory_static_bytes(f.mm, 0) == 8e6);
    assert_true(ss_memory_weight_bytes(f.mm, 1) == 4e6);
    assert_true(peak[0] >= 8e6 + 256000);
    /* the intervals come once per run (run() added them) */
    int n_iv = ss_memory_n_intervals(f.mm);
    assert_true(n_iv > 0);
    assert_int_equal(ss_build_memory(f.b, f.mm, &d), SS_ERR_INVALID);
    assert_int_equal(ss_memory_n_intervals(f.mm), n_iv);
    /* naming */
    char name[128];
    ss_build_task_name(f.b, f.tg, x, name, sizeof name);
    assert_string_equal(name, "xfer fc1");
    ss_build_task_name(f.b, f.tg, b1, name, sizeof name);
    assert_string_equal(name, "bwd fc1 t0 mb0");
    teardown(&f);
}

/*
 * Contention: branches (xa -> fa -> ga, xb -> fb -> gb) on "star3": gpu0 and
 * gpu2 reach a switch at 1000 GB/s / 0 us, the switch reaches gpu1 at
 * 10 GB/s / 5 us. fa on gpu0, fb on gpu2, ga and gb on gpu1. Both forwards
 * end at 128; both outputs (256000 B each) must cross sw -> gpu1: each
 * transfer takes 5 + 25.6 = 30.6 us, so the first runs [128, 158.6] and the
 * second waits: [158.6, 189.2], ending at 2x the first's duration after 128.
 * gpu1: fwd ga [158.6, 286.6], fwd gb [286.6, 414.6] (ready at 189.2, before
 * bwd ga at 286.6), bwd ga [414.6, 670.6], bwd gb [670.6, 926.6];
 * gradients back: to gpu0 [670.6, 701.2], to gpu2 [926.6, 957.2];
 * bwd fb on gpu2 [957.2, 1213.2], update fb [1213.2, 1225.2].
 */
static void test_link_contention(void **state)
{
    (void)state;
    fix f;
    setup(&f, "tests/data/sim/branches.json", "tests/data/sim/star3.json");
    static const int d0[] = {0}, d1[] = {1}, d2[] = {2};
    set_cfg(&f, "xa", 1, 1, d0, 0);
    set_cfg(&f, "fa", 1, 1, d0, 0);
    set_cfg(&f, "xb", 1, 1, d2, 0);
    set_cfg(&f, "fb", 1, 1, d2, 0);
    set_cfg(&f, "ga", 1, 1, d1, 0);
    set_cfg(&f, "gb", 1, 1, d1, 0);
    run(&f);
    int xa = find_task(&f, SS_TASK_XFER, "fa", 0), xb = find_task(&f, SS_TASK_XFER, "fb", 0);
    assert_true(xa >= 0 && xb >= 0);
    NEAR(f.tg->dur[xa], 30.6);
    NEAR(f.tg->dur[xb], 30.6);
    NEAR(f.r->start[xa], 128);
    NEAR(f.r->end[xa], 158.6);
    NEAR(f.r->start[xb], 158.6);
    NEAR(f.r->end[xb] - 128, 2 * 30.6);
    NEAR(f.r->makespan, 1225.2);
    teardown(&f);
}

/*
 * Data parallel: chain2 over "ring4" (gpu0-gpu1-gpu2-gpu3-gpu0, 10 GB/s,
 * 1 us per link). Each device: 16 samples, fwd 32 us per layer, bwd 64.
 * fwd fc1 [0,32], fc2 [32,64], bwd fc2 [64,128], bwd fc1 [128,192].
 * Gradient of each weight: 1e6 * 4 B = 4e6 B. Ring all-reduce over n = 4
 * (collective.h): launch 6 + 2(n-1) * 1 us + 2(n-1)/n * S/B
 *   = 6 + 6 + 1.5 * 4e6 / 1e4 = 612 us (tree: 6 + 4 + 800 = 810, slower).
 * Wait-free, one bucket per weight: fc2's starts at 128 [128, 740], fc1's
 * waits for the links [740, 1352], update fc1 12 us -> 1364.
 * One fused bucket (bucket_bytes 1e9): 8e6 B, 6 + 6 + 1200 = 1212 us from
 * 192 -> 1404, then two updates -> 1428.
 * Bulk sync with priority (front layers first): both all-reduces wait for
 * the barrier at 192; fc1's goes first [192, 804], fc2's [804, 1416], 1428.
 * Split (bucket_bytes 2e6 < 4e6): each gradient in 2 all-reduces of 2e6 B,
 * 6 + 6 + 1.5 * 2e6 / 1e4 = 312 us, one after another on the devices' sync
 * stream: fc2's [128, 440], [440, 752], fc1's [752, 1064], [1064, 1376],
 * update 12 -> 1388.
 */
static void test_data_parallel_ring(void **state)
{
    (void)state;
    fix f;
    ss_diag d;
    ss_diag_init(&d);
    setup(&f, "tests/data/sim/chain2.json", "tests/data/sim/ring4.json");
    ss_plan_free(f.p);
    f.p = NULL;
    assert_int_equal(ss_plan_data_parallel(f.g, f.m, 4, &f.p, &d), SS_OK);
    run(&f);
    const ss_build_stats *st = ss_build_stats_of(f.b);
    assert_int_equal(st->fwd, 12);
    assert_int_equal(st->bwd, 8);
    assert_int_equal(st->xfer_fwd + st->xfer_bwd, 0);
    assert_int_equal(st->coll_grad, 2);
    assert_int_equal(st->updates, 8);
    int c2 = find_task(&f, SS_TASK_COLLECTIVE, "fc2", 0);
    int c1 = find_task(&f, SS_TASK_COLLECTIVE, "fc1", 0);
    assert_true(c1 >= 0 && c2 >= 0);
    NEAR(f.tg->dur[c2], 612);
    NEAR(f.tg->bytes[c2], 4e6);
    /* a ring all-reduce occupies both directions of all 4 links */
    assert_int_equal(ss_taskgraph_n_res(f.tg, c2), 8);
    NEAR(f.r->start[c2], 128);
    NEAR(f.r->start[c1], 740);
    NEAR(f.r->makespan, 1364);

    ss_plan_settings_of(f.p)->bucket_bytes = 1e9;
    run(&f);
    assert_int_equal(ss_build_stats_of(f.b)->coll_grad, 1);
    int c = find_task(&f, SS_TASK_COLLECTIVE, NULL, 0);
    NEAR(f.tg->dur[c], 1212);
    NEAR(f.r->start[c], 192);
    NEAR(f.r->makespan, 1428);

    ss_plan_settings_of(f.p)->bucket_bytes = 2e6;
    run(&f);
    assert_int_equal(ss_build_stats_of(f.b)->coll_grad, 4);
    int p20 = find_task(&f, SS_TASK_COLLECTIVE, "fc2", 0);
    int p21 = find_task(&f, SS_TASK_COLLECTIVE, "fc2", 1);
    int p10 = find_task(&f, SS_TASK_COLLECTIVE, "fc1", 0);
    int p11 = find_task(&f, SS_TASK_COLLECTIVE, "fc1", 1);
    assert_true(p20 >= 0 && p21 >= 0 && p10 >= 0 && p11 >= 0);
    NEAR(f.tg->bytes[p20], 2e6);
    NEAR(f.tg->dur[p20], 312);
    NEAR(f.r->start[p20], 128);
    NEAR(f.r->start[p21], 440);
    NEAR(f.r->start[p10], 752);
    NEAR(f.r->start[p11], 1064);
    NEAR(f.r->makespan, 1388);

    ss_plan_settings_of(f.p)->bucket_bytes = 0;
    ss_plan_settings_of(f.p)->sync = SS_SYNC_BULK;
    ss_plan_settings_of(f.p)->priority = 1;
    run(&f);
    c2 = find_task(&f, SS_TASK_COLLECTIVE, "fc2", 0);
    c1 = find_task(&f, SS_TASK_COLLECTIVE, "fc1", 0);
    NEAR(f.r->start[c1], 192);
    NEAR(f.r->start[c2], 804);
    NEAR(f.r->makespan, 1428);
    teardown(&f);
}

/*
 * A device type with comm_blocks_compute (local-cpu.json's CPU cores: MPI
 * ranks that move their own messages): chain2 data-parallel on its 2 cores.
 * Every gradient collective also occupies both compute streams, so no
 * device computes while it runs: each device's compute stream is busy for
 * its kernels, updates and collectives together, end to end.
 */
static void test_comm_blocks_compute(void **state)
{
    (void)state;
    fix f;
    ss_diag d;
    ss_diag_init(&d);
    setup(&f, "tests/data/sim/chain2.json", "topologies/local-cpu.json");
    ss_plan_free(f.p);
    f.p = NULL;
    assert_int_equal(ss_plan_data_parallel(f.g, f.m, 2, &f.p, &d), SS_OK);
    run(&f);
    int nc = 0;
    double own = 0;
    for (int t = 0; t < f.tg->n_tasks; t++) {
        const int32_t *res = ss_taskgraph_res(f.tg, t);
        int n = ss_taskgraph_n_res(f.tg, t), d0 = 0, d1 = 0;
        for (int k = 0; k < n; k++) {
            d0 |= res[k] == 0;
            d1 |= res[k] == 1;
        }
        if (f.tg->kind[t] == SS_TASK_COLLECTIVE) {
            nc++;
            assert_true(d0 && d1);
            assert_true(n > 2); /* and its channels */
        }
        if (d0)
            own += f.tg->dur[t];
    }
    assert_true(nc >= 1);
    NEAR(f.r->compute_us[0], own);
    teardown(&f);
}

/*
 * Partial sums: chain2 on "pair"; fc1 on gpu0; fc2 split on its contraction
 * dim (red = 2): tile 0 (inputs 0..499) on gpu0, tile 1 (500..999) on gpu1.
 * Tile 1 needs fc1's output columns 500..999: 64*500*4 = 128000 B,
 * 5 + 12.8 = 17.8 us. The two partial outputs (64*1000*4 = 256000 B) are
 * all-reduced over n = 2: ring 6 + 2*1*5 + 2*(1/2)*25.6 = 41.6 us (tree
 * 6 + 10 + 51.2 = 67.2). Weights: each fc2 tile needs its own 500 rows: two
 * shards on one device each, no gradient collective. Static memory (SGD,
 * 8 B/param): gpu0 (1e6 + 5e5) * 8 = 1.2e7, gpu1 5e5 * 8 = 4e6.
 */
static void test_partial_sums(void **state)
{
    (void)state;
    fix f;
    setup(&f, "tests/data/sim/chain2.json", "tests/data/sim/pair.json");
    static const int d0[] = {0}, d01[] = {0, 1};
    set_cfg(&f, "x", 1, 1, d0, 0);
    set_cfg(&f, "fc1", 1, 1, d0, 0);
    set_cfg(&f, "fc2", 1, 2, d01, 0);
    run(&f);
    const ss_build_stats *st = ss_build_stats_of(f.b);
    assert_int_equal(st->coll_partial, 1);
    assert_int_equal(st->coll_grad, 0);
    assert_int_equal(st->shards, 3);
    assert_int_equal(st->xfer_fwd, 1);
    assert_int_equal(st->xfer_bwd, 1);
    int x = find_task(&f, SS_TASK_XFER, "fc1", 0);
    NEAR(f.tg->dur[x], 17.8);
    int c = find_task(&f, SS_TASK_COLLECTIVE, "fc2", 0);
    NEAR(f.tg->dur[c], 41.6);
    /* the all-reduce waits for both partial forwards */
    int f0 = find_task(&f, SS_TASK_FWD, "fc2", 0), f1 = find_task(&f, SS_TASK_FWD, "fc2", 1);
    assert_true(f.r->start[c] >= f.r->end[f0] && f.r->start[c] >= f.r->end[f1]);
    assert_true(ss_memory_static_bytes(f.mm, 0) == 1.2e7);
    assert_true(ss_memory_static_bytes(f.mm, 1) == 4e6);
    teardown(&f);
}

/*
 * 4-stage pipeline, 8 micro-batches: chain4 on "line4" (links 1e6 GB/s,
 * 0 us: transfers of 8*1000*4 B take 3.2e-5 us). Stage s = fc(s+1) on gpu s,
 * each op split 8 ways on the sample dim on its own device. Per micro-batch:
 * fwd 16 us, bwd 32 us. GPipe: (m + p - 1) * (tf + tb) = 11 * 48 = 528 us
 * before the updates (12 us each, on each device after its last backward:
 * gpu0's is the last) -> ~540 us; each device is busy m * 48 = 384 us of
 * the 528, so the bubble is (p - 1)/(m + p - 1) = 3/11.
 * The micro-batch index of every tile is its rank on its device (0..7).
 */
static void pipeline_plan(fix *f, ss_pipe_schedule sched)
{
    static const int dv[4][8] = {{0, 0, 0, 0, 0, 0, 0, 0},
                                 {1, 1, 1, 1, 1, 1, 1, 1},
                                 {2, 2, 2, 2, 2, 2, 2, 2},
                                 {3, 3, 3, 3, 3, 3, 3, 3}};
    ss_plan_settings *s = ss_plan_settings_of(f->p);
    s->stages = 4;
    s->microbatches = 8;
    s->schedule = sched;
    set_cfg(f, "x", 8, 1, dv[0], 0);
    set_cfg(f, "fc1", 8, 1, dv[0], 0);
    set_cfg(f, "fc2", 8, 1, dv[1], 1);
    set_cfg(f, "fc3", 8, 1, dv[2], 2);
    set_cfg(f, "fc4", 8, 1, dv[3], 3);
}

/* Most forwards of one device started but whose backward has not ended. */
static int max_in_flight(const fix *f, int dev)
{
    int best = 0;
    for (int t = 0; t < f->tg->n_tasks; t++) {
        if (f->tg->kind[t] != SS_TASK_FWD || f->tg->res[f->tg->res_off[t]] != dev)
            continue;
        double at = f->r->start[t];
        int n = 0;
        for (int u = 0; u < f->tg->n_tasks; u++) {
            if (f->tg->kind[u] != SS_TASK_FWD || f->tg->res[f->tg->res_off[u]] != dev ||
                f->tg->op[u] != f->tg->op[t])
                continue;
            int bw = find_task(f, SS_TASK_BWD, ss_graph_op(f->g, f->tg->op[u])->name,
                               f->tg->tile[u]);
            if (bw < 0)
                break; /* graph inputs have no backward */
            if (f->r->start[u] <= at && f->r->end[bw] > at)
                n++;
        }
        if (n > best)
            best = n;
    }
    return best;
}

static void test_pipeline_bubble(void **state)
{
    (void)state;
    fix f;
    setup(&f, "tests/data/sim/chain4.json", "tests/data/sim/line4.json");
    pipeline_plan(&f, SS_PIPE_GPIPE);
    run(&f);
    assert_int_equal(ss_build_stats_of(f.b)->microbatch_gating, 1);
    int last_bwd = find_task(&f, SS_TASK_BWD, "fc1", 7);
    double span = 0;
    for (int t = 0; t < f.tg->n_tasks; t++)
        if (f.tg->kind[t] == SS_TASK_BWD && f.r->end[t] > span)
            span = f.r->end[t];
    assert_true(fabs(span - 528) < 1e-2);
    assert_true(fabs(f.r->end[last_bwd] - 528) < 1e-2);
    for (int dev = 0; dev < 4; dev++) {
        double busy = f.r->busy[dev] - 12; /* less the update */
        assert_true(fabs(busy - 384) < 1e-6);
        assert_true(fabs((span - busy) / span - 3.0 / 11.0) < 1e-4);
    }
    assert_true(fabs(f.r->makespan - 540) < 1e-2);
    /* GPipe keeps all 8 micro-batches of stage 0 in flight */
    assert_int_equal(max_in_flight(&f, 0), 8);

    /* 1F1B: same time, at most p - s micro-batches in flight on stage s */
    pipeline_plan(&f, SS_PIPE_1F1B);
    run(&f);
    assert_int_equal(ss_build_policy(f.b), SS_QUEUE_BACKWARD_FIRST);
    assert_true(fabs(f.r->makespan - 540) < 1e-2);
    for (int dev = 0; dev < 4; dev++) {
        assert_true(max_in_flight(&f, dev) <= 4 - dev);
        /* under 1F1B the stage-crossing transfers also hold both ends'
         * streams (3.2e-5 us each; 16 on an end stage: 8 activations and 8
         * gradients sent or received; 32 on a middle stage) */
        int nx = dev == 0 || dev == 3 ? 16 : 32;
        assert_true(fabs(f.r->busy[dev] - 12 - 384 - nx * 3.2e-5) < 1e-6);
    }
    assert_int_equal(max_in_flight(&f, 0), 4);
    teardown(&f);
}

/*
 * Blocking pipeline transfers (Megatron's 1F1B sends and receives with
 * batch_isend_irecv + wait + synchronize). chain2 (batch 64) on "pair"
 * (10 GB/s, 5 us), 2 stages, 2 micro-batches, 1F1B: x and fc1 on gpu0
 * (stage 0), fc2 on gpu1 (stage 1), each split 2 ways on the sample dim
 * (N = 32: fwd 64 us, bwd 128 us; a transfer of 32*1000*4 = 128000 B takes
 * 5 + 12.8 = 17.8 us). A stage-crossing transfer holds the channel AND both
 * devices' compute streams, and is keyed like its producer (so it beats the
 * sender's next task of the same kind):
 *   gpu0: fwd fc1 mb0 [0, 64]; send mb0 [64, 81.8] (the forward of mb1 is
 *         ready at 64 but cannot overlap it); fwd fc1 mb1 [81.8, 145.8];
 *   gpu1: fwd fc2 mb0 [81.8, 145.8]; send mb1 [145.8, 163.6] (both
 *         streams); bwd fc2 mb0 [163.6, 291.6]; gradient mb0 [291.6, 309.4];
 *         fwd fc2 mb1 [309.4, 373.4]; bwd fc2 mb1 [373.4, 501.4];
 *         gradient mb1 [501.4, 519.2]; update fc2 [519.2, 531.2];
 *   gpu0: bwd fc1 mb0 [309.4, 437.4]; bwd fc1 mb1 [519.2, 647.2]; update fc1
 *         [647.2, 659.2] -> iteration 659.2 us.
 * Non-blocking transfers (one stage, GPipe order: below) give 623.6 us;
 * blocking puts two transfers on gpu1's critical path: 2 * 17.8 = 35.6 us.
 */
static void test_blocking_stage_transfers(void **state)
{
    (void)state;
    fix f;
    setup(&f, "tests/data/sim/chain2.json", "tests/data/sim/pair.json");
    static const int d0[] = {0, 0}, d1[] = {1, 1};
    ss_plan_settings *s = ss_plan_settings_of(f.p);
    s->stages = 2;
    s->microbatches = 2;
    s->schedule = SS_PIPE_1F1B;
    set_cfg(&f, "x", 2, 1, d0, 0);
    set_cfg(&f, "fc1", 2, 1, d0, 0);
    set_cfg(&f, "fc2", 2, 1, d1, 1);
    run(&f);
    int x0 = find_task(&f, SS_TASK_XFER, "fc1", 0), x1 = find_task(&f, SS_TASK_XFER, "fc1", 1);
    int g0 = find_task(&f, SS_TASK_XFER, "fc1", 2), g1 = find_task(&f, SS_TASK_XFER, "fc1", 3);
    assert_true(x0 >= 0 && x1 >= 0 && g0 >= 0 && g1 >= 0);
    assert_int_equal(f.tg->aux[x0], 0);
    assert_int_equal(f.tg->aux[g0], 1);
    /* each transfer holds 1 channel + the 2 devices' streams */
    for (int k = 0; k < 4; k++) {
        int t = k == 0 ? x0 : k == 1 ? x1 : k == 2 ? g0 : g1;
        NEAR(f.tg->dur[t], 17.8);
        int n = f.tg->res_off[t + 1] - f.tg->res_off[t], dev0 = 0, dev1 = 0;
        assert_int_equal(n, 3);
        for (int i = f.tg->res_off[t]; i < f.tg->res_off[t + 1]; i++) {
            dev0 += f.tg->res[i] == 0;
            dev1 += f.tg->res[i] == 1;
        }
        assert_int_equal(dev0, 1);
        assert_int_equal(dev1, 1);
    }
    NEAR(f.r->start[x0], 64);
    int f1 = find_task(&f, SS_TASK_FWD, "fc1", 1);
    NEAR(f.r->start[f1], 81.8); /* the sender's next forward waits for the send */
    NEAR(f.r->start[find_task(&f, SS_TASK_FWD, "fc2", 0)], 81.8);
    NEAR(f.r->start[x1], 145.8);
    NEAR(f.r->start[find_task(&f, SS_TASK_BWD, "fc2", 0)], 163.6);
    NEAR(f.r->start[g0], 291.6);
    NEAR(f.r->start[find_task(&f, SS_TASK_FWD, "fc2", 1)], 309.4);
    NEAR(f.r->start[find_task(&f, SS_TASK_BWD, "fc1", 0)], 309.4);
    NEAR(f.r->start[g1], 501.4);
    NEAR(f.r->start[find_task(&f, SS_TASK_BWD, "fc1", 1)], 519.2);
    NEAR(f.r->makespan, 659.2);
    /* gpu1's stream: 2 * 64 + 2 * 128 of compute, 4 transfers, 1 update */
    NEAR(f.r->busy[1], 384 + 4 * 17.8 + 12);

    /* the same placement in one stage (GPipe order, FIFO: with one stage
     * the 1F1B limit would be 1 micro-batch in flight): transfers only hold
     * the channel. gpu0: fwd fc1 mb0 [0, 64], mb1 [64, 128]; sends [64, 81.8],
     * [128, 145.8]; gpu1: fwd fc2 mb0 [81.8, 145.8], mb1 [145.8, 209.8],
     * bwd mb0 [209.8, 337.8], mb1 [337.8, 465.8]; gradients [337.8, 355.6],
     * [465.8, 483.6]; gpu0: bwd fc1 [355.6, 483.6], [483.6, 611.6], update
     * [611.6, 623.6]. */
    set_cfg(&f, "fc2", 2, 1, d1, 0);
    s->stages = 1;
    s->schedule = SS_PIPE_GPIPE;
    run(&f);
    x0 = find_task(&f, SS_TASK_XFER, "fc1", 0);
    assert_int_equal(f.tg->res_off[x0 + 1] - f.tg->res_off[x0], 1);
    NEAR(f.r->start[find_task(&f, SS_TASK_FWD, "fc1", 1)], 64);
    NEAR(f.r->makespan, 623.6);
    teardown(&f);
}

/*
 * F1 regression: the gradient of a partial-sum unit spread over several
 * devices reaches every member. chain2 on "pair"; x and fc1's tile 0 on
 * gpu0, fc1 split on its contraction (red = 2) over gpu0 and gpu1, fc2 whole
 * on gpu0 (a member of fc1's unit).
 *   fwd fc1 t0 [0, 64] (half the contraction: 2*64*500*1000 FLOPs);
 *   x[:, 500:] to gpu1: 128000 B, 5 + 12.8 = 17.8 us [0, 17.8];
 *   fwd fc1 t1 [17.8, 81.8]; all-reduce of 256000 B over 2: 41.6 us
 *   [81.8, 123.4]; fwd fc2 [123.4, 251.4]; bwd fc2 [251.4, 507.4].
 * Before the fix bwd fc1 t1 on gpu1 ran at [81.8, 209.8], long before the
 * gradient of its output existed. Now the gradient (whole on gpu0) is
 * broadcast to the members: a pipelined ring broadcast of S = 256000 B,
 * 6 + 5 + 25.6 = 36.6 us [507.4, 544] (fc2's update runs on gpu0 meanwhile,
 * [507.4, 519.4]); bwd fc1 t0 and t1 [544, 672]; fc1's shard updates (5e5
 * params, 6 us) end the iteration at 678.
 */
static void test_partial_grad_reaches_members(void **state)
{
    (void)state;
    fix f;
    setup(&f, "tests/data/sim/chain2.json", "tests/data/sim/pair.json");
    static const int d0[] = {0}, d01[] = {0, 1};
    set_cfg(&f, "x", 1, 1, d0, 0);
    set_cfg(&f, "fc1", 1, 2, d01, 0);
    set_cfg(&f, "fc2", 1, 1, d0, 0);
    run(&f);
    int ar = find_task(&f, SS_TASK_COLLECTIVE, "fc1", 0);
    int bc = find_task(&f, SS_TASK_COLLECTIVE, "fc1", 1);
    int b0 = find_task(&f, SS_TASK_BWD, "fc1", 0), b1 = find_task(&f, SS_TASK_BWD, "fc1", 1);
    int b2 = find_task(&f, SS_TASK_BWD, "fc2", 0);
    assert_true(ar >= 0 && bc >= 0 && b0 >= 0 && b1 >= 0 && b2 >= 0);
    NEAR(f.r->start[ar], 81.8);
    NEAR(f.r->end[ar], 123.4);
    NEAR(f.r->end[b2], 507.4);
    NEAR(f.r->start[bc], 507.4);
    NEAR(f.r->start[b1], f.r->end[bc]);
    NEAR(f.r->start[b0], f.r->end[bc]);
    NEAR(f.tg->dur[bc], 36.6);
    NEAR(f.r->makespan, 678);
    assert_int_equal(ss_build_stats_of(f.b)->coll_bcast, 1);
    char name[128];
    ss_build_task_name(f.b, f.tg, bc, name, sizeof name);
    assert_string_equal(name, "broadcast output grad fc1");
    teardown(&f);
}

/*
 * Reduce-scatter / all-gather: chain2 on "pair"; fc1 red = 2 over gpu0 and
 * gpu1 as above, fc2 split by samples over gpu0 (rows 0..31) and gpu1
 * (32..63). Each fc2 tile reads a disjoint half of fc1's output, so the
 * partial sums are reduce-scattered: S = 64*1000*4 = 256000 B, ring over
 * n = 2: 6 + 1*5 + (1/2)*25.6 = 23.8 us (an all-reduce would take 41.6).
 *   fwd fc1 t0 [0, 64], x slice to gpu1 [0, 17.8], fwd fc1 t1 [17.8, 81.8];
 *   reduce-scatter [81.8, 105.6]; fwd fc2 t0 and t1 (32 rows: 64 us)
 *   [105.6, 169.6]; bwd fc2 (128 us) [169.6, 297.6].
 * Backward mirror: each device holds the gradient of its half: all-gather
 * of S, also 23.8 us, [297.6, 321.4]; fc2's weight gradient all-reduce
 * (4e6 B: 6 + 2*5 + 400 = 416 us) is ready at the same instant and shares
 * both channels, but sorts after it (gradient buckets have the larger
 * priority): [321.4, 737.4]. bwd fc1 t0, t1 (128 us) [321.4, 449.4];
 * updates: fc1 shards (5e5 params, 6 us) [449.4, 455.4], fc2 (1e6, 12 us)
 * on both devices after the all-reduce [737.4, 749.4] = the iteration.
 */
static void test_reduce_scatter_all_gather(void **state)
{
    (void)state;
    fix f;
    setup(&f, "tests/data/sim/chain2.json", "tests/data/sim/pair.json");
    static const int d0[] = {0}, d01[] = {0, 1};
    set_cfg(&f, "x", 1, 1, d0, 0);
    set_cfg(&f, "fc1", 1, 2, d01, 0);
    set_cfg(&f, "fc2", 2, 1, d01, 0);
    run(&f);
    const ss_build_stats *st = ss_build_stats_of(f.b);
    assert_int_equal(st->coll_scatter, 1);
    assert_int_equal(st->coll_gather, 1);
    assert_int_equal(st->coll_partial + st->coll_bcast + st->coll_gradsum, 0);
    assert_int_equal(st->coll_grad, 1);
    int rs = find_task(&f, SS_TASK_COLLECTIVE, "fc1", 0);
    int ag = find_task(&f, SS_TASK_COLLECTIVE, "fc1", 1);
    int gr = find_task(&f, SS_TASK_COLLECTIVE, "fc2", 0);
    assert_true(rs >= 0 && ag >= 0 && gr >= 0);
    NEAR(f.tg->dur[rs], 23.8);
    NEAR(f.tg->bytes[rs], 256000);
    NEAR(f.r->start[rs], 81.8);
    NEAR(f.r->start[find_task(&f, SS_TASK_FWD, "fc2", 0)], 105.6);
    NEAR(f.r->start[find_task(&f, SS_TASK_FWD, "fc2", 1)], 105.6);
    NEAR(f.tg->dur[ag], 23.8);
    NEAR(f.r->start[ag], 297.6);
    NEAR(f.r->start[gr], 321.4);
    NEAR(f.r->start[find_task(&f, SS_TASK_BWD, "fc1", 0)], 321.4);
    NEAR(f.r->start[find_task(&f, SS_TASK_BWD, "fc1", 1)], 321.4);
    NEAR(f.r->makespan, 749.4);
    char name[128];
    ss_build_task_name(f.b, f.tg, rs, name, sizeof name);
    assert_string_equal(name, "reduce-scatter partial sums fc1");
    ss_build_task_name(f.b, f.tg, ag, name, sizeof name);
    assert_string_equal(name, "allgather output grad fc1");

    /* fc2 split on its output features instead: both tiles read all of
     * fc1's output, so the partial sums are all-reduced (41.6 us, [81.8,
     * 123.4]); fc2 tiles (2*64*1000*500 FLOPs) fwd [123.4, 187.4], bwd
     * [187.4, 315.4]; each holds a partial gradient of the whole output:
     * all-reduce of S (41.6 us) [315.4, 357]; bwd fc1 [357, 485]; update of
     * fc1's shards 6 us -> 491 (fc2's column shards update at 315.4). */
    int fc2 = ss_graph_find_op(f.g, "fc2");
    ss_pconfig c = *ss_plan_config(f.p, fc2);
    c.deg[0] = 1;
    c.deg[1] = 2;
    c.red = 1;
    c.ntiles = 2;
    c.devices = (int *)d01;
    ss_diag d;
    ss_diag_init(&d);
    assert_int_equal(ss_plan_set_config(f.p, fc2, &c, &d), SS_OK);
    run(&f);
    st = ss_build_stats_of(f.b);
    assert_int_equal(st->coll_partial, 1);
    assert_int_equal(st->coll_gradsum, 1);
    assert_int_equal(st->coll_scatter + st->coll_gather + st->coll_bcast + st->coll_grad, 0);
    int ar = find_task(&f, SS_TASK_COLLECTIVE, "fc1", 0);
    int gs = find_task(&f, SS_TASK_COLLECTIVE, "fc1", 1);
    NEAR(f.tg->dur[ar], 41.6);
    NEAR(f.r->start[ar], 81.8);
    NEAR(f.tg->dur[gs], 41.6);
    NEAR(f.r->start[gs], 315.4);
    NEAR(f.r->start[find_task(&f, SS_TASK_BWD, "fc1", 1)], 357);
    NEAR(f.r->makespan, 491);
    ss_build_task_name(f.b, f.tg, gs, name, sizeof name);
    assert_string_equal(name, "allreduce output grad fc1");
    teardown(&f);
}

/* Set op `name`'s config: dims split deg[0..1], rep replicas, devices. */
static void set_cfg_rep(fix *f, const char *name, int d0, int d1, int rep, const int *devs)
{
    ss_diag d;
    ss_diag_init(&d);
    int op = ss_graph_find_op(f->g, name);
    assert_true(op >= 0);
    ss_pconfig c = *ss_plan_config(f->p, op);
    for (int k = 0; k < SS_MAX_DIMS; k++)
        c.deg[k] = 1;
    c.deg[0] = d0;
    c.deg[1] = d1;
    c.red = 1;
    c.rep = rep;
    c.ntiles = d0 * d1 * rep;
    c.devices = (int *)devs;
    assert_int_equal(ss_plan_set_config(f->p, op, &c, &d), SS_OK);
}

/*
 * Replication, chain2 on "pair" (10 GB/s, 5 us; a ring all-reduce of S bytes
 * over the pair costs 16 + S / 1e4 us: 41.6 us for 256000 B, 416 us for
 * fc1's 4e6 B weight gradient). fc1 replicated on both GPUs (rep = 2), fc2
 * split on its output features (column-parallel: tile k on GPU k reads the
 * replica on its own GPU, no transfer):
 *   fwd fc1 on both GPUs [0, 128] (each replica pays the whole 128 us);
 *   fwd fc2 tiles (64 us) [128, 192]; bwd fc2 (128 us) [192, 320];
 *   each fc2 tile holds a partial gradient of fc1's whole output: all-reduce
 *   over the replicas (41.6 us) [320, 361.6]; bwd fc1 on both [361.6, 617.6];
 *   fc1's weight gradient is summed over its replicas like data
 *   parallelism: all-reduce of 4e6 B [617.6, 1033.6]; update 12 us -> 1045.6.
 * fc2 replicated instead (replica k reads fc1's replica k: the same work on
 * both): no transfer and no output-gradient collective; bwd fc2 [256, 512],
 * bwd fc1 [512, 768]; both weights all-reduced (416 us each, one link
 * direction pair, back layer first): fc2 [512, 928], fc1 [928, 1344], its
 * update -> 1356.
 */
static void test_replicas(void **state)
{
    (void)state;
    fix f;
    setup(&f, "tests/data/sim/chain2.json", "tests/data/sim/pair.json");
    static const int d01[] = {0, 1};
    set_cfg_rep(&f, "x", 1, 1, 2, d01); /* the input loaded on both */
    set_cfg_rep(&f, "fc1", 1, 1, 2, d01);
    set_cfg_rep(&f, "fc2", 1, 2, 1, d01);
    run(&f);
    const ss_build_stats *st = ss_build_stats_of(f.b);
    assert_int_equal(st->fwd, 2 + 2 + 2);
    assert_int_equal(st->xfer_fwd + st->xfer_bwd, 0);
    assert_int_equal(st->coll_repsum, 1);
    assert_int_equal(st->coll_grad, 1);
    for (int r = 0; r < 2; r++) {
        int t = find_task(&f, SS_TASK_FWD, "fc1", r);
        NEAR(f.tg->dur[t], 128);
        NEAR(f.r->start[t], 0);
        NEAR(f.r->start[find_task(&f, SS_TASK_BWD, "fc1", r)], 361.6);
    }
    int rs = find_task(&f, SS_TASK_COLLECTIVE, "fc1", 0);
    NEAR(f.tg->dur[rs], 41.6);
    NEAR(f.tg->bytes[rs], 256000);
    NEAR(f.r->start[rs], 320);
    char name[128];
    ss_build_task_name(f.b, f.tg, rs, name, sizeof name);
    assert_string_equal(name, "allreduce replicas' output grad fc1");
    int gr = find_task(&f, SS_TASK_COLLECTIVE, "fc1", 1);
    NEAR(f.tg->dur[gr], 416);
    NEAR(f.r->start[gr], 617.6);
    NEAR(f.r->makespan, 1045.6);

    set_cfg_rep(&f, "fc2", 1, 1, 2, d01);
    run(&f);
    st = ss_build_stats_of(f.b);
    assert_int_equal(st->xfer_fwd + st->xfer_bwd, 0);
    assert_int_equal(st->coll_repsum, 0);
    assert_int_equal(st->coll_grad, 2);
    NEAR(f.r->start[find_task(&f, SS_TASK_BWD, "fc1", 1)], 512);
    NEAR(f.r->makespan, 1356);
    teardown(&f);
}

static void setup_zoo(fix *f, const char *spec, int64_t batch, const char *topo)
{
    ss_diag d;
    ss_diag_init(&d);
    memset(f, 0, sizeof *f);
    assert_int_equal(ss_model_build(spec, batch, 1, &f->g, &d), SS_OK);
    assert_int_equal(ss_machine_load(ss_test_path(topo), &f->m, &d), SS_OK);
    f->cm = ss_cost_new(f->m);
    f->p = ss_plan_new(f->g, f->m);
    f->b = ss_build_new(f->g, f->m, f->cm);
    f->tg = ss_taskgraph_new(0, 0);
    f->mm = ss_memory_new();
    f->e = ss_engine_new();
    assert_true(f->cm && f->p && f->b && f->tg && f->mm && f->e);
}

/*
 * Sequence-parallel Megatron moves what Megatron's two all-reduces per layer
 * per pass move. gpt (hidden 128, seq 64) on dgx-a100, tp = 4, dp = 2, batch
 * 8: each TP group holds 4 samples, so a layer activation is S = 4*64*128 *
 * 2 B (fp16) = 65536 B. Bytes on the wire (sum over devices of bytes sent):
 * ring all-reduce 2(n-1) S, reduce-scatter and all-gather (n-1) S each, a
 * point-to-point transfer its bytes. Per layer per pass and TP group, two
 * all-reduces are 4(n-1) S = 12 S. With sp = 1, forward: reduce-scatter
 * after attn.proj and mlp.fc2 (3 S each) and the all-gathers of ln1 and ln2
 * done by transfers (each device sends its S/4 slice to 3 others: 3 S
 * each); backward: the mirror (all-gathers 3 S each, gradient transfers
 * 3 S each). With sp = 0 the two forward all-reduces alone are 12 S.
 */
static double wire_bytes(const fix *f, int task, int n)
{
    int tag = f->tg->aux[task];
    if (f->tg->kind[task] == SS_TASK_XFER)
        return f->tg->bytes[task];
    if (tag == SS_BUILD_COLL_PARTIAL || tag == SS_BUILD_COLL_GRADSUM ||
        tag == SS_BUILD_COLL_REPSUM)
        return 2.0 * (n - 1) * f->tg->bytes[task];
    return (double)(n - 1) * f->tg->bytes[task];
}

static void layer_volume(fix *f, const char *spec, double *fwd, double *bwd)
{
    ss_diag d;
    ss_diag_init(&d);
    ss_plan_free(f->p);
    f->p = NULL;
    assert_int_equal(ss_plan_from_spec(spec, f->g, f->m, &f->p, &d), SS_OK);
    run(f);
    *fwd = *bwd = 0;
    for (int t = 0; t < f->tg->n_tasks; t++) {
        int k = f->tg->kind[t], op = f->tg->op[t];
        if ((k != SS_TASK_XFER && k != SS_TASK_COLLECTIVE) || op < 0 ||
            strncmp(ss_graph_op(f->g, op)->name, "l1.", 3) != 0 ||
            (k == SS_TASK_COLLECTIVE && f->tg->aux[t] == SS_BUILD_COLL_GRAD))
            continue;
        int back = k == SS_TASK_XFER ? f->tg->aux[t] != 0
                                     : f->tg->aux[t] != SS_BUILD_COLL_PARTIAL &&
                                           f->tg->aux[t] != SS_BUILD_COLL_SCATTER;
        *(back ? bwd : fwd) += wire_bytes(f, t, 4);
    }
}

/* The REPSUM collectives (summed output gradients of a tp-replicated op) of
 * a one-layer MLA GPT under megatron:tp=2, and the bytes of each. */
static int repsum_of(const fix *f, const char *op, double *bytes)
{
    int id = ss_graph_find_op(f->g, op), n = 0;
    assert_true(id >= 0);
    for (int t = 0; t < f->tg->n_tasks; t++)
        if (f->tg->kind[t] == SS_TASK_COLLECTIVE && f->tg->op[t] == id &&
            f->tg->aux[t] == SS_BUILD_COLL_REPSUM) {
            *bytes = f->tg->bytes[t];
            n++;
        }
    return n;
}

/*
 * Multi-head latent attention under tp = 2 (Megatron-Core's layout: q_a,
 * kv_a, the norms and the shared rotary key replicated, q_b / q and kv_b
 * column-parallel, the heads split). A replicated op whose consumers differ
 * per replica has its output gradient all-reduced over the replicas once:
 * the expanded rotary key (each rank's k_cat reads its heads' share: the
 * per-rank shares sum to the whole, N S H dr 2 B = 4*16*4*8*2 = 4096 B),
 * the latent norms (read by column-parallel linears: partial sums) and, with
 * q_lora = 0, ln1 (the column-parallel q's partial input gradient beside
 * the replicated kv_a's whole one: the runtime counts kv_a's once,
 * runtime/exec.c's dup_grads; the collective and its bytes, N S E 2 B =
 * 8192 B, are what Megatron's all-reduce of q's input gradient moves).
 * With q_lora > 0 ln1 feeds only replicated q_a and kv_a: no collective.
 */
static void test_mla_tp_replica_sums(void **state)
{
    (void)state;
    for (int ql = 0; ql <= 32; ql += 32) {
        fix f;
        char spec[256];
        snprintf(spec, sizeof spec,
                 "gpt:layers=1,hidden=64,heads=4,seq=16,vocab=128,vocab_pad=0,dropout=0,"
                 "rotary=1,q_lora=%d,kv_lora=16,qk_nope=8,qk_rope=8,v_head=16", ql);
        setup_zoo(&f, spec, 4, "topologies/local-cpu.json");
        ss_diag d;
        ss_diag_init(&d);
        ss_plan_free(f.p);
        f.p = NULL;
        assert_int_equal(ss_plan_from_spec("megatron:tp=2", f.g, f.m, &f.p, &d), SS_OK);
        run(&f);
        double b = 0;
        assert_int_equal(repsum_of(&f, "l0.attn.k_pe_expand", &b), 1);
        NEAR(b, 4 * 16 * 4 * 8 * 2);
        assert_int_equal(repsum_of(&f, "l0.attn.kv_norm", &b), 1);
        NEAR(b, 4 * 16 * 16 * 2);
        assert_int_equal(repsum_of(&f, "l0.attn.k_rope", &b), 0);
        assert_int_equal(repsum_of(&f, "l0.attn.kv_split", &b), 0);
        assert_int_equal(repsum_of(&f, "l0.ln1", &b), ql == 0);
        if (ql == 0)
            NEAR(b, 4 * 16 * 64 * 2);
        else
            assert_int_equal(repsum_of(&f, "l0.attn.q_norm", &b), 1);
        teardown(&f);
    }
}

static void test_sequence_parallel_volume(void **state)
{
    (void)state;
    fix f;
    setup_zoo(&f, "gpt:layers=2,hidden=128,heads=4,seq=64,vocab=512", 8,
              "topologies/dgx-a100.json");
    const double S = 4 * 64 * 128 * 2;
    double fw, bw;
    layer_volume(&f, "megatron:tp=4,pp=1,dp=2,sp=1", &fw, &bw);
    const ss_build_stats *st = ss_build_stats_of(f.b);
    assert_int_equal(st->coll_partial, 2); /* the loss over the vocab-parallel head */
    assert_int_equal(st->coll_scatter, 2 * (1 + 2 * 2)); /* embedding + 2 per layer, per group */
    assert_int_equal(st->coll_gather, st->coll_scatter);
    NEAR(fw, 2 * 12 * S);
    NEAR(bw, 2 * 12 * S);
    layer_volume(&f, "megatron:tp=4,pp=1,dp=2,sp=0", &fw, &bw);
    double ar = 0;
    for (int t = 0; t < f.tg->n_tasks; t++)
        if (f.tg->kind[t] == SS_TASK_COLLECTIVE && f.tg->aux[t] == SS_BUILD_COLL_PARTIAL &&
            !strncmp(ss_graph_op(f.g, f.tg->op[t])->name, "l1.", 3))
            ar += wire_bytes(&f, t, 4);
    /* Megatron exactly: forward the all-reduces after attn.proj and mlp.fc2,
     * backward the all-reduces of the input gradients of the column-parallel
     * qkv and fc1 (over the replicas of ln1 and ln2); no point-to-point */
    NEAR(ar, 2 * 12 * S);
    NEAR(fw, 2 * 12 * S);
    NEAR(bw, 2 * 12 * S);
    st = ss_build_stats_of(f.b);
    assert_int_equal(st->xfer_fwd + st->xfer_bwd, 0);
    teardown(&f);
}

/*
 * No point-to-point fan-out from one device of a tensor-parallel group: a
 * tp = 8 Megatron plan of gpt (8 heads) on two DGX-A100 nodes. With pp = 1
 * the task graph has no transfer at all (replicated ops read their own
 * rank's copy; partial sums are all-reduced; column-parallel input
 * gradients are all-reduced over the replicas). With pp = 2 and one
 * micro-batch the only transfers are the pipeline sends of the one
 * activation crossing the stages: one per tensor-parallel rank (rank q of
 * stage 0 to rank q of stage 1), and their gradients back, 8 + 8.
 */
/*
 * Tiles share their costs (build_impl.h: each op keeps its distinct costs
 * once, tiles index them). chain2 (batch 64) on topologies/volunteers40.json:
 * fc1 split 4 ways by sample over peers 0, 1, 3 (T4) and 4 (RTX 3090) has
 * two distinct costs, x and fc2 (peer 0) one each: 4 costs for 6 tiles,
 * and the T4 tiles' forward durations equal, the 3090's shorter. A
 * Megatron GPT (tp 2, pp 2, dp 2, 4 micro-batches) has one shape per op on
 * one device type: as many costs as ops, far fewer than tiles, in a
 * memoizing builder (cold and warm) and a lean one alike, and every task's
 * duration the same bit for bit.
 */
static void test_shared_costs(void **state)
{
    (void)state;
    fix f;
    setup(&f, "tests/data/sim/chain2.json", "topologies/volunteers40.json");
    static const int d0[] = {0}, d4[] = {0, 1, 3, 4};
    set_cfg(&f, "x", 1, 1, d0, 0);
    set_cfg(&f, "fc1", 4, 1, d4, 0);
    set_cfg(&f, "fc2", 1, 1, d0, 0);
    run(&f);
    const ss_build_stats *st = ss_build_stats_of(f.b);
    assert_int_equal(st->fwd, 6);
    assert_int_equal(st->costs, 4);
    double t0 = f.tg->dur[find_task(&f, SS_TASK_FWD, "fc1", 0)];
    assert_true(f.tg->dur[find_task(&f, SS_TASK_FWD, "fc1", 1)] == t0);
    assert_true(f.tg->dur[find_task(&f, SS_TASK_FWD, "fc1", 2)] == t0);
    assert_true(f.tg->dur[find_task(&f, SS_TASK_FWD, "fc1", 3)] < t0);
    teardown(&f);

    setup_zoo(&f, "gpt:layers=2,hidden=128,heads=8,seq=64,vocab=512", 16,
              "topologies/dgx-a100.json");
    ss_diag d;
    ss_diag_init(&d);
    ss_plan_free(f.p);
    f.p = NULL;
    assert_int_equal(ss_plan_from_spec("megatron:tp=2,pp=2,dp=2,mb=4", f.g, f.m, &f.p, &d),
                     SS_OK);
    int n_ops = ss_graph_n_ops(f.g);
    run(&f);
    st = ss_build_stats_of(f.b);
    assert_int_equal(st->costs, n_ops);
    assert_true(st->fwd >= 8 * n_ops);
    int n = f.tg->n_tasks;
    double *dur = test_malloc((size_t)n * sizeof *dur);
    memcpy(dur, f.tg->dur, (size_t)n * sizeof *dur);
    run(&f); /* warm: every op's config hits its memo slot */
    assert_int_equal(ss_build_stats_of(f.b)->costs, n_ops);
    assert_int_equal(f.tg->n_tasks, n);
    assert_memory_equal(f.tg->dur, dur, (size_t)n * sizeof *dur);
    ss_build_set_lean(f.b, 1);
    run(&f);
    assert_int_equal(ss_build_stats_of(f.b)->costs, n_ops);
    assert_int_equal(f.tg->n_tasks, n);
    assert_memory_equal(f.tg->dur, dur, (size_t)n * sizeof *dur);
    test_free(dur);
    teardown(&f);
}

static void test_megatron_tp8_no_fanout(void **state)
{
    (void)state;
    fix f;
    setup_zoo(&f, "gpt:layers=2,hidden=128,heads=8,seq=64,vocab=512", 8,
              "topologies/dgx-a100.json");
    ss_diag d;
    ss_diag_init(&d);
    ss_machine *m2 = NULL;
    assert_int_equal(ss_machine_load_nodes(ss_test_path("topologies/dgx-a100.json"), 2, &m2, &d),
                     SS_OK);
    ss_build_free(f.b);
    ss_cost_free(f.cm);
    ss_plan_free(f.p);
    f.p = NULL;
    ss_machine_free(f.m);
    f.m = m2;
    f.cm = ss_cost_new(f.m);
    f.b = ss_build_new(f.g, f.m, f.cm);
    assert_int_equal(ss_plan_from_spec("megatron:tp=8,pp=1,dp=1", f.g, f.m, &f.p, &d), SS_OK);
    run(&f);
    const ss_build_stats *st = ss_build_stats_of(f.b);
    assert_int_equal(st->xfer_fwd + st->xfer_bwd, 0);
    assert_true(st->coll_partial > 0 && st->coll_repsum > 0);
    ss_plan_free(f.p);
    f.p = NULL;
    assert_int_equal(ss_plan_from_spec("megatron:tp=8,pp=2,dp=1,mb=1", f.g, f.m, &f.p, &d),
                     SS_OK);
    run(&f);
    st = ss_build_stats_of(f.b);
    assert_int_equal(st->xfer_fwd, 8);
    assert_int_equal(st->xfer_bwd, 8);
    /* Scatter-gather (Megatron's pipeline sends over tensor-parallel ranks):
     * the stage boundary's activation, 8 x 64 x 128 bf16 = 131072 B, goes
     * 1/8 per rank, rank q of node 0 to rank q of node 1 (GPU, PCIe switch,
     * NIC, core, NIC, PCIe switch, GPU: 2 + 2 + 1 + 1 + 2 + 2 = 10 us, 25
     * GB/s bottleneck): 10 + 16384 / 25e3 us, forward and backward; then
     * one all-gather of the 131072 B over the 8 receivers (forward) and over
     * the 8 senders (backward), each consumer waiting for it. */
    assert_int_equal(st->coll_sendgather, 2);
    int nx = 0, nag = 0;
    for (int t = 0; t < f.tg->n_tasks; t++) {
        if (f.tg->kind[t] == SS_TASK_XFER) {
            NEAR(f.tg->bytes[t], 16384);
            NEAR(f.tg->dur[t], 10 + 16384 / 25e3);
            nx++;
        } else if (f.tg->kind[t] == SS_TASK_COLLECTIVE && f.tg->aux[t] == SS_BUILD_COLL_SENDGATHER) {
            NEAR(f.tg->bytes[t], 131072);
            assert_true(f.tg->succ_off[t + 1] - f.tg->succ_off[t] >= 8);
            assert_int_equal(f.tg->pred_off[t + 1] - f.tg->pred_off[t], 8);
            nag++;
        }
    }
    assert_int_equal(nx, 16);
    assert_int_equal(nag, 2);
    teardown(&f);
}

/* ---- invariants over random plans --------------------------------------- */

static uint64_t rng = 0x9e3779b97f4a7c15ULL;
static unsigned rnd(unsigned n)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (unsigned)(rng % n);
}

/* A random valid config per op: one splittable dim, or the contraction
 * (red > 1, half of the time), split 2 or 4 ways, tiles on random devices
 * among the first nd; a config that does not validate falls back to one
 * random device. */
static void random_plan(fix *f, int nd)
{
    int devs[64];
    for (int o = 0; o < ss_graph_n_ops(f->g); o++) {
        const ss_op *op = ss_graph_op(f->g, o);
        const ss_tensor *t = ss_graph_tensor(f->g, op->outputs[0]);
        ss_pconfig c = *ss_plan_config(f->p, o);
        for (int k = 0; k < SS_MAX_DIMS; k++)
            c.deg[k] = 1;
        c.red = 1;
        c.stage = 0;
        ss_pconfig one = c;
        int deg = 2 + 2 * (int)rnd(2), dim = (int)rnd((unsigned)t->ndim);
        int64_t K = ss_op_contraction(f->g, op);
        if (K > 0 && K % deg == 0 && rnd(2) == 0)
            c.red = deg;
        else if ((ss_op_split_mask(f->g, op) & (1u << dim)) && t->shape[dim] % deg == 0)
            c.deg[dim] = deg;
        c.ntiles = c.red;
        for (int k = 0; k < c.ndim; k++)
            c.ntiles *= c.deg[k];
        for (int k = 0; k < c.ntiles; k++)
            devs[k] = (int)rnd((unsigned)nd);
        c.devices = devs;
        int dev1 = (int)rnd((unsigned)nd);
        one.ntiles = 1;
        one.devices = &dev1;
        assert_int_equal(ss_plan_set_config(f->p, o, &c, NULL), SS_OK);
        if (ss_plan_validate(f->p, f->g, f->m, NULL) != SS_OK)
            assert_int_equal(ss_plan_set_config(f->p, o, &one, NULL), SS_OK);
    }
}

/*
 * Data flow in the schedule, checked from the plan alone (not from the
 * builder's bookkeeping): for every consumer tile j and every producer tile
 * k whose output region overlaps what j reads, fwd k ends before fwd j
 * starts and bwd j ends before bwd k starts (the gradient of k's output
 * needs j's backward, whatever transfers and collectives carry it); every
 * tile's forward ends before its backward starts. Returns the number of
 * producer/consumer tile pairs checked.
 */
static long check_dataflow(const fix *f)
{
    const ss_graph *g = f->g;
    int n = ss_graph_n_ops(g);
    int *base = calloc((size_t)n + 1, sizeof(int));
    assert_non_null(base);
    for (int o = 0; o < n; o++)
        base[o + 1] = base[o] + ss_plan_config(f->p, o)->ntiles;
    int *fw = malloc((size_t)base[n] * sizeof(int)), *bw = malloc((size_t)base[n] * sizeof(int));
    assert_true(fw && bw);
    for (int j = 0; j < base[n]; j++)
        fw[j] = bw[j] = -1;
    for (int t = 0; t < f->tg->n_tasks; t++) {
        if (f->tg->kind[t] == SS_TASK_FWD)
            fw[base[f->tg->op[t]] + f->tg->tile[t]] = t;
        else if (f->tg->kind[t] == SS_TASK_BWD)
            bw[base[f->tg->op[t]] + f->tg->tile[t]] = t;
    }
    const double *s = f->r->start, *e = f->r->end;
    for (int j = 0; j < base[n]; j++) {
        assert_true(fw[j] >= 0);
        if (bw[j] >= 0)
            assert_true(s[bw[j]] >= e[fw[j]] - 1e-9);
    }
    long checked = 0;
    for (int o = 0; o < n; o++) {
        const ss_op *op = ss_graph_op(g, o);
        const ss_pconfig *c = ss_plan_config(f->p, o);
        for (int i = 0; i < op->n_in; i++) {
            int q = ss_graph_tensor(g, op->inputs[i])->producer;
            if (q < 0)
                continue;
            const ss_op *qop = ss_graph_op(g, q);
            const ss_pconfig *qc = ss_plan_config(f->p, q);
            int k = 0;
            while (qop->outputs[k] != op->inputs[i])
                k++;
            for (int j = 0; j < c->ntiles; j++) {
                ss_tile tj, tk;
                ss_region need, have, ov;
                ss_pconfig_tile(g, op, c, j, &tj);
                ss_op_input_region(g, op, &tj, i, &need);
                for (int t = 0; t < qc->ntiles; t++) {
                    ss_pconfig_tile(g, qop, qc, t, &tk);
                    ss_op_output_region(g, qop, &tk, k, &have);
                    if (ss_region_intersect(&need, &have, &ov) <= 0)
                        continue;
                    int cj = base[o] + j, pk = base[q] + t;
                    assert_true(s[fw[cj]] >= e[fw[pk]] - 1e-9);
                    if (bw[cj] >= 0 && bw[pk] >= 0) {
                        if (s[bw[pk]] < e[bw[cj]] - 1e-9)
                            fail_msg("bwd %s t%d starts at %g before bwd %s t%d ends at %g",
                                     qop->name, t, s[bw[pk]], op->name, j, e[bw[cj]]);
                        checked++;
                    }
                }
            }
        }
    }
    free(base);
    free(fw);
    free(bw);
    return checked;
}

/* Random plans (red > 1 spread over several devices among them) and
 * Megatron plans with and without sequence parallelism. */
static void test_dataflow_invariants(void **state)
{
    (void)state;
    static const char *models[] = {"gpt:layers=2,hidden=128,heads=4,seq=64,vocab=512", "mlp"};
    static const char *megatron[] = {"megatron:tp=2,pp=1,dp=2",
                                     "megatron:tp=4,pp=1,dp=1,sp=1",
                                     "megatron:tp=2,pp=2,dp=1,mb=4",
                                     "megatron:tp=2,pp=2,dp=1,mb=2,sp=1,recompute=full"};
    long checked = 0;
    int spread = 0, kinds[4] = {0};
    for (int mi = 0; mi < 2; mi++) {
        fix f;
        setup_zoo(&f, models[mi], 16, "topologies/p100x16.json");
        for (int k = 0; k < 30; k++) {
            random_plan(&f, 4);
            if (k % 3 == 1) {
                ss_plan_settings_of(f.p)->queue = SS_QUEUE_BACKWARD_FIRST;
            } else {
                ss_plan_settings_of(f.p)->queue = SS_QUEUE_FIFO;
            }
            run(&f);
            checked += check_dataflow(&f);
            const ss_build_stats *st = ss_build_stats_of(f.b);
            spread += st->coll_partial + st->coll_scatter;
            kinds[0] += st->coll_scatter;
            kinds[1] += st->coll_bcast;
            kinds[2] += st->coll_gather;
            kinds[3] += st->coll_gradsum;
        }
        for (int k = 0; mi == 0 && k < 4; k++) {
            ss_diag d;
            ss_diag_init(&d);
            ss_plan_free(f.p);
            f.p = NULL;
            assert_int_equal(ss_plan_from_spec(megatron[k], f.g, f.m, &f.p, &d), SS_OK);
            run(&f);
            checked += check_dataflow(&f);
        }
        teardown(&f);
    }
    assert_true(spread > 20); /* partial sums on several devices were exercised */
    for (int k = 0; k < 4; k++) /* and every collective that carries them */
        assert_true(kinds[k] > 0);
    assert_true(checked > 1000);
}

static void test_bad_device(void **state)
{
    (void)state;
    fix f;
    ss_diag d;
    ss_diag_init(&d);
    setup(&f, "tests/data/sim/chain2.json", "tests/data/sim/pair.json");
    static const int d5[] = {5};
    set_cfg(&f, "fc2", 1, 1, d5, 0);
    assert_int_equal(ss_build_run(f.b, f.p, f.tg, f.mm, &d), SS_ERR_INVALID);
    assert_non_null(strstr(d.msg, "fc2"));
    /* a failed run leaves no memory intervals to add */
    ss_diag_init(&d);
    assert_int_equal(ss_build_memory(f.b, f.mm, &d), SS_ERR_INVALID);
    teardown(&f);
}

/* Every allocation failure is reported as NOMEM, never a crash or a leak:
 * data parallel on ring4 (gradient buckets), and partial sums on "pair"
 * reduce-scattered for a sample-split consumer (reads, region unions,
 * gathered gradients). */
static void faults_for(fix *f)
{
    ss_diag d;
    int ok = 0;
    for (long k = 0; k < 2000 && !ok; k++) {
        ss_builder *b = NULL;
        ss_taskgraph *tg = NULL;
        ss_memory *mm = NULL;
        ss_test_fail_after(k);
        b = ss_build_new(f->g, f->m, f->cm);
        tg = ss_taskgraph_new(0, 0);
        mm = ss_memory_new();
        ss_status st = SS_ERR_NOMEM;
        ss_diag_init(&d);
        if (b && tg && mm)
            st = ss_build_run(b, f->p, tg, mm, &d);
        if (st == SS_OK)
            st = ss_build_memory(b, mm, &d);
        ss_test_fail_after(-1);
        if (st == SS_OK)
            ok = 1;
        else
            assert_int_equal(st, SS_ERR_NOMEM);
        ss_build_free(b);
        ss_taskgraph_free(tg);
        ss_memory_free(mm);
    }
    assert_true(ok);
}

static void test_fault_injection(void **state)
{
    (void)state;
    fix f;
    ss_diag d;
    setup(&f, "tests/data/sim/chain2.json", "tests/data/sim/ring4.json");
    ss_plan_free(f.p);
    f.p = NULL;
    ss_diag_init(&d);
    assert_int_equal(ss_plan_data_parallel(f.g, f.m, 4, &f.p, &d), SS_OK);
    faults_for(&f);
    teardown(&f);

    static const int d0[] = {0}, d01[] = {0, 1};
    setup(&f, "tests/data/sim/chain2.json", "tests/data/sim/pair.json");
    set_cfg(&f, "x", 1, 1, d0, 0);
    set_cfg(&f, "fc1", 1, 2, d01, 0);
    set_cfg(&f, "fc2", 2, 1, d01, 0);
    run(&f);
    assert_int_equal(ss_build_stats_of(f.b)->coll_scatter, 1);
    faults_for(&f);
    teardown(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_two_devices_chain), cmocka_unit_test(test_link_contention),
        cmocka_unit_test(test_data_parallel_ring), cmocka_unit_test(test_partial_sums),
        cmocka_unit_test(test_replicas), cmocka_unit_test(test_comm_blocks_compute),
        cmocka_unit_test(test_pipeline_bubble),   cmocka_unit_test(test_bad_device),
        cmocka_unit_test(test_blocking_stage_transfers),
        cmocka_unit_test(test_fault_injection),
        cmocka_unit_test(test_partial_grad_reaches_members),
        cmocka_unit_test(test_reduce_scatter_all_gather),
        cmocka_unit_test(test_sequence_parallel_volume),
        cmocka_unit_test(test_megatron_tp8_no_fanout),
        cmocka_unit_test(test_shared_costs),
        cmocka_unit_test(test_dataflow_invariants),
        cmocka_unit_test(test_mla_tp_replica_sums),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
