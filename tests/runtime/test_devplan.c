/*
 * test_devplan.c — the CUDA backend's device plan (runtime/cuda/plan.h),
 * which needs no GPU: the streams of compute and communication steps, the
 * NCCL call, group, peer and counts of every transfer and collective, the
 * communicators, and where each deferred result is laid back, for data-,
 * pipeline-parallel and distributed-optimizer plans of a small MLP (and an
 * expert-parallel MoE GPT's all-to-alls, a mixed GPT plan's i32 token-id
 * sends) on a
 * two-GPU topology, and on the CPU topology whose communication occupies
 * the compute stream.
 */
#include "testutil.h"
#include "runtime/cuda/plan.h"
#include "mixed_gpt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *h100x2 =
    "{\"format\": \"simsearch-topology\", \"version\": 1, \"name\": \"h100x2\", \"compact\": "
    "{\"nodes\": 1, \"devices_per_node\": 2, \"device_type\": \"H100-SXM\", \"intra\": "
    "{\"kind\": \"nvswitch\", \"gbps\": 450.0, \"latency_us\": 1.0}, \"inter\": {\"kind\": "
    "\"infiniband\", \"gbps\": 50.0, \"latency_us\": 1.0, \"nics_per_node\": 2, \"pcie_gbps\": "
    "63.0, \"pcie_latency_us\": 2.0}}}";

static const char *h100x4 =
    "{\"format\": \"simsearch-topology\", \"version\": 1, \"name\": \"h100x4\", \"compact\": "
    "{\"nodes\": 1, \"devices_per_node\": 4, \"device_type\": \"H100-SXM\", \"intra\": "
    "{\"kind\": \"nvswitch\", \"gbps\": 450.0, \"latency_us\": 1.0}, \"inter\": {\"kind\": "
    "\"infiniband\", \"gbps\": 50.0, \"latency_us\": 1.0, \"nics_per_node\": 4, \"pcie_gbps\": "
    "63.0, \"pcie_latency_us\": 2.0}}}";

typedef struct fx {
    ss_machine *m;
    ss_costmodel *cm;
    ss_graph *g;
    ss_plan *p;
    ss_rt_state *s;
    ss_rt_result r;
    ss_rt_devplan dp;
} fx;

/* A model spec (batch 4) for the two-rank fixtures in place of the MLP
 * (NULL: the MLP). */
static const char *model2;

/* The device plan of `rank` (of 2, or 4 on "h100x4") for plan spec on
 * topology (NULL: h100x2); spec "mixed": mixed_gpt.h's plan (model2 the GPT). */
static void make(fx *f, const char *topo, const char *spec, int rank)
{
    ss_diag d;
    ss_diag_init(&d);
    memset(f, 0, sizeof *f);
    int size = topo && !strcmp(topo, "h100x4") ? 4 : 2;
    if (size == 4)
        assert_int_equal(ss_machine_load_string(h100x4, "h100x4", &f->m, &d), SS_OK);
    else if (topo)
        assert_int_equal(ss_machine_load(ss_test_path(topo), &f->m, &d), SS_OK);
    else
        assert_int_equal(ss_machine_load_string(h100x2, "h100x2", &f->m, &d), SS_OK);
    f->cm = ss_cost_new(f->m);
    if (size == 4) { /* a small GPT in fp32 (the CPU kernels describe it) */
        if (ss_model_build("gpt:layers=2,hidden=64,heads=4,seq=16,vocab=128,vocab_pad=0,"
                           "dropout=0,precision=fp32", 4, 4, &f->g, &d) != SS_OK)
            fail_msg("%s", d.msg);
    } else if (model2) {
        if (ss_model_build(model2, 4, 2, &f->g, &d) != SS_OK)
            fail_msg("%s", d.msg);
    } else {
        assert_int_equal(ss_model_build("mlp:layers=2,hidden=64,in=32", 16, 2, &f->g, &d), SS_OK);
    }
    if (!strcmp(spec, "mixed"))
        f->p = mixed_gpt_plan(f->g, f->m);
    else
        assert_int_equal(ss_plan_from_spec(spec, f->g, f->m, &f->p, &d), SS_OK);
    ss_rt_config c = {1, 0, 0.05, 1, 0, 0, 0, -1};
    if (ss_rt_plan_only(f->g, f->m, f->cm, f->p, &c, rank, size, &f->s, &f->r, &d) != SS_OK)
        fail_msg("%s", d.msg);
    if (ss_rt_devplan_make(f->s, &f->dp, &d) != SS_OK)
        fail_msg("%s", d.msg);
    assert_int_equal(f->dp.n_steps, f->s->n_mine);
}

static void done(fx *f)
{
    ss_rt_devplan_clear(&f->dp);
    ss_rt_free(f->s);
    ss_rt_result_clear(&f->r);
    ss_plan_free(f->p);
    ss_graph_free(f->g);
    ss_cost_free(f->cm);
    ss_machine_free(f->m);
}

static int kind(const fx *f, int i) { return f->s->tg->kind[f->dp.steps[i].task]; }
static int is_comm(const fx *f, int i)
{
    return kind(f, i) == SS_TASK_XFER || kind(f, i) == SS_TASK_COLLECTIVE;
}

/* The index of the step before which step j is laid back (n_steps: after
 * the last); -1 when it never is; fails when it is laid back twice. */
static int laid_back_at(const fx *f, int j)
{
    int at = -1;
    for (int i = 0; i < f->dp.n_steps; i++)
        for (int k = 0; k < f->dp.steps[i].n_flush; k++)
            if (f->dp.flush[f->dp.steps[i].flush_off + k] == j) {
                assert_int_equal(at, -1);
                at = i;
            }
    for (int k = 0; k < f->dp.n_end; k++)
        if (f->dp.flush[f->dp.end_off + k] == j) {
            assert_int_equal(at, -1);
            at = f->dp.n_steps;
        }
    return at;
}

static int overlaps(const ss_region *a, const ss_region *b, int nd)
{
    for (int k = 0; k < nd; k++)
        if (a->r[k].hi <= b->r[k].lo || b->r[k].hi <= a->r[k].lo)
            return 0;
    return 1;
}

static void test_data_parallel(void **state)
{
    (void)state;
    fx f;
    make(&f, NULL, "data-parallel", 0);
    int colls = 0;
    assert_int_equal(f.dp.world, 0); /* no transfer in the graph */
    assert_int_equal(f.dp.n_groups, 1);
    assert_int_equal(f.dp.group_off[1], 2);
    assert_int_equal(f.dp.group_ranks[0], 0);
    assert_int_equal(f.dp.group_ranks[1], 1);
    assert_true(f.dp.n_streams >= 2);
    int64_t scratch = 0;
    for (int i = 0; i < f.dp.n_steps; i++) {
        const ss_rt_step *x = &f.dp.steps[i];
        scratch += x->scratch_n;
        if (!is_comm(&f, i)) {
            assert_int_equal(x->stream, 0);
            assert_int_equal(x->call, SS_RT_CALL_NONE);
            continue;
        }
        const ss_build_desc *e = &f.s->ds.t[x->task];
        colls++;
        assert_int_equal(x->call, SS_RT_CALL_ALLREDUCE);
        assert_string_equal(ss_rt_call_name(x->call), "allreduce");
        assert_int_equal(x->group, 0);
        assert_true(x->stream >= 1 && x->stream < f.dp.n_streams);
        int64_t v = 0;
        for (int k = 0; k < e->n_item; k++)
            v += ss_region_volume(&f.s->ds.items[e->item_off + k].reg);
        assert_true(x->count > 0 && x->count == x->hi - x->lo && x->count <= v);
        assert_true(x->lays_back);
        /* the bucket's sum is laid back before any update of its weights */
        int at = laid_back_at(&f, i);
        assert_true(at > i);
        for (int u = i + 1; u < f.dp.n_steps; u++) {
            if (kind(&f, u) != SS_TASK_UPDATE)
                continue;
            const ss_build_desc *ue = &f.s->ds.t[f.dp.steps[u].task];
            for (int k = 0; k < e->n_item; k++) {
                const ss_build_item *it = &f.s->ds.items[e->item_off + k];
                if (it->tensor == ue->tensor &&
                    overlaps(&it->reg, &ue->reg, ss_graph_tensor(f.g, it->tensor)->ndim))
                    assert_true(at <= u);
            }
        }
    }
    assert_int_equal(colls, 6); /* a bucket per weight (tests/runtime/test_exec.c) */
    assert_true(f.dp.scratch == scratch);
    done(&f);
}

static void test_pipeline(void **state)
{
    (void)state;
    for (int rank = 0; rank < 2; rank++) {
        fx f;
        make(&f, NULL, "megatron:pp=2,mb=2", rank);
        assert_int_equal(f.dp.world, 1);
        int sends = 0, recvs = 0, blocking = 0;
        for (int i = 0; i < f.dp.n_steps; i++) {
            const ss_rt_step *x = &f.dp.steps[i];
            if (!is_comm(&f, i))
                continue;
            const ss_build_desc *e = &f.s->ds.t[x->task];
            assert_int_equal(kind(&f, i), SS_TASK_XFER);
            assert_int_equal(x->peer, 1 - rank);
            assert_int_equal(x->count, ss_region_volume(&e->reg));
            /* Megatron's pipeline sends block both stages' compute streams in
             * the task graph: so on the GPU */
            const ss_taskgraph *tg = f.s->tg;
            int on_compute = 0;
            for (int k = tg->res_off[x->task]; k < tg->res_off[x->task + 1]; k++)
                on_compute |= tg->res[k] < tg->n_devices;
            assert_int_equal(x->stream == 0, on_compute);
            blocking += on_compute;
            if (x->call == SS_RT_CALL_SEND) {
                assert_int_equal(e->src, rank);
                assert_false(x->lays_back);
                assert_int_equal(laid_back_at(&f, i), -1);
                sends++;
            } else {
                assert_int_equal(x->call, SS_RT_CALL_RECV);
                assert_int_equal(e->dst, rank);
                /* laid back at once on the compute stream, else before the
                 * compute step that reads it */
                int at = laid_back_at(&f, i);
                if (x->stream == 0) {
                    assert_int_equal(at, -1);
                } else {
                    assert_true(at > i && at < f.dp.n_steps);
                    assert_false(is_comm(&f, at));
                }
                recvs++;
            }
        }
        /* per micro-batch: stage 0 sends the activation and receives its
         * gradient, stage 1 the reverse */
        assert_int_equal(sends, 2);
        assert_int_equal(recvs, 2);
        assert_int_equal(blocking, 4);
        assert_int_equal(f.dp.n_streams, 1);
        done(&f);
    }
}

static void test_distributed_optimizer(void **state)
{
    (void)state;
    fx f;
    make(&f, NULL, "megatron:dp=2,distopt=1", 1);
    int gathers = 0, scatters = 0;
    for (int i = 0; i < f.dp.n_steps; i++) {
        const ss_rt_step *x = &f.dp.steps[i];
        const ss_build_desc *e = &f.s->ds.t[x->task];
        if (kind(&f, i) == SS_TASK_COLLECTIVE && !e->gather && e->n_parts <= 1) {
            /* the gradient bucket: a reduce-scatter of the members' padded slices */
            assert_int_equal(x->call, SS_RT_CALL_REDUCESCATTER);
            assert_true(x->count == ss_rt_gather_chunk(f.s, e));
            assert_true(x->scratch_n == 3 * x->count); /* both members' blocks, then its own */
            assert_true(x->lays_back);
            assert_string_equal(ss_rt_call_name(x->call), "reducescatter");
            scatters++;
        }
        if (kind(&f, i) != SS_TASK_COLLECTIVE || !e->gather)
            continue;
        if (x->call == SS_RT_CALL_ALLGATHER) {
            int64_t chunk = 0;
            for (int k = 0; k < e->n_item; k++)
                chunk += (ss_region_volume(&f.s->ds.items[e->item_off + k].reg) + 1) / 2;
            assert_true(x->count == chunk);
            assert_true(x->scratch_n == 3 * chunk); /* its chunk, then both members' */
            assert_int_equal(ss_rt_gather_chunk(f.s, e), chunk);
        } else {
            assert_int_equal(x->call, SS_RT_CALL_ALLREDUCE);
            assert_true(x->zero_pad && e->n_parts > 1);
        }
        gathers++;
    }
    assert_true(gathers > 0 && scatters > 0);
    done(&f);
}

/* Sequence parallelism: the partial sums' reduce-scatter and the output
 * gradients' all-gather run as ncclReduceScatter / ncclAllGather of each
 * member's box (what its consumers read: disjoint halves), padded to the
 * larger. */
static void test_sequence_parallel(void **state)
{
    (void)state;
    model2 = "gpt:layers=2,hidden=64,heads=4,seq=16,vocab=128,vocab_pad=0,dropout=0,"
             "precision=fp32";
    fx f;
    make(&f, NULL, "megatron:tp=2,sp=1", 0);
    int rs = 0, ag = 0;
    for (int i = 0; i < f.dp.n_steps; i++) {
        const ss_rt_step *x = &f.dp.steps[i];
        const ss_build_desc *e = &f.s->ds.t[x->task];
        if (kind(&f, i) != SS_TASK_COLLECTIVE ||
            (e->coll != SS_BUILD_COLL_SCATTER && e->coll != SS_BUILD_COLL_GATHER))
            continue;
        assert_int_equal(x->call, e->coll == SS_BUILD_COLL_SCATTER ? SS_RT_CALL_REDUCESCATTER
                                                                   : SS_RT_CALL_ALLGATHER);
        assert_true(x->box_off >= 0 && e->n_dev == 2 && e->n_item == 1);
        const ss_region *b = f.dp.boxes + x->box_off;
        int64_t v0 = ss_region_volume(&b[0]), v1 = ss_region_volume(&b[1]);
        int nd = ss_graph_tensor(f.g, f.s->ds.items[e->item_off].tensor)->ndim;
        assert_true(v0 > 0 && v1 > 0 && !overlaps(&b[0], &b[1], nd));
        assert_true(v0 + v1 == ss_region_volume(&f.s->ds.items[e->item_off].reg));
        assert_true(x->count == (v0 > v1 ? v0 : v1) && x->scratch_n == 3 * x->count);
        rs += x->call == SS_RT_CALL_REDUCESCATTER;
        ag += x->call == SS_RT_CALL_ALLGATHER;
    }
    assert_int_equal(rs, 5); /* as many as the CPU backend runs per iteration */
    assert_int_equal(ag, 5);
    done(&f);
    model2 = NULL;
}

/* Expert parallelism: each all-to-all is one step that sends this rank's
 * regions for the other rank and receives the other's (the transfers it
 * folds do nothing on their own), and the consumers of what it receives
 * wait for its lay-back. */
static void test_alltoall(void **state)
{
    (void)state;
    model2 = "gpt:layers=2,hidden=64,heads=4,seq=16,vocab=128,vocab_pad=0,dropout=0,"
             "precision=fp32,experts=2,topk=1";
    for (int rank = 0; rank < 2; rank++) {
        fx f;
        make(&f, NULL, "megatron:dp=2,ep=2", rank);
        int a2a = 0, folded = 0;
        for (int i = 0; i < f.dp.n_steps; i++) {
            const ss_rt_step *x = &f.dp.steps[i];
            const ss_build_desc *e = &f.s->ds.t[x->task];
            if (kind(&f, i) == SS_TASK_XFER && f.s->tg->dur[x->task] == 0) {
                assert_int_equal(x->call, SS_RT_CALL_NONE);
                folded++;
                continue;
            }
            if (kind(&f, i) != SS_TASK_COLLECTIVE || e->coll != SS_BUILD_COLL_ALLTOALL)
                continue;
            int xs[64], nx = ss_rt_a2a_xfers(f.s->tg, x->task, xs);
            int64_t sent = 0, got = 0;
            assert_true(nx == 2);
            for (int k = 0; k < nx; k++) {
                const ss_build_desc *t = &f.s->ds.t[xs[k]];
                sent += t->src == rank ? ss_region_volume(&t->reg) : 0;
                got += t->dst == rank ? ss_region_volume(&t->reg) : 0;
            }
            assert_int_equal(x->call, SS_RT_CALL_ALLTOALL);
            assert_true(x->lo == sent && x->hi == got && sent > 0 && got > 0);
            assert_true(x->count == sent + got && x->scratch_n == x->count);
            assert_true(x->lays_back);
            /* laid back before the iteration ends, after its own step */
            int at = laid_back_at(&f, i);
            assert_true(x->stream == 0 ? at == -1 : at > i);
            a2a++;
        }
        /* 2 layers x dispatch and combine x forward and backward */
        assert_int_equal(a2a, 8);
        assert_int_equal(folded, 16);
        done(&f);
    }
    model2 = NULL;
}

/* tp x pp: Megatron's scatter-gather stage-boundary sends: each
 * tensor-parallel rank sends its half of the activation (its receiver's
 * place in the all-gather's group), the receivers all-gather the halves. */
static void test_scatter_gather(void **state)
{
    (void)state;
    int sg_sends = 0, gathers = 0;
    for (int rank = 0; rank < 4; rank++) {
        fx f;
        make(&f, "h100x4", "megatron:tp=2,pp=2,mb=2", rank);
        for (int i = 0; i < f.dp.n_steps; i++) {
            const ss_rt_step *x = &f.dp.steps[i];
            const ss_build_desc *e = &f.s->ds.t[x->task];
            if (kind(&f, i) == SS_TASK_XFER && e->parts > 1) {
                int64_t v = ss_region_volume(&e->reg), lo, hi;
                int k = ss_rt_sg_slice(f.s, x->task);
                assert_true(k >= 0 && k < e->parts);
                ss_rt_slice_of(v, k, e->parts, &lo, &hi);
                assert_true(x->lo == lo && x->hi == hi && x->count == hi - lo && hi - lo < v);
                assert_int_equal(x->call, e->src == rank ? SS_RT_CALL_SEND : SS_RT_CALL_RECV);
                sg_sends++;
            }
            if (kind(&f, i) == SS_TASK_COLLECTIVE && e->coll == SS_BUILD_COLL_SENDGATHER) {
                assert_int_equal(x->call, SS_RT_CALL_ALLGATHER);
                assert_int_equal(e->n_item, 1);
                int64_t v = ss_region_volume(&f.s->ds.items[e->item_off].reg);
                assert_true(x->count == (v + e->n_dev - 1) / e->n_dev);
                gathers++;
            }
        }
        done(&f);
    }
    assert_true(sg_sends > 0);
    assert_true(gathers > 0);
    printf("tp x pp on 4 GPUs: %d scatter-gather sends and receives, %d all-gathers\n", sg_sends,
           gathers);
}

/* local-cpu.json's cores move their own messages (comm_blocks_compute): the
 * task graph puts communication on the compute resource, so does the plan:
 * one stream, results laid back at once, nothing deferred. */
static void test_comm_on_compute_stream(void **state)
{
    (void)state;
    fx f;
    make(&f, "topologies/local-cpu.json", "data-parallel", 0);
    assert_int_equal(f.dp.n_streams, 1);
    assert_int_equal(f.dp.n_end, 0);
    int comm = 0;
    for (int i = 0; i < f.dp.n_steps; i++) {
        assert_int_equal(f.dp.steps[i].stream, 0);
        assert_int_equal(f.dp.steps[i].n_flush, 0);
        comm += f.dp.steps[i].call == SS_RT_CALL_ALLREDUCE;
    }
    assert_int_equal(comm, 6);
    done(&f);
}

/* The mixed GPT plan moves the token ids (i32) between the ranks: each such
 * step is a send or receive of ncclInt32 elements, the forward value of its
 * region, matched by the peer's; every other call moves f32. */
static void test_token_ids(void **state)
{
    (void)state;
    model2 = "gpt:layers=2,hidden=64,heads=4,seq=16,vocab=128,vocab_pad=0,dropout=0,"
             "precision=fp32";
    fx f[2];
    int64_t sent[2] = {0, 0}, recvd[2] = {0, 0};
    for (int r = 0; r < 2; r++) {
        make(&f[r], NULL, "mixed", r);
        for (int i = 0; i < f[r].dp.n_steps; i++) {
            const ss_rt_step *x = &f[r].dp.steps[i];
            const ss_build_desc *e = &f[r].s->ds.t[x->task];
            if (x->dtype != SS_I32) {
                assert_int_equal(x->dtype, SS_F32);
                continue;
            }
            assert_int_equal(kind(&f[r], i), SS_TASK_XFER);
            assert_int_equal(ss_graph_tensor(f[r].g, e->tensor)->dtype, SS_I32);
            assert_int_equal(e->grad, 0);
            assert_true(x->call == SS_RT_CALL_SEND || x->call == SS_RT_CALL_RECV);
            assert_int_equal(x->count, ss_region_volume(&e->reg));
            assert_int_equal(x->peer, 1 - r);
            assert_int_equal(x->lays_back, x->call == SS_RT_CALL_RECV);
            *(x->call == SS_RT_CALL_SEND ? &sent[r] : &recvd[r]) += x->count;
        }
    }
    printf("token ids: rank 0 sends %lld, receives %lld elements (i32)\n", (long long)sent[0],
           (long long)recvd[0]);
    assert_true(sent[0] > 0 && recvd[0] > 0);
    assert_int_equal(sent[0], recvd[1]);
    assert_int_equal(sent[1], recvd[0]);
    done(&f[0]);
    done(&f[1]);
    model2 = NULL;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_data_parallel),
        cmocka_unit_test(test_pipeline),
        cmocka_unit_test(test_distributed_optimizer),
        cmocka_unit_test(test_alltoall),
        cmocka_unit_test(test_sequence_parallel),
        cmocka_unit_test(test_scatter_gather),
        cmocka_unit_test(test_comm_on_compute_stream),
        cmocka_unit_test(test_token_ids),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
