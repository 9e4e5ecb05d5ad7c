// What only tests call of the kernel, kept out of the shipped shim (CLinuxShims): seccomp
// filters that refuse a service as a sandbox would, a plain memfd, and pidfd_getfd. Errors
// come back as -1 with errno set.
#ifndef WINDOWHOST_CTESTSHIMS_H
#define WINDOWHOST_CTESTSHIMS_H

/// `pidfd_getfd(pidfd, fd, 0)`: a copy of another process's descriptor `fd` (needs ptrace
/// rights over it), or -1 with errno.
int wh_pidfd_getfd(int pidfd, int fd);
/// `memfd_create(name, MFD_CLOEXEC)` (not sealable, unlike a slot's): a descriptor, or -1
/// with errno.
int wh_memfd_create(const char *name);

/// Makes io_uring_setup fail with `errno_value` for the calling thread (and threads it creates
/// later) through a seccomp filter, as a sandbox that refuses io_uring does. Sets the thread's
/// no_new_privs flag, which a seccomp filter requires. For tests of the blocking fallback: run
/// it on a thread of your own. 0, or -1 with errno.
int wh_deny_io_uring_in_this_thread(int errno_value);
/// Makes io_uring_register(IORING_REGISTER_BUFFERS) fail with `errno_value` for the calling
/// thread, its other operations (the opcode probe) allowed: as the kernel refuses buffers past
/// RLIMIT_MEMLOCK (ENOMEM). For tests of the copying fallback, on a thread of your own. 0, or
/// -1 with errno.
int wh_deny_io_uring_buffer_registration_in_this_thread(int errno_value);
/// Makes `add_key` and `keyctl` fail with `errno_value` for the calling thread (and threads it
/// creates later) through a seccomp filter, as a sandbox that refuses the keyring does. Sets the
/// thread's no_new_privs flag. For tests of the keyless fallback: run it on a thread of your
/// own. 0, or -1 with errno.
int wh_deny_keyring_in_this_thread(int errno_value);

#endif
