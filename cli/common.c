/*
 * common.c — option parsing, error reporting and loaders shared by the
 * simsearch subcommands (cli.h).
 */
#include "cli.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

int ss_cli_int_opt(const char *cmd, const char *name, int r, const char *v, long long lo,
                   long long hi, long long *out)
{
    char a[48], b[48];
    limit_text(lo, a, sizeof a);
    limit_text(hi, b, sizeof b);
    if (r < 0) {
        ss_cli_usage_error(cmd, "%s needs a value (an integer from %s to %s)", name, a, b);
        return -1;
    }
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (end == v || *end) {
        ss_cli_usage_error(cmd, "%s: '%s' is not an integer (expected %s to %s)", name, v, a, b);
        return -1;
    }
    if (errno == ERANGE || x < lo || x > hi) {
        ss_cli_usage_error(cmd, "%s: %s is out of range (expected an integer from %s to %s)", name,
                           v, a, b);
        return -1;
    }
    *out = x;
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
        return ss_cli_int_opt(cmd, "--nodes", r, v, 1, SS_CLI_MAX_NODES, &c->nodes) ? -1 : 1;
    }
    if ((r = ss_cli_opt(argc, argv, i, "--batch", &v))) {
        return ss_cli_int_opt(cmd, "--batch", r, v, 1, SS_CLI_MAX_BATCH, &c->batch) ? -1 : 1;
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
    /* the plan's tensor-parallel degree, for Megatron's vocabulary padding */
    ss_diag_init(&d);
    if (ss_model_build_tp(c->model, c->batch, ss_machine_n_devices(*m),
                          c->plan ? ss_plan_spec_tp(c->plan) : 0, g, &d) != SS_OK)
        r = ss_cli_fail(&d);
    if (r) {
        ss_machine_free(*m);
        *m = NULL;
        return r;
    }
    if (p && c->plan &&
        (ss_plan_from_spec(c->plan, *g, *m, p, &d) != SS_OK ||
         ss_plan_validate(*p, *g, *m, &d) != SS_OK)) {
        if (!strstr(d.msg, c->plan)) { /* name the plan and the topology */
            ss_diag named;
            ss_diag_init(&named);
            ss_diag_set(&named, d.status, "%s (plan %s, topology %s)", d.msg, c->plan,
                        c->topology);
            d = named;
        }
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
    if (k || a == 0 || a >= 100)
        snprintf(buf, n, k ? "%.2f%s" : "%.0f%s", v, suf[k]);
    else
        snprintf(buf, n, "%.3g", v); /* 0.0123, 1.5, 42.7: never a bare 0 for a small rate */
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

int ss_cli_check_outputs(const char *cmd, const ss_cli_output *outs, int json, int *stdout_taken)
{
    const char *to_stdout = NULL;
    for (int i = 0; outs[i].flag; i++) {
        const char *p = outs[i].path;
        if (!p)
            continue;
        for (int j = 0; j < i; j++)
            if (outs[j].path && !strcmp(outs[j].path, p))
                return ss_cli_usage_error(cmd, "%s and %s name the same file '%s'",
                                          outs[j].flag, outs[i].flag, p);
        if (!strcmp(p, "-")) {
            if (to_stdout)
                return ss_cli_usage_error(cmd, "%s and %s both write to standard output (-)",
                                          to_stdout, outs[i].flag);
            if (json)
                return ss_cli_usage_error(cmd, "--json prints to standard output; give %s a "
                                               "file name, not -",
                                          outs[i].flag);
            to_stdout = outs[i].flag;
        }
        ss_diag d;
        ss_diag_init(&d);
        if (ss_output_check(p, &d) != SS_OK) {
            fprintf(stderr, "simsearch%s%s: %s: %s\n", cmd ? " " : "", cmd ? cmd : "",
                    outs[i].flag, d.msg);
            return SS_EXIT_USAGE;
        }
    }
    if (stdout_taken)
        *stdout_taken = to_stdout != NULL;
    return SS_EXIT_OK;
}

void ss_cli_report_to_stderr(void)
{
    fflush(stdout);
    dup2(STDERR_FILENO, STDOUT_FILENO);
}

/* A fatal signal while an output is being written: remove its temp file,
 * then die of the signal as if it had not been caught. */
static void on_fatal_signal(int sig)
{
    ss_output_remove_temps();
    signal(sig, SIG_DFL);
    raise(sig);
}

void ss_cli_catch_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_fatal_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
}
