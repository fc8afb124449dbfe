/* mhd_curl_oneloop: the best design libmicrohttpd + libcurl allow, regardless of the mandated shape.
 * N event-loop threads; each owns one MHD daemon in external mode (MHD_USE_EPOLL, no internal thread,
 * SO_REUSEPORT on the same port) and one curl multi handle driven by curl_multi_socket_action, all on
 * one outer epoll that also holds MHD's epoll fd. The access handler starts the curl transfer on the
 * same thread and suspends; completion resumes on the same thread. No cross-thread hand-off.
 * usage: mhd_curl_oneloop PORT UPSTREAM_BASE [LOOPS=2] [TURBO=1] [ITC=0]
 *   ITC=0 starts MHD with the suspend/resume bit but without MHD_USE_ITC: resume happens on the loop
 *   thread, which calls MHD_run right after, so no inter-thread wake-up is needed. ITC=1 adds it. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sys/epoll.h>
#include <time.h>
#include "proxy_common.h"

#define SUSPEND_BIT 8192 /* MHD_ALLOW_SUSPEND_RESUME without MHD_USE_ITC */

typedef struct loop {
  pthread_t th;
  struct MHD_Daemon *d;
  CURLM *multi;
  int ep, mhd_fd;
  long long deadline;
  CURL **pool;
  size_t npool, cappool;
} loop_t;

static int g_port, g_turbo = 1, g_itc = 0;

static CURL *get_easy(loop_t *l) { return l->npool ? l->pool[--l->npool] : new_easy(); }

static void put_easy(loop_t *l, CURL *e) {
  if (l->npool == l->cappool) {
    size_t nc = l->cappool ? l->cappool * 2 : 64;
    CURL **np = realloc(l->pool, nc * sizeof *np);
    if (!np) { curl_easy_cleanup(e); return; }
    l->pool = np;
    l->cappool = nc;
  }
  l->pool[l->npool++] = e;
}

static enum MHD_Result handler(void *cls, struct MHD_Connection *c, const char *url,
                               const char *method, const char *version, const char *upload_data,
                               size_t *upload_data_size, void **con_cls) {
  (void)version;
  loop_t *l = cls;
  int failed;
  req_t *r = req_collect(c, con_cls, upload_data, upload_data_size, &failed);
  if (r == NULL) return failed ? MHD_NO : MHD_YES;
  if (r->state == ST_DONE) return queue_upstream(c, r);
  if (r->state != ST_COLLECT) return MHD_NO;
  if (r->too_big) return queue_simple(c, MHD_HTTP_CONTENT_TOO_LARGE);
  int st = req_prepare(r, c, url, method);
  if (st) return queue_simple(c, (unsigned)st);
  CURL *e = get_easy(l);
  easy_bind(e, r);
  CURLMcode mc = curl_multi_add_handle(l->multi, e);
  if (mc != CURLM_OK) {
    fprintf(stderr, "curl_multi_add_handle: %s\n", curl_multi_strerror(mc));
    r->easy = NULL;
    put_easy(l, e);
    return queue_simple(c, MHD_HTTP_BAD_GATEWAY);
  }
  r->state = ST_PENDING;
  MHD_suspend_connection(c);
  return MHD_YES;
}

static int sock_cb(CURL *e, curl_socket_t s, int what, void *userp, void *socketp) {
  (void)e;
  loop_t *l = userp;
  return epoll_track(l->ep, l->multi, s, what, socketp);
}

static int timer_cb(CURLM *m, long timeout_ms, void *userp) {
  (void)m;
  loop_t *l = userp;
  timer_track(&l->deadline, timeout_ms);
  return 0;
}

static int collect_done(loop_t *l) {
  CURLMsg *m;
  int left, n = 0;
  while ((m = curl_multi_info_read(l->multi, &left))) {
    if (m->msg != CURLMSG_DONE) continue;
    CURL *e = m->easy_handle;
    CURLcode rc = m->data.result;
    req_t *r = NULL;
    curl_easy_getinfo(e, CURLINFO_PRIVATE, (char **)&r);
    req_finish(r, rc);
    curl_multi_remove_handle(l->multi, e);
    put_easy(l, e);
    MHD_resume_connection(r->conn);
    n++;
  }
  return n;
}

static void run_curl_timer_if_due(loop_t *l) {
  int running;
  long long d = l->deadline;
  if (d >= 0 && now_ms() >= d) {
    /* Our clock has ms resolution, curl's µs: firing at the ms boundary can be early, and curl only calls
     * the timer callback when its nearest expiry *changes*. So never clear the deadline here; if curl did
     * not move it, look again in 1 ms (clearing it lost timers and stalled transfers ~200 ms). */
    curl_multi_socket_action(l->multi, CURL_SOCKET_TIMEOUT, 0, &running);
    if (l->deadline == d) l->deadline = now_ms() + 1;
  }
}

static void *loop_main(void *arg) {
  loop_t *l = arg;
  struct sockaddr_in addr = loopback_addr(g_port);
  unsigned flags = MHD_USE_EPOLL | (g_itc ? MHD_ALLOW_SUSPEND_RESUME : SUSPEND_BIT) | (g_turbo ? MHD_USE_TURBO : 0);
  l->d = MHD_start_daemon(flags, (uint16_t)g_port, NULL, NULL, handler, l,
                          MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr,
                          MHD_OPTION_LISTENING_ADDRESS_REUSE, 1u,
                          MHD_OPTION_CONNECTION_LIMIT, 4096u,
                          MHD_OPTION_CONNECTION_TIMEOUT, 75u,
                          MHD_OPTION_NOTIFY_COMPLETED, on_completed, NULL,
                          MHD_OPTION_END);
  if (!l->d) die("MHD_start_daemon");
  const union MHD_DaemonInfo *info = MHD_get_daemon_info(l->d, MHD_DAEMON_INFO_EPOLL_FD);
  if (!info) die("MHD_DAEMON_INFO_EPOLL_FD");
  l->mhd_fd = info->epoll_fd;
  l->ep = epoll_create1(EPOLL_CLOEXEC);
  if (l->ep < 0) die("epoll_create1");
  struct epoll_event ev = {.events = EPOLLIN, .data.fd = l->mhd_fd};
  if (epoll_ctl(l->ep, EPOLL_CTL_ADD, l->mhd_fd, &ev) != 0) die("epoll_ctl mhd");
  l->deadline = -1;
  l->multi = curl_multi_init();
  if (!l->multi) die("curl_multi_init");
  curl_multi_setopt(l->multi, CURLMOPT_MAXCONNECTS, 256L);
  curl_multi_setopt(l->multi, CURLMOPT_SOCKETFUNCTION, sock_cb);
  curl_multi_setopt(l->multi, CURLMOPT_SOCKETDATA, l);
  curl_multi_setopt(l->multi, CURLMOPT_TIMERFUNCTION, timer_cb);
  curl_multi_setopt(l->multi, CURLMOPT_TIMERDATA, l);

  struct epoll_event evs[128];
  int running;
  while (!g_stop) {
    int timeout = 200;
    MHD_UNSIGNED_LONG_LONG mt = 0;
    long long mhd_deadline = -1; /* MHD may have work its epoll fd does not signal (edge-triggered ready list) */
    if (MHD_get_timeout(l->d, &mt) == MHD_YES) {
      if (mt < (MHD_UNSIGNED_LONG_LONG)timeout) timeout = (int)mt;
      mhd_deadline = now_ms() + (long long)(mt < 1000000 ? mt : 1000000);
    }
    if (l->deadline >= 0) {
      long long dd = l->deadline - now_ms();
      if (dd < timeout) timeout = dd < 0 ? 0 : (int)dd;
    }
    int n = epoll_wait(l->ep, evs, 128, timeout);
    if (n < 0 && errno != EINTR) die("epoll_wait");
    int run_mhd = mhd_deadline >= 0 && (mt == 0 || now_ms() >= mhd_deadline);
    for (int i = 0; i < n; i++) {
      int fd = evs[i].data.fd;
      if (fd == l->mhd_fd) { run_mhd = 1; continue; }
      int f = (evs[i].events & EPOLLIN ? CURL_CSELECT_IN : 0) |
              (evs[i].events & EPOLLOUT ? CURL_CSELECT_OUT : 0) |
              (evs[i].events & (EPOLLERR | EPOLLHUP) ? CURL_CSELECT_ERR : 0);
      curl_multi_socket_action(l->multi, fd, f, &running);
    }
    run_curl_timer_if_due(l);
    if (collect_done(l) > 0) run_mhd = 1;
    if (run_mhd) {
      if (MHD_run(l->d) != MHD_YES) fprintf(stderr, "MHD_run failed\n");
      run_curl_timer_if_due(l); /* start transfers the handler just added, without another epoll_wait */
    }
  }
  return NULL;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s PORT UPSTREAM_BASE [LOOPS=2] [TURBO=1] [ITC=0]\n", argv[0]);
    return 2;
  }
  g_port = atoi(argv[1]);
  snprintf(g_upstream, sizeof g_upstream, "%s", argv[2]);
  int nloops = argc > 3 ? atoi(argv[3]) : 2;
  if (nloops < 1 || nloops > 64) nloops = 2;
  g_turbo = argc > 4 ? atoi(argv[4]) : 1;
  g_itc = argc > 5 ? atoi(argv[5]) : 0;
  install_signals();
  /* the loop threads must not take SIGTERM/SIGINT (main waits for them) */
  sigset_t set, old;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, &old);
  if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) die("curl_global_init");
  loop_t *loops = calloc((size_t)nloops, sizeof *loops);
  if (!loops) die("calloc");
  for (int i = 0; i < nloops; i++)
    if (pthread_create(&loops[i].th, NULL, loop_main, &loops[i]) != 0) die("pthread_create");
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  fprintf(stderr, "mhd_curl_oneloop on 127.0.0.1:%d -> %s loops=%d turbo=%d itc=%d\n", g_port, g_upstream,
          nloops, g_turbo, g_itc);
  wait_for_signal();
  for (int i = 0; i < nloops; i++) pthread_join(loops[i].th, NULL);
  /* g_stop ends the loops between iterations; in-flight transfers (none after a bounded wrk run) are
   * abandoned with their suspended connections, which MHD_stop_daemon reports. */
  for (int i = 0; i < nloops; i++) {
    loop_t *l = &loops[i];
    MHD_stop_daemon(l->d);
    for (size_t k = 0; k < l->npool; k++) curl_easy_cleanup(l->pool[k]);
    free(l->pool);
    curl_multi_cleanup(l->multi);
    close(l->ep);
  }
  free(loops);
  curl_global_cleanup();
  return 0;
}
