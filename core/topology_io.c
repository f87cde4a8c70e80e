/*
 * topology_io.c — "simsearch-topology" JSON: the explicit form, the compact
 * form (nodes x devices per node, intra and inter fabric) and the writer.
 *
 * The compact form is expanded into an explicit document first and then
 * loaded by the one explicit loader, so both forms give machines built by the
 * same code and save -> load is exact. Node order: devices (declared, then
 * peers), switches (declared, then an automatic "internet" switch), NICs.
 * Link order: declared links, then one link per peer. Host order: declared,
 * then one automatic host per peer that names none. The writer emits the
 * explicit form in exactly that order, with every device type written out in
 * full, so a reloaded machine has the same fingerprint.
 *
 * Invariant: a failed load frees everything it allocated and leaves *out
 * untouched; messages name the file and a JSON path (docs/topology-format.md).
 */
#include "machine_impl.h"
#include "json_util.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#define FORMAT "simsearch-topology"
#define MAX_NODES_PER_COMPACT 65536
#define MAX_DEVICES_PER_NODE 1024

/* Documented ranges (docs/topology-format.md, "Ranges"): what a real device
 * or link could have, with headroom, so that every derived time is finite and
 * printable. */
#define PEAK_MIN 1e-4   /* TFLOP/s; 0 = dtype not supported */
#define PEAK_MAX 1e5
#define EFF_MIN 1e-4    /* efficiency factors */
#define EFF_SIZE_MIN 1.0 /* FLOPs or bytes per kernel */
#define EFF_SIZE_MAX 1e20
#define GBPS_MIN 1e-6   /* link GB/s; gbps_ba may also be 0 (no such direction) */
#define GBPS_MAX 1e6

/* JSON keys of peak_tflops, in ss_dtype order (NULL-terminated for key checks). */
static const char *const dtype_keys[SS_DTYPE_COUNT + 1] = {"f32", "f16", "bf16", "i32", "i64", "f8", NULL};

/* ---- name -> index map (open addressing over borrowed strings) ---- */

typedef struct namemap {
    size_t cap;
    const char **keys;
    int *vals;
} namemap;

static uint64_t hash_str(const char *s) { return ss_fnv_str(SS_FNV_INIT, s); }

static int nm_init(namemap *nm, size_t n)
{
    size_t cap = 16;
    while (cap < 2 * n + 16)
        cap *= 2;
    nm->cap = cap;
    nm->keys = ss_calloc(cap, sizeof *nm->keys);
    nm->vals = ss_calloc(cap, sizeof *nm->vals);
    return nm->keys && nm->vals ? 0 : -1;
}

static void nm_free(namemap *nm)
{
    ss_free(nm->keys);
    ss_free(nm->vals);
}

static int nm_get(const namemap *nm, const char *k)
{
    for (size_t i = hash_str(k) & (nm->cap - 1);; i = (i + 1) & (nm->cap - 1)) {
        if (!nm->keys[i])
            return -1;
        if (strcmp(nm->keys[i], k) == 0)
            return nm->vals[i];
    }
}

/* Insert k -> v; returns the existing value if k is present (no insert), else
 * -1. The map was sized for every insert, so it never fills. */
static int nm_put(namemap *nm, const char *k, int v)
{
    size_t i = hash_str(k) & (nm->cap - 1);
    for (; nm->keys[i]; i = (i + 1) & (nm->cap - 1))
        if (strcmp(nm->keys[i], k) == 0)
            return nm->vals[i];
    nm->keys[i] = k;
    nm->vals[i] = v;
    return -1;
}

/* ---- device types ---- */

static const char *builtin_list(void)
{
    static char buf[512];
    if (!buf[0]) {
        size_t used = 0;
        for (int i = 0; i < ss_devtype_builtin_count() && used < sizeof buf - SS_NAME_MAX; i++)
            used += (size_t)snprintf(buf + used, sizeof buf - used, "%s%s", i ? ", " : "",
                                     ss_devtype_builtin(i)->name);
    }
    return buf;
}

static ss_status parse_eff(const char *file, const char *jp, const json_t *obj, const char *key,
                           int *n, double *xs, double *ys, ss_diag *d)
{
    json_t *arr;
    ss_status st = ss_json_get_child(file, jp, obj, key, JSON_ARRAY, 0, &arr, d);
    if (st || !arr)
        return st;
    size_t k = json_array_size(arr);
    if (k < 1 || k > SS_EFF_POINTS)
        return ss_diag_set(d, SS_ERR_INVALID, "%s: %s.%s: expected 1 to %d [size, efficiency] points, got %zu",
                           file, jp, key, SS_EFF_POINTS, k);
    double tx[SS_EFF_POINTS], ty[SS_EFF_POINTS];
    for (size_t i = 0; i < k; i++) {
        json_t *p = json_array_get(arr, i);
        if (!json_is_array(p) || json_array_size(p) != 2 || !json_is_number(json_array_get(p, 0)) ||
            !json_is_number(json_array_get(p, 1)))
            return ss_diag_set(d, SS_ERR_PARSE, "%s: %s.%s[%zu]: expected [size, efficiency] (two numbers)",
                               file, jp, key, i);
        tx[i] = json_number_value(json_array_get(p, 0));
        ty[i] = json_number_value(json_array_get(p, 1));
        if (!(tx[i] >= EFF_SIZE_MIN && tx[i] <= EFF_SIZE_MAX))
            return ss_diag_set(d, SS_ERR_INVALID,
                               "%s: %s.%s[%zu][0]: size %g out of range (expected %g to %g)", file,
                               jp, key, i, tx[i], EFF_SIZE_MIN, EFF_SIZE_MAX);
        if (i > 0 && !(tx[i] > tx[i - 1]))
            return ss_diag_set(d, SS_ERR_INVALID, "%s: %s.%s[%zu][0]: sizes must be strictly increasing",
                               file, jp, key, i);
        if (!(ty[i] >= EFF_MIN && ty[i] <= 1))
            return ss_diag_set(d, SS_ERR_INVALID,
                               "%s: %s.%s[%zu][1]: efficiency %g out of range (expected %g to 1)",
                               file, jp, key, i, ty[i], EFF_MIN);
    }
    *n = (int)k;
    memcpy(xs, tx, k * sizeof *xs);
    memcpy(ys, ty, k * sizeof *ys);
    return SS_OK;
}

/* Optional number key of obj in {0} or [lo, hi] (0 meaning "none"). */
static ss_status get_num_or_zero(const char *file, const char *jp, const json_t *obj,
                                 const char *key, double lo, double hi, double *out, ss_diag *d)
{
    double v = *out;
    ss_status st = ss_json_get_num(file, jp, obj, key, 0, -DBL_MAX, DBL_MAX, &v, d);
    if (st)
        return st;
    if (v != 0 && !(v >= lo && v <= hi))
        return ss_diag_set(d, SS_ERR_INVALID,
                           "%s: %s.%s: value %g out of range (expected 0 or %g to %g)", file, jp,
                           key, v, lo, hi);
    *out = v;
    return SS_OK;
}

/* Optional integer `key` from 0 to hi into *out; absent: unchanged. */
static ss_status get_count(const char *file, const char *jp, const json_t *o, const char *key,
                           double hi, int *out, ss_diag *d)
{
    if (!json_object_get(o, key))
        return SS_OK;
    double v = -1;
    ss_status st = ss_json_get_num(file, jp, o, key, 0, 0, hi, &v, d);
    if (st)
        return st;
    if (v != (double)(int)v)
        return ss_diag_set(d, SS_ERR_INVALID, "%s: %s.%s: expected an integer from 0 to %g, got %g",
                           file, jp, key, hi, v);
    *out = (int)v;
    return SS_OK;
}

/* Optional "eff_align": [f8, f4, f2], each in (0, 1]; absent: unchanged. */
static ss_status parse_align(const char *file, const char *jp, const json_t *o, double out[3],
                             ss_diag *d)
{
    const json_t *a = json_object_get(o, "eff_align");
    if (!a)
        return SS_OK;
    if (!json_is_array(a) || json_array_size(a) != 3)
        return ss_diag_set(d, SS_ERR_INVALID,
                           "%s: %s.eff_align: expected an array of 3 numbers (factors for rows "
                           "aligned to 8, 4 and <= 2 bytes)",
                           file, jp);
    double v[3];
    for (size_t i = 0; i < 3; i++) {
        const json_t *e = json_array_get(a, i);
        v[i] = json_is_number(e) ? json_number_value(e) : -1;
        if (!(v[i] >= EFF_MIN && v[i] <= 1))
            return ss_diag_set(d, SS_ERR_INVALID,
                               "%s: %s.eff_align[%zu]: expected a number from %g to 1", file, jp,
                               i, EFF_MIN);
    }
    memcpy(out, v, sizeof v);
    return SS_OK;
}

/* Parse device_types[i] into *t. Declared types before it (types[0..n)) and
 * the built-ins may serve as a base. */
static ss_status parse_type(const char *file, const char *jp, const json_t *o,
                            const ss_device_type *types, int n, ss_device_type *t, ss_diag *d)
{
    static const char *const keys[] = {"name", "base", "is_cpu", "peak_tflops", "mem_gbps",
                                       "mem_gib", "launch_us", "eff_flops", "eff_mem", "eff_align",
                                       "mb_overhead_us", "dispatch_window",
                                       "collective_launch_us", "comm_blocks_compute", NULL};
    ss_status st = ss_json_check_keys(file, jp, o, keys, d);
    const char *name = NULL, *base = NULL;
    if (!st)
        st = ss_json_get_str(file, jp, o, "name", 1, SS_NAME_MAX, &name, d);
    if (!st)
        st = ss_json_get_str(file, jp, o, "base", 0, SS_NAME_MAX, &base, d);
    if (st)
        return st;
    for (int i = 0; i < n; i++)
        if (strcmp(types[i].name, name) == 0)
            return ss_diag_set(d, SS_ERR_INVALID, "%s: %s.name: duplicate device type \"%s\"", file, jp,
                               name);
    const ss_device_type *from = NULL;
    if (base) {
        for (int i = 0; i < n && !from; i++)
            if (strcmp(types[i].name, base) == 0)
                from = &types[i];
        if (!from)
            from = ss_devtype_find_builtin(base);
        if (!from)
            return ss_diag_set(d, SS_ERR_INVALID,
                               "%s: %s.base: unknown device type \"%s\" (built-ins: %s)", file, jp,
                               base, builtin_list());
    } else {
        from = ss_devtype_find_builtin(name);
    }
    json_t *peak = NULL;
    st = ss_json_get_child(file, jp, o, "peak_tflops", JSON_OBJECT, 0, &peak, d);
    if (st)
        return st;
    ss_device_type tt;
    if (from) {
        tt = *from;
    } else {
        /* from scratch: the essentials are required */
        memset(&tt, 0, sizeof tt);
        int cpu = 0;
        st = ss_json_get_bool(file, jp, o, "is_cpu", 0, &cpu, d);
        if (st)
            return st;
        if (!peak || !json_object_get(peak, "f32") || !json_object_get(o, "mem_gbps") ||
            !json_object_get(o, "mem_gib"))
            return ss_diag_set(d, SS_ERR_INVALID,
                               "%s: %s: new device type \"%s\" needs peak_tflops.f32, mem_gbps and "
                               "mem_gib (or a \"base\"; built-ins: %s)",
                               file, jp, name, builtin_list());
        const ss_device_type *dflt = ss_devtype_find_builtin(cpu ? "CPU-core" : "V100-SXM2-16GB");
        tt.is_cpu = cpu;
        tt.launch_us = dflt->launch_us;
        tt.dispatch_window = dflt->dispatch_window;
        tt.collective_launch_us = dflt->collective_launch_us;
        for (int k = 0; k < 3; k++)
            tt.eff_align[k] = 1.0;
        tt.n_eff_flops = dflt->n_eff_flops;
        memcpy(tt.eff_flops_x, dflt->eff_flops_x, sizeof tt.eff_flops_x);
        memcpy(tt.eff_flops_y, dflt->eff_flops_y, sizeof tt.eff_flops_y);
        tt.n_eff_mem = dflt->n_eff_mem;
        memcpy(tt.eff_mem_x, dflt->eff_mem_x, sizeof tt.eff_mem_x);
        memcpy(tt.eff_mem_y, dflt->eff_mem_y, sizeof tt.eff_mem_y);
    }
    memset(tt.name, 0, sizeof tt.name);
    strncpy(tt.name, name, sizeof tt.name - 1);
    st = ss_json_get_bool(file, jp, o, "is_cpu", 0, &tt.is_cpu, d);
    if (!st && peak) {
        char pj[128];
        snprintf(pj, sizeof pj, "%s.peak_tflops", jp);
        st = ss_json_check_keys(file, pj, peak, dtype_keys, d);
        for (int k = 0; k < SS_DTYPE_COUNT && !st; k++)
            st = get_num_or_zero(file, pj, peak, dtype_keys[k], PEAK_MIN, PEAK_MAX,
                                 &tt.peak_tflops[k], d);
    }
    if (!st)
        st = ss_json_get_num(file, jp, o, "mem_gbps", 0, 1e-3, 1e6, &tt.mem_gbps, d);
    if (!st)
        st = ss_json_get_num(file, jp, o, "mem_gib", 0, 1e-6, 1e6, &tt.mem_gib, d);
    if (!st)
        st = ss_json_get_num(file, jp, o, "launch_us", 0, 0, 1e6, &tt.launch_us, d);
    if (!st)
        st = ss_json_get_num(file, jp, o, "mb_overhead_us", 0, 0, 1e6, &tt.mb_overhead_us, d);
    if (!st)
        st = get_count(file, jp, o, "dispatch_window", 1e6, &tt.dispatch_window, d);
    if (!st)
        st = ss_json_get_num(file, jp, o, "collective_launch_us", 0, 0, 1e4,
                             &tt.collective_launch_us, d);
    if (!st)
        st = ss_json_get_bool(file, jp, o, "comm_blocks_compute", 0, &tt.comm_blocks_compute, d);
    if (!st)
        st = parse_eff(file, jp, o, "eff_flops", &tt.n_eff_flops, tt.eff_flops_x, tt.eff_flops_y, d);
    if (!st)
        st = parse_eff(file, jp, o, "eff_mem", &tt.n_eff_mem, tt.eff_mem_x, tt.eff_mem_y, d);
    if (!st)
        st = parse_align(file, jp, o, tt.eff_align, d);
    if (st)
        return st;
    if (!(tt.peak_tflops[SS_F32] > 0))
        return ss_diag_set(d, SS_ERR_INVALID,
                           "%s: %s.peak_tflops.f32: must be from %g to %g (every type needs an f32 rate)",
                           file, jp, PEAK_MIN, PEAK_MAX);
    *t = tt;
    return SS_OK;
}

/* ---- explicit form ---- */

typedef struct loader {
    const char *file;
    ss_machine *m;
    namemap nodes, hosts, types;
    ss_diag *d;
} loader;

/* Optional array `key` of root with at most max entries. */
static ss_status get_array(const loader *L, const json_t *root, const char *key, size_t max,
                           json_t **arr, size_t *n)
{
    ss_status st = ss_json_get_child(L->file, "$", root, key, JSON_ARRAY, 0, arr, L->d);
    if (st)
        return st;
    *n = *arr ? json_array_size(*arr) : 0;
    if (*n > max)
        return ss_diag_set(L->d, SS_ERR_INVALID, "%s: $.%s: %zu entries, more than the limit of %zu",
                           L->file, key, *n, max);
    return SS_OK;
}

static void copy_name(char *dst, const char *src)
{
    memset(dst, 0, SS_NAME_MAX);
    strncpy(dst, src, SS_NAME_MAX - 1);
}

/* Index of device type `name`: declared, or a built-in added on first use. */
static int resolve_type(loader *L, const char *jp, const char *name)
{
    int t = nm_get(&L->types, name);
    if (t >= 0)
        return t;
    const ss_device_type *b = ss_devtype_find_builtin(name);
    if (!b) {
        ss_diag_set(L->d, SS_ERR_INVALID,
                    "%s: %s.type: unknown device type \"%s\" (not in device_types; built-ins: %s)",
                    L->file, jp, name, builtin_list());
        return -1;
    }
    t = L->m->n_types++;
    L->m->types[t] = *b;
    nm_put(&L->types, L->m->types[t].name, t);
    return t;
}

static int resolve_host(loader *L, const char *jp, const char *name)
{
    int h = nm_get(&L->hosts, name);
    if (h < 0)
        ss_diag_set(L->d, SS_ERR_INVALID, "%s: %s.host: unknown host \"%s\" (not in $.hosts)", L->file,
                    jp, name);
    return h;
}

/* Add network node `name` of kind k; -1 with the diag set on a duplicate. */
static int add_node(loader *L, const char *jp, const char *name, ss_node_kind k, int host)
{
    ss_machine *m = L->m;
    int id = m->n_nodes;
    copy_name(m->nodes[id].name, name);
    m->nodes[id].kind = k;
    m->nodes[id].host = host;
    if (nm_put(&L->nodes, m->nodes[id].name, id) >= 0) {
        ss_diag_set(L->d, SS_ERR_INVALID,
                    "%s: %s.name: duplicate name \"%s\" (devices, peers, switches and NICs share one "
                    "namespace)",
                    L->file, jp, name);
        return -1;
    }
    m->n_nodes++;
    return id;
}

static ss_status load_hosts(loader *L, const json_t *arr)
{
    static const char *const keys[] = {"name", NULL};
    for (size_t i = 0; i < json_array_size(arr); i++) {
        char jp[64];
        snprintf(jp, sizeof jp, "$.hosts[%zu]", i);
        json_t *o = json_array_get(arr, i);
        const char *name = NULL;
        ss_status st = ss_json_check_keys(L->file, jp, o, keys, L->d);
        if (!st)
            st = ss_json_get_str(L->file, jp, o, "name", 1, SS_NAME_MAX, &name, L->d);
        if (st)
            return st;
        int h = L->m->n_hosts++;
        copy_name(L->m->hosts[h].name, name);
        if (nm_put(&L->hosts, L->m->hosts[h].name, h) >= 0)
            return ss_diag_set(L->d, SS_ERR_INVALID, "%s: %s.name: duplicate host \"%s\"", L->file,
                               jp, name);
    }
    return SS_OK;
}

static ss_status load_devices(loader *L, const json_t *arr)
{
    static const char *const keys[] = {"name", "type", "host", NULL};
    for (size_t i = 0; i < json_array_size(arr); i++) {
        char jp[64];
        snprintf(jp, sizeof jp, "$.devices[%zu]", i);
        json_t *o = json_array_get(arr, i);
        const char *name = NULL, *type = NULL, *host = NULL;
        ss_status st = ss_json_check_keys(L->file, jp, o, keys, L->d);
        if (!st)
            st = ss_json_get_str(L->file, jp, o, "name", 1, SS_NAME_MAX, &name, L->d);
        if (!st)
            st = ss_json_get_str(L->file, jp, o, "type", 1, SS_NAME_MAX, &type, L->d);
        if (!st)
            st = ss_json_get_str(L->file, jp, o, "host", 1, SS_NAME_MAX, &host, L->d);
        if (st)
            return st;
        int t = resolve_type(L, jp, type), h = t >= 0 ? resolve_host(L, jp, host) : -1;
        if (t < 0 || h < 0 || add_node(L, jp, name, SS_NODE_DEVICE, h) < 0)
            return L->d ? L->d->status : SS_ERR_INVALID;
        ss_device *dv = &L->m->devices[i];
        copy_name(dv->name, name);
        dv->type = t;
        dv->host = h;
        dv->accepts_connections = 1;
    }
    return SS_OK;
}

static ss_status load_peers(loader *L, const json_t *arr, int first)
{
    static const char *const keys[] = {"name", "type", "host", "up_mbps", "down_mbps",
                                       "accepts_connections", "latency_ms", NULL};
    for (size_t i = 0; i < json_array_size(arr); i++) {
        char jp[64];
        snprintf(jp, sizeof jp, "$.peers[%zu]", i);
        json_t *o = json_array_get(arr, i);
        const char *name = NULL, *type = NULL, *host = NULL;
        ss_peer_info p = {1, 0, 0, 0, -1};
        int acc = 1;
        ss_status st = ss_json_check_keys(L->file, jp, o, keys, L->d);
        if (!st)
            st = ss_json_get_str(L->file, jp, o, "name", 1, SS_NAME_MAX, &name, L->d);
        if (!st)
            st = ss_json_get_str(L->file, jp, o, "type", 1, SS_NAME_MAX, &type, L->d);
        if (!st)
            st = ss_json_get_str(L->file, jp, o, "host", 0, SS_NAME_MAX, &host, L->d);
        if (!st)
            st = ss_json_get_num(L->file, jp, o, "up_mbps", 1, 1e-3, 1e7, &p.up_mbps, L->d);
        if (!st)
            st = ss_json_get_num(L->file, jp, o, "down_mbps", 1, 1e-3, 1e7, &p.down_mbps, L->d);
        if (!st)
            st = ss_json_get_num(L->file, jp, o, "latency_ms", 1, 0, 1e4, &p.latency_ms, L->d);
        if (!st)
            st = ss_json_get_bool(L->file, jp, o, "accepts_connections", 0, &acc, L->d);
        if (st)
            return st;
        int t = resolve_type(L, jp, type);
        if (t < 0)
            return L->d ? L->d->status : SS_ERR_INVALID;
        int h;
        if (host) {
            if ((h = resolve_host(L, jp, host)) < 0)
                return L->d ? L->d->status : SS_ERR_INVALID;
        } else if ((h = nm_get(&L->hosts, name)) < 0) {
            h = L->m->n_hosts++;
            copy_name(L->m->hosts[h].name, name);
            nm_put(&L->hosts, L->m->hosts[h].name, h);
        }
        int id = first + (int)i;
        if (add_node(L, jp, name, SS_NODE_DEVICE, h) < 0)
            return L->d ? L->d->status : SS_ERR_INVALID;
        ss_device *dv = &L->m->devices[id];
        copy_name(dv->name, name);
        dv->type = t;
        dv->host = h;
        dv->accepts_connections = acc;
        L->m->peers[id] = p;
    }
    return SS_OK;
}

static ss_status load_nodes(loader *L, const json_t *arr, const char *what, ss_node_kind kind)
{
    static const char *const keys[] = {"name", "host", NULL};
    for (size_t i = 0; i < json_array_size(arr); i++) {
        char jp[64];
        snprintf(jp, sizeof jp, "$.%s[%zu]", what, i);
        json_t *o = json_array_get(arr, i);
        const char *name = NULL, *host = NULL;
        ss_status st = ss_json_check_keys(L->file, jp, o, keys, L->d);
        if (!st)
            st = ss_json_get_str(L->file, jp, o, "name", 1, SS_NAME_MAX, &name, L->d);
        if (!st)
            st = ss_json_get_str(L->file, jp, o, "host", 0, SS_NAME_MAX, &host, L->d);
        if (st)
            return st;
        int h = host ? resolve_host(L, jp, host) : -1;
        if ((host && h < 0) || add_node(L, jp, name, kind, h) < 0)
            return L->d ? L->d->status : SS_ERR_INVALID;
    }
    return SS_OK;
}

static int resolve_node(loader *L, const char *jp, const char *key, const char *name)
{
    int id = nm_get(&L->nodes, name);
    if (id < 0)
        ss_diag_set(L->d, SS_ERR_INVALID,
                    "%s: %s.%s: unknown node \"%s\" (not a device, peer, switch or NIC)", L->file, jp,
                    key, name);
    return id;
}

/* Optional collective bus-bandwidth efficiency of a link or fabric object
 * (ss_link.coll_eff / coll_half_bytes; docs/topology-format.md): coll_eff in
 * [0.01, 1], coll_half_bytes in [0, 1e12] bytes. Absent: unchanged. */
static ss_status parse_coll(const char *file, const char *jp, const json_t *o, double *eff,
                            double *half, ss_diag *d)
{
    ss_status st = ss_json_get_num(file, jp, o, "coll_eff", 0, 0.01, 1.0, eff, d);
    if (!st)
        st = ss_json_get_num(file, jp, o, "coll_half_bytes", 0, 0, 1e12, half, d);
    return st;
}

static ss_status load_links(loader *L, const json_t *arr)
{
    static const char *const keys[] = {"a", "b", "gbps", "gbps_ba", "latency_us", "kind",
                                       "estimated", "coll_eff", "coll_half_bytes", NULL};
    for (size_t i = 0; i < json_array_size(arr); i++) {
        char jp[64];
        snprintf(jp, sizeof jp, "$.links[%zu]", i);
        json_t *o = json_array_get(arr, i);
        const char *a = NULL, *b = NULL, *kind = NULL;
        ss_link *l = &L->m->links[L->m->n_links];
        ss_status st = ss_json_check_keys(L->file, jp, o, keys, L->d);
        if (!st)
            st = ss_json_get_str(L->file, jp, o, "a", 1, SS_NAME_MAX, &a, L->d);
        if (!st)
            st = ss_json_get_str(L->file, jp, o, "b", 1, SS_NAME_MAX, &b, L->d);
        if (!st)
            st = ss_json_get_num(L->file, jp, o, "gbps", 1, GBPS_MIN, GBPS_MAX, &l->gbps_ab, L->d);
        l->gbps_ba = l->gbps_ab;
        if (!st)
            st = get_num_or_zero(L->file, jp, o, "gbps_ba", GBPS_MIN, GBPS_MAX, &l->gbps_ba, L->d);
        if (!st)
            st = ss_json_get_num(L->file, jp, o, "latency_us", 1, 0, 1e7, &l->latency_us, L->d);
        if (!st)
            st = ss_json_get_str(L->file, jp, o, "kind", 1, sizeof l->kind, &kind, L->d);
        if (!st)
            st = ss_json_get_bool(L->file, jp, o, "estimated", 0, &l->estimated, L->d);
        l->coll_eff = 1.0;
        l->coll_half_bytes = 0.0;
        if (!st)
            st = parse_coll(L->file, jp, o, &l->coll_eff, &l->coll_half_bytes, L->d);
        if (st)
            return st;
        if ((l->a = resolve_node(L, jp, "a", a)) < 0 || (l->b = resolve_node(L, jp, "b", b)) < 0)
            return L->d ? L->d->status : SS_ERR_INVALID;
        if (l->a == l->b)
            return ss_diag_set(L->d, SS_ERR_INVALID, "%s: %s: link from \"%s\" to itself", L->file,
                               jp, a);
        strncpy(l->kind, kind, sizeof l->kind - 1);
        L->m->n_links++;
    }
    return SS_OK;
}

static ss_status load_explicit(const json_t *root, const char *file, ss_machine **out, ss_diag *d)
{
    static const char *const keys[] = {"format", "version", "name", "device_types", "hosts",
                                       "devices", "switches", "nics", "links", "peers", NULL};
    loader L = {file, NULL, {0, NULL, NULL}, {0, NULL, NULL}, {0, NULL, NULL}, d};
    json_t *types, *hosts, *devices, *switches, *nics, *links, *peers;
    size_t nt, nh, nd, ns, nn, nl, np;
    const char *name = NULL;
    ss_status st = ss_json_check_keys(file, "$", root, keys, d);
    if (!st)
        st = ss_json_get_str(file, "$", root, "name", 1, SS_NAME_MAX, &name, d);
    if (!st)
        st = get_array(&L, root, "device_types", 1024, &types, &nt);
    if (!st)
        st = get_array(&L, root, "hosts", SS_MACHINE_MAX_DEVICES, &hosts, &nh);
    if (!st)
        st = get_array(&L, root, "devices", SS_MACHINE_MAX_DEVICES, &devices, &nd);
    if (!st)
        st = get_array(&L, root, "switches", SS_MACHINE_MAX_NODES, &switches, &ns);
    if (!st)
        st = get_array(&L, root, "nics", SS_MACHINE_MAX_NODES, &nics, &nn);
    if (!st)
        st = get_array(&L, root, "links", SS_MACHINE_MAX_LINKS, &links, &nl);
    if (!st)
        st = get_array(&L, root, "peers", SS_MACHINE_MAX_DEVICES, &peers, &np);
    if (st)
        return st;
    if (nd + np == 0)
        return ss_diag_set(d, SS_ERR_INVALID, "%s: $.devices: a topology needs at least one device or peer",
                           file);
    if (nd + np > SS_MACHINE_MAX_DEVICES || nd + np + ns + nn + 1 > SS_MACHINE_MAX_NODES ||
        nl + np > SS_MACHINE_MAX_LINKS)
        return ss_diag_set(d, SS_ERR_INVALID, "%s: $: %zu devices, %zu nodes and %zu links exceed the limits (%d, %d, %d)",
                           file, nd + np, nd + np + ns + nn, nl + np, SS_MACHINE_MAX_DEVICES,
                           SS_MACHINE_MAX_NODES, SS_MACHINE_MAX_LINKS);
    int cap_types = (int)nt + ss_devtype_builtin_count();
    int cap_nodes = (int)(nd + np + ns + nn) + (np ? 1 : 0);
    ss_machine *m = ss_machine_alloc(cap_types, (int)(nh + np), (int)(nd + np), cap_nodes,
                                     (int)(nl + np));
    if (!m || nm_init(&L.nodes, (size_t)cap_nodes) || nm_init(&L.hosts, nh + np) ||
        nm_init(&L.types, (size_t)cap_types)) {
        st = ss_diag_set(d, SS_ERR_NOMEM, "%s: out of memory", file);
        goto fail;
    }
    L.m = m;
    copy_name(m->name, name);
    m->n_types = m->n_hosts = m->n_nodes = m->n_links = 0;
    for (size_t i = 0; i < nt && !st; i++) {
        char jp[64];
        snprintf(jp, sizeof jp, "$.device_types[%zu]", i);
        st = parse_type(file, jp, json_array_get(types, i), m->types, m->n_types,
                        &m->types[m->n_types], d);
        if (!st) {
            nm_put(&L.types, m->types[m->n_types].name, m->n_types);
            m->n_types++;
        }
    }
    if (!st)
        st = load_hosts(&L, hosts);
    if (!st)
        st = load_devices(&L, devices);
    if (!st)
        st = load_peers(&L, peers, (int)nd);
    if (!st)
        st = load_nodes(&L, switches, "switches", SS_NODE_SWITCH);
    int inet = -1;
    if (!st && np) {
        inet = nm_get(&L.nodes, "internet");
        if (inet < 0)
            inet = add_node(&L, "$.peers", "internet", SS_NODE_SWITCH, -1);
        else if (m->nodes[inet].kind != SS_NODE_SWITCH)
            st = ss_diag_set(d, SS_ERR_INVALID,
                             "%s: $.peers: peers attach to the switch \"internet\", but that name is "
                             "not a switch",
                             file);
    }
    if (!st)
        st = load_nodes(&L, nics, "nics", SS_NODE_NIC);
    if (!st)
        st = load_links(&L, links);
    for (size_t i = 0; i < np && !st; i++) {
        int id = (int)(nd + i);
        ss_peer_info *p = &m->peers[id];
        ss_link *l = &m->links[m->n_links];
        l->a = id;
        l->b = inet;
        l->gbps_ab = p->up_mbps / 8000.0;
        l->gbps_ba = p->down_mbps / 8000.0;
        l->latency_us = p->latency_ms * 1000.0;
        l->coll_eff = 1.0;
        strcpy(l->kind, "internet");
        p->link = m->n_links++;
    }
    if (!st)
        st = ss_machine_finish(m, file, d);
    if (st)
        goto fail;
    nm_free(&L.nodes);
    nm_free(&L.hosts);
    nm_free(&L.types);
    *out = m;
    return SS_OK;
fail:
    if (!st)
        st = SS_ERR_INVALID;
    nm_free(&L.nodes);
    nm_free(&L.hosts);
    nm_free(&L.types);
    ss_machine_free(m);
    return st;
}

/* ---- compact form ---- */

typedef struct fabric {
    const char *kind, *topology;
    double gbps, latency_us;
    int nics;                       /* inter only */
    double pcie_gbps, pcie_latency_us; /* inter only: NIC attachment */
    double coll_eff, coll_half_bytes;  /* collectives' bus-bandwidth curve (1, 0: ideal) */
} fabric;

/* jansson builders: every failure only sets *bad (the value is freed). */
static void put(json_t *o, const char *k, json_t *v, int *bad)
{
    if (!v || json_object_set_new(o, k, v))
        *bad = 1;
}

static void append(json_t *a, json_t *v, int *bad)
{
    if (!v || json_array_append_new(a, v))
        *bad = 1;
}

static json_t *named(const char *name, const char *host, int *bad)
{
    json_t *o = json_object();
    if (!o) {
        *bad = 1;
        return NULL;
    }
    put(o, "name", json_string(name), bad);
    if (host)
        put(o, "host", json_string(host), bad);
    return o;
}

static void add_link(json_t *links, const char *a, const char *b, double gbps, double lat,
                     const char *kind, const fabric *f, int *bad)
{
    json_t *o = json_object();
    if (!o) {
        *bad = 1;
        return;
    }
    put(o, "a", json_string(a), bad);
    put(o, "b", json_string(b), bad);
    put(o, "gbps", json_real(gbps), bad);
    put(o, "latency_us", json_real(lat), bad);
    put(o, "kind", json_string(kind), bad);
    if (f && f->coll_eff > 0 && f->coll_eff != 1.0)
        put(o, "coll_eff", json_real(f->coll_eff), bad);
    if (f && f->coll_half_bytes != 0.0)
        put(o, "coll_half_bytes", json_real(f->coll_half_bytes), bad);
    append(links, o, bad);
}

static ss_status parse_fabric(const char *file, const json_t *c, const char *key, int inter,
                              fabric *f, int *present, ss_diag *d)
{
    static const char *const ikeys[] = {"kind", "gbps", "latency_us", "topology", "coll_eff",
                                        "coll_half_bytes", NULL};
    static const char *const ekeys[] = {"kind", "gbps", "latency_us", "nics_per_node",
                                        "pcie_gbps", "pcie_latency_us", "coll_eff",
                                        "coll_half_bytes", NULL};
    char jp[64];
    snprintf(jp, sizeof jp, "$.compact.%s", key);
    json_t *o;
    ss_status st = ss_json_get_child(file, "$.compact", c, key, JSON_OBJECT, 0, &o, d);
    *present = o != NULL;
    if (st || !o)
        return st;
    st = ss_json_check_keys(file, jp, o, inter ? ekeys : ikeys, d);
    if (!st)
        st = ss_json_get_str(file, jp, o, "kind", 1, 32, &f->kind, d);
    if (!st)
        st = ss_json_get_num(file, jp, o, "gbps", 1, GBPS_MIN, GBPS_MAX, &f->gbps, d);
    if (!st)
        st = ss_json_get_num(file, jp, o, "latency_us", 1, 0, 1e7, &f->latency_us, d);
    f->coll_eff = 1.0;
    f->coll_half_bytes = 0.0;
    if (!st)
        st = parse_coll(file, jp, o, &f->coll_eff, &f->coll_half_bytes, d);
    if (st)
        return st;
    if (inter) {
        int64_t k = 1;
        f->pcie_gbps = f->gbps;
        f->pcie_latency_us = 2.0;
        st = ss_json_get_int(file, jp, o, "nics_per_node", 0, 1, MAX_DEVICES_PER_NODE, &k, d);
        if (!st)
            st = ss_json_get_num(file, jp, o, "pcie_gbps", 0, GBPS_MIN, GBPS_MAX, &f->pcie_gbps, d);
        if (!st)
            st = ss_json_get_num(file, jp, o, "pcie_latency_us", 0, 0, 1e7, &f->pcie_latency_us, d);
        f->nics = (int)k;
        if (!st && strcmp(f->kind, "infiniband") && strcmp(f->kind, "ethernet"))
            st = ss_diag_set(d, SS_ERR_INVALID,
                             "%s: %s.kind: unknown inter-node fabric \"%s\" (expected \"infiniband\" or \"ethernet\")",
                             file, jp, f->kind);
        return st;
    }
    const char *dflt = strcmp(f->kind, "nvlink") == 0 ? "all-to-all" : "switch";
    f->topology = dflt;
    st = ss_json_get_str(file, jp, o, "topology", 0, 32, &f->topology, d);
    if (st)
        return st;
    if (strcmp(f->kind, "nvlink") && strcmp(f->kind, "nvswitch") && strcmp(f->kind, "pcie"))
        return ss_diag_set(d, SS_ERR_INVALID,
                           "%s: %s.kind: unknown intra-node fabric \"%s\" (expected \"nvlink\", \"nvswitch\" or \"pcie\")",
                           file, jp, f->kind);
    if (strcmp(f->topology, "switch") && strcmp(f->topology, "all-to-all") && strcmp(f->topology, "ring"))
        return ss_diag_set(d, SS_ERR_INVALID,
                           "%s: %s.topology: unknown topology \"%s\" (expected \"switch\", \"all-to-all\" or \"ring\")",
                           file, jp, f->topology);
    if (strcmp(f->kind, "nvlink") && strcmp(f->topology, "switch"))
        return ss_diag_set(d, SS_ERR_INVALID, "%s: %s.topology: %s is always a switch", file, jp,
                           f->kind);
    return SS_OK;
}

/* Is device type `name` a CPU type (for naming devices "cpuI" vs "gpuI")? */
static int type_is_cpu(const json_t *types, const char *name)
{
    for (size_t i = 0; i < json_array_size(types); i++) {
        json_t *t = json_array_get(types, i);
        if (!json_is_string(json_object_get(t, "name")) ||
            strcmp(json_string_value(json_object_get(t, "name")), name))
            continue;
        if (json_is_boolean(json_object_get(t, "is_cpu")))
            return json_is_true(json_object_get(t, "is_cpu"));
        json_t *b = json_object_get(t, "base");
        if (json_is_string(b))
            name = json_string_value(b);
        break;
    }
    const ss_device_type *bt = ss_devtype_find_builtin(name);
    return bt ? bt->is_cpu : 0;
}

static int type_known(const json_t *types, const char *name)
{
    for (size_t i = 0; i < json_array_size(types); i++) {
        json_t *n = json_object_get(json_array_get(types, i), "name");
        if (json_is_string(n) && strcmp(json_string_value(n), name) == 0)
            return 1;
    }
    return ss_devtype_find_builtin(name) != NULL;
}

/* Build the explicit document for a compact one (docs/topology-format.md,
 * "Compact form"). */
static ss_status expand_compact(const json_t *root, const char *file, int nodes_override,
                                json_t **out, ss_diag *d)
{
    static const char *const keys[] = {"format", "version", "name", "device_types", "compact", NULL};
    static const char *const ckeys[] = {"nodes", "devices_per_node", "device_type", "intra",
                                        "inter", NULL};
    json_t *c = json_object_get(root, "compact"), *types = NULL;
    const char *name = NULL, *dtype = NULL;
    int64_t nodes = 0, dpn = 0;
    fabric intra = {0}, inter = {0};
    int has_intra = 0, has_inter = 0;
    ss_status st = ss_json_check_keys(file, "$", root, keys, d);
    if (!st)
        st = ss_json_get_str(file, "$", root, "name", 1, SS_NAME_MAX, &name, d);
    if (!st)
        st = ss_json_get_child(file, "$", root, "device_types", JSON_ARRAY, 0, &types, d);
    if (!st)
        st = ss_json_check_keys(file, "$.compact", c, ckeys, d);
    if (!st)
        st = ss_json_get_int(file, "$.compact", c, "nodes", 1, 1, MAX_NODES_PER_COMPACT, &nodes, d);
    if (!st)
        st = ss_json_get_int(file, "$.compact", c, "devices_per_node", 1, 1, MAX_DEVICES_PER_NODE,
                             &dpn, d);
    if (!st)
        st = ss_json_get_str(file, "$.compact", c, "device_type", 1, SS_NAME_MAX, &dtype, d);
    if (!st)
        st = parse_fabric(file, c, "intra", 0, &intra, &has_intra, d);
    if (!st)
        st = parse_fabric(file, c, "inter", 1, &inter, &has_inter, d);
    if (st)
        return st;
    if (nodes_override > 0) {
        if (nodes_override > MAX_NODES_PER_COMPACT)
            return ss_diag_set(d, SS_ERR_INVALID, "%s: --nodes %d out of range (expected 1 to %d)",
                               file, nodes_override, MAX_NODES_PER_COMPACT);
        nodes = nodes_override;
    }
    if (nodes * dpn > SS_MACHINE_MAX_DEVICES)
        return ss_diag_set(d, SS_ERR_INVALID,
                           "%s: $.compact: %lld nodes x %lld devices is more than the limit of %d devices",
                           file, (long long)nodes, (long long)dpn, SS_MACHINE_MAX_DEVICES);
    if (!type_known(types, dtype))
        return ss_diag_set(d, SS_ERR_INVALID,
                           "%s: $.compact.device_type: unknown device type \"%s\" (not in device_types; built-ins: %s)",
                           file, dtype, builtin_list());
    if (dpn > 1 && !has_intra)
        return ss_diag_set(d, SS_ERR_INVALID,
                           "%s: $.compact: missing required key \"intra\" (devices_per_node > 1)", file);
    if (nodes > 1 && !has_inter)
        return ss_diag_set(d, SS_ERR_INVALID, "%s: $.compact: missing required key \"inter\" (nodes > 1)",
                           file);
    if (has_inter && inter.nics > dpn)
        return ss_diag_set(d, SS_ERR_INVALID,
                           "%s: $.compact.inter.nics_per_node: %d NICs for %lld devices per node (at most one per device)",
                           file, inter.nics, (long long)dpn);

    int bad = 0, D = (int)dpn, k = has_inter ? inter.nics : 0;
    int pcie = has_intra && strcmp(intra.kind, "pcie") == 0;
    int nvsw = has_intra && !pcie && strcmp(intra.topology, "switch") == 0;
    int ring = has_intra && strcmp(intra.topology, "ring") == 0;
    int groups = pcie ? (k > 1 ? k : 1) : k; /* PCIe switches per node */
    const char *dev = type_is_cpu(types, dtype) ? "cpu" : "gpu";
    json_t *doc = json_object(), *hosts = json_array(), *devs = json_array(), *sws = json_array(),
           *nics = json_array(), *links = json_array();
    if (!doc || !hosts || !devs || !sws || !nics || !links)
        bad = 1;
    char a[SS_NAME_MAX], b[SS_NAME_MAX], h[SS_NAME_MAX];
    for (int64_t n = 0; n < nodes && !bad; n++) {
        snprintf(h, sizeof h, "n%lld", (long long)n);
        append(hosts, named(h, NULL, &bad), &bad);
        for (int i = 0; i < D; i++) {
            snprintf(a, sizeof a, "n%lld.%s%d", (long long)n, dev, i);
            json_t *o = named(a, h, &bad);
            if (o)
                put(o, "type", json_string(dtype), &bad);
            append(devs, o, &bad);
        }
        if (nvsw) {
            snprintf(a, sizeof a, "n%lld.nvswitch", (long long)n);
            append(sws, named(a, h, &bad), &bad);
        }
        for (int g = 0; g < groups; g++) {
            snprintf(a, sizeof a, "n%lld.pcie%d", (long long)n, g);
            append(sws, named(a, h, &bad), &bad);
        }
        if (pcie && groups > 1) {
            snprintf(a, sizeof a, "n%lld.cpu", (long long)n);
            append(sws, named(a, h, &bad), &bad);
        }
        for (int j = 0; j < k; j++) {
            snprintf(a, sizeof a, "n%lld.nic%d", (long long)n, j);
            append(nics, named(a, h, &bad), &bad);
        }
        /* intra-node fabric */
        for (int i = 0; i < D && has_intra && !pcie; i++) {
            snprintf(a, sizeof a, "n%lld.%s%d", (long long)n, dev, i);
            if (nvsw) {
                snprintf(b, sizeof b, "n%lld.nvswitch", (long long)n);
                add_link(links, a, b, intra.gbps, intra.latency_us, intra.kind, &intra, &bad);
            } else if (ring) {
                if (D > 2 || i == 0) {
                    snprintf(b, sizeof b, "n%lld.%s%d", (long long)n, dev, (i + 1) % D);
                    if (D > 1)
                        add_link(links, a, b, intra.gbps, intra.latency_us, intra.kind, &intra, &bad);
                }
            } else {
                for (int j = i + 1; j < D; j++) {
                    snprintf(b, sizeof b, "n%lld.%s%d", (long long)n, dev, j);
                    add_link(links, a, b, intra.gbps, intra.latency_us, intra.kind, &intra, &bad);
                }
            }
        }
        /* PCIe: the intra fabric itself, or the NIC attachment */
        double pg = pcie ? intra.gbps : inter.pcie_gbps;
        double pl = pcie ? intra.latency_us : inter.pcie_latency_us;
        for (int i = 0; i < D && groups > 0; i++) {
            snprintf(a, sizeof a, "n%lld.%s%d", (long long)n, dev, i);
            snprintf(b, sizeof b, "n%lld.pcie%d", (long long)n, (int)((int64_t)i * groups / D));
            add_link(links, a, b, pg, pl, "pcie", pcie ? &intra : &inter, &bad);
        }
        if (pcie && groups > 1)
            for (int g = 0; g < groups; g++) {
                snprintf(a, sizeof a, "n%lld.pcie%d", (long long)n, g);
                snprintf(b, sizeof b, "n%lld.cpu", (long long)n);
                add_link(links, a, b, pg, pl, "pcie", pcie ? &intra : &inter, &bad);
            }
        for (int j = 0; j < k; j++) {
            snprintf(a, sizeof a, "n%lld.nic%d", (long long)n, j);
            snprintf(b, sizeof b, "n%lld.pcie%d", (long long)n, j);
            add_link(links, a, b, pg, pl, "pcie", pcie ? &intra : &inter, &bad);
            add_link(links, a, "core", inter.gbps, inter.latency_us, inter.kind, &inter, &bad);
        }
    }
    if (has_inter)
        append(sws, named("core", NULL, &bad), &bad);
    if (doc) {
        put(doc, "format", json_string(FORMAT), &bad);
        put(doc, "version", json_integer(1), &bad);
        put(doc, "name", json_string(name), &bad);
        if (types)
            put(doc, "device_types", json_incref(types), &bad);
        put(doc, "hosts", hosts, &bad);
        put(doc, "devices", devs, &bad);
        put(doc, "switches", sws, &bad);
        put(doc, "nics", nics, &bad);
        put(doc, "links", links, &bad);
    } else {
        json_decref(hosts);
        json_decref(devs);
        json_decref(sws);
        json_decref(nics);
        json_decref(links);
    }
    if (bad) {
        json_decref(doc);
        return ss_diag_set(d, SS_ERR_NOMEM, "%s: out of memory expanding the compact form", file);
    }
    *out = doc;
    return SS_OK;
}

ss_status ss_machine_from_json(const json_t *root, const char *file, int nodes, ss_machine **out,
                               ss_diag *d)
{
    ss_status st = ss_json_check_header(file, root, FORMAT, 1, d);
    if (st)
        return st;
    if (!json_object_get(root, "compact")) {
        if (nodes > 0)
            return ss_diag_set(d, SS_ERR_INVALID,
                               "%s: --nodes applies only to a compact topology (this one is explicit)",
                               file);
        return load_explicit(root, file, out, d);
    }
    json_t *c = json_object_get(root, "compact");
    if (!json_is_object(c))
        return ss_diag_set(d, SS_ERR_PARSE, "%s: $.compact: expected an object, got %s", file,
                           ss_json_type_name(c));
    json_t *doc = NULL;
    st = expand_compact(root, file, nodes, &doc, d);
    if (st)
        return st;
    st = load_explicit(doc, file, out, d);
    json_decref(doc);
    return st;
}

/* ---- public loaders ---- */

/* Load a topology file (explicit or compact form). On success *out is a new
 * machine the caller frees with ss_machine_free; on error *out is untouched
 * and d names the file and line:column or JSON path. */
ss_status ss_machine_load(const char *path, ss_machine **out, ss_diag *d)
{
    return ss_machine_load_nodes(path, 0, out, d);
}

/* As ss_machine_load, with a compact topology's node count replaced by nodes
 * (> 0); nodes > 0 with an explicit topology is SS_ERR_INVALID. */
ss_status ss_machine_load_nodes(const char *path, int nodes, ss_machine **out, ss_diag *d)
{
    json_t *root = NULL;
    ss_status st = ss_json_parse_file(path, &root, d);
    if (st)
        return st;
    st = ss_machine_from_json(root, path, nodes, out, d);
    json_decref(root);
    return st;
}

/* Load from a JSON string; label names it in messages. */
ss_status ss_machine_load_string(const char *json, const char *label, ss_machine **out,
                                 ss_diag *d)
{
    json_t *root = NULL;
    ss_status st = ss_json_parse_string(json, label, &root, d);
    if (st)
        return st;
    st = ss_machine_from_json(root, label, 0, out, d);
    json_decref(root);
    return st;
}

/* ---- writer ---- */

static json_t *eff_json(int n, const double *xs, const double *ys, int *bad)
{
    json_t *a = json_array();
    if (!a) {
        *bad = 1;
        return NULL;
    }
    for (int i = 0; i < n; i++) {
        json_t *p = json_array();
        if (p) {
            append(p, json_real(xs[i]), bad);
            append(p, json_real(ys[i]), bad);
        }
        append(a, p, bad);
    }
    return a;
}

static json_t *type_json(const ss_device_type *t, int *bad)
{
    json_t *o = named(t->name, NULL, bad), *peak = json_object();
    if (!o) {
        json_decref(peak);
        return NULL;
    }
    put(o, "is_cpu", json_boolean(t->is_cpu), bad);
    if (peak)
        for (int k = 0; k < SS_DTYPE_COUNT; k++)
            if (k != SS_F8 || t->peak_tflops[k] != 0)
                put(peak, dtype_keys[k], json_real(t->peak_tflops[k]), bad);
    put(o, "peak_tflops", peak, bad);
    put(o, "mem_gbps", json_real(t->mem_gbps), bad);
    put(o, "mem_gib", json_real(t->mem_gib), bad);
    put(o, "launch_us", json_real(t->launch_us), bad);
    put(o, "eff_flops", eff_json(t->n_eff_flops, t->eff_flops_x, t->eff_flops_y, bad), bad);
    put(o, "eff_mem", eff_json(t->n_eff_mem, t->eff_mem_x, t->eff_mem_y, bad), bad);
    if (t->eff_align[0] != 1 || t->eff_align[1] != 1 || t->eff_align[2] != 1) {
        json_t *al = json_array();
        for (int k = 0; k < 3 && al; k++)
            append(al, json_real(t->eff_align[k]), bad);
        put(o, "eff_align", al, bad);
    }
    if (t->mb_overhead_us != 0)
        put(o, "mb_overhead_us", json_real(t->mb_overhead_us), bad);
    if (t->dispatch_window != 1)
        put(o, "dispatch_window", json_integer(t->dispatch_window), bad);
    if (t->collective_launch_us != SS_COLL_LAUNCH_US_DEFAULT)
        put(o, "collective_launch_us", json_real(t->collective_launch_us), bad);
    if (t->comm_blocks_compute)
        put(o, "comm_blocks_compute", json_true(), bad);
    return o;
}

static json_t *machine_json(const ss_machine *m, ss_diag *d)
{
    int bad = 0;
    json_t *doc = json_object(), *types = json_array(), *hosts = json_array(),
           *devs = json_array(), *sws = json_array(), *nics = json_array(), *links = json_array(),
           *peers = json_array();
    for (int i = 0; i < m->n_types; i++)
        append(types, type_json(&m->types[i], &bad), &bad);
    for (int i = 0; i < m->n_hosts; i++)
        append(hosts, named(m->hosts[i].name, NULL, &bad), &bad);
    for (int i = 0; i < m->n_devices; i++) {
        const ss_device *dv = &m->devices[i];
        json_t *o = named(dv->name, NULL, &bad);
        if (o) {
            put(o, "type", json_string(m->types[dv->type].name), &bad);
            put(o, "host", json_string(m->hosts[dv->host].name), &bad);
        }
        if (!m->peers[i].is_peer) {
            append(devs, o, &bad);
            continue;
        }
        const ss_peer_info *p = &m->peers[i];
        if (o) {
            put(o, "up_mbps", json_real(p->up_mbps), &bad);
            put(o, "down_mbps", json_real(p->down_mbps), &bad);
            put(o, "accepts_connections", json_boolean(dv->accepts_connections), &bad);
            put(o, "latency_ms", json_real(p->latency_ms), &bad);
        }
        append(peers, o, &bad);
    }
    for (int i = m->n_devices; i < m->n_nodes; i++) {
        const ss_netnode *nd = &m->nodes[i];
        json_t *o = named(nd->name, nd->host >= 0 ? m->hosts[nd->host].name : NULL, &bad);
        append(nd->kind == SS_NODE_NIC ? nics : sws, o, &bad);
    }
    for (int i = 0; i < m->n_links; i++) {
        const ss_link *l = &m->links[i];
        if (l->a < m->n_devices && m->peers[l->a].is_peer && m->peers[l->a].link == i)
            continue;
        json_t *o = json_object();
        if (o) {
            put(o, "a", json_string(m->nodes[l->a].name), &bad);
            put(o, "b", json_string(m->nodes[l->b].name), &bad);
            put(o, "gbps", json_real(l->gbps_ab), &bad);
            if (l->gbps_ba != l->gbps_ab)
                put(o, "gbps_ba", json_real(l->gbps_ba), &bad);
            put(o, "latency_us", json_real(l->latency_us), &bad);
            put(o, "kind", json_string(l->kind), &bad);
            if (l->estimated)
                put(o, "estimated", json_true(), &bad);
            if (l->coll_eff > 0 && l->coll_eff != 1.0)
                put(o, "coll_eff", json_real(l->coll_eff), &bad);
            if (l->coll_half_bytes > 0)
                put(o, "coll_half_bytes", json_real(l->coll_half_bytes), &bad);
        }
        append(links, o, &bad);
    }
    if (doc) {
        put(doc, "format", json_string(FORMAT), &bad);
        put(doc, "version", json_integer(1), &bad);
        put(doc, "name", json_string(m->name), &bad);
        put(doc, "device_types", types, &bad);
        put(doc, "hosts", hosts, &bad);
        put(doc, "devices", devs, &bad);
        put(doc, "switches", sws, &bad);
        put(doc, "nics", nics, &bad);
        put(doc, "links", links, &bad);
        if (m->n_peers)
            put(doc, "peers", peers, &bad);
        else
            json_decref(peers);
    } else {
        json_t *all[] = {types, hosts, devs, sws, nics, links, peers};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
            json_decref(all[i]);
    }
    if (bad) {
        json_decref(doc);
        ss_diag_set(d, SS_ERR_NOMEM, "out of memory writing topology \"%s\"", m->name);
        return NULL;
    }
    return doc;
}

/* Write m in the explicit form to path, atomically (temp file + rename).
 * Loading the file gives a machine with the same fingerprint. */
ss_status ss_machine_save(const ss_machine *m, const char *path, ss_diag *d)
{
    json_t *doc = machine_json(m, d);
    if (!doc)
        return SS_ERR_NOMEM;
    ss_status st = ss_json_write_atomic(path, doc, d);
    json_decref(doc);
    return st;
}

/* The explicit form as a new string (free with ss_free). */
ss_status ss_machine_to_string(const ss_machine *m, char **out, ss_diag *d)
{
    json_t *doc = machine_json(m, d);
    if (!doc)
        return SS_ERR_NOMEM;
    ss_status st = ss_json_to_string(doc, out, d);
    json_decref(doc);
    return st;
}
