#ifndef MG_SQLITE_SHIM_H
#define MG_SQLITE_SHIM_H
/* What Swift cannot call in SQLite: variadic config calls and the SQLITE_TRANSIENT cast macro. */
#include <sqlite3.h>

static inline sqlite3_destructor_type mg_sqlite_transient(void) { return SQLITE_TRANSIENT; }
static inline sqlite3_destructor_type mg_sqlite_static(void) { return SQLITE_STATIC; }
static inline int mg_sqlite_config_multithread(void) { return sqlite3_config(SQLITE_CONFIG_MULTITHREAD); }
static inline int mg_sqlite_db_config_defensive(sqlite3 *db, int on) {
    return sqlite3_db_config(db, SQLITE_DBCONFIG_DEFENSIVE, on, (int *)0);
}
#endif
