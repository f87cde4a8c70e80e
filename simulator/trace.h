/*
 * trace.h — Chrome Trace Event JSON of a simulated iteration (opens in
 * Perfetto and chrome://tracing).
 *
 * Layout: one process per device (pid = device id, named "gpu3 (host1)" from
 * the machine, or "device3" without one); thread 0 of each process is the
 * compute stream ("compute"), thread 1 + c is network channel c ("link nvlink
 * gpu3->sw0"). A channel lives in the process of its source device, else its
 * destination device, else in an extra "network" process (pid = n_devices).
 * Every task is one complete event (ph "X", ts/dur in us) on each resource it
 * occupies, so a transfer over three channels appears three times; args carry
 * kind, op, tile, micro-batch and bytes. Threads and processes are named with
 * "M" metadata events. Tasks with no resources are not drawn. A symmetric
 * run (simulator/symmetry.c) draws its representatives' timelines on every
 * device of their class, labelled "= gpu1's timeline (symmetry)".
 *
 * The file is streamed (no DOM of the whole trace) to a temporary file next
 * to the target and renamed over it when complete, so a failed write never
 * leaves a half-written trace; strings are JSON-escaped and numbers printed
 * with round-trip precision, so the output is always valid JSON.
 */
#ifndef SS_TRACE_H
#define SS_TRACE_H

#include "simsearch.h"
#include "simulator/engine.h"
#include "simulator/taskgraph.h"

/* Names task t into buf (size n, always NUL-terminated by the caller's
 * convention: write with snprintf). The default names "fwd op3 tile1 mb0". */
typedef void (*ss_trace_namer)(void *ctx, const ss_taskgraph *tg, int task, char *buf,
                               size_t n);

typedef struct ss_trace_opts {
    const ss_machine *m;   /* optional: device, host and link names */
    ss_trace_namer name;   /* optional: task names */
    void *ctx;             /* passed to name */
    /* Optional (symmetry.c): the schedule is block 0 of `copies` identical
     * blocks (copies <= 1: none). Each event is drawn on every image of its
     * resource, dmap[k * n_devices + dev] and cmap[k * n_channels + c]
     * (images equal to an earlier one drawn once), and each device's process
     * name says which representative's timeline it shows (blk: the block of
     * each device, -1 unused). */
    int copies;
    const int *dmap, *cmap, *blk;
} ss_trace_opts;

/* Write the schedule r of graph tg to path. opts may be NULL. The machine, if
 * given, must match tg's device and channel counts. Errors: SS_ERR_INVALID
 * (mismatch), SS_ERR_IO (path not writable; message names it), NOMEM. On
 * error no file is left at path's temporary name and path is untouched. */
ss_status ss_trace_write(const char *path, const ss_taskgraph *tg, const ss_engine_result *r,
                         const ss_trace_opts *opts, ss_diag *d);

#endif /* SS_TRACE_H */
