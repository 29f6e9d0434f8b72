/*
 * tests/unit/providers/azure/test_arm_json.c: ARM request bodies, answers,
 * error mapping, backoff and Retry-After; no network.
 *
 * Answers are in the shapes of the swagger extract
 * (../shared/specs/azure-compute/) and ARM's documented CloudError, async
 * operation and list (value + nextLink) envelopes; the corpus files of
 * tests/fuzz/corpus/azure_json/ are the same samples.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <cmocka.h>

#include "core/err.h"
#include "providers/azure/arm.h"

static const char *SUBNET =
    "/subscriptions/s/resourceGroups/g/providers/Microsoft.Network/virtualNetworks/v/subnets/d";

static struct tm_arm_vm_params params(bool spot)
{
    struct tm_arm_vm_params p = {
        .name = "tm-c1-7", .location = "eastus", .zone = "2",
        .vm_size = "Standard_NC24ads_A100_v4", .spot = spot, .subnet_id = SUBNET,
        .image = "Canonical:ubuntu:22_04-lts:latest", .admin_username = "tarmac",
        .ssh_public_key = "ssh-ed25519 AAAA k", .custom_data = "#!/bin/sh\necho hi\n",
        .custom_data_len = 18, .cluster = "c1", .pool = "gpu", .node = "7", .token = "tok-7",
    };
    return p;
}

static const cJSON *at(const cJSON *o, const char *path)
{
    char buf[256], *save = NULL;

    snprintf(buf, sizeof(buf), "%s", path);
    for (char *k = strtok_r(buf, ".", &save); k && o; k = strtok_r(NULL, ".", &save)) {
        if (k[0] >= '0' && k[0] <= '9')
            o = cJSON_GetArrayItem(o, atoi(k));
        else
            o = cJSON_GetObjectItemCaseSensitive(o, k);
    }
    return o;
}

static const char *sat(const cJSON *o, const char *path)
{
    const cJSON *v = at(o, path);

    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static void test_vm_name(void **state)
{
    char a[TM_ID_MAX], b[TM_ID_MAX];

    (void)state;
    assert_int_equal(tm_arm_vm_name("prod.eu_1", 42, a, sizeof(a)), 0);
    assert_string_equal(a, "tm-prod-eu-1-42");
    assert_int_equal(tm_arm_vm_name("prod.eu_1", 42, b, sizeof(b)), 0);
    assert_string_equal(a, b); /* same node, same name: a repeated PUT updates */
    assert_int_equal(tm_arm_vm_name("c", 0, a, sizeof(a)), TM_EINVAL);
    assert_int_equal(tm_arm_vm_name("", 1, a, sizeof(a)), TM_EINVAL);
    assert_int_equal(tm_arm_vm_name("a-very-long-cluster-name-that-goes-on-and-on-and-on-x", 1234567,
                                    a, sizeof(a)), TM_EINVAL); /* > 64 characters */
}

static void test_build_spot(void **state)
{
    struct tm_arm_vm_params p = params(true);
    char *body = NULL;
    cJSON *j;

    (void)state;
    assert_int_equal(tm_arm_build_vm(&p, &body), 0);
    j = cJSON_Parse(body);
    assert_non_null(j);
    assert_string_equal(sat(j, "location"), "eastus");
    assert_string_equal(sat(j, "zones.0"), "2");
    assert_string_equal(sat(j, "tags.tarmac-cluster"), "c1");
    assert_string_equal(sat(j, "tags.tarmac-pool"), "gpu");
    assert_string_equal(sat(j, "tags.tarmac-node-id"), "7");
    assert_string_equal(sat(j, "tags.tarmac-launch-token"), "tok-7");
    assert_string_equal(sat(j, "properties.priority"), "Spot");
    assert_string_equal(sat(j, "properties.evictionPolicy"), "Delete");
    assert_true(at(j, "properties.billingProfile.maxPrice")->valuedouble == -1);
    assert_string_equal(sat(j, "properties.hardwareProfile.vmSize"), "Standard_NC24ads_A100_v4");
    /* base64 of "#!/bin/sh\necho hi\n" */
    assert_string_equal(sat(j, "properties.osProfile.customData"), "IyEvYmluL3NoCmVjaG8gaGkK");
    assert_string_equal(sat(j, "properties.osProfile.computerName"), "tm-c1-7");
    assert_string_equal(sat(j, "properties.storageProfile.osDisk.deleteOption"), "Delete");
    assert_string_equal(sat(j, "properties.storageProfile.imageReference.publisher"), "Canonical");
    assert_string_equal(sat(j, "properties.storageProfile.imageReference.version"), "latest");
    assert_string_equal(sat(j, "properties.networkProfile.networkApiVersion"), "2020-11-01");
    assert_string_equal(
        sat(j, "properties.networkProfile.networkInterfaceConfigurations.0.properties.deleteOption"),
        "Delete");
    assert_string_equal(sat(j, "properties.networkProfile.networkInterfaceConfigurations.0."
                               "properties.ipConfigurations.0.properties.subnet.id"), SUBNET);
    assert_string_equal(sat(j, "properties.osProfile.linuxConfiguration.ssh.publicKeys.0.path"),
                        "/home/tarmac/.ssh/authorized_keys");
    cJSON_Delete(j);
    free(body);
}

static void test_build_regular(void **state)
{
    struct tm_arm_vm_params p = params(false);
    char *body = NULL;
    cJSON *j;

    (void)state;
    p.zone = NULL;
    p.custom_data = NULL;
    p.image = "/subscriptions/s/resourceGroups/g/providers/Microsoft.Compute/images/gpu";
    assert_int_equal(tm_arm_build_vm(&p, &body), 0);
    j = cJSON_Parse(body);
    assert_string_equal(sat(j, "properties.priority"), "Regular");
    /* ARM refuses evictionPolicy and billingProfile on a Regular VM. */
    assert_null(at(j, "properties.evictionPolicy"));
    assert_null(at(j, "properties.billingProfile"));
    assert_null(at(j, "zones"));
    assert_null(at(j, "properties.osProfile.customData"));
    assert_string_equal(sat(j, "properties.storageProfile.imageReference.id"), p.image);
    cJSON_Delete(j);
    free(body);
    p.image = "not-an-image";
    assert_int_equal(tm_arm_build_vm(&p, &body), TM_EINVAL);
    p = params(true);
    p.subnet_id = NULL;
    assert_int_equal(tm_arm_build_vm(&p, &body), TM_EINVAL);
}

static void test_token_form(void **state)
{
    char *body = NULL;

    (void)state;
    assert_int_equal(tm_arm_build_token_form("cid", "a+b/c=&d", TM_ARM_SCOPE, &body), 0);
    assert_string_equal(body, "client_id=cid&scope=https%3A%2F%2Fmanagement.azure.com%2F.default"
                              "&grant_type=client_credentials&client_secret=a%2Bb%2Fc%3D%26d");
    free(body);
    assert_int_equal(tm_arm_build_token_form("cid", "", TM_ARM_SCOPE, &body), TM_EINVAL);
}

static void test_error_map(void **state)
{
    (void)state;
    assert_int_equal(tm_arm_error_map("SkuNotAvailable", 409), TM_EQUOTA);
    assert_int_equal(tm_arm_error_map("AllocationFailed", 200), TM_EQUOTA);
    assert_int_equal(tm_arm_error_map("ZonalAllocationFailed", 0), TM_EQUOTA);
    assert_int_equal(tm_arm_error_map("OverconstrainedAllocationRequest", 409), TM_EQUOTA);
    assert_int_equal(tm_arm_error_map("OverconstrainedZonalAllocationRequest", 409), TM_EQUOTA);
    assert_int_equal(tm_arm_error_map("OperationNotAllowed", 409), TM_EQUOTA);
    assert_int_equal(tm_arm_error_map("", 429), TM_ETHROTTLED);
    assert_int_equal(tm_arm_error_map("InternalServerError", 500), TM_EUNAVAIL);
    assert_int_equal(tm_arm_error_map("", 503), TM_EUNAVAIL);
    assert_int_equal(tm_arm_error_map("InvalidAuthenticationToken", 401), TM_EAUTH);
    assert_int_equal(tm_arm_error_map("AuthorizationFailed", 403), TM_EAUTH);
    assert_int_equal(tm_arm_error_map("", 403), TM_EAUTH);
    assert_int_equal(tm_arm_error_map("ResourceNotFound", 404), TM_ENOTFOUND);
    assert_int_equal(tm_arm_error_map("PropertyChangeNotAllowed", 409), TM_ECONFLICT);
    assert_int_equal(tm_arm_error_map("InvalidParameter", 400), TM_EINVAL);
}

static void test_parse_error(void **state)
{
    char code[64], msg[256];
    const char *wrapped = "{\"error\":{\"code\":\"Conflict\",\"message\":\"outer\",\"details\":"
                          "[{\"code\":\"SkuNotAvailable\",\"message\":\"inner\"}]}}";
    const char *flat = "{\"error\":\"invalid_client\",\"error_description\":\"AADSTS7000215\"}";

    (void)state;
    assert_int_equal(tm_arm_parse_error(wrapped, strlen(wrapped), code, sizeof(code), msg,
                                        sizeof(msg)), 0);
    assert_string_equal(code, "SkuNotAvailable");
    assert_string_equal(msg, "inner");
    assert_int_equal(tm_arm_parse_error(flat, strlen(flat), code, sizeof(code), msg, sizeof(msg)),
                     0);
    assert_string_equal(code, "invalid_client");
    assert_int_equal(tm_arm_parse_error("{\"error\":{\"co", 13, code, sizeof(code), msg,
                                        sizeof(msg)), TM_EBADREPLY);
    assert_int_equal(tm_arm_parse_error("<html>", 6, code, sizeof(code), msg, sizeof(msg)),
                     TM_EBADREPLY);
}

static const char *PAGE1 =
    "{\"value\":[{\"name\":\"tm-c1-1\",\"zones\":[\"1\"],\"tags\":{\"tarmac-cluster\":\"c1\","
    "\"tarmac-pool\":\"gpu\",\"tarmac-node-id\":\"1\",\"tarmac-launch-token\":\"t1\"},"
    "\"properties\":{\"hardwareProfile\":{\"vmSize\":\"Standard_NC24ads_A100_v4\"},"
    "\"priority\":\"Spot\",\"provisioningState\":\"Succeeded\"}},"
    "{\"name\":\"tm-c1-2\",\"tags\":{\"tarmac-cluster\":\"c1\",\"tarmac-node-id\":\"x\"},"
    "\"properties\":{\"provisioningState\":\"Deleting\",\"priority\":\"Spot\"}},"
    "{\"name\":\"other\",\"properties\":{\"provisioningState\":\"Creating\"}}],"
    "\"nextLink\":\"https://management.azure.com/subscriptions/s/resourceGroups/g/providers/"
    "Microsoft.Compute/virtualMachines?api-version=2024-07-01&$skiptoken=3\"}";

static void test_parse_list(void **state)
{
    struct tm_arm_vm *vms = NULL;
    size_t n = 0;
    char *next = NULL, err[256];

    (void)state;
    assert_int_equal(tm_arm_parse_vm_list(PAGE1, strlen(PAGE1), &vms, &n, &next, err,
                                          sizeof(err)), 0);
    assert_int_equal(n, 3);
    assert_non_null(next);
    assert_non_null(strstr(next, "$skiptoken=3"));
    assert_string_equal(vms[0].inst.id, "tm-c1-1");
    assert_string_equal(vms[0].cluster, "c1");
    assert_string_equal(vms[0].inst.token, "t1");
    assert_string_equal(vms[0].inst.pool, "gpu");
    assert_int_equal(vms[0].inst.node_id, 1);
    assert_string_equal(vms[0].inst.zone, "1");
    assert_int_equal(vms[0].inst.state, TM_INSTANCE_RUNNING);
    assert_int_equal(vms[0].inst.capacity, TM_CAPACITY_SPOT);
    assert_int_equal(vms[1].inst.state, TM_INSTANCE_STOPPING);
    assert_int_equal(vms[1].inst.node_id, 0); /* a malformed node tag reads as none */
    assert_int_equal(vms[2].inst.state, TM_INSTANCE_PENDING);
    assert_int_equal(vms[2].inst.capacity, TM_CAPACITY_ON_DEMAND);
    free(vms);
    free(next);
    /* The last page: no nextLink. */
    assert_int_equal(tm_arm_parse_vm_list("{\"value\":[]}", 12, &vms, &n, &next, err,
                                          sizeof(err)), 0);
    assert_int_equal(n, 0);
    assert_null(next);
    free(vms);
    /* Truncated: an error naming the call, nothing handed back. */
    assert_int_equal(tm_arm_parse_vm_list(PAGE1, 100, &vms, &n, &next, err, sizeof(err)),
                     TM_EBADREPLY);
    assert_non_null(strstr(err, "VirtualMachines_List"));
    assert_null(vms);
    assert_int_equal(tm_arm_parse_vm_list("{\"value\":{}}", 12, &vms, &n, &next, err,
                                          sizeof(err)), TM_EBADREPLY);
    assert_int_equal(tm_arm_parse_vm_list("{\"value\":[{\"properties\":{}}]}", 29, &vms, &n,
                                          &next, err, sizeof(err)), TM_EBADREPLY);
}

static void test_parse_vm_power(void **state)
{
    const char *b = "{\"name\":\"v\",\"properties\":{\"provisioningState\":\"Succeeded\","
                    "\"instanceView\":{\"statuses\":[{\"code\":\"ProvisioningState/succeeded\"},"
                    "{\"code\":\"PowerState/deallocated\"}]}}}";
    struct tm_arm_vm vm;
    char err[256];

    (void)state;
    assert_int_equal(tm_arm_parse_vm(b, strlen(b), &vm, err, sizeof(err)), 0);
    assert_string_equal(vm.power_state, "deallocated");
    assert_int_equal(vm.inst.state, TM_INSTANCE_STOPPED);
    assert_int_equal(tm_arm_parse_vm("[]", 2, &vm, err, sizeof(err)), TM_EBADREPLY);
    assert_non_null(strstr(err, "VirtualMachines_Get"));
}

static void test_parse_operation(void **state)
{
    enum tm_arm_op_status st;
    char code[64], msg[256], err[256];
    const char *f = "{\"status\":\"Failed\",\"error\":{\"code\":\"ZonalAllocationFailed\","
                    "\"message\":\"no capacity\"}}";

    (void)state;
    assert_int_equal(tm_arm_parse_operation("{\"status\":\"InProgress\"}", 23, &st, code,
                                            sizeof(code), msg, sizeof(msg), err, sizeof(err)), 0);
    assert_int_equal(st, TM_ARM_OP_IN_PROGRESS);
    assert_int_equal(tm_arm_parse_operation(f, strlen(f), &st, code, sizeof(code), msg,
                                            sizeof(msg), err, sizeof(err)), 0);
    assert_int_equal(st, TM_ARM_OP_FAILED);
    assert_string_equal(code, "ZonalAllocationFailed");
    assert_int_equal(tm_arm_error_map(code, 0), TM_EQUOTA);
    assert_int_equal(tm_arm_parse_operation("{\"status\":\"Succeeded\"}", 22, &st, code,
                                            sizeof(code), msg, sizeof(msg), err, sizeof(err)), 0);
    assert_int_equal(st, TM_ARM_OP_SUCCEEDED);
    assert_int_equal(tm_arm_parse_operation("{}", 2, &st, code, sizeof(code), msg, sizeof(msg),
                                            err, sizeof(err)), TM_EBADREPLY);
    assert_non_null(strstr(err, "async operation"));
}

static void test_parse_token(void **state)
{
    char *tok = NULL, err[256];
    int64_t exp = 0;
    const char *aad = "{\"token_type\":\"Bearer\",\"expires_in\":3599,\"access_token\":\"eyJ0\"}";
    const char *imds = "{\"access_token\":\"abc\",\"expires_in\":\"86399\",\"resource\":\"x\"}";

    (void)state;
    assert_int_equal(tm_arm_parse_token(aad, strlen(aad), &tok, &exp, err, sizeof(err)), 0);
    assert_string_equal(tok, "eyJ0");
    assert_int_equal(exp, 3599);
    free(tok);
    assert_int_equal(tm_arm_parse_token(imds, strlen(imds), &tok, &exp, err, sizeof(err)), 0);
    assert_int_equal(exp, 86399);
    free(tok);
    assert_int_equal(tm_arm_parse_token("{\"access_token\":\"x\"}", 20, &tok, &exp, err,
                                        sizeof(err)), TM_EBADREPLY);
    assert_null(tok);
    assert_int_equal(tm_arm_parse_token("{\"expires_in\":1}", 16, &tok, &exp, err, sizeof(err)),
                     TM_EBADREPLY);
    assert_non_null(strstr(err, "token"));
}

static void test_parse_openid(void **state)
{
    char buf[256], err[256];
    const char *ok = "{\"token_endpoint\":\"https://login.example/t/oauth2/v2.0/token\","
                     "\"issuer\":\"x\"}";

    (void)state;
    assert_int_equal(tm_arm_parse_openid(ok, strlen(ok), buf, sizeof(buf), err, sizeof(err)), 0);
    assert_string_equal(buf, "https://login.example/t/oauth2/v2.0/token");
    /* Never send the secret over plain http. */
    assert_int_equal(tm_arm_parse_openid("{\"token_endpoint\":\"http://x/token\"}", 35, buf,
                                         sizeof(buf), err, sizeof(err)), TM_EBADREPLY);
}

static void test_parse_skus(void **state)
{
    const char *b = "{\"value\":[{\"resourceType\":\"disks\",\"name\":\"Premium_LRS\"},"
                    "{\"resourceType\":\"virtualMachines\",\"name\":\"Standard_ND96asr_v4\","
                    "\"locationInfo\":[{\"location\":\"westus\",\"zones\":[\"3\"]},"
                    "{\"location\":\"eastus\",\"zones\":[\"2\",\"1\"]}],\"restrictions\":[]}]}";
    struct tm_arm_sku *k = NULL;
    size_t n = 0;
    char *next = NULL, err[256];

    (void)state;
    assert_int_equal(tm_arm_parse_skus(b, strlen(b), "eastus", &k, &n, &next, err, sizeof(err)),
                     0);
    assert_int_equal(n, 1);
    assert_string_equal(k[0].name, "Standard_ND96asr_v4");
    assert_string_equal(k[0].zones, "2,1");
    assert_false(k[0].restricted);
    free(k);
}

static void test_backoff_and_retry_after(void **state)
{
    struct tm_arm_retry r = {.base_delay_ms = 100, .max_delay_ms = 1000};
    uint64_t rng = 7, max_seen = 0;

    (void)state;
    for (int i = 0; i < 2000; i++) {
        uint64_t d1 = tm_arm_backoff_ms(&r, 1, &rng), d5 = tm_arm_backoff_ms(&r, 5, &rng);

        assert_true(d1 <= 100);
        assert_true(d5 <= 1000);
        if (d5 > max_seen)
            max_seen = d5;
    }
    assert_true(max_seen > 500); /* jitter spreads over the range */
    assert_int_equal(tm_arm_retry_after_ms("2", 0), 2000);
    assert_int_equal(tm_arm_retry_after_ms("", 0), 0);
    assert_int_equal(tm_arm_retry_after_ms("soon", 0), 0);
    /* An HTTP date 30 s after now. */
    assert_int_equal(tm_arm_retry_after_ms("Thu, 01 Jan 1970 00:00:40 GMT", 10), 30000);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vm_name),
        cmocka_unit_test(test_build_spot),
        cmocka_unit_test(test_build_regular),
        cmocka_unit_test(test_token_form),
        cmocka_unit_test(test_error_map),
        cmocka_unit_test(test_parse_error),
        cmocka_unit_test(test_parse_list),
        cmocka_unit_test(test_parse_vm_power),
        cmocka_unit_test(test_parse_operation),
        cmocka_unit_test(test_parse_token),
        cmocka_unit_test(test_parse_openid),
        cmocka_unit_test(test_parse_skus),
        cmocka_unit_test(test_backoff_and_retry_after),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
