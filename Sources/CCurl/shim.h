#ifndef MG_CURL_SHIM_H
#define MG_CURL_SHIM_H
/* Typed wrappers for libcurl's variadic setopt/getinfo calls. */
#include <curl/curl.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>
#include <stdint.h>

static inline CURLcode mg_curl_setopt_long(CURL *h, CURLoption o, long v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode mg_curl_setopt_string(CURL *h, CURLoption o, const char *v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode mg_curl_setopt_pointer(CURL *h, CURLoption o, void *v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode mg_curl_setopt_off_t(CURL *h, CURLoption o, curl_off_t v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode mg_curl_setopt_slist(CURL *h, CURLoption o, struct curl_slist *v) { return curl_easy_setopt(h, o, v); }
typedef size_t (*mg_curl_data_callback)(char *ptr, size_t size, size_t nmemb, void *userdata);
static inline CURLcode mg_curl_setopt_data_callback(CURL *h, CURLoption o, mg_curl_data_callback cb) {
    return curl_easy_setopt(h, o, cb);
}
typedef int (*mg_curl_xferinfo_callback)(void *clientp, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal, curl_off_t ulnow);
static inline CURLcode mg_curl_setopt_xferinfo_callback(CURL *h, mg_curl_xferinfo_callback cb) {
    return curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, cb);
}
static inline CURLcode mg_curl_getinfo_long(CURL *h, CURLINFO i, long *v) { return curl_easy_getinfo(h, i, v); }
static inline CURLcode mg_curl_getinfo_double(CURL *h, CURLINFO i, double *v) { return curl_easy_getinfo(h, i, v); }
static inline CURLcode mg_curl_getinfo_off_t(CURL *h, CURLINFO i, curl_off_t *v) { return curl_easy_getinfo(h, i, v); }
static inline CURLcode mg_curl_getinfo_string(CURL *h, CURLINFO i, char **v) { return curl_easy_getinfo(h, i, v); }
static inline CURLcode mg_curl_getinfo_pointer(CURL *h, CURLINFO i, void **v) { return curl_easy_getinfo(h, i, (char **)v); }
/// The easy handle and result of a finished transfer, or 0 when `msg` is not a DONE message.
static inline int mg_curl_msg_done(CURLMsg *msg, CURL **easy, CURLcode *result) {
    if (msg->msg != CURLMSG_DONE) return 0;
    *easy = msg->easy_handle;
    *result = msg->data.result;
    return 1;
}
static inline CURLMcode mg_curl_multi_setopt_long(CURLM *m, CURLMoption o, long v) { return curl_multi_setopt(m, o, v); }
typedef int (*mg_curl_socket_callback)(CURL *easy, curl_socket_t s, int what, void *userp, void *socketp);
typedef int (*mg_curl_timer_callback)(CURLM *multi, long timeout_ms, void *userp);
static inline CURLMcode mg_curl_multi_setopt_pointer(CURLM *m, CURLMoption o, void *v) { return curl_multi_setopt(m, o, v); }
static inline CURLMcode mg_curl_multi_setopt_socket_callback(CURLM *m, mg_curl_socket_callback cb) {
    return curl_multi_setopt(m, CURLMOPT_SOCKETFUNCTION, cb);
}
static inline CURLMcode mg_curl_multi_setopt_timer_callback(CURLM *m, mg_curl_timer_callback cb) {
    return curl_multi_setopt(m, CURLMOPT_TIMERFUNCTION, cb);
}

/* epoll for the transfer loop (struct epoll_event is packed on x86_64: keep it on the C side). */
/// Registers, changes (`op` = EPOLL_CTL_*) or removes `fd` for `what` (CURL_POLL_IN/OUT/INOUT).
static inline int mg_epoll_set(int epfd, int op, int fd, int what) {
    struct epoll_event ev;
    ev.events = 0;
    if (what == CURL_POLL_IN || what == CURL_POLL_INOUT) ev.events |= EPOLLIN;
    if (what == CURL_POLL_OUT || what == CURL_POLL_INOUT) ev.events |= EPOLLOUT;
    ev.data.u64 = 0;
    ev.data.fd = fd;
    return epoll_ctl(epfd, op, fd, &ev);
}
/// Waits for events: fills `fds` and `flags` (CURL_CSELECT_IN/OUT/ERR) and returns their count.
static inline int mg_epoll_wait(int epfd, int *fds, int *flags, int max, int timeout_ms) {
    struct epoll_event evs[128];
    if (max > 128) max = 128;
    int n = epoll_wait(epfd, evs, max, timeout_ms);
    for (int i = 0; i < n; i++) {
        int f = 0;
        if (evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLRDHUP)) f |= CURL_CSELECT_IN;
        if (evs[i].events & EPOLLOUT) f |= CURL_CSELECT_OUT;
        if (evs[i].events & EPOLLERR) f |= CURL_CSELECT_ERR;
        fds[i] = evs[i].data.fd;
        flags[i] = f;
    }
    return n;
}
static inline void mg_eventfd_signal(int fd) { uint64_t one = 1; ssize_t r = write(fd, &one, sizeof one); (void)r; }
static inline void mg_eventfd_drain(int fd) { uint64_t v; ssize_t r = read(fd, &v, sizeof v); (void)r; }
#endif
