/*
 * ilp.h — one sharding per operator by integer linear programming (COIN-OR
 * CBC through its C interface), the auto-sharding patent's level 2.
 *
 * The problem is a graph of nodes (operators), each with a list of choices
 * (its candidate shardings on one device mesh):
 *   node v, choice s:  cost c[v][s] (compute, gradient sync: microseconds)
 *                      memory w[v][s] (bytes per device)
 *   edge e = (u, v):   cost r[e][s][t] when u takes s and v takes t
 *                      (resharding between u's output layout and v's input)
 * and asks for the choice per node minimising
 *   sum_v c[v][x_v] + sum_e r[e][x_u][x_v]   subject to  sum_v w[v][x_v] <= W.
 * Formulation: binary x[v][s] with sum_s x[v][s] = 1; per edge continuous
 * y[e][s][t] >= 0 with sum_t y[e][s][t] = x[u][s] and sum_s y[e][s][t] =
 * x[v][t] (for binary x the transportation polytope has one point, y = x_u
 * x_v^T, so y needs no integrality); minimise c.x + r.y. Nodes with one
 * choice are constants; edges between two such nodes are summed into the
 * objective's constant; an edge with one fixed end becomes node costs of the
 * other. CBC runs single-threaded with an elapsed-time limit, so a solve is
 * deterministic unless the limit stops it (ss_ilp_stats.time_limited).
 *
 * Threads: the functions may be called from several threads at once; the
 * model is built and read in parallel, but CBC's solve runs one at a time
 * in the process (Cbc_solve runs CbcMain1, which reads its arguments
 * through globals of libCbcSolver 2.10, CbcOrClpRead_mode among them, so two
 * solves at once could read each other's). The elapsed-time limit starts
 * when the solve does, after the wait (ss_ilp_stats.wait_s).
 */
#ifndef SS_SEARCH_ILP_H
#define SS_SEARCH_ILP_H

#include "simsearch.h"

typedef struct ss_ilp_problem {
    int n_nodes;
    const int *n_choices;            /* per node, >= 1 */
    const double *const *node_cost;  /* node_cost[v][s] */
    const double *const *node_mem;   /* node_mem[v][s] bytes; NULL: no memory constraint */
    double mem_limit;                /* W (bytes); used when node_mem is set */
    int n_edges;
    const int *edge_u, *edge_v;      /* node ids, u != v */
    const double *const *edge_cost;  /* edge_cost[e][s * n_choices[v] + t] */
} ss_ilp_problem;

typedef struct ss_ilp_stats {
    int n_vars, n_rows;              /* of the model given to CBC (0: none was needed) */
    double solve_s;                  /* wall time of the whole call */
    double wait_s;                   /* of it, waiting for another thread's CBC solve */
    double cbc_s;                    /* of it, in CBC's solve (one thread at a time) */
    int optimal;                     /* 1: CBC proved the choice optimal (or no ILP needed) */
    int time_limited;                /* 1: the time limit stopped CBC (the choice is its best) */
    int node_limited;                /* 1: the node bound stopped CBC (its best, deterministic) */
} ss_ilp_stats;

/* Solve p: choice[v] (n_nodes entries, caller's) receives node v's choice,
 * *objective (may be NULL) its cost. time_limit_s > 0 bounds CBC's elapsed
 * time (0: none). stats may be NULL. Errors: SS_ERR_INVALID (malformed
 * problem: a node without choices, an edge out of range or a loop),
 * SS_ERR_INFEASIBLE (no choice fits the memory limit, or the time limit
 * passed before CBC found any solution), SS_ERR_NOMEM; choice is then
 * unchanged. */
ss_status ss_ilp_solve(const ss_ilp_problem *p, double time_limit_s, int *choice,
                       double *objective, ss_ilp_stats *stats, ss_diag *d);

/* As ss_ilp_solve with a deterministic bound besides the time limit: CBC
 * explores at most max_nodes branch-and-bound nodes (<= 0: no bound) and
 * returns its best solution then (stats->optimal says whether it proved
 * it), the same one at any machine load; the time limit stays the safety
 * net (stats->time_limited when it fired). */
ss_status ss_ilp_solve_bounded(const ss_ilp_problem *p, double time_limit_s, int max_nodes,
                               int *choice, double *objective, ss_ilp_stats *stats, ss_diag *d);

/* The objective of a given choice vector (the same sum the ILP minimises);
 * *mem (may be NULL) receives its memory. */
double ss_ilp_objective(const ss_ilp_problem *p, const int *choice, double *mem);

#endif /* SS_SEARCH_ILP_H */
