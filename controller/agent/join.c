/*
 * controller/agent/join.c: `tarmac agent --join`, a machine tarmac does not
 * buy joining an owned pool (docs/owned.md, POST /v1/agent/join,
 * controller/api/agent_join.c).
 *
 * The machine makes its node key itself, once, and keeps it in
 * DIR/node_key (0600) before it first asks: a join whose answer is lost
 * (the agent killed, the network cut) is asked again with the same key, and
 * the controller answers with the node that key already has, spending no
 * second use of the join token.  Every start proves the key again (with
 * the token too, which only a first join spends) and takes the fresh agent
 * token it is given; the hardware report goes each time, so a machine whose
 * GPUs changed while it was away is cordoned (the decision says what
 * changed).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <openssl/crypto.h>
#include <openssl/rand.h>

#include "controller/agent/internal.h"
#include "core/err.h"
#include "core/log.h"

#define NODE_KEY_BYTES 32

void tm_agent_gpu_model(const char *name, char *out, size_t size)
{
    static const char *const vendor[] = {"NVIDIA", "Tesla", "GeForce", "Quadro"};
    char word[96];
    const char *p = name;

    /* The first word past the vendor's and the series' names, cut at its
     * first '-': "NVIDIA H100 80GB HBM3" is H100, "NVIDIA A100-SXM4-80GB"
     * A100, "Tesla V100-SXM2-16GB" V100. */
    for (;;) {
        size_t n;
        bool skip = false;

        while (*p == ' ')
            p++;
        n = strcspn(p, " ");
        if (n == 0)
            break;
        snprintf(word, sizeof(word), "%.*s", (int)(n < sizeof(word) ? n : sizeof(word) - 1), p);
        for (size_t k = 0; k < sizeof(vendor) / sizeof(vendor[0]); k++)
            skip = skip || strcmp(word, vendor[k]) == 0;
        p += n;
        if (skip)
            continue;
        word[strcspn(word, "-")] = '\0';
        for (char *c = word; *c; c++)
            if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
                  *c == '.' || *c == '_'))
                *c = '_';
        snprintf(out, size, "%s", word);
        return;
    }
    snprintf(out, size, "unknown");
}

/* DIR/node_key: read it, or make and keep one (atomically, 0600). */
static int node_key(struct tm_agent *ag)
{
    char path[PATH_MAX + 16], tmp[PATH_MAX + 32];
    unsigned char raw[NODE_KEY_BYTES];
    char hex[2 * NODE_KEY_BYTES + 2];
    ssize_t n;
    int fd, r = 0;

    snprintf(path, sizeof(path), "%s/node_key", ag->o.work_dir);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        n = read(fd, ag->node_key, sizeof(ag->node_key) - 1);
        close(fd);
        if (n < 32)
            return TM_EINVAL;
        ag->node_key[n] = '\0';
        ag->node_key[strcspn(ag->node_key, "\r\n")] = '\0';
        return strlen(ag->node_key) >= 32 ? 0 : TM_EINVAL;
    }
    if (errno != ENOENT)
        return -errno;
    if (RAND_bytes(raw, sizeof(raw)) != 1)
        return TM_EINVAL;
    for (size_t i = 0; i < sizeof(raw); i++)
        snprintf(hex + 2 * i, 3, "%02x", raw[i]);
    OPENSSL_cleanse(raw, sizeof(raw));
    snprintf(tmp, sizeof(tmp), "%s/node_key.tmp", ag->o.work_dir);
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return -errno;
    size_t len = strlen(hex), off = 0;
    while (off < len && r == 0) {
        ssize_t w = write(fd, hex + off, len - off);
        if (w < 0)
            r = -errno;
        else
            off += (size_t)w;
    }
    if (r == 0 && fsync(fd) != 0)
        r = -errno;
    close(fd);
    if (r == 0 && rename(tmp, path) != 0)
        r = -errno;
    if (r == 0)
        snprintf(ag->node_key, sizeof(ag->node_key), "%s", hex);
    OPENSSL_cleanse(hex, sizeof(hex));
    return r;
}

/* The machine's hardware: the GPU source's GPUs (their count, the first
 * one's model and memory), the system's CPUs and memory. */
static int hardware(struct tm_agent *ag, cJSON *hw)
{
    struct tm_gpu_reading *r = calloc(1, sizeof(*r));
    char err[256], model[64];
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);

    if (!r)
        return TM_ENOMEM;
    if (ag->gpu && tm_gpu_source_read(ag->gpu, 0, r, err, sizeof(err)) < 0) {
        tm_log_error("could not read the GPUs for the hardware report", "err=\"%s\"", err);
        free(r);
        return TM_EINVAL;
    }
    tm_agent_gpu_model(r->count > 0 ? r->info[0].name : "", model, sizeof(model));
    bool ok = cJSON_AddNumberToObject(hw, "gpus", r->count) &&
              (r->count == 0 || cJSON_AddStringToObject(hw, "gpu_model", model)) &&
              cJSON_AddNumberToObject(hw, "gpu_memory_mib",
                                      (double)(r->count > 0 ? r->info[0].memory_total_mib : 0)) &&
              cJSON_AddNumberToObject(hw, "cpus", (double)(cpus > 0 ? cpus : 1)) &&
              cJSON_AddNumberToObject(hw, "memory_mib",
                                      (double)(pages > 0 && page > 0
                                                   ? (int64_t)pages * page / (1024 * 1024) : 1));
    free(r);
    return ok ? 0 : TM_ENOMEM;
}

int tm_agent_join_prepare(struct tm_agent *ag)
{
    int r = node_key(ag);

    if (r < 0) {
        tm_log_error("could not read or make the node key", "dir=%s err=%s", ag->o.work_dir,
                     tm_strerror(r));
        return r;
    }
    tm_log_add_secret(ag->node_key);
    return 0;
}

/* The server's message of a refusal, for the log (never a secret: the
 * controller echoes none). */
static void refusal(const struct tm_http_response *resp, char *out, size_t size)
{
    cJSON *doc = cJSON_ParseWithLength(resp->body ? resp->body : "", resp->body_len);
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(doc, "error");
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(doc, "field");

    snprintf(out, size, "%s%s%s", cJSON_IsString(f) ? f->valuestring : "", cJSON_IsString(f) ? ": " : "",
             cJSON_IsString(e) ? e->valuestring : "no message");
    cJSON_Delete(doc);
}

static void on_join(const struct tm_http_response *resp, void *data)
{
    struct tm_agent *ag = data;
    char why[512];

    if (ag->shutting_down)
        return;
    if (resp->status == 0 && (resp->http_status == 200 || resp->http_status == 201)) {
        cJSON *doc = cJSON_ParseWithLength(resp->body, resp->body_len);
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(doc, "node_id");
        const cJSON *tok = cJSON_GetObjectItemCaseSensitive(doc, "token");
        bool cordoned = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(doc, "cordoned"));
        if (!cJSON_IsNumber(id) || id->valuedouble < 1 || !cJSON_IsString(tok) ||
            !tok->valuestring[0]) {
            cJSON_Delete(doc);
            tm_log_error("could not read the join answer", "http=%ld", resp->http_status);
            tm_agent_stop(ag, 1);
            return;
        }
        ag->o.node_id = (int64_t)id->valuedouble;
        tm_log_add_secret(tok->valuestring);
        int r = tm_agent_save_token(ag, tok->valuestring);
        char *token = r == 0 ? strdup(tok->valuestring) : NULL;
        OPENSSL_cleanse(tok->valuestring, strlen(tok->valuestring));
        cJSON_Delete(doc);
        if (!token) {
            tm_log_error("could not store the agent token", "dir=%s err=%s", ag->o.work_dir,
                         tm_strerror(r < 0 ? r : TM_ENOMEM));
            tm_agent_stop(ag, 1);
            return;
        }
        free(ag->token);
        ag->token = token;
        tm_log_info(resp->http_status == 201 ? "joined the owned pool" : "rejoined: this machine's node is back",
                    "pool=%s node=%lld", ag->o.join_pool, (long long)ag->o.node_id);
        if (cordoned)
            tm_log_warn("the node is cordoned: this machine reports other hardware than when it "
                        "joined (see tarmac why node)", "node=%lld", (long long)ag->o.node_id);
        tm_agent_begin(ag);
        return;
    }
    if (resp->status == 0 && resp->http_status >= 400 && resp->http_status < 500 &&
        resp->http_status != 429) {
        refusal(resp, why, sizeof(why));
        tm_log_error("the controller refused the join", "pool=%s http=%ld why=\"%s\"", ag->o.join_pool,
                     resp->http_status, why);
        tm_agent_stop(ag, 1);
        return;
    }
    ag->backoff_ms = tm_agent_next_backoff(ag, ag->backoff_ms);
    tm_log(ag->backoff_ms == 1000 ? TM_LOG_WARN : TM_LOG_DEBUG, "could not join, retrying with backoff",
           "err=\"%s\" http=%ld retry_ms=%lld",
           resp->status < 0 ? tm_strerror(resp->status) : "server error", resp->http_status,
           (long long)ag->backoff_ms);
    uv_timer_start(&ag->enroll_timer, tm_agent_on_enroll_timer, (uint64_t)ag->backoff_ms, 0);
}

void tm_agent_join_send(struct tm_agent *ag)
{
    char url[1024];
    cJSON *root = cJSON_CreateObject(), *hw = cJSON_CreateObject();
    char *body = NULL;

    if (root && hw && cJSON_AddStringToObject(root, "pool", ag->o.join_pool) &&
        cJSON_AddStringToObject(root, "node_key", ag->node_key) &&
        (!ag->o.join_token || cJSON_AddStringToObject(root, "join_token", ag->o.join_token)) &&
        (!ag->address[0] || cJSON_AddStringToObject(root, "address", ag->address)) &&
        hardware(ag, hw) == 0 && cJSON_AddItemToObject(root, "hardware", hw)) {
        hw = NULL;
        body = cJSON_PrintUnformatted(root);
    }
    cJSON_Delete(hw);
    /* the document's copies of the key and the token: wiped, then freed */
    for (const char *k = "node_key"; k; k = strcmp(k, "node_key") == 0 ? "join_token" : NULL) {
        cJSON *v = cJSON_GetObjectItemCaseSensitive(root, k);
        if (cJSON_IsString(v))
            OPENSSL_cleanse(v->valuestring, strlen(v->valuestring));
    }
    cJSON_Delete(root);
    if (!body) {
        tm_agent_stop(ag, 1);
        return;
    }
    tm_agent_url(ag, url, sizeof(url), "/v1/agent/join");
    if (tm_agent_post_as(ag, url, body, false, on_join, ag) < 0)
        uv_timer_start(&ag->enroll_timer, tm_agent_on_enroll_timer, 1000, 0);
    OPENSSL_cleanse(body, strlen(body));
    free(body);
}
