/*
 * op_table.h — the operator table: one entry (ss_op_class) per operator
 * type, holding everything core knows about that type, in the way SQLite's
 * virtual-table modules and Lua's library tables keep a type's behaviour in
 * one place.
 *
 * The rules:
 *   - Every ss_op_type has exactly one entry, found by ss_op_class_of(). The
 *     entries live in the family files (ops_dense.c, ops_conv.c,
 *     ops_elementwise.c, ops_shape.c, ops_rnn.c); the index that maps a type
 *     to its entry is in ops.c. tests/core/test_op_table.c fails when a type
 *     has no entry or an entry lacks a required hook.
 *   - The public operator functions of simsearch.h (ss_op_type_name,
 *     ss_op_infer via ss_graph_add_op, ss_op_split_mask, ss_op_contraction,
 *     ss_op_input_region, ss_op_output_region, ss_op_tile_work) and the model
 *     JSON reader and writer (model_io.c) are thin dispatchers: they do the
 *     checks common to all types and call the entry's hook. No other code in
 *     core switches on the operator type.
 *   - Hooks are pure functions of their arguments; they never allocate, never
 *     print and touch no graph state. Required hooks: infer, split_mask,
 *     input_region, work. Optional hooks (NULL) have the default stated at
 *     their field.
 *   - Layers above core (kernels/, profiler/, runtime/) index their own
 *     per-type tables by the same ss_op_type; core never refers to them.
 *
 * docs/operators.md walks through adding an operator type.
 */
#ifndef SS_CORE_OP_TABLE_H
#define SS_CORE_OP_TABLE_H

#include "core/json_util.h"
#include "core/ops.h"

/* Keys every operator object of the model JSON may hold (see the keys field). */
#define SS_OP_COMMON_KEYS "name", "type", "inputs", "weights"

/* Arity value: any number of inputs from 1 to SS_MAX_INPUTS. */
#define SS_OP_ANY_INPUTS (-1)

/* Flags of an entry. */
enum {
    SS_OPF_NO_KERNEL = 1u << 0, /* never runs a kernel (data arrives; a view) */
    SS_OPF_VIEW_ATTR = 1u << 1  /* runs no kernel when attrs.view is set */
};

/* Arguments of shape inference: the op's name (for messages) and type, its
 * attributes and its n_in input tensors, all present (the dispatcher checked
 * the count against the entry's arity and that every input exists). */
typedef struct ss_infer_args {
    const char *name;
    ss_op_type type;
    const ss_op_attrs *a;
    const ss_tensor *const *in;
    int n_in;
    ss_diag *d;
} ss_infer_args;

/* Arguments of the region function: tile t of op, and the operand asked for
 * (inputs first, then weights; w = operand - op->n_in is the weight index,
 * negative for an input). T is that operand, o is output 0; both exist. */
typedef struct ss_region_args {
    const ss_graph *g;
    const ss_op *op;
    const ss_tile *t;
    int operand;
    int w;
    const ss_tensor *T;
    const ss_tensor *o;
} ss_region_args;

/* Arguments of the work function, with the quantities most types need,
 * computed once by the dispatcher: o is output 0, osz its element size,
 * vol the tile's output volume, cols the tile's extent of the last output
 * dim, red the contraction range's length, x_bytes the bytes of input 0's
 * region (0 without inputs), first_red whether the tile holds the start of
 * the contraction range (bias is added once). */
typedef struct ss_work_args {
    const ss_graph *g;
    const ss_op *op;
    const ss_tile *t;
    const ss_tensor *o;
    double osz, vol, cols, red, x_bytes;
    int first_red;
} ss_work_args;

/* Where an operator's attributes are read from (model_io.c fills it): the
 * file and JSON path of the operator object o (for messages), the file's
 * batch and the batch override (rebatch > 0), and the already resolved
 * input tensor ids. Readers report errors through the ss_attr_* helpers. */
typedef struct ss_attr_reader {
    const char *file;
    const char *jp;
    const json_t *o;
    ss_diag *d;
    int64_t batch, rebatch;
    const ss_graph *g;
    const int *inputs;
    int n_in;
} ss_attr_reader;

/* Where an operator's attributes are written to: the operator object o;
 * ok drops to 0 when an allocation failed (the writer then gives up). */
typedef struct ss_attr_writer {
    json_t *o;
    int ok;
} ss_attr_writer;

/* One operator type. */
typedef struct ss_op_class {
    ss_op_type type;
    const char *name; /* in the model JSON and messages: "linear" ... */
    unsigned flags;   /* SS_OPF_* */

    /* Number of inputs, or SS_OP_ANY_INPUTS; arity_of, when set, decides
     * instead from the attributes (an LSTM cell takes three). */
    int arity;
    int (*arity_of)(const ss_op_attrs *a);

    /* Outputs and own weights from the inputs (see ss_op_infer in ops.h):
     * SS_OK, or SS_ERR_INVALID through ss_op_fail. The dispatcher checks the
     * sizes of everything described afterwards. */
    ss_status (*infer)(const ss_infer_args *q, ss_op_shape *s);

    /* Splittable dims of output o (output 0, present): see ss_op_split_mask. */
    unsigned (*split_mask)(const ss_graph *g, const ss_op *op, const ss_tensor *o);
    /* Contraction extent; x is input 0 (present). NULL: none (0). */
    int64_t (*contraction)(const ss_graph *g, const ss_op *op, const ss_tensor *x);

    /* Region of operand q->operand that tile q->t needs. On entry out holds
     * the operand's full extent; the hook narrows the dims the tile limits. */
    void (*input_region)(const ss_region_args *q, ss_region *out);
    /* Region of output idx (1 <= idx < op->n_out) that tile t produces. On
     * entry out is the tile's output-0 region. NULL: that region as it is. */
    void (*output_region)(const ss_graph *g, const ss_op *op, const ss_tile *t, int idx,
                          ss_region *out);

    /* Work of a tile. On entry w is zero but for fwd_bytes (operand regions
     * read plus output regions written) and bwd_bytes (twice that); the hook
     * sets the FLOPs and saved bytes and may change the bytes. */
    void (*work)(const ss_work_args *q, ss_work *w);

    /* Model JSON: the keys an operator object may hold (NULL-terminated, in
     * the order messages list them), how attributes are read from it and
     * written to it. read_attrs NULL: no attributes (the input type's come
     * from its tensor declaration, model_io.c). write_attrs NULL: nothing to
     * write. */
    const char *const *keys;
    ss_status (*read_attrs)(const ss_attr_reader *r, ss_op_attrs *a);
    void (*write_attrs)(ss_attr_writer *w, const ss_graph *g, const ss_op *op);
} ss_op_class;

/* The entry of type t, or NULL when t is out of range. */
const ss_op_class *ss_op_class_of(ss_op_type t);

/* The entries, one per type (defined in the family files). */
extern const ss_op_class ss_op_class_input, ss_op_class_linear, ss_op_class_batch_matmul,
    ss_op_class_conv2d, ss_op_class_pool2d, ss_op_class_batchnorm, ss_op_class_layernorm,
    ss_op_class_unary, ss_op_class_binary, ss_op_class_softmax, ss_op_class_dropout,
    ss_op_class_embedding, ss_op_class_concat, ss_op_class_split, ss_op_class_reshape,
    ss_op_class_transpose, ss_op_class_lstm, ss_op_class_attention, ss_op_class_softmax_ce,
    ss_op_class_rmsnorm, ss_op_class_rotary, ss_op_class_moe_dispatch,
    ss_op_class_expert_linear, ss_op_class_moe_combine, ss_op_class_flash_attention,
    ss_op_class_expand;

/* Balanced mixture-of-experts routing (ops_llm.c has the rules): X experts,
 * topk per token, g = X / topk tokens per group, T tokens (S per sample),
 * Cr = T / g groups, C slots per expert (Cr times the capacity factor,
 * rounded up). */
typedef struct ss_moe_geo {
    int64_t X, topk, g, T, S, Cr, C;
} ss_moe_geo;

/* The geometry of N x S tokens over X experts; 0, or -1 when topk does not
 * divide X, g does not divide the tokens or the capacity factor (0: 1) is
 * outside [1, 64]. */
int ss_moe_geometry(int64_t N, int64_t S, int64_t X, int64_t topk, double capacity,
                    ss_moe_geo *m);
/* The slot of group j (0 <= j < Cr) in every expert: ceil(j * C / Cr). */
int64_t ss_moe_first_slot(const ss_moe_geo *m, int64_t j);

/* ------------------------------------------------------------------ */
/* Helpers for entries (ops.c)                                         */
/* ------------------------------------------------------------------ */

/* Record "op 'NAME' (TYPE): <message>" as SS_ERR_INVALID; returns it. */
ss_status ss_op_fail(const ss_infer_args *q, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

int ss_dtype_is_float(ss_dtype t);
int ss_dtype_is_int(ss_dtype t);
/* "[2, 3, 4]" into buf (for messages); returns buf. */
const char *ss_shape_str(int ndim, const int64_t *s, char *buf, size_t n);

/* Describe a tensor: ndim dims from shape, kinds (NULL: parameter), dtype. */
void ss_op_set_tensor(ss_tensor *t, int ndim, const int64_t *shape, const ss_dim_kind *kind,
                      ss_dtype dt);
/* Append an output described by ndim/shape/kind/dtype; returns it. */
ss_tensor *ss_op_add_out(ss_op_shape *s, int ndim, const int64_t *shape,
                         const ss_dim_kind *kind, ss_dtype dt);
/* Append an output equal to x (shape, kinds) with dtype dt; returns it. */
ss_tensor *ss_op_out_like(ss_op_shape *s, const ss_tensor *x, ss_dtype dt);
/* Append an own weight named by its suffix ("weight", "bias" ...). */
void ss_op_add_weight(ss_op_shape *s, const char *suffix, int ndim, const int64_t *shape,
                      ss_dtype dt);
void ss_op_add_weight1(ss_op_shape *s, const char *suffix, int64_t a, ss_dtype dt);
void ss_op_add_weight2(ss_op_shape *s, const char *suffix, int64_t a, int64_t b, ss_dtype dt);

/* Split masks and contraction shared by several entries. */
unsigned ss_op_mask_all(const ss_graph *g, const ss_op *op, const ss_tensor *o);
/* Every dim but the (normalised) attrs.axis of input 0; 0 without input. */
unsigned ss_op_mask_but_axis(const ss_graph *g, const ss_op *op, const ss_tensor *o);

/* Attribute "axis" (softmax, concat, split): read and write. */
ss_status ss_op_read_axis(const ss_attr_reader *r, ss_op_attrs *a);
void ss_op_write_axis(ss_attr_writer *w, const ss_graph *g, const ss_op *op);

/* Attribute "gemm" (linear, expert_linear): optional "f8", which sets
 * attrs.dtype to SS_F8; written only when it is. */
ss_status ss_op_read_gemm(const ss_attr_reader *r, ss_op_attrs *a);
void ss_op_write_gemm(ss_attr_writer *w, const ss_op *op);

/* Work of a GEMM with optional bias (linear, expert_linear). */
void ss_op_gemm_work(const ss_work_args *q, ss_work *w);

/* Region of the tile itself (elementwise operands). */
void ss_op_region_tile(const ss_region_args *q, ss_region *out);

static inline int64_t ss_range_len(ss_range r) { return r.hi > r.lo ? r.hi - r.lo : 0; }
static inline ss_range ss_range_make(int64_t lo, int64_t hi) { return (ss_range){lo, hi}; }

/* Bytes of the region of operand i that tile t needs, and of operands
 * [lo, hi) together. */
double ss_op_operand_bytes(const ss_graph *g, const ss_op *op, const ss_tile *t, int i);
double ss_op_operands_bytes(const ss_graph *g, const ss_op *op, const ss_tile *t, int lo,
                            int hi);

/* ------------------------------------------------------------------ */
/* Helpers for attribute readers and writers (model_io.c)              */
/* ------------------------------------------------------------------ */

/* Typed attribute getters: the rules and messages of the model loader
 * ("FILE: $.operators[i].key: ..."); required 0: *out untouched if absent. */
ss_status ss_attr_i64(const ss_attr_reader *r, const char *key, int required, int64_t lo,
                      int64_t hi, int64_t *out);
ss_status ss_attr_int(const ss_attr_reader *r, const char *key, int required, int lo, int hi,
                      int *out);
ss_status ss_attr_bool(const ss_attr_reader *r, const char *key, int *out); /* optional */
ss_status ss_attr_num(const ss_attr_reader *r, const char *key, int required, double lo,
                      double hi, double *out);
ss_status ss_attr_str(const ss_attr_reader *r, const char *key, int required, size_t max_len,
                      const char **out);
/* A string that must be one of names[] (NULL-terminated); *out its index. */
ss_status ss_attr_enum(const ss_attr_reader *r, const char *key, int required,
                       const char *const *names, int *out);
/* An integer array of min_n..max_n entries, each in [lo, hi]; *n its length. */
ss_status ss_attr_ints(const ss_attr_reader *r, const char *key, int required, int min_n,
                       int max_n, int64_t lo, int64_t hi, int64_t *out, int *n);
/* Record "FILE: PATH.key: <message>" with status st; returns st. */
ss_status ss_attr_fail(const ss_attr_reader *r, ss_status st, const char *key,
                       const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

/* Largest dim and extent attribute the model format accepts (2^32). */
#define SS_ATTR_MAX_DIM (INT64_C(1) << 32)

/* Attribute setters. */
void ss_attr_put_int(ss_attr_writer *w, const char *key, int64_t v);
void ss_attr_put_bool(ss_attr_writer *w, const char *key, int v);
void ss_attr_put_real(ss_attr_writer *w, const char *key, double v);
void ss_attr_put_str(ss_attr_writer *w, const char *key, const char *v);
void ss_attr_put_ints(ss_attr_writer *w, const char *key, const int64_t *v, int n);

#endif
