/* gpu_sensor: NVML through dlopen (gpu_sensor.h). The few NVML entry points used are declared
 * here with their C types (NVML's ABI: int results, opaque device handles), so the build needs
 * no NVML header; the driver's library provides them at run time. */
#include "engine/gpu_sensor.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

typedef void *nvml_dev;
enum { NVML_OK = 0, NVML_CLOCK_SM = 1, NVML_CLOCK_MEM = 2, NVML_TEMPERATURE_GPU = 0 };

struct sd_gpu_sensor {
    void *lib;
    nvml_dev dev;
    int (*shutdown)(void);
    const char *(*err)(int);
    int (*clock)(nvml_dev, int, unsigned *);
    int (*power)(nvml_dev, unsigned *); /* milliwatts */
    int (*temp)(nvml_dev, int, unsigned *);
    int (*reasons)(nvml_dev, unsigned long long *);
};

/* dlsym into *fn; `alt` (may be NULL): the older name of the same function. */
static int sym(void *lib, const char *name, const char *alt, void *fn)
{
    void *p = dlsym(lib, name);
    if (!p && alt)
        p = dlsym(lib, alt);
    *(void **)fn = p;
    return p ? 0 : -1;
}

int sd_gpu_sensor_open(sd_gpu_sensor **ret, const char *pci_bus_id, sd_diag *d)
{
    sd_gpu_sensor *s = calloc(1, sizeof *s);
    if (!s)
        return sd_diag_set(d, SD_ENOMEM, "gpu sensor: out of memory");
    int (*init)(void) = NULL;
    int (*by_pci)(const char *, nvml_dev *) = NULL;
    int rc = SD_ENOTSUP, e = NVML_OK;
    s->lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!s->lib) {
        sd_diag_set(d, rc, "gpu sensor: cannot load libnvidia-ml.so.1 (NVML, part of the NVIDIA driver)");
        goto fail;
    }
    if (sym(s->lib, "nvmlInit_v2", NULL, &init) || sym(s->lib, "nvmlShutdown", NULL, &s->shutdown) ||
        sym(s->lib, "nvmlErrorString", NULL, &s->err) ||
        sym(s->lib, "nvmlDeviceGetHandleByPciBusId_v2", NULL, &by_pci) ||
        sym(s->lib, "nvmlDeviceGetClockInfo", NULL, &s->clock) ||
        sym(s->lib, "nvmlDeviceGetPowerUsage", NULL, &s->power) ||
        sym(s->lib, "nvmlDeviceGetTemperature", NULL, &s->temp) ||
        sym(s->lib, "nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons",
            &s->reasons)) {
        sd_diag_set(d, rc, "gpu sensor: libnvidia-ml.so.1 lacks a function: %s", dlerror());
        goto fail;
    }
    if ((e = init()) != NVML_OK) {
        sd_diag_set(d, SD_ENODEV, "gpu sensor: nvmlInit: %s", s->err(e));
        s->shutdown = NULL; /* nothing to shut down */
        rc = SD_ENODEV;
        goto fail;
    }
    if ((e = by_pci(pci_bus_id, &s->dev)) != NVML_OK) {
        sd_diag_set(d, SD_ENODEV, "gpu sensor: no GPU at PCI %s: %s", pci_bus_id, s->err(e));
        rc = SD_ENODEV;
        goto fail;
    }
    *ret = s;
    return 0;
fail:
    sd_gpu_sensor_free(s);
    return rc;
}

int sd_gpu_sensor_read(sd_gpu_sensor *s, sd_gpu_reading *r, sd_diag *d)
{
    unsigned mw = 0;
    int e;
    const char *what = "SM clock";
    if ((e = s->clock(s->dev, NVML_CLOCK_SM, &r->sm_mhz)) != NVML_OK)
        goto fail;
    what = "memory clock";
    if ((e = s->clock(s->dev, NVML_CLOCK_MEM, &r->mem_mhz)) != NVML_OK)
        goto fail;
    what = "power";
    if ((e = s->power(s->dev, &mw)) != NVML_OK)
        goto fail;
    what = "temperature";
    if ((e = s->temp(s->dev, NVML_TEMPERATURE_GPU, &r->temp_c)) != NVML_OK)
        goto fail;
    what = "clock event reasons";
    if ((e = s->reasons(s->dev, &r->reasons)) != NVML_OK)
        goto fail;
    r->power_w = mw / 1e3;
    return 0;
fail:
    return sd_diag_set(d, SD_EIO, "gpu sensor: reading the %s: %s", what, s->err(e));
}

void sd_gpu_sensor_free(sd_gpu_sensor *s)
{
    if (!s)
        return;
    if (s->shutdown)
        s->shutdown();
    if (s->lib)
        dlclose(s->lib);
    free(s);
}

void sd_gpu_summary_add(sd_gpu_summary *s, const sd_gpu_reading *r)
{
    if (!s->n || r->sm_mhz < s->sm_min)
        s->sm_min = r->sm_mhz;
    if (!s->n || r->power_w > s->w_max)
        s->w_max = r->power_w;
    if (!s->n || r->temp_c > s->temp_max)
        s->temp_max = r->temp_c;
    s->n++;
    s->sm_sum += r->sm_mhz;
    s->w_sum += r->power_w;
    s->n_power += (r->reasons & SD_GPU_REASON_POWER) != 0;
    s->n_therm += (r->reasons & SD_GPU_REASON_THERMAL) != 0;
}

void sd_gpu_summary_str(const sd_gpu_summary *s, char *buf, size_t len)
{
    if (!s->n) {
        snprintf(buf, len, "no readings");
        return;
    }
    int k = snprintf(buf, len, "%.0f MHz (min %u), %.0f W (max %.0f), %u C, power-capped %.0f%%",
                     s->sm_sum / s->n, s->sm_min, s->w_sum / s->n, s->w_max, s->temp_max,
                     100.0 * s->n_power / s->n);
    if (s->n_therm && k >= 0 && (size_t)k < len)
        snprintf(buf + k, len - (size_t)k, ", thermal %.0f%%", 100.0 * s->n_therm / s->n);
}

struct sd_gpu_sampler {
    sd_gpu_sensor *sensor;
    int period_ms, stop;
    sd_gpu_summary sum;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t th;
};

static void *sampler_main(void *arg)
{
    sd_gpu_sampler *p = arg;
    pthread_mutex_lock(&p->mu);
    while (!p->stop) {
        sd_gpu_reading r;
        pthread_mutex_unlock(&p->mu); /* NVML off the lock: stop need not wait for it */
        int ok = sd_gpu_sensor_read(p->sensor, &r, NULL) == 0;
        pthread_mutex_lock(&p->mu);
        if (ok)
            sd_gpu_summary_add(&p->sum, &r);
        struct timespec t;
        clock_gettime(CLOCK_REALTIME, &t);
        t.tv_nsec += (long)p->period_ms * 1000000L;
        t.tv_sec += t.tv_nsec / 1000000000L;
        t.tv_nsec %= 1000000000L;
        while (!p->stop && pthread_cond_timedwait(&p->cv, &p->mu, &t) != ETIMEDOUT)
            ;
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

int sd_gpu_sampler_start(sd_gpu_sampler **ret, sd_gpu_sensor *s, int period_ms, sd_diag *d)
{
    if (!s || period_ms < 1)
        return sd_diag_set(d, SD_EINVAL, "gpu sampler: %s", s ? "period below 1 ms" : "no sensor");
    sd_gpu_sampler *p = calloc(1, sizeof *p);
    if (!p)
        return sd_diag_set(d, SD_ENOMEM, "gpu sampler: out of memory");
    p->sensor = s;
    p->period_ms = period_ms;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    if (pthread_create(&p->th, NULL, sampler_main, p) != 0) {
        pthread_cond_destroy(&p->cv);
        pthread_mutex_destroy(&p->mu);
        free(p);
        return sd_diag_set(d, SD_ENOMEM, "gpu sampler: cannot start its thread");
    }
    *ret = p;
    return 0;
}

void sd_gpu_sampler_stop(sd_gpu_sampler *p, sd_gpu_summary *out)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    p->stop = 1;
    pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
    pthread_join(p->th, NULL);
    if (out)
        *out = p->sum;
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
    free(p);
}
