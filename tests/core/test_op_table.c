/*
 * test_op_table.c — the operator table (core/op_table.h) is complete: every
 * ss_op_type has an entry, the entry names its own type, its required hooks
 * are set, its name is unique and round-trips through ss_op_type_parse, and
 * its model JSON keys are consistent with its attribute reader and writer.
 * Adding an operator type without its entry (or with half of one) fails
 * here. Also: the dispatchers treat out-of-range types safely, and
 * ss_op_has_kernel follows the entries' flags.
 */
#include "testutil.h"

#include "core/op_table.h"

#include <string.h>

/* Whether key is in the NULL-terminated list keys. */
static int has_key(const char *const *keys, const char *key)
{
    for (const char *const *k = keys; *k; k++)
        if (strcmp(*k, key) == 0)
            return 1;
    return 0;
}

/* Number of keys beyond the ones every operator object may hold. */
static int attr_keys(const char *const *keys)
{
    static const char *const common[] = {SS_OP_COMMON_KEYS, NULL};
    int n = 0;
    for (const char *const *k = keys; *k; k++)
        n += !has_key(common, *k);
    return n;
}

static void test_every_type_has_a_complete_entry(void **state)
{
    (void)state;
    for (int t = 0; t < SS_OP_TYPE_COUNT; t++) {
        const ss_op_class *c = ss_op_class_of((ss_op_type)t);
        if (!c)
            fail_msg("operator type %d has no table entry (core/ops.c)", t);
        assert_int_equal(c->type, t);
        assert_non_null(c->name);
        assert_true(c->name[0] != '\0');
        assert_non_null(c->infer);
        assert_non_null(c->split_mask);
        assert_non_null(c->input_region);
        assert_non_null(c->work);
        assert_true(c->arity == SS_OP_ANY_INPUTS ||
                    (c->arity >= 0 && c->arity <= SS_MAX_INPUTS));
        assert_int_equal(c->flags & ~(unsigned)(SS_OPF_NO_KERNEL | SS_OPF_VIEW_ATTR), 0);

        /* JSON keys: name and type always; attributes need a reader and a writer. */
        assert_non_null(c->keys);
        assert_true(has_key(c->keys, "name"));
        assert_true(has_key(c->keys, "type"));
        if (attr_keys(c->keys) > 0) {
            if (!c->read_attrs || !c->write_attrs)
                fail_msg("'%s' lists attribute keys but lacks read_attrs or write_attrs",
                         c->name);
        } else {
            assert_null(c->write_attrs);
        }
        if (t != SS_OP_INPUT) {
            assert_true(has_key(c->keys, "inputs"));
            assert_true(has_key(c->keys, "weights"));
        }
        for (int i = 0; c->keys[i]; i++) /* keys are distinct */
            for (int j = 0; j < i; j++)
                assert_string_not_equal(c->keys[i], c->keys[j]);
    }
}

static void test_names_unique_and_round_trip(void **state)
{
    (void)state;
    for (int t = 0; t < SS_OP_TYPE_COUNT; t++) {
        const char *n = ss_op_class_of((ss_op_type)t)->name;
        assert_string_equal(ss_op_type_name((ss_op_type)t), n);
        ss_op_type back = SS_OP_TYPE_COUNT;
        assert_int_equal(ss_op_type_parse(n, &back), 0);
        assert_int_equal(back, t);
        for (int u = 0; u < t; u++)
            assert_string_not_equal(n, ss_op_class_of((ss_op_type)u)->name);
    }
}

static void test_out_of_range(void **state)
{
    (void)state;
    assert_null(ss_op_class_of(SS_OP_TYPE_COUNT));
    assert_null(ss_op_class_of((ss_op_type)-1));
    assert_string_equal(ss_op_type_name(SS_OP_TYPE_COUNT), "?");

    /* an op of an unknown type: dispatchers give nothing, never crash */
    ss_graph *g = ss_graph_new("g");
    assert_non_null(g);
    ss_op_attrs a;
    memset(&a, 0, sizeof a);
    a.ndim = 2;
    a.shape[0] = 4;
    a.shape[1] = 8;
    ss_diag d;
    ss_diag_init(&d);
    int x = ss_graph_add(g, "x", SS_OP_INPUT, &a, 0, NULL, &d);
    assert_true(x >= 0);
    ss_op op = *ss_graph_op(g, x);
    op.type = SS_OP_TYPE_COUNT;
    assert_int_equal(ss_op_split_mask(g, &op), 0);
    ss_tile t;
    ss_op_full_tile(g, &op, &t);
    ss_work w;
    ss_op_tile_work(g, &op, &t, &w);
    assert_true(w.fwd_flops == 0 && w.fwd_bytes == 0);
    assert_int_equal(ss_graph_add(g, "y", SS_OP_TYPE_COUNT, &a, 0, NULL, &d), -1);
    assert_int_equal(d.status, SS_ERR_INVALID);
    ss_graph_free(g);
}

static void test_has_kernel(void **state)
{
    (void)state;
    ss_op op;
    memset(&op, 0, sizeof op);
    for (int t = 0; t < SS_OP_TYPE_COUNT; t++) {
        unsigned f = ss_op_class_of((ss_op_type)t)->flags;
        op.type = (ss_op_type)t;
        op.attrs.view = 0;
        assert_int_equal(ss_op_has_kernel(&op), !(f & SS_OPF_NO_KERNEL));
        op.attrs.view = 1;
        assert_int_equal(ss_op_has_kernel(&op),
                         !(f & SS_OPF_NO_KERNEL) && !(f & SS_OPF_VIEW_ATTR));
    }
    op.type = SS_OP_INPUT;
    assert_false(ss_op_has_kernel(&op));
    op.type = SS_OP_RESHAPE;
    assert_false(ss_op_has_kernel(&op));
    op.type = SS_OP_LINEAR;
    assert_true(ss_op_has_kernel(&op));
    op.type = SS_OP_TRANSPOSE;
    op.attrs.view = 0;
    assert_true(ss_op_has_kernel(&op));
    op.attrs.view = 1;
    assert_false(ss_op_has_kernel(&op));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_type_has_a_complete_entry),
        cmocka_unit_test(test_names_unique_and_round_trip),
        cmocka_unit_test(test_out_of_range),
        cmocka_unit_test(test_has_kernel),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
