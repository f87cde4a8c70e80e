/*
 * mesh.h — device meshes and the operator shardings on them (level 2 of the
 * planner, DESIGN.md "Device-group factorization + ILP").
 *
 * A mesh lays n devices out as an array of up to SS_DMESH_MAX_AXES axes,
 * axis 0 outermost: the device at coordinate (c_0, ..., c_k-1) is
 * base + sum_a c_a * stride[a], the innermost axis of stride 1. Devices are
 * numbered node by node (the compact topologies: device = node *
 * per_node + local rank), so the inner axes lie inside a node and the outer
 * ones cross nodes. 16 devices give 16, 2x8, 8x2, 4x4, 2x2x4, ...: every
 * ordered factorization into factors >= 2, since the order says which axis
 * is inside the node. Pruned to the meshes that fit the node structure:
 * each product of the innermost axes either divides the devices per node or
 * is a multiple of it (no axis straddles a node boundary partially).
 *
 * A sharding of an operator on a mesh gives each axis one role: split
 * output dim j (a dim the operator table, ss_op_split_mask, allows to be
 * split), split the contraction dim (the tile holds a partial sum), or
 * replicate. Axes that split the same dim multiply its degree (in axis
 * order, outer axes the more significant digit). Valid when every degree
 * divides its extent — for the sample dim, degree times the micro-batch
 * count, since each device runs its micro-batches as tiles along the sample
 * dim (plan-format.md's micro-batch rule) — and the contraction degree
 * divides the contraction. An operator without a splittable sample dim runs
 * whole once per iteration (mb_eff 1).
 */
#ifndef SS_SEARCH_MESH_H
#define SS_SEARCH_MESH_H

#include "simsearch.h"

#define SS_DMESH_MAX_AXES 3

typedef struct ss_dmesh {
    int n_axes;                     /* 0: one device */
    int size[SS_DMESH_MAX_AXES];    /* >= 2 each */
    int stride[SS_DMESH_MAX_AXES];  /* stride[n_axes - 1] = 1 */
    int n;                          /* product of sizes */
} ss_dmesh;

/* The meshes of n devices with at most max_axes axes (1..SS_DMESH_MAX_AXES)
 * that fit nodes of per_node devices (the rule above; per_node <= 1: no
 * pruning), in a fixed order (fewer axes first, then lexicographic sizes).
 * Writes up to cap into out and returns how many there are. */
int ss_dmesh_enumerate(int n, int per_node, int max_axes, ss_dmesh *out, int cap);

/* "2x8" (outer first; "1" for one device) into buf. */
void ss_dmesh_name(const ss_dmesh *m, char *buf, size_t cap);

/* Devices of the group along the axes set in axis_mask through the
 * origin + base: the product of those axes' sizes entries into devs (in
 * mixed radix, outer axis the more significant digit). Returns the count. */
int ss_dmesh_group(const ss_dmesh *m, int base, unsigned axis_mask, int *devs);

/* Role of an axis in a sharding: >= 0 splits that output dim. */
#define SS_AXIS_RED (-1)
#define SS_AXIS_REP (-2)

typedef struct ss_sharding {
    signed char axis[SS_DMESH_MAX_AXES];
} ss_sharding;

/* The valid shardings of op on mesh m with mb micro-batches (the rules
 * above), in a fixed order; up to cap into out, returns how many. A mesh of
 * no axes has one sharding (the whole op). */
int ss_sharding_enumerate(const ss_graph *g, const ss_op *op, const ss_dmesh *m, int mb,
                          ss_sharding *out, int cap);

/* Micro-batch tiles per device of op under sharding s: mb when its sample
 * dim takes the micro-batches, else 1. */
int ss_sharding_mb(const ss_graph *g, const ss_op *op, const ss_dmesh *m, const ss_sharding *s,
                   int mb);

/* The parallel config of op under sharding s on mesh m at device base
 * `base`, stage `stage`, with mb micro-batches: degrees, contraction and
 * replica degree as the axes say, the sample dim's degree times mb_eff,
 * devices (c->ntiles entries written into devs, which must hold
 * m->n * mb entries) with the tile of micro-batch u at mesh coordinate c
 * on device base + c . stride. */
void ss_sharding_config(const ss_graph *g, const ss_op *op, const ss_dmesh *m,
                        const ss_sharding *s, int mb, int base, int stage, ss_pconfig *c,
                        int *devs);

/* Index, in the config ss_sharding_config builds, of the tile at mesh
 * coordinate coord[] (micro-batch 0). */
int ss_sharding_tile_index(const ss_graph *g, const ss_op *op, const ss_dmesh *m,
                           const ss_sharding *s, int mb, const int *coord);

/* Tile 0's neighbour: the tile of op at mesh coordinate coord[]
 * (micro-batch 0) under sharding s with mb micro-batches. */
void ss_sharding_tile(const ss_graph *g, const ss_op *op, const ss_dmesh *m,
                      const ss_sharding *s, int mb, const int *coord, ss_tile *t);

#endif /* SS_SEARCH_MESH_H */
