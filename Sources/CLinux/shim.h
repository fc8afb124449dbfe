#ifndef MG_LINUX_SHIM_H
#define MG_LINUX_SHIM_H
/* Linux calls whose C types Swift cannot use directly (struct epoll_event is packed on x86_64), each a
   thin wrapper that returns the call's own result: errors are checked in Swift, at one choke point
   (SystemCalls' `syscall(_:)`), never here. */
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <arpa/inet.h>

/// epoll_ctl for `fd` with `events` (EPOLLIN/EPOLLOUT/…), the fd itself as the event's data.
static inline int mg_epoll_ctl(int epfd, int op, int fd, uint32_t events) {
    struct epoll_event ev;
    memset(&ev, 0, sizeof ev);
    ev.events = events;
    ev.data.fd = fd;
    return epoll_ctl(epfd, op, fd, &ev);
}

/// epoll_wait into two plain arrays: the ready fds and their event bits; returns epoll_wait's result.
static inline int mg_epoll_wait(int epfd, int *fds, uint32_t *events, int max, int timeout_ms) {
    struct epoll_event evs[128];
    if (max > 128) max = 128;
    int n = epoll_wait(epfd, evs, max, timeout_ms);
    for (int i = 0; i < n; i++) {
        fds[i] = evs[i].data.fd;
        events[i] = evs[i].events;
    }
    return n;
}

static inline uint32_t mg_epollin(void) { return EPOLLIN; }
static inline uint32_t mg_epollout(void) { return EPOLLOUT; }
static inline uint32_t mg_epollerr(void) { return EPOLLERR; }
static inline uint32_t mg_epollhup(void) { return EPOLLHUP | EPOLLRDHUP; }

/// Adds one to an eventfd counter; returns write's result.
static inline ssize_t mg_eventfd_signal(int fd) { uint64_t one = 1; return write(fd, &one, sizeof one); }
/// Reads (and so resets) an eventfd counter; returns read's result.
static inline ssize_t mg_eventfd_drain(int fd) { uint64_t v; return read(fd, &v, sizeof v); }

/// Builds an IPv4 or IPv6 socket address from a numeric host; returns 1 on success, 0 when `host` is
/// not a numeric address (inet_pton's own convention).
static inline int mg_make_sockaddr(const char *host, uint16_t port, struct sockaddr_storage *out) {
    memset(out, 0, sizeof(*out));
    struct sockaddr_in *v4 = (struct sockaddr_in *)out;
    if (inet_pton(AF_INET, host, &v4->sin_addr) == 1) {
        v4->sin_family = AF_INET;
        v4->sin_port = htons(port);
        return 1;
    }
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)out;
    if (inet_pton(AF_INET6, host, &v6->sin6_addr) == 1) {
        v6->sin6_family = AF_INET6;
        v6->sin6_port = htons(port);
        return 1;
    }
    return 0;
}
#endif
