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
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/types.h>
#include <sys/wait.h>

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
/// Starts `argv` (argv[0] looked up in PATH) with `envp`, standard input from /dev/null and standard
/// output and error on `outfd`, in a process group of its own, with every signal at its default
/// disposition and none blocked (the gateway ignores SIGPIPE/SIGTERM/SIGINT; a child must not inherit
/// that). Returns posix_spawnp's result: 0, or an errno value (not -1).
static inline int mg_spawn(char *const argv[], char *const envp[], int outfd, pid_t *pid) {
    posix_spawn_file_actions_t actions;
    posix_spawnattr_t attr;
    int rc = posix_spawn_file_actions_init(&actions);
    if (rc != 0) return rc;
    rc = posix_spawnattr_init(&attr);
    if (rc != 0) { posix_spawn_file_actions_destroy(&actions); return rc; }
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&actions, outfd, 1);
    posix_spawn_file_actions_adddup2(&actions, outfd, 2);
    sigset_t all, none;
    sigfillset(&all);
    sigemptyset(&none);
    posix_spawnattr_setsigdefault(&attr, &all);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setpgroup(&attr, 0);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETPGROUP);
    rc = posix_spawnp(pid, argv[0], &actions, &attr, argv, envp);
    posix_spawnattr_destroy(&attr);
    posix_spawn_file_actions_destroy(&actions);
    return rc;
}

/// waitpid(pid, WNOHANG): the pid when it exited (its status in `status`: the exit code, or 128 + the
/// signal that ended it), 0 while it runs, -1 on error.
static inline pid_t mg_reap(pid_t pid, int *status) {
    int raw = 0;
    pid_t r = waitpid(pid, &raw, WNOHANG);
    if (r == pid) *status = WIFEXITED(raw) ? WEXITSTATUS(raw) : (WIFSIGNALED(raw) ? 128 + WTERMSIG(raw) : 255);
    return r;
}

/// Blocking waitpid(pid, 0), with the same status convention as mg_reap.
static inline pid_t mg_reap_blocking(pid_t pid, int *status) {
    int raw = 0;
    pid_t r = waitpid(pid, &raw, 0);
    if (r == pid) *status = WIFEXITED(raw) ? WEXITSTATUS(raw) : (WIFSIGNALED(raw) ? 128 + WTERMSIG(raw) : 255);
    return r;
}

/// A pipe whose two ends are close-on-exec (pipe2 needs _GNU_SOURCE, which Swift's Glibc does not set);
/// returns pipe's result.
static inline int mg_pipe_cloexec(int fds[2]) {
    int r = pipe(fds);
    if (r != 0) return r;
    fcntl(fds[0], F_SETFD, FD_CLOEXEC);
    fcntl(fds[1], F_SETFD, FD_CLOEXEC);
    return 0;
}

/// Waits `ms` milliseconds (poll() without descriptors); returns poll's result.
static inline int mg_pause_ms(int ms) { return poll(NULL, 0, ms); }

/// poll() on one descriptor for input; returns poll's result.
static inline int mg_poll_in(int fd, int timeout_ms) {
    struct pollfd p;
    p.fd = fd;
    p.events = POLLIN;
    p.revents = 0;
    return poll(&p, 1, timeout_ms);
}
#endif
