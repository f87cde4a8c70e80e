/*
 * options.h — the one option parser of the simsearch commands: each command
 * describes its options in a table (name, kind, value name, range, where the
 * value goes, help text) and the parser, `--help`, the man pages and the
 * bash completion are all generated from that table.
 *
 * Invariants: an option given twice is an error; numbers are decimal only
 * (no hex, octal, "inf" or "nan"); an integer or real option's range lives
 * in its table row and nowhere else (the parser's messages and the help text
 * both read it). Adding an option to a command is one table row plus the
 * field it fills.
 */
#ifndef SS_CLI_OPTIONS_H
#define SS_CLI_OPTIONS_H

#include <stddef.h>
#include <stdio.h>

typedef enum ss_cli_kind {
    SS_CLI_FLAG, /* no value: sets an int field to 1 */
    SS_CLI_STR,  /* a string: sets a const char * field (may be "", see nonempty) */
    SS_CLI_INT,  /* a decimal integer in [lo, hi]: sets a long long field */
    SS_CLI_REAL  /* a decimal number in [rlo, rhi]: sets a double field */
} ss_cli_kind;

/* One option. `help` may hold several lines separated by '\n'. */
typedef struct ss_cli_optdef {
    const char *name;  /* "--budget" */
    ss_cli_kind kind;
    const char *arg;   /* value name in the help ("N", "FILE"); NULL for flags */
    size_t off;        /* offset of the field in the command's option struct */
    long long lo, hi;  /* SS_CLI_INT range */
    double rlo, rhi;   /* SS_CLI_REAL range */
    int required;      /* the command needs it */
    const char *help;
} ss_cli_optdef;

/* Rows for the table, with the struct type T of the command's options. */
#define SS_CLI_FLAG_ROW(T, NAME, FIELD, HELP)                                                 \
    {NAME, SS_CLI_FLAG, NULL, offsetof(T, FIELD), 0, 0, 0, 0, 0, HELP}
#define SS_CLI_STR_ROW(T, NAME, ARG, FIELD, REQ, HELP)                                        \
    {NAME, SS_CLI_STR, ARG, offsetof(T, FIELD), 0, 0, 0, 0, REQ, HELP}
#define SS_CLI_INT_ROW(T, NAME, ARG, FIELD, LO, HI, HELP)                                     \
    {NAME, SS_CLI_INT, ARG, offsetof(T, FIELD), LO, HI, 0, 0, 0, HELP}
#define SS_CLI_REAL_ROW(T, NAME, ARG, FIELD, LO, HI, HELP)                                    \
    {NAME, SS_CLI_REAL, ARG, offsetof(T, FIELD), 0, 0, LO, HI, 0, HELP}

/* A command: its name, synopsis lines after the generated one (may be
 * NULL), what it does, the options (ended by a NULL name), an optional
 * positional argument (pos_arg "FILE", stored at pos_off as const char *;
 * NULL: none allowed) and text after the options (may be NULL). */
typedef struct ss_cli_cmddef {
    const char *name;
    const char *summary; /* one line, for `simsearch --help` and the man page NAME */
    const char *about;
    const ss_cli_optdef *opts;
    const char *pos_arg;
    size_t pos_off;
    const char *epilog;
} ss_cli_cmddef;

/* Parse argv[1..] (argv[0] is the command name) into the struct at o, whose
 * defaults the caller has set. `--help` / `-h` prints the help and returns
 * -1. Returns 0 when parsed, or 2 (SS_EXIT_USAGE) after printing a usage
 * error: an unknown option, a missing or malformed value, a value out of
 * range, an option given twice, a missing required option, a second
 * positional argument. */
int ss_cli_parse_def(const ss_cli_cmddef *def, int argc, char **argv, void *o);

/* Whether option `name` was given in the last ss_cli_parse_def call of def
 * (for options whose default depends on others). */
int ss_cli_given(const ss_cli_cmddef *def, const char *name);

/* The generated help of def. */
void ss_cli_print_help(const ss_cli_cmddef *def, FILE *f);
/* The man page (troff, section 1) of def, from the same text as the help. */
void ss_cli_print_man(const ss_cli_cmddef *def, FILE *f);

/* Parse a decimal integer ([-]digits, nothing else) in [lo, hi]: 0 on
 * success, -1 when not an integer, -2 when out of range. */
int ss_cli_parse_ll(const char *s, long long lo, long long hi, long long *out);
/* Parse a decimal number ([-]digits[.digits][e[+-]digits]) in [lo, hi]:
 * 0, -1 not a number, -2 out of range. */
int ss_cli_parse_real(const char *s, double lo, double hi, double *out);

#endif
