/*
 * bench_common.h — what the benchmark programs share: the wall and CPU
 * clocks (every bench_*.c that times), and for those that take a model on a
 * topology (bench_hier.c, bench_plan.c) the common options --model SPEC,
 * --topology FILE, --batch N and --nodes N, and loading the machine and
 * building the model for its device count.
 * Header-only (benchmarks/bench_*.c are one program each): each benchmark
 * includes it once.
 *
 * Invariant: the options mean what `simsearch simulate` takes them to mean
 * (--batch 0 or absent: the model's default for the device count; --nodes 0
 * or absent: the topology's node count).
 */
#ifndef SS_BENCH_COMMON_H
#define SS_BENCH_COMMON_H

#include "simsearch.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The options every such benchmark takes (NULL / 0 when not given). */
typedef struct bench_inputs {
    const char *model, *topology;
    long batch;
    int nodes;
} bench_inputs;

/* Seconds on clock id; on the monotonic wall clock; of the process's CPU. */
static inline double bench_clock_s(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
static inline double bench_wall_s(void) { return bench_clock_s(CLOCK_MONOTONIC); }
static inline double bench_cpu_s(void) { return bench_clock_s(CLOCK_PROCESS_CPUTIME_ID); }

/* When opt is one of the common options, store its value val into in and
 * return 1; otherwise return 0 and change nothing. */
static inline int bench_input_opt(bench_inputs *in, const char *opt, const char *val)
{
    if (!strcmp(opt, "--model"))
        in->model = val;
    else if (!strcmp(opt, "--topology"))
        in->topology = val;
    else if (!strcmp(opt, "--batch"))
        in->batch = atol(val);
    else if (!strcmp(opt, "--nodes"))
        in->nodes = atoi(val);
    else
        return 0;
    return 1;
}

/* Load the topology (with --nodes) into *m and build the model for its
 * device count (with --batch) into *g. Returns SS_OK, or the status with d
 * saying why (what was loaded stays in *m / *g for the caller to free). */
static inline ss_status bench_load(const bench_inputs *in, ss_machine **m, ss_graph **g,
                                   ss_diag *d)
{
    ss_status st = ss_machine_load_nodes(in->topology, in->nodes, m, d);
    if (!st)
        st = ss_model_build(in->model, in->batch, ss_machine_n_devices(*m), g, d);
    return st;
}

#endif
