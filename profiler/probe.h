/*
 * probe.h — link probes: point-to-point latency and bandwidth and
 * all-reduce bus bandwidth by message size, measured between MPI ranks by
 * the `simsearch-probe` helper (profiler/probe/mpi_probe.c) under mpirun,
 * and read back from its "simsearch-probe" JSON document strictly.
 *
 * The measured figures feed `topo --discover --probe`: the links of the
 * discovered host get the measured point-to-point bandwidth (the plateau:
 * the best of the large sizes) and latency (the smallest size) instead of
 * estimates, and are marked "estimated": false.
 */
#ifndef SS_PROFILER_PROBE_H
#define SS_PROFILER_PROBE_H

#include "simsearch.h"

#define SS_PROBE_MAX_POINTS 32

typedef struct ss_probe_point {
    double bytes, us, gbps; /* gbps: p2p bandwidth, or all-reduce bus bandwidth */
} ss_probe_point;

typedef struct ss_probe_result {
    char backend[16];       /* "mpi" */
    char host[SS_NAME_MAX];
    int ranks, reps;
    int n_p2p, n_allreduce;
    ss_probe_point p2p[SS_PROBE_MAX_POINTS], allreduce[SS_PROBE_MAX_POINTS];
    double latency_us;      /* p2p one-way time of the smallest message */
    double p2p_gbps;        /* best p2p bandwidth of the messages >= 64 KiB (or of all) */
    double busbw_gbps;      /* best all-reduce bus bandwidth */
} ss_probe_result;

typedef struct ss_probe_config {
    const char *backend;    /* "mpi" (NULL: "mpi"); "nccl" is refused: no NCCL backend yet */
    int ranks;              /* processes (0: 2) */
    int reps;               /* repetitions per size (0: 20) */
    long max_bytes;         /* largest message (0: 16 MiB) */
    const char *helper;     /* path of simsearch-probe (NULL: next to /proc/self/exe) */
} ss_probe_config;

/* Run the probe: `mpirun --allow-run-as-root --oversubscribe -np R helper ...`,
 * read its output. SS_ERR_UNSUPPORTED when the backend, the helper or
 * mpirun is missing (the message says what to install); SS_ERR_IO when the
 * run fails. On error *out is unchanged. */
ss_status ss_probe_run(const ss_probe_config *c, ss_probe_result *out, ss_diag *d);

/* Parse a "simsearch-probe" document strictly (label names it in messages). */
ss_status ss_probe_parse(const char *json, const char *label, ss_probe_result *out, ss_diag *d);

/* The result as a "simsearch-probe" JSON document (ss_malloc'd). */
ss_status ss_probe_to_string(const ss_probe_result *r, char **out, ss_diag *d);

#endif
