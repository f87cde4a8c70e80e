/*
 * test_coin.c — search/coin.c when COIN-OR's libraries are absent: the
 * module is compiled here with sonames that do not exist (and its public
 * names renamed, so they do not clash with the library's copy), so every
 * open fails the way it would on a machine without coinor-libcbc3 /
 * coinor-libclp1: NULL, SS_ERR_UNSUPPORTED, a message naming the library,
 * the Debian package and what needs it; the same on every later call; and
 * the library's own copy (the real sonames) opens them.
 */
#define ss_coin_cbc_open absent_cbc_open
#define ss_coin_clp_open absent_clp_open
#define ss_coin_cbc_loaded absent_cbc_loaded
#define ss_coin_clp_loaded absent_clp_loaded
#define SS_CBC_SONAME "libCbcSolver-absent.so.0"
#define SS_CLP_SONAME "libClp-absent.so.0"
#include "search/coin.c"
#undef ss_coin_cbc_open
#undef ss_coin_clp_open
#undef ss_coin_cbc_loaded
#undef ss_coin_clp_loaded

#include "testutil.h"

#include <string.h>

const ss_coin_cbc *ss_coin_cbc_open(ss_diag *d);
const ss_coin_clp *ss_coin_clp_open(ss_diag *d);

static void test_absent(void **state)
{
    (void)state;
    for (int k = 0; k < 2; k++) {
        ss_diag d;
        ss_diag_init(&d);
        assert_null(absent_cbc_open(&d));
        assert_int_equal(d.status, SS_ERR_UNSUPPORTED);
        assert_non_null(strstr(d.msg, "libCbcSolver-absent.so.0"));
        assert_non_null(strstr(d.msg, "coinor-libcbc3"));
        assert_non_null(strstr(d.msg, "sharding ILP"));
        assert_false(absent_cbc_loaded());
        ss_diag_init(&d);
        assert_null(absent_clp_open(&d));
        assert_int_equal(d.status, SS_ERR_UNSUPPORTED);
        assert_non_null(strstr(d.msg, "libClp-absent.so.0"));
        assert_non_null(strstr(d.msg, "coinor-libclp1"));
        assert_non_null(strstr(d.msg, "averaging LP"));
        assert_false(absent_clp_loaded());
    }
    assert_null(absent_clp_open(NULL)); /* no diag: still NULL, nothing written */
}

static void test_present(void **state)
{
    (void)state;
    const ss_coin_clp *clp = ss_coin_clp_open(NULL);
    assert_non_null(clp);
    assert_non_null(clp->Clp_newModel);
    Clp_Simplex *m = clp->Clp_newModel();
    assert_non_null(m);
    clp->Clp_deleteModel(m);
    const ss_coin_cbc *cbc = ss_coin_cbc_open(NULL);
    assert_non_null(cbc);
    assert_ptr_equal(cbc, ss_coin_cbc_open(NULL));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_absent),
        cmocka_unit_test(test_present),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
