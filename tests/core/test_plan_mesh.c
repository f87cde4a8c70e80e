/*
 * test_plan_mesh.c — mesh expressions of device lists (core/plan_mesh.h):
 * fit then expand gives the list back, entry for entry, on random meshes
 * (strides positive, zero and negative) and on random irregular lists (which
 * either fit exactly or are refused); the shapes Megatron plans make. Plan
 * files that use them: tests/cli/cost_plan.sh.
 */
#include "core/plan_mesh.h"
#include "testutil.h"

#include <stdlib.h>
#include <string.h>

static uint64_t rng = 88172645463325252ULL;
static uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static void check_roundtrip(const int *dev, int n, int must_fit)
{
    ss_mesh m;
    int ok = ss_mesh_fit(dev, n, &m);
    if (must_fit)
        assert_true(ok);
    if (!ok)
        return;
    assert_int_equal(ss_mesh_count(&m, INT64_MAX), n);
    for (int a = 0; a < m.n_axes; a++)
        assert_true(m.shape[a] >= 2);
    int *back = malloc((size_t)n * sizeof *back);
    ss_mesh_expand(&m, back);
    assert_memory_equal(back, dev, (size_t)n * sizeof *dev);
    free(back);
}

static void test_random_meshes(void **state)
{
    (void)state;
    int dev[4096];
    for (int it = 0; it < 2000; it++) {
        ss_mesh m = {0};
        m.n_axes = (int)(next() % 5);
        int64_t n = 1;
        for (int a = 0; a < m.n_axes; a++) {
            m.shape[a] = 1 + (int64_t)(next() % 6);
            n *= m.shape[a];
            m.strides[a] = (int64_t)(next() % 9) - 3;
        }
        int64_t lo, hi;
        m.offset = 0;
        ss_mesh_range(&m, &lo, &hi);
        m.offset = -lo + (int64_t)(next() % 5);
        ss_mesh_expand(&m, dev);
        check_roundtrip(dev, (int)n, 1);
    }
}

static void test_irregular(void **state)
{
    (void)state;
    int dev[64];
    int refused = 0;
    for (int it = 0; it < 2000; it++) {
        int n = 1 + (int)(next() % 64);
        for (int j = 0; j < n; j++)
            dev[j] = (int)(next() % 8);
        ss_mesh m;
        refused += !ss_mesh_fit(dev, n, &m);
        check_roundtrip(dev, n, 0);
    }
    assert_true(refused > 1500); /* random lists are mostly no mesh */
    int odd[] = {0, 5, 3, 1};
    ss_mesh m;
    assert_false(ss_mesh_fit(odd, 4, &m));
}

/* Megatron's data-parallel-with-micro-batches pattern and a tp x dp grid. */
static void test_megatron_shapes(void **state)
{
    (void)state;
    int dev[8 * 192];
    for (int r = 0; r < 8; r++)
        for (int k = 0; k < 192; k++)
            dev[r * 192 + k] = 8 * r + 3; /* dp 8, stride 8 (tp 8), 192 micro-batches */
    ss_mesh m;
    assert_true(ss_mesh_fit(dev, 8 * 192, &m));
    assert_int_equal(m.n_axes, 2);
    assert_int_equal(m.offset, 3);
    assert_int_equal(m.shape[0], 8);
    assert_int_equal(m.strides[0], 8);
    assert_int_equal(m.shape[1], 192);
    assert_int_equal(m.strides[1], 0);
    check_roundtrip(dev, 8 * 192, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random_meshes),
        cmocka_unit_test(test_irregular),
        cmocka_unit_test(test_megatron_shapes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
