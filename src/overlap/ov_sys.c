/* System calls on protected buffers, and application threads.
 *
 * A system call that reads or writes a protected page does not fault: the kernel returns
 * EFAULT (or a short count), which the application would see as an I/O error. The common
 * calls are interposed: before they run, the requests covering the buffer complete (for a
 * call that only reads the buffer, only receives, whose pages are unreadable). The check is
 * one load when nothing is in flight. fwrite/fread are interposed too: glibc writes large
 * blocks straight from the caller's buffer through its internal write, which no interposer
 * sees. Calls made by MPI itself (ov_in_lib) pass untouched: MPI only hands the kernel our
 * copies or readable send pages.
 *
 * userfaultfd write-protection would need no interposition, but it covers writes only (a
 * receive's pages must refuse reads too), needs a handler thread, and this kernel refuses it
 * to unprivileged processes (vm.unprivileged_userfaultfd = 0); see docs/overlap.md.
 *
 * Threads: an application thread could touch a buffer while the owner is in MPI, and its
 * fault cannot wait on MPI; pthread_create() by the application (not by MPI during a call)
 * completes everything and turns the library into a pass-through, saying so. */
#define _GNU_SOURCE
#include "ov_signal.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#define REAL(ret, name, params) static ret(*real_##name) params
REAL(ssize_t, write, (int, const void *, size_t));
REAL(ssize_t, read, (int, void *, size_t));
REAL(ssize_t, pwrite, (int, const void *, size_t, off_t));
REAL(ssize_t, pread, (int, void *, size_t, off_t));
REAL(ssize_t, send, (int, const void *, size_t, int));
REAL(ssize_t, recv, (int, void *, size_t, int));
REAL(ssize_t, sendto, (int, const void *, size_t, int, const struct sockaddr *, socklen_t));
REAL(ssize_t, recvfrom, (int, void *, size_t, int, struct sockaddr *, socklen_t *));
REAL(ssize_t, writev, (int, const struct iovec *, int));
REAL(ssize_t, readv, (int, const struct iovec *, int));
REAL(size_t, fwrite, (const void *, size_t, size_t, FILE *));
REAL(size_t, fread, (void *, size_t, size_t, FILE *));
REAL(int, pthread_create, (pthread_t *, const pthread_attr_t *, void *(*)(void *), void *));

int ov_app_threads;     /* the application started a thread before MPI_Init */

#define RESOLVE(name) \
    do { if (!real_##name) real_##name = (__typeof__(real_##name))dlsym(RTLD_NEXT, #name); } while (0)

__attribute__((constructor)) static void ov_sys_resolve(void)
{
    RESOLVE(write); RESOLVE(read); RESOLVE(pwrite); RESOLVE(pread); RESOLVE(send);
    RESOLVE(recv); RESOLVE(sendto); RESOLVE(recvfrom); RESOLVE(writev); RESOLVE(readv);
    RESOLVE(fwrite); RESOLVE(fread); RESOLVE(pthread_create);
}

void ov_sys_init(void) { ov_sys_resolve(); }

/* kernel reads [p, p+n): only receives are in the way; kernel writes: everything */
static inline void guard(const void *p, size_t n, int kernel_writes)
{
    /* MPI's own threads' calls pass: only the owner's requests are in the table, and only
     * the owner may wait on them */
    if (__builtin_expect(ov.nactive == 0 || ov_in_lib || !ov_is_owner, 1))
        return;
    uintptr_t a = (uintptr_t)p;
    ov_enter();
    int done = kernel_writes ? ov_complete_range(a, a + n) : ov_complete_range_read(a, a + n);
    ov_leave();
    if (done)
        ov.st.sys_flushes++;
}

static void guard_iov(const struct iovec *iov, int n, int kernel_writes)
{
    if (__builtin_expect(ov.nactive == 0 || ov_in_lib || !ov_is_owner, 1))
        return;
    for (int i = 0; i < n; i++)
        guard(iov[i].iov_base, iov[i].iov_len, kernel_writes);
}

ssize_t write(int fd, const void *b, size_t n) { RESOLVE(write); guard(b, n, 0); return real_write(fd, b, n); }
ssize_t read(int fd, void *b, size_t n) { RESOLVE(read); guard(b, n, 1); return real_read(fd, b, n); }
ssize_t pwrite(int fd, const void *b, size_t n, off_t o) { RESOLVE(pwrite); guard(b, n, 0); return real_pwrite(fd, b, n, o); }
ssize_t pread(int fd, void *b, size_t n, off_t o) { RESOLVE(pread); guard(b, n, 1); return real_pread(fd, b, n, o); }
ssize_t send(int fd, const void *b, size_t n, int f) { RESOLVE(send); guard(b, n, 0); return real_send(fd, b, n, f); }
ssize_t recv(int fd, void *b, size_t n, int f) { RESOLVE(recv); guard(b, n, 1); return real_recv(fd, b, n, f); }
ssize_t sendto(int fd, const void *b, size_t n, int f, const struct sockaddr *a, socklen_t l)
{
    RESOLVE(sendto);
    guard(b, n, 0);
    return real_sendto(fd, b, n, f, a, l);
}
ssize_t recvfrom(int fd, void *b, size_t n, int f, struct sockaddr *a, socklen_t *l)
{
    RESOLVE(recvfrom);
    guard(b, n, 1);
    return real_recvfrom(fd, b, n, f, a, l);
}
ssize_t writev(int fd, const struct iovec *v, int n) { RESOLVE(writev); guard_iov(v, n, 0); return real_writev(fd, v, n); }
ssize_t readv(int fd, const struct iovec *v, int n) { RESOLVE(readv); guard_iov(v, n, 1); return real_readv(fd, v, n); }
size_t fwrite(const void *b, size_t s, size_t n, FILE *f) { RESOLVE(fwrite); guard(b, s * n, 0); return real_fwrite(b, s, n, f); }
size_t fread(void *b, size_t s, size_t n, FILE *f) { RESOLVE(fread); guard(b, s * n, 1); return real_fread(b, s, n, f); }

void ov_disable(const char *why)
{
    if (ov.enabled) {
        ov_enter();
        ov_complete_all();
        ov_leave();
    }
    ov.enabled = 0;
    ov_owner_out = 0;
    fprintf(stderr, "mpioverlap: rank %d: %s; the library is a pass-through from here on\n",
            ov.rank, why);
}

int pthread_create(pthread_t *t, const pthread_attr_t *a, void *(*fn)(void *), void *arg)
{
    RESOLVE(pthread_create);
    if (!ov_in_lib) {
        if (ov.enabled)
            ov_disable("the application started a thread");
        else
            ov_app_threads = 1;
    }
    return real_pthread_create(t, a, fn, arg);
}
