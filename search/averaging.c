/*
 * averaging.c — the averaging round's load balancing (search/averaging.h):
 * the linear program solved by COIN-OR CLP (opened on first use,
 * search/coin.h), the equal split and the ring all-reduce's closed form.
 *
 * Invariant: the LP's rows are the model's per-peer time bounds divided by
 * V (so coefficients are O(1) and O(bandwidth / V), whatever the vector's
 * size), and the time returned is recomputed from the shares by
 * ss_averaging_time, not read from CLP's objective, so every method's time
 * comes from one formula.
 */
#include "search/averaging.h"

#include "search/coin.h"

#include <math.h>
#include <string.h>

const char *ss_avg_method_name(ss_avg_method m)
{
    switch (m) {
    case SS_AVG_LP: return "lp";
    case SS_AVG_EQUAL: return "equal";
    case SS_AVG_RING: return "ring";
    }
    return "?";
}

int ss_avg_method_parse(const char *s, ss_avg_method *out)
{
    static const ss_avg_method all[] = {SS_AVG_LP, SS_AVG_EQUAL, SS_AVG_RING};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (s && !strcmp(s, ss_avg_method_name(all[i]))) {
            *out = all[i];
            return 0;
        }
    return -1;
}

/* L_i: one latency to the farthest partner per phase, two phases. */
static double latency_term(const ss_avg_peer *p, int n, int i)
{
    double far = 0;
    for (int j = 0; j < n; j++)
        if (j != i && p[j].latency_s > far)
            far = p[j].latency_s;
    return 2.0 * (p[i].latency_s + far);
}

double ss_averaging_time(const ss_avg_peer *p, int n, double vector_bytes, const double *w)
{
    if (n <= 1)
        return 0;
    double worst = 0;
    for (int i = 0; i < n; i++) {
        double bytes = vector_bytes * (1.0 + (double)(n - 2) * w[i]);
        double t = fmax(bytes / p[i].up_Bps, bytes / p[i].down_Bps) + latency_term(p, n, i);
        if (t > worst)
            worst = t;
    }
    return worst;
}

/* The LP: columns w_0..w_{n-1}, xi, t; rows 0..2n-1 every peer's up and
 * down bounds (n-2) w_i - (b_i / V) xi <= -1 - b_i L_i / V, rows 2n..4n-1
 * (n-2) w_i - (b_i / V) t <= 0 for the peers accepting connections (free
 * rows for the others), row 4n sum w = 1. Stage one minimises xi; when a
 * slow peer's own upload V / b_i sets xi, many splits reach it, so stage
 * two keeps xi at its optimum and minimises t, the largest time a peer
 * spends on its part: shares proportional to bandwidth where xi allows
 * (the fastest peers reduce the largest parts). */
static ss_status solve_lp(const ss_avg_peer *p, int n, double V, double *share, ss_diag *d)
{
    int ncol = n + 2, nrow = 4 * n + 1, X = n, T = n + 1;
    int nnz = 5 * n /* w: four bound rows and the sum */ + 4 * n /* xi, t */;
    CoinBigIndex *start = ss_calloc((size_t)ncol + 1, sizeof *start);
    int *index = ss_calloc((size_t)nnz, sizeof *index);
    double *value = ss_calloc((size_t)nnz, sizeof *value);
    double *collb = ss_calloc((size_t)ncol, sizeof *collb);
    double *colub = ss_calloc((size_t)ncol, sizeof *colub);
    double *obj = ss_calloc((size_t)ncol, sizeof *obj);
    double *rowlb = ss_calloc((size_t)nrow, sizeof *rowlb);
    double *rowub = ss_calloc((size_t)nrow, sizeof *rowub);
    ss_status st = SS_OK;
    Clp_Simplex *clp = NULL;
    const ss_coin_clp *api = NULL;
    if (!start || !index || !value || !collb || !colub || !obj || !rowlb || !rowub) {
        st = ss_diag_set(d, SS_ERR_NOMEM, "averaging: out of memory for the LP of %d peers", n);
        goto out;
    }
    int k = 0;
    for (int i = 0; i < n; i++) {
        start[i] = k;
        for (int r = 0; r < 4; r++)
            index[k] = 2 * (r / 2) * n + 2 * i + r % 2, value[k++] = (double)(n - 2);
        index[k] = 4 * n, value[k++] = 1.0;
        collb[i] = 0;
        colub[i] = p[i].accepts ? 1.0 : 0.0;
    }
    for (int c = 0; c < 2; c++) { /* xi: rows 0..2n-1, t: rows 2n..4n-1 */
        start[n + c] = k;
        for (int i = 0; i < n; i++) {
            index[k] = 2 * c * n + 2 * i, value[k++] = -p[i].up_Bps / V;
            index[k] = 2 * c * n + 2 * i + 1, value[k++] = -p[i].down_Bps / V;
        }
        collb[n + c] = 0;
        colub[n + c] = 1e30;
    }
    start[ncol] = k;
    obj[X] = 1.0;
    for (int i = 0; i < n; i++) {
        double L = latency_term(p, n, i);
        for (int c = 0; c < 2; c++) {
            int r0 = 2 * c * n + 2 * i;
            rowlb[r0] = rowlb[r0 + 1] = -1e30;
            rowub[r0] = c ? (p[i].accepts ? 0 : 1e30) : -1.0 - p[i].up_Bps * L / V;
            rowub[r0 + 1] = c ? (p[i].accepts ? 0 : 1e30) : -1.0 - p[i].down_Bps * L / V;
        }
    }
    rowlb[4 * n] = rowub[4 * n] = 1.0;

    if (!(api = ss_coin_clp_open(d))) {
        st = SS_ERR_UNSUPPORTED;
        goto out;
    }
    clp = api->Clp_newModel();
    if (!clp) {
        st = ss_diag_set(d, SS_ERR_NOMEM, "averaging: CLP could not create a model");
        goto out;
    }
    api->Clp_setLogLevel(clp, 0);
    api->Clp_loadProblem(clp, ncol, nrow, start, index, value, collb, colub, obj, rowlb, rowub);
    api->Clp_dual(clp, 0);
    if (api->Clp_status(clp) == 0) {
        colub[X] = api->Clp_getColSolution(clp)[X] * (1 + 1e-9) + 1e-12;
        obj[X] = 0, obj[T] = 1.0;
        api->Clp_chgColumnUpper(clp, colub);
        api->Clp_chgObjCoefficients(clp, obj);
        api->Clp_primal(clp, 0);
    }
    if (api->Clp_status(clp) != 0) {
        st = ss_diag_set(d, SS_ERR_INFEASIBLE,
                         "averaging: CLP found no optimum for %d peers (status %d)", n,
                         api->Clp_status(clp));
    } else {
        const double *x = api->Clp_getColSolution(clp);
        double sum = 0;
        for (int i = 0; i < n; i++) {
            share[i] = p[i].accepts && x[i] > 0 ? x[i] : 0.0;
            sum += share[i];
        }
        for (int i = 0; i < n; i++) /* exact sum 1 after CLP's tolerances */
            share[i] /= sum;
    }
out:
    if (clp)
        api->Clp_deleteModel(clp);
    ss_free(start), ss_free(index), ss_free(value), ss_free(collb), ss_free(colub);
    ss_free(obj), ss_free(rowlb), ss_free(rowub);
    return st;
}

static double ring_time(const ss_avg_peer *p, int n, double V)
{
    double slow = INFINITY, pair = 0;
    for (int i = 0; i < n; i++)
        slow = fmin(slow, fmin(p[i].up_Bps, p[i].down_Bps));
    /* the ring's order is not modelled: a step pays the largest pair's latency */
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++)
            pair = fmax(pair, p[i].latency_s + p[j].latency_s);
    return 2.0 * (double)(n - 1) / (double)n * V / slow + 2.0 * (double)(n - 1) * pair;
}

ss_status ss_averaging_solve(ss_avg_method m, const ss_avg_peer *p, int n, double vector_bytes,
                             double *share, double *time_s, ss_diag *d)
{
    if (n < 1 || !p || !share || !time_s || !(vector_bytes >= 0))
        return ss_diag_set(d, SS_ERR_INVALID, "averaging: expected n >= 1 peers and V >= 0 "
                                              "bytes, got n = %d, V = %g",
                           n, vector_bytes);
    int acc = 0;
    for (int i = 0; i < n; i++) {
        if (!(p[i].up_Bps > 0) || !(p[i].down_Bps > 0) || !(p[i].latency_s >= 0))
            return ss_diag_set(d, SS_ERR_INVALID,
                               "averaging: peer %d: expected bandwidths > 0 and latency >= 0, "
                               "got up %g B/s, down %g B/s, latency %g s",
                               i, p[i].up_Bps, p[i].down_Bps, p[i].latency_s);
        acc += p[i].accepts != 0;
    }
    if (n == 1) {
        share[0] = 1.0;
        *time_s = 0;
        return SS_OK;
    }
    if (acc == 0)
        return ss_diag_set(d, SS_ERR_INFEASIBLE,
                           "averaging: none of the %d peers accepts connections, so none can "
                           "reduce a part",
                           n);
    if (m == SS_AVG_RING) {
        if (n - acc > acc)
            return ss_diag_set(d, SS_ERR_INFEASIBLE,
                               "averaging: a ring of %d peers needs a peer accepting "
                               "connections between any two client-only ones (%d client-only, "
                               "%d accepting)",
                               n, n - acc, acc);
        for (int i = 0; i < n; i++)
            share[i] = 1.0 / n;
        *time_s = ring_time(p, n, vector_bytes);
        return SS_OK;
    }
    if (m == SS_AVG_EQUAL || vector_bytes == 0) {
        for (int i = 0; i < n; i++)
            share[i] = p[i].accepts ? 1.0 / acc : 0.0;
    } else {
        ss_status st = solve_lp(p, n, vector_bytes, share, d);
        if (st)
            return st;
    }
    *time_s = ss_averaging_time(p, n, vector_bytes, share);
    return SS_OK;
}
