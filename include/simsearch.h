/*
 * simsearch.h — the public C API of simsearch.
 *
 * simsearch finds a fast parallelization plan for training a deep network on a
 * cluster without running it there. The layers, bottom up:
 *   core       errors (ss_diag), allocation hook, graph IR with operator
 *              semantics, machine model (topology), plans, strict JSON I/O
 *   models     the model zoo (builders for known networks)
 *   kernels    forward/backward kernels per op type and backend (kernels/kernels.h)
 *   profiler   per-operator-tile costs (analytic roofline, profile database,
 *              live measurement: profiler/profile_db.h, profiler/measure.h)
 *   simulator  task graph + event simulation (see simulator/ headers)
 *   search     MCMC / ILP plan search (see search/ headers)
 *
 * Conventions (DESIGN.md, "House style"):
 *   - Functions return ss_status; details of a failure go into an ss_diag,
 *     which keeps the first message. On error nothing the caller owns was
 *     changed and every out-pointer is left NULL / untouched.
 *   - Opaque objects have _new/_free pairs; _free(NULL) is a no-op.
 *   - Plain data (ss_tensor, ss_op, ss_device ...) is read-only to users;
 *     getters return borrowed pointers that live as long as their container.
 *   - The library never prints and never exits.
 */
#ifndef SIMSEARCH_H
#define SIMSEARCH_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ */
/* Errors and diagnostics                                              */
/* ------------------------------------------------------------------ */

typedef enum ss_status {
    SS_OK = 0,
    SS_ERR_NOMEM,       /* allocation failed */
    SS_ERR_INVALID,     /* inconsistent or out-of-range input */
    SS_ERR_PARSE,       /* malformed file (syntax, unknown key, wrong type) */
    SS_ERR_IO,          /* file could not be read or written */
    SS_ERR_INFEASIBLE,  /* plan does not fit (memory) or cannot run */
    SS_ERR_UNSUPPORTED, /* valid request this build cannot honour (no GPU...) */
    SS_ERR_INTERRUPTED  /* stopped by the user (SIGINT) */
} ss_status;

#define SS_DIAG_MSG_MAX 4096

/* Error object. The first error set is kept; later ones are ignored, so the
 * message names the root cause. Zero-initialise or ss_diag_init() it. A
 * message longer than SS_DIAG_MSG_MAX - 1 keeps its first quarter and its
 * end with the middle replaced by " [...] ", so the reason after a long path
 * survives. */
typedef struct ss_diag {
    ss_status status;
    char msg[SS_DIAG_MSG_MAX];
} ss_diag;

void ss_diag_init(ss_diag *d);
/* Record an error (printf-style) unless one is already recorded. d may be NULL.
 * Returns st so callers can write `return ss_diag_set(d, SS_ERR_..., ...)`. */
ss_status ss_diag_set(ss_diag *d, ss_status st, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
const char *ss_status_name(ss_status st);

/* ------------------------------------------------------------------ */
/* Allocation hook (fault tests inject failures through it)            */
/* ------------------------------------------------------------------ */

typedef struct ss_allocator {
    void *(*malloc_fn)(size_t n);
    void *(*realloc_fn)(void *p, size_t n);
    void (*free_fn)(void *p);
} ss_allocator;

/* Install an allocator for all library allocations (NULL restores libc).
 * Also routes jansson's allocations. Not thread-safe; call before use. */
void ss_set_allocator(const ss_allocator *a);
void *ss_malloc(size_t n);
void *ss_calloc(size_t count, size_t size); /* overflow-checked */
void *ss_realloc(void *p, size_t n);
/* Grow the array *p of `size`-byte items (capacity *cap items) to hold at
 * least `need`, doubling from 16; 0, or -1 with *p and *cap unchanged. */
int ss_grow(void **p, int *cap, int need, size_t size);
void ss_free(void *p);
char *ss_strdup(const char *s);

/* ------------------------------------------------------------------ */
/* Output files (core/outfile.c; the rules in core/outfile.h)           */
/* ------------------------------------------------------------------ */

/* Can an output be written at path? "-" (standard output) can; a path that
 * exists must be a regular file the user may write (a symbolic link is
 * followed to one); its directory must exist and take a new file (probed by
 * creating and removing a temp file). Call it before the work whose result
 * goes there. SS_ERR_INVALID (empty path, not a regular file, dangling
 * link) or SS_ERR_IO (no such directory, not writable), naming the path. */
ss_status ss_output_check(const char *path, ss_diag *d);

/* Remove the temp files of the outputs being written right now. Only
 * async-signal-safe calls: for a signal handler, before the process dies. */
void ss_output_remove_temps(void);

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

#define SS_MAX_DIMS 6
#define SS_MAX_INPUTS 16
#define SS_MAX_OUTPUTS 8
#define SS_MAX_WEIGHTS 8
#define SS_MAX_OPERANDS (SS_MAX_INPUTS + SS_MAX_WEIGHTS)
#define SS_NAME_MAX 96

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
    int axis;                              /* softmax, concat, split (negative counts from the end) */
    int n_split; int64_t split_sizes[SS_MAX_OUTPUTS]; /* split */
    int perm[SS_MAX_DIMS];                 /* transpose */
    double rate;                           /* dropout */
    int64_t vocab, dim;                    /* embedding; dim: rotary's head size */
    ss_lstm_mode lstm_mode; int64_t hidden; int return_sequences; /* lstm */
    int64_t heads; int causal;             /* attention (embed dim from q) */
    int view;                              /* split, transpose: a strided view that its
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

/* ------------------------------------------------------------------ */
/* Model JSON I/O (core/model_io.c) and the zoo (models/)               */
/* ------------------------------------------------------------------ */

/* Load a "simsearch-model" JSON file. Errors name path and line:column or the
 * JSON path. On success *out is a new graph the caller frees. */
ss_status ss_model_load(const char *path, ss_graph **out, ss_diag *d);
ss_status ss_model_load_string(const char *json, const char *label, ss_graph **out, ss_diag *d);
/* Save atomically (temp file + rename). */
ss_status ss_model_save(const ss_graph *g, const char *path, ss_diag *d);
/* Serialise to a malloc'd (ss_free) string. */
ss_status ss_model_to_string(const ss_graph *g, char **out, ss_diag *d);

typedef struct ss_zoo_entry {
    const char *name;        /* "resnet101" */
    const char *description;
    const char *params_help; /* "layers=24,hidden=1024,..." or "" */
} ss_zoo_entry;
int ss_zoo_count(void);
const ss_zoo_entry *ss_zoo_get(int i);

/* Build a model from a spec: "NAME[:key=value,...]" (zoo), a path to a
 * model JSON file (anything containing '/' or ending in ".json"), or
 * "hf:PATH[:key=value,...]" — a Hugging Face config.json (or a folder
 * holding one) of LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM,
 * MixtralForCausalLM or GPT2LMHeadModel, imported as a gpt-family spec whose
 * keys the listed ones override (models/hf_import.c).
 * batch > 0 sets the global batch; batch == 0 uses the model default
 * (per_device_default * n_devices: 64 per device, 256 for alexnet; callers
 * pass n_devices; 1 if unknown). */
ss_status ss_model_build(const char *spec, int64_t batch, int n_devices, ss_graph **out,
                         ss_diag *d);
/* Parameters one token uses: every weight, but an expert_linear's weights
 * [X, in, out] count topk / X of their size (mixture of experts: a token
 * runs topk of the X experts). Equals ss_graph_parameters for dense models. */
int64_t ss_model_active_parameters(const ss_graph *g);

/* The same for a plan of tensor-parallel degree tp (0: unknown, as
 * ss_model_build): the gpt and bert families pad their vocabulary to a
 * multiple of vocab_pad * tp as Megatron-LM does (keys vocab_pad, default
 * 128, 0 = no padding, and tp); a spec naming another tp is an error.
 * Families without a tp key build as ss_model_build does. */
ss_status ss_model_build_tp(const char *spec, int64_t batch, int n_devices, int tp,
                            ss_graph **out, ss_diag *d);

/* ------------------------------------------------------------------ */
/* Machine model (core/machine.c, core/topology_io.c)                  */
/* ------------------------------------------------------------------ */

#define SS_EFF_POINTS 12

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

/* ------------------------------------------------------------------ */
/* Plans (core/plan.c, core/plan_io.c, core/plan_gen.c)                */
/* ------------------------------------------------------------------ */

/* Parallel config of one op: a degree per dim of output 0, a reduction
 * degree (splits the contraction dim: partial sums), a replica degree (the
 * same tile computed on several devices: a device-mesh axis that splits
 * nothing; every replica needs its whole input region and the weight
 * gradients are summed over replicas as in data parallelism), and one
 * device per tile and replica. Tiles are numbered row-major over
 * (dim 0, ..., dim ndim-1, replica, red):
 * index = (((i0 * deg1 + i1) * ... ) * rep + q) * red + r. Entries may
 * repeat: tiles on one device run one after another (micro-batching); the
 * replicas of one tile must sit on distinct devices. In a plan's config the
 * device list is the plan's own, shared by every op with the same list and
 * valid until that op's config changes; a config passed to
 * ss_plan_set_config may point anywhere (the list is copied or shared). */
typedef struct ss_pconfig {
    int ndim;
    int deg[SS_MAX_DIMS];
    int red;
    int rep;         /* replica degree, >= 1 (1: no replication) */
    int ntiles;      /* = prod(deg) * rep * red */
    const int *devices; /* ntiles entries */
    int stage;       /* pipeline stage of the op (0 when not pipelined) */
} ss_pconfig;

/* Tile `index` of op under config c (ranges balanced: extents need not divide
 * evenly for the math, but validation requires divisibility). */
void ss_pconfig_tile(const ss_graph *g, const ss_op *op, const ss_pconfig *c, int index,
                     ss_tile *t);

/* 1 if a and b cut the op into the same tiles on the same devices (same
 * degrees, reduction, replica degree and device list; the stage is not
 * compared), else 0. */
int ss_pconfig_same_tiles(const ss_pconfig *a, const ss_pconfig *b);

typedef enum ss_pipe_schedule { SS_PIPE_GPIPE = 0, SS_PIPE_1F1B } ss_pipe_schedule;
typedef enum ss_queue_policy { SS_QUEUE_FIFO = 0, SS_QUEUE_BACKWARD_FIRST } ss_queue_policy;
typedef enum ss_sync_mode { SS_SYNC_WAIT_FREE = 0, SS_SYNC_BULK } ss_sync_mode;
/* Activation recomputation: none; selective (Korthikanti et al.: the
 * attention-score ops — the ops whose output holds a [seq x seq] score
 * matrix, two attribute dims of equal extent — keep no activations and
 * recompute their forward in the backward); full (every op). */
typedef enum ss_recompute {
    SS_RECOMPUTE_NONE = 0,
    SS_RECOMPUTE_FULL,
    SS_RECOMPUTE_SELECTIVE
} ss_recompute;

typedef struct ss_plan_settings {
    int stages;               /* pipeline stages (1 = none); with virtual stages, the
                                 pp * virtual_stages model chunks */
    int microbatches;         /* per iteration (1 = none) */
    ss_pipe_schedule schedule;
    ss_queue_policy queue;
    ss_sync_mode sync;
    double bucket_bytes;      /* gradient fusion threshold (0 = one bucket per weight) */
    int priority;             /* send front layers' gradients first */
    int reorder_backward;     /* compute first layers' weight grads earlier */
    ss_recompute recompute;
    int distopt;              /* distributed optimizer (ZeRO-1): each weight shard's
                                 optimizer state is split over the devices that hold
                                 it; its gradient sync is a reduce-scatter, then the
                                 update of the device's slice, then an all-gather of
                                 the updated parameters */
    int virtual_stages;       /* chunks per pipeline rank (Megatron's interleaved 1F1B,
                                 --num-layers-per-virtual-pipeline-stage); 1 = none.
                                 With v > 1: pp = stages / v ranks, stage (chunk) k
                                 runs on the devices of rank k mod pp, the schedule
                                 is 1F1B and micro-batches are a multiple of pp */
} ss_plan_settings;

typedef struct ss_plan ss_plan;

/* A plan for graph g on machine m, every op with a single tile on device 0. */
ss_plan *ss_plan_new(const ss_graph *g, const ss_machine *m);
void ss_plan_free(ss_plan *p);
ss_plan *ss_plan_clone(const ss_plan *p);
/* Copy src into dst (same graph): cheap, an op of dst whose device list
 * already equals src's keeps it; dst's lists stay dst's own (plans share
 * nothing). */
ss_status ss_plan_copy(ss_plan *dst, const ss_plan *src);

int ss_plan_n_ops(const ss_plan *p);
const ss_pconfig *ss_plan_config(const ss_plan *p, int op);
/* Set op's config (copied). Checks shape (ndim, tile count) only; full
 * validation is ss_plan_validate. */
ss_status ss_plan_set_config(ss_plan *p, int op, const ss_pconfig *c, ss_diag *d);
ss_plan_settings *ss_plan_settings_of(ss_plan *p);
const ss_plan_settings *ss_plan_settings_get(const ss_plan *p);
uint64_t ss_plan_model_fingerprint(const ss_plan *p);
uint64_t ss_plan_topology_fingerprint(const ss_plan *p);
/* Bytes of memory the plan holds (its configs and its distinct device
 * lists: a plan's memory grows with its distinct placements, not with
 * operators x tiles). */
size_t ss_plan_bytes(const ss_plan *p);
/* The id of op's device list: ops whose device lists are equal have the
 * same id, ops whose lists differ different ids; ids lie in [0,
 * ss_plan_devlist_ids(p)), so a reader can key a per-list array by them.
 * Valid until the plan's configs change (an id may then name another list);
 * -1 when op is out of range. */
int ss_plan_devlist_id(const ss_plan *p, int op);
int ss_plan_devlist_ids(const ss_plan *p);

/* Degrees divide dims, split only splittable dims, reduction only where a
 * contraction exists and divides it, devices in range, tile counts match,
 * stages consistent. Errors name the op. */
ss_status ss_plan_validate(const ss_plan *p, const ss_graph *g, const ss_machine *m, ss_diag *d);

ss_status ss_plan_load(const char *path, const ss_graph *g, const ss_machine *m, ss_plan **out,
                       ss_diag *d);
ss_status ss_plan_load_string(const char *json, const char *label, const ss_graph *g,
                              const ss_machine *m, ss_plan **out, ss_diag *d);
ss_status ss_plan_save(const ss_plan *p, const ss_graph *g, const char *path, ss_diag *d);
ss_status ss_plan_to_string(const ss_plan *p, const ss_graph *g, char **out, ss_diag *d);

/* Generators. Data parallel over the first n_devices devices (0 = all): the
 * sample dim split n ways, weights replicated. */
ss_status ss_plan_data_parallel(const ss_graph *g, const ss_machine *m, int n_devices,
                                ss_plan **out, ss_diag *d);
/* Megatron-LM: tensor parallel tp (column/row split of attention and MLP;
 * every other op replicated over the tp group, as Megatron runs LayerNorm,
 * residual and dropout on every rank), pipeline pp (layers evenly over
 * stages), data parallel dp; the micro-batches given by their count mb or
 * their size mbs (samples per micro-batch per dp rank, Megatron's
 * --micro-batch-size): mb = batch / (dp * mbs); both 0 = default
 * (pp > 1 ? 4*pp : 1 micro-batches); both given and inconsistent is an
 * error. tp*pp*dp must equal the device count used. */
typedef struct ss_megatron_config {
    int tp, pp, dp, mb;
    ss_recompute recompute;
    int sp;      /* sequence parallelism: ops after partial sums split their sequence dim tp ways */
    int mbs;     /* micro-batch size (0: from mb) */
    int distopt; /* distributed optimizer (settings.distopt) */
    ss_sync_mode sync; /* SS_SYNC_WAIT_FREE ("overlap": bucketed, 40 MB buckets) or bulk */
    int vp;      /* virtual stages per pipeline rank (interleaved 1F1B; 0 or 1: none):
                    the layers are cut into pp*vp equal chunks, chunk k on rank k mod
                    pp; needs pp > 1, layers divisible by pp*vp and micro-batches a
                    multiple of pp */
    int cp;      /* context parallelism (0 or 1: none): every op's sequence dim (the
                    query rows of attention scores) split cp ways, cp ranks between tp
                    and dp (device = ((stage*dp + dp rank)*cp + cp rank)*tp + tp
                    rank); attention gathers the keys and values of the other cp ranks
                    (the volume of Megatron's ring exchange, not its overlap); ops
                    without a sequence dim are replicated over cp; devices = tp*pp*dp*cp */
    /* Uneven stages (Megatron's --decoder-first-pipeline-num-layers and
     * --decoder-last-pipeline-num-layers; needs vp <= 1): the first / last
     * pipeline stage holds first / last layers (0: as many as the other
     * stages), the other stages share the remaining layers equally (they
     * must divide; with pp = 2 first + last must be all the layers when both
     * are given). The embedding stays on the first stage, the head on the
     * last, so fewer layers there balance them. */
    int first, last;
    double bucket_bytes; /* gradient bucket for sync=overlap (0: Megatron's 40M
                            fp16 parameters, 80 MB) */
} ss_megatron_config;
/* The plan settings that c's recompute, distopt, sync and bucket size set
 * (the rest of s untouched): plans of configs that differ only there differ
 * only in these settings. */
void ss_megatron_settings(const ss_megatron_config *c, ss_plan_settings *s);
/* The number of repeated layers of g (the longest run of a repeated block of
 * segments, as the Megatron generator finds them), 0 when it has none. */
int ss_plan_layers(const ss_graph *g);
/* c as a "megatron:..." spec that ss_plan_from_spec reads back into the same
 * plan: tp, pp, dp, mbs (or mb when the batch size is not known: batch <= 0),
 * and the keys whose values differ from the defaults. Returns the length
 * snprintf would (truncated output when >= cap). */
int ss_megatron_spec(const ss_megatron_config *c, int64_t batch, char *buf, size_t cap);
ss_status ss_plan_megatron(const ss_graph *g, const ss_machine *m, const ss_megatron_config *c,
                           ss_plan **out, ss_diag *d);
/* "data-parallel" | "megatron:tp=T,pp=P,dp=D[,cp=C][,mbs=S|mb=M][,vp=V]
 * [,recompute=none|selective|full][,sp=0|1][,distopt=0|1][,sync=overlap|bulk][,first=F]
 * [,last=L][,bucket=MB]" (bucket in MB of 10^6 bytes; tp, pp, cp, vp default 1; dp defaults
 * to devices / (tp*pp*cp)) | a path to a plan JSON (contains '/' or ends in ".json").
 * Bad specs: SS_ERR_INVALID naming the key. */
ss_status ss_plan_from_spec(const char *spec, const ss_graph *g, const ss_machine *m,
                            ss_plan **out, ss_diag *d);
/* The tensor-parallel degree a plan spec names before any model exists (for
 * ss_model_build_tp): the tp key of a "megatron:" spec (1 when absent), 1
 * for "data-parallel", 0 for plan files and specs it cannot read (their
 * errors come from ss_plan_from_spec). */
int ss_plan_spec_tp(const char *spec);

/* ------------------------------------------------------------------ */
/* Costs (profiler/cost.c, profiler/analytic.c)                        */
/* ------------------------------------------------------------------ */

typedef enum ss_cost_source {
    SS_COST_ANALYTIC = 0, /* roofline from the device spec */
    SS_COST_PROFILE,      /* profile database entry */
    SS_COST_MEASURED      /* live measurement */
} ss_cost_source;
const char *ss_cost_source_name(ss_cost_source s); /* "analytic", "profile", "measured" */

typedef struct ss_cost {
    double fwd_us, bwd_us;   /* time of the tile's forward / backward kernels */
    /* The same split into GPU time and host dispatch time, fwd_us =
     * max(fwd_gpu_us, fwd_host_us): analytic costs give the roofline without
     * the launch floor and kernels x launch_us; profiled and measured costs
     * give fwd_us and 0 (their host time is in the measurement). The
     * simulator lets the host run ahead of the GPU within a pass
     * (docs/simulator.md, "Host dispatch"). */
    double fwd_gpu_us, bwd_gpu_us, fwd_host_us, bwd_host_us;
    ss_work work;            /* FLOPs and bytes */
    double workspace_bytes;  /* temporary memory while it runs */
    ss_cost_source source;
} ss_cost;

/* A cost provider answers for (op, tile, device type) or declines (returns 0).
 * Providers are asked in the order added; the analytic model is the last
 * resort and always answers. */
typedef struct ss_cost_provider {
    const char *name;
    void *ctx;
    int (*lookup)(void *ctx, const ss_graph *g, const ss_op *op, const ss_tile *t,
                  const ss_device_type *dt, ss_cost *out);
} ss_cost_provider;

typedef struct ss_costmodel ss_costmodel;
ss_costmodel *ss_cost_new(const ss_machine *m);
void ss_cost_free(ss_costmodel *cm);
ss_status ss_cost_add_provider(ss_costmodel *cm, const ss_cost_provider *p, ss_diag *d);
/* Cost of tile t of op on a device of type `devtype` (index in m). Cached. */
ss_status ss_cost_tile(ss_costmodel *cm, const ss_graph *g, const ss_op *op, const ss_tile *t,
                       int devtype, ss_cost *out);
/* Time of the optimizer update of n_params parameters on devtype: their share
 * of the device's fused multi-tensor optimizer kernel (memory time, no launch
 * overhead per call; profiler/cost.c). 0 for n_params <= 0 or a bad type. */
double ss_cost_update_us(ss_costmodel *cm, int devtype, int64_t n_params, ss_optimizer opt,
                         ss_precision prec);
/* Where the plan's compute time comes from: share[s] (s an ss_cost_source)
 * = the summed forward + backward time of every tile of p (on its device's
 * type) answered by source s, over the total (all 0 when the total is 0).
 * Optimizer updates are not tiles and not counted. */
ss_status ss_cost_plan_sources(ss_costmodel *cm, const ss_graph *g, const ss_machine *m,
                               const ss_plan *p, double share[3], ss_diag *d);
/* The analytic roofline alone (for providers and tests). */
void ss_cost_analytic(const ss_device_type *dt, const ss_graph *g, const ss_op *op,
                      const ss_tile *t, ss_cost *out);


/* ------------------------------------------------------------------ */
/* Simulation (simulator/sim.c, build.c, memory.c, report.c)           */
/* ------------------------------------------------------------------ */

/* A reusable simulator for one (graph, machine, cost model). ss_sim_run turns
 * a plan into a task graph (forward/backward tasks per tile, transfers,
 * partial-sum and gradient collectives, updates), runs the event engine and
 * sweeps per-device memory with liveness. The simulator keeps its task-graph
 * arena and scratch between runs, so the search can call ss_sim_run
 * thousands of times per second without allocating once the arrays have
 * grown. docs/simulator.md states the model and its formulas. */

/* Which evaluator judges a plan (docs/simulator.md, "Evaluators").
 * FULL: the full task-graph simulation, the oracle.
 * SYMMETRY: one representative per class of identical devices,
 *   bit-identical to FULL ("Symmetry"); SS_ERR_INVALID naming the reason
 *   when the plan is not symmetric.
 * HIER: collapsed repeated blocks and a stage-level pipeline
 *   ("Hierarchical evaluator"): within 0.5% of FULL on 1F1B Megatron plans,
 *   no timeline (no trace, no critical path); SS_ERR_INVALID naming the
 *   reason when the plan is not of its form.
 * AUTO: HIER for plans of at least SS_EVAL_HIER_TILES tile entries when it
 *   applies and the config does not ask for an exact evaluator, else
 *   SYMMETRY for plans of at least SS_EVAL_SYM_TILES tile entries when the
 *   plan is symmetric, else FULL. (Below those sizes the memoized full
 *   simulation is as fast: FlexFlow's models in a search.) */
#define SS_EVAL_HIER_TILES (1 << 20)
#define SS_EVAL_SYM_TILES (1 << 16)
typedef enum ss_evaluator { SS_EVAL_AUTO = 0, SS_EVAL_FULL, SS_EVAL_SYMMETRY, SS_EVAL_HIER } ss_evaluator;
/* "auto", "full", "symmetry", "hierarchical". */
const char *ss_evaluator_name(ss_evaluator e);
/* Parse one of those names (also "hier"); 0 ok, -1 unknown. */
int ss_evaluator_parse(const char *s, ss_evaluator *out);

typedef struct ss_sim_config {
    double mem_fraction; /* usable share of each device's memory (0 = 1.0) */
    ss_evaluator evaluator; /* SS_EVAL_AUTO (0) by default */
    int skip_memory;     /* 1: skip the liveness sweep (peaks = static memory only) */
    int exact;           /* 1: AUTO picks only exact evaluators (SYMMETRY, FULL): a trace
                            or a critical path is wanted */
    int one_shot;        /* 1: the simulator judges one plan (simsearch simulate): nothing
                            is kept for a next run (no memoization, every work array freed
                            as soon as it has served), for the smallest peak memory on big
                            plans. Same numbers; later runs work, only slower */
    /* Optional: polled while a run builds its task graph and simulates it
     * (every few thousand tasks); nonzero stops the run, which returns
     * SS_ERR_INTERRUPTED with the result unchanged (Ctrl-C on a big plan). */
    int (*stop)(void *ctx);
    void *stop_ctx;
    /* Collectives' bus-bandwidth efficiency is a property of the machine's
     * links (ss_link.coll_eff, coll_half_bytes), read from the topology. */
} ss_sim_config;

#define SS_SIM_CRIT_MAX 16

/* One line of the critical-path summary: the time that tasks of one op and
 * kind account for on the path. */
typedef struct ss_sim_crit {
    char name[SS_NAME_MAX]; /* op name, or "gradients" / "(other)" */
    char kind[16];          /* ss_task_kind name: "fwd", "bwd", "update", "xfer", "collective", "other" */
    int n_tasks;            /* tasks of this entry on the path */
    double us;              /* their summed duration on the path */
} ss_sim_crit;

/* Result of one simulation. Zero-initialise before the first use; the
 * per-device arrays (n_devices entries each) are owned by the result, reused
 * by later runs into the same result and freed by ss_sim_result_clear. */
typedef struct ss_sim_result {
    char model[SS_NAME_MAX];
    char topology[SS_NAME_MAX];
    int n_devices;
    int64_t batch;
    int64_t n_tasks;
    double iteration_us;
    double throughput;          /* samples per second: batch / iteration time */
    double critical_path_us;    /* summed duration of the tasks on the critical path */
    double *compute_us;         /* per device: compute-stream busy time */
    double *comm_us;            /* per device: time its transfers/collectives run (engine's rule) */
    double *exposed_comm_us;    /* per device: part of comm_us while its compute stream idles */
    double *idle_us;            /* per device: iteration_us - compute_us */
    double *peak_memory_bytes;  /* per device: peak over the iteration */
    double *static_memory_bytes;/* per device: weights + gradients + optimizer state */
    double *weight_bytes;       /* per device: weights alone */
    double *capacity_bytes;     /* per device: mem_gib * 2^30 * mem_fraction */
    int fits;                   /* 1 if every peak <= its capacity */
    int overflow_device;        /* first (lowest id) device over capacity, -1 if fits */
    double overflow_bytes;      /* its peak - capacity (0 if fits) */
    int n_crit;                 /* critical-path summary, largest time first */
    ss_sim_crit crit[SS_SIM_CRIT_MAX];
    char evaluator[16];         /* "full", "symmetry" or "hierarchical" */
    int64_t tasks_simulated;    /* tasks the evaluator simulated (n_tasks for "full") */
    int symmetry_classes;       /* device classes simulated, one representative each
                                   (n_devices for "full") */
    double eval_ms;             /* wall time of the evaluation */
    int cap_devices;            /* private: allocated array entries */
} ss_sim_result;

typedef struct ss_sim ss_sim;

/* New simulator for graph g on machine m priced by cm (all borrowed: they
 * must outlive the simulator and not change meanwhile). cfg may be NULL
 * (defaults). On error *out is NULL. */
ss_status ss_sim_new(const ss_graph *g, const ss_machine *m, ss_costmodel *cm,
                     const ss_sim_config *cfg, ss_sim **out, ss_diag *d);
void ss_sim_free(ss_sim *s);

/* Simulate one training iteration of plan p (made for the simulator's graph
 * and machine; run checks tile counts and device ids, full validation is
 * ss_plan_validate). A plan that does not fit in memory is still SS_OK with
 * r->fits = 0. On error *r is unchanged. Deterministic: the same plan gives
 * bit-identical results. */
ss_status ss_sim_run(ss_sim *s, const ss_plan *p, ss_sim_result *r, ss_diag *d);

/* ss_sim_run with a cutoff, for searches that only need to know whether a
 * plan beats a threshold. With cutoff_us < HUGE_VAL, *load_us is set to a
 * lower bound of the iteration time: first the largest total duration of
 * the tasks on any one resource (device stream or link channel) of p's
 * task graph, and when the run stops early, the bound that stopped it. The
 * run stops (SS_OK, *r unchanged, *load_us > cutoff_us, the simulator holds
 * no run: ss_sim_write_trace and ss_sim_n_tasks see none) after building
 * the task graph when that load exceeds cutoff_us, or during the event
 * simulation as soon as some resource's remaining work proves the
 * iteration ends after cutoff_us (CUTTING in simulator/engine.h).
 * Otherwise it is exactly ss_sim_run (*load_us <= cutoff_us): a plan whose
 * iteration time is at most cutoff_us is never stopped. cutoff_us =
 * HUGE_VAL: ss_sim_run, *load_us = 0. On error *r is unchanged. */
ss_status ss_sim_run_within(ss_sim *s, const ss_plan *p, double cutoff_us, ss_sim_result *r,
                            double *load_us, ss_diag *d);

/* Replace the stop callback of s's config (NULL: runs cannot be stopped). */
void ss_sim_set_stop(ss_sim *s, int (*stop)(void *ctx), void *ctx);

/* Free a result's arrays and zero it (NULL is a no-op). */
void ss_sim_result_clear(ss_sim_result *r);
/* Deep copy src into dst (dst's arrays reused when large enough). On error
 * dst is unchanged. */
ss_status ss_sim_result_copy(ss_sim_result *dst, const ss_sim_result *src, ss_diag *d);

/* Number of tasks of the last run's task graph (0 before the first run). */
int64_t ss_sim_n_tasks(const ss_sim *s);
/* Whether evaluator e (FULL, SYMMETRY or HIER, not AUTO) can judge p, as
 * far as p alone shows, without simulating: 1 yes; 0 no, with the reason
 * in why (n bytes: which condition of the evaluator's form p misses); -1
 * on error (d set). A yes is necessary, not sufficient: ss_sim_run_within
 * with that evaluator may still refuse for what only its simulation shows
 * (docs/simulator.md, "Evaluators"). Asking the evaluator whose result s
 * holds forgets that result (ss_sim_write_trace, ss_sim_path_ops and
 * ss_sim_n_tasks then see no run). */
int ss_sim_accepts(ss_sim *s, ss_evaluator e, const ss_plan *p, char *why, size_t n,
                   ss_diag *d);
/* Estimated tasks evaluator e (not AUTO) would simulate to judge p: p's
 * tile entries scaled by what the evaluator's earlier runs on s simulated
 * per tile entry (an estimate for choosing, never a bound); -1 for AUTO. */
double ss_sim_cost(ss_sim *s, ss_evaluator e, const ss_plan *p);

/* Where the last run's critical path spends its time, per op: op_us[i]
 * (ss_graph_n_ops entries) = the summed duration of the path's tasks that
 * belong to op i (its forward, backward and update tasks, the transfers and
 * partial-sum collectives built for it, and the gradient collectives of the
 * weights it is the first reader of). The path is the engine's chain of
 * blockers from the last task to end (dependency or resource waits), so
 * these are the ops whose change can shorten the iteration. Returns the
 * path's total duration in *total_us (may be NULL). SS_ERR_INVALID if the
 * simulator holds no run; SS_ERR_NOMEM. On error op_us is unchanged. */
ss_status ss_sim_path_ops(ss_sim *s, double *op_us, double *total_us, ss_diag *d);

/* Write the last run as Chrome Trace Event JSON (opens in Perfetto):
 * one process per device, tasks named after operators. */
ss_status ss_sim_write_trace(const ss_sim *s, const char *path, ss_diag *d);

/* The result as the simulate JSON object (docs/simulator.md): model,
 * topology, devices, batch, iteration_time_ms, throughput_samples_per_s,
 * peak_memory_bytes[], memory_capacity_bytes[], fits, overflow, breakdown,
 * critical_path, tasks, plan (the label given, may be NULL). *out is an
 * ss_malloc'd string the caller ss_frees. */
ss_status ss_sim_result_to_json(const ss_sim_result *r, const char *plan_label, char **out,
                                ss_diag *d);


/* ------------------------------------------------------------------ */
/* Plan search (search/driver.c; docs/search.md)                       */
/* ------------------------------------------------------------------ */

/* Metropolis-Hastings over the SOAP space (every op's degrees over its
 * sample, attribute, parameter and reduction dims, and its device list),
 * judged by the full simulator. Chains start from
 * data parallelism, the expert plan and random plans. Same inputs, seed and
 * budget => the same plan, unless the time limit cut the search
 * (ss_search_result.time_dependent) or it was interrupted. */

typedef struct ss_search_progress {
    int64_t proposals, accepted, evaluations;
    double best_us;          /* best iteration time so far (HUGE_VAL if none fits) */
    double elapsed_s, evals_per_s;
} ss_search_progress;

typedef struct ss_search_config {
    int64_t budget;          /* proposals in all (0: 20000) */
    double time_limit_s;     /* 0: no limit */
    uint64_t seed;
    int random_starts;       /* random start plans besides DP and expert (0: 2, < 0: none) */
    double beta;             /* acceptance sharpness (0: default, see search/mcmc.h) */
    double explore_share;    /* share of budget/time for exploration chains (0: default) */
    int64_t restart_after;   /* proposals without improvement before a restart (0: default) */
    double p_heavy;          /* share of weight moves, weights drawn by bytes (0: default,
                                < 0: none; see search/mcmc.h) */
    double p_path;           /* share of the other moves whose op is drawn by its time on the
                                critical path (0: default, < 0: none; full simulation only) */
    double p_local;          /* share of new configs drawn near the current one (0: default,
                                < 0: none; see search/mcmc.h) */
    double p_class;          /* share of class moves: one config for every op of a structural
                                class (0: default, < 0: none; see search/classes.h) */
    ss_evaluator evaluator;  /* how proposals are judged (SS_EVAL_AUTO: 0, the default) */
    int no_eval_cache;       /* 1: simulate a plan again when the search meets it again
                                (for measurements); 0: decide from the cached evaluation
                                (search/evalcache.h). Same chain, same plan either way */
    /* Optional callbacks (cb_ctx passed to both): stop is polled before
     * every proposal and while a simulation runs (nonzero stops: SIGINT);
     * progress every progress_every_s seconds (0: 0.2 s; the CLI asks 10 s
     * when stderr is not a terminal). */
    int (*stop)(void *cb_ctx);
    void (*progress)(void *cb_ctx, const ss_search_progress *p);
    void *cb_ctx;
    double progress_every_s;
    /* LLM planner (models of repeated layers with attention; docs/search.md,
     * "LLM planner"). level: 0 = the default, the highest level that fits the
     * time limit; SS_SEARCH_LEVEL(0..3) asks for that level. threads: 0 = all
     * online cores; the plan is the same for any thread count. baseline:
     * SS_BASELINE_MEGATRON_GRID also runs the exhaustive Megatron grid
     * (search/grid.h) and reports its best point. */
    int level;
    int threads;
    int baseline;
} ss_search_config;

#define SS_SEARCH_LEVEL(l) ((l) + 1)
enum { SS_BASELINE_NONE = 0, SS_BASELINE_MEGATRON_GRID = 1 };
#define SS_SEARCH_NEAR_MAX 4

/* A baseline plan given by its Megatron spec and its simulation. */
typedef struct ss_search_megatron_grid {
    int run;                 /* 1: the grid ran */
    int fits;                /* a point fits: plan and iteration_us are its best */
    double iteration_us;
    char plan[256];          /* megatron spec of the best point ("" when none fits) */
    int64_t points;          /* points of the grid */
    int64_t points_judged;   /* simulated (the rest ruled out by memory) */
    double time_s;           /* wall seconds */
    double cpu_s;            /* process CPU seconds (all threads) */
    int time_cut;            /* the time limit stopped it before the end */
} ss_search_megatron_grid;

typedef struct ss_search_near {
    char plan[256];          /* megatron spec */
    double iteration_us;
} ss_search_near;

typedef struct ss_search_result {
    ss_plan *best, *data_parallel, *expert; /* owned by the result */
    ss_sim_result best_sim, dp_sim, expert_sim; /* full simulations of the three */
    char expert_label[128];
    double speedup_vs_dp, speedup_vs_expert; /* baseline time / best time; 0 (JSON null) when
                                                the baseline or the best does not fit */
    int64_t proposals, accepted, evaluations, infeasible, restarts;
    int64_t pruned;          /* proposals rejected by the compute lower bound, unsimulated */
    int64_t cut;             /* proposals rejected after building their task graph, before
                                their simulation ended: a resource's load (at the start,
                                or its remaining work during the simulation) proved the
                                iteration slower than the acceptance threshold */
    int64_t cached;          /* proposals rejected from the cache: the same plan was judged
                                before, and that judgement decides the test */
    double time_s, evals_per_s, best_found_at_s; /* evals_per_s: simulations per second */
    double gain_second_half; /* how much faster the best plan got in the second half of the
                                proposals: best time after the first half / best time - 1
                                (>= 0; 0 when no plan fits); HUGE_VAL when the first plan
                                that fits was found in the second half. Well above 0: the
                                search was still improving, a longer one likely finds better */
    double log10_space;      /* log10 of the number of plans in the space */
    int interrupted;         /* stopped by the stop callback */
    double time_limit_s;     /* the time limit it ran under (0: none) */
    int devices_usable;      /* devices the plans could use: all, or 1 when no two devices
                                of the machine can reach each other (every device is a peer
                                that refuses connections) */
    int time_dependent;      /* 1 if the time limit decided something (stopped the search or
                                ended an exploration chain early): the same seed may then
                                give another plan. 0: a pure function of the inputs, seed
                                and budget (and interrupted = 0) */
    char stopped_by[32];     /* "budget", "time limit", "no improvement", "interrupted" */
    ss_sim *sim;             /* owned: its last run is best_sim (for ss_sim_write_trace) */
    /* LLM planner: level and threads it ran with (level -1: the SOAP search
     * of the other models), when the first fitting plan was had (s), the best
     * plan as a Megatron spec and Megatron-LM flags ("" when it is not
     * expressible in Megatron's terms), MFU = model FLOPs (3 x forward) /
     * (devices x peak FLOP/s of the device type x iteration time), the
     * achieved model TFLOP/s per GPU, tokens/s (batch x sequence / time; 0
     * when the model has no sequence), the grid baseline and the next
     * distinct plans within the simulator's error band (8%). */
    int level, threads;
    double first_plan_s;
    double cpu_s;            /* process CPU seconds of the search (grid excluded) */
    char best_label[256];
    char megatron_args[512];
    double mfu, tflops_per_gpu, tokens_per_s;
    ss_search_megatron_grid grid;
    double speedup_vs_megatron_grid; /* grid best / best (0: the grid found no fitting plan) */
    int n_near;
    ss_search_near near[SS_SEARCH_NEAR_MAX];
    double level2_us;        /* level 2's plan, judged (0: level 2 not run; HUGE_VAL: none) */
    char level2_plan[192];   /* "mesh 8x8, pp 16, 96 micro-batches, ..." or why none ("": not run) */
} ss_search_result;

/* Megatron-LM's command-line flags for c (--tensor-model-parallel-size,
 * --pipeline-model-parallel-size, --micro-batch-size, --global-batch-size,
 * --num-layers-per-virtual-pipeline-stage, --recompute-granularity /
 * --recompute-method, --sequence-parallel, --use-distributed-optimizer,
 * --overlap-grad-reduce, --ddp-bucket-size, --decoder-first/last-pipeline-
 * num-layers) for a model of `layers` layers and global batch `batch`.
 * Returns the length snprintf would. */
int ss_megatron_args(const ss_megatron_config *c, int layers, int64_t batch, char *buf,
                     size_t cap);

/* Search a plan for g on m priced by cm. cfg may be NULL (defaults). r must
 * be zero-initialised (or cleared); on success it owns three plans and three
 * simulation results (ss_search_result_clear frees them). An interrupted
 * search is SS_OK with r->interrupted = 1 and the best plan so far. On error
 * r is left cleared. r->sim is the simulator whose last run is the best plan,
 * for ss_sim_write_trace. */
ss_status ss_search_run(const ss_graph *g, const ss_machine *m, ss_costmodel *cm,
                        const ss_search_config *cfg, ss_search_result *r, ss_diag *d);
void ss_search_result_clear(ss_search_result *r);

/* The result as JSON: {"best": simulate fields, "baselines": {"data_parallel":
 * ..., "expert": ...}, "expert_plan", "speedup_vs_data_parallel",
 * "speedup_vs_expert", "search": {proposals, accepted, evaluations,
 * pruned, cut, infeasible, restarts, time_s, evals_per_s, best_found_at_s, stopped_by,
 * interrupted, time_limit_s, time_dependent, log10_space_size},
 * "plan_file", "trace_file"}: the files written (NULL: none, JSON null).
 * *out is an ss_malloc'd string. */
ss_status ss_search_result_to_json(const ss_search_result *r, const char *plan_file,
                                  const char *trace_file, char **out, ss_diag *d);

#ifdef __cplusplus
}
#endif
#endif /* SIMSEARCH_H */
