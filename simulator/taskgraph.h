/*
 * taskgraph.h — the simulator's task graph: what runs where, for how long,
 * after what.
 *
 * A task is one unit of simulated work: a forward or backward compute kernel
 * of one tile, a weight update, a point-to-point transfer, a collective, or
 * anything else a builder needs (a zero-cost join, a barrier). Each task has
 * a fixed duration and occupies a small set of RESOURCES for that whole time:
 *
 *   resource r in [0, n_devices)               device r's compute stream
 *   resource n_devices + c, c in [0, n_channels) network channel c, where
 *                                               c = 2*link + direction as in
 *                                               ss_machine_route (a->b even,
 *                                               b->a odd)
 *
 * A transfer occupies every channel of its route for latency + bytes /
 * bottleneck bandwidth (cut-through: a multi-hop transfer is not charged
 * store-and-forward, yet each hop's channel is held, so traffic contends). A
 * collective occupies every channel its algorithm uses (collective.h). A
 * task with no resources is a pure dependency node: it starts when its
 * predecessors are done and never waits for anything else.
 *
 * Storage is struct-of-arrays in growable arrays owned by the graph; a
 * reset keeps all capacity, so a search that rebuilds thousands of graphs per
 * second allocates only while the graphs still grow. Names are not stored:
 * tasks carry (kind, op, tile, micro-batch) and whoever prints a task (the
 * trace) asks a naming callback.
 *
 * Life cycle: new -> add tasks and dependencies (any order; an edge may point
 * to a task with a lower id) -> finalize (builds successor and predecessor
 * lists in CSR form; see ss_taskgraph_set_pred_lists for graphs that need
 * no predecessor lists) -> hand to the engine, any number of times. Adding after
 * finalize un-finalizes the graph (finalize again). reset -> empty again.
 *
 * The struct is open so the engine and the builder
 * can read the arrays at full speed; everybody else treats it as read-only
 * and changes it only through the functions below.
 *
 * Invariants after ss_taskgraph_finalize: succ_off/succ and pred_off/pred
 * describe exactly the added edges (duplicates kept, order: by source id
 * then insertion order for succ, by target id then insertion order for
 * pred); t's predecessor count is pred_off[t+1] - pred_off[t]; every
 * resource id is in [0, n_resources). A graph whose owner turned the
 * predecessor lists off (ss_taskgraph_set_pred_lists) has neither pred nor
 * pred_off: the engine counts predecessors from the successor lists.
 * Cycles are not rejected here: the engine reports them.
 */
#ifndef SS_TASKGRAPH_H
#define SS_TASKGRAPH_H

#include "simsearch.h"

#include <float.h>

typedef enum ss_task_kind {
    SS_TASK_FWD = 0,     /* forward compute of one tile (one micro-batch) */
    SS_TASK_BWD,         /* backward compute of one tile */
    SS_TASK_UPDATE,      /* optimizer update of one weight shard */
    SS_TASK_XFER,        /* point-to-point transfer over a route */
    SS_TASK_COLLECTIVE,  /* all-reduce, reduce-scatter, all-gather, all-to-all */
    SS_TASK_OTHER,       /* joins, barriers, anything else */
    SS_TASK_KIND_COUNT
} ss_task_kind;

/* "fwd", "bwd", "update", "xfer", "collective", "other". */
const char *ss_task_kind_name(ss_task_kind k);

/* Description of one task to add. Fields a builder does not use stay 0 / -1. */
typedef struct ss_task_spec {
    ss_task_kind kind;
    double dur_us;       /* >= 0, finite */
    int priority;        /* lower runs first among equally ready tasks */
    int op;              /* graph op id, -1 if none */
    int tile;            /* tile index within the op's config, -1 if none */
    int mb;              /* micro-batch, -1 if none */
    int aux;             /* free tag (collective kind/algorithm, weight id ...) */
    double bytes;        /* bytes moved (transfers, collectives), for traces */
    int n_res;           /* resources occupied, 0..SS_TASK_MAX_RES */
    const int *res;      /* n_res resource ids (duplicates are an error) */
} ss_task_spec;

/* SS_TASK_MAX_RES (resources of one task): include/simsearch/limits.h. */

typedef struct ss_taskgraph {
    int n_devices, n_channels, n_resources; /* n_resources = n_devices + n_channels */
    int n_tasks;
    int n_free;          /* tasks with no resources */
    int finalized;

    /* per task [n_tasks] */
    uint8_t *kind;       /* ss_task_kind */
    double *dur;         /* us */
    int32_t *prio;
    int32_t *op, *tile, *mb, *aux;
    double *bytes;
    int32_t *res_off;    /* [n_tasks + 1]: resources of t are res[res_off[t] .. res_off[t+1]) */
    int32_t *res;

    /* edges as added [n_edges] */
    int n_edges;
    int32_t *e_from, *e_to;

    /* after finalize: CSR adjacency */
    int32_t *succ_off;   /* [n_tasks + 1] */
    int32_t *succ;       /* [n_edges] */
    int32_t *pred_off;   /* [n_tasks + 1]; filled only when pred_lists */
    int32_t *pred;       /* [n_edges]; filled only when pred_lists */
    int pred_lists;      /* 1 (the default): finalize fills pred */
    int edges_released;  /* ss_taskgraph_release_edges ran since the last reset */

    /* tasks that occupy channels only and whose priority is at least
     * prio_first are ordered priority first on them (engine.h, rule 2);
     * INT32_MAX (set by new and reset): none */
    int32_t prio_first;

    /* channel ends for per-device breakdowns: chan_dev[2*c] and chan_dev[2*c+1]
     * are the devices at the two ends of channel c (-1 for a switch/NIC end). */
    int32_t *chan_dev;   /* [2 * n_channels] */

    /* capacities and scratch (private): res_mark[r] == mark_gen marks a
     * resource already listed by the task being added (duplicate check in
     * O(resources of the task)) */
    int cap_tasks, cap_res, cap_edges, cap_chan;
    uint32_t *res_mark; /* [cap_mark >= n_resources] */
    int cap_mark;
    uint32_t mark_gen;
} ss_taskgraph;

/* New empty graph over n_devices compute streams and n_channels network
 * channels (both >= 0). Every channel end starts unmapped (-1). NULL on
 * allocation failure or negative counts. Free with ss_taskgraph_free. */
ss_taskgraph *ss_taskgraph_new(int n_devices, int n_channels);
void ss_taskgraph_free(ss_taskgraph *tg);

/* Empty the graph and set new resource counts, keeping capacity. Channel
 * ends are reset to -1. On error (NOMEM growing the channel table, negative
 * counts) the graph is unchanged. */
ss_status ss_taskgraph_reset(ss_taskgraph *tg, int n_devices, int n_channels, ss_diag *d);

/* Pre-grow capacity (optional; add grows geometrically anyway). */
ss_status ss_taskgraph_reserve(ss_taskgraph *tg, int tasks, int res, int edges, ss_diag *d);

/* Add a task. Returns its id (ids are 0, 1, 2 ... in order of addition) or
 * -1 with d set (invalid spec: negative or non-finite duration, resource out
 * of range or repeated, bad kind; or NOMEM). On error the graph is unchanged.
 * Inline: a valid task on one resource with room is stored here (most tasks
 * a builder adds), everything else goes to ss_taskgraph_add_slow, which
 * callers need not call themselves. */
int ss_taskgraph_add_slow(ss_taskgraph *tg, const ss_task_spec *spec, ss_diag *d);
/* Task t's own fields from spec (both add paths; resources apart). */
static inline void ss_taskgraph_put_fields(ss_taskgraph *tg, int t, const ss_task_spec *s)
{
    tg->kind[t] = (uint8_t)s->kind;
    tg->dur[t] = s->dur_us;
    tg->prio[t] = s->priority;
    tg->op[t] = s->op;
    tg->tile[t] = s->tile;
    tg->mb[t] = s->mb;
    tg->aux[t] = s->aux;
    tg->bytes[t] = s->bytes;
}
static inline int ss_taskgraph_add(ss_taskgraph *tg, const ss_task_spec *s, ss_diag *d)
{
    int t = tg->n_tasks;
    int32_t at = tg->res_off[t];
    if (s->n_res == 1 && (unsigned)s->kind < SS_TASK_KIND_COUNT && s->dur_us >= 0 &&
        s->dur_us <= DBL_MAX && (unsigned)s->res[0] < (unsigned)tg->n_resources &&
        t < tg->cap_tasks && at < tg->cap_res) {
        ss_taskgraph_put_fields(tg, t, s);
        tg->res[at] = s->res[0];
        tg->res_off[t + 1] = at + 1;
        tg->n_tasks = t + 1;
        tg->finalized = 0;
        return t;
    }
    return ss_taskgraph_add_slow(tg, s, d);
}

/* Convenience: a task on one resource with op/tile/mb, bytes 0, aux 0. */
int ss_taskgraph_add1(ss_taskgraph *tg, ss_task_kind kind, int resource, double dur_us,
                      int priority, int op, int tile, int mb, ss_diag *d);

/* Dependency: `to` may start only after `from` has ended. Both must exist;
 * from == to is an error. On error the graph is unchanged. Inline: a
 * valid edge with room is stored here (builders add millions), everything
 * else (growth, errors) goes to ss_taskgraph_add_dep_slow, which callers
 * need not call themselves. */
ss_status ss_taskgraph_add_dep_slow(ss_taskgraph *tg, int from, int to, ss_diag *d);
static inline ss_status ss_taskgraph_add_dep(ss_taskgraph *tg, int from, int to, ss_diag *d)
{
    int m = tg->n_edges;
    if ((unsigned)from < (unsigned)tg->n_tasks && (unsigned)to < (unsigned)tg->n_tasks &&
        from != to && m < tg->cap_edges) {
        tg->e_from[m] = from;
        tg->e_to[m] = to;
        tg->n_edges = m + 1;
        tg->finalized = 0;
        return SS_OK;
    }
    return ss_taskgraph_add_dep_slow(tg, from, to, d);
}

/* Whether finalize fills the predecessor lists pred[] and their offsets
 * pred_off (on, the default, for every new graph) or neither (off: a graph
 * that only the engine and the trace read finalizes faster and keeps 4
 * bytes per task and per edge less). Un-finalizes the graph. */
void ss_taskgraph_set_pred_lists(ss_taskgraph *tg, int on);

/* Record the devices at the ends of channel c (-1 for none). Used for the
 * per-device communication breakdown and trace placement. */
ss_status ss_taskgraph_set_channel_ends(ss_taskgraph *tg, int channel, int dev_src,
                                        int dev_dst, ss_diag *d);

/* Fill every channel's ends from machine m (network node ids below
 * ss_machine_n_devices are devices). Requires n_devices and n_channels to
 * match m (n_channels = 2 * links). */
ss_status ss_taskgraph_map_machine(ss_taskgraph *tg, const ss_machine *m, ss_diag *d);

/* Build the CSR successor and predecessor lists (O(tasks + edges)). Must be
 * called after the last add and before the engine runs. Allocates nothing
 * (add sized the arrays), so it cannot fail today; callers still check. */
ss_status ss_taskgraph_finalize(ss_taskgraph *tg, ss_diag *d);

/* Free the edge list as added (e_from, e_to) of a finalized graph, and
 * pred when the predecessor lists are off: the CSR lists stay, so the
 * engine and every reader of a finalized graph work as before. For one-shot
 * simulations of big graphs (8 bytes per edge). Until the next reset, adding
 * a dependency fails (SS_ERR_INVALID) and so does finalizing a graph that
 * has tasks added since; adding tasks still works. No-op on a graph that is
 * not finalized. */
void ss_taskgraph_release_edges(ss_taskgraph *tg);

/* Small accessors (graph must be finalized for the adjacency ones). */
static inline int ss_taskgraph_n_res(const ss_taskgraph *tg, int t)
{
    return tg->res_off[t + 1] - tg->res_off[t];
}
static inline const int32_t *ss_taskgraph_res(const ss_taskgraph *tg, int t)
{
    return tg->res + tg->res_off[t];
}
static inline int ss_taskgraph_is_device(const ss_taskgraph *tg, int resource)
{
    return resource < tg->n_devices;
}

#endif /* SS_TASKGRAPH_H */
