/*
 * delta.c — delta simulation (delta.h).
 *
 * The base is the last committed plan: its task graph (built by the full
 * builder), its schedule (start, end, ready per task) and its memory. A delta
 * run:
 *
 *  1. builds the proposal's task graph with the same builder, so task ids,
 *     priorities and therefore every tie-break are the full simulation's;
 *  2. maps each new task to an old one with the same signature (kind, op,
 *     tile, micro-batch, tag, priority, duration, bytes, resources), the
 *     i-th new task of a signature to the i-th old one; a mapped task whose
 *     mapped predecessors are exactly the old task's predecessors, and whose
 *     old id keeps the old relative order, is CLEAN; every other new task is
 *     DIRTY, and old tasks left unmapped (or mapped to dirty ones) are
 *     REMOVED;
 *  3. computes T*, a time before which nothing can differ: the minimum over
 *     dirty tasks of a lower bound of their ready time (clean predecessors'
 *     old ends, dirty predecessors' bounds plus durations) and over removed
 *     tasks of their old ready time. Every clean task that started before T*
 *     in the base schedule starts and ends at the same times in the new one
 *     (engine.h, "DELTA SIMULATION": the decisions before T* never looked at
 *     anything that changed);
 *  4. rebuilds the engine state at the start of the round at T* (running
 *     tasks and their completion events, released tasks in the resource
 *     queues, remaining predecessor counts) and resumes the event loop of
 *     engine.h — reproduced here with the same keys (class, ready time,
 *     priority * 2^32 + id) and the same rounds — up to the end;
 *  5. sweeps memory with liveness over the new schedule.
 *
 * A run with changed = -1, a different queue policy, or no base runs the
 * same loop from time 0. Invariant: base_* always describes the committed
 * plan; cur_* the last evaluated one; commit swaps them. The property test
 * (tests/simulator/test_delta.c) checks iteration time and every device's
 * peak against ss_sim_run on every one of >= 10,000 random proposals.
 */
#include "simulator/delta.h"
#include "simulator/build.h"
#include "simulator/engine.h"
#include "simulator/memory.h"
#include "simulator/taskgraph.h"

#include <math.h>
#include <string.h>

/* One evaluated plan: its graph, memory and schedule (the engine's result). */
typedef struct state {
    ss_taskgraph *tg;
    ss_memory *mm;
    ss_engine *e;
    ss_queue_policy policy;
    int valid;
} state;

struct ss_delta {
    const ss_graph *g;
    const ss_machine *m;
    ss_costmodel *cm;
    ss_builder *b;
    state st[2];
    int base, cur;          /* indices into st[] */
    int have_pending;
    double *peak, *cap_bytes;
    int n_dev;
    /* signature index of the base graph: chains of old ids per bucket */
    int idx_valid, nbuck;
    int32_t *head, *next, *cursor;
    uint32_t *stamp, epoch;
    uint64_t *sig;          /* per old task */
    int cap_idx, cap_sig;
    /* per new task scratch */
    int32_t *map, *tmp;     /* new -> old id (-1 dirty / unmapped) */
    uint8_t *dirty, *used;  /* used: per old task */
    double *lb;
    int32_t *order, *indeg;
    int cap_new, cap_old;
    /* the state to resume from, per new task */
    double *from_start, *from_end;
    int cap_from;
    ss_delta_stats stats;
};

/* ---- small utilities -------------------------------------------------------- */

static int grow(void **p, int *cap, int need, size_t size)
{
    if (need <= *cap)
        return 0;
    int nc = *cap ? *cap : 64;
    while (nc < need)
        nc *= 2;
    void *q = ss_realloc(*p, (size_t)nc * size);
    if (!q)
        return -1;
    *p = q;
    *cap = nc;
    return 0;
}

static int grow2(void **p, int cap_old, int cap_new, size_t size)
{
    if (cap_new <= cap_old && *p)
        return 0;
    void *q = ss_realloc(*p, (size_t)(cap_new ? cap_new : 1) * size);
    if (!q)
        return -1;
    *p = q;
    return 0;
}

static ss_status nomem(ss_diag *d)
{
    return ss_diag_set(d, SS_ERR_NOMEM, "delta simulation: out of memory");
}

static uint64_t mix(uint64_t h, uint64_t v)
{
    h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
    return h * 0xff51afd7ed558ccdULL;
}

static uint64_t dbits(double x)
{
    uint64_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

static uint64_t task_sig(const ss_taskgraph *tg, int t)
{
    uint64_t h = 0x243f6a8885a308d3ULL;
    h = mix(h, tg->kind[t]);
    h = mix(h, (uint64_t)(uint32_t)tg->op[t]);
    h = mix(h, (uint64_t)(uint32_t)tg->tile[t]);
    h = mix(h, (uint64_t)(uint32_t)tg->mb[t]);
    h = mix(h, (uint64_t)(uint32_t)tg->aux[t]);
    h = mix(h, (uint64_t)(uint32_t)tg->prio[t]);
    h = mix(h, dbits(tg->dur[t]));
    h = mix(h, dbits(tg->bytes[t]));
    for (int i = tg->res_off[t]; i < tg->res_off[t + 1]; i++)
        h = mix(h, (uint64_t)(uint32_t)tg->res[i]);
    return h;
}

static int same_task(const ss_taskgraph *a, int x, const ss_taskgraph *b, int y)
{
    if (a->kind[x] != b->kind[y] || a->op[x] != b->op[y] || a->tile[x] != b->tile[y] ||
        a->mb[x] != b->mb[y] || a->aux[x] != b->aux[y] || a->prio[x] != b->prio[y] ||
        dbits(a->dur[x]) != dbits(b->dur[y]) || dbits(a->bytes[x]) != dbits(b->bytes[y]))
        return 0;
    int na = a->res_off[x + 1] - a->res_off[x], nb = b->res_off[y + 1] - b->res_off[y];
    if (na != nb)
        return 0;
    return !memcmp(a->res + a->res_off[x], b->res + b->res_off[y], (size_t)na * sizeof(int32_t));
}

/* ---- life cycle ------------------------------------------------------------- */

static void state_free(state *s)
{
    ss_taskgraph_free(s->tg);
    ss_memory_free(s->mm);
    ss_engine_free(s->e);
}

void ss_delta_free(ss_delta *dl)
{
    if (!dl)
        return;
    ss_build_free(dl->b);
    state_free(&dl->st[0]);
    state_free(&dl->st[1]);
    ss_free(dl->peak);
    ss_free(dl->cap_bytes);
    ss_free(dl->head);
    ss_free(dl->next);
    ss_free(dl->cursor);
    ss_free(dl->stamp);
    ss_free(dl->sig);
    ss_free(dl->map);
    ss_free(dl->tmp);
    ss_free(dl->dirty);
    ss_free(dl->used);
    ss_free(dl->lb);
    ss_free(dl->order);
    ss_free(dl->indeg);
    ss_free(dl->from_start);
    ss_free(dl->from_end);
    ss_free(dl);
}

ss_status ss_delta_new(const ss_graph *g, const ss_machine *m, ss_costmodel *cm, ss_delta **out,
                       ss_diag *d)
{
    ss_delta *dl = ss_calloc(1, sizeof *dl);
    if (!dl)
        return nomem(d);
    dl->g = g;
    dl->m = m;
    dl->cm = cm;
    dl->n_dev = ss_machine_n_devices(m);
    dl->b = ss_build_new(g, m, cm);
    int nch = 2 * ss_machine_n_links(m);
    for (int i = 0; i < 2; i++) {
        dl->st[i].tg = ss_taskgraph_new(dl->n_dev, nch);
        dl->st[i].mm = ss_memory_new();
        dl->st[i].e = ss_engine_new();
    }
    dl->peak = ss_calloc((size_t)dl->n_dev + 1, sizeof *dl->peak);
    dl->cap_bytes = ss_calloc((size_t)dl->n_dev + 1, sizeof *dl->cap_bytes);
    if (!dl->b || !dl->st[0].tg || !dl->st[1].tg || !dl->st[0].mm || !dl->st[1].mm ||
        !dl->st[0].e || !dl->st[1].e || !dl->peak || !dl->cap_bytes) {
        ss_delta_free(dl);
        return nomem(d);
    }
    for (int i = 0; i < dl->n_dev; i++)
        dl->cap_bytes[i] =
            ss_machine_type(m, ss_machine_device(m, i)->type)->mem_gib * 1073741824.0;
    dl->base = 0;
    dl->cur = 1;
    *out = dl;
    return SS_OK;
}

/* ---- mapping and T* -------------------------------------------------------- */

static ss_status build_index(ss_delta *dl, const ss_taskgraph *old, ss_diag *d)
{
    int n = old->n_tasks, nb = 1;
    while (nb < 2 * n + 2)
        nb *= 2;
    if (grow((void **)&dl->head, &dl->cap_idx, nb, sizeof *dl->head) ||
        grow2((void **)&dl->cursor, 0, dl->cap_idx, sizeof *dl->cursor) ||
        grow2((void **)&dl->stamp, 0, dl->cap_idx, sizeof *dl->stamp) ||
        grow((void **)&dl->sig, &dl->cap_sig, n + 1, sizeof *dl->sig) ||
        grow2((void **)&dl->next, 0, dl->cap_sig, sizeof *dl->next) ||
        grow2((void **)&dl->used, 0, dl->cap_sig, sizeof *dl->used))
        return nomem(d);
    dl->nbuck = nb;
    for (int b = 0; b < nb; b++) {
        dl->head[b] = -1;
        dl->stamp[b] = 0;
    }
    dl->epoch = 0;
    /* chains in increasing id order: insert from the back */
    for (int t = n - 1; t >= 0; t--) {
        uint64_t h = task_sig(old, t);
        dl->sig[t] = h;
        int b = (int)(h & (uint64_t)(nb - 1));
        dl->next[t] = dl->head[b];
        dl->head[b] = t;
    }
    dl->idx_valid = 1;
    return SS_OK;
}

/* Map new tasks to old ones, mark dirty tasks, compute T*. Returns T*
 * through *tstar (0 when everything must be re-simulated). */
static ss_status map_tasks(ss_delta *dl, const state *os, const state *ns, double *tstar,
                           ss_diag *d)
{
    const ss_taskgraph *old = os->tg, *nw = ns->tg;
    const ss_engine_result *ob = ss_engine_result_of(os->e);
    int n = nw->n_tasks, no = old->n_tasks;
    if (!dl->idx_valid && build_index(dl, old, d) != SS_OK)
        return d->status;
    if (grow((void **)&dl->map, &dl->cap_new, n + 1, sizeof *dl->map) ||
        grow2((void **)&dl->tmp, 0, dl->cap_new, sizeof *dl->tmp) ||
        grow2((void **)&dl->dirty, 0, dl->cap_new, sizeof *dl->dirty) ||
        grow2((void **)&dl->lb, 0, dl->cap_new, sizeof *dl->lb) ||
        grow2((void **)&dl->order, 0, dl->cap_new, sizeof *dl->order) ||
        grow2((void **)&dl->indeg, 0, dl->cap_new, sizeof *dl->indeg))
        return nomem(d);
    if (++dl->epoch == 0) {
        for (int b = 0; b < dl->nbuck; b++)
            dl->stamp[b] = 0;
        dl->epoch = 1;
    }
    memset(dl->used, 0, (size_t)no * sizeof *dl->used);
    /* 1. signature mapping: the i-th new task of a signature takes the
     *    i-th old one (chains are in old id order). */
    for (int t = 0; t < n; t++) {
        uint64_t h = task_sig(nw, t);
        int b = (int)(h & (uint64_t)(dl->nbuck - 1));
        if (dl->stamp[b] != dl->epoch) {
            dl->stamp[b] = dl->epoch;
            dl->cursor[b] = dl->head[b];
        }
        int x = dl->cursor[b];
        while (x >= 0 && (dl->used[x] || dl->sig[x] != h || !same_task(nw, t, old, x)))
            x = dl->next[x];
        dl->map[t] = x;
        if (x >= 0) {
            dl->used[x] = 1;
            while (dl->cursor[b] >= 0 && dl->used[dl->cursor[b]])
                dl->cursor[b] = dl->next[dl->cursor[b]];
        }
    }
    /* 2. order: clean tasks must keep their relative id order (tie-breaks). */
    int maxold = -1;
    for (int t = 0; t < n; t++) {
        dl->dirty[t] = dl->map[t] < 0;
        if (!dl->dirty[t]) {
            if (dl->map[t] < maxold)
                dl->dirty[t] = 1;
            else
                maxold = dl->map[t];
        }
    }
    /* 3. predecessors: the mapped new predecessors must be exactly the old
     *    task's predecessors (as multisets; lists are short). */
    for (int t = 0; t < n; t++) {
        if (dl->dirty[t])
            continue;
        int x = dl->map[t];
        int np = nw->pred_off[t + 1] - nw->pred_off[t];
        if (np != old->pred_off[x + 1] - old->pred_off[x]) {
            dl->dirty[t] = 1;
            continue;
        }
        for (int i = 0; i < np && !dl->dirty[t]; i++) {
            int p = nw->pred[nw->pred_off[t] + i];
            int mp = dl->map[p];
            if (mp < 0) {
                dl->dirty[t] = 1;
                break;
            }
            /* count occurrences of mp among old preds vs new mapped preds */
            int c_old = 0, c_new = 0;
            for (int k = old->pred_off[x]; k < old->pred_off[x + 1]; k++)
                c_old += old->pred[k] == mp;
            for (int k = nw->pred_off[t]; k < nw->pred_off[t + 1]; k++)
                c_new += dl->map[nw->pred[k]] == mp;
            if (c_old != c_new)
                dl->dirty[t] = 1;
        }
    }
    /* A dirty task's old partner counts as removed. */
    memset(dl->used, 0, (size_t)no * sizeof *dl->used);
    for (int t = 0; t < n; t++)
        if (!dl->dirty[t])
            dl->used[dl->map[t]] = 1;
    double T = INFINITY;
    for (int x = 0; x < no; x++)
        if (!dl->used[x] && ob->ready[x] < T)
            T = ob->ready[x];
    /* 4. lower bounds of dirty tasks' ready times, in topological order of
     *    the dirty subgraph (Kahn over dirty tasks only). */
    int nq = 0;
    for (int t = 0; t < n; t++) {
        if (!dl->dirty[t])
            continue;
        int deg = 0;
        for (int i = nw->pred_off[t]; i < nw->pred_off[t + 1]; i++)
            deg += dl->dirty[nw->pred[i]];
        dl->indeg[t] = deg;
        dl->lb[t] = 0;
        if (deg == 0)
            dl->order[nq++] = t;
    }
    for (int k = 0; k < nq; k++) {
        int t = dl->order[k];
        double r = 0;
        for (int i = nw->pred_off[t]; i < nw->pred_off[t + 1]; i++) {
            int p = nw->pred[i];
            double e = dl->dirty[p] ? dl->lb[p] + nw->dur[p] : ob->end[dl->map[p]];
            if (e > r)
                r = e;
        }
        dl->lb[t] = r;
        if (r < T)
            T = r;
        for (int i = nw->succ_off[t]; i < nw->succ_off[t + 1]; i++) {
            int v = nw->succ[i];
            if (dl->dirty[v] && --dl->indeg[v] == 0)
                dl->order[nq++] = v;
        }
    }
    int ndirty = 0;
    for (int t = 0; t < n; t++)
        ndirty += dl->dirty[t];
    if (nq < ndirty) /* a cycle among dirty tasks: let the full loop report it */
        T = 0;
    *tstar = isfinite(T) ? T : ob->makespan;
    return SS_OK;
}

/* ---- runs ------------------------------------------------------------------- */

ss_status ss_delta_run(ss_delta *dl, const ss_plan *p, int changed, ss_delta_eval *out,
                       ss_diag *d)
{
    ss_diag local;
    ss_diag_init(&local);
    if (!d)
        d = &local;
    dl->have_pending = 0;
    state *ns = &dl->st[dl->cur], *os = &dl->st[dl->base];
    ns->valid = 0;
    ss_status st = ss_build_run(dl->b, p, ns->tg, ns->mm, d);
    if (st)
        return st;
    ns->policy = ss_build_policy(dl->b);
    ss_engine_config ec = {ns->policy};
    int n = ns->tg->n_tasks;
    int delta = changed >= 0 && os->valid && os->policy == ns->policy;
    if (delta) {
        double T = 0;
        if ((st = map_tasks(dl, os, ns, &T, d)) != SS_OK)
            return st;
        if (grow((void **)&dl->from_start, &dl->cap_from, n + 1, sizeof *dl->from_start) ||
            grow2((void **)&dl->from_end, 0, dl->cap_from, sizeof *dl->from_end))
            return nomem(d);
        const ss_engine_result *ob = ss_engine_result_of(os->e);
        for (int t = 0; t < n; t++) {
            int x = dl->map[t];
            int keep = !dl->dirty[t] && ob->start[x] < T;
            dl->from_start[t] = keep ? ob->start[x] : -1;
            dl->from_end[t] = keep ? ob->end[x] : -1;
        }
        ss_engine_state from = {T, dl->from_start, dl->from_end};
        ss_diag dr;
        ss_diag_init(&dr);
        st = ss_engine_resume(ns->e, ns->tg, &ec, &from, &dr);
        if (st == SS_ERR_NOMEM)
            return ss_diag_set(d, st, "%s", dr.msg);
        /* A state the engine refuses cannot come from a sound T*; should it
         * ever happen, the full run below still gives the exact answer. */
        delta = st == SS_OK;
        dl->stats.refused += !delta;
    }
    if (!delta && (st = ss_engine_run(ns->e, ns->tg, &ec, d)) != SS_OK)
        return st;
    const ss_engine_result *er = ss_engine_result_of(ns->e);
    if ((st = ss_memory_sweep(ns->mm, er->start, er->end, dl->peak, d)) != SS_OK)
        return st;
    ns->valid = 1;
    out->iteration_us = er->makespan;
    out->fits = 1;
    out->overflow_bytes = 0;
    out->overflow_device = -1;
    for (int i = 0; i < dl->n_dev; i++) {
        if (dl->peak[i] > dl->cap_bytes[i]) {
            out->fits = 0;
            out->overflow_bytes = dl->peak[i] - dl->cap_bytes[i];
            out->overflow_device = i;
            break;
        }
    }
    out->peak_memory_bytes = dl->peak;
    out->n_tasks = n;
    dl->stats.runs++;
    if (delta)
        dl->stats.delta_runs++;
    else
        dl->stats.full_runs++;
    dl->stats.tasks_total += n;
    dl->stats.tasks_resimulated += er->n_started;
    dl->have_pending = 1;
    return SS_OK;
}

void ss_delta_commit(ss_delta *dl)
{
    if (!dl->have_pending)
        return;
    int t = dl->base;
    dl->base = dl->cur;
    dl->cur = t;
    dl->idx_valid = 0;
    dl->have_pending = 0;
}

const ss_delta_stats *ss_delta_stats_of(const ss_delta *dl) { return &dl->stats; }
