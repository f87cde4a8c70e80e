/*
 * test_devpool.c — the pool of distinct device lists (core/devpool.h):
 * equal lists interned once (from any buffer or another pool), references
 * counted, an unreferenced list found again until a sweep frees it, ids
 * dense and reused, the hash a pure function of the entries, allocation
 * failures leave the pool unchanged.
 */
#include "testutil.h"

#include "core/devpool.h"

#include <stdlib.h>
#include <string.h>

static void test_intern_shares(void **state)
{
    (void)state;
    ss_devpool *pool = ss_devpool_new();
    assert_non_null(pool);
    int a[6] = {0, 1, 2, 3, 4, 5}, a2[6] = {0, 1, 2, 3, 4, 5}, b[6] = {0, 1, 2, 3, 4, 6};
    ss_devlist *la = ss_devpool_intern(pool, a, 6);
    assert_non_null(la);
    assert_ptr_not_equal(la->v, a); /* copied */
    assert_memory_equal(la->v, a, sizeof a);
    assert_int_equal(la->refs, 1);
    /* an equal list from another buffer, or from the list itself: the same */
    assert_ptr_equal(ss_devpool_intern(pool, a2, 6), la);
    assert_ptr_equal(ss_devpool_intern(pool, la->v, 6), la);
    assert_int_equal(la->refs, 3);
    /* a prefix, and a list differing in one entry: others */
    ss_devlist *lp = ss_devpool_intern(pool, a, 5), *lb = ss_devpool_intern(pool, b, 6);
    assert_ptr_not_equal(lp, la);
    assert_ptr_not_equal(lb, la);
    assert_int_equal(ss_devpool_count(pool), 3);
    assert_int_equal(ss_devpool_live(pool), 3);
    /* ids: dense, distinct */
    assert_true(la->id >= 0 && la->id < 3);
    assert_true(lp->id >= 0 && lp->id < 3);
    assert_true(lb->id >= 0 && lb->id < 3);
    assert_int_not_equal(la->id, lp->id);
    assert_int_not_equal(la->id, lb->id);
    assert_int_not_equal(lp->id, lb->id);
    assert_int_equal(ss_devpool_ids(pool), 3);
    /* the hash is the entries' own: the same in another pool */
    assert_true(la->hash == ss_devpool_hash(a2, 6));
    ss_devpool *other = ss_devpool_new();
    ss_devlist *lo = ss_devpool_intern_list(other, la);
    assert_non_null(lo);
    assert_ptr_not_equal(lo, la);
    assert_true(lo->hash == la->hash);
    assert_memory_equal(lo->v, a, sizeof a);
    assert_ptr_equal(ss_devpool_intern(other, a, 6), lo);
    ss_devpool_free(other);
    /* invalid input */
    assert_null(ss_devpool_intern(pool, a, 0));
    assert_null(ss_devpool_intern(pool, NULL, 3));
    assert_int_equal(ss_devpool_count(pool), 3);
    ss_devpool_free(pool); /* frees lists whatever their references */
}

/* A list dropped by its last holder stays findable (the same storage, so
 * a config set back costs no allocation) until the unreferenced bytes
 * outgrow the referenced ones plus the slack; then a sweep frees them all
 * and their ids are handed out again. */
static void test_release_and_sweep(void **state)
{
    (void)state;
    ss_devpool *pool = ss_devpool_new();
    int a[4] = {7, 7, 8, 8};
    ss_devlist *la = ss_devpool_intern(pool, a, 4);
    assert_non_null(ss_devpool_intern(pool, a, 4));
    ss_devpool_release(pool, la);
    assert_int_equal(la->refs, 1);
    ss_devpool_release(pool, la);
    assert_int_equal(ss_devpool_live(pool), 0);
    assert_int_equal(ss_devpool_count(pool), 1);
    assert_ptr_equal(ss_devpool_intern(pool, a, 4), la); /* resurrected */
    assert_int_equal(ss_devpool_live(pool), 1);
    size_t held = ss_devpool_bytes(pool);
    /* 1,000 lists of 64 entries made and dropped: about 290 KB unreferenced
     * if none were freed */
    int v[64];
    for (int k = 0; k < 1000; k++) {
        for (int t = 0; t < 64; t++)
            v[t] = k * 64 + t;
        ss_devlist *l = ss_devpool_intern(pool, v, 64);
        assert_non_null(l);
        assert_true(l->id < ss_devpool_ids(pool));
        ss_devpool_release(pool, l);
    }
    assert_true(ss_devpool_bytes(pool) < held + SS_DEVPOOL_SLACK + 64 * 1024);
    assert_true(ss_devpool_ids(pool) < 1000); /* ids of swept lists reused */
    assert_int_equal(ss_devpool_live(pool), 1);
    assert_true(ss_devpool_count(pool) < 1000);
    /* the referenced list survived every sweep */
    assert_int_equal(la->refs, 1);
    assert_memory_equal(la->v, a, sizeof a);
    assert_ptr_equal(ss_devpool_intern(pool, a, 4), la);
    ss_devpool_free(pool);
}

/* Every allocation failure of intern returns NULL and changes nothing;
 * the pool stays usable. */
static void test_alloc_failures(void **state)
{
    (void)state;
    for (long n = 0; n < 8; n++) {
        ss_test_fail_after(n);
        ss_devpool *pool = ss_devpool_new();
        ss_test_fail_after(-1);
        if (pool) {
            ss_devpool_free(pool);
            break;
        }
    }
    ss_devpool *pool = ss_devpool_new();
    int a[3] = {1, 2, 3}, b[3] = {3, 2, 1};
    ss_devlist *la = ss_devpool_intern(pool, a, 3);
    ss_test_fail_after(0);
    assert_null(ss_devpool_intern(pool, b, 3));
    /* an existing list needs no allocation */
    assert_ptr_equal(ss_devpool_intern(pool, a, 3), la);
    ss_test_fail_after(-1);
    assert_int_equal(ss_devpool_count(pool), 1);
    assert_int_equal(la->refs, 2);
    /* the table's growth is best effort: lists still go in when it fails */
    int v[2];
    for (int k = 0; k < 40; k++) {
        v[0] = k;
        v[1] = -k;
        ss_test_fail_after(k == 30 ? 1 : -1); /* the 32nd list: its table growth fails */
        assert_non_null(ss_devpool_intern(pool, v, 2));
    }
    ss_test_fail_after(-1);
    for (int k = 0; k < 40; k++) {
        v[0] = k;
        v[1] = -k;
        ss_devlist *l = ss_devpool_intern(pool, v, 2);
        assert_non_null(l);
        assert_int_equal(l->refs, 2);
    }
    assert_int_equal(ss_devpool_count(pool), 41);
    ss_devpool_free(pool);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_intern_shares),
        cmocka_unit_test(test_release_and_sweep),
        cmocka_unit_test(test_alloc_failures),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
