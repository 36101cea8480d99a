/*
 * TCP keepalive on both ends of UCX's connections.
 *
 * A host that stops answering (its link or its power gone) is seen only by TCP keepalive
 * probes (aml_ucx.c says why). UCX 1.13 turns them on only on the socket that connected
 * (uct_tcp_ep_create_socket_and_connect); the socket its listener accepted has none. Between
 * two hosts every connection is opened from one side, so when the link between them goes, only
 * that side's ranks notice; the others wait forever, and so does the launcher waiting for
 * them (measured: with 4 ranks on 2 hosts, the ranks of the accepting host never ended).
 *
 * So the sockets UCX accepted get the same probes. They are found by their local port, which
 * is the port of one of UCX's listening sockets: those are the TCP listeners that appeared
 * while the UCX worker was created (aml_ucx_ka_mark before it, aml_ucx_ka_listeners after).
 * UCX accepts in its own thread, whenever a peer connects, so a thread of ours looks for new
 * accepted sockets once a second while this rank has peers on other hosts (any peer that
 * connected to us opened such a socket); one look lists /proc/self/fd and asks each socket
 * its local port (tens of microseconds for a hundred descriptors).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE     /* pthread_setname_np */
#endif
#include "aml_impl.h"
#include "aml_ucx_keepalive.h"
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define KA_MAX_PORTS 16     /* UCX listens once per network device */
#define KA_PERIOD_S 1       /* how often accepted sockets are looked for */

struct aml_ucx_ka {
    int secs;                   /* idle time and probe interval; probes: AML_KEEPALIVE_PROBES */
    int nbefore, nports;
    uint16_t before[KA_MAX_PORTS];      /* listeners that were not UCX's */
    uint16_t ports[KA_MAX_PORTS];       /* UCX's listeners */
    bool running, stop;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    unsigned long set;          /* sockets given keepalive so far */
};

/* The local TCP port of fd, or -1 when fd is not an IPv4/IPv6 stream socket. */
static int tcp_port(int fd, bool *listening)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof(ss);
    int type = 0, acc = 0;
    socklen_t tl = sizeof(type), al = sizeof(acc);

    if (getsockname(fd, (struct sockaddr *) &ss, &len) != 0)
        return -1;      /* ENOTSOCK: most descriptors */
    if (ss.ss_family != AF_INET && ss.ss_family != AF_INET6)
        return -1;
    if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tl) != 0 || type != SOCK_STREAM)
        return -1;
    if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &acc, &al) != 0)
        return -1;
    *listening = acc != 0;
    return ss.ss_family == AF_INET ? ntohs(((struct sockaddr_in *) &ss)->sin_port)
        : ntohs(((struct sockaddr_in6 *) &ss)->sin6_port);
}

/* Calls fn(k, fd, port, listening) for every TCP stream socket of this process. */
static void each_socket(struct aml_ucx_ka *k,
                        void (*fn)(struct aml_ucx_ka *, int, int, bool))
{
    DIR *d = opendir("/proc/self/fd");
    struct dirent *e;
    if (!d)
        return;
    while ((e = readdir(d))) {
        char *end;
        long fd = strtol(e->d_name, &end, 10);
        bool listening;
        int port;
        if (*end || end == e->d_name || fd == dirfd(d))
            continue;
        if ((port = tcp_port((int) fd, &listening)) >= 0)
            fn(k, (int) fd, port, listening);
    }
    closedir(d);
}

static bool in(const uint16_t * set, int n, int port)
{
    for (int i = 0; i < n; i++)
        if (set[i] == port)
            return true;
    return false;
}

static void note_before(struct aml_ucx_ka *k, int fd, int port, bool listening)
{
    (void) fd;
    if (listening && k->nbefore < KA_MAX_PORTS && !in(k->before, k->nbefore, port))
        k->before[k->nbefore++] = (uint16_t) port;
}

static void note_ucx(struct aml_ucx_ka *k, int fd, int port, bool listening)
{
    (void) fd;
    if (listening && k->nports < KA_MAX_PORTS && !in(k->before, k->nbefore, port) &&
        !in(k->ports, k->nports, port))
        k->ports[k->nports++] = (uint16_t) port;
}

/* An accepted socket of UCX's without keepalive gets UCX's settings for connected ones. A
 * descriptor closed and reused meanwhile at worst gets keepalive too, which harms nothing. */
static void arm(struct aml_ucx_ka *k, int fd, int port, bool listening)
{
    int on = 0, cnt = AML_KEEPALIVE_PROBES;
    socklen_t ol = sizeof(on);
    if (listening || !in(k->ports, k->nports, port))
        return;
    if (getsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, &ol) != 0 || on)
        return;
    on = 1;
    if (setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &k->secs, sizeof(k->secs)) == 0 &&
        setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &k->secs, sizeof(k->secs)) == 0 &&
        setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt)) == 0 &&
        setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof(on)) == 0)
        __atomic_add_fetch(&k->set, 1, __ATOMIC_RELAXED);
}

struct aml_ucx_ka *aml_ucx_ka_mark(int secs)
{
    struct aml_ucx_ka *k = calloc(1, sizeof(*k));
    if (!k)
        return NULL;
    k->secs = secs;
    each_socket(k, note_before);
    return k;
}

void aml_ucx_ka_listeners(struct aml_ucx_ka *k)
{
    each_socket(k, note_ucx);
}

void aml_ucx_ka_sweep(struct aml_ucx_ka *k)
{
    if (k->nports)
        each_socket(k, arm);
}

unsigned long aml_ucx_ka_count(const struct aml_ucx_ka *k)
{
    return k ? __atomic_load_n(&k->set, __ATOMIC_RELAXED) : 0;
}

static void *ka_main(void *arg)
{
    struct aml_ucx_ka *k = arg;
    pthread_mutex_lock(&k->mu);
    while (!k->stop) {
        struct timespec t;
        pthread_mutex_unlock(&k->mu);
        aml_ucx_ka_sweep(k);
        pthread_mutex_lock(&k->mu);
        clock_gettime(CLOCK_MONOTONIC, &t);
        t.tv_sec += KA_PERIOD_S;
        while (!k->stop && pthread_cond_timedwait(&k->cv, &k->mu, &t) != ETIMEDOUT);
    }
    pthread_mutex_unlock(&k->mu);
    return NULL;
}

/* Starts the thread once (the first peer on another host); it takes no signal of the
 * application's. Without it, only the sockets this rank connected are watched: not fatal. */
void aml_ucx_ka_start(struct aml_ucx_ka *k)
{
    pthread_condattr_t ca;
    sigset_t all, old;
    if (!k || k->running || !k->nports)
        return;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&k->cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&k->mu, NULL);
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    k->running = pthread_create(&k->thread, NULL, ka_main, k) == 0;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (k->running)
        pthread_setname_np(k->thread, "aml-keepalive");
    else {
        pthread_cond_destroy(&k->cv);
        pthread_mutex_destroy(&k->mu);
    }
}

/* Stops the thread (before UCX closes its sockets) and frees k. */
void aml_ucx_ka_free(struct aml_ucx_ka *k)
{
    if (!k)
        return;
    if (k->running) {
        pthread_mutex_lock(&k->mu);
        k->stop = true;
        pthread_cond_signal(&k->cv);
        pthread_mutex_unlock(&k->mu);
        pthread_join(k->thread, NULL);
        pthread_cond_destroy(&k->cv);
        pthread_mutex_destroy(&k->mu);
    }
    free(k);
}
