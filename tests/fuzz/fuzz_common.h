/*
 * fuzz_common.h — shared by the libFuzzer harnesses of the three loaders
 * (tests/fuzz/fuzz_*.c): the input as a NUL-terminated string, and the rule
 * every failed load must keep (a status that is an input error or out of
 * memory, and a message that names the source).
 */
#ifndef SS_FUZZ_COMMON_H
#define SS_FUZZ_COMMON_H

#include "simsearch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FUZZ_LABEL "fuzz-input.json"

/* data[0..size) as a new NUL-terminated string (NULL if it holds a NUL:
 * the loaders take C strings, so such inputs say nothing new). */
static inline char *fuzz_text(const uint8_t *data, size_t size)
{
    if (memchr(data, 0, size))
        return NULL;
    char *s = malloc(size + 1);
    if (!s)
        abort();
    memcpy(s, data, size);
    s[size] = '\0';
    return s;
}

/* A failed load: input errors name the source; anything else is a bug. */
static inline void fuzz_check_failure(ss_status st, const ss_diag *d)
{
    if (st == SS_ERR_NOMEM)
        return;
    if (st != SS_ERR_PARSE && st != SS_ERR_INVALID) {
        fprintf(stderr, "unexpected status %s: %s\n", ss_status_name(st), d->msg);
        abort();
    }
    if (!strstr(d->msg, FUZZ_LABEL)) {
        fprintf(stderr, "message does not name the source: %s\n", d->msg);
        abort();
    }
}

#endif
