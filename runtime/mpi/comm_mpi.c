/*
 * comm_mpi.c — ss_rt_comm over MPI_COMM_WORLD (comm_mpi.h): in-place
 * all-reduce (sum / max) of floats and doubles and a barrier. Built only into
 * simsearch-run.
 */
#include "runtime/mpi/comm_mpi.h"

#include <mpi.h>

static ss_status fail(int rc, const char *what, ss_diag *d)
{
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, msg, &len);
    ss_diag_set(d, SS_ERR_IO, "runtime: %s failed: %s", what, msg);
    return SS_ERR_IO;
}

static ss_status reduce(void *buf, int64_t n, MPI_Datatype t, int op, ss_diag *d)
{
    char *b = buf;
    int es = t == MPI_FLOAT ? 4 : 8;
    while (n > 0) { /* MPI counts are int */
        int c = n > (1 << 30) ? (1 << 30) : (int)n;
        int rc = MPI_Allreduce(MPI_IN_PLACE, b, c, t, op ? MPI_MAX : MPI_SUM, MPI_COMM_WORLD);
        if (rc != MPI_SUCCESS)
            return fail(rc, "MPI_Allreduce", d);
        b += (size_t)c * (size_t)es;
        n -= c;
    }
    return SS_OK;
}

static ss_status ar_f32(void *ctx, float *buf, int64_t n, int op, ss_diag *d)
{
    (void)ctx;
    return reduce(buf, n, MPI_FLOAT, op, d);
}

static ss_status ar_f64(void *ctx, double *buf, int64_t n, int op, ss_diag *d)
{
    (void)ctx;
    return reduce(buf, n, MPI_DOUBLE, op, d);
}

static ss_status barrier(void *ctx, ss_diag *d)
{
    (void)ctx;
    int rc = MPI_Barrier(MPI_COMM_WORLD);
    return rc == MPI_SUCCESS ? SS_OK : fail(rc, "MPI_Barrier", d);
}

ss_status ss_rt_comm_mpi_init(ss_rt_comm *c, ss_diag *d)
{
    int rc = MPI_Init(NULL, NULL);
    if (rc != MPI_SUCCESS)
        return fail(rc, "MPI_Init", d);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &c->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &c->size);
    c->ctx = NULL;
    c->allreduce_f32 = ar_f32;
    c->allreduce_f64 = ar_f64;
    c->barrier = barrier;
    return SS_OK;
}

void ss_rt_comm_mpi_finalize(void)
{
    MPI_Finalize();
}

void ss_rt_comm_mpi_abort(int code)
{
    MPI_Abort(MPI_COMM_WORLD, code);
}
