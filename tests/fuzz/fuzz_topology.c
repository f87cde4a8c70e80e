/*
 * fuzz_topology.c — libFuzzer harness for ss_machine_load_string (explicit
 * and compact topologies). Oracles: no crash, leak or undefined behaviour
 * (ASan/UBSan); a failure is an input error whose message names the source;
 * a loaded machine saves to a string that loads back with the same
 * fingerprint. Seed corpus: topologies/ and the topo_* files of tests/data.
 */
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = fuzz_text(data, size);
    if (!text)
        return 0;
    ss_diag d;
    ss_diag_init(&d);
    ss_machine *m = NULL;
    ss_status st = ss_machine_load_string(text, FUZZ_LABEL, &m, &d);
    if (st != SS_OK) {
        fuzz_check_failure(st, &d);
    } else {
        char *out = NULL;
        ss_machine *m2 = NULL;
        ss_diag_init(&d);
        if (ss_machine_to_string(m, &out, &d) != SS_OK ||
            ss_machine_load_string(out, FUZZ_LABEL, &m2, &d) != SS_OK ||
            ss_machine_fingerprint(m2) != ss_machine_fingerprint(m)) {
            fprintf(stderr, "topology round trip failed: %s\n", d.msg);
            abort();
        }
        ss_machine_free(m2);
        ss_free(out);
        ss_machine_free(m);
    }
    free(text);
    return 0;
}
