/*
 * test_tune_sync.c — the search's tuning of its final plan's gradient-sync
 * settings (search/tune_sync.h, search/driver.c): on a small data-parallel
 * MLP whose gradient sync is exposed, the search's plan has other settings
 * than the same search without tuning and is faster when simulated afresh;
 * the plan file records them and reloads to the same prediction; the same
 * seed gives the same plan file byte for byte; a deadline that has passed
 * cuts the tuner with the plan's settings kept; under the hierarchical
 * evaluator only the threshold, priority and sync mode are tried; without
 * a deadline a library call runs at most SS_TUNE_SYNC_POINTS simulations
 * (counted), an explicit budget exactly its count, and `simsearch
 * tune-sync`'s ss_tune_sync and a call with a deadline every point of the
 * full order.
 */
#include "testutil.h"
#include "search/tune_sync.h"

#include <jansson.h>
#include <math.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MLP "mlp:layers=8,hidden=1024,in=1024"

typedef struct fixture {
    ss_machine *m;
    ss_graph *g;
    ss_costmodel *cm;
} fixture;

static void fixture_new(fixture *f, const char *topo, int nodes, const char *spec, int64_t batch)
{
    ss_diag d;
    ss_diag_init(&d);
    memset(f, 0, sizeof *f);
    assert_int_equal(ss_machine_load_nodes(ss_test_path(topo), nodes, &f->m, &d), SS_OK);
    assert_int_equal(ss_model_build(spec, batch, ss_machine_n_devices(f->m), &f->g, &d), SS_OK);
    assert_non_null(f->cm = ss_cost_new(f->m));
}

static void fixture_free(fixture *f)
{
    ss_cost_free(f->cm);
    ss_graph_free(f->g);
    ss_machine_free(f->m);
}

static void search(const fixture *f, int tune, ss_search_result *r)
{
    ss_diag d;
    ss_diag_init(&d);
    ss_search_config c;
    memset(&c, 0, sizeof c);
    c.budget = 50;
    c.seed = 3;
    c.no_sync_tuning = !tune;
    memset(r, 0, sizeof *r);
    assert_int_equal(ss_search_run(f->g, f->m, f->cm, &c, r, &d), SS_OK);
}

/* p simulated by a new simulator: its time (and whether it fits). */
static double simulate(const fixture *f, const ss_plan *p, int *fits)
{
    ss_diag d;
    ss_diag_init(&d);
    ss_sim *s = NULL;
    ss_sim_result r;
    memset(&r, 0, sizeof r);
    assert_int_equal(ss_sim_new(f->g, f->m, f->cm, NULL, &s, &d), SS_OK);
    assert_int_equal(ss_sim_run(s, p, &r, &d), SS_OK);
    double t = r.iteration_us;
    *fits = r.fits;
    ss_sim_result_clear(&r);
    ss_sim_free(s);
    return t;
}

static char *slurp(const char *path)
{
    FILE *fp = fopen(path, "rb");
    assert_non_null(fp);
    fseek(fp, 0, SEEK_END);
    long n = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    assert_non_null(s);
    assert_int_equal(fread(s, 1, (size_t)n, fp), (size_t)n);
    s[n] = 0;
    fclose(fp);
    return s;
}

/* Tuned vs untuned: other settings, faster as re-simulated, reported. */
static void test_search_tunes(void **state)
{
    (void)state;
    fixture f;
    fixture_new(&f, "topologies/p100x16.json", 0, MLP, 8192);
    ss_search_result a, b;
    search(&f, 0, &a);
    search(&f, 1, &b);
    const ss_plan_settings *sa = ss_plan_settings_get(a.best);
    const ss_plan_settings *sb = ss_plan_settings_get(b.best);
    const ss_search_sync_tuning *t = &b.sync_tuning;
    print_message("untuned %.3f ms (bucket %.0f, priority %d, K %d, flags %d); tuned %.3f ms "
                  "(bucket %.0f, priority %d, K %d, flags %d), %d simulations\n",
                  a.best_sim.iteration_us / 1e3, sa->bucket_bytes, sa->priority,
                  sa->reorder_backward, sa->synced_flags, b.best_sim.iteration_us / 1e3,
                  sb->bucket_bytes, sb->priority, sb->reorder_backward, sb->synced_flags,
                  t->evaluations);
    assert_int_equal(a.sync_tuning.run, 0);
    assert_true(t->run && t->changed && t->order_tuned && !t->cut);
    assert_int_equal(t->finalists, 1);
    assert_true(t->evaluations > 10);
    assert_true(t->evaluations <= SS_TUNE_SYNC_POINTS); /* no time limit: the default budget */
    /* the same chain: the tuning starts from the untuned search's plan */
    assert_true(t->before_us == a.best_sim.iteration_us);
    assert_true(sa->bucket_bytes != sb->bucket_bytes || sa->priority != sb->priority ||
                sa->reorder_backward != sb->reorder_backward ||
                sa->synced_flags != sb->synced_flags || sa->sync != sb->sync);
    /* what the report says is what the plan holds */
    assert_true(sb->bucket_bytes == t->bucket_bytes && sb->priority == t->priority &&
                sb->reorder_backward == t->reorder_k && sb->synced_flags == t->synced_flags &&
                (sb->sync == SS_SYNC_BULK) == t->bulk);
    /* faster, as a fresh simulation says */
    int fa = 0, fb = 0;
    double ta = simulate(&f, a.best, &fa), tb = simulate(&f, b.best, &fb);
    assert_true(fa && fb);
    assert_true(ta == a.best_sim.iteration_us && tb == b.best_sim.iteration_us);
    assert_true(tb == t->after_us);
    assert_true(tb < 0.95 * ta);
    /* --json: sync_tuning */
    char *js = NULL;
    ss_diag d;
    ss_diag_init(&d);
    assert_int_equal(ss_search_result_to_json(&b, NULL, NULL, &js, &d), SS_OK);
    json_t *o = json_loads(js, 0, NULL);
    assert_non_null(o);
    json_t *st = json_object_get(o, "sync_tuning");
    assert_non_null(st);
    assert_true(json_is_true(json_object_get(st, "changed")));
    assert_true(fabs(json_real_value(json_object_get(st, "before_ms")) - ta / 1e3) < 1e-9 * ta);
    assert_true(fabs(json_real_value(json_object_get(st, "after_ms")) - tb / 1e3) < 1e-9 * tb);
    assert_int_equal(json_integer_value(json_object_get(st, "evaluations")), t->evaluations);
    assert_non_null(json_object_get(st, "time_s"));
    json_t *set = json_object_get(st, "settings");
    assert_true(json_real_value(json_object_get(set, "bucket_bytes")) == sb->bucket_bytes);
    assert_int_equal(json_integer_value(json_object_get(set, "reorder_k")), sb->reorder_backward);
    json_decref(o);
    ss_free(js);
    ss_search_result_clear(&a);
    ss_search_result_clear(&b);
    fixture_free(&f);
}

/* The plan file records the tuned settings and reloads to the same
 * prediction; the same seed twice writes the same bytes. */
static void test_plan_file(void **state)
{
    (void)state;
    fixture f;
    fixture_new(&f, "topologies/p100x16.json", 0, MLP, 8192);
    char p1[64], p2[64];
    snprintf(p1, sizeof p1, "test_tune_sync_%d_a.json", (int)getpid());
    snprintf(p2, sizeof p2, "test_tune_sync_%d_b.json", (int)getpid());
    ss_diag d;
    ss_diag_init(&d);
    ss_search_result r1, r2;
    search(&f, 1, &r1);
    search(&f, 1, &r2);
    assert_int_equal(ss_plan_save(r1.best, f.g, p1, &d), SS_OK);
    assert_int_equal(ss_plan_save(r2.best, f.g, p2, &d), SS_OK);
    char *s1 = slurp(p1), *s2 = slurp(p2);
    assert_string_equal(s1, s2);
    free(s1);
    free(s2);
    ss_plan *back = NULL;
    assert_int_equal(ss_plan_load(p1, f.g, f.m, &back, &d), SS_OK);
    const ss_plan_settings *a = ss_plan_settings_get(r1.best), *b = ss_plan_settings_get(back);
    assert_true(a->bucket_bytes == b->bucket_bytes && a->priority == b->priority &&
                a->reorder_backward == b->reorder_backward &&
                a->synced_flags == b->synced_flags && a->sync == b->sync);
    assert_true(r1.sync_tuning.changed);
    int fits = 0;
    assert_true(simulate(&f, back, &fits) == r1.best_sim.iteration_us);
    ss_plan_free(back);
    unlink(p1);
    unlink(p2);
    ss_search_result_clear(&r1);
    ss_search_result_clear(&r2);
    fixture_free(&f);
}

/* A deadline already passed: cut at once, nothing tuned, the plan's
 * settings as they were. */
static void test_deadline(void **state)
{
    (void)state;
    fixture f;
    fixture_new(&f, "topologies/p100x16.json", 0, MLP, 8192);
    ss_diag d;
    ss_diag_init(&d);
    ss_plan *p = NULL;
    assert_int_equal(ss_plan_data_parallel(f.g, f.m, 0, &p, &d), SS_OK);
    ss_plan_settings before = *ss_plan_settings_get(p);
    ss_sim *s = NULL;
    assert_int_equal(ss_sim_new(f.g, f.m, f.cm, NULL, &s, &d), SS_OK);
    ss_tune_sync_config c = {.deadline = 1e-3};
    ss_tune_sync_result r;
    assert_int_equal(ss_tune_sync_within(s, p, &c, &r, &d), SS_OK);
    assert_true(r.cut);
    assert_int_equal(r.evaluations, 0);
    assert_true(r.best.iteration_us == HUGE_VAL);
    assert_memory_equal(&before, ss_plan_settings_get(p), sizeof before);
    /* without a deadline the same plan tunes to something faster */
    assert_int_equal(ss_tune_sync_within(s, p, NULL, &r, &d), SS_OK);
    assert_false(r.cut);
    assert_true(r.best.iteration_us < r.plan.iteration_us);
    assert_memory_equal(&before, ss_plan_settings_get(p), sizeof before);
    ss_sim_free(s);
    ss_plan_free(p);
    fixture_free(&f);
}

/* The budget of simulations: a library call without a deadline runs at
 * most SS_TUNE_SYNC_POINTS (the full order has 2.6 times as many points on
 * this plan), and finds what the full order finds to 1%; an explicit
 * budget runs exactly that many; ss_tune_sync (`simsearch tune-sync`) and
 * a call with a deadline run the full order, the same points. */
static void test_budget(void **state)
{
    (void)state;
    fixture f;
    fixture_new(&f, "topologies/p100x16.json", 0, MLP, 8192);
    ss_diag d;
    ss_diag_init(&d);
    ss_plan *p = NULL;
    assert_int_equal(ss_plan_data_parallel(f.g, f.m, 0, &p, &d), SS_OK);
    ss_sim *s = NULL;
    assert_int_equal(ss_sim_new(f.g, f.m, f.cm, NULL, &s, &d), SS_OK);
    ss_tune_sync_result full, lib, few, dl;
    assert_int_equal(ss_tune_sync(s, p, &full, &d), SS_OK);
    assert_int_equal(ss_tune_sync_within(s, p, NULL, &lib, &d), SS_OK);
    print_message("plan %.3f ms; full order %.3f ms in %d simulations; default budget %.3f ms "
                  "in %d\n",
                  full.plan.iteration_us / 1e3, full.best.iteration_us / 1e3, full.evaluations,
                  lib.best.iteration_us / 1e3, lib.evaluations);
    assert_int_equal(full.budget, 0);
    assert_false(full.budget_spent);
    assert_true(full.evaluations > 2 * SS_TUNE_SYNC_POINTS);
    assert_int_equal(lib.budget, SS_TUNE_SYNC_POINTS);
    assert_true(lib.evaluations >= 10 && lib.evaluations <= SS_TUNE_SYNC_POINTS);
    assert_true(lib.plan.iteration_us == full.plan.iteration_us);
    assert_true(lib.best.iteration_us < 0.9 * lib.plan.iteration_us);
    assert_true(lib.best.iteration_us <= 1.01 * full.best.iteration_us);
    ss_tune_sync_config c = {.max_points = 3};
    assert_int_equal(ss_tune_sync_within(s, p, &c, &few, &d), SS_OK);
    assert_int_equal(few.evaluations, 3);
    assert_true(few.budget_spent && !few.cut);
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ss_tune_sync_config late = {.deadline = (double)ts.tv_sec + 1e6};
    assert_int_equal(ss_tune_sync_within(s, p, &late, &dl, &d), SS_OK);
    assert_int_equal(dl.budget, 0);
    assert_int_equal(dl.evaluations, full.evaluations);
    assert_true(dl.best.iteration_us == full.best.iteration_us);
    ss_sim_free(s);
    ss_plan_free(p);
    fixture_free(&f);
}

/* Under the hierarchical evaluator (bounded), K and synced flags are left
 * alone and only a few points are judged, all by that evaluator. */
static void test_fast_only(void **state)
{
    (void)state;
    fixture f;
    fixture_new(&f, "topologies/dgx-a100.json", 1, "gpt:layers=4,hidden=512,heads=8,seq=512",
                16);
    ss_diag d;
    ss_diag_init(&d);
    ss_plan *p = NULL;
    assert_int_equal(ss_plan_from_spec("megatron:tp=2,pp=1,dp=4,mbs=1", f.g, f.m, &p, &d),
                     SS_OK);
    ss_sim *s = NULL;
    ss_sim_config sc = {.evaluator = SS_EVAL_HIER};
    assert_int_equal(ss_sim_new(f.g, f.m, f.cm, &sc, &s, &d), SS_OK);
    ss_tune_sync_config c = {.bounded = 1, .try_sync_mode = 1};
    ss_tune_sync_result r;
    assert_int_equal(ss_tune_sync_within(s, p, &c, &r, &d), SS_OK);
    assert_string_equal(r.evaluator, "hierarchical");
    assert_false(r.order_tuned);
    assert_true(r.evaluations >= 2 && r.evaluations <= 5);
    assert_int_equal(r.best.reorder_k, 0);
    assert_int_equal(r.best.synced_flags, 0);
    assert_true(r.best.iteration_us <= r.plan.iteration_us);
    ss_sim_free(s);
    ss_plan_free(p);
    fixture_free(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_search_tunes),
        cmocka_unit_test(test_plan_file),
        cmocka_unit_test(test_deadline),
        cmocka_unit_test(test_budget),
        cmocka_unit_test(test_fast_only),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
