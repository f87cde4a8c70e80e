/*
 * memory.c — per-device memory with liveness (memory.h).
 *
 * Static bytes (weights, gradients, optimizer state) are plain per-device
 * sums. Dynamic intervals are stored as added; ss_memory_sweep turns them
 * into +bytes / -bytes events, sorts them by (device, time, frees first,
 * interval index) and keeps the running maximum per device. Invariant: every
 * array has room for its count; capacities only grow, counts reset.
 * ss_memory_sweep_ranked gets the same order from integer time ranks with
 * one counting sort (linear) instead of a comparison sort.
 */
#include "simulator/memory.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct event {
    int device;
    int order;    /* interval index: deterministic tie-break */
    double time;
    double delta; /* +bytes at alloc, -bytes at release */
} event;

/* An event of the ranked sweep, already in its sorted place. */
typedef struct rankev {
    int32_t device;
    double delta;
} rankev;

struct ss_memory {
    int n_devices, cap_devices;
    double *weights; /* [cap_devices] */
    double *stat;    /* weights + grads + optimizer */
    int n_iv, cap_iv;
    ss_mem_interval *iv;
    int cap_ev;
    event *ev;
    /* ranked sweep scratch */
    int cap_cnt, cap_rev, cap_live, cap_rr;
    int32_t *cnt;  /* [2 * n_ranks + 1] bucket offsets */
    int32_t *rr;   /* [2 * n_iv]: each interval's alloc and release ranks */
    rankev *rev;   /* [2 * n_iv] events in sweep order */
    double *live;  /* [2 * n_devices]: live bytes, best so far */
};

ss_memory *ss_memory_new(void)
{
    return ss_calloc(1, sizeof(ss_memory));
}

void ss_memory_free(ss_memory *mm)
{
    if (!mm)
        return;
    ss_free(mm->weights);
    ss_free(mm->stat);
    ss_free(mm->iv);
    ss_free(mm->ev);
    ss_free(mm->cnt);
    ss_free(mm->rev);
    ss_free(mm->live);
    ss_free(mm->rr);
    ss_free(mm);
}

ss_status ss_memory_reset(ss_memory *mm, int n_devices, ss_diag *d)
{
    if (n_devices < 0)
        return ss_diag_set(d, SS_ERR_INVALID, "memory: negative device count %d", n_devices);
    if (n_devices > mm->cap_devices) {
        double *w = ss_calloc((size_t)n_devices, sizeof(double));
        double *s = ss_calloc((size_t)n_devices, sizeof(double));
        if (!w || !s) {
            ss_free(w);
            ss_free(s);
            return ss_diag_set(d, SS_ERR_NOMEM, "memory: out of memory for %d devices",
                               n_devices);
        }
        ss_free(mm->weights);
        ss_free(mm->stat);
        mm->weights = w;
        mm->stat = s;
        mm->cap_devices = n_devices;
    }
    if (n_devices > 0) {
        memset(mm->weights, 0, (size_t)n_devices * sizeof(double));
        memset(mm->stat, 0, (size_t)n_devices * sizeof(double));
    }
    mm->n_devices = n_devices;
    mm->n_iv = 0;
    return SS_OK;
}

void ss_memory_param_bytes(ss_dtype wdtype, ss_optimizer opt, ss_precision prec,
                           double *weight, double *grad, double *optim)
{
    double w, g, o;
    double state = opt == SS_OPT_ADAM ? 8.0 : opt == SS_OPT_SGD_MOMENTUM ? 4.0 : 0.0;
    if (prec == SS_PREC_MIXED) {
        w = 2.0;         /* half-precision working copy */
        g = 2.0;         /* half-precision gradient */
        o = 4.0 + state; /* fp32 master weights + fp32 optimizer state */
    } else {
        w = (double)ss_dtype_size(wdtype);
        g = w;
        o = state;
    }
    if (weight)
        *weight = w;
    if (grad)
        *grad = g;
    if (optim)
        *optim = o;
}

void ss_memory_add_params_split(ss_memory *mm, int device, int64_t n_params, ss_dtype wdtype,
                                ss_optimizer opt, ss_precision prec, int split)
{
    double w, g, o;
    if (device < 0 || device >= mm->n_devices || n_params <= 0)
        return;
    ss_memory_param_bytes(wdtype, opt, prec, &w, &g, &o);
    mm->weights[device] += w * (double)n_params;
    mm->stat[device] += (w + g + o / (split > 1 ? split : 1)) * (double)n_params;
}

void ss_memory_add_params_sharded(ss_memory *mm, int device, int64_t n_params, ss_dtype wdtype,
                                  ss_optimizer opt, ss_precision prec, int split)
{
    double w, g, o, n = split > 1 ? split : 1;
    if (device < 0 || device >= mm->n_devices || n_params <= 0)
        return;
    ss_memory_param_bytes(wdtype, opt, prec, &w, &g, &o);
    mm->weights[device] += w * (double)n_params / n;
    mm->stat[device] += (w + g + o) * (double)n_params / n;
}

void ss_memory_add_params(ss_memory *mm, int device, int64_t n_params, ss_dtype wdtype,
                          ss_optimizer opt, ss_precision prec)
{
    ss_memory_add_params_split(mm, device, n_params, wdtype, opt, prec, 1);
}

ss_status ss_memory_add(ss_memory *mm, const ss_mem_interval *iv, ss_diag *d)
{
    if (!(iv->bytes > 0))
        return SS_OK;
    if (iv->device < 0 || iv->device >= mm->n_devices)
        return ss_diag_set(d, SS_ERR_INVALID, "memory: device %d out of range [0, %d)",
                           iv->device, mm->n_devices);
    if (iv->alloc.task < 0 || iv->release.task < 0 || (int)iv->kind < 0 ||
        iv->kind >= SS_MEM_KIND_COUNT)
        return ss_diag_set(d, SS_ERR_INVALID, "memory: interval with a bad task id or kind");
    if (mm->n_iv == mm->cap_iv) {
        int cap = mm->cap_iv ? mm->cap_iv * 2 : 256;
        ss_mem_interval *n = ss_realloc(mm->iv, (size_t)cap * sizeof(*n));
        if (!n)
            return ss_diag_set(d, SS_ERR_NOMEM, "memory: out of memory for %d intervals", cap);
        mm->iv = n;
        mm->cap_iv = cap;
    }
    mm->iv[mm->n_iv++] = *iv;
    return SS_OK;
}

static int cmp_event(const void *pa, const void *pb)
{
    const event *a = pa, *b = pb;
    if (a->device != b->device)
        return a->device < b->device ? -1 : 1;
    if (a->time != b->time)
        return a->time < b->time ? -1 : 1;
    /* releases (negative) before allocations at the same instant */
    if ((a->delta < 0) != (b->delta < 0))
        return a->delta < 0 ? -1 : 1;
    if (a->order != b->order)
        return a->order < b->order ? -1 : 1;
    return 0;
}

static double point_time(const ss_mem_point *p, const double *start, const double *end)
{
    return p->at_end ? end[p->task] : start[p->task];
}

ss_status ss_memory_sweep(ss_memory *mm, const double *start, const double *end, double *peak,
                          ss_diag *d)
{
    int n_ev = 2 * mm->n_iv;
    if (n_ev > mm->cap_ev) {
        event *n = ss_realloc(mm->ev, (size_t)n_ev * sizeof(*n));
        if (!n)
            return ss_diag_set(d, SS_ERR_NOMEM, "memory: out of memory for %d events", n_ev);
        mm->ev = n;
        mm->cap_ev = n_ev;
    }
    n_ev = 0;
    for (int i = 0; i < mm->n_iv; i++) {
        const ss_mem_interval *iv = &mm->iv[i];
        double t0 = point_time(&iv->alloc, start, end);
        double t1 = point_time(&iv->release, start, end);
        if (!(t1 > t0))
            continue; /* zero lifetime: never coexists with anything */
        mm->ev[n_ev++] = (event){iv->device, i, t0, iv->bytes};
        mm->ev[n_ev++] = (event){iv->device, i, t1, -iv->bytes};
    }
    if (n_ev > 1)
        qsort(mm->ev, (size_t)n_ev, sizeof(event), cmp_event);
    for (int dev = 0; dev < mm->n_devices; dev++)
        peak[dev] = mm->stat[dev];
    int k = 0;
    while (k < n_ev) {
        int dev = mm->ev[k].device;
        double live = 0, best = 0;
        for (; k < n_ev && mm->ev[k].device == dev; k++) {
            live += mm->ev[k].delta;
            if (live > best)
                best = live;
        }
        peak[dev] = mm->stat[dev] + best;
    }
    return SS_OK;
}

/* Grow *p to hold n elements of size sz (capacity *cap); 0 or -1. */
static int grow(void **p, int *cap, int n, size_t sz)
{
    if (n <= *cap)
        return 0;
    void *q = ss_realloc(*p, (size_t)n * sz);
    if (!q)
        return -1;
    *p = q;
    *cap = n;
    return 0;
}

ss_status ss_memory_sweep_ranked(ss_memory *mm, const int32_t *start_rank,
                                 const int32_t *end_rank, int n_ranks, double *peak,
                                 ss_diag *d)
{
    int nd = mm->n_devices;
    if (n_ranks < 0 || n_ranks > (INT32_MAX - 1) / 2)
        return ss_diag_set(d, SS_ERR_INVALID, "memory: bad rank count %d", n_ranks);
    int nb = 2 * n_ranks + 1;
    if (grow((void **)&mm->cnt, &mm->cap_cnt, nb, sizeof *mm->cnt) ||
        grow((void **)&mm->rev, &mm->cap_rev, 2 * mm->n_iv, sizeof *mm->rev) ||
        grow((void **)&mm->live, &mm->cap_live, 2 * nd, sizeof *mm->live) ||
        grow((void **)&mm->rr, &mm->cap_rr, 2 * mm->n_iv, sizeof *mm->rr))
        return ss_diag_set(d, SS_ERR_NOMEM, "memory: out of memory for %d intervals",
                           mm->n_iv);
    /* Bucket key: 2 * rank for a release, 2 * rank + 1 for an alloc (frees
     * first at equal times). Filling buckets in interval order keeps ties in
     * interval order: the comparison sort's order exactly. */
    int32_t *cnt = mm->cnt, *rr = mm->rr;
    memset(cnt, 0, (size_t)nb * sizeof *cnt);
    for (int i = 0; i < mm->n_iv; i++) {
        const ss_mem_interval *iv = &mm->iv[i];
        int32_t r0 = iv->alloc.at_end ? end_rank[iv->alloc.task] : start_rank[iv->alloc.task];
        int32_t r1 = iv->release.at_end ? end_rank[iv->release.task]
                                        : start_rank[iv->release.task];
        rr[2 * i] = r0;
        rr[2 * i + 1] = r1;
        if (r1 <= r0)
            continue; /* zero lifetime */
        cnt[2 * r0 + 2]++;
        cnt[2 * r1 + 1]++;
    }
    for (int k = 1; k < nb; k++)
        cnt[k] += cnt[k - 1];
    int n_ev = cnt[nb - 1];
    for (int i = 0; i < mm->n_iv; i++) {
        int32_t r0 = rr[2 * i], r1 = rr[2 * i + 1];
        if (r1 <= r0)
            continue;
        const ss_mem_interval *iv = &mm->iv[i];
        mm->rev[cnt[2 * r0 + 1]++] = (rankev){iv->device, iv->bytes};
        mm->rev[cnt[2 * r1]++] = (rankev){iv->device, -iv->bytes};
    }
    /* Each device's events come in the same order as in ss_memory_sweep, so
     * its running sums are the same floating-point sums. */
    double *live = mm->live, *best = mm->live + nd;
    for (int v = 0; v < nd; v++)
        live[v] = best[v] = 0;
    for (int k = 0; k < n_ev; k++) {
        int v = mm->rev[k].device;
        live[v] += mm->rev[k].delta;
        if (live[v] > best[v])
            best[v] = live[v];
    }
    for (int v = 0; v < nd; v++)
        peak[v] = mm->stat[v] + best[v];
    return SS_OK;
}

int ss_memory_n_devices(const ss_memory *mm)
{
    return mm->n_devices;
}

int ss_memory_n_intervals(const ss_memory *mm)
{
    return mm->n_iv;
}

const ss_mem_interval *ss_memory_interval(const ss_memory *mm, int i)
{
    return &mm->iv[i];
}

double ss_memory_weight_bytes(const ss_memory *mm, int dev)
{
    return dev >= 0 && dev < mm->n_devices ? mm->weights[dev] : 0;
}

double ss_memory_static_bytes(const ss_memory *mm, int dev)
{
    return dev >= 0 && dev < mm->n_devices ? mm->stat[dev] : 0;
}

/* ---- union volume of regions ---------------------------------------- */

static int64_t volume(const ss_region *r)
{
    int64_t v = 1;
    for (int i = 0; i < r->ndim; i++)
        v *= r->r[i].hi > r->r[i].lo ? r->r[i].hi - r->r[i].lo : 0;
    return v;
}

static int cmp_i64(const void *pa, const void *pb)
{
    int64_t a = *(const int64_t *)pa, b = *(const int64_t *)pb;
    return a < b ? -1 : a > b;
}

/* Union volume of regions idx[0..n) restricted to dims dim..ndim-1.
 * scratch_idx / scratch_b hold per-level room for n indices / 2n bounds. */
static int64_t union_rec(const ss_region *rs, const int *idx, int n, int dim, int ndim,
                         int *scratch_idx, int64_t *scratch_b, int stride)
{
    if (n == 0)
        return 0;
    if (dim == ndim)
        return 1;
    int64_t *b = scratch_b;
    int nb = 0;
    for (int i = 0; i < n; i++) {
        const ss_range *r = &rs[idx[i]].r[dim];
        if (r->hi > r->lo) {
            b[nb++] = r->lo;
            b[nb++] = r->hi;
        }
    }
    if (nb == 0)
        return 0;
    qsort(b, (size_t)nb, sizeof(int64_t), cmp_i64);
    int u = 0;
    for (int i = 0; i < nb; i++)
        if (u == 0 || b[i] != b[u - 1])
            b[u++] = b[i];
    int64_t vol = 0;
    int *sub = scratch_idx;
    for (int s = 0; s + 1 < u; s++) {
        int64_t lo = b[s], hi = b[s + 1];
        int m = 0;
        for (int i = 0; i < n; i++) {
            const ss_range *r = &rs[idx[i]].r[dim];
            if (r->lo <= lo && r->hi >= hi)
                sub[m++] = idx[i];
        }
        if (m)
            vol += (hi - lo) * union_rec(rs, sub, m, dim + 1, ndim, scratch_idx + stride,
                                         scratch_b + 2 * stride, stride);
    }
    return vol;
}

int64_t ss_memory_region_union(const ss_region *rs, int n)
{
    if (n <= 0)
        return 0;
    if (n == 1)
        return volume(&rs[0]);
    int ndim = rs[0].ndim;
    /* Fast path: all regions identical (replicas, micro-batches). */
    int same = 1;
    for (int i = 1; i < n && same; i++)
        same = memcmp(&rs[i].r, &rs[0].r, (size_t)ndim * sizeof(ss_range)) == 0 &&
               rs[i].ndim == ndim;
    if (same)
        return volume(&rs[0]);
    if (ndim == 0)
        return 1;
    int levels = ndim + 1;
    int *idx = ss_malloc((size_t)n * (size_t)(levels + 1) * sizeof(int));
    int64_t *bounds = ss_malloc((size_t)2 * (size_t)n * (size_t)levels * sizeof(int64_t));
    if (!idx || !bounds) {
        ss_free(idx);
        ss_free(bounds);
        return -1;
    }
    for (int i = 0; i < n; i++)
        idx[i] = i;
    int64_t vol = union_rec(rs, idx, n, 0, ndim, idx + n, bounds, n);
    ss_free(idx);
    ss_free(bounds);
    return vol;
}
