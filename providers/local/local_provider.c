/*
 * providers/local/local_provider.c: `kind: local` behind the provider ops
 * (see local_provider.h for what a node is and what each call does).
 *
 * Launch does its work inside the call (a few small files and one
 * uv_spawn, all local and quick) and queues its result; list and
 * terminate read and write the state folder when their turn comes.  A zero
 * timer delivers the queue on a later loop iteration, so no callback fires
 * inside a call, as provider.h requires.
 *
 * The state folder, not memory, is the truth: the provider keeps only the
 * uv_process_t of agents it started itself (so libuv reaps them), and a
 * controller restarted with the same state_dir finds every node it had.
 */
#include "providers/local/local_provider.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/config.h"
#include "core/err.h"
#include "core/log.h"
#include "providers/common/launch.h"
#include "providers/local/local_config.h"
#include "providers/local/local_state.h"

#define LOCAL_KILL_GRACE_MS 10000
#define LOCAL_LIST_TERMINATED_MS (3600 * 1000)
#define LOCAL_TYPES_MAX 64
#define LOCAL_LIST_MAX 4096

/* OP_FOUND and OP_MADE answer the launch engine (data is the launch). */
enum local_op_kind { OP_FOUND, OP_MADE, OP_TERMINATE, OP_LIST, OP_KIND_MAX };

struct local_op {
    struct local_op *next;
    enum local_op_kind kind;
    union {
        tm_done_cb done;
        tm_list_cb list;
    } cb;
    void *data;
    int status;                   /* found (1) or made (0, < 0), inside the call */
    struct tm_instance inst;      /* found or made */
    char arg[TM_ID_MAX];          /* terminate: instance id; list: cluster */
};

struct local_type {
    char name[TM_ID_MAX];
    char gpu_model[TM_ID_MAX];
    int gpus;
    int capacity;
    int64_t on_demand_uusd, spot_uusd;
};

struct local_proc {
    uv_process_t proc;            /* first member: the close callback frees it */
    struct local_provider *lp;
    struct local_proc *next, **pprev;
    char id[TM_ID_MAX];
};

struct local_provider {
    struct tm_provider base;
    uv_loop_t *loop;
    int64_t (*now_ms)(void *clock);
    void *clock;
    char name[TM_ID_MAX];
    char state_dir[256];
    char metadata[16];
    char metadata_url[256];
    char agent_args[512];
    double gpu_util;
    double gpu_busy_util; /* 0: none */
    struct local_type types[LOCAL_TYPES_MAX];
    size_t ntypes;
    uv_timer_t timer;
    struct local_op *head, **tail;
    struct local_proc *procs;
    bool closing;
    bool warned_bootstrap;        /* a launch without a bootstrap was logged */
    unsigned open_handles;
    struct tm_launch_env launch;  /* the engine's view: launches in flight, close */
};

static const struct tm_provider_ops local_ops;

static struct local_provider *impl(struct tm_provider *p) { return p->impl; }

static int64_t now(const struct local_provider *lp) { return lp->now_ms(lp->clock); }

static uint64_t launch_now(void *clock) { return (uint64_t)now(clock); }

static const struct local_type *type_find(const struct local_provider *lp, const char *name)
{
    for (size_t i = 0; name && i < lp->ntypes; i++)
        if (strcmp(lp->types[i].name, name) == 0)
            return &lp->types[i];
    return NULL;
}


/* ---- the queue ------------------------------------------------------------ */

static void on_timer(uv_timer_t *t);

static void push(struct local_provider *lp, struct local_op *op)
{
    op->next = NULL;
    *lp->tail = op;
    lp->tail = &op->next;
    if (!uv_is_active((uv_handle_t *)&lp->timer))
        uv_timer_start(&lp->timer, on_timer, 0, 0);
}

static struct local_op *op_new(enum local_op_kind kind, void *data)
{
    struct local_op *op = calloc(1, sizeof(*op));

    if (op) {
        op->kind = kind;
        op->data = data;
    }
    return op;
}

/* ---- launch --------------------------------------------------------------- */

/* One of our handles closed: the provider goes with the last, once closing. */
static void handle_closed(struct local_provider *lp)
{
    lp->open_handles--;
    if (lp->closing && lp->open_handles == 0)
        tm_launch_env_closed(&lp->launch);
}

static void on_proc_closed(uv_handle_t *h)
{
    struct local_proc *pr = (struct local_proc *)h;
    struct local_provider *lp = pr->lp;

    free(pr);
    handle_closed(lp);
}

static void proc_unlink_close(struct local_proc *pr)
{
    *pr->pprev = pr->next;
    if (pr->next)
        pr->next->pprev = pr->pprev;
    uv_close((uv_handle_t *)&pr->proc, on_proc_closed);
}

static void on_proc_exit(uv_process_t *p, int64_t status, int sig)
{
    struct local_proc *pr = (struct local_proc *)p;

    tm_log_info("local node agent exited", "instance=%s status=%lld signal=%d", pr->id,
                (long long)status, sig);
    proc_unlink_close(pr);
}

/* The environment of a node: the provider's variables and a few of the
 * controller's harmless ones, never its secrets. */
static int node_env(const struct local_provider *lp, const struct tm_local_record *rec,
                    const char *dir, char env[][TM_LOCAL_PATH_MAX + 64], size_t max, size_t *ret_n)
{
    static const char *const keep[] = {"PATH", "HOME", "LANG", "TMPDIR", "TZ"};
    char exe[TM_LOCAL_PATH_MAX];
    size_t exe_len = sizeof(exe), n = 0;
    int r;

    r = uv_exepath(exe, &exe_len);
    if (r < 0)
        return r;
    for (size_t i = 0; i < sizeof(keep) / sizeof(keep[0]) && n < max; i++) {
        const char *v = getenv(keep[i]);
        if (v && strlen(v) < TM_LOCAL_PATH_MAX)
            snprintf(env[n++], sizeof(env[0]), "%s=%s", keep[i], v);
    }
    if (n + 9 > max)
        return TM_EINVAL;
    snprintf(env[n++], sizeof(env[0]), "TARMAC_BIN=%s", exe);
    snprintf(env[n++], sizeof(env[0]), "TARMAC_AGENT_WORK_DIR=%s/work", dir);
    snprintf(env[n++], sizeof(env[0]), "TARMAC_GPU_FAKE=%s/gpus.json", dir);
    snprintf(env[n++], sizeof(env[0]), "TARMAC_METADATA=%s", lp->metadata);
    if (strcmp(lp->metadata, "local") == 0)
        snprintf(env[n++], sizeof(env[0]), "TARMAC_METADATA_URL=file://%s/notice.json", dir);
    else if (strcmp(lp->metadata, "none") == 0)
        snprintf(env[n++], sizeof(env[0]), "TARMAC_METADATA_URL=");
    else
        snprintf(env[n++], sizeof(env[0]), "TARMAC_METADATA_URL=%s/n/%lld", lp->metadata_url,
                 (long long)rec->inst.node_id);
    /* Without root the agents cannot switch users: say so (at create) and
     * let them run jobs as this user, as a laptop's local fleet must. */
    snprintf(env[n++], sizeof(env[0]), "TARMAC_AGENT_ARGS=%s%s", lp->agent_args,
             geteuid() == 0 ? "" : " --jobs-as-agent-user");
    /* Every node is this host, whatever metadata fake it polls: its jobs'
     * peers reach it on loopback (bootstrap-local.sh passes it before
     * agent_args, so an --advertise-addr there wins). */
    snprintf(env[n++], sizeof(env[0]), "TARMAC_ADVERTISE_ADDR=127.0.0.1");
    snprintf(env[n++], sizeof(env[0]), "TM_LOCAL_NODE_DIR=%s", dir);
    snprintf(env[n++], sizeof(env[0]), "TARMAC_NODE_ID=%lld", (long long)rec->inst.node_id);
    *ret_n = n;
    return 0;
}

/* agent.env: the same environment as a sourceable file, so an operator
 * (or a test) can restart a node's agent by hand:
 *   cd NODE_DIR && setsid sh -c '. ./agent.env && exec sh ./bootstrap.sh'
 * Values never hold a single quote (paths and flags the config checked). */
static int write_env_file(const char *dir, char env[][TM_LOCAL_PATH_MAX + 64], size_t n)
{
    char path[TM_LOCAL_PATH_MAX], text[16 * (TM_LOCAL_PATH_MAX + 80)];
    size_t len = 0;

    for (size_t i = 0; i < n; i++) {
        const char *eq = strchr(env[i], '=');
        int w;

        if (!eq || strchr(env[i], '\''))
            continue;
        w = snprintf(text + len, sizeof(text) - len, "export %.*s='%s'\n", (int)(eq - env[i]), env[i],
                     eq + 1);
        if (w < 0 || (size_t)w >= sizeof(text) - len)
            return TM_EINVAL;
        len += (size_t)w;
    }
    snprintf(path, sizeof(path), "%s/agent.env", dir);
    return tm_local_write_file(path, text, len, 0600);
}

static int spawn_node(struct local_provider *lp, struct tm_local_record *rec, const char *dir)
{
    char env[16][TM_LOCAL_PATH_MAX + 64], *envp[17], script[TM_LOCAL_PATH_MAX],
        logp[TM_LOCAL_PATH_MAX];
    char *args[] = {"/bin/sh", script, NULL};
    uv_stdio_container_t stdio[3];
    uv_process_options_t o = {0};
    struct local_proc *pr;
    size_t n = 0;
    int fd, r;

    r = node_env(lp, rec, dir, env, 16, &n);
    if (r < 0)
        return r;
    for (size_t i = 0; i < n; i++)
        envp[i] = env[i];
    envp[n] = NULL;
    r = write_env_file(dir, env, n);
    if (r < 0)
        return r;
    snprintf(script, sizeof(script), "%s/bootstrap.sh", dir);
    snprintf(logp, sizeof(logp), "%s/agent.log", dir);
    fd = open(logp, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0)
        return -errno;
    pr = calloc(1, sizeof(*pr));
    if (!pr) {
        close(fd);
        return TM_ENOMEM;
    }
    stdio[0].flags = UV_IGNORE;
    stdio[1].flags = UV_INHERIT_FD;
    stdio[1].data.fd = fd;
    stdio[2].flags = UV_INHERIT_FD;
    stdio[2].data.fd = fd;
    o.file = "/bin/sh";
    o.args = args;
    o.env = envp;
    o.cwd = dir;
    /* A session of its own: its own process group, and the node outlives
     * a controller restart as a cloud VM would. */
    o.flags = UV_PROCESS_DETACHED;
    o.stdio_count = 3;
    o.stdio = stdio;
    o.exit_cb = on_proc_exit;
    r = uv_spawn(lp->loop, &pr->proc, &o);
    close(fd);
    if (r < 0) {
        /* libuv wants even a failed spawn's handle closed. */
        pr->lp = lp;
        pr->pprev = &pr->next;
        lp->open_handles++;
        uv_close((uv_handle_t *)&pr->proc, on_proc_closed);
        return r;
    }
    pr->lp = lp;
    snprintf(pr->id, sizeof(pr->id), "%s", rec->inst.id);
    pr->next = lp->procs;
    pr->pprev = &lp->procs;
    if (lp->procs)
        lp->procs->pprev = &pr->next;
    lp->procs = pr;
    lp->open_handles++;
    rec->pid = pr->proc.pid;
    return 0;
}

static int mkdir_p(const char *path, mode_t mode)
{
    char buf[TM_LOCAL_PATH_MAX];
    size_t len = strlen(path);

    if (len >= sizeof(buf))
        return TM_EINVAL;
    memcpy(buf, path, len + 1);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(buf, mode) < 0 && errno != EEXIST)
            return -errno;
        *p = '/';
    }
    if (mkdir(buf, mode) < 0 && errno != EEXIST)
        return -errno;
    return 0;
}

/* Live instances of type, for its capacity. */
static int count_live(struct local_provider *lp, const char *type);

/* The node a token made, from its record: 1 (in *ret) or 0 (none). */
static int find_token(const struct local_provider *lp, int64_t node_id, const char *token,
                      struct tm_instance *ret)
{
    struct tm_local_record rec;
    char id[TM_ID_MAX];

    tm_local_instance_id(node_id, token, id, sizeof(id));
    if (tm_local_record_read(lp->state_dir, id, &rec) != 0 || strcmp(rec.inst.token, token) != 0)
        return 0;
    *ret = rec.inst;
    ret->state = rec.terminated_ms ? TM_INSTANCE_TERMINATED : TM_INSTANCE_RUNNING;
    return 1;
}

static int do_launch(struct local_provider *lp, const struct tm_launch_request *req,
                     struct tm_instance *ret)
{
    const struct local_type *ty = type_find(lp, req->instance_type);
    struct tm_local_record rec = {0};
    char id[TM_ID_MAX], dir[TM_LOCAL_DIR_MAX], path[TM_LOCAL_PATH_MAX];
    int r;

    /* Found again here too: a second launch of the token may have passed
     * its find before the first made the node. */
    if (find_token(lp, req->node_id, req->token, ret))
        return 0; /* the same token: the same node, nothing started */
    tm_local_instance_id(req->node_id, req->token, id, sizeof(id));
    if (!ty)
        return TM_ENOTFOUND;
    if (req->capacity == TM_CAPACITY_SPOT && ty->spot_uusd == 0)
        return TM_EQUOTA;
    if (ty->capacity > 0 && count_live(lp, ty->name) >= ty->capacity)
        return TM_EQUOTA;
    if (!req->bootstrap || req->bootstrap_len == 0) {
        if (lp->warned_bootstrap)
            return TM_EINVAL;
        lp->warned_bootstrap = true; /* once: the daemon retries every tick */
        tm_log_error("cannot launch a local node without a bootstrap",
                     "pool=%s node=%lld error=\"%s\"", req->pool, (long long)req->node_id,
                     "set the pool's bootstrap (config/bootstrap-local.sh)");
        return TM_EINVAL;
    }
    r = tm_local_path(lp->state_dir, id, NULL, dir, sizeof(dir));
    /* 0711 down to the agent's work folder: its jobs run under users of
     * their own (controller/agent/job_user.c), who pass through to their
     * folders and may list none; the files here are the owner's (0600). */
    if (r == 0)
        r = mkdir_p(dir, 0711);
    if (r == 0 && snprintf(path, sizeof(path), "%s/work", dir) < (int)sizeof(path))
        r = mkdir_p(path, 0711);
    if (r < 0)
        goto fail;
    /* The bootstrap carries the enrollment secret: owner only, never logged. */
    snprintf(path, sizeof(path), "%s/bootstrap.sh", dir);
    r = tm_local_write_file(path, req->bootstrap, req->bootstrap_len, 0600);
    if (r < 0)
        goto fail;
    snprintf(path, sizeof(path), "%s/gpus.json", dir);
    r = tm_local_write_gpus(path, req->node_id, ty->gpus, ty->gpu_model, lp->gpu_util,
                            lp->gpu_busy_util);
    if (r < 0)
        goto fail;
    snprintf(rec.inst.id, sizeof(rec.inst.id), "%s", id);
    snprintf(rec.inst.token, sizeof(rec.inst.token), "%s", req->token);
    snprintf(rec.inst.pool, sizeof(rec.inst.pool), "%s", req->pool);
    snprintf(rec.inst.instance_type, sizeof(rec.inst.instance_type), "%s", ty->name);
    snprintf(rec.inst.zone, sizeof(rec.inst.zone), "%s", req->zone && *req->zone ? req->zone : "local");
    snprintf(rec.cluster, sizeof(rec.cluster), "%s", req->cluster);
    rec.inst.node_id = req->node_id;
    rec.inst.capacity = req->capacity == TM_CAPACITY_SPOT ? TM_CAPACITY_SPOT : TM_CAPACITY_ON_DEMAND;
    rec.inst.launched_ms = now(lp);
    rec.inst.state = TM_INSTANCE_RUNNING;
    r = spawn_node(lp, &rec, dir);
    if (r < 0)
        goto fail;
    r = tm_local_record_write(lp->state_dir, &rec);
    if (r < 0)
        goto fail;
    tm_log_info("local node started", "instance=%s node=%lld pool=%s type=%s pid=%d", id,
                (long long)req->node_id, req->pool, ty->name, (int)rec.pid);
    *ret = rec.inst;
    return 0;
fail:
    tm_log_error("could not launch a local node", "instance=%s state_dir=\"%s\" error=\"%s\"", id,
                 lp->state_dir, tm_strerror(r));
    return r;
}

/* The engine's primitives: find and create do their work inside the call
 * (a few small files and one uv_spawn) and queue their answer.  One offer
 * (no pools: the request's zone), no shortage memory, and a refusal is the
 * launch's result. */
struct local_launch {
    char cluster[TM_ID_MAX];
};

static int local_launch_queue(struct tm_launch *l, enum local_op_kind kind, int status,
                              const struct tm_instance *inst)
{
    struct local_op *op = op_new(kind, l);

    if (!op)
        return TM_ENOMEM;
    op->status = status;
    if (inst)
        op->inst = *inst;
    push(l->env->provider, op);
    return 0;
}

static int local_launch_prepare(struct tm_launch *l, const struct tm_launch_request *req)
{
    struct local_launch *ll = l->priv;

    tm_id_copy(ll->cluster, req->cluster);
    return 0;
}

static int local_launch_find(struct tm_launch *l)
{
    struct tm_instance inst;
    int found = find_token(l->env->provider, l->node_id, l->token, &inst);

    return local_launch_queue(l, OP_FOUND, found, found ? &inst : NULL);
}

static int local_launch_create(struct tm_launch *l, size_t i)
{
    const struct local_launch *ll = l->priv;
    const struct tm_launch_request req = {
        .cluster = ll->cluster, .pool = l->pool, .node_id = l->node_id, .token = l->token,
        .instance_type = l->offers[i].type, .zone = l->offers[i].zone,
        .capacity = l->offers[i].capacity, .bootstrap = l->bootstrap,
        .bootstrap_len = l->bootstrap_len,
    };
    struct tm_instance inst;
    int r = do_launch(l->env->provider, &req, &inst);

    return local_launch_queue(l, OP_MADE, r, r == 0 ? &inst : NULL);
}

static const struct tm_launch_backend local_launch_backend = {
    .cloud = "local",
    .priv_size = sizeof(struct local_launch),
    .found_by = "its record",
    .prepare = local_launch_prepare,
    .find = local_launch_find,
    .create = local_launch_create,
};

static int local_launch(struct tm_provider *p, const struct tm_launch_request *req,
                        tm_launch_cb cb, void *data)
{
    struct tm_launch_request q;

    if (!req || !tm_id_fits(req->cluster))
        return TM_EINVAL;
    /* A request for either market launches on demand, as local always did. */
    q = *req;
    if (q.capacity != TM_CAPACITY_SPOT)
        q.capacity = TM_CAPACITY_ON_DEMAND;
    return tm_launch_start(&impl(p)->launch, &local_launch_backend, &q, cb, data);
}

/* ---- list and terminate ------------------------------------------------------ */

/* Bring rec up to date (terminate escalation, interruption, gone) and
 * write it back when it changed; fills *inst.  Returns whether to list it. */
static bool observe(struct local_provider *lp, struct tm_local_record *rec, struct tm_instance *inst)
{
    char dir[TM_LOCAL_DIR_MAX];
    int64_t t = now(lp), notice_ms = 0, deadline = 0;
    bool acked = false, changed = false;
    int live;

    tm_local_path(lp->state_dir, rec->inst.id, NULL, dir, sizeof(dir));
    if (!rec->terminated_ms &&
        tm_local_notice_read(lp->state_dir, rec->inst.id, &notice_ms, &deadline, &acked) == 0) {
        if (!rec->notice_ms) {
            rec->notice_ms = t;
            changed = true;
        }
        if (acked || tm_wall_ms() >= deadline) {
            /* The cloud takes its spot node back: no grace beyond the notice. */
            tm_local_signal_node(dir, SIGKILL);
            rec->interrupted = true;
            if (!rec->terminate_ms)
                rec->terminate_ms = t;
            changed = true;
        }
    }
    if (rec->terminate_ms && !rec->terminated_ms) {
        live = tm_local_signal_node(dir, 0);
        if (live == 0) {
            rec->terminated_ms = t;
            changed = true;
        } else if (live > 0 && t - rec->terminate_ms >= LOCAL_KILL_GRACE_MS) {
            tm_local_signal_node(dir, SIGKILL);
        }
    }
    if (changed)
        tm_local_record_write(lp->state_dir, rec);
    *inst = rec->inst;
    inst->interrupted = rec->interrupted;
    inst->notice_ms = rec->notice_ms;
    inst->state = rec->terminated_ms  ? TM_INSTANCE_TERMINATED
                  : rec->terminate_ms ? TM_INSTANCE_STOPPING
                                      : TM_INSTANCE_RUNNING;
    return !rec->terminated_ms || t - rec->terminated_ms < LOCAL_LIST_TERMINATED_MS;
}

/* Each record of the state folder, in name order; cb returns false to stop. */
static int each_record(struct local_provider *lp,
                       bool (*cb)(struct local_provider *lp, struct tm_local_record *rec, void *data),
                       void *data)
{
    char dir[TM_LOCAL_DIR_MAX];
    struct dirent **names = NULL;
    int n, r;

    r = tm_local_path(lp->state_dir, NULL, NULL, dir, sizeof(dir));
    if (r < 0)
        return r;
    n = scandir(dir, &names, NULL, alphasort);
    if (n < 0)
        return errno == ENOENT ? 0 : -errno;
    r = 0;
    for (int i = 0; i < n; i++) {
        struct tm_local_record rec;
        bool go = true;

        if (r == 0 && strncmp(names[i]->d_name, "local-", 6) == 0 &&
            tm_local_record_read(lp->state_dir, names[i]->d_name, &rec) == 0)
            go = cb(lp, &rec, data);
        free(names[i]);
        if (!go)
            r = 1;
    }
    free(names);
    return 0;
}

struct live_count {
    const char *type;
    int n;
};

static bool count_one(struct local_provider *lp, struct tm_local_record *rec, void *data)
{
    struct live_count *c = data;

    if (!rec->terminated_ms && strcmp(rec->inst.instance_type, c->type) == 0)
        c->n++;
    return true;
}

static int count_live(struct local_provider *lp, const char *type)
{
    struct live_count c = {.type = type};

    each_record(lp, count_one, &c);
    return c.n;
}

struct listing {
    const char *cluster;
    struct tm_instance *items;
    size_t n, cap;
    int err;
};

static bool list_one(struct local_provider *lp, struct tm_local_record *rec, void *data)
{
    struct listing *l = data;
    struct tm_instance inst;

    if (strcmp(rec->cluster, l->cluster) != 0 || !observe(lp, rec, &inst))
        return true;
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 16;
        struct tm_instance *items = cap <= LOCAL_LIST_MAX ? realloc(l->items, cap * sizeof(*items)) : NULL;

        if (!items) {
            l->err = TM_ENOMEM;
            return false;
        }
        l->items = items;
        l->cap = cap;
    }
    l->items[l->n++] = inst;
    return true;
}

static void run_list(struct local_provider *lp, struct local_op *op)
{
    struct listing l = {.cluster = op->arg};
    int r = each_record(lp, list_one, &l);

    if (r == 0)
        r = l.err;
    op->cb.list(r, r == 0 ? l.items : NULL, r == 0 ? l.n : 0, op->data);
    free(l.items);
}

static void run_terminate(struct local_provider *lp, struct local_op *op)
{
    struct tm_local_record rec;
    char dir[TM_LOCAL_DIR_MAX];
    struct tm_instance inst;
    int r = tm_local_record_read(lp->state_dir, op->arg, &rec);

    if (r == -ENOENT || r == TM_EBADREPLY) {
        op->cb.done(TM_ENOTFOUND, op->data);
        return;
    }
    if (r < 0) {
        op->cb.done(r, op->data);
        return;
    }
    if (!rec.terminate_ms && !rec.terminated_ms) {
        rec.terminate_ms = now(lp);
        tm_local_path(lp->state_dir, rec.inst.id, NULL, dir, sizeof(dir));
        tm_local_signal_node(dir, SIGTERM);
        r = tm_local_record_write(lp->state_dir, &rec);
        tm_log_info("local node stopping", "instance=%s node=%lld", rec.inst.id,
                    (long long)rec.inst.node_id);
    }
    observe(lp, &rec, &inst);
    op->cb.done(r, op->data);
}

static int local_terminate(struct tm_provider *p, const char *instance_id, tm_done_cb cb, void *data)
{
    struct local_provider *lp = impl(p);
    struct local_op *op;

    if (!tm_id_fits(instance_id) || !cb || strchr(instance_id, '/') || instance_id[0] == '.')
        return TM_EINVAL;
    if (lp->closing)
        return TM_ECANCELED;
    op = op_new(OP_TERMINATE, data);
    if (!op)
        return TM_ENOMEM;
    op->cb.done = cb;
    snprintf(op->arg, sizeof(op->arg), "%s", instance_id);
    push(lp, op);
    return 0;
}

static int local_list(struct tm_provider *p, const char *cluster, tm_list_cb cb, void *data)
{
    struct local_provider *lp = impl(p);
    struct local_op *op;

    if (!tm_id_fits(cluster) || !cb)
        return TM_EINVAL;
    if (lp->closing)
        return TM_ECANCELED;
    op = op_new(OP_LIST, data);
    if (!op)
        return TM_ENOMEM;
    op->cb.list = cb;
    snprintf(op->arg, sizeof(op->arg), "%s", cluster);
    push(lp, op);
    return 0;
}

static int local_price(struct tm_provider *p, const char *instance_type, const char *zone,
                       enum tm_capacity_type capacity, int64_t *ret)
{
    const struct local_type *ty = type_find(impl(p), instance_type);

    if (!ty || (capacity == TM_CAPACITY_SPOT && ty->spot_uusd == 0))
        return TM_ENOTFOUND;
    *ret = capacity == TM_CAPACITY_SPOT ? ty->spot_uusd : ty->on_demand_uusd;
    return 0;
}

/* ---- the timer and closing ------------------------------------------------ */

static void on_timer_closed(uv_handle_t *h)
{
    handle_closed(h->data);
}

static void on_timer(uv_timer_t *t)
{
    struct local_provider *lp = t->data;
    struct local_op *batch = lp->head;

    lp->head = NULL;
    lp->tail = &lp->head;
    while (batch) {
        struct local_op *op = batch;

        batch = op->next;
        if (op->kind == OP_FOUND) {
            tm_launch_found(op->data, lp->closing ? TM_ECANCELED : 0,
                            op->status > 0 ? &op->inst : NULL);
        } else if (op->kind == OP_MADE) {
            tm_launch_made(op->data, op->status == 0 ? TM_LAUNCH_OK : TM_LAUNCH_FATAL,
                           lp->closing ? TM_ECANCELED : op->status, &op->inst, NULL);
        } else if (lp->closing) {
            if (op->kind == OP_TERMINATE)
                op->cb.done(TM_ECANCELED, op->data);
            else
                op->cb.list(TM_ECANCELED, NULL, 0, op->data);
        } else if (op->kind == OP_TERMINATE) {
            run_terminate(lp, op);
        } else {
            run_list(lp, op);
        }
        free(op);
    }
    if (lp->closing && !uv_is_closing((uv_handle_t *)&lp->timer)) {
        /* The agents keep running, as VMs do when their controller stops;
         * only our handles on them go. */
        while (lp->procs)
            proc_unlink_close(lp->procs);
        uv_close((uv_handle_t *)&lp->timer, on_timer_closed);
    }
}

static void local_close(struct tm_provider *p, void (*done)(void *data), void *data)
{
    struct local_provider *lp = impl(p);

    if (tm_launch_env_close(&lp->launch, done, data))
        uv_timer_start(&lp->timer, on_timer, 0, 0);
}

static const struct tm_provider_ops local_ops = {
    .name = "local",
    .launch = local_launch,
    .terminate = local_terminate,
    .list = local_list,
    .price = local_price,
    .close = local_close,
};

int tm_local_provider_create(uv_loop_t *loop, const struct tm_config_provider *p,
                             int64_t (*now_ms)(void *clock), void *clock,
                             struct tm_provider **ret)
{
    struct local_provider *lp;
    const struct tm_config_local *l = p ? tm_local_config(p) : NULL;
    char nodes[TM_LOCAL_PATH_MAX];
    int r;

    if (!loop || !l || !l->state_dir || !now_ms || !ret || p->ntypes > LOCAL_TYPES_MAX ||
        strlen(l->state_dir) >= sizeof(lp->state_dir) ||
        (l->metadata_url && strlen(l->metadata_url) >= sizeof(lp->metadata_url)) ||
        (l->agent_args && strlen(l->agent_args) >= sizeof(lp->agent_args)))
        return TM_EINVAL;
    lp = calloc(1, sizeof(*lp));
    if (!lp)
        return TM_ENOMEM;
    lp->base.ops = &local_ops;
    lp->base.impl = lp;
    lp->loop = loop;
    lp->now_ms = now_ms;
    lp->clock = clock;
    tm_id_copy(lp->name, p->name);
    snprintf(lp->state_dir, sizeof(lp->state_dir), "%s", l->state_dir);
    snprintf(lp->metadata, sizeof(lp->metadata), "%s", l->metadata ? l->metadata : "local");
    snprintf(lp->metadata_url, sizeof(lp->metadata_url), "%s", l->metadata_url ? l->metadata_url : "");
    snprintf(lp->agent_args, sizeof(lp->agent_args), "%s", l->agent_args ? l->agent_args : "");
    lp->gpu_util = l->gpu_util_percent;
    lp->gpu_busy_util = l->gpu_busy_util_percent;
    for (size_t i = 0; i < p->ntypes; i++) {
        struct local_type *t = &lp->types[lp->ntypes];

        if (!tm_id_fits(p->types[i].name) || !tm_id_fits(p->types[i].gpu_model))
            continue;
        snprintf(t->name, sizeof(t->name), "%s", p->types[i].name);
        snprintf(t->gpu_model, sizeof(t->gpu_model), "%s", p->types[i].gpu_model);
        t->gpus = p->types[i].gpus;
        t->capacity = p->types[i].capacity;
        t->on_demand_uusd = p->types[i].on_demand_uusd_per_hour;
        t->spot_uusd = p->types[i].spot_uusd_per_hour;
        lp->ntypes++;
    }
    lp->tail = &lp->head;
    lp->launch = (struct tm_launch_env){
        .now_ms = launch_now, .clock = lp, .name = lp->name, .closing = &lp->closing,
        .free_provider = free, .provider = lp,
    };
    if (geteuid() != 0)
        tm_log_warn("the local provider does not run as root: its nodes run jobs as this user, "
                    "not isolated from the agents, from each other or from this process",
                    "provider=%s uid=%u", p->name, (unsigned)geteuid());
    r = tm_local_path(lp->state_dir, NULL, NULL, nodes, sizeof(nodes));
    if (r == 0)
        r = mkdir_p(nodes, 0711);
    if (r < 0) {
        tm_log_error("cannot use the local provider's state folder",
                     "provider=%s state_dir=\"%s\" error=\"%s\"", p->name, l->state_dir,
                     tm_strerror(r));
        free(lp);
        return r;
    }
    r = uv_timer_init(loop, &lp->timer);
    if (r < 0) {
        free(lp);
        return r;
    }
    lp->timer.data = lp;
    lp->open_handles = 1;
    *ret = &lp->base;
    return 0;
}

/* ---- on demand interruption ------------------------------------------------ */

struct find_node {
    int64_t node_id;
    char id[TM_ID_MAX];
};

static bool find_one(struct local_provider *lp, struct tm_local_record *rec, void *data)
{
    struct find_node *f = data;

    if (rec->inst.node_id == f->node_id && !rec->terminated_ms) {
        snprintf(f->id, sizeof(f->id), "%s", rec->inst.id);
        return false;
    }
    return true;
}

int tm_local_interrupt(const char *state_dir, int64_t node_id, int64_t now_ms, int64_t deadline_ms,
                       char *err, size_t errlen)
{
    /* each_record() needs only the state folder of a provider. */
    struct local_provider lp = {0};
    struct find_node f = {.node_id = node_id};
    int r;

    if (!state_dir || strlen(state_dir) >= sizeof(lp.state_dir)) {
        snprintf(err, errlen, "state_dir: missing or too long");
        return TM_EINVAL;
    }
    snprintf(lp.state_dir, sizeof(lp.state_dir), "%s", state_dir);
    r = each_record(&lp, find_one, &f);
    if (r < 0) {
        snprintf(err, errlen, "%s: could not read: %s", state_dir, tm_strerror(r));
        return r;
    }
    if (!f.id[0]) {
        snprintf(err, errlen, "node %lld: no live local node in %s", (long long)node_id, state_dir);
        return TM_ENOTFOUND;
    }
    r = tm_local_notice_write(state_dir, f.id, "terminate", now_ms, deadline_ms);
    if (r < 0)
        snprintf(err, errlen, "%s: could not write the notice: %s", f.id, tm_strerror(r));
    return r;
}
