/*
 * providers/gcp/gce_build.c: Compute Engine requests (pure; see gce.h).
 */
#include "providers/gcp/gce.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <cjson/cJSON.h>
#include <openssl/evp.h>

#include "core/err.h"

static const char *const call_names[TM_GCE_CALL_MAX] = {
    "instances.insert", "instances.delete", "instances.aggregatedList",
    "zoneOperations.wait", "zoneOperations.get", "zoneOperations.list",
    "machineTypes.get", "zones.get", "instances.bulkInsert", "instances.get",
    "instances.setLabels", "instances.setMetadata",
};

const char *tm_gce_call_name(enum tm_gce_call c)
{
    return (unsigned)c < TM_GCE_CALL_MAX ? call_names[c] : "unknown";
}

static bool keep(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
}

int tm_gce_label_encode(const char *s, char *out, size_t size)
{
    static const char hex[] = "0123456789abcdef";
    size_t n = 0;

    if (!s || size == 0)
        return TM_EINVAL;
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        size_t need = keep(c) ? 1 : 3;

        if (n + need > 63 || n + need >= size)
            return TM_EINVAL;
        if (keep(c)) {
            out[n++] = (char)c;
        } else {
            out[n++] = '_';
            out[n++] = hex[c >> 4];
            out[n++] = hex[c & 15];
        }
    }
    out[n] = '\0';
    return 0;
}

static int hexval(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

int tm_gce_label_decode(const char *s, char *out, size_t size)
{
    size_t n = 0;

    if (!s || size == 0)
        return TM_EINVAL;
    while (*s) {
        char c;

        if (*s == '_') {
            int h = hexval(s[1]), l = h >= 0 ? hexval(s[2]) : -1;

            if (h < 0 || l < 0 || (h == 0 && l == 0))
                return TM_EINVAL;
            c = (char)(h * 16 + l);
            s += 3;
        } else if (keep((unsigned char)*s)) {
            c = *s++;
        } else {
            return TM_EINVAL;
        }
        if (n + 1 >= size)
            return TM_EINVAL;
        out[n++] = c;
    }
    out[n] = '\0';
    return 0;
}

static void sha256(const char *const *parts, size_t n, unsigned char out[32])
{
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    unsigned int len = 0;

    memset(out, 0, 32);
    if (!ctx)
        return;
    EVP_DigestInit_ex(ctx, EVP_sha256(), NULL);
    for (size_t i = 0; i < n; i++)
        EVP_DigestUpdate(ctx, parts[i], strlen(parts[i]) + 1); /* NUL separates */
    EVP_DigestFinal_ex(ctx, out, &len);
    EVP_MD_CTX_free(ctx);
}

/* A UUID in the version 5 layout from SHA-256 of parts. */
static void uuid_from(const char *const *parts, size_t n, char out[37])
{
    unsigned char h[32];

    sha256(parts, n, h);
    h[6] = (unsigned char)((h[6] & 0x0f) | 0x50); /* version 5 */
    h[8] = (unsigned char)((h[8] & 0x3f) | 0x80); /* RFC 4122 variant */
    snprintf(out, 37,
             "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
             h[0], h[1], h[2], h[3], h[4], h[5], h[6], h[7], h[8], h[9], h[10], h[11], h[12],
             h[13], h[14], h[15]);
}

void tm_gce_request_id(const char *token, const char *zone, const char *type, bool spot,
                       char out[37])
{
    const char *parts[] = {"tarmac-gce-insert", token ? token : "", zone ? zone : "",
                           type ? type : "", spot ? "spot" : "standard"};

    uuid_from(parts, 5, out);
}

void tm_gce_bulk_request_id(const char *set_key, const char *zone, const char *type, bool spot,
                            char out[37])
{
    /* Its own prefix: a set key never collides with a member's insert. */
    const char *parts[] = {"tarmac-gce-bulk-insert", set_key ? set_key : "", zone ? zone : "",
                           type ? type : "", spot ? "spot" : "standard"};

    uuid_from(parts, 5, out);
}

void tm_gce_update_request_id(const char *what, const char *token, const char *fingerprint,
                              char out[37])
{
    const char *parts[] = {"tarmac-gce-update", what ? what : "", token ? token : "",
                           fingerprint ? fingerprint : ""};

    uuid_from(parts, 4, out);
}

void tm_gce_instance_name(int64_t node_id, const char *token, char out[TM_ID_MAX])
{
    const char *parts[] = {"tarmac-gce-name", token ? token : ""};
    unsigned char h[32];

    sha256(parts, 2, h);
    snprintf(out, TM_ID_MAX, "tm-%lld-%02x%02x%02x%02x%02x", (long long)(node_id < 0 ? 0 : node_id),
             h[0], h[1], h[2], h[3], h[4]);
}

bool tm_gce_accelerator_optimized(const char *t)
{
    return t && (strncmp(t, "a2-", 3) == 0 || strncmp(t, "a3-", 3) == 0 ||
                 strncmp(t, "a4-", 3) == 0 || strncmp(t, "g2-", 3) == 0);
}

const char *tm_gce_accelerator_for_model(const char *m)
{
    static const struct { const char *model, *type; } map[] = {
        {"T4", "nvidia-tesla-t4"},   {"V100", "nvidia-tesla-v100"},
        {"P100", "nvidia-tesla-p100"}, {"P4", "nvidia-tesla-p4"},
        {"K80", "nvidia-tesla-k80"}, {"A100", "nvidia-tesla-a100"},
        {"L4", "nvidia-l4"},         {"H100", "nvidia-h100-80gb"},
    };

    for (size_t i = 0; m && i < sizeof(map) / sizeof(map[0]); i++)
        if (strcasecmp(map[i].model, m) == 0)
            return map[i].type;
    return NULL;
}

static cJSON *kv_object(const struct tm_gce_kv *kv, size_t n)
{
    cJSON *o = cJSON_CreateObject();

    for (size_t i = 0; o && i < n; i++)
        if (!cJSON_AddStringToObject(o, kv[i].key, kv[i].value)) {
            cJSON_Delete(o);
            return NULL;
        }
    return o;
}

static cJSON *metadata_object(const struct tm_gce_kv *kv, size_t n, const char *fingerprint)
{
    cJSON *o = cJSON_CreateObject();
    cJSON *arr = o ? cJSON_AddArrayToObject(o, "items") : NULL;

    if (!arr) {
        cJSON_Delete(o);
        return NULL;
    }
    if (fingerprint && !cJSON_AddStringToObject(o, "fingerprint", fingerprint)) {
        cJSON_Delete(o);
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        size_t vl = kv[i].value_len ? kv[i].value_len : strlen(kv[i].value);
        cJSON *item = cJSON_CreateObject();
        char *v = malloc(vl + 1);

        if (!item || !v) {
            cJSON_Delete(item);
            free(v);
            cJSON_Delete(o);
            return NULL;
        }
        memcpy(v, kv[i].value, vl);
        v[vl] = '\0';
        cJSON_AddStringToObject(item, "key", kv[i].key);
        cJSON_AddStringToObject(item, "value", v);
        /* the value may be a bootstrap with its secret */
        memset(v, 0, vl);
        free(v);
        cJSON_AddItemToArray(arr, item);
    }
    return o;
}

/* What an Instance and an InstanceProperties share.  props: the bulk
 * form, where machine and accelerator types are names, not zone paths. */
static int instance_fields(cJSON *root, const struct tm_gce_insert_params *p, bool props)
{
    cJSON *arr, *disk, *init, *nic, *ac, *sched;
    char buf[512];

    if (props)
        cJSON_AddStringToObject(root, "machineType", p->machine_type);
    else {
        snprintf(buf, sizeof(buf), "zones/%s/machineTypes/%s", p->zone, p->machine_type);
        cJSON_AddStringToObject(root, "machineType", buf);
    }
    if (p->nlabels)
        cJSON_AddItemToObject(root, "labels", kv_object(p->labels, p->nlabels));
    if (p->nmetadata)
        cJSON_AddItemToObject(root, "metadata", metadata_object(p->metadata, p->nmetadata, NULL));
    arr = cJSON_AddArrayToObject(root, "disks");
    disk = cJSON_CreateObject();
    if (arr && disk) {
        cJSON_AddBoolToObject(disk, "boot", 1);
        cJSON_AddBoolToObject(disk, "autoDelete", 1);
        init = cJSON_AddObjectToObject(disk, "initializeParams");
        if (init) {
            cJSON_AddStringToObject(init, "sourceImage", p->source_image);
            if (p->disk_gb > 0) {
                snprintf(buf, sizeof(buf), "%lld", (long long)p->disk_gb);
                cJSON_AddStringToObject(init, "diskSizeGb", buf); /* int64: a string */
            }
        }
        cJSON_AddItemToArray(arr, disk);
    } else {
        cJSON_Delete(disk);
    }
    arr = cJSON_AddArrayToObject(root, "networkInterfaces");
    nic = cJSON_CreateObject();
    if (arr && nic) {
        cJSON_AddStringToObject(nic, "network", p->network ? p->network : "global/networks/default");
        cJSON_AddItemToArray(arr, nic);
    } else {
        cJSON_Delete(nic);
    }
    if (p->accelerator_type && p->accelerator_count > 0) {
        arr = cJSON_AddArrayToObject(root, "guestAccelerators");
        ac = cJSON_CreateObject();
        if (arr && ac) {
            if (props)
                snprintf(buf, sizeof(buf), "%s", p->accelerator_type);
            else
                snprintf(buf, sizeof(buf), "zones/%s/acceleratorTypes/%s", p->zone,
                         p->accelerator_type);
            cJSON_AddStringToObject(ac, "acceleratorType", buf);
            cJSON_AddNumberToObject(ac, "acceleratorCount", p->accelerator_count);
            cJSON_AddItemToArray(arr, ac);
        } else {
            cJSON_Delete(ac);
        }
    }
    /* GPU VMs cannot live-migrate: TERMINATE on host maintenance, always. */
    sched = cJSON_AddObjectToObject(root, "scheduling");
    if (sched) {
        cJSON_AddStringToObject(sched, "onHostMaintenance", "TERMINATE");
        if (p->spot) {
            cJSON_AddStringToObject(sched, "provisioningModel", "SPOT");
            cJSON_AddStringToObject(sched, "instanceTerminationAction", "DELETE");
            cJSON_AddBoolToObject(sched, "automaticRestart", 0);
        } else {
            cJSON_AddStringToObject(sched, "provisioningModel", "STANDARD");
            cJSON_AddBoolToObject(sched, "automaticRestart", 1);
        }
    }
    /* Any allocation that failed above left a member out: refuse the
     * whole body rather than send a partial one. */
    if (!sched || !cJSON_GetObjectItemCaseSensitive(root, "machineType") ||
        (p->nlabels && !cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(root, "labels"))) ||
        (p->nmetadata && !cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(root, "metadata"))) ||
        cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(root, "disks")) != 1 ||
        cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(root, "networkInterfaces")) != 1)
        return TM_ENOMEM;
    return 0;
}

static int print_body(cJSON *root, int r, char **ret_body)
{
    char *body = r == 0 ? cJSON_PrintUnformatted(root) : NULL;

    cJSON_Delete(root);
    if (r < 0)
        return r;
    if (!body)
        return TM_ENOMEM;
    *ret_body = body;
    return 0;
}

static bool props_ok(const struct tm_gce_insert_params *p)
{
    return p->zone && *p->zone && p->machine_type && *p->machine_type && p->source_image &&
           *p->source_image;
}

int tm_gce_build_insert(const struct tm_gce_insert_params *p, char **ret_body)
{
    cJSON *root;
    int r;

    if (!p || !p->name || !*p->name || !props_ok(p) || !ret_body)
        return TM_EINVAL;
    root = cJSON_CreateObject();
    if (!root)
        return TM_ENOMEM;
    r = cJSON_AddStringToObject(root, "name", p->name) ? instance_fields(root, p, false)
                                                       : TM_ENOMEM;
    return print_body(root, r, ret_body);
}

int tm_gce_build_bulk_insert(const struct tm_gce_bulk_params *p, char **ret_body)
{
    cJSON *root, *props, *per;
    char count[24];
    int r = 0;

    if (!p || !props_ok(&p->props) || !p->names || p->nnames == 0 || !ret_body)
        return TM_EINVAL;
    for (size_t i = 0; i < p->nnames; i++)
        if (!p->names[i] || !*p->names[i])
            return TM_EINVAL;
    root = cJSON_CreateObject();
    if (!root)
        return TM_ENOMEM;
    /* count = minCount: GCE makes the whole set or deletes what it made. */
    snprintf(count, sizeof(count), "%zu", p->nnames);
    if (!cJSON_AddStringToObject(root, "count", count) ||
        !cJSON_AddStringToObject(root, "minCount", count))
        r = TM_ENOMEM;
    per = r == 0 ? cJSON_AddObjectToObject(root, "perInstanceProperties") : NULL;
    for (size_t i = 0; per && i < p->nnames; i++) {
        cJSON *one;

        if (cJSON_GetObjectItemCaseSensitive(per, p->names[i])) {
            r = TM_EINVAL; /* two members with one name */
            break;
        }
        one = cJSON_AddObjectToObject(per, p->names[i]);
        if (!one || !cJSON_AddStringToObject(one, "name", p->names[i]))
            r = TM_ENOMEM;
    }
    if (!per && r == 0)
        r = TM_ENOMEM;
    props = r == 0 ? cJSON_AddObjectToObject(root, "instanceProperties") : NULL;
    if (r == 0)
        r = props ? instance_fields(props, &p->props, true) : TM_ENOMEM;
    if (r == 0 && p->resource_policy && *p->resource_policy) {
        cJSON *arr = cJSON_AddArrayToObject(props, "resourcePolicies");
        cJSON *name = cJSON_CreateString(p->resource_policy);

        if (!arr || !name) {
            cJSON_Delete(name);
            r = TM_ENOMEM;
        } else {
            cJSON_AddItemToArray(arr, name);
        }
    }
    return print_body(root, r, ret_body);
}

int tm_gce_build_set_labels(const struct tm_gce_kv *labels, size_t n, const char *fingerprint,
                            char **ret_body)
{
    cJSON *root, *l;
    int r = 0;

    if (!fingerprint || !*fingerprint || (n && !labels) || !ret_body)
        return TM_EINVAL;
    root = cJSON_CreateObject();
    if (!root)
        return TM_ENOMEM;
    l = kv_object(labels, n);
    if (!l)
        r = TM_ENOMEM;
    else
        cJSON_AddItemToObject(root, "labels", l);
    if (r == 0 && !cJSON_AddStringToObject(root, "labelFingerprint", fingerprint))
        r = TM_ENOMEM;
    return print_body(root, r, ret_body);
}

int tm_gce_build_set_metadata(const struct tm_gce_kv *items, size_t n, const char *fingerprint,
                              char **ret_body)
{
    cJSON *root;

    if (!fingerprint || !*fingerprint || (n && !items) || !ret_body)
        return TM_EINVAL;
    root = metadata_object(items, n, fingerprint);
    return print_body(root, root ? 0 : TM_ENOMEM, ret_body);
}

/*
 * bulkInsert gives every member the same metadata, so the shared
 * startup-script cannot carry a node's enrollment secret.  It waits for
 * the instance's own tarmac-bootstrap item (set by instances.setMetadata
 * once the set exists, before the set is reported made) and runs it.  The
 * metadata server is only reachable from the instance itself.
 */
static const char bulk_startup_script[] =
    "#!/bin/sh\n"
    "# tarmac: this node's own bootstrap arrives as the instance metadata\n"
    "# item tarmac-bootstrap once its gang's set exists.\n"
    "u=http://metadata.google.internal/computeMetadata/v1/instance/attributes/tarmac-bootstrap\n"
    "f=/run/tarmac-bootstrap\n"
    "umask 077\n"
    "i=0\n"
    "until curl -sf -H 'Metadata-Flavor: Google' -o \"$f\" \"$u\"; do\n"
    "  i=$((i + 1))\n"
    "  [ \"$i\" -lt 900 ] || exit 1\n"
    "  sleep 2\n"
    "done\n"
    "chmod 700 \"$f\"\n"
    "case $(head -c 2 \"$f\") in\n"
    "'#!') \"$f\" ;;\n"
    "*) sh \"$f\" ;;\n"
    "esac\n"
    "rc=$?\n"
    "rm -f \"$f\"\n"
    "exit $rc\n";

const char *tm_gce_bulk_startup_script(void)
{
    return bulk_startup_script;
}

/* ---- URLs ---------------------------------------------------------------- */

static void pct(char **o, const char *s)
{
    static const char hex[] = "0123456789ABCDEF";

    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;

        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
            c == '-' || c == '.' || c == '_' || c == '~') {
            *(*o)++ = (char)c;
        } else {
            *(*o)++ = '%';
            *(*o)++ = hex[c >> 4];
            *(*o)++ = hex[c & 15];
        }
    }
    **o = '\0';
}

/* base + path, then name=value pairs (NULL values skipped), encoded. */
static char *url_make(const char *base, const char *path, const char *const *q, size_t nq)
{
    size_t cap = strlen(base) + strlen(path) + 2;
    char *url, *o;

    for (size_t i = 0; i < nq; i += 2)
        if (q[i + 1])
            cap += strlen(q[i]) + 3 * strlen(q[i + 1]) + 2;
    url = malloc(cap);
    if (!url)
        return NULL;
    o = url + snprintf(url, cap, "%s%s", base, path);
    for (size_t i = 0, n = 0; i < nq; i += 2) {
        if (!q[i + 1])
            continue;
        *o++ = n++ ? '&' : '?';
        o += snprintf(o, cap - (size_t)(o - url), "%s=", q[i]);
        pct(&o, q[i + 1]);
    }
    return url;
}

/* Three segments of at most 200 bytes and the literal parts between them:
 * a path never truncates (the optimiser checks that it cannot). */
#define TM_GCE_PATH_MAX 1024

static bool seg_ok(const char *s)
{
    if (!s || !*s || strlen(s) > 200)
        return false;
    for (; *s; s++)
        if (*s == '/' || *s == '?' || *s == '#' || *s == '%' || *s == ' ' || (unsigned char)*s < 0x21)
            return false;
    return true;
}

char *tm_gce_url_insert(const char *endpoint, const char *project, const char *zone,
                        const char *request_id)
{
    char path[TM_GCE_PATH_MAX];
    const char *q[] = {"requestId", request_id};

    if (!seg_ok(project) || !seg_ok(zone))
        return NULL;
    snprintf(path, sizeof(path), "/projects/%s/zones/%s/instances", project, zone);
    return url_make(endpoint, path, q, 2);
}

char *tm_gce_url_bulk_insert(const char *endpoint, const char *project, const char *zone,
                             const char *request_id)
{
    char path[TM_GCE_PATH_MAX];
    const char *q[] = {"requestId", request_id};

    if (!seg_ok(project) || !seg_ok(zone))
        return NULL;
    snprintf(path, sizeof(path), "/projects/%s/zones/%s/instances/bulkInsert", project, zone);
    return url_make(endpoint, path, q, 2);
}

char *tm_gce_url_instance(const char *endpoint, const char *project, const char *zone,
                          const char *name, const char *verb, const char *request_id)
{
    char path[TM_GCE_PATH_MAX];
    const char *q[] = {"requestId", request_id};

    if (!seg_ok(project) || !seg_ok(zone) || !seg_ok(name) || (verb && !seg_ok(verb)))
        return NULL;
    snprintf(path, sizeof(path), "/projects/%s/zones/%s/instances/%s%s%s", project, zone, name,
             verb ? "/" : "", verb ? verb : "");
    return url_make(endpoint, path, q, 2);
}

char *tm_gce_url_delete(const char *endpoint, const char *project, const char *zone,
                        const char *name)
{
    char path[TM_GCE_PATH_MAX];

    if (!seg_ok(project) || !seg_ok(zone) || !seg_ok(name))
        return NULL;
    snprintf(path, sizeof(path), "/projects/%s/zones/%s/instances/%s", project, zone, name);
    return url_make(endpoint, path, NULL, 0);
}

char *tm_gce_url_aggregated_list(const char *endpoint, const char *project, const char *filter,
                                 int max_results, const char *page_token)
{
    char path[TM_GCE_PATH_MAX], mr[16];
    const char *q[] = {"filter", filter, "maxResults", max_results > 0 ? mr : NULL,
                       "pageToken", page_token, "returnPartialSuccess", "false"};

    if (!seg_ok(project))
        return NULL;
    snprintf(mr, sizeof(mr), "%d", max_results);
    snprintf(path, sizeof(path), "/projects/%s/aggregated/instances", project);
    return url_make(endpoint, path, q, 8);
}

char *tm_gce_url_operation(const char *endpoint, const char *project, const char *zone,
                           const char *operation, bool wait)
{
    char path[TM_GCE_PATH_MAX];

    if (!seg_ok(project) || !seg_ok(zone) || !seg_ok(operation))
        return NULL;
    snprintf(path, sizeof(path), "/projects/%s/zones/%s/operations/%s%s", project, zone,
             operation, wait ? "/wait" : "");
    return url_make(endpoint, path, NULL, 0);
}

char *tm_gce_url_operations_list(const char *endpoint, const char *project, const char *zone,
                                 const char *filter, const char *page_token)
{
    char path[TM_GCE_PATH_MAX];
    const char *q[] = {"filter", filter, "pageToken", page_token};

    if (!seg_ok(project) || !seg_ok(zone))
        return NULL;
    snprintf(path, sizeof(path), "/projects/%s/zones/%s/operations", project, zone);
    return url_make(endpoint, path, q, 4);
}

char *tm_gce_url_machine_type(const char *endpoint, const char *project, const char *zone,
                              const char *type)
{
    char path[TM_GCE_PATH_MAX];

    if (!seg_ok(project) || !seg_ok(zone) || !seg_ok(type))
        return NULL;
    snprintf(path, sizeof(path), "/projects/%s/zones/%s/machineTypes/%s", project, zone, type);
    return url_make(endpoint, path, NULL, 0);
}

char *tm_gce_url_zone(const char *endpoint, const char *project, const char *zone)
{
    char path[TM_GCE_PATH_MAX];

    if (!seg_ok(project) || !seg_ok(zone))
        return NULL;
    snprintf(path, sizeof(path), "/projects/%s/zones/%s", project, zone);
    return url_make(endpoint, path, NULL, 0);
}

int tm_gce_label_filter(const struct tm_gce_kv *terms, size_t n, char *out, size_t size)
{
    size_t used = 0;

    if (size == 0)
        return TM_EINVAL;
    out[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        char enc[64];
        int w;

        if (tm_gce_label_encode(terms[i].value, enc, sizeof(enc)) < 0)
            return TM_EINVAL;
        w = snprintf(out + used, size - used, "%s(labels.%s = \"%s\")", i ? " AND " : "",
                     terms[i].key, enc);
        if (w < 0 || (size_t)w >= size - used)
            return TM_EINVAL;
        used += (size_t)w;
    }
    return 0;
}
