/*
 * graph.c — the graph IR container: ops and tensors in chunked arrays (so
 * borrowed pointers never move), a consumer list per tensor, and name -> id
 * hash maps for ops and tensors.
 *
 * Invariants: ops are stored in id order, which is a topological order (an op
 * only consumes tensors that existed when it was added); tensor ids index the
 * tensor array; every op's outputs/weights are exactly what ss_op_infer says
 * for its inputs and attrs. ss_graph_add_op first reserves every piece of
 * memory it may need (arrays, consumer lists, hash tables), then commits with
 * no allocation, so a failure at any point leaves the graph unchanged.
 */
#include "ops.h"

#include "json_util.h"

#include <stdio.h>
#include <string.h>

/* Open-addressing string -> id map. Slots hold id + 1 (0 = empty); keys are
 * looked up through the owner's names, so the map stores ids only. */
typedef struct namemap {
    int *slot;
    size_t cap; /* power of two, 0 when unallocated */
    size_t n;
} namemap;

/* Longest op name: leaves room for ":7" and ".weight" in tensor names. */
#define OP_NAME_MAX 80

typedef struct conslist {
    int *op;
    int n, cap;
} conslist;

/* Ops and tensors live in fixed-size chunks that never move, so pointers
 * handed out by ss_graph_op / ss_graph_tensor stay valid while ops are
 * added (only the table of chunk pointers is reallocated). */
#define CHUNK_BITS 8
#define CHUNK (1 << CHUNK_BITS)

typedef struct chunks {
    void **chunk;
    int n, cap; /* chunks allocated, table capacity */
} chunks;

struct ss_graph {
    char *name;
    chunks ops;
    int n_ops;
    chunks tensors;
    conslist *cons; /* parallel to tensors */
    int n_tensors, cap_cons;
    namemap op_names, tensor_names;
    int64_t batch;
    ss_optimizer opt;
    ss_precision prec;
};

/* ------------------------------------------------------------------ */
/* Name maps                                                           */
/* ------------------------------------------------------------------ */

static uint64_t hash_str(const char *s) { return ss_fnv_str(SS_FNV_INIT, s); }

static ss_op *OP(const ss_graph *g, int id)
{
    return &((ss_op *)g->ops.chunk[id >> CHUNK_BITS])[id & (CHUNK - 1)];
}

static ss_tensor *TEN(const ss_graph *g, int id)
{
    return &((ss_tensor *)g->tensors.chunk[id >> CHUNK_BITS])[id & (CHUNK - 1)];
}

static const char *op_name_of(const ss_graph *g, int id) { return OP(g, id)->name; }
static const char *tensor_name_of(const ss_graph *g, int id) { return TEN(g, id)->name; }

typedef const char *(*name_fn)(const ss_graph *g, int id);

static int map_find(const ss_graph *g, const namemap *m, name_fn nf, const char *key)
{
    if (!m->cap || !key)
        return -1;
    size_t mask = m->cap - 1;
    for (size_t i = hash_str(key) & mask;; i = (i + 1) & mask) {
        int v = m->slot[i];
        if (!v)
            return -1;
        if (strcmp(nf(g, v - 1), key) == 0)
            return v - 1;
    }
}

/* Insert without growing (capacity reserved by map_reserve). */
static void map_put(const ss_graph *g, namemap *m, name_fn nf, int id)
{
    size_t mask = m->cap - 1;
    size_t i = hash_str(nf(g, id)) & mask;
    while (m->slot[i])
        i = (i + 1) & mask;
    m->slot[i] = id + 1;
    m->n++;
}

/* Ensure room for `extra` more keys at load <= 1/2. On failure the map is
 * unchanged. */
static int map_reserve(const ss_graph *g, namemap *m, name_fn nf, size_t extra)
{
    size_t need = (m->n + extra) * 2;
    if (need <= m->cap)
        return 0;
    size_t cap = m->cap ? m->cap : 16;
    while (cap < need)
        cap *= 2;
    int *slot = ss_calloc(cap, sizeof *slot);
    if (!slot)
        return -1;
    namemap nm = {slot, cap, 0};
    for (size_t i = 0; i < m->cap; i++)
        if (m->slot[i])
            map_put(g, &nm, nf, m->slot[i] - 1);
    ss_free(m->slot);
    *m = nm;
    return 0;
}

/* ------------------------------------------------------------------ */
/* Construction                                                        */
/* ------------------------------------------------------------------ */

/* New empty graph named `name` (copied; NULL means ""). Training defaults:
 * batch 1, SGD, fp32. NULL on allocation failure. */
ss_graph *ss_graph_new(const char *name)
{
    ss_graph *g = ss_calloc(1, sizeof *g);
    if (!g)
        return NULL;
    g->name = ss_strdup(name ? name : "");
    if (!g->name) {
        ss_free(g);
        return NULL;
    }
    g->batch = 1;
    g->opt = SS_OPT_SGD;
    g->prec = SS_PREC_FP32;
    return g;
}

/* Free the graph and everything it owns; NULL is a no-op. */
void ss_graph_free(ss_graph *g)
{
    if (!g)
        return;
    for (int i = 0; i < g->n_tensors; i++)
        ss_free(g->cons[i].op);
    ss_free(g->cons);
    for (int i = 0; i < g->tensors.n; i++)
        ss_free(g->tensors.chunk[i]);
    ss_free(g->tensors.chunk);
    for (int i = 0; i < g->ops.n; i++)
        ss_free(g->ops.chunk[i]);
    ss_free(g->ops.chunk);
    ss_free(g->op_names.slot);
    ss_free(g->tensor_names.slot);
    ss_free(g->name);
    ss_free(g);
}

/* Ensure chunk storage for `need` items of elem bytes. Chunks allocated
 * before a failure stay (spare capacity); nothing visible changes. */
static int reserve_chunks(chunks *c, int need, size_t elem)
{
    while ((int64_t)c->n * CHUNK < need) {
        if (ss_grow((void **)&c->chunk, &c->cap, c->n + 1, sizeof(void *)))
            return -1;
        void *p = ss_malloc((size_t)CHUNK * elem);
        if (!p)
            return -1;
        c->chunk[c->n++] = p;
    }
    return 0;
}

static int has_op(const int *ops, int n, int op)
{
    for (int i = 0; i < n; i++)
        if (ops[i] == op)
            return 1;
    return 0;
}

/* Compare a shared weight with the expected description. */
static ss_status check_shared(const ss_graph *g, const ss_op_spec *spec, int j,
                              const ss_tensor *want, ss_diag *d)
{
    const ss_tensor *w = ss_graph_tensor(g, spec->weights[j]);
    if (!w)
        return ss_diag_set(d, SS_ERR_INVALID,
                           "op '%s' (%s): weight %d refers to tensor id %d, which does not exist",
                           spec->name, ss_op_type_name(spec->type), j, spec->weights[j]);
    int same = w->is_weight && w->ndim == want->ndim && w->dtype == want->dtype;
    for (int i = 0; same && i < w->ndim; i++)
        same = w->shape[i] == want->shape[i];
    if (!same) {
        char a[160], b[160];
        size_t k = 0;
        for (int i = 0; i < want->ndim; i++)
            k += (size_t)snprintf(a + k, sizeof a - k, "%s%lld", i ? "x" : "", (long long)want->shape[i]);
        k = 0;
        b[0] = '\0';
        for (int i = 0; i < w->ndim; i++)
            k += (size_t)snprintf(b + k, sizeof b - k, "%s%lld", i ? "x" : "", (long long)w->shape[i]);
        return ss_diag_set(d, SS_ERR_INVALID,
                           "op '%s' (%s): shared weight %d '%s' is %s%s %s, expected a weight "
                           "[%s] %s (%s)",
                           spec->name, ss_op_type_name(spec->type), j, w->name,
                           w->is_weight ? "" : "a non-weight ", b, ss_dtype_name(w->dtype), a,
                           ss_dtype_name(want->dtype), want->name);
    }
    return SS_OK;
}

/* Add an op (see simsearch.h). All checks and reservations happen before the
 * first change; returns the op id or -1 with d set, graph unchanged. */
int ss_graph_add_op(ss_graph *g, const ss_op_spec *spec, ss_diag *d)
{
    if (!g || !spec) {
        ss_diag_set(d, SS_ERR_INVALID, "ss_graph_add_op: NULL graph or spec");
        return -1;
    }
    const char *name = spec->name;
    if (!name || !*name) {
        ss_diag_set(d, SS_ERR_INVALID, "op of type %s has an empty name",
                    ss_op_type_name(spec->type));
        return -1;
    }
    if (strlen(name) > OP_NAME_MAX) {
        ss_diag_set(d, SS_ERR_INVALID, "op name '%.40s...' is too long (max %d characters)", name,
                    OP_NAME_MAX);
        return -1;
    }
    if (ss_graph_find_op(g, name) >= 0) {
        ss_diag_set(d, SS_ERR_INVALID, "duplicate op name '%s'", name);
        return -1;
    }
    if (spec->n_in < 0 || spec->n_in > SS_MAX_INPUTS || spec->n_w > SS_MAX_WEIGHTS) {
        ss_diag_set(d, SS_ERR_INVALID, "op '%s': operand counts out of range (%d inputs, %d weights)",
                    name, spec->n_in, spec->n_w);
        return -1;
    }
    for (int i = 0; i < spec->n_in; i++) {
        const ss_tensor *t = ss_graph_tensor(g, spec->inputs[i]);
        if (!t) {
            ss_diag_set(d, SS_ERR_INVALID,
                        "op '%s' (%s): input %d refers to tensor id %d, which does not exist",
                        name, ss_op_type_name(spec->type), i, spec->inputs[i]);
            return -1;
        }
    }
    ss_op_shape sh;
    if (ss_op_infer(g, name, spec->type, &spec->attrs, spec->n_in, spec->inputs, &sh, d))
        return -1;
    int own = spec->n_w < 0;
    if (!own) {
        if (spec->n_w != sh.n_w) {
            ss_diag_set(d, SS_ERR_INVALID, "op '%s' (%s): expects %d weight%s, %d given", name,
                        ss_op_type_name(spec->type), sh.n_w, sh.n_w == 1 ? "" : "s", spec->n_w);
            return -1;
        }
        for (int j = 0; j < sh.n_w; j++)
            if (check_shared(g, spec, j, &sh.w[j], d))
                return -1;
    }
    /* Names of the new tensors. */
    int n_new = sh.n_out + (own ? sh.n_w : 0);
    ss_tensor nt[SS_MAX_OUTPUTS + SS_MAX_WEIGHTS];
    int base = g->n_tensors, id = g->n_ops;
    for (int k = 0; k < n_new; k++) {
        ss_tensor *t = &nt[k];
        if (k < sh.n_out) {
            *t = sh.out[k];
            if (sh.n_out == 1)
                snprintf(t->name, sizeof t->name, "%.80s", name);
            else
                snprintf(t->name, sizeof t->name, "%.80s:%d", name, k);
            t->producer = id;
            t->is_weight = 0;
        } else {
            *t = sh.w[k - sh.n_out];
            char suffix[16];
            snprintf(suffix, sizeof suffix, "%.8s", t->name);
            snprintf(t->name, sizeof t->name, "%.80s.%.8s", name, suffix);
            t->producer = -1;
            t->is_weight = 1;
        }
        t->id = base + k;
        if (ss_graph_find_tensor(g, t->name) >= 0) {
            ss_diag_set(d, SS_ERR_INVALID, "op '%s': tensor name '%s' already exists", name,
                        t->name);
            return -1;
        }
        for (int q = 0; q < k; q++)
            if (strcmp(nt[q].name, t->name) == 0) {
                ss_diag_set(d, SS_ERR_INVALID, "op '%s': tensor name '%s' is produced twice",
                            name, t->name);
                return -1;
            }
    }
    /* Reserve everything. */
    if (reserve_chunks(&g->ops, g->n_ops + 1, sizeof(ss_op)) ||
        reserve_chunks(&g->tensors, g->n_tensors + n_new, sizeof(ss_tensor)) ||
        ss_grow((void **)&g->cons, &g->cap_cons, g->n_tensors + n_new, sizeof(conslist)) ||
        map_reserve(g, &g->op_names, op_name_of, 1) ||
        map_reserve(g, &g->tensor_names, tensor_name_of, (size_t)n_new))
        goto nomem;
    for (int i = 0; i < spec->n_in; i++) {
        conslist *c = &g->cons[spec->inputs[i]];
        if (!has_op(c->op, c->n, id) && ss_grow((void **)&c->op, &c->cap, c->n + 1, sizeof(int)))
            goto nomem;
    }
    /* Commit: no allocation below. */
    ss_op *op = OP(g, id);
    memset(op, 0, sizeof *op);
    op->id = id;
    snprintf(op->name, sizeof op->name, "%s", name);
    op->type = spec->type;
    op->attrs = spec->attrs;
    op->n_in = spec->n_in;
    memcpy(op->inputs, spec->inputs, (size_t)spec->n_in * sizeof(int));
    op->n_out = sh.n_out;
    for (int k = 0; k < sh.n_out; k++)
        op->outputs[k] = base + k;
    op->n_w = sh.n_w;
    for (int j = 0; j < sh.n_w; j++)
        op->weights[j] = own ? base + sh.n_out + j : spec->weights[j];
    for (int k = 0; k < n_new; k++) {
        *TEN(g, base + k) = nt[k];
        g->cons[base + k] = (conslist){NULL, 0, 0};
    }
    g->n_tensors += n_new;
    g->n_ops++;
    map_put(g, &g->op_names, op_name_of, id);
    for (int k = 0; k < n_new; k++)
        map_put(g, &g->tensor_names, tensor_name_of, base + k);
    for (int i = 0; i < spec->n_in; i++) {
        conslist *c = &g->cons[spec->inputs[i]];
        if (!has_op(c->op, c->n, id))
            c->op[c->n++] = id;
    }
    return id;
nomem:
    ss_diag_set(d, SS_ERR_NOMEM, "out of memory adding op '%s'", name);
    return -1;
}

/* Add an op with own weights (n_w = -1). Same contract as ss_graph_add_op. */
int ss_graph_add(ss_graph *g, const char *name, ss_op_type type, const ss_op_attrs *attrs,
                 int n_in, const int *inputs, ss_diag *d)
{
    ss_op_spec s;
    memset(&s, 0, sizeof s);
    s.name = name;
    s.type = type;
    if (attrs)
        s.attrs = *attrs;
    if (n_in < 0 || n_in > SS_MAX_INPUTS || (n_in > 0 && !inputs)) {
        ss_diag_set(d, SS_ERR_INVALID, "op '%s': %d inputs out of range", name ? name : "?", n_in);
        return -1;
    }
    s.n_in = n_in;
    if (n_in)
        memcpy(s.inputs, inputs, (size_t)n_in * sizeof(int));
    s.n_w = -1;
    return ss_graph_add_op(g, &s, d);
}

/* ------------------------------------------------------------------ */
/* Accessors                                                           */
/* ------------------------------------------------------------------ */

/* Getters: borrowed pointers valid until ss_graph_free (adding ops never
 * moves existing ops or tensors); out-of-range ids give NULL / -1. */
const char *ss_graph_name(const ss_graph *g) { return g->name; }
int ss_graph_n_ops(const ss_graph *g) { return g->n_ops; }
int ss_graph_n_tensors(const ss_graph *g) { return g->n_tensors; }

const ss_op *ss_graph_op(const ss_graph *g, int id)
{
    return (g && id >= 0 && id < g->n_ops) ? OP(g, id) : NULL;
}

const ss_tensor *ss_graph_tensor(const ss_graph *g, int id)
{
    return (g && id >= 0 && id < g->n_tensors) ? TEN(g, id) : NULL;
}

int ss_graph_find_op(const ss_graph *g, const char *name)
{
    return map_find(g, &g->op_names, op_name_of, name);
}

int ss_graph_find_tensor(const ss_graph *g, const char *name)
{
    return map_find(g, &g->tensor_names, tensor_name_of, name);
}

/* First output tensor id of op, or -1 if op is out of range. */
int ss_graph_out(const ss_graph *g, int op)
{
    const ss_op *o = ss_graph_op(g, op);
    return (o && o->n_out > 0) ? o->outputs[0] : -1;
}

/* Training settings carried with the model (also part of the fingerprint). */
void ss_graph_set_training(ss_graph *g, int64_t batch, ss_optimizer opt, ss_precision prec)
{
    g->batch = batch;
    g->opt = opt;
    g->prec = prec;
}

int64_t ss_graph_batch(const ss_graph *g) { return g->batch; }
ss_optimizer ss_graph_optimizer(const ss_graph *g) { return g->opt; }
ss_precision ss_graph_precision(const ss_graph *g) { return g->prec; }

/* Number of distinct ops consuming tensor (0 if out of range). */
int ss_graph_n_consumers(const ss_graph *g, int tensor)
{
    return (tensor >= 0 && tensor < g->n_tensors) ? g->cons[tensor].n : 0;
}

/* The i-th consumer (ascending op id), or -1 if out of range. */
int ss_graph_consumer(const ss_graph *g, int tensor, int i)
{
    if (tensor < 0 || tensor >= g->n_tensors || i < 0 || i >= g->cons[tensor].n)
        return -1;
    return g->cons[tensor].op[i];
}

/* ------------------------------------------------------------------ */
/* Validation, fingerprint, totals                                     */
/* ------------------------------------------------------------------ */

static int same_tensor_desc(const ss_tensor *a, const ss_tensor *b)
{
    if (a->ndim != b->ndim || a->dtype != b->dtype)
        return 0;
    for (int i = 0; i < a->ndim; i++)
        if (a->shape[i] != b->shape[i] || a->kind[i] != b->kind[i])
            return 0;
    return 1;
}

/* Unique names among n names given by nf (temporary map). */
static ss_status check_unique(const ss_graph *g, int n, name_fn nf, const char *what,
                              ss_diag *d)
{
    namemap m = {NULL, 0, 0};
    if (map_reserve(g, &m, nf, (size_t)n))
        return ss_diag_set(d, SS_ERR_NOMEM, "out of memory validating graph '%s'", g->name);
    ss_status st = SS_OK;
    for (int i = 0; i < n && st == SS_OK; i++) {
        int j = map_find(g, &m, nf, nf(g, i));
        if (j >= 0)
            st = ss_diag_set(d, SS_ERR_INVALID, "graph '%s': duplicate %s name '%s' (ids %d and %d)",
                             g->name, what, nf(g, i), j, i);
        else
            map_put(g, &m, nf, i);
    }
    ss_free(m.slot);
    return st;
}

static ss_status validate_op(const ss_graph *g, const ss_op *op, int id, ss_diag *d)
{
    const char *tn = ss_op_type_name(op->type);
    if (op->id != id)
        return ss_diag_set(d, SS_ERR_INVALID, "op '%s': id %d stored at index %d", op->name, op->id, id);
    if (op->n_in < 0 || op->n_in > SS_MAX_INPUTS || op->n_out < 1 || op->n_out > SS_MAX_OUTPUTS ||
        op->n_w < 0 || op->n_w > SS_MAX_WEIGHTS)
        return ss_diag_set(d, SS_ERR_INVALID, "op '%s' (%s): operand counts out of range", op->name, tn);
    for (int i = 0; i < op->n_in; i++) {
        const ss_tensor *t = ss_graph_tensor(g, op->inputs[i]);
        if (!t)
            return ss_diag_set(d, SS_ERR_INVALID, "op '%s' (%s): input %d (tensor id %d) out of range",
                               op->name, tn, i, op->inputs[i]);
        if (t->producer >= id)
            return ss_diag_set(d, SS_ERR_INVALID,
                               "op '%s' (%s): input '%s' is produced by op %d, not an earlier op "
                               "(cycle or bad order)", op->name, tn, t->name, t->producer);
        if (t->producer < 0 && !t->is_weight)
            return ss_diag_set(d, SS_ERR_INVALID, "op '%s' (%s): input '%s' has no producer",
                               op->name, tn, t->name);
    }
    for (int k = 0; k < op->n_out; k++) {
        const ss_tensor *t = ss_graph_tensor(g, op->outputs[k]);
        if (!t || t->producer != id || t->is_weight)
            return ss_diag_set(d, SS_ERR_INVALID, "op '%s' (%s): output %d is not a tensor it produces",
                               op->name, tn, k);
    }
    for (int j = 0; j < op->n_w; j++) {
        const ss_tensor *t = ss_graph_tensor(g, op->weights[j]);
        if (!t || !t->is_weight || t->producer != -1)
            return ss_diag_set(d, SS_ERR_INVALID, "op '%s' (%s): weight %d is not a weight tensor",
                               op->name, tn, j);
    }
    ss_op_shape sh;
    if (ss_op_infer(g, op->name, op->type, &op->attrs, op->n_in, op->inputs, &sh, d))
        return SS_ERR_INVALID;
    if (sh.n_out != op->n_out || sh.n_w != op->n_w)
        return ss_diag_set(d, SS_ERR_INVALID, "op '%s' (%s): has %d outputs and %d weights, "
                           "expected %d and %d", op->name, tn, op->n_out, op->n_w, sh.n_out, sh.n_w);
    for (int k = 0; k < op->n_out; k++)
        if (!same_tensor_desc(&sh.out[k], TEN(g, op->outputs[k])))
            return ss_diag_set(d, SS_ERR_INVALID, "op '%s' (%s): output '%s' does not match the "
                               "inferred shape, kinds or dtype", op->name, tn,
                               TEN(g, op->outputs[k])->name);
    for (int j = 0; j < op->n_w; j++) {
        const ss_tensor *w = TEN(g, op->weights[j]);
        int ok = w->ndim == sh.w[j].ndim && w->dtype == sh.w[j].dtype;
        for (int i = 0; ok && i < w->ndim; i++)
            ok = w->shape[i] == sh.w[j].shape[i];
        if (!ok)
            return ss_diag_set(d, SS_ERR_INVALID, "op '%s' (%s): weight '%s' does not match the "
                               "expected shape or dtype", op->name, tn, w->name);
    }
    return SS_OK;
}

/* Full validation (see simsearch.h). Read-only; SS_ERR_INVALID names the op
 * or tensor at fault, SS_ERR_NOMEM if the temporary name map cannot be made. */
ss_status ss_graph_validate(const ss_graph *g, ss_diag *d)
{
    for (int i = 0; i < g->n_tensors; i++) {
        const ss_tensor *t = TEN(g, i);
        if (t->id != i)
            return ss_diag_set(d, SS_ERR_INVALID, "tensor '%s': id %d stored at index %d", t->name, t->id, i);
        if (t->producer < -1 || t->producer >= g->n_ops)
            return ss_diag_set(d, SS_ERR_INVALID, "tensor '%s': producer %d out of range", t->name,
                               t->producer);
    }
    ss_status st = check_unique(g, g->n_ops, op_name_of, "op", d);
    if (st == SS_OK)
        st = check_unique(g, g->n_tensors, tensor_name_of, "tensor", d);
    for (int i = 0; i < g->n_ops && st == SS_OK; i++)
        st = validate_op(g, OP(g, i), i, d);
    return st;
}

static uint64_t fnv_int(uint64_t h, int64_t v) { return ss_fnv_i64(h, v); }

static uint64_t hash_attrs(uint64_t h, const ss_op_attrs *a)
{
    h = fnv_int(h, a->ndim);
    for (int i = 0; i < SS_MAX_DIMS; i++) {
        h = fnv_int(h, a->shape[i]);
        h = fnv_int(h, a->kind[i]);
        h = fnv_int(h, a->perm[i]);
    }
    h = fnv_int(h, a->dtype);
    h = fnv_int(h, a->out_features);
    h = fnv_int(h, a->use_bias);
    h = fnv_int(h, a->trans_a);
    h = fnv_int(h, a->trans_b);
    h = fnv_int(h, a->out_channels);
    h = fnv_int(h, a->groups);
    for (int i = 0; i < 2; i++) {
        h = fnv_int(h, a->kernel[i]);
        h = fnv_int(h, a->stride[i]);
        h = fnv_int(h, a->pad[i]);
    }
    h = fnv_int(h, a->pool);
    h = fnv_int(h, a->unary);
    h = fnv_int(h, a->binary);
    h = fnv_int(h, a->axis);
    h = fnv_int(h, a->n_split);
    for (int i = 0; i < SS_MAX_OUTPUTS; i++)
        h = fnv_int(h, a->split_sizes[i]);
    h = ss_fnv_f64(h, a->rate);
    h = fnv_int(h, a->vocab);
    h = fnv_int(h, a->dim);
    h = fnv_int(h, a->lstm_mode);
    h = fnv_int(h, a->hidden);
    h = fnv_int(h, a->return_sequences);
    h = fnv_int(h, a->heads);
    h = fnv_int(h, a->causal);
    if (a->view) /* only when set: graphs without views keep their fingerprints */
        h = fnv_int(h, 0x76696577);
    if (a->topk || a->capacity != 0) { /* likewise: MoE attributes only when set */
        h = fnv_int(h, a->topk);
        h = ss_fnv_f64(h, a->capacity);
    }
    return h;
}

static uint64_t hash_tensor_shape(uint64_t h, const ss_tensor *t)
{
    h = fnv_int(h, t->ndim);
    for (int k = 0; k < t->ndim; k++) {
        h = fnv_int(h, t->shape[k]);
        h = fnv_int(h, t->kind[k]);
    }
    return fnv_int(h, t->dtype);
}

uint64_t ss_op_signature(const ss_graph *g, int op)
{
    if (op < 0 || op >= g->n_ops)
        return 0;
    const ss_op *o = OP(g, op);
    uint64_t h = fnv_int(SS_FNV_INIT, o->type);
    h = hash_attrs(h, &o->attrs);
    h = fnv_int(h, o->n_in);
    for (int k = 0; k < o->n_in; k++)
        h = hash_tensor_shape(h, TEN(g, o->inputs[k]));
    h = fnv_int(h, o->n_w);
    for (int k = 0; k < o->n_w; k++)
        h = hash_tensor_shape(h, TEN(g, o->weights[k]));
    h = fnv_int(h, o->n_out);
    for (int k = 0; k < o->n_out; k++)
        h = hash_tensor_shape(h, TEN(g, o->outputs[k]));
    return h;
}

/* Fingerprint over ops (names, types, attrs field by field, operands),
 * tensors (names, shapes, kinds, dtypes, weight flags) and the training
 * settings. The graph's own name is left out: renaming a model file does not
 * invalidate plans made for it. */
uint64_t ss_graph_fingerprint(const ss_graph *g)
{
    uint64_t h = SS_FNV_INIT;
    h = fnv_int(h, g->n_ops);
    h = fnv_int(h, g->n_tensors);
    for (int i = 0; i < g->n_tensors; i++) {
        const ss_tensor *t = TEN(g, i);
        h = ss_fnv_str(h, t->name);
        h = fnv_int(h, t->ndim);
        for (int k = 0; k < t->ndim; k++) {
            h = fnv_int(h, t->shape[k]);
            h = fnv_int(h, t->kind[k]);
        }
        h = fnv_int(h, t->dtype);
        h = fnv_int(h, t->producer);
        h = fnv_int(h, t->is_weight);
    }
    for (int i = 0; i < g->n_ops; i++) {
        const ss_op *op = OP(g, i);
        h = ss_fnv_str(h, op->name);
        h = fnv_int(h, op->type);
        h = hash_attrs(h, &op->attrs);
        h = fnv_int(h, op->n_in);
        for (int k = 0; k < op->n_in; k++)
            h = fnv_int(h, op->inputs[k]);
        h = fnv_int(h, op->n_out);
        for (int k = 0; k < op->n_out; k++)
            h = fnv_int(h, op->outputs[k]);
        h = fnv_int(h, op->n_w);
        for (int k = 0; k < op->n_w; k++)
            h = fnv_int(h, op->weights[k]);
    }
    h = fnv_int(h, g->batch);
    h = fnv_int(h, g->opt);
    h = fnv_int(h, g->prec);
    return h;
}

/* Trainable parameters: every weight tensor once, however many ops share it. */
int64_t ss_graph_parameters(const ss_graph *g)
{
    int64_t n = 0;
    for (int i = 0; i < g->n_tensors; i++) {
        const ss_tensor *t = TEN(g, i);
        if (!t->is_weight)
            continue;
        int64_t v = 1;
        for (int k = 0; k < t->ndim; k++)
            v *= t->shape[k];
        n += v;
    }
    return n;
}

/* Forward FLOPs of the whole graph: the sum of every op's full-tile work. */
double ss_graph_forward_flops(const ss_graph *g)
{
    double f = 0;
    for (int i = 0; i < g->n_ops; i++) {
        ss_tile t;
        ss_work w;
        ss_op_full_tile(g, OP(g, i), &t);
        ss_op_tile_work(g, OP(g, i), &t, &w);
        f += w.fwd_flops;
    }
    return f;
}
