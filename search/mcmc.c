/*
 * mcmc.c — Metropolis–Hastings chains over plans (mcmc.h).
 *
 * One search object holds the current plan `cur` (the judge's committed
 * base), the best plan seen, the proposal scratch and the statistics. A
 * proposal overwrites one op of `cur`, asks the judge (changed = op),
 * and either commits or restores the op's old config, so between proposals
 * `cur` always equals the judge's base. Invariant: `best` is only ever
 * replaced by a plan that is better under `better()` (fits first, then time,
 * then overflow), so the best never gets worse.
 */
#include "search/mcmc.h"

#include "search/classes.h"
#include "search/evalcache.h"

#include <math.h>
#include <string.h>
#include <time.h>

/* Local moves draw this many random candidates and keep the nearest. */
#define NEAR_K 4

/* A partition of the ops in CSR form: the members of op's set are
 * mem[off[of[op]] .. off[of[op] + 1]). */
typedef struct opsets {
    int *of, *off, *mem;
} opsets;

static int set_size(const opsets *x, int op) { return x->off[x->of[op] + 1] - x->off[x->of[op]]; }

static const int *set_members(const opsets *x, int op) { return x->mem + x->off[x->of[op]]; }

typedef struct search {
    const ss_space *sp;
    const ss_graph *g;
    const ss_search_judge *ev;
    const ss_mcmc_config *cfg;
    ss_rng rng;
    ss_plan *cur, *best;
    ss_eval cur_e, best_e;
    int have_best;
    ss_pconfig prop;          /* proposal scratch: devices in prop_dev */
    int *prop_dev;
    int *nbr;                 /* neighbour op scratch */
    opsets grp;               /* ops sharing their first weight (group moves) */
    opsets cls;               /* structural classes (classes.h; class moves) */
    double *gcum;             /* per group: running sum of its first weight's bytes
                                 (weight moves draw a group by it); n_groups entries */
    int n_groups;
    ss_pconfig *gold;         /* saved configs of a group move */
    int *gold_dev, *moved;
    int n_moved, maxt;
    ss_pconfig near[NEAR_K];  /* local move scratch: candidates, devices in near_dev[k] */
    int *near_dev[NEAR_K];
    unsigned char *had;       /* per device: in the current config (local moves) */
    double *pcum;             /* per op: running sum of the base's critical-path time */
    int path_stale;           /* the base changed since pcum was built */
    int path_known;           /* pcum holds a path with time on it */
    int *targets;
    double *best_path;        /* path_ops of the best plan when it was committed */
    int best_path_ok;
    ss_evalcache *cache;      /* earlier evaluations (NULL: off) */
    ss_planhash key;          /* cache key of cur: the XOR of ophash[] */
    ss_planhash *ophash;      /* per op: the hash of its config in cur */
    ss_planhash *gold_hash;   /* ophash of the ops a move changed, before it */
    double p_group, p_segment, p_class, p_heavy, p_path, p_local, explore;
    int exploiting;           /* in the exploitation chain (local moves only there) */
    double beta, beta_now, p_nbr, t0, next_progress;
    int64_t budget, patience, restart_after, last_improve;
    ss_mcmc_stats st;
    int stopped;
    /* every improvement of the best, for st.best_half_us */
    struct improvement {
        int64_t at; /* the proposal count when it was found */
        double us;  /* st.best_us after it */
    } *imp;
    int n_imp, cap_imp;
} search;

double ss_mcmc_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

const char *ss_mcmc_stop_name(ss_mcmc_stop s)
{
    switch (s) {
    case SS_MCMC_STOP_BUDGET: return "budget";
    case SS_MCMC_STOP_TIME: return "time limit";
    case SS_MCMC_STOP_PATIENCE: return "no improvement";
    case SS_MCMC_STOP_USER: return "interrupted";
    }
    return "?";
}

/* Is a strictly better than b? Fitting beats not fitting; among fitting
 * plans the faster; among overflowing plans the smaller overflow. */
static int better(const ss_eval *a, const ss_eval *b)
{
    if (a->fits != b->fits)
        return a->fits;
    if (a->fits)
        return a->time_us < b->time_us;
    return a->overflow_bytes < b->overflow_bytes;
}

/* Metropolis–Hastings acceptance of moving from a to b, with the uniform u
 * drawn before the evaluation. */
static int accept(const search *s, const ss_eval *from, const ss_eval *to, double u)
{
    if (from->fits && !to->fits)
        return 0;
    if (!from->fits && to->fits)
        return 1;
    double rel;
    if (to->fits)
        rel = (from->time_us - to->time_us) / from->time_us;
    else
        rel = (from->overflow_bytes - to->overflow_bytes) / from->overflow_bytes;
    if (rel >= 0)
        return 1;
    return u < exp(s->beta_now * rel);
}

static int same_config(const ss_pconfig *a, const ss_pconfig *b)
{
    return a->stage == b->stage && ss_pconfig_same_tiles(a, b);
}

/* src into dst, its devices into buf (room for src->ntiles). */
static void copy_config(ss_pconfig *dst, int *buf, const ss_pconfig *src)
{
    *dst = *src;
    memcpy(buf, src->devices, (size_t)src->ntiles * sizeof *buf);
    dst->devices = buf;
}

/* Evaluate p through the judge with the move's acceptance threshold
 * (HUGE_VAL: exact); *ok = 0 when the plan cannot run (INVALID /
 * INFEASIBLE), which is not an error of the search; e->beyond = 1 when the
 * judge stopped early (counted as cut, not as an evaluation). */
static ss_status evaluate(search *s, const ss_plan *p, int changed, double cutoff_us, ss_eval *e,
                          int *ok, ss_diag *d)
{
    ss_diag local;
    ss_diag_init(&local);
    memset(e, 0, sizeof *e);
    ss_status st = s->ev->eval(s->ev->ctx, p, changed, cutoff_us, e, &local);
    if (st == SS_ERR_INTERRUPTED) { /* the stop callback, polled inside: not judged */
        *ok = 0;
        s->stopped = 1;
        s->st.stopped_by = SS_MCMC_STOP_USER;
        return SS_OK;
    }
    if (st == SS_OK && e->beyond) {
        s->st.cut++;
        *ok = 1;
        return SS_OK;
    }
    e->beyond = 0;
    s->st.evaluations++;
    if (st == SS_ERR_INVALID || st == SS_ERR_INFEASIBLE) {
        *ok = 0;
        s->st.infeasible++;
        return SS_OK;
    }
    if (st != SS_OK)
        return ss_diag_set(d, st, "%s", local.msg[0] ? local.msg : ss_status_name(st));
    *ok = 1;
    if (!e->fits)
        s->st.infeasible++;
    return SS_OK;
}

/* Lower bound of p through the judge (0 when it has none). */
static ss_status bound(search *s, const ss_plan *p, int changed, double *lb, ss_diag *d)
{
    *lb = 0;
    if (!s->ev->bound)
        return SS_OK;
    ss_diag local;
    ss_diag_init(&local);
    ss_status st = s->ev->bound(s->ev->ctx, p, changed, lb, &local);
    if (st == SS_ERR_INVALID || st == SS_ERR_INFEASIBLE) {
        *lb = 0;
        return SS_OK;
    }
    if (st)
        return ss_diag_set(d, st, "%s", local.msg[0] ? local.msg : ss_status_name(st));
    return SS_OK;
}

static void commit(search *s)
{
    if (s->ev->commit)
        s->ev->commit(s->ev->ctx);
    s->path_stale = 1;
}

static double elapsed(const search *s) { return ss_mcmc_now() - s->t0; }

/* Record cur as best if better. */
static ss_status note_best(search *s, ss_diag *d)
{
    if (s->have_best && !better(&s->cur_e, &s->best_e))
        return SS_OK;
    if (ss_plan_copy(s->best, s->cur) != SS_OK)
        return ss_diag_set(d, SS_ERR_NOMEM, "search: out of memory");
    s->best_e = s->cur_e;
    s->have_best = 1;
    /* the judge's path for the committed plan, for restore() */
    const double *pp = s->ev->restore && s->ev->path_ops ? s->ev->path_ops(s->ev->ctx) : NULL;
    s->best_path_ok = pp && s->best_path;
    if (s->best_path_ok)
        memcpy(s->best_path, pp, (size_t)ss_graph_n_ops(s->g) * sizeof *pp);
    s->st.best_us = s->best_e.fits ? s->best_e.time_us : HUGE_VAL;
    s->st.best_at_s = elapsed(s);
    s->st.best_at_proposal = s->st.proposals;
    s->last_improve = s->st.proposals;
    if (ss_grow((void **)&s->imp, &s->cap_imp, s->n_imp + 1, sizeof *s->imp))
        return ss_diag_set(d, SS_ERR_NOMEM, "search: out of memory");
    s->imp[s->n_imp].at = s->st.proposals;
    s->imp[s->n_imp++].us = s->st.best_us;
    return SS_OK;
}

/* The best time after the first half of the proposals (st.best_half_us). */
static double best_at_half(const search *s)
{
    double us = HUGE_VAL;
    for (int i = 0; i < s->n_imp && s->imp[i].at <= s->st.proposals / 2; i++)
        us = s->imp[i].us;
    return us;
}

/* Check the stopping rules; sets s->stopped and the reason. */
static int should_stop(search *s)
{
    if (s->stopped)
        return 1;
    ss_mcmc_stop why;
    if (s->cfg->stop && s->cfg->stop(s->cfg->cb_ctx))
        why = SS_MCMC_STOP_USER;
    else if (s->st.proposals >= s->budget)
        why = SS_MCMC_STOP_BUDGET;
    else if (s->cfg->time_limit_s > 0 && elapsed(s) >= s->cfg->time_limit_s) {
        why = SS_MCMC_STOP_TIME;
        s->st.time_cut = 1;
    }
    else if (s->patience > 0 && s->st.proposals - s->last_improve >= s->patience)
        why = SS_MCMC_STOP_PATIENCE;
    else
        return 0;
    s->stopped = 1;
    s->st.stopped_by = why;
    return 1;
}

static void progress(search *s)
{
    if (!s->cfg->progress)
        return;
    double now = elapsed(s);
    if (now < s->next_progress)
        return;
    s->next_progress = now + (s->cfg->progress_every_s > 0 ? s->cfg->progress_every_s : 0.2);
    s->st.time_s = now;
    s->st.evals_per_s = now > 0 ? (double)s->st.evaluations / now : 0;
    s->cfg->progress(s->cfg->cb_ctx, &s->st);
}

/* Neighbours of op: producers of its inputs and consumers of its outputs. */
static int neighbours(search *s, int op)
{
    const ss_op *o = ss_graph_op(s->g, op);
    int n = 0, cap = ss_graph_n_ops(s->g);
    for (int i = 0; i < o->n_in && n < cap; i++) {
        const ss_tensor *t = ss_graph_tensor(s->g, o->inputs[i]);
        if (t && t->producer >= 0)
            s->nbr[n++] = t->producer;
    }
    for (int j = 0; j < o->n_out; j++) {
        int nc = ss_graph_n_consumers(s->g, o->outputs[j]);
        for (int k = 0; k < nc && n < cap; k++)
            s->nbr[n++] = ss_graph_consumer(s->g, o->outputs[j], k);
    }
    return n;
}

/* How far candidate c is from the current config cur: the summed |log2|
 * of the degree and reduction ratios, plus the share of c's tiles on
 * devices cur does not use (s->had marks cur's devices). */
static double config_distance(const search *s, const ss_pconfig *cur, const ss_pconfig *c)
{
    double dist = fabs(log2((double)c->red / (double)cur->red));
    for (int k = 0; k < c->ndim && k < cur->ndim; k++)
        dist += fabs(log2((double)c->deg[k] / (double)cur->deg[k]));
    int away = 0;
    for (int t = 0; t < c->ntiles; t++)
        away += !s->had[c->devices[t]];
    return dist + (double)away / (double)c->ntiles;
}

/* A local move: the nearest (config_distance) of NEAR_K random candidates
 * of op that differ from its current config, into s->prop; the first
 * random candidate when all equal the current one. */
static void propose_near(search *s, int op, const ss_pconfig *cur)
{
    int nd = ss_space_n_devices(s->sp); /* a start plan may use devices beyond the space's */
    for (int t = 0; t < cur->ntiles; t++)
        if (cur->devices[t] >= 0 && cur->devices[t] < nd)
            s->had[cur->devices[t]] = 1;
    int best = -1;
    double best_d = HUGE_VAL;
    for (int k = 0; k < NEAR_K; k++) {
        ss_space_random(s->sp, op, &s->rng, &s->near[k], s->near_dev[k]);
        s->near[k].stage = cur->stage;
        if (same_config(&s->near[k], cur))
            continue;
        double dk = config_distance(s, cur, &s->near[k]);
        if (dk < best_d) {
            best_d = dk;
            best = k;
        }
    }
    for (int t = 0; t < cur->ntiles; t++)
        if (cur->devices[t] >= 0 && cur->devices[t] < nd)
            s->had[cur->devices[t]] = 0;
    copy_config(&s->prop, s->prop_dev, &s->near[best < 0 ? 0 : best]);
}

/* Draw a proposal for op into s->prop (stage kept from the current config). */
static void propose(search *s, int op)
{
    const ss_pconfig *c = ss_plan_config(s->cur, op);
    int done = 0;
    if (s->p_nbr > 0 && ss_rng_unit(&s->rng) < s->p_nbr) {
        int n = neighbours(s, op);
        if (n > 0) {
            const ss_pconfig *nc = ss_plan_config(s->cur, s->nbr[ss_rng_below(&s->rng, n)]);
            if (nc->ndim == c->ndim) {
                copy_config(&s->prop, s->prop_dev, nc);
                done = ss_space_allows(s->sp, op, &s->prop);
            }
        }
    }
    if (!done && s->exploiting && s->p_local > 0 && ss_rng_unit(&s->rng) < s->p_local) {
        propose_near(s, op, c);
        done = 1;
    }
    if (!done)
        ss_space_random(s->sp, op, &s->rng, &s->prop, s->prop_dev);
    s->prop.stage = c->stage;
}

/* The cache key of cur from scratch (after cur was replaced). */
static void rehash(search *s)
{
    if (!s->cache)
        return;
    s->key.a = s->key.b = 0;
    for (int op = 0; op < ss_plan_n_ops(s->cur); op++) {
        s->ophash[op] = ss_evalcache_config_hash(op, ss_plan_config(s->cur, op));
        s->key.a ^= s->ophash[op].a;
        s->key.b ^= s->ophash[op].b;
    }
}

/* Op o's config hash becomes h: into ophash[] and the key. */
static void set_hash(search *s, int o, ss_planhash h)
{
    s->key.a ^= s->ophash[o].a ^ h.a;
    s->key.b ^= s->ophash[o].b ^ h.b;
    s->ophash[o] = h;
}

/* Op o of cur changed: its new hash into ophash[] and the key. */
static void rehash_op(search *s, int o)
{
    set_hash(s, o, ss_evalcache_config_hash(o, ss_plan_config(s->cur, o)));
}

/* Move cur to plan p (fresh evaluation, or the best plan restored) and
 * commit it. *ok as evaluate. */
static ss_status jump(search *s, const ss_plan *p, int *ok, ss_diag *d)
{
    ss_eval e;
    double lb;
    ss_status st = bound(s, p, -1, &lb, d);
    if (st)
        return st;
    /* the best plan was simulated when it became the best: its answer and
     * its path are known, and the judge may take them back */
    int restored = p == s->best && s->have_best && s->ev->restore &&
                   s->ev->restore(s->ev->ctx, p, s->best_path_ok ? s->best_path : NULL);
    if (restored) {
        e = s->best_e;
        *ok = 1;
        s->st.restored++;
    } else {
        st = evaluate(s, p, -1, HUGE_VAL, &e, ok, d);
        if (st || !*ok)
            return st;
    }
    if (p != s->cur && ss_plan_copy(s->cur, p) != SS_OK)
        return ss_diag_set(d, SS_ERR_NOMEM, "search: out of memory");
    rehash(s);
    if (restored)
        s->path_stale = 1; /* what commit() does besides the judge's commit */
    else
        commit(s);
    s->cur_e = e;
    s->st.restarts++;
    return note_best(s, d);
}

/* Defaults of the schedule (docs/search.md, "Schedule"): the share of the
 * budget and time limit given to the hot exploration chains, and the
 * bounds of the restart interval (budget / 20 clamped to them, so a search
 * bounded by time rather than proposals still returns to its best). */
#define EXPLORE_SHARE 0.25
#define RESTART_MIN 100
#define RESTART_MAX 150

/* Defaults of the chain: the share of weight moves and the acceptance
 * sharpness (A/B measurements in docs/experiments.md, "Weight moves" and
 * "Acceptance sharpness"). */
#define P_HEAVY 0.5
#define P_PATH 0.9
#define P_LOCAL 0.8
#define BETA 250.0
#define P_CLASS 0.5
#define CLASS_ROUNDS 1

enum { MOVE_ONE = 0, MOVE_GROUP, MOVE_CLASS, MOVE_SEGMENT };
#define SEGMENT_MAX 8

/* Ops a move touches, into s->targets: op alone; every op sharing op's
 * first weight (group); every op of op's structural class (class); or a
 * chain through op along single-consumer edges, each step taken with
 * probability 3/4, at most SEGMENT_MAX each way. */
static int move_targets(search *s, int op, int kind)
{
    int n = 0;
    if (kind == MOVE_GROUP || kind == MOVE_CLASS) {
        const opsets *x = kind == MOVE_GROUP ? &s->grp : &s->cls;
        n = set_size(x, op);
        memcpy(s->targets, set_members(x, op), (size_t)n * sizeof *s->targets);
        return n;
    }
    s->targets[n++] = op;
    if (kind != MOVE_SEGMENT)
        return n;
    int cur = op;
    for (int k = 0; k < SEGMENT_MAX && ss_rng_unit(&s->rng) < 0.75; k++) {
        int t = ss_graph_out(s->g, cur);
        if (ss_graph_n_consumers(s->g, t) != 1)
            break;
        cur = ss_graph_consumer(s->g, t, 0);
        s->targets[n++] = cur;
    }
    cur = op;
    for (int k = 0; k < SEGMENT_MAX && ss_rng_unit(&s->rng) < 0.75; k++) {
        const ss_op *o = ss_graph_op(s->g, cur);
        if (o->n_in < 1)
            break;
        int prod = ss_graph_tensor(s->g, o->inputs[0])->producer;
        if (prod < 0 || ss_graph_n_consumers(s->g, ss_graph_out(s->g, prod)) != 1)
            break;
        cur = prod;
        s->targets[n++] = cur;
    }
    return n;
}

/* Index i in [0, n) drawn with probability proportional to cum[i] -
 * cum[i - 1] (cum: running sums, cum[n - 1] > 0). */
static int draw_cumulative(search *s, const double *cum, int n)
{
    double x = ss_rng_unit(&s->rng) * cum[n - 1];
    int lo = 0, hi = n - 1;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (cum[mid] > x)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

/* An op for a weight move: a group drawn with probability proportional to
 * its first weight's bytes (gradient synchronisation and optimizer state
 * scale with them, so the large embeddings and projections that expose
 * communication under data parallelism are drawn most), then one of the
 * group's ops. Only called when some op has a weight (p_heavy > 0). */
static int heavy_op(search *s)
{
    int lo = draw_cumulative(s, s->gcum, s->n_groups);
    int n = s->grp.off[lo + 1] - s->grp.off[lo];
    return s->grp.mem[s->grp.off[lo] + (int)ss_rng_below(&s->rng, n)];
}

/* An op for a path move: drawn with probability proportional to the time
 * the base plan's critical path spends in it (the judge's path_ops,
 * fetched again after every commit); uniform when the judge knows no
 * path. */
static int path_op(search *s)
{
    int n = ss_graph_n_ops(s->g);
    if (s->path_stale) {
        const double *w = s->ev->path_ops ? s->ev->path_ops(s->ev->ctx) : NULL;
        double sum = 0;
        for (int i = 0; w && i < n; i++) {
            sum += w[i] > 0 ? w[i] : 0;
            s->pcum[i] = sum;
        }
        s->path_known = w && sum > 0;
        s->path_stale = 0;
    }
    if (!s->path_known)
        return (int)ss_rng_below(&s->rng, n);
    return draw_cumulative(s, s->pcum, n);
}

/* Apply s->prop to the move's ops that may take it (op itself always); the
 * old configs are saved in gold[] for undo_move. */
static ss_status apply_move(search *s, int op, int kind, ss_diag *d)
{
    ss_diag sd;
    ss_diag_init(&sd);
    s->n_moved = 0;
    int n = move_targets(s, op, kind);
    for (int k = 0; k < n; k++) {
        int o = s->targets[k];
        const ss_pconfig *c = ss_plan_config(s->cur, o);
        if (o != op && (!ss_space_allows(s->sp, o, &s->prop) || same_config(c, &s->prop)))
            continue;
        copy_config(&s->gold[s->n_moved], s->gold_dev + (size_t)s->n_moved * s->maxt, c);
        int stage = s->prop.stage;
        s->prop.stage = c->stage;
        ss_status st = ss_plan_set_config(s->cur, o, &s->prop, &sd);
        s->prop.stage = stage;
        if (st)
            return ss_diag_set(d, sd.status, "%s", sd.msg);
        if (s->cache) {
            s->gold_hash[s->n_moved] = s->ophash[o];
            rehash_op(s, o);
        }
        s->moved[s->n_moved++] = o;
    }
    return SS_OK;
}

static ss_status undo_move(search *s, ss_diag *d)
{
    ss_diag sd;
    ss_diag_init(&sd);
    for (int k = 0; k < s->n_moved; k++) {
        int o = s->moved[k];
        if (ss_plan_set_config(s->cur, o, &s->gold[k], &sd) != SS_OK)
            return ss_diag_set(d, sd.status, "%s", sd.msg);
        if (s->cache)
            set_hash(s, o, s->gold_hash[k]);
    }
    s->n_moved = 0;
    return SS_OK;
}

/* 1 if the cache knows the move to cur is rejected at threshold thr with
 * the uniform u (the decision an evaluation would give: accept() on the
 * cached answer, a cached bound above thr, or a plan that cannot run). A
 * move the cache says is accepted is evaluated all the same, since the
 * judge commits only a plan it has just judged. */
static int cached_reject(const search *s, double thr, double u)
{
    ss_evalcache_entry ce;
    if (!s->cache || !ss_evalcache_get(s->cache, s->key, &ce))
        return 0;
    switch (ce.kind) {
    case SS_EVALCACHE_INVALID: return 1;
    case SS_EVALCACHE_BEYOND: return ce.e.time_us > thr;
    case SS_EVALCACHE_EXACT: return !accept(s, &s->cur_e, &ce.e, u);
    }
    return 0;
}

/* Cache what the evaluation of cur said (evaluate's e and ok). */
static void remember(search *s, const ss_eval *e, int ok)
{
    if (!s->cache)
        return;
    ss_evalcache_entry ce = {.kind = !ok        ? SS_EVALCACHE_INVALID
                                     : e->beyond ? SS_EVALCACHE_BEYOND
                                                 : SS_EVALCACHE_EXACT,
                             .e = *e};
    ss_evalcache_put(s->cache, s->key, &ce);
}

/* One chain of at most `steps` proposals from cur, until `deadline` seconds
 * into the search. With restart_to_best,
 * the chain jumps back to the best plan when it has not improved on it for
 * restart_after proposals. */
static ss_status chain(search *s, int64_t steps, double deadline, int restart_to_best,
                       ss_diag *d)
{
    int n_ops = ss_graph_n_ops(s->g);
    int64_t end = s->st.proposals + steps;
    while (s->st.proposals < end && !should_stop(s)) {
        if (deadline < HUGE_VAL && elapsed(s) >= deadline) {
            s->st.time_cut = 1; /* the clock, not the budget, ended this chain */
            break;
        }
        if (restart_to_best && s->st.proposals - s->last_improve > 0 &&
            (s->st.proposals - s->last_improve) % s->restart_after == 0) {
            int ok;
            ss_status st = jump(s, s->best, &ok, d);
            if (st)
                return st;
        }
        s->st.proposals++;
        /* Redraw moves that would change nothing (a neighbour already
         * aligned, an op with one candidate), a few times. */
        int op = 0, heavy = 0;
        const ss_pconfig *c = NULL;
        for (int tries = 0; tries < 8; tries++) {
            heavy = s->p_heavy > 0 && ss_rng_unit(&s->rng) < s->p_heavy;
            if (heavy)
                op = heavy_op(s);
            else if (s->p_path > 0 && ss_rng_unit(&s->rng) < s->p_path)
                op = path_op(s);
            else
                op = (int)ss_rng_below(&s->rng, n_ops);
            propose(s, op);
            c = ss_plan_config(s->cur, op);
            if (!same_config(c, &s->prop))
                break;
        }
        if (same_config(c, &s->prop)) {
            s->st.accepted++;
            progress(s);
            continue;
        }
        int kind = MOVE_ONE;
        if (set_size(&s->grp, op) > 1 && (heavy || ss_rng_unit(&s->rng) < s->p_group))
            kind = MOVE_GROUP;
        else if (!heavy && set_size(&s->cls, op) > 1 && s->p_class > 0 &&
                 ss_rng_unit(&s->rng) < s->p_class)
            kind = MOVE_CLASS;
        else if (!heavy && ss_rng_unit(&s->rng) < s->p_segment)
            kind = MOVE_SEGMENT;
        ss_status st = apply_move(s, op, kind, d);
        if (st)
            return st;
        int changed = s->n_moved == 1 ? op : -1;
        /* the move is accepted iff its time is below thr (accept()); from a
         * plan that does not fit there is no threshold on time */
        double u = ss_rng_unit(&s->rng), lb;
        double thr = s->cur_e.fits ? s->cur_e.time_us * (1 - log(u) / s->beta_now) : HUGE_VAL;
        if ((st = bound(s, s->cur, changed, &lb, d)) != SS_OK)
            return st;
        if (lb > thr) {
            s->st.pruned++;
            if ((st = undo_move(s, d)) != SS_OK)
                return st;
            progress(s);
            continue;
        }
        if (cached_reject(s, thr, u)) {
            s->st.cached++;
            if ((st = undo_move(s, d)) != SS_OK)
                return st;
            progress(s);
            continue;
        }
        ss_eval e;
        int ok;
        if ((st = evaluate(s, s->cur, changed, thr, &e, &ok, d)) != SS_OK)
            return st;
        remember(s, &e, ok);
        if (ok && !e.beyond && accept(s, &s->cur_e, &e, u)) {
            commit(s);
            s->cur_e = e;
            s->st.accepted++;
            if ((st = note_best(s, d)) != SS_OK)
                return st;
        } else if ((st = undo_move(s, d)) != SS_OK) {
            return st;
        }
        progress(s);
    }
    return SS_OK;
}

/* x->off and x->mem from x->of (n ops in nid sets; x->off zeroed, nid + 1
 * entries); returns the largest set's size. fill: nid scratch entries. */
static int fill_sets(opsets *x, int n, int nid, int *fill)
{
    int largest = 1;
    for (int o = 0; o < n; o++)
        x->off[x->of[o] + 1]++;
    for (int g = 0; g < nid; g++) {
        if (x->off[g + 1] > largest)
            largest = x->off[g + 1];
        x->off[g + 1] += x->off[g];
    }
    for (int g = 0; g < nid; g++)
        fill[g] = x->off[g];
    for (int o = 0; o < n; o++)
        x->mem[fill[x->of[o]]++] = o;
    return largest;
}

static int alloc_sets(opsets *x, int n)
{
    x->of = ss_malloc(((size_t)n + 1) * sizeof *x->of);
    x->off = ss_calloc((size_t)n + 2, sizeof *x->off);
    x->mem = ss_malloc(((size_t)n + 1) * sizeof *x->mem);
    return x->of && x->off && x->mem;
}

static void free_sets(opsets *x)
{
    ss_free(x->of);
    ss_free(x->off);
    ss_free(x->mem);
}

/* Groups of ops sharing their first weight (unrolled RNN steps, tied
 * embeddings; ops without weights are alone) and structural classes
 * (classes.h). */
static ss_status make_groups(search *s, ss_diag *d)
{
    int n = ss_graph_n_ops(s->g), nt = ss_graph_n_tensors(s->g);
    int *first = ss_malloc(((size_t)nt + 1) * sizeof *first);
    s->moved = ss_malloc(((size_t)n + 1) * sizeof *s->moved);
    s->targets = ss_malloc(((size_t)n + 2 * SEGMENT_MAX + 2) * sizeof *s->targets);
    s->gold = ss_calloc((size_t)n + 1, sizeof *s->gold);
    int sets_ok = alloc_sets(&s->grp, n) & alloc_sets(&s->cls, n);
    if (!first || !sets_ok || !s->moved || !s->gold || !s->targets) {
        ss_free(first);
        return ss_diag_set(d, SS_ERR_NOMEM, "search: out of memory");
    }
    for (int t = 0; t < nt; t++)
        first[t] = -1;
    int ng = 0;
    for (int o = 0; o < n; o++) {
        const ss_op *op = ss_graph_op(s->g, o);
        if (op->n_w > 0 && first[op->weights[0]] >= 0) {
            s->grp.of[o] = s->grp.of[first[op->weights[0]]];
        } else {
            s->grp.of[o] = ng++;
            if (op->n_w > 0)
                first[op->weights[0]] = o;
        }
    }
    ss_free(first);
    /* s->moved serves as scratch */
    int gmax = fill_sets(&s->grp, n, ng, s->moved);
    int nc;
    ss_status st = ss_op_classes(s->g, CLASS_ROUNDS, s->cls.of, &nc, d);
    if (st)
        return st;
    int cmax = fill_sets(&s->cls, n, nc, s->moved);
    if (cmax > gmax)
        gmax = cmax;
    /* weight moves: running bytes of each group's first weight (0 for ops
     * without weights, which weight moves never draw) */
    s->n_groups = ng;
    s->gcum = ss_malloc(((size_t)ng + 1) * sizeof *s->gcum);
    if (!s->gcum)
        return ss_diag_set(d, SS_ERR_NOMEM, "search: out of memory");
    double sum = 0;
    for (int g = 0; g < ng; g++) {
        const ss_op *lead = ss_graph_op(s->g, s->grp.mem[s->grp.off[g]]);
        if (lead->n_w > 0) {
            const ss_tensor *w = ss_graph_tensor(s->g, lead->weights[0]);
            double b = (double)ss_dtype_size(w->dtype);
            for (int k = 0; k < w->ndim; k++)
                b *= (double)w->shape[k];
            sum += b;
        }
        s->gcum[g] = sum;
    }
    if (sum <= 0)
        s->p_heavy = 0;
    if (gmax < 2 * SEGMENT_MAX + 1)
        gmax = 2 * SEGMENT_MAX + 1;
    s->gold_dev = ss_malloc((size_t)gmax * (size_t)s->maxt * sizeof *s->gold_dev);
    if (!s->gold_dev)
        return ss_diag_set(d, SS_ERR_NOMEM, "search: out of memory");
    return SS_OK;
}

static void cleanup(search *s)
{
    ss_free(s->gcum);
    ss_free(s->pcum);
    ss_free(s->best_path);
    ss_free(s->had);
    for (int k = 0; k < NEAR_K; k++)
        ss_free(s->near_dev[k]);
    free_sets(&s->grp);
    free_sets(&s->cls);
    ss_free(s->moved);
    ss_free(s->targets);
    ss_free(s->gold);
    ss_free(s->gold_dev);
    ss_plan_free(s->cur);
    ss_evalcache_free(s->cache);
    ss_free(s->ophash);
    ss_free(s->gold_hash);
    ss_free(s->prop_dev);
    ss_free(s->nbr);
    ss_free(s->imp);
}

ss_status ss_mcmc_run(const ss_space *sp, const ss_search_judge *ev, ss_plan *const *starts,
                      int n_starts, const ss_mcmc_config *cfg, ss_plan *best,
                      ss_eval *best_eval, ss_mcmc_stats *stats, ss_diag *d)
{
    if (n_starts < 1 || !cfg || cfg->budget < 1 || !ev || !ev->eval)
        return ss_diag_set(d, SS_ERR_INVALID,
                           "search: need at least one start plan, a budget >= 1 and a judge");
    search s;
    memset(&s, 0, sizeof s);
    s.sp = sp;
    s.g = ss_space_graph(sp);
    s.ev = ev;
    s.cfg = cfg;
    ss_rng_seed(&s.rng, cfg->seed);
    s.budget = cfg->budget;
    s.beta = cfg->beta > 0 ? cfg->beta : BETA;
    s.p_nbr = cfg->p_neighbor < 0 ? 0 : cfg->p_neighbor > 0 ? cfg->p_neighbor : 0.3;
    s.p_group = cfg->p_group < 0 ? 0 : cfg->p_group > 0 ? cfg->p_group : 0.5;
    s.p_segment = cfg->p_segment < 0 ? 0 : cfg->p_segment > 0 ? cfg->p_segment : 0.25;
    s.p_class = cfg->p_class < 0 ? 0 : cfg->p_class > 0 ? cfg->p_class : P_CLASS;
    s.p_heavy = cfg->p_heavy < 0 ? 0 : cfg->p_heavy > 0 ? cfg->p_heavy : P_HEAVY;
    s.p_path = cfg->p_path < 0 ? 0 : cfg->p_path > 0 ? cfg->p_path : P_PATH;
    s.p_local = cfg->p_local < 0 ? 0 : cfg->p_local > 0 ? cfg->p_local : P_LOCAL;
    s.patience = cfg->patience > 0 ? cfg->patience : cfg->patience < 0 ? 0 : s.budget / 2;
    s.restart_after = cfg->restart_after;
    if (s.restart_after <= 0) {
        s.restart_after = s.budget / 20;
        s.restart_after = s.restart_after < RESTART_MIN ? RESTART_MIN
                        : s.restart_after > RESTART_MAX ? RESTART_MAX : s.restart_after;
    }
    s.explore = cfg->explore_share < 0 ? 0 : cfg->explore_share > 0 ? cfg->explore_share
                                                                    : EXPLORE_SHARE;
    if (s.explore > 1)
        s.explore = 1;
    s.st.best_us = HUGE_VAL;
    s.t0 = ss_mcmc_now();
    /* `best` is the caller's: search into a private copy, copy out at the end. */
    s.best = ss_plan_clone(starts[0]);
    s.cur = ss_plan_clone(starts[0]);
    int maxt = ss_space_n_devices(sp) > 0 ? ss_space_n_devices(sp) : 1;
    for (int i = 0; i < n_starts; i++)
        for (int op = 0; op < ss_plan_n_ops(starts[i]); op++)
            if (ss_plan_config(starts[i], op)->ntiles > maxt)
                maxt = ss_plan_config(starts[i], op)->ntiles;
    s.prop_dev = ss_malloc((size_t)maxt * sizeof(int));
    s.prop.devices = s.prop_dev;
    s.nbr = ss_malloc(((size_t)ss_graph_n_ops(s.g) + 1) * sizeof(int));
    s.pcum = ss_malloc(((size_t)ss_graph_n_ops(s.g) + 1) * sizeof *s.pcum);
    if (ev->restore)
        s.best_path = ss_malloc(((size_t)ss_graph_n_ops(s.g) + 1) * sizeof *s.best_path);
    int near_ok = 1;
    for (int k = 0; k < NEAR_K; k++) {
        s.near_dev[k] = ss_malloc((size_t)maxt * sizeof(int));
        s.near[k].devices = s.near_dev[k];
        near_ok &= s.near_dev[k] != NULL;
    }
    s.had = ss_calloc((size_t)ss_space_n_devices(sp) + 1, 1);
    s.path_stale = 1;
    ss_status st = SS_OK;
    s.maxt = maxt;
    if (!s.best || !s.cur || !s.prop_dev || !s.nbr || !s.pcum || !near_ok || !s.had)
        st = ss_diag_set(d, SS_ERR_NOMEM, "search: out of memory");
    if (st == SS_OK)
        st = make_groups(&s, d);
    if (st == SS_OK && cfg->eval_cache >= 0) {
        int n = ss_graph_n_ops(s.g) + 1;
        s.cache = ss_evalcache_new();
        s.ophash = ss_malloc((size_t)n * sizeof *s.ophash);
        s.gold_hash = ss_malloc((size_t)n * sizeof *s.gold_hash);
        if (!s.cache || !s.ophash || !s.gold_hash)
            st = ss_diag_set(d, SS_ERR_NOMEM, "search: out of memory");
    }

    /* Exploration: a hotter chain from each start, with an equal share of
     * the budget and of the time limit. Each start is evaluated right before
     * its chain — the evaluation that makes it the judge's base — and
     * also when there is no chain to run (a stop, no exploration), so the
     * best is never worse than any start. */
    int64_t share = (int64_t)((double)s.budget * s.explore / (double)n_starts);
    s.beta_now = s.beta / 20;
    int n_ok = 0;
    for (int i = 0; st == SS_OK && i < n_starts; i++) {
        int ok = 0;
        st = jump(&s, starts[i], &ok, d);
        n_ok += ok;
        if (st != SS_OK || !ok || share <= 0 || should_stop(&s))
            continue;
        double deadline = cfg->time_limit_s > 0
                              ? cfg->time_limit_s * s.explore * (double)(i + 1) / (double)n_starts
                              : HUGE_VAL;
        st = chain(&s, share, deadline, 0, d);
    }
    if (st == SS_OK && n_ok == 0 && s.st.stopped_by != SS_MCMC_STOP_USER)
        st = ss_diag_set(d, SS_ERR_INVALID, "search: no start plan could be simulated");
    /* Exploitation: from the best, restarting there when stuck. */
    s.beta_now = s.beta;
    s.exploiting = 1;
    if (st == SS_OK && !should_stop(&s)) {
        int ok;
        st = jump(&s, s.best, &ok, d);
        if (st == SS_OK)
            st = chain(&s, s.budget - s.st.proposals, HUGE_VAL, 1, d);
    }
    if (st == SS_OK && !s.stopped)
        s.st.stopped_by = SS_MCMC_STOP_BUDGET;
    s.st.time_s = elapsed(&s);
    s.st.best_half_us = best_at_half(&s);
    s.st.evals_per_s = s.st.time_s > 0 ? (double)s.st.evaluations / s.st.time_s : 0;
    if (st == SS_OK && ss_plan_copy(best, s.best) != SS_OK)
        st = ss_diag_set(d, SS_ERR_NOMEM, "search: out of memory");
    if (st == SS_OK) {
        if (best_eval)
            *best_eval = s.best_e;
        if (stats)
            *stats = s.st;
    }
    ss_plan_free(s.best);
    cleanup(&s);
    return st;
}
