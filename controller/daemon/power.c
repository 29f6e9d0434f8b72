/*
 * controller/daemon/power.c: power saving's commands and records
 * (power.h).  Each op is one chain on the loop:
 *
 *   SUSPEND  on -> suspending (guarded: no job on it), run suspend_command;
 *            exit 0: suspended at the suspended rate; else back on
 *   RESUME   suspended -> resuming at the full rate, run resume_command;
 *            exit 0: a decision, the node waits for its agent; else back
 *            to suspended
 *   AWAKE, TIMEOUT, STUCK: one write, no command
 *
 * The command is the pool's argv with the node's id and address appended,
 * and TARMAC_NODE_ID, TARMAC_NODE_ADDRESS, TARMAC_POOL and TARMAC_POWER
 * (suspend or resume) in its environment; its output is not read (it may
 * print what it was given, a BMC password among it), so a decision names
 * only the program and how it ended.  A failure holds the node off for
 * max(command_timeout, 10 s) doubled per failure in a row, at most an
 * hour.
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "controller/daemon/power.h"
#include "core/err.h"
#include "core/log.h"

extern char **environ;

#define POWER_BACKOFF_MIN_MS 10000
#define POWER_BACKOFF_MAX_MS 3600000

struct tm_power_node {
    int64_t node_id;
    bool running;
    int failures;
    int64_t until_ms;
};

struct power_run {
    struct tm_power *pw;
    struct power_run *next, **pprev; /* pw->runs: commands whose handles are open */
    struct tm_power_op op;
    char address[256];
    uv_process_t proc;
    uv_timer_t timer;
    int open;                 /* handles not yet closed */
    bool spawned, timed_out, ended;
    int64_t exit_status;
    int term_signal;
    int64_t started_ms;
    char result[160];
};

static const char power_sql[] =
    "SELECT tarmac_node_power($1, $2, $3, $4, $5, $6::bigint, $7::boolean, $8::boolean, $9, $10,"
    " $11::jsonb), coalesce((SELECT address FROM nodes WHERE id = $3), '')";

static int64_t now_ms(const struct tm_power *pw)
{
    return tm_clock_now_ms(pw->calls->clock);
}

static struct tm_power_node *node_of(struct tm_power *pw, int64_t id, bool add)
{
    for (size_t i = 0; i < pw->nnodes; i++)
        if (pw->nodes[i].node_id == id)
            return &pw->nodes[i];
    if (!add)
        return NULL;
    if (pw->nnodes == pw->cap) {
        size_t cap = pw->cap ? pw->cap * 2 : 8;
        struct tm_power_node *n = realloc(pw->nodes, cap * sizeof(*n));
        if (!n)
            return NULL;
        pw->nodes = n;
        pw->cap = cap;
    }
    pw->nodes[pw->nnodes] = (struct tm_power_node){.node_id = id};
    return &pw->nodes[pw->nnodes++];
}

size_t tm_power_holds(struct tm_power *pw, const struct tm_power_hold **ret)
{
    struct tm_power_hold *copy = realloc(pw->copy, (pw->nnodes + 1) * sizeof(*copy));

    *ret = NULL;
    if (!copy)
        return 0;
    pw->copy = copy;
    for (size_t i = 0; i < pw->nnodes; i++)
        copy[i] = (struct tm_power_hold){.node_id = pw->nodes[i].node_id, .running = pw->nodes[i].running,
                                         .until_ms = pw->nodes[i].until_ms};
    *ret = copy;
    return pw->nnodes;
}

static const struct tm_config_pool *run_pool(const struct power_run *run)
{
    const struct tm_config *cfg = run->pw->calls->cfg;
    return run->op.pool >= 0 && (size_t)run->op.pool < cfg->npools ? &cfg->pools[run->op.pool] : NULL;
}

static void run_free(struct power_run *run)
{
    struct tm_power_node *pn = node_of(run->pw, run->op.node_id, false);
    if (pn)
        pn->running = false;
    free(run);
}

/* ---- the writes ---------------------------------------------------------- */

typedef void (*written_cb)(struct power_run *run, bool changed, const char *address);

struct power_write {
    struct power_run *run;
    struct tm_call *call;
    written_cb next;
};

static void on_written(const struct tm_pg_reply *reply, void *data)
{
    struct power_write *w = data;
    bool changed = false;
    const char *address = "";

    if (reply->status == 0 && reply->nresults > 0 && PQntuples(reply->results[0]) == 1) {
        changed = PQgetvalue(reply->results[0], 0, 0)[0] == 't';
        address = PQgetvalue(reply->results[0], 0, 1);
    } else if (reply->status != TM_ECANCELED) {
        tm_log_warn("could not record a power change, the next pass settles it", "node=%" PRId64 " error=\"%s\"",
                    w->run->op.node_id, reply->error ? reply->error : tm_strerror(reply->status));
    }
    w->next(w->run, changed, address);
    tm_call_done(w->call);
    free(w);
}

/* One tarmac_node_power; next runs with its answer (false on any error). */
static void power_write(struct power_run *run, const char *from, const char *to, int64_t price, bool idle,
                        bool unreachable, const char *kind, const char *reason, written_cb next)
{
    struct tm_power *pw = run->pw;
    char epoch[24], now[24], node[24], pr[24];
    cJSON *in = cJSON_CreateObject();
    const struct tm_config_pool *pool = run_pool(run);

    snprintf(epoch, sizeof(epoch), "%" PRId64, *pw->calls->epoch);
    snprintf(now, sizeof(now), "%" PRId64, now_ms(pw));
    snprintf(node, sizeof(node), "%" PRId64, run->op.node_id);
    snprintf(pr, sizeof(pr), "%" PRId64, price);
    if (in) {
        cJSON_AddStringToObject(in, "pool", pool ? pool->name : "");
        if (run->op.job_id > 0)
            cJSON_AddNumberToObject(in, "job", (double)run->op.job_id);
        if (run->spawned || run->result[0]) {
            const char *prog = run->op.kind == TM_POWER_OP_SUSPEND ? pool->suspend_command[0]
                                                                   : pool->resume_command[0];
            cJSON_AddStringToObject(in, "command", prog);
            cJSON_AddStringToObject(in, "result", run->result);
        }
        if (price >= 0)
            cJSON_AddNumberToObject(in, "price_uusd_per_hour", (double)price);
    }
    char *inputs = in ? cJSON_PrintUnformatted(in) : NULL;
    cJSON_Delete(in);
    const char *params[] = {epoch, now, node, from, to, price >= 0 ? pr : NULL, idle ? "true" : "false",
                            unreachable ? "true" : "false", kind, reason, inputs ? inputs : "{}"};
    struct power_write *w = calloc(1, sizeof(*w));
    struct tm_call *call = w ? tm_calls_new(pw->calls, -1, run->op.node_id) : NULL;
    int r = TM_ENOMEM;
    if (w && call && *pw->calls->pool) {
        w->run = run;
        w->call = call;
        w->next = next;
        r = tm_pg_pool_query(*pw->calls->pool, power_sql, 11, params, on_written, w);
    }
    free(inputs);
    if (r < 0) {
        if (call)
            tm_call_done(call);
        free(w);
        tm_log_warn("could not send a power change, the next pass settles it", "node=%" PRId64 " error=%s",
                    run->op.node_id, tm_err_name(r));
        next(run, false, "");
    }
}

/* ---- the command --------------------------------------------------------- */

static void after_final(struct power_run *run, bool changed, const char *address)
{
    (void)changed;
    (void)address;
    run_free(run);
}

static void record_end(struct power_run *run)
{
    struct tm_power *pw = run->pw;
    const struct tm_config_pool *pool = run_pool(run);
    struct tm_power_node *pn = node_of(pw, run->op.node_id, false);
    bool ok = run->spawned && !run->timed_out && run->exit_status == 0 && run->term_signal == 0;
    bool suspend = run->op.kind == TM_POWER_OP_SUSPEND;
    char why[512];

    if (*pw->calls->closing || !pool) {
        run_free(run);
        return;
    }
    if (ok) {
        if (pn)
            pn->failures = 0;
        tm_log_info(suspend ? "node suspended" : "node resume command done", "node=%" PRId64 " pool=%s",
                    run->op.node_id, pool->name);
        if (suspend) {
            snprintf(why, sizeof(why), "suspend_command %s: the node is off, billed at the suspended rate",
                     run->result);
            power_write(run, "suspending", "suspended", pool->suspended_cost_uusd_per_node_hour, false, false,
                        "node_suspended", why, after_final);
        } else {
            snprintf(why, sizeof(why),
                     "resume_command %s: waiting up to the pool's resume_timeout of %" PRId64
                     " s for its agent",
                     run->result, pool->resume_timeout_ms / 1000);
            power_write(run, "resuming", "resuming", -1, false, false, "node_resume_command", why, after_final);
        }
        return;
    }
    int64_t backoff = pool->command_timeout_ms > POWER_BACKOFF_MIN_MS ? pool->command_timeout_ms
                                                                      : POWER_BACKOFF_MIN_MS;
    int failures = pn ? ++pn->failures : 1;
    for (int i = 1; i < failures && backoff < POWER_BACKOFF_MAX_MS; i++)
        backoff *= 2;
    if (backoff > POWER_BACKOFF_MAX_MS)
        backoff = POWER_BACKOFF_MAX_MS;
    if (pn)
        pn->until_ms = now_ms(pw) + backoff;
    tm_log_warn(suspend ? "suspend_command failed" : "resume_command failed",
                "node=%" PRId64 " pool=%s result=\"%s\" retry_after_s=%" PRId64, run->op.node_id, pool->name,
                run->result, backoff / 1000);
    snprintf(why, sizeof(why), "%s %s: the node stays %s; tried again in %" PRId64 " s at the earliest",
             suspend ? "suspend_command" : "resume_command", run->result, suspend ? "on" : "suspended",
             backoff / 1000);
    if (suspend)
        power_write(run, "suspending", "on", -1, false, false, "power_failed", why, after_final);
    else
        power_write(run, "resuming", "suspended", pool->suspended_cost_uusd_per_node_hour, false, false,
                    "power_failed", why, after_final);
}

static void on_handle_closed(uv_handle_t *h)
{
    struct power_run *run = h->data;
    if (--run->open > 0)
        return;
    run->pw->running--;
    *run->pprev = run->next;
    if (run->next)
        run->next->pprev = run->pprev;
    record_end(run);
}

static void finish(struct power_run *run)
{
    if (run->ended)
        return;
    run->ended = true;
    int64_t secs = (now_ms(run->pw) - run->started_ms) / 1000;
    if (run->timed_out)
        snprintf(run->result, sizeof(run->result), "killed at the pool's command_timeout of %" PRId64 " s",
                 run_pool(run) ? run_pool(run)->command_timeout_ms / 1000 : 0);
    else if (run->term_signal)
        snprintf(run->result, sizeof(run->result), "killed by signal %d after %" PRId64 " s", run->term_signal,
                 secs);
    else
        snprintf(run->result, sizeof(run->result), "exited %" PRId64 " after %" PRId64 " s", run->exit_status,
                 secs);
    uv_close((uv_handle_t *)&run->proc, on_handle_closed);
    uv_close((uv_handle_t *)&run->timer, on_handle_closed);
}

static void on_command_exit(uv_process_t *proc, int64_t status, int term_signal)
{
    struct power_run *run = proc->data;
    run->exit_status = status;
    run->term_signal = term_signal;
    finish(run);
}

static void on_timeout(uv_timer_t *t)
{
    struct power_run *run = t->data;
    /* The whole process group: a script's children (ipmitool, sleep) too. */
    run->timed_out = true;
    if (uv_kill(-run->proc.pid, SIGKILL) < 0)
        uv_process_kill(&run->proc, SIGKILL);
}

static int spawn_command(struct power_run *run, const char *address)
{
    struct tm_power *pw = run->pw;
    const struct tm_config_pool *pool = run_pool(run);
    bool suspend = run->op.kind == TM_POWER_OP_SUSPEND;
    char *const *cmd = suspend ? pool->suspend_command : pool->resume_command;
    size_t ncmd = suspend ? pool->nsuspend_command : pool->nresume_command;
    char id[24], env_id[48], env_addr[320], env_pool[128], env_power[32];
    size_t nenv = 0;
    int r;

    snprintf(id, sizeof(id), "%" PRId64, run->op.node_id);
    snprintf(run->address, sizeof(run->address), "%s", address);
    snprintf(env_id, sizeof(env_id), "TARMAC_NODE_ID=%s", id);
    snprintf(env_addr, sizeof(env_addr), "TARMAC_NODE_ADDRESS=%s", address);
    snprintf(env_pool, sizeof(env_pool), "TARMAC_POOL=%s", pool->name);
    snprintf(env_power, sizeof(env_power), "TARMAC_POWER=%s", suspend ? "suspend" : "resume");
    while (environ && environ[nenv])
        nenv++;
    char **args = calloc(ncmd + 3, sizeof(char *));
    char **env = calloc(nenv + 5, sizeof(char *));
    if (!args || !env) {
        free(args);
        free(env);
        return TM_ENOMEM;
    }
    for (size_t i = 0; i < ncmd; i++)
        args[i] = cmd[i];
    args[ncmd] = id;
    args[ncmd + 1] = run->address;
    size_t k = 0;
    for (size_t i = 0; i < nenv; i++)
        if (strncmp(environ[i], "TARMAC_", 7) != 0) /* the controller's own settings stay its own */
            env[k++] = environ[i];
    env[k++] = env_id;
    env[k++] = env_addr;
    env[k++] = env_pool;
    env[k++] = env_power;
    uv_stdio_container_t stdio[3] = {{.flags = UV_IGNORE}, {.flags = UV_IGNORE}, {.flags = UV_IGNORE}};
    uv_process_options_t o = {.file = args[0], .args = args, .env = env, .exit_cb = on_command_exit,
                              .flags = UV_PROCESS_DETACHED, .stdio_count = 3, .stdio = stdio};
    run->proc.data = run;
    run->timer.data = run;
    uv_timer_init(pw->loop, &run->timer);
    r = uv_spawn(pw->loop, &run->proc, &o);
    free(args);
    free(env);
    run->open = 2;
    pw->running++;
    run->next = pw->runs;
    run->pprev = &pw->runs;
    if (pw->runs)
        pw->runs->pprev = &run->next;
    pw->runs = run;
    run->started_ms = now_ms(pw);
    if (r < 0) {
        snprintf(run->result, sizeof(run->result), "could not start: %s", uv_strerror(r));
        run->ended = true;
        uv_close((uv_handle_t *)&run->proc, on_handle_closed);
        uv_close((uv_handle_t *)&run->timer, on_handle_closed);
        return 0;
    }
    run->spawned = true;
    uv_timer_start(&run->timer, on_timeout, (uint64_t)pool->command_timeout_ms, 0);
    return 0;
}

static void after_first(struct power_run *run, bool changed, const char *address)
{
    if (!changed || *run->pw->calls->closing) {
        /* The node moved on (a job came to it, another leader acted): nothing to run. */
        run_free(run);
        return;
    }
    if (spawn_command(run, address) < 0)
        run_free(run);
}

static void start_op(struct tm_power *pw, const struct tm_power_op *op)
{
    const struct tm_config *cfg = pw->calls->cfg;
    struct tm_power_node *pn = node_of(pw, op->node_id, true);
    if (!pn || pn->running || op->pool < 0 || (size_t)op->pool >= cfg->npools)
        return;
    const struct tm_config_pool *pool = &cfg->pools[op->pool];
    struct power_run *run = calloc(1, sizeof(*run));
    if (!run)
        return;
    run->pw = pw;
    run->op = *op;
    pn->running = true;
    switch (op->kind) {
    case TM_POWER_OP_SUSPEND:
        tm_log_info("suspending node", "node=%" PRId64 " pool=%s", op->node_id, pool->name);
        power_write(run, "on", "suspending", -1, false, false, "node_suspending", op->reason, after_first);
        break;
    case TM_POWER_OP_RESUME:
        tm_log_info("resuming node", "node=%" PRId64 " pool=%s job=%" PRId64, op->node_id, pool->name,
                    op->job_id);
        power_write(run, "suspended", "resuming", pool->cost_uusd_per_node_hour, true, false, "node_resuming",
                    op->reason, after_first);
        break;
    case TM_POWER_OP_AWAKE:
        power_write(run, "resuming", "on", -1, true, false, "node_resumed", op->reason, after_final);
        break;
    case TM_POWER_OP_TIMEOUT:
        tm_log_warn("resumed node never heartbeat", "node=%" PRId64 " pool=%s", op->node_id, pool->name);
        power_write(run, "resuming", "on", -1, false, true, "node_resume_timeout", op->reason, after_final);
        break;
    case TM_POWER_OP_STUCK:
        power_write(run, "suspending", "on", -1, false, false, "power_failed", op->reason, after_final);
        break;
    }
}

void tm_power_start(struct tm_power *pw, const struct tm_rc_plan *plan)
{
    if (*pw->calls->closing)
        return;
    for (size_t i = 0; i < plan->npower; i++)
        start_op(pw, &plan->power[i]);
}

void tm_power_close(struct tm_power *pw)
{
    for (struct power_run *run = pw->runs; run; run = run->next) {
        if (run->ended)
            continue;
        if (uv_kill(-run->proc.pid, SIGKILL) < 0)
            uv_process_kill(&run->proc, SIGKILL);
        run->timed_out = true;
        finish(run);
    }
}

void tm_power_release(struct tm_power *pw)
{
    free(pw->nodes);
    free(pw->copy);
    pw->nodes = NULL;
    pw->copy = NULL;
    pw->nnodes = pw->cap = 0;
}
