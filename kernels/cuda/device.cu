/* device.cu — runtime probe for CUDA devices (see device.h). Every CUDA call is checked. */
#include "device.h"

#include <cuda_runtime.h>
#include <stdio.h>

extern "C" int mc_cuda_device_count(char *why, size_t why_len)
{
    int n = 0;
    cudaError_t rc = cudaGetDeviceCount(&n);
    if (rc != cudaSuccess) {
        if (why != NULL && why_len > 0)
            snprintf(why, why_len, "cudaGetDeviceCount: %s", cudaGetErrorString(rc));
        return 0;
    }
    if (n == 0 && why != NULL && why_len > 0)
        snprintf(why, why_len, "no CUDA device");
    return n;
}
