/*
 * schedule.c — the pipeline schedules (schedule.h): queue policy, step
 * order and 1F1B warm-up, shared by the task-graph builder and the
 * hierarchical evaluator so that the two cannot drift apart.
 */
#include "simulator/schedule.h"

ss_queue_policy ss_sched_policy(const ss_plan_settings *set)
{
    return set->schedule == SS_PIPE_1F1B || set->queue == SS_QUEUE_BACKWARD_FIRST
               ? SS_QUEUE_BACKWARD_FIRST
               : SS_QUEUE_FIFO;
}

int ss_sched_step(int mb, int chunk, int P, int V, int backward)
{
    int c = backward ? V - 1 - chunk : chunk;
    return mb / P * P * V + c * P + mb % P;
}

void ss_sched_at(int j, int P, int V, int backward, int *mb, int *chunk)
{
    int grp = j / (P * V), in = j % (P * V);
    *chunk = backward ? V - 1 - in / P : in / P;
    *mb = grp * P + in % P;
}

int ss_sched_warmup(int P, int V, int M, int r)
{
    int total = M * V;
    int w = V == 1 ? P - r - 1 : M == P ? total : (P - r - 1) * 2 + (V - 1) * P;
    return w > total ? total : w;
}
