/*
 * simsearch/graph.h — data types, dimension kinds and the graph IR (tensors, operators,
 * graphs).
 *
 * Part of the public C API. Users include <simsearch.h>, which includes every
 * header under simsearch/ in dependency order; this one also compiles on its own.
 * The conventions are in simsearch.h's opening comment.
 */
#ifndef SIMSEARCH_GRAPH_H
#define SIMSEARCH_GRAPH_H

#include <stddef.h>
#include <stdint.h>

#include "simsearch/base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ */
/* Data types and dimension kinds                                      */
/* ------------------------------------------------------------------ */

/* SS_F8 is FP8 E4M3 (1 byte), the dtype of Transformer Engine's FP8 GEMMs:
 * a linear with attrs.dtype = SS_F8 computes its products in FP8 (the cost
 * model uses the device's f8 peak); tensors stay in their own dtype. */
typedef enum ss_dtype { SS_F32 = 0, SS_F16, SS_BF16, SS_I32, SS_I64, SS_F8, SS_DTYPE_COUNT } ss_dtype;

size_t ss_dtype_size(ss_dtype t);
const char *ss_dtype_name(ss_dtype t);           /* "f32", "f16", "bf16", "i32", "i64", "f8" */
int ss_dtype_parse(const char *s, ss_dtype *out); /* 0 on success, -1 unknown */

/* FlexFlow's SOAP dims: how an output dim may be split. */
typedef enum ss_dim_kind {
    SS_DIM_SAMPLE = 0,  /* batch */
    SS_DIM_ATTRIBUTE,   /* spatial / sequence */
    SS_DIM_PARAMETER    /* channel / feature */
} ss_dim_kind;
const char *ss_dim_kind_name(ss_dim_kind k);     /* "sample", "attribute", "parameter" */

/* SS_MAX_DIMS, SS_MAX_INPUTS ... SS_NAME_MAX: simsearch/limits.h. */

/* ------------------------------------------------------------------ */
/* Graph IR                                                            */
/* ------------------------------------------------------------------ */

typedef struct ss_tensor {
    int id;
    char name[SS_NAME_MAX];
    int ndim;
    int64_t shape[SS_MAX_DIMS];
    ss_dim_kind kind[SS_MAX_DIMS];
    ss_dtype dtype;
    int producer;  /* op id that outputs it; -1 for weights */
    int is_weight; /* trainable parameter */
} ss_tensor;

typedef enum ss_op_type {
    SS_OP_INPUT = 0,     /* graph input: shape/dtype/kinds in attrs, no operands */
    SS_OP_LINEAR,        /* x[..., in] · W[in, out] (+ b[out]) -> [..., out]; contraction = in */
    SS_OP_BATCH_MATMUL,  /* A[b..., m, k] · B[b..., k, n] -> [b..., m, n] (trans_a/trans_b); contraction = k */
    SS_OP_CONV2D,        /* NCHW x, W[O, C/groups, kh, kw] (+ b[O]) -> [N, O, H', W']; contraction = C */
    SS_OP_POOL2D,        /* NCHW, max or avg */
    SS_OP_BATCHNORM,     /* NCHW, gamma/beta[C] */
    SS_OP_LAYERNORM,     /* [..., h], gamma/beta[h] over the last dim */
    SS_OP_UNARY,         /* relu, gelu, tanh, sigmoid */
    SS_OP_BINARY,        /* add, mul (same shapes) */
    SS_OP_SOFTMAX,       /* over attrs.axis */
    SS_OP_DROPOUT,
    SS_OP_EMBEDDING,     /* ids[...](i32/i64), W[vocab, dim] -> [..., dim]; contraction = vocab */
    SS_OP_CONCAT,        /* along attrs.axis */
    SS_OP_SPLIT,         /* along attrs.axis into attrs.split_sizes */
    SS_OP_RESHAPE,       /* to attrs.shape (flatten is a reshape) */
    SS_OP_TRANSPOSE,     /* attrs.perm */
    SS_OP_LSTM,          /* sequence: x[N,S,in] -> y[N,S,H] (or [N,H] if !return_sequences);
                            cell: x[N,in], h[N,H], c[N,H] -> h'[N,H], c'[N,H];
                            W[in+H, 4H], b[4H] */
    SS_OP_ATTENTION,     /* fused multi-head attention: q,k,v [N,S,E] -> [N,S,E];
                            Wq,Wk,Wv [E,E], Wo [E,E] (+ biases); contraction = heads */
    SS_OP_SOFTMAX_CE,    /* softmax cross-entropy: logits[..., V], labels[...] -> loss[...];
                            contraction = V */
    SS_OP_RMSNORM,       /* [..., h], gamma[h]: x / rms(x) * gamma over the last dim */
    SS_OP_ROTARY,        /* rotary position embedding of x[N, S, ..., D] in heads of attrs.dim
                            (even, divides D), position = index along dim 1 */
    SS_OP_MOE_DISPATCH,  /* x[N,S,h], probs[N,S,X] -> slots[X, C, h], C = ceil(N*S*topk*
                            capacity / X) (balanced routing, see core/ops_llm.c) */
    SS_OP_EXPERT_LINEAR, /* x[X, C, in] · W[X, in, out] (+ b[X, out]) -> [X, C, out], one GEMM
                            per expert; contraction = in */
    SS_OP_MOE_COMBINE,   /* slots[X, C, h], probs[N,S,X] -> y[N,S,h] (weighted sum of each
                            token's topk expert outputs) */
    SS_OP_FLASH_ATTENTION, /* fused (flash) attention core: q[b..., Sq, d], k[b..., Sk, d],
                            v[b..., Sk, dv] -> o[b..., Sq, dv] = softmax(q k^T / sqrt(d)) v,
                            no score matrix kept (o and the row log-sum-exp); causal: row r
                            sees keys <= r / (Sq / Sk) (core/ops_llm.c) */
    SS_OP_EXPAND,        /* x[..., 1, ...] -> [..., attrs.dim, ...]: dim attrs.axis (extent 1)
                            broadcast to attrs.dim copies (torch's expand; a view when
                            attrs.view), MLA's shared rotary key (core/ops_llm.c) */
    SS_OP_TYPE_COUNT
} ss_op_type;

const char *ss_op_type_name(ss_op_type t);            /* "linear", "conv2d", ... */
int ss_op_type_parse(const char *s, ss_op_type *out); /* 0 ok, -1 unknown */

typedef enum ss_pool_kind { SS_POOL_MAX = 0, SS_POOL_AVG } ss_pool_kind;
/* silu(x) = x * sigmoid(x) (SwiGLU's gate); relu2(x) = relu(x)^2 (squared ReLU). */
typedef enum ss_unary_kind { SS_UNARY_RELU = 0, SS_UNARY_GELU, SS_UNARY_TANH, SS_UNARY_SIGMOID,
                             SS_UNARY_SILU, SS_UNARY_RELU2 } ss_unary_kind;
typedef enum ss_binary_kind { SS_BINARY_ADD = 0, SS_BINARY_MUL } ss_binary_kind;
typedef enum ss_lstm_mode { SS_LSTM_SEQUENCE = 0, SS_LSTM_CELL } ss_lstm_mode;

/* Operator attributes: one flat struct; each op type reads its own fields
 * (listed per field). Unused fields must be zero (ss_op_attrs a = {0}). */
typedef struct ss_op_attrs {
    /* input */
    int ndim; int64_t shape[SS_MAX_DIMS]; ss_dim_kind kind[SS_MAX_DIMS]; ss_dtype dtype;
    /* reshape uses ndim/shape as the target shape */
    int64_t out_features;                  /* linear */
    int use_bias;                          /* linear, conv2d, attention */
    int trans_a, trans_b;                  /* batch_matmul */
    int64_t out_channels, groups;          /* conv2d (groups 0 means 1) */
    int64_t kernel[2], stride[2], pad[2];  /* conv2d, pool2d (stride 0 means 1) */
    ss_pool_kind pool;                     /* pool2d */
    ss_unary_kind unary;                   /* unary */
    ss_binary_kind binary;                 /* binary */
    int axis;                              /* softmax, concat, split, expand (negative counts
                                              from the end) */
    int n_split; int64_t split_sizes[SS_MAX_OUTPUTS]; /* split */
    int perm[SS_MAX_DIMS];                 /* transpose */
    double rate;                           /* dropout; flash_attention: dropout of the
                                              attention probabilities (0: none) */
    int64_t vocab, dim;                    /* embedding; dim: rotary's head size, expand's
                                              copies */
    ss_lstm_mode lstm_mode; int64_t hidden; int return_sequences; /* lstm */
    int64_t heads; int causal;             /* attention (embed dim from q); causal also
                                              flash_attention */
    int view;                              /* split, transpose, expand: a strided view that its
                                              consumers read in place, no kernel (the q/k/v
                                              of a batched GEMM, as Megatron-LM runs them) */
    int64_t topk;                          /* moe_dispatch, moe_combine, expert_linear: experts
                                              per token */
    double capacity;                       /* moe_dispatch, moe_combine: capacity factor
                                              (>= 1; 0 means 1) */
} ss_op_attrs;

typedef struct ss_op {
    int id;
    char name[SS_NAME_MAX];
    ss_op_type type;
    ss_op_attrs attrs;
    int n_in;  int inputs[SS_MAX_INPUTS];   /* activation tensor ids */
    int n_out; int outputs[SS_MAX_OUTPUTS]; /* tensor ids */
    int n_w;   int weights[SS_MAX_WEIGHTS]; /* weight tensor ids (may be shared by ops) */
} ss_op;

/* Operands of an op are indexed inputs first, then weights:
 * operand i < n_in is inputs[i], operand n_in + j is weights[j]. */

typedef enum ss_optimizer { SS_OPT_SGD = 0, SS_OPT_SGD_MOMENTUM, SS_OPT_ADAM } ss_optimizer;
typedef enum ss_precision { SS_PREC_FP32 = 0, SS_PREC_MIXED } ss_precision;
const char *ss_optimizer_name(ss_optimizer o);     /* "sgd", "sgd_momentum", "adam" */
int ss_optimizer_parse(const char *s, ss_optimizer *out);
const char *ss_precision_name(ss_precision p);     /* "fp32", "mixed" */
int ss_precision_parse(const char *s, ss_precision *out);

typedef struct ss_graph ss_graph;

/* New empty graph named `name` (copied). NULL on allocation failure. */
ss_graph *ss_graph_new(const char *name);
void ss_graph_free(ss_graph *g);

/* Description of one op to add. n_w < 0: the op creates its own weights
 * (named "<op>.weight", "<op>.bias", ...); n_w >= 0: use these existing
 * weight tensors (shared weights, e.g. unrolled LSTM steps), whose shapes
 * must match what the op expects. */
typedef struct ss_op_spec {
    const char *name;
    ss_op_type type;
    ss_op_attrs attrs;
    int n_in; int inputs[SS_MAX_INPUTS];
    int n_w;  int weights[SS_MAX_WEIGHTS];
} ss_op_spec;

/* Add an op: checks operands, infers output shapes/kinds/dtypes, creates the
 * output tensors ("<op>" for one output, "<op>:<i>" for several) and, if
 * asked, weights. Returns the new op id (>= 0), or -1 with d set; on error
 * the graph is unchanged. */
int ss_graph_add_op(ss_graph *g, const ss_op_spec *spec, ss_diag *d);

/* Convenience: add an op with the given inputs and own weights. */
int ss_graph_add(ss_graph *g, const char *name, ss_op_type type, const ss_op_attrs *attrs,
                 int n_in, const int *inputs, ss_diag *d);

const char *ss_graph_name(const ss_graph *g);
int ss_graph_n_ops(const ss_graph *g);
int ss_graph_n_tensors(const ss_graph *g);
const ss_op *ss_graph_op(const ss_graph *g, int id);         /* borrowed, NULL if out of range */
const ss_tensor *ss_graph_tensor(const ss_graph *g, int id); /* borrowed */
int ss_graph_find_op(const ss_graph *g, const char *name);     /* id or -1 */
int ss_graph_find_tensor(const ss_graph *g, const char *name); /* id or -1 */
/* The first output tensor id of op `op` (convenience for builders). */
int ss_graph_out(const ss_graph *g, int op);
/* What op computes, as a 64-bit hash: its type, attributes and the shapes,
 * dim kinds and dtypes of its inputs, weights and outputs (not its name, not
 * which tensors). Two ops with equal signatures do the same work on operands
 * of the same shapes (the unrolled steps of an RNN layer); equal inputs are
 * necessary, not sufficient, for equal signatures. 0 if op is out of range. */
uint64_t ss_op_signature(const ss_graph *g, int op);

/* Training settings carried by the model. Batch size is the global batch
 * (the sample extent of the inputs); the zoo builds graphs with it. */
void ss_graph_set_training(ss_graph *g, int64_t batch, ss_optimizer opt, ss_precision prec);
int64_t ss_graph_batch(const ss_graph *g);
ss_optimizer ss_graph_optimizer(const ss_graph *g);
ss_precision ss_graph_precision(const ss_graph *g);

/* Ops by id are already in a topological order (an op can only consume
 * tensors that exist). Consumers of a tensor: */
int ss_graph_n_consumers(const ss_graph *g, int tensor);
int ss_graph_consumer(const ss_graph *g, int tensor, int i); /* op id */

/* Full validation: acyclic, shapes consistent (re-inferred), names unique,
 * references in range. */
ss_status ss_graph_validate(const ss_graph *g, ss_diag *d);

/* 64-bit fingerprint of structure, shapes, attrs and training settings. */
uint64_t ss_graph_fingerprint(const ss_graph *g);

/* Totals: trainable parameters (shared weights counted once), forward FLOPs
 * of one iteration over the whole batch (multiply-add = 2 FLOPs). */
int64_t ss_graph_parameters(const ss_graph *g);
double ss_graph_forward_flops(const ss_graph *g);

#ifdef __cplusplus
}
#endif
#endif /* SIMSEARCH_GRAPH_H */
