/*
 * test_zero3.c — ZeRO-3 / FSDP parameter sharding (settings.distopt = 3,
 * docs/simulator.md "ZeRO-3"): the golden task graph and memory of a small
 * model under dp = 4, per-micro-batch gathers and reduce-scatters, the
 * symmetry evaluator against the full simulation, the hierarchical
 * evaluator's and the runtime description's refusals.
 *
 * Fixture chain2 (two bias-free 1000 x 1000 linears, fp32, SGD: 4 B weight
 * + 4 B gradient + 0 B state per parameter) on ring4 (four "unit-gpu"s, a
 * ring of 10 GB/s links).
 */
#include "testutil.h"
#include "simulator/build.h"
#include "simulator/engine.h"
#include "simulator/memory.h"
#include "simulator/taskgraph.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NEAR(a, b) assert_true(fabs((double)(a) - (double)(b)) < 1e-6 * (1 + fabs((double)(b))))

typedef struct fix {
    ss_graph *g;
    ss_machine *m;
    ss_costmodel *cm;
} fix;

static void setup_g(fix *f, ss_graph *g, const char *topo)
{
    ss_diag d;
    ss_diag_init(&d);
    memset(f, 0, sizeof *f);
    f->g = g;
    assert_int_equal(ss_machine_load(ss_test_path(topo), &f->m, &d), SS_OK);
    f->cm = ss_cost_new(f->m);
    assert_non_null(f->cm);
}

static void setup_file(fix *f, const char *model, const char *topo)
{
    ss_diag d;
    ss_diag_init(&d);
    ss_graph *g = NULL;
    assert_int_equal(ss_model_load(ss_test_path(model), &g, &d), SS_OK);
    setup_g(f, g, topo);
}

static void teardown(fix *f)
{
    ss_cost_free(f->cm);
    ss_machine_free(f->m);
    ss_graph_free(f->g);
}

/* What a plan's task graph holds: collectives by tag, their bytes, updates. */
typedef struct census {
    int param, grad, updates, other_coll;
    double param_bytes, grad_bytes, param_dur, grad_dur;
    int param_before_compute; /* gathers whose successors are all fwd/bwd tasks */
} census;

static void take_census(fix *f, const ss_plan *p, census *c, ss_memory *mm_out)
{
    ss_diag d;
    ss_diag_init(&d);
    ss_builder *b = ss_build_new(f->g, f->m, f->cm);
    ss_taskgraph *tg = ss_taskgraph_new(0, 0);
    ss_memory *mm = mm_out ? mm_out : ss_memory_new();
    assert_non_null(b);
    assert_non_null(tg);
    if (ss_build_run(b, p, tg, mm, &d) != SS_OK)
        fail_msg("%s", d.msg);
    memset(c, 0, sizeof *c);
    for (int t = 0; t < tg->n_tasks; t++) {
        if (tg->kind[t] == SS_TASK_UPDATE)
            c->updates++;
        if (tg->kind[t] != SS_TASK_COLLECTIVE)
            continue;
        if (tg->aux[t] == SS_BUILD_COLL_PARAM) {
            c->param++;
            c->param_bytes += tg->bytes[t];
            c->param_dur += tg->dur[t];
            int ok = tg->succ_off[t + 1] > tg->succ_off[t];
            for (int k = tg->succ_off[t]; k < tg->succ_off[t + 1]; k++)
                ok &= tg->kind[tg->succ[k]] == SS_TASK_FWD || tg->kind[tg->succ[k]] == SS_TASK_BWD;
            c->param_before_compute += ok;
        } else if (tg->aux[t] == SS_BUILD_COLL_GRAD) {
            c->grad++;
            c->grad_bytes += tg->bytes[t];
            c->grad_dur += tg->dur[t];
        } else
            c->other_coll++;
    }
    ss_taskgraph_free(tg);
    ss_build_free(b);
    if (!mm_out)
        ss_memory_free(mm);
}

static ss_plan *dp_plan(fix *f, int zero)
{
    ss_diag d;
    ss_diag_init(&d);
    ss_plan *p = NULL;
    assert_int_equal(ss_plan_data_parallel(f->g, f->m, 4, &p, &d), SS_OK);
    ss_plan_settings_of(p)->distopt = zero;
    assert_int_equal(ss_plan_validate(p, f->g, f->m, &d), SS_OK);
    return p;
}

/*
 * Golden: chain2 data parallel over the 4 GPUs of ring4. Each linear's
 * weight is one shard of 1e6 parameters held by all 4 devices.
 *   distopt 1 (ZeRO-1): per weight a reduce-scatter of its 4e6 B gradient
 *     and an all-gather of its 4e6 B updated weights (4 grad collectives);
 *     static memory 8 B x 2e6 (SGD keeps no state to split) = 16e6 B.
 *   distopt 3 (ZeRO-3): per weight a reduce-scatter (2 grad collectives),
 *     no all-gather after the update; 2 weights x (forward + backward) = 4
 *     weight all-gathers of 4e6 B, each before compute tasks; 8 updates of
 *     a 1/4 slice; static memory 8 B x 2e6 / 4 = 4e6 B per device. A ring
 *     all-gather moves what a ring reduce-scatter moves: the same time.
 *   Peak: the gathered copies are receive buffers (4e6 B each) live from
 *     their gather's start to the end of their forward or backward; the
 *     peak of ZeRO-3 minus its static memory exceeds ZeRO-1's dynamic peak
 *     by the copies in flight at that moment: at least one (4e6 B) and at
 *     most the two a one-ahead prefetch allows per pass, forward and
 *     backward gathers overlapping (4 x 4e6 B).
 */
static void test_golden_dp4(void **state)
{
    (void)state;
    fix f;
    ss_diag d;
    ss_diag_init(&d);
    setup_file(&f, "tests/data/sim/chain2.json", "tests/data/sim/ring4.json");
    ss_plan *p1 = dp_plan(&f, 1), *p3 = dp_plan(&f, SS_ZERO3);
    census c1, c3;
    take_census(&f, p1, &c1, NULL);
    ss_memory *mm = ss_memory_new();
    take_census(&f, p3, &c3, mm);
    assert_int_equal(c1.param, 0);
    assert_int_equal(c1.grad, 4);
    NEAR(c1.grad_bytes, 4 * 4e6);
    assert_int_equal(c3.param, 4);
    NEAR(c3.param_bytes, 4 * 4e6);
    assert_int_equal(c3.param_before_compute, 4);
    assert_int_equal(c3.grad, 2);
    NEAR(c3.grad_bytes, 2 * 4e6);
    NEAR(c3.param_dur / 4, c3.grad_dur / 2);
    assert_int_equal(c3.updates, 8);
    assert_int_equal(c3.other_coll, 0);
    int bufs = 0;
    for (int i = 0; i < ss_memory_n_intervals(mm); i++) {
        const ss_mem_interval *iv = ss_memory_interval(mm, i);
        bufs += iv->kind == SS_MEM_BUFFER && iv->bytes == 4e6;
    }
    assert_int_equal(bufs, 4 * 4); /* 4 gathers x 4 devices */
    ss_memory_free(mm);

    ss_sim *sim = NULL;
    assert_int_equal(ss_sim_new(f.g, f.m, f.cm, NULL, &sim, &d), SS_OK);
    ss_sim_result r1 = {0}, r3 = {0};
    assert_int_equal(ss_sim_run(sim, p1, &r1, &d), SS_OK);
    assert_int_equal(ss_sim_run(sim, p3, &r3, &d), SS_OK);
    for (int i = 0; i < 4; i++) {
        NEAR(r1.static_memory_bytes[i], 16e6);
        NEAR(r3.static_memory_bytes[i], 4e6);
        double extra = (r3.peak_memory_bytes[i] - r3.static_memory_bytes[i]) -
                       (r1.peak_memory_bytes[i] - r1.static_memory_bytes[i]);
        if (!(extra >= 4e6 - 1 && extra <= 4 * 4e6 + 1))
            fail_msg("device %d: gathered weights at the peak %.0f B", i, extra);
    }
    ss_sim_result_clear(&r1);
    ss_sim_result_clear(&r3);
    ss_sim_free(sim);
    ss_plan_free(p1);
    ss_plan_free(p3);
    teardown(&f);
}

static ss_graph *small_gpt(void)
{
    ss_diag d;
    ss_diag_init(&d);
    ss_graph *g = NULL;
    assert_int_equal(ss_model_build("gpt:layers=2,hidden=256,heads=4,seq=64,vocab=1024", 32, 8,
                                    &g, &d),
                     SS_OK);
    return g;
}

static ss_plan *spec_plan(fix *f, const char *spec)
{
    ss_diag d;
    ss_diag_init(&d);
    ss_plan *p = NULL;
    if (ss_plan_from_spec(spec, f->g, f->m, &p, &d) != SS_OK)
        fail_msg("%s: %s", spec, d.msg);
    return p;
}

/*
 * Micro-batches: every micro-batch gathers every unit again, forward and
 * backward (FSDP and DeepSpeed ZeRO-3 under gradient accumulation), and
 * reduce-scatters its own gradient: with mb = 4 instead of 1 (the same
 * global batch, the same buckets) the weight gathers and gradient
 * collectives are 4 times as many, the gathered bytes 4 times as large,
 * and the static memory the same. Against ZeRO-1, data parallel over the
 * 8 GPUs of a DGX-A100 (mixed precision, Adam: 2 + 2 + 12 B per
 * parameter): ZeRO-1 holds (4 + 12/8) B per parameter, ZeRO-3 16/8 B.
 */
static void test_microbatches(void **state)
{
    (void)state;
    fix f;
    setup_g(&f, small_gpt(), "topologies/dgx-a100.json");
    ss_plan *a = spec_plan(&f, "megatron:tp=2,pp=1,dp=4,mb=1,zero=3");
    ss_plan *b = spec_plan(&f, "megatron:tp=2,pp=1,dp=4,mb=4,zero=3");
    census ca, cb;
    take_census(&f, a, &ca, NULL);
    take_census(&f, b, &cb, NULL);
    assert_true(ca.param > 0);
    assert_int_equal(cb.param, 4 * ca.param);
    NEAR(cb.param_bytes, 4 * ca.param_bytes);
    assert_int_equal(cb.grad, 4 * ca.grad);
    assert_int_equal(ca.param_before_compute, ca.param);
    assert_int_equal(cb.param_before_compute, cb.param);
    /* memory, data parallel over 8: every shard has 8 holders */
    ss_plan_free(b);
    b = spec_plan(&f, "megatron:tp=1,pp=1,dp=8,mb=4,zero=3");
    ss_plan *z1 = spec_plan(&f, "megatron:tp=1,pp=1,dp=8,mb=4,distopt=1");
    ss_diag d;
    ss_diag_init(&d);
    ss_sim *sim = NULL;
    ss_sim_config cfg = {0};
    cfg.evaluator = SS_EVAL_FULL;
    assert_int_equal(ss_sim_new(f.g, f.m, f.cm, &cfg, &sim, &d), SS_OK);
    ss_sim_result r1 = {0}, r3 = {0};
    assert_int_equal(ss_sim_run(sim, z1, &r1, &d), SS_OK);
    assert_int_equal(ss_sim_run(sim, b, &r3, &d), SS_OK);
    for (int i = 0; i < 8; i++) {
        double P = (double)ss_graph_parameters(f.g);
        NEAR(r1.static_memory_bytes[i], (4 + 12.0 / 8) * P);
        NEAR(r3.static_memory_bytes[i], 16.0 / 8 * P);
    }
    ss_sim_result_clear(&r1);
    ss_sim_result_clear(&r3);
    ss_sim_free(sim);
    ss_plan_free(a);
    ss_plan_free(b);
    ss_plan_free(z1);
    teardown(&f);
}

/* The symmetry evaluator judges ZeRO-3 plans exactly (its time, per-device
 * peak and static memory equal the full simulation's, bit for bit); the
 * hierarchical evaluator refuses them, saying why. */
static void test_evaluators(void **state)
{
    (void)state;
    static const char *const specs[] = {
        "megatron:tp=1,pp=1,dp=8,mb=2,zero=3",
        "megatron:tp=2,pp=1,dp=4,mb=4,sp=1,recompute=full,zero=3",
        "megatron:tp=2,pp=1,dp=4,mb=2,recompute=selective,bucket=1,zero=3",
        "megatron:tp=2,pp=2,dp=2,mb=4,zero=3",
        "megatron:tp=1,pp=2,dp=4,mb=4,vp=1,bucket=1,zero=3",
    };
    fix f;
    setup_g(&f, small_gpt(), "topologies/dgx-a100.json");
    ss_diag d;
    ss_diag_init(&d);
    ss_sim_config cf = {0}, cs = {0};
    cf.evaluator = SS_EVAL_FULL;
    cs.evaluator = SS_EVAL_SYMMETRY;
    ss_sim *full = NULL, *sym = NULL;
    assert_int_equal(ss_sim_new(f.g, f.m, f.cm, &cf, &full, &d), SS_OK);
    assert_int_equal(ss_sim_new(f.g, f.m, f.cm, &cs, &sym, &d), SS_OK);
    for (size_t k = 0; k < sizeof specs / sizeof specs[0]; k++) {
        ss_plan *p = spec_plan(&f, specs[k]);
        ss_sim_result a = {0}, b = {0};
        if (ss_sim_run(full, p, &a, &d) != SS_OK)
            fail_msg("%s full: %s", specs[k], d.msg);
        if (ss_sim_run(sym, p, &b, &d) != SS_OK)
            fail_msg("%s symmetry: %s", specs[k], d.msg);
        if (a.iteration_us != b.iteration_us)
            fail_msg("%s: full %.6f us, symmetry %.6f us", specs[k], a.iteration_us,
                     b.iteration_us);
        for (int i = 0; i < a.n_devices; i++)
            if (a.peak_memory_bytes[i] != b.peak_memory_bytes[i] ||
                a.static_memory_bytes[i] != b.static_memory_bytes[i])
                fail_msg("%s: device %d memory full %.0f/%.0f, symmetry %.0f/%.0f", specs[k], i,
                         a.peak_memory_bytes[i], a.static_memory_bytes[i],
                         b.peak_memory_bytes[i], b.static_memory_bytes[i]);
        char why[256] = "";
        assert_int_equal(ss_sim_accepts(full, SS_EVAL_HIER, p, why, sizeof why, &d), 0);
        if (!strstr(why, "ZeRO-3"))
            fail_msg("%s: hierarchical refusal without the reason: \"%s\"", specs[k], why);
        ss_sim_result_clear(&a);
        ss_sim_result_clear(&b);
        ss_plan_free(p);
    }
    ss_sim_free(full);
    ss_sim_free(sym);
    teardown(&f);
}

/* The runtime's task description of a ZeRO-3 plan: each parameter
 * all-gather names its unit's weight shards (weights of its op) and the
 * shards' devices; the per-micro-batch reduce-scatters of a bucket are
 * whole (part 0 of 1), not parts of a split bucket. */
static void test_runtime_describes(void **state)
{
    (void)state;
    fix f;
    setup_file(&f, "tests/data/sim/chain2.json", "tests/data/sim/ring4.json");
    ss_plan *p = dp_plan(&f, SS_ZERO3);
    ss_diag d;
    ss_diag_init(&d);
    ss_builder *b = ss_build_new(f.g, f.m, f.cm);
    ss_taskgraph *tg = ss_taskgraph_new(0, 0);
    ss_memory *mm = ss_memory_new();
    ss_engine *e = ss_engine_new();
    assert_int_equal(ss_build_run(b, p, tg, mm, &d), SS_OK);
    ss_engine_config ec = {.policy = ss_build_policy(b)};
    assert_int_equal(ss_engine_run(e, tg, &ec, &d), SS_OK);
    ss_build_descs x;
    assert_int_equal(ss_build_describe(b, tg, &x, &d), SS_OK);
    int gathers = 0, scatters = 0;
    for (int t = 0; t < tg->n_tasks; t++) {
        const ss_build_desc *c = &x.t[t];
        if (tg->kind[t] != SS_TASK_COLLECTIVE)
            continue;
        if (c->coll == SS_BUILD_COLL_PARAM) {
            const ss_op *op = ss_graph_op(f.g, tg->op[t]);
            gathers++;
            assert_int_equal(c->n_dev, 4);
            assert_true(c->n_item >= 1 && c->n_item <= op->n_w);
            for (int i = 0; i < c->n_item; i++) {
                int w = x.items[c->item_off + i].tensor, mine = 0;
                for (int k = 0; k < op->n_w; k++)
                    mine |= op->weights[k] == w;
                assert_true(mine);
                assert_true(ss_region_volume(&x.items[c->item_off + i].reg) > 0);
            }
        } else if (c->coll == SS_BUILD_COLL_GRAD) {
            scatters++;
            assert_int_equal(c->n_parts, 1);
            assert_int_equal(c->part, 0);
        }
    }
    assert_true(gathers > 0 && scatters > 0);
    ss_build_descs_clear(&x);
    ss_engine_free(e);
    ss_memory_free(mm);
    ss_taskgraph_free(tg);
    ss_build_free(b);
    ss_plan_free(p);
    teardown(&f);
}

/* Validation: a ZeRO stage other than 0, 1, 3, ZeRO-3 with per-layer
 * synced flags and ZeRO-3 with bulk sync are refused with the reason; zero=3 without data
 * parallelism is refused by the Megatron generator. */
static void test_validation(void **state)
{
    (void)state;
    fix f;
    setup_file(&f, "tests/data/sim/chain2.json", "tests/data/sim/ring4.json");
    ss_plan *p = dp_plan(&f, SS_ZERO3);
    ss_diag d;
    ss_diag_init(&d);
    ss_plan_settings_of(p)->distopt = 2;
    assert_int_equal(ss_plan_validate(p, f.g, f.m, &d), SS_ERR_INVALID);
    assert_non_null(strstr(d.msg, "distopt"));
    ss_plan_settings_of(p)->distopt = SS_ZERO3;
    ss_plan_settings_of(p)->synced_flags = 1;
    ss_diag_init(&d);
    assert_int_equal(ss_plan_validate(p, f.g, f.m, &d), SS_ERR_INVALID);
    assert_non_null(strstr(d.msg, "synced_flags"));
    ss_plan_settings_of(p)->synced_flags = 0;
    ss_plan_settings_of(p)->sync = SS_SYNC_BULK;
    ss_diag_init(&d);
    assert_int_equal(ss_plan_validate(p, f.g, f.m, &d), SS_ERR_INVALID);
    assert_non_null(strstr(d.msg, "sync \"bulk\""));
    ss_plan_free(p);
    teardown(&f);
    setup_g(&f, small_gpt(), "topologies/dgx-a100.json");
    ss_plan *q = NULL;
    ss_diag_init(&d);
    assert_int_equal(ss_plan_from_spec("megatron:tp=8,pp=1,dp=1,zero=3", f.g, f.m, &q, &d),
                     SS_ERR_INVALID);
    assert_non_null(strstr(d.msg, "dp > 1"));
    assert_null(q);
    teardown(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_golden_dp4),
        cmocka_unit_test(test_microbatches),
        cmocka_unit_test(test_evaluators),
        cmocka_unit_test(test_runtime_describes),
        cmocka_unit_test(test_validation),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
