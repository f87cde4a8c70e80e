/*
 * build_fixture.h — the task-graph builder fixture the builder's tests
 * share (test_build.c, test_pipeline.c, test_build_host.c): a graph and a
 * machine, and around them a cost model, a plan (every op one tile on
 * device 0), a builder, a task graph, memory intervals and an engine.
 * Header-only: each test includes it once.
 */
#ifndef SS_TEST_BUILD_FIXTURE_H
#define SS_TEST_BUILD_FIXTURE_H

#include "testutil.h"
#include "simulator/build.h"
#include "simulator/engine.h"
#include "simulator/memory.h"
#include "simulator/taskgraph.h"

#include <stdio.h>
#include <string.h>

typedef struct fix {
    ss_graph *g;
    ss_machine *m;
    ss_costmodel *cm;
    ss_plan *p;
    ss_builder *b;
    ss_taskgraph *tg;
    ss_memory *mm;
    ss_engine *e;
    const ss_engine_result *r;
} fix;

/* The rest of the fixture around f->g and f->m. */
static inline void fix_complete(fix *f)
{
    f->cm = ss_cost_new(f->m);
    f->p = ss_plan_new(f->g, f->m);
    f->b = ss_build_new(f->g, f->m, f->cm);
    f->tg = ss_taskgraph_new(0, 0);
    f->mm = ss_memory_new();
    f->e = ss_engine_new();
    assert_true(f->cm && f->p && f->b && f->tg && f->mm && f->e);
}

/* The fixture for a model and a topology file (paths from the source tree). */
static inline void fix_load(fix *f, const char *model, const char *topo)
{
    ss_diag d;
    ss_diag_init(&d);
    char path[4096];
    memset(f, 0, sizeof *f);
    snprintf(path, sizeof path, "%s", ss_test_path(model));
    assert_int_equal(ss_model_load(path, &f->g, &d), SS_OK);
    snprintf(path, sizeof path, "%s", ss_test_path(topo));
    assert_int_equal(ss_machine_load(path, &f->m, &d), SS_OK);
    fix_complete(f);
}

static inline void fix_free(fix *f)
{
    ss_engine_free(f->e);
    ss_memory_free(f->mm);
    ss_taskgraph_free(f->tg);
    ss_build_free(f->b);
    ss_plan_free(f->p);
    ss_cost_free(f->cm);
    ss_machine_free(f->m);
    ss_graph_free(f->g);
}

#endif
