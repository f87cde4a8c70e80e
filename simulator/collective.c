/*
 * collective.c — alpha-beta collective costs and the channels they occupy
 * (formulas and rules in collective.h).
 *
 * Invariant: between calls, every entry of r->load is 0; a phase counts the
 * hops crossing each channel in load[], reads the bottleneck, and zeroes
 * exactly the entries it touched, so a call costs O(hops), not O(channels),
 * once the arrays have grown.
 */
#include "simulator/collective.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

const char *ss_coll_kind_name(ss_coll_kind k)
{
    switch (k) {
    case SS_COLL_ALLREDUCE: return "all-reduce";
    case SS_COLL_REDUCE_SCATTER: return "reduce-scatter";
    case SS_COLL_ALLGATHER: return "all-gather";
    case SS_COLL_ALLTOALL: return "all-to-all";
    case SS_COLL_KIND_COUNT: break;
    }
    return "unknown";
}

const char *ss_coll_algo_name(ss_coll_algo a)
{
    switch (a) {
    case SS_COLL_RING: return "ring";
    case SS_COLL_TREE: return "tree";
    case SS_COLL_HIER: return "hierarchical";
    case SS_COLL_PAIRWISE: return "pairwise";
    case SS_COLL_ALGO_COUNT: break;
    }
    return "unknown";
}

double ss_coll_link_eff(const ss_link *l, double bytes)
{
    if (!l)
        return 1.0;
    double e = l->coll_eff > 0 ? l->coll_eff : 1.0;
    if (l->coll_half_bytes > 0 && bytes > 0)
        e *= bytes / (bytes + l->coll_half_bytes);
    return e;
}

/* bytes over GB/s, in us */
static double xfer(double bytes, double gbps) { return bytes / (gbps * 1e3); }

double ss_p2p_us(double bytes, double gbps, double lat_us)
{
    if (bytes <= 0)
        return 0.0;
    return lat_us + xfer(bytes, gbps);
}

double ss_coll_ring_us(ss_coll_kind kind, int n, double bytes, double gbps, double lat_us,
                       double launch_us)
{
    if (n <= 1 || bytes <= 0)
        return 0.0;
    double steps = kind == SS_COLL_ALLREDUCE ? 2.0 * (n - 1) : (double)(n - 1);
    return launch_us + steps * lat_us + steps / n * xfer(bytes, gbps);
}

static int ceil_log2(int n)
{
    int k = 0;
    while ((1 << k) < n)
        k++;
    return k;
}

double ss_coll_tree_us(int n, double bytes, double gbps, double lat_us, double launch_us)
{
    if (n <= 1 || bytes <= 0)
        return 0.0;
    return launch_us + 2.0 * ceil_log2(n) * lat_us + 2.0 * xfer(bytes, gbps);
}

double ss_coll_hier_us(int nodes, int per_node, double bytes, double intra_gbps,
                       double intra_lat_us, double inter_gbps, double inter_lat_us,
                       double launch_us)
{
    if (nodes * per_node <= 1 || bytes <= 0)
        return 0.0;
    double d = per_node, nn = nodes, t = launch_us;
    if (per_node > 1)
        t += 2.0 * ((d - 1) * intra_lat_us + (d - 1) / d * xfer(bytes, intra_gbps));
    if (nodes > 1)
        t += 2.0 * (nn - 1) * inter_lat_us + 2.0 * (nn - 1) / nn * xfer(bytes / d, inter_gbps);
    return t;
}

void ss_coll_result_clear(ss_coll_result *r)
{
    if (!r)
        return;
    ss_free(r->channels);
    ss_free(r->ring);
    ss_free(r->load);
    ss_free(r->best);
    memset(r, 0, sizeof *r);
}

/* ---- hop accounting ---- */

typedef struct acc {
    const ss_machine *m;
    ss_coll_result *r;
    ss_diag *d;
    int phase_start; /* first entry of r->channels touched by this phase */
    double lat;      /* largest hop latency in this phase */
    double bytes;    /* S, for the links' bus-bandwidth efficiency */
} acc;

static int push_channel(ss_coll_result *r, int c)
{
    if (r->n_channels == r->cap_channels) {
        int nc = r->cap_channels ? 2 * r->cap_channels : 64;
        int *p = ss_realloc(r->channels, (size_t)nc * sizeof *p);
        if (!p)
            return -1;
        r->channels = p;
        r->cap_channels = nc;
    }
    r->channels[r->n_channels++] = c;
    return 0;
}

/* Route src -> dst; count its channels in this phase (count = 0: occupy
 * only, do not load). */
static ss_status hop(acc *a, int src, int dst, int count)
{
    const int *ch;
    int n;
    if (ss_machine_route(a->m, src, dst, &ch, &n) != SS_OK)
        return ss_diag_set(a->d, SS_ERR_INVALID, "collective: device %d cannot reach device %d",
                           src, dst);
    double lat = 0;
    for (int i = 0; i < n; i++) {
        int c = ch[i];
        lat += ss_machine_channel_latency_us(a->m, c);
        if (count && a->r->load[c] == 0 && push_channel(a->r, c))
            return ss_diag_set(a->d, SS_ERR_NOMEM, "collective: out of memory");
        if (!count && push_channel(a->r, c))
            return ss_diag_set(a->d, SS_ERR_NOMEM, "collective: out of memory");
        if (count)
            a->r->load[c]++;
    }
    if (count && lat > a->lat)
        a->lat = lat;
    return SS_OK;
}

/* End a phase: the bottleneck min over loaded channels of gbps * eff_link(S)
 * / load (INFINITY if nothing was loaded); zeroes the loads. *lat gets the phase's
 * largest hop latency. */
static double phase_end(acc *a, double *lat)
{
    ss_coll_result *r = a->r;
    double b = INFINITY;
    for (int i = a->phase_start; i < r->n_channels; i++) {
        int c = r->channels[i];
        if (r->load[c] > 0) {
            double g = ss_machine_channel_gbps(a->m, c) *
                       ss_coll_link_eff(ss_machine_link(a->m, c / 2), a->bytes) / r->load[c];
            if (g < b)
                b = g;
            r->load[c] = 0;
        }
    }
    *lat = a->lat;
    a->lat = 0;
    a->phase_start = r->n_channels;
    return b;
}

/* Abandon a phase after an error: keep the zero-load invariant. */
static void phase_abort(acc *a)
{
    double lat;
    phase_end(a, &lat);
}

/* Ring order: (host, local rank, id). Insertion sort, stable and free of
 * global state (groups are small; a 1,000-device group sorts in a blink). */
static int dev_before(const ss_machine *m, int x, int y)
{
    const ss_device *a = ss_machine_device(m, x), *b = ss_machine_device(m, y);
    if (a->host != b->host)
        return a->host < b->host;
    if (a->local_rank != b->local_rank)
        return a->local_rank < b->local_rank;
    return a->id < b->id;
}

static void ring_sort(const ss_machine *m, int *v, int n)
{
    for (int i = 1; i < n; i++) {
        int x = v[i], j = i;
        while (j > 0 && dev_before(m, x, v[j - 1])) {
            v[j] = v[j - 1];
            j--;
        }
        v[j] = x;
    }
}

/* Ring over members v[0], v[stride], ... (k of them): hops i -> i+1 loaded;
 * with both_dirs the reverse hops are occupied too (not loaded). */
static ss_status ring_hops(acc *a, const int *v, int k, int stride, int both_dirs)
{
    ss_status st = SS_OK;
    if (k <= 1)
        return st;
    for (int i = 0; i < k && !st; i++)
        st = hop(a, v[i * stride], v[((i + 1) % k) * stride], 1);
    for (int i = 0; i < k && !st && both_dirs && k > 2; i++)
        st = hop(a, v[((i + 1) % k) * stride], v[i * stride], 0);
    return st;
}

/* Heap-shaped binary tree over ranks idx(0..n): parent of i is (i-1)/2;
 * both directions of every edge loaded (reduce up, broadcast down). */
static ss_status tree_hops(acc *a, const int *v, int n, int mirrored)
{
    ss_status st = SS_OK;
    for (int i = 1; i < n && !st; i++) {
        int c = mirrored ? v[n - 1 - i] : v[i];
        int p = mirrored ? v[n - 1 - (i - 1) / 2] : v[(i - 1) / 2];
        st = hop(a, c, p, 1);
        if (!st)
            st = hop(a, p, c, 1);
    }
    return st;
}

/* Hosts of the ring-ordered group: *nodes hosts with *per members each, or
 * *per = 0 when hosts hold different counts. */
static void host_shape(const ss_machine *m, const int *v, int n, int *nodes, int *per)
{
    int nh = 0, cur = 0, per0 = -1, uniform = 1;
    for (int i = 0; i < n; i++) {
        cur++;
        if (i + 1 == n || ss_machine_device(m, v[i + 1])->host != ss_machine_device(m, v[i])->host) {
            if (per0 < 0)
                per0 = cur;
            else if (cur != per0)
                uniform = 0;
            nh++;
            cur = 0;
        }
    }
    *nodes = nh;
    *per = uniform ? per0 : 0;
}

static int finite_pos(double x) { return isfinite(x) && x > 0; }

static int int_cmp(const void *x, const void *y)
{
    int a = *(const int *)x, b = *(const int *)y;
    return (a > b) - (a < b);
}

/* Cost one algorithm: fill the channels of this algorithm into r (from
 * position 0) and return its time, or -1 when not applicable. */
static ss_status cost_algo(acc *a, ss_coll_kind kind, ss_coll_algo algo, const int *v, int n,
                           double bytes, double launch, double *time, double *gbps,
                           double *lat_out)
{
    ss_coll_result *r = a->r;
    ss_status st = SS_OK;
    double lat = 0, b = INFINITY;
    r->n_channels = 0;
    a->phase_start = 0;
    a->lat = 0;
    *time = -1;
    switch (algo) {
    case SS_COLL_RING:
        if (kind == SS_COLL_ALLTOALL)
            return SS_OK;
        st = ring_hops(a, v, n, 1, kind == SS_COLL_ALLREDUCE);
        if (st)
            break;
        b = phase_end(a, &lat);
        *time = ss_coll_ring_us(kind, n, bytes, b, lat, launch);
        break;
    case SS_COLL_TREE:
        if (kind != SS_COLL_ALLREDUCE || n < 3)
            return SS_OK;
        st = tree_hops(a, v, n, 0);
        if (!st)
            st = tree_hops(a, v, n, 1);
        if (st)
            break;
        b = phase_end(a, &lat);
        *time = ss_coll_tree_us(n, bytes, b, lat, launch);
        break;
    case SS_COLL_HIER: {
        int nodes, per;
        host_shape(a->m, v, n, &nodes, &per);
        if (kind != SS_COLL_ALLREDUCE || nodes < 2 || per < 2)
            return SS_OK;
        /* intra-node rings, all hosts at once */
        for (int h = 0; h < nodes && !st; h++)
            st = ring_hops(a, v + h * per, per, 1, 1);
        if (st)
            break;
        double lat_i, b_i = phase_end(a, &lat_i);
        /* inter-node rings, one per local index, concurrent */
        for (int k = 0; k < per && !st; k++)
            st = ring_hops(a, v + k, nodes, per, 1);
        if (st)
            break;
        b = phase_end(a, &lat);
        *time = ss_coll_hier_us(nodes, per, bytes, b_i, lat_i, b, lat, launch);
        break;
    }
    case SS_COLL_PAIRWISE:
        if (kind != SS_COLL_ALLTOALL)
            return SS_OK;
        for (int i = 0; i < n && !st; i++)
            for (int j = 0; j < n && !st; j++)
                if (i != j)
                    st = hop(a, v[i], v[j], 1);
        if (st)
            break;
        b = phase_end(a, &lat);
        /* B_eff = (n-1) * min_c(bw_c / pairs_c): see collective.h */
        b *= (n - 1);
        *time = ss_coll_ring_us(SS_COLL_REDUCE_SCATTER, n, bytes, b, lat, launch);
        break;
    case SS_COLL_ALGO_COUNT:
        return SS_OK;
    }
    if (st) {
        phase_abort(a);
        return st;
    }
    if (*time >= 0 && !finite_pos(b))
        return ss_diag_set(a->d, SS_ERR_INVALID,
                           "collective: %s %s uses a channel of zero bandwidth",
                           ss_coll_kind_name(kind), ss_coll_algo_name(algo));
    *gbps = b;
    *lat_out = lat;
    return SS_OK;
}

/* Exchange the channel buffer with the best candidate's (with capacities). */
static void swap_channels(ss_coll_result *r)
{
    int *p = r->channels, c = r->cap_channels;
    r->channels = r->best;
    r->cap_channels = r->cap_best;
    r->best = p;
    r->cap_best = c;
}

ss_status ss_coll_cost(const ss_machine *m, ss_coll_kind kind, const int *devices, int n,
                       double bytes, const ss_coll_config *cfg, ss_coll_result *out, ss_diag *d)
{
    double launch = cfg ? cfg->launch_us : ss_machine_collective_launch_us(m);
    unsigned algos = cfg && cfg->algos ? cfg->algos : ~0u;
    int nd = ss_machine_n_devices(m);
    if ((unsigned)kind >= SS_COLL_KIND_COUNT)
        return ss_diag_set(d, SS_ERR_INVALID, "collective: invalid kind %d", (int)kind);
    if (n < 1 || !isfinite(bytes) || bytes < 0 || !isfinite(launch) || launch < 0)
        return ss_diag_set(d, SS_ERR_INVALID,
                           "collective: invalid group size %d, size %g bytes or configuration",
                           n, bytes);
    int nch = 2 * ss_machine_n_links(m);
    if (ss_grow((void **)&out->ring, &out->cap_ring, n, sizeof *out->ring))
        return ss_diag_set(d, SS_ERR_NOMEM, "collective: out of memory");
    if (nch > out->cap_load) {
        int old = out->cap_load;
        if (ss_grow((void **)&out->load, &out->cap_load, nch, sizeof *out->load))
            return ss_diag_set(d, SS_ERR_NOMEM, "collective: out of memory");
        memset(out->load + old, 0, (size_t)(out->cap_load - old) * sizeof *out->load);
    }
    for (int i = 0; i < n; i++) {
        if (devices[i] < 0 || devices[i] >= nd)
            return ss_diag_set(d, SS_ERR_INVALID, "collective: device %d out of range [0, %d)",
                               devices[i], nd);
        out->ring[i] = devices[i];
    }
    int *v = out->ring;
    ring_sort(m, v, n);
    for (int i = 1; i < n; i++)
        if (v[i] == v[i - 1])
            return ss_diag_set(d, SS_ERR_INVALID, "collective: device %d listed twice", v[i]);

    for (int k = 0; k < SS_COLL_ALGO_COUNT; k++)
        out->algo_us[k] = -1;
    out->n_channels = 0;
    if (n == 1 || bytes == 0) {
        out->time_us = 0;
        out->algo = kind == SS_COLL_ALLTOALL ? SS_COLL_PAIRWISE : SS_COLL_RING;
        out->algo_us[out->algo] = 0;
        out->gbps = INFINITY;
        out->lat_us = 0;
        return SS_OK;
    }
    acc a = {m, out, d, 0, 0, bytes};
    int best = -1;
    double best_t = 0, best_b = 0, best_lat = 0;
    for (int k = 0; k < SS_COLL_ALGO_COUNT; k++) {
        if (!(algos & (1u << k)))
            continue;
        double t, b = 0, lat = 0;
        ss_status st =
            cost_algo(&a, kind, (ss_coll_algo)k, v, n, bytes, launch, &t, &b, &lat);
        if (st)
            return st;
        out->algo_us[k] = t;
        if (t >= 0 && (best < 0 || t < best_t)) {
            best = k;
            best_t = t;
            best_b = b;
            best_lat = lat;
            swap_channels(out); /* keep its channels; the next candidate writes the other buffer */
            out->n_best = out->n_channels;
        }
    }
    if (best < 0)
        return ss_diag_set(d, SS_ERR_INVALID, "collective: no allowed algorithm for %s over %d devices",
                           ss_coll_kind_name(kind), n);
    swap_channels(out);
    out->n_channels = out->n_best;
    /* sorted, unique: repeats dropped first (a ring's steps pass the same
     * channels again and again) with the loads, zero between phases, as
     * marks (zeroed again), then the rest sorted, or read off the marks in
     * channel order when they are many */
    int u = 0;
    for (int i = 0; i < out->n_channels; i++) {
        int c = out->channels[i];
        if (!out->load[c]) {
            out->load[c] = 1;
            out->channels[u++] = c;
        }
    }
    if ((int64_t)u * 16 > nch) {
        u = 0;
        for (int c = 0; c < nch; c++)
            if (out->load[c]) {
                out->load[c] = 0;
                out->channels[u++] = c;
            }
    } else {
        for (int i = 0; i < u; i++)
            out->load[out->channels[i]] = 0;
        qsort(out->channels, (size_t)u, sizeof *out->channels, int_cmp);
    }
    out->n_channels = u;
    out->time_us = best_t;
    out->algo = (ss_coll_algo)best;
    out->gbps = best_b;
    out->lat_us = best_lat;
    return SS_OK;
}
