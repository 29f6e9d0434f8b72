/*
 * tests/unit/providers/azure/test_azure_config.c: an azure provider's
 * section refused at config load, the message naming the field: a missing
 * tenant, subscription, resource group, subnet, image or SSH key; a VM size
 * the file does not describe or that is not an Azure size; a zone that is
 * not 1, 2 or 3; the azure section on another kind; a client_certificate
 * beside a secret or managed identity source, or whose file is not PEM,
 * truncated, without a certificate, with a key that does not match or is
 * password-protected, or missing (the reason never quoting the key).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "../../core/cert_pem.h"

#include "core/config.h"
#include "core/err.h"
#include "providers/azure/azure_config.h"

#define PROVIDER_HEAD                                                                            \
    "database:\n  url: postgresql://x@127.0.0.1/x\ncluster: c1\nproviders:\n"                  \
    "  - name: az\n    kind: azure\n    region: eastus\n    credentials:\n      source: env\n"

static const char *azure_ok =
    "    azure:\n"
    "      tenant_id: t\n      subscription_id: s\n      resource_group: g\n"
    "      subnet_id: /subscriptions/s/resourceGroups/g/providers/Microsoft.Network/"
    "virtualNetworks/v/subnets/d\n"
    "      image: \"Canonical:ubuntu:22_04-lts:latest\"\n"
    "      ssh_public_key: \"ssh-ed25519 AAAA k\"\n";

static const char *types =
    "    instance_types:\n"
    "      - {name: Standard_NC24ads_A100_v4, gpus: 1, gpu_model: A100, cpu_milli: 24000,\n"
    "         memory_mib: 220000, on_demand_price: \"3.67\", spot_price: \"0.88\"}\n";

static int load(const char *azure, const char *typ, const char *pool_type, const char *zones,
                char *err, size_t errsize)
{
    char text[4096];
    struct tm_config cfg = {0};
    int r;

    snprintf(text, sizeof(text),
             PROVIDER_HEAD "%s%s"
             "pools:\n  - name: gpu\n    provider: az\n    zones: %s\n"
             "    instance_types: [%s]\n    gpu_model: A100\n    gpus_per_node: 1\n"
             "    capacity_type: spot\n    min_nodes: 0\n    max_nodes: 2\n",
             azure, typ, zones, pool_type);
    err[0] = '\0';
    r = tm_config_load_string(text, strlen(text), "t.yaml", &cfg, err, errsize);
    if (r == 0)
        tm_config_release(&cfg);
    return r;
}

static void test_ok(void **state)
{
    char err[512];

    (void)state;
    assert_int_equal(load(azure_ok, types, "Standard_NC24ads_A100_v4", "[\"1\", \"2\"]", err,
                          sizeof(err)), 0);
}

static void test_example_loads(void **state)
{
    struct tm_config cfg = {0};
    char err[512], path[1024];

    (void)state;
    snprintf(path, sizeof(path), "%s/config/example-azure.yaml", TM_SOURCE_DIR);
    assert_int_equal(tm_config_load(path, &cfg, err, sizeof(err)), 0);
    assert_string_equal(tm_azure_config(&cfg.providers[0])->resource_group, "tarmac-prod");
    assert_string_equal(tm_azure_config(&cfg.providers[0])->admin_username, "tarmac");
    tm_config_release(&cfg);
}

static void expect_missing(const char *key)
{
    char azure[1024], err[512], want[128];
    const char *p, *nl;

    /* azure_ok without the line holding key */
    p = strstr(azure_ok, key);
    assert_non_null(p);
    while (p > azure_ok && p[-1] != '\n')
        p--;
    nl = strchr(p, '\n');
    snprintf(azure, sizeof(azure), "%.*s%s", (int)(p - azure_ok), azure_ok, nl + 1);
    assert_int_equal(load(azure, types, "Standard_NC24ads_A100_v4", "[\"1\"]", err, sizeof(err)),
                     TM_EINVAL);
    snprintf(want, sizeof(want), "providers[0].azure.%s", key);
    if (!strstr(err, want) || !strstr(err, "missing required key"))
        fail_msg("for %s: %s", key, err);
}

static void test_missing_fields(void **state)
{
    (void)state;
    expect_missing("tenant_id");
    expect_missing("subscription_id");
    expect_missing("resource_group");
    expect_missing("subnet_id");
    expect_missing("image");
    expect_missing("ssh_public_key");
}

static void test_unknown_size(void **state)
{
    char err[512];

    (void)state;
    assert_int_equal(load(azure_ok, types, "Standard_NC96ads_A100_v9", "[\"1\"]", err,
                          sizeof(err)), TM_EINVAL);
    assert_non_null(strstr(err, "pools[0].instance_types[0]"));
    assert_non_null(strstr(err, "unknown VM size \"Standard_NC96ads_A100_v9\""));
    assert_int_equal(load(azure_ok,
                          "    instance_types:\n      - {name: p4d.24xlarge, gpus: 1, gpu_model: "
                          "A100, cpu_milli: 1, memory_mib: 1, on_demand_price: \"1\", spot_price: "
                          "\"1\"}\n", "p4d.24xlarge", "[\"1\"]", err, sizeof(err)), TM_EINVAL);
    assert_non_null(strstr(err, "providers[0].instance_types[0].name"));
}

static void test_unknown_zone(void **state)
{
    char err[512];

    (void)state;
    assert_int_equal(load(azure_ok, types, "Standard_NC24ads_A100_v4", "[\"1\", \"eastus-4\"]",
                          err, sizeof(err)), TM_EINVAL);
    assert_non_null(strstr(err, "pools[0].zones[1]"));
    assert_non_null(strstr(err, "unknown Azure zone \"eastus-4\""));
}

static void test_bad_subnet(void **state)
{
    char azure[1024], err[512];
    const char *p = strstr(azure_ok, "      subnet_id:"), *nl = strchr(p, '\n');

    (void)state;
    snprintf(azure, sizeof(azure), "%.*s      subnet_id: default\n%s", (int)(p - azure_ok),
             azure_ok, nl + 1);
    assert_int_equal(load(azure, types, "Standard_NC24ads_A100_v4", "[\"1\"]", err, sizeof(err)),
                     TM_EINVAL);
    assert_non_null(strstr(err, "providers[0].azure.subnet_id"));
}

static void test_azure_section_on_other_kind(void **state)
{
    const char *text =
        "database:\n  url: postgresql://x@127.0.0.1/x\ncluster: c1\nproviders:\n"
        "  - name: a\n    kind: aws\n    region: us-east-1\n    azure:\n      tenant_id: t\n"
        "pools:\n  - name: p\n    provider: a\n    zones: [us-east-1a]\n"
        "    instance_types: [p4d.24xlarge]\n    gpu_model: A100\n    gpus_per_node: 8\n"
        "    capacity_type: on_demand\n    min_nodes: 0\n    max_nodes: 1\n";
    struct tm_config cfg = {0};
    char err[512];

    (void)state;
    assert_int_equal(tm_config_load_string(text, strlen(text), "t.yaml", &cfg, err, sizeof(err)),
                     TM_EINVAL);
    assert_non_null(strstr(err, "providers[0].azure"));
    assert_non_null(strstr(err, "only used by kind \"azure\", not \"aws\""));
}

/* ---- azure.client_certificate -------------------------------------------- */

/* An azure provider with client_certificate: path and the given
 * credentials block ("" for none). */
static int load_cert(const char *credentials, const char *path, char *err, size_t errsize)
{
    char text[4096];
    struct tm_config cfg = {0};
    int r;

    snprintf(text, sizeof(text),
             "database:\n  url: postgresql://x@127.0.0.1/x\ncluster: c1\nproviders:\n"
             "  - name: az\n    kind: azure\n    region: eastus\n%s%s"
             "      client_id: app-1\n      client_certificate: \"%s\"\n%s"
             "pools:\n  - name: gpu\n    provider: az\n    zones: [\"1\"]\n"
             "    instance_types: [Standard_NC24ads_A100_v4]\n    gpu_model: A100\n"
             "    gpus_per_node: 1\n    capacity_type: spot\n    min_nodes: 0\n    max_nodes: 2\n",
             credentials, azure_ok, path, types);
    err[0] = '\0';
    r = tm_config_load_string(text, strlen(text), "t.yaml", &cfg, err, errsize);
    if (r == 0) {
        assert_string_equal(tm_azure_config(&cfg.providers[0])->client_certificate, path);
        tm_config_release(&cfg);
    }
    return r;
}

struct certfx {
    char dir[128], good[160], path[160];
    char *key, *cert, *other_cert, *line;
};

static void certfx_init(struct certfx *f)
{
    EVP_PKEY *k = tp_key(0), *o = tp_key(0);
    X509 *c = tp_cert(k, "app", 30), *oc = tp_cert(o, "other", 30);
    char line[128], *t;

    snprintf(f->dir, sizeof(f->dir), "/tmp/tm-azure-config.%d", (int)getpid());
    assert_int_equal(mkdir(f->dir, 0700), 0);
    snprintf(f->good, sizeof(f->good), "%s/good.pem", f->dir);
    snprintf(f->path, sizeof(f->path), "%s/test.pem", f->dir);
    f->key = tp_key_pem(k, 0, NULL);
    f->cert = tp_cert_pem(c);
    f->other_cert = tp_cert_pem(oc);
    tp_key_line(f->key, line, sizeof(line));
    f->line = strdup(line);
    t = tp_cat(f->key, f->cert, NULL);
    assert_int_equal(tp_write(f->good, t), 0);
    free(t);
    X509_free(c);
    X509_free(oc);
    EVP_PKEY_free(k);
    EVP_PKEY_free(o);
}

static void certfx_release(struct certfx *f)
{
    unlink(f->good);
    unlink(f->path);
    rmdir(f->dir);
    free(f->key);
    free(f->cert);
    free(f->other_cert);
    free(f->line);
}

/* The file holding text is refused under the key, saying want. */
static void expect_cert_refused(struct certfx *f, const char *text, const char *want)
{
    char err[1024];

    if (text)
        assert_int_equal(tp_write(f->path, text), 0);
    else
        unlink(f->path);
    assert_int_equal(load_cert("", f->path, err, sizeof(err)), TM_EINVAL);
    if (!strstr(err, "providers[0].azure.client_certificate") || !strstr(err, want))
        fail_msg("want the key and \"%s\": %s", want, err);
    assert_null(strstr(err, f->line));
}

static void test_client_certificate(void **state)
{
    struct certfx f;
    char err[1024], *t;

    (void)state;
    certfx_init(&f);
    assert_int_equal(load_cert("", f.good, err, sizeof(err)), 0);
    assert_int_equal(load_cert("    credentials:\n      source: none\n", f.good, err, sizeof(err)), 0);
    /* Exactly one credential. */
    assert_int_equal(load_cert("    credentials:\n      source: env\n", f.good, err, sizeof(err)),
                     TM_EINVAL);
    assert_non_null(strstr(err, "providers[0].azure.client_certificate"));
    assert_non_null(strstr(err, "exactly one credential"));
    assert_non_null(strstr(err, "a client secret"));
    assert_int_equal(load_cert("    credentials:\n      source: instance_role\n", f.good, err,
                               sizeof(err)), TM_EINVAL);
    assert_non_null(strstr(err, "the managed identity"));
    assert_int_equal(load_cert("    credentials:\n      source: file\n      file: /x\n", f.good,
                               err, sizeof(err)), TM_EINVAL);
    assert_non_null(strstr(err, "exactly one credential"));

    expect_cert_refused(&f, "not a PEM file\n", "no private key");
    expect_cert_refused(&f, f.key, "no certificate in the file");
    t = tp_cat(f.key, f.other_cert, NULL);
    expect_cert_refused(&f, t, "does not match the certificate");
    t[strlen(f.key) + strlen(f.other_cert) / 2] = '\0';
    expect_cert_refused(&f, t, "truncated");
    free(t);
    {
        EVP_PKEY *k = tp_key(0);
        char *enc = tp_key_pem(k, 0, "pw-1234");

        t = tp_cat(enc, f.cert, NULL);
        expect_cert_refused(&f, t, "password-protected");
        free(t);
        free(enc);
        EVP_PKEY_free(k);
    }
    expect_cert_refused(&f, NULL, "could not open");
    certfx_release(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ok),
        cmocka_unit_test(test_example_loads),
        cmocka_unit_test(test_missing_fields),
        cmocka_unit_test(test_unknown_size),
        cmocka_unit_test(test_unknown_zone),
        cmocka_unit_test(test_bad_subnet),
        cmocka_unit_test(test_azure_section_on_other_kind),
        cmocka_unit_test(test_client_certificate),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
