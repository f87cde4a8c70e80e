/*
 * zero3.h — ZeRO-3 / FSDP parameter sharding in the CPU backend
 * (settings.distopt == SS_ZERO3; docs/runtime.md, "ZeRO-3").
 *
 * What each rank holds, following the task graph (simulator/build_weights.c
 * zero3_gathers and close_bucket; ss_build_describe says what each task
 * moves):
 *   - persistently, per weight it holds sharded (the items of the parameter
 *     all-gathers it is a member of): slice k of n of the shard region's
 *     elements (ss_rt_slice_of; k its place in the gather's group, n the
 *     group's size, the slice its update writes) of the value, of the
 *     gradient and of Adam's moments; the full-size host buffers of those
 *     weights, their gradients and moments are freed before the first
 *     iteration (s->buf[w], s->grad[w], s->adam_m[w], s->adam_v[w] NULL);
 *   - a parameter all-gather (SS_BUILD_COLL_PARAM) allocates s->buf[w],
 *     lays its slice there and the collective (MPI_Allgatherv) fills the
 *     region; the copy is freed after the last of the task graph's readers
 *     of that gather on this rank (a count per weight: several gathers of
 *     one weight may be live at once, as forward and backward gathers at
 *     the turn); the readers' operand copies of those weights (the tiles'
 *     kernel buffers) live from the reader's start to its end;
 *   - a backward that adds into such a weight's gradient allocates
 *     s->grad[w] (zeros) when it is not there; each gradient reduce-scatter
 *     (one per micro-batch and part of a split bucket) adds this member's
 *     slice of the sum, within its part, into the persistent gradient slice
 *     and zeroes that part of s->grad[w] (what a rank added is counted by
 *     exactly one reduce-scatter: the sum is the one process's), freeing it
 *     after an unsplit bucket's reduce-scatter or the weight's last one;
 *   - the update (SGD or Adam) writes the slices only.
 * The bytes held (slices, gathered copies, full gradients, operand copies)
 * are counted as they are allocated and freed; their peak is the run's
 * param_peak_bytes. Not under ZeRO-3 the same figure is the full weights,
 * gradients, moments and operand copies of the weights the rank's tiles
 * read (what it then holds the whole run).
 * Invariant: between iterations no gathered copy and no full gradient of a
 * sharded weight is held (checked at each iteration's start).
 */
#ifndef SS_RT_ZERO3_H
#define SS_RT_ZERO3_H

#include "runtime/exec_int.h"

typedef struct rt_z3 rt_z3;

/* After the CPU backend's buffers are made (cpu_prepare): the weights this
 * rank holds sharded, their slices (from the seeded full buffers, which are
 * then freed), the readers of each gather. *out NULL (and nothing changed)
 * when the plan is not ZeRO-3. SS_ERR_UNSUPPORTED (nothing freed) when a
 * rank holds two shards of one weight, its update writes another slice than
 * its place in the gather's group (or a slice of a weight no gather holds);
 * NOMEM. c is borrowed until ss_rt_z3_free (readback gathers through it). */
ss_status ss_rt_z3_prepare(ss_rt_state *s, const ss_rt_comm *c, rt_z3 **out, ss_diag *d);
/* Whether task is a collective whose buffers ZeRO-3 manages (a parameter
 * all-gather or a gradient reduce-scatter of a ZeRO-3 plan: its result is
 * laid back at once, never deferred). */
int ss_rt_z3_coll(const ss_rt_state *s, int task);
/* Iteration start: zero the gradient slices; SS_ERR_INVALID when a gathered
 * copy or a full gradient is still held. */
ss_status ss_rt_z3_start(rt_z3 *z, ss_rt_state *s, ss_diag *d);
/* Before task `task` (step `step` of s->mine) runs: a parameter gather's
 * buffers and this member's slice in them; a gradient reduce-scatter's full
 * gradients (zeros where nothing was added); a reader's operand copies
 * (a backward reloads them from its gather's copy) and gradient buffers.
 * SS_ERR_INVALID naming the weight when a reader finds no gathered copy. */
ss_status ss_rt_z3_before(rt_z3 *z, ss_rt_state *s, int step, ss_diag *d);
/* After it ran: a reduce-scatter's slices added into the gradient slices and
 * the full gradients freed; a reader's operand copies freed, and a gathered
 * copy after its last reader. */
void ss_rt_z3_after(rt_z3 *z, ss_rt_state *s, int step);
/* The update task `task` on the slices when its weight is sharded here
 * (timed and recorded as the backend's updates): 1, else 0 (not ours). */
int ss_rt_z3_update(rt_z3 *z, rt_iter *x, int task);
/* Every sharded weight's full value into s->buf (an all-gather of the
 * slices over each weight's group, in tensor order on every rank: the
 * numerics check reads them). */
ss_status ss_rt_z3_readback(rt_z3 *z, ss_rt_state *s, ss_diag *d);
/* Peak parameter bytes held (see above); z NULL: the unsharded figure of s. */
int64_t ss_rt_z3_peak(const rt_z3 *z, const ss_rt_state *s);
void ss_rt_z3_free(rt_z3 *z);

#endif
