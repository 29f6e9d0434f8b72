/*
 * controller/agent/log_ship.c: every byte of each job's output, shipped to
 * the controller (POST /v1/nodes/{id}/logs, docs/logs.md).
 *
 * One stream per job attempt: the bytes of its log file (stdout and
 * stderr, as written) from offset 0, under the job's rank.  One request at
 * a time carries a batch of chunks from every stream that has more, round
 * robin, at most SHIP_BATCH_BYTES; the answer gives each stream's next
 * offset.  While a stream has more the next batch follows SHIP_GAP_MS
 * later, else every SHIP_PERIOD_MS.
 *
 * What the controller acknowledged is kept beside the log in
 * DIR/jobs/<job>-<attempt>.ship ({"rank", "offset": bytes acknowledged,
 * "pos": where in the file they end, "ended"}), rewritten (temp file,
 * rename) after each answer, so an agent restarted after kill -9 resumes
 * from there.  The file may lag the controller by the last answer: the
 * controller then refuses the repeat (409, the chunk's offset overlaps)
 * naming the offset it expects, and the agent skips to it, so no byte is
 * stored twice and none is skipped.  A stream the controller refuses
 * outright (another node's job, a stale attempt) is dropped, said once.
 *
 * A job's exit is reported once its output is shipped (tm_agent_ship_pending):
 * the controller opens a stream only while its attempt runs there, and a
 * reader then knows the output is whole when the attempt has ended.
 *
 * The agent's own --log-cap cuts the file (logtail.h): the file position
 * follows the bytes kept; output cut before it was shipped is lost, and the
 * note the cut writes ships in its place.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "controller/agent/internal.h"
#include "controller/agent/logtail.h"
#include "controller/spec/log_chunks.h"
#include "core/err.h"
#include "core/log.h"
#include "core/text.h"

#define SHIP_PERIOD_MS 500
#define SHIP_BATCH_BYTES (128 * 1024)   /* raw bytes a batch carries: about 175 KB of
                                         * base64, under the API's 256 KB body limit */
#define SHIP_CHUNK_MAX (64 * 1024)      /* the controller's default logs.max_chunk */
#define SHIP_CHUNK_MIN 1024
/* Batches leave at most this often (50 a second, 6.4 MB/s of output per
 * node): the agent's token has one request rate (api.rate_per_token,
 * default 100 a second) for its heartbeats too, and a chatty job must not
 * get its node's heartbeats throttled. */
#define SHIP_GAP_MS 20

struct ship {
    struct ship *next;
    int64_t job, attempt;
    int rank;
    int64_t offset;        /* bytes the controller acknowledged */
    int64_t pos;           /* where in the file the byte at offset is */
    bool ended;            /* the process ended: done once everything is shipped */
    bool dead;             /* refused by the controller: nothing more goes */
    bool has_cut;          /* a cut while a batch was in flight (applied on its answer) */
    struct tm_agent_log_cut cut;
    int64_t sent;          /* bytes of this stream in the batch in flight */
    char log_path[PATH_MAX];
    char side_path[PATH_MAX];
};

struct sent_chunk {
    struct ship *s;
    int64_t offset, len;
};

struct tm_agent_shipper {
    struct tm_agent *ag;
    uv_timer_t timer;
    bool timer_open;
    struct ship *ships;
    bool inflight;
    bool away_said, refused_said;
    int64_t backoff_ms;
    size_t chunk_max;
    struct sent_chunk sent[TM_LOG_BATCH_MAX];
    size_t nsent;
    size_t rr;             /* round robin: the stream a batch starts from */
};

static void on_ship_timer(uv_timer_t *t);

static void ship_again(struct tm_agent_shipper *sh, uint64_t ms)
{
    if (sh->timer_open && !sh->ag->shutting_down)
        uv_timer_start(&sh->timer, on_ship_timer, ms, 0);
}

/* ---- the side file ---------------------------------------------------------- */

static void side_save(const struct ship *s)
{
    char tmp[PATH_MAX + 8], body[160];
    int fd, n;

    n = snprintf(body, sizeof(body), "{\"rank\":%d,\"offset\":%" PRId64 ",\"pos\":%" PRId64 ",\"ended\":%s}\n",
                 s->rank, s->offset, s->pos, s->ended ? "true" : "false");
    snprintf(tmp, sizeof(tmp), "%s.tmp", s->side_path);
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0 || write(fd, body, (size_t)n) != n || close(fd) != 0 || rename(tmp, s->side_path) != 0) {
        if (fd >= 0)
            unlink(tmp);
        tm_log_warn("could not save a log stream's shipped offset", "job=%" PRId64 " attempt=%" PRId64 " err=%s",
                    s->job, s->attempt, strerror(errno));
    }
}

static struct ship *ship_new(struct tm_agent_shipper *sh, int64_t job, int64_t attempt, int rank)
{
    struct ship *s = calloc(1, sizeof(*s));

    if (!s)
        return NULL;
    s->job = job;
    s->attempt = attempt;
    s->rank = rank;
    snprintf(s->log_path, sizeof(s->log_path), "%.3800s/%" PRId64 "-%" PRId64 ".log", sh->ag->jobs_dir, job, attempt);
    snprintf(s->side_path, sizeof(s->side_path), "%.3800s/%" PRId64 "-%" PRId64 ".ship", sh->ag->jobs_dir, job,
             attempt);
    s->next = sh->ships;
    sh->ships = s;
    return s;
}

static struct ship *ship_find(struct tm_agent_shipper *sh, int64_t job, int64_t attempt)
{
    for (struct ship *s = sh->ships; s; s = s->next)
        if (s->job == job && s->attempt == attempt)
            return s;
    return NULL;
}

/* Read one side file; false (said) when it does not parse: that stream is
 * then shipped no further rather than twice. */
static bool side_load(struct tm_agent_shipper *sh, const char *name)
{
    long long job = 0, attempt = 0;
    char path[PATH_MAX + 300], buf[512], tail[8];
    const cJSON *rank, *offset, *pos, *ended;
    struct ship *s;
    cJSON *doc = NULL;
    ssize_t n;
    int fd;

    if (sscanf(name, "%lld-%lld.shi%7s", &job, &attempt, tail) != 3 || strcmp(tail, "p") != 0 || job <= 0 ||
        attempt <= 0)
        return true;
    snprintf(path, sizeof(path), "%s/%s", sh->ag->jobs_dir, name);
    fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
    if (fd >= 0)
        close(fd);
    if (n > 0) {
        buf[n] = '\0';
        doc = cJSON_Parse(buf);
    }
    rank = cJSON_GetObjectItemCaseSensitive(doc, "rank");
    offset = cJSON_GetObjectItemCaseSensitive(doc, "offset");
    pos = cJSON_GetObjectItemCaseSensitive(doc, "pos");
    ended = cJSON_GetObjectItemCaseSensitive(doc, "ended");
    if (!cJSON_IsNumber(rank) || !cJSON_IsNumber(offset) || !cJSON_IsNumber(pos) || !cJSON_IsBool(ended) ||
        rank->valuedouble < 0 || offset->valuedouble < 0 || pos->valuedouble < 0) {
        tm_log_warn("a log stream's shipped offset does not parse: its output is shipped no further",
                    "path=%s", path);
        cJSON_Delete(doc);
        return false;
    }
    s = ship_find(sh, job, attempt);
    if (!s)
        s = ship_new(sh, job, attempt, (int)rank->valuedouble);
    if (s) {
        s->offset = (int64_t)offset->valuedouble;
        s->pos = (int64_t)pos->valuedouble;
        s->ended = cJSON_IsTrue(ended);
        tm_log_info("log stream resumed", "job=%lld attempt=%lld offset=%" PRId64, job, attempt, s->offset);
    }
    cJSON_Delete(doc);
    return true;
}

/* ---- the streams' life ---------------------------------------------------- */

void tm_agent_ship_open(struct tm_agent *ag, int64_t job, int64_t attempt, int rank)
{
    struct tm_agent_shipper *sh = ag->shipper;
    struct ship *s;

    if (!sh || ship_find(sh, job, attempt))
        return;
    s = ship_new(sh, job, attempt, rank);
    if (s)
        side_save(s);
}

static int64_t file_size(const char *path)
{
    struct stat st;

    return stat(path, &st) == 0 ? (int64_t)st.st_size : -1;
}

static bool ship_finished(const struct ship *s)
{
    int64_t size;

    if (s->dead)
        return true;
    if (!s->ended || s->sent)
        return false;
    size = file_size(s->log_path);
    return size < 0 || s->pos >= size;
}

/* Forget the streams that are done: ended and wholly shipped, or refused. */
static void ship_reap(struct tm_agent_shipper *sh)
{
    struct ship **pp = &sh->ships;

    while (*pp) {
        struct ship *s = *pp;
        if (s->sent == 0 && ship_finished(s)) {
            *pp = s->next;
            unlink(s->side_path);
            free(s);
            continue;
        }
        pp = &s->next;
    }
}

void tm_agent_ship_end(struct tm_agent *ag, int64_t job, int64_t attempt)
{
    struct tm_agent_shipper *sh = ag->shipper;
    struct ship *s = sh ? ship_find(sh, job, attempt) : NULL;

    if (!s)
        return;
    s->ended = true;
    side_save(s);
    if (!sh->inflight)
        ship_again(sh, 0);
}

bool tm_agent_ship_pending(const struct tm_agent *ag, int64_t job, int64_t attempt)
{
    const struct tm_agent_shipper *sh = ag->shipper;

    if (!sh)
        return false;
    for (const struct ship *s = sh->ships; s; s = s->next)
        if (s->job == job && s->attempt == attempt)
            return !ship_finished(s);
    return false;
}

static void apply_cut(struct ship *s, const struct tm_agent_log_cut *cut)
{
    /* The bytes from cut->from on now start after the note; a position
     * before that lost its bytes: the note ships in their place. */
    s->pos = s->pos >= cut->from ? cut->note_len + (s->pos - cut->from) : 0;
}

int tm_agent_ship_cap(struct tm_agent *ag, struct tm_agent_job *j)
{
    struct tm_agent_shipper *sh = ag->shipper;
    struct tm_agent_log_cut cut = {0};
    struct ship *s;
    int r = tm_agent_log_cap_cut(j->log_path, ag->o.log_cap_bytes, &j->log_dropped, &cut);

    if (r != 1 || !sh)
        return r;
    s = ship_find(sh, j->job_id, j->attempt);
    if (!s)
        return r;
    if (s->sent) {
        s->has_cut = true;
        s->cut = cut;
    } else {
        apply_cut(s, &cut);
        side_save(s);
    }
    return r;
}

/* ---- a batch ---------------------------------------------------------------- */

/* Append up to room bytes of s's output (from its position, past what is
 * in flight) as chunks; returns the bytes added, or -1 when out of memory. */
static int64_t add_stream(struct tm_agent_shipper *sh, struct ship *s, struct tm_text *body, int64_t room)
{
    int64_t size = file_size(s->log_path), added = 0;
    unsigned char *buf;
    int fd;

    if (size < 0 || size <= s->pos || s->dead)
        return 0;
    buf = malloc(sh->chunk_max);
    if (!buf)
        return -1;
    fd = open(s->log_path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) {
        free(buf);
        return 0;
    }
    while (room > 0 && sh->nsent < TM_LOG_BATCH_MAX && s->pos + added < size) {
        int64_t want = size - (s->pos + added);
        ssize_t got;
        char head[200], *b64;
        int n;
        if (want > room)
            want = room;
        if (want > (int64_t)sh->chunk_max)
            want = (int64_t)sh->chunk_max;
        got = pread(fd, buf, (size_t)want, s->pos + added);
        if (got <= 0)
            break;
        b64 = tm_log_b64_encode(buf, (size_t)got);
        if (!b64) {
            added = -1;
            break;
        }
        n = snprintf(head, sizeof(head),
                     "%s{\"job\":%" PRId64 ",\"attempt\":%" PRId64 ",\"rank\":%d,\"offset\":%" PRId64 ",\"data\":\"",
                     sh->nsent ? "," : "", s->job, s->attempt, s->rank, s->offset + added);
        if (!tm_text_add(body, head, (size_t)n) || !tm_text_add(body, b64, strlen(b64)) ||
            !tm_text_add(body, "\"}", 2)) {
            free(b64);
            added = -1;
            break;
        }
        free(b64);
        sh->sent[sh->nsent++] = (struct sent_chunk){s, s->offset + added, got};
        added += got;
        room -= got;
    }
    close(fd);
    free(buf);
    if (added > 0)
        s->sent = added;
    return added;
}

static void batch_done(struct tm_agent_shipper *sh)
{
    for (size_t i = 0; i < sh->nsent; i++)
        sh->sent[i].s->sent = 0;
    sh->nsent = 0;
    sh->inflight = false;
}

/* The 409's chunk: which stream, and the offset the controller expects.
 * false when the answer names no chunk of the batch. */
static bool on_refused(struct tm_agent_shipper *sh, const char *body)
{
    cJSON *doc = body ? cJSON_Parse(body) : NULL;
    const cJSON *field = cJSON_GetObjectItemCaseSensitive(doc, "field");
    const cJSON *next = cJSON_GetObjectItemCaseSensitive(doc, "next_offset");
    const cJSON *error = cJSON_GetObjectItemCaseSensitive(doc, "error");
    unsigned long i = 0;
    char what[32] = "";
    struct ship *s;

    if (!cJSON_IsString(field) || sscanf(field->valuestring, "chunks[%lu].%31s", &i, what) != 2 ||
        i >= sh->nsent) {
        cJSON_Delete(doc);
        return false;
    }
    s = sh->sent[i].s;
    if (strcmp(what, "offset") == 0 && cJSON_IsNumber(next) && next->valuedouble >= 0) {
        int64_t want = (int64_t)next->valuedouble;
        /* The side file lagged (an answer lost to a restart): skip what the
         * controller has; or it has less than we thought: send again. */
        int64_t pos = s->pos + (want - s->offset);
        tm_log_info("log stream resynchronised with the controller", "job=%" PRId64 " attempt=%" PRId64
                    " offset=%" PRId64 " next_offset=%" PRId64, s->job, s->attempt, s->offset, want);
        if (pos < 0) {
            s->dead = true;
        } else {
            s->pos = pos;
            s->offset = want;
        }
    } else {
        tm_log_warn("the controller refused a job's output stream, dropping it",
                    "job=%" PRId64 " attempt=%" PRId64 " field=%s error=\"%.160s\"", s->job, s->attempt, what,
                    cJSON_IsString(error) ? error->valuestring : "");
        s->dead = true;
    }
    side_save(s);
    cJSON_Delete(doc);
    return true;
}

static void on_shipped(const struct tm_http_response *resp, void *data)
{
    struct tm_agent_shipper *sh = data;
    struct tm_agent *ag = sh->ag;
    uint64_t again = SHIP_PERIOD_MS;

    if (ag->shutting_down) {
        batch_done(sh);
        return;
    }
    if (resp->status == 0 && resp->http_status >= 200 && resp->http_status < 300) {
        /* Every chunk was stored, in order: each stream moves past its own. */
        for (size_t i = 0; i < sh->nsent; i++) {
            struct ship *s = sh->sent[i].s;
            if (s->sent == 0)
                continue;
            s->offset += s->sent;
            s->pos += s->sent;
            s->sent = 0;
            if (s->has_cut) {
                apply_cut(s, &s->cut);
                s->has_cut = false;
            }
            side_save(s);
        }
        sh->backoff_ms = 0;
        if (sh->away_said)
            tm_log_info("the controller takes job output again", "node=%" PRId64, ag->o.node_id);
        sh->away_said = sh->refused_said = false;
        again = SHIP_GAP_MS;
    } else if (resp->status == 0 && (resp->http_status == 409 || resp->http_status == 404) &&
               on_refused(sh, resp->body)) {
        again = 0;
    } else if (resp->status == 0 && (resp->http_status == 404 || resp->http_status == 405)) {
        /* A controller without the route (an older version): the output
         * stays on this node, and exits are not held for it. */
        if (!sh->refused_said)
            tm_log_warn("the controller takes no job output (an older version?): it stays in the node's logs",
                        "http=%ld", resp->http_status);
        sh->refused_said = true;
        for (struct ship *s = sh->ships; s; s = s->next)
            s->dead = true;
        again = 60000;
    } else if (resp->status == 0 && resp->http_status == 400 && sh->chunk_max > SHIP_CHUNK_MIN &&
               resp->body && strstr(resp->body, "logs.max_chunk")) {
        /* The controller's logs.max_chunk is smaller than ours. */
        sh->chunk_max /= 2;
        tm_log_info("the controller takes smaller log chunks", "chunk=%zu", sh->chunk_max);
        again = 0;
    } else if (resp->status == 0 && resp->http_status == 429) {
        /* Past the token's rate: the heartbeats share it, so wait it out. */
        again = 1000;
    } else if (resp->status == 0 && resp->http_status >= 400 && resp->http_status < 500) {
        if (!sh->refused_said)
            tm_log_error("the controller refused a batch of job output", "http=%ld body=\"%.200s\"",
                         resp->http_status, resp->body ? resp->body : "");
        sh->refused_said = true;
        again = 30000;
    } else {
        if (!sh->away_said)
            tm_log_warn("could not ship job output, will retry", "http=%ld err=%s", resp->http_status,
                        resp->status < 0 ? tm_strerror(resp->status) : "server error");
        sh->away_said = true;
        sh->backoff_ms = sh->backoff_ms <= 0 ? 1000 : sh->backoff_ms * 2;
        if (sh->backoff_ms > (ag->o.retry_max_ms > 0 ? ag->o.retry_max_ms : 60000))
            sh->backoff_ms = ag->o.retry_max_ms > 0 ? ag->o.retry_max_ms : 60000;
        again = (uint64_t)sh->backoff_ms;
    }
    batch_done(sh);
    ship_reap(sh);
    ship_again(sh, again);
}

static void ship_round(struct tm_agent_shipper *sh)
{
    struct tm_agent *ag = sh->ag;
    struct tm_text body = {0};
    size_t nships = 0, start;
    int64_t room = SHIP_BATCH_BYTES;
    struct ship *s;
    char url[1024];

    if (sh->inflight || ag->shutting_down || !ag->started)
        return;
    ship_reap(sh);
    for (s = sh->ships; s; s = s->next)
        nships++;
    if (nships == 0 || !tm_text_add(&body, "{\"chunks\":[", 11)) {
        free(body.p);
        ship_again(sh, SHIP_PERIOD_MS);
        return;
    }
    /* Round robin: each batch starts one stream further, so a stream that
     * writes without end does not starve the others. */
    start = sh->rr++ % nships;
    for (size_t k = 0; k < nships && room > 0 && sh->nsent < TM_LOG_BATCH_MAX; k++) {
        size_t idx = (start + k) % nships;
        int64_t added;
        s = sh->ships;
        for (size_t m = 0; m < idx; m++)
            s = s->next;
        added = add_stream(sh, s, &body, room);
        if (added < 0)
            break;
        room -= added;
    }
    if (sh->nsent == 0 || !tm_text_add(&body, "]}", 2)) {
        batch_done(sh);
        free(body.p);
        ship_again(sh, SHIP_PERIOD_MS);
        return;
    }
    tm_agent_url(ag, url, sizeof(url), "/v1/nodes/%lld/logs", (long long)ag->o.node_id);
    if (tm_agent_post(ag, url, body.p, on_shipped, sh) == 0) {
        sh->inflight = true;
    } else {
        batch_done(sh);
        ship_again(sh, 1000);
    }
    free(body.p);
}

static void on_ship_timer(uv_timer_t *t)
{
    ship_round(t->data);
}

/* ---- the shipper's life ------------------------------------------------------ */

int tm_agent_ship_init(struct tm_agent *ag)
{
    struct tm_agent_shipper *sh = calloc(1, sizeof(*sh));

    if (!sh)
        return TM_ENOMEM;
    sh->ag = ag;
    sh->chunk_max = SHIP_CHUNK_MAX;
    uv_timer_init(ag->loop, &sh->timer);
    sh->timer.data = sh;
    sh->timer_open = true;
    ag->shipper = sh;
    return 0;
}

void tm_agent_ship_start(struct tm_agent *ag)
{
    struct tm_agent_shipper *sh = ag->shipper;
    DIR *d;
    struct dirent *e;

    if (!sh)
        return;
    d = opendir(ag->jobs_dir);
    while (d && (e = readdir(d)) != NULL) {
        size_t n = strlen(e->d_name);
        if (n > 5 && strcmp(e->d_name + n - 5, ".ship") == 0 && !side_load(sh, e->d_name)) {
            char path[PATH_MAX + 300];
            snprintf(path, sizeof(path), "%s/%s", ag->jobs_dir, e->d_name);
            unlink(path);
        }
    }
    if (d)
        closedir(d);
    ship_again(sh, 0);
}

void tm_agent_ship_stop(struct tm_agent *ag)
{
    if (ag->shipper && ag->shipper->timer_open)
        uv_timer_stop(&ag->shipper->timer);
}

void tm_agent_ship_close(struct tm_agent *ag)
{
    if (ag->shipper && ag->shipper->timer_open) {
        uv_close((uv_handle_t *)&ag->shipper->timer, NULL);
        ag->shipper->timer_open = false;
    }
}

void tm_agent_ship_free(struct tm_agent *ag)
{
    struct tm_agent_shipper *sh = ag->shipper;

    if (!sh)
        return;
    while (sh->ships) {
        struct ship *s = sh->ships;
        sh->ships = s->next;
        free(s);
    }
    free(sh);
    ag->shipper = NULL;
}
