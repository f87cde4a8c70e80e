/*
 * test_json_util.c — strict JSON helpers: messages name the file and the
 * place, unknown keys and wrong types are rejected, writes are atomic.
 */
#include "testutil.h"
#include "core/json_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void test_syntax_error_has_line_column(void **state)
{
    (void)state;
    ss_diag d;
    ss_diag_init(&d);
    json_t *j = NULL;
    assert_int_equal(ss_json_parse_string("{\n  \"a\": 1,\n  \"b\": }", "x.json", &j, &d),
                     SS_ERR_PARSE);
    assert_null(j);
    assert_non_null(strstr(d.msg, "x.json:3:"));
}

static void test_duplicate_keys_rejected(void **state)
{
    (void)state;
    ss_diag d;
    ss_diag_init(&d);
    json_t *j = NULL;
    assert_int_equal(ss_json_parse_string("{\"a\": 1, \"a\": 2}", "dup.json", &j, &d),
                     SS_ERR_PARSE);
    assert_non_null(strstr(d.msg, "dup.json"));
}

static void test_header_and_keys(void **state)
{
    (void)state;
    ss_diag d;
    json_t *j = NULL;
    ss_diag_init(&d);
    assert_int_equal(ss_json_parse_string("{\"format\":\"simsearch-x\",\"version\":1,\"zz\":0}",
                                          "h.json", &j, &d),
                     SS_OK);
    assert_int_equal(ss_json_check_header("h.json", j, "simsearch-x", 1, &d), SS_OK);
    static const char *const keys[] = {"format", "version", NULL};
    assert_int_equal(ss_json_check_keys("h.json", "$", j, keys, &d), SS_ERR_PARSE);
    assert_non_null(strstr(d.msg, "unknown key \"zz\""));
    assert_non_null(strstr(d.msg, "h.json: $"));
    ss_diag_init(&d);
    assert_int_equal(ss_json_check_header("h.json", j, "simsearch-y", 1, &d), SS_ERR_PARSE);
    assert_non_null(strstr(d.msg, "$.format"));
    json_decref(j);

    ss_diag_init(&d);
    assert_int_equal(ss_json_parse_string("{\"format\":\"simsearch-x\",\"version\":7}", "v.json",
                                          &j, &d),
                     SS_OK);
    assert_int_equal(ss_json_check_header("v.json", j, "simsearch-x", 1, &d), SS_ERR_INVALID);
    assert_non_null(strstr(d.msg, "$.version"));
    json_decref(j);
}

static void test_typed_getters(void **state)
{
    (void)state;
    ss_diag d;
    json_t *j = NULL;
    ss_diag_init(&d);
    assert_int_equal(ss_json_parse_string("{\"n\": 5, \"x\": 2.5, \"s\": \"hi\", \"b\": true, "
                                          "\"big\": 1000000000000, \"neg\": -3, \"str\": \"1\"}",
                                          "t.json", &j, &d),
                     SS_OK);
    int64_t n = 0;
    double x = 0;
    const char *s = NULL;
    int b = 0;
    assert_int_equal(ss_json_get_int("t.json", "$", j, "n", 1, 1, 10, &n, &d), SS_OK);
    assert_int_equal(n, 5);
    assert_int_equal(ss_json_get_num("t.json", "$", j, "x", 1, 0, 10, &x, &d), SS_OK);
    assert_true(x == 2.5);
    assert_int_equal(ss_json_get_num("t.json", "$", j, "n", 1, 0, 10, &x, &d), SS_OK);
    assert_true(x == 5.0);
    assert_int_equal(ss_json_get_str("t.json", "$", j, "s", 1, 8, &s, &d), SS_OK);
    assert_string_equal(s, "hi");
    assert_int_equal(ss_json_get_bool("t.json", "$", j, "b", 1, &b, &d), SS_OK);
    assert_int_equal(b, 1);
    n = 42;
    assert_int_equal(ss_json_get_int("t.json", "$", j, "absent", 0, 1, 10, &n, &d), SS_OK);
    assert_int_equal(n, 42);

    assert_int_equal(ss_json_get_int("t.json", "$.dev", j, "big", 1, 1, 1 << 20, &n, &d),
                     SS_ERR_INVALID);
    assert_non_null(strstr(d.msg, "$.dev.big"));
    assert_non_null(strstr(d.msg, "out of range"));
    assert_int_equal(n, 42);

    ss_diag_init(&d);
    assert_int_equal(ss_json_get_int("t.json", "$", j, "str", 1, 0, 9, &n, &d), SS_ERR_PARSE);
    assert_non_null(strstr(d.msg, "expected an integer, got a string"));
    ss_diag_init(&d);
    assert_int_equal(ss_json_get_int("t.json", "$", j, "missing", 1, 0, 9, &n, &d), SS_ERR_PARSE);
    assert_non_null(strstr(d.msg, "missing required key \"missing\""));
    ss_diag_init(&d);
    assert_int_equal(ss_json_get_num("t.json", "$", j, "neg", 1, 0, 9, &x, &d), SS_ERR_INVALID);
    json_t *child = NULL;
    ss_diag_init(&d);
    assert_int_equal(ss_json_get_child("t.json", "$", j, "s", JSON_ARRAY, 1, &child, &d),
                     SS_ERR_PARSE);
    assert_non_null(strstr(d.msg, "expected an array, got a string"));
    json_decref(j);
}

static void test_first_error_kept(void **state)
{
    (void)state;
    ss_diag d;
    ss_diag_init(&d);
    assert_int_equal(ss_diag_set(&d, SS_ERR_IO, "first %d", 1), SS_ERR_IO);
    assert_int_equal(ss_diag_set(&d, SS_ERR_PARSE, "second"), SS_ERR_PARSE);
    assert_int_equal(d.status, SS_ERR_IO);
    assert_string_equal(d.msg, "first 1");
    assert_int_equal(ss_diag_set(NULL, SS_ERR_IO, "x"), SS_ERR_IO);
}

static void test_atomic_write_and_fingerprint(void **state)
{
    (void)state;
    char path[] = "/tmp/ss_json_test_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    ss_diag d;
    ss_diag_init(&d);
    json_t *j = json_pack("{s:s, s:i}", "format", "simsearch-x", "version", 1);
    assert_int_equal(ss_json_write_atomic(path, j, &d), SS_OK);
    json_t *back = NULL;
    assert_int_equal(ss_json_parse_file(path, &back, &d), SS_OK);
    assert_true(json_equal(j, back));
    json_decref(back);
    /* A directory that does not exist: error, no file left behind. */
    assert_int_equal(ss_json_write_atomic("/nonexistent-dir/x.json", j, &d), SS_ERR_IO);
    assert_non_null(strstr(d.msg, "/nonexistent-dir/x.json"));
    json_decref(j);
    remove(path);

    char hex[17];
    uint64_t fp = 0x0123456789abcdefULL, back_fp = 0;
    ss_fingerprint_hex(fp, hex);
    assert_string_equal(hex, "0123456789abcdef");
    assert_int_equal(ss_fingerprint_parse(hex, &back_fp), 0);
    assert_true(back_fp == fp);
    assert_int_equal(ss_fingerprint_parse("xyz", &back_fp), -1);
    assert_true(ss_fnv_str(SS_FNV_INIT, "a") != ss_fnv_str(SS_FNV_INIT, "b"));
}

static void test_reals_shortest_exact(void **state)
{
    (void)state;
    ss_diag d;
    ss_diag_init(&d);
    double vals[] = {0.1, 1.0 / 3.0, 2.2940483093261719, -1e-7, 12.5, 1e300, 3.0};
    json_t *arr = json_array();
    for (size_t i = 0; i < sizeof vals / sizeof vals[0]; i++)
        json_array_append_new(arr, json_real(vals[i]));
    json_t *root = json_pack("{s:s, s:o}", "name", "na\"me 0.10000000000000001", "x", arr);
    char *text = NULL;
    assert_int_equal(ss_json_to_string(root, &text, &d), SS_OK);
    assert_non_null(strstr(text, "0.1,"));
    assert_null(strstr(text, "0.10000000000000001,"));
    assert_non_null(strstr(text, "na\\\"me 0.10000000000000001")); /* strings untouched */
    assert_non_null(strstr(text, "12.5"));
    assert_non_null(strstr(text, "3.0"));
    json_t *back = NULL;
    assert_int_equal(ss_json_parse_string(text, "r.json", &back, &d), SS_OK);
    json_t *barr = json_object_get(back, "x");
    for (size_t i = 0; i < sizeof vals / sizeof vals[0]; i++) {
        json_t *v = json_array_get(barr, i);
        assert_true(json_is_real(v));
        assert_true(json_real_value(v) == vals[i]);
    }
    json_decref(back);
    json_decref(root);
    ss_free(text);
}

/* A directory given as a JSON file says so (not "invalid JSON"). */
static void test_directory_input(void **state)
{
    (void)state;
    char dir[] = "/tmp/ss_jdir_XXXXXX";
    assert_non_null(mkdtemp(dir));
    ss_diag d;
    ss_diag_init(&d);
    json_t *j = NULL;
    assert_int_equal(ss_json_parse_file(dir, &j, &d), SS_ERR_IO);
    assert_null(j);
    assert_non_null(strstr(d.msg, dir));
    assert_non_null(strstr(d.msg, "is a directory"));
    rmdir(dir);
}

/* A message longer than the diag keeps its head and its end: the reason
 * after a 4,000-character path survives, and so does the file name. */
static void test_long_message_keeps_reason(void **state)
{
    (void)state;
    static char path[4200];
    size_t n = 0;
    while (n < 4000) {
        memcpy(path + n, "/abcdefghijklmnopqrstuvwxyz0123456789", 37);
        n += 37;
    }
    strcpy(path + n, "/topology-file.json");
    ss_diag d;
    ss_diag_init(&d);
    ss_diag_set(&d, SS_ERR_INVALID, "%s: $.links[3].gbps: value %g out of range (expected %g to %g)",
                path, 1e-300, 1e-6, 1e6);
    assert_int_equal(d.status, SS_ERR_INVALID);
    size_t len = strlen(d.msg);
    assert_true(len < SS_DIAG_MSG_MAX);
    assert_true(len > SS_DIAG_MSG_MAX / 2);
    assert_int_equal(strncmp(d.msg, path, 100), 0);
    assert_non_null(strstr(d.msg, " [...] "));
    assert_non_null(strstr(d.msg, "/topology-file.json: $.links[3].gbps: value 1e-300 out of range "
                                  "(expected 1e-06 to 1e+06)"));
    /* a message that fits is left whole */
    ss_diag_init(&d);
    ss_diag_set(&d, SS_ERR_INVALID, "%.3000s: short", path);
    assert_int_equal(strlen(d.msg), 3000 + strlen(": short"));
    assert_null(strstr(d.msg, "[...]"));
}

static void test_allocator_hook(void **state)
{
    (void)state;
    ss_test_fail_after(0);
    assert_null(ss_malloc(16));
    ss_diag d;
    ss_diag_init(&d);
    json_t *j = NULL;
    assert_int_not_equal(ss_json_parse_string("{\"a\": [1, 2, 3]}", "f.json", &j, &d), SS_OK);
    assert_null(j);
    ss_test_fail_after(-1);
    void *p = ss_calloc(SIZE_MAX / 2, 4);
    assert_null(p);
    p = ss_calloc(4, 4);
    assert_non_null(p);
    ss_free(p);
    ss_free(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_syntax_error_has_line_column),
        cmocka_unit_test(test_duplicate_keys_rejected),
        cmocka_unit_test(test_header_and_keys),
        cmocka_unit_test(test_typed_getters),
        cmocka_unit_test(test_first_error_kept),
        cmocka_unit_test(test_atomic_write_and_fingerprint),
        cmocka_unit_test(test_reals_shortest_exact),
        cmocka_unit_test(test_allocator_hook),
        cmocka_unit_test(test_directory_input),
        cmocka_unit_test(test_long_message_keeps_reason),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
