/*
 * llm.c — the LLM planner's levels (search/llm.h): the rule plan, the
 * settings sweep, the level-2 hook and the knob chains with their polish.
 *
 * Chains run on worker threads, each with its own judge and cache; chain i
 * draws from the seed (seed, i) and gets budget / threads proposals (the
 * first chains one more when it does not divide), so its path depends only
 * on the inputs. Results are merged by (time, spec text). Invariant: a
 * point enters the best / near lists only after a judgement that says it
 * fits, so no returned plan exceeds memory.
 */
#include "search/llm.h"
#include "search/space.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static double wall_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

typedef struct run {
    const ss_graph *g;
    const ss_machine *m;
    ss_costmodel *cm;
    const ss_llm_config *cfg;
    ss_llm_shape S;
    double t0, band;
    pthread_mutex_t lock;
    int stopped, time_cut, interrupted;
    int have_plan;          /* level 0 found its plan: the deadline applies */
    double reserve;         /* seconds kept before the deadline for the caller (llm.h) */
    int64_t proposals;      /* shared, for progress only */
    double best_us;         /* shared, for progress only */
    double last_progress;
} run;

static int run_stop(void *ctx)
{
    run *R = ctx;
    int user = R->cfg->stop && R->cfg->stop(R->cfg->stop_ctx);
    /* the time limit holds once a first plan is had (level 0 is not cut) */
    int late = R->have_plan && R->cfg->deadline > 0 &&
               wall_s() > R->cfg->deadline - R->reserve;
    if (user || late) {
        pthread_mutex_lock(&R->lock);
        R->stopped = 1;
        R->interrupted |= user;
        R->time_cut |= late && !user;
        pthread_mutex_unlock(&R->lock);
    }
    return user || late;
}

/* ---- a chain's state: judge + cache ------------------------------------------- */

typedef struct chain {
    run *R;
    ss_llm_judge *j;
    ss_llm_point *cache;
    int n_cache, cap_cache;
    ss_llm_point best;
    int found;
    int n_near;
    ss_llm_point near[SS_LLM_NEAR_MAX];
    int64_t proposals, evaluations, cached, infeasible, budget;
    uint64_t seed;
    ss_status st;
    ss_diag d;
} chain;

/* One recompute mode for every pipeline stage of c. */
static void set_rc(ss_megatron_config *c, ss_recompute mode)
{
    c->recompute = mode;
    memset(c->recompute_rank, 0, sizeof c->recompute_rank);
}

static void normalize(ss_megatron_config *c)
{
    c->mb = 0;
    if (c->vp < 1)
        c->vp = 1;
    if (c->sync == SS_SYNC_BULK)
        c->bucket_bytes = 0;
}

/* Judge c (cached). 1: judged (or cached) and *out holds it; 0: refused
 * (invalid, the fast evaluator cannot judge it, or over memory by the
 * static bound: out->fits = 0); -1: stopped or an error (ch->st). */
static int judge(chain *ch, ss_megatron_config c, ss_llm_point *out)
{
    normalize(&c);
    for (int i = 0; i < ch->n_cache; i++)
        if (!memcmp(&ch->cache[i].c, &c, sizeof c)) {
            ch->cached++;
            *out = ch->cache[i];
            return out->time_us < HUGE_VAL || out->fits ? 1 : 0;
        }
    ss_llm_point p;
    memset(&p, 0, sizeof p);
    p.c = c;
    p.time_us = HUGE_VAL;
    int ok = 0;
    if (ss_llm_static_overflow(&ch->R->S, &c)) {
        ok = 0; /* weights, gradients (and optimizer state) alone overflow */
    } else {
        ss_diag d;
        ss_diag_init(&d);
        ss_status st = ss_llm_judge_point(ch->j, &c, HUGE_VAL, &p, &d);
        if (st == SS_ERR_INTERRUPTED)
            return -1;
        if (st == SS_ERR_INVALID || st == SS_ERR_UNSUPPORTED) {
            p.time_us = HUGE_VAL;
            p.fits = 0;
        } else if (st) {
            ch->st = ss_diag_set(&ch->d, st, "%s", d.msg);
            return -1;
        } else {
            ch->evaluations++;
            ok = 1;
        }
    }
    if (!ss_grow((void **)&ch->cache, &ch->cap_cache, ch->n_cache + 1, sizeof *ch->cache))
        ch->cache[ch->n_cache++] = p;
    *out = p;
    if (ok && p.fits) {
        ss_llm_near_add(ch->near, &ch->n_near, &p, ch->R->band, ch->R->S.batch);
        if (!ch->found || p.time_us < ch->best.time_us ||
            (p.time_us == ch->best.time_us && memcmp(&p.c, &ch->best.c, sizeof p.c) < 0)) {
            ch->best = p;
            ch->found = 1;
        }
        pthread_mutex_lock(&ch->R->lock);
        if (p.time_us < ch->R->best_us)
            ch->R->best_us = p.time_us;
        pthread_mutex_unlock(&ch->R->lock);
    }
    if (ok && !p.fits)
        ch->infeasible++;
    return ok;
}

static int states_fit_half(const ss_llm_shape *S, int tp, int pp, int dp);
static int zero3_only(const ss_llm_shape *S, int tp, int pp, int dp);

/* ---- level 0 and 1 ------------------------------------------------------------- */

static int dp_of(const ss_llm_shape *S, int tp, int pp)
{
    if (S->devices % (tp * pp))
        return 0;
    int dp = S->devices / (tp * pp);
    return S->batch % dp ? 0 : dp;
}

/* The rule plan: 1 found, 0 none, -1 stopped / error. */
static int level0(chain *ch, ss_llm_point *out)
{
    const ss_llm_shape *S = &ch->R->S;
    int tpmax = 1;
    while (tpmax * 2 <= S->per_host && tpmax * 2 <= 8)
        tpmax *= 2;
    for (int rc = 0; rc < 2; rc++)
        for (int tp = tpmax; tp >= 1; tp /= 2)
            for (int pp = 1; pp <= S->layers; pp++) {
                int dp = dp_of(S, tp, pp);
                if (S->layers % pp || !dp)
                    continue;
                int z3 = zero3_only(S, tp, pp, dp);
                ss_megatron_config c = {.tp = tp, .pp = pp, .dp = dp, .mbs = 1,
                                        .recompute = rc ? SS_RECOMPUTE_FULL
                                                        : SS_RECOMPUTE_SELECTIVE,
                                        .sp = tp > 1, .distopt = z3 ? SS_ZERO3 : dp > 1};
                if (S->batch % dp || (pp > 1 && S->batch / dp < pp))
                    continue;
                if (!states_fit_half(S, tp, pp, dp) && pp < S->layers && !z3)
                    continue; /* states over half the memory: leave room for activations */
                ss_llm_point p;
                int ok = judge(ch, c, &p);
                if (ok == 0 && c.distopt && !ss_llm_static_overflow(S, &c)) {
                    /* the hierarchical evaluator refuses distopt with overlapped
                     * sync on deep pipelines (1T / 3,072): bulk sync instead */
                    c.sync = SS_SYNC_BULK;
                    ok = judge(ch, c, &p);
                }
                if (ok < 0)
                    return -1;
                if (ok && p.fits) {
                    *out = p;
                    return 1;
                }
            }
    return 0;
}

/* Level 1: the settings and micro-batch sizes of start's structure. */
static int level1(chain *ch, const ss_llm_point *start)
{
    static const int mbs[] = {1, 2, 4};
    for (int mi = 0; mi < 3; mi++)
        for (int rc = 0; rc < 3; rc++)
            for (int dopt = 0; dopt < 2; dopt++)
                for (int sy = 0; sy < 2; sy++) {
                    ss_megatron_config c = start->c;
                    c.mbs = mbs[mi];
                    if (ch->R->S.batch % ((int64_t)c.dp * c.mbs) ||
                        (c.pp > 1 && ch->R->S.batch / ((int64_t)c.dp * c.mbs) < c.pp))
                        continue;
                    set_rc(&c, (ss_recompute)rc);
                    c.distopt = c.dp > 1 && dopt;
                    c.sync = sy ? SS_SYNC_BULK : SS_SYNC_WAIT_FREE;
                    ss_llm_point p;
                    if (judge(ch, c, &p) < 0)
                        return -1;
                }
    return 0;
}

/* ---- level 3: moves --------------------------------------------------------------- */

enum { MV_TP, MV_PP, MV_MBS, MV_VP, MV_RC, MV_SP, MV_DOPT, MV_SYNC, MV_BUCKET, MV_FIRST,
       MV_LAST, MV_RCSTAGE, MV_COUNT };

/* Recompute modes ordered by the activation memory they save. */
static int rc_level(ss_recompute r)
{
    return r == SS_RECOMPUTE_FULL ? 2 : r == SS_RECOMPUTE_SELECTIVE ? 1 : 0;
}

static const ss_recompute rc_of_level[3] = {SS_RECOMPUTE_NONE, SS_RECOMPUTE_SELECTIVE,
                                            SS_RECOMPUTE_FULL};

/* Whether c's chunks (pp x vp) fit the plan's per-stage recompute array. */
static int rank_modes_fit(const ss_megatron_config *c)
{
    return (int64_t)c->pp * (c->vp > 1 ? c->vp : 1) <= SS_PLAN_MAX_RECOMPUTE_STAGES;
}

/* MV_RCSTAGE: one pipeline rank's recompute mode moves to its neighbour's
 * (the first ranks of 1F1B hold the most micro-batches in flight, so they
 * need the most recompute). dir > 0: the first rank whose mode saves less
 * memory than the rank before it takes that rank's mode (none such: rank 0
 * saves one step more); dir < 0: the last rank whose mode saves more than
 * the rank after it takes that rank's mode (none such: the last rank saves
 * one step less). 0 when it does not apply. */
static int move_rcstage(ss_megatron_config *o, int dir)
{
    int pp = o->pp;
    if (pp < 2 || !rank_modes_fit(o))
        return 0;
    ss_recompute m[SS_PLAN_MAX_RECOMPUTE_STAGES];
    for (int r = 0; r < pp; r++)
        m[r] = ss_megatron_rank_recompute(o, r);
    int at = -1;
    if (dir > 0) {
        for (int r = 1; r < pp && at < 0; r++)
            if (rc_level(m[r]) < rc_level(m[r - 1]))
                at = r;
        if (at >= 0)
            m[at] = m[at - 1];
        else if (rc_level(m[0]) < 2)
            m[0] = rc_of_level[rc_level(m[0]) + 1];
        else
            return 0;
    } else {
        for (int r = pp - 2; r >= 0 && at < 0; r--)
            if (rc_level(m[r]) > rc_level(m[r + 1]))
                at = r;
        if (at >= 0)
            m[at] = m[at + 1];
        else if (rc_level(m[pp - 1]) > 0)
            m[pp - 1] = rc_of_level[rc_level(m[pp - 1]) - 1];
        else
            return 0;
    }
    return ss_megatron_set_recompute(o, m, pp, NULL) == SS_OK;
}

/* The neighbour of c by move mv in direction dir (+1 / -1); 0 when the move
 * does not apply. */
static int neighbour(const ss_llm_shape *S, const ss_megatron_config *c, int mv, int dir,
                     ss_megatron_config *o)
{
    *o = *c;
    switch (mv) {
    case MV_TP:
        o->tp = dir > 0 ? c->tp * 2 : c->tp / 2;
        if (o->tp < 1 || o->tp > S->per_host)
            return 0;
        break;
    case MV_PP: {
        int p = c->pp;
        do
            p += dir;
        while (p >= 1 && p <= S->layers && S->layers % p);
        if (p < 1 || p > S->layers)
            return 0;
        o->pp = p;
        o->first = o->last = 0;
        set_rc(o, c->recompute); /* per-rank modes belong to the old pp */
        break;
    }
    case MV_MBS:
        o->mbs = dir > 0 ? c->mbs * 2 : c->mbs / 2;
        if (o->mbs < 1 || o->mbs > 16)
            return 0;
        break;
    case MV_VP: { /* the next vp that divides the pipeline's layers */
        int v = c->vp > 1 ? c->vp : 1, cap = c->pp > 0 ? S->layers / c->pp : 1;
        do
            v += dir;
        while (v >= 1 && v <= cap && c->pp > 0 && S->layers % (c->pp * v));
        if (v < 1 || v > cap)
            return 0;
        o->vp = v;
        o->first = o->last = 0;
        break;
    }
    case MV_RC:
        set_rc(o, (ss_recompute)((c->recompute + (dir > 0 ? 1 : 2)) % 3));
        break;
    case MV_RCSTAGE:
        if (!move_rcstage(o, dir))
            return 0;
        break;
    case MV_SP:
        o->sp = !c->sp;
        break;
    case MV_DOPT: { /* the ZeRO stage: 0 -> 1 -> 3 (parameter sharding) -> 0 */
        static const int z[3] = {0, 1, SS_ZERO3};
        int i = c->distopt == SS_ZERO3 ? 2 : c->distopt ? 1 : 0;
        o->distopt = z[(i + (dir > 0 ? 1 : 2)) % 3];
        break;
    }
    case MV_SYNC:
        o->sync = c->sync == SS_SYNC_BULK ? SS_SYNC_WAIT_FREE : SS_SYNC_BULK;
        break;
    case MV_BUCKET: {
        if (c->sync == SS_SYNC_BULK)
            return 0;
        double b = c->bucket_bytes > 0 ? c->bucket_bytes : 80e6;
        b = dir > 0 ? b * 2 : b / 2;
        if (b < 10e6 || b > 2.56e9)
            return 0;
        o->bucket_bytes = b == 80e6 ? 0 : b;
        break;
    }
    case MV_FIRST:
    case MV_LAST: {
        if (c->pp < 2 || c->vp > 1)
            return 0;
        int per = S->layers / c->pp;
        int *f = mv == MV_FIRST ? &o->first : &o->last;
        int cur = *f ? *f : per;
        /* by one middle stage's count: the rest stays divisible */
        cur += dir * (c->pp > 2 ? c->pp - 2 : 1);
        if (cur < 1 || cur >= S->layers)
            return 0;
        *f = cur == per ? 0 : cur;
        break;
    }
    default:
        return 0;
    }
    o->dp = dp_of(S, o->tp, o->pp);
    if (!o->dp || o->mbs < 1)
        return 0;
    if (o->dp == 1)
        o->distopt = 0;
    if (o->tp == 1)
        o->sp = 0;
    if (o->pp == 1)
        o->vp = 1, o->first = o->last = 0;
    int64_t per = (int64_t)o->dp * o->mbs;
    if (S->batch % per)
        return 0;
    int64_t mb = S->batch / per;
    if (o->pp > 1 && mb < o->pp)
        return 0;
    if (o->vp > 1 && (mb % o->pp || S->layers % (o->pp * o->vp)))
        return 0;
    if (o->vp > 1 && o->distopt == SS_ZERO3) /* not modelled (core/plan.c) */
        return 0;
    if (o->vp > 1)
        o->first = o->last = 0;
    if (o->recompute_rank[0] && !rank_modes_fit(o))
        return 0;
    return memcmp(o, c, sizeof *o) != 0;
}

/* count: 1 for a proposal of a chain, 0 for a level's end */
static void progress(chain *ch, int count)
{
    run *R = ch->R;
    if (!R->cfg->progress)
        return;
    double every = R->cfg->progress_every_s > 0 ? R->cfg->progress_every_s : 0.2;
    pthread_mutex_lock(&R->lock);
    R->proposals += count;
    double now = wall_s();
    int due = now - R->last_progress >= every;
    if (due)
        R->last_progress = now;
    int64_t props = R->proposals;
    double best = R->best_us;
    pthread_mutex_unlock(&R->lock);
    if (due)
        R->cfg->progress(R->cfg->stop_ctx, props, best, now - R->t0);
}

/* One Metropolis-Hastings chain from ch->best over ch->budget proposals. */
static void chain_run(chain *ch)
{
    ss_rng rng;
    ss_rng_seed(&rng, ch->seed);
    ss_llm_point cur = ch->best;
    const double beta = 40; /* a 2.5% slower plan is accepted with probability e^-1 */
    for (int64_t i = 0; i < ch->budget; i++) {
        ss_megatron_config nc;
        int mv = (int)ss_rng_below(&rng, MV_COUNT), dir = ss_rng_below(&rng, 2) ? 1 : -1;
        double u = ss_rng_unit(&rng);
        ch->proposals++;
        progress(ch, 1);
        if (!neighbour(&ch->R->S, &cur.c, mv, dir, &nc))
            continue;
        ss_llm_point p;
        int ok = judge(ch, nc, &p);
        if (ok < 0)
            return;
        if (!ok || !p.fits)
            continue;
        if (p.time_us <= cur.time_us || u < exp(-beta * (p.time_us / cur.time_us - 1)))
            cur = p;
    }
}

/* Whether c's weights, gradients and sharded optimizer state (16 bytes per
 * parameter of mixed precision Adam, the optimizer's 12 over dp) take at
 * most 35% of a device's memory (the rest for activations): the search's
 * shallowest pipelines (a heuristic, never used by the grid). */
static int states_fit_half(const ss_llm_shape *S, int tp, int pp, int dp)
{
    return S->params * (4 + 12.0 / dp) / ((double)tp * pp) <= 0.35 * S->mem_bytes;
}

/* ZeRO-3 where ZeRO-1's states take over 35% of the memory, without a
 * pipeline (as FSDP and DeepSpeed run it): its weights, gradients and
 * state over tp dp, 16 bytes per parameter, up to 60% of the memory; and
 * only where the plan stays below SS_EVAL_HIER_TILES tile entries (at
 * least 16 ops per layer, a tile per device and micro-batch of size 1):
 * the exact evaluators judge it there, the hierarchical one refuses it,
 * and building a bigger plan only to be refused costs seconds. */
static int zero3_only(const ss_llm_shape *S, int tp, int pp, int dp)
{
    double tiles = 16.0 * S->layers * tp * dp * (double)(S->batch / (dp > 0 ? dp : 1));
    return dp > 1 && pp == 1 && !states_fit_half(S, tp, pp, dp) &&
           S->params * 16 / ((double)tp * dp) <= 0.6 * S->mem_bytes &&
           tiles < SS_EVAL_HIER_TILES;
}

/* The mesh sweep. A: every (tp, pp) with tp = the largest power of two up
 * to a host's devices (<= 8) and every smaller power of two, pp a divisor of the layers
 * whose states take at most half the memory, with micro-batch size 1,
 * selective recompute, sp, distopt and bulk sync (ZeRO-3 instead where
 * pp = 1 and only its states fit). B: for the two best, micro-batch size 1
 * and 2, every vp up to 4, selective or no recompute, distopt on or off
 * (and ZeRO-3 where pp = 1). The mesh and the pipeline move the best time most and
 * a chain crosses them only step by step. */
static int sweep(chain *ch, const ss_llm_point *start)
{
    const ss_llm_shape *S = &ch->R->S;
    ss_llm_point top[3], z3top; /* the two best; the best ZeRO-3 point */
    int n_top = 0, have_z3 = 0;
    int tpmax = 1;
    while (tpmax * 2 <= S->per_host && tpmax * 2 <= 8)
        tpmax *= 2;
    /* deep pipelines first: they are cheap to judge, the shallow ones (big
     * stages) cost seconds each on big models, so a time limit cuts those */
    for (int tp = tpmax; tp >= 1; tp /= 2)
        for (int pp = S->layers; pp >= 1; pp--) {
            int dp = dp_of(S, tp, pp);
            int z3 = zero3_only(S, tp, pp, dp);
            if (S->layers % pp || !dp || (!states_fit_half(S, tp, pp, dp) && !z3))
                continue;
            ss_megatron_config c = {.tp = tp, .pp = pp, .dp = dp, .mbs = 1,
                                    .recompute = SS_RECOMPUTE_SELECTIVE, .sp = tp > 1,
                                    .distopt = z3 ? SS_ZERO3 : dp > 1,
                                    .sync = z3 ? SS_SYNC_WAIT_FREE : SS_SYNC_BULK};
            if (S->batch % dp || (pp > 1 && S->batch / dp < pp))
                continue;
            ss_llm_point p;
            int ok = judge(ch, c, &p);
            if (ok < 0)
                return -1;
            if (z3 && S->batch % (2 * (int64_t)dp) == 0) { /* and a bigger micro-batch */
                ss_llm_point p2;
                c.mbs = 2;
                int ok2 = judge(ch, c, &p2);
                if (ok2 < 0)
                    return -1;
                if (ok2 && p2.fits && (!ok || !p.fits || p2.time_us < p.time_us)) {
                    p = p2;
                    ok = 1;
                }
            }
            if (!ok || !p.fits)
                continue;
            if (z3 && (!have_z3 || p.time_us < z3top.time_us)) {
                z3top = p;
                have_z3 = 1;
            }
            if (n_top < 2)
                top[n_top++] = p;
            else if (p.time_us < top[1].time_us)
                top[1] = p;
            if (n_top == 2 && top[1].time_us < top[0].time_us) {
                ss_llm_point t = top[0];
                top[0] = top[1];
                top[1] = t;
            }
        }
    if (!n_top)
        top[n_top++] = *start;
    /* the best ZeRO-3 point too: a bigger micro-batch may fit only there */
    if (have_z3 && top[0].c.distopt != SS_ZERO3 && (n_top < 2 || top[1].c.distopt != SS_ZERO3))
        top[n_top++] = z3top;
    for (int k = 0; k < n_top; k++)
        for (int mbs = 1; mbs <= 2; mbs++)
            for (int vp = 1; vp <= 4; vp++)
                for (int rc = 0; rc < 2; rc++)
                    for (int dopt = 2; dopt >= 0; dopt--) {
                        ss_megatron_config c = top[k].c;
                        int pp = c.pp;
                        c.mbs = mbs;
                        c.vp = vp;
                        c.first = c.last = 0;
                        set_rc(&c, rc ? SS_RECOMPUTE_NONE : SS_RECOMPUTE_SELECTIVE);
                        /* dopt 2: ZeRO-3, without a pipeline only */
                        c.distopt = c.dp > 1 && dopt ? (dopt == 2 ? SS_ZERO3 : 1) : 0;
                        if ((c.dp == 1 && !dopt) || (dopt == 2 && (c.dp == 1 || pp > 1)))
                            continue;
                        int64_t per = (int64_t)c.dp * mbs;
                        int64_t mb = S->batch % per ? 0 : S->batch / per;
                        if (!mb || (pp > 1 && mb < pp) ||
                            (vp > 1 && (pp < 2 || mb % pp || S->layers % (pp * vp))))
                            continue;
                        ss_llm_point p;
                        if (judge(ch, c, &p) < 0)
                            return -1;
                    }
    return 0;
}

/* Per-stage recompute fit: for start's structure and each pair of modes
 * (hi saving more memory than lo: selective / none, full / selective,
 * full / none), the fewest first pipeline ranks k (a binary search over 1
 * .. pp - 1: more ranks with hi hold less) that run hi, the rest lo, and
 * fit, each judged (judge() keeps the fastest that fits). 0, or -1 when
 * stopped. */
static int fit_stages(chain *ch, const ss_megatron_config *start, int only_lo)
{
    static const int pairs[3][2] = {{1, 0}, {2, 1}, {2, 0}}; /* rc_level of hi, lo */
    int pp = start->pp;
    if (pp < 2 || !rank_modes_fit(start))
        return 0;
    ss_recompute m[SS_PLAN_MAX_RECOMPUTE_STAGES];
    for (int i = 0; i < 3; i++)
        for (int a = 1, b = pp - 1; a <= b && (only_lo < 0 || pairs[i][1] == only_lo);) {
            int k = (a + b) / 2;
            ss_megatron_config c = *start;
            for (int r = 0; r < pp; r++)
                m[r] = rc_of_level[pairs[i][r >= k]];
            if (ss_megatron_set_recompute(&c, m, pp, NULL))
                return 0;
            ss_llm_point p;
            int ok = judge(ch, c, &p);
            if (ok < 0)
                return -1;
            if (ok && p.fits)
                b = k - 1;
            else
                a = k + 1;
        }
    return 0;
}

/* The cached points that did not fit with one recompute mode but ran
 * faster than the best: per-stage recompute may make them fit (more
 * recompute on the first ranks only). fit_stages for the FIT_SLOW fastest,
 * with that mode on the last ranks. */
#define FIT_SLOW 3
static int fit_memory_bound(chain *ch)
{
    ss_llm_point cand[FIT_SLOW];
    int n = 0;
    for (int i = 0; i < ch->n_cache; i++) {
        const ss_llm_point *q = &ch->cache[i];
        if (q->fits || !(q->time_us < ch->best.time_us) || q->c.recompute_rank[0] ||
            q->c.recompute == SS_RECOMPUTE_FULL || q->c.pp < 2)
            continue;
        int at = n < FIT_SLOW ? n++ : FIT_SLOW;
        while (at > 0 && cand[at - 1].time_us > q->time_us) {
            if (at < FIT_SLOW)
                cand[at] = cand[at - 1];
            at--;
        }
        if (at < FIT_SLOW)
            cand[at] = *q;
    }
    for (int i = 0; i < n; i++)
        if (fit_stages(ch, &cand[i].c, rc_level(cand[i].c.recompute)) < 0)
            return -1;
    return 0;
}

/* fit_stages for the best and the next FIT_NEAR distinct structures of the
 * near list (each fit costs up to 3 log2(pp) judgements). */
#define FIT_NEAR 2
static int fit_near(chain *ch)
{
    ss_llm_point list[SS_LLM_NEAR_MAX + 1];
    int n = 0, fitted = 0;
    list[n++] = ch->best;
    for (int i = 0; i < ch->n_near && n < SS_LLM_NEAR_MAX + 1; i++)
        list[n++] = ch->near[i];
    for (int i = 0; i < n && fitted <= FIT_NEAR; i++) {
        int dup = 0;
        for (int j = 0; j < i && !dup; j++) {
            ss_megatron_config a = list[i].c, b = list[j].c;
            set_rc(&a, SS_RECOMPUTE_NONE);
            set_rc(&b, SS_RECOMPUTE_NONE);
            dup = !memcmp(&a, &b, sizeof a);
        }
        if (dup)
            continue;
        fitted++;
        if (fit_stages(ch, &list[i].c, -1) < 0)
            return -1;
    }
    return fit_memory_bound(ch);
}

/* Every one-knob neighbour of the best until none is faster. */
static void polish(chain *ch)
{
    for (int improved = 1; improved;) {
        improved = 0;
        ss_llm_point base = ch->best;
        for (int mv = 0; mv < MV_COUNT && !improved; mv++)
            for (int dir = -1; dir <= 1 && !improved; dir += 2) {
                ss_megatron_config nc;
                if (!neighbour(&ch->R->S, &base.c, mv, dir, &nc))
                    continue;
                ss_llm_point p;
                int ok = judge(ch, nc, &p);
                if (ok < 0)
                    return;
                improved = ok && p.fits && p.time_us < base.time_us;
            }
    }
}

static void *chain_main(void *arg)
{
    chain *ch = arg;
    if (!ch->st)
        chain_run(ch);
    return NULL;
}

static void chain_free(chain *ch)
{
    ss_llm_judge_free(ch->j);
    ss_free(ch->cache);
}

static void merge(ss_llm_result *r, const chain *ch, int64_t batch, double band)
{
    r->proposals += ch->proposals;
    r->evaluations += ch->evaluations;
    r->cached += ch->cached;
    r->infeasible += ch->infeasible;
    for (int k = 0; k < ch->n_near; k++)
        ss_llm_near_add(r->near, &r->n_near, &ch->near[k], band, batch);
}

/* Level 2 (search/level2.h) within its share of the time left; its plan
 * and judged time into r. A level 2 that finds nothing, or a machine it
 * does not support, is no error: r->level2_note says why. */
static ss_status level2(run *R, ss_llm_result *r, ss_diag *d)
{
    const ss_llm_config *cfg = R->cfg;
    ss_level2_config lc;
    memset(&lc, 0, sizeof lc);
    r->level2_us = HUGE_VAL;
    if (cfg->deadline > 0) {
        double left = cfg->deadline - R->reserve - wall_s();
        lc.time_limit_s = left * (cfg->level2_share > 0 ? cfg->level2_share : 0.8);
        if (lc.time_limit_s < 0.05) {
            snprintf(r->level2_note, sizeof r->level2_note,
                     "skipped: the time limit left it %.2f s", lc.time_limit_s);
            r->level2_time_dependent = 1;
            return SS_OK;
        }
    }
    lc.threads = ss_llm_threads(cfg->threads);
    lc.stop = run_stop;
    lc.stop_ctx = R;
    r->level2_run = 1;
    ss_diag dl;
    ss_diag_init(&dl);
    ss_status st = ss_level2_plan(R->g, R->m, R->cm, &lc, &r->level2_plan, &r->level2, &dl);
    r->level2_time_dependent =
        r->level2.time_limited || r->level2.stopped || r->level2.ilp_time_limited > 0;
    if (st == SS_ERR_NOMEM)
        return ss_diag_set(d, st, "%s", dl.msg);
    if (st) {
        snprintf(r->level2_note, sizeof r->level2_note, "%.150s", dl.msg);
        return SS_OK;
    }
    /* its finalists were simulated by the judge of this module's points (the
     * hierarchical evaluator past 64 devices, AUTO below); a plan that only
     * the full simulation could judge on a big machine was not, and does
     * not compete */
    if (r->level2.simulated > 0 && r->level2.simulated_us > 0) {
        r->level2_us = r->level2.simulated_us;
        pthread_mutex_lock(&R->lock);
        if (r->level2_us < R->best_us)
            R->best_us = r->level2_us; /* for progress */
        pthread_mutex_unlock(&R->lock);
    } else
        snprintf(r->level2_note, sizeof r->level2_note,
                 "not judged: only the full simulation could judge its plan on %d devices",
                 ss_machine_n_devices(R->m));
    return SS_OK;
}

ss_status ss_llm_search(const ss_graph *g, const ss_machine *m, ss_costmodel *cm,
                        const ss_llm_config *cfg, ss_llm_result *r, ss_diag *d)
{
    memset(r, 0, sizeof *r);
    run R;
    memset(&R, 0, sizeof R);
    R.g = g;
    R.m = m;
    R.cm = cm;
    R.cfg = cfg;
    R.t0 = wall_s();
    R.band = cfg->band > 0 ? cfg->band : 0.08;
    R.best_us = HUGE_VAL;
    ss_llm_shape_of(g, m, &R.S);
    if (R.S.layers < 2 || R.S.batch <= 0)
        return ss_diag_set(d, SS_ERR_UNSUPPORTED,
                           "LLM planner: model \"%s\" has no repeated layers (or no batch)",
                           ss_graph_name(g));
    pthread_mutex_init(&R.lock, NULL);
    int threads = ss_llm_threads(cfg->threads);
    chain *ch = ss_calloc((size_t)threads, sizeof *ch);
    ss_status st = ch ? SS_OK : ss_diag_set(d, SS_ERR_NOMEM, "LLM planner: out of memory");
    /* chain 0's judge now; the others' when level 3 starts (a short time
     * limit spends nothing on them) */
    for (int i = 0; i < threads && !st; i++) {
        ch[i].R = &R;
        ss_diag_init(&ch[i].d);
    }
    if (!st)
        st = ss_llm_judge_new(g, m, cm, threads > 1 ? 2 : 0, run_stop, &R, &ch[0].j, d);
    /* levels 0-1 on chain 0 */
    chain *c0 = st ? NULL : &ch[0];
    int found = 0;
    if (c0) {
        found = level0(c0, &r->rule);
        r->first_plan_s = wall_s() - R.t0;
        const ss_plan *first = found > 0 ? ss_llm_judge_plan(c0->j, &r->rule.c) : NULL;
        if (first && cfg->first_plan)
            cfg->first_plan(cfg->stop_ctx, first);
        progress(c0, 0); /* a line after each level (and every so often in level 3) */
        pthread_mutex_lock(&R.lock);
        R.have_plan = 1;
        R.reserve = 2.5 * r->first_plan_s;
        pthread_mutex_unlock(&R.lock);
        if (found > 0 && cfg->level >= 1)
            found = level1(c0, &r->rule) < 0 ? -1 : 1;
        if (found > 0 && cfg->level >= 1)
            progress(c0, 0);
        if (!st && c0->st)
            st = ss_diag_set(d, c0->st, "%s", c0->d.msg);
    }
    /* level 3: chains from the level-1 best */
    if (!st && found > 0 && cfg->level >= 3) {
        int64_t budget = cfg->budget > 0 ? cfg->budget : 100;
        pthread_t th[64];
        int started = 0;
        if (sweep(c0, &c0->best) == 0)
            polish(c0);
        if (!R.stopped && fit_near(c0) == 0)
            polish(c0);
        for (int i = 1; i < threads; i++) /* a chain without a judge does not run */
            ch[i].st = ss_llm_judge_new(g, m, cm, 1, run_stop, &R, &ch[i].j, &ch[i].d);
        for (int i = 0; i < threads; i++) {
            ch[i].best = c0->best;
            ch[i].found = 1;
            ch[i].budget = budget / threads + (i < budget % threads);
            ch[i].seed = cfg->seed * 0x9e3779b97f4a7c15ULL + (uint64_t)i + 1;
        }
        for (int i = 1; i < threads; i++) {
            if (pthread_create(&th[i], NULL, chain_main, &ch[i]))
                break;
            started = i;
        }
        chain_main(&ch[0]);
        for (int i = 1; i <= started; i++)
            pthread_join(th[i], NULL);
        for (int i = started + 1; i < threads; i++) /* no thread: run here */
            chain_main(&ch[i]);
        /* the best of all chains, polished on chain 0 */
        for (int i = 1; i < threads; i++)
            if (ch[i].found && (ch[i].best.time_us < c0->best.time_us ||
                                (ch[i].best.time_us == c0->best.time_us &&
                                 memcmp(&ch[i].best.c, &c0->best.c, sizeof c0->best.c) < 0)))
                c0->best = ch[i].best;
        polish(c0);
        for (int i = 0; i < threads && !st; i++)
            if (ch[i].st)
                st = ss_diag_set(d, ch[i].st, "%s", ch[i].d.msg);
    }
    /* level 2 last, in the time left: level 3 keeps its time on the models
     * where it matters most (GPT-3 175B / 1,024: level 3 17,964.9 ms, level 2
     * 23,074.4 ms) */
    if (!st && c0 && found >= 0 && cfg->level >= 2 && !R.stopped) {
        st = level2(&R, r, d);
        run_stop(&R); /* a stop asked during level 2's finalists is recorded */
        progress(c0, 0);
    } else if (!st && c0 && cfg->level >= 2) {
        snprintf(r->level2_note, sizeof r->level2_note, "not run: the search was %s before it",
                 R.interrupted ? "interrupted" : R.time_cut ? "cut by the time limit" : "stopped");
        r->level2_time_dependent = R.time_cut;
    }
    if (!st && c0) {
        for (int i = 0; i < threads; i++)
            merge(r, &ch[i], R.S.batch, R.band);
        r->found = found > 0 || c0->found;
        if (r->found) {
            r->best = c0->best;
            /* the near list holds the best first (same order) */
            ss_llm_near_add(r->near, &r->n_near, &r->best, R.band, R.S.batch);
            if (r->n_near > 0 && r->near[0].time_us < r->best.time_us)
                r->best = r->near[0];
        }
    }
    r->time_cut = R.time_cut;
    r->interrupted = R.interrupted;
    r->time_s = wall_s() - R.t0;
    if (st) {
        ss_plan_free(r->level2_plan);
        r->level2_plan = NULL;
    }
    if (ch && !st) {
        r->judge = ch[0].j; /* kept for the final simulations */
        ch[0].j = NULL;
    }
    for (int i = 0; ch && i < threads; i++)
        chain_free(&ch[i]);
    ss_free(ch);
    pthread_mutex_destroy(&R.lock);
    return st;
}
