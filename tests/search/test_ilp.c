/*
 * test_ilp.c — the sharding ILP (search/ilp.h) against brute force: on
 * random problems of at most 6 nodes (operators) with up to 6 choices each
 * (the candidate shardings of an operator on a mesh of at most 8 devices),
 * random edges and a memory limit, CBC's choice has the objective of the
 * best choice vector enumerated exhaustively, fits the limit, and says
 * infeasible exactly when no vector fits. The presolve's reductions (fixed
 * nodes, parallel edges, series elimination of nodes whose memory does not
 * depend on the choice) are covered: 40% of the nodes have such memory.
 */
#include "testutil.h"
#include "search/ilp.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAXN 6
#define MAXC 6
#define MAXE 12

typedef struct rp {
    int n, nc[MAXN], ne, eu[MAXE], ev[MAXE];
    double cost[MAXN][MAXC], mem[MAXN][MAXC], ecost[MAXE][MAXC * MAXC];
    const double *cp[MAXN], *mp[MAXN], *ep[MAXE];
    ss_ilp_problem p;
} rp;

static uint64_t rng = 88172645463325252ull;
static double rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (double)(rng >> 11) / 9007199254740992.0;
}

static void make(rp *r, int with_mem)
{
    memset(r, 0, sizeof *r);
    r->n = 1 + (int)(rnd() * MAXN);
    for (int v = 0; v < r->n; v++) {
        r->nc[v] = 1 + (int)(rnd() * MAXC);
        int constant = rnd() < 0.4; /* eliminated by the presolve when of degree <= 2 */
        for (int s = 0; s < r->nc[v]; s++) {
            r->cost[v][s] = floor(rnd() * 1000);
            r->mem[v][s] = constant && s ? r->mem[v][0] : floor(rnd() * 100);
        }
        r->cp[v] = r->cost[v];
        r->mp[v] = r->mem[v];
    }
    for (int e = 0; e < MAXE && r->n > 1; e++) {
        if (rnd() < 0.4)
            continue;
        int u = (int)(rnd() * r->n), v = (int)(rnd() * r->n);
        if (u == v)
            continue;
        r->eu[r->ne] = u;
        r->ev[r->ne] = v;
        for (int k = 0; k < r->nc[u] * r->nc[v]; k++)
            r->ecost[r->ne][k] = rnd() < 0.3 ? 0 : floor(rnd() * 800);
        r->ep[r->ne] = r->ecost[r->ne];
        r->ne++;
    }
    r->p.n_nodes = r->n;
    r->p.n_choices = r->nc;
    r->p.node_cost = r->cp;
    r->p.node_mem = with_mem ? r->mp : NULL;
    r->p.mem_limit = floor(rnd() * 60 * r->n);
    r->p.n_edges = r->ne;
    r->p.edge_u = r->eu;
    r->p.edge_v = r->ev;
    r->p.edge_cost = r->ep;
}

/* Exhaustive minimum over every choice vector within the memory limit;
 * HUGE_VAL when none fits. */
static double brute(const ss_ilp_problem *p)
{
    int c[MAXN] = {0};
    double best = HUGE_VAL;
    for (;;) {
        double w, obj = ss_ilp_objective(p, c, &w);
        if ((!p->node_mem || w <= p->mem_limit) && obj < best)
            best = obj;
        int v = 0;
        while (v < p->n_nodes && ++c[v] == p->n_choices[v])
            c[v++] = 0;
        if (v == p->n_nodes)
            return best;
    }
}

static void test_random_vs_brute(void **state)
{
    (void)state;
    int feasible = 0, infeasible = 0;
    for (int it = 0; it < 600; it++) {
        rp r;
        make(&r, it % 3 != 0);
        double want = brute(&r.p);
        int choice[MAXN];
        double obj = -1;
        ss_ilp_stats st = {0};
        ss_diag d;
        ss_diag_init(&d);
        ss_status s = ss_ilp_solve(&r.p, 10, choice, &obj, &st, &d);
        if (want == HUGE_VAL) {
            assert_int_equal(s, SS_ERR_INFEASIBLE);
            infeasible++;
            continue;
        }
        if (s != SS_OK)
            fail_msg("problem %d: %s (brute force %.0f)", it, d.msg, want);
        feasible++;
        double w, again = ss_ilp_objective(&r.p, choice, &w);
        assert_true(fabs(again - obj) < 1e-9);
        if (fabs(obj - want) > 1e-6)
            fail_msg("problem %d: ILP %.3f, brute force %.3f", it, obj, want);
        if (r.p.node_mem)
            assert_true(w <= r.p.mem_limit);
        assert_true(st.optimal);
        assert_false(st.time_limited);
    }
    assert_true(feasible > 100);
    assert_true(infeasible > 10);
}

static void test_invalid(void **state)
{
    (void)state;
    int nc[2] = {2, 0}, eu[1] = {0}, ev[1] = {0}, choice[2] = {7, 7};
    double c0[2] = {1, 2}, c1[1] = {0}, e0[4] = {0};
    const double *cp[2] = {c0, c1}, *ep[1] = {e0};
    ss_ilp_problem p = {.n_nodes = 2, .n_choices = nc, .node_cost = cp, .n_edges = 0};
    ss_diag d;
    ss_diag_init(&d);
    assert_int_equal(ss_ilp_solve(&p, 0, choice, NULL, NULL, &d), SS_ERR_INVALID);
    assert_non_null(strstr(d.msg, "node 1 has no choice"));
    nc[1] = 2;
    p.n_edges = 1;
    p.edge_u = eu;
    p.edge_v = ev;
    p.edge_cost = ep;
    ss_diag_init(&d);
    assert_int_equal(ss_ilp_solve(&p, 0, choice, NULL, NULL, &d), SS_ERR_INVALID);
    assert_non_null(strstr(d.msg, "edge 0"));
    assert_int_equal(choice[0], 7);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random_vs_brute),
        cmocka_unit_test(test_invalid),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
