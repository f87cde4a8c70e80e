/*
 * mpi_probe.c — the `simsearch-probe` helper that `simsearch probe` and
 * `simsearch topo --discover --probe` start under mpirun: measures between
 * MPI ranks the point-to-point latency and bandwidth (ping-pong between
 * ranks 0 and 1) and the all-reduce bus bandwidth (all ranks) for message
 * sizes from 8 B to --max-bytes (powers of 4), and prints one
 * "simsearch-probe" JSON document on rank 0's stdout (profiler/probe.c
 * reads it strictly).
 *
 * Times: median of --reps repetitions after one warm-up, each framed by a
 * barrier. Ping-pong: one-way time = round trip / 2, bandwidth = bytes /
 * one-way time. All-reduce (MPI_SUM of floats): bus bandwidth =
 * 2 (n - 1) / n x bytes / time, NCCL's convention.
 *
 * Messages are sent as a training iteration sends them: each repetition's
 * sender has just written its data, and each repetition sends from and
 * into buffers of its own, evicted from the caches beforehand, so no end
 * finds the previous repetition's message in its caches. One hot buffer sent back and forth measures the
 * caches, not the link: on a 2-core VM 128 KiB took 22 us one way hot and
 * 56 us fresh, which is what `simsearch run` sees (docs/runtime.md).
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* A message size's buffers: n to send from, n to receive into, used in
 * turn (n: as many as the repetitions use, or as fit 64 MiB, at least 2),
 * then evicted from the caches by writing 64 MiB (evict), so that no
 * repetition finds its buffers cached. */
typedef struct pool {
    char **send, **recv;
    int n;
} pool;

static void pool_free(pool *p)
{
    for (int i = 0; i < p->n; i++) {
        free(p->send ? p->send[i] : NULL);
        free(p->recv ? p->recv[i] : NULL);
    }
    free(p->send);
    free(p->recv);
}

#define EVICT_BYTES (64L << 20)

static int pool_make(pool *p, long b, int reps, char *evict)
{
    long n = EVICT_BYTES / b; /* large messages: slots over 64 MiB, reused in turn */
    n = n < 2 ? 2 : n;
    p->n = n < reps + 1 ? (int)n : reps + 1;
    p->send = calloc((size_t)p->n, sizeof *p->send);
    p->recv = calloc((size_t)p->n, sizeof *p->recv);
    if (!p->send || !p->recv) {
        p->n = 0;
        pool_free(p);
        return -1;
    }
    for (int i = 0; i < p->n; i++) {
        if (!(p->send[i] = malloc((size_t)b)) || !(p->recv[i] = malloc((size_t)b))) {
            pool_free(p);
            return -1;
        }
        memset(p->send[i], 1, (size_t)b); /* touched: no page faults while timed */
        memset(p->recv[i], 0, (size_t)b);
    }
    for (long i = 0; i < EVICT_BYTES; i += 64)
        evict[i]++;
    return 0;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, n;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    long max_bytes = 1L << 24;
    int reps = 20;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--max-bytes") && i + 1 < argc)
            max_bytes = atol(argv[++i]);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = atoi(argv[++i]);
    }
    if (n < 2 || max_bytes < 8 || reps < 1) {
        if (rank == 0)
            fprintf(stderr, "simsearch-probe: needs >= 2 ranks, --max-bytes >= 8, --reps >= 1\n");
        MPI_Finalize();
        return 2;
    }
    double *t = malloc((size_t)reps * sizeof *t);
    char *evict = calloc(1, (size_t)EVICT_BYTES);
    if (!t || !evict)
        MPI_Abort(MPI_COMM_WORLD, 1);
    char host[MPI_MAX_PROCESSOR_NAME];
    int hl;
    MPI_Get_processor_name(host, &hl);
    if (rank == 0)
        printf("{\"format\": \"simsearch-probe\", \"version\": 1, \"backend\": \"mpi\", "
               "\"ranks\": %d, \"host\": \"%s\", \"reps\": %d,\n \"p2p\": [", n, host, reps);
    for (int coll = 0; coll < 2; coll++) {
        if (coll && rank == 0)
            printf("],\n \"allreduce\": [");
        int first = 1;
        for (long b = 8; b <= max_bytes; b *= 4) {
            pool pl;
            if (pool_make(&pl, b, reps, evict))
                MPI_Abort(MPI_COMM_WORLD, 1);
            for (int r = -1; r < reps; r++) {
                int k = (r + 1) % pl.n;
                memset(pl.send[k], r & 0x7f, (size_t)b); /* the data was just produced */
                MPI_Barrier(MPI_COMM_WORLD);
                double t0 = MPI_Wtime(), dt;
                if (coll) {
                    MPI_Allreduce(pl.send[k], pl.recv[k], (int)(b / 4), MPI_FLOAT, MPI_SUM,
                                  MPI_COMM_WORLD);
                    double mine = (MPI_Wtime() - t0) * 1e6;
                    MPI_Allreduce(&mine, &dt, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
                } else {
                    if (rank == 0) {
                        MPI_Send(pl.send[k], (int)b, MPI_BYTE, 1, 0, MPI_COMM_WORLD);
                        MPI_Recv(pl.recv[k], (int)b, MPI_BYTE, 1, 0, MPI_COMM_WORLD,
                                 MPI_STATUS_IGNORE);
                    } else if (rank == 1) {
                        MPI_Recv(pl.recv[k], (int)b, MPI_BYTE, 0, 0, MPI_COMM_WORLD,
                                 MPI_STATUS_IGNORE);
                        MPI_Send(pl.send[k], (int)b, MPI_BYTE, 0, 0, MPI_COMM_WORLD);
                    }
                    dt = (MPI_Wtime() - t0) / 2 * 1e6;
                }
                if (r >= 0)
                    t[r] = dt;
            }
            pool_free(&pl);
            if (rank == 0) {
                double us = median(t, reps);
                if (coll)
                    printf("%s\n  {\"bytes\": %ld, \"us\": %.4f, \"busbw_gbps\": %.6f}",
                           first ? "" : ",", b, us, 2.0 * (n - 1) / n * (double)b / us / 1e3);
                else
                    printf("%s\n  {\"bytes\": %ld, \"us\": %.4f, \"gbps\": %.6f}", first ? "" : ",",
                           b, us, (double)b / us / 1e3);
            }
            first = 0;
        }
    }
    if (rank == 0)
        printf("]}\n");
    free(t);
    free(evict);
    MPI_Finalize();
    return 0;
}
