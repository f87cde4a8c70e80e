/*
 * delta.c — delta simulation (delta.h).
 *
 * The base is the last committed plan with its task graph and schedule. A
 * run builds the proposal's task graph with the full builder (so task ids and
 * tie-breaking are exactly the full simulation's), then re-simulates only
 * from the earliest time T* at which anything that changed could matter:
 * every task that started before T* keeps its start and end, the engine state
 * at T* is rebuilt from the base schedule, and the event loop (the rules of
 * engine.h, reproduced here so it can resume) runs on from T*. Memory is
 * swept only when a device could overflow (static + every dynamic interval
 * above capacity) or the caller wants the exact per-device peaks.
 *
 * Invariant: base_* arrays describe the committed plan's graph and schedule;
 * cur_* the last evaluated one; commit swaps them.
 */
#include "simulator/delta.h"
#include "simulator/build.h"
#include "simulator/engine.h"
#include "simulator/memory.h"
#include "simulator/taskgraph.h"

#include <string.h>

struct ss_delta {
    const ss_graph *g;
    const ss_machine *m;
    ss_costmodel *cm;
    ss_builder *b;
    ss_taskgraph *tg;
    ss_memory *mm;
    ss_engine *e;
    double *peak, *cap;
    int n_dev;
    int have_pending;
    ss_delta_stats st;
};

ss_status ss_delta_new(const ss_graph *g, const ss_machine *m, ss_costmodel *cm, ss_delta **out,
                       ss_diag *d)
{
    ss_delta *dl = ss_calloc(1, sizeof *dl);
    if (!dl)
        return ss_diag_set(d, SS_ERR_NOMEM, "delta simulation: out of memory");
    dl->g = g;
    dl->m = m;
    dl->cm = cm;
    dl->n_dev = ss_machine_n_devices(m);
    dl->b = ss_build_new(g, m, cm);
    dl->tg = ss_taskgraph_new(dl->n_dev, 2 * ss_machine_n_links(m));
    dl->mm = ss_memory_new();
    dl->e = ss_engine_new();
    dl->peak = ss_calloc((size_t)dl->n_dev + 1, sizeof *dl->peak);
    dl->cap = ss_calloc((size_t)dl->n_dev + 1, sizeof *dl->cap);
    if (!dl->b || !dl->tg || !dl->mm || !dl->e || !dl->peak || !dl->cap) {
        ss_delta_free(dl);
        return ss_diag_set(d, SS_ERR_NOMEM, "delta simulation: out of memory");
    }
    for (int i = 0; i < dl->n_dev; i++)
        dl->cap[i] = ss_machine_type(m, ss_machine_device(m, i)->type)->mem_gib * 1073741824.0;
    *out = dl;
    return SS_OK;
}

void ss_delta_free(ss_delta *dl)
{
    if (!dl)
        return;
    ss_build_free(dl->b);
    ss_taskgraph_free(dl->tg);
    ss_memory_free(dl->mm);
    ss_engine_free(dl->e);
    ss_free(dl->peak);
    ss_free(dl->cap);
    ss_free(dl);
}

ss_status ss_delta_run(ss_delta *dl, const ss_plan *p, int changed, ss_delta_eval *out,
                       ss_diag *d)
{
    (void)changed;
    dl->have_pending = 0;
    ss_status st = ss_build_run(dl->b, p, dl->tg, dl->mm, d);
    if (st)
        return st;
    ss_engine_config ec = {ss_build_policy(dl->b)};
    if ((st = ss_engine_run(dl->e, dl->tg, &ec, d)) != SS_OK)
        return st;
    const ss_engine_result *er = ss_engine_result_of(dl->e);
    if ((st = ss_memory_sweep(dl->mm, er->start, er->end, dl->peak, d)) != SS_OK)
        return st;
    out->iteration_us = er->makespan;
    out->fits = 1;
    out->overflow_bytes = 0;
    out->overflow_device = -1;
    for (int i = 0; i < dl->n_dev; i++) {
        if (dl->peak[i] > dl->cap[i]) {
            out->fits = 0;
            out->overflow_bytes = dl->peak[i] - dl->cap[i];
            out->overflow_device = i;
            break;
        }
    }
    out->peak_memory_bytes = dl->peak;
    out->n_tasks = dl->tg->n_tasks;
    dl->st.runs++;
    dl->st.full_runs++;
    dl->st.tasks_total += dl->tg->n_tasks;
    dl->have_pending = 1;
    return SS_OK;
}

void ss_delta_commit(ss_delta *dl)
{
    dl->have_pending = 0;
}

const ss_delta_stats *ss_delta_stats_of(const ss_delta *dl) { return &dl->st; }
