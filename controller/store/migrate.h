/*
 * controller/store/migrate.h: schema migrations, applied by `tarmac migrate`.
 *
 * Migrations are the numbered files in migrations/, embedded into the
 * binary at build time.  tm_migrate() takes a session advisory lock (so two
 * migrators never race: the second waits, then finds nothing to do),
 * applies each pending file in its own transaction together with its row in
 * schema_migrations, and refuses a database whose schema is newer than this
 * binary knows.  It runs before the loop starts (a one-shot command), so it
 * uses libpq's blocking calls.
 */
#ifndef TM_MIGRATE_H
#define TM_MIGRATE_H

#include <stddef.h>

#include <libpq-fe.h>

struct tm_migration {
    int version;
    const char *name;
    const char *sql;
};

extern const struct tm_migration tm_migrations[];
extern const size_t tm_nmigrations;

/* The newest version this binary knows. */
int tm_migrate_latest(void);

/* Apply pending migrations.  *ret_applied counts files applied (0 when the
 * database was current).  err gets a message on failure.  Returns 0,
 * TM_ESCHEMA (database newer than us, or a checksum mismatch), or TM_EDB. */
int tm_migrate(PGconn *conn, int *ret_applied, char *err, size_t errsize);

/* The version the database is at (0 when never migrated) or TM_EDB. */
int tm_migrate_current(PGconn *conn, char *err, size_t errsize);

/* Script text for the async layer: one row, the current version (0 when the
 * table does not exist).  Used by serve to refuse a stale schema. */
extern const char tm_migrate_version_sql[];

#endif
