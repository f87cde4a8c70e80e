/*
 * stages.c — the pipeline-cut dynamic program of search/stages.h.
 *
 * Invariant: ss_stage_solve returns a cut and a mode per stage whose
 * ss_stage_estimate is the minimum over every cut into S non-empty
 * contiguous stages and every assignment of modes to stages that fits the
 * memory limit (the bound scan visits every distinct stage time, under
 * every mode, up to the point where no larger bound can win).
 */
#include "search/stages.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static double at(const double *a, int i)
{
    return a ? a[i] : 0;
}

static int n_modes(const ss_stage_problem *p)
{
    return p->n_modes > 0 ? p->n_modes : 1;
}

/* Time and memory of stage s holding layers [j, i) in mode r, from prefix
 * sums. */
typedef struct pre {
    const ss_stage_problem *p;
    double *t[SS_STAGE_MAX_MODES], *a[SS_STAGE_MAX_MODES], *w; /* prefix sums, n + 1 entries */
} pre;

static double stage_time(const pre *P, int r, int s, int j, int i)
{
    double t = P->t[r][i] - P->t[r][j] + P->p->stage_us;
    if (s < P->p->stages - 1)
        t += at(P->p->send_us, i - 1);
    return t;
}

/* The least time over the K modes of stage s holding layers [j, i). */
static double least_time(const pre *P, int K, int s, int j, int i)
{
    double t = stage_time(P, 0, s, j, i);
    for (int r = 1; r < K; r++) {
        double u = stage_time(P, r, s, j, i);
        if (u < t)
            t = u;
    }
    return t;
}

static int fits(const pre *P, int r, int s, int j, int i)
{
    double lim = P->p->mem_limit;
    if (lim <= 0)
        return 1;
    int S = P->p->stages, M = P->p->microbatches;
    int inflight = S - s < M ? S - s : M;
    return P->w[i] - P->w[j] + inflight * (P->a[r][i] - P->a[r][j]) <= lim;
}

double ss_stage_estimate(const ss_stage_problem *p, const int *first, const int *mode,
                         double *peak_bytes)
{
    double sum = 0, mx = 0, peak = 0;
    for (int s = 0; s < p->stages; s++) {
        int r = mode ? mode[s] : 0;
        double t = p->stage_us, w = 0, a = 0;
        for (int i = first[s]; i < first[s + 1]; i++) {
            t += p->time_us[r][i];
            w += at(p->static_bytes, i);
            a += at(p->act_bytes[r], i);
        }
        if (s < p->stages - 1)
            t += at(p->send_us, first[s + 1] - 1);
        int inflight = p->stages - s < p->microbatches ? p->stages - s : p->microbatches;
        double mem = w + inflight * a;
        sum += t;
        if (t > mx)
            mx = t;
        if (mem > peak)
            peak = mem;
    }
    if (peak_bytes)
        *peak_bytes = peak;
    return sum + (p->microbatches - 1) * mx;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

ss_status ss_stage_solve(const ss_stage_problem *p, int *first, int *mode, double *t_us,
                         ss_diag *d)
{
    int K = p ? n_modes(p) : 0, have_times = p && K <= SS_STAGE_MAX_MODES;
    for (int r = 0; have_times && r < K; r++)
        have_times = p->time_us[r] != NULL;
    if (!have_times || p->n_layers < 1 || p->stages < 1 || p->stages > p->n_layers ||
        p->microbatches < 1)
        return ss_diag_set(d, SS_ERR_INVALID,
                           "stages: need 1 <= stages <= layers, micro-batches >= 1 and the "
                           "times of 1 to %d modes (got %d stages, %d layers, %d micro-batches, "
                           "%d modes)",
                           SS_STAGE_MAX_MODES, p ? p->stages : 0, p ? p->n_layers : 0,
                           p ? p->microbatches : 0, K);
    int n = p->n_layers, S = p->stages;
    size_t nn = (size_t)n + 1, cells = (size_t)(S + 1) * nn;
    pre P = {.p = p, .w = ss_calloc(nn, sizeof(double))};
    int ok = P.w != NULL;
    for (int r = 0; r < K; r++) {
        P.t[r] = ss_calloc(nn, sizeof(double));
        P.a[r] = ss_calloc(nn, sizeof(double));
        ok = ok && P.t[r] && P.a[r];
    }
    size_t ncand = (size_t)K * (size_t)n * nn; /* modes x intervals x {last stage or not} */
    double *cand = ss_calloc(ncand + 1, sizeof *cand);
    double *f = ss_calloc(cells, sizeof *f);
    int *from = ss_calloc(cells, sizeof *from), *from_mode = ss_calloc(cells, sizeof *from_mode);
    int *cut = ss_calloc((size_t)S + 1, sizeof *cut), *cmode = ss_calloc((size_t)S, sizeof *cmode);
    int *best_cut = ss_calloc((size_t)S + 1, sizeof *cut);
    int *best_mode = ss_calloc((size_t)S, sizeof *best_mode);
    ss_status st = SS_OK;
    if (!ok || !cand || !f || !from || !from_mode || !cut || !cmode || !best_cut || !best_mode) {
        st = ss_diag_set(d, SS_ERR_NOMEM, "out of memory");
        goto out;
    }
    double least_sum = S * p->stage_us;
    for (int i = 0; i < n; i++) {
        P.w[i + 1] = P.w[i] + at(p->static_bytes, i);
        double tmin = HUGE_VAL;
        for (int r = 0; r < K; r++) {
            P.t[r][i + 1] = P.t[r][i] + p->time_us[r][i];
            P.a[r][i + 1] = P.a[r][i] + at(p->act_bytes[r], i);
            if (p->time_us[r][i] < tmin)
                tmin = p->time_us[r][i];
        }
        least_sum += tmin;
    }
    size_t nc = 0;
    for (int r = 0; r < K; r++)
        for (int j = 0; j < n; j++)
            for (int i = j + 1; i <= n; i++) {
                cand[nc++] = P.t[r][i] - P.t[r][j] + p->stage_us;
                if (i < n)
                    cand[nc++] = P.t[r][i] - P.t[r][j] + p->stage_us + at(p->send_us, i - 1);
            }
    qsort(cand, nc, sizeof *cand, cmp_double);
    double best = HUGE_VAL;
    for (size_t k = 0; k < nc; k++) {
        double B = cand[k];
        if (k > 0 && B == cand[k - 1])
            continue;
        if (least_sum + (p->microbatches - 1) * B >= best)
            break;
        /* f[s][i]: least summed time of stages 0..s-1 over layers [0, i). */
        for (size_t q = 0; q < cells; q++)
            f[q] = HUGE_VAL;
        f[0] = 0;
        for (int s = 0; s < S; s++)
            for (int i = s + 1; i <= n - (S - 1 - s); i++) {
                size_t q = (size_t)(s + 1) * nn + (size_t)i;
                /* A stage's time only grows as it starts earlier (times are
                 * not negative), so the starts j whose least time over the
                 * modes is within B are a suffix [lo, i): skip the rest,
                 * which the loop below would skip one by one. */
                int lo = s, hi = i - 1;
                while (lo < hi) {
                    int mid = lo + (hi - lo) / 2;
                    if (least_time(&P, K, s, mid, i) > B)
                        lo = mid + 1;
                    else
                        hi = mid;
                }
                for (int j = lo; j < i; j++) {
                    double prev = f[(size_t)s * nn + (size_t)j];
                    if (prev == HUGE_VAL)
                        continue;
                    for (int r = 0; r < K; r++) {
                        double t = stage_time(&P, r, s, j, i);
                        if (t > B || prev + t >= f[q] || !fits(&P, r, s, j, i))
                            continue;
                        f[q] = prev + t;
                        from[q] = j;
                        from_mode[q] = r;
                    }
                }
            }
        if (f[(size_t)S * nn + (size_t)n] == HUGE_VAL)
            continue;
        cut[S] = n;
        for (int s = S; s > 0; s--) {
            size_t q = (size_t)s * nn + (size_t)cut[s];
            cut[s - 1] = from[q];
            cmode[s - 1] = from_mode[q];
        }
        double t = ss_stage_estimate(p, cut, cmode, NULL);
        if (t < best) {
            best = t;
            memcpy(best_cut, cut, (size_t)(S + 1) * sizeof *cut);
            memcpy(best_mode, cmode, (size_t)S * sizeof *cmode);
        }
    }
    if (best == HUGE_VAL) {
        st = ss_diag_set(d, SS_ERR_INFEASIBLE,
                         "stages: no cut of %d layers into %d stages fits %.3g bytes per device "
                         "(%d micro-batches, %d modes)",
                         n, S, p->mem_limit, p->microbatches, K);
        goto out;
    }
    memcpy(first, best_cut, (size_t)(S + 1) * sizeof *first);
    if (mode)
        memcpy(mode, best_mode, (size_t)S * sizeof *mode);
    if (t_us)
        *t_us = best;
out:
    ss_free(P.w);
    for (int r = 0; r < K && r < SS_STAGE_MAX_MODES; r++) {
        ss_free(P.t[r]);
        ss_free(P.a[r]);
    }
    ss_free(cand);
    ss_free(f);
    ss_free(from);
    ss_free(from_mode);
    ss_free(cut);
    ss_free(cmode);
    ss_free(best_cut);
    ss_free(best_mode);
    return st;
}
