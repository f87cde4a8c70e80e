/*
 * build_describe.c — what the runtime executes of a built task graph
 * (ss_build_describe, simulator/build.h): per task the device, the weight
 * shard an update writes, the tensor region a transfer moves, a
 * collective's group and the regions it combines. Read-only over the
 * builder's records of its last run (build_impl.h); the graph and the
 * builder are unchanged. Invariant: it reads the records in the order the
 * passes made them (updates in pass 7's shard order, build_weights.c), so a
 * change there shows in runtime/'s numerics tests.
 */
#include "simulator/build_impl.h"

#include <string.h>


static int put_dev(ss_build_descs *x, int dev)
{
    if (ss_grow((void **)&x->devs, &x->cap_devs, x->n_devs + 1, sizeof *x->devs))
        return -1;
    x->devs[x->n_devs++] = dev;
    return 0;
}

static int put_item(ss_build_descs *x, int tensor, const ss_region *reg)
{
    if (ss_grow((void **)&x->items, &x->cap_items, x->n_items + 1, sizeof *x->items))
        return -1;
    x->items[x->n_items].tensor = tensor;
    x->items[x->n_items++].reg = *reg;
    return 0;
}

/* A unit collective: the unit's distinct devices (replica group: every
 * replica's; tile order) and its op's output regions (its first tile's). */
static int describe_unit(const ss_builder *b, ss_build_descs *x, ss_build_desc *e, int op, int k,
                         int group)
{
    const unitinfo *u = &b->units[b->unit_base[op] + k];
    int nt = group ? u->rep * u->red : u->red;
    e->unit = k;
    e->first_tile = u->first - b->tile_base[op];
    e->red = u->red;
    e->dev_off = x->n_devs;
    for (int t = 0; t < nt; t++) {
        int dev = b->tiles[u->first + t].dev, seen = 0;
        for (int i = e->dev_off; i < x->n_devs && !seen; i++)
            seen = x->devs[i] == dev;
        if (!seen && put_dev(x, dev))
            return -1;
    }
    e->n_dev = x->n_devs - e->dev_off;
    const ss_op *o = ss_graph_op(b->g, op);
    ss_tile tb;
    const ss_tile *t = tshape(b, u->first, &tb);
    e->item_off = x->n_items;
    for (int q = 0; q < o->n_out; q++) {
        ss_region r;
        ss_op_output_region(b->g, o, t, q, &r);
        if (put_item(x, o->outputs[q], &r))
            return -1;
    }
    e->n_item = x->n_items - e->item_off;
    return 0;
}

/* Whether the readers of gather t (the forward or backward tasks waiting
 * on it) run on exactly the devices of shard s that hold a tile of t's op:
 * the builder's unit of s gathers over s's devices before the op's tiles
 * there (build_weights.c zero3_gathers; a tied weight's shard also holds
 * the devices of its other reader, which then gather without reading). */
static int same_readers(const ss_builder *b, const ss_taskgraph *tg, const ss_build_descs *x,
                        const shard *s, int t)
{
    for (int q = tg->succ_off[t]; q < tg->succ_off[t + 1]; q++) {
        int r = tg->succ[q], in = 0;
        if (tg->kind[r] != SS_TASK_FWD && tg->kind[r] != SS_TASK_BWD)
            continue;
        for (int i = 0; i < s->n_dev && !in; i++)
            in = b->ipool[s->dev_off + i] == x->t[r].dev;
        if (!in)
            return 0;
    }
    int o = tg->op[t];
    for (int i = 0; i < s->n_dev; i++) {
        int dv = b->ipool[s->dev_off + i], tile = 0, in = 0;
        for (int j = b->tile_base[o]; j < b->tile_base[o + 1] && !tile; j++)
            tile = b->tiles[j].dev == dv;
        for (int q = tg->succ_off[t]; q < tg->succ_off[t + 1] && !in; q++)
            in = (tg->kind[tg->succ[q]] == SS_TASK_FWD || tg->kind[tg->succ[q]] == SS_TASK_BWD) &&
                 x->t[tg->succ[q]].dev == dv;
        if (tile != in)
            return 0;
    }
    return 1;
}

/* A ZeRO-3 parameter all-gather (SS_BUILD_COLL_PARAM: op o, tile = its
 * micro-batch): the unit it gathers — the replicated shards of o's weights
 * with a writer tile of o whose forward or backward waits on task t, whose
 * devices holding a tile of o are exactly those readers' — in shard order (b->sh), each
 * shard's weight region; the group: the first shard's devices (the unit's
 * shards share them). */
static int describe_param(const ss_builder *b, const ss_taskgraph *tg, ss_build_descs *x,
                          ss_build_desc *e, int t)
{
    e->dev_off = x->n_devs;
    e->item_off = x->n_items;
    for (int k = 0; k < b->n_sh; k++) {
        const shard *s = &b->sh[k];
        int in = 0;
        for (int i = s->first; s->n_dev > 1 && i < s->first + s->count && !in; i++) {
            const tileinfo *ti = &b->tiles[b->wr[i].j];
            for (int q = tg->succ_off[t]; ti->op == tg->op[t] && q < tg->succ_off[t + 1] && !in;
                 q++)
                in = tg->succ[q] == ti->fwd || tg->succ[q] == ti->bwd;
        }
        if (!in || !same_readers(b, tg, x, s, t))
            continue;
        int first = x->n_devs == e->dev_off;
        for (int i = 0; first && i < s->n_dev; i++)
            if (put_dev(x, b->ipool[s->dev_off + i]))
                return -1;
        if (put_item(x, s->w, &s->reg))
            return -1;
    }
    e->n_dev = x->n_devs - e->dev_off;
    e->n_item = x->n_items - e->item_off;
    return 0;
}

void ss_build_descs_clear(ss_build_descs *x)
{
    ss_free(x->t);
    ss_free(x->devs);
    ss_free(x->items);
    memset(x, 0, sizeof *x);
}

ss_status ss_build_describe(const ss_builder *b, const ss_taskgraph *tg, ss_build_descs *x,
                            ss_diag *d)
{
    memset(x, 0, sizeof *x);
    if (!b->plan || b->lean || !tg->finalized || !b->tiles)
        return ss_diag_set(d, SS_ERR_INVALID,
                           "runtime: no task graph built to describe (or a lean build)");
    int n = tg->n_tasks, *sh_of = NULL, *join_of = NULL;
    if (!(x->t = ss_malloc((size_t)(n > 0 ? n : 1) * sizeof *x->t)) ||
        !(sh_of = ss_malloc((size_t)(n > 0 ? n : 1) * sizeof *sh_of)) ||
        !(join_of = ss_malloc((size_t)(n > 0 ? n : 1) * sizeof *join_of)))
        goto nomem;
    x->n_tasks = n;
    for (int t = 0; t < n; t++) {
        ss_build_desc *e = &x->t[t];
        memset(e, 0, sizeof *e);
        e->dev = e->tensor = e->src = e->dst = e->coll = e->unit = -1;
        e->parts = e->n_parts = e->split_n = 1;
        sh_of[t] = join_of[t] = -1;
        int k = tg->kind[t];
        if ((k == SS_TASK_FWD || k == SS_TASK_BWD || k == SS_TASK_UPDATE) &&
            tg->res_off[t + 1] > tg->res_off[t])
            e->dev = tg->res[tg->res_off[t]];
    }
    for (int i = 0; i < b->n_xf; i++) {
        const xferinfo *X = &b->xf[i];
        for (int gr = 0; gr < 2; gr++) {
            int t = gr ? X->btask : X->task;
            if (t < 0 || t >= n)
                continue;
            ss_build_desc *e = &x->t[t];
            e->tensor = X->tensor;
            e->reg = *X->reg;
            e->src = gr ? X->dev : X->src;
            e->dst = gr ? X->src : X->dev;
            e->grad = gr;
            e->parts = X->sgr > 1 ? X->sgr : 1;
        }
    }
    /* updates: the k-th update of (weight, device) by id is the k-th shard
     * of that weight holding the device in pass 7's order (b->order), the
     * order build_weights.c adds them in */
    int dist = b->set.distopt;
    for (int t = 0; t < n; t++) {
        if (tg->kind[t] != SS_TASK_UPDATE)
            continue;
        int w = tg->aux[t], dev = x->t[t].dev, before = 0;
        for (int s = 0; s < t; s++)
            before += tg->kind[s] == SS_TASK_UPDATE && tg->aux[s] == w && x->t[s].dev == dev;
        for (int k = 0; k < b->n_sh && sh_of[t] < 0; k++) {
            const shard *s = &b->sh[b->order[k]];
            int at = -1;
            for (int i = 0; i < s->n_dev && at < 0; i++)
                if (b->ipool[s->dev_off + i] == dev)
                    at = i;
            if (s->w != w || at < 0 || before-- > 0)
                continue;
            sh_of[t] = b->order[k];
            x->t[t].tensor = w;
            x->t[t].reg = s->reg;
            if (dist && s->n_dev > 1) {
                x->t[t].split_k = at;
                x->t[t].split_n = s->n_dev;
            }
        }
        if (sh_of[t] < 0)
            return ss_build_descs_clear(x), ss_free(sh_of), ss_free(join_of),
                   ss_diag_set(d, SS_ERR_INVALID, "runtime: update task %d matches no shard", t);
    }
    for (int t = 0; t < n; t++) {
        if (tg->kind[t] != SS_TASK_COLLECTIVE)
            continue;
        ss_build_desc *e = &x->t[t];
        int op = tg->op[t], tag = tg->aux[t];
        e->coll = tag;
        if (tag == SS_BUILD_COLL_SENDGATHER) {
            /* the group of a scatter-gather send: its receivers (forward)
             * or senders (backward); the region sent */
            e->dev_off = x->n_devs;
            e->item_off = x->n_items;
            for (int i = 0; i < b->n_xf; i++) {
                const xferinfo *X = &b->xf[i];
                if (X->sg != t && X->bsg != t)
                    continue;
                e->grad = X->bsg == t;
                if (put_dev(x, e->grad ? X->src : X->dev) ||
                    (x->n_items == e->item_off && put_item(x, X->tensor, X->reg)))
                    goto nomem;
            }
            e->n_dev = x->n_devs - e->dev_off;
            e->n_item = x->n_items - e->item_off;
            continue;
        }
        if (tag == SS_BUILD_COLL_PARAM) {
            if (describe_param(b, tg, x, e, t))
                goto nomem;
            continue;
        }
        if (tag != SS_BUILD_COLL_GRAD) {
            e->grad = tag == SS_BUILD_COLL_GATHER || tag == SS_BUILD_COLL_GRADSUM ||
                      tag == SS_BUILD_COLL_REPSUM || tag == SS_BUILD_COLL_BCAST;
            if (describe_unit(b, x, e, op, tg->tile[t], tag == SS_BUILD_COLL_REPSUM))
                goto nomem;
            continue;
        }
        /* a bucket: the shards of the updates after it (through a split
         * bucket's join), or before it (the distributed optimizer's gather) */
        e->grad = 1;
        e->item_off = x->n_items;
        e->dev_off = x->n_devs;
        int first_upd = -1;
        for (int i = tg->succ_off[t]; i < tg->succ_off[t + 1]; i++) {
            int s = tg->succ[i];
            if (tg->kind[s] == SS_TASK_OTHER && tg->op[s] == op && tg->tile[s] == tg->tile[t]) {
                join_of[t] = s;
                for (int j = tg->succ_off[s]; j < tg->succ_off[s + 1]; j++)
                    if (tg->kind[tg->succ[j]] == SS_TASK_UPDATE && first_upd < 0)
                        first_upd = tg->succ[j];
            } else if (tg->kind[s] == SS_TASK_UPDATE && first_upd < 0) {
                first_upd = s;
            }
        }
        if (first_upd < 0) { /* the gather: after the bucket's updates */
            e->gather = 1;
            e->grad = 0;
            for (int u = 0; u < n && first_upd < 0; u++)
                if (tg->kind[u] == SS_TASK_UPDATE)
                    for (int i = tg->succ_off[u]; i < tg->succ_off[u + 1]; i++)
                        if (tg->succ[i] == t)
                            first_upd = u;
        }
        if (first_upd < 0)
            return ss_build_descs_clear(x), ss_free(sh_of), ss_free(join_of),
                   ss_diag_set(d, SS_ERR_INVALID, "runtime: bucket task %d updates nothing", t);
        const shard *s0 = &b->sh[sh_of[first_upd]];
        /* a tensor-parallel all-reduce of split_tp (op -1): its group's
         * devices; a bucket: its shards' */
        const int *gd = op < 0 ? b->ipool + b->tpgr[3 * tg->tile[t]] : b->ipool + s0->dev_off;
        int gn = op < 0 ? b->tpgr[3 * tg->tile[t] + 1] : s0->n_dev;
        for (int i = 0; i < gn; i++)
            if (put_dev(x, gd[i]))
                goto nomem;
        e->n_dev = x->n_devs - e->dev_off;
        /* the bucket's shards: every update that waits on this collective
         * (or its join, or that it waits on), each shard once, by id */
        int last_sh = -1;
        for (int u = 0; u < n; u++) {
            if (tg->kind[u] != SS_TASK_UPDATE || sh_of[u] == last_sh)
                continue;
            int linked = 0;
            int from = e->gather ? u : (join_of[t] >= 0 ? join_of[t] : t);
            int to = e->gather ? t : u;
            for (int i = tg->succ_off[from]; i < tg->succ_off[from + 1] && !linked; i++)
                linked = tg->succ[i] == to;
            int seen = 0;
            for (int i = e->item_off; i < x->n_items && !seen; i++)
                seen = x->items[i].tensor == x->t[u].tensor &&
                       !region_cmp(&x->items[i].reg, &x->t[u].reg);
            if (linked && !seen) {
                if (put_item(x, x->t[u].tensor, &x->t[u].reg))
                    goto nomem;
                last_sh = sh_of[u];
            }
        }
        e->n_item = x->n_items - e->item_off;
    }
    /* a split bucket's parts: the collectives sharing its join, by id;
     * under ZeRO-3 they are parts x micro-batches (build_weights.c
     * close_bucket: collective q reduces part q / M of micro-batch q % M,
     * M the micro-batches of the bucket's first shard's writers) */
    for (int t = 0; t < n; t++) {
        if (join_of[t] < 0)
            continue;
        int part = 0, parts = 0, M = 1;
        for (int s = 0; s < n; s++)
            if (join_of[s] == join_of[t]) {
                part += s < t;
                parts++;
            }
        for (int u = 0; dist == SS_ZERO3 && u < n && M == 1; u++)
            if (tg->kind[u] == SS_TASK_UPDATE && sh_of[u] >= 0 &&
                x->t[u].tensor == x->items[x->t[t].item_off].tensor) {
                const shard *s = &b->sh[sh_of[u]];
                for (int i = s->first; i < s->first + s->count; i++)
                    M = b->tiles[b->wr[i].j].mb + 1 > M ? b->tiles[b->wr[i].j].mb + 1 : M;
            }
        x->t[t].part = part / M;
        x->t[t].n_parts = parts / M;
    }
    ss_free(sh_of);
    ss_free(join_of);
    return SS_OK;
nomem:
    ss_free(sh_of);
    ss_free(join_of);
    ss_build_descs_clear(x);
    return ss_diag_set(d, SS_ERR_NOMEM, "runtime: out of memory describing tasks");
}
