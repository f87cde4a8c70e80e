/*
 * comm_mpi.c — ss_rt_comm over MPI (comm_mpi.h): in-place all-reduce (sum /
 * max) of floats over a group of ranks (MPI_COMM_WORLD for all of them,
 * else a communicator made once per distinct rank list with
 * MPI_Comm_create_group, collective over that group only), reduce-scatter
 * (MPI_Reduce_scatter), all-gather (MPI_Allgatherv) and all-to-all
 * (MPI_Alltoallv) of floats over such groups, all-reduce of doubles over
 * every rank, blocking point-to-point sends and receives, a barrier, and a
 * byte broadcast from a group's first rank (the CUDA backend's NCCL ids).
 * Built only into simsearch-run.
 */
#include "runtime/mpi/comm_mpi.h"

#include <limits.h>
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

#define MAX_GROUPS 256

typedef struct group {
    int n, *ranks;
    MPI_Comm comm;
} group;

static group groups[MAX_GROUPS];
static int n_groups;

static ss_status fail(int rc, const char *what, ss_diag *d)
{
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, msg, &len);
    ss_diag_set(d, SS_ERR_IO, "runtime: %s failed: %s", what, msg);
    return SS_ERR_IO;
}

static ss_status reduce(MPI_Comm comm, void *buf, int64_t n, MPI_Datatype t, int op, ss_diag *d)
{
    char *b = buf;
    int es = t == MPI_FLOAT ? 4 : 8;
    while (n > 0) { /* MPI counts are int */
        int c = n > (1 << 30) ? (1 << 30) : (int)n;
        int rc = MPI_Allreduce(MPI_IN_PLACE, b, c, t, op ? MPI_MAX : MPI_SUM, comm);
        if (rc != MPI_SUCCESS)
            return fail(rc, "MPI_Allreduce", d);
        b += (size_t)c * (size_t)es;
        n -= c;
    }
    return SS_OK;
}

/* The communicator of ranks[0..n) (in that order), made on first use by
 * every member (each reaches it in the same task order). */
static ss_status group_comm(const int *ranks, int n, MPI_Comm *out, ss_diag *d)
{
    int size;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int world = n == size;
    for (int i = 0; i < n && world; i++)
        world = ranks[i] == i;
    if (world) {
        *out = MPI_COMM_WORLD;
        return SS_OK;
    }
    for (int k = 0; k < n_groups; k++)
        if (groups[k].n == n && !memcmp(groups[k].ranks, ranks, (size_t)n * sizeof(int))) {
            *out = groups[k].comm;
            return SS_OK;
        }
    if (n_groups == MAX_GROUPS)
        return ss_diag_set(d, SS_ERR_UNSUPPORTED, "runtime: more than %d rank groups", MAX_GROUPS),
               SS_ERR_UNSUPPORTED;
    group *g = &groups[n_groups];
    if (!(g->ranks = malloc((size_t)n * sizeof(int))))
        return ss_diag_set(d, SS_ERR_NOMEM, "runtime: out of memory"), SS_ERR_NOMEM;
    memcpy(g->ranks, ranks, (size_t)n * sizeof(int));
    MPI_Group wg, sub;
    MPI_Comm_group(MPI_COMM_WORLD, &wg);
    int rc = MPI_Group_incl(wg, n, ranks, &sub);
    if (rc == MPI_SUCCESS)
        rc = MPI_Comm_create_group(MPI_COMM_WORLD, sub, 0, &g->comm);
    MPI_Group_free(&sub);
    MPI_Group_free(&wg);
    if (rc != MPI_SUCCESS) {
        free(g->ranks);
        return fail(rc, "MPI_Comm_create_group", d);
    }
    MPI_Comm_set_errhandler(g->comm, MPI_ERRORS_RETURN);
    g->n = n;
    n_groups++;
    *out = g->comm;
    return SS_OK;
}

static ss_status ar_f32(void *ctx, const int *ranks, int n, float *buf, int64_t cnt, int op,
                        ss_diag *d)
{
    (void)ctx;
    MPI_Comm c = MPI_COMM_WORLD;
    ss_status st = group_comm(ranks, n, &c, d);
    return st != SS_OK ? st : reduce(c, buf, cnt, MPI_FLOAT, op, d);
}

static ss_status ar_f64(void *ctx, double *buf, int64_t n, int op, ss_diag *d)
{
    (void)ctx;
    return reduce(MPI_COMM_WORLD, buf, n, MPI_DOUBLE, op, d);
}

/* A blocking send of send[0..n) (receive 0) or receive into recv[0..n)
 * (receive 1) with peer, in pieces of at most 2^30 elements. */
static ss_status p2p(int peer, const float *send, float *recv, int64_t n, int receive,
                     ss_diag *d)
{
    int64_t at = 0;
    do { /* MPI counts are int; an empty region is one empty message */
        int c = n - at > (1 << 30) ? (1 << 30) : (int)(n - at);
        int rc = receive ? MPI_Recv(recv + at, c, MPI_FLOAT, peer, 0, MPI_COMM_WORLD,
                                    MPI_STATUS_IGNORE)
                         : MPI_Send(send + at, c, MPI_FLOAT, peer, 0, MPI_COMM_WORLD);
        if (rc != MPI_SUCCESS)
            return fail(rc, receive ? "MPI_Recv" : "MPI_Send", d);
        at += c;
    } while (at < n);
    return SS_OK;
}

static ss_status send_f32(void *ctx, int peer, const float *buf, int64_t n, ss_diag *d)
{
    (void)ctx;
    return p2p(peer, buf, NULL, n, 0, d);
}

static ss_status recv_f32(void *ctx, int peer, float *buf, int64_t n, ss_diag *d)
{
    (void)ctx;
    return p2p(peer, NULL, buf, n, 1, d);
}

static ss_status bcast(void *ctx, const int *ranks, int n, void *buf, size_t bytes, ss_diag *d)
{
    (void)ctx;
    MPI_Comm c = MPI_COMM_WORLD;
    if (n < 2)
        return SS_OK;
    if (bytes > (1u << 30))
        return ss_diag_set(d, SS_ERR_INVALID, "runtime: broadcast of %zu bytes", bytes);
    ss_status st = group_comm(ranks, n, &c, d);
    if (st != SS_OK)
        return st;
    int rc = MPI_Bcast(buf, (int)bytes, MPI_BYTE, 0, c); /* root: ranks[0], group rank 0 */
    return rc == MPI_SUCCESS ? SS_OK : fail(rc, "MPI_Bcast", d);
}

/* counts[0..n) as MPI's int counts and displacements; SS_ERR_UNSUPPORTED
 * past INT_MAX elements in all. */
static ss_status int_counts(const int64_t *counts, int n, int *ci, int *di, ss_diag *d)
{
    int64_t at = 0;
    for (int k = 0; k < n; k++) {
        if (counts[k] < 0 || at + counts[k] > INT_MAX)
            return ss_diag_set(d, SS_ERR_UNSUPPORTED,
                               "runtime: a collective of more than %d elements", INT_MAX);
        ci[k] = (int)counts[k];
        di[k] = (int)at;
        at += counts[k];
    }
    return SS_OK;
}

/* The group's communicator, this rank's place in it, and int scratch of
 * 4 n entries. */
static ss_status group_of(const int *ranks, int n, MPI_Comm *c, int *me, int **ibuf, ss_diag *d)
{
    ss_status st = group_comm(ranks, n, c, d);
    if (st != SS_OK)
        return st;
    MPI_Comm_rank(*c, me);
    if (!(*ibuf = malloc((size_t)(4 * n) * sizeof(int))))
        return ss_diag_set(d, SS_ERR_NOMEM, "runtime: out of memory"), SS_ERR_NOMEM;
    return SS_OK;
}

/* Reduce-scatter (gather 0: MPI_Reduce_scatter, this rank keeps counts[me]
 * summed elements) or all-gather (gather 1: MPI_Allgatherv of this rank's
 * counts[me] elements) of floats over the group, counts[k] per member. */
static ss_status scatter_gather(const int *ranks, int n, const float *send, float *recv,
                                const int64_t *counts, int gather, ss_diag *d)
{
    MPI_Comm c;
    int me, *ib = NULL;
    ss_status st = group_of(ranks, n, &c, &me, &ib, d);
    if (st == SS_OK && (st = int_counts(counts, n, ib, ib + n, d)) == SS_OK) {
        int rc = gather ? MPI_Allgatherv(send, ib[me], MPI_FLOAT, recv, ib, ib + n, MPI_FLOAT, c)
                        : MPI_Reduce_scatter(send, recv, ib, MPI_FLOAT, MPI_SUM, c);
        if (rc != MPI_SUCCESS)
            st = fail(rc, gather ? "MPI_Allgatherv" : "MPI_Reduce_scatter", d);
    }
    free(ib);
    return st;
}

static ss_status rs_f32(void *ctx, const int *ranks, int n, const float *send, float *recv,
                        const int64_t *counts, ss_diag *d)
{
    (void)ctx;
    return scatter_gather(ranks, n, send, recv, counts, 0, d);
}

static ss_status ag_f32(void *ctx, const int *ranks, int n, const float *send, float *recv,
                        const int64_t *counts, ss_diag *d)
{
    (void)ctx;
    return scatter_gather(ranks, n, send, recv, counts, 1, d);
}

static ss_status a2a_f32(void *ctx, const int *ranks, int n, const float *send,
                         const int64_t *scounts, float *recv, const int64_t *rcounts, ss_diag *d)
{
    (void)ctx;
    MPI_Comm c;
    int me, *ib = NULL;
    ss_status st = group_of(ranks, n, &c, &me, &ib, d);
    if (st == SS_OK && (st = int_counts(scounts, n, ib, ib + n, d)) == SS_OK &&
        (st = int_counts(rcounts, n, ib + 2 * n, ib + 3 * n, d)) == SS_OK) {
        int rc = MPI_Alltoallv(send, ib, ib + n, MPI_FLOAT, recv, ib + 2 * n, ib + 3 * n,
                               MPI_FLOAT, c);
        if (rc != MPI_SUCCESS)
            st = fail(rc, "MPI_Alltoallv", d);
    }
    free(ib);
    return st;
}

static ss_status barrier(void *ctx, ss_diag *d)
{
    (void)ctx;
    int rc = MPI_Barrier(MPI_COMM_WORLD);
    return rc == MPI_SUCCESS ? SS_OK : fail(rc, "MPI_Barrier", d);
}

ss_status ss_rt_comm_mpi_init(ss_rt_comm *c, ss_diag *d)
{
    int rc = MPI_Init(NULL, NULL);
    if (rc != MPI_SUCCESS)
        return fail(rc, "MPI_Init", d);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &c->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &c->size);
    c->ctx = NULL;
    c->allreduce_f32 = ar_f32;
    c->allreduce_f64 = ar_f64;
    c->send_f32 = send_f32;
    c->recv_f32 = recv_f32;
    c->barrier = barrier;
    c->bcast = bcast;
    c->reduce_scatter_f32 = rs_f32;
    c->allgather_f32 = ag_f32;
    c->alltoall_f32 = a2a_f32;
    return SS_OK;
}

void ss_rt_comm_mpi_finalize(void)
{
    for (int k = 0; k < n_groups; k++) {
        MPI_Comm_free(&groups[k].comm);
        free(groups[k].ranks);
    }
    n_groups = 0;
    MPI_Finalize();
}

void ss_rt_comm_mpi_abort(int code)
{
    MPI_Abort(MPI_COMM_WORLD, code);
}
