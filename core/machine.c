/*
 * machine.c — the ss_machine object: accessors, routing and fingerprint.
 *
 * Network model: nodes are devices (ids 0..n_devices-1), then switches and
 * NICs. A link is full duplex: channel 2*l carries a->b, 2*l+1 carries b->a;
 * a direction of bandwidth 0 does not exist.
 *
 * Routing rules (docs/topology-format.md, "Routing"):
 *   - A route minimises, in this order: the number of devices it passes
 *     through (devices do not forward traffic while a path over switches and
 *     NICs exists), the summed latency (compared in integer nanoseconds, so
 *     equal-latency paths tie exactly), the hop count; remaining ties go to
 *     the predecessor with the lowest node id. Dijkstra with that
 *     lexicographic key.
 *   - Firewalls: two internet peers that both refuse incoming connections
 *     cannot talk directly. Their traffic is relayed through the device that
 *     accepts connections with the lowest route latency src->relay->dst (then
 *     the lowest id); with no such device the pair is unreachable.
 * A machine of identical hosts has route classes (core/routeclass.h): its
 * routes are translations of the routes of host 0's devices, computed once
 * at load, so no search runs per source.
 * Routes are cached per (src, dst) pair in an open-addressing table whose
 * channel lists live in chunks that never move, so a pointer returned by
 * ss_machine_route stays valid for the machine's lifetime. Machines of at most
 * EAGER_DEVICES devices have every route computed at load time, so route
 * queries on them are read-only (safe from several threads); larger machines
 * fill the cache on demand (one thread per machine at a time).
 */
#include "machine_impl.h"
#include "json_util.h"
#include "routeclass.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define EAGER_DEVICES 256
#define CHUNK_INTS 65536
#define EMPTY_KEY UINT64_MAX

static const int no_channels[1] = {0};

ss_machine *ss_machine_alloc(int n_types, int n_hosts, int n_devices, int n_nodes, int n_links)
{
    ss_machine *m = ss_calloc(1, sizeof *m);
    if (!m)
        return NULL;
    m->n_types = n_types;
    m->n_hosts = n_hosts;
    m->n_devices = n_devices;
    m->n_nodes = n_nodes;
    m->n_links = n_links;
    for (int i = 0; i < SS_MACHINE_TREES; i++)
        m->trees[i].src = -1;
    m->tree_budget = SS_MACHINE_TREE_BYTES;
    m->types = ss_calloc((size_t)n_types, sizeof *m->types);
    m->hosts = ss_calloc((size_t)n_hosts, sizeof *m->hosts);
    m->devices = ss_calloc((size_t)n_devices, sizeof *m->devices);
    m->nodes = ss_calloc((size_t)n_nodes, sizeof *m->nodes);
    m->links = ss_calloc((size_t)n_links, sizeof *m->links);
    m->peers = ss_calloc((size_t)n_devices, sizeof *m->peers);
    if (!m->types || !m->hosts || !m->devices || !m->nodes || !m->links || !m->peers) {
        ss_machine_free(m);
        return NULL;
    }
    for (int i = 0; i < n_types; i++) /* the one figure whose 0 is not its default */
        m->types[i].collective_launch_us = SS_COLL_LAUNCH_US_DEFAULT;
    return m;
}

/* The shortest-path trees: partial ones, complete ones, the route scratch. */
static void free_trees(ss_machine *m)
{
    for (int i = 0; i < SS_MACHINE_TREES; i++) {
        ss_sptree *t = &m->trees[i];
        ss_free(t->pred);
        ss_free(t->heap);
        ss_free(t->pos);
        ss_free(t->stamp);
        memset(t, 0, sizeof *t);
        t->src = -1;
    }
    if (m->done)
        for (int i = 0; i < m->n_devices; i++)
            ss_free(m->done[i]);
    ss_free(m->done);
    ss_free(m->started);
    ss_free(m->rbuf);
    m->done = NULL;
    m->started = NULL;
    m->done_bytes = 0;
    m->rbuf = NULL;
}

/* Free a machine and everything it owns; NULL is a no-op. */
void ss_machine_free(ss_machine *m)
{
    if (!m)
        return;
    ss_free(m->types);
    ss_free(m->hosts);
    ss_free(m->devices);
    ss_free(m->nodes);
    ss_free(m->links);
    ss_free(m->peers);
    ss_free(m->adj_off);
    ss_free(m->adj_ch);
    ss_free(m->adj_to);
    ss_free(m->adj_ns);
    ss_free(m->slots);
    for (route_chunk *c = m->chunks, *next; c; c = next) {
        next = c->next;
        ss_free(c);
    }
    free_trees(m);
    ss_routeclass_free(m->rc);
    ss_free(m);
}

/* ---- accessors (borrowed pointers, NULL when out of range) ---- */

const char *ss_machine_name(const ss_machine *m) { return m->name; }
int ss_machine_n_devices(const ss_machine *m) { return m->n_devices; }
int ss_machine_n_hosts(const ss_machine *m) { return m->n_hosts; }
int ss_machine_n_types(const ss_machine *m) { return m->n_types; }
int ss_machine_n_nodes(const ss_machine *m) { return m->n_nodes; }
int ss_machine_n_links(const ss_machine *m) { return m->n_links; }
uint64_t ss_machine_fingerprint(const ss_machine *m) { return m->fingerprint; }

double ss_machine_collective_launch_us(const ss_machine *m)
{
    double us = 0;
    for (int i = 0; i < m->n_devices; i++)
        if (m->types[m->devices[i].type].collective_launch_us > us)
            us = m->types[m->devices[i].type].collective_launch_us;
    return us;
}

const ss_device *ss_machine_device(const ss_machine *m, int i)
{
    return i >= 0 && i < m->n_devices ? &m->devices[i] : NULL;
}

const ss_device_type *ss_machine_type(const ss_machine *m, int i)
{
    return i >= 0 && i < m->n_types ? &m->types[i] : NULL;
}

const ss_host *ss_machine_host(const ss_machine *m, int i)
{
    return i >= 0 && i < m->n_hosts ? &m->hosts[i] : NULL;
}

const ss_netnode *ss_machine_node(const ss_machine *m, int i)
{
    return i >= 0 && i < m->n_nodes ? &m->nodes[i] : NULL;
}

const ss_link *ss_machine_link(const ss_machine *m, int i)
{
    return i >= 0 && i < m->n_links ? &m->links[i] : NULL;
}

/* ---- channels ---- */

static int ch_from(const ss_machine *m, int c)
{
    const ss_link *l = &m->links[c >> 1];
    return (c & 1) ? l->b : l->a;
}

static int ch_to(const ss_machine *m, int c)
{
    const ss_link *l = &m->links[c >> 1];
    return (c & 1) ? l->a : l->b;
}

/* Bandwidth in GB/s of channel c (0 if out of range or nonexistent). */
double ss_machine_channel_gbps(const ss_machine *m, int channel)
{
    if (channel < 0 || channel >= 2 * m->n_links)
        return 0.0;
    const ss_link *l = &m->links[channel >> 1];
    return (channel & 1) ? l->gbps_ba : l->gbps_ab;
}

/* Latency in us of channel c (both directions share the link's latency). */
double ss_machine_channel_latency_us(const ss_machine *m, int channel)
{
    if (channel < 0 || channel >= 2 * m->n_links)
        return 0.0;
    return m->links[channel >> 1].latency_us;
}

static int64_t lat_ns(const ss_machine *m, int c)
{
    return (int64_t)llround(m->links[c >> 1].latency_us * 1000.0);
}

/* ---- finishing a loaded machine ---- */

static ss_status build_adjacency(ss_machine *m, ss_diag *d)
{
    m->adj_off = ss_calloc((size_t)m->n_nodes + 1, sizeof *m->adj_off);
    m->adj_ch = ss_calloc((size_t)m->n_links * 2 + 1, sizeof *m->adj_ch);
    m->adj_to = ss_calloc((size_t)m->n_links * 2 + 1, sizeof *m->adj_to);
    m->adj_ns = ss_calloc((size_t)m->n_links * 2 + 1, sizeof *m->adj_ns);
    if (!m->adj_off || !m->adj_ch || !m->adj_to || !m->adj_ns)
        return ss_diag_set(d, SS_ERR_NOMEM, "out of memory building the network");
    for (int c = 0; c < 2 * m->n_links; c++)
        if (ss_machine_channel_gbps(m, c) > 0)
            m->adj_off[ch_from(m, c) + 1]++;
    for (int u = 0; u < m->n_nodes; u++)
        m->adj_off[u + 1] += m->adj_off[u];
    int *fillp = ss_calloc((size_t)m->n_nodes, sizeof *fillp);
    if (!fillp)
        return ss_diag_set(d, SS_ERR_NOMEM, "out of memory building the network");
    for (int c = 0; c < 2 * m->n_links; c++)
        if (ss_machine_channel_gbps(m, c) > 0) {
            int u = ch_from(m, c), k = m->adj_off[u] + fillp[u]++;
            m->adj_ch[k] = c;
            m->adj_to[k] = ch_to(m, c);
            m->adj_ns[k] = lat_ns(m, c);
        }
    ss_free(fillp);
    return SS_OK;
}

/* Every device must reach device 0 and be reached from it, so that all
 * pairs are connected through it (firewall rules aside). Two breadth-first
 * searches from node 0: over channels forwards, then over reversed channels. */
static ss_status check_connected(ss_machine *m, const char *file, ss_diag *d)
{
    if (m->n_devices <= 1)
        return SS_OK;
    size_t nn = (size_t)m->n_nodes, nch = (size_t)m->adj_off[m->n_nodes];
    unsigned char *seen = ss_malloc(nn);
    int *queue = ss_calloc(nn, sizeof *queue);
    int *roff = ss_calloc(nn + 1, sizeof *roff);
    int *rch = ss_calloc(nch + 1, sizeof *rch);
    int *rfill = ss_calloc(nn, sizeof *rfill);
    ss_status st = SS_OK;
    if (!seen || !queue || !roff || !rch || !rfill) {
        st = ss_diag_set(d, SS_ERR_NOMEM, "out of memory checking connectivity");
        goto out;
    }
    for (size_t k = 0; k < nch; k++)
        roff[ch_to(m, m->adj_ch[k]) + 1]++;
    for (size_t u = 0; u < nn; u++)
        roff[u + 1] += roff[u];
    for (size_t k = 0; k < nch; k++) {
        int v = ch_to(m, m->adj_ch[k]);
        rch[roff[v] + rfill[v]++] = m->adj_ch[k];
    }
    for (int dir = 0; dir < 2 && !st; dir++) {
        const int *off = dir ? roff : m->adj_off, *chs = dir ? rch : m->adj_ch;
        int head = 0, tail = 0;
        memset(seen, 0, nn);
        seen[0] = 1;
        queue[tail++] = 0;
        while (head < tail) {
            int u = queue[head++];
            for (int k = off[u]; k < off[u + 1]; k++) {
                int v = dir ? ch_from(m, chs[k]) : ch_to(m, chs[k]);
                if (!seen[v]) {
                    seen[v] = 1;
                    queue[tail++] = v;
                }
            }
        }
        for (int i = 1; i < m->n_devices; i++)
            if (!seen[i]) {
                st = ss_diag_set(d, SS_ERR_INVALID,
                                 dir ? "%s: device \"%s\" cannot reach device \"%s\" "
                                       "(links missing in that direction)"
                                     : "%s: device \"%s\" is unreachable from device \"%s\" "
                                       "(no path of links)",
                                 file, m->devices[i].name, m->devices[0].name);
                break;
            }
    }
out:
    ss_free(seen);
    ss_free(queue);
    ss_free(roff);
    ss_free(rch);
    ss_free(rfill);
    return st;
}

static uint64_t compute_fingerprint(const ss_machine *m)
{
    uint64_t h = ss_fnv_str(SS_FNV_INIT, "simsearch-topology/1");
    h = ss_fnv_i64(h, m->n_types);
    for (int i = 0; i < m->n_types; i++) {
        const ss_device_type *t = &m->types[i];
        h = ss_fnv_i64(h, t->is_cpu);
        for (int k = 0; k < SS_F8; k++)
            h = ss_fnv_f64(h, t->peak_tflops[k]);
        if (t->peak_tflops[SS_F8] != 0) /* only when set: older types keep their prints */
            h = ss_fnv_f64(h, t->peak_tflops[SS_F8]);
        h = ss_fnv_f64(h, t->mem_gbps);
        h = ss_fnv_f64(h, t->mem_gib);
        h = ss_fnv_f64(h, t->launch_us);
        h = ss_fnv_i64(h, t->n_eff_flops);
        for (int k = 0; k < t->n_eff_flops; k++) {
            h = ss_fnv_f64(h, t->eff_flops_x[k]);
            h = ss_fnv_f64(h, t->eff_flops_y[k]);
        }
        h = ss_fnv_i64(h, t->n_eff_mem);
        for (int k = 0; k < t->n_eff_mem; k++) {
            h = ss_fnv_f64(h, t->eff_mem_x[k]);
            h = ss_fnv_f64(h, t->eff_mem_y[k]);
        }
        /* only when set, so machines without it keep their fingerprints */
        if (t->eff_align[0] != 1 || t->eff_align[1] != 1 || t->eff_align[2] != 1)
            for (int k = 0; k < 3; k++)
                h = ss_fnv_f64(h, t->eff_align[k]);
        if (t->mb_overhead_us != 0) /* likewise */
            h = ss_fnv_f64(ss_fnv_str(h, "mb_overhead_us"), t->mb_overhead_us);
        if (t->dispatch_window != 1)
            h = ss_fnv_i64(ss_fnv_str(h, "dispatch_window"), t->dispatch_window);
        if (t->collective_launch_us != SS_COLL_LAUNCH_US_DEFAULT) /* likewise */
            h = ss_fnv_f64(ss_fnv_str(h, "collective_launch_us"), t->collective_launch_us);
        if (t->comm_blocks_compute) /* likewise */
            h = ss_fnv_i64(ss_fnv_str(h, "comm_blocks_compute"), 1);
    }
    h = ss_fnv_i64(h, m->n_hosts);
    h = ss_fnv_i64(h, m->n_devices);
    for (int i = 0; i < m->n_devices; i++) {
        const ss_device *dv = &m->devices[i];
        h = ss_fnv_i64(h, dv->type);
        h = ss_fnv_i64(h, dv->host);
        h = ss_fnv_f64(h, dv->up_gbps);
        h = ss_fnv_f64(h, dv->down_gbps);
        h = ss_fnv_i64(h, dv->accepts_connections);
    }
    h = ss_fnv_i64(h, m->n_nodes);
    for (int i = m->n_devices; i < m->n_nodes; i++) {
        h = ss_fnv_i64(h, m->nodes[i].kind);
        h = ss_fnv_i64(h, m->nodes[i].host);
    }
    h = ss_fnv_i64(h, m->n_links);
    for (int i = 0; i < m->n_links; i++) {
        const ss_link *l = &m->links[i];
        h = ss_fnv_i64(h, l->a);
        h = ss_fnv_i64(h, l->b);
        h = ss_fnv_f64(h, l->gbps_ab);
        h = ss_fnv_f64(h, l->gbps_ba);
        h = ss_fnv_f64(h, l->latency_us);
        h = ss_fnv_i64(h, l->estimated);
        h = ss_fnv_str(h, l->kind);
        /* only when set, so machines without them keep their fingerprints */
        if ((l->coll_eff > 0 && l->coll_eff != 1.0) || l->coll_half_bytes > 0) {
            h = ss_fnv_f64(h, l->coll_eff);
            h = ss_fnv_f64(h, l->coll_half_bytes);
        }
    }
    return h;
}

static ss_status route_pair(ss_machine *m, int src, int dst, const int **ch, int *n, ss_diag *d);

ss_status ss_machine_finish(ss_machine *m, const char *file, ss_diag *d)
{
    int *count = ss_calloc((size_t)m->n_hosts, sizeof *count);
    if (!count)
        return ss_diag_set(d, SS_ERR_NOMEM, "out of memory");
    m->n_peers = 0;
    for (int i = 0; i < m->n_devices; i++) {
        ss_device *dv = &m->devices[i];
        dv->id = i;
        dv->local_rank = count[dv->host]++;
        if (m->peers[i].is_peer) {
            const ss_link *l = &m->links[m->peers[i].link];
            dv->up_gbps = l->a == i ? l->gbps_ab : l->gbps_ba;
            dv->down_gbps = l->a == i ? l->gbps_ba : l->gbps_ab;
            m->n_peers++;
        } else {
            dv->up_gbps = dv->down_gbps = 0;
            dv->accepts_connections = 1;
        }
    }
    ss_free(count);
    for (int i = 0; i < m->n_links; i++)
        m->links[i].id = i;
    ss_status st = build_adjacency(m, d);
    if (st)
        return st;
    st = check_connected(m, file, d);
    if (st)
        return st;
    m->fingerprint = compute_fingerprint(m);
    ss_routeclass_free(m->rc);
    if (ss_routeclass_build(m, &m->rc) != SS_OK)
        return ss_diag_set(d, SS_ERR_NOMEM, "%s: out of memory for route classes", file);
    if (m->n_devices <= EAGER_DEVICES) {
        for (int s = 0; s < m->n_devices; s++)
            for (int t = 0; t < m->n_devices; t++) {
                const int *ch;
                int n;
                st = route_pair(m, s, t, &ch, &n, d);
                if (st && st != SS_ERR_INVALID) /* unreachable pairs are cached too */
                    return st;
            }
        free_trees(m); /* every answer is in the cache now */
    }
    return SS_OK;
}

/* ---- Dijkstra ---- */

#define KEY_ID_BITS 19
#define KEY_ID_MASK ((UINT64_C(1) << KEY_ID_BITS) - 1)
_Static_assert(SS_MACHINE_MAX_NODES <= (1 << KEY_ID_BITS) && SS_MACHINE_MAX_DEVICES < (1 << 17),
               "route keys (ss_hent) hold node ids and hops in 19 bits, forwards in 17");

static ss_hent key_pack(int fwd, int64_t lat, int hops, int v)
{
    ss_hent e;
    e.hi = (uint64_t)fwd << 47 | (uint64_t)lat >> 7;
    e.lo = ((uint64_t)lat & 127) << 38 | (uint64_t)hops << KEY_ID_BITS | (uint64_t)v;
    return e;
}

static int key_node(const ss_hent *e) { return (int)(e->lo & KEY_ID_MASK); }

/* Is entry a before entry b (keys, then node ids)? */
static int ent_less(const ss_hent *a, const ss_hent *b)
{
    return a->hi != b->hi ? a->hi < b->hi : a->lo < b->lo;
}

/* Move entry e up from the hole at i to its place. (Entries are copied
 * through locals: reading a node id back from an entry just stored costs a
 * failed store-to-load forwarding.) */
static void sift_up(ss_sptree *t, int i, ss_hent e)
{
    ss_hent *h = t->heap;
    int *pos = t->pos;
    while (i > 0) {
        int p = (i - 1) / 2;
        ss_hent c = h[p];
        if (!ent_less(&e, &c))
            break;
        h[i] = c;
        pos[key_node(&c)] = i;
        i = p;
    }
    h[i] = e;
    pos[key_node(&e)] = i;
}

/* Move entry e down from the hole at i to its place. */
static void sift_down(ss_sptree *t, int i, ss_hent e)
{
    ss_hent *h = t->heap;
    int *pos = t->pos, n = t->hn;
    for (;;) {
        int s = 2 * i + 1;
        if (s >= n)
            break;
        if (s + 1 < n && ent_less(&h[s + 1], &h[s]))
            s++;
        ss_hent c = h[s];
        if (!ent_less(&c, &e))
            break;
        h[i] = c;
        pos[key_node(&c)] = i;
        i = s;
    }
    h[i] = e;
    pos[key_node(&e)] = i;
}

static void grow_until(const ss_machine *m, ss_sptree *t, int dst, int whole);
static int keep_tree(ss_machine *m, ss_sptree *t);

/* The tree of source src: an existing one, or the least recently used slot
 * restarted from src (*fresh = 1). A tree evicted with more than half of
 * the nodes settled is finished and kept first (its source would otherwise
 * start again from nothing when asked again). NULL on allocation failure. */
static ss_sptree *tree_for(ss_machine *m, int src, int *fresh)
{
    ss_sptree *t = NULL;
    *fresh = 0;
    for (int i = 0; i < SS_MACHINE_TREES && !t; i++)
        if (m->trees[i].src == src)
            t = &m->trees[i];
    if (!t) {
        t = &m->trees[0];
        for (int i = 1; i < SS_MACHINE_TREES; i++)
            if (m->trees[i].used < t->used)
                t = &m->trees[i];
        size_t nn = (size_t)m->n_nodes;
        if (t->src >= 0 && (size_t)t->settled * 2 > nn &&
            m->done_bytes + nn * sizeof(int) <= m->tree_budget) {
            grow_until(m, t, t->src, 1);
            if (keep_tree(m, t))
                return NULL;
        }
        /* arrays a failed attempt left allocated are kept for the next one */
        if (!t->pred)
            t->pred = ss_calloc(nn, sizeof *t->pred);
        if (!t->heap)
            t->heap = ss_calloc(nn, sizeof *t->heap);
        if (!t->pos)
            t->pos = ss_calloc(nn, sizeof *t->pos);
        if (!t->stamp)
            t->stamp = ss_calloc(nn, sizeof *t->stamp);
        if (!t->pred || !t->heap || !t->pos || !t->stamp)
            return NULL; /* the slot keeps its old tree, or stays unused */
        if (++t->gen == 0) { /* wrapped: clear the stamps once */
            memset(t->stamp, 0, nn * sizeof *t->stamp);
            t->gen = 1;
        }
        t->src = src;
        t->stamp[src] = t->gen;
        t->pred[src] = -1;
        t->heap[0] = key_pack(0, 0, 0, src);
        t->pos[src] = 0;
        t->hn = 1;
        t->settled = 0;
        *fresh = 1;
    }
    t->used = ++m->tick;
    return t;
}

/* First sight of v in this tree: reached by nothing yet. */
static void touch(ss_sptree *t, int v)
{
    if (t->stamp[v] == t->gen)
        return;
    t->stamp[v] = t->gen;
    t->pred[v] = -1;
    t->pos[v] = -1;
}

/* Grow tree t until dst is settled (whole: until the frontier is empty).
 * A settled node's key and predecessor are final: every node that could
 * offer it an equal key has a strictly smaller key (hops grow by one per
 * channel), so it was settled first; the lowest-id optimal predecessor wins
 * ties. The tree therefore does not depend on the order in which equal keys
 * leave the heap, nor on where earlier queries stopped it. */
static void grow_until(const ss_machine *m, ss_sptree *t, int dst, int whole)
{
    touch(t, dst);
    while (t->hn > 0 && (whole || t->pos[dst] != -2)) {
        ss_hent top = t->heap[0];
        int u = key_node(&top);
        if (--t->hn > 0)
            sift_down(t, 0, t->heap[t->hn]);
        t->pos[u] = -2;
        t->settled++;
        int fwd = (int)(top.hi >> 47) + (u != t->src && u < m->n_devices ? 1 : 0);
        int64_t lat = (int64_t)((top.hi & ((UINT64_C(1) << 47) - 1)) << 7 | top.lo >> 38);
        int hops = (int)((top.lo >> KEY_ID_BITS) & KEY_ID_MASK) + 1;
        for (int k = m->adj_off[u]; k < m->adj_off[u + 1]; k++) {
            int v = m->adj_to[k];
            touch(t, v);
            int pv = t->pos[v];
            if (pv == -2)
                continue;
            ss_hent nk = key_pack(fwd, lat + m->adj_ns[k], hops, v);
            if (pv >= 0) {
                const ss_hent *ok = &t->heap[pv]; /* same node id as nk */
                int same = nk.hi == ok->hi && nk.lo == ok->lo;
                /* equal keys: the lower-id predecessor (its first channel) */
                if (same ? u >= ch_from(m, t->pred[v]) : !ent_less(&nk, ok))
                    continue;
                t->pred[v] = m->adj_ch[k];
                sift_up(t, pv, nk);
            } else {
                t->pred[v] = m->adj_ch[k];
                sift_up(t, t->hn++, nk);
            }
        }
    }
}

/* Keep the complete tree t (its frontier is empty) as done[t->src] and free
 * its slot (nothing past m->tree_budget). -1 on allocation failure. */
static int keep_tree(ss_machine *m, ss_sptree *t)
{
    size_t nn = (size_t)m->n_nodes, bytes = nn * sizeof(int);
    if (m->done_bytes + bytes > m->tree_budget)
        return 0;
    int *pred = ss_malloc(bytes);
    if (!pred)
        return -1;
    for (size_t v = 0; v < nn; v++)
        pred[v] = t->stamp[v] == t->gen ? t->pred[v] : -1;
    m->done[t->src] = pred;
    m->done_bytes += bytes;
    t->src = -1;
    t->used = 0;
    return 0;
}

/* ---- route cache ---- */

static uint64_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return x;
}

static route_slot *slot_find(const ss_machine *m, uint64_t key)
{
    if (!m->n_slots)
        return NULL;
    size_t mask = m->n_slots - 1;
    for (size_t i = mix(key) & mask;; i = (i + 1) & mask) {
        if (m->slots[i].key == key)
            return &m->slots[i];
        if (m->slots[i].key == EMPTY_KEY)
            return NULL;
    }
}

static int slots_grow(ss_machine *m)
{
    size_t n = m->n_slots ? 2 * m->n_slots : 1024;
    route_slot *s = ss_malloc(n * sizeof *s);
    if (!s)
        return -1;
    for (size_t i = 0; i < n; i++)
        s[i].key = EMPTY_KEY;
    for (size_t i = 0; i < m->n_slots; i++) {
        if (m->slots[i].key == EMPTY_KEY)
            continue;
        size_t j = mix(m->slots[i].key) & (n - 1);
        while (s[j].key != EMPTY_KEY)
            j = (j + 1) & (n - 1);
        s[j] = m->slots[i];
    }
    ss_free(m->slots);
    m->slots = s;
    m->n_slots = n;
    return 0;
}

/* Room for k ints in the chunk list; NULL on allocation failure. */
static int *chunk_take(ss_machine *m, size_t k)
{
    route_chunk *c = m->chunks;
    if (!c || c->cap - c->used < k) {
        size_t cap = k > CHUNK_INTS ? k : CHUNK_INTS;
        route_chunk *nc = ss_malloc(sizeof *nc + cap * sizeof(int));
        if (!nc)
            return NULL;
        nc->next = m->chunks;
        nc->used = 0;
        nc->cap = cap;
        m->chunks = nc;
        c = nc;
    }
    int *p = c->data + c->used;
    c->used += k;
    return p;
}

static ss_status store(ss_machine *m, uint64_t key, const int *ch, int n, route_slot **out,
                       ss_diag *d)
{
    if ((m->used_slots + 1) * 2 > m->n_slots && slots_grow(m))
        return ss_diag_set(d, SS_ERR_NOMEM, "out of memory for routes");
    const int *kept = no_channels;
    if (n > 0) {
        int *p = chunk_take(m, (size_t)n);
        if (!p)
            return ss_diag_set(d, SS_ERR_NOMEM, "out of memory for routes");
        memcpy(p, ch, (size_t)n * sizeof *p);
        kept = p;
    }
    size_t mask = m->n_slots - 1, j = mix(key) & mask;
    while (m->slots[j].key != EMPTY_KEY)
        j = (j + 1) & mask;
    m->slots[j].key = key;
    m->slots[j].ch = kept;
    m->slots[j].n = n;
    m->used_slots++;
    *out = &m->slots[j];
    return SS_OK;
}

/* The route src->dst along pred (channel into each node) into buf;
 * returns its length, -1 if dst is unreachable. */
static int walk(const ss_machine *m, const int *pred, int src, int dst, int *buf)
{
    if (pred[dst] < 0)
        return -1;
    int n = 0;
    for (int v = dst; v != src; v = ch_from(m, pred[v]))
        buf[n++] = pred[v];
    for (int i = 0; i < n / 2; i++) {
        int tmp = buf[i];
        buf[i] = buf[n - 1 - i];
        buf[n - 1 - i] = tmp;
    }
    return n;
}

/* The direct (non-relayed) route src->dst into buf (n_nodes ints);
 * returns its length, -1 if unreachable, -2 on allocation failure.
 * With route classes, translated from a representative's tree; else a
 * source's first tree grows only as far as its queries need, and a source
 * asked for again after its tree was evicted gets a complete tree, kept. */
static int direct_route(ss_machine *m, int src, int dst, int *buf)
{
    if (m->rc)
        return ss_routeclass_route(m, m->rc, src, dst, buf);
    if (!m->done) {
        m->done = ss_calloc((size_t)m->n_devices, sizeof *m->done);
        m->started = ss_calloc((size_t)m->n_devices, 1);
        if (!m->done || !m->started) {
            ss_free(m->done);
            ss_free(m->started);
            m->done = NULL;
            m->started = NULL;
            return -2;
        }
    }
    if (m->done[src])
        return walk(m, m->done[src], src, dst, buf);
    int fresh;
    ss_sptree *t = tree_for(m, src, &fresh);
    if (!t)
        return -2;
    int whole = fresh && m->started[src] &&
                m->done_bytes + (size_t)m->n_nodes * sizeof(int) <= m->tree_budget;
    m->started[src] = 1;
    grow_until(m, t, dst, whole);
    int n = walk(m, t->pred, src, dst, buf);
    if (t->hn == 0 && keep_tree(m, t))
        return -2;
    return n;
}

static int64_t route_lat_ns(const ss_machine *m, const int *ch, int n)
{
    int64_t s = 0;
    for (int i = 0; i < n; i++)
        s += lat_ns(m, ch[i]);
    return s;
}

static int refuses(const ss_machine *m, int dev)
{
    return m->peers[dev].is_peer && !m->devices[dev].accepts_connections;
}

static ss_status route_pair(ss_machine *m, int src, int dst, const int **ch, int *n, ss_diag *d)
{
    if (src == dst) {
        *ch = no_channels;
        *n = 0;
        return SS_OK;
    }
    uint64_t key = (uint64_t)src * (uint64_t)m->n_devices + (uint64_t)dst;
    route_slot *s = slot_find(m, key);
    if (!s) {
        if (!m->rbuf)
            m->rbuf = ss_malloc(((size_t)m->n_nodes * 2 + 2) * sizeof *m->rbuf);
        if (!m->rbuf)
            return ss_diag_set(d, SS_ERR_NOMEM, "out of memory for routes");
        /* the relay search below fills rbuf only after its nested queries */
        int *buf = m->rbuf;
        int len = -1;
        ss_status st = SS_OK;
        if (refuses(m, src) && refuses(m, dst)) {
            /* relay through the accepting device with the lowest latency */
            int best = -1;
            int64_t best_lat = INT64_MAX;
            for (int r = 0; r < m->n_devices && !st; r++) {
                if (r == src || r == dst || refuses(m, r))
                    continue;
                const int *c1, *c2;
                int n1, n2;
                st = route_pair(m, src, r, &c1, &n1, d);
                if (!st)
                    st = route_pair(m, r, dst, &c2, &n2, d);
                if (st == SS_ERR_INVALID) { /* r unreachable: not a relay */
                    st = SS_OK;
                    continue;
                }
                if (st)
                    break;
                int64_t lat = route_lat_ns(m, c1, n1) + route_lat_ns(m, c2, n2);
                if (lat < best_lat) {
                    best_lat = lat;
                    best = r;
                }
            }
            if (!st && best >= 0) {
                const int *c1, *c2;
                int n1, n2;
                route_pair(m, src, best, &c1, &n1, NULL);
                route_pair(m, best, dst, &c2, &n2, NULL);
                memcpy(buf, c1, (size_t)n1 * sizeof *buf);
                memcpy(buf + n1, c2, (size_t)n2 * sizeof *buf);
                len = n1 + n2;
            }
        } else {
            len = direct_route(m, src, dst, buf);
            if (len == -2)
                st = ss_diag_set(d, SS_ERR_NOMEM, "out of memory for routes");
        }
        if (!st)
            st = store(m, key, buf, len, &s, d);
        if (st)
            return st;
    }
    if (s->n < 0)
        return SS_ERR_INVALID;
    *ch = s->ch;
    *n = s->n;
    return SS_OK;
}

/* Route from device src to device dst: the channels along the path in order
 * (*n = 0 for src == dst). The pointer is borrowed and stays valid for the
 * machine's lifetime. Returns SS_ERR_INVALID for out-of-range devices or an
 * unreachable pair (firewalled peers without a relay), SS_ERR_NOMEM if the
 * cache cannot grow; on error *channels and *n are untouched. */
ss_status ss_machine_route(const ss_machine *m, int src, int dst, const int **channels, int *n)
{
    if (!m || src < 0 || dst < 0 || src >= m->n_devices || dst >= m->n_devices)
        return SS_ERR_INVALID;
    /* The cache is logically part of the (const) answer: filling it does not
     * change what any query returns. */
    return route_pair((ss_machine *)m, src, dst, channels, n, NULL);
}

/* Bottleneck bandwidth (GB/s) of the route src->dst; INFINITY for src == dst,
 * 0 when unreachable. */
double ss_machine_path_gbps(const ss_machine *m, int src, int dst)
{
    const int *ch;
    int n;
    if (ss_machine_route(m, src, dst, &ch, &n) != SS_OK)
        return 0.0;
    double bw = INFINITY;
    for (int i = 0; i < n; i++) {
        double b = ss_machine_channel_gbps(m, ch[i]);
        if (b < bw)
            bw = b;
    }
    return bw;
}

/* Summed latency (us) of the route src->dst; 0 for src == dst, INFINITY when
 * unreachable. */
double ss_machine_path_latency_us(const ss_machine *m, int src, int dst)
{
    const int *ch;
    int n;
    if (ss_machine_route(m, src, dst, &ch, &n) != SS_OK)
        return INFINITY;
    double s = 0;
    for (int i = 0; i < n; i++)
        s += ss_machine_channel_latency_us(m, ch[i]);
    return s;
}
