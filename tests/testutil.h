/*
 * testutil.h — helpers shared by the unit tests: paths to fixtures, and a
 * failing allocator for fault-injection tests.
 */
#ifndef SS_TESTUTIL_H
#define SS_TESTUTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "simsearch.h"

/* Absolute path of a file in the source tree (SS_SOURCE_DIR set by ctest).
 * Returns a static buffer (overwritten by the next call). */
const char *ss_test_path(const char *rel);

/* Fault injection: after ss_test_fail_after(n), the n-th following
 * allocation (0-based) and all later ones fail; ss_test_fail_after(-1)
 * disables. ss_test_alloc_count() counts allocations since the last call to
 * ss_test_fail_after. The allocator is installed by ss_test_fail_after. */
void ss_test_fail_after(long n);
long ss_test_alloc_count(void);

#endif
