/*
 * swarm.h — an event simulation of collaborative data-parallel training
 * over internet peers (DeDLOC / hivemind; it lives in search/, not
 * simulator/, because it runs search/averaging.h's LP every round and
 * layers only include downwards): peers with their own devices and home
 * links compute micro-batches, the collaboration counts samples until
 * a target batch, then the peers average their gradients (search/averaging.h
 * splits the work) and each applies the optimizer step. Churn (peers leaving
 * and rejoining) comes from a seeded process. ss_swarm_sweep runs the what-if
 * over peer count, bandwidth and target batch.
 *
 * The round, as hivemind's CollaborativeOptimizer runs it:
 *  - the collaboration's counter is the sum of the samples every online
 *    peer has accumulated and not yet averaged; when a micro-batch brings it
 *    to the target batch (time T), the round is called;
 *  - every online peer finishing its in-flight micro-batch by T + the join
 *    window joins the round (with that micro-batch); the others miss it and
 *    keep computing, their samples kept for the next round; a round has
 *    at least two peers and one accepting connections (the next peers to
 *    finish join until it has);
 *  - the averaging starts when the last joining peer has joined, takes the
 *    method's time for the participants, then each applies the optimizer
 *    update (its device's update time; the slowest paces the round), and
 *    the participants start their next micro-batch;
 *  - a peer that leaves loses the samples it accumulated and its in-flight
 *    micro-batch (hivemind: its local gradient accumulators leave with it);
 *    one that leaves during the averaging aborts it: the remaining
 *    participants redo it without it (the time spent is the churn's cost);
 *  - a peer that (re)joins first downloads the model and optimizer state
 *    (state_bytes over its downlink, one latency), then computes.
 * Strategy local-SGD:H (DiLoCo): each peer applies a local optimizer step
 * after every micro-batch and the swarm averages parameter deltas once per
 * H target batches; convergence per sample is out of scope.
 *
 * Invariant: the run is a deterministic function of its inputs and seed
 * (ties between events are broken by peer index); samples averaged + lost
 * + still accumulated at the end = samples computed.
 */
#ifndef SS_SIMULATOR_SWARM_H
#define SS_SIMULATOR_SWARM_H

#include "simsearch.h"
#include "search/averaging.h"

/* One peer as the swarm sees it. */
typedef struct ss_swarm_peer {
    char name[SS_NAME_MAX];
    int devtype;        /* index of its device type in the machine (-1: none) */
    double mb_s;        /* time of one micro-batch (forward + backward), > 0 */
    double update_s;    /* time of one optimizer update, >= 0 */
    ss_avg_peer link;   /* bandwidths, latency, accepts connections */
} ss_swarm_peer;

typedef struct ss_swarm_config {
    int64_t target_batch;     /* samples per optimizer step, >= 1 */
    int micro_batch;          /* samples per micro-batch, >= 1 */
    ss_avg_method averaging;
    double vector_bytes;      /* bytes each peer averages per round (gradient or delta) */
    double state_bytes;       /* model + optimizer state a joining peer downloads */
    double join_window_s;     /* how long after the target the round waits for peers */
    double duration_s;        /* simulated time, > 0 */
    int local_steps;          /* 1: per-step averaging; H > 1: local SGD, H target batches */
    double leave_per_h;       /* each online peer leaves at this rate (per hour), 0: never */
    double join_per_h;        /* each offline peer rejoins at this rate (per hour), 0: never */
    uint64_t seed;
    int max_events;           /* events recorded (joins, leaves, rounds); more are counted */
} ss_swarm_config;

typedef enum ss_swarm_event_kind {
    SS_SWARM_ROUND = 0, /* a round ended: samples averaged */
    SS_SWARM_LEAVE,
    SS_SWARM_JOIN,
    SS_SWARM_ABORT      /* a participant left during the averaging */
} ss_swarm_event_kind;
const char *ss_swarm_event_name(ss_swarm_event_kind k); /* "round", "leave", "join", "abort" */

typedef struct ss_swarm_event {
    double t;
    ss_swarm_event_kind kind;
    int peer;       /* -1 for rounds */
    double samples; /* rounds: averaged; leaves: lost */
    int participants;
    double avg_s;   /* rounds: averaging + update time */
} ss_swarm_event;

typedef struct ss_swarm_peer_stats {
    double samples;   /* averaged */
    double compute_s; /* micro-batches completed */
    double wait_s;    /* joined, waiting for the round to start */
    double avg_s;     /* averaging and optimizer updates */
    double sync_s;    /* downloading the state after a join */
    double online_s;  /* time online */
    double share;     /* mean averaging share over the rounds it joined */
    int rounds, missed;
} ss_swarm_peer_stats;

typedef struct ss_swarm_result {
    double samples_per_s;
    double step_time_s;   /* mean time between optimizer steps (rounds) */
    double avg_time_s;    /* mean averaging + update time of a round */
    double samples, lost_samples;
    int rounds, aborts, joins, leaves;
    int n_peers;
    ss_swarm_peer_stats *peers; /* n_peers */
    ss_swarm_event *events;
    int n_events, events_dropped;
} ss_swarm_result;

/* Default config: target 4096, micro-batch 8, LP, window 5 s, 3600 s, per
 * step, no churn, seed 1, 100,000 events; vector and state bytes 0. */
void ss_swarm_config_default(ss_swarm_config *c);

/* The peers of machine m (every device must be an internet peer) for model
 * g built with batch = micro_batch: each peer's micro-batch time from the
 * cost model (forward and backward of every kernel's full tile on its
 * device type, plus the type's per-micro-batch overhead) and its optimizer
 * update of n_params parameters. out: ss_machine_n_devices(m) entries.
 * Errors: SS_ERR_INVALID naming the first device that is not a peer. */
ss_status ss_swarm_peers_from_machine(const ss_graph *g, const ss_machine *m, ss_costmodel *cm,
                                      int64_t n_params, ss_swarm_peer *out, ss_diag *d);

/* Run the swarm of n peers under c into *r (caller's, freed with
 * ss_swarm_result_free). Errors: SS_ERR_INVALID (a bad config or peer,
 * naming it), SS_ERR_INFEASIBLE (the averaging method cannot serve the
 * swarm, e.g. a ring with too many client-only peers), SS_ERR_NOMEM. */
ss_status ss_swarm_run(const ss_swarm_peer *peers, int n, const ss_swarm_config *c,
                       ss_swarm_result *r, ss_diag *d);
void ss_swarm_result_free(ss_swarm_result *r);

/* What-if for swarms: one point of a sweep over the number of peers (the
 * first n_peers of the list), a factor on every peer's up and down
 * bandwidth, and the target batch. */
typedef struct ss_swarm_point {
    int n_peers;
    double bw_scale;
    int64_t target_batch;
    int feasible;          /* 0: the swarm cannot run (why says so), figures 0 */
    char why[SS_DIAG_MSG_MAX];
    double samples_per_s, step_time_s, avg_time_s, lost_samples;
    double compute_util;   /* mean over the peers of compute time / time online */
    int rounds, aborts;
    int peers_missing;     /* peers that missed at least one round */
} ss_swarm_point;

/* Run the swarm of c at every point of the cross product of counts
 * (n_counts peer counts, each 1..n), scales (n_scales bandwidth factors,
 * > 0) and targets (n_targets target batches, >= 1), nested in that order
 * (the target varies fastest), into out (n_counts * n_scales * n_targets
 * entries, caller's). A point whose swarm cannot run (SS_ERR_INFEASIBLE or
 * SS_ERR_INVALID from ss_swarm_run: no peer accepting connections among
 * the first k, a ring with too many client-only peers) is kept with
 * feasible = 0 and the reason. Same seed at every point. Errors:
 * SS_ERR_INVALID (an axis empty or out of range, naming it), SS_ERR_NOMEM;
 * out is then unspecified. */
ss_status ss_swarm_sweep(const ss_swarm_peer *peers, int n, const ss_swarm_config *c,
                         const int *counts, int n_counts, const double *scales, int n_scales,
                         const int64_t *targets, int n_targets, ss_swarm_point *out,
                         ss_diag *d);

#endif /* SS_SIMULATOR_SWARM_H */
