/*
 * test_memory.c — per-device memory with liveness: the per-parameter rule,
 * the alloc/free sweep with hand-computed peaks, region unions, and that
 * allocation failures leave the tracker unchanged.
 */
#include "testutil.h"
#include "simulator/memory.h"

#include <string.h>

static void test_param_bytes_rule(void **state)
{
    (void)state;
    double w, g, o;
    /* fp32: weight = dtype size, gradient = weight, optimizer state 0/4/8 */
    ss_memory_param_bytes(SS_F32, SS_OPT_SGD, SS_PREC_FP32, &w, &g, &o);
    assert_true(w == 4 && g == 4 && o == 0);
    ss_memory_param_bytes(SS_F32, SS_OPT_SGD_MOMENTUM, SS_PREC_FP32, &w, &g, &o);
    assert_true(w == 4 && g == 4 && o == 4);
    ss_memory_param_bytes(SS_F32, SS_OPT_ADAM, SS_PREC_FP32, &w, &g, &o);
    assert_true(w == 4 && g == 4 && o == 8);
    /* mixed + Adam: 2 (half weights) + 2 (half grads) + 4 (fp32 master) + 8 = 16 */
    ss_memory_param_bytes(SS_BF16, SS_OPT_ADAM, SS_PREC_MIXED, &w, &g, &o);
    assert_true(w == 2 && g == 2 && o == 12);
    assert_true(w + g + o == 16);
    /* mixed + momentum: 2 + 2 + 4 + 4 = 12 */
    ss_memory_param_bytes(SS_F16, SS_OPT_SGD_MOMENTUM, SS_PREC_MIXED, NULL, NULL, &o);
    assert_true(o == 8);
}

static void test_static_accumulates(void **state)
{
    (void)state;
    ss_diag d;
    ss_diag_init(&d);
    ss_memory *mm = ss_memory_new();
    assert_non_null(mm);
    assert_int_equal(ss_memory_reset(mm, 2, &d), SS_OK);
    /* device 0: 1000 fp32 params with momentum: 1000 * (4 + 4 + 4) = 12000 */
    ss_memory_add_params(mm, 0, 1000, SS_F32, SS_OPT_SGD_MOMENTUM, SS_PREC_FP32);
    /* device 1: 500 + 500 mixed Adam params: 1000 * 16 = 16000, weights 2000 */
    ss_memory_add_params(mm, 1, 500, SS_BF16, SS_OPT_ADAM, SS_PREC_MIXED);
    ss_memory_add_params(mm, 1, 500, SS_BF16, SS_OPT_ADAM, SS_PREC_MIXED);
    /* out of range is ignored */
    ss_memory_add_params(mm, 2, 500, SS_BF16, SS_OPT_ADAM, SS_PREC_MIXED);
    assert_true(ss_memory_weight_bytes(mm, 0) == 4000);
    assert_true(ss_memory_static_bytes(mm, 0) == 12000);
    assert_true(ss_memory_weight_bytes(mm, 1) == 2000);
    assert_true(ss_memory_static_bytes(mm, 1) == 16000);
    /* reset forgets everything */
    assert_int_equal(ss_memory_reset(mm, 3, &d), SS_OK);
    assert_true(ss_memory_static_bytes(mm, 1) == 0);
    assert_int_equal(ss_memory_n_devices(mm), 3);
    ss_memory_free(mm);
    ss_memory_free(NULL);
}

static ss_mem_interval iv(int dev, ss_mem_kind k, double bytes, int t0, int e0, int t1, int e1)
{
    ss_mem_interval v;
    v.device = dev;
    v.kind = k;
    v.bytes = bytes;
    v.alloc.task = t0;
    v.alloc.at_end = e0;
    v.release.task = t1;
    v.release.at_end = e1;
    return v;
}

/*
 * Tasks (start, end):  t0 [0,10]  t1 [10,20]  t2 [20,30]  t3 [5,25]  t4 [12,12]
 * Device 0, static 800 bytes (100 fp32 SGD params x (4 + 4)).
 *   A: activation 100 B, start t0 .. end t2      live [0, 30)
 *   B: workspace   50 B, start t1 .. end t1      live [10, 20)
 *   C: buffer      30 B, end t0 .. start t1      zero lifetime -> never counts
 *   D: workspace   70 B, start t0 .. end t0      live [0, 10): freed at 10
 *      exactly when B is allocated, so D and B never coexist.
 *   E: activation  20 B, start t3 .. end t3      live [5, 25)
 * Sum over time: [0,5) 170  [5,10) 190  [10,20) 170  [20,25) 120  [25,30) 100
 * Peak = 800 + 190 = 990.
 * Device 1: static 0, one buffer 1000 B from start t4 to end t4 (zero length)
 * and one 10 B from start t1 to end t3: peak 10.
 * Device 2: nothing: peak 0.
 */
static void test_sweep_hand_computed(void **state)
{
    (void)state;
    ss_diag d;
    ss_diag_init(&d);
    ss_memory *mm = ss_memory_new();
    assert_int_equal(ss_memory_reset(mm, 3, &d), SS_OK);
    ss_memory_add_params(mm, 0, 100, SS_F32, SS_OPT_SGD, SS_PREC_FP32);
    ss_mem_interval v[] = {
        iv(0, SS_MEM_ACTIVATION, 100, 0, 0, 2, 1), iv(0, SS_MEM_WORKSPACE, 50, 1, 0, 1, 1),
        iv(0, SS_MEM_BUFFER, 30, 0, 1, 1, 0),      iv(0, SS_MEM_WORKSPACE, 70, 0, 0, 0, 1),
        iv(0, SS_MEM_ACTIVATION, 20, 3, 0, 3, 1),  iv(1, SS_MEM_BUFFER, 1000, 4, 0, 4, 1),
        iv(1, SS_MEM_BUFFER, 10, 1, 0, 3, 1),
    };
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        assert_int_equal(ss_memory_add(mm, &v[i], &d), SS_OK);
    assert_int_equal(ss_memory_n_intervals(mm), 7);
    double start[] = {0, 10, 20, 5, 12}, end[] = {10, 20, 30, 25, 12};
    double peak[3] = {-1, -1, -1};
    assert_int_equal(ss_memory_sweep(mm, start, end, peak, &d), SS_OK);
    assert_true(peak[0] == 990);
    assert_true(peak[1] == 10);
    assert_true(peak[2] == 0);
    /* Same input, same answer (sweep is repeatable: the intervals stay). */
    double peak2[3];
    assert_int_equal(ss_memory_sweep(mm, start, end, peak2, &d), SS_OK);
    assert_memory_equal(peak, peak2, sizeof peak);
    /* Move workspace D to start t1 .. end t1: it now coexists with A, B, E:
     * [0,5) 100  [5,10) 120  [10,20) 100 + 50 + 70 + 20 = 240 -> 800 + 240 = 1040. */
    ss_memory_reset(mm, 3, &d);
    ss_memory_add_params(mm, 0, 100, SS_F32, SS_OPT_SGD, SS_PREC_FP32);
    v[3] = iv(0, SS_MEM_WORKSPACE, 70, 1, 0, 1, 1);
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        assert_int_equal(ss_memory_add(mm, &v[i], &d), SS_OK);
    assert_int_equal(ss_memory_sweep(mm, start, end, peak, &d), SS_OK);
    assert_true(peak[0] == 1040);
    ss_memory_free(mm);
}

/* Ranks of the hand-computed example's times 0 5 10 12 20 25 30: 0..6. */
static void test_sweep_ranked_hand_computed(void **state)
{
    (void)state;
    ss_diag d;
    ss_diag_init(&d);
    ss_memory *mm = ss_memory_new();
    assert_int_equal(ss_memory_reset(mm, 3, &d), SS_OK);
    ss_memory_add_params(mm, 0, 100, SS_F32, SS_OPT_SGD, SS_PREC_FP32);
    ss_mem_interval v[] = {
        iv(0, SS_MEM_ACTIVATION, 100, 0, 0, 2, 1), iv(0, SS_MEM_WORKSPACE, 50, 1, 0, 1, 1),
        iv(0, SS_MEM_BUFFER, 30, 0, 1, 1, 0),      iv(0, SS_MEM_WORKSPACE, 70, 0, 0, 0, 1),
        iv(0, SS_MEM_ACTIVATION, 20, 3, 0, 3, 1),  iv(1, SS_MEM_BUFFER, 1000, 4, 0, 4, 1),
        iv(1, SS_MEM_BUFFER, 10, 1, 0, 3, 1),
    };
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        assert_int_equal(ss_memory_add(mm, &v[i], &d), SS_OK);
    /* times start {0, 10, 20, 5, 12}, end {10, 20, 30, 25, 12} */
    int32_t rs[] = {0, 2, 4, 1, 3}, re[] = {2, 4, 6, 5, 3};
    double peak[3] = {-1, -1, -1};
    assert_int_equal(ss_memory_sweep_ranked(mm, rs, re, 7, peak, &d), SS_OK);
    assert_true(peak[0] == 990);
    assert_true(peak[1] == 10);
    assert_true(peak[2] == 0);
    assert_int_equal(ss_memory_sweep_ranked(mm, rs, re, -1, peak, &d), SS_ERR_INVALID);
    ss_memory_free(mm);
}

static uint64_t rng_next(uint64_t *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}

/* Random intervals over few distinct times (many ties: frees before allocs,
 * then interval order) with bytes whose sums round: the ranked sweep must
 * return the comparison sweep's peaks bit for bit. */
static void test_sweep_ranked_equals_sorted(void **state)
{
    (void)state;
    enum { NT = 300, NIV = 3000, ND = 5, NTIMES = 40 };
    ss_diag d;
    ss_diag_init(&d);
    ss_memory *mm = ss_memory_new();
    static double st[NT], en[NT];
    static int32_t rs[NT], re[NT];
    uint64_t x = 88172645463325252ull;
    for (int round = 0; round < 20; round++) {
        assert_int_equal(ss_memory_reset(mm, ND, &d), SS_OK);
        ss_memory_add_params(mm, round % ND, 1000 + round, SS_F32, SS_OPT_ADAM, SS_PREC_FP32);
        /* time k is 0.1 * k^2 + k / 3: increasing in k, rank = k */
        for (int t = 0; t < NT; t++) {
            int a = (int)(rng_next(&x) % NTIMES);
            int b = a + (int)(rng_next(&x) % 4);
            if (b >= NTIMES)
                b = NTIMES - 1;
            st[t] = 0.1 * a * a + a / 3.0;
            en[t] = 0.1 * b * b + b / 3.0;
            rs[t] = a;
            re[t] = b;
        }
        for (int i = 0; i < NIV; i++) {
            ss_mem_interval v = iv((int)(rng_next(&x) % ND), SS_MEM_BUFFER,
                                   1.0 / (double)(1 + rng_next(&x) % 97) * 1e6,
                                   (int)(rng_next(&x) % NT), (int)(rng_next(&x) % 2),
                                   (int)(rng_next(&x) % NT), (int)(rng_next(&x) % 2));
            assert_int_equal(ss_memory_add(mm, &v, &d), SS_OK);
        }
        double p1[ND], p2[ND];
        assert_int_equal(ss_memory_sweep(mm, st, en, p1, &d), SS_OK);
        assert_int_equal(ss_memory_sweep_ranked(mm, rs, re, NTIMES, p2, &d), SS_OK);
        assert_memory_equal(p1, p2, sizeof p1);
        for (int v = 0; v < ND; v++)
            assert_true(p1[v] > ss_memory_static_bytes(mm, v));
    }
    ss_memory_free(mm);
}

static void test_add_rejects_bad_intervals(void **state)
{
    (void)state;
    ss_diag d;
    ss_diag_init(&d);
    ss_memory *mm = ss_memory_new();
    assert_int_equal(ss_memory_reset(mm, 2, &d), SS_OK);
    ss_mem_interval bad = iv(5, SS_MEM_BUFFER, 10, 0, 0, 0, 1);
    assert_int_equal(ss_memory_add(mm, &bad, &d), SS_ERR_INVALID);
    assert_non_null(strstr(d.msg, "device 5"));
    ss_diag_init(&d);
    bad = iv(0, SS_MEM_BUFFER, 10, -1, 0, 0, 1);
    assert_int_equal(ss_memory_add(mm, &bad, &d), SS_ERR_INVALID);
    /* zero bytes: accepted and ignored */
    bad = iv(0, SS_MEM_BUFFER, 0, 0, 0, 0, 1);
    assert_int_equal(ss_memory_add(mm, &bad, NULL), SS_OK);
    assert_int_equal(ss_memory_n_intervals(mm), 0);
    assert_int_equal(ss_memory_reset(mm, -1, &d), SS_ERR_INVALID);
    assert_int_equal(ss_memory_n_devices(mm), 2);
    ss_memory_free(mm);
}

static ss_region reg2(int64_t a0, int64_t a1, int64_t b0, int64_t b1)
{
    ss_region r;
    memset(&r, 0, sizeof r);
    r.ndim = 2;
    r.r[0].lo = a0;
    r.r[0].hi = a1;
    r.r[1].lo = b0;
    r.r[1].hi = b1;
    return r;
}

static void test_region_union(void **state)
{
    (void)state;
    /* [0,4)x[0,4) and [2,6)x[2,6): 16 + 16 - 4 = 28 */
    ss_region a[] = {reg2(0, 4, 0, 4), reg2(2, 6, 2, 6)};
    assert_int_equal(ss_memory_region_union(a, 2), 28);
    /* three identical replicas: 16 */
    ss_region b[] = {reg2(0, 4, 0, 4), reg2(0, 4, 0, 4), reg2(0, 4, 0, 4)};
    assert_int_equal(ss_memory_region_union(b, 3), 16);
    /* two disjoint column shards plus one covering both: 8x4 = 32 */
    ss_region c[] = {reg2(0, 8, 0, 2), reg2(0, 8, 2, 4), reg2(0, 8, 0, 4)};
    assert_int_equal(ss_memory_region_union(c, 3), 32);
    /* three pairwise-overlapping: [0,3)x[0,3), [1,4)x[1,4), [2,5)x[2,5):
     * 27 - (4 + 1 + 4) + 1 = 19 */
    ss_region e[] = {reg2(0, 3, 0, 3), reg2(1, 4, 1, 4), reg2(2, 5, 2, 5)};
    assert_int_equal(ss_memory_region_union(e, 3), 19);
    assert_int_equal(ss_memory_region_union(e, 0), 0);
    /* allocation failure is reported as -1 */
    ss_test_fail_after(0);
    assert_int_equal(ss_memory_region_union(e, 3), -1);
    ss_test_fail_after(-1);
}

static void test_fault_injection(void **state)
{
    (void)state;
    ss_diag d;
    ss_test_fail_after(0);
    assert_null(ss_memory_new());
    ss_test_fail_after(-1);
    ss_memory *mm = ss_memory_new();
    ss_diag_init(&d);
    assert_int_equal(ss_memory_reset(mm, 1, &d), SS_OK);
    ss_memory_add_params(mm, 0, 10, SS_F32, SS_OPT_SGD, SS_PREC_FP32);
    /* growing the device table fails: unchanged */
    ss_test_fail_after(0);
    assert_int_equal(ss_memory_reset(mm, 100, &d), SS_ERR_NOMEM);
    ss_test_fail_after(-1);
    assert_int_equal(ss_memory_n_devices(mm), 1);
    assert_true(ss_memory_static_bytes(mm, 0) == 80);
    /* first interval allocation fails: nothing added */
    ss_mem_interval v = iv(0, SS_MEM_BUFFER, 10, 0, 0, 0, 1);
    ss_diag_init(&d);
    ss_test_fail_after(0);
    assert_int_equal(ss_memory_add(mm, &v, &d), SS_ERR_NOMEM);
    ss_test_fail_after(-1);
    assert_int_equal(ss_memory_n_intervals(mm), 0);
    /* sweep's event array fails: peak untouched */
    assert_int_equal(ss_memory_add(mm, &v, &d), SS_OK);
    double start[] = {0}, end[] = {5}, peak[1] = {-7};
    ss_diag_init(&d);
    ss_test_fail_after(0);
    assert_int_equal(ss_memory_sweep(mm, start, end, peak, &d), SS_ERR_NOMEM);
    ss_test_fail_after(-1);
    assert_true(peak[0] == -7);
    assert_int_equal(ss_memory_sweep(mm, start, end, peak, &d), SS_OK);
    assert_true(peak[0] == 90);
    /* ranked sweep's scratch fails: peak untouched */
    int32_t rs[] = {0}, re[] = {1};
    peak[0] = -7;
    ss_diag_init(&d);
    ss_test_fail_after(0);
    assert_int_equal(ss_memory_sweep_ranked(mm, rs, re, 2, peak, &d), SS_ERR_NOMEM);
    ss_test_fail_after(-1);
    assert_true(peak[0] == -7);
    assert_int_equal(ss_memory_sweep_ranked(mm, rs, re, 2, peak, &d), SS_OK);
    assert_true(peak[0] == 90);
    ss_memory_free(mm);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_param_bytes_rule),
        cmocka_unit_test(test_static_accumulates),
        cmocka_unit_test(test_sweep_hand_computed),
        cmocka_unit_test(test_sweep_ranked_hand_computed),
        cmocka_unit_test(test_sweep_ranked_equals_sorted),
        cmocka_unit_test(test_add_rejects_bad_intervals),
        cmocka_unit_test(test_region_union),
        cmocka_unit_test(test_fault_injection),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
