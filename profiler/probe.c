/*
 * probe.c — running the MPI link probe helper and reading its document
 * (probe.h). The helper is a separate program so that the library and the
 * simsearch command do not depend on MPI: only `probe` needs it, and only
 * when it is run.
 */
#include "profiler/probe.h"
#include "core/json_util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *const ROOT_KEYS[] = {"format", "version", "backend", "ranks", "host", "reps",
                                        "p2p", "allreduce", NULL};
static const char *const P2P_KEYS[] = {"bytes", "us", "gbps", NULL};
static const char *const AR_KEYS[] = {"bytes", "us", "busbw_gbps", NULL};

static ss_status points(const char *file, const json_t *root, const char *key, int ar,
                        ss_probe_point *pt, int *n, ss_diag *d)
{
    json_t *arr = NULL;
    ss_status st = ss_json_get_child(file, "$", root, key, JSON_ARRAY, 1, &arr, d);
    if (st)
        return st;
    if (json_array_size(arr) < 1 || json_array_size(arr) > SS_PROBE_MAX_POINTS)
        return ss_diag_set(d, SS_ERR_PARSE, "%s: $.%s: expected 1 to %d points, got %zu", file,
                           key, SS_PROBE_MAX_POINTS, json_array_size(arr));
    *n = (int)json_array_size(arr);
    for (int i = 0; i < *n; i++) {
        char jp[48];
        snprintf(jp, sizeof jp, "$.%s[%d]", key, i);
        json_t *o = json_array_get(arr, (size_t)i);
        if ((st = ss_json_check_keys(file, jp, o, ar ? AR_KEYS : P2P_KEYS, d)) ||
            (st = ss_json_get_num(file, jp, o, "bytes", 1, 1, 1e15, &pt[i].bytes, d)) ||
            (st = ss_json_get_num(file, jp, o, "us", 1, 0, 1e12, &pt[i].us, d)) ||
            (st = ss_json_get_num(file, jp, o, ar ? "busbw_gbps" : "gbps", 1, 0, 1e6,
                                  &pt[i].gbps, d)))
            return st;
    }
    return SS_OK;
}

ss_status ss_probe_parse(const char *json, const char *label, ss_probe_result *out, ss_diag *d)
{
    json_t *root = NULL;
    ss_status st = ss_json_parse_string(json, label, &root, d);
    if (st)
        return st;
    ss_probe_result r;
    memset(&r, 0, sizeof r);
    const char *be = NULL, *host = NULL;
    int64_t ranks = 0, reps = 0;
    if (!(st = ss_json_check_header(label, root, "simsearch-probe", 1, d)) &&
        !(st = ss_json_check_keys(label, "$", root, ROOT_KEYS, d)) &&
        !(st = ss_json_get_str(label, "$", root, "backend", 1, sizeof r.backend, &be, d)) &&
        !(st = ss_json_get_str(label, "$", root, "host", 1, sizeof r.host, &host, d)) &&
        !(st = ss_json_get_int(label, "$", root, "ranks", 1, 2, 1 << 20, &ranks, d)) &&
        !(st = ss_json_get_int(label, "$", root, "reps", 1, 1, 1 << 20, &reps, d)) &&
        !(st = points(label, root, "p2p", 0, r.p2p, &r.n_p2p, d)))
        st = points(label, root, "allreduce", 1, r.allreduce, &r.n_allreduce, d);
    if (st == SS_OK && strcmp(be, "mpi") && strcmp(be, "nccl"))
        st = ss_diag_set(d, SS_ERR_PARSE, "%s: $.backend: \"%s\" (expected \"mpi\" or \"nccl\")",
                         label, be);
    if (st == SS_OK) {
        snprintf(r.backend, sizeof r.backend, "%s", be);
        snprintf(r.host, sizeof r.host, "%s", host);
        r.ranks = (int)ranks;
        r.reps = (int)reps;
        int small = 0, any_big = 0;
        for (int i = 0; i < r.n_p2p; i++) {
            if (r.p2p[i].bytes < r.p2p[small].bytes)
                small = i;
            any_big |= r.p2p[i].bytes >= 65536;
        }
        r.latency_us = r.p2p[small].us;
        for (int i = 0; i < r.n_p2p; i++)
            if ((!any_big || r.p2p[i].bytes >= 65536) && r.p2p[i].gbps > r.p2p_gbps)
                r.p2p_gbps = r.p2p[i].gbps;
        for (int i = 0; i < r.n_allreduce; i++)
            if (r.allreduce[i].gbps > r.busbw_gbps)
                r.busbw_gbps = r.allreduce[i].gbps;
        if (!(r.p2p_gbps > 0))
            st = ss_diag_set(d, SS_ERR_PARSE, "%s: $.p2p: no positive bandwidth", label);
    }
    json_decref(root);
    if (st == SS_OK)
        *out = r;
    return st;
}

ss_status ss_probe_to_string(const ss_probe_result *r, char **out, ss_diag *d)
{
    json_t *root = json_object(), *p2p = json_array(), *ar = json_array();
    if (!root || !p2p || !ar) {
        json_decref(root);
        json_decref(p2p);
        json_decref(ar);
        return ss_diag_set(d, SS_ERR_NOMEM, "out of memory");
    }
    json_object_set_new(root, "format", json_string("simsearch-probe"));
    json_object_set_new(root, "version", json_integer(1));
    json_object_set_new(root, "backend", json_string(r->backend));
    json_object_set_new(root, "ranks", json_integer(r->ranks));
    json_object_set_new(root, "host", json_string(r->host));
    json_object_set_new(root, "reps", json_integer(r->reps));
    for (int i = 0; i < r->n_p2p; i++) {
        json_t *o = json_object();
        json_object_set_new(o, "bytes", json_real(r->p2p[i].bytes));
        json_object_set_new(o, "us", json_real(r->p2p[i].us));
        json_object_set_new(o, "gbps", json_real(r->p2p[i].gbps));
        json_array_append_new(p2p, o);
    }
    for (int i = 0; i < r->n_allreduce; i++) {
        json_t *o = json_object();
        json_object_set_new(o, "bytes", json_real(r->allreduce[i].bytes));
        json_object_set_new(o, "us", json_real(r->allreduce[i].us));
        json_object_set_new(o, "busbw_gbps", json_real(r->allreduce[i].gbps));
        json_array_append_new(ar, o);
    }
    json_object_set_new(root, "p2p", p2p);
    json_object_set_new(root, "allreduce", ar);
    ss_status st = ss_json_to_string(root, out, d);
    json_decref(root);
    return st;
}

/* Directory of the running executable + "/simsearch-probe". */
static int default_helper(char *buf, size_t n)
{
    ssize_t k = readlink("/proc/self/exe", buf, n - 1);
    if (k <= 0)
        return -1;
    buf[k] = '\0';
    char *slash = strrchr(buf, '/');
    if (!slash || (size_t)(slash - buf) + 17 >= n)
        return -1;
    strcpy(slash + 1, "simsearch-probe");
    return 0;
}

/* 1 if `prog` is an executable on PATH. */
static int on_path(const char *prog)
{
    const char *path = getenv("PATH");
    char buf[4096];
    while (path && *path) {
        size_t len = strcspn(path, ":");
        if (len && len + strlen(prog) + 2 < sizeof buf) {
            memcpy(buf, path, len);
            buf[len] = '/';
            strcpy(buf + len + 1, prog);
            if (access(buf, X_OK) == 0)
                return 1;
        }
        path += len + (path[len] == ':');
    }
    return 0;
}

ss_status ss_probe_run(const ss_probe_config *c, ss_probe_result *out, ss_diag *d)
{
    const char *be = c && c->backend ? c->backend : "mpi";
    if (!strcmp(be, "nccl"))
        return ss_diag_set(d, SS_ERR_UNSUPPORTED, "probe: the nccl backend needs NCCL and GPUs; "
                           "this build has no NCCL probe (use --backend mpi)");
    if (strcmp(be, "mpi"))
        return ss_diag_set(d, SS_ERR_INVALID, "probe: unknown backend '%s' (mpi or nccl)", be);
    int ranks = c && c->ranks > 0 ? c->ranks : 2, reps = c && c->reps > 0 ? c->reps : 20;
    long maxb = c && c->max_bytes > 0 ? c->max_bytes : 1L << 24;
    if (ranks < 2 || ranks > 4096 || maxb < 8 || maxb > (1L << 30))
        return ss_diag_set(d, SS_ERR_INVALID, "probe: needs 2 to 4096 ranks and a largest "
                           "message of 8 B to 1 GiB");
    char helper[4096];
    if (c && c->helper)
        snprintf(helper, sizeof helper, "%s", c->helper);
    else if (default_helper(helper, sizeof helper))
        return ss_diag_set(d, SS_ERR_UNSUPPORTED, "probe: cannot locate the simsearch-probe "
                           "helper");
    if (access(helper, X_OK) != 0)
        return ss_diag_set(d, SS_ERR_UNSUPPORTED, "probe: %s is missing: this build has no MPI "
                           "probe helper (install Open MPI: scripts/setup.sh, then rebuild)",
                           helper);
    if (!on_path("mpirun"))
        return ss_diag_set(d, SS_ERR_UNSUPPORTED, "probe: mpirun is not on PATH (install Open "
                           "MPI: scripts/setup.sh)");
    if (strchr(helper, '\''))
        return ss_diag_set(d, SS_ERR_INVALID, "probe: helper path with a quote: %s", helper);
    char cmd[8192];
    snprintf(cmd, sizeof cmd,
             "mpirun --allow-run-as-root --oversubscribe -np %d '%s' --reps %d --max-bytes %ld",
             ranks, helper, reps, maxb);
    FILE *p = popen(cmd, "r");
    if (!p)
        return ss_diag_set(d, SS_ERR_IO, "probe: cannot start mpirun: %s", strerror(errno));
    size_t cap = 1 << 16, len = 0;
    char *text = ss_malloc(cap);
    if (!text) {
        pclose(p);
        return ss_diag_set(d, SS_ERR_NOMEM, "out of memory");
    }
    size_t k;
    while ((k = fread(text + len, 1, cap - len - 1, p)) > 0) {
        len += k;
        if (len + 1 >= cap) {
            char *nt = ss_realloc(text, cap * 2);
            if (!nt) {
                ss_free(text);
                pclose(p);
                return ss_diag_set(d, SS_ERR_NOMEM, "out of memory");
            }
            text = nt;
            cap *= 2;
        }
    }
    text[len] = '\0';
    int rc = pclose(p);
    ss_status st;
    if (rc == -1 || !WIFEXITED(rc) || WEXITSTATUS(rc) != 0)
        st = ss_diag_set(d, SS_ERR_IO, "probe: '%s' failed (status %d)", cmd,
                         rc != -1 && WIFEXITED(rc) ? WEXITSTATUS(rc) : -1);
    else
        st = ss_probe_parse(text, "simsearch-probe output", out, d);
    ss_free(text);
    return st;
}
