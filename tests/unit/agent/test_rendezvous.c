/*
 * tests/unit/agent/test_rendezvous.c: a multi-node job's rendezvous on
 * the agent's side, with known answers: the heartbeat answer's rendezvous
 * parsed and checked (a bad value refused naming its field; the start
 * barrier's "barrier" and "start_in_ms"), the
 * variables a member gets (host environment and a container's env file),
 * the hostfile and the {hostfile} placeholder, the enrollment body with
 * the node's address, and the address check the agent's --advertise-addr
 * and the API's enrollment share (core/address.h, tm_api_parse_enroll).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "controller/agent/answer.h"
#include "controller/agent/body.h"
#include "controller/agent/job_env.h"
#include "controller/spec/api_body.h"
#include "core/address.h"
#include "core/err.h"

#define S(x) x, strlen(x)

#define HEAD "{\"assignments\":[{\"job_id\":7,\"attempt\":2,\"command\":\"x\","
#define RDV_OK "\"rendezvous\":{\"rank\":1,\"nodes\":3,\"gpus_per_node\":2," \
               "\"addrs\":[\"10.0.0.5\",\"10.0.0.6\",\"fd00::7\"],\"master_port\":29501,\"wait\":null}"

static const char *env_get(char **env, const char *name)
{
    size_t n = strlen(name);

    for (char **p = env; *p; p++)
        if (strncmp(*p, name, n) == 0 && (*p)[n] == '=')
            return *p + n + 1;
    return NULL;
}

static int env_count(char **env, const char *name)
{
    size_t n = strlen(name);
    int c = 0;

    for (char **p = env; *p; p++)
        c += strncmp(*p, name, n) == 0 && (*p)[n] == '=';
    return c;
}

static void expect_bad(const char *rdv, const char *field)
{
    char body[1024], err[256];
    struct tm_agent_answer a;

    snprintf(body, sizeof(body), HEAD "\"rendezvous\":%s}]}", rdv);
    assert_int_equal(tm_agent_answer_parse(body, strlen(body), &a, err, sizeof(err)), TM_EBADREPLY);
    if (!strstr(err, field))
        fail_msg("%s: error \"%s\" does not name \"%s\"", rdv, err, field);
}

static void test_parse(void **state)
{
    struct tm_agent_answer a;
    char err[256];

    (void)state;
    assert_int_equal(tm_agent_answer_parse(S(HEAD RDV_OK "}]}"), &a, err, sizeof(err)), 0);
    assert_true(a.assignments[0].rdv.given);
    assert_int_equal(a.assignments[0].rdv.rank, 1);
    assert_int_equal(a.assignments[0].rdv.nodes, 3);
    assert_int_equal(a.assignments[0].rdv.gpus_per_node, 2);
    assert_string_equal(a.assignments[0].rdv.addrs[2], "fd00::7");
    assert_int_equal(a.assignments[0].rdv.master_port, 29501);
    assert_null(a.assignments[0].rdv.wait);
    tm_agent_answer_release(&a);

    /* waiting: no port, a reason */
    assert_int_equal(tm_agent_answer_parse(S(HEAD "\"rendezvous\":{\"rank\":0,\"nodes\":1,\"gpus_per_node\":1,"
                                                  "\"addrs\":[\"127.0.0.1\"],\"master_port\":null,"
                                                  "\"wait\":\"no free rendezvous port\"}}]}"),
                                           &a, err, sizeof(err)),
                     0);
    assert_string_equal(a.assignments[0].rdv.wait, "no free rendezvous port");
    assert_int_equal(a.assignments[0].rdv.master_port, 0);
    tm_agent_answer_release(&a);

    /* the start barrier: a member not come yet, then the common start */
    assert_int_equal(tm_agent_answer_parse(S(HEAD "\"rendezvous\":{\"rank\":0,\"nodes\":2,\"gpus_per_node\":1,"
                                                  "\"addrs\":[\"10.0.0.1\",\"10.0.0.2\"],\"master_port\":29500,"
                                                  "\"wait\":\"start barrier: waiting for node(s) 5\","
                                                  "\"barrier\":true,\"start_in_ms\":null}}]}"),
                                           &a, err, sizeof(err)),
                     0);
    assert_true(a.assignments[0].rdv.barrier);
    assert_int_equal(a.assignments[0].rdv.start_in_ms, 0);
    assert_int_equal(a.assignments[0].rdv.master_port, 29500);
    tm_agent_answer_release(&a);
    assert_int_equal(tm_agent_answer_parse(S(HEAD "\"rendezvous\":{\"rank\":1,\"nodes\":2,\"gpus_per_node\":1,"
                                                  "\"addrs\":[\"10.0.0.1\",\"10.0.0.2\"],\"master_port\":29500,"
                                                  "\"wait\":\"start barrier: together in 420 ms\","
                                                  "\"barrier\":true,\"start_in_ms\":420}}]}"),
                                           &a, err, sizeof(err)),
                     0);
    assert_true(a.assignments[0].rdv.barrier);
    assert_int_equal(a.assignments[0].rdv.start_in_ms, 420);
    tm_agent_answer_release(&a);
    /* released: no wait, barrier false */
    assert_int_equal(tm_agent_answer_parse(S(HEAD "\"rendezvous\":{\"rank\":1,\"nodes\":2,\"gpus_per_node\":1,"
                                                  "\"addrs\":[\"10.0.0.1\",\"10.0.0.2\"],\"master_port\":29500,"
                                                  "\"wait\":null,\"barrier\":false,\"start_in_ms\":null}}]}"),
                                           &a, err, sizeof(err)),
                     0);
    assert_false(a.assignments[0].rdv.barrier);
    assert_null(a.assignments[0].rdv.wait);
    tm_agent_answer_release(&a);

    /* an older controller: none */
    assert_int_equal(tm_agent_answer_parse(S(HEAD "\"gpu_indices\":[0]}]}"), &a, err, sizeof(err)), 0);
    assert_false(a.assignments[0].rdv.given);
    tm_agent_answer_release(&a);
}

static void test_parse_bad(void **state)
{
    (void)state;
    expect_bad("[]", "assignments[0].rendezvous");
    expect_bad("{\"rank\":0,\"gpus_per_node\":1,\"addrs\":[\"10.0.0.1\"],\"master_port\":1}",
               "rendezvous.nodes");
    expect_bad("{\"rank\":0,\"nodes\":0,\"gpus_per_node\":1,\"addrs\":[],\"master_port\":1}", "rendezvous.nodes");
    expect_bad("{\"rank\":2,\"nodes\":2,\"gpus_per_node\":1,\"addrs\":[\"10.0.0.1\",\"10.0.0.2\"],"
               "\"master_port\":1}",
               "rendezvous.rank");
    expect_bad("{\"rank\":-1,\"nodes\":1,\"gpus_per_node\":1,\"addrs\":[\"10.0.0.1\"],\"master_port\":1}",
               "rendezvous.rank");
    expect_bad("{\"rank\":0,\"nodes\":1,\"gpus_per_node\":65,\"addrs\":[\"10.0.0.1\"],\"master_port\":1}",
               "rendezvous.gpus_per_node");
    expect_bad("{\"rank\":0,\"nodes\":1,\"gpus_per_node\":1,\"addrs\":[\"10.0.0.1\"],\"master_port\":65536}",
               "rendezvous.master_port");
    expect_bad("{\"rank\":0,\"nodes\":1,\"gpus_per_node\":1,\"addrs\":[\"10.0.0.1\"],\"master_port\":\"80\"}",
               "rendezvous.master_port");
    expect_bad("{\"rank\":0,\"nodes\":1,\"gpus_per_node\":1,\"addrs\":[\"10.0.0.1\"]}", "rendezvous.master_port");
    expect_bad("{\"rank\":0,\"nodes\":1,\"gpus_per_node\":1,\"addrs\":[\"10.0.0.1\"],\"wait\":5}",
               "rendezvous.wait");
    expect_bad("{\"rank\":0,\"nodes\":1,\"gpus_per_node\":1,\"addrs\":[\"10.0.0.1\"],\"master_port\":1,"
               "\"barrier\":\"yes\"}",
               "rendezvous.barrier");
    expect_bad("{\"rank\":0,\"nodes\":1,\"gpus_per_node\":1,\"addrs\":[\"10.0.0.1\"],\"master_port\":1,"
               "\"barrier\":true}",
               "rendezvous.barrier");
    expect_bad("{\"rank\":0,\"nodes\":1,\"gpus_per_node\":1,\"addrs\":[\"10.0.0.1\"],\"master_port\":1,"
               "\"wait\":\"w\",\"barrier\":true,\"start_in_ms\":60001}",
               "rendezvous.start_in_ms");
    expect_bad("{\"rank\":0,\"nodes\":2,\"gpus_per_node\":1,\"addrs\":[\"10.0.0.1\"],\"master_port\":1}",
               "rendezvous.addrs");
    expect_bad("{\"rank\":0,\"nodes\":2,\"gpus_per_node\":1,\"addrs\":[\"10.0.0.1\",\"node-2\"],\"master_port\":1}",
               "rendezvous.addrs[1]");
    expect_bad("{\"rank\":0,\"nodes\":1,\"gpus_per_node\":1,\"addrs\":[\"10.0.0.1;rm -rf /\"],\"master_port\":1}",
               "rendezvous.addrs[0]");
}

/* A stopped gang's common stop (migrations/0026): "stops" in the answer. */
static void test_stops(void **state)
{
    static const char *bad[][2] = {
        {"{\"stops\":{}}", "stops: must be an array"},
        {"{\"stops\":[5]}", "stops[0]: must be an object"},
        {"{\"stops\":[{\"attempt\":1,\"stop_in_ms\":5}]}", "stops[0].job_id"},
        {"{\"stops\":[{\"job_id\":7,\"stop_in_ms\":5}]}", "stops[0].attempt"},
        {"{\"stops\":[{\"job_id\":7,\"attempt\":1}]}", "stops[0].stop_in_ms"},
        {"{\"stops\":[{\"job_id\":7,\"attempt\":1,\"stop_in_ms\":3600001}]}", "stops[0].stop_in_ms"},
        {"{\"stops\":[{\"job_id\":7,\"attempt\":1,\"stop_in_ms\":1.5}]}", "stops[0].stop_in_ms"},
    };
    struct tm_agent_answer a;
    char err[256];
    const char *ok = "{\"assignments\":[],\"stops\":[{\"job_id\":7,\"attempt\":2,\"stop_in_ms\":8400},"
                     "{\"job_id\":9,\"attempt\":1,\"stop_in_ms\":0}]}";

    (void)state;
    assert_int_equal(tm_agent_answer_parse(S(ok), &a, err, sizeof(err)), 0);
    assert_int_equal(a.nstops, 2);
    assert_non_null(tm_agent_answer_stop(&a, 7, 2));
    assert_int_equal(tm_agent_answer_stop(&a, 7, 2)->stop_in_ms, 8400);
    assert_null(tm_agent_answer_stop(&a, 7, 1)); /* another attempt: not this one's */
    assert_int_equal(tm_agent_answer_stop(&a, 9, 1)->stop_in_ms, 0);
    tm_agent_answer_release(&a);
    /* an older controller, or none: stop at once */
    assert_int_equal(tm_agent_answer_parse(S("{\"assignments\":[],\"stops\":null}"), &a, err, sizeof(err)), 0);
    assert_int_equal(a.nstops, 0);
    assert_null(tm_agent_answer_stop(&a, 7, 2));
    tm_agent_answer_release(&a);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(tm_agent_answer_parse(S(bad[i][0]), &a, err, sizeof(err)), TM_EBADREPLY);
        assert_non_null(strstr(err, bad[i][1]));
    }
}

static void test_env(void **state)
{
    const char *base[] = {"PATH=/usr/bin", "MASTER_ADDR=1.2.3.4", "TARMAC_NODE_RANK=9", NULL};
    struct tm_agent_answer a;
    char err[256], **env = NULL, *file = NULL;
    size_t len = 0;

    (void)state;
    assert_int_equal(tm_agent_answer_parse(S(HEAD RDV_OK "}]}"), &a, err, sizeof(err)), 0);
    a.assignments[0].hostfile = "/w/jobs/7-2/hostfile";
    assert_int_equal(tm_agent_job_env(base, &a.assignments[0], NULL, 0, &env), 0);
    assert_string_equal(env_get(env, "TARMAC_NODE_RANK"), "1");
    assert_int_equal(env_count(env, "TARMAC_NODE_RANK"), 1);
    assert_string_equal(env_get(env, "TARMAC_NUM_NODES"), "3");
    assert_string_equal(env_get(env, "TARMAC_GPUS_PER_NODE"), "2");
    assert_string_equal(env_get(env, "TARMAC_NODE_ADDRS"), "10.0.0.5,10.0.0.6,fd00::7");
    assert_string_equal(env_get(env, "TARMAC_MASTER_ADDR"), "10.0.0.5");
    assert_string_equal(env_get(env, "TARMAC_MASTER_PORT"), "29501");
    assert_string_equal(env_get(env, "TARMAC_HOSTFILE"), "/w/jobs/7-2/hostfile");
    assert_string_equal(env_get(env, "MASTER_ADDR"), "10.0.0.5"); /* not the agent's own */
    assert_int_equal(env_count(env, "MASTER_ADDR"), 1);
    assert_string_equal(env_get(env, "MASTER_PORT"), "29501");
    tm_strv_free(env);

    /* a container's env file: the same lines */
    assert_int_equal(tm_agent_container_env_file(&a.assignments[0], NULL, 0, &file, &len), 0);
    assert_non_null(strstr(file, "\nTARMAC_NODE_RANK=1\n"));
    assert_non_null(strstr(file, "\nTARMAC_MASTER_ADDR=10.0.0.5\nTARMAC_MASTER_PORT=29501\n"));
    assert_non_null(strstr(file, "\nMASTER_ADDR=10.0.0.5\nMASTER_PORT=29501\n"));
    free(file);
    tm_agent_answer_release(&a);

    /* a job that names MASTER_PORT keeps its own */
    assert_int_equal(tm_agent_answer_parse(S(HEAD "\"env\":{\"MASTER_PORT\":\"1234\"}," RDV_OK "}]}"), &a, err,
                                           sizeof(err)),
                     0);
    assert_int_equal(tm_agent_job_env(base, &a.assignments[0], NULL, 0, &env), 0);
    assert_string_equal(env_get(env, "MASTER_PORT"), "1234");
    assert_int_equal(env_count(env, "MASTER_PORT"), 1);
    assert_string_equal(env_get(env, "TARMAC_MASTER_PORT"), "29501");
    tm_strv_free(env);
    tm_agent_answer_release(&a);

    /* waiting, or no rendezvous: none of the names */
    assert_int_equal(tm_agent_answer_parse(S(HEAD "\"rendezvous\":{\"rank\":0,\"nodes\":1,\"gpus_per_node\":1,"
                                                  "\"addrs\":[\"127.0.0.1\"],\"wait\":\"w\"}}]}"),
                                           &a, err, sizeof(err)),
                     0);
    assert_int_equal(tm_agent_job_env(base, &a.assignments[0], NULL, 0, &env), 0);
    assert_null(env_get(env, "TARMAC_NODE_RANK"));
    assert_null(env_get(env, "MASTER_ADDR"));
    tm_strv_free(env);
    tm_agent_answer_release(&a);
}

static void test_hostfile(void **state)
{
    struct tm_agent_answer a;
    struct tm_agent_rendezvous none = {0};
    char err[256], *text = NULL, *cmd = NULL;
    size_t len = 0;

    (void)state;
    assert_int_equal(tm_agent_answer_parse(S(HEAD "\"image\":\"pytorch:2\"," RDV_OK "}]}"), &a, err, sizeof(err)),
                     0);
    assert_int_equal(tm_agent_hostfile_text(&a.assignments[0].rdv, &text, &len), 0);
    assert_string_equal(text, "10.0.0.5 slots=2\n10.0.0.6 slots=2\nfd00::7 slots=2\n");
    assert_int_equal(len, strlen(text));
    free(text);
    assert_int_equal(tm_agent_hostfile_text(&none, &text, &len), TM_EINVAL);

    a.assignments[0].hostfile = "/w/jobs/7-2/hostfile";
    assert_int_equal(tm_agent_container_command("docker run -v {hostfile}:{hostfile}:ro -- {image}",
                                                &a.assignments[0], NULL, 0, NULL, &cmd),
                     0);
    assert_string_equal(cmd, "docker run -v '/w/jobs/7-2/hostfile':'/w/jobs/7-2/hostfile':ro -- 'pytorch:2'");
    free(cmd);
    a.assignments[0].hostfile = NULL;
    assert_int_equal(tm_agent_container_command("x {hostfile} y", &a.assignments[0], NULL, 0, NULL, &cmd), 0);
    assert_string_equal(cmd, "x  y");
    free(cmd);
    tm_agent_answer_release(&a);
}

static void test_address(void **state)
{
    struct tm_spec_error err = {0};
    const char *secret, *address;
    cJSON *root = NULL;
    int64_t node;
    char *b;

    (void)state;
    assert_true(tm_ip_address_ok("10.0.0.5"));
    assert_true(tm_ip_address_ok("127.0.0.1"));
    assert_true(tm_ip_address_ok("fd00::7"));
    assert_true(tm_ip_address_ok("::1"));
    assert_false(tm_ip_address_ok(""));
    assert_false(tm_ip_address_ok(NULL));
    assert_false(tm_ip_address_ok("node-1.example"));
    assert_false(tm_ip_address_ok("10.0.0"));
    assert_false(tm_ip_address_ok("10.0.0.256"));
    assert_false(tm_ip_address_ok(" 10.0.0.5"));
    assert_false(tm_ip_address_ok("10.0.0.5:29500"));
    assert_false(tm_ip_address_ok("fd00::7%eth0"));

    b = tm_agent_body_enroll(4, "tme_s", "10.0.0.5");
    assert_string_equal(b, "{\"node_id\":4,\"secret\":\"tme_s\",\"address\":\"10.0.0.5\"}");
    assert_int_equal(tm_api_parse_enroll(b, strlen(b), &node, &secret, &address, &root, &err), 0);
    assert_int_equal(node, 4);
    assert_string_equal(address, "10.0.0.5");
    cJSON_Delete(root);
    free(b);
    b = tm_agent_body_enroll(4, "tme_s", NULL);
    assert_string_equal(b, "{\"node_id\":4,\"secret\":\"tme_s\"}");
    assert_int_equal(tm_api_parse_enroll(b, strlen(b), &node, &secret, &address, &root, &err), 0);
    assert_null(address);
    cJSON_Delete(root);
    free(b);
    assert_int_equal(tm_api_parse_enroll(S("{\"node_id\":4,\"secret\":\"tme_s\",\"address\":\"node-4\"}"), &node,
                                         &secret, &address, &root, &err),
                     TM_EINVAL);
    assert_string_equal(err.field, "address");
    assert_int_equal(tm_api_parse_enroll(S("{\"node_id\":4,\"secret\":\"tme_s\",\"address\":5}"), &node, &secret,
                                         &address, &root, &err),
                     TM_EINVAL);
    assert_string_equal(err.field, "address");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse),    cmocka_unit_test(test_parse_bad), cmocka_unit_test(test_stops),
        cmocka_unit_test(test_env),
        cmocka_unit_test(test_hostfile), cmocka_unit_test(test_address),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
