/* Shared bits of the floor programs (bench/forward/floor). */
#ifndef FLOOR_COMMON_H
#define FLOOR_COMMON_H
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_REQ_BODY (1024 * 1024)       /* request bodies above this get 413 */
#define MAX_RESP_BODY (16 * 1024 * 1024) /* upstream bodies above this get 502 */

static volatile sig_atomic_t g_stop = 0;
static void on_signal(int s) { (void)s; g_stop = 1; }

static void install_signals(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  signal(SIGPIPE, SIG_IGN);
}

static void wait_for_signal(void) {
  while (!g_stop) pause();
}

static struct sockaddr_in loopback_addr(int port) {
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_port = htons((uint16_t)port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return a;
}

static void die(const char *what) {
  fprintf(stderr, "fatal: %s (errno %d: %s)\n", what, errno, strerror(errno));
  exit(1);
}
#endif
