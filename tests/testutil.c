/*
 * testutil.c — fixture paths and the fault-injecting allocator (testutil.h).
 */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>

const char *ss_test_path(const char *rel)
{
    static char buf[4096];
    const char *root = getenv("SS_SOURCE_DIR");
    snprintf(buf, sizeof buf, "%s/%s", root ? root : ".", rel);
    return buf;
}

static long fail_at = -1;
static long count;

static void *t_malloc(size_t n)
{
    if (fail_at >= 0 && count++ >= fail_at)
        return NULL;
    return malloc(n);
}

static void *t_realloc(void *p, size_t n)
{
    if (fail_at >= 0 && count++ >= fail_at)
        return NULL;
    return realloc(p, n);
}

void ss_test_fail_after(long n)
{
    static const ss_allocator a = {t_malloc, t_realloc, free};
    fail_at = n;
    count = 0;
    ss_set_allocator(n >= 0 ? &a : NULL);
}

long ss_test_alloc_count(void) { return count; }
