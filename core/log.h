/*
 * core/log.h: one line per event, to stderr, with key=value context.
 *
 *   tm_log_info("node ready", "pool=%s node=%lld", pool, (long long)id);
 *
 * prints
 *
 *   2026-11-29T17:20:01.123Z level=info msg="node ready" pool=gpu node=7
 *
 * Secrets registered with tm_log_add_secret() are replaced by "[redacted]"
 * in every line before it is written, as a last line of defence: code must
 * still never pass a secret to the logger on purpose.
 */
#ifndef TM_LOG_H
#define TM_LOG_H

#include <stdarg.h>
#include <stdio.h>

enum tm_log_level {
    TM_LOG_DEBUG,
    TM_LOG_INFO,
    TM_LOG_WARN,
    TM_LOG_ERROR,
    TM_LOG_LEVEL_MAX,
};

/* Lines below this level are dropped.  Default TM_LOG_INFO. */
void tm_log_set_level(enum tm_log_level level);

/* Parse "debug", "info", "warn" or "error"; returns -1 when unrecognized. */
int tm_log_level_parse(const char *name);

/* Where lines go; default stderr.  The stream is not closed by the logger. */
void tm_log_set_stream(FILE *stream);

/* Remember a secret so no log line ever shows it.  Copies the string; strings
 * shorter than 4 bytes are ignored (they would redact ordinary words). */
void tm_log_add_secret(const char *secret);

/* Forget one secret (rotated credentials), wiping the copy.  When more than
 * 256 are registered the oldest is forgotten, never the newest. */
void tm_log_remove_secret(const char *secret);

/* Forget all secrets, wiping the copies. */
void tm_log_clear_secrets(void);

/* Write one line: msg is quoted, kv is a printf format of key=value pairs
 * (may be NULL).  Repeats of the same msg+kv within one second are counted
 * and summarised instead of printed. */
void tm_log(enum tm_log_level level, const char *msg, const char *kv, ...)
    __attribute__((format(printf, 3, 4)));
void tm_logv(enum tm_log_level level, const char *msg, const char *kv, va_list ap);

/* Redact registered secrets from buf in place.  Exposed for error strings
 * that leave the process through other paths (API answers, decisions). */
void tm_log_redact(char *buf, size_t size);

#define tm_log_debug(msg, ...) tm_log(TM_LOG_DEBUG, msg, __VA_ARGS__)
#define tm_log_info(msg, ...) tm_log(TM_LOG_INFO, msg, __VA_ARGS__)
#define tm_log_warn(msg, ...) tm_log(TM_LOG_WARN, msg, __VA_ARGS__)
#define tm_log_error(msg, ...) tm_log(TM_LOG_ERROR, msg, __VA_ARGS__)

#endif
