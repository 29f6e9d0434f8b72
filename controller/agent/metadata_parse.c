/*
 * controller/agent/metadata_parse.c: the metadata services' answers read
 * into struct tm_md_notice; pure (cJSON and core only), fuzzed.
 *
 * Every value is type-checked before use and every string is length-checked
 * before it is copied: the body comes from a service we do not control (a
 * fake, a proxy, a half-written answer) and a notice must never be guessed.
 */
#include "controller/agent/metadata.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "core/err.h"

static int fail(const char **ret_field, const char *field)
{
    if (ret_field)
        *ret_field = field;
    return TM_EBADREPLY;
}

static bool copy_str(char *dst, size_t size, const char *src)
{
    size_t n = strlen(src);

    if (n >= size)
        return false;
    memcpy(dst, src, n + 1);
    return true;
}

/* A printable string without quotes or backslashes: what may go into a
 * log line and an API body as it is. */
static bool tame(const char *s)
{
    for (; *s; s++)
        if (!isprint((unsigned char)*s) || *s == '"' || *s == '\\')
            return false;
    return true;
}

static const char *str_member(const cJSON *o, const char *name)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);

    return cJSON_IsString(v) && v->valuestring ? v->valuestring : NULL;
}

static void notice_init(struct tm_md_notice *n, const char *cloud)
{
    memset(n, 0, sizeof(*n));
    copy_str(n->cloud, sizeof(n->cloud), cloud);
}

/* ---- dates ------------------------------------------------------------- */

static int from_fields(int y, int mo, int d, int h, int mi, int sec, int64_t *ret_ms)
{
    struct tm tm = {0};
    time_t t;

    if (y < 1970 || y > 9999 || mo < 1 || mo > 12 || d < 1 || d > 31 || h < 0 || h > 23 ||
        mi < 0 || mi > 59 || sec < 0 || sec > 60)
        return TM_EBADREPLY;
    tm.tm_year = y - 1900;
    tm.tm_mon = mo - 1;
    tm.tm_mday = d;
    tm.tm_hour = h;
    tm.tm_min = mi;
    tm.tm_sec = sec;
    t = timegm(&tm);
    if (t == (time_t)-1)
        return TM_EBADREPLY;
    *ret_ms = (int64_t)t * 1000;
    return 0;
}

int tm_md_parse_iso8601(const char *s, int64_t *ret_ms)
{
    int y, mo, d, h, mi, sec, n = 0;

    if (!s || strlen(s) < 20)
        return TM_EBADREPLY;
    /* sscanf's %d would take signs and spaces: check the shape first. */
    for (int i = 0; i < 19; i++) {
        char sep = i == 4 || i == 7 ? '-' : i == 10 ? 'T' : i == 13 || i == 16 ? ':' : 0;
        if (sep ? s[i] != sep : !isdigit((unsigned char)s[i]))
            return TM_EBADREPLY;
    }
    if (sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d%n", &y, &mo, &d, &h, &mi, &sec, &n) != 6 || n != 19)
        return TM_EBADREPLY;
    s += n;
    if (*s == '.') {
        s++;
        if (!isdigit((unsigned char)*s))
            return TM_EBADREPLY;
        while (isdigit((unsigned char)*s))
            s++;
    }
    if (strcmp(s, "Z") != 0 && strcmp(s, "+00:00") != 0)
        return TM_EBADREPLY;
    return from_fields(y, mo, d, h, mi, sec, ret_ms);
}

int tm_md_parse_rfc1123(const char *s, int64_t *ret_ms)
{
    static const char months[] = "JanFebMarAprMayJunJulAugSepOctNovDec";
    static const char days[] = "MonTueWedThuFriSatSun";
    char wday[4], mon[4], zone[4];
    int d, y, h, mi, sec, n = 0, mo;
    const char *p;

    /* Fixed C-locale names, so no strptime (its names follow the locale). */
    if (!s || sscanf(s, "%3[A-Za-z], %2d %3[A-Za-z] %4d %2d:%2d:%2d %3[A-Z]%n", wday, &d, mon, &y,
                     &h, &mi, &sec, zone, &n) != 8 || s[n] != '\0')
        return TM_EBADREPLY;
    if (strlen(wday) != 3 || strlen(mon) != 3 || strcmp(zone, "GMT") != 0)
        return TM_EBADREPLY;
    p = strstr(days, wday);
    if (!p || (p - days) % 3 != 0)
        return TM_EBADREPLY;
    p = strstr(months, mon);
    if (!p || (p - months) % 3 != 0)
        return TM_EBADREPLY;
    mo = (int)(p - months) / 3 + 1;
    return from_fields(y, mo, d, h, mi, sec, ret_ms);
}

/* ---- AWS ----------------------------------------------------------------- */

int tm_md_parse_aws_instance_action(const char *body, size_t len, struct tm_md_notice *ret,
                                    const char **ret_field)
{
    static const char *const actions[] = {"terminate", "stop", "hibernate"};
    struct tm_md_notice n;
    cJSON *root = body ? cJSON_ParseWithLength(body, len) : NULL;
    const char *action, *when;
    bool known = false;
    int r;

    notice_init(&n, "aws");
    if (!cJSON_IsObject(root)) {
        r = fail(ret_field, "instance-action");
        goto out;
    }
    action = str_member(root, "action");
    for (size_t i = 0; action && i < sizeof(actions) / sizeof(actions[0]); i++)
        known |= strcmp(action, actions[i]) == 0;
    if (!known) {
        r = fail(ret_field, "action");
        goto out;
    }
    when = str_member(root, "time");
    if (!when || tm_md_parse_iso8601(when, &n.deadline_ms) < 0) {
        r = fail(ret_field, "time");
        goto out;
    }
    copy_str(n.action, sizeof(n.action), action);
    /* One notice per announced time: AWS may move the time, and a moved
     * time is a new notice. */
    snprintf(n.event_id, sizeof(n.event_id), "aws:instance-action:%s:%s", action, when);
    *ret = n;
    r = 0;
out:
    cJSON_Delete(root);
    return r;
}

int tm_md_parse_aws_rebalance(const char *body, size_t len, struct tm_md_notice *ret,
                              const char **ret_field)
{
    struct tm_md_notice n;
    cJSON *root = body ? cJSON_ParseWithLength(body, len) : NULL;
    const char *when;
    int64_t at;
    int r;

    notice_init(&n, "aws");
    if (!cJSON_IsObject(root)) {
        r = fail(ret_field, "rebalance");
        goto out;
    }
    when = str_member(root, "noticeTime");
    if (!when || tm_md_parse_iso8601(when, &at) < 0) {
        r = fail(ret_field, "noticeTime");
        goto out;
    }
    copy_str(n.action, sizeof(n.action), "rebalance");
    snprintf(n.event_id, sizeof(n.event_id), "aws:rebalance:%s", when);
    *ret = n;
    r = 0;
out:
    cJSON_Delete(root);
    return r;
}

/* ---- GCP ----------------------------------------------------------------- */

/* body without surrounding white space into word (NUL-terminated). */
static bool bare_word(const char *body, size_t len, char *word, size_t size)
{
    size_t a = 0, b = len;

    if (!body)
        return false;
    while (a < b && isspace((unsigned char)body[a]))
        a++;
    while (b > a && isspace((unsigned char)body[b - 1]))
        b--;
    if (b - a >= size)
        return false;
    memcpy(word, body + a, b - a);
    word[b - a] = '\0';
    return strlen(word) == b - a; /* no NUL inside */
}

int tm_md_parse_gcp_preempted(const char *body, size_t len, bool *ret_preempted,
                              const char **ret_field)
{
    char word[8];

    if (!bare_word(body, len, word, sizeof(word)))
        return fail(ret_field, "preempted");
    if (strcmp(word, "TRUE") == 0)
        *ret_preempted = true;
    else if (strcmp(word, "FALSE") == 0)
        *ret_preempted = false;
    else
        return fail(ret_field, "preempted");
    return 0;
}

int tm_md_parse_gcp_maintenance(const char *body, size_t len, bool *ret_terminate,
                                const char **ret_field)
{
    char word[40];

    if (!bare_word(body, len, word, sizeof(word)))
        return fail(ret_field, "maintenance-event");
    if (strcmp(word, "NONE") == 0 || strcmp(word, "MIGRATE_ON_HOST_MAINTENANCE") == 0)
        *ret_terminate = false;
    else if (strcmp(word, "TERMINATE_ON_HOST_MAINTENANCE") == 0)
        *ret_terminate = true;
    else
        return fail(ret_field, "maintenance-event");
    return 0;
}

/* ---- Azure --------------------------------------------------------------- */

/* ret_field for an event's member, "Events[2].EventId": kept in a
 * thread-local buffer so the caller can print it after the parse. */
#define AZ_FIELD_EVENTS 32

static const char *az_field(size_t i, const char *member)
{
    static _Thread_local char buf[AZ_FIELD_EVENTS][48];
    size_t slot = i < AZ_FIELD_EVENTS ? i : AZ_FIELD_EVENTS - 1;

    if (i >= AZ_FIELD_EVENTS)
        snprintf(buf[slot], sizeof(buf[slot]), "Events[].%s", member);
    else
        snprintf(buf[slot], sizeof(buf[slot]), "Events[%zu].%s", i, member);
    return buf[slot];
}

int tm_md_parse_azure_events(const char *body, size_t len, int64_t now_ms,
                             struct tm_md_azure_doc *ret, const char **ret_field)
{
    static struct tm_md_azure_doc empty;
    struct tm_md_azure_doc doc = empty;
    cJSON *root = body ? cJSON_ParseWithLength(body, len) : NULL;
    const cJSON *inc, *events, *ev;
    size_t i = 0;
    int r = TM_EBADREPLY;

    if (!cJSON_IsObject(root)) {
        fail(ret_field, "scheduledevents");
        goto out;
    }
    inc = cJSON_GetObjectItemCaseSensitive(root, "DocumentIncarnation");
    if (!cJSON_IsNumber(inc) || inc->valuedouble < 0 || inc->valuedouble > 9e15) {
        fail(ret_field, "DocumentIncarnation");
        goto out;
    }
    doc.incarnation = (int64_t)inc->valuedouble;
    events = cJSON_GetObjectItemCaseSensitive(root, "Events");
    if (!cJSON_IsArray(events)) {
        fail(ret_field, "Events");
        goto out;
    }
    cJSON_ArrayForEach(ev, events) {
        const char *id, *type, *status, *not_before;
        struct tm_md_notice *n;

        if (!cJSON_IsObject(ev)) {
            fail(ret_field, az_field(i, "(event)"));
            goto out;
        }
        id = str_member(ev, "EventId");
        if (!id || !*id || strlen(id) >= sizeof(doc.events[0].event_id) || !tame(id)) {
            fail(ret_field, az_field(i, "EventId"));
            goto out;
        }
        type = str_member(ev, "EventType");
        if (!type) {
            fail(ret_field, az_field(i, "EventType"));
            goto out;
        }
        status = str_member(ev, "EventStatus");
        if (!status || (strcmp(status, "Scheduled") != 0 && strcmp(status, "Started") != 0)) {
            fail(ret_field, az_field(i, "EventStatus"));
            goto out;
        }
        /* NotBefore is empty once the event has started; absent is read
         * the same way (the service has sent both). */
        not_before = str_member(ev, "NotBefore");
        if (cJSON_GetObjectItemCaseSensitive(ev, "NotBefore") && !not_before) {
            fail(ret_field, az_field(i, "NotBefore"));
            goto out;
        }
        i++;
        if (strcmp(type, "Preempt") != 0 && strcmp(type, "Terminate") != 0)
            continue; /* Freeze, Reboot, Redeploy: the node comes back */
        if (doc.n == TM_MD_AZURE_EVENTS_MAX)
            continue; /* more than the platform ever schedules for one VM */
        n = &doc.events[doc.n];
        notice_init(n, "azure");
        copy_str(n->action, sizeof(n->action), strcmp(type, "Preempt") == 0 ? "preempt" : "terminate");
        copy_str(n->event_id, sizeof(n->event_id), id);
        if (not_before && *not_before) {
            if (tm_md_parse_rfc1123(not_before, &n->deadline_ms) < 0) {
                fail(ret_field, az_field(i - 1, "NotBefore"));
                goto out;
            }
        } else {
            n->deadline_ms = now_ms;
        }
        doc.n++;
    }
    *ret = doc;
    r = 0;
out:
    cJSON_Delete(root);
    return r;
}

int tm_md_azure_ack_body(const char *event_id, char *buf, size_t size)
{
    int w;

    if (!event_id || !*event_id || !tame(event_id))
        return TM_EINVAL;
    w = snprintf(buf, size, "{\"StartRequests\":[{\"EventId\":\"%s\"}]}", event_id);
    if (w < 0 || (size_t)w >= size)
        return TM_EINVAL;
    return w;
}

/* ---- local --------------------------------------------------------------- */

int tm_md_parse_local_notice(const char *body, size_t len, struct tm_md_notice *ret,
                             const char **ret_field)
{
    struct tm_md_notice n;
    cJSON *root = body ? cJSON_ParseWithLength(body, len) : NULL;
    const cJSON *deadline;
    const char *action, *id;
    int r = TM_EBADREPLY;

    notice_init(&n, "local");
    if (!cJSON_IsObject(root)) {
        fail(ret_field, "notice");
        goto out;
    }
    action = str_member(root, "action");
    if (!action || !*action || !tame(action) || !copy_str(n.action, sizeof(n.action), action)) {
        fail(ret_field, "action");
        goto out;
    }
    deadline = cJSON_GetObjectItemCaseSensitive(root, "deadline_ms");
    if (deadline) {
        if (!cJSON_IsNumber(deadline) || deadline->valuedouble < 0 ||
            deadline->valuedouble > 9e15) {
            fail(ret_field, "deadline_ms");
            goto out;
        }
        n.deadline_ms = (int64_t)deadline->valuedouble;
    }
    if (cJSON_GetObjectItemCaseSensitive(root, "event_id")) {
        id = str_member(root, "event_id");
        if (!id || !*id || !tame(id) || !copy_str(n.event_id, sizeof(n.event_id), id)) {
            fail(ret_field, "event_id");
            goto out;
        }
    } else {
        snprintf(n.event_id, sizeof(n.event_id), "local:%s", n.action);
    }
    *ret = n;
    r = 0;
out:
    cJSON_Delete(root);
    return r;
}
