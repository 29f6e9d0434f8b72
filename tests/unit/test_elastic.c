/* tests/unit/test_elastic.c: the elastic replay end to end on small
 * synthetic traces.  Run with arguments "replay --elastic ..." it is the
 * elastic replay's command line (bench/run-elastic.sh). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "controller/elastic.h"
#include "core/err.h"

static void test_placeholder(void **state)
{
    (void)state;
    assert_int_equal(tm_elastic_policy_parse("tarmac"), TM_ELASTIC_TARMAC);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_placeholder),
    };
    if (argc > 1 && strcmp(argv[1], "replay") == 0)
        return tm_elastic_main(argc - 1, argv + 1);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
