#ifndef MG_SQLITE_SHIM_H
#define MG_SQLITE_SHIM_H
/* What Swift cannot call in SQLite: variadic config calls and the SQLITE_TRANSIENT cast macro. */
#include <sqlite3.h>
#include <sys/random.h>

static inline sqlite3_destructor_type mg_sqlite_transient(void) { return SQLITE_TRANSIENT; }
static inline sqlite3_destructor_type mg_sqlite_static(void) { return SQLITE_STATIC; }
static inline int mg_sqlite_config_multithread(void) { return sqlite3_config(SQLITE_CONFIG_MULTITHREAD); }
static inline int mg_sqlite_db_config_defensive(sqlite3 *db, int on) {
    return sqlite3_db_config(db, SQLITE_DBCONFIG_DEFENSIVE, on, (int *)0);
}

/* Extended result codes built from shifts, which Swift does not import as constants. */
static inline int mg_sqlite_ioerr_data(void) { return SQLITE_IOERR_DATA; }
static inline int mg_sqlite_ioerr_short_read(void) { return SQLITE_IOERR_SHORT_READ; }
static inline int mg_sqlite_ioerr_read(void) { return SQLITE_IOERR_READ; }
static inline int mg_sqlite_ioerr_write(void) { return SQLITE_IOERR_WRITE; }

/* Fills `buffer` from the kernel's random generator (the encrypting VFS's nonces): `count` on success,
 * -1 with errno otherwise. */
static inline long mg_getrandom(void *buffer, unsigned long count) { return (long)getrandom(buffer, count, 0); }

/* The file object of Storage's encrypting VFS (Sources/Storage/EncryptingVFS.swift). SQLite allocates
 * `szOsFile` bytes per open file: this header, then the underlying VFS's own file object at offset
 * mg_crypt_file_header_size(). `state` is the retained Swift object of the open file (NULL until xOpen
 * succeeds; a file whose `base.pMethods` is NULL is never closed by SQLite). */
typedef struct mg_crypt_file {
    sqlite3_file base;
    void *state;
} mg_crypt_file;

static inline int mg_crypt_file_header_size(void) {
    return (int)((sizeof(mg_crypt_file) + 15) & ~(unsigned long)15);
}

static inline sqlite3_file *mg_crypt_file_real(sqlite3_file *file) {
    return (sqlite3_file *)((char *)file + mg_crypt_file_header_size());
}
#endif
