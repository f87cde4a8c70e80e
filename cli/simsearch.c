/*
 * simsearch.c — entry point of the simsearch command: dispatches to the
 * subcommands (cli/cmd_*.c). With no subcommand, or options only, it runs
 * the plan search (the main job).
 */
#include "cli.h"

#include <string.h>

typedef struct command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} command;

static const command commands[] = {
    {"search", ss_cmd_search, "find a fast plan (the default command)"},
    {"models", ss_cmd_models, "list the model zoo"},
    {"model", ss_cmd_model, "summarise one model; export it to JSON"},
    {"cost", ss_cmd_cost, "price every operator of a model on one device"},
    {"plan", ss_cmd_plan, "build or load a plan, validate and summarise it"},
    {"topo", ss_cmd_topo, "summarise a topology file, or discover this host"},
    {"simulate", ss_cmd_simulate, "predict iteration time and memory of a plan"},
    {"profile", ss_cmd_profile, "measure operator tiles into a profile database"},
    {"probe", ss_cmd_probe, "measure link latency and bandwidth between MPI ranks"},
};

static void usage(FILE *f)
{
    fprintf(f, "usage: simsearch <command> [options]\n"
               "       simsearch --topology FILE [--model SPEC] ...   (plan search)\n\n"
               "commands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "\nRun 'simsearch <command> --help' for a command's options.\n");
}

int main(int argc, char **argv)
{
    ss_cli_catch_signals();
    if (argc < 2) {
        usage(stderr);
        return SS_EXIT_USAGE;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return SS_EXIT_OK;
    }
    if (!strncmp(argv[1], "--", 2)) /* options only: the plan search */
        return ss_cmd_search(argc, argv);
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name))
            return commands[i].run(argc - 1, argv + 1);
    return ss_cli_usage_error(NULL, "unknown command '%s'", argv[1]);
}
