/*
 * tests/unit/providers/gcp/test_gce_bulk.c: the requests a gang's
 * instances.bulkInsert takes (providers/gcp/gce_build.c): the
 * BulkInsertInstanceResource body, the setLabels / setMetadata bodies, the
 * requestIds, the URLs, and the instances.get answer that gives the
 * fingerprints.  Pure: no network.
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
#include "providers/gcp/gce.h"

static const struct tm_gce_kv labels[] = {{"tarmac-cluster", "e2e", 0},
                                          {"tarmac-launch-set", "set-1", 0}};
static const char *const names[] = {"tm-7-0123456789", "tm-8-abcdefabcd"};

static struct tm_gce_bulk_params params(void)
{
    static const struct tm_gce_kv meta[] = {{"tarmac-launch-token", "set-1", 0}};
    struct tm_gce_bulk_params p = {
        .props = {.zone = "us-central1-a", .machine_type = "a2-highgpu-8g",
                  .source_image = "projects/debian-cloud/global/images/family/debian-12",
                  .spot = true, .labels = labels, .nlabels = 2, .metadata = meta,
                  .nmetadata = 1},
        .names = names, .nnames = 2, .resource_policy = "tarmac-compact",
    };

    return p;
}

/* o's member at a dotted path ("a.b.c"). */
static const cJSON *at(const cJSON *o, const char *path)
{
    char key[128];

    while (o && *path) {
        const char *dot = strchr(path, '.');
        size_t n = dot ? (size_t)(dot - path) : strlen(path);

        assert_true(n < sizeof(key));
        memcpy(key, path, n);
        key[n] = '\0';
        o = cJSON_GetObjectItemCaseSensitive(o, key);
        path += n + (dot ? 1 : 0);
    }
    return o;
}

static void test_bulk_body(void **state)
{
    struct tm_gce_bulk_params p = params();
    char *body = NULL;
    cJSON *root;
    const cJSON *per, *props, *rp;

    (void)state;
    assert_int_equal(tm_gce_build_bulk_insert(&p, &body), 0);
    root = cJSON_Parse(body);
    assert_non_null(root);
    /* all or nothing: minCount = count, int64 as strings */
    assert_string_equal(at(root, "count")->valuestring, "2");
    assert_string_equal(at(root, "minCount")->valuestring, "2");
    assert_null(at(root, "namePattern"));
    per = at(root, "perInstanceProperties");
    assert_int_equal(cJSON_GetArraySize(per), 2);
    assert_string_equal(at(per, "tm-7-0123456789.name")->valuestring, "tm-7-0123456789");
    assert_string_equal(at(per, "tm-8-abcdefabcd.name")->valuestring, "tm-8-abcdefabcd");
    props = at(root, "instanceProperties");
    /* InstanceProperties take names, not zone paths */
    assert_string_equal(at(props, "machineType")->valuestring, "a2-highgpu-8g");
    assert_null(at(props, "name"));
    assert_string_equal(at(props, "labels.tarmac-launch-set")->valuestring, "set-1");
    assert_string_equal(at(props, "scheduling.provisioningModel")->valuestring, "SPOT");
    assert_string_equal(at(props, "scheduling.instanceTerminationAction")->valuestring, "DELETE");
    assert_string_equal(at(props, "scheduling.onHostMaintenance")->valuestring, "TERMINATE");
    assert_true(cJSON_IsFalse(at(props, "scheduling.automaticRestart")));
    assert_int_equal(cJSON_GetArraySize(at(props, "disks")), 1);
    assert_int_equal(cJSON_GetArraySize(at(props, "networkInterfaces")), 1);
    assert_int_equal(cJSON_GetArraySize(at(props, "metadata.items")), 1);
    assert_null(at(props, "guestAccelerators")); /* a2 comes with its GPUs */
    rp = at(props, "resourcePolicies");
    assert_int_equal(cJSON_GetArraySize(rp), 1);
    assert_string_equal(cJSON_GetArrayItem(rp, 0)->valuestring, "tarmac-compact");
    cJSON_Delete(root);
    free(body);

    /* On-demand n1 with T4s attached by name, no placement. */
    p.props.spot = false;
    p.props.machine_type = "n1-standard-8";
    p.props.accelerator_type = "nvidia-tesla-t4";
    p.props.accelerator_count = 4;
    p.resource_policy = NULL;
    assert_int_equal(tm_gce_build_bulk_insert(&p, &body), 0);
    assert_non_null(strstr(body, "\"guestAccelerators\":[{\"acceleratorType\":\"nvidia-tesla-t4\","
                                 "\"acceleratorCount\":4}]"));
    assert_non_null(strstr(body, "\"provisioningModel\":\"STANDARD\",\"automaticRestart\":true"));
    assert_null(strstr(body, "resourcePolicies"));
    assert_null(strstr(body, "instanceTerminationAction"));
    free(body);
    p.resource_policy = "";
    assert_int_equal(tm_gce_build_bulk_insert(&p, &body), 0);
    assert_null(strstr(body, "resourcePolicies"));
    free(body);
}

static void test_bulk_body_refused(void **state)
{
    static const char *const twice[] = {"tm-7-0123456789", "tm-7-0123456789"};
    static const char *const empty[] = {"tm-7-0123456789", ""};
    struct tm_gce_bulk_params p = params();
    char *body = NULL;

    (void)state;
    p.nnames = 0;
    assert_int_equal(tm_gce_build_bulk_insert(&p, &body), TM_EINVAL);
    p = params();
    p.names = twice;
    assert_int_equal(tm_gce_build_bulk_insert(&p, &body), TM_EINVAL);
    p.names = empty;
    assert_int_equal(tm_gce_build_bulk_insert(&p, &body), TM_EINVAL);
    p = params();
    p.props.zone = NULL;
    assert_int_equal(tm_gce_build_bulk_insert(&p, &body), TM_EINVAL);
    p = params();
    p.props.source_image = "";
    assert_int_equal(tm_gce_build_bulk_insert(&p, &body), TM_EINVAL);
    assert_null(body);
}

static void test_update_bodies(void **state)
{
    const struct tm_gce_kv items[] = {{"tarmac-launch-token", "set-1g000", 0},
                                      {"tarmac-bootstrap", "#!/bin/sh\nSECRETxx", 16}};
    char *body = NULL;

    (void)state;
    assert_int_equal(tm_gce_build_set_labels(labels, 2, "abc=", &body), 0);
    assert_string_equal(body, "{\"labels\":{\"tarmac-cluster\":\"e2e\",\"tarmac-launch-set\":"
                              "\"set-1\"},\"labelFingerprint\":\"abc=\"}");
    free(body);
    assert_int_equal(tm_gce_build_set_metadata(items, 2, "fp==", &body), 0);
    /* value_len bounds the value (the bootstrap is not NUL-terminated) */
    assert_string_equal(body, "{\"items\":[{\"key\":\"tarmac-launch-token\",\"value\":\"set-1g000\"},"
                              "{\"key\":\"tarmac-bootstrap\",\"value\":\"#!/bin/sh\\nSECRET\"}],"
                              "\"fingerprint\":\"fp==\"}");
    free(body);
    /* GCE refuses a change without the fingerprint it handed out */
    assert_int_equal(tm_gce_build_set_labels(labels, 2, NULL, &body), TM_EINVAL);
    assert_int_equal(tm_gce_build_set_metadata(items, 2, "", &body), TM_EINVAL);
}

static void test_request_ids(void **state)
{
    char a[37], b[37], c[37], d[37];

    (void)state;
    tm_gce_bulk_request_id("set-1", "us-central1-a", "a2-highgpu-8g", true, a);
    tm_gce_bulk_request_id("set-1", "us-central1-a", "a2-highgpu-8g", true, b);
    assert_string_equal(a, b);                       /* a repeat is the same request */
    assert_int_equal(strlen(a), 36);
    assert_int_equal(a[14], '5');                    /* version 5 layout */
    tm_gce_bulk_request_id("set-1", "us-central1-b", "a2-highgpu-8g", true, c);
    assert_string_not_equal(a, c);                   /* another zone, another request */
    tm_gce_request_id("set-1", "us-central1-a", "a2-highgpu-8g", true, d);
    assert_string_not_equal(a, d);                   /* never a single insert's */
    tm_gce_update_request_id("setLabels", "set-1g000", "fp1", a);
    tm_gce_update_request_id("setLabels", "set-1g000", "fp1", b);
    tm_gce_update_request_id("setLabels", "set-1g000", "fp2", c);
    tm_gce_update_request_id("setMetadata", "set-1g000", "fp1", d);
    assert_string_equal(a, b);
    assert_string_not_equal(a, c);
    assert_string_not_equal(a, d);
}

static void test_urls(void **state)
{
    const char *ep = "https://compute.googleapis.com/compute/v1";
    char *u;

    (void)state;
    u = tm_gce_url_bulk_insert(ep, "p", "us-central1-a", "0e3a0c9a-0000-5000-8000-000000000001");
    assert_string_equal(u, "https://compute.googleapis.com/compute/v1/projects/p/zones/us-central1-a"
                           "/instances/bulkInsert?requestId=0e3a0c9a-0000-5000-8000-000000000001");
    free(u);
    u = tm_gce_url_instance(ep, "p", "us-central1-a", "tm-7-0123456789", NULL, NULL);
    assert_string_equal(u, "https://compute.googleapis.com/compute/v1/projects/p/zones/us-central1-a"
                           "/instances/tm-7-0123456789");
    free(u);
    u = tm_gce_url_instance(ep, "p", "us-central1-a", "tm-7-0123456789", "setLabels", "x-1");
    assert_string_equal(u, "https://compute.googleapis.com/compute/v1/projects/p/zones/us-central1-a"
                           "/instances/tm-7-0123456789/setLabels?requestId=x-1");
    free(u);
    assert_null(tm_gce_url_instance(ep, "p", "us-central1-a", "a/b", NULL, NULL));
    assert_null(tm_gce_url_bulk_insert(ep, "p", "", NULL));
}

static void test_parse_get(void **state)
{
    static const char doc[] =
        "{\"kind\":\"compute#instance\",\"name\":\"tm-7-0123456789\",\"status\":\"RUNNING\","
        "\"zone\":\"https://www.googleapis.com/compute/v1/projects/p/zones/us-central1-a\","
        "\"machineType\":\"zones/us-central1-a/machineTypes/a2-highgpu-8g\","
        "\"labels\":{\"tarmac-cluster\":\"e2e\",\"tarmac-launch-set\":\"set-1\","
        "\"tarmac-launch-token\":\"set-1\"},\"labelFingerprint\":\"42WmSpB8rSM=\","
        "\"metadata\":{\"fingerprint\":\"Hsq0pU6oF0Q=\",\"items\":["
        "{\"key\":\"tarmac-launch-token\",\"value\":\"set-1g000\"}]}}";
    static const char op_doc[] = "{\"name\":\"op-1\",\"status\":\"DONE\"}";
    static const char bad_doc[] = "{\"name\":\"x\",\"labelFingerprint\":7}";
    struct tm_gce_reply r;
    char err[256];

    (void)state;
    assert_int_equal(tm_gce_parse_reply(TM_GCE_GET, doc, strlen(doc), &r, err, sizeof(err)), 0);
    assert_int_equal(r.ninstances, 1);
    assert_string_equal(r.instances[0].inst.id, "us-central1-a/tm-7-0123456789");
    assert_string_equal(r.instances[0].set_key, "set-1");
    assert_string_equal(r.instances[0].label_token, "set-1");     /* not yet labelled */
    assert_string_equal(r.instances[0].inst.token, "set-1g000");  /* metadata set first */
    assert_string_equal(r.instances[0].label_fingerprint, "42WmSpB8rSM=");
    assert_string_equal(r.instances[0].metadata_fingerprint, "Hsq0pU6oF0Q=");
    tm_gce_reply_release(&r);
    /* an update's answer is an Operation */
    assert_int_equal(tm_gce_parse_reply(TM_GCE_SET_LABELS, op_doc, strlen(op_doc), &r, err,
                                        sizeof(err)), 0);
    assert_true(r.op.done);
    tm_gce_reply_release(&r);
    assert_int_equal(tm_gce_parse_reply(TM_GCE_GET, bad_doc, strlen(bad_doc), &r, err,
                                        sizeof(err)), TM_EBADREPLY);
    assert_non_null(strstr(err, "instances.get"));
}

static void test_startup_script(void **state)
{
    const char *s = tm_gce_bulk_startup_script();

    (void)state;
    assert_int_equal(strncmp(s, "#!/bin/sh\n", 10), 0);
    assert_non_null(strstr(s, "instance/attributes/" TM_GCE_META_BOOTSTRAP));
    assert_non_null(strstr(s, "Metadata-Flavor: Google"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bulk_body),
        cmocka_unit_test(test_bulk_body_refused),
        cmocka_unit_test(test_update_bodies),
        cmocka_unit_test(test_request_ids),
        cmocka_unit_test(test_urls),
        cmocka_unit_test(test_parse_get),
        cmocka_unit_test(test_startup_script),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
