/*
 * providers/gcp/gce.h: the Compute Engine v1 REST client.
 *
 * Three layers, like providers/aws/ec2.h:
 *   1. Requests (gce_build.c, pure): URLs, the instances.insert and
 *      instances.bulkInsert bodies, setLabels / setMetadata bodies, label
 *      values, the requestIds.
 *   2. Answers (gce_json.c, pure, cJSON): instances (aggregatedList),
 *      operations, machine types, error documents, and what an error
 *      means for the controller.  Anything malformed is TM_EBADREPLY with
 *      a message naming the call; nothing asserts on input.
 *   3. Calls (gce_client.c, on the loop): a bearer token from gcp_auth.h
 *      on each attempt, 429/5xx/transport retries with capped exponential
 *      backoff and full jitter inside a budget, an operation followed with
 *      zoneOperations.wait to DONE (its error.errors[] surfaced), and an
 *      auth gate: after a 401/403 no request goes out until the cool-down
 *      ends (one probe then).
 */
#ifndef TM_GCP_GCE_H
#define TM_GCP_GCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "providers/gcp/gcp_auth.h"
#include "providers/provider.h"

#define TM_GCE_ENDPOINT "https://compute.googleapis.com/compute/v1"

/* Label keys (GCP keys: [a-z][a-z0-9_-]*); values go through tm_gce_label_encode(). */
#define TM_GCE_LABEL_CLUSTER "tarmac-cluster"
#define TM_GCE_LABEL_POOL "tarmac-pool"
#define TM_GCE_LABEL_NODE "tarmac-node-id"
#define TM_GCE_LABEL_TOKEN "tarmac-launch-token"
/* A gang's set key (tm_launch_set_key): every member of one bulkInsert
 * carries it from creation on, and keeps it after its own token is set. */
#define TM_GCE_LABEL_SET "tarmac-launch-set"
/* The same three as metadata items, verbatim (labels cannot hold every
 * character of a name). */
#define TM_GCE_META_CLUSTER "tarmac-cluster"
#define TM_GCE_META_POOL "tarmac-pool"
#define TM_GCE_META_TOKEN "tarmac-launch-token"
/* A set member's own bootstrap, set per instance after bulkInsert; the
 * shared startup-script waits for it (tm_gce_bulk_startup_script). */
#define TM_GCE_META_BOOTSTRAP "tarmac-bootstrap"

enum tm_gce_call {
    TM_GCE_INSERT,                /* instances.insert -> Operation */
    TM_GCE_DELETE,                /* instances.delete -> Operation */
    TM_GCE_AGGREGATED_LIST,       /* instances.aggregatedList */
    TM_GCE_OPERATION_WAIT,        /* zoneOperations.wait -> Operation */
    TM_GCE_OPERATION_GET,         /* zoneOperations.get -> Operation */
    TM_GCE_OPERATIONS_LIST,       /* zoneOperations.list */
    TM_GCE_MACHINE_TYPE_GET,      /* machineTypes.get */
    TM_GCE_ZONE_GET,              /* zones.get */
    TM_GCE_BULK_INSERT,           /* instances.bulkInsert -> Operation */
    TM_GCE_GET,                   /* instances.get -> Instance */
    TM_GCE_SET_LABELS,            /* instances.setLabels -> Operation */
    TM_GCE_SET_METADATA,          /* instances.setMetadata -> Operation */
    TM_GCE_CALL_MAX,
};

/* "instances.insert", ...; "unknown" out of range. */
const char *tm_gce_call_name(enum tm_gce_call c);

/* ---- 1. requests -------------------------------------------------------- */

/*
 * A label value from any string: [a-z0-9-] kept, every other byte written
 * as '_' and two lowercase hex digits ('_' itself included), so decoding
 * gives the string back.  TM_EINVAL when the result passes 63 characters.
 */
int tm_gce_label_encode(const char *s, char *out, size_t size);
/* The inverse; TM_EINVAL for a value that is not an encoding. */
int tm_gce_label_decode(const char *s, char *out, size_t size);

/* requestId for an insert: a UUID (version 5 layout) from SHA-256 of the
 * launch token and the offering tried, so a retried request is the same
 * request and a fall back to another zone is a new one. */
void tm_gce_request_id(const char *token, const char *zone, const char *type, bool spot,
                       char out[37]);

/* requestId for a gang's instances.bulkInsert: as above from the set key
 * (tm_launch_set_key) and the offering, so the call repeated after a crash
 * is answered with the first one's operation. */
void tm_gce_bulk_request_id(const char *set_key, const char *zone, const char *type, bool spot,
                            char out[37]);

/* requestId for a setLabels / setMetadata ("setLabels", "setMetadata") of
 * one instance: from the member's token and the fingerprint it replaces,
 * so a retry is the same request and a later change a new one. */
void tm_gce_update_request_id(const char *what, const char *token, const char *fingerprint,
                              char out[37]);

/* The instance name for a launch token: "tm-" NODE "-" 10 hex of SHA-256(token). */
void tm_gce_instance_name(int64_t node_id, const char *token, char out[TM_ID_MAX]);

/* Machine types whose GPUs come with the type (a2, a3, a4, g2): no
 * guestAccelerators in the request. */
bool tm_gce_accelerator_optimized(const char *machine_type);
/* The accelerator type for a GPU model on other types ("T4" ->
 * "nvidia-tesla-t4"); NULL when unknown. */
const char *tm_gce_accelerator_for_model(const char *gpu_model);

struct tm_gce_kv {
    const char *key;
    const char *value;
    size_t value_len;             /* 0: strlen(value) */
};

struct tm_gce_insert_params {
    const char *name;             /* required */
    const char *zone;             /* required */
    const char *machine_type;     /* required */
    const char *source_image;     /* required: "projects/P/global/images/I" or a URL */
    bool spot;
    const char *accelerator_type; /* NULL: none (accelerator-optimised types) */
    int accelerator_count;
    int64_t disk_gb;              /* 0: the image's size */
    const char *network;          /* NULL: "global/networks/default" */
    const struct tm_gce_kv *labels;
    size_t nlabels;
    const struct tm_gce_kv *metadata; /* "startup-script" and tarmac's items */
    size_t nmetadata;
};

/* The JSON body (malloc'd) or NULL; TM_EINVAL when a required field is missing. */
int tm_gce_build_insert(const struct tm_gce_insert_params *p, char **ret_body);

/*
 * A gang's instances.bulkInsert body (BulkInsertInstanceResource):
 * count = minCount = nnames, perInstanceProperties keyed by names (each
 * with its "name"), and instanceProperties from props as the insert
 * carries them, except that props.name is unused and the machine and
 * accelerator types are bare names (InstanceProperties takes names, the
 * zone is the call's).  resource_policy (NULL or "": none) becomes
 * instanceProperties.resourcePolicies, a compact placement policy's name.
 */
struct tm_gce_bulk_params {
    struct tm_gce_insert_params props;
    const char *const *names;     /* required, nnames >= 1, each a valid name */
    size_t nnames;
    const char *resource_policy;
};
int tm_gce_build_bulk_insert(const struct tm_gce_bulk_params *p, char **ret_body);

/* instances.setLabels ({labels, labelFingerprint}) and instances.setMetadata
 * (Metadata: {items, fingerprint}) bodies; the fingerprint is the one the
 * last instances.get returned (required: GCE refuses a change without it). */
int tm_gce_build_set_labels(const struct tm_gce_kv *labels, size_t n, const char *fingerprint,
                            char **ret_body);
int tm_gce_build_set_metadata(const struct tm_gce_kv *items, size_t n, const char *fingerprint,
                              char **ret_body);

/* The startup-script every member of a set shares: it waits for the
 * instance's own TM_GCE_META_BOOTSTRAP item on the metadata server and
 * runs it (a static string; it holds no secret). */
const char *tm_gce_bulk_startup_script(void);

/* URLs under endpoint ("https://compute.googleapis.com/compute/v1"); each
 * returns a malloc'd string or NULL.  Query values are percent-encoded. */
char *tm_gce_url_insert(const char *endpoint, const char *project, const char *zone,
                        const char *request_id);
char *tm_gce_url_bulk_insert(const char *endpoint, const char *project, const char *zone,
                             const char *request_id);
/* instances.get (verb NULL) or POST .../instances/NAME/VERB (setLabels,
 * setMetadata) with an optional requestId. */
char *tm_gce_url_instance(const char *endpoint, const char *project, const char *zone,
                          const char *name, const char *verb, const char *request_id);
char *tm_gce_url_delete(const char *endpoint, const char *project, const char *zone,
                        const char *name);
char *tm_gce_url_aggregated_list(const char *endpoint, const char *project, const char *filter,
                                 int max_results, const char *page_token);
char *tm_gce_url_operation(const char *endpoint, const char *project, const char *zone,
                           const char *operation, bool wait);
char *tm_gce_url_operations_list(const char *endpoint, const char *project, const char *zone,
                                 const char *filter, const char *page_token);
char *tm_gce_url_machine_type(const char *endpoint, const char *project, const char *zone,
                              const char *type);
char *tm_gce_url_zone(const char *endpoint, const char *project, const char *zone);

/* `labels.KEY = "VALUE"` terms joined by AND into out (values encoded). */
int tm_gce_label_filter(const struct tm_gce_kv *terms, size_t n, char *out, size_t size);

/* ---- 2. answers --------------------------------------------------------- */

struct tm_gce_instance {
    struct tm_instance inst;      /* id is "ZONE/NAME" */
    char cluster[TM_ID_MAX];
    char name[TM_ID_MAX];
    char status[32];              /* GCE's: PROVISIONING, RUNNING, TERMINATED, ... */
    char set_key[TM_ID_MAX];      /* TM_GCE_LABEL_SET decoded, "" if absent */
    char label_token[TM_ID_MAX];  /* TM_GCE_LABEL_TOKEN decoded (inst.token prefers metadata) */
    char label_fingerprint[64];   /* for setLabels */
    char metadata_fingerprint[64];/* for setMetadata */
};

struct tm_gce_operation {
    char name[TM_ID_MAX];
    char zone[TM_ID_MAX];
    char status[16];              /* PENDING, RUNNING, DONE */
    char type[64];                /* operationType: insert, delete, compute.instances.preempted */
    char target[TM_ID_MAX];       /* "ZONE/NAME" from targetLink, "" if none */
    char error_code[TM_ID_MAX];   /* error.errors[0].code, "" when it succeeded */
    char error_message[256];
    int64_t insert_ms;            /* insertTime */
    bool done;
};

struct tm_gce_machine_type {
    char name[TM_ID_MAX];
    int gpus;
    char accelerator[TM_ID_MAX];  /* "nvidia-tesla-a100", "" without GPUs */
    int vcpus;
    int64_t memory_mib;
};

struct tm_gce_reply {
    enum tm_gce_call call;
    char *next_page_token;        /* NULL on the last page */
    struct tm_gce_instance *instances; /* aggregatedList; instances.get: one */
    size_t ninstances;
    struct tm_gce_operation op;   /* insert, delete, wait, get */
    struct tm_gce_operation *ops; /* operations list */
    size_t nops;
    struct tm_gce_machine_type machine_type;
    char zone_status[16];         /* zones.get: UP / DOWN */
    /* failures */
    long http_status;
    char error_code[TM_ID_MAX];   /* reason or operation error code */
    char error_message[256];
    unsigned attempts;
};

void tm_gce_reply_release(struct tm_gce_reply *reply);

/*
 * Parse a 200 answer to call.  0 and *ret (release it), or TM_EBADREPLY /
 * TM_ENOMEM with *ret zeroed and err naming the call, e.g.
 *   could not parse instances.aggregatedList answer: "items" is not an object
 */
int tm_gce_parse_reply(enum tm_gce_call call, const char *body, size_t len,
                       struct tm_gce_reply *ret, char *err, size_t errsize);

/* Parse {"error":{"code","message","errors":[{"reason"}],"status"}} into
 * ret->error_code (the first reason, else status) and error_message. */
int tm_gce_parse_error(const char *body, size_t len, struct tm_gce_reply *ret);

/*
 * What an error means (code: a reason, an operation error code or ""):
 *   TM_EQUOTA      ZONE_RESOURCE_POOL_EXHAUSTED(_WITH_DETAILS), QUOTA_EXCEEDED,
 *                  quotaExceeded, RESOURCE_POOL_EXHAUSTED, UNSUPPORTED_OPERATION
 *                  on an unavailable type, stockout
 *   TM_ETHROTTLED  HTTP 429, rateLimitExceeded, userRateLimitExceeded
 *   TM_EUNAVAIL    5xx, backendError, internalError
 *   TM_EAUTH       HTTP 401 / 403 (other reasons)
 *   TM_ENOTFOUND   HTTP 404, notFound, RESOURCE_NOT_FOUND
 *   TM_ECONFLICT   HTTP 409, alreadyExists, RESOURCE_ALREADY_EXISTS
 *   TM_EINVAL      anything else
 */
int tm_gce_error_map(const char *code, long http_status);

/* ---- 3. calls ----------------------------------------------------------- */

struct tm_gce_retry {
    unsigned max_attempts;        /* 0 = 5 */
    uint64_t max_total_delay_ms;  /* 0 = 20 s */
    uint64_t base_delay_ms;       /* 0 = 100 ms */
    uint64_t max_delay_ms;        /* 0 = 5 s */
};

uint64_t tm_gce_backoff_ms(const struct tm_gce_retry *retry, unsigned n, uint64_t *state);

struct tm_gce_options {
    const char *endpoint;         /* NULL: TM_GCE_ENDPOINT */
    const char *project;          /* required */
    struct tm_gcp_token_options auth;
    struct tm_gce_retry retry;
    long timeout_ms;              /* 0 = 30 s */
    uint64_t auth_cooldown_ms;    /* 0 = 5 min */
    unsigned max_waits;           /* zoneOperations.wait calls per operation; 0 = 60 */
    uint64_t seed;
};

struct tm_gce;

typedef void (*tm_gce_cb)(int status, const struct tm_gce_reply *reply, void *data);

enum tm_gce_flags {
    /* Retry after a reset or timeout too (reads, deletes, inserts with a requestId). */
    TM_GCE_RETRY_AMBIGUOUS = 1u << 0,
    /* The answer is an Operation: follow it with zoneOperations.wait until
     * DONE; an operation that ends with errors fails the call with its
     * first error's code mapped by tm_gce_error_map(). */
    TM_GCE_FOLLOW = 1u << 1,
};

int tm_gce_create(uv_loop_t *loop, const struct tm_gce_options *opts, struct tm_gce **ret);
const char *tm_gce_endpoint(const struct tm_gce *gce);
const char *tm_gce_project(const struct tm_gce *gce);

/* url and body are taken over (freed by the client) whether or not the call
 * starts; body NULL for GET/DELETE.  0 (cb fires later) or a negative code. */
int tm_gce_call(struct tm_gce *gce, enum tm_gce_call call, const char *method, char *url,
                char *body, unsigned flags, tm_gce_cb cb, void *data);

struct tm_gce_stats {
    uint64_t calls, requests, retries, delay_ms, auth_refusals, waits;
};
void tm_gce_get_stats(const struct tm_gce *gce, struct tm_gce_stats *ret);
bool tm_gce_auth_blocked(const struct tm_gce *gce);
struct tm_gcp_tokens *tm_gce_tokens(struct tm_gce *gce);

void tm_gce_close(struct tm_gce *gce, void (*done)(void *data), void *data);

#endif
