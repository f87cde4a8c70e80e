/*
 * machine_impl.h — the inside of ss_machine, shared by core/machine.c (the
 * object, routing, fingerprint), core/topology_io.c (the JSON loader and
 * writer) and profiler/discover.c (which builds a topology document and loads
 * it through the same path).
 *
 * Invariant: a machine handed to a user is complete and immutable except for
 * its route cache: node ids 0..n_devices-1 are the devices, then switches,
 * then NICs; every device can reach every other one over channels of nonzero
 * bandwidth (firewall rules aside); the fingerprint is computed once.
 */
#ifndef SS_MACHINE_IMPL_H
#define SS_MACHINE_IMPL_H

#include "simsearch.h"
#include <jansson.h>

/* SS_MACHINE_MAX_DEVICES, _NODES, _LINKS: include/simsearch/limits.h. */

/* Device types' collective_launch_us when not given (core/devtypes.c has
 * the source); written back and fingerprinted only when it differs. */
#define SS_COLL_LAUNCH_US_DEFAULT 6.0

/* Extra data of an internet peer (kept so that save -> load is exact). */
typedef struct ss_peer_info {
    int is_peer;
    double up_mbps, down_mbps, latency_ms;
    int link; /* its link to the internet switch */
} ss_peer_info;

/* A cached route: n >= 0 channels, or n < 0 when unreachable. */
typedef struct route_slot {
    uint64_t key; /* src * n_devices + dst, UINT64_MAX when empty */
    const int *ch;
    int n;
} route_slot;

typedef struct route_chunk {
    struct route_chunk *next;
    size_t used, cap;
    int data[];
} route_chunk;

/* A frontier entry: a node and its route key, packed into two words that
 * compare lexicographically as (forwards, latency in ns, hops, node id):
 * hi = fwd << 47 | lat >> 7, lo = (lat & 127) << 38 | hops << 19 | id.
 * Exact within the machine limits (machine.c checks them at compile time):
 * fwd < n_devices <= 2^16, lat <= (n_nodes - 1) * 1e10 ns < 2^52 (links'
 * latencies are at most 1e7 us), hops < n_nodes <= 2^18, id < 2^18. */
typedef struct ss_hent {
    uint64_t hi, lo;
} ss_hent;

/* A (partial) shortest-path tree from one source: per node the channel into
 * it and its place in the frontier heap (pos[v]: heap index, -1 reached but
 * not queued, -2 settled); the key of a queued node lives in its heap entry.
 * Restarting a tree bumps gen instead of clearing n_nodes entries. */
#define SS_MACHINE_TREES 4
typedef struct ss_sptree {
    int src;              /* -1: slot unused */
    unsigned long used;   /* LRU stamp */
    int hn;               /* frontier size */
    int settled;          /* nodes settled since the (re)start */
    unsigned gen;         /* nodes with stamp[v] != gen are unreached */
    unsigned *stamp;
    int *pred, *pos;
    ss_hent *heap;
} ss_sptree;

/* Default memory for complete trees (one int per node per source): past
 * it, sources go back to growing partial trees again. */
#define SS_MACHINE_TREE_BYTES ((size_t)64 << 20)

struct ss_machine {
    char name[SS_NAME_MAX];
    int n_types, n_hosts, n_devices, n_nodes, n_links;
    ss_device_type *types;
    ss_host *hosts;
    ss_device *devices;
    ss_netnode *nodes;
    ss_link *links;
    ss_peer_info *peers; /* n_devices entries */
    int n_peers;
    /* adjacency: channels leaving node u are adj_ch[adj_off[u] .. adj_off[u+1]),
     * with the node each one reaches (adj_to) and its latency in ns (adj_ns) */
    int *adj_off, *adj_ch, *adj_to;
    int64_t *adj_ns;
    uint64_t fingerprint;
    /* route cache (filled lazily, or for every pair at load for small machines) */
    route_slot *slots;
    size_t n_slots, used_slots;
    route_chunk *chunks;
    /* Shortest-path trees of the last few sources, kept between queries and
     * grown only until the asked destination is settled (resumable). */
    ss_sptree trees[SS_MACHINE_TREES];
    unsigned long tick;
    /* A source whose tree is asked for again after it was evicted gets its
     * tree completed once and kept: done[src][v] is the channel into node v
     * (-1 for src and unreachable nodes). done and started have n_devices
     * entries (allocated on the first miss); done_bytes counts the kept trees. */
    int **done;
    unsigned char *started;
    size_t done_bytes, tree_budget; /* tree_budget: SS_MACHINE_TREE_BYTES */
    int *rbuf; /* scratch: one route being built, 2 * n_nodes + 2 ints */
    /* Route classes (core/routeclass.h): set when the machine is made of
     * identical hosts; then direct routes are translated from the trees of
     * host 0's devices and the trees above stay unused. */
    struct ss_routeclass *rc;
};

/* Allocate an empty machine with room for the given counts (arrays zeroed
 * but for the types' collective_launch_us, SS_COLL_LAUNCH_US_DEFAULT;
 * counts set). NULL on allocation failure. */
ss_machine *ss_machine_alloc(int n_types, int n_hosts, int n_devices, int n_nodes, int n_links);

/* Finish a machine whose arrays are filled: derive local ranks and peer
 * bandwidths, build adjacency, check every device can reach every other one,
 * compute the fingerprint and, for small machines, all routes. `file` names
 * the source in messages. On error the machine is left for the caller to
 * free. */
ss_status ss_machine_finish(ss_machine *m, const char *file, ss_diag *d);

/* Load from a parsed document (explicit or compact form; nodes > 0 overrides
 * a compact node count). root is borrowed. */
ss_status ss_machine_from_json(const json_t *root, const char *file, int nodes,
                               ss_machine **out, ss_diag *d);

#endif
