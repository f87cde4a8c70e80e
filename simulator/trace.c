/*
 * trace.c — streamed Chrome Trace Event JSON writer (layout in trace.h).
 *
 * Invariant: the output goes through core/outfile.h (a temp file in the
 * target's directory, renamed over it only after every byte was written
 * and synced; any failure or signal removes the temp file). Every string
 * goes through esc(), every number is finite and printed with %.17g, so the
 * text is always valid JSON.
 */
#include "simulator/trace.h"
#include "core/outfile.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Write s as a JSON string literal. */
static void esc(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(f, "\\%c", *p);
        else if (*p < 0x20)
            fprintf(f, "\\u%04x", *p);
        else
            fputc(*p, f);
    }
    fputc('"', f);
}

static void default_name(void *ctx, const ss_taskgraph *tg, int t, char *buf, size_t n)
{
    (void)ctx;
    int len = snprintf(buf, n, "%s", ss_task_kind_name((ss_task_kind)tg->kind[t]));
    if (tg->op[t] >= 0 && len >= 0 && (size_t)len < n)
        len += snprintf(buf + len, n - (size_t)len, " op%d", tg->op[t]);
    if (tg->tile[t] >= 0 && len >= 0 && (size_t)len < n)
        len += snprintf(buf + len, n - (size_t)len, " tile%d", tg->tile[t]);
    if (tg->mb[t] >= 0 && len >= 0 && (size_t)len < n)
        snprintf(buf + len, n - (size_t)len, " mb%d", tg->mb[t]);
}

/* Process of channel c: its source device, else its destination device,
 * else the network process (n_devices). */
static int chan_pid(const ss_taskgraph *tg, int c)
{
    int a = tg->chan_dev[2 * c], b = tg->chan_dev[2 * c + 1];
    return a >= 0 ? a : b >= 0 ? b : tg->n_devices;
}

static void meta(FILE *f, int *first, int pid, int tid, const char *what, const char *name)
{
    fputs(*first ? "\n" : ",\n", f);
    *first = 0;
    fprintf(f, "{\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"name\":\"%s\",\"args\":{\"name\":", pid,
            tid, what);
    esc(f, name);
    fputs("}}", f);
}

static void write_meta(FILE *f, int *first, const ss_taskgraph *tg, const ss_machine *m,
                       const uint8_t *used, const ss_trace_opts *op)
{
    char buf[3 * SS_NAME_MAX + 64];
    int network = 0;
    for (int c = 0; c < tg->n_channels; c++)
        if (used[c] && chan_pid(tg, c) == tg->n_devices)
            network = 1;
    for (int v = 0; v < tg->n_devices; v++) {
        if (m) {
            const ss_device *dv = ss_machine_device(m, v);
            snprintf(buf, sizeof buf, "%s (%s)", dv->name, ss_machine_host(m, dv->host)->name);
        } else {
            snprintf(buf, sizeof buf, "device%d", v);
        }
        if (op && op->copies > 1 && op->blk[v] > 0) {
            int rep = op->dmap[(op->copies - op->blk[v]) * tg->n_devices + v];
            size_t at = strlen(buf);
            snprintf(buf + at, sizeof buf - at, " = %s's timeline (symmetry)",
                     m ? ss_machine_device(m, rep)->name : "its representative");
        }
        meta(f, first, v, 0, "process_name", buf);
        meta(f, first, v, 0, "thread_name", "compute");
        fputs(",\n", f);
        fprintf(f, "{\"ph\":\"M\",\"pid\":%d,\"tid\":0,\"name\":\"process_sort_index\","
                   "\"args\":{\"sort_index\":%d}}", v, v);
    }
    if (network)
        meta(f, first, tg->n_devices, 0, "process_name", "network");
    for (int c = 0; c < tg->n_channels; c++) {
        if (!used[c])
            continue;
        if (m) {
            const ss_link *l = ss_machine_link(m, c / 2);
            int src = c % 2 ? l->b : l->a, dst = c % 2 ? l->a : l->b;
            snprintf(buf, sizeof buf, "link %s %s->%s", l->kind, ss_machine_node(m, src)->name,
                     ss_machine_node(m, dst)->name);
        } else {
            snprintf(buf, sizeof buf, "channel %d", c);
        }
        meta(f, first, chan_pid(tg, c), 1 + c, "thread_name", buf);
    }
}

/* Resource res's image in copy k (ss_trace_opts.copies). */
static int image(const ss_trace_opts *o, const ss_taskgraph *tg, int k, int res)
{
    if (k == 0 || !o || o->copies <= 1)
        return res;
    if (res < tg->n_devices)
        return o->dmap[k * tg->n_devices + res];
    return tg->n_devices + o->cmap[k * tg->n_channels + res - tg->n_devices];
}

static void write_event(FILE *f, int *first, const ss_taskgraph *tg, const ss_engine_result *r,
                        int t, int pid, int tid, const char *name)
{
    fputs(*first ? "\n" : ",\n", f);
    *first = 0;
    fputs("{\"ph\":\"X\",\"name\":", f);
    esc(f, name);
    fprintf(f, ",\"cat\":\"%s\",\"pid\":%d,\"tid\":%d,\"ts\":%.17g,\"dur\":%.17g,",
            ss_task_kind_name((ss_task_kind)tg->kind[t]), pid, tid, r->start[t],
            r->end[t] - r->start[t]);
    fprintf(f, "\"args\":{\"task\":%d,\"op\":%d,\"tile\":%d,\"mb\":%d,\"bytes\":%.17g}}", t,
            tg->op[t], tg->tile[t], tg->mb[t], isfinite(tg->bytes[t]) ? tg->bytes[t] : 0.0);
}

ss_status ss_trace_write(const char *path, const ss_taskgraph *tg, const ss_engine_result *r,
                         const ss_trace_opts *opts, ss_diag *d)
{
    const ss_machine *m = opts ? opts->m : NULL;
    ss_trace_namer namer = opts && opts->name ? opts->name : default_name;
    void *ctx = opts ? opts->ctx : NULL;
    if (!r || r->n_tasks != tg->n_tasks || r->n_resources != tg->n_resources)
        return ss_diag_set(d, SS_ERR_INVALID, "trace %s: result does not match the task graph",
                           path);
    if (m && (ss_machine_n_devices(m) != tg->n_devices ||
              2 * ss_machine_n_links(m) != tg->n_channels))
        return ss_diag_set(d, SS_ERR_INVALID,
                           "trace %s: machine has %d devices and %d channels, task graph %d and %d",
                           path, ss_machine_n_devices(m), 2 * ss_machine_n_links(m),
                           tg->n_devices, tg->n_channels);
    uint8_t *used = ss_calloc((size_t)tg->n_channels + 1, 1);
    if (!used)
        return ss_diag_set(d, SS_ERR_NOMEM, "trace %s: out of memory", path);
    ss_output *o = NULL;
    FILE *f = NULL;
    ss_status st = ss_output_open(path, &o, &f, d);
    if (st) {
        ss_free(used);
        return st;
    }
    int copies = opts && opts->copies > 1 ? opts->copies : 1;
    for (int t = 0; t < tg->n_tasks; t++)
        for (int i = tg->res_off[t]; i < tg->res_off[t + 1]; i++)
            if (tg->res[i] >= tg->n_devices)
                for (int k = 0; k < copies; k++)
                    used[image(opts, tg, k, tg->res[i]) - tg->n_devices] = 1;

    int first = 1;
    fputs("{\"displayTimeUnit\":\"ms\",\"traceEvents\":[", f);
    write_meta(f, &first, tg, m, used, opts);
    char name[256];
    for (int t = 0; t < tg->n_tasks; t++) {
        if (tg->res_off[t] == tg->res_off[t + 1])
            continue;
        name[0] = '\0';
        namer(ctx, tg, t, name, sizeof name);
        name[sizeof name - 1] = '\0';
        for (int i = tg->res_off[t]; i < tg->res_off[t + 1]; i++)
            for (int k = 0; k < copies; k++) {
                int res = image(opts, tg, k, tg->res[i]), again = 0;
                for (int j = 0; j < k && !again; j++)
                    again = image(opts, tg, j, tg->res[i]) == res;
                if (again)
                    continue;
                if (res < tg->n_devices)
                    write_event(f, &first, tg, r, t, res, 0, name);
                else
                    write_event(f, &first, tg, r, t, chan_pid(tg, res - tg->n_devices),
                                1 + res - tg->n_devices, name);
            }
    }
    fputs("\n]}\n", f);
    ss_free(used);
    if (ferror(f)) {
        st = ss_diag_set(d, SS_ERR_IO, "trace %s: write failed: %s", path, strerror(errno));
        ss_output_abort(o);
        return st;
    }
    return ss_output_commit(o, d);
}
