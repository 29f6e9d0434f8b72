/*
 * providers/azure/arm_json.c: ARM request bodies and answers (see arm.h).
 *
 * Bodies and answers go through cJSON; nothing here touches the network.
 * Every failure writes one line naming the call to err.
 */
#include "providers/azure/arm.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <cjson/cJSON.h>
#include <openssl/evp.h>

#include "core/err.h"

static const char *const call_names[TM_ARM_CALL_MAX] = {
    "VirtualMachines_Get", "VirtualMachines_CreateOrUpdate", "VirtualMachines_Delete",
    "VirtualMachines_List", "async operation", "token", "OpenID discovery", "ResourceSkus_List",
};

const char *tm_arm_call_name(enum tm_arm_call c)
{
    return (unsigned)c < TM_ARM_CALL_MAX ? call_names[c] : "unknown";
}

static int bad(enum tm_arm_call call, char *err, size_t errsize, const char *why)
{
    if (err && errsize)
        snprintf(err, errsize, "could not parse %s reply: %s", tm_arm_call_name(call), why);
    return TM_EBADREPLY;
}

static void copy(char *dst, size_t size, const char *src)
{
    snprintf(dst, size, "%s", src ? src : "");
}

/* ---- requests ----------------------------------------------------------- */

int tm_arm_vm_name(const char *cluster, int64_t node_id, char *buf, size_t size)
{
    char safe[TM_ID_MAX];
    size_t i;
    int n;

    if (!cluster || !*cluster || node_id <= 0 || strlen(cluster) >= sizeof(safe))
        return TM_EINVAL;
    for (i = 0; cluster[i]; i++)
        safe[i] = isalnum((unsigned char)cluster[i]) || cluster[i] == '-' ? cluster[i] : '-';
    safe[i] = '\0';
    n = snprintf(buf, size, "tm-%s-%lld", safe, (long long)node_id);
    if (n < 0 || (size_t)n >= size || n > 64)
        return TM_EINVAL;
    return 0;
}

static bool set(const char *s) { return s && *s; }

static char *base64(const char *data, size_t len)
{
    size_t out = 4 * ((len + 2) / 3) + 1;
    char *b = malloc(out);

    if (!b)
        return NULL;
    EVP_EncodeBlock((unsigned char *)b, (const unsigned char *)data, (int)len);
    return b;
}

/* "publisher:offer:sku:version" or a resource id ("/subscriptions/..."). */
static cJSON *image_reference(const char *image)
{
    cJSON *ref = cJSON_CreateObject();
    char parts[4][256];
    const char *p = image;
    int n = 0;

    if (!ref)
        return NULL;
    if (image[0] == '/') {
        cJSON_AddStringToObject(ref, "id", image);
        return ref;
    }
    while (n < 4) {
        const char *c = strchr(p, ':');
        size_t l = c ? (size_t)(c - p) : strlen(p);

        if (l == 0 || l >= sizeof(parts[0]))
            break;
        memcpy(parts[n], p, l);
        parts[n][l] = '\0';
        n++;
        if (!c)
            break;
        p = c + 1;
    }
    if (n != 4) {
        cJSON_Delete(ref);
        return NULL;
    }
    cJSON_AddStringToObject(ref, "publisher", parts[0]);
    cJSON_AddStringToObject(ref, "offer", parts[1]);
    cJSON_AddStringToObject(ref, "sku", parts[2]);
    cJSON_AddStringToObject(ref, "version", parts[3]);
    return ref;
}

int tm_arm_build_vm(const struct tm_arm_vm_params *p, char **ret_body)
{
    cJSON *root, *props, *o, *a, *x;
    char keypath[256], nic[TM_ID_MAX + 8];
    char *b64 = NULL, *out;

    if (!p || !ret_body || !set(p->name) || !set(p->location) || !set(p->vm_size) ||
        !set(p->subnet_id) || !set(p->image) || !set(p->admin_username) ||
        !set(p->ssh_public_key) || !set(p->cluster) || !set(p->pool) || !set(p->node) ||
        !set(p->token))
        return TM_EINVAL;
    root = cJSON_CreateObject();
    if (!root)
        return TM_ENOMEM;
    cJSON_AddStringToObject(root, "location", p->location);
    if (set(p->zone)) {
        a = cJSON_AddArrayToObject(root, "zones");
        cJSON_AddItemToArray(a, cJSON_CreateString(p->zone));
    }
    o = cJSON_AddObjectToObject(root, "tags");
    cJSON_AddStringToObject(o, TM_ARM_TAG_CLUSTER, p->cluster);
    cJSON_AddStringToObject(o, TM_ARM_TAG_POOL, p->pool);
    cJSON_AddStringToObject(o, TM_ARM_TAG_NODE, p->node);
    cJSON_AddStringToObject(o, TM_ARM_TAG_TOKEN, p->token);
    props = cJSON_AddObjectToObject(root, "properties");
    o = cJSON_AddObjectToObject(props, "hardwareProfile");
    cJSON_AddStringToObject(o, "vmSize", p->vm_size);

    o = cJSON_AddObjectToObject(props, "storageProfile");
    x = image_reference(p->image);
    if (!x) {
        cJSON_Delete(root);
        return TM_EINVAL;
    }
    cJSON_AddItemToObject(o, "imageReference", x);
    x = cJSON_AddObjectToObject(o, "osDisk");
    cJSON_AddStringToObject(x, "createOption", "FromImage");
    /* The disk goes with the VM: nothing left billing after DELETE. */
    cJSON_AddStringToObject(x, "deleteOption", "Delete");
    cJSON_AddStringToObject(cJSON_AddObjectToObject(x, "managedDisk"), "storageAccountType",
                            "Premium_LRS");

    o = cJSON_AddObjectToObject(props, "osProfile");
    cJSON_AddStringToObject(o, "computerName", p->name);
    cJSON_AddStringToObject(o, "adminUsername", p->admin_username);
    if (p->custom_data && p->custom_data_len) {
        b64 = base64(p->custom_data, p->custom_data_len);
        if (!b64) {
            cJSON_Delete(root);
            return TM_ENOMEM;
        }
        cJSON_AddStringToObject(o, "customData", b64);
        OPENSSL_cleanse(b64, strlen(b64));
        free(b64);
    }
    x = cJSON_AddObjectToObject(o, "linuxConfiguration");
    cJSON_AddBoolToObject(x, "disablePasswordAuthentication", 1);
    x = cJSON_AddArrayToObject(cJSON_AddObjectToObject(x, "ssh"), "publicKeys");
    {
        cJSON *k = cJSON_CreateObject();

        snprintf(keypath, sizeof(keypath), "/home/%s/.ssh/authorized_keys", p->admin_username);
        cJSON_AddStringToObject(k, "path", keypath);
        cJSON_AddStringToObject(k, "keyData", p->ssh_public_key);
        cJSON_AddItemToArray(x, k);
    }

    /* The NIC is made by the VM PUT itself (networkInterfaceConfigurations),
     * so there is no second resource to create, find or leak, and it is
     * deleted with the VM. */
    o = cJSON_AddObjectToObject(props, "networkProfile");
    cJSON_AddStringToObject(o, "networkApiVersion", TM_ARM_NETWORK_API_VERSION);
    a = cJSON_AddArrayToObject(o, "networkInterfaceConfigurations");
    {
        cJSON *n = cJSON_CreateObject(), *np, *ips, *ip;

        snprintf(nic, sizeof(nic), "%s-nic", p->name);
        cJSON_AddStringToObject(n, "name", nic);
        np = cJSON_AddObjectToObject(n, "properties");
        cJSON_AddBoolToObject(np, "primary", 1);
        cJSON_AddStringToObject(np, "deleteOption", "Delete");
        ips = cJSON_AddArrayToObject(np, "ipConfigurations");
        ip = cJSON_CreateObject();
        cJSON_AddStringToObject(ip, "name", "ipconfig1");
        cJSON_AddStringToObject(
            cJSON_AddObjectToObject(cJSON_AddObjectToObject(ip, "properties"), "subnet"), "id",
            p->subnet_id);
        cJSON_AddItemToArray(ips, ip);
        cJSON_AddItemToArray(a, n);
    }
    if (p->spot) {
        cJSON_AddStringToObject(props, "priority", "Spot");
        cJSON_AddStringToObject(props, "evictionPolicy", "Delete");
        /* -1: pay up to the on-demand price, never evicted for price. */
        cJSON_AddNumberToObject(cJSON_AddObjectToObject(props, "billingProfile"), "maxPrice", -1);
    } else {
        cJSON_AddStringToObject(props, "priority", "Regular");
    }
    out = cJSON_PrintUnformatted(root);
    /* The body holds the bootstrap's secret: wipe the tree's copy. */
    {
        cJSON *os = cJSON_GetObjectItemCaseSensitive(props, "osProfile");
        cJSON *cd = cJSON_GetObjectItemCaseSensitive(os, "customData");

        if (cJSON_IsString(cd))
            OPENSSL_cleanse(cd->valuestring, strlen(cd->valuestring));
    }
    cJSON_Delete(root);
    if (!out)
        return TM_ENOMEM;
    *ret_body = out;
    return 0;
}

/* application/x-www-form-urlencoded, RFC 3986 unreserved kept. */
static size_t form_escape(char *dst, const char *s)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t n = 0;

    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (isalnum(*p) || *p == '-' || *p == '.' || *p == '_' || *p == '~') {
            if (dst)
                dst[n] = (char)*p;
            n++;
        } else {
            if (dst) {
                dst[n] = '%';
                dst[n + 1] = hex[*p >> 4];
                dst[n + 2] = hex[*p & 15];
            }
            n += 3;
        }
    }
    return n;
}

static int build_form(const char *const *keys, const char *const *vals, int nkeys,
                      char **ret_body)
{
    size_t n = 0, at = 0;
    char *out;

    for (int i = 0; i < nkeys; i++)
        n += strlen(keys[i]) + 2 + form_escape(NULL, vals[i]);
    out = malloc(n + 1);
    if (!out)
        return TM_ENOMEM;
    for (int i = 0; i < nkeys; i++) {
        if (i)
            out[at++] = '&';
        memcpy(out + at, keys[i], strlen(keys[i]));
        at += strlen(keys[i]);
        out[at++] = '=';
        at += form_escape(out + at, vals[i]);
    }
    out[at] = '\0';
    *ret_body = out;
    return 0;
}

int tm_arm_build_token_form(const char *client_id, const char *client_secret, const char *scope,
                            char **ret_body)
{
    const char *keys[] = {"client_id", "scope", "grant_type", "client_secret"};
    const char *vals[] = {client_id, scope, "client_credentials", client_secret};

    if (!set(client_id) || !set(client_secret) || !set(scope) || !ret_body)
        return TM_EINVAL;
    return build_form(keys, vals, 4, ret_body);
}

int tm_arm_build_assertion_form(const char *client_id, const char *assertion, const char *scope,
                                char **ret_body)
{
    const char *keys[] = {"client_id", "scope", "grant_type", "client_assertion_type",
                          "client_assertion"};
    const char *vals[] = {client_id, scope, "client_credentials", TM_ARM_ASSERTION_TYPE,
                          assertion};

    if (!set(client_id) || !set(assertion) || !set(scope) || !ret_body)
        return TM_EINVAL;
    return build_form(keys, vals, 5, ret_body);
}

/* ---- answers ------------------------------------------------------------ */

static cJSON *parse(enum tm_arm_call call, const char *body, size_t len, char *err,
                    size_t errsize)
{
    cJSON *j;

    if (!body || len == 0) {
        bad(call, err, errsize, "empty body");
        return NULL;
    }
    j = cJSON_ParseWithLength(body, len);
    if (!j) {
        bad(call, err, errsize, "not JSON (malformed or truncated)");
        return NULL;
    }
    if (!cJSON_IsObject(j)) {
        cJSON_Delete(j);
        bad(call, err, errsize, "not a JSON object");
        return NULL;
    }
    return j;
}

static const char *str(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static int vm_from(const cJSON *v, struct tm_arm_vm *vm, enum tm_arm_call call, char *err,
                   size_t errsize)
{
    const cJSON *props = cJSON_GetObjectItemCaseSensitive(v, "properties");
    const cJSON *tags = cJSON_GetObjectItemCaseSensitive(v, "tags");
    const cJSON *zones = cJSON_GetObjectItemCaseSensitive(v, "zones");
    const char *name = str(v, "name"), *s;
    const cJSON *iv, *st;

    memset(vm, 0, sizeof(*vm));
    if (!cJSON_IsObject(v))
        return bad(call, err, errsize, "a VM is not an object");
    if (!name || !*name || strlen(name) >= TM_ID_MAX)
        return bad(call, err, errsize, "a VM without a usable name");
    if (props && !cJSON_IsObject(props))
        return bad(call, err, errsize, "properties is not an object");
    copy(vm->inst.id, sizeof(vm->inst.id), name);
    if (cJSON_IsObject(tags)) {
        copy(vm->cluster, sizeof(vm->cluster), str(tags, TM_ARM_TAG_CLUSTER));
        copy(vm->inst.pool, sizeof(vm->inst.pool), str(tags, TM_ARM_TAG_POOL));
        copy(vm->inst.token, sizeof(vm->inst.token), str(tags, TM_ARM_TAG_TOKEN));
        s = str(tags, TM_ARM_TAG_NODE);
        if (s) {
            char *end;
            long long n;

            errno = 0;
            n = strtoll(s, &end, 10);
            vm->inst.node_id = errno || *end || n < 0 ? 0 : n;
        }
    }
    if (cJSON_IsArray(zones) && cJSON_GetArraySize(zones) > 0 &&
        cJSON_IsString(cJSON_GetArrayItem(zones, 0)))
        copy(vm->inst.zone, sizeof(vm->inst.zone), cJSON_GetArrayItem(zones, 0)->valuestring);
    copy(vm->inst.instance_type, sizeof(vm->inst.instance_type),
         str(cJSON_GetObjectItemCaseSensitive(props, "hardwareProfile"), "vmSize"));
    copy(vm->provisioning_state, sizeof(vm->provisioning_state), str(props, "provisioningState"));
    s = str(props, "priority");
    vm->spot = s && (strcmp(s, "Spot") == 0 || strcmp(s, "Low") == 0);
    vm->inst.capacity = vm->spot ? TM_CAPACITY_SPOT : TM_CAPACITY_ON_DEMAND;
    iv = cJSON_GetObjectItemCaseSensitive(props, "instanceView");
    st = cJSON_GetObjectItemCaseSensitive(iv, "statuses");
    if (cJSON_IsArray(st)) {
        const cJSON *e;

        cJSON_ArrayForEach(e, st) {
            const char *c = str(e, "code");

            if (c && strncmp(c, "PowerState/", 11) == 0)
                copy(vm->power_state, sizeof(vm->power_state), c + 11);
        }
    }
    /* State: the power state when the answer has one, else provisioning. */
    s = vm->provisioning_state;
    if (strcmp(vm->power_state, "running") == 0)
        vm->inst.state = TM_INSTANCE_RUNNING;
    else if (strcmp(vm->power_state, "stopped") == 0 ||
             strcmp(vm->power_state, "deallocated") == 0)
        vm->inst.state = TM_INSTANCE_STOPPED;
    else if (strcmp(vm->power_state, "stopping") == 0 ||
             strcmp(vm->power_state, "deallocating") == 0 || strcasecmp(s, "Deleting") == 0)
        vm->inst.state = TM_INSTANCE_STOPPING;
    else if (strcasecmp(s, "Succeeded") == 0)
        vm->inst.state = TM_INSTANCE_RUNNING;
    else if (strcasecmp(s, "Failed") == 0 || strcasecmp(s, "Canceled") == 0)
        vm->inst.state = TM_INSTANCE_TERMINATED;
    else
        vm->inst.state = TM_INSTANCE_PENDING; /* Creating, Updating, Migrating, "" */
    return 0;
}

int tm_arm_parse_vm(const char *body, size_t len, struct tm_arm_vm *ret, char *err,
                    size_t errsize)
{
    cJSON *j = parse(TM_ARM_GET_VM, body, len, err, errsize);
    int r;

    if (!j) {
        memset(ret, 0, sizeof(*ret));
        return TM_EBADREPLY;
    }
    r = vm_from(j, ret, TM_ARM_GET_VM, err, errsize);
    cJSON_Delete(j);
    return r;
}

int tm_arm_parse_vm_list(const char *body, size_t len, struct tm_arm_vm **ret_vms,
                         size_t *ret_n, char **ret_next_link, char *err, size_t errsize)
{
    cJSON *j = parse(TM_ARM_LIST_VMS, body, len, err, errsize);
    const cJSON *value, *e, *next;
    struct tm_arm_vm *vms = NULL;
    size_t n = 0;
    int r = 0;

    *ret_vms = NULL;
    *ret_n = 0;
    *ret_next_link = NULL;
    if (!j)
        return TM_EBADREPLY;
    value = cJSON_GetObjectItemCaseSensitive(j, "value");
    next = cJSON_GetObjectItemCaseSensitive(j, "nextLink");
    if (!cJSON_IsArray(value)) {
        cJSON_Delete(j);
        return bad(TM_ARM_LIST_VMS, err, errsize, "no value array");
    }
    if (next && !cJSON_IsNull(next) && (!cJSON_IsString(next) || !*next->valuestring ||
                                        strlen(next->valuestring) >= TM_ARM_URL_MAX)) {
        cJSON_Delete(j);
        return bad(TM_ARM_LIST_VMS, err, errsize, "nextLink is not a usable URL");
    }
    vms = calloc((size_t)cJSON_GetArraySize(value) + 1, sizeof(*vms));
    if (!vms) {
        cJSON_Delete(j);
        return TM_ENOMEM;
    }
    cJSON_ArrayForEach(e, value) {
        r = vm_from(e, &vms[n], TM_ARM_LIST_VMS, err, errsize);
        if (r < 0)
            break;
        n++;
    }
    if (r == 0 && cJSON_IsString(next)) {
        *ret_next_link = strdup(next->valuestring);
        if (!*ret_next_link)
            r = TM_ENOMEM;
    }
    cJSON_Delete(j);
    if (r < 0) {
        free(vms);
        return r;
    }
    *ret_vms = vms;
    *ret_n = n;
    return 0;
}

static void error_of(const cJSON *e, char *code, size_t codesize, char *msg, size_t msgsize)
{
    const char *c = str(e, "code"), *m = str(e, "message");
    const cJSON *details = cJSON_GetObjectItemCaseSensitive(e, "details");

    /* Some errors wrap the reason ("Conflict" around "SkuNotAvailable"). */
    if (cJSON_IsArray(details) && cJSON_GetArraySize(details) > 0 &&
        (!c || strcmp(c, "Conflict") == 0 || strcmp(c, "BadRequest") == 0 ||
         strcmp(c, "DeploymentFailed") == 0)) {
        const cJSON *d = cJSON_GetArrayItem(details, 0);

        if (str(d, "code")) {
            c = str(d, "code");
            m = str(d, "message") ? str(d, "message") : m;
        }
    }
    if (code && codesize)
        copy(code, codesize, c);
    if (msg && msgsize)
        copy(msg, msgsize, m);
}

int tm_arm_parse_operation(const char *body, size_t len, enum tm_arm_op_status *ret, char *code,
                           size_t codesize, char *msg, size_t msgsize, char *err,
                           size_t errsize)
{
    cJSON *j = parse(TM_ARM_POLL, body, len, err, errsize);
    const char *s;

    if (code && codesize)
        code[0] = '\0';
    if (msg && msgsize)
        msg[0] = '\0';
    if (!j)
        return TM_EBADREPLY;
    s = str(j, "status");
    if (!s) {
        cJSON_Delete(j);
        return bad(TM_ARM_POLL, err, errsize, "no status");
    }
    if (strcasecmp(s, "Succeeded") == 0) {
        *ret = TM_ARM_OP_SUCCEEDED;
    } else if (strcasecmp(s, "Failed") == 0) {
        *ret = TM_ARM_OP_FAILED;
    } else if (strcasecmp(s, "Canceled") == 0) {
        *ret = TM_ARM_OP_CANCELED;
    } else {
        *ret = TM_ARM_OP_IN_PROGRESS; /* InProgress, or any non-terminal state */
    }
    if (*ret == TM_ARM_OP_FAILED || *ret == TM_ARM_OP_CANCELED)
        error_of(cJSON_GetObjectItemCaseSensitive(j, "error"), code, codesize, msg, msgsize);
    cJSON_Delete(j);
    return 0;
}

int tm_arm_parse_error(const char *body, size_t len, char *code, size_t codesize, char *msg,
                       size_t msgsize)
{
    cJSON *j;
    const cJSON *e;

    if (code && codesize)
        code[0] = '\0';
    if (msg && msgsize)
        msg[0] = '\0';
    if (!body || !len)
        return TM_EBADREPLY;
    j = cJSON_ParseWithLength(body, len);
    e = cJSON_GetObjectItemCaseSensitive(j, "error");
    /* The identity platform's errors are flat: {"error": "invalid_client",
     * "error_description": "..."}. */
    if (cJSON_IsString(e)) {
        if (code && codesize)
            copy(code, codesize, e->valuestring);
        if (msg && msgsize)
            copy(msg, msgsize, str(j, "error_description"));
        cJSON_Delete(j);
        return 0;
    }
    if (!cJSON_IsObject(e)) {
        cJSON_Delete(j);
        return TM_EBADREPLY;
    }
    error_of(e, code, codesize, msg, msgsize);
    cJSON_Delete(j);
    return 0;
}

int tm_arm_parse_token(const char *body, size_t len, char **ret_token, int64_t *ret_expires_s,
                       char *err, size_t errsize)
{
    cJSON *j = parse(TM_ARM_TOKEN, body, len, err, errsize);
    const cJSON *e;
    const char *t;
    int64_t exp = -1;

    *ret_token = NULL;
    if (!j)
        return TM_EBADREPLY;
    t = str(j, "access_token");
    e = cJSON_GetObjectItemCaseSensitive(j, "expires_in");
    if (cJSON_IsNumber(e) && e->valuedouble >= 0 && e->valuedouble < 1e9) {
        exp = (int64_t)e->valuedouble;
    } else if (cJSON_IsString(e)) { /* IMDS sends "3599" */
        char *end;
        long long v;

        errno = 0;
        v = strtoll(e->valuestring, &end, 10);
        if (!errno && end != e->valuestring && !*end && v >= 0 && v < 1000000000)
            exp = v;
    }
    if (!t || !*t || strlen(t) > 16384) {
        cJSON_Delete(j);
        return bad(TM_ARM_TOKEN, err, errsize, "no access_token");
    }
    if (exp < 0) {
        cJSON_Delete(j);
        return bad(TM_ARM_TOKEN, err, errsize, "no usable expires_in");
    }
    *ret_token = strdup(t);
    OPENSSL_cleanse((void *)t, strlen(t));
    cJSON_Delete(j);
    if (!*ret_token)
        return TM_ENOMEM;
    *ret_expires_s = exp;
    return 0;
}

int tm_arm_parse_openid(const char *body, size_t len, char *buf, size_t size, char *err,
                        size_t errsize)
{
    cJSON *j = parse(TM_ARM_DISCOVERY, body, len, err, errsize);
    const char *t;

    if (!j)
        return TM_EBADREPLY;
    t = str(j, "token_endpoint");
    if (!t || strncmp(t, "https://", 8) != 0 || strlen(t) >= size) {
        cJSON_Delete(j);
        return bad(TM_ARM_DISCOVERY, err, errsize, "no https token_endpoint");
    }
    copy(buf, size, t);
    cJSON_Delete(j);
    return 0;
}

int tm_arm_parse_skus(const char *body, size_t len, const char *location,
                      struct tm_arm_sku **ret, size_t *ret_n, char **ret_next_link, char *err,
                      size_t errsize)
{
    cJSON *j = parse(TM_ARM_LIST_SKUS, body, len, err, errsize);
    const cJSON *value, *e, *next;
    struct tm_arm_sku *out;
    size_t n = 0;

    *ret = NULL;
    *ret_n = 0;
    *ret_next_link = NULL;
    if (!j)
        return TM_EBADREPLY;
    value = cJSON_GetObjectItemCaseSensitive(j, "value");
    next = cJSON_GetObjectItemCaseSensitive(j, "nextLink");
    if (!cJSON_IsArray(value)) {
        cJSON_Delete(j);
        return bad(TM_ARM_LIST_SKUS, err, errsize, "no value array");
    }
    out = calloc((size_t)cJSON_GetArraySize(value) + 1, sizeof(*out));
    if (!out) {
        cJSON_Delete(j);
        return TM_ENOMEM;
    }
    cJSON_ArrayForEach(e, value) {
        const char *rt = str(e, "resourceType"), *name = str(e, "name");
        const cJSON *li = cJSON_GetObjectItemCaseSensitive(e, "locationInfo"), *l;
        const cJSON *rs = cJSON_GetObjectItemCaseSensitive(e, "restrictions");
        struct tm_arm_sku *k = &out[n];

        if (!rt || strcmp(rt, "virtualMachines") != 0 || !name || strlen(name) >= TM_ID_MAX)
            continue;
        copy(k->name, sizeof(k->name), name);
        k->restricted = cJSON_IsArray(rs) && cJSON_GetArraySize(rs) > 0;
        cJSON_ArrayForEach(l, li) {
            const char *loc = str(l, "location");
            const cJSON *zs = cJSON_GetObjectItemCaseSensitive(l, "zones"), *z;

            if (!loc || (location && strcasecmp(loc, location) != 0))
                continue;
            cJSON_ArrayForEach(z, zs) {
                size_t at = strlen(k->zones);

                if (cJSON_IsString(z) && at + strlen(z->valuestring) + 2 < sizeof(k->zones))
                    snprintf(k->zones + at, sizeof(k->zones) - at, "%s%s", at ? "," : "",
                             z->valuestring);
            }
        }
        n++;
    }
    if (cJSON_IsString(next) && *next->valuestring) {
        *ret_next_link = strdup(next->valuestring);
        if (!*ret_next_link) {
            free(out);
            cJSON_Delete(j);
            return TM_ENOMEM;
        }
    }
    cJSON_Delete(j);
    *ret = out;
    *ret_n = n;
    return 0;
}

/* ---- error map ---------------------------------------------------------- */

int tm_arm_error_map(const char *code, long http_status)
{
    static const char *const quota[] = {
        "SkuNotAvailable", "AllocationFailed", "ZonalAllocationFailed",
        "OverconstrainedAllocationRequest", "OverconstrainedZonalAllocationRequest",
        "OperationNotAllowed", "QuotaExceeded", "SpotMaxPriceTooLow",
        "AllocationFailedSpotCapacity", NULL,
    };
    static const char *const auth[] = {
        "AuthenticationFailed", "AuthorizationFailed", "InvalidAuthenticationToken",
        "InvalidAuthenticationTokenTenant", "ExpiredAuthenticationToken", "invalid_client",
        "unauthorized_client", "LinkedAuthorizationFailed", NULL,
    };

    if (code && *code) {
        for (int i = 0; quota[i]; i++)
            if (strcmp(code, quota[i]) == 0)
                return TM_EQUOTA;
        for (int i = 0; auth[i]; i++)
            if (strcmp(code, auth[i]) == 0)
                return TM_EAUTH;
        if (strcmp(code, "TooManyRequests") == 0)
            return TM_ETHROTTLED;
        if (strcmp(code, "ResourceNotFound") == 0 || strcmp(code, "NotFound") == 0)
            return TM_ENOTFOUND;
    }
    if (http_status == 401 || http_status == 403)
        return TM_EAUTH;
    if (http_status == 429)
        return TM_ETHROTTLED;
    if (http_status >= 500)
        return TM_EUNAVAIL;
    if (http_status == 404)
        return TM_ENOTFOUND;
    if (http_status == 409)
        return TM_ECONFLICT;
    return TM_EINVAL;
}
