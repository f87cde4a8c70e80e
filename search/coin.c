/*
 * coin.c — COIN-OR CBC and CLP opened on first use (search/coin.h): one
 * dlopen per library (RTLD_NOW | RTLD_LOCAL, never closed), every function
 * of its table looked up, the table published only when all are there.
 *
 * The sonames come from the build (CMakeLists.txt reads them from the
 * libraries pkg-config names), so the library opened is the one the
 * headers were compiled against.
 */
#include "search/coin.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

#ifndef SS_CBC_SONAME
#define SS_CBC_SONAME "libCbcSolver.so.3"
#endif
#ifndef SS_CLP_SONAME
#define SS_CLP_SONAME "libClp.so.1"
#endif

static pthread_once_t cbc_once = PTHREAD_ONCE_INIT, clp_once = PTHREAD_ONCE_INIT;
static ss_coin_cbc cbc_tab;
static ss_coin_clp clp_tab;
static int cbc_ok, clp_ok;
static char cbc_err[320], clp_err[320];

/* Open soname; 1 and *h on success, else 0 with the loader's message in err. */
static int open_lib(const char *soname, void **h, char *err, size_t n)
{
    *h = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
    if (!*h) {
        const char *e = dlerror();
        snprintf(err, n, "%s", e ? e : "dlopen failed");
        return 0;
    }
    return 1;
}

/* Look up name in h into *slot; 0 with err set when it is missing. */
static int sym(void *h, const char *name, void **slot, char *err, size_t n)
{
    *slot = dlsym(h, name);
    if (!*slot)
        snprintf(err, n, "function %s missing", name);
    return *slot != NULL;
}

#define SS_COIN_LOOKUP(f) ok = ok && sym(h, #f, (void **)&tab->f, err, n);

static void cbc_open(void)
{
    void *h;
    ss_coin_cbc *tab = &cbc_tab;
    char *err = cbc_err;
    size_t n = sizeof cbc_err;
    int ok = open_lib(SS_CBC_SONAME, &h, err, n);
    SS_COIN_CBC_FUNCS(SS_COIN_LOOKUP)
    cbc_ok = ok;
}

static void clp_open(void)
{
    void *h;
    ss_coin_clp *tab = &clp_tab;
    char *err = clp_err;
    size_t n = sizeof clp_err;
    int ok = open_lib(SS_CLP_SONAME, &h, err, n);
    SS_COIN_CLP_FUNCS(SS_COIN_LOOKUP)
    clp_ok = ok;
}

#undef SS_COIN_LOOKUP

const ss_coin_cbc *ss_coin_cbc_open(ss_diag *d)
{
    pthread_once(&cbc_once, cbc_open);
    if (cbc_ok)
        return &cbc_tab;
    ss_diag_set(d, SS_ERR_UNSUPPORTED,
                "cannot open COIN-OR CBC (%s, Debian package coinor-libcbc3), needed by the "
                "sharding ILP: %s",
                SS_CBC_SONAME, cbc_err);
    return NULL;
}

const ss_coin_clp *ss_coin_clp_open(ss_diag *d)
{
    pthread_once(&clp_once, clp_open);
    if (clp_ok)
        return &clp_tab;
    ss_diag_set(d, SS_ERR_UNSUPPORTED,
                "cannot open COIN-OR CLP (%s, Debian package coinor-libclp1), needed by the "
                "averaging LP: %s",
                SS_CLP_SONAME, clp_err);
    return NULL;
}

int ss_coin_cbc_loaded(void) { return cbc_ok; }

int ss_coin_clp_loaded(void) { return clp_ok; }
