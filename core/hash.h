/*
 * hash.h — the one pair of integer hash mixers every hash table and
 * memo key in simsearch uses (the FNV byte hashes for strings and
 * buffers are ss_fnv_* in core/json_util.h).
 *
 * ss_hash_mix folds a 64-bit word into a running hash (boost's combine
 * with a 64-bit multiply); ss_hash_final is splitmix64's finalizer, for a
 * single key or a running hash before it is reduced to a table slot. Both
 * are pure functions: the same inputs give the same hash on every
 * platform, so tables that iterate in slot order stay deterministic.
 * A hash is never an identity: tables compare full keys.
 */
#ifndef SS_HASH_H
#define SS_HASH_H

#include <stdint.h>
#include <string.h>

static inline uint64_t ss_hash_mix(uint64_t h, uint64_t v)
{
    h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
    return h * 0xbf58476d1ce4e5b9ULL;
}

static inline uint64_t ss_hash_final(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return x;
}

/* The hierarchical evaluator's memo keys (simulator/hier*.c): boost's
 * combine with FNV's 64-bit prime. Kept apart from ss_hash_mix because a
 * memo key is a sub-problem's identity there: another mixer could change
 * which plans share an entry. */
static inline uint64_t ss_hash_mix_fnv(uint64_t h, uint64_t v)
{
    h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
    return h * 0x100000001b3ULL;
}

/* A double's bits (+0.0 and -0.0 hash alike). */
static inline uint64_t ss_hash_mix_f64(uint64_t h, double x)
{
    uint64_t u;
    if (x == 0)
        x = 0;
    memcpy(&u, &x, sizeof u);
    return ss_hash_mix(h, u);
}

#endif
