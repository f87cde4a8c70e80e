/*
 * routeclass.c — route classes of a machine of identical hosts (routeclass.h
 * has the rules): the host template and its check, the complete
 * shortest-path trees of host 0's devices with the tie-break check, routes
 * by translation, and the host permutations as route automorphisms.
 *
 * Invariant: an ss_routeclass exists only for a machine whose every host
 * matches host 0's template and whose representatives' trees passed the
 * tie-break check; then every route it gives is the shortest-path search's.
 */
#include "routeclass.h"

#include "machine_impl.h"

#include <stdlib.h>
#include <string.h>

/* Memory for the representatives' trees (one int per node per position). */
#define RC_TREE_BYTES ((size_t)64 << 20)

struct ss_routeclass {
    int H, per, lper, nrep;
    int *nhost;  /* [n_nodes] host of each node, -1 outside every host */
    int *nloc;   /* [n_nodes] position in its host (id order) */
    int *hnodes; /* [H * per] node at (host, position) */
    int *lhost;  /* [n_links] host owning the link, -1 outside */
    int *lloc;   /* [n_links] its index among the host's links */
    int *hlinks; /* [H * lper] link at (host, index) */
    int *rep;    /* [per] representative index of a device position, -1 */
    int *pred;   /* [nrep * n_nodes] channel into each node from each representative */
};

void ss_routeclass_free(ss_routeclass *rc)
{
    if (!rc)
        return;
    ss_free(rc->nhost);
    ss_free(rc->nloc);
    ss_free(rc->hnodes);
    ss_free(rc->lhost);
    ss_free(rc->lloc);
    ss_free(rc->hlinks);
    ss_free(rc->rep);
    ss_free(rc->pred);
    ss_free(rc);
}

static int ch_from(const ss_machine *m, int c)
{
    const ss_link *l = &m->links[c >> 1];
    return (c & 1) ? l->b : l->a;
}

/* ---- the template ---- */

typedef struct lkey {
    int64_t k; /* (end a, end b): a position, or per + node id outside */
    int id;
} lkey;

static int lkey_cmp(const void *x, const void *y)
{
    const lkey *a = x, *b = y;
    if (a->k != b->k)
        return a->k < b->k ? -1 : 1;
    return (a->id > b->id) - (a->id < b->id);
}

static int same_link(const ss_link *a, const ss_link *b)
{
    return a->gbps_ab == b->gbps_ab && a->gbps_ba == b->gbps_ba &&
           a->latency_us == b->latency_us && a->coll_eff == b->coll_eff &&
           a->coll_half_bytes == b->coll_half_bytes && a->estimated == b->estimated &&
           !strcmp(a->kind, b->kind);
}

/* Hosts' nodes and links against host 0's: 1 when all match, 0 when not,
 * -1 out of memory. */
static int match_hosts(const ss_machine *m, ss_routeclass *rc)
{
    int nn = m->n_nodes, H = m->n_hosts;
    int *cnt = ss_calloc((size_t)H + 1, sizeof *cnt);
    if (!cnt)
        return -1;
    int ok = 1;
    for (int v = 0; v < nn && ok; v++) {
        int h = v < m->n_devices ? m->devices[v].host : m->nodes[v].host;
        if (h >= H)
            ok = 0;
        else if ((rc->nhost[v] = h < 0 ? -1 : h) >= 0)
            rc->nloc[v] = cnt[h]++;
    }
    rc->per = cnt[0];
    for (int h = 0; h < H && ok; h++)
        ok = cnt[h] == rc->per && rc->per > 0;
    ss_free(cnt);
    if (!ok)
        return 0;
    rc->hnodes = ss_malloc((size_t)H * (size_t)rc->per * sizeof *rc->hnodes);
    if (!rc->hnodes)
        return -1;
    for (int v = 0; v < nn; v++)
        if (rc->nhost[v] >= 0)
            rc->hnodes[(size_t)rc->nhost[v] * (size_t)rc->per + (size_t)rc->nloc[v]] = v;
    for (int h = 1; h < H; h++)
        for (int k = 0; k < rc->per; k++) {
            int a = rc->hnodes[k], b = rc->hnodes[(size_t)h * (size_t)rc->per + (size_t)k];
            if (m->nodes[a].kind != m->nodes[b].kind ||
                (a < m->n_devices) != (b < m->n_devices) ||
                (a < m->n_devices && m->devices[a].type != m->devices[b].type))
                return 0;
        }
    /* links: owner host, then sorted per host by (ends, id) */
    int nl = m->n_links;
    int *lcnt = ss_calloc((size_t)H + 1, sizeof *lcnt);
    lkey *keys = ss_malloc(((size_t)nl + 1) * sizeof *keys);
    int *start = ss_calloc((size_t)H + 1, sizeof *start);
    if (!lcnt || !keys || !start) {
        ss_free(lcnt);
        ss_free(keys);
        ss_free(start);
        return -1;
    }
    for (int l = 0; l < nl && ok; l++) {
        int ha = rc->nhost[m->links[l].a], hb = rc->nhost[m->links[l].b];
        if (ha >= 0 && hb >= 0 && ha != hb)
            ok = 0; /* a link between two hosts */
        rc->lhost[l] = ha >= 0 ? ha : hb;
        if (rc->lhost[l] >= 0)
            lcnt[rc->lhost[l]]++;
    }
    rc->lper = lcnt[0];
    for (int h = 0; h < H && ok; h++)
        ok = lcnt[h] == rc->lper;
    if (ok) {
        for (int h = 0; h < H; h++)
            start[h + 1] = start[h] + lcnt[h];
        memset(lcnt, 0, (size_t)H * sizeof *lcnt);
        for (int l = 0; l < nl; l++) {
            int h = rc->lhost[l];
            if (h < 0)
                continue;
            int a = m->links[l].a, b = m->links[l].b;
            int64_t ka = rc->nhost[a] >= 0 ? rc->nloc[a] : (int64_t)rc->per + a;
            int64_t kb = rc->nhost[b] >= 0 ? rc->nloc[b] : (int64_t)rc->per + b;
            lkey *e = &keys[start[h] + lcnt[h]++];
            e->k = ka << 32 | kb;
            e->id = l;
        }
        rc->hlinks = ss_malloc(((size_t)H * (size_t)rc->lper + 1) * sizeof *rc->hlinks);
        if (!rc->hlinks)
            ok = -1;
    }
    for (int h = 0; h < H && ok > 0; h++) {
        lkey *kh = keys + start[h];
        qsort(kh, (size_t)rc->lper, sizeof *kh, lkey_cmp);
        for (int i = 0; i < rc->lper && ok > 0; i++) {
            int l = kh[i].id;
            rc->lloc[l] = i;
            rc->hlinks[(size_t)h * (size_t)rc->lper + (size_t)i] = l;
            if (h > 0 && (kh[i].k != keys[i].k || !same_link(&m->links[l], &m->links[keys[i].id])))
                ok = 0;
        }
    }
    ss_free(lcnt);
    ss_free(keys);
    ss_free(start);
    return ok;
}

/* ---- the representatives' trees ---- */

typedef struct rkey {
    int64_t lat;
    int fwd, hops;
} rkey;

static int rkey_cmp(const rkey *a, const rkey *b)
{
    if (a->fwd != b->fwd)
        return a->fwd < b->fwd ? -1 : 1;
    if (a->lat != b->lat)
        return a->lat < b->lat ? -1 : 1;
    return (a->hops > b->hops) - (a->hops < b->hops);
}

typedef struct hent {
    rkey k;
    int v;
} hent;

static int hent_less(const hent *a, const hent *b)
{
    int c = rkey_cmp(&a->k, &b->k);
    return c ? c < 0 : a->v < b->v;
}

static void heap_push(hent *h, int *n, hent e)
{
    int i = (*n)++;
    while (i > 0 && hent_less(&e, &h[(i - 1) / 2])) {
        h[i] = h[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h[i] = e;
}

static hent heap_pop(hent *h, int *n)
{
    hent top = h[0], e = h[--*n];
    int i = 0;
    for (;;) {
        int s = 2 * i + 1;
        if (s >= *n)
            break;
        if (s + 1 < *n && hent_less(&h[s + 1], &h[s]))
            s++;
        if (!hent_less(&h[s], &e))
            break;
        h[i] = h[s];
        i = s;
    }
    if (*n > 0)
        h[i] = e;
    return top;
}

/* Does every host permutation keep node p before node u (p < u)? */
static int order_kept(const ss_routeclass *rc, int p, int u)
{
    int hp = rc->nhost[p], hu = rc->nhost[u];
    if (hp < 0 && hu < 0)
        return 1;
    if (hp >= 0 && hu >= 0)
        return hp == hu; /* positions follow ids within every host */
    int f = hp < 0 ? p : u, x = hp < 0 ? u : p, k = rc->nloc[x], below = x < f;
    for (int h = 0; h < rc->H; h++)
        if ((rc->hnodes[(size_t)h * (size_t)rc->per + (size_t)k] < f) != below)
            return 0;
    return 1;
}

/* The complete tree of source s into pred (the routing rule of machine.c:
 * keys (forwards, latency, hops), then the lowest predecessor id, then its
 * first channel); 1 when every tie keeps its choice under every host
 * permutation, else 0. key and heap: scratch of n_nodes and n_channels + 1
 * entries. */
static int rep_tree(const ss_machine *m, const ss_routeclass *rc, int s, int *pred, rkey *key,
                    unsigned char *done, hent *heap)
{
    int nn = m->n_nodes, hn = 0;
    for (int v = 0; v < nn; v++) {
        pred[v] = -1;
        done[v] = 0;
    }
    key[s] = (rkey){0, 0, 0};
    heap_push(heap, &hn, (hent){key[s], s});
    while (hn > 0) {
        hent e = heap_pop(heap, &hn);
        int u = e.v;
        if (done[u])
            continue;
        done[u] = 1;
        int fwd = key[u].fwd + (u != s && u < m->n_devices);
        for (int k = m->adj_off[u]; k < m->adj_off[u + 1]; k++) {
            int v = m->adj_to[k];
            rkey nk = {key[u].lat + m->adj_ns[k], fwd, key[u].hops + 1};
            if (done[v] || (pred[v] >= 0 && rkey_cmp(&nk, &key[v]) >= 0) || v == s)
                continue;
            key[v] = nk;
            pred[v] = m->adj_ch[k];
            heap_push(heap, &hn, (hent){nk, v});
        }
    }
    /* predecessors by the rule, ties checked */
    for (int v = 0; v < nn; v++)
        if (v != s)
            pred[v] = -1;
    for (int u = 0; u < nn; u++) {
        if (!done[u])
            continue;
        int fwd = key[u].fwd + (u != s && u < m->n_devices);
        for (int k = m->adj_off[u]; k < m->adj_off[u + 1]; k++) {
            int v = m->adj_to[k];
            rkey nk = {key[u].lat + m->adj_ns[k], fwd, key[u].hops + 1};
            if (v == s || rkey_cmp(&nk, &key[v]))
                continue;
            if (pred[v] < 0)
                pred[v] = m->adj_ch[k]; /* ascending u, then channel: the rule's choice */
            else if (ch_from(m, pred[v]) != u && !order_kept(rc, ch_from(m, pred[v]), u))
                return 0;
        }
    }
    return 1;
}

static int build_trees(const ss_machine *m, ss_routeclass *rc)
{
    int nn = m->n_nodes;
    rc->rep = ss_malloc((size_t)rc->per * sizeof *rc->rep);
    if (!rc->rep)
        return -1;
    rc->nrep = 0;
    for (int k = 0; k < rc->per; k++)
        rc->rep[k] = rc->hnodes[k] < m->n_devices ? rc->nrep++ : -1;
    if ((size_t)rc->nrep * (size_t)nn * sizeof(int) > RC_TREE_BYTES)
        return 0;
    rc->pred = ss_malloc((size_t)rc->nrep * (size_t)nn * sizeof *rc->pred);
    rkey *key = ss_malloc((size_t)nn * sizeof *key);
    unsigned char *done = ss_malloc((size_t)nn);
    hent *heap = ss_malloc(((size_t)m->adj_off[nn] + 2) * sizeof *heap);
    int ok = rc->pred && key && done && heap ? 1 : -1;
    for (int k = 0; k < rc->per && ok > 0; k++)
        if (rc->rep[k] >= 0)
            ok = rep_tree(m, rc, rc->hnodes[k], rc->pred + (size_t)rc->rep[k] * (size_t)nn, key,
                          done, heap);
    ss_free(key);
    ss_free(done);
    ss_free(heap);
    return ok;
}

ss_status ss_routeclass_build(const ss_machine *m, ss_routeclass **out)
{
    *out = NULL;
    if (m->n_peers > 0 || m->n_hosts < 2)
        return SS_OK;
    ss_routeclass *rc = ss_calloc(1, sizeof *rc);
    if (!rc)
        return SS_ERR_NOMEM;
    rc->H = m->n_hosts;
    size_t nn = (size_t)m->n_nodes, nl = (size_t)m->n_links + 1;
    rc->nhost = ss_malloc(nn * sizeof *rc->nhost);
    rc->nloc = ss_calloc(nn, sizeof *rc->nloc);
    rc->lhost = ss_malloc(nl * sizeof *rc->lhost);
    rc->lloc = ss_calloc(nl, sizeof *rc->lloc);
    int ok = rc->nhost && rc->nloc && rc->lhost && rc->lloc ? match_hosts(m, rc) : -1;
    if (ok > 0)
        ok = build_trees(m, rc);
    if (ok <= 0) {
        ss_routeclass_free(rc);
        return ok < 0 ? SS_ERR_NOMEM : SS_OK;
    }
    *out = rc;
    return SS_OK;
}

/* ---- translation ---- */

/* Node v under the swap of hosts 0 and h. */
static int swap_node(const ss_routeclass *rc, int h, int v)
{
    int x = rc->nhost[v];
    if (x != 0 && x != h)
        return v;
    return rc->hnodes[(size_t)(x == 0 ? h : 0) * (size_t)rc->per + (size_t)rc->nloc[v]];
}

/* Channel c under the map of host x to host pi(x) (pi: the swap of 0 and
 * h when pi == NULL). */
static int map_channel(const ss_routeclass *rc, const int *pi, int h, int c)
{
    int l = c >> 1, x = rc->lhost[l];
    if (x < 0)
        return c;
    int y = pi ? pi[x] : x == 0 ? h : x == h ? 0 : x;
    if (y == x)
        return c;
    return 2 * rc->hlinks[(size_t)y * (size_t)rc->lper + (size_t)rc->lloc[l]] + (c & 1);
}

int ss_routeclass_route(const ss_machine *m, const ss_routeclass *rc, int src, int dst, int *buf)
{
    int h = rc->nhost[src], k = rc->nloc[src];
    const int *pred = rc->pred + (size_t)rc->rep[k] * (size_t)m->n_nodes;
    int r = rc->hnodes[k], n = 0;
    for (int v = swap_node(rc, h, dst); v != r; v = ch_from(m, pred[v])) {
        if (pred[v] < 0)
            return -1;
        buf[n++] = pred[v];
    }
    for (int i = 0; i < n / 2; i++) {
        int tmp = buf[i];
        buf[i] = buf[n - 1 - i];
        buf[n - 1 - i] = tmp;
    }
    if (h != 0)
        for (int i = 0; i < n; i++)
            buf[i] = map_channel(rc, NULL, h, buf[i]);
    return n;
}

int ss_routeclass_automorphism(const ss_machine *m, const int *sig, int *chmap)
{
    const ss_routeclass *rc = m->rc;
    if (!rc)
        return 0;
    int *pi = ss_malloc((size_t)rc->H * 2 * sizeof *pi), ok = 1;
    if (!pi)
        return 0;
    int *seen = pi + rc->H;
    for (int h = 0; h < rc->H; h++)
        pi[h] = seen[h] = -1;
    for (int a = 0; a < m->n_devices && ok; a++) {
        int b = sig[a];
        if (b < 0 || b >= m->n_devices || rc->nloc[a] != rc->nloc[b]) {
            ok = 0;
            break;
        }
        int ha = rc->nhost[a], hb = rc->nhost[b];
        if (pi[ha] < 0 && seen[hb] < 0) {
            pi[ha] = hb;
            seen[hb] = ha;
        }
        ok = pi[ha] == hb;
    }
    for (int h = 0; h < rc->H && ok; h++)
        ok = pi[h] >= 0; /* every host holds devices (one template) */
    if (ok)
        for (int c = 0; c < 2 * m->n_links; c++)
            chmap[c] = map_channel(rc, pi, -1, c);
    ss_free(pi);
    return ok;
}

int ss_routeclass_positions(const ss_machine *m)
{
    return m->rc ? m->rc->nrep : 0;
}
