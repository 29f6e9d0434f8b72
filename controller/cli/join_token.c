/*
 * controller/cli/join_token.c: `tarmac join-token create|list|revoke`, the
 * tokens machines join an owned pool with (docs/owned.md), blocking (a
 * one-shot command, never on the loop).  The configuration says which
 * pools are owned; the database keeps the tokens' hashes
 * (controller/store/join_tokens.h).
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/crypto.h>

#include "controller/cli/cli.h"
#include "controller/spec/token.h"
#include "controller/store/join_tokens.h"
#include "controller/store/store.h"
#include "core/clock.h"
#include "core/config.h"
#include "core/err.h"
#include "core/units.h"

/* A day: long enough to rack a machine, short enough that a token left
 * in a shell history is soon worth nothing. */
#define JOIN_TTL_DEFAULT_MS (24LL * 3600 * 1000)
#define JOIN_TTL_MAX_MS (365LL * 24 * 3600 * 1000)
#define JOIN_USES_MAX 100000

static const char join_help[] =
    "Usage: tarmac join-token create --pool POOL [--ttl DUR] [--uses N]\n"
    "       tarmac join-token list\n"
    "       tarmac join-token revoke --id ID\n\n"
    "Join tokens let machines tarmac does not buy join an owned pool\n"
    "(tarmac agent --join).  create prints the token once, on standard output;\n"
    "only its SHA-256 is stored.  Default --ttl 24h, --uses 1.\n\n"
    "Options:\n"
    "      --config FILE        configuration file (env TARMAC_CONFIG)\n"
    "  -h, --help               this help\n";


static int join_usage(const char *fmt, const char *arg)
{
    fprintf(stderr, "tarmac join-token: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\nTry \"tarmac join-token --help\".\n");
    return TM_EXIT_USAGE;
}

struct join_args {
    const char *verb, *config, *pool;
    int64_t ttl_ms, id;
    int uses;
};

/* The options after the verb into *a: -1 to go on, else the exit code. */
static int join_parse(int argc, char **argv, struct join_args *a)
{
    enum { O_POOL = 1, O_TTL, O_USES, O_ID, O_CONFIG, O_HELP };
    static const struct option opts[] = {
        {"pool", required_argument, NULL, O_POOL}, {"ttl", required_argument, NULL, O_TTL},
        {"uses", required_argument, NULL, O_USES}, {"id", required_argument, NULL, O_ID},
        {"config", required_argument, NULL, O_CONFIG}, {"help", no_argument, NULL, O_HELP},
        {0},
    };
    char *end;
    long long v;
    int opt;

    optind = 1;
    opterr = 0;
    while ((opt = getopt_long(argc - 1, argv + 1, ":h", opts, NULL)) != -1) {
        switch (opt) {
        case O_POOL: a->pool = optarg; break;
        case O_CONFIG: a->config = optarg; break;
        case O_TTL:
            if (tm_duration_parse(optarg, &a->ttl_ms) != 0 || a->ttl_ms < 1000 ||
                a->ttl_ms > JOIN_TTL_MAX_MS)
                return join_usage("--ttl: a duration from 1s to 365d (e.g. 24h, 30m), got \"%s\"",
                                  optarg);
            break;
        case O_USES:
            v = strtoll(optarg, &end, 10);
            if (!*optarg || *end || v < 1 || v > JOIN_USES_MAX)
                return join_usage("--uses: a whole number from 1 to 100000, got \"%s\"", optarg);
            a->uses = (int)v;
            break;
        case O_ID:
            a->id = strtoll(optarg, &end, 10);
            if (!*optarg || *end || a->id <= 0)
                return join_usage("--id: a join token's id (join-token list), got \"%s\"", optarg);
            break;
        case O_HELP:
        case 'h': fputs(join_help, stdout); return TM_EXIT_OK;
        case ':': return join_usage("option %s needs a value", argv[optind]);
        default: return join_usage("unrecognized option \"%s\"", argv[optind]);
        }
    }
    if (optind < argc - 1)
        return join_usage("unexpected argument \"%s\"", argv[optind + 1]);
    bool create = strcmp(a->verb, "create") == 0;
    if (create && !a->pool)
        return join_usage("--pool: required%s", "");
    if (!create && (a->pool || a->uses || a->ttl_ms))
        return join_usage("--pool, --ttl and --uses go with create only%s", "");
    if (strcmp(a->verb, "revoke") == 0 && !a->id)
        return join_usage("--id: required%s", "");
    if (strcmp(a->verb, "revoke") != 0 && a->id)
        return join_usage("--id goes with revoke only%s", "");
    return -1;
}

static int join_list(PGconn *conn, int64_t now_ms)
{
    char now_s[24];

    snprintf(now_s, sizeof(now_s), "%" PRId64, now_ms);
    const char *params[] = {now_s};
    PGresult *res = PQexecParams(conn,
                                 "SELECT id, pool, uses, uses_left, expires_ms,"
                                 " CASE WHEN revoked_ms IS NOT NULL THEN 'revoked'"
                                 "      WHEN expires_ms <= $1 THEN 'expired'"
                                 "      WHEN uses_left = 0 THEN 'spent' ELSE 'valid' END"
                                 " FROM join_tokens ORDER BY id",
                                 1, NULL, params, NULL, NULL, 0);
    int rc = TM_EXIT_OK;

    if (PQresultStatus(res) != PGRES_TUPLES_OK) {
        fprintf(stderr, "tarmac join-token: could not list join tokens: %s", PQresultErrorMessage(res));
        rc = TM_EXIT_FAIL;
    } else {
        printf("%-8s %-24s %-6s %-9s %-15s %s\n", "ID", "POOL", "USED", "USES_LEFT", "EXPIRES_MS",
               "STATE");
        for (int i = 0; i < PQntuples(res); i++)
            printf("%-8s %-24s %-6s %-9s %-15s %s\n", PQgetvalue(res, i, 0), PQgetvalue(res, i, 1),
                   PQgetvalue(res, i, 2), PQgetvalue(res, i, 3), PQgetvalue(res, i, 4),
                   PQgetvalue(res, i, 5));
    }
    PQclear(res);
    return rc;
}

static int join_create(PGconn *conn, const struct tm_config *cfg, const struct join_args *a)
{
    const struct tm_config_pool *pool = tm_config_pool_find(cfg, a->pool);
    char token[TM_TOKEN_LEN + 1], err[512];
    int64_t id = 0;

    if (!pool) {
        fprintf(stderr, "tarmac join-token: --pool: no pool \"%s\" in %s\n", a->pool, cfg->path);
        return TM_EXIT_USAGE;
    }
    if (!pool->owned) {
        fprintf(stderr, "tarmac join-token: --pool: pool \"%s\" is not owned (its provider \"%s\" "
                        "buys its nodes); join tokens are for pools of kind owned\n",
                pool->name, pool->provider);
        return TM_EXIT_USAGE;
    }
    int r = tm_join_token_create(conn, pool->name, a->ttl_ms ? a->ttl_ms : JOIN_TTL_DEFAULT_MS,
                                 a->uses ? a->uses : 1, tm_wall_ms(), token, &id, err, sizeof(err));
    if (r < 0) {
        fprintf(stderr, "tarmac join-token: %s\n", err);
        return r == TM_ENOTFOUND ? TM_EXIT_USAGE : TM_EXIT_FAIL;
    }
    /* The only time the token exists outside its holder's hands. */
    printf("%s\n", token);
    fflush(stdout);
    OPENSSL_cleanse(token, sizeof(token));
    fprintf(stderr, "join token %" PRId64 " for pool \"%s\" (%d use%s) created; it is shown only "
                    "this once\n",
            id, pool->name, a->uses ? a->uses : 1, a->uses > 1 ? "s" : "");
    return TM_EXIT_OK;
}

int tm_join_token_main(int argc, char **argv)
{
    struct join_args a = {0};
    struct tm_config cfg = {0};
    char err[512];
    PGconn *conn = NULL;
    int rc;

    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        fputs(join_help, argc < 2 ? stderr : stdout);
        return argc < 2 ? TM_EXIT_USAGE : TM_EXIT_OK;
    }
    a.verb = argv[1];
    if (strcmp(a.verb, "create") != 0 && strcmp(a.verb, "revoke") != 0 && strcmp(a.verb, "list") != 0)
        return join_usage("unrecognized verb \"%s\" (valid: create, list, revoke)", a.verb);
    rc = join_parse(argc, argv, &a);
    if (rc >= 0)
        return rc;
    const char *path = tm_config_path(a.config);
    if (!path)
        return join_usage("--config: required (or TARMAC_CONFIG)%s", "");
    if (tm_config_load(path, &cfg, err, sizeof(err)) < 0 ||
        tm_config_apply_env(&cfg, err, sizeof(err)) < 0) {
        fprintf(stderr, "tarmac join-token: %s\n", err);
        return TM_EXIT_FAIL;
    }
    rc = TM_EXIT_FAIL;
    conn = tm_store_connect_blocking(cfg.database_url, err, sizeof(err));
    if (!conn || tm_store_check_schema(conn, err, sizeof(err)) < 0) {
        fprintf(stderr, "tarmac join-token: %s\n", err);
        goto out;
    }
    if (strcmp(a.verb, "create") == 0) {
        rc = join_create(conn, &cfg, &a);
    } else if (strcmp(a.verb, "list") == 0) {
        rc = join_list(conn, tm_wall_ms());
    } else {
        int r = tm_join_token_revoke(conn, a.id, tm_wall_ms(), err, sizeof(err));
        if (r < 0)
            fprintf(stderr, "tarmac join-token: %s\n", err);
        else
            printf("join token %" PRId64 " revoked\n", a.id);
        rc = r == 0 ? TM_EXIT_OK : r == TM_ENOTFOUND ? TM_EXIT_USAGE : TM_EXIT_FAIL;
    }
out:
    PQfinish(conn);
    tm_config_release(&cfg);
    return rc;
}
