/*
 * mesh.c — device meshes and operator shardings (search/mesh.h).
 *
 * Invariant: a sharding that ss_sharding_enumerate returns gives a config
 * (ss_sharding_config) that ss_plan_validate accepts — degrees divide the
 * extents, only dims the operator table allows are split, a contraction is
 * split only where it exists, replicas of a tile sit on distinct devices —
 * and the tile at mesh coordinate c of that config is the one
 * ss_sharding_tile_index names.
 */
#include "search/mesh.h"

#include <stdio.h>
#include <string.h>

static int fits_nodes(const ss_dmesh *m, int per_node)
{
    if (per_node <= 1)
        return 1;
    int p = 1;
    for (int a = m->n_axes - 1; a >= 0; a--) {
        p *= m->size[a];
        if (per_node % p != 0 && p % per_node != 0)
            return 0;
    }
    return 1;
}

static void set_strides(ss_dmesh *m)
{
    int s = 1;
    m->n = 1;
    for (int a = m->n_axes - 1; a >= 0; a--) {
        m->stride[a] = s;
        s *= m->size[a];
        m->n *= m->size[a];
    }
}

/* Ordered factorizations of rest into exactly k more factors >= 2. */
static void factor(ss_dmesh *cur, int rest, int k, int per_node, ss_dmesh *out, int cap,
                   int *count)
{
    if (k == 0) {
        if (rest != 1)
            return;
        set_strides(cur);
        if (!fits_nodes(cur, per_node))
            return;
        if (*count < cap)
            out[*count] = *cur;
        (*count)++;
        return;
    }
    for (int f = 2; f <= rest; f++) {
        if (rest % f)
            continue;
        cur->size[cur->n_axes++] = f;
        factor(cur, rest / f, k - 1, per_node, out, cap, count);
        cur->n_axes--;
    }
}

int ss_dmesh_enumerate(int n, int per_node, int max_axes, ss_dmesh *out, int cap)
{
    int count = 0;
    if (n < 1)
        return 0;
    if (max_axes > SS_DMESH_MAX_AXES)
        max_axes = SS_DMESH_MAX_AXES;
    if (n == 1) {
        if (cap > 0) {
            memset(out, 0, sizeof *out);
            out[0].n = 1;
        }
        return 1;
    }
    for (int k = 1; k <= max_axes; k++) {
        ss_dmesh cur;
        memset(&cur, 0, sizeof cur);
        factor(&cur, n, k, per_node, out, cap, &count);
    }
    return count;
}

void ss_dmesh_name(const ss_dmesh *m, char *buf, size_t cap)
{
    size_t o = 0;
    if (cap == 0)
        return;
    buf[0] = '\0';
    if (m->n_axes == 0) {
        snprintf(buf, cap, "1");
        return;
    }
    for (int a = 0; a < m->n_axes && o < cap; a++) {
        int w = snprintf(buf + o, cap - o, a ? "x%d" : "%d", m->size[a]);
        if (w < 0)
            return;
        o += (size_t)w;
    }
}

int ss_dmesh_group(const ss_dmesh *m, int base, unsigned axis_mask, int *devs)
{
    int n = 1;
    devs[0] = base;
    for (int a = 0; a < m->n_axes; a++) {
        if (!(axis_mask & (1u << a)))
            continue;
        /* outer axes first: each entry expands into size[a] entries */
        int k = n * m->size[a];
        for (int i = k - 1; i >= 0; i--)
            devs[i] = devs[i / m->size[a]] + (i % m->size[a]) * m->stride[a];
        n = k;
    }
    return n;
}

static int sample_dim(const ss_graph *g, const ss_op *op)
{
    if (op->n_out < 1)
        return -1;
    const ss_tensor *o = ss_graph_tensor(g, op->outputs[0]);
    unsigned mask = ss_op_split_mask(g, op);
    for (int k = 0; k < o->ndim; k++)
        if (o->kind[k] == SS_DIM_SAMPLE && (mask & (1u << k)))
            return k;
    return -1;
}

/* Degrees of s: deg[j] (axes only), red, rep. */
static void degrees(const ss_dmesh *m, const ss_sharding *s, int *deg, int *red, int *rep)
{
    for (int j = 0; j < SS_MAX_DIMS; j++)
        deg[j] = 1;
    *red = *rep = 1;
    for (int a = 0; a < m->n_axes; a++) {
        int r = s->axis[a];
        if (r >= 0)
            deg[r] *= m->size[a];
        else if (r == SS_AXIS_RED)
            *red *= m->size[a];
        else
            *rep *= m->size[a];
    }
}

int ss_sharding_mb(const ss_graph *g, const ss_op *op, const ss_dmesh *m, const ss_sharding *s,
                   int mb)
{
    int sd = sample_dim(g, op);
    if (mb <= 1 || sd < 0)
        return 1;
    int deg[SS_MAX_DIMS], red, rep;
    degrees(m, s, deg, &red, &rep);
    const ss_tensor *o = ss_graph_tensor(g, op->outputs[0]);
    return o->shape[sd] % ((int64_t)deg[sd] * mb) == 0 ? mb : 1;
}

static int valid(const ss_graph *g, const ss_op *op, const ss_dmesh *m, const ss_sharding *s)
{
    int deg[SS_MAX_DIMS], red, rep;
    degrees(m, s, deg, &red, &rep);
    const ss_tensor *o = op->n_out > 0 ? ss_graph_tensor(g, op->outputs[0]) : NULL;
    unsigned mask = ss_op_split_mask(g, op);
    for (int j = 0; j < SS_MAX_DIMS; j++) {
        if (deg[j] == 1)
            continue;
        if (!o || j >= o->ndim || !(mask & (1u << j)) || o->shape[j] % deg[j] != 0)
            return 0;
    }
    if (red > 1) {
        int64_t c = ss_op_contraction(g, op);
        if (c <= 0 || c % red != 0)
            return 0;
    }
    return 1;
}

int ss_sharding_enumerate(const ss_graph *g, const ss_op *op, const ss_dmesh *m, int mb,
                          ss_sharding *out, int cap)
{
    int sd = sample_dim(g, op);
    const ss_tensor *o = op->n_out > 0 ? ss_graph_tensor(g, op->outputs[0]) : NULL;
    int nd = o ? o->ndim : 0, roles = nd + 2, count = 0;
    int idx[SS_DMESH_MAX_AXES] = {0};
    for (;;) {
        ss_sharding s;
        memset(&s, 0, sizeof s);
        for (int a = 0; a < m->n_axes; a++)
            s.axis[a] = (signed char)(idx[a] < nd ? idx[a] : idx[a] == nd ? SS_AXIS_RED
                                                                            : SS_AXIS_REP);
        if (valid(g, op, m, &s) && (sd < 0 || ss_sharding_mb(g, op, m, &s, mb) == mb)) {
            if (count < cap)
                out[count] = s;
            count++;
        }
        int a = m->n_axes - 1;
        while (a >= 0 && ++idx[a] == roles)
            idx[a--] = 0;
        if (a < 0)
            break;
    }
    return count;
}

/* Mixed-radix value of coord over the axes whose role is `role`. */
static int digits(const ss_dmesh *m, const ss_sharding *s, int role, const int *coord)
{
    int v = 0;
    for (int a = 0; a < m->n_axes; a++)
        if (s->axis[a] == role)
            v = v * m->size[a] + coord[a];
    return v;
}

/* Inverse of digits: spread v over the axes of `role` into coord. */
static void spread(const ss_dmesh *m, const ss_sharding *s, int role, int v, int *coord)
{
    for (int a = m->n_axes - 1; a >= 0; a--)
        if (s->axis[a] == role) {
            coord[a] = v % m->size[a];
            v /= m->size[a];
        }
}

int ss_sharding_tile_index(const ss_graph *g, const ss_op *op, const ss_dmesh *m,
                           const ss_sharding *s, int mb, const int *coord)
{
    int deg[SS_MAX_DIMS], red, rep, sd = sample_dim(g, op);
    int mbe = ss_sharding_mb(g, op, m, s, mb);
    degrees(m, s, deg, &red, &rep);
    const ss_tensor *o = op->n_out > 0 ? ss_graph_tensor(g, op->outputs[0]) : NULL;
    int nd = o ? o->ndim : 0, idx = 0;
    for (int j = 0; j < nd; j++) {
        int dj = deg[j] * (j == sd ? mbe : 1);
        int ij = digits(m, s, j, coord) * (j == sd ? mbe : 1);
        idx = idx * dj + ij;
    }
    idx = idx * rep + digits(m, s, SS_AXIS_REP, coord);
    return idx * red + digits(m, s, SS_AXIS_RED, coord);
}

void ss_sharding_config(const ss_graph *g, const ss_op *op, const ss_dmesh *m,
                        const ss_sharding *s, int mb, int base, int stage, ss_pconfig *c,
                        int *devs)
{
    int deg[SS_MAX_DIMS], red, rep, sd = sample_dim(g, op);
    int mbe = ss_sharding_mb(g, op, m, s, mb);
    degrees(m, s, deg, &red, &rep);
    const ss_tensor *o = op->n_out > 0 ? ss_graph_tensor(g, op->outputs[0]) : NULL;
    memset(c, 0, sizeof *c);
    c->ndim = o ? o->ndim : 0;
    for (int j = 0; j < SS_MAX_DIMS; j++)
        c->deg[j] = j < c->ndim ? deg[j] * (j == sd ? mbe : 1) : 1;
    c->red = red;
    c->rep = rep;
    c->ntiles = red * rep;
    for (int j = 0; j < c->ndim; j++)
        c->ntiles *= c->deg[j];
    c->stage = stage;
    for (int t = 0; t < c->ntiles; t++) {
        int coord[SS_DMESH_MAX_AXES] = {0}, rest = t;
        spread(m, s, SS_AXIS_RED, rest % red, coord);
        rest /= red;
        spread(m, s, SS_AXIS_REP, rest % rep, coord);
        rest /= rep;
        for (int j = c->ndim - 1; j >= 0; j--) {
            int i = rest % c->deg[j];
            rest /= c->deg[j];
            spread(m, s, j, j == sd ? i / mbe : i, coord);
        }
        int dev = base;
        for (int a = 0; a < m->n_axes; a++)
            dev += coord[a] * m->stride[a];
        devs[t] = dev;
    }
    c->devices = devs;
}

void ss_sharding_tile(const ss_graph *g, const ss_op *op, const ss_dmesh *m,
                      const ss_sharding *s, int mb, const int *coord, ss_tile *t)
{
    int deg[SS_MAX_DIMS], red, rep, sd = sample_dim(g, op);
    int mbe = ss_sharding_mb(g, op, m, s, mb);
    degrees(m, s, deg, &red, &rep);
    const ss_tensor *o = op->n_out > 0 ? ss_graph_tensor(g, op->outputs[0]) : NULL;
    ss_pconfig c;
    memset(&c, 0, sizeof c);
    c.ndim = o ? o->ndim : 0;
    for (int j = 0; j < SS_MAX_DIMS; j++)
        c.deg[j] = j < c.ndim ? deg[j] * (j == sd ? mbe : 1) : 1;
    c.red = red;
    c.rep = rep;
    ss_pconfig_tile(g, op, &c, ss_sharding_tile_index(g, op, m, s, mb, coord), t);
}
