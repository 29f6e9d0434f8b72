/* tests/unit/providers/common/test_launch_engine.c: the launch engine
 * (providers/common/launch.c) against a table-driven fake cloud.
 *
 * The fake cloud is a table of cells (zone, market) and what each does
 * with a create: make the instance, refuse it for capacity, lose the
 * answer (having made the instance or not), or refuse it for good.  It
 * remembers what it made, by token, and answers a find from that, as a
 * real cloud's listing by tag would.  Calls queue up and the test answers
 * them from the queue, so nothing is answered inside the call that made
 * it; each call is written to a trace the tests compare whole.  A second
 * table has no find: its create answers what the token made, as the sim's
 * does. */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "core/err.h"
#include "providers/common/launch.h"
#include "providers/common/retry.h"
#include "providers/provider.h"

/* ---- the fake cloud ----------------------------------------------------- */

enum behaviour {
    MAKE,       /* made, answered */
    SHORT,      /* no capacity */
    LOST_MADE,  /* made, the answer lost (a reset) */
    LOST,       /* not made, the answer lost */
    REFUSE,     /* refused for good (credentials) */
};

struct cell {
    const char *zone;
    enum tm_capacity_type capacity;
    enum behaviour does;
    int makes;                 /* MAKE: this many times, then SHORT; 0 = always */
};

#define CELLS_MAX 8
#define MADE_MAX 16
#define QUEUE_MAX 64

static struct cell cells[CELLS_MAX];
static size_t ncells;
static struct tm_instance made[MADE_MAX];
static size_t nmade;
static char trace[1024];

enum call { FIND, CREATE, TERMINATE };

struct pending {
    enum call call;
    struct tm_launch *l;
    size_t offer;
    bool own;                  /* a create that finds by token itself */
    char id[TM_ID_MAX];
    tm_done_cb dcb;
    void *data;
};

static struct pending q[QUEUE_MAX];
static size_t nq, qhead;

static void note(const char *fmt, ...)
{
    size_t n = strlen(trace);
    va_list ap;

    if (n && n < sizeof(trace) - 1)
        trace[n++] = ' ';
    va_start(ap, fmt);
    vsnprintf(trace + n, sizeof(trace) - n, fmt, ap);
    va_end(ap);
}

static struct cell *cell_of(const char *zone, enum tm_capacity_type capacity)
{
    for (size_t i = 0; i < ncells; i++)
        if (strcmp(cells[i].zone, zone) == 0 && cells[i].capacity == capacity)
            return &cells[i];
    return NULL;
}

static const struct tm_instance *made_by_token(const char *token)
{
    for (size_t i = 0; i < nmade; i++)
        if (strcmp(made[i].token, token) == 0)
            return &made[i];
    return NULL;
}

static const struct tm_instance *make(const struct tm_launch *l, const struct tm_launch_offer *o)
{
    struct tm_instance *x = &made[nmade];

    memset(x, 0, sizeof(*x));
    snprintf(x->id, sizeof(x->id), "i-%zu", nmade);
    tm_id_copy(x->token, l->token);
    tm_id_copy(x->pool, l->pool);
    tm_id_copy(x->instance_type, o->type);
    tm_id_copy(x->zone, o->zone);
    x->node_id = l->node_id;
    x->capacity = o->capacity;
    x->state = TM_INSTANCE_PENDING;
    nmade++;
    return x;
}

static int fake_find(struct tm_launch *l)
{
    q[nq++] = (struct pending){.call = FIND, .l = l};
    return 0;
}

static int fake_create(struct tm_launch *l, size_t i)
{
    q[nq++] = (struct pending){.call = CREATE, .l = l, .offer = i};
    return 0;
}

static int create_fails; /* what a create that cannot start returns */

static int fake_create_own(struct tm_launch *l, size_t i)
{
    if (create_fails)
        return create_fails;
    q[nq++] = (struct pending){.call = CREATE, .l = l, .offer = i, .own = true};
    return 0;
}

static const char *market(enum tm_capacity_type c)
{
    return c == TM_CAPACITY_SPOT ? "spot" : "od";
}

static void answer(struct pending *x)
{
    const struct tm_launch_offer *o;
    struct cell *c;

    if (x->call == TERMINATE) {
        note("terminate:%s", x->id);
        x->dcb(0, x->data);
        return;
    }
    if (x->call == FIND) {
        note("find");
        tm_launch_found(x->l, 0, made_by_token(x->l->token));
        return;
    }
    o = &x->l->offers[x->offer];
    note("create:%s/%s", o->zone, market(o->capacity));
    if (x->own && made_by_token(x->l->token)) {
        tm_launch_made(x->l, TM_LAUNCH_OK, 0, made_by_token(x->l->token), NULL);
        return;
    }
    c = cell_of(o->zone, o->capacity);
    if (!c || (c->does == MAKE && c->makes < 0)) {
        tm_launch_made(x->l, TM_LAUNCH_SHORT, TM_EQUOTA, NULL, "NoCapacity");
        return;
    }
    switch (c->does) {
    case MAKE:
        if (c->makes > 0 && --c->makes == 0)
            c->makes = -1; /* the last one it had */
        tm_launch_made(x->l, TM_LAUNCH_OK, 0, make(x->l, o), NULL);
        return;
    case SHORT:
        tm_launch_made(x->l, TM_LAUNCH_SHORT, TM_EQUOTA, NULL, "NoCapacity");
        return;
    case LOST_MADE:
        make(x->l, o);
        c->does = MAKE; /* the next ask would be answered */
        tm_launch_made(x->l, TM_LAUNCH_AMBIGUOUS, -ECONNRESET, NULL, NULL);
        return;
    case LOST:
        tm_launch_made(x->l, TM_LAUNCH_AMBIGUOUS, -ETIMEDOUT, NULL, NULL);
        return;
    case REFUSE:
        tm_launch_made(x->l, TM_LAUNCH_FATAL, TM_EAUTH, NULL, NULL);
        return;
    }
}

static void run_queue(void)
{
    while (qhead < nq)
        answer(&q[qhead++]);
}

static const struct tm_launch_backend fake_backend = {
    .cloud = "fake",
    .found_by = "token",
    .find = fake_find,
    .create = fake_create,
};

static const struct tm_launch_backend own_backend = {
    .cloud = "own",
    .create = fake_create_own,
};

/* ---- the provider over it ------------------------------------------------ */

static uint64_t clock_ms = 1000;

static uint64_t fake_now(void *clock)
{
    return *(uint64_t *)clock;
}

static struct tm_shortages shorts;
static char *zones_ab[] = {"a", "b"};
static struct tm_provider_pool pool = {.name = "p", .zones = zones_ab, .nzones = 2};
static bool closing;
static struct tm_launch_env env;

static int fake_launch(struct tm_provider *p, const struct tm_launch_request *req,
                       tm_launch_cb cb, void *data)
{
    (void)p;
    return tm_launch_start(&env, &fake_backend, req, cb, data);
}

static int fake_terminate(struct tm_provider *p, const char *id, tm_done_cb cb, void *data)
{
    struct pending *x = &q[nq++];

    (void)p;
    *x = (struct pending){.call = TERMINATE, .dcb = cb, .data = data};
    tm_id_copy(x->id, id);
    return 0;
}

static const struct tm_provider_ops fake_ops = {
    .name = "fake", .launch = fake_launch, .terminate = fake_terminate,
};
static struct tm_provider provider = {.ops = &fake_ops};

static int got_status, got_calls;
static struct tm_instance got;

static void on_launch(int status, const struct tm_instance *inst, void *data)
{
    (void)data;
    got_status = status;
    got_calls++;
    memset(&got, 0, sizeof(got));
    if (inst)
        got = *inst;
}

static int setup(void **state)
{
    (void)state;
    memset(cells, 0, sizeof(cells));
    ncells = nmade = nq = qhead = 0;
    trace[0] = '\0';
    closing = false;
    got_status = 1;
    got_calls = 0;
    create_fails = 0;
    tm_shortages_init(&shorts, "fake", "type", "f1", 0);
    env = (struct tm_launch_env){
        .now_ms = fake_now, .clock = &clock_ms, .name = "f1", .cluster = "c", .shorts = &shorts,
        .pools = &pool, .npools = 1, .max_relaunch = 3, .closing = &closing,
    };
    return 0;
}

static void cloud(const struct cell *table, size_t n)
{
    memcpy(cells, table, n * sizeof(*table));
    ncells = n;
}

static int launch_on(const struct tm_launch_backend *be, const char *token,
                     enum tm_capacity_type capacity)
{
    struct tm_launch_request req = {.cluster = "c", .pool = "p", .node_id = 7, .token = token,
                                    .instance_type = "g8", .zone = "", .capacity = capacity};

    return tm_launch_start(&env, be, &req, on_launch, NULL);
}

static int launch(const char *token, enum tm_capacity_type capacity)
{
    return launch_on(&fake_backend, token, capacity);
}

/* ---- the cases ---------------------------------------------------------- */

/* A cell short of capacity: remembered, the next offer tried; the next
 * launch skips the short cell from the start. */
static void test_shortage_next_offer(void **state)
{
    static const struct cell table[] = {
        {"a", TM_CAPACITY_SPOT, SHORT, 0},
        {"b", TM_CAPACITY_SPOT, MAKE, 0},
    };
    (void)state;

    cloud(table, 2);
    assert_int_equal(launch("t1", TM_CAPACITY_SPOT_THEN_ON_DEMAND), 0);
    assert_int_equal(got_calls, 0); /* never from inside the call */
    run_queue();
    assert_string_equal(trace, "find create:a/spot create:b/spot");
    assert_int_equal(got_calls, 1);
    assert_int_equal(got_status, 0);
    assert_string_equal(got.zone, "b");
    assert_string_equal(got.token, "t1");
    assert_true(tm_launch_is_short(&env, "g8", "a", TM_CAPACITY_SPOT));
    assert_false(tm_launch_is_short(&env, "g8", "b", TM_CAPACITY_SPOT));

    trace[0] = '\0';
    assert_int_equal(launch("t2", TM_CAPACITY_SPOT), 0);
    run_queue();
    assert_string_equal(trace, "find create:b/spot");
    assert_int_equal(got_status, 0);
}

/* Spot short everywhere: on demand next, as spot_then_on_demand allows;
 * spot alone fails with TM_EQUOTA once every offer is spent. */
static void test_spot_then_on_demand(void **state)
{
    static const struct cell table[] = {
        {"a", TM_CAPACITY_SPOT, SHORT, 0},
        {"b", TM_CAPACITY_SPOT, SHORT, 0},
        {"a", TM_CAPACITY_ON_DEMAND, MAKE, 0},
    };
    (void)state;

    cloud(table, 3);
    assert_int_equal(launch("t1", TM_CAPACITY_SPOT_THEN_ON_DEMAND), 0);
    run_queue();
    assert_string_equal(trace, "find create:a/spot create:b/spot create:a/od");
    assert_int_equal(got_status, 0);
    assert_int_equal(got.capacity, TM_CAPACITY_ON_DEMAND);

    /* Every spot cell remembered short: no create at all. */
    trace[0] = '\0';
    assert_int_equal(launch("t2", TM_CAPACITY_SPOT), 0);
    run_queue();
    assert_string_equal(trace, "find");
    assert_int_equal(got_status, TM_EQUOTA);
}

/* The answer lost after the cloud made it: the engine looks by token and
 * adopts what it finds instead of buying a second instance. */
static void test_ambiguous_find_then_adopt(void **state)
{
    static const struct cell table[] = {{"a", TM_CAPACITY_ON_DEMAND, LOST_MADE, 0}};
    (void)state;

    cloud(table, 1);
    assert_int_equal(launch("t1", TM_CAPACITY_ON_DEMAND), 0);
    run_queue();
    assert_string_equal(trace, "find create:a/od find");
    assert_int_equal(got_status, 0);
    assert_string_equal(got.id, "i-0");
    assert_int_equal(nmade, 1);
}

/* After a crash the same token comes back: found, no create. */
static void test_adopt_after_crash(void **state)
{
    static const struct cell table[] = {{"a", TM_CAPACITY_ON_DEMAND, MAKE, 0}};
    struct tm_launch_offer o = {.type = "g8", .zone = "a", .capacity = TM_CAPACITY_ON_DEMAND};
    struct tm_launch l = {.token = "t1", .pool = "p", .node_id = 7};
    (void)state;

    cloud(table, 1);
    make(&l, &o); /* what the controller that died had made */
    assert_int_equal(launch("t1", TM_CAPACITY_ON_DEMAND), 0);
    run_queue();
    assert_string_equal(trace, "find");
    assert_int_equal(got_status, 0);
    assert_string_equal(got.id, "i-0");
    assert_int_equal(nmade, 1);
}

/* Refused for good: the launch fails with the cloud's status, and no other
 * offer is tried. */
static void test_fatal_fails(void **state)
{
    static const struct cell table[] = {
        {"a", TM_CAPACITY_ON_DEMAND, REFUSE, 0},
        {"b", TM_CAPACITY_ON_DEMAND, MAKE, 0},
    };
    (void)state;

    cloud(table, 2);
    assert_int_equal(launch("t1", TM_CAPACITY_ON_DEMAND), 0);
    run_queue();
    assert_string_equal(trace, "find create:a/od");
    assert_int_equal(got_calls, 1);
    assert_int_equal(got_status, TM_EAUTH);
    assert_int_equal(nmade, 0);
}

/* A cloud without a find, no pools and no shortage memory (the sim): one
 * offer, the request's zone ("" lets the cloud pick), created from inside
 * the start and answered from the queue; a lost answer asks the same
 * again and gets what the token made; a refusal for capacity is the
 * launch's and is not remembered; a create that cannot start is returned
 * and never answered. */
static void test_create_finds_itself(void **state)
{
    static const struct cell table[] = {
        {"", TM_CAPACITY_ON_DEMAND, LOST_MADE, 0},
        {"", TM_CAPACITY_SPOT, SHORT, 0},
    };
    (void)state;

    cloud(table, 2);
    env.shorts = NULL;
    env.pools = NULL;
    env.npools = 0;
    assert_int_equal(launch_on(&own_backend, "t1", TM_CAPACITY_ON_DEMAND), 0);
    assert_int_equal(got_calls, 0);
    run_queue();
    assert_string_equal(trace, "create:/od create:/od");
    assert_int_equal(got_calls, 1);
    assert_int_equal(got_status, 0);
    assert_string_equal(got.id, "i-0");
    assert_int_equal(nmade, 1);

    trace[0] = '\0';
    assert_int_equal(launch_on(&own_backend, "t2", TM_CAPACITY_SPOT), 0);
    run_queue();
    assert_int_equal(got_status, TM_EQUOTA);
    assert_false(tm_launch_is_short(&env, "g8", "", TM_CAPACITY_SPOT));
    assert_int_equal(launch_on(&own_backend, "t3", TM_CAPACITY_SPOT), 0);
    run_queue();
    assert_string_equal(trace, "create:/spot create:/spot");

    got_calls = 0;
    create_fails = TM_ENOMEM;
    assert_int_equal(launch_on(&own_backend, "t4", TM_CAPACITY_ON_DEMAND), TM_ENOMEM);
    run_queue();
    assert_int_equal(got_calls, 0);
    assert_null(env.launching);
}

/* Answers lost again and again: max_relaunch finds, then the last error. */
static void test_relaunch_budget(void **state)
{
    static const struct cell table[] = {{"a", TM_CAPACITY_ON_DEMAND, LOST, 0}};
    (void)state;

    cloud(table, 1);
    assert_int_equal(launch("t1", TM_CAPACITY_ON_DEMAND), 0);
    run_queue();
    assert_string_equal(trace, "find create:a/od find create:a/od find create:a/od");
    assert_int_equal(got_calls, 1);
    assert_int_equal(got_status, -ETIMEDOUT);
}

/* One call's retry budget: Retry-After is honoured while it fits, refused
 * when it asks for more than is left, the backoff cut to what is left,
 * and the attempts bound it all. */
static void test_retry_budget_retry_after(void **state)
{
    struct tm_retry_budget b = {.max_attempts = 4, .max_total_delay_ms = 1000};
    uint64_t wait = 0, rng = 7;
    (void)state;

    assert_true(tm_retry_next(&b, 1, 0, 300, 50, &wait));
    assert_int_equal(wait, 300);                   /* the server's, not ours */
    assert_false(tm_retry_next(&b, 2, 300, 800, 50, &wait)); /* 700 left */
    assert_true(tm_retry_next(&b, 2, 300, 0, 900, &wait));
    assert_int_equal(wait, 700);                   /* cut to what is left */
    assert_false(tm_retry_next(&b, 3, 1000, 0, 10, &wait)); /* sleep spent */
    assert_false(tm_retry_next(&b, 4, 0, 0, 10, &wait));    /* attempts spent */
    assert_int_equal(tm_retry_after_ms("2", 0), 2000);
    assert_int_equal(tm_retry_after_ms("Thu, 01 Jan 1970 00:00:40 GMT", 10), 30000);
    assert_int_equal(tm_retry_after_ms("soon", 0), 0);
    for (int i = 0; i < 1000; i++) {
        assert_true(tm_retry_backoff_ms(100, 1000, 1, &rng) <= 100);
        assert_true(tm_retry_backoff_ms(100, 1000, 3, &rng) <= 400);
        assert_true(tm_retry_backoff_ms(100, 1000, 30, &rng) <= 1000);
    }
}

static int close_step, freed_at, done_at;

static void fake_free(void *p)
{
    (void)p;
    freed_at = ++close_step;
}

static void close_done(void *data)
{
    (void)data;
    done_at = ++close_step;
}

/* The auth gate: closed by a refusal, it holds calls back for the
 * cool-down; then one call probes and the cool-down restarts for the
 * others; an answer opens it. */
static void test_auth_gate(void **state)
{
    struct tm_auth_gate g = {.cooldown_ms = 100};
    (void)state;

    assert_true(tm_auth_gate_pass(&g, 0));
    assert_true(tm_auth_gate_close(&g, 10));   /* was open: log it */
    assert_false(tm_auth_gate_close(&g, 20));  /* already closed: once */
    assert_true(tm_auth_gate_holds(&g, 50));
    assert_false(tm_auth_gate_pass(&g, 50));
    assert_false(tm_auth_gate_holds(&g, 120));
    assert_true(tm_auth_gate_pass(&g, 120));   /* the probe */
    assert_false(tm_auth_gate_pass(&g, 121));  /* the others wait */
    tm_auth_gate_open(&g);
    assert_true(tm_auth_gate_pass(&g, 122));
}

/* A launch in flight when the provider closes: TM_ECANCELED, and a new
 * launch is refused at once.  The close is started once; when the client
 * is closed the provider is freed, then the caller told. */
static void test_closing(void **state)
{
    static const struct cell table[] = {{"a", TM_CAPACITY_ON_DEMAND, MAKE, 0}};
    (void)state;

    cloud(table, 1);
    assert_int_equal(launch("t1", TM_CAPACITY_ON_DEMAND), 0);
    closing = true;
    run_queue();
    assert_int_equal(got_status, TM_ECANCELED);
    assert_int_equal(launch("t2", TM_CAPACITY_ON_DEMAND), TM_ECANCELED);
    assert_int_equal(launch("", TM_CAPACITY_ON_DEMAND), TM_EINVAL);
    assert_null(env.launching); /* nothing left in flight */

    closing = false;
    close_step = freed_at = done_at = 0;
    env.free_provider = fake_free;
    assert_true(tm_launch_env_close(&env, close_done, NULL));
    assert_true(closing);
    assert_false(tm_launch_env_close(&env, close_done, NULL));
    tm_launch_env_closed(&env);
    assert_int_equal(freed_at, 1);
    assert_int_equal(done_at, 2);
}

/* ---- gangs: a launch set over the engine, all or nothing ----------------- */

static int set_status = 1;
static size_t set_n, set_calls;

static void on_set(int status, const struct tm_instance *insts, size_t n, void *data)
{
    (void)insts;
    (void)data;
    set_status = status;
    set_n = n;
    set_calls++;
}

static void launch_set3(const char *stem)
{
    struct tm_launch_request r[3];
    char tokens[3][TM_ID_MAX];

    set_status = 1;
    set_n = set_calls = 0;
    for (unsigned k = 0; k < 3; k++) {
        tm_launch_member_token(stem, k, tokens[k]);
        r[k] = (struct tm_launch_request){.cluster = "c", .pool = "p", .node_id = 10 + k,
                                          .token = tokens[k], .instance_type = "g8", .zone = "",
                                          .capacity = TM_CAPACITY_ON_DEMAND};
    }
    struct tm_launch_set set = {.reqs = r, .n = 3, .set_token = stem};
    assert_int_equal(tm_provider_launch_set_each(&provider, &set, on_set, NULL), 0);
    run_queue();
}

/* Zone a holds two more nodes: the third member finds no offer in the
 * set's zone, and the two made are terminated before the set is reported
 * short.  With room for three, the set is made whole in one zone. */
static void test_gang_all_or_nothing(void **state)
{
    static const struct cell table[] = {
        {"a", TM_CAPACITY_ON_DEMAND, MAKE, 2},
        {"b", TM_CAPACITY_ON_DEMAND, MAKE, 0},
    };
    (void)state;

    cloud(table, 2);
    launch_set3("c-p-1-3");
    assert_int_equal(set_calls, 1);
    assert_int_equal(set_status, TM_EQUOTA);
    assert_int_equal(set_n, 0);
    assert_non_null(strstr(trace, "terminate:i-0"));
    assert_non_null(strstr(trace, "terminate:i-1"));
    assert_null(strstr(trace, "create:b/od")); /* never split over zones */

    /* Zone a now remembered short: the next set goes whole to b. */
    trace[0] = '\0';
    launch_set3("c-p-2-3");
    assert_int_equal(set_status, 0);
    assert_int_equal(set_n, 3);
    assert_null(strstr(trace, "create:a/od"));
    assert_null(strstr(trace, "terminate"));
}

/* The rules every cloud holds a set to before it launches anything. */
static void test_set_valid(void **state)
{
    struct tm_launch_request r[2] = {
        {.cluster = "c", .pool = "p", .node_id = 1, .token = "sg000", .instance_type = "g8",
         .zone = ""},
        {.cluster = "c", .pool = "p", .node_id = 2, .token = "sg001", .instance_type = "g8",
         .zone = ""},
    };
    struct tm_launch_set set = {.reqs = r, .n = 2, .set_token = "s"};
    (void)state;

    assert_true(tm_launch_set_valid(&set, "c", 8));
    assert_false(tm_launch_set_valid(&set, "c", 1));     /* too many */
    assert_false(tm_launch_set_valid(&set, "other", 8)); /* not this cluster's */
    r[1].pool = "q";
    assert_false(tm_launch_set_valid(&set, "c", 8));     /* two pools */
    r[1].pool = "p";
    r[1].token = "";
    assert_false(tm_launch_set_valid(&set, "c", 8));     /* a member without a token */
    r[1].token = "sg001";
    set.set_token = "";
    assert_false(tm_launch_set_valid(&set, "c", 8));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_shortage_next_offer, setup),
        cmocka_unit_test_setup(test_spot_then_on_demand, setup),
        cmocka_unit_test_setup(test_ambiguous_find_then_adopt, setup),
        cmocka_unit_test_setup(test_adopt_after_crash, setup),
        cmocka_unit_test_setup(test_fatal_fails, setup),
        cmocka_unit_test_setup(test_create_finds_itself, setup),
        cmocka_unit_test_setup(test_relaunch_budget, setup),
        cmocka_unit_test_setup(test_retry_budget_retry_after, setup),
        cmocka_unit_test_setup(test_auth_gate, setup),
        cmocka_unit_test_setup(test_closing, setup),
        cmocka_unit_test_setup(test_gang_all_or_nothing, setup),
        cmocka_unit_test_setup(test_set_valid, setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
