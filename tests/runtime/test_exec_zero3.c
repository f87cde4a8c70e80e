/*
 * test_exec_zero3.c — ZeRO-3 / FSDP plans (zero=3) in the runtime's CPU
 * backend (runtime/zero3.h): two "ranks" as threads (thread_comm.h) run the
 * MLP and the small fp32 GPT sharded over dp 2, with SGD and Adam, with one
 * and two micro-batches, and must match a one-process run; the collectives
 * are the task graph's (its parameter all-gathers and per-micro-batch
 * gradient reduce-scatters, no all-reduce of the gradients); the parameter
 * bytes a rank holds at its peak are below the distributed optimizer's
 * (distopt 1); also on a GPU topology (deferred lay-backs elsewhere); all-gathers that lay the members' shards in the wrong order
 * break the numerics; the CUDA backend refuses ZeRO-3 before any work.
 */
#include "testutil.h"
#include "runtime/exec_int.h"
#include "thread_comm.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MLP "mlp:layers=2,hidden=64,in=32"
#define GPT "gpt:layers=2,hidden=64,heads=4,seq=16,vocab=128,vocab_pad=0,dropout=0,precision=fp32"

/* The fault: every all-gather names its group in reverse order (each
 * member's slice lands in the other's place). */
static int reverse_gathers;

static ss_status rev_ag(void *c, const int *ranks, int n, const float *send, float *recv,
                        const int64_t *counts, ss_diag *d)
{
    if (!reverse_gathers || n != 2)
        return tc_ag(c, ranks, n, send, recv, counts, d);
    int r[2] = {ranks[1], ranks[0]};
    int64_t k[2] = {counts[1], counts[0]};
    return tc_ag(c, r, n, send, recv, k, d);
}

typedef struct outcome {
    double wdiff, ldiff;     /* largest relative weight and loss differences, both ranks */
    int64_t calls[TC_KINDS]; /* rank 0's calls of each kind, all iterations and readback */
    int64_t peak;            /* rank 0's param_peak_bytes */
} outcome;

static ss_rt_config cfg = {4, 1, 0.05, 7, 0, 0, 0, -1};

/* SGD (lr 0.05) or Adam (lr 1e-3) for the runs that follow. */
static void optimizer(int adam)
{
    cfg.adam = adam;
    cfg.lr = adam ? 1e-3 : 0.05;
}

/* A two-GPU topology: the device plan defers other collectives' results
 * there (the CPU backend follows it), never ZeRO-3's. */
static const char *h100x2 =
    "{\"format\": \"simsearch-topology\", \"version\": 1, \"name\": \"h100x2\", \"compact\": "
    "{\"nodes\": 1, \"devices_per_node\": 2, \"device_type\": \"H100-SXM\", \"intra\": "
    "{\"kind\": \"nvswitch\", \"gbps\": 450.0, \"latency_us\": 1.0}, \"inter\": {\"kind\": "
    "\"infiniband\", \"gbps\": 50.0, \"latency_us\": 1.0, \"nics_per_node\": 2, \"pcie_gbps\": "
    "63.0, \"pcie_latency_us\": 2.0}}}";
static int gpu_topology; /* 1: run on h100x2 */
static double bucket_bytes; /* > 0: the plan's gradient bucket threshold */

/* Run spec of model (batch) on two thread ranks and one process. */
static void run_model(const char *model, int batch, const char *spec, outcome *o)
{
    ss_diag d;
    ss_diag_init(&d);
    ss_machine *m = NULL;
    if (gpu_topology)
        assert_int_equal(ss_machine_load_string(h100x2, "h100x2", &m, &d), SS_OK);
    else
        assert_int_equal(ss_machine_load(ss_test_path("topologies/local-cpu.json"), &m, &d),
                         SS_OK);
    ss_costmodel *cm = ss_cost_new(m);
    ss_graph *g = NULL;
    assert_int_equal(ss_model_build(model, batch, 2, &g, &d), SS_OK);
    ss_plan *p = NULL, *ref = ss_plan_new(g, m);
    if (ss_plan_from_spec(spec, g, m, &p, &d) != SS_OK)
        fail_msg("%s: %s", spec, d.msg);
    if (bucket_bytes > 0) {
        ss_plan_settings_of(p)->bucket_bytes = bucket_bytes;
        assert_int_equal(ss_plan_validate(p, g, m, &d), SS_OK);
    }
    ss_rt_comm self;
    ss_rt_comm_self(&self);
    ss_rt_state *rs = NULL;
    ss_rt_result rr;
    assert_int_equal(ss_rt_train(g, m, cm, ref, &cfg, &self, &rs, &rr, &d), SS_OK);
    tc_shared sh;
    memset(&sh, 0, sizeof sh);
    pthread_barrier_init(&sh.bar, NULL, 2);
    tc_job j[2];
    pthread_t th[2];
    for (int r = 0; r < 2; r++) {
        memset(&j[r], 0, sizeof j[r]);
        j[r].m = m;
        j[r].cm = cm;
        j[r].g = g;
        j[r].p = p;
        j[r].cfg = cfg;
        tc_init(&j[r].tc, &sh, r, &j[r].comm);
        j[r].comm.allgather_f32 = rev_ag;
    }
    for (int r = 0; r < 2; r++)
        assert_int_equal(pthread_create(&th[r], NULL, tc_run_job, &j[r]), 0);
    for (int r = 0; r < 2; r++)
        pthread_join(th[r], NULL);
    memset(o, 0, sizeof *o);
    for (int r = 0; r < 2; r++) {
        if (j[r].status != SS_OK)
            fail_msg("%s, rank %d: %s", spec, r, j[r].d.msg);
        const char *worst = NULL;
        o->wdiff = fmax(o->wdiff, ss_rt_weight_diff(j[r].st, rs, &worst));
        assert_non_null(worst);
        for (int i = 0; i < rr.n_iter; i++)
            o->ldiff = fmax(o->ldiff, fabs(j[r].res.loss[i] - rr.loss[i]) / fabs(rr.loss[i]));
        if (r == 0) {
            memcpy(o->calls, j[r].tc.calls, sizeof o->calls);
            o->peak = j[r].res.param_peak_bytes;
        }
        ss_rt_free(j[r].st);
        ss_rt_result_clear(&j[r].res);
    }
    pthread_barrier_destroy(&sh.bar);
    ss_rt_free(rs);
    ss_rt_result_clear(&rr);
    ss_plan_free(p);
    ss_plan_free(ref);
    ss_graph_free(g);
    ss_cost_free(cm);
    ss_machine_free(m);
}

static void report(const char *model, const char *spec, const outcome *o)
{
    printf("%s %s%s: weights %.3g, loss %.3g; %lld all-gathers, %lld reduce-scatters, %lld "
           "all-reduces; peak parameter bytes %lld\n",
           model, spec, cfg.adam ? " (Adam)" : "", o->wdiff, o->ldiff,
           (long long)o->calls[TC_ALLGATHER], (long long)o->calls[TC_REDUCE_SCATTER],
           (long long)o->calls[TC_ALLREDUCE], (long long)o->peak);
}

/* ZeRO-3 against one process and against the distributed optimizer. gathers
 * and scatters: rank 0's calls over the 5 iterations and the readback. */
static void check(const char *model, int batch, const char *z3, const char *dist,
                  int64_t gathers, int64_t scatters, double wtol)
{
    outcome a, b;
    run_model(model, batch, z3, &a);
    report(model, z3, &a);
    run_model(model, batch, dist, &b);
    report(model, dist, &b);
    assert_true(a.wdiff < wtol);
    assert_true(a.ldiff < 1e-6);
    assert_int_equal(a.calls[TC_ALLGATHER], gathers);
    assert_int_equal(a.calls[TC_REDUCE_SCATTER], scatters);
    assert_int_equal(a.calls[TC_ALLREDUCE], 0); /* no gradient all-reduce */
    assert_true(a.peak > 0 && a.peak < b.peak);
}

/* MLP: 3 linear ops (weight and bias: one unit each), one gradient bucket.
 * Per iteration and micro-batch 3 x (forward, backward) gathers and one
 * reduce-scatter; the readback gathers the 6 weights once. */
static void test_mlp_sgd(void **state)
{
    (void)state;
    optimizer(0);
    check(MLP, 16, "megatron:dp=2,zero=3", "megatron:dp=2,distopt=1", 5 * 6 + 6, 5, 1e-5);
    check(MLP, 16, "megatron:dp=2,mb=2,zero=3", "megatron:dp=2,mb=2,distopt=1", 5 * 12 + 6,
          5 * 2, 1e-5);
}

static void test_mlp_adam(void **state)
{
    (void)state;
    optimizer(1);
    check(MLP, 16, "megatron:dp=2,mb=2,zero=3", "megatron:dp=2,mb=2,distopt=1", 5 * 12 + 6,
          5 * 2, 1e-4);
}

static void test_gpt_sgd(void **state)
{
    (void)state;
    optimizer(0);
    outcome a;
    run_model(GPT, 4, "megatron:dp=2,zero=3", &a);
    report(GPT, "megatron:dp=2,zero=3", &a);
    assert_true(a.wdiff < 1e-5);
    assert_true(a.ldiff < 1e-6);
    assert_int_equal(a.calls[TC_ALLREDUCE], 0);
    assert_true(a.calls[TC_ALLGATHER] > 0 && a.calls[TC_REDUCE_SCATTER] > 0);
}

static void test_gpt_adam(void **state)
{
    (void)state;
    optimizer(1);
    outcome a, b;
    run_model(GPT, 4, "megatron:dp=2,mb=2,zero=3", &a);
    report(GPT, "megatron:dp=2,mb=2,zero=3", &a);
    run_model(GPT, 4, "megatron:dp=2,mb=2,distopt=1", &b);
    report(GPT, "megatron:dp=2,mb=2,distopt=1", &b);
    assert_true(a.wdiff < 1e-4);
    assert_true(a.ldiff < 1e-6);
    assert_int_equal(a.calls[TC_ALLREDUCE], 0);
    assert_true(a.peak < b.peak);
}

/* On a GPU topology (communication off the compute stream: the device plan
 * defers lay-backs, and the builder overlaps the gathers with compute) the
 * GPT under dp=2, 2 micro-batches, still matches one process. */
static void test_gpu_topology(void **state)
{
    (void)state;
    optimizer(0);
    outcome a;
    gpu_topology = 1;
    run_model(GPT, 4, "megatron:dp=2,mb=2,zero=3", &a);
    gpu_topology = 0;
    report(GPT, "megatron:dp=2,mb=2,zero=3 on h100x2", &a);
    assert_true(a.wdiff < 1e-5);
    assert_true(a.ldiff < 1e-6);
    assert_int_equal(a.calls[TC_ALLREDUCE], 0);
}

/* A bucket threshold (4 KiB) below fc1's and fc2's gradients (8 and 16
 * KiB): split buckets, each part reduce-scattered per
 * micro-batch (each drains its part of the full gradient), match one
 * process. */
static void test_split_buckets(void **state)
{
    (void)state;
    optimizer(1);
    outcome a, b;
    run_model(MLP, 16, "megatron:dp=2,mb=2,zero=3", &b);
    bucket_bytes = 4096;
    run_model(MLP, 16, "megatron:dp=2,mb=2,zero=3", &a);
    bucket_bytes = 0;
    report(MLP, "megatron:dp=2,mb=2,zero=3, 4 KiB buckets", &a);
    assert_true(a.wdiff < 1e-4);
    assert_true(a.ldiff < 1e-6);
    assert_int_equal(a.calls[TC_ALLREDUCE], 0);
    assert_true(a.calls[TC_REDUCE_SCATTER] > b.calls[TC_REDUCE_SCATTER]);
}

/* All-gathers that lay each member's shard in the other's place: the
 * forward reads wrong weights (the loss moves) and the trained weights
 * differ from one process. */
static void test_wrong_shard_order_detected(void **state)
{
    (void)state;
    optimizer(0);
    outcome a;
    reverse_gathers = 1;
    run_model(MLP, 16, "megatron:dp=2,zero=3", &a);
    reverse_gathers = 0;
    report(MLP, "megatron:dp=2,zero=3 with reversed gathers", &a);
    assert_true(a.wdiff > 1e-3);
    assert_true(a.ldiff > 1e-4);
}

/* The CUDA backend refuses ZeRO-3 before it looks for a GPU. */
static void test_cuda_refuses(void **state)
{
    (void)state;
    ss_diag d;
    ss_diag_init(&d);
    ss_machine *m = NULL;
    assert_int_equal(ss_machine_load(ss_test_path("topologies/local-cpu.json"), &m, &d), SS_OK);
    ss_costmodel *cm = ss_cost_new(m);
    ss_graph *g = NULL;
    assert_int_equal(ss_model_build(MLP, 16, 2, &g, &d), SS_OK);
    ss_plan *p = NULL;
    assert_int_equal(ss_plan_from_spec("megatron:dp=2,zero=3", g, m, &p, &d), SS_OK);
    ss_rt_config c = cfg;
    c.cuda = 1;
    ss_rt_state *s = NULL;
    ss_rt_result r;
    memset(&r, 0, sizeof r);
    ss_status st = ss_rt_plan_only(g, m, cm, p, &c, 0, 2, &s, &r, &d);
    assert_int_equal(st, SS_ERR_UNSUPPORTED);
    assert_null(s);
    assert_non_null(strstr(d.msg, "ZeRO-3")); /* the plan, before any GPU is looked for */
    printf("--backend cuda, zero=3: %s\n", d.msg);
    ss_plan_free(p);
    ss_graph_free(g);
    ss_cost_free(cm);
    ss_machine_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mlp_sgd),
        cmocka_unit_test(test_mlp_adam),
        cmocka_unit_test(test_gpt_sgd),
        cmocka_unit_test(test_gpt_adam),
        cmocka_unit_test(test_gpu_topology),
        cmocka_unit_test(test_split_buckets),
        cmocka_unit_test(test_wrong_shard_order_detected),
        cmocka_unit_test(test_cuda_refuses),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
