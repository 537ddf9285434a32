/* file_map.c - read-only maps of checkpoint files (weights.h), shared by
 * the GGUF and safetensors readers.  Below them and weights.c, which opens
 * either format. */
#define _POSIX_C_SOURCE 200809L
#include "io/weights.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"

rlx_status rlx_file_map_open(const char *path, const char *what, rlx_file_map *m)
{
    memset(m, 0, sizeof *m);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return rlx_set_error(RLX_ERR_IO, "%s: cannot open '%s': %s", what, path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return rlx_set_error(RLX_ERR_IO, "%s: '%s' is not a regular file", what, path);
    }
    if (sb.st_size == 0) {
        close(fd);
        return rlx_set_error(RLX_ERR_FORMAT, "%s '%s': the file is empty", what, path);
    }
    if ((unsigned long long)sb.st_size > (unsigned long long)SIZE_MAX) {
        close(fd);
        return rlx_set_error(RLX_ERR_IO, "%s: '%s' is too large to map", what, path);
    }
    void *p = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    int err = errno;
    close(fd);
    if (p == MAP_FAILED)
        return rlx_set_error(RLX_ERR_IO, "%s: cannot map '%s': %s", what, path, strerror(err));
    m->data = p;
    m->size = (size_t)sb.st_size;
    m->owned = 1;
    return RLX_OK;
}

void rlx_file_map_release(rlx_file_map *m)
{
    if (m && m->owned && m->data)
        munmap((void *)m->data, m->size);
    if (m)
        memset(m, 0, sizeof *m);
}
