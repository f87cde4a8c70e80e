/*
 * evalcache.c — the MCMC's cache of plan evaluations (evalcache.h).
 *
 * Open addressing with linear probing over a power-of-two slot array; a
 * slot is empty when its key is {0, 0} (a real key equal to that is
 * remapped). The table doubles at half load up to MAX_SLOTS slots, and is
 * emptied when a full-size table reaches half load. Invariant: every held
 * key is reachable from its home slot without crossing an empty slot.
 */
#include "search/evalcache.h"

#include <string.h>

#define MIN_SLOTS 4096
#define MAX_SLOTS (1 << 19) /* 40-byte slots: 20 MiB */

typedef struct slot {
    ss_planhash h;
    ss_evalcache_entry e;
} slot;

struct ss_evalcache {
    slot *s;
    int64_t cap, n, flushes;
};

ss_evalcache *ss_evalcache_new(void)
{
    ss_evalcache *c = ss_calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->s = ss_calloc(MIN_SLOTS, sizeof *c->s);
    if (!c->s) {
        ss_free(c);
        return NULL;
    }
    c->cap = MIN_SLOTS;
    return c;
}

void ss_evalcache_free(ss_evalcache *c)
{
    if (!c)
        return;
    ss_free(c->s);
    ss_free(c);
}

/* splitmix64's finalizer: every input bit flips about half the output bits. */
static uint64_t mix(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 31;
    return x;
}

/* Two running hashes of the same words under different seeds. */
static void absorb(ss_planhash *h, uint64_t w)
{
    h->a = mix(h->a ^ w) + 0x9e3779b97f4a7c15ull;
    h->b = mix(h->b + w * 0xc2b2ae3d27d4eb4full) ^ 0x165667b19e3779f9ull;
}

ss_planhash ss_evalcache_config_hash(int op, const ss_pconfig *c)
{
    ss_planhash h = {0x243f6a8885a308d3ull, 0x13198a2e03707344ull};
    absorb(&h, (uint64_t)(uint32_t)op);
    absorb(&h, (uint64_t)(uint32_t)c->ndim << 32 | (uint32_t)c->red);
    absorb(&h, (uint64_t)(uint32_t)c->stage << 32 | (uint32_t)c->ntiles);
    for (int k = 0; k < c->ndim; k++)
        absorb(&h, (uint64_t)(uint32_t)c->deg[k]);
    for (int t = 0; t < c->ntiles; t++)
        absorb(&h, (uint64_t)(uint32_t)c->devices[t]);
    return h;
}

ss_planhash ss_evalcache_plan_hash(const ss_plan *p)
{
    ss_planhash h = {0, 0};
    for (int op = 0; op < ss_plan_n_ops(p); op++) {
        ss_planhash x = ss_evalcache_config_hash(op, ss_plan_config(p, op));
        h.a ^= x.a;
        h.b ^= x.b;
    }
    return h;
}

static ss_planhash key_of(ss_planhash h)
{
    if (h.a == 0 && h.b == 0)
        h.b = 1; /* {0, 0} marks an empty slot */
    return h;
}

static int64_t home(const ss_evalcache *c, ss_planhash h)
{
    return (int64_t)(h.a & (uint64_t)(c->cap - 1));
}

/* The slot holding h, or the empty slot where it would go. */
static slot *find(const ss_evalcache *c, ss_planhash h)
{
    int64_t mask = c->cap - 1;
    for (int64_t i = home(c, h);; i = (i + 1) & mask) {
        slot *s = &c->s[i];
        if ((s->h.a == h.a && s->h.b == h.b) || (s->h.a == 0 && s->h.b == 0))
            return s;
    }
}

int ss_evalcache_get(const ss_evalcache *c, ss_planhash h, ss_evalcache_entry *out)
{
    h = key_of(h);
    const slot *s = find(c, h);
    if (s->h.a == 0 && s->h.b == 0)
        return 0;
    *out = s->e;
    return 1;
}

/* Make room for one more entry: double the table below MAX_SLOTS (a
 * failed allocation keeps the old one), empty it at full size. */
static void make_room(ss_evalcache *c)
{
    if (2 * (c->n + 1) <= c->cap)
        return;
    if (c->cap < MAX_SLOTS) {
        slot *ns = ss_calloc((size_t)c->cap * 2, sizeof *ns);
        if (ns) {
            slot *old = c->s;
            int64_t oldcap = c->cap;
            c->s = ns;
            c->cap *= 2;
            for (int64_t i = 0; i < oldcap; i++)
                if (old[i].h.a || old[i].h.b)
                    *find(c, old[i].h) = old[i];
            ss_free(old);
            return;
        }
        if (c->n + 1 < c->cap) /* no bigger table: keep filling this one */
            return;
    }
    memset(c->s, 0, (size_t)c->cap * sizeof *c->s);
    c->n = 0;
    c->flushes++;
}

void ss_evalcache_put(ss_evalcache *c, ss_planhash h, const ss_evalcache_entry *e)
{
    h = key_of(h);
    slot *s = find(c, h);
    if (s->h.a || s->h.b) {
        /* known: only a bound may improve (a larger bound, or the exact answer) */
        if (s->e.kind == SS_EVALCACHE_BEYOND &&
            (e->kind != SS_EVALCACHE_BEYOND || e->e.time_us > s->e.e.time_us))
            s->e = *e;
        return;
    }
    make_room(c);
    s = find(c, h);
    s->h = h;
    s->e = *e;
    c->n++;
}

int64_t ss_evalcache_size(const ss_evalcache *c) { return c->n; }

int64_t ss_evalcache_flushes(const ss_evalcache *c) { return c->flushes; }
