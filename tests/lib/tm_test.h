/*
 * tests/lib/tm_test.h: small helpers shared by the C tests.
 *
 * tm_test_db_url(name) creates a fresh database in the run's throwaway
 * cluster (see pg_cluster.sh) and returns its URL (static buffer), or NULL
 * with a message when the cluster is not up.  Use it from tests carrying the
 * FIXTURES pg property.
 */
#ifndef TM_TEST_H
#define TM_TEST_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static inline const char *tm_test_db_url(const char *name)
{
    static char url[512];
    char cmd[1024];
    const char *src = getenv("TM_SOURCE_DIR");
    FILE *p;

    if (!src || !getenv("TM_TEST_STATE")) {
        fprintf(stderr, "tm_test: TM_SOURCE_DIR/TM_TEST_STATE unset; run through ctest\n");
        return NULL;
    }
    snprintf(cmd, sizeof(cmd), "%s/tests/lib/pg_newdb.sh '%s'", src, name);
    p = popen(cmd, "r");
    if (!p)
        return NULL;
    if (!fgets(url, sizeof(url), p)) {
        pclose(p);
        return NULL;
    }
    if (pclose(p) != 0)
        return NULL;
    url[strcspn(url, "\n")] = '\0';
    return url;
}

#endif
