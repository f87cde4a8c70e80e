/*
 * fuzz_plan.c — libFuzzer harness for ss_plan_load_string, for the zoo
 * model "mlp" on the p100x16 topology (built once; the plan fixtures of
 * tests/data were made for that pair, so the seed corpus reaches past the
 * fingerprint check). Oracles: no crash, leak or undefined behaviour; a
 * failure is an input error whose message names the source; a loaded plan
 * saves to a string that loads back to the same string; ops share a device
 * list id exactly when their device lists are equal (core/devpool.h).
 */
#include "fuzz_common.h"

static const char topology[] =
    "{\"format\": \"simsearch-topology\", \"version\": 1, \"name\": \"p100x16\",\n"
    " \"compact\": {\"nodes\": 4, \"devices_per_node\": 4, \"device_type\": \"P100-SXM2\",\n"
    "  \"intra\": {\"kind\": \"nvlink\", \"topology\": \"all-to-all\", \"gbps\": 20.0, "
    "\"latency_us\": 1.0},\n"
    "  \"inter\": {\"kind\": \"infiniband\", \"gbps\": 12.5, \"latency_us\": 1.0, "
    "\"nics_per_node\": 1, \"pcie_gbps\": 15.75, \"pcie_latency_us\": 2.0}}}\n";

static ss_graph *graph;
static ss_machine *machine;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ss_diag d;
    ss_diag_init(&d);
    if (!machine && (ss_machine_load_string(topology, "p100x16", &machine, &d) != SS_OK ||
                     ss_model_build("mlp", 0, ss_machine_n_devices(machine), &graph, &d) != SS_OK)) {
        fprintf(stderr, "fuzz_plan setup: %s\n", d.msg);
        abort();
    }
    char *text = fuzz_text(data, size);
    if (!text)
        return 0;
    ss_plan *p = NULL;
    ss_status st = ss_plan_load_string(text, FUZZ_LABEL, graph, machine, &p, &d);
    if (st != SS_OK) {
        fuzz_check_failure(st, &d);
    } else {
        for (int i = 0; i < ss_plan_n_ops(p); i++)
            for (int j = 0; j < i; j++) {
                const ss_pconfig *a = ss_plan_config(p, i), *b = ss_plan_config(p, j);
                int same = a->ntiles == b->ntiles &&
                           !memcmp(a->devices, b->devices, (size_t)a->ntiles * sizeof(int));
                if (same != (ss_plan_devlist_id(p, i) == ss_plan_devlist_id(p, j)) ||
                    same != (a->devices == b->devices)) {
                    fprintf(stderr, "ops %d and %d: device lists %s but ids %d, %d\n", i, j,
                            same ? "equal" : "differ", ss_plan_devlist_id(p, i),
                            ss_plan_devlist_id(p, j));
                    abort();
                }
            }
        char *out = NULL, *out2 = NULL;
        ss_plan *p2 = NULL;
        ss_diag_init(&d);
        if (ss_plan_to_string(p, graph, &out, &d) != SS_OK ||
            ss_plan_load_string(out, FUZZ_LABEL, graph, machine, &p2, &d) != SS_OK ||
            ss_plan_to_string(p2, graph, &out2, &d) != SS_OK || strcmp(out, out2) != 0) {
            fprintf(stderr, "plan round trip failed: %s\n", d.msg);
            abort();
        }
        ss_plan_free(p2);
        ss_free(out);
        ss_free(out2);
        ss_plan_free(p);
    }
    free(text);
    return 0;
}
