/*
 * ilp.c — the sharding ILP (search/ilp.h) built for and solved by COIN-OR
 * CBC through Cbc_C_Interface.h.
 *
 * Invariant: the choice returned minimises the objective of ss_ilp_objective
 * over every choice vector within the memory limit (up to CBC's optimality
 * tolerance), unless stats->time_limited says the limit stopped CBC; the
 * constants folded before the solve (fixed nodes, edges with a fixed end)
 * are added back, so *objective is that function's value of the choice.
 */
#include "search/ilp.h"

#include <Cbc_C_Interface.h>
#include <math.h>
#include <string.h>
#include <time.h>

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

double ss_ilp_objective(const ss_ilp_problem *p, const int *choice, double *mem)
{
    double obj = 0, w = 0;
    for (int v = 0; v < p->n_nodes; v++) {
        obj += p->node_cost[v][choice[v]];
        if (p->node_mem)
            w += p->node_mem[v][choice[v]];
    }
    for (int e = 0; e < p->n_edges; e++) {
        int u = p->edge_u[e], v = p->edge_v[e];
        obj += p->edge_cost[e][choice[u] * p->n_choices[v] + choice[v]];
    }
    if (mem)
        *mem = w;
    return obj;
}

static ss_status check(const ss_ilp_problem *p, ss_diag *d)
{
    if (!p || p->n_nodes < 0 || p->n_edges < 0 || (p->n_nodes && (!p->n_choices || !p->node_cost)) ||
        (p->n_edges && (!p->edge_u || !p->edge_v || !p->edge_cost)))
        return ss_diag_set(d, SS_ERR_INVALID, "ilp: malformed problem (missing arrays)");
    for (int v = 0; v < p->n_nodes; v++)
        if (p->n_choices[v] < 1)
            return ss_diag_set(d, SS_ERR_INVALID, "ilp: node %d has no choice", v);
    for (int e = 0; e < p->n_edges; e++) {
        int u = p->edge_u[e], v = p->edge_v[e];
        if (u < 0 || v < 0 || u >= p->n_nodes || v >= p->n_nodes || u == v)
            return ss_diag_set(d, SS_ERR_INVALID, "ilp: edge %d joins nodes %d and %d of %d", e,
                               u, v, p->n_nodes);
    }
    return SS_OK;
}

/* The CBC model of the free part; col0[v] = first x column of free node v
 * (-1 when fixed), cost[v][s] the node costs with fixed-end edges folded. */
typedef struct model {
    Cbc_Model *cbc;
    int n_cols, n_rows;
} model;

static void add_col(model *M, double obj, int integer)
{
    Cbc_addCol(M->cbc, "", 0.0, 1.0, obj, (char)integer, 0, NULL, NULL);
    M->n_cols++;
}

static void add_row(model *M, int nz, const int *cols, const double *coefs, char sense, double rhs)
{
    Cbc_addRow(M->cbc, "", nz, cols, coefs, sense, rhs);
    M->n_rows++;
}

ss_status ss_ilp_solve(const ss_ilp_problem *p, double time_limit_s, int *choice,
                       double *objective, ss_ilp_stats *stats, ss_diag *d)
{
    double t0 = now_s();
    ss_status st = check(p, d);
    if (st)
        return st;
    int n = p->n_nodes, total = 0, maxc = 1;
    for (int v = 0; v < n; v++) {
        total += p->n_choices[v];
        if (p->n_choices[v] > maxc)
            maxc = p->n_choices[v];
    }
    double *cost = ss_calloc((size_t)total + 1, sizeof *cost);
    int *off = ss_calloc((size_t)n + 1, sizeof *off);
    int *col0 = ss_calloc((size_t)n + 1, sizeof *col0);
    int *pick = ss_calloc((size_t)n + 1, sizeof *pick);
    int *cols = ss_calloc((size_t)maxc * maxc + 1, sizeof *cols);
    double *coefs = ss_calloc((size_t)maxc * maxc + 1, sizeof *coefs);
    model M = {0};
    if (!cost || !off || !col0 || !pick || !cols || !coefs) {
        st = ss_diag_set(d, SS_ERR_NOMEM, "out of memory");
        goto out;
    }
    double w_fixed = 0;
    for (int v = 0, o = 0; v < n; v++) {
        off[v] = o;
        memcpy(cost + o, p->node_cost[v], (size_t)p->n_choices[v] * sizeof *cost);
        o += p->n_choices[v];
        if (p->n_choices[v] == 1 && p->node_mem)
            w_fixed += p->node_mem[v][0];
    }
    /* Edges with a fixed end become node costs of the other end. */
    for (int e = 0; e < p->n_edges; e++) {
        int u = p->edge_u[e], v = p->edge_v[e], nu = p->n_choices[u], nv = p->n_choices[v];
        if (nu == 1 && nv > 1)
            for (int t = 0; t < nv; t++)
                cost[off[v] + t] += p->edge_cost[e][t];
        else if (nv == 1 && nu > 1)
            for (int s = 0; s < nu; s++)
                cost[off[u] + s] += p->edge_cost[e][s];
    }
    int n_free = 0;
    for (int v = 0; v < n; v++)
        n_free += p->n_choices[v] > 1;
    int time_limited = 0, optimal = 1;
    if (p->node_mem && w_fixed > p->mem_limit) {
        st = ss_diag_set(d, SS_ERR_INFEASIBLE,
                         "ilp: the operators with one sharding alone need %.3g bytes per device, "
                         "over the limit of %.3g",
                         w_fixed, p->mem_limit);
        goto out;
    }
    if (n_free > 0) {
        M.cbc = Cbc_newModel();
        if (!M.cbc) {
            st = ss_diag_set(d, SS_ERR_NOMEM, "ilp: CBC could not create a model");
            goto out;
        }
        Cbc_setLogLevel(M.cbc, 0);
        if (time_limit_s > 0)
            Cbc_setMaximumSeconds(M.cbc, time_limit_s);
        Cbc_setAllowableGap(M.cbc, 0.0);
        Cbc_setAllowableFractionGap(M.cbc, 0.0);
        for (int v = 0; v < n; v++) {
            col0[v] = -1;
            if (p->n_choices[v] == 1)
                continue;
            col0[v] = M.n_cols;
            for (int s = 0; s < p->n_choices[v]; s++)
                add_col(&M, cost[off[v] + s], 1);
        }
        for (int v = 0; v < n; v++) {
            if (col0[v] < 0)
                continue;
            for (int s = 0; s < p->n_choices[v]; s++) {
                cols[s] = col0[v] + s;
                coefs[s] = 1.0;
            }
            add_row(&M, p->n_choices[v], cols, coefs, 'E', 1.0);
        }
        if (p->node_mem) {
            int nz = 0;
            double *wc = ss_calloc((size_t)M.n_cols + 1, sizeof *wc);
            int *wi = ss_calloc((size_t)M.n_cols + 1, sizeof *wi);
            if (!wc || !wi) {
                ss_free(wc);
                ss_free(wi);
                st = ss_diag_set(d, SS_ERR_NOMEM, "out of memory");
                goto out;
            }
            for (int v = 0; v < n; v++)
                for (int s = 0; col0[v] >= 0 && s < p->n_choices[v]; s++) {
                    wi[nz] = col0[v] + s;
                    wc[nz++] = p->node_mem[v][s];
                }
            add_row(&M, nz, wi, wc, 'L', p->mem_limit - w_fixed);
            ss_free(wc);
            ss_free(wi);
        }
        for (int e = 0; e < p->n_edges; e++) {
            int u = p->edge_u[e], v = p->edge_v[e], nu = p->n_choices[u], nv = p->n_choices[v];
            if (nu == 1 || nv == 1)
                continue;
            int y0 = M.n_cols;
            for (int k = 0; k < nu * nv; k++)
                add_col(&M, p->edge_cost[e][k], 0);
            for (int s = 0; s < nu; s++) { /* sum_t y[s][t] - x_u[s] = 0 */
                for (int t = 0; t < nv; t++) {
                    cols[t] = y0 + s * nv + t;
                    coefs[t] = 1.0;
                }
                cols[nv] = col0[u] + s;
                coefs[nv] = -1.0;
                add_row(&M, nv + 1, cols, coefs, 'E', 0.0);
            }
            for (int t = 0; t < nv; t++) { /* sum_s y[s][t] - x_v[t] = 0 */
                for (int s = 0; s < nu; s++) {
                    cols[s] = y0 + s * nv + t;
                    coefs[s] = 1.0;
                }
                cols[nu] = col0[v] + t;
                coefs[nu] = -1.0;
                add_row(&M, nu + 1, cols, coefs, 'E', 0.0);
            }
        }
        Cbc_solve(M.cbc);
        const double *x = Cbc_getColSolution(M.cbc);
        int sec = Cbc_secondaryStatus(M.cbc);
        time_limited = sec == 4;
        optimal = Cbc_isProvenOptimal(M.cbc);
        int found = x != NULL && (optimal || (time_limited && Cbc_numberSavedSolutions(M.cbc) > 0));
        if (found)
            for (int v = 0; v < n; v++) {
                pick[v] = 0;
                if (col0[v] < 0)
                    continue;
                int best = -1;
                for (int s = 0; s < p->n_choices[v]; s++)
                    if (best < 0 || x[col0[v] + s] > x[col0[v] + best])
                        best = s;
                if (x[col0[v] + best] < 0.5)
                    found = 0;
                pick[v] = best;
            }
        if (!found) {
            if (time_limited)
                st = ss_diag_set(d, SS_ERR_INFEASIBLE, "ilp: CBC found no solution within %.3g s",
                                 time_limit_s);
            else
                st = ss_diag_set(d, SS_ERR_INFEASIBLE,
                                 "ilp: no sharding choice fits the memory limit of %.3g bytes "
                                 "(CBC status %d/%d)",
                                 p->mem_limit, Cbc_status(M.cbc), sec);
            goto out;
        }
    }
    double w;
    double obj = ss_ilp_objective(p, pick, &w);
    if (p->node_mem && w > p->mem_limit * (1 + 1e-9) + 1e-6) {
        st = ss_diag_set(d, SS_ERR_INFEASIBLE, "ilp: the choice needs %.3g bytes, over %.3g", w,
                         p->mem_limit);
        goto out;
    }
    memcpy(choice, pick, (size_t)n * sizeof *choice);
    if (objective)
        *objective = obj;
    if (stats) {
        stats->n_vars = M.n_cols;
        stats->n_rows = M.n_rows;
        stats->optimal = optimal;
        stats->time_limited = time_limited;
    }
out:
    if (M.cbc)
        Cbc_deleteModel(M.cbc);
    ss_free(cost);
    ss_free(off);
    ss_free(col0);
    ss_free(pick);
    ss_free(cols);
    ss_free(coefs);
    if (stats)
        stats->solve_s = now_s() - t0;
    return st;
}
