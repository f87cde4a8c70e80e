/*
 * memo.c — content-keyed memo table (memo.h).
 *
 * Records live one after another in one int32 pool; an open-addressing
 * index (linear probing, load <= 1/2) maps the FNV-style hash of a key to
 * its record. Invariant: every slot index points at a record whose key
 * hashes to the stored hash; the pool only grows until a clear, which
 * empties both at once (no deletion of single records, so probing needs no
 * tombstones).
 */
#include "simulator/memo.h"
#include "simsearch.h"

#include <string.h>

void ss_memo_init(ss_memo *mm, int64_t limit_words)
{
    memset(mm, 0, sizeof *mm);
    mm->limit = limit_words > 0 ? limit_words : 1 << 20;
}

void ss_memo_clear(ss_memo *mm)
{
    if (mm->slot)
        memset(mm->slot, 0, (size_t)mm->cap * sizeof *mm->slot);
    mm->n = 0;
    mm->used = 0;
}

void ss_memo_free(ss_memo *mm)
{
    ss_free(mm->slot);
    ss_free(mm->hash);
    ss_free(mm->pool);
    int64_t limit = mm->limit;
    memset(mm, 0, sizeof *mm);
    mm->limit = limit;
}

static uint64_t hash_key(const int32_t *key, int klen)
{
    uint64_t h = 1469598103934665603ull ^ (uint64_t)(uint32_t)klen;
    for (int i = 0; i < klen; i++) {
        h ^= (uint64_t)(uint32_t)key[i];
        h *= 1099511628211ull;
        h ^= h >> 29;
    }
    return h ? h : 1;
}

static int key_equal(const ss_memo *mm, int32_t rec, const int32_t *key, int klen)
{
    const int32_t *r = mm->pool + rec;
    return r[0] == klen && !memcmp(r + 1, key, (size_t)klen * sizeof *key);
}

const int32_t *ss_memo_get(ss_memo *mm, const int32_t *key, int klen, int *vlen)
{
    if (mm->n == 0) {
        mm->misses++;
        return NULL;
    }
    uint64_t h = hash_key(key, klen);
    unsigned mask = (unsigned)mm->cap - 1;
    for (unsigned i = (unsigned)h & mask;; i = (i + 1) & mask) {
        int32_t s = mm->slot[i];
        if (s == 0)
            break;
        if (mm->hash[i] == h && key_equal(mm, s - 1, key, klen)) {
            const int32_t *r = mm->pool + (s - 1) + 1 + klen;
            *vlen = r[0];
            mm->hits++;
            return r + 1;
        }
    }
    mm->misses++;
    return NULL;
}

/* Re-index every record into a table of `cap` slots. */
static int rehash(ss_memo *mm, int cap)
{
    int32_t *slot = ss_calloc((size_t)cap, sizeof *slot);
    uint64_t *hash = ss_malloc((size_t)cap * sizeof *hash);
    if (!slot || !hash) {
        ss_free(slot);
        ss_free(hash);
        return -1;
    }
    unsigned mask = (unsigned)cap - 1;
    for (int i = 0; i < mm->cap; i++) {
        if (!mm->slot[i])
            continue;
        unsigned k = (unsigned)mm->hash[i] & mask;
        while (slot[k])
            k = (k + 1) & mask;
        slot[k] = mm->slot[i];
        hash[k] = mm->hash[i];
    }
    ss_free(mm->slot);
    ss_free(mm->hash);
    mm->slot = slot;
    mm->hash = hash;
    mm->cap = cap;
    return 0;
}

int ss_memo_put(ss_memo *mm, const int32_t *key, int klen, const int32_t *val, int vlen)
{
    int64_t words = 2 + (int64_t)klen + vlen;
    if (mm->used + words > mm->limit && mm->n > 0) {
        ss_memo_clear(mm);
        mm->clears++;
    }
    if (mm->used + words > INT32_MAX - 1)
        return -1;
    if (mm->used + words > mm->cap_pool) {
        int64_t nc = mm->cap_pool ? mm->cap_pool : 1024;
        while (nc < mm->used + words)
            nc *= 2;
        int32_t *p = ss_realloc(mm->pool, (size_t)nc * sizeof *p);
        if (!p)
            return -1;
        mm->pool = p;
        mm->cap_pool = nc;
    }
    if (2 * (mm->n + 1) > mm->cap && rehash(mm, mm->cap ? 2 * mm->cap : 64))
        return -1;
    int32_t rec = (int32_t)mm->used, *r = mm->pool + rec;
    r[0] = klen;
    memcpy(r + 1, key, (size_t)klen * sizeof *key);
    r[1 + klen] = vlen;
    memcpy(r + 2 + klen, val, (size_t)vlen * sizeof *val);
    mm->used += words;
    uint64_t h = hash_key(key, klen);
    unsigned mask = (unsigned)mm->cap - 1, i = (unsigned)h & mask;
    while (mm->slot[i])
        i = (i + 1) & mask;
    mm->slot[i] = rec + 1;
    mm->hash[i] = h;
    mm->n++;
    return 0;
}

void ss_memo_put_double(int32_t *w, double x)
{
    memcpy(w, &x, sizeof x);
}

double ss_memo_get_double(const int32_t *w)
{
    double x;
    memcpy(&x, w, sizeof x);
    return x;
}
