/*
 * test_level2.c — level 2 of the planner (search/level2.h) on several
 * threads.
 *
 * Threads: a small GPT (4 layers) on two DGX A100 nodes (16 devices), pp 2
 * forced, gives the same plan, byte for byte, and the same estimate and
 * simulated time with 1, 2, 3 and 64 threads; with 16 finalists (more than its
 * 8 configurations) no configuration is skipped by the bound, so every
 * thread prices its round-robin share (the count per thread is > 0 and the
 * counts sum to the configurations priced), which shows the threads
 * setting is not ignored without timing anything. On one node with every
 * pipeline depth and the default 4 finalists (the bound then skips
 * configurations, at times that depend on the threads' progress), 1 and 2
 * threads give the same plan too.
 * Stop: a stop callback that answers "stop" at once leaves every
 * configuration unpriced (SS_ERR_INFEASIBLE naming the stop, report.stopped),
 * one that stops after the third poll leaves a plan from the configurations
 * priced before it, and is polled on every thread.
 */
#include "testutil.h"
#include "search/level2.h"

#include <pthread.h>
#include <string.h>

#define SPEC "gpt:layers=4,hidden=256,heads=8,seq=128,vocab=1024"

typedef struct fixture {
    ss_machine *m;
    ss_graph *g;
} fixture;

static void fixture_load(fixture *f, int nodes)
{
    ss_diag d;
    ss_diag_init(&d);
    assert_int_equal(ss_machine_load_nodes(ss_test_path("topologies/dgx-a100.json"), nodes,
                                           &f->m, &d),
                     SS_OK);
    assert_int_equal(ss_model_build(SPEC, 32, 8 * nodes, &f->g, &d), SS_OK);
}

static void fixture_free(fixture *f)
{
    ss_graph_free(f->g);
    ss_machine_free(f->m);
}

/* Level 2 with cfg on f: the plan's text (caller frees) and the report. */
static char *plan_text(const fixture *f, const ss_level2_config *cfg, ss_level2_report *rep)
{
    ss_diag d;
    ss_diag_init(&d);
    ss_costmodel *cm = ss_cost_new(f->m);
    ss_plan *p = NULL;
    if (ss_level2_plan(f->g, f->m, cm, cfg, &p, rep, &d) != SS_OK)
        fail_msg("level 2 with %d threads: %s", cfg->threads, d.msg);
    char *text = NULL;
    assert_int_equal(ss_plan_to_string(p, f->g, &text, &d), SS_OK);
    ss_plan_free(p);
    ss_cost_free(cm);
    return text;
}

static void test_threads_same_plan(void **state)
{
    (void)state;
    fixture f;
    fixture_load(&f, 2);
    ss_level2_config cfg = {0};
    cfg.pp = 2;
    cfg.finalists = 16; /* the bar stays open: nothing skipped, every share priced */
    ss_level2_report r1, rt;
    cfg.threads = 1;
    char *one = plan_text(&f, &cfg, &r1);
    assert_int_equal(r1.threads, 1);
    assert_int_equal(r1.thread_configs[0], r1.configs);
    assert_true(r1.configs >= 6);
    assert_int_equal(r1.skipped, 0);
    for (int t = 2; t <= 3; t++) {
        cfg.threads = t;
        char *text = plan_text(&f, &cfg, &rt);
        print_message("threads %d: %d configurations, per thread %d %d; %s, %.3f ms\n", t,
                      rt.configs, rt.thread_configs[0], rt.thread_configs[1], rt.mesh,
                      rt.simulated_us / 1e3);
        assert_string_equal(text, one);
        assert_true(rt.estimate_us == r1.estimate_us);
        assert_true(rt.simulated_us == r1.simulated_us);
        assert_string_equal(rt.mesh, r1.mesh);
        assert_int_equal(rt.pp, r1.pp);
        assert_int_equal(rt.microbatches, r1.microbatches);
        assert_int_equal(rt.threads, t);
        assert_int_equal(rt.skipped, 0);
        assert_int_equal(rt.configs, r1.configs);
        int sum = 0;
        for (int i = 0; i < t; i++) {
            assert_true(rt.thread_configs[i] > 0);
            sum += rt.thread_configs[i];
        }
        assert_int_equal(sum, rt.configs);
        ss_free(text);
    }
    /* more threads than configurations: at most one per configuration,
     * each pricing one or more (a configuration may be priced under more
     * than one recompute mode) */
    cfg.threads = 64;
    char *text = plan_text(&f, &cfg, &rt);
    assert_string_equal(text, one);
    assert_true(rt.threads >= 2 && rt.threads <= r1.configs);
    for (int i = 0; i < rt.threads; i++)
        assert_true(rt.thread_configs[i] > 0);
    ss_free(text);
    ss_free(one);
    fixture_free(&f);
    /* the bound at work: the same plan whatever the threads' progress */
    fixture_load(&f, 1);
    memset(&cfg, 0, sizeof cfg);
    cfg.threads = 1;
    one = plan_text(&f, &cfg, &r1);
    cfg.threads = 2;
    text = plan_text(&f, &cfg, &rt);
    print_message("one node: %d + %d skipped (1 thread), %d + %d (2); %s pp %d, %.3f ms\n",
                  r1.configs, r1.skipped, rt.configs, rt.skipped, rt.mesh, rt.pp,
                  rt.simulated_us / 1e3);
    assert_true(r1.skipped > 0);
    assert_string_equal(text, one);
    assert_true(rt.estimate_us == r1.estimate_us && rt.simulated_us == r1.simulated_us);
    ss_free(text);
    ss_free(one);
    fixture_free(&f);
}

typedef struct stopper {
    pthread_mutex_t lock;
    int polls, after;
} stopper;

static int stop_after(void *ctx)
{
    stopper *s = ctx;
    pthread_mutex_lock(&s->lock);
    int stop = ++s->polls > s->after;
    pthread_mutex_unlock(&s->lock);
    return stop;
}

static void test_stop(void **state)
{
    (void)state;
    fixture f;
    fixture_load(&f, 2);
    ss_diag d;
    ss_diag_init(&d);
    ss_costmodel *cm = ss_cost_new(f.m);
    stopper s = {PTHREAD_MUTEX_INITIALIZER, 0, 0};
    ss_level2_config cfg = {0};
    cfg.threads = 2;
    cfg.stop = stop_after;
    cfg.stop_ctx = &s;
    ss_level2_report rep;
    ss_plan *p = NULL;
    assert_int_equal(ss_level2_plan(f.g, f.m, cm, &cfg, &p, &rep, &d), SS_ERR_INFEASIBLE);
    assert_null(p);
    assert_non_null(strstr(d.msg, "stopped"));
    assert_int_equal(rep.stopped, 1);
    assert_int_equal(rep.configs + rep.skipped, 0);
    /* three polls answered "go on", then "stop": a plan from what was priced */
    s.polls = 0;
    s.after = 3;
    cfg.threads = 1;
    ss_diag_init(&d);
    assert_int_equal(ss_level2_plan(f.g, f.m, cm, &cfg, &p, &rep, &d), SS_OK);
    assert_non_null(p);
    assert_int_equal(rep.stopped, 1);
    assert_int_equal(rep.time_limited, 0);
    assert_true(rep.configs + rep.skipped >= 1 && rep.configs + rep.skipped <= 3);
    assert_int_equal(s.polls, 4);
    ss_plan_free(p);
    ss_cost_free(cm);
    fixture_free(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_threads_same_plan),
        cmocka_unit_test(test_stop),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
