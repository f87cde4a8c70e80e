/*
 * test_sim.c — the public simulator (ss_sim_*): golden iteration times on
 * the round-number fixtures of tests/data/sim (derivations in the comments,
 * see also test_build.c), memory feasibility, the JSON result, traces,
 * determinism, and invariants over random valid plans of zoo models.
 *
 * Fixture device "unit-gpu": 1 TFLOP/s, 1000 GB/s, launch 0, flat
 * efficiency. Linear 1000x1000 over N samples: fwd 2N us, bwd 4N us; SGD
 * update of 1e6 fp32 params: 12 B/param / 1000 GB/s = 12 us.
 */
#include "testutil.h"
#include "simulator/build.h"
#include "core/json_util.h"
#include "kernels/kernels.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct fix {
    ss_graph *g;
    ss_machine *m;
    ss_costmodel *cm;
    ss_sim *sim;
} fix;

static void setup_g(fix *f, ss_graph *g, const char *topo, const ss_sim_config *cfg)
{
    ss_diag d;
    ss_diag_init(&d);
    char path[4096];
    memset(f, 0, sizeof *f);
    f->g = g;
    snprintf(path, sizeof path, "%s", ss_test_path(topo));
    assert_int_equal(ss_machine_load(path, &f->m, &d), SS_OK);
    f->cm = ss_cost_new(f->m);
    assert_non_null(f->cm);
    assert_int_equal(ss_sim_new(f->g, f->m, f->cm, cfg, &f->sim, &d), SS_OK);
}

static void setup(fix *f, const char *model, const char *topo, const ss_sim_config *cfg)
{
    ss_diag d;
    ss_diag_init(&d);
    ss_graph *g = NULL;
    char path[4096];
    snprintf(path, sizeof path, "%s", ss_test_path(model));
    assert_int_equal(ss_model_load(path, &g, &d), SS_OK);
    setup_g(f, g, topo, cfg);
}

static void teardown(fix *f)
{
    ss_sim_free(f->sim);
    ss_cost_free(f->cm);
    ss_machine_free(f->m);
    ss_graph_free(f->g);
}

static void place(ss_plan *p, const ss_graph *g, const char *name, int dev)
{
    int op = ss_graph_find_op(g, name);
    assert_true(op >= 0);
    ss_pconfig c = *ss_plan_config(p, op);
    c.devices = &dev;
    assert_int_equal(ss_plan_set_config(p, op, &c, NULL), SS_OK);
}

#define NEAR(a, b) assert_true(fabs((double)(a) - (double)(b)) < 1e-6 * (1 + fabs((double)(b))))

/*
 * chain2 entirely on gpu0 of "pair": fwd 128 + 128, bwd 256 + 256, two
 * updates 12 + 12 = 792 us, gpu1 idle all along. Throughput 64 / 792 us.
 */
static void test_one_device_chain(void **state)
{
    (void)state;
    fix f;
    ss_diag d;
    ss_diag_init(&d);
    setup(&f, "tests/data/sim/chain2.json", "tests/data/sim/pair.json", NULL);
    ss_plan *p = ss_plan_new(f.g, f.m);
    ss_sim_result r = {0};
    assert_int_equal(ss_sim_run(f.sim, p, &r, &d), SS_OK);
    NEAR(r.iteration_us, 792);
    NEAR(r.compute_us[0], 792);
    NEAR(r.compute_us[1], 0);
    NEAR(r.idle_us[1], 792);
    NEAR(r.throughput, 64 / 792e-6);
    assert_int_equal(r.n_devices, 2);
    assert_int_equal(r.batch, 64);
    assert_int_equal(r.n_tasks, 7); /* 3 fwd, 2 bwd, 2 updates */
    assert_int_equal(ss_sim_n_tasks(f.sim), 7);
    assert_string_equal(r.model, "chain2");
    assert_string_equal(r.topology, "pair");
    /* the whole run is one chain: the critical path is every task */
    NEAR(r.critical_path_us, 792);
    double sum = 0;
    for (int i = 0; i < r.n_crit; i++)
        sum += r.crit[i].us;
    NEAR(sum, 792);
    /* largest line first: a backward of 256 us */
    assert_string_equal(r.crit[0].kind, "bwd");
    NEAR(r.crit[0].us, 256);
    /* per op: fc1 and fc2 carry fwd 128 + bwd 256 + update 12 each, the
     * input op nothing */
    int n_ops = ss_graph_n_ops(f.g);
    double op_us[8], total = 0;
    assert_true(n_ops <= 8);
    assert_int_equal(ss_sim_path_ops(f.sim, op_us, &total, &d), SS_OK);
    NEAR(total, 792);
    NEAR(op_us[ss_graph_find_op(f.g, "fc1")], 396);
    NEAR(op_us[ss_graph_find_op(f.g, "fc2")], 396);
    double ops_sum = 0;
    for (int i = 0; i < n_ops; i++)
        ops_sum += op_us[i];
    NEAR(ops_sum, 792);
    /* memory: static 2e6 params * 8 B; peak adds fc1's and fc2's saved
     * inputs (256000 B each) which coexist from fc2's forward until fc2's
     * backward ends, so 16e6 + 512000 at least. */
    NEAR(r.static_memory_bytes[0], 16e6);
    NEAR(r.weight_bytes[0], 8e6);
    assert_true(r.peak_memory_bytes[0] >= 16e6 + 512000);
    NEAR(r.peak_memory_bytes[1], 0);
    NEAR(r.capacity_bytes[0], 16.0 * 1073741824.0);
    assert_int_equal(r.fits, 1);
    assert_int_equal(r.overflow_device, -1);
    ss_sim_result_clear(&r);
    ss_sim_result_clear(&r); /* twice is fine */
    ss_sim_result_clear(NULL);
    ss_plan_free(p);
    teardown(&f);
}

/* Two devices over the 10 GB/s / 5 us link: 841.2 us (test_build.c has the
 * timeline); the 30.6 us transfers each way sit on the critical path. */
static void test_two_devices_chain(void **state)
{
    (void)state;
    fix f;
    ss_diag d;
    ss_diag_init(&d);
    setup(&f, "tests/data/sim/chain2.json", "tests/data/sim/pair.json", NULL);
    ss_plan *p = ss_plan_new(f.g, f.m);
    place(p, f.g, "fc2", 1);
    ss_sim_result r = {0};
    double op_us[8];
    assert_true(ss_graph_n_ops(f.g) <= 8);
    /* no run yet: no path */
    assert_int_equal(ss_sim_path_ops(f.sim, op_us, NULL, &d), SS_ERR_INVALID);
    ss_diag_init(&d);
    assert_int_equal(ss_sim_run(f.sim, p, &r, &d), SS_OK);
    NEAR(r.iteration_us, 841.2);
    /* every path task belongs to an op (the transfers to the ops they feed
     * or come from): the per-op times add up to the path */
    double total = 0, ops_sum = 0;
    assert_int_equal(ss_sim_path_ops(f.sim, op_us, &total, &d), SS_OK);
    NEAR(total, r.critical_path_us);
    for (int i = 0; i < ss_graph_n_ops(f.g); i++)
        ops_sum += op_us[i];
    NEAR(ops_sum, r.critical_path_us);
    NEAR(r.compute_us[0], 128 + 256 + 12);
    NEAR(r.compute_us[1], 128 + 256 + 12);
    /* the link carries 2 * 30.6 us: both devices see it */
    NEAR(r.comm_us[0], 61.2);
    NEAR(r.comm_us[1], 61.2);
    int xfer = 0;
    for (int i = 0; i < r.n_crit; i++)
        if (!strcmp(r.crit[i].kind, "xfer")) {
            NEAR(r.crit[i].us, 61.2);
            xfer = 1;
        }
    assert_true(xfer);
    assert_true(r.critical_path_us <= r.iteration_us + 1e-9);
    ss_sim_result_clear(&r);
    ss_plan_free(p);
    teardown(&f);
}

/* Data parallel over the 4-device ring: 1364 us (ring all-reduce of 4e6 B:
 * 6 + 6 + 1.5 * 400 = 612 us each, derivation in test_build.c). */
static void test_data_parallel_ring(void **state)
{
    (void)state;
    fix f;
    ss_diag d;
    ss_diag_init(&d);
    setup(&f, "tests/data/sim/chain2.json", "tests/data/sim/ring4.json", NULL);
    ss_plan *p = NULL;
    assert_int_equal(ss_plan_data_parallel(f.g, f.m, 4, &p, &d), SS_OK);
    ss_sim_result r = {0};
    assert_int_equal(ss_sim_run(f.sim, p, &r, &d), SS_OK);
    NEAR(r.iteration_us, 1364);
    for (int i = 0; i < 4; i++) {
        NEAR(r.compute_us[i], 32 + 32 + 64 + 64 + 12 + 12);
        NEAR(r.comm_us[i], 1224);
        /* each device holds the full weights: 2e6 * 8 B static */
        NEAR(r.static_memory_bytes[i], 16e6);
    }
    int grads = 0;
    for (int i = 0; i < r.n_crit; i++)
        if (!strcmp(r.crit[i].name, "gradients"))
            grads = 1;
    assert_true(grads);
    ss_sim_result_clear(&r);
    ss_plan_free(p);
    teardown(&f);
}

/* The same plan on ring4_coll.json: ring4 with the links' collective curve
 * coll_eff 0.5, coll_half_bytes 4e6 (topology keys): eff(4e6 B) = 0.5 *
 * 4e6 / 8e6 = 0.25, so each all-reduce of 4e6 B is 6 + 6 + 1.5 * 4e6 /
 * (10e3 * 0.25) = 2412 us (tree 6 + 4 + 2 * 4e6 / 2.5e3 = 3210, slower):
 * fc2's [128, 2540], fc1's [2540, 4952], update 12 us -> 4964. Fails if the
 * fields are ignored (1364). */
static void test_topology_collective_curve(void **state)
{
    (void)state;
    fix f;
    ss_diag d;
    ss_diag_init(&d);
    setup(&f, "tests/data/sim/chain2.json", "tests/data/sim/ring4_coll.json", NULL);
    ss_plan *p = NULL;
    assert_int_equal(ss_plan_data_parallel(f.g, f.m, 4, &p, &d), SS_OK);
    ss_sim_result r = {0};
    assert_int_equal(ss_sim_run(f.sim, p, &r, &d), SS_OK);
    NEAR(r.iteration_us, 4964);
    for (int i = 0; i < 4; i++)
        NEAR(r.comm_us[i], 2 * 2412);
    ss_sim_result_clear(&r);
    ss_plan_free(p);
    teardown(&f);
}

/* A plan over capacity: with mem_fraction 1e-6 each 16 GiB device offers
 * 17179.87 B, far below the 16 MB of static memory: fits = 0, the first
 * overflowing device is 0, overflow = peak - capacity. Still SS_OK. */
static void test_does_not_fit(void **state)
{
    (void)state;
    fix f;
    ss_diag d;
    ss_diag_init(&d);
    ss_sim_config cfg = {.mem_fraction = 1e-6};
    setup(&f, "tests/data/sim/chain2.json", "tests/data/sim/pair.json", &cfg);
    ss_plan *p = ss_plan_new(f.g, f.m);
    ss_sim_result r = {0};
    assert_int_equal(ss_sim_run(f.sim, p, &r, &d), SS_OK);
    assert_int_equal(r.fits, 0);
    assert_int_equal(r.overflow_device, 0);
    NEAR(r.capacity_bytes[0], 16.0 * 1073741824.0 * 1e-6);
    NEAR(r.overflow_bytes, r.peak_memory_bytes[0] - r.capacity_bytes[0]);
    /* JSON says so too */
    char *txt = NULL;
    assert_int_equal(ss_sim_result_to_json(&r, "mine", &txt, &d), SS_OK);
    json_t *j = json_loads(txt, 0, NULL);
    assert_non_null(j);
    assert_true(json_is_false(json_object_get(j, "fits")));
    assert_int_equal(json_integer_value(json_object_get(json_object_get(j, "overflow"), "device")),
                     0);
    json_decref(j);
    ss_free(txt);
    ss_sim_result_clear(&r);
    ss_plan_free(p);
    teardown(&f);

    ss_sim *s = NULL;
    ss_sim_config bad = {.mem_fraction = 2.0};
    ss_diag_init(&d);
    assert_int_equal(ss_sim_new(f.g, f.m, f.cm, &bad, &s, &d), SS_ERR_INVALID);
    assert_null(s);
}

/* The stop callback (ss_sim_config.stop) is polled while building and while
 * simulating: stopping at the first poll (in the builder) or at the last one
 * of a full run (in the engine, after the build) fails with
 * SS_ERR_INTERRUPTED and leaves the result unchanged; without a callback the
 * same simulator runs on and gives the uninterrupted answer. */
typedef struct stopper {
    int calls, stop_at; /* stop at call number stop_at (0: never) */
} stopper;

static int stop_cb(void *ctx)
{
    stopper *st = ctx;
    return ++st->calls == st->stop_at;
}

static void test_stop(void **state)
{
    (void)state;
    ss_diag d;
    ss_diag_init(&d);
    ss_graph *g = NULL;
    assert_int_equal(ss_model_build("gpt:layers=12", 64, 16, &g, &d), SS_OK);
    stopper st = {0, 0};
    ss_sim_config cfg = {.stop = stop_cb, .stop_ctx = &st, .evaluator = SS_EVAL_FULL}; /* polls of the full run */
    fix f;
    setup_g(&f, g, "topologies/p100x16.json", &cfg);
    ss_plan *p = NULL;
    assert_int_equal(ss_plan_data_parallel(f.g, f.m, 0, &p, &d), SS_OK);
    ss_sim_result ref = {0}, r = {0};
    assert_int_equal(ss_sim_run(f.sim, p, &ref, &d), SS_OK);
    int total = st.calls;
    /* the engine polled too: more polls than the builder's per op + 1 */
    assert_true(ss_sim_n_tasks(f.sim) > 4096);
    assert_true(total > ss_graph_n_ops(f.g) + 1);
    for (int k = 0; k < 2; k++) {
        st.calls = 0;
        st.stop_at = k == 0 ? 1 : total;
        r.iteration_us = -1;
        ss_diag_init(&d);
        assert_int_equal(ss_sim_run(f.sim, p, &r, &d), SS_ERR_INTERRUPTED);
        assert_string_equal(d.msg, "simulation interrupted");
        assert_true(r.iteration_us == -1);
        assert_int_equal(st.calls, st.stop_at); /* stopped at once */
    }
    ss_sim_set_stop(f.sim, NULL, NULL);
    ss_diag_init(&d);
    assert_int_equal(ss_sim_run(f.sim, p, &r, &d), SS_OK);
    assert_true(r.iteration_us == ref.iteration_us);
    assert_true(r.peak_memory_bytes[3] == ref.peak_memory_bytes[3]);
    ss_sim_result_clear(&r);
    ss_sim_result_clear(&ref);
    ss_plan_free(p);
    teardown(&f);
}

static void test_json_and_trace(void **state)
{
    (void)state;
    fix f;
    ss_diag d;
    ss_diag_init(&d);
    setup(&f, "tests/data/sim/chain2.json", "tests/data/sim/pair.json", NULL);
    char path[] = "/tmp/ss_test_sim_traceXXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    /* no run yet: no trace */
    assert_int_equal(ss_sim_write_trace(f.sim, path, &d), SS_ERR_INVALID);
    ss_plan *p = ss_plan_new(f.g, f.m);
    place(p, f.g, "fc2", 1);
    ss_sim_result r = {0};
    assert_int_equal(ss_sim_run(f.sim, p, &r, &d), SS_OK);
    char *txt = NULL;
    assert_int_equal(ss_sim_result_to_json(&r, "plan.json", &txt, &d), SS_OK);
    json_error_t err;
    json_t *j = json_loads(txt, 0, &err);
    assert_non_null(j);
    static const char *keys[] = {"model", "topology", "devices", "batch", "iteration_time_ms",
                                 "throughput_samples_per_s", "peak_memory_bytes",
                                 "memory_capacity_bytes", "fits", "breakdown", "critical_path",
                                 "tasks", "plan"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        assert_non_null(json_object_get(j, keys[i]));
    NEAR(json_real_value(json_object_get(j, "iteration_time_ms")), 0.8412);
    assert_int_equal(json_array_size(json_object_get(j, "peak_memory_bytes")), 2);
    json_t *bd = json_object_get(j, "breakdown");
    NEAR(json_real_value(json_object_get(bd, "compute_ms")), 0.396);
    NEAR(json_real_value(json_object_get(bd, "communication_ms")), 0.0612);
    assert_int_equal(
        json_array_size(json_object_get(json_object_get(bd, "per_device"), "idle_ms")), 2);
    assert_string_equal(json_string_value(json_object_get(j, "plan")), "plan.json");
    json_decref(j);
    ss_free(txt);

    assert_int_equal(ss_sim_write_trace(f.sim, path, &d), SS_OK);
    j = json_load_file(path, 0, &err);
    assert_non_null(j);
    json_t *ev = json_object_get(j, "traceEvents");
    assert_true(json_is_array(ev));
    int named = 0;
    for (size_t i = 0; i < json_array_size(ev); i++) {
        const char *n = json_string_value(json_object_get(json_array_get(ev, i), "name"));
        if (n && !strcmp(n, "xfer fc1"))
            named = 1;
    }
    assert_true(named);
    json_decref(j);
    unlink(path);
    ss_sim_result_clear(&r);
    ss_plan_free(p);
    teardown(&f);
}

/* Results copy deeply; a failing run leaves the result unchanged. */
static void test_copy_and_faults(void **state)
{
    (void)state;
    fix f;
    ss_diag d;
    ss_diag_init(&d);
    setup(&f, "tests/data/sim/chain2.json", "tests/data/sim/ring4.json", NULL);
    ss_plan *p = NULL;
    assert_int_equal(ss_plan_data_parallel(f.g, f.m, 4, &p, &d), SS_OK);
    ss_sim_result r = {0}, c = {0};
    assert_int_equal(ss_sim_run(f.sim, p, &r, &d), SS_OK);
    assert_int_equal(ss_sim_result_copy(&c, &r, &d), SS_OK);
    assert_true(c.compute_us != r.compute_us);
    assert_memory_equal(c.peak_memory_bytes, r.peak_memory_bytes, 4 * sizeof(double));
    NEAR(c.iteration_us, r.iteration_us);
    assert_int_equal(c.n_crit, r.n_crit);
    double keep = r.iteration_us;
    int ok = 0;
    for (long k = 0; k < 3000 && !ok; k++) {
        ss_sim *s = NULL;
        ss_sim_result t = {0};
        ss_test_fail_after(k);
        ss_diag_init(&d);
        ss_status st = ss_sim_new(f.g, f.m, f.cm, NULL, &s, &d);
        if (st == SS_OK)
            st = ss_sim_run(s, p, &t, &d);
        if (st == SS_OK)
            st = ss_sim_run(s, p, &r, &d); /* reuses r's arrays: no allocation */
        ss_test_fail_after(-1);
        if (st == SS_OK) {
            ok = 1;
            NEAR(t.iteration_us, keep);
        } else {
            assert_int_equal(st, SS_ERR_NOMEM);
            assert_null(t.compute_us); /* unchanged on error */
        }
        NEAR(r.iteration_us, keep);
        ss_sim_result_clear(&t);
        ss_sim_free(s);
    }
    assert_true(ok);
    ss_sim_result_clear(&r);
    ss_sim_result_clear(&c);
    ss_plan_free(p);
    teardown(&f);
}

/* ---- invariants on random valid plans of zoo models ---------------------- */

/* Run spec on f's simulator into r. */
static void sim_spec(fix *f, const char *spec, ss_sim_result *r)
{
    ss_diag d;
    ss_diag_init(&d);
    ss_plan *p = NULL;
    if (ss_plan_from_spec(spec, f->g, f->m, &p, &d) != SS_OK)
        fail_msg("%s", d.msg);
    if (ss_sim_run(f->sim, p, r, &d) != SS_OK)
        fail_msg("%s", d.msg);
    ss_plan_free(p);
}

/*
 * Distributed optimizer, by formula: gpt (fp16 mixed precision + Adam: 2 B
 * weight + 2 B gradient + 12 B optimizer state per parameter) data parallel
 * over the 8 GPUs of a DGX-A100. Every GPU holds all P parameters: static
 * memory 16 P without, (2 + 2 + 12/8) P with distopt=1 (the state split
 * over the 8 replicas of every shard). Its gradient sync becomes a
 * reduce-scatter plus an all-gather (same bus volume) and each GPU updates
 * 1/8 of the parameters.
 */
static void test_distopt_memory(void **state)
{
    (void)state;
    fix f;
    ss_diag d;
    ss_diag_init(&d);
    ss_graph *g = NULL;
    assert_int_equal(ss_model_build("gpt:layers=2,hidden=256,heads=4,seq=64,vocab=1024", 16, 8,
                                    &g, &d), SS_OK);
    setup_g(&f, g, "topologies/dgx-a100.json", NULL);
    double P = (double)ss_graph_parameters(g);
    ss_sim_result r0 = {0}, r1 = {0};
    sim_spec(&f, "megatron:tp=1,pp=1,dp=8,sync=bulk", &r0);
    sim_spec(&f, "megatron:tp=1,pp=1,dp=8,sync=bulk,distopt=1", &r1);
    for (int dev = 0; dev < 8; dev++) {
        assert_true(fabs(r0.static_memory_bytes[dev] - 16 * P) < 1e-6 * P);
        assert_true(fabs(r1.static_memory_bytes[dev] - (4 + 12.0 / 8) * P) < 1e-6 * P);
    }
    ss_sim_result_clear(&r0);
    ss_sim_result_clear(&r1);
    teardown(&f);
}

/*
 * Selective recomputation, by formula (Korthikanti et al.): it drops the
 * attention-score activations and keeps every other one. gpt on one GPU,
 * b = 4, a = 4 heads, s = 256, 2 layers. The score ops (ss_build_score_op)
 * per layer are QK^T, softmax, dropout and the product with V; what they
 * save (ss_op_tile_work) holds the s x s scores several times (the softmax
 * output, the dropout's mask and output, the product's input: at least
 * Korthikanti's 5 a s^2 b bytes per layer) plus q, k and v. At the first
 * backward task every forward activation is live without recomputation, and
 * with selective none of the score activations but the recomputed region's
 * inputs q, k and v (2 s b h bytes each, kept from the forward as Megatron's
 * checkpoint does: each score op is recomputed during its own backward,
 * after the layer's MLP freed more than it holds), so the peaks differ by
 * exactly the score ops' saved bytes less 6 s b h per layer. The backward
 * pays the score ops' forwards again.
 */
static void test_selective_recompute_memory(void **state)
{
    (void)state;
    fix f;
    ss_diag d;
    ss_diag_init(&d);
    ss_graph *g = NULL;
    assert_int_equal(ss_model_build("gpt:layers=2,hidden=256,heads=4,seq=256,vocab=1024", 4, 1,
                                    &g, &d), SS_OK);
    setup_g(&f, g, "topologies/dgx-a100.json", NULL);
    ss_sim_result r0 = {0}, r1 = {0};
    sim_spec(&f, "megatron:tp=1,pp=1,dp=1", &r0);
    sim_spec(&f, "megatron:tp=1,pp=1,dp=1,recompute=selective", &r1);
    double score = 0;
    int n_score = 0;
    for (int o = 0; o < ss_graph_n_ops(g); o++)
        if (ss_build_score_op(g, o)) {
            ss_tile t;
            ss_work w;
            ss_op_full_tile(g, ss_graph_op(g, o), &t);
            ss_op_tile_work(g, ss_graph_op(g, o), &t, &w);
            score += w.saved_bytes;
            n_score++;
        }
    assert_int_equal(n_score, 2 * 4); /* scores, softmax, dropout, context per layer */
    double a = 4, s = 256, b = 4, asb = a * s * s * b;
    assert_true(score >= 2 * 5 * asb); /* at least Korthikanti's 5 a s^2 b per layer */
    double h = 256, qkv = 2 * 3 * 2 * s * b * h; /* 2 layers x q, k, v in bf16 */
    NEAR(r0.peak_memory_bytes[0] - r1.peak_memory_bytes[0], score - qkv);
    assert_true(r1.iteration_us > r0.iteration_us);
    ss_sim_result_clear(&r0);
    ss_sim_result_clear(&r1);
    teardown(&f);
}

/* ss_sim_config.one_shot (lean builder and engine) gives the numbers of a
 * normal simulator bit for bit: pipelines (GPipe, 1F1B), tensor parallelism
 * with partial sums, recompute, data parallelism; each plan twice on the
 * same one-shot simulator (it regrows what it freed), then a trace. */
static void test_one_shot(void **state)
{
    (void)state;
    static const char *const specs[] = {
        "megatron:tp=2,pp=2,dp=2,mb=4,recompute=full",
        "megatron:tp=1,pp=4,dp=2,mb=8",
        "megatron:tp=4,pp=1,dp=2,mb=2,recompute=selective,sp=1",
        "data-parallel",
    };
    fix f, lean;
    ss_diag d;
    ss_diag_init(&d);
    ss_graph *g = NULL;
    assert_int_equal(ss_model_build("gpt:layers=4,hidden=256,heads=4,seq=64,vocab=1024", 32, 8,
                                    &g, &d), SS_OK);
    setup_g(&f, g, "topologies/dgx-a100.json", NULL);
    ss_sim_config oc = {.one_shot = 1};
    assert_int_equal(ss_sim_new(f.g, f.m, f.cm, &oc, &lean.sim, &d), SS_OK);
    for (size_t k = 0; k < sizeof specs / sizeof specs[0]; k++) {
        ss_plan *p = NULL;
        if (ss_plan_from_spec(specs[k], f.g, f.m, &p, &d) != SS_OK)
            fail_msg("%s: %s", specs[k], d.msg);
        ss_sim_result a = {0}, b = {0};
        assert_int_equal(ss_sim_run(f.sim, p, &a, &d), SS_OK);
        for (int rep = 0; rep < 2; rep++) {
            assert_int_equal(ss_sim_run(lean.sim, p, &b, &d), SS_OK);
            size_t nd = (size_t)a.n_devices * sizeof(double);
            if (a.iteration_us != b.iteration_us)
                fail_msg("%s: %.17g us normal, %.17g one-shot", specs[k], a.iteration_us,
                         b.iteration_us);
            assert_int_equal(a.n_tasks, b.n_tasks);
            assert_true(a.critical_path_us == b.critical_path_us);
            assert_int_equal(a.n_crit, b.n_crit);
            assert_memory_equal(a.crit, b.crit, sizeof a.crit);
            assert_int_equal(a.fits, b.fits);
            assert_memory_equal(a.compute_us, b.compute_us, nd);
            assert_memory_equal(a.comm_us, b.comm_us, nd);
            assert_memory_equal(a.exposed_comm_us, b.exposed_comm_us, nd);
            assert_memory_equal(a.idle_us, b.idle_us, nd);
            assert_memory_equal(a.peak_memory_bytes, b.peak_memory_bytes, nd);
            assert_memory_equal(a.static_memory_bytes, b.static_memory_bytes, nd);
            assert_memory_equal(a.weight_bytes, b.weight_bytes, nd);
        }
        ss_sim_result_clear(&a);
        ss_sim_result_clear(&b);
        ss_plan_free(p);
    }
    /* it was lean: nothing memoized between the two runs of each plan */
    assert_int_equal(ss_build_memo_stats_of(ss_sim_builder(lean.sim))->op_hits, 0);
    char path[] = "/tmp/ss_one_shot_trace_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(ss_sim_write_trace(lean.sim, path, &d), SS_OK);
    FILE *tf = fopen(path, "r");
    assert_non_null(tf);
    assert_int_equal(fseek(tf, 0, SEEK_END), 0);
    assert_true(ftell(tf) > 1000);
    fclose(tf);
    unlink(path);
    ss_sim_free(lean.sim);
    teardown(&f);
}

static uint64_t rng = 88172645463325252ULL;
static unsigned rnd(unsigned n)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (unsigned)(rng % n);
}

/* A random valid config per op: one splittable dim (or the contraction) split
 * 2 or 4 ways when it divides, tiles on random devices among the first nd;
 * an op whose random config does not validate stays on one random device. */
static ss_plan *random_plan(const ss_graph *g, const ss_machine *m, int nd)
{
    ss_plan *p = ss_plan_new(g, m);
    assert_non_null(p);
    int devs[16];
    for (int o = 0; o < ss_graph_n_ops(g); o++) {
        const ss_op *op = ss_graph_op(g, o);
        const ss_tensor *t = ss_graph_tensor(g, op->outputs[0]);
        ss_pconfig c = *ss_plan_config(p, o);
        ss_pconfig one = c;
        int deg = 1 + (int)rnd(2) * (1 + (int)rnd(2) * 2); /* 1, 2 or 4 */
        unsigned mask = ss_op_split_mask(g, op);
        int dim = (int)rnd((unsigned)t->ndim + 1);
        if (dim < t->ndim && (mask & (1u << dim)) && t->shape[dim] % deg == 0) {
            c.deg[dim] = deg;
        } else if (ss_op_contraction(g, op) > 0 && ss_op_contraction(g, op) % deg == 0 &&
                   rnd(3) == 0) {
            c.red = deg;
        }
        c.ntiles = 1;
        for (int k = 0; k < c.ndim; k++)
            c.ntiles *= c.deg[k];
        c.ntiles *= c.red;
        for (int k = 0; k < c.ntiles; k++)
            devs[k] = (int)rnd((unsigned)nd);
        c.devices = devs;
        int dev1 = (int)rnd((unsigned)nd);
        one.devices = &dev1;
        assert_int_equal(ss_plan_set_config(p, o, &c, NULL), SS_OK);
        if (ss_plan_validate(p, g, m, NULL) != SS_OK)
            assert_int_equal(ss_plan_set_config(p, o, &one, NULL), SS_OK);
    }
    assert_int_equal(ss_plan_validate(p, g, m, NULL), SS_OK);
    return p;
}

static void check_invariants(const ss_sim_result *r)
{
    for (int i = 0; i < r->n_devices; i++) {
        assert_true(r->iteration_us + 1e-6 >= r->compute_us[i]);
        assert_true(r->iteration_us + 1e-6 >= r->comm_us[i]);
        assert_true(r->exposed_comm_us[i] <= r->idle_us[i] + 1e-6);
        assert_true(r->peak_memory_bytes[i] >= r->static_memory_bytes[i]);
        assert_true(r->static_memory_bytes[i] >= r->weight_bytes[i]);
    }
    assert_true(r->iteration_us + 1e-6 >= r->critical_path_us);
    assert_true(r->iteration_us > 0);
}

static void invariants_for(const char *spec, int64_t batch, int plans)
{
    fix f;
    ss_diag d;
    ss_diag_init(&d);
    ss_graph *g = NULL;
    assert_int_equal(ss_model_build(spec, batch, 4, &g, &d), SS_OK);
    setup_g(&f, g, "topologies/p100x16.json", NULL);
    int64_t total_params = ss_graph_parameters(g);
    for (int k = 0; k < plans; k++) {
        ss_plan *p = random_plan(g, f.m, 4);
        ss_sim_result a = {0}, b = {0};
        ss_diag_init(&d);
        assert_int_equal(ss_sim_run(f.sim, p, &a, &d), SS_OK);
        check_invariants(&a);
        /* every parameter lives on at least one device */
        double w = 0;
        for (int i = 0; i < a.n_devices; i++)
            w += a.weight_bytes[i];
        assert_true(w >= 2.0 * (double)total_params - 1e-6);
        /* determinism: same plan, same numbers, bit for bit */
        assert_int_equal(ss_sim_run(f.sim, p, &b, &d), SS_OK);
        assert_true(a.iteration_us == b.iteration_us);
        assert_int_equal(a.n_tasks, b.n_tasks);
        assert_memory_equal(a.peak_memory_bytes, b.peak_memory_bytes,
                            (size_t)a.n_devices * sizeof(double));
        assert_memory_equal(a.compute_us, b.compute_us, (size_t)a.n_devices * sizeof(double));
        assert_memory_equal(a.comm_us, b.comm_us, (size_t)a.n_devices * sizeof(double));
        /* the load bound of ss_sim_run_within: no more than the iteration
         * time, no less than any device's compute time; a cutoff below it
         * stops the run before the engine (result untouched, no run held);
         * a cutoff at it, below the iteration time, lets the engine prove a
         * larger bound, still at most the iteration time (or run to the
         * end); a cutoff at the iteration time changes nothing */
        ss_sim_result c = {0};
        double load = -1, load2 = -1, busiest = 0;
        assert_int_equal(ss_sim_run_within(f.sim, p, 0, &c, &load, &d), SS_OK);
        for (int i = 0; i < a.n_devices; i++)
            busiest = a.compute_us[i] > busiest ? a.compute_us[i] : busiest;
        assert_true(load > 0 && load <= a.iteration_us * (1 + 1e-12));
        assert_true(load >= busiest * (1 - 1e-12));
        assert_true(c.n_devices == 0 && c.iteration_us == 0 && c.peak_memory_bytes == NULL);
        assert_int_equal(ss_sim_n_tasks(f.sim), 0);
        assert_int_equal(ss_sim_run_within(f.sim, p, load, &c, &load2, &d), SS_OK);
        if (load2 > load) {
            assert_true(load2 <= a.iteration_us * (1 + 1e-12));
            assert_true(c.n_devices == 0 && c.iteration_us == 0);
            assert_int_equal(ss_sim_n_tasks(f.sim), 0);
        } else {
            assert_true(load2 == load && c.iteration_us == a.iteration_us);
        }
        assert_int_equal(ss_sim_run_within(f.sim, p, a.iteration_us, &c, &load2, &d), SS_OK);
        assert_true(load2 == load);
        assert_true(c.iteration_us == a.iteration_us);
        assert_memory_equal(a.peak_memory_bytes, c.peak_memory_bytes,
                            (size_t)a.n_devices * sizeof(double));
        assert_int_equal(ss_sim_n_tasks(f.sim), a.n_tasks);
        /* per-op path times: never negative, at most the path (tasks of
         * barriers belong to no op), the path equal to the result's */
        int n_ops = ss_graph_n_ops(g);
        double *op_us = malloc((size_t)n_ops * sizeof *op_us), total = -1, ops_sum = 0;
        assert_non_null(op_us);
        assert_int_equal(ss_sim_path_ops(f.sim, op_us, &total, &d), SS_OK);
        assert_true(total == c.critical_path_us);
        for (int i = 0; i < n_ops; i++) {
            assert_true(op_us[i] >= 0);
            ops_sum += op_us[i];
        }
        assert_true(ops_sum <= total * (1 + 1e-12) + 1e-9);
        assert_true(ops_sum >= 0.5 * total);
        /* the summary: lines largest first, one per (name, kind), "(other)"
         * only last, summing to the path; an op's lines within its path
         * time; the same lines on every run of the plan */
        double lines = 0;
        assert_true(c.n_crit >= 1 && c.n_crit <= SS_SIM_CRIT_MAX && c.n_crit == a.n_crit);
        for (int i = 0; i < c.n_crit; i++) {
            const ss_sim_crit *l = &c.crit[i];
            int other = !strcmp(l->name, "(other)");
            assert_true(!other || i == c.n_crit - 1);
            assert_true(other || i == 0 || l->us <= c.crit[i - 1].us);
            assert_true(l->n_tasks >= 1 && l->us >= 0);
            assert_true(l->us == a.crit[i].us && !strcmp(l->name, a.crit[i].name));
            for (int j = 0; j < i; j++)
                assert_true(strcmp(l->name, c.crit[j].name) || strcmp(l->kind, c.crit[j].kind));
            double named = 0;
            for (int j = 0; j < c.n_crit; j++)
                if (!strcmp(c.crit[j].name, l->name))
                    named += c.crit[j].us;
            for (int o = 0; o < n_ops; o++)
                if (!strcmp(ss_graph_op(g, o)->name, l->name))
                    assert_true(named <= op_us[o] * (1 + 1e-12) + 1e-9);
            lines += l->us;
        }
        assert_true(fabs(lines - total) <= 1e-9 * total + 1e-9);
        free(op_us);
        ss_sim_result_clear(&a);
        ss_sim_result_clear(&b);
        ss_sim_result_clear(&c);
        ss_plan_free(p);
    }
    /* data parallel on one device = sum of its compute tasks plus updates */
    ss_plan *p = NULL;
    assert_int_equal(ss_plan_data_parallel(g, f.m, 1, &p, &d), SS_OK);
    ss_sim_result r = {0};
    assert_int_equal(ss_sim_run(f.sim, p, &r, &d), SS_OK);
    double sum = 0;
    int type = ss_machine_device(f.m, 0)->type;
    for (int o = 0; o < ss_graph_n_ops(g); o++) {
        const ss_op *op = ss_graph_op(g, o);
        if (op->type == SS_OP_INPUT)
            continue;
        ss_tile t;
        ss_cost c;
        ss_op_full_tile(g, op, &t);
        assert_int_equal(ss_cost_tile(f.cm, g, op, &t, type, &c), SS_OK);
        sum += c.fwd_us + c.bwd_us;
    }
    for (int t = 0; t < ss_graph_n_tensors(g); t++) {
        const ss_tensor *w = ss_graph_tensor(g, t);
        if (!w->is_weight)
            continue;
        int64_t n = 1;
        for (int k = 0; k < w->ndim; k++)
            n *= w->shape[k];
        sum += ss_cost_update_us(f.cm, type, n, ss_graph_optimizer(g), ss_graph_precision(g));
    }
    assert_true(fabs(r.iteration_us - sum) < 1e-6 * sum);
    assert_true(fabs(r.compute_us[0] - sum) < 1e-6 * sum);
    for (int i = 1; i < r.n_devices; i++)
        assert_true(r.compute_us[i] == 0);
    ss_sim_result_clear(&r);
    ss_plan_free(p);
    teardown(&f);
}

static void test_invariants_mlp(void **state)
{
    (void)state;
    invariants_for("mlp", 16, 12);
}

static void test_invariants_gpt(void **state)
{
    (void)state;
    invariants_for("gpt:layers=2,hidden=128,heads=4,seq=64,vocab=512", 8, 8);
}

static void test_invariants_alexnet(void **state)
{
    (void)state;
    invariants_for("alexnet", 8, 4);
}

/* Runs last: none of the simulations above opened OpenBLAS (kernels/cpu_gemm.c
 * opens it on the first CPU kernel; its threads cost every process CPU). */
static void test_no_blas(void **state)
{
    (void)state;
    assert_false(ss_cpu_blas_loaded());
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_device_chain),  cmocka_unit_test(test_two_devices_chain),
        cmocka_unit_test(test_data_parallel_ring), cmocka_unit_test(test_does_not_fit),
        cmocka_unit_test(test_topology_collective_curve),
        cmocka_unit_test(test_stop),
        cmocka_unit_test(test_json_and_trace),     cmocka_unit_test(test_copy_and_faults),
        cmocka_unit_test(test_invariants_mlp),     cmocka_unit_test(test_invariants_gpt),
        cmocka_unit_test(test_invariants_alexnet),
        cmocka_unit_test(test_distopt_memory),
        cmocka_unit_test(test_selective_recompute_memory),
        cmocka_unit_test(test_one_shot),
        cmocka_unit_test(test_no_blas),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
