/*
 * controller/daemon/decision_log.c: see decision_log.h.
 */
#include "controller/daemon/decision_log.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"

#define KEY_MAX 256

static bool standing(const char *op)
{
    return strcmp(op, "wait") == 0 || strcmp(op, "budget") == 0 || strcmp(op, "launch_refused") == 0 ||
           strcmp(op, "launch_held") == 0 ||
           strcmp(op, "silence_hold") == 0;
}

static const char *str_of(const cJSON *a, const char *name)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(a, name);
    return cJSON_IsString(v) ? v->valuestring : "";
}

/* The subject of an action: a job, a node, or (for a node not yet created)
 * its pool, or an instance nobody owns; kind and id out. */
static void subject_of(const cJSON *a, const char **kind, char *id, size_t size)
{
    static const char *const subjects[] = {"job", "node", "pool", "instance_id", "subject", "scope", "provider"};

    *kind = "subject";
    snprintf(id, size, "?");
    for (size_t i = 0; i < sizeof(subjects) / sizeof(subjects[0]); i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(a, subjects[i]);
        if (cJSON_IsNumber(v))
            snprintf(id, size, "%" PRId64, (int64_t)v->valuedouble);
        else if (cJSON_IsString(v))
            snprintf(id, size, "%s", v->valuestring);
        else
            continue;
        *kind = subjects[i];
        return;
    }
}

/* What makes two standing actions the same state: op, kind, key and
 * subject, not the reason's figures (spend grows every pass). */
static void key_of(const cJSON *a, const char *kind, const char *id, char *out, size_t size)
{
    const cJSON *job = cJSON_GetObjectItemCaseSensitive(a, "job");
    snprintf(out, size, "%s|%s|%s|%s=%s|%" PRId64, str_of(a, "op"), str_of(a, "kind"), str_of(a, "key"),
             kind, id, cJSON_IsNumber(job) ? (int64_t)job->valuedouble : (int64_t)0);
    /* A budget refusal names its job in the reason only ("job 7 ... waits"). */
    if (strcmp(str_of(a, "op"), "budget") == 0) {
        const char *r = str_of(a, "reason"), *w = strstr(r, "refused: job ");
        size_t n = strlen(out);
        if (w && n + 1 < size)
            snprintf(out + n, size - n, "|%.*s", (int)strcspn(w + 13, " "), w + 13);
    }
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static bool was_there(const struct tm_decision_log *l, const char *key)
{
    return l->nprev && bsearch(&key, l->prev, l->nprev, sizeof(*l->prev), cmp_str) != NULL;
}

void tm_decision_log_write(struct tm_decision_log *l, const cJSON *actions)
{
    size_t cap = 0, n = 0;
    char **now = NULL;
    const cJSON *a;

    cJSON_ArrayForEach(a, actions) {
        const char *op = str_of(a, "op"), *kind;
        char id[128], key[KEY_MAX];
        bool info = true;
        subject_of(a, &kind, id, sizeof(id));
        if (standing(op)) {
            key_of(a, kind, id, key, sizeof(key));
            info = !was_there(l, key);
            if (n == cap) {
                size_t ncap = cap ? cap * 2 : 64;
                char **grown = realloc(now, ncap * sizeof(*now));
                if (grown) {
                    now = grown;
                    cap = ncap;
                }
            }
            /* Out of memory: the line is still written, only not remembered. */
            if (n < cap && (now[n] = strdup(key)) != NULL)
                n++;
        }
        tm_log(info ? TM_LOG_INFO : TM_LOG_DEBUG, "decision", "op=%s %s=%s reason=\"%s\"",
               op[0] ? op : "?", kind, id, str_of(a, "reason"));
    }
    tm_decision_log_release(l);
    if (n)
        qsort(now, n, sizeof(*now), cmp_str);
    l->prev = now;
    l->nprev = n;
}

void tm_decision_log_release(struct tm_decision_log *l)
{
    for (size_t i = 0; i < l->nprev; i++)
        free(l->prev[i]);
    free(l->prev);
    l->prev = NULL;
    l->nprev = 0;
}
