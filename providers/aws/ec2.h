/*
 * providers/aws/ec2.h: the EC2 Query API (version 2016-11-15) client.
 *
 * Three layers, each usable on its own:
 *
 *   1. Request bodies (ec2_build.c, pure): tm_ec2_build_*() turn a small
 *      parameter struct into the POST form body EC2 expects, serialised as
 *      botocore's "ec2" protocol does (lists flattened as Name.1, Name.2,
 *      named by the member's locationName with the first letter upper-cased:
 *      InstanceId.1, TagSpecification.1.Tag.1.Key, Filter.1.Value.1 ...).
 *
 *   2. Answers (ec2_xml.c, pure): tm_ec2_parse_reply() reads a 200 answer
 *      with expat into struct tm_ec2_reply; tm_ec2_parse_error() reads an
 *      error document (<Response><Errors><Error> or moto's <ErrorResponse>);
 *      tm_ec2_error_map() says what the controller must do with an error
 *      code.  Anything malformed, truncated or unexpected is TM_EBADREPLY
 *      with a message naming the action; nothing here asserts on input.
 *
 *   3. Calls (ec2_client.c, on the libuv loop): struct tm_ec2 owns a
 *      tm_http and a cached credential provider, signs each attempt with
 *      core/sigv4.h, retries throttling, 5xx, resets and timeouts
 *      with capped exponential backoff and full jitter inside a retry budget,
 *      and closes a gate after an authentication failure so that no further
 *      request reaches AWS until the credentials change or a cool-down ends.
 */
#ifndef TM_AWS_EC2_H
#define TM_AWS_EC2_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "controller/io/aws_credentials.h"
#include "providers/provider.h"

#define TM_EC2_API_VERSION "2016-11-15"

/* Tag keys tarmac puts on every instance it launches. */
#define TM_EC2_TAG_CLUSTER "tarmac:cluster"
#define TM_EC2_TAG_POOL "tarmac:pool"
#define TM_EC2_TAG_NODE "tarmac:node-id"
#define TM_EC2_TAG_TOKEN "tarmac:launch-token"

enum tm_ec2_action {
    TM_EC2_RUN_INSTANCES,
    TM_EC2_TERMINATE_INSTANCES,
    TM_EC2_DESCRIBE_INSTANCES,
    TM_EC2_DESCRIBE_INSTANCE_STATUS,
    TM_EC2_CREATE_TAGS,
    TM_EC2_DESCRIBE_SPOT_PRICE_HISTORY,
    TM_EC2_DESCRIBE_INSTANCE_TYPES,
    TM_EC2_CREATE_FLEET,
    TM_EC2_CREATE_LAUNCH_TEMPLATE,
    TM_EC2_DESCRIBE_CAPACITY_RESERVATIONS,
    TM_EC2_ACTION_MAX,
};

/* "RunInstances", ...; "unknown" out of range. */
const char *tm_ec2_action_name(enum tm_ec2_action a);

/* ---- 1. request bodies ------------------------------------------------ */

struct tm_ec2_tag {
    const char *key;
    const char *value;
};

struct tm_ec2_filter {
    const char *name;             /* "tag:tarmac:cluster", "instance-state-name" */
    const char *const *values;
    size_t nvalues;
};

struct tm_ec2_run_params {
    const char *image_id;         /* required */
    const char *instance_type;    /* required */
    const char *zone;             /* NULL or "": EC2 chooses */
    const char *client_token;     /* NULL: none (tarmac always sets one) */
    bool spot;                    /* InstanceMarketOptions.MarketType=spot */
    /* Into this capacity reservation (CapacityReservationSpecification.
     * CapacityReservationTarget.CapacityReservationId), NULL or "": none;
     * capacity_block: it is a Capacity Block (MarketType=capacity-block). */
    const char *capacity_reservation;
    bool capacity_block;
    const struct tm_ec2_tag *tags; /* put on the instance at launch */
    size_t ntags;
    const char *user_data;        /* base64 (at most 16 KB), NULL: none; a secret, never logged */
};

struct tm_ec2_fleet_override {
    const char *instance_type;
    const char *zone;             /* NULL or "": any */
};

struct tm_ec2_fleet_params {
    const char *launch_template;  /* name of a template holding the image */
    const char *client_token;
    bool spot;                    /* spot (price-capacity-optimized) or on-demand */
    unsigned target;              /* instances wanted, >= 1 */
    const struct tm_ec2_fleet_override *overrides;
    size_t noverrides;            /* >= 1 */
    const struct tm_ec2_tag *tags; /* instance tags */
    size_t ntags;
    /* A gang's set, all or none: min_target = target makes EC2 launch
     * nothing unless it can launch them all (MinTargetCapacity), in one
     * zone of one type (SingleAvailabilityZone, SingleInstanceType: EC2
     * wants one of them with a minimum).  0: no minimum. */
    unsigned min_target;
    const char *placement_group;  /* cluster placement group, NULL or "": none */
};

/*
 * Each builder stores a malloc'd NUL-terminated body ("Action=...&Version=
 * 2016-11-15&...") in *ret_body (caller frees) and returns 0, or returns
 * TM_EINVAL (a required field missing) / TM_ENOMEM and leaves *ret_body
 * alone.  Optional strings may be NULL; max_results 0 leaves it out.
 */
int tm_ec2_build_run_instances(const struct tm_ec2_run_params *p, char **ret_body);
int tm_ec2_build_terminate_instances(const char *const *ids, size_t nids, char **ret_body);
int tm_ec2_build_describe_instances(const char *const *ids, size_t nids,
                                    const struct tm_ec2_filter *filters, size_t nfilters,
                                    int max_results, const char *next_token, char **ret_body);
int tm_ec2_build_describe_instance_status(const char *const *ids, size_t nids,
                                          bool include_all, int max_results,
                                          const char *next_token, char **ret_body);
int tm_ec2_build_create_tags(const char *const *ids, size_t nids, const struct tm_ec2_tag *tags,
                             size_t ntags, char **ret_body);
int tm_ec2_build_describe_spot_price_history(const char *const *types, size_t ntypes,
                                             const char *zone, const char *product,
                                             int max_results, const char *next_token,
                                             char **ret_body);
int tm_ec2_build_describe_instance_types(const char *const *types, size_t ntypes,
                                         int max_results, const char *next_token,
                                         char **ret_body);
int tm_ec2_build_create_fleet(const struct tm_ec2_fleet_params *p, char **ret_body);
int tm_ec2_build_create_launch_template(const char *name, const char *image_id,
                                        char **ret_body);
int tm_ec2_build_describe_capacity_reservations(const char *const *ids, size_t nids,
                                                int max_results, const char *next_token,
                                                char **ret_body);

/* ---- 2. answers ------------------------------------------------------- */

/* One instance from RunInstances, DescribeInstances or TerminateInstances
 * (the last fills only id and state, from currentState). */
struct tm_ec2_instance {
    struct tm_instance inst;      /* id, tags, type, zone, capacity, state, ... */
    char cluster[TM_ID_MAX];      /* tarmac:cluster tag, "" if absent */
    char state_name[32];          /* EC2's own: "shutting-down", ... */
    char state_reason[TM_ID_MAX]; /* stateReason code, e.g. "Server.SpotInstanceTermination" */
    char client_token[TM_ID_MAX];
};

struct tm_ec2_type_info {
    char name[TM_ID_MAX];         /* "p4d.24xlarge" */
    int gpus;                     /* 0 when the type has no GPU */
    char gpu_model[TM_ID_MAX];    /* "A100" */
    char gpu_manufacturer[TM_ID_MAX]; /* "NVIDIA" */
    int64_t gpu_memory_mib;       /* per GPU */
    int vcpus;
    int64_t memory_mib;
};

struct tm_ec2_spot_price {
    char instance_type[TM_ID_MAX];
    char zone[TM_ID_MAX];
    char product[TM_ID_MAX];
    int64_t uusd_per_hour;
    int64_t timestamp_ms;
};

struct tm_ec2_status {
    char id[TM_ID_MAX];
    char zone[TM_ID_MAX];
    char state_name[32];
    char system_status[32];       /* "ok", "impaired", ... */
    char instance_status[32];
    char event_code[TM_ID_MAX];   /* first scheduled event, "" if none */
};

/* One element of DescribeCapacityReservations' capacityReservationSet. */
struct tm_ec2_capacity_reservation {
    char id[TM_ID_MAX];
    char instance_type[TM_ID_MAX];
    char zone[TM_ID_MAX];
    char state[32];               /* "active", "expired", "cancelled", "scheduled", ... */
    int total, available;         /* -1 when absent */
    int64_t start_ms, end_ms;     /* 0 when absent */
    bool block;                   /* reservationType capacity-block */
};

struct tm_ec2_fleet_instance {
    char id[TM_ID_MAX];
    char instance_type[TM_ID_MAX];
    char zone[TM_ID_MAX];         /* from the override, "" if none */
    bool spot;
};

struct tm_ec2_fleet_error {
    char instance_type[TM_ID_MAX];
    char zone[TM_ID_MAX];
    bool spot;
    char code[TM_ID_MAX];
    char message[256];
};

/*
 * A parsed answer.  Only the arrays of the action that was called are
 * filled; the rest stay empty.  For a failed call (status < 0 in the client
 * callback) error_code/error_message say why when AWS said so.
 */
struct tm_ec2_reply {
    enum tm_ec2_action action;
    char request_id[TM_ID_MAX];
    char *next_token;             /* NULL on the last page */
    struct tm_ec2_instance *instances;
    size_t ninstances;
    struct tm_ec2_type_info *types;
    size_t ntypes;
    struct tm_ec2_spot_price *prices;
    size_t nprices;
    struct tm_ec2_status *statuses;
    size_t nstatuses;
    struct tm_ec2_capacity_reservation *reservations;
    size_t nreservations;
    struct tm_ec2_fleet_instance *fleet_instances;
    size_t nfleet_instances;
    struct tm_ec2_fleet_error *fleet_errors;
    size_t nfleet_errors;
    char fleet_id[128];
    char launch_template_id[TM_ID_MAX];
    bool returned_true;           /* CreateTags: <return>true</return> */
    /* failures */
    long http_status;
    char error_code[TM_ID_MAX];
    char error_message[256];
    unsigned attempts;            /* requests sent for this call */
};

/* Free what reply owns and zero it; safe on a zeroed reply. */
void tm_ec2_reply_release(struct tm_ec2_reply *reply);

/*
 * Parse the 200 answer to action.  On success fills *ret (release it) and
 * returns 0; on failure returns TM_EBADREPLY or TM_ENOMEM, leaves *ret
 * zeroed and writes a one-line reason naming the action to err (may be
 * NULL when errsize is 0), e.g.
 *   could not parse DescribeInstances reply: line 1: unclosed token
 * An answer whose root element belongs to another action or service
 * (moto routes unsigned requests to S3) is TM_EBADREPLY too.
 */
int tm_ec2_parse_reply(enum tm_ec2_action action, const char *body, size_t len,
                       struct tm_ec2_reply *ret, char *err, size_t errsize);

/*
 * Parse an error document into ret->error_code/error_message/request_id.
 * Returns 0, or TM_EBADREPLY when body is not an EC2 error document.
 */
int tm_ec2_parse_error(const char *body, size_t len, struct tm_ec2_reply *ret);

/*
 * What an EC2 error means for the controller (http_status may be 0):
 *   TM_EQUOTA      InsufficientInstanceCapacity, ReservationCapacityExceeded,
 *                  InstanceLimitExceeded,
 *                  MaxSpotInstanceCountExceeded, Unsupported, SpotMaxPriceTooLow,
 *                  VcpuLimitExceeded, ...: fall back to the next offering
 *   TM_ETHROTTLED  RequestLimitExceeded, Throttling: retried
 *   TM_EUNAVAIL    InternalError, ServiceUnavailable, Unavailable, any 5xx: retried
 *   TM_EAUTH       AuthFailure, SignatureDoesNotMatch, UnauthorizedOperation,
 *                  RequestExpired, ExpiredToken, ...: stop calling
 *   TM_ENOTFOUND   *.NotFound, *.NotFoundException
 *   TM_ECONFLICT   *.AlreadyExistsException, IdempotentParameterMismatch
 *   TM_EINVAL      any other client error
 */
int tm_ec2_error_map(const char *code, long http_status);

/* ---- 3. calls on the loop --------------------------------------------- */

struct tm_ec2_retry {
    unsigned max_attempts;        /* requests per call, first included; 0 = 5 */
    uint64_t max_total_delay_ms;  /* sum of backoff sleeps per call; 0 = 20 s */
    uint64_t base_delay_ms;       /* first backoff cap; 0 = 100 ms */
    uint64_t max_delay_ms;        /* cap of one sleep; 0 = 5 s */
};

struct tm_ec2_options {
    const char *endpoint;         /* "https://ec2.us-east-1.amazonaws.com" (resolved) */
    const char *region;           /* required */
    struct tm_aws_credential_options cred; /* where credentials come from */
    struct tm_ec2_retry retry;
    long timeout_ms;              /* per request; 0 = 30 s */
    uint64_t auth_cooldown_ms;    /* gate after an auth failure; 0 = 5 min */
    uint64_t seed;                /* jitter seed; 0 = from the clock */
    bool test_corrupt_signature;  /* tests only: flip one hex digit of the signature */
};

struct tm_ec2;

/*
 * Called exactly once per tm_ec2_call(), on the loop, never from inside it.
 * status 0: reply holds the parsed answer.  status < 0: reply->error_code,
 * error_message and http_status say what AWS answered, when it answered.
 * reply is valid only during the callback.
 */
typedef void (*tm_ec2_cb)(int status, const struct tm_ec2_reply *reply, void *data);

enum tm_ec2_call_flags {
    /* Also retry after a reset or a timeout, when the request may have been
     * carried out.  Set it for reads and idempotent writes; leave it clear
     * for RunInstances and CreateFleet where the caller re-checks by tag
     * before trying again (emulators ignore ClientToken). */
    TM_EC2_RETRY_AMBIGUOUS = (1u << 0),
};

int tm_ec2_create(uv_loop_t *loop, const struct tm_ec2_options *opts, struct tm_ec2 **ret_ec2);

/*
 * Start a call.  body is a form body from a tm_ec2_build_*() for the same
 * action; it is taken over (freed by the client) whether or not the call
 * starts.  Returns 0 (cb will fire), or TM_EINVAL / TM_ENOMEM / TM_ECANCELED
 * (closing) and cb never fires.
 */
int tm_ec2_call(struct tm_ec2 *ec2, enum tm_ec2_action action, char *body, unsigned flags,
                tm_ec2_cb cb, void *data);

struct tm_ec2_stats {
    uint64_t calls;               /* tm_ec2_call()s that started */
    uint64_t requests;            /* HTTP requests sent */
    uint64_t retries;             /* requests that were retries */
    uint64_t delay_ms;            /* total backoff scheduled */
    uint64_t auth_refusals;       /* calls refused by the gate without a request */
};

void tm_ec2_get_stats(const struct tm_ec2 *ec2, struct tm_ec2_stats *ret_stats);

/* Whether the auth gate is closed now (an auth failure and no change since). */
bool tm_ec2_auth_blocked(const struct tm_ec2 *ec2);

/*
 * Backoff for retry number n (1 = first retry): a uniformly random delay in
 * [0, min(max_delay, base << (n-1))] (full jitter), drawn from *state.
 * Exposed for tests.
 */
uint64_t tm_ec2_backoff_ms(const struct tm_ec2_retry *retry, unsigned n, uint64_t *state);

/* Calls in flight fail with TM_ECANCELED (from the loop), then every handle
 * closes; done (may be NULL) fires after, and ec2 is freed. */
void tm_ec2_close(struct tm_ec2 *ec2, void (*done)(void *data), void *data);

#endif
