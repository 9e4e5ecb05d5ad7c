// memfd_create is a GNU extension of the C library.
#define _GNU_SOURCE
#include "CTestShims.h"

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/io_uring.h>
#include <linux/seccomp.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

int wh_pidfd_getfd(int pidfd, int fd) { return (int)syscall(SYS_pidfd_getfd, pidfd, fd, 0); }

int wh_memfd_create(const char *name) { return memfd_create(name, MFD_CLOEXEC); }

#if defined(__x86_64__)
#define WH_AUDIT_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define WH_AUDIT_ARCH AUDIT_ARCH_AARCH64
#endif

// A seccomp filter on the calling thread that makes syscalls `first` and `second` (the same
// number twice for one) fail with `errno_value` when their second argument, masked with
// `mask`, is `value` (a mask of 0 matches every call); everything else allowed.
static int deny_in_this_thread(int first, int second, uint32_t mask, uint32_t value, int errno_value) {
#ifdef WH_AUDIT_ARCH
    struct sock_filter filter[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, WH_AUDIT_ARCH, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned)first, 1, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned)second, 0, 4),
        // The low 32 bits of the second argument (little-endian: where `args[1]` starts).
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[1])),
        BPF_STMT(BPF_ALU | BPF_AND | BPF_K, mask),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, value & mask, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ((unsigned)errno_value & SECCOMP_RET_DATA)),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog program = {.len = (unsigned short)(sizeof(filter) / sizeof(filter[0])), .filter = filter};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return -1;
    // Without SECCOMP_FILTER_FLAG_TSYNC the filter binds the calling thread only.
    return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program, 0, 0);
#else
    (void)first;
    (void)second;
    (void)mask;
    (void)value;
    (void)errno_value;
    errno = ENOTSUP;
    return -1;
#endif
}

int wh_deny_io_uring_in_this_thread(int errno_value) {
    return deny_in_this_thread(__NR_io_uring_setup, __NR_io_uring_setup, 0, 0, errno_value);
}

int wh_deny_io_uring_buffer_registration_in_this_thread(int errno_value) {
    // io_uring_register(fd, IORING_REGISTER_BUFFERS, ...) only: the opcode probe passes.
    return deny_in_this_thread(__NR_io_uring_register, __NR_io_uring_register, ~0U, IORING_REGISTER_BUFFERS, errno_value);
}

int wh_deny_keyring_in_this_thread(int errno_value) {
    return deny_in_this_thread(__NR_add_key, __NR_keyctl, 0, 0, errno_value);
}
