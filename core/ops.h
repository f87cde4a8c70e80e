/*
 * ops.h — internal interface between the graph container (graph.c) and the
 * operator semantics (ops.c: shape inference, split masks, contraction;
 * ops_region.c: regions and work).
 *
 * Shape inference is a pure function of the operator type, its attributes and
 * the input tensors: it fills the expected outputs and the expected weights
 * (shape, kinds, dtype, name suffix) and touches no graph state. graph.c uses
 * it both when adding an op and when re-validating a whole graph, so the two
 * can never disagree.
 */
#ifndef SS_CORE_OPS_H
#define SS_CORE_OPS_H

#include "simsearch.h" /* SS_MAX_ELEMENTS: simsearch/limits.h */

/* What an op of a given type and attrs produces from given inputs. Tensor
 * fields filled: ndim, shape, kind, dtype; for weights also `name`, holding
 * only the suffix ("weight", "bias", "wq", "gamma" ...). id/producer unset. */
typedef struct ss_op_shape {
    int n_out;
    ss_tensor out[SS_MAX_OUTPUTS];
    int n_w;
    ss_tensor w[SS_MAX_WEIGHTS];
} ss_op_shape;

/* Infer outputs and own weights of an op named `name` (for messages) from its
 * inputs (tensor ids in g). Checks operand count, input shapes/dtypes and
 * attribute ranges, rejects dims <= 0 and tensors of more than 2^48
 * elements. Returns SS_OK or SS_ERR_INVALID with a message naming the op. */
ss_status ss_op_infer(const ss_graph *g, const char *name, ss_op_type type,
                      const ss_op_attrs *a, int n_in, const int *inputs, ss_op_shape *out,
                      ss_diag *d);

/* Normalise an axis (negative counts from the end) for ndim dims; -1 if out
 * of range. */
int ss_op_axis(int axis, int ndim);

/* Reshape dim groups: minimal runs of input dims and output dims with equal
 * products. Group i covers input dims [in_lo[i], in_hi[i]) and output dims
 * [out_lo[i], out_hi[i]). Returns the group count (>= 1), or -1 if the
 * element counts differ. */
typedef struct ss_reshape_groups {
    int n;
    int in_lo[SS_MAX_DIMS], in_hi[SS_MAX_DIMS];
    int out_lo[SS_MAX_DIMS], out_hi[SS_MAX_DIMS];
} ss_reshape_groups;
int ss_reshape_group(int in_ndim, const int64_t *in_shape, int out_ndim,
                     const int64_t *out_shape, ss_reshape_groups *gr);

#endif
