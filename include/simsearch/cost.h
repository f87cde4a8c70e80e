/*
 * simsearch/cost.h — per-operator-tile costs (profiler/cost.c, profiler/analytic.c).
 *
 * Part of the public C API. Users include <simsearch.h>, which includes every
 * header under simsearch/ in dependency order; this one also compiles on its own.
 * The conventions are in simsearch.h's opening comment.
 */
#ifndef SIMSEARCH_COST_H
#define SIMSEARCH_COST_H

#include <stddef.h>
#include <stdint.h>

#include "simsearch/plan.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ */
/* Costs (profiler/cost.c, profiler/analytic.c)                        */
/* ------------------------------------------------------------------ */

typedef enum ss_cost_source {
    SS_COST_ANALYTIC = 0, /* roofline from the device spec */
    SS_COST_PROFILE,      /* profile database entry */
    SS_COST_MEASURED      /* live measurement */
} ss_cost_source;
const char *ss_cost_source_name(ss_cost_source s); /* "analytic", "profile", "measured" */

typedef struct ss_cost {
    double fwd_us, bwd_us;   /* time of the tile's forward / backward kernels */
    /* The same split into GPU time and host dispatch time, fwd_us =
     * max(fwd_gpu_us, fwd_host_us): analytic costs give the roofline without
     * the launch floor and kernels x launch_us; profiled and measured costs
     * give fwd_us and 0 (their host time is in the measurement). The
     * simulator lets the host run ahead of the GPU within a pass
     * (docs/simulator.md, "Host dispatch"). */
    double fwd_gpu_us, bwd_gpu_us, fwd_host_us, bwd_host_us;
    ss_work work;            /* FLOPs and bytes */
    double workspace_bytes;  /* temporary memory while it runs */
    ss_cost_source source;
} ss_cost;

/* A cost provider answers for (op, tile, device type) or declines (returns 0).
 * Providers are asked in the order added; the analytic model is the last
 * resort and always answers. */
typedef struct ss_cost_provider {
    const char *name;
    void *ctx;
    int (*lookup)(void *ctx, const ss_graph *g, const ss_op *op, const ss_tile *t,
                  const ss_device_type *dt, ss_cost *out);
} ss_cost_provider;

typedef struct ss_costmodel ss_costmodel;
ss_costmodel *ss_cost_new(const ss_machine *m);
void ss_cost_free(ss_costmodel *cm);
ss_status ss_cost_add_provider(ss_costmodel *cm, const ss_cost_provider *p, ss_diag *d);
/* Cost of tile t of op on a device of type `devtype` (index in m). Cached. */
ss_status ss_cost_tile(ss_costmodel *cm, const ss_graph *g, const ss_op *op, const ss_tile *t,
                       int devtype, ss_cost *out);
/* Time of the optimizer update of n_params parameters on devtype: their share
 * of the device's fused multi-tensor optimizer kernel (memory time, no launch
 * overhead per call; profiler/cost.c). 0 for n_params <= 0 or a bad type. */
double ss_cost_update_us(ss_costmodel *cm, int devtype, int64_t n_params, ss_optimizer opt,
                         ss_precision prec);
/* Where the plan's compute time comes from: share[s] (s an ss_cost_source)
 * = the summed forward + backward time of every tile of p (on its device's
 * type) answered by source s, over the total (all 0 when the total is 0).
 * Optimizer updates are not tiles and not counted. */
ss_status ss_cost_plan_sources(ss_costmodel *cm, const ss_graph *g, const ss_machine *m,
                               const ss_plan *p, double share[3], ss_diag *d);
/* The analytic roofline alone (for providers and tests). */
void ss_cost_analytic(const ss_device_type *dt, const ss_graph *g, const ss_op *op,
                      const ss_tile *t, ss_cost *out);

#ifdef __cplusplus
}
#endif
#endif /* SIMSEARCH_COST_H */
