/*
 * plan_impl.h — internals shared by core/plan.c, core/plan_io.c and
 * core/plan_gen.c: the ss_plan struct and validation with a caller-chosen
 * message prefix (a loader names its file instead of "plan").
 */
#ifndef SS_PLAN_IMPL_H
#define SS_PLAN_IMPL_H

#include "simsearch.h"

#include "core/devpool.h"

struct ss_plan {
    int n_ops;
    ss_pconfig *cfg;  /* one per op; cfg[i].devices == lst[i]->v */
    ss_devlist **lst; /* per op: its device list, one reference held, in pool */
    ss_devpool *pool; /* the distinct device lists of the plan's ops */
    ss_plan_settings settings;
    uint64_t model_fp, topo_fp;
    char model_name[SS_NAME_MAX];
    char topo_name[SS_NAME_MAX];
    int n_devices;    /* of the machine it was made for (0 if none) */
};

/* Defaults: 1 stage, 1 micro-batch, GPipe, FIFO, wait-free, one bucket per
 * weight, no priority/reordering/recomputation. */
void ss_plan_settings_default(ss_plan_settings *s);

/* ss_plan_validate with messages starting "<prefix>: " (a file name). With m
 * NULL the plan's own device count is used; when that is unknown too (a plan
 * made without a machine), device indices are only checked to be >= 0. */
ss_status ss_plan_validate_with(const ss_plan *p, const ss_graph *g, const ss_machine *m,
                                const char *prefix, ss_diag *d);
/* Validation of one op's config (p->n_ops must match g). passed (NULL, or
 * one entry per device list id, zeroed before the first op) records the
 * lists whose devices passed, with the replica and reduction degrees they
 * passed with, so that ops sharing them are not checked again. */
ss_status ss_plan_validate_op(const ss_plan *p, const ss_graph *g, int n_devices, int i,
                              const char *prefix, int64_t *passed, ss_diag *d);

/* Cross-field checks of a loaded plan, messages "<file>: $.settings.KEY: ...":
 * every stage in [0, stages) holds a non-input operator; with microbatches
 * M > 1, M <= the model's batch, M divides it, and M <= the micro-batches the
 * tiles form (the most tiles of one operator at distinct sample offsets on
 * one device; the simulator runs exactly those). */
ss_status ss_plan_check_consistency(const ss_plan *p, const ss_graph *g, const char *file,
                                    ss_diag *d);

/* The micro-batches p's tiles form (the most of any operator, as above);
 * -1 when out of memory. A plan whose settings say more runs exactly these:
 * the search lowers its setting to this before it writes the plan. */
int ss_plan_layout_microbatches(const ss_plan *p, const ss_graph *g);

#endif
