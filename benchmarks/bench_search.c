/*
 * bench_search.c — search benchmarks (benchmarks/RESULTS.md, "Search").
 *
 *   bench_search delta MODEL TOPOLOGY [N]
 *       per evaluation: N random one-op proposals from the data-parallel
 *       plan (MCMC-like: about one in five committed), each evaluated three
 *       ways: "cold" = from-scratch full simulation (ss_sim_run with the
 *       builder's memoization off: build + engine + memory sweep), "full" =
 *       ss_sim_run with the memoizing builder (the search's full evaluator),
 *       and "delta" = ss_delta_run; prints tasks per graph, the median
 *       microseconds of each, the ratios cold/delta and full/delta, the share
 *       of tasks the delta runs re-simulated, and checks all three agree on
 *       every proposal.
 *   bench_search shiftprobe MODEL TOPOLOGY N [SEED [NODES BATCH PLAN]]
 *       how much a shift-converging delta would re-simulate (the comment
 *       above bench_shiftprobe defines it; docs/search.md, "Shift
 *       convergence"): N random one-op proposals as in `delta` (from the
 *       data-parallel plan, or PLAN, a plan spec such as
 *       megatron:tp=2,pp=1,dp=32,mb=4; NODES and BATCH as in bench_sim, 0 =
 *       as in the files), one line per proposal and summary lines.
 *   bench_search search MODEL TOPOLOGY SECONDS SEED [EXPLORE_SHARE [RESTART_AFTER [RANDOM_STARTS [P_HEAVY [BETA [P_PATH [P_LOCAL [P_CLASS [NO_EVAL_CACHE]]]]]]]]]
 *       one search with a time limit (budget unlimited; the optional
 *       arguments override the search defaults, 0 = default; NO_EVAL_CACHE
 *       1 judges revisited plans again); prints one line:
 *       model topology dp_ms expert_ms best_ms speedup_dp speedup_expert
 *       proposals simulations evals_per_s best_found_at_s
 *   bench_search trace MODEL TOPOLOGY SECONDS SEED [same options as search]
 *       the best-so-far curve of one search: "t best_ms" lines on stdout (to
 *       measure the time to come within 1% of a longer search's best), and
 *       "proposals simulations dp_ms expert_ms" on stderr.
 */
#include "simsearch.h"
#include "search/space.h"
#include "simulator/build.h"
#include "simulator/delta.h"
#include "simulator/engine.h"
#include "simulator/taskgraph.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int setup(const char *model, const char *topo, ss_machine **m, ss_graph **g,
                 ss_costmodel **cm)
{
    ss_diag d;
    ss_diag_init(&d);
    if (ss_machine_load(topo, m, &d) || ss_model_build(model, 0, ss_machine_n_devices(*m), g, &d)) {
        fprintf(stderr, "bench_search: %s\n", d.msg);
        return 1;
    }
    *cm = ss_cost_new(*m);
    return *cm == NULL;
}

/* A random one-op proposal applied to p: op drawn uniformly, a random
 * candidate of the space (stage kept); the op's old config is saved in *old
 * (devices in obuf) for undoing; buf holds the new config's devices. */
static int draw_proposal(const ss_graph *g, const ss_space *sp, ss_plan *p, ss_rng *rng,
                         int *buf, int *obuf, ss_pconfig *old, ss_diag *d)
{
    int op = (int)ss_rng_below(rng, ss_graph_n_ops(g));
    ss_pconfig c;
    *old = *ss_plan_config(p, op);
    memcpy(obuf, old->devices, (size_t)old->ntiles * sizeof *obuf);
    old->devices = obuf;
    c.devices = buf;
    ss_space_random(sp, op, rng, &c);
    c.stage = old->stage;
    ss_plan_set_config(p, op, &c, d);
    return op;
}

static int bench_delta(const char *model, const char *topo, int n)
{
    ss_machine *m;
    ss_graph *g;
    ss_costmodel *cm;
    if (setup(model, topo, &m, &g, &cm))
        return 1;
    ss_diag d;
    ss_diag_init(&d);
    int N = ss_machine_n_devices(m);
    ss_sim *sim, *cold;
    ss_delta *dl;
    ss_space *sp;
    ss_space_opts so = {N, 0};
    ss_plan *p;
    if (ss_sim_new(g, m, cm, NULL, &sim, &d) || ss_sim_new(g, m, cm, NULL, &cold, &d) ||
        ss_delta_new(g, m, cm, &dl, &d) ||
        ss_space_new(g, &so, &sp, &d) || ss_plan_data_parallel(g, m, 0, &p, &d)) {
        fprintf(stderr, "bench_search: %s\n", d.msg);
        return 1;
    }
    ss_build_set_memo(ss_sim_builder(cold), 0);
    ss_sim_result r, rc;
    memset(&r, 0, sizeof r);
    memset(&rc, 0, sizeof rc);
    ss_delta_eval e;
    if (ss_delta_run(dl, p, -1, &e, &d))
        return 1;
    ss_delta_commit(dl);
    double *tf = calloc((size_t)n, sizeof *tf), *td = calloc((size_t)n, sizeof *td);
    double *tc = calloc((size_t)n, sizeof *tc);
    int *buf = malloc((size_t)N * sizeof *buf), *obuf = malloc((size_t)N * 64 * sizeof *obuf);
    ss_rng rng;
    ss_rng_seed(&rng, 42);
    long tasks = 0, mism = 0, ok = 0;
    for (int i = 0; i < n; i++) {
        ss_pconfig old;
        int op = draw_proposal(g, sp, p, &rng, buf, obuf, &old, &d);
        double t0 = now_s();
        ss_status s1 = ss_delta_run(dl, p, op, &e, &d);
        double t1 = now_s();
        ss_status s2 = ss_sim_run(sim, p, &r, &d);
        double t2 = now_s();
        ss_status s3 = ss_sim_run(cold, p, &rc, &d);
        double t3 = now_s();
        td[i] = t1 - t0;
        tf[i] = t2 - t1;
        tc[i] = t3 - t2;
        if (s1 != s2 || s1 != s3 ||
            (s1 == SS_OK && (r.iteration_us != e.iteration_us || rc.iteration_us != e.iteration_us)))
            mism++;
        if (s1 == SS_OK) {
            ok++;
            tasks += e.n_tasks;
        }
        if (s1 == SS_OK && ss_rng_below(&rng, 5) == 0)
            ss_delta_commit(dl);
        else
            ss_plan_set_config(p, op, &old, &d);
    }
    const ss_delta_stats *st = ss_delta_stats_of(dl);
    qsort(tf, (size_t)n, sizeof *tf, cmp_d);
    qsort(td, (size_t)n, sizeof *td, cmp_d);
    qsort(tc, (size_t)n, sizeof *tc, cmp_d);
    printf("%-14s %-10s tasks %7ld  cold %8.0f us  full %8.0f us  delta %8.0f us  "
           "cold/delta %5.2fx  full/delta %5.2fx  cold/full %5.2fx  re-simulated %5.1f%%  "
           "mismatches %ld\n",
           model, ss_machine_name(m), ok ? tasks / ok : 0, 1e6 * tc[n / 2], 1e6 * tf[n / 2],
           1e6 * td[n / 2], tc[n / 2] / td[n / 2], tf[n / 2] / td[n / 2], tc[n / 2] / tf[n / 2],
           100.0 * (double)st->tasks_resimulated / (double)st->tasks_total, mism);
    free(tc);
    free(tf);
    free(td);
    free(buf);
    free(obuf);
    ss_sim_result_clear(&r);
    ss_sim_result_clear(&rc);
    ss_plan_free(p);
    ss_space_free(sp);
    ss_delta_free(dl);
    ss_sim_free(sim);
    ss_sim_free(cold);
    ss_cost_free(cm);
    ss_graph_free(g);
    ss_machine_free(m);
    return mism != 0;
}

/* ---- shiftprobe: how much would a shift-converging delta re-simulate? ----
 *
 * Idea measured (docs/search.md, "Shift convergence"): after a one-op change
 * the new schedule may equal the base's shifted by a constant d over long
 * stretches; an engine on an exact time grid could then stop simulating
 * once its state is the base's state shifted by d and copy the base
 * (shifted) until something changed can matter again. This mode counts,
 * with both schedules known (an oracle), the tasks such an engine would
 * still have to simulate.
 *
 * Definitions (new schedule: the full engine run of the proposal; base: the
 * committed plan's; map/dirty: delta.c's alignment, ss_delta_view_of; times
 * "equal" when they differ by < TOL):
 *   rounds     the distinct event times T[0] < ... < T[R-1] of the new
 *              schedule (all starts, ends and ready times);
 *   cut i      the state at the beginning of round i (engine.h, RESUMING):
 *              ACTIVE(i) = tasks ready before T[i] that have not ended
 *              before T[i], i.e. RUNNING (start < T[i] <= end) or QUEUED
 *              (ready < T[i] <= start). Tasks whose predecessors have not
 *              all ended are not part of the state beyond their graph: a
 *              predecessor still pending ends at >= T[i], after every
 *              retired one, so what the retired ones released cannot
 *              decide the ready time. Cut R (after the last round) is
 *              empty on both sides;
 *   uniform(i, d)  cut i of the new schedule is cut T[i] - d of the base
 *              shifted by d: (1) every active new task is CLEAN, running
 *              ones with start - base start = d, queued ones with ready -
 *              base ready = d (their queue key); (2) the base has exactly
 *              as many active and as many running tasks at s = T[i] - d
 *              (with (1) the map is then a bijection between the active
 *              sets; a removed base task, or a base task whose partner is
 *              elsewhere, breaks the count); (3) the "started" sets agree
 *              on clean pairs: every clean task started before T[i] has
 *              its partner started before s, and as many clean partners
 *              started before s (so a stream running at another shift,
 *              e.g. another device, is not uniform even while idle);
 *   shifted round  round i with some d such that uniform(i, d),
 *              uniform(i + 1, d), and every task starting at T[i] is clean
 *              with start shift d and the base has as many starts at s.
 *              Between two uniform cuts with the same d and same starts
 *              the engine's decisions are the base's shifted (it sees the
 *              same queues, keys and free resources), so a shift-converging
 *              engine can copy the round from the base;
 *   re-simulated   every task starting in a non-shifted round (dirty tasks
 *              always are: a dirty start fails the round). WINDOWS are
 *              maximal runs of non-shifted rounds.
 * Conservative: each shifted round needs both cuts around it, so the round
 * where the state re-converges is counted as simulated; the d = 0 prefix
 * before the change (today's T*) counts as skipped, as today; an engine
 * would also have to detect convergence (compare states) and know when to
 * stop copying (the next dirty release), which this oracle gets for free.
 * Per skipped task with d != 0 the probe checks whether base start + d (in
 * doubles) is the new start bit for bit: when not, the shift needs an exact
 * (integer) time grid. */
#define TOL 1e-6

enum { R_DIRTY, R_MIXED, R_COUNT, R_ORDER, R_STARTS, R_N };
static const char *const reason_name[R_N] = {"dirty", "mixed-shift", "count", "order",
                                            "starts"};
enum { K_FWD, K_BWD, K_UPD, K_XFER, K_GRAD, K_COLL, K_OTHER, K_N };
static const char *const kind_name[K_N] = {"fwd", "bwd", "update", "xfer", "grad-allreduce",
                                          "other-coll", "other"};

typedef struct probe {
    int64_t n, resim, today, windows, skipped, inexact, nonzero_skipped;
    int converged, makespan_ok;
    double d_final;
    int64_t kind[K_N], reason[R_N], dirty_kind[K_N];
    int64_t clean_zero, clean_final, clean_other, dirty;
    int64_t n_shifts;       /* distinct shifts (clusters TOL apart) among clean tasks */
    int64_t biggest_other;  /* clean tasks in the largest cluster other than d = 0 */
} probe;

typedef struct hent {
    double v;
    int hi;
} hent;

/* Min-heap on v (callers negate for a max-heap). */
static void hpush(hent *h, int *n, double v, int hi)
{
    int i = (*n)++;
    while (i > 0 && h[(i - 1) / 2].v > v) {
        h[i] = h[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h[i].v = v;
    h[i].hi = hi;
}

static void hpop(hent *h, int *n)
{
    hent x = h[--*n];
    int i = 0;
    for (;;) {
        int c = 2 * i + 1;
        if (c >= *n)
            break;
        if (c + 1 < *n && h[c + 1].v < h[c].v)
            c++;
        if (h[c].v >= x.v)
            break;
        h[i] = h[c];
        i = c;
    }
    if (*n > 0)
        h[i] = x;
}

/* Number of elements of sorted a[0..n) below x. */
static int64_t below(const double *a, int n, double x)
{
    int lo = 0, hi = n;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (a[mid] < x)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static int idx_of(const double *T, int R, double x) { return (int)below(T, R, x); }

static double *sorted_copy(const double *a, int n)
{
    double *c = malloc((size_t)(n ? n : 1) * sizeof *c);
    memcpy(c, a, (size_t)n * sizeof *c);
    qsort(c, (size_t)n, sizeof *c, cmp_d);
    return c;
}

static int kind_of(const ss_taskgraph *tg, int t)
{
    switch (tg->kind[t]) {
    case SS_TASK_FWD: return K_FWD;
    case SS_TASK_BWD: return K_BWD;
    case SS_TASK_UPDATE: return K_UPD;
    case SS_TASK_XFER: return K_XFER;
    case SS_TASK_COLLECTIVE: return tg->aux[t] == SS_BUILD_COLL_GRAD ? K_GRAD : K_COLL;
    default: return K_OTHER;
    }
}

typedef struct probe_in {
    const ss_taskgraph *tg;
    const double *ns, *ne, *nr;          /* new start, end, ready */
    const double *bs, *be, *br;          /* base start, end, ready */
    int nb;                              /* base tasks */
    const int32_t *map;
    const uint8_t *dirty;
    double mk_new, mk_base;
} probe_in;

typedef struct cutctx {
    int R, nb;
    const double *T;
    const int32_t *cntA, *cntH, *uncA, *PC;
    const double *minA, *maxA, *PM;
    const double *sbr, *sbs, *sbe, *cbs; /* sorted base ready, start, end; clean partners' starts */
    int ncb;
} cutctx;

/* uniform(i, d) above; returns -1 when it holds, else the reason. */
static int cut_fails(const cutctx *c, int i, double d)
{
    if (i >= c->R)
        return -1;
    if (c->uncA[i])
        return R_DIRTY;
    if (c->cntA[i] && (fabs(c->minA[i] - d) >= TOL || fabs(c->maxA[i] - d) >= TOL))
        return R_MIXED;
    double s = c->T[i] - d, lo = s - TOL;
    int64_t ready_b = below(c->sbr, c->nb, lo), start_b = below(c->sbs, c->nb, lo),
            end_b = below(c->sbe, c->nb, lo);
    if (c->cntA[i] != ready_b - end_b || c->cntH[i] != start_b - end_b)
        return R_COUNT;
    if ((c->PC[i] && !(c->PM[i] < lo)) || c->PC[i] != below(c->cbs, c->ncb, lo))
        return R_ORDER;
    return -1;
}

static void probe_run(const probe_in *in, probe *out)
{
    const ss_taskgraph *tg = in->tg;
    int n = tg->n_tasks, nb = in->nb;
    memset(out, 0, sizeof *out);
    out->n = n;
    /* rounds */
    double *T = malloc((size_t)(3 * n + 1) * sizeof *T);
    int R = 0;
    for (int t = 0; t < n; t++) {
        T[R++] = in->ns[t];
        T[R++] = in->ne[t];
        T[R++] = in->nr[t];
    }
    qsort(T, (size_t)R, sizeof *T, cmp_d);
    int u = 0;
    for (int k = 0; k < R; k++)
        if (!u || T[k] != T[u - 1])
            T[u++] = T[k];
    R = u;
    int32_t *cntA = calloc((size_t)R + 2, sizeof *cntA), *cntH = calloc((size_t)R + 2, sizeof *cntH);
    int32_t *uncA = calloc((size_t)R + 2, sizeof *uncA), *PC = calloc((size_t)R + 2, sizeof *PC);
    int32_t *sCnt = calloc((size_t)R + 1, sizeof *sCnt), *sUnc = calloc((size_t)R + 1, sizeof *sUnc);
    double *minA = malloc((size_t)(R + 1) * sizeof *minA), *maxA = malloc((size_t)(R + 1) * sizeof *maxA);
    double *PM = malloc((size_t)(R + 2) * sizeof *PM), *mx = malloc((size_t)(R + 1) * sizeof *mx);
    double *sMin = malloc((size_t)(R + 1) * sizeof *sMin), *sMax = malloc((size_t)(R + 1) * sizeof *sMax);
    double *dround = calloc((size_t)R + 1, sizeof *dround);
    uint8_t *okr = calloc((size_t)R + 1, 1);
    int32_t *si = malloc((size_t)(n ? n : 1) * sizeof *si);
    /* heap entries bucketed by their first cut */
    int32_t *head = malloc((size_t)(R + 1) * sizeof *head), *next = malloc((size_t)(2 * n + 1) * sizeof *next);
    hent *ent = malloc((size_t)(2 * n + 1) * sizeof *ent);
    int nent = 0;
    for (int k = 0; k <= R; k++) {
        head[k] = -1;
        mx[k] = -INFINITY;
        sMin[k] = INFINITY;
        sMax[k] = -INFINITY;
    }
    double *cb = malloc((size_t)(n ? n : 1) * sizeof *cb);
    int ncb = 0;
    for (int t = 0; t < n; t++) {
        int s_i = idx_of(T, R, in->ns[t]), e_i = idx_of(T, R, in->ne[t]),
            r_i = idx_of(T, R, in->nr[t]);
        si[t] = s_i;
        int clean = !in->dirty[t];
        sCnt[s_i]++;
        /* active over cuts r_i+1 .. e_i: queued r_i+1 .. s_i, running s_i+1 .. e_i */
        if (r_i < e_i) {
            cntA[r_i + 1]++;
            cntA[e_i + 1]--;
            if (!clean) {
                uncA[r_i + 1]++;
                uncA[e_i + 1]--;
            }
        }
        if (s_i < e_i) {
            cntH[s_i + 1]++;
            cntH[e_i + 1]--;
        }
        if (!clean) {
            sUnc[s_i]++;
            out->dirty++;
            out->dirty_kind[kind_of(tg, t)]++;
            continue;
        }
        int x = in->map[t];
        double ds = in->ns[t] - in->bs[x], dr = in->nr[t] - in->br[x];
        if (r_i < s_i) {
            ent[nent] = (hent){dr, s_i};
            next[nent] = head[r_i + 1];
            head[r_i + 1] = nent++;
        }
        if (s_i < e_i) {
            ent[nent] = (hent){ds, e_i};
            next[nent] = head[s_i + 1];
            head[s_i + 1] = nent++;
        }
        if (ds < sMin[s_i])
            sMin[s_i] = ds;
        if (ds > sMax[s_i])
            sMax[s_i] = ds;
        if (in->bs[x] > mx[s_i])
            mx[s_i] = in->bs[x];
        PC[s_i + 1]++;
        cb[ncb++] = in->bs[x];
    }
    for (int k = 1; k <= R; k++) {
        cntA[k] += cntA[k - 1];
        cntH[k] += cntH[k - 1];
        uncA[k] += uncA[k - 1];
        PC[k] += PC[k - 1];
    }
    PM[0] = -INFINITY;
    for (int k = 0; k < R; k++)
        PM[k + 1] = mx[k] > PM[k] ? mx[k] : PM[k];
    /* per cut min and max of the active clean tasks' shifts: sweep with two
     * lazily expired heaps (entry: value, last cut) */
    hent *hmin = malloc((size_t)(nent + 1) * sizeof *hmin), *hmax = malloc((size_t)(nent + 1) * sizeof *hmax);
    int nmin = 0, nmax = 0;
    for (int k = 0; k < R; k++) {
        for (int e = head[k]; e >= 0; e = next[e]) {
            hpush(hmin, &nmin, ent[e].v, ent[e].hi);
            hpush(hmax, &nmax, -ent[e].v, ent[e].hi);
        }
        while (nmin && hmin[0].hi < k)
            hpop(hmin, &nmin);
        while (nmax && hmax[0].hi < k)
            hpop(hmax, &nmax);
        minA[k] = nmin ? hmin[0].v : INFINITY;
        maxA[k] = nmax ? -hmax[0].v : -INFINITY;
    }
    qsort(cb, (size_t)ncb, sizeof *cb, cmp_d);
    double *sbr = sorted_copy(in->br, nb), *sbs = sorted_copy(in->bs, nb),
           *sbe = sorted_copy(in->be, nb);
    cutctx c = {R, nb, T, cntA, cntH, uncA, PC, minA, maxA, PM, sbr, sbs, sbe, cb, ncb};
    /* rounds */
    int prev_ok = 1;
    for (int k = 0; k < R; k++) {
        double d = 0;
        if (cntA[k] && !uncA[k])
            d = minA[k];
        else if (sCnt[k] > sUnc[k])
            d = sMin[k];
        else if (k + 1 < R && cntA[k + 1] && !uncA[k + 1])
            d = minA[k + 1];
        int why = cut_fails(&c, k, d);
        if (why < 0) {
            double s = T[k] - d;
            if (sUnc[k])
                why = R_DIRTY;
            else if (sCnt[k] && (fabs(sMin[k] - d) >= TOL || fabs(sMax[k] - d) >= TOL))
                why = R_MIXED;
            else if (below(sbs, nb, s + TOL) - below(sbs, nb, s - TOL) != sCnt[k])
                why = R_STARTS;
        }
        if (why < 0)
            why = cut_fails(&c, k + 1, d);
        okr[k] = why < 0;
        dround[k] = d;
        if (why >= 0) {
            out->reason[why] += sCnt[k];
            out->windows += prev_ok;
        }
        prev_ok = okr[k];
    }
    for (int t = 0; t < n; t++) {
        int k = si[t];
        if (!okr[k]) {
            out->resim++;
            out->kind[kind_of(tg, t)]++;
            continue;
        }
        out->skipped++;
        double d = dround[k];
        int x = in->map[t];
        if (d != 0) {
            out->nonzero_skipped++;
            out->inexact += in->bs[x] + d != in->ns[t] || in->be[x] + d != in->ne[t];
        }
    }
    out->converged = R > 0 && okr[R - 1];
    out->d_final = R > 0 ? dround[R - 1] : 0;
    out->makespan_ok = out->converged && fabs(in->mk_new - (in->mk_base + out->d_final)) < TOL;
    ncb = 0;
    for (int t = 0; t < n; t++)
        if (!in->dirty[t])
            cb[ncb++] = in->ns[t] - in->bs[in->map[t]];
    qsort(cb, (size_t)ncb, sizeof *cb, cmp_d);
    for (int k = 0, run = 0; k < ncb; k++) {
        int fresh = k == 0 || cb[k] - cb[k - 1] >= TOL;
        out->n_shifts += fresh;
        run = fresh ? 1 : run + 1;
        if (fabs(cb[k]) >= TOL && run > out->biggest_other)
            out->biggest_other = run;
    }
    for (int t = 0; t < n; t++) {
        if (in->dirty[t])
            continue;
        double ds = in->ns[t] - in->bs[in->map[t]];
        if (fabs(ds) < TOL)
            out->clean_zero++;
        else if (fabs(ds - out->d_final) < TOL)
            out->clean_final++;
        else
            out->clean_other++;
    }
    free(T);
    free(cntA);
    free(cntH);
    free(uncA);
    free(PC);
    free(sCnt);
    free(sUnc);
    free(minA);
    free(maxA);
    free(PM);
    free(mx);
    free(sMin);
    free(sMax);
    free(dround);
    free(okr);
    free(si);
    free(head);
    free(next);
    free(ent);
    free(cb);
    free(hmin);
    free(hmax);
    free(sbr);
    free(sbs);
    free(sbe);
}

static double quantile(double *v, int n, double q)
{
    if (n == 0)
        return 0;
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    int k = (int)ceil(q * n) - 1;
    return v[k < 0 ? 0 : k >= n ? n - 1 : k];
}

static int bench_shiftprobe(const char *model, const char *topo, int n, uint64_t seed, int nodes,
                            long batch, const char *plan_spec)
{
    ss_machine *m = NULL;
    ss_graph *g = NULL;
    ss_diag d;
    ss_diag_init(&d);
    ss_plan *p = NULL;
    if (ss_machine_load_nodes(topo, nodes, &m, &d) ||
        ss_model_build(model, batch, ss_machine_n_devices(m), &g, &d) ||
        (plan_spec ? ss_plan_from_spec(plan_spec, g, m, &p, &d)
                   : ss_plan_data_parallel(g, m, 0, &p, &d))) {
        fprintf(stderr, "bench_search: %s\n", d.msg);
        return 1;
    }
    ss_costmodel *cm = ss_cost_new(m);
    int N = ss_machine_n_devices(m);
    ss_delta *dl;
    ss_space *sp;
    ss_space_opts so = {N, 0};
    ss_engine *full = ss_engine_new();
    if (!cm || !full || ss_delta_new(g, m, cm, &dl, &d) || ss_space_new(g, &so, &sp, &d)) {
        fprintf(stderr, "bench_search: %s\n", d.msg);
        return 1;
    }
    ss_delta_eval e;
    if (ss_delta_run(dl, p, -1, &e, &d)) {
        fprintf(stderr, "bench_search: %s\n", d.msg);
        return 1;
    }
    ss_delta_commit(dl);
    int *buf = malloc((size_t)N * sizeof *buf), *obuf = malloc((size_t)N * 64 * sizeof *obuf);
    double *share = calloc((size_t)n, sizeof *share), *today = calloc((size_t)n, sizeof *today);
    double *wins = calloc((size_t)n, sizeof *wins), *nshift = calloc((size_t)n, sizeof *nshift);
    double *bigc = calloc((size_t)n, sizeof *bigc);
    ss_rng rng;
    ss_rng_seed(&rng, seed);
    int np = 0, conv = 0, mk_ok = 0, exact_props = 0, mism = 0, other_shift = 0;
    int64_t tot_n = 0, tot_resim = 0, tot_today = 0, tot_skipped = 0, tot_nz = 0, tot_inexact = 0;
    int64_t kind[K_N] = {0}, reason[R_N] = {0}, dkind[K_N] = {0}, cz = 0, cf = 0, co = 0, cd = 0;
    printf("# %s on %s: per proposal: op tasks today%% resim%% windows converged makespan_ok "
           "d_final_us inexact/nonzero-skipped clean(d=0/d_final/other) dirty shifts "
           "biggest-nonzero-shift-cluster\n",
           model, ss_machine_name(m));
    for (int i = 0; i < n; i++) {
        ss_pconfig old;
        int op = draw_proposal(g, sp, p, &rng, buf, obuf, &old, &d);
        int64_t before = ss_delta_stats_of(dl)->tasks_resimulated;
        ss_status s1 = ss_delta_run(dl, p, op, &e, &d);
        ss_delta_view v;
        if (s1 == SS_OK && ss_delta_view_of(dl, &v)) {
            ss_engine_config ec = {.policy = v.policy};
            if (ss_engine_run(full, v.tg, &ec, &d)) {
                fprintf(stderr, "bench_search: %s\n", d.msg);
                return 1;
            }
            const ss_engine_result *fr = ss_engine_result_of(full);
            int nt = v.tg->n_tasks;
            if (memcmp(fr->start, v.cur->start, (size_t)nt * sizeof *fr->start) ||
                fr->makespan != e.iteration_us)
                mism++;
            probe_in in = {v.tg, fr->start, fr->end, fr->ready, v.base->start, v.base->end,
                           v.base->ready, v.base_tg->n_tasks, v.map, v.dirty,
                           fr->makespan, v.base->makespan};
            probe pr;
            probe_run(&in, &pr);
            pr.today = ss_delta_stats_of(dl)->tasks_resimulated - before;
            share[np] = (double)pr.resim / (double)pr.n;
            today[np] = (double)pr.today / (double)pr.n;
            wins[np] = (double)pr.windows;
            np++;
            conv += pr.converged;
            mk_ok += pr.makespan_ok;
            exact_props += pr.inexact == 0;
            other_shift += pr.clean_other > 0;
            tot_n += pr.n;
            tot_resim += pr.resim;
            tot_today += pr.today;
            tot_skipped += pr.skipped;
            tot_nz += pr.nonzero_skipped;
            tot_inexact += pr.inexact;
            for (int k = 0; k < K_N; k++) {
                kind[k] += pr.kind[k];
                dkind[k] += pr.dirty_kind[k];
            }
            for (int k = 0; k < R_N; k++)
                reason[k] += pr.reason[k];
            cz += pr.clean_zero;
            cf += pr.clean_final;
            co += pr.clean_other;
            cd += pr.dirty;
            nshift[np - 1] = (double)pr.n_shifts;
            bigc[np - 1] = (double)pr.biggest_other / (double)pr.n;
            printf("%4d %6lld %5.1f %5.1f %4lld %d %d %10.3f %lld/%lld %lld/%lld/%lld %lld %lld "
                   "%lld\n", op,
                   (long long)pr.n, 100.0 * today[np - 1], 100.0 * share[np - 1],
                   (long long)pr.windows, pr.converged, pr.makespan_ok, pr.d_final,
                   (long long)pr.inexact, (long long)pr.nonzero_skipped,
                   (long long)pr.clean_zero, (long long)pr.clean_final,
                   (long long)pr.clean_other, (long long)pr.dirty, (long long)pr.n_shifts,
                   (long long)pr.biggest_other);
        }
        if (s1 == SS_OK && ss_rng_below(&rng, 5) == 0)
            ss_delta_commit(dl);
        else
            ss_plan_set_config(p, op, &old, &d);
    }
    double mean_s = tot_n ? (double)tot_resim / (double)tot_n : 0;
    double mean_share = 0, mean_today = 0, mean_w = 0;
    for (int k = 0; k < np; k++) {
        mean_share += share[k] / np;
        mean_today += today[k] / np;
        mean_w += wins[k] / np;
    }
    printf("SUMMARY %s %s proposals %d tasks/graph %lld | shift re-simulated: median %.1f%% "
           "p90 %.1f%% mean %.1f%% (task-weighted %.1f%%) | today's delta: median %.1f%% "
           "mean %.1f%% | windows: median %.0f p90 %.0f mean %.1f | converged at end %d, "
           "makespan = base + d %d | skipped tasks with d != 0: %lld, inexact in doubles "
           "%.1f%%; proposals all exact %d | proposals with a 3rd shift %d | mismatches %d\n",
           model, ss_machine_name(m), np, np ? (long long)(tot_n / np) : 0,
           100 * quantile(share, np, 0.5), 100 * quantile(share, np, 0.9), 100 * mean_share,
           100 * mean_s, 100 * quantile(today, np, 0.5), 100 * mean_today,
           quantile(wins, np, 0.5), quantile(wins, np, 0.9), mean_w, conv, mk_ok,
           (long long)tot_nz, tot_nz ? 100.0 * (double)tot_inexact / (double)tot_nz : 0.0,
           exact_props, other_shift, mism);
    printf("SUMMARY re-simulated by kind:");
    for (int k = 0; k < K_N; k++)
        printf(" %s %.1f%%", kind_name[k], tot_resim ? 100.0 * (double)kind[k] / (double)tot_resim : 0);
    printf("\nSUMMARY dirty tasks by kind:");
    for (int k = 0; k < K_N; k++)
        printf(" %s %.1f%%", kind_name[k], cd ? 100.0 * (double)dkind[k] / (double)cd : 0);
    printf("\nSUMMARY non-shifted rounds' first failing check (by tasks started):");
    int64_t rs = 0;
    for (int k = 0; k < R_N; k++)
        rs += reason[k];
    for (int k = 0; k < R_N; k++)
        printf(" %s %.1f%%", reason_name[k], rs ? 100.0 * (double)reason[k] / (double)rs : 0);
    printf("\nSUMMARY clean tasks' shift: d=0 %.1f%%  d=d_final %.1f%%  other %.1f%%  "
           "(dirty tasks %.2f%% of all); distinct shifts per proposal: median %.0f p90 %.0f; "
           "largest cluster of one nonzero shift: median %.1f%% of tasks\n",
           100.0 * (double)cz / (double)(cz + cf + co), 100.0 * (double)cf / (double)(cz + cf + co),
           100.0 * (double)co / (double)(cz + cf + co), 100.0 * (double)cd / (double)tot_n,
           quantile(nshift, np, 0.5), quantile(nshift, np, 0.9), 100 * quantile(bigc, np, 0.5));
    free(buf);
    free(obuf);
    free(share);
    free(today);
    free(wins);
    free(nshift);
    free(bigc);
    ss_engine_free(full);
    ss_plan_free(p);
    ss_space_free(sp);
    ss_delta_free(dl);
    ss_cost_free(cm);
    ss_graph_free(g);
    ss_machine_free(m);
    return mism != 0;
}

typedef struct curve {
    FILE *f;
    double last;
} curve;

static void on_progress(void *ctx, const ss_search_progress *p)
{
    curve *c = ctx;
    if (c->f && p->best_us != c->last) {
        fprintf(c->f, "%.3f %.4f\n", p->elapsed_s, p->best_us / 1000);
        c->last = p->best_us;
    }
}

static int bench_run(const char *model, const char *topo, double secs, uint64_t seed, int trace,
                     double explore, int64_t restart, int random_starts, double p_heavy,
                     double beta, double p_path, double p_local, double p_class,
                     int no_cache)
{
    ss_machine *m;
    ss_graph *g;
    ss_costmodel *cm;
    if (setup(model, topo, &m, &g, &cm))
        return 1;
    ss_search_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.budget = (int64_t)1 << 40;
    cfg.time_limit_s = secs;
    cfg.seed = seed;
    cfg.explore_share = explore;
    cfg.restart_after = restart;
    cfg.random_starts = random_starts;
    cfg.p_heavy = p_heavy;
    cfg.beta = beta;
    cfg.p_path = p_path;
    cfg.p_local = p_local;
    cfg.p_class = p_class;
    cfg.no_eval_cache = no_cache;
    curve cv = {trace ? stdout : NULL, -1};
    cfg.progress = on_progress;
    cfg.cb_ctx = &cv;
    ss_search_result r;
    memset(&r, 0, sizeof r);
    ss_diag d;
    ss_diag_init(&d);
    if (ss_search_run(g, m, cm, &cfg, &r, &d)) {
        fprintf(stderr, "bench_search: %s\n", d.msg);
        return 1;
    }
    if (trace) {
        printf("%.3f %.4f\n", r.time_s, r.best_sim.iteration_us / 1000);
        fprintf(stderr, "%lld %lld %.4f %.4f\n", (long long)r.proposals,
                (long long)r.evaluations, r.dp_sim.iteration_us / 1000,
                r.expert_sim.iteration_us / 1000);
    }
    else
        printf("%s %s %.3f %.3f %.3f %.3f %.3f %lld %lld %.0f %.2f\n", model, ss_machine_name(m),
               r.dp_sim.iteration_us / 1000, r.expert_sim.iteration_us / 1000,
               r.best_sim.iteration_us / 1000, r.speedup_vs_dp, r.speedup_vs_expert,
               (long long)r.proposals, (long long)r.evaluations, r.evals_per_s,
               r.best_found_at_s);
    ss_search_result_clear(&r);
    ss_cost_free(cm);
    ss_graph_free(g);
    ss_machine_free(m);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 4 && !strcmp(argv[1], "delta"))
        return bench_delta(argv[2], argv[3], argc > 4 ? atoi(argv[4]) : 100);
    if (argc >= 5 && !strcmp(argv[1], "shiftprobe"))
        return bench_shiftprobe(argv[2], argv[3], atoi(argv[4]),
                                argc > 5 ? (uint64_t)atoll(argv[5]) : 42,
                                argc > 6 ? atoi(argv[6]) : 0, argc > 7 ? atol(argv[7]) : 0,
                                argc > 8 ? argv[8] : NULL);
    if (argc >= 6 && (!strcmp(argv[1], "search") || !strcmp(argv[1], "trace")))
        return bench_run(argv[2], argv[3], atof(argv[4]), (uint64_t)atoll(argv[5]),
                         !strcmp(argv[1], "trace"), argc > 6 ? atof(argv[6]) : 0,
                         argc > 7 ? atoll(argv[7]) : 0, argc > 8 ? atoi(argv[8]) : 0,
                         argc > 9 ? atof(argv[9]) : 0, argc > 10 ? atof(argv[10]) : 0,
                         argc > 11 ? atof(argv[11]) : 0, argc > 12 ? atof(argv[12]) : 0,
                         argc > 13 ? atof(argv[13]) : 0, argc > 14 ? atoi(argv[14]) : 0);
    fprintf(stderr, "usage: bench_search delta MODEL TOPOLOGY [N]\n"
                    "       bench_search shiftprobe MODEL TOPOLOGY N [SEED [NODES BATCH PLAN]]\n"
                    "       bench_search search|trace MODEL TOPOLOGY SECONDS SEED "
                    "[EXPLORE_SHARE [RESTART_AFTER [RANDOM_STARTS [P_HEAVY [BETA [P_PATH [P_LOCAL [P_CLASS]]]]]]]]\n");
    return 2;
}
