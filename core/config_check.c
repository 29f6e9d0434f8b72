/*
 * core/config_check.c: the rules of the configuration that span keys, the
 * spot hazard tables providers name, and normalisation.
 */
#include "core/config_internal.h"

#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sys/stat.h>

#include <openssl/crypto.h>

#include "core/bootstrap.h"
#include "core/err.h"
#include "core/file.h"
#include "core/log.h"
#include "core/spot_hazards.h"

/* ---- validation ---------------------------------------------------------- */

static const yaml_node_t *cfg_map_get(struct cfg_ctx *c, const yaml_node_t *map, const char *key)
{
    if (!map || map->type != YAML_MAPPING_NODE)
        return NULL;
    for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top;
         p++) {
        const yaml_node_t *k = tm_cfg_node(c, p->key);
        if (k->type == YAML_SCALAR_NODE && strcmp((const char *)k->data.scalar.value, key) == 0)
            return tm_cfg_node(c, p->value);
    }
    return NULL;
}

static const yaml_node_t *cfg_seq_get(struct cfg_ctx *c, const yaml_node_t *seq, size_t i)
{
    if (!seq || seq->type != YAML_SEQUENCE_NODE || i >= tm_cfg_seq_len(seq))
        return NULL;
    return tm_cfg_node(c, seq->data.sequence.items.start[i]);
}

/* The node of key inside map, or map itself when the key is absent, so a
 * message points at the nearest line that exists. */
static const yaml_node_t *cfg_at(struct cfg_ctx *c, const yaml_node_t *map, const char *key)
{
    const yaml_node_t *n = cfg_map_get(c, map, key);

    if (n)
        return n;
    return map ? map : c->root;
}

/* Listen addresses: "host:port" or "[v6]:port", port 0..65535 (0: any free port). */
bool tm_cfg_listen_ok(const char *s)
{
    const char *colon = strrchr(s, ':');
    int64_t port;

    if (!colon || colon == s || !tm_cfg_parse_i64(colon + 1, &port) || colon[1] == '+' ||
        colon[1] == '-' || port < 0 || port > 65535)
        return false;
    if (s[0] == '[')
        return colon[-1] == ']' && colon - s > 2;
    for (const char *p = s; p < colon; p++)
        if (*p == ':' || *p == '[' || *p == ']' || *p == '/' || (unsigned char)*p <= ' ')
            return false;
    return true;
}

static bool cfg_cluster_ok(const char *s)
{
    size_t n = strlen(s);

    if (n == 0 || n > 40)
        return false;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || tm_cfg_is_digit(*s) || *s == '-'))
            return false;
    return true;
}

/* Register raw[0..len) and, when it is percent-encoded, its decoded form:
 * either may end up in a log line (our own or one quoted from libpq). */
static int cfg_add_secret(const char *raw, size_t len)
{
    char *copy = tm_cfg_strndup(raw, len);
    size_t o = 0;

    if (!copy)
        return TM_ENOMEM;
    tm_log_add_secret(copy);
    for (size_t i = 0; i < len; i++) {
        int hi, lo;

        if (raw[i] == '%' && i + 2 < len &&
            (hi = OPENSSL_hexchar2int((unsigned char)raw[i + 1])) >= 0 &&
            (lo = OPENSSL_hexchar2int((unsigned char)raw[i + 2])) >= 0) {
            copy[o++] = (char)(hi * 16 + lo);
            i += 2;
        } else {
            copy[o++] = raw[i];
        }
    }
    copy[o] = '\0';
    tm_log_add_secret(copy);
    OPENSSL_cleanse(copy, len);
    free(copy);
    return 0;
}

/*
 * Find the password in a libpq connection string and register it with the
 * logger.  Both forms libpq takes are covered: URIs
 * ("postgresql://user:pw@host/db?password=pw") and keyword/value strings
 * ("host=h password='p w'").  Returns 0 or TM_ENOMEM.
 */
int tm_cfg_register_db_secret(const char *url)
{
    const char *rest = NULL;
    int r;

    if (strncmp(url, "postgresql://", 13) == 0)
        rest = url + 13;
    else if (strncmp(url, "postgres://", 11) == 0)
        rest = url + 11;

    if (rest) {
        size_t auth = strcspn(rest, "/?#");
        const char *at = NULL, *q;

        for (size_t i = 0; i < auth; i++)
            if (rest[i] == '@')
                at = rest + i;
        if (at) {
            const char *colon = memchr(rest, ':', (size_t)(at - rest));
            if (colon && at - colon > 1) {
                r = cfg_add_secret(colon + 1, (size_t)(at - colon - 1));
                if (r < 0)
                    return r;
            }
        }
        q = strchr(rest, '?');
        while (q) {
            q++;
            if (strncmp(q, "password=", 9) == 0) {
                size_t n = strcspn(q + 9, "&#");
                if (n > 0) {
                    r = cfg_add_secret(q + 9, n);
                    if (r < 0)
                        return r;
                }
            }
            q = strchr(q, '&');
        }
        return 0;
    }

    /* keyword = value pairs, values optionally single-quoted with \ escapes */
    for (const char *p = url; (p = strstr(p, "password")) != NULL; p += 8) {
        const char *v = p + 8;
        char *buf;
        size_t n = 0;

        if (p != url && p[-1] != ' ' && p[-1] != '\t')
            continue;
        while (*v == ' ' || *v == '\t')
            v++;
        if (*v != '=')
            continue;
        v++;
        while (*v == ' ' || *v == '\t')
            v++;
        buf = tm_cfg_strdup(v);
        if (!buf)
            return TM_ENOMEM;
        if (*v == '\'') {
            for (v++; *v && *v != '\''; v++) {
                if (*v == '\\' && v[1])
                    v++;
                buf[n++] = *v;
            }
        } else {
            for (; *v && *v != ' ' && *v != '\t'; v++)
                buf[n++] = *v;
        }
        buf[n] = '\0';
        tm_log_add_secret(buf);
        OPENSSL_cleanse(buf, n);
        free(buf);
    }
    return 0;
}

/* Whether kind reads key (a row of its block). */
static bool cfg_kind_has_key(const struct tm_config_kind *kind, const char *key)
{
    for (size_t o = 0; kind->block && o < kind->block->nfields; o++)
        if (strcmp(kind->block->fields[o].key, key) == 0)
            return true;
    return false;
}

/* A key of another kind, flagged CFG_KIND_ONLY, that this provider's kind
 * does not share: it would be ignored here, so it is refused under its
 * own name. */
static int cfg_validate_foreign_keys(struct cfg_ctx *c, const yaml_node_t *pn,
                                     const struct tm_config_kind *own, size_t i)
{
    for (size_t k = 0; k < tm_config_nkinds; k++) {
        const struct tm_config_kind *other = tm_config_kinds[k];
        size_t nblock = other->block ? other->block->nfields : 0;

        if (other == own)
            continue;
        for (size_t j = 0; j < nblock; j++) {
            const struct cfg_field *row = &other->block->fields[j];
            const char *key = row->key;

            if (!(row->flags & CFG_KIND_ONLY) || !cfg_map_get(c, pn, key) ||
                cfg_kind_has_key(own, key))
                continue;
            tm_cfg_path_set(c, "providers[%zu].%s", i, key);
            return tm_cfg_fail(c, cfg_at(c, pn, key), "only used by kind \"%s\", not \"%s\"",
                               other->name, own->name);
        }
    }
    return 0;
}

static int cfg_validate_providers(struct cfg_ctx *c, const struct tm_config *cfg)
{
    const yaml_node_t *list = cfg_map_get(c, c->root, "providers");

    for (size_t i = 0; i < cfg->nproviders; i++) {
        const struct tm_config_provider *p = &cfg->providers[i];
        const yaml_node_t *pn = cfg_seq_get(c, list, i);
        const yaml_node_t *tlist = cfg_map_get(c, pn, "instance_types");
        const struct tm_config_credentials *cr = &p->credentials;

        for (size_t j = 0; j < i; j++)
            if (strcmp(cfg->providers[j].name, p->name) == 0) {
                tm_cfg_path_set(c, "providers[%zu].name", i);
                return tm_cfg_fail(c, cfg_at(c, pn, "name"),
                                   "duplicate provider name \"%s\" (first used by providers[%zu])",
                                   p->name, j);
            }
        /* kind's choices are the table's names: it is there. */
        const struct tm_config_kind *kind = tm_config_kind_find(p->kind);

        if (kind->types_closed && p->ntypes == 0) {
            tm_cfg_path_set(c, "providers[%zu].instance_types", i);
            return tm_cfg_fail(c, cfg_at(c, pn, "instance_types"),
                               "a %s provider must describe at least one instance type", kind->name);
        }
        if (cfg_validate_foreign_keys(c, pn, kind, i) < 0)
            return TM_EINVAL;
        if (kind->check && kind->check(c, cfg, i) < 0)
            return TM_EINVAL;
        if (strcmp(cr->source, "file") == 0 && !cr->file) {
            tm_cfg_path_set(c, "providers[%zu].credentials.file", i);
            return tm_cfg_fail(c, cfg_at(c, cfg_map_get(c, pn, "credentials"), "file"),
                               "missing required key (credentials.source is \"file\")");
        }
        if (strcmp(cr->source, "file") != 0 && cr->file) {
            tm_cfg_path_set(c, "providers[%zu].credentials.file", i);
            return tm_cfg_fail(c, cfg_at(c, cfg_map_get(c, pn, "credentials"), "file"),
                               "only used when credentials.source is \"file\", not \"%s\"",
                               cr->source);
        }
        for (size_t t = 0; t < p->ntypes; t++) {
            const struct tm_config_instance_type *ty = &p->types[t];
            const yaml_node_t *tn = cfg_seq_get(c, tlist, t);

            for (size_t u = 0; u < t; u++)
                if (strcmp(p->types[u].name, ty->name) == 0) {
                    tm_cfg_path_set(c, "providers[%zu].instance_types[%zu].name", i, t);
                    return tm_cfg_fail(c, cfg_at(c, tn, "name"),
                                       "duplicate instance type name \"%s\" (first used by "
                                       "providers[%zu].instance_types[%zu])",
                                       ty->name, i, u);
                }
        }
    }
    return 0;
}

/* The kinds' rules that look at the pools too (their pools' zones and
 * types), once the pools themselves were checked. */
static int cfg_validate_kind_pools(struct cfg_ctx *c, const struct tm_config *cfg)
{
    for (size_t i = 0; i < cfg->nproviders; i++) {
        const struct tm_config_kind *kind = tm_config_kind_find(cfg->providers[i].kind);

        if (kind->check_pools && kind->check_pools(c, cfg, i) < 0)
            return TM_EINVAL;
    }
    return 0;
}

/* What tells an owned pool from a bought one: an owned pool buys nothing
 * (no zones, no instance types) and says what each of its nodes costs an
 * hour; a bought pool's price is its instance type's, so the owned keys
 * are refused there rather than ignored. */
static int cfg_validate_owned_keys(struct cfg_ctx *c, const struct tm_config_pool *pool,
                                   const struct tm_config_provider *prov, const yaml_node_t *pn,
                                   size_t i)
{
    static const char *const owned_only[] = {"mixed_shapes", "cost_per_node_hour",
                                             "suspended_cost_per_node_hour", "suspend_command",
                                             "resume_command", "suspend_after", "power_changes_max",
                                             "resume_timeout", "command_timeout"};
    static const char *const bought_only[] = {"zones", "instance_types"};
    bool owned = tm_config_kind_find(prov->kind)->owned;

    for (size_t k = 0; k < sizeof(owned_only) / sizeof(owned_only[0]) && !owned; k++)
        if (cfg_map_get(c, pn, owned_only[k])) {
            tm_cfg_path_set(c, "pools[%zu].%s", i, owned_only[k]);
            return tm_cfg_fail(c, cfg_at(c, pn, owned_only[k]),
                               "only used by pools of an owned provider, not kind \"%s\"",
                               prov->kind);
        }
    for (size_t k = 0; k < sizeof(bought_only) / sizeof(bought_only[0]); k++) {
        bool given = cfg_map_get(c, pn, bought_only[k]) != NULL;
        if (given == !owned)
            continue;
        tm_cfg_path_set(c, "pools[%zu].%s", i, bought_only[k]);
        if (owned)
            return tm_cfg_fail(c, cfg_at(c, pn, bought_only[k]),
                               "an owned pool buys nothing: leave %s out (kind \"%s\")",
                               bought_only[k], prov->kind);
        return tm_cfg_fail(c, pn, "missing required key");
    }
    if (!owned)
        return 0;
    if (!cfg_map_get(c, pn, "cost_per_node_hour")) {
        tm_cfg_path_set(c, "pools[%zu].cost_per_node_hour", i);
        return tm_cfg_fail(c, pn, "missing required key (an owned pool's nodes cost money even idle: "
                                  "say how much per node-hour, 0 included)");
    }
    if (!pool->gpu_model || !pool->gpus_per_node) {
        tm_cfg_path_set(c, "pools[%zu].%s", i, !pool->gpu_model ? "gpu_model" : "gpus_per_node");
        return tm_cfg_fail(c, pn, "missing required key (an owned pool declares its machines' shape)");
    }
    if (!pool->suspend_command != !pool->resume_command) {
        const char *missing = pool->suspend_command ? "resume_command" : "suspend_command";
        tm_cfg_path_set(c, "pools[%zu].%s", i, missing);
        return tm_cfg_fail(c, pn, "missing required key (power saving needs both suspend_command "
                                  "and resume_command)");
    }
    if (strcmp(pool->capacity_type, "on_demand") != 0) {
        tm_cfg_path_set(c, "pools[%zu].capacity_type", i);
        return tm_cfg_fail(c, cfg_at(c, pn, "capacity_type"),
                           "an owned pool's machines are not spot: \"on_demand\" or leave it out");
    }
    if (pool->bootstrap_file) {
        tm_cfg_path_set(c, "pools[%zu].bootstrap", i);
        return tm_cfg_fail(c, cfg_at(c, pn, "bootstrap"),
                           "an owned pool launches nothing: its machines join (tarmac agent --join)");
    }
    return 0;
}

static int cfg_validate_pools(struct cfg_ctx *c, const struct tm_config *cfg)
{
    const yaml_node_t *list = cfg_map_get(c, c->root, "pools");

    for (size_t i = 0; i < cfg->npools; i++) {
        const struct tm_config_pool *pool = &cfg->pools[i];
        const yaml_node_t *pn = cfg_seq_get(c, list, i);
        const struct tm_config_provider *prov;

        for (size_t j = 0; j < i; j++)
            if (strcmp(cfg->pools[j].name, pool->name) == 0) {
                tm_cfg_path_set(c, "pools[%zu].name", i);
                return tm_cfg_fail(c, cfg_at(c, pn, "name"),
                                   "duplicate pool name \"%s\" (first used by pools[%zu])",
                                   pool->name, j);
            }
        prov = tm_config_provider_find(cfg, pool->provider);
        if (!prov) {
            tm_cfg_path_set(c, "pools[%zu].provider", i);
            return tm_cfg_fail(c, cfg_at(c, pn, "provider"), "unknown provider \"%s\"",
                               pool->provider);
        }
        if (cfg_validate_owned_keys(c, pool, prov, pn, i) < 0)
            return TM_EINVAL;
        if (pool->min_nodes > pool->max_nodes) {
            tm_cfg_path_set(c, "pools[%zu].max_nodes", i);
            return tm_cfg_fail(c, cfg_at(c, pn, "max_nodes"), "must be at least min_nodes (%d)",
                               pool->min_nodes);
        }
        for (size_t t = 0; t < pool->ninstance_types; t++) {
            const char *tname = pool->instance_types[t];
            const struct tm_config_instance_type *ty = tm_config_type_find(prov, tname);
            const yaml_node_t *tn = cfg_seq_get(c, cfg_map_get(c, pn, "instance_types"), t);

            if (!tn)
                tn = cfg_at(c, pn, "instance_types");
            tm_cfg_path_set(c, "pools[%zu].instance_types[%zu]", i, t);
            if (!ty) {
                /* A cloud provider may offer types the file does not
                 * describe; a simulated one knows only what it is told. */
                if (tm_config_kind_find(prov->kind)->types_closed)
                    return tm_cfg_fail(c, tn, "unknown instance type \"%s\" for provider \"%s\"",
                                       tname, prov->name);
                continue;
            }
            if (pool->gpu_model && strcmp(pool->gpu_model, ty->gpu_model) != 0)
                return tm_cfg_fail(c, tn,
                                   "instance type \"%s\" has GPU model \"%s\", but the pool's "
                                   "gpu_model is \"%s\"",
                                   tname, ty->gpu_model, pool->gpu_model);
            if (pool->gpus_per_node && pool->gpus_per_node != ty->gpus)
                return tm_cfg_fail(c, tn,
                                   "instance type \"%s\" has %d GPUs, but the pool's gpus_per_node "
                                   "is %d",
                                   tname, ty->gpus, pool->gpus_per_node);
            /* A pool limited to spot must be able to buy spot. */
            if (strcmp(pool->capacity_type, "spot") == 0 && ty->spot_uusd_per_hour == 0)
                return tm_cfg_fail(c, tn,
                                   "instance type \"%s\" offers no spot capacity (spot_price is 0)",
                                   tname);
            /* Types described for one pool must also agree with each
             * other, or the pool would not be one shape of node. */
            if (!pool->gpu_model || !pool->gpus_per_node) {
                for (size_t u = 0; u < t; u++) {
                    const struct tm_config_instance_type *other =
                        tm_config_type_find(prov, pool->instance_types[u]);
                    if (other && (strcmp(other->gpu_model, ty->gpu_model) != 0 ||
                                  other->gpus != ty->gpus))
                        return tm_cfg_fail(c, tn,
                                           "instance type \"%s\" (%d x %s) differs from \"%s\" "
                                           "(%d x %s); give the pool one GPU shape",
                                           tname, ty->gpus, ty->gpu_model, other->name, other->gpus,
                                           other->gpu_model);
                }
            }
        }
    }
    return 0;
}

/* The node agents' bootstraps: each pool's template and agent.ca_file are
 * read now, and a template that, filled with the longest values, could
 * pass EC2's user data limit once base64-encoded is refused under its
 * key.  A template needs agent.controller_url. */
static int cfg_load_bootstraps(struct cfg_ctx *c, struct tm_config *cfg)
{
    const yaml_node_t *list = cfg_map_get(c, c->root, "pools");
    const yaml_node_t *agent = cfg_map_get(c, c->root, "agent");
    char why[512];
    size_t ca_len = 0;
    int r;

    if (cfg->agent.ca_file) {
        r = tm_file_read(cfg->agent.ca_file, 64 * 1024, &cfg->agent.ca_pem, &ca_len, why, sizeof(why));
        if (r == TM_ENOMEM)
            return tm_cfg_nomem(c);
        if (r < 0) {
            tm_cfg_path_set(c, "agent.ca_file");
            return tm_cfg_fail(c, cfg_at(c, agent, "ca_file"), "%s", why);
        }
    }
    if (cfg->agent.controller_url && strncmp(cfg->agent.controller_url, "http://", 7) != 0 &&
        strncmp(cfg->agent.controller_url, "https://", 8) != 0) {
        tm_cfg_path_set(c, "agent.controller_url");
        return tm_cfg_fail(c, cfg_at(c, agent, "controller_url"), "expected an http:// or https:// URL");
    }
    if (cfg->agent.controller_url && strlen(cfg->agent.controller_url) > TM_BOOTSTRAP_VALUE_MAX) {
        tm_cfg_path_set(c, "agent.controller_url");
        return tm_cfg_fail(c, cfg_at(c, agent, "controller_url"), "longer than %d bytes",
                           TM_BOOTSTRAP_VALUE_MAX);
    }
    for (size_t i = 0; i < cfg->npools; i++) {
        struct tm_config_pool *p = &cfg->pools[i];
        const yaml_node_t *pn = cfg_seq_get(c, list, i);
        size_t most;

        if (!p->bootstrap_file)
            continue;
        tm_cfg_path_set(c, "pools[%zu].bootstrap", i);
        r = tm_file_read(p->bootstrap_file, 1024 * 1024, &p->bootstrap, &p->bootstrap_len, why,
                         sizeof(why));
        if (r == TM_ENOMEM)
            return tm_cfg_nomem(c);
        if (r < 0)
            return tm_cfg_fail(c, cfg_at(c, pn, "bootstrap"), "%s", why);
        most = tm_bootstrap_base64_len(tm_bootstrap_max_filled(p->bootstrap, p->bootstrap_len, ca_len));
        if (most > TM_BOOTSTRAP_USERDATA_MAX)
            return tm_cfg_fail(c, cfg_at(c, pn, "bootstrap"),
                               "%s: filled and base64-encoded it could reach %zu bytes, past EC2's "
                               "user data limit of %d",
                               p->bootstrap_file, most, TM_BOOTSTRAP_USERDATA_MAX);
        if (!cfg->agent.controller_url)
            return tm_cfg_fail(c, cfg_at(c, pn, "bootstrap"),
                               "a bootstrap template needs agent.controller_url");
    }
    return 0;
}

/* Read each provider's spot_hazards table.  Its own errors ("FILE:LINE:
 * reason", or the file that could not be opened) are given under the key
 * that named it, so the operator sees both files.  A table that names
 * none of the provider's pools' (type, zone) cells is not an error: those
 * pools keep their spot_hazard (tm_config_spot_hazard). */
static int cfg_load_spot_hazards(struct cfg_ctx *c, struct tm_config *cfg)
{
    const yaml_node_t *list = cfg_map_get(c, c->root, "providers");

    for (size_t i = 0; i < cfg->nproviders; i++) {
        struct tm_config_provider *p = &cfg->providers[i];
        char why[512];
        int r;

        if (!p->spot_hazards_file)
            continue;
        /* A table is a file: a FIFO, a device or a directory would block
         * the load or make no sense (stat does not open it). */
        struct stat st;
        if (stat(p->spot_hazards_file, &st) == 0 && !S_ISREG(st.st_mode)) {
            tm_cfg_path_set(c, "providers[%zu].spot_hazards", i);
            return tm_cfg_fail(c, cfg_at(c, cfg_seq_get(c, list, i), "spot_hazards"),
                               "%s: not a regular file", p->spot_hazards_file);
        }
        p->spot_hazards = tm_cfg_calloc(1, sizeof(*p->spot_hazards));
        if (!p->spot_hazards)
            return tm_cfg_nomem(c);
        r = tm_spot_hazards_load(p->spot_hazards_file, p->spot_hazards, why, sizeof(why));
        if (r == TM_ENOMEM)
            return tm_cfg_nomem(c);
        if (r < 0) {
            /* -errno too: a table that cannot be read is a bad value of
             * the key, not an I/O failure of the configuration file. */
            tm_cfg_path_set(c, "providers[%zu].spot_hazards", i);
            return tm_cfg_fail(c, cfg_at(c, cfg_seq_get(c, list, i), "spot_hazards"), "%s", why);
        }
    }
    return 0;
}

/* The bound for nodes that cannot be fenced is a stronger wait than the
 * requeue of fenced ones: below it, an unfenceable node's jobs would be
 * placed again sooner than a cloud node's, whose instance is gone first. */
static int cfg_validate_fence(struct cfg_ctx *c, const struct tm_config *cfg)
{
    const struct tm_config_agent *ag = &cfg->agent;

    if (ag->fence_after_ms < ag->requeue_after_ms) {
        const yaml_node_t *an = cfg_map_get(c, c->root, "agent");
        tm_cfg_path_set(c, "agent.fence_after");
        return tm_cfg_fail(c, an ? cfg_at(c, an, "fence_after") : c->root,
                           "must be at least agent.requeue_after (%lld s)",
                           (long long)(ag->requeue_after_ms / 1000));
    }
    return 0;
}

/* The rendezvous ports: a range of at least one port. */
static int cfg_validate_rendezvous(struct cfg_ctx *c, const struct tm_config *cfg)
{
    const struct tm_config_agent *ag = &cfg->agent;

    if (ag->rendezvous_port_max < ag->rendezvous_port_min) {
        const yaml_node_t *an = cfg_map_get(c, c->root, "agent");
        tm_cfg_path_set(c, "agent.rendezvous_port_max");
        return tm_cfg_fail(c, an ? cfg_at(c, an, "rendezvous_port_max") : c->root,
                           "must be at least agent.rendezvous_port_min (%d)", ag->rendezvous_port_min);
    }
    return 0;
}

/* logs.s3: checked when logs.store is s3, so that a bad bucket fails at
 * load and not at the first chunk.  The prefix and the bucket are kept to
 * what needs no %-encoding in a path. */
static int cfg_fail_logs_s3(struct cfg_ctx *c, const char *key, const char *why)
{
    const yaml_node_t *ln = cfg_map_get(c, c->root, "logs");
    const yaml_node_t *sn = ln ? cfg_map_get(c, ln, "s3") : NULL;
    const yaml_node_t *at = sn ? cfg_map_get(c, sn, key) : NULL;

    tm_cfg_path_set(c, "logs.s3.%s", key);
    return tm_cfg_fail(c, at ? at : sn ? sn : ln ? ln : c->root, "%s", why);
}

static int cfg_validate_logs_s3(struct cfg_ctx *c, const struct tm_config *cfg)
{
    const struct tm_config_logs_s3 *s3 = &cfg->logs.s3;
    const char *b = s3->bucket, *e = s3->endpoint, *p = s3->prefix ? s3->prefix : "";
    size_t n;

    if (!cfg->logs.store || strcmp(cfg->logs.store, "s3") != 0)
        return 0;
    if (!b)
        return cfg_fail_logs_s3(c, "bucket", "missing required key (logs.store is s3)");
    n = strlen(b);
    if (n < 3 || n > 63 || strspn(b, "abcdefghijklmnopqrstuvwxyz0123456789.-") != n ||
        !isalnum((unsigned char)b[0]) || !isalnum((unsigned char)b[n - 1]))
        return cfg_fail_logs_s3(c, "bucket", "expected 3 to 63 of a-z 0-9 . -, starting and ending "
                                             "with a letter or digit");
    if (e) {
        const char *host = !strncmp(e, "https://", 8) ? e + 8 : !strncmp(e, "http://", 7) ? e + 7 : NULL;

        if (!host || !*host || strpbrk(host, "?#@ ") || (strchr(host, '/') && strchr(host, '/')[1]))
            return cfg_fail_logs_s3(c, "endpoint", "expected http:// or https:// and a host[:port], "
                                                   "no path (the bucket goes in the path)");
    }
    if (s3->region && (!*s3->region || strlen(s3->region) > 64 ||
                       strspn(s3->region, "abcdefghijklmnopqrstuvwxyz0123456789-") != strlen(s3->region)))
        return cfg_fail_logs_s3(c, "region", "expected a region name such as us-east-1");
    if (strlen(p) > 256 || p[0] == '/' ||
        strspn(p, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789/._-") != strlen(p))
        return cfg_fail_logs_s3(c, "prefix", "expected at most 256 of A-Z a-z 0-9 / . _ -, not "
                                             "starting with /");
    return 0;
}

int tm_cfg_validate(struct cfg_ctx *c, struct tm_config *cfg)
{
    const char *env_url = getenv("TARMAC_DATABASE_URL");
    const yaml_node_t *db = cfg_map_get(c, c->root, "database");
    int r;

    if (!cfg_cluster_ok(cfg->cluster)) {
        tm_cfg_path_set(c, "cluster");
        return tm_cfg_fail(c, cfg_at(c, c->root, "cluster"),
                           "bad cluster tag \"%.64s\": expected 1 to 40 of a-z 0-9 -", cfg->cluster);
    }
    if (!tm_cfg_listen_ok(cfg->listen)) {
        tm_cfg_path_set(c, "listen");
        return tm_cfg_fail(c, cfg_at(c, c->root, "listen"),
                           "bad address \"%.128s\": expected host:port with port 0 to 65535",
                           cfg->listen);
    }
    if (!cfg->database_url && !(env_url && *env_url)) {
        tm_cfg_path_set(c, "database.url");
        return tm_cfg_fail(c, db ? db : c->root,
                           "missing required key (or set TARMAC_DATABASE_URL)");
    }
    if (!cfg->api.tls_cert_file != !cfg->api.tls_key_file) {
        const yaml_node_t *api = cfg_map_get(c, c->root, "api");

        tm_cfg_path_set(c, cfg->api.tls_cert_file ? "api.tls_key_file" : "api.tls_cert_file");
        return tm_cfg_fail(c, api ? api : c->root,
                           "missing: TLS needs both tls_cert_file and tls_key_file");
    }
    if (cfg->alerts.webhook_url) {
        const char *u = cfg->alerts.webhook_url;

        if (strncmp(u, "http://", 7) != 0 && strncmp(u, "https://", 8) != 0) {
            tm_cfg_path_set(c, "alerts.webhook_url");
            return tm_cfg_fail(c, cfg_at(c, cfg_map_get(c, c->root, "alerts"), "webhook_url"),
                               "expected an http:// or https:// URL");
        }
        /* Webhook URLs carry their credential in the path (Slack, Teams):
         * the whole URL is a secret. */
        if (cfg_add_secret(u, strlen(u)) < 0)
            return tm_cfg_nomem(c);
    }
    r = cfg_validate_fence(c, cfg);
    if (r == 0)
        r = cfg_validate_rendezvous(c, cfg);
    if (r == 0)
        r = cfg_validate_logs_s3(c, cfg);
    if (r < 0)
        return r;
    if (cfg->agent.no_show_backoff_max_ms < cfg->agent.no_show_backoff_ms) {
        tm_cfg_path_set(c, "agent.no_show_backoff_max");
        return tm_cfg_fail(c, cfg_at(c, cfg_map_get(c, c->root, "agent"), "no_show_backoff_max"),
                           "shorter than agent.no_show_backoff");
    }
    r = cfg_validate_providers(c, cfg);
    if (r < 0)
        return r;
    r = cfg_validate_pools(c, cfg);
    if (r == 0)
        r = tm_cfg_check_reservations(c, cfg);
    if (r == 0)
        r = cfg_validate_kind_pools(c, cfg);
    if (r < 0)
        return r;
    r = cfg_load_spot_hazards(c, cfg);
    if (r < 0)
        return r;
    r = cfg_load_bootstraps(c, cfg);
    if (r < 0)
        return r;
    if (cfg->database_url) {
        r = tm_cfg_register_db_secret(cfg->database_url);
        if (r < 0)
            return tm_cfg_nomem(c);
    }
    tm_cfg_path_set(c, "%s", "");
    return 0;
}

/* A pool group is one queue over its members' clouds: the planner packs
 * the group's work into any member's types, so every member must hold
 * the same GPU model in nodes of the same size.  Runs after normalise()
 * filled gpu_model and gpus_per_node; names the later member's group key. */
static int cfg_check_groups(struct cfg_ctx *c, const struct tm_config *cfg)
{
    const yaml_node_t *list = cfg_map_get(c, c->root, "pools");

    for (size_t i = 0; i < cfg->npools; i++) {
        const struct tm_config_pool *pool = &cfg->pools[i];
        const yaml_node_t *pn = cfg_seq_get(c, list, i);
        if (!pool->group)
            continue;
        for (size_t j = 0; j < i; j++) {
            const struct tm_config_pool *first = &cfg->pools[j];
            if (!first->group || strcmp(first->group, pool->group) != 0)
                continue;
            tm_cfg_path_set(c, "pools[%zu].group", i);
            if (strcmp(first->gpu_model, pool->gpu_model) != 0)
                return tm_cfg_fail(c, cfg_at(c, pn, "group"),
                                   "pool group \"%s\" mixes GPU models: \"%s\" here, \"%s\" in "
                                   "pools[%zu] (%s)",
                                   pool->group, pool->gpu_model, first->gpu_model, j, first->name);
            if (first->gpus_per_node != pool->gpus_per_node)
                return tm_cfg_fail(c, cfg_at(c, pn, "group"),
                                   "pool group \"%s\" mixes node sizes: %d GPUs per node here, %d "
                                   "in pools[%zu] (%s)",
                                   pool->group, pool->gpus_per_node, first->gpus_per_node, j,
                                   first->name);
            break;
        }
    }
    return 0;
}

/* An owned pool's zones and instance_types: ["owned"] each, what its
 * nodes record (the tables want one) and nothing ever buys. */
static int cfg_owned_placeholders(struct tm_config_pool *pool)
{
    char ***lists[] = {&pool->zones, &pool->instance_types};
    size_t *counts[] = {&pool->nzones, &pool->ninstance_types};

    for (size_t k = 0; k < 2; k++) {
        if (*counts[k])
            continue;
        char **l = calloc(1, sizeof(*l));
        char *v = tm_cfg_strdup("owned");
        if (!l || !v) {
            free(l);
            free(v);
            return TM_ENOMEM;
        }
        l[0] = v;
        *lists[k] = l;
        *counts[k] = 1;
    }
    return 0;
}

/* Fill what a pool may leave to the instance types its provider
 * describes, and each provider's boot time from its kind. */
int tm_cfg_normalise(struct cfg_ctx *c, struct tm_config *cfg)
{
    const yaml_node_t *list = cfg_map_get(c, c->root, "pools");

    for (size_t i = 0; i < cfg->nproviders; i++) {
        struct tm_config_provider *p = &cfg->providers[i];
        const struct tm_config_kind *kind = tm_config_kind_find(p->kind);

        p->boot_ms = kind->boot_ms ? kind->boot_ms(p) : TM_CONFIG_BOOT_MS_DEFAULT;
        /* Nothing can terminate an owned machine, so nothing fences it:
         * its silent nodes' jobs wait agent.fence_after. */
        p->owned = kind->owned;
        if (p->owned)
            p->fence = false;
    }

    for (size_t i = 0; i < cfg->npools; i++) {
        struct tm_config_pool *pool = &cfg->pools[i];
        const struct tm_config_provider *prov = tm_config_provider_find(cfg, pool->provider);
        const struct tm_config_instance_type *ty = NULL;
        const yaml_node_t *pn = cfg_seq_get(c, list, i);

        pool->owned = prov->owned;
        if (pool->owned && cfg_owned_placeholders(pool) < 0)
            return tm_cfg_nomem(c);
        for (size_t t = 0; t < pool->ninstance_types && !ty; t++)
            ty = tm_config_type_find(prov, pool->instance_types[t]);
        if (!pool->gpu_model) {
            if (!ty) {
                tm_cfg_path_set(c, "pools[%zu].gpu_model", i);
                return tm_cfg_fail(c, pn,
                                   "missing required key (provider \"%s\" describes none of the "
                                   "pool's instance types)",
                                   prov->name);
            }
            pool->gpu_model = tm_cfg_strdup(ty->gpu_model);
            if (!pool->gpu_model)
                return tm_cfg_nomem(c);
        }
        if (!pool->gpus_per_node) {
            if (!ty) {
                tm_cfg_path_set(c, "pools[%zu].gpus_per_node", i);
                return tm_cfg_fail(c, pn,
                                   "missing required key (provider \"%s\" describes none of the "
                                   "pool's instance types)",
                                   prov->name);
            }
            pool->gpus_per_node = ty->gpus;
        }
        if (!cfg_map_get(c, pn, "spot_hazard"))
            pool->spot_hazard_per_hour = prov->spot_hazard_per_hour;
        if (!cfg_map_get(c, pn, "spot_notice"))
            pool->spot_notice_ms = prov->spot_notice_ms;
        pool->disruption_limited = cfg_map_get(c, pn, "disruption_nodes") ||
                                   cfg_map_get(c, pn, "disruption_pct");
        pool->consolidate_restart_set = cfg_map_get(c, pn, "consolidate_restart") != NULL;
    }
    int r = cfg_check_groups(c, cfg);
    return r < 0 ? r : tm_cfg_check_pool_groups(c, cfg);
}
