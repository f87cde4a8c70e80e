/*
 * space.h — the search space of the MCMC plan search: for every operator, the
 * parallel configurations it may take on a given machine, plus the seeded
 * random number generator every random choice of the search goes through.
 *
 * A candidate config of an op is a DEGREE TUPLE (a degree per dim of output
 * 0 and a reduction degree) and a PLACEMENT of its tiles on devices:
 *
 *   degrees    each dim may be split only if ss_op_split_mask allows it, the
 *              reduction only if the op has a contraction; every degree
 *              divides its extent; the tile count T = prod(deg) * red
 *              divides the number of devices N and is at most max_tiles.
 *   placement  one device per tile, all distinct (no micro-batching here):
 *                contiguous  devices [o*T, o*T + T)            o < N/T
 *                strided     devices o + k*(N/T), k < T         o < N/T
 *                            (only when 1 < T < N: one tile per "column")
 *              T = 1 with the N contiguous offsets is operator parallelism
 *              (the whole op on any single device).
 *
 * Candidates are stored compactly (degree tuples per op; placements are
 * arithmetic), so the space of a 1,000-op graph on 64 devices stays small.
 * Candidate i of op is tuple t and placement j with i = tup_off[t] + j.
 *
 * Invariant: every config the space produces passes ss_plan_validate for its
 * graph on any machine of at least n_devices devices. The space only needs
 * the device count; the machine's shape enters through the placements
 * (contiguous blocks are hosts, strided ones span hosts).
 */
#ifndef SS_SEARCH_SPACE_H
#define SS_SEARCH_SPACE_H

#include "simsearch.h"

/* ---- PRNG: xoshiro256** seeded through splitmix64 (never rand()) ---- */

typedef struct ss_rng { uint64_t s[4]; } ss_rng;

static inline uint64_t ss_splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static inline void ss_rng_seed(ss_rng *r, uint64_t seed)
{
    uint64_t x = seed;
    for (int i = 0; i < 4; i++)
        r->s[i] = ss_splitmix64(&x);
}

static inline uint64_t ss_rng_next(ss_rng *r)
{
    uint64_t *s = r->s;
    uint64_t x = s[1] * 5, res = ((x << 7) | (x >> 57)) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = (s[3] << 45) | (s[3] >> 19);
    return res;
}

/* Uniform double in [0, 1). */
static inline double ss_rng_unit(ss_rng *r)
{
    return (double)(ss_rng_next(r) >> 11) * (1.0 / 9007199254740992.0);
}

/* Uniform integer in [0, n) for 1 <= n < 2^53. */
static inline int64_t ss_rng_below(ss_rng *r, int64_t n)
{
    int64_t v = (int64_t)(ss_rng_unit(r) * (double)n);
    return v < n ? v : n - 1;
}

/* ---- the space ---- */

typedef struct ss_space_opts {
    int n_devices;      /* devices 0 .. n_devices-1 are used (>= 1) */
    int max_tiles;      /* most tiles per op (0 = n_devices) */
} ss_space_opts;

typedef struct ss_space ss_space;

/* Enumerate the candidates of every op of g on opts->n_devices devices. On
 * success *out is a new space (free with ss_space_free); on error *out is
 * untouched. g is borrowed and must outlive the space. */
ss_status ss_space_new(const ss_graph *g, const ss_space_opts *opts, ss_space **out,
                       ss_diag *d);
void ss_space_free(ss_space *s);

const ss_graph *ss_space_graph(const ss_space *s);
int ss_space_n_ops(const ss_space *s);
int ss_space_n_devices(const ss_space *s);
/* Degree tuples of op, and candidates (tuples x placements) of op. */
int ss_space_n_tuples(const ss_space *s, int op);
int64_t ss_space_n_candidates(const ss_space *s, int op);
/* Total over ops of log10(candidates): the size of the plan space. */
double ss_space_log10_size(const ss_space *s);

/* Fill c with candidate `i` of op (0 <= i < n_candidates): its devices are
 * written into devs (room for at least ss_space_n_devices(s) ints) and
 * c->devices set to devs; ndim, deg, red, ntiles are written, stage is set
 * to 0. */
void ss_space_candidate(const ss_space *s, int op, int64_t i, ss_pconfig *c, int *devs);

/* A random candidate of op: a degree tuple uniformly, then a placement
 * uniformly (so large tile counts are not drowned by the many placements of
 * small ones). Same contract for c and devs as ss_space_candidate. */
void ss_space_random(const ss_space *s, int op, ss_rng *r, ss_pconfig *c, int *devs);

/* Index of the candidate equal to c (same degrees, reduction and device
 * list), or -1 if c is not in the space. */
int64_t ss_space_find(const ss_space *s, int op, const ss_pconfig *c);

/* Whether c is a config this op may take in this space (degrees allowed and
 * dividing, reduction allowed, tile count dividing the devices, devices in
 * range and distinct). Placements outside the contiguous/strided families
 * are accepted: the MCMC may keep a start plan's own placements. */
int ss_space_allows(const ss_space *s, int op, const ss_pconfig *c);

/* Set every op of p to a random candidate (p must be a plan of the space's
 * graph). Returns SS_OK or the error of ss_plan_set_config. */
ss_status ss_space_random_plan(const ss_space *s, ss_rng *r, ss_plan *p, ss_diag *d);

#endif /* SS_SEARCH_SPACE_H */
