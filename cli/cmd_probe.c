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

typedef struct opts {
    const char *backend;
    long long np, reps, max_bytes;
    int json;
} opts;

static const ss_cli_optdef options[] = {
    SS_CLI_STR_ROW(opts, "--backend", "B", backend, 0,
                   "mpi (default); nccl needs NCCL and GPUs (not built yet)"),
    SS_CLI_INT_ROW(opts, "--np", "N", np, 2, 4096, "ranks (default 2)"),
    SS_CLI_INT_ROW(opts, "--reps", "N", reps, 1, 100000,
                   "repetitions per message size, median (default 20)"),
    SS_CLI_INT_ROW(opts, "--max-bytes", "N", max_bytes, 8, 1LL << 30,
                   "largest message (default 16777216; sizes 8 B x 4^k)"),
    SS_CLI_FLAG_ROW(opts, "--json", json, "print the simsearch-probe document"),
    {NULL, SS_CLI_FLAG, NULL, 0, 0, 0, 0, 0, 0, NULL},
};

const ss_cli_cmddef ss_cli_def_probe = {
    "probe",
    "measure link latency and bandwidth between MPI ranks",
    "Measure point-to-point latency and bandwidth (ping-pong between ranks 0 and 1)\n"
    "and all-reduce bus bandwidth (all ranks) by message size, with Open MPI\n"
    "(mpirun --allow-run-as-root --oversubscribe -np N simsearch-probe).",
    options,
    NULL,
    0,
    "Exit status: 0 ok, 2 bad usage, 1 other failures (no MPI, a failed run).",
};

int ss_cmd_probe(int argc, char **argv)
{
    opts o = {"mpi", 2, 20, 1L << 24, 0};
    int r = ss_cli_parse_def(&ss_cli_def_probe, argc, argv, &o);
    if (r)
        return r < 0 ? SS_EXIT_OK : r;
    if (strcmp(o.backend, "mpi") && strcmp(o.backend, "nccl"))
        return ss_cli_usage_error("probe", "--backend must be mpi or nccl");
    ss_probe_config c = {o.backend, (int)o.np, (int)o.reps, (long)o.max_bytes, NULL};
    int json = o.json;
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
