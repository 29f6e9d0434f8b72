/*
 * controller/replay/quota_file.c: see quota_file.h.  The file is read with
 * libyaml's document API (core/yaml_table.h), as the other table files
 * are; what the numbers may be (whole, >= 0) is tm_quota_build()'s to say.
 */
#include "controller/replay/quota_file.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "core/yaml_table.h"

void tm_replay_quota_rows_release(struct tm_replay_quota_rows *r)
{
    if (!r->rows)
        return;
    for (size_t i = 0; i < r->n; i++) {
        free((char *)r->rows[i].team);
        free((char *)r->rows[i].org);
    }
    free(r->rows);
    r->rows = NULL;
    r->n = 0;
}

static int get_number(struct tm_yaml_ctx *c, yaml_node_t *v, size_t i, const char *key, double *ret)
{
    const char *s = tm_yaml_scalar(v);
    char *end;

    if (!s || !*s)
        return tm_yaml_fail(c, v, "quotas[%zu].%s: must be a number", i, key);
    *ret = strtod(s, &end);
    if (*end || !isfinite(*ret))
        return tm_yaml_fail(c, v, "quotas[%zu].%s: \"%s\" is not a number", i, key, s);
    return 0;
}

static int get_text(struct tm_yaml_ctx *c, yaml_node_t *v, size_t i, const char *key, const char **ret)
{
    const char *s = tm_yaml_scalar(v);

    if (!s || !*s)
        return tm_yaml_fail(c, v, "quotas[%zu].%s: must be a non-empty string", i, key);
    *ret = strdup(s);
    return *ret ? 0 : TM_ENOMEM;
}

/* One entry of the list. */
static int entry(struct tm_yaml_ctx *c, yaml_node_t *n, size_t i, struct tm_quota_row *row)
{
    bool has_gpus = false;

    *row = (struct tm_quota_row){.flavor = TM_REPLAY_QUOTA_FLAVOR, .borrowing_limit = NAN,
                                 .lending_limit = NAN, .weight = NAN};
    if (n->type != YAML_MAPPING_NODE)
        return tm_yaml_fail(c, n, "quotas[%zu]: must be a mapping (team, gpus, ...)", i);
    for (yaml_node_pair_t *p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top; p++) {
        yaml_node_t *k = yaml_document_get_node(c->doc, p->key);
        yaml_node_t *v = yaml_document_get_node(c->doc, p->value);
        const char *key = tm_yaml_scalar(k);
        int r;
        if (!key)
            return tm_yaml_fail(c, k, "quotas[%zu]: keys must be strings", i);
        if (strcmp(key, "team") == 0)
            r = row->team ? tm_yaml_fail(c, k, "quotas[%zu].team: given twice", i)
                          : get_text(c, v, i, key, &row->team);
        else if (strcmp(key, "org") == 0)
            r = row->org ? tm_yaml_fail(c, k, "quotas[%zu].org: given twice", i)
                         : get_text(c, v, i, key, &row->org);
        else if (strcmp(key, "gpus") == 0) {
            r = get_number(c, v, i, key, &row->gpus);
            has_gpus = true;
        } else if (strcmp(key, "borrowing_limit") == 0)
            r = get_number(c, v, i, key, &row->borrowing_limit);
        else if (strcmp(key, "lending_limit") == 0)
            r = get_number(c, v, i, key, &row->lending_limit);
        else
            r = tm_yaml_fail(c, k, "quotas[%zu].%s: unknown field (team, gpus, borrowing_limit, "
                                   "lending_limit, org)", i, key);
        if (r < 0)
            return r;
    }
    if (!row->team)
        return tm_yaml_fail(c, n, "quotas[%zu].team: required", i);
    if (!has_gpus)
        return tm_yaml_fail(c, n, "quotas[%zu].gpus: required", i);
    return 0;
}

static int root(struct tm_yaml_ctx *c, yaml_node_t *n, void *out)
{
    struct tm_replay_quota_rows *ret = out;
    size_t cnt;

    if (!n || n->type != YAML_SEQUENCE_NODE)
        return tm_yaml_fail(c, n, "quotas: must be a list of entries (team, gpus, ...)");
    cnt = (size_t)(n->data.sequence.items.top - n->data.sequence.items.start);
    if (cnt == 0)
        return tm_yaml_fail(c, n, "quotas: the list is empty");
    ret->rows = calloc(cnt, sizeof(*ret->rows));
    if (!ret->rows)
        return TM_ENOMEM;
    for (size_t i = 0; i < cnt; i++) {
        int r = entry(c, yaml_document_get_node(c->doc, n->data.sequence.items.start[i]), i, &ret->rows[i]);
        ret->n = i + 1;
        if (r < 0) {
            tm_replay_quota_rows_release(ret);
            return r;
        }
    }
    return 0;
}

int tm_replay_quota_rows_load(const char *path, struct tm_replay_quota_rows *ret, char *err,
                              size_t errlen)
{
    return tm_yaml_table_load(path, root, ret, sizeof(*ret), err, errlen);
}

/* Team names in first-seen order, with their GPU-hours. */
static int team_hours(const struct tm_trace *t, char ***names, double **hours, size_t *n)
{
    char **nm = calloc(t->njobs + 1, sizeof(*nm));
    double *h = calloc(t->njobs + 1, sizeof(*h));
    size_t k = 0;

    if (!nm || !h) {
        free(nm);
        free(h);
        return TM_ENOMEM;
    }
    for (size_t j = 0; j < t->njobs; j++) {
        const struct tm_trace_job *tj = &t->jobs[j];
        int64_t nodes = tj->nodes > 1 ? tj->nodes : 1;
        double gpu = tj->gpus > 0 ? (double)tj->gpus * (double)nodes : (double)tj->gpu_milli / 1000.0;
        size_t i;
        if (!tj->team[0] || tj->start_ms < 0)
            continue;
        for (i = 0; i < k; i++)
            if (strcmp(nm[i], tj->team) == 0)
                break;
        if (i == k)
            nm[k++] = (char *)tj->team;
        h[i] += gpu * (double)(tj->end_ms - tj->start_ms) / 3.6e6;
    }
    *names = nm;
    *hours = h;
    *n = k;
    return 0;
}

int tm_replay_quota_rows_proportional(const struct tm_trace *t, int64_t gpus,
                                      struct tm_replay_quota_rows *ret)
{
    char **names;
    double *hours;
    int64_t *q;
    size_t n;
    int r = team_hours(t, &names, &hours, &n);

    if (r < 0)
        return r;
    q = calloc(n + 1, sizeof(*q));
    ret->rows = calloc(n + 1, sizeof(*ret->rows));
    ret->n = 0;
    r = q && ret->rows ? 0 : TM_ENOMEM;
    if (r == 0 && n == 0)
        r = TM_EINVAL;
    if (r == 0)
        tm_quota_proportional(hours, n, gpus, q);
    for (size_t i = 0; r == 0 && i < n; i++) {
        ret->rows[i] = (struct tm_quota_row){.team = strdup(names[i]), .flavor = TM_REPLAY_QUOTA_FLAVOR,
                                             .gpus = (double)q[i], .borrowing_limit = NAN,
                                             .lending_limit = NAN, .weight = NAN};
        ret->n = i + 1;
        if (!ret->rows[i].team)
            r = TM_ENOMEM;
    }
    free(names);
    free(hours);
    free(q);
    if (r < 0)
        tm_replay_quota_rows_release(ret);
    return r;
}

int tm_replay_quota_rows_strict(const struct tm_replay_quota_rows *in, struct tm_replay_quota_rows *ret)
{
    ret->rows = calloc(in->n + 1, sizeof(*ret->rows));
    ret->n = 0;
    if (!ret->rows)
        return TM_ENOMEM;
    for (size_t i = 0; i < in->n; i++) {
        ret->rows[i] = in->rows[i];
        ret->rows[i].team = strdup(in->rows[i].team);
        ret->rows[i].org = in->rows[i].org ? strdup(in->rows[i].org) : NULL;
        ret->rows[i].borrowing_limit = 0;
        ret->n = i + 1;
        if (!ret->rows[i].team || (in->rows[i].org && !ret->rows[i].org)) {
            tm_replay_quota_rows_release(ret);
            return TM_ENOMEM;
        }
    }
    return 0;
}
