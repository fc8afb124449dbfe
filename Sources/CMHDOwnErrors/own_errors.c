/* Sees libmicrohttpd's own error answers.
 *
 * libmicrohttpd 0.9.75 answers a malformed request head or chunked body itself (transmit_error_response:
 * an HTML page with 400, 413, 414, 431, 500 or 505), which no application callback can replace. It
 * queues that page through the exported MHD_queue_response, which it calls through its PLT; this file
 * defines MHD_queue_response in the executable, so the dynamic linker binds libmicrohttpd's calls (and
 * the application's) to it. It forwards every call to libmicrohttpd's own definition and, when the caller
 * is libmicrohttpd itself (its only such call is that error path), first calls the hook: the server then
 * writes an answer in the API's format and shuts the socket down, so libmicrohttpd's page is never sent.
 * mg_mhd_set_own_error_hook reports whether the binding is in place (it is unless libmicrohttpd was
 * linked with -Bsymbolic or the symbol was not exported). */
#define _GNU_SOURCE
#include "CMHDOwnErrors.h"

#include <dlfcn.h>
#include <link.h>
#include <microhttpd.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

typedef enum MHD_Result (*queue_fn)(struct MHD_Connection *, unsigned int, struct MHD_Response *);

static _Atomic(mg_mhd_own_error_hook) own_error_hook;
static _Atomic(queue_fn) real_queue;
/* libmicrohttpd's mapped address range: a call from inside it is one of its own. */
static _Atomic uintptr_t mhd_low, mhd_high;

static int find_range(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    uintptr_t target = (uintptr_t)data, low = UINTPTR_MAX, high = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD) continue;
        uintptr_t start = info->dlpi_addr + ph->p_vaddr;
        if (start < low) low = start;
        if (start + ph->p_memsz > high) high = start + ph->p_memsz;
    }
    if (low <= target && target < high) {
        atomic_store(&mhd_low, low);
        atomic_store(&mhd_high, high);
        return 1;
    }
    return 0;
}

static queue_fn resolve(void) {
    queue_fn real = atomic_load(&real_queue);
    if (real) return real;
    real = (queue_fn)dlsym(RTLD_NEXT, "MHD_queue_response");
    if (real) {
        dl_iterate_phdr(find_range, (void *)(uintptr_t)real);
        atomic_store(&real_queue, real);
    }
    return real;
}

enum MHD_Result MHD_queue_response(struct MHD_Connection *connection, unsigned int status_code,
                                   struct MHD_Response *response) {
    queue_fn real = resolve();
    if (!real) return MHD_NO;
    mg_mhd_own_error_hook hook = atomic_load_explicit(&own_error_hook, memory_order_acquire);
    if (hook) {
        uintptr_t caller = (uintptr_t)__builtin_return_address(0);
        if (atomic_load_explicit(&mhd_low, memory_order_relaxed) <= caller &&
            caller < atomic_load_explicit(&mhd_high, memory_order_relaxed))
            hook(connection, status_code);
    }
    return real(connection, status_code, response);
}

bool mg_mhd_set_own_error_hook(mg_mhd_own_error_hook hook) {
    queue_fn real = resolve();
    atomic_store_explicit(&own_error_hook, hook, memory_order_release);
    /* libmicrohttpd's calls bind to the definition the global scope finds first: this one, if exported. */
    void *bound = dlsym(RTLD_DEFAULT, "MHD_queue_response");
    return real != NULL && bound == (void *)MHD_queue_response && atomic_load(&mhd_high) != 0;
}
