#ifndef MG_CURL_SHIM_H
#define MG_CURL_SHIM_H
/* Typed wrappers for libcurl's variadic setopt/getinfo calls. */
#include <curl/curl.h>
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

#endif
