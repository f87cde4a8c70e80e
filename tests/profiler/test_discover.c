/*
 * test_discover.c — hwloc discovery of this host: at least one device, the
 * cores as CPU-core devices, every link marked estimated, every device
 * reachable, and the JSON loads back to the same machine.
 */
#include "testutil.h"

#include <math.h>
#include <string.h>
#include <unistd.h>

static void test_discover_host(void **state)
{
    (void)state;
    ss_diag d;
    ss_diag_init(&d);
    ss_machine *m = NULL;
    ss_status st = ss_machine_discover(&m, &d);
    if (st != SS_OK)
        print_error("discover: %s\n", d.msg);
    assert_int_equal(st, SS_OK);
    int n = ss_machine_n_devices(m);
    assert_true(n >= 1);
    assert_int_equal(ss_machine_n_hosts(m), 1);
    int cores = 0, gpus = 0;
    for (int i = 0; i < n; i++) {
        const ss_device *dv = ss_machine_device(m, i);
        const ss_device_type *t = ss_machine_type(m, dv->type);
        if (t->is_cpu) {
            assert_string_equal(t->name, "CPU-core");
            assert_true(t->mem_gib > 0);
            cores++;
        } else {
            assert_non_null(ss_devtype_find_builtin(t->name));
            gpus++;
        }
        assert_int_equal(dv->local_rank, i);
    }
    /* hwloc counts physical cores; sysconf counts logical CPUs (>= cores) */
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    assert_true(cores >= 1);
    if (online > 0)
        assert_true(cores <= online);
    for (int l = 0; l < ss_machine_n_links(m); l++)
        assert_int_equal(ss_machine_link(m, l)->estimated, 1);
    for (int a = 0; a < n; a++)
        for (int b = 0; b < n; b++)
            assert_true(ss_machine_path_gbps(m, a, b) > 0);
    if (n >= 2) /* core -> NUMA switch -> core: two shared-memory hops */
        assert_near(ss_machine_path_gbps(m, 0, 1), 10.0, 0);
    print_message("discovered %d cores and %d GPUs\n", cores, gpus);

    char *s = NULL;
    assert_int_equal(ss_machine_to_string(m, &s, &d), SS_OK);
    assert_non_null(strstr(s, "\"estimated\": true"));
    ss_machine *r = NULL;
    assert_int_equal(ss_machine_load_string(s, "discovered.json", &r, &d), SS_OK);
    ss_free(s);
    assert_true(ss_machine_fingerprint(r) == ss_machine_fingerprint(m));
    assert_int_equal(ss_machine_n_devices(r), n);
    ss_machine_free(r);
    ss_machine_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_discover_host),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
