/*
 * devpool.h — a pool of distinct, immutable device lists (the ordered
 * device entries of a parallel config), hash-consed: interning a list equal
 * to one the pool holds returns that one, so every operator of a plan whose
 * tiles sit on the same devices in the same order shares one copy (a plan
 * for 1,024 GPUs and 192 micro-batches holds a few dozen lists of 1,536
 * entries, not one per operator). Used by core/plan.c only; readers see the
 * lists as ss_pconfig.devices (const) and, through ss_plan_devlist_id, as a
 * small integer naming the list.
 *
 * Invariants: a list's entries never change while it is in the pool; no two
 * lists in the pool are equal (same length and entries); every list has an
 * id in [0, ss_devpool_ids(pool)) that no other list in the pool has. A list
 * is reference counted by its holders (the plan's operators); one no longer
 * referenced stays in the pool (so that a config set back, as the search's
 * rejected moves are, finds it again) until the unreferenced bytes exceed
 * the referenced ones plus SS_DEVPOOL_SLACK, and then every unreferenced
 * list is freed and its id reused.
 */
#ifndef SS_DEVPOOL_H
#define SS_DEVPOOL_H

#include "simsearch.h"

#include <stddef.h>
#include <stdint.h>

#define SS_DEVPOOL_SLACK 65536 /* unreferenced bytes always tolerated */

typedef struct ss_devlist {
    uint64_t hash;           /* ss_devpool_hash(v, n) */
    int n;                   /* entries */
    int id;                  /* dense id in its pool */
    int refs;                /* holders; 0: unreferenced, freed at the next sweep */
    struct ss_devlist *next; /* the pool's bucket chain */
    int v[];                 /* the entries */
} ss_devlist;

typedef struct ss_devpool ss_devpool;

/* An empty pool; NULL when out of memory. */
ss_devpool *ss_devpool_new(void);
/* Free the pool and every list in it (referenced or not). */
void ss_devpool_free(ss_devpool *pool);

/* The hash a list of n entries has in any pool (a pure function of n and
 * the entries). */
uint64_t ss_devpool_hash(const int *v, int n);

/* The list equal to v[0..n) (n >= 1) with one more reference: the pool's
 * own when it holds one, else a new copy. v may point into a list of this
 * or another pool. NULL when out of memory (the pool unchanged). */
ss_devlist *ss_devpool_intern(ss_devpool *pool, const int *v, int n);
/* The same for a list of another pool (its hash is not computed again). */
ss_devlist *ss_devpool_intern_list(ss_devpool *pool, const ss_devlist *l);
/* Drop one reference to l (a list of this pool); may sweep the pool, which
 * frees unreferenced lists (never a referenced one). */
void ss_devpool_release(ss_devpool *pool, ss_devlist *l);

/* Bytes the pool holds: its table and every list in it. */
size_t ss_devpool_bytes(const ss_devpool *pool);
/* Lists in the pool (referenced or not), and referenced ones. */
int ss_devpool_count(const ss_devpool *pool);
int ss_devpool_live(const ss_devpool *pool);
/* One more than the largest id a list in the pool has (0 when empty). */
int ss_devpool_ids(const ss_devpool *pool);

#endif
