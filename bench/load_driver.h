/*
 * bench/load_driver.h: the closed-loop HTTP load driver behind
 * bench_api_submit and bench_heartbeat (libcurl multi, HTTP/1.1 keep-alive,
 * loopback only).  A program fills a struct load_hooks with what differs
 * (its name, the request each connection sends next, the answer that counts
 * as success) and hands main's arguments to load_driver_main.
 *
 *   NAME --url http://127.0.0.1:PORT --tokens FILE
 *        [--conns 64] [--duration 20] [--max-requests 2000000] [--warmup 1]
 *        [the program's own options]
 *
 * Each of --conns connections keeps one request in flight: as one answer
 * arrives the next request goes out on the same connection.  Requests
 * rotate over the tokens in FILE.  The first --warmup seconds are sent but
 * not counted.  Latency is from handing the request to libcurl to its
 * complete answer.  Prints a summary, then one line "RESULT key=value ..."
 * for scripts (bench/run-api.sh, bench/run-heartbeat.sh parse both).
 */
#ifndef TM_BENCH_LOAD_DRIVER_H
#define TM_BENCH_LOAD_DRIVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The next request on one connection, for the prepare hook to fill in.  The
 * driver adds "Authorization: Bearer <token>" and a JSON Content-Type. */
struct load_request {
    const char *base_url; /* --url, e.g. http://127.0.0.1:8080 */
    long long id;         /* the token line's id (ids_in_tokens), else 0 */
    uint64_t seq;         /* 0, 1, 2, ... over every request sent */
    char *url;            /* write the request's full URL here */
    size_t url_cap;
    char *body;           /* and its body here */
    size_t body_cap;
};

struct load_hooks {
    const char *name;        /* program name, first word of every message */
    const char *usage_extra; /* appended to the usage line, e.g. " [--team T]" */
    const char *endpoint;    /* path shown in the summary, e.g. "/v1/jobs" */
    long ok_status;          /* the answer that counts as success (200, 201) */
    const char *rate_label;  /* the rate line's label, e.g. "jobs/s (201)" */
    /* Token lines are "ID TOKEN" (the id goes to load_request.id) rather than
     * a bare token; lines without the space are skipped. */
    bool ids_in_tokens;
    void *ctx; /* passed to every hook */
    /* An option the driver does not know: 1 if taken, 0 if not (usage, exit
     * 2).  NULL: no options of the program's own. */
    int (*option)(void *ctx, const char *name, const char *value);
    /* After the options: false for usage and exit 2.  May be NULL. */
    bool (*check)(void *ctx);
    /* Write r's URL and body; return the body's length, -1 if it does not fit. */
    int (*prepare)(void *ctx, struct load_request *r);
};

/* Runs the whole benchmark: 0 when every counted answer was ok_status, 3
 * when some were not, 2 on bad arguments, 1 on other failures. */
int load_driver_main(const struct load_hooks *h, int argc, char **argv);

#endif
