/*
 * routeclass.h — route classes: the routes of a machine made of identical
 * hosts, computed once per position in a host and translated to every
 * other host, and the device permutations that are route automorphisms.
 *
 * The group. A machine has route classes when every host holds the same
 * template: the same number of nodes, the k-th node of each host (in id
 * order) of the same kind (and device type), the host's links (both ends in
 * it, or one end in it and the other outside every host) matching the
 * template's link for link (ends by position or the same outside node,
 * every figure equal), no link between two hosts and no internet peer. Any
 * permutation pi of the hosts then maps the network onto itself (node k of
 * host h to node k of host pi(h), outside nodes fixed). Routes are
 * equivariant under every such map, route(phi a, phi b) = phi(route(a, b)),
 * provided the routing rule's last tie-break (the lowest predecessor id)
 * picks the same predecessor in every image: checked on the complete
 * shortest-path tree of one representative source per position (host 0's
 * devices), for every node with several optimal predecessors (two in one
 * host keep their order in every host; a host node and an outside node do
 * when that position lies on one side of the outside node in every host;
 * two different hosts' nodes are refused). With the check passed, the
 * trees of the representatives give every route: route(a, b) =
 * tau(route(rep, tau b)) for tau the swap of host 0 and a's host.
 *
 * Invariant: a machine's route classes, when present, give the same route
 * as the shortest-path search for every pair (tests/core/test_machine.c
 * checks them against an independent reference router).
 */
#ifndef SS_ROUTECLASS_H
#define SS_ROUTECLASS_H

#include "simsearch.h"

typedef struct ss_routeclass ss_routeclass;

/* The route classes of machine m (finished up to its adjacency), or NULL
 * in *out when m has none (hosts differ, links between hosts, peers, one
 * host, or a tie that a host permutation could flip). SS_ERR_NOMEM on
 * allocation failure. */
ss_status ss_routeclass_build(const ss_machine *m, ss_routeclass **out);
void ss_routeclass_free(ss_routeclass *rc);

/* The route src -> dst (devices, src != dst) into buf (n_nodes ints):
 * its length, or -1 when dst is unreachable. */
int ss_routeclass_route(const ss_machine *m, const ss_routeclass *rc, int src, int dst, int *buf);

/* Is the device permutation sig (n_devices entries) the restriction of a
 * route automorphism of m (a permutation of its identical hosts, outside
 * nodes fixed)? 1 with chmap[c] (2 * n_links entries) the image of every
 * channel c; 0 (chmap untouched) when m has no route classes or sig is no
 * such permutation (it moves a device to another position in a host,
 * splits a host or moves part of one). Then route(sig a, sig b) =
 * chmap(route(a, b)) for every pair, channel figures equal. */
int ss_routeclass_automorphism(const ss_machine *m, const int *sig, int *chmap);

/* Positions per host (representative sources kept), 0 without classes. */
int ss_routeclass_positions(const ss_machine *m);

#endif /* SS_ROUTECLASS_H */
