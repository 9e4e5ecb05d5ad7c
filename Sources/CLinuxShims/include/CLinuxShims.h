// What Swift cannot import on its own: liburing's inline helpers and flag macros, and the
// variadic syscall(2)/prctl(2). liburing's types stay behind an opaque handle: its copy of
// <linux/io_uring.h> clashes with the one swift-system's module imports, and Swift has no need
// to see inside a submission entry. Errors come back as negative errno values (liburing's
// convention) or -1 with errno set (libc's), as each comment says.
#ifndef WINDOWHOST_CLINUXSHIMS_H
#define WINDOWHOST_CLINUXSHIMS_H

#include <stdint.h>
#include <sys/types.h>

// MARK: io_uring

typedef struct wh_ring wh_ring;

/// Operations the probe can be asked about.
typedef enum { WH_OP_WRITE = 0, WH_OP_FSYNC = 1, WH_OP_WRITE_FIXED = 2 } wh_ring_op;

/// What a ring may be set up with (a bit each). `WH_RING_COOPERATIVE`: IORING_SETUP_COOP_TASKRUN
/// with IORING_SETUP_TASKRUN_FLAG (a completion does not interrupt the task; its task work runs
/// at the task's next system call, a poll(2) included). `WH_RING_SINGLE_ISSUER`:
/// IORING_SETUP_SINGLE_ISSUER (only the creating thread submits).
typedef enum { WH_RING_COOPERATIVE = 1, WH_RING_SINGLE_ISSUER = 2 } wh_ring_feature;

/// A ring with `entries` submission slots in `*out`, set up with the `features` asked for
/// that the kernel takes: one it refuses (EINVAL, an older kernel) is dropped and the ring set
/// up without it; `*granted` says which it has. 0, or -errno from io_uring_setup.
int wh_ring_create(unsigned entries, unsigned features, wh_ring **out, unsigned *granted);
void wh_ring_destroy(wh_ring *ring);
/// Registers `count` buffers of `buffer_bytes` each, back to back from `base`, as the ring's
/// fixed buffers 0..count-1 (the kernel pins them once, not per write). 0, or -errno (ENOMEM
/// past RLIMIT_MEMLOCK without CAP_IPC_LOCK, EPERM or ENOSYS where a sandbox refuses).
int wh_ring_register_buffers(wh_ring *ring, void *base, size_t buffer_bytes, unsigned count);
/// 1 when the kernel implements `op`, 0 when not, -errno when the probe failed.
int wh_ring_supports(wh_ring *ring, wh_ring_op op);
/// Queues a write; `dsync` adds RWF_DSYNC (the write completes once durable). With
/// `buffer_index` 0 or more, `buf` lies inside that registered buffer (IORING_OP_WRITE_FIXED);
/// -1 for any other memory. 0, or -EBUSY when the submission queue is full.
int wh_ring_prep_write(wh_ring *ring, int fd, const void *buf, unsigned nbytes, uint64_t offset,
                       uint64_t user_data, int dsync, int buffer_index);
/// Queues an fsync (`datasync`: fdatasync). 0, or -EBUSY when the submission queue is full.
int wh_ring_prep_fsync(wh_ring *ring, int fd, int datasync, uint64_t user_data);
/// Submits what is queued and waits for `wait_nr` completions: entries taken, or -errno.
int wh_ring_submit_and_wait(wh_ring *ring, unsigned wait_nr);
/// Takes one ready completion: 0 and its fields, or -EAGAIN when none is ready.
int wh_ring_pop(wh_ring *ring, uint64_t *user_data, int32_t *result);

// MARK: blocking I/O

/// `pwritev2` of one buffer with RWF_DSYNC: the write returns once its data is durable (one
/// flush, like an io_uring write with the same flag). Bytes written, or -1 with errno.
ssize_t wh_pwrite_dsync(int fd, const void *buf, size_t count, off_t offset);

/// What direct I/O needs to know about an open file: `statx`'s `STATX_DIOALIGN` alignments (0
/// when the kernel or file system reports none), the file system's `statfs` type, and the
/// device (for its logical block size in sysfs).
typedef struct {
    uint32_t memory_align;
    uint32_t offset_align;
    int64_t fs_type;
    uint32_t dev_major;
    uint32_t dev_minor;
} wh_direct_io_geometry;
/// Fills `*out` for `fd`: 0, or -1 with errno.
int wh_direct_io_geometry_of(int fd, wh_direct_io_geometry *out);
/// `O_DIRECT`, a GNU flag Glibc's Swift module does not export.
int wh_open_flag_direct(void);

/// `O_PATH`, a GNU flag Glibc's Swift module does not export: a descriptor that names a
/// directory for the *at calls without needing read permission on it.
int wh_open_flag_path(void);
/// An `O_PATH` descriptor of the entry `path` names, resolved by the kernel in one call
/// (`openat2`) that follows no symlink on the way (`RESOLVE_NO_SYMLINKS`: ELOOP) and opens a
/// trailing symlink as itself (`O_NOFOLLOW`); -1 with errno, ENOSYS or EPERM where the kernel
/// or a sandbox has no `openat2` (glibc has no wrapper: through `syscall`).
int wh_open_path_resolving_no_symlinks(const char *path);

// MARK: process control

/// A file descriptor that refers to `pid` (no reuse race), or -1 with errno.
int wh_pidfd_open(pid_t pid);
/// Sends `sig` to the process behind `pidfd`: 0, or -1 with errno.
int wh_pidfd_send_signal(int pidfd, int sig);
/// `prctl(PR_SET_PDEATHSIG, sig)`: 0, or -1 with errno.
int wh_set_parent_death_signal(int sig);
/// `prctl(PR_SET_CHILD_SUBREAPER, on)`: 0, or -1 with errno.
int wh_set_child_subreaper(int on);

/// `waitid(P_PIDFD, pidfd, WEXITED | WNOHANG)`: 1 and the exit code (`*signaled` 0) or the
/// terminating signal (`*signaled` 1) once the process has ended and is reaped, 0 while it
/// runs, -1 with errno.
int wh_pidfd_reap(int pidfd, int *code, int *signaled);
/// Spawns `path` with `argv` and `envp` (NULL-terminated) via posix_spawn (vfork-style, safe in
/// a threaded process), with `inherit[i]` placed at descriptor 3 + i, every other descriptor
/// above 2 closed, and the signal mask and dispositions reset; with `own_process_group`, in a
/// process group of its own, out of reach of the terminal's Ctrl-C to its parent's group.
/// 0 and `*pid`, or an errno value.
int wh_spawn(const char *path, char *const argv[], char *const envp[], const int *inherit, int inherit_count,
             int own_process_group, pid_t *pid);
/// `renameat2` with `RENAME_NOREPLACE`: the rename fails with `EEXIST` rather than replace
/// whatever has the new name (plain `rename` silently replaces an empty directory). 0, or -1
/// with errno set.
int wh_renameat_noreplace(int old_dirfd, const char *old_name, int new_dirfd, const char *new_name);
/// Like `wh_spawn` with `stdout_fd` and `stderr_fd` as the child's descriptors 1 and 2 and no
/// other inherited, and the child killed (SIGKILL, `PR_SET_PDEATHSIG`, set before its exec)
/// when the calling *thread* ends: a child that must not outlive whoever started it, and that
/// only it signals (a process group of its own: the terminal's Ctrl-C reaches the parent,
/// which stops it in order). Uses
/// fork, the child calling only async-signal-safe functions before execve. 0 and `*pid`, or an
/// errno value (the child's exec failing shows as its exit status 127).
int wh_spawn_dying_with_parent(const char *path, char *const argv[], char *const envp[], int stdout_fd, int stderr_fd,
                               pid_t *pid);
/// Moves the calling thread (and every process it spawns from then on) to a new mount
/// namespace whose mounts propagate nowhere (`unshare(CLONE_NEWNS)`, then `/` made recursively
/// private): a mount made in it ends when its last process does, however that process ends.
/// 0, or -1 with errno.
int wh_private_mount_namespace(void);
/// Blocks SIGTERM, SIGINT, SIGHUP and SIGPIPE in the calling thread (call before any other
/// thread starts, so every thread inherits the mask) and returns a signalfd that reads SIGTERM,
/// SIGINT and SIGHUP, each unless the process was started ignoring it (`nohup`, a background
/// job's SIGINT): that one stays ignored. SIGPIPE stays blocked (a peer that hangs up is an
/// error value, not a death). -1 with errno.
int wh_termination_signalfd(void);
/// Reads one signal from a signalfd: its number, or -1 with errno (EAGAIN when none).
int wh_signalfd_read(int fd);
/// The uid of the peer of a connected Unix socket (`SO_PEERCRED`): 0, or -1 with errno.
int wh_peer_uid(int fd, uid_t *uid);
/// `pipe2(fds, O_CLOEXEC)`: 0, or -1 with errno.
int wh_pipe_cloexec(int fds[2]);
/// `socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC)`: a spare worker's hand-over channel,
/// whose messages keep their bounds and whose peer's end is seen (a read of 0): 0, or -1 with errno.
int wh_seqpacket_pair(int fds[2]);
/// Sends `count` bytes and, when `fd` >= 0, that descriptor (`SCM_RIGHTS`) as one message,
/// never raising SIGPIPE: the bytes sent, or -1 with errno.
ssize_t wh_send_with_descriptor(int socket, const void *bytes, size_t count, int fd);
/// Receives one message: up to `capacity` bytes and up to `fd_capacity` descriptors (close-on-exec).
/// `*fd_count`: how many came; `*truncated`: 1 when the message or its descriptors did not fit
/// (what was cut off is gone). The bytes received (0: the peer closed), or -1 with errno.
ssize_t wh_receive_with_descriptors(int socket, void *bytes, size_t capacity, int *fds, int fd_capacity,
                                    int *fd_count, int *truncated);
/// The `f_type` magic of the file system holding `path` (statfs(2)), or -1 with errno.
int64_t wh_filesystem_type(const char *path);
/// `memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING)`: a descriptor, or -1 with errno.
int wh_memfd_create_sealable(const char *name);
/// Seals a sealable memfd's size for good (`F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL`), so
/// no holder of a descriptor can make another's mapping fault: 0, or -1 with errno.
int wh_memfd_seal_size(int fd);
/// `eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)`: a descriptor, or -1 with errno.
int wh_eventfd(void);
/// The descriptor of a ring, which polls readable when a completion is ready.
int wh_ring_fd(wh_ring *ring);

// MARK: kernel keyring

/// The kernel's serial number of a key (`key_serial_t`).
typedef int32_t wh_key_serial;

/// A new `user` key holding `length` bytes of `payload`, described `description`, in the
/// calling thread's keyring (`add_key(2)` into `KEY_SPEC_THREAD_KEYRING`): reachable by this
/// thread alone until `wh_key_publish` moves it. Staging it there lets its permissions be cut
/// before anyone else can see it, and avoids add_key's update of a same-named key in place
/// (which would swap the bytes under a process that already uses them). Serial, or -1 with
/// errno (ENOSYS, EPERM or EACCES where the kernel or a sandbox refuses keys; EDQUOT past the
/// user's key quota).
wh_key_serial wh_key_add_staged(const char *description, const void *payload, size_t length);
/// `keyctl(KEYCTL_SETPERM)`: possessor and owning user may do everything, group and others
/// nothing (0x3f3f0000). 0, or -1 with errno.
int wh_key_set_owner_only(wh_key_serial key);
/// Moves a staged key from the thread keyring to the user keyring (`KEYCTL_MOVE` with
/// `KEYCTL_MOVE_EXCL`, Linux 5.7): -1 and EEXIST when a key of the same type and description
/// is already there (it is left in place), EOPNOTSUPP before 5.7. 0, or -1 with errno.
int wh_key_publish(wh_key_serial key);
/// The `user` key described `description` in the user keyring (`KEYCTL_SEARCH` of
/// `KEY_SPEC_USER_KEYRING`, linking it nowhere): serial, or -1 with errno (ENOKEY when there is
/// none, EKEYREVOKED or EKEYEXPIRED when the only one is dead).
wh_key_serial wh_key_search_user(const char *description);
/// `keyctl(KEYCTL_READ)`: copies up to `capacity` bytes of the key's payload to `buffer`.
/// The payload's whole length (which may exceed `capacity`), or -1 with errno.
long wh_key_read(wh_key_serial key, void *buffer, size_t capacity);
/// `keyctl(KEYCTL_UPDATE)`: replaces the key's payload with `length` bytes of `payload` at
/// once (a reader sees the old bytes or the new, never a mix); its permissions stay. 0, or -1
/// with errno.
int wh_key_update(wh_key_serial key, const void *payload, size_t length);
/// `keyctl(KEYCTL_REVOKE)`: every process's next use of the key fails (EKEYREVOKED) and the
/// kernel frees its payload. 0, or -1 with errno.
int wh_key_revoke(wh_key_serial key);
/// Unlinks the key from the user keyring (`KEYCTL_UNLINK`), so its description is free for a
/// new key at once instead of at the next garbage collection. 0, or -1 with errno.
int wh_key_unlink_from_user(wh_key_serial key);
/// Unlinks the key from the calling thread's keyring (`KEYCTL_UNLINK`). 0, or -1 with errno.
int wh_key_unlink_from_thread(wh_key_serial key);
/// The serials of the keys linked in the user keyring (`KEYCTL_READ` of
/// `KEY_SPEC_USER_KEYRING`), up to `capacity` of them into `serials`. How many it holds (which
/// may exceed `capacity`), or -1 with errno.
long wh_key_list_user(wh_key_serial *serials, size_t capacity);
/// `keyctl(KEYCTL_DESCRIBE)`: `type;uid;gid;perm;description` with its NUL, up to `capacity`
/// bytes into `buffer`. The whole length (which may exceed `capacity`), or -1 with errno.
long wh_key_describe(wh_key_serial key, char *buffer, size_t capacity);

/// Whether this CPU has SSE4.2, whose `crc32` instruction computes CRC-32C.
int wh_cpu_has_sse42(void);
/// CRC-32C of `count` bytes with the SSE4.2 instruction, continuing from the raw register
/// `crc` (no inversion in or out: the caller does that). Only where `wh_cpu_has_sse42()`;
/// elsewhere (or off x86-64) it returns `crc` unchanged.
uint32_t wh_crc32c_sse42(uint32_t crc, const void *bytes, size_t count);

// MARK: standard streams

/// Flushes stdio's standard output: 1 when all that was printed reached the descriptor, 0 when
/// a write failed (a reader gone, a full disk under a redirect). Swift 6 cannot name `stdout`,
/// a mutable C global.
int wh_stdout_flushed(void);

// MARK: memory

/// `malloc_trim(0)`: glibc's free memory handed back to the kernel wherever it lies in the heap
/// (free returns only its top). Whether any was. (<malloc.h> is not in Glibc's module.)
int wh_malloc_trim(void);

#endif
