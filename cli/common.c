/*
 * common.c — option parsing, error reporting and loaders shared by the
 * simsearch subcommands (cli.h).
 */
#include "cli.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

int ss_cli_fail(const ss_diag *d)
{
    fprintf(stderr, "simsearch: %s\n", d->msg[0] ? d->msg : ss_status_name(d->status));
    switch (d->status) {
    case SS_ERR_PARSE:
    case SS_ERR_INVALID:
    case SS_ERR_IO:
    case SS_ERR_INFEASIBLE:
        return SS_EXIT_USAGE;
    default:
        return SS_EXIT_FAIL;
    }
}

int ss_cli_usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "simsearch%s%s: ", cmd ? " " : "", cmd ? cmd : "");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\ntry 'simsearch %s%s--help'\n", cmd ? cmd : "", cmd ? " " : "");
    return SS_EXIT_USAGE;
}

int ss_cli_opt(int argc, char **argv, int *i, const char *name, const char **value)
{
    const char *a = argv[*i];
    size_t n = strlen(name);
    if (strncmp(a, name, n) != 0)
        return 0;
    if (a[n] == '=') {
        *value = a + n + 1;
        return 1;
    }
    if (a[n] != '\0')
        return 0;
    if (*i + 1 >= argc)
        return -1;
    *value = argv[++*i];
    return 1;
}

int ss_cli_int(const char *s, long long lo, long long hi, long long *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

int ss_cli_load_machine(const char *topology, int nodes, ss_machine **m)
{
    ss_diag d;
    ss_diag_init(&d);
    if (ss_machine_load_nodes(topology, nodes, m, &d) != SS_OK)
        return ss_cli_fail(&d);
    return SS_EXIT_OK;
}

int ss_cli_build_model(const char *spec, long long batch, int n_devices, ss_graph **g)
{
    ss_diag d;
    ss_diag_init(&d);
    if (ss_model_build(spec, batch, n_devices, g, &d) != SS_OK)
        return ss_cli_fail(&d);
    return SS_EXIT_OK;
}

int ss_cli_common_opt(const char *cmd, int argc, char **argv, int *i, ss_cli_common *c,
                      int want_plan)
{
    const char *v = NULL;
    int r;
    if (!strcmp(argv[*i], "--json")) {
        c->json = 1;
        return 1;
    }
    if ((r = ss_cli_opt(argc, argv, i, "--model", &c->model)) ||
        (r = ss_cli_opt(argc, argv, i, "--topology", &c->topology)) ||
        (want_plan && (r = ss_cli_opt(argc, argv, i, "--plan", &c->plan)))) {
        if (r < 0) {
            ss_cli_usage_error(cmd, "%s needs a value", argv[*i]);
            return -1;
        }
        return 1;
    }
    if ((r = ss_cli_opt(argc, argv, i, "--nodes", &v))) {
        if (r < 0 || ss_cli_int(v, 1, 1 << 20, &c->nodes)) {
            ss_cli_usage_error(cmd, "--nodes needs an integer from 1 to %d", 1 << 20);
            return -1;
        }
        return 1;
    }
    if ((r = ss_cli_opt(argc, argv, i, "--batch", &v))) {
        if (r < 0 || ss_cli_int(v, 1, 1LL << 40, &c->batch)) {
            ss_cli_usage_error(cmd, "--batch needs an integer from 1 to 2^40");
            return -1;
        }
        return 1;
    }
    return 0;
}

int ss_cli_parse(const char *cmd, int argc, char **argv, ss_cli_common *c, int want_plan,
                 const ss_cli_extra *extra, void (*help)(FILE *f))
{
    memset(c, 0, sizeof *c);
    for (int i = 1; i < argc; i++) {
        int r;
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            help(stdout);
            return -1;
        }
        if ((r = ss_cli_common_opt(cmd, argc, argv, &i, c, want_plan))) {
            if (r < 0)
                return SS_EXIT_USAGE;
            continue;
        }
        for (const ss_cli_extra *e = extra; e && e->name; e++)
            if ((r = ss_cli_opt(argc, argv, &i, e->name, e->value)))
                break;
        if (r < 0)
            return ss_cli_usage_error(cmd, "%s needs a value", argv[i]);
        if (r)
            continue;
        return ss_cli_usage_error(cmd, "unknown argument '%s'", argv[i]);
    }
    if (!c->model || !c->topology || (want_plan && !c->plan))
        return ss_cli_usage_error(cmd, want_plan ? "--model, --topology and --plan are required"
                                                 : "--model and --topology are required");
    return 0;
}

int ss_cli_common_load(const ss_cli_common *c, ss_machine **m, ss_graph **g, ss_plan **p)
{
    ss_diag d;
    ss_diag_init(&d);
    int r = ss_cli_load_machine(c->topology, (int)c->nodes, m);
    if (r)
        return r;
    if ((r = ss_cli_build_model(c->model, c->batch, ss_machine_n_devices(*m), g))) {
        ss_machine_free(*m);
        *m = NULL;
        return r;
    }
    if (p && c->plan &&
        (ss_plan_from_spec(c->plan, *g, *m, p, &d) != SS_OK ||
         ss_plan_validate(*p, *g, *m, &d) != SS_OK)) {
        ss_plan_free(*p);
        ss_graph_free(*g);
        ss_machine_free(*m);
        *p = NULL;
        *g = NULL;
        *m = NULL;
        return ss_cli_fail(&d);
    }
    return SS_EXIT_OK;
}

int ss_cli_cost_model(const ss_machine *m, const char *db_path, ss_costmodel **cm,
                      ss_profile_db **db)
{
    ss_diag d;
    ss_diag_init(&d);
    *cm = NULL;
    *db = NULL;
    if (db_path && ss_profile_db_load(db_path, db, &d) != SS_OK)
        return ss_cli_fail(&d);
    *cm = ss_cost_new(m);
    if (!*cm) {
        ss_profile_db_free(*db);
        *db = NULL;
        ss_diag_set(&d, SS_ERR_NOMEM, "out of memory");
        return ss_cli_fail(&d);
    }
    if (*db) {
        ss_cost_provider p = ss_profile_provider(*db);
        if (ss_cost_add_provider(*cm, &p, &d) != SS_OK) {
            ss_cost_free(*cm);
            ss_profile_db_free(*db);
            *cm = NULL;
            *db = NULL;
            return ss_cli_fail(&d);
        }
    }
    return SS_EXIT_OK;
}

const char *ss_cli_si(double v, char *buf, size_t n)
{
    static const char *suf[] = {"", " K", " M", " G", " T", " P", " E"};
    int k = 0;
    double a = v < 0 ? -v : v;
    while (a >= 1000 && k < 6) {
        a /= 1000;
        v /= 1000;
        k++;
    }
    snprintf(buf, n, k ? "%.2f%s" : "%.0f%s", v, suf[k]);
    return buf;
}

const char *ss_cli_bytes(double v, char *buf, size_t n)
{
    static const char *suf[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    int k = 0;
    while (v >= 1024 && k < 5) {
        v /= 1024;
        k++;
    }
    snprintf(buf, n, k ? "%.2f %s" : "%.0f %s", v, suf[k]);
    return buf;
}
