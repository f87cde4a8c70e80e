/*
 * plan.h — how the CUDA backend executes a rank's task list (the "device
 * plan"), computed in plain C from the task graph and its descriptions so
 * that it is tested without a GPU (tests/runtime/test_devplan.c):
 *
 *   streams  stream 0 is the compute stream (every kernel, every update,
 *            every copy into or out of the tensors); a transfer or
 *            collective runs its NCCL call on stream 0 when the task graph
 *            puts it on the device's compute resource (comm_blocks_compute),
 *            else on one stream per network channel it occupies (the first
 *            channel with this device at one end; at most
 *            SS_RT_MAX_COMM_STREAMS, then shared round-robin);
 *   calls    a transfer is a send (the source) or a receive (the
 *            destination), issued as ncclSend / ncclRecv in a group of one
 *            (a scatter-gather send: its slice, ss_rt_sg_slice); a
 *            collective of two or more members is an ncclAllReduce (sum) of
 *            its items laid end to end — a split bucket's part only — or,
 *            for the distributed optimizer's weight all-gather and a
 *            scatter-gather send's all-gather, an ncclAllGather of each
 *            member's slices (padded to the largest member's chunk); the
 *            distributed optimizer's gradient bucket (unsplit) an
 *            ncclReduceScatter of the same slices, each member laying back
 *            its own; an expert-parallel all-to-all one group of ncclSend /
 *            ncclRecv of the transfers folded into it (ss_rt_a2a_xfers; those
 *            transfers' own steps do nothing); sequence parallelism's
 *            reduce-scatter of partial sums and all-gather of output
 *            gradients an ncclReduceScatter / ncclAllGather of each member's
 *            box (ss_rt_sp_boxes, padded to the largest; an all-reduce when
 *            the boxes overlap); one member: nothing. A split
 *            distributed-optimizer bucket runs as the sum all-reduce of its
 *            part (the CPU backend reduce-scatters it: the same numbers on
 *            the slices that are read);
 *   groups   one NCCL communicator per distinct ordered member list, in the
 *            order of first use (the same on every member: the task list is
 *            a subsequence of one global order); the world communicator
 *            (point-to-point) when the task graph has any transfer;
 *   events   a communication step packs its data on stream 0 into its own
 *            scratch, its stream waits for that (an event), and its result
 *            is laid back into the tensors on stream 0 after waiting for its
 *            end event — deferred until a later step depends on it (through
 *            the task graph's edges, skipping joins) or touches an
 *            overlapping region of the same tensor (value or gradient), or
 *            the iteration ends. So every access to the tensors is on
 *            stream 0, and any two conflicting accesses keep the task
 *            list's order.
 */
#ifndef SS_RT_CUDA_PLAN_H
#define SS_RT_CUDA_PLAN_H

#include "runtime/exec_int.h"

#define SS_RT_MAX_COMM_STREAMS 8

enum {
    SS_RT_CALL_NONE = 0,  /* compute, update, a collective of one member, a transfer an
                           * all-to-all moves */
    SS_RT_CALL_ALLREDUCE, /* ncclAllReduce, sum, in place on the scratch */
    SS_RT_CALL_ALLGATHER, /* ncclAllGather: count per member */
    SS_RT_CALL_SEND,      /* ncclSend to peer */
    SS_RT_CALL_RECV,      /* ncclRecv from peer */
    SS_RT_CALL_REDUCESCATTER, /* ncclReduceScatter, sum: count per member */
    SS_RT_CALL_ALLTOALL   /* grouped ncclSend / ncclRecv of its transfers (world ranks) */
};
/* "none", "allreduce", "allgather", "send", "recv", "reducescatter", "alltoall". */
const char *ss_rt_call_name(int call);

typedef struct ss_rt_step {
    int task;           /* the task graph's id (s->mine order) */
    int stream;         /* 0 compute; 1 .. n_streams - 1 communication */
    int call;           /* SS_RT_CALL_* */
    int group;          /* collectives with a call: index of its group; -1 */
    int peer;           /* send / receive: the other rank; -1 */
    int dtype;          /* the elements' type: SS_F32, or SS_I32 for a send / receive of
                         * token ids or labels (their bits: ncclInt32, nothing adds them) */
    int64_t lo, hi;     /* all-reduce: elements [lo, hi) of its items laid end to end;
                         * send / receive: of its region (a scatter-gather slice);
                         * all-to-all: lo elements sent, hi received (its scratch: the
                         * sends, then the receives, each in its transfers' order) */
    int64_t count;      /* elements of the NCCL call (all-gather, reduce-scatter: per
                         * member; all-to-all: sent + received) */
    int64_t scratch_off, scratch_n; /* its own scratch elements */
    int box_off;        /* sequence parallelism's reduce-scatter or all-gather: member k's
                         * box of item i is boxes[box_off + k * n_item + i]
                         * (ss_rt_sp_boxes), its count the largest member's; -1 none */
    int zero_pad;       /* all-reduce of the optimizer's gather in parts: the scratch is
                         * zeroed and each member packs its own slices */
    int lays_back;      /* its result goes back into the tensors (receive, collective) */
    int flush_off, n_flush; /* steps laid back on stream 0 before this one: flush[] */
} ss_rt_step;

typedef struct ss_rt_devplan {
    int n_steps;
    ss_rt_step *steps;  /* [n_steps], one per task of s->mine, in order */
    int *flush;         /* step indices (each step laid back appears once) */
    int end_off, n_end; /* laid back after the last step: flush[end_off ..] */
    int n_streams;      /* 1 + the communication streams */
    int n_groups;
    int *group_off;     /* [n_groups + 1] */
    int *group_ranks;   /* group k: group_ranks[group_off[k] .. group_off[k + 1]) */
    int world;          /* 1: the world communicator is needed (transfers) */
    int64_t scratch;    /* scratch elements of all steps */
    ss_region *boxes;   /* the steps' sequence-parallel boxes */
    int n_boxes;
} ss_rt_devplan;

/* The device plan of s's rank (after its schedule). SS_ERR_UNSUPPORTED when
 * a collective, or a transfer other than a forward value of 4-byte elements
 * (ss_rt_xfer_movable), moves a tensor that is not f32 (naming it);
 * NOMEM. On error p is empty. Free with ss_rt_devplan_clear. */
ss_status ss_rt_devplan_make(const ss_rt_state *s, ss_rt_devplan *p, ss_diag *d);
void ss_rt_devplan_clear(ss_rt_devplan *p);

/* A scatter-gather send's slice (Megatron's stage boundary between
 * tensor-parallel stages: replica q sends slice q of the region's elements,
 * row-major, ss_rt_slice_of(volume, q, parts), and the receivers all-gather
 * them): the place of its receiver in the group of the all-gather after it;
 * -1 for a plain send (or when no such all-gather follows). */
int ss_rt_sg_slice(const ss_rt_state *s, int task);

/* The distributed optimizer's all-gather e: member k owns elements
 * ss_rt_slice_of(volume, k, n_dev) of each item's region (row-major); its
 * chunk, the same for every member, lays them end to end, each item padded
 * to ceil(volume / n_dev): the sum of those. */
int64_t ss_rt_gather_chunk(const ss_rt_state *s, const ss_build_desc *e);

#endif
