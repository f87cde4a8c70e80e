/*
 * test_symmetry.c — the symmetric evaluator (simulator/symmetry.c) against
 * the full simulation: on random symmetric plans (Megatron settings and
 * data parallelism; GPT, BERT and the MLP; 8-128 devices on DGX A100 nodes)
 * every result is bit-identical; the hierarchical evaluator is compared on
 * the same plans; asymmetric plans (a perturbed device
 * list, data parallelism over part of the machine, a mixed-device internet
 * topology) are detected and simulated in full.
 */
#include "testutil.h"
#include "simulator/hier.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* xorshift: reproducible plans */
static uint64_t rng = 0x9e3779b97f4a7c15ull;
static unsigned rnd(unsigned n)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (unsigned)(rng % n);
}

#define SAME(a, b) assert_memory_equal(&(a), &(b), sizeof(a))

static void same_result(const ss_sim_result *f, const ss_sim_result *s)
{
    SAME(f->iteration_us, s->iteration_us);
    SAME(f->throughput, s->throughput);
    SAME(f->critical_path_us, s->critical_path_us);
    assert_int_equal(f->n_tasks, s->n_tasks);
    assert_int_equal(f->batch, s->batch);
    assert_int_equal(f->n_devices, s->n_devices);
    size_t n = (size_t)f->n_devices * sizeof(double);
    assert_memory_equal(f->compute_us, s->compute_us, n);
    assert_memory_equal(f->comm_us, s->comm_us, n);
    assert_memory_equal(f->exposed_comm_us, s->exposed_comm_us, n);
    assert_memory_equal(f->idle_us, s->idle_us, n);
    assert_memory_equal(f->peak_memory_bytes, s->peak_memory_bytes, n);
    assert_memory_equal(f->static_memory_bytes, s->static_memory_bytes, n);
    assert_memory_equal(f->weight_bytes, s->weight_bytes, n);
    assert_memory_equal(f->capacity_bytes, s->capacity_bytes, n);
    assert_int_equal(f->fits, s->fits);
    assert_int_equal(f->overflow_device, s->overflow_device);
    SAME(f->overflow_bytes, s->overflow_bytes);
    assert_int_equal(f->n_crit, s->n_crit);
    for (int i = 0; i < f->n_crit; i++) {
        assert_string_equal(f->crit[i].name, s->crit[i].name);
        assert_string_equal(f->crit[i].kind, s->crit[i].kind);
        assert_int_equal(f->crit[i].n_tasks, s->crit[i].n_tasks);
        SAME(f->crit[i].us, s->crit[i].us);
    }
}

/* The hierarchical evaluator against the full one over the random plans:
 * plans it judged, and the largest relative iteration-time difference, per
 * class: GPipe, 1F1B (interleaved with bulk sync included), interleaved
 * 1F1B with overlapped sync. */
static int hier_n[3];
static double hier_max[3];
static double hier_last; /* the last plan's difference (-1: not judged) */
/* plans whose hierarchical sub-problems were reduced to one data-parallel
 * block (some / all of them), of hier_n */
static int hier_reduced, hier_all_reduced;

/* The hierarchical evaluator with its sub-problems reduced by symmetry
 * (the default) against the same without: bit for bit, and the reduced
 * ones simulate fewer tasks. Returns 1 when the evaluator applies. */
static int hier_same(const ss_graph *g, const ss_machine *m, ss_costmodel *cm, const ss_plan *p)
{
    ss_hier *hs = ss_hier_new(g, m, cm, NULL), *hw = ss_hier_new(g, m, cm, NULL);
    assert_non_null(hs);
    assert_non_null(hw);
    ss_hier_set_symmetry(hw, 0);
    ss_sim_result rs = {0}, rw = {0};
    ss_diag d;
    ss_diag_init(&d);
    ss_status st = ss_hier_eval(hw, p, &rw, &d);
    ss_diag_init(&d);
    assert_int_equal(ss_hier_eval(hs, p, &rs, &d), st);
    if (st == SS_OK) {
        const ss_hier_stats *a = ss_hier_stats_of(hs), *b = ss_hier_stats_of(hw);
        assert_int_equal(b->sub_reduced, 0);
        assert_int_equal(a->sub_sims, b->sub_sims);
        assert_true(a->sub_reduced <= a->sub_sims);
        if (a->sub_reduced) {
            assert_true(a->tasks < b->tasks);
            hier_reduced++;
            hier_all_reduced += a->sub_reduced == a->sub_sims;
        } else {
            assert_int_equal(a->tasks, b->tasks);
        }
        rs.n_tasks = rw.n_tasks; /* the tasks simulated: the one difference */
        same_result(&rw, &rs);
    }
    ss_sim_result_clear(&rs);
    ss_sim_result_clear(&rw);
    ss_hier_free(hs);
    ss_hier_free(hw);
    return st == SS_OK;
}

/* Simulate p in full and with SYMMETRY; where the plan is symmetric the
 * same result bit for bit, else SYMMETRY refuses it (SS_ERR_INVALID, saying
 * why) and AUTO gives the full result. Returns 1 when p is symmetric. */
static int check(const ss_graph *g, const ss_machine *m, const ss_plan *p)
{
    ss_diag d;
    ss_diag_init(&d);
    ss_costmodel *cm = ss_cost_new(m);
    assert_non_null(cm);
    ss_sim_config full = {0}, aut = {0};
    full.evaluator = SS_EVAL_FULL;
    aut.evaluator = SS_EVAL_SYMMETRY;
    ss_sim *sf = NULL, *sa = NULL;
    assert_int_equal(ss_sim_new(g, m, cm, &full, &sf, &d), SS_OK);
    assert_int_equal(ss_sim_new(g, m, cm, &aut, &sa, &d), SS_OK);
    ss_sim_result rf = {0}, ra = {0};
    assert_int_equal(ss_sim_run(sf, p, &rf, &d), SS_OK);
    ss_diag_init(&d);
    ss_status sst = ss_sim_run(sa, p, &ra, &d);
    if (sst == SS_ERR_INVALID) { /* not symmetric: AUTO runs it in full */
        assert_non_null(strstr(d.msg, "symmetric evaluator does not apply"));
        ss_sim_free(sa);
        aut.evaluator = SS_EVAL_AUTO;
        assert_int_equal(ss_sim_new(g, m, cm, &aut, &sa, &d), SS_OK);
        assert_int_equal(ss_sim_run(sa, p, &ra, &d), SS_OK);
    } else {
        assert_int_equal(sst, SS_OK);
    }
    same_result(&rf, &ra);
    assert_string_equal(rf.evaluator, "full");
    assert_int_equal(rf.tasks_simulated, rf.n_tasks);
    int sym = !strcmp(ra.evaluator, "symmetry");
    if (sym) {
        assert_true(ra.tasks_simulated < ra.n_tasks);
        assert_true(ra.symmetry_classes < ra.n_devices);
        assert_int_equal(ss_sim_n_tasks(sa), ra.tasks_simulated);
        /* the critical path by op is the full run's */
        int no = ss_graph_n_ops(g);
        double *a = calloc((size_t)no, sizeof *a), *b = calloc((size_t)no, sizeof *b), ta, tb;
        assert_int_equal(ss_sim_path_ops(sf, a, &ta, &d), SS_OK);
        assert_int_equal(ss_sim_path_ops(sa, b, &tb, &d), SS_OK);
        assert_memory_equal(a, b, (size_t)no * sizeof *a);
        SAME(ta, tb);
        free(a);
        free(b);
    } else {
        assert_string_equal(ra.evaluator, "full");
    }
    ss_sim_config hc = {0};
    hc.evaluator = SS_EVAL_HIER;
    ss_sim *sh = NULL;
    ss_sim_result rh = {0};
    assert_int_equal(ss_sim_new(g, m, cm, &hc, &sh, &d), SS_OK);
    ss_diag_init(&d);
    hier_last = -1;
    if (ss_sim_run(sh, p, &rh, &d) == SS_OK) {
        const ss_plan_settings *ps = ss_plan_settings_get(p);
        int k = ps->schedule != SS_PIPE_1F1B                                  ? 0
                : ps->virtual_stages > 1 && ps->sync != SS_SYNC_BULK ? 2
                                                                       : 1;
        double e = rh.iteration_us / rf.iteration_us - 1;
        e = e < 0 ? -e : e;
        hier_n[k]++;
        hier_last = e;
        if (e > hier_max[k])
            hier_max[k] = e;
    }
    ss_sim_result_clear(&rh);
    ss_sim_free(sh);
    assert_int_equal(hier_same(g, m, cm, p), hier_last >= 0);
    ss_sim_result_clear(&rf);
    ss_sim_result_clear(&ra);
    ss_sim_free(sf);
    ss_sim_free(sa);
    ss_cost_free(cm);
    return sym;
}

static ss_machine *dgx(int nodes)
{
    ss_diag d;
    ss_diag_init(&d);
    ss_machine *m = NULL;
    char path[4096];
    snprintf(path, sizeof path, "%s", ss_test_path("topologies/dgx-a100.json"));
    assert_int_equal(ss_machine_load_nodes(path, nodes, &m, &d), SS_OK);
    return m;
}

/* >= 500 random symmetric plans, each bit-identical to the full run. */
static void test_random_symmetric(void **state)
{
    (void)state;
    static const int node_counts[] = {1, 1, 2, 2, 4, 8, 16};
    ss_machine *ms[7] = {0};
    int symmetric = 0, tried = 0;
    ss_diag d;
    for (int it = 0; symmetric < 500 && it < 3000; it++) {
        int ni = (int)rnd(7), nodes = node_counts[ni];
        if (!ms[ni])
            ms[ni] = dgx(nodes);
        ss_machine *m = ms[ni];
        int n = 8 * nodes;
        int kind = (int)rnd(3); /* 0 gpt, 1 bert, 2 mlp */
        int dp_only = kind == 2 || rnd(4) == 0 || n > 32;
        int c_sp = 0;
        int tp = dp_only ? 1 : 1 << rnd(4), pp = dp_only ? 1 : 1 << rnd(3);
        if (tp * pp > n)
            continue;
        int dp = n / (tp * pp), mb = 1 << rnd(3);
        if (pp > 1 && mb < pp)
            mb = pp;
        int vp = pp > 1 && rnd(3) == 0 ? 2 : 1; /* interleaved 1F1B */
        int layers = pp > 2 || vp > 1 ? pp * vp : 1 + (int)rnd(2);
        int64_t batch = (int64_t)dp * mb * (1 + rnd(2));
        char spec[256];
        if (kind == 0)
            snprintf(spec, sizeof spec, "gpt:layers=%d,hidden=64,heads=8,seq=32,vocab=512",
                     layers);
        else if (kind == 1)
            snprintf(spec, sizeof spec, "bert:layers=%d,hidden=64,heads=8,seq=32,vocab=512",
                     layers);
        else
            snprintf(spec, sizeof spec, "mlp:layers=%d,hidden=128", 1 + (int)rnd(3));
        ss_graph *g = NULL;
        ss_diag_init(&d);
        if (ss_model_build(spec, batch, n, &g, &d) != SS_OK) {
            fail_msg("model %s: %s", spec, d.msg);
        }
        ss_plan *p = NULL;
        ss_diag_init(&d);
        if (kind == 2 || (dp_only && rnd(2))) {
            assert_int_equal(ss_plan_data_parallel(g, m, 0, &p, &d), SS_OK);
        } else {
            ss_megatron_config c = {0};
            c.tp = tp;
            c.pp = pp;
            c.dp = dp;
            c.mb = mb;
            c.vp = vp;
            c.recompute = (ss_recompute)rnd(3);
            c.sp = c_sp = tp > 1 ? (int)rnd(2) : 0;
            c.distopt = (int)rnd(2);
            c.sync = (ss_sync_mode)rnd(2);
            if (ss_plan_megatron(g, m, &c, &p, &d) != SS_OK) {
                ss_graph_free(g);
                continue; /* e.g. tp does not divide the heads */
            }
            ss_plan_settings *s = ss_plan_settings_of(p);
            if (rnd(3) == 0 || vp > 1)
                s->schedule = SS_PIPE_1F1B;
            if (rnd(3) == 0)
                s->bucket_bytes = 0;
            s->priority = (int)rnd(2);
        }
        tried++;
        symmetric += check(g, m, p);
        if (hier_last > 0.005) {
            const ss_plan_settings *ps = ss_plan_settings_get(p);
            print_message("hierarchical %.3f%% off: %s, %d nodes, tp %d pp %d dp %d vp %d, %d "
                          "micro-batches, batch %lld; sp %d schedule %d sync %d distopt %d "
                          "recompute %d bucket %lld priority %d (plan %d)\n",
                          100 * hier_last, spec, nodes, tp, pp, dp, vp, mb, (long long)batch, c_sp,
                          (int)ps->schedule, (int)ps->sync, ps->distopt, (int)ps->recompute,
                          (long long)ps->bucket_bytes, ps->priority, it);
        }
        ss_plan_free(p);
        ss_graph_free(g);
    }
    for (int i = 0; i < 7; i++)
        ss_machine_free(ms[i]);
    print_message("symmetry: %d of %d plans symmetric\n", symmetric, tried);
    print_message("hierarchical: GPipe %d plans, max %.3f%%; 1F1B %d plans, max %.3f%%; "
                  "interleaved with overlapped sync %d plans, max %.3f%%\n",
                  hier_n[0], 100 * hier_max[0], hier_n[1], 100 * hier_max[1], hier_n[2],
                  100 * hier_max[2]);
    print_message("hierarchical: sub-problems reduced by symmetry on %d plans (all of them "
                  "on %d), bit-identical\n",
                  hier_reduced, hier_all_reduced);
    /* The hierarchical evaluator agrees within 0.5% with the full
     * simulation on every plan it judges, interleaved plans with overlapped
     * sync included: there a rank's later chunk synchronises its gradients
     * while the rank's first chunk still runs passes, and the stage sends
     * queue behind its all-reduces (docs/simulator.md, "Hierarchical
     * evaluator"; those whose chunks' synchronisations overlap one another
     * are refused). */
    assert_true(hier_n[0] >= 200 && hier_n[1] >= 200 && hier_n[2] >= 10);
    assert_true(hier_max[0] <= 0.005);
    assert_true(hier_max[1] <= 0.005);
    assert_true(hier_max[2] <= 0.005);
    assert_true(symmetric >= 500);
    /* most plans have data-parallel blocks (dp > 1 on every one but a
     * few): their sub-problems are reduced */
    assert_true(hier_reduced * 2 >= hier_n[0] + hier_n[1]);
}

/* The hierarchical evaluator's sub-problems are reduced to one
 * data-parallel block: on DGX A100 nodes a block is a whole node's share
 * (sigma must map the machine onto itself), so D = 8 blocks for tp 8 x dp
 * 8 on 8 nodes, 4 for tp 8 x pp 2 x dp 4, 2 for tp 4 x pp 4 x dp 4 (two
 * data-parallel ranks of a stage per node). Every sub-problem is reduced,
 * the tasks simulated fall to about 1/D (the tasks spanning every block,
 * the gradient collectives, and the stage-level pipeline's aside), and the
 * result is the unreduced one's bit for bit. Fails when the reduction is
 * skipped. */
static void test_hier_reduced(void **state)
{
    (void)state;
    ss_diag d;
    ss_diag_init(&d);
    ss_machine *m = dgx(8);
    ss_graph *g = NULL;
    assert_int_equal(ss_model_build("gpt:layers=8,hidden=64,heads=8,seq=32,vocab=512", 64, 64, &g,
                                    &d), SS_OK);
    ss_costmodel *cm = ss_cost_new(m);
    static const struct {
        const char *spec;
        int D;
    } cases[] = {{"megatron:tp=8,pp=1,dp=8,mb=2,recompute=full", 8},
                 {"megatron:tp=8,pp=2,dp=4,mb=8", 4},
                 {"megatron:tp=4,pp=4,dp=4,mb=8,sync=bulk", 2}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        ss_plan *p = NULL;
        assert_int_equal(ss_plan_from_spec(cases[i].spec, g, m, &p, &d), SS_OK);
        ss_hier *hs = ss_hier_new(g, m, cm, NULL), *hw = ss_hier_new(g, m, cm, NULL);
        ss_hier_set_symmetry(hw, 0);
        ss_sim_result rs = {0}, rw = {0};
        assert_int_equal(ss_hier_eval(hs, p, &rs, &d), SS_OK);
        assert_int_equal(ss_hier_eval(hw, p, &rw, &d), SS_OK);
        const ss_hier_stats *a = ss_hier_stats_of(hs), *b = ss_hier_stats_of(hw);
        print_message("%s: %d sub-problems, %d reduced; tasks %lld, unreduced %lld\n",
                      cases[i].spec, a->sub_sims, a->sub_reduced, (long long)a->tasks,
                      (long long)b->tasks);
        assert_true(a->sub_sims >= 1);
        assert_int_equal(a->sub_reduced, a->sub_sims);
        assert_int_equal(b->sub_reduced, 0);
        assert_true(a->tasks * cases[i].D * 3 <= b->tasks * 4); /* about 1/D */
        assert_int_equal(rs.n_tasks, a->tasks);
        rs.n_tasks = rw.n_tasks;
        same_result(&rw, &rs);
        ss_sim_result_clear(&rs);
        ss_sim_result_clear(&rw);
        ss_hier_free(hs);
        ss_hier_free(hw);
        ss_plan_free(p);
    }
    ss_cost_free(cm);
    ss_graph_free(g);
    ss_machine_free(m);
}

/* Asymmetric plans fall back to the full simulation (same results). */
static void test_asymmetric(void **state)
{
    (void)state;
    ss_diag d;
    ss_diag_init(&d);
    ss_machine *m = dgx(2);
    ss_graph *g = NULL;
    assert_int_equal(
        ss_model_build("gpt:layers=2,hidden=64,heads=8,seq=32,vocab=512", 32, 16, &g, &d), SS_OK);
    ss_megatron_config c = {.tp = 2, .pp = 2, .dp = 4, .mb = 4};
    ss_plan *p = NULL;
    assert_int_equal(ss_plan_megatron(g, m, &c, &p, &d), SS_OK);
    assert_int_equal(check(g, m, p), 1);
    /* MCMC-like moves: one op's two tiles swap devices, or one tile moves */
    for (int k = 0; k < 40; k++) {
        ss_plan *q = ss_plan_clone(p);
        assert_non_null(q);
        int o = 1 + (int)rnd((unsigned)ss_graph_n_ops(g) - 1);
        ss_pconfig pc = *ss_plan_config(q, o);
        int *dv = malloc((size_t)pc.ntiles * sizeof *dv);
        memcpy(dv, pc.devices, (size_t)pc.ntiles * sizeof *dv);
        int a = (int)rnd((unsigned)pc.ntiles);
        dv[a] = (int)rnd(16);
        pc.devices = dv;
        assert_int_equal(ss_plan_set_config(q, o, &pc, &d), SS_OK);
        check(g, m, q); /* symmetric or not, the same answer */
        free(dv);
        ss_plan_free(q);
    }
    /* one tile moved to another device: detected */
    {
        ss_plan *q = ss_plan_clone(p);
        int o = ss_graph_n_ops(g) - 1;
        ss_pconfig pc = *ss_plan_config(q, o);
        int *dv = malloc((size_t)pc.ntiles * sizeof *dv);
        memcpy(dv, pc.devices, (size_t)pc.ntiles * sizeof *dv);
        dv[0] = dv[pc.ntiles - 1];
        pc.devices = dv;
        assert_int_equal(ss_plan_set_config(q, o, &pc, &d), SS_OK);
        assert_int_equal(check(g, m, q), 0);
        free(dv);
        ss_plan_free(q);
    }
    /* data parallelism over 12 of 16 devices: the blocks sit unevenly on the
     * nodes (8 + 4) */
    ss_plan *q = NULL;
    assert_int_equal(ss_plan_data_parallel(g, m, 12, &q, &d), SS_OK);
    assert_int_equal(check(g, m, q), 0);
    ss_plan_free(q);
    /* forced: SS_EVAL_SYMMETRY says why it does not apply */
    assert_int_equal(ss_plan_data_parallel(g, m, 12, &q, &d), SS_OK);
    ss_costmodel *cm = ss_cost_new(m);
    ss_sim_config cfg = {0};
    cfg.evaluator = SS_EVAL_SYMMETRY;
    ss_sim *s = NULL;
    ss_sim_result r = {0};
    assert_int_equal(ss_sim_new(g, m, cm, &cfg, &s, &d), SS_OK);
    ss_diag_init(&d);
    assert_int_equal(ss_sim_run(s, q, &r, &d), SS_ERR_INVALID);
    assert_non_null(strstr(d.msg, "symmetric evaluator does not apply"));
    ss_diag_init(&d);
    assert_int_equal(ss_sim_run(s, p, &r, &d), SS_OK);
    assert_string_equal(r.evaluator, "symmetry");
    ss_sim_result_clear(&r);
    ss_sim_free(s);
    ss_cost_free(cm);
    ss_plan_free(q);
    ss_plan_free(p);
    ss_graph_free(g);
    ss_machine_free(m);
    /* mixed device types and internet peers */
    char path[4096];
    snprintf(path, sizeof path, "%s", ss_test_path("topologies/volunteers40.json"));
    assert_int_equal(ss_machine_load(path, &m, &d), SS_OK);
    assert_int_equal(ss_model_build("mlp:layers=2,hidden=128", 80, 40, &g, &d), SS_OK);
    assert_int_equal(ss_plan_data_parallel(g, m, 0, &p, &d), SS_OK);
    assert_int_equal(check(g, m, p), 0);
    ss_plan_free(p);
    ss_graph_free(g);
    ss_machine_free(m);
}

/* AUTO: a plan of at least SS_EVAL_HIER_TILES tile entries goes to the
 * hierarchical evaluator, unless the config asks for an exact one (a
 * trace): then to symmetry. */
static void test_auto_exact(void **state)
{
    (void)state;
    ss_diag d;
    ss_diag_init(&d);
    ss_machine *m = dgx(1);
    ss_graph *g = NULL;
    assert_int_equal(ss_model_build("gpt:layers=1,hidden=64,heads=8,seq=8,vocab=128", 65536, 8,
                                    &g, &d), SS_OK);
    ss_plan *p = NULL;
    assert_int_equal(ss_plan_from_spec("megatron:tp=1,pp=2,dp=4,mbs=1", g, m, &p, &d), SS_OK);
    int64_t tiles = 0;
    for (int i = 0; i < ss_plan_n_ops(p); i++)
        tiles += ss_plan_config(p, i)->ntiles;
    assert_true(tiles >= SS_EVAL_HIER_TILES);
    ss_costmodel *cm = ss_cost_new(m);
    for (int exact = 0; exact < 2; exact++) {
        ss_sim_config cfg = {0};
        cfg.skip_memory = 1;
        cfg.exact = exact;
        ss_sim *s = NULL;
        ss_sim_result r = {0};
        assert_int_equal(ss_sim_new(g, m, cm, &cfg, &s, &d), SS_OK);
        assert_int_equal(ss_sim_run(s, p, &r, &d), SS_OK);
        assert_string_equal(r.evaluator, exact ? "symmetry" : "hierarchical");
        ss_sim_result_clear(&r);
        ss_sim_free(s);
    }
    ss_cost_free(cm);
    ss_plan_free(p);
    ss_graph_free(g);
    ss_machine_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random_symmetric),
        cmocka_unit_test(test_hier_reduced),
        cmocka_unit_test(test_asymmetric),
        cmocka_unit_test(test_auto_exact),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
