#ifndef MG_MHD_OWN_ERRORS_H
#define MG_MHD_OWN_ERRORS_H
/* libmicrohttpd answers some malformed requests itself (400, 413, 414, 431, 500, 505), with HTML pages of
 * its own and before the application sees the request. This target sees each of them happen, so that the
 * server can answer in the API's format instead (see own_errors.c). */
#include <stdbool.h>

struct MHD_Connection;

/// Called on libmicrohttpd's polling thread when libmicrohttpd itself queues an error answer with
/// `status` for `connection`, before that answer is sent.
typedef void (*mg_mhd_own_error_hook)(struct MHD_Connection *connection, unsigned int status);

/// Installs the hook (NULL removes it). Returns whether libmicrohttpd's own error answers pass through
/// this process's `MHD_queue_response` (and so reach the hook).
bool mg_mhd_set_own_error_hook(mg_mhd_own_error_hook hook);

#endif
