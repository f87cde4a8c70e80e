/*
 * bench_engine.c — speed of the event engine on a large random layered DAG.
 *
 * Graph: 16 devices on a star (16 links, 32 channels). Each layer has, per
 * device, COMPUTE compute tasks (fwd or bwd, 5..50 us) and XFER transfers
 * (each on the sender's uplink and the receiver's downlink, 2 resources);
 * every task depends on 2 random tasks of the previous layer. Reports the
 * time to build the graph and to simulate it (best of REPS), as tasks per
 * second of CPU time. Usage: bench_engine [tasks (default 1048576)] [seed]
 */
#include <stdio.h>
#include <stdlib.h>

#include "bench_common.h"
#include "simulator/engine.h"
#include "simulator/taskgraph.h"

enum { DEVICES = 16, COMPUTE = 24, XFER = 8, REPS = 3 };

static uint64_t rng;
static uint32_t rnd(void)
{
    rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
    return (uint32_t)(rng >> 33);
}

static int build(ss_taskgraph *tg, long target, ss_diag *d)
{
    const int per_layer = DEVICES * (COMPUTE + XFER);
    long layers = target / per_layer;
    int prev_lo = -1, prev_n = 0;
    if (ss_taskgraph_reset(tg, DEVICES, 2 * DEVICES, d) ||
        ss_taskgraph_reserve(tg, (int)(layers * per_layer), (int)(layers * per_layer * 2),
                             (int)(layers * per_layer * 2), d))
        return -1;
    for (int c = 0; c < DEVICES; c++) {
        ss_taskgraph_set_channel_ends(tg, 2 * c, c, -1, d);
        ss_taskgraph_set_channel_ends(tg, 2 * c + 1, -1, c, d);
    }
    for (long l = 0; l < layers; l++) {
        int lo = tg->n_tasks;
        for (int v = 0; v < DEVICES; v++) {
            for (int k = 0; k < COMPUTE; k++) {
                ss_task_kind kind = l < layers / 2 ? SS_TASK_FWD : SS_TASK_BWD;
                if (ss_taskgraph_add1(tg, kind, v, 5 + rnd() % 46, (int)(rnd() % 4), (int)l, k, 0,
                                      d) < 0)
                    return -1;
            }
            for (int k = 0; k < XFER; k++) {
                int dst = (v + 1 + (int)(rnd() % (DEVICES - 1))) % DEVICES;
                int res[2] = {DEVICES + 2 * v, DEVICES + 2 * dst + 1};
                ss_task_spec s = {SS_TASK_XFER, 2 + rnd() % 30, 0, (int)l, k, 0, 0, 1e6, 2, res};
                if (ss_taskgraph_add(tg, &s, d) < 0)
                    return -1;
            }
        }
        if (prev_n > 0)
            for (int t = lo; t < tg->n_tasks; t++)
                for (int e = 0; e < 2; e++)
                    if (ss_taskgraph_add_dep(tg, prev_lo + (int)(rnd() % (unsigned)prev_n), t, d))
                        return -1;
        prev_lo = lo;
        prev_n = tg->n_tasks - lo;
    }
    return ss_taskgraph_finalize(tg, d) ? -1 : 0;
}

int main(int argc, char **argv)
{
    long target = argc > 1 ? atol(argv[1]) : 1L << 20;
    rng = argc > 2 ? strtoull(argv[2], NULL, 10) : 1;
    ss_diag d = {0};
    ss_taskgraph *tg = ss_taskgraph_new(DEVICES, 2 * DEVICES);
    ss_engine *e = ss_engine_new();
    if (!tg || !e)
        return 1;
    /* CPU time of this process: the machines we benchmark on are shared, and
     * CPU time is what "tasks per second on one core" means. */
    double t0 = bench_cpu_s();
    if (build(tg, target, &d)) {
        fprintf(stderr, "bench_engine: %s\n", d.msg);
        return 1;
    }
    double t_build = bench_cpu_s() - t0;
    double best = 1e30;
    for (int rep = 0; rep < REPS; rep++) {
        for (int pol = 0; pol < 2; pol++) {
            ss_engine_config cfg = {.policy = (ss_queue_policy)pol};
            t0 = bench_cpu_s();
            if (ss_engine_run(e, tg, &cfg, &d)) {
                fprintf(stderr, "bench_engine: %s\n", d.msg);
                return 1;
            }
            double t = bench_cpu_s() - t0;
            if (pol == 0 && t < best)
                best = t;
        }
    }
    const ss_engine_result *r = ss_engine_result_of(e);
    printf("bench_engine: %d tasks, %d edges, %d resource slots, %d devices, %d channels\n",
           tg->n_tasks, tg->n_edges, tg->res_off[tg->n_tasks], tg->n_devices, tg->n_channels);
    printf("  build     %.3f s  (%.2f M tasks/s)\n", t_build, tg->n_tasks / t_build / 1e6);
    printf("  simulate  %.3f s  (%.2f M tasks/s, CPU time, best of %d, FIFO)\n", best,
           tg->n_tasks / best / 1e6, REPS);
    printf("  makespan  %.1f us, %lld event times\n", r->makespan, (long long)r->n_rounds);
    ss_engine_free(e);
    ss_taskgraph_free(tg);
    return 0;
}
