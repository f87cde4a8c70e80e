/*
 * report.h — the simulation result as data: per-device array storage of
 * ss_sim_result and its JSON form (the object `simsearch simulate --json`
 * prints and the search embeds for its best plan and baselines).
 *
 * A result's nine per-device arrays live in one block owned by the result
 * (compute_us is the block's base); ss_sim_result_clear frees it. The JSON
 * writer is the single place that knows the field names (docs/simulator.md).
 */
#ifndef SS_REPORT_H
#define SS_REPORT_H

#include "simsearch.h"
#include <jansson.h>

/* Make room for n devices (keeps contents only when no growth is needed).
 * On NOMEM r is unchanged. */
ss_status ss_sim_result_reserve(ss_sim_result *r, int n, ss_diag *d);

/* The result as a new JSON object (caller json_decref's it), plan_label may
 * be NULL (then "plan" is null). NULL on allocation failure. */
json_t *ss_sim_result_json(const ss_sim_result *r, const char *plan_label);

#endif /* SS_REPORT_H */
