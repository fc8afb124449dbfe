/* Per-request state and the MHD/libcurl glue shared by mhd_curl_proxy.c and mhd_curl_oneloop.c.
 * Forwarded request headers: Content-Type, X-Algolia-Application-Id, X-Algolia-API-Key (what the
 * Mirrorgate forward path needs); "Expect:" is suppressed. The upstream URL is BASE + the request path
 * (query strings are not forwarded: the benchmark has none). Only the upstream status, body and
 * Content-Type are relayed back. */
#ifndef FLOOR_PROXY_COMMON_H
#define FLOOR_PROXY_COMMON_H
#include <curl/curl.h>
#include <microhttpd.h>
#include <stdint.h>
#include <sys/epoll.h>
#include "common.h"

typedef struct {
  char *p;
  size_t len, cap;
} buf_t;

static int buf_append(buf_t *b, const char *data, size_t n, size_t limit) {
  if (b->len + n > limit) return -1;
  if (b->len + n > b->cap) {
    size_t nc = b->cap ? b->cap * 2 : 1024;
    while (nc < b->len + n) nc *= 2;
    if (nc > limit) nc = limit;
    char *np = realloc(b->p, nc);
    if (!np) return -1;
    b->p = np;
    b->cap = nc;
  }
  memcpy(b->p + b->len, data, n);
  b->len += n;
  return 0;
}

enum { ST_COLLECT = 0, ST_PENDING, ST_DONE };
#define NHDR 4
#define HDR_MAX 384

typedef struct req {
  struct MHD_Connection *conn;
  int state;
  int too_big;
  int is_get;
  buf_t body;          /* request body (owned) */
  buf_t resp;          /* upstream body (owned until handed to MHD) */
  long status;         /* upstream status, 0 = transport failure */
  char ctype[128];     /* upstream Content-Type ("" = none) */
  CURL *easy;
  struct req *next;    /* hand-off queue link */
  struct curl_slist hl[NHDR]; /* request header list built without malloc */
  char hb[NHDR][HDR_MAX];
  char url[1024];
} req_t;

static char g_upstream[256]; /* e.g. http://127.0.0.1:19081 */

static size_t write_cb(char *ptr, size_t size, size_t nmemb, void *ud) {
  req_t *r = ud;
  size_t n = size * nmemb;
  if (buf_append(&r->resp, ptr, n, MAX_RESP_BODY) != 0) return 0; /* aborts the transfer */
  return n;
}

/* New easy handle with every per-connection-invariant option set once. */
static CURL *new_easy(void) {
  CURL *e = curl_easy_init();
  if (!e) die("curl_easy_init");
  curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(e, CURLOPT_PROXY, "");
  curl_easy_setopt(e, CURLOPT_TCP_NODELAY, 1L);
  curl_easy_setopt(e, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
  curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, write_cb);
  curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, 30000L);
  curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, 5000L);
  return e;
}

/* Fill the per-request fields from the MHD connection (called on the MHD thread).
 * Returns 0, or an HTTP status to answer with directly. */
static int req_prepare(req_t *r, struct MHD_Connection *c, const char *url, const char *method) {
  static const char *names[3] = {"Content-Type", "X-Algolia-Application-Id", "X-Algolia-API-Key"};
  int n = 0;
  for (int i = 0; i < 3; i++) {
    const char *v = MHD_lookup_connection_value(c, MHD_HEADER_KIND, names[i]);
    if (!v) continue;
    int w = snprintf(r->hb[n], HDR_MAX, "%s: %s", names[i], v);
    if (w < 0 || w >= HDR_MAX) return MHD_HTTP_REQUEST_HEADER_FIELDS_TOO_LARGE;
    n++;
  }
  strcpy(r->hb[n++], "Expect:");
  for (int i = 0; i < n; i++) {
    r->hl[i].data = r->hb[i];
    r->hl[i].next = i + 1 < n ? &r->hl[i + 1] : NULL;
  }
  int w = snprintf(r->url, sizeof r->url, "%s%s", g_upstream, url);
  if (w < 0 || (size_t)w >= sizeof r->url) return MHD_HTTP_URI_TOO_LONG;
  r->is_get = strcmp(method, "GET") == 0;
  if (!r->is_get && strcmp(method, "POST") != 0) return MHD_HTTP_METHOD_NOT_ALLOWED;
  return 0;
}

static void easy_bind(CURL *e, req_t *r) {
  r->easy = e;
  curl_easy_setopt(e, CURLOPT_URL, r->url);
  curl_easy_setopt(e, CURLOPT_HTTPHEADER, &r->hl[0]);
  curl_easy_setopt(e, CURLOPT_WRITEDATA, r);
  curl_easy_setopt(e, CURLOPT_PRIVATE, r);
  if (r->is_get) {
    curl_easy_setopt(e, CURLOPT_HTTPGET, 1L);
  } else {
    curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE, (long)r->body.len);
    curl_easy_setopt(e, CURLOPT_POSTFIELDS, r->body.p ? r->body.p : "");
  }
}

/* After CURLMSG_DONE: record status and Content-Type (before the handle is reused). */
static void req_finish(req_t *r, CURLcode rc) {
  r->status = 0;
  r->ctype[0] = 0;
  if (rc == CURLE_OK) {
    long code = 0;
    char *ct = NULL;
    curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &code);
    curl_easy_getinfo(r->easy, CURLINFO_CONTENT_TYPE, &ct);
    r->status = code;
    if (ct && strlen(ct) < sizeof r->ctype) strcpy(r->ctype, ct);
  }
  r->easy = NULL;
  r->state = ST_DONE;
}

/* The access handler's first part, shared by both proxies: creates the request state on the first call
 * and collects the body (over MAX_REQ_BODY: remembered as too big, the rest discarded). Returns the state
 * once the body is complete, NULL while the handler should just return MHD_YES (*failed set when it
 * must return MHD_NO). */
static req_t *req_collect(struct MHD_Connection *c, void **con_cls, const char *upload_data,
                          size_t *upload_data_size, int *failed) {
  req_t *r = *con_cls;
  *failed = 0;
  if (r == NULL) {
    r = calloc(1, sizeof *r);
    if (!r) {
      *failed = 1;
      return NULL;
    }
    r->conn = c;
    *con_cls = r;
    return NULL;
  }
  if (*upload_data_size != 0) {
    if (!r->too_big && buf_append(&r->body, upload_data, *upload_data_size, MAX_REQ_BODY) != 0) {
      r->too_big = 1;
      free(r->body.p);
      r->body.p = NULL;
      r->body.len = r->body.cap = 0;
    }
    *upload_data_size = 0;
    return NULL;
  }
  return r;
}

static enum MHD_Result queue_simple(struct MHD_Connection *c, unsigned status) {
  struct MHD_Response *resp = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
  if (!resp) return MHD_NO;
  enum MHD_Result ret = MHD_queue_response(c, status, resp);
  MHD_destroy_response(resp);
  return ret;
}

/* Queue the upstream's answer (called on the MHD side after resume); hands the body buffer to MHD. */
static enum MHD_Result queue_upstream(struct MHD_Connection *c, req_t *r) {
  if (r->status < 100 || r->status > 999) return queue_simple(c, MHD_HTTP_BAD_GATEWAY);
  struct MHD_Response *resp;
  if (r->resp.len > 0) {
    resp = MHD_create_response_from_buffer_with_free_callback(r->resp.len, r->resp.p, free);
    if (resp) { r->resp.p = NULL; r->resp.len = r->resp.cap = 0; }
  } else {
    resp = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
  }
  if (!resp) return MHD_NO;
  if (r->ctype[0] && MHD_add_response_header(resp, "Content-Type", r->ctype) != MHD_YES) {
    MHD_destroy_response(resp);
    return MHD_NO;
  }
  enum MHD_Result ret = MHD_queue_response(c, (unsigned)r->status, resp);
  MHD_destroy_response(resp);
  return ret;
}

static void req_free(req_t *r) {
  if (!r) return;
  free(r->body.p);
  free(r->resp.p);
  free(r);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe) {
  (void)cls; (void)c; (void)toe;
  req_free(*con_cls);
  *con_cls = NULL;
}

static long long now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}
/* libcurl's socket callback body for a loop on its own epoll set: mirrors what curl wants on `s`. */
static int epoll_track(int ep, CURLM *multi, curl_socket_t s, int what, void *socketp) {
  struct epoll_event ev = {0};
  ev.data.fd = s;
  if (what == CURL_POLL_REMOVE) {
    epoll_ctl(ep, EPOLL_CTL_DEL, s, NULL); /* may already be closed: ignore */
    return 0;
  }
  ev.events = (what & CURL_POLL_IN ? EPOLLIN : 0) | (what & CURL_POLL_OUT ? EPOLLOUT : 0);
  if (socketp == NULL) {
    if (epoll_ctl(ep, EPOLL_CTL_ADD, s, &ev) != 0 && errno == EEXIST) epoll_ctl(ep, EPOLL_CTL_MOD, s, &ev);
    curl_multi_assign(multi, s, (void *)1);
  } else if (epoll_ctl(ep, EPOLL_CTL_MOD, s, &ev) != 0 && errno == ENOENT) {
    epoll_ctl(ep, EPOLL_CTL_ADD, s, &ev);
  }
  return 0;
}

/* libcurl's timer callback body: the next deadline in now_ms() time, -1 for none. */
static void timer_track(long long *deadline, long timeout_ms) {
  *deadline = timeout_ms < 0 ? -1 : now_ms() + timeout_ms;
}

#endif
