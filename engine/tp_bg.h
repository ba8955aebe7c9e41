/* tp_bg: a call that may never return, run on its own thread and waited for with a bound.
 * The tensor-parallel runtime needs it for ncclCommAbort: since NCCL 2.26 the abort returns
 * only once every CUDA graph that captured work on the communicator has been destroyed, and
 * a rank's decode graphs live until its backend is freed — after the failing step. The step
 * must fail (and its requests get their error) without waiting for that; the teardown, which
 * destroys the graphs, then waits for the abort to finish, again with a bound.
 *
 * Threading: any thread; one start per handle (later starts do nothing). */
#ifndef SD_TP_BG_H
#define SD_TP_BG_H

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sd_tp_bg sd_tp_bg;

int sd_tp_bg_init(sd_tp_bg **ret);
/* Runs fn(arg, iarg) on a new detached thread, the first time only, and waits up to wait_ms for it
 * to return. 1: it has returned; 0: it still runs (the caller carries on; sd_tp_bg_wait
 * later); SD_ENOMEM: no thread could be started and fn was not run (the caller may run it
 * itself). A later call returns as sd_tp_bg_wait(b, wait_ms) would, starting nothing. */
int sd_tp_bg_start(sd_tp_bg *b, void (*fn)(void *arg, int iarg), void *arg, int iarg, int wait_ms);
/* Waits up to wait_ms for the started call: 1 when it has returned or none was started, 0 when
 * it still runs. */
int sd_tp_bg_wait(sd_tp_bg *b, int wait_ms);
/* 1 once a call was started on b. */
int sd_tp_bg_started(sd_tp_bg *b);
/* Drops the owner's hold: freed now, or by the thread when its call returns (a call that
 * never returns keeps it: the process is about to exit). NULL: no-op. */
void sd_tp_bg_free(sd_tp_bg *b);

#ifdef __cplusplus
}
#endif
#endif
