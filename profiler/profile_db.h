/*
 * profile_db.h — the profile database: measured forward and backward times
 * of operator tiles, keyed by (device type, op signature), stored as a
 * strict JSON file ("simsearch-profile", docs/profile-format.md), and a
 * cost provider that answers from it.
 *
 * The rules:
 *   - An op signature (ss_profile_signature) is a canonical string of what a
 *     tile computes: op type, every non-zero attribute, the tile's output
 *     extents and contraction length, whether it is the first reduction slice
 *     (which adds the bias), and the dtype and region extents of every
 *     operand and output. Two tiles with equal signatures run the same
 *     kernels on operands of the same shapes, whatever their names or
 *     graphs, so one measurement serves both.
 *   - One entry per (device type, signature); putting an entry with the same
 *     key replaces the old one.
 *   - Loading is strict: unknown keys, wrong types, out-of-range values and
 *     duplicate keys are rejected naming the file and line:column (syntax)
 *     or the JSON path (meaning).
 *   - Saving never loses entries and never leaves a half-written file: under
 *     an exclusive flock on the sidecar "FILE.lock", the file on disk is
 *     read again, the entries in memory are merged over it (same key: the
 *     one in memory wins), and the result is written to a temp file, fsynced
 *     and renamed over FILE. Concurrent savers therefore serialise and each
 *     keeps what the others wrote; a writer killed at any point leaves
 *     either the old file or the new one. The lock file is removed when
 *     released (a waiter that locked a removed one retries).
 *   - Adding a few entries to a large database costs what is added, not the
 *     database: ss_profile_db_append adds one line ("FILE.journal", one
 *     entry object per line, fsynced, under the lock); loading reads FILE,
 *     then applies its journal (a later line replaces an earlier entry of
 *     the same key; a torn last line, from a writer killed mid-append, is
 *     skipped). Saving (and ss_profile_db_compact) merges the journal into
 *     FILE and removes it. docs/profile-format.md, "Journal".
 */
#ifndef SS_PROFILER_PROFILE_DB_H
#define SS_PROFILER_PROFILE_DB_H

#include "simsearch.h" /* SS_PROFILE_SIG_MAX, SS_PROFILE_TEXT_MAX: simsearch/limits.h */

typedef struct ss_profile_entry {
    char device_type[SS_NAME_MAX];       /* the topology's device type name */
    char signature[SS_PROFILE_SIG_MAX];  /* ss_profile_signature */
    ss_op_type op_type;                  /* redundant with the signature, for readers */
    ss_dtype dtype;                      /* compute dtype */
    char backend[16];                    /* "cpu", "cuda" */
    char device[SS_PROFILE_TEXT_MAX];    /* the measuring device ("cpu0: <model>", "cuda:0: H100") */
    char date[32];                       /* UTC, "YYYY-MM-DDTHH:MM:SSZ" */
    int64_t reps;                        /* timed repetitions (after warm-up) */
    double fwd_us, fwd_spread_us;        /* median and spread (interquartile range) */
    double bwd_us, bwd_spread_us;
} ss_profile_entry;

typedef struct ss_profile_db ss_profile_db;

/* Empty database; NULL on allocation failure. */
ss_profile_db *ss_profile_db_new(void);
void ss_profile_db_free(ss_profile_db *db);

/* Load a profile file strictly. On success *out is a new database. */
ss_status ss_profile_db_load(const char *path, ss_profile_db **out, ss_diag *d);
ss_status ss_profile_db_load_string(const char *json, const char *label, ss_profile_db **out,
                                    ss_diag *d);
/* Like ss_profile_db_load, but a missing file gives an empty database. */
ss_status ss_profile_db_open(const char *path, ss_profile_db **out, ss_diag *d);

/* Insert e (copied), replacing an entry with the same (device type,
 * signature). Checks the entry's ranges (SS_ERR_INVALID). */
ss_status ss_profile_db_put(ss_profile_db *db, const ss_profile_entry *e, ss_diag *d);
/* The entry for (device type, signature), or NULL. Borrowed. */
const ss_profile_entry *ss_profile_db_find(const ss_profile_db *db, const char *device_type,
                                           const char *signature);
int ss_profile_db_count(const ss_profile_db *db);
const ss_profile_entry *ss_profile_db_entry(const ss_profile_db *db, int i);

/* Merge db over the file at path and write the result atomically, under
 * the sidecar lock (see the header comment). db is not changed. A malformed
 * file on disk is an error (nothing written). */
ss_status ss_profile_db_save(const ss_profile_db *db, const char *path, ss_diag *d);
/* Append e to the journal of the database at path, under the lock (O(1) in
 * the database's size). Checks the entry's ranges (SS_ERR_INVALID). */
ss_status ss_profile_db_append(const char *path, const ss_profile_entry *e, ss_diag *d);
/* Merge the journal into the file (as ss_profile_db_save of nothing) when
 * it is at least `ratio` times the file's size in bytes (0: whenever there
 * is one; the file missing: always). */
ss_status ss_profile_db_compact(const char *path, double ratio, ss_diag *d);
/* The database as profile JSON (entries sorted by device type, then
 * signature). *out is ss_malloc'd. */
ss_status ss_profile_db_to_string(const ss_profile_db *db, char **out, ss_diag *d);

/* The signature of tile t of op into buf (n bytes, SS_PROFILE_SIG_MAX is
 * enough). Returns the length, or -1 if it did not fit. */
int ss_profile_signature(const ss_graph *g, const ss_op *op, const ss_tile *t, char *buf,
                         size_t n);

/* A cost provider answering from db (borrowed: it must outlive the cost
 * model): the entry for (device type name, signature of the tile), source
 * SS_COST_PROFILE, work from ss_op_tile_work. Declines when there is none. */
ss_cost_provider ss_profile_provider(const ss_profile_db *db);

/* Current UTC time as "YYYY-MM-DDTHH:MM:SSZ". */
void ss_profile_now(char out[32]);

#endif
