/*
 * tests/unit/providers/gcp/test_gcp.c: the GCP provider's pure layers, no
 * network: key files, the RS256 JWT (known answer), request building,
 * error mapping, answer parsing and paging tokens.
 *
 * The JWT known answer was produced by google-auth-library 10.9.1
 * (build/src/gtoken/jwsSign.js getJwsSign, with Date fixed at iat) for
 * testdata/sa-key.json, a throwaway key made for this test; RS256 is
 * deterministic, so equal claims give an equal token byte for byte.
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

#include "controller/fleet/prices.h"
#include "core/config.h"
#include "core/err.h"
#include "core/file.h"
#include "providers/gcp/gce.h"
#include "providers/gcp/gcp_auth.h"
#include "providers/gcp/gcp_config.h"
#include "providers/gcp/gcp_provider.h"

#define KEY_PATH TM_SOURCE_DIR "/tests/unit/providers/gcp/testdata/sa-key.json"
#define CORPUS TM_SOURCE_DIR "/tests/fuzz/corpus/gcp_json/"

static const char google_jwt[] = "eyJhbGciOiJSUzI1NiJ9.eyJpc3MiOiJ0YXJtYWMtdW5pdEB0YXJtYWMtdGVzdC5pYW0uZ3NlcnZpY2VhY2NvdW50LmNvbSIsInNjb3BlIjoiaHR0cHM6Ly93d3cuZ29vZ2xlYXBpcy5jb20vYXV0aC9jb21wdXRlIiwiYXVkIjoiaHR0cHM6Ly9vYXV0aDIuZ29vZ2xlYXBpcy5jb20vdG9rZW4iLCJleHAiOjE3NjQ2MzcyMDAsImlhdCI6MTc2NDYzMzYwMH0.aAdZ4O5H5TkU8hhD1u6-Ce4DBBmIPKljOhCeR3S7UJnwkTW30990J1jjKpkqmSmyqYWeXjzya1RG3k_FtpbQCTD5-JO7uvwuoM3YvxLCUul_A-zZh7nXfonht_ZMoCMt9X1t3PWnCchHkZciMZoBCdrZPj0Zk5krorwDlJsT3S63cqqu2A3iYnBcTaNnSgNIOKjNFGLYy2n5EyBh9qXqqPSnJxFn9lFk4wJ6PX9UF6VlL9MdP9iOEas3WyEsSNFcKFIS_3FMFZRgHKXzZ4ViOJkiDGyvRjrLq7LmMmKSIplNIDUJGvbmpquLIm03wFPpxZQBb4A0bP3WBQDqm_JslA";

static char *slurp(const char *path, size_t *len)
{
    char *buf = NULL, err[256];
    size_t n = 0;

    assert_int_equal(tm_file_read(path, 1 << 20, &buf, &n, err, sizeof(err)), 0);
    if (len)
        *len = n;
    return buf;
}

/* ---- credentials -------------------------------------------------------- */

static void test_jwt_known_answer(void **state)
{
    struct tm_gcp_key key;
    char err[256], *jwt = NULL;

    (void)state;
    assert_int_equal(tm_gcp_key_load(KEY_PATH, &key, err, sizeof(err)), 0);
    assert_string_equal(key.client_email, "tarmac-unit@tarmac-test.iam.gserviceaccount.com");
    assert_string_equal(key.project_id, "tarmac-test");
    assert_int_equal(tm_gcp_jwt_sign(key.private_key, key.client_email, TM_GCP_SCOPE,
                                     TM_GCP_TOKEN_URL, 1764633600, &jwt), 0);
    assert_string_equal(jwt, google_jwt);
    free(jwt);
    /* Another audience is another token (the aud claim is signed). */
    assert_int_equal(tm_gcp_jwt_sign(key.private_key, key.client_email, TM_GCP_SCOPE,
                                     "http://127.0.0.1:1/token", 1764633600, &jwt), 0);
    assert_string_not_equal(jwt, google_jwt);
    free(jwt);
    assert_int_equal(tm_gcp_jwt_sign("not a key", "a", "b", "c", 1, &jwt), TM_EINVAL);
    tm_gcp_key_release(&key);
}

static void expect_key_error(const char *json, const char *needle)
{
    struct tm_gcp_key key;
    char err[256] = "";

    assert_int_equal(tm_gcp_key_parse(json, strlen(json), &key, err, sizeof(err)), TM_EINVAL);
    if (!strstr(err, needle))
        fail_msg("error \"%s\" does not say \"%s\"", err, needle);
    assert_null(strstr(err, "PRIVATE KEY"));
}

static void test_key_file_errors(void **state)
{
    size_t len;
    char *good = slurp(KEY_PATH, &len);
    char *half = strndup(good, len / 2);
    char *cut_pem;
    cJSON *doc = cJSON_Parse(good);
    cJSON *pk = cJSON_GetObjectItem(doc, "private_key");

    (void)state;
    expect_key_error(half, "malformed or truncated");
    expect_key_error("[]", "not a JSON object");
    expect_key_error("{\"type\":\"external_account\"}", "workload identity federation");
    expect_key_error("{\"type\":\"service_account\",\"private_key\":\"x\"}", "\"client_email\": missing");
    expect_key_error("{\"type\":\"service_account\",\"client_email\":\"a@b\"}", "\"private_key\": missing");
    expect_key_error("{\"client_email\":\"a@b\"}", "\"type\": missing");
    /* A PEM cut in the middle: refused at load, not at first use. */
    pk->valuestring[strlen(pk->valuestring) / 2] = '\0';
    cut_pem = cJSON_PrintUnformatted(doc);
    expect_key_error(cut_pem, "\"private_key\": not a PEM RSA private key");
    free(cut_pem);
    cJSON_Delete(doc);
    free(half);
    free(good);
}

static void test_token_parse(void **state)
{
    char tok[64], err[128];
    int64_t ttl = 0;
    const char ok[] = "{\"access_token\":\"ya29.x\",\"expires_in\":3599,\"token_type\":\"Bearer\"}";

    (void)state;
    assert_int_equal(tm_gcp_token_parse(ok, strlen(ok), tok, sizeof(tok), &ttl, err, sizeof(err)), 0);
    assert_string_equal(tok, "ya29.x");
    assert_int_equal(ttl, 3599);
    assert_int_equal(tm_gcp_token_parse("{\"expires_in\":1}", 16, tok, sizeof(tok), &ttl, err,
                                        sizeof(err)), TM_EBADREPLY);
    assert_int_equal(tm_gcp_token_parse("{\"access_token\":\"a\",\"expires_in\":0}", 35, tok,
                                        sizeof(tok), &ttl, err, sizeof(err)), TM_EBADREPLY);
    assert_int_equal(tm_gcp_token_parse("{\"access_token\":\"a\",\"expires_in\":5,\"token_type\":\"MAC\"}",
                                        53, tok, sizeof(tok), &ttl, err, sizeof(err)), TM_EBADREPLY);
    assert_int_equal(tm_gcp_token_parse("{\"access_tok", 12, tok, sizeof(tok), &ttl, err,
                                        sizeof(err)), TM_EBADREPLY);
}

/* ---- requests ----------------------------------------------------------- */

static void test_labels(void **state)
{
    char enc[64], dec[64];

    (void)state;
    assert_int_equal(tm_gce_label_encode("e2e-spot-1764633600000-3", enc, sizeof(enc)), 0);
    assert_string_equal(enc, "e2e-spot-1764633600000-3");
    assert_int_equal(tm_gce_label_encode("Prod.A100_x", enc, sizeof(enc)), 0);
    assert_string_equal(enc, "_50rod_2e_41100_5fx");
    assert_int_equal(tm_gce_label_decode(enc, dec, sizeof(dec)), 0);
    assert_string_equal(dec, "Prod.A100_x");
    /* 63 characters at most (GCP's limit for a value). */
    assert_int_equal(tm_gce_label_encode("AAAAAAAAAAAAAAAAAAAAAA", enc, sizeof(enc)), TM_EINVAL);
    assert_int_equal(tm_gce_label_decode("bad_zz", dec, sizeof(dec)), TM_EINVAL);
    assert_int_equal(tm_gce_label_decode("UPPER", dec, sizeof(dec)), TM_EINVAL);
}

static void test_request_id_and_name(void **state)
{
    char a[37], b[37], c[37], name[TM_ID_MAX];

    (void)state;
    tm_gce_request_id("tok-1", "us-central1-a", "a2-highgpu-8g", true, a);
    tm_gce_request_id("tok-1", "us-central1-a", "a2-highgpu-8g", true, b);
    tm_gce_request_id("tok-1", "us-central1-b", "a2-highgpu-8g", true, c);
    assert_string_equal(a, b);          /* a retry is the same request */
    assert_string_not_equal(a, c);      /* a fall back is a new one */
    assert_int_equal(strlen(a), 36);
    assert_true(a[8] == '-' && a[13] == '-' && a[18] == '-' && a[23] == '-');
    assert_int_equal(a[14], '5');       /* version 5 */
    assert_true(strchr("89ab", a[19]) != NULL);
    tm_gce_instance_name(42, "tok-1", name);
    assert_int_equal(strncmp(name, "tm-42-", 6), 0);
    assert_int_equal(strlen(name), 16);
    assert_true(tm_gce_accelerator_optimized("a2-highgpu-8g"));
    assert_true(tm_gce_accelerator_optimized("a3-highgpu-8g"));
    assert_true(tm_gce_accelerator_optimized("g2-standard-4"));
    assert_false(tm_gce_accelerator_optimized("n1-standard-8"));
    assert_string_equal(tm_gce_accelerator_for_model("T4"), "nvidia-tesla-t4");
    assert_null(tm_gce_accelerator_for_model("Z9"));
}

static void test_build_insert(void **state)
{
    const struct tm_gce_kv labels[] = {{"tarmac-cluster", "e2e", 0}, {"tarmac-node-id", "7", 0}};
    const struct tm_gce_kv meta[] = {{"tarmac-launch-token", "tok", 0},
                                     {"startup-script", "#!/bin/sh\necho hi\nSECRET", 18}};
    struct tm_gce_insert_params p = {
        .name = "tm-7-0123456789", .zone = "us-central1-a", .machine_type = "a2-highgpu-8g",
        .source_image = "projects/debian-cloud/global/images/family/debian-12", .spot = true,
        .labels = labels, .nlabels = 2, .metadata = meta, .nmetadata = 2,
    };
    char *body = NULL;

    (void)state;
    assert_int_equal(tm_gce_build_insert(&p, &body), 0);
    assert_string_equal(body,
        "{\"name\":\"tm-7-0123456789\",\"machineType\":\"zones/us-central1-a/machineTypes/a2-highgpu-8g\","
        "\"labels\":{\"tarmac-cluster\":\"e2e\",\"tarmac-node-id\":\"7\"},"
        "\"metadata\":{\"items\":[{\"key\":\"tarmac-launch-token\",\"value\":\"tok\"},"
        "{\"key\":\"startup-script\",\"value\":\"#!/bin/sh\\necho hi\\n\"}]},"
        "\"disks\":[{\"boot\":true,\"autoDelete\":true,\"initializeParams\":"
        "{\"sourceImage\":\"projects/debian-cloud/global/images/family/debian-12\"}}],"
        "\"networkInterfaces\":[{\"network\":\"global/networks/default\"}],"
        "\"scheduling\":{\"onHostMaintenance\":\"TERMINATE\",\"provisioningModel\":\"SPOT\","
        "\"instanceTerminationAction\":\"DELETE\",\"automaticRestart\":false}}");
    free(body);
    /* On-demand n1 with attached T4s and a disk size (int64: a string). */
    p.spot = false;
    p.machine_type = "n1-standard-8";
    p.accelerator_type = "nvidia-tesla-t4";
    p.accelerator_count = 2;
    p.disk_gb = 200;
    p.nmetadata = 0;
    p.nlabels = 0;
    assert_int_equal(tm_gce_build_insert(&p, &body), 0);
    assert_non_null(strstr(body, "\"guestAccelerators\":[{\"acceleratorType\":"
                                 "\"zones/us-central1-a/acceleratorTypes/nvidia-tesla-t4\","
                                 "\"acceleratorCount\":2}]"));
    assert_non_null(strstr(body, "\"diskSizeGb\":\"200\""));
    assert_non_null(strstr(body, "\"provisioningModel\":\"STANDARD\",\"automaticRestart\":true"));
    assert_null(strstr(body, "instanceTerminationAction"));
    assert_null(strstr(body, "labels"));
    free(body);
    p.source_image = NULL;
    assert_int_equal(tm_gce_build_insert(&p, &body), TM_EINVAL);
}

static void test_urls(void **state)
{
    const struct tm_gce_kv t[] = {{"tarmac-cluster", "e2e", 0}, {"tarmac-launch-token", "A.b", 0}};
    char filter[256], *u;

    (void)state;
    u = tm_gce_url_insert("http://h/compute/v1", "p", "us-central1-a",
                          "0b8d4c1e-0000-5000-8000-000000000000");
    assert_string_equal(u, "http://h/compute/v1/projects/p/zones/us-central1-a/instances"
                           "?requestId=0b8d4c1e-0000-5000-8000-000000000000");
    free(u);
    assert_int_equal(tm_gce_label_filter(t, 2, filter, sizeof(filter)), 0);
    assert_string_equal(filter, "(labels.tarmac-cluster = \"e2e\") AND "
                                "(labels.tarmac-launch-token = \"_41_2eb\")");
    u = tm_gce_url_aggregated_list("http://h/compute/v1", "p", "labels.x = \"y\"", 2, "tok/=");
    assert_string_equal(u, "http://h/compute/v1/projects/p/aggregated/instances"
                           "?filter=labels.x%20%3D%20%22y%22&maxResults=2&pageToken=tok%2F%3D"
                           "&returnPartialSuccess=false");
    free(u);
    u = tm_gce_url_operation("http://h/compute/v1", "p", "z", "operation-1", true);
    assert_string_equal(u, "http://h/compute/v1/projects/p/zones/z/operations/operation-1/wait");
    free(u);
    u = tm_gce_url_delete("http://h/compute/v1", "p", "z", "tm-1-abc");
    assert_string_equal(u, "http://h/compute/v1/projects/p/zones/z/instances/tm-1-abc");
    free(u);
    assert_null(tm_gce_url_delete("http://h", "p", "z", "../x"));
    assert_null(tm_gce_url_zone("http://h", "p", ""));
}

/* ---- errors ------------------------------------------------------------- */

static void test_error_map(void **state)
{
    (void)state;
    assert_int_equal(tm_gce_error_map("ZONE_RESOURCE_POOL_EXHAUSTED", 0), TM_EQUOTA);
    assert_int_equal(tm_gce_error_map("ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS", 0), TM_EQUOTA);
    assert_int_equal(tm_gce_error_map("QUOTA_EXCEEDED", 0), TM_EQUOTA);
    assert_int_equal(tm_gce_error_map("quotaExceeded", 403), TM_EQUOTA);
    assert_int_equal(tm_gce_error_map("rateLimitExceeded", 403), TM_ETHROTTLED);
    assert_int_equal(tm_gce_error_map("", 429), TM_ETHROTTLED);
    assert_int_equal(tm_gce_error_map("backendError", 503), TM_EUNAVAIL);
    assert_int_equal(tm_gce_error_map("", 500), TM_EUNAVAIL);
    assert_int_equal(tm_gce_error_map("authError", 401), TM_EAUTH);
    assert_int_equal(tm_gce_error_map("forbidden", 403), TM_EAUTH);
    assert_int_equal(tm_gce_error_map("notFound", 404), TM_ENOTFOUND);
    assert_int_equal(tm_gce_error_map("alreadyExists", 409), TM_ECONFLICT);
    assert_int_equal(tm_gce_error_map("invalid", 400), TM_EINVAL);
}

static void test_parse_error_doc(void **state)
{
    const char doc[] = "{\"error\":{\"code\":403,\"message\":\"Rate Limit Exceeded\","
                       "\"errors\":[{\"domain\":\"usageLimits\",\"reason\":\"rateLimitExceeded\"}],"
                       "\"status\":\"PERMISSION_DENIED\"}}";
    const char bare[] = "{\"error\":{\"code\":401,\"message\":\"no\",\"status\":\"UNAUTHENTICATED\"}}";
    struct tm_gce_reply r = {0};

    (void)state;
    assert_int_equal(tm_gce_parse_error(doc, strlen(doc), &r), 0);
    assert_string_equal(r.error_code, "rateLimitExceeded");
    assert_int_equal(tm_gce_error_map(r.error_code, 403), TM_ETHROTTLED);
    assert_int_equal(tm_gce_parse_error(bare, strlen(bare), &r), 0);
    assert_string_equal(r.error_code, "UNAUTHENTICATED");
    assert_int_equal(tm_gce_parse_error("<html>", 6, &r), TM_EBADREPLY);
}

/* ---- answers ------------------------------------------------------------ */

static void test_parse_aggregated_list(void **state)
{
    size_t len;
    char *body = slurp(CORPUS "aggregated-list.json", &len), err[256];
    struct tm_gce_reply r;
    const struct tm_gce_instance *a, *b, *c;

    (void)state;
    assert_int_equal(tm_gce_parse_reply(TM_GCE_AGGREGATED_LIST, body, len, &r, err, sizeof(err)), 0);
    assert_int_equal(r.ninstances, 3);
    assert_string_equal(r.next_page_token, "page-2");
    a = &r.instances[0];
    assert_string_equal(a->inst.id, "us-central1-a/tm-1-aaaaaaaaaa");
    assert_string_equal(a->inst.instance_type, "a2-highgpu-8g");
    assert_string_equal(a->inst.zone, "us-central1-a");
    assert_string_equal(a->inst.token, "E2E.od-1");   /* metadata, verbatim */
    assert_string_equal(a->inst.pool, "od");
    assert_string_equal(a->cluster, "e2e");
    assert_int_equal(a->inst.node_id, 1);
    assert_int_equal(a->inst.state, TM_INSTANCE_RUNNING);
    assert_int_equal(a->inst.capacity, TM_CAPACITY_ON_DEMAND);
    assert_false(a->inst.interrupted);
    assert_int_equal(a->inst.launched_ms, 1764633600123LL + 8 * 3600 * 1000);
    b = &r.instances[1];
    assert_string_equal(b->inst.token, "e2e-spot-2");  /* label only: decoded */
    assert_int_equal(b->inst.capacity, TM_CAPACITY_SPOT);
    assert_int_equal(b->inst.state, TM_INSTANCE_TERMINATED);
    assert_true(b->inst.interrupted);                  /* a spot VM stopped: preempted */
    c = &r.instances[2];
    assert_string_equal(c->inst.id, "us-central1-b/tm-3-cccccccccc");
    assert_int_equal(c->inst.state, TM_INSTANCE_PENDING);
    tm_gce_reply_release(&r);
    free(body);
}

static void test_parse_operations(void **state)
{
    size_t len;
    char *body = slurp(CORPUS "operation-exhausted.json", &len), err[256];
    struct tm_gce_reply r;

    (void)state;
    assert_int_equal(tm_gce_parse_reply(TM_GCE_OPERATION_WAIT, body, len, &r, err, sizeof(err)), 0);
    assert_true(r.op.done);
    assert_string_equal(r.op.zone, "us-central1-a");
    assert_string_equal(r.op.error_code, "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS");
    assert_string_equal(r.op.target, "us-central1-a/tm-5-eeeeeeeeee");
    assert_int_equal(tm_gce_error_map(r.op.error_code, 0), TM_EQUOTA);
    tm_gce_reply_release(&r);
    free(body);
    body = slurp(CORPUS "operations-preempted.json", &len);
    assert_int_equal(tm_gce_parse_reply(TM_GCE_OPERATIONS_LIST, body, len, &r, err, sizeof(err)), 0);
    assert_int_equal(r.nops, 1);
    assert_string_equal(r.ops[0].type, "compute.instances.preempted");
    assert_string_equal(r.ops[0].target, "us-central1-c/tm-9-9999999999");
    assert_int_equal(r.ops[0].insert_ms, 1764633660000LL);
    tm_gce_reply_release(&r);
    free(body);
}

static void test_parse_bad(void **state)
{
    struct tm_gce_reply r;
    char err[256];
    static const char *const bad[] = {
        "", "{", "[]", "{\"items\":[]}", "{\"items\":{\"zones/a\":{\"instances\":{}}}}",
        "{\"items\":{\"zones/a\":{\"instances\":[{\"status\":\"RUNNING\"}]}}}",
        "{\"items\":{},\"unreachables\":[\"zones/us-central1-a\"]}",
        "{\"items\":{},\"nextPageToken\":7}",
    };

    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(tm_gce_parse_reply(TM_GCE_AGGREGATED_LIST, bad[i], strlen(bad[i]), &r,
                                            err, sizeof(err)), TM_EBADREPLY);
        assert_non_null(strstr(err, "instances.aggregatedList"));
    }
    assert_int_equal(tm_gce_parse_reply(TM_GCE_OPERATION_WAIT, "{\"name\":\"o\",\"status\":\"LOST\"}",
                                        28, &r, err, sizeof(err)), TM_EBADREPLY);
    assert_non_null(strstr(err, "zoneOperations.wait"));
    assert_int_equal(tm_gce_parse_reply(TM_GCE_OPERATION_GET,
                                        "{\"name\":\"o\",\"status\":\"DONE\",\"error\":{}}", 38, &r,
                                        err, sizeof(err)), TM_EBADREPLY);
}

static void test_paging_token(void **state)
{
    struct tm_gce_reply r;
    char err[128];
    const char last[] = "{\"items\":{},\"nextPageToken\":\"\"}";

    (void)state;
    assert_int_equal(tm_gce_parse_reply(TM_GCE_AGGREGATED_LIST, last, strlen(last), &r, err,
                                        sizeof(err)), 0);
    assert_null(r.next_page_token); /* an empty token ends the listing */
    tm_gce_reply_release(&r);
}

static void test_backoff(void **state)
{
    struct tm_gce_retry rt = {.base_delay_ms = 100, .max_delay_ms = 1000};
    uint64_t s = 1;

    (void)state;
    for (int i = 0; i < 200; i++) {
        assert_true(tm_gce_backoff_ms(&rt, 1, &s) <= 100);
        assert_true(tm_gce_backoff_ms(&rt, 3, &s) <= 400);
        assert_true(tm_gce_backoff_ms(&rt, 30, &s) <= 1000);
    }
}

/* The shipped price table loads, and its provenance-marked figures are there. */
static void test_price_table(void **state)
{
    struct tm_price_table t;
    char err[256];
    bool a2 = false;

    (void)state;
    assert_int_equal(tm_prices_load(TM_SOURCE_DIR "/config/prices-gcp-gpu.yaml", &t, err,
                                    sizeof(err)), 0);
    assert_true(t.ntypes >= 3);
    for (size_t i = 0; i < t.ntypes; i++)
        if (strcmp(t.types[i].name, "a2-highgpu-8g") == 0)
            a2 = true;
    assert_true(a2);
}

/* The example loads; a gcp provider without a project is refused naming it. */
static void test_config(void **state)
{
    struct tm_config cfg = {0};
    char err[512] = "";
    const char bad[] =
        "database: {url: \"postgresql://x@h/db\"}\ncluster: c\n"
        "providers:\n  - {name: g, kind: gcp, region: us-central1}\n"
        "pools:\n  - {name: p, provider: g, zones: [us-central1-a], instance_types: [a2-highgpu-8g],"
        " gpu_model: A100, gpus_per_node: 8, max_nodes: 1}\n";

    (void)state;
    assert_int_equal(tm_config_load(TM_SOURCE_DIR "/config/example-gcp.yaml", &cfg, err,
                                    sizeof(err)), 0);
    assert_string_equal(tm_gcp_config(&cfg.providers[0])->project, "my-project");
    assert_string_equal(cfg.providers[0].kind, "gcp");
    tm_config_release(&cfg);
    assert_int_equal(tm_config_load_string(bad, strlen(bad), "bad.yaml", &cfg, err, sizeof(err)),
                     TM_EINVAL);
    if (!strstr(err, "providers[0].project"))
        fail_msg("error \"%s\" does not name providers[0].project", err);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_jwt_known_answer),
        cmocka_unit_test(test_key_file_errors),
        cmocka_unit_test(test_token_parse),
        cmocka_unit_test(test_labels),
        cmocka_unit_test(test_request_id_and_name),
        cmocka_unit_test(test_build_insert),
        cmocka_unit_test(test_urls),
        cmocka_unit_test(test_error_map),
        cmocka_unit_test(test_parse_error_doc),
        cmocka_unit_test(test_parse_aggregated_list),
        cmocka_unit_test(test_parse_operations),
        cmocka_unit_test(test_parse_bad),
        cmocka_unit_test(test_paging_token),
        cmocka_unit_test(test_backoff),
        cmocka_unit_test(test_price_table),
        cmocka_unit_test(test_config),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
