/* mhd_curl_proxy: the leanest C version of the mandated architecture.
 * MHD (internal polling thread(s), epoll, suspend/resume) collects the request, hands it over a
 * mutex-protected queue to a libcurl-multi thread, suspends the connection; the curl thread runs
 * the upstream POST on reused easy handles (keep-alive pool in the multi handle), collects status,
 * Content-Type and body, and resumes the connection, which then queues the response.
 * usage: mhd_curl_proxy PORT UPSTREAM_BASE [POOL=2] [CURL_THREADS=1] [MODE=socket|poll] [TURBO=1]
 *   MODE socket: curl_multi_socket_action on the curl thread's own epoll + eventfd wake-up
 *   MODE poll:   curl_multi_perform + curl_multi_poll, woken by curl_multi_wakeup */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include "proxy_common.h"

typedef struct worker {
  pthread_t th;
  CURLM *multi;
  pthread_mutex_t mu;
  req_t *qhead, *qtail;
  int efd, ep;            /* socket mode */
  long long deadline;     /* socket mode: curl timer, -1 = none */
  CURL **pool;            /* idle easy handles */
  size_t npool, cappool;
  int inflight;
} worker_t;

static worker_t *g_w;
static int g_nw;
static int g_socket_mode = 1;
static atomic_uint g_rr;
static atomic_int g_quit;

static void submit(req_t *r) {
  worker_t *w = &g_w[g_nw == 1 ? 0 : atomic_fetch_add_explicit(&g_rr, 1, memory_order_relaxed) % (unsigned)g_nw];
  pthread_mutex_lock(&w->mu);
  int was_empty = w->qhead == NULL;
  r->next = NULL;
  if (w->qtail) w->qtail->next = r; else w->qhead = r;
  w->qtail = r;
  pthread_mutex_unlock(&w->mu);
  if (!was_empty) return; /* a wake-up is already pending for this batch */
  if (g_socket_mode) {
    uint64_t one = 1;
    if (write(w->efd, &one, sizeof one) < 0 && errno != EAGAIN) perror("eventfd write");
  } else {
    curl_multi_wakeup(w->multi);
  }
}

static enum MHD_Result handler(void *cls, struct MHD_Connection *c, const char *url,
                               const char *method, const char *version, const char *upload_data,
                               size_t *upload_data_size, void **con_cls) {
  (void)cls; (void)version;
  int failed;
  req_t *r = req_collect(c, con_cls, upload_data, upload_data_size, &failed);
  if (r == NULL) return failed ? MHD_NO : MHD_YES;
  if (r->state == ST_DONE) return queue_upstream(c, r);
  if (r->state != ST_COLLECT) return MHD_NO; /* cannot happen: suspended while pending */
  if (r->too_big) return queue_simple(c, MHD_HTTP_CONTENT_TOO_LARGE);
  int st = req_prepare(r, c, url, method);
  if (st) return queue_simple(c, (unsigned)st);
  r->state = ST_PENDING;
  MHD_suspend_connection(c); /* before the hand-off: the curl thread may resume at once */
  submit(r);
  return MHD_YES;
}

/* ---- curl thread ---- */

static CURL *get_easy(worker_t *w) {
  return w->npool ? w->pool[--w->npool] : new_easy();
}

static void put_easy(worker_t *w, CURL *e) {
  if (w->npool == w->cappool) {
    size_t nc = w->cappool ? w->cappool * 2 : 64;
    CURL **np = realloc(w->pool, nc * sizeof *np);
    if (!np) { curl_easy_cleanup(e); return; }
    w->pool = np;
    w->cappool = nc;
  }
  w->pool[w->npool++] = e;
}

static void drain_queue(worker_t *w) {
  pthread_mutex_lock(&w->mu);
  req_t *r = w->qhead;
  w->qhead = w->qtail = NULL;
  pthread_mutex_unlock(&w->mu);
  while (r) {
    req_t *next = r->next;
    CURL *e = get_easy(w);
    easy_bind(e, r);
    CURLMcode mc = curl_multi_add_handle(w->multi, e);
    if (mc != CURLM_OK) {
      fprintf(stderr, "curl_multi_add_handle: %s\n", curl_multi_strerror(mc));
      put_easy(w, e);
      req_finish(r, CURLE_FAILED_INIT);
      MHD_resume_connection(r->conn);
    } else {
      w->inflight++;
    }
    r = next;
  }
}

static void collect_done(worker_t *w) {
  CURLMsg *m;
  int left;
  while ((m = curl_multi_info_read(w->multi, &left))) {
    if (m->msg != CURLMSG_DONE) continue;
    CURL *e = m->easy_handle;
    CURLcode rc = m->data.result;
    req_t *r = NULL;
    curl_easy_getinfo(e, CURLINFO_PRIVATE, (char **)&r);
    req_finish(r, rc);
    curl_multi_remove_handle(w->multi, e);
    put_easy(w, e);
    w->inflight--;
    MHD_resume_connection(r->conn);
  }
}

static int sock_cb(CURL *e, curl_socket_t s, int what, void *userp, void *socketp) {
  (void)e;
  worker_t *w = userp;
  return epoll_track(w->ep, w->multi, s, what, socketp);
}

static int timer_cb(CURLM *m, long timeout_ms, void *userp) {
  (void)m;
  worker_t *w = userp;
  timer_track(&w->deadline, timeout_ms);
  return 0;
}

static void *worker_socket(void *arg) {
  worker_t *w = arg;
  struct epoll_event evs[128];
  int running;
  while (!(atomic_load(&g_quit) && w->inflight == 0 && w->qhead == NULL)) {
    int timeout = 200;
    if (w->deadline >= 0) {
      long long d = w->deadline - now_ms();
      timeout = d < 0 ? 0 : d < 200 ? (int)d : 200;
    }
    int n = epoll_wait(w->ep, evs, 128, timeout);
    if (n < 0 && errno != EINTR) die("epoll_wait");
    for (int i = 0; i < n; i++) {
      int fd = evs[i].data.fd;
      if (fd == w->efd) {
        uint64_t v;
        if (read(w->efd, &v, sizeof v) < 0 && errno != EAGAIN) die("eventfd read");
        drain_queue(w);
      } else {
        int f = (evs[i].events & EPOLLIN ? CURL_CSELECT_IN : 0) |
                (evs[i].events & EPOLLOUT ? CURL_CSELECT_OUT : 0) |
                (evs[i].events & (EPOLLERR | EPOLLHUP) ? CURL_CSELECT_ERR : 0);
        curl_multi_socket_action(w->multi, fd, f, &running);
      }
    }
    if (atomic_load(&g_quit)) drain_queue(w);
    long long d = w->deadline;
    if (d >= 0 && now_ms() >= d) {
      /* ms clock vs curl's µs timers: firing can be early and curl only reports *changed* expiries, so
       * never clear the deadline here; if curl did not move it, look again in 1 ms. */
      curl_multi_socket_action(w->multi, CURL_SOCKET_TIMEOUT, 0, &running);
      if (w->deadline == d) w->deadline = now_ms() + 1;
    }
    collect_done(w);
  }
  return NULL;
}

static void *worker_poll(void *arg) {
  worker_t *w = arg;
  int running;
  while (!(atomic_load(&g_quit) && w->inflight == 0 && w->qhead == NULL)) {
    drain_queue(w);
    CURLMcode mc = curl_multi_perform(w->multi, &running);
    if (mc != CURLM_OK) fprintf(stderr, "curl_multi_perform: %s\n", curl_multi_strerror(mc));
    collect_done(w);
    mc = curl_multi_poll(w->multi, NULL, 0, 200, NULL);
    if (mc != CURLM_OK) fprintf(stderr, "curl_multi_poll: %s\n", curl_multi_strerror(mc));
  }
  return NULL;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s PORT UPSTREAM_BASE [POOL=2] [CURL_THREADS=1] [MODE=socket|poll] [TURBO=1]\n", argv[0]);
    return 2;
  }
  int port = atoi(argv[1]);
  snprintf(g_upstream, sizeof g_upstream, "%s", argv[2]);
  unsigned pool = argc > 3 ? (unsigned)atoi(argv[3]) : 2;
  g_nw = argc > 4 ? atoi(argv[4]) : 1;
  if (g_nw < 1 || g_nw > 16) g_nw = 1;
  g_socket_mode = argc > 5 ? strcmp(argv[5], "poll") != 0 : 1;
  int turbo = argc > 6 ? atoi(argv[6]) : 1;
  install_signals();
  if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) die("curl_global_init");

  g_w = calloc((size_t)g_nw, sizeof *g_w);
  if (!g_w) die("calloc");
  for (int i = 0; i < g_nw; i++) {
    worker_t *w = &g_w[i];
    pthread_mutex_init(&w->mu, NULL);
    w->deadline = -1;
    w->multi = curl_multi_init();
    if (!w->multi) die("curl_multi_init");
    curl_multi_setopt(w->multi, CURLMOPT_MAXCONNECTS, 256L);
    if (g_socket_mode) {
      w->ep = epoll_create1(EPOLL_CLOEXEC);
      w->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
      if (w->ep < 0 || w->efd < 0) die("epoll/eventfd");
      struct epoll_event ev = {.events = EPOLLIN, .data.fd = w->efd};
      if (epoll_ctl(w->ep, EPOLL_CTL_ADD, w->efd, &ev) != 0) die("epoll_ctl eventfd");
      curl_multi_setopt(w->multi, CURLMOPT_SOCKETFUNCTION, sock_cb);
      curl_multi_setopt(w->multi, CURLMOPT_SOCKETDATA, w);
      curl_multi_setopt(w->multi, CURLMOPT_TIMERFUNCTION, timer_cb);
      curl_multi_setopt(w->multi, CURLMOPT_TIMERDATA, w);
    }
    if (pthread_create(&w->th, NULL, g_socket_mode ? worker_socket : worker_poll, w) != 0) die("pthread_create");
  }

  struct sockaddr_in addr = loopback_addr(port);
  unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME |
                   (turbo ? MHD_USE_TURBO : 0);
  struct MHD_Daemon *d = MHD_start_daemon(
      flags, (uint16_t)port, NULL, NULL, handler, NULL,
      MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr,
      MHD_OPTION_THREAD_POOL_SIZE, pool > 1 ? pool : 0u,
      MHD_OPTION_CONNECTION_LIMIT, 4096u,
      MHD_OPTION_CONNECTION_TIMEOUT, 75u,
      MHD_OPTION_NOTIFY_COMPLETED, on_completed, NULL,
      MHD_OPTION_END);
  if (!d) die("MHD_start_daemon");
  fprintf(stderr, "mhd_curl_proxy on 127.0.0.1:%d -> %s pool=%u curl_threads=%d mode=%s turbo=%d\n", port,
          g_upstream, pool, g_nw, g_socket_mode ? "socket" : "poll", turbo);
  wait_for_signal();
  MHD_quiesce_daemon(d);          /* stop accepting */
  atomic_store(&g_quit, 1);       /* curl threads finish in-flight work (and resume those connections) */
  for (int i = 0; i < g_nw; i++) {
    if (g_socket_mode) { uint64_t one = 1; (void)!write(g_w[i].efd, &one, sizeof one); }
    else curl_multi_wakeup(g_w[i].multi);
    pthread_join(g_w[i].th, NULL);
  }
  MHD_stop_daemon(d);
  for (int i = 0; i < g_nw; i++) {
    worker_t *w = &g_w[i];
    for (size_t k = 0; k < w->npool; k++) curl_easy_cleanup(w->pool[k]);
    free(w->pool);
    curl_multi_cleanup(w->multi);
    if (g_socket_mode) { close(w->ep); close(w->efd); }
  }
  free(g_w);
  curl_global_cleanup();
  return 0;
}
