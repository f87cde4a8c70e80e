/*
 * expert.c — expert plans (expert.h): data-parallel convolutions with
 * model-parallel fully-connected layers, GNMT-style layer placement for
 * LSTMs (the fc layers in the variant the judge finds best), and the
 * best of a few Megatron-LM configs for transformers.
 *
 * Every rule edits a data-parallel plan op by op and keeps the data-parallel
 * config wherever its split would not divide a dim, so the result is always
 * a valid plan (checked with ss_plan_validate before it is returned).
 */
#include "search/expert.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

ss_family ss_expert_family(const ss_graph *g)
{
    int conv = 0, lstm = 0, attn = 0, ln = 0, bmm = 0;
    for (int i = 0; i < ss_graph_n_ops(g); i++) {
        ss_op_type t = ss_graph_op(g, i)->type;
        conv |= t == SS_OP_CONV2D;
        lstm |= t == SS_OP_LSTM;
        attn |= t == SS_OP_ATTENTION || t == SS_OP_FLASH_ATTENTION;
        ln |= t == SS_OP_LAYERNORM;
        bmm |= t == SS_OP_BATCH_MATMUL;
    }
    attn |= ln && bmm; /* attention built from matmuls, as Megatron lays it out */
    return attn ? SS_FAMILY_TRANSFORMER : lstm ? SS_FAMILY_RNN : conv ? SS_FAMILY_CNN
                                                                       : SS_FAMILY_OTHER;
}

const char *ss_family_name(ss_family f)
{
    static const char *names[] = {"cnn", "rnn", "transformer", "other"};
    return f >= 0 && f <= SS_FAMILY_OTHER ? names[f] : "?";
}

/* Largest k dividing both n and extent. */
static int common_degree(int n, int64_t extent)
{
    for (int k = n; k > 1; k--)
        if (n % k == 0 && extent % k == 0)
            return k;
    return 1;
}

static int out_ndim(const ss_graph *g, int op)
{
    return ss_graph_tensor(g, ss_graph_out(g, op))->ndim;
}

/* Model-parallel fully-connected layers and the element-wise ops after
 * them: the output-feature dim split k ways over `per` devices of a group,
 * k the largest degree dividing both, and with groups > 1 the batch split
 * over the groups (devs: groups x per devices, group-major; tile (i, j) on
 * devs[i * per + j]). Ops whose dims do not divide stay as they are. mp[op]
 * = 1 marks ops whose config was changed here; tiles: scratch of groups x
 * per entries. */
static ss_status mp_fc(const ss_graph *g, ss_plan *p, int groups, int per, const int *devs,
                       int *tiles, char *mp, const char *skip, ss_diag *d)
{
    for (int i = 0; i < ss_graph_n_ops(g); i++) {
        const ss_op *op = ss_graph_op(g, i);
        if (skip && skip[i])
            continue;
        ss_status st = SS_OK;
        if (op->type == SS_OP_LINEAR) {
            int nd = out_ndim(g, i);
            const ss_tensor *o = ss_graph_tensor(g, ss_graph_out(g, i));
            unsigned mask = ss_op_split_mask(g, op);
            int k = common_degree(per, o->shape[nd - 1]);
            if (k < 2 || !(mask & (1u << (nd - 1))) || nd < 2 ||
                (groups > 1 && (!(mask & 1u) || o->shape[0] % groups != 0)))
                continue;
            for (int a = 0; a < groups; a++)
                for (int b = 0; b < k; b++)
                    tiles[a * k + b] = devs[a * per + b];
            ss_pconfig c;
            memset(&c, 0, sizeof c);
            c.ndim = nd;
            for (int j = 0; j < SS_MAX_DIMS; j++)
                c.deg[j] = 1;
            c.deg[0] = groups;
            c.deg[nd - 1] = k;
            c.red = 1;
            c.rep = 1;
            c.ntiles = groups * k;
            c.devices = tiles;
            c.stage = ss_plan_config(p, i)->stage;
            st = ss_plan_set_config(p, i, &c, d);
            mp[i] = 1;
        } else if ((op->type == SS_OP_UNARY || op->type == SS_OP_DROPOUT) && op->n_in > 0) {
            int prod = ss_graph_tensor(g, op->inputs[0])->producer;
            if (prod < 0 || !mp[prod] || out_ndim(g, prod) != out_ndim(g, i))
                continue;
            ss_pconfig c = *ss_plan_config(p, prod);
            c.stage = ss_plan_config(p, i)->stage;
            st = ss_plan_set_config(p, i, &c, d);
            mp[i] = 1;
        }
        if (st)
            return st;
    }
    return SS_OK;
}

/* The fully-connected layers of the rule plans: split over all devices,
 * within each host (batch split over hosts), or left data parallel. */
typedef enum { FC_ALL = 0, FC_PER_HOST, FC_DATA } fc_variant;

/* GNMT: LSTM layer l on local rank l mod D of every host, batch split over
 * hosts. Layers are told apart by their (shared) first weight. lstm[op] = 1
 * marks the LSTM ops placed. */
static ss_status gnmt(const ss_graph *g, const ss_machine *m, ss_plan *p, char *lstm,
                      ss_diag *d)
{
    int H = ss_machine_n_hosts(m), N = ss_machine_n_devices(m), n_ops = ss_graph_n_ops(g);
    int D = N; /* devices per host: the smallest host */
    int *per_host = ss_calloc((size_t)H, sizeof *per_host);
    int *layer_w = ss_malloc(((size_t)n_ops + 1) * sizeof *layer_w);
    int *devs = ss_malloc(((size_t)H + 1) * sizeof *devs);
    ss_status st = SS_OK;
    if (!per_host || !layer_w || !devs) {
        st = ss_diag_set(d, SS_ERR_NOMEM, "expert plan: out of memory");
        goto out;
    }
    for (int i = 0; i < N; i++)
        per_host[ss_machine_device(m, i)->host]++;
    for (int h = 0; h < H; h++)
        if (per_host[h] > 0 && per_host[h] < D)
            D = per_host[h];
    int n_layers = 0;
    int64_t batch = ss_graph_batch(g);
    for (int i = 0; i < n_ops && st == SS_OK; i++) {
        const ss_op *op = ss_graph_op(g, i);
        if (op->type != SS_OP_LSTM || op->n_w < 1)
            continue;
        int l = 0;
        while (l < n_layers && layer_w[l] != op->weights[0])
            l++;
        if (l == n_layers)
            layer_w[n_layers++] = op->weights[0];
        /* device of local rank (l mod D) on each host, hosts in order */
        int n = 0;
        for (int h = 0; h < H; h++) {
            for (int k = 0; k < N; k++) {
                const ss_device *dv = ss_machine_device(m, k);
                if (dv->host == h && dv->local_rank == l % D) {
                    devs[n++] = k;
                    break;
                }
            }
        }
        const ss_tensor *o = ss_graph_tensor(g, ss_graph_out(g, i));
        if (n != H || (batch > 0 && o->shape[0] % n != 0))
            continue;
        ss_pconfig c;
        memset(&c, 0, sizeof c);
        c.ndim = o->ndim;
        for (int j = 0; j < SS_MAX_DIMS; j++)
            c.deg[j] = 1;
        c.deg[0] = n;
        c.red = 1;
        c.rep = 1;
        c.ntiles = n;
        c.devices = devs;
        c.stage = ss_plan_config(p, i)->stage;
        st = ss_plan_set_config(p, i, &c, d);
        lstm[i] = 1;
    }
out:
    ss_free(per_host);
    ss_free(layer_w);
    ss_free(devs);
    return st;
}

/* Hosts of m that have at least `per` devices each, when every host does:
 * their first `per` devices by local rank, host by host, into devs (N
 * entries); returns the number of hosts, or 0 when some host has fewer. */
static int host_groups(const ss_machine *m, int per, int *devs)
{
    int H = ss_machine_n_hosts(m), N = ss_machine_n_devices(m);
    for (int h = 0; h < H; h++)
        for (int r = 0; r < per; r++) {
            int found = -1;
            for (int k = 0; k < N && found < 0; k++)
                if (ss_machine_device(m, k)->host == h && ss_machine_device(m, k)->local_rank == r)
                    found = k;
            if (found < 0)
                return 0;
            devs[h * per + r] = found;
        }
    return H;
}

/* The rule plan of family fam with fc variant v (expert.h); INVALID when
 * the variant does not apply to m (one host: per-host = all devices). */
static ss_status rule_plan(const ss_graph *g, const ss_machine *m, ss_family fam, fc_variant v,
                           ss_plan **out, ss_diag *d)
{
    ss_plan *p = NULL;
    ss_status st = ss_plan_data_parallel(g, m, 0, &p, d);
    if (st)
        return st;
    int N = ss_machine_n_devices(m), n_ops = ss_graph_n_ops(g), H = ss_machine_n_hosts(m);
    int *devs = ss_malloc((size_t)N * sizeof *devs), *tiles = ss_malloc((size_t)N * sizeof *tiles);
    char *mp = ss_calloc((size_t)n_ops + 1, 1);
    char *lstm = ss_calloc((size_t)n_ops + 1, 1);
    if (!devs || !tiles || !mp || !lstm)
        st = ss_diag_set(d, SS_ERR_NOMEM, "expert plan: out of memory");
    int groups = 1, per = N;
    if (st == SS_OK && v == FC_PER_HOST) {
        per = H > 1 ? N / H : N;
        groups = H > 1 ? host_groups(m, per, devs) : 0;
        if (groups < 2)
            st = ss_diag_set(d, SS_ERR_INVALID, "expert plan: fc within each host needs several "
                                                "hosts of equal size");
    }
    for (int i = 0; i < N && st == SS_OK && v != FC_PER_HOST; i++)
        devs[i] = i;
    if (st == SS_OK && fam == SS_FAMILY_RNN)
        st = gnmt(g, m, p, lstm, d);
    if (st == SS_OK && v != FC_DATA)
        st = mp_fc(g, p, groups, per, devs, tiles, mp, lstm, d);
    if (st == SS_OK)
        st = ss_plan_validate(p, g, m, d);
    ss_free(devs);
    ss_free(tiles);
    ss_free(mp);
    ss_free(lstm);
    if (st) {
        ss_plan_free(p);
        return st;
    }
    *out = p;
    return SS_OK;
}

/* Offer candidate plan p (owned) to the best so far (*best, judged *be):
 * ev judges it, and it replaces the best when it is better — fitting first,
 * then time, then overflow; the first candidate wins ties, and without ev
 * only the first counts. *won = 1 when it did; otherwise p is freed. A
 * candidate that cannot run (INVALID / INFEASIBLE, message in *d) is
 * dropped with SS_OK; any other judge error is returned, p freed. */
static ss_status offer(const ss_search_judge *ev, ss_plan *p, ss_plan **best, ss_eval *be, int *won,
                       ss_diag *d)
{
    ss_eval e = {0, 0, 0, 0};
    ss_status st = ev ? ev->eval(ev->ctx, p, -1, HUGE_VAL, &e, d) : SS_OK;
    *won = 0;
    if (st == SS_OK)
        *won = !*best || (ev && ((e.fits && !be->fits) ||
                                 (e.fits && be->fits && e.time_us < be->time_us) ||
                                 (!e.fits && !be->fits && e.overflow_bytes < be->overflow_bytes)));
    if (!*won) {
        ss_plan_free(p);
        return st == SS_ERR_INVALID || st == SS_ERR_INFEASIBLE ? SS_OK : st;
    }
    ss_plan_free(*best);
    *best = p;
    *be = e;
    return SS_OK;
}

/* Best Megatron config: tp a power of two within a node (<= 8), pp in
 * {1, 2, 4}, dp the rest. */
static ss_status megatron_best(const ss_graph *g, const ss_machine *m, const ss_search_judge *ev,
                               ss_plan **out, char *label, size_t n, ss_diag *d)
{
    int N = ss_machine_n_devices(m), per_node = 0;
    for (int i = 0; i < N; i++)
        per_node += ss_machine_device(m, i)->host == ss_machine_device(m, 0)->host;
    ss_plan *best = NULL;
    ss_eval be = {0, 0, 0, 0};
    for (int tp = 1; tp <= per_node && tp <= 8; tp *= 2) {
        for (int pp = 1; pp <= 4; pp *= 2) {
            if (N % (tp * pp))
                continue;
            ss_megatron_config mc;
            memset(&mc, 0, sizeof mc);
            mc.tp = tp;
            mc.pp = pp;
            mc.dp = N / (tp * pp);
            ss_plan *p = NULL;
            ss_diag local;
            ss_diag_init(&local);
            if (ss_plan_megatron(g, m, &mc, &p, &local) != SS_OK)
                continue;
            int won;
            ss_status st = offer(ev, p, &best, &be, &won, &local);
            if (st) {
                ss_plan_free(best);
                return ss_diag_set(d, st, "%s", local.msg);
            }
            if (won)
                snprintf(label, n, "megatron:tp=%d,pp=%d,dp=%d", tp, pp, mc.dp);
        }
    }
    if (!best)
        return ss_diag_set(d, SS_ERR_INVALID,
                           "expert plan: no Megatron-LM configuration fits this model on %d "
                           "devices",
                           N);
    *out = best;
    return SS_OK;
}

ss_status ss_expert_plan(const ss_graph *g, const ss_machine *m, const ss_search_judge *ev,
                         ss_plan **out, char *label, size_t n, ss_diag *d)
{
    ss_family fam = ss_expert_family(g);
    if (fam == SS_FAMILY_TRANSFORMER) {
        /* No Megatron config applies (INVALID): fall back to the generic rule. */
        ss_diag local;
        ss_diag_init(&local);
        ss_status st = megatron_best(g, m, ev, out, label, n, &local);
        if (st != SS_ERR_INVALID)
            return st ? ss_diag_set(d, st, "%s", local.msg) : SS_OK;
    }
    /* The rule's fc variants: without a judge the first, else the best. */
    static const char *fc_label[] = {"model-parallel fc", "model-parallel fc within each host",
                                     "data-parallel fc"};
    int n_var = !ev ? 1 : fam == SS_FAMILY_RNN ? 3 : 2;
    ss_plan *best = NULL;
    ss_eval be = {0, 0, 0, 0};
    ss_diag local; /* the last variant's trouble, reported if none runs */
    ss_diag_init(&local);
    ss_status st = SS_OK;
    for (int v = 0; v < n_var; v++) {
        ss_plan *p = NULL;
        int won = 0;
        ss_diag_init(&local);
        st = rule_plan(g, m, fam, (fc_variant)v, &p, &local);
        if (st == SS_OK)
            st = offer(ev, p, &best, &be, &won, &local);
        if (st == SS_ERR_INVALID || st == SS_ERR_INFEASIBLE) /* this variant does not apply */
            continue;
        if (st) {
            ss_plan_free(best);
            return ss_diag_set(d, st, "%s", local.msg);
        }
        if (won)
            snprintf(label, n, "%s + %s",
                     fam == SS_FAMILY_RNN ? "GNMT layers per device" : "data-parallel conv",
                     fc_label[v]);
    }
    if (!best)
        return ss_diag_set(d, st ? st : SS_ERR_INVALID, "%s",
                           local.msg[0] ? local.msg : "expert plan: no rule plan runs");
    *out = best;
    return SS_OK;
}
