/*
 * cli.h — shared pieces of the simsearch command line: subcommand entry
 * points, exit codes, option parsing helpers and error reporting.
 *
 * Exit codes: 0 success, 2 bad usage or bad input, 1 any other failure.
 * Only the CLI prints; library calls report through ss_diag.
 */
#ifndef SS_CLI_H
#define SS_CLI_H

#include "simsearch.h"
#include "profiler/profile_db.h"
#include "options.h"
#include <jansson.h>
#include <signal.h>
#include <stdio.h>

enum { SS_EXIT_OK = 0, SS_EXIT_FAIL = 1, SS_EXIT_USAGE = 2 };

/* Subcommands: argv[0] is the subcommand name. */
int ss_cmd_models(int argc, char **argv);
int ss_cmd_model(int argc, char **argv);
int ss_cmd_cost(int argc, char **argv);
int ss_cmd_topo(int argc, char **argv);
int ss_cmd_plan(int argc, char **argv);
int ss_cmd_simulate(int argc, char **argv);
int ss_cmd_tune_sync(int argc, char **argv);
int ss_cmd_search(int argc, char **argv);
int ss_cmd_profile(int argc, char **argv);
int ss_cmd_probe(int argc, char **argv);
int ss_cmd_swarm(int argc, char **argv);
int ss_cmd_run(int argc, char **argv);
int ss_cmd_whatif(int argc, char **argv);

/* Print "simsearch: <msg>" for a failed status and map it to an exit code
 * (parse/invalid/infeasible input: 2; I/O failures -- a full disk, a read
 * error --, nomem and others: 1). Inputs that are missing or unreadable are
 * refused before, as bad input (ss_cli_check_files). */
int ss_cli_fail(const ss_diag *d);
/* Print "simsearch <cmd>: <fmt>" and "try 'simsearch <cmd> --help'"; returns 2. */
int ss_cli_usage_error(const char *cmd, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* For a bad option value: print "simsearch <cmd>: <opt>: ", then fmt with
 * the one string val (fmt holds one %s), then the help hint; returns
 * SS_EXIT_USAGE. */
int ss_cli_bad_value(const char *cmd, const char *opt, const char *fmt, const char *val);

/* Split a comma-separated option value s into items that point into buf (a
 * copy of s, cut to cap - 1 bytes); empty items are skipped. Returns the
 * number of items, at most max + 1: more than max means too many (items
 * must hold max + 1 entries). */
int ss_cli_split(const char *s, char *buf, size_t cap, char **items, int max);

/* Limits of the options: a model's batch (core/model_io.c, the zoo), a
 * compact topology's node count (core/topology_io.c) and a machine's devices
 * (core/machine_impl.h); docs/limits.md. */
#define SS_CLI_MAX_BATCH (1LL << 32)
#define SS_CLI_MAX_NODES 65536
#define SS_CLI_MAX_DEVICES 65536

/* Options shared by the commands that take a model on a topology. */
typedef struct ss_cli_common {
    const char *model, *topology, *plan;
    long long nodes, batch;
    int json;
} ss_cli_common;

/* The table rows (options.h) of the shared options, for an option struct T
 * with an ss_cli_common member c. */
#define SS_CLI_MODEL_HELP "zoo model NAME[:key=value,...] or a model JSON file"
#define SS_CLI_PLAN_HELP                                                                      \
    "data-parallel | megatron:tp=T,pp=P,dp=D[,cp=C][,ep=E]\n"                                \
    "[,mbs=S|mb=M][,vp=V][,recompute=none|selective|full, or one\n"                          \
    "per pipeline stage: full*2/selective/none]\n"                                            \
    "[,sp=0|1][,distopt=0|1|3][,sync=overlap|bulk] | a plan JSON file"
#define SS_CLI_ROW_MODEL(T) SS_CLI_STR_ROW(T, "--model", "SPEC", c.model, 1, SS_CLI_MODEL_HELP)
#define SS_CLI_ROW_TOPOLOGY(T)                                                                \
    SS_CLI_STR_ROW(T, "--topology", "FILE", c.topology, 1, "topology JSON")
#define SS_CLI_ROW_PLAN(T, REQ) SS_CLI_STR_ROW(T, "--plan", "SPEC", c.plan, REQ, SS_CLI_PLAN_HELP)
#define SS_CLI_ROW_NODES(T)                                                                   \
    SS_CLI_INT_ROW(T, "--nodes", "N", c.nodes, 1, SS_CLI_MAX_NODES,                           \
                   "override the node count of a compact topology")
#define SS_CLI_ROW_BATCH(T)                                                                   \
    SS_CLI_INT_ROW(T, "--batch", "N", c.batch, 1, SS_CLI_MAX_BATCH,                           \
                   "global batch (default: 64 per device, 256 for alexnet)")
#define SS_CLI_ROW_JSON(T, HELP) SS_CLI_FLAG_ROW(T, "--json", c.json, HELP)
/* The rows of a command that loads a model, a topology and a required plan
 * (ss_cli_check_and_load): --model, --topology, --plan, --nodes, --batch. */
#define SS_CLI_ROWS_PLAN_INPUTS(T)                                                            \
    SS_CLI_ROW_MODEL(T), SS_CLI_ROW_TOPOLOGY(T), SS_CLI_ROW_PLAN(T, 1), SS_CLI_ROW_NODES(T),  \
        SS_CLI_ROW_BATCH(T)

/* The command definitions (cmd_*.c), for help, man pages and completion. */
extern const ss_cli_cmddef ss_cli_def_search, ss_cli_def_models, ss_cli_def_model,
    ss_cli_def_cost, ss_cli_def_plan, ss_cli_def_topo, ss_cli_def_simulate, ss_cli_def_profile,
    ss_cli_def_probe, ss_cli_def_swarm, ss_cli_def_run, ss_cli_def_tune_sync, ss_cli_def_whatif;

/* Load the topology (with --nodes), then build the model for its device
 * count (with --batch) and, when c->plan is set and p is not NULL, the plan
 * (validated). Returns an exit code; on failure nothing is left allocated. */
int ss_cli_common_load(const ss_cli_common *c, ss_machine **m, ss_graph **g, ss_plan **p);

/* Load the machine (with --nodes override when nodes > 0) and build the
 * model for it (batch 0: the model's per-device default times devices). */
int ss_cli_load_machine(const char *topology, int nodes, ss_machine **m);
int ss_cli_build_model(const char *spec, long long batch, int n_devices, ss_graph **g);

/* The cost model for m: the profile database at db_path first when given
 * (loaded strictly; a missing file is an error), then the analytic model.
 * On success *cm and *db (NULL without db_path) belong to the caller (free
 * the cost model first). Returns an exit code; on failure nothing is left
 * allocated. */
int ss_cli_cost_model(const ss_machine *m, const char *db_path, ss_costmodel **cm,
                      ss_profile_db **db);

/* Free what a simulating command holds, in this order (sim before the cost
 * model, the cost model before db); each may be NULL. */
void ss_cli_free_sim(ss_sim *sim, ss_costmodel *cm, ss_profile_db *db, ss_plan *p, ss_graph *g,
                     ss_machine *m);

/* A file a command reads or writes: its flag ("--out") and path (NULL: not
 * given). */
typedef struct ss_cli_output {
    const char *flag;
    const char *path;
} ss_cli_output;

/* Check a command's files before any work (arrays ended by a NULL flag; ins
 * may be NULL). Inputs: a path that exists must be a regular file (a FIFO,
 * device or directory is refused: reading one could block forever); inputs
 * that are not paths (a zoo model, a plan spec) are skipped by the caller.
 * Outputs: each must be writable (ss_output_check), at most one "-"
 * (standard output), none "-" with --json, and none may be the same file as
 * an input or another output -- compared by device and inode after
 * resolving symbolic links (for a file not yet there: its resolved
 * directory and name), so "x.json", "./x.json" and a link to it are one
 * file. *stdout_taken (may be NULL) says whether an output goes to standard
 * output. Returns 0, or SS_EXIT_USAGE after printing why, naming both
 * flags. */
int ss_cli_check_files(const char *cmd, const ss_cli_output *ins, const ss_cli_output *outs,
                       int json, int *stdout_taken);

/* Check the files of a command that reads a model, a topology and maybe a
 * plan (ss_cli_check_files: --model and --plan where they name files,
 * --topology, extra_in when not NULL, and outs; json as c->json). Returns 0
 * or the exit code. */
int ss_cli_check_inputs(const char *cmd, const ss_cli_common *c, const ss_cli_output *extra_in,
                        const ss_cli_output *outs, int *stdout_taken);

/* The start of a command that reads a model, a topology and a plan:
 * ss_cli_check_inputs, then ss_cli_common_load. Returns 0 or the exit code;
 * on failure nothing is left allocated. */
int ss_cli_check_and_load(const char *cmd, const ss_cli_common *c,
                          const ss_cli_output *extra_in, const ss_cli_output *outs,
                          int *stdout_taken, ss_machine **m, ss_graph **g, ss_plan **p);

/* The file a --model SPEC or --plan SPEC reads, as the loaders decide: the
 * spec itself when it names a file (contains '/' or ends in ".json"); for
 * "hf:PATH[:key=value,...]" the PATH (its config.json when PATH is a
 * folder), copied into buf (n bytes); NULL for a zoo or megatron: spec, a
 * NULL spec, or a PATH that does not fit buf. */
const char *ss_cli_spec_file(const char *spec, char *buf, size_t n);

/* After an output was written to standard output ("-"): send what the
 * command prints next (its report) to standard error instead. */
void ss_cli_report_to_stderr(void);

/* Install the handlers of SIGINT, SIGTERM and SIGHUP that say on standard
 * error that the command was stopped, remove the temp files of outputs
 * being written, then die of the signal (exit status 128 + signal) (commands may
 * catch SIGINT themselves meanwhile, as the search does). */
void ss_cli_catch_signals(void);

/* The stop signals of a long command (search, whatif): the first SIGINT or
 * SIGTERM sets ss_cli_stop_signal (the command polls it through
 * ss_cli_stop_cb and keeps what it has); a second one removes the temp
 * files and ends the program. ss_cli_stop_signals_catch resets the flag and
 * installs the handler, saving the previous actions in old (SIGINT, then
 * SIGTERM); ss_cli_stop_signals_restore puts them back. */
extern volatile sig_atomic_t ss_cli_stop_signal;
void ss_cli_stop_signals_catch(struct sigaction old[2]);
void ss_cli_stop_signals_restore(const struct sigaction old[2]);
int ss_cli_stop_cb(void *ctx);

/* Print root on standard output as indented JSON in its keys' order, then
 * release it (the caller's reference). Returns SS_EXIT_OK, or SS_EXIT_FAIL
 * after saying "out of memory". */
int ss_cli_print_json(json_t *root);

/* Human-friendly numbers: "1.23 G", "456 M", "456", "42.7", "0.0123",
 * "1.5e-07" (three significant digits below 100, so a small non-zero value
 * never prints as 0); into buf. */
const char *ss_cli_si(double v, char *buf, size_t n);
/* Bytes as "1.50 GiB". */
const char *ss_cli_bytes(double v, char *buf, size_t n);

#endif
