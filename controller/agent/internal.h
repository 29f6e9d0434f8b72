/*
 * controller/agent/internal.h: what agent.c (the controller side of the
 * loop), jobs.c (the processes) and cgroup.c share.  Not for other folders.
 */
#ifndef TM_AGENT_INTERNAL_H
#define TM_AGENT_INTERNAL_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>

#include <uv.h>

#include "controller/agent/agent.h"
#include "controller/agent/answer.h"
#include "controller/agent/gpu.h"
#include "controller/agent/state.h"
#include "controller/io/http_uv.h"

#define TM_AGENT_SAMPLE_CAP 2048   /* samples kept while the controller is away */
#define TM_AGENT_BATCH_MAX 512     /* samples per heartbeat: ~100 KB, well under the
                                    * API's default 256 KB body limit */
#define TM_AGENT_DONE_CAP 256      /* finished (job, attempt) pairs remembered */
/* The heartbeat period while a job waits at its gang's start barrier: the
 * members' starts are at most about this far apart. */
#define TM_AGENT_BARRIER_POLL_MS 200
/* Samples older than this are dropped, not sent: the controller refuses
 * samples older than its agent.sample_max_age (default 6 h), and one
 * refused sample would refuse the whole heartbeat. */
#define TM_AGENT_SAMPLE_MAX_AGE_MS (5 * 3600 * 1000LL)

struct tm_agent;
struct tm_md_watch;
struct tm_agent_shipper;

struct tm_agent_job {
    struct tm_agent_job *next;
    struct tm_agent *agent;
    int64_t job_id;
    int64_t attempt;
    int pid;                   /* also the process group (a new session) */
    uint64_t start_time;
    bool checkpointable;
    uint32_t gpu_mask;         /* the GPU indices it holds, bit i for index i (fake busy GPUs) */
    bool child;                /* spawned by this agent: proc is live */
    bool exited;
    bool start_reported;
    bool start_inflight;
    bool stale;                /* the controller refused the attempt (409) */
    bool fenced;               /* killed as stale by a returning agent (agent.c) */
    char stopping[16];         /* "" or the reason to report */
    /* Its gang's attempt stopped: the loop time (uv_now) at which it is
     * signalled, together with the other members (agent.c); 0: none. */
    uint64_t stop_due;
    int64_t log_dropped;
    int closing;               /* handles whose close callback is due */
    uv_process_t proc;
    uv_timer_t grace;
    bool grace_armed;
    /* Stopped, and its leader (the wrapper) exited while the rest of its
     * group still ran: how the leader ended, and until when the agent
     * waits for the group (the grace) before it reports the end. */
    bool leader_exited;
    int leader_status, leader_signal;
    uint64_t drain_until;
    uint32_t uid;              /* the job's own user, 0 when it runs as the agent's */
    int uid_lock;              /* the lock that holds uid for this job on this host, or -1 */
    uint32_t gid;
    char dir[PATH_MAX];        /* its folder and working directory */
    char log_path[PATH_MAX];
    char status_path[PATH_MAX];
    char env_file[PATH_MAX];   /* a container job's env file ("" for none) */
    char cgroup[PATH_MAX];     /* "" when not in a cgroup of its own */
    char *container_kill;      /* the filled --container-stop-template, or NULL */
};

struct tm_agent {
    uv_loop_t *loop;
    void (*job_gone)(struct tm_agent *ag); /* agent.c's, see tm_agent_job_gone() */
    struct tm_agent_options o;
    struct tm_http *http;
    char *token;
    char auth[700];
    char state_path[PATH_MAX];
    char jobs_dir[PATH_MAX];
    char env_dir[PATH_MAX];
    char **base_env;
    bool switch_users;         /* root: each host job under a user of its own */
    uint32_t uid_next;         /* where the search for a free job UID starts */
    char address[64];          /* sent at enrollment (address.h); "" none */
    char node_key[160];        /* --join: DIR/node_key, this machine's proof (join.c) */

    uv_timer_t hb_timer, sample_timer, tick_timer, enroll_timer;
    uv_timer_t stop_timer;           /* the soonest gang member's stop_due */
    uv_signal_t sigterm, sigint;
    bool started;              /* timers running (after enrollment) */
    bool shutting_down;
    bool terminated;           /* the controller answered 409 */
    int exit_code;

    struct tm_gpu_source *gpu;
    struct tm_gpu_reading last;      /* the latest reading: UUIDs for the env */
    struct tm_gpu_sample *ring;      /* TM_AGENT_SAMPLE_CAP entries */
    uint64_t ring_head, ring_tail;   /* sequence numbers: [head, tail) kept */
    uint64_t samples_dropped;
    bool gpu_error_said;
    /* The controller refused the samples' times (this node's clock is off
     * by more than agent.clock_skew): the next heartbeat goes without
     * samples, so that the node stays heard of. */
    bool hb_bare;
    bool clock_said;

    bool hb_inflight;
    uint64_t hb_sent_to;             /* ring_tail when the heartbeat left */
    int64_t backoff_ms;
    bool away_said, auth_said, answer_said;
    bool answered;                   /* an answer was applied since the agent started */
    bool returning;                  /* the controller was away: the next answer fences */

    struct tm_agent_job *jobs;
    struct tm_agent_report *reports;
    size_t nreports, reports_cap;
    bool report_inflight;
    uint64_t report_next_ms;
    int64_t report_backoff_ms;
    struct tm_agent_state_done done[TM_AGENT_DONE_CAP];
    size_t ndone, done_next;

    /* metadata notices */
    struct tm_md_watch *md_watch;
    bool notice_active;
    bool notice_acked;
    char notice_event[128];

    /* cgroup v2 */
    bool cg_ok;
    char cg_base[PATH_MAX];

    /* every job's output to the controller (log_ship.c) */
    struct tm_agent_shipper *shipper;
};

/* jobs.c */
int tm_agent_job_start(struct tm_agent *ag, const struct tm_agent_assignment *a);
void tm_agent_job_stop(struct tm_agent_job *j, int sig, const char *reason);
void tm_agent_jobs_tick(struct tm_agent *ag);
int tm_agent_jobs_adopt(struct tm_agent *ag, const struct tm_agent_state *st);
void tm_agent_jobs_close(struct tm_agent *ag);
size_t tm_agent_jobs_running(const struct tm_agent *ag);
struct tm_agent_job *tm_agent_job_find(struct tm_agent *ag, int64_t job_id, int64_t attempt);

/* jobs.c: a job's start told to the controller (retried by the tick). */
void tm_agent_report_start(struct tm_agent *ag, struct tm_agent_job *j);

/* reports.c: the state file, the attempts done here, the exit reports. */
void tm_agent_save_state(struct tm_agent *ag);
void tm_agent_add_report(struct tm_agent *ag, const struct tm_agent_report *r);
void tm_agent_send_reports(struct tm_agent *ag);
void tm_agent_remember_done(struct tm_agent *ag, int64_t job_id, int64_t attempt);
bool tm_agent_is_done(const struct tm_agent *ag, int64_t job_id, int64_t attempt);

/* agent.c's word that a job ended (ag->job_gone, set by agent.c, so that
 * jobs.c never calls into it): the node may now exit, or ack a notice. */
static inline void tm_agent_job_gone(struct tm_agent *ag)
{
    if (ag->job_gone)
        ag->job_gone(ag);
}

/* agent.c, for join.c: start the agent's work once it has its token
 * (begin), stop it with an exit code, keep the agent token in DIR/token,
 * and the enrollment timer's callback (a join retries on it). */
void tm_agent_begin(struct tm_agent *ag);
void tm_agent_stop(struct tm_agent *ag, int code);
int tm_agent_save_token(struct tm_agent *ag, const char *token);
void tm_agent_on_enroll_timer(uv_timer_t *t);

/* join.c: `--join` (docs/owned.md).  prepare reads or makes DIR/node_key
 * (before the loop runs); send posts the join with the hardware report
 * and, answered, begins; gpu_model is the model a GPU's name reports
 * ("NVIDIA H100 80GB HBM3": H100), pure. */
int tm_agent_join_prepare(struct tm_agent *ag);
void tm_agent_join_send(struct tm_agent *ag);
void tm_agent_gpu_model(const char *name, char *out, size_t size);

/* link.c: the controller's URL of a path, a POST of a JSON body with the
 * agent's token (tm_agent_post) or, for enrollment, without one; the next
 * backoff after a failure, from cur (0: the first). */
void tm_agent_url(const struct tm_agent *ag, char *out, size_t outlen, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
int tm_agent_post(struct tm_agent *ag, const char *url, const char *body, tm_http_cb cb, void *data);
int tm_agent_post_as(struct tm_agent *ag, const char *url, const char *body, bool auth, tm_http_cb cb,
                     void *data);
int64_t tm_agent_next_backoff(const struct tm_agent *ag, int64_t cur);

/* log_ship.c: every job's output to the controller.  init with the loop
 * (before anything runs), start once the state is read (resumes what the
 * side files say, before jobs are adopted), stop at shutdown, close with
 * the other handles, free after the loop ends.  open at a job's start,
 * end when it ended; pending: its exit waits for its output; cap: the
 * --log-cap cut, keeping the shipping position with the kept bytes. */
int tm_agent_ship_init(struct tm_agent *ag);
void tm_agent_ship_start(struct tm_agent *ag);
void tm_agent_ship_stop(struct tm_agent *ag);
void tm_agent_ship_close(struct tm_agent *ag);
void tm_agent_ship_free(struct tm_agent *ag);
void tm_agent_ship_open(struct tm_agent *ag, int64_t job, int64_t attempt, int rank);
void tm_agent_ship_end(struct tm_agent *ag, int64_t job, int64_t attempt);
bool tm_agent_ship_pending(const struct tm_agent *ag, int64_t job, int64_t attempt);
int tm_agent_ship_cap(struct tm_agent *ag, struct tm_agent_job *j);

/* job_user.c: a job's user and folder (docs/isolation.md) */
int tm_agent_job_user_init(struct tm_agent *ag);
int tm_agent_job_uid_pick(struct tm_agent *ag, uint32_t *ret, int *ret_lock);
int tm_agent_job_dir_open(struct tm_agent_job *j);
void tm_agent_job_dir_close(struct tm_agent_job *j);
void tm_agent_job_uid_adopt(struct tm_agent_job *j);
int tm_agent_tree_own(const char *path, uint32_t uid, uint32_t gid);

/* cgroup.c */
void tm_agent_cgroup_init(struct tm_agent *ag);
void tm_agent_cgroup_job(struct tm_agent *ag, struct tm_agent_job *j, const struct tm_agent_assignment *a);
void tm_agent_cgroup_remove(struct tm_agent_job *j);

#endif
