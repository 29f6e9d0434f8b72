/*
 * controller/agent/state.h: DIR/state.json, what survives an agent restart.
 *
 *   {"jobs":[{"job_id":7,"attempt":2,"pid":4242,"start_time":123456,
 *             "checkpointable":true,"start_reported":true,
 *             "stopping":"stopped","log_dropped":0}],
 *    "reports":[{"job_id":6,"attempt":1,"exit_code":3,"signal":null,
 *                "reason":"exited","output_tail":"..."}],
 *    "done":[[6,1],[5,3]]}
 *
 * jobs are the processes running; reports are exits not yet accepted by
 * the controller; done are the last attempts that ended here (bounded), so
 * a stale answer that still lists one never starts it again.  Written whole on every change to a temporary file,
 * fsync'd and renamed over the old one, so a kill -9 leaves either the old
 * file or the new one.  start_time is field 22 of /proc/PID/stat (clock
 * ticks since boot): with the pid it names one process, since pids are
 * reused.
 */
#ifndef TM_AGENT_STATE_H
#define TM_AGENT_STATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "controller/agent/logtail.h"

struct tm_agent_state_job {
    int64_t job_id;
    int64_t attempt;
    int pid;
    uint64_t start_time;
    bool checkpointable;
    bool start_reported;    /* the controller has its start (else sent again) */
    char stopping[16];      /* "" running; else the exit reason to report ("stopped") */
    int64_t log_dropped;
};

struct tm_agent_report {
    int64_t job_id;
    int64_t attempt;
    bool has_code;
    int exit_code;
    int signal;             /* 0: none */
    char reason[16];        /* exited | stopped | lost */
    char tail[TM_AGENT_TAIL_MAX + 1];
};

struct tm_agent_state_done {
    int64_t job_id;
    int64_t attempt;
};

struct tm_agent_state {
    size_t ndone;                      /* attempts that ran here and ended: never again */
    struct tm_agent_state_done *done;
    size_t njobs;
    struct tm_agent_state_job *jobs;
    size_t nreports;
    struct tm_agent_report *reports;
};

/* Serialise st to path atomically (path.tmp, fsync, rename).  0 or -errno. */
int tm_agent_state_write(const char *path, const struct tm_agent_state *st);
/* Parse a state file's text.  Pure.  0, or TM_EINVAL with err naming the
 * field; *ret untouched then.  Release with tm_agent_state_release. */
int tm_agent_state_parse(const char *body, size_t len, struct tm_agent_state *ret, char *err,
                         size_t errlen);
/* Read path: 0 (an absent file is an empty state), or a negative code. */
int tm_agent_state_read(const char *path, struct tm_agent_state *ret, char *err, size_t errlen);
void tm_agent_state_release(struct tm_agent_state *st);

/* Field 22 of /proc/PID/stat.  0, -ESRCH when no such process (or a
 * zombie, which runs nothing any more), TM_EBADREPLY when unreadable. */
int tm_proc_start_time(int pid, uint64_t *ret);
/* The same field from the text of a stat file (pure; the command name in
 * parentheses may hold spaces and parentheses). */
int tm_proc_stat_start_time(const char *stat, uint64_t *ret);

enum tm_adopt { TM_ADOPT_KEEP, TM_ADOPT_LOST, TM_ADOPT_MAX };
/* Re-adopt a saved job after restart?  alive: the pid exists now;
 * now_start: its start time now.  Pure. */
enum tm_adopt tm_agent_adopt_decide(const struct tm_agent_state_job *j, bool alive, uint64_t now_start);

#endif
