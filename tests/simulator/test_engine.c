/*
 * test_engine.c — task graph and event engine: golden schedules derived by
 * hand (derivations in each test), policies, contention, multi-resource
 * tasks, determinism, breakdowns, critical paths, errors, allocation
 * failures, and invariants over random DAGs.
 */
#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "simulator/collective.h"
#include "simulator/engine.h"
#include "simulator/taskgraph.h"

static int add1(ss_taskgraph *tg, ss_task_kind k, int r, double dur, int prio)
{
    ss_diag d = {0};
    int t = ss_taskgraph_add1(tg, k, r, dur, prio, -1, -1, -1, &d);
    assert_true(t >= 0);
    return t;
}

static int addn(ss_taskgraph *tg, ss_task_kind k, double dur, int n, const int *res)
{
    ss_diag d = {0};
    ss_task_spec s = {k, dur, 0, -1, -1, -1, 0, 0.0, n, res};
    int t = ss_taskgraph_add(tg, &s, &d);
    assert_true(t >= 0);
    return t;
}

static void dep(ss_taskgraph *tg, int a, int b)
{
    ss_diag d = {0};
    assert_int_equal(ss_taskgraph_add_dep(tg, a, b, &d), SS_OK);
}

static const ss_engine_result *run(ss_engine *e, ss_taskgraph *tg, ss_queue_policy pol)
{
    ss_diag d = {0};
    ss_engine_config cfg = {.policy = pol};
    assert_int_equal(ss_taskgraph_finalize(tg, &d), SS_OK);
    ss_status st = ss_engine_run(e, tg, &cfg, &d);
    if (st)
        fail_msg("engine: %s", d.msg);
    const ss_engine_result *r = ss_engine_result_of(e);
    assert_non_null(r);
    return r;
}

/* Two tasks in a chain on device 0: A (10 us) then B (5 us).
 * B starts when A ends: start[B] = 10, iteration = 10 + 5 = 15. */
static void test_chain_one_device(void **state)
{
    (void)state;
    ss_taskgraph *tg = ss_taskgraph_new(1, 0);
    ss_engine *e = ss_engine_new();
    int a = add1(tg, SS_TASK_FWD, 0, 10, 0);
    int b = add1(tg, SS_TASK_FWD, 0, 5, 0);
    dep(tg, a, b);
    const ss_engine_result *r = run(e, tg, SS_QUEUE_FIFO);
    assert_true(r->start[a] == 0 && r->end[a] == 10);
    assert_true(r->start[b] == 10 && r->end[b] == 15);
    assert_true(r->makespan == 15);
    assert_true(r->busy[0] == 15);
    assert_true(r->compute_us[0] == 15 && r->idle_us[0] == 0);
    /* critical path: A then B, B blocked by its predecessor */
    const int32_t *path;
    int n;
    ss_diag d = {0};
    assert_int_equal(ss_engine_critical_path(e, &path, &n, &d), SS_OK);
    assert_int_equal(n, 2);
    assert_int_equal(path[0], a);
    assert_int_equal(path[1], b);
    assert_int_equal(r->blocker[b], a);
    assert_int_equal(r->blocked_by_resource[b], 0);
    ss_engine_free(e);
    ss_taskgraph_free(tg);
}

/* A (10 us) on device 0, its 1 MB output sent over one link to device 1, then
 * B (5 us) on device 1. Link: 10 GB/s, 2 us latency; channel 0 is dev0->dev1
 * (link 0, direction a->b), resource n_devices + 0 = 2.
 *   transfer = 2 + 1e6 B / (10 GB/s = 1e4 B/us) = 2 + 100 = 102 us
 *   iteration = 10 + 102 + 5 = 117 us
 * Breakdown: device 0 computes 10 us, its channel is busy 102 us while it
 * idles (exposed), so idle = 117 - 10 = 107; device 1 computes 5 us, idle
 * 112, and the same 102 us of exposed communication. */
static void test_chain_two_devices(void **state)
{
    (void)state;
    ss_taskgraph *tg = ss_taskgraph_new(2, 2);
    ss_engine *e = ss_engine_new();
    ss_diag d = {0};
    assert_int_equal(ss_taskgraph_set_channel_ends(tg, 0, 0, 1, &d), SS_OK);
    assert_int_equal(ss_taskgraph_set_channel_ends(tg, 1, 1, 0, &d), SS_OK);
    double xfer = ss_p2p_us(1e6, 10.0, 2.0);
    assert_true(fabs(xfer - 102.0) < 1e-9);
    int a = add1(tg, SS_TASK_FWD, 0, 10, 0);
    int ch = 2;
    ss_task_spec s = {SS_TASK_XFER, xfer, 0, 0, 0, 0, 0, 1e6, 1, &ch};
    int x = ss_taskgraph_add(tg, &s, &d);
    int b = add1(tg, SS_TASK_FWD, 1, 5, 0);
    dep(tg, a, x);
    dep(tg, x, b);
    const ss_engine_result *r = run(e, tg, SS_QUEUE_FIFO);
    assert_true(fabs(r->start[x] - 10) < 1e-9);
    assert_true(fabs(r->start[b] - 112) < 1e-9);
    assert_true(fabs(r->makespan - 117) < 1e-9);
    assert_true(fabs(r->busy[2] - 102) < 1e-9);
    assert_true(r->busy[3] == 0);
    assert_true(fabs(r->compute_us[0] - 10) < 1e-9);
    assert_true(fabs(r->comm_us[0] - 102) < 1e-9);
    assert_true(fabs(r->exposed_comm_us[0] - 102) < 1e-9);
    assert_true(fabs(r->idle_us[0] - 107) < 1e-9);
    assert_true(fabs(r->compute_us[1] - 5) < 1e-9);
    assert_true(fabs(r->comm_us[1] - 102) < 1e-9);
    assert_true(fabs(r->idle_us[1] - 112) < 1e-9);
    const int32_t *path;
    int n;
    assert_int_equal(ss_engine_critical_path(e, &path, &n, &d), SS_OK);
    assert_int_equal(n, 3);
    assert_int_equal(path[0], a);
    assert_int_equal(path[1], x);
    assert_int_equal(path[2], b);
    ss_engine_free(e);
    ss_taskgraph_free(tg);
}

/* Communication overlapped with compute is not exposed: device 0 computes
 * C1 (0..50) while transfer X (0..30) runs on its channel, then C2 (50..60).
 * comm = 30, exposed = 0, idle = 60 - 60 = 0. Device 1 (other end) does
 * nothing: comm 30, all of it exposed, idle 60. */
static void test_overlap_breakdown(void **state)
{
    (void)state;
    ss_taskgraph *tg = ss_taskgraph_new(2, 2);
    ss_engine *e = ss_engine_new();
    ss_diag d = {0};
    ss_taskgraph_set_channel_ends(tg, 0, 0, 1, &d);
    ss_taskgraph_set_channel_ends(tg, 1, 1, 0, &d);
    int c1 = add1(tg, SS_TASK_BWD, 0, 50, 0);
    add1(tg, SS_TASK_XFER, 2, 30, 0);
    int c2 = add1(tg, SS_TASK_BWD, 0, 10, 0);
    dep(tg, c1, c2);
    const ss_engine_result *r = run(e, tg, SS_QUEUE_FIFO);
    assert_true(r->makespan == 60);
    assert_true(r->comm_us[0] == 30 && r->exposed_comm_us[0] == 0 && r->idle_us[0] == 0);
    assert_true(r->comm_us[1] == 30 && r->exposed_comm_us[1] == 30 && r->idle_us[1] == 60);
    ss_engine_free(e);
    ss_taskgraph_free(tg);
}

/* Two transfers of 100 us each, both ready at 0 on the same channel: the
 * channel is FIFO and exclusive, so the first (lower id) runs 0..100 and the
 * second 100..200: it finishes at 2x. On two different channels both would
 * end at 100. */
static void test_contention(void **state)
{
    (void)state;
    ss_taskgraph *tg = ss_taskgraph_new(2, 2);
    ss_engine *e = ss_engine_new();
    int x1 = add1(tg, SS_TASK_XFER, 2, 100, 0);
    int x2 = add1(tg, SS_TASK_XFER, 2, 100, 0);
    int x3 = add1(tg, SS_TASK_XFER, 3, 100, 0); /* other direction: no contention */
    const ss_engine_result *r = run(e, tg, SS_QUEUE_FIFO);
    assert_true(r->end[x1] == 100);
    assert_true(r->end[x2] == 200);
    assert_true(r->end[x3] == 100);
    assert_true(r->busy[2] == 200);
    assert_int_equal(r->blocker[x2], x1);
    assert_int_equal(r->blocked_by_resource[x2], 1);
    ss_engine_free(e);
    ss_taskgraph_free(tg);
}

/* Priority tie-breaking on one device, all ready at 0:
 *   t0 prio 5 (10 us), t1 prio 1 (10 us), t2 prio 1 (10 us), t3 prio 0 but
 *   ready at 5 (after a 5 us task on device 1).
 * At 0: keys (0,5,t0) (0,1,t1) (0,1,t2) -> t1 runs 0..10 (priority, then id).
 * At 10: t3 is ready since 5 with key (5,0,t3); t0 and t2 have ready 0, so
 * FIFO by ready time first: t2 (prio 1) runs 10..20, t0 20..30, t3 30..40. */
static void test_priority_ties(void **state)
{
    (void)state;
    ss_taskgraph *tg = ss_taskgraph_new(2, 0);
    ss_engine *e = ss_engine_new();
    int t0 = add1(tg, SS_TASK_FWD, 0, 10, 5);
    int t1 = add1(tg, SS_TASK_FWD, 0, 10, 1);
    int t2 = add1(tg, SS_TASK_FWD, 0, 10, 1);
    int p = add1(tg, SS_TASK_FWD, 1, 5, 0);
    int t3 = add1(tg, SS_TASK_FWD, 0, 10, 0);
    dep(tg, p, t3);
    const ss_engine_result *r = run(e, tg, SS_QUEUE_FIFO);
    assert_true(r->start[t1] == 0);
    assert_true(r->start[t2] == 10);
    assert_true(r->start[t0] == 20);
    assert_true(r->start[t3] == 30);
    ss_engine_free(e);
    ss_taskgraph_free(tg);
}

/* A multi-resource task waits for all its resources, and holds the head of
 * every queue it is in (no overtaking on the free resource):
 *   A on channel c0 (res 2), 0..50.
 *   M on c0 and c1 (res 2, 3), ready at 0: c1 is free but c0 is not, so M
 *     starts at 50 and holds both until 70.
 *   Y on c1 alone, ready at 10 (after a 10 us task on device 0): its key
 *     (10, ..) is behind M's (0, ..) in c1's queue, so Y waits for M: 70..75.
 *   Z on device 1, independent, 0..5: unaffected. */
static void test_multi_resource(void **state)
{
    (void)state;
    ss_taskgraph *tg = ss_taskgraph_new(2, 2);
    ss_engine *e = ss_engine_new();
    int a = add1(tg, SS_TASK_XFER, 2, 50, 0);
    int both[2] = {2, 3};
    int m = addn(tg, SS_TASK_COLLECTIVE, 20, 2, both);
    int pre = add1(tg, SS_TASK_FWD, 0, 10, 0);
    int y = add1(tg, SS_TASK_XFER, 3, 5, 0);
    int z = add1(tg, SS_TASK_FWD, 1, 5, 0);
    dep(tg, pre, y);
    const ss_engine_result *r = run(e, tg, SS_QUEUE_FIFO);
    assert_true(r->end[a] == 50);
    assert_true(r->start[m] == 50 && r->end[m] == 70);
    assert_true(r->start[y] == 70 && r->end[y] == 75);
    assert_true(r->start[z] == 0);
    assert_true(r->busy[3] == 25);
    assert_int_equal(r->blocker[m], a);
    assert_int_equal(r->blocker[y], m);
    ss_engine_free(e);
    ss_taskgraph_free(tg);
}

/* A task with no resources (a join) starts at its ready time even while
 * everything else is busy; zero-duration tasks chain at the same instant. */
static void test_join_and_zero(void **state)
{
    (void)state;
    ss_taskgraph *tg = ss_taskgraph_new(1, 0);
    ss_engine *e = ss_engine_new();
    int a = add1(tg, SS_TASK_FWD, 0, 7, 0);
    int j = addn(tg, SS_TASK_OTHER, 0, 0, NULL);
    int z = add1(tg, SS_TASK_OTHER, 0, 0, 0);
    int b = add1(tg, SS_TASK_FWD, 0, 3, 0);
    dep(tg, a, j);
    dep(tg, j, z);
    dep(tg, z, b);
    const ss_engine_result *r = run(e, tg, SS_QUEUE_FIFO);
    assert_true(r->start[j] == 7 && r->end[j] == 7);
    assert_true(r->start[z] == 7 && r->end[z] == 7);
    assert_true(r->start[b] == 7 && r->makespan == 10);
    ss_engine_free(e);
    ss_taskgraph_free(tg);
}

/* ---- pipelines ---- */

enum { P = 4, M = 8 };

/* Stage s on device s; F[s][i] = 1 us, B[s][i] = 2 us; activations and
 * gradients cross between stages through zero-cost transfers on the channel
 * between the stages (channel 2s: s -> s+1, 2s+1: s+1 -> s). gpipe adds the
 * flush: the last stage's backwards wait for its last forward.
 * limit adds 1F1B's in-flight bound: F[s][i + P - s] after B[s][i]. */
static void build_pipeline(ss_taskgraph *tg, int gpipe, int limit, int F[P][M], int B[P][M])
{
    for (int s = 0; s < P; s++)
        for (int i = 0; i < M; i++)
            F[s][i] = add1(tg, SS_TASK_FWD, s, 1, 0);
    for (int s = 0; s < P; s++)
        for (int i = 0; i < M; i++)
            B[s][i] = add1(tg, SS_TASK_BWD, s, 2, 0);
    for (int s = 0; s + 1 < P; s++)
        for (int i = 0; i < M; i++) {
            int xf = add1(tg, SS_TASK_XFER, P + 2 * s, 0, 0);
            dep(tg, F[s][i], xf);
            dep(tg, xf, F[s + 1][i]);
            int xb = add1(tg, SS_TASK_XFER, P + 2 * s + 1, 0, 0);
            dep(tg, B[s + 1][i], xb);
            dep(tg, xb, B[s][i]);
        }
    for (int i = 0; i < M; i++)
        dep(tg, F[P - 1][i], B[P - 1][i]);
    if (gpipe)
        for (int i = 0; i < M - 1; i++)
            dep(tg, F[P - 1][M - 1], B[P - 1][i]);
    if (limit)
        for (int s = 0; s < P; s++)
            for (int i = 0; i + P - s < M; i++)
                dep(tg, B[s][i], F[s][i + P - s]);
}

/* Max over time of micro-batches in flight at stage s: forward ended, its
 * backward not yet ended (a backward ending at t counts before a forward
 * ending at t). */
static int max_in_flight(const ss_engine_result *r, int F[P][M], int B[P][M], int s)
{
    int best = 0;
    double ts[2 * M];
    int dl[2 * M];
    for (int i = 0; i < M; i++) {
        ts[2 * i] = r->end[F[s][i]];
        dl[2 * i] = 1;
        ts[2 * i + 1] = r->end[B[s][i]];
        dl[2 * i + 1] = -1;
    }
    for (int i = 1; i < 2 * M; i++) /* insertion sort by (time, delta) */
        for (int j = i; j > 0 && (ts[j] < ts[j - 1] || (ts[j] == ts[j - 1] && dl[j] < dl[j - 1])); j--) {
            double t = ts[j]; ts[j] = ts[j - 1]; ts[j - 1] = t;
            int x = dl[j]; dl[j] = dl[j - 1]; dl[j - 1] = x;
        }
    int c = 0;
    for (int i = 0; i < 2 * M; i++) {
        c += dl[i];
        if (c > best)
            best = c;
    }
    return best;
}

/* GPipe, FIFO, p = 4 stages, m = 8 micro-batches, tf = 1, tb = 2.
 * Forward: F[s][i] runs at s + i (stage s is busy from s to s + 8).
 * The last stage starts backward after F[3][7] ends at 11 (the flush); all
 * its backwards are then ready at 11 and FIFO runs them by id: B[3][i] at
 * 11 + 2i; B[s][i] waits for B[s+1][i] only (stage s finished its forwards at
 * s + 8 <= 11), so B[s][i] starts at 11 + 2i + 2(3 - s); B[0][7] ends at
 * 11 + 14 + 6 + 2 = 33 = (m + p - 1)(tf + tb).
 * Each stage computes m(tf + tb) = 24, so its bubble is (33 - 24) / 33 =
 * 9/33 = (p - 1)/(m + p - 1) = 3/11. All 8 micro-batches of stage 0 are in
 * flight at once (forwards end by 8, first backward ends at 19). */
static void test_pipeline_gpipe(void **state)
{
    (void)state;
    int F[P][M], B[P][M];
    ss_taskgraph *tg = ss_taskgraph_new(P, 2 * (P - 1));
    ss_engine *e = ss_engine_new();
    build_pipeline(tg, 1, 0, F, B);
    const ss_engine_result *r = run(e, tg, SS_QUEUE_FIFO);
    assert_true(r->makespan == 33);
    for (int s = 0; s < P; s++) {
        assert_true(r->compute_us[s] == 24);
        double bubble = r->idle_us[s] / r->makespan;
        assert_true(fabs(bubble - (double)(P - 1) / (M + P - 1)) < 1e-12);
        for (int i = 0; i < M; i++) {
            assert_true(r->start[F[s][i]] == s + i);
            assert_true(r->start[B[s][i]] == 11 + 2 * i + 2 * (P - 1 - s));
        }
    }
    assert_int_equal(max_in_flight(r, F, B, 0), 8);
    assert_int_equal(max_in_flight(r, F, B, 3), 8);
    ss_engine_free(e);
    ss_taskgraph_free(tg);
}

/* Same pipeline without the flush, under backward-first (1F1B). The last
 * stage runs F[3][i] as soon as it arrives and then, preferring backward,
 * B[3][i] right away: F at 3 + 3i, B at 4 + 3i, so B[3][7] ends at 27 and the
 * gradients ripple up 2 us per stage: B[0][7] ends at 27 + 3*2 = 33 — the same
 * iteration time as GPipe. Stage 3 holds 1 micro-batch at a time (GPipe: 8).
 * Stage 2: F[2][0..3] at 2..5, B[2][0] at 6 (ready at 6, preferred), then it
 * alternates F, B: 4 in flight at most. Stage 1: F[1][0..6] at 1..7, B[1][0]
 * arrives at 8: 7 in flight. Stage 0 finishes all forwards by 8 < 12 when its
 * first backward can arrive (4 tf + 4 tb): 8.
 * With 1F1B's dependency bound (F[s][i+p-s] after B[s][i]) the textbook
 * schedule appears: in flight p - s = 4, 3, 2, 1, iteration still 33. */
static void test_pipeline_1f1b(void **state)
{
    (void)state;
    int F[P][M], B[P][M];
    ss_taskgraph *tg = ss_taskgraph_new(P, 2 * (P - 1));
    ss_engine *e = ss_engine_new();
    build_pipeline(tg, 0, 0, F, B);
    const ss_engine_result *r = run(e, tg, SS_QUEUE_BACKWARD_FIRST);
    assert_true(r->makespan == 33);
    for (int i = 0; i < M; i++) {
        assert_true(r->start[F[3][i]] == 3 + 3 * i);
        assert_true(r->start[B[3][i]] == 4 + 3 * i);
    }
    const int expect[P] = {8, 7, 4, 1};
    for (int s = 0; s < P; s++)
        assert_int_equal(max_in_flight(r, F, B, s), expect[s]);

    ss_diag d = {0};
    assert_int_equal(ss_taskgraph_reset(tg, P, 2 * (P - 1), &d), SS_OK);
    build_pipeline(tg, 0, 1, F, B);
    r = run(e, tg, SS_QUEUE_BACKWARD_FIRST);
    assert_true(r->makespan == 33);
    for (int s = 0; s < P; s++)
        assert_int_equal(max_in_flight(r, F, B, s), P - s);
    ss_engine_free(e);
    ss_taskgraph_free(tg);
}

/* The policy matters: at stage 3 with FIFO and no flush, F[3][1] (ready 4,
 * lower id) beats B[3][0] (ready 4), so the last stage holds 2 micro-batches
 * at once where backward-first holds 1. */
static void test_policy_differs(void **state)
{
    (void)state;
    int F[P][M], B[P][M];
    ss_taskgraph *tg = ss_taskgraph_new(P, 2 * (P - 1));
    ss_engine *e = ss_engine_new();
    build_pipeline(tg, 0, 0, F, B);
    const ss_engine_result *r = run(e, tg, SS_QUEUE_FIFO);
    assert_true(r->start[F[3][1]] == 4);
    assert_true(r->start[B[3][0]] == 5);
    assert_true(max_in_flight(r, F, B, 3) >= 2);
    ss_engine_free(e);
    ss_taskgraph_free(tg);
}

/* ---- random DAGs ---- */

static uint64_t rng_state;
static uint32_t rnd(void)
{
    rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (uint32_t)(rng_state >> 33);
}

/* Micro-batches random_graph gives its tasks: none (-1) when 0, else a
 * mix of -1, small ones and ones past the engine's groups, a function of
 * the id (the random stream stays the same). */
static int rg_mb;

static int rg_mb_of(int t)
{
    if (!rg_mb)
        return -1;
    unsigned h = (unsigned)t * 2654435761u >> 7;
    return h % 9 == 0 ? -1 : h % 13 == 0 ? 2000 + (int)(h % 5) : (int)(h % (unsigned)rg_mb);
}

static void random_graph(ss_taskgraph *tg, int n, uint64_t seed)
{
    ss_diag d = {0};
    rng_state = seed;
    int nres = tg->n_resources;
    for (int c = 0; c < tg->n_channels; c++)
        ss_taskgraph_set_channel_ends(tg, c, (int)(rnd() % tg->n_devices), (int)(rnd() % tg->n_devices), &d);
    for (int t = 0; t < n; t++) {
        int res[3], k = (int)(rnd() % 8);
        k = k == 0 ? 0 : k < 6 ? 1 : k < 7 ? 2 : 3;
        if (k > nres)
            k = nres;
        for (int i = 0; i < k; i++) {
            int r, dup;
            do {
                r = (int)(rnd() % (unsigned)nres);
                dup = 0;
                for (int j = 0; j < i; j++)
                    dup |= res[j] == r;
            } while (dup);
            res[i] = r;
        }
        double dur = rnd() % 10 == 0 ? 0.0 : (double)(rnd() % 1000) / 8.0;
        ss_task_spec s = {(ss_task_kind)(rnd() % SS_TASK_KIND_COUNT), dur, (int)(rnd() % 3) - 1,
                          t % 7, t % 5, rg_mb_of(t), 0, 0, k, res};
        assert_true(ss_taskgraph_add(tg, &s, &d) >= 0);
        int ne = t ? (int)(rnd() % 4) : 0;
        for (int i = 0; i < ne; i++) {
            int from = t - 1 - (int)(rnd() % (unsigned)(t < 30 ? t : 30));
            assert_int_equal(ss_taskgraph_add_dep(tg, from, t, &d), SS_OK);
        }
    }
}

typedef struct iv { double s, e; } iv;
static int iv_cmp(const void *a, const void *b)
{
    const iv *x = a, *y = b;
    return x->s < y->s ? -1 : x->s > y->s ? 1 : (x->e > y->e) - (x->e < y->e);
}

static void check_invariants(ss_engine *e, const ss_taskgraph *tg)
{
    const ss_engine_result *r = ss_engine_result_of(e);
    int n = tg->n_tasks;
    double *longest = calloc((size_t)n, sizeof *longest);
    double chain = 0;
    for (int t = 0; t < n; t++) {
        assert_true(r->end[t] == r->start[t] + tg->dur[t]);
        double rd = 0;
        for (int i = tg->pred_off[t]; i < tg->pred_off[t + 1]; i++) {
            int p = tg->pred[i];
            assert_true(r->start[t] >= r->end[p]);
            if (longest[p] > rd)
                rd = longest[p];
        }
        longest[t] = rd + tg->dur[t]; /* preds have lower ids in random_graph */
        if (longest[t] > chain)
            chain = longest[t];
        assert_true(r->end[t] <= r->makespan);
    }
    assert_true(r->makespan >= chain - 1e-9);
    for (int res = 0; res < tg->n_resources; res++) {
        assert_true(r->makespan >= r->busy[res] - 1e-9);
        iv *v = malloc(((size_t)n + 1) * sizeof *v);
        int k = 0;
        for (int t = 0; t < n; t++)
            for (int i = tg->res_off[t]; i < tg->res_off[t + 1]; i++)
                if (tg->res[i] == res)
                    v[k++] = (iv){r->start[t], r->end[t]};
        qsort(v, (size_t)k, sizeof *v, iv_cmp);
        for (int i = 1; i < k; i++)
            assert_true(v[i].s >= v[i - 1].e); /* no overlap on one resource */
        free(v);
    }
    for (int dv = 0; dv < tg->n_devices; dv++) {
        assert_true(r->exposed_comm_us[dv] <= r->comm_us[dv] + 1e-9);
        assert_true(r->exposed_comm_us[dv] <= r->idle_us[dv] + 1e-6);
        assert_true(r->comm_us[dv] <= r->makespan + 1e-9);
    }
    /* Rounds rank the start and end times: sorted by time, the ranks run
     * 0, 1, ... n_rounds-1 without gaps, equal exactly where times are. */
    iv *tr = malloc(2 * ((size_t)n + 1) * sizeof *tr);
    for (int t = 0; t < n; t++) {
        tr[2 * t] = (iv){r->start[t], (double)r->start_round[t]};
        tr[2 * t + 1] = (iv){r->end[t], (double)r->end_round[t]};
    }
    qsort(tr, 2 * (size_t)n, sizeof *tr, iv_cmp);
    for (int i = 0; i < 2 * n; i++) {
        if (i == 0) {
            assert_true(tr[i].e == 0);
        } else if (tr[i].s == tr[i - 1].s) {
            assert_true(tr[i].e == tr[i - 1].e);
        } else {
            assert_true(tr[i].s > tr[i - 1].s);
            assert_true(tr[i].e == tr[i - 1].e + 1);
        }
    }
    if (n > 0)
        assert_true(tr[2 * n - 1].e == (double)(r->n_rounds - 1));
    free(tr);
    /* Critical path: gap-free from 0 to the makespan. */
    const int32_t *path;
    int np;
    ss_diag d = {0};
    assert_int_equal(ss_engine_critical_path(e, &path, &np, &d), SS_OK);
    if (n > 0) {
        assert_true(np >= 1);
        assert_true(r->start[path[0]] == 0);
        assert_true(r->end[path[np - 1]] == r->makespan);
        for (int i = 1; i < np; i++)
            assert_true(r->start[path[i]] == r->end[path[i - 1]]);
    }
    free(longest);
}

static void test_random_invariants(void **state)
{
    (void)state;
    ss_engine *e = ss_engine_new();
    ss_taskgraph *tg = ss_taskgraph_new(4, 6);
    ss_diag d = {0};
    for (int rep = 0; rep < 40; rep++) {
        int nd = 1 + rep % 5, nc = (rep * 3) % 9;
        assert_int_equal(ss_taskgraph_reset(tg, nd, nc, &d), SS_OK);
        random_graph(tg, 50 + rep * 40, 1000 + (uint64_t)rep);
        run(e, tg, rep % 2 ? SS_QUEUE_BACKWARD_FIRST : SS_QUEUE_FIFO);
        check_invariants(e, tg);
    }
    ss_taskgraph_free(tg);
    ss_engine_free(e);
}

/* Same graph twice (fresh engine and reused engine) => identical arrays. */
static void test_determinism(void **state)
{
    (void)state;
    ss_taskgraph *g1 = ss_taskgraph_new(5, 8), *g2 = ss_taskgraph_new(5, 8);
    ss_taskgraph_set_pred_lists(g2, 0); /* what the engine reads is the same */
    random_graph(g1, 3000, 42);
    random_graph(g2, 3000, 42);
    ss_engine *e1 = ss_engine_new(), *e2 = ss_engine_new();
    for (int pol = 0; pol < 2; pol++) {
        const ss_engine_result *a = run(e1, g1, (ss_queue_policy)pol);
        const ss_engine_result *b = run(e2, g2, (ss_queue_policy)pol);
        size_t n = (size_t)g1->n_tasks;
        assert_memory_equal(g1->succ_off, g2->succ_off, (n + 1) * sizeof(int32_t));
        assert_memory_equal(g1->succ, g2->succ, (size_t)g1->n_edges * sizeof(int32_t));
        assert_memory_equal(a->start, b->start, n * sizeof(double));
        assert_memory_equal(a->end, b->end, n * sizeof(double));
        assert_memory_equal(a->ready, b->ready, n * sizeof(double));
        assert_memory_equal(a->blocker, b->blocker, n * sizeof(int32_t));
        assert_memory_equal(a->blocked_by_resource, b->blocked_by_resource, n);
        assert_memory_equal(a->start_round, b->start_round, n * sizeof(int32_t));
        assert_memory_equal(a->end_round, b->end_round, n * sizeof(int32_t));
        assert_memory_equal(a->busy, b->busy, (size_t)g1->n_resources * sizeof(double));
        assert_memory_equal(a->comm_us, b->comm_us, 5 * sizeof(double));
        assert_true(a->makespan == b->makespan);
        /* rerun into the used engine */
        double mk = a->makespan;
        double s7 = a->start[7];
        a = run(e1, g1, (ss_queue_policy)pol);
        assert_true(a->makespan == mk && a->start[7] == s7);
    }
    ss_engine_free(e1);
    ss_engine_free(e2);
    ss_taskgraph_free(g1);
    ss_taskgraph_free(g2);
}

/* Lean mode (work arrays freed after every run, positions always the ids)
 * changes no result: random DAGs, small (positions are ids in both) and
 * large (70,000 tasks: the normal engine reorders them, lean does not), both
 * policies, every array of the result and the critical path bit for bit
 * equal to a normal engine's, run after run on the same lean engine (it
 * regrows what it freed), and a graph with a cycle still reported. */
static void test_lean(void **state)
{
    (void)state;
    ss_engine *e = ss_engine_new(), *lean = ss_engine_new();
    ss_engine_set_lean(lean, 1);
    ss_taskgraph *tg = ss_taskgraph_new(4, 6);
    ss_diag d = {0};
    for (int rep = 0; rep < 6; rep++) {
        int nd = 1 + rep % 4, nc = (rep * 5) % 7, n = rep < 4 ? 400 + 300 * rep : 70000;
        ss_queue_policy pol = rep % 2 ? SS_QUEUE_BACKWARD_FIRST : SS_QUEUE_FIFO;
        assert_int_equal(ss_taskgraph_reset(tg, nd, nc, &d), SS_OK);
        rg_mb = rep >= 4 ? 3 + rep : 0;
        random_graph(tg, n, 4400 + (uint64_t)rep);
        rg_mb = 0;
        const ss_engine_result *a = run(e, tg, pol), *b = run(lean, tg, pol);
        assert_true(a->makespan == b->makespan);
        assert_int_equal(a->n_rounds, b->n_rounds);
        assert_memory_equal(a->start, b->start, (size_t)n * sizeof(double));
        assert_memory_equal(a->end, b->end, (size_t)n * sizeof(double));
        assert_memory_equal(a->ready, b->ready, (size_t)n * sizeof(double));
        assert_memory_equal(a->blocker, b->blocker, (size_t)n * sizeof(int32_t));
        assert_memory_equal(a->blocked_by_resource, b->blocked_by_resource, (size_t)n);
        assert_memory_equal(a->start_round, b->start_round, (size_t)n * sizeof(int32_t));
        assert_memory_equal(a->end_round, b->end_round, (size_t)n * sizeof(int32_t));
        assert_memory_equal(a->busy, b->busy, (size_t)a->n_resources * sizeof(double));
        assert_memory_equal(a->comm_us, b->comm_us, (size_t)nd * sizeof(double));
        assert_memory_equal(a->exposed_comm_us, b->exposed_comm_us, (size_t)nd * sizeof(double));
        const int32_t *pa, *pb;
        int na, nb;
        assert_int_equal(ss_engine_critical_path(e, &pa, &na, &d), SS_OK);
        assert_int_equal(ss_engine_critical_path(lean, &pb, &nb, &d), SS_OK);
        assert_int_equal(na, nb);
        assert_memory_equal(pa, pb, (size_t)na * sizeof(int32_t));
    }
    /* a cycle: 0 -> 1 -> 0 */
    assert_int_equal(ss_taskgraph_reset(tg, 1, 0, &d), SS_OK);
    int x = add1(tg, SS_TASK_FWD, 0, 1, 0), y = add1(tg, SS_TASK_FWD, 0, 1, 0);
    dep(tg, x, y);
    dep(tg, y, x);
    assert_int_equal(ss_taskgraph_finalize(tg, &d), SS_OK);
    ss_engine_config cfg = {.policy = SS_QUEUE_FIFO};
    assert_int_equal(ss_engine_run(lean, tg, &cfg, &d), SS_ERR_INVALID);
    assert_non_null(strstr(d.msg, "cycle"));
    ss_taskgraph_free(tg);
    ss_engine_free(e);
    ss_engine_free(lean);
}

/* Per resource, the summed durations of tg's tasks on it (CUTTING's load). */
static double *loads_of(const ss_taskgraph *tg)
{
    double *l = calloc((size_t)tg->n_resources + 1, sizeof *l);
    for (int t = 0; t < tg->n_tasks; t++)
        for (int k = tg->res_off[t]; k < tg->res_off[t + 1]; k++)
            l[tg->res[k]] += tg->dur[t];
    return l;
}

/* Cutting, by hand: A (10) on device 0, then B (10) on device 1. Every
 * resource carries 10 us but B cannot start before 10, so the run proves
 * at B's start that the makespan is at least 20: a cutoff of 15 stops it
 * with bound 20 and no result; 20 (the makespan) does not, and gives the
 * uncut result. */
static void test_cut_golden(void **state)
{
    (void)state;
    ss_taskgraph *tg = ss_taskgraph_new(2, 0);
    ss_engine *e = ss_engine_new();
    ss_diag d = {0};
    int a = add1(tg, SS_TASK_FWD, 0, 10, 0);
    int b = add1(tg, SS_TASK_FWD, 1, 10, 0);
    dep(tg, a, b);
    assert_true(run(e, tg, SS_QUEUE_FIFO)->makespan == 20);
    double *load = loads_of(tg), bound = 0;
    assert_false(ss_engine_cut(e, &bound));
    ss_engine_config cfg = {.policy = SS_QUEUE_FIFO, .load = load, .cutoff = 15};
    assert_int_equal(ss_engine_run(e, tg, &cfg, &d), SS_OK);
    assert_true(ss_engine_cut(e, &bound));
    assert_true(bound == 20);
    assert_null(ss_engine_result_of(e));
    cfg.cutoff = 20;
    assert_int_equal(ss_engine_run(e, tg, &cfg, &d), SS_OK);
    assert_false(ss_engine_cut(e, NULL));
    const ss_engine_result *r = ss_engine_result_of(e);
    assert_non_null(r);
    assert_true(r->makespan == 20 && r->start[b] == 10);
    free(load);
    ss_engine_free(e);
    ss_taskgraph_free(tg);
}

/* On random DAGs under both policies: a cutoff at or above the makespan
 * never stops the run and changes no result (bit-identical times); below
 * it, a run that stops gives a bound above the cutoff and at most the
 * makespan (a true lower bound), and one below the largest load always
 * stops. Runs alternate with uncut ones on the same engine, so a stopped
 * run leaves nothing behind. */
static void test_cut_random(void **state)
{
    (void)state;
    ss_engine *e = ss_engine_new(), *e2 = ss_engine_new();
    ss_taskgraph *tg = ss_taskgraph_new(4, 6);
    ss_diag d = {0};
    int stopped = 0, stopped_late = 0;
    for (int rep = 0; rep < 12; rep++) {
        int nd = 1 + rep % 4, nc = (rep * 5) % 7;
        assert_int_equal(ss_taskgraph_reset(tg, nd, nc, &d), SS_OK);
        random_graph(tg, 300 + rep * 50, 9100 + (uint64_t)rep);
        ss_queue_policy pol = rep % 2 ? SS_QUEUE_BACKWARD_FIRST : SS_QUEUE_FIFO;
        const ss_engine_result *full = run(e, tg, pol);
        int n = tg->n_tasks;
        double mk = full->makespan, *load = loads_of(tg), maxload = 0;
        for (int r = 0; r < tg->n_resources; r++)
            maxload = load[r] > maxload ? load[r] : maxload;
        const double fr[] = {0, 0.3, 0.6, 0.9, 0.97, 0.999, 1.0, 1.5};
        for (int k = 0; k < (int)(sizeof fr / sizeof fr[0]); k++) {
            ss_engine_config cfg = {.policy = pol, .load = load, .cutoff = fr[k] * mk};
            assert_int_equal(ss_engine_run(e2, tg, &cfg, &d), SS_OK);
            double bound = -1;
            if (ss_engine_cut(e2, &bound)) {
                assert_true(fr[k] < 1.0);
                assert_true(bound > cfg.cutoff && bound <= mk * (1 + 1e-12));
                assert_null(ss_engine_result_of(e2));
                stopped++;
                stopped_late += cfg.cutoff >= maxload;
            } else {
                assert_true(cfg.cutoff >= maxload);
                const ss_engine_result *r = ss_engine_result_of(e2);
                assert_non_null(r);
                assert_memory_equal(r->start, full->start, (size_t)n * sizeof(double));
                assert_memory_equal(r->end, full->end, (size_t)n * sizeof(double));
                assert_true(r->makespan == mk);
            }
        }
        free(load);
    }
    assert_true(stopped > 40);
    assert_true(stopped_late > 5); /* the run's bound, not the static load, stopped them */
    ss_taskgraph_free(tg);
    ss_engine_free(e);
    ss_engine_free(e2);
}

/* The engine's internal task order (by micro-batch within windows of ids,
 * engine.c) changes no result: random DAGs whose tasks carry micro-batches
 * (the engine reorders graphs of more than 2^16 tasks; 70,000 and 90,000
 * span several windows) give bit-identical results to the same DAGs
 * without any (no reordering), under both policies. */
static void test_positions_invisible(void **state)
{
    (void)state;
    ss_engine *e = ss_engine_new(), *e2 = ss_engine_new();
    ss_taskgraph *tg = ss_taskgraph_new(4, 6), *tg2 = ss_taskgraph_new(4, 6);
    ss_diag d = {0};
    for (int rep = 0; rep < 6; rep++) {
        int nd = 1 + rep % 4, nc = (rep * 5) % 7, n = rep < 4 ? 500 + 300 * rep : 50000 + 20000 * rep;
        ss_engine_config cfg = {.policy = rep % 2 ? SS_QUEUE_BACKWARD_FIRST : SS_QUEUE_FIFO};
        assert_int_equal(ss_taskgraph_reset(tg, nd, nc, &d), SS_OK);
        assert_int_equal(ss_taskgraph_reset(tg2, nd, nc, &d), SS_OK);
        rg_mb = 0;
        random_graph(tg, n, 9100 + (uint64_t)rep);
        rg_mb = 2 + rep;
        random_graph(tg2, n, 9100 + (uint64_t)rep);
        rg_mb = 0;
        const ss_engine_result *a = run(e, tg, cfg.policy), *b = run(e2, tg2, cfg.policy);
        assert_true(a->makespan == b->makespan);
        assert_int_equal(a->n_rounds, b->n_rounds);
        assert_memory_equal(a->start, b->start, (size_t)n * sizeof(double));
        assert_memory_equal(a->end, b->end, (size_t)n * sizeof(double));
        assert_memory_equal(a->ready, b->ready, (size_t)n * sizeof(double));
        assert_memory_equal(a->blocker, b->blocker, (size_t)n * sizeof(int32_t));
        assert_memory_equal(a->blocked_by_resource, b->blocked_by_resource, (size_t)n);
        assert_memory_equal(a->start_round, b->start_round, (size_t)n * sizeof(int32_t));
        assert_memory_equal(a->end_round, b->end_round, (size_t)n * sizeof(int32_t));
        assert_memory_equal(a->busy, b->busy, (size_t)a->n_resources * sizeof(double));
        assert_memory_equal(a->comm_us, b->comm_us, (size_t)nd * sizeof(double));
        assert_memory_equal(a->exposed_comm_us, b->exposed_comm_us, (size_t)nd * sizeof(double));
        const int32_t *pa, *pb;
        int na, nb;
        assert_int_equal(ss_engine_critical_path(e, &pa, &na, &d), SS_OK);
        assert_int_equal(ss_engine_critical_path(e2, &pb, &nb, &d), SS_OK);
        assert_int_equal(na, nb);
        assert_memory_equal(pa, pb, (size_t)na * sizeof(int32_t));
    }
    ss_taskgraph_free(tg);
    ss_taskgraph_free(tg2);
    ss_engine_free(e);
    ss_engine_free(e2);
}

/* ---- errors ---- */

/* Wide fan-in and fan-out (the engine counts predecessors in one byte up to
 * 254 and apart beyond; successors of a task are kept inline up to two).
 * p_0 .. p_299 (1 us each) alternate between devices 0 and 1 and run in id
 * order: p_i holds [i/2, i/2 + 1) (integer division), so p_254 ends at 128,
 * p_252 and p_253 at 127, p_298 and p_299 at 150. J (2 us, device 0) needs
 * all 300: ready 150; K (1 us, device 1) needs p_0 .. p_254 (255): ready
 * 128; L (1 us, device 0) needs p_0 .. p_253 (254): ready 127; Z (no
 * resources, 0 us) needs all 300. At 150 device 0 picks L (key: ready 127)
 * before J (150): L [150, 151), J [151, 153); device 1 runs K [150, 151).
 * Blockers: L and K waited for their devices (p_298, p_299: resource), J
 * for L (resource); Z starts at 150 after the last of its predecessors
 * retired at 150 in id order, p_299. Makespan 153. */
static void test_wide_fan(void **state)
{
    (void)state;
    enum { NP = 300 };
    ss_taskgraph *tg = ss_taskgraph_new(2, 0);
    ss_engine *e = ss_engine_new();
    int p[NP];
    for (int i = 0; i < NP; i++)
        p[i] = add1(tg, SS_TASK_FWD, i % 2, 1, 0);
    int j = add1(tg, SS_TASK_FWD, 0, 2, 0);
    int k = add1(tg, SS_TASK_FWD, 1, 1, 0);
    int l = add1(tg, SS_TASK_FWD, 0, 1, 0);
    int z = addn(tg, SS_TASK_OTHER, 0, 0, NULL);
    for (int i = 0; i < NP; i++) {
        dep(tg, p[i], j);
        if (i < 255)
            dep(tg, p[i], k);
        if (i < 254)
            dep(tg, p[i], l);
        dep(tg, p[i], z);
    }
    const ss_engine_result *r = run(e, tg, SS_QUEUE_FIFO);
    for (int i = 0; i < NP; i++)
        assert_true(r->start[p[i]] == i / 2 && r->end[p[i]] == i / 2 + 1);
    assert_true(r->ready[j] == 150 && r->start[j] == 151 && r->end[j] == 153);
    assert_true(r->ready[k] == 128 && r->start[k] == 150 && r->end[k] == 151);
    assert_true(r->ready[l] == 127 && r->start[l] == 150 && r->end[l] == 151);
    assert_true(r->ready[z] == 150 && r->start[z] == 150 && r->end[z] == 150);
    assert_int_equal(r->blocker[l], p[298]);
    assert_int_equal(r->blocker[k], p[299]);
    assert_int_equal(r->blocker[j], l);
    assert_int_equal(r->blocker[z], p[299]);
    assert_true(r->blocked_by_resource[l] && r->blocked_by_resource[k] &&
                r->blocked_by_resource[j] && !r->blocked_by_resource[z]);
    assert_true(r->makespan == 153);
    ss_engine_free(e);
    ss_taskgraph_free(tg);
}

/* Many zero-duration tasks in one round: a chain of 1000 on device 0 at
 * time 0 (each ends when it starts, releasing the next), then a 5 us task.
 * Every chain task starts and ends at 0, blocked by its predecessor (not by
 * the resource); the last task holds [0, 5); two event times (0 and 5). */
static void test_zero_chain(void **state)
{
    (void)state;
    enum { N = 1000 };
    ss_taskgraph *tg = ss_taskgraph_new(1, 0);
    ss_engine *e = ss_engine_new();
    int prev = -1, first = -1;
    for (int i = 0; i < N; i++) {
        int t = add1(tg, SS_TASK_FWD, 0, 0, 0);
        if (prev >= 0)
            dep(tg, prev, t);
        else
            first = t;
        prev = t;
    }
    int last = add1(tg, SS_TASK_BWD, 0, 5, 0);
    dep(tg, prev, last);
    const ss_engine_result *r = run(e, tg, SS_QUEUE_FIFO);
    for (int t = first; t < first + N; t++) {
        assert_true(r->start[t] == 0 && r->end[t] == 0);
        assert_int_equal(r->blocker[t], t == first ? -1 : t - 1);
        assert_int_equal(r->blocked_by_resource[t], 0);
    }
    assert_true(r->start[last] == 0 && r->end[last] == 5 && r->makespan == 5);
    assert_int_equal(r->n_rounds, 2);
    ss_engine_free(e);
    ss_taskgraph_free(tg);
}

/* Many distinct event times pending at once: device i (of 100) runs a
 * (i + 1) us task, then a 0.5 us task; a join Z (no resources) waits for
 * all second tasks. Starts: a_i at 0, b_i at i + 1; ends of b_i at i + 1.5;
 * Z at 100.5 (blocked by b_99, the last to end). Event times: 0, 1 .. 100,
 * 1.5 .. 100.5: 201 rounds. */
static void test_many_times(void **state)
{
    (void)state;
    enum { D = 100 };
    ss_taskgraph *tg = ss_taskgraph_new(D, 0);
    ss_engine *e = ss_engine_new();
    int a[D], b[D];
    for (int i = 0; i < D; i++) {
        a[i] = add1(tg, SS_TASK_FWD, i, i + 1, 0);
        b[i] = add1(tg, SS_TASK_FWD, i, 0.5, 0);
        dep(tg, a[i], b[i]);
    }
    int z = addn(tg, SS_TASK_OTHER, 0, 0, NULL);
    for (int i = 0; i < D; i++)
        dep(tg, b[i], z);
    const ss_engine_result *r = run(e, tg, SS_QUEUE_FIFO);
    for (int i = 0; i < D; i++) {
        assert_true(r->start[a[i]] == 0 && r->end[a[i]] == i + 1);
        assert_true(r->start[b[i]] == i + 1 && r->end[b[i]] == i + 1.5);
    }
    assert_true(r->start[z] == 100.5 && r->makespan == 100.5);
    assert_int_equal(r->blocker[z], b[D - 1]);
    assert_int_equal(r->n_rounds, 201);
    ss_engine_free(e);
    ss_taskgraph_free(tg);
}

static void test_errors(void **state)
{
    (void)state;
    ss_taskgraph *tg = ss_taskgraph_new(2, 2);
    ss_engine *e = ss_engine_new();
    ss_diag d = {0};
    assert_int_equal(ss_taskgraph_add1(tg, SS_TASK_FWD, 4, 1, 0, 3, 1, 0, &d), -1);
    assert_int_equal(d.status, SS_ERR_INVALID);
    assert_non_null(strstr(d.msg, "resource 4 out of range"));
    ss_diag_init(&d);
    assert_int_equal(ss_taskgraph_add1(tg, SS_TASK_FWD, 0, -1, 0, 3, 1, 0, &d), -1);
    assert_non_null(strstr(d.msg, "invalid duration"));
    ss_diag_init(&d);
    assert_int_equal(ss_taskgraph_add1(tg, SS_TASK_FWD, 0, NAN, 0, 3, 1, 0, &d), -1);
    int dup[2] = {1, 1};
    ss_task_spec s = {SS_TASK_XFER, 1, 0, -1, -1, -1, 0, 0, 2, dup};
    ss_diag_init(&d);
    assert_int_equal(ss_taskgraph_add(tg, &s, &d), -1);
    assert_non_null(strstr(d.msg, "listed twice"));
    assert_int_equal(tg->n_tasks, 0); /* nothing changed */

    int a = add1(tg, SS_TASK_FWD, 0, 1, 0);
    int b = add1(tg, SS_TASK_FWD, 1, 1, 0);
    ss_diag_init(&d);
    assert_int_equal(ss_taskgraph_add_dep(tg, a, a, &d), SS_ERR_INVALID);
    ss_diag_init(&d);
    assert_int_equal(ss_taskgraph_add_dep(tg, a, 9, &d), SS_ERR_INVALID);
    assert_int_equal(tg->n_edges, 0);

    /* not finalized */
    ss_diag_init(&d);
    assert_int_equal(ss_engine_run(e, tg, NULL, &d), SS_ERR_INVALID);
    assert_null(ss_engine_result_of(e));
    /* cycle a -> b -> a */
    dep(tg, a, b);
    dep(tg, b, a);
    int c = add1(tg, SS_TASK_FWD, 1, 1, 0); /* independent: runs */
    ss_diag_init(&d);
    ss_taskgraph_finalize(tg, &d);
    assert_int_equal(ss_engine_run(e, tg, NULL, &d), SS_ERR_INVALID);
    assert_non_null(strstr(d.msg, "cycle"));
    assert_non_null(strstr(d.msg, "2 of 3 tasks"));
    (void)c;
    ss_engine_config bad = {.policy = (ss_queue_policy)7};
    ss_diag_init(&d);
    assert_int_equal(ss_engine_run(e, tg, &bad, &d), SS_ERR_INVALID);
    const int32_t *path;
    int n;
    assert_int_equal(ss_engine_critical_path(e, &path, &n, &d), SS_ERR_INVALID);
    assert_null(ss_taskgraph_new(-1, 0));
    ss_engine_free(e);
    ss_taskgraph_free(tg);
    ss_engine_free(NULL);
    ss_taskgraph_free(NULL);
}

/* Every allocation of building and running may fail: the error is NOMEM, the
 * graph stays as it was, and a later run succeeds with the same answer. */
static void test_alloc_failures(void **state)
{
    (void)state;
    ss_taskgraph *ref = ss_taskgraph_new(3, 4);
    random_graph(ref, 500, 7);
    ss_engine *re = ss_engine_new();
    double want = run(re, ref, SS_QUEUE_FIFO)->makespan;
    ss_engine_free(re);
    int succeeded = 0;
    for (long k = 0; k < 200 && !succeeded; k++) {
        ss_test_fail_after(k);
        ss_taskgraph *tg = ss_taskgraph_new(3, 4);
        ss_engine *e = ss_engine_new();
        ss_diag d = {0};
        if (!tg || !e) {
            ss_test_fail_after(-1);
            ss_taskgraph_free(tg);
            ss_engine_free(e);
            continue;
        }
        /* replay ref's tasks and edges through the API */
        int ok = 1;
        for (int t = 0; t < ref->n_tasks && ok; t++) {
            ss_task_spec s = {(ss_task_kind)ref->kind[t], ref->dur[t], ref->prio[t], ref->op[t],
                              ref->tile[t], ref->mb[t], ref->aux[t], ref->bytes[t],
                              ref->res_off[t + 1] - ref->res_off[t], ref->res + ref->res_off[t]};
            int before = tg->n_tasks;
            if (ss_taskgraph_add(tg, &s, &d) < 0) {
                assert_int_equal(d.status, SS_ERR_NOMEM);
                assert_int_equal(tg->n_tasks, before);
                ok = 0;
            }
        }
        for (int i = 0; i < ref->n_edges && ok; i++)
            if (ss_taskgraph_add_dep(tg, ref->e_from[i], ref->e_to[i], &d)) {
                assert_int_equal(d.status, SS_ERR_NOMEM);
                assert_int_equal(tg->n_edges, i);
                ok = 0;
            }
        if (ok) {
            for (int c = 0; c < ref->n_channels; c++)
                ss_taskgraph_set_channel_ends(tg, c, ref->chan_dev[2 * c], ref->chan_dev[2 * c + 1], &d);
            ss_taskgraph_finalize(tg, &d);
            ss_status st = ss_engine_run(e, tg, NULL, &d);
            if (st) {
                assert_int_equal(st, SS_ERR_NOMEM);
                assert_null(ss_engine_result_of(e));
                ss_test_fail_after(-1);
                assert_int_equal(ss_engine_run(e, tg, NULL, &d), SS_OK);
            }
            assert_true(ss_engine_result_of(e)->makespan == want);
            succeeded = st == SS_OK;
        }
        ss_test_fail_after(-1);
        ss_engine_free(e);
        ss_taskgraph_free(tg);
    }
    assert_true(succeeded);
    ss_taskgraph_free(ref);
}

/* Priority inversion on a channel (engine.h rule 2, class 2). Device 0,
 * channel resource 1. Z (channel, priority 0) 2 us and X (channel, a back
 * layer's gradient: priority 105) 10 us are ready at 0; P (device) 1 us
 * then Y (channel, a front layer's gradient: priority 101) 10 us, then W
 * (device, the next forward that needs Y) 10 us.
 *   FIFO (prio_first none): Z 0-2 (priority 0 < 105 at equal ready time),
 *   then X, ready earlier than Y: X 2-12, Y 12-22, W 22-32: 32 us.
 *   prio_first = 100: Z (class 0) still first 0-2; at 2 Y (101) goes
 *   before X (105) though X waited longer: Y 2-12, then W 12-22 on the
 *   device while X 12-22 on the channel: 22 us. */
static void test_priority_first(void **state)
{
    (void)state;
    for (int on = 0; on < 2; on++) {
        ss_taskgraph *tg = ss_taskgraph_new(1, 1);
        ss_engine *e = ss_engine_new();
        tg->prio_first = on ? 100 : INT32_MAX;
        int z = add1(tg, SS_TASK_XFER, 1, 2, 0);
        int x = add1(tg, SS_TASK_COLLECTIVE, 1, 10, 105);
        int p = add1(tg, SS_TASK_BWD, 0, 1, 0);
        int y = add1(tg, SS_TASK_COLLECTIVE, 1, 10, 101);
        int w = add1(tg, SS_TASK_FWD, 0, 10, 0);
        dep(tg, p, y);
        dep(tg, y, w);
        const ss_engine_result *r = run(e, tg, SS_QUEUE_FIFO);
        assert_true(r->start[z] == 0);
        assert_true(r->start[x] == (on ? 12 : 2));
        assert_true(r->start[y] == (on ? 2 : 12));
        assert_true(r->start[w] == (on ? 12 : 22));
        assert_true(r->makespan == (on ? 22 : 32));
        /* Y waited for the channel (Z held it): a resource blocker */
        assert_int_equal(r->blocker[y], on ? z : x);
        assert_true(r->ready[y] == 1);
        ss_engine_free(e);
        ss_taskgraph_free(tg);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_chain_one_device),
        cmocka_unit_test(test_chain_two_devices),
        cmocka_unit_test(test_overlap_breakdown),
        cmocka_unit_test(test_contention),
        cmocka_unit_test(test_priority_ties),
        cmocka_unit_test(test_priority_first),
        cmocka_unit_test(test_multi_resource),
        cmocka_unit_test(test_join_and_zero),
        cmocka_unit_test(test_pipeline_gpipe),
        cmocka_unit_test(test_pipeline_1f1b),
        cmocka_unit_test(test_policy_differs),
        cmocka_unit_test(test_random_invariants),
        cmocka_unit_test(test_determinism),
        cmocka_unit_test(test_cut_golden),
        cmocka_unit_test(test_cut_random),
        cmocka_unit_test(test_positions_invisible),
        cmocka_unit_test(test_lean),
        cmocka_unit_test(test_wide_fan),
        cmocka_unit_test(test_zero_chain),
        cmocka_unit_test(test_many_times),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_alloc_failures),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
