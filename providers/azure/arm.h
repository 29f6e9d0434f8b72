/*
 * providers/azure/arm.h: Azure Resource Manager (Microsoft.Compute, api-version
 * 2024-07-01) for tarmac's virtual machines.
 *
 * Three layers, each usable on its own:
 *
 *   1. Requests (arm_json.c, pure): the VM name a node gets, the VM PUT body
 *      (spot fields, tags, customData, the NIC and OS disk created with the VM
 *      and deleted with it), the token request form bodies, and the client
 *      assertion of a certificate credential (arm_assertion.c).
 *
 *   2. Answers (arm_json.c, pure, cJSON): a VM, a page of a VM list (value[],
 *      nextLink), an async operation's status, a CloudError, a token and the
 *      OpenID configuration.  Anything malformed or truncated is TM_EBADREPLY
 *      with a message naming the call; nothing here asserts on input.
 *      tm_arm_error_map() says what the controller must do with an error.
 *
 *   3. Calls (arm_client.c, on the libuv loop): struct tm_arm owns a tm_http
 *      and the token source (a client secret, a client certificate's signed
 *      assertion, or the managed identity), sends each attempt with a fresh
 *      bearer token, honours Retry-After on 429, retries 5xx and transport
 *      failures with capped exponential backoff and full jitter inside a
 *      budget, and closes a gate after a 401/403 so that no further request
 *      reaches Azure until the cool-down ends.
 */
#ifndef TM_AZURE_ARM_H
#define TM_AZURE_ARM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "providers/provider.h"

#define TM_ARM_API_VERSION "2024-07-01"
/* networkProfile.networkApiVersion: lets the VM PUT create its own NIC. */
#define TM_ARM_NETWORK_API_VERSION "2020-11-01"
#define TM_ARM_DEFAULT_ENDPOINT "https://management.azure.com"
#define TM_ARM_DEFAULT_AUTHORITY "https://login.microsoftonline.com"
#define TM_ARM_DEFAULT_IMDS "http://169.254.169.254"
#define TM_ARM_SCOPE "https://management.azure.com/.default"
#define TM_ARM_RESOURCE "https://management.azure.com/"

/* Tag names tarmac puts on every VM (Azure tag names may not hold '/' or
 * '%', so these differ from EC2's "tarmac:..." keys). */
#define TM_ARM_TAG_CLUSTER "tarmac-cluster"
#define TM_ARM_TAG_POOL "tarmac-pool"
#define TM_ARM_TAG_NODE "tarmac-node-id"
#define TM_ARM_TAG_TOKEN "tarmac-launch-token"

#define TM_ARM_URL_MAX 2048

/* ---- 1. requests -------------------------------------------------------- */

/*
 * The VM name of a node: "tm-CLUSTER-NODEID", cluster characters other than
 * [A-Za-z0-9-] as '-', at most 64 characters (Linux VM and computer name
 * limit).  The same node always gets the same name, so a repeated PUT
 * updates the VM it made instead of making a second.  Returns 0 or
 * TM_EINVAL (name too long).
 */
int tm_arm_vm_name(const char *cluster, int64_t node_id, char *buf, size_t size);

struct tm_arm_vm_params {
    const char *name;            /* tm_arm_vm_name() */
    const char *location;        /* "eastus" */
    const char *zone;            /* "1".."3", NULL or "": regional */
    const char *vm_size;         /* "Standard_NC24ads_A100_v4" */
    bool spot;                   /* priority Spot, evictionPolicy Delete, maxPrice -1 */
    const char *subnet_id;       /* /subscriptions/.../subnets/NAME */
    const char *image;           /* "publisher:offer:sku:version" or a resource id */
    const char *admin_username;
    const char *ssh_public_key;
    const char *custom_data;     /* bootstrap bytes, base64-encoded here; may be NULL */
    size_t custom_data_len;
    const char *cluster, *pool, *node, *token; /* tags */
};

/* The PUT body (JSON, malloc'd) in *ret_body; TM_EINVAL when a required
 * field is missing, TM_ENOMEM. */
int tm_arm_build_vm(const struct tm_arm_vm_params *p, char **ret_body);

/* Form bodies for the token endpoint (client credentials), URL-encoded. */
int tm_arm_build_token_form(const char *client_id, const char *client_secret,
                            const char *scope, char **ret_body);

/* The same with a certificate: client_assertion_type TM_ARM_ASSERTION_TYPE
 * and client_assertion (tm_arm_build_assertion()) instead of the secret. */
int tm_arm_build_assertion_form(const char *client_id, const char *assertion, const char *scope,
                                char **ret_body);

/*
 * The client assertion of the certificate credential (arm_assertion.c): a
 * JWT signed RS256 with the certificate's private key.
 *   header {"alg":"RS256","typ":"JWT","x5t":b64url(SHA-1 of the DER),
 *           "x5t#S256":b64url(SHA-256 of it)}
 *   claims {"aud":token endpoint,"exp":now+600,"iss":client id,"sub":client id,
 *           "nbf":now,"jti":jti,"iat":now}
 * (MSAL's claim order; it signs PS256 when it sends x5t#S256, the identity
 * platform takes both).  *ret_jwt is malloc'd; the caller wipes and frees
 * it.  0, TM_EINVAL (a field missing, an unusable key), TM_ENOMEM.
 */
#define TM_ARM_ASSERTION_TYPE "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
#define TM_ARM_ASSERTION_LIFETIME_S 600

struct tm_arm_assertion {
    const char *client_id;
    const char *audience;        /* the token endpoint URL */
    const char *jti;             /* unique per assertion (tm_arm_new_jti()) */
    int64_t now;                 /* Unix seconds */
    const unsigned char *sha1;   /* 20 bytes: the certificate's thumbprint */
    const unsigned char *sha256; /* 32 bytes, or NULL: no x5t#S256 */
    const char *key_pem;         /* the certificate's RSA private key */
};

int tm_arm_build_assertion(const struct tm_arm_assertion *a, char **ret_jwt);

/* A random UUID (version 4, OpenSSL's RAND_bytes) into buf[37]; 0 or
 * TM_EUNAVAIL when the generator fails. */
int tm_arm_new_jti(char buf[37]);

/* ---- 2. answers --------------------------------------------------------- */

struct tm_arm_vm {
    struct tm_instance inst;     /* id = VM name, tags, size, zone, state, ... */
    char cluster[TM_ID_MAX];     /* tarmac-cluster tag, "" if absent */
    char provisioning_state[32]; /* "Creating", "Succeeded", "Deleting", ... */
    char power_state[32];        /* "running", "deallocated", "" unknown */
    bool spot;
};

/* The call an answer belongs to, for messages. */
enum tm_arm_call {
    TM_ARM_GET_VM,
    TM_ARM_PUT_VM,
    TM_ARM_DELETE_VM,
    TM_ARM_LIST_VMS,
    TM_ARM_POLL,
    TM_ARM_TOKEN,
    TM_ARM_DISCOVERY,
    TM_ARM_LIST_SKUS,
    TM_ARM_CALL_MAX,
};

const char *tm_arm_call_name(enum tm_arm_call c);

/* One VM (GET or PUT answer) into *ret. */
int tm_arm_parse_vm(const char *body, size_t len, struct tm_arm_vm *ret, char *err,
                    size_t errsize);

/* A page of VirtualMachines_List: *ret_vms (free()), *ret_n, *ret_next_link
 * (malloc'd, NULL on the last page). */
int tm_arm_parse_vm_list(const char *body, size_t len, struct tm_arm_vm **ret_vms,
                         size_t *ret_n, char **ret_next_link, char *err, size_t errsize);

enum tm_arm_op_status { TM_ARM_OP_IN_PROGRESS, TM_ARM_OP_SUCCEEDED, TM_ARM_OP_FAILED,
                        TM_ARM_OP_CANCELED };

/* An Azure-AsyncOperation answer: {"status": ..., "error": {code, message}}. */
int tm_arm_parse_operation(const char *body, size_t len, enum tm_arm_op_status *ret,
                           char *code, size_t codesize, char *msg, size_t msgsize, char *err,
                           size_t errsize);

/* A CloudError: error.code (the first details[].code when the outer code is
 * a wrapper like "Conflict") and error.message; 0 or TM_EBADREPLY. */
int tm_arm_parse_error(const char *body, size_t len, char *code, size_t codesize, char *msg,
                       size_t msgsize);

/* A token answer (identity platform or IMDS): access_token and expires_in
 * (a number or a numeric string, seconds). */
int tm_arm_parse_token(const char *body, size_t len, char **ret_token, int64_t *ret_expires_s,
                       char *err, size_t errsize);

/* The OpenID configuration: token_endpoint into buf. */
int tm_arm_parse_openid(const char *body, size_t len, char *buf, size_t size, char *err,
                        size_t errsize);

/* One VM size of ResourceSkus_List (resourceType virtualMachines). */
struct tm_arm_sku {
    char name[TM_ID_MAX];
    char zones[32];               /* "1,2,3" in the queried location, "" if none */
    bool restricted;              /* restrictions[] not empty (not offered to us) */
};

int tm_arm_parse_skus(const char *body, size_t len, const char *location,
                      struct tm_arm_sku **ret, size_t *ret_n, char **ret_next_link, char *err,
                      size_t errsize);

/*
 * What an ARM error means for the controller (http_status may be 0):
 *   TM_EQUOTA      SkuNotAvailable, AllocationFailed, ZonalAllocationFailed,
 *                  OverconstrainedAllocationRequest, OverconstrainedZonalAllocationRequest,
 *                  OperationNotAllowed (quota), QuotaExceeded: fall back
 *   TM_ETHROTTLED  429, TooManyRequests
 *   TM_EUNAVAIL    any 5xx
 *   TM_EAUTH       401, 403, AuthenticationFailed, AuthorizationFailed, InvalidAuthenticationToken*
 *   TM_ENOTFOUND   404, ResourceNotFound, NotFound
 *   TM_ECONFLICT   409 otherwise
 *   TM_EINVAL      any other client error
 */
int tm_arm_error_map(const char *code, long http_status);

/* ---- 3. calls on the loop ----------------------------------------------- */

struct tm_arm_retry {
    unsigned max_attempts;       /* requests per call, first included; 0 = 5 */
    uint64_t max_total_delay_ms; /* sum of sleeps per call (Retry-After included); 0 = 30 s */
    uint64_t base_delay_ms;      /* 0 = 200 ms */
    uint64_t max_delay_ms;       /* cap of one backoff sleep; 0 = 5 s */
};

enum tm_arm_auth_mode {
    TM_ARM_AUTH_SECRET,          /* client_secret */
    TM_ARM_AUTH_MANAGED_IDENTITY,/* IMDS */
    TM_ARM_AUTH_CERTIFICATE,     /* client_assertion signed with client_cert */
    TM_ARM_AUTH_MAX,
};

/* For logs: "client_secret", "managed_identity", "client_certificate". */
const char *tm_arm_auth_name(enum tm_arm_auth_mode auth);

struct tm_client_cert;

struct tm_arm_options {
    const char *endpoint;        /* ARM, "https://management.azure.com" */
    const char *authority;       /* identity platform, "https://login.microsoftonline.com" */
    const char *imds;            /* instance metadata, "http://169.254.169.254" */
    const char *tenant;
    const char *client_id;
    const char *client_secret;   /* copied, registered as a log secret */
    const struct tm_client_cert *client_cert; /* TM_ARM_AUTH_CERTIFICATE: key and
                                                 thumbprints copied (core/client_cert.h) */
    enum tm_arm_auth_mode auth;
    const char *ca_file;         /* extra CA for loopback fakes; NULL */
    struct tm_arm_retry retry;
    long timeout_ms;             /* per request; 0 = 30 s */
    uint64_t auth_cooldown_ms;   /* 0 = 5 min */
    uint64_t poll_ms;            /* async operation polling interval; 0 = 2 s */
    uint64_t poll_budget_ms;     /* give up polling after; 0 = 15 min */
    uint64_t seed;
};

struct tm_arm;

struct tm_arm_reply {
    enum tm_arm_call call;
    long http_status;
    const char *body;            /* the final answer's body (after polling: the resource) */
    size_t body_len;
    char error_code[TM_ID_MAX];
    char error_message[256];
    unsigned attempts;
};

typedef void (*tm_arm_cb)(int status, const struct tm_arm_reply *reply, void *data);

enum tm_arm_flags {
    /* Retry after a reset or timeout too (GET, PUT of a named VM, DELETE are
     * idempotent in ARM, so tarmac sets it on every call it makes). */
    TM_ARM_RETRY_AMBIGUOUS = (1u << 0),
    /* A 201/202 with Azure-AsyncOperation or Location is followed to a
     * terminal state; a failed operation's error becomes the call's. */
    TM_ARM_FOLLOW_ASYNC = (1u << 1),
};

int tm_arm_create(uv_loop_t *loop, const struct tm_arm_options *opts, struct tm_arm **ret);

/*
 * One call: method on path (relative to the endpoint, with its query; or an
 * absolute URL under the endpoint, for nextLink), body JSON or NULL.  The
 * callback fires exactly once, from the loop.  Returns 0 or a negative code
 * (the callback will not fire).
 */
int tm_arm_call(struct tm_arm *arm, enum tm_arm_call call, const char *method, const char *path,
                const char *body, unsigned flags, tm_arm_cb cb, void *data);

/* The URL prefix of the resource group's VMs:
 * "/subscriptions/S/resourceGroups/G/providers/Microsoft.Compute/virtualMachines". */
int tm_arm_vms_path(const char *subscription, const char *group, char *buf, size_t size);

struct tm_arm_stats {
    uint64_t calls, requests, retries, delay_ms, auth_refusals, tokens_fetched, polls;
};

void tm_arm_get_stats(const struct tm_arm *arm, struct tm_arm_stats *ret);
bool tm_arm_auth_blocked(const struct tm_arm *arm);
const char *tm_arm_endpoint(const struct tm_arm *arm);

/* Full-jitter backoff for retry n (1 = first): uniform in
 * [0, min(max_delay, base << (n-1))]. */
uint64_t tm_arm_backoff_ms(const struct tm_arm_retry *retry, unsigned n, uint64_t *state);

/* Retry-After (seconds, or an HTTP date) in ms; 0 when absent or unreadable. */
uint64_t tm_arm_retry_after_ms(const char *value, int64_t now_s);

void tm_arm_close(struct tm_arm *arm, void (*done)(void *data), void *data);

#endif
