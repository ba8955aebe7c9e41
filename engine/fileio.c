/* fileio: crash-safe small-file writes (engine/fileio.h). */
#include "engine/fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* The directory entry of a renamed file reaches the disk only with the directory's fsync. */
static void fsync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return;
    fsync(fd);
    close(fd);
}

static int write_fd(int fd, const char *text, size_t n)
{
    size_t off = 0;
    while (off < n) {
        ssize_t w = write(fd, text + off, n - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        off += (size_t)w;
    }
    return 0;
}

int sd_write_atomic(const char *path, const char *text, sd_diag *d)
{
    char dir[PATH_MAX], tmp[PATH_MAX];
    const char *slash = strrchr(path, '/'), *name = slash ? slash + 1 : path;
    if (!*name || strlen(path) + 32 >= sizeof tmp)
        return sd_diag_set(d, SD_EINVAL, "writing %s: not a file path", path);
    if (!slash)
        snprintf(dir, sizeof dir, ".");
    else if (slash == path)
        snprintf(dir, sizeof dir, "/");
    else
        snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
    /* the directory part of path as written (with its slash), then .NAME.tmp.PID */
    snprintf(tmp, sizeof tmp, "%.*s.%s.tmp.%ld", (int)(name - path), path, name, (long)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return sd_diag_set(d, SD_EIO, "writing %s: %s: %s", path, tmp, strerror(errno));
    int bad = write_fd(fd, text, strlen(text)) != 0 || fsync(fd) != 0;
    int e = errno;
    if (close(fd) != 0 && !bad)
        bad = 1, e = errno;
    if (!bad && rename(tmp, path) != 0)
        bad = 1, e = errno;
    if (bad) {
        unlink(tmp);
        return sd_diag_set(d, SD_EIO, "writing %s: %s", path, strerror(e ? e : EIO));
    }
    fsync_dir(dir);
    return 0;
}
