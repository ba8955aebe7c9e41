/* test_gpu_sensor: the summary of GPU readings (means, minimum, the share held down by the power
 * limit), the sensor's errors where NVML or the GPU is missing, and on a machine with a GPU real
 * readings of it, once and from the sampling thread. The GPU part skips without one. */
#include "tests/harness.h"

#include <string.h>
#include <time.h>

#include "engine/gpu_sensor.h"
#ifdef SD_HAVE_CUDA
#include "engine/cuda_backend.h"
#endif

static void test_summary(void)
{
    sd_gpu_summary s = {0};
    char buf[160];
    sd_gpu_summary_str(&s, buf, sizeof buf);
    CHECK_MSG(!strcmp(buf, "no readings"), "empty summary: '%s'", buf);
    const sd_gpu_reading r[3] = {
        {1980, 3201, 600.0, 50, 0},
        {1815, 3201, 699.0, 54, SD_GPU_REASON_SW_POWER_CAP},
        {1935, 3201, 690.0, 53, SD_GPU_REASON_HW_POWER_BRAKE | SD_GPU_REASON_SW_THERMAL},
    };
    for (int i = 0; i < 3; i++)
        sd_gpu_summary_add(&s, &r[i]);
    CHECK(s.n == 3);
    CHECK_MSG(s.sm_min == 1815, "sm_min %u", s.sm_min);
    CHECK_MSG(s.temp_max == 54, "temp_max %u", s.temp_max);
    CHECK_MSG(s.n_power == 2 && s.n_therm == 1, "power %d thermal %d", s.n_power, s.n_therm);
    sd_gpu_summary_str(&s, buf, sizeof buf);
    CHECK_MSG(!strcmp(buf, "1910 MHz (min 1815), 663 W (max 699), 54 C, power-capped 67%, thermal 33%"),
              "'%s'", buf);
    /* a short buffer is cut, never overrun */
    char small[12];
    memset(small, 'x', sizeof small);
    sd_gpu_summary_str(&s, small, 8);
    CHECK_MSG(strlen(small) == 7 && small[8] == 'x', "'%.8s'", small);
}

/* A reading of a GPU that is there: physical numbers. */
static void check_reading(const sd_gpu_reading *r)
{
    CHECK_MSG(r->sm_mhz >= 100 && r->sm_mhz <= 5000, "SM clock %u MHz", r->sm_mhz);
    CHECK_MSG(r->mem_mhz >= 100 && r->mem_mhz <= 20000, "memory clock %u MHz", r->mem_mhz);
    CHECK_MSG(r->power_w > 1 && r->power_w < 3000, "power %.1f W", r->power_w);
    CHECK_MSG(r->temp_c >= 1 && r->temp_c <= 120, "temperature %u C", r->temp_c);
}

static void test_errors(void)
{
    sd_gpu_sensor *s = NULL;
    sd_diag d = {0};
    /* no GPU has this bus id: without NVML SD_ENOTSUP, with it SD_ENODEV; a message either way */
    int rc = sd_gpu_sensor_open(&s, "ffff:ff:1f.7", &d);
    CHECK_MSG(rc == SD_ENOTSUP || rc == SD_ENODEV, "rc %d (%s)", rc, sd_diag_str(&d, rc));
    CHECK_MSG(s == NULL, "a sensor on a bad bus id");
    CHECK_MSG(strstr(d.msg, "gpu sensor:") != NULL, "message '%s'", d.msg);
    sd_gpu_sampler *p = NULL;
    CHECK(sd_gpu_sampler_start(&p, NULL, 10, &d) == SD_EINVAL);
    CHECK(p == NULL);
    sd_gpu_sampler_stop(NULL, NULL); /* a no-op */
}

static void test_gpu_readings(void)
{
#ifdef SD_HAVE_CUDA
    if (sd_cuda_device_count() < 1)
        SKIP("no CUDA device");
    char pci[32];
    REQUIRE(sd_cuda_device_pci_id(0, pci, sizeof pci) == 0);
    sd_gpu_sensor *s = NULL;
    sd_diag d = {0};
    int rc = sd_gpu_sensor_open(&s, pci, &d);
    REQUIRE(rc == 0 || (fprintf(stderr, "  %s\n", sd_diag_str(&d, rc)), 0));
    sd_gpu_reading r;
    REQUIRE(sd_gpu_sensor_read(s, &r, &d) == 0);
    check_reading(&r);
    sd_gpu_sampler *p = NULL;
    REQUIRE(sd_gpu_sampler_start(&p, s, 10, &d) == 0);
    struct timespec t = {0, 150 * 1000000L};
    nanosleep(&t, NULL);
    sd_gpu_summary sum = {0};
    sd_gpu_sampler_stop(p, &sum);
    /* 150 ms at a reading every 10 ms: ~15, at least a few even on a loaded machine */
    CHECK_MSG(sum.n >= 3 && sum.n <= 20, "%d readings in 150 ms", sum.n);
    CHECK_MSG(sum.sm_min >= 100 && sum.w_sum / (sum.n ? sum.n : 1) > 1, "min %u MHz, mean %.1f W", sum.sm_min,
              sum.w_sum / (sum.n ? sum.n : 1));
    sd_gpu_sensor_free(s);
#else
    SKIP("built without CUDA (SD_HAVE_CUDA unset)");
#endif
}

int main(void)
{
    RUN(test_summary);
    RUN(test_errors);
    RUN(test_gpu_readings);
    return sd_test_done();
}
