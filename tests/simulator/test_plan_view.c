/*
 * test_plan_view.c — the plan analysed once (simulator/plan_view.h) and
 * judging again after a change (ss_sim_rerun_within, ss_sim_commit): the
 * view's stages, groups and data-parallel facts against the configs; a
 * view brought up to date op by op equal to one made afresh; and a chain
 * of single-op moves and settings changes, committed or undone as a search
 * does, judged by rerun bit-identical to a fresh ss_sim_run_within of
 * every plan.
 *
 * Fixture (gpt_fixture.h): GPT 8 x 1024 on 2 DGX-A100 nodes (16 GPUs),
 * Megatron tp 2, pp 2, dp 4, 8 micro-batches.
 */
#include "testutil.h"
#include "gpt_fixture.h"
#include "simulator/plan_view.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Two views of one plan hold the same facts. */
static void assert_same_view(const ss_plan_view *a, const ss_plan_view *b)
{
    assert_int_equal(a->P, b->P);
    assert_int_equal(a->M, b->M);
    assert_int_equal(a->V, b->V);
    assert_int_equal(a->R, b->R);
    assert_true(a->tiles == b->tiles);
    assert_true(a->sample_gcd == b->sample_gcd);
    assert_int_equal(a->no_sample, b->no_sample);
    assert_int_equal(a->range_known, b->range_known);
    if (a->range_known)
        assert_int_equal(a->bad_device, b->bad_device);
    assert_int_equal(a->bad_stage, b->bad_stage);
    for (int o = 0; o < a->n_ops; o++) {
        assert_int_equal(a->stage[o], b->stage[o]);
        assert_int_equal(a->pos[o], b->pos[o]);
        assert_int_equal(a->sops[o], b->sops[o]);
        assert_true(a->otiles[o] == b->otiles[o]);
    }
    for (int s = 0; s <= a->P; s++)
        assert_int_equal(a->stage_off[s], b->stage_off[s]);
}

static void test_view(void **state)
{
    (void)state;
    fix f;
    setup(&f);
    ss_diag d;
    ss_diag_init(&d);
    ss_plan_view *v = ss_plan_view_new(f.g, f.m);
    assert_non_null(v);
    assert_int_equal(v->P, 0);
    assert_int_equal(ss_plan_view_set(v, f.p, &d), SS_OK);
    assert_int_equal(v->P, 2);
    assert_int_equal(v->M, 8);
    assert_int_equal(v->R, 2);
    assert_int_equal(v->bad_stage, -1);
    assert_int_equal(v->range_known, 0);
    assert_int_equal(ss_plan_view_bad_device(v, f.p), -1);
    assert_int_equal(v->range_known, 1);
    assert_int_equal(v->no_sample, -1);
    int64_t tiles = 0, g = 0;
    for (int o = 0; o < v->n_ops; o++) {
        const ss_pconfig *c = ss_plan_config(f.p, o);
        tiles += c->ntiles;
        assert_int_equal(v->stage[o], c->stage);
        int s = c->stage, j = v->stage_off[s] + v->pos[o];
        assert_int_equal(v->sops[j], o); /* its place in its stage's group */
        if (v->pos[o] > 0)
            assert_true(v->sops[j - 1] < o); /* groups ascend */
        int sd = v->sd[o];
        assert_true(sd >= 0 && sd < c->ndim);
        assert_int_equal(c->deg[sd] % v->sample_gcd, 0);
        g = g ? (c->deg[sd] < g ? c->deg[sd] : g) : c->deg[sd];
    }
    assert_true(v->tiles == tiles);
    assert_true(v->sample_gcd >= 8 && v->sample_gcd <= g); /* dp 4 x 8 micro-batches: 32 */
    assert_int_equal(v->stage_off[2], v->n_ops);
    /* a plan of another model is refused, the view left unset */
    ss_graph *g2 = NULL;
    ss_plan *p2 = NULL;
    assert_int_equal(ss_model_build("gpt:layers=2,hidden=1024,heads=16,seq=512", 64, 16, &g2, &d),
                     SS_OK);
    assert_int_equal(ss_plan_from_spec("data-parallel", g2, f.m, &p2, &d), SS_OK);
    ss_diag_init(&d);
    assert_int_equal(ss_plan_view_set(v, p2, &d), SS_ERR_INVALID);
    assert_non_null(strstr(d.msg, "operators"));
    assert_int_equal(v->P, 0);
    ss_plan_free(p2);
    ss_graph_free(g2);
    ss_plan_view_free(v);
    teardown(&f);
}

/* Op o's devices: its first tile's and the first other tile's swapped
 * (a move of one op; the plan stays valid). 0 if all its tiles share a
 * device. */
static int swap_devices(ss_plan *p, int o, int k)
{
    ss_diag d;
    ss_diag_init(&d);
    ss_pconfig c = *ss_plan_config(p, o);
    int *devs = malloc((size_t)c.ntiles * sizeof *devs);
    assert_non_null(devs);
    memcpy(devs, c.devices, (size_t)c.ntiles * sizeof *devs);
    int a = k % c.ntiles, at = -1;
    for (int i = 1; i < c.ntiles && at < 0; i++)
        if (devs[(a + i) % c.ntiles] != devs[a])
            at = (a + i) % c.ntiles;
    if (at >= 0) {
        int t = devs[a];
        devs[a] = devs[at];
        devs[at] = t;
        c.devices = devs;
        assert_int_equal(ss_plan_set_config(p, o, &c, &d), SS_OK);
    }
    free(devs);
    return at >= 0;
}

static void test_change(void **state)
{
    (void)state;
    fix f;
    setup(&f);
    ss_diag d;
    ss_diag_init(&d);
    ss_plan_view *v = ss_plan_view_new(f.g, f.m), *w = ss_plan_view_new(f.g, f.m);
    assert_non_null(v);
    assert_non_null(w);
    assert_int_equal(ss_plan_view_set(v, f.p, &d), SS_OK);
    ss_plan_view_bad_device(v, f.p);
    for (int k = 0; k < 20; k++) {
        int o = (k * 37) % ss_graph_n_ops(f.g);
        if (!swap_devices(f.p, o, k))
            continue;
        assert_int_equal(ss_plan_view_change(v, f.p, o, &d), SS_OK);
        assert_int_equal(ss_plan_view_set(w, f.p, &d), SS_OK);
        ss_plan_view_bad_device(w, f.p);
        assert_same_view(v, w);
    }
    ss_plan_settings_of(f.p)->schedule = SS_PIPE_GPIPE;
    assert_int_equal(ss_plan_view_change(v, f.p, -1, &d), SS_OK);
    assert_int_equal(ss_plan_view_set(w, f.p, &d), SS_OK);
    ss_plan_view_bad_device(w, f.p);
    assert_same_view(v, w);
    ss_plan_view_free(v);
    ss_plan_view_free(w);
    teardown(&f);
}

static void assert_same_result(const ss_sim_result *a, const ss_sim_result *b, int nd)
{
    assert_true(a->iteration_us == b->iteration_us);
    assert_int_equal(a->fits, b->fits);
    assert_true(a->n_tasks == b->n_tasks);
    for (int i = 0; i < nd; i++) {
        assert_true(a->compute_us[i] == b->compute_us[i]);
        assert_true(a->peak_memory_bytes[i] == b->peak_memory_bytes[i]);
    }
    assert_string_equal(a->evaluator, b->evaluator);
}

/* A chain of moves as a search makes them: each a single-op move (or a
 * settings change) from the base, judged by rerun and by a fresh run of
 * another simulator, committed or undone. */
static void rerun_chain(ss_evaluator e)
{
    fix f;
    setup(&f);
    ss_diag d;
    ss_diag_init(&d);
    ss_sim_config cfg = {.evaluator = e};
    ss_sim *s = NULL, *fresh = NULL;
    assert_int_equal(ss_sim_new(f.g, f.m, f.cm, &cfg, &s, &d), SS_OK);
    assert_int_equal(ss_sim_new(f.g, f.m, f.cm, &cfg, &fresh, &d), SS_OK);
    ss_sim_result a, b;
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    double la, lb;
    assert_int_equal(ss_sim_run_within(s, f.p, HUGE_VAL, &a, &la, &d), SS_OK);
    ss_sim_commit(s);
    int nd = ss_machine_n_devices(f.m), n = ss_graph_n_ops(f.g);
    ss_plan *base = ss_plan_clone(f.p);
    assert_non_null(base);
    int judged = 0;
    for (int k = 0; k < 12; k++) {
        int changed;
        if (k % 5 == 4) { /* a settings change */
            ss_plan_settings_of(f.p)->schedule =
                ss_plan_settings_get(f.p)->schedule == SS_PIPE_1F1B ? SS_PIPE_GPIPE
                                                                    : SS_PIPE_1F1B;
            changed = SS_SIM_SETTINGS;
        } else {
            changed = (k * 53 + 7) % n;
            if (!swap_devices(f.p, changed, k))
                continue;
        }
        /* a forced evaluator may refuse the move: then both refuse */
        ss_diag d1, d2;
        ss_diag_init(&d1);
        ss_diag_init(&d2);
        ss_status s1 = ss_sim_rerun_within(s, f.p, changed, HUGE_VAL, &a, &la, &d1);
        ss_status s2 = ss_sim_run_within(fresh, f.p, HUGE_VAL, &b, &lb, &d2);
        assert_int_equal(s1, s2);
        assert_string_equal(d1.msg, d2.msg);
        judged += s1 == SS_OK;
        if (s1 == SS_OK)
            assert_same_result(&a, &b, nd);
        if (k % 3 == 0) { /* accepted */
            ss_sim_commit(s);
            ss_plan_free(base);
            base = ss_plan_clone(f.p);
            assert_non_null(base);
        } else { /* rejected: back to the base */
            ss_plan_free(f.p);
            f.p = ss_plan_clone(base);
            assert_non_null(f.p);
        }
    }
    if (e == SS_EVAL_AUTO) /* judges every plan */
        assert_true(judged >= 8);
    ss_plan_free(base);
    ss_sim_result_clear(&a);
    ss_sim_result_clear(&b);
    ss_sim_free(s);
    ss_sim_free(fresh);
    teardown(&f);
}

static void test_rerun(void **state)
{
    (void)state;
    rerun_chain(SS_EVAL_AUTO);
    rerun_chain(SS_EVAL_SYMMETRY);
    rerun_chain(SS_EVAL_HIER);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_view),
        cmocka_unit_test(test_change),
        cmocka_unit_test(test_rerun),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
