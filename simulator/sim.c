/*
 * sim.c — the public simulator (ss_sim_* in simsearch.h): build the task
 * graph of a plan (build.c), schedule it (engine.c), sweep memory with
 * liveness (memory.c) and summarise the result.
 *
 * An ss_sim owns one builder, task graph, engine and memory tracker and
 * reuses them run after run, so a search that calls ss_sim_run thousands of
 * times a second allocates only while the arrays still grow. Invariant:
 * s->ran is 1 only while tg and the engine hold the last successful run
 * (what ss_sim_write_trace draws).
 */
#include "simulator/build.h"
#include "simulator/engine.h"
#include "simulator/memory.h"
#include "simulator/report.h"
#include "simulator/symmetry.h"
#include "simulator/hier.h"
#include "simulator/taskgraph.h"
#include "simulator/trace.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct critkey {
    int kind, op;
    double us;
    int n;
} critkey;

struct ss_sim {
    const ss_graph *g;
    const ss_machine *m;
    ss_costmodel *cm;
    ss_sim_config cfg;
    ss_builder *b;
    ss_taskgraph *tg;
    ss_memory *mm;
    ss_engine *e;
    double *peak;
    int cap_peak;
    critkey *ck;
    int cap_ck;
    int32_t *ck_slot; /* (kind, op + 2) -> index in ck, -1 between runs */
    int cap_ck_slot;
    int32_t *crit_group; /* per op: the first op of its name pattern (crit_pattern), made on
                            first use; crit_gsize[rep]: ops in the group */
    int32_t *crit_gsize;
    double *load;    /* per resource: summed task durations (ss_sim_run_within) */
    int cap_load;
    int ran;
    ss_symmetry *sym; /* the symmetric evaluator, made on first use */
    int ran_sym;      /* the last run was symmetric: its reduced run is in sym */
    ss_hier *hier;    /* the hierarchical evaluator, made on first use (keeps its memo) */
    int ran_hier;     /* the last run was hierarchical: no task graph, no timeline */
    int64_t hier_tasks;
};

const char *ss_evaluator_name(ss_evaluator e)
{
    switch (e) {
    case SS_EVAL_AUTO: return "auto";
    case SS_EVAL_FULL: return "full";
    case SS_EVAL_SYMMETRY: return "symmetry";
    case SS_EVAL_HIER: return "hierarchical";
    }
    return "unknown";
}

int ss_evaluator_parse(const char *s, ss_evaluator *out)
{
    static const struct { const char *name; ss_evaluator e; } t[] = {
        {"auto", SS_EVAL_AUTO}, {"full", SS_EVAL_FULL}, {"symmetry", SS_EVAL_SYMMETRY},
        {"hierarchical", SS_EVAL_HIER}, {"hier", SS_EVAL_HIER}};
    for (size_t i = 0; s && i < sizeof t / sizeof t[0]; i++)
        if (!strcmp(s, t[i].name)) {
            *out = t[i].e;
            return 0;
        }
    return -1;
}

ss_status ss_sim_new(const ss_graph *g, const ss_machine *m, ss_costmodel *cm,
                     const ss_sim_config *cfg, ss_sim **out, ss_diag *d)
{
    *out = NULL;
    if (!g || !m || !cm)
        return ss_diag_set(d, SS_ERR_INVALID, "simulate: graph, machine and cost model needed");
    if (cfg && (unsigned)cfg->evaluator > SS_EVAL_HIER)
        return ss_diag_set(d, SS_ERR_INVALID, "simulate: unknown evaluator %d", (int)cfg->evaluator);
    if (cfg && (!(cfg->mem_fraction >= 0) || cfg->mem_fraction > 1))
        return ss_diag_set(d, SS_ERR_INVALID,
                           "simulate: mem_fraction must be in (0, 1] (0 = 1), got %g",
                           cfg->mem_fraction);
    ss_sim *s = ss_calloc(1, sizeof *s);
    if (!s)
        return ss_diag_set(d, SS_ERR_NOMEM, "simulate: out of memory");
    s->g = g;
    s->m = m;
    s->cm = cm;
    if (cfg)
        s->cfg = *cfg;
    if (!(s->cfg.mem_fraction > 0))
        s->cfg.mem_fraction = 1.0;
    s->b = ss_build_new(g, m, cm);
    if (s->b)
        ss_build_set_stop(s->b, s->cfg.stop, s->cfg.stop_ctx);
    s->tg = ss_taskgraph_new(ss_machine_n_devices(m), 2 * ss_machine_n_links(m));
    s->mm = ss_memory_new();
    s->e = ss_engine_new();
    if (!s->b || !s->tg || !s->mm || !s->e) {
        ss_sim_free(s);
        return ss_diag_set(d, SS_ERR_NOMEM, "simulate: out of memory");
    }
    ss_taskgraph_set_pred_lists(s->tg, 0); /* only the engine and the trace read it */
    if (s->cfg.one_shot) {
        ss_build_set_lean(s->b, 1);
        ss_engine_set_lean(s->e, 1);
    }
    *out = s;
    return SS_OK;
}

void ss_sim_free(ss_sim *s)
{
    if (!s)
        return;
    ss_build_free(s->b);
    ss_taskgraph_free(s->tg);
    ss_memory_free(s->mm);
    ss_engine_free(s->e);
    ss_free(s->peak);
    ss_free(s->ck);
    ss_free(s->ck_slot);
    ss_free(s->crit_group);
    ss_free(s->crit_gsize);
    ss_free(s->load);
    ss_sym_free(s->sym);
    ss_hier_free(s->hier);
    ss_free(s);
}

ss_builder *ss_sim_builder(ss_sim *s)
{
    return s->b;
}

const ss_taskgraph *ss_sim_taskgraph(const ss_sim *s)
{
    return s->tg;
}

int64_t ss_sim_n_tasks(const ss_sim *s)
{
    if (s && s->ran_sym)
        return ss_sym_tasks_simulated(s->sym);
    if (s && s->ran_hier)
        return s->hier_tasks;
    return s && s->ran ? s->tg->n_tasks : 0;
}

static int cmp_ck_key(const critkey *a, const critkey *b)
{
    if (a->kind != b->kind)
        return a->kind < b->kind ? -1 : 1;
    return a->op < b->op ? -1 : a->op > b->op;
}

static int cmp_ck_time(const void *pa, const void *pb)
{
    const critkey *a = pa, *b = pb;
    if (a->us != b->us)
        return a->us > b->us ? -1 : 1;
    return cmp_ck_key(a, b);
}

/* The name pattern of an op for the critical-path summary: its name with
 * the trailing digits of every dot-separated part but the last replaced by
 * '*' ("l12.mlp.fc1" -> "l*.mlp.fc1", "layers.3.attn" -> "layers.*.attn"),
 * so that one line covers a repeated block's op in every layer. */
static void crit_pattern(const char *name, char *out, size_t n)
{
    size_t o = 0;
    for (const char *p = name; *p && o + 2 < n;) {
        const char *dot = strchr(p, '.');
        const char *end = dot ? dot : p + strlen(p);
        const char *dig = end;
        while (dig > p && dig[-1] >= '0' && dig[-1] <= '9')
            dig--;
        size_t keep = (size_t)((dot && dig < end ? dig : end) - p);
        for (size_t i = 0; i < keep && o + 2 < n; i++)
            out[o++] = p[i];
        if (dot && dig < end)
            out[o++] = '*';
        if (!dot)
            break;
        out[o++] = '.';
        p = dot + 1;
    }
    out[o] = '\0';
}

typedef struct pattern_op {
    char name[SS_NAME_MAX];
    int32_t op;
} pattern_op;

static int cmp_pattern(const void *pa, const void *pb)
{
    const pattern_op *a = pa, *b = pb;
    int c = strcmp(a->name, b->name);
    return c ? c : (a->op > b->op) - (a->op < b->op);
}

/* s->crit_group and crit_gsize: ops of one name pattern share the first's id. */
static ss_status crit_groups(ss_sim *s, ss_diag *d)
{
    int n = ss_graph_n_ops(s->g);
    if (s->crit_group)
        return SS_OK;
    pattern_op *po = ss_malloc(((size_t)n + 1) * sizeof *po);
    s->crit_group = ss_malloc(((size_t)n + 1) * sizeof *s->crit_group);
    s->crit_gsize = ss_calloc((size_t)n + 1, sizeof *s->crit_gsize);
    if (!po || !s->crit_group || !s->crit_gsize) {
        ss_free(po);
        ss_free(s->crit_group);
        ss_free(s->crit_gsize);
        s->crit_group = s->crit_gsize = NULL;
        return ss_diag_set(d, SS_ERR_NOMEM, "simulate: out of memory");
    }
    for (int i = 0; i < n; i++) {
        crit_pattern(ss_graph_op(s->g, i)->name, po[i].name, sizeof po[i].name);
        po[i].op = i;
    }
    qsort(po, (size_t)n, sizeof *po, cmp_pattern);
    for (int i = 0, rep = 0; i < n; i++) {
        if (i == 0 || strcmp(po[i].name, po[i - 1].name))
            rep = po[i].op;
        s->crit_group[po[i].op] = rep;
        s->crit_gsize[rep]++;
    }
    ss_free(po);
    return SS_OK;
}

static void crit_name(const ss_sim *s, const critkey *k, ss_sim_crit *c)
{
    const char *name;
    char pat[SS_NAME_MAX];
    if (k->kind == SS_TASK_COLLECTIVE && k->op == -2)
        name = "gradients";
    else if (k->op >= 0 && k->op < ss_graph_n_ops(s->g) && s->crit_gsize[k->op] > 1) {
        crit_pattern(ss_graph_op(s->g, k->op)->name, pat, sizeof pat);
        name = pat;
    } else if (k->op >= 0 && k->op < ss_graph_n_ops(s->g))
        name = ss_graph_op(s->g, k->op)->name;
    else
        name = "(barrier)";
    snprintf(c->name, sizeof c->name, "%s", name);
    snprintf(c->kind, sizeof c->kind, "%s", ss_task_kind_name((ss_task_kind)k->kind));
    c->us = k->us;
    c->n_tasks = k->n;
}

/* Summarise the critical path into out[] (largest share first; the tail
 * beyond SS_SIM_CRIT_MAX - 1 entries folds into "(other)"). */
static ss_status summarise_path(ss_sim *s, ss_sim_crit *out, int *n_out, double *len,
                                ss_diag *d)
{
    const int32_t *path;
    int n;
    ss_status st = ss_engine_critical_path(s->e, &path, &n, d);
    if (st != SS_OK || (st = crit_groups(s, d)) != SS_OK)
        return st;
    /* One entry per (kind, op) in the order of first appearance, each summed
     * in path order: a direct index over (kind, op + 2), op in [-2, n_ops)
     * (-2: every gradient bucket; an op outside the graph counts as -1,
     * "(barrier)"), then the few distinct entries sorted by time. */
    int n_ops = ss_graph_n_ops(s->g), width = n_ops + 2;
    int n_slot = SS_TASK_KIND_COUNT * width, had = s->cap_ck_slot;
    if (ss_grow((void **)&s->ck, &s->cap_ck, n, sizeof *s->ck) ||
        ss_grow((void **)&s->ck_slot, &s->cap_ck_slot, n_slot, sizeof *s->ck_slot))
        return ss_diag_set(d, SS_ERR_NOMEM, "simulate: out of memory");
    if (s->cap_ck_slot > had)
        memset(s->ck_slot + had, 0xff, (size_t)(s->cap_ck_slot - had) * sizeof *s->ck_slot);
    const ss_taskgraph *tg = s->tg;
    double total = 0;
    int m = 0;
    for (int i = 0; i < n; i++) {
        int t = path[i], kind = tg->kind[t], op = tg->op[t];
        if (kind == SS_TASK_COLLECTIVE && tg->aux[t] == SS_BUILD_COLL_GRAD)
            op = -2; /* all gradient buckets count as one line */
        else if (op < -1 || op >= n_ops)
            op = -1;
        else if (op >= 0)
            op = s->crit_group[op]; /* one line per name pattern (crit_pattern) */
        int32_t *slot = &s->ck_slot[kind * width + op + 2];
        if (*slot < 0) {
            *slot = m;
            s->ck[m++] = (critkey){kind, op, tg->dur[t], 1};
        } else {
            s->ck[*slot].us += tg->dur[t];
            s->ck[*slot].n++;
        }
        total += tg->dur[t];
    }
    *len = total;
    for (int i = 0; i < m; i++)
        s->ck_slot[s->ck[i].kind * width + s->ck[i].op + 2] = -1;
    if (m > 1)
        qsort(s->ck, (size_t)m, sizeof(critkey), cmp_ck_time);
    int keep = m <= SS_SIM_CRIT_MAX ? m : SS_SIM_CRIT_MAX - 1;
    for (int i = 0; i < keep; i++)
        crit_name(s, &s->ck[i], &out[i]);
    if (keep < m) {
        ss_sim_crit *o = &out[keep];
        snprintf(o->name, sizeof o->name, "(other)");
        snprintf(o->kind, sizeof o->kind, "mixed");
        o->us = 0;
        o->n_tasks = 0;
        for (int i = keep; i < m; i++) {
            o->us += s->ck[i].us;
            o->n_tasks += s->ck[i].n;
        }
        keep++;
    }
    *n_out = keep;
    return SS_OK;
}

ss_status ss_sim_path_ops(ss_sim *s, double *op_us, double *total_us, ss_diag *d)
{
    if (s && s->ran_sym) /* the reduced run's path is the full run's (same op ids) */
        return ss_sim_path_ops(ss_sym_reduced_sim(s->sym), op_us, total_us, d);
    if (s && s->ran_hier)
        return ss_diag_set(d, SS_ERR_INVALID,
                           "simulate: the hierarchical evaluator keeps no critical path");
    if (!s || !s->ran)
        return ss_diag_set(d, SS_ERR_INVALID, "simulate: no run to take a critical path from");
    const int32_t *path;
    int n;
    ss_status st = ss_engine_critical_path(s->e, &path, &n, d);
    if (st != SS_OK || (st = crit_groups(s, d)) != SS_OK)
        return st;
    const ss_taskgraph *tg = s->tg;
    int n_ops = ss_graph_n_ops(s->g);
    double total = 0;
    memset(op_us, 0, (size_t)n_ops * sizeof *op_us);
    for (int i = 0; i < n; i++) {
        int t = path[i], op = tg->op[t];
        total += tg->dur[t];
        if (op >= 0 && op < n_ops)
            op_us[op] += tg->dur[t];
    }
    if (total_us)
        *total_us = total;
    return SS_OK;
}

/* The largest summed duration of the tasks on one resource of tg, into
 * *out (0 for a graph without resources). */
static ss_status max_load(ss_sim *s, double *out, ss_diag *d)
{
    const ss_taskgraph *tg = s->tg;
    int nr = tg->n_resources;
    if (ss_grow((void **)&s->load, &s->cap_load, nr, sizeof *s->load))
        return ss_diag_set(d, SS_ERR_NOMEM, "simulate: out of memory");
    memset(s->load, 0, (size_t)nr * sizeof *s->load);
    for (int t = 0; t < tg->n_tasks; t++)
        for (int k = tg->res_off[t]; k < tg->res_off[t + 1]; k++)
            s->load[tg->res[k]] += tg->dur[t];
    double mx = 0;
    for (int r = 0; r < nr; r++)
        mx = s->load[r] > mx ? s->load[r] : mx;
    *out = mx;
    return SS_OK;
}

void ss_sim_set_stop(ss_sim *s, int (*stop)(void *ctx), void *ctx)
{
    s->cfg.stop = stop;
    s->cfg.stop_ctx = ctx;
    ss_build_set_stop(s->b, stop, ctx);
    ss_sym_free(s->sym); /* made again with the new callback */
    s->sym = NULL;
    s->ran_sym = 0;
    ss_hier_free(s->hier);
    s->hier = NULL;
    s->ran_hier = 0;
}

ss_status ss_sim_run(ss_sim *s, const ss_plan *p, ss_sim_result *r, ss_diag *d)
{
    double load;
    return ss_sim_run_within(s, p, HUGE_VAL, r, &load, d);
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static ss_status run_full(ss_sim *s, const ss_plan *p, double cutoff_us, ss_sim_result *r,
                          double *load_us, ss_diag *dd);

/* Tile entries of p (the size of its device lists): what AUTO weighs. */
static int64_t tile_entries(const ss_plan *p)
{
    int64_t n = 0;
    for (int i = 0; i < ss_plan_n_ops(p); i++)
        n += ss_plan_config(p, i)->ntiles;
    return n;
}

ss_status ss_sim_run_within(ss_sim *s, const ss_plan *p, double cutoff_us, ss_sim_result *r,
                            double *load_us, ss_diag *dd)
{
    double t0 = now_ms();
    s->ran = 0;
    s->ran_sym = 0;
    s->ran_hier = 0;
    ss_status st;
    int64_t tiles = s->cfg.evaluator == SS_EVAL_AUTO ? tile_entries(p) : 0;
    if (s->cfg.evaluator == SS_EVAL_HIER ||
        (s->cfg.evaluator == SS_EVAL_AUTO && !s->cfg.exact && tiles >= SS_EVAL_HIER_TILES)) {
        if (!s->hier && !(s->hier = ss_hier_new(s->g, s->m, s->cm, &s->cfg)))
            return ss_diag_set(dd, SS_ERR_NOMEM, "simulate: out of memory");
        ss_diag hd; /* a fresh diag: an unsupported plan's reason must not stick */
        ss_diag_init(&hd);
        st = ss_hier_eval(s->hier, p, r, &hd);
        if (st == SS_OK) {
            /* its result is complete: no proven bound to cut with */
            *load_us = 0;
            s->ran_hier = 1;
            s->hier_tasks = r->n_tasks;
            snprintf(r->evaluator, sizeof r->evaluator, "hierarchical");
            r->tasks_simulated = r->n_tasks;
            r->symmetry_classes = ss_hier_stats_of(s->hier)->stages;
            r->eval_ms = now_ms() - t0;
            return SS_OK;
        }
        if (st != SS_ERR_UNSUPPORTED || s->cfg.evaluator == SS_EVAL_HIER)
            return ss_diag_set(dd, st == SS_ERR_UNSUPPORTED ? SS_ERR_INVALID : st,
                               "simulate: the hierarchical evaluator %s: %s",
                               st == SS_ERR_UNSUPPORTED ? "does not apply" : "failed", hd.msg);
    }
    if (s->cfg.evaluator == SS_EVAL_SYMMETRY ||
        (s->cfg.evaluator == SS_EVAL_AUTO && tiles >= SS_EVAL_SYM_TILES)) {
        if (!s->sym && !(s->sym = ss_sym_new(s->g, s->m, s->cm, &s->cfg)))
            return ss_diag_set(dd, SS_ERR_NOMEM, "simulate: out of memory");
        int used = 0;
        st = ss_sym_run(s->sym, p, cutoff_us, r, load_us, &used, dd);
        if (st != SS_OK)
            return st;
        if (used) {
            if (!(cutoff_us < HUGE_VAL && *load_us > cutoff_us)) {
                snprintf(r->evaluator, sizeof r->evaluator, "symmetry");
                r->tasks_simulated = ss_sym_tasks_simulated(s->sym);
                r->symmetry_classes = ss_sym_classes(s->sym);
                r->eval_ms = now_ms() - t0;
                s->ran_sym = 1;
            }
            return SS_OK;
        }
        if (s->cfg.evaluator == SS_EVAL_SYMMETRY)
            return ss_diag_set(dd, SS_ERR_INVALID,
                               "simulate: the symmetric evaluator does not apply: %s",
                               ss_sym_why(s->sym));
    }
    st = run_full(s, p, cutoff_us, r, load_us, dd);
    if (st == SS_OK && s->ran) {
        snprintf(r->evaluator, sizeof r->evaluator, "full");
        r->tasks_simulated = r->n_tasks;
        r->symmetry_classes = r->n_devices;
        r->eval_ms = now_ms() - t0;
    }
    return st;
}

static ss_status run_full(ss_sim *s, const ss_plan *p, double cutoff_us, ss_sim_result *r,
                          double *load_us, ss_diag *dd)
{
    ss_diag local;
    ss_diag *d = dd ? dd : &local;
    ss_diag_init(&local);
    int nd = ss_machine_n_devices(s->m);
    s->ran = 0;
    *load_us = 0;
    ss_status st = ss_build_run(s->b, p, s->tg, s->mm, d);
    if (st != SS_OK)
        return st;
    if (cutoff_us < HUGE_VAL) {
        if ((st = max_load(s, load_us, d)) != SS_OK)
            return st;
        if (*load_us > cutoff_us)
            return SS_OK;
    }
    ss_engine_config ec = {.policy = ss_build_policy(s->b), .stop = s->cfg.stop,
                           .stop_ctx = s->cfg.stop_ctx};
    if (cutoff_us < HUGE_VAL) {
        ec.load = s->load; /* max_load's, per resource */
        ec.cutoff = cutoff_us;
    }
    if ((st = ss_engine_run(s->e, s->tg, &ec, d)) != SS_OK)
        return st;
    if (ss_engine_cut(s->e, load_us))
        return SS_OK; /* the run proved the iteration ends after cutoff_us */
    const ss_engine_result *er = ss_engine_result_of(s->e);
    if (ss_grow((void **)&s->peak, &s->cap_peak, nd, sizeof *s->peak))
        return ss_diag_set(d, SS_ERR_NOMEM, "simulate: out of memory");
    if (s->cfg.skip_memory) {
        for (int i = 0; i < nd; i++)
            s->peak[i] = ss_memory_static_bytes(s->mm, i);
    } else if ((st = ss_build_memory(s->b, s->mm, d)) != SS_OK ||
               (st = ss_memory_sweep_ranked(s->mm, er->start_round, er->end_round,
                                            (int)er->n_rounds, s->peak, d)) != SS_OK) {
        return st;
    }
    ss_sim_crit crit[SS_SIM_CRIT_MAX];
    memset(crit, 0, sizeof crit); /* the result's bytes are a function of the plan */
    int n_crit = 0;
    double crit_us = 0;
    if ((st = summarise_path(s, crit, &n_crit, &crit_us, d)) != SS_OK)
        return st;
    if ((st = ss_sim_result_reserve(r, nd, d)) != SS_OK)
        return st;
    /* from here on nothing fails: fill the result */
    snprintf(r->model, sizeof r->model, "%s", ss_graph_name(s->g));
    snprintf(r->topology, sizeof r->topology, "%s", ss_machine_name(s->m));
    r->n_devices = nd;
    r->batch = ss_graph_batch(s->g);
    r->n_tasks = s->tg->n_tasks;
    r->iteration_us = er->makespan;
    r->throughput = er->makespan > 0 ? (double)r->batch / (er->makespan * 1e-6) : 0;
    r->critical_path_us = crit_us;
    r->fits = 1;
    r->overflow_device = -1;
    r->overflow_bytes = 0;
    for (int i = 0; i < nd; i++) {
        const ss_device_type *dt = ss_machine_type(s->m, ss_machine_device(s->m, i)->type);
        r->compute_us[i] = er->compute_us[i];
        r->comm_us[i] = er->comm_us[i];
        r->exposed_comm_us[i] = er->exposed_comm_us[i];
        r->idle_us[i] = er->idle_us[i];
        r->peak_memory_bytes[i] = s->peak[i];
        r->static_memory_bytes[i] = ss_memory_static_bytes(s->mm, i);
        r->weight_bytes[i] = ss_memory_weight_bytes(s->mm, i);
        r->capacity_bytes[i] = dt->mem_gib * 1073741824.0 * s->cfg.mem_fraction;
        if (r->fits && r->peak_memory_bytes[i] > r->capacity_bytes[i]) {
            r->fits = 0;
            r->overflow_device = i;
            r->overflow_bytes = r->peak_memory_bytes[i] - r->capacity_bytes[i];
        }
    }
    r->n_crit = n_crit;
    memcpy(r->crit, crit, sizeof crit);
    s->ran = 1;
    return SS_OK;
}

ss_status ss_sim_write_trace(const ss_sim *s, const char *path, ss_diag *d)
{
    if (s && s->ran_hier)
        return ss_diag_set(d, SS_ERR_INVALID,
                           "trace: the hierarchical evaluator keeps no timeline (use --evaluator "
                           "symmetry or full)");
    if (s && s->ran_sym) { /* the representatives' timelines on every device */
        const ss_sim *rs = ss_sym_reduced_sim(s->sym);
        ss_trace_opts o = {s->m, ss_build_task_name, rs->b, 1, NULL, NULL, NULL};
        o.copies = ss_sym_blocks(s->sym, &o.dmap, &o.cmap, &o.blk);
        return ss_trace_write(path, rs->tg, ss_engine_result_of(rs->e), &o, d);
    }
    if (!s || !s->ran)
        return ss_diag_set(d, SS_ERR_INVALID, "trace: no simulation has run yet");
    ss_trace_opts o = {s->m, ss_build_task_name, s->b, 1, NULL, NULL, NULL};
    return ss_trace_write(path, s->tg, ss_engine_result_of(s->e), &o, d);
}
