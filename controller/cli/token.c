/*
 * controller/cli/token.c: `tarmac token create|revoke|list`, blocking
 * (one-shot command, never on the loop).
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
#include "controller/store/store.h"
#include "controller/store/tokens.h"
#include "core/clock.h"
#include "core/config.h"
#include "core/err.h"

static const char token_help[] =
    "Usage: tarmac token create --name NAME --role admin|finance|engineer|viewer [--team TEAM]\n"
    "       tarmac token revoke --name NAME\n"
    "       tarmac token list\n\n"
    "API bearer tokens.  create prints the new token once, on standard output;\n"
    "only its SHA-256 is stored.  engineer tokens need --team.\n\n"
    "Options:\n"
    "      --config FILE        configuration file (env TARMAC_CONFIG)\n"
    "      --database-url URL   PostgreSQL URL (env TARMAC_DATABASE_URL; else the config's)\n"
    "  -h, --help               this help\n";

static int token_usage(const char *fmt, const char *arg)
{
    fprintf(stderr, "tarmac token: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\nTry \"tarmac token --help\".\n");
    return TM_EXIT_USAGE;
}

/* The database URL: the option, the environment, else the config file. */
static int resolve_url(const char *opt_url, const char *config_path, struct tm_config *cfg,
                       const char **ret_url)
{
    char err[512];
    const char *env = getenv("TARMAC_DATABASE_URL");

    if (opt_url) {
        *ret_url = opt_url;
        return 0;
    }
    if (env && *env) {
        *ret_url = env;
        return 0;
    }
    if (!config_path)
        config_path = getenv("TARMAC_CONFIG");
    if (!config_path)
        config_path = TM_CONFIG_DEFAULT_PATH;
    if (tm_config_load(config_path, cfg, err, sizeof(err)) < 0 ||
        tm_config_apply_env(cfg, err, sizeof(err)) < 0) {
        fprintf(stderr, "tarmac token: %s\n", err);
        return TM_EXIT_FAIL;
    }
    *ret_url = cfg->database_url;
    return 0;
}

int tm_token_main(int argc, char **argv)
{
    enum { O_NAME = 1, O_ROLE, O_TEAM, O_CONFIG, O_URL, O_HELP };
    static const struct option opts[] = {
        {"name", required_argument, NULL, O_NAME}, {"role", required_argument, NULL, O_ROLE},
        {"team", required_argument, NULL, O_TEAM}, {"config", required_argument, NULL, O_CONFIG},
        {"database-url", required_argument, NULL, O_URL}, {"help", no_argument, NULL, O_HELP},
        {0},
    };
    const char *verb, *name = NULL, *role = NULL, *team = NULL, *config = NULL, *opt_url = NULL;
    const char *url = NULL;
    struct tm_config cfg = {0};
    char err[512], token[TM_TOKEN_LEN + 1];
    PGconn *conn = NULL;
    int opt, r, rc = TM_EXIT_OK;

    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        fputs(token_help, argc < 2 ? stderr : stdout);
        return argc < 2 ? TM_EXIT_USAGE : TM_EXIT_OK;
    }
    verb = argv[1];
    if (strcmp(verb, "create") != 0 && strcmp(verb, "revoke") != 0 && strcmp(verb, "list") != 0)
        return token_usage("unrecognized verb \"%s\" (valid: create, revoke, list)", verb);
    optind = 1;
    opterr = 0;
    while ((opt = getopt_long(argc - 1, argv + 1, ":h", opts, NULL)) != -1) {
        switch (opt) {
        case O_NAME: name = optarg; break;
        case O_ROLE: role = optarg; break;
        case O_TEAM: team = optarg; break;
        case O_CONFIG: config = optarg; break;
        case O_URL: opt_url = optarg; break;
        case O_HELP:
        case 'h':
            fputs(token_help, stdout);
            return TM_EXIT_OK;
        case ':':
            return token_usage("option %s needs a value", argv[optind]);
        default:
            return token_usage("unrecognized option \"%s\"", argv[optind]);
        }
    }
    if (optind < argc - 1)
        return token_usage("unexpected argument \"%s\"", argv[optind + 1]);
    if (strcmp(verb, "list") != 0 && !name)
        return token_usage("--name: required%s", "");
    if (strcmp(verb, "create") == 0 && !role)
        return token_usage("--role: required%s", "");
    if (strcmp(verb, "create") != 0 && (role || team))
        return token_usage("--role and --team go with create only%s", "");

    rc = resolve_url(opt_url, config, &cfg, &url);
    if (rc != TM_EXIT_OK)
        goto out;
    conn = tm_store_connect_blocking(url, err, sizeof(err));
    if (!conn || tm_store_check_schema(conn, err, sizeof(err)) < 0) {
        fprintf(stderr, "tarmac token: %s\n", err);
        rc = TM_EXIT_FAIL;
        goto out;
    }
    if (strcmp(verb, "create") == 0) {
        r = tm_token_create(conn, name, role, team, tm_wall_ms(), token, err, sizeof(err));
        if (r < 0) {
            fprintf(stderr, "tarmac token: %s\n", err);
            rc = r == TM_EINVAL ? TM_EXIT_USAGE : TM_EXIT_FAIL;
            goto out;
        }
        /* The only time the token exists outside its holder's hands. */
        printf("%s\n", token);
        fflush(stdout);
        OPENSSL_cleanse(token, sizeof(token));
        fprintf(stderr, "token \"%s\" (%s%s%s) created; it is shown only this once\n", name, role,
                team ? ", team " : "", team ? team : "");
    } else if (strcmp(verb, "revoke") == 0) {
        r = tm_token_revoke(conn, name, err, sizeof(err));
        if (r < 0) {
            fprintf(stderr, "tarmac token: %s\n", err);
            rc = TM_EXIT_FAIL;
            goto out;
        }
        printf("token \"%s\" revoked\n", name);
    } else {
        PGresult *res = PQexecParams(conn,
                                     "SELECT name, role, coalesce(team, '-'), created_ms, revoked"
                                     " FROM api_tokens ORDER BY name",
                                     0, NULL, NULL, NULL, NULL, 0);
        if (PQresultStatus(res) != PGRES_TUPLES_OK) {
            fprintf(stderr, "tarmac token: could not list tokens: %s", PQresultErrorMessage(res));
            rc = TM_EXIT_FAIL;
        } else {
            printf("%-24s %-9s %-20s %-15s %s\n", "NAME", "ROLE", "TEAM", "CREATED_MS", "REVOKED");
            for (int i = 0; i < PQntuples(res); i++)
                printf("%-24s %-9s %-20s %-15s %s\n", PQgetvalue(res, i, 0), PQgetvalue(res, i, 1),
                       PQgetvalue(res, i, 2), PQgetvalue(res, i, 3),
                       strcmp(PQgetvalue(res, i, 4), "t") == 0 ? "yes" : "no");
        }
        PQclear(res);
    }
out:
    PQfinish(conn);
    tm_config_release(&cfg);
    return rc;
}
