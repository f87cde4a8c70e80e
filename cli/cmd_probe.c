/*
 * cmd_probe.c — `simsearch probe`: measure the links between MPI ranks on
 * this machine (or wherever mpirun places them): point-to-point latency and
 * bandwidth and all-reduce bus bandwidth by message size
 * (profiler/probe.h). `topo --discover --probe` writes the figures into a
 * topology.
 */
#include "cli.h"
#include "profiler/probe.h"

#include <string.h>

static void help(FILE *f)
{
    fprintf(f,
            "usage: simsearch probe [--backend mpi|nccl] [--np N] [--reps N] [--max-bytes N]\n"
            "                       [--json]\n\n"
            "Measure point-to-point latency and bandwidth (ping-pong between ranks 0 and 1)\n"
            "and all-reduce bus bandwidth (all ranks) by message size, with Open MPI\n"
            "(mpirun --allow-run-as-root --oversubscribe -np N simsearch-probe).\n\n"
            "  --backend B      mpi (default); nccl needs NCCL and GPUs (not built yet)\n"
            "  --np N           ranks (default 2)\n"
            "  --reps N         repetitions per message size, median (default 20)\n"
            "  --max-bytes N    largest message (default 16777216; sizes 8 B x 4^k)\n"
            "  --json           print the simsearch-probe document\n\n"
            "Exit status: 0 ok, 2 bad usage, 1 other failures (no MPI, a failed run).\n");
}

int ss_cmd_probe(int argc, char **argv)
{
    ss_probe_config c = {"mpi", 2, 20, 1L << 24, NULL};
    int json = 0;
    for (int i = 1; i < argc; i++) {
        const char *v = NULL;
        long long x;
        int r;
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            help(stdout);
            return SS_EXIT_OK;
        }
        if (!strcmp(argv[i], "--json")) {
            json = 1;
            continue;
        }
        if ((r = ss_cli_opt(argc, argv, &i, "--backend", &v))) {
            if (r < 0 || (strcmp(v, "mpi") && strcmp(v, "nccl")))
                return ss_cli_usage_error("probe", "--backend must be mpi or nccl");
            c.backend = v;
            continue;
        }
        if ((r = ss_cli_opt(argc, argv, &i, "--np", &v))) {
            if (r < 0 || ss_cli_int(v, 2, 4096, &x))
                return ss_cli_usage_error("probe", "--np needs an integer from 2 to 4096");
            c.ranks = (int)x;
            continue;
        }
        if ((r = ss_cli_opt(argc, argv, &i, "--reps", &v))) {
            if (r < 0 || ss_cli_int(v, 1, 100000, &x))
                return ss_cli_usage_error("probe", "--reps needs an integer from 1 to 100000");
            c.reps = (int)x;
            continue;
        }
        if ((r = ss_cli_opt(argc, argv, &i, "--max-bytes", &v))) {
            if (r < 0 || ss_cli_int(v, 8, 1LL << 30, &x))
                return ss_cli_usage_error("probe", "--max-bytes needs an integer from 8 to 2^30");
            c.max_bytes = (long)x;
            continue;
        }
        return ss_cli_usage_error("probe", "unknown argument '%s'", argv[i]);
    }
    ss_diag d;
    ss_diag_init(&d);
    ss_probe_result pr;
    if (ss_probe_run(&c, &pr, &d) != SS_OK) {
        fprintf(stderr, "simsearch: %s\n", d.msg);
        return d.status == SS_ERR_INVALID ? SS_EXIT_USAGE : SS_EXIT_FAIL;
    }
    if (json) {
        char *s = NULL;
        if (ss_probe_to_string(&pr, &s, &d) != SS_OK)
            return ss_cli_fail(&d);
        printf("%s\n", s);
        ss_free(s);
        return SS_EXIT_OK;
    }
    printf("probe: %s, %d ranks on %s, median of %d\n", pr.backend, pr.ranks, pr.host, pr.reps);
    printf("%12s %12s %12s %14s %16s\n", "bytes", "p2p us", "p2p GB/s", "allreduce us",
           "bus GB/s");
    for (int i = 0; i < pr.n_p2p || i < pr.n_allreduce; i++) {
        double b = i < pr.n_p2p ? pr.p2p[i].bytes : pr.allreduce[i].bytes;
        printf("%12.0f", b);
        if (i < pr.n_p2p)
            printf(" %12.2f %12.3f", pr.p2p[i].us, pr.p2p[i].gbps);
        else
            printf(" %12s %12s", "", "");
        if (i < pr.n_allreduce)
            printf(" %14.2f %16.3f", pr.allreduce[i].us, pr.allreduce[i].gbps);
        printf("\n");
    }
    printf("latency %.2f us, p2p bandwidth %.2f GB/s, all-reduce bus bandwidth %.2f GB/s\n",
           pr.latency_us, pr.p2p_gbps, pr.busbw_gbps);
    return SS_EXIT_OK;
}
