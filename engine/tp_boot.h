/* tp_boot: the TCP bootstrap of a multi-process tensor-parallel group — rank 0 listens,
 * ranks 1..N-1 connect and say who they are (rank, world size, a hash of the model config);
 * once all N-1 have joined, rank 0 sends each the NCCL unique id (128 opaque bytes). A rank
 * whose world size or config hash differs is refused with a message; every wait has a
 * deadline, so a missing rank ends the bootstrap with an error on every side, never a hang.
 *
 * Wire format (little-endian): hello = "SDTP" u32 magic, u32 version, i32 rank, i32 world,
 * u64 config hash (24 bytes); reply = u32 magic, i32 status (0 or an SD_E* code),
 * 128 id bytes, 128 bytes of NUL-terminated message (264 bytes). */
#ifndef SD_TP_BOOT_H
#define SD_TP_BOOT_H

#include <stddef.h>
#include <stdint.h>

#include "diag.h"
#include "model_config.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SD_TP_ID_BYTES 128 /* sizeof(ncclUniqueId) */

typedef struct sd_tp_listener sd_tp_listener;

/* Rank 0: listens on addr ("host:port"; port 0 picks a free one). SD_EINVAL for a malformed
 * address, SD_EIO (with the system message) when it cannot bind. */
int sd_tp_boot_listen(sd_tp_listener **ret, const char *addr, sd_diag *d);
/* The bound port (useful after port 0). */
int sd_tp_boot_port(const sd_tp_listener *l);
/* Rank 0: waits up to timeout_ms for ranks 1..world-1 to join, refusing any whose hello
 * does not match (world, cfg_hash, a rank not yet joined), then sends each the id. On a
 * timeout every rank already waiting is told the group is incomplete, and the error names
 * the missing ranks and the last refusal. */
int sd_tp_boot_serve(sd_tp_listener *l, int world, uint64_t cfg_hash, const uint8_t id[SD_TP_ID_BYTES],
                     int timeout_ms, sd_diag *d);
void sd_tp_boot_close(sd_tp_listener *l);

/* Rank 1..world-1: connects to addr (retrying while rank 0 is not listening yet), sends its
 * hello and waits for the id, all within timeout_ms. SD_EIO on a timeout or a lost
 * connection; the code and message of rank 0 when refused. */
int sd_tp_boot_join(const char *addr, int rank, int world, uint64_t cfg_hash, uint8_t id_out[SD_TP_ID_BYTES],
                    int timeout_ms, sd_diag *d);

/* The same, keeping each connection open afterwards as the group's control channel (the
 * step plans of the multi-process mode): fds_out [world] gets the socket of each rank 1..N-1
 * (fds_out[0] = -1) on success; fd_out the joiner's socket. The caller closes them. */
int sd_tp_boot_serve_keep(sd_tp_listener *l, int world, uint64_t cfg_hash, const uint8_t id[SD_TP_ID_BYTES],
                          int timeout_ms, int *fds_out, sd_diag *d);
int sd_tp_boot_join_keep(const char *addr, int rank, int world, uint64_t cfg_hash,
                         uint8_t id_out[SD_TP_ID_BYTES], int timeout_ms, int *fd_out, sd_diag *d);

/* Exactly n bytes over a kept connection, within timeout_ms (< 0 for recv: no deadline — a
 * follower waits for the next step as long as rank 0 lives; its death closes the socket).
 * SD_EIO naming a closed connection or a timeout. */
int sd_tp_chan_send(int fd, const void *buf, size_t n, int timeout_ms, sd_diag *d);
int sd_tp_chan_recv(int fd, void *buf, size_t n, int timeout_ms, sd_diag *d);
/* 1 when the peer of a kept connection has closed it (a dead process's sockets are closed by
 * the kernel) or the connection failed; 0 while it is up. Does not block and reads nothing.
 * unread_too = 0: a peer that sent a last message and closed (rank 0's quit) reads as closed
 * only once that message has been read; 1: a close counts at once, bytes left unread or not
 * (rank 0 watching a follower, which never closes first: a follower that failed its set-up
 * has sent its status and gone). fd < 0: 0. */
int sd_tp_chan_closed(int fd, int unread_too);

/* A hash of everything the ranks must agree on: the model's shapes and the world size,
 * plus `extra` (e.g. the checkpoint's sparsity) when non-NULL. FNV-1a, stable across builds. */
uint64_t sd_tp_config_hash(const sd_model_config *cfg, int world, const char *extra);

#ifdef __cplusplus
}
#endif
#endif
