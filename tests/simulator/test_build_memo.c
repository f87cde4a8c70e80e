/*
 * test_build_memo.c — the memoizing builder emits exactly what a fresh one
 * does (simulator/build.h, "Reuse across runs").
 *
 * A long-lived builder sees MCMC-like proposal chains (one-op moves from a
 * base, about a third accepted, now and then a whole random plan and random
 * gradient-sync settings) on four models (mlp, a small GPT with partial
 * sums, inception_v3 at batch 16, a small nmt) on 16 GPUs. After every
 * build, a FRESH builder builds the same plan and the two task graphs must be
 * equal bit for bit: task count, kinds, durations, priorities, ops, tiles,
 * micro-batches, tags, bytes, resources, every edge in the order added,
 * queue policy and statistics; and the memory trackers equal: interval
 * count, static bytes per device and the peaks of two different schedules
 * (the engine's and a pseudo-random one) per device. The memo must also hit
 * (else the test would prove nothing about reuse). Allocation failures in
 * the middle of a warm build give NOMEM, and the next build of the same
 * builder is again equal to a fresh one. A lean builder (ss_build_set_lean:
 * no memo, scratch and edge list released) builds the same graphs (CSR
 * lists compared) and memory intervals on such chains, run after run.
 */
#include "testutil.h"
#include "search/space.h"
#include "simulator/build.h"
#include "simulator/engine.h"
#include "simulator/memory.h"
#include "simulator/taskgraph.h"

#include <stdlib.h>
#include <string.h>

typedef struct mcase {
    const char *model;
    int64_t batch;
    int steps;
} mcase;

static const mcase cases[] = {
    {"mlp:layers=3,hidden=256,in=256,classes=16", 64, 300},
    {"gpt:layers=2,hidden=128,heads=4,seq=32,vocab=512", 16, 200},
    {"inception_v3", 16, 60},
    {"nmt:steps=4,layers=2,hidden=256,vocab=1000", 32, 150},
};

typedef struct env {
    ss_graph *g;
    ss_machine *m;
    ss_costmodel *cm;
    ss_space *sp;
    ss_builder *b; /* the long-lived, memoizing builder */
    ss_taskgraph *tg, *tg2;
    ss_memory *mm, *mm2;
    ss_engine *e;
    double *s, *t, *pk1, *pk2;
    int n_dev;
} env;

static void env_open(env *v, const mcase *mc)
{
    ss_diag d;
    ss_diag_init(&d);
    memset(v, 0, sizeof *v);
    assert_int_equal(ss_machine_load(ss_test_path("topologies/p100x16.json"), &v->m, &d), SS_OK);
    v->n_dev = ss_machine_n_devices(v->m);
    if (ss_model_build(mc->model, mc->batch, v->n_dev, &v->g, &d) != SS_OK)
        fail_msg("%s: %s", mc->model, d.msg);
    v->cm = ss_cost_new(v->m);
    ss_space_opts so = {v->n_dev, 0};
    assert_int_equal(ss_space_new(v->g, &so, &v->sp, &d), SS_OK);
    v->b = ss_build_new(v->g, v->m, v->cm);
    v->tg = ss_taskgraph_new(0, 0);
    v->tg2 = ss_taskgraph_new(0, 0);
    v->mm = ss_memory_new();
    v->mm2 = ss_memory_new();
    v->e = ss_engine_new();
    v->pk1 = test_calloc((size_t)v->n_dev, sizeof(double));
    v->pk2 = test_calloc((size_t)v->n_dev, sizeof(double));
    assert_true(v->cm && v->b && v->tg && v->tg2 && v->mm && v->mm2 && v->e);
}

static void env_close(env *v)
{
    test_free(v->s);
    test_free(v->t);
    test_free(v->pk1);
    test_free(v->pk2);
    ss_engine_free(v->e);
    ss_memory_free(v->mm);
    ss_memory_free(v->mm2);
    ss_taskgraph_free(v->tg);
    ss_taskgraph_free(v->tg2);
    ss_build_free(v->b);
    ss_space_free(v->sp);
    ss_cost_free(v->cm);
    ss_graph_free(v->g);
    ss_machine_free(v->m);
}

static int same_bits(const void *a, const void *b, size_t n)
{
    return n == 0 || !memcmp(a, b, n);
}

#define SAME(field, count)                                                                    \
    do {                                                                                      \
        if (!same_bits(a->field, b->field, (size_t)(count) * sizeof(*a->field)))             \
            fail_msg("%s step %d: task graphs differ in " #field, model, step);               \
    } while (0)

static void same_graphs(const ss_taskgraph *a, const ss_taskgraph *b, const char *model, int step)
{
    if (a->n_tasks != b->n_tasks || a->n_edges != b->n_edges)
        fail_msg("%s step %d: %d tasks %d edges (memo) vs %d tasks %d edges (fresh)", model, step,
                 a->n_tasks, a->n_edges, b->n_tasks, b->n_edges);
    assert_int_equal(a->n_resources, b->n_resources);
    int n = a->n_tasks;
    SAME(kind, n);
    SAME(dur, n);
    SAME(prio, n);
    SAME(op, n);
    SAME(tile, n);
    SAME(mb, n);
    SAME(aux, n);
    SAME(bytes, n);
    SAME(res_off, n + 1);
    SAME(res, a->res_off[n]);
    if (a->e_from && b->e_from) { /* a lean build released them (below) */
        SAME(e_from, a->n_edges);
        SAME(e_to, a->n_edges);
    }
    assert_true(a->finalized && b->finalized);
    SAME(succ_off, n + 1);
    SAME(succ, a->n_edges);
}

/* Both memory trackers hold the same intervals and static memory: equal
 * counts and static bytes, and equal peaks under the engine's schedule of
 * tg and under a pseudo-random one. */
static void same_memory(env *v, const char *model, int step)
{
    ss_diag d;
    ss_diag_init(&d);
    assert_int_equal(ss_memory_n_intervals(v->mm), ss_memory_n_intervals(v->mm2));
    for (int k = 0; k < v->n_dev; k++) {
        assert_true(ss_memory_static_bytes(v->mm, k) == ss_memory_static_bytes(v->mm2, k));
        assert_true(ss_memory_weight_bytes(v->mm, k) == ss_memory_weight_bytes(v->mm2, k));
    }
    ss_engine_config ec = {.policy = ss_build_policy(v->b)};
    assert_int_equal(ss_engine_run(v->e, v->tg, &ec, &d), SS_OK);
    const ss_engine_result *r = ss_engine_result_of(v->e);
    assert_int_equal(ss_memory_sweep(v->mm, r->start, r->end, v->pk1, &d), SS_OK);
    assert_int_equal(ss_memory_sweep(v->mm2, r->start, r->end, v->pk2, &d), SS_OK);
    for (int k = 0; k < v->n_dev; k++)
        if (v->pk1[k] != v->pk2[k])
            fail_msg("%s step %d: device %d peak %.17g (memo) vs %.17g (fresh)", model, step, k,
                     v->pk1[k], v->pk2[k]);
    int n = v->tg->n_tasks;
    test_free(v->s);
    test_free(v->t);
    v->s = test_malloc((size_t)(n + 1) * sizeof(double));
    v->t = test_malloc((size_t)(n + 1) * sizeof(double));
    uint64_t x = 88172645463325252ull ^ (uint64_t)step;
    for (int i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v->s[i] = (double)(x % 100000);
        v->t[i] = v->s[i] + (double)(x >> 40 & 1023);
    }
    assert_int_equal(ss_memory_sweep(v->mm, v->s, v->t, v->pk1, &d), SS_OK);
    assert_int_equal(ss_memory_sweep(v->mm2, v->s, v->t, v->pk2, &d), SS_OK);
    for (int k = 0; k < v->n_dev; k++)
        if (v->pk1[k] != v->pk2[k])
            fail_msg("%s step %d: device %d random-schedule peak %.17g vs %.17g", model, step, k,
                     v->pk1[k], v->pk2[k]);
}

/* Build p with the long-lived builder and with a fresh one; both must
 * succeed or fail alike, and when they succeed be equal. */
static void check_plan(env *v, const ss_plan *p, const char *model, int step)
{
    ss_diag d1, d2;
    ss_diag_init(&d1);
    ss_diag_init(&d2);
    ss_status s1 = ss_build_run(v->b, p, v->tg, v->mm, &d1);
    if (s1 == SS_OK)
        s1 = ss_build_memory(v->b, v->mm, &d1);
    ss_builder *fresh = ss_build_new(v->g, v->m, v->cm);
    assert_non_null(fresh);
    ss_status s2 = ss_build_run(fresh, p, v->tg2, v->mm2, &d2);
    if (s2 == SS_OK)
        s2 = ss_build_memory(fresh, v->mm2, &d2);
    if (s1 != s2)
        fail_msg("%s step %d: memo %d (%s), fresh %d (%s)", model, step, s1, d1.msg, s2, d2.msg);
    if (s1 == SS_OK) {
        same_graphs(v->tg, v->tg2, model, step);
        assert_int_equal(ss_build_policy(v->b), ss_build_policy(fresh));
        assert_memory_equal(ss_build_stats_of(v->b), ss_build_stats_of(fresh),
                            sizeof(ss_build_stats));
        same_memory(v, model, step);
    }
    ss_build_free(fresh);
}

static void random_settings(ss_plan *p, ss_rng *rng)
{
    ss_plan_settings *s = ss_plan_settings_of(p);
    s->sync = ss_rng_below(rng, 4) == 0 ? SS_SYNC_BULK : SS_SYNC_WAIT_FREE;
    s->bucket_bytes = ss_rng_below(rng, 2) ? 0 : 4e6;
    s->priority = (int)ss_rng_below(rng, 2);
    s->recompute = ss_rng_below(rng, 3) == 0 ? SS_RECOMPUTE_FULL : SS_RECOMPUTE_NONE;
}

static void chain(const mcase *mc, uint64_t seed)
{
    env v;
    env_open(&v, mc);
    ss_diag d;
    ss_diag_init(&d);
    ss_plan *p = NULL;
    assert_int_equal(ss_plan_data_parallel(v.g, v.m, 0, &p, &d), SS_OK);
    ss_rng rng;
    ss_rng_seed(&rng, seed);
    int N = v.n_dev, n_ops = ss_graph_n_ops(v.g);
    int *buf = test_malloc((size_t)N * 64 * sizeof(int)), *obuf = test_malloc((size_t)N * 64 * sizeof(int));
    check_plan(&v, p, mc->model, -1);
    for (int step = 0; step < mc->steps; step++) {
        if (ss_rng_below(&rng, 40) == 0) {
            assert_int_equal(ss_space_random_plan(v.sp, &rng, p, &d), SS_OK);
            random_settings(p, &rng);
            check_plan(&v, p, mc->model, step);
            continue;
        }
        int op = (int)ss_rng_below(&rng, n_ops);
        ss_pconfig prop, old = *ss_plan_config(p, op);
        memcpy(obuf, old.devices, (size_t)old.ntiles * sizeof(int));
        old.devices = obuf;
        prop.devices = buf;
        ss_space_random(v.sp, op, &rng, &prop, buf);
        prop.stage = old.stage;
        assert_int_equal(ss_plan_set_config(p, op, &prop, &d), SS_OK);
        check_plan(&v, p, mc->model, step);
        if (ss_rng_below(&rng, 3) != 0) /* rejected: back to the base */
            assert_int_equal(ss_plan_set_config(p, op, &old, &d), SS_OK);
    }
    const ss_build_memo_stats *ms = ss_build_memo_stats_of(v.b);
    /* a one-op move misses at most one op and its edges; jumps miss all */
    assert_true(ms->op_hits > 3 * ms->op_misses);
    assert_true(ms->edge_hits > 2 * ms->edge_misses);
    assert_true(ms->weight_hits > 2 * ms->weight_misses);
    print_message("%s: weight structures %lld reused, %lld computed\n", mc->model,
                  (long long)ms->weight_hits, (long long)ms->weight_misses);
    test_free(buf);
    test_free(obuf);
    ss_plan_free(p);
    env_close(&v);
}

static void test_mlp(void **state)
{
    (void)state;
    chain(&cases[0], 1);
}

static void test_gpt(void **state)
{
    (void)state;
    chain(&cases[1], 2);
}

static void test_inception(void **state)
{
    (void)state;
    chain(&cases[2], 3);
}

static void test_nmt(void **state)
{
    (void)state;
    chain(&cases[3], 4);
}

/* Off: every run computes everything (no hits), output still equal. */
static void test_memo_off(void **state)
{
    (void)state;
    env v;
    env_open(&v, &cases[0]);
    ss_diag d;
    ss_diag_init(&d);
    ss_plan *p = NULL;
    assert_int_equal(ss_plan_data_parallel(v.g, v.m, 0, &p, &d), SS_OK);
    ss_build_set_memo(v.b, 0);
    check_plan(&v, p, "mlp off", 0);
    check_plan(&v, p, "mlp off", 1);
    assert_int_equal(ss_build_memo_stats_of(v.b)->op_hits, 0);
    assert_int_equal(ss_build_memo_stats_of(v.b)->edge_hits, 0);
    assert_int_equal(ss_build_memo_stats_of(v.b)->weight_hits, 0);
    ss_build_set_memo(v.b, 1);
    check_plan(&v, p, "mlp on", 2);
    check_plan(&v, p, "mlp on", 3);
    assert_int_equal(ss_build_memo_stats_of(v.b)->op_hits, ss_graph_n_ops(v.g));
    ss_build_forget(v.b);
    check_plan(&v, p, "mlp forgotten", 4);
    assert_int_equal(ss_build_memo_stats_of(v.b)->op_hits, ss_graph_n_ops(v.g));
    ss_plan_free(p);
    env_close(&v);
}

/* Lean: the same graphs and memory as a fresh builder along a chain (every
 * run releases and regrows all scratch), no memo hits, the edge list gone
 * (adding an edge then fails until the next reset), and back to normal. */
static void test_lean(void **state)
{
    (void)state;
    for (int c = 0; c < 2; c++) {
        env v;
        env_open(&v, &cases[c]);
        ss_diag d;
        ss_diag_init(&d);
        ss_plan *p = NULL;
        assert_int_equal(ss_plan_data_parallel(v.g, v.m, 0, &p, &d), SS_OK);
        ss_build_set_lean(v.b, 1);
        ss_rng rng;
        ss_rng_seed(&rng, 77 + (uint64_t)c);
        for (int step = 0; step < 25; step++) {
            check_plan(&v, p, cases[c].model, step);
            assert_null(v.tg->e_from);
            assert_int_equal(ss_taskgraph_add_dep(v.tg, 0, 1, &d), SS_ERR_INVALID);
            assert_int_equal(ss_taskgraph_finalize(v.tg, &d), SS_OK); /* still finalized */
            assert_int_equal(ss_space_random_plan(v.sp, &rng, p, &d), SS_OK);
            random_settings(p, &rng);
        }
        assert_int_equal(ss_build_memo_stats_of(v.b)->op_hits, 0);
        assert_int_equal(ss_build_memo_stats_of(v.b)->edge_hits, 0);
        ss_build_set_lean(v.b, 0);
        check_plan(&v, p, "lean off", 100);
        check_plan(&v, p, "lean off", 101);
        assert_non_null(v.tg->e_from);
        assert_true(ss_build_memo_stats_of(v.b)->op_hits > 0);
        ss_plan_free(p);
        env_close(&v);
    }
}

/* Walk `steps` kept one-op proposals of seed `seed` from p (each op gets
 * new configs: with enough steps, more than KOP per op, so slots and edge
 * entries are evicted), building each with v->b when `build`. */
static void walk(env *v, ss_plan *p, uint64_t seed, int steps, int build)
{
    ss_diag d;
    ss_diag_init(&d);
    ss_rng rng;
    ss_rng_seed(&rng, seed);
    int *buf = test_malloc((size_t)v->n_dev * 64 * sizeof(int));
    ss_pconfig prop;
    prop.devices = buf;
    for (int k = 0; k < steps; k++) {
        int op = (int)ss_rng_below(&rng, ss_graph_n_ops(v->g));
        prop.stage = ss_plan_config(p, op)->stage;
        ss_space_random(v->sp, op, &rng, &prop, buf);
        assert_int_equal(ss_plan_set_config(p, op, &prop, &d), SS_OK);
        if (build)
            (void)ss_build_run(v->b, p, v->tg, v->mm, &d);
    }
    test_free(buf);
}

/* An allocation failure at any point of a build, cold or warm (with
 * evictions), gives NOMEM, and the builder stays usable: the next build of
 * the same plan equals a fresh builder's. */
static void faults_for(const mcase *mc, int warm)
{
    env v;
    env_open(&v, mc);
    ss_diag d;
    int failed = 0, ok = 0;
    for (long k = 0; k < 100000 && !ok; k++) {
        ss_plan *p = NULL;
        ss_diag_init(&d);
        assert_int_equal(ss_plan_data_parallel(v.g, v.m, 0, &p, &d), SS_OK);
        ss_build_free(v.b);
        v.b = ss_build_new(v.g, v.m, v.cm);
        assert_non_null(v.b);
        if (warm) {
            assert_int_equal(ss_build_run(v.b, p, v.tg, v.mm, &d), SS_OK);
            walk(&v, p, 11, 40, 1);
            walk(&v, p, 12, 3, 0); /* the proposal built under faults */
        }
        ss_test_fail_after(k);
        ss_status st = ss_build_run(v.b, p, v.tg, v.mm, &d);
        if (st == SS_OK)
            st = ss_build_memory(v.b, v.mm, &d);
        ss_test_fail_after(-1);
        if (st == SS_OK)
            ok = 1;
        else {
            assert_int_equal(st, SS_ERR_NOMEM);
            failed++;
        }
        check_plan(&v, p, mc->model, (int)k);
        ss_plan_free(p);
    }
    assert_true(ok && failed > 0);
    env_close(&v);
}

static void test_faults(void **state)
{
    (void)state;
    faults_for(&cases[0], 0);
    faults_for(&cases[0], 1);
    faults_for(&cases[1], 0);
    faults_for(&cases[1], 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mlp),       cmocka_unit_test(test_gpt),
        cmocka_unit_test(test_inception), cmocka_unit_test(test_nmt),
        cmocka_unit_test(test_memo_off),  cmocka_unit_test(test_faults),
        cmocka_unit_test(test_lean),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
