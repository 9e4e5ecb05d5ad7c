// pwritev2 and RWF_DSYNC are GNU extensions of the C library.
#define _GNU_SOURCE
#include "CLinuxShims.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <linux/keyctl.h>
#include <linux/openat2.h>
#include <stddef.h>
#include <stdio.h>
#include <liburing.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <malloc.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

struct wh_ring {
    struct io_uring ring;
};

// The setup flags each feature asks for. TASKRUN_FLAG comes with COOP_TASKRUN: it marks the
// ring when task work waits, so a peek enters the kernel to run it instead of missing it.
static unsigned setup_flags(unsigned features) {
    unsigned flags = 0;
    if (features & WH_RING_COOPERATIVE) flags |= IORING_SETUP_COOP_TASKRUN | IORING_SETUP_TASKRUN_FLAG;
    if (features & WH_RING_SINGLE_ISSUER) flags |= IORING_SETUP_SINGLE_ISSUER;
    return flags;
}

int wh_ring_create(unsigned entries, unsigned features, wh_ring **out, unsigned *granted) {
    wh_ring *ring = calloc(1, sizeof(*ring));
    if (ring == NULL) return -ENOMEM;
    // A kernel that does not know a flag says EINVAL: drop the newest (SINGLE_ISSUER, 6.0)
    // first, then COOP_TASKRUN (5.19), then set up plain.
    unsigned wanted = features & (WH_RING_COOPERATIVE | WH_RING_SINGLE_ISSUER);
    int result = io_uring_queue_init(entries, &ring->ring, setup_flags(wanted));
    if (result == -EINVAL && (wanted & WH_RING_SINGLE_ISSUER)) {
        wanted &= ~(unsigned)WH_RING_SINGLE_ISSUER;
        result = io_uring_queue_init(entries, &ring->ring, setup_flags(wanted));
    }
    if (result == -EINVAL && (wanted & WH_RING_COOPERATIVE)) {
        wanted = 0;
        result = io_uring_queue_init(entries, &ring->ring, 0);
    }
    if (result < 0) {
        free(ring);
        return result;
    }
    *out = ring;
    *granted = wanted;
    return 0;
}

int wh_ring_register_buffers(wh_ring *ring, void *base, size_t buffer_bytes, unsigned count) {
    if (count == 0) return -EINVAL;
    struct iovec *vectors = calloc(count, sizeof(*vectors));
    if (vectors == NULL) return -ENOMEM;
    for (unsigned i = 0; i < count; i++) {
        vectors[i].iov_base = (char *)base + (size_t)i * buffer_bytes;
        vectors[i].iov_len = buffer_bytes;
    }
    int result = io_uring_register_buffers(&ring->ring, vectors, count);
    free(vectors);
    return result;
}

void wh_ring_destroy(wh_ring *ring) {
    io_uring_queue_exit(&ring->ring);
    free(ring);
}

int wh_ring_supports(wh_ring *ring, wh_ring_op op) {
    struct io_uring_probe *probe = io_uring_get_probe_ring(&ring->ring);
    if (probe == NULL) return -ENOMEM;
    int opcode = op == WH_OP_WRITE ? IORING_OP_WRITE : op == WH_OP_WRITE_FIXED ? IORING_OP_WRITE_FIXED : IORING_OP_FSYNC;
    int supported = io_uring_opcode_supported(probe, opcode);
    io_uring_free_probe(probe);
    return supported ? 1 : 0;
}

int wh_ring_prep_write(wh_ring *ring, int fd, const void *buf, unsigned nbytes, uint64_t offset,
                       uint64_t user_data, int dsync, int buffer_index) {
    struct io_uring_sqe *sqe = io_uring_get_sqe(&ring->ring);
    if (sqe == NULL) return -EBUSY;
    if (buffer_index >= 0) {
        io_uring_prep_write_fixed(sqe, fd, buf, nbytes, offset, buffer_index);
    } else {
        io_uring_prep_write(sqe, fd, buf, nbytes, offset);
    }
    // IORING_OP_WRITE(_FIXED) honours per-write RWF_ flags (kernel 5.6+): one flush, no fsync entry.
    if (dsync) sqe->rw_flags = RWF_DSYNC;
    io_uring_sqe_set_data64(sqe, user_data);
    return 0;
}

int wh_ring_prep_fsync(wh_ring *ring, int fd, int datasync, uint64_t user_data) {
    struct io_uring_sqe *sqe = io_uring_get_sqe(&ring->ring);
    if (sqe == NULL) return -EBUSY;
    io_uring_prep_fsync(sqe, fd, datasync ? IORING_FSYNC_DATASYNC : 0);
    io_uring_sqe_set_data64(sqe, user_data);
    return 0;
}

int wh_ring_submit_and_wait(wh_ring *ring, unsigned wait_nr) {
    return io_uring_submit_and_wait(&ring->ring, wait_nr);
}

int wh_ring_pop(wh_ring *ring, uint64_t *user_data, int32_t *result) {
    struct io_uring_cqe *cqe = NULL;
    int status = io_uring_peek_cqe(&ring->ring, &cqe);
    if (status < 0) return status;
    *user_data = io_uring_cqe_get_data64(cqe);
    *result = cqe->res;
    io_uring_cqe_seen(&ring->ring, cqe);
    return 0;
}

ssize_t wh_pwrite_dsync(int fd, const void *buf, size_t count, off_t offset) {
    struct iovec vector = {.iov_base = (void *)buf, .iov_len = count};
    return pwritev2(fd, &vector, 1, offset, RWF_DSYNC);
}

int wh_pidfd_open(pid_t pid) { return (int)syscall(SYS_pidfd_open, pid, 0); }
int wh_pidfd_send_signal(int pidfd, int sig) { return (int)syscall(SYS_pidfd_send_signal, pidfd, sig, NULL, 0); }
int wh_set_parent_death_signal(int sig) { return prctl(PR_SET_PDEATHSIG, (unsigned long)sig, 0, 0, 0); }
int wh_set_child_subreaper(int on) { return prctl(PR_SET_CHILD_SUBREAPER, (unsigned long)(on ? 1 : 0), 0, 0, 0); }

// glibc has no wrappers for add_key(2) and keyctl(2) (libkeyutils does; one library less).
wh_key_serial wh_key_add_staged(const char *description, const void *payload, size_t length) {
    return (wh_key_serial)syscall(SYS_add_key, "user", description, payload, length, KEY_SPEC_THREAD_KEYRING);
}

int wh_key_set_owner_only(wh_key_serial key) {
    // KEY_POS_ALL | KEY_USR_ALL (keyutils.h's names; the uapi header has none).
    return (int)syscall(SYS_keyctl, KEYCTL_SETPERM, key, 0x3f3f0000U);
}

int wh_key_publish(wh_key_serial key) {
    return (int)syscall(SYS_keyctl, KEYCTL_MOVE, key, KEY_SPEC_THREAD_KEYRING, KEY_SPEC_USER_KEYRING,
                        KEYCTL_MOVE_EXCL);
}

wh_key_serial wh_key_search_user(const char *description) {
    return (wh_key_serial)syscall(SYS_keyctl, KEYCTL_SEARCH, KEY_SPEC_USER_KEYRING, "user", description, 0);
}

long wh_key_read(wh_key_serial key, void *buffer, size_t capacity) {
    return syscall(SYS_keyctl, KEYCTL_READ, key, buffer, capacity);
}

int wh_key_update(wh_key_serial key, const void *payload, size_t length) {
    return (int)syscall(SYS_keyctl, KEYCTL_UPDATE, key, payload, length);
}

int wh_key_revoke(wh_key_serial key) { return (int)syscall(SYS_keyctl, KEYCTL_REVOKE, key); }

int wh_key_unlink_from_user(wh_key_serial key) {
    return (int)syscall(SYS_keyctl, KEYCTL_UNLINK, key, KEY_SPEC_USER_KEYRING);
}

int wh_key_unlink_from_thread(wh_key_serial key) {
    return (int)syscall(SYS_keyctl, KEYCTL_UNLINK, key, KEY_SPEC_THREAD_KEYRING);
}

long wh_key_list_user(wh_key_serial *serials, size_t capacity) {
    long bytes = syscall(SYS_keyctl, KEYCTL_READ, KEY_SPEC_USER_KEYRING, serials, capacity * sizeof(wh_key_serial));
    return bytes < 0 ? bytes : bytes / (long)sizeof(wh_key_serial);
}

long wh_key_describe(wh_key_serial key, char *buffer, size_t capacity) {
    return syscall(SYS_keyctl, KEYCTL_DESCRIBE, key, buffer, capacity);
}

int wh_pidfd_reap(int pidfd, int *code, int *signaled) {
    siginfo_t info;
    memset(&info, 0, sizeof info);
    if (waitid((idtype_t)P_PIDFD, (id_t)pidfd, &info, WEXITED | WNOHANG) != 0) return -1;
    if (info.si_pid == 0) return 0;
    *signaled = info.si_code == CLD_KILLED || info.si_code == CLD_DUMPED;
    *code = info.si_status;
    return 1;
}

int wh_spawn(const char *path, char *const argv[], char *const envp[], const int *inherit, int inherit_count,
             int own_process_group, pid_t *pid) {
    posix_spawn_file_actions_t actions;
    posix_spawnattr_t attributes;
    int result = posix_spawn_file_actions_init(&actions);
    if (result != 0) return result;
    result = posix_spawnattr_init(&attributes);
    if (result != 0) {
        posix_spawn_file_actions_destroy(&actions);
        return result;
    }
    // dup2 clears close-on-exec on the copy; a source already at its target keeps the flag, so
    // sources are first moved above every target.
    int lifted[16];
    for (int i = 0; i < 16; i++) lifted[i] = -1;
    if (inherit_count > 16) result = EINVAL;
    for (int i = 0; result == 0 && i < inherit_count; i++) {
        lifted[i] = fcntl(inherit[i], F_DUPFD_CLOEXEC, 3 + inherit_count);
        if (lifted[i] < 0) result = errno;
    }
    for (int i = 0; result == 0 && i < inherit_count; i++) result = posix_spawn_file_actions_adddup2(&actions, lifted[i], 3 + i);
    if (result == 0) result = posix_spawn_file_actions_addclosefrom_np(&actions, 3 + inherit_count);
    sigset_t none, all_defaults;
    sigemptyset(&none);
    sigemptyset(&all_defaults);
    sigaddset(&all_defaults, SIGTERM);
    sigaddset(&all_defaults, SIGINT);
    sigaddset(&all_defaults, SIGPIPE);
    sigaddset(&all_defaults, SIGHUP);
    if (result == 0) result = posix_spawnattr_setsigmask(&attributes, &none);
    if (result == 0) result = posix_spawnattr_setsigdefault(&attributes, &all_defaults);
    short flags = POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | (own_process_group ? POSIX_SPAWN_SETPGROUP : 0);
    if (result == 0 && own_process_group) result = posix_spawnattr_setpgroup(&attributes, 0);
    if (result == 0) result = posix_spawnattr_setflags(&attributes, flags);
    if (result == 0) result = posix_spawn(pid, path, &actions, &attributes, argv, envp);
    for (int i = 0; i < inherit_count && i < 16; i++) {
        if (lifted[i] >= 0) close(lifted[i]);
    }
    posix_spawnattr_destroy(&attributes);
    posix_spawn_file_actions_destroy(&actions);
    return result;
}

int wh_renameat_noreplace(int old_dirfd, const char *old_name, int new_dirfd, const char *new_name) {
    // RENAME_NOREPLACE (linux/fs.h), spelled here: that header clashes with sys/mount.h.
    return (int)syscall(SYS_renameat2, old_dirfd, old_name, new_dirfd, new_name, 1U);
}

int wh_spawn_dying_with_parent(const char *path, char *const argv[], char *const envp[], int stdout_fd, int stderr_fd,
                               pid_t *pid) {
    pid_t parent = getpid();
    pid_t child = fork();
    if (child < 0) return errno;
    if (child == 0) {
        // Only async-signal-safe calls from here to execve: the parent may have other threads.
        if (prctl(PR_SET_PDEATHSIG, (unsigned long)SIGKILL, 0, 0, 0) != 0) _exit(127);
        // The parent may have died before the setting: then nobody is left to kill us.
        if (getppid() != parent) _exit(127);
        if (setpgid(0, 0) != 0) _exit(127);
        if (dup2(stdout_fd, 1) < 0 || dup2(stderr_fd, 2) < 0) _exit(127);
        // A child that kept the parent's descriptors (close_range missing: ENOSYS before Linux
        // 5.9) would hold other processes' pipes open: it exits instead, like every step here.
        if (syscall(SYS_close_range, 3U, ~0U, 0U) != 0) _exit(127);
        struct sigaction defaults;
        memset(&defaults, 0, sizeof defaults);
        defaults.sa_handler = SIG_DFL;
        if (sigaction(SIGTERM, &defaults, NULL) != 0 || sigaction(SIGINT, &defaults, NULL) != 0 ||
            sigaction(SIGPIPE, &defaults, NULL) != 0)
            _exit(127);
        sigset_t none;
        sigemptyset(&none);
        if (sigprocmask(SIG_SETMASK, &none, NULL) != 0) _exit(127);
        execve(path, argv, envp);
        _exit(127);
    }
    *pid = child;
    return 0;
}

int wh_private_mount_namespace(void) {
    if (unshare(CLONE_NEWNS) != 0) return -1;
    return mount("none", "/", NULL, MS_REC | MS_PRIVATE, NULL);
}

static void add_unless_ignored(sigset_t *set, int number) {
    struct sigaction current;
    if (sigaction(number, NULL, &current) == 0 && current.sa_handler == SIG_IGN) return;
    sigaddset(set, number);
}

int wh_termination_signalfd(void) {
    sigset_t set;
    sigemptyset(&set);
    add_unless_ignored(&set, SIGTERM);
    add_unless_ignored(&set, SIGINT);
    add_unless_ignored(&set, SIGHUP);
    sigaddset(&set, SIGPIPE);
    if (pthread_sigmask(SIG_BLOCK, &set, NULL) != 0) return -1;
    sigdelset(&set, SIGPIPE);
    return signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
}

int wh_signalfd_read(int fd) {
    struct signalfd_siginfo info;
    ssize_t got = read(fd, &info, sizeof info);
    if (got != (ssize_t)sizeof info) return -1;
    return (int)info.ssi_signo;
}

int wh_peer_uid(int fd, uid_t *uid) {
    struct ucred credentials;
    socklen_t length = sizeof credentials;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &credentials, &length) != 0) return -1;
    *uid = credentials.uid;
    return 0;
}

int wh_memfd_create_sealable(const char *name) { return memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING); }

int wh_memfd_seal_size(int fd) { return fcntl(fd, F_ADD_SEALS, F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL); }

int wh_eventfd(void) { return eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK); }

int wh_pipe_cloexec(int fds[2]) { return pipe2(fds, O_CLOEXEC); }

int wh_seqpacket_pair(int fds[2]) { return socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fds); }

ssize_t wh_send_with_descriptor(int socket, const void *bytes, size_t count, int fd) {
    struct iovec iov = {.iov_base = (void *)bytes, .iov_len = count};
    union {
        char buffer[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } control;
    memset(&control, 0, sizeof(control));
    struct msghdr message = {.msg_iov = &iov, .msg_iovlen = 1};
    if (fd >= 0) {
        message.msg_control = control.buffer;
        message.msg_controllen = sizeof(control.buffer);
        struct cmsghdr *header = CMSG_FIRSTHDR(&message);
        header->cmsg_level = SOL_SOCKET;
        header->cmsg_type = SCM_RIGHTS;
        header->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(header), &fd, sizeof(int));
    }
    ssize_t sent;
    do {
        sent = sendmsg(socket, &message, MSG_NOSIGNAL);
    } while (sent < 0 && errno == EINTR);
    return sent;
}

ssize_t wh_receive_with_descriptors(int socket, void *bytes, size_t capacity, int *fds, int fd_capacity,
                                    int *fd_count, int *truncated) {
    *fd_count = 0;
    *truncated = 0;
    if (fd_capacity < 0 || fd_capacity > 16) {
        errno = EINVAL;
        return -1;
    }
    struct iovec iov = {.iov_base = bytes, .iov_len = capacity};
    union {
        char buffer[CMSG_SPACE(16 * sizeof(int))];
        struct cmsghdr align;
    } control;
    struct msghdr message = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.buffer,
                             .msg_controllen = CMSG_SPACE((size_t)fd_capacity * sizeof(int))};
    ssize_t received;
    do {
        received = recvmsg(socket, &message, MSG_CMSG_CLOEXEC);
    } while (received < 0 && errno == EINTR);
    if (received < 0) return -1;
    if (message.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) *truncated = 1;
    for (struct cmsghdr *header = CMSG_FIRSTHDR(&message); header; header = CMSG_NXTHDR(&message, header)) {
        if (header->cmsg_level != SOL_SOCKET || header->cmsg_type != SCM_RIGHTS) continue;
        size_t count = (header->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < count; i++) {
            int fd;
            memcpy(&fd, CMSG_DATA(header) + i * sizeof(int), sizeof(int));
            if (*fd_count < fd_capacity) {
                fds[(*fd_count)++] = fd;
            } else {
                close(fd);
                *truncated = 1;
            }
        }
    }
    return received;
}

int64_t wh_filesystem_type(const char *path) {
    struct statfs info;
    if (statfs(path, &info) != 0) return -1;
    return (int64_t)info.f_type;
}

int wh_ring_fd(wh_ring *ring) { return ring->ring.ring_fd; }

int wh_open_flag_path(void) { return O_PATH; }

int wh_open_flag_direct(void) { return O_DIRECT; }

int wh_open_path_resolving_no_symlinks(const char *path) {
    struct open_how how = {
        .flags = O_PATH | O_NOFOLLOW | O_CLOEXEC,
        .resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
    };
    return (int)syscall(SYS_openat2, AT_FDCWD, path, &how, sizeof how);
}

int wh_direct_io_geometry_of(int fd, wh_direct_io_geometry *out) {
    struct statx info;
    memset(&info, 0, sizeof(info));
    if (statx(fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &info) != 0) return -1;
    struct statfs system;
    if (fstatfs(fd, &system) != 0) return -1;
    int reported = (info.stx_mask & STATX_DIOALIGN) != 0;
    out->memory_align = reported ? info.stx_dio_mem_align : 0;
    out->offset_align = reported ? info.stx_dio_offset_align : 0;
    out->fs_type = (int64_t)system.f_type;
    out->dev_major = info.stx_dev_major;
    out->dev_minor = info.stx_dev_minor;
    return 0;
}

#if defined(__x86_64__)
#include <cpuid.h>
#include <nmmintrin.h>

int wh_cpu_has_sse42(void) {
    unsigned int eax, ebx, ecx, edx;
    if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return 0;
    return (ecx & bit_SSE4_2) != 0;
}

// Eight bytes per instruction; the tail a byte at a time. Compiled for SSE4.2 alone, so the
// rest of the shim runs on any x86-64.
__attribute__((target("sse4.2")))
uint32_t wh_crc32c_sse42(uint32_t crc, const void *bytes, size_t count) {
    const unsigned char *p = bytes;
    uint64_t wide = crc;
    while (count >= 8) {
        uint64_t word;
        memcpy(&word, p, 8);
        wide = _mm_crc32_u64(wide, word);
        p += 8;
        count -= 8;
    }
    uint32_t narrow = (uint32_t)wide;
    while (count > 0) {
        narrow = _mm_crc32_u8(narrow, *p++);
        count--;
    }
    return narrow;
}
#else
int wh_cpu_has_sse42(void) { return 0; }

uint32_t wh_crc32c_sse42(uint32_t crc, const void *bytes, size_t count) {
    (void)bytes;
    (void)count;
    return crc;
}
#endif

int wh_stdout_flushed(void) {
    return fflush(stdout) == 0 && !ferror(stdout);
}

int wh_malloc_trim(void) { return malloc_trim(0); }
