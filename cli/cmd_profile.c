/*
 * cmd_profile.c — `simsearch profile`: measure, with the kernels of one
 * backend, every distinct operator tile (op type, attributes, tile shape,
 * dtype) a plan — or every candidate config of the search — needs on one
 * device type, and merge the results into a profile database
 * (docs/profile-format.md).
 *
 * Resumable: tiles whose (device type, signature) is already in the
 * database are skipped, and every measurement is appended to the
 * database's journal as soon as it is made (O(1), fsynced; merged into the
 * file once the journal is a quarter of it), so an interrupted run loses at
 * most the tile in progress and a large database costs no more per tile
 * than a fresh one. Views (inputs, reshapes, view splits and transposes) have no
 * kernel in a plan and are not measured. Tiles the backend cannot run (a
 * dtype it lacks) are skipped and counted, with the first reason. Progress
 * goes to stderr: a bar with ETA on a terminal, else a line per tile.
 */
#include "cli.h"
#include "profiler/measure.h"
#include "search/space.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define DEFAULT_DB "profile.json"

typedef struct opts {
    ss_cli_common c;
    const char *device, *devtype, *db;
    int candidates, warm_cache, cpu_time, views;
    long long reps, warmup;
} opts;

static const ss_cli_optdef options[] = {
    SS_CLI_ROW_MODEL(opts),
    SS_CLI_ROW_TOPOLOGY(opts),
    SS_CLI_STR_ROW(opts, "--plan", "SPEC", c.plan, 0,
                   "the plan whose tiles to measure (default data-parallel)"),
    SS_CLI_FLAG_ROW(opts, "--candidates", candidates,
                    "measure the tiles of every candidate config of every op\n"
                    "(the search's space) instead of one plan's"),
    SS_CLI_STR_ROW(opts, "--device", "D", device, 0,
                   "where to run the kernels: cpu (default) or cuda:N"),
    SS_CLI_STR_ROW(opts, "--device-type", "NAME", devtype, 0,
                   "the topology device type the times are for, and whose\n"
                   "devices' tiles are measured (default: the first type)"),
    SS_CLI_STR_ROW(opts, "--db", "FILE", db, 0,
                   "profile database to merge into (default ./" DEFAULT_DB ")"),
    SS_CLI_INT_ROW(opts, "--reps", "N", reps, 1, 100000, "timed repetitions per tile (default 10)"),
    SS_CLI_INT_ROW(opts, "--warmup", "N", warmup, 0, 100000,
                   "untimed repetitions first (default 2)"),
    SS_CLI_FLAG_ROW(opts, "--warm-cache", warm_cache,
                    "CPU: keep the tile's buffers in the caches between passes\n"
                    "(default: evict them before every timed pass, as the rest\n"
                    "of a training iteration does)"),
    SS_CLI_FLAG_ROW(opts, "--views", views,
                    "also measure the views (reshapes, and the splits and\n"
                    "transposes their consumers read in place): `simsearch run`\n"
                    "copies them, a framework does not (default: they cost 0)"),
    SS_CLI_FLAG_ROW(opts, "--cpu-time", cpu_time,
                    "CPU: time by the process's CPU time, not wall time (on a\n"
                    "shared machine other jobs' preemption then does not count;\n"
                    "use with OPENBLAS_NUM_THREADS=1)"),
    SS_CLI_ROW_NODES(opts),
    SS_CLI_ROW_BATCH(opts),
    {NULL, SS_CLI_FLAG, NULL, 0, 0, 0, 0, 0, 0, NULL},
};

const ss_cli_cmddef ss_cli_def_profile = {
    "profile",
    "measure operator tiles into a profile database",
    "Measure the forward and backward time of every distinct operator tile that a\n"
    "plan (or every candidate config of the search) runs on one device type, and\n"
    "merge them into a profile database. Entries already there are skipped, so an\n"
    "interrupted run resumes; every measurement is saved as soon as it is made.\n"
    "A progress line (tiles done / total, ETA) goes to standard error.",
    options,
    NULL,
    0,
    "Pin CPU measurements to one thread per device (OPENBLAS_NUM_THREADS=1) when a\n"
    "topology device is one core. Exit status: 0 success, 2 bad usage or input,\n"
    "1 other failures (no such CUDA device, out of memory, a full disk).",
};

static int parse(int argc, char **argv, opts *o)
{
    memset(o, 0, sizeof *o);
    o->db = DEFAULT_DB;
    o->device = "cpu";
    o->reps = 10;
    o->warmup = 2;
    int r = ss_cli_parse_def(&ss_cli_def_profile, argc, argv, o);
    if (r)
        return r;
    if (o->candidates && o->c.plan)
        return ss_cli_usage_error("profile", "--plan and --candidates exclude each other");
    if (!o->candidates && !o->c.plan)
        o->c.plan = "data-parallel";
    if (!o->db[0])
        return ss_cli_usage_error("profile", "--db needs a file name");
    return 0;
}

/* ---- what to measure --------------------------------------------------------- */

typedef struct item {
    char *sig;
    int op;
    ss_tile t;
} item;

typedef struct items {
    item *v;
    int n, cap;
} items;

/* Not measured: inputs (data arrives), and views unless asked (--views). */
static int skipped_op(const ss_op *op, int views)
{
    return op->type == SS_OP_INPUT ||
           (!views && (op->type == SS_OP_RESHAPE ||
                       ((op->type == SS_OP_SPLIT || op->type == SS_OP_TRANSPOSE) && op->attrs.view)));
}

static int add_item(items *it, const ss_graph *g, int opi, const ss_tile *t)
{
    char sig[SS_PROFILE_SIG_MAX];
    if (ss_profile_signature(g, ss_graph_op(g, opi), t, sig, sizeof sig) < 0)
        return 0; /* too long to key: stays analytic */
    if (ss_grow((void **)&it->v, &it->cap, it->n + 1, sizeof *it->v))
        return -1;
    if (!(it->v[it->n].sig = ss_strdup(sig)))
        return -1;
    it->v[it->n].op = opi;
    it->v[it->n].t = *t;
    it->n++;
    return 0;
}

static int cmp_item(const void *a, const void *b)
{
    const item *x = a, *y = b;
    int c = strcmp(x->sig, y->sig);
    return c ? c : (x->op > y->op) - (x->op < y->op);
}

/* Sort and keep the first item of every signature. */
static void dedupe(items *it)
{
    qsort(it->v, (size_t)it->n, sizeof *it->v, cmp_item);
    int k = 0;
    for (int i = 0; i < it->n; i++) {
        if (k && !strcmp(it->v[k - 1].sig, it->v[i].sig)) {
            ss_free(it->v[i].sig);
            continue;
        }
        it->v[k++] = it->v[i];
    }
    it->n = k;
}

/* Tiles of config c of op that sit on devices of type `type`. */
static int add_config(items *it, const ss_graph *g, const ss_machine *m, int opi,
                      const ss_pconfig *c, int type)
{
    const ss_op *op = ss_graph_op(g, opi);
    for (int k = 0; k < c->ntiles; k++) {
        const ss_device *dev = ss_machine_device(m, c->devices[k]);
        if (!dev || dev->type != type)
            continue;
        ss_tile t;
        ss_pconfig_tile(g, op, c, k, &t);
        if (add_item(it, g, opi, &t))
            return -1;
    }
    return 0;
}

static int collect(items *it, const ss_graph *g, const ss_machine *m, const ss_plan *p,
                   int type, int views, ss_diag *d)
{
    if (p) {
        for (int i = 0; i < ss_graph_n_ops(g); i++)
            if (!skipped_op(ss_graph_op(g, i), views) &&
                add_config(it, g, m, i, ss_plan_config(p, i), type))
                return ss_diag_set(d, SS_ERR_NOMEM, "out of memory");
        return SS_OK;
    }
    ss_space_opts so = {ss_machine_n_devices(m), 0};
    ss_space *sp = NULL;
    ss_status st = ss_space_new(g, &so, &sp, d);
    if (st)
        return st;
    int *devs = ss_calloc((size_t)so.n_devices, sizeof *devs);
    if (!devs) {
        ss_space_free(sp);
        return ss_diag_set(d, SS_ERR_NOMEM, "out of memory");
    }
    for (int i = 0; i < ss_graph_n_ops(g) && st == SS_OK; i++) {
        if (skipped_op(ss_graph_op(g, i), views))
            continue;
        ss_pconfig prev = {0}, c = {0};
        int have_prev = 0;
        for (int64_t k = 0; k < ss_space_n_candidates(sp, i); k++) {
            ss_space_candidate(sp, i, k, &c, devs);
            /* placements of one degree tuple are contiguous; one per tuple
             * suffices unless devices differ in type */
            int same = have_prev && prev.red == c.red && prev.ndim == c.ndim &&
                       !memcmp(prev.deg, c.deg, sizeof c.deg) && ss_machine_n_types(m) == 1;
            prev = c;
            have_prev = 1;
            if (same)
                continue;
            if (add_config(it, g, m, i, &c, type)) {
                st = ss_diag_set(d, SS_ERR_NOMEM, "out of memory");
                break;
            }
        }
        if (it->n > 200000)
            dedupe(it);
    }
    ss_free(devs);
    ss_space_free(sp);
    return st;
}

/* ---- progress ------------------------------------------------------------------ */

static double wall_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void progress(int done, int total, double t0, const char *name)
{
    double el = wall_s() - t0, eta = done ? el / done * (total - done) : 0;
    int w = 30, fill = total ? done * w / total : w;
    char bar[32];
    for (int i = 0; i < w; i++)
        bar[i] = i < fill ? '=' : ' ';
    bar[w] = '\0';
    fprintf(stderr, "\r[%s] %d/%d  ETA %dm%02ds  %-24.24s", bar, done, total, (int)eta / 60,
            (int)eta % 60, name);
    fflush(stderr);
}

/* Without a terminal: one line per tile measured. */
static void progress_line(int done, int total, double t0, const char *name)
{
    double el = wall_s() - t0, eta = done ? el / done * (total - done) : 0;
    fprintf(stderr, "profile: %d/%d tiles measured (%s), %.1f s, ETA %dm%02ds\n", done, total,
            name, el, (int)eta / 60, (int)eta % 60);
    fflush(stderr);
}

/* ---- run -------------------------------------------------------------------------- */

static int parse_device(const char *s, ss_backend *b, int *dev)
{
    if (!strcmp(s, "cpu")) {
        *b = SS_BACKEND_CPU;
        *dev = 0;
        return 0;
    }
    long long v;
    if (!strncmp(s, "cuda:", 5) && !ss_cli_parse_ll(s + 5, 0, 1024, &v)) {
        *b = SS_BACKEND_CUDA;
        *dev = (int)v;
        return 0;
    }
    return -1;
}

static int run(const opts *o, ss_machine *m, ss_graph *g, ss_plan *p)
{
    ss_diag d;
    ss_diag_init(&d);
    ss_backend be;
    int dev;
    if (parse_device(o->device, &be, &dev))
        return ss_cli_usage_error("profile", "--device must be cpu or cuda:N, not '%s'",
                                  o->device);
    if (be == SS_BACKEND_CUDA && (o->cpu_time || o->warm_cache))
        return ss_cli_usage_error("profile", "--cpu-time and --warm-cache apply to --device cpu "
                                  "only");
    if (be == SS_BACKEND_CUDA && dev >= ss_kernel_device_count(be)) {
        fprintf(stderr, "simsearch: no CUDA device %d: this machine has %d CUDA device(s)%s\n",
                dev, ss_kernel_device_count(be),
                ss_kernel_get(be, SS_OP_LINEAR) ? "" : " (this build has no CUDA kernels)");
        return SS_EXIT_FAIL;
    }
    int type = 0;
    if (o->devtype) {
        type = -1;
        for (int i = 0; i < ss_machine_n_types(m); i++)
            if (!strcmp(ss_machine_type(m, i)->name, o->devtype))
                type = i;
        if (type < 0)
            return ss_cli_usage_error("profile", "device type '%s' is not in the topology",
                                      o->devtype);
    } else if (ss_machine_n_types(m) < 1) {
        return ss_cli_usage_error("profile", "topology has no device types");
    }
    const char *tname = ss_machine_type(m, type)->name;
    ss_profile_db *have = NULL;
    items it = {0};
    int rc = SS_EXIT_OK;
    if (ss_profile_db_open(o->db, &have, &d) != SS_OK)
        return ss_cli_fail(&d);
    if (collect(&it, g, m, p, type, o->views, &d) != SS_OK) {
        rc = ss_cli_fail(&d);
        goto out;
    }
    dedupe(&it);
    int todo = 0, already = 0;
    for (int i = 0; i < it.n; i++) {
        if (ss_profile_db_find(have, tname, it.v[i].sig)) {
            already++;
            ss_free(it.v[i].sig);
            it.v[i].sig = NULL;
        } else {
            todo++;
        }
    }
    char devname[SS_PROFILE_TEXT_MAX];
    ss_measure_device_name(be, dev, devname, sizeof devname);
    printf("profile: %d distinct tiles of %s on device type %s: %d already in %s, %d to "
           "measure on %s\n", already + todo, ss_graph_name(g), tname, already, o->db, todo,
           devname);
    fflush(stdout);
    ss_measure_config mc = {be, dev, (int)o->reps, o->warmup ? (int)o->warmup : -1,
                            o->warm_cache ? 0 : ss_measure_cache_flush_bytes(), o->cpu_time};
    int tty = isatty(STDERR_FILENO), done = 0, measured = 0, skipped = 0;
    char why[SS_DIAG_MSG_MAX] = "";
    double t0 = wall_s();
    for (int i = 0; i < it.n; i++) {
        if (!it.v[i].sig)
            continue;
        const ss_op *op = ss_graph_op(g, it.v[i].op);
        if (tty)
            progress(done, todo, t0, op->name);
        ss_measurement ms;
        ss_diag md;
        ss_diag_init(&md);
        ss_status st = ss_measure_tile(&mc, g, op, &it.v[i].t, &ms, &md);
        done++;
        if (st == SS_ERR_UNSUPPORTED) {
            if (!skipped++)
                snprintf(why, sizeof why, "%s", md.msg);
            continue;
        }
        if (st != SS_OK) {
            if (tty)
                fputc('\n', stderr);
            rc = ss_cli_fail(&md);
            goto out;
        }
        ss_profile_entry e;
        memset(&e, 0, sizeof e);
        snprintf(e.device_type, sizeof e.device_type, "%s", tname);
        snprintf(e.signature, sizeof e.signature, "%s", it.v[i].sig);
        e.op_type = op->type;
        e.dtype = ss_graph_tensor(g, op->type == SS_OP_SOFTMAX_CE ? op->inputs[0]
                                                                   : op->outputs[0])->dtype;
        snprintf(e.backend, sizeof e.backend, "%s", ss_backend_name(be));
        snprintf(e.device, sizeof e.device, "%s", devname);
        ss_profile_now(e.date);
        e.reps = ms.reps;
        e.fwd_us = ms.fwd_us;
        e.fwd_spread_us = ms.fwd_spread_us;
        e.bwd_us = ms.bwd_us;
        e.bwd_spread_us = ms.bwd_spread_us;
        if (ss_profile_db_append(o->db, &e, &d) != SS_OK) {
            if (tty)
                fputc('\n', stderr);
            rc = ss_cli_fail(&d);
            goto out;
        }
        measured++;
        if (!tty)
            progress_line(done, todo, t0, op->name);
    }
    if (tty)
        fprintf(stderr, "\r%90s\r", "");
    /* The journal joins the file once it is a quarter of it: adding k tiles
     * to a database of n costs O(k), plus O(n) only every n/4 entries. */
    if (measured && ss_profile_db_compact(o->db, 0.25, &d) != SS_OK) {
        rc = ss_cli_fail(&d);
        goto out;
    }
    if (measured)
        printf("profile: measured %d tiles in %.1f s (%d reps each after %lld warm-up), written "
               "to %s\n", measured, wall_s() - t0, (int)o->reps, o->warmup, o->db);
    else
        printf("profile: measured 0 tiles; %s unchanged\n", o->db);
    if (skipped)
        printf("profile: %d tiles skipped, not runnable on %s (first: %s); they stay analytic\n",
               skipped, ss_backend_name(be), why);
out:
    for (int i = 0; i < it.n; i++)
        ss_free(it.v[i].sig);
    ss_free(it.v);
    ss_profile_db_free(have);
    return rc;
}

int ss_cmd_profile(int argc, char **argv)
{
    opts o;
    int r = parse(argc, argv, &o);
    if (r)
        return r < 0 ? SS_EXIT_OK : r;
    ss_machine *m = NULL;
    ss_graph *g = NULL;
    ss_plan *p = NULL;
    /* the database is written after measuring: check its path first (not
     * "-": it is read back and merged) */
    if (!strcmp(o.db, "-"))
        return ss_cli_usage_error("profile", "--db needs a file (it is read, merged and "
                                             "written back), not -");
    const ss_cli_output outs[] = {{"--db", o.db}, {NULL, NULL}};
    if ((r = ss_cli_check_inputs("profile", &o.c, NULL, outs, NULL)))
        return r;
    if ((r = ss_cli_common_load(&o.c, &m, &g, o.candidates ? NULL : &p)))
        return r;
    r = run(&o, m, g, p);
    ss_plan_free(p);
    ss_graph_free(g);
    ss_machine_free(m);
    return r;
}
