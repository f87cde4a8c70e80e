/*
 * simsearch/machine.h — the machine model: devices, nodes, links, topology files
 * (core/machine.c, core/topology_io.c).
 *
 * Part of the public C API. Users include <simsearch.h>, which includes every
 * header under simsearch/ in dependency order; this one also compiles on its own.
 * The conventions are in simsearch.h's opening comment.
 */
#ifndef SIMSEARCH_MACHINE_H
#define SIMSEARCH_MACHINE_H

#include <stddef.h>
#include <stdint.h>

#include "simsearch/graph.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ */
/* Machine model (core/machine.c, core/topology_io.c)                  */
/* ------------------------------------------------------------------ */

typedef struct ss_device_type {
    char name[SS_NAME_MAX];
    int is_cpu;
    double peak_tflops[SS_DTYPE_COUNT]; /* dense peak per compute dtype (f16/bf16: tensor cores) */
    double mem_gbps;                    /* memory bandwidth GB/s (1e9) */
    double mem_gib;                     /* capacity GiB (2^30) */
    double launch_us;                   /* per-kernel launch overhead */
    /* Efficiency tables: piecewise linear in log10(x); below the first point
     * the first value, above the last the last. */
    int n_eff_flops; double eff_flops_x[SS_EFF_POINTS], eff_flops_y[SS_EFF_POINTS]; /* x = FLOPs per kernel */
    int n_eff_mem;   double eff_mem_x[SS_EFF_POINTS],   eff_mem_y[SS_EFF_POINTS];   /* x = bytes per kernel */
    /* Tensor-core alignment: factor on the compute efficiency of an f16/bf16
     * matrix product (linear, batch_matmul) whose operand rows (the inner
     * and output dims) are multiples of only 8, 4, or 2 or fewer bytes
     * instead of 16 ([0], [1], [2]); in (0, 1], 1 = no penalty (0, unset,
     * reads as 1). */
    double eff_align[3];
    /* Framework work per micro-batch on each device that no kernel stands
     * for (batch fetch and broadcast, loss bookkeeping, the schedule's
     * point-to-point setup), in us; added once per micro-batch and device
     * by the simulator (simulator/build_host.c). 0 to 1e6; 0 = none. */
    double mb_overhead_us;
    /* How far the host runs ahead of the GPU, in operators
     * (build_host.c): within a window of this many consecutive operators of
     * one pass of a micro-batch on a device, the window takes max(GPU time,
     * host time = kernels x launch_us), not the sum of per-operator maxima.
     * 1 = per operator (launch_us acts as a floor per operator); 0 = the
     * whole pass; 0 to 1e6. */
    int dispatch_window;
    /* Fixed cost of one collective call (NCCL kernel launch and setup) in
     * us, on top of its latency and bandwidth terms; 0 to 1e4, default 6
     * (docs/topology-format.md, "Device types"). A collective pays the
     * largest of its machine's device types (ss_machine_collective_launch_us). */
    double collective_launch_us;
    /* 1 when the device's own processor moves its messages (an MPI rank on
     * a CPU core over shared memory: no copy engine, no progress thread):
     * its transfers and collectives then occupy its compute stream as well
     * as the channels, so communication never hides under its compute
     * (simulator/build.c). Topology key "comm_blocks_compute"; default 0. */
    int comm_blocks_compute;
} ss_device_type;

/* Built-in specs: "K80", "P100-SXM2", "V100-SXM2-16GB", "V100-SXM2-32GB",
 * "A100-SXM4-40GB", "A100-SXM4-80GB", "H100-SXM", "H200-SXM", "T4",
 * "RTX3090", "CPU-core", "B200", "GB200", "MI300X" (core/devtypes.c has
 * the sources; peak_tflops[SS_F8] is set on H100, H200 and these three). */
int ss_devtype_builtin_count(void);
const ss_device_type *ss_devtype_builtin(int i);
const ss_device_type *ss_devtype_find_builtin(const char *name);
/* Efficiency from a table at x (helper for cost models). */
double ss_devtype_eff(int n, const double *xs, const double *ys, double x);

typedef enum ss_node_kind { SS_NODE_DEVICE = 0, SS_NODE_SWITCH, SS_NODE_NIC } ss_node_kind;

typedef struct ss_device {
    int id;               /* also its network node id */
    char name[SS_NAME_MAX];
    int type;             /* index into device types */
    int host;             /* index into hosts */
    int local_rank;       /* index within its host */
    /* internet peers (0 when not a peer) */
    double up_gbps, down_gbps; /* GB/s */
    int accepts_connections;   /* 1 unless a firewalled peer */
} ss_device;

typedef struct ss_host { char name[SS_NAME_MAX]; } ss_host;

/* Network node: devices come first (node id == device id), then switches and NICs. */
typedef struct ss_netnode {
    char name[SS_NAME_MAX];
    ss_node_kind kind;
    int host;              /* -1 if not in a host */
} ss_netnode;

/* A link between two nodes. Full duplex: channel 2*id carries a->b, 2*id+1
 * carries b->a (bandwidth per direction; gbps_ba may differ for asymmetric
 * links; 0 means that direction does not exist). */
typedef struct ss_link {
    int id;
    int a, b;                /* node ids */
    double gbps_ab, gbps_ba; /* GB/s per direction */
    double latency_us;
    int estimated;           /* bandwidth was estimated, not measured/specified */
    char kind[32];           /* "nvlink", "pcie", "infiniband", "ethernet", "internet", ... */
    /* Collectives' bus-bandwidth efficiency on this link (NCCL's busbw falls
     * short of the line rate, the more so for small messages): a collective
     * of S bytes per device sees gbps * coll_eff * S / (S + coll_half_bytes)
     * on it (simulator/collective.h). coll_eff in (0, 1] (0 reads as 1),
     * coll_half_bytes >= 0 (0: no size dependence); 1 and 0 = the ideal
     * alpha-beta model. Point-to-point transfers are not affected. Topology
     * keys "coll_eff" / "coll_half_bytes" (docs/topology-format.md). */
    double coll_eff, coll_half_bytes;
} ss_link;

typedef struct ss_machine ss_machine;

ss_status ss_machine_load(const char *path, ss_machine **out, ss_diag *d);
ss_status ss_machine_load_string(const char *json, const char *label, ss_machine **out,
                                 ss_diag *d);
/* Like ss_machine_load but overrides a compact topology's node count
 * (nodes > 0); an explicit topology with nodes > 0 is an error. */
ss_status ss_machine_load_nodes(const char *path, int nodes, ss_machine **out, ss_diag *d);
ss_status ss_machine_save(const ss_machine *m, const char *path, ss_diag *d); /* explicit form */
ss_status ss_machine_to_string(const ss_machine *m, char **out, ss_diag *d);
void ss_machine_free(ss_machine *m);

const char *ss_machine_name(const ss_machine *m);
int ss_machine_n_devices(const ss_machine *m);
int ss_machine_n_hosts(const ss_machine *m);
int ss_machine_n_types(const ss_machine *m);
int ss_machine_n_nodes(const ss_machine *m);
int ss_machine_n_links(const ss_machine *m);
const ss_device *ss_machine_device(const ss_machine *m, int i);
const ss_device_type *ss_machine_type(const ss_machine *m, int i);
const ss_host *ss_machine_host(const ss_machine *m, int i);
const ss_netnode *ss_machine_node(const ss_machine *m, int i);
const ss_link *ss_machine_link(const ss_machine *m, int i);
uint64_t ss_machine_fingerprint(const ss_machine *m);
/* Fixed cost of one collective call on m, in us: the largest
 * collective_launch_us of the devices' types. */
double ss_machine_collective_launch_us(const ss_machine *m);

/* Route from device src to device dst: the channels (2*link + direction)
 * along the path, in order. *n = 0 for src == dst. Returns SS_ERR_INVALID if
 * unreachable (e.g. two peers that both refuse connections and no relay).
 * Routes are precomputed (shortest by latency, then hops); pointer borrowed. */
ss_status ss_machine_route(const ss_machine *m, int src, int dst, const int **channels, int *n);
/* Bandwidth (GB/s) of a channel and its latency (us). */
double ss_machine_channel_gbps(const ss_machine *m, int channel);
double ss_machine_channel_latency_us(const ss_machine *m, int channel);
/* Bottleneck bandwidth and summed latency of the route src->dst. */
double ss_machine_path_gbps(const ss_machine *m, int src, int dst);
double ss_machine_path_latency_us(const ss_machine *m, int src, int dst);

/* Build a topology of this host with hwloc (profiler/discover.c). */
ss_status ss_machine_discover(ss_machine **out, ss_diag *d);
/* Measured figures of a core-to-core transfer over shared memory (link probes). */
typedef struct ss_link_figures { double gbps, latency_us; } ss_link_figures;
/* ss_machine_discover with the core links set from measured core-to-core
 * figures (each of the two hops core - NUMA node - core gets the bandwidth
 * and half the latency), marked "estimated": false. shm NULL: the estimates. */
ss_status ss_machine_discover_measured(const ss_link_figures *shm, ss_machine **out, ss_diag *d);

#ifdef __cplusplus
}
#endif
#endif /* SIMSEARCH_MACHINE_H */
