/*
 * options.c — the table-driven option parser, help and man page generator
 * of the simsearch commands (options.h). Every message about an option
 * names it and what it expects; ranges come from the table row.
 */
#include "options.h"
#include "cli.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAX_OPTS 64

/* Which options the last parse of `last` saw. */
static const ss_cli_cmddef *last;
static unsigned char seen[MAX_OPTS];

int ss_cli_parse_ll(const char *s, long long lo, long long hi, long long *out)
{
    const char *p = s + (*s == '-');
    if (!*p)
        return -1;
    for (; *p; p++)
        if (*p < '0' || *p > '9')
            return -1;
    errno = 0;
    long long v = strtoll(s, NULL, 10);
    if (errno == ERANGE || v < lo || v > hi)
        return -2;
    *out = v;
    return 0;
}

int ss_cli_parse_real(const char *s, double lo, double hi, double *out)
{
    const char *p = s + (*s == '-');
    int digits = 0;
    while (*p >= '0' && *p <= '9')
        p++, digits++;
    if (*p == '.')
        for (p++; *p >= '0' && *p <= '9'; p++)
            digits++;
    if (!digits)
        return -1;
    if (*p == 'e' || *p == 'E') {
        p++;
        if (*p == '+' || *p == '-')
            p++;
        if (*p < '0' || *p > '9')
            return -1;
        while (*p >= '0' && *p <= '9')
            p++;
    }
    if (*p)
        return -1;
    double v = strtod(s, NULL);
    if (!isfinite(v) || v < lo || v > hi)
        return -2;
    *out = v;
    return 0;
}

/* "N" or, for powers of two from 2^20 on, "2^k = N". */
static const char *limit_text(long long v, char *buf, size_t n)
{
    int k = 0;
    while (k < 62 && (1LL << k) < v)
        k++;
    if (v >= (1LL << 20) && v == (1LL << k))
        snprintf(buf, n, "2^%d = %lld", k, v);
    else
        snprintf(buf, n, "%lld", v);
    return buf;
}

/* The range of an integer or real option, as the help and errors print it. */
static const char *range_text(const ss_cli_optdef *od, char *buf, size_t n)
{
    char a[48], b[48];
    if (od->kind == SS_CLI_INT)
        snprintf(buf, n, "an integer from %s to %s", limit_text(od->lo, a, sizeof a),
                 limit_text(od->hi, b, sizeof b));
    else
        snprintf(buf, n, "a number from %g to %g", od->rlo, od->rhi);
    return buf;
}

static int set_value(const ss_cli_cmddef *def, const ss_cli_optdef *od, const char *v, void *o)
{
    char *field = (char *)o + od->off;
    char rt[128];
    int r;
    switch (od->kind) {
    case SS_CLI_FLAG:
        *(int *)field = 1;
        return 0;
    case SS_CLI_STR:
        *(const char **)field = v;
        return 0;
    case SS_CLI_INT:
        r = ss_cli_parse_ll(v, od->lo, od->hi, (long long *)field);
        break;
    default:
        r = ss_cli_parse_real(v, od->rlo, od->rhi, (double *)field);
        break;
    }
    range_text(od, rt, sizeof rt);
    if (r == -1 && od->kind == SS_CLI_INT) {
        char a[48], b[48];
        return ss_cli_usage_error(def->name, "%s: '%s' is not an integer (expected %s to %s)",
                                  od->name, v, limit_text(od->lo, a, sizeof a),
                                  limit_text(od->hi, b, sizeof b));
    }
    if (r == -1)
        return ss_cli_usage_error(def->name, "%s: '%s' is not a decimal number (expected %s)",
                                  od->name, v, rt);
    if (r == -2)
        return ss_cli_usage_error(def->name, "%s: %s is out of range (expected %s)", od->name, v,
                                  rt);
    return 0;
}

int ss_cli_parse_def(const ss_cli_cmddef *def, int argc, char **argv, void *o)
{
    int pos_seen = 0;
    last = def;
    memset(seen, 0, sizeof seen);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            ss_cli_print_help(def, stdout);
            return -1;
        }
        if (a[0] != '-' || !a[1]) { /* a positional argument ("-" included) */
            if (!def->pos_arg)
                return ss_cli_usage_error(def->name, "unknown argument '%s'", a);
            if (pos_seen)
                return ss_cli_usage_error(def->name, "more than one %s ('%s', '%s')",
                                          def->pos_arg,
                                          *(const char **)((char *)o + def->pos_off), a);
            *(const char **)((char *)o + def->pos_off) = a;
            pos_seen = 1;
            continue;
        }
        const char *eq = strchr(a, '=');
        size_t n = eq ? (size_t)(eq - a) : strlen(a);
        int k = 0;
        const ss_cli_optdef *od = NULL;
        for (; def->opts[k].name; k++)
            if (strlen(def->opts[k].name) == n && !strncmp(def->opts[k].name, a, n)) {
                od = &def->opts[k];
                break;
            }
        if (!od)
            return ss_cli_usage_error(def->name, "unknown option '%s'", a);
        if (seen[k])
            return ss_cli_usage_error(def->name, "%s is given twice (give each option once)",
                                      od->name);
        seen[k] = 1;
        const char *v = NULL;
        if (od->kind == SS_CLI_FLAG) {
            if (eq)
                return ss_cli_usage_error(def->name, "%s takes no value", od->name);
        } else if (eq) {
            v = eq + 1;
        } else if (i + 1 < argc) {
            v = argv[++i];
        } else {
            char rt[128];
            if (od->kind == SS_CLI_STR)
                return ss_cli_usage_error(def->name, "%s needs a value (%s)", od->name,
                                          od->arg ? od->arg : "a string");
            return ss_cli_usage_error(def->name, "%s needs a value (%s)", od->name,
                                      range_text(od, rt, sizeof rt));
        }
        if (set_value(def, od, v, o))
            return SS_EXIT_USAGE;
    }
    for (int k = 0; def->opts[k].name; k++)
        if (def->opts[k].required && !seen[k])
            return ss_cli_usage_error(def->name, "%s is required", def->opts[k].name);
    return 0;
}

int ss_cli_given(const ss_cli_cmddef *def, const char *name)
{
    if (def != last)
        return 0;
    for (int k = 0; def->opts[k].name; k++)
        if (!strcmp(def->opts[k].name, name))
            return seen[k];
    return 0;
}

/* "--budget N" or "--json". */
static int opt_label(const ss_cli_optdef *od, char *buf, size_t n)
{
    return snprintf(buf, n, "%s%s%s", od->name, od->arg ? " " : "", od->arg ? od->arg : "");
}

void ss_cli_print_help(const ss_cli_cmddef *def, FILE *f)
{
    char lab[64];
    int col = fprintf(f, "usage: simsearch %s", def->name);
    int indent = col;
    if (def->pos_arg)
        col += fprintf(f, " %s", def->pos_arg);
    for (const ss_cli_optdef *od = def->opts; od->name; od++) {
        int w = opt_label(od, lab, sizeof lab) + (od->required ? 1 : 3);
        if (col + w > 79)
            col = fprintf(f, "\n%*s", indent, "") - 1;
        col += fprintf(f, od->required ? " %s" : " [%s]", lab);
    }
    fprintf(f, "\n\n%s\n\n", def->about);
    for (const ss_cli_optdef *od = def->opts; od->name; od++) {
        int w = opt_label(od, lab, sizeof lab);
        const char *h = od->help;
        fprintf(f, "  %s", lab);
        int first = 1;
        while (*h || first) {
            const char *nl = strchr(h, '\n');
            int len = nl ? (int)(nl - h) : (int)strlen(h);
            if (first && w > 18)
                fprintf(f, "\n  %-18s %.*s\n", "", len, h);
            else if (first)
                fprintf(f, "%*s %.*s\n", 18 - w, "", len, h);
            else
                fprintf(f, "  %-18s %.*s\n", "", len, h);
            first = 0;
            h += len + (nl != NULL);
        }
        if (od->kind == SS_CLI_INT || od->kind == SS_CLI_REAL) {
            char rt[128];
            fprintf(f, "  %-18s (%s)\n", "", range_text(od, rt, sizeof rt));
        }
    }
    if (def->epilog)
        fprintf(f, "\n%s\n", def->epilog);
}

/* Text for troff: a leading '.' or '\'' escaped, backslashes and '-' escaped. */
static void man_text(FILE *f, const char *s, size_t n)
{
    for (size_t i = 0; i < n && s[i]; i++) {
        if ((i == 0 || s[i - 1] == '\n') && (s[i] == '.' || s[i] == '\''))
            fputs("\\&", f);
        if (s[i] == '\\')
            fputs("\\e", f);
        else if (s[i] == '-')
            fputs("\\-", f);
        else
            fputc(s[i], f);
    }
}

void ss_cli_print_man(const ss_cli_cmddef *def, FILE *f)
{
    char up[64];
    size_t k = 0;
    for (; def->name[k] && k + 1 < sizeof up; k++)
        up[k] = (char)(def->name[k] >= 'a' && def->name[k] <= 'z' ? def->name[k] - 32
                                                                   : def->name[k]);
    up[k] = '\0';
    fprintf(f, ".TH SIMSEARCH\\-%s 1 \"\" \"simsearch\" \"simsearch manual\"\n", up);
    fprintf(f, ".SH NAME\nsimsearch\\-%s \\- ", def->name);
    man_text(f, def->summary, strlen(def->summary));
    fprintf(f, "\n.SH SYNOPSIS\n.B simsearch %s\n", def->name);
    if (def->pos_arg)
        fprintf(f, ".I %s\n", def->pos_arg);
    for (const ss_cli_optdef *od = def->opts; od->name; od++) {
        fprintf(f, "%s\\fB", od->required ? "" : "[");
        man_text(f, od->name, strlen(od->name));
        fprintf(f, "\\fR%s%s%s%s\n", od->arg ? " \\fI" : "", od->arg ? od->arg : "",
                od->arg ? "\\fR" : "", od->required ? "" : "]");
    }
    fprintf(f, ".SH DESCRIPTION\n");
    man_text(f, def->about, strlen(def->about));
    fprintf(f, "\n.SH OPTIONS\n");
    for (const ss_cli_optdef *od = def->opts; od->name; od++) {
        fprintf(f, ".TP\n\\fB");
        man_text(f, od->name, strlen(od->name));
        fprintf(f, "\\fR%s%s%s\n", od->arg ? " \\fI" : "", od->arg ? od->arg : "",
                od->arg ? "\\fR" : "");
        man_text(f, od->help, strlen(od->help));
        if (od->kind == SS_CLI_INT || od->kind == SS_CLI_REAL) {
            char rt[128];
            fprintf(f, "\n(");
            const char *r = range_text(od, rt, sizeof rt);
            man_text(f, r, strlen(r));
            fprintf(f, ")");
        }
        fprintf(f, "\n");
    }
    if (def->epilog) {
        fprintf(f, ".SH NOTES\n.nf\n");
        man_text(f, def->epilog, strlen(def->epilog));
        fprintf(f, "\n.fi\n");
    }
    fprintf(f, ".SH EXIT STATUS\n0 success, 2 bad usage or bad input, 1 input/output or system "
               "failure (a full disk, out of memory).\n.SH SEE ALSO\n.BR simsearch (1)\n");
}
