/*
 * bench/load_driver.c: the closed-loop load driver of load_driver.h.  One
 * curl multi handle, one easy handle per connection; each finished answer
 * is counted (if sent after the warm-up and answered inside the window) and
 * its connection immediately sent the next request from the hooks.
 */
#define _POSIX_C_SOURCE 200809L
#include "load_driver.h"

#include <errno.h>
#include <inttypes.h>
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
    const struct load_hooks *h;
    const char *url;
    char endpoint[512];
    unsigned conns;
    double duration_s, warmup_s;
    uint64_t max_requests;
    char (*tokens)[TOKEN_MAX];
    long long *ids;
    unsigned ntokens, next_token;
    uint64_t seq;
    /* Counted (after the warm-up) answers. */
    uint32_t *lat_us;
    uint64_t nlat, counted_ok;
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

/* One token a line, or "ID TOKEN" a line when the hooks ask for ids. */
static int load_tokens(struct bench *b, const char *path)
{
    FILE *f = fopen(path, "r");
    char line[TOKEN_MAX + 2];

    if (!f) {
        fprintf(stderr, "%s: could not open %s: %s\n", b->h->name, path, strerror(errno));
        return -1;
    }
    b->tokens = calloc(MAX_TOKENS, sizeof(*b->tokens));
    b->ids = calloc(MAX_TOKENS, sizeof(*b->ids));
    if (!b->tokens || !b->ids) {
        fclose(f);
        return -1;
    }
    while (b->ntokens < MAX_TOKENS && fgets(line, sizeof(line), f)) {
        size_t n = strcspn(line, "\r\n");
        const char *tok = line;

        line[n] = '\0';
        if (n == 0 || n >= TOKEN_MAX)
            continue;
        if (b->h->ids_in_tokens) {
            char *sp = strchr(line, ' ');
            if (!sp)
                continue;
            *sp = '\0';
            b->ids[b->ntokens] = strtoll(line, NULL, 10);
            tok = sp + 1;
        }
        memcpy(b->tokens[b->ntokens++], tok, strlen(tok) + 1);
    }
    fclose(f);
    if (b->ntokens == 0) {
        fprintf(stderr, "%s: no tokens in %s\n", b->h->name, path);
        return -1;
    }
    return 0;
}

/* Point the handle at the next request: the next token (and its id), the
 * URL and body the hooks write for it. */
static int prepare(struct bench *b, struct conn *c)
{
    char auth[TOKEN_MAX + 32];
    unsigned k = b->next_token;
    struct load_request r = {.base_url = b->url, .id = b->ids[k], .seq = b->seq++,
                             .url = c->url, .url_cap = sizeof(c->url),
                             .body = c->body, .body_cap = sizeof(c->body)};
    int n;

    curl_slist_free_all(c->headers);
    c->headers = NULL;
    snprintf(auth, sizeof(auth), "Authorization: Bearer %s", b->tokens[k]);
    b->next_token = (k + 1) % b->ntokens;
    c->headers = curl_slist_append(c->headers, auth);
    if (c->headers)
        c->headers = curl_slist_append(c->headers, "Content-Type: application/json");
    if (!c->headers)
        return -1;
    n = b->h->prepare(b->h->ctx, &r);
    if (n < 0 || (size_t)n >= sizeof(c->body))
        return -1;
    curl_easy_setopt(c->easy, CURLOPT_URL, c->url);
    curl_easy_setopt(c->easy, CURLOPT_HTTPHEADER, c->headers);
    curl_easy_setopt(c->easy, CURLOPT_POSTFIELDS, c->body);
    curl_easy_setopt(c->easy, CURLOPT_POSTFIELDSIZE, (long)n);
    return 0;
}

static int setup_conn(struct conn *c)
{
    c->easy = curl_easy_init();
    if (!c->easy)
        return -1;
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

static void usage(const struct load_hooks *h)
{
    fprintf(stderr, "usage: %s --url http://127.0.0.1:PORT --tokens FILE [--conns N]"
                    " [--duration S] [--warmup S] [--max-requests N]%s\n",
            h->name, h->usage_extra ? h->usage_extra : "");
}

/* The summary table, then the RESULT line; returns the exit status. */
static int report(const struct bench *b, uint64_t measure_start, uint64_t measure_end)
{
    const struct load_hooks *h = b->h;
    double secs = (double)(measure_end - measure_start) / 1e9;
    uint64_t errors = b->curl_errors + b->other_status;
    double rps = secs > 0 ? (double)b->counted_ok / secs : 0;

    for (int s = 0; s < 600; s++)
        if (s != h->ok_status)
            errors += b->by_status[s];
    printf("%s: %s, %u connections, %u tokens, %.1f s measured after %.1f s warm-up\n", h->name,
           b->endpoint, b->conns, b->ntokens, secs, b->warmup_s);
    printf("  answers counted  %" PRIu64 " (%ld: %" PRIu64 ", errors: %" PRIu64 ")\n", b->nlat,
           h->ok_status, b->counted_ok, errors);
    printf("  %-17s%.0f\n", h->rate_label, rps);
    printf("  latency ms       p50 %.2f  p95 %.2f  p99 %.2f  max %.2f\n",
           pct_ms(b->lat_us, b->nlat, 0.50), pct_ms(b->lat_us, b->nlat, 0.95),
           pct_ms(b->lat_us, b->nlat, 0.99), b->nlat ? b->lat_us[b->nlat - 1] / 1000.0 : 0.0);
    for (int s = 0; s < 600; s++)
        if (s != h->ok_status && b->by_status[s])
            printf("  status %d        %" PRIu64 "\n", s, b->by_status[s]);
    if (b->curl_errors)
        printf("  transport errors %" PRIu64 "\n", b->curl_errors);
    /* total_created: every ok_status answer seen, warm-up and stragglers
     * included, for checking against the rows the requests wrote. */
    printf("RESULT rps=%.0f ok=%" PRIu64 " errors=%" PRIu64 " p50_ms=%.2f p95_ms=%.2f p99_ms=%.2f"
           " max_ms=%.2f secs=%.2f total_created=%" PRIu64 "\n",
           rps, b->counted_ok, errors, pct_ms(b->lat_us, b->nlat, 0.50),
           pct_ms(b->lat_us, b->nlat, 0.95), pct_ms(b->lat_us, b->nlat, 0.99),
           b->nlat ? b->lat_us[b->nlat - 1] / 1000.0 : 0.0, secs, b->counted_ok + b->warm_sent);
    return errors ? 3 : 0;
}

/* -1: bad arguments (usage printed). */
static int parse_args(struct bench *b, const char **tokens, int argc, char **argv)
{
    const struct load_hooks *h = b->h;

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) {
            usage(h);
            return -1;
        }
        if (strcmp(a, "--url") == 0)
            b->url = v;
        else if (strcmp(a, "--tokens") == 0)
            *tokens = v;
        else if (strcmp(a, "--conns") == 0)
            b->conns = (unsigned)strtoul(v, NULL, 10);
        else if (strcmp(a, "--duration") == 0)
            b->duration_s = strtod(v, NULL);
        else if (strcmp(a, "--warmup") == 0)
            b->warmup_s = strtod(v, NULL);
        else if (strcmp(a, "--max-requests") == 0)
            b->max_requests = strtoull(v, NULL, 10);
        else if (!h->option || h->option(h->ctx, a, v) != 1) {
            usage(h);
            return -1;
        }
        i++;
    }
    if (!b->url || !*tokens || b->conns == 0 || b->conns > MAX_CONNS || b->duration_s <= 0 ||
        b->duration_s > 600 || b->warmup_s < 0 || b->max_requests == 0 ||
        b->max_requests > 50000000 || (h->check && !h->check(h->ctx))) {
        usage(h);
        return -1;
    }
    if (!loopback_url(b->url)) {
        fprintf(stderr, "%s: loopback only (http://127.0.0.1:PORT, localhost or [::1])\n", h->name);
        return -1;
    }
    return 0;
}

int load_driver_main(const struct load_hooks *h, int argc, char **argv)
{
    struct bench b = {.h = h, .conns = 64, .duration_s = 20, .warmup_s = 1,
                      .max_requests = 2000000};
    const char *tokens = NULL;
    struct conn *conns = NULL;
    CURLM *multi = NULL;
    uint64_t t0, warm_end, end, measure_start = 0, measure_end = 0, inflight = 0;
    bool stopping = false;
    int rc = 1;

    if (parse_args(&b, &tokens, argc, argv) < 0)
        return 2;
    snprintf(b.endpoint, sizeof(b.endpoint), "%s%s", b.url, h->endpoint);
    if (load_tokens(&b, tokens) < 0)
        goto out;
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
        if (setup_conn(&conns[i]) < 0 || prepare(&b, &conns[i]) < 0)
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
                    if (status == h->ok_status)
                        b.counted_ok++;
                }
                if (b.nlat < b.max_requests) {
                    uint64_t us = (t - c->start_ns) / 1000;
                    b.lat_us[b.nlat++] = us > UINT32_MAX ? UINT32_MAX : (uint32_t)us;
                }
            } else if (msg->data.result == CURLE_OK) {
                curl_easy_getinfo(c->easy, CURLINFO_RESPONSE_CODE, &status);
                if (status == h->ok_status)
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
    qsort(b.lat_us, b.nlat, sizeof(*b.lat_us), cmp_u32);
    rc = report(&b, measure_start, measure_end);
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
    free(b.ids);
    curl_global_cleanup();
    return rc;
}
