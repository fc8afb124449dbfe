/* mhd_hello: the floor of libmicrohttpd alone.
 * Answers every request (reading and discarding any body) with a fixed ~500-byte JSON 200.
 * usage: mhd_hello PORT [POOL_SIZE=2] [TURBO=1]
 *   POOL_SIZE 0 or 1: one internal polling thread; >1: MHD_OPTION_THREAD_POOL_SIZE. */
#include <microhttpd.h>
#include "common.h"
#include "payload.h"

static struct MHD_Response *g_resp;
static int g_marker;

static enum MHD_Result handler(void *cls, struct MHD_Connection *c, const char *url,
                               const char *method, const char *version, const char *upload_data,
                               size_t *upload_data_size, void **con_cls) {
  (void)cls; (void)url; (void)method; (void)version; (void)upload_data;
  if (*con_cls == NULL) { /* headers received */
    *con_cls = &g_marker;
    return MHD_YES;
  }
  if (*upload_data_size != 0) { /* discard body */
    *upload_data_size = 0;
    return MHD_YES;
  }
  return MHD_queue_response(c, MHD_HTTP_OK, g_resp);
}

int main(int argc, char **argv) {
  if (argc < 2) { fprintf(stderr, "usage: %s PORT [POOL_SIZE=2] [TURBO=1]\n", argv[0]); return 2; }
  int port = atoi(argv[1]);
  unsigned pool = argc > 2 ? (unsigned)atoi(argv[2]) : 2;
  int turbo = argc > 3 ? atoi(argv[3]) : 1;
  install_signals();
  g_resp = MHD_create_response_from_buffer(strlen(PAYLOAD), (void *)PAYLOAD, MHD_RESPMEM_PERSISTENT);
  if (!g_resp || MHD_add_response_header(g_resp, "Content-Type", "application/json") != MHD_YES)
    die("response");
  struct sockaddr_in addr = loopback_addr(port);
  unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | (turbo ? MHD_USE_TURBO : 0);
  struct MHD_Daemon *d = MHD_start_daemon(
      flags, (uint16_t)port, NULL, NULL, handler, NULL,
      MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr,
      MHD_OPTION_THREAD_POOL_SIZE, pool > 1 ? pool : 0u,
      MHD_OPTION_CONNECTION_LIMIT, 4096u,
      MHD_OPTION_CONNECTION_TIMEOUT, 75u,
      MHD_OPTION_END);
  if (!d) die("MHD_start_daemon");
  fprintf(stderr, "mhd_hello listening on 127.0.0.1:%d pool=%u turbo=%d\n", port, pool, turbo);
  wait_for_signal();
  MHD_stop_daemon(d);
  MHD_destroy_response(g_resp);
  return 0;
}
