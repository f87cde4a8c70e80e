/*
 * segments.h — the graph's repeated blocks (a transformer's layers), found
 * once for everyone who needs them: the Megatron plan generator
 * (core/plan_gen.c: stages cut at layer boundaries) and level 2 of the LLM
 * planner (search/level2.c: one ILP per distinct block).
 *
 * The non-input ops in graph order are cut into SEGMENTS after every op at
 * which at most one activation is live (produced at or before it, read
 * after it); a segment's signature hashes its ops' ss_op_signature in
 * order. The LAYERS are the longest run of >= 2 consecutive copies of a
 * block of k <= 8 segments with equal signatures and op counts (longest by
 * segments covered; ties: the smallest k, then the earliest start).
 * Invariant: a pure function of the graph.
 */
#ifndef SS_CORE_SEGMENTS_H
#define SS_CORE_SEGMENTS_H

#include "simsearch.h"

#include <stdint.h>

typedef struct ss_segments {
    int m;          /* non-input ops */
    int n;          /* segments (0 when m = 0) */
    int *ord;       /* [m] the non-input ops in graph order */
    int *pos;       /* [ops] op -> its index in ord, -1 for graph inputs */
    int *end;       /* [n] a segment's last index in ord */
    int *count;     /* [n] its ops */
    uint64_t *sig;  /* [n] its signature */
    double *flops;  /* [n] forward FLOPs of the whole graph up to its end (cumulative) */
    int s0, k, reps; /* the layers: reps copies of k segments from segment s0 (reps 0: none) */
} ss_segments;

/* Segments and layers of g into *sg (arrays owned by sg; free with
 * ss_segments_free). SS_ERR_NOMEM (d set; *sg empty, free is a no-op). */
ss_status ss_segments_find(const ss_graph *g, ss_segments *sg, ss_diag *d);

/* Free what ss_segments_find allocated; an empty (zeroed) sg is a no-op. */
void ss_segments_free(ss_segments *sg);

#endif /* SS_CORE_SEGMENTS_H */
