/*
 * averaging.h — who reduces which part of the gradient vector in one
 * averaging round of a swarm of internet peers (hivemind's butterfly
 * all-reduce with load balancing, DeDLOC section 3.2), and how long the
 * round's exchange takes.
 *
 * Model. n peers each hold a gradient vector of V bytes. Peer i reduces
 * the fraction w_i of it (shares sum to one; a client-only peer, which
 * refuses incoming connections, has w_i = 0). Full duplex per peer:
 *   sent_i = received_i = V (1 - w_i) + (n - 1) w_i V = V + (n - 2) w_i V
 * (its vector minus its own part out, the others' copies of its part in;
 * the averaged part back to n - 1 peers, the rest of the average in), and
 * peer i is done after max(sent_i / up_i, received_i / down_i) + L_i, where
 * L_i = 2 (lat_i + max_{j != i} lat_j) is one latency to the farthest
 * partner per phase (scatter, gather). The round's time is the largest
 * peer's. The exchange is streamed in chunks, so the two phases overlap
 * and a peer's time is its bytes over its bandwidth.
 *   LP:    minimise xi s.t. V + (n-2) w_i V <= (xi - L_i) min(up_i, down_i)
 *          for every peer (one row per direction), sum w_i = 1, w_i >= 0,
 *          w_i = 0 for client-only peers; solved by COIN-OR CLP.
 *   EQUAL: w_i = 1 / (number of peers accepting connections).
 *   RING:  a ring all-reduce: every peer sends and receives 2 (n-1)/n V,
 *          the slowest peer's bandwidth paces every step, 2 (n-1) steps
 *          each pay the largest adjacent pair's latency; a ring needs a
 *          peer that accepts connections between any two client-only ones
 *          (clients <= accepting peers), shares 1/n.
 * With equal bandwidths b, no latency and no client-only peer, LP and
 * EQUAL give the butterfly optimum 2 (n-1) V / (n b).
 *
 * Invariant: the shares returned are feasible (sum to one within 1e-9,
 * client-only peers 0) and the time returned is ss_averaging_time of those
 * shares (RING: its closed form).
 */
#ifndef SS_SEARCH_AVERAGING_H
#define SS_SEARCH_AVERAGING_H

#include "simsearch.h"

typedef enum ss_avg_method { SS_AVG_LP = 0, SS_AVG_EQUAL, SS_AVG_RING } ss_avg_method;

/* "lp", "equal", "ring"; ss_avg_method_parse: 0, or -1 for another name. */
const char *ss_avg_method_name(ss_avg_method m);
int ss_avg_method_parse(const char *s, ss_avg_method *out);

typedef struct ss_avg_peer {
    double up_Bps, down_Bps; /* bytes per second, > 0 */
    double latency_s;        /* one way to the internet, >= 0 */
    int accepts;             /* 1: may reduce a part; 0: client-only */
} ss_avg_peer;

/* The time of a round with shares w (n entries) for a V-byte vector: the
 * largest peer's max(sent / up, received / down) + L_i (the model above).
 * 0 for n <= 1. */
double ss_averaging_time(const ss_avg_peer *p, int n, double vector_bytes, const double *w);

/* The shares (share, n entries, caller's) and the round's time (*time_s)
 * of method m for n peers and a V-byte vector. n == 1: share 1 and time 0
 * (nothing to exchange). Errors: SS_ERR_INVALID (n < 1, V < 0, a bandwidth
 * <= 0, a negative latency), SS_ERR_INFEASIBLE (n >= 2 and no peer accepts
 * connections; RING: more client-only peers than accepting ones; or CLP
 * did not prove an optimum); share and *time_s are then unchanged. */
ss_status ss_averaging_solve(ss_avg_method m, const ss_avg_peer *p, int n, double vector_bytes,
                             double *share, double *time_s, ss_diag *d);

#endif /* SS_SEARCH_AVERAGING_H */
