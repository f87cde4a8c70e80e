/*
 * simsearch/limits.h — every hard limit of simsearch in one commented header
 * (the way SQLite gathers its own in sqliteLimit.h).
 *
 * Each limit says what it bounds, why that value, and what happens past it.
 * Past any limit the loader or command fails with a message naming the file
 * and JSON path (or the option) and the limit (exit status 2 from the CLI):
 * never a crash, never a silently wrong answer. docs/limits.md is the user's
 * view of the same limits, with the exact messages.
 *
 * Invariant: a limit is defined here and nowhere else; internal headers
 * (core/ops.h, core/machine_impl.h, simulator/taskgraph.h,
 * profiler/profile_db.h) get theirs through simsearch.h. The table at the
 * end names the limits that stay private to one module.
 *
 * Part of the public C API. Users include <simsearch.h>, which includes every
 * header under simsearch/ in dependency order; this one also compiles on its own.
 */
#ifndef SIMSEARCH_LIMITS_H
#define SIMSEARCH_LIMITS_H

#include <stdint.h>

/* ---- Messages ---------------------------------------------------- */

/* Bytes of an ss_diag message, with its NUL (ss_diag.msg[]). Long enough
 * for a JSON path of thousands of characters and its reason. Past it the
 * message keeps its first quarter and its end, the middle replaced by
 * " [...] ", so the file name and the reason survive (core/diag.c). */
#define SS_DIAG_MSG_MAX 4096

/* ---- Graphs and models (core/model_io.c, core/ops.c) --------------- */

/* Dims of one tensor (ss_tensor.shape[], tile offsets and degrees): 6
 * covers every operator in the zoo (NCHW convolution is 4-d) with room,
 * and keeps ss_tensor and ss_tile small. Past it: load error at
 * $.tensors[i].shape. */
#define SS_MAX_DIMS 6
/* Inputs, outputs and weights of one operator (fixed arrays in ss_op;
 * variadic operators such as concat take 1 to SS_MAX_INPUTS inputs).
 * Past them: load error at the operator's JSON path. */
#define SS_MAX_INPUTS 16
#define SS_MAX_OUTPUTS 8
#define SS_MAX_WEIGHTS 8
/* Inputs and weights together: the operands a tile reads. */
#define SS_MAX_OPERANDS (SS_MAX_INPUTS + SS_MAX_WEIGHTS)
/* Bytes of a name with its NUL (tensors, models, devices, hosts, switches,
 * device types): 95 characters. Operator names are held to 80
 * (core/graph.c OP_NAME_MAX), leaving room for ":7" and ".weight" in the
 * tensor names made from them. Past it:
 * "string longer than 95 characters" at the JSON path. */
#define SS_NAME_MAX 96
/* Elements of one tensor, declared or inferred (2^48): far beyond any real
 * tensor, and small enough that elements x bytes per element stays far
 * within int64. Past it: "output shape [...] is absurdly large" (core/ops.c). */
#define SS_MAX_ELEMENTS ((int64_t)1 << 48)

/* ---- Machines (core/machine.c, core/topology_io.c) --------------- */

/* Devices of a machine (devices + peers). Beyond this a typo (10^12 nodes)
 * is more likely than a real cluster, and route tables would not fit in
 * memory anyway. Past it: "$.devices: N entries, more than the limit". */
#define SS_MACHINE_MAX_DEVICES 65536
/* Network nodes (devices, switches, NICs) and links (declared + one per
 * peer): room for a fat tree with NICs over the largest machine. Past
 * them: a load error naming the counts and the limits. */
#define SS_MACHINE_MAX_NODES (4 * SS_MACHINE_MAX_DEVICES)
#define SS_MACHINE_MAX_LINKS (16 * SS_MACHINE_MAX_DEVICES)
/* Points of a device type's efficiency table (eff_flops, eff_mem; fixed
 * arrays in ss_device_type): a dozen points trace a measured curve. Past it:
 * "$.device_types[i].eff_flops: expected 1 to 12 ... points". */
#define SS_EFF_POINTS 12

/* ---- Simulation (simulator/) -------------------------------------- */

/* Entries of a simulation's critical-path summary (ss_sim_result.crit[]):
 * the rest folds into "(other)" (simulator/eval_full.c). Not an error. */
#define SS_SIM_CRIT_MAX 16
/* Resources one task may occupy: its devices plus the link channels on its
 * routes (two per link). The engine keeps the count in 24 bits. A
 * data-parallel all-reduce over 16,384 A100s occupies about 131,000. Past
 * it: "a collective task (op N) would occupy R links and devices at once"
 * (simulator/taskgraph.c). */
#define SS_TASK_MAX_RES 16777215

/* ---- Plans (core/plan.c) ------------------------------------------- */

/* Pipeline stages (chunks) of a plan that may each have a recompute mode
 * of their own (ss_plan_settings.recompute_stage[], a fixed array so that
 * settings stay copyable by value): 256 covers one stage per layer of
 * every zoo model (GPT-3 175B: 96 layers; 1T: 128). Past it a plan has one
 * mode for every stage: "recompute: N modes, more than the limit of 256"
 * (plan JSON, megatron: spec). */
#define SS_PLAN_MAX_RECOMPUTE_STAGES 256

/* ---- Search (search/driver.c) -------------------------------------- */

/* Runner-up plans a search result lists (ss_search_result.near[]); the
 * rest are dropped. Not an error. */
#define SS_SEARCH_NEAR_MAX 4

/* ---- Profile database (profiler/profile_db.c) ---------------------- */

/* Bytes of an operator-tile signature with its NUL (ss_profile_signature):
 * an op type, its attributes and its tile's shapes fit with room. A profile
 * entry with a longer signature is a load error at its JSON path; a tile
 * whose signature would not fit is not looked up (the next cost provider
 * answers), never truncated onto another tile's entry. */
#define SS_PROFILE_SIG_MAX 1024
/* Bytes of a profile entry's text fields (device type, backend, measuring
 * device) with its NUL; longer text is a load error at the entry's JSON
 * path. */
#define SS_PROFILE_TEXT_MAX 128

/* ---- Limits private to one module ---------------------------------
 *
 * Named where they are used; listed here so that this header is the one
 * place to read every limit (docs/limits.md has the messages).
 *
 *   limit                          value      where
 *   operator names                 80 chars   core/graph.c OP_NAME_MAX
 *   topology device types          1,024      core/topology_io.c (get_array)
 *   compact: nodes                 65,536     core/topology_io.c MAX_NODES_PER_COMPACT
 *   compact: devices, NICs / node  1,024      core/topology_io.c MAX_DEVICES_PER_NODE
 *   link kind                      31 chars   core/topology_io.c
 *   global batch                   2^32       core/model_io.c MAX_BATCH, cli/cli.h SS_CLI_MAX_BATCH
 *   extent of one dim, attributes  2^32       core/op_table.h SS_ATTR_MAX_DIM
 *   tiles of one operator          2^20       core/plan.c MAX_TILES, core/plan_io.c
 *   split / reduction degree       2^20       core/plan_io.c
 *   pipeline stages                65,536     core/plan_io.c
 *   micro-batches                  2^20       core/plan_io.c
 *   virtual stages per rank        65,536     core/plan_io.c
 *   gradient bucket                1e15 bytes core/plan_io.c
 *   device-mesh axes (plan)        16         core/plan_mesh.h SS_MESH_MAX_AXES
 *   device-mesh axes (search)      3          search/mesh.h SS_DMESH_MAX_AXES
 *   LLM sweep runner-ups           8          search/grid.h SS_LLM_NEAR_MAX
 *   probe curve points             32         profiler/probe.h SS_PROBE_MAX_POINTS
 *   --nodes, model --devices       65,536     cli/cli.h SS_CLI_MAX_NODES, SS_CLI_MAX_DEVICES
 *   JSON nesting                   2,048      jansson's JSON_PARSER_MAX_DEPTH
 */

#endif /* SIMSEARCH_LIMITS_H */
