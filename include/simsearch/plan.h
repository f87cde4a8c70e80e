/*
 * simsearch/plan.h — parallelization plans, their JSON I/O, generators and Megatron specs
 * (core/plan.c, core/plan_io.c, core/plan_gen.c).
 *
 * Part of the public C API. Users include <simsearch.h>, which includes every
 * header under simsearch/ in dependency order; this one also compiles on its own.
 * The conventions are in simsearch.h's opening comment.
 */
#ifndef SIMSEARCH_PLAN_H
#define SIMSEARCH_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "simsearch/ops.h"
#include "simsearch/machine.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ */
/* Plans (core/plan.c, core/plan_io.c, core/plan_gen.c)                */
/* ------------------------------------------------------------------ */

/* Parallel config of one op: a degree per dim of output 0, a reduction
 * degree (splits the contraction dim: partial sums), a replica degree (the
 * same tile computed on several devices: a device-mesh axis that splits
 * nothing; every replica needs its whole input region and the weight
 * gradients are summed over replicas as in data parallelism), and one
 * device per tile and replica. Tiles are numbered row-major over
 * (dim 0, ..., dim ndim-1, replica, red):
 * index = (((i0 * deg1 + i1) * ... ) * rep + q) * red + r. Entries may
 * repeat: tiles on one device run one after another (micro-batching); the
 * replicas of one tile must sit on distinct devices. In a plan's config the
 * device list is the plan's own, shared by every op with the same list and
 * valid until that op's config changes; a config passed to
 * ss_plan_set_config may point anywhere (the list is copied or shared). */
typedef struct ss_pconfig {
    int ndim;
    int deg[SS_MAX_DIMS];
    int red;
    int rep;         /* replica degree, >= 1 (1: no replication) */
    int ntiles;      /* = prod(deg) * rep * red */
    const int *devices; /* ntiles entries */
    int stage;       /* pipeline stage of the op (0 when not pipelined) */
} ss_pconfig;

/* Tile `index` of op under config c (ranges balanced: extents need not divide
 * evenly for the math, but validation requires divisibility). */
void ss_pconfig_tile(const ss_graph *g, const ss_op *op, const ss_pconfig *c, int index,
                     ss_tile *t);

/* 1 if a and b cut the op into the same tiles on the same devices (same
 * degrees, reduction, replica degree and device list; the stage is not
 * compared), else 0. */
int ss_pconfig_same_tiles(const ss_pconfig *a, const ss_pconfig *b);

typedef enum ss_pipe_schedule { SS_PIPE_GPIPE = 0, SS_PIPE_1F1B } ss_pipe_schedule;
typedef enum ss_queue_policy { SS_QUEUE_FIFO = 0, SS_QUEUE_BACKWARD_FIRST } ss_queue_policy;
typedef enum ss_sync_mode { SS_SYNC_WAIT_FREE = 0, SS_SYNC_BULK } ss_sync_mode;
/* Activation recomputation: none; selective (Korthikanti et al.: the
 * attention-score ops — the ops whose output holds a [seq x seq] score
 * matrix, two attribute dims of equal extent — keep no activations and
 * recompute their forward in the backward); full (every op). */
typedef enum ss_recompute {
    SS_RECOMPUTE_NONE = 0,
    SS_RECOMPUTE_FULL,
    SS_RECOMPUTE_SELECTIVE
} ss_recompute;

#define SS_ZERO3 3 /* settings.distopt: parameter sharding (ZeRO-3 / FSDP) */

typedef struct ss_plan_settings {
    int stages;               /* pipeline stages (1 = none); with virtual stages, the
                                 pp * virtual_stages model chunks */
    int microbatches;         /* per iteration (1 = none) */
    ss_pipe_schedule schedule;
    ss_queue_policy queue;
    ss_sync_mode sync;
    double bucket_bytes;      /* gradient fusion threshold (0 = one bucket per weight) */
    int priority;             /* send front layers' gradients first */
    int reorder_backward;     /* adjustment layer K (0 = off): the backward of the
                                 layers (ops with weights) past the first K computes
                                 input gradients only, their weight gradients come
                                 after the first layers' (docs/simulator.md) */
    int synced_flags;         /* per-layer synced flags: the next iteration's forward
                                 of a layer waits only for that layer's update (the
                                 iteration time is then a steady-state period) */
    ss_recompute recompute;   /* every stage's mode, unless recompute_stage says otherwise */
    /* Per-stage recompute (issue 26): all 0 = every stage uses `recompute`;
     * else entry k = 1 + stage (chunk) k's mode for every k < stages (at
     * most SS_PLAN_MAX_RECOMPUTE_STAGES), 0 past them, and `recompute` is
     * stage 0's mode. Read with ss_plan_stage_recompute, set with
     * ss_plan_set_recompute (which keeps one form per meaning: equal modes
     * are stored as the single mode). */
    unsigned char recompute_stage[SS_PLAN_MAX_RECOMPUTE_STAGES];
    int distopt;              /* optimizer / parameter sharding, the ZeRO stage:
                                 0 none; 1 the distributed optimizer (ZeRO-1): each
                                 weight shard's optimizer state is split over the
                                 devices that hold it; its gradient sync is a
                                 reduce-scatter, then the update of the device's
                                 slice, then an all-gather of the updated
                                 parameters; 3 parameter sharding (ZeRO-3, FSDP
                                 FULL_SHARD): weights, gradients and optimizer state
                                 split over those devices; each weight is
                                 all-gathered before its forward and again before its
                                 backward, per micro-batch, its gradient
                                 reduce-scattered per micro-batch, no all-gather
                                 after the update (docs/simulator.md, "ZeRO-3").
                                 SS_ZERO3 names 3 */
    int virtual_stages;       /* chunks per pipeline rank (Megatron's interleaved 1F1B,
                                 --num-layers-per-virtual-pipeline-stage); 1 = none.
                                 With v > 1: pp = stages / v ranks, stage (chunk) k
                                 runs on the devices of rank k mod pp, the schedule
                                 is 1F1B and micro-batches are a multiple of pp */
} ss_plan_settings;

/* Stage k's recompute mode under s (s->recompute for a plan of one mode
 * and for k out of range). */
ss_recompute ss_plan_stage_recompute(const ss_plan_settings *s, int stage);
/* 1 when every stage of s has the same mode (s->recompute), else 0. */
int ss_plan_recompute_uniform(const ss_plan_settings *s);
/* Set the recompute modes of s: n = 1 (every stage modes[0]) or n =
 * s->stages (stage k modes[k], n <= SS_PLAN_MAX_RECOMPUTE_STAGES). Equal
 * modes are stored as the single mode. SS_ERR_INVALID (s unchanged) for
 * another n or an unknown mode; `where` names the file or spec and key in
 * the message. */
ss_status ss_plan_set_recompute(ss_plan_settings *s, const ss_recompute *modes, int n,
                                const char *where, ss_diag *d);

typedef struct ss_plan ss_plan;

/* A plan for graph g on machine m, every op with a single tile on device 0. */
ss_plan *ss_plan_new(const ss_graph *g, const ss_machine *m);
void ss_plan_free(ss_plan *p);
ss_plan *ss_plan_clone(const ss_plan *p);
/* Copy src into dst (same graph): cheap, an op of dst whose device list
 * already equals src's keeps it; dst's lists stay dst's own (plans share
 * nothing). */
ss_status ss_plan_copy(ss_plan *dst, const ss_plan *src);

int ss_plan_n_ops(const ss_plan *p);
const ss_pconfig *ss_plan_config(const ss_plan *p, int op);
/* Set op's config (copied). Checks shape (ndim, tile count) only; full
 * validation is ss_plan_validate. */
ss_status ss_plan_set_config(ss_plan *p, int op, const ss_pconfig *c, ss_diag *d);
ss_plan_settings *ss_plan_settings_of(ss_plan *p);
const ss_plan_settings *ss_plan_settings_get(const ss_plan *p);
uint64_t ss_plan_model_fingerprint(const ss_plan *p);
uint64_t ss_plan_topology_fingerprint(const ss_plan *p);
/* Bytes of memory the plan holds (its configs and its distinct device
 * lists: a plan's memory grows with its distinct placements, not with
 * operators x tiles). */
size_t ss_plan_bytes(const ss_plan *p);
/* The id of op's device list: ops whose device lists are equal have the
 * same id, ops whose lists differ different ids; ids lie in [0,
 * ss_plan_devlist_ids(p)), so a reader can key a per-list array by them.
 * Valid until the plan's configs change (an id may then name another list);
 * -1 when op is out of range. */
int ss_plan_devlist_id(const ss_plan *p, int op);
int ss_plan_devlist_ids(const ss_plan *p);

/* Degrees divide dims, split only splittable dims, reduction only where a
 * contraction exists and divides it, devices in range, tile counts match,
 * stages consistent. Errors name the op. */
ss_status ss_plan_validate(const ss_plan *p, const ss_graph *g, const ss_machine *m, ss_diag *d);

ss_status ss_plan_load(const char *path, const ss_graph *g, const ss_machine *m, ss_plan **out,
                       ss_diag *d);
ss_status ss_plan_load_string(const char *json, const char *label, const ss_graph *g,
                              const ss_machine *m, ss_plan **out, ss_diag *d);
ss_status ss_plan_save(const ss_plan *p, const ss_graph *g, const char *path, ss_diag *d);
ss_status ss_plan_to_string(const ss_plan *p, const ss_graph *g, char **out, ss_diag *d);

/* Generators. Data parallel over the first n_devices devices (0 = all): the
 * sample dim split n ways, weights replicated. */
ss_status ss_plan_data_parallel(const ss_graph *g, const ss_machine *m, int n_devices,
                                ss_plan **out, ss_diag *d);
/* Megatron-LM: tensor parallel tp (column/row split of attention and MLP;
 * every other op replicated over the tp group, as Megatron runs LayerNorm,
 * residual and dropout on every rank), pipeline pp (layers evenly over
 * stages), data parallel dp; the micro-batches given by their count mb or
 * their size mbs (samples per micro-batch per dp rank, Megatron's
 * --micro-batch-size): mb = batch / (dp * mbs); both 0 = default
 * (pp > 1 ? 4*pp : 1 micro-batches); both given and inconsistent is an
 * error. tp*pp*dp must equal the device count used. */
typedef struct ss_megatron_config {
    int tp, pp, dp, mb;
    ss_recompute recompute;
    /* Per pipeline rank (not per chunk: with vp > 1 every chunk of rank r
     * uses rank r's mode): all 0 = every rank uses `recompute`; else entry
     * r = 1 + rank r's mode for r < pp, 0 past pp, and `recompute` is rank
     * 0's mode (ss_megatron_set_recompute keeps this form). */
    unsigned char recompute_rank[SS_PLAN_MAX_RECOMPUTE_STAGES];
    int sp;      /* sequence parallelism: ops after partial sums split their sequence dim tp ways */
    int mbs;     /* micro-batch size (0: from mb) */
    int distopt; /* distributed optimizer or parameter sharding (settings.distopt: 0, 1, 3) */
    ss_sync_mode sync; /* SS_SYNC_WAIT_FREE ("overlap": bucketed, 40 MB buckets) or bulk */
    int vp;      /* virtual stages per pipeline rank (interleaved 1F1B; 0 or 1: none):
                    the layers are cut into pp*vp equal chunks, chunk k on rank k mod
                    pp; needs pp > 1, layers divisible by pp*vp and micro-batches a
                    multiple of pp */
    int cp;      /* context parallelism (0 or 1: none): every op's sequence dim (the
                    query rows of attention scores) split cp ways, cp ranks between tp
                    and dp (device = ((stage*dp + dp rank)*cp + cp rank)*tp + tp
                    rank); attention gathers the keys and values of the other cp ranks
                    (the volume of Megatron's ring exchange, not its overlap); ops
                    without a sequence dim are replicated over cp; devices = tp*pp*dp*cp */
    /* Uneven stages (Megatron's --decoder-first-pipeline-num-layers and
     * --decoder-last-pipeline-num-layers): the first / last
     * pipeline stage holds first / last layers (0: as many as the other
     * stages), the other stages share the remaining layers equally (they
     * must divide; with pp = 2 first + last must be all the layers when both
     * are given). The embedding stays on the first stage, the head on the
     * last, so fewer layers there balance them. With vp > 1 each pipeline
     * rank's layers are cut into vp equal chunks (vp must divide first,
     * last and the others' share), as Megatron-Core does. */
    int first, last;
    double bucket_bytes; /* gradient bucket for sync=overlap (0: Megatron's 40M
                            fp16 parameters, 80 MB) */
    int ep;      /* expert parallelism (0 or 1: none): the experts of every MoE layer
                    (the ops from moe_dispatch's output to moe_combine's input) split
                    ep ways over ep consecutive data-parallel ranks (Megatron's expert
                    model parallel group); each rank runs its experts for the tokens
                    of the whole group, which reach it by all-to-all (dispatch) and go
                    back by all-to-all (combine); expert weights, gradients and
                    optimizer state divide by ep, their gradients sync over the dp/ep
                    ranks holding the same experts. ep divides dp and the experts;
                    expert tensor parallelism is tp (Megatron's default); needs
                    cp = 1 */
} ss_megatron_config;
/* Set c's recompute modes: n = 1 (every rank) or n = c->pp (rank r
 * modes[r]); equal modes stored as the single mode. SS_ERR_INVALID (c
 * unchanged) otherwise. */
ss_status ss_megatron_set_recompute(ss_megatron_config *c, const ss_recompute *modes, int n,
                                    ss_diag *d);
/* Pipeline rank r's recompute mode under c. */
ss_recompute ss_megatron_rank_recompute(const ss_megatron_config *c, int r);
/* The plan settings that c's recompute, distopt, sync and bucket size set
 * (the rest of s untouched; per-rank recompute is spread over the chunks of
 * s->stages, chunk k on rank k mod pp): plans of configs that differ only
 * there differ only in these settings. */
void ss_megatron_settings(const ss_megatron_config *c, ss_plan_settings *s);
/* The number of repeated layers of g (the longest run of a repeated block of
 * segments, as the Megatron generator finds them), 0 when it has none. */
int ss_plan_layers(const ss_graph *g);
/* c as a "megatron:..." spec that ss_plan_from_spec reads back into the same
 * plan: tp, pp, dp, mbs (or mb when the batch size is not known: batch <= 0),
 * and the keys whose values differ from the defaults. Returns the length
 * snprintf would (truncated output when >= cap). */
int ss_megatron_spec(const ss_megatron_config *c, int64_t batch, char *buf, size_t cap);
ss_status ss_plan_megatron(const ss_graph *g, const ss_machine *m, const ss_megatron_config *c,
                           ss_plan **out, ss_diag *d);
/* "data-parallel" | "megatron:tp=T,pp=P,dp=D[,cp=C][,mbs=S|mb=M][,vp=V]
 * [,recompute=MODE[/MODE...]][,sp=0|1][,distopt=0|1|3][,sync=overlap|bulk][,first=F]
 * [,last=L][,bucket=MB]" (bucket in MB of 10^6 bytes; zero=0|1|3 is distopt's other name,
 * fsdp=1 is zero=3; tp, pp, cp, vp default 1; dp defaults
 * to devices / (tp*pp*cp); MODE none|selective|full, optionally MODE*COUNT for COUNT
 * consecutive pipeline ranks: one mode for every stage, or modes for all pp
 * ranks, e.g. recompute=full*2/none*6 with pp=8) | a path to a plan JSON (does
 * not start with "megatron" and contains '/' or ends in ".json").
 * Bad specs: SS_ERR_INVALID naming the key. */
ss_status ss_plan_from_spec(const char *spec, const ss_graph *g, const ss_machine *m,
                            ss_plan **out, ss_diag *d);
/* The tensor-parallel degree a plan spec names before any model exists (for
 * ss_model_build_tp): the tp key of a "megatron:" spec (1 when absent), 1
 * for "data-parallel", 0 for plan files and specs it cannot read (their
 * errors come from ss_plan_from_spec). */
int ss_plan_spec_tp(const char *spec);

#ifdef __cplusplus
}
#endif
#endif /* SIMSEARCH_PLAN_H */
