/*
 * test_exec.c — the runtime's executor (runtime/exec.h) without MPI: two
 * "ranks" as threads with an in-memory all-reduce and send/receive run the
 * task graphs of data-, tensor- and pipeline-parallel plans of a small MLP
 * (SGD; Adam for TP) and must match a one-process run of the same model; a
 * communicator that drops the exchanges must not; plans
 * on more devices than ranks are refused; training lowers the loss.
 */
#include "testutil.h"
#include "runtime/cuda/plan.h"
#include "runtime/exec.h"
#include "mixed_gpt.h"
#include "thread_comm.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ fixtures */

/* A two-GPU topology: its communication does not occupy the compute
 * streams, so the device plan defers the results of collectives (and the
 * CPU backend follows it). */
static const char *h100x2 =
    "{\"format\": \"simsearch-topology\", \"version\": 1, \"name\": \"h100x2\", \"compact\": "
    "{\"nodes\": 1, \"devices_per_node\": 2, \"device_type\": \"H100-SXM\", \"intra\": "
    "{\"kind\": \"nvswitch\", \"gbps\": 450.0, \"latency_us\": 1.0}, \"inter\": {\"kind\": "
    "\"infiniband\", \"gbps\": 50.0, \"latency_us\": 1.0, \"nics_per_node\": 2, \"pcie_gbps\": "
    "63.0, \"pcie_latency_us\": 2.0}}}";
static int gpu_topology; /* 1: machine() is h100x2 */

static ss_machine *machine(void)
{
    ss_machine *m = NULL;
    ss_diag d;
    ss_diag_init(&d);
    if (gpu_topology)
        assert_int_equal(ss_machine_load_string(h100x2, "h100x2", &m, &d), SS_OK);
    else
        assert_int_equal(ss_machine_load(ss_test_path("topologies/local-cpu.json"), &m, &d),
                         SS_OK);
    return m;
}

static ss_rt_config cfg = {4, 1, 0.05, 7, 0, 0, 0, -1};

typedef ss_plan *(*plan_fn)(const ss_graph *g, const ss_machine *m);

/* Run plan spec of model (batch) on two thread ranks and compare with one
 * process: the largest relative weight and loss differences over both
 * ranks, the exchanges of a rank (collectives and transfers) and its calls
 * of each kind (calls may be NULL). fault: 0 none, 1 drop, 2 shuffle
 * (thread_comm.h). The plan: make's (spec names it) or spec's. */
/* Each rank's copy_bytes in run_plan's last run. */
static double copied[2];

static void run_plan(const char *model, int batch, const char *spec, plan_fn make, int fault,
                     double *wdiff, double *ldiff, int64_t *nred, int64_t *calls)
{
    ss_diag d;
    ss_diag_init(&d);
    ss_machine *m = machine();
    ss_costmodel *cm = ss_cost_new(m);
    ss_graph *g = NULL;
    assert_int_equal(ss_model_build(model, batch, 2, &g, &d), SS_OK);
    ss_plan *p = make ? make(g, m) : NULL, *ref = ss_plan_new(g, m);
    if (!make && ss_plan_from_spec(spec, g, m, &p, &d) != SS_OK)
        fail_msg("%s: %s", spec, d.msg);
    assert_non_null(p);
    ss_rt_comm self;
    ss_rt_comm_self(&self);
    ss_rt_state *rs = NULL;
    ss_rt_result rr;
    assert_int_equal(ss_rt_train(g, m, cm, ref, &cfg, &self, &rs, &rr, &d), SS_OK);
    tc_shared sh;
    memset(&sh, 0, sizeof sh);
    sh.drop = fault == 1;
    sh.shuffle = fault == 2;
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
    }
    if (sh.drop) { /* no barrier: run the ranks one after the other */
        for (int r = 0; r < 2; r++)
            tc_run_job(&j[r]);
    } else {
        for (int r = 0; r < 2; r++)
            assert_int_equal(pthread_create(&th[r], NULL, tc_run_job, &j[r]), 0);
        for (int r = 0; r < 2; r++)
            pthread_join(th[r], NULL);
    }
    *wdiff = *ldiff = 0;
    for (int r = 0; r < 2; r++) {
        if (j[r].status != SS_OK)
            fail_msg("%s, rank %d: %s", spec, r, j[r].d.msg);
        const char *worst = NULL;
        double w = ss_rt_weight_diff(j[r].st, rs, &worst);
        assert_non_null(worst);
        *wdiff = fmax(*wdiff, w);
        for (int i = 0; i < rr.n_iter; i++)
            *ldiff = fmax(*ldiff, fabs(j[r].res.loss[i] - rr.loss[i]) / fabs(rr.loss[i]));
        *nred = j[r].res.collectives + j[r].res.transfers;
        copied[r] = j[r].res.copy_bytes;
        for (int k = 0; calls && k < TC_KINDS; k++)
            calls[k] = j[r].tc.calls[k];
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

static void run_model(const char *model, int batch, const char *spec, int fault, double *wdiff,
                      double *ldiff, int64_t *nred, int64_t *calls)
{
    run_plan(model, batch, spec, NULL, fault, wdiff, ldiff, nred, calls);
}

/* The MLP (batch 16) under spec. */
static void run_two(const char *spec, int fault, double *wdiff, double *ldiff, int64_t *nred)
{
    run_model("mlp:layers=2,hidden=64,in=32", 16, spec, fault, wdiff, ldiff, nred, NULL);
}

/* ------------------------------------------------------------ tests */

static void test_one_process_trains(void **state)
{
    (void)state;
    ss_diag d;
    ss_diag_init(&d);
    ss_machine *m = machine();
    ss_graph *g = NULL;
    assert_int_equal(ss_model_build("mlp:layers=2,hidden=64,in=32", 16, 1, &g, &d), SS_OK);
    ss_plan *p = ss_plan_new(g, m);
    ss_rt_comm self;
    ss_rt_comm_self(&self);
    ss_rt_config c = {20, 0, 0.5, 3, 0, 1, 0, -1};
    ss_rt_state *a = NULL, *b = NULL;
    ss_rt_result ra, rb;
    ss_costmodel *cm = ss_cost_new(m);
    assert_int_equal(ss_rt_train(g, m, cm, p, &c, &self, &a, &ra, &d), SS_OK);
    assert_int_equal(ss_rt_train(g, m, cm, p, &c, &self, &b, &rb, &d), SS_OK);
    ss_cost_free(cm);
    /* fixed data: the loss falls; the run is deterministic */
    assert_true(ra.loss[19] < ra.loss[0] - 0.05);
    const char *w = NULL;
    assert_true(ss_rt_weight_diff(a, b, &w) == 0);
    assert_true(ra.loss[19] == rb.loss[19]);
    assert_true(ra.measured_ms > 0);
    assert_int_equal(ra.collectives + ra.transfers, 0); /* one rank: nothing to exchange */
    assert_true(ra.predicted_ms > 0); /* the simulated graph it ran */
    char *ev = NULL;
    assert_int_equal(ss_rt_trace_events(a, &ev, &d), SS_OK);
    assert_non_null(strstr(ev, "\"name\": \"fwd fc1 t0 mb0\""));
    assert_non_null(strstr(ev, "\"name\": \"bwd out t0 mb0\""));
    assert_non_null(strstr(ev, "\"name\": \"update fc1.weight\""));
    ss_free(ev);
    ss_rt_free(a);
    ss_rt_free(b);
    ss_rt_result_clear(&ra);
    ss_rt_result_clear(&rb);
    ss_plan_free(p);
    ss_graph_free(g);
    ss_machine_free(m);
}

static void test_data_parallel_matches(void **state)
{
    (void)state;
    double w, l;
    int64_t n;
    run_two("data-parallel", 0, &w, &l, &n);
    assert_true(w < 1e-5);
    assert_true(l < 1e-6);
    assert_int_equal(n, 6); /* the graph's gradient buckets: one per weight */
    /* every tile's regions are whole rows (samples): used in place, no copies */
    assert_true(copied[0] == 0 && copied[1] == 0);
}

static void test_tensor_parallel_matches(void **state)
{
    (void)state;
    double w, l;
    int64_t n;
    run_two("megatron:tp=2", 0, &w, &l, &n);
    assert_true(w < 1e-5);
    assert_true(l < 1e-6);
    /* the graph's collectives: fc2's partial sums, the split loss; backward:
     * the gradient of relu2 (read whole by both halves of out), fc2's bias */
    assert_int_equal(n, 4);
    /* fc1's column half [16 x 32 of 64] and relu1's are not contiguous: copied */
    assert_true(copied[0] > 0 && copied[1] > 0);
}

static void test_pipeline_matches(void **state)
{
    (void)state;
    double w, l;
    int64_t n;
    run_two("megatron:pp=2,mb=2", 0, &w, &l, &n);
    assert_true(w < 1e-5);
    assert_true(l < 1e-6);
    assert_int_equal(n, 4); /* per micro-batch: the activation sent, its gradient back */
}

static void test_tensor_parallel_adam_matches(void **state)
{
    (void)state;
    double w, l;
    int64_t n;
    cfg.adam = 1;
    cfg.lr = 1e-3;
    run_two("megatron:tp=2", 0, &w, &l, &n);
    cfg.adam = 0;
    cfg.lr = 0.05;
    assert_true(w < 1e-4);
    assert_true(l < 1e-6);
}

/* On a GPU topology the CPU backend defers every collective's and
 * non-blocking transfer's result to the device plan's lay-back point (as the
 * CUDA backend does): the numerics still match one process, so those points
 * come early enough. */
static void test_deferred_lay_backs_match(void **state)
{
    (void)state;
    gpu_topology = 1;
    ss_diag d;
    ss_diag_init(&d);
    ss_machine *m = machine();
    ss_costmodel *cm = ss_cost_new(m);
    ss_graph *g = NULL;
    assert_int_equal(ss_model_build("mlp:layers=2,hidden=64,in=32", 16, 2, &g, &d), SS_OK);
    ss_plan *p = NULL;
    assert_int_equal(ss_plan_from_spec("data-parallel", g, m, &p, &d), SS_OK);
    ss_rt_state *s = NULL;
    ss_rt_result r;
    memset(&r, 0, sizeof r);
    assert_int_equal(ss_rt_plan_only(g, m, cm, p, &cfg, 0, 2, &s, &r, &d), SS_OK);
    ss_rt_devplan dp;
    assert_int_equal(ss_rt_devplan_make(s, &dp, &d), SS_OK);
    int deferred = 0;
    for (int i = 0; i < dp.n_steps; i++)
        deferred += dp.steps[i].stream != 0 && dp.steps[i].lays_back;
    assert_int_equal(deferred, 6); /* every gradient bucket */
    ss_rt_devplan_clear(&dp);
    ss_rt_free(s);
    ss_rt_result_clear(&r);
    ss_plan_free(p);
    ss_graph_free(g);
    ss_cost_free(cm);
    ss_machine_free(m);
    static const char *specs[] = {"data-parallel", "megatron:tp=2", "megatron:pp=2,mb=2",
                                  "megatron:dp=2,distopt=1"};
    for (int k = 0; k < 4; k++) {
        double w, l;
        int64_t n;
        run_two(specs[k], 0, &w, &l, &n);
        printf("%s on h100x2, deferred lay-backs: weights %.3g, loss %.3g, %lld exchanges\n",
               specs[k], w, l, (long long)n);
        assert_true(w < 1e-5);
        assert_true(l < 1e-6);
        assert_true(n > 0);
    }
    gpu_topology = 0;
}

#define GPT "gpt:layers=2,hidden=64,heads=4,seq=16,vocab=128,vocab_pad=0,dropout=0,precision=fp32"

/* The zoo GPT takes precision=fp32: f32 activations, fp32 training, the
 * parameters of the bf16 model. */
static void test_zoo_fp32(void **state)
{
    (void)state;
    ss_diag d;
    ss_diag_init(&d);
    ss_graph *a = NULL, *b = NULL;
    assert_int_equal(ss_model_build(GPT, 4, 1, &a, &d), SS_OK);
    assert_int_equal(ss_model_build("gpt:layers=2,hidden=64,heads=4,seq=16,vocab=128,"
                                    "vocab_pad=0,dropout=0", 4, 1, &b, &d), SS_OK);
    assert_int_equal(ss_graph_parameters(a), ss_graph_parameters(b));
    assert_int_equal(ss_graph_precision(a), SS_PREC_FP32);
    assert_int_equal(ss_graph_precision(b), SS_PREC_MIXED);
    int f32 = 0, bf16 = 0; /* f32 tensors of a; bf16 or f32 ones of b */
    for (int t = 0; t < ss_graph_n_tensors(a); t++) {
        ss_dtype k = ss_graph_tensor(a, t)->dtype;
        assert_true(k == SS_F32 || k == SS_I32 || k == SS_I64);
        f32 += k == SS_F32;
        bf16 += ss_graph_tensor(b, t)->dtype == SS_BF16 || ss_graph_tensor(b, t)->dtype == SS_F32;
    }
    assert_true(f32 > 0 && f32 == bf16);
    ss_graph_free(a);
    ss_graph_free(b);
    assert_int_equal(ss_model_build("gpt:layers=1,precision=fp64", 4, 1, &a, &d), SS_ERR_INVALID);
    assert_non_null(strstr(d.msg, "fp32"));
}

/* Every collective runs as itself: the distributed optimizer's
 * reduce-scatter of the gradients and all-gather of the weights,
 * sequence parallelism's reduce-scatter of partial sums and all-gather of
 * output gradients, expert parallelism's all-to-alls (no all-reduce and no
 * point-to-point send stands in for them), and the numerics match one
 * process; handing each member the other's block breaks them. */
static void test_collectives_run_as_themselves(void **state)
{
    (void)state;
    static const struct {
        const char *model, *spec;
        int batch;
        int64_t rs, ag, a2a, ar_max, sends_max; /* calls of a rank, all iterations */
    } c[] = {
        /* 5 iterations x one bucket; the loss only is all-reduced (in doubles) */
        {"mlp:layers=2,hidden=64,in=32", "megatron:dp=2,distopt=1", 16, 5, 5, 0, 0, 0},
        {GPT, "megatron:dp=2,distopt=1", 4, 5, 5, 0, 0, 0},
        /* per iteration: 5 partial-sum reduce-scatters, 5 gradient all-gathers */
        {GPT, "megatron:tp=2,sp=1", 4, 25, 25, 0, 1000, 1000},
        /* per iteration: 2 layers x dispatch and combine x forward and backward; no
         * point-to-point send of the expert slots */
        {GPT ",experts=2,topk=1", "megatron:dp=2,ep=2", 4, 0, 0, 40, 1000, 0},
    };
    for (int k = 0; k < 4; k++) {
        double w, l, ws, ls;
        int64_t n, calls[TC_KINDS], bad[TC_KINDS];
        run_model(c[k].model, c[k].batch, c[k].spec, 0, &w, &l, &n, calls);
        run_model(c[k].model, c[k].batch, c[k].spec, 2, &ws, &ls, &n, bad);
        printf("%s %s: weights %.3g, loss %.3g; %lld reduce-scatters, %lld all-gathers, %lld "
               "all-to-alls, %lld all-reduces, %lld sends; wrong blocks: weights %.3g\n",
               c[k].model, c[k].spec, w, l, (long long)calls[TC_REDUCE_SCATTER],
               (long long)calls[TC_ALLGATHER], (long long)calls[TC_ALLTOALL],
               (long long)calls[TC_ALLREDUCE], (long long)calls[TC_SEND], ws);
        assert_true(w < 1e-5);
        assert_true(l < 1e-6);
        assert_int_equal(calls[TC_REDUCE_SCATTER], c[k].rs);
        assert_int_equal(calls[TC_ALLGATHER], c[k].ag);
        assert_int_equal(calls[TC_ALLTOALL], c[k].a2a);
        assert_true(calls[TC_ALLREDUCE] <= c[k].ar_max);
        assert_true(calls[TC_SEND] <= c[k].sends_max);
        assert_true(ws > 1e-3);
    }
}

/* Mixed SOAP plans as the search finds them: the GPT plan above matches one
 * process. Its token ids (i32) move between the ranks as raw 4-byte values;
 * the tied table embed.tokens.weight is read by the embedding split by
 * hidden and by lm_head split by vocabulary, overlapping unequal regions
 * that the builder cuts into shards (build_weights.c, cut_overlaps): before,
 * each rank updated the overlap twice and no rank summed the pieces both
 * read, and the weights were 5.8e-3 off after one iteration. */
static void test_mixed_gpt_matches(void **state)
{
    (void)state;
    double w, l;
    int64_t n, calls[TC_KINDS];
    run_plan(GPT, 4, "mixed", mixed_gpt_plan, 0, &w, &l, &n, calls);
    printf("mixed GPT plan: weights %.3g, loss %.3g, %lld exchanges, %lld sends\n", w, l,
           (long long)n, (long long)calls[TC_SEND]);
    assert_true(w < 1e-5);
    assert_true(l < 1e-6);
    assert_true(calls[TC_SEND] > 0);
}

static void test_broken_exchange_detected(void **state)
{
    (void)state;
    double w, l;
    int64_t n;
    run_two("data-parallel", 1, &w, &l, &n);
    assert_true(w > 1e-3);
}

static void test_more_devices_than_ranks(void **state)
{
    (void)state;
    ss_diag d;
    ss_diag_init(&d);
    ss_machine *m = machine();
    ss_graph *g = NULL;
    assert_int_equal(ss_model_build("mlp:layers=1,hidden=16,in=8", 4, 2, &g, &d), SS_OK);
    ss_plan *p = NULL;
    assert_int_equal(ss_plan_from_spec("data-parallel", g, m, &p, &d), SS_OK);
    ss_rt_comm self;
    ss_rt_comm_self(&self);
    ss_rt_state *s = NULL;
    ss_rt_result r;
    ss_costmodel *cm = ss_cost_new(m);
    assert_int_equal(ss_rt_train(g, m, cm, p, &cfg, &self, &s, &r, &d), SS_ERR_INVALID);
    assert_non_null(strstr(d.msg, "ranks"));
    assert_null(s);
    ss_rt_config bad = {0, 0, 0.1, 1, 0, 0, 0, -1};
    assert_int_equal(ss_rt_train(g, m, cm, p, &bad, &self, &s, &r, &d), SS_ERR_INVALID);
    ss_cost_free(cm);
    ss_plan_free(p);
    ss_graph_free(g);
    ss_machine_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_process_trains),
        cmocka_unit_test(test_data_parallel_matches),
        cmocka_unit_test(test_tensor_parallel_matches),
        cmocka_unit_test(test_tensor_parallel_adam_matches),
        cmocka_unit_test(test_pipeline_matches),
        cmocka_unit_test(test_deferred_lay_backs_match),
        cmocka_unit_test(test_zoo_fp32),
        cmocka_unit_test(test_collectives_run_as_themselves),
        cmocka_unit_test(test_mixed_gpt_matches),
        cmocka_unit_test(test_broken_exchange_detected),
        cmocka_unit_test(test_more_devices_than_ranks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
