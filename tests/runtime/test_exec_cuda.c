/*
 * test_exec_cuda.c — the runtime's CUDA backend (runtime/cuda/exec_cuda.c)
 * against the CPU backend's one-process run: one rank on one GPU (SGD and
 * Adam; the loss summed with NCCL on the world communicator of one), and,
 * where two GPUs are present, two ranks as threads (NCCL all-reduces,
 * sends and receives on per-channel streams) under data-, tensor- and
 * pipeline-parallel plans. Without a GPU or without the CUDA backend it
 * checks that --backend cuda is refused before any work, naming why, and
 * exits 77 (ctest SKIP) saying so.
 */
#include "testutil.h"
#include "kernels/kernels.h"
#include "runtime/exec.h"
#include "thread_comm.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *h100x2 =
    "{\"format\": \"simsearch-topology\", \"version\": 1, \"name\": \"h100x2\", \"compact\": "
    "{\"nodes\": 1, \"devices_per_node\": 2, \"device_type\": \"H100-SXM\", \"intra\": "
    "{\"kind\": \"nvswitch\", \"gbps\": 450.0, \"latency_us\": 1.0}, \"inter\": {\"kind\": "
    "\"infiniband\", \"gbps\": 50.0, \"latency_us\": 1.0, \"nics_per_node\": 2, \"pcie_gbps\": "
    "63.0, \"pcie_latency_us\": 2.0}}}";

static ss_rt_config cfg = {4, 1, 0.05, 7, 0, 0, 1, -1};

/* Train spec on `ranks` GPU ranks (threads) and compare every rank with the
 * CPU backend's one-process run. */
static void check(const char *spec, int ranks, int adam)
{
    ss_diag d;
    ss_diag_init(&d);
    ss_machine *m = NULL;
    assert_int_equal(ss_machine_load_string(h100x2, "h100x2", &m, &d), SS_OK);
    ss_costmodel *cm = ss_cost_new(m);
    ss_graph *g = NULL;
    assert_int_equal(ss_model_build("mlp:layers=2,hidden=64,in=32", 16, ranks, &g, &d), SS_OK);
    ss_plan *p = NULL, *ref = ss_plan_new(g, m);
    if (ranks == 1)
        p = ss_plan_new(g, m);
    else
        assert_int_equal(ss_plan_from_spec(spec, g, m, &p, &d), SS_OK);
    ss_rt_config c = cfg;
    c.adam = adam;
    c.lr = adam ? 1e-3 : 0.05;
    ss_rt_config cpu = c;
    cpu.cuda = 0;
    ss_rt_comm self;
    ss_rt_comm_self(&self);
    ss_rt_state *rs = NULL;
    ss_rt_result rr;
    assert_int_equal(ss_rt_train(g, m, cm, ref, &cpu, &self, &rs, &rr, &d), SS_OK);
    tc_shared sh;
    memset(&sh, 0, sizeof sh);
    pthread_barrier_init(&sh.bar, NULL, (unsigned)ranks);
    tc_job j[2];
    pthread_t th[2];
    for (int r = 0; r < ranks; r++) {
        memset(&j[r], 0, sizeof j[r]);
        j[r].m = m;
        j[r].cm = cm;
        j[r].g = g;
        j[r].p = p;
        j[r].cfg = c;
        j[r].cfg.device = r;
        if (ranks == 1)
            j[r].comm = self;
        else /* NCCL moves the tensors: the host comm moves figures and NCCL ids */
            tc_init(&j[r].tc, &sh, r, &j[r].comm);
    }
    for (int r = 0; r < ranks; r++)
        assert_int_equal(pthread_create(&th[r], NULL, tc_run_job, &j[r]), 0);
    for (int r = 0; r < ranks; r++)
        pthread_join(th[r], NULL);
    for (int r = 0; r < ranks; r++) {
        if (j[r].status != SS_OK)
            fail_msg("%s on %d GPU rank(s), rank %d: %s", spec, ranks, r, j[r].d.msg);
        const char *worst = NULL;
        double w = ss_rt_weight_diff(j[r].st, rs, &worst), l = 0;
        for (int i = 0; i < rr.n_iter; i++)
            l = fmax(l, fabs(j[r].res.loss[i] - rr.loss[i]) / fabs(rr.loss[i]));
        printf("%s, %d GPU rank(s)%s, rank %d: weights %.3g (worst %s), loss %.3g, %lld "
               "collectives + transfers, %.3f ms measured, %.3f predicted\n",
               spec, ranks, adam ? ", Adam" : "", r, w, worst ? worst : "-", l,
               (long long)(j[r].res.collectives + j[r].res.transfers), j[r].res.measured_ms,
               j[r].res.predicted_ms);
        assert_true(w < 1e-4);
        assert_true(l < 1e-5);
        for (int k = 0; ranks == 2 && k < TC_KINDS; k++)
            assert_int_equal(j[r].tc.calls[k], 0); /* NCCL moved every tensor */
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

static void test_one_gpu(void **state)
{
    (void)state;
    check("one device", 1, 0);
    check("one device", 1, 1);
}

static void test_two_gpus(void **state)
{
    (void)state;
    if (ss_kernel_device_count(SS_BACKEND_CUDA) < 2) {
        printf("SKIP: the two-rank NCCL runs (one GPU present)\n");
        return;
    }
    check("data-parallel", 2, 0);
    check("megatron:tp=2", 2, 0);
    check("megatron:pp=2,mb=2", 2, 0);
    check("megatron:dp=2,distopt=1", 2, 1);
}

/* Without a GPU (or without the CUDA backend): refused before any work. */
static int refused(void)
{
    ss_diag d;
    ss_diag_init(&d);
    ss_status st = ss_rt_backend_check(1, 3, &d);
    if (st == SS_OK)
        return 0;
    assert_int_equal(st, SS_ERR_UNSUPPORTED);
    assert_non_null(strstr(d.msg, "rank 3"));
    assert_true(strstr(d.msg, "no CUDA GPU") || strstr(d.msg, "no CUDA backend") ||
                strstr(d.msg, "no CUDA kernels"));
    ss_machine *m = NULL;
    ss_diag_init(&d);
    assert_int_equal(ss_machine_load_string(h100x2, "h100x2", &m, &d), SS_OK);
    ss_costmodel *cm = ss_cost_new(m);
    ss_graph *g = NULL;
    assert_int_equal(ss_model_build("mlp:layers=1,hidden=16,in=8", 4, 1, &g, &d), SS_OK);
    ss_plan *p = ss_plan_new(g, m);
    ss_rt_comm self;
    ss_rt_comm_self(&self);
    ss_rt_state *s = NULL;
    ss_rt_result r;
    assert_int_equal(ss_rt_train(g, m, cm, p, &cfg, &self, &s, &r, &d), SS_ERR_UNSUPPORTED);
    assert_null(s);
    assert_non_null(strstr(d.msg, "rank 0"));
    assert_int_equal(ss_rt_backend_check(0, 0, &d), SS_OK);
    printf("SKIP: the CUDA runtime runs (%s); the refusal before any work is checked\n", d.msg);
    ss_plan_free(p);
    ss_graph_free(g);
    ss_cost_free(cm);
    ss_machine_free(m);
    return 1;
}

int main(void)
{
    if (refused())
        return 77;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_gpu),
        cmocka_unit_test(test_two_gpus),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
