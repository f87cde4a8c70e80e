/*
 * delta.c — delta simulation (delta.h).
 *
 * The base is the last committed plan: its task graph (built by the full
 * builder), its schedule (start, end, ready per task) and its memory. A delta
 * run:
 *
 *  1. builds the proposal's task graph with the same builder, so task ids,
 *     priorities and therefore every tie-break are the full simulation's;
 *  2. aligns the new task sequence with the old one in emission order, like
 *     a diff (align(): equal tasks — kind, op, tile, micro-batch, tag,
 *     priority, duration, bytes, resources — pair up in order; the changed
 *     op's tasks and its producers' communication count as rebuilt); a
 *     mapped task whose mapped predecessors are exactly the old task's
 *     predecessors is CLEAN; every other new task is DIRTY, and old tasks
 *     left unmapped (or mapped to dirty ones) are REMOVED. The map is
 *     increasing, so clean tasks keep their old relative id order;
 *  3. computes T*, a time before which nothing can differ: the minimum over
 *     dirty tasks of a lower bound of their ready time (clean predecessors'
 *     old ends, dirty predecessors' bounds plus durations) and over removed
 *     tasks of their old ready time. Every clean task that started before T*
 *     in the base schedule starts and ends at the same times in the new one
 *     (engine.h, "RESUMING": the decisions before T* never looked at
 *     anything that changed);
 *  4. gives the engine those tasks' times and resumes it at T*
 *     (ss_engine_resume: the event loop exists only in engine.c);
 *  5. sweeps memory with liveness over the new schedule.
 *
 * A run with changed = -1, a different queue policy, or no base is a full
 * engine run. Invariant: st[base] always describes the committed plan (its
 * graph, memory and engine result), st[cur] the last evaluated one; commit
 * swaps them. The property test (tests/simulator/test_delta.c) checks
 * iteration time and every device's peak against ss_sim_run on every one of
 * >= 10,000 random proposals.
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
    /* per new task scratch */
    int32_t *map;           /* new -> old id (-1 unmapped) */
    uint8_t *dirty;
    /* per old task scratch */
    uint8_t *used;          /* partner of a clean new task */
    int32_t *cnt;           /* predecessor counts, all zero between uses */
    int cap_old;
    uint8_t *near;          /* per op: the changed op or one of its producers (align) */
    double *lb;
    int32_t *order, *indeg;
    int cap_new;
    /* the state to resume from, per new task */
    double *from_start, *from_end;
    int cap_from;
    ss_delta_stats stats;
    int mapped;             /* map[] and dirty[] describe the last run (ss_delta_view_of) */
};

/* ---- small utilities -------------------------------------------------------- */

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

static uint64_t dbits(double x)
{
    uint64_t u;
    memcpy(&u, &x, sizeof u);
    return u;
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
    ss_free(dl->map);
    ss_free(dl->dirty);
    ss_free(dl->used);
    ss_free(dl->cnt);
    ss_free(dl->near);
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
    dl->near = ss_calloc((size_t)ss_graph_n_ops(g) + 1, sizeof *dl->near);
    dl->cap_bytes = ss_calloc((size_t)dl->n_dev + 1, sizeof *dl->cap_bytes);
    if (!dl->b || !dl->st[0].tg || !dl->st[1].tg || !dl->st[0].mm || !dl->st[1].mm ||
        !dl->st[0].e || !dl->st[1].e || !dl->peak || !dl->near || !dl->cap_bytes) {
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

/* How far past a mismatch align() looks for the next equal run, and how
 * many equal pairs in a row make a run (identical tasks, e.g. equal
 * transfers between one pair of devices, must not pull the alignment off). */
#define RESYNC 256
#define RUN 4

/* Do new tasks i.. and old tasks j.. start with RUN equal pairs (or equal
 * pairs up to the end of either sequence)? */
static int equal_run(const ss_taskgraph *nw, int i, const ss_taskgraph *old, int j)
{
    for (int k = 0; k < RUN; k++) {
        if (i + k >= nw->n_tasks || j + k >= old->n_tasks)
            return k > 0;
        if (!same_task(nw, i + k, old, j + k))
            return 0;
    }
    return 1;
}

/* Tasks align() treats as rebuilt without looking for a partner: the
 * changed op's own tasks, and the transfers, collectives and joins tagged
 * with one of its producers (among them the changed op's input transfers
 * and their gradients, which the builder tags with the producer). Marking
 * the producers' other communication dirty too costs nothing: it becomes
 * ready no earlier than the producers' outputs, as the changed op's input
 * transfers do, so T* stays where those put it. */
static int rebuilt(const ss_delta *dl, const ss_taskgraph *tg, int t, int changed)
{
    int op = tg->op[t];
    if (op == changed)
        return 1;
    return op >= 0 && dl->near[op] &&
           (tg->kind[t] == SS_TASK_XFER || tg->kind[t] == SS_TASK_COLLECTIVE ||
            tg->kind[t] == SS_TASK_OTHER);
}

/* Align the new task sequence with the old one, both in the builder's
 * emission order: equal tasks (same_task) pair up in order, like a diff.
 * The tasks of the changed op are skipped on both sides (rebuilt); at any
 * other mismatch the nearest equal run within RESYNC tasks on either side
 * resumes the alignment, else both tasks count as replaced. The map is
 * increasing, so mapped tasks keep their relative id order (tie-breaks).
 * Any map is sound (step 3 of map_tasks checks predecessors); a better one
 * only keeps more tasks clean. Sequential access, O(n + mismatches*RESYNC). */
static void align(ss_delta *dl, const ss_taskgraph *nw, const ss_taskgraph *old, int changed)
{
    int n = nw->n_tasks, no = old->n_tasks, i = 0, j = 0;
    const ss_op *cop = ss_graph_op(dl->g, changed);
    for (int k = 0; k < cop->n_in; k++) {
        int q = ss_graph_tensor(dl->g, cop->inputs[k])->producer;
        if (q >= 0)
            dl->near[q] = 1;
    }
    dl->near[changed] = 1;
    while (i < n && j < no) {
        if (same_task(nw, i, old, j)) {
            dl->map[i++] = j++;
            continue;
        }
        if (rebuilt(dl, nw, i, changed)) {
            dl->map[i++] = -1;
            continue;
        }
        if (rebuilt(dl, old, j, changed)) {
            j++;
            continue;
        }
        int k, skip_new = 0, skip_old = 0;
        for (k = 1; k <= RESYNC; k++) {
            if (j + k < no && equal_run(nw, i, old, j + k)) {
                skip_old = k;
                break;
            }
            if (i + k < n && equal_run(nw, i + k, old, j)) {
                skip_new = k;
                break;
            }
        }
        if (skip_old) {
            j += skip_old;
        } else if (skip_new) {
            while (skip_new--)
                dl->map[i++] = -1;
        } else {
            dl->map[i++] = -1;
            j++;
        }
    }
    while (i < n)
        dl->map[i++] = -1;
    for (int k = 0; k < cop->n_in; k++) {
        int q = ss_graph_tensor(dl->g, cop->inputs[k])->producer;
        if (q >= 0)
            dl->near[q] = 0;
    }
    dl->near[changed] = 0;
}

/* Map new tasks to old ones, mark dirty tasks, compute T*. Returns T*
 * through *tstar (0 when everything must be re-simulated). */
static ss_status map_tasks(ss_delta *dl, const state *os, const state *ns, int changed,
                           double *tstar, ss_diag *d)
{
    const ss_taskgraph *old = os->tg, *nw = ns->tg;
    const ss_engine_result *ob = ss_engine_result_of(os->e);
    int n = nw->n_tasks, no = old->n_tasks;
    if (n + 1 > dl->cap_new) {
        int c = dl->cap_new;
        if (ss_grow((void **)&dl->map, &c, n + 1, sizeof *dl->map) ||
            grow2((void **)&dl->dirty, 0, c, sizeof *dl->dirty) ||
            grow2((void **)&dl->lb, 0, c, sizeof *dl->lb) ||
            grow2((void **)&dl->order, 0, c, sizeof *dl->order) ||
            grow2((void **)&dl->indeg, 0, c, sizeof *dl->indeg))
            return nomem(d);
        dl->cap_new = c;
    }
    if (no + 1 > dl->cap_old) {
        int c = dl->cap_old;
        if (ss_grow((void **)&dl->used, &c, no + 1, sizeof *dl->used) ||
            grow2((void **)&dl->cnt, 0, c, sizeof *dl->cnt))
            return nomem(d);
        memset(dl->cnt, 0, (size_t)c * sizeof *dl->cnt);
        dl->cap_old = c;
    }
    /* 1-2. positional alignment (increasing, so the old relative order is
     *      kept); unmapped new tasks are dirty. */
    align(dl, nw, old, changed);
    for (int t = 0; t < n; t++)
        dl->dirty[t] = dl->map[t] < 0;
    /* 3. predecessors: the mapped new predecessors must be exactly the old
     *    task's predecessors as multisets, checked in O(degree) with counts
     *    per old task (cnt[] is all zero between tasks). */
    for (int t = 0; t < n; t++) {
        if (dl->dirty[t])
            continue;
        int x = dl->map[t];
        int np = nw->pred_off[t + 1] - nw->pred_off[t];
        if (np != old->pred_off[x + 1] - old->pred_off[x]) {
            dl->dirty[t] = 1;
            continue;
        }
        for (int k = old->pred_off[x]; k < old->pred_off[x + 1]; k++)
            dl->cnt[old->pred[k]]++;
        int ok = 1;
        for (int k = nw->pred_off[t]; k < nw->pred_off[t + 1] && ok; k++) {
            int mp = dl->map[nw->pred[k]];
            if (mp < 0 || dl->cnt[mp] == 0)
                ok = 0;
            else
                dl->cnt[mp]--;
        }
        for (int k = old->pred_off[x]; k < old->pred_off[x + 1]; k++)
            dl->cnt[old->pred[k]] = 0;
        dl->dirty[t] = !ok;
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
    dl->mapped = 0;
    state *ns = &dl->st[dl->cur], *os = &dl->st[dl->base];
    ns->valid = 0;
    ss_status st = ss_build_run(dl->b, p, ns->tg, ns->mm, d);
    if (!st)
        st = ss_build_memory(dl->b, ns->mm, d);
    if (st)
        return st;
    ns->policy = ss_build_policy(dl->b);
    ss_engine_config ec = {.policy = ns->policy};
    int n = ns->tg->n_tasks;
    int delta = changed >= 0 && changed < ss_graph_n_ops(dl->g) && os->valid &&
                os->policy == ns->policy;
    if (delta) {
        double T = 0;
        if ((st = map_tasks(dl, os, ns, changed, &T, d)) != SS_OK)
            return st;
        dl->mapped = 1;
        if (n + 1 > dl->cap_from) {
            int c = dl->cap_from;
            if (ss_grow((void **)&dl->from_start, &c, n + 1, sizeof *dl->from_start) ||
                grow2((void **)&dl->from_end, 0, c, sizeof *dl->from_end))
                return nomem(d);
            dl->cap_from = c;
        }
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
    dl->have_pending = 0;
}

const ss_delta_stats *ss_delta_stats_of(const ss_delta *dl) { return &dl->stats; }

int ss_delta_view_of(const ss_delta *dl, ss_delta_view *v)
{
    const state *ns = &dl->st[dl->cur], *os = &dl->st[dl->base];
    if (!dl->have_pending || !dl->mapped)
        return 0;
    v->base_tg = os->tg;
    v->tg = ns->tg;
    v->base = ss_engine_result_of(os->e);
    v->cur = ss_engine_result_of(ns->e);
    v->policy = ns->policy;
    v->map = dl->map;
    v->dirty = dl->dirty;
    return 1;
}
