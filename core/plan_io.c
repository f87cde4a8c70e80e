/*
 * plan_io.c — plan JSON ("format": "simsearch-plan", "version": 1): load
 * with strict checking, save atomically, serialise to a string.
 *
 * Invariant: a loaded plan is complete and valid for the given graph and
 * machine — every operator of the graph has a config (the first missing one
 * is named), no unknown operators, fingerprints match, and ss_plan_validate
 * passes — otherwise nothing is returned. load(save(p)) == p.
 * Format reference: docs/plan-format.md.
 */
#include "core/json_util.h"
#include "core/plan_impl.h"
#include "core/plan_mesh.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static const char *const schedule_names[] = {"gpipe", "1f1b", NULL};
static const char *const queue_names[] = {"fifo", "backward_first", NULL};
static const char *const sync_names[] = {"wait_free", "bulk", NULL};
static const char *const recompute_names[] = {"none", "full", "selective", NULL};

/* ---------------------------------------------------------------- load */

/* Index of s in the NULL-terminated names, or -1. */
static int find_name(const char *const *names, const char *s)
{
    for (int i = 0; names[i]; i++)
        if (!strcmp(names[i], s))
            return i;
    return -1;
}

static ss_status get_enum(const char *file, const json_t *obj, const char *key,
                          const char *const *names, int *out, ss_diag *d)
{
    const char *s = NULL;
    ss_status st = ss_json_get_str(file, "$.settings", obj, key, 0, 0, &s, d);
    if (st || !s)
        return st;
    int v = find_name(names, s);
    if (v < 0) {
        char list[128] = "";
        size_t used = 0;
        for (int i = 0; names[i]; i++)
            used += (size_t)snprintf(list + used, sizeof list - used, "%s\"%s\"", i ? " or " : "",
                                     names[i]);
        return ss_diag_set(d, SS_ERR_INVALID, "%s: $.settings.%s: unknown value \"%s\" (expected %s)",
                           file, key, s, list);
    }
    *out = v;
    return SS_OK;
}

/* $.settings.recompute: one mode for every stage (a string), or a list of
 * one mode per stage (after $.settings.stages is read). */
static ss_status load_recompute(const char *file, const json_t *obj, ss_plan_settings *s,
                                ss_diag *d)
{
    const json_t *a = json_object_get(obj, "recompute");
    if (!json_is_array(a)) {
        int e = (int)s->recompute;
        ss_status st = get_enum(file, obj, "recompute", recompute_names, &e, d);
        if (!st)
            s->recompute = (ss_recompute)e;
        return st;
    }
    size_t n = json_array_size(a);
    if (n != (size_t)s->stages)
        return ss_diag_set(d, SS_ERR_INVALID,
                           "%s: $.settings.recompute: a list of %zu modes, expected one per "
                           "stage ($.settings.stages = %d)",
                           file, n, s->stages);
    if (n > SS_PLAN_MAX_RECOMPUTE_STAGES)
        return ss_diag_set(d, SS_ERR_INVALID,
                           "%s: $.settings.recompute: %zu modes, more than the limit of %d "
                           "(give one mode for every stage)",
                           file, n, SS_PLAN_MAX_RECOMPUTE_STAGES);
    ss_recompute modes[SS_PLAN_MAX_RECOMPUTE_STAGES];
    for (size_t k = 0; k < n; k++) {
        const char *v = json_string_value(json_array_get(a, k));
        int e = v ? find_name(recompute_names, v) : -1;
        if (e < 0)
            return ss_diag_set(d, SS_ERR_INVALID,
                               "%s: $.settings.recompute[%zu]: expected \"none\", \"full\" or "
                               "\"selective\"",
                               file, k);
        modes[k] = (ss_recompute)e;
    }
    char where[SS_DIAG_MSG_MAX / 4];
    snprintf(where, sizeof where, "%s: $.settings.recompute", file);
    return ss_plan_set_recompute(s, modes, (int)n, where, d);
}

static ss_status load_settings(const char *file, const json_t *obj, ss_plan_settings *s,
                               ss_diag *d)
{
    static const char *const keys[] = {"stages", "microbatches", "schedule", "queue",
                                       "sync", "bucket_bytes", "priority", "reorder_backward",
                                       "recompute", "distopt", "virtual_stages", "synced_flags",
                                       NULL};
    ss_status st = ss_json_check_keys(file, "$.settings", obj, keys, d);
    if (st)
        return st;
    int64_t v;
    v = s->stages;
    if ((st = ss_json_get_int(file, "$.settings", obj, "stages", 0, 1, 65536, &v, d)))
        return st;
    s->stages = (int)v;
    v = s->microbatches;
    if ((st = ss_json_get_int(file, "$.settings", obj, "microbatches", 0, 1, 1 << 20, &v, d)))
        return st;
    s->microbatches = (int)v;
    v = s->virtual_stages;
    if ((st = ss_json_get_int(file, "$.settings", obj, "virtual_stages", 0, 1, 65536, &v, d)))
        return st;
    s->virtual_stages = (int)v;
    int e;
    e = (int)s->schedule;
    if ((st = get_enum(file, obj, "schedule", schedule_names, &e, d)))
        return st;
    s->schedule = (ss_pipe_schedule)e;
    e = (int)s->queue;
    if ((st = get_enum(file, obj, "queue", queue_names, &e, d)))
        return st;
    s->queue = (ss_queue_policy)e;
    e = (int)s->sync;
    if ((st = get_enum(file, obj, "sync", sync_names, &e, d)))
        return st;
    s->sync = (ss_sync_mode)e;
    if ((st = load_recompute(file, obj, s, d)))
        return st;
    if ((st = ss_json_get_num(file, "$.settings", obj, "bucket_bytes", 0, 0, 1e15,
                              &s->bucket_bytes, d)))
        return st;
    if ((st = ss_json_get_bool(file, "$.settings", obj, "priority", 0, &s->priority, d)))
        return st;
    /* distopt: a boolean (ZeRO-1 or none), or the ZeRO stage 0, 1 or 3 */
    if (json_is_integer(json_object_get(obj, "distopt"))) {
        v = s->distopt;
        if ((st = ss_json_get_int(file, "$.settings", obj, "distopt", 0, 0, SS_ZERO3, &v, d)))
            return st;
        if (v == 2)
            return ss_diag_set(d, SS_ERR_PARSE,
                               "%s: $.settings.distopt: expected false, true, 0, 1 or 3 (ZeRO-3), "
                               "got 2 (ZeRO-2 is not modelled)",
                               file);
        s->distopt = (int)v;
    } else if ((st = ss_json_get_bool(file, "$.settings", obj, "distopt", 0, &s->distopt, d)))
        return st;
    if ((st = ss_json_get_bool(file, "$.settings", obj, "synced_flags", 0, &s->synced_flags, d)))
        return st;
    /* reorder_backward: the adjustment layer K, or a boolean (true: K = 1) */
    if (json_is_integer(json_object_get(obj, "reorder_backward"))) {
        v = s->reorder_backward;
        if ((st = ss_json_get_int(file, "$.settings", obj, "reorder_backward", 0, 0, 1000000, &v,
                                  d)))
            return st;
        s->reorder_backward = (int)v;
        return SS_OK;
    }
    return ss_json_get_bool(file, "$.settings", obj, "reorder_backward", 0, &s->reorder_backward,
                            d);
}

/* $.model / $.topology: {"name", "fingerprint"} against the actual one. */
static ss_status check_identity(const char *file, const json_t *root, const char *key,
                                const char *what, const char *actual_name, uint64_t actual_fp,
                                char *name_out, uint64_t *fp_out, ss_diag *d)
{
    static const char *const keys[] = {"name", "fingerprint", NULL};
    char jpath[32];
    snprintf(jpath, sizeof jpath, "$.%s", key);
    json_t *obj = NULL;
    ss_status st = ss_json_get_child(file, "$", root, key, JSON_OBJECT, 1, &obj, d);
    if (st || (st = ss_json_check_keys(file, jpath, obj, keys, d)))
        return st;
    const char *name = NULL, *hex = NULL;
    if ((st = ss_json_get_str(file, jpath, obj, "name", 1, SS_NAME_MAX, &name, d)) ||
        (st = ss_json_get_str(file, jpath, obj, "fingerprint", 1, 0, &hex, d)))
        return st;
    uint64_t fp;
    if (ss_fingerprint_parse(hex, &fp))
        return ss_diag_set(d, SS_ERR_PARSE,
                           "%s: %s.fingerprint: expected 16 lowercase hex digits, got \"%s\"",
                           file, jpath, hex);
    if (actual_name && fp != actual_fp) {
        char want[17];
        ss_fingerprint_hex(actual_fp, want);
        return ss_diag_set(d, SS_ERR_INVALID,
                           "plan %s was made for %s %s (fingerprint %s), not for %s (fingerprint "
                           "%s)%s",
                           file, what, name, hex, actual_name, want,
                           strcmp(name, actual_name) ? ""
                                                     : ": same name, but its structure, sizes or "
                                                       "settings differ");
    }
    if (actual_name && !strcmp(key, "model") && strcmp(name, actual_name))
        return ss_diag_set(d, SS_ERR_INVALID,
                           "plan %s: $.model.name: the plan was made for model %s, not %s (the "
                           "same structure; the name must match too)",
                           file, name, actual_name);
    snprintf(name_out, SS_NAME_MAX, "%s", name);
    *fp_out = fp;
    return SS_OK;
}

/* Read a JSON array of ints into a[0..n) (n = its size, at most max). */
static ss_status int_array(const char *file, const char *jpath, const json_t *arr, int64_t lo,
                           int64_t hi, int *a, int max, int *n, ss_diag *d)
{
    size_t sz = json_array_size(arr);
    if ((int64_t)sz > max)
        return ss_diag_set(d, SS_ERR_INVALID, "%s: %s: %zu entries (at most %d)", file, jpath, sz,
                           max);
    for (size_t i = 0; i < sz; i++) {
        json_t *v = json_array_get(arr, i);
        if (!json_is_integer(v))
            return ss_diag_set(d, SS_ERR_PARSE, "%s: %s[%zu]: expected an integer, got %s", file,
                               jpath, i, ss_json_type_name(v));
        json_int_t x = json_integer_value(v);
        if (x < lo || x > hi)
            return ss_diag_set(d, SS_ERR_INVALID,
                               "%s: %s[%zu]: value %lld out of range (expected %lld to %lld)", file,
                               jpath, i, (long long)x, (long long)lo, (long long)hi);
        a[i] = (int)x;
    }
    *n = (int)sz;
    return SS_OK;
}

/* An operator's device list, given as a mesh expression (plan_mesh.h):
 * {"offset", "shape", "strides"} at jpath, expanding to exactly `want`
 * devices, each a non-negative int, into devs (want entries). */
static ss_status mesh_devices(const char *file, const char *jpath, const json_t *obj,
                              int64_t want, int *devs, ss_diag *d)
{
    static const char *const keys[] = {"offset", "shape", "strides", NULL};
    ss_status st = ss_json_check_keys(file, jpath, obj, keys, d);
    json_t *shape = NULL, *strides = NULL;
    ss_mesh m = {0};
    if (st || (st = ss_json_get_int(file, jpath, obj, "offset", 1, 0, (1LL << 31) - 1,
                                    &m.offset, d)) ||
        (st = ss_json_get_child(file, jpath, obj, "shape", JSON_ARRAY, 1, &shape, d)) ||
        (st = ss_json_get_child(file, jpath, obj, "strides", JSON_ARRAY, 1, &strides, d)))
        return st;
    char sub[SS_NAME_MAX + 64];
    int sh[SS_MESH_MAX_AXES], sd[SS_MESH_MAX_AXES], n_sh = 0, n_sd = 0;
    snprintf(sub, sizeof sub, "%s.shape", jpath);
    if ((st = int_array(file, sub, shape, 1, 1 << 20, sh, SS_MESH_MAX_AXES, &n_sh, d)))
        return st;
    snprintf(sub, sizeof sub, "%s.strides", jpath);
    if ((st = int_array(file, sub, strides, -(1LL << 31), (1LL << 31) - 1, sd, SS_MESH_MAX_AXES,
                        &n_sd, d)))
        return st;
    if (n_sd != n_sh)
        return ss_diag_set(d, SS_ERR_INVALID,
                           "%s: %s: %d strides for %d axes (one stride per shape entry)", file,
                           jpath, n_sd, n_sh);
    m.n_axes = n_sh;
    for (int a = 0; a < n_sh; a++) {
        m.shape[a] = sh[a];
        m.strides[a] = sd[a];
    }
    int64_t n = ss_mesh_count(&m, 1LL << 40), lo, hi;
    if (n != want)
        return ss_diag_set(d, SS_ERR_INVALID,
                           "%s: %s: tile count mismatch: the mesh has %lld devices, but the "
                           "degrees and reduction give %lld tiles",
                           file, jpath, (long long)n, (long long)want);
    ss_mesh_range(&m, &lo, &hi);
    if (lo < 0 || hi > (1LL << 31) - 1)
        return ss_diag_set(d, SS_ERR_INVALID,
                           "%s: %s: the mesh reaches device %lld (devices are 0 and up)", file,
                           jpath, (long long)(lo < 0 ? lo : hi));
    ss_mesh_expand(&m, devs);
    return SS_OK;
}

static ss_status load_op(const char *file, const ss_graph *g, ss_plan *p, int id,
                         const json_t *obj, ss_diag *d)
{
    static const char *const keys[] = {"degrees", "reduction", "replicas", "devices", "stage",
                                       NULL};
    const ss_op *op = ss_graph_op(g, id);
    char jpath[SS_NAME_MAX + 32];
    snprintf(jpath, sizeof jpath, "$.operators[\"%s\"]", op->name);
    ss_status st = ss_json_check_keys(file, jpath, obj, keys, d);
    if (st)
        return st;
    json_t *degs = NULL, *devs = json_object_get(obj, "devices");
    if ((st = ss_json_get_child(file, jpath, obj, "degrees", JSON_ARRAY, 1, &degs, d)))
        return st;
    if (!json_is_array(devs) && !json_is_object(devs))
        return ss_diag_set(d, devs ? SS_ERR_PARSE : SS_ERR_INVALID,
                           "%s: %s.devices: expected an array of device indices or a mesh "
                           "{\"offset\", \"shape\", \"strides\"}, got %s",
                           file, jpath, devs ? ss_json_type_name(devs) : "nothing");
    ss_pconfig c = p->cfg[id];
    char sub[SS_NAME_MAX + 48];
    int nd = 0;
    snprintf(sub, sizeof sub, "%s.degrees", jpath);
    if ((st = int_array(file, sub, degs, 1, 1 << 20, c.deg, SS_MAX_DIMS, &nd, d)))
        return st;
    if (nd != c.ndim)
        return ss_diag_set(d, SS_ERR_INVALID,
                           "%s: %s: %d degrees given, but the output of operator \"%s\" has %d dims",
                           file, sub, nd, op->name, c.ndim);
    int64_t red = 1, rep = 1, stage = 0;
    if ((st = ss_json_get_int(file, jpath, obj, "reduction", 0, 1, 1 << 20, &red, d)) ||
        (st = ss_json_get_int(file, jpath, obj, "replicas", 0, 1, 1 << 20, &rep, d)) ||
        (st = ss_json_get_int(file, jpath, obj, "stage", 0, 0, 65535, &stage, d)))
        return st;
    c.red = (int)red;
    c.rep = (int)rep;
    c.stage = (int)stage;
    int64_t want = c.red * c.rep;
    for (int k = 0; k < c.ndim; k++) {
        want *= c.deg[k];
        if (want > (1 << 20))
            return ss_diag_set(d, SS_ERR_INVALID, "%s: %s: more than %d tiles", file, jpath,
                               1 << 20);
    }
    size_t ndev = json_is_array(devs) ? json_array_size(devs) : (size_t)want;
    if ((int64_t)ndev != want)
        return ss_diag_set(d, SS_ERR_INVALID,
                           "%s: %s.devices: tile count mismatch: %zu devices listed, but the "
                           "degrees, reduction and replicas give %lld tiles",
                           file, jpath, ndev, (long long)want);
    c.ntiles = (int)want;
    int *tmp = ss_malloc(ndev * sizeof *tmp);
    if (!tmp)
        return ss_diag_set(d, SS_ERR_NOMEM, "out of memory");
    int n = 0;
    snprintf(sub, sizeof sub, "%s.devices", jpath);
    st = json_is_object(devs)
             ? mesh_devices(file, sub, devs, want, tmp, d)
             : int_array(file, sub, devs, -(1LL << 31), (1LL << 31) - 1, tmp, (int)ndev, &n, d);
    if (!st) {
        c.devices = tmp;
        st = ss_plan_set_config(p, id, &c, d);
    }
    ss_free(tmp);
    return st;
}

static ss_status load_root(const char *file, const json_t *root, const ss_graph *g,
                           const ss_machine *m, ss_plan **out, ss_diag *d)
{
    static const char *const keys[] = {"format", "version", "model", "topology",
                                       "settings", "operators", NULL};
    ss_status st = ss_json_check_header(file, root, "simsearch-plan", 1, d);
    if (st || (st = ss_json_check_keys(file, "$", root, keys, d)))
        return st;
    char mname[SS_NAME_MAX], tname[SS_NAME_MAX];
    uint64_t mfp, tfp;
    if ((st = check_identity(file, root, "model", "model", ss_graph_name(g),
                             ss_graph_fingerprint(g), mname, &mfp, d)))
        return st;
    if ((st = check_identity(file, root, "topology", "topology", m ? ss_machine_name(m) : NULL,
                             m ? ss_machine_fingerprint(m) : 0, tname, &tfp, d)))
        return st;
    json_t *settings = NULL, *ops = NULL;
    if ((st = ss_json_get_child(file, "$", root, "settings", JSON_OBJECT, 0, &settings, d)) ||
        (st = ss_json_get_child(file, "$", root, "operators", JSON_OBJECT, 1, &ops, d)))
        return st;
    const char *key;
    json_t *val;
    json_object_foreach(ops, key, val) {
        if (ss_graph_find_op(g, key) < 0)
            return ss_diag_set(d, SS_ERR_INVALID,
                               "%s: $.operators: unknown operator \"%s\" (model \"%s\" has no "
                               "operator of that name)",
                               file, key, ss_graph_name(g));
        if (!json_is_object(val))
            return ss_diag_set(d, SS_ERR_PARSE, "%s: $.operators[\"%s\"]: expected an object, got %s",
                               file, key, ss_json_type_name(val));
    }
    int n = ss_graph_n_ops(g);
    for (int i = 0; i < n; i++) {
        const ss_op *op = ss_graph_op(g, i);
        if (!json_object_get(ops, op->name))
            return ss_diag_set(d, SS_ERR_INVALID,
                               "%s: $.operators: operator \"%s\" is missing (a plan needs a "
                               "config for every operator; %d of %d given)",
                               file, op->name, (int)json_object_size(ops), n);
    }
    ss_plan *p = ss_plan_new(g, m);
    if (!p)
        return ss_diag_set(d, SS_ERR_NOMEM, "out of memory");
    p->model_fp = mfp;
    p->topo_fp = tfp;
    memcpy(p->model_name, mname, sizeof mname);
    memcpy(p->topo_name, tname, sizeof tname);
    if (settings)
        st = load_settings(file, settings, &p->settings, d);
    for (int i = 0; i < n && !st; i++)
        st = load_op(file, g, p, i, json_object_get(ops, ss_graph_op(g, i)->name), d);
    if (!st)
        st = ss_plan_validate_with(p, g, m, file, d);
    if (!st)
        st = ss_plan_check_consistency(p, g, file, d);
    if (st) {
        ss_plan_free(p);
        return st;
    }
    *out = p;
    return SS_OK;
}

ss_status ss_plan_load(const char *path, const ss_graph *g, const ss_machine *m, ss_plan **out,
                       ss_diag *d)
{
    if (!path || !g || !out)
        return ss_diag_set(d, SS_ERR_INVALID, "ss_plan_load: missing argument");
    json_t *root = NULL;
    ss_status st = ss_json_parse_file(path, &root, d);
    if (st)
        return st;
    st = load_root(path, root, g, m, out, d);
    json_decref(root);
    return st;
}

ss_status ss_plan_load_string(const char *json, const char *label, const ss_graph *g,
                              const ss_machine *m, ss_plan **out, ss_diag *d)
{
    if (!json || !g || !out)
        return ss_diag_set(d, SS_ERR_INVALID, "ss_plan_load_string: missing argument");
    if (!label)
        label = "<plan>";
    json_t *root = NULL;
    ss_status st = ss_json_parse_string(json, label, &root, d);
    if (st)
        return st;
    st = load_root(label, root, g, m, out, d);
    json_decref(root);
    return st;
}

/* ---------------------------------------------------------------- save */

/* Set key to v (stolen) on obj; *bad becomes 1 on any failure. */
static void put(json_t *obj, const char *key, json_t *v, int *bad)
{
    if (!v || json_object_set_new(obj, key, v))
        *bad = 1;
}

static void push(json_t *arr, json_t *v, int *bad)
{
    if (!v || json_array_append_new(arr, v))
        *bad = 1;
}

static json_t *identity(const char *name, uint64_t fp, int *bad)
{
    char hex[17];
    ss_fingerprint_hex(fp, hex);
    json_t *o = json_object();
    if (!o) {
        *bad = 1;
        return NULL;
    }
    put(o, "name", json_string(name[0] ? name : "unnamed"), bad);
    put(o, "fingerprint", json_string(hex), bad);
    return o;
}

static json_t *settings_json(const ss_plan_settings *s, int *bad)
{
    json_t *o = json_object();
    if (!o) {
        *bad = 1;
        return NULL;
    }
    put(o, "stages", json_integer(s->stages), bad);
    put(o, "microbatches", json_integer(s->microbatches), bad);
    put(o, "schedule", json_string(schedule_names[s->schedule]), bad);
    put(o, "queue", json_string(queue_names[s->queue]), bad);
    put(o, "sync", json_string(sync_names[s->sync]), bad);
    double b = s->bucket_bytes;
    put(o, "bucket_bytes", b == floor(b) && b < 9e15 ? json_integer((json_int_t)b) : json_real(b),
        bad);
    put(o, "priority", json_boolean(s->priority), bad);
    put(o, "reorder_backward",
        s->reorder_backward > 1 ? json_integer(s->reorder_backward)
                                : json_boolean(s->reorder_backward),
        bad);
    if (s->synced_flags)
        put(o, "synced_flags", json_true(), bad);
    if (ss_plan_recompute_uniform(s))
        put(o, "recompute", json_string(recompute_names[s->recompute]), bad);
    else {
        json_t *a = json_array();
        for (int k = 0; k < s->stages; k++)
            push(a, json_string(recompute_names[ss_plan_stage_recompute(s, k)]), bad);
        put(o, "recompute", a, bad);
    }
    if (s->distopt)
        put(o, "distopt", s->distopt == 1 ? json_true() : json_integer(s->distopt), bad);
    if (s->virtual_stages > 1)
        put(o, "virtual_stages", json_integer(s->virtual_stages), bad);
    return o;
}

/* An operator's device list: a mesh expression when it is one and has at
 * least MESH_MIN entries (plan_mesh.h), else the explicit array. */
#define MESH_MIN 8
static json_t *devices_json(const ss_pconfig *c, int *bad)
{
    ss_mesh m;
    if (c->ntiles >= MESH_MIN && ss_mesh_fit(c->devices, c->ntiles, &m)) {
        json_t *o = json_object(), *sh = json_array(), *sd = json_array();
        for (int a = 0; a < m.n_axes; a++) {
            push(sh, json_integer(m.shape[a]), bad);
            push(sd, json_integer(m.strides[a]), bad);
        }
        put(o, "offset", json_integer(m.offset), bad);
        put(o, "shape", sh, bad);
        put(o, "strides", sd, bad);
        return o;
    }
    json_t *devs = json_array();
    for (int t = 0; t < c->ntiles; t++)
        push(devs, json_integer(c->devices[t]), bad);
    return devs;
}

/* Op i's config; its device list's JSON is made once per list and shared
 * (byid: per device list id, the JSON made so far, one reference held). */
static json_t *config_json(const ss_plan *p, int i, json_t **byid, int *bad)
{
    const ss_pconfig *c = &p->cfg[i];
    int id = p->lst[i]->id;
    if (!byid[id])
        byid[id] = devices_json(c, bad);
    json_t *o = json_object(), *degs = json_array(), *devs = json_incref(byid[id]);
    if (!o || !degs || !devs) {
        json_decref(o);
        json_decref(degs);
        json_decref(devs);
        *bad = 1;
        return NULL;
    }
    for (int k = 0; k < c->ndim; k++)
        push(degs, json_integer(c->deg[k]), bad);
    put(o, "degrees", degs, bad);
    put(o, "reduction", json_integer(c->red), bad);
    if (c->rep > 1)
        put(o, "replicas", json_integer(c->rep), bad);
    put(o, "devices", devs, bad);
    put(o, "stage", json_integer(c->stage), bad);
    return o;
}

static ss_status to_json(const ss_plan *p, const ss_graph *g, json_t **out, ss_diag *d)
{
    if (!p || !g)
        return ss_diag_set(d, SS_ERR_INVALID, "plan: no plan or graph to save");
    if (p->n_ops != ss_graph_n_ops(g))
        return ss_diag_set(d, SS_ERR_INVALID, "plan: the plan has %d operators but model \"%s\" has %d",
                           p->n_ops, ss_graph_name(g), ss_graph_n_ops(g));
    int bad = 0, n_ids = ss_devpool_ids(p->pool);
    json_t *root = json_object(), *ops = json_object();
    json_t **byid = ss_calloc((size_t)n_ids + 1, sizeof *byid);
    if (!root || !ops || !byid) {
        json_decref(root);
        json_decref(ops);
        ss_free(byid);
        return ss_diag_set(d, SS_ERR_NOMEM, "out of memory");
    }
    put(root, "format", json_string("simsearch-plan"), &bad);
    put(root, "version", json_integer(1), &bad);
    put(root, "model", identity(p->model_name, p->model_fp, &bad), &bad);
    put(root, "topology", identity(p->topo_name, p->topo_fp, &bad), &bad);
    put(root, "settings", settings_json(&p->settings, &bad), &bad);
    for (int i = 0; i < p->n_ops && !bad; i++)
        put(ops, ss_graph_op(g, i)->name, config_json(p, i, byid, &bad), &bad);
    put(root, "operators", ops, &bad);
    for (int k = 0; k < n_ids; k++)
        json_decref(byid[k]);
    ss_free(byid);
    if (bad) {
        json_decref(root);
        return ss_diag_set(d, SS_ERR_NOMEM, "out of memory while building plan JSON");
    }
    *out = root;
    return SS_OK;
}

ss_status ss_plan_save(const ss_plan *p, const ss_graph *g, const char *path, ss_diag *d)
{
    json_t *root = NULL;
    ss_status st = to_json(p, g, &root, d);
    if (st)
        return st;
    st = ss_json_write_atomic(path, root, d);
    json_decref(root);
    return st;
}

ss_status ss_plan_to_string(const ss_plan *p, const ss_graph *g, char **out, ss_diag *d)
{
    json_t *root = NULL;
    ss_status st = to_json(p, g, &root, d);
    if (st)
        return st;
    st = ss_json_to_string(root, out, d);
    json_decref(root);
    return st;
}
