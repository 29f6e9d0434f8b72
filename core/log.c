#include "core/log.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#include <openssl/crypto.h>

#define TM_LOG_SECRETS_MAX 256
#define TM_LOG_LINE_MAX 4096

/* The logger is process-wide state by nature: one stream, one level.  It is
 * only touched from the loop thread (and from CLI main()), so no locking. */
static struct {
    enum tm_log_level level;
    FILE *stream;
    char *secrets[TM_LOG_SECRETS_MAX];
    size_t nsecrets;
    char last[TM_LOG_LINE_MAX];
    time_t last_sec;
    unsigned repeats;
} tm_logger = {.level = TM_LOG_INFO};

static const char *const level_names[TM_LOG_LEVEL_MAX] = {"debug", "info", "warn", "error"};

void tm_log_set_level(enum tm_log_level level)
{
    if (level < TM_LOG_LEVEL_MAX)
        tm_logger.level = level;
}

int tm_log_level_parse(const char *name)
{
    for (int i = 0; i < TM_LOG_LEVEL_MAX; i++)
        if (strcmp(name, level_names[i]) == 0)
            return i;
    return -1;
}

void tm_log_set_stream(FILE *stream)
{
    tm_logger.stream = stream;
}

static void forget(size_t i)
{
    OPENSSL_cleanse(tm_logger.secrets[i], strlen(tm_logger.secrets[i]));
    free(tm_logger.secrets[i]);
    memmove(&tm_logger.secrets[i], &tm_logger.secrets[i + 1],
            (tm_logger.nsecrets - i - 1) * sizeof(tm_logger.secrets[0]));
    tm_logger.nsecrets--;
}

void tm_log_add_secret(const char *secret)
{
    char *copy;

    if (!secret || strlen(secret) < 4)
        return;
    for (size_t i = 0; i < tm_logger.nsecrets; i++)
        if (strcmp(tm_logger.secrets[i], secret) == 0)
            return;
    copy = strdup(secret);
    if (!copy)
        return;
    /* Full: forget the oldest.  Rotated credentials register new secrets
     * for the life of the process; the oldest are long expired, while a
     * new one must never go unredacted. */
    if (tm_logger.nsecrets == TM_LOG_SECRETS_MAX)
        forget(0);
    tm_logger.secrets[tm_logger.nsecrets++] = copy;
}

void tm_log_remove_secret(const char *secret)
{
    for (size_t i = 0; secret && i < tm_logger.nsecrets; i++)
        if (strcmp(tm_logger.secrets[i], secret) == 0) {
            forget(i);
            return;
        }
}

void tm_log_clear_secrets(void)
{
    for (size_t i = 0; i < tm_logger.nsecrets; i++) {
        OPENSSL_cleanse(tm_logger.secrets[i], strlen(tm_logger.secrets[i]));
        free(tm_logger.secrets[i]);
        tm_logger.secrets[i] = NULL;
    }
    tm_logger.nsecrets = 0;
}

void tm_log_redact(char *buf, size_t size)
{
    static const char mark[] = "[redacted]";
    char out[TM_LOG_LINE_MAX];
    size_t o = 0;
    bool changed = false;

    if (tm_logger.nsecrets == 0 || size == 0)
        return;
    /* One left-to-right pass: text already replaced is never scanned
     * again, so one secret inside another's mark cannot mangle it. */
    for (size_t i = 0; buf[i] && o + 1 < sizeof(out);) {
        size_t hit = 0;
        for (size_t k = 0; k < tm_logger.nsecrets; k++) {
            size_t len = strlen(tm_logger.secrets[k]);
            if (len > hit && strncmp(buf + i, tm_logger.secrets[k], len) == 0)
                hit = len;
        }
        if (hit) {
            for (size_t m = 0; m < sizeof(mark) - 1 && o + 1 < sizeof(out); m++)
                out[o++] = mark[m];
            i += hit;
            changed = true;
        } else {
            out[o++] = buf[i++];
        }
    }
    if (!changed)
        return;
    out[o] = '\0';
    snprintf(buf, size, "%s", out);
}

static void write_line(FILE *out, enum tm_log_level level, const char *body)
{
    struct timeval tv;
    struct tm tm;
    char stamp[32];

    gettimeofday(&tv, NULL);
    gmtime_r(&tv.tv_sec, &tm);
    strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%S", &tm);
    fprintf(out, "%s.%03ldZ level=%s %s\n", stamp, (long)(tv.tv_usec / 1000),
            level_names[level], body);
    fflush(out);
}

void tm_logv(enum tm_log_level level, const char *msg, const char *kv, va_list ap)
{
    char line[TM_LOG_LINE_MAX];
    FILE *out = tm_logger.stream ? tm_logger.stream : stderr;
    int n;

    if (level >= TM_LOG_LEVEL_MAX || level < tm_logger.level)
        return;
    n = snprintf(line, sizeof(line), "msg=\"%s\"", msg);
    if (n > 0 && (size_t)n < sizeof(line) - 1 && kv && *kv) {
        line[n++] = ' ';
        vsnprintf(line + n, sizeof(line) - (size_t)n, kv, ap);
    }
    tm_log_redact(line, sizeof(line));

    /* Rate-limit exact repeats: a flapping dependency must not flood the log. */
    time_t now = time(NULL);
    if (strcmp(line, tm_logger.last) == 0 && now == tm_logger.last_sec) {
        tm_logger.repeats++;
        return;
    }
    if (tm_logger.repeats > 0) {
        char note[64];
        snprintf(note, sizeof(note), "msg=\"previous line repeated\" count=%u", tm_logger.repeats);
        write_line(out, TM_LOG_INFO, note);
        tm_logger.repeats = 0;
    }
    memcpy(tm_logger.last, line, sizeof(line));
    tm_logger.last_sec = now;
    write_line(out, level, line);
}

void tm_log(enum tm_log_level level, const char *msg, const char *kv, ...)
{
    va_list ap;
    va_start(ap, kv);
    tm_logv(level, msg, kv, ap);
    va_end(ap);
}
