/*
 * engine.h — deterministic event-driven simulation of a task graph.
 *
 * THE RULES
 *
 * 1. Readiness. A task becomes ready when its last predecessor ends; its
 *    ready time is the maximum end time of its predecessors (0 if none).
 *
 * 2. Queues. Every resource (device compute stream, network channel) has a
 *    ready queue. A ready task enters the queue of each resource it occupies.
 *    Queues are ordered by one global key per task:
 *        FIFO policy:            (cls, ready_time, priority, task id)
 *        backward-first policy:  the same, with class 1 for forward tasks
 *    where cls is 0, or 1 only for SS_TASK_FWD tasks under backward-first,
 *    or 2 for a PRIORITY-FIRST task: one that occupies channels only and
 *    whose priority is at least the graph's prio_first (taskgraph.h; the
 *    builder sets it to the gradient synchronisations' keys under
 *    overlapped sync or priority: the data-parallel buckets run beside,
 *    and below, the tensor- and pipeline-parallel traffic; without
 *    priority all buckets share one key, so they go in ready order). A class-2 task's key is (2, priority, ready_time,
 *    task id): among them a waiting task of higher priority (lower value)
 *    goes before one of lower priority that became ready earlier, as
 *    ByteScheduler's priority queue does; any other task on the channel
 *    goes before them (gradients travel below activation traffic). Under
 *    backward-first a device that frees up picks a ready backward (or
 *    update, or any non-forward) task before any ready forward task: 1F1B.
 *    Network channels carry no forward tasks (transfers and collectives are
 *    not SS_TASK_FWD), so on them the backward-first key orders exactly like
 *    FIFO: channels are FIFO but for priority-first tasks, while one key
 *    serves all queues. A running task is never preempted; splitting a
 *    gradient into parts (bucket_bytes) is what lets a front layer's part
 *    overtake the rest of a large one.
 *
 * 3. Starting. A task starts at time t when, at t, it is at the head of the
 *    queue of every resource it occupies and every one of those resources is
 *    free. It then holds all of them for its duration (no preemption). A task
 *    with no resources starts at its ready time.
 *
 * 4. Time. The engine keeps a min-heap of completion events (end time, task
 *    id). At each distinct event time t it first retires EVERY task ending at
 *    t (freeing resources, releasing successors into queues), and only then
 *    tries to start tasks on the resources touched at t. So the choice at t
 *    sees every task ready at t and the key decides; the order in which events
 *    at the same time are popped cannot change the schedule. Zero-duration
 *    tasks (free transfers, joins) are run to closure first: while one can
 *    start at t it starts, ends at t and is retired, releasing its successors
 *    at t; only then do positive-duration tasks start. So a zero-cost task in
 *    a chain is transparent: it never lets a later-keyed task win a resource
 *    that its successor, ready at the same t, would have won.
 *
 * WHY IT CANNOT DEADLOCK. Suppose at some time no task runs and some tasks
 * wait in queues. All resources are free. Take the waiting task w with the
 * smallest key. Keys are one total order over all tasks (rule 2 uses the same
 * key in every queue), so w is the head of every queue it is in, all its
 * resources are free, and it starts (rule 3). Hence whenever tasks wait,
 * something runs, and each running task ends after its finite duration.
 * Every task is eventually retired unless the graph has a cycle, which the
 * engine detects (tasks left unfinished when events run out) and reports.
 * (Per-queue orders that disagree, e.g. backward-first on devices but a
 * plain FIFO key on channels, could deadlock a task that spans a device and
 * a channel; the single key is what rules this out.)
 *
 * WHY IT IS DETERMINISTIC. The start decision at time t for a free resource r
 * depends only on r's queue head and the state of that head's resources. If
 * head h of r starts, it pops from queues of resources that become busy, so it
 * changes no other free resource's head. Hence the set of tasks started at t
 * is independent of the order in which touched resources are examined, and
 * the whole schedule is a pure function of the graph and the policy. The
 * engine uses no hashing, no pointers as keys, no floating-point sums whose
 * order could vary: the same graph gives bit-identical start/end arrays.
 *
 * OUTPUTS (ss_engine_result, borrowed from the engine until the next run):
 *   start[t], end[t]          per task, us
 *   ready[t]                  per task: when its last predecessor ended (rule 1)
 *   blocker[t]                the task whose end determined t's start: the
 *                             predecessor that ended last (start == ready) or
 *                             the task that last held one of t's resources and
 *                             freed it at t's start; -1 for tasks starting at 0
 *                             with nothing before them
 *   blocked_by_resource[t]    1 when blocker[t] is a resource blocker
 *   start_round[t], end_round[t]  per task: rank of its start / end time
 *                             among the distinct event times
 *   busy[r]                   per resource: total time occupied
 *   makespan                  iteration time: the maximum end (0 if no tasks)
 *   per device d (n_devices):
 *     compute_us[d]           busy time of d's compute stream
 *     comm_us[d]              time at least one channel with an end at d
 *                             (taskgraph chan_dev) is busy: the union of those
 *                             channels' busy intervals, overlapped or not
 *     exposed_comm_us[d]      part of comm_us[d] during which d's compute
 *                             stream is idle (communication the device
 *                             waits on rather than hides)
 *     idle_us[d]              makespan - compute_us[d], as ss_sim_result
 *                             defines it (exposed_comm_us[d] <= idle_us[d];
 *                             idle - exposed_comm is time doing nothing)
 *
 * The critical path walks blocker[] back from the last-finishing task (ties:
 * lowest id) to a task with no blocker, and returns it first-to-last.
 *
 * Runs reuse all work arrays, so a search that simulates thousands of
 * graphs allocates only while they grow.
 *
 * CUTTING (search, issue 4). A search only needs to know whether a plan
 * beats its acceptance threshold. Every resource runs one task at a time
 * and every task that has not started by the time being settled starts at
 * or after it, so when a task starts on resource r at t, the makespan is
 * at least t + (the summed durations of r's tasks not started before
 * this one). When that bound exceeds cfg->cutoff (by more than a relative
 * 1e-9, far above the rounding of the sums) the run stops at the end of
 * the round: ss_engine_cut reports it with the bound. A plan whose
 * makespan is at most the cutoff is never stopped, and a stopped plan's
 * makespan is above it, so the search's decisions are those of a run to
 * the end.
 *
 * Speed: O(tasks log + edges + resource slots) with compact arrays: sorted
 * per-resource queues filled in key order (O(1) push and pop in practice,
 * engine.c), completion events bucketed by time; no allocation per task. See
 * benchmarks/bench_engine.c.
 */
#ifndef SS_ENGINE_H
#define SS_ENGINE_H

#include "simsearch.h"
#include "simulator/taskgraph.h"

typedef struct ss_engine_config {
    ss_queue_policy policy;  /* SS_QUEUE_FIFO or SS_QUEUE_BACKWARD_FIRST */
    /* Optional early stop (CUTTING above; ss_engine_run only): with load
     * non-NULL (per resource, the summed durations of the graph's tasks
     * on it), the run stops as soon as it proves the makespan exceeds
     * cutoff. NULL: run to the end. */
    const double *load;
    double cutoff;
    /* Optional: polled every few thousand retired tasks; nonzero stops the
     * run with SS_ERR_INTERRUPTED (no result). NULL: never. */
    int (*stop)(void *ctx);
    void *stop_ctx;
} ss_engine_config;

typedef struct ss_engine_result {
    int n_tasks, n_resources, n_devices;
    double makespan;
    const double *start, *end, *ready;   /* [n_tasks] */
    const int32_t *blocker;              /* [n_tasks] */
    const uint8_t *blocked_by_resource;  /* [n_tasks] */
    const double *busy;                  /* [n_resources] */
    const double *compute_us, *comm_us, *exposed_comm_us, *idle_us; /* [n_devices] */
    int64_t n_rounds;                    /* distinct event times processed */
    /* Per task, the index in
     * 0 .. n_rounds-1 of the event time at which it started / ended. Every
     * start and end time is one of the rounds' times and rounds run in
     * increasing time, so these ranks order tasks' times exactly as the
     * times do (equal ranks <=> equal times): ss_memory_sweep_ranked sorts
     * by them with a counting sort. */
    const int32_t *start_round, *end_round;
} ss_engine_result;

typedef struct ss_engine ss_engine;

/* New engine with no work arrays yet. NULL on allocation failure. */
ss_engine *ss_engine_new(void);
void ss_engine_free(ss_engine *e);

/* Simulate finalized graph tg under cfg (NULL = FIFO). On success the
 * results are available through ss_engine_result_of until the next run or
 * free. Errors: SS_ERR_INVALID (graph not finalized, unknown policy, cycle:
 * the message names one unfinished task), SS_ERR_NOMEM. After an error the
 * previous results are no longer valid (ss_engine_result_of returns NULL). */
ss_status ss_engine_run(ss_engine *e, const ss_taskgraph *tg, const ss_engine_config *cfg,
                        ss_diag *d);

/* Lean mode (off by default; ss_sim_config.one_shot): each run frees its
 * work arrays (task records, queues, calendar, positions) as soon as the
 * rounds are done, before the results by id are written, so a run's peak
 * memory is the rounds' working set and what follows (memory sweep) has
 * that room; and it keeps the ids as positions (engine.c: no reordering
 * for locality, so no position map, successor copies or per-position
 * results; slower rounds on big graphs). Results are the same; the next
 * run allocates them again. */
void ss_engine_set_lean(ss_engine *e, int on);

/* 1 if the last ss_engine_run stopped early (CUTTING): *bound (if
 * non-NULL) is then a lower bound of the makespan, > cfg->cutoff, and no
 * result is available (ss_engine_result_of returns NULL). 0 otherwise. */
int ss_engine_cut(const ss_engine *e, double *bound);

/* Results of the last successful run (borrowed), or NULL if none. */
const ss_engine_result *ss_engine_result_of(const ss_engine *e);

/* The critical path of the last successful run: task ids, first to last (walked
 * once per run, then returned again), in
 * an engine-owned buffer valid until the next run or free. *n = 0 for an
 * empty graph. SS_ERR_INVALID if there is no result; SS_ERR_NOMEM. */
ss_status ss_engine_critical_path(ss_engine *e, const int32_t **path, int *n, ss_diag *d);

#endif /* SS_ENGINE_H */
