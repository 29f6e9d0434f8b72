/* tests/unit/providers/common/test_launch_set.c: a gang's set launched one
 * by one and released whole (providers/common/launch_set.c), against a
 * fake provider whose callbacks the test fires by hand; and the member
 * tokens that tie a set's node rows together. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "core/err.h"
#include "providers/provider.h"

/* ---- a fake provider: calls queue up, the test answers them ------------- */

struct pending {
    bool launch;
    struct tm_instance inst;   /* launch: what it makes */
    char id[TM_ID_MAX];        /* terminate: which */
    tm_launch_cb lcb;
    tm_done_cb dcb;
    void *data;
};

static struct pending q[32];
static size_t nq, qhead;
static int fail_member = -1;   /* this member's launch is refused for capacity */
static unsigned launches, made;
static char zones_asked[8][TM_ID_MAX];
static char terminated[8][TM_ID_MAX];
static size_t nterminated;

static int fake_launch(struct tm_provider *p, const struct tm_launch_request *req, tm_launch_cb cb,
                       void *data)
{
    struct pending *x = &q[nq++];
    (void)p;
    memset(x, 0, sizeof(*x));
    x->launch = true;
    x->lcb = cb;
    x->data = data;
    snprintf(zones_asked[launches], TM_ID_MAX, "%s", req->zone ? req->zone : "");
    if ((int)launches == fail_member) {
        x->inst.id[0] = '\0'; /* refused: answered with TM_EQUOTA */
    } else {
        snprintf(x->inst.id, sizeof(x->inst.id), "i-%u", launches);
        snprintf(x->inst.token, sizeof(x->inst.token), "%s", req->token);
        /* the cloud picks zone b when asked for none */
        snprintf(x->inst.zone, sizeof(x->inst.zone), "%s", req->zone && req->zone[0] ? req->zone : "b");
        x->inst.node_id = req->node_id;
    }
    launches++;
    return 0;
}

static int fake_terminate(struct tm_provider *p, const char *id, tm_done_cb cb, void *data)
{
    struct pending *x = &q[nq++];
    (void)p;
    memset(x, 0, sizeof(*x));
    snprintf(x->id, sizeof(x->id), "%s", id);
    x->dcb = cb;
    x->data = data;
    return 0;
}

static const struct tm_provider_ops fake_ops = {
    .name = "fake", .launch = fake_launch, .terminate = fake_terminate,
};

static void run_queue(void)
{
    while (qhead < nq) {
        struct pending *x = &q[qhead++];
        if (x->launch && x->inst.id[0]) {
            made++;
            x->lcb(0, &x->inst, x->data);
        } else if (x->launch) {
            x->lcb(TM_EQUOTA, NULL, x->data);
        } else {
            snprintf(terminated[nterminated++], TM_ID_MAX, "%s", x->id);
            x->dcb(0, x->data);
        }
    }
}

static int got_status = 1;
static size_t got_n, got_calls, got_after_terminates;
static struct tm_instance got[8];

static void on_set(int status, const struct tm_instance *insts, size_t n, void *data)
{
    (void)data;
    got_status = status;
    got_n = n;
    got_calls++;
    got_after_terminates = nterminated;
    for (size_t i = 0; i < n && i < 8; i++)
        got[i] = insts[i];
}

static int reset(void **state)
{
    (void)state;
    nq = qhead = 0;
    fail_member = -1;
    launches = made = 0;
    nterminated = 0;
    got_status = 1;
    got_n = got_calls = got_after_terminates = 0;
    return 0;
}

static void three_requests(struct tm_launch_request r[3], char tokens[3][TM_ID_MAX])
{
    for (unsigned k = 0; k < 3; k++) {
        tm_launch_member_token("c-p-1000-4", k, tokens[k]);
        r[k] = (struct tm_launch_request){.cluster = "c", .pool = "p", .node_id = 10 + k,
                                          .token = tokens[k], .instance_type = "g4", .zone = "",
                                          .capacity = TM_CAPACITY_ON_DEMAND};
    }
}

/* Every member made: one callback with all three, in request order, all in
 * the zone the cloud gave the first (the others were asked for it). */
static void test_set_whole(void **state)
{
    struct tm_provider p = {.ops = &fake_ops};
    struct tm_launch_request r[3];
    char tokens[3][TM_ID_MAX];
    (void)state;

    three_requests(r, tokens);
    struct tm_launch_set set = {.reqs = r, .n = 3, .set_token = "c-p-1000-4"};
    assert_int_equal(tm_provider_launch_set_each(&p, &set, on_set, NULL), 0);
    assert_int_equal(got_calls, 0); /* never from inside the call */
    run_queue();
    assert_int_equal(got_calls, 1);
    assert_int_equal(got_status, 0);
    assert_int_equal(got_n, 3);
    for (int k = 0; k < 3; k++) {
        assert_int_equal(got[k].node_id, 10 + k);
        assert_string_equal(got[k].token, tokens[k]);
        assert_string_equal(got[k].zone, "b");
    }
    assert_string_equal(zones_asked[0], "");
    assert_string_equal(zones_asked[1], "b");
    assert_string_equal(zones_asked[2], "b");
    assert_int_equal(nterminated, 0);
}

/* The third member refused for capacity: the two made are terminated, and
 * only then is the caller told TM_EQUOTA, with no instance. */
static void test_set_released_whole(void **state)
{
    struct tm_provider p = {.ops = &fake_ops};
    struct tm_launch_request r[3];
    char tokens[3][TM_ID_MAX];
    (void)state;

    fail_member = 2;
    three_requests(r, tokens);
    struct tm_launch_set set = {.reqs = r, .n = 3, .set_token = "c-p-1000-4"};
    assert_int_equal(tm_provider_launch_set_each(&p, &set, on_set, NULL), 0);
    run_queue();
    assert_int_equal(got_calls, 1);
    assert_int_equal(got_status, TM_EQUOTA);
    assert_int_equal(got_n, 0);
    assert_int_equal(made, 2);
    assert_int_equal(nterminated, 2);
    assert_string_equal(terminated[0], "i-0");
    assert_string_equal(terminated[1], "i-1");
    assert_int_equal(got_after_terminates, 2);
}

/* The first member refused: nothing to release, the error at once after. */
static void test_set_first_refused(void **state)
{
    struct tm_provider p = {.ops = &fake_ops};
    struct tm_launch_request r[3];
    char tokens[3][TM_ID_MAX];
    (void)state;

    fail_member = 0;
    three_requests(r, tokens);
    struct tm_launch_set set = {.reqs = r, .n = 3, .set_token = "c-p-1000-4"};
    assert_int_equal(tm_provider_launch_set_each(&p, &set, on_set, NULL), 0);
    run_queue();
    assert_int_equal(got_status, TM_EQUOTA);
    assert_int_equal(launches, 1);
    assert_int_equal(nterminated, 0);
    assert_int_equal(tm_provider_launch_set_each(&p, &(struct tm_launch_set){.n = 0}, on_set, NULL),
                     TM_EINVAL);
}

/* Member tokens: the stem comes back from each; a single launch's token
 * has none; truncation keeps every member's stem the same. */
static void test_member_tokens(void **state)
{
    char tok[TM_ID_MAX], key[TM_ID_MAX], key2[TM_ID_MAX];
    char longset[TM_ID_MAX];
    (void)state;

    tm_launch_member_token("c-p-1000-4", 2, tok);
    assert_string_equal(tok, "c-p-1000-4g002");
    tm_launch_set_key(tok, key);
    assert_string_equal(key, "c-p-1000-4");
    tm_launch_set_key("c-p-1000-4", key);
    assert_string_equal(key, "");
    tm_launch_set_key("c-gpu-big-1000-4123", key);
    assert_string_equal(key, "");
    tm_launch_set_key("", key);
    assert_string_equal(key, "");
    memset(longset, 'x', sizeof(longset) - 3);
    snprintf(longset + sizeof(longset) - 3, 3, "-7");
    tm_launch_member_token(longset, 0, tok);
    assert_int_equal(strlen(tok), TM_ID_MAX - 1);
    tm_launch_set_key(tok, key);
    tm_launch_member_token(longset, 11, tok);
    tm_launch_set_key(tok, key2);
    assert_true(key[0] != '\0');
    assert_string_equal(key, key2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_set_whole, reset),
        cmocka_unit_test_setup(test_set_released_whole, reset),
        cmocka_unit_test_setup(test_set_first_refused, reset),
        cmocka_unit_test(test_member_tokens),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
