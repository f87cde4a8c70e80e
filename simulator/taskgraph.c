/*
 * taskgraph.c — growable struct-of-arrays task graph (taskgraph.h).
 *
 * Invariant: every per-task array has room for cap_tasks entries (res_off,
 * succ_off and pred_off for cap_tasks + 1), res for cap_res, edge arrays for
 * cap_edges (after ss_taskgraph_release_edges: e_from, e_to and maybe pred
 * NULL, cap_edges 0, succ still holding the finalized lists), chan_dev for
 * 2 * cap_chan; an add either fully succeeds or leaves every array and
 * count as it was (growth happens before any write).
 */
#include "simulator/taskgraph.h"

#include <math.h>
#include <string.h>

const char *ss_task_kind_name(ss_task_kind k)
{
    switch (k) {
    case SS_TASK_FWD: return "fwd";
    case SS_TASK_BWD: return "bwd";
    case SS_TASK_UPDATE: return "update";
    case SS_TASK_XFER: return "xfer";
    case SS_TASK_COLLECTIVE: return "collective";
    case SS_TASK_OTHER: return "other";
    case SS_TASK_KIND_COUNT: break;
    }
    return "unknown";
}

/* Grow *p (elements of size sz) from cap to at least want entries. On
 * failure *p is untouched. */
static int grow(void **p, size_t sz, size_t want)
{
    void *q = ss_realloc(*p, want * sz);
    if (!q)
        return -1;
    *p = q;
    return 0;
}

static size_t next_cap(size_t cap, size_t want)
{
    size_t c = cap ? cap : 64;
    while (c < want)
        c *= 2;
    return c;
}

/* Grow all per-task arrays to hold `want` tasks. Partial growth is harmless:
 * arrays that grew are merely bigger; cap_tasks only moves when all did. */
static int grow_tasks(ss_taskgraph *tg, size_t want)
{
    if (want <= (size_t)tg->cap_tasks)
        return 0;
    if (want > INT32_MAX / 2)
        return -1;
    size_t c = next_cap((size_t)tg->cap_tasks, want);
    if (grow((void **)&tg->kind, sizeof *tg->kind, c) || grow((void **)&tg->dur, sizeof *tg->dur, c) ||
        grow((void **)&tg->prio, sizeof *tg->prio, c) || grow((void **)&tg->op, sizeof *tg->op, c) ||
        grow((void **)&tg->tile, sizeof *tg->tile, c) || grow((void **)&tg->mb, sizeof *tg->mb, c) ||
        grow((void **)&tg->aux, sizeof *tg->aux, c) ||
        grow((void **)&tg->bytes, sizeof *tg->bytes, c) ||
        grow((void **)&tg->res_off, sizeof *tg->res_off, c + 1) ||
        grow((void **)&tg->succ_off, sizeof *tg->succ_off, c + 1) ||
        grow((void **)&tg->pred_off, sizeof *tg->pred_off, c + 1))
        return -1;
    tg->cap_tasks = (int)c;
    return 0;
}

static int grow_res(ss_taskgraph *tg, size_t want)
{
    if (want <= (size_t)tg->cap_res)
        return 0;
    if (want > INT32_MAX / 2)
        return -1;
    size_t c = next_cap((size_t)tg->cap_res, want);
    if (grow((void **)&tg->res, sizeof *tg->res, c))
        return -1;
    tg->cap_res = (int)c;
    return 0;
}

static int grow_edges(ss_taskgraph *tg, size_t want)
{
    if (want <= (size_t)tg->cap_edges)
        return 0;
    if (want > INT32_MAX / 2)
        return -1;
    size_t c = next_cap((size_t)tg->cap_edges, want);
    if (grow((void **)&tg->e_from, sizeof *tg->e_from, c) ||
        grow((void **)&tg->e_to, sizeof *tg->e_to, c) ||
        grow((void **)&tg->succ, sizeof *tg->succ, c) ||
        grow((void **)&tg->pred, sizeof *tg->pred, c))
        return -1;
    tg->cap_edges = (int)c;
    return 0;
}

static int grow_chan(ss_taskgraph *tg, int n_channels)
{
    if (n_channels <= tg->cap_chan)
        return 0;
    if (grow((void **)&tg->chan_dev, sizeof *tg->chan_dev, 2 * (size_t)n_channels))
        return -1;
    tg->cap_chan = n_channels;
    return 0;
}

static int grow_mark(ss_taskgraph *tg, int n_resources)
{
    if (n_resources <= tg->cap_mark)
        return 0;
    uint32_t *m = ss_calloc((size_t)n_resources, sizeof *m);
    if (!m)
        return -1;
    ss_free(tg->res_mark);
    tg->res_mark = m;
    tg->cap_mark = n_resources;
    tg->mark_gen = 0;
    return 0;
}

static void set_dims(ss_taskgraph *tg, int n_devices, int n_channels)
{
    tg->edges_released = 0;
    tg->n_devices = n_devices;
    tg->n_channels = n_channels;
    tg->n_resources = n_devices + n_channels;
    tg->n_tasks = 0;
    tg->n_free = 0;
    tg->n_edges = 0;
    tg->finalized = 0;
    tg->prio_first = INT32_MAX;
    tg->res_off[0] = 0;
    for (int i = 0; i < 2 * n_channels; i++)
        tg->chan_dev[i] = -1;
}

ss_taskgraph *ss_taskgraph_new(int n_devices, int n_channels)
{
    if (n_devices < 0 || n_channels < 0 || n_devices > INT32_MAX / 4 ||
        n_channels > INT32_MAX / 4)
        return NULL;
    ss_taskgraph *tg = ss_calloc(1, sizeof *tg);
    if (!tg)
        return NULL;
    if (grow_tasks(tg, 64) || grow_res(tg, 64) || grow_edges(tg, 64) ||
        grow_chan(tg, n_channels > 0 ? n_channels : 1) ||
        grow_mark(tg, n_devices + n_channels > 0 ? n_devices + n_channels : 1)) {
        ss_taskgraph_free(tg);
        return NULL;
    }
    set_dims(tg, n_devices, n_channels);
    tg->pred_lists = 1;
    return tg;
}

void ss_taskgraph_free(ss_taskgraph *tg)
{
    if (!tg)
        return;
    ss_free(tg->kind);
    ss_free(tg->dur);
    ss_free(tg->prio);
    ss_free(tg->op);
    ss_free(tg->tile);
    ss_free(tg->mb);
    ss_free(tg->aux);
    ss_free(tg->bytes);
    ss_free(tg->res_off);
    ss_free(tg->res);
    ss_free(tg->e_from);
    ss_free(tg->e_to);
    ss_free(tg->succ_off);
    ss_free(tg->succ);
    ss_free(tg->pred_off);
    ss_free(tg->pred);
    ss_free(tg->chan_dev);
    ss_free(tg->res_mark);
    ss_free(tg);
}

ss_status ss_taskgraph_reset(ss_taskgraph *tg, int n_devices, int n_channels, ss_diag *d)
{
    if (!tg || n_devices < 0 || n_channels < 0 || n_devices > INT32_MAX / 4 ||
        n_channels > INT32_MAX / 4)
        return ss_diag_set(d, SS_ERR_INVALID, "task graph reset: invalid resource counts %d, %d",
                           n_devices, n_channels);
    if (grow_chan(tg, n_channels) || grow_mark(tg, n_devices + n_channels))
        return ss_diag_set(d, SS_ERR_NOMEM, "task graph reset: out of memory");
    set_dims(tg, n_devices, n_channels);
    return SS_OK;
}

ss_status ss_taskgraph_reserve(ss_taskgraph *tg, int tasks, int res, int edges, ss_diag *d)
{
    if (tasks < 0 || res < 0 || edges < 0)
        return ss_diag_set(d, SS_ERR_INVALID, "task graph reserve: negative size");
    if (grow_tasks(tg, (size_t)tasks) || grow_res(tg, (size_t)res) ||
        grow_edges(tg, (size_t)edges))
        return ss_diag_set(d, SS_ERR_NOMEM, "task graph reserve: out of memory");
    return SS_OK;
}

int ss_taskgraph_add_slow(ss_taskgraph *tg, const ss_task_spec *s, ss_diag *d)
{
    if ((unsigned)s->kind >= SS_TASK_KIND_COUNT) {
        ss_diag_set(d, SS_ERR_INVALID, "task graph: invalid task kind %d", (int)s->kind);
        return -1;
    }
    if (!(s->dur_us >= 0 && s->dur_us < INFINITY)) { /* negative, NaN or infinite */
        ss_diag_set(d, SS_ERR_INVALID, "task graph: %s task (op %d, tile %d) has invalid duration %g us",
                    ss_task_kind_name(s->kind), s->op, s->tile, s->dur_us);
        return -1;
    }
    if (s->n_res < 0 || s->n_res > SS_TASK_MAX_RES || (s->n_res > 0 && !s->res)) {
        if (s->n_res > SS_TASK_MAX_RES)
            ss_diag_set(d, SS_ERR_INVALID,
                        "simulate: a %s task (op %d) would occupy %d links and devices at once; "
                        "the simulator handles at most %d per task (a collective over a few "
                        "thousand devices; docs/limits.md)",
                        ss_task_kind_name(s->kind), s->op, s->n_res, SS_TASK_MAX_RES);
        else
            ss_diag_set(d, SS_ERR_INVALID, "task graph: invalid resource count %d", s->n_res);
        return -1;
    }
    if (s->n_res == 1) { /* the common case: nothing to repeat */
        if (s->res[0] < 0 || s->res[0] >= tg->n_resources) {
            ss_diag_set(d, SS_ERR_INVALID,
                        "task graph: %s task (op %d, tile %d): resource %d out of range [0, %d)",
                        ss_task_kind_name(s->kind), s->op, s->tile, s->res[0], tg->n_resources);
            return -1;
        }
    } else if (++tg->mark_gen == 0) { /* wrapped: clear the marks once every 2^32 adds */
        memset(tg->res_mark, 0, (size_t)tg->cap_mark * sizeof *tg->res_mark);
        tg->mark_gen = 1;
    }
    for (int i = 0; i < s->n_res && s->n_res > 1; i++) {
        if (s->res[i] < 0 || s->res[i] >= tg->n_resources) {
            ss_diag_set(d, SS_ERR_INVALID,
                        "task graph: %s task (op %d, tile %d): resource %d out of range [0, %d)",
                        ss_task_kind_name(s->kind), s->op, s->tile, s->res[i], tg->n_resources);
            return -1;
        }
        if (tg->res_mark[s->res[i]] == tg->mark_gen) {
            ss_diag_set(d, SS_ERR_INVALID,
                        "task graph: %s task (op %d, tile %d): resource %d listed twice",
                        ss_task_kind_name(s->kind), s->op, s->tile, s->res[i]);
            return -1;
        }
        tg->res_mark[s->res[i]] = tg->mark_gen;
    }
    int t = tg->n_tasks;
    size_t nres = (size_t)tg->res_off[t] + (size_t)s->n_res;
    if ((t >= tg->cap_tasks || nres > (size_t)tg->cap_res) &&
        (grow_tasks(tg, (size_t)t + 1) || grow_res(tg, nres))) {
        ss_diag_set(d, SS_ERR_NOMEM, "task graph: out of memory adding task %d", t);
        return -1;
    }
    ss_taskgraph_put_fields(tg, t, s);
    if (s->n_res == 1)
        tg->res[tg->res_off[t]] = s->res[0];
    else if (s->n_res > 1)
        memcpy(tg->res + tg->res_off[t], s->res, (size_t)s->n_res * sizeof *tg->res);
    tg->res_off[t + 1] = (int32_t)nres;
    tg->n_free += s->n_res == 0;
    tg->n_tasks = t + 1;
    tg->finalized = 0;
    return t;
}

int ss_taskgraph_add1(ss_taskgraph *tg, ss_task_kind kind, int resource, double dur_us,
                      int priority, int op, int tile, int mb, ss_diag *d)
{
    ss_task_spec s = {kind, dur_us, priority, op, tile, mb, 0, 0.0, 1, &resource};
    return ss_taskgraph_add(tg, &s, d);
}

ss_status ss_taskgraph_add_dep_slow(ss_taskgraph *tg, int from, int to, ss_diag *d)
{
    if (tg->edges_released)
        return ss_diag_set(d, SS_ERR_INVALID,
                           "task graph: dependency added after its edge list was released");
    if (from < 0 || from >= tg->n_tasks || to < 0 || to >= tg->n_tasks || from == to)
        return ss_diag_set(d, SS_ERR_INVALID, "task graph: invalid dependency %d -> %d (%d tasks)",
                           from, to, tg->n_tasks);
    if (grow_edges(tg, (size_t)tg->n_edges + 1))
        return ss_diag_set(d, SS_ERR_NOMEM, "task graph: out of memory adding a dependency");
    tg->e_from[tg->n_edges] = from;
    tg->e_to[tg->n_edges] = to;
    tg->n_edges++;
    tg->finalized = 0;
    return SS_OK;
}

void ss_taskgraph_set_pred_lists(ss_taskgraph *tg, int on)
{
    tg->pred_lists = on != 0;
    tg->finalized = 0;
}

ss_status ss_taskgraph_set_channel_ends(ss_taskgraph *tg, int channel, int dev_src, int dev_dst,
                                        ss_diag *d)
{
    if (channel < 0 || channel >= tg->n_channels || dev_src < -1 || dev_src >= tg->n_devices ||
        dev_dst < -1 || dev_dst >= tg->n_devices)
        return ss_diag_set(d, SS_ERR_INVALID, "task graph: invalid channel ends %d: %d -> %d",
                           channel, dev_src, dev_dst);
    tg->chan_dev[2 * channel] = dev_src;
    tg->chan_dev[2 * channel + 1] = dev_dst;
    return SS_OK;
}

ss_status ss_taskgraph_map_machine(ss_taskgraph *tg, const ss_machine *m, ss_diag *d)
{
    int nd = ss_machine_n_devices(m), nl = ss_machine_n_links(m);
    if (nd != tg->n_devices || 2 * nl != tg->n_channels)
        return ss_diag_set(d, SS_ERR_INVALID,
                           "task graph: machine has %d devices and %d channels, graph %d and %d",
                           nd, 2 * nl, tg->n_devices, tg->n_channels);
    for (int l = 0; l < nl; l++) {
        const ss_link *lk = ss_machine_link(m, l);
        int a = lk->a < nd ? lk->a : -1, b = lk->b < nd ? lk->b : -1;
        tg->chan_dev[4 * l] = a;
        tg->chan_dev[4 * l + 1] = b;
        tg->chan_dev[4 * l + 2] = b;
        tg->chan_dev[4 * l + 3] = a;
    }
    return SS_OK;
}

void ss_taskgraph_release_edges(ss_taskgraph *tg)
{
    if (!tg->finalized || tg->edges_released)
        return;
    /* every edge array shares cap_edges: 0 now, so the next add after a
     * reset regrows them all (succ keeps this graph's lists until then) */
    tg->cap_edges = 0;
    ss_free(tg->e_from);
    ss_free(tg->e_to);
    tg->e_from = tg->e_to = NULL;
    if (!tg->pred_lists) {
        ss_free(tg->pred);
        tg->pred = NULL;
    }
    tg->edges_released = 1;
}

ss_status ss_taskgraph_finalize(ss_taskgraph *tg, ss_diag *d)
{
    if (tg->edges_released) {
        if (tg->finalized)
            return SS_OK;
        return ss_diag_set(d, SS_ERR_INVALID,
                           "task graph: tasks added after its edge list was released");
    }
    /* all arrays were sized by add; nothing here allocates */
    int n = tg->n_tasks, m = tg->n_edges;
    int32_t *so = tg->succ_off, *po = tg->pred_off;
    memset(so, 0, ((size_t)n + 1) * sizeof *so);
    for (int i = 0; i < m; i++)
        so[tg->e_from[i] + 1]++;
    for (int t = 0; t < n; t++)
        so[t + 1] += so[t];
    if (tg->pred_lists) {
        memset(po, 0, ((size_t)n + 1) * sizeof *po);
        for (int i = 0; i < m; i++)
            po[tg->e_to[i] + 1]++;
        for (int t = 0; t < n; t++)
            po[t + 1] += po[t];
    }
    /* Counting sort, stable in insertion order: fill using the offsets as
     * cursors, then shift them back. */
    if (tg->pred_lists) {
        for (int i = 0; i < m; i++) {
            tg->succ[so[tg->e_from[i]]++] = tg->e_to[i];
            tg->pred[po[tg->e_to[i]]++] = tg->e_from[i];
        }
        for (int t = n; t > 0; t--) {
            so[t] = so[t - 1];
            po[t] = po[t - 1];
        }
        po[0] = 0;
    } else {
        for (int i = 0; i < m; i++)
            tg->succ[so[tg->e_from[i]]++] = tg->e_to[i];
        for (int t = n; t > 0; t--)
            so[t] = so[t - 1];
    }
    so[0] = 0;
    tg->finalized = 1;
    return SS_OK;
}
