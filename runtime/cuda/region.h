/*
 * region.h — device-side helpers of the CUDA backend (region.cu): copy
 * between a region of a row-major tensor in device memory and a dense
 * buffer, zero or fill a region, apply SGD or Adam to a region's elements,
 * sum a region into a double. Every call is asynchronous on `stream` (a
 * cudaStream_t) and covers elements [lo, hi) of the region in row-major
 * order; it returns the launch's cudaError_t as an int (0: launched).
 */
#ifndef SS_RT_CUDA_REGION_H
#define SS_RT_CUDA_REGION_H

#ifdef __cplusplus
extern "C" {
#endif

#include "simsearch.h"

enum {
    SS_RTC_GATHER = 0, /* dense[i - lo] = tensor[region i] (es 4 or 8 bytes) */
    SS_RTC_SCATTER,    /* tensor[region i] = dense[i - lo] (es 4 or 8) */
    SS_RTC_ADD,        /* tensor[region i] += dense[i - lo] (f32) */
    SS_RTC_FILL        /* tensor[region i] = value (f32; 0 zeroes) */
};

/* The region's geometry: tensor shape sh (nd dims) and region r. */
typedef struct ss_rtc_geom {
    int nd;
    int64_t stride[SS_MAX_DIMS], lo[SS_MAX_DIMS], ext[SS_MAX_DIMS];
} ss_rtc_geom;
void ss_rtc_geom_of(const int64_t *sh, int nd, const ss_region *r, ss_rtc_geom *g);

int ss_rtc_copy(void *stream, void *tensor, int es, const ss_rtc_geom *g, int64_t lo, int64_t hi,
                void *dense, int mode, float value);
/* SGD (m NULL: w -= lr g) or Adam (beta 0.9 / 0.999, eps 1e-8, bias
 * corrections c1 = 1 - 0.9^step, c2 = 1 - 0.999^step), as the CPU backend. */
int ss_rtc_update(void *stream, float *w, const float *grad, float *m, float *v,
                  const ss_rtc_geom *g, int64_t lo, int64_t hi, double lr, double c1, double c2);
/* *acc += the sum of the region's elements (acc in device memory). */
int ss_rtc_sum(void *stream, const float *tensor, const ss_rtc_geom *g, double *acc);

#ifdef __cplusplus
}
#endif

#endif
