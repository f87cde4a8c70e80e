/*
 * example.c — a user's program against the installed libsimsearch, built by
 * tests/install/pkgconfig.sh through `pkg-config --cflags --libs simsearch`:
 * simulate one plan of a zoo model on a topology file and print the
 * predicted iteration time (ms, as `simsearch simulate --json` reports it)
 * and whether it fits. Usage: example TOPOLOGY MODEL PLAN. Exit 0 on
 * success, 1 with the library's message otherwise.
 */
#include <simsearch.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: example TOPOLOGY MODEL PLAN\n");
        return 2;
    }
    ss_diag d;
    ss_diag_init(&d);
    ss_machine *m = NULL;
    ss_graph *g = NULL;
    ss_plan *p = NULL;
    ss_costmodel *cm = NULL;
    ss_sim *sim = NULL;
    ss_sim_result r = {0};
    int rc = 1;
    if (ss_machine_load(argv[1], &m, &d) != SS_OK ||
        ss_model_build(argv[2], 0, ss_machine_n_devices(m), &g, &d) != SS_OK ||
        ss_plan_from_spec(argv[3], g, m, &p, &d) != SS_OK)
        goto out;
    if (!(cm = ss_cost_new(m))) {
        ss_diag_set(&d, SS_ERR_NOMEM, "out of memory");
        goto out;
    }
    if (ss_sim_new(g, m, cm, NULL, &sim, &d) != SS_OK || ss_sim_run(sim, p, &r, &d) != SS_OK)
        goto out;
    printf("%.17g %s\n", r.iteration_us / 1e3, r.fits ? "fits" : "does-not-fit");
    rc = 0;
out:
    if (rc)
        fprintf(stderr, "example: %s\n", d.msg);
    ss_sim_result_clear(&r);
    ss_sim_free(sim);
    ss_cost_free(cm);
    ss_plan_free(p);
    ss_graph_free(g);
    ss_machine_free(m);
    return rc;
}
