/*
 * simsearch/ops.h — operator semantics: shape inference, FLOPs, per-op rules (core/ops.c).
 *
 * Part of the public C API. Users include <simsearch.h>, which includes every
 * header under simsearch/ in dependency order; this one also compiles on its own.
 * The conventions are in simsearch.h's opening comment.
 */
#ifndef SIMSEARCH_OPS_H
#define SIMSEARCH_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "simsearch/graph.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ */
/* Operator semantics (core/ops.c)                                     */
/* ------------------------------------------------------------------ */

typedef struct ss_range { int64_t lo, hi; } ss_range; /* half-open [lo, hi) */

/* A region of a tensor: one range per dim. */
typedef struct ss_region {
    int ndim;
    ss_range r[SS_MAX_DIMS];
} ss_region;

/* A tile of an op's work: a region of output 0's index space plus a range of
 * the contraction dim (the whole extent when the op has none or it is not
 * split). Other outputs of multi-output ops follow ss_op_output_region. */
typedef struct ss_tile {
    ss_region out;
    ss_range red;
} ss_tile;

/* The whole op as one tile. */
void ss_op_full_tile(const ss_graph *g, const ss_op *op, ss_tile *t);

/* Output dims of op (by index into output 0) that may be split: bit i set if
 * dim i may be split. Kinds come from the output tensor's kind[]. */
unsigned ss_op_split_mask(const ss_graph *g, const ss_op *op);

/* Extent of the contraction dim whose split yields partial sums, or 0 if the
 * op has none. */
int64_t ss_op_contraction(const ss_graph *g, const ss_op *op);

/* THE region function: for tile t of op, the region of operand `operand`
 * (inputs then weights) that the tile needs. Drives communication volume,
 * validity of splits and runtime slicing. */
void ss_op_input_region(const ss_graph *g, const ss_op *op, const ss_tile *t, int operand,
                        ss_region *out);
/* Region of output `idx` that tile t produces (idx 0 is t->out). */
void ss_op_output_region(const ss_graph *g, const ss_op *op, const ss_tile *t, int idx,
                         ss_region *out);

/* Work of a tile. FLOPs count a multiply-add as 2; bytes are the memory
 * traffic of a reasonable kernel (read operand regions, write outputs). */
typedef struct ss_work {
    double fwd_flops, bwd_flops;  /* bwd = grad wrt inputs + grad wrt weights */
    double fwd_bytes, bwd_bytes;
    double saved_bytes;           /* activations kept from forward for backward */
} ss_work;
void ss_op_tile_work(const ss_graph *g, const ss_op *op, const ss_tile *t, ss_work *w);

/* Whether op runs a kernel: 0 for graph inputs, reshapes (views) and splits
 * or transposes with attrs.view set (their consumers read them in place),
 * and for an out-of-range type. */
int ss_op_has_kernel(const ss_op *op);

int64_t ss_region_volume(const ss_region *r);
/* Intersection of a and b into out; returns its volume (0 if empty). */
int64_t ss_region_intersect(const ss_region *a, const ss_region *b, ss_region *out);

#ifdef __cplusplus
}
#endif
#endif /* SIMSEARCH_OPS_H */
