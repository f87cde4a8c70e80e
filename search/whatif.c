/*
 * whatif.c — what-if sweeps (the rules in whatif.h): scenarios x node
 * counts, each point's machine made from the compact topology by the
 * scenario's changes, planned by the public planner entry (ss_search_run)
 * on one thread, points spread over worker threads.
 *
 * Invariant: every per-point input (the topology JSON text, the model spec)
 * is made on the calling thread before any worker starts; workers share
 * nothing but the next-point counter, the done count and the stop flag
 * (under one mutex), and each writes only its own point. So a point's
 * result does not depend on the thread count or the order points run in.
 */
#include "whatif.h"

#include "core/json_util.h"
#include "core/outfile.h"

#include <ctype.h>
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

/* ---- device types and prices ------------------------------------------------- */

const ss_device_type *ss_whatif_find_devtype(const char *name, int *n_matches)
{
    const ss_device_type *hit = NULL;
    int n = 0;
    if (name && (hit = ss_devtype_find_builtin(name)) != NULL) {
        if (n_matches)
            *n_matches = 1;
        return hit;
    }
    size_t len = name ? strlen(name) : 0;
    for (int i = 0; len > 0 && i < ss_devtype_builtin_count(); i++) {
        const ss_device_type *t = ss_devtype_builtin(i);
        if (!strncasecmp(t->name, name, len))
            hit = t, n++;
    }
    if (n_matches)
        *n_matches = n;
    return n == 1 ? hit : NULL;
}

/* The price of device type `type` (0: none): the longest key it starts with. */
static double price_of(const ss_whatif_config *c, const char *type)
{
    size_t best = 0;
    double usd = 0;
    for (int i = 0; i < c->n_prices; i++) {
        size_t k = strlen(c->prices[i].type);
        if (k > best && !strncasecmp(type, c->prices[i].type, k))
            best = k, usd = c->prices[i].usd_per_gpu_hour;
    }
    return usd;
}

const char *ss_whatif_scenario_label(const ss_whatif_scenario *s, char *buf, size_t cap)
{
    if (s->name[0]) {
        snprintf(buf, cap, "%s", s->name);
        return buf;
    }
    size_t n = 0;
    buf[0] = 0;
#define ADD(...)                                                                              \
    do {                                                                                      \
        if (n < cap)                                                                          \
            n += (size_t)snprintf(buf + n, cap - n, "%s", n ? ", " : "");                     \
        if (n < cap)                                                                          \
            n += (size_t)snprintf(buf + n, cap - n, __VA_ARGS__);                             \
    } while (0)
    if (s->device_type[0])
        ADD("%s", s->device_type);
    if (s->inter_gbps > 0)
        ADD("%g Gb/s", s->inter_gbps);
    if (s->inter_scale > 0)
        ADD("inter x%g", s->inter_scale);
    if (s->intra_gbps > 0)
        ADD("intra %g Gb/s", s->intra_gbps);
    if (s->precision[0])
        ADD("%s", s->precision);
    if (s->batch > 0)
        ADD("batch %lld", (long long)s->batch);
#undef ADD
    if (!buf[0])
        snprintf(buf, cap, "as is");
    return buf;
}

/* ---- scenarios files ------------------------------------------------------------- */

ss_status ss_whatif_load_scenarios(const char *path, ss_whatif_scenario **out, int *n,
                                   ss_diag *d)
{
    static const char *const keys[] = {"format", "version", "scenarios", NULL};
    static const char *const skeys[] = {"name",       "device_type", "inter_gbps", "inter_scale",
                                        "intra_gbps", "precision",   "batch",      NULL};
    *out = NULL;
    *n = 0;
    json_t *root = NULL, *arr = NULL;
    ss_status st = ss_json_parse_file(path, &root, d);
    if (st == SS_OK)
        st = ss_json_check_header(path, root, "simsearch-whatif-scenarios", 1, d);
    if (st == SS_OK)
        st = ss_json_check_keys(path, "$", root, keys, d);
    if (st == SS_OK)
        st = ss_json_get_child(path, "$", root, "scenarios", JSON_ARRAY, 1, &arr, d);
    size_t cnt = arr ? json_array_size(arr) : 0;
    if (st == SS_OK && (cnt == 0 || cnt > 4096))
        st = ss_diag_set(d, SS_ERR_INVALID, "%s: $.scenarios: expected 1 to 4096 scenarios, got %zu",
                         path, cnt);
    ss_whatif_scenario *sc = st == SS_OK ? ss_calloc(cnt, sizeof *sc) : NULL;
    if (st == SS_OK && !sc)
        st = ss_diag_set(d, SS_ERR_NOMEM, "%s: out of memory", path);
    for (size_t i = 0; st == SS_OK && i < cnt; i++) {
        char jp[48];
        snprintf(jp, sizeof jp, "$.scenarios[%zu]", i);
        json_t *o = json_array_get(arr, i);
        if (!json_is_object(o)) {
            st = ss_diag_set(d, SS_ERR_PARSE, "%s: %s: expected an object, got %s", path, jp,
                             ss_json_type_name(o));
            break;
        }
        const char *name = NULL, *dt = NULL, *prec = NULL;
        int64_t batch = 0;
        st = ss_json_check_keys(path, jp, o, skeys, d);
        if (st == SS_OK)
            st = ss_json_get_str(path, jp, o, "name", 0, sizeof sc[i].name, &name, d);
        if (st == SS_OK)
            st = ss_json_get_str(path, jp, o, "device_type", 0, SS_NAME_MAX, &dt, d);
        if (st == SS_OK)
            st = ss_json_get_str(path, jp, o, "precision", 0, sizeof sc[i].precision, &prec, d);
        if (st == SS_OK)
            st = ss_json_get_num(path, jp, o, "inter_gbps", 0, 1e-3, 1e7, &sc[i].inter_gbps, d);
        if (st == SS_OK)
            st = ss_json_get_num(path, jp, o, "inter_scale", 0, 1e-3, 1e3, &sc[i].inter_scale, d);
        if (st == SS_OK)
            st = ss_json_get_num(path, jp, o, "intra_gbps", 0, 1e-3, 1e7, &sc[i].intra_gbps, d);
        if (st == SS_OK)
            st = ss_json_get_int(path, jp, o, "batch", 0, 1, 1LL << 32, &batch, d);
        if (st == SS_OK && sc[i].inter_gbps > 0 && sc[i].inter_scale > 0)
            st = ss_diag_set(d, SS_ERR_INVALID,
                             "%s: %s: inter_gbps and inter_scale both given (expected one)", path,
                             jp);
        if (st != SS_OK)
            break;
        if (name)
            snprintf(sc[i].name, sizeof sc[i].name, "%s", name);
        if (prec)
            snprintf(sc[i].precision, sizeof sc[i].precision, "%s", prec);
        if (dt) {
            int nm = 0;
            const ss_device_type *t = ss_whatif_find_devtype(dt, &nm);
            snprintf(sc[i].device_type, sizeof sc[i].device_type, "%s", t ? t->name : dt);
        }
        sc[i].batch = batch;
    }
    json_decref(root);
    if (st != SS_OK) {
        ss_free(sc);
        return st;
    }
    *out = sc;
    *n = (int)cnt;
    return SS_OK;
}

/* ---- the per-point inputs ------------------------------------------------------ */

typedef struct job {
    char *topo_json; /* the transformed topology document */
    char *label;     /* its label for messages: "FILE (nodes=.., ...)" */
    char *spec;      /* the model spec with the scenario's precision */
    int64_t batch;
} job;

/* A number member of obj, or dflt when absent. */
static double num_or(const json_t *obj, const char *key, double dflt)
{
    const json_t *v = obj ? json_object_get(obj, key) : NULL;
    return v && json_is_number(v) ? json_number_value(v) : dflt;
}

static int set_num(json_t *obj, const char *key, double v)
{
    return json_object_set_new(obj, key, json_real(v));
}

/* Apply scenario s and the node count to a copy of the compact document
 * root; fill the point's fabric figures and its changes text. */
static ss_status make_job(const json_t *root, const char *file, const ss_whatif_scenario *s,
                          int nodes, const char *model, job *jb, ss_whatif_point *pt,
                          ss_diag *d)
{
    json_t *doc = json_deep_copy(root);
    if (!doc)
        return ss_diag_set(d, SS_ERR_NOMEM, "what-if: out of memory");
    json_t *c = json_object_get(doc, "compact");
    json_t *inter = json_object_get(c, "inter"), *intra = json_object_get(c, "intra");
    int bad = 0;
    char ch[256] = "";
    size_t n = 0;
#define CH(...)                                                                               \
    do {                                                                                      \
        if (n < sizeof ch)                                                                    \
            n += (size_t)snprintf(ch + n, sizeof ch - n, "%s", n ? "; " : "");                \
        if (n < sizeof ch)                                                                    \
            n += (size_t)snprintf(ch + n, sizeof ch - n, __VA_ARGS__);                        \
    } while (0)
    if (nodes > 0)
        bad |= json_object_set_new(c, "nodes", json_integer(nodes));
    const char *dt = json_string_value(json_object_get(c, "device_type"));
    if (s->device_type[0] && (!dt || strcmp(dt, s->device_type))) {
        CH("device %s -> %s", dt ? dt : "?", s->device_type);
        bad |= json_object_set_new(c, "device_type", json_string(s->device_type));
    }
    snprintf(pt->device_type, sizeof pt->device_type, "%s",
             s->device_type[0] ? s->device_type : dt ? dt : "");
    double nic = num_or(inter, "gbps", 0), pcie = num_or(inter, "pcie_gbps", nic);
    double f = s->inter_scale > 0 ? s->inter_scale : 1;
    if (s->inter_gbps > 0 && nic > 0)
        f *= s->inter_gbps / 8 / nic;
    if (inter && f != 1) {
        CH("NIC %g -> %g GB/s (%g Gb/s) with its PCIe path %g -> %g GB/s", nic, nic * f,
           nic * f * 8, pcie, pcie * f);
        bad |= set_num(inter, "gbps", nic * f);
        bad |= set_num(inter, "pcie_gbps", pcie * f);
    } else if (!inter && (s->inter_gbps > 0 || s->inter_scale > 0)) {
        json_decref(doc);
        return ss_diag_set(d, SS_ERR_INVALID,
                           "what-if: %s: $.compact has no \"inter\" fabric to scale", file);
    }
    pt->inter_GBps = nic * f;
    pt->pcie_GBps = pcie * f;
    double in = num_or(intra, "gbps", 0);
    if (s->intra_gbps > 0) {
        if (!intra) {
            json_decref(doc);
            return ss_diag_set(d, SS_ERR_INVALID,
                               "what-if: %s: $.compact has no \"intra\" fabric to set", file);
        }
        if (s->intra_gbps / 8 != in)
            CH("intra-node %g -> %g GB/s", in, s->intra_gbps / 8);
        bad |= set_num(intra, "gbps", s->intra_gbps / 8);
        in = s->intra_gbps / 8;
    }
    pt->intra_GBps = in;
    if (s->precision[0])
        CH("precision %s", s->precision);
    if (s->batch > 0)
        CH("batch %lld", (long long)s->batch);
#undef CH
    snprintf(pt->changes, sizeof pt->changes, "%s", ch[0] ? ch : "none");
    snprintf(pt->precision, sizeof pt->precision, "%s", s->precision);
    pt->batch = s->batch;
    jb->batch = s->batch;
    jb->topo_json = bad ? NULL : json_dumps(doc, JSON_COMPACT);
    json_decref(doc);
    char lab[512];
    snprintf(lab, sizeof lab, "%s (what-if point: nodes %d%s%s)", file, nodes, ch[0] ? "; " : "",
             ch);
    jb->label = ss_strdup(lab);
    size_t sl = strlen(model) + 32;
    jb->spec = ss_malloc(sl);
    if (jb->spec) {
        if (s->precision[0])
            snprintf(jb->spec, sl, "%s%sprecision=%s", model, strchr(model, ':') ? "," : ":",
                     s->precision);
        else
            snprintf(jb->spec, sl, "%s", model);
    }
    if (!jb->topo_json || !jb->label || !jb->spec)
        return ss_diag_set(d, SS_ERR_NOMEM, "what-if: out of memory");
    return SS_OK;
}

static void job_clear(job *jb)
{
    ss_free(jb->topo_json); /* json_dumps allocates through the hook */
    ss_free(jb->label);
    ss_free(jb->spec);
}

/* ---- running points --------------------------------------------------------------- */

typedef struct sweep {
    const ss_whatif_config *c;
    ss_whatif_result *r;
    job *jobs;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int next, done, running, workers_left;
    volatile int stopped;
    double wall_sum; /* wall seconds of the finished points */
} sweep;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double thread_cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int stop_cb(void *ctx)
{
    sweep *w = ctx;
    if (w->stopped)
        return 1;
    if (w->c->stop && w->c->stop(w->c->ctx)) {
        w->stopped = 1;
        return 1;
    }
    return 0;
}

/* "megatron:tp=8,pp=4,..." -> the point's tp, pp, dp, mbs, vp, sp,
 * distopt and recompute (defaults: vp 1, recompute none). */
static void parse_plan(ss_whatif_point *p)
{
    const char *s = strchr(p->plan, ':');
    p->vp = 1;
    snprintf(p->recompute, sizeof p->recompute, "none");
    if (!s)
        return;
    s++;
    while (*s) {
        char key[32], val[32];
        int len = 0;
        if (sscanf(s, "%31[^=,]=%31[^,]%n", key, val, &len) != 2 || len <= 0)
            break;
        int v = atoi(val);
        if (!strcmp(key, "tp"))
            p->tp = v;
        else if (!strcmp(key, "pp"))
            p->pp = v;
        else if (!strcmp(key, "dp"))
            p->dp = v;
        else if (!strcmp(key, "mbs"))
            p->mbs = v;
        else if (!strcmp(key, "vp"))
            p->vp = v;
        else if (!strcmp(key, "sp"))
            p->sp = v;
        else if (!strcmp(key, "distopt") || !strcmp(key, "zero"))
            p->distopt = v; /* the ZeRO stage: 0, 1, 3 */
        else if (!strcmp(key, "recompute"))
            snprintf(p->recompute, sizeof p->recompute, "%.63s", val);
        s += len;
        if (*s == ',')
            s++;
    }
}

static void fill_point(const ss_whatif_config *c, ss_whatif_point *p, const ss_machine *m,
                       const ss_search_result *sr)
{
    const ss_sim_result *b = &sr->best_sim;
    p->batch = b->batch;
    p->level = sr->level;
    p->time_dependent = sr->time_dependent;
    p->mem_capacity_bytes = ss_machine_type(m, 0)->mem_gib * 1073741824.0;
    for (int i = 0; i < b->n_devices; i++)
        if (b->peak_memory_bytes[i] > p->peak_mem_bytes)
            p->peak_mem_bytes = b->peak_memory_bytes[i];
    snprintf(p->plan, sizeof p->plan, "%s", sr->best_label);
    parse_plan(p);
    if (!b->fits) {
        p->state = SS_WHATIF_NO_FIT;
        p->shortfall_bytes = b->overflow_bytes;
        return;
    }
    p->state = SS_WHATIF_FITS;
    snprintf(p->megatron_args, sizeof p->megatron_args, "%s", sr->megatron_args);
    p->iteration_ms = b->iteration_us / 1000;
    p->samples_per_s = b->throughput;
    p->tokens_per_s = sr->tokens_per_s;
    p->mfu = sr->mfu;
    p->tflops_per_gpu = sr->tflops_per_gpu;
    p->usd_per_gpu_hour = price_of(c, p->device_type);
    if (c->tokens > 0 && p->tokens_per_s > 0) {
        p->days = c->tokens / p->tokens_per_s / 86400;
        p->cost_usd = p->days * 24 * p->gpus * p->usd_per_gpu_hour;
    }
}

/* Plan point i. Returns 1 when it ended, 0 when a stop cut it short. */
static int run_point(sweep *w, int i)
{
    const ss_whatif_config *c = w->c;
    ss_whatif_point *p = &w->r->points[i];
    job *jb = &w->jobs[i];
    double t0 = now_s(), c0 = thread_cpu_s();
    ss_diag d;
    ss_diag_init(&d);
    ss_machine *m = NULL;
    ss_graph *g = NULL;
    ss_costmodel *cm = NULL;
    ss_search_result sr;
    memset(&sr, 0, sizeof sr);
    int ended = 1;
    ss_status st = ss_machine_load_string(jb->topo_json, jb->label, &m, &d);
    if (st == SS_OK) {
        p->gpus = ss_machine_n_devices(m);
        st = ss_model_build(jb->spec, jb->batch, p->gpus, &g, &d);
    }
    if (st == SS_OK && !(cm = ss_cost_new(m)))
        st = ss_diag_set(&d, SS_ERR_NOMEM, "out of memory");
    if (st == SS_OK) {
        ss_search_config sc;
        memset(&sc, 0, sizeof sc);
        sc.budget = c->budget;
        sc.time_limit_s = c->time_per_point_s;
        sc.seed = c->seed;
        sc.level = c->level;
        sc.threads = 1;
        sc.no_sync_tuning = 1; /* a point is its plan spec, which has no priority, K or flags */
        sc.stop = stop_cb;
        sc.cb_ctx = w;
        st = ss_search_run(g, m, cm, &sc, &sr, &d);
    }
    /* A stop cut the point short: with a plan (sr.interrupted) or before the
     * planner had one (SS_ERR_INTERRUPTED); either way the point is not run. */
    if ((st == SS_OK && sr.interrupted) || (st == SS_ERR_INTERRUPTED && w->stopped))
        ended = 0;
    else if (st == SS_OK)
        fill_point(c, p, m, &sr);
    else {
        p->state = SS_WHATIF_FAILED;
        snprintf(p->error, sizeof p->error, "%.511s", d.msg[0] ? d.msg : ss_status_name(st));
    }
    ss_search_result_clear(&sr);
    ss_cost_free(cm);
    ss_graph_free(g);
    ss_machine_free(m);
    p->search_cpu_s = thread_cpu_s() - c0;
    p->wall_s = now_s() - t0;
    return ended;
}

static void *worker(void *arg)
{
    sweep *w = arg;
    pthread_mutex_lock(&w->mu);
    for (;;) {
        if (w->next >= w->r->n_points || stop_cb(w))
            break;
        int i = w->next++;
        w->running++;
        pthread_mutex_unlock(&w->mu);
        int ended = run_point(w, i);
        pthread_mutex_lock(&w->mu);
        w->running--;
        if (ended) {
            w->done++;
            w->wall_sum += w->r->points[i].wall_s;
        }
        pthread_cond_broadcast(&w->cv);
    }
    w->workers_left--;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

static void report(sweep *w, double t0, int threads)
{
    if (!w->c->progress)
        return;
    ss_whatif_progress pr;
    pr.done = w->done;
    pr.running = w->running;
    pr.total = w->r->n_points;
    pr.elapsed_s = now_s() - t0;
    /* finished points' mean wall time x the points left, shared by the workers */
    pr.eta_s = w->done > 0 ? w->wall_sum / w->done * (pr.total - pr.done) / threads : -1;
    w->c->progress(w->c->ctx, &pr);
}

/* ---- the sweep ---------------------------------------------------------------------- */

void ss_whatif_result_clear(ss_whatif_result *r)
{
    ss_free(r->points);
    memset(r, 0, sizeof *r);
}

static double process_cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Whether the document's device_types declare `name`. */
static int declared_type(const json_t *root, const char *name)
{
    const json_t *types = json_object_get(root, "device_types"), *t;
    size_t i;
    json_array_foreach(types, i, t)
    {
        const char *n = json_string_value(json_object_get(t, "name"));
        if (n && !strcmp(n, name))
            return 1;
    }
    return 0;
}

/* Whether a model spec names a file (as the loaders decide: a '/' or a
 * ".json" ending). */
static int is_file_spec(const char *spec)
{
    size_t n = strlen(spec);
    return strchr(spec, '/') || (n > 5 && !strcmp(spec + n - 5, ".json"));
}

/* Check the configuration against the topology document. */
static ss_status check(const ss_whatif_config *c, const json_t *root, ss_diag *d)
{
    const char *file = c->topology;
    const json_t *cp = json_object_get(root, "compact");
    if (!json_is_object(cp))
        return ss_diag_set(d, SS_ERR_INVALID,
                           "what-if: %s: an explicit topology; a sweep needs the compact form "
                           "(\"compact\": nodes x devices_per_node with intra and inter fabrics, "
                           "docs/topology-format.md) to change nodes, devices and fabrics",
                           file);
    const char *dt = json_string_value(json_object_get(cp, "device_type"));
    for (int s = 0; s < c->n_scenarios; s++) {
        const char *t = c->scenarios[s].device_type;
        if (t[0] && !ss_devtype_find_builtin(t) && !declared_type(root, t))
            return ss_diag_set(d, SS_ERR_INVALID,
                               "what-if: scenario %d: unknown device type \"%s\" (not built in, "
                               "not declared in %s)",
                               s + 1, t, file);
        if (c->scenarios[s].precision[0] && is_file_spec(c->model))
            return ss_diag_set(d, SS_ERR_INVALID,
                               "what-if: precision applies to zoo models (a model file sets "
                               "its own dtypes): %s",
                               c->model);
    }
    for (int k = 0; k < c->n_prices; k++) {
        int used = 0;
        for (int s = 0; s < (c->n_scenarios ? c->n_scenarios : 1) && !used; s++) {
            const char *t = c->n_scenarios && c->scenarios[s].device_type[0]
                                ? c->scenarios[s].device_type
                                : dt;
            used = t && !strncasecmp(t, c->prices[k].type, strlen(c->prices[k].type));
        }
        if (!used)
            return ss_diag_set(d, SS_ERR_INVALID,
                               "what-if: price for \"%s\": no device type of the sweep starts "
                               "with it",
                               c->prices[k].type);
    }
    return SS_OK;
}

ss_status ss_whatif_run(const ss_whatif_config *c, ss_whatif_result *r, ss_diag *d)
{
    memset(r, 0, sizeof *r);
    if (!c->model || !c->topology)
        return ss_diag_set(d, SS_ERR_INVALID, "what-if: a model and a topology are required");
    static const ss_whatif_scenario as_is; /* all zero: no change */
    int n_scen = c->n_scenarios > 0 ? c->n_scenarios : 1;
    int n_nodes = c->n_nodes > 0 ? c->n_nodes : 1;
    if ((long long)n_scen * n_nodes > SS_WHATIF_MAX_POINTS)
        return ss_diag_set(d, SS_ERR_INVALID, "what-if: %lld points, more than the limit of %d",
                           (long long)n_scen * n_nodes, SS_WHATIF_MAX_POINTS);
    json_t *root = NULL;
    ss_status st = ss_json_parse_file(c->topology, &root, d);
    if (st != SS_OK)
        return st;
    if ((st = check(c, root, d)) != SS_OK) {
        json_decref(root);
        return st;
    }
    int n = n_scen * n_nodes;
    r->points = ss_calloc((size_t)n, sizeof *r->points);
    job *jobs = ss_calloc((size_t)n, sizeof *jobs);
    if (!r->points || !jobs)
        st = ss_diag_set(d, SS_ERR_NOMEM, "what-if: out of memory");
    r->n_points = n;
    for (int i = 0; st == SS_OK && i < n; i++) {
        int s = i / n_nodes, k = i % n_nodes;
        ss_whatif_point *p = &r->points[i];
        p->scenario = s;
        p->nodes = c->n_nodes > 0 ? c->nodes[k] : (int)num_or(json_object_get(root, "compact"),
                                                              "nodes", 1);
        st = make_job(root, c->topology, c->n_scenarios ? &c->scenarios[s] : &as_is, p->nodes,
                      c->model, &jobs[i], p, d);
    }
    json_decref(root);
    int threads = c->threads > 0 ? c->threads : (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (threads < 1)
        threads = 1;
    if (threads > n)
        threads = n;
    sweep w;
    memset(&w, 0, sizeof w);
    w.c = c;
    w.r = r;
    w.jobs = jobs;
    pthread_t tid[64];
    if (threads > 64)
        threads = 64;
    int started = 0;
    double t0 = now_s(), c0 = process_cpu_s();
    if (st == SS_OK) {
        pthread_mutex_init(&w.mu, NULL);
        pthread_cond_init(&w.cv, NULL);
        w.workers_left = threads;
        for (int t = 0; t < threads; t++)
            if (pthread_create(&tid[t], NULL, worker, &w) == 0)
                started++;
        pthread_mutex_lock(&w.mu);
        w.workers_left -= threads - started;
        if (started == 0) /* no thread: the caller's thread works */
            w.workers_left = 0;
        double every = c->progress_every_s > 0 ? c->progress_every_s : 1.0;
        while (w.workers_left > 0) {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            double until = (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec + every;
            ts.tv_sec = (time_t)until;
            ts.tv_nsec = (long)((until - (double)ts.tv_sec) * 1e9);
            pthread_cond_timedwait(&w.cv, &w.mu, &ts);
            if (w.workers_left > 0)
                report(&w, t0, started);
        }
        pthread_mutex_unlock(&w.mu);
        for (int t = 0; t < started; t++)
            pthread_join(tid[t], NULL);
        if (started == 0) {
            w.workers_left = 1;
            worker(&w);
        }
        report(&w, t0, started > 0 ? started : 1);
        pthread_cond_destroy(&w.cv);
        pthread_mutex_destroy(&w.mu);
    }
    for (int i = 0; jobs && i < n; i++)
        job_clear(&jobs[i]);
    ss_free(jobs);
    if (st != SS_OK) {
        ss_whatif_result_clear(r);
        return st;
    }
    r->n_done = w.done;
    r->interrupted = w.stopped && w.done < n;
    r->threads = started > 0 ? started : 1;
    r->wall_s = now_s() - t0;
    r->cpu_s = process_cpu_s() - c0;
    return SS_OK;
}

/* ---- CSV and JSON ------------------------------------------------------------------------ */

const char *const ss_whatif_csv_columns =
    "point,scenario,nodes,gpus,device_type,inter_gbit_per_s,inter_GB_per_s,pcie_GB_per_s,"
    "intra_GB_per_s,precision,batch,state,iteration_ms,samples_per_s,tokens_per_s,mfu,"
    "tflops_per_gpu,peak_mem_GiB,mem_capacity_GiB,shortfall_GiB,plan,tp,pp,dp,mbs,vp,"
    "recompute,sp,distopt,megatron_args,days,usd_per_gpu_hour,cost_usd,level,time_dependent,"
    "search_cpu_s,changes,error";

static const char *state_name(ss_whatif_state s)
{
    switch (s) {
    case SS_WHATIF_FITS: return "fits";
    case SS_WHATIF_NO_FIT: return "no-fit";
    case SS_WHATIF_FAILED: return "failed";
    default: return "not-run";
    }
}

/* A CSV field, quoted when it holds a comma, a quote or a line break. */
static void csv_str(FILE *f, const char *s)
{
    if (!strpbrk(s, ",\"\n\r")) {
        fputs(s, f);
        return;
    }
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"')
            fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

/* A number, or an empty field when not applicable. */
static void csv_num(FILE *f, int ok, const char *fmt, double v)
{
    fputc(',', f);
    if (ok)
        fprintf(f, fmt, v);
}

ss_status ss_whatif_write_csv(const ss_whatif_config *c, const ss_whatif_result *r,
                              const char *path, ss_diag *d)
{
    ss_output *o = NULL;
    FILE *f = NULL;
    ss_status st = ss_output_open(path, &o, &f, d);
    if (st != SS_OK)
        return st;
    fprintf(f, "%s\n", ss_whatif_csv_columns);
    for (int i = 0; i < r->n_points; i++) {
        const ss_whatif_point *p = &r->points[i];
        char lab[128];
        int fits = p->state == SS_WHATIF_FITS, ran = fits || p->state == SS_WHATIF_NO_FIT;
        fprintf(f, "%d,", i + 1);
        csv_str(f, c->n_scenarios ? ss_whatif_scenario_label(&c->scenarios[p->scenario], lab,
                                                             sizeof lab)
                                  : "as is");
        fprintf(f, ",%d,%d,", p->nodes, p->gpus);
        csv_str(f, p->device_type);
        fprintf(f, ",%.6g,%.6g,%.6g,%.6g,", p->inter_GBps * 8, p->inter_GBps, p->pcie_GBps,
                p->intra_GBps);
        csv_str(f, p->precision);
        fprintf(f, ",%lld,%s", (long long)p->batch, state_name(p->state));
        csv_num(f, fits, "%.3f", p->iteration_ms);
        csv_num(f, fits, "%.3f", p->samples_per_s);
        csv_num(f, fits, "%.1f", p->tokens_per_s);
        csv_num(f, fits, "%.4f", p->mfu);
        csv_num(f, fits, "%.2f", p->tflops_per_gpu);
        csv_num(f, ran, "%.3f", p->peak_mem_bytes / 1073741824.0);
        csv_num(f, ran, "%.3f", p->mem_capacity_bytes / 1073741824.0);
        csv_num(f, p->state == SS_WHATIF_NO_FIT, "%.3f", p->shortfall_bytes / 1073741824.0);
        fputc(',', f);
        csv_str(f, p->plan);
        csv_num(f, ran && p->tp, "%.0f", p->tp);
        csv_num(f, ran && p->pp, "%.0f", p->pp);
        csv_num(f, ran && p->dp, "%.0f", p->dp);
        csv_num(f, ran && p->mbs, "%.0f", p->mbs);
        csv_num(f, ran && p->tp, "%.0f", p->vp);
        fputc(',', f);
        if (ran && p->tp)
            csv_str(f, p->recompute);
        csv_num(f, ran && p->tp, "%.0f", p->sp);
        csv_num(f, ran && p->tp, "%.0f", p->distopt);
        fputc(',', f);
        csv_str(f, p->megatron_args);
        csv_num(f, fits && p->days > 0, "%.3f", p->days);
        csv_num(f, p->usd_per_gpu_hour > 0, "%.4g", p->usd_per_gpu_hour);
        csv_num(f, fits && p->cost_usd > 0, "%.0f", p->cost_usd);
        csv_num(f, ran, "%.0f", p->level);
        csv_num(f, ran, "%.0f", p->time_dependent);
        csv_num(f, p->state != SS_WHATIF_NOT_RUN, "%.3f", p->search_cpu_s);
        fputc(',', f);
        csv_str(f, p->changes);
        fputc(',', f);
        csv_str(f, p->error);
        fputc('\n', f);
    }
    if (ferror(f)) {
        ss_output_abort(o);
        return ss_diag_set(d, SS_ERR_IO, "%s: write error", path);
    }
    return ss_output_commit(o, d);
}

static json_t *num_or_null(int ok, double v)
{
    return ok && isfinite(v) ? json_real(v) : json_null();
}

static json_t *point_json(const ss_whatif_config *c, const ss_whatif_point *p, int i)
{
    json_t *o = json_object();
    int fits = p->state == SS_WHATIF_FITS, ran = fits || p->state == SS_WHATIF_NO_FIT;
    char lab[128];
    json_object_set_new(o, "point", json_integer(i + 1));
    json_object_set_new(o, "scenario",
                        json_string(c->n_scenarios
                                        ? ss_whatif_scenario_label(&c->scenarios[p->scenario],
                                                                   lab, sizeof lab)
                                        : "as is"));
    json_object_set_new(o, "nodes", json_integer(p->nodes));
    json_object_set_new(o, "gpus", json_integer(p->gpus));
    json_object_set_new(o, "device_type", json_string(p->device_type));
    json_object_set_new(o, "inter_gbit_per_s", json_real(p->inter_GBps * 8));
    json_object_set_new(o, "inter_GB_per_s", json_real(p->inter_GBps));
    json_object_set_new(o, "pcie_GB_per_s", json_real(p->pcie_GBps));
    json_object_set_new(o, "intra_GB_per_s", json_real(p->intra_GBps));
    json_object_set_new(o, "precision", p->precision[0] ? json_string(p->precision) : json_null());
    json_object_set_new(o, "batch", json_integer(p->batch));
    json_object_set_new(o, "state", json_string(state_name(p->state)));
    json_object_set_new(o, "iteration_time_ms", num_or_null(fits, p->iteration_ms));
    json_object_set_new(o, "samples_per_s", num_or_null(fits, p->samples_per_s));
    json_object_set_new(o, "tokens_per_s", num_or_null(fits, p->tokens_per_s));
    json_object_set_new(o, "mfu", num_or_null(fits, p->mfu));
    json_object_set_new(o, "tflops_per_gpu", num_or_null(fits, p->tflops_per_gpu));
    json_object_set_new(o, "peak_memory_bytes", num_or_null(ran, p->peak_mem_bytes));
    json_object_set_new(o, "memory_capacity_bytes", num_or_null(ran, p->mem_capacity_bytes));
    json_object_set_new(o, "shortfall_bytes",
                        num_or_null(p->state == SS_WHATIF_NO_FIT, p->shortfall_bytes));
    json_object_set_new(o, "plan", p->plan[0] ? json_string(p->plan) : json_null());
    json_object_set_new(o, "megatron_args",
                        p->megatron_args[0] ? json_string(p->megatron_args) : json_null());
    json_object_set_new(o, "days", num_or_null(fits && p->days > 0, p->days));
    json_object_set_new(o, "usd_per_gpu_hour",
                        num_or_null(p->usd_per_gpu_hour > 0, p->usd_per_gpu_hour));
    json_object_set_new(o, "cost_usd", num_or_null(fits && p->cost_usd > 0, p->cost_usd));
    json_object_set_new(o, "level", ran ? json_integer(p->level) : json_null());
    json_object_set_new(o, "time_dependent", json_boolean(p->time_dependent));
    json_object_set_new(o, "search_cpu_s", num_or_null(p->state != SS_WHATIF_NOT_RUN,
                                                       p->search_cpu_s));
    json_object_set_new(o, "changes", json_string(p->changes));
    json_object_set_new(o, "error", p->error[0] ? json_string(p->error) : json_null());
    return o;
}

ss_status ss_whatif_to_json(const ss_whatif_config *c, const ss_whatif_result *r, char **out,
                            ss_diag *d)
{
    *out = NULL;
    json_t *root = json_object(), *axes = json_object(), *nodes = json_array(),
           *scen = json_array(), *search = json_object(), *prices = json_object(),
           *points = json_array();
    json_object_set_new(root, "format", json_string("simsearch-whatif"));
    json_object_set_new(root, "version", json_integer(1));
    json_object_set_new(root, "model", json_string(c->model));
    json_object_set_new(root, "topology", json_string(c->topology));
    for (int k = 0; k < c->n_nodes; k++)
        json_array_append_new(nodes, json_integer(c->nodes[k]));
    for (int s = 0; s < c->n_scenarios; s++) {
        const ss_whatif_scenario *sc = &c->scenarios[s];
        json_t *o = json_object();
        char lab[128];
        json_object_set_new(o, "name", json_string(ss_whatif_scenario_label(sc, lab, sizeof lab)));
        json_object_set_new(o, "device_type",
                            sc->device_type[0] ? json_string(sc->device_type) : json_null());
        json_object_set_new(o, "inter_gbit_per_s", num_or_null(sc->inter_gbps > 0, sc->inter_gbps));
        json_object_set_new(o, "inter_scale", num_or_null(sc->inter_scale > 0, sc->inter_scale));
        json_object_set_new(o, "intra_gbit_per_s", num_or_null(sc->intra_gbps > 0, sc->intra_gbps));
        json_object_set_new(o, "precision", sc->precision[0] ? json_string(sc->precision)
                                                             : json_null());
        json_object_set_new(o, "batch", sc->batch > 0 ? json_integer(sc->batch) : json_null());
        json_array_append_new(scen, o);
    }
    json_object_set_new(axes, "nodes", nodes);
    json_object_set_new(axes, "scenarios", scen);
    json_object_set_new(root, "axes", axes);
    json_object_set_new(search, "level", c->level > 0 ? json_integer(c->level - 1) : json_null());
    json_object_set_new(search, "budget", c->budget > 0 ? json_integer(c->budget) : json_null());
    json_object_set_new(search, "seed", json_integer((json_int_t)c->seed));
    json_object_set_new(search, "time_per_point_s",
                        num_or_null(c->time_per_point_s > 0, c->time_per_point_s));
    json_object_set_new(search, "threads", json_integer(r->threads));
    json_object_set_new(search, "planner_threads_per_point", json_integer(1));
    json_object_set_new(root, "search", search);
    json_object_set_new(root, "tokens", num_or_null(c->tokens > 0, c->tokens));
    for (int k = 0; k < c->n_prices; k++)
        json_object_set_new(prices, c->prices[k].type, json_real(c->prices[k].usd_per_gpu_hour));
    json_object_set_new(root, "prices_usd_per_gpu_hour", prices);
    for (int i = 0; i < r->n_points; i++)
        json_array_append_new(points, point_json(c, &r->points[i], i));
    json_object_set_new(root, "points", points);
    json_object_set_new(root, "points_done", json_integer(r->n_done));
    json_object_set_new(root, "interrupted", json_boolean(r->interrupted));
    json_object_set_new(root, "wall_s", json_real(r->wall_s));
    json_object_set_new(root, "cpu_s", json_real(r->cpu_s));
    ss_status st = ss_json_to_string(root, out, d);
    json_decref(root);
    return st;
}
