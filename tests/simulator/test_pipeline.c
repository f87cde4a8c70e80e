/*
 * test_pipeline.c — pipeline schedules against hand-derived golden figures:
 * GPipe, 1F1B and Megatron's interleaved 1F1B (virtual stages) on a
 * balanced chain of linears, with free and with costed stage sends, and
 * the peak activation memory of the first stage.
 *
 * Model chain8 (x -> fc1 -> ... -> fc8, batch 64, f32) on "line4" (4
 * unit-gpus in a line, links 1e6 GB/s, 0 us: a transfer of a micro-batch
 * activation, at most 16*1000*4 B, takes at most 6.4e-5 us) or "pair"
 * (2 unit-gpus, 10 GB/s, 5 us). Device type "unit-gpu": 1 TFLOP/s f32, launch 0,
 * efficiency 1: a linear on N samples costs forward 2N us and backward 4N us
 * (tests/simulator/test_build.c). With p pipeline ranks, v chunks per rank and
 * m micro-batches (N = 64/m), each chunk holds 8/(p v) linears, so per
 * micro-batch a chunk's forward takes t_f/v and its backward t_b/v, where
 * t_f = 2N * 8/p and t_b = 2 t_f are the per-rank (per-stage) times.
 * Iterations are measured to the end of the last backward (the weight
 * updates, 12 us each, follow it on every device).
 */
#include "build_fixture.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NEAR(a, b, tol) assert_true(fabs((double)(a) - (double)(b)) <= (tol) * (1 + fabs((double)(b))))


static void setup(fix *f, const char *topo)
{
    fix_load(f, "tests/data/sim/chain8.json", topo);
}

static void teardown(fix *f)
{
    fix_free(f);
}

/* p ranks, v chunks each, m micro-batches: linear fc(i+1) in chunk
 * i * p v / 8, on rank chunk mod p (device = rank), split m ways on the
 * sample dim on that device; x with fc1. */
static void pipeline(fix *f, int p, int v, int m, ss_pipe_schedule sched)
{
    ss_diag d;
    ss_diag_init(&d);
    ss_plan_settings *s = ss_plan_settings_of(f->p);
    s->stages = p * v;
    s->virtual_stages = v;
    s->microbatches = m;
    s->schedule = sched;
    int devs[64];
    for (int i = 0; i <= 8; i++) {
        char name[16];
        snprintf(name, sizeof name, i ? "fc%d" : "x", i);
        int op = ss_graph_find_op(f->g, name);
        assert_true(op >= 0);
        int chunk = (i ? i - 1 : 0) * p * v / 8;
        ss_pconfig c = *ss_plan_config(f->p, op);
        for (int k = 0; k < SS_MAX_DIMS; k++)
            c.deg[k] = 1;
        c.deg[0] = m;
        c.red = c.rep = 1;
        c.ntiles = m;
        for (int t = 0; t < m; t++)
            devs[t] = chunk % p;
        c.devices = devs;
        c.stage = chunk;
        assert_int_equal(ss_plan_set_config(f->p, op, &c, &d), SS_OK);
    }
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
    assert_int_equal(ss_build_stats_of(f->b)->microbatch_gating, 1);
}

/* End of the last backward task: the iteration before the weight updates. */
static double bwd_span(const fix *f)
{
    double span = 0;
    for (int t = 0; t < f->tg->n_tasks; t++)
        if (f->tg->kind[t] == SS_TASK_BWD && f->r->end[t] > span)
            span = f->r->end[t];
    return span;
}

/* Compute busy time of device dev (forward and backward tasks). */
static double compute_busy(const fix *f, int dev)
{
    double busy = 0;
    for (int t = 0; t < f->tg->n_tasks; t++)
        if ((f->tg->kind[t] == SS_TASK_BWD || f->tg->kind[t] == SS_TASK_FWD) &&
            f->tg->res[f->tg->res_off[t]] == dev)
            busy += f->tg->dur[t];
    return busy;
}

/* Most chunk-steps (forward started, backward not ended, counted in
 * linears: a chunk-step of c linears counts c) in flight on device dev. */
static int max_in_flight(const fix *f, int dev)
{
    int best = 0;
    for (int t = 0; t < f->tg->n_tasks; t++) {
        if (f->tg->kind[t] != SS_TASK_FWD || f->tg->res[f->tg->res_off[t]] != dev)
            continue;
        double at = f->r->start[t];
        int n = 0;
        for (int u = 0; u < f->tg->n_tasks; u++) {
            if (f->tg->kind[u] != SS_TASK_BWD || f->tg->res[f->tg->res_off[u]] != dev)
                continue;
            int fw = -1;
            for (int w = 0; w < f->tg->n_tasks && fw < 0; w++)
                if (f->tg->kind[w] == SS_TASK_FWD && f->tg->op[w] == f->tg->op[u] &&
                    f->tg->tile[w] == f->tg->tile[u])
                    fw = w;
            if (fw >= 0 && f->r->start[fw] <= at && f->r->end[u] > at)
                n++;
        }
        if (n > best)
            best = n;
    }
    return best;
}

/* Per-rank times of the chain8 pipeline: t_f + t_b per micro-batch. */
static double stage_fb(int p, int m)
{
    double tf = 2.0 * (64 / m) * 8 / p;
    return tf + 2 * tf;
}

/*
 * GPipe and 1F1B, p = 4, m = 8, free sends: N = 8, t_f = 2*8*2 = 32 us,
 * t_b = 64 us; both take (m + p - 1)(t_f + t_b) = 11 * 96 = 1056 us and every
 * device computes m (t_f + t_b) = 768 us of it: bubble (p - 1)/(m + p - 1).
 * GPipe keeps all 8 micro-batches in flight on stage 0 (16 linears), 1F1B
 * p = 4 (8 linears).
 */
static void test_gpipe_1f1b(void **state)
{
    (void)state;
    fix f;
    setup(&f, "tests/data/sim/line4.json");
    for (int sc = 0; sc < 2; sc++) {
        pipeline(&f, 4, 1, 8, sc ? SS_PIPE_1F1B : SS_PIPE_GPIPE);
        run(&f);
        NEAR(bwd_span(&f), 11 * stage_fb(4, 8), 1e-3);
        for (int dv = 0; dv < 4; dv++)
            NEAR(compute_busy(&f, dv), 8 * stage_fb(4, 8), 1e-9);
        assert_int_equal(max_in_flight(&f, 0), sc ? 4 * 2 : 8 * 2);
    }
    teardown(&f);
}

/*
 * Interleaved 1F1B (Megatron's schedule: rank r runs (p - r - 1)*2 +
 * (v - 1)*p forward chunk-steps of warm-up, then one forward and one
 * backward chunk-step at a time; micro-batches in groups of p per chunk).
 * With free sends the bubble is (p - 1)(t_f + t_b)/v: iteration =
 * m (t_f + t_b) + (p - 1)(t_f + t_b)/v, i.e. (p - 1)/(v m) of the ideal
 * m (t_f + t_b):
 *   p = 4, v = 2, m = 8:  t_f + t_b = 96:  768 + 144 = 912 (1F1B: 1056)
 *   p = 4, v = 2, m = 16: t_f + t_b = 48:  768 +  72 = 840
 *   p = 2, v = 4, m = 8:  t_f + t_b = 192: 1536 + 48 = 1584 (1F1B: 1728)
 *   p = 4, v = 2, m = 4:  t_f + t_b = 192: 768 + 288 = 1056 (1F1B:
 *                         7 * 192 = 1344; m = p: Megatron runs every
 *                         forward chunk-step first on every rank, its
 *                         all_warmup_microbatches, so all m v are in flight)
 * Peak in flight on rank 0: the warm-up plus one, W + 1 = 2(p - 1) +
 * (v - 1) p + 1 chunk-steps of 8/(p v) linears: in stages' worth
 * (W + 1)/v = p + (p - 1)/v (Korthikanti et al.'s p (1 + (p - 1)/(p v))),
 * capped by the m v chunk-steps there are.
 */
static void test_interleaved_bubble(void **state)
{
    (void)state;
    fix f;
    setup(&f, "tests/data/sim/line4.json");
    static const int cases[][3] = {{4, 2, 8}, {4, 2, 16}, {2, 4, 8}, {4, 2, 4}};
    for (int c = 0; c < 4; c++) {
        int p = cases[c][0], v = cases[c][1], m = cases[c][2];
        double fb = stage_fb(p, m), ideal = m * fb;
        pipeline(&f, p, v, m, SS_PIPE_1F1B);
        run(&f);
        double span = bwd_span(&f);
        NEAR(span, ideal + (p - 1) * fb / v, 1e-3);
        NEAR((span - ideal) / ideal, (p - 1.0) / (v * m), 1e-6);
        for (int dv = 0; dv < p; dv++)
            NEAR(compute_busy(&f, dv), ideal, 1e-9);
        int warm = 2 * (p - 1) + (v - 1) * p + 1, last = (v - 1) * p + 1;
        if (m == p) /* Megatron: every forward first */
            warm = last = m * v;
        if (warm > m * v)
            warm = m * v;
        assert_int_equal(max_in_flight(&f, 0), warm * 8 / (p * v));
        /* the last rank's warm-up: (v - 1) p + 1 chunk-steps */
        assert_int_equal(max_in_flight(&f, p - 1), last * 8 / (p * v));
    }
    teardown(&f);
}

/*
 * Sends that cost s. line4_slow: 10 GB/s, 5 us; a micro-batch activation
 * (8 x 1000 f32 = 32000 B) or its gradient takes s = 5 + 3.2 = 8.2 us.
 * GPipe, p = 4, m = 8 (t_f = 32, t_b = 64, s < t_f: no send waits for
 * another on its channel): stage j starts micro-batch 0 at j (t_f + s) and
 * then runs its forwards back to back, so the last stage ends its forwards
 * at (p - 1)(t_f + s) + m t_f and, its backwards following in order, the
 * gradient reaches stage j - 1 s after each; stage 0 ends at
 * (p - 1)(t_f + s) + m t_f + (p - 1)(t_b + s) + m t_b
 * = (m + p - 1)(t_f + t_b) + 2 (p - 1) s = 1056 + 6 * 8.2 = 1105.2 us.
 *
 * Interleaved (sends overlap compute, Megatron's overlap_p2p_comm): the
 * free-send schedule's critical path is micro-batch 0's forward through
 * all p v chunks (the warm-up ramp), the ranks' steady work, and the last
 * micro-batch's backward back through all p v chunks (the drain); in the
 * steady state a rank's next chunk-step's input was produced at least a
 * chunk-step earlier (the interleaved warm-up is deeper than a round trip),
 * so sends shorter than a chunk's forward hide there, and only the ramp's
 * and the drain's p v - 1 sends each add: iteration = m (t_f + t_b) +
 * (p - 1)(t_f + t_b)/v + 2 (p v - 1) s.
 *   p = 2, v = 2, m = 8 on "pair" (s = 8.2, chunk forward 32 us):
 *     1632 + 6 * 8.2 = 1681.2 us;
 *   p = 4, v = 2, m = 8 on "ring4" (10 GB/s, 1 us: s = 4.2 us on every
 *     boundary, rank 3 -> 0 included; chunk forward 16 us): 912 + 14 * 4.2
 *     = 970.8 us.
 * Each boundary is a plain channel task (no compute stream held), and a
 * micro-batch crosses 2 (p v - 1) of them.
 */
static void test_costed_sends(void **state)
{
    (void)state;
    fix f;
    setup(&f, "tests/data/sim/line4_slow.json");
    pipeline(&f, 4, 1, 8, SS_PIPE_GPIPE);
    run(&f);
    double s = 5 + 8 * 1000 * 4 / 1e4;
    NEAR(bwd_span(&f), 11 * stage_fb(4, 8) + 2 * 3 * s, 1e-3);
    teardown(&f);
    static const struct {
        const char *topo;
        int p;
        double s;
    } cases[] = {{"tests/data/sim/pair.json", 2, 5 + 3.2}, {"tests/data/sim/ring4.json", 4, 1 + 3.2}};
    for (int c = 0; c < 2; c++) {
        int p = cases[c].p, v = 2, m = 8;
        setup(&f, cases[c].topo);
        pipeline(&f, p, v, m, SS_PIPE_1F1B);
        run(&f);
        double fb = stage_fb(p, m);
        NEAR(bwd_span(&f), m * fb + (p - 1) * fb / v + 2 * (p * v - 1) * cases[c].s, 1e-3);
        int nx = 0;
        for (int t = 0; t < f.tg->n_tasks; t++)
            if (f.tg->kind[t] == SS_TASK_XFER) {
                nx++;
                assert_int_equal(f.tg->res_off[t + 1] - f.tg->res_off[t], 1);
                NEAR(f.tg->dur[t], cases[c].s, 1e-9);
            }
        assert_int_equal(nx, m * 2 * (p * v - 1));
        teardown(&f);
    }
}

/* Interleaving that ss_plan_validate refuses: stages not a multiple of v,
 * micro-batches not a multiple of p, GPipe, a device holding two ranks. */
static void test_interleaved_invalid(void **state)
{
    (void)state;
    fix f;
    ss_diag d;
    setup(&f, "tests/data/sim/line4.json");
    pipeline(&f, 4, 2, 8, SS_PIPE_1F1B);
    ss_plan_settings *s = ss_plan_settings_of(f.p);
    ss_diag_init(&d);
    s->microbatches = 6;
    assert_int_equal(ss_plan_validate(f.p, f.g, f.m, &d), SS_ERR_INVALID);
    assert_non_null(strstr(d.msg, "multiple of 4"));
    s->microbatches = 8;
    s->schedule = SS_PIPE_GPIPE;
    ss_diag_init(&d);
    assert_int_equal(ss_plan_validate(f.p, f.g, f.m, &d), SS_ERR_INVALID);
    assert_non_null(strstr(d.msg, "1f1b"));
    s->schedule = SS_PIPE_1F1B;
    s->virtual_stages = 3;
    ss_diag_init(&d);
    assert_int_equal(ss_plan_validate(f.p, f.g, f.m, &d), SS_ERR_INVALID);
    assert_non_null(strstr(d.msg, "multiple of virtual_stages"));
    s->virtual_stages = 0;
    ss_diag_init(&d);
    assert_int_equal(ss_plan_validate(f.p, f.g, f.m, &d), SS_ERR_INVALID);
    /* fc5 (stage 4, rank 0) moved to device 1 (rank 1) */
    s->virtual_stages = 2;
    ss_diag_init(&d);
    assert_int_equal(ss_plan_validate(f.p, f.g, f.m, &d), SS_OK);
    int op = ss_graph_find_op(f.g, "fc5");
    ss_pconfig c = *ss_plan_config(f.p, op);
    int devs[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    c.devices = devs;
    assert_int_equal(ss_plan_set_config(f.p, op, &c, &d), SS_OK);
    assert_int_equal(ss_plan_validate(f.p, f.g, f.m, &d), SS_ERR_INVALID);
    assert_non_null(strstr(d.msg, "rank k mod 4"));
    teardown(&f);
}

/*
 * Peak memory of the first stage (device 0) from the memory model: static
 * (weights and gradients, 8 B per parameter of its linears) plus the peak
 * of what lives with the schedule. A linear on N samples saves its input,
 * a = N * 1000 * 4 B, from its forward until its backward ends; a received
 * activation or gradient (a B each) lives from its transfer until its
 * consumer is done. At the peak rank 0 holds the activations of its
 * warm-up plus one chunk-step — 1F1B: p micro-batches of a stage, 8
 * linears; interleaved: W + 1 = 2(p - 1) + (v - 1) p + 1 chunk-steps of
 * 8/(p v) linears, p + (p - 1)/v stages' worth — and the gradient it is
 * receiving for its first backward; interleaved, also the activation that
 * rank p - 1 already sent for its next chunk-step (sends do not wait for
 * the receiver there):
 *   1F1B p = 4, m = 8 (a = 32000):        (8 + 1) a = 288000 B
 *   p = 4, v = 2, m = 8 (a = 32000):      (11 + 2) a = 416000 B
 *   p = 4, v = 2, m = 16 (a = 16000):     (11 + 2) a = 208000 B
 *   p = 2, v = 4, m = 8 (a = 32000):      (9 + 2) a = 352000 B
 */
static void test_first_stage_memory(void **state)
{
    (void)state;
    fix f;
    setup(&f, "tests/data/sim/line4.json");
    static const int cases[][3] = {{4, 1, 8}, {4, 2, 8}, {4, 2, 16}, {2, 4, 8}};
    for (int c = 0; c < 4; c++) {
        int p = cases[c][0], v = cases[c][1], m = cases[c][2];
        pipeline(&f, p, v, m, SS_PIPE_1F1B);
        run(&f);
        double peak[4];
        ss_diag d;
        ss_diag_init(&d);
        assert_int_equal(ss_memory_sweep(f.mm, f.r->start, f.r->end, peak, &d), SS_OK);
        double a = 64.0 / m * 1000 * 4;
        int warm = v == 1 ? p : 2 * (p - 1) + (v - 1) * p + 1;
        double linears = (double)warm * 8 / (p * v);
        NEAR(ss_memory_static_bytes(f.mm, 0), 8.0 / p * 1e6 * 8, 1e-12);
        NEAR(peak[0] - ss_memory_static_bytes(f.mm, 0), (linears + (v > 1 ? 2 : 1)) * a, 1e-12);
    }
    teardown(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gpipe_1f1b),
        cmocka_unit_test(test_interleaved_bubble),
        cmocka_unit_test(test_costed_sends),
        cmocka_unit_test(test_interleaved_invalid),
        cmocka_unit_test(test_first_stage_memory),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
