/* cancel: reading and setting the cancel flag that prune, calibration and eval runs poll at
 * their safe points while another thread (the admin API's HTTP thread) or a signal handler
 * sets it. */
#ifndef SD_PRUNE_CANCEL_H
#define SD_PRUNE_CANCEL_H

#ifdef __cplusplus
extern "C" {
#endif

/* The flag stays a plain `volatile int` in the run APIs (source-compatible for every caller),
 * but every access is atomic: a volatile read racing a write from another thread is still a
 * data race (ThreadSanitizer reported it between sd_jobs_cancel and the prune worker).
 * Relaxed order is enough: the flag publishes no other data, the run only has to see it
 * eventually. Lock-free, so a signal handler may set it too. */
static inline int sd_cancel_requested(const volatile int *flag)
{
    return flag && __atomic_load_n(flag, __ATOMIC_RELAXED) != 0;
}

static inline void sd_cancel_request(volatile int *flag)
{
    __atomic_store_n(flag, 1, __ATOMIC_RELAXED);
}

#ifdef __cplusplus
}
#endif

#endif
