/*
 * testutil.h — helpers shared by the unit tests: paths to fixtures, a
 * double comparison, the running of a file's tests in parts, a failing
 * allocator for fault-injection tests, and the
 * graph, operand and gradient-check helpers of the kernel tests
 * (tests/kernels/).
 */
#ifndef SS_TESTUTIL_H
#define SS_TESTUTIL_H

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "simsearch.h"

/* Absolute path of a file in the source tree (SS_SOURCE_DIR set by ctest).
 * Returns a static buffer (overwritten by the next call). */
const char *ss_test_path(const char *rel);

/* Parts of a test file as ctest entries of their own (CMakeLists.txt's
 * ss_test_parts, so that ctest -j runs a long file's tests side by side):
 * every test file's cmocka_run_group_tests goes through ss_test_run_group,
 * which runs only the tests named in SS_TEST_ONLY, or all but those named
 * in SS_TEST_SKIP (comma-separated cmocka test names), all when neither is
 * set. A name that is no test of the file is an error (exit 1, saying
 * which), so a renamed test cannot drop out of the suite unseen. */
int ss_test_run_group(const char *group, const struct CMUnitTest *tests, size_t n,
                      CMFixtureFunction setup, CMFixtureFunction teardown);
#undef cmocka_run_group_tests
#define cmocka_run_group_tests(group_tests, group_setup, group_teardown)                   \
    ss_test_run_group(#group_tests, group_tests, sizeof(group_tests) / sizeof((group_tests)[0]), \
                      group_setup, group_teardown)

/* cmocka 1.1.5 has no double comparison: fail unless |a - b| <= eps, with
 * the values printed on failure. */
#define assert_near(a, b, eps)                                                     \
    do {                                                                           \
        double a_ = (a), b_ = (b);                                                 \
        if (!(fabs(a_ - b_) <= (eps)))                                             \
            fail_msg("%s = %.17g, expected %.17g", #a, a_, b_);                    \
    } while (0)

/* Fault injection: after ss_test_fail_after(n), the n-th following
 * allocation (0-based) and all later ones fail; ss_test_fail_after(-1)
 * disables. ss_test_alloc_count() counts allocations since the last call to
 * ss_test_fail_after. The allocator is installed by ss_test_fail_after. */
void ss_test_fail_after(long n);
long ss_test_alloc_count(void);

/* ------------------------------------------------- kernel-test helpers
 * Shared by tests/kernels/test_kernels_*.c. They build into ss_kt_graph and
 * draw from ss_kt_rng; any failure is a cmocka fail_msg. */
struct ss_kargs;
extern uint64_t ss_kt_rng;   /* state of ss_kt_rnd; a test seeds it */
extern ss_graph *ss_kt_graph; /* the graph the helpers add to */

/* A uniform draw in [lo, hi] (a fixed LCG, so tests are reproducible). */
int64_t ss_kt_rnd(int64_t lo, int64_t hi);
/* Add an input of the given shape; returns its tensor. Dim 0 is sample,
 * dims 2 and 3 of a 4-d input are attribute, the others parameter. */
int ss_kt_input(const char *name, int nd, const int64_t *shape, ss_dtype t);
/* The same with every dim but 0 a parameter dim. */
int ss_kt_input_flat(const char *name, int nd, const int64_t *shape, ss_dtype t);
/* Add an operator; returns its index. */
int ss_kt_add(const char *name, ss_op_type type, const ss_op_attrs *a, int n, const int *in);
const ss_op *ss_kt_op(int op);
/* Set up and run the CPU forward of a tile (the whole op when t is NULL). */
void ss_kt_run(int op, const ss_tile *t, struct ss_kargs *a, uint64_t seed);
float *ss_kt_x(const struct ss_kargs *a, int i);
float *ss_kt_y(const struct ss_kargs *a, int k);
int64_t ss_kt_nx(const struct ss_kargs *a, int i);
int64_t ss_kt_ny(const struct ss_kargs *a, int k);
/* Fail unless |got - want| <= tol * (1 + |want|) element by element. */
void ss_kt_expect_close(const float *got, const double *want, int64_t n, double tol,
                        const char *what);
/* L = sum_k <y_k, dy_k>. */
double ss_kt_loss(const struct ss_kargs *a);
/* CPU backward vs central differences on 6 sampled elements per float operand. */
void ss_kt_check_grad(struct ss_kargs *a, const char *what);
/* Replace ss_kt_graph by an empty graph. */
void ss_kt_new_graph(void);
/* cmocka teardown: frees ss_kt_graph. */
int ss_kt_teardown(void **state);

#endif
