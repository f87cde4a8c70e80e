/*
 * test_describe.c — ss_build_describe (simulator/build.h), what the runtime
 * executes of a built task graph: on plans of an MLP and a GPT (data-,
 * tensor- with and without sequence parallelism, pipeline 1F1B and GPipe,
 * interleaved, distributed optimizer, buckets split into parts), every task
 * is described consistently with the graph: kernels and updates name their
 * device, a transfer's region holds exactly the bytes the task moves, a
 * collective's regions (laid end to end, a split bucket's part of them) hold
 * exactly its bytes over a group of at least two devices (a scatter-gather
 * send's all-gather: its receivers or senders), an update's
 * region lies in a weight and no device updates an element twice (also
 * under a mixed GPT plan whose tied table two ops read through overlapping
 * regions); a lean build, which frees what it reads, is refused.
 */
#include "testutil.h"
#include "simulator/build.h"
#include "mixed_gpt.h"

#include <stdlib.h>
#include <string.h>

static ss_machine *machine(const char *path)
{
    ss_machine *m = NULL;
    ss_diag d;
    ss_diag_init(&d);
    assert_int_equal(ss_machine_load(ss_test_path(path), &m, &d), SS_OK);
    return m;
}

static double bytes_of(const ss_graph *g, const ss_build_item *it)
{
    return (double)ss_region_volume(&it->reg) *
           (double)ss_dtype_size(ss_graph_tensor(g, it->tensor)->dtype);
}

/* Build plan `spec` of model `model` (batch) on topology `topo`, optionally
 * with gradient buckets of `bucket` bytes (0: the plan's), and check every
 * task's description. Returns the number of transfers and collectives. */
static int check_plan(const char *model, int batch, const char *topo, const char *spec,
                      double bucket)
{
    ss_diag d;
    ss_diag_init(&d);
    ss_machine *m = machine(topo);
    ss_graph *g = NULL;
    assert_int_equal(ss_model_build(model, batch, ss_machine_n_devices(m), &g, &d), SS_OK);
    ss_plan *p = NULL;
    if (!strcmp(spec, "mixed"))
        p = mixed_gpt_plan(g, m);
    else if (ss_plan_from_spec(spec, g, m, &p, &d) != SS_OK)
        fail_msg("plan %s: %s", spec, d.msg);
    if (bucket > 0)
        ss_plan_settings_of(p)->bucket_bytes = bucket;
    ss_costmodel *cm = ss_cost_new(m);
    ss_builder *b = ss_build_new(g, m, cm);
    ss_taskgraph *tg = ss_taskgraph_new(0, 0);
    ss_memory *mm = ss_memory_new();
    assert_int_equal(ss_build_run(b, p, tg, mm, &d), SS_OK);
    ss_build_descs x;
    assert_int_equal(ss_build_describe(b, tg, &x, &d), SS_OK);
    assert_int_equal(x.n_tasks, tg->n_tasks);
    int moved = 0, nd = ss_machine_n_devices(m);
    for (int t = 0; t < tg->n_tasks; t++) {
        const ss_build_desc *e = &x.t[t];
        switch ((ss_task_kind)tg->kind[t]) {
        case SS_TASK_FWD:
        case SS_TASK_BWD:
            assert_true(e->dev >= 0 && e->dev < nd);
            break;
        case SS_TASK_UPDATE:
            assert_true(e->dev >= 0 && e->dev < nd);
            assert_true(ss_graph_tensor(g, e->tensor)->is_weight);
            assert_true(ss_region_volume(&e->reg) > 0);
            assert_true(e->split_k >= 0 && e->split_k < e->split_n);
            break;
        case SS_TASK_XFER:
            moved++;
            assert_true(e->src >= 0 && e->dst >= 0 && e->src != e->dst);
            if (e->parts == 1) {
                ss_build_item it = {e->tensor, e->reg};
                assert_true(bytes_of(g, &it) == tg->bytes[t]);
            }
            break;
        case SS_TASK_COLLECTIVE: {
            moved++;
            if (e->n_dev < 2)
                fail_msg("%s: collective %d (tag %d, op %d tile %d) over %d device(s)", spec, t,
                         e->coll, tg->op[t], tg->tile[t], e->n_dev);
            assert_true(e->n_item >= 1);
            double sum = 0;
            for (int i = 0; i < e->n_item; i++) {
                const ss_build_item *it = &x.items[e->item_off + i];
                sum += bytes_of(g, it);
                if (e->coll == SS_BUILD_COLL_GRAD)
                    assert_true(ss_graph_tensor(g, it->tensor)->is_weight);
            }
            assert_true(e->part >= 0 && e->part < e->n_parts);
            double want = tg->bytes[t] * e->n_parts;
            if (!(sum <= want * (1 + 1e-12) && sum >= want * (1 - 1e-12)))
                fail_msg("%s: collective %d (tag %d) names %.0f bytes, moves %.0f", spec, t,
                         e->coll, sum, want);
            break;
        }
        default:
            break;
        }
    }
    /* a device updates each element of a weight once */
    for (int t = 0; t < tg->n_tasks; t++)
        for (int u = t + 1; u < tg->n_tasks && tg->kind[t] == SS_TASK_UPDATE; u++) {
            ss_region ov;
            if (tg->kind[u] == SS_TASK_UPDATE && x.t[u].tensor == x.t[t].tensor &&
                x.t[u].dev == x.t[t].dev &&
                ss_region_intersect(&x.t[t].reg, &x.t[u].reg, &ov) > 0)
                fail_msg("%s: device %d updates part of %s twice", spec, x.t[t].dev,
                         ss_graph_tensor(g, x.t[t].tensor)->name);
        }
    ss_build_descs_clear(&x);
    ss_build_set_lean(b, 1);
    assert_int_equal(ss_build_run(b, p, tg, mm, &d), SS_OK);
    assert_int_equal(ss_build_describe(b, tg, &x, &d), SS_ERR_INVALID);
    ss_memory_free(mm);
    ss_taskgraph_free(tg);
    ss_build_free(b);
    ss_cost_free(cm);
    ss_plan_free(p);
    ss_graph_free(g);
    ss_machine_free(m);
    return moved;
}

static const char *mlp = "mlp:layers=2,hidden=64,in=32";
static const char *gpt = "gpt:layers=4,hidden=64,heads=4,seq=16,vocab=128,vocab_pad=0";

static void test_mlp_plans(void **state)
{
    (void)state;
    const char *topo = "topologies/local-cpu.json";
    assert_true(check_plan(mlp, 16, topo, "data-parallel", 0) > 0);
    assert_true(check_plan(mlp, 16, topo, "megatron:tp=2", 0) > 0);
    assert_true(check_plan(mlp, 16, topo, "megatron:pp=2,mb=4", 0) > 0);
    /* fc weights of 8 KiB and more in buckets of 1 KiB: split into parts */
    assert_true(check_plan(mlp, 16, topo, "data-parallel", 1024) > 6);
    assert_true(check_plan(mlp, 16, topo, "megatron:dp=2,distopt=1", 0) > 0);
}

static void test_gpt_plans(void **state)
{
    (void)state;
    const char *topo = "topologies/h100x8.json";
    assert_true(check_plan(gpt, 16, topo, "megatron:tp=2,pp=2,dp=2,mb=4", 0) > 0);
    assert_true(check_plan(gpt, 16, topo, "megatron:tp=4,pp=2,sp=1,mb=2", 0) > 0);
    assert_true(check_plan(gpt, 16, topo, "megatron:tp=2,pp=2,dp=2,vp=2,mb=4,distopt=1", 0) > 0);
}

/* The mixed GPT plan's tied table: the embedding reads [V, H/2] halves, the
 * head [V/2, H] halves, so each device holds 3/4 of it; the cells read by
 * both devices are summed (the check above: no element updated twice). */
static void test_overlapping_regions(void **state)
{
    (void)state;
    assert_true(check_plan("gpt:layers=2,hidden=64,heads=4,seq=16,vocab=128,vocab_pad=0,"
                           "dropout=0,precision=fp32",
                           4, "topologies/local-cpu.json", "mixed", 0) > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mlp_plans),
        cmocka_unit_test(test_gpt_plans),
        cmocka_unit_test(test_overlapping_regions),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
