/*
 * engine.c — the event-driven list scheduler (rules and proofs in engine.h).
 *
 * Data: two sorted queues per resource r, queue 2r for key class 0 and
 * 2r + 1 for classes 1 and 2 (qside; class 1 is on devices only, class 2
 * on channels only),
 * all carved out of one slot array: queue q owns as many slots as tasks of
 * its classes use r, and every such task enters it exactly once, so it never
 * overflows and never wraps. Its live entries are slots[qh[q] .. qt[q]),
 * sorted by key; pop = qh[q]++, push = insert from the tail. Within classes
 * 0 and 1 keys arrive in nondecreasing ready time (tasks are released at the
 * time being settled, which only grows), so an insertion moves only the
 * entries released at the same time with a larger (prio, id): O(1) per task
 * in practice; a class-2 task (priority first) moves past the waiting ones
 * of larger priority, the point of the class. The head of
 * r is the head of queue 2r if not empty, else of 2r + 1 (class 0 keys are
 * all smaller). Each queue slot is a key word and its task's position
 * (qtask, below). Completion events wait in a calendar,
 * one bucket per distinct time (see ebucket), drained a round at a time
 * in id order.
 *
 * Positions. The engine is bound by memory latency more than by
 * instructions: what costs is the cache lines a round touches. The tasks a
 * round handles are those that end or become ready at one time, such as
 * the tiles of one op and micro-batch on many devices, and the builder's
 * ids put those far apart (an op's tiles are numbered replica by replica,
 * micro-batches inside; a pipeline interleaves stages and micro-batches).
 * So every per-task array of the run is indexed by a POSITION, a
 * permutation of the ids made in prepare (order_tasks): ids are cut into
 * windows of 2^WBITS consecutive ids, and within a window tasks are sorted
 * by micro-batch (a transfer or collective takes its first successor's),
 * ids increasing within one. The tasks of one op and micro-batch are then
 * adjacent, next to the other ops of that micro-batch in the window; a
 * window keeps the permutation local, so making it and mapping results
 * back to ids stream through a few hundred KiB at a time. Ids stay what
 * every rule and result speaks of: the queue key, the calendar's order
 * (an event is id << 32 | position) and the blockers hold ids, so the
 * schedule does not depend on the positions. Small graphs (ORDER_MIN) and
 * graphs whose windows are already in order (one micro-batch) get the
 * identity, and the per-position result arrays are then the result's own.
 * So do lean runs (ss_engine_set_lean, one-shot simulations of big plans):
 * memory first, they keep neither the id -> position map, nor the
 * successor lists by position (4 bytes per edge of tasks with more than two
 * successors), nor per-position copies of the results (12 bytes per task);
 * the GPT-3 175B / 1,024-GPU plan's rounds then take ~2x as long (~4 CPU
 * s more, of ~30) and 0.6 GB less.
 *
 * Per task (position), one 32-byte read-only record holds what the event
 * loop reads, with the resource and up to two successors inline;
 * predecessor counts stay apart, one byte per task (see left), counted
 * from the successor lists. The run writes only what cannot be derived
 * later: the blocker and the start and end rounds as tasks are released,
 * start and end, by position, each round's time (rtime), and by id the
 * by_res flag of the tasks that waited for a resource; finish maps the
 * former to ids (unpermute) and derives every start (its round's time),
 * end (start + duration) and ready time (the end of the releasing
 * predecessor, the blocker, or for a task that waited, the latest end of
 * its predecessors). Per-task and per-resource arrays are grown on demand
 * and reused by every run (lean: freed after it). Invariant between rounds:
 * holder[r] is the id of the running task on r or -1; a task is in r's
 * queue iff it is released, not started, and uses r.
 */
#include "simulator/engine.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Positions: windows of 2^WBITS ids (see the file comment); graphs of at
 * most ORDER_MIN tasks, whose run state fits in the caches anyway, keep
 * the identity. */
#define WBITS 14
#define ORDER_MIN (1 << 16)
/* Ordering groups within a window: micro-batches 0 .. NGROUPS - 2 (larger
 * ones share the last of these), then tasks of none. */
#define NGROUPS 1026

/* Queue entry: the key (cls, ready, prio, id) as one word and the task's
 * position (qtask, apart), whose record holds the id. A task is released
 * (becomes ready) only at the time being settled, so its ready time is the
 * time of a round, and rounds run in increasing time: the round's index
 * orders as the time does. The word is cls << 62 | ready round << 32 |
 * (prio + 2^31) for classes 0 and 1, and cls << 62 | (prio + 2^31) << 30 |
 * ready round for class 2 (priority first, engine.h rule 2); rounds <
 * 2^30. Equal words are ordered by id. */
typedef uint64_t qent;

#define ROUND_MAX (1 << 30)

static inline qent qkey(int cls, int32_t round, int32_t prio)
{
    uint64_t p = (uint32_t)prio ^ 0x80000000u;
    if (cls == 2)
        return 2ull << 62 | p << 30 | (uint64_t)(uint32_t)round;
    return (uint64_t)cls << 62 | (uint64_t)(uint32_t)round << 32 | p;
}

/* The ready round in a key. */
static inline int32_t qround(qent q)
{
    return (int32_t)((q >> 62 == 2 ? q : q >> 32) & (ROUND_MAX - 1));
}

/* The queue (of its resource's two) a task of class cls waits in: class 0
 * in the first; 1 (forward tasks, devices only) and 2 (channels only)
 * share the second, whose keys are all larger. */
static inline int qside(int cls) { return cls != 0; }

/* Per-task run state: what the event loop reads of one task, in one 32-byte
 * record (two per cache line). A round usually handles tasks with nearby
 * ids (the tiles of one op on many devices end together), so small records
 * and the dense per-task result arrays, written in place as tasks are
 * released, start and end, keep the lines a round touches few. A task on
 * one resource keeps the resource in the record (res), and a task with at
 * most two successors keeps them (succ), saving the look-ups in tg->res and
 * tg->succ. */
typedef struct trec {
    double dur;
    int32_t res;     /* nres == 1: the resource; else offset in tg->res */
    int32_t prio;
    int32_t succ[2]; /* nsc <= 2: the successors' positions; else succ[0]
                      * is their offset in sbase, succ[1] their count */
    int32_t id;      /* the task's id in the graph */
    uint32_t nres : 24; /* up to SS_TASK_MAX_RES */
    uint32_t cls : 2;   /* 1: forward under backward-first; 2: priority
                         * first (tg->prio_first) */
    uint32_t nsc : 2;   /* successors when <= 2, else 3 */
} trec;

_Static_assert(sizeof(trec) == 32, "a task record is half a 64-byte cache line");

/* The successors (positions) of task record r, borrowed from r or from
 * sbase (isucc or tg->succ), and their count. */
static inline const int32_t *rsucc(const int32_t *sbase, const trec *r)
{
    return r->nsc <= 2 ? r->succ : sbase + r->succ[0];
}

static inline int rnsucc(const trec *r)
{
    return r->nsc <= 2 ? r->nsc : r->succ[1];
}

/* The resources of task record r (borrowed from r or from tg). */
static inline const int32_t *rres(const ss_taskgraph *tg, const trec *r)
{
    return r->nres == 1 ? &r->res : tg->res + r->res;
}

/* Completion events, grouped by time (the calendar): per distinct pending
 * time one bucket, its events (evt: the task's id and position) in a chain of
 * 64-byte chunks in push order;
 * a binary min-heap of the buckets by time; a hash from a time's bits to its
 * bucket (linear probing, backward-shift deletion; an event for the time
 * of the previous one, common as tasks end together, skips it). A round
 * drains the bucket of its time into cur[], sorted by id: the order a heap
 * of (time, id) pops them in. Pools are sized for the most events that can be pending
 * at once (every task holding a resource holds it alone: at most one per
 * resource, plus the tasks without resources), so no run allocates. */
typedef uint64_t evt; /* id << 32 | position: orders as the ids do */

#define EV_PER_CHUNK 7

static inline evt ev_of(int32_t id, int32_t pos)
{
    return (uint64_t)(uint32_t)id << 32 | (uint32_t)pos;
}
static inline int32_t ev_pos(evt x) { return (int32_t)(uint32_t)x; }

typedef struct echunk {
    evt ev[EV_PER_CHUNK];
    int32_t n, next;   /* next: the chunk pushed before, -1 for none */
} echunk;

typedef struct ebucket {
    double t;
    int32_t head;      /* latest chunk; the free-list link when unused */
    int32_t n;         /* events in the chain */
} ebucket;

struct ss_engine {
    int valid;
    int cut;          /* the last run stopped early (CUTTING, engine.h) */
    double cut_bound; /* its proof: a lower bound of the makespan */
    ss_engine_result res;
    /* per task, by id: the result's arrays */
    int cap_tasks;
    double *start, *end, *ready;
    int32_t *start_round, *end_round;
    int32_t *blocker;
    uint8_t *by_res;                    /* 0 (prepare) until set */
    int32_t last_task;                  /* critical path's end (finish) */
    /* per task, by position (see the file comment) */
    int32_t *pos_of;                    /* id -> position */
    int ident;                          /* position == id for every task */
    int32_t *pstart_round, *pend_round; /* start and end: the rounds' times */
    int32_t *pblocker;                  /* ids; -1 (prepare) until set */
    int32_t *xstart_round, *xend_round, *xblocker; /* their storage unless ident
                                         * (then they are the result's arrays) */
    double *rtime;                      /* [rounds]: each round's time */
    int cap_rtime;
    int lean;                           /* ss_engine_set_lean */
    uint8_t *left;    /* predecessors not yet ended, LEFT_BIG when 255 or
                       * more (then counted in left_big): apart from the
                       * records and one byte each, as decrements reach
                       * tasks long before they run and a dense array keeps
                       * those lines few */
    int32_t *left_big; /* read and written only where left is LEFT_BIG */
    void *rec_raw;                      /* allocation behind rec */
    trec *rec;                          /* 32-byte aligned */
    int32_t *isucc;                     /* successor positions of tasks with more than two */
    int cap_isucc;
    const int32_t *sbase;               /* where those lists are: isucc, or
                                         * tg->succ itself when ident */
    /* calendar (sized in prepare for cap_pend pending events) */
    int cap_pend;
    ebucket *bk;
    echunk *ch;
    int32_t *theap, *hslot; /* hslot: bucket + 1, 0 empty; [hcap_max] */
    evt *cur;
    int hcap_max;
    /* per resource */
    int cap_res;
    double *busy;
    double *last_end; /* end of last[r] */
    int32_t *holder, *last, *qh, *qt, *touched; /* qh, qt: [2 * resources] */
    uint8_t *is_touched;
    /* queue slots */
    int cap_slots;
    qent *slots;
    int32_t *qtask;  /* per slot: its task's position */
    int pf_tail;     /* qpush prefetches (prepare: more than PF_SLOTS slots) */
    unsigned long qwork; /* slots qpush wrote: the work between stop polls */
    /* per device */
    int cap_dev;
    double *compute, *comm, *exposed, *idle, *last_t;
    int32_t *ncomm;
    uint8_t *computing;
    /* critical path: path[0 .. path_n) once walked for this run (-1: not yet) */
    int cap_path, path_n;
    int32_t *path;
};

/* The id of the task in position p. */
static inline int32_t pid(const ss_engine *e, int32_t p)
{
    return e->ident ? p : e->rec[p].id;
}

/* Whether key x of the task with id `id` sorts before slot i. */
static inline int qless(const ss_engine *e, qent x, int32_t id, int i)
{
    return x < e->slots[i] || (x == e->slots[i] && id < pid(e, e->qtask[i]));
}

/* Entries past the last slot, in slots and qtask, that qpush's prefetch
 * may address. */
#define QSLACK 16

/* Queue slots (12 bytes each) beyond which qpush prefetches. */
#define PF_SLOTS (1 << 17)

/* Insert x, the key of the task in position pos (id `id`), into sorted
 * queue q (see the file comment). Each slot is written once, in order, and
 * the queues' tails lie far apart, so in a graph whose slots outgrow the
 * caches (pf_tail) the line after the tail is fetched now: the next push
 * there usually comes rounds later and would miss. */
static inline void qpush(ss_engine *e, int q, qent x, int32_t pos, int32_t id)
{
    int lo = e->qh[q], i = e->qt[q]++, tail = i;
    while (i > lo && qless(e, x, id, i - 1)) {
        e->slots[i] = e->slots[i - 1];
        e->qtask[i] = e->qtask[i - 1];
        i--;
    }
    e->qwork += (unsigned long)(tail - i) + 1;
    e->slots[i] = x;
    e->qtask[i] = pos;
    if (e->pf_tail) {
        __builtin_prefetch(&e->slots[e->qt[q] + 4], 1);
        __builtin_prefetch(&e->qtask[e->qt[q] + QSLACK - 1], 1);
    }
}

/* The slot of the head of resource r's queues, -1 if both are empty. */
static inline int qtop(const ss_engine *e, int r)
{
    int q = 2 * r;
    if (e->qh[q] < e->qt[q])
        return e->qh[q];
    if (e->qh[q + 1] < e->qt[q + 1])
        return e->qh[q + 1];
    return -1;
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
    ss_free(e->rec_raw);
    ss_free(e->pos_of);
    ss_free(e->rtime);
    ss_free(e->xstart_round);
    ss_free(e->xend_round);
    ss_free(e->xblocker);
    ss_free(e->isucc);
    ss_free(e->left);
    ss_free(e->left_big);
    ss_free(e->blocker);
    ss_free(e->by_res);
    ss_free(e->bk);
    ss_free(e->ch);
    ss_free(e->theap);
    ss_free(e->hslot);
    ss_free(e->cur);
    ss_free(e->busy);
    ss_free(e->last_end);
    ss_free(e->holder);
    ss_free(e->last);
    ss_free(e->qh);
    ss_free(e->qt);
    ss_free(e->touched);
    ss_free(e->is_touched);
    ss_free(e->slots);
    ss_free(e->qtask);
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

/* Free *p and set it NULL. */
#define DROP(field)                                                                         \
    do {                                                                                    \
        ss_free(e->field);                                                                  \
        e->field = NULL;                                                                    \
    } while (0)

/* Lean (ss_engine_set_lean), once the rounds are done: predecessor counts,
 * queues and calendar. The per-task group (results included) and the
 * others regrow from 0 in the next prepare. */
static void release_run(ss_engine *e)
{
    DROP(isucc);
    DROP(left);
    DROP(left_big);
    DROP(bk);
    DROP(ch);
    DROP(theap);
    DROP(hslot);
    DROP(cur);
    DROP(slots);
    DROP(qtask);
    e->cap_tasks = e->cap_isucc = e->cap_slots = e->cap_pend = 0;
    e->hcap_max = 0;
}

/* Lean, once the results are by id: the records and per-position arrays. */
static void release_positions(ss_engine *e)
{
    DROP(rec_raw);
    e->rec = NULL;
    DROP(pos_of);
    DROP(xstart_round);
    DROP(xend_round);
    DROP(xblocker);
}

void ss_engine_set_lean(ss_engine *e, int on)
{
    e->lean = on != 0;
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

#define LEFT_BIG 255

/* Predecessors of the task in position i not yet ended. */
static inline int32_t left_of(const ss_engine *e, int i)
{
    return e->left[i] != LEFT_BIG ? e->left[i] : e->left_big[i];
}

/* Make room for a graph of this size. Arrays that grew stay grown on error;
 * the caps move only when every array of a group has its size. */
static int reserve(ss_engine *e, int tasks, int res, int slots, int devs, int pend)
{
    if (tasks > e->cap_tasks) {
        if (GROW(start, tasks) || GROW(end, tasks) || GROW(ready, tasks) ||
            GROW(blocker, tasks) || GROW(by_res, tasks) ||
            GROW(start_round, tasks) || GROW(end_round, tasks) || GROW(left, tasks) ||
            GROW(left_big, tasks))
            return -1;
        if (!e->lean && (GROW(pos_of, tasks) || GROW(xstart_round, tasks) ||
                         GROW(xend_round, tasks) || GROW(xblocker, tasks)))
            return -1; /* lean: positions are ids (order_tasks) */
        void *raw = ss_malloc(((size_t)tasks + 1) * sizeof(trec));
        if (!raw)
            return -1;
        ss_free(e->rec_raw);
        e->rec_raw = raw;
        e->rec = (trec *)(((uintptr_t)raw + sizeof(trec) - 1) & ~(uintptr_t)(sizeof(trec) - 1));
        e->cap_tasks = tasks;
    }
    if (res > e->cap_res) {
        if (GROW(busy, res) || GROW(last_end, res) || GROW(holder, res) || GROW(last, res) || GROW(qh, 2 * res) ||
            GROW(qt, 2 * res) || GROW(touched, res) || GROW(is_touched, res))
            return -1;
        e->cap_res = res;
    }
    if (slots > e->cap_slots) {
        if (GROW(slots, slots + QSLACK) || GROW(qtask, slots + QSLACK))
            return -1;
        e->cap_slots = slots;
    }
    if (pend > e->cap_pend) {
        int hc = 64;
        while (hc < 2 * pend)
            hc *= 2;
        if (GROW(bk, pend) || GROW(ch, pend + pend / EV_PER_CHUNK + 2) || GROW(theap, pend) ||
            GROW(cur, pend) || GROW(hslot, hc))
            return -1;
        e->cap_pend = pend;
        e->hcap_max = hc;
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
    int (*poll)(void *ctx); /* the config's stop callback */
    void *poll_ctx;
    unsigned npoll;
    unsigned long poll_work; /* poll again once e->qwork reaches it */
    int interrupted;    /* poll asked to stop: abandon the run */
    int nev;        /* pending events (calendar and cur) */
    int ntouched;
    int nzero_queued; /* zero-duration tasks waiting in queues */
    int32_t round;  /* index of the event time being settled */
    int64_t retired;
    /* calendar state */
    int nbk, nheap, hcap, bk_free, ch_free;
    int32_t last_bk; /* the bucket the last event went to, -1 if freed since */
    double now;     /* the time being settled */
    int collecting; /* 1 while events at `now` join cur (retire phase) */
    int cpos, ncur; /* cur[cpos .. ncur): ids at `now` still to retire */
    const double *load; /* CUTTING: per resource, all its tasks' durations */
    double cut_at;      /* stop once a bound exceeds this (HUGE_VAL: never) */
    int stop;           /* a bound exceeded cut_at: stop after this round */
    double bound;       /* that bound */
} run;

static inline uint32_t thash(double t, int hcap)
{
    uint64_t x;
    memcpy(&x, &t, sizeof x);
    x *= 0x9E3779B97F4A7C15ull;
    return (uint32_t)(x >> 32) & (uint32_t)(hcap - 1);
}

/* Bucket heap order: by time (times of distinct buckets differ). */
static void theap_up(ss_engine *e, int i)
{
    int32_t b = e->theap[i];
    double t = e->bk[b].t;
    while (i > 0) {
        int p = (i - 1) >> 1;
        if (!(t < e->bk[e->theap[p]].t))
            break;
        e->theap[i] = e->theap[p];
        i = p;
    }
    e->theap[i] = b;
}

static void theap_pop(run *s)
{
    ss_engine *e = s->e;
    int m = --s->nheap;
    if (m == 0)
        return;
    int32_t b = e->theap[m];
    double t = e->bk[b].t;
    int i = 0;
    for (;;) {
        int c = 2 * i + 1;
        if (c >= m)
            break;
        if (c + 1 < m && e->bk[e->theap[c + 1]].t < e->bk[e->theap[c]].t)
            c++;
        if (!(e->bk[e->theap[c]].t < t))
            break;
        e->theap[i] = e->theap[c];
        i = c;
    }
    e->theap[i] = b;
}

/* Insert bucket b (time t) into the hash. */
static void hash_put(run *s, int32_t b, double t)
{
    ss_engine *e = s->e;
    uint32_t mask = (uint32_t)s->hcap - 1, i = thash(t, s->hcap);
    while (e->hslot[i])
        i = (i + 1) & mask;
    e->hslot[i] = b + 1;
}

/* Remove bucket b (time t) from the hash, shifting back the entries after
 * it that would no longer be found. */
static void hash_del(run *s, int32_t b, double t)
{
    ss_engine *e = s->e;
    uint32_t mask = (uint32_t)s->hcap - 1, i = thash(t, s->hcap);
    while (e->hslot[i] != b + 1)
        i = (i + 1) & mask;
    for (uint32_t j = (i + 1) & mask; e->hslot[j]; j = (j + 1) & mask) {
        uint32_t h = thash(e->bk[e->hslot[j] - 1].t, s->hcap);
        /* move j's entry into the hole at i unless its home h lies in (i, j] */
        if (((j - h) & mask) >= ((j - i) & mask)) {
            e->hslot[i] = e->hslot[j];
            i = j;
        }
    }
    e->hslot[i] = 0;
}

/* Completion event x at time t. */
static void epush(run *s, double t, evt x)
{
    ss_engine *e = s->e;
    s->nev++;
    if (s->collecting && t == s->now) {
        /* joins the round being settled: keep cur[cpos ..] sorted (moved
         * to the front when it reaches the end: it holds pending events
         * only, so it fits) */
        if (s->ncur == e->cap_pend) {
            memmove(e->cur, e->cur + s->cpos, (size_t)(s->ncur - s->cpos) * sizeof *e->cur);
            s->ncur -= s->cpos;
            s->cpos = 0;
        }
        int i = s->ncur++;
        while (i > s->cpos && e->cur[i - 1] > x) {
            e->cur[i] = e->cur[i - 1];
            i--;
        }
        e->cur[i] = x;
        return;
    }
    t += 0.0; /* -0 -> +0: one bucket per time value */
    uint32_t mask = (uint32_t)s->hcap - 1;
    int32_t b = -1;
    if (s->last_bk >= 0 && e->bk[s->last_bk].t == t) /* tasks that end together */
        b = s->last_bk;
    else
        for (uint32_t i = thash(t, s->hcap); e->hslot[i]; i = (i + 1) & mask)
            if (e->bk[e->hslot[i] - 1].t == t) {
                b = e->hslot[i] - 1;
                break;
            }
    if (b < 0) {
        b = s->bk_free;
        s->bk_free = e->bk[b].head;
        e->bk[b].t = t;
        e->bk[b].head = -1;
        e->bk[b].n = 0;
        if (2 * (s->nbk + 1) > s->hcap) { /* grow within hcap_max, rehash */
            s->hcap *= 2;
            memset(e->hslot, 0, (size_t)s->hcap * sizeof *e->hslot);
            for (int k = 0; k < s->nheap; k++)
                hash_put(s, e->theap[k], e->bk[e->theap[k]].t);
        }
        s->nbk++;
        hash_put(s, b, t);
        e->theap[s->nheap++] = b;
        theap_up(e, s->nheap - 1);
    }
    s->last_bk = b;
    ebucket *bk = &e->bk[b];
    echunk *c = bk->head >= 0 ? &e->ch[bk->head] : NULL;
    if (!c || c->n == EV_PER_CHUNK) {
        int32_t k = s->ch_free;
        s->ch_free = e->ch[k].next;
        c = &e->ch[k];
        c->n = 0;
        c->next = bk->head;
        bk->head = k;
    }
    c->ev[c->n++] = x;
    bk->n++;
}

static int cmp_evt(const void *pa, const void *pb)
{
    evt a = *(const evt *)pa, b = *(const evt *)pb;
    return (a > b) - (a < b);
}

/* Start settling time now: move the bucket of now (if any) into cur[],
 * sorted by id. */
static void drain(run *s, double now)
{
    ss_engine *e = s->e;
    s->now = now;
    s->cpos = s->ncur = 0;
    if (s->nheap == 0 || !(e->bk[e->theap[0]].t == now))
        return;
    int32_t b = e->theap[0];
    theap_pop(s);
    hash_del(s, b, e->bk[b].t);
    s->nbk--;
    ebucket *bk = &e->bk[b];
    int n = bk->n, pos = n;
    for (int32_t k = bk->head; k >= 0;) { /* latest chunk last: push order */
        echunk *c = &e->ch[k];
        pos -= c->n;
        memcpy(e->cur + pos, c->ev, (size_t)c->n * sizeof *c->ev);
        int32_t nx = c->next;
        c->next = s->ch_free;
        s->ch_free = k;
        k = nx;
    }
    bk->head = s->bk_free;
    s->bk_free = b;
    if (s->last_bk == b)
        s->last_bk = -1;
    evt *x = e->cur;
    int sorted = 1;
    for (int i = 1; i < n && sorted; i++)
        sorted = x[i - 1] < x[i];
    if (!sorted) {
        if (n <= 32) {
            for (int i = 1; i < n; i++) {
                evt v = x[i];
                int k = i;
                while (k > 0 && x[k - 1] > v) {
                    x[k] = x[k - 1];
                    k--;
                }
                x[k] = v;
            }
        } else {
            qsort(x, (size_t)n, sizeof *x, cmp_evt);
        }
    }
    s->ncur = n;
    /* what retiring them reads: their records, then their (first four)
     * successors' counts and records (a round's tasks are independent: the
     * misses overlap) */
    for (int i = 0; i < n; i++)
        __builtin_prefetch(&e->rec[ev_pos(x[i])]);
    for (int i = 0; i < n; i++) {
        const trec *rh = &e->rec[ev_pos(x[i])];
        const int32_t *sc = rsucc(e->sbase, rh);
        for (int k = 0, ns = rnsucc(rh); k < ns && k < 4; k++) {
            __builtin_prefetch(&e->left[sc[k]], 1);
            __builtin_prefetch(&e->rec[sc[k]], 1);
        }
    }
}

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

/* Start the task in position h at t; `waited`: it became ready (rule 1)
 * before t. */
static void start_task(run *s, int h, double t, int waited)
{
    ss_engine *e = s->e;
    const ss_taskgraph *tg = s->tg;
    const trec *rh = &e->rec[h];
    int32_t id = rh->id;
    const int32_t *rs = rres(tg, rh);
    int nres = rh->nres;
    double dur = rh->dur, end = t + dur;
    s->nzero_queued -= nres > 0 && dur == 0;
    if (waited) {
        /* Waited for a resource: the blocker is the task that freed one of
         * them last (at t, see engine.c's proof in engine.h). */
        int best = -1;
        double best_end = -1;
        for (int i = 0; i < nres; i++) {
            int r = rs[i];
            if (e->last[r] >= 0 && e->last_end[r] > best_end) {
                best_end = e->last_end[r];
                best = e->last[r];
            }
        }
        e->pblocker[h] = best;
        e->by_res[id] = 1; /* few tasks wait: by id, at once; finish derives
                            * every ready time */
    }
    for (int i = 0; i < nres; i++) {
        int r = rs[i];
        /* CUTTING: r still has load - busy of work to do from t on */
        if (s->load && !s->stop && t + (s->load[r] - e->busy[r]) > s->cut_at) {
            s->stop = 1;
            s->bound = t + (s->load[r] - e->busy[r]);
        }
        e->qh[2 * r + qside(rh->cls)]++; /* h is r's head (dispatch checked) */
        e->holder[r] = id;
        e->last[r] = id;
        e->last_end[r] = end;
        e->busy[r] += dur;
        if (r < tg->n_devices) {
            dev_mark(e, r, t);
            e->computing[r] = 1;
        } else {
            chan_change(s, r, t, +1);
        }
    }
    e->pstart_round[h] = s->round;
    epush(s, end, ev_of(id, h));
}

/* The task in position v is ready at t. */
static inline void release(run *s, int v, double t)
{
    ss_engine *e = s->e;
    const ss_taskgraph *tg = s->tg;
    const trec *rv = &e->rec[v];
    int nres = rv->nres;
    if (nres == 0) {
        start_task(s, v, t, 0);
        return;
    }
    const int32_t *rs = rres(tg, rv);
    s->nzero_queued += rv->dur == 0;
    qent q = qkey(rv->cls, s->round, rv->prio);
    for (int i = 0; i < nres; i++) {
        int r = rs[i];
        qpush(e, 2 * r + qside(rv->cls), q, v, rv->id);
        touch(s, r);
    }
}

/* The task in position h ends at t. */
static void retire(run *s, int h, double t)
{
    ss_engine *e = s->e;
    const ss_taskgraph *tg = s->tg;
    const trec *rh = &e->rec[h];
    s->retired++;
    /* every 4,096 retirements, or sooner when the queues did much work (a
     * 1,024-device ring's transfers each queue on hundreds of channels) */
    if (s->poll && ((++s->npoll & 4095) == 0 || e->qwork >= s->poll_work)) {
        s->poll_work = e->qwork + (1ul << 22);
        if (s->poll(s->poll_ctx))
            s->interrupted = 1;
    }
    e->pend_round[h] = s->round;
    const int32_t *rs = rres(tg, rh);
    for (int i = 0; i < rh->nres; i++) {
        int r = rs[i];
        e->holder[r] = -1;
        if (r < tg->n_devices) {
            dev_mark(e, r, t);
            e->computing[r] = 0;
        } else {
            chan_change(s, r, t, -1);
        }
        touch(s, r);
    }
    const int32_t *sc = rsucc(e->sbase, rh);
    for (int i = 0, n = rnsucc(rh); i < n; i++) {
        int v = sc[i];
        if (e->left[v] != LEFT_BIG ? --e->left[v] == 0 : --e->left_big[v] == 0) {
            e->pblocker[v] = rh->id;
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
        int top = e->holder[r] >= 0 ? -1 : qtop(e, r);
        if (top < 0) {
            e->is_touched[r] = 0;
            continue;
        }
        int h = e->qtask[top];
        const trec *rh = &e->rec[h];
        if (zero_only && rh->dur > 0) {
            e->touched[keep++] = r;
            continue;
        }
        e->is_touched[r] = 0;
        int ok = 1;
        const int32_t *rs = rres(tg, rh);
        for (int i = 0; rh->nres > 1 && i < rh->nres && ok; i++) {
            int r2 = rs[i];
            if (r2 == r)
                continue;
            int t2;
            if (e->holder[r2] >= 0 || (t2 = qtop(e, r2)) < 0 || e->qtask[t2] != h)
                ok = 0;
        }
        if (ok)
            start_task(s, h, now, s->round > qround(e->slots[top]));
    }
    s->ntouched = keep;
}

/* An empty calendar (prepare sized its pools). */
static void cal_reset(run *s)
{
    ss_engine *e = s->e;
    int np = e->cap_pend, nc = np + np / EV_PER_CHUNK + 2;
    for (int b = 0; b < np; b++)
        e->bk[b].head = b + 1 < np ? b + 1 : -1;
    for (int k = 0; k < nc; k++)
        e->ch[k].next = k + 1 < nc ? k + 1 : -1;
    s->bk_free = 0;
    s->ch_free = 0;
    s->last_bk = -1;
    s->nbk = s->nheap = 0;
    s->hcap = 64;
    memset(e->hslot, 0, (size_t)s->hcap * sizeof *e->hslot);
}

/* Settle time `now`: retire everything ending now, then run zero-duration
 * tasks to closure (they take no time, so everything they release is ready
 * now too and competes on equal terms), then start positive-duration tasks
 * (rule 4). Starting a positive task never creates an event at `now`. */
static void settle(run *s, double now)
{
    ss_engine *e = s->e;
    drain(s, now);
    s->collecting = 1;
    for (;;) {
        while (s->cpos < s->ncur && !s->interrupted) {
            int h = ev_pos(e->cur[s->cpos++]);
            s->nev--;
            retire(s, h, now);
        }
        if (s->interrupted)
            return;
        if (s->nzero_queued > 0) /* else it would start nothing */
            dispatch(s, now, 1);
        if (s->cpos == s->ncur)
            break;
    }
    s->collecting = 0;
    dispatch(s, now, 0);
}

/* The positions (see the file comment): ids in windows of 2^WBITS, by
 * group within a window, ids increasing within a group. A task without a
 * micro-batch (transfer, collective, update) joins the group of its first
 * successor that has one, else the last group. Sets pos_of (holding each
 * task's group until its window is sorted) and ident. */
static void order_tasks(ss_engine *e, const ss_taskgraph *tg)
{
    int n = tg->n_tasks;
    int32_t *pos_of = e->pos_of;
    int mono = 1;
    if (n <= ORDER_MIN || e->lean) {
        e->ident = 1; /* pos_of unused (lean: not even made) */
        return;
    }
    for (int a = 0; a < n; a += 1 << WBITS) {
        int z = n - a > (1 << WBITS) ? a + (1 << WBITS) : n;
        int off[NGROUPS] = {0};
        int wmono = 1, prev = 0;
        for (int t = a; t < z; t++) {
            int g = tg->mb[t];
            if (g < 0) {
                g = NGROUPS - 1;
                for (int k = tg->succ_off[t]; k < tg->succ_off[t + 1]; k++)
                    if (tg->mb[tg->succ[k]] >= 0) {
                        g = tg->mb[tg->succ[k]];
                        break;
                    }
            }
            if (g > NGROUPS - 2 && g != NGROUPS - 1)
                g = NGROUPS - 2;
            pos_of[t] = g;
            off[g]++;
            wmono &= g >= prev;
            prev = g;
        }
        if (wmono) {
            for (int t = a; t < z; t++)
                pos_of[t] = t;
            continue;
        }
        mono = 0;
        for (int g = 0, pos = a; g < NGROUPS; g++) {
            int c = off[g];
            off[g] = pos;
            pos += c;
        }
        for (int t = a; t < z; t++)
            pos_of[t] = off[pos_of[t]]++;
    }
    e->ident = mono;
}

/* Check the arguments and size and reset every work array for tg (every
 * task unstarted with all its predecessors outstanding). */
static ss_status prepare(ss_engine *e, const ss_taskgraph *tg, const ss_engine_config *cfg,
                         ss_diag *d)
{
    e->valid = 0;
    e->cut = 0;
    e->path_n = -1;
    ss_queue_policy pol = cfg ? cfg->policy : SS_QUEUE_FIFO;
    if (pol != SS_QUEUE_FIFO && pol != SS_QUEUE_BACKWARD_FIRST)
        return ss_diag_set(d, SS_ERR_INVALID, "engine: unknown queue policy %d", (int)pol);
    if (!tg->finalized)
        return ss_diag_set(d, SS_ERR_INVALID, "engine: task graph not finalized");
    int n = tg->n_tasks, nr = tg->n_resources, nd = tg->n_devices;
    int nslots = tg->res_off[n], nzero = tg->n_free;
    /* most events pending at once: one per resource, plus resource-less tasks */
    int pend = (nr + nzero < n ? nr + nzero : n) + 1;
    if (reserve(e, n, nr, nslots, nd, pend) ||
        (!e->lean && ss_grow((void **)&e->isucc, &e->cap_isucc, tg->succ_off[n], sizeof *e->isucc)))
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
    e->pf_tail = nslots > PF_SLOTS;
    order_tasks(e, tg);
    if (e->ident) {
        e->pstart_round = e->start_round;
        e->pend_round = e->end_round;
        e->pblocker = e->blocker;
    } else {
        e->pstart_round = e->xstart_round;
        e->pend_round = e->xend_round;
        e->pblocker = e->xblocker;
    }
    /* Records, by position; queue partition: queue 2r + cls gets as many slots
     * as tasks of class cls use r (counted in qh, then turned into
     * offsets). */
    memset(e->qh, 0, 2 * (size_t)nr * sizeof *e->qh);
    const int32_t *pos_of = e->pos_of;
    int nis = 0, ident = e->ident;
    e->sbase = ident ? tg->succ : e->isucc;
    for (int t = 0; t < n; t++) {
        int i = ident ? t : pos_of[t];
        trec *rt = &e->rec[i];
        int lo = tg->res_off[t], nres = tg->res_off[t + 1] - lo;
        rt->dur = tg->dur[t];
        rt->res = nres == 1 ? tg->res[lo] : lo;
        rt->prio = tg->prio[t];
        rt->id = t;
        int so = tg->succ_off[t], ns = tg->succ_off[t + 1] - so;
        rt->nres = (uint32_t)nres;
        rt->cls = pol == SS_QUEUE_BACKWARD_FIRST && tg->kind[t] == SS_TASK_FWD;
        if (tg->prio[t] >= tg->prio_first && nres > 0) { /* on channels only: class 2 */
            int chan = 1;
            for (int k = lo; k < lo + nres && chan; k++)
                chan = tg->res[k] >= nd;
            if (chan)
                rt->cls = 2;
        }
        if (ns > 2) {
            rt->nsc = 3;
            rt->succ[1] = ns;
            if (ident) {
                rt->succ[0] = so;
            } else {
                rt->succ[0] = nis;
                for (int k = so; k < so + ns; k++)
                    e->isucc[nis++] = pos_of[tg->succ[k]];
            }
        } else {
            rt->nsc = (uint32_t)ns;
            rt->succ[0] = ns > 0 ? (ident ? tg->succ[so] : pos_of[tg->succ[so]]) : -1;
            rt->succ[1] = ns > 1 ? (ident ? tg->succ[so + 1] : pos_of[tg->succ[so + 1]]) : -1;
        }
        for (int k = lo; k < lo + nres; k++)
            e->qh[2 * tg->res[k] + qside(rt->cls)]++;
    }
    for (int q = 0, pos = 0; q < 2 * nr; q++) {
        int c = e->qh[q];
        e->qh[q] = e->qt[q] = pos;
        pos += c;
    }
    /* Predecessor counts, from the successor lists (a graph without
     * predecessor lists has no predecessor offsets either). */
    if (n > 0)
        memset(e->left, 0, (size_t)n);
    for (int k = 0, m = tg->succ_off[n]; k < m; k++) {
        int i = ident ? tg->succ[k] : pos_of[tg->succ[k]];
        if (e->left[i] < LEFT_BIG - 1)
            e->left[i]++;
        else if (e->left[i] == LEFT_BIG - 1) {
            e->left[i] = LEFT_BIG;
            e->left_big[i] = LEFT_BIG;
        } else
            e->left_big[i]++;
    }
    if (e->lean) { /* nothing reads a position by id again (finish maps by record) */
        DROP(pos_of);
        e->cap_tasks = 0; /* the next prepare regrows the per-task group */
    }
    /* blocker -1, by_res 0 until set (tasks ready at the start have
     * neither) */
    if (n > 0) {
        memset(e->pblocker, 0xff, (size_t)n * sizeof *e->pblocker);
        memset(e->by_res, 0, (size_t)n);
    }
    return SS_OK;
}

/* The result's per-id arrays from the run's per-position ones (already
 * the same arrays when ident): blocker and the rounds; every start (the
 * time of its round: tasks start only at the time being settled) and end
 * (start + duration, what start_task computed). Returns the first task
 * (lowest id) to end last, -1 for none. */
static int unpermute(ss_engine *e, const ss_taskgraph *tg)
{
    int n = tg->n_tasks, last = -1, ident = e->ident;
    double best = 0;
    for (int i = 0; i < n && !ident; i++) {
        int t = e->rec[i].id;
        e->blocker[t] = e->pblocker[i];
        e->start_round[t] = e->pstart_round[i];
        e->end_round[t] = e->pend_round[i];
    }
    for (int t = 0; t < n; t++) {
        e->start[t] = e->rtime[e->start_round[t]];
        double end = e->start[t] + tg->dur[t];
        e->end[t] = end;
        if (t == 0 || end > best) {
            best = end;
            last = t;
        }
    }
    return last;
}

/* Run rounds from time 0 until no event is left, then check that every
 * task ran and fill the result. */
static ss_status finish(run *s, ss_diag *d)
{
    ss_engine *e = s->e;
    const ss_taskgraph *tg = s->tg;
    int n = tg->n_tasks, nd = tg->n_devices;
    int64_t rounds = 1;
    s->round = 0;
    if (ss_grow((void **)&e->rtime, &e->cap_rtime, 1, sizeof *e->rtime))
        return ss_diag_set(d, SS_ERR_NOMEM, "engine: out of memory for the event times");
    e->rtime[0] = 0.0;
    settle(s, 0.0);
    while (s->nev > 0 && !s->stop && !s->interrupted) {
        double t = e->bk[e->theap[0]].t;
        if (rounds >= ROUND_MAX ||
            ss_grow((void **)&e->rtime, &e->cap_rtime, (int)rounds + 1, sizeof *e->rtime))
            return ss_diag_set(d, SS_ERR_NOMEM, "engine: out of memory for the event times");
        e->rtime[rounds] = t;
        s->round = (int32_t)rounds++;
        settle(s, t);
    }
    if (s->interrupted)
        return ss_diag_set(d, SS_ERR_INTERRUPTED, "simulation interrupted");
    if (s->stop) {
        e->cut = 1;
        e->cut_bound = s->bound;
        return SS_OK; /* prepare left valid = 0: no result */
    }
    if (s->retired != n) {
        /* tasks that never started are those never released (engine.h:
         * nothing waits in a queue when events run out) */
        int bad = -1;
        for (int i = 0; i < n; i++)
            if (left_of(e, i) > 0 && (bad < 0 || e->rec[i].id < bad))
                bad = e->rec[i].id;
        return ss_diag_set(d, SS_ERR_INVALID,
                           "engine: dependency cycle: %lld of %d tasks never ran (first: task %d, %s op %d tile %d)",
                           (long long)(n - s->retired), n, bad,
                           ss_task_kind_name((ss_task_kind)tg->kind[bad]), tg->op[bad],
                           tg->tile[bad]);
    }

    /* Lean: what only the rounds needed goes before the results by id
     * take their room. */
    if (e->lean)
        release_run(e);
    /* Results by id, end times (start + duration: what start_task
     * computed), the makespan and the first task to end last (the critical
     * path's end); the records go first when unpermute does not read them. */
    if (e->lean && e->ident)
        release_positions(e);
    int last = unpermute(e, tg);
    if (e->lean)
        release_positions(e);
    double makespan = last >= 0 && e->end[last] > 0 ? e->end[last] : 0;
    e->last_task = last;
    /* Ready times (rule 1): of a task that did not wait for a resource,
     * the end of the predecessor that released it, its blocker (-0 as
     * +0); none: 0. Of one that waited, the latest end among its
     * predecessors (the time it was released), from the successor lists:
     * the run keeps no per-task ready time. */
    for (int t = 0; t < n; t++) {
        int b = e->blocker[t];
        e->ready[t] = !e->by_res[t] && b >= 0 ? e->end[b] + 0.0 : 0;
    }
    for (int t = 0; t < n; t++)
        for (int k = tg->succ_off[t]; k < tg->succ_off[t + 1]; k++) {
            int v = tg->succ[k];
            if (e->by_res[v] && e->end[t] > e->ready[v])
                e->ready[v] = e->end[t];
        }
    ss_engine_result *r = &e->res;
    memset(r, 0, sizeof *r);
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
    e->valid = 1;
    return SS_OK;
}

ss_status ss_engine_run(ss_engine *e, const ss_taskgraph *tg, const ss_engine_config *cfg,
                        ss_diag *d)
{
    ss_status st = prepare(e, tg, cfg, d);
    if (st != SS_OK)
        return st;
    run s;
    memset(&s, 0, sizeof s);
    s.e = e;
    s.tg = tg;
    if (cfg && cfg->load) {
        s.load = cfg->load;
        s.cut_at = cfg->cutoff + 1e-9 * fabs(cfg->cutoff);
    }
    if (cfg) {
        s.poll = cfg->stop;
        s.poll_ctx = cfg->stop_ctx;
    }
    cal_reset(&s);
    for (int i = 0; i < tg->n_tasks; i++)
        if (e->left[i] == 0)
            release(&s, i, 0.0);
    return finish(&s, d);
}

int ss_engine_cut(const ss_engine *e, double *bound)
{
    if (!e || !e->cut)
        return 0;
    if (bound)
        *bound = e->cut_bound;
    return 1;
}

const ss_engine_result *ss_engine_result_of(const ss_engine *e)
{
    return e && e->valid ? &e->res : NULL;
}

ss_status ss_engine_critical_path(ss_engine *e, const int32_t **path, int *n, ss_diag *d)
{
    if (!e->valid)
        return ss_diag_set(d, SS_ERR_INVALID, "engine: no simulation result");
    if (e->path_n >= 0) { /* walked already for this run (the summary, then path moves) */
        *path = e->path;
        *n = e->path_n;
        return SS_OK;
    }
    int last = e->last_task;
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
    e->path_n = len;
    *path = e->path;
    *n = len;
    return SS_OK;
}
