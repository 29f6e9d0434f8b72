/*
 * controller/cli/http.c: see cli/http.h.
 */
#include "controller/cli/http.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <curl/curl.h>
#include <openssl/crypto.h>

#include "controller/cli/cli.h"
#include "controller/spec/job_spec.h"
#include "controller/spec/json_body.h"

/* Lists are paged at 1000 items, a few hundred bytes each: 64 MiB is far
 * past any real answer and bounds a misbehaving server. */
#define REPLY_MAX (64u * 1024u * 1024u)
/* Tries of one request the server answers 429 (rate limited), about one a
 * second: past a minute something else is wrong. */
#define RATE_RETRIES 60
/* A request with an Idempotency-Key is sent again on 503 or a lost
 * connection this many times in all (about 20 s: a failover). */
#define IDEM_RETRIES 12

struct reply_buf {
    char *data;
    size_t len, cap;
    bool too_big;
};

static size_t on_data(char *ptr, size_t size, size_t nmemb, void *userdata)
{
    struct reply_buf *b = userdata;
    size_t n = size * nmemb;

    if (b->len + n > REPLY_MAX) {
        b->too_big = true;
        return 0;   /* curl stops with CURLE_WRITE_ERROR */
    }
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *p = realloc(b->data, cap);
        if (!p)
            return 0;
        b->data = p;
        b->cap = cap;
    }
    memcpy(b->data + b->len, ptr, n);
    b->len += n;
    b->data[b->len] = '\0';
    return n;
}

int tm_cli_http_init(struct tm_cli_http *h, const char *cmd, const struct tm_cli_endpoint *ep,
                     bool verbose)
{
    struct curl_slist *l;
    char *auth = NULL;
    size_t n;

    *h = (struct tm_cli_http){.cmd = cmd, .ep = ep, .verbose = verbose};
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK || !(h->curl = curl_easy_init())) {
        fprintf(stderr, "tarmac %s: could not start the HTTP client\n", cmd);
        return TM_EXIT_FAIL;
    }
    l = curl_slist_append(NULL, "Accept: application/json");
    h->headers = l;
    if (l && ep->token) {
        n = strlen("Authorization: Bearer ") + strlen(ep->token) + 1;
        auth = malloc(n);
        if (auth) {
            snprintf(auth, n, "Authorization: Bearer %s", ep->token);
            l = curl_slist_append(h->headers, auth);
            OPENSSL_cleanse(auth, n);
            free(auth);
        }
        if (!auth || !l)
            l = NULL;
        else
            h->headers = l;
    }
    if (!l) {
        fprintf(stderr, "tarmac %s: out of memory\n", cmd);
        tm_cli_http_release(h);
        return TM_EXIT_FAIL;
    }
    curl_easy_setopt(h->curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h->curl, CURLOPT_CONNECTTIMEOUT_MS, 10000L);
    curl_easy_setopt(h->curl, CURLOPT_TIMEOUT_MS, 120000L);
    curl_easy_setopt(h->curl, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(h->curl, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(h->curl, CURLOPT_USERAGENT, "tarmac-cli/1");
    curl_easy_setopt(h->curl, CURLOPT_WRITEFUNCTION, on_data);
    if (ep->ca_file)
        curl_easy_setopt(h->curl, CURLOPT_CAINFO, ep->ca_file);
    return 0;
}

/* "tarmac: 403: role viewer may not submit jobs (field role)" from an error
 * answer, or its first line when it is not the API's JSON. */
static void print_refusal(long status, const char *body, size_t len)
{
    cJSON *doc = body ? tm_json_parse_strict(body, len) : NULL;
    const cJSON *err = cJSON_GetObjectItemCaseSensitive(doc, "error");
    const cJSON *field = cJSON_GetObjectItemCaseSensitive(doc, "field");

    if (cJSON_IsString(err)) {
        fprintf(stderr, "tarmac: %ld: %s", status, err->valuestring);
        if (cJSON_IsString(field))
            fprintf(stderr, " (field %s)", field->valuestring);
        fputc('\n', stderr);
    } else {
        size_t n = 0;
        while (body && n < len && n < 200 && body[n] != '\n' && body[n] != '\r')
            n++;
        fprintf(stderr, "tarmac: %ld: %.*s\n", status, (int)n, n ? body : "(no error message)");
    }
    cJSON_Delete(doc);
}

int tm_cli_http_call(struct tm_cli_http *h, const char *method, const char *path, const char *body,
                     cJSON **ret_json)
{
    return tm_cli_http_call_idem(h, method, path, body, NULL, ret_json);
}

/* Whether a keyed request may be sent again: the server did not answer, or
 * answered that the database is away (503) or the key is busy (409). */
static bool idem_retryable(CURLcode cr, long status)
{
    if (cr == CURLE_OK)
        return status == 503 || status == 409;
    return cr == CURLE_COULDNT_CONNECT || cr == CURLE_OPERATION_TIMEDOUT || cr == CURLE_GOT_NOTHING ||
           cr == CURLE_SEND_ERROR || cr == CURLE_RECV_ERROR;
}

int tm_cli_http_call_idem(struct tm_cli_http *h, const char *method, const char *path,
                          const char *body, const char *idem_key, cJSON **ret_json)
{
    char key_header[300];
    int idem_attempt = 0;
    struct reply_buf b = {0};
    char errbuf[CURL_ERROR_SIZE] = "";
    char *url;
    size_t n = strlen(h->ep->url) + strlen(path) + 1;
    struct curl_slist *headers = h->headers, *with_type = NULL;
    long status = 0;
    CURLcode cr;
    int rc = TM_EXIT_FAIL;

    *ret_json = NULL;
    url = malloc(n);
    if (!url) {
        fprintf(stderr, "tarmac %s: out of memory\n", h->cmd);
        return TM_EXIT_FAIL;
    }
    snprintf(url, n, "%s%s", h->ep->url, path);
    curl_easy_setopt(h->curl, CURLOPT_URL, url);
    curl_easy_setopt(h->curl, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(h->curl, CURLOPT_WRITEDATA, &b);
    if (body) {
        /* A header list of our own for this request: the shared one keeps
         * only what every request sends. */
        with_type = curl_slist_append(NULL, "Content-Type: application/json");
        for (struct curl_slist *s = h->headers; with_type && s; s = s->next)
            if (!curl_slist_append(with_type, s->data)) {
                curl_slist_free_all(with_type);
                with_type = NULL;
            }
        if (!with_type) {
            fprintf(stderr, "tarmac %s: out of memory\n", h->cmd);
            free(url);
            return TM_EXIT_FAIL;
        }
        headers = with_type;
    }
    if (idem_key) {
        struct curl_slist *more = with_type;
        /* Without a body, the shared headers are copied first. */
        for (struct curl_slist *sl = with_type ? NULL : h->headers; sl; sl = sl->next)
            if ((more = curl_slist_append(with_type, sl->data)) != NULL)
                with_type = more;
        snprintf(key_header, sizeof(key_header), "Idempotency-Key: %s", idem_key);
        more = curl_slist_append(with_type, key_header);
        if (!more) {
            fprintf(stderr, "tarmac %s: out of memory\n", h->cmd);
            curl_slist_free_all(with_type);
            free(url);
            return TM_EXIT_FAIL;
        }
        with_type = more;
        headers = with_type;
    }
    if (strcmp(method, "GET") == 0) {
        curl_easy_setopt(h->curl, CURLOPT_HTTPGET, 1L);
        curl_easy_setopt(h->curl, CURLOPT_CUSTOMREQUEST, NULL);
    } else {
        /* POST, PUT, PATCH: a body, or an empty one (Content-Length: 0). */
        curl_easy_setopt(h->curl, CURLOPT_POSTFIELDS, body ? body : "");
        curl_easy_setopt(h->curl, CURLOPT_POSTFIELDSIZE, (long)(body ? strlen(body) : 0));
        curl_easy_setopt(h->curl, CURLOPT_CUSTOMREQUEST, strcmp(method, "POST") ? method : NULL);
    }
    curl_easy_setopt(h->curl, CURLOPT_HTTPHEADER, headers);
    /* Past the token's request rate the server answers 429 and has done
     * nothing, so waiting as it asks and sending again is safe, also for a
     * POST; `submit --count 1000` then goes at the rate the token has. */
    for (int attempt = 1;; attempt++) {
        curl_off_t wait_s = 0;
        struct timespec ts;

        if (h->verbose)
            fprintf(stderr, "> %s %s\n", method, url);
        b.len = 0;
        b.too_big = false;
        cr = curl_easy_perform(h->curl);
        status = 0;
        curl_easy_getinfo(h->curl, CURLINFO_RESPONSE_CODE, &status);
        if (h->verbose && cr == CURLE_OK)
            fprintf(stderr, "< %ld (%zu bytes)\n", status, b.len);
        if (idem_key && idem_retryable(cr, status) && ++idem_attempt < IDEM_RETRIES) {
            /* The same key: a request that did commit is answered with its
             * first answer, so sending again cannot queue a second job. */
            if (cr == CURLE_OK)
                curl_easy_getinfo(h->curl, CURLINFO_RETRY_AFTER, &wait_s);
            if (wait_s < 1 || wait_s > 30)
                wait_s = idem_attempt < 3 ? 1 : 2;
            fprintf(stderr, "tarmac %s: %s; again in %lds with the same Idempotency-Key\n", h->cmd,
                    cr == CURLE_OK ? "the server is unavailable" : curl_easy_strerror(cr), (long)wait_s);
            ts = (struct timespec){.tv_sec = (time_t)wait_s};
            nanosleep(&ts, NULL);
            continue;
        }
        if (cr != CURLE_OK || status != 429 || attempt == RATE_RETRIES)
            break;
        curl_easy_getinfo(h->curl, CURLINFO_RETRY_AFTER, &wait_s);
        if (wait_s < 1 || wait_s > 30)
            wait_s = 1;
        if (h->verbose)
            fprintf(stderr, "  past the token's rate: again in %lds\n", (long)wait_s);
        ts = (struct timespec){.tv_sec = (time_t)wait_s};
        nanosleep(&ts, NULL);
    }
    if (cr != CURLE_OK) {
        if (b.too_big)
            fprintf(stderr, "tarmac %s: the answer from %s is larger than %u bytes\n", h->cmd, h->ep->url,
                    REPLY_MAX);
        else
            fprintf(stderr, "tarmac %s: could not reach %s: %s%s\n", h->cmd, h->ep->url,
                    errbuf[0] ? errbuf : curl_easy_strerror(cr),
                    cr == CURLE_PEER_FAILED_VERIFICATION
                        ? " (a private CA? give --cacert FILE or set TARMAC_CA_FILE)" : "");
    } else if (status < 200 || status > 299) {
        print_refusal(status, b.data, b.len);
    } else if (!(*ret_json = tm_json_parse_strict(b.data ? b.data : "", b.len))) {
        fprintf(stderr, "tarmac %s: %s answered %ld with something that is not JSON\n", h->cmd,
                h->ep->url, status);
    } else {
        rc = 0;
    }
    /* Nothing of this request may outlive it in the reused handle. */
    curl_easy_setopt(h->curl, CURLOPT_HTTPHEADER, h->headers);
    curl_easy_setopt(h->curl, CURLOPT_POSTFIELDS, NULL);
    curl_easy_setopt(h->curl, CURLOPT_WRITEDATA, NULL);
    curl_easy_setopt(h->curl, CURLOPT_ERRORBUFFER, NULL);
    curl_slist_free_all(with_type);
    free(b.data);
    free(url);
    return rc;
}

int tm_cli_http_get_bytes(struct tm_cli_http *h, const char *path, char **ret_body, size_t *ret_len)
{
    struct reply_buf b = {0};
    char errbuf[CURL_ERROR_SIZE] = "";
    size_t n = strlen(h->ep->url) + strlen(path) + 1;
    char *url = malloc(n);
    long status = 0;
    CURLcode cr;
    int rc = TM_EXIT_FAIL;

    *ret_body = NULL;
    *ret_len = 0;
    if (!url) {
        fprintf(stderr, "tarmac %s: out of memory\n", h->cmd);
        return TM_EXIT_FAIL;
    }
    snprintf(url, n, "%s%s", h->ep->url, path);
    curl_easy_setopt(h->curl, CURLOPT_URL, url);
    curl_easy_setopt(h->curl, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(h->curl, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(h->curl, CURLOPT_HTTPGET, 1L);
    curl_easy_setopt(h->curl, CURLOPT_CUSTOMREQUEST, NULL);
    curl_easy_setopt(h->curl, CURLOPT_HTTPHEADER, h->headers);
    for (int attempt = 1;; attempt++) {
        curl_off_t wait_s = 0;
        struct timespec ts;
        if (h->verbose)
            fprintf(stderr, "> GET %s\n", url);
        b.len = 0;
        b.too_big = false;
        cr = curl_easy_perform(h->curl);
        status = 0;
        curl_easy_getinfo(h->curl, CURLINFO_RESPONSE_CODE, &status);
        if (h->verbose && cr == CURLE_OK)
            fprintf(stderr, "< %ld (%zu bytes)\n", status, b.len);
        if (cr != CURLE_OK || status != 429 || attempt == RATE_RETRIES)
            break;
        curl_easy_getinfo(h->curl, CURLINFO_RETRY_AFTER, &wait_s);
        ts = (struct timespec){.tv_sec = (time_t)(wait_s < 1 || wait_s > 30 ? 1 : wait_s)};
        nanosleep(&ts, NULL);
    }
    if (cr != CURLE_OK)
        fprintf(stderr, "tarmac %s: could not reach %s: %s\n", h->cmd, h->ep->url,
                errbuf[0] ? errbuf : curl_easy_strerror(cr));
    else if (status < 200 || status > 299)
        print_refusal(status, b.data, b.len);
    else
        rc = 0;
    curl_easy_setopt(h->curl, CURLOPT_WRITEDATA, NULL);
    curl_easy_setopt(h->curl, CURLOPT_ERRORBUFFER, NULL);
    free(url);
    if (rc == 0) {
        *ret_body = b.data;
        *ret_len = b.len;
    } else {
        free(b.data);
    }
    return rc;
}

const char *tm_cli_http_header(struct tm_cli_http *h, const char *name)
{
    struct curl_header *hd = NULL;

    if (curl_easy_header(h->curl, name, 0, CURLH_HEADER, -1, &hd) != CURLHE_OK || !hd)
        return NULL;
    return hd->value;
}

bool tm_cli_http_escape(const char *s, char *out, size_t size)
{
    static const char hexd[] = "0123456789ABCDEF";
    size_t k = 0;

    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        bool plain = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
                     ch == '-' || ch == '_' || ch == '.' || ch == '~';
        if (k + (plain ? 1 : 3) >= size)
            return false;
        if (plain) {
            out[k++] = (char)ch;
        } else {
            out[k++] = '%';
            out[k++] = hexd[ch >> 4];
            out[k++] = hexd[ch & 15];
        }
    }
    if (k >= size)
        return false;
    out[k] = '\0';
    return true;
}

void tm_cli_http_release(struct tm_cli_http *h)
{
    /* Wipe the header that carries the token before libcurl frees it. */
    for (struct curl_slist *s = h->headers; s; s = s->next)
        OPENSSL_cleanse(s->data, strlen(s->data));
    curl_slist_free_all(h->headers);
    if (h->curl) {
        curl_easy_cleanup(h->curl);
        curl_global_cleanup();
    }
    *h = (struct tm_cli_http){0};
}
