/* deny_cma PROGRAM [ARGS]: runs PROGRAM under a seccomp filter that fails process_vm_readv
 * and process_vm_writev with EPERM, as a container profile may: make check's way to see
 * amlapi_info (and MPI_Init) on a node that refuses single copy. */
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(__x86_64__)
#define ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define ARCH AUDIT_ARCH_AARCH64
#endif

int main(int argc, char **argv)
{
#ifndef ARCH
    fprintf(stderr, "deny_cma: no seccomp filter for this architecture\n");
    return 77;
#else
    struct sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, ARCH, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),     /* another ABI: not ours to judge */
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_process_vm_readv, 2, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_process_vm_writev, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
    };
    struct sock_fprog prog = { (unsigned short) (sizeof(f) / sizeof(f[0])), f };
    if (argc < 2) {
        fprintf(stderr, "usage: deny_cma PROGRAM [ARGS...]\n");
        return 2;
    }
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) ||
        prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog)) {
        fprintf(stderr, "deny_cma: seccomp: %s\n", strerror(errno));
        return 77;
    }
    execvp(argv[1], argv + 1);
    fprintf(stderr, "deny_cma: %s: %s\n", argv[1], strerror(errno));
    return 127;
#endif
}
