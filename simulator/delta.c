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
#include "simulator/memory.h"
#include "simulator/taskgraph.h"

#include <math.h>
#include <string.h>

typedef struct qent {
    double ready;
    int64_t pk;
    int32_t cls;
    int32_t id;
} qent;

typedef struct event {
    double t;
    int32_t id;
} event;

/* One evaluated plan: its graph, memory and schedule. */
typedef struct state {
    ss_taskgraph *tg;
    ss_memory *mm;
    double *start, *end, *ready;
    int cap;
    ss_queue_policy policy;
    double makespan;
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
    /* engine scratch */
    int32_t *qoff, *qn, *holder, *touched, *left;
    uint8_t *is_touched;
    qent *slots;
    event *ev;
    int cap_res, cap_slots, cap_ev, cap_left;
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
    ss_free(s->start);
    ss_free(s->end);
    ss_free(s->ready);
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
    ss_free(dl->qoff);
    ss_free(dl->qn);
    ss_free(dl->holder);
    ss_free(dl->touched);
    ss_free(dl->left);
    ss_free(dl->is_touched);
    ss_free(dl->slots);
    ss_free(dl->ev);
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
    }
    dl->peak = ss_calloc((size_t)dl->n_dev + 1, sizeof *dl->peak);
    dl->cap_bytes = ss_calloc((size_t)dl->n_dev + 1, sizeof *dl->cap_bytes);
    if (!dl->b || !dl->st[0].tg || !dl->st[1].tg || !dl->st[0].mm || !dl->st[1].mm ||
        !dl->peak || !dl->cap_bytes) {
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

/* ---- the event loop (engine.h's rules) ---------------------------------------- */

static inline int qless(const qent *a, const qent *b)
{
    if (a->cls != b->cls)
        return a->cls < b->cls;
    if (a->ready != b->ready)
        return a->ready < b->ready;
    return a->pk < b->pk;
}

static inline void qpush(qent *h, int32_t *n, qent e)
{
    int i = (*n)++;
    while (i > 0) {
        int p = (i - 1) >> 1;
        if (!qless(&e, &h[p]))
            break;
        h[i] = h[p];
        i = p;
    }
    h[i] = e;
}

static inline void qpop(qent *h, int32_t *n)
{
    int m = --(*n);
    if (m == 0)
        return;
    qent e = h[m];
    int i = 0;
    for (;;) {
        int c = 2 * i + 1;
        if (c >= m)
            break;
        if (c + 1 < m && qless(&h[c + 1], &h[c]))
            c++;
        if (!qless(&h[c], &e))
            break;
        h[i] = h[c];
        i = c;
    }
    h[i] = e;
}

static inline int eless(const event *a, const event *b)
{
    return a->t < b->t || (a->t == b->t && a->id < b->id);
}

static inline void epush(event *h, int *n, event e)
{
    int i = (*n)++;
    while (i > 0) {
        int p = (i - 1) >> 1;
        if (!eless(&e, &h[p]))
            break;
        h[i] = h[p];
        i = p;
    }
    h[i] = e;
}

static inline void epop(event *h, int *n)
{
    int m = --(*n);
    if (m == 0)
        return;
    event e = h[m];
    int i = 0;
    for (;;) {
        int c = 2 * i + 1;
        if (c >= m)
            break;
        if (c + 1 < m && eless(&h[c + 1], &h[c]))
            c++;
        if (!eless(&h[c], &e))
            break;
        h[i] = h[c];
        i = c;
    }
    h[i] = e;
}

typedef struct loop {
    ss_delta *dl;
    const ss_taskgraph *tg;
    state *s;
    int bf, nev, ntouched;
    int64_t retired, simulated;
} loop;

static inline void touch(loop *L, int r)
{
    ss_delta *dl = L->dl;
    if (!dl->is_touched[r]) {
        dl->is_touched[r] = 1;
        dl->touched[L->ntouched++] = r;
    }
}

static void start_task(loop *L, int h, double t)
{
    ss_delta *dl = L->dl;
    const ss_taskgraph *tg = L->tg;
    for (int i = tg->res_off[h]; i < tg->res_off[h + 1]; i++) {
        int r = tg->res[i];
        qpop(dl->slots + dl->qoff[r], &dl->qn[r]);
        dl->holder[r] = h;
    }
    L->s->start[h] = t;
    L->s->end[h] = t + tg->dur[h];
    L->simulated++;
    event e = {t + tg->dur[h], h};
    epush(dl->ev, &L->nev, e);
}

static void enqueue(loop *L, int id)
{
    ss_delta *dl = L->dl;
    const ss_taskgraph *tg = L->tg;
    qent q;
    q.ready = L->s->ready[id];
    q.pk = (int64_t)tg->prio[id] * ((int64_t)1 << 32) + id;
    q.cls = L->bf && tg->kind[id] == SS_TASK_FWD;
    q.id = id;
    for (int i = tg->res_off[id]; i < tg->res_off[id + 1]; i++) {
        int r = tg->res[i];
        qpush(dl->slots + dl->qoff[r], &dl->qn[r], q);
        touch(L, r);
    }
}

static void release(loop *L, int id, double t)
{
    L->s->ready[id] = t;
    if (L->tg->res_off[id] == L->tg->res_off[id + 1])
        start_task(L, id, t);
    else
        enqueue(L, id);
}

static void retire(loop *L, int h, double t)
{
    ss_delta *dl = L->dl;
    const ss_taskgraph *tg = L->tg;
    L->retired++;
    for (int i = tg->res_off[h]; i < tg->res_off[h + 1]; i++) {
        int r = tg->res[i];
        dl->holder[r] = -1;
        touch(L, r);
    }
    for (int i = tg->succ_off[h]; i < tg->succ_off[h + 1]; i++) {
        int v = tg->succ[i];
        if (--dl->left[v] == 0)
            release(L, v, t);
    }
}

/* Start whatever can start on the touched resources (rule 3). With
 * zero_only, only zero-duration heads start and resources whose head takes
 * time stay touched for the final pass at this time (engine.c). */
static void dispatch(loop *L, double now, int zero_only)
{
    ss_delta *dl = L->dl;
    const ss_taskgraph *tg = L->tg;
    int keep = 0;
    for (int k = 0; k < L->ntouched; k++) {
        int r = dl->touched[k];
        if (dl->holder[r] >= 0 || dl->qn[r] == 0) {
            dl->is_touched[r] = 0;
            continue;
        }
        int h = dl->slots[dl->qoff[r]].id;
        if (zero_only && tg->dur[h] > 0) {
            dl->touched[keep++] = r;
            continue;
        }
        dl->is_touched[r] = 0;
        int ok = 1;
        for (int i = tg->res_off[h]; i < tg->res_off[h + 1] && ok; i++) {
            int r2 = tg->res[i];
            if (r2 == r)
                continue;
            if (dl->holder[r2] >= 0 || dl->qn[r2] == 0 || dl->slots[dl->qoff[r2]].id != h)
                ok = 0;
        }
        if (ok)
            start_task(L, h, now);
    }
    L->ntouched = keep;
}

/* Settle time `now`: retire everything ending now, run zero-duration tasks
 * to closure, then start positive-duration tasks (engine.c's rule 4). */
static void settle(loop *L, double now)
{
    ss_delta *dl = L->dl;
    for (;;) {
        while (L->nev > 0 && dl->ev[0].t == now) {
            int h = dl->ev[0].id;
            epop(dl->ev, &L->nev);
            retire(L, h, now);
        }
        dispatch(L, now, 1);
        if (!(L->nev > 0 && dl->ev[0].t == now))
            break;
    }
    dispatch(L, now, 0);
}

static ss_status engine_reserve(ss_delta *dl, const ss_taskgraph *tg, ss_diag *d)
{
    int n = tg->n_tasks, nr = tg->n_resources, nslots = tg->res_off[n];
    if (grow((void **)&dl->qoff, &dl->cap_res, nr + 1, sizeof *dl->qoff))
        return nomem(d);
    int cr = dl->cap_res;
    if (grow2((void **)&dl->qn, 0, cr, sizeof *dl->qn) ||
        grow2((void **)&dl->holder, 0, cr, sizeof *dl->holder) ||
        grow2((void **)&dl->touched, 0, cr, sizeof *dl->touched) ||
        grow2((void **)&dl->is_touched, 0, cr, sizeof *dl->is_touched))
        return nomem(d);
    if (grow((void **)&dl->slots, &dl->cap_slots, nslots + 1, sizeof *dl->slots) ||
        grow((void **)&dl->ev, &dl->cap_ev, n + 1, sizeof *dl->ev) ||
        grow((void **)&dl->left, &dl->cap_left, n + 1, sizeof *dl->left))
        return nomem(d);
    memset(dl->qoff, 0, ((size_t)nr + 1) * sizeof *dl->qoff);
    for (int i = 0; i < nslots; i++)
        dl->qoff[tg->res[i] + 1]++;
    for (int r = 0; r < nr; r++)
        dl->qoff[r + 1] += dl->qoff[r];
    for (int r = 0; r < nr; r++) {
        dl->qn[r] = 0;
        dl->holder[r] = -1;
        dl->is_touched[r] = 0;
    }
    return SS_OK;
}

/* Run s's graph from the state at the start of the round at time T: tasks
 * with s->start[t] >= 0 started before T (and keep their times); the rest
 * are unscheduled (start -1). T = 0 with nothing started is a full run. */
static ss_status run_from(ss_delta *dl, state *s, double T, int64_t *simulated, ss_diag *d)
{
    const ss_taskgraph *tg = s->tg;
    int n = tg->n_tasks;
    ss_status st = engine_reserve(dl, tg, d);
    if (st)
        return st;
    loop L = {dl, tg, s, s->policy == SS_QUEUE_BACKWARD_FIRST, 0, 0, 0, 0};
    /* Running tasks hold their resources and have their completion event;
     * finished ones are retired. */
    for (int t = 0; t < n; t++) {
        if (s->start[t] < 0)
            continue;
        if (s->end[t] < T) {
            L.retired++;
            continue;
        }
        for (int i = tg->res_off[t]; i < tg->res_off[t + 1]; i++)
            dl->holder[tg->res[i]] = t;
        event e = {s->end[t], t};
        epush(dl->ev, &L.nev, e);
    }
    /* Predecessors not yet retired; released tasks wait in the queues. */
    for (int t = 0; t < n; t++) {
        if (s->start[t] >= 0)
            continue;
        int left = 0;
        double ready = 0;
        for (int i = tg->pred_off[t]; i < tg->pred_off[t + 1]; i++) {
            int p = tg->pred[i];
            if (s->start[p] < 0 || s->end[p] >= T)
                left++;
            else if (s->end[p] > ready)
                ready = s->end[p];
        }
        dl->left[t] = left;
        if (left == 0) {
            s->ready[t] = ready;
            if (tg->res_off[t] == tg->res_off[t + 1] && T > 0)
                return SS_ERR_UNSUPPORTED; /* cannot happen with a sound T*: run in full */
            release(&L, t, ready);
        }
    }
    settle(&L, T);
    while (L.nev > 0)
        settle(&L, dl->ev[0].t);
    if (L.retired != n)
        return ss_diag_set(d, SS_ERR_INVALID,
                           "delta simulation: dependency cycle: %lld of %d tasks never ran",
                           (long long)(n - L.retired), n);
    double mk = 0;
    for (int t = 0; t < n; t++)
        if (s->end[t] > mk)
            mk = s->end[t];
    s->makespan = mk;
    *simulated = L.simulated;
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
        if (!dl->used[x] && os->ready[x] < T)
            T = os->ready[x];
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
            double e = dl->dirty[p] ? dl->lb[p] + nw->dur[p] : os->end[dl->map[p]];
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
    *tstar = isfinite(T) ? T : os->makespan;
    return SS_OK;
}

/* ---- runs ------------------------------------------------------------------- */

static ss_status reserve_state(state *s, int n, ss_diag *d)
{
    if (grow((void **)&s->start, &s->cap, n + 1, sizeof *s->start) ||
        grow2((void **)&s->end, 0, s->cap, sizeof *s->end) ||
        grow2((void **)&s->ready, 0, s->cap, sizeof *s->ready))
        return nomem(d);
    return SS_OK;
}

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
    int n = ns->tg->n_tasks;
    if ((st = reserve_state(ns, n, d)) != SS_OK)
        return st;
    for (int t = 0; t < n; t++)
        ns->start[t] = ns->end[t] = ns->ready[t] = -1;
    double T = 0;
    int delta = changed >= 0 && os->valid && os->policy == ns->policy;
    if (delta) {
        if ((st = map_tasks(dl, os, ns, &T, d)) != SS_OK)
            return st;
        for (int t = 0; t < n; t++) {
            if (dl->dirty[t])
                continue;
            int x = dl->map[t];
            if (os->start[x] < T) {
                ns->start[t] = os->start[x];
                ns->end[t] = os->end[x];
                ns->ready[t] = os->ready[x];
            }
        }
    }
    int64_t simulated = 0;
    st = run_from(dl, ns, T, &simulated, d);
    if (st == SS_ERR_UNSUPPORTED) {
        for (int t = 0; t < n; t++)
            ns->start[t] = ns->end[t] = ns->ready[t] = -1;
        delta = 0;
        st = run_from(dl, ns, 0, &simulated, d);
    }
    if (st)
        return st;
    if ((st = ss_memory_sweep(ns->mm, ns->start, ns->end, dl->peak, d)) != SS_OK)
        return st;
    ns->valid = 1;
    out->iteration_us = ns->makespan;
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
    dl->stats.tasks_resimulated += simulated;
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
