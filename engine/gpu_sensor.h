/* gpu_sensor: a GPU's clocks, power, temperature and the driver's reasons for holding its clocks
 * down, read through NVML. Decode on the H200 draws 550-700 W against its 700 W limit, and at the
 * limit the driver lowers the SM clock (kernels/NOTES.md v27): a benchmark that does not say what
 * the clocks were cannot be compared with another run. NVML (libnvidia-ml.so.1, installed with
 * the NVIDIA driver) is opened at run time, so the daemon and its tests need it only to read. */
#ifndef SD_GPU_SENSOR_H
#define SD_GPU_SENSOR_H

#include <stddef.h>

#include "engine/diag.h"

#ifdef __cplusplus
extern "C" {
#endif

/* NVML's clock event reasons (a bit set), the ones a benchmark cares about. */
#define SD_GPU_REASON_IDLE 0x1ull
#define SD_GPU_REASON_SW_POWER_CAP 0x4ull
#define SD_GPU_REASON_HW_SLOWDOWN 0x8ull
#define SD_GPU_REASON_SW_THERMAL 0x20ull
#define SD_GPU_REASON_HW_THERMAL 0x40ull
#define SD_GPU_REASON_HW_POWER_BRAKE 0x80ull
/* the clocks held down for the power limit / for heat (the summary's and /metrics' two flags) */
#define SD_GPU_REASON_POWER (SD_GPU_REASON_SW_POWER_CAP | SD_GPU_REASON_HW_POWER_BRAKE)
#define SD_GPU_REASON_THERMAL (SD_GPU_REASON_SW_THERMAL | SD_GPU_REASON_HW_THERMAL)

typedef struct sd_gpu_reading {
    unsigned sm_mhz, mem_mhz;   /* current clocks */
    double power_w;             /* board power draw */
    unsigned temp_c;            /* GPU core temperature */
    unsigned long long reasons; /* SD_GPU_REASON_* bits active now */
} sd_gpu_reading;

typedef struct sd_gpu_sensor sd_gpu_sensor;

/* Opens NVML for the GPU at PCI bus id (CUDA's cudaDeviceGetPCIBusId, "0000:19:00.0").
 * SD_ENOTSUP when libnvidia-ml.so.1 cannot be loaded or lacks a function; SD_ENODEV when NVML
 * does not start (no driver) or has no such GPU. */
int sd_gpu_sensor_open(sd_gpu_sensor **ret, const char *pci_bus_id, sd_diag *d);
/* One reading; SD_EIO naming the query that failed. */
int sd_gpu_sensor_read(sd_gpu_sensor *s, sd_gpu_reading *r, sd_diag *d);
void sd_gpu_sensor_free(sd_gpu_sensor *s);

/* Readings summed up: zero it, add readings, print it. */
typedef struct sd_gpu_summary {
    int n;                /* readings added */
    unsigned sm_min;      /* lowest SM clock */
    double sm_sum, w_sum; /* for the means */
    double w_max;         /* highest power */
    unsigned temp_max;    /* highest temperature */
    int n_power, n_therm; /* readings held down by the power limit (SW cap, HW brake) / by heat */
} sd_gpu_summary;

void sd_gpu_summary_add(sd_gpu_summary *s, const sd_gpu_reading *r);
/* "1962 MHz (min 1815), 641 W (max 699), 54 C, power-capped 12%" (the thermal share too when
 * there is one); "no readings" when none was added. */
void sd_gpu_summary_str(const sd_gpu_summary *s, char *buf, size_t len);

/* A thread that reads the sensor every period_ms until stopped (the sensor must outlive it).
 * sd_gpu_sampler_stop joins it, frees it and hands back the summary of its readings (a failed
 * reading is skipped). */
typedef struct sd_gpu_sampler sd_gpu_sampler;
int sd_gpu_sampler_start(sd_gpu_sampler **ret, sd_gpu_sensor *s, int period_ms, sd_diag *d);
void sd_gpu_sampler_stop(sd_gpu_sampler *p, sd_gpu_summary *out);

#ifdef __cplusplus
}
#endif
#endif
