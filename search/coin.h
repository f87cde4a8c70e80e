/*
 * coin.h — COIN-OR CBC (the sharding ILP, search/ilp.c) and CLP (the
 * swarm's averaging LP, search/averaging.c), opened with dlopen on first
 * use instead of linked.
 *
 * Why: linking them pulls in LAPACK, whose BLAS (OpenBLAS on Debian)
 * starts its worker threads when the process loads; they spin about 0.1 s
 * of CPU before sleeping, in every simsearch process (simulate included),
 * whether an ILP or LP is ever solved or not. kernels/cpu_gemm.c opens
 * OpenBLAS itself the same way.
 *
 * Use: the solver's functions through the table ss_coin_cbc_open or
 * ss_coin_clp_open returns (cbc->Cbc_newModel(), clp->Clp_dual(m, 0)): the
 * fields have the C interface's names and types (Cbc_C_Interface.h,
 * Clp_C_Interface.h). Invariant: a table is opened once per process
 * (pthread_once) and then never changes; it is returned only with every
 * function present.
 */
#ifndef SS_SEARCH_COIN_H
#define SS_SEARCH_COIN_H

#include "simsearch.h"

#include <Cbc_C_Interface.h>
#include <Clp_C_Interface.h>

#define SS_COIN_CBC_FUNCS(X)                                                                  \
    X(Cbc_newModel) X(Cbc_deleteModel) X(Cbc_setLogLevel) X(Cbc_setParameter)                 \
    X(Cbc_setMaximumSeconds) X(Cbc_setMaximumNodes) X(Cbc_setAllowableGap)                    \
    X(Cbc_setAllowableFractionGap) X(Cbc_addCol) X(Cbc_addRow) X(Cbc_solve)                   \
    X(Cbc_getColSolution) X(Cbc_secondaryStatus) X(Cbc_isProvenOptimal)                       \
    X(Cbc_numberSavedSolutions) X(Cbc_status) X(Cbc_getNumElements)

#define SS_COIN_CLP_FUNCS(X)                                                                  \
    X(Clp_newModel) X(Clp_deleteModel) X(Clp_setLogLevel) X(Clp_loadProblem) X(Clp_dual)     \
    X(Clp_primal) X(Clp_status) X(Clp_getColSolution) X(Clp_chgColumnUpper)                   \
    X(Clp_chgObjCoefficients)

#define SS_COIN_FIELD(f) __typeof__(f) *f;
typedef struct ss_coin_cbc {
    SS_COIN_CBC_FUNCS(SS_COIN_FIELD)
} ss_coin_cbc;
typedef struct ss_coin_clp {
    SS_COIN_CLP_FUNCS(SS_COIN_FIELD)
} ss_coin_clp;
#undef SS_COIN_FIELD

/* The CBC functions (libCbcSolver, opened on the first call). Returns the
 * process's table, or NULL with d set to SS_ERR_UNSUPPORTED naming the
 * library, the loader's message and the Debian package that provides it
 * (every later call fails the same way). Thread-safe. */
const ss_coin_cbc *ss_coin_cbc_open(ss_diag *d);

/* The CLP functions (libClp), as ss_coin_cbc_open. */
const ss_coin_clp *ss_coin_clp_open(ss_diag *d);

/* 1 once ss_coin_cbc_open / ss_coin_clp_open has opened its library, else
 * 0 (tests: nothing before the first ILP or LP). */
int ss_coin_cbc_loaded(void);
int ss_coin_clp_loaded(void);

#endif /* SS_SEARCH_COIN_H */
