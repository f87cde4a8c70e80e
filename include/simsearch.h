/*
 * simsearch.h — the public C API of simsearch.
 *
 * simsearch finds a fast parallelization plan for training a deep network on a
 * cluster without running it there. The layers, bottom up:
 *   core       errors (ss_diag), allocation hook, graph IR with operator
 *              semantics, machine model (topology), plans, strict JSON I/O
 *   models     the model zoo (builders for known networks)
 *   kernels    forward/backward kernels per op type and backend (kernels/kernels.h)
 *   profiler   per-operator-tile costs (analytic roofline, profile database,
 *              live measurement: profiler/profile_db.h, profiler/measure.h)
 *   simulator  task graph + event simulation (see simulator/ headers)
 *   search     MCMC / ILP plan search (see search/ headers)
 *
 * The declarations live in one header per topic under simsearch/ (the way
 * hwloc splits its public header by topic), included below in dependency order:
 *   limits.h   every limit (SS_MAX_DIMS, SS_NAME_MAX, SS_MACHINE_MAX_DEVICES
 *              ...), what it bounds, why, what happens past it
 *   base.h     ss_status, ss_diag, the allocation hook, output-file checks
 *   graph.h    dtypes, dimension kinds, the graph IR
 *   ops.h      operator semantics (tiles, work)
 *   model.h    model JSON I/O and the zoo
 *   machine.h  the machine model (topology)
 *   plan.h     plans, plan I/O and generators, Megatron specs
 *   cost.h     per-tile costs (profiler)
 *   sim.h      simulation
 *   search.h   plan search
 * Include this header; a topic header alone also compiles (tests/headers).
 *
 * Conventions (DESIGN.md, "House style"):
 *   - Functions return ss_status; details of a failure go into an ss_diag,
 *     which keeps the first message. On error nothing the caller owns was
 *     changed and every out-pointer is left NULL / untouched.
 *   - Opaque objects have _new/_free pairs; _free(NULL) is a no-op.
 *   - Plain data (ss_tensor, ss_op, ss_device ...) is read-only to users;
 *     getters return borrowed pointers that live as long as their container.
 *   - The library never prints and never exits.
 */
#ifndef SIMSEARCH_H
#define SIMSEARCH_H

#include <stddef.h>
#include <stdint.h>

#include "simsearch/limits.h"
#include "simsearch/base.h"
#include "simsearch/graph.h"
#include "simsearch/ops.h"
#include "simsearch/model.h"
#include "simsearch/machine.h"
#include "simsearch/plan.h"
#include "simsearch/cost.h"
#include "simsearch/sim.h"
#include "simsearch/search.h"

#endif /* SIMSEARCH_H */
