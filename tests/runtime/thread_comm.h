/*
 * thread_comm.h — the runtime tests' in-process communicator (included by
 * tests/runtime/test_exec.c, test_exec_cuda.c and test_exec_zero3.c, with
 * tc_job / tc_run_job, one thread rank's training run): two "ranks" as threads
 * with an ss_rt_comm (runtime/exec.h) in memory — all-reduce (sum, max) of
 * floats and doubles, send / receive, barrier, broadcast, reduce-scatter,
 * all-gather and all-to-all — that checks what the ranks hand it (both
 * members name the same group, a send's length is the receive's, the
 * counts of a collective agree on both sides) and counts each kind of call.
 * Two faults for the tests that must fail: `drop` makes every exchange do
 * nothing (the ranks then run one after the other: no barrier), `shuffle`
 * makes reduce-scatters, all-gathers and all-to-alls hand each member the
 * other member's block (a collective that runs the wrong way).
 * Invariant: the two ranks call the same sequence, so every call meets its
 * peer's at the barrier (the executor's task lists are subsequences of one
 * global order).
 */
#ifndef SS_TEST_THREAD_COMM_H
#define SS_TEST_THREAD_COMM_H

#include "runtime/exec.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

enum { TC_ALLREDUCE, TC_REDUCE_SCATTER, TC_ALLGATHER, TC_ALLTOALL, TC_SEND, TC_KINDS };

typedef struct tc_shared {
    pthread_barrier_t bar;
    void *slot[2];
    const int64_t *cnt[2]; /* the counts each member handed the collective in flight */
    int64_t n;             /* elements of the send in flight */
    int drop;              /* 1: exchanges do nothing (a broken exchange) */
    int shuffle;           /* 1: block collectives hand out the other member's block */
} tc_shared;

typedef struct tcomm {
    tc_shared *sh;
    int rank;
    int64_t calls[TC_KINDS]; /* this rank's calls of each kind (f32 only) */
} tcomm;

static void tc_wait(tcomm *c)
{
    pthread_barrier_wait(&c->sh->bar);
}

static ss_status tc_reduce(tcomm *c, void *buf, int64_t n, int is64, int op)
{
    if (c->sh->drop)
        return SS_OK;
    size_t es = is64 ? 8 : 4;
    void *tmp = malloc((size_t)(n > 0 ? n : 1) * es);
    assert_non_null(tmp);
    c->sh->slot[c->rank] = buf;
    tc_wait(c);
    for (int64_t i = 0; i < n; i++) {
        double v[2];
        for (int r = 0; r < 2; r++)
            v[r] = is64 ? ((double *)c->sh->slot[r])[i] : ((float *)c->sh->slot[r])[i];
        double x = op ? fmax(v[0], v[1]) : v[0] + v[1];
        if (is64)
            ((double *)tmp)[i] = x;
        else
            ((float *)tmp)[i] = (float)x;
    }
    tc_wait(c);
    memcpy(buf, tmp, (size_t)n * es);
    free(tmp);
    return SS_OK;
}

/* The group of a collective: both ranks (the executor calls no group of one). */
static void tc_group(const int *ranks, int n)
{
    assert_int_equal(n, 2);
    assert_true(ranks[0] != ranks[1] && ranks[0] >= 0 && ranks[0] < 2 && ranks[1] >= 0 &&
                ranks[1] < 2);
}

/* This rank's place in the group. */
static int tc_me(const tcomm *c, const int *ranks)
{
    return ranks[0] == c->rank ? 0 : 1;
}

static ss_status tc_f32(void *c, const int *ranks, int nr, float *b, int64_t n, int op,
                        ss_diag *d)
{
    (void)d;
    tc_group(ranks, nr);
    ((tcomm *)c)->calls[TC_ALLREDUCE]++;
    return tc_reduce(c, b, n, 0, op);
}

static ss_status tc_f64(void *c, double *b, int64_t n, int op, ss_diag *d)
{
    (void)d;
    return tc_reduce(c, b, n, 1, op);
}

/* A send and its receive meet at the barrier. */
static ss_status tc_send(void *c, int peer, const float *b, int64_t n, ss_diag *d)
{
    (void)d;
    tcomm *t = c;
    assert_int_equal(peer, 1 - t->rank);
    t->calls[TC_SEND]++;
    if (t->sh->drop)
        return SS_OK;
    t->sh->slot[t->rank] = (void *)b;
    t->sh->n = n;
    tc_wait(t);
    tc_wait(t);
    return SS_OK;
}

static ss_status tc_recv(void *c, int peer, float *b, int64_t n, ss_diag *d)
{
    (void)d;
    tcomm *t = c;
    if (t->sh->drop)
        return SS_OK;
    tc_wait(t);
    assert_int_equal(t->sh->n, n);
    memcpy(b, t->sh->slot[peer], (size_t)n * sizeof(float));
    tc_wait(t);
    return SS_OK;
}

static ss_status tc_barrier(void *c, ss_diag *d)
{
    (void)d;
    tcomm *t = c;
    if (!t->sh->drop)
        tc_wait(t);
    return SS_OK;
}

static ss_status tc_bcast(void *c, const int *ranks, int n, void *b, size_t bytes, ss_diag *d)
{
    (void)d;
    tcomm *t = c;
    tc_group(ranks, n);
    if (t->sh->drop)
        return SS_OK;
    if (t->rank == ranks[0])
        t->sh->slot[0] = b;
    tc_wait(t);
    if (t->rank != ranks[0])
        memcpy(b, t->sh->slot[0], bytes);
    tc_wait(t);
    return SS_OK;
}

/* Publish this member's buffer and counts; the peer's counts must equal
 * ours. */
static void tc_meet(tcomm *t, int me, const void *buf, const int64_t *cnt)
{
    t->sh->slot[me] = (void *)buf;
    t->sh->cnt[me] = cnt;
    tc_wait(t);
    const int64_t *o = t->sh->cnt[1 - me];
    for (int k = 0; k < 2; k++)
        assert_int_equal(o[k], cnt[k]);
}

static ss_status tc_rs(void *c, const int *ranks, int n, const float *send, float *recv,
                       const int64_t *counts, ss_diag *d)
{
    (void)d;
    tcomm *t = c;
    tc_group(ranks, n);
    t->calls[TC_REDUCE_SCATTER]++;
    int me = tc_me(t, ranks), blk = t->sh->shuffle ? 1 - me : me;
    int64_t off = blk ? counts[0] : 0, m = counts[me];
    if (t->sh->drop) {
        memcpy(recv, send + (me ? counts[0] : 0), (size_t)m * sizeof(float));
        return SS_OK;
    }
    tc_meet(t, me, send, counts);
    const float *a = t->sh->slot[0], *b = t->sh->slot[1];
    for (int64_t i = 0; i < m && i < counts[blk]; i++)
        recv[i] = a[off + i] + b[off + i];
    tc_wait(t);
    return SS_OK;
}

static ss_status tc_ag(void *c, const int *ranks, int n, const float *send, float *recv,
                       const int64_t *counts, ss_diag *d)
{
    (void)d;
    tcomm *t = c;
    tc_group(ranks, n);
    t->calls[TC_ALLGATHER]++;
    int me = tc_me(t, ranks);
    if (t->sh->drop) {
        memcpy(recv + (me ? counts[0] : 0), send, (size_t)counts[me] * sizeof(float));
        return SS_OK;
    }
    tc_meet(t, me, send, counts);
    for (int k = 0; k < 2; k++) {
        int from = t->sh->shuffle ? 1 - k : k;
        int64_t m = counts[k] < counts[from] ? counts[k] : counts[from];
        memcpy(recv + (k ? counts[0] : 0), t->sh->slot[from], (size_t)m * sizeof(float));
    }
    tc_wait(t);
    return SS_OK;
}

static ss_status tc_a2a(void *c, const int *ranks, int n, const float *send,
                        const int64_t *scounts, float *recv, const int64_t *rcounts, ss_diag *d)
{
    (void)d;
    tcomm *t = c;
    tc_group(ranks, n);
    t->calls[TC_ALLTOALL]++;
    int me = tc_me(t, ranks);
    if (t->sh->drop)
        return SS_OK;
    t->sh->slot[me] = (void *)send;
    t->sh->cnt[me] = scounts;
    tc_wait(t);
    /* what the peer sends us is what we expect from it */
    assert_int_equal(t->sh->cnt[1 - me][me], rcounts[1 - me]);
    for (int k = 0; k < 2; k++) {
        const float *src = t->sh->slot[k];
        const int64_t *sc = t->sh->cnt[k];
        /* member k's block for us (shuffle: the block it keeps, or sends
         * elsewhere) */
        int blk = t->sh->shuffle ? 1 - me : me;
        int64_t off = blk ? sc[0] : 0, m = rcounts[k] < sc[blk] ? rcounts[k] : sc[blk];
        memcpy(recv + (k ? rcounts[0] : 0), src + off, (size_t)m * sizeof(float));
    }
    tc_wait(t);
    return SS_OK;
}

/* Rank `rank` of two on shared state sh. */
static void tc_init(tcomm *t, tc_shared *sh, int rank, ss_rt_comm *c)
{
    memset(t, 0, sizeof *t);
    t->sh = sh;
    t->rank = rank;
    *c = (ss_rt_comm){rank,   2,        t,          tc_f32, tc_f64, tc_send, tc_recv,
                      tc_barrier, tc_bcast, tc_rs, tc_ag,  tc_a2a};
}

/* One thread rank's run of ss_rt_train (tc_run_job is its thread body):
 * the caller fills m, cm, g, p, cfg and comm (tc_init), then reads st,
 * res, status and d after the join. */
typedef struct tc_job {
    const ss_machine *m;
    ss_costmodel *cm;
    const ss_graph *g;
    const ss_plan *p;
    ss_rt_config cfg;
    tcomm tc;
    ss_rt_comm comm;
    ss_rt_state *st;
    ss_rt_result res;
    ss_status status;
    ss_diag d;
} tc_job;

static inline void *tc_run_job(void *arg)
{
    tc_job *j = arg;
    ss_diag_init(&j->d);
    j->status = ss_rt_train(j->g, j->m, j->cm, j->p, &j->cfg, &j->comm, &j->st, &j->res, &j->d);
    return NULL;
}

#endif
