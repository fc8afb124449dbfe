#ifndef MG_MICROHTTPD_SHIM_H
#define MG_MICROHTTPD_SHIM_H
/* What Swift cannot call in libmicrohttpd: the variadic MHD_start_daemon and cast macros. */
#include <stdint.h>
#include <stddef.h>
#include <string.h>
#include <sys/types.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <microhttpd.h>

typedef void *(*mg_mhd_uri_log_callback)(void *cls, const char *uri, struct MHD_Connection *con);

/// Starts a daemon bound to the given socket address (IPv4 or IPv6), with the options Mirrorgate uses.
/// `accept_policy` admits or refuses each new connection by its peer address; `uri_log` receives the raw
/// request target (path and query, not unescaped) and returns the request context.
static inline struct MHD_Daemon *mg_mhd_start(unsigned int flags, const struct sockaddr *addr,
                                              MHD_AcceptPolicyCallback accept_policy, void *accept_policy_cls,
                                              MHD_AccessHandlerCallback handler, void *handler_cls,
                                              MHD_RequestCompletedCallback completed, void *completed_cls,
                                              mg_mhd_uri_log_callback uri_log, void *uri_log_cls,
                                              MHD_NotifyConnectionCallback notify_connection,
                                              void *notify_connection_cls,
                                              unsigned int connection_limit, unsigned int timeout_seconds,
                                              size_t memory_limit, unsigned int thread_pool_size,
                                              unsigned int listen_backlog) {
    uint16_t port = 0;
    if (addr->sa_family == AF_INET) port = ntohs(((const struct sockaddr_in *)addr)->sin_port);
    else if (addr->sa_family == AF_INET6) port = ntohs(((const struct sockaddr_in6 *)addr)->sin6_port);
    return MHD_start_daemon(flags, port, accept_policy, accept_policy_cls, handler, handler_cls,
                            MHD_OPTION_SOCK_ADDR, addr,
                            MHD_OPTION_CONNECTION_LIMIT, connection_limit,
                            MHD_OPTION_CONNECTION_TIMEOUT, timeout_seconds,
                            MHD_OPTION_CONNECTION_MEMORY_LIMIT, memory_limit,
                            MHD_OPTION_NOTIFY_COMPLETED, completed, completed_cls,
                            MHD_OPTION_URI_LOG_CALLBACK, uri_log, uri_log_cls,
                            MHD_OPTION_NOTIFY_CONNECTION, notify_connection, notify_connection_cls,
                            MHD_OPTION_THREAD_POOL_SIZE, thread_pool_size > 1 ? thread_pool_size : 0,
                            MHD_OPTION_LISTEN_BACKLOG_SIZE, listen_backlog,
                            MHD_OPTION_END);
}

static inline ssize_t mg_mhd_end_of_stream(void) { return MHD_CONTENT_READER_END_OF_STREAM; }
static inline ssize_t mg_mhd_end_with_error(void) { return MHD_CONTENT_READER_END_WITH_ERROR; }
static inline uint64_t mg_mhd_size_unknown(void) { return MHD_SIZE_UNKNOWN; }

/// The port the daemon actually bound (useful with port 0).
static inline uint16_t mg_mhd_bound_port(struct MHD_Daemon *daemon) {
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(daemon, MHD_DAEMON_INFO_BIND_PORT);
    return info ? info->port : 0;
}

/// The listening socket, so that shutdown can stop accepting before draining.
static inline int mg_mhd_listen_fd(struct MHD_Daemon *daemon) {
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(daemon, MHD_DAEMON_INFO_LISTEN_FD);
    return info ? info->listen_fd : -1;
}

/// The socket of a connection (-1 if unknown).
static inline int mg_mhd_connection_fd(struct MHD_Connection *c) {
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    return info ? info->connect_fd : -1;
}

/// The socket context a connection notification stored for the connection (NULL if none).
static inline void *mg_mhd_socket_context(struct MHD_Connection *c) {
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return info ? info->socket_context : NULL;
}

/// The size of the request head in bytes, from the method to the end of the empty line (0 if unknown).
static inline size_t mg_mhd_header_size(struct MHD_Connection *c) {
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(c, MHD_CONNECTION_INFO_REQUEST_HEADER_SIZE);
    return info ? info->header_size : 0;
}

/// The peer's socket address (NULL if unknown).
static inline const struct sockaddr *mg_mhd_client_address(struct MHD_Connection *c) {
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    return info ? info->client_addr : NULL;
}

/// Sets TCP_DEFER_ACCEPT on a listening socket (a connection is accepted once its first data arrived,
/// or after `seconds`); returns setsockopt's result (errors are checked in Swift).
static inline int mg_set_defer_accept(int fd, int seconds) {
    return setsockopt(fd, IPPROTO_TCP, TCP_DEFER_ACCEPT, &seconds, sizeof seconds);
}

/// Number of open connections.
static inline unsigned int mg_mhd_current_connections(struct MHD_Daemon *daemon) {
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(daemon, MHD_DAEMON_INFO_CURRENT_CONNECTIONS);
    return info ? info->num_connections : 0;
}

#endif
