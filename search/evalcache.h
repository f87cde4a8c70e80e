/*
 * evalcache.h — what the evaluator said about plans already judged, so the
 * MCMC need not simulate a plan twice.
 *
 * A chain revisits plans: it returns to its best plan every few hundred
 * proposals and draws moves from there again, and local and class moves
 * draw from small sets. The simulation is a pure function of the plan, so
 * a second judgement of the same plan can be read back instead of
 * simulated. What is kept per plan is what decides a Metropolis–Hastings
 * test exactly:
 *
 *   EXACT    the evaluator's full answer (time, fits, overflow);
 *   BEYOND   a proven lower bound of the time (an evaluation cut early at
 *            an acceptance threshold; a later test with a threshold below
 *            the bound is decided, one above it is not);
 *   INVALID  the plan cannot run (the evaluator said INVALID/INFEASIBLE).
 *
 * Plans are keyed by a 128-bit hash, the XOR over ops of a hash of (op,
 * config) (ss_evalcache_config_hash), so a search keeps the key of its
 * current plan up to date in O(ops moved) per move. Two plans whose keys
 * agree in all 128 bits are taken as the same plan (chance about n^2 /
 * 2^129 for n cached plans).
 *
 * The table is open addressing, grown up to a fixed number of entries and
 * emptied when full, so memory stays bounded (at most about 20 MiB). Put
 * never fails: a failed allocation while growing keeps the smaller table.
 */
#ifndef SS_SEARCH_EVALCACHE_H
#define SS_SEARCH_EVALCACHE_H

#include "search/mcmc.h"

#include <stdint.h>

typedef struct ss_planhash {
    uint64_t a, b;
} ss_planhash;

typedef enum ss_evalcache_kind {
    SS_EVALCACHE_EXACT = 1,
    SS_EVALCACHE_BEYOND,
    SS_EVALCACHE_INVALID
} ss_evalcache_kind;

typedef struct ss_evalcache_entry {
    ss_evalcache_kind kind;
    ss_eval e; /* EXACT: the evaluation; BEYOND: e.time_us = the lower bound */
} ss_evalcache_entry;

typedef struct ss_evalcache ss_evalcache;

/* New empty cache; NULL when out of memory. Free with ss_evalcache_free. */
ss_evalcache *ss_evalcache_new(void);
void ss_evalcache_free(ss_evalcache *c);

/* The hash of op `op` having config c (degrees, reduction, devices, stage).
 * XOR the hashes of every op's config for the key of a plan. */
ss_planhash ss_evalcache_config_hash(int op, const ss_pconfig *c);

/* Key of the whole plan p (the XOR of its ops' config hashes). */
ss_planhash ss_evalcache_plan_hash(const ss_plan *p);

/* 1 and *out if the plan with key h is cached, else 0. */
int ss_evalcache_get(const ss_evalcache *c, ss_planhash h, ss_evalcache_entry *out);

/* Record what an evaluation said about the plan with key h. An EXACT or
 * INVALID entry is final; a BEYOND entry keeps the larger of its bounds and
 * gives way to an EXACT one. */
void ss_evalcache_put(ss_evalcache *c, ss_planhash h, const ss_evalcache_entry *e);

/* Entries held now, and how many times the table was emptied because it
 * was full. */
int64_t ss_evalcache_size(const ss_evalcache *c);
int64_t ss_evalcache_flushes(const ss_evalcache *c);

#endif /* SS_SEARCH_EVALCACHE_H */
