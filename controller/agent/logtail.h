/*
 * controller/agent/logtail.h: a job's log file, capped, and its tail.
 *
 * The job writes its stdout and stderr straight into its log file
 * (O_APPEND, so the file outlives an agent restart).  Every second the
 * agent checks the size: past the cap it keeps the last TM_AGENT_LOG_KEEP
 * bytes, truncates, and writes them back after a line saying how much was
 * dropped.  O_APPEND makes the job's next write land at the new end, so a
 * job that writes without end costs at most the cap plus one second of its
 * output on the agent's disk.
 *
 * The tail sent with the exit report is the last 4096 bytes, made valid
 * UTF-8 (each bad byte and control character but tab, newline and carriage
 * return becomes '?') because the controller reads strict JSON, and
 * prefixed with a note when output was dropped.
 */
#ifndef TM_AGENT_LOGTAIL_H
#define TM_AGENT_LOGTAIL_H

#include <stddef.h>
#include <stdint.h>

#define TM_AGENT_TAIL_MAX 4096
#define TM_AGENT_LOG_KEEP (64 * 1024)
#define TM_AGENT_LOG_CAP_DEFAULT (64LL * 1024 * 1024)

/* Cap the log at path: 1 when it was cut (*dropped grows by the bytes
 * dropped), 0 when within the cap or absent, or -errno. */
int tm_agent_log_cap(const char *path, int64_t cap, int64_t *dropped);

/* Where a cut put the bytes it kept: the file's bytes from `from` on
 * now start at note_len (after the note), those before it are gone. */
struct tm_agent_log_cut {
    int64_t from;
    int64_t note_len;
};

/* tm_agent_log_cap, saying where the kept bytes went (log_ship.c keeps
 * its file position with them); cut may be NULL. */
int tm_agent_log_cap_cut(const char *path, int64_t cap, int64_t *dropped, struct tm_agent_log_cut *cut);

/* Format a tail from the last bytes of a log (data, len: any length, only
 * the end is used).  Pure.  out gets at most TM_AGENT_TAIL_MAX bytes plus
 * a NUL (outlen must be at least TM_AGENT_TAIL_MAX + 1); returns its length. */
size_t tm_agent_tail_format(const char *data, size_t len, int64_t dropped, char *out, size_t outlen);

/* The tail of the log at path (empty when absent). */
size_t tm_agent_log_tail(const char *path, int64_t dropped, char *out, size_t outlen);

/* Replace each byte that is not part of valid UTF-8, and each control
 * character but tab, newline and carriage return (NUL included), by '?'. */
void tm_utf8_clean(char *s, size_t len);

#endif
