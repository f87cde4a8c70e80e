/*
 * test_swarm.c — the swarm's event simulation (search/swarm.h): with no
 * churn and n equal peers the step time is the closed form k c + 2 (n-1) V
 * / (n b) + update (k = target / (n micro-batch) micro-batches of c s);
 * a slow peer misses the round unless the join window covers its
 * micro-batch; churn is deterministic per seed, costs throughput, and keeps
 * the sample accounting; local SGD averages once per H target batches; the
 * peers of volunteers40 come from the cost model; bad configs are refused;
 * a what-if sweep's points equal the single runs they stand for, and a
 * swarm that cannot run is reported as an infeasible point, not dropped.
 */
#include "testutil.h"
#include "search/swarm.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void equal_peers(ss_swarm_peer *p, int n, double mb_s, double bps)
{
    for (int i = 0; i < n; i++) {
        memset(&p[i], 0, sizeof p[i]);
        snprintf(p[i].name, sizeof p[i].name, "p%d", i);
        p[i].mb_s = mb_s;
        p[i].update_s = 0.25;
        p[i].link = (ss_avg_peer){bps, bps, 0, 1};
    }
}

static void test_closed_form(void **state)
{
    (void)state;
    for (int n = 2; n <= 8; n += 3) {
        ss_swarm_peer p[8];
        equal_peers(p, n, 0.5, 12.5e6);
        ss_swarm_config c;
        ss_swarm_config_default(&c);
        c.micro_batch = 4;
        c.target_batch = 4 * n * 10; /* k = 10 */
        c.vector_bytes = 50e6;
        c.duration_s = 600;
        ss_swarm_result r;
        assert_int_equal(ss_swarm_run(p, n, &c, &r, NULL), SS_OK);
        double step = 10 * 0.5 + 2.0 * (n - 1) * 50e6 / (n * 12.5e6) + 0.25;
        assert_true(fabs(r.step_time_s - step) < 1e-9 * step);
        assert_int_equal(r.rounds, (int)(600 / step));
        assert_true(fabs(r.samples - r.rounds * (double)c.target_batch) < 1e-9);
        assert_true(fabs(r.samples_per_s - r.samples / 600) < 1e-9);
        for (int i = 0; i < n; i++) {
            assert_true(n == 2 || fabs(r.peers[i].share - 1.0 / n) < 1e-9); /* n = 2: any split */
            assert_int_equal(r.peers[i].missed, 0);
            assert_true(fabs(r.peers[i].wait_s) < 1e-9);
        }
        ss_swarm_result_free(&r);
    }
}

/* Three fast peers (0.1 s) and a slow one (20 s per micro-batch): with a
 * 5 s window the slow one misses the rounds it is mid-batch in; with a
 * window longer than its micro-batch it joins every round. */
static void test_slow_peer_window(void **state)
{
    (void)state;
    ss_swarm_peer p[4];
    equal_peers(p, 4, 0.1, 100e6);
    p[3].mb_s = 20;
    ss_swarm_config c;
    ss_swarm_config_default(&c);
    c.micro_batch = 1;
    c.target_batch = 60;
    c.vector_bytes = 1e6;
    c.duration_s = 1000;
    ss_swarm_result r;
    assert_int_equal(ss_swarm_run(p, 4, &c, &r, NULL), SS_OK);
    assert_true(r.peers[3].missed > 0);
    assert_true(r.peers[3].rounds < r.rounds);
    int missed = r.peers[3].missed;
    double fast = r.samples_per_s;
    ss_swarm_result_free(&r);
    c.join_window_s = 25;
    assert_int_equal(ss_swarm_run(p, 4, &c, &r, NULL), SS_OK);
    assert_int_equal(r.peers[3].missed, 0);
    assert_true(r.peers[3].wait_s == 0 || r.peers[0].wait_s > r.peers[3].wait_s);
    assert_true(missed > 0 && r.samples_per_s < fast); /* waiting for it costs */
    ss_swarm_result_free(&r);
}

static void test_churn(void **state)
{
    (void)state;
    ss_swarm_peer p[10];
    equal_peers(p, 10, 0.4, 5e6);
    p[2].link.accepts = p[5].link.accepts = 0;
    ss_swarm_config c;
    ss_swarm_config_default(&c);
    c.target_batch = 512;
    c.vector_bytes = 20e6;
    c.state_bytes = 60e6;
    c.duration_s = 7200;
    ss_swarm_result calm, a, b, other;
    assert_int_equal(ss_swarm_run(p, 10, &c, &calm, NULL), SS_OK);
    assert_int_equal(calm.leaves, 0);
    assert_true(calm.peers[2].share == 0 && calm.peers[5].share == 0);
    c.leave_per_h = 2;
    c.join_per_h = 4;
    assert_int_equal(ss_swarm_run(p, 10, &c, &a, NULL), SS_OK);
    assert_int_equal(ss_swarm_run(p, 10, &c, &b, NULL), SS_OK);
    c.seed = 2;
    assert_int_equal(ss_swarm_run(p, 10, &c, &other, NULL), SS_OK);
    assert_true(a.leaves > 5 && a.joins > 5);
    assert_true(a.samples == b.samples && a.n_events == b.n_events && a.aborts == b.aborts);
    assert_true(memcmp(a.events, b.events, sizeof *a.events * (size_t)a.n_events) == 0);
    assert_true(other.samples != a.samples);
    assert_true(a.samples_per_s < calm.samples_per_s);
    assert_true(a.lost_samples > 0);
    int leaves = 0, joins = 0;
    for (int k = 0; k < a.n_events; k++) {
        leaves += a.events[k].kind == SS_SWARM_LEAVE;
        joins += a.events[k].kind == SS_SWARM_JOIN;
        if (k)
            assert_true(a.events[k].t >= a.events[k - 1].t);
    }
    assert_int_equal(leaves, a.leaves);
    assert_int_equal(joins, a.joins);
    ss_swarm_result_free(&calm), ss_swarm_result_free(&a), ss_swarm_result_free(&b);
    ss_swarm_result_free(&other);
}

static void test_local_sgd(void **state)
{
    (void)state;
    ss_swarm_peer p[6];
    equal_peers(p, 6, 0.5, 2e6);
    ss_swarm_config c;
    ss_swarm_config_default(&c);
    c.micro_batch = 8;
    c.target_batch = 480; /* k = 10 */
    c.vector_bytes = 40e6;
    c.duration_s = 3000;
    ss_swarm_result per, loc;
    assert_int_equal(ss_swarm_run(p, 6, &c, &per, NULL), SS_OK);
    c.local_steps = 8;
    assert_int_equal(ss_swarm_run(p, 6, &c, &loc, NULL), SS_OK);
    /* a round: 80 micro-batches of 0.75 s (0.5 + a local update) + averaging */
    double avg = 2.0 * 5 * 40e6 / (6 * 2e6) + 0.25;
    assert_true(fabs(loc.step_time_s - (80 * 0.75 + avg)) < 1e-9 * loc.step_time_s);
    assert_true(loc.samples_per_s > per.samples_per_s);
    ss_swarm_result_free(&per), ss_swarm_result_free(&loc);
}

static void test_volunteers40(void **state)
{
    (void)state;
    char path[4096];
    snprintf(path, sizeof path, "%s/topologies/volunteers40.json", getenv("SS_SOURCE_DIR"));
    ss_machine *m = NULL;
    ss_graph *g = NULL;
    assert_int_equal(ss_machine_load(path, &m, NULL), SS_OK);
    assert_int_equal(ss_model_build("bert:layers=4,hidden=256,heads=4,seq=128", 8, 1, &g, NULL),
                     SS_OK);
    ss_costmodel *cm = ss_cost_new(m);
    ss_swarm_peer p[40];
    assert_int_equal(ss_swarm_peers_from_machine(g, m, cm, ss_graph_parameters(g), p, NULL),
                     SS_OK);
    int clients = 0;
    double v100 = 0, k80 = 0;
    for (int i = 0; i < 40; i++) {
        clients += !p[i].link.accepts;
        if (!strcmp(p[i].name, "peer06"))
            v100 = p[i].mb_s;
        if (!strcmp(p[i].name, "peer10"))
            k80 = p[i].mb_s;
    }
    assert_int_equal(clients, 12);
    assert_true(k80 > 2 * v100 && v100 > 0);
    assert_true(fabs(p[0].link.up_Bps - 20e6 / 8) < 1 && fabs(p[0].link.latency_s - 0.0385) < 1e-9);
    ss_swarm_config c;
    ss_swarm_config_default(&c);
    c.vector_bytes = 4.0 * (double)ss_graph_parameters(g);
    c.duration_s = 600;
    ss_swarm_result r;
    assert_int_equal(ss_swarm_run(p, 40, &c, &r, NULL), SS_OK);
    assert_true(r.rounds > 0 && r.samples_per_s > 0);
    for (int i = 0; i < 40; i++)
        if (!p[i].link.accepts)
            assert_true(r.peers[i].share == 0);
    ss_swarm_result_free(&r);
    c.averaging = SS_AVG_RING;
    assert_int_equal(ss_swarm_run(p, 40, &c, &r, NULL), SS_OK);
    ss_swarm_result_free(&r);
    /* a machine with a device that is no peer is refused */
    ss_machine *dgx = NULL;
    snprintf(path, sizeof path, "%s/topologies/dgx-a100.json", getenv("SS_SOURCE_DIR"));
    assert_int_equal(ss_machine_load(path, &dgx, NULL), SS_OK);
    ss_costmodel *cm2 = ss_cost_new(dgx);
    ss_swarm_peer q[64];
    ss_diag d = {0};
    assert_int_equal(ss_swarm_peers_from_machine(g, dgx, cm2, 1, q, &d), SS_ERR_INVALID);
    assert_non_null(strstr(d.msg, "not an internet peer"));
    ss_cost_free(cm2), ss_machine_free(dgx);
    ss_cost_free(cm), ss_graph_free(g), ss_machine_free(m);
}

static void test_refusals(void **state)
{
    (void)state;
    ss_swarm_peer p[3];
    equal_peers(p, 3, 0.1, 1e6);
    ss_swarm_config c;
    ss_swarm_config_default(&c);
    ss_swarm_result r;
    ss_diag d = {0};
    p[0].link.accepts = p[1].link.accepts = 0;
    c.averaging = SS_AVG_RING;
    assert_int_equal(ss_swarm_run(p, 3, &c, &r, &d), SS_ERR_INFEASIBLE);
    assert_non_null(strstr(d.msg, "ring"));
    c.averaging = SS_AVG_LP;
    c.target_batch = 0;
    ss_diag_init(&d);
    assert_int_equal(ss_swarm_run(p, 3, &c, &r, &d), SS_ERR_INVALID);
    c.target_batch = 64;
    p[2].mb_s = 0;
    ss_diag_init(&d);
    assert_int_equal(ss_swarm_run(p, 3, &c, &r, &d), SS_ERR_INVALID);
    assert_non_null(strstr(d.msg, "\"p2\""));
}

/* ss_swarm_sweep against ss_swarm_run on the same peers, bandwidths and
 * target; the first two peers refuse connections, so two peers alone are
 * an infeasible point (nobody can reduce). */
static void test_sweep(void **state)
{
    (void)state;
    ss_swarm_peer p[6];
    equal_peers(p, 6, 0.3, 2e6);
    for (int i = 0; i < 6; i++)
        p[i].link.up_Bps = (1 + i) * 1e6, p[i].mb_s = 0.2 + 0.1 * i;
    p[0].link.accepts = p[1].link.accepts = 0;
    ss_swarm_config c;
    ss_swarm_config_default(&c);
    c.vector_bytes = 20e6;
    c.duration_s = 900;
    c.leave_per_h = 2, c.join_per_h = 4;
    int counts[3] = {2, 4, 6};
    double scales[2] = {0.5, 3};
    int64_t targets[2] = {64, 512};
    ss_swarm_point pt[12];
    assert_int_equal(ss_swarm_sweep(p, 6, &c, counts, 3, scales, 2, targets, 2, pt, NULL), SS_OK);
    for (int k = 0; k < 12; k++) {
        int a = k / 4, b = k / 2 % 2, t = k % 2;
        assert_int_equal(pt[k].n_peers, counts[a]);
        assert_true(pt[k].bw_scale == scales[b]);
        assert_int_equal(pt[k].target_batch, targets[t]);
        if (a == 0) {
            assert_false(pt[k].feasible);
            assert_non_null(strstr(pt[k].why, "accepts connections"));
            continue;
        }
        ss_swarm_peer q[6];
        for (int i = 0; i < counts[a]; i++) {
            q[i] = p[i];
            q[i].link.up_Bps *= scales[b];
            q[i].link.down_Bps *= scales[b];
        }
        ss_swarm_config cc = c;
        cc.target_batch = targets[t];
        ss_swarm_result r;
        assert_int_equal(ss_swarm_run(q, counts[a], &cc, &r, NULL), SS_OK);
        assert_true(pt[k].feasible);
        assert_true(pt[k].samples_per_s == r.samples_per_s);
        assert_true(pt[k].step_time_s == r.step_time_s);
        assert_true(pt[k].avg_time_s == r.avg_time_s);
        assert_true(pt[k].lost_samples == r.lost_samples);
        assert_int_equal(pt[k].rounds, r.rounds);
        assert_int_equal(pt[k].aborts, r.aborts);
        assert_true(pt[k].samples_per_s > 0);
        ss_swarm_result_free(&r);
    }
    /* More bandwidth never hurts here (same seed, same churn draws). */
    assert_true(pt[11].samples_per_s > pt[9].samples_per_s);
    ss_diag d;
    ss_diag_init(&d);
    counts[0] = 7;
    assert_int_equal(ss_swarm_sweep(p, 6, &c, counts, 1, scales, 2, targets, 2, pt, &d),
                     SS_ERR_INVALID);
    assert_non_null(strstr(d.msg, "peer count 7"));
    ss_diag_init(&d);
    counts[0] = 6, scales[0] = 0;
    assert_int_equal(ss_swarm_sweep(p, 6, &c, counts, 1, scales, 1, targets, 2, pt, &d),
                     SS_ERR_INVALID);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_closed_form),  cmocka_unit_test(test_slow_peer_window),
        cmocka_unit_test(test_churn),        cmocka_unit_test(test_local_sgd),
        cmocka_unit_test(test_volunteers40), cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_sweep),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
