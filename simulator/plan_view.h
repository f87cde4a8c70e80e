/*
 * plan_view.h — the plan analysed once (issue 27, item 2): what every
 * evaluator and the dispatcher read about a plan before judging it, made
 * by the dispatcher (sim.c) once per judgement and handed to the
 * evaluator that judges it (evaluator.h: ss_sim.view).
 *
 * Of the graph (made with the view): each op's sample dim (the first
 * SS_DIM_SAMPLE dim of its first output, -1 none). Of the plan
 * (ss_plan_view_set): the pipeline settings (stages P, micro-batches M,
 * chunks per rank V, pipeline ranks R = P / V, each at least 1), each op's
 * stage and the ops grouped by stage (ascending; an op whose stage lies
 * outside [0, P) is in no group and counted in bad_stage), the tile
 * entries, and the data-parallel facts the symmetric evaluator starts
 * from: the gcd of the ops' sample degrees, the first op without a sample
 * dim in its config and (on demand: ss_plan_view_bad_device) the first op
 * with a device out of range.
 * ss_plan_view_change re-reads one op (a search's single-op move) and the
 * settings in O(ops + that op's tiles), leaving the view as
 * ss_plan_view_set would.
 *
 * Invariant: after set or change, every field is a pure function of
 * (graph, machine, plan); the view borrows nothing from the plan.
 */
#ifndef SS_PLAN_VIEW_H
#define SS_PLAN_VIEW_H

#include "simsearch.h"

#include <stdint.h>

typedef struct ss_plan_view {
    const ss_graph *g;
    int n_ops, n_dev;
    int *sd;            /* [n_ops] sample dim of the op's first output, -1 none */
    /* of the plan last set */
    int P, M, V, R;     /* stages, micro-batches, chunks per rank, ranks (R = P / V) */
    int *stage;         /* [n_ops] the op's stage (its config's) */
    int *stage_off;     /* [P + 1] ops of stage s: sops[stage_off[s] .. stage_off[s + 1]) */
    int *sops;          /* ops grouped by stage, ascending within a stage */
    int *pos;           /* [n_ops] the op's index within its stage's group (-1: none) */
    int bad_stage;      /* the first op whose stage is outside [0, P), -1 none */
    int64_t tiles;      /* tile entries (the sizes of the device lists) */
    int64_t *otiles;    /* [n_ops] tile entries per op */
    unsigned char *obad; /* [n_ops] 1: a device of the op lies outside the machine */
    int64_t sample_gcd; /* gcd of the ops' sample degrees (0: no op) */
    int no_sample;      /* the first op without a sample dim in its config, -1 none */
    int bad_device;     /* the first op with a device outside the machine, -1 none: valid
                           where range_known (ss_plan_view_bad_device) */
    int range_known;
    int cap_p;          /* stage_off's capacity */
    unsigned *lid_stamp; /* per device list id (ss_plan_devlist_id): the set that scanned it */
    unsigned char *lid_bad; /* its devices' range check, valid where lid_stamp is current */
    int cap_lid;
    unsigned stamp;     /* the current ss_plan_view_set */
} ss_plan_view;

/* A view of plans of graph g on machine m (borrowed: they must outlive
 * it). NULL on allocation failure. No plan is set yet (P = 0). */
ss_plan_view *ss_plan_view_new(const ss_graph *g, const ss_machine *m);
void ss_plan_view_free(ss_plan_view *v);

/* Analyse plan p (of v's graph): SS_OK, or SS_ERR_NOMEM / SS_ERR_INVALID
 * (a plan of another graph) with d set and the view unset (P = 0). */
ss_status ss_plan_view_set(ss_plan_view *v, const ss_plan *p, ss_diag *d);

/* p equals the plan last set (or changed) but for op `op`'s config and
 * the settings: bring the view up to date. op -1: only the settings
 * changed. Errors as ss_plan_view_set (the view then unset). */
ss_status ss_plan_view_change(ss_plan_view *v, const ss_plan *p, int op, ss_diag *d);

/* The first op of p (the view's plan) with a device outside the machine,
 * -1 none: scanned on the first call after a set (each distinct device
 * list once), then kept up to date by ss_plan_view_change. */
int ss_plan_view_bad_device(ss_plan_view *v, const ss_plan *p);

/* The sample dim of op o's first output in graph g (-1 none). */
int ss_plan_view_sample_dim(const ss_graph *g, int o);

#endif /* SS_PLAN_VIEW_H */
