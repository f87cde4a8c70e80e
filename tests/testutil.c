/*
 * testutil.c — fixture paths, running a file's tests in parts
 * (SS_TEST_ONLY, SS_TEST_SKIP), the fault-injecting allocator and the
 * kernel-test helpers (testutil.h).
 */
#include "testutil.h"
#include "kernels/kernels.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *ss_test_path(const char *rel)
{
    static char buf[4096];
    const char *root = getenv("SS_SOURCE_DIR");
    snprintf(buf, sizeof buf, "%s/%s", root ? root : ".", rel);
    return buf;
}

/* Whether name is one of the comma-separated names of list. */
static bool in_list(const char *list, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = list; *p;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len == n && strncmp(p, name, n) == 0)
            return true;
        p += len + (end != NULL);
    }
    return false;
}

/* Exit 1, naming it, when a name of list (from variable var) is no test. */
static void check_list(const char *var, const char *list, const struct CMUnitTest *tests,
                       size_t n)
{
    for (const char *p = list; *p;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        bool found = false;
        for (size_t i = 0; i < n && !found; i++)
            found = strlen(tests[i].name) == len && strncmp(tests[i].name, p, len) == 0;
        if (!found) {
            fprintf(stderr, "%s: \"%.*s\" is no test of this file\n", var, (int)len, p);
            exit(1);
        }
        p += len + (end != NULL);
    }
}

int ss_test_run_group(const char *group, const struct CMUnitTest *tests, size_t n,
                      CMFixtureFunction setup, CMFixtureFunction teardown)
{
    const char *only = getenv("SS_TEST_ONLY");
    const char *skip = getenv("SS_TEST_SKIP");
    if (only && !*only)
        only = NULL;
    if (skip && !*skip)
        skip = NULL;
    if (!only && !skip)
        return _cmocka_run_group_tests(group, tests, n, setup, teardown);
    if (only && skip) {
        fprintf(stderr, "SS_TEST_ONLY and SS_TEST_SKIP are both set: set one\n");
        exit(1);
    }
    check_list(only ? "SS_TEST_ONLY" : "SS_TEST_SKIP", only ? only : skip, tests, n);
    struct CMUnitTest *sel = malloc((n ? n : 1) * sizeof *sel);
    if (!sel) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (only ? in_list(only, tests[i].name) : !in_list(skip, tests[i].name))
            sel[k++] = tests[i];
    int rc = _cmocka_run_group_tests(group, sel, k, setup, teardown);
    free(sel);
    return rc;
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

/* ------------------------------------------------- kernel-test helpers */

uint64_t ss_kt_rng;

int64_t ss_kt_rnd(int64_t lo, int64_t hi) /* [lo, hi] */
{
    ss_kt_rng = ss_kt_rng * 6364136223846793005ULL + 1442695040888963407ULL;
    return lo + (int64_t)((ss_kt_rng >> 33) % (uint64_t)(hi - lo + 1));
}

ss_graph *ss_kt_graph;

static int input_kinds(const char *name, int nd, const int64_t *shape, ss_dtype t,
                       bool spatial)
{
    ss_op_attrs a = {0};
    a.ndim = nd;
    for (int i = 0; i < nd; i++) {
        a.shape[i] = shape[i];
        a.kind[i] = i == 0 ? SS_DIM_SAMPLE : (spatial && nd == 4 && i >= 2) ? SS_DIM_ATTRIBUTE
                                                                              : SS_DIM_PARAMETER;
    }
    a.dtype = t;
    ss_diag d;
    ss_diag_init(&d);
    int op = ss_graph_add(ss_kt_graph, name, SS_OP_INPUT, &a, 0, NULL, &d);
    if (op < 0)
        fail_msg("%s", d.msg);
    return ss_graph_out(ss_kt_graph, op);
}

int ss_kt_input(const char *name, int nd, const int64_t *shape, ss_dtype t)
{
    return input_kinds(name, nd, shape, t, true);
}

int ss_kt_input_flat(const char *name, int nd, const int64_t *shape, ss_dtype t)
{
    return input_kinds(name, nd, shape, t, false);
}

int ss_kt_add(const char *name, ss_op_type type, const ss_op_attrs *a, int n, const int *in)
{
    ss_diag d;
    ss_diag_init(&d);
    int op = ss_graph_add(ss_kt_graph, name, type, a, n, in, &d);
    if (op < 0)
        fail_msg("%s", d.msg);
    return op;
}

const ss_op *ss_kt_op(int op) { return ss_graph_op(ss_kt_graph, op); }

/* Set up and run the forward of a tile (the whole op when t is NULL). */
void ss_kt_run(int op, const ss_tile *t, ss_kargs *a, uint64_t seed)
{
    ss_tile full;
    ss_op_full_tile(ss_kt_graph, ss_kt_op(op), &full);
    ss_diag d;
    ss_diag_init(&d);
    if (ss_kernel_setup(a, SS_BACKEND_CPU, ss_kt_graph, ss_kt_op(op), t ? t : &full, &d) != SS_OK ||
        ss_kernel_alloc(a, SS_BACKEND_CPU, 0, seed, &d) != SS_OK ||
        ss_kernel_forward(SS_BACKEND_CPU, a, &d) != SS_OK)
        fail_msg("%s", d.msg);
}

float *ss_kt_x(const ss_kargs *a, int i) { return a->x[i]; }
float *ss_kt_y(const ss_kargs *a, int k) { return a->y[k]; }
int64_t ss_kt_nx(const ss_kargs *a, int i) { return ss_region_volume(&a->xr[i]); }
int64_t ss_kt_ny(const ss_kargs *a, int k) { return ss_region_volume(&a->yr[k]); }

void ss_kt_expect_close(const float *got, const double *want, int64_t n, double tol,
                         const char *what)
{
    for (int64_t i = 0; i < n; i++)
        if (!(fabs(got[i] - want[i]) <= tol * (1 + fabs(want[i]))))
            fail_msg("%s: element %lld is %g, reference %g", what, (long long)i, got[i],
                     want[i]);
}

double ss_kt_loss(const ss_kargs *a)
{
    double s = 0;
    for (int k = 0; k < a->n_y; k++)
        for (int64_t i = 0; i < ss_kt_ny(a, k); i++)
            s += (double)ss_kt_y(a, k)[i] * ((float *)a->dy[k])[i];
    return s;
}

/* Backward vs central differences on up to `samples` elements per float operand. */
void ss_kt_check_grad(ss_kargs *a, const char *what)
{
    ss_diag d;
    ss_diag_init(&d);
    assert_int_equal(ss_kernel_backward(SS_BACKEND_CPU, a, &d), SS_OK);
    float *grads[SS_MAX_OPERANDS] = {0};
    for (int i = 0; i < a->n_x; i++)
        if (a->dx[i]) {
            grads[i] = malloc(ss_kernel_x_bytes(a, i));
            memcpy(grads[i], a->dx[i], ss_kernel_x_bytes(a, i));
        }
    const float h = 1e-2f;
    for (int i = 0; i < a->n_x; i++) {
        if (!grads[i])
            continue;
        int64_t n = ss_kt_nx(a, i);
        for (int s = 0; s < 6 && n > 0; s++) {
            int64_t j = ss_kt_rnd(0, n - 1);
            float *x = ss_kt_x(a, i), keep = x[j];
            x[j] = keep + h;
            ss_kernel_forward(SS_BACKEND_CPU, a, &d);
            double lp = ss_kt_loss(a);
            x[j] = keep - h;
            ss_kernel_forward(SS_BACKEND_CPU, a, &d);
            double lm = ss_kt_loss(a);
            x[j] = keep;
            double fd = (lp - lm) / (2 * h), an = grads[i][j];
            if (!(fabs(fd - an) <= 2e-2 * (1 + fabs(an))))
                fail_msg("%s: d/d operand %d [%lld]: backward %g, finite difference %g", what,
                         i, (long long)j, an, fd);
        }
        free(grads[i]);
    }
    ss_kernel_forward(SS_BACKEND_CPU, a, &d);
}

void ss_kt_new_graph(void)
{
    ss_graph_free(ss_kt_graph);
    ss_kt_graph = ss_graph_new("k");
    assert_non_null(ss_kt_graph);
}

int ss_kt_teardown(void **state)
{
    (void)state;
    ss_graph_free(ss_kt_graph);
    ss_kt_graph = NULL;
    return 0;
}
