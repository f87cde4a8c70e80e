/*
 * stages.c — the pipeline-cut dynamic program of search/stages.h.
 *
 * Invariant: ss_stage_solve returns a cut whose ss_stage_estimate is the
 * minimum over every cut into S non-empty contiguous stages that fits the
 * memory limit (the bound scan visits every distinct stage time up to the
 * point where no larger bound can win).
 */
#include "search/stages.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static double at(const double *a, int i)
{
    return a ? a[i] : 0;
}

/* Time and memory of stage s holding layers [j, i), from prefix sums. */
typedef struct pre {
    const ss_stage_problem *p;
    double *t, *w, *a; /* prefix sums, n + 1 entries */
} pre;

static double stage_time(const pre *P, int s, int j, int i)
{
    double t = P->t[i] - P->t[j] + P->p->stage_us;
    if (s < P->p->stages - 1)
        t += at(P->p->send_us, i - 1);
    return t;
}

static double stage_mem(const pre *P, int s, int j, int i)
{
    int S = P->p->stages, M = P->p->microbatches;
    int inflight = S - s < M ? S - s : M;
    return P->w[i] - P->w[j] + inflight * (P->a[i] - P->a[j]);
}

static int fits(const pre *P, int s, int j, int i)
{
    double lim = P->p->mem_limit;
    return lim <= 0 || stage_mem(P, s, j, i) <= lim;
}

double ss_stage_estimate(const ss_stage_problem *p, const int *first, double *peak_bytes)
{
    double sum = 0, mx = 0, peak = 0;
    for (int s = 0; s < p->stages; s++) {
        double t = p->stage_us, w = 0, a = 0;
        for (int i = first[s]; i < first[s + 1]; i++) {
            t += p->time_us[i];
            w += at(p->static_bytes, i);
            a += at(p->act_bytes, i);
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

ss_status ss_stage_solve(const ss_stage_problem *p, int *first, double *t_us, ss_diag *d)
{
    if (!p || !p->time_us || p->n_layers < 1 || p->stages < 1 || p->stages > p->n_layers ||
        p->microbatches < 1)
        return ss_diag_set(d, SS_ERR_INVALID,
                           "stages: need 1 <= stages <= layers and micro-batches >= 1 (got %d "
                           "stages, %d layers, %d micro-batches)",
                           p ? p->stages : 0, p ? p->n_layers : 0, p ? p->microbatches : 0);
    int n = p->n_layers, S = p->stages;
    size_t nn = (size_t)n + 1;
    pre P = {p, ss_calloc(nn, sizeof(double)), ss_calloc(nn, sizeof(double)),
             ss_calloc(nn, sizeof(double))};
    size_t ncand = (size_t)n * nn; /* intervals x {last stage or not} */
    double *cand = ss_calloc(ncand + 1, sizeof *cand);
    double *f = ss_calloc((size_t)(S + 1) * nn, sizeof *f);
    int *from = ss_calloc((size_t)(S + 1) * nn, sizeof *from);
    int *cut = ss_calloc((size_t)S + 1, sizeof *cut);
    int *best_cut = ss_calloc((size_t)S + 1, sizeof *cut);
    ss_status st = SS_OK;
    if (!P.t || !P.w || !P.a || !cand || !f || !from || !cut || !best_cut) {
        st = ss_diag_set(d, SS_ERR_NOMEM, "out of memory");
        goto out;
    }
    for (int i = 0; i < n; i++) {
        P.t[i + 1] = P.t[i] + p->time_us[i];
        P.w[i + 1] = P.w[i] + at(p->static_bytes, i);
        P.a[i + 1] = P.a[i] + at(p->act_bytes, i);
    }
    size_t nc = 0;
    for (int j = 0; j < n; j++)
        for (int i = j + 1; i <= n; i++) {
            cand[nc++] = P.t[i] - P.t[j] + p->stage_us;
            if (i < n)
                cand[nc++] = P.t[i] - P.t[j] + p->stage_us + at(p->send_us, i - 1);
        }
    qsort(cand, nc, sizeof *cand, cmp_double);
    double best = HUGE_VAL, least_sum = P.t[n] + S * p->stage_us;
    for (size_t k = 0; k < nc; k++) {
        double B = cand[k];
        if (k > 0 && B == cand[k - 1])
            continue;
        if (least_sum + (p->microbatches - 1) * B >= best)
            break;
        /* f[s][i]: least summed time of stages 0..s-1 over layers [0, i). */
        for (size_t q = 0; q < (size_t)(S + 1) * nn; q++)
            f[q] = HUGE_VAL;
        f[0] = 0;
        for (int s = 0; s < S; s++)
            for (int i = s + 1; i <= n - (S - 1 - s); i++) {
                double *fi = &f[(size_t)(s + 1) * nn + (size_t)i];
                for (int j = s; j < i; j++) {
                    double prev = f[(size_t)s * nn + (size_t)j];
                    if (prev == HUGE_VAL)
                        continue;
                    double t = stage_time(&P, s, j, i);
                    if (t > B || !fits(&P, s, j, i))
                        continue;
                    if (prev + t < *fi) {
                        *fi = prev + t;
                        from[(size_t)(s + 1) * nn + (size_t)i] = j;
                    }
                }
            }
        if (f[(size_t)S * nn + (size_t)n] == HUGE_VAL)
            continue;
        cut[S] = n;
        for (int s = S; s > 0; s--)
            cut[s - 1] = from[(size_t)s * nn + (size_t)cut[s]];
        double t = ss_stage_estimate(p, cut, NULL);
        if (t < best) {
            best = t;
            memcpy(best_cut, cut, (size_t)(S + 1) * sizeof *cut);
        }
    }
    if (best == HUGE_VAL) {
        st = ss_diag_set(d, SS_ERR_INFEASIBLE,
                         "stages: no cut of %d layers into %d stages fits %.3g bytes per device "
                         "(%d micro-batches)",
                         n, S, p->mem_limit, p->microbatches);
        goto out;
    }
    memcpy(first, best_cut, (size_t)(S + 1) * sizeof *first);
    if (t_us)
        *t_us = best;
out:
    ss_free(P.t);
    ss_free(P.w);
    ss_free(P.a);
    ss_free(cand);
    ss_free(f);
    ss_free(from);
    ss_free(cut);
    ss_free(best_cut);
    return st;
}
