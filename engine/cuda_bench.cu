/* cuda_bench: device facts for benchmarks — the read-only memory bandwidth ceiling (a
 * streaming kernel, timed with events) and the device name. */
#include "engine/cuda_backend.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/cuda_impl.cuh"

/* Each thread streams 16-byte words past L1 and keeps a running xor, written only if it
 * matches an impossible value, so the loads cannot be removed. */
static __global__ void read_stream_kernel(const uint4 *__restrict__ p, size_t n, uint32_t *sink)
{
    uint32_t acc = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        uint4 v = __ldcs(p + i);
        acc ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    if (acc == 0x9e3779b9u)
        *sink = acc;
}

static __global__ void fill_words_kernel(uint32_t *p, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        p[i] = (uint32_t)(i * 2654435761u) | 1u;
}

static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

static int measure(void *buf, size_t bytes, int sms, double *gbps, sd_diag *d)
{
    enum { REPS = 20 };
    size_t n = bytes / 16;
    float ms[REPS];
    cudaEvent_t e0, e1;
    SD_CU(d, cudaEventCreate(&e0));
    SD_CU(d, cudaEventCreate(&e1));
    uint32_t *sink = (uint32_t *)buf;
    fill_words_kernel<<<sms * 8, 256>>>((uint32_t *)buf, bytes / 4);
    SD_CU_LAUNCH(d);
    for (int r = -3; r < REPS; r++) {
        SD_CU(d, cudaEventRecord(e0));
        read_stream_kernel<<<sms * 8, 512>>>((const uint4 *)buf, n, sink);
        SD_CU_LAUNCH(d);
        SD_CU(d, cudaEventRecord(e1));
        SD_CU(d, cudaEventSynchronize(e1));
        if (r >= 0)
            SD_CU(d, cudaEventElapsedTime(&ms[r], e0, e1));
    }
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    qsort(ms, REPS, sizeof ms[0], cmp_float);
    *gbps = (double)n * 16 / (ms[REPS / 2] * 1e-3) / 1e9;
    return 0;
}

int sd_cuda_read_bandwidth(int device, size_t bytes, double *ret_gbps, sd_diag *d)
{
    int sms = 0;
    void *buf = NULL;
    SD_CU(d, cudaSetDevice(device));
    SD_CU(d, cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    SD_CU(d, cudaMalloc(&buf, bytes));
    int rc = measure(buf, bytes & ~(size_t)15, sms, ret_gbps, d);
    cudaFree(buf);
    return rc;
}

void sd_cuda_device_name(int device, char *buf, size_t len)
{
    cudaDeviceProp p;
    if (cudaGetDeviceProperties(&p, device) != cudaSuccess) {
        cudaGetLastError();
        snprintf(buf, len, "unknown");
        return;
    }
    snprintf(buf, len, "%s", p.name);
}

int sd_cuda_device_pci_id(int device, char *buf, int len)
{
    if (cudaDeviceGetPCIBusId(buf, len, device) != cudaSuccess) {
        cudaGetLastError();
        return SD_ENODEV;
    }
    return 0;
}
