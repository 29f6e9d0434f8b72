#include "controller/store/migrate.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "core/err.h"
#include "core/log.h"

/* Any constant shared by every tarmac: the lock only serialises migrators. */
#define TM_MIGRATE_LOCK_KEY "7478636d6967" /* "txcmig" */

const char tm_migrate_version_sql[] =
    "SELECT CASE WHEN to_regclass('schema_migrations') IS NULL THEN 0 "
    "ELSE (SELECT coalesce(max(version), 0) FROM schema_migrations) END";

int tm_migrate_latest(void)
{
    return tm_nmigrations ? tm_migrations[tm_nmigrations - 1].version : 0;
}

static void sha256_hex(const char *text, char out[65])
{
    unsigned char md[32];
    unsigned int len = 0;

    EVP_Digest(text, strlen(text), md, &len, EVP_sha256(), NULL);
    for (unsigned i = 0; i < 32; i++)
        snprintf(out + 2 * i, 3, "%02x", md[i]);
}

/* Run one command; on failure copy the server's message into err. */
static int run(PGconn *conn, const char *sql, int nparams, const char *const *params,
               PGresult **ret_res, char *err, size_t errsize)
{
    PGresult *res = PQexecParams(conn, sql, nparams, NULL, params, NULL, NULL, 0);
    ExecStatusType st = PQresultStatus(res);

    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
        const char *msg = PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY);
        snprintf(err, errsize, "%s", msg ? msg : PQerrorMessage(conn));
        PQclear(res);
        return TM_EDB;
    }
    if (ret_res)
        *ret_res = res;
    else
        PQclear(res);
    return 0;
}

int tm_migrate_current(PGconn *conn, char *err, size_t errsize)
{
    PGresult *res = NULL;
    int r = run(conn, tm_migrate_version_sql, 0, NULL, &res, err, errsize);

    if (r < 0)
        return r;
    r = (int)strtol(PQgetvalue(res, 0, 0), NULL, 10);
    PQclear(res);
    return r;
}

int tm_migrate(PGconn *conn, int *ret_applied, char *err, size_t errsize)
{
    PGresult *res = NULL;
    int applied = 0;
    int current;
    int r;

    r = run(conn, "SELECT pg_advisory_lock(x'" TM_MIGRATE_LOCK_KEY "'::bigint)", 0, NULL, NULL,
            err, errsize);
    if (r < 0)
        return r;
    r = run(conn,
            "CREATE TABLE IF NOT EXISTS schema_migrations ("
            " version int PRIMARY KEY, name text NOT NULL, sha256 text NOT NULL,"
            " applied_at timestamptz NOT NULL DEFAULT now())",
            0, NULL, NULL, err, errsize);
    if (r < 0)
        goto out;

    current = tm_migrate_current(conn, err, errsize);
    if (current < 0) {
        r = current;
        goto out;
    }
    if (current > tm_migrate_latest()) {
        snprintf(err, errsize,
                 "database schema is at version %d, newer than this tarmac knows (%d): "
                 "upgrade tarmac before using this database",
                 current, tm_migrate_latest());
        r = TM_ESCHEMA;
        goto out;
    }

    /* Applied files must be the files we carry: an edited migration is a
     * bug that would leave databases silently different. */
    r = run(conn, "SELECT version, sha256 FROM schema_migrations ORDER BY version", 0, NULL, &res,
            err, errsize);
    if (r < 0)
        goto out;
    for (int i = 0; i < PQntuples(res); i++) {
        int v = (int)strtol(PQgetvalue(res, i, 0), NULL, 10);
        for (size_t m = 0; m < tm_nmigrations; m++) {
            char sum[65];
            if (tm_migrations[m].version != v)
                continue;
            sha256_hex(tm_migrations[m].sql, sum);
            if (strcmp(sum, PQgetvalue(res, i, 1)) != 0) {
                snprintf(err, errsize, "migration %s was changed after it was applied",
                         tm_migrations[m].name);
                r = TM_ESCHEMA;
                goto out;
            }
        }
    }

    for (size_t m = 0; m < tm_nmigrations; m++) {
        const struct tm_migration *mig = &tm_migrations[m];
        char sum[65];
        char ver[16];
        const char *params[3];

        if (mig->version <= current)
            continue;
        sha256_hex(mig->sql, sum);
        snprintf(ver, sizeof(ver), "%d", mig->version);
        params[0] = ver;
        params[1] = mig->name;
        params[2] = sum;
        r = run(conn, "BEGIN", 0, NULL, NULL, err, errsize);
        if (r < 0)
            goto out;
        /* A script of many statements: PQexec, not PQexecParams. */
        PGresult *mr = PQexec(conn, mig->sql);
        if (PQresultStatus(mr) != PGRES_COMMAND_OK && PQresultStatus(mr) != PGRES_TUPLES_OK) {
            const char *msg = PQresultErrorField(mr, PG_DIAG_MESSAGE_PRIMARY);
            snprintf(err, errsize, "migration %s failed: %s", mig->name,
                     msg ? msg : PQerrorMessage(conn));
            PQclear(mr);
            PQclear(PQexec(conn, "ROLLBACK"));
            r = TM_EDB;
            goto out;
        }
        PQclear(mr);
        r = run(conn, "INSERT INTO schema_migrations (version, name, sha256) VALUES ($1, $2, $3)", 3,
                params, NULL, err, errsize);
        if (r == 0)
            r = run(conn, "COMMIT", 0, NULL, NULL, err, errsize);
        if (r < 0) {
            PQclear(PQexec(conn, "ROLLBACK"));
            goto out;
        }
        tm_log_info("migration applied", "version=%d name=%s", mig->version, mig->name);
        applied++;
    }
    r = 0;
out:
    PQclear(res);
    {
        char ignore[8];
        run(conn, "SELECT pg_advisory_unlock(x'" TM_MIGRATE_LOCK_KEY "'::bigint)", 0, NULL, NULL,
            ignore, sizeof(ignore));
    }
    if (ret_applied)
        *ret_applied = applied;
    return r;
}
