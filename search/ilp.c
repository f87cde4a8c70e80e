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

#include "search/coin.h"

#include <math.h>
#include <pthread.h>
#include <string.h>
#include <time.h>

/* One CBC solve at a time in the process (search/ilp.h, "Threads"). */
static pthread_mutex_t solve_lock = PTHREAD_MUTEX_INITIALIZER;

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
    if (!p || p->n_nodes < 0 || p->n_edges < 0 ||
        (p->n_nodes && (!p->n_choices || !p->node_cost)) ||
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

/* ------------------------------------------------------------ presolve
 *
 * Exact reductions before CBC sees the problem:
 *   - a node with one choice is a constant: its edges become node costs of
 *     its neighbours, its memory comes off the limit;
 *   - parallel edges between two nodes are summed into one;
 *   - a node whose memory is the same for every choice (or when there is no
 *     memory constraint) with at most two neighbours is eliminated: with
 *     one neighbour u, u's cost of choice s gains min_t (c_v[t] + r(s, t));
 *     with two, u and w, an edge u-w of cost min_t (r_uv(s, t) + c_v[t] +
 *     r_vw(t, q)) replaces both (series reduction); its memory (the same
 *     for every choice) comes off the limit, and its choice is recovered
 *     from the argmin table once its neighbours are chosen.
 * The reduced problem has the same optimum; operator chains of views and
 * elementwise ops between two matrix products shrink to one edge. Then
 * dominated choices (no cheaper in cost, memory and on every edge than
 * another) get no column: an exact cut of the model CBC sees.
 */
typedef struct wedge {
    int a, b;       /* nodes; m[s * n_b + t] for a at s, b at t */
    double *m;
    int alive;
} wedge;

typedef struct elim {
    int v, u, w;    /* eliminated node; its neighbours (-1: none) */
    int *arg;       /* argmin: [1], [n_u] or [n_u * n_w] entries */
} elim;

typedef struct work {
    const ss_ilp_problem *p;
    int n;
    double *cost;   /* per node's choices, from off[] */
    int *off, *alive;
    wedge *e;
    int ne, cap_e;
    elim *el;
    int nel, cap_el;
    double w_fixed; /* memory taken off the limit */
} work;

static int nch(const work *W, int v)
{
    return W->p->n_choices[v];
}

/* Cost of edge e with node x at choice sx and the other end at sy. */
static double ecost(const work *W, const wedge *e, int x, int sx, int sy)
{
    return e->a == x ? e->m[sx * nch(W, e->b) + sy] : e->m[sy * nch(W, e->b) + sx];
}

static int add_edge(work *W, int a, int b, double *m)
{
    if (ss_grow((void **)&W->e, &W->cap_e, W->ne + 1, sizeof *W->e))
        return -1;
    W->e[W->ne++] = (wedge){a, b, m, 1};
    return 0;
}

static int const_mem(const work *W, int v)
{
    if (!W->p->node_mem)
        return 1;
    for (int s = 1; s < nch(W, v); s++)
        if (W->p->node_mem[v][s] != W->p->node_mem[v][0])
            return 0;
    return 1;
}

static int presolve(work *W)
{
    const ss_ilp_problem *p = W->p;
    for (int e = 0; e < p->n_edges; e++) {
        int a = p->edge_u[e], b = p->edge_v[e];
        size_t k = (size_t)nch(W, a) * (size_t)nch(W, b);
        double *m = ss_malloc(k * sizeof *m);
        if (!m || add_edge(W, a, b, m)) {
            ss_free(m);
            return -1;
        }
        memcpy(m, p->edge_cost[e], k * sizeof *m);
    }
    for (int changed = 1; changed;) {
        changed = 0;
        /* fixed nodes */
        for (int v = 0; v < W->n; v++) {
            if (!W->alive[v] || nch(W, v) > 1)
                continue;
            for (int k = 0; k < W->ne; k++) {
                wedge *e = &W->e[k];
                if (!e->alive || (e->a != v && e->b != v))
                    continue;
                int x = e->a == v ? e->b : e->a;
                for (int s = 0; s < nch(W, x); s++)
                    W->cost[W->off[x] + s] += ecost(W, e, x, s, 0);
                e->alive = 0;
            }
            W->alive[v] = 0;
            if (p->node_mem)
                W->w_fixed += p->node_mem[v][0];
            if (ss_grow((void **)&W->el, &W->cap_el, W->nel + 1, sizeof *W->el))
                return -1;
            int *arg = ss_calloc(1, sizeof *arg);
            if (!arg)
                return -1;
            W->el[W->nel++] = (elim){v, -1, -1, arg};
            changed = 1;
        }
        /* parallel edges */
        for (int i = 0; i < W->ne; i++) {
            wedge *e = &W->e[i];
            for (int j = i + 1; e->alive && j < W->ne; j++) {
                wedge *f = &W->e[j];
                int same = (f->a == e->a && f->b == e->b) || (f->a == e->b && f->b == e->a);
                if (!f->alive || !same)
                    continue;
                for (int s = 0; s < nch(W, e->a); s++)
                    for (int t = 0; t < nch(W, e->b); t++)
                        e->m[s * nch(W, e->b) + t] += ecost(W, f, e->a, s, t);
                f->alive = 0;
                changed = 1;
            }
        }
        /* memory-constant nodes of degree <= 2 */
        for (int v = 0; v < W->n; v++) {
            if (!W->alive[v] || !const_mem(W, v))
                continue;
            int nb[3], ed[3], deg = 0;
            for (int k = 0; k < W->ne && deg < 3; k++) {
                wedge *e = &W->e[k];
                if (e->alive && (e->a == v || e->b == v)) {
                    nb[deg] = e->a == v ? e->b : e->a;
                    ed[deg++] = k;
                }
            }
            if (deg > 2 || (deg == 2 && nb[0] == nb[1]))
                continue;
            int nv = nch(W, v), nu = deg ? nch(W, nb[0]) : 1, nw = deg == 2 ? nch(W, nb[1]) : 1;
            int *arg = ss_calloc((size_t)nu * (size_t)nw, sizeof *arg);
            double *m = deg == 2 ? ss_malloc((size_t)nu * (size_t)nw * sizeof *m) : NULL;
            if (!arg || (deg == 2 && !m) ||
                ss_grow((void **)&W->el, &W->cap_el, W->nel + 1, sizeof *W->el)) {
                ss_free(arg);
                ss_free(m);
                return -1;
            }
            for (int s = 0; s < nu; s++)
                for (int q = 0; q < nw; q++) {
                    double best = HUGE_VAL;
                    int bt = 0;
                    for (int t = 0; t < nv; t++) {
                        double c = W->cost[W->off[v] + t];
                        if (deg >= 1)
                            c += ecost(W, &W->e[ed[0]], v, t, s);
                        if (deg == 2)
                            c += ecost(W, &W->e[ed[1]], v, t, q);
                        if (c < best) {
                            best = c;
                            bt = t;
                        }
                    }
                    arg[s * nw + q] = bt;
                    if (deg == 0)
                        W->cost[W->off[v]] = best; /* kept for the objective's constant */
                    else if (deg == 1)
                        W->cost[W->off[nb[0]] + s] += best;
                    else
                        m[s * nw + q] = best;
                }
            for (int k = 0; k < deg; k++)
                W->e[ed[k]].alive = 0;
            if (deg == 2 && add_edge(W, nb[0], nb[1], m)) {
                ss_free(arg);
                ss_free(m);
                return -1;
            }
            W->alive[v] = 0;
            if (p->node_mem)
                W->w_fixed += p->node_mem[v][0];
            W->el[W->nel++] = (elim){v, deg ? nb[0] : -1, deg == 2 ? nb[1] : -1, arg};
            changed = 1;
        }
    }
    return 0;
}

/* Dominated choices (exact): choice s of a node is dropped when another
 * choice s' costs no more, needs no more memory and no more on every edge
 * for every choice of the other end (of equal ones, the first is kept).
 * dead[off[v] + s] = 1 for the dropped. */
static void dominance(const work *W, char *dead)
{
    const ss_ilp_problem *p = W->p;
    for (int v = 0; v < W->n; v++) {
        if (!W->alive[v])
            continue;
        int nv = nch(W, v);
        for (int s = 0; s < nv; s++)
            for (int s2 = 0; s2 < nv && !dead[W->off[v] + s]; s2++) {
                if (s2 == s || dead[W->off[v] + s2])
                    continue;
                double c = W->cost[W->off[v] + s], c2 = W->cost[W->off[v] + s2];
                int le = c2 <= c, eq = c2 == c;
                if (le && p->node_mem) {
                    double w = p->node_mem[v][s], w2 = p->node_mem[v][s2];
                    le = w2 <= w;
                    eq = eq && w2 == w;
                }
                for (int k = 0; le && k < W->ne; k++) {
                    const wedge *e = &W->e[k];
                    if (!e->alive || (e->a != v && e->b != v))
                        continue;
                    int x = e->a == v ? e->b : e->a;
                    for (int t = 0; le && t < nch(W, x); t++) {
                        double r = ecost(W, e, v, s, t), r2 = ecost(W, e, v, s2, t);
                        le = r2 <= r;
                        eq = eq && r2 == r;
                    }
                }
                if (le && (!eq || s2 < s))
                    dead[W->off[v] + s] = 1;
            }
    }
}

/* Choices of the eliminated nodes, last eliminated first. */
static void recover(const work *W, int *pick)
{
    for (int k = W->nel - 1; k >= 0; k--) {
        const elim *x = &W->el[k];
        int nw = x->w >= 0 ? nch(W, x->w) : 1;
        int s = x->u >= 0 ? pick[x->u] : 0, q = x->w >= 0 ? pick[x->w] : 0;
        pick[x->v] = x->arg[s * nw + q];
    }
}

static void work_free(work *W)
{
    for (int k = 0; k < W->ne; k++)
        ss_free(W->e[k].m);
    for (int k = 0; k < W->nel; k++)
        ss_free(W->el[k].arg);
    ss_free(W->e);
    ss_free(W->el);
    ss_free(W->cost);
    ss_free(W->off);
    ss_free(W->alive);
}

/* The CBC model of what the presolve left. */
typedef struct model {
    const ss_coin_cbc *api; /* CBC's functions, opened on first use */
    Cbc_Model *cbc;
    int n_cols, n_rows;
} model;

static void add_col(model *M, double obj, int integer)
{
    M->api->Cbc_addCol(M->cbc, "", 0.0, 1.0, obj, (char)integer, 0, NULL, NULL);
    M->n_cols++;
}

static void add_row(model *M, int nz, const int *cols, const double *coefs, char sense, double rhs)
{
    M->api->Cbc_addRow(M->cbc, "", nz, cols, coefs, sense, rhs);
    M->n_rows++;
}

ss_status ss_ilp_solve(const ss_ilp_problem *p, double time_limit_s, int *choice,
                       double *objective, ss_ilp_stats *stats, ss_diag *d)
{
    return ss_ilp_solve_bounded(p, time_limit_s, 0, choice, objective, stats, d);
}

ss_status ss_ilp_solve_bounded(const ss_ilp_problem *p, double time_limit_s, int max_nodes,
                               int *choice, double *objective, ss_ilp_stats *stats, ss_diag *d)
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
    work W = {0};
    W.p = p;
    W.n = n;
    W.cost = ss_calloc((size_t)total + 1, sizeof *W.cost);
    W.off = ss_calloc((size_t)n + 1, sizeof *W.off);
    W.alive = ss_calloc((size_t)n + 1, sizeof *W.alive);
    int *col0 = ss_calloc((size_t)n + 1, sizeof *col0);
    int *pick = ss_calloc((size_t)n + 1, sizeof *pick);
    int *cols = ss_calloc((size_t)maxc * maxc + 1, sizeof *cols);
    int *xcol = ss_calloc((size_t)total + 1, sizeof *xcol);
    int *ycol = ss_calloc((size_t)maxc * maxc + 1, sizeof *ycol);
    char *dead = ss_calloc((size_t)total + 1, sizeof *dead);
    double *coefs = ss_calloc((size_t)maxc * maxc + 1, sizeof *coefs);
    model M = {0};
    int time_limited = 0, node_limited = 0, optimal = 1, n_free = 0;
    double wait_s = 0, cbc_s = 0;
    if (!W.cost || !W.off || !W.alive || !col0 || !pick || !cols || !coefs || !xcol || !ycol ||
        !dead) {
        st = ss_diag_set(d, SS_ERR_NOMEM, "out of memory");
        goto out;
    }
    for (int v = 0, o = 0; v < n; v++) {
        W.off[v] = o;
        W.alive[v] = 1;
        memcpy(W.cost + o, p->node_cost[v], (size_t)p->n_choices[v] * sizeof *W.cost);
        o += p->n_choices[v];
    }
    if (presolve(&W)) {
        st = ss_diag_set(d, SS_ERR_NOMEM, "out of memory");
        goto out;
    }
    for (int v = 0; v < n; v++)
        n_free += W.alive[v];
    if (p->node_mem && W.w_fixed > p->mem_limit) {
        st = ss_diag_set(d, SS_ERR_INFEASIBLE,
                         "ilp: the operators whose memory does not depend on their sharding "
                         "alone need %.3g bytes per device, over the limit of %.3g",
                         W.w_fixed, p->mem_limit);
        goto out;
    }
    if (n_free > 0) {
        if (!(M.api = ss_coin_cbc_open(d))) {
            st = SS_ERR_UNSUPPORTED;
            goto out;
        }
        M.cbc = M.api->Cbc_newModel();
        if (!M.cbc) {
            st = ss_diag_set(d, SS_ERR_NOMEM, "ilp: CBC could not create a model");
            goto out;
        }
        M.api->Cbc_setLogLevel(M.cbc, 0);
        if (time_limit_s > 0) { /* wall-clock time, not CBC's default CPU time */
            M.api->Cbc_setParameter(M.cbc, "timeMode", "elapsed");
            M.api->Cbc_setMaximumSeconds(M.cbc, time_limit_s);
        }
        if (max_nodes > 0)
            M.api->Cbc_setMaximumNodes(M.cbc, max_nodes);
        M.api->Cbc_setAllowableGap(M.cbc, 0.0);
        M.api->Cbc_setAllowableFractionGap(M.cbc, 0.0);
        M.api->Cbc_setParameter(M.cbc, "presolve", "off"); /* measured: 2.3x faster on layer ILPs */
        dominance(&W, dead);
        for (int v = 0; v < n; v++) {
            col0[v] = -1;
            if (!W.alive[v])
                continue;
            col0[v] = M.n_cols;
            for (int s = 0; s < p->n_choices[v]; s++) {
                xcol[W.off[v] + s] = -1;
                if (dead[W.off[v] + s])
                    continue;
                xcol[W.off[v] + s] = M.n_cols;
                add_col(&M, W.cost[W.off[v] + s], 1);
            }
        }
        for (int v = 0; v < n; v++) {
            if (col0[v] < 0)
                continue;
            int nz = 0;
            for (int s = 0; s < p->n_choices[v]; s++)
                if (xcol[W.off[v] + s] >= 0) {
                    cols[nz] = xcol[W.off[v] + s];
                    coefs[nz++] = 1.0;
                }
            add_row(&M, nz, cols, coefs, 'E', 1.0);
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
                for (int s = 0; col0[v] >= 0 && s < p->n_choices[v]; s++)
                    if (xcol[W.off[v] + s] >= 0) {
                        wi[nz] = xcol[W.off[v] + s];
                        wc[nz++] = p->node_mem[v][s];
                    }
            add_row(&M, nz, wi, wc, 'L', p->mem_limit - W.w_fixed);
            ss_free(wc);
            ss_free(wi);
        }
        for (int k = 0; k < W.ne; k++) {
            const wedge *e = &W.e[k];
            if (!e->alive)
                continue;
            int u = e->a, v = e->b, nu = p->n_choices[u], nv = p->n_choices[v];
            const int *xu = xcol + W.off[u], *xv = xcol + W.off[v];
            for (int q = 0; q < nu * nv; q++) { /* y columns of live pairs */
                ycol[q] = -1;
                if (xu[q / nv] >= 0 && xv[q % nv] >= 0) {
                    ycol[q] = M.n_cols;
                    add_col(&M, e->m[q], 0);
                }
            }
            for (int s = 0; s < nu; s++) { /* sum_t y[s][t] - x_u[s] = 0 */
                if (xu[s] < 0)
                    continue;
                int nz = 0;
                for (int t = 0; t < nv; t++)
                    if (ycol[s * nv + t] >= 0) {
                        cols[nz] = ycol[s * nv + t];
                        coefs[nz++] = 1.0;
                    }
                cols[nz] = xu[s];
                coefs[nz++] = -1.0;
                add_row(&M, nz, cols, coefs, 'E', 0.0);
            }
            for (int t = 0; t < nv; t++) { /* sum_s y[s][t] - x_v[t] = 0 */
                if (xv[t] < 0)
                    continue;
                int nz = 0;
                for (int s = 0; s < nu; s++)
                    if (ycol[s * nv + t] >= 0) {
                        cols[nz] = ycol[s * nv + t];
                        coefs[nz++] = 1.0;
                    }
                cols[nz] = xv[t];
                coefs[nz++] = -1.0;
                add_row(&M, nz, cols, coefs, 'E', 0.0);
            }
        }
        /* a getter flushes the columns and rows added into the model's
         * matrix (Cbc_solve would first): built here, outside the lock */
        M.api->Cbc_getNumElements(M.cbc);
        double w0 = now_s();
        pthread_mutex_lock(&solve_lock);
        wait_s = now_s() - w0;
        M.api->Cbc_solve(M.cbc);
        cbc_s = now_s() - w0 - wait_s;
        pthread_mutex_unlock(&solve_lock);
        const double *x = M.api->Cbc_getColSolution(M.cbc);
        int sec = M.api->Cbc_secondaryStatus(M.cbc);
        time_limited = sec == 4;
        node_limited = sec == 3;
        optimal = M.api->Cbc_isProvenOptimal(M.cbc);
        int found = x != NULL && (optimal || ((time_limited || node_limited) &&
                                              M.api->Cbc_numberSavedSolutions(M.cbc) > 0));
        for (int v = 0; found && v < n; v++) {
            if (col0[v] < 0)
                continue;
            int best = -1;
            for (int s = 0; s < p->n_choices[v]; s++) {
                int c = xcol[W.off[v] + s];
                if (c >= 0 && (best < 0 || x[c] > x[xcol[W.off[v] + best]]))
                    best = s;
            }
            if (best < 0 || x[xcol[W.off[v] + best]] < 0.5)
                found = 0;
            pick[v] = best < 0 ? 0 : best;
        }
        if (!found) {
            if (time_limited)
                st = ss_diag_set(d, SS_ERR_INFEASIBLE, "ilp: CBC found no solution within %.3g s",
                                 time_limit_s);
            else
                st = ss_diag_set(d, SS_ERR_INFEASIBLE,
                                 "ilp: no sharding choice fits the memory limit of %.3g bytes "
                                 "(CBC status %d/%d)",
                                 p->mem_limit, M.api->Cbc_status(M.cbc), sec);
            goto out;
        }
    }
    recover(&W, pick);
    double w;
    double obj = ss_ilp_objective(p, pick, &w);
    if (p->node_mem && w > p->mem_limit * (1 + 1e-9) + 1e-6) {
        st = ss_diag_set(d, SS_ERR_INFEASIBLE,
                         "ilp: no sharding choice fits the memory limit of %.3g bytes",
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
        stats->node_limited = node_limited;
    }
out:
    if (M.cbc)
        M.api->Cbc_deleteModel(M.cbc);
    work_free(&W);
    ss_free(col0);
    ss_free(pick);
    ss_free(cols);
    ss_free(coefs);
    ss_free(xcol);
    ss_free(ycol);
    ss_free(dead);
    if (stats) {
        stats->solve_s = now_s() - t0;
        stats->wait_s = wait_s;
        stats->cbc_s = cbc_s;
    }
    return st;
}
