/*
 * symmetry.h — exact symmetric reduction of a simulation: a plan made of D
 * identical data-parallel blocks is simulated as block 0 alone, with every
 * result bit-identical to the full simulation (docs/simulator.md,
 * "Symmetry", has the argument).
 *
 * DETECTION (cheap: no task graph). D is the largest divisor (> 1) of every
 * operator's sample degree such that
 *   - block j = the tiles whose sample index lies in the j-th 1/D of the
 *     op's sample degree; every device runs tiles of one block only (or
 *     none: unused devices stay fixed);
 *   - shifting a tile by one block (sample index + S/D, cyclically) maps
 *     its device by one permutation sigma of the devices (the same for all
 *     ops), its output region by the tensor's batch / D along the sample
 *     dim and every operand's region likewise (operands without a sample
 *     dim, weights, read the same region);
 *   - sigma is an automorphism of the machine: equal device types and
 *     peer figures, host membership and the collectives' ring order within
 *     a block kept, and route(sigma a, sigma b) = sigma(route(a, b)) for
 *     every device pair under one channel map with equal link figures;
 *   - the graph rebuilt with batch / D (the reduced graph) gives block 0's
 *     tiles the same shapes and regions as the full graph.
 * VERIFIED WHILE BUILDING the reduced plan (block 0 on the reduced graph):
 * channels used by block 0's tasks are used by no other block (their
 * images are disjoint); each gradient collective's channel set is mapped
 * onto itself by sigma; no device of block 0 (or unused) lies at an end of
 * another block's image of a channel the reduced run uses. Any failure: the
 * plan is not symmetric and the caller simulates in full.
 *
 * The reduced run's per-device results of block 0 are copied to the images
 * of each device in the other blocks; iteration time, critical path and
 * memory come from it unchanged.
 */
#ifndef SS_SYMMETRY_H
#define SS_SYMMETRY_H

#include "simsearch.h"

typedef struct ss_symmetry ss_symmetry;

/* A symmetric evaluator for graph g on machine m priced by cm (borrowed, as
 * ss_sim_new's); cfg NULL: defaults (its evaluator field is ignored: the
 * reduced plan is simulated in full). NULL on allocation failure. */
ss_symmetry *ss_sym_new(const ss_graph *g, const ss_machine *m, ss_costmodel *cm,
                        const ss_sim_config *cfg);
void ss_sym_free(ss_symmetry *y);

/* Simulate p (its view v: plan_view.h, made for y's graph and machine; NULL:
 * y makes one) by symmetry when it applies (the contract of
 * ss_sim_run_within otherwise): *used = 1 and *r, *load_us as the full
 * simulation gives them, bit for bit; *used = 0 (r untouched, SS_OK) when p
 * is not symmetric, the reason in ss_sym_why. Errors: as ss_sim_run_within
 * (r unchanged). */
struct ss_plan_view;
ss_status ss_sym_run(ss_symmetry *y, struct ss_plan_view *v, const ss_plan *p,
                     double cutoff_us, ss_sim_result *r, double *load_us, int *used, ss_diag *d);

/* Whether p (view v as for ss_sym_run) passes the checks made before the reduced plan is built and
 * run (detection, the reduced graph, its regions): 1 yes, 0 no (why in
 * ss_sym_why), -1 error (d set). ss_sym_run may still refuse a plan that
 * passes, for what only the build shows (channels, collectives). */
int ss_sym_accepts(ss_symmetry *y, struct ss_plan_view *v, const ss_plan *p, ss_diag *d);

/* Why the last ss_sym_run or ss_sym_accepts did not apply ("" when it did). */
const char *ss_sym_why(const ss_symmetry *y);
/* Of the last run that applied: tasks simulated (the reduced graph's) and
 * device classes (devices / D, plus unused devices). */
int64_t ss_sym_tasks_simulated(const ss_symmetry *y);
int ss_sym_classes(const ss_symmetry *y);

/* The simulator of the reduced plan (borrowed; its last run is the one
 * ss_sym_run used): for the trace. */
ss_sim *ss_sym_reduced_sim(ss_symmetry *y);
/* Of the last run that applied: D (0 if none) and the device and channel
 * maps dmap[k * n_devices + d] = sigma^k(d), cmap likewise (borrowed), the
 * block of each device (-1 unused). */
int ss_sym_blocks(const ss_symmetry *y, const int **dmap, const int **cmap, const int **blk);

/* ---- Sub-problems: for an evaluator that builds and runs the reduced
 * problem itself (hier.c: a pipeline stage's ops for one micro-batch of
 * every data-parallel rank). Detection as above on the sub-problem's own
 * plan, except that the machine check covers the pairs of devices the
 * sub-problem uses (its tasks involve no other device; the devices it does
 * not use stay fixed), cached for the last sigma. The caller builds the
 * reduced plan with the hook (ss_build_set_symmetry) and checks the build
 * (ss_sym_verify). Verified, every figure of a device of block 0 in the
 * reduced run (the times of the tasks at it, the channels they use, its
 * memory) is the unreduced sub-problem's, bit for bit; a device of block
 * k's figures are those of its image in block 0 (ss_sym_image0). */

struct ss_build_sym;
struct ss_taskgraph;

/* Reduce the sub-problem (sg, sp) (sp a plan of graph sg on y's machine;
 * y's own graph is not used): 1 with *rg, *rp the graph with batch / D and
 * block 0's plan on it (owned by y, valid until the next call or
 * ss_sym_free) and *hook for the caller's builder; 0 when the sub-problem
 * is not symmetric (why in ss_sym_why); -1 on error (d set). */
int ss_sym_reduce(ss_symmetry *y, const ss_graph *sg, const ss_plan *sp, const ss_graph **rg,
                  const ss_plan **rp, struct ss_build_sym **hook, ss_diag *d);

/* After the build of ss_sym_reduce's plan into tg: 1 if every check
 * passed (the reduction is exact), 0 (why in ss_sym_why) if the caller
 * must simulate the sub-problem unreduced. */
int ss_sym_verify(ss_symmetry *y, const struct ss_taskgraph *tg);

/* Device dev's image in block 0 under the last ss_sym_reduce that applied
 * (dev itself in block 0 or unused). */
int ss_sym_image0(const ss_symmetry *y, int dev);

#endif /* SS_SYMMETRY_H */
