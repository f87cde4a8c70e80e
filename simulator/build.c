/*
 * build.c — model + plan + machine + costs -> task graph and memory
 * intervals (build.h has the rules, docs/simulator.md the long form).
 *
 * One run makes nine passes: tiles and forward tasks; units; the pairs
 * (consumer tile, producer unit) with the region read; partial-sum
 * collectives, chosen from what each unit's consumers read; forward data
 * dependencies and transfers; backward tasks; backward dependencies,
 * gradient transfers and output-gradient collectives; micro-batch gating;
 * weight gradients (memory, shards, buckets, all-reduces, updates:
 * build_weights.c). The memory intervals are a tenth pass, run on request
 * (ss_build_memory) from the state the run left. The builder struct and the helpers the
 * two files share are in build_impl.h. Every scratch array is owned by the builder and only grows, so
 * repeated runs allocate nothing once warmed up. Invariant: task ids
 * recorded in the scratch arrays always refer to tasks already added to tg.
 */
#include "simulator/build_impl.h"
#include "simulator/plan_view.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

ss_builder *ss_build_new(const ss_graph *g, const ss_machine *m, ss_costmodel *cm)
{
    ss_builder *b = ss_calloc(1, sizeof *b);
    if (!b)
        return NULL;
    b->g = g;
    b->m = m;
    b->cm = cm;
    b->memo_on = 1;
    b->ccfg.launch_us = ss_machine_collective_launch_us(m);
    ss_memo_init(&b->memo, MEMO_WORDS);
    ss_memo_init(&b->wmemo, WMEMO_WORDS);
    return b;
}

static void free_tables(ss_builder *b)
{
    if (b->slots)
        for (int k = 0; k < b->memo_ops * KOP; k++) {
            ss_free(b->slots[k].devs);
            ss_free(b->slots[k].tiles);
            ss_free(b->slots[k].costs);
            ss_free(b->slots[k].shapes);
        }
    if (b->edges && b->edge_base)
        for (int k = 0; k < b->edge_base[b->memo_ops] * KEDGE; k++) {
            ss_free(b->edges[k].p);
            ss_free(b->edges[k].reg);
        }
    ss_free(b->slots);
    ss_free(b->cur);
    ss_free(b->placed);
    ss_free(b->edge_base);
    ss_free(b->edges);
    b->slots = NULL;
    b->cur = NULL;
    b->placed = NULL;
    b->edge_base = NULL;
    b->edges = NULL;
    b->memo_ops = 0;
}

void ss_build_forget(ss_builder *b)
{
    free_tables(b);
    ss_memo_free(&b->memo);
    ss_memo_free(&b->wmemo);
}

void ss_build_set_memo(ss_builder *b, int on)
{
    b->memo_on = on != 0;
    if (!on)
        ss_build_forget(b);
}

const ss_build_memo_stats *ss_build_memo_stats_of(const ss_builder *b)
{
    return &b->mst;
}

/* Lean mode: every per-run scratch array, once a run's graph and memory
 * intervals are made (what stays: stats, policy, the score table). The
 * next run grows them again. */
static void release_scratch(ss_builder *b)
{
    DROP(b, tiles, cap_tiles);
    DROP(b, opcost, cap_opcost);
    DROP(b, cbase, cap_cbase);
    DROP(b, cpool, cap_cpool);
    DROP(b, chash, cap_chash);
    DROP(b, shape_buf, cap_shape);
    DROP(b, opshape, cap_opshape);
    DROP(b, units, cap_units);
    DROP(b, xf, cap_xf);
    DROP(b, pairs, cap_pairs);
    DROP(b, preg, cap_preg);
    DROP(b, pbuf, cap_pbuf);
    DROP(b, we, cap_we);
    DROP(b, we2, cap_we2);
    DROP(b, widx, cap_widx);
    DROP(b, wtmp, cap_wtmp);
    DROP(b, wr, cap_wr);
    DROP(b, sh, cap_sh);
    DROP(b, order, cap_order);
    DROP(b, okeys, cap_okeys);
    DROP(b, ipool, cap_ipool);
    DROP(b, res, cap_res);
    DROP(b, gate, cap_gate);
    DROP(b, gsync, cap_gsync);
    DROP(b, tpar, cap_tpar);
    DROP(b, tpd, cap_tpd);
    DROP(b, tpgr, cap_tpgr);
    DROP(b, tpgb, cap_tpgb);
    DROP(b, bhost, cap_bhost);
    DROP(b, bmem, cap_bmem);
    DROP(b, bcum, cap_bcum);
    DROP(b, wgt, cap_wgt);
    DROP(b, nfw, cap_nfw);
    DROP(b, t2j, cap_t2j);
    DROP(b, anc, cap_anc);
    DROP(b, regs, cap_regs);
    DROP(b, mbk, cap_mbk);
    DROP(b, uhave, cap_uhave);
    DROP(b, giv, cap_giv);
    DROP(b, need, cap_need);
    DROP(b, pidx, cap_pidx);
    DROP(b, rtab, cap_rtab);
    DROP(b, hfirst, cap_hfirst);
    DROP(b, hsum, cap_hsum);
    ss_free(b->rgen);
    b->rgen = NULL;
    b->n_tiles = b->n_units = b->n_xf = b->n_pairs = b->n_we = b->n_sh = b->n_ipool = b->n_wr = 0;
    b->n_pbuf = b->n_cpool = 0;
    b->n_a2a = b->n_a2ax = 0;
}

void ss_build_set_lean(ss_builder *b, int on)
{
    b->lean = on != 0;
    ss_build_set_memo(b, !b->lean);
}

void ss_build_free(ss_builder *b)
{
    if (!b)
        return;
    ss_free(b->tiles);
    ss_free(b->opcost);
    ss_free(b->cbase);
    ss_free(b->cpool);
    ss_free(b->chash);
    ss_free(b->tile_base);
    ss_free(b->unit_base);
    ss_free(b->units);
    ss_free(b->xf);
    ss_free(b->pairs);
    ss_free(b->preg);
    ss_free(b->pbuf);
    ss_free(b->we);
    ss_free(b->we2);
    ss_free(b->widx);
    ss_free(b->wtmp);
    ss_free(b->wr);
    ss_free(b->wu_off);
    ss_free(b->wu_op);
    ss_free(b->wu_k);
    ss_free(b->wval);
    ss_free(b->wkey);
    ss_free(b->sh);
    ss_free(b->order);
    ss_free(b->zp);
    ss_free(b->zs);
    ss_free(b->zu);
    ss_free(b->zmark);
    ss_free(b->okeys);
    ss_free(b->ipool);
    ss_free(b->a2a);
    ss_free(b->a2ax);
    ss_free(b->res);
    ss_free(b->gate);
    ss_free(b->gsync);
    ss_free(b->tpar);
    ss_free(b->tpd);
    ss_free(b->tpgr);
    ss_free(b->tpgb);
    ss_free(b->bhost);
    ss_free(b->bmem);
    ss_free(b->bcum);
    ss_free(b->wgt);
    ss_free(b->nfw);
    ss_free(b->t2j);
    ss_free(b->anc);
    ss_free(b->nfload);
    ss_free(b->flush);
    ss_free(b->unkept);
    ss_free(b->regs);
    ss_free(b->mbk);
    ss_free(b->shape_buf);
    ss_free(b->uhave);
    ss_free(b->giv);
    ss_free(b->opshape);
    ss_free(b->need);
    ss_free(b->pidx);
    ss_free(b->rtab);
    ss_free(b->rgen);
    ss_coll_result_clear(&b->coll);
    free_tables(b);
    ss_memo_free(&b->memo);
    ss_memo_free(&b->wmemo);
    ss_free(b->kbuf);
    ss_free(b->hsum);
    ss_free(b->hfirst);
    ss_free(b->score);
    ss_free(b);
}

void ss_build_set_symmetry(ss_builder *b, ss_build_sym *sym)
{
    b->sym = sym;
}

ss_queue_policy ss_build_policy(const ss_builder *b)
{
    return b->policy;
}

const ss_build_stats *ss_build_stats_of(const ss_builder *b)
{
    return &b->st;
}

/* ---- small helpers ---------------------------------------------------- */

static int kbuf_grow(ss_builder *b, int need, ss_diag *d)
{
    if (ss_grow((void **)&b->kbuf, &b->cap_kbuf, need, sizeof(int32_t)))
        return (ss_diag_set(d, SS_ERR_NOMEM, "simulate: out of memory building tasks"), -1);
    return 0;
}

/* Point-to-point transfer task src -> dst of `bytes`. The route (channels,
 * bottleneck bandwidth, summed latency) is memoized per device pair. With
 * `block` the task also occupies the compute streams of src and dst (resource
 * id = device id): a blocking send/receive pair between pipeline stages. */
void ss_build_set_stop(ss_builder *b, int (*stop)(void *ctx), void *ctx)
{
    b->stop = stop;
    b->stop_ctx = ctx;
}

/* 1 when device dev moves its own messages (ss_device_type.comm_blocks_compute):
 * its communication occupies its compute stream. */
static int comm_blocks(const ss_builder *b, int dev)
{
    return ss_machine_type(b->m, ss_machine_device(b->m, dev)->type)->comm_blocks_compute;
}

int ss_build_add_transfer(ss_builder *b, ss_taskgraph *tg, int src, int dst, double bytes, int op,
                          int aux, int prio, int block, ss_diag *d)
{
    if (stopped(b, 1024, d))
        return -1;
    int32_t key[3] = {0, src, dst};
    int vlen = 0, n = 0;
    double gbps, lat;
    const int32_t *v = b->memo_on || b->lean ? ss_memo_get(&b->memo, key, 3, &vlen) : NULL;
    if (v) {
        n = v[0];
        gbps = ss_memo_get_double(v + 1);
        lat = ss_memo_get_double(v + 3);
        if (ss_grow((void **)&b->res, &b->cap_res, n + 2, sizeof(int)))
            return (ss_diag_set(d, SS_ERR_NOMEM, "simulate: out of memory building tasks"), -1);
        for (int i = 0; i < n; i++)
            b->res[i] = b->n_dev + v[5 + i];
    } else {
        const int *ch = NULL;
        if (ss_machine_route(b->m, src, dst, &ch, &n) != SS_OK)
            return (ss_diag_set(d, SS_ERR_INVALID,
                                "simulate: no route from device %d to device %d for a transfer "
                                "of operator \"%s\"",
                                src, dst, ss_graph_op(b->g, op)->name),
                    -1);
        if (ss_grow((void **)&b->res, &b->cap_res, n + 2, sizeof(int)) || kbuf_grow(b, 5 + n, d))
            return (ss_diag_set(d, SS_ERR_NOMEM, "simulate: out of memory building tasks"), -1);
        gbps = ss_machine_path_gbps(b->m, src, dst);
        lat = ss_machine_path_latency_us(b->m, src, dst);
        b->kbuf[0] = n;
        ss_memo_put_double(b->kbuf + 1, gbps);
        ss_memo_put_double(b->kbuf + 3, lat);
        for (int i = 0; i < n; i++) {
            b->res[i] = b->n_dev + ch[i];
            b->kbuf[5 + i] = ch[i];
        }
        if ((b->memo_on || b->lean) && ss_memo_put(&b->memo, key, 3, b->kbuf, 5 + n))
            return (ss_diag_set(d, SS_ERR_NOMEM, "simulate: out of memory building tasks"), -1);
    }
    double dur = lat;
    if (gbps > 0)
        dur += bytes / (gbps * 1e3);
    int nres = n;
    if (block || comm_blocks(b, src))
        b->res[nres++] = src;
    if (block || comm_blocks(b, dst))
        b->res[nres++] = dst;
    return add_task(tg, SS_TASK_XFER, dur, prio, op, -1, -1, aux, bytes, nres, b->res, d);
}

/* Collective of `kind` over devs[0..n) (distinct), priced for cost_bytes,
 * recorded as moving `bytes`. The price and channels are memoized per
 * (kind, device list, cost_bytes). */
int ss_build_add_collective(ss_builder *b, ss_taskgraph *tg, ss_coll_kind kind, const int *devs,
                            int n, double cost_bytes, double bytes, int op, int tile, int aux,
                            int prio, ss_diag *d)
{
    if (kbuf_grow(b, 5 + n, d))
        return -1;
    int32_t *key = b->kbuf;
    key[0] = 1;
    key[1] = (int32_t)kind;
    key[2] = n;
    ss_memo_put_double(key + 3, cost_bytes);
    for (int i = 0; i < n; i++)
        key[5 + i] = devs[i];
    int vlen = 0;
    /* memoized even without memo_on: pricing a collective over thousands
     * of devices costs more than its key, and the answer is the same */
    const int32_t *v = ss_memo_get(&b->memo, key, 5 + n, &vlen);
    double time_us;
    int nch;
    if (v) {
        time_us = ss_memo_get_double(v);
        nch = v[2];
        if (ss_grow((void **)&b->res, &b->cap_res, nch, sizeof(int)))
            return (ss_diag_set(d, SS_ERR_NOMEM, "simulate: out of memory building tasks"), -1);
        for (int i = 0; i < nch; i++)
            b->res[i] = b->n_dev + v[3 + i];
    } else {
        if (ss_coll_cost(b->m, kind, devs, n, cost_bytes, &b->ccfg, &b->coll, d) != SS_OK)
            return -1;
        time_us = b->coll.time_us;
        nch = b->coll.n_channels;
        if (ss_grow((void **)&b->res, &b->cap_res, nch, sizeof(int)) ||
            kbuf_grow(b, 2 * (5 + n) + 3 + nch, d))
            return (ss_diag_set(d, SS_ERR_NOMEM, "simulate: out of memory building tasks"), -1);
        key = b->kbuf; /* may have moved */
        int32_t *val = b->kbuf + 5 + n;
        ss_memo_put_double(val, time_us);
        val[2] = nch;
        for (int i = 0; i < nch; i++) {
            b->res[i] = b->n_dev + b->coll.channels[i];
            val[3 + i] = b->coll.channels[i];
        }
        if (ss_memo_put(&b->memo, key, 5 + n, val, 3 + nch))
            return (ss_diag_set(d, SS_ERR_NOMEM, "simulate: out of memory building tasks"), -1);
    }
    if (b->sym && b->sym_cross)
        nch = b->sym->remap(b->sym, b->res, nch);
    int nb = 0; /* members that move their own messages: their compute streams too */
    for (int i = 0; i < n; i++)
        nb += comm_blocks(b, devs[i]);
    if (nb && b->sym && !b->sym->bad) {
        snprintf(b->sym->why, sizeof b->sym->why,
                 "collectives occupy their members' compute streams (comm_blocks_compute)");
        b->sym->bad = 1;
    }
    if (nb && ss_grow((void **)&b->res, &b->cap_res, nch + nb, sizeof(int)))
        return (ss_diag_set(d, SS_ERR_NOMEM, "simulate: out of memory building tasks"), -1);
    for (int i = 0; i < n && nb; i++)
        if (comm_blocks(b, devs[i]))
            b->res[nch++] = devs[i];
    return add_task(tg, SS_TASK_COLLECTIVE, time_us, prio, op, tile, -1, aux, bytes, nch, b->res,
                    d);
}

/* Distinct devices of a unit into b->ipool scratch at the end (not kept). */
int ss_build_unit_devices(ss_builder *b, const unitinfo *u, int **out, ss_diag *d)
{
    if (ss_grow((void **)&b->ipool, &b->cap_ipool, b->n_ipool + u->red, sizeof(int)))
        return (ss_diag_set(d, SS_ERR_NOMEM, "simulate: out of memory building tasks"), -1);
    int *dv = b->ipool + b->n_ipool, n = 0;
    for (int r = 0; r < u->red; r++) {
        int dev = b->tiles[u->first + r].dev, seen = 0;
        for (int k = 0; k < n && !seen; k++)
            seen = dv[k] == dev;
        if (!seen)
            dv[n++] = dev;
    }
    *out = dv;
    return n;
}

/* ---- memo tables --------------------------------------------------------- */

/* Make the per-op and per-edge tables for the graph (once). */
static ss_status ensure_tables(ss_builder *b, ss_diag *d)
{
    if (!b->memo_on || b->memo_ops == b->n_ops)
        return SS_OK;
    free_tables(b);
    int ne = 0;
    for (int o = 0; o < b->n_ops; o++)
        ne += ss_graph_op(b->g, o)->n_in;
    b->slots = ss_calloc((size_t)b->n_ops * KOP, sizeof *b->slots);
    b->cur = ss_calloc((size_t)b->n_ops + 1, sizeof *b->cur);
    b->placed = ss_calloc(2 * (size_t)b->n_ops + 1, sizeof *b->placed);
    b->edge_base = ss_calloc((size_t)b->n_ops + 1, sizeof *b->edge_base);
    b->edges = ss_calloc((size_t)ne * KEDGE + 1, sizeof *b->edges);
    if (!b->slots || !b->cur || !b->placed || !b->edge_base || !b->edges) {
        free_tables(b);
        return ss_diag_set(d, SS_ERR_NOMEM, "simulate: out of memory building tasks");
    }
    for (int o = 0, e = 0; o <= b->n_ops; o++) {
        b->edge_base[o] = e;
        if (o < b->n_ops)
            e += ss_graph_op(b->g, o)->n_in;
    }
    b->memo_ops = b->n_ops;
    return SS_OK;
}

static int slot_matches(const opslot *s, const ss_pconfig *c)
{
    if (s->id <= 0 || s->ndim != c->ndim || s->red != c->red || s->ntiles != c->ntiles)
        return 0;
    for (int k = 0; k < c->ndim && k < SS_MAX_DIMS; k++)
        if (s->deg[k] != c->deg[k])
            return 0;
    return !memcmp(s->devs, c->devices, (size_t)c->ntiles * sizeof(int));
}

/* The slot of op o holding config c with its tiles, or -1. */
static int find_slot(ss_builder *b, int o, const ss_pconfig *c)
{
    for (int k = o * KOP; k < (o + 1) * KOP; k++)
        if (slot_matches(&b->slots[k], c) && b->slots[k].tiles) {
            b->slots[k].used = ++b->tick;
            return k;
        }
    return -1;
}

/* Remember config c of op o with its tiles b->tiles[tile_base[o] ..] in the
 * least recently used slot; the slot index, or -1 on allocation failure
 * (the slot is then empty). */
static int store_slot(ss_builder *b, int o, const ss_pconfig *c, const tilecost *costs,
                      int ncosts)
{
    int k = o * KOP;
    for (int i = o * KOP + 1; i < (o + 1) * KOP; i++)
        if (b->slots[i].used < b->slots[k].used)
            k = i;
    opslot *s = &b->slots[k];
    ss_free(s->devs);
    ss_free(s->tiles);
    ss_free(s->costs);
    ss_free(s->shapes);
    memset(s, 0, sizeof *s);
    s->devs = ss_malloc((size_t)c->ntiles * sizeof *s->devs);
    s->tiles = ss_malloc((size_t)c->ntiles * sizeof *s->tiles);
    s->costs = ss_malloc((size_t)ncosts * sizeof *s->costs);
    s->shapes = ss_malloc((size_t)c->ntiles * sizeof *s->shapes);
    if (!s->devs || !s->tiles || !s->costs || !s->shapes) {
        ss_free(s->devs);
        ss_free(s->tiles);
        ss_free(s->costs);
        ss_free(s->shapes);
        s->devs = NULL;
        s->tiles = NULL;
        s->costs = NULL;
        s->shapes = NULL;
        return -1;
    }
    memcpy(s->devs, c->devices, (size_t)c->ntiles * sizeof *s->devs);
    memcpy(s->tiles, b->tiles + b->tile_base[o], (size_t)c->ntiles * sizeof *s->tiles);
    memcpy(s->costs, costs, (size_t)ncosts * sizeof *s->costs);
    s->ncosts = ncosts;
    memcpy(s->shapes, b->opshape[o], (size_t)c->ntiles * sizeof *s->shapes);
    s->ndim = c->ndim;
    for (int i = 0; i < SS_MAX_DIMS; i++)
        s->deg[i] = i < c->ndim ? c->deg[i] : 0;
    s->red = c->red;
    s->ntiles = c->ntiles;
    s->id = ++b->next_id;
    s->used = ++b->tick;
    return k;
}

/* ---- pass 1: tiles and forward tasks ---------------------------------- */

typedef struct mbkey {
    int dev;
    int64_t lo;
    int idx;
} mbkey;

static int cmp_mbkey(const void *pa, const void *pb)
{
    const mbkey *a = pa, *b = pb;
    if (a->dev != b->dev)
        return a->dev < b->dev ? -1 : 1;
    if (a->lo != b->lo)
        return a->lo < b->lo ? -1 : 1;
    return a->idx < b->idx ? -1 : a->idx > b->idx;
}

static ss_status op_tiles(ss_builder *b, int o, const ss_pconfig *c, ss_diag *d);

static ss_status pass_tiles(ss_builder *b, const ss_plan *p, ss_taskgraph *tg, ss_diag *d)
{
    const ss_graph *g = b->g;
    int total = 0, units = 0, widest = 0;
    GROW(b, tile_base, cap_tb, b->n_ops + 1, d);
    GROW(b, unit_base, cap_ub, b->n_ops + 1, d);
    for (int o = 0; o < b->n_ops; o++) {
        const ss_pconfig *c = ss_plan_config(p, o);
        const ss_op *op = ss_graph_op(g, o);
        if (!c || c->ntiles < 1 || c->red < 1 || c->rep < 1 || c->ntiles % (c->red * c->rep))
            return ss_diag_set(d, SS_ERR_INVALID, "simulate: operator \"%s\" has a bad config",
                               op->name);
        for (int i = 0; i < c->ntiles; i++)
            if (c->devices[i] < 0 || c->devices[i] >= b->n_dev)
                return ss_diag_set(d, SS_ERR_INVALID,
                                   "simulate: operator \"%s\" tile %d on device %d, but the "
                                   "machine has %d devices",
                                   op->name, i, c->devices[i], b->n_dev);
        b->tile_base[o] = total;
        b->unit_base[o] = units;
        total += c->ntiles;
        units += c->ntiles / c->red;
        widest = c->ntiles > widest ? c->ntiles : widest;
    }
    b->tile_base[b->n_ops] = total;
    b->unit_base[b->n_ops] = units;
    GROW_RUN(b, tiles, cap_tiles, total, d);
    GROW(b, opcost, cap_opcost, b->n_ops, d);
    GROW(b, cbase, cap_cbase, b->n_ops, d);
    b->n_cpool = 0;
    /* lean: one op's shapes at a time (tshape computes them again later) */
    GROW(b, shape_buf, cap_shape, b->lean ? widest : total, d);
    if (b->lean)
        DROP(b, opshape, cap_opshape);
    else
        GROW(b, opshape, cap_opshape, b->n_ops, d);
    GROW_RUN(b, units, cap_units, units, d);
    b->n_tiles = total;
    b->n_units = units;
    for (int o = 0; o < b->n_ops; o++) {
        const ss_pconfig *c = ss_plan_config(p, o);
        int hit = b->memo_on ? find_slot(b, o, c) : -1;
        if (hit >= 0) {
            int *pl = &b->placed[2 * o];
            if (pl[0] != b->slots[hit].id || pl[1] != b->tile_base[o]) {
                memcpy(b->tiles + b->tile_base[o], b->slots[hit].tiles,
                       (size_t)c->ntiles * sizeof(tileinfo));
                pl[0] = b->slots[hit].id;
                pl[1] = b->tile_base[o];
            }
            b->opshape[o] = b->slots[hit].shapes;
            b->opcost[o] = b->slots[hit].costs;
            b->st.costs += b->slots[hit].ncosts;
            b->cur[o] = hit;
            b->mst.op_hits++;
        } else {
            if (b->memo_on) {
                b->placed[2 * o] = 0; /* op_tiles overwrites the range */
                b->n_cpool = 0;       /* cpool: this op's costs until the slot has them */
            }
            b->cbase[o] = b->n_cpool;
            ss_status st = op_tiles(b, o, c, d);
            if (st != SS_OK)
                return st;
            /* without memoization, cpool may still move: opcost is set below */
            b->opcost[o] = b->cpool + b->cbase[o];
            b->st.costs += b->n_cpool - b->cbase[o];
            if (b->memo_on) {
                b->mst.op_misses++;
                if ((b->cur[o] = store_slot(b, o, c, b->cpool, b->n_cpool)) < 0)
                    return ss_diag_set(d, SS_ERR_NOMEM, "simulate: out of memory building tasks");
                b->opcost[o] = b->slots[b->cur[o]].costs;
                b->placed[2 * o] = b->slots[b->cur[o]].id;
                b->placed[2 * o + 1] = b->tile_base[o];
            }
        }
        const tilecost *oc = b->opcost[o];
        for (int i = 0; i < c->ntiles; i++) {
            tileinfo *ti = &b->tiles[b->tile_base[o] + i];
            ti->fwd = add_task(tg, SS_TASK_FWD, oc[ti->cost].fwd_us,
                               ss_sched_prio_fwd(o, ti->mb), o, i, ti->mb, 0, 0, 1, &ti->dev, d);
            if (ti->fwd < 0)
                return d ? d->status : SS_ERR_INVALID;
            ti->bwd = -1;
            b->st.fwd++;
        }
    }
    if (!b->memo_on) /* cpool no longer moves */
        for (int o = 0; o < b->n_ops; o++)
            b->opcost[o] = b->cpool + b->cbase[o];
    return SS_OK;
}

/* Tiles of op o under config c: shapes, devices, micro-batches, costs. */
static ss_status op_tiles(ss_builder *b, int o, const ss_pconfig *c, ss_diag *d)
{
    const ss_graph *g = b->g;
    const ss_op *op = ss_graph_op(g, o);
    int sd = ss_plan_view_sample_dim(g, o);
    GROW(b, mbk, cap_mbk, c->ntiles, d);
    ss_tile *shape = b->shape_buf + (b->lean ? 0 : b->tile_base[o]);
    if (!b->lean)
        b->opshape[o] = shape;
    for (int i = 0; i < c->ntiles; i++) {
        tileinfo *ti = &b->tiles[b->tile_base[o] + i];
        ss_pconfig_tile(g, op, c, i, &shape[i]);
        ti->op = o;
        ti->dev = c->devices[i];
        b->mbk[i] = (struct mbkey){ti->dev, sd >= 0 ? shape[i].out.r[sd].lo : 0, i};
    }
    /* micro-batch = rank of the tile's sample offset among the distinct
     * offsets of this op's tiles on the same device; a device holding a
     * multiple k > 1 of the M micro-batches' offsets (an expert-parallel
     * op: the slots of k ranks' micro-batches, in rank order) takes the
     * rank mod M */
    if (c->ntiles > 1)
        qsort(b->mbk, (size_t)c->ntiles, sizeof(struct mbkey), cmp_mbkey);
    int M = b->set.microbatches;
    for (int k = 0, rank = 0, k0 = 0; k <= c->ntiles; k++) {
        if (k == c->ntiles || (k > 0 && b->mbk[k].dev != b->mbk[k - 1].dev)) {
            if (M > 1 && rank + 1 > M && (rank + 1) % M == 0)
                for (int z = k0; z < k; z++)
                    b->tiles[b->tile_base[o] + b->mbk[z].idx].mb %= M;
            if (k == c->ntiles)
                break;
            rank = 0;
            k0 = k;
        } else if (k > 0 && b->mbk[k].lo != b->mbk[k - 1].lo)
            rank++;
        b->tiles[b->tile_base[o] + b->mbk[k].idx].mb = rank;
    }
    /* costs: the op's distinct ones appended to cpool (from base), found
     * again by their bits (chash: open addressing, entries - base or -1) */
    int base = b->n_cpool, hn = 16;
    while (hn < 2 * c->ntiles)
        hn *= 2;
    GROW(b, chash, cap_chash, hn, d);
    for (int k = 0; k < hn; k++)
        b->chash[k] = -1;
    for (int i = 0; i < c->ntiles; i++) {
        tileinfo *ti = &b->tiles[b->tile_base[o] + i];
        tilecost tc;
        memset(&tc, 0, sizeof tc);
        if (op->type != SS_OP_INPUT) {
            ss_cost cost;
            int dt = ss_machine_device(b->m, ti->dev)->type;
            ss_status st = ss_cost_tile(b->cm, g, op, &shape[i], dt, &cost);
            if (st != SS_OK)
                return ss_diag_set(d, st, "simulate: no cost for operator \"%s\"", op->name);
            tc.fwd_us = cost.fwd_us;
            tc.bwd_us = cost.bwd_us;
            tc.fwd_gpu = cost.fwd_gpu_us;
            tc.bwd_gpu = cost.bwd_gpu_us;
            tc.fwd_host = cost.fwd_host_us;
            tc.bwd_host = cost.bwd_host_us;
            tc.saved = cost.work.saved_bytes;
            tc.ws = cost.workspace_bytes;
        }
        uint64_t w[sizeof tc / 8], h = 0;
        memcpy(w, &tc, sizeof tc);
        for (size_t k = 0; k < sizeof tc / 8; k++)
            h = (h ^ w[k]) * 0x9E3779B97F4A7C15ull;
        uint32_t at = (uint32_t)(h >> 32) & (uint32_t)(hn - 1);
        while (b->chash[at] >= 0 && memcmp(&b->cpool[base + b->chash[at]], &tc, sizeof tc))
            at = (at + 1) & (uint32_t)(hn - 1);
        if (b->chash[at] < 0) {
            GROW(b, cpool, cap_cpool, b->n_cpool + 1, d);
            b->cpool[b->n_cpool] = tc;
            b->chash[at] = b->n_cpool++ - base;
        }
        ti->cost = b->chash[at];
        ti->fwd = ti->bwd = -1;
    }
    return SS_OK;
}

/* ---- pass 2: units ------------------------------------------------------ */

static ss_status pass_units(ss_builder *b, const ss_plan *p, ss_diag *d)
{
    for (int o = 0; o < b->n_ops; o++) {
        const ss_pconfig *c = ss_plan_config(p, o);
        int R = c->red;
        for (int k = 0; k < c->ntiles / R; k++) {
            unitinfo *u = &b->units[b->unit_base[o] + k];
            u->op = o;
            u->first = b->tile_base[o] + k * R;
            u->red = R;
            u->entry = -1;
            u->xhead = -1;
            u->phead = -1;
            u->btag = (signed char)SS_BUILD_COLL_BCAST;
            u->local = 0;
            u->rep = c->rep;
            u->q = k % c->rep;
            u->gsum = 0;
            u->gentry = -1;
            u->ready = R == 1 ? b->tiles[u->first].fwd : -1;
            u->n_unique = 1;
            if (R > 1) {
                int *dv;
                int n = ss_build_unit_devices(b, u, &dv, d);
                if (n < 0)
                    return d->status;
                u->n_unique = n;
            }
        }
    }
    return SS_OK;
}

/* ---- passes 4 and 5: backward tasks, dependencies, gradient transfers --- */

/* Attention scores: [..., queries, keys], both attribute dims, as many
 * query rows as keys or a multiple (grouped-query attention lays the G
 * query heads of a kv head as rows, models/transformer.c). */
static int holds_scores(const ss_tensor *t)
{
    int n = t->ndim;
    return n >= 2 && t->kind[n - 1] == SS_DIM_ATTRIBUTE && t->kind[n - 2] == SS_DIM_ATTRIBUTE &&
           t->shape[n - 1] > 1 && t->shape[n - 2] % t->shape[n - 1] == 0;
}

int ss_build_score_op(const ss_graph *g, int o)
{
    const ss_op *op = ss_graph_op(g, o);
    if (!op || (op->type != SS_OP_BATCH_MATMUL && op->type != SS_OP_SOFTMAX &&
                op->type != SS_OP_DROPOUT))
        return 0;
    if (op->n_out > 0 && holds_scores(ss_graph_tensor(g, op->outputs[0])))
        return 1;
    for (int i = 0; i < op->n_in; i++)
        if (holds_scores(ss_graph_tensor(g, op->inputs[i])))
            return 1;
    return 0;
}

static ss_status ensure_score(ss_builder *b, ss_diag *d)
{
    if (b->n_score == b->n_ops)
        return SS_OK;
    char *s = ss_realloc(b->score, (size_t)b->n_ops + 1);
    if (!s)
        return ss_diag_set(d, SS_ERR_NOMEM, "simulate: out of memory building tasks");
    b->score = s;
    for (int o = 0; o < b->n_ops; o++)
        s[o] = (char)ss_build_score_op(b->g, o);
    b->n_score = b->n_ops;
    return SS_OK;
}

static ss_status pass_bwd(ss_builder *b, ss_taskgraph *tg, ss_diag *d)
{
    int recompute = 0;
    for (int j = 0, o = -1, input = 0; j < b->n_tiles; j++) {
        tileinfo *t = &b->tiles[j];
        if (t->op != o) {
            o = t->op;
            input = ss_graph_op(b->g, o)->type == SS_OP_INPUT;
            recompute = ss_build_recomputed(b, o);
        }
        if (input)
            continue;
        const tilecost *tc = tcost(b, j);
        double dur = tc->bwd_us + (recompute ? tc->fwd_us : 0);
        t->bwd = add_task(tg, SS_TASK_BWD, dur, ss_sched_prio_bwd(b->n_ops, t->op, t->mb), t->op,
                          j - b->tile_base[t->op], t->mb, 0, 0, 1, &t->dev, d);
        if (t->bwd < 0)
            return d ? d->status : SS_ERR_NOMEM;
        b->st.bwd++;
        if (ss_taskgraph_add_dep(tg, t->fwd, t->bwd, d) != SS_OK)
            return d->status;
    }
    return ss_build_host(b, tg, d); /* pass 5b: host dispatch (build_host.c) */
}

/* The task the gradients of a unit's output feed (consumer backwards on its
 * devices, gradient transfers from elsewhere): its tile's backward (red = 1)
 * or a join before every member's backward, through the collective chosen in
 * pass_partial when the members sit on several devices: an all-gather when
 * the consumers read disjoint slices, a broadcast when the gradient comes
 * back to one device (a pipelined ring broadcast of S costs what a ring
 * all-gather of n/(n-1) S does), an all-reduce of the partial gradients
 * otherwise. */
static int group_entry(ss_builder *b, ss_taskgraph *tg, int g0, ss_diag *d);

static int unit_entry(ss_builder *b, ss_taskgraph *tg, int uu, ss_diag *d)
{
    unitinfo *u = &b->units[uu];
    if (u->gsum)
        return group_entry(b, tg, uu - u->q, d);
    if (u->entry >= 0)
        return u->entry;
    if (u->red == 1)
        return u->entry = b->tiles[u->first].bwd;
    int prio = ss_sched_prio_bwd(b->n_ops, u->op, b->tiles[u->first].mb);
    int k = uu - b->unit_base[u->op];
    int join = add_task(tg, SS_TASK_OTHER, 0, prio, u->op, k, -1, 0, 0, 0, NULL, d);
    if (join < 0)
        return -1;
    int last = join;
    if (u->n_unique > 1) {
        int *dv;
        int n = ss_build_unit_devices(b, u, &dv, d);
        if (n < 0)
            return -1;
        double bytes = unit_out_bytes(b, u);
        if (u->btag == SS_BUILD_COLL_GRADSUM) {
            last = ss_build_add_collective(b, tg, SS_COLL_ALLREDUCE, dv, n, bytes, bytes, u->op, k,
                                  u->btag, prio, d);
            b->st.coll_gradsum++;
        } else if (u->btag == SS_BUILD_COLL_GATHER) {
            last = ss_build_add_collective(b, tg, SS_COLL_ALLGATHER, dv, n, bytes, bytes, u->op, k,
                                  u->btag, prio, d);
            b->st.coll_gather++;
        } else {
            last = ss_build_add_collective(b, tg, SS_COLL_ALLGATHER, dv, n, bytes * n / (n - 1), bytes,
                                  u->op, k, u->btag, prio, d);
            b->st.coll_bcast++;
        }
        if (last < 0 || ss_taskgraph_add_dep(tg, join, last, d) != SS_OK)
            return -1;
    }
    for (int r = 0; r < u->red; r++)
        if (ss_taskgraph_add_dep(tg, last, b->tiles[u->first + r].bwd, d) != SS_OK)
            return -1;
    return u->entry = join;
}

/* The backward entry of replica group g0 .. g0 + rep - 1 whose output
 * gradient is summed: a join of every gradient reaching any replica, an
 * all-reduce of the output bytes over the group's devices, then every
 * replica's backward tiles. */
static int group_entry(ss_builder *b, ss_taskgraph *tg, int g0, ss_diag *d)
{
    unitinfo *u = &b->units[g0];
    if (u->gentry >= 0)
        return u->gentry;
    int prio = ss_sched_prio_bwd(b->n_ops, u->op, b->tiles[u->first].mb);
    int k = g0 - b->unit_base[u->op];
    int join = add_task(tg, SS_TASK_OTHER, 0, prio, u->op, k, -1, 0, 0, 0, NULL, d);
    if (join < 0)
        return -1;
    int nt = u->rep * u->red;
    if (ss_grow((void **)&b->ipool, &b->cap_ipool, b->n_ipool + nt, sizeof(int)))
        return (ss_diag_set(d, SS_ERR_NOMEM, "simulate: out of memory building tasks"), -1);
    int *dv = b->ipool + b->n_ipool, n = 0;
    for (int t = 0; t < nt; t++) {
        int dev = b->tiles[u->first + t].dev, seen = 0;
        for (int i = 0; i < n && !seen; i++)
            seen = dv[i] == dev;
        if (!seen)
            dv[n++] = dev;
    }
    int last = join;
    if (n > 1) {
        double bytes = unit_out_bytes(b, u);
        last = ss_build_add_collective(b, tg, SS_COLL_ALLREDUCE, dv, n, bytes, bytes, u->op, k,
                                       SS_BUILD_COLL_REPSUM, prio, d);
        if (last < 0 || ss_taskgraph_add_dep(tg, join, last, d) != SS_OK)
            return -1;
        b->st.coll_repsum++;
    }
    for (int t = 0; t < nt; t++)
        if (ss_taskgraph_add_dep(tg, last, b->tiles[u->first + t].bwd, d) != SS_OK)
            return -1;
    return u->gentry = join;
}

/* The backward of a scatter-gather send (scatter_gather): the gradient
 * goes back 1/R per rank, and the senders' ranks all-gather it before
 * their backward. Made once per group, when the last of its R gradient
 * sends exists. */
static ss_status bwd_gather(ss_builder *b, ss_taskgraph *tg, int x, ss_diag *d)
{
    xferinfo *X = &b->xf[x];
    ss_build_shrink_transfer(b, tg, X->btask, X->dev, X->src, X->sgr);
    int R = X->sgr, u0 = X->unit - b->units[X->unit].q;
    GROW(b, ipool, cap_ipool, b->n_ipool + 2 * R, d);
    int *xs = b->ipool + b->n_ipool, *dv = xs + R;
    for (int q = 0; q < R; q++) {
        xs[q] = -1;
        for (int y = b->units[u0 + q].xhead; y >= 0 && xs[q] < 0; y = b->xf[y].next)
            if (b->xf[y].sg == X->sg)
                xs[q] = y;
        if (xs[q] < 0 || b->xf[xs[q]].btask < 0)
            return SS_OK; /* not all sent back yet */
        dv[q] = b->xf[xs[q]].src;
    }
    const unitinfo *u = &b->units[u0];
    const tileinfo *src = &b->tiles[u->first];
    int ag = ss_build_add_collective(b, tg, SS_COLL_ALLGATHER, dv, R, X->bytes, X->bytes, u->op,
                                     u0 - b->unit_base[u->op], SS_BUILD_COLL_SENDGATHER,
                                     ss_sched_prio_bwd(b->n_ops, u->op, src->mb), d);
    if (ag < 0)
        return d->status;
    b->st.coll_sendgather++;
    for (int q = 0; q < R; q++) {
        b->xf[xs[q]].bsg = ag;
        int entry = unit_entry(b, tg, u0 + q, d);
        if (ss_taskgraph_add_dep(tg, b->xf[xs[q]].btask, ag, d) != SS_OK || entry < 0 ||
            ss_taskgraph_add_dep(tg, ag, entry, d) != SS_OK)
            return d && d->status != SS_OK ? d->status : SS_ERR_NOMEM;
    }
    return SS_OK;
}

static ss_status pass_bwd_deps(ss_builder *b, ss_taskgraph *tg, ss_diag *d)
{
    for (int k = 0; k < b->n_pairs; k++) {
        const pairinfo *pr = &b->pairs[k];
        unitinfo *u = &b->units[pr->unit];
        if (b->tiles[u->first].bwd < 0)
            continue; /* a graph input's unit */
        const tileinfo *tj = &b->tiles[pr->tile];
        if (pr->xfer < 0 && (u->gsum || (u->red > 1 && u->n_unique > 1 && !u->local))) {
            /* a member of a unit spread over several devices: every member
             * needs this gradient, so it goes through the unit's entry */
            int entry = unit_entry(b, tg, pr->unit, d);
            if (entry < 0 || ss_taskgraph_add_dep(tg, tj->bwd, entry, d) != SS_OK)
                return d && d->status != SS_OK ? d->status : SS_ERR_NOMEM;
            continue;
        }
        if (pr->xfer < 0) {
            for (int r = 0; r < u->red; r++)
                if (b->tiles[u->first + r].dev == tj->dev &&
                    ss_taskgraph_add_dep(tg, tj->bwd, b->tiles[u->first + r].bwd, d) != SS_OK)
                    return d->status;
            continue;
        }
        xferinfo *X = &b->xf[pr->xfer];
        if (X->btask < 0) {
            const tileinfo *src = &b->tiles[u->first];
            int prio = X->block ? ss_sched_prio_bwd(b->n_ops, tj->op, tj->mb)
                                : ss_sched_prio_bwd(b->n_ops, u->op, src->mb);
            int y = ss_build_add_transfer(b, tg, X->dev, X->src, X->bytes, u->op, 1, prio,
                                          ss_build_holds(b, X), d);
            if (y < 0)
                return d ? d->status : SS_ERR_INVALID;
            X = &b->xf[pr->xfer];
            X->btask = y;
            b->st.xfer_bwd++;
            int entry = unit_entry(b, tg, pr->unit, d);
            if (entry < 0 || ss_taskgraph_add_dep(tg, y, entry, d) != SS_OK)
                return d && d->status != SS_OK ? d->status : SS_ERR_NOMEM;
            if (X->a2a >= 0) {
                if ((b->xf[pr->xfer].bsg = ss_build_bwd_alltoall(b, tg, pr->xfer, d)) < 0)
                    return d->status;
            } else if (X->sg >= 0 && bwd_gather(b, tg, pr->xfer, d) != SS_OK)
                return d->status;
            X = &b->xf[pr->xfer];
        }
        if (ss_taskgraph_add_dep(tg, tj->bwd, X->a2a >= 0 ? X->bsg : X->btask, d) != SS_OK)
            return d->status;
    }
    return SS_OK;
}

/* ---- pass 6: micro-batch program order (GPipe) and 1F1B in-flight limit - */

static ss_status pass_gating(ss_builder *b, ss_taskgraph *tg, const ss_plan *p, ss_diag *d)
{
    int M = b->set.microbatches;
    b->st.microbatch_gating = 0;
    b->n_flush = 0;
    if (M <= 1)
        return SS_OK;
    if (!b->gating_ok)
        return SS_OK; /* some data edge crosses micro-batches: no program order */
    int S = b->set.stages, V = b->set.virtual_stages;
    if (V < 1 || S % V != 0 || M % (S / V) != 0)
        V = 1; /* not a valid interleaving (ss_plan_validate refuses it) */
    int P = S / V, K = V * M, nd = b->n_dev;
    /* gate, per device and chunk-step: [nd*K] last forward (op order) of
     * forward step k, [nd*K] first backward (op order: the step's last to
     * run) of backward step k; [nd] the device's first stage */
    GROW(b, gate, cap_gate, 2 * nd * K + nd, d);
    int *lastf = b->gate, *firstb = b->gate + nd * K, *stage = b->gate + 2 * nd * K;
    for (int k = 0; k < 2 * nd * K; k++)
        b->gate[k] = -1;
    for (int k = 0; k < nd; k++)
        stage[k] = S;
    for (int j = 0, o = -1, s = 0; j < b->n_tiles; j++) { /* op order: last write = latest op */
        const tileinfo *t = &b->tiles[j];
        if (t->bwd < 0 || t->mb >= M) /* graph inputs have no backward */
            continue;
        if (t->op != o) {
            o = t->op;
            s = ss_plan_config(p, o)->stage;
        }
        lastf[t->dev * K + ss_sched_step(t->mb, s / P, P, V, 0)] = t->fwd;
        int *fb = &firstb[t->dev * K + ss_sched_step(t->mb, s / P, P, V, 1)];
        if (*fb < 0)
            *fb = t->bwd;
        if (s < stage[t->dev])
            stage[t->dev] = s;
    }
    /* a step a device has no tile of hands its predecessor on */
    for (int dv = 0; dv < nd; dv++)
        for (int k = 1; k < K; k++) {
            if (lastf[dv * K + k] < 0)
                lastf[dv * K + k] = lastf[dv * K + k - 1];
            if (firstb[dv * K + k] < 0)
                firstb[dv * K + k] = firstb[dv * K + k - 1];
        }
    int f1b = b->set.schedule == SS_PIPE_1F1B;
    for (int j = 0, o = -1, s = 0; j < b->n_tiles; j++) {
        const tileinfo *t = &b->tiles[j];
        if (t->bwd < 0 || t->mb >= M)
            continue;
        if (t->op != o) {
            o = t->op;
            s = ss_plan_config(p, o)->stage;
        }
        int k = ss_sched_step(t->mb, s / P, P, V, 0);
        int prev = k > 0 ? lastf[t->dev * K + k - 1] : -1;
        if (prev >= 0 && prev != t->fwd && ss_taskgraph_add_dep(tg, prev, t->fwd, d) != SS_OK)
            return d->status;
        if (!f1b)
            continue;
        /* forward step k waits for backward step k - warm: warm - 1 steps of
         * warm-up on rank r, (P - r - 1) without interleaving, else
         * (P - r - 1) * 2 + (V - 1) * P (Megatron's num_warmup_microbatches),
         * or every forward first when interleaving M = P micro-batches (its
         * all_warmup_microbatches) */
        int warm = ss_sched_warmup(P, V, M, stage[t->dev] % P) + 1;
        if (k >= warm) {
            int fb = firstb[t->dev * K + k - warm];
            if (fb >= 0 && ss_taskgraph_add_dep(tg, fb, t->fwd, d) != SS_OK)
                return d->status;
        }
        /* Megatron's program order on the rank, whatever the engine's keys
         * would pick: backward steps in order, and backward step kb after
         * forward step kb + warm - 1 (the steady state runs forward step
         * i + warm - 1, then backward step i), or after the last forward
         * step (the cool-down). A backward that arrives mid-forward waits
         * for the forward to finish, as the program runs it. */
        int kb = ss_sched_step(t->mb, s / P, P, V, 1);
        int prevb = kb > 0 ? firstb[t->dev * K + kb - 1] : -1;
        if (prevb >= 0 && prevb != t->bwd && ss_taskgraph_add_dep(tg, prevb, t->bwd, d) != SS_OK)
            return d->status;
        int fk = lastf[t->dev * K + (kb + warm - 1 < K ? kb + warm - 1 : K - 1)];
        if (fk >= 0 && ss_taskgraph_add_dep(tg, fk, t->bwd, d) != SS_OK)
            return d->status;
    }
    if (f1b) {
        GROW(b, flush, cap_flush, nd, d);
        for (int dv = 0; dv < nd; dv++)
            b->flush[dv] = firstb[dv * K + K - 1];
        b->n_flush = nd;
    }
    b->st.microbatch_gating = 1;
    return SS_OK;
}

/* ---- pass 8: memory intervals ------------------------------------------ */

static ss_status mem_add(ss_memory *mm, int dev, ss_mem_kind kind, double bytes, int t0, int e0,
                         int t1, int e1, ss_diag *d)
{
    ss_mem_interval iv;
    iv.device = dev;
    iv.kind = kind;
    iv.bytes = bytes;
    iv.alloc.task = t0;
    iv.alloc.at_end = e0;
    iv.release.task = t1;
    iv.release.at_end = e1;
    return ss_memory_add(mm, &iv, d);
}

static ss_status pass_memory(ss_builder *b, ss_memory *mm, ss_diag *d)
{
    ss_status st;
    for (int j = 0; j < b->n_tiles; j++) {
        const tileinfo *t = &b->tiles[j];
        if (t->bwd < 0)
            continue;
        const tilecost *tc = tcost(b, j);
        int last = j < b->n_wgt && b->wgt[j] >= 0 ? b->wgt[j] : t->bwd; /* reordered: its
                                                     * weight-gradient step reads them too */
        double kept = ss_build_kept_bytes(b, j, tc->saved);
        if (ss_build_recomputed(b, t->op)) {
            double ck = ss_build_checkpoint_bytes(b, j, ss_build_op_recompute(b, t->op));
            st = mem_add(mm, t->dev, SS_MEM_ACTIVATION, kept, t->bwd, 0, last, 1, d);
            if (st == SS_OK)
                st = mem_add(mm, t->dev, SS_MEM_ACTIVATION, ck, t->fwd, 0, last, 1, d);
        } else
            st = mem_add(mm, t->dev, SS_MEM_ACTIVATION, kept, t->fwd, 0, last, 1, d);
        if (st != SS_OK || (st = mem_add(mm, t->dev, SS_MEM_WORKSPACE, tc->ws, t->fwd, 0, t->fwd,
                                         1, d)) != SS_OK ||
            (st = mem_add(mm, t->dev, SS_MEM_WORKSPACE, tc->ws, t->bwd, 0, t->bwd, 1, d)) != SS_OK)
            return st;
    }
    for (int x = 0; x < b->n_xf; x++) {
        const xferinfo *X = &b->xf[x];
        const tileinfo *user = &b->tiles[X->last_user];
        /* received input: until its consumer's forward ends, or, from
         * another stage, kept as a checkpoint until the consumer's backward
         * ends with recompute (a gather within the stage is made again) */
        if (user->bwd >= 0 && ss_build_op_recompute(b, user->op) == SS_RECOMPUTE_FULL &&
            ss_plan_config(b->plan, b->units[X->unit].op)->stage !=
                ss_plan_config(b->plan, user->op)->stage)
            st = mem_add(mm, X->dev, SS_MEM_BUFFER, X->bytes, X->task, 0, user->bwd, 1, d);
        else
            st = mem_add(mm, X->dev, SS_MEM_BUFFER, X->bytes, X->task, 0, user->fwd, 1, d);
        if (st != SS_OK)
            return st;
        if (X->btask >= 0) {
            const tileinfo *src = &b->tiles[b->units[X->unit].first];
            if (src->bwd >= 0 && (st = mem_add(mm, X->src, SS_MEM_BUFFER, X->bytes, X->btask, 0,
                                               src->bwd, 1, d)) != SS_OK)
                return st;
        }
    }
    return SS_OK;
}

/* ---- the run ------------------------------------------------------------ */

/* Lean mode: the pairs themselves are read up to the backward
 * dependencies (weights and memory intervals use tiles, units and
 * transfers). */
static ss_status lean_drop_pairs(ss_builder *b)
{
    if (b->lean) {
        DROP(b, pairs, cap_pairs);
        b->n_pairs = 0;
        for (int u = 0; u < b->n_units; u++)
            b->units[u].phead = -1;
    }
    return SS_OK;
}

/* Lean mode: the regions pairs read (pbuf, preg; transfers' reg points
 * into them) are read by passes 3 (partial sums) and forward dependencies
 * only. */
static ss_status lean_drop_regions(ss_builder *b)
{
    if (b->lean) {
        DROP(b, preg, cap_preg);
        DROP(b, pbuf, cap_pbuf);
        b->n_pbuf = 0;
        for (int x = 0; x < b->n_xf; x++)
            b->xf[x].reg = NULL;
    }
    return SS_OK;
}

ss_status ss_build_run(ss_builder *b, const ss_plan *p, ss_taskgraph *tg, ss_memory *mm,
                       ss_diag *dd)
{
    ss_diag local;
    ss_diag *d = dd ? dd : &local;
    if (!dd)
        ss_diag_init(&local);
    b->n_ops = ss_graph_n_ops(b->g);
    b->n_dev = ss_machine_n_devices(b->m);
    if (ss_plan_n_ops(p) != b->n_ops)
        return ss_diag_set(d, SS_ERR_INVALID,
                           "simulate: the plan has %d operators but model \"%s\" has %d",
                           ss_plan_n_ops(p), ss_graph_name(b->g), b->n_ops);
    b->set = *ss_plan_settings_get(p);
    b->plan = p;
    b->n_wgt = b->n_nfw = b->nf_lo = b->nf_hi = 0;
    if (b->set.stages < 1)
        b->set.stages = 1;
    if (b->set.microbatches < 1)
        b->set.microbatches = 1;
    b->policy = ss_sched_policy(&b->set);
    memset(&b->st, 0, sizeof b->st);
    b->gating_ok = 1;
    b->mem_pending = 0;
    b->n_tiles = b->n_units = b->n_xf = b->n_pairs = b->n_we = b->n_sh = b->n_ipool = b->n_wr = 0;
    b->n_pbuf = 0;
    b->n_a2a = b->n_a2ax = 0;
    ss_status st;
    if ((st = ss_taskgraph_reset(tg, b->n_dev, 2 * ss_machine_n_links(b->m), d)) != SS_OK ||
        (st = ss_taskgraph_map_machine(tg, b->m, d)) != SS_OK ||
        (st = ss_memory_reset(mm, b->n_dev, d)) != SS_OK)
        return st;
    if ((st = ensure_tables(b, d)) != SS_OK || (st = ensure_score(b, d)) != SS_OK)
        return st;
    if ((st = pass_tiles(b, p, tg, d)) != SS_OK) {
        /* the ops it did not reach may have lost their tiles to those it
         * placed (another layout) */
        if (b->placed)
            memset(b->placed, 0, 2 * (size_t)b->n_ops * sizeof *b->placed);
        return st;
    }
    if ((st = pass_units(b, p, d)) != SS_OK ||
        (st = ss_build_pass_pairs(b, d)) != SS_OK || (st = ss_build_pass_replicas(b)) != SS_OK ||
        (st = ss_build_pass_partial(b, tg, d)) != SS_OK ||
        (st = ss_build_pass_fwd_deps(b, p, tg, d)) != SS_OK || (st = lean_drop_regions(b)) != SS_OK ||
        (st = pass_bwd(b, tg, d)) != SS_OK ||
        (st = pass_bwd_deps(b, tg, d)) != SS_OK || (st = lean_drop_pairs(b)) != SS_OK ||
        (st = pass_gating(b, tg, p, d)) != SS_OK ||
        (st = stopped(b, 1, d) ? SS_ERR_INTERRUPTED : SS_OK) != SS_OK ||
        (st = ss_build_weights(b, tg, mm, d)) != SS_OK)
        return st;
    if (b->lean) { /* the intervals now, then nothing of the builder is needed */
        if ((st = pass_memory(b, mm, d)) != SS_OK)
            return st;
        release_scratch(b);
    }
    if ((st = ss_taskgraph_finalize(tg, d)) != SS_OK)
        return st;
    if (b->lean)
        ss_taskgraph_release_edges(tg);
    b->mem_pending = 1;
    return SS_OK;
}

ss_status ss_build_memory(ss_builder *b, ss_memory *mm, ss_diag *d)
{
    if (b->lean && b->mem_pending) { /* ss_build_run added them */
        b->mem_pending = 0;
        return SS_OK;
    }
    if (!b->mem_pending)
        return ss_diag_set(d, SS_ERR_INVALID,
                           "simulate: memory intervals asked for without a build to add them to");
    b->mem_pending = 0;
    return pass_memory(b, mm, d);
}

/* ---- naming ------------------------------------------------------------- */

void ss_build_task_name(void *ctx, const ss_taskgraph *tg, int task, char *buf, size_t n)
{
    const ss_builder *b = ctx;
    int op = tg->op[task];
    const char *name = op >= 0 && op < ss_graph_n_ops(b->g) ? ss_graph_op(b->g, op)->name : "";
    switch ((ss_task_kind)tg->kind[task]) {
    case SS_TASK_FWD:
    case SS_TASK_BWD:
        snprintf(buf, n, "%s %s t%d mb%d", ss_task_kind_name((ss_task_kind)tg->kind[task]), name,
                 tg->tile[task], tg->mb[task]);
        break;
    case SS_TASK_UPDATE: {
        int w = tg->aux[task];
        const ss_tensor *t = w >= 0 && w < ss_graph_n_tensors(b->g) ? ss_graph_tensor(b->g, w)
                                                                      : NULL;
        snprintf(buf, n, "update %s", t ? t->name : name);
        break;
    }
    case SS_TASK_XFER:
        snprintf(buf, n, "%s %s", tg->aux[task] ? "grad xfer" : "xfer", name);
        break;
    case SS_TASK_COLLECTIVE:
        if (tg->aux[task] == SS_BUILD_COLL_GRAD && op < 0) /* build_weights.c, split_tp */
            snprintf(buf, n, "allreduce split grads over tensor-parallel group %d",
                     tg->tile[task]);
        else if (tg->aux[task] == SS_BUILD_COLL_GRAD)
            snprintf(buf, n, "%s grads bucket %d (%s ...)",
                     b->set.distopt ? "reduce-scatter" : "allreduce", tg->tile[task], name);
        else if (tg->aux[task] == SS_BUILD_COLL_PARTIAL)
            snprintf(buf, n, "allreduce partial sums %s", name);
        else if (tg->aux[task] == SS_BUILD_COLL_SCATTER)
            snprintf(buf, n, "reduce-scatter partial sums %s", name);
        else if (tg->aux[task] == SS_BUILD_COLL_GATHER)
            snprintf(buf, n, "allgather output grad %s", name);
        else if (tg->aux[task] == SS_BUILD_COLL_GRADSUM)
            snprintf(buf, n, "allreduce output grad %s", name);
        else if (tg->aux[task] == SS_BUILD_COLL_REPSUM)
            snprintf(buf, n, "allreduce replicas' output grad %s", name);
        else if (tg->aux[task] == SS_BUILD_COLL_SENDGATHER)
            snprintf(buf, n, "allgather scatter-gather send %s", name);
        else if (tg->aux[task] == SS_BUILD_COLL_ALLTOALL)
            snprintf(buf, n, "alltoall %s", name);
        else if (tg->aux[task] == SS_BUILD_COLL_PARAM)
            snprintf(buf, n, "allgather weights %s", name);
        else
            snprintf(buf, n, "broadcast output grad %s", name);
        break;
    default:
        snprintf(buf, n, "join %s", name);
        break;
    }
}
