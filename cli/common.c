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
#include <sys/stat.h>
#include <unistd.h>

int ss_cli_fail(const ss_diag *d)
{
    fprintf(stderr, "simsearch: %s\n", d->msg[0] ? d->msg : ss_status_name(d->status));
    switch (d->status) {
    case SS_ERR_PARSE:
    case SS_ERR_INVALID:
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

int ss_cli_bad_value(const char *cmd, const char *opt, const char *fmt, const char *val)
{
    fprintf(stderr, "simsearch %s: %s: ", cmd, opt);
    fprintf(stderr, fmt, val);
    fprintf(stderr, "\ntry 'simsearch %s --help'\n", cmd);
    return SS_EXIT_USAGE;
}

int ss_cli_split(const char *s, char *buf, size_t cap, char **items, int max)
{
    snprintf(buf, cap, "%s", s);
    int n = 0;
    char *save = NULL;
    for (char *t = strtok_r(buf, ",", &save); t && n < max + 1; t = strtok_r(NULL, ",", &save))
        items[n++] = t;
    return n;
}

int ss_cli_print_json(json_t *root)
{
    char *s = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    json_decref(root);
    if (!s) {
        fprintf(stderr, "simsearch: out of memory\n");
        return SS_EXIT_FAIL;
    }
    printf("%s\n", s);
    free(s);
    return SS_EXIT_OK;
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

const char *ss_cli_spec_file(const char *spec, char *buf, size_t n)
{
    if (!spec)
        return NULL;
    if (!strncmp(spec, "hf:", 3)) {
        const char *path = spec + 3, *colon = strchr(path, ':');
        size_t len = colon ? (size_t)(colon - path) : strlen(path);
        struct stat sb;
        if (len == 0 || len >= n)
            return NULL;
        memcpy(buf, path, len);
        buf[len] = '\0';
        if (stat(buf, &sb) == 0 && S_ISDIR(sb.st_mode) &&
            snprintf(buf + len, n - len, "/config.json") >= (int)(n - len))
            return NULL;
        return buf;
    }
    if (!strncmp(spec, "megatron:", 9)) /* recompute=full/none: a spec, not a path */
        return NULL;
    size_t len = strlen(spec);
    return strchr(spec, '/') || (len >= 5 && !strcmp(spec + len - 5, ".json")) ? spec : NULL;
}

/* Identity of a path after resolving links: the file's device and inode
 * when it exists; else its resolved directory's, plus the last name. */
typedef struct file_id {
    dev_t dev;
    ino_t ino;
    const char *name; /* NULL when the file exists */
} file_id;

static int get_id(const char *path, file_id *id)
{
    struct stat st;
    memset(id, 0, sizeof *id);
    if (stat(path, &st) == 0) {
        id->dev = st.st_dev;
        id->ino = st.st_ino;
        return 0;
    }
    const char *slash = strrchr(path, '/');
    id->name = slash ? slash + 1 : path;
    char dir[4096];
    if (!slash)
        snprintf(dir, sizeof dir, ".");
    else if (slash == path)
        snprintf(dir, sizeof dir, "/");
    else
        snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
    if (stat(dir, &st) != 0)
        return -1;
    id->dev = st.st_dev;
    id->ino = st.st_ino;
    return 0;
}

static int same_id(const file_id *a, const file_id *b)
{
    if (a->dev != b->dev || a->ino != b->ino || !a->name != !b->name)
        return 0;
    return !a->name || !strcmp(a->name, b->name);
}

int ss_cli_check_files(const char *cmd, const ss_cli_output *ins, const ss_cli_output *outs,
                       int json, int *stdout_taken)
{
    const char *to_stdout = NULL;
    const char *c = cmd ? cmd : "";
    for (int i = 0; ins && ins[i].flag; i++) {
        struct stat st;
        const char *p = ins[i].path;
        if (!p || !strcmp(p, "-"))
            continue;
        if (stat(p, &st) != 0 || access(p, R_OK) != 0)
            return ss_cli_usage_error(cmd, "%s %s: cannot read it: %s", ins[i].flag, p,
                                      strerror(errno));
        if (!S_ISREG(st.st_mode))
            return ss_cli_usage_error(
                cmd, "%s %s: is %s (expected a regular file)", ins[i].flag, p,
                S_ISFIFO(st.st_mode)  ? "a FIFO, which would block until a writer comes"
                : S_ISDIR(st.st_mode) ? "a directory"
                : S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) ? "a device"
                                                              : "not a plain file");
    }
    for (int i = 0; outs[i].flag; i++) {
        const char *p = outs[i].path;
        if (!p)
            continue;
        if (!strcmp(p, "-")) {
            if (to_stdout)
                return ss_cli_usage_error(cmd, "%s and %s both write to standard output (-)",
                                          to_stdout, outs[i].flag);
            if (json)
                return ss_cli_usage_error(cmd, "--json prints to standard output; give %s a "
                                               "file name, not -",
                                          outs[i].flag);
            to_stdout = outs[i].flag;
            continue;
        }
        ss_diag d;
        ss_diag_init(&d);
        if (ss_output_check(p, &d) != SS_OK) {
            fprintf(stderr, "simsearch%s%s: %s: %s\n", cmd ? " " : "", c, outs[i].flag, d.msg);
            return SS_EXIT_USAGE;
        }
        file_id me, other;
        if (get_id(p, &me))
            continue; /* ss_output_check accepted it: cannot happen */
        for (int j = 0; j < i; j++)
            if (outs[j].path && strcmp(outs[j].path, "-") && !get_id(outs[j].path, &other) &&
                same_id(&me, &other))
                return ss_cli_usage_error(cmd, "%s '%s' and %s '%s' are the same file",
                                          outs[j].flag, outs[j].path, outs[i].flag, p);
        for (int j = 0; ins && ins[j].flag; j++)
            if (ins[j].path && strcmp(ins[j].path, "-") && !get_id(ins[j].path, &other) &&
                !other.name && same_id(&me, &other))
                return ss_cli_usage_error(cmd,
                                          "%s '%s' is the input %s '%s': writing it would "
                                          "destroy the input",
                                          outs[i].flag, p, ins[j].flag, ins[j].path);
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
    static const char msg_int[] = "\nsimsearch: interrupted (SIGINT): stopped; files not complete were not written\n",
                      msg_term[] = "\nsimsearch: terminated (SIGTERM): stopped; files not complete were not written\n",
                      msg_hup[] = "\nsimsearch: hung up (SIGHUP): stopped; files not complete were not written\n";
    const char *m = sig == SIGINT ? msg_int : sig == SIGTERM ? msg_term : msg_hup;
    size_t n = sig == SIGINT ? sizeof msg_int : sig == SIGTERM ? sizeof msg_term : sizeof msg_hup;
    ssize_t w = write(STDERR_FILENO, m, n - 1);
    (void)w;
    ss_output_remove_temps();
    signal(sig, SIG_DFL);
    raise(sig);
}

volatile sig_atomic_t ss_cli_stop_signal;

static void on_stop_signal(int sig)
{
    if (ss_cli_stop_signal) {
        ss_output_remove_temps();
        signal(sig, SIG_DFL);
        raise(sig);
    }
    ss_cli_stop_signal = sig;
}

void ss_cli_stop_signals_catch(struct sigaction old[2])
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    ss_cli_stop_signal = 0;
    sigaction(SIGINT, &sa, &old[0]);
    sigaction(SIGTERM, &sa, &old[1]);
}

void ss_cli_stop_signals_restore(const struct sigaction old[2])
{
    sigaction(SIGINT, &old[0], NULL);
    sigaction(SIGTERM, &old[1], NULL);
}

int ss_cli_stop_cb(void *ctx)
{
    (void)ctx;
    return ss_cli_stop_signal != 0;
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

int ss_cli_check_inputs(const char *cmd, const ss_cli_common *c, const ss_cli_output *extra_in,
                        const ss_cli_output *outs, int *stdout_taken)
{
    char mfile[4096], pfile[4096];
    ss_cli_output ins[] = {
        {"--model", ss_cli_spec_file(c->model, mfile, sizeof mfile)},
        {"--topology", c->topology},
        {"--plan", ss_cli_spec_file(c->plan, pfile, sizeof pfile)},
        {NULL, NULL},
        {NULL, NULL}};
    if (extra_in)
        ins[3] = *extra_in;
    return ss_cli_check_files(cmd, ins, outs, c->json, stdout_taken);
}

int ss_cli_check_and_load(const char *cmd, const ss_cli_common *c,
                          const ss_cli_output *extra_in, const ss_cli_output *outs,
                          int *stdout_taken, ss_machine **m, ss_graph **g, ss_plan **p)
{
    int r = ss_cli_check_inputs(cmd, c, extra_in, outs, stdout_taken);
    if (r)
        return r;
    return ss_cli_common_load(c, m, g, p);
}

void ss_cli_free_sim(ss_sim *sim, ss_costmodel *cm, ss_profile_db *db, ss_plan *p, ss_graph *g,
                     ss_machine *m)
{
    ss_sim_free(sim);
    ss_cost_free(cm);
    ss_profile_db_free(db);
    ss_plan_free(p);
    ss_graph_free(g);
    ss_machine_free(m);
}
