/*
 * report.c — ss_sim_result storage (one block for the per-device arrays)
 * and the result's JSON form (report.h). Times in JSON are milliseconds,
 * memory in bytes; per-device arrays are indexed by device id.
 */
#include "simulator/report.h"
#include "core/json_util.h"

#include <string.h>

#define N_ARRAYS 9

static void point_arrays(ss_sim_result *r, double *base, int cap)
{
    double **arr[N_ARRAYS] = {&r->compute_us,        &r->comm_us,
                              &r->exposed_comm_us,   &r->idle_us,
                              &r->peak_memory_bytes, &r->static_memory_bytes,
                              &r->weight_bytes,      &r->capacity_bytes,
                              NULL};
    for (int i = 0; arr[i]; i++)
        *arr[i] = base ? base + (size_t)i * (size_t)cap : NULL;
}

ss_status ss_sim_result_reserve(ss_sim_result *r, int n, ss_diag *d)
{
    if (n <= r->cap_devices && r->compute_us)
        return SS_OK;
    int cap = n > 0 ? n : 1;
    double *block = ss_calloc((size_t)cap * N_ARRAYS, sizeof(double));
    if (!block)
        return ss_diag_set(d, SS_ERR_NOMEM, "simulate: out of memory for %d devices' results",
                           n);
    ss_free(r->compute_us);
    point_arrays(r, block, cap);
    r->cap_devices = cap;
    return SS_OK;
}

void ss_sim_result_clear(ss_sim_result *r)
{
    if (!r)
        return;
    ss_free(r->compute_us);
    memset(r, 0, sizeof *r);
}

ss_status ss_sim_result_copy(ss_sim_result *dst, const ss_sim_result *src, ss_diag *d)
{
    if (dst == src)
        return SS_OK;
    ss_status st = ss_sim_result_reserve(dst, src->n_devices, d);
    if (st != SS_OK)
        return st;
    double *base = dst->compute_us;
    int cap = dst->cap_devices;
    *dst = *src;
    point_arrays(dst, base, cap);
    dst->cap_devices = cap;
    size_t n = (size_t)src->n_devices * sizeof(double);
    if (n && src->compute_us) {
        memcpy(dst->compute_us, src->compute_us, n);
        memcpy(dst->comm_us, src->comm_us, n);
        memcpy(dst->exposed_comm_us, src->exposed_comm_us, n);
        memcpy(dst->idle_us, src->idle_us, n);
        memcpy(dst->peak_memory_bytes, src->peak_memory_bytes, n);
        memcpy(dst->static_memory_bytes, src->static_memory_bytes, n);
        memcpy(dst->weight_bytes, src->weight_bytes, n);
        memcpy(dst->capacity_bytes, src->capacity_bytes, n);
    }
    return SS_OK;
}

/* Append an array of n numbers scaled by k; -1 on failure. */
static int put_array(json_t *obj, const char *key, const double *v, int n, double k)
{
    json_t *a = json_array();
    if (!a)
        return -1;
    for (int i = 0; i < n; i++)
        if (json_array_append_new(a, json_real(v[i] * k))) {
            json_decref(a);
            return -1;
        }
    return json_object_set_new(obj, key, a);
}

static double mean(const double *v, int n)
{
    double s = 0;
    for (int i = 0; i < n; i++)
        s += v[i];
    return n ? s / n : 0;
}

json_t *ss_sim_result_json(const ss_sim_result *r, const char *plan_label)
{
    int n = r->n_devices, bad = 0;
    json_t *o = json_object(), *bd = json_object(), *per = json_object(), *cp = json_array();
    if (!o || !bd || !per || !cp) {
        json_decref(o);
        json_decref(bd);
        json_decref(per);
        json_decref(cp);
        return NULL;
    }
    bad |= json_object_set_new(o, "model", json_string(r->model));
    bad |= json_object_set_new(o, "topology", json_string(r->topology));
    bad |= json_object_set_new(o, "devices", json_integer(n));
    bad |= json_object_set_new(o, "batch", json_integer(r->batch));
    bad |= json_object_set_new(o, "iteration_time_ms", json_real(r->iteration_us / 1e3));
    bad |= json_object_set_new(o, "throughput_samples_per_s", json_real(r->throughput));
    bad |= put_array(o, "peak_memory_bytes", r->peak_memory_bytes, n, 1);
    bad |= put_array(o, "memory_capacity_bytes", r->capacity_bytes, n, 1);
    bad |= put_array(o, "static_memory_bytes", r->static_memory_bytes, n, 1);
    bad |= put_array(o, "weight_bytes", r->weight_bytes, n, 1);
    bad |= json_object_set_new(o, "fits", json_boolean(r->fits));
    if (r->fits) {
        bad |= json_object_set_new(o, "overflow", json_null());
    } else {
        json_t *ov = json_object();
        if (!ov)
            bad = 1;
        else {
            bad |= json_object_set_new(ov, "device", json_integer(r->overflow_device));
            bad |= json_object_set_new(ov, "bytes", json_real(r->overflow_bytes));
            bad |= json_object_set_new(o, "overflow", ov);
        }
    }
    bad |= json_object_set_new(bd, "compute_ms", json_real(mean(r->compute_us, n) / 1e3));
    bad |= json_object_set_new(bd, "communication_ms", json_real(mean(r->comm_us, n) / 1e3));
    bad |= json_object_set_new(bd, "exposed_communication_ms",
                               json_real(mean(r->exposed_comm_us, n) / 1e3));
    bad |= json_object_set_new(bd, "idle_ms", json_real(mean(r->idle_us, n) / 1e3));
    bad |= put_array(per, "compute_ms", r->compute_us, n, 1e-3);
    bad |= put_array(per, "communication_ms", r->comm_us, n, 1e-3);
    bad |= put_array(per, "exposed_communication_ms", r->exposed_comm_us, n, 1e-3);
    bad |= put_array(per, "idle_ms", r->idle_us, n, 1e-3);
    bad |= json_object_set_new(bd, "per_device", per);
    bad |= json_object_set_new(o, "breakdown", bd);
    for (int i = 0; i < r->n_crit; i++) {
        json_t *e = json_object();
        if (!e) {
            bad = 1;
            break;
        }
        bad |= json_object_set_new(e, "name", json_string(r->crit[i].name));
        bad |= json_object_set_new(e, "kind", json_string(r->crit[i].kind));
        bad |= json_object_set_new(e, "tasks", json_integer(r->crit[i].n_tasks));
        bad |= json_object_set_new(e, "time_ms", json_real(r->crit[i].us / 1e3));
        bad |= json_object_set_new(
            e, "share", json_real(r->iteration_us > 0 ? r->crit[i].us / r->iteration_us : 0));
        bad |= json_array_append_new(cp, e);
    }
    bad |= json_object_set_new(o, "critical_path", cp);
    /* null where the evaluator keeps no critical path (hierarchical) */
    bad |= json_object_set_new(o, "critical_path_ms", r->n_crit ? json_real(r->critical_path_us / 1e3)
                                                                : json_null());
    bad |= json_object_set_new(o, "tasks", json_integer(r->n_tasks));
    bad |= json_object_set_new(o, "evaluator", json_string(r->evaluator));
    bad |= json_object_set_new(o, "tasks_simulated", json_integer(r->tasks_simulated));
    bad |= json_object_set_new(o, "symmetry_classes", json_integer(r->symmetry_classes));
    bad |= json_object_set_new(o, "eval_ms", json_real(r->eval_ms));
    bad |= json_object_set_new(o, "plan", plan_label ? json_string(plan_label) : json_null());
    if (bad) {
        json_decref(o);
        return NULL;
    }
    return o;
}

ss_status ss_sim_result_to_json(const ss_sim_result *r, const char *plan_label, char **out,
                                ss_diag *d)
{
    json_t *o = ss_sim_result_json(r, plan_label);
    if (!o)
        return ss_diag_set(d, SS_ERR_NOMEM, "simulate: out of memory writing JSON");
    ss_status st = ss_json_to_string(o, out, d);
    json_decref(o);
    return st;
}
