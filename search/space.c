/*
 * space.c — per-operator candidate parallel configs (space.h).
 *
 * Degree tuples are enumerated once per op (depth-first over the splittable
 * dims, then the reduction), keeping only tuples whose tile count divides the
 * device count. Placements are not stored: placement j of a tuple with T
 * tiles on N devices is contiguous block j for j < N/T, else the strided
 * placement with offset j - N/T. Invariant: cand_off[] holds, per op, the
 * running count of candidates over that op's tuples, so candidate i maps to
 * a (tuple, placement) pair by binary search.
 */
#include "search/space.h"

#include <math.h>
#include <string.h>

#define NF (SS_MAX_DIMS + 1) /* factors per tuple: dims then reduction */

struct ss_space {
    const ss_graph *g;
    int n_ops, n_dev, max_tiles;
    int *op_tup;        /* [n_ops + 1]: tuples of op are op_tup[op] .. op_tup[op+1] */
    int *ndim;          /* [n_ops] */
    int *tdeg;          /* [n_tuples * NF]: degrees per dim, then red */
    int *ttiles;        /* [n_tuples] */
    int64_t *cand_off;  /* [n_tuples + n_ops]: per op, op_tup span + 1 running counts */
    int *cand_base;     /* [n_ops]: index of op's first running count in cand_off */
    int n_tuples, cap_tuples;
};

/* Placements of T tiles on N devices (T divides N). */
static int n_placements(int T, int N)
{
    int blocks = N / T;
    return blocks + ((T > 1 && T < N) ? blocks : 0);
}

/* Device of tile k under placement j. */
static int place_device(int T, int N, int j, int k)
{
    int blocks = N / T;
    if (j < blocks)
        return j * T + k;
    return (j - blocks) + k * blocks;
}

static ss_status grow(ss_space *s, ss_diag *d)
{
    if (s->n_tuples < s->cap_tuples)
        return SS_OK;
    int cap = s->cap_tuples ? 2 * s->cap_tuples : 256;
    int *nd = ss_realloc(s->tdeg, (size_t)cap * NF * sizeof *nd);
    if (!nd)
        return ss_diag_set(d, SS_ERR_NOMEM, "search space: out of memory");
    s->tdeg = nd;
    int *nt = ss_realloc(s->ttiles, (size_t)cap * sizeof *nt);
    if (!nt)
        return ss_diag_set(d, SS_ERR_NOMEM, "search space: out of memory");
    s->ttiles = nt;
    s->cap_tuples = cap;
    return SS_OK;
}

/* Factor f of the op (dims then reduction): extent and whether splittable. */
typedef struct factors {
    int n;
    int idx[NF];        /* position in the tuple: dim index, or SS_MAX_DIMS for red */
    int64_t ext[NF];
} factors;

static ss_status enumerate(ss_space *s, const factors *f, int k, int *deg, int T, ss_diag *d)
{
    if (k == f->n) {
        ss_status st = grow(s, d);
        if (st)
            return st;
        memcpy(s->tdeg + (size_t)s->n_tuples * NF, deg, NF * sizeof *deg);
        s->ttiles[s->n_tuples++] = T;
        return SS_OK;
    }
    int room = s->max_tiles / T;
    for (int64_t v = 1; v <= room && v <= f->ext[k]; v++) {
        if (f->ext[k] % v || (s->n_dev / T) % v)
            continue;
        deg[f->idx[k]] = (int)v;
        ss_status st = enumerate(s, f, k + 1, deg, T * (int)v, d);
        if (st)
            return st;
    }
    deg[f->idx[k]] = 1;
    return SS_OK;
}

static void op_factors(const ss_graph *g, const ss_op *op, factors *f, int *ndim)
{
    const ss_tensor *t = ss_graph_tensor(g, op->outputs[0]);
    unsigned mask = ss_op_split_mask(g, op);
    f->n = 0;
    *ndim = t->ndim;
    for (int i = 0; i < t->ndim; i++) {
        if (mask & (1u << i)) {
            f->idx[f->n] = i;
            f->ext[f->n++] = t->shape[i];
        }
    }
    int64_t c = ss_op_contraction(g, op);
    if (c > 1) {
        f->idx[f->n] = SS_MAX_DIMS;
        f->ext[f->n++] = c;
    }
}

void ss_space_free(ss_space *s)
{
    if (!s)
        return;
    ss_free(s->op_tup);
    ss_free(s->ndim);
    ss_free(s->tdeg);
    ss_free(s->ttiles);
    ss_free(s->cand_off);
    ss_free(s->cand_base);
    ss_free(s);
}

ss_status ss_space_new(const ss_graph *g, const ss_space_opts *opts, ss_space **out,
                       ss_diag *d)
{
    if (!opts || opts->n_devices < 1 || opts->max_tiles < 0)
        return ss_diag_set(d, SS_ERR_INVALID, "search space: need at least one device");
    int n_dev = opts->n_devices;
    int max_tiles = opts && opts->max_tiles > 0 ? opts->max_tiles : n_dev;
    if (max_tiles > n_dev)
        max_tiles = n_dev;
    ss_space *s = ss_calloc(1, sizeof *s);
    if (!s)
        return ss_diag_set(d, SS_ERR_NOMEM, "search space: out of memory");
    s->g = g;
    s->n_ops = ss_graph_n_ops(g);
    s->n_dev = n_dev;
    s->max_tiles = max_tiles;
    s->op_tup = ss_calloc((size_t)s->n_ops + 1, sizeof *s->op_tup);
    s->ndim = ss_calloc((size_t)s->n_ops + 1, sizeof *s->ndim);
    s->cand_base = ss_calloc((size_t)s->n_ops + 1, sizeof *s->cand_base);
    if (!s->op_tup || !s->ndim || !s->cand_base) {
        ss_space_free(s);
        return ss_diag_set(d, SS_ERR_NOMEM, "search space: out of memory");
    }
    for (int i = 0; i < s->n_ops; i++) {
        const ss_op *op = ss_graph_op(g, i);
        factors f;
        int deg[NF];
        for (int k = 0; k < NF; k++)
            deg[k] = 1;
        op_factors(g, op, &f, &s->ndim[i]);
        s->op_tup[i] = s->n_tuples;
        ss_status st = enumerate(s, &f, 0, deg, 1, d);
        if (st) {
            ss_space_free(s);
            return st;
        }
    }
    s->op_tup[s->n_ops] = s->n_tuples;
    s->cand_off = ss_calloc((size_t)s->n_tuples + (size_t)s->n_ops + 1, sizeof *s->cand_off);
    if (!s->cand_off) {
        ss_space_free(s);
        return ss_diag_set(d, SS_ERR_NOMEM, "search space: out of memory");
    }
    int pos = 0;
    for (int i = 0; i < s->n_ops; i++) {
        s->cand_base[i] = pos;
        int64_t run = 0;
        s->cand_off[pos++] = 0;
        for (int t = s->op_tup[i]; t < s->op_tup[i + 1]; t++) {
            run += n_placements(s->ttiles[t], n_dev);
            s->cand_off[pos++] = run;
        }
    }
    *out = s;
    return SS_OK;
}

const ss_graph *ss_space_graph(const ss_space *s) { return s->g; }
int ss_space_n_ops(const ss_space *s) { return s->n_ops; }
int ss_space_n_devices(const ss_space *s) { return s->n_dev; }

int ss_space_n_tuples(const ss_space *s, int op)
{
    return s->op_tup[op + 1] - s->op_tup[op];
}

int64_t ss_space_n_candidates(const ss_space *s, int op)
{
    return s->cand_off[s->cand_base[op] + ss_space_n_tuples(s, op)];
}

double ss_space_log10_size(const ss_space *s)
{
    double sum = 0;
    for (int i = 0; i < s->n_ops; i++)
        sum += log10((double)ss_space_n_candidates(s, i));
    return sum;
}

static void fill(const ss_space *s, int op, int t, int j, ss_pconfig *c, int *devs)
{
    const int *deg = s->tdeg + (size_t)t * NF;
    int T = s->ttiles[t];
    c->ndim = s->ndim[op];
    for (int k = 0; k < SS_MAX_DIMS; k++)
        c->deg[k] = k < c->ndim ? deg[k] : 1;
    c->red = deg[SS_MAX_DIMS];
    c->rep = 1;
    c->ntiles = T;
    c->stage = 0;
    for (int k = 0; k < T; k++)
        devs[k] = place_device(T, s->n_dev, j, k);
    c->devices = devs;
}

void ss_space_candidate(const ss_space *s, int op, int64_t i, ss_pconfig *c, int *devs)
{
    const int64_t *off = s->cand_off + s->cand_base[op];
    int lo = 0, hi = ss_space_n_tuples(s, op); /* find t: off[t] <= i < off[t+1] */
    while (hi - lo > 1) {
        int mid = (lo + hi) / 2;
        if (off[mid] <= i)
            lo = mid;
        else
            hi = mid;
    }
    fill(s, op, s->op_tup[op] + lo, (int)(i - off[lo]), c, devs);
}

void ss_space_random(const ss_space *s, int op, ss_rng *r, ss_pconfig *c, int *devs)
{
    int t = s->op_tup[op] + (int)ss_rng_below(r, ss_space_n_tuples(s, op));
    int j = (int)ss_rng_below(r, n_placements(s->ttiles[t], s->n_dev));
    fill(s, op, t, j, c, devs);
}

/* Tuple index (absolute) with c's degrees, or -1. */
static int find_tuple(const ss_space *s, int op, const ss_pconfig *c)
{
    if (c->ndim != s->ndim[op])
        return -1;
    for (int t = s->op_tup[op]; t < s->op_tup[op + 1]; t++) {
        const int *deg = s->tdeg + (size_t)t * NF;
        int same = deg[SS_MAX_DIMS] == c->red;
        for (int k = 0; same && k < c->ndim; k++)
            same = deg[k] == c->deg[k];
        if (same)
            return t;
    }
    return -1;
}

int64_t ss_space_find(const ss_space *s, int op, const ss_pconfig *c)
{
    int t = find_tuple(s, op, c);
    if (t < 0 || c->ntiles != s->ttiles[t])
        return -1;
    int T = s->ttiles[t], P = n_placements(T, s->n_dev);
    for (int j = 0; j < P; j++) {
        int k = 0;
        while (k < T && c->devices[k] == place_device(T, s->n_dev, j, k))
            k++;
        if (k == T)
            return s->cand_off[s->cand_base[op] + (t - s->op_tup[op])] + j;
    }
    return -1;
}

int ss_space_allows(const ss_space *s, int op, const ss_pconfig *c)
{
    int t = find_tuple(s, op, c);
    if (t < 0 || c->ntiles != s->ttiles[t])
        return 0;
    for (int k = 0; k < c->ntiles; k++) {
        if (c->devices[k] < 0 || c->devices[k] >= s->n_dev)
            return 0;
        for (int l = 0; l < k; l++)
            if (c->devices[l] == c->devices[k])
                return 0;
    }
    return 1;
}

ss_status ss_space_random_plan(const ss_space *s, ss_rng *r, ss_plan *p, ss_diag *d)
{
    /* Work on a clone so that on error p is unchanged. */
    ss_plan *q = ss_plan_clone(p);
    int *buf = ss_malloc((size_t)s->n_dev * sizeof *buf);
    if (!q || !buf) {
        ss_plan_free(q);
        ss_free(buf);
        return ss_diag_set(d, SS_ERR_NOMEM, "search space: out of memory");
    }
    ss_pconfig c;
    ss_status st = SS_OK;
    for (int i = 0; i < s->n_ops && st == SS_OK; i++) {
        ss_space_random(s, i, r, &c, buf);
        st = ss_plan_set_config(q, i, &c, d);
    }
    if (st == SS_OK && ss_plan_copy(p, q) != SS_OK)
        st = ss_diag_set(d, SS_ERR_NOMEM, "search space: out of memory");
    ss_free(buf);
    ss_plan_free(q);
    return st;
}
