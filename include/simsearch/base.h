/*
 * simsearch/base.h — status codes and diagnostics (ss_status, ss_diag),
 * the allocation hook (ss_malloc, ss_grow ...) and the output-file checks.
 *
 * Part of the public C API. Users include <simsearch.h>, which includes every
 * header under simsearch/ in dependency order; this one also compiles on its own.
 * The conventions are in simsearch.h's opening comment.
 */
#ifndef SIMSEARCH_BASE_H
#define SIMSEARCH_BASE_H

#include <stddef.h>
#include <stdint.h>

#include "simsearch/limits.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ */
/* Errors and diagnostics                                              */
/* ------------------------------------------------------------------ */

typedef enum ss_status {
    SS_OK = 0,
    SS_ERR_NOMEM,       /* allocation failed */
    SS_ERR_INVALID,     /* inconsistent or out-of-range input */
    SS_ERR_PARSE,       /* malformed file (syntax, unknown key, wrong type) */
    SS_ERR_IO,          /* file could not be read or written */
    SS_ERR_INFEASIBLE,  /* plan does not fit (memory) or cannot run */
    SS_ERR_UNSUPPORTED, /* valid request this build cannot honour (no GPU...) */
    SS_ERR_INTERRUPTED  /* stopped by the user (SIGINT) */
} ss_status;

/* Error object. The first error set is kept; later ones are ignored, so the
 * message names the root cause. Zero-initialise or ss_diag_init() it. A
 * message longer than SS_DIAG_MSG_MAX - 1 keeps its first quarter and its
 * end with the middle replaced by " [...] ", so the reason after a long path
 * survives. */
typedef struct ss_diag {
    ss_status status;
    char msg[SS_DIAG_MSG_MAX];
} ss_diag;

void ss_diag_init(ss_diag *d);
/* Record an error (printf-style) unless one is already recorded. d may be NULL.
 * Returns st so callers can write `return ss_diag_set(d, SS_ERR_..., ...)`. */
ss_status ss_diag_set(ss_diag *d, ss_status st, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
const char *ss_status_name(ss_status st);

/* ------------------------------------------------------------------ */
/* Allocation hook (fault tests inject failures through it)            */
/* ------------------------------------------------------------------ */

typedef struct ss_allocator {
    void *(*malloc_fn)(size_t n);
    void *(*realloc_fn)(void *p, size_t n);
    void (*free_fn)(void *p);
} ss_allocator;

/* Install an allocator for all library allocations (NULL restores libc).
 * Also routes jansson's allocations. Not thread-safe; call before use. */
void ss_set_allocator(const ss_allocator *a);
void *ss_malloc(size_t n);
void *ss_calloc(size_t count, size_t size); /* overflow-checked */
void *ss_realloc(void *p, size_t n);
/* Grow the array *p of `size`-byte items (capacity *cap items) to hold at
 * least `need`, doubling from 16; 0, or -1 with *p and *cap unchanged. */
int ss_grow(void **p, int *cap, int need, size_t size);
void ss_free(void *p);
char *ss_strdup(const char *s);

/* ------------------------------------------------------------------ */
/* Output files (core/outfile.c; the rules in core/outfile.h)           */
/* ------------------------------------------------------------------ */

/* Can an output be written at path? "-" (standard output) can; a path that
 * exists must be a regular file the user may write (a symbolic link is
 * followed to one); its directory must exist and take a new file (probed by
 * creating and removing a temp file). Call it before the work whose result
 * goes there. SS_ERR_INVALID (empty path, not a regular file, dangling
 * link) or SS_ERR_IO (no such directory, not writable), naming the path. */
ss_status ss_output_check(const char *path, ss_diag *d);

/* Remove the temp files of the outputs being written right now. Only
 * async-signal-safe calls: for a signal handler, before the process dies. */
void ss_output_remove_temps(void);

#ifdef __cplusplus
}
#endif
#endif /* SIMSEARCH_BASE_H */
