/*
 * discover.c — build a topology of this host with hwloc.
 *
 * What it finds: every core becomes a CPU-core device (grouped by NUMA
 * node: one "numaN" switch per NUMA node, a shared-memory link per core, a
 * link between each pair of NUMA nodes); every NVIDIA PCI GPU whose model it
 * can name becomes a device of that built-in type, linked to the NUMA node
 * closest to it over PCIe. The CPU-core type gets this machine's measured
 * peak rates (profiler/measure.c: one core's f32 GEMM rate and streaming
 * memory bandwidth) instead of the built-in spec's guess. Link bandwidths
 * are not measured here: every link is marked "estimated": true, except
 * the core links when the caller passes measured core-to-core figures
 * (`topo --discover --probe`, profiler/probe.c).
 *
 * Invariant: the result is produced by writing a simsearch-topology document
 * and loading it with the ordinary loader, so a discovered machine obeys the
 * same rules as a file and saves/loads back with the same fingerprint.
 */
#include "core/json_util.h"
#include "core/machine_impl.h"
#include "profiler/measure.h"

#include <hwloc.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* Estimates (GB/s, us) for links discovery cannot measure. */
#define CORE_SHM_GBPS 10.0   /* one core's share of memory bandwidth (CPU-core spec) */
#define CORE_SHM_LAT_US 0.1
#define NUMA_GBPS 20.0       /* socket interconnect (UPI/Infinity Fabric), per direction */
#define NUMA_LAT_US 0.2
#define PCIE_DEFAULT_GBPS 12.0 /* PCIe 3.0 x16 achievable (hardware.md) */
#define PCIE_LAT_US 2.0

/* NVIDIA PCI device ids of the SXM/PCIe boards we have specs for. */
static const struct {
    unsigned id;
    const char *type;
} pci_ids[] = {
    {0x102d, "K80"},            {0x15f9, "P100-SXM2"},      {0x1db1, "V100-SXM2-16GB"},
    {0x1db5, "V100-SXM2-32GB"}, {0x20b0, "A100-SXM4-40GB"}, {0x20b2, "A100-SXM4-80GB"},
    {0x2330, "H100-SXM"},       {0x2335, "H200-SXM"},       {0x1eb8, "T4"},
    {0x2204, "RTX3090"},
};

/* Built-in type for a GPU model name ("NVIDIA A100-SXM4-80GB", "Tesla T4",
 * "GeForce RTX 3090"...), or NULL. */
static const char *guess_type(const char *model)
{
    if (!model)
        return NULL;
    if (strstr(model, "H200"))
        return "H200-SXM";
    if (strstr(model, "H100"))
        return "H100-SXM";
    if (strstr(model, "A100"))
        return strstr(model, "80") ? "A100-SXM4-80GB" : "A100-SXM4-40GB";
    if (strstr(model, "V100"))
        return strstr(model, "32") ? "V100-SXM2-32GB" : "V100-SXM2-16GB";
    if (strstr(model, "P100"))
        return "P100-SXM2";
    if (strstr(model, "K80"))
        return "K80";
    if (strstr(model, "T4"))
        return "T4";
    if (strstr(model, "3090"))
        return "RTX3090";
    return NULL;
}

/* The model line of the NVIDIA driver's description of a PCI device
 * ("Model: NVIDIA H100 80GB HBM3"), into buf; NULL without the driver. */
static const char *driver_model(hwloc_obj_t pci, char *buf, size_t n)
{
    char path[128];
    snprintf(path, sizeof path, "/proc/driver/nvidia/gpus/%04x:%02x:%02x.%x/information",
             (unsigned)pci->attr->pcidev.domain, (unsigned)pci->attr->pcidev.bus,
             (unsigned)pci->attr->pcidev.dev, (unsigned)pci->attr->pcidev.func);
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    const char *found = NULL;
    while (!found && fgets(buf, (int)n, f))
        if (strncmp(buf, "Model:", 6) == 0)
            found = buf + 6;
    fclose(f);
    return found;
}

static const char *gpu_type(hwloc_obj_t pci)
{
    char model[256];
    for (hwloc_obj_t c = pci->io_first_child; c; c = c->next_sibling) {
        const char *t = guess_type(hwloc_obj_get_info_by_name(c, "GPUModel"));
        if (t)
            return t;
    }
    const char *t = guess_type(pci->name);
    if (!t)
        t = guess_type(hwloc_obj_get_info_by_name(pci, "PCIDevice"));
    for (size_t i = 0; !t && i < sizeof pci_ids / sizeof pci_ids[0]; i++)
        if (pci->attr->pcidev.device_id == pci_ids[i].id)
            t = pci_ids[i].type;
    if (!t)
        t = guess_type(driver_model(pci, model, sizeof model));
    return t;
}

static void put(json_t *o, const char *k, json_t *v, int *bad)
{
    if (!v || json_object_set_new(o, k, v))
        *bad = 1;
}

static void append(json_t *a, json_t *v, int *bad)
{
    if (!v || json_array_append_new(a, v))
        *bad = 1;
}

static json_t *obj2(const char *k1, const char *v1, const char *k2, const char *v2, int *bad)
{
    json_t *o = json_object();
    if (!o) {
        *bad = 1;
        return NULL;
    }
    put(o, k1, json_string(v1), bad);
    if (k2)
        put(o, k2, json_string(v2), bad);
    return o;
}

static void add_link(json_t *links, const char *a, const char *b, double gbps, double lat,
                     const char *kind, int estimated, int *bad)
{
    json_t *o = obj2("a", a, "b", b, bad);
    if (!o)
        return;
    put(o, "gbps", json_real(gbps), bad);
    put(o, "latency_us", json_real(lat), bad);
    put(o, "kind", json_string(kind), bad);
    put(o, "estimated", estimated ? json_true() : json_false(), bad);
    append(links, o, bad);
}

/* NUMA node index whose cpuset intersects set (0 if none). */
static int numa_of(hwloc_topology_t topo, hwloc_const_cpuset_t set)
{
    int n = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE);
    for (int i = 0; i < n; i++) {
        hwloc_obj_t nn = hwloc_get_obj_by_type(topo, HWLOC_OBJ_NUMANODE, (unsigned)i);
        if (set && nn->cpuset && hwloc_bitmap_intersects(set, nn->cpuset))
            return i;
    }
    return 0;
}

/* Fill the topology document from hwloc; 0 on success, -1 on allocation
 * failure, -2 if no core or PU was found. */
static int build(hwloc_topology_t topo, json_t *doc, const ss_link_figures *shm)
{
    int bad = 0;
    char host[SS_NAME_MAX] = "localhost", a[SS_NAME_MAX], b[SS_NAME_MAX];
    if (gethostname(host, sizeof host - 1) != 0 || !host[0])
        snprintf(host, sizeof host, "localhost");
    hwloc_obj_type_t ct = HWLOC_OBJ_CORE;
    int ncores = hwloc_get_nbobjs_by_type(topo, ct);
    if (ncores <= 0) {
        ct = HWLOC_OBJ_PU;
        ncores = hwloc_get_nbobjs_by_type(topo, ct);
    }
    if (ncores <= 0)
        return -2;
    int nnuma = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE);
    if (nnuma < 1)
        nnuma = 1;
    json_t *types = json_array(), *hosts = json_array(), *devs = json_array(),
           *sws = json_array(), *links = json_array();
    if (!types || !hosts || !devs || !sws || !links)
        bad = 1;
    /* CPU-core with this host's memory shared out per core */
    hwloc_uint64_t mem = hwloc_get_root_obj(topo)->total_memory;
    json_t *cpu = obj2("name", "CPU-core", NULL, NULL, &bad);
    if (cpu && mem > 0)
        put(cpu, "mem_gib", json_real((double)mem / ncores / (1024.0 * 1024.0 * 1024.0)), &bad);
    double gflops, core_gbps;
    ss_measure_cpu_rates(0, &gflops, &core_gbps);
    if (cpu && gflops > 0 && core_gbps > 0) {
        json_t *peak = json_object();
        if (peak)
            put(peak, "f32", json_real(gflops / 1e3), &bad);
        put(cpu, "peak_tflops", peak, &bad);
        put(cpu, "mem_gbps", json_real(core_gbps), &bad);
    }
    append(types, cpu, &bad);
    append(hosts, obj2("name", host, NULL, NULL, &bad), &bad);
    for (int i = 0; i < ncores; i++) {
        snprintf(a, sizeof a, "core%d", i);
        json_t *o = obj2("name", a, "type", "CPU-core", &bad);
        if (o)
            put(o, "host", json_string(host), &bad);
        append(devs, o, &bad);
    }
    int ngpu = 0;
    for (hwloc_obj_t p = hwloc_get_next_pcidev(topo, NULL); p; p = hwloc_get_next_pcidev(topo, p)) {
        if (p->attr->pcidev.vendor_id != 0x10de || (p->attr->pcidev.class_id >> 8) != 0x03)
            continue;
        const char *t = gpu_type(p);
        if (!t)
            continue; /* a GPU we have no spec for: leave it out rather than guess */
        snprintf(a, sizeof a, "gpu%d", ngpu++);
        json_t *o = obj2("name", a, "type", t, &bad);
        if (o)
            put(o, "host", json_string(host), &bad);
        append(devs, o, &bad);
    }
    for (int i = 0; i < nnuma; i++) {
        snprintf(a, sizeof a, "numa%d", i);
        json_t *o = obj2("name", a, "host", host, &bad);
        append(sws, o, &bad);
    }
    for (int i = 0; i < ncores; i++) {
        hwloc_obj_t c = hwloc_get_obj_by_type(topo, ct, (unsigned)i);
        snprintf(a, sizeof a, "core%d", i);
        snprintf(b, sizeof b, "numa%d", numa_of(topo, c->cpuset));
        if (shm)
            add_link(links, a, b, shm->gbps, shm->latency_us / 2, "shm", 0, &bad);
        else
            add_link(links, a, b, CORE_SHM_GBPS, CORE_SHM_LAT_US, "shm", 1, &bad);
    }
    ngpu = 0;
    for (hwloc_obj_t p = hwloc_get_next_pcidev(topo, NULL); p; p = hwloc_get_next_pcidev(topo, p)) {
        if (p->attr->pcidev.vendor_id != 0x10de || (p->attr->pcidev.class_id >> 8) != 0x03 ||
            !gpu_type(p))
            continue;
        hwloc_obj_t anc = hwloc_get_non_io_ancestor_obj(topo, p);
        double gbps = p->attr->pcidev.linkspeed > 0 ? p->attr->pcidev.linkspeed : PCIE_DEFAULT_GBPS;
        snprintf(a, sizeof a, "gpu%d", ngpu++);
        snprintf(b, sizeof b, "numa%d", numa_of(topo, anc ? anc->cpuset : NULL));
        add_link(links, a, b, gbps, PCIE_LAT_US, "pcie", 1, &bad);
    }
    for (int i = 0; i < nnuma; i++)
        for (int j = i + 1; j < nnuma; j++) {
            snprintf(a, sizeof a, "numa%d", i);
            snprintf(b, sizeof b, "numa%d", j);
            add_link(links, a, b, NUMA_GBPS, NUMA_LAT_US, "numa", 1, &bad);
        }
    put(doc, "format", json_string("simsearch-topology"), &bad);
    put(doc, "version", json_integer(1), &bad);
    put(doc, "name", json_string(host), &bad);
    put(doc, "device_types", types, &bad);
    put(doc, "hosts", hosts, &bad);
    put(doc, "devices", devs, &bad);
    put(doc, "switches", sws, &bad);
    put(doc, "links", links, &bad);
    return bad ? -1 : 0;
}

/* Build a topology of this host (see the file comment). On success *out is a
 * new machine the caller frees; on error *out is untouched: SS_ERR_IO if
 * hwloc cannot read the host, SS_ERR_NOMEM on allocation failure. */
ss_status ss_machine_discover(ss_machine **out, ss_diag *d)
{
    return ss_machine_discover_measured(NULL, out, d);
}

ss_status ss_machine_discover_measured(const ss_link_figures *shm, ss_machine **out, ss_diag *d)
{
    if (shm && !(shm->gbps > 0 && shm->latency_us >= 0))
        return ss_diag_set(d, SS_ERR_INVALID, "discover: measured core-to-core figures must be "
                           "a bandwidth > 0 and a latency >= 0");
    hwloc_topology_t topo;
    if (hwloc_topology_init(&topo) != 0)
        return ss_diag_set(d, SS_ERR_IO, "discover: hwloc cannot initialise");
    hwloc_topology_set_io_types_filter(topo, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
    /* The Linux component reads PCI devices from sysfs; the libpciaccess
     * ("pci") component would duplicate that and leaks, and the OpenCL / GL
     * components would start GPU drivers we do not need. */
    hwloc_topology_set_components(topo, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, "pci");
    hwloc_topology_set_components(topo, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, "opencl");
    hwloc_topology_set_components(topo, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, "gl");
    if (hwloc_topology_load(topo) != 0) {
        hwloc_topology_destroy(topo);
        return ss_diag_set(d, SS_ERR_IO, "discover: hwloc cannot read this host's topology");
    }
    json_t *doc = json_object();
    int r = doc ? build(topo, doc, shm) : -1;
    hwloc_topology_destroy(topo);
    ss_status st;
    if (r == -1)
        st = ss_diag_set(d, SS_ERR_NOMEM, "discover: out of memory");
    else if (r == -2)
        st = ss_diag_set(d, SS_ERR_IO, "discover: hwloc found no cores on this host");
    else
        st = ss_machine_from_json(doc, "discovered topology", 0, out, d);
    json_decref(doc);
    return st;
}
