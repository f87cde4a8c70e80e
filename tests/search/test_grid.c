/*
 * test_grid.c — the Megatron grid's memoization across points (search/grid.h):
 * judged with one judge per thread (a plan per structure, its points judged
 * again by the simulator that memoized the structure's sub-problems, bulk
 * sub-problems shared between a point and its bulk twin), the grid gives
 * bit for bit what it gives when every point is judged fresh (a judge, a
 * plan and a simulator of its own): the same best point and time, the same
 * near list, the same counts of points judged, pruned, cut and refused.
 * On GPT models whose grids hold pipelines, interleaving, the distributed
 * optimizer and both sync modes, on one and on two DGX nodes. And on one
 * node the grid with 2 threads gives the best point of 1 thread (the check
 * was search/test_llm.c's test_grid_threads, which ran the same 1-thread
 * grid of the same model again).
 */
#include "testutil.h"
#include "search/grid.h"

#include <math.h>
#include <string.h>

static void grid_at(const char *spec, int64_t batch, int nodes, int fresh, int threads,
                    ss_grid_result *r)
{
    ss_machine *m = NULL;
    ss_graph *g = NULL;
    ss_diag d;
    ss_diag_init(&d);
    assert_int_equal(
        ss_machine_load_nodes(ss_test_path("topologies/dgx-a100.json"), nodes, &m, &d), SS_OK);
    assert_int_equal(ss_model_build(spec, batch, ss_machine_n_devices(m), &g, &d), SS_OK);
    ss_costmodel *cm = ss_cost_new(m);
    ss_grid_config c = {.threads = threads, .fresh = fresh};
    if (ss_grid_run(g, m, cm, &c, r, &d))
        fail_msg("grid: %s", d.msg);
    ss_cost_free(cm);
    ss_graph_free(g);
    ss_machine_free(m);
}

/* ... and, when threads_too, the memoized grid with 2 threads gives the
 * best point, time, near count and points of 1 thread (run a). */
static void same_grid(const char *spec, int64_t batch, int nodes, int threads_too)
{
    ss_grid_result a, b;
    grid_at(spec, batch, nodes, 0, 1, &a);
    grid_at(spec, batch, nodes, 1, 1, &b);
    assert_true(a.found && b.found);
    assert_false(a.time_cut || a.interrupted || b.time_cut || b.interrupted);
    /* a grid that exercises the memo: several points per structure judged */
    assert_true(a.judged >= 20);
    if (memcmp(&a.best.c, &b.best.c, sizeof a.best.c) || a.best.time_us != b.best.time_us)
        fail_msg("%s: memoized best %.6f us, fresh %.6f us", spec, a.best.time_us,
                 b.best.time_us);
    assert_true(a.best.peak_bytes == b.best.peak_bytes);
    assert_int_equal(a.best.fits, b.best.fits);
    assert_int_equal(a.n_near, b.n_near);
    for (int i = 0; i < a.n_near; i++) {
        assert_memory_equal(&a.near[i].c, &b.near[i].c, sizeof a.near[i].c);
        assert_true(a.near[i].time_us == b.near[i].time_us);
    }
    assert_int_equal(a.points, b.points);
    assert_int_equal(a.judged, b.judged);
    assert_int_equal(a.mem_pruned, b.mem_pruned);
    assert_int_equal(a.no_fit, b.no_fit);
    assert_int_equal(a.cut, b.cut);
    assert_int_equal(a.refused, b.refused);
    if (!threads_too)
        return;
    ss_grid_result c;
    grid_at(spec, batch, nodes, 0, 2, &c);
    assert_true(c.found);
    assert_true(a.best.fits);
    assert_true(a.best.time_us == c.best.time_us);
    assert_memory_equal(&a.best.c, &c.best.c, sizeof a.best.c);
    assert_int_equal(a.n_near, c.n_near);
    assert_int_equal(a.points, c.points);
}

static void test_memo_one_node(void **state)
{
    (void)state;
    same_grid("gpt:layers=8,hidden=1024,heads=16,seq=512", 64, 1, 1);
}

static void test_memo_two_nodes(void **state)
{
    (void)state;
    same_grid("gpt:layers=4,hidden=1024,heads=16,seq=512,vocab=8192", 64, 2, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_memo_one_node),
        cmocka_unit_test(test_memo_two_nodes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
