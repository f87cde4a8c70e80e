/*
 * eval_full.c — the full evaluator (evaluator.h): build the task graph of a
 * plan (build.c), schedule it (engine.c), sweep memory with liveness
 * (memory.c) and summarise the result and its critical path. It judges
 * every plan and is the oracle the other evaluators are held to.
 *
 * It runs on the ss_sim's own builder, task graph, engine and memory
 * tracker, reused run after run, so a search that judges thousands of
 * plans a second allocates only while the arrays still grow. Its state
 * (state[SS_EVAL_FULL]) is scratch only: per-device peaks, the critical
 * path's entries and per-resource loads. Invariant: while s->last is this
 * table, tg and the engine hold the last successful run (what the trace
 * draws and the critical path reads).
 */
#include "simulator/evaluator.h"

#include "simulator/build.h"
#include "simulator/engine.h"
#include "simulator/memory.h"
#include "simulator/report.h"
#include "simulator/taskgraph.h"
#include "simulator/trace.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct critkey {
    int kind, op;
    double us;
    int n;
} critkey;

typedef struct fullstate {
    double *peak;
    int cap_peak;
    critkey *ck;
    int cap_ck;
    int32_t *ck_slot; /* (kind, op + 2) -> index in ck, -1 between runs */
    int cap_ck_slot;
    int32_t *crit_group; /* per op: the first op of its name pattern (crit_pattern), made on
                            first use; crit_gsize[rep]: ops in the group */
    int32_t *crit_gsize;
    double *load; /* per resource: summed task durations (the load cutoff) */
    int cap_load;
    double tasks_per_tile; /* of the last run: tasks per tile entry (the cost estimate) */
} fullstate;

static fullstate *FS(const ss_sim *s)
{
    return s->state[SS_EVAL_FULL];
}

static int full_make(ss_sim *s)
{
    return (s->state[SS_EVAL_FULL] = ss_calloc(1, sizeof(fullstate))) ? 0 : -1;
}

static void full_drop(ss_sim *s)
{
    fullstate *f = FS(s);
    ss_free(f->peak);
    ss_free(f->ck);
    ss_free(f->ck_slot);
    ss_free(f->crit_group);
    ss_free(f->crit_gsize);
    ss_free(f->load);
    ss_free(f);
    s->state[SS_EVAL_FULL] = NULL;
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

/* f->crit_group and crit_gsize: ops of one name pattern share the first's id. */
static ss_status crit_groups(ss_sim *s, ss_diag *d)
{
    fullstate *f = FS(s);
    int n = ss_graph_n_ops(s->g);
    if (f->crit_group)
        return SS_OK;
    pattern_op *po = ss_malloc(((size_t)n + 1) * sizeof *po);
    f->crit_group = ss_malloc(((size_t)n + 1) * sizeof *f->crit_group);
    f->crit_gsize = ss_calloc((size_t)n + 1, sizeof *f->crit_gsize);
    if (!po || !f->crit_group || !f->crit_gsize) {
        ss_free(po);
        ss_free(f->crit_group);
        ss_free(f->crit_gsize);
        f->crit_group = f->crit_gsize = NULL;
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
        f->crit_group[po[i].op] = rep;
        f->crit_gsize[rep]++;
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
    else if (k->op >= 0 && k->op < ss_graph_n_ops(s->g) && FS(s)->crit_gsize[k->op] > 1) {
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
    fullstate *f = FS(s);
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
    int n_slot = SS_TASK_KIND_COUNT * width, had = f->cap_ck_slot;
    if (ss_grow((void **)&f->ck, &f->cap_ck, n, sizeof *f->ck) ||
        ss_grow((void **)&f->ck_slot, &f->cap_ck_slot, n_slot, sizeof *f->ck_slot))
        return ss_diag_set(d, SS_ERR_NOMEM, "simulate: out of memory");
    if (f->cap_ck_slot > had)
        memset(f->ck_slot + had, 0xff, (size_t)(f->cap_ck_slot - had) * sizeof *f->ck_slot);
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
            op = f->crit_group[op]; /* one line per name pattern (crit_pattern) */
        int32_t *slot = &f->ck_slot[kind * width + op + 2];
        if (*slot < 0) {
            *slot = m;
            f->ck[m++] = (critkey){kind, op, tg->dur[t], 1};
        } else {
            f->ck[*slot].us += tg->dur[t];
            f->ck[*slot].n++;
        }
        total += tg->dur[t];
    }
    *len = total;
    for (int i = 0; i < m; i++)
        f->ck_slot[f->ck[i].kind * width + f->ck[i].op + 2] = -1;
    if (m > 1)
        qsort(f->ck, (size_t)m, sizeof(critkey), cmp_ck_time);
    int keep = m <= SS_SIM_CRIT_MAX ? m : SS_SIM_CRIT_MAX - 1;
    for (int i = 0; i < keep; i++)
        crit_name(s, &f->ck[i], &out[i]);
    if (keep < m) {
        ss_sim_crit *o = &out[keep];
        snprintf(o->name, sizeof o->name, "(other)");
        snprintf(o->kind, sizeof o->kind, "mixed");
        o->us = 0;
        o->n_tasks = 0;
        for (int i = keep; i < m; i++) {
            o->us += f->ck[i].us;
            o->n_tasks += f->ck[i].n;
        }
        keep++;
    }
    *n_out = keep;
    return SS_OK;
}

static ss_status full_path_ops(ss_sim *s, double *op_us, double *total_us, ss_diag *d)
{
    const int32_t *path;
    int n;
    ss_status st = ss_engine_critical_path(s->e, &path, &n, d);
    if (st != SS_OK)
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
    fullstate *f = FS(s);
    const ss_taskgraph *tg = s->tg;
    int nr = tg->n_resources;
    if (ss_grow((void **)&f->load, &f->cap_load, nr, sizeof *f->load))
        return ss_diag_set(d, SS_ERR_NOMEM, "simulate: out of memory");
    memset(f->load, 0, (size_t)nr * sizeof *f->load);
    for (int t = 0; t < tg->n_tasks; t++)
        for (int k = tg->res_off[t]; k < tg->res_off[t + 1]; k++)
            f->load[tg->res[k]] += tg->dur[t];
    double mx = 0;
    for (int r = 0; r < nr; r++)
        mx = f->load[r] > mx ? f->load[r] : mx;
    *out = mx;
    return SS_OK;
}

static ss_status full_judge(ss_sim *s, const ss_plan *p, double cutoff_us, ss_sim_result *r,
                            double *load_us, ss_eval_outcome *out, char *why, size_t nwhy,
                            ss_diag *dd)
{
    ss_diag local;
    ss_diag *d = dd ? dd : &local;
    ss_diag_init(&local);
    fullstate *f = FS(s);
    int nd = ss_machine_n_devices(s->m);
    (void)why, (void)nwhy; /* it refuses no plan */
    *out = SS_EVAL_CUT;
    *load_us = 0;
    ss_status st = ss_build_run(s->b, p, s->tg, s->mm, d);
    if (st != SS_OK)
        return st;
    if (ss_build_next_forward(s->b))
        cutoff_us = HUGE_VAL; /* the makespan bounds no period (build.h) */
    if (cutoff_us < HUGE_VAL) {
        if ((st = max_load(s, load_us, d)) != SS_OK)
            return st;
        if (*load_us > cutoff_us)
            return SS_OK;
    }
    ss_engine_config ec = {.policy = ss_build_policy(s->b), .stop = s->cfg.stop,
                           .stop_ctx = s->cfg.stop_ctx};
    if (cutoff_us < HUGE_VAL) {
        ec.load = f->load; /* max_load's, per resource */
        ec.cutoff = cutoff_us;
    }
    if ((st = ss_engine_run(s->e, s->tg, &ec, d)) != SS_OK)
        return st;
    if (ss_engine_cut(s->e, load_us))
        return SS_OK; /* the run proved the iteration ends after cutoff_us */
    const ss_engine_result *er = ss_engine_result_of(s->e);
    if (ss_grow((void **)&f->peak, &f->cap_peak, nd, sizeof *f->peak))
        return ss_diag_set(d, SS_ERR_NOMEM, "simulate: out of memory");
    if (s->cfg.skip_memory) {
        for (int i = 0; i < nd; i++)
            f->peak[i] = ss_memory_static_bytes(s->mm, i);
    } else if ((st = ss_build_memory(s->b, s->mm, d)) != SS_OK ||
               (st = ss_memory_sweep_ranked(s->mm, er->start_round, er->end_round,
                                            (int)er->n_rounds, f->peak, d)) != SS_OK) {
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
    r->iteration_us = ss_build_iteration_us(s->b, s->tg, er);
    r->throughput = r->iteration_us > 0 ? (double)r->batch / (r->iteration_us * 1e-6) : 0;
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
        r->peak_memory_bytes[i] = f->peak[i];
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
    snprintf(r->evaluator, sizeof r->evaluator, "full");
    r->tasks_simulated = r->n_tasks;
    r->symmetry_classes = r->n_devices;
    f->tasks_per_tile = (double)r->n_tasks / (double)(ss_eval_tile_entries(p) + 1);
    *out = SS_EVAL_JUDGED;
    return SS_OK;
}

static ss_status full_write_trace(const ss_sim *s, const char *path, ss_diag *d)
{
    ss_trace_opts o = {s->m, ss_build_task_name, s->b, 1, NULL, NULL, NULL};
    return ss_trace_write(path, s->tg, ss_engine_result_of(s->e), &o, d);
}

/* Tasks of the last run per tile entry of its plan (2 before any run: a
 * forward and a backward task per tile), times p's tile entries. */
static double full_cost(const ss_sim *s, const ss_plan *p)
{
    const fullstate *f = FS(s);
    double per = f && f->tasks_per_tile > 0 ? f->tasks_per_tile : 2;
    return per * (double)ss_eval_tile_entries(p);
}

static int64_t full_n_tasks(const ss_sim *s)
{
    return s->tg->n_tasks;
}

static int full_accepts(ss_sim *s, const ss_plan *p, char *why, size_t n, ss_diag *d)
{
    (void)s, (void)p, (void)d;
    if (n)
        why[0] = 0;
    return 1;
}

const ss_eval_method ss_eval_full = {
    .kind = SS_EVAL_FULL,
    .name = "full",
    .title = "the full evaluator",
    .exact = 1,
    .auto_min_tiles = 0,
    .make = full_make,
    .drop = full_drop,
    .accepts = full_accepts,
    .judge = full_judge,
    .cost = full_cost,
    .n_tasks = full_n_tasks,
    .path_ops = full_path_ops,
    .write_trace = full_write_trace,
};
