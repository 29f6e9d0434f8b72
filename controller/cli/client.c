/*
 * controller/cli/client.c: see cli/client.h.
 */
#include "controller/cli/client.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <openssl/crypto.h>
#include <yaml.h>

#include "controller/cli/cli.h"
#include "core/config.h"

#define DEFAULT_URL "http://127.0.0.1:8080"
#define CLIENT_FILE_MAX (64u * 1024u)   /* a client file is a few lines */
#define TOKEN_MAX 4096

/* What the client file said; token is a secret. */
struct client_file {
    char path[1024];
    char *url;
    char *token;
    char *token_file;
    char *ca_file;
};

static void wipe_free(char *s)
{
    if (s) {
        OPENSSL_cleanse(s, strlen(s));
        free(s);
    }
}

static void client_file_release(struct client_file *f)
{
    free(f->url);
    wipe_free(f->token);
    free(f->token_file);
    free(f->ca_file);
    *f = (struct client_file){0};
}

/* A secret file (the client file holding a token, or a token_file) must be
 * private to its owner, as ssh demands of a private key. */
static int check_private(const char *cmd, const char *path, const struct stat *st, const char *what)
{
    if ((st->st_mode & 077) == 0)
        return 0;
    fprintf(stderr,
            "tarmac %s: %s %s holds a token and is readable by group or others (mode %03o); "
            "refusing to use it: run chmod 600 %s (and make a new token if others could read it)\n",
            cmd, what, path, (unsigned)(st->st_mode & 0777), path);
    return TM_EXIT_USAGE;
}

/* Read a whole small file opened as fp into a NUL-terminated buffer. */
static char *read_small(FILE *fp, size_t max, size_t *ret_len)
{
    char *buf = malloc(max + 1);
    size_t n;

    if (!buf)
        return NULL;
    n = fread(buf, 1, max + 1, fp);
    if (n > max || ferror(fp)) {
        OPENSSL_cleanse(buf, n > max ? max + 1 : n);
        free(buf);
        return NULL;
    }
    buf[n] = '\0';
    *ret_len = n;
    return buf;
}

/* A token is printable ASCII without spaces: anything else would break the
 * Authorization header (or smuggle another header into it). */
static bool token_ok(const char *t)
{
    size_t n = strlen(t);

    if (n == 0 || n > TOKEN_MAX)
        return false;
    for (; *t; t++)
        if (*t <= ' ' || *t >= 127)
            return false;
    return true;
}

static int read_token_file(const char *cmd, const char *path, char **ret_token)
{
    struct stat st;
    FILE *fp = fopen(path, "r");
    char *buf;
    size_t len = 0;
    int r;

    if (!fp) {
        fprintf(stderr, "tarmac %s: could not open token_file %s: %s\n", cmd, path, strerror(errno));
        return TM_EXIT_USAGE;
    }
    if (fstat(fileno(fp), &st) < 0 || (r = check_private(cmd, path, &st, "token_file")) != 0) {
        fclose(fp);
        return TM_EXIT_USAGE;
    }
    buf = read_small(fp, TOKEN_MAX + 2, &len);
    fclose(fp);
    if (!buf) {
        fprintf(stderr, "tarmac %s: could not read token_file %s: too large or unreadable\n", cmd, path);
        return TM_EXIT_USAGE;
    }
    while (len > 0 && (buf[len - 1] == '\n' || buf[len - 1] == '\r' || buf[len - 1] == ' '))
        buf[--len] = '\0';
    if (!token_ok(buf)) {
        fprintf(stderr, "tarmac %s: token_file %s: not a token (one line of printable characters "
                        "without spaces expected)\n", cmd, path);
        wipe_free(buf);
        return TM_EXIT_USAGE;
    }
    *ret_token = buf;
    return 0;
}

/* Parse the client file's text: one mapping of known keys to strings. */
static int parse_client_yaml(const char *cmd, const char *text, size_t len, struct client_file *f)
{
    static const char *const keys[] = {"url", "token", "token_file", "ca_file"};
    yaml_parser_t parser;
    yaml_document_t doc;
    yaml_node_t *root;
    int rc = TM_EXIT_USAGE;

    if (!yaml_parser_initialize(&parser)) {
        fprintf(stderr, "tarmac %s: out of memory\n", cmd);
        return TM_EXIT_FAIL;
    }
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    if (!yaml_parser_load(&parser, &doc)) {
        fprintf(stderr, "tarmac %s: %s:%zu: %s\n", cmd, f->path, parser.problem_mark.line + 1,
                parser.problem ? parser.problem : "not YAML");
        yaml_parser_delete(&parser);
        return TM_EXIT_USAGE;
    }
    root = yaml_document_get_root_node(&doc);
    if (!root) {
        rc = 0;   /* an empty file says nothing */
        goto out;
    }
    if (root->type != YAML_MAPPING_NODE) {
        fprintf(stderr, "tarmac %s: %s:%zu: expected a mapping of url, token, token_file, ca_file\n",
                cmd, f->path, root->start_mark.line + 1);
        goto out;
    }
    for (yaml_node_pair_t *p = root->data.mapping.pairs.start; p < root->data.mapping.pairs.top; p++) {
        yaml_node_t *k = yaml_document_get_node(&doc, p->key);
        yaml_node_t *v = yaml_document_get_node(&doc, p->value);
        char **slot = NULL;
        const char *key;

        if (!k || !v || k->type != YAML_SCALAR_NODE) {
            fprintf(stderr, "tarmac %s: %s:%zu: keys must be plain names\n", cmd, f->path,
                    k ? k->start_mark.line + 1 : 0);
            goto out;
        }
        key = (const char *)k->data.scalar.value;
        for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
            if (strcmp(key, keys[i]) == 0)
                slot = i == 0 ? &f->url : i == 1 ? &f->token : i == 2 ? &f->token_file : &f->ca_file;
        if (!slot) {
            fprintf(stderr, "tarmac %s: %s:%zu: key \"%s\": unrecognized (valid: url, token, token_file, ca_file)\n",
                    cmd, f->path, k->start_mark.line + 1, key);
            goto out;
        }
        if (*slot) {
            fprintf(stderr, "tarmac %s: %s:%zu: key \"%s\": given twice\n", cmd, f->path,
                    k->start_mark.line + 1, key);
            goto out;
        }
        if (v->type != YAML_SCALAR_NODE || v->data.scalar.length == 0 ||
            strlen((const char *)v->data.scalar.value) != v->data.scalar.length) {
            fprintf(stderr, "tarmac %s: %s:%zu: key \"%s\": must be a non-empty string\n", cmd, f->path,
                    v->start_mark.line + 1, key);
            goto out;
        }
        *slot = strdup((const char *)v->data.scalar.value);
        if (!*slot) {
            fprintf(stderr, "tarmac %s: out of memory\n", cmd);
            rc = TM_EXIT_FAIL;
            goto out;
        }
    }
    if (f->token && f->token_file) {
        fprintf(stderr, "tarmac %s: %s: give token or token_file, not both\n", cmd, f->path);
        goto out;
    }
    if (f->token && !token_ok(f->token)) {
        fprintf(stderr, "tarmac %s: %s: key \"token\": not a token (printable characters without "
                        "spaces expected)\n", cmd, f->path);
        goto out;
    }
    rc = 0;
out:
    yaml_document_delete(&doc);
    yaml_parser_delete(&parser);
    return rc;
}

/* Load the client file into *f, when there is one.  Returns 0 (also when
 * the default file does not exist) or an exit code after printing why. */
static int load_client_file(const char *cmd, struct client_file *f)
{
    const char *env = getenv("TARMAC_CLIENT_CONFIG");
    const char *home = getenv("HOME");
    struct stat st;
    FILE *fp;
    char *text;
    size_t len = 0;
    int r;

    if (env && *env)
        snprintf(f->path, sizeof(f->path), "%s", env);
    else if (home && *home)
        snprintf(f->path, sizeof(f->path), "%s/.config/tarmac/client.yaml", home);
    else
        return 0;
    fp = fopen(f->path, "r");
    if (!fp) {
        if (errno == ENOENT && !(env && *env))
            return 0;
        fprintf(stderr, "tarmac %s: could not open client config %s: %s\n", cmd, f->path, strerror(errno));
        return TM_EXIT_USAGE;
    }
    if (fstat(fileno(fp), &st) < 0 || !S_ISREG(st.st_mode)) {
        fprintf(stderr, "tarmac %s: client config %s is not a regular file\n", cmd, f->path);
        fclose(fp);
        return TM_EXIT_USAGE;
    }
    text = read_small(fp, CLIENT_FILE_MAX, &len);
    fclose(fp);
    if (!text) {
        fprintf(stderr, "tarmac %s: could not read client config %s: larger than %u bytes or unreadable\n",
                cmd, f->path, CLIENT_FILE_MAX);
        return TM_EXIT_USAGE;
    }
    r = parse_client_yaml(cmd, text, len, f);
    OPENSSL_cleanse(text, len);
    free(text);
    if (r == 0 && f->token)
        r = check_private(cmd, f->path, &st, "client config");
    if (r != 0)
        client_file_release(f);
    return r;
}

static int url_check(const char *cmd, const char *from, const char *url)
{
    if (strncmp(url, "http://", 7) == 0 || strncmp(url, "https://", 8) == 0) {
        const char *host = url + (strncmp(url, "https", 5) == 0 ? 8 : 7);
        size_t authority = strcspn(host, "/?#");

        /* user:password@ would be printed back in errors and --verbose;
         * the API takes a bearer token, never URL credentials. */
        if (memchr(host, '@', authority)) {
            fprintf(stderr, "tarmac %s: %s: a URL with credentials (user@ or user:password@) is "
                            "refused: give the token in TARMAC_TOKEN or the client file\n",
                    cmd, from);
            return TM_EXIT_USAGE;
        }
        if (*host != '\0')
            return 0;
    }
    fprintf(stderr, "tarmac %s: %s: must be an http:// or https:// URL, not \"%s\"\n", cmd, from, url);
    return TM_EXIT_USAGE;
}

/* http(s)://LISTEN of the server's configuration: the address a client on
 * this machine reaches it at. */
static int url_from_server_config(const struct tm_cli_common *c, char **ret_url)
{
    struct tm_config cfg;
    char err[512], host[256], url[512];
    const char *listen, *colon;
    size_t hl;
    int r;

    if (tm_config_load(c->config_path, &cfg, err, sizeof(err)) < 0) {
        fprintf(stderr, "tarmac %s: --config: %s\n", c->cmd, err);
        return TM_EXIT_USAGE;
    }
    if (tm_config_apply_env(&cfg, err, sizeof(err)) < 0) {
        fprintf(stderr, "tarmac %s: --config: %s\n", c->cmd, err);
        tm_config_release(&cfg);
        return TM_EXIT_USAGE;
    }
    listen = cfg.listen ? cfg.listen : "127.0.0.1:8080";
    colon = strrchr(listen, ':');
    hl = colon ? (size_t)(colon - listen) : 0;
    if (!colon || hl >= sizeof(host) || strcmp(colon + 1, "0") == 0) {
        fprintf(stderr, "tarmac %s: --config: listen \"%s\" does not say where the server is "
                        "(port 0 is picked at start); give --url\n", c->cmd, listen);
        tm_config_release(&cfg);
        return TM_EXIT_USAGE;
    }
    memcpy(host, listen, hl);
    host[hl] = '\0';
    /* A server listening on every address is reached on loopback. */
    if (hl == 0 || strcmp(host, "0.0.0.0") == 0 || strcmp(host, "*") == 0)
        snprintf(host, sizeof(host), "127.0.0.1");
    else if (strcmp(host, "::") == 0 || strcmp(host, "[::]") == 0)
        snprintf(host, sizeof(host), "[::1]");
    snprintf(url, sizeof(url), "%s://%s:%s", cfg.api.tls_cert_file ? "https" : "http", host, colon + 1);
    tm_config_release(&cfg);
    *ret_url = strdup(url);
    r = *ret_url ? 0 : TM_EXIT_FAIL;
    return r;
}

int tm_cli_endpoint_resolve(const struct tm_cli_common *c, bool need_token,
                            struct tm_cli_endpoint *ret_ep)
{
    struct tm_cli_endpoint ep = {0};
    struct client_file f = {0};
    const char *env_url = getenv("TARMAC_URL"), *env_token = getenv("TARMAC_TOKEN");
    const char *env_ca = getenv("TARMAC_CA_FILE");
    bool have_url = c->url || (env_url && *env_url);
    bool have_token = env_token && *env_token;
    int r = 0;

    *ret_ep = (struct tm_cli_endpoint){0};
    /* The client file is not read when flags and environment give the
     * URL, the token and the CA, so a broken one cannot stand in their way. */
    if (!have_url || !have_token || !(c->cacert || (env_ca && *env_ca)))
        if ((r = load_client_file(c->cmd, &f)) != 0)
            return r;

    if (c->url) {
        if ((r = url_check(c->cmd, "--url", c->url)) == 0)
            ep.url = strdup(c->url);
    } else if (env_url && *env_url) {
        if ((r = url_check(c->cmd, "TARMAC_URL", env_url)) == 0)
            ep.url = strdup(env_url);
    } else if (f.url) {
        if ((r = url_check(c->cmd, f.path, f.url)) == 0)
            ep.url = strdup(f.url);
    } else if (c->config_path) {
        r = url_from_server_config(c, &ep.url);
    } else {
        ep.url = strdup(DEFAULT_URL);
    }
    if (r != 0)
        goto fail;
    if (!ep.url) {
        r = TM_EXIT_FAIL;
        goto fail;
    }
    for (size_t n = strlen(ep.url); n > 0 && ep.url[n - 1] == '/'; n--)
        ep.url[n - 1] = '\0';

    if (have_token) {
        if (!token_ok(env_token)) {
            fprintf(stderr, "tarmac %s: TARMAC_TOKEN: not a token (printable characters without spaces "
                            "expected)\n", c->cmd);
            r = TM_EXIT_USAGE;
            goto fail;
        }
        ep.token = strdup(env_token);
    } else if (f.token) {
        ep.token = f.token;
        f.token = NULL;
    } else if (f.token_file) {
        if ((r = read_token_file(c->cmd, f.token_file, &ep.token)) != 0)
            goto fail;
    } else if (need_token) {
        fprintf(stderr, "tarmac %s: no API token: set TARMAC_TOKEN, or put token (or token_file) in %s; "
                        "an admin makes one with \"tarmac token create\"\n",
                c->cmd, f.path[0] ? f.path : "~/.config/tarmac/client.yaml");
        r = TM_EXIT_USAGE;
        goto fail;
    }
    if (have_token && !ep.token) {
        r = TM_EXIT_FAIL;
        goto fail;
    }

    if (c->cacert)
        ep.ca_file = strdup(c->cacert);
    else if (env_ca && *env_ca)
        ep.ca_file = strdup(env_ca);
    else if (f.ca_file)
        ep.ca_file = strdup(f.ca_file);
    client_file_release(&f);
    *ret_ep = ep;
    return 0;
fail:
    client_file_release(&f);
    tm_cli_endpoint_release(&ep);
    return r;
}

void tm_cli_endpoint_release(struct tm_cli_endpoint *ep)
{
    free(ep->url);
    wipe_free(ep->token);
    free(ep->ca_file);
    *ep = (struct tm_cli_endpoint){0};
}
