/*
 * test_types.c — enum names and parsers round-trip; sizes of dtypes; unknown
 * names and out-of-range values are handled without crashing.
 */
#include "testutil.h"

#include <string.h>

static void test_dtypes(void **state)
{
    (void)state;
    assert_int_equal(ss_dtype_size(SS_F32), 4);
    assert_int_equal(ss_dtype_size(SS_F16), 2);
    assert_int_equal(ss_dtype_size(SS_BF16), 2);
    assert_int_equal(ss_dtype_size(SS_I32), 4);
    assert_int_equal(ss_dtype_size(SS_I64), 8);
    assert_int_equal(ss_dtype_size((ss_dtype)99), 0);
    assert_string_equal(ss_dtype_name(SS_BF16), "bf16");
    assert_string_equal(ss_dtype_name((ss_dtype)-1), "?");
    for (int i = 0; i < SS_DTYPE_COUNT; i++) {
        ss_dtype t = SS_I64;
        assert_int_equal(ss_dtype_parse(ss_dtype_name((ss_dtype)i), &t), 0);
        assert_int_equal(t, i);
    }
    ss_dtype t = SS_F16;
    assert_int_equal(ss_dtype_parse("float32", &t), -1);
    assert_int_equal(ss_dtype_parse(NULL, &t), -1);
    assert_int_equal(t, SS_F16); /* untouched on error */
}

static void test_op_types(void **state)
{
    (void)state;
    assert_string_equal(ss_op_type_name(SS_OP_LINEAR), "linear");
    assert_string_equal(ss_op_type_name(SS_OP_BATCH_MATMUL), "batch_matmul");
    assert_string_equal(ss_op_type_name(SS_OP_SOFTMAX_CE), "softmax_ce");
    assert_string_equal(ss_op_type_name(SS_OP_TYPE_COUNT), "?");
    for (int i = 0; i < SS_OP_TYPE_COUNT; i++) {
        ss_op_type t = SS_OP_INPUT;
        const char *n = ss_op_type_name((ss_op_type)i);
        assert_string_not_equal(n, "?");
        assert_int_equal(ss_op_type_parse(n, &t), 0);
        assert_int_equal(t, i);
        for (int j = 0; j < i; j++) /* names are distinct */
            assert_string_not_equal(n, ss_op_type_name((ss_op_type)j));
    }
    ss_op_type t = SS_OP_CONV2D;
    assert_int_equal(ss_op_type_parse("Linear", &t), -1);
    assert_int_equal(t, SS_OP_CONV2D);
}

static void test_kinds_optimizers_precisions(void **state)
{
    (void)state;
    assert_string_equal(ss_dim_kind_name(SS_DIM_SAMPLE), "sample");
    assert_string_equal(ss_dim_kind_name(SS_DIM_ATTRIBUTE), "attribute");
    assert_string_equal(ss_dim_kind_name(SS_DIM_PARAMETER), "parameter");
    assert_string_equal(ss_dim_kind_name((ss_dim_kind)7), "?");

    const char *opts[] = {"sgd", "sgd_momentum", "adam"};
    for (int i = 0; i < 3; i++) {
        ss_optimizer o = SS_OPT_SGD;
        assert_string_equal(ss_optimizer_name((ss_optimizer)i), opts[i]);
        assert_int_equal(ss_optimizer_parse(opts[i], &o), 0);
        assert_int_equal(o, i);
    }
    ss_optimizer o = SS_OPT_ADAM;
    assert_int_equal(ss_optimizer_parse("adamw", &o), -1);
    assert_int_equal(o, SS_OPT_ADAM);
    assert_string_equal(ss_optimizer_name((ss_optimizer)3), "?");

    ss_precision p = SS_PREC_FP32;
    assert_int_equal(ss_precision_parse("mixed", &p), 0);
    assert_int_equal(p, SS_PREC_MIXED);
    assert_string_equal(ss_precision_name(SS_PREC_FP32), "fp32");
    assert_int_equal(ss_precision_parse("fp16", &p), -1);
    assert_int_equal(p, SS_PREC_MIXED);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dtypes),
        cmocka_unit_test(test_op_types),
        cmocka_unit_test(test_kinds_optimizers_precisions),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
