/*
 * hier.h — the hierarchical evaluator: collapsed repeated layers and a
 * stage-level pipeline (issue 19, item 2; docs/simulator.md, "Hierarchical
 * evaluator").
 *
 * A plan whose pipeline stages hold runs of identical blocks (a transformer's
 * layers: the same op types, attributes, shapes, wiring and configs up to a
 * device offset), whose micro-batches all run on the same devices, and whose
 * pipeline ranks use disjoint devices of one device type is judged without building
 * its task graph:
 *
 *   1. per stage, the stage's ops for ONE micro-batch (every data-parallel
 *      rank, the tensor-parallel collectives, recompute, the stage's
 *      incoming send and the weight-gradient synchronisation after its
 *      backward) are simulated at operator level with the task-graph
 *      builder and engine on a sub-graph that keeps the stage's prefix, k
 *      of its n repeated blocks and its suffix (k = 1, 2, 3: the per-block
 *      increment of every figure is checked to be periodic, then
 *      extrapolated to n; not periodic: the whole stage). Each sub-problem
 *      is memoized by its content (ops, configs normalised to the stage's
 *      first device by host offset and local rank, micro-batch size,
 *      settings, device type);
 *   2. the pipeline is simulated at stage x micro-batch granularity (one
 *      forward and one backward task per stage and micro-batch, the stage
 *      sends as Megatron's blocking send/receive pairs under 1F1B with the
 *      scatter-gather all-gather, GPipe's overlapping sends, 1F1B gating,
 *      or, with the plan's virtual_stages v > 1, Megatron's interleaved
 *      order over the chunks of each pipeline rank with overlapping sends)
 *      by the same engine; each rank's last backward is followed by its
 *      measured gradient-synchronisation tail, and the collectives of a
 *      weight shared by stages (a tied embedding) run as a rendezvous of
 *      their stages, each stage's synchronisation simulated once more with
 *      them ready when the pipeline says;
 *   3. per-device results: every device of a pipeline rank gets the sum of
 *      its chunks' figures (one chunk without interleaving).
 *
 * Invariant: the result is a pure function of (graph, machine, cost model,
 * plan); the memo changes only how fast it is obtained.
 * Not applicable (see ss_hier_eval): SS_ERR_UNSUPPORTED, nothing changed.
 */
#ifndef SS_HIER_H
#define SS_HIER_H

#include "simsearch.h"

typedef struct ss_hier ss_hier;

typedef struct ss_hier_stats {
    int stages;          /* pipeline stages of the last evaluation */
    int blocks;          /* repeated blocks found over all stages */
    int block_ops;       /* ops per block (the first stage that has blocks) */
    int sub_sims;        /* sub-problems simulated by the last evaluation */
    int memo_hits;       /* sub-problems the last evaluation found memoized */
    int full_stages;     /* stages simulated whole (no periodic blocks) */
    int sub_reduced;     /* of sub_sims: reduced to one data-parallel block (symmetry.h) */
    int64_t tasks;       /* tasks simulated by the last evaluation (sub-problems + pipeline) */
} ss_hier_stats;

/* New evaluator for graph g on machine m priced by cm (borrowed; they must
 * outlive it and not change). cfg may be NULL (defaults; mem_fraction and
 * skip_memory are honoured as ss_sim does). NULL on allocation failure. */
ss_hier *ss_hier_new(const ss_graph *g, const ss_machine *m, ss_costmodel *cm,
                     const ss_sim_config *cfg);
void ss_hier_free(ss_hier *h);

/* Evaluate plan p (made for h's graph and machine) into r, as ss_sim_run
 * would fill it (iteration time, throughput, per-device compute, idle,
 * communication, memory, fits); r->n_tasks is the number of tasks the
 * evaluator simulated, n_crit 0. Interleaved plans (settings.virtual_stages
 * v > 1) are judged chunk by chunk: stage c is a chunk of its own, with its
 * own sub-problems, on the devices of pipeline rank c mod (stages / v).
 * SS_ERR_UNSUPPORTED (r unchanged, d says why) when the plan is not of the
 * form above: micro-batches of an op on different devices, a stage sharing
 * devices with another (interleaved: a chunk on devices other than exactly
 * its rank's), mixed device types, data edges that skip a stage, an op
 * without a sample dimension split dp x micro-batches ways, a stage
 * whose ops read the previous stage's output split in different ways, an
 * interleaving that is not a valid 1F1B one, interleaved chunks whose
 * gradient synchronisations overlap one another, stages that take part in
 * different numbers of collectives of weights shared between stages.
 * Other errors as ss_sim_run. The memo of sub-problems is kept across
 * calls (bounded: cleared past 4096 entries). */
ss_status ss_hier_eval(ss_hier *h, const ss_plan *p, ss_sim_result *r, ss_diag *d);

struct ss_plan_view;
/* ss_hier_eval with p's view already made (plan_view.h: ss_plan_view_set
 * or _change on p, for h's graph and machine); v NULL: h makes its own. */
ss_status ss_hier_eval_view(ss_hier *h, const struct ss_plan_view *v, const ss_plan *p,
                            ss_sim_result *r, ss_diag *d);

/* Whether p (its view v, or NULL: h makes one) is of the form ss_hier_eval
 * judges, as far as the plan alone shows (stages, devices, blocks; without
 * simulating): 1 yes, 0 no (d
 * says why, status SS_ERR_UNSUPPORTED), -1 error (d set). ss_hier_eval
 * may still refuse a plan that passes (interleaved chunks whose
 * synchronisations overlap, shared weights' collectives). */
int ss_hier_accepts(ss_hier *h, const struct ss_plan_view *v, const ss_plan *p, ss_diag *d);

/* Whether sub-problems are reduced by the plan's data-parallel symmetry
 * (symmetry.h, sub-problems) where it applies: on (the default) or off
 * (every data-parallel rank simulated; for tests and benchmarks). The
 * figures are the same bit for bit; only the tasks simulated differ. */
void ss_hier_set_symmetry(ss_hier *h, int on);

/* Statistics of the last successful evaluation (borrowed). */
const ss_hier_stats *ss_hier_stats_of(const ss_hier *h);

#endif /* SS_HIER_H */
