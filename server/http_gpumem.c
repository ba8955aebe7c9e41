/* http_gpumem: device memory in use on the backend's GPUs, appended to /metrics at scrape time
 * (cudaMemGetInfo from the scraping HTTP thread), so that leak tests and operators can watch it;
 * and each GPU's SM clock, power, temperature and whether the driver holds its clocks down
 * (NVML through engine/gpu_sensor.c, opened at the first scrape; absent without NVML). Decode
 * runs near the H200's power limit, where the clocks drop (kernels/NOTES.md v27). */
#include "server/http_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef SD_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "engine/cuda_backend.h"
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

/* The sensors of the backend's GPUs, opened once (h->sensor_mu held); a GPU without one (no
 * NVML, no such bus id) is left NULL and the scrape goes on without its lines. */
static void open_sensors(sd_http *h)
{
    h->sensors_opened = 1;
#ifdef SD_HAVE_CUDA
    h->sensors = calloc((size_t)h->o.gpu_count, sizeof *h->sensors);
    for (int i = 0; h->sensors && i < h->o.gpu_count; i++) {
        char pci[32];
        if (sd_cuda_device_pci_id(h->o.gpu_first + i, pci, sizeof pci) == 0)
            sd_gpu_sensor_open(&h->sensors[i], pci, NULL);
    }
#endif
}

void sd_http__gpu_sensors_free(sd_http *h)
{
    for (int i = 0; h->sensors && i < h->o.gpu_count; i++)
        sd_gpu_sensor_free(h->sensors[i]);
    free(h->sensors);
    h->sensors = NULL;
}

typedef struct gpu_gauge {
    const char *name, *help;
} gpu_gauge;

static const gpu_gauge k_gauges[] = {
    {"sparsed_gpu_sm_clock_mhz", "SM clock of the GPU (NVML, at scrape time)."},
    {"sparsed_gpu_power_watts", "Board power draw of the GPU (NVML's running average)."},
    {"sparsed_gpu_temperature_celsius", "GPU core temperature."},
    {"sparsed_gpu_power_capped", "1 while the driver holds the GPU's clocks down for its power limit."},
    {"sparsed_gpu_thermal_slowdown", "1 while the driver holds the GPU's clocks down for heat."},
};

static double gauge_value(const sd_gpu_reading *r, int g)
{
    switch (g) {
    case 0:
        return r->sm_mhz;
    case 1:
        return r->power_w;
    case 2:
        return r->temp_c;
    case 3:
        return (r->reasons & SD_GPU_REASON_POWER) != 0;
    default:
        return (r->reasons & SD_GPU_REASON_THERMAL) != 0;
    }
}

/* The sensors' lines: each gauge's HELP / TYPE, then one line a GPU that gave a reading. */
static char *sensor_lines(sd_http *h, char *out, size_t *len)
{
    sd_gpu_reading r[GPU_MAX];
    int ok[GPU_MAX] = {0}, n = h->o.gpu_count < GPU_MAX ? h->o.gpu_count : GPU_MAX, any = 0;
    pthread_mutex_lock(&h->sensor_mu);
    if (!h->sensors_opened)
        open_sensors(h);
    for (int i = 0; h->sensors && i < n; i++)
        any |= ok[i] = h->sensors[i] && sd_gpu_sensor_read(h->sensors[i], &r[i], NULL) == 0;
    pthread_mutex_unlock(&h->sensor_mu);
    if (!any)
        return out;
    const int ng = (int)(sizeof k_gauges / sizeof k_gauges[0]);
    size_t cap = *len + (size_t)ng * (200 + (size_t)n * 80);
    char *o = realloc(out, cap);
    if (!o)
        return out;
    size_t off = *len;
    for (int g = 0; g < ng; g++) {
        off += (size_t)snprintf(o + off, cap - off, "# HELP %s %s\n# TYPE %s gauge\n", k_gauges[g].name,
                                k_gauges[g].help, k_gauges[g].name);
        for (int i = 0; i < n; i++)
            if (ok[i])
                off += (size_t)snprintf(o + off, cap - off, "%s{gpu=\"%d\"} %.6g\n", k_gauges[g].name,
                                        h->o.gpu_first + i, gauge_value(&r[i], g));
    }
    *len = off;
    return o;
}

char *sd_http__gpu_metrics_append(sd_http *h, char *text, size_t *len)
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
    return sensor_lines(h, out, len);
}
