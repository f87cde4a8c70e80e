/*
 * comm_mpi.h — the MPI implementation of the runtime's collectives
 * (runtime/exec.h ss_rt_comm), built only into the simsearch-run helper
 * (the library never links MPI). Invariant: one communicator, MPI_COMM_WORLD,
 * errors returned (MPI_ERRORS_RETURN), never aborted from here.
 */
#ifndef SS_RT_COMM_MPI_H
#define SS_RT_COMM_MPI_H

#include "runtime/exec.h"

/* MPI_Init (argc/argv may be NULL) and fill c with rank and size of
 * MPI_COMM_WORLD. SS_ERR_IO when MPI cannot start. */
ss_status ss_rt_comm_mpi_init(ss_rt_comm *c, ss_diag *d);
/* MPI_Finalize. */
void ss_rt_comm_mpi_finalize(void);
/* Abort every rank (a failed rank must not leave the others waiting). */
void ss_rt_comm_mpi_abort(int code);

#endif
