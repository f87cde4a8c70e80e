/*
 * fuzz_model.c — libFuzzer harness for ss_model_load_string. Oracles: no
 * crash, leak or undefined behaviour (ASan/UBSan); a failure is an input
 * error whose message names the source; a loaded model saves to a string
 * that loads back with the same fingerprint. Seed corpus: tests/data/models
 * and the model_* files of tests/data/bad.
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
    ss_graph *g = NULL;
    ss_status st = ss_model_load_string(text, FUZZ_LABEL, &g, &d);
    if (st != SS_OK) {
        fuzz_check_failure(st, &d);
    } else {
        char *out = NULL;
        ss_graph *g2 = NULL;
        ss_diag_init(&d);
        if (ss_model_to_string(g, &out, &d) != SS_OK ||
            ss_model_load_string(out, FUZZ_LABEL, &g2, &d) != SS_OK ||
            ss_graph_fingerprint(g2) != ss_graph_fingerprint(g)) {
            fprintf(stderr, "model round trip failed: %s\n", d.msg);
            abort();
        }
        ss_graph_free(g2);
        ss_free(out);
        ss_graph_free(g);
    }
    free(text);
    return 0;
}
