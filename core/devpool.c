/*
 * devpool.c — the pool of distinct, immutable device lists (devpool.h): a
 * chained hash table of reference-counted lists, swept lazily.
 *
 * Invariants: as devpool.h; besides, live_bytes + dead_bytes is the size of
 * the lists in the pool, dead_bytes that of the unreferenced ones, and
 * free_ids holds exactly the ids below next_id that no list has.
 */
#include "core/devpool.h"

#include <string.h>

struct ss_devpool {
    ss_devlist **bucket; /* nb chains (nb a power of two) */
    int nb;
    int count;           /* lists */
    int live;            /* referenced lists */
    size_t live_bytes, dead_bytes;
    int next_id;         /* ids handed out so far: 0 .. next_id-1 */
    int *free_ids;       /* ids to hand out again (a stack) */
    int n_free, cap_free;
};

static size_t list_bytes(int n)
{
    return sizeof(ss_devlist) + (size_t)n * sizeof(int);
}

ss_devpool *ss_devpool_new(void)
{
    ss_devpool *pool = ss_calloc(1, sizeof *pool);
    if (!pool)
        return NULL;
    pool->nb = 16;
    pool->bucket = ss_calloc((size_t)pool->nb, sizeof *pool->bucket);
    if (!pool->bucket) {
        ss_free(pool);
        return NULL;
    }
    return pool;
}

void ss_devpool_free(ss_devpool *pool)
{
    if (!pool)
        return;
    for (int b = 0; b < pool->nb; b++)
        for (ss_devlist *l = pool->bucket[b], *nx; l; l = nx) {
            nx = l->next;
            ss_free(l);
        }
    ss_free(pool->bucket);
    ss_free(pool->free_ids);
    ss_free(pool);
}

static inline uint64_t mix(uint64_t h, uint64_t w)
{
    h ^= w;
    h *= 0x9e3779b97f4a7c15ull;
    return h ^ (h >> 29);
}

uint64_t ss_devpool_hash(const int *v, int n)
{
    uint64_t h = mix(0xd6e8feb86659fd93ull, (uint64_t)(uint32_t)n);
    int j = 0;
    for (; j + 2 <= n; j += 2)
        h = mix(h, (uint64_t)(uint32_t)v[j] << 32 | (uint32_t)v[j + 1]);
    if (j < n)
        h = mix(h, (uint64_t)(uint32_t)v[j]);
    return h;
}

static void take_ref(ss_devpool *pool, ss_devlist *l)
{
    if (l->refs++ == 0) {
        size_t b = list_bytes(l->n);
        pool->dead_bytes -= b;
        pool->live_bytes += b;
        pool->live++;
    }
}

/* The list equal to v[0..n) with hash h, or NULL. */
static ss_devlist *find(const ss_devpool *pool, const int *v, int n, uint64_t h)
{
    for (ss_devlist *l = pool->bucket[h & (uint64_t)(pool->nb - 1)]; l; l = l->next)
        if (l->hash == h && l->n == n &&
            (l->v == v || !memcmp(l->v, v, (size_t)n * sizeof *v)))
            return l;
    return NULL;
}

/* Double the table when it holds more lists than chains (best effort: a
 * failed growth only leaves chains longer). */
static void maybe_grow(ss_devpool *pool)
{
    if (pool->count < pool->nb || pool->nb > (1 << 28))
        return;
    int nb = 2 * pool->nb;
    ss_devlist **nbk = ss_calloc((size_t)nb, sizeof *nbk);
    if (!nbk)
        return;
    for (int b = 0; b < pool->nb; b++)
        for (ss_devlist *l = pool->bucket[b], *nx; l; l = nx) {
            nx = l->next;
            ss_devlist **head = &nbk[l->hash & (uint64_t)(nb - 1)];
            l->next = *head;
            *head = l;
        }
    ss_free(pool->bucket);
    pool->bucket = nbk;
    pool->nb = nb;
}

static ss_devlist *intern(ss_devpool *pool, const int *v, int n, uint64_t h)
{
    if (n < 1)
        return NULL;
    ss_devlist *l = find(pool, v, n, h);
    if (l) {
        take_ref(pool, l);
        return l;
    }
    if (!pool->n_free &&
        ss_grow((void **)&pool->free_ids, &pool->cap_free, pool->next_id + 1, sizeof(int)))
        return NULL; /* room for every id handed out: a sweep never allocates */
    l = ss_malloc(list_bytes(n));
    if (!l)
        return NULL;
    l->hash = h;
    l->n = n;
    l->id = pool->n_free ? pool->free_ids[--pool->n_free] : pool->next_id++;
    l->refs = 1;
    memcpy(l->v, v, (size_t)n * sizeof *v);
    ss_devlist **head = &pool->bucket[h & (uint64_t)(pool->nb - 1)];
    l->next = *head;
    *head = l;
    pool->count++;
    pool->live++;
    pool->live_bytes += list_bytes(n);
    maybe_grow(pool);
    return l;
}

ss_devlist *ss_devpool_intern(ss_devpool *pool, const int *v, int n)
{
    if (!pool || !v || n < 1)
        return NULL;
    return intern(pool, v, n, ss_devpool_hash(v, n));
}

ss_devlist *ss_devpool_intern_list(ss_devpool *pool, const ss_devlist *l)
{
    if (!pool || !l)
        return NULL;
    return intern(pool, l->v, l->n, l->hash);
}

/* Free every unreferenced list. free_ids has room for every id handed out
 * (intern grows it before it hands out a new one). */
static void sweep(ss_devpool *pool)
{
    for (int b = 0; b < pool->nb; b++)
        for (ss_devlist **at = &pool->bucket[b]; *at;) {
            ss_devlist *l = *at;
            if (l->refs) {
                at = &l->next;
                continue;
            }
            *at = l->next;
            pool->free_ids[pool->n_free++] = l->id;
            pool->count--;
            ss_free(l);
        }
    pool->dead_bytes = 0;
}

void ss_devpool_release(ss_devpool *pool, ss_devlist *l)
{
    if (!pool || !l || l->refs < 1)
        return;
    if (--l->refs)
        return;
    size_t b = list_bytes(l->n);
    pool->live_bytes -= b;
    pool->dead_bytes += b;
    pool->live--;
    if (pool->dead_bytes > pool->live_bytes + SS_DEVPOOL_SLACK)
        sweep(pool);
}

size_t ss_devpool_bytes(const ss_devpool *pool)
{
    if (!pool)
        return 0;
    return sizeof *pool + (size_t)pool->nb * sizeof *pool->bucket +
           (size_t)pool->cap_free * sizeof *pool->free_ids + pool->live_bytes + pool->dead_bytes;
}

int ss_devpool_count(const ss_devpool *pool) { return pool ? pool->count : 0; }
int ss_devpool_live(const ss_devpool *pool) { return pool ? pool->live : 0; }
int ss_devpool_ids(const ss_devpool *pool) { return pool ? pool->next_id : 0; }
