/*
 * model_io.c — the "simsearch-model" JSON format: load (strict), save
 * (atomic) and serialise a graph. The format is described in
 * docs/model-format.md.
 *
 * A file lists the graph inputs' and weights' tensors ("tensors") and the
 * operators in a topological order ("operators"); loading replays the
 * operators through ss_graph_add_op, so shapes are re-inferred and checked
 * against the declarations. Invariants: save then load gives a graph with the
 * same fingerprint (same op order, names, attrs, tensor ids, training
 * settings); every load error names the file and either line:column (syntax)
 * or a JSON path, and no graph is returned on error. Operator attributes are
 * read and written by the operator table's entries (op_table.h) through the
 * ss_attr_* helpers defined here, so each type's keys live with its entry.
 */
#include "model_io.h"
#include "op_table.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define MAX_DIM SS_ATTR_MAX_DIM
#define MAX_BATCH (INT64_C(1) << 32)
#define PATH_MAX_LEN 160

/* ------------------------------------------------------------------ */
/* Loading                                                             */
/* ------------------------------------------------------------------ */

typedef struct loader {
    const char *file;
    ss_diag *d;
    int64_t batch;     /* the file's batch */
    int64_t rebatch;   /* > 0: override */
    json_t *decl;      /* tensor name -> index into tensors[] */
    json_t *tensors;   /* the "tensors" array */
    unsigned char *used;
    json_t *ops;       /* the "operators" array */
    json_t *op_index;  /* op name -> index into ops[] */
} loader;

static ss_status nomem(loader *L)
{
    return ss_diag_set(L->d, SS_ERR_NOMEM, "%s: out of memory while loading the model", L->file);
}

/* String value of obj[key] that must be one of names[]; *out its index. */
static ss_status enum_at(const char *file, ss_diag *d, const char *jp, const json_t *obj,
                         const char *key, int required, const char *const *names, int *out)
{
    const char *s = NULL;
    ss_status st = ss_json_get_str(file, jp, obj, key, required, 64, &s, d);
    if (st || !s)
        return st;
    char list[160] = "";
    size_t used = 0;
    for (int i = 0; names[i]; i++) {
        if (!strcmp(names[i], s)) {
            *out = i;
            return SS_OK;
        }
        used += (size_t)snprintf(list + used, sizeof list - used, "%s%s", i ? ", " : "",
                                 names[i]);
    }
    return ss_diag_set(d, SS_ERR_PARSE, "%s: %s.%s: unknown value \"%s\" (expected one of: %s)",
                       file, jp, key, s, list);
}

static ss_status get_enum(loader *L, const char *jp, const json_t *obj, const char *key,
                          int required, const char *const *names, int *out)
{
    return enum_at(L->file, L->d, jp, obj, key, required, names, out);
}

/* Integer array obj[key] with n in [min_n, max_n] entries, each in [lo, hi]. */
static ss_status ints_at(const char *file, ss_diag *d, const char *jp, const json_t *obj,
                         const char *key, int required, int min_n, int max_n, int64_t lo,
                         int64_t hi, int64_t *out, int *n)
{
    json_t *a = NULL;
    ss_status st = ss_json_get_child(file, jp, obj, key, JSON_ARRAY, required, &a, d);
    if (st || !a)
        return st;
    int len = (int)json_array_size(a);
    if (len < min_n || len > max_n) {
        if (min_n == max_n)
            return ss_diag_set(d, SS_ERR_INVALID, "%s: %s.%s: expected %d entries, got %d",
                               file, jp, key, min_n, len);
        return ss_diag_set(d, SS_ERR_INVALID, "%s: %s.%s: expected %d to %d entries, got %d",
                           file, jp, key, min_n, max_n, len);
    }
    for (int i = 0; i < len; i++) {
        json_t *v = json_array_get(a, (size_t)i);
        if (!json_is_integer(v))
            return ss_diag_set(d, SS_ERR_PARSE, "%s: %s.%s[%d]: expected an integer, got %s",
                               file, jp, key, i, ss_json_type_name(v));
        json_int_t x = json_integer_value(v);
        if (x < lo || x > hi)
            return ss_diag_set(d, SS_ERR_INVALID,
                               "%s: %s.%s[%d]: value %lld out of range (expected %lld to %lld)",
                               file, jp, key, i, (long long)x, (long long)lo, (long long)hi);
        out[i] = x;
    }
    *n = len;
    return SS_OK;
}

static ss_status get_ints(loader *L, const char *jp, const json_t *obj, const char *key,
                          int required, int min_n, int max_n, int64_t lo, int64_t hi,
                          int64_t *out, int *n)
{
    return ints_at(L->file, L->d, jp, obj, key, required, min_n, max_n, lo, hi, out, n);
}

static ss_status get_i64(loader *L, const char *jp, const json_t *o, const char *key, int req,
                         int64_t lo, int64_t hi, int64_t *out)
{
    return ss_json_get_int(L->file, jp, o, key, req, lo, hi, out, L->d);
}

/* ------------------------------------------------------------------ */
/* Attribute getters for the operator table's readers (op_table.h)     */
/* ------------------------------------------------------------------ */

/* See op_table.h. */
ss_status ss_attr_i64(const ss_attr_reader *r, const char *key, int required, int64_t lo,
                      int64_t hi, int64_t *out)
{
    return ss_json_get_int(r->file, r->jp, r->o, key, required, lo, hi, out, r->d);
}

/* See op_table.h. */
ss_status ss_attr_int(const ss_attr_reader *r, const char *key, int required, int lo, int hi,
                      int *out)
{
    int64_t v = *out;
    ss_status st = ss_json_get_int(r->file, r->jp, r->o, key, required, lo, hi, &v, r->d);
    if (!st)
        *out = (int)v;
    return st;
}

/* See op_table.h. */
ss_status ss_attr_bool(const ss_attr_reader *r, const char *key, int *out)
{
    return ss_json_get_bool(r->file, r->jp, r->o, key, 0, out, r->d);
}

/* See op_table.h. */
ss_status ss_attr_num(const ss_attr_reader *r, const char *key, int required, double lo,
                      double hi, double *out)
{
    return ss_json_get_num(r->file, r->jp, r->o, key, required, lo, hi, out, r->d);
}

/* See op_table.h. */
ss_status ss_attr_str(const ss_attr_reader *r, const char *key, int required, size_t max_len,
                      const char **out)
{
    return ss_json_get_str(r->file, r->jp, r->o, key, required, max_len, out, r->d);
}

/* See op_table.h. */
ss_status ss_attr_enum(const ss_attr_reader *r, const char *key, int required,
                       const char *const *names, int *out)
{
    return enum_at(r->file, r->d, r->jp, r->o, key, required, names, out);
}

/* See op_table.h. */
ss_status ss_attr_ints(const ss_attr_reader *r, const char *key, int required, int min_n,
                       int max_n, int64_t lo, int64_t hi, int64_t *out, int *n)
{
    return ints_at(r->file, r->d, r->jp, r->o, key, required, min_n, max_n, lo, hi, out, n);
}

/* See op_table.h. */
ss_status ss_attr_fail(const ss_attr_reader *r, ss_status st, const char *key,
                       const char *fmt, ...)
{
    char buf[SS_DIAG_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return ss_diag_set(r->d, st, "%s: %s.%s: %s", r->file, r->jp, key, buf);
}

/* Check the "tensors" declarations: unique names, valid roles and shapes. */
static ss_status read_tensors(loader *L)
{
    static const char *const keys[] = {"name", "role", "shape", "dtype", "kinds", NULL};
    static const char *const roles[] = {"input", "weight", NULL};
    char jp[PATH_MAX_LEN];
    size_t n = json_array_size(L->tensors);
    for (size_t i = 0; i < n; i++) {
        json_t *t = json_array_get(L->tensors, i);
        snprintf(jp, sizeof jp, "$.tensors[%zu]", i);
        ss_status st = ss_json_check_keys(L->file, jp, t, keys, L->d);
        const char *name = NULL, *dt = NULL;
        int role = 0, nd = 0;
        int64_t shape[SS_MAX_DIMS];
        ss_dtype dtype;
        if (!st)
            st = ss_json_get_str(L->file, jp, t, "name", 1, SS_NAME_MAX, &name, L->d);
        if (!st)
            st = get_enum(L, jp, t, "role", 1, roles, &role);
        if (!st)
            st = get_ints(L, jp, t, "shape", 1, 1, SS_MAX_DIMS, 1, MAX_DIM, shape, &nd);
        if (!st)
            st = ss_json_get_str(L->file, jp, t, "dtype", 1, 16, &dt, L->d);
        if (st)
            return st;
        if (ss_dtype_parse(dt, &dtype))
            return ss_diag_set(L->d, SS_ERR_PARSE,
                               "%s: %s.dtype: unknown dtype \"%s\" (expected f32, f16, bf16, "
                               "i32 or i64)", L->file, jp, dt);
        json_t *kinds = json_object_get(t, "kinds");
        if (role == 0 && !kinds)
            return ss_diag_set(L->d, SS_ERR_PARSE,
                               "%s: %s: missing required key \"kinds\" (dim kinds of an input)",
                               L->file, jp);
        if (role == 1 && kinds)
            return ss_diag_set(L->d, SS_ERR_PARSE,
                               "%s: %s.kinds: only inputs have dim kinds (weight dims are "
                               "parameter dims)", L->file, jp);
        if (kinds) {
            if (!json_is_array(kinds) || (int)json_array_size(kinds) != nd)
                return ss_diag_set(L->d, SS_ERR_INVALID,
                                   "%s: %s.kinds: expected an array of %d dim kinds (one per "
                                   "shape dim)", L->file, jp, nd);
            for (int k = 0; k < nd; k++) {
                json_t *v = json_array_get(kinds, (size_t)k);
                const char *s = json_is_string(v) ? json_string_value(v) : "";
                int ok = 0;
                for (int m = 0; m <= SS_DIM_PARAMETER; m++)
                    ok |= !strcmp(s, ss_dim_kind_name((ss_dim_kind)m));
                if (!ok)
                    return ss_diag_set(L->d, SS_ERR_PARSE,
                                       "%s: %s.kinds[%d]: expected \"sample\", \"attribute\" or "
                                       "\"parameter\"", L->file, jp, k);
                if (!strcmp(s, "sample") && shape[k] != L->batch)
                    return ss_diag_set(L->d, SS_ERR_INVALID,
                                       "%s: %s.shape[%d]: sample dim %lld differs from the batch "
                                       "%lld ($.batch)", L->file, jp, k, (long long)shape[k],
                                       (long long)L->batch);
            }
        }
        if (json_object_get(L->decl, name))
            return ss_diag_set(L->d, SS_ERR_INVALID, "%s: %s.name: duplicate tensor name \"%s\"",
                               L->file, jp, name);
        if (json_object_set_new(L->decl, name, json_integer((json_int_t)i)))
            return nomem(L);
    }
    return SS_OK;
}

/* The declaration of tensor `name` as a json object (or NULL) and its index. */
static json_t *find_decl(loader *L, const char *name, size_t *idx)
{
    json_t *v = json_object_get(L->decl, name);
    if (!v)
        return NULL;
    *idx = (size_t)json_integer_value(v);
    return json_array_get(L->tensors, *idx);
}

static void decl_shape(const json_t *t, int *nd, int64_t *shape)
{
    json_t *a = json_object_get(t, "shape");
    *nd = (int)json_array_size(a);
    for (int i = 0; i < *nd; i++)
        shape[i] = json_integer_value(json_array_get(a, (size_t)i));
}

static ss_dtype decl_dtype(const json_t *t)
{
    ss_dtype dt = SS_F32;
    ss_dtype_parse(json_string_value(json_object_get(t, "dtype")), &dt);
    return dt;
}

/* Attributes of an input op from its tensor declaration (batch override
 * applied to sample dims). */
static ss_status input_attrs(loader *L, const char *jp, const char *name, ss_op_attrs *a)
{
    size_t k;
    json_t *t = find_decl(L, name, &k);
    if (!t || strcmp(json_string_value(json_object_get(t, "role")), "input") != 0)
        return ss_diag_set(L->d, SS_ERR_INVALID,
                           "%s: %s: input operator \"%s\" has no tensor declared with role "
                           "\"input\" and that name in $.tensors", L->file, jp, name);
    L->used[k] = 1;
    decl_shape(t, &a->ndim, a->shape);
    a->dtype = decl_dtype(t);
    json_t *kinds = json_object_get(t, "kinds");
    for (int i = 0; i < a->ndim; i++) {
        const char *s = json_string_value(json_array_get(kinds, (size_t)i));
        a->kind[i] = !strcmp(s, "sample") ? SS_DIM_SAMPLE
                     : !strcmp(s, "attribute") ? SS_DIM_ATTRIBUTE : SS_DIM_PARAMETER;
        if (L->rebatch > 0 && a->kind[i] == SS_DIM_SAMPLE)
            a->shape[i] = L->rebatch;
    }
    return SS_OK;
}

/* Does an operator after index `after` produce tensor `name` ("op" or "op:k")? */
static const char *later_producer(loader *L, const char *name, size_t after)
{
    char base[SS_NAME_MAX];
    snprintf(base, sizeof base, "%s", name);
    char *colon = strrchr(base, ':');
    for (int pass = 0; pass < 2; pass++) {
        json_t *v = json_object_get(L->op_index, base);
        if (v && (size_t)json_integer_value(v) > after)
            return json_string_value(
                json_object_get(json_array_get(L->ops, (size_t)json_integer_value(v)), "name"));
        if (!colon)
            break;
        *colon = '\0';
    }
    return NULL;
}

/* Resolve a list of tensor names (inputs or weights) to ids. */
static ss_status read_refs(loader *L, const char *jp, const json_t *o, const char *key,
                           size_t opi, ss_graph *g, int want_weight, int max, int *ids, int *n)
{
    json_t *a = NULL;
    ss_status st = ss_json_get_child(L->file, jp, o, key, JSON_ARRAY, 0, &a, L->d);
    if (st || !a)
        return st;
    int len = (int)json_array_size(a);
    if (len > max)
        return ss_diag_set(L->d, SS_ERR_INVALID, "%s: %s.%s: %d entries, at most %d allowed",
                           L->file, jp, key, len, max);
    for (int i = 0; i < len; i++) {
        json_t *v = json_array_get(a, (size_t)i);
        if (!json_is_string(v))
            return ss_diag_set(L->d, SS_ERR_PARSE,
                               "%s: %s.%s[%d]: expected a tensor name (string), got %s", L->file,
                               jp, key, i, ss_json_type_name(v));
        const char *name = json_string_value(v);
        int id = ss_graph_find_tensor(g, name);
        if (id < 0) {
            const char *later = later_producer(L, name, opi);
            if (later)
                return ss_diag_set(L->d, SS_ERR_INVALID,
                                   "%s: %s.%s[%d]: tensor \"%s\" is produced by a later operator "
                                   "\"%s\" (operators must be in dependency order; is there a "
                                   "cycle?)", L->file, jp, key, i, name, later);
            return ss_diag_set(L->d, SS_ERR_INVALID,
                               "%s: %s.%s[%d]: unknown tensor \"%s\" (dangling reference: no "
                               "earlier operator produces it)", L->file, jp, key, i, name);
        }
        const ss_tensor *t = ss_graph_tensor(g, id);
        if (t->is_weight != want_weight)
            return ss_diag_set(L->d, SS_ERR_INVALID, "%s: %s.%s[%d]: tensor \"%s\" is %s", L->file,
                               jp, key, i, name,
                               want_weight ? "an activation, not a weight"
                                           : "a weight; list it under \"weights\"");
        ids[i] = id;
    }
    *n = len;
    return SS_OK;
}

static void shape_str(int nd, const int64_t *s, char *buf, size_t n)
{
    size_t k = (size_t)snprintf(buf, n, "[");
    for (int i = 0; i < nd && k < n; i++)
        k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? ", " : "", (long long)s[i]);
    if (k < n)
        snprintf(buf + k, n - k, "]");
}

/* The weights an op created must be declared with the same shape and dtype. */
static ss_status check_created(loader *L, const char *jp, ss_graph *g, int opid)
{
    const ss_op *op = ss_graph_op(g, opid);
    for (int j = 0; j < op->n_w; j++) {
        const ss_tensor *w = ss_graph_tensor(g, op->weights[j]);
        if (w->id <= op->outputs[op->n_out - 1])
            continue; /* shared, declared by its creator */
        size_t k;
        json_t *t = find_decl(L, w->name, &k);
        char b1[128], b2[128];
        if (!t || strcmp(json_string_value(json_object_get(t, "role")), "weight") != 0)
            return ss_diag_set(L->d, SS_ERR_INVALID,
                               "%s: %s: operator \"%s\" creates weight \"%s\" %s %s, which is "
                               "not declared with role \"weight\" in $.tensors", L->file, jp,
                               op->name, w->name,
                               (shape_str(w->ndim, w->shape, b1, sizeof b1), b1),
                               ss_dtype_name(w->dtype));
        int nd;
        int64_t shape[SS_MAX_DIMS];
        decl_shape(t, &nd, shape);
        int same = nd == w->ndim && decl_dtype(t) == w->dtype;
        for (int i = 0; same && i < nd; i++)
            same = shape[i] == w->shape[i];
        if (!same) {
            shape_str(nd, shape, b1, sizeof b1);
            shape_str(w->ndim, w->shape, b2, sizeof b2);
            return ss_diag_set(L->d, SS_ERR_INVALID,
                               "%s: $.tensors[%zu]: shape mismatch: weight \"%s\" is declared %s "
                               "%s, but operator \"%s\" (%s) creates %s %s", L->file, k, w->name,
                               b1, json_string_value(json_object_get(t, "dtype")), op->name, jp,
                               b2, ss_dtype_name(w->dtype));
        }
        L->used[k] = 1;
    }
    return SS_OK;
}

static ss_status read_op(loader *L, size_t i, ss_graph *g)
{
    char jp[PATH_MAX_LEN];
    snprintf(jp, sizeof jp, "$.operators[%zu]", i);
    json_t *o = json_array_get(L->ops, i);
    if (!json_is_object(o))
        return ss_diag_set(L->d, SS_ERR_PARSE, "%s: %s: expected an object, got %s", L->file, jp,
                           ss_json_type_name(o));
    const char *name = NULL, *tname = NULL;
    ss_status st = ss_json_get_str(L->file, jp, o, "name", 1, SS_NAME_MAX, &name, L->d);
    if (!st)
        st = ss_json_get_str(L->file, jp, o, "type", 1, 32, &tname, L->d);
    if (st)
        return st;
    ss_op_type type;
    if (ss_op_type_parse(tname, &type)) {
        char list[320] = "";
        size_t used = 0;
        for (int t = 0; t < SS_OP_TYPE_COUNT; t++)
            used += (size_t)snprintf(list + used, sizeof list - used, "%s%s", t ? ", " : "",
                                     ss_op_type_name((ss_op_type)t));
        return ss_diag_set(L->d, SS_ERR_PARSE,
                           "%s: %s.type: unknown operator type \"%s\" (expected one of: %s)",
                           L->file, jp, tname, list);
    }
    const ss_op_class *c = ss_op_class_of(type);
    st = ss_json_check_keys(L->file, jp, o, c->keys, L->d);
    if (st)
        return st;
    ss_op_spec s;
    memset(&s, 0, sizeof s);
    s.name = name;
    s.type = type;
    s.n_w = -1;
    if (type == SS_OP_INPUT) {
        st = input_attrs(L, jp, name, &s.attrs);
    } else {
        if (!json_object_get(o, "inputs"))
            return ss_diag_set(L->d, SS_ERR_PARSE, "%s: %s: missing required key \"inputs\" "
                               "(names of the input tensors)", L->file, jp);
        st = read_refs(L, jp, o, "inputs", i, g, 0, SS_MAX_INPUTS, s.inputs, &s.n_in);
        if (!st && json_object_get(o, "weights"))
            st = read_refs(L, jp, o, "weights", i, g, 1, SS_MAX_WEIGHTS, s.weights, &s.n_w);
        if (!st && c->read_attrs) {
            ss_attr_reader r = {L->file, jp, o, L->d, L->batch, L->rebatch, g, s.inputs, s.n_in};
            st = c->read_attrs(&r, &s.attrs);
        }
    }
    if (st)
        return st;
    ss_diag gd;
    ss_diag_init(&gd);
    int id = ss_graph_add_op(g, &s, &gd);
    if (id < 0) {
        if (gd.status == SS_ERR_NOMEM)
            return nomem(L);
        if (L->rebatch > 0)
            return ss_diag_set(L->d, gd.status, "%s: %s: %s (after changing the batch from "
                               "%lld to %lld)", L->file, jp, gd.msg, (long long)L->batch,
                               (long long)L->rebatch);
        return ss_diag_set(L->d, gd.status, "%s: %s: %s", L->file, jp, gd.msg);
    }
    return check_created(L, jp, g, id);
}

static ss_status load_root(json_t *root, const char *file, int64_t rebatch, ss_graph **out,
                           ss_diag *d)
{
    static const char *const keys[] = {"format", "version", "name", "batch", "optimizer",
                                       "precision", "tensors", "operators", NULL};
    static const char *const opts[] = {"sgd", "sgd_momentum", "adam", NULL};
    static const char *const precs[] = {"fp32", "mixed", NULL};
    loader L;
    memset(&L, 0, sizeof L);
    L.file = file;
    L.d = d;
    L.rebatch = rebatch;
    const char *name = NULL;
    int opt = 0, prec = 0;
    ss_status st = ss_json_check_header(file, root, "simsearch-model", 1, d);
    if (!st)
        st = ss_json_check_keys(file, "$", root, keys, d);
    if (!st)
        st = ss_json_get_str(file, "$", root, "name", 1, SS_NAME_MAX, &name, d);
    if (!st)
        st = get_i64(&L, "$", root, "batch", 1, 1, MAX_BATCH, &L.batch);
    if (!st)
        st = get_enum(&L, "$", root, "optimizer", 1, opts, &opt);
    if (!st)
        st = get_enum(&L, "$", root, "precision", 1, precs, &prec);
    if (!st)
        st = ss_json_get_child(file, "$", root, "tensors", JSON_ARRAY, 1, &L.tensors, d);
    if (!st)
        st = ss_json_get_child(file, "$", root, "operators", JSON_ARRAY, 1, &L.ops, d);
    if (st)
        return st;
    if (json_array_size(L.ops) == 0)
        return ss_diag_set(d, SS_ERR_INVALID, "%s: $.operators: the model has no operators",
                           file);
    ss_graph *g = NULL;
    L.decl = json_object();
    L.op_index = json_object();
    L.used = ss_calloc(json_array_size(L.tensors) + 1, 1);
    g = ss_graph_new(name);
    if (!L.decl || !L.op_index || !L.used || !g) {
        st = nomem(&L);
        goto out;
    }
    st = read_tensors(&L);
    /* Index op names (for "produced by a later operator" messages). */
    for (size_t i = 0; !st && i < json_array_size(L.ops); i++) {
        const char *on = json_string_value(json_object_get(json_array_get(L.ops, i), "name"));
        if (on && !json_object_get(L.op_index, on) &&
            json_object_set_new(L.op_index, on, json_integer((json_int_t)i)))
            st = nomem(&L);
    }
    for (size_t i = 0; !st && i < json_array_size(L.ops); i++)
        st = read_op(&L, i, g);
    for (size_t k = 0; !st && k < json_array_size(L.tensors); k++)
        if (!L.used[k])
            st = ss_diag_set(d, SS_ERR_INVALID,
                             "%s: $.tensors[%zu]: tensor \"%s\" is declared but no operator "
                             "%s it", file, k,
                             json_string_value(json_object_get(json_array_get(L.tensors, k),
                                                               "name")),
                             "creates");
    if (!st) {
        ss_graph_set_training(g, rebatch > 0 ? rebatch : L.batch, (ss_optimizer)opt,
                              (ss_precision)prec);
        ss_diag vd;
        ss_diag_init(&vd);
        st = ss_graph_validate(g, &vd);
        if (st == SS_ERR_NOMEM)
            st = nomem(&L);
        else if (st)
            st = ss_diag_set(d, st, "%s: %s", file, vd.msg);
    }
out:
    json_decref(L.decl);
    json_decref(L.op_index);
    ss_free(L.used);
    if (st) {
        ss_graph_free(g);
        return st;
    }
    *out = g;
    return SS_OK;
}

/* See model_io.h. */
ss_status ss_model_load_batch(const char *path, int64_t batch, ss_graph **out, ss_diag *d)
{
    if (!path || !out)
        return ss_diag_set(d, SS_ERR_INVALID, "ss_model_load: NULL argument");
    if (batch < 0 || batch > MAX_BATCH)
        return ss_diag_set(d, SS_ERR_INVALID, "%s: batch %lld out of range", path,
                           (long long)batch);
    json_t *root = NULL;
    ss_status st = ss_json_parse_file(path, &root, d);
    if (st)
        return st;
    st = load_root(root, path, batch, out, d);
    json_decref(root);
    return st;
}

/* Load a model file (see simsearch.h): the file's own batch is kept. */
ss_status ss_model_load(const char *path, ss_graph **out, ss_diag *d)
{
    return ss_model_load_batch(path, 0, out, d);
}

/* Load a model from JSON text; `label` names it in messages. */
ss_status ss_model_load_string(const char *json, const char *label, ss_graph **out, ss_diag *d)
{
    if (!json || !out)
        return ss_diag_set(d, SS_ERR_INVALID, "ss_model_load_string: NULL argument");
    if (!label)
        label = "<string>";
    json_t *root = NULL;
    ss_status st = ss_json_parse_string(json, label, &root, d);
    if (st)
        return st;
    st = load_root(root, label, 0, out, d);
    json_decref(root);
    return st;
}

/* ------------------------------------------------------------------ */
/* Writing                                                             */
/* ------------------------------------------------------------------ */

/* Setters that remember a failed allocation in *ok (jansson's _new
 * functions release the value on failure, so nothing leaks). */
static void put(json_t *o, const char *k, json_t *v, int *ok)
{
    if (!v || json_object_set_new(o, k, v))
        *ok = 0;
}

static void push(json_t *a, json_t *v, int *ok)
{
    if (!v || json_array_append_new(a, v))
        *ok = 0;
}

static json_t *int_array(const int64_t *v, int n, int *ok)
{
    json_t *a = json_array();
    if (!a) {
        *ok = 0;
        return NULL;
    }
    for (int i = 0; i < n; i++)
        push(a, json_integer((json_int_t)v[i]), ok);
    return a;
}

static json_t *tensor_json(const ss_tensor *t, int input, int *ok)
{
    json_t *o = json_object();
    if (!o) {
        *ok = 0;
        return NULL;
    }
    put(o, "name", json_string(t->name), ok);
    put(o, "role", json_string(input ? "input" : "weight"), ok);
    put(o, "shape", int_array(t->shape, t->ndim, ok), ok);
    put(o, "dtype", json_string(ss_dtype_name(t->dtype)), ok);
    if (input) {
        json_t *k = json_array();
        for (int i = 0; k && i < t->ndim; i++)
            push(k, json_string(ss_dim_kind_name(t->kind[i])), ok);
        put(o, "kinds", k, ok);
    }
    return o;
}

static json_t *names_json(const ss_graph *g, const int *ids, int n, int *ok)
{
    json_t *a = json_array();
    if (!a) {
        *ok = 0;
        return NULL;
    }
    for (int i = 0; i < n; i++)
        push(a, json_string(ss_graph_tensor(g, ids[i])->name), ok);
    return a;
}

/* ------------------------------------------------------------------ */
/* Attribute setters for the operator table's writers (op_table.h)     */
/* ------------------------------------------------------------------ */

/* See op_table.h. */
void ss_attr_put_int(ss_attr_writer *w, const char *key, int64_t v)
{
    put(w->o, key, json_integer((json_int_t)v), &w->ok);
}

/* See op_table.h. */
void ss_attr_put_bool(ss_attr_writer *w, const char *key, int v)
{
    put(w->o, key, json_boolean(v), &w->ok);
}

/* See op_table.h. */
void ss_attr_put_real(ss_attr_writer *w, const char *key, double v)
{
    put(w->o, key, json_real(v), &w->ok);
}

/* See op_table.h. */
void ss_attr_put_str(ss_attr_writer *w, const char *key, const char *v)
{
    put(w->o, key, json_string(v), &w->ok);
}

/* See op_table.h. */
void ss_attr_put_ints(ss_attr_writer *w, const char *key, const int64_t *v, int n)
{
    put(w->o, key, int_array(v, n, &w->ok), &w->ok);
}

static ss_status to_json(const ss_graph *g, json_t **out, ss_diag *d)
{
    int ok = 1;
    json_t *root = json_object();
    json_t *tensors = json_array();
    json_t *ops = json_array();
    if (!root || !tensors || !ops) {
        json_decref(root);
        json_decref(tensors);
        json_decref(ops);
        return ss_diag_set(d, SS_ERR_NOMEM, "out of memory writing model '%s'", ss_graph_name(g));
    }
    put(root, "format", json_string("simsearch-model"), &ok);
    put(root, "version", json_integer(1), &ok);
    put(root, "name", json_string(ss_graph_name(g)), &ok);
    put(root, "batch", json_integer(ss_graph_batch(g)), &ok);
    put(root, "optimizer", json_string(ss_optimizer_name(ss_graph_optimizer(g))), &ok);
    put(root, "precision", json_string(ss_precision_name(ss_graph_precision(g))), &ok);
    put(root, "tensors", tensors, &ok);
    put(root, "operators", ops, &ok);
    for (int i = 0; ok && i < ss_graph_n_tensors(g); i++) {
        const ss_tensor *t = ss_graph_tensor(g, i);
        int input = t->producer >= 0 && ss_graph_op(g, t->producer)->type == SS_OP_INPUT;
        if (input || t->is_weight)
            push(tensors, tensor_json(t, input, &ok), &ok);
    }
    for (int i = 0; ok && i < ss_graph_n_ops(g); i++) {
        const ss_op *op = ss_graph_op(g, i);
        json_t *o = json_object();
        if (!o) {
            ok = 0;
            break;
        }
        put(o, "name", json_string(op->name), &ok);
        put(o, "type", json_string(ss_op_type_name(op->type)), &ok);
        if (op->type != SS_OP_INPUT) {
            put(o, "inputs", names_json(g, op->inputs, op->n_in, &ok), &ok);
            int shared = op->n_w > 0 && op->weights[0] < op->outputs[0];
            if (shared)
                put(o, "weights", names_json(g, op->weights, op->n_w, &ok), &ok);
            const ss_op_class *c = ss_op_class_of(op->type);
            if (c->write_attrs) {
                ss_attr_writer w = {o, ok};
                c->write_attrs(&w, g, op);
                ok = w.ok;
            }
        }
        push(ops, o, &ok);
    }
    if (!ok) {
        json_decref(root);
        return ss_diag_set(d, SS_ERR_NOMEM, "out of memory writing model '%s'", ss_graph_name(g));
    }
    *out = root;
    return SS_OK;
}

/* Serialise g (see simsearch.h); *out is ss_free'd by the caller. */
ss_status ss_model_to_string(const ss_graph *g, char **out, ss_diag *d)
{
    if (!g || !out)
        return ss_diag_set(d, SS_ERR_INVALID, "ss_model_to_string: NULL argument");
    json_t *root = NULL;
    ss_status st = to_json(g, &root, d);
    if (st)
        return st;
    st = ss_json_to_string(root, out, d);
    json_decref(root);
    return st;
}

/* Save g to path atomically (temp file + rename); on error the file at path
 * is untouched. */
ss_status ss_model_save(const ss_graph *g, const char *path, ss_diag *d)
{
    if (!g || !path)
        return ss_diag_set(d, SS_ERR_INVALID, "ss_model_save: NULL argument");
    json_t *root = NULL;
    ss_status st = to_json(g, &root, d);
    if (st)
        return st;
    st = ss_json_write_atomic(path, root, d);
    json_decref(root);
    return st;
}
