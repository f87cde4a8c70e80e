/*
 * engine.c — the event-driven list scheduler (rules and proofs in engine.h).
 *
 * Data: two sorted queues per resource r, one per key class (queue 2r + cls),
 * all carved out of one slot array: queue q owns as many slots as tasks of
 * its class use r, and every such task enters it exactly once, so it never
 * overflows and never wraps. Its live entries are slots[qh[q] .. qt[q]),
 * sorted by key; pop = qh[q]++, push = insert from the tail. Within one
 * class keys arrive in nondecreasing ready time (tasks are released at the
 * time being settled, which only grows), so an insertion moves only the
 * entries released at the same time with a larger (prio, id): O(1) per task
 * in practice (a resumed run's initial releases may shift more). The head of
 * r is the head of queue 2r if not empty, else of 2r + 1 (class 0 keys are
 * all smaller). One binary heap of completion events; per-task and
 * per-resource arrays grown on demand and reused by every run. Invariant
 * between rounds: holder[r] is the running task on r or -1; a task is in r's
 * queue iff it is released, not started, and uses r.
 */
#include "simulator/engine.h"

#include <math.h>
#include <string.h>

/* Queue entry: the key (cls, ready, prio, id) packed into two unsigned
 * words compared lexicographically: hi = cls << 63 | the bits of ready (a
 * double >= +0, whose bit patterns order as the values do and leave bit 63
 * clear), lo = (prio + 2^31) << 32 | id. */
typedef struct qent {
    uint64_t hi, lo;
} qent;

static inline qent qkey(int cls, double ready, int32_t prio, int32_t id)
{
    qent q;
    double r = ready + 0.0; /* -0 -> +0 */
    memcpy(&q.hi, &r, sizeof q.hi);
    q.hi |= (uint64_t)cls << 63;
    q.lo = (uint64_t)((uint32_t)prio ^ 0x80000000u) << 32 | (uint32_t)id;
    return q;
}

static inline int32_t qid(const qent *q) { return (int32_t)(uint32_t)q->lo; }

/* Per-task run state, packed so that releasing a successor touches one
 * cache line instead of one per array. */
typedef struct tinfo {
    double ready;
    double dur;
    int32_t res_lo;  /* resources: tg->res[res_lo .. res_lo + nres) */
    int32_t prio;
    uint16_t nres;
    uint8_t cls;     /* 1: forward under backward-first */
    uint8_t pad[5];
} tinfo;

typedef struct event {
    double t;
    int32_t id;
} event;

struct ss_engine {
    int valid;
    ss_engine_result res;
    /* per task */
    int cap_tasks;
    double *start, *end, *ready;
    int32_t *start_round, *end_round;
    tinfo *ti;
    int32_t *left;  /* per task: predecessors not yet ended (apart from ti:
                     * the hot decrement stays in a small array) */
    int32_t *blocker;
    uint8_t *by_res;
    event *ev;
    /* per resource */
    int cap_res;
    double *busy;
    int32_t *holder, *last, *qh, *qt, *touched; /* qh, qt: [2 * resources] */
    uint8_t *is_touched;
    /* queue slots */
    int cap_slots;
    qent *slots;
    /* per device */
    int cap_dev;
    double *compute, *comm, *exposed, *idle, *last_t;
    int32_t *ncomm;
    uint8_t *computing;
    /* critical path */
    int cap_path;
    int32_t *path;
};

static inline int qless(const qent *a, const qent *b)
{
    return (a->hi < b->hi) | ((a->hi == b->hi) & (a->lo < b->lo));
}

/* Insert x into sorted queue q (see the file comment). */
static inline void qpush(ss_engine *e, int q, qent x)
{
    int lo = e->qh[q], i = e->qt[q]++;
    while (i > lo && qless(&x, &e->slots[i - 1])) {
        e->slots[i] = e->slots[i - 1];
        i--;
    }
    e->slots[i] = x;
}

/* The head of resource r's queues, NULL if both are empty. */
static inline const qent *qtop(const ss_engine *e, int r)
{
    int q = 2 * r;
    if (e->qh[q] < e->qt[q])
        return &e->slots[e->qh[q]];
    if (e->qh[q + 1] < e->qt[q + 1])
        return &e->slots[e->qh[q + 1]];
    return NULL;
}

static inline int eless(const event *a, const event *b)
{
    return (a->t < b->t) | ((a->t == b->t) & (a->id < b->id));
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

ss_engine *ss_engine_new(void) { return ss_calloc(1, sizeof(ss_engine)); }

void ss_engine_free(ss_engine *e)
{
    if (!e)
        return;
    ss_free(e->start);
    ss_free(e->end);
    ss_free(e->ready);
    ss_free(e->start_round);
    ss_free(e->end_round);
    ss_free(e->ti);
    ss_free(e->left);
    ss_free(e->blocker);
    ss_free(e->by_res);
    ss_free(e->ev);
    ss_free(e->busy);
    ss_free(e->holder);
    ss_free(e->last);
    ss_free(e->qh);
    ss_free(e->qt);
    ss_free(e->touched);
    ss_free(e->is_touched);
    ss_free(e->slots);
    ss_free(e->compute);
    ss_free(e->comm);
    ss_free(e->exposed);
    ss_free(e->idle);
    ss_free(e->last_t);
    ss_free(e->ncomm);
    ss_free(e->computing);
    ss_free(e->path);
    ss_free(e);
}

static int grow(void **p, size_t sz, size_t n)
{
    void *q = ss_realloc(*p, (n ? n : 1) * sz);
    if (!q)
        return -1;
    *p = q;
    return 0;
}

#define GROW(field, n) grow((void **)&e->field, sizeof *e->field, (size_t)(n))

/* Make room for a graph of this size. Arrays that grew stay grown on error;
 * the caps move only when every array of a group has its size. */
static int reserve(ss_engine *e, int tasks, int res, int slots, int devs)
{
    if (tasks > e->cap_tasks) {
        if (GROW(start, tasks) || GROW(end, tasks) || GROW(ready, tasks) || GROW(ti, tasks) ||
            GROW(blocker, tasks) || GROW(by_res, tasks) || GROW(ev, tasks) ||
            GROW(start_round, tasks) || GROW(end_round, tasks) || GROW(left, tasks))
            return -1;
        e->cap_tasks = tasks;
    }
    if (res > e->cap_res) {
        if (GROW(busy, res) || GROW(holder, res) || GROW(last, res) || GROW(qh, 2 * res) ||
            GROW(qt, 2 * res) || GROW(touched, res) || GROW(is_touched, res))
            return -1;
        e->cap_res = res;
    }
    if (slots > e->cap_slots) {
        if (GROW(slots, slots))
            return -1;
        e->cap_slots = slots;
    }
    if (devs > e->cap_dev) {
        if (GROW(compute, devs) || GROW(comm, devs) || GROW(exposed, devs) ||
            GROW(idle, devs) || GROW(last_t, devs) || GROW(ncomm, devs) ||
            GROW(computing, devs))
            return -1;
        e->cap_dev = devs;
    }
    return 0;
}

/* Run state shared by the helpers of one ss_engine_run. */
typedef struct run {
    ss_engine *e;
    const ss_taskgraph *tg;
    int nev;
    int ntouched;
    int32_t round;  /* index of the event time being settled */
    int64_t retired, started;
} run;

static inline void touch(run *s, int r)
{
    ss_engine *e = s->e;
    if (!e->is_touched[r]) {
        e->is_touched[r] = 1;
        e->touched[s->ntouched++] = r;
    }
}

/* Device d's communication/compute state is about to change at time t:
 * account the interval since its last change under the old state. */
static inline void dev_mark(ss_engine *e, int dev, double t)
{
    double dt = t - e->last_t[dev];
    if (dt > 0) {
        if (e->ncomm[dev] > 0) {
            e->comm[dev] += dt;
            if (!e->computing[dev])
                e->exposed[dev] += dt;
        }
        e->last_t[dev] = t;
    }
}

/* Channel resource r (>= n_devices) starts (delta +1) or stops (-1) at t. */
static inline void chan_change(run *s, int r, double t, int delta)
{
    const ss_taskgraph *tg = s->tg;
    ss_engine *e = s->e;
    int c = r - tg->n_devices;
    int a = tg->chan_dev[2 * c], b = tg->chan_dev[2 * c + 1];
    if (a >= 0) {
        dev_mark(e, a, t);
        e->ncomm[a] += delta;
    }
    if (b >= 0 && b != a) {
        dev_mark(e, b, t);
        e->ncomm[b] += delta;
    }
}

static void start_task(run *s, int h, double t)
{
    ss_engine *e = s->e;
    const ss_taskgraph *tg = s->tg;
    const tinfo *ti = &e->ti[h];
    int lo = ti->res_lo, hi = lo + ti->nres;
    double dur = ti->dur;
    if (t > ti->ready) {
        /* Waited for a resource: the blocker is the task that freed one of
         * them last (at t, see engine.c's proof in engine.h). */
        int best = -1;
        double best_end = -1;
        for (int i = lo; i < hi; i++) {
            int p = e->last[tg->res[i]];
            if (p >= 0 && e->end[p] > best_end) {
                best_end = e->end[p];
                best = p;
            }
        }
        e->blocker[h] = best;
        e->by_res[h] = 1;
    }
    for (int i = lo; i < hi; i++) {
        int r = tg->res[i];
        e->qh[2 * r + ti->cls]++; /* h is r's head (dispatch checked) */
        e->holder[r] = h;
        e->last[r] = h;
        e->busy[r] += dur;
        if (r < tg->n_devices) {
            dev_mark(e, r, t);
            e->computing[r] = 1;
        } else {
            chan_change(s, r, t, +1);
        }
    }
    e->start[h] = t;
    e->end[h] = t + dur;
    e->start_round[h] = s->round;
    s->started++;
    event ev = {t + dur, h};
    epush(e->ev, &s->nev, ev);
}

static inline void release(run *s, int t_id, double t)
{
    ss_engine *e = s->e;
    const ss_taskgraph *tg = s->tg;
    tinfo *ti = &e->ti[t_id];
    ti->ready = t;
    int lo = ti->res_lo, hi = lo + ti->nres;
    if (lo == hi) {
        start_task(s, t_id, t);
        return;
    }
    qent q = qkey(ti->cls, t, ti->prio, t_id);
    for (int i = lo; i < hi; i++) {
        int r = tg->res[i];
        qpush(e, 2 * r + ti->cls, q);
        touch(s, r);
    }
}

static void retire(run *s, int h, double t)
{
    ss_engine *e = s->e;
    const ss_taskgraph *tg = s->tg;
    s->retired++;
    e->end_round[h] = s->round;
    int lo = e->ti[h].res_lo, hi = lo + e->ti[h].nres;
    for (int i = lo; i < hi; i++) {
        int r = tg->res[i];
        e->holder[r] = -1;
        if (r < tg->n_devices) {
            dev_mark(e, r, t);
            e->computing[r] = 0;
        } else {
            chan_change(s, r, t, -1);
        }
        touch(s, r);
    }
    for (int i = tg->succ_off[h]; i < tg->succ_off[h + 1]; i++) {
        int v = tg->succ[i];
        if (--e->left[v] == 0) {
            e->blocker[v] = h;
            e->by_res[v] = 0;
            release(s, v, t);
        }
    }
}

/* Start whatever can start on the touched resources (rule 3). With
 * zero_only, start only zero-duration tasks and keep the resources whose head
 * has a positive duration touched for the final pass at this time. */
static void dispatch(run *s, double now, int zero_only)
{
    ss_engine *e = s->e;
    const ss_taskgraph *tg = s->tg;
    int keep = 0;
    for (int k = 0; k < s->ntouched; k++) {
        int r = e->touched[k];
        const qent *top = e->holder[r] >= 0 ? NULL : qtop(e, r);
        if (!top) {
            e->is_touched[r] = 0;
            continue;
        }
        int h = qid(top);
        const tinfo *ti = &e->ti[h];
        if (zero_only && ti->dur > 0) {
            e->touched[keep++] = r;
            continue;
        }
        e->is_touched[r] = 0;
        int ok = 1;
        for (int i = ti->res_lo; i < ti->res_lo + ti->nres && ok; i++) {
            int r2 = tg->res[i];
            if (r2 == r)
                continue;
            const qent *t2;
            if (e->holder[r2] >= 0 || !(t2 = qtop(e, r2)) || qid(t2) != h)
                ok = 0;
        }
        if (ok)
            start_task(s, h, now);
    }
    s->ntouched = keep;
}

/* Settle time `now`: retire everything ending now, then run zero-duration
 * tasks to closure (they take no time, so everything they release is ready
 * now too and competes on equal terms), then start positive-duration tasks
 * (rule 4). Starting a positive task never creates an event at `now`. */
static void settle(run *s, double now)
{
    ss_engine *e = s->e;
    for (;;) {
        while (s->nev > 0 && e->ev[0].t == now) {
            int h = e->ev[0].id;
            epop(e->ev, &s->nev);
            retire(s, h, now);
        }
        dispatch(s, now, 1);
        if (!(s->nev > 0 && e->ev[0].t == now))
            break;
    }
    dispatch(s, now, 0);
}

/* Check the arguments and size and reset every work array for tg (every
 * task unstarted with all its predecessors outstanding). */
static ss_status prepare(ss_engine *e, const ss_taskgraph *tg, const ss_engine_config *cfg,
                         ss_diag *d)
{
    e->valid = 0;
    ss_queue_policy pol = cfg ? cfg->policy : SS_QUEUE_FIFO;
    if (pol != SS_QUEUE_FIFO && pol != SS_QUEUE_BACKWARD_FIRST)
        return ss_diag_set(d, SS_ERR_INVALID, "engine: unknown queue policy %d", (int)pol);
    if (!tg->finalized)
        return ss_diag_set(d, SS_ERR_INVALID, "engine: task graph not finalized");
    int n = tg->n_tasks, nr = tg->n_resources, nd = tg->n_devices;
    int nslots = tg->res_off[n];
    if (reserve(e, n, nr, nslots, nd))
        return ss_diag_set(d, SS_ERR_NOMEM, "engine: out of memory for %d tasks", n);

    for (int r = 0; r < nr; r++) {
        e->busy[r] = 0;
        e->holder[r] = -1;
        e->last[r] = -1;
        e->is_touched[r] = 0;
    }
    for (int v = 0; v < nd; v++) {
        e->comm[v] = 0;
        e->exposed[v] = 0;
        e->last_t[v] = 0;
        e->ncomm[v] = 0;
        e->computing[v] = 0;
    }
    for (int t = 0; t < n; t++) {
        tinfo *ti = &e->ti[t];
        ti->ready = 0;
        ti->dur = tg->dur[t];
        e->left[t] = tg->pred_off[t + 1] - tg->pred_off[t];
        ti->res_lo = tg->res_off[t];
        ti->nres = (uint16_t)(tg->res_off[t + 1] - tg->res_off[t]);
        ti->prio = tg->prio[t];
        ti->cls = pol == SS_QUEUE_BACKWARD_FIRST && tg->kind[t] == SS_TASK_FWD;
        memset(ti->pad, 0, sizeof ti->pad);
        e->blocker[t] = -1;
        e->by_res[t] = 0;
        e->start[t] = -1;
        e->end[t] = -1;
    }
    /* Queue partition: queue 2r + cls gets as many slots as tasks of class
     * cls use r (counted in qh, then turned into offsets). */
    memset(e->qh, 0, 2 * (size_t)nr * sizeof *e->qh);
    for (int t = 0; t < n; t++)
        for (int i = e->ti[t].res_lo; i < e->ti[t].res_lo + e->ti[t].nres; i++)
            e->qh[2 * tg->res[i] + e->ti[t].cls]++;
    for (int q = 0, pos = 0; q < 2 * nr; q++) {
        int c = e->qh[q];
        e->qh[q] = e->qt[q] = pos;
        pos += c;
    }
    return SS_OK;
}

/* Run rounds from time t0 until no event is left, then check that every
 * task ran and fill the result (the breakdown only when `full`). */
static ss_status finish(run *s, double t0, int full, ss_diag *d)
{
    ss_engine *e = s->e;
    const ss_taskgraph *tg = s->tg;
    int n = tg->n_tasks, nd = tg->n_devices;
    int64_t rounds = 1;
    s->round = 0;
    settle(s, t0);
    while (s->nev > 0) {
        s->round = (int32_t)rounds++;
        settle(s, e->ev[0].t);
    }
    if (s->retired != n) {
        int bad = -1;
        for (int t = 0; t < n && bad < 0; t++)
            if (e->end[t] < 0)
                bad = t;
        return ss_diag_set(d, SS_ERR_INVALID,
                           "engine: dependency cycle: %lld of %d tasks never ran (first: task %d, %s op %d tile %d)",
                           (long long)(n - s->retired), n, bad,
                           ss_task_kind_name((ss_task_kind)tg->kind[bad]), tg->op[bad],
                           tg->tile[bad]);
    }

    double makespan = 0;
    for (int t = 0; t < n; t++) {
        if (e->end[t] > makespan)
            makespan = e->end[t];
        e->ready[t] = e->ti[t].ready;
    }
    ss_engine_result *r = &e->res;
    memset(r, 0, sizeof *r);
    if (full) {
        for (int v = 0; v < nd; v++) {
            dev_mark(e, v, makespan);
            e->compute[v] = e->busy[v];
            e->idle[v] = makespan - e->busy[v];
        }
        r->busy = e->busy;
        r->compute_us = e->compute;
        r->comm_us = e->comm;
        r->exposed_comm_us = e->exposed;
        r->idle_us = e->idle;
        r->start_round = e->start_round;
        r->end_round = e->end_round;
    }
    r->n_tasks = n;
    r->n_resources = tg->n_resources;
    r->n_devices = nd;
    r->makespan = makespan;
    r->start = e->start;
    r->end = e->end;
    r->ready = e->ready;
    r->blocker = e->blocker;
    r->blocked_by_resource = e->by_res;
    r->n_rounds = rounds;
    r->n_started = s->started;
    r->resumed = !full;
    e->valid = 1;
    return SS_OK;
}

ss_status ss_engine_run(ss_engine *e, const ss_taskgraph *tg, const ss_engine_config *cfg,
                        ss_diag *d)
{
    ss_status st = prepare(e, tg, cfg, d);
    if (st != SS_OK)
        return st;
    run s = {e, tg, 0, 0, 0, 0, 0};
    for (int t = 0; t < tg->n_tasks; t++)
        if (e->left[t] == 0)
            release(&s, t, 0.0);
    return finish(&s, 0.0, 1, d);
}

ss_status ss_engine_resume(ss_engine *e, const ss_taskgraph *tg, const ss_engine_config *cfg,
                           const ss_engine_state *from, ss_diag *d)
{
    ss_status st = prepare(e, tg, cfg, d);
    if (st != SS_OK)
        return st;
    int n = tg->n_tasks;
    double T = from->t;
    const double *fs = from->start, *fe = from->end;
    if (!(T >= 0) || !isfinite(T))
        return ss_diag_set(d, SS_ERR_INVALID, "engine: resume time %g is not a finite time >= 0",
                           T);
    run s = {e, tg, 0, 0, 0, 0, 0};
    /* Tasks that started before T keep their times: those that ended
     * before T are retired, the others hold their resources and have their
     * completion event. */
    for (int t = 0; t < n; t++) {
        if (fs[t] < 0)
            continue;
        if (!(fs[t] < T) || fe[t] != fs[t] + tg->dur[t])
            return ss_diag_set(d, SS_ERR_INVALID,
                               "engine: resume state: task %d starts at %g, ends at %g (duration %g, resume time %g)",
                               t, fs[t], fe[t], tg->dur[t], T);
        e->start[t] = fs[t];
        e->end[t] = fe[t];
        const tinfo *ti = &e->ti[t];
        for (int i = ti->res_lo; i < ti->res_lo + ti->nres; i++) {
            int r = tg->res[i];
            if (fe[t] >= T) {
                if (e->holder[r] >= 0)
                    return ss_diag_set(d, SS_ERR_INVALID,
                                       "engine: resume state: tasks %d and %d both hold resource %d at %g",
                                       e->holder[r], t, r, T);
                e->holder[r] = t;
            }
        }
        if (fe[t] < T) {
            s.retired++;
        } else {
            event ev = {fe[t], t};
            epush(e->ev, &s.nev, ev);
        }
    }
    /* Remaining predecessor counts and ready times (rule 1): every retired
     * task releases its successors' counts, as retire() does (work in the
     * kept part only); tasks left with no predecessor outstanding wait in
     * the queues. A given task must have had all its predecessors end by
     * its start. */
    for (int t = 0; t < n; t++) {
        if (e->start[t] < 0 || e->end[t] >= T)
            continue;
        for (int i = tg->succ_off[t]; i < tg->succ_off[t + 1]; i++) {
            tinfo *v = &e->ti[tg->succ[i]];
            e->left[tg->succ[i]]--;
            if (e->end[t] > v->ready)
                v->ready = e->end[t];
        }
    }
    for (int t = 0; t < n; t++) {
        tinfo *ti = &e->ti[t];
        if (e->start[t] >= 0) {
            if (e->left[t] > 0 || ti->ready > e->start[t])
                return ss_diag_set(d, SS_ERR_INVALID,
                                   "engine: resume state: task %d starts at %g before its predecessors end",
                                   t, e->start[t]);
            continue;
        }
        if (e->left[t] > 0)
            continue;
        if (ti->nres == 0 && ti->ready < T)
            return ss_diag_set(d, SS_ERR_INVALID,
                               "engine: resume state: task %d (no resources) was ready at %g but did not start before %g",
                               t, ti->ready, T);
        release(&s, t, ti->ready);
    }
    return finish(&s, T, 0, d);
}

const ss_engine_result *ss_engine_result_of(const ss_engine *e)
{
    return e && e->valid ? &e->res : NULL;
}

ss_status ss_engine_critical_path(ss_engine *e, const int32_t **path, int *n, ss_diag *d)
{
    if (!e->valid)
        return ss_diag_set(d, SS_ERR_INVALID, "engine: no simulation result");
    if (e->res.resumed)
        return ss_diag_set(d, SS_ERR_INVALID,
                           "engine: no critical path after a resumed run (blockers of kept tasks unknown)");
    int nt = e->res.n_tasks;
    int last = -1;
    for (int t = 0; t < nt; t++)
        if (last < 0 || e->end[t] > e->end[last])
            last = t;
    int len = 0;
    for (int t = last; t >= 0; t = e->blocker[t])
        len++;
    if (len > e->cap_path) {
        if (GROW(path, len))
            return ss_diag_set(d, SS_ERR_NOMEM, "engine: out of memory for the critical path");
        e->cap_path = len;
    }
    int i = len;
    for (int t = last; t >= 0; t = e->blocker[t])
        e->path[--i] = t;
    *path = e->path;
    *n = len;
    return SS_OK;
}
