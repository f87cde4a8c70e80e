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
#include <stdio.h>

enum { SS_EXIT_OK = 0, SS_EXIT_FAIL = 1, SS_EXIT_USAGE = 2 };

/* Subcommands: argv[0] is the subcommand name. */
int ss_cmd_models(int argc, char **argv);
int ss_cmd_model(int argc, char **argv);
int ss_cmd_cost(int argc, char **argv);
int ss_cmd_topo(int argc, char **argv);
int ss_cmd_plan(int argc, char **argv);
int ss_cmd_simulate(int argc, char **argv);
int ss_cmd_search(int argc, char **argv);
int ss_cmd_profile(int argc, char **argv);
int ss_cmd_probe(int argc, char **argv);

/* Print "simsearch: <msg>" for a failed status and map it to an exit code
 * (parse/invalid/io/infeasible input: 2; nomem and others: 1). */
int ss_cli_fail(const ss_diag *d);
/* Print "simsearch <cmd>: <fmt>" and "try 'simsearch <cmd> --help'"; returns 2. */
int ss_cli_usage_error(const char *cmd, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Option parsing: `--name VALUE` or `--name=VALUE`. If argv[*i] matches name,
 * sets *value (advancing *i when the value is the next argument) and
 * returns 1; returns -1 if the value is missing; 0 if no match. */
int ss_cli_opt(int argc, char **argv, int *i, const char *name, const char **value);
/* Parse a positive integer in [lo, hi]; 0 on success, -1 otherwise. */
int ss_cli_int(const char *s, long long lo, long long hi, long long *out);
/* The value of integer option `name` (r and v from ss_cli_opt) in [lo, hi]:
 * 0 on success; otherwise prints a usage error for `cmd` that states the
 * range ("--batch: 1000000000000 is out of range (expected an integer from 1
 * to 2^32 = 4294967296)") and returns -1. */
int ss_cli_int_opt(const char *cmd, const char *name, int r, const char *v, long long lo,
                   long long hi, long long *out);

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

/* If argv[*i] is one of --model, --topology, --plan (when want_plan),
 * --nodes, --batch or --json, store it in c (advancing *i past a value) and
 * return 1; 0 if it is none of them; on a missing or bad value print a usage
 * error for `cmd` and return -1. */
int ss_cli_common_opt(const char *cmd, int argc, char **argv, int *i, ss_cli_common *c,
                      int want_plan);
/* A command-specific option taking a string value. */
typedef struct ss_cli_extra {
    const char *name;   /* "--trace" */
    const char **value; /* where to store it */
} ss_cli_extra;

/* Parse argv[1..] for `cmd`: --help/-h (prints help, returns -1), the
 * common options (plan only when want_plan), and the `extra` options
 * (array ended by a NULL name; may be NULL). Then require --model and
 * --topology (and --plan when want_plan). Returns 0 when parsed, -1 after
 * help (exit 0), or SS_EXIT_USAGE after printing a usage error. */
int ss_cli_parse(const char *cmd, int argc, char **argv, ss_cli_common *c, int want_plan,
                 const ss_cli_extra *extra, void (*help)(FILE *f));

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

/* An output a command writes: its flag ("--out") and path (NULL: not asked). */
typedef struct ss_cli_output {
    const char *flag;
    const char *path;
} ss_cli_output;

/* Check a command's outputs before any work (array ended by a NULL flag):
 * each path must be writable (ss_output_check), no two the same, at most one
 * "-" (standard output), none "-" with --json. *stdout_taken (may be NULL)
 * says whether an output goes to standard output. Returns 0, or
 * SS_EXIT_USAGE after printing why. */
int ss_cli_check_outputs(const char *cmd, const ss_cli_output *outs, int json, int *stdout_taken);

/* After an output was written to standard output ("-"): send what the
 * command prints next (its report) to standard error instead. */
void ss_cli_report_to_stderr(void);

/* Install the handlers of SIGINT, SIGTERM and SIGHUP that remove the temp
 * files of outputs being written, then die of the signal (commands may
 * catch SIGINT themselves meanwhile, as the search does). */
void ss_cli_catch_signals(void);

/* Human-friendly numbers: "1.23 G", "456 M", "456", "42.7", "0.0123",
 * "1.5e-07" (three significant digits below 100, so a small non-zero value
 * never prints as 0); into buf. */
const char *ss_cli_si(double v, char *buf, size_t n);
/* Bytes as "1.50 GiB". */
const char *ss_cli_bytes(double v, char *buf, size_t n);

#endif
