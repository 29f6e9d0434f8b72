/*
 * bench/bench_heartbeat.c: a closed-loop load generator for node agents'
 * heartbeats, POST /v1/nodes/{id}/heartbeat with 8 GPU samples each
 * (libcurl multi, HTTP/1.1 keep-alive), loopback only.  Run it through
 * bench/run-heartbeat.sh.  Its loop is bench_api_submit.c's.
 *
 *   bench_heartbeat --url http://127.0.0.1:PORT --tokens FILE
 *                   [--conns 64] [--duration 20] [--max-requests 2000000]
 *                   [--warmup 1]
 *
 * FILE has one "NODE_ID AGENT_TOKEN" a line: each request is one node's
 * heartbeat with its own agent token, rotating over the nodes (a fleet of
 * simulated nodes).  Each of --conns connections keeps one request in
 * flight.  The first --warmup
 * seconds are sent but not counted.  Latency is from handing the request
 * to libcurl to its complete answer.  Prints a summary, then one line
 * "RESULT key=value ..." for scripts.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <curl/curl.h>

#define MAX_CONNS 1024
#define MAX_TOKENS 4096
#define TOKEN_MAX 256

struct conn {
    CURL *easy;
    struct curl_slist *headers;
    uint64_t start_ns;
    char body[2048];
    char url[600];
};

struct bench {
    const char *url;
    char endpoint[512];
    unsigned conns;
    double duration_s, warmup_s;
    uint64_t max_requests;
    const char *team;
    int gpus;
    char (*tokens)[TOKEN_MAX];
    long long *nodes;
    unsigned ntokens, next_token;
    uint64_t seq;
    /* Counted (after the warm-up) answers. */
    uint32_t *lat_us;
    uint64_t nlat, sent, counted_ok;
    uint64_t by_status[600];
    uint64_t curl_errors, other_status;
    uint64_t warm_sent;
};

static uint64_t now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static size_t discard(char *ptr, size_t size, size_t nmemb, void *data)
{
    (void)ptr;
    (void)data;
    return size * nmemb;
}

static bool loopback_url(const char *url)
{
    static const char *const ok[] = {"http://127.0.0.1:", "http://localhost:", "http://[::1]:"};

    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
        if (strncmp(url, ok[i], strlen(ok[i])) == 0)
            return true;
    return false;
}

static int load_tokens(struct bench *b, const char *path)
{
    FILE *f = fopen(path, "r");
    char line[TOKEN_MAX + 2];

    if (!f) {
        fprintf(stderr, "bench_heartbeat: could not open %s: %s\n", path, strerror(errno));
        return -1;
    }
    b->tokens = calloc(MAX_TOKENS, sizeof(*b->tokens));
    b->nodes = calloc(MAX_TOKENS, sizeof(*b->nodes));
    if (!b->tokens || !b->nodes) {
        fclose(f);
        return -1;
    }
    while (b->ntokens < MAX_TOKENS && fgets(line, sizeof(line), f)) {
        size_t n = strcspn(line, "\r\n");
        char *sp;
        line[n] = '\0';
        sp = strchr(line, ' ');
        if (n == 0 || n >= TOKEN_MAX || !sp)
            continue;
        *sp = '\0';
        b->nodes[b->ntokens] = strtoll(line, NULL, 10);
        memcpy(b->tokens[b->ntokens++], sp + 1, strlen(sp + 1) + 1);
    }
    fclose(f);
    if (b->ntokens == 0) {
        fprintf(stderr, "bench_heartbeat: no tokens in %s\n", path);
        return -1;
    }
    return 0;
}

/* Point the handle at the next request: the next node, its token, 8
 * samples stamped with fresh times (the samples' key is node, GPU, time). */
static int prepare(struct bench *b, struct conn *c)
{
    char auth[TOKEN_MAX + 32];
    unsigned k = b->next_token;
    int64_t at = 1700000000000LL + (int64_t)b->seq++ * 10;
    size_t n = 0;

    curl_slist_free_all(c->headers);
    c->headers = NULL;
    snprintf(auth, sizeof(auth), "Authorization: Bearer %s", b->tokens[k]);
    b->next_token = (k + 1) % b->ntokens;
    c->headers = curl_slist_append(c->headers, auth);
    if (c->headers)
        c->headers = curl_slist_append(c->headers, "Content-Type: application/json");
    if (!c->headers)
        return -1;
    snprintf(c->url, sizeof(c->url), "%s/v1/nodes/%lld/heartbeat", b->url, b->nodes[k]);
    n += (size_t)snprintf(c->body + n, sizeof(c->body) - n, "{\"samples\":[");
    for (int g = 0; g < 8; g++)
        n += (size_t)snprintf(c->body + n, sizeof(c->body) - n,
                              "%s{\"gpu_index\":%d,\"at_ms\":%lld,\"util_percent\":%d.5,"
                              "\"memory_used_mib\":%d,\"memory_total_mib\":81920,"
                              "\"temperature_c\":41,\"power_w\":180.5}",
                              g ? "," : "", g, (long long)at, (int)((at / 10 + g) % 100), 1024 * g);
    n += (size_t)snprintf(c->body + n, sizeof(c->body) - n, "],\"running\":[]}");
    if (n >= sizeof(c->body))
        return -1;
    curl_easy_setopt(c->easy, CURLOPT_URL, c->url);
    curl_easy_setopt(c->easy, CURLOPT_HTTPHEADER, c->headers);
    curl_easy_setopt(c->easy, CURLOPT_POSTFIELDS, c->body);
    curl_easy_setopt(c->easy, CURLOPT_POSTFIELDSIZE, (long)n);
    return 0;
}

static int setup_conn(struct bench *b, struct conn *c)
{
    c->easy = curl_easy_init();
    if (!c->easy)
        return -1;
    curl_easy_setopt(c->easy, CURLOPT_URL, b->endpoint);
    curl_easy_setopt(c->easy, CURLOPT_HTTP_VERSION, CURL_HTTP_VERSION_1_1);
    curl_easy_setopt(c->easy, CURLOPT_WRITEFUNCTION, discard);
    curl_easy_setopt(c->easy, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c->easy, CURLOPT_TCP_NODELAY, 1L);
    curl_easy_setopt(c->easy, CURLOPT_TIMEOUT_MS, 10000L);
    curl_easy_setopt(c->easy, CURLOPT_PRIVATE, c);
    curl_easy_setopt(c->easy, CURLOPT_PROTOCOLS_STR, "http");
    return 0;
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

    return (x > y) - (x < y);
}

static double pct_ms(const uint32_t *v, uint64_t n, double p)
{
    uint64_t i;

    if (n == 0)
        return 0.0;
    i = (uint64_t)(p * (double)(n - 1) + 0.5);
    return v[i] / 1000.0;
}

static void usage(void)
{
    fprintf(stderr, "usage: bench_heartbeat --url http://127.0.0.1:PORT --tokens FILE [--conns N]"
                    " [--duration S] [--warmup S] [--max-requests N]\n");
}

int main(int argc, char **argv)
{
    struct bench b = {.conns = 64, .duration_s = 20, .warmup_s = 1, .max_requests = 2000000,
                      .team = "bench", .gpus = 1};
    const char *tokens = NULL;
    struct conn *conns = NULL;
    CURLM *multi = NULL;
    uint64_t t0, warm_end, end, measure_start = 0, measure_end = 0, inflight = 0;
    bool stopping = false;
    int rc = 1;

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) {
            usage();
            return 2;
        }
        if (strcmp(a, "--url") == 0)
            b.url = v;
        else if (strcmp(a, "--tokens") == 0)
            tokens = v;
        else if (strcmp(a, "--conns") == 0)
            b.conns = (unsigned)strtoul(v, NULL, 10);
        else if (strcmp(a, "--duration") == 0)
            b.duration_s = strtod(v, NULL);
        else if (strcmp(a, "--warmup") == 0)
            b.warmup_s = strtod(v, NULL);
        else if (strcmp(a, "--max-requests") == 0)
            b.max_requests = strtoull(v, NULL, 10);
        else if (strcmp(a, "--team") == 0)
            b.team = v;
        else if (strcmp(a, "--gpus") == 0)
            b.gpus = atoi(v) > 0 ? atoi(v) : 1;
        else {
            usage();
            return 2;
        }
        i++;
    }
    if (!b.url || !tokens || b.conns == 0 || b.conns > MAX_CONNS || b.duration_s <= 0 ||
        b.duration_s > 600 || b.warmup_s < 0 || b.max_requests == 0 || b.max_requests > 50000000 ||
        strlen(b.team) > 60) {
        usage();
        return 2;
    }
    if (!loopback_url(b.url)) {
        fprintf(stderr, "bench_heartbeat: loopback only (http://127.0.0.1:PORT, localhost or [::1])\n");
        return 2;
    }
    snprintf(b.endpoint, sizeof(b.endpoint), "%s/v1/nodes/{id}/heartbeat", b.url);
    if (load_tokens(&b, tokens) < 0)
        return 1;
    b.lat_us = malloc(b.max_requests * sizeof(*b.lat_us));
    conns = calloc(b.conns, sizeof(*conns));
    if (!b.lat_us || !conns || curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
        goto out;
    multi = curl_multi_init();
    if (!multi)
        goto out;
    curl_multi_setopt(multi, CURLMOPT_MAX_HOST_CONNECTIONS, (long)b.conns);
    curl_multi_setopt(multi, CURLMOPT_MAXCONNECTS, (long)b.conns);
    curl_multi_setopt(multi, CURLMOPT_PIPELINING, (long)CURLPIPE_NOTHING);

    t0 = now_ns();
    warm_end = t0 + (uint64_t)(b.warmup_s * 1e9);
    end = warm_end + (uint64_t)(b.duration_s * 1e9);
    for (unsigned i = 0; i < b.conns; i++) {
        if (setup_conn(&b, &conns[i]) < 0 || prepare(&b, &conns[i]) < 0)
            goto out;
        conns[i].start_ns = now_ns();
        curl_multi_add_handle(multi, conns[i].easy);
        inflight++;
    }
    while (inflight > 0) {
        int running = 0, left = 0;
        CURLMsg *msg;

        if (curl_multi_perform(multi, &running) != CURLM_OK)
            goto out;
        while ((msg = curl_multi_info_read(multi, &left))) {
            struct conn *c = NULL;
            uint64_t t = now_ns();
            long status = 0;

            if (msg->msg != CURLMSG_DONE)
                continue;
            curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&c);
            curl_multi_remove_handle(multi, c->easy);
            inflight--;
            if (c->start_ns >= warm_end && t <= end) {
                /* Counted: sent after the warm-up, answered in the window. */
                if (measure_start == 0)
                    measure_start = warm_end;
                if (msg->data.result != CURLE_OK) {
                    b.curl_errors++;
                } else {
                    curl_easy_getinfo(c->easy, CURLINFO_RESPONSE_CODE, &status);
                    if (status >= 100 && status < 600)
                        b.by_status[status]++;
                    else
                        b.other_status++;
                    if (status == 200)
                        b.counted_ok++;
                }
                if (b.nlat < b.max_requests) {
                    uint64_t us = (t - c->start_ns) / 1000;
                    b.lat_us[b.nlat++] = us > UINT32_MAX ? UINT32_MAX : (uint32_t)us;
                }
            } else if (msg->data.result == CURLE_OK) {
                curl_easy_getinfo(c->easy, CURLINFO_RESPONSE_CODE, &status);
                if (status == 200)
                    b.warm_sent++; /* committed but outside the window */
            }
            if (t >= end || b.nlat >= b.max_requests)
                stopping = true;
            if (stopping)
                continue;
            if (prepare(&b, c) < 0)
                goto out;
            c->start_ns = now_ns();
            curl_multi_add_handle(multi, c->easy);
            inflight++;
        }
        if (inflight > 0 && curl_multi_poll(multi, NULL, 0, 100, NULL) != CURLM_OK)
            goto out;
    }
    measure_end = end < now_ns() ? end : now_ns();
    if (measure_start == 0)
        measure_start = warm_end;

    {
        double secs = (double)(measure_end - measure_start) / 1e9;
        uint64_t errors = b.curl_errors + b.other_status;
        double rps = secs > 0 ? (double)b.counted_ok / secs : 0;

        qsort(b.lat_us, b.nlat, sizeof(*b.lat_us), cmp_u32);
        for (int s = 0; s < 600; s++)
            if (s != 200)
                errors += b.by_status[s];
        printf("bench_heartbeat: %s, %u connections, %u tokens, %.1f s measured after %.1f s warm-up\n",
               b.endpoint, b.conns, b.ntokens, secs, b.warmup_s);
        printf("  answers counted  %" PRIu64 " (200: %" PRIu64 ", errors: %" PRIu64 ")\n", b.nlat,
               b.counted_ok, errors);
        printf("  heartbeats/s     %.0f\n", rps);
        printf("  latency ms       p50 %.2f  p95 %.2f  p99 %.2f  max %.2f\n",
               pct_ms(b.lat_us, b.nlat, 0.50), pct_ms(b.lat_us, b.nlat, 0.95),
               pct_ms(b.lat_us, b.nlat, 0.99), b.nlat ? b.lat_us[b.nlat - 1] / 1000.0 : 0.0);
        for (int s = 0; s < 600; s++)
            if (s != 200 && b.by_status[s])
                printf("  status %d        %" PRIu64 "\n", s, b.by_status[s]);
        if (b.curl_errors)
            printf("  transport errors %" PRIu64 "\n", b.curl_errors);
        /* total_created: every 201 seen, warm-up and stragglers included,
         * for checking against the rows in jobs. */
        printf("RESULT rps=%.0f ok=%" PRIu64 " errors=%" PRIu64 " p50_ms=%.2f p95_ms=%.2f p99_ms=%.2f"
               " max_ms=%.2f secs=%.2f total_created=%" PRIu64 "\n",
               rps, b.counted_ok, errors, pct_ms(b.lat_us, b.nlat, 0.50),
               pct_ms(b.lat_us, b.nlat, 0.95), pct_ms(b.lat_us, b.nlat, 0.99),
               b.nlat ? b.lat_us[b.nlat - 1] / 1000.0 : 0.0, secs, b.counted_ok + b.warm_sent);
        rc = errors ? 3 : 0;
    }
out:
    if (conns) {
        for (unsigned i = 0; i < b.conns; i++) {
            if (conns[i].easy) {
                if (multi)
                    curl_multi_remove_handle(multi, conns[i].easy);
                curl_easy_cleanup(conns[i].easy);
            }
            curl_slist_free_all(conns[i].headers);
        }
    }
    if (multi)
        curl_multi_cleanup(multi);
    free(conns);
    free(b.lat_us);
    free(b.tokens);
    curl_global_cleanup();
    return rc;
}
