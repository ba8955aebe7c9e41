/* http_gpumem: device memory in use on the backend's GPUs, appended to /metrics at scrape time
 * (cudaMemGetInfo from the scraping HTTP thread), so that leak tests and operators can watch it. */
#include "server/http_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef SD_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

#define GPU_MAX 64

/* Used and total bytes of GPUs [first, first + count); returns how many were read (a GPU that
 * cannot be queried ends the list). cudaMemGetInfo counts every process on the device, so the
 * figure is exact only where the daemon has the GPU to itself. */
static int read_gpus(int first, int count, size_t *used, size_t *total)
{
#ifdef SD_HAVE_CUDA
    int cur = -1, n = 0;
    if (cudaGetDevice(&cur) != cudaSuccess)
        cur = -1;
    for (; n < count && n < GPU_MAX; n++) {
        size_t fr = 0, tot = 0;
        if (cudaSetDevice(first + n) != cudaSuccess || cudaMemGetInfo(&fr, &tot) != cudaSuccess)
            break;
        used[n] = tot - fr;
        total[n] = tot;
    }
    if (cur >= 0) /* this HTTP thread's device is left as it was */
        cudaSetDevice(cur);
    return n;
#else
    (void)first, (void)count, (void)used, (void)total;
    return 0;
#endif
}

char *sd_http__gpu_metrics_append(const sd_http *h, char *text, size_t *len)
{
    size_t used[GPU_MAX], total[GPU_MAX];
    int n = text && h->o.gpu_count > 0 ? read_gpus(h->o.gpu_first, h->o.gpu_count, used, total) : 0;
    if (n == 0)
        return text;
    size_t cap = *len + 512 + (size_t)n * 160;
    char *out = realloc(text, cap);
    if (!out)
        return text; /* the scrape still answers, without these lines */
    size_t off = *len;
    off += (size_t)snprintf(out + off, cap - off,
                            "# HELP sparsed_gpu_memory_used_bytes Device memory in use on the GPU (every "
                            "process: total minus free, cudaMemGetInfo at scrape time).\n"
                            "# TYPE sparsed_gpu_memory_used_bytes gauge\n");
    for (int i = 0; i < n; i++)
        off += (size_t)snprintf(out + off, cap - off, "sparsed_gpu_memory_used_bytes{gpu=\"%d\"} %zu\n",
                                h->o.gpu_first + i, used[i]);
    off += (size_t)snprintf(out + off, cap - off,
                            "# HELP sparsed_gpu_memory_total_bytes Device memory of the GPU.\n"
                            "# TYPE sparsed_gpu_memory_total_bytes gauge\n");
    for (int i = 0; i < n; i++)
        off += (size_t)snprintf(out + off, cap - off, "sparsed_gpu_memory_total_bytes{gpu=\"%d\"} %zu\n",
                                h->o.gpu_first + i, total[i]);
    *len = off;
    return out;
}
