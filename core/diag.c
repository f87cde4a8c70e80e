/*
 * diag.c — error objects and the allocation hook.
 *
 * Invariant: an ss_diag keeps the first error recorded into it, so the message
 * a user sees names the root cause, not a consequence. Every library
 * allocation goes through ss_malloc/ss_realloc/ss_free so fault tests can make
 * any allocation fail; jansson is routed through the same hook.
 */
#include "simsearch.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void ss_diag_init(ss_diag *d)
{
    if (!d)
        return;
    d->status = SS_OK;
    d->msg[0] = '\0';
}

/* msg holds the first size-1 of the n > size-1 characters fmt makes: keep
 * its head and the tail (the reason comes last in "FILE: $.path: reason"),
 * eliding the middle, so an over-long path or key never hides the reason.
 * Without memory for the full text, the cut head stays, marked. */
static void elide(char *msg, size_t size, size_t n, const char *fmt, va_list ap)
{
    static const char mark[] = " [...] ";
    size_t ml = sizeof mark - 1, head = (size - 1) / 4, tail = size - 1 - head - ml;
    char *full = ss_malloc(n + 1);
    if (!full) {
        memcpy(msg + size - 1 - ml, mark, ml + 1);
        return;
    }
    vsnprintf(full, n + 1, fmt, ap);
    memcpy(msg + head, mark, ml);
    memcpy(msg + head + ml, full + n - tail, tail);
    msg[size - 1] = '\0';
    ss_free(full);
}

ss_status ss_diag_set(ss_diag *d, ss_status st, const char *fmt, ...)
{
    if (!d || d->status != SS_OK || st == SS_OK)
        return st;
    va_list ap, ap2;
    va_start(ap, fmt);
    va_copy(ap2, ap);
    int n = vsnprintf(d->msg, sizeof d->msg, fmt, ap);
    va_end(ap);
    if (n >= (int)sizeof d->msg)
        elide(d->msg, sizeof d->msg, (size_t)n, fmt, ap2);
    va_end(ap2);
    d->status = st;
    return st;
}

const char *ss_status_name(ss_status st)
{
    switch (st) {
    case SS_OK: return "ok";
    case SS_ERR_NOMEM: return "out of memory";
    case SS_ERR_INVALID: return "invalid input";
    case SS_ERR_PARSE: return "parse error";
    case SS_ERR_IO: return "I/O error";
    case SS_ERR_INFEASIBLE: return "infeasible";
    case SS_ERR_UNSUPPORTED: return "unsupported";
    case SS_ERR_INTERRUPTED: return "interrupted";
    }
    return "unknown status";
}

static ss_allocator current = {malloc, realloc, free};

void ss_set_allocator(const ss_allocator *a)
{
    if (a) {
        current = *a;
    } else {
        current.malloc_fn = malloc;
        current.realloc_fn = realloc;
        current.free_fn = free;
    }
    json_set_alloc_funcs(current.malloc_fn, current.free_fn);
}

void *ss_malloc(size_t n) { return current.malloc_fn(n ? n : 1); }

void *ss_calloc(size_t count, size_t size)
{
    if (size && count > SIZE_MAX / size)
        return NULL;
    size_t n = count * size;
    void *p = current.malloc_fn(n ? n : 1);
    if (p)
        memset(p, 0, n);
    return p;
}

void *ss_realloc(void *p, size_t n) { return current.realloc_fn(p, n ? n : 1); }

int ss_grow(void **p, int *cap, int need, size_t size)
{
    if (need <= *cap)
        return 0;
    int nc = *cap ? *cap : 16;
    while (nc < need)
        nc *= 2;
    void *q = ss_realloc(*p, (size_t)nc * size);
    if (!q)
        return -1;
    *p = q;
    *cap = nc;
    return 0;
}

void ss_free(void *p)
{
    if (p)
        current.free_fn(p);
}

char *ss_strdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *c = ss_malloc(n);
    if (c)
        memcpy(c, s, n);
    return c;
}
