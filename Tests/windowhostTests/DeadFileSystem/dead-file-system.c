// A file system that stops answering, for process tests: preloaded into a host, it makes every
// write, sync, open, rename, mkdir and unlink on a path under $DEAD_FS_ROOT fail with
// $DEAD_FS_ERRNO once the file $DEAD_FS_TRIGGER exists, as a FUSE file system whose daemon
// died answers ENOTCONN to everything. Test support only: the shipped binary knows nothing of it.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

static int under_root(const char *path) {
    const char *root = getenv("DEAD_FS_ROOT");
    if (!root || !path) return 0;
    size_t length = strlen(root);
    return strncmp(path, root, length) == 0 && (path[length] == '/' || path[length] == 0);
}

static int dead(void) {
    const char *trigger = getenv("DEAD_FS_TRIGGER");
    return trigger && syscall(SYS_faccessat, AT_FDCWD, trigger, F_OK, 0) == 0;
}

static int fail(void) {
    const char *number = getenv("DEAD_FS_ERRNO");
    errno = number ? atoi(number) : ENOTCONN;
    return -1;
}

static int fd_is_dead(int fd) {
    if (!dead()) return 0;
    char link[64], target[PATH_MAX + 1];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t length = readlink(link, target, PATH_MAX);
    if (length < 0) return 0;
    target[length] = 0;
    return under_root(target);
}

static int path_is_dead(int directory, const char *path) {
    if (!dead()) return 0;
    if (path[0] == '/') return under_root(path);
    if (directory == AT_FDCWD) {
        char cwd[PATH_MAX];
        return getcwd(cwd, sizeof cwd) && under_root(cwd);
    }
    return fd_is_dead(directory);
}

#define NEXT(name) ((__typeof__(&name))dlsym(RTLD_NEXT, #name))

ssize_t pwrite(int fd, const void *buffer, size_t count, off_t offset) {
    return fd_is_dead(fd) ? fail() : NEXT(pwrite)(fd, buffer, count, offset);
}
ssize_t pwrite64(int fd, const void *buffer, size_t count, off_t offset) {
    return fd_is_dead(fd) ? fail() : NEXT(pwrite64)(fd, buffer, count, offset);
}
ssize_t pwritev2(int fd, const struct iovec *vector, int count, off_t offset, int flags) {
    return fd_is_dead(fd) ? fail() : NEXT(pwritev2)(fd, vector, count, offset, flags);
}
int fdatasync(int fd) { return fd_is_dead(fd) ? fail() : NEXT(fdatasync)(fd); }
int fsync(int fd) { return fd_is_dead(fd) ? fail() : NEXT(fsync)(fd); }
int fallocate(int fd, int mode, off_t offset, off_t length) {
    return fd_is_dead(fd) ? fail() : NEXT(fallocate)(fd, mode, offset, length);
}

int openat(int directory, const char *path, int flags, ...) {
    va_list arguments;
    va_start(arguments, flags);
    mode_t mode = (flags & (O_CREAT | O_TMPFILE)) ? va_arg(arguments, mode_t) : 0;
    va_end(arguments);
    return path_is_dead(directory, path) ? fail() : NEXT(openat)(directory, path, flags, mode);
}
int open(const char *path, int flags, ...) {
    va_list arguments;
    va_start(arguments, flags);
    mode_t mode = (flags & (O_CREAT | O_TMPFILE)) ? va_arg(arguments, mode_t) : 0;
    va_end(arguments);
    return path_is_dead(AT_FDCWD, path) ? fail() : NEXT(open)(path, flags, mode);
}
int open64(const char *path, int flags, ...) {
    va_list arguments;
    va_start(arguments, flags);
    mode_t mode = (flags & (O_CREAT | O_TMPFILE)) ? va_arg(arguments, mode_t) : 0;
    va_end(arguments);
    return path_is_dead(AT_FDCWD, path) ? fail() : NEXT(open64)(path, flags, mode);
}
int mkdirat(int directory, const char *path, mode_t mode) {
    return path_is_dead(directory, path) ? fail() : NEXT(mkdirat)(directory, path, mode);
}
int renameat(int from, const char *source, int to, const char *target) {
    return path_is_dead(from, source) ? fail() : NEXT(renameat)(from, source, to, target);
}
int renameat2(int from, const char *source, int to, const char *target, unsigned flags) {
    return path_is_dead(from, source) ? fail() : NEXT(renameat2)(from, source, to, target, flags);
}
int unlinkat(int directory, const char *path, int flags) {
    return path_is_dead(directory, path) ? fail() : NEXT(unlinkat)(directory, path, flags);
}
