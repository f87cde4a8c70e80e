/*
 * collective.h — alpha-beta costs of collectives, NCCL style, and the network
 * channels each one occupies.
 *
 * Units: bytes, GB/s (1e9 bytes/s, so bytes / (gbps * 1e3) is microseconds),
 * microseconds. S is the collective's buffer size per device: the vector
 * being all-reduced, the full (gathered) output of an all-gather, the full
 * input of a reduce-scatter, the whole send buffer of an all-to-all.
 *
 * Algorithms (n devices, B bandwidth, lat per-step latency, L launch):
 *   ring all-reduce        L + 2(n-1) lat + 2(n-1)/n * S/B
 *   ring reduce-scatter,   L +  (n-1) lat +  (n-1)/n * S/B
 *   ring all-gather
 *   all-to-all (pairwise)  L +  (n-1) lat +  (n-1)/n * S/B
 *   tree all-reduce        L + 2 ceil(log2 n) lat + 2 S/B   (double binary tree,
 *                          NCCL's choice at small sizes / many nodes)
 *   hierarchical all-reduce (groups spanning N nodes with d members each):
 *                          intra-node reduce-scatter of S, inter-node ring
 *                          all-reduce of S/d (d rings, one per local rank, in
 *                          parallel), intra-node all-gather:
 *                          L + 2[(d-1) lat_i + (d-1)/d S/B_i]
 *                            + 2(N-1) lat_e + 2(N-1)/N (S/d)/B_e
 * The machine-level call picks the fastest applicable algorithm, as NCCL's
 * tuner does (ties: the lower ss_coll_algo value).
 *
 * Ring order: devices sorted by (host, local rank, id). The ring's B is the
 * bottleneck over the channels its hops use, where a channel used by k hops
 * counts bw/k (hops sharing a NIC or a switch uplink share it); lat is the
 * largest route latency of one hop (the slowest step paces the ring). Tree
 * and hierarchical phases use the same rule over their own hops; all-to-all
 * uses the per-channel load of every pair's S/n bytes: B = (n-1)/n * S /
 * max_c(load_c / bw_c), a fluid model of the bisection.
 *
 * Channels occupied (sorted, unique, as 2*link + direction):
 *   ring all-reduce        routes between ring neighbours, both directions
 *   reduce-scatter/gather  routes i -> i+1 around the ring
 *   all-to-all            every ordered pair's route
 *   tree                   parent <-> child routes of both trees
 *   hierarchical           intra-node ring routes and inter-node ring routes,
 *                          both directions
 */
#ifndef SS_COLLECTIVE_H
#define SS_COLLECTIVE_H

#include "simsearch.h"

typedef enum ss_coll_kind {
    SS_COLL_ALLREDUCE = 0,
    SS_COLL_REDUCE_SCATTER,
    SS_COLL_ALLGATHER,
    SS_COLL_ALLTOALL,
    SS_COLL_KIND_COUNT
} ss_coll_kind;

typedef enum ss_coll_algo {
    SS_COLL_RING = 0,
    SS_COLL_TREE,
    SS_COLL_HIER,
    SS_COLL_PAIRWISE,  /* all-to-all */
    SS_COLL_ALGO_COUNT
} ss_coll_algo;

const char *ss_coll_kind_name(ss_coll_kind k);  /* "all-reduce", "reduce-scatter", ... */
const char *ss_coll_algo_name(ss_coll_algo a);  /* "ring", "tree", "hierarchical", "pairwise" */

/* Lower-level formulas with explicit numbers (see the table above). n >= 1;
 * n == 1 costs 0 (nothing to exchange, no launch). gbps > 0. */
double ss_coll_ring_us(ss_coll_kind kind, int n, double bytes, double gbps, double lat_us,
                       double launch_us);
double ss_coll_tree_us(int n, double bytes, double gbps, double lat_us, double launch_us);
double ss_coll_hier_us(int nodes, int per_node, double bytes, double intra_gbps,
                       double intra_lat_us, double inter_gbps, double inter_lat_us,
                       double launch_us);

/* Point-to-point transfer over a route (cut-through): latency summed over
 * the hops plus bytes over the bottleneck bandwidth. 0 bytes costs 0 (no
 * message is sent). */
double ss_p2p_us(double bytes, double gbps, double lat_us);

/* Bus-bandwidth efficiency (NCCL's busbw falls short of the line rate, the
 * more so for small messages) is a property of each link (ss_link.coll_eff,
 * coll_half_bytes, from the topology): a phase's bottleneck is the minimum
 * over its channels of gbps * eff_link(S) / load, with eff_link(S) =
 * coll_eff * S / (S + coll_half_bytes) for a collective of S bytes per device
 * (coll_eff 0 reads as 1, coll_half_bytes 0 as no size dependence: the
 * ideal alpha-beta model). Each phase of a hierarchical all-reduce thus uses
 * its own fabric's curve. */
typedef struct ss_coll_config {
    double launch_us;   /* per-call overhead (NCCL kernel launch + setup), e.g. 6 */
    unsigned algos;     /* bit (1u << ss_coll_algo) allowed; 0 = all */
} ss_coll_config;

/* eff_link(S) of link l (1 for l NULL). */
double ss_coll_link_eff(const ss_link *l, double bytes);

/* Result of a machine-level costing. Zero-initialise; reuse across calls
 * (arrays grow, never shrink); free with ss_coll_result_clear. */
typedef struct ss_coll_result {
    double time_us;                         /* of the chosen algorithm */
    ss_coll_algo algo;
    double gbps, lat_us;                    /* B and per-step latency it used
                                               (hierarchical: inter-node) */
    double algo_us[SS_COLL_ALGO_COUNT];     /* each candidate; -1 if not applicable */
    int n_channels;
    int *channels;                          /* sorted, unique */
    /* private scratch */
    int cap_channels;
    int *ring; int cap_ring;
    int *load; int cap_load;
    int *best; int n_best, cap_best;        /* channels of the best so far */
} ss_coll_result;

/* Cost kind over devices[0..n) (distinct, valid ids) of machine m, S = bytes
 * per device, choosing the fastest allowed algorithm. cfg NULL: launch 6 us,
 * all algorithms. Errors: SS_ERR_INVALID (bad or repeated device, n < 1,
 * unreachable pair, negative bytes, no allowed algorithm applies), NOMEM. On
 * error *out keeps its arrays but its fields are unspecified. */
ss_status ss_coll_cost(const ss_machine *m, ss_coll_kind kind, const int *devices, int n,
                       double bytes, const ss_coll_config *cfg, ss_coll_result *out, ss_diag *d);

void ss_coll_result_clear(ss_coll_result *r);

#endif /* SS_COLLECTIVE_H */
