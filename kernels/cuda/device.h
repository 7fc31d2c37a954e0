/*
 * device.h — the C face of the CUDA kernels. C code never includes CUDA headers; it calls these.
 */
#ifndef MC_CUDA_DEVICE_H
#define MC_CUDA_DEVICE_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Number of usable CUDA devices (0 when there is no driver or no GPU); writes a reason into
 * why[why_len] when it returns 0. Never aborts. */
int mc_cuda_device_count(char *why, size_t why_len);

#ifdef __cplusplus
}
#endif

#endif
