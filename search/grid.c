/*
 * grid.c — the LLM space's judge (one simulator per thread, a plan per
 * structure reused across settings) and the exhaustive Megatron grid
 * (search/grid.h states the grid, its memory pruning and why its result
 * does not depend on the thread count).
 *
 * Threads: the grid's families (tp, pp, vp, sp) are dealt round-robin to the
 * workers; each worker owns a judge; they share the best time so far (for
 * the cutoff) under a mutex and merge their near lists at the end. A
 * worker's judge prices tiles through a cost model of its own that asks the
 * caller's under a lock (cost models cache, and are not thread-safe).
 */
#include "search/grid.h"
#include "simulator/memory.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---- shape ------------------------------------------------------------- */

void ss_llm_shape_of(const ss_graph *g, const ss_machine *m, ss_llm_shape *s)
{
    memset(s, 0, sizeof *s);
    s->devices = ss_machine_n_devices(m);
    const ss_device *d0 = ss_machine_device(m, 0);
    for (int i = 0; i < s->devices; i++)
        s->per_host += ss_machine_device(m, i)->host == d0->host;
    s->layers = ss_plan_layers(g);
    s->batch = ss_graph_batch(g);
    s->params = (double)ss_graph_parameters(g);
    const ss_device_type *dt = ss_machine_type(m, d0->type);
    s->mem_bytes = dt->mem_gib * 1073741824.0;
    for (int i = 0; i < ss_machine_n_types(m); i++) {
        double b = ss_machine_type(m, i)->mem_gib * 1073741824.0;
        if (b > s->max_mem_bytes)
            s->max_mem_bytes = b;
    }
    ss_memory_param_bytes(SS_F8, ss_graph_optimizer(g), ss_graph_precision(g),
                          &s->state_bytes[0], &s->state_bytes[1], &s->state_bytes[2]);
    double peak = dt->peak_tflops[SS_F32];
    if (ss_graph_precision(g) == SS_PREC_MIXED)
        peak = dt->peak_tflops[SS_F16] > dt->peak_tflops[SS_BF16] ? dt->peak_tflops[SS_F16]
                                                                 : dt->peak_tflops[SS_BF16];
    s->peak_flops = peak * 1e12;
    /* tokens per sample: the sequence of the first 2-D graph input [batch, seq] */
    for (int i = 0; i < ss_graph_n_ops(g) && !s->seq; i++) {
        const ss_op *op = ss_graph_op(g, i);
        if (op->type != SS_OP_INPUT || op->n_out < 1)
            continue;
        const ss_tensor *t = ss_graph_tensor(g, op->outputs[0]);
        if (t->ndim == 2 && t->shape[0] == s->batch)
            s->seq = t->shape[1];
    }
    s->model_flops = 3 * ss_graph_forward_flops(g);
}

double ss_llm_static_bytes(const ss_llm_shape *s, const ss_megatron_config *c)
{
    double tp = c->tp > 1 ? c->tp : 1, pp = c->pp > 1 ? c->pp : 1;
    if (c->distopt == SS_ZERO3) /* weights, gradients and state over the dp replicas too */
        return s->params * (s->state_bytes[0] + s->state_bytes[1] + s->state_bytes[2]) /
               (tp * pp * (c->dp > 1 ? c->dp : 1) * (c->cp > 1 ? c->cp : 1));
    double opt = c->distopt ? 0 : s->state_bytes[2] / (tp * pp);
    return s->params * ((s->state_bytes[0] + s->state_bytes[1]) / (tp * pp) + opt);
}

int ss_llm_static_overflow(const ss_llm_shape *s, const ss_megatron_config *c)
{
    return ss_llm_static_bytes(s, c) > s->max_mem_bytes;
}

int ss_llm_threads(int n)
{
    if (n > 0)
        return n > 64 ? 64 : n;
    long c = sysconf(_SC_NPROCESSORS_ONLN);
    return c < 1 ? 1 : c > 64 ? 64 : (int)c;
}

/* ---- judge --------------------------------------------------------------- */

typedef struct proxy {
    ss_costmodel *shared;
    const ss_machine *m;
    pthread_mutex_t *lock;
} proxy;

/* Asks the shared cost model (which ends in the analytic model, so it
 * always answers) under the lock. */
static int proxy_lookup(void *ctx, const ss_graph *g, const ss_op *op, const ss_tile *t,
                        const ss_device_type *dt, ss_cost *out)
{
    proxy *p = ctx;
    int type = -1;
    for (int i = 0; i < ss_machine_n_types(p->m) && type < 0; i++)
        if (ss_machine_type(p->m, i) == dt || !strcmp(ss_machine_type(p->m, i)->name, dt->name))
            type = i;
    if (type < 0)
        return 0;
    pthread_mutex_lock(p->lock);
    ss_status st = ss_cost_tile(p->shared, g, op, t, type, out);
    pthread_mutex_unlock(p->lock);
    return st == SS_OK;
}

struct ss_llm_judge {
    const ss_graph *g;
    const ss_machine *m;
    ss_costmodel *own;  /* the proxy's cost model (NULL: the caller's is used) */
    ss_machine *own_m;  /* a copy of the machine for this thread (NULL: m shared) */
    proxy px;
    ss_sim *sim;        /* AUTO: plans below SS_EVAL_HIER_TILES tile entries */
    ss_sim *hier;       /* HIER: larger plans (never the full simulation) */
    ss_sim_result r;
    ss_plan *plan;      /* the plan of the structure in key */
    ss_megatron_config key;
    int64_t tiles;      /* the plan's tile entries */
    int was_stopped;    /* a run was stopped inside (its simulator is not handed on) */
    int based;          /* hier's base (ss_sim_commit) is plan with other settings */
    ss_megatron_config last; /* the point of hier's last run, when last_full */
    int last_full;      /* hier's last run was last's whole simulation (r holds it) */
};

static pthread_mutex_t cost_lock = PTHREAD_MUTEX_INITIALIZER;

static ss_status judge_new(const ss_graph *g, const ss_machine *m, ss_costmodel *cm, int shared,
                           int (*stop)(void *), void *stop_ctx, ss_llm_judge **out, ss_diag *d)
{
    ss_llm_judge *j = ss_calloc(1, sizeof *j);
    if (!j)
        return ss_diag_set(d, SS_ERR_NOMEM, "search: out of memory");
    j->g = g;
    j->m = m;
    ss_costmodel *use = cm;
    ss_status st = SS_OK;
    /* large machines fill their route cache on demand, one thread at a
     * time: a thread of its own gets a copy (the same topology) */
    if (shared == 1 && ss_machine_n_devices(m) > 256) {
        char *txt = NULL;
        st = ss_machine_to_string(m, &txt, d);
        if (!st)
            st = ss_machine_load_string(txt, ss_machine_name(m), &j->own_m, d);
        ss_free(txt);
        if (!st)
            j->m = j->own_m;
    }
    if (shared && !st) {
        j->own = ss_cost_new(j->m);
        j->px = (proxy){cm, m, &cost_lock}; /* m: the shared model's machine */
        ss_cost_provider pv = {"shared", &j->px, proxy_lookup};
        st = !j->own ? ss_diag_set(d, SS_ERR_NOMEM, "search: out of memory")
                     : ss_cost_add_provider(j->own, &pv, d);
        use = j->own;
    }
    ss_sim_config sc = {.stop = stop, .stop_ctx = stop_ctx};
    if (!st)
        st = ss_sim_new(g, j->m, use, &sc, &j->sim, d);
    sc.evaluator = SS_EVAL_HIER;
    if (!st)
        st = ss_sim_new(g, j->m, use, &sc, &j->hier, d);
    if (st) {
        ss_llm_judge_free(j);
        return st;
    }
    *out = j;
    return SS_OK;
}

ss_status ss_llm_judge_new(const ss_graph *g, const ss_machine *m, ss_costmodel *cm,
                           int shared, int (*stop)(void *ctx), void *stop_ctx,
                           ss_llm_judge **out, ss_diag *d)
{
    return judge_new(g, m, cm, shared, stop, stop_ctx, out, d);
}

ss_sim *ss_llm_judge_take_sim(ss_llm_judge *j, const ss_plan *p)
{
    if (j->own || j->own_m || j->was_stopped)
        return NULL; /* its simulators use the judge's own cost model / machine,
                        or one was stopped inside a run */
    int64_t tiles = 0;
    for (int i = 0; i < ss_plan_n_ops(p); i++)
        tiles += ss_plan_config(p, i)->ntiles;
    if (tiles < SS_EVAL_HIER_TILES)
        return NULL; /* AUTO would not pick the hierarchical evaluator for p */
    ss_sim **s = &j->hier;
    ss_sim *out = *s;
    *s = NULL;
    if (out)
        ss_sim_set_stop(out, NULL, NULL);
    return out;
}

void ss_llm_judge_free(ss_llm_judge *j)
{
    if (!j)
        return;
    ss_sim_free(j->sim);
    ss_sim_free(j->hier);
    ss_sim_result_clear(&j->r);
    ss_plan_free(j->plan);
    ss_cost_free(j->own);
    ss_machine_free(j->own_m);
    ss_free(j);
}

/* The part of c that shapes the plan's configs (the rest are settings). */
static void structure_of(const ss_megatron_config *c, ss_megatron_config *k)
{
    memset(k, 0, sizeof *k);
    k->tp = c->tp;
    k->pp = c->pp;
    k->dp = c->dp;
    k->mb = c->mb;
    k->mbs = c->mbs;
    k->vp = c->vp > 1 ? c->vp : 1;
    k->sp = c->sp;
    k->first = c->first;
    k->last = c->last;
}

ss_status ss_llm_judge_last(const ss_llm_judge *j, const ss_megatron_config *c,
                            ss_sim_result *out, int *had, ss_diag *d)
{
    *had = 0;
    if (!j || !j->last_full || memcmp(&j->last, c, sizeof *c))
        return SS_OK;
    ss_status st = ss_sim_result_copy(out, &j->r, d);
    *had = st == SS_OK;
    return st;
}

const ss_plan *ss_llm_judge_plan(ss_llm_judge *j, const ss_megatron_config *c)
{
    ss_megatron_config k;
    structure_of(c, &k);
    if (!j || !j->plan || memcmp(&k, &j->key, sizeof k))
        return NULL;
    ss_megatron_settings(c, ss_plan_settings_of(j->plan));
    return j->plan;
}

ss_plan *ss_llm_judge_take_plan(ss_llm_judge *j, const ss_megatron_config *c)
{
    if (!ss_llm_judge_plan(j, c))
        return NULL;
    ss_plan *p = j->plan;
    j->plan = NULL;
    return p;
}

ss_status ss_llm_plan(const ss_graph *g, const ss_machine *m, const ss_megatron_config *c,
                      ss_plan **out, ss_diag *d)
{
    return ss_plan_megatron(g, m, c, out, d);
}

ss_status ss_llm_judge_point(ss_llm_judge *j, const ss_megatron_config *c, double cutoff_us,
                             ss_llm_point *out, ss_diag *d)
{
    ss_megatron_config k;
    structure_of(c, &k);
    if (!j->plan || memcmp(&k, &j->key, sizeof k)) {
        ss_plan_free(j->plan);
        j->plan = NULL;
        ss_status st = ss_plan_megatron(j->g, j->m, &k, &j->plan, d);
        if (st)
            return st;
        j->key = k;
        j->based = 0;
        j->tiles = 0;
        for (int i = 0; i < ss_plan_n_ops(j->plan); i++)
            j->tiles += ss_plan_config(j->plan, i)->ntiles;
    }
    /* the settings alone differ between points of one structure */
    if (c->recompute_rank[0] &&
        (int64_t)c->pp * (c->vp > 1 ? c->vp : 1) > SS_PLAN_MAX_RECOMPUTE_STAGES)
        return ss_diag_set(d, SS_ERR_INVALID, "megatron: per-stage recompute over %d chunks",
                           SS_PLAN_MAX_RECOMPUTE_STAGES);
    ss_megatron_settings(c, ss_plan_settings_of(j->plan));
    double load = 0;
    memset(out, 0, sizeof *out);
    out->c = *c;
    /* the hierarchical evaluator first, at every size (a few ms warm); a plan
     * it refuses goes to AUTO below SS_EVAL_HIER_TILES tile entries and is
     * skipped above (never the full simulation of a big plan) */
    ss_sim *sim = j->hier;
    if (!sim)
        return ss_diag_set(d, SS_ERR_INVALID, "LLM judge: its simulator was taken");
    /* a point of the structure judged last is the base's plan with other
     * settings: judged again (the plan's analysis kept, the evaluator's
     * memoized sub-problems of the structure re-used), the same result */
    ss_status st = j->based ? ss_sim_rerun_within(sim, j->plan, SS_SIM_SETTINGS, cutoff_us,
                                                  &j->r, &load, d)
                            : ss_sim_run_within(sim, j->plan, cutoff_us, &j->r, &load, d);
    j->based = st == SS_OK;
    if (j->based)
        ss_sim_commit(sim);
    j->last_full = st == SS_OK && !(cutoff_us < HUGE_VAL && load > cutoff_us);
    j->last = *c;
    if (st == SS_ERR_INVALID || st == SS_ERR_UNSUPPORTED) {
        st = SS_ERR_UNSUPPORTED; /* the fast evaluator refuses it */
        if (j->tiles < SS_EVAL_HIER_TILES && j->sim) {
            ss_diag_init(d);
            st = ss_sim_run_within(j->sim, j->plan, cutoff_us, &j->r, &load, d);
        }
    }
    if (st == SS_ERR_INTERRUPTED)
        j->was_stopped = 1;
    if (st)
        return st;
    if (cutoff_us < HUGE_VAL && load > cutoff_us) {
        out->time_us = HUGE_VAL;
        return SS_OK;
    }
    out->time_us = j->r.iteration_us;
    out->fits = j->r.fits;
    for (int i = 0; i < j->r.n_devices; i++)
        if (j->r.peak_memory_bytes[i] > out->peak_bytes)
            out->peak_bytes = j->r.peak_memory_bytes[i];
    return SS_OK;
}

/* ---- near list ------------------------------------------------------------ */

static int point_cmp(const ss_llm_point *a, const ss_llm_point *b, int64_t batch)
{
    if (a->time_us != b->time_us)
        return a->time_us < b->time_us ? -1 : 1;
    char x[256], y[256];
    ss_megatron_spec(&a->c, batch, x, sizeof x);
    ss_megatron_spec(&b->c, batch, y, sizeof y);
    return strcmp(x, y);
}

void ss_llm_near_add(ss_llm_point *list, int *n, const ss_llm_point *p, double band,
                     int64_t batch)
{
    if (!p->fits || !isfinite(p->time_us))
        return;
    for (int i = 0; i < *n; i++)
        if (!point_cmp(&list[i], p, batch))
            return; /* the same point */
    int at = *n;
    while (at > 0 && point_cmp(p, &list[at - 1], batch) < 0)
        at--;
    if (at >= SS_LLM_NEAR_MAX)
        return;
    int keep = *n < SS_LLM_NEAR_MAX ? *n : SS_LLM_NEAR_MAX - 1;
    memmove(&list[at + 1], &list[at], (size_t)(keep - at) * sizeof *list);
    list[at] = *p;
    *n = keep + 1;
    while (*n > 1 && list[*n - 1].time_us > list[0].time_us * (1 + band))
        (*n)--;
}

/* ---- the grid --------------------------------------------------------------- */

typedef struct family {
    int tp, pp, vp, sp;
} family;

typedef struct grid_run {
    const ss_graph *g;
    const ss_machine *m;
    ss_costmodel *cm;
    const ss_grid_config *cfg;
    ss_llm_shape shape;
    family *fam;
    int n_fam, threads;
    double band, deadline, t0;
    pthread_mutex_t lock;
    double best_us;      /* shared: best fitting time so far (for the cutoff) */
    int stopped;         /* shared: the limit or the stop callback came */
    int time_cut, interrupted;
} grid_run;

typedef struct worker {
    grid_run *run;
    int index;
    ss_status st;
    ss_diag d;
    ss_grid_result r;    /* this worker's counts and near list */
} worker;

static double wall_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int grid_stop(void *ctx)
{
    grid_run *g = ctx;
    int user = g->cfg->stop && g->cfg->stop(g->cfg->stop_ctx);
    int late = g->deadline > 0 && wall_s() > g->deadline;
    if (user || late) {
        pthread_mutex_lock(&g->lock);
        g->stopped = 1;
        g->interrupted |= user;
        g->time_cut |= late && !user;
        pthread_mutex_unlock(&g->lock);
    }
    return user || late;
}

static const int mbs_list[] = {1, 2, 4, 8};
static const ss_recompute rc_order[] = {SS_RECOMPUTE_FULL, SS_RECOMPUTE_SELECTIVE,
                                        SS_RECOMPUTE_NONE}; /* least memory first */

/* Points of family f (for the count); judges them when j is given. */
static ss_status run_family(grid_run *G, const family *f, ss_llm_judge *j, ss_grid_result *r,
                            ss_diag *d)
{
    const ss_llm_shape *S = &G->shape;
    int dp = S->devices / (f->tp * f->pp);
    for (int mi = 0; mi < 4; mi++) {
        int mbs = mbs_list[mi];
        if (S->batch % ((int64_t)dp * mbs))
            continue;
        int64_t mb = S->batch / ((int64_t)dp * mbs);
        if ((f->pp > 1 && mb < f->pp) || (f->vp > 1 && mb % f->pp))
            continue;
        int n_dopt = dp > 1 ? 2 : 1;
        int64_t here = 3 * n_dopt * 2;
        r->points += here;
        if (!j)
            continue;
        ss_megatron_config c = {.tp = f->tp, .pp = f->pp, .dp = dp, .mbs = mbs, .vp = f->vp,
                                .sp = f->sp, .distopt = n_dopt == 2};
        if (ss_llm_static_overflow(S, &c)) {
            r->mem_pruned += here;
            continue;
        }
        int nofit[3][2] = {{0}}; /* [recompute order][distopt: 0 = on] did not fit */
        int judged_any = 0, leanest_fits = -1;
        for (int ri = 0; ri < 3; ri++)
            for (int di = 0; di < n_dopt; di++) {
                int dominated = 0;
                for (int a = 0; a <= ri; a++)
                    for (int b = 0; b <= di; b++)
                        dominated |= nofit[a][b];
                if (dominated) {
                    r->mem_pruned += 2;
                    continue;
                }
                c.recompute = rc_order[ri];
                c.distopt = n_dopt == 2 && di == 0;
                if (ss_llm_static_overflow(S, &c)) { /* recompute does not change it */
                    nofit[ri][di] = 1;
                    r->mem_pruned += 2;
                    continue;
                }
                for (int sy = 0; sy < 2; sy++) {
                    if (nofit[ri][di]) {
                        r->mem_pruned++;
                        continue;
                    }
                    c.sync = sy == 0 ? SS_SYNC_BULK : SS_SYNC_WAIT_FREE;
                    pthread_mutex_lock(&G->lock);
                    double cut = isfinite(G->best_us) ? G->best_us * (1 + G->band) : HUGE_VAL;
                    int stopped = G->stopped;
                    pthread_mutex_unlock(&G->lock);
                    if (stopped)
                        return SS_OK;
                    ss_llm_point p;
                    ss_llm_judge *own = NULL;
                    ss_status st = G->cfg->fresh ? judge_new(G->g, G->m, G->cm, G->threads > 1,
                                                             grid_stop, G, &own, d)
                                                 : SS_OK;
                    if (!st)
                        st = ss_llm_judge_point(own ? own : j, &c, cut, &p, d);
                    ss_llm_judge_free(own);
                    if (st == SS_ERR_INTERRUPTED) {
                        ss_diag_init(d);
                        return SS_OK;
                    }
                    if (st == SS_ERR_INVALID) {
                        /* the generator refuses the structure (tp does not
                         * divide the heads ...): its points are not judged */
                        ss_diag_init(d);
                        r->refused += here;
                        goto next_mbs;
                    }
                    if (st == SS_ERR_UNSUPPORTED) {
                        /* the fast evaluator refuses this point's plan (its
                         * settings: distopt with overlapped sync on deep
                         * pipelines ...); the structure's other points stay */
                        ss_diag_init(d);
                        r->refused++;
                        continue;
                    }
                    if (st)
                        return st;
                    r->judged++;
                    judged_any = 1;
                    if (!isfinite(p.time_us)) {
                        r->cut++;
                        continue;
                    }
                    if (!p.fits) {
                        r->no_fit++;
                        nofit[ri][di] = 1;
                        if (ri == 0 && di == 0)
                            leanest_fits = 0;
                        continue;
                    }
                    if (ri == 0 && di == 0)
                        leanest_fits = 1;
                    pthread_mutex_lock(&G->lock);
                    if (!(p.time_us >= G->best_us))
                        G->best_us = p.time_us;
                    pthread_mutex_unlock(&G->lock);
                    ss_llm_near_add(r->near, &r->n_near, &p, G->band, S->batch);
                }
            }
        /* the leanest setting of this micro-batch size does not fit: larger
         * micro-batches need more memory still */
        if (judged_any && leanest_fits == 0) {
            for (int mj = mi + 1; mj < 4; mj++) {
                int64_t per = (int64_t)dp * mbs_list[mj];
                int64_t mbj = S->batch % per ? 0 : S->batch / per;
                if (mbj && !(f->pp > 1 && mbj < f->pp) && !(f->vp > 1 && mbj % f->pp)) {
                    r->points += here;
                    r->mem_pruned += here;
                }
            }
            return SS_OK;
        }
    next_mbs:;
    }
    return SS_OK;
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    grid_run *G = w->run;
    ss_llm_judge *j = NULL;
    w->st = judge_new(G->g, G->m, G->cm, G->threads > 1, grid_stop, G, &j, &w->d);
    for (int i = w->index; i < G->n_fam && !w->st; i += G->threads) {
        w->st = run_family(G, &G->fam[i], j, &w->r, &w->d);
        pthread_mutex_lock(&G->lock);
        int stopped = G->stopped;
        pthread_mutex_unlock(&G->lock);
        if (stopped)
            break;
    }
    ss_llm_judge_free(j);
    return NULL;
}

ss_status ss_grid_run(const ss_graph *g, const ss_machine *m, ss_costmodel *cm,
                      const ss_grid_config *cfg_in, ss_grid_result *r, ss_diag *d)
{
    ss_grid_config cfg = {0};
    if (cfg_in)
        cfg = *cfg_in;
    memset(r, 0, sizeof *r);
    r->best.time_us = HUGE_VAL;
    grid_run G = {0};
    G.g = g;
    G.m = m;
    G.cm = cm;
    G.cfg = &cfg;
    G.t0 = wall_s();
    G.deadline = cfg.time_limit_s > 0 ? G.t0 + cfg.time_limit_s : 0;
    G.band = cfg.band > 0 ? cfg.band : 0.08;
    G.best_us = HUGE_VAL;
    ss_llm_shape_of(g, m, &G.shape);
    if (G.shape.layers < 2 || G.shape.batch <= 0)
        return ss_diag_set(d, SS_ERR_UNSUPPORTED,
                           "megatron grid: model \"%s\" has no repeated layers (or no batch)",
                           ss_graph_name(g));
    /* families: tp | devices per host (powers of two), pp | layers */
    int cap = 0;
    for (int tp = 1; tp <= G.shape.per_host; tp *= 2)
        for (int pp = 1; pp <= G.shape.layers; pp++) {
            if (G.shape.layers % pp || G.shape.devices % (tp * pp))
                continue;
            int dp = G.shape.devices / (tp * pp);
            if (G.shape.batch % dp)
                continue;
            for (int vp = 1; vp <= (pp > 1 ? 4 : 1); vp++) {
                if (G.shape.layers % (pp * vp))
                    continue;
                for (int sp = 0; sp <= (tp > 1); sp++) {
                    if (ss_grow((void **)&G.fam, &cap, G.n_fam + 1, sizeof *G.fam)) {
                        ss_free(G.fam);
                        return ss_diag_set(d, SS_ERR_NOMEM, "megatron grid: out of memory");
                    }
                    G.fam[G.n_fam++] = (family){tp, pp, vp, sp};
                }
            }
        }
    G.threads = ss_llm_threads(cfg.threads);
    if (G.threads > G.n_fam)
        G.threads = G.n_fam > 0 ? G.n_fam : 1;
    pthread_mutex_init(&G.lock, NULL);
    worker *ws = ss_calloc((size_t)G.threads, sizeof *ws);
    pthread_t *th = ss_calloc((size_t)G.threads, sizeof *th);
    ss_status st = !ws || !th ? ss_diag_set(d, SS_ERR_NOMEM, "megatron grid: out of memory")
                              : SS_OK;
    int started = 0;
    for (int i = 0; i < G.threads && !st; i++) {
        ws[i].run = &G;
        ws[i].index = i;
        ss_diag_init(&ws[i].d);
        if (i > 0 && pthread_create(&th[i], NULL, worker_main, &ws[i]))
            st = ss_diag_set(d, SS_ERR_NOMEM, "megatron grid: cannot start a thread");
        else
            started = i + 1;
    }
    if (started > 0)
        worker_main(&ws[0]);
    for (int i = 1; i < started; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < started && !st; i++)
        if (ws[i].st)
            st = ss_diag_set(d, ws[i].st, "%s", ws[i].d.msg);
    if (!st) {
        /* families no worker reached (stopped early) still count as points */
        for (int i = 0; i < started; i++) {
            ss_grid_result *w = &ws[i].r;
            r->points += w->points;
            r->judged += w->judged;
            r->mem_pruned += w->mem_pruned;
            r->no_fit += w->no_fit;
            r->cut += w->cut;
            r->refused += w->refused;
            for (int k = 0; k < w->n_near; k++)
                ss_llm_near_add(r->near, &r->n_near, &w->near[k], G.band, G.shape.batch);
        }
        if (G.stopped) {
            ss_grid_result all = {0};
            for (int i = 0; i < G.n_fam; i++)
                run_family(&G, &G.fam[i], NULL, &all, d);
            r->points = all.points;
        }
        r->found = r->n_near > 0;
        if (r->found)
            r->best = r->near[0];
        r->time_cut = G.time_cut;
        r->interrupted = G.interrupted;
    }
    r->time_s = wall_s() - G.t0;
    pthread_mutex_destroy(&G.lock);
    ss_free(ws);
    ss_free(th);
    ss_free(G.fam);
    return st;
}
