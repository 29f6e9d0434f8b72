/*
 * controller/api/decisions.c: GET /v1/decisions, the log of what the controller
 * decided and why.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <libpq-fe.h>

#include "controller/api/internal.h"
#include "controller/api/request.h"
#include "controller/api/resources.h"
#include "controller/api/rows.h"
#include "controller/spec/api_body.h"
#include "core/err.h"
#include "core/log.h"
#include "core/model.h"


/* ---- decisions ------------------------------------------------------------ */

static const char *const subject_kinds[] = {"job", "node", "pool", "instance", "budget",
                                            "provider", "quota"};

static bool printable(const char *s, size_t max)
{
    size_t n = strlen(s);

    if (n == 0 || n > max)
        return false;
    for (; *s; s++)
        if ((unsigned char)*s < ' ' || *s == 127)
            return false;
    return true;
}

void tm_api_decisions_list(struct api_call *c)
{
    struct api_qp qp[] = {{.name = "kind"}, {.name = "subject_kind"}, {.name = "subject_id"}, {.name = "since_ms"}, {.name = "limit"},
                      {.name = "cursor"}};
    struct tm_spec_error err = {0};
    char cursor[24], limit[16], since[24];
    int64_t v;
    int r = tm_api_parse_query(c, qp, 6, &err);

    if (r == TM_ECANCELED) {
        tm_api_call_free(c);
        return;
    }
    if (r == 0 && qp[0].set && !printable(qp[0].value, 64))
        r = tm_spec_fail(&err, "kind", "must be a decision kind such as place or launch");
    if (r == 0 && qp[1].set) {
        bool ok = false;
        for (size_t i = 0; i < sizeof(subject_kinds) / sizeof(subject_kinds[0]); i++)
            ok = ok || strcmp(qp[1].value, subject_kinds[i]) == 0;
        if (!ok)
            r = tm_spec_fail(&err, "subject_kind",
                             "must be job, node, pool, instance, budget or provider");
    }
    if (r == 0 && qp[2].set && !printable(qp[2].value, 128))
        r = tm_spec_fail(&err, "subject_id", "must be 1-128 printable characters");
    since[0] = '\0';
    if (r == 0 && qp[3].set) {
        if (!tm_api_parse_pos(qp[3].value, INT64_MAX, &v))
            r = tm_spec_fail(&err, "since_ms", "must be a positive integer (ms since the epoch)");
        else
            fmt_i64(since, sizeof(since), v);
    }
    if (r == 0)
        r = tm_api_page_params(c, &qp[4], &qp[5], cursor, sizeof(cursor), &err);
    if (r < 0) {
        tm_api_fail_spec(c, &err);
        return;
    }
    snprintf(limit, sizeof(limit), "%u", c->limit + 1);
    const char *params[] = {qp[0].set ? qp[0].value : NULL, qp[1].set ? qp[1].value : NULL,
                            qp[2].set ? qp[2].value : NULL, since[0] ? since : NULL,
                            cursor[0] ? cursor : NULL, limit, tm_api_engineer_team(c)};
    /* An engineer does not see decisions about other teams' jobs, nor
     * about budgets other than its team's (as GET /v1/budgets). */
    tm_api_query(c,
                 "SELECT d.id, " DECISION_JSON " FROM decisions d"
                 " WHERE ($1::text IS NULL OR d.kind = $1) AND ($2::text IS NULL OR d.subject_kind = $2)"
                 " AND ($3::text IS NULL OR d.subject_id = $3) AND ($4::bigint IS NULL OR d.at_ms >= $4)"
                 " AND ($5::bigint IS NULL OR d.id < $5)"
                 " AND ($7::text IS NULL OR d.subject_kind <> 'job' OR EXISTS (SELECT 1 FROM jobs jj"
                 "   WHERE jj.id = CASE WHEN d.subject_id ~ '^[0-9]{1,18}$' THEN d.subject_id::bigint END"
                 "   AND jj.team = $7))"
              " AND ($7::text IS NULL OR d.subject_kind <> 'budget' OR d.subject_id = 'team:' || $7)"
              " ORDER BY d.id DESC LIMIT $6",
              7, params, tm_api_on_page);
}
