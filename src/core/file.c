/* file.c - the one way RLX writes a file (rlx_file_open ... rlx_file_commit,
 * declared in rlx.h).  Every writer (.npy outputs, Graphviz dumps, and any
 * later one: logits, checkpoints, quantized models) goes through it, so that
 * no command replaces a file it was not asked to and no failure leaves a
 * half-written file:
 *   - the data goes to a temporary file beside the target (same folder, so
 *     the rename below stays on one file system), named ".NAME.rlx-XXXXXX";
 *   - commit flushes it, checks every write, and only then moves it into
 *     place: without RLX_FILE_FORCE by link(2) (which fails if the target
 *     exists, so a file created meanwhile is not replaced either), with it by
 *     rename(2) (atomic replacement);
 *   - discard (or any failure) removes the temporary file.
 * A target that exists and is not a regular file (/dev/null, /dev/full, a
 * FIFO) is written in place when forced, since it cannot be renamed over. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"

struct rlx_file {
    FILE *f;
    char *path; /* the target */
    char *tmp;  /* the temporary file, NULL when writing in place */
    int flags;
    int failed; /* errno of the first failed write, or -1 */
};

/* Temporary files not yet committed or discarded, for
 * rlx_file_remove_pending (a signal handler's cleanup). */
#define MAX_PENDING 256
static char *volatile pending[MAX_PENDING];

static void pending_add(char *tmp)
{
    for (int i = 0; i < MAX_PENDING; i++)
        if (__sync_bool_compare_and_swap(&pending[i], NULL, tmp))
            return;
}

static void pending_remove(char *tmp)
{
    for (int i = 0; i < MAX_PENDING; i++)
        if (__sync_bool_compare_and_swap(&pending[i], tmp, NULL))
            return;
}

void rlx_file_remove_pending(void)
{
    for (int i = 0; i < MAX_PENDING; i++) {
        char *t = pending[i];
        if (t)
            unlink(t);
    }
}

static void file_release(rlx_file *w)
{
    if (w->f)
        fclose(w->f);
    if (w->tmp) {
        pending_remove(w->tmp);
        unlink(w->tmp);
    }
    free(w->tmp);
    free(w->path);
    free(w);
}

rlx_status rlx_file_check_target(const char *path, int flags)
{
    if (!path || !*path)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "no file name given");
    struct stat st;
    if (stat(path, &st) == 0) {
        if (S_ISDIR(st.st_mode))
            return rlx_set_error(RLX_ERR_IO, "cannot write '%s': it is a directory", path);
        if (!(flags & RLX_FILE_FORCE))
            return rlx_set_error(RLX_ERR_IO, "'%s' exists; not replaced (pass --force to overwrite)", path);
        return RLX_OK;
    }
    if (errno != ENOENT)
        return rlx_set_error(RLX_ERR_IO, "cannot write '%s': %s", path, strerror(errno));
    /* the folder must exist and be writable */
    const char *slash = strrchr(path, '/');
    char dir[4096];
    if (!slash)
        snprintf(dir, sizeof dir, ".");
    else if (slash == path)
        snprintf(dir, sizeof dir, "/");
    else if ((size_t)(slash - path) < sizeof dir)
        snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
    else
        return rlx_set_error(RLX_ERR_IO, "cannot write '%s': path too long", path);
    if (stat(dir, &st) != 0)
        return rlx_set_error(RLX_ERR_IO, "cannot write '%s': folder '%s' does not exist", path, dir);
    if (!S_ISDIR(st.st_mode))
        return rlx_set_error(RLX_ERR_IO, "cannot write '%s': '%s' is not a folder", path, dir);
    if (access(dir, W_OK | X_OK) != 0)
        return rlx_set_error(RLX_ERR_IO, "cannot write '%s': folder '%s' is not writable: %s", path, dir,
                             strerror(errno));
    return RLX_OK;
}

rlx_status rlx_file_open(const char *path, int flags, rlx_file **out)
{
    if (!out)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "rlx_file_open: out must not be NULL");
    *out = NULL;
    rlx_status st = rlx_file_check_target(path, flags);
    if (st != RLX_OK)
        return st;
    rlx_file *w = rlx_calloc(1, sizeof *w);
    if (!w)
        return RLX_ERR_OUT_OF_MEMORY;
    w->flags = flags;
    w->failed = -1;
    if (!(w->path = rlx_strdup(path))) {
        free(w);
        return RLX_ERR_OUT_OF_MEMORY;
    }
    struct stat sb;
    if (stat(path, &sb) == 0 && !S_ISREG(sb.st_mode)) {
        /* a device or FIFO, forced (checked above): written in place */
        if (!(w->f = fopen(path, "wb"))) {
            st = rlx_set_error(RLX_ERR_IO, "cannot write '%s': %s", path, strerror(errno));
            file_release(w);
            return st;
        }
        *out = w;
        return RLX_OK;
    }
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    size_t dlen = (size_t)(base - path), n = dlen + strlen(base) + 16;
    if (!(w->tmp = rlx_calloc(n, 1))) {
        file_release(w);
        return RLX_ERR_OUT_OF_MEMORY;
    }
    snprintf(w->tmp, n, "%.*s.%s.rlx-XXXXXX", (int)dlen, path, base);
    int fd = mkstemp(w->tmp);
    if (fd >= 0)
        pending_add(w->tmp);
    if (fd < 0) {
        st = rlx_set_error(RLX_ERR_IO, "cannot write '%s': %s", path, strerror(errno));
        free(w->tmp);
        w->tmp = NULL;
        file_release(w);
        return st;
    }
    /* mkstemp makes it 0600; a written file gets the usual mode */
    mode_t mask = umask(0);
    umask(mask);
    fchmod(fd, 0666 & ~mask);
    if (!(w->f = fdopen(fd, "wb"))) {
        st = rlx_set_error(RLX_ERR_OUT_OF_MEMORY, "cannot write '%s': %s", path, strerror(errno));
        close(fd);
        file_release(w);
        return st;
    }
    *out = w;
    return RLX_OK;
}

void *rlx_file_stream(rlx_file *w) { return w ? w->f : NULL; }

rlx_status rlx_file_write(rlx_file *w, const void *data, size_t bytes)
{
    if (!w || (!data && bytes))
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "rlx_file_write: NULL argument");
    if (bytes && fwrite(data, 1, bytes, w->f) != bytes) {
        if (w->failed < 0)
            w->failed = errno;
        return rlx_set_error(RLX_ERR_IO, "cannot write '%s': %s", w->path, strerror(errno));
    }
    return RLX_OK;
}

rlx_status rlx_file_commit(rlx_file *w)
{
    if (!w)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "rlx_file_commit: NULL file");
    rlx_status st = RLX_OK;
    int err = 0;
    if (w->failed >= 0 || ferror(w->f))
        err = w->failed > 0 ? w->failed : EIO;
    if (fflush(w->f) != 0 && !err)
        err = errno;
    if (!err && w->tmp && fsync(fileno(w->f)) != 0 && errno != EINVAL)
        err = errno;
    if (fclose(w->f) != 0 && !err)
        err = errno;
    w->f = NULL;
    if (!err && w->tmp) {
        if (w->flags & RLX_FILE_FORCE) {
            if (rename(w->tmp, w->path) != 0)
                err = errno;
        } else if (link(w->tmp, w->path) != 0) {
            if (errno == EEXIST) {
                st = rlx_set_error(RLX_ERR_IO, "'%s' exists; not replaced (pass --force to overwrite)", w->path);
            } else if (errno == EPERM || errno == EOPNOTSUPP || errno == ENOSYS) {
                /* a file system without hard links: check, then rename */
                if (access(w->path, F_OK) == 0)
                    st = rlx_set_error(RLX_ERR_IO, "'%s' exists; not replaced (pass --force to overwrite)", w->path);
                else if (rename(w->tmp, w->path) != 0)
                    err = errno;
            } else {
                err = errno;
            }
        }
    }
    if (err)
        st = rlx_set_error(RLX_ERR_IO, "cannot write '%s': %s", w->path, strerror(err));
    file_release(w); /* unlinks the temporary name (after link, the target stays) */
    return st;
}

void rlx_file_discard(rlx_file *w)
{
    if (w)
        file_release(w);
}

rlx_status rlx_write_file(const char *path, int flags, const void *data, size_t bytes)
{
    rlx_file *w = NULL;
    rlx_status st = rlx_file_open(path, flags, &w);
    if (st != RLX_OK)
        return st;
    if ((st = rlx_file_write(w, data, bytes)) != RLX_OK) {
        rlx_file_discard(w);
        return st;
    }
    return rlx_file_commit(w);
}
