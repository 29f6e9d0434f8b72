/*
 * tests/unit/agent/test_job_uid.c: two agents on one host (the local
 * provider runs every node's agent here) never give one UID to two jobs,
 * although a UID whose job has not started yet, or has just ended, has no
 * process for either to see: the UID's lock decides (job_user.c).  Needs
 * root (the locks live in /run/tarmac); skipped otherwise.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "controller/agent/internal.h"
#include "core/err.h"

/* A UID no process of this machine's tests holds. */
#define UID 79987u

static struct tm_agent *agent(void)
{
    struct tm_agent *ag = calloc(1, sizeof(*ag));

    assert_non_null(ag);
    ag->switch_users = true;
    ag->o.job_uid_first = UID;
    ag->o.job_uid_last = UID;
    ag->uid_next = UID;
    return ag;
}

static void test_one_uid_per_host(void **state)
{
    struct tm_agent *a = agent(), *b = agent();
    uint32_t ua = 0, ub = 0;
    int la = -1, lb = -1;

    (void)state;
    if (geteuid() != 0)
        skip();
    assert_true(mkdir("/run/tarmac", 0755) == 0 || errno == EEXIST);
    assert_true(mkdir("/run/tarmac/job-uids", 0700) == 0 || errno == EEXIST);
    assert_int_equal(tm_agent_job_uid_pick(a, &ua, &la), 0);
    assert_int_equal(ua, UID);
    assert_true(la >= 0);
    /* The other agent's job would start as the same UID: refused while
     * the first holds it, however briefly no process runs as it. */
    assert_int_equal(tm_agent_job_uid_pick(b, &ub, &lb), TM_EQUOTA);
    close(la);
    assert_int_equal(tm_agent_job_uid_pick(b, &ub, &lb), 0);
    assert_int_equal(ub, UID);
    close(lb);
    free(a);
    free(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_one_uid_per_host)};

    return cmocka_run_group_tests(tests, NULL, NULL);
}
