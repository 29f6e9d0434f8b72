/*
 * controller/cli/serve.c: the server's own commands: `tarmac migrate` and
 * `tarmac serve`.
 */
#include "controller/cli/cli.h"
#include "controller/cli/common.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>
#include <libpq-fe.h>

#include "controller/daemon/controller.h"
#include "controller/io/pg_uv.h"
#include "controller/sched/scheduler.h"
#include "controller/spec/job_fit.h"
#include "controller/spec/job_spec.h"
#include "controller/store/migrate.h"
#include "controller/store/store.h"
#include "core/model.h"
#include "core/clock.h"
#include "core/config.h"
#include "core/err.h"
#include "core/log.h"
#include "core/units.h"

/* ---- migrate ----------------------------------------------------------- */

int tm_cli_migrate(int argc, char **argv)
{
    static const struct option opts[] = {TM_CLI_DB_OPTIONS, {0}};
    struct tm_cli_common c = {.cmd = "migrate"};
    char err[1024];
    int opt, r, applied = 0, rc = TM_EXIT_OK;
    PGconn *conn;

    optind = 1;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        if (opt == TM_CLI_OPT_HELP || opt == 'h') {
            printf("Usage: tarmac migrate [options]\n\n"
                   "Apply pending schema migrations (each in its own transaction, under a lock),\n"
                   "then record the configured pools.  A no-op when current; refuses a database\n"
                   "newer than this binary.\n\nOptions:\n%s", tm_cli_db_help);
            return TM_EXIT_OK;
        }
        r = tm_cli_common_opt(&c, opt, optarg, argv);
        if (r > 1)
            return r;
    }
    if (optind < argc)
        return tm_cli_usage_error(c.cmd, "unexpected argument \"%s\"", argv[optind]);
    if (c.config_path && (r = tm_cli_load_config(&c, true)) != 0)
        return r;
    conn = tm_cli_connect_db(&c);
    if (!conn) {
        tm_cli_common_release(&c);
        return TM_EXIT_FAIL;
    }
    r = tm_migrate(conn, &applied, err, sizeof(err));
    if (r < 0) {
        fprintf(stderr, "tarmac migrate: %s\n", err);
        rc = TM_EXIT_FAIL;
    } else if (c.have_cfg && tm_store_sync_pools(conn, &c.cfg, tm_wall_ms(), err, sizeof(err)) < 0) {
        fprintf(stderr, "tarmac migrate: %s\n", err);
        rc = TM_EXIT_FAIL;
    } else if (c.json) {
        printf("{\"applied\": %d, \"version\": %d}\n", applied, tm_migrate_latest());
    } else {
        printf(applied ? "applied %d migration(s); schema at version %d\n"
                       : "schema is current (%d migrations pending), version %d\n",
               applied, tm_migrate_latest());
    }
    PQfinish(conn);
    tm_cli_common_release(&c);
    return rc;
}

/* ---- serve ------------------------------------------------------------- */

int tm_cli_serve(int argc, char **argv)
{
    enum { O_IDLE = 1, O_MAXWALL, O_POLICY, O_LOG };
    static const struct option opts[] = {
        TM_CLI_DB_OPTIONS,
        {"exit-when-idle", no_argument, NULL, O_IDLE}, {"max-wall", required_argument, NULL, O_MAXWALL},
        {"policy", required_argument, NULL, O_POLICY}, {"log-level", required_argument, NULL, O_LOG},
        {0},
    };
    struct tm_cli_common c = {.cmd = "serve"};
    struct tm_controller_options o = {0};
    struct tm_controller_stats st = {0};
    const char *policy = NULL, *level = NULL;
    char err[1024];
    int opt, r;

    optind = 1;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        switch (opt) {
        case TM_CLI_OPT_HELP:
        case 'h':
            printf("Usage: tarmac serve --config FILE [options]\n\n"
                   "Run the controller: reconcile the fleet every tick while this replica holds\n"
                   "the leader lock.  SIGINT/SIGTERM stop it gracefully.\n\n"
                   "      --policy P           scheduler policy (%s); default from the config\n"
                   "      --log-level L        debug|info|warn|error\n"
                   "      --exit-when-idle     stop once no job is queued or running and no node is live\n"
                   "      --max-wall DUR       stop after DUR of real time\n%s",
                   tm_sched_policy_list(), tm_cli_db_help);
            return TM_EXIT_OK;
        case O_IDLE: o.exit_when_idle = true; break;
        case O_MAXWALL:
            if (tm_duration_parse(optarg, &o.max_wall_ms) < 0)
                return tm_cli_usage_error(c.cmd, "--max-wall: must be a duration such as 90s or 2m, not \"%s\"", optarg);
            break;
        case O_POLICY:
            if (tm_sched_policy_parse(optarg) < 0)
                return tm_cli_usage_error(c.cmd, "--policy: unrecognized policy \"%s\" (valid: %s)", optarg,
                                   tm_sched_policy_list());
            policy = optarg;
            break;
        case O_LOG:
            if (tm_log_level_parse(optarg) < 0)
                return tm_cli_usage_error(c.cmd, "--log-level: must be debug, info, warn or error, not \"%s\"", optarg);
            level = optarg;
            break;
        default:
            r = tm_cli_common_opt(&c, opt, optarg, argv);
            if (r > 1)
                return r;
        }
    }
    if (optind < argc)
        return tm_cli_usage_error(c.cmd, "unexpected argument \"%s\"", argv[optind]);
    if ((r = tm_cli_load_config(&c, true)) != 0)
        return r;
    if (c.database_url) {
        free(c.cfg.database_url);
        c.cfg.database_url = strdup(c.database_url);
    }
    if (policy) {
        free(c.cfg.scheduler_policy);
        c.cfg.scheduler_policy = strdup(policy);
    }
    tm_log_set_level((enum tm_log_level)tm_log_level_parse(level ? level : c.cfg.log_level));

    /* Start-up checks may block: the loop is not running yet.  A database
     * that is down now is a clear error, not a retry loop. */
    PGconn *conn = tm_store_connect_blocking(c.cfg.database_url, err, sizeof(err));
    if (!conn) {
        fprintf(stderr, "tarmac serve: %s\n", err);
        tm_cli_common_release(&c);
        return TM_EXIT_FAIL;
    }
    r = tm_store_check_schema(conn, err, sizeof(err));
    if (r == 0)
        r = tm_store_sync_pools(conn, &c.cfg, tm_wall_ms(), err, sizeof(err));
    PQfinish(conn);
    if (r < 0) {
        fprintf(stderr, "tarmac serve: %s\n", err);
        tm_cli_common_release(&c);
        return TM_EXIT_FAIL;
    }
    r = tm_controller_run(&c.cfg, &o, &st, err, sizeof(err));
    if (r < 0)
        fprintf(stderr, "tarmac serve: %s\n", err[0] ? err : tm_strerror(r));
    if (c.json)
        printf("{\"ticks\": %u, \"passes\": %u, \"placed\": %u, \"requested\": %u, \"ready\": %u,"
               " \"released\": %u, \"gone\": %u, \"orphans\": %u, \"finished\": %u, \"launches\": %u,"
               " \"leader\": %s}\n",
               st.ticks, st.passes, st.placed, st.requested, st.ready, st.released, st.gone,
               st.orphans, st.finished, st.launches, st.was_leader ? "true" : "false");
    tm_cli_common_release(&c);
    return r < 0 ? TM_EXIT_FAIL : TM_EXIT_OK;
}
