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
    char *buf = malloc((size_t)max_bytes), *buf2 = malloc((size_t)max_bytes);
    double *t = malloc((size_t)reps * sizeof *t);
    if (!buf || !buf2 || !t)
        MPI_Abort(MPI_COMM_WORLD, 1);
    memset(buf, 1, (size_t)max_bytes);
    memset(buf2, 0, (size_t)max_bytes);
    char host[MPI_MAX_PROCESSOR_NAME];
    int hl;
    MPI_Get_processor_name(host, &hl);
    if (rank == 0)
        printf("{\"format\": \"simsearch-probe\", \"version\": 1, \"backend\": \"mpi\", "
               "\"ranks\": %d, \"host\": \"%s\", \"reps\": %d,\n \"p2p\": [", n, host, reps);
    int first = 1;
    for (long b = 8; b <= max_bytes; b *= 4) {
        for (int r = -1; r < reps; r++) {
            MPI_Barrier(MPI_COMM_WORLD);
            double t0 = MPI_Wtime();
            if (rank == 0) {
                MPI_Send(buf, (int)b, MPI_BYTE, 1, 0, MPI_COMM_WORLD);
                MPI_Recv(buf2, (int)b, MPI_BYTE, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            } else if (rank == 1) {
                MPI_Recv(buf2, (int)b, MPI_BYTE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                MPI_Send(buf, (int)b, MPI_BYTE, 0, 0, MPI_COMM_WORLD);
            }
            if (r >= 0)
                t[r] = (MPI_Wtime() - t0) / 2 * 1e6;
        }
        if (rank == 0) {
            double us = median(t, reps);
            printf("%s\n  {\"bytes\": %ld, \"us\": %.4f, \"gbps\": %.6f}", first ? "" : ",", b, us,
                   (double)b / us / 1e3);
        }
        first = 0;
    }
    if (rank == 0)
        printf("],\n \"allreduce\": [");
    first = 1;
    for (long b = 8; b <= max_bytes; b *= 4) {
        int cnt = (int)(b / 4);
        for (int r = -1; r < reps; r++) {
            MPI_Barrier(MPI_COMM_WORLD);
            double t0 = MPI_Wtime();
            MPI_Allreduce(buf, buf2, cnt, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
            double dt = (MPI_Wtime() - t0) * 1e6, mx;
            MPI_Allreduce(&dt, &mx, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
            if (r >= 0)
                t[r] = mx;
        }
        if (rank == 0) {
            double us = median(t, reps);
            printf("%s\n  {\"bytes\": %ld, \"us\": %.4f, \"busbw_gbps\": %.6f}", first ? "" : ",",
                   b, us, 2.0 * (n - 1) / n * (double)b / us / 1e3);
        }
        first = 0;
    }
    if (rank == 0)
        printf("]}\n");
    free(buf);
    free(buf2);
    free(t);
    MPI_Finalize();
    return 0;
}
