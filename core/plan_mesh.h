/*
 * plan_mesh.h — device lists as mesh expressions: the compact form plan
 * files use for an operator's tile-to-device list.
 *
 * A mesh expression {offset, shape[k], strides[k]} (outermost axis first)
 * stands for the list of prod(shape) devices where entry t, written in
 * mixed radix over shape (row-major, t = (i_0 * shape_1 + i_1) * ... ),
 * runs on device offset + sum_j i_j * strides[j]. Strides may be 0 (tiles
 * that run one after another on one device: micro-batches) or negative.
 * Data parallelism over 1,024 devices with 192 micro-batches each is
 * {"offset": 0, "shape": [1024, 192], "strides": [1, 0]}: 60 bytes instead
 * of 196,608 numbers.
 */
#ifndef SS_PLAN_MESH_H
#define SS_PLAN_MESH_H

#include "simsearch.h"

#define SS_MESH_MAX_AXES 16

typedef struct ss_mesh {
    int64_t offset;
    int n_axes;
    int64_t shape[SS_MESH_MAX_AXES];
    int64_t strides[SS_MESH_MAX_AXES];
} ss_mesh;

/* The mesh expression of devices[0..n-1] (n >= 1) with the fewest axes this
 * greedy fit finds (inner axes first, each as long as it can be), or 0 when
 * the list is no mesh of at most SS_MESH_MAX_AXES axes (irregular). Axes
 * of length 1 are never produced. */
int ss_mesh_fit(const int *devices, int n, ss_mesh *out);

/* Number of entries of m (prod(shape); 1 for no axes), or -1 past max. */
int64_t ss_mesh_count(const ss_mesh *m, int64_t max);

/* Smallest and largest device of m. */
void ss_mesh_range(const ss_mesh *m, int64_t *lo, int64_t *hi);

/* Write m's list into devices (ss_mesh_count(m) entries; the caller checked
 * the range fits an int). */
void ss_mesh_expand(const ss_mesh *m, int *devices);

#endif
