/*
 * controller/cli/db.c: the direct-database forms, `tarmac db VERB` (see cli.h):
 * submit and the listings, over blocking libpq.  Every statement is
 * parameterised.
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
#include "core/units.h"
#include "core/log.h"

/* Print a result as an aligned table, or as a JSON array of objects whose
 * values keep their SQL types (numbers, booleans, null). */
static void print_result(const PGresult *res, bool json)
{
    int rows = PQntuples(res), cols = PQnfields(res);

    if (json) {
        cJSON *arr = cJSON_CreateArray();
        for (int r = 0; r < rows && arr; r++) {
            cJSON *o = cJSON_CreateObject();
            if (!o)
                break;
            cJSON_AddItemToArray(arr, o);
            for (int c = 0; c < cols; c++) {
                const char *name = PQfname(res, c);
                const char *v = PQgetvalue(res, r, c);
                Oid t = PQftype(res, c);
                if (PQgetisnull(res, r, c))
                    cJSON_AddNullToObject(o, name);
                else if (t == 20 || t == 21 || t == 23 || t == 700 || t == 701 || t == 1700)
                    cJSON_AddNumberToObject(o, name, strtod(v, NULL));
                else if (t == 16)
                    cJSON_AddBoolToObject(o, name, v[0] == 't');
                else if (t == 3802 || t == 114) {
                    cJSON *doc = cJSON_Parse(v);
                    cJSON_AddItemToObject(o, name, doc ? doc : cJSON_CreateString(v));
                }
                else
                    cJSON_AddStringToObject(o, name, v);
            }
        }
        char *s = arr ? cJSON_Print(arr) : NULL;
        if (s)
            printf("%s\n", s);
        free(s);
        cJSON_Delete(arr);
        return;
    }
    int *w = calloc((size_t)cols + 1, sizeof(int));
    if (!w)
        return;
    for (int c = 0; c < cols; c++) {
        w[c] = (int)strlen(PQfname(res, c));
        for (int r = 0; r < rows; r++) {
            int l = PQgetlength(res, r, c);
            if (l > 60)
                l = 60;
            if (l > w[c])
                w[c] = l;
        }
    }
    for (int c = 0; c < cols; c++) {
        char up[64];
        snprintf(up, sizeof(up), "%s", PQfname(res, c));
        for (char *p = up; *p; p++)
            *p = (char)(*p >= 'a' && *p <= 'z' ? *p - 32 : *p);
        printf("%-*s%s", w[c], up, c + 1 < cols ? "  " : "\n");
    }
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++)
            printf("%-*.*s%s", w[c], 60, PQgetvalue(res, r, c), c + 1 < cols ? "  " : "\n");
    if (cols == 0)
        printf("\n");
    free(w);
}

static int run_listing(struct tm_cli_common *c, const char *sql, int n, const char *const *params)
{
    PGconn *conn = tm_cli_connect_db(c);
    PGresult *res;
    int rc = TM_EXIT_OK;

    if (!conn)
        return TM_EXIT_FAIL;
    res = PQexecParams(conn, sql, n, NULL, params, NULL, NULL, 0);
    if (PQresultStatus(res) != PGRES_TUPLES_OK) {
        fprintf(stderr, "tarmac %s: query failed: %s", c->cmd, PQresultErrorMessage(res));
        rc = TM_EXIT_FAIL;
    } else {
        print_result(res, c->json);
    }
    PQclear(res);
    PQfinish(conn);
    return rc;
}

int tm_cli_submit(int argc, char **argv)
{
    struct tm_cli_common c = {.cmd = "db submit"};
    struct tm_job_spec spec;
    long count = 1;
    int r, rc = TM_EXIT_OK;

    r = tm_cli_submit_parse(argc, argv, &c, false, &spec, &count);
    if (r >= 0)
        return r;
    if (spec.env || spec.image) {
        tm_job_spec_release(&spec);
        tm_cli_common_release(&c);
        return tm_cli_usage_error(c.cmd, "--env and --image go through the API (tarmac submit)");
    }
    if (c.have_cfg) {
        struct tm_spec_error serr = {0};
        if (tm_job_fit_check(&c.cfg, &spec, &serr) < 0) {
            r = tm_cli_spec_error(c.cmd, &serr);
            tm_cli_common_release(&c);
            return r;
        }
    }

    PGconn *conn = tm_cli_connect_db(&c);
    if (!conn) {
        tm_cli_common_release(&c);
        return TM_EXIT_FAIL;
    }
    /* Check the pool and model against the pools the database knows, and
     * that some pool can hold the job at all. */
    const char *pool = spec.pool, *model = spec.gpu_model;
    char gpus_s[24], milli_s[24], nodes_s[24];
    snprintf(gpus_s, sizeof(gpus_s), "%d", spec.gpus);
    snprintf(milli_s, sizeof(milli_s), "%d", spec.gpu_milli);
    snprintf(nodes_s, sizeof(nodes_s), "%d", spec.nodes);
    const char *chk[2] = {pool, model};
    PGresult *res = PQexecParams(conn,
                                 "SELECT (SELECT count(*) FROM pools WHERE $1::text IS NULL OR name = $1),"
                                 " (SELECT count(*) FROM pools WHERE $2::text IS NULL"
                                 "   OR gpu_model = ANY (string_to_array($2, '|'))),"
                                 " (SELECT coalesce(max(gpus_per_node), 0) FROM pools"
                                 "   WHERE ($1::text IS NULL OR name = $1) AND ($2::text IS NULL"
                                 "   OR gpu_model = ANY (string_to_array($2, '|')))),"
                                 " (SELECT string_agg(DISTINCT gpu_model, ', ') FROM pools),"
                                 " (SELECT string_agg(name, ', ' ORDER BY name) FROM pools)",
                                 2, NULL, chk, NULL, NULL, 0);
    if (PQresultStatus(res) != PGRES_TUPLES_OK) {
        fprintf(stderr, "tarmac submit: could not check pools: %s", PQresultErrorMessage(res));
        rc = TM_EXIT_FAIL;
        goto out;
    }
    if (pool && strtol(PQgetvalue(res, 0, 0), NULL, 10) == 0) {
        rc = tm_cli_usage_error(c.cmd, "--pool: unknown pool \"%s\" (known: %s)", pool, PQgetvalue(res, 0, 4));
        goto out;
    }
    if (model && strtol(PQgetvalue(res, 0, 1), NULL, 10) == 0) {
        rc = tm_cli_usage_error(c.cmd, "--gpu-model: no pool offers \"%s\" (known: %s)", model, PQgetvalue(res, 0, 3));
        goto out;
    }
    if (spec.gpus > strtol(PQgetvalue(res, 0, 2), NULL, 10)) {
        rc = tm_cli_usage_error(c.cmd, "--gpus: %d GPUs per node is more than any matching pool offers (%s)",
                         spec.gpus, PQgetvalue(res, 0, 2));
        goto out;
    }
    PQclear(res);

    char cpu_s[24], mem_s[24], prio_s[24], est_s[24], run_s[24], dl_s[24], now_s[24], count_s[24];
    int64_t now = tm_wall_ms();
    snprintf(cpu_s, sizeof(cpu_s), "%" PRId64, spec.cpu_milli);
    snprintf(mem_s, sizeof(mem_s), "%" PRId64, spec.memory_mib);
    snprintf(prio_s, sizeof(prio_s), "%d", spec.priority);
    snprintf(est_s, sizeof(est_s), "%" PRId64, spec.runtime_estimate_ms);
    snprintf(run_s, sizeof(run_s), "%" PRId64, spec.sim_runtime_ms);
    snprintf(dl_s, sizeof(dl_s), "%" PRId64, spec.deadline_ms ? now + spec.deadline_ms : 0);
    snprintf(now_s, sizeof(now_s), "%" PRId64, now);
    snprintf(count_s, sizeof(count_s), "%ld", count);
    const char *params[] = {spec.team, spec.name, spec.command, gpus_s, milli_s, nodes_s, cpu_s,
                            mem_s, model, pool, spec.klass, prio_s, spec.preemptible ? "t" : "f",
                            spec.checkpointable ? "t" : "f", est_s, run_s, dl_s, now_s, count_s};
    res = PQexecParams(conn,
                       "INSERT INTO jobs (team, name, command, gpus, gpu_milli, nodes, cpu_milli,"
                       " memory_mib, gpu_model, pool, class, priority, preemptible, checkpointable,"
                       " runtime_estimate_ms, sim_runtime_ms, deadline_ms, submitted_ms)"
                       " SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14,"
                       " nullif($15::bigint, 0), nullif($16::bigint, 0), nullif($17::bigint, 0), $18"
                       " FROM generate_series(1, $19::int) RETURNING id, team, gpus, gpu_milli, class, preemptible, state",
                       19, NULL, params, NULL, NULL, 0);
    if (PQresultStatus(res) != PGRES_TUPLES_OK) {
        fprintf(stderr, "tarmac submit: could not queue job: %s", PQresultErrorMessage(res));
        rc = TM_EXIT_FAIL;
        goto out;
    }
    print_result(res, c.json);
out:
    PQclear(res);
    PQfinish(conn);
    tm_cli_common_release(&c);
    return rc;
}

/* ---- listings ------------------------------------------------------------ */

static int listing_main(int argc, char **argv, const char *cmd, const char *help,
                        int (*run)(struct tm_cli_common *c, const char *filter, long limit, bool all))
{
    enum { O_FILTER = 1, O_LIMIT, O_ALL };
    static const struct option opts[] = {
        TM_CLI_DB_OPTIONS,
        {"state", required_argument, NULL, O_FILTER}, {"subject", required_argument, NULL, O_FILTER},
        {"limit", required_argument, NULL, O_LIMIT}, {"all", no_argument, NULL, O_ALL}, {0},
    };
    struct tm_cli_common c = {.cmd = cmd};
    const char *filter = NULL;
    long limit = 100;
    bool all = false;
    int opt, r;

    optind = 1;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        switch (opt) {
        case TM_CLI_OPT_HELP:
        case 'h':
            printf("%s\nOptions:\n"
                   "      --limit N            at most N rows (default 100, max 10000)\n%s",
                   help, tm_cli_db_help);
            return TM_EXIT_OK;
        case O_FILTER: filter = optarg; break;
        case O_ALL: all = true; break;
        case O_LIMIT:
            if (!tm_cli_parse_long(optarg, 1, 10000, &limit))
                return tm_cli_usage_error(cmd, "--limit: must be a whole number from 1 to 10000, not \"%s\"", optarg);
            break;
        default:
            r = tm_cli_common_opt(&c, opt, optarg, argv);
            if (r > 1)
                return r;
        }
    }
    if (optind < argc)
        return tm_cli_usage_error(cmd, "unexpected argument \"%s\"", argv[optind]);
    r = run(&c, filter, limit, all);
    tm_cli_common_release(&c);
    return r;
}

static int jobs_run(struct tm_cli_common *c, const char *state, long limit, bool all)
{
    char lim[24];
    if (state && tm_job_state_parse(state) < 0)
        return tm_cli_usage_error(c->cmd, "--state: must be queued, running, succeeded, failed, preempted or cancelled, not \"%s\"", state);
    snprintf(lim, sizeof(lim), "%ld", limit);
    const char *p[2] = {state, lim};
    return run_listing(c,
                       "SELECT id, team, name, state, gpus, gpu_milli, nodes, coalesce(gpu_model, '') AS gpu_model,"
                       " class, preemptible, attempts, node_id, state_reason AS reason"
                       " FROM jobs WHERE ($1::text IS NULL OR state = $1) ORDER BY id DESC LIMIT $2",
                       2, p);
}

int tm_cli_jobs(int argc, char **argv)
{
    return listing_main(argc, argv, "db jobs",
                        "Usage: tarmac db jobs [--state STATE] [options]\n\nList jobs, newest first.\n"
                        "      --state STATE        queued|running|succeeded|failed|preempted|cancelled\n",
                        jobs_run);
}

static int nodes_run(struct tm_cli_common *c, const char *state, long limit, bool all)
{
    char lim[24];
    if (state && tm_node_state_parse(state) < 0)
        return tm_cli_usage_error(c->cmd, "--state: not a node state: \"%s\"", state);
    snprintf(lim, sizeof(lim), "%ld", limit);
    const char *p[3] = {state, lim, all ? "t" : "f"};
    return run_listing(c,
                       "SELECT id, pool, state, coalesce(instance_id, '') AS instance, instance_type AS type,"
                       " zone, gpus, gpu_model, capacity_type AS capacity,"
                       " (SELECT count(*) FROM job_allocations a WHERE a.node_id = nodes.id) AS jobs,"
                       " round(price_uusd_per_hour / 1e6, 4) AS usd_per_hour, state_reason AS reason"
                       " FROM nodes WHERE ($1::text IS NULL OR state = $1)"
                       " AND ($3::boolean OR $1::text IS NOT NULL OR state NOT IN ('terminated', 'interrupted'))"
                       " ORDER BY id DESC LIMIT $2",
                       3, p);
}

int tm_cli_nodes(int argc, char **argv)
{
    return listing_main(argc, argv, "db nodes",
                        "Usage: tarmac db nodes [--state STATE] [--all] [options]\n\n"
                        "List live nodes (--all: terminated ones too), newest first.\n"
                        "      --state STATE        requested|booting|ready|draining|terminating|terminated|interrupted\n"
                        "      --all                include terminated and interrupted nodes\n",
                        nodes_run);
}

static int pools_run(struct tm_cli_common *c, const char *unused, long limit, bool all)
{
    char lim[24];
    snprintf(lim, sizeof(lim), "%ld", limit);
    const char *p[1] = {lim};
    return run_listing(c,
                       "SELECT name, provider, gpu_model, gpus_per_node, capacity_type AS capacity,"
                       " min_nodes, max_nodes, idle_grace_ms / 1000 AS idle_grace_s,"
                       " (SELECT count(*) FROM nodes n WHERE n.pool = pools.name"
                       "   AND n.state NOT IN ('terminated', 'interrupted')) AS live_nodes,"
                       " (SELECT count(*) FROM jobs j WHERE j.state = 'queued'"
                       "   AND (j.pool = pools.name OR j.pool IS NULL)) AS queued_jobs"
                       " FROM pools ORDER BY name LIMIT $1",
                       1, p);
}

int tm_cli_pools(int argc, char **argv)
{
    return listing_main(argc, argv, "db pools", "Usage: tarmac db pools [options]\n\nList pools.\n", pools_run);
}

static int decisions_run(struct tm_cli_common *c, const char *subject, long limit, bool all)
{
    char lim[24], kind[16] = "", id[64] = "";
    if (subject) {
        const char *colon = strchr(subject, ':');
        if (!colon || colon == subject || !colon[1] || (size_t)(colon - subject) >= sizeof(kind))
            return tm_cli_usage_error(c->cmd, "--subject: must be KIND:ID such as job:42 or node:7, not \"%s\"", subject);
        memcpy(kind, subject, (size_t)(colon - subject));
        snprintf(id, sizeof(id), "%s", colon + 1);
    }
    snprintf(lim, sizeof(lim), "%ld", limit);
    const char *p[3] = {subject ? kind : NULL, subject ? id : NULL, lim};
    return run_listing(c,
                       "SELECT * FROM (SELECT id, to_char(to_timestamp(at_ms / 1000.0) AT TIME ZONE 'UTC',"
                       " 'YYYY-MM-DD\"T\"HH24:MI:SS') AS at, kind, subject_kind || ':' || subject_id AS subject,"
                       " reason, inputs FROM decisions"
                       " WHERE ($1::text IS NULL OR (subject_kind = $1 AND subject_id = $2))"
                       " ORDER BY id DESC LIMIT $3) d ORDER BY id",
                       3, p);
}

int tm_cli_decisions(int argc, char **argv)
{
    return listing_main(argc, argv, "db decisions",
                        "Usage: tarmac db decisions [--subject KIND:ID] [options]\n\n"
                        "Show the controller's decisions with their reasons, oldest of the last N first.\n"
                        "      --subject KIND:ID    only those about job:ID, node:ID, instance:ID, pool:NAME\n",
                        decisions_run);
}

static int summary_run(struct tm_cli_common *c, const char *unused, long limit, bool all)
{
    return run_listing(c,
                       "WITH t AS (SELECT coalesce(max(at_ms), 0) AS now FROM decisions),"
                       " billed AS (SELECT n.*, greatest(0, coalesce(n.terminated_ms, t.now) - n.billed_from_ms) AS ms"
                       "   FROM nodes n, t WHERE n.billed_from_ms IS NOT NULL)"
                       " SELECT (SELECT count(*) FROM jobs) AS jobs,"
                       " (SELECT count(*) FROM jobs WHERE state = 'succeeded') AS succeeded,"
                       " (SELECT count(*) FROM jobs WHERE state IN ('queued', 'running')) AS unfinished,"
                       " (SELECT count(*) FROM nodes) AS nodes_requested,"
                       " (SELECT count(*) FROM nodes WHERE ready_ms IS NOT NULL) AS nodes_ready,"
                       " (SELECT count(*) FROM decisions WHERE kind = 'terminate') AS nodes_released,"
                       " (SELECT count(*) FROM nodes WHERE state = 'interrupted') AS interrupted,"
                       " (SELECT count(*) FROM decisions WHERE kind = 'terminate_orphan') AS orphans,"
                       " round((SELECT coalesce(sum(ms * gpus), 0) FROM billed) / 3.6e6, 2) AS paid_gpu_hours,"
                       /* GPUs held: whole GPUs on every node of a gang, or the share. */
                       " round((SELECT coalesce(sum((finished_ms - started_ms)"
                       "   * CASE WHEN gpus > 0 THEN gpus * nodes ELSE gpu_milli / 1000.0 END), 0)"
                       "   FROM jobs WHERE state = 'succeeded') / 3.6e6, 2) AS used_gpu_hours,"
                       " round((SELECT coalesce(sum(ms::numeric * price_uusd_per_hour), 0) FROM billed) / 3.6e6 / 1e6, 2) AS dollars,"
                       " round((SELECT coalesce(sum(cents), 0) FROM spend) / 100.0, 2) AS ledger_dollars,"
                       " round(100.0 * (SELECT coalesce(sum(cents), 0) FROM spend WHERE kind = 'idle')"
                       "   / greatest((SELECT sum(cents) FROM spend), 1), 1) AS idle_percent,"
                       " round((SELECT avg(started_ms - submitted_ms) FROM jobs WHERE started_ms IS NOT NULL) / 1000.0, 1) AS mean_wait_s",
                       0, NULL);
}

int tm_cli_summary(int argc, char **argv)
{
    return listing_main(argc, argv, "db summary",
                        "Usage: tarmac db summary [options]\n\n"
                        "Totals: jobs, nodes, GPU-hours paid and used, dollars spent.\n",
                        summary_run);
}

/* ---- db ------------------------------------------------------------------ */

int tm_cli_db(int argc, char **argv)
{
    static const struct {
        const char *name;
        int (*run)(int argc, char **argv);
    } verbs[] = {
        {"submit", tm_cli_submit}, {"jobs", tm_cli_jobs}, {"nodes", tm_cli_nodes},
        {"pools", tm_cli_pools}, {"decisions", tm_cli_decisions}, {"summary", tm_cli_summary},
    };

    if (argc >= 2)
        for (size_t i = 0; i < sizeof(verbs) / sizeof(verbs[0]); i++)
            if (strcmp(argv[1], verbs[i].name) == 0)
                return verbs[i].run(argc - 1, argv + 1);
    if (argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        printf("Usage: tarmac db submit|jobs|nodes|pools|decisions|summary --config FILE [options]\n\n"
               "The same work as the commands of the same name, straight against PostgreSQL with\n"
               "--config/TARMAC_CONFIG or --database-url/TARMAC_DATABASE_URL instead of through\n"
               "the API: for operators, and for when the API is down.  No token, no roles: whoever\n"
               "can reach the database can do anything.  summary exists only here.\n");
        return TM_EXIT_OK;
    }
    if (argc >= 2)
        fprintf(stderr, "tarmac db: unrecognized command \"%s\"", argv[1]);
    else
        fprintf(stderr, "tarmac db: missing command");
    fprintf(stderr, " (valid: submit, jobs, nodes, pools, decisions, summary)\n");
    return TM_EXIT_USAGE;
}
